#!/usr/bin/env bash
# demo.sh — sets up, builds, and shows the system on a small model:
# make a tiny Qwen3-MoE model, inspect it, tokenize, render a chat, then serve it
# over the OpenAI API, stream one chat answer with the official client, and stop
# the server cleanly (SIGTERM, drained). Then Expert-as-a-Service: a monitor
# that plans replicas of hot experts, two expert servers hosting the same
# experts, a third hosting two experts and 4 replica slots, and an attention
# client serving the API with --experts-remote and double-batch overlap
# (--enable-dbo: a prompt's prefill runs as two micro-batches, one's attention
# while the servers compute the other's experts); a chat answer streams, the
# monitor places replicas of the experts it made hot on the third server, one
# expert server is killed with SIGKILL while the same request streams again,
# the answer completes (the same text), the next request is answered, and
# everything stops cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
E=build/eaas
OUT=${EA_DEMO_DIR:-out/demo}
mkdir -p "$OUT"
M="$OUT/qwen3-tiny"
echo "== make a tiny Qwen3-MoE model (random weights, the real Qwen3 tokenizer)"
[ -d "$M" ] || $E make-model --family qwen3_moe --preset tiny --seed 1 --format hf --out "$M"
echo "== inspect it"
$E inspect "$M"
echo "== tokenize"
$E tokenize --model "$M" "Hello, 世界! Experts anywhere."
echo "== render a chat"
cat > "$OUT/messages.json" <<'JSON'
[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is a mixture of experts?"}]
JSON
$E chat-template --model "$M" --messages "$OUT/messages.json"
echo
echo "== serve it (OpenAI-compatible API on 127.0.0.1)"
$E serve --model "$M" --port 0 --threads 2 2> "$OUT/serve.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
PORT=""
for _ in $(seq 1 100); do
  PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$OUT/serve.log" | head -1)
  [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done
[ -n "$PORT" ] || { echo "server did not start:"; cat "$OUT/serve.log"; exit 1; }
echo "listening on port $PORT; streaming a chat answer (a random-weight model writes nonsense, fluently):"
node tools/node/demo_chat.mjs "http://127.0.0.1:$PORT/v1" qwen3-tiny "What is a mixture of experts?"
echo "== stop the server (SIGTERM: drain, then exit)"
kill -TERM "$SERVER"
wait "$SERVER" && echo "server stopped cleanly" || { echo "server exit code $?"; exit 1; }
trap - EXIT
tail -3 "$OUT/serve.log"

echo
echo "== Expert-as-a-Service: monitor + three expert servers + an attention client"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done' EXIT
# wait_for LOG REGEX PID: the first match of REGEX once it appears in LOG
wait_for() {
  for _ in $(seq 1 300); do
    grep -qE "$2" "$1" && { grep -oE "$2" "$1" | head -1; return 0; }
    kill -0 "$3" 2>/dev/null || { echo "process exited:"; cat "$1"; return 1; }
    sleep 0.1
  done
  echo "timed out waiting for '$2' in $1"; cat "$1"; return 1
}
$E monitor --port 0 --replicate-ms 1000 > "$OUT/monitor.log" 2>&1 &
MONP=$!; PIDS+=("$MONP")
MON=$(wait_for "$OUT/monitor.log" 'listening on [0-9.]+:[0-9]+' "$MONP" | sed 's/listening on //')
echo "monitor at $MON"
# a and b: every expert; c: experts 0-1 of each layer, and room for 4 replicas the monitor places
for x in expert-a expert-b expert-c; do
  extra=(); [ "$x" = expert-c ] && extra=(--experts 0-1 --replica-slots 4)
  $E expert --model "$M" --monitor "$MON" --port 0 --id "$x" --threads 1 "${extra[@]}" > "$OUT/$x.log" 2>&1 &
  PIDS+=("$!"); eval "PID_${x#expert-}=$!"
  L=$(wait_for "$OUT/$x.log" 'listening on [0-9.]+:[0-9]+' "$!"); echo "$x: $L"
  eval "ADDR_${x#expert-}=${L#listening on }"
done
$E serve --model "$M" --port 0 --threads 1 --experts-remote "$MON" --expert-timeout-ms 500 --enable-dbo 2> "$OUT/client.log" &
CLIENT=$!; PIDS+=("$CLIENT")
CPORT=$(wait_for "$OUT/client.log" 'listening on http://127.0.0.1:[0-9]+' "$CLIENT" | sed 's/.*://')
wait_for "$OUT/client.log" ' ready: ' "$CLIENT" >/dev/null
echo "cluster: $(curl -s "http://$MON/cluster" | python3 -c 'import json,sys; t=json.load(sys.stdin); print("version", t["version"], [(s["id"], s["state"]) for s in t["servers"]], len(t["clients"]), "client")')"
URL="http://127.0.0.1:$CPORT/v1"
Q="Why do mixture-of-experts models need load balancing?"
echo "-- a chat answer, experts on the expert servers:"
node tools/node/demo_chat.mjs "$URL" qwen3-tiny "$Q" 96 | tee "$OUT/answer1.txt"
echo "-- the client reported its load; the monitor plans replicas of the hot experts on expert-c's slots:"
for _ in $(seq 1 100); do
  R=$(curl -s "http://$MON/cluster" | python3 -c 'import json,sys; t=json.load(sys.stdin); print(" ".join("L%d/E%d" % tuple(r) for s in t["servers"] if s["id"] == "expert-c" for r in s.get("replicas", [])))')
  [ -n "$R" ] && break; sleep 0.1
done
[ -n "$R" ] && echo "   expert-c now serves replicas of $R (layer/expert)" || { echo "   no replicas placed"; cat "$OUT/monitor.log"; exit 1; }
echo "-- the same request again; expert-a is killed (SIGKILL) while it streams:"
rm -f "$OUT/mark"
node tools/node/demo_chat.mjs "$URL" qwen3-tiny "$Q" 96 "$OUT/mark" > "$OUT/answer2.txt" &
NODEP=$!
for _ in $(seq 1 200); do [ -f "$OUT/mark" ] && break; sleep 0.02; done
kill -KILL "$PID_a"; echo "   (expert-a killed)"
wait "$NODEP"
cat "$OUT/answer2.txt"
cmp -s "$OUT/answer1.txt" "$OUT/answer2.txt" && echo "-> the answer completed through the failure, identical to the first" ||
  { echo "-> the answers differ"; exit 1; }
curl -s "http://127.0.0.1:$CPORT/metrics" | grep -E '^eaas:remote_(failovers|timeouts|calls|overlapped_calls)_total'
curl -s "http://$ADDR_c/metrics" | grep -E '^eaas:expert_(replicas|tokens_total) ' | sed 's/^/expert-c /'
echo "-- the next request, on expert-b and expert-c:"
node tools/node/demo_chat.mjs "$URL" qwen3-tiny "And what is an expert server?" 32
echo "== stop everything (SIGTERM each: client, expert-b, expert-c, monitor)"
for p in "$CLIENT" "$PID_b" "$PID_c" "$MONP"; do kill -TERM "$p"; wait "$p" || { echo "process $p exit code $?"; exit 1; }; done
wait "$PID_a" 2>/dev/null || true
trap - EXIT
echo "all stopped cleanly"
