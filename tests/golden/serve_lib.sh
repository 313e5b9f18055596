# serve_lib.sh — shared by the serve golden tests (sourced, not run).
# start_server LOG ARGS...: starts `eaas serve --port 0 ARGS...` in the
# background, waits for "ready", sets SRV_PID and PORT. The caller's EXIT trap
# calls stop_server, which kills only that PID.
: "${EAAS_BIN:?EAAS_BIN must name the eaas binary}"
: "${EA_SRC:?EA_SRC must name the source tree}"

SRV_PID=""
PORT=""

# serve_test_init: a temporary directory $tmp, removed at exit together with the
# server and the background PIDs the test puts in bg_pids; ok/bad count checks.
serve_test_init() {
  tmp=$(mktemp -d)
  bg_pids=()
  passed=0
  failed=0
  trap serve_test_cleanup EXIT
}
serve_test_cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  stop_server
  rm -rf "$tmp"
}
ok() { passed=$((passed + 1)); echo "ok   $1" >&2; }
bad() { failed=$((failed + 1)); echo "FAIL $1" >&2; }

start_server() {
  local log=$1
  shift
  "$EAAS_BIN" serve --port 0 "$@" >"$log" 2>&1 &
  SRV_PID=$!
  local i
  for i in $(seq 1 600); do
    if grep -q " ready: " "$log"; then
      PORT=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | head -1 | sed 's/.*://')
      return 0
    fi
    if ! kill -0 "$SRV_PID" 2>/dev/null; then
      echo "server exited during start-up:" >&2
      cat "$log" >&2
      SRV_PID=""
      return 1
    fi
    sleep 0.1
  done
  echo "server not ready after 60 s:" >&2
  cat "$log" >&2
  return 1
}

stop_server() {
  if [ -n "$SRV_PID" ] && kill -0 "$SRV_PID" 2>/dev/null; then
    kill -TERM "$SRV_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
  fi
  SRV_PID=""
}

make_tiny_model() {
  "$EAAS_BIN" make-model --family qwen3_moe --preset tiny --seed 1 --format hf --out "$1" >/dev/null
}

# serve_test_init: what a serve test script starts with: $tmp (removed at exit,
# after stop_server), the ok/bad reporters and their counters; end the script
# with serve_test_summary.
serve_test_init() {
  tmp=$(mktemp -d)
  trap 'stop_server; rm -rf "$tmp"' EXIT
  passed=0
  failed=0
}
ok() { passed=$((passed + 1)); echo "ok   $1" >&2; }
bad() { failed=$((failed + 1)); echo "FAIL $1" >&2; }
serve_test_summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
