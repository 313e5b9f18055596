#!/usr/bin/env bash
# test_serve_badreq.sh — a matrix of bad requests against `eaas serve` (curl):
# each must get the right status and an OpenAI error body
# {"error": {"message", "type", "param", "code"}}; a client that disconnects
# mid-stream (and mid-wait) must have its request cancelled at once; a full
# queue must give 503 with Retry-After; idle connections and 400 concurrent
# streams (overload.mjs) never cost a reset. After the whole matrix, a normal
# request still succeeds and /health is 200. The server is killed by its PID.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

serve_test_init
make_tiny_model "$tmp/model"
start_server "$tmp/log" --model "$tmp/model" --served-model-name tiny --threads 2 --api-key k3y \
  --max-ctx 1024 --max-running 2 --max-queue 2 --max-body-bytes 65536
base="http://127.0.0.1:$PORT"


# is_error_body FILE: an OpenAI error object with a non-empty message
is_error_body() {
  python3 - "$1" <<'PY'
import json, sys
try:
    e = json.load(open(sys.argv[1], encoding="utf-8"))["error"]
    assert isinstance(e["message"], str) and e["message"]
    assert isinstance(e["type"], str) and e["type"]
    assert "param" in e and "code" in e
except Exception as x:
    print("  not an OpenAI error body:", repr(open(sys.argv[1], "rb").read()[:200]), x, file=sys.stderr)
    sys.exit(1)
PY
}

# req NAME WANT_STATUS PATH BODY [extra curl args...]  (POST with the right key unless AUTH overrides it)
req() {
  local name=$1 want=$2 path=$3 body=$4
  shift 4
  local code
  code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: ${AUTH-Bearer k3y}" -H 'Content-Type: application/json' \
    --data-binary "$body" "$@" "$base$path")
  if [ "$code" = "$want" ] && is_error_body "$tmp/body"; then
    ok "$name -> $code"
  else
    bad "$name: want $want, got $code: $(head -c 300 "$tmp/body")"
  fi
}

C=/v1/completions
H=/v1/chat/completions
long_ids=$(python3 -c 'print("[" + ",".join(str(100 + i) for i in range(1100)) + "]")')
big=$(python3 -c 'print("{\"prompt\": \"" + "a" * 100000 + "\"}")')

req "malformed JSON" 400 $C '{"prompt": "x",'
req "body is not an object" 400 $C '[1, 2, 3]'
req "empty body" 400 $C ''
req "prompt of the wrong type" 400 $C '{"prompt": 5}'
req "prompt: empty string" 400 $C '{"prompt": ""}'
req "max_tokens as a string" 400 $C '{"prompt": "x", "max_tokens": "5"}'
req "negative max_tokens" 400 $C '{"prompt": "x", "max_tokens": -5}'
req "huge max_tokens" 400 $C '{"prompt": "x", "max_tokens": 1000000000}'
req "fractional max_tokens" 400 $C '{"prompt": "x", "max_tokens": 2.5}'
req "prompt longer than the context" 400 $C "{\"prompt\": $long_ids, \"max_tokens\": 1}"
req "token id outside the vocabulary" 400 $C '{"prompt": [1, 2, 99999999]}'
req "invalid UTF-8" 400 $C "$(printf '{"prompt": "abc\xff\xfe"}')"
req "temperature negative" 400 $C '{"prompt": "x", "temperature": -0.5}'
req "top_p zero" 400 $C '{"prompt": "x", "top_p": 0}'
req "bad stop type" 400 $C '{"prompt": "x", "stop": 7}'
req "stop array with a number" 400 $C '{"prompt": "x", "stop": ["a", 7]}'
req "n = 65" 400 $C '{"prompt": "x", "n": 65}'
req "logprobs too many" 400 $C '{"prompt": "x", "logprobs": 50}'
req "stream_options without stream" 400 $C '{"prompt": "x", "stream_options": {"include_usage": true}}'
req "unknown model" 404 $C '{"prompt": "x", "model": "gpt-17"}'
req "chat: empty messages" 400 $H '{"messages": []}'
req "chat: messages not an array" 400 $H '{"messages": "hello"}'
req "chat: missing messages" 400 $H '{"prompt": "hello"}'
req "chat: unknown role" 400 $H '{"messages": [{"role": "wizard", "content": "x"}]}'
req "chat: content of the wrong type" 400 $H '{"messages": [{"role": "user", "content": 42}]}'
req "chat: top_logprobs without logprobs" 400 $H '{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}'
req "chat: tool_choice required with a parameters schema the grammar engine refuses" 400 $H '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "tuple"}}}}}], "tool_choice": "required"}'
req "detokenize: tokens not an array" 400 /detokenize '{"tokens": "abc"}'
req "tokenize: no prompt" 400 /tokenize '{"text": "abc"}'
req "oversized body" 413 $C "$big"
req "oversized chunked body (no Content-Length)" 413 $C "$big" -H 'Transfer-Encoding: chunked'
AUTH="Bearer nope" req "wrong API key" 401 $C '{"prompt": "x"}'
AUTH="" req "missing API key" 401 /v1/models '' -X GET
req "unknown endpoint" 404 /v1/embeddings '{"input": "x"}'
req "wrong method" 405 $C '' -X GET

