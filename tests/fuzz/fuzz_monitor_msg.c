/*
 * fuzz_monitor_msg.c — the monitor's message parsers (eaas/monitor_msg.h) and
 * the HTTP client's response parser (eaas/http_client.h) on bytes a peer
 * controls entirely.
 *
 * Input: byte 0 picks the parser, the rest is the message (copied into a
 * buffer of exactly its length, so an over-read crashes under ASan):
 *   0 register body    1 heartbeat/leave body (both parsers)    2 /cluster answer
 *   3 /cluster query: after, wait_ms, epoch separated by NUL bytes
 *   4 an HTTP response (as received so far; then again as if the peer closed)
 * Properties beyond "no crash, no over-read, no leak, no UB":
 *   - an accepted register has a valid role, an id of 1..128 allowed
 *     characters, and (server) 1..4096 ranges each 0 <= a <= b <= the limit,
 *     replica_slots in [0, 4096], a ucx text that decodes and an http that is
 *     host:port;
 *   - an accepted register, put in a table and rendered, parses back as a
 *     /cluster answer with the same id, http, ranges, replica_slots and ucx bytes;
 *   - an accepted heartbeat has a valid id, at most 65536 load triples each in
 *     its limits, and at most 4096 distinct replica pairs each in its limits;
 *     sent by a server with 4096 slots its replicas enter the table (with at
 *     most one "hosted" event) and come back from the rendered table as the
 *     same set; its load, summed and ticked, gives each pair's total;
 *   - an accepted /cluster answer has its events in rising version order, none
 *     past the table's version, only valid ranges, and replicas and assigned
 *     that are sets within the limits and the server's replica_slots;
 *   - an accepted query has wait_ms in [0, 30000];
 *   - a whole HTTP response's body lies inside the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "eaas/http_client.h"
#include "eaas/monitor_load.h"
#include "eaas/monitor_msg.h"
#include "eaas/monitor_table.h"

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_monitor_msg: %s\n", what);
        abort();
    }
}

static int id_ok(const char *id) {
    size_t n = strlen(id);
    if (n < 1 || n > EA_MON_ID_MAX) return 0;
    return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@-") == n;
}

static int ranges_ok(const ea_range *r, int n) {
    if (n < 1 || n > EA_MON_RANGES_MAX || !r) return 0;
    for (int i = 0; i < n; i++)
        if (r[i].a < 0 || r[i].a > r[i].b || r[i].b > EA_MON_RANGE_MAX) return 0;
    return 1;
}

static int pair_in(const ea_mon_pair *p, int n, int32_t layer, int32_t expert) {
    for (int i = 0; i < n; i++)
        if (p[i].layer == layer && p[i].expert == expert) return 1;
    return 0;
}

/* A set of at most max pairs, each within the limits. */
static int pairs_ok(const ea_mon_pair *p, int n, int max) {
    if (n < 0 || n > max || (n && !p)) return 0;
    for (int i = 0; i < n; i++) {
        if (p[i].layer < 0 || p[i].layer > EA_MON_RANGE_MAX || p[i].expert < 0 || p[i].expert > EA_MON_RANGE_MAX) return 0;
        if (pair_in(p, i, p[i].layer, p[i].expert)) return 0;
    }
    return 1;
}

