#!/bin/bash
# test_ep_memory.sh — resident memory per rank under --parallel expert on the
# qwen3_moe `bench` model (24 layers x 64 experts, 4.1 GB bf16), 2 ranks.
#
# Each rank pages in the replicated weights and only its own experts
# (ea_model_load_experts with its mask), so its peak RSS must stay within
# (replicated + routed/2) + 10% — the plan the start-up prints, which the test
# also checks against the model's total (plan = total - routed/2). The model is
# $EA_BENCH_MODEL, else out/bench/qwen3_moe-bench-hf, else generated into the
# build directory (slow: 4 GB written).
set -u
B=${EAAS_BIN:?}
M=${EA_BENCH_MODEL:-${EA_SRC:?}/out/bench/qwen3_moe-bench-hf}
if [ ! -f "$M/config.json" ]; then
    M=${EA_BUILD:?}/bench-models/qwen3_moe-bench-hf
    [ -f "$M/config.json" ] || "$B" make-model --family qwen3_moe --preset bench --seed 1 --format hf --out "$M" >/dev/null ||
        { echo "FAIL make-model bench" >&2; echo "0 passed, 1 failed"; exit 1; }
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none -n 2 "$B" generate --model "$M" \
    --prompt Hello --max-tokens 4 --ctx 256 --threads 1 --temperature 0 --parallel expert 2>&1 >/dev/null)
echo "$out" | grep "^eaas:" >&2
echo "$out" | awk '
/memory plan per rank/ { for (i = 1; i <= NF; i++) { if ($i == "replicated") rep = $(i+1); if ($i == "routed") { rr = $(i+1); rt = $(i+3) }
                         if ($i == "process:") one = $(i+1) } }
/: resident .* peak / { for (i = 1; i <= NF; i++) if ($i == "peak") { peak[n++] = $(i+1) } }
END {
    pass = 0; fail = 0
    plan = rep + rr
    if (n == 2 && rep > 0 && rt > 0 && (rr - rt / 2) < 0.1 && (rr - rt / 2) > -0.1 && one - rep - rt < 0.2) { pass++; print "ok   plan: replicated " rep " MiB + routed " rr " of " rt " MiB" > "/dev/stderr" }
    else { fail++; print "FAIL plan line or rank lines missing (" n " ranks)" > "/dev/stderr" }
    for (i = 0; i < n; i++) {
        if (peak[i] <= plan * 1.10) { pass++; printf "ok   rank %d peak %.1f MiB <= %.1f MiB (plan %.1f + 10%%; one process %.1f)\n", i, peak[i], plan * 1.1, plan, one > "/dev/stderr" }
        else { fail++; printf "FAIL rank %d peak %.1f MiB > %.1f MiB\n", i, peak[i], plan * 1.1 > "/dev/stderr" }
    }
    printf "%d passed, %d failed\n", pass, fail
    exit fail ? 1 : 0
}'
