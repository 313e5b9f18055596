#!/usr/bin/env bash
# test_generate_matches_serve.sh — `eaas generate` and `eaas serve` are one
# decode loop (issue 19 item 3): the same model, prompt, seed and sampling
# fields give the same text, byte for byte, through both. Cases: greedy;
# seeded at temperature 0.9; the model's generation_config.json defaults
# (no sampling field given, on both sides) and with them turned off; a stop
# string taken from the middle of the greedy output (the text must end right
# before it); and an output with multi-byte characters (the tiny model's
# random text is mostly CJK/Hangul, which the test checks); greedy and seeded
# again with an f16 KV cache on both sides.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

serve_test_init
make_tiny_model "$tmp/model"
start_server "$tmp/log" --model "$tmp/model" --threads 2 || exit 1
base="http://127.0.0.1:$PORT"

# serve_text BODY-FIELDS -> the completion's text (raw bytes)
serve_text() {
  curl -s --max-time 120 -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\": \"The weather today\", \"max_tokens\": 24, \"ignore_eos\": true $1}" "$base/v1/completions" |
    python3 -c 'import json,sys; sys.stdout.buffer.write(json.load(sys.stdin)["choices"][0]["text"].encode())'
}
# gen_text FLAGS... -> generate's stdout without its final newline
gen_text() {
  "$EAAS_BIN" generate --model "$tmp/model" --prompt "The weather today" --max-tokens 24 --ignore-eos --threads 2 "$@" \
    2>"$tmp/gen.err" | python3 -c 'import sys; b=sys.stdin.buffer.read(); sys.stdout.buffer.write(b[:-1] if b.endswith(b"\n") else b)'
}
same() { # NAME SERVE-FIELDS GENERATE-FLAGS...
  local name=$1 fields=$2
  shift 2
  serve_text "$fields" >"$tmp/s"
  gen_text "$@" >"$tmp/g"
  if [ -s "$tmp/s" ] && cmp -s "$tmp/s" "$tmp/g"; then
    ok "$name: same $(wc -c <"$tmp/s") bytes"
  else
    bad "$name: serve '$(head -c 120 "$tmp/s")' vs generate '$(head -c 120 "$tmp/g")' ($(tail -1 "$tmp/gen.err"))"
  fi
}

same "greedy" ', "temperature": 0' --temperature 0
same "seeded, temperature 0.9" ', "temperature": 0.9, "seed": 7' --temperature 0.9 --seed 7
same "generation_config defaults (temperature 0.6, top_k 20, top_p 0.95)" ', "seed": 11' --seed 11

# the defaults are really used: the same seed without them gives another text
serve_text ', "seed": 11, "temperature": 1' >"$tmp/t1"
serve_text ', "seed": 11' >"$tmp/tg"
cmp -s "$tmp/t1" "$tmp/tg" && bad "generation_config defaults change nothing" || ok "generation_config defaults differ from temperature 1"

# a stop string from the middle of the greedy output: both stop right before it
serve_text ', "temperature": 0' >"$tmp/greedy"
stop=$(python3 -c 'import sys; t=open(sys.argv[1],"rb").read().decode(); print(t[len(t)//2:len(t)//2+2], end="")' "$tmp/greedy")
stop_json=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$stop")
same "stop string $stop_json" ", \"temperature\": 0, \"stop\": [$stop_json]" --temperature 0 --stop "$stop"
python3 - "$tmp/greedy" "$tmp/g" "$stop" <<'EOF' && ok "the stopped text is the greedy text up to the stop string" || bad "stop: not a prefix ending before the stop string"
import sys
full = open(sys.argv[1], "rb").read().decode()
cut = open(sys.argv[2], "rb").read().decode()
sys.exit(0 if full.startswith(cut) and full[len(cut):].startswith(sys.argv[3]) else 1)
EOF

# multi-byte characters were part of what was compared
python3 -c 'import sys; t=open(sys.argv[1],"rb").read(); sys.exit(0 if any(b >= 0xC0 for b in t) else 1)' "$tmp/greedy" &&
  ok "the compared text has multi-byte UTF-8 characters" || bad "no multi-byte character in the output: choose another prompt"

# an f16 KV cache (--kv-cache-dtype) on both sides: still one decode loop
stop_server
start_server "$tmp/log16" --model "$tmp/model" --threads 2 --kv-cache-dtype f16 || exit 1
base="http://127.0.0.1:$PORT"
grep -q "ready: .*KV cache [0-9]* tokens (f16)" "$tmp/log16" && ok "the ready line names the f16 KV cache" ||
  bad "ready line: $(grep ' ready: ' "$tmp/log16")"
same "greedy, f16 KV cache" ', "temperature": 0' --temperature 0 --kv-cache-dtype f16
same "seeded, temperature 0.9, f16 KV cache" ', "temperature": 0.9, "seed": 7' --temperature 0.9 --seed 7 --kv-cache-dtype f16

serve_test_summary
