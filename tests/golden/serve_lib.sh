# serve_lib.sh — shared by the serve golden tests (sourced, not run).
# start_server LOG ARGS...: starts `eaas serve --port 0 ARGS...` in the
# background, waits for "ready", sets SRV_PID and PORT. The caller's EXIT trap
# calls stop_server, which kills only that PID.
: "${EAAS_BIN:?EAAS_BIN must name the eaas binary}"
: "${EA_SRC:?EA_SRC must name the source tree}"

SRV_PID=""
PORT=""

# kill_own SIG PID...: signal each PID that is still a child of this shell. A
# recorded PID whose process has exited may by now belong to an unrelated
# process (PIDs are reused) — another test's monitor or server, which a blind
# kill would take down.
kill_own() {
  local sig=$1 p
  shift
  for p in "$@"; do
    [ "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f2)" = "$$" ] && kill "-$sig" "$p" 2>/dev/null
  done
  return 0
}
# fresh_log FILE: an empty log before a process is started on it. Without it the
# first look at FILE can still see a previous process's lines (the child
# truncates FILE only after the fork) — and take its port, or its "ready".
fresh_log() { rm -f "$1" && : >"$1"; }

# serve_test_init: what a serve test script starts with: a temporary directory
# $tmp, removed at exit together with the server and the background PIDs the
# test puts in bg_pids; ok/bad count checks; end the script with
# serve_test_summary. When a check failed, the logs in $tmp are kept first
# (serve_keep_logs).
serve_test_init() {
  tmp=$(mktemp -d)
  bg_pids=()
  passed=0
  failed=0
  trap serve_test_cleanup EXIT
}
serve_test_cleanup() {
  local p
  kill_own TERM "${bg_pids[@]}"
  stop_server
  serve_keep_logs
  rm -rf "$tmp"
}
# serve_keep_logs: after a failed check, $tmp's logs go to $EA_BUILD/failed-logs/<test>-<pid>/
serve_keep_logs() {
  [ "${failed:-0}" -gt 0 ] && ls "$tmp"/*.log >/dev/null 2>&1 || return 0
  local d="${EA_BUILD:-/tmp}/failed-logs/$(basename "$0" .sh)-$$"
  mkdir -p "$d" && cp "$tmp"/*.log "$d"/ && echo "logs kept in $d" >&2
}
ok() { passed=$((passed + 1)); echo "ok   $1" >&2; }
bad() { failed=$((failed + 1)); echo "FAIL $1" >&2; }

start_server() {
  local log=$1
  shift
  fresh_log "$log"
  "$EAAS_BIN" serve --port 0 "$@" >>"$log" 2>&1 &
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
    kill_own TERM "$SRV_PID"
    local i
    for i in $(seq 1 100); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
    kill_own KILL "$SRV_PID"
    wait "$SRV_PID" 2>/dev/null || true
  fi
  SRV_PID=""
}

make_tiny_model() {
  "$EAAS_BIN" make-model --family "${EA_TINY_FAMILY:-qwen3_moe}" --preset tiny --seed 1 --format hf --out "$1" >/dev/null
}

# serve_test_summary: the counts; fails the script if a check failed.
serve_test_summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
