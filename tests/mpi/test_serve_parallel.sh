#!/usr/bin/env bash
# test_serve_parallel.sh — `eaas serve --parallel expert` under mpirun: only
# rank 0 holds the port; the control bus keeps the ranks in step, so answers
# are identical to one process for repeated, concurrent, greedy and seeded
# requests (and n x batched prompts with logit_bias and repetition_penalty; a stop
# string inside special tokens' text, skip_special_tokens false); a client that disconnects mid-stream is cancelled on every rank and
# serving goes on; SIGTERM stops every rank cleanly; a rank killed with SIGKILL
# is named by rank 0, whose /health turns 503 naming it as soon as the control
# bus deadline expires (issue 18, item 7), whose log gives that as the reason it
# stops, and which stops instead of hanging.
set -euo pipefail
. "$(dirname "$0")/mpi_lib.sh"
W="$EA_BUILD/golden-models/serve-mpi"
mkdir -p "$W"
M="$W/qwen3-tiny"
[ -d "$M" ] || "$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 4 --format hf --out "$M" >/dev/null
NAME=$(basename "$M")


req() { # PORT PROMPT SEED(-1 = greedy)
  local t=0; [ "$3" -ge 0 ] && t=0.9
  curl -s "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"'"$NAME"'","prompt":"'"$2"'","max_tokens":16,"temperature":'"$t"',"seed":'"$3"',"ignore_eos":true}' \
    | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'
}

run_all() { # PORT OUTFILE: 10 identical in a row, then 32 concurrent
  local port=$1 out=$2
  : > "$out"
  for i in $(seq 1 10); do req "$port" "The same prompt again" -1 >> "$out"; done
  local rp=()
  for i in $(seq 1 32); do (req "$port" "Prompt number $i of thirty-two" $((i % 2 ? i : -1)) > "$out.$i") & rp+=($!); done
  wait "${rp[@]}"   # only the requests: the server is a background job too
  for i in $(seq 1 32); do cat "$out.$i" >> "$out"; rm -f "$out.$i"; done
  # the request fields that travel in the bus's submit event: every choice of a batch x n,
  # logit_bias, repetition_penalty (each choice is its own request on every rank)
  curl -s "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"'"$NAME"'","prompt":["Alpha beta","Gamma delta"],"n":2,"seed":3,"temperature":0.9,"max_tokens":8,
         "ignore_eos":true,"logit_bias":{"1000":4,"2000":-100},"repetition_penalty":1.3}' \
    | /usr/bin/python3 -c 'import json,sys; print(json.dumps([c["text"] for c in json.load(sys.stdin)["choices"]]))' >> "$out"
  # skip_special_tokens false: a stop string inside special tokens' text ends the request on
  # every rank (the flag travels in the submit event), include_stop_str_in_output keeps it
  curl -s "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"'"$NAME"'","prompt":"Specials","max_tokens":6,"temperature":0,"ignore_eos":true,
         "logit_bias":{"151644":100},"skip_special_tokens":false,"stop":["|><|"],"include_stop_str_in_output":true}' \
    | /usr/bin/python3 -c 'import json,sys; c=json.load(sys.stdin)["choices"][0]; print(json.dumps([c["text"], c["finish_reason"]]))' >> "$out"
}

start "$W/one.log" "$EAAS_BIN" serve --model "$M" --port 0 --threads 1
run_all "$PORT" "$W/one.txt"
kill -TERM "$PID"; wait "$PID" || true

start "$W/ep.log" $MPI -n 2 "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 --parallel expert --dist-timeout 10
MPIPID=$PID
run_all "$PORT" "$W/ep.txt"
if cmp -s "$W/one.txt" "$W/ep.txt"; then ok "2 ranks: 10 repeated + 32 concurrent answers identical to one process"; else bad "answers differ"; diff "$W/one.txt" "$W/ep.txt" | head -5 >&2; fi
[ "$(sort -u <(head -10 "$W/ep.txt") | wc -l)" = 1 ] && ok "10 identical requests, 10 identical answers" || bad "repeated requests differ"
R0=$(rank_pid "$MPIPID" 0)
holders=$(ss -ltnp "sport = :$PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | sort -u)
[ "$holders" = "pid=$R0" ] && ok "only rank 0 (pid $R0) holds the HTTP port" || bad "port $PORT held by '$holders' (rank 0 is $R0)"
# cancel: a stream cut short, then a normal request still works and matches
(curl -sN -m 0.3 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"'"$NAME"'","prompt":"long","max_tokens":2000,"stream":true,"ignore_eos":true}' > /dev/null || true)
sleep 0.5
a=$(req "$PORT" "The same prompt again" -1)
[ "$a" = "$(head -1 "$W/one.txt")" ] && ok "after a cancelled stream, serving goes on, same answer" || bad "after cancel: '$a'"
grep -q "finish=abort" "$W/ep.log" && ok "the disconnect was logged as an abort" || bad "no abort logged"
t0=$(date +%s)
kill -TERM "$R0"   # rank 0 drains and sends shutdown on the control bus; every rank then exits
if wait "$MPIPID"; then ok "SIGTERM to rank 0: every rank exited 0 (in $(( $(date +%s) - t0 )) s)"; else bad "SIGTERM exit code $?"; fi
grep -q "shutting down (signal)" "$W/ep.log" && ok "the log gives the signal as the reason to stop" || bad "shutdown reason: $(grep 'shutting down' "$W/ep.log")"

# fault: SIGKILL rank 1; rank 0 names it within the deadline (mpirun --enable-recovery keeps rank 0 alive to say so)
# (idle when the rank dies: only the control bus notices; --drain-seconds 3 is how long /health then says why)
start "$W/kill.log" $MPI --enable-recovery -n 2 "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 --parallel expert --dist-timeout 3 --drain-seconds 3
MPIPID=$PID
R1=$(rank_pid "$MPIPID" 1)
if [ -n "$R1" ]; then
  kill -KILL "$R1"
  t0=$(date +%s)
  hcode=""; hbody=""
  for _ in $(seq 1 150); do
    kill -0 "$MPIPID" 2>/dev/null || break
    if [ "$hcode" != 503 ]; then
      hcode=$(curl -s -m 1 -o "$W/health.json" -w '%{http_code}' "http://127.0.0.1:$PORT/health" || true)
      hbody=$(cat "$W/health.json" 2>/dev/null)
      [ "$hcode" = 503 ] && ht=$(( $(date +%s) - t0 ))
    fi
    sleep 0.1
  done
  dt=$(( $(date +%s) - t0 ))
  if [ "$hcode" = 503 ] && echo "$hbody" | grep -q "rank(s) 1"; then ok "/health turned 503 naming rank 1 (after ${ht} s): $hbody"; else bad "/health after the kill: '$hcode' $hbody"; fi
  if grep -q "rank(s) 1" "$W/kill.log"; then ok "rank 0 named the dead rank 1 (after ${dt} s)"; else bad "dead rank not named"; tail -5 "$W/kill.log" >&2; fi
  if grep -q "shutting down (a rank failed: .*rank(s) 1" "$W/kill.log" && ! grep -q "max-requests" "$W/kill.log"; then
    ok "the log gives the lost rank as the reason to stop"
  else
    bad "shutdown reason: $(grep 'shutting down' "$W/kill.log")"
  fi
  kill -0 "$MPIPID" 2>/dev/null && bad "still running 15 s after the kill" || ok "the job stopped instead of hanging"
else
  bad "could not find rank 1's process"
fi
mpi_summary
