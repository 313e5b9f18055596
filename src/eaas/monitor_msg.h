/*
 * monitor_msg.h — the monitor's JSON messages (docs/protocol.md, "Monitor"):
 * parsers that check every field of what a member sends, the parser of the
 * table a member receives, and the builder of a server's register fields.
 * No sockets and no state here, so tests and the fuzz target
 * (tests/fuzz/fuzz_monitor_msg.c) call them on bytes directly.
 *
 *   POST /register   {"role":"server"|"client", "id":ID,
 *                     server only: "ucx":BASE64, "http":"host:port",
 *                                  "hosted":{"layers":[[a,b],...],"experts":[[a,b],...]},
 *                                  "replica_slots":N (optional, 0)}
 *   POST /heartbeat  {"id":ID, optional: "load":[[layer,expert,pairs],...] (a client's),
 *                                         "replicas":[[layer,expert],...] (a server's)}
 *   POST /leave      {"id":ID}
 *   GET  /cluster?after=N&wait_ms=M&epoch=E
 *
 * Replicas of hot experts (docs/protocol.md "Replicas of hot experts"): a
 * server with replica_slots > 0 may host up to that many (layer, expert)
 * pairs beyond `hosted`. Clients report, in each heartbeat, the pairs they
 * routed to each (layer, expert) since the one before; the monitor plans
 * which server should hold which replica ("assigned" in its table entry);
 * the server loads them and reports what it now holds ("replicas" in its
 * heartbeats), and clients send to them from the table that says so.
 *
 * Limits (a message past one is refused, naming the JSON path):
 *   ID        1..EA_MON_ID_MAX characters of [A-Za-z0-9._:@-]
 *   ucx       non-empty strict base64 (base/base64.h), at most EA_MON_UCX_MAX characters
 *   http      host:port (eaas/http_client.h: ea_hostport_parse)
 *   ranges    [a, b] with 0 <= a <= b <= EA_MON_RANGE_MAX, integers; 1..EA_MON_RANGES_MAX
 *             per list; a server hosts every (layer, expert) of layers x experts
 *   after     decimal, 0..2^63-1; wait_ms 0..EA_MON_WAIT_MAX_MS; epoch 16 hex digits
 *   replica_slots  integer 0..EA_MON_REPLICAS_MAX
 *   load      0..EA_MON_LOAD_MAX triples [layer, expert, pairs] of integers: layer and
 *             expert 0..EA_MON_RANGE_MAX, pairs 1..EA_MON_PAIRS_MAX; a pair may repeat
 *   replicas, assigned  0..EA_MON_REPLICAS_MAX pairs [layer, expert], each
 *             0..EA_MON_RANGE_MAX, no pair twice; in a /cluster entry at most its
 *             replica_slots (the monitor refuses a heartbeat with more: monitor_table.h)
 * Fields not named here are ignored (a newer member may send more).
 *
 * Errors are EA_ERR_FORMAT (wrong JSON or type) or EA_ERR_RANGE (a value out of
 * its limits) with ea_errmsg() naming the path ("hosted.layers[3][1]: 7 < 9").
 */
#ifndef EA_MONITOR_MSG_H
#define EA_MONITOR_MSG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define EA_MON_ID_MAX 128
#define EA_MON_UCX_MAX 65536
#define EA_MON_HTTP_MAX 270 /* 255-byte host name, brackets, ':', 5-digit port */
#define EA_MON_RANGE_MAX 1000000
#define EA_MON_RANGES_MAX 4096
#define EA_MON_WAIT_MAX_MS 30000
#define EA_MON_REPLICAS_MAX 4096    /* replica_slots, and pairs in "replicas" / "assigned" */
#define EA_MON_LOAD_MAX 65536       /* triples in one heartbeat's "load" */
#define EA_MON_PAIRS_MAX 1000000000 /* pairs of one triple */

typedef enum { EA_MON_SERVER = 0, EA_MON_CLIENT = 1 } ea_mon_role;

typedef struct {
    int32_t a, b; /* inclusive, 0 <= a <= b */
} ea_range;

/* A register message. Owns its arrays and ucx text (ea_mon_register_free). */
typedef struct {
    ea_mon_role role;
    char id[EA_MON_ID_MAX + 1];
    /* server only (clients: NULL / 0 / "") */
    char *ucx; /* owns: the base64 text as received (checked to decode) */
    char http[EA_MON_HTTP_MAX + 1];
    ea_range *layers, *experts; /* own */
    int n_layers, n_experts;
    int replica_slots; /* 0..EA_MON_REPLICAS_MAX; 0 when absent */
} ea_mon_register;

ea_status ea_mon_register_parse(const char *body, size_t len, ea_mon_register *out);
void ea_mon_register_free(ea_mon_register *r);

/* {"id":ID} of /leave (and of /heartbeat, ignoring its other fields). OUT: id. */
ea_status ea_mon_id_parse(const char *body, size_t len, char id[EA_MON_ID_MAX + 1]);

/* One (layer, expert) pair; a replica. */
typedef struct {
    int32_t layer, expert; /* 0..EA_MON_RANGE_MAX each */
} ea_mon_pair;

