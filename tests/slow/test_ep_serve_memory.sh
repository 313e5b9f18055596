#!/usr/bin/env bash
# test_ep_serve_memory.sh — `mpirun -n 2 eaas serve --parallel expert` on the
# q8_0 `bench` model (24 layers x 64 experts, 2.3 GB GGUF): every rank, rank 0
# included, holds only its share of the weights. After start-up and one
# answered request, each rank's resident and peak memory (read from
# /proc/PID/status, VmRSS and VmHWM) must stay within 10% of the plan the
# start-up prints (replicated + routed/2). Rank 0 loading every expert — what
# serve did while its load-progress callback was set — fails it.
#
# The model is $EA_BENCH_Q8, else out/bench/qwen3_moe-bench-q8_0.gguf, else
# generated into the build directory (slow: 2.3 GB written).
set -u
: "${EAAS_BIN:?}" "${EA_SRC:?}" "${EA_BUILD:?}"
B=$EAAS_BIN
M=${EA_BENCH_Q8:-$EA_SRC/out/bench/qwen3_moe-bench-q8_0.gguf}
if [ ! -f "$M" ]; then
    M=$EA_BUILD/bench-models/qwen3_moe-bench-q8_0.gguf
    mkdir -p "$(dirname "$M")"
    [ -f "$M" ] || "$B" make-model --family qwen3_moe --preset bench --seed 1 --format gguf --dtype q8_0 --out "$M" >/dev/null ||
        { echo "FAIL make-model bench q8_0" >&2; echo "0 passed, 1 failed"; exit 1; }
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LOG=$(mktemp)
MPIPID=""
cleanup() {
    [ -n "$MPIPID" ] && kill -TERM "$MPIPID" 2>/dev/null
    for _ in $(seq 1 100); do [ -n "$MPIPID" ] && kill -0 "$MPIPID" 2>/dev/null || break; sleep 0.1; done
    [ -n "$MPIPID" ] && kill -KILL "$MPIPID" 2>/dev/null
    rm -f "$LOG"
}
trap cleanup EXIT
mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none -n 2 "$B" serve --model "$M" \
    --port 0 --threads 1 --max-running 2 --max-ctx 256 --parallel expert >/dev/null 2>"$LOG" &
MPIPID=$!
for _ in $(seq 1 1800); do
    grep -q " ready: " "$LOG" && break
    kill -0 "$MPIPID" 2>/dev/null || break
    sleep 0.1
done
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1" >&2; }
bad() { fail=$((fail + 1)); echo "FAIL $1" >&2; }
if ! grep -q " ready: " "$LOG"; then
    bad "server not ready"; cat "$LOG" >&2
    echo "$pass passed, $fail failed"; exit 1
fi
PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG" | head -1)
curl -s -m 120 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"Hello","max_tokens":4,"temperature":0}' | grep -q '"text"' && ok "one request answered" || bad "request"

# the plan: "memory plan per rank: replicated R MiB + routed r of T MiB ..."
read -r rep rr rt < <(awk '/memory plan per rank/ { for (i = 1; i <= NF; i++) { if ($i == "replicated") rep = $(i+1);
                           if ($i == "routed") { rr = $(i+1); rt = $(i+3) } } print rep, rr, rt; exit }' "$LOG")
grep "^eaas:\|memory plan\|resident" "$LOG" | grep -v "^$" | head -8 >&2
if [ -z "${rep:-}" ] || [ -z "${rr:-}" ]; then
    bad "no memory plan line"
    echo "$pass passed, $fail failed"; exit 1
fi
plan=$(awk -v a="$rep" -v b="$rr" 'BEGIN { print a + b }')
n=0
for pid in $(pgrep -f "eaas serve --model $M" | sort -n); do
    [ -r "/proc/$pid/status" ] || continue
    # only the rank processes, not mpirun itself
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "^mpirun" && continue
    rss=$(awk '/^VmRSS:/ { print $2 / 1024 }' "/proc/$pid/status")
    hwm=$(awk '/^VmHWM:/ { print $2 / 1024 }' "/proc/$pid/status")
    n=$((n + 1))
    if awk -v h="$hwm" -v p="$plan" 'BEGIN { exit !(h <= p * 1.10) }'; then
        ok "rank process $pid: resident $rss MiB, peak $hwm MiB <= plan $plan MiB + 10%"
    else
        bad "rank process $pid: peak $hwm MiB > plan $plan MiB + 10% (resident $rss MiB)"
    fi
done
[ "$n" -eq 2 ] && ok "two rank processes measured" || bad "$n rank processes found, expected 2"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
