#!/usr/bin/env bash
# test_eaas_replicas.sh — replicas of hot experts on expert servers
# (docs/protocol.md "Replicas of hot experts"), as real processes on loopback:
# a monitor, expert server xa hosting experts 0-13 of the tiny qwen3_moe model
# (16 experts, top-8) and xb hosting 14-15 with room for 6 replicas, an
# attention client and a local reference server.
#
#   1. With a monitor that does not plan (--replicate-ms 0) a fixed workload
#      (8 prompts of ~95 tokens, distinct, no prefix cache) runs; xb runs only
#      its two experts' pairs: its share of the pairs is measured.
#   2. The monitor is restarted on the same port with planning every 300 ms.
#      Under the same workload it assigns xb replicas of the hottest experts,
#      xb copies them in and announces them, the client sends to them: /cluster
#      lists them, xb's eaas:expert_replicas reaches 6, and the client cuts hot
#      experts' pairs over both servers (eaas:remote_replica_splits_total).
#   3. The same workload again: xb's share of the pairs is at least 1.5 times what
#      it was, and every answer (greedy, seeded, 8 concurrent streams through
#      the openai client) equals the local server's.
#   4. A third server xc (experts 14-15, 6 replica slots) joins: the monitor
#      plans the 12 hottest over xb and xc (the greedy alternates between the
#      two equal servers), so xc gets replicas and xb gives some back (served
#      for their grace period, then dropped); through all of it no call of the
#      client fails over or is refused, and answers still equal the local
#      server's.
#   5. xb is killed (SIGKILL) while 8 streams run: every stream completes
#      equal to the local server's (xb's replicas are replicas of xa's experts,
#      its own experts 14-15 are xc's too), the client counts failovers, and
#      the monitor marks xb dead and plans it no replicas any more.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cluster_lib.sh"
cl_init

model="$tmp/qwen3_moe-hf"
"$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 5 --format hf --out "$model" >/dev/null || {
  bad "make-model"; serve_test_summary; exit; }

# completion PORT FIELDS -> the choices as canonical JSON (PROMPT and MAXT in the environment replace the
# prompt and the 12 tokens; the answer is kept in $tmp/raw)
completion() {
  curl -sS --max-time 120 -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\": \"${PROMPT:-The weather today}\", \"max_tokens\": ${MAXT:-12}, \"ignore_eos\": true, \"logprobs\": 3 $2}" \
    -o "$tmp/raw" "http://127.0.0.1:$1/v1/completions" 2>/dev/null
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d.get("choices", d), sort_keys=True))' <"$tmp/raw" 2>/dev/null
}
same_choices() { # NAME FIELDS
  completion "$ref" "$2" >"$tmp/ref.json"
  completion "$cl" "$2" >"$tmp/cl.json"
  if grep -q '"text"' "$tmp/ref.json" && cmp -s "$tmp/ref.json" "$tmp/cl.json"; then ok "$1"
  else bad "$1: local $(head -c 200 "$tmp/ref.json") vs remote $(head -c 200 "$tmp/cl.json")"; fi
}

long='The weather today is sunny and warm, with a light wind from the west and a few clouds over the hills.'
# workload: 8 distinct prompts of ~95 tokens, 4 tokens each, one after another
workload() {
  local i
  for i in 1 2 3 4 5 6 7 8; do
    PROMPT="Report $i. $long $long $long $long" MAXT=4 completion "$cl" ', "temperature": 0' | grep -q '"text"' ||
      echo "workload: request $i failed: $(head -c 300 "$tmp/raw")" >&2
  done
}
pairs() { metric "http://127.0.0.1:$1" eaas:expert_tokens_total; }
# share_of_xb: runs the workload; prints xb's share of the pairs both servers ran (and xc's if it is up)
share_of_xb() {
  local a0 b0 a1 b1
  a0=$(pairs "$XPORT_xa"); b0=$(pairs "$XPORT_xb")
  workload
  a1=$(pairs "$XPORT_xa"); b1=$(pairs "$XPORT_xb")
  python3 -c "a=$a1-$a0; b=$b1-$b0; print('%.4f %d %d' % (b / max(1, a + b), a, b))"
}
lbl="{model_name=\"$(basename "$model")\"}"
cmetric() { metric "http://127.0.0.1:$cl" "$1$lbl"; }

