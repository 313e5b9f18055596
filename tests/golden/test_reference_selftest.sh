#!/usr/bin/env bash
# test_reference_selftest.sh -- the NumPy reference forward pass checks itself.
#
# Runs tests/reference/selftest.py with Debian's interpreter (python3-numpy):
# tiny random models of every family, KV-cache decode == recomputation,
# prefix/chunked-prefill consistency, BF16/F16/sharded readers, hand-computed
# routing and RoPE cases, malformed files. Fails on any mismatch.
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
