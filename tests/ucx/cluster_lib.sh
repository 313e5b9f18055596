# cluster_lib.sh — Expert-as-a-Service as real processes (sourced by the
# ucx-label shell tests): a monitor, expert servers, attention clients, each
# its own process on loopback, started with --port 0 and found by the address
# it prints. Every PID started is recorded and killed at exit (only those).
: "${EAAS_BIN:?EAAS_BIN must name the eaas binary}"
: "${EA_SRC:?EA_SRC must name the source tree}"
source "$EA_SRC/tests/golden/serve_lib.sh"

cl_pids=()
cl_cleanup() {
  local p
  kill_own KILL "${cl_pids[@]}"
  for p in "${cl_pids[@]}"; do wait "$p" 2>/dev/null; done
  stop_server
  serve_keep_logs
  rm -rf "$tmp"
}
cl_init() {
  serve_test_init
  trap cl_cleanup EXIT
}

# wait_line LOG REGEX PID: waits (60 s) until LOG has a line matching REGEX; prints the match
wait_line() {
  local i
  for i in $(seq 1 600); do
    if grep -qE "$2" "$1"; then grep -oE "$2" "$1" | head -1; return 0; fi
    kill -0 "$3" 2>/dev/null || { echo "process $3 exited:" >&2; cat "$1" >&2; return 1; }
    sleep 0.1
  done
  echo "no '$2' after 60 s:" >&2; cat "$1" >&2; return 1
}

# start_monitor: sets MON (host:port) and MON_PID
start_monitor() {
  fresh_log "$tmp/monitor.log"
  "$EAAS_BIN" monitor --port 0 "$@" >>"$tmp/monitor.log" 2>&1 &
  MON_PID=$!; cl_pids+=("$MON_PID")
  MON=$(wait_line "$tmp/monitor.log" 'listening on [0-9.]+:[0-9]+' "$MON_PID" | sed 's/listening on //') || return 1
}

# start_expert NAME ARGS...: an expert server; sets XPID_<NAME> and XPORT_<NAME>
start_expert() {
  local name=$1; shift
  fresh_log "$tmp/$name.log"
  "$EAAS_BIN" expert --monitor "$MON" --port 0 --id "$name" "$@" >>"$tmp/$name.log" 2>&1 &
  local pid=$!; cl_pids+=("$pid")
  local a; a=$(wait_line "$tmp/$name.log" 'listening on [0-9.]+:[0-9]+' "$pid") || return 1
  printf -v "XPID_$name" '%s' "$pid"
  printf -v "XPORT_$name" '%s' "${a##*:}"
}

# metric URL NAME: the value of an unlabelled Prometheus series
metric() { curl -s --max-time 10 "$1/metrics" | awk -v n="$2" '$1 == n {print $2}'; }

# same_streams NAME PORT_REF PORT_CLUSTER: 8 concurrent streams through the openai client, cluster = local
same_streams() {
  EA_SRC="$EA_SRC" node "$EA_SRC/tests/ucx/streams.mjs" "http://127.0.0.1:$2/v1" 8 24 "$tmp/s_ref.json" >/dev/null
  EA_SRC="$EA_SRC" node "$EA_SRC/tests/ucx/streams.mjs" "http://127.0.0.1:$3/v1" 8 24 "$tmp/s_cl.json" >/dev/null
  if python3 - "$tmp/s_ref.json" "$tmp/s_cl.json" <<'PY'
import json, sys
ref, a = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if ref["texts"] == a["texts"] and not any(a["errors"]) and len(set(a["texts"])) > 1 else 1)
PY
  then ok "$1"; else bad "$1: $(head -c 300 "$tmp/s_cl.json") vs local $(head -c 300 "$tmp/s_ref.json")"; fi
}
