#!/usr/bin/env bash
# test_eaas_faults.sh — Expert-as-a-Service through failures (issue 20), as
# real processes on loopback: a monitor, two expert servers that are replicas
# (both host every expert), and an attention client with 16 concurrent
# streaming requests (streams.mjs, the official openai client). Each fault is
# injected once every stream has its first chunk, and every run's texts are
# compared with a local server's (the same requests, experts in process):
#
#   - SIGKILL of a server: 0 failed requests, texts identical, failovers > 0;
#   - SIGSTOP of a server (alive, hung): the same, within the deadline
#     (--expert-timeout-ms 1000); after three more stalls the client has
#     connected it again each time and it holds one slot per lane (the
#     connections given up are freed);
#   - elastic join: a third server started while streams run appears in
#     /cluster and runs pairs (its eaas:expert_tokens_total grows), no restart;
#   - the monitor killed and started again on its port while streams run:
#     no request fails, and the new monitor's table lists the servers and the
#     client again (a new epoch);
#   - a client killed mid-request: the servers free its slot within
#     --dead-after-ms (plus one heartbeat; the check allows 2 s for a loaded
#     machine and prints the time) — eaas:expert_clients drops;
#   - a server that dies while the client is idle is dropped on the monitor's
#     notice: the next calls do not wait out a deadline (timeouts unchanged);
#   - no live replica: with only a server hosting half of the experts left,
#     requests fail with an error naming a layer and an expert, /health
#     answers 503 naming it; a server that hosts them again joins and /health
#     is 200 and requests complete again.
#
# With EA_FAULTS_DBO=1 (test_eaas_faults_dbo.sh) the client runs with
# double-batch overlap (--enable-dbo: two slots per server, a call of each
# micro-batch in flight at once), and at the end its metrics must count
# overlapped calls.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cluster_lib.sh"
cl_init

N=16 TOK=32
model="$tmp/model"
"$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 7 --format hf --out "$model" >/dev/null || exit 1

start_server "$tmp/ref.log" --model "$model" --threads 1 || exit 1
ref=$PORT; cl_pids+=("$SRV_PID"); SRV_PID=""
EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$ref/v1" $N $TOK "$tmp/ref.json" >/dev/null || exit 1

