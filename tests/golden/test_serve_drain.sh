#!/usr/bin/env bash
# test_serve_drain.sh — shutdown of `eaas serve` as clients see it (issue 18,
# item 6): after SIGTERM the port stays open, /health answers 503
# {"status":"draining"} and new completions get 503 with an OpenAI error body
# while in-flight requests go on; a second SIGTERM cancels them at once and the
# process exits within seconds, each in-flight client still getting its ending
# (finish_reason "abort", then `data: [DONE]` and a complete chunked stream).
# The server is started with --drain-seconds 60, so only the second signal can
# end it in time. Every wait is bounded; the server is killed by its PID.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

serve_test_init
make_tiny_model "$tmp/model"
start_server "$tmp/log" --model "$tmp/model" --threads 2 --max-running 4 --drain-seconds 60
base="http://127.0.0.1:$PORT"

running() { curl -s -m 2 "$base/metrics" | awk '/^eaas:num_requests_running[ {]/{print $NF}'; }

# three long requests: two streams, one waiting for its JSON body (curl's exit code kept)
long='"prompt": "x", "max_tokens": 3000, "ignore_eos": true'
for i in 1 2; do
  (curl -sS -N -m 30 "$base/v1/completions" -d "{$long, \"stream\": true}" >"$tmp/s$i" 2>"$tmp/s$i.err"; echo $? >"$tmp/s$i.rc") &
  bg_pids+=($!)
done
(curl -sS -m 30 "$base/v1/completions" -d "{$long}" >"$tmp/b" 2>"$tmp/b.err"; echo $? >"$tmp/b.rc") &
bg_pids+=($!)
for _ in $(seq 1 100); do [ "$(running)" = 3 ] && break; sleep 0.1; done
r=$(running)
[ "$r" = 3 ] && ok "three requests running" || bad "running is '$r', not 3"

kill -TERM "$SRV_PID"
# /health: 503 draining, on a new connection, while the requests go on
hcode=""
t_end=$((SECONDS + 5))
while [ "$SECONDS" -lt "$t_end" ]; do
  hcode=$(curl -s -m 1 -o "$tmp/health" -w '%{http_code}' "$base/health")
  [ "$hcode" = 503 ] && break
  sleep 0.1
done
if [ "$hcode" = 503 ] && python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["status"] == "draining"' "$tmp/health"; then
  ok "during the drain /health answers 503 $(cat "$tmp/health")"
else
  bad "during the drain /health gave '$hcode' $(head -c 200 "$tmp/health" 2>/dev/null)"
fi
code=$(curl -s -m 2 -D "$tmp/nh" -o "$tmp/new" -w '%{http_code}' "$base/v1/completions" -d '{"prompt": "x", "max_tokens": 2}')
if [ "$code" = 503 ] && grep -qi '^Retry-After: ' "$tmp/nh" &&
   python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["message"] and e["type"]' "$tmp/new"; then
  ok "a new completion during the drain: 503 with an OpenAI error ($(head -c 120 "$tmp/new"))"
else
  bad "a new completion during the drain: $code $(head -c 200 "$tmp/new")"
fi
r=$(running)
[ "$r" = 3 ] && ok "the in-flight requests go on during the drain (running $r)" || bad "running $r during the drain"

# the second signal: immediate exit, every client still gets an ending
t0=$(date +%s.%N)
kill -TERM "$SRV_PID"
for _ in $(seq 1 50); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
dt=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
if kill -0 "$SRV_PID" 2>/dev/null; then
  bad "still running 5 s after the second SIGTERM (drain 60 s)"
else
  wait "$SRV_PID"
  rc=$?
  SRV_PID=""
  [ "$rc" = 0 ] && ok "second SIGTERM: exited in ${dt} s, status 0" || bad "second SIGTERM: exit status $rc"
fi
for p in "${bg_pids[@]}"; do wait "$p" 2>/dev/null; done
bg_pids=()
for i in 1 2; do
  if [ "$(cat "$tmp/s$i.rc")" = 0 ] && grep -q '"finish_reason":"abort"' "$tmp/s$i" && [ "$(grep -v '^$' "$tmp/s$i" | tail -1)" = "data: [DONE]" ]; then
    ok "stream $i ended: abort chunk, [DONE], complete chunked body"
  else
    bad "stream $i: curl $(cat "$tmp/s$i.rc") $(cat "$tmp/s$i.err"), ends: $(tail -c 200 "$tmp/s$i")"
  fi
done
if [ "$(cat "$tmp/b.rc")" = 0 ] && python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["choices"][0]["finish_reason"] == "abort"' "$tmp/b"; then
  ok "the waiting request got its JSON body with finish_reason abort"
else
  bad "waiting request: curl $(cat "$tmp/b.rc") $(cat "$tmp/b.err") $(head -c 200 "$tmp/b")"
fi
grep -q "second signal" "$tmp/log" && ok "the log says the second signal cancelled everything" || bad "no second-signal line in the log"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
