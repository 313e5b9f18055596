#!/usr/bin/env bash
# test_serve_parallel_kvdisk.sh — `eaas serve --parallel expert --kv-disk-dir D`
# when the ranks' disk tiers disagree (issue 21, item 4): rank 1's copy of a
# cached block is damaged between two runs, so at the next start rank 1 skips
# it while rank 0 still has it. The ranks must agree on every prefix hit (the
# minimum over ranks), so the prompt is recomputed where needed and answered
# exactly as one process answers it, and the job stays up for the next request.
# Also: a block file damaged after start-up (found bad only when it is read).
set -euo pipefail
. "$(dirname "$0")/mpi_lib.sh"
W="$EA_BUILD/golden-models/serve-mpi-kvdisk"
rm -rf "$W"; mkdir -p "$W"
M="$W/qwen3-tiny"
"$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 4 --format hf --out "$M" >/dev/null

# a prompt of several KV blocks, so a prefix hit covers whole blocks
P="one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five twenty-six twenty-seven twenty-eight twenty-nine thirty thirty-one thirty-two thirty-three"
req() { # PORT PROMPT -> text (greedy), or the whole answer when it has no text
  curl -s -m 60 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"'"$2"'","max_tokens":12,"temperature":0,"ignore_eos":true}' |
    /usr/bin/python3 -c 'import json,sys; s=sys.stdin.read(); d=json.loads(s) if s else {}; print(d["choices"][0]["text"] if "choices" in d else "NO ANSWER: " + s)'
}
metric() { curl -s -m 5 "http://127.0.0.1:$1/metrics" | awk -v n="$2" 'index($1, n "{") == 1 {print $2}'; }

start "$W/one.log" "$EAAS_BIN" serve --model "$M" --port 0 --threads 1
want=$(req "$PORT" "$P"); want2=$(req "$PORT" "$P and more")
kill -TERM "$PID"; wait "$PID" || true

ep() { start "$W/$1.log" $MPI -n 2 "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 --parallel expert --dist-timeout 10 --kv-disk-dir "$W/kv"; }
stop_ep() { kill -TERM "$PID"; wait "$PID" || true; }

# run 1 fills both ranks' disk tiers (every cached block is written at shutdown)
ep run1
[ "$(req "$PORT" "$P")" = "$want" ] && ok "run 1: the answer equals one process's" || bad "run 1 differs"
stop_ep
r0=$(find "$W/kv" -path '*rank_0*' -name '*.kvb' | sort); r1=$(find "$W/kv" -path '*rank_1*' -name '*.kvb' | sort)
n0=$(echo "$r0" | grep -c kvb || true); n1=$(echo "$r1" | grep -c kvb || true)
[ "$n0" -ge 2 ] && [ "$n0" = "$n1" ] && ok "both ranks wrote $n0 blocks" || bad "blocks written: rank 0 $n0, rank 1 $n1"

# damage the second block of rank 1 only: rank 1 skips it at start, rank 0 keeps it
victim=$(echo "$r1" | sed -n 2p)
printf 'XXXXXXXX' | dd of="$victim" bs=1 seek=100 conv=notrunc status=none
ep run2
a=$(req "$PORT" "$P")
[ "$a" = "$want" ] && ok "a block damaged on rank 1 only: the prompt is answered as one process answers it" || bad "after the damaged block: '$a'"
hits=$(metric "$PORT" eaas:prefix_cache_hit_tokens_total)
[ "${hits:-0}" -gt 0 ] && ok "the block before the damaged one was still a hit on both ranks ($hits tokens)" || bad "prefix hit tokens '$hits'"
kill -0 "$PID" 2>/dev/null && ok "the job stays up" || bad "the job exited"
grep -q "skipped (never loaded)" "$W/run2.log" && ok "rank 1 said it skipped the damaged file" || bad "no warning about the damaged file"
b=$(req "$PORT" "$P and more")
[ "$b" = "$want2" ] && ok "the next request is answered too" || bad "next request: '$b'"
stop_ep

# damage a block file on rank 1 after start-up: found bad only when read
ep run3
for f in $(find "$W/kv" -path '*rank_1*' -name '*.kvb'); do printf 'YYYYYYYY' | dd of="$f" bs=1 seek=200 conv=notrunc status=none; done
a=$(req "$PORT" "$P")
[ "$a" = "$want" ] && ok "blocks damaged on rank 1 after start-up: same answer" || bad "after damage at run time: '$a'"
b=$(req "$PORT" "$P and more")
[ "$b" = "$want2" ] && kill -0 "$PID" 2>/dev/null && ok "the job stays up and answers the next request" || bad "after damage at run time, next: '$b'"
stop_ep
mpi_summary
