#!/usr/bin/env bash
# test_serve_eplb.sh — EPLB through the server: the recorder endpoints, a
# rebalance on request, the metrics, and greedy outputs unchanged by it; on a
# tiny qwen3_moe and on the hybrid qwen3_5_moe (DeltaNet layers between the
# MoE ones: every layer is MoE, so its dump has one row per layer).
set -euo pipefail
: "${EAAS_BIN:?}" "${EA_SRC:?}" "${EA_BUILD:?}"
. "$EA_SRC/tests/golden/serve_lib.sh"
W="$EA_BUILD/golden-models/serve-eplb"
mkdir -p "$W"
trap stop_server EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok   $1" >&2; }
bad() { fail=$((fail+1)); echo "FAIL $1" >&2; }
gen() { curl -s "$U/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"'"$(basename "$M")"'","prompt":"Experts anywhere, all the time","max_tokens":12,"temperature":0}' \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'; }

for fam in qwen3_moe qwen3_5_moe; do
M="$W/$fam-tiny"
[ -d "$M" ] || EA_TINY_FAMILY=$fam make_tiny_model "$M"
read -r L E < <("$EAAS_BIN" inspect --json "$M" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["moe_layers"], d["experts"])')
start_server "$W/serve-$fam.log" --model "$M" --threads 2 --eplb --eplb-redundant 2 --eplb-ranks 2 --eplb-interval -1
U="http://127.0.0.1:$PORT"
[ "$(curl -s -XPOST "$U/eplb/record/start")" = '{"status":"recording"}' ] && ok "$fam: record/start" || bad "$fam: record/start"
before=$(gen)
dump=$(curl -s "$U/eplb/record/dump")
shape=$(echo "$dump" | grep -v '^#' | head -1)
rows=$(echo "$dump" | grep -v '^#' | tail -n +2 | wc -l)
total=$(echo "$dump" | grep -v '^#' | tail -n +2 | tr ' ' '\n' | grep -c . || true)
[ "$shape" = "$L $E" ] && [ "$rows" = "$L" ] && [ "$total" = $((L * E)) ] && ok "$fam: dump is a workload file ($L layers x $E experts)" || bad "$fam: dump shape '$shape' rows $rows values $total"
sum=$(echo "$dump" | grep -v '^#' | tail -n +2 | tr ' ' '\n' | awk '{s+=$1} END {print s}')
[ "$sum" -gt 0 ] && ok "$fam: dump counted $sum routed tokens" || bad "$fam: dump is empty"
echo "$dump" | grep -v '^#' > "$W/workload.txt"
"$EAAS_BIN" eplb place --workload "$W/workload.txt" --physical $((E + 2)) --groups 1 --nodes 1 --ranks 2 --out "$W/place.txt" >/dev/null \
  && ok "$fam: eplb place runs on the server's dump" || bad "$fam: eplb place on the dump"
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "$U/eplb/rebalance")
[ "$code" = 202 ] && ok "$fam: rebalance accepted (202)" || bad "$fam: rebalance status $code"
after=$(gen)
n=$(curl -s "$U/eplb/stats" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["rebalances_total"])')
[ "$n" -ge 1 ] && ok "$fam: rebalanced ($n)" || bad "$fam: no rebalance"
[ "$before" = "$after" ] && ok "$fam: greedy text unchanged by the rebalance" || bad "$fam: text changed: '$before' vs '$after'"
curl -s "$U/metrics" | grep -E '^eaas:eplb_rebalances_total(\{model_name="[^"]*"\})? [1-9]' >/dev/null && ok "$fam: metrics" || bad "$fam: metrics lack eaas:eplb_rebalances_total"
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/eplb/rebalance")
[ "$code" = 405 ] && ok "$fam: GET /eplb/rebalance is 405" || bad "$fam: GET /eplb/rebalance gave $code"
stop_server
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
