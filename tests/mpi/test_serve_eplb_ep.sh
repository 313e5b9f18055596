#!/usr/bin/env bash
# test_serve_eplb_ep.sh — EPLB across ranks (issue 21 item 1): `eaas serve
# --parallel expert --eplb` on 2 and 4 ranks under a skewed workload (prompts
# of one repeated word route most tokens to a few experts). Rebalances happen
# under traffic (at least 3), expert weights move between ranks (bytes
# counted), the planned balancedness rises, and every answer — greedy and
# seeded, sequential and concurrent — is byte-identical to one process without
# EPLB. A rank that reports a failure in the middle of a move
# (EAAS_TEST_EP_MOVE_FAIL=1:1) leaves every rank on the old placement, serving.
# Overflow (issue 21 item 3): with --ep-capacity-factor 0.5 every combine
# overflows a rank's capacity; the rest goes in further rounds (counted) and the
# answers stay identical. With --dp-attention the ranks sum their routing counts:
# the recorded counts equal one process's, and the plans agree (no move refused).
set -euo pipefail
. "$(dirname "$0")/mpi_lib.sh"
W="$EA_BUILD/golden-models/serve-eplb-ep"
mkdir -p "$W"
M="$W/qwen3-tiny"
[ -d "$M" ] || "$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 4 --format hf --out "$M" >/dev/null
MQ="$W/qwen3-tiny-q8_0.gguf"   # quantized: an expert moves with its block scales
[ -f "$MQ" ] || "$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 4 --format gguf --dtype q8_0 --out "$MQ" >/dev/null

req() { # PORT PROMPT SEED(-1 = greedy) -> the text, or the whole answer when it has none
  local t=0; [ "$3" -ge 0 ] && t=0.9
  curl -s -m 120 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"'"$2"'","max_tokens":16,"temperature":'"$t"',"seed":'"$3"',"ignore_eos":true}' |
    /usr/bin/python3 -c 'import json,sys; s=sys.stdin.read(); d=json.loads(s) if s else {}; print(json.dumps(d["choices"][0]["text"]) if "choices" in d else "NO ANSWER: " + s)'
}
# the skewed workload: one repeated word per prompt, in three phases (the skew moves), plus concurrent requests
words=(the cat 7 zebra)
run_all() { # PORT OUT
  local port=$1 out=$2 i w
  : > "$out"
  for w in "${words[@]}"; do
    for i in 1 2 3; do req "$port" "$(printf "$w %.0s" $(seq 1 $((8 * i))))" -1 >> "$out"; done
    req "$port" "$w $w $w $w" 5 >> "$out"
  done
  local rp=()
  for i in $(seq 1 8); do (req "$port" "$(printf "${words[$((i % 4))]} %.0s" $(seq 1 $((4 + i))))" $((i % 2 ? i : -1)) > "$out.$i") & rp+=($!); done
  wait "${rp[@]}"
  for i in $(seq 1 8); do cat "$out.$i" >> "$out"; rm -f "$out.$i"; done
}
stat() { curl -s -m 10 "http://127.0.0.1:$1/eplb/stats" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[sys.argv[1]])' "$2"; }
epstat() { curl -s -m 10 "http://127.0.0.1:$1/ep/stats" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["moves"][sys.argv[1]])' "$2"; }

for m in "$M" "$MQ"; do
  start "$W/one.log" "$EAAS_BIN" serve --model "$m" --port 0 --threads 1
  run_all "$PORT" "$W/one-$(basename "$m").txt"
  kill -TERM "$PID"; wait "$PID" || true
  grep -q "NO ANSWER" "$W/one-$(basename "$m").txt" && bad "one process did not answer: $(grep -m1 'NO ANSWER' "$W/one-$(basename "$m").txt")"
done

EPLB="--eplb --eplb-interval 4 --eplb-window 8 --eplb-min-balancedness 0.99"
for case in "$M 2" "$M 4" "$MQ 2"; do
  set -- $case
  m=$1 N=$2 R=$2   # 16 experts + R slots split evenly over N ranks
  name="$N ranks, $(basename "$m")"
  start "$W/ep$N.log" $MPI -n $N "$EAAS_BIN" serve --model "$m" --port 0 --threads 1 --parallel expert \
    --dist-timeout 20 $EPLB --eplb-redundant $R
  run_all "$PORT" "$W/ep$N.txt"
  if cmp -s "$W/one-$(basename "$m").txt" "$W/ep$N.txt"; then ok "$name: 20 answers (greedy, seeded, 8 concurrent) identical to one process"
  else bad "$name: answers differ"; diff "$W/one-$(basename "$m").txt" "$W/ep$N.txt" | head -6 >&2 || true; fi
  nreb=$(stat "$PORT" rebalances_total); before=$(stat "$PORT" last_plan_before); after=$(stat "$PORT" last_plan_after)
  moved=$(epstat "$PORT" experts); sent=$(epstat "$PORT" bytes_sent); recv=$(epstat "$PORT" bytes_recv)
  echo "# $name: $nreb rebalances, $moved slot moves, rank 0 sent $sent B and received $recv B; last plan balancedness $before -> $after" >&2
  [ "$nreb" -ge 3 ] && ok "$name: $nreb rebalances under traffic" || bad "$name: only $nreb rebalances"
  [ $((sent + recv)) -gt 0 ] && [ "$moved" -gt 0 ] && ok "$name: weights moved between ranks ($moved slots, rank 0 $sent B out / $recv B in)" || bad "$name: no weights moved"
  python3 -c "import sys; sys.exit(0 if $after > $before else 1)" && ok "$name: balancedness rose ($before -> $after)" || bad "$name: balancedness $before -> $after"
  curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^eaas:ep_weight_move_bytes_total\{.*rank="0",dir="sent"\} [1-9]' >/dev/null && ok "$name: move bytes in /metrics" || bad "$name: no move metric"
  stop_job && ok "$name: SIGTERM to rank 0, every rank exited 0" || bad "$name: exit code $?"
