#!/usr/bin/env bash
# test_serve_admission.sh — a request that can never fit in the whole KV cache
# is refused at admission (issue 18 item 4). `eaas serve --kv-cache-mib 1` on
# the tiny model holds 2,048 tokens (128 blocks of 16), less than one full
# context (4,096): start-up warns; a 1,000-token prompt with max_tokens 2,000
# gets an OpenAI 400 naming 2048, 1000 and 2000 at once, with no token
# generated (it used to run 1,049 tokens and then fail); the same prompt with
# max_tokens 8 is served. The server is killed by its PID.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"

serve_test_init
make_tiny_model "$tmp/model"
start_server "$tmp/log" --model "$tmp/model" --served-model-name tiny --threads 2 --kv-cache-mib 1 --max-running 2 || exit 1
base="http://127.0.0.1:$PORT"

if grep -q "KV cache holds 2048 tokens .*less than one full context of 4096 tokens" "$tmp/log"; then
  ok "start-up warns that one full context does not fit"
else
  bad "no start-up warning: $(grep -i 'kv' "$tmp/log" | head -3)"
fi

# a prompt of 1000 token ids (all with a token)
prompt=$(python3 -c 'print(",".join(str(100 + i % 5000) for i in range(1000)))')
gen_tokens() { curl -s --max-time 10 "$base/metrics" | awk '/^eaas:generation_tokens_total[ {]/{print $NF}'; }

t0=$(date +%s.%N)
code=$(curl -s --max-time 60 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary "{\"prompt\": [$prompt], \"max_tokens\": 2000, \"ignore_eos\": true}" "$base/v1/completions")
t1=$(date +%s.%N)
if [ "$code" = 400 ] && python3 - "$tmp/body" <<'PY'; then
import json, sys
e = json.load(open(sys.argv[1]))["error"]
m = e["message"]
assert e["type"] == "invalid_request_error" and e["param"] == "max_tokens", e
for n in ("2048", "1000", "2000"):
    assert n in m, (n, m)
PY
  ok "prompt 1000 + max_tokens 2000 refused at once with 400 ($(python3 -c "print(round($t1 - $t0, 2))") s): $(head -c 220 "$tmp/body")"
else
  bad "prompt 1000 + max_tokens 2000: want 400 naming 2048/1000/2000, got $code: $(head -c 300 "$tmp/body")"
fi
n=$(gen_tokens)
if [ "${n:-x}" = 0 ]; then ok "no token generated for the refused request"; else bad "generation_tokens_total = ${n:-?}"; fi

# three at once: all refused, none preempts anyone
cpids=()
for i in 1 2 3; do
  curl -s --max-time 60 -o "$tmp/b$i" -w '%{http_code}\n' -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\": [$prompt], \"max_tokens\": 2000, \"ignore_eos\": true}" "$base/v1/completions" >"$tmp/c$i" &
  cpids+=($!)
done
wait "${cpids[@]}" # not a bare wait: the server is a child too
codes=$(cat "$tmp/c1" "$tmp/c2" "$tmp/c3" | tr '\n' ' ')
if [ "$codes" = "400 400 400 " ]; then ok "three at once: $codes"; else bad "three at once: $codes"; fi
pre=$(curl -s --max-time 10 "$base/metrics" | awk '/^eaas:num_preemptions_total[ {]/{print $NF}')
if [ "${pre:-x}" = 0 ]; then ok "no preemption"; else bad "num_preemptions_total = ${pre:-?}"; fi

# what fits is served
code=$(curl -s --max-time 120 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary "{\"prompt\": [$prompt], \"max_tokens\": 8, \"ignore_eos\": true}" "$base/v1/completions")
if [ "$code" = 200 ] && grep -q '"completion_tokens":8' "$tmp/body"; then
  ok "prompt 1000 + max_tokens 8 served"
else
  bad "prompt 1000 + max_tokens 8: $code $(head -c 300 "$tmp/body")"
fi

serve_test_summary
