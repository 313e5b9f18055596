#!/usr/bin/env bash
# test_serve_structured.sh — structured outputs (response_format json_schema /
# json_object, guided_json, guided_choice, guided_regex) on a tiny random-weight
# qwen3_moe model through the official `openai` npm client, outputs validated
# with ajv: structured_outputs.mjs has the checks.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

serve_test_init
make_tiny_model "$tmp/model"
start_server "$tmp/log" --model "$tmp/model" --served-model-name tiny --threads 2 --max-running 64 \
  --max-batch-tokens 512 || exit 1
if EA_SRC="$EA_SRC" node "$here/structured_outputs.mjs" "http://127.0.0.1:$PORT/v1" tiny >"$tmp/node.out" 2>"$tmp/node.err"; then
  ok "structured outputs: $(tail -1 "$tmp/node.out")"
else
  bad "structured outputs: $(tail -1 "$tmp/node.out" 2>/dev/null)"
fi
cat "$tmp/node.err" | sed 's/^/  node: /' >&2
grep -v ' passed, ' "$tmp/node.out" | sed 's/^/  /' >&2
serve_test_summary
