#!/bin/bash
# test_tokenizer_tiktoken.sh — a model directory with tiktoken.model (Kimi
# K2's tokenizer form) gives the token ids js-tiktoken gives with the same
# ranks, special tokens and Kimi's split pattern, on every string of
# tests/data/tokenizer_corpus.jsonl (tiktoken_ref.mjs says how the directory
# is made: o200k_base's ranks, since no Kimi vocabulary can be fetched).
# Then the loader's refusals: another tokenizer class, broken lines.
set -euo pipefail
SRC=${EA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${EAAS_BIN:-$SRC/build/eaas}
CORPUS=$SRC/tests/data/tokenizer_corpus.jsonl
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
D=$OUT/kimi
node "$SRC/tests/golden/tiktoken_ref.mjs" write "$D"
"$BIN" tokenize --model "$D" --input-jsonl "$CORPUS" --no-special --split-special > "$OUT/split"
"$BIN" tokenize --model "$D" --input-jsonl "$CORPUS" > "$OUT/special"
rc=0
node "$SRC/tests/golden/tiktoken_ref.mjs" check "$D" "$CORPUS" "$OUT/split" "$OUT/special" || rc=1

pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1" >&2; fi; }
ids=$("$BIN" tokenize --model "$D" --json "<|im_user|>user<|im_middle|>Hello 世界 😀<|im_end|>")
check "nothing added, specials recognised" '[ "${ids:0:8}" = "[200001," ]'
check "detokenize round trip" \
  '[ "$("$BIN" detokenize --model "$D" "$ids")" = "<|im_user|>user<|im_middle|>Hello 世界 😀<|im_end|>" ]'
check "skip special" '[ "$("$BIN" detokenize --model "$D" --skip-special "$ids")" = "userHello 世界 😀" ]'
ids=$("$BIN" tokenize --model "$D" --json "<|tool_calls_section_begin|><think>x</think>[EOS]")
check "tool markers and think are text on output" \
  '[ "$("$BIN" detokenize --model "$D" --skip-special "$ids")" = "<|tool_calls_section_begin|><think>x</think>" ]'
# another tiktoken class: its split pattern is unknown
B=$OUT/other; mkdir -p "$B"; cp "$D/tiktoken.model" "$B/"
echo '{"auto_map": {"AutoTokenizer": ["tokenization_qwen.QWenTokenizer", null]}}' > "$B/tokenizer_config.json"
"$BIN" tokenize --model "$B" x 2> "$OUT/err" && st=0 || st=$?
check "other class refused" '[ "$st" = 1 ] && grep -q "tokenization_qwen.QWenTokenizer. is not supported" "$OUT/err"'
# broken files name the line: refused NAME FILE_TEXT ERROR_TEXT
cp "$D/tokenizer_config.json" "$B/"
refused() {
  local want=$3
  printf "$2" > "$B/tiktoken.model"
  "$BIN" tokenize --model "$B" x 2> "$OUT/err" && st=0 || st=$?
  check "$1" '[ "$st" = 1 ] && grep -q "$want" "$OUT/err"'
}
refused "repeated rank" 'IQ== 0\nIg== 0\n' "tiktoken.model: line 2: rank 0 repeats"
refused "bad base64" 'IQ== 0\nnot-base64! 1\n' "line 2: the token is not base64"
refused "rank out of range" 'IQ== 0\nIg== 5\n' "line 2: rank 5 is out of range"
refused "no rank" 'IQ==\n' "line 1: expected"
echo "cli: $pass passed, $fail failed"
[ $fail = 0 ] || rc=1
exit $rc
