#!/usr/bin/env bash
# demo.sh — sets up, builds, and shows the system on a small model:
# make a tiny Qwen3-MoE model, inspect it, tokenize, render a chat, then serve it
# over the OpenAI API, stream one chat answer with the official client, and stop
# the server cleanly (SIGTERM, drained).
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
