#!/usr/bin/env bash
# test_eaas_partition.sh — a network partition (issue 20): the monitor, two
# expert servers (replicas) and the attention client each run in a network
# namespace of their own, joined by veth pairs to a bridge in a hub namespace
# (all made by this test, addresses 10.77.0.0/24 inside them only), with UCX
# over TCP between them (UCX_TLS=tcp: no shared memory across "hosts"). While
# 16 streams run, server xa's link is taken down: it is alive but unreachable.
# Every request completes with the local server's text; the client counts
# timeouts and failovers; the monitor marks xa dead. Needs root (ip netns).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cluster_lib.sh"
cl_init
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then echo "skipped: needs root and iproute2"; exit 0; fi

P="ea$$"   # namespace prefix, unique to this run
nss=()
net_cleanup() {
  cl_cleanup
  local n
  for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null; done
}
trap net_cleanup EXIT

# host NAME LAST-OCTET: a namespace with lo up and a veth to the hub's bridge
ip netns add "${P}hub" && nss+=("${P}hub") || exit 1
ip -n "${P}hub" link add br0 type bridge && ip -n "${P}hub" link set br0 up && ip -n "${P}hub" link set lo up
host() {
  local ns="$P$1"
  ip netns add "$ns" && nss+=("$ns")
  ip link add "v$P$1" type veth peer name "h$P$1"
  ip link set "v$P$1" netns "$ns"
  ip link set "h$P$1" netns "${P}hub"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "v$P$1" name eth0
  ip -n "$ns" addr add "10.77.0.$2/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "${P}hub" link set "h$P$1" master br0
  ip -n "${P}hub" link set "h$P$1" up
}
host mon 1 && host xa 2 && host xb 3 && host cl 4 || { bad "namespaces"; exit 1; }
# in_ns NS CMD...: runs CMD in namespace NS; only ever called with & (it execs, so $! is the process)
in_ns() { local ns="$P$1"; shift; exec ip netns exec "$ns" env UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 "$@"; }

model="$tmp/model"
"$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 7 --format hf --out "$model" >/dev/null || exit 1
start_server "$tmp/ref.log" --model "$model" --threads 1 || exit 1
ref=$PORT; cl_pids+=("$SRV_PID"); SRV_PID=""
EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://127.0.0.1:$ref/v1" 16 32 "$tmp/ref.json" >/dev/null || exit 1

in_ns mon "$EAAS_BIN" monitor --host 10.77.0.1 --port 7000 --heartbeat-ms 100 --dead-after-ms 500 >"$tmp/monitor.log" 2>&1 &
MON_PID=$!; cl_pids+=("$MON_PID"); MON=10.77.0.1:7000
wait_line "$tmp/monitor.log" 'listening on' "$MON_PID" >/dev/null || exit 1
for x in xa:2 xb:3; do
  in_ns "${x%%:*}" "$EAAS_BIN" expert --model "$model" --monitor "$MON" --host "10.77.0.${x##*:}" --port 7001 \
    --id "${x%%:*}" --threads 1 >"$tmp/${x%%:*}.log" 2>&1 &
  cl_pids+=("$!")
  wait_line "$tmp/${x%%:*}.log" 'listening on' "$!" >/dev/null || exit 1
done
in_ns cl "$EAAS_BIN" serve --model "$model" --host 10.77.0.4 --port 7002 --threads 1 --experts-remote "$MON" \
  --expert-timeout-ms 1000 >"$tmp/client.log" 2>&1 &
CL_PID=$!; cl_pids+=("$CL_PID")
wait_line "$tmp/client.log" ' ready: ' "$CL_PID" >/dev/null || exit 1
grep -q "server xa connected" "$tmp/client.log" && grep -q "server xb connected" "$tmp/client.log" &&
  ok "client in its namespace connected to xa and xb over TCP" || bad "client connections: $(grep remote "$tmp/client.log")"

ip netns exec "${P}cl" env EA_SRC="$EA_SRC" node "$here/streams.mjs" "http://10.77.0.4:7002/v1" 16 32 "$tmp/run.json" >"$tmp/run.out" 2>&1 &
np=$!
for i in $(seq 1 600); do grep -q started "$tmp/run.out" && break; kill -0 $np 2>/dev/null || break; sleep 0.05; done
ip -n "${P}hub" link set "h${P}xa" down   # the partition: xa alive, unreachable
wait $np
r=$(python3 - "$tmp/ref.json" "$tmp/run.json" <<'PY'
import json, sys
ref, run = (json.load(open(p)) for p in sys.argv[1:])
errs = [e for e in run["errors"] if e]
same = sum(a == b for a, b in zip(ref["texts"], run["texts"]))
print(f"{len(errs)} failed, {same}/16 texts identical" + (f"; first error: {errs[0]}" if errs else ""))
sys.exit(0 if not errs and same == 16 else 1)
PY
) && ok "xa's link down mid-stream: $r" || bad "partition: $r"
m=$(ip netns exec "${P}cl" curl -s http://10.77.0.4:7002/metrics)
t=$(echo "$m" | awk '/^eaas:remote_timeouts_total/ {print $2}'); f=$(echo "$m" | awk '/^eaas:remote_failovers_total/ {print $2}')
[ "${t:-0}" -gt 0 ] && [ "${f:-0}" -gt 0 ] && ok "client counted $t timeouts, $f failovers" || bad "timeouts ${t:-?} failovers ${f:-?}"
sleep 0.7
st=$(ip netns exec "${P}cl" curl -s "http://$MON/cluster" | python3 -c 'import json,sys; print({s["id"]: s["state"] for s in json.load(sys.stdin)["servers"]})')
echo "$st" | grep -q "'xa': 'dead'" && echo "$st" | grep -q "'xb': 'live'" && ok "monitor: $st" || bad "monitor table: $st"
serve_test_summary
