/*
 * member.h — a member's side of the monitor (monitor.h): an expert server or
 * an attention client that registers, heartbeats and follows the table.
 *
 *   static void on_table(void *ctx, const char *cluster_json) {
 *       ea_cluster c;
 *       if (ea_cluster_parse(cluster_json, strlen(cluster_json), &c) == EA_OK) { ...; ea_cluster_free(&c); }
 *   }
 *   char *fields = ea_member_server_fields(addr, addr_len, "127.0.0.1:9001", layers, 1, experts, 1);
 *   ea_member_opts o = {.monitor = "127.0.0.1:7000", .role = EA_MON_SERVER, .fields = fields,
 *                       .on_table = on_table, .ctx = me};
 *   ea_member *mb;  ea_member_start(&o, &mb);   // returns at once; registration goes on in the background
 *   ...
 *   ea_member_stop(mb);                         // POST /leave, joins the threads
 *
 * Two threads of its own:
 *   heartbeat  POST /register until the monitor answers 200 (backoff 50 ms
 *              doubling to 1 s), then POST /heartbeat every heartbeat_ms (the
 *              monitor's value, with the fields of beat_fields); a 404 (the monitor forgot us: it restarted,
 *              or declared us dead) or a new epoch -> register again at once
 *   table      GET /cluster?after=V&wait_ms=W&epoch=E, a long poll (W = poll_wait_ms); each
 *              answer with a new epoch, or the same epoch and a higher version,
 *              is handed to on_table — in version order, never twice
 * If the monitor is down both keep retrying quietly: one warning line when an
 * outage starts and one info line when it ends. The member keeps serving on
 * the last table it handed over; nothing is lost when the monitor restarts
 * (it rebuilds its table from the re-registrations).
 *
 * on_table runs on the table thread, beat_fields on the heartbeat thread;
 * neither may call ea_member_stop.
 */
#ifndef EA_MEMBER_H
#define EA_MEMBER_H

#include "base/status.h"
#include "eaas/monitor_msg.h"

typedef struct {
    const char *monitor; /* "host:port" of the monitor */
    ea_mon_role role;
    const char *id;      /* NULL: "<role>-<16 random hex digits>" */
    const char *fields;  /* NULL, or a JSON object's text: extra register fields
                            (a server's: ea_member_server_fields) */
    void (*on_table)(void *ctx, const char *cluster_json); /* NULL: no table thread */
    /* Extra fields of each heartbeat, as a JSON object's text (ea_malloc'd;
     * the member frees it), or NULL for none: a client's "load", a server's
     * "replicas" (monitor_msg.h). Called on the heartbeat thread before each
     * heartbeat. NULL: none. */
    char *(*beat_fields)(void *ctx);
    void *ctx;
    int poll_wait_ms;    /* wait_ms of the table long poll; <= 0: 10000 */
} ea_member_opts;

typedef struct ea_member ea_member;

/* Checks the options (monitor address, id, fields as the monitor would) and
 * starts the threads; it does not wait for the monitor. */
ea_status ea_member_start(const ea_member_opts *o, ea_member **out);
/* Sends /leave (a short deadline; a monitor that is down is not waited for),
 * stops and joins the threads, frees. NULL is fine. */
void ea_member_stop(ea_member *m);
const char *ea_member_id(const ea_member *m);
/* 1 once registered with the current monitor (0 while it is unreachable or
 * before the first answer). */
int ea_member_registered(const ea_member *m);
/* For tests: stop without /leave, as a process killed would (the monitor then
 * declares the member dead after dead_after_ms). */
void ea_member_abandon(ea_member *m);

#endif
