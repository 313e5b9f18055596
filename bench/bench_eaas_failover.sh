#!/usr/bin/env bash
# bench_eaas_failover.sh — output tokens/s over time through the SIGKILL of one of
# two expert servers that are replicas (bench_eaas_failover.mjs writes OUT.jsonl
# and OUT.svg). usage: bench/bench_eaas_failover.sh MODEL [STREAMS=16] [DURATION_S=40] [OUT=out/bench/eaas_failover]
set -uo pipefail
cd "$(dirname "$0")/.."
E=${EAAS_BIN:-build/eaas}
MODEL=${1:?usage: bench_eaas_failover.sh MODEL [STREAMS] [DURATION_S] [OUT]}
N=${2:-16}; DUR=${3:-40}; OUT=${4:-out/bench/eaas_failover}
mkdir -p "$(dirname "$OUT")"
tmp=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
wait_re() { for _ in $(seq 1 1200); do grep -qE "$2" "$1" && { grep -oE "$2" "$1" | head -1; return 0; }; sleep 0.1; done; cat "$1" >&2; return 1; }
"$E" monitor --port 0 >"$tmp/mon.log" 2>&1 & pids+=($!)
MON=$(wait_re "$tmp/mon.log" 'listening on [0-9.]+:[0-9]+' | sed 's/listening on //')
"$E" expert --model "$MODEL" --monitor "$MON" --port 0 --id xa --threads 1 >"$tmp/xa.log" 2>&1 & XA=$!; pids+=($XA)
"$E" expert --model "$MODEL" --monitor "$MON" --port 0 --id xb --threads 1 >"$tmp/xb.log" 2>&1 & pids+=($!)
wait_re "$tmp/xa.log" 'listening on' >/dev/null && wait_re "$tmp/xb.log" 'listening on' >/dev/null
"$E" serve --model "$MODEL" --port 0 --threads 1 --experts-remote "$MON" --expert-timeout-ms "${EXPERT_TIMEOUT_MS:-300}" 2>"$tmp/client.log" & pids+=($!)
CP=$(wait_re "$tmp/client.log" 'listening on http://[0-9.]+:[0-9]+' | sed 's/.*://'); wait_re "$tmp/client.log" ' ready: ' >/dev/null
EA_SRC="$PWD" node bench/bench_eaas_failover.mjs "http://127.0.0.1:$CP/v1" "$N" "$DUR" "$XA" "$OUT"
curl -s "http://127.0.0.1:$CP/metrics" | grep -E '^eaas:remote_(failovers|timeouts)_total' >&2
