#!/bin/bash
# test_cli_flags.sh — the real `eaas` binary on its command line (issue 18,
# items 8-10): help and version exit 0; a file that is not a model is named
# with what is expected, in every command that takes a model; every numeric
# flag out of range, and a flag without the flag it needs, is one error line
# naming the flag (and its range, or the other flag); --max-ctx above the
# model's max_position_embeddings is refused unless allowed; serve reports all
# of these before it opens its port (no "listening" line); bench serve says
# "cannot connect to URL: reason" and takes a base URL ending in /v1.
# Needs EAAS_BIN and EA_SRC (set by CTest). Loopback only, bounded waits.
set -u
BIN=${EAAS_BIN:?EAAS_BIN not set}
: "${EA_SRC:?EA_SRC not set}"
T=$(mktemp -d)
. "$EA_SRC/tests/golden/serve_lib.sh"
trap 'stop_server; rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1" >&2; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2" >&2; }

# expect NAME RC NEEDLE... -- ARGS...: `eaas ARGS` (at most 30 s) exits RC ("nz": any non-zero) and
# stderr+stdout hold every NEEDLE; a serve that fails must not have printed "listening".
expect() {
    local name=$1 want=$2
    shift 2
    local needles=()
    while [ "$1" != "--" ]; do needles+=("$1"); shift; done
    shift
    timeout 30 "$BIN" "$@" >"$T/out" 2>&1
    local rc=$?
    if [ "$want" = nz ] && [ $rc -eq 0 ]; then bad "$name" "exit 0, want non-zero: $(head -3 "$T/out")"; return; fi
    if [ "$want" != nz ] && [ $rc -ne "$want" ]; then bad "$name" "exit $rc, want $want: $(head -3 "$T/out")"; return; fi
    if [ $rc -ne 0 ] && grep -q "listening" "$T/out"; then bad "$name" "failed after opening its port: $(head -3 "$T/out")"; return; fi
    for n in "${needles[@]}"; do
        if ! grep -qF -- "$n" "$T/out"; then bad "$name" "output lacks '$n': $(head -3 "$T/out")"; return; fi
    done
    ok "$name"
}

M=$T/m
make_tiny_model "$M" || { echo "make-model failed"; echo "0 passed, 1 failed"; exit 1; }

# ---- item 8: help, version, model paths, serve checks before its port
expect "eaas -h" 0 "usage: eaas" "serve" -- -h
expect "eaas --help" 0 "usage: eaas" -- --help
expect "eaas help" 0 "usage: eaas" "version" -- help
expect "eaas help serve" 0 "usage: eaas serve" -- help serve
expect "eaas --version" 0 "eaas " "commit " "build " "isa " -- --version
expect "eaas version" 0 "commit " -- version
"$BIN" --version >"$T/v" 2>&1
if grep -qE '^commit ([0-9a-f]{7,}(-dirty)?|unknown)$' "$T/v" && grep -qE '^isa (scalar|avx2|avx512|avx512_bf16|amx)' "$T/v"; then
    ok "version lines"
else
    bad "version lines" "$(cat "$T/v")"
fi
expect "unknown command still an error" 2 "unknown command 'nope'" -- nope

for c in "serve --port 0 --model" "generate --prompt hi --model" "perplexity --file $M/config.json --model" "chat-template --print-template --model"; do
    # shellcheck disable=SC2086
    expect "${c%% *} --model dir/config.json" nz "$M/config.json" "expected a model directory" "pass the directory" -- $c "$M/config.json"
done
expect "inspect dir/config.json" nz "$M/config.json" "expected a model directory" -- inspect "$M/config.json"
expect "tokenize --model dir/config.json" nz "$M/config.json" "expected a model directory" -- tokenize --model "$M/config.json" hi
printf 'not a model' >"$T/junk.bin"
expect "serve --model junk file" nz "$T/junk.bin" "expected a model directory or a .gguf file" -- serve --port 0 --model "$T/junk.bin"
expect "serve --model missing" nz "$T/nothing" "no such model directory" -- serve --port 0 --model "$T/nothing"
expect "serve --init-expert-location missing" 2 "--init-expert-location" "no such file" -- \
    serve --port 0 --model "$M" --init-expert-location "$T/nothing.txt"

# ---- item 9: one rule for numeric flags: out of range names the flag and its range
expect "serve --eplb-window -5" 2 "--eplb-window: -5 is out of range" "[1, " -- serve --port 0 --model "$M" --eplb --eplb-window -5
expect "serve --eplb-layers-per-step -1" 2 "--eplb-layers-per-step: -1 is out of range" -- \
    serve --port 0 --model "$M" --eplb --eplb-layers-per-step -1
expect "serve --port 70000" 2 "--port: 70000 is out of range" "in [0, 65535]" -- serve --model "$M" --port 70000
expect "serve --max-running 0" 2 "--max-running: 0 is out of range" -- serve --port 0 --model "$M" --max-running 0
expect "serve --drain-seconds -1" 2 "--drain-seconds: -1 is out of range" -- serve --port 0 --model "$M" --drain-seconds -1
expect "serve --eplb-min-balancedness 2" 2 "--eplb-min-balancedness: 2 is out of range" "in [0, 1]" -- \
    serve --port 0 --model "$M" --eplb --eplb-min-balancedness 2