/* One triple of a client's "load": pairs routed to (layer, expert). */
typedef struct {
    int32_t layer, expert;
    int64_t pairs; /* 1..EA_MON_PAIRS_MAX */
} ea_mon_load;

/* A heartbeat. Owns its arrays (ea_mon_heartbeat_free). */
typedef struct {
    char id[EA_MON_ID_MAX + 1];
    ea_mon_load *load; /* owns; 0..EA_MON_LOAD_MAX triples (NULL / 0 when absent) */
    int n_load;
    int has_replicas;      /* "replicas" was present (an empty list says "none") */
    ea_mon_pair *replicas; /* owns; no pair twice; 0..EA_MON_REPLICAS_MAX */
    int n_replicas;
} ea_mon_heartbeat;

ea_status ea_mon_heartbeat_parse(const char *body, size_t len, ea_mon_heartbeat *out);
void ea_mon_heartbeat_free(ea_mon_heartbeat *h);

/* The query of GET /cluster: each argument is NULL when absent. OUT: *after
 * (0 if absent), *wait_ms (0 if absent), *epoch and *has_epoch. */
ea_status ea_mon_query_parse(const char *after_s, const char *wait_s, const char *epoch_s, uint64_t *after,
                             int *wait_ms, uint64_t *epoch, int *has_epoch);

/* "0123456789abcdef" -> value: exactly 16 lower- or upper-case hex digits. */
ea_status ea_mon_epoch_parse(const char *s, uint64_t *epoch);
/* value -> 16 lower-case hex digits and a NUL. */
void ea_mon_epoch_format(uint64_t epoch, char out[17]);

/* ---- the table a member receives (GET /cluster) ------------------------------------ */

typedef struct {
    char id[EA_MON_ID_MAX + 1];
    int live;       /* 1 live, 0 dead */
    uint64_t since; /* the version at which this incarnation registered */
    uint8_t *ucx;   /* owns: the worker address, decoded */
    size_t ucx_len;
    char http[EA_MON_HTTP_MAX + 1];
    ea_range *layers, *experts; /* own */
    int n_layers, n_experts;
    int replica_slots;
    ea_mon_pair *replicas; /* owns: what the server holds beyond `hosted` (its last heartbeat's "replicas") */
    int n_replicas;
    int has_assigned;      /* the monitor has a plan for this server ("assigned" present) */
    ea_mon_pair *assigned; /* owns: the replicas the monitor wants it to hold */
    int n_assigned;
} ea_cluster_server;

typedef struct {
    char id[EA_MON_ID_MAX + 1];
    int live;
    uint64_t since;
} ea_cluster_client;

/* hosted: a server's "replicas" changed (its heartbeat); assign: the monitor's plan ("assigned") changed */
typedef enum {
    EA_MON_EV_REGISTER = 0,
    EA_MON_EV_DEAD = 1,
    EA_MON_EV_LEAVE = 2,
    EA_MON_EV_HOSTED = 3,
    EA_MON_EV_ASSIGN = 4
} ea_mon_event_kind;

typedef struct {
    uint64_t version;
    ea_mon_event_kind kind;
    ea_mon_role role;
    char id[EA_MON_ID_MAX + 1];
} ea_cluster_event;

typedef struct {
    uint64_t epoch, version;
    ea_cluster_server *servers; /* own */
    int n_servers;
    ea_cluster_client *clients; /* own */
    int n_clients;
    int has_events;             /* the answer had "events": every change after the asked version */
    ea_cluster_event *events;   /* owns; in version order */
    int n_events;
} ea_cluster;

/* Parse a /cluster answer, checking it as strictly as the monitor checks what
 * it receives. A server's replica_slots, replicas and assigned are optional
 * (0, none, no plan: a table of an older monitor); replicas and assigned are
 * sets of at most replica_slots pairs. On an error *out is empty (nothing to free). */
ea_status ea_cluster_parse(const char *json, size_t len, ea_cluster *out);
/* Frees what parse allocated; the struct is zeroed. */
void ea_cluster_free(ea_cluster *c);
/* 1 if server s hosts (layer, expert): in its `hosted` ranges or its `replicas`. */
int ea_cluster_hosts(const ea_cluster_server *s, int layer, int expert);

/* The register fields of a server, as JSON object text (ea_malloc'd; caller
 * frees with ea_free): {"ucx":BASE64(addr),"http":http,"hosted":{...}} and
 * "replica_slots":N when N is not 0 (a negative N fails the check below).
 * The member adds role and id. NULL on a value past the limits above (with
 * ea_errmsg) or out of memory. */
char *ea_member_server_fields(const void *ucx_addr, size_t ucx_len, const char *http, const ea_range *layers,
                              int n_layers, const ea_range *experts, int n_experts, int replica_slots);

/* [[layer,expert],...] (new reference; NULL out of memory). */
json_t *ea_mon_pairs_json(const ea_mon_pair *p, int n);

/* [[a,b],...] (new reference; NULL out of memory) — shared by the monitor's files. */
json_t *ea__mon_ranges_json(const ea_range *r, int n);

const char *ea_mon_role_name(ea_mon_role r);       /* "server" | "client" */
const char *ea_mon_event_name(ea_mon_event_kind k); /* "register" | "dead" | "leave" | "hosted" | "assign" */

#endif
