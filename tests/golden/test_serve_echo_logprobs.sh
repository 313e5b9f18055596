#!/usr/bin/env bash
# test_serve_echo_logprobs.sh — `echo` with `logprobs` in /v1/completions
# (echo_logprobs.mjs, the official `openai` npm client): the echoed prompt's
# logprobs equal those of each prefix fed alone, survive prefix-cache hits,
# stream, and come with n > 1 and batched prompts. The server runs with
# --max-batch-tokens 16 so a prompt's logits rows come from several prefill
# steps. The server is killed by its PID on any exit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"
serve_test_init

make_tiny_model "$tmp/qwen"
start_server "$tmp/log" --model "$tmp/qwen" --served-model-name tiny --threads 2 --max-batch-tokens 16 || exit 1
if EA_SRC="$EA_SRC" node "$here/echo_logprobs.mjs" "http://127.0.0.1:$PORT/v1" tiny >"$tmp/node.out" 2>"$tmp/node.err"; then
  ok "echo + logprobs: $(tail -1 "$tmp/node.out")"
else
  tail -40 "$tmp/node.err" >&2
  bad "echo + logprobs: $(tail -1 "$tmp/node.out" 2>/dev/null)"
fi
grep -E '^(ok|FAIL) ' "$tmp/node.err" | sed 's/^/  node: /' >&2 || true
stop_server
serve_test_summary
