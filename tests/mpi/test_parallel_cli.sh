#!/bin/bash
# test_parallel_cli.sh — `eaas generate --parallel expert|tensor` under real
# mpirun jobs on loopback (OpenMPI: --oversubscribe, root allowed, shared
# memory + TCP transports only).
#
# Asserts what a user relies on:
#   - --parallel expert prints exactly the text one process prints, greedy and
#     seeded, for every family, on 2 ranks (and 4 for two families); only
#     rank 0 prints (a second copy would break the comparison)
#   - --parallel tensor gives the same greedy text where the family splits
#   - bad combinations stop with ONE error line (not one per rank)
#   - start-up prints the per-rank expert table and the memory plan
#   - SIGKILL of one rank mid-generation: (a) by default OpenMPI's mpirun
#     itself notices the death and kills the job (we assert it ends, names
#     rank 1, and leaves no process); (b) with --enable-recovery mpirun lets
#     the survivors run, and each survivor reports "rank(s) 1 did not arrive"
#     and exits within --dist-timeout plus the probe window
set -u
B=${EAAS_BIN:?}
W=${EA_BUILD:?}/mpi-cli
mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none"
pass=0
fail=0
ok() { echo "ok   $1" >&2; pass=$((pass + 1)); }
bad() { echo "FAIL $1" >&2; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" = 0 ]; exit $?; }

if ! "$B" generate --help 2>&1 | grep -q -- '--parallel'; then
    bad "eaas generate has no --parallel flag (engine/cmd_generate integration of src/ep/ep_engine.h missing)"
    finish
fi

GEN="generate --prompt Hello --max-tokens 16 --threads 1"
for f in qwen3_moe qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3; do
    [ -f "$W/$f/config.json" ] || "$B" make-model --family $f --preset tiny --seed 5 --format hf --out "$W/$f" >/dev/null ||
        { bad "make-model $f"; finish; }
done

same() { # name, expected file, got file
    if cmp -s "$2" "$3" && [ -s "$2" ]; then ok "$1"; else
        bad "$1"
        echo "  one process: $(head -c 200 "$2")" >&2
        echo "  parallel:    $(head -c 200 "$3")" >&2
    fi
}

# ---- expert parallel: bit-identical text, greedy and seeded
for f in qwen3_moe qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3; do
    for mode in greedy seeded; do
        if [ $mode = greedy ]; then S="--temperature 0"; else S="--temperature 0.9 --top-p 0.95 --seed 1234"; fi
        "$B" $GEN --model "$W/$f" $S >"$W/one.txt" 2>/dev/null
        $MPI -n 2 "$B" $GEN --model "$W/$f" $S --parallel expert >"$W/ep2.txt" 2>"$W/ep2.err"
        same "expert 2 ranks $f $mode" "$W/one.txt" "$W/ep2.txt"
        if [ $f = qwen3_moe ] || [ $f = deepseek_v3 ]; then
            $MPI -n 4 "$B" $GEN --model "$W/$f" $S --parallel expert >"$W/ep4.txt" 2>/dev/null
            same "expert 4 ranks $f $mode" "$W/one.txt" "$W/ep4.txt"
        fi
    done
done
# the start-up table and plan (from the last 2-rank run: deepseek_v3, 32 experts)
if grep -q "rank 1: routed experts 16-31 of 32" "$W/ep2.err" && grep -q "memory plan per rank" "$W/ep2.err"; then
    ok "start-up expert table and memory plan"
else
    bad "start-up expert table and memory plan"; cat "$W/ep2.err" >&2
fi

# ---- tensor parallel: same greedy text
for f in qwen3_moe qwen2_moe mixtral; do
    "$B" $GEN --model "$W/$f" --temperature 0 >"$W/one.txt" 2>/dev/null
    $MPI -n 2 "$B" $GEN --model "$W/$f" --temperature 0 --parallel tensor >"$W/tp2.txt" 2>/dev/null
    same "tensor 2 ranks $f greedy" "$W/one.txt" "$W/tp2.txt"
done

# ---- validation: one clear line each
one_line() { # name, pattern, command...
    local name=$1 pat=$2
    shift 2
    "$@" >/dev/null 2>"$W/v.err"
    local rc=$? n
    n=$(grep -c "^eaas generate:" "$W/v.err")
    if [ $rc -ne 0 ] && [ "$n" = 1 ] && grep -q -- "$pat" "$W/v.err"; then ok "$name"; else
        bad "$name (rc $rc, $n error lines)"
        cat "$W/v.err" >&2
    fi
}
M="$W/qwen3_moe"
one_line "--parallel without mpirun" "needs an MPI launch" "$B" $GEN --model "$M" --parallel expert
one_line "mpirun without --parallel" "without --parallel" $MPI -n 2 "$B" $GEN --model "$M"
one_line "experts not divisible" "16 routed experts do not split evenly over 3 ranks" $MPI -n 3 "$B" $GEN --model "$M" --parallel expert
one_line "heads not divisible" "do not split over 4 ranks" $MPI -n 4 "$B" $GEN --model "$M" --parallel tensor
one_line "tensor on a full q/k norm family" "use --parallel expert" $MPI -n 2 "$B" $GEN --model "$W/olmoe" --parallel tensor
one_line "tensor on MLA" "uses MLA" $MPI -n 2 "$B" $GEN --model "$W/deepseek_v3" --parallel tensor
one_line "--dist-timeout without --parallel" "needs --parallel" "$B" $GEN --model "$M" --dist-timeout 5
one_line "unknown mode" "not one of expert, tensor" "$B" $GEN --model "$M" --parallel pipeline
one_line "bad deadline" "dist-timeout: 0 is out of range" $MPI -n 2 "$B" $GEN --model "$M" --parallel expert --dist-timeout 0

# ---- fault: SIGKILL rank 1 of 4 mid-generation
fault() { # extra mpirun flags; sets ELAPSED, RC
    $MPI $1 -n 4 "$B" generate --model "$M" --prompt Hello --max-tokens 100000 --ctx 4096 --ignore-eos --temperature 0 \
        --threads 1 --parallel expert --dist-timeout 4 >"$W/fault.out" 2>"$W/fault.err" &
    local mp=$! victim="" i
    for i in $(seq 150); do [ -s "$W/fault.out" ] && break; sleep 0.1; done # rank 0 is printing tokens
    for p in $(pgrep -P $mp); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=1$' && victim=$p
    done
    local t0 t1
    t0=$(date +%s.%N)
    [ -n "$victim" ] && kill -9 "$victim"
    # a hang is the failure we look for: give up after 60 s
    for i in $(seq 600); do kill -0 $mp 2>/dev/null || break; sleep 0.1; done
    t1=$(date +%s.%N)
    if kill -0 $mp 2>/dev/null; then kill -9 -- $mp; RC=hang; else wait $mp; RC=$?; fi
    ELAPSED=$(echo "$t1 - $t0" | bc)
    LEFT=$(pgrep -P $mp | wc -l)
    [ -n "$victim" ] || RC=novictim
}
fault ""
if [ "$RC" != hang ] && [ "$RC" != novictim ] && [ "$RC" != 0 ] && grep -q "process rank 1 .*signal 9" "$W/fault.err" &&
    [ "$LEFT" = 0 ] && [ "$(echo "$ELAPSED < 10" | bc)" = 1 ]; then
    ok "kill rank 1: OpenMPI's mpirun ends the job in ${ELAPSED}s naming rank 1 (rc $RC)"
else
    bad "kill rank 1, default mpirun (rc $RC, ${ELAPSED}s)"; cat "$W/fault.err" >&2
fi
fault "--enable-recovery"
# each survivor names rank 1 (counted by reporting rank: a rank may log it on more than one line)
n=$(grep "rank(s) 1 did not arrive" "$W/fault.err" | grep -o "rank [0-9]*: collective" | sort -u | wc -l)
if [ "$RC" != hang ] && [ "$RC" != novictim ] && [ "$n" = 3 ] && [ "$(echo "$ELAPSED < 4 + 2 + 4" | bc)" = 1 ]; then
    ok "kill rank 1 with --enable-recovery: ranks 0, 2, 3 name rank 1 and exit in ${ELAPSED}s (deadline 4s)"
else
    bad "kill rank 1 with --enable-recovery ($n reports, rc $RC, ${ELAPSED}s)"; cat "$W/fault.err" >&2
fi
finish
