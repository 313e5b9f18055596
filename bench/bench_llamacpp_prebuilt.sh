#!/usr/bin/env bash
# bench_llamacpp_prebuilt.sh — node-llama-cpp's prebuilt llama.cpp (generic
# binaries, NOT built for this CPU: they understated llama.cpp 2.4x on a Zen 5;
# bench_llamacpp.sh builds it natively) side by side with bench_forward on the same GGUF
# files (not part of CI: the package is ~0.7 GB).
#
#   bash bench/bench_llamacpp_prebuilt.sh MODEL.gguf [bench_llamacpp.mjs flags]
#
# Installs node-llama-cpp (prebuilt llama.cpp CPU binaries) into
# .cache/llamacpp on first use, then runs bench/bench_llamacpp.mjs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir="$here/.cache/llamacpp"
if [ ! -d "$dir/node_modules/node-llama-cpp" ]; then
    mkdir -p "$dir"
    echo '{"name":"eaas-llamacpp-bench","private":true,"type":"module"}' > "$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts node-llama-cpp@3.22.1 >&2)
fi
cp "$here/bench/bench_llamacpp.mjs" "$dir/bench_llamacpp.mjs"
model=$1
shift
exec node "$dir/bench_llamacpp.mjs" --model "$model" "$@"
