/*
 * node.h — an expert server as a process (`eaas expert`, DESIGN.md section 5):
 * the experts it hosts loaded from the model file, the slot loop of server.h
 * on its own thread, an HTTP port where clients connect, and its membership
 * with the monitor.
 *
 * Threads and what each owns:
 *   poll thread   the UCX context and the ea_xsrv: connects waiting clients,
 *                 frees the slots of clients the monitor declared dead, runs
 *                 poll rounds (spinning while there is work, sleeping 50 us
 *                 per round after 2 ms without any)
 *   HTTP threads  POST /connect (queued to the poll thread, answered when it
 *                 has made the slot), GET /health, GET /metrics (a snapshot
 *                 of the loop's counters)
 *   member        registers, heartbeats, receives tables (member.h); on a
 *                 table that assigns this server replicas of hot experts
 *                 (monitor_msg.h "assigned") it copies them in from the
 *                 model file, and the poll thread binds them between rounds
 *
 * Replicas (docs/protocol.md "Replicas of hot experts"): with replica_slots
 * > 0 the server holds up to that many (layer, expert) pairs beyond its
 * --layers x --experts, as the monitor assigns them. A replica is served as
 * soon as it is bound and announced in the next heartbeat's "replicas"; one
 * no longer assigned is announced gone at once but served for
 * replica_grace_ms more (clients that have not seen the new table yet still
 * send to it), then unbound and its memory freed.
 *
 * POST /connect (docs/protocol.md "Connecting to an expert server"):
 *   {"client":MEMBER_ID, "ucx":BASE64, "result_addr":N, "result_bytes":N, "rkey":BASE64,
 *    "model":{...} (optional: the client's, checked before a slot is made),
 *    "lane":N (optional: connecting a lane again frees its earlier slot)}
 *   -> {"client":ID, "slot_addr":N, "slot_bytes":N, "rkey":BASE64, "ucx":BASE64,
 *       "model":{"arch":..,"n_layers":..,"n_experts":..,"hidden":..,"max_tokens":..,"max_k":..}}
 */
#ifndef EA_NODE_H
#define EA_NODE_H

#include <stdint.h>

#include "base/status.h"

typedef struct {
    const char *model_path;
    const char *monitor;  /* "host:port"; NULL: no membership (tests connect directly) */
    const char *id;       /* member id; NULL: "expert-<host>-<port>" */
    const char *host;     /* HTTP address to bind and to publish; NULL: 127.0.0.1 */
    int port;             /* HTTP port; 0: any free one */
    int threads;          /* expert kernels; <= 0: CPU count */
    const char *layers;   /* "all" or "A-B[,C-D...]" (inclusive) */
    const char *experts;  /* "all" or "A-B[,C-D...]" */
    int max_tokens;       /* tokens of one client call; <= 0: 512 */
    int max_clients;      /* <= 0: 16 */
    double flush_deadline_s; /* a client's result flush; <= 0: 1 s */
    double gather_s;         /* the server loop's gather window (server.h); 0: none */
    int replica_slots;       /* replicas of hot experts held at most (0: none) */
    int replica_grace_ms;    /* a dropped replica is still served this long; <= 0: 3000 */
} ea_xnode_opts;

typedef struct ea_xnode ea_xnode;

ea_status ea_xnode_start(const ea_xnode_opts *o, ea_xnode **out);
int ea_xnode_port(const ea_xnode *n);
void ea_xnode_stop(ea_xnode *n);

/* "all" or "A-B,C,D-E" over [0, n): a mask of n bytes (1 = in). */
ea_status ea_xnode_ranges_parse(const char *spec, int n, uint8_t *mask);

#endif
