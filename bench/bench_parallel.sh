#!/bin/bash
# bench_parallel.sh — EP vs TP on 2 ranks: decode (batch 1, 16, 64) and prefill
# (512) tokens/s, then the EP/TP ratio per case (seed 000's table), all as JSON
# lines on stdout. Prints the machine load before and after (shared machine).
#   bench/bench_parallel.sh BUILD_DIR MODEL [ranks=2] [steps=8]
set -eu
BUILD=$1 MODEL=$2 N=${3:-2} STEPS=${4:-8}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none"
load() { printf '{"bench":"parallel_load","when":"%s","loadavg":"%s","cpus":%d}\n' "$1" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"; }
out=$(mktemp)
load before | tee -a "$out"
for mode in expert tensor; do
    $MPI -n "$N" "$BUILD/bench/bench_parallel" --model "$MODEL" --parallel $mode --threads 1 --steps "$STEPS" \
        --batches 1,16,64 --prefill 512 | tee -a "$out"
done
load after | tee -a "$out"
awk -F'[,:]' '
/parallel_(decode|prefill)/ {
    mode = ""; key = ""; tps = 0
    for (i = 1; i < NF; i++) {
        if ($i ~ /"mode"/) { mode = $(i+1); gsub(/"/, "", mode) }
        if ($i ~ /"batch"/) key = "decode_b" $(i+1)
        if ($i ~ /"tokens"/) key = "prefill_" $(i+1)
        if ($i ~ /"tok_s"/) tps = $(i+1) + 0
    }
    v[mode "," key] = tps; keys[key] = 1
}
END { for (k in keys) if (v["tensor," k] > 0)
        printf "{\"bench\":\"parallel_ratio\",\"case\":\"%s\",\"ep_tok_s\":%.2f,\"tp_tok_s\":%.2f,\"ep_over_tp\":%.3f}\n", k, v["expert," k], v["tensor," k], v["expert," k] / v["tensor," k] }' "$out" | sort
rm -f "$out"
