#!/usr/bin/env bash
# soak.sh — long-running load on `eaas serve` (not in CI): N concurrent
# streams for D seconds through `eaas bench serve`, sampling the server's
# resident memory every few seconds. Passes when no request failed and RSS
# after warm-up stays flat (last sample within 5% + 16 MiB of the first
# sample taken after the warm-up).
#
#   scripts/soak.sh [--model DIR] [--concurrency 64] [--seconds 600] [--warmup 60]
#                   [--input-len 64] [--output-len 128] [--kv-cache-mib 32] [--build build]
#
# Without --model it makes the tiny qwen3_moe test model. Prints one
# "rss_mib t=..." line per sample and a final JSON line.
#
# --kv-cache-mib (default 32) bounds the KV cache: its pages are first
# touched as the prefix cache's LRU cycles through free blocks, so RSS grows
# until every block has been used once. That is warm-up, not a leak; a small
# cache makes it end within the warm-up window.
set -uo pipefail
cd "$(dirname "$0")/.."
model="" conc=64 secs=600 warm=60 ilen=64 olen=128 kv=32 build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --concurrency) conc=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --warmup) warm=$2; shift 2 ;;
    --input-len) ilen=$2; shift 2 ;;
    --output-len) olen=$2; shift 2 ;;
    --kv-cache-mib) kv=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "soak.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
bin="$PWD/$build/eaas"
[ -x "$bin" ] || { echo "soak.sh: build first ($bin missing)" >&2; exit 2; }
tmp=$(mktemp -d)
srv=""
cleanup() {
  [ -n "$srv" ] && kill -TERM "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
if [ -z "$model" ]; then
  model="$tmp/model"
  "$bin" make-model --family qwen3_moe --preset tiny --seed 1 --format hf --out "$model" >/dev/null || exit 1
fi
"$bin" serve --model "$model" --port 0 --max-running "$conc" --max-queue $((conc * 2)) --kv-cache-mib "$kv" >"$tmp/log" 2>&1 &
srv=$!
for _ in $(seq 1 600); do grep -q " ready: " "$tmp/log" && break; sleep 0.1; done
grep -q " ready: " "$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$tmp/log" | head -1 | sed 's/.*://')

rss_mib() { awk '/^VmRSS:/{printf "%.1f", $2 / 1024}' "/proc/$srv/status"; }

# keep the load going for the whole duration: rounds of bench runs
(
  end=$(($(date +%s) + secs))
  round=0
  while [ "$(date +%s)" -lt "$end" ]; do
    "$bin" bench serve --url "http://127.0.0.1:$port" --concurrency "$conc" --num-prompts $((conc * 4)) \
      --input-len "$ilen" --output-len "$olen" --seed "$round" --json >>"$tmp/bench.jsonl" 2>>"$tmp/bench.err"
    round=$((round + 1))
  done
) &
load=$!

t0=$(date +%s)
first=""
last=""
while kill -0 "$load" 2>/dev/null; do
  sleep 5
  t=$(($(date +%s) - t0))
  r=$(rss_mib)
  echo "rss_mib t=$t $r"
  if [ "$t" -ge "$warm" ]; then
    [ -z "$first" ] && first=$r
    last=$r
  fi
done
wait "$load"

runs=$(wc -l <"$tmp/bench.jsonl")
failed=$(python3 -c 'import json,sys; print(sum(json.loads(l)["failed"] for l in open(sys.argv[1])))' "$tmp/bench.jsonl")
done_=$(python3 -c 'import json,sys; print(sum(json.loads(l)["completed"] for l in open(sys.argv[1])))' "$tmp/bench.jsonl")
tps=$(python3 -c 'import json,sys; v=[json.loads(l)["output_throughput"] for l in open(sys.argv[1])]; print(round(sum(v)/len(v),1))' "$tmp/bench.jsonl")
flat=$(python3 -c "f=float('${first:-0}'); l=float('${last:-0}'); print(1 if l <= f*1.05 + 16 else 0)")
echo "{\"soak\":\"serve\",\"concurrency\":$conc,\"seconds\":$secs,\"bench_runs\":$runs,\"completed\":$done_,\"failed\":$failed,\"mean_output_tok_s\":$tps,\"rss_mib_after_warmup\":${first:-0},\"rss_mib_end\":${last:-0},\"rss_flat\":$flat}"
[ "$failed" = 0 ] && [ "$flat" = 1 ]
