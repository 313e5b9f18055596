#!/usr/bin/env bash
# test_reference_selftest.sh -- the NumPy reference forward pass checks itself.
#
# 1. tests/reference/selftest.py with Debian's interpreter (python3-numpy):
#    tiny random models of every family built in numpy, KV-cache decode ==
#    recomputation, prefix/chunked-prefill consistency, BF16/F16/sharded
#    readers, hand-computed routing and RoPE cases, malformed files.
# 2. If $EAAS_BIN is built: `eaas make-model --preset tiny` for every family;
#    the reference must load each (names, shapes, config fields agree), give
#    finite logits, and the same greedy tokens with and without its KV cache.
set -euo pipefail
src="${EA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}"
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
  echo "test_reference_selftest: $py has no numpy (apt-get install python3-numpy)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
out=$(timeout 120 "$py" "$src/tests/reference/selftest.py" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
echo "$out" | tail -n 1 | grep -Eq '^[0-9]+ passed, 0 failed$'

pass=0 fail=0
if [ -n "${EAAS_BIN:-}" ] && [ -x "$EAAS_BIN" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  toks=1,22,333,4444,55555,6,77,888,9999,10,11,12,13,14,15,16
  for fam in qwen3_moe qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3; do
    if ! "$EAAS_BIN" make-model --family "$fam" --preset tiny --seed 1 --format hf \
         --dtype f32 --out "$tmp/$fam" >"$tmp/$fam.log" 2>&1; then
      echo "FAIL: make-model $fam: $(tail -n 1 "$tmp/$fam.log")"; fail=$((fail + 1)); continue
    fi
    a=$(timeout 120 "$py" "$src/tests/reference/ref_forward.py" --model "$tmp/$fam" \
          --tokens "$toks" --greedy 6 2>&1) || { echo "FAIL: $fam: $a"; fail=$((fail + 1)); continue; }
    b=$(timeout 120 "$py" "$src/tests/reference/ref_forward.py" --model "$tmp/$fam" \
          --tokens "$toks" --greedy 6 --no-cache 2>&1) || { echo "FAIL: $fam: $b"; fail=$((fail + 1)); continue; }
    if echo "$a" | grep -q '"finite": true' && [ "$a" = "$b" ]; then
      pass=$((pass + 1))
    else
      echo "FAIL: $fam: $a / $b"; fail=$((fail + 1))
    fi
  done
  echo "make-model models: $pass passed, $fail failed"
else
  echo "make-model models: skipped (EAAS_BIN not built)"
fi
[ "$fail" -eq 0 ]
