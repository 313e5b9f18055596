#!/bin/bash
# test_monitor_cli.sh — the real `eaas monitor` binary, driven with curl:
# it prints "monitor listening on HOST:PORT" (port 0 = any free port); a
# server and a client register, /cluster shows them with rising versions; a
# long poll answers on a change; a member without heartbeats turns dead; a
# malformed register gets a 400 with an invalid_request_error; /health and
# /metrics answer; bad flags exit 2 before listening; SIGTERM (and SIGINT)
# stop it with exit status 0. With --replicate-ms, two servers with replica
# slots and a client reporting a hot expert get a plan ("assigned") in the
# table, the log has the plan's line and /metrics counts it.
# Needs EAAS_BIN (set by CTest). Loopback only, bounded waits; kills only the
# pid it started.
set -u
BIN=${EAAS_BIN:?EAAS_BIN not set}
T=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1" >&2; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2" >&2; }
check() { # check NAME COND-STRING...: eval the condition
    local name=$1
    shift
    if eval "$@"; then ok "$name"; else bad "$name" "$*"; fi
}

# start_monitor ARGS...: start it in the background, wait (<= 10 s) for its line; sets PID, PORT.
start_monitor() {
    "$BIN" monitor "$@" >"$T/out" 2>"$T/err" &
    PID=$!
    PORT=
    for _ in $(seq 1 100); do
        PORT=$(sed -n 's/^monitor listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$T/out")
        [ -n "$PORT" ] && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "monitor did not start: $(cat "$T/err")" >&2
    return 1
}

# stop_monitor SIG: send SIG, wait (<= 10 s); sets RC to its exit status ("running" if it did not stop).
stop_monitor() {
    kill "-$1" "$PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    RC=running
    kill -0 "$PID" 2>/dev/null && return
    wait "$PID"
    RC=$?
    PID=
}

C() { curl -s -m 20 "$@"; }
version() { C "http://127.0.0.1:$PORT/cluster" | jq -r .version; }

# ---- flags ------------------------------------------------------------------------------
"$BIN" monitor >"$T/o" 2>&1; rc=$?
check "no --port: exit 2" '[ $rc -eq 2 ] && grep -q -- "--port is required" "$T/o"'
"$BIN" monitor --port 70000 >"$T/o" 2>&1; rc=$?
check "--port out of range: exit 2" '[ $rc -eq 2 ] && grep -q -- "--port" "$T/o" && ! grep -q listening "$T/o"'
"$BIN" monitor --port 0 --heartbeat-ms 500 --dead-after-ms 400 >"$T/o" 2>&1; rc=$?
check "--dead-after-ms not above --heartbeat-ms: exit 2" '[ $rc -eq 2 ] && grep -q -- "--dead-after-ms" "$T/o"'
"$BIN" monitor --help >"$T/o" 2>&1; rc=$?
check "--help" '[ $rc -eq 0 ] && grep -q "usage: eaas monitor" "$T/o" && grep -q -- "--replicate-ms" "$T/o" && grep -q -- "--replicate-min-gain" "$T/o"'
# refused: out of range, or not a number; each names the flag and does not listen
for bad in "--replicate-ms -1" "--replicate-ms 3600001" "--replicate-ms 1.5" "--replicate-min-gain 1.01" \
    "--replicate-min-gain -0.1" "--replicate-min-gain x" "--replicate-halflife-ms 0" "--replicate-halflife-ms 86400001"; do
    "$BIN" monitor --port 0 $bad >"$T/o" 2>&1; rc=$?
    check "$bad: exit 2" '[ $rc -eq 2 ] && grep -q -- "${bad%% *}" "$T/o" && ! grep -q listening "$T/o"'
done

# ---- a running monitor --------------------------------------------------------------------
# nobody heartbeats here but once: the long-poll checks must run within dead_after of the
# registrations, which takes seconds when the machine is busy (curl and jq start slowly)
start_monitor --port 0 --heartbeat-ms 100 --dead-after-ms 8000 || exit 1
check "one line on stdout" '[ "$(wc -l <"$T/out")" -eq 1 ]'
H="http://127.0.0.1:$PORT"
SRV='{"role":"server","id":"s1","ucx":"AAECAw==","http":"127.0.0.1:9001","hosted":{"layers":[[0,3]],"experts":[[0,7]]}}'
r=$(C -XPOST "$H/register" -d "$SRV")
check "server registers" '[ "$(echo "$r" | jq -r .version)" = 2 ] && [ "$(echo "$r" | jq -r .heartbeat_ms)" = 100 ]'
EPOCH=$(echo "$r" | jq -r .epoch)
check "epoch is 16 hex digits" '[[ "$EPOCH" =~ ^[0-9a-f]{16}$ ]]'
r=$(C -XPOST "$H/register" -d '{"role":"client","id":"c1"}')
check "client registers" '[ "$(echo "$r" | jq -r .version)" = 3 ]'
cl=$(C "$H/cluster")
check "/cluster: both live" '[ "$(echo "$cl" | jq -r "[.servers[].state, .clients[].state] | join(\",\")")" = "live,live" ]'
check "/cluster: server fields" '[ "$(echo "$cl" | jq -c ".servers[0].hosted")" = "{\"layers\":[[0,3]],\"experts\":[[0,7]]}" ] && [ "$(echo "$cl" | jq -r ".servers[0].since")" = 2 ]'

# long poll: answers when a change comes (a heartbeat is no change; a leave is)
C "$H/cluster?after=3&wait_ms=20000&epoch=$EPOCH" >"$T/poll" &
CURL=$!
sleep 0.3
C -XPOST "$H/heartbeat" -d '{"id":"s1"}' >/dev/null
sleep 0.2
check "long poll still waiting after a heartbeat" 'kill -0 $CURL 2>/dev/null'
C -XPOST "$H/leave" -d '{"id":"c1"}' >/dev/null
for _ in $(seq 1 50); do kill -0 $CURL 2>/dev/null || break; sleep 0.1; done
wait $CURL
check "long poll answers the leave with its event" '[ "$(jq -c ".version, .events" "$T/poll" | tr -d "\n")" = "4[{\"version\":4,\"kind\":\"leave\",\"role\":\"client\",\"id\":\"c1\"}]" ]'
t0=$(date +%s%N)
v=$(C "$H/cluster?after=4&wait_ms=300" | jq -r .version)
t1=$(date +%s%N)
check "long poll without a change waits wait_ms" '[ "$v" = 4 ] && [ $(( (t1 - t0) / 1000000 )) -ge 290 ]'
v=$(C "$H/cluster?after=4&wait_ms=20000&epoch=0000000000000000" | jq -r .version)
check "long poll with another epoch answers at once" '[ "$v" = 4 ]'

# s1 never heartbeats again: dead after 8 s
state=live
for _ in $(seq 1 200); do
    state=$(C "$H/cluster" | jq -r '.servers[0].state')
    [ "$state" = dead ] && break
    sleep 0.1
done
check "silent server marked dead" '[ "$state" = dead ]'
code=$(C -o "$T/hb" -w '%{http_code}' -XPOST "$H/heartbeat" -d '{"id":"s1"}')
check "heartbeat of a dead member: 404" '[ "$code" = 404 ] && jq -e ".error.message" "$T/hb" >/dev/null'

code=$(C -o "$T/e" -w '%{http_code}' -XPOST "$H/register" -d '{"role":"server","id":"s2","ucx":"AAECAw==","http":"127.0.0.1:9","hosted":{"layers":[[5,1]],"experts":[[0,1]]}}')
check "bad range: 400 naming it" '[ "$code" = 400 ] && [ "$(jq -r .error.type "$T/e")" = invalid_request_error ] && jq -r .error.message "$T/e" | grep -q "hosted.layers\[0\]"'
code=$(C -o "$T/e" -w '%{http_code}' -XPOST "$H/register" -d '{"role":"client"')
check "truncated JSON: 400" '[ "$code" = 400 ] && jq -r .error.message "$T/e" | grep -q "invalid JSON"'
code=$(C -o /dev/null -w '%{http_code}' "$H/cluster?wait_ms=99999")
check "wait_ms over 30000: 400" '[ "$code" = 400 ]'

check "/health" '[ "$(C "$H/health" | jq -r .status)" = ok ]'
C "$H/metrics" >"$T/m"
check "/metrics" 'grep -q "^eaas:monitor_servers{state=\"dead\"} 1$" "$T/m" && grep -q "^eaas:monitor_deaths_total 1$" "$T/m" && grep -q "^eaas:monitor_version 5$" "$T/m" && grep -q "^eaas:monitor_clients{state=\"live\"} 0$" "$T/m"'

# a long poll in flight when the monitor stops must not hold it up
C "$H/cluster?after=5&wait_ms=30000" >/dev/null &
CURL=$!
sleep 0.2
stop_monitor TERM
wait $CURL 2>/dev/null
check "SIGTERM: exit 0, with a long poll in flight" '[ "$RC" = 0 ] && grep -q "monitor: stopped" "$T/err"'

# accepted at the ends of their ranges
start_monitor --port 0 --replicate-ms 0 --replicate-min-gain 1 || exit 1
check "--replicate-ms 0: no plan" 'grep -q "no replica plan" "$T/err"'
stop_monitor INT
check "SIGINT: exit 0" '[ "$RC" = 0 ]'

# ---- the replica plan ---------------------------------------------------------------------
start_monitor --port 0 --replicate-ms 3600000 --replicate-min-gain 0 --replicate-halflife-ms 1 || exit 1
check "--replicate-ms 3600000 --replicate-min-gain 0 --replicate-halflife-ms 1" 'grep -q "replica plan every 3600000 ms, min gain 0, load half-life 1 ms$" "$T/err"'
stop_monitor TERM
start_monitor --port 0 --replicate-ms 100 --replicate-min-gain 0.05 --dead-after-ms 20000 || exit 1
H="http://127.0.0.1:$PORT"
for s in "a 0,3" "b 4,7"; do
    set -- $s
    C -XPOST "$H/register" -d "{\"role\":\"server\",\"id\":\"$1\",\"ucx\":\"AA==\",\"http\":\"127.0.0.1:9\",\"replica_slots\":1,\"hosted\":{\"layers\":[[0,0]],\"experts\":[[$2]]}}" >/dev/null
done
C -XPOST "$H/register" -d '{"role":"client","id":"c"}' >/dev/null
# expert 1 is hot: b (the only server that does not host it) gets it; then (0,4) for a;
# estimated load a 130, b 40 -> a 85, b 85 (balance 1)
LOAD='{"id":"c","load":[[0,0,10],[0,1,100],[0,2,10],[0,3,10],[0,4,10],[0,5,10],[0,6,10],[0,7,10]]}'
got=
for _ in $(seq 1 100); do
    C -XPOST "$H/heartbeat" -d "$LOAD" >/dev/null
    got=$(C "$H/cluster" | jq -c '[.servers[].assigned]')
    [ "$got" = '[[[0,4]],[[0,1]]]' ] && break
    sleep 0.1
done
check "a plan: b holds (0,1), a holds (0,4)" '[ "$got" = "[[[0,4]],[[0,1]]]" ]'
check "the plan's log line" 'grep -q "replica plan: 2 replicas on 2 servers" "$T/err"'
C "$H/metrics" >"$T/m"
check "/metrics of the plan" 'grep -q "^eaas:monitor_replica_plans_total 1$" "$T/m" && grep -q "^eaas:monitor_replicas_assigned 2$" "$T/m" && grep -q "^eaas:monitor_load_pairs_total [1-9][0-9]*$" "$T/m" && grep -q "^eaas:monitor_plan_balance 1.000000$" "$T/m"'
r=$(C -XPOST "$H/heartbeat" -d '{"id":"b","replicas":[[0,1]]}')
check "b reports its replica" '[ "$(C "$H/cluster" | jq -c ".servers[1].replicas")" = "[[0,1]]" ]'
code=$(C -o "$T/e" -w '%{http_code}' -XPOST "$H/heartbeat" -d '{"id":"c","load":[[0,1,0]]}')
check "load of 0 pairs: 400 naming it" '[ "$code" = 400 ] && jq -r .error.message "$T/e" | grep -q "load\[0\]\[2\]: 0 < 1"'
stop_monitor INT
check "SIGINT with a planner: exit 0" '[ "$RC" = 0 ]'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
