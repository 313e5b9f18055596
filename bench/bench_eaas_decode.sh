#!/usr/bin/env bash
# bench_eaas_decode.sh — decode throughput with the experts on expert servers
# (1 client + 2 servers, each server hosting half of the experts) against the
# same model served with its experts in process, on this machine, in the same
# run, alternating; and a second client on the same servers with double-batch
# overlap (--enable-dbo). Prints JSON lines:
#   {"bench":"eaas_decode","mode":"local"|"remote"|"remote_dbo","batch":B,"round":r,"input_len":N,
#    "output_tok_s":..,"tpot_ms_p50":..,"ttft_ms_p50":..}
# usage: bench/bench_eaas_decode.sh MODEL [ROUNDS=3] [BATCHES="1 16"] [OUTPUT_LEN=64]
# MODES (environment) picks and orders the modes of a round: "local remote remote_dbo";
# INPUT_LEN the prompt tokens (16; 512 with OUTPUT_LEN 2 and batch 1 measures a prompt's prefill: ttft);
# SERVE_ARGS more flags for the local server and the clients (the prompts are
# the same every round: measure prefill with SERVE_ARGS=--no-prefix-cache).
# Threads: the local server gets 2 (all cores); each client 1 and each expert
# server 1 (the same 2 cores between them; the client not measured is idle).
# PIN=1 (environment): the clients run on CPU 0 and the expert servers on CPU 1
# (taskset), as if the servers were another host with a core of its own; the
# local server keeps both. EAAS_BIN defaults to build/eaas.
set -uo pipefail
cd "$(dirname "$0")/.."
E=${EAAS_BIN:-build/eaas}
MODEL=${1:?usage: bench_eaas_decode.sh MODEL [ROUNDS] [BATCHES] [OUTPUT_LEN]}
ROUNDS=${2:-3}; BATCHES=${3:-1 16}; OLEN=${4:-64}; MODES=${MODES:-local remote remote_dbo}; ILEN=${INPUT_LEN:-16}
CL=(); XS=(); [ "${PIN:-0}" = 1 ] && CL=(taskset -c 0) XS=(taskset -c 1)
read -ra SA <<<"${SERVE_ARGS:-}"
tmp=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 1; for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
wait_re() { for _ in $(seq 1 1200); do grep -qE "$2" "$1" && { grep -oE "$2" "$1" | head -1; return 0; }; sleep 0.1; done; cat "$1" >&2; return 1; }
NE=$("$E" inspect --json "$MODEL" | python3 -c 'import json,sys; print(json.load(sys.stdin)["experts"])')

"$E" serve --model "$MODEL" --port 0 --threads 2 "${SA[@]}" 2>"$tmp/local.log" & pids+=($!)
LP=$(wait_re "$tmp/local.log" 'listening on http://[0-9.]+:[0-9]+' | sed 's/.*://'); wait_re "$tmp/local.log" ' ready: ' >/dev/null
"$E" monitor --port 0 >"$tmp/mon.log" 2>&1 & pids+=($!)
MON=$(wait_re "$tmp/mon.log" 'listening on [0-9.]+:[0-9]+' | sed 's/listening on //')
"${XS[@]}" "$E" expert --model "$MODEL" --monitor "$MON" --port 0 --id xa --threads 1 --experts "0-$((NE / 2 - 1))" >"$tmp/xa.log" 2>&1 & pids+=($!)
"${XS[@]}" "$E" expert --model "$MODEL" --monitor "$MON" --port 0 --id xb --threads 1 --experts "$((NE / 2))-$((NE - 1))" >"$tmp/xb.log" 2>&1 & pids+=($!)
wait_re "$tmp/xa.log" 'listening on' >/dev/null && wait_re "$tmp/xb.log" 'listening on' >/dev/null
"${CL[@]}" "$E" serve --model "$MODEL" --port 0 --threads 1 --experts-remote "$MON" "${SA[@]}" 2>"$tmp/remote.log" & pids+=($!)
RP=$(wait_re "$tmp/remote.log" 'listening on http://[0-9.]+:[0-9]+' | sed 's/.*://'); wait_re "$tmp/remote.log" ' ready: ' >/dev/null
"${CL[@]}" "$E" serve --model "$MODEL" --port 0 --threads 1 --experts-remote "$MON" --enable-dbo "${SA[@]}" 2>"$tmp/dbo.log" & pids+=($!)
DP=$(wait_re "$tmp/dbo.log" 'listening on http://[0-9.]+:[0-9]+' | sed 's/.*://'); wait_re "$tmp/dbo.log" ' ready: ' >/dev/null
port_of() { case $1 in local) echo "$LP" ;; remote) echo "$RP" ;; remote_dbo) echo "$DP" ;; esac; }

run() { # MODE PORT BATCH ROUND
  "$E" bench serve --url "http://127.0.0.1:$2" --concurrency "$3" --num-prompts "$(( $3 * 2 ))" --input-len "$ILEN" \
    --output-len "$OLEN" --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(json.dumps({"bench":"eaas_decode","mode":sys.argv[1],"batch":int(sys.argv[2]),"round":int(sys.argv[3]),"input_len":int(sys.argv[4]),"output_tok_s":d.get("output_tok_s",d.get("output_throughput")),"tpot_ms_p50":d.get("tpot_ms",{}).get("p50") if isinstance(d.get("tpot_ms"),dict) else d.get("tpot_p50_ms"),"ttft_ms_p50":d.get("ttft_ms",{}).get("p50")}))' "$1" "$3" "$4" "$ILEN"
}
for b in $BATCHES; do
  for m in $MODES; do run "$m" "$(port_of "$m")" "$b" 0 >/dev/null; done   # warm-up: weights paged in
  for r in $(seq 1 "$ROUNDS"); do for m in $MODES; do run "$m" "$(port_of "$m")" "$b" "$r"; done; done
done
curl -s "http://127.0.0.1:$DP/metrics" | grep -E '^eaas:remote_(calls|overlapped_calls)_total' >&2
