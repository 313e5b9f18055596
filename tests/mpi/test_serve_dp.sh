#!/usr/bin/env bash
# test_serve_dp.sh — data-parallel attention (issue 21 item 2): `eaas serve
# --parallel expert --dp-attention` runs each request on one rank (its own
# attention and KV cache; rank 0 assigns the least loaded) and exchanges token
# rows with alltoallv at every MoE layer. For every family (the hybrid
# Qwen3-Next and Qwen3.5-MoE included: their recurrent state lives with the
# request on its rank, like its KV cache), on 2 and 4 ranks,
# sequential and concurrent requests — greedy, seeded, streamed — answer
# byte-identically to one process; requests are spread over the ranks
# (/ep/stats "dp"); ranks with nothing to run in a step (sequential requests
# all go to the least loaded rank) do not stall the others; a stream cut short
# on another rank is cancelled there and serving goes on; SIGTERM stops every rank.
set -euo pipefail
. "$(dirname "$0")/mpi_lib.sh"
W="$EA_BUILD/golden-models/serve-dp"
mkdir -p "$W"

req() { # PORT PROMPT SEED(-1 = greedy) [stream] -> the text as JSON, or the whole answer when there is none
  local t=0; [ "$3" -ge 0 ] && t=0.9
  if [ "${4:-}" = stream ]; then
    curl -sN -m 120 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
      -d '{"prompt":"'"$2"'","max_tokens":14,"temperature":'"$t"',"seed":'"$3"',"ignore_eos":true,"stream":true}' |
      /usr/bin/python3 -c '
import json, sys
text, done = "", False
for line in sys.stdin:
    line = line.strip()
    if line == "data: [DONE]": done = True
    elif line.startswith("data: "):
        d = json.loads(line[6:])
        text += "".join(c.get("text", "") for c in d.get("choices", []))
print(json.dumps(text) if done else "NO [DONE]: " + json.dumps(text))'
  else
    curl -s -m 120 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
      -d '{"prompt":"'"$2"'","max_tokens":14,"temperature":'"$t"',"seed":'"$3"',"ignore_eos":true}' |
      /usr/bin/python3 -c 'import json,sys; s=sys.stdin.read(); d=json.loads(s) if s else {}; print(json.dumps(d["choices"][0]["text"]) if "choices" in d else "NO ANSWER: " + s)'
  fi
}
run_all() { # PORT OUT: 4 one after another, then 12 at once (greedy, seeded, streamed)
  local port=$1 out=$2 i
  : > "$out"
  for i in 1 2 3 4; do req "$port" "One after another, number $i" $((i % 2 ? i : -1)) >> "$out"; done
  local rp=()
  for i in $(seq 1 12); do
    (req "$port" "All at once, request $i of twelve" $((i % 3 ? i : -1)) $([ $((i % 4)) = 0 ] && echo stream) > "$out.$i") & rp+=($!)
  done
  wait "${rp[@]}"
  for i in $(seq 1 12); do cat "$out.$i" >> "$out"; rm -f "$out.$i"; done
}
assigned() { curl -s -m 10 "http://127.0.0.1:$1/ep/stats" | /usr/bin/python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["dp"]["assigned"])))'; }

for fam in qwen3_moe qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3 qwen3_next qwen3_5_moe; do
  M="$W/$fam"
  [ -d "$M" ] || "$EAAS_BIN" make-model --family "$fam" --preset tiny --seed 7 --format hf --out "$M" >/dev/null
  start "$W/one.log" "$EAAS_BIN" serve --model "$M" --port 0 --threads 1
  run_all "$PORT" "$W/one-$fam.txt"
  kill -TERM "$PID"; wait "$PID" || true
  grep -q "NO " "$W/one-$fam.txt" && bad "$fam: one process did not answer: $(grep -m1 'NO ' "$W/one-$fam.txt")"
  ranks="2 4"
  for N in $ranks; do
    start "$W/dp.log" $MPI -n "$N" "$EAAS_BIN" serve --model "$M" --port 0 --threads 1 --parallel expert --dp-attention --dist-timeout 30
    run_all "$PORT" "$W/dp-$fam-$N.txt"
    if cmp -s "$W/one-$fam.txt" "$W/dp-$fam-$N.txt"; then ok "$fam, $N ranks: 16 answers (4 sequential, 12 at once, greedy, seeded, streamed) identical to one process"
    else bad "$fam, $N ranks: answers differ"; diff "$W/one-$fam.txt" "$W/dp-$fam-$N.txt" | head -4 >&2 || true; fi
    a=$(assigned "$PORT")
    busy=$(echo "$a" | tr ' ' '\n' | awk '$1 > 0' | wc -l)
    [ "$busy" -ge 2 ] && ok "$fam, $N ranks: requests spread over the ranks (assigned: $a)" || bad "$fam, $N ranks: assigned $a"
    if [ "$fam" = deepseek_v3 ] && [ "$N" = 2 ]; then
      # a stream cut short: cancelled on whichever rank runs it, and serving goes on
      cp=()
      for i in 1 2; do (curl -sN -m 0.5 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt":"long '"$i"'","max_tokens":2000,"stream":true,"ignore_eos":true}' > /dev/null || true) & cp+=($!); done
      wait "${cp[@]}"   # only the streams: the server is a background job too
      sleep 1
      a=$(req "$PORT" "One after another, number 2" -1)
      [ "$a" = "$(sed -n 2p "$W/one-$fam.txt")" ] && ok "after two cut streams, serving goes on with the same answer" || bad "after the cut streams: $a"
      grep -c "finish=abort" "$W/dp.log" | grep -qx 2 && ok "both cut streams were logged as aborts" || bad "aborts logged: $(grep -c 'finish=abort' "$W/dp.log")"
    fi
    stop_job && ok "$fam, $N ranks: SIGTERM to rank 0, every rank exited 0" || bad "$fam, $N ranks: exit $?"
  done
done
mpi_summary
