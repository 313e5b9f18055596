#!/bin/bash
# test_convert_fp8.sh — FP8 checkpoints (DeepSeek-V3's layout: F8_E4M3 weights
# with block scales "*_scale_inv", quantization_config in config.json). The
# loader refuses one, naming the tensor and the command; `eaas convert-fp8`
# writes a bf16 copy whose every weight is the NumPy reference's
# e4m3(code) * scale rounded to bf16 (tests/reference/fp8_ref.py), copies the
# rest, and the copy loads and generates. The FP8 model is quantized from a
# tiny deepseek_v3 in blocks of [16, 8] (not square, several per matrix).
set -uo pipefail
SRC=${EA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${EAAS_BIN:-$SRC/build/eaas}
PY=/usr/bin/python3 # Debian's interpreter, with python3-numpy
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1" >&2; fi; }

"$BIN" make-model --family deepseek_v3 --preset tiny --seed 3 --format hf --out "$T/bf" >/dev/null
$PY "$SRC/tests/reference/fp8_ref.py" quantize "$T/bf" "$T/fp8" 16 8

"$BIN" inspect "$T/fp8" >/dev/null 2>"$T/err" && st=0 || st=$?
check "the loader refuses FP8, naming a tensor and the command" \
  '[ "$st" = 1 ] && grep -q "_proj.weight.: dtype F8_E4M3 (an FP8 checkpoint)" "$T/err" && grep -q "eaas convert-fp8 --model" "$T/err"'

"$BIN" convert-fp8 --model "$T/fp8" --out "$T/conv" > "$T/out" 2>"$T/err" && st=0 || st=$?
check "convert-fp8 exits 0" '[ "$st" = 0 ]'
check "convert-fp8 prints its counts" 'grep -q "\"dequantized\": [1-9][0-9]*, \"copied\": [1-9]" "$T/out"'
if $PY "$SRC/tests/reference/fp8_ref.py" check "$T/fp8" "$T/conv" > "$T/ref" 2>"$T/referr"; then
  check "every weight == NumPy's e4m3 * scale in bf16: $(tail -1 "$T/ref")" true
else
  cat "$T/referr" >&2; check "reference comparison: $(tail -1 "$T/ref")" false
fi
check "the copy loads" '"$BIN" inspect "$T/conv" > "$T/insp" && grep -q "deepseek_v3" "$T/insp"'
check "the copy generates" \
  '"$BIN" generate --model "$T/conv" --prompt "Hello" --max-tokens 4 --temperature 0 > "$T/gen" 2>&1'

"$BIN" convert-fp8 --model "$T/fp8" --out "$T/conv2" --shards 2 >/dev/null 2>&1
check "--shards 2: the same tensors" \
  '$PY "$SRC/tests/reference/fp8_ref.py" check "$T/fp8" "$T/conv2" > /dev/null 2>&1 && [ -f "$T/conv2/model.safetensors.index.json" ]'

"$BIN" convert-fp8 --model "$T/fp8" --out "$T/conv" > /dev/null 2>"$T/err" && st=0 || st=$?
check "an output holding a model is refused" '[ "$st" = 1 ] && grep -q "already holds a model" "$T/err"'
"$BIN" convert-fp8 --model "$T/bf" --out "$T/x" > /dev/null 2>"$T/err" && st=0 || st=$?
check "a bf16 model is not an FP8 checkpoint" '[ "$st" = 1 ] && grep -q "not an FP8 checkpoint" "$T/err"'
$PY - "$T/fp8" "$T/noscale" <<'PY'
import json, os, shutil, sys
sys.path.insert(0, os.path.join(os.environ.get("EA_SRC", "."), "tests/reference"))
import fp8_ref
src, dst = sys.argv[1], sys.argv[2]
shutil.copytree(src, dst)
t = fp8_ref.read_dir(src)
victim = sorted(n for n in t if n.endswith("_scale_inv"))[0]
del t[victim]
fp8_ref.write_file(os.path.join(dst, "model.safetensors"), t)
print(victim[: -len("_scale_inv")])
PY
"$BIN" convert-fp8 --model "$T/noscale" --out "$T/y" > /dev/null 2>"$T/err" && st=0 || st=$?
check "an FP8 weight without its scale is named" '[ "$st" = 1 ] && grep -q "F8_E4M3 weight without its scale" "$T/err"'
echo "$pass passed, $fail failed"
[ $fail = 0 ]
