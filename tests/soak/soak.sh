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
#   dp2-eplb 2 ranks, --dp-attention --eplb rebalancing every 2 steps
#   remote   a monitor, two expert servers, --experts-remote (also with
#            --enable-dbo --max-batch-tokens 64)
# and every answer must be byte-identical to the reference, every process
# exit 0. Prints ok or FAIL per run (with /metrics' preemptions; a FAIL with
# the diff's first lines) and exits non-zero if any run failed.
# It found the dp-attention matmul-context abort and three expert-server
# connection bugs (2026-11-26; docs/testing.md "Soak").
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export EA_SRC=${EA_SRC:-$(cd "$here/../.." && pwd)}
export EA_BUILD=${EA_BUILD:-$EA_SRC/build}
export EAAS_BIN=${EAAS_BIN:-$EA_BUILD/eaas}
. "$EA_SRC/tests/ucx/cluster_lib.sh"    # start_monitor, start_expert (in $tmp)
. "$EA_SRC/tests/mpi/mpi_lib.sh"        # start, stop_job, ok/bad, mpi_summary, $MPI (after: its ok/bad count)
tmp=${EA_SOAK_DIR:-$(mktemp -d)}
SEED=${EA_SOAK_SEED:-1}
trap 'kill_own KILL "${PIDS[@]}" "${cl_pids[@]}"; [ -n "${EA_SOAK_DIR:-}" ] || rm -rf "$tmp"' EXIT
R="/usr/bin/python3 $here/soak_req.py"

verdict() { # TAG RC [EXTRA]
  if [ "$2" = 0 ] && cmp -s "$tmp/$fam-ref.txt" "$tmp/$fam-$1.txt"; then ok "$fam $1 ${3:-}"
  else bad "$fam $1: exit $2; $(diff "$tmp/$fam-ref.txt" "$tmp/$fam-$1.txt" | head -3 | cut -c1-200)"; fi
}
run() { # TAG seq|conc CMD... (a serve command; --model, --port and --threads are added)
  local tag=$1 mode=$2 pre rc; shift 2
  start "$tmp/$fam-$tag.log" "$@" --model "$M" --port 0 --threads 1 || { bad "$fam $tag: did not start"; return; }
  $R "$PORT" 24 "$SEED" "$mode" > "$tmp/$fam-$tag.txt"
  pre=$(curl -s -m 5 "http://127.0.0.1:$PORT/metrics" | awk '$1 ~ /^eaas:num_preemptions_total/ {print $2}')
  stop_job; rc=$?
  [ "$tag" = ref ] || verdict "$tag" "$rc" "(preemptions ${pre:-?})"
}
remote() { # TAG ARGS...: a monitor, two expert servers and a client
  local tag=$1 rc; shift
  start_monitor || { bad "$fam $tag: monitor"; return; }
  start_expert soak_a --model "$M" --threads 1 && start_expert soak_b --model "$M" --threads 1 ||
    { bad "$fam $tag: expert servers"; return; }
  run "$tag" conc "$EAAS_BIN" serve --experts-remote "$MON" "$@"
  kill -TERM "$XPID_soak_a" "$XPID_soak_b" "$MON_PID"; wait "$XPID_soak_a" "$XPID_soak_b" "$MON_PID" 2>/dev/null
}

fams=("$@")
[ ${#fams[@]} -gt 0 ] || fams=(qwen3_moe qwen3_5_moe deepseek_v3)
for fam in "${fams[@]}"; do
  M="$tmp/m-$fam"
  [ -d "$M" ] || "$EAAS_BIN" make-model --family "$fam" --preset tiny --seed 7 --format hf --out "$M" > /dev/null || exit 1
  run ref seq "$EAAS_BIN" serve; echo "     $fam: the reference ran (one request after another)" >&2
  run conc conc "$EAAS_BIN" serve
  run small conc "$EAAS_BIN" serve --max-batch-tokens 64 --kv-cache-mib 1
  run nopc conc "$EAAS_BIN" serve --no-prefix-cache --max-running 3
  rm -rf "$tmp/kvd-$fam"
  run disk-cold conc "$EAAS_BIN" serve --kv-disk-dir "$tmp/kvd-$fam" --kv-cache-mib 1 --max-batch-tokens 64
  run disk-warm conc "$EAAS_BIN" serve --kv-disk-dir "$tmp/kvd-$fam" --kv-cache-mib 1 --max-batch-tokens 64
  run ep conc $MPI -n 2 "$EAAS_BIN" serve --parallel expert --max-batch-tokens 64
  run dp2 conc $MPI -n 2 "$EAAS_BIN" serve --parallel expert --dp-attention --max-batch-tokens 64 --kv-cache-mib 1
  run dp4 conc $MPI -n 4 "$EAAS_BIN" serve --parallel expert --dp-attention --max-batch-tokens 64 --kv-cache-mib 1
  run dp2-eplb conc $MPI -n 2 "$EAAS_BIN" serve --parallel expert --dp-attention --max-batch-tokens 64 \
    --eplb --eplb-redundant 2 --eplb-interval 2 --eplb-window 16 --eplb-min-balancedness 0.99
  remote remote
  remote remote-dbo --enable-dbo --max-batch-tokens 64
done
mpi_summary
