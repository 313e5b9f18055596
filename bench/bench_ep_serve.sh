#!/usr/bin/env bash
# bench_ep_serve.sh — output tokens/s of `eaas bench serve` at concurrency 1, 16
# and 64 against three servers of the same model, in the same run (issue 21):
# one process, `--parallel expert` on N ranks (attention replicated: every rank
# runs every request), and `--parallel expert --dp-attention` on N ranks (each
# request on one rank). Every server gets `--threads T` per process; with N
# ranks on a machine of N*T cores each configuration uses the same cores.
# Rounds alternate the configurations. JSON lines on stdout:
#   {"bench":"ep_serve","config":"dp","ranks":2,"concurrency":16,"round":1,"output_throughput":..,"request_throughput":..}
# then per concurrency the medians and the dp / replicated ratio.
#
#   bash bench/bench_ep_serve.sh MODEL [--ranks 2] [--threads 1] [--rounds 2] [--input-len 64] [--output-len 32]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
EAAS=${EAAS_BIN:-$here/build/eaas}
model=$1; shift
N=2 T=1 R=2 IN=64 OUT=32
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) N=$2; shift 2 ;; --threads) T=$2; shift 2 ;; --rounds) R=$2; shift 2 ;;
    --input-len) IN=$2; shift 2 ;; --output-len) OUT=$2; shift 2 ;;
    *) echo "bench_ep_serve.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none -n $N"
out=$(mktemp /tmp/bench_ep_serve.XXXXXX.jsonl)
log=$(mktemp /tmp/bench_ep_serve.XXXXXX.log)
PID=""
trap '[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; rm -f "$log"' EXIT
start() { # CONFIG: starts the server, sets PID and PORT
  : >"$log"
  case $1 in
    one) "$EAAS" serve --model "$model" --port 0 --threads $((N * T)) --max-running 64 >/dev/null 2>>"$log" & ;;
    replicated) $MPI "$EAAS" serve --model "$model" --port 0 --threads "$T" --max-running 64 --parallel expert >/dev/null 2>>"$log" & ;;
    dp) $MPI "$EAAS" serve --model "$model" --port 0 --threads "$T" --max-running 64 --parallel expert --dp-attention >/dev/null 2>>"$log" & ;;
  esac
  PID=$!
  for _ in $(seq 1 1200); do
    grep -q "ready:" "$log" && break
    kill -0 "$PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
}
stop() { kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }
printf '{"bench":"ep_serve_machine","cpu":"%s","nproc":%d,"loadavg":"%s","ranks":%d,"threads":%d}\n' \
  "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$N" "$T" | tee -a "$out"
configs=(one replicated dp)
for rd in $(seq 1 "$R"); do
  order=("${configs[@]}"); [ $((rd % 2)) -eq 0 ] && order=(dp replicated one)
  for cfg in "${order[@]}"; do
    start "$cfg"
    for C in 1 16 64; do
      np=$((C < 4 ? 4 : C * 2))
      line=$("$EAAS" bench serve --url "http://127.0.0.1:$PORT" --concurrency "$C" --num-prompts "$np" \
        --input-len "$IN" --output-len "$OUT" --json 2>/dev/null | tail -1)
      python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(json.dumps({"bench": "ep_serve", "config": sys.argv[2], "ranks": int(sys.argv[3]), "concurrency": int(sys.argv[4]),
                  "round": int(sys.argv[5]), "output_throughput": d["output_throughput"],
                  "request_throughput": d["request_throughput"], "ttft_ms_p50": d["ttft_ms"]["p50"],
                  "tpot_ms_p50": d["tpot_ms"]["p50"]}))' "$line" "$cfg" "$N" "$C" "$rd" | tee -a "$out"
    done
    stop
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"ep_serve"' in l]
for c in (1, 16, 64):
    m = {cfg: statistics.median([r["output_throughput"] for r in rows if r["config"] == cfg and r["concurrency"] == c])
         for cfg in ("one", "replicated", "dp")}
    print(json.dumps({"bench": "ep_serve_summary", "concurrency": c, **{f"{k}_tok_s": round(v, 2) for k, v in m.items()},
                      "dp_over_replicated": round(m["dp"] / m["replicated"], 3), "dp_over_one": round(m["dp"] / m["one"], 3)}))
PY
echo "all lines: $out" >&2
