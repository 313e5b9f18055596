#!/usr/bin/env bash
# test_serve_openai.sh — `eaas serve` on a tiny qwen3_moe model, driven by the
# official `openai` npm client (serve_openai.mjs: streaming and not, chat and
# completions, stop strings, seeds, logprobs, usage, 64-way determinism) and
# by curl (health, metrics, tokenize/detokenize, SSE framing, API key), then
# a graceful SIGTERM. The server is killed by its PID on any exit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

tmp=$(mktemp -d)
trap 'stop_server; rm -rf "$tmp"' EXIT
make_tiny_model "$tmp/model"
start_server "$tmp/log" --model "$tmp/model" --served-model-name tiny --threads 2 --max-running 64 \
  --max-batch-tokens 512 --api-key sekrit
base="http://127.0.0.1:$PORT"
auth=(-H "Authorization: Bearer sekrit")

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1" >&2; }
bad() { failed=$((failed + 1)); echo "FAIL $1" >&2; }
expect() { # name, condition result (0 = true)
  if [ "$2" = 0 ]; then ok "$1"; else bad "$1"; fi
}

# --- the openai client ---
if EA_SRC="$EA_SRC" EAAS_API_KEY=sekrit node "$here/serve_openai.mjs" "$base/v1" tiny >"$tmp/node.out" 2>"$tmp/node.err"; then
  ok "openai client: $(tail -1 "$tmp/node.out")"
else
  cat "$tmp/node.err" >&2
  bad "openai client: $(tail -1 "$tmp/node.out" 2>/dev/null)"
fi
grep -E '^(ok|FAIL) ' "$tmp/node.err" | sed 's/^/  node: /' >&2 || true

# --- curl ---
code=$(curl -s -o "$tmp/h" -w '%{http_code}' "$base/health")
expect "GET /health is 200 once loaded" "$([ "$code" = 200 ] && echo 0 || echo 1)"

# CORS is off by default: no Allow-Origin header, OPTIONS is 405
hdr=$(curl -s -D - -o /dev/null -H 'Origin: http://a.example' "$base/health")
code=$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: http://a.example' "$base/v1/models")
expect "CORS off by default: no Access-Control-Allow-Origin, OPTIONS 405 ($code)" \
  "$(! grep -qi '^access-control-allow-origin' <<<"$hdr" && [ "$code" = 405 ] && echo 0 || echo 1)"

ver=$(curl -s "$base/version")
want=$("$EAAS_BIN" --version | head -1 | cut -d' ' -f2)
expect "GET /version (no key) gives the binary's version: $ver" \
  "$(node -e 'const v = JSON.parse(process.argv[1]); process.exit(v.version === process.argv[2] && v.commit ? 0 : 1)' "$ver" "$want" && echo 0 || echo 1)"

curl -s "$base/metrics" >"$tmp/m"
r=0
for name in num_requests_running num_requests_waiting kv_blocks_used kv_blocks_total prefix_cache_hit_tokens_total \
  prompt_tokens_total generation_tokens_total; do
  grep -q "^eaas:$name{model_name=\"tiny\"} " "$tmp/m" || { echo "  missing eaas:$name" >&2; r=1; }
done
for h in time_to_first_token_seconds inter_token_latency_seconds e2e_request_latency_seconds request_queue_time_seconds; do
  grep -q "^eaas:${h}_bucket{model_name=\"tiny\",le=\"+Inf\"} [1-9]" "$tmp/m" || { echo "  empty histogram eaas:$h" >&2; r=1; }
  grep -q "^eaas:${h}_count{model_name=\"tiny\"} [1-9]" "$tmp/m" || r=1
done
expect "/metrics has the gauges, counters and filled histograms" $r
# every series carries the served model name (vLLM's model_name label)
unlabelled=$(grep '^eaas:' "$tmp/m" | grep -vc '^eaas:[a-z0-9_:]*{model_name="tiny"[,}]')
expect "every eaas: sample has model_name=\"tiny\" ($unlabelled without)" "$([ "$unlabelled" = 0 ] && echo 0 || echo 1)"
gen=$(awk '/^eaas:generation_tokens_total[{ ]/{print $NF}' "$tmp/m")
expect "/metrics counts generated tokens (got $gen)" "$([ "${gen:-0}" -ge 1000 ] && echo 0 || echo 1)"

curl -s "${auth[@]}" "$base/tokenize" -d '{"prompt": "Hello world, hello!"}' >"$tmp/t"
ids=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"]))' "$tmp/t")
curl -s "${auth[@]}" "$base/detokenize" -d "{\"tokens\": $ids}" >"$tmp/d"
txt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt"])' "$tmp/d")
expect "tokenize -> detokenize round trip ($ids)" "$([ "$txt" = "Hello world, hello!" ] && echo 0 || echo 1)"

curl -s -N "${auth[@]}" "$base/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"temperature":0}' >"$tmp/sse"
r=0
[ "$(grep -c '^data: ' "$tmp/sse")" -ge 3 ] || r=1
[ "$(grep '^data: ' "$tmp/sse" | tail -1)" = "data: [DONE]" ] || r=1
grep -v '^data: ' "$tmp/sse" | grep -qv '^$' && r=1
expect "curl: SSE framing (data: lines, blank separators, ends with [DONE])" $r

code=$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/models")
expect "no API key -> 401 (got $code)" "$([ "$code" = 401 ] && echo 0 || echo 1)"

grep -q 'access id=[0-9]* POST /v1/completions status=200 prompt_tokens=[0-9]* completion_tokens=24 latency_ms=' "$tmp/log"
expect "access log line per request with id, tokens, latency" $?

# --- graceful shutdown ---
kill -TERM "$SRV_PID"
for i in $(seq 1 100); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
r=1
if ! kill -0 "$SRV_PID" 2>/dev/null; then wait "$SRV_PID" && r=0; SRV_PID=""; fi
grep -q ' stopped' "$tmp/log" || r=1
expect "SIGTERM: drains and exits 0" $r

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