expect "serve --threads x" 2 "--threads: 'x' is not an integer" -- serve --port 0 --model "$M" --threads x
expect "generate --max-tokens 0" 2 "--max-tokens: 0 is out of range" -- generate --model "$M" --prompt hi --max-tokens 0
expect "generate --top-p 1.5" 2 "--top-p: 1.5 is out of range" -- generate --model "$M" --prompt hi --top-p 1.5
expect "generate --temperature -1" 2 "--temperature: -1 is out of range" -- generate --model "$M" --prompt hi --temperature -1
expect "generate --seed -3" 2 "--seed: -3 is out of range" -- generate --model "$M" --prompt hi --seed -3
expect "perplexity --ctx 4" 2 "--ctx: 4 is out of range" -- perplexity --model "$M" --file "$M/config.json" --ctx 4
expect "perplexity --chunks 0" 2 "--chunks: 0 is out of range" -- perplexity --model "$M" --file "$M/config.json" --chunks 0
expect "bench serve --num-prompts 0" 2 "--num-prompts: 0 is out of range" -- bench serve --url http://127.0.0.1:1 --num-prompts 0
expect "bench serve --timeout 0" 2 "--timeout: 0 is out of range" -- bench serve --url http://127.0.0.1:1 --timeout 0
expect "eplb place --ranks -2" 2 "--ranks: -2 is out of range" -- eplb place --workload x --physical 8 --ranks -2
expect "make-model --shards 0" 2 "--shards: 0 is out of range" -- make-model --family qwen3_moe --out "$T/x" --shards 0
# flags that only make sense with another
expect "serve --kv-disk-max-mib alone" 2 "--kv-disk-max-mib needs --kv-disk-dir" -- serve --port 0 --model "$M" --kv-disk-max-mib 64
expect "serve --eplb-window alone" 2 "--eplb-window needs --eplb or --init-expert-location" -- \
    serve --port 0 --model "$M" --eplb-window 10
expect "serve --dist-timeout alone" 2 "--dist-timeout needs --parallel" -- serve --port 0 --model "$M" --dist-timeout 5
expect "bench serve --input-len with --dataset" 2 "--input-len does not apply with --dataset" -- \
    bench serve --url http://127.0.0.1:1 --dataset "$M/config.json" --input-len 8
expect "serve --reasoning-parser granite" 2 "--reasoning-parser must be none, qwen3, deepseek_r1 or kimi_k2" -- \
    serve --port 0 --model "$M" --reasoning-parser granite
expect "serve --tool-call-parser mistral" 2 "--tool-call-parser must be auto, hermes, qwen3_coder, deepseek_v3, deepseek_v31, kimi_k2 or none" -- \
    serve --port 0 --model "$M" --tool-call-parser mistral
expect "serve --kv-cache-dtype q8_0" 2 "--kv-cache-dtype must be f32, f16 or bf16" -- \
    serve --port 0 --model "$M" --kv-cache-dtype q8_0
expect "generate --kv-cache-dtype fp8" 2 "--kv-cache-dtype: 'fp8', expected f32, f16 or bf16" -- \
    generate --model "$M" --prompt hi --kv-cache-dtype fp8
expect "generate --system alone" 2 "--system needs --chat" -- generate --model "$M" --prompt hi --system be brief
# --max-ctx above the model's max_position_embeddings (40960 for the tiny qwen3_moe)
expect "serve --max-ctx 100000" nz "--max-ctx 100000" "max_position_embeddings (40960)" "--allow-long-max-ctx" -- \
    serve --port 0 --model "$M" --max-ctx 100000
expect "generate --ctx 50000" nz "--ctx 50000" "max_position_embeddings" -- generate --model "$M" --prompt hi --ctx 50000
expect "generate --ctx 50000 --allow-long-max-ctx" 0 -- \
    generate --model "$M" --prompt hi --ctx 50000 --max-tokens 2 --threads 1 --allow-long-max-ctx
EAAS_ALLOW_LONG_MAX_CTX=1 expect "generate --ctx 50000, EAAS_ALLOW_LONG_MAX_CTX=1" 0 -- \
    generate --model "$M" --prompt hi --ctx 50000 --max-tokens 2 --threads 1
expect "serve --max-ctx 40960 (the model's) passes the checks" 2 "unexpected argument 'extra'" -- \
    serve --port 0 --model "$M" --max-ctx 40960 extra

# ---- item 10: bench serve against nothing, and with a /v1 base URL
for extra in "" "--model x"; do
    # shellcheck disable=SC2086
    expect "bench serve, nothing listening ${extra:-without --model}" 1 "cannot connect to http://127.0.0.1:1: " "refused" -- \
        bench serve --url http://127.0.0.1:1 --num-prompts 1 $extra
done
if start_server "$T/srv.log" --model "$M" --threads 1 --max-ctx 256; then
    for url in "http://127.0.0.1:$PORT" "http://127.0.0.1:$PORT/v1" "http://127.0.0.1:$PORT/v1/"; do
        expect "bench serve --url $url" 0 '"completed":2' '"failed":0' -- \
            bench serve --url "$url" --num-prompts 2 --input-len 4 --output-len 2 --json --timeout 60
    done
    stop_server
else
    bad "start server" "$(tail -3 "$T/srv.log")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
