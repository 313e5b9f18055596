#!/usr/bin/env bash
# bench_structured.sh — decode tokens/s at batch 1 and 16 with and without a
# nested JSON Schema constraint (response_format json_schema), one server,
# alternating modes within each round (the machine is shared: compare ranges).
# Prints JSON lines (bench_structured.mjs). Not run in CI.
# usage: bench/bench_structured.sh MODEL [ROUNDS=3] [BATCHES="1 16"] [OUTPUT_LEN=64] [THREADS=2]
set -uo pipefail
cd "$(dirname "$0")/.."
E=${EAAS_BIN:-build/eaas}
MODEL=${1:?usage: bench_structured.sh MODEL [ROUNDS] [BATCHES] [OUTPUT_LEN] [THREADS]}
ROUNDS=${2:-3}; BATCHES=${3:-1 16}; OLEN=${4:-64}; THREADS=${5:-2}
tmp=$(mktemp -d); pid=""
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; sleep 1; [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
"$E" serve --model "$MODEL" --served-model-name bench --port 0 --threads "$THREADS" --max-running 16 2>"$tmp/log" & pid=$!
for _ in $(seq 1 1200); do grep -q ' ready: ' "$tmp/log" && break; kill -0 "$pid" 2>/dev/null || { cat "$tmp/log" >&2; exit 1; }; sleep 0.1; done
PORT=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$tmp/log" | head -1 | sed 's/.*://')
EA_SRC=$PWD node bench/bench_structured.mjs "http://127.0.0.1:$PORT/v1" "$ROUNDS" "$BATCHES" "$OLEN"
