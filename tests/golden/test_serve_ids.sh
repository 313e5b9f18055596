#!/usr/bin/env bash
# test_serve_ids.sh — issue 18 item 11 against the real server: response ids
# are random (cmpl-/chatcmpl- + 32 hex, like vLLM) and do not repeat after a
# restart (they used to restart at cmpl-1); a body with \u0000 gets a 400 in
# the user's words naming the field; every /metrics series carries
# model_name="<served name>". The server is killed by its PID.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

serve_test_init
make_tiny_model "$tmp/model"


ids=()
one_id() { # PATH BODY -> the response's id
  curl -s --max-time 120 -H 'Content-Type: application/json' --data-binary "$2" "$base$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", "none"))'
}
for run in 1 2; do
  start_server "$tmp/log$run" --model "$tmp/model" --served-model-name 'tiny "q"' --threads 2 || exit 1
  base="http://127.0.0.1:$PORT"
  ids+=("$(one_id /v1/completions '{"prompt": "hi", "max_tokens": 1}')")
  ids+=("$(one_id /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}')")
  if [ "$run" = 1 ]; then
    code=$(curl -s --max-time 30 -o "$tmp/nul" -w '%{http_code}' -H 'Content-Type: application/json' \
      --data-binary '{"messages": [{"role": "user", "content": "a\u0000b"}], "max_tokens": 1}' "$base/v1/chat/completions")
    if [ "$code" = 400 ] && grep -q 'may not contain the NUL character' "$tmp/nul" && grep -q 'messages\[0\].content' "$tmp/nul" &&
      ! grep -q JSON_ALLOW_NUL "$tmp/nul"; then
      ok "\\u0000 in a message: 400 $(head -c 200 "$tmp/nul")"
    else
      bad "\\u0000 in a message: $code $(head -c 300 "$tmp/nul")"
    fi
    curl -s --max-time 30 "$base/metrics" >"$tmp/m"
    n=$(grep -c '^eaas:' "$tmp/m")
    unl=$(grep '^eaas:' "$tmp/m" | grep -vc '^eaas:[a-z0-9_:]*{model_name="tiny \\"q\\""[,}]')
    if [ "$n" -gt 20 ] && [ "$unl" = 0 ]; then ok "all $n eaas: samples carry model_name"; else bad "$unl of $n samples lack model_name: $(grep '^eaas:' "$tmp/m" | head -2)"; fi
  fi
  stop_server
done
echo "  ids: ${ids[*]}" >&2
fmt=0
for i in 0 1 2 3; do
  want=cmpl; [ $((i % 2)) = 1 ] && want=chatcmpl
  [[ "${ids[$i]}" =~ ^$want-[0-9a-f]{32}$ ]] || fmt=1
done
if [ "$fmt" = 0 ]; then ok "ids are cmpl-/chatcmpl- + 32 hex"; else bad "id format: ${ids[*]}"; fi
distinct=$(printf '%s\n' "${ids[@]}" | sed 's/^[a-z]*-//' | sort -u | wc -l)
if [ "$distinct" = 4 ]; then ok "no id repeats across a restart"; else bad "ids repeat: ${ids[*]}"; fi

serve_test_summary