done

# Data-parallel attention (--dp-attention): each rank routes its own requests' tokens, so the ranks
# sum their counts every step to plan alike. Without the sum they would plan on different counts
# and every move would be refused (the move checks that all ranks hold the same new row). The
# recorded counts of the whole run (window 2000 covers it; no prefix cache, so every rank computes
# the same tokens as one process) must equal one process's, expert by expert.
DPW="--eplb --eplb-interval 4 --eplb-window 2000 --eplb-min-balancedness 0.99 --no-prefix-cache"
dump() { curl -s -m 10 "http://127.0.0.1:$1/eplb/record/dump" | grep -v '^#'; }
start "$W/one-rec.log" "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 $DPW
curl -s -m 10 -X POST "http://127.0.0.1:$PORT/eplb/record/start" >/dev/null
run_all "$PORT" "$W/one-rec.txt"
dump "$PORT" > "$W/one-rec.dump"
kill -TERM "$PID"; wait "$PID" || true
start "$W/dp.log" $MPI -n 2 "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 --parallel expert --dp-attention \
  --dist-timeout 20 $DPW --eplb-redundant 2
curl -s -m 10 -X POST "http://127.0.0.1:$PORT/eplb/record/start" >/dev/null
run_all "$PORT" "$W/dp.txt"
name="2 ranks, --dp-attention"
cmp -s "$W/one-$(basename "$M").txt" "$W/dp.txt" && ok "$name: 20 answers identical to one process" || { bad "$name: answers differ"; diff "$W/one-$(basename "$M").txt" "$W/dp.txt" | head -6 >&2 || true; }
dump "$PORT" > "$W/dp.dump"
[ -s "$W/one-rec.dump" ] && cmp -s "$W/one-rec.dump" "$W/dp.dump" && ok "$name: the recorded counts are every rank's tokens, equal to one process's ($(wc -l < "$W/dp.dump") lines)" || { bad "$name: recorded counts differ from one process's"; diff "$W/one-rec.dump" "$W/dp.dump" | head -4 >&2 || true; }
nreb=$(stat "$PORT" rebalances_total); nf=$(stat "$PORT" failures); moved=$(epstat "$PORT" experts)
echo "# $name: $nreb rebalances, $nf failures, $moved slot moves" >&2
[ "$nreb" -ge 3 ] && [ "$nf" = 0 ] && [ "$moved" -gt 0 ] && ok "$name: $nreb rebalances, $moved slots moved, no move refused" || bad "$name: $nreb rebalances, $nf failures, $moved moves"
stop_job && ok "$name: SIGTERM to rank 0, every rank exited 0" || bad "$name: exit code $?"

# a failure in the middle of a move: rank 1 refuses its first layer switch
start "$W/fault.log" env EAAS_TEST_EP_MOVE_FAIL=1:1 $MPI -x EAAS_TEST_EP_MOVE_FAIL -n 2 "$EAAS_BIN" serve --model "$M" \
  --port 0 --threads 1 --parallel expert --dist-timeout 20 $EPLB --eplb-redundant 2
run_all "$PORT" "$W/fault.txt"
cmp -s "$W/one-$(basename "$M").txt" "$W/fault.txt" && ok "move failure: answers identical to one process" || { bad "move failure: answers differ"; diff "$W/one-$(basename "$M").txt" "$W/fault.txt" | head -4 >&2 || true; }
nf=$(stat "$PORT" failures); nreb=$(stat "$PORT" rebalances_total); mf=$(epstat "$PORT" failures)
[ "$nf" -ge 1 ] && [ "$mf" -ge 1 ] && ok "the failed move was counted (EPLB failures $nf, ep switch failures $mf) and later ones went through ($nreb rebalances)" || bad "failures $nf / $mf"
grep -q "keeps the old one" "$W/fault.log" && ok "the log says every rank kept the old placement" || bad "no log line about the old placement"
[ "$(req "$PORT" "after the fault" -1 | grep -c 'NO ANSWER')" = 0 ] && ok "still serving" || bad "not serving after the fault"
stop_job || true
# overflow rounds instead of dropped tokens
start "$W/overflow.log" $MPI -n 2 "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 --parallel expert \
  --dist-timeout 20 --ep-capacity-factor 0.5
run_all "$PORT" "$W/overflow.txt"
cmp -s "$W/one-$(basename "$M").txt" "$W/overflow.txt" && ok "capacity factor 0.5: answers identical to one process" || { bad "capacity factor 0.5: answers differ"; diff "$W/one-$(basename "$M").txt" "$W/overflow.txt" | head -4 >&2 || true; }
ov=$(curl -s -m 10 "http://127.0.0.1:$PORT/ep/stats" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["overflow"]["rounds"], d["overflow"]["pairs"], d["combine"]["calls"])')
set -- $ov
echo "# capacity factor 0.5: $1 overflow rounds, $2 pairs sent late, over $3 combine calls (rank 0)" >&2
[ "$1" -gt 0 ] && [ "$2" -gt 0 ] && ok "overflow rounds happened ($1 rounds, $2 pairs) and nothing was dropped" || bad "no overflow counted: $ov"
curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^eaas:ep_overflow_tokens_total\{.*rank="0"\} [1-9]' >/dev/null && ok "eaas:ep_overflow_tokens_total in /metrics" || bad "no overflow metric"
stop_job || true
mpi_summary
