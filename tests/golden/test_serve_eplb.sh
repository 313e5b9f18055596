#!/usr/bin/env bash
# test_serve_eplb.sh — EPLB through the server: the recorder endpoints, a
# rebalance on request, the metrics, and greedy outputs unchanged by it.
set -euo pipefail
: "${EAAS_BIN:?}" "${EA_SRC:?}" "${EA_BUILD:?}"
. "$EA_SRC/tests/golden/serve_lib.sh"
W="$EA_BUILD/golden-models/serve-eplb"
mkdir -p "$W"
M="$W/qwen3-tiny"
[ -d "$M" ] || make_tiny_model "$M"
trap stop_server EXIT
start_server "$W/serve.log" --model "$M" --threads 2 --eplb --eplb-redundant 2 --eplb-ranks 2 --eplb-interval -1
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok   $1" >&2; }
bad() { fail=$((fail+1)); echo "FAIL $1" >&2; }
U="http://127.0.0.1:$PORT"
gen() { curl -s "$U/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"'"$(basename "$M")"'","prompt":"Experts anywhere, all the time","max_tokens":12,"temperature":0}' \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'; }

[ "$(curl -s -XPOST "$U/eplb/record/start")" = '{"status":"recording"}' ] && ok "record/start" || bad "record/start"
before=$(gen)
dump=$(curl -s "$U/eplb/record/dump")
shape=$(echo "$dump" | grep -v '^#' | head -1)
rows=$(echo "$dump" | grep -v '^#' | tail -n +2 | wc -l)
total=$(echo "$dump" | grep -v '^#' | tail -n +2 | tr ' ' '\n' | grep -c . || true)
[ "$shape" = "2 16" ] && [ "$rows" = 2 ] && [ "$total" = 32 ] && ok "dump is a workload file (2 layers x 16 experts)" || bad "dump shape '$shape' rows $rows values $total"
sum=$(echo "$dump" | grep -v '^#' | tail -n +2 | tr ' ' '\n' | awk '{s+=$1} END {print s}')
[ "$sum" -gt 0 ] && ok "dump counted $sum routed tokens" || bad "dump is empty"
echo "$dump" | grep -v '^#' > "$W/workload.txt"
"$EAAS_BIN" eplb place --workload "$W/workload.txt" --physical 18 --groups 1 --nodes 1 --ranks 2 --out "$W/place.txt" >/dev/null \
  && ok "eplb place runs on the server's dump" || bad "eplb place on the dump"
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "$U/eplb/rebalance")
[ "$code" = 202 ] && ok "rebalance accepted (202)" || bad "rebalance status $code"
after=$(gen)
n=$(curl -s "$U/eplb/stats" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["rebalances_total"])')
[ "$n" -ge 1 ] && ok "rebalanced ($n)" || bad "no rebalance"
[ "$before" = "$after" ] && ok "greedy text unchanged by the rebalance" || bad "text changed: '$before' vs '$after'"
curl -s "$U/metrics" | grep -E '^eaas:eplb_rebalances_total(\{model_name="[^"]*"\})? [1-9]' >/dev/null && ok "metrics" || bad "metrics lack eaas:eplb_rebalances_total"
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/eplb/rebalance")
[ "$code" = 405 ] && ok "GET /eplb/rebalance is 405" || bad "GET /eplb/rebalance gave $code"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