# ---- 1. no plan: xb runs only experts 14-15 ----
start_monitor --replicate-ms 0 --heartbeat-ms 100 --dead-after-ms 1000 || { bad "monitor"; serve_test_summary; exit; }
MON_PORT=${MON##*:}
start_expert xa --model "$model" --experts 0-13 --threads 1 || bad "expert xa"
start_expert xb --model "$model" --experts 14-15 --threads 1 --replica-slots 6 --replica-grace-ms 1000 || bad "expert xb"
start_server "$tmp/ref.log" --model "$model" --threads 1 --no-prefix-cache || bad "local server"
ref=$PORT; ref_pid=$SRV_PID; SRV_PID=""; cl_pids+=("$ref_pid")
start_server "$tmp/client.log" --model "$model" --threads 1 --no-prefix-cache --experts-remote "$MON" || bad "client"
cl=$PORT
read -r before a b < <(share_of_xb)
echo "# no plan: xb ran $b of $((a + b)) pairs (share $before)"
python3 -c "import sys; sys.exit(0 if 0 < $before < 0.25 else 1)" &&
  ok "no plan: xb runs only its 2 experts of 16 (share $before)" || bad "no plan: xb share $before"
[ "$(metric "http://127.0.0.1:$XPORT_xb" eaas:expert_replicas)" = 0 ] && ok "no plan: no replica" || bad "replicas without a plan"

# ---- 2. the monitor plans: xb gets replicas of hot experts ----
kill -TERM "$MON_PID"; wait "$MON_PID" 2>/dev/null
fresh_log "$tmp/monitor2.log"
"$EAAS_BIN" monitor --port "$MON_PORT" --heartbeat-ms 100 --dead-after-ms 1000 --replicate-ms 300 >>"$tmp/monitor2.log" 2>&1 &
MON_PID=$!; cl_pids+=("$MON_PID")
wait_line "$tmp/monitor2.log" 'listening on' "$MON_PID" >/dev/null || bad "monitor restarted"
reps=0
for _ in $(seq 1 30); do # bounded: 30 workloads
  workload
  reps=$(metric "http://127.0.0.1:$XPORT_xb" eaas:expert_replicas)
  [ "${reps:-0}" -ge 6 ] && break
done
[ "${reps:-0}" = 6 ] && ok "xb serves 6 replicas the monitor assigned" || bad "xb replicas: ${reps:-none}"
curl -s "http://$MON/cluster" >"$tmp/cluster.json"
python3 - "$tmp/cluster.json" <<'PY' && ok "/cluster lists xb's replicas, none of them its own experts, all assigned" || bad "/cluster: $(head -c 600 "$tmp/cluster.json")"
import json, sys
c = json.load(open(sys.argv[1]))
xb = [s for s in c["servers"] if s["id"] == "xb"][0]
reps = {tuple(p) for p in xb["replicas"]}
sys.exit(0 if len(reps) == 6 and all(e < 14 for _, e in reps) and reps == {tuple(p) for p in xb.get("assigned", [])}
         and xb["replica_slots"] == 6 else 1)
PY
splits=$(cmetric eaas:remote_replica_splits_total)
[ "${splits:-0}" -gt 0 ] && ok "the client cut hot experts' pairs over their replicas ($splits times)" ||
  bad "no split: ${splits:-none}"

# ---- 3. the same workload: xb's share at least doubles; answers equal local ----
read -r after a b < <(share_of_xb)
echo "# replicas: xb ran $b of $((a + b)) pairs (share $after)"
python3 -c "import sys; sys.exit(0 if $after >= 1.5 * $before else 1)" &&
  ok "with replicas xb's share of the pairs went from $before to $after" || bad "share $before -> $after"
same_choices "replicas: greedy with logprobs = local" ', "temperature": 0'
same_choices "replicas: seeded at temperature 0.9 = local" ', "temperature": 0.9, "seed": 3'
PROMPT="$long $long $long $long" same_choices "replicas: a long prompt (split pairs) = local" ', "temperature": 0'
same_streams "replicas: 8 streams at once = local" "$ref" "$cl"

# ---- 4. a third server with slots joins: replicas move, nothing fails ----
f0=$(cmetric eaas:remote_failovers_total); r0=$(cmetric eaas:remote_timeouts_total)
start_expert xc --model "$model" --experts 14-15 --threads 1 --replica-slots 6 --replica-grace-ms 1000 || bad "expert xc"
xc_reps=0
for _ in $(seq 1 30); do
  workload
  xc_reps=$(metric "http://127.0.0.1:$XPORT_xc" eaas:expert_replicas)
  [ "${xc_reps:-0}" -gt 0 ] && break
done
for _ in 1 2 3; do workload; done # past the grace of anything xb gave back
[ "${xc_reps:-0}" -gt 0 ] && ok "xc joined and serves ${xc_reps} replicas" || bad "xc replicas: ${xc_reps:-none}"
drops=$(metric "http://127.0.0.1:$XPORT_xb" eaas:expert_replica_drops_total)
[ "${drops:-0}" -gt 0 ] && ok "the new plan took back ${drops} of xb's replicas (xb serves $(metric "http://127.0.0.1:$XPORT_xb" eaas:expert_replicas) now)" ||
  bad "xb gave back no replica: ${drops:-none}"
same_streams "after the move: 8 streams at once = local" "$ref" "$cl"
f1=$(cmetric eaas:remote_failovers_total); r1=$(cmetric eaas:remote_timeouts_total)
[ "$f1" = "$f0" ] && [ "$r1" = "$r0" ] && ok "no failover or timeout while replicas moved (xb dropped ${drops:-0})" ||
  bad "failovers $f0 -> $f1, timeouts $r0 -> $r1"

# ---- 5. xb dies (SIGKILL) mid-stream: its replicas and its experts have other hosts ----
EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$ref/v1" 8 24 "$tmp/k_ref.json" >/dev/null
EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$cl/v1" 8 24 "$tmp/k_cl.json" >"$tmp/k_cl.out" 2>&1 &
np=$!
for _ in $(seq 1 600); do grep -q started "$tmp/k_cl.out" && break; kill -0 $np 2>/dev/null || break; sleep 0.05; done
kill -KILL "$XPID_xb"
wait $np
python3 - "$tmp/k_ref.json" "$tmp/k_cl.json" <<'PY' && ok "xb killed mid-stream: 8 streams complete, equal to local" || bad "xb killed: $(head -c 300 "$tmp/k_cl.json")"
import json, sys
ref, a = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if ref["texts"] == a["texts"] and not any(a["errors"]) else 1)
PY
f2=$(cmetric eaas:remote_failovers_total)
[ "${f2:-0}" -gt "$f1" ] && ok "the client failed xb's pairs over (${f1} -> ${f2} pairs)" || bad "no failover: $f1 -> $f2"
gone=0
for _ in $(seq 1 100); do # the next plans drop the dead server (bounded: 10 s)
  curl -s "http://$MON/cluster" >"$tmp/cluster2.json"
  python3 - "$tmp/cluster2.json" <<'PY' && { gone=1; break; }
import json, sys
c = json.load(open(sys.argv[1]))
xb = [s for s in c["servers"] if s["id"] == "xb"][0]
sys.exit(0 if xb["state"] == "dead" and not xb.get("assigned") else 1)
PY
  workload; sleep 0.1
done
[ "$gone" = 1 ] && ok "the monitor marked xb dead and its plan no longer gives xb replicas" ||
  bad "/cluster after xb died: $(head -c 400 "$tmp/cluster2.json")"
same_choices "after xb died: greedy with logprobs = local" ', "temperature": 0'
serve_test_summary
