#!/usr/bin/env bash
# soak.sh [FAMILY...] — serving under load against one process, outside CI
# (about 2-4 minutes per family on 2 cores; EA_SOAK_SEED, default 1).
#
# For each family (default: qwen3_moe qwen3_5_moe deepseek_v3; tiny models),
# soak_req.py's 24 requests run one after another on one `eaas serve` (the
# reference), then all at once on each of:
#   conc     the same server
#   small    --max-batch-tokens 64 --kv-cache-mib 1 (chunked prefill, preemption)
#   nopc     --no-prefix-cache --max-running 3
#   disk     --kv-disk-dir, cold then warm (small KV cache)
#   ep       2 ranks, --parallel expert --max-batch-tokens 64
#   dp2/dp4  2 and 4 ranks, --dp-attention, small batch and KV cache
#   remote   a monitor, two expert servers, --experts-remote (also with
#            --enable-dbo --max-batch-tokens 64)
# and every answer must be byte-identical to the reference, every process
# exit 0. Prints one line per run (with /metrics' preemptions), the diff's
# first lines when one differs, and exits non-zero if any run failed.
# It found the dp-attention matmul-context abort and three expert-server
# connection bugs (2026-11-26; docs/testing.md "Soak").
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${EAAS_BIN:-$here/../../build/eaas}
W=${EA_SOAK_DIR:-/tmp/eaas-soak-$$}
SEED=${EA_SOAK_SEED:-1}
mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none"
R="/usr/bin/python3 $here/soak_req.py"
fails=0 PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done' EXIT

wait_for() { # LOG REGEX: the first match within 120 s
  local i
  for i in $(seq 1 1200); do grep -qE "$2" "$1" && { grep -oE "$2" "$1" | head -1; return 0; }; sleep 0.1; done
  return 1
}
verdict() { # TAG RC [EXTRA]
  if [ "$2" = 0 ] && cmp -s "$W/$fam-ref.txt" "$W/$fam-$1.txt"; then echo "ok   $fam $1 ${3:-}"
  else echo "FAIL $fam $1: exit $2; $(diff "$W/$fam-ref.txt" "$W/$fam-$1.txt" | head -3 | cut -c1-200)"; fails=$((fails + 1)); fi
}
run() { # TAG seq|conc CMD... (a serve command; --model, --port and --threads are added)
  local tag=$1 mode=$2 log="$W/$fam-$1.log" pre="" rc r0="" c; shift 2
  : > "$log"
  "$@" --model "$M" --port 0 --threads 1 > /dev/null 2>> "$log" & local P=$!; PIDS+=("$P")
  wait_for "$log" ' ready: ' > /dev/null
  local PORT; PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
  $R "${PORT:-1}" 24 "$SEED" "$mode" > "$W/$fam-$tag.txt"
  pre=$(curl -s -m 5 "http://127.0.0.1:$PORT/metrics" | awk '$1 ~ /^eaas:num_preemptions_total/ {print $2}')
  for c in $(pgrep -P "$P"); do tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && r0=$c; done
  kill -TERM "${r0:-$P}"; wait "$P"; rc=$?
  [ "$tag" = ref ] && { echo "     $fam ref (one after another)"; return; }
  verdict "$tag" "$rc" "(preemptions ${pre:-?})"
}
remote() { # TAG ARGS...: monitor + two expert servers + a client
  local tag=$1 L="$W/$fam-$1" rc; shift
  mkdir -p "$L"
  "$B" monitor --port 0 > "$L/mon.log" 2>&1 & local MP=$!; PIDS+=("$MP")
  local MON; MON=$(wait_for "$L/mon.log" 'listening on [0-9.]+:[0-9]+' | sed 's/listening on //')
  local XP=() x
  for x in a b; do
    "$B" expert --model "$M" --monitor "$MON" --port 0 --id "soak-$x" --threads 1 > "$L/ex-$x.log" 2>&1 & XP+=($!); PIDS+=($!)
    wait_for "$L/ex-$x.log" 'listening on' > /dev/null
  done
  "$B" serve --model "$M" --port 0 --threads 1 --experts-remote "$MON" "$@" 2> "$L/serve.log" & local P=$!; PIDS+=("$P")
  wait_for "$L/serve.log" ' ready: ' > /dev/null
  local PORT; PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$L/serve.log" | head -1)
  $R "${PORT:-1}" 24 "$SEED" conc > "$W/$fam-$tag.txt"
  kill -TERM "$P"; wait "$P"; rc=$?
  kill -TERM "${XP[@]}" "$MP"; wait "${XP[@]}" "$MP" 2>/dev/null
  verdict "$tag" "$rc"
}

fams=("$@")
[ ${#fams[@]} -gt 0 ] || fams=(qwen3_moe qwen3_5_moe deepseek_v3)
for fam in "${fams[@]}"; do
  M="$W/m-$fam"
  [ -d "$M" ] || "$B" make-model --family "$fam" --preset tiny --seed 7 --format hf --out "$M" > /dev/null || exit 1
  run ref seq "$B" serve
  run conc conc "$B" serve
  run small conc "$B" serve --max-batch-tokens 64 --kv-cache-mib 1
  run nopc conc "$B" serve --no-prefix-cache --max-running 3
  rm -rf "$W/kvd-$fam"
  run disk-cold conc "$B" serve --kv-disk-dir "$W/kvd-$fam" --kv-cache-mib 1 --max-batch-tokens 64
  run disk-warm conc "$B" serve --kv-disk-dir "$W/kvd-$fam" --kv-cache-mib 1 --max-batch-tokens 64
  run ep conc $MPI -n 2 "$B" serve --parallel expert --max-batch-tokens 64
  run dp2 conc $MPI -n 2 "$B" serve --parallel expert --dp-attention --max-batch-tokens 64 --kv-cache-mib 1
  run dp4 conc $MPI -n 4 "$B" serve --parallel expert --dp-attention --max-batch-tokens 64 --kv-cache-mib 1
  remote remote
  remote remote-dbo --enable-dbo --max-batch-tokens 64
done
[ -z "${EA_SOAK_DIR:-}" ] && rm -rf "$W"
echo "soak: $fails failed"
[ "$fails" -eq 0 ]
