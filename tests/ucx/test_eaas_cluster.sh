#!/usr/bin/env bash
# test_eaas_cluster.sh — Expert-as-a-Service as real processes on loopback
# (issue 20): for every family (qwen3_moe, qwen2_moe, mixtral, olmoe,
# deepseek_v2, deepseek_v3, and the hybrid qwen3_next, qwen3_5_moe) in HF and in GGUF, a monitor, two expert servers
# and an attention client (`eaas serve --experts-remote`) give the same
# completions — text, token logprobs and top logprobs, greedy and seeded — as
# one `eaas serve` with its experts in process. The two servers are replicas
# (both host everything) for half of the cases, and host uneven, partly
# overlapping expert ranges for the other half. One case adds a second client
# sharing the servers (the second with --max-batch-tokens 64, below the servers'
# --max-tokens): both clients' concurrent streams match the local server,
# and the servers count poll rounds that gathered both clients' calls (with a
# gather window of 20 ms, which only a call waits out while the other client is
# connected but not writing: on a 2-core machine the two clients seldom run at the
# same instant otherwise); a third client whose calls exceed the servers'
# --max-tokens is refused with the reason and holds no slot. Five cases run the client with double-batch overlap
# (--enable-dbo: qwen3_moe, qwen2_moe's gated shared expert, deepseek_v3's MLA,
# shared expert and dense first layer, the hybrids qwen3_next and qwen3_5_moe):
# 8 concurrent streams equal the local server's, a prompt of about 200 tokens
# alone (cut inside it: at its middle, or in the hybrids at token 128) equals
# the local server's, and the client's metrics count calls sent while the
# other micro-batch's were in flight.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cluster_lib.sh"
cl_init

# completion PORT FIELDS -> the choices of a completion as canonical JSON (no ids, no timings)
# (the raw answer and curl's status are kept in $tmp/raw.<port> for the failure report)
# (PROMPT in the environment replaces the prompt)
completion() {
  curl -sS --max-time 120 -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\": \"${PROMPT:-The weather today}\", \"max_tokens\": 12, \"ignore_eos\": true, \"logprobs\": 3 $2}" \
    -o "$tmp/raw.$1" -w '%{http_code}' "http://127.0.0.1:$1/v1/completions" >"$tmp/status.$1" 2>&1
  echo " curl rc $?" >>"$tmp/status.$1"
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d.get("choices", d), sort_keys=True))' <"$tmp/raw.$1" 2>/dev/null
}

# same_choices NAME PORT_REF PORT_CLUSTER FIELDS
same_choices() {
  completion "$2" "$4" >"$tmp/ref.json"
  completion "$3" "$4" >"$tmp/cl.json"
  if grep -q '"text"' "$tmp/ref.json" && cmp -s "$tmp/ref.json" "$tmp/cl.json"; then
    ok "$1"
  else
    bad "$1: local $(head -c 200 "$tmp/ref.json") vs remote $(head -c 200 "$tmp/cl.json")"
    echo "--- remote answer: HTTP $(cat "$tmp/status.$3"), $(wc -c <"$tmp/raw.$3") bytes: $(head -c 300 "$tmp/raw.$3")" >&2
    echo "--- client log (tail):" >&2; tail -20 "$tmp/client.log" >&2
  fi
}

