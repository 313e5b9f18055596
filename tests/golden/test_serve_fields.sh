#!/usr/bin/env bash
# test_serve_fields.sh — the request fields of issue 23 (n, batched prompts, echo,
# logit_bias, ignore_eos, repetition_penalty, chat_template_kwargs,
# continue_final_message, tools / tool_choice, reasoning) through the official
# `openai` npm client (serve_fields.mjs) against `eaas serve` on tiny random
# models: a qwen3_moe with --reasoning-parser qwen3, then a deepseek_v3 for
# its tool-call format, then a qwen3_5_moe for Qwen3.5's XML calls and the
# think block its generation prompt opens, then a Kimi K2 directory (tiktoken,
# section-format calls with the model's ids). Both run with EAAS_TEST_HOOKS=1 so a request can make
# the random model "say" a tool call (eaas_test_forced_text). The server is
# killed by its PID on any exit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"
serve_test_init

run_node() { # name, model dir, extra args
  local name=$1 dir=$2
  shift 2
  if MODEL_DIR="$dir" EA_SRC="$EA_SRC" node "$here/serve_fields.mjs" "http://127.0.0.1:$PORT/v1" tiny "$@" \
    >"$tmp/node.out" 2>"$tmp/node.err"; then
    ok "$name: $(tail -1 "$tmp/node.out")"
  else
    tail -40 "$tmp/node.err" >&2
    bad "$name: $(tail -1 "$tmp/node.out" 2>/dev/null)"
  fi
  grep -E '^(ok|FAIL) ' "$tmp/node.err" | sed 's/^/  node: /' >&2 || true
}

make_tiny_model "$tmp/qwen"
EAAS_TEST_HOOKS=1 start_server "$tmp/log" --model "$tmp/qwen" --served-model-name tiny --threads 2 --max-running 16 \
  --reasoning-parser qwen3 || exit 1
run_node "qwen3_moe fields" "$tmp/qwen"
stop_server

"$EAAS_BIN" make-model --family deepseek_v3 --preset tiny --seed 1 --format hf --out "$tmp/ds" >/dev/null
EAAS_TEST_HOOKS=1 start_server "$tmp/log2" --model "$tmp/ds" --served-model-name tiny --threads 2 || exit 1
run_node "deepseek_v3 tool calls" "$tmp/ds" deepseek
stop_server

"$EAAS_BIN" make-model --family qwen3_5_moe --preset tiny --seed 1 --format hf --out "$tmp/q35" >/dev/null
EAAS_TEST_HOOKS=1 start_server "$tmp/log4" --model "$tmp/q35" --served-model-name tiny --threads 2 --reasoning-parser qwen3 || exit 1
run_node "qwen3_5_moe XML tool calls" "$tmp/q35" qwen3_5
stop_server

# Kimi K2's own files: model_type kimi_k2, tiktoken.model, its section-format calls (tiktoken_ref.mjs kimi-model)
"$EAAS_BIN" make-model --family deepseek_v3 --preset tiny --seed 2 --format hf --out "$tmp/kimi" >/dev/null
node "$here/tiktoken_ref.mjs" kimi-model "$tmp/kimi" 2>/dev/null
EAAS_TEST_HOOKS=1 start_server "$tmp/log5" --model "$tmp/kimi" --served-model-name tiny --threads 2 || exit 1
run_node "kimi_k2 tool calls" "$tmp/kimi" kimi
stop_server

# without EAAS_TEST_HOOKS the hook's field is refused like any unknown field
start_server "$tmp/log3" --model "$tmp/qwen" --served-model-name tiny --threads 2 || exit 1
code=$(curl -s -o "$tmp/r" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" \
  -d '{"prompt": "x", "max_tokens": 2, "eaas_test_forced_text": "y"}')
if [ "$code" = 400 ] && grep -q '"param": *"eaas_test_forced_text"' "$tmp/r"; then
  ok "test hook off by default: 400 naming eaas_test_forced_text"
else
  bad "test hook off by default (got $code: $(cat "$tmp/r"))"
fi
serve_test_summary
