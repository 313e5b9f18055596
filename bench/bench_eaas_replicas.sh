#!/usr/bin/env bash
# bench_eaas_replicas.sh — replicas of hot experts on expert servers
# (docs/protocol.md "Replicas of hot experts"): one client and two expert
# servers that host the experts unevenly (xa all but the last eighth, xb the
# last eighth with room for SLOTS replicas), first with a monitor that does not
# plan, then with one that plans every 500 ms. Each phase runs the same
# prompts (no prefix cache) ROUNDS times and prints, per round, a JSON line:
#   {"bench":"eaas_replicas","phase":"no_plan"|"replicas","round":r,"input_len":N,
#    "prompts":P,"prompt_tok_s":..,"xb_share":..,"xb_replicas":..,"splits":..}
# prompt_tok_s is the prompt tokens of the round over its wall time (each
# request asks for 1 token, so prefill dominates); xb_share is xb's share of
# the (token, expert) pairs both servers ran in the round. The two phases
# run one after the other, not alternated: compare medians, and read the
# machine's noise from the spread inside each phase.
# usage: bench/bench_eaas_replicas.sh MODEL [ROUNDS=3] [SLOTS=384] [INPUT_LEN=256] [PROMPTS=4]
# Threads: the client 1, each expert server 1 (2 cores between the three; the
# client waits while the servers compute). EAAS_BIN defaults to build/eaas.
set -uo pipefail
cd "$(dirname "$0")/.."
E=${EAAS_BIN:-build/eaas}
MODEL=${1:?usage: bench_eaas_replicas.sh MODEL [ROUNDS] [SLOTS] [INPUT_LEN] [PROMPTS]}
ROUNDS=${2:-3}; SLOTS=${3:-384}; ILEN=${4:-256}; NP=${5:-4}
tmp=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 1; for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
wait_re() { for _ in $(seq 1 1200); do grep -qE "$2" "$1" && { grep -oE "$2" "$1" | head -1; return 0; }; sleep 0.1; done; cat "$1" >&2; return 1; }
metric() { curl -s --max-time 10 "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'; }
NE=$("$E" inspect --json "$MODEL" | python3 -c 'import json,sys; print(json.load(sys.stdin)["experts"])')
B=$((NE - NE / 8))

"$E" monitor --port 0 --replicate-ms 0 >"$tmp/mon.log" 2>&1 & mon_pid=$!; pids+=($mon_pid)
MON=$(wait_re "$tmp/mon.log" 'listening on [0-9.]+:[0-9]+' | sed 's/listening on //')
"$E" expert --model "$MODEL" --monitor "$MON" --port 0 --id xa --threads 1 --experts "0-$((B - 1))" >"$tmp/xa.log" 2>&1 & pids+=($!)
"$E" expert --model "$MODEL" --monitor "$MON" --port 0 --id xb --threads 1 --experts "$B-$((NE - 1))" \
  --replica-slots "$SLOTS" >"$tmp/xb.log" 2>&1 & pids+=($!)
XA=$(wait_re "$tmp/xa.log" 'listening on [0-9.]+:[0-9]+' | sed 's/.*://'); XB=$(wait_re "$tmp/xb.log" 'listening on [0-9.]+:[0-9]+' | sed 's/.*://')
"$E" serve --model "$MODEL" --port 0 --threads 1 --no-prefix-cache --experts-remote "$MON" 2>"$tmp/cl.log" & pids+=($!)
CP=$(wait_re "$tmp/cl.log" 'listening on http://[0-9.]+:[0-9]+' | sed 's/.*://'); wait_re "$tmp/cl.log" ' ready: ' >/dev/null
LBL="{model_name=\"$(basename "$MODEL")\"}"

# prompts of about ILEN tokens: numbered words
prompt() { python3 -c "import sys; n=int(sys.argv[1]); i=int(sys.argv[2]); print(' '.join('w%d_%d' % (i, j) for j in range(n // 3)))" "$ILEN" "$1"; }
round() { # PHASE ROUND
  local a0 b0 s0 t0 t1 a1 b1 s1 i toks=0 n
  a0=$(metric "$XA" eaas:expert_tokens_total); b0=$(metric "$XB" eaas:expert_tokens_total); s0=$(metric "$CP" "eaas:remote_replica_splits_total$LBL")
  t0=$(date +%s.%N)
  for i in $(seq 1 "$NP"); do
    n=$(curl -s --max-time 600 -H 'Content-Type: application/json' \
      --data-binary "{\"prompt\": \"$(prompt "$i")\", \"max_tokens\": 1}" "http://127.0.0.1:$CP/v1/completions" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"]["prompt_tokens"])')
    toks=$((toks + n))
  done
  t1=$(date +%s.%N)
  a1=$(metric "$XA" eaas:expert_tokens_total); b1=$(metric "$XB" eaas:expert_tokens_total); s1=$(metric "$CP" "eaas:remote_replica_splits_total$LBL")
  python3 -c "import json; a=$a1-$a0; b=$b1-$b0; print(json.dumps({'bench':'eaas_replicas','phase':'$1','round':$2,'input_len':$ILEN,'prompts':$NP,'prompt_tok_s':round($toks/($t1-$t0),2),'xb_share':round(b/max(1,a+b),4),'xb_replicas':int('$(metric "$XB" eaas:expert_replicas)' or 0),'splits':$s1-$s0}))"
}
round no_plan 0 >/dev/null # warm-up: weights paged in
for r in $(seq 1 "$ROUNDS"); do round no_plan "$r"; done

# the planning monitor, on the same port: members register again, the plan follows the load
MPORT=${MON##*:}
kill -TERM "$mon_pid"; wait "$mon_pid" 2>/dev/null
"$E" monitor --port "$MPORT" --replicate-ms 500 >"$tmp/mon2.log" 2>&1 & pids+=($!)
wait_re "$tmp/mon2.log" 'listening on' >/dev/null
prev=-1
for _ in $(seq 1 20); do # until xb's replicas stop changing (bounded)
  round warm 0 >/dev/null
  now=$(metric "$XB" eaas:expert_replicas)
  [ "${now:-0}" -gt 0 ] && [ "$now" = "$prev" ] && break
  prev=$now
done
for r in $(seq 1 "$ROUNDS"); do round replicas "$r"; done
grep -E 'replica plan: ' "$tmp/mon2.log" | tail -2 >&2