run_case() { # FAMILY FORMAT LAYOUT(replicas|overlap) [two-clients|dbo]
  local fam=$1 fmt=$2 layout=$3 two=${4:-} dbo=()
  local model="$tmp/$fam-$fmt" name="$fam/$fmt/$layout"
  if [ "$two" = dbo ]; then two=""; dbo=(--enable-dbo); name="$name/dbo"; fi
  [ "$fmt" = gguf ] && model="$model.gguf"
  "$EAAS_BIN" make-model --family "$fam" --preset tiny --seed 5 --format "$fmt" --out "$model" >/dev/null ||
    { bad "$name: make-model"; return; }
  local E; E=$("$EAAS_BIN" inspect --json "$model" | python3 -c 'import json,sys; print(json.load(sys.stdin)["experts"])')
  start_monitor || { bad "$name: monitor"; return; }
  local r1=all r2=all
  if [ "$layout" = overlap ]; then r1="0-$((E * 5 / 8 - 1))"; r2="$((E / 2))-$((E - 1))"; fi
  start_expert xa --model "$model" --experts "$r1" --threads 1 --gather-us 20000 || { bad "$name: expert a"; return; }
  start_expert xb --model "$model" --experts "$r2" --threads 1 --gather-us 20000 || { bad "$name: expert b"; return; }
  start_server "$tmp/ref.log" --model "$model" --threads 1 || { bad "$name: local server"; return; }
  local ref_pid=$SRV_PID ref=$PORT
  SRV_PID=""
  cl_pids+=("$ref_pid")
  start_server "$tmp/client.log" --model "$model" --threads 1 --experts-remote "$MON" "${dbo[@]}" ||
    { bad "$name: client"; return; }
  local cl=$PORT
  same_choices "$name: greedy with logprobs" "$ref" "$cl" ', "temperature": 0'
  same_choices "$name: seeded at temperature 0.9" "$ref" "$cl" ', "temperature": 0.9, "seed": 3'
  if [ ${#dbo[@]} -gt 0 ]; then
    PROMPT=$(printf 'The weather today is sunny and warm, with a light wind from the west. %.0s' $(seq 1 12)) \
      same_choices "$name: a long prompt alone, cut inside it" "$ref" "$cl" ', "temperature": 0'
    same_streams "$name: 8 streams at once = local" "$ref" "$cl"
    local ov calls
    local lbl="{model_name=\"$(basename "$model")\"}"
    ov=$(metric "http://127.0.0.1:$cl" "eaas:remote_overlapped_calls_total$lbl")
    calls=$(metric "http://127.0.0.1:$cl" "eaas:remote_calls_total$lbl")
    [ "${ov:-0}" -gt 0 ] && ok "$name: $ov of $calls MoE calls went while the other micro-batch's were in flight" ||
      bad "$name: no overlapped call (${ov:-none} of ${calls:-none})"
  fi
  if [ -n "$two" ]; then
    local cl2_pid=$SRV_PID
    SRV_PID=""
    cl_pids+=("$cl2_pid")
    # client 2's calls are smaller than the servers' largest (their result region too)
    start_server "$tmp/client2.log" --model "$model" --threads 1 --experts-remote "$MON" --max-batch-tokens 64 ||
      { bad "$name: client 2 (--max-batch-tokens 64)"; return; }
    local cl2=$PORT
    EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$ref/v1" 8 24 "$tmp/s_ref.json" >/dev/null
    EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$cl/v1" 8 24 "$tmp/s_1.json" >/dev/null &
    local p1=$!
    EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$cl2/v1" 8 24 "$tmp/s_2.json" >/dev/null
    wait "$p1"
    if python3 - "$tmp/s_ref.json" "$tmp/s_1.json" "$tmp/s_2.json" <<'PY'
import json, sys
ref, a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if ref["texts"] == a["texts"] == b["texts"] and not any(a["errors"] + b["errors"]) else 1)
PY
    then ok "$name: two clients, 8 streams each at once, both = local"; else bad "$name: two clients differ from local: $(head -c 300 "$tmp/s_1.json") / $(head -c 300 "$tmp/s_ref.json")"; fi
    local rounds=0 runs=0 x
    for x in "$XPORT_xa" "$XPORT_xb"; do
      rounds=$((rounds + $(metric "http://127.0.0.1:$x" eaas:expert_cross_client_rounds_total)))
      runs=$((runs + $(metric "http://127.0.0.1:$x" eaas:expert_cross_client_batches_total)))
    done
    local clients; clients=$(metric "http://127.0.0.1:$XPORT_xa" eaas:expert_clients)
    [ "$rounds" -gt 0 ] && [ "$clients" = 2 ] &&
      ok "$name: servers gathered both clients' calls in one round $rounds times ($runs runs of one layer mixed both; $clients clients)" ||
      bad "$name: cross-client rounds $rounds, clients $clients"
    # a client whose calls are larger than the servers take is refused with the reason, and takes no slot
    # (it retries every 0.5 s: before, each try left a slot behind until all 16 were taken)
    fresh_log "$tmp/client3.log"
    "$EAAS_BIN" serve --port 0 --model "$model" --threads 1 --experts-remote "$MON" --max-batch-tokens 1024 >>"$tmp/client3.log" 2>&1 &
    local cl3_pid=$!; cl_pids+=("$cl3_pid")
    sleep 3
    local c3a c3b; c3a=$(metric "http://127.0.0.1:$XPORT_xa" eaas:expert_clients); c3b=$(metric "http://127.0.0.1:$XPORT_xb" eaas:expert_clients)
    grep -q "takes 512 tokens per call, the client sends up to 1024 (start it with --max-tokens 1024" "$tmp/client3.log" &&
      [ "$c3a" = 2 ] && [ "$c3b" = 2 ] &&
      ok "$name: a client sending 1024-token calls to servers of 512 is told why, and takes no slot (clients $c3a, $c3b)" ||
      bad "$name: oversized client: clients $c3a / $c3b; $(grep -m1 'cannot connect' "$tmp/client3.log")"
    kill -TERM "$cl3_pid" "$cl2_pid"; wait "$cl3_pid" "$cl2_pid" 2>/dev/null
  fi
  stop_server
  kill -TERM "$ref_pid" "$XPID_xa" "$XPID_xb" "$MON_PID" 2>/dev/null
  wait "$ref_pid" "$XPID_xa" "$XPID_xb" "$MON_PID" 2>/dev/null
}

i=0
for fam in ${EA_CLUSTER_FAMILIES-qwen3_moe qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3 qwen3_next qwen3_5_moe}; do
  for fmt in hf gguf; do
    layout=replicas; [ $((i % 2)) -eq 1 ] && layout=overlap
    two=""; [ "$i" -eq 0 ] && two=yes
    run_case "$fam" "$fmt" "$layout" "$two"
    i=$((i + 1))
  done
done
if [ "${EA_CLUSTER_DBO:-1}" = 1 ]; then
  run_case qwen3_moe hf replicas dbo
  run_case qwen2_moe gguf overlap dbo
  run_case deepseek_v3 hf overlap dbo
  run_case qwen3_next hf replicas dbo
  run_case qwen3_5_moe gguf overlap dbo
fi
serve_test_summary
