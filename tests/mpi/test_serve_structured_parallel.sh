#!/usr/bin/env bash
# test_serve_structured_parallel.sh — structured outputs under --parallel: the
# grammar's source crosses the control bus in the submit event and every rank
# compiles it (constraint.c: ea_oai_constraint_compile), so on 2 ranks with
# --parallel expert (every rank samples the same token) and with --dp-attention
# (each request runs on one rank) seeded json_schema, guided_regex and
# tool_choice "required" requests (structured_req.py: 4 one after another, 8 at
# once, 2 streamed) answer
# byte-identically to one process, and every output that finished validates.
# qwen3_5_moe (with --reasoning-parser qwen3) adds the grammar that waits for the
# think block its prompt opens: the gate crosses the bus in the submit event too;
# kimi_k2 (Kimi's files on DeepSeek-V3's architecture) adds its call syntax,
# whose index the grammar leaves to the model, and its tiktoken tokenizer.
set -euo pipefail
. "$(dirname "$0")/mpi_lib.sh"
W="$EA_BUILD/golden-models/serve-structured-par"
mkdir -p "$W"
R="/usr/bin/python3 $EA_SRC/tests/mpi/structured_req.py"

for fam in qwen3_moe deepseek_v3 qwen3_5_moe kimi_k2; do
  M="$W/$fam"
  if [ "$fam" = kimi_k2 ]; then # DeepSeek-V3's architecture with Kimi's files (tiktoken_ref.mjs kimi-model)
    [ -d "$M" ] || { "$EAAS_BIN" make-model --family deepseek_v3 --preset tiny --seed 7 --format hf --out "$M" >/dev/null &&
      node "$EA_SRC/tests/golden/tiktoken_ref.mjs" kimi-model "$M" 2>/dev/null; }
  else
    [ -d "$M" ] || "$EAAS_BIN" make-model --family "$fam" --preset tiny --seed 7 --format hf --out "$M" >/dev/null
  fi
  # qwen3_5_moe: its prompt opens a think block; the tool requests say a thought first
  # (the test hook), and their grammar starts after its </think> on every rank alike
  extra=() think=
  if [ "$fam" = qwen3_5_moe ]; then extra=(--reasoning-parser qwen3) think='a thought first</think>'; fi
  export EAAS_TEST_HOOKS=$([ -n "$think" ] && echo 1 || echo 0) EA_THINK_FIRST=$think
  [ -n "$think" ] || unset EA_THINK_FIRST
  start "$W/one.log" "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 "${extra[@]}"
  $R "$PORT" > "$W/one-$fam.txt"
  kill -TERM "$PID"; wait "$PID" || true
  if v=$($R --validate "$W/one-$fam.txt"); then ok "$fam, one process: $v"; else bad "$fam, one process: $v"; fi
  for mode in "expert" "expert --dp-attention"; do
    tag=${mode// /}
    log="$W/par-$fam-$tag.log" f0=$fail # one log per run: a failed run's server output is kept and shown
    start "$log" $MPI -n 2 "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 --parallel $mode --dist-timeout 30 "${extra[@]}"
    $R "$PORT" > "$W/par-$fam-$tag.txt"
    if cmp -s "$W/one-$fam.txt" "$W/par-$fam-$tag.txt"; then
      ok "$fam, 2 ranks --parallel $mode: 12 constrained answers (json_schema, guided_regex, tool_choice required; sequential, concurrent, streamed) identical to one process"
    else
      bad "$fam, 2 ranks --parallel $mode: answers differ"; diff "$W/one-$fam.txt" "$W/par-$fam-$tag.txt" | head -6 >&2 || true
    fi
    if v=$($R --validate "$W/par-$fam-$tag.txt"); then ok "$fam, --parallel $mode: $v"; else bad "$fam, --parallel $mode: $v"; fi
    stop_job && ok "$fam, --parallel $mode: SIGTERM to rank 0, every rank exited 0" || bad "$fam, --parallel $mode: exit $?"
    [ "$fail" -eq "$f0" ] || { echo "--- the last lines of $log:" >&2; tail -25 "$log" >&2; }
  done
done
mpi_summary
