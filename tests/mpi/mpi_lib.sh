# mpi_lib.sh — shared by the mpi-label serve tests (sourced): `eaas serve`
# jobs under mpirun, started and stopped by the test, checks counted.
#   start LOG CMD...     run CMD in the background (a fresh LOG for its stderr),
#                        wait for "ready:" (60 s); sets PID and PORT
#   rank_pid MPIPID R    the pid of rank R of that mpirun (its child)
#   stop_job             SIGTERM to rank 0 of job $PID (it drains and sends
#                        shutdown on the control bus); 60 s, then killed; its exit status
#   ok / bad MESSAGE     count a check; mpi_summary ends the script with the counts
# Every PID started is killed at exit if it is still this shell's child.
: "${EAAS_BIN:?}" "${EA_SRC:?}" "${EA_BUILD:?}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$EA_SRC/tests/golden/serve_lib.sh"   # kill_own, fresh_log
MPI="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none"
pass=0; fail=0
ok() { pass=$((pass+1)); echo "ok   $1" >&2; }
bad() { fail=$((fail+1)); echo "FAIL $1" >&2; }
mpi_summary() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
PIDS=()
mpi_cleanup() { kill_own KILL "${PIDS[@]}"; }
trap mpi_cleanup EXIT

start() {
  local log=$1; shift
  fresh_log "$log"
  "$@" > /dev/null 2>> "$log" &
  PID=$!
  PIDS+=("$PID")
  PORT=""
  for _ in $(seq 1 600); do
    grep -q "ready:" "$log" 2>/dev/null && break
    kill -0 "$PID" 2>/dev/null || { echo "server exited:" >&2; cat "$log" >&2; return 1; }
    sleep 0.1
  done
  PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$PORT" ]
}
rank_pid() {
  local c
  for c in $(pgrep -P "$1"); do
    tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$c"
  done
  return 0
}
stop_job() {
  local r0 i
  r0=$(rank_pid "$PID" 0)
  [ -n "$r0" ] && kill -TERM "$r0" || kill -TERM "$PID"
  for i in $(seq 1 600); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill_own KILL "$PID"
  wait "$PID"
}
