/*
 * monitor.h — `eaas monitor`: membership of expert servers and attention
 * clients (DESIGN.md section 5; the messages are in docs/protocol.md,
 * "Monitor", and checked by monitor_msg.h; the table is monitor_table.h).
 *
 * Members register, heartbeat every heartbeat_ms and leave; a member silent
 * for dead_after_ms is marked dead by the reaper thread. Every change bumps
 * the table's version; GET /cluster?after=N&wait_ms=M is a long poll that
 * answers as soon as the version passes N, so subscribers see every change in
 * order. HTTP/JSON on libmicrohttpd:
 *
 *   POST /register    200 {"epoch","version","heartbeat_ms","dead_after_ms"}; 400; 503 table full
 *   POST /heartbeat   200 {"epoch","version"}; 404 unknown or dead id (register again);
 *                     400 a bad "load" or "replicas", or more replicas than the server's slots
 *   POST /leave       200 {"epoch","version"}; 404 unknown id
 *   GET  /cluster     the table (monitor_table.h); ?after=N&wait_ms=M[&epoch=E]
 *   GET  /health      200 {"status":"ok","epoch","version",...}
 *   GET  /metrics     Prometheus text: eaas:monitor_servers{state}, eaas:monitor_clients{state},
 *                     eaas:monitor_version, eaas:monitor_deaths_total, and of the replica
 *                     plan: eaas:monitor_replica_plans_total, eaas:monitor_replicas_assigned,
 *                     eaas:monitor_load_pairs_total, eaas:monitor_load_ignored_total,
 *                     eaas:monitor_plan_balance
 * Errors: {"error":{"message","type","param":null,"code":null}}; 400 for a
 * message that fails a check (type invalid_request_error), 404 unknown path or
 * id, 405 wrong method, 413 body over 1 MiB.
 *
 *   ea_monitor_opts o = {.host = "127.0.0.1", .port = 0};   // 0: any free port
 *   ea_monitor *m;  ea_monitor_start(&o, &m);
 *   ... ea_monitor_port(m) ...
 *   ea_monitor_stop(m);   // wakes long polls, joins every thread
 *
 * Replicas of hot experts (docs/protocol.md, "Replicas of hot experts: the
 * monitor's plan"): the clients' heartbeat "load" is summed (monitor_load.h);
 * every replicate_ms the planner thread decays it, and when some load is left
 * and some live server has replica_slots (or some server still has a plan, to
 * be cleared), plans (replicas.h) without holding the mutex, then writes the
 * servers' "assigned" into the table.
 *
 * Threads: MHD's listener, one thread per connection (a long poll blocks its
 * own thread on a condition variable), the reaper, and the planner (when
 * replicate_ms > 0). One mutex guards the table, the load sum and the plan's
 * counters; `changed` is broadcast on every change and at stop.
 */
#ifndef EA_MONITOR_H
#define EA_MONITOR_H

#include "base/status.h"

typedef struct {
    const char *host;  /* address to listen on; NULL: 127.0.0.1 */
    int port;          /* 0: any free port (ea_monitor_port) */
    int heartbeat_ms;  /* told to members; <= 0: 200 */
    int dead_after_ms; /* silence after which a member is dead; <= 0: 1000 */
    int replicate_ms;  /* period of the replica plan; <= 0: never plan */
    double replicate_min_gain; /* 0..1: a plan replaces a valid one only if its estimated max
                                  server load is below (1 - this) x the current one's */
    int replicate_halflife_ms; /* half-life of the clients' load (monitor_load.h); <= 0: 30000 */
} ea_monitor_opts;

typedef struct ea_monitor ea_monitor;

ea_status ea_monitor_start(const ea_monitor_opts *o, ea_monitor **out);
int ea_monitor_port(const ea_monitor *m);
/* Epoch of this run (random, chosen at start). */
unsigned long long ea_monitor_epoch(const ea_monitor *m);
/* Stops listening, wakes every long poll, joins all threads, frees. NULL is fine. */
void ea_monitor_stop(ea_monitor *m);

#endif
