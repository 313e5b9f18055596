#!/usr/bin/env bash
# demo.sh — sets up, builds, and shows the system on a small model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
E=build/eaas
OUT=${EA_DEMO_DIR:-out/demo}
mkdir -p "$OUT"
echo "== make a tiny Qwen3-MoE model"
$E make-model --family qwen3_moe --preset tiny --seed 1 --format hf --out "$OUT/qwen3-tiny"
echo "== inspect it"
$E inspect "$OUT/qwen3-tiny"
echo "== tokenize"
$E tokenize --model "$OUT/qwen3-tiny" "Hello, 世界! Experts anywhere."
echo "== render a chat"
cat > "$OUT/messages.json" <<'JSON'
[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is a mixture of experts?"}]
JSON
$E chat-template --model "$OUT/qwen3-tiny" --messages "$OUT/messages.json"
