#!/usr/bin/env bash
# test_serve_cors.sh — CORS with `eaas serve --allowed-origins` (issue 23 item
# 5): a browser's preflight (OPTIONS, no API key) gets 204 with the allowed
# methods and the headers it asked for; responses (JSON, errors, SSE streams)
# carry Access-Control-Allow-Origin for a listed origin only. CORS off (the
# default) is checked in test_serve_openai.sh. The server is killed by its PID.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

serve_test_init
make_tiny_model "$tmp/model"
start_server "$tmp/log" --model "$tmp/model" --served-model-name tiny --threads 2 --api-key k \
  --allowed-origins 'http://a.example, http://b.example' || exit 1
base="http://127.0.0.1:$PORT"
has() { grep -qi "^$1" "$tmp/h"; } # a response header line (name: value) in $tmp/h

code=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: http://b.example' \
  -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: authorization, content-type' \
  "$base/v1/chat/completions")
if [ "$code" = 204 ] && has 'access-control-allow-origin: http://b.example' && has 'access-control-allow-methods: .*POST' &&
  has 'access-control-allow-headers: authorization, content-type'; then
  ok "preflight: 204 without a key, origin, methods and headers allowed"
else
  bad "preflight: $code $(tr -d '\r' <"$tmp/h" | tr '\n' '|')"
fi

code=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer k' -H 'Origin: http://a.example' "$base/v1/models")
if [ "$code" = 200 ] && has 'access-control-allow-origin: http://a.example'; then ok "GET with a listed origin"
else bad "GET with a listed origin: $code $(tr -d '\r' <"$tmp/h" | tr '\n' '|')"; fi

code=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer k' -H 'Origin: http://evil.example' "$base/v1/models")
if [ "$code" = 200 ] && ! has 'access-control-allow-origin'; then ok "an origin not listed gets no Allow-Origin"
else bad "origin not listed: $code $(tr -d '\r' <"$tmp/h" | tr '\n' '|')"; fi

code=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -H 'Origin: http://a.example' "$base/v1/models")
if [ "$code" = 401 ] && has 'access-control-allow-origin: http://a.example'; then ok "errors carry it too (401), so the page can read them"
else bad "401 with a listed origin: $code $(tr -d '\r' <"$tmp/h" | tr '\n' '|')"; fi

code=$(curl -s -D "$tmp/h" -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer k' -H 'Origin: http://a.example' \
  -H 'Content-Type: application/json' --data-binary '{"prompt": "hi", "max_tokens": 3, "stream": true}' "$base/v1/completions")
if [ "$code" = 200 ] && has 'access-control-allow-origin: http://a.example' && grep -q '\[DONE\]' "$tmp/body"; then
  ok "SSE stream with a listed origin"
else
  bad "SSE stream: $code $(tr -d '\r' <"$tmp/h" | tr '\n' '|')"
fi

serve_test_summary