static int same_ranges(const ea_range *a, int na, const ea_range *b, int nb) {
    return na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

/* The accepted register r (parsed from p), through a table and back as a member reads it. */
static void round_trip(const char *p, size_t n, const ea_mon_register *r) {
    ea_mon_register in; /* a second parse: the table takes it */
    check(ea_mon_register_parse(p, n, &in) == EA_OK, "a register accepted once is refused the second time");
    ea_mon_table *t;
    check(ea_mon_table_create(42, &t) == EA_OK, "table");
    check(ea_mon_table_register(t, &in, 0) == EA_OK, "an accepted register does not enter the table");
    ea_sbuf b = {0};
    ea_mon_table_render(t, 1, 0, &b);
    ea_cluster c;
    check(!b.failed && ea_cluster_parse(b.data, b.len, &c) == EA_OK, "a rendered table does not parse");
    int srv = r->role == EA_MON_SERVER;
    check(c.n_servers == srv && c.n_clients == !srv && c.version == 2, "wrong table");
    if (srv) {
        const ea_cluster_server *s = &c.servers[0];
        size_t tn = strlen(r->ucx), m = 0;
        uint8_t *raw = ea_malloc(ea_base64_dec_max(tn) + 1);
        check(raw && ea_base64_decode(r->ucx, tn, raw, &m) == EA_OK, "ucx");
        check(!strcmp(s->id, r->id) && !strcmp(s->http, r->http) && s->ucx_len == m && !memcmp(s->ucx, raw, m),
              "server fields changed on the way");
        check(same_ranges(s->layers, s->n_layers, r->layers, r->n_layers) &&
                  same_ranges(s->experts, s->n_experts, r->experts, r->n_experts),
              "ranges changed on the way");
        check(s->replica_slots == r->replica_slots && s->n_replicas == 0 && !s->has_assigned,
              "replica fields changed on the way");
        ea_free(raw);
    } else {
        check(!strcmp(c.clients[0].id, r->id), "client id changed on the way");
    }
    ea_cluster_free(&c);
    ea_sbuf_deinit(&b);
    ea_mon_table_destroy(t);
}

static void fuzz_register(const char *p, size_t n) {
    ea_mon_register r;
    if (ea_mon_register_parse(p, n, &r) != EA_OK) {
        check(!r.ucx && !r.layers && !r.experts, "a refused register left allocations");
        return;
    }
    check((r.role == EA_MON_SERVER || r.role == EA_MON_CLIENT) && id_ok(r.id), "accepted a bad role or id");
    if (r.role == EA_MON_SERVER) {
        char h[EA_MON_HTTP_MAX + 1];
        int port;
        check(ranges_ok(r.layers, r.n_layers) && ranges_ok(r.experts, r.n_experts), "accepted a bad range");
        check(ea_hostport_parse(r.http, h, sizeof h, &port) == EA_OK, "accepted a bad http");
        check(r.ucx && strlen(r.ucx) >= 1 && strlen(r.ucx) <= EA_MON_UCX_MAX, "accepted a bad ucx");
        check(r.replica_slots >= 0 && r.replica_slots <= EA_MON_REPLICAS_MAX, "accepted bad replica_slots");
    }
    round_trip(p, n, &r);
    ea_mon_register_free(&r);
}

/* The accepted heartbeat h, from a server with every slot, through a table and back. */
static void heartbeat_round_trip(const ea_mon_heartbeat *h) {
    char reg[512];
    snprintf(reg, sizeof reg,
             "{\"role\":\"server\",\"id\":\"%s\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"replica_slots\":%d,"
             "\"hosted\":{\"layers\":[[0,0]],\"experts\":[[0,0]]}}",
             h->id, EA_MON_REPLICAS_MAX);
    ea_mon_register r;
    ea_mon_table *t = NULL;
    check(ea_mon_register_parse(reg, strlen(reg), &r) == EA_OK && ea_mon_table_create(1, &t) == EA_OK, "table");
    check(ea_mon_table_register(t, &r, 0) == EA_OK, "register");
    ea_mon_role role = EA_MON_CLIENT;
    check(ea_mon_table_heartbeat(t, h, 1, &role) == EA_OK && role == EA_MON_SERVER, "an accepted heartbeat was refused");
    uint64_t v = ea_mon_table_version(t);
    check(v == 2u + (h->has_replicas && h->n_replicas > 0), "not one hosted event for a new set");
    check(ea_mon_table_heartbeat(t, h, 2, &role) == EA_OK && ea_mon_table_version(t) == v, "the same set again changed");
    ea_sbuf b = {0};
    ea_mon_table_render(t, 0, 0, &b);
    ea_cluster c;
    check(!b.failed && ea_cluster_parse(b.data, b.len, &c) == EA_OK && c.n_servers == 1, "a rendered table does not parse");
    const ea_cluster_server *s = &c.servers[0];
    check(s->n_replicas == (h->has_replicas ? h->n_replicas : 0), "replicas lost on the way");
    for (int i = 0; i < s->n_replicas; i++) {
        check(pair_in(h->replicas, h->n_replicas, s->replicas[i].layer, s->replicas[i].expert), "a replica not sent");
        check(ea_cluster_hosts(s, s->replicas[i].layer, s->replicas[i].expert), "a replica not hosted");
    }
    ea_cluster_free(&c);
    ea_sbuf_deinit(&b);
    ea_mon_table_destroy(t);
}

/* The accepted heartbeat's load through the load sum: one tick gives each pair's total. */
static void heartbeat_load(const ea_mon_heartbeat *h) {
    ea_mon_loadsum *s;
    check(ea_mon_loadsum_create(EA_MON_LOAD_MAX, &s) == EA_OK, "load sum");
    check(ea_mon_loadsum_add(s, h->load, h->n_load) == 0, "load ignored below the bound");
    ea_replicas_load *l;
    int n;
    check(ea_mon_loadsum_tick(s, 0.5, &l, &n) == EA_OK && n <= h->n_load, "tick");
    for (int k = 0; k < n; k++) {
        double want = 0;
        for (int i = 0; i < h->n_load; i++)
            if (h->load[i].layer == l[k].layer && h->load[i].expert == l[k].expert) want += (double)h->load[i].pairs;
        check(want == l[k].load && (k == 0 || l[k].layer > l[k - 1].layer ||
                                    (l[k].layer == l[k - 1].layer && l[k].expert > l[k - 1].expert)),
              "a pair's load is not its sum, or not in order");
    }
    ea_free(l);
    ea_mon_loadsum_destroy(s);
}

static void fuzz_heartbeat(const char *p, size_t n) {
    char id[EA_MON_ID_MAX + 1];
    if (ea_mon_id_parse(p, n, id) == EA_OK) check(id_ok(id), "accepted a bad id");
    ea_mon_heartbeat h;
    if (ea_mon_heartbeat_parse(p, n, &h) != EA_OK) {
        check(!h.load && !h.replicas && !h.n_load && !h.n_replicas, "a refused heartbeat left allocations");
        return;
    }
    check(id_ok(h.id) && h.n_load >= 0 && h.n_load <= EA_MON_LOAD_MAX && (h.n_load == 0 || h.load), "accepted a bad heartbeat");
    for (int i = 0; i < h.n_load; i++)
        check(h.load[i].layer >= 0 && h.load[i].layer <= EA_MON_RANGE_MAX && h.load[i].expert >= 0 &&
                  h.load[i].expert <= EA_MON_RANGE_MAX && h.load[i].pairs >= 1 && h.load[i].pairs <= EA_MON_PAIRS_MAX,
              "accepted a bad load triple");
    check(pairs_ok(h.replicas, h.n_replicas, EA_MON_REPLICAS_MAX) && (h.has_replicas || !h.n_replicas),
          "accepted bad replicas");
    heartbeat_round_trip(&h);
    if (h.n_load <= 4096) heartbeat_load(&h); /* its check is quadratic */
    ea_mon_heartbeat_free(&h);
}

static void fuzz_cluster(const char *p, size_t n) {
    ea_cluster c;
    if (ea_cluster_parse(p, n, &c) != EA_OK) {
        check(!c.servers && !c.clients && !c.events, "a refused table left allocations");
        return;
    }
    for (int i = 0; i < c.n_events; i++)
        check(c.events[i].version <= c.version && (i == 0 || c.events[i].version > c.events[i - 1].version),
              "events out of order");
    for (int i = 0; i < c.n_servers; i++) {
        const ea_cluster_server *s = &c.servers[i];
        check(id_ok(s->id) && ranges_ok(s->layers, s->n_layers) && ranges_ok(s->experts, s->n_experts),
              "a server with a bad id or range");
        check(s->replica_slots >= 0 && s->replica_slots <= EA_MON_REPLICAS_MAX &&
                  pairs_ok(s->replicas, s->n_replicas, s->replica_slots) &&
                  pairs_ok(s->assigned, s->n_assigned, s->replica_slots) && (s->has_assigned || !s->n_assigned),
              "a server with bad replica fields");
        for (int k = 0; k < s->n_replicas; k++)
            check(ea_cluster_hosts(s, s->replicas[k].layer, s->replicas[k].expert), "a replica not hosted");
    }
    ea_cluster_free(&c);
}

static void fuzz_query(const char *p, size_t n) {
    const char *f[3] = {NULL, NULL, NULL};
    size_t i = 0;
    for (int k = 0; k < 3 && i < n; k++) { /* p is NUL-terminated by the caller */
        f[k] = p + i;
        i += strlen(p + i) + 1;
    }
    uint64_t after, epoch;
    int wait, has;
    if (ea_mon_query_parse(f[0], f[1], f[2], &after, &wait, &epoch, &has) == EA_OK)
        check(wait >= 0 && wait <= EA_MON_WAIT_MAX_MS && has == (f[2] != NULL), "accepted a bad query");
}

static void fuzz_response(const char *p, size_t n) {
    for (int eof = 0; eof < 2; eof++) {
        int done = 0, st = 0;
        size_t off = 0, len = 0;
        if (ea_http_response_parse(p, n, eof, &done, &st, &off, &len) == EA_OK && done)
            check(off <= n && len <= n - off && st >= 100 && st <= 999, "a response body outside the input");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t n = size - 1;
    char *p = malloc(n + 1); /* + a NUL that the length-taking parsers must not need */
    if (!p) return 0;
    memcpy(p, data + 1, n);
    p[n] = 0;
    switch (data[0] % 5) {
    case 0: fuzz_register(p, n); break;
    case 1: fuzz_heartbeat(p, n); break;
    case 2: fuzz_cluster(p, n); break;
    case 3: fuzz_query(p, n); break;
    case 4: fuzz_response(p, n); break;
    }
    free(p);
    return 0;
}