start_monitor --heartbeat-ms 100 --dead-after-ms 500 || exit 1
MON_PORT=${MON##*:}
start_expert xa --model "$model" --threads 1 || exit 1
start_expert xb --model "$model" --threads 1 || exit 1
dbo=(); [ "${EA_FAULTS_DBO:-0}" = 1 ] && dbo=(--enable-dbo)
start_server "$tmp/client.log" --model "$model" --threads 1 --experts-remote "$MON" --expert-timeout-ms 1000 "${dbo[@]}" || exit 1
cl=$PORT; CL_PID=$SRV_PID; cl_pids+=("$CL_PID")

# streams_with FAULT-COMMAND: 16 streams on the client; FAULT-COMMAND runs once all have started
streams_with() {
  EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$cl/v1" $N $TOK "$tmp/run.json" >"$tmp/run.out" 2>&1 &
  local np=$! i
  for i in $(seq 1 600); do grep -q started "$tmp/run.out" && break; kill -0 $np 2>/dev/null || break; sleep 0.05; done
  eval "$1"
  wait $np
}
# same_as_ref NAME: 0 failed requests and the local server's texts
same_as_ref() {
  python3 - "$tmp/ref.json" "$tmp/run.json" <<'PY'
import json, sys
ref, run = (json.load(open(p)) for p in sys.argv[1:])
errs = [e for e in run["errors"] if e]
same = sum(a == b for a, b in zip(ref["texts"], run["texts"]))
print(f"{len(errs)} failed, {same}/{len(ref['texts'])} texts identical" + (f"; first error: {errs[0]}" if errs else ""))
sys.exit(0 if not errs and same == len(ref["texts"]) else 1)
PY
}
client_metric() { metric "http://127.0.0.1:$cl" "$1{model_name=\"$(basename "$model")\"}"; }
check_run() { # NAME
  local r; r=$(same_as_ref) && ok "$1: $r" || bad "$1: $r"
}

streams_with true
check_run "no fault"

f0=$(client_metric eaas:remote_failovers_total)
streams_with 'kill -KILL $XPID_xa'
f1=$(client_metric eaas:remote_failovers_total)
check_run "SIGKILL of server xa mid-stream"
[ "$f1" -gt "$f0" ] && ok "failovers counted ($f0 -> $f1)" || bad "failovers $f0 -> $f1"

start_expert xc --model "$model" --threads 1 || exit 1
t0=$(client_metric eaas:remote_timeouts_total)
streams_with 'kill -STOP $XPID_xb'
t1=$(client_metric eaas:remote_timeouts_total)
check_run "SIGSTOP of server xb mid-stream (deadline 1000 ms)"
[ "$t1" -gt "$t0" ] && ok "timeouts counted ($t0 -> $t1)" || bad "timeouts $t0 -> $t1"
# xb resumes, and stalls three times more, each during a request: each time the client gives it up and
# (1 s on) connects it again, and xb frees the slot of the connection given up — one slot
# per lane, not one more per stall
kill -CONT "$XPID_xb"
lanes=1; [ "${EA_FAULTS_DBO:-0}" = 1 ] && lanes=2
for r in 1 2 3; do
  sleep 1.5
  curl -s -m 60 "http://127.0.0.1:$cl/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"a stall","max_tokens":48,"ignore_eos":true}' > "$tmp/stall$r.json" &
  sp=$!
  sleep 0.3; kill -STOP "$XPID_xb"; sleep 1.3; kill -CONT "$XPID_xb"
  wait "$sp"
done
sleep 1.5
streams_with true
xbc=$(metric "http://127.0.0.1:$XPORT_xb" eaas:expert_clients)
again=$(grep -c "connects its lane again" "$tmp/xb.log")
[ "$xbc" = "$lanes" ] && [ "$again" -ge 1 ] &&
  ok "four stalls of xb: the client connected again ($again lane connections replaced) and xb holds $xbc slot(s), one per lane" ||
  bad "after four stalls xb holds ${xbc:-?} slots for $lanes lane(s) ($again replaced)"
kill -KILL "$XPID_xb"

# elastic join: xd appears in /cluster and runs pairs, while streams run
join_check() {
  start_expert xd --model "$model" --threads 1 || return
  local t_reg="" i n
  for i in $(seq 1 400); do
    if [ -z "$t_reg" ] && curl -s "http://$MON/cluster" | grep -q '"id":"xd","state":"live"'; then t_reg=$(date +%s%N); fi
    n=$(metric "http://127.0.0.1:$XPORT_xd" eaas:expert_tokens_total)
    if [ -n "$t_reg" ] && [ "${n:-0}" -gt 0 ]; then
      echo "xd listed and running pairs after $(( ($(date +%s%N) - t_reg) / 1000000 )) ms ($n pairs)" >"$tmp/join.txt"
      return
    fi
    sleep 0.01
  done
  echo "xd: listed ${t_reg:+yes}${t_reg:-no}, tokens ${n:-0}" >"$tmp/join.txt"
}
streams_with join_check
check_run "a server joining mid-stream"
grep -q "running pairs" "$tmp/join.txt" && ok "elastic join: $(cat "$tmp/join.txt")" || bad "elastic join: $(cat "$tmp/join.txt")"

# the monitor dies and comes back on its port
epoch0=$(curl -s "http://$MON/cluster" | python3 -c 'import json,sys; print(json.load(sys.stdin)["epoch"])')
restart_monitor() {
  kill -KILL "$MON_PID"; wait "$MON_PID" 2>/dev/null
  sleep 0.3
  "$EAAS_BIN" monitor --port "$MON_PORT" --heartbeat-ms 100 --dead-after-ms 500 >"$tmp/monitor2.log" 2>&1 &
  MON_PID=$!; cl_pids+=("$MON_PID")
}
streams_with restart_monitor
check_run "monitor killed and restarted mid-stream"
sleep 1
python3 - "http://$MON/cluster" "$epoch0" >"$tmp/rebuilt.txt" <<'PY'
import json, sys, urllib.request
t = json.load(urllib.request.urlopen(sys.argv[1]))
live = sorted(s["id"] for s in t["servers"] if s["state"] == "live")
print(f"epoch {t['epoch']} (was {sys.argv[2]}), live servers {live}, clients {len(t['clients'])}")
sys.exit(0 if t["epoch"] != sys.argv[2] and live == ["xc", "xd"] and len(t["clients"]) == 1 else 1)
PY
[ $? -eq 0 ] && ok "table rebuilt from re-registrations: $(cat "$tmp/rebuilt.txt")" || bad "table after restart: $(cat "$tmp/rebuilt.txt")"

# a client killed mid-request: its slots are freed within dead-after-ms
start_server "$tmp/client2.log" --model "$model" --threads 1 --experts-remote "$MON" || exit 1
cl2=$PORT; cl2_pid=$SRV_PID; cl_pids+=("$cl2_pid"); SRV_PID=$CL_PID
before=$(metric "http://127.0.0.1:$XPORT_xc" eaas:expert_clients)
curl -s --max-time 30 -H 'Content-Type: application/json' -d '{"prompt":"x","max_tokens":200,"ignore_eos":true,"stream":true}' \
  "http://127.0.0.1:$cl2/v1/completions" >/dev/null &
sleep 0.5
kill -KILL "$cl2_pid"; t_kill=$(date +%s%N)
for i in $(seq 1 300); do
  now=$(metric "http://127.0.0.1:$XPORT_xc" eaas:expert_clients)
  [ "$now" -lt "$before" ] && break
  sleep 0.01
done
ms=$(( ($(date +%s%N) - t_kill) / 1000000 ))
[ "$now" -lt "$before" ] && [ "$ms" -le 2000 ] && ok "killed client's slot freed after $ms ms (dead-after 500 ms; clients $before -> $now)" ||
  bad "killed client: clients $before -> $now after $ms ms"

# no live replica: only xe (half of the experts) is left
kill -KILL "$XPID_xc" "$XPID_xd"
start_expert xe --model "$model" --threads 1 --experts 0-7 || exit 1
sleep 0.5
body=$(curl -s --max-time 60 -H 'Content-Type: application/json' -d '{"prompt":"Hello","max_tokens":8}' "http://127.0.0.1:$cl/v1/completions")
echo "$body" | grep -qE 'layer [0-9]+ expert (8|9|1[0-5])' && ok "a request needing a lost expert fails naming it: $(echo "$body" | head -c 160)" ||
  bad "request without a replica: $body"
h=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$cl/health")
echo "$h" | grep -qE 'expert (8|9|1[0-5]).* 503$' && ok "/health: $h" || bad "/health while an expert is missing: $h"
start_expert xf --model "$model" --threads 1 --experts 8-15 || exit 1
for i in $(seq 1 100); do h=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$cl/health"); [ "$h" = 200 ] && break; sleep 0.1; done
[ "$h" = 200 ] && ok "/health 200 again once a server hosts them" || bad "/health after xf joined: $h"
streams_with true
check_run "serving again on xe + xf"

# the monitor's notice alone drops a server: xg (everything) joins, is used,
# dies while the client is idle; after dead-after-ms the next calls go to xe
# and xf without waiting out a deadline
start_expert xg --model "$model" --threads 1 || exit 1
streams_with true
n=$(metric "http://127.0.0.1:$XPORT_xg" eaas:expert_tokens_total)
kill -KILL "$XPID_xg"
sleep 0.9
t0=$(client_metric eaas:remote_timeouts_total)
streams_with true
t1=$(client_metric eaas:remote_timeouts_total)
check_run "after xg (which ran ${n:-0} pairs) died while idle"
[ "${n:-0}" -gt 0 ] && [ "$t1" = "$t0" ] && ok "the monitor's notice dropped xg: no call waited for it (timeouts $t0 -> $t1)" ||
  bad "xg: ran ${n:-0} pairs; timeouts $t0 -> $t1"
if [ ${#dbo[@]} -gt 0 ]; then
  ov=$(client_metric eaas:remote_overlapped_calls_total)
  [ "${ov:-0}" -gt 0 ] && ok "double-batch overlap: $ov calls went while the other micro-batch's were in flight" ||
    bad "double-batch overlap: no overlapped call (${ov:-none})"
fi
serve_test_summary