# --- client disconnect mid-stream: cancelled at once ---
aborts() { curl -s "$base/metrics" | awk '/^eaas:request_success_total\{(model_name="[^"]*",)?finished_reason="abort"\}/{print $NF}'; }
running() { curl -s "$base/metrics" | awk '/^eaas:num_requests_running[{ ]/{print $NF}'; }
a0=$(aborts)
curl -s -N --max-time 0.5 -H 'Authorization: Bearer k3y' "$base$C" \
  -d '{"prompt": "x", "max_tokens": 1000, "ignore_eos": true, "stream": true}' >"$tmp/cut" 2>/dev/null
sleep 0.5
a1=$(aborts)
r=$(running)
if grep -q '^data: {' "$tmp/cut" && ! grep -q 'data: \[DONE\]' "$tmp/cut" && [ "$a1" -eq $((a0 + 1)) ] && [ "$r" = 0 ]; then
  ok "disconnect mid-stream: cancelled (aborts $a0 -> $a1, running $r)"
else
  bad "disconnect mid-stream: aborts $a0 -> $a1, running $r, got $(head -c 200 "$tmp/cut")"
fi
curl -s --max-time 0.5 -H 'Authorization: Bearer k3y' "$base$C" \
  -d '{"prompt": "x", "max_tokens": 1000, "ignore_eos": true}' >/dev/null 2>&1
sleep 0.5
a2=$(aborts)
r=$(running)
if [ "$a2" -eq $((a1 + 1)) ] && [ "$r" = 0 ]; then
  ok "disconnect while waiting (non-streaming): cancelled (aborts $a1 -> $a2)"
else
  bad "disconnect while waiting: aborts $a1 -> $a2, running $r"
fi
grep -q 'status=499 .* finish=abort' "$tmp/log" && ok "access log records the abort" || bad "no abort in the access log"

# --- queue full: room for 2 running + 2 waiting; 8 long requests at once -> some 503 with Retry-After ---
for i in 1 2 3 4 5 6 7 8; do
  curl -s -D "$tmp/qh$i" -o "$tmp/qb$i" -w '%{http_code}' -H 'Authorization: Bearer k3y' "$base$C" \
    -d '{"prompt": "x", "max_tokens": 1000, "ignore_eos": true}' >"$tmp/qc$i" 2>/dev/null &
  bg_pids+=($!)
done
for p in "${bg_pids[@]}"; do wait "$p" 2>/dev/null; done
bg_pids=()
n200=0
n503=0
nbad=0
for i in 1 2 3 4 5 6 7 8; do
  case "$(cat "$tmp/qc$i")" in
    200) n200=$((n200 + 1)) ;;
    503) if grep -qi '^Retry-After: ' "$tmp/qh$i" && is_error_body "$tmp/qb$i"; then n503=$((n503 + 1)); else nbad=$((nbad + 1)); fi ;;
    *) nbad=$((nbad + 1)) ;;
  esac
done
if [ "$n503" -ge 1 ] && [ "$n200" -ge 2 ] && [ "$nbad" = 0 ]; then
  ok "queue full -> 503 with Retry-After ($n200 served, $n503 refused)"
else
  bad "queue full: $n200 served, $n503 refused with Retry-After, $nbad other"
fi
r=$(running)
[ "$r" = 0 ] && ok "all slots free afterwards (running $r)" || bad "running still $r"

# --- overload (issue 18, item 5): 340 idle connections do not keep /health or /metrics
# from answering and are closed after the idle timeout (default 5 s); 400 streams at
# once (no retries) each end as a whole stream or a 503 with Retry-After and an
# OpenAI error body, none reset ---
if timeout 120 node "$here/overload.mjs" "$PORT" k3y 340 400 5 >"$tmp/ovl.out" 2>"$tmp/ovl.err"; then
  ok "overload: $(tail -1 "$tmp/ovl.out")"
else
  sed 's/^/  /' "$tmp/ovl.err" | head -5 >&2
  bad "overload: $(tail -1 "$tmp/ovl.out" 2>/dev/null)"
fi
r=$(running)
[ "$r" = 0 ] && ok "all slots free after the overload (running $r)" || bad "running still $r after the overload"

# --- the server still serves ---
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer k3y' "$base$C" \
  -d '{"prompt": "Hello", "max_tokens": 4, "temperature": 0}')
if [ "$code" = 200 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["usage"]["completion_tokens"]==4' "$tmp/body"; then
  ok "a normal request after the matrix succeeds"
else
  bad "normal request after the matrix: $code $(head -c 200 "$tmp/body")"
fi
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/health")
[ "$code" = 200 ] && ok "/health 200 after the matrix" || bad "/health $code"
kill -0 "$SRV_PID" 2>/dev/null && ok "server process alive" || bad "server died"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
