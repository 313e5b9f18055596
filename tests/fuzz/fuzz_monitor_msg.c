/*
 * fuzz_monitor_msg.c — the monitor's message parsers (eaas/monitor_msg.h) and
 * the HTTP client's response parser (eaas/http_client.h) on bytes a peer
 * controls entirely.
 *
 * Input: byte 0 picks the parser, the rest is the message (copied into a
 * buffer of exactly its length, so an over-read crashes under ASan):
 *   0 register body    1 heartbeat/leave body    2 /cluster answer
 *   3 /cluster query: after, wait_ms, epoch separated by NUL bytes
 *   4 an HTTP response (as received so far; then again as if the peer closed)
 * Properties beyond "no crash, no over-read, no leak, no UB":
 *   - an accepted register has a valid role, an id of 1..128 allowed
 *     characters, and (server) 1..4096 ranges each 0 <= a <= b <= the limit,
 *     a ucx text that decodes and an http that is host:port;
 *   - an accepted register, put in a table and rendered, parses back as a
 *     /cluster answer with the same id, http, ranges and ucx bytes;
 *   - an accepted /cluster answer has its events in rising version order, none
 *     past the table's version, and only valid ranges;
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
    }
    round_trip(p, n, &r);
    ea_mon_register_free(&r);
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
    for (int i = 0; i < c.n_servers; i++)
        check(id_ok(c.servers[i].id) && ranges_ok(c.servers[i].layers, c.servers[i].n_layers) &&
                  ranges_ok(c.servers[i].experts, c.servers[i].n_experts),
              "a server with a bad id or range");
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
    char id[EA_MON_ID_MAX + 1];
    switch (data[0] % 5) {
    case 0: fuzz_register(p, n); break;
    case 1:
        if (ea_mon_id_parse(p, n, id) == EA_OK) check(id_ok(id), "accepted a bad id");
        break;
    case 2: fuzz_cluster(p, n); break;
    case 3: fuzz_query(p, n); break;
    case 4: fuzz_response(p, n); break;
    }
    free(p);
    return 0;
}
