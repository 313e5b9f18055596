/*
 * monitor_msg.c — parsing and checking the monitor's JSON messages (see
 * monitor_msg.h for the messages and their limits; docs/protocol.md for the
 * protocol).
 *
 * Every value is read through one of the small getters below, which check
 * the type and the limits and name the JSON path in the error, so a refused
 * message always says which field and why. Parsers either fill their output
 * completely or leave nothing allocated behind.
 *
 * Lists of (layer, expert) pairs ("replicas", "assigned") are sets: a pair
 * twice is refused, found by sorting a copy (n log n for 4096 pairs, not n^2).
 * The parsers keep the order received; the table keeps its copies sorted.
 */
#include "eaas/monitor_msg.h"

#include <jansson.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/util.h"
#include "eaas/http_client.h"

#define MEMBERS_MAX 4096
#define EVENTS_MAX 1024

const char *ea_mon_role_name(ea_mon_role r) { return r == EA_MON_SERVER ? "server" : "client"; }

/* Indexed by ea_mon_event_kind. */
static const char *const event_names[] = {"register", "dead", "leave", "hosted", "assign"};

const char *ea_mon_event_name(ea_mon_event_kind k) {
    EA_ASSERT((unsigned)k < sizeof event_names / sizeof event_names[0]);
    return event_names[k];
}

/* ---- getters: type, limits, path in the error ---------------------------------------- */

static ea_status parse_object(const char *body, size_t len, const char *what, json_t **out) {
    EA_TRY(ea_json_parse(body ? body : "", body ? len : 0, what, out));
    if (json_is_object(*out)) return EA_OK;
    json_decref(*out);
    *out = NULL;
    return ea_err(EA_ERR_FORMAT, "%s: expected a JSON object", what);
}

static ea_status get_str(const json_t *o, const char *key, const char *path, size_t max, const char **s, size_t *n) {
    const json_t *v = json_object_get(o, key);
    if (!v) return ea_err(EA_ERR_FORMAT, "%s%s: missing", path, key);
    if (!json_is_string(v)) return ea_err(EA_ERR_FORMAT, "%s%s: expected a string", path, key);
    *s = json_string_value(v);
    *n = json_string_length(v);
    if (*n == 0 || *n > max) return ea_err(EA_ERR_RANGE, "%s%s: length %zu not in [1, %zu]", path, key, *n, max);
    return EA_OK;
}

static ea_status get_uint(const json_t *o, const char *key, const char *path, long long lo, uint64_t *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || !json_is_integer(v)) return ea_err(EA_ERR_FORMAT, "%s%s: expected an integer", path, key);
    long long x = json_integer_value(v);
    if (x < lo) return ea_err(EA_ERR_RANGE, "%s%s: %lld < %lld", path, key, x, lo);
    *out = (uint64_t)x;
    return EA_OK;
}

/* The integer x (at `path`) in [lo, hi]. */
static ea_status int_in(const json_t *x, const char *path, long long lo, long long hi, long long *out) {
    if (!json_is_integer(x)) return ea_err(EA_ERR_FORMAT, "%s: expected an integer", path);
    long long v = json_integer_value(x);
    if (v < lo) return ea_err(EA_ERR_RANGE, "%s: %lld < %lld", path, v, lo);
    if (v > hi) return ea_err(EA_ERR_RANGE, "%s: %lld > %lld", path, v, hi);
    *out = v;
    return EA_OK;
}

/* "replica_slots" of a server, optional: 0..EA_MON_REPLICAS_MAX, 0 when absent. */
static ea_status get_slots(const json_t *o, const char *path, int *out) {
    const json_t *v = json_object_get(o, "replica_slots");
    char p[48];
    long long n = 0;
    snprintf(p, sizeof p, "%sreplica_slots", path);
    if (v) EA_TRY(int_in(v, p, 0, EA_MON_REPLICAS_MAX, &n));
    *out = (int)n;
    return EA_OK;
}

static int id_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '@' || c == '-';
}

static ea_status get_id(const json_t *o, const char *path, char id[EA_MON_ID_MAX + 1]) {
    const char *s = NULL;
    size_t n = 0;
    EA_TRY(get_str(o, "id", path, EA_MON_ID_MAX, &s, &n));
    for (size_t i = 0; i < n; i++)
        if (!id_char(s[i])) return ea_err(EA_ERR_FORMAT, "%sid: character %zu is not one of [A-Za-z0-9._:@-]", path, i);
    memcpy(id, s, n);
    id[n] = 0;
    return EA_OK;
}

/* One of names[0..n) -> its index. */
static ea_status get_enum(const json_t *o, const char *key, const char *path, const char *const *names, int n,
                          int *out) {
    const char *s = NULL;
    size_t len;
    EA_TRY(get_str(o, key, path, 16, &s, &len));
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return (*out = i), EA_OK;
    return ea_err(EA_ERR_RANGE, "%s%s: '%.*s' is not %s%s%s", path, key, (int)len, s, names[0], n > 2 ? ", " : " or ",
                  n > 2 ? "... (see docs/protocol.md)" : names[1]);
}

static ea_status get_http(const json_t *o, const char *path, char http[EA_MON_HTTP_MAX + 1]) {
    const char *s = NULL;
    size_t n = 0;
    char host[EA_MON_HTTP_MAX + 1];
    int port;
    EA_TRY(get_str(o, "http", path, EA_MON_HTTP_MAX, &s, &n));
    if (memchr(s, 0, n) || ea_hostport_parse(s, host, sizeof host, &port) != EA_OK)
        return ea_err(EA_ERR_FORMAT, "%shttp: '%.*s' is not host:port", path, (int)(n < 64 ? n : 64), s);
    memcpy(http, s, n + 1);
    return EA_OK;
}

/* ---- ranges ------------------------------------------------------------------------ */

static ea_status range_at(const json_t *r, const char *path, size_t i, ea_range *out) {
    if (!json_is_array(r) || json_array_size(r) != 2) return ea_err(EA_ERR_FORMAT, "%s[%zu]: expected [a, b]", path, i);
    long long v[2];
    for (size_t j = 0; j < 2; j++) {
        const json_t *x = json_array_get(r, j);
        if (!json_is_integer(x)) return ea_err(EA_ERR_FORMAT, "%s[%zu][%zu]: expected an integer", path, i, j);
        v[j] = json_integer_value(x);
        if (v[j] < 0 || v[j] > EA_MON_RANGE_MAX)
            return ea_err(EA_ERR_RANGE, "%s[%zu][%zu]: %lld not in [0, %d]", path, i, j, v[j], EA_MON_RANGE_MAX);
    }
    if (v[0] > v[1]) return ea_err(EA_ERR_RANGE, "%s[%zu]: %lld > %lld (a range is [a, b] with a <= b)", path, i, v[0], v[1]);
    out->a = (int32_t)v[0];
    out->b = (int32_t)v[1];
    return EA_OK;
}

static ea_status get_ranges(const json_t *hosted, const char *key, const char *path, ea_range **out, int *n) {
    char p[64];
    snprintf(p, sizeof p, "%s%s", path, key);
    const json_t *a = json_object_get(hosted, key);
    if (!json_is_array(a)) return ea_err(EA_ERR_FORMAT, "%s: expected an array of [a, b]", p);
    size_t m = json_array_size(a);
    if (m < 1 || m > EA_MON_RANGES_MAX) return ea_err(EA_ERR_RANGE, "%s: %zu ranges, not in [1, %d]", p, m, EA_MON_RANGES_MAX);
    ea_range *r = ea_malloc(m * sizeof *r);
    if (!r) return ea_err(EA_ERR_NOMEM, "%s", p);
    for (size_t i = 0; i < m; i++) {
        ea_status s = range_at(json_array_get(a, i), p, i, &r[i]);
        if (s != EA_OK) {
            ea_free(r);
            return s;
        }
    }
    *out = r;
    *n = (int)m;
    return EA_OK;
}

/* "hosted": {"layers": [...], "experts": [...]} under path (e.g. "servers[2]."). */
static ea_status get_hosted(const json_t *o, const char *path, ea_range **layers, int *n_layers, ea_range **experts,
                            int *n_experts) {
    const json_t *h = json_object_get(o, "hosted");
    if (!json_is_object(h)) return ea_err(EA_ERR_FORMAT, "%shosted: expected an object", path);
    char p[48];
    snprintf(p, sizeof p, "%shosted.", path);
    EA_TRY(get_ranges(h, "layers", p, layers, n_layers));
    ea_status s = get_ranges(h, "experts", p, experts, n_experts);
    if (s != EA_OK) {
        ea_free(*layers);
        *layers = NULL;
    }
    return s;
}

/* The base64 text of "ucx", checked to decode. OUT: *s, *n (views o). */
static ea_status get_ucx(const json_t *o, const char *path, const char **s, size_t *n) {
    EA_TRY(get_str(o, "ucx", path, EA_MON_UCX_MAX, s, n));
    uint8_t *raw = ea_malloc(ea_base64_dec_max(*n) + 1);
    if (!raw) return ea_err(EA_ERR_NOMEM, "%sucx", path);
    size_t m;
    ea_status st = ea_base64_decode(*s, *n, raw, &m);
    ea_free(raw);
    return st == EA_OK ? EA_OK : ea_err_wrap(st, "%sucx: ", path);
}

/* ---- (layer, expert) pairs and load ----------------------------------------------------- */

typedef struct {
    ea_mon_pair p;
    int at; /* index in the list as received */
} pair_at;

static int pair_at_cmp(const void *a, const void *b) {
    const pair_at *x = a, *y = b;
    if (x->p.layer != y->p.layer) return x->p.layer < y->p.layer ? -1 : 1;
    if (x->p.expert != y->p.expert) return x->p.expert < y->p.expert ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* p[0..n) has no pair twice; else the error names the later one (path[i]). */
static ea_status pairs_distinct(const ea_mon_pair *p, int n, const char *path) {
    if (n < 2) return EA_OK;
    pair_at *s = ea_malloc((size_t)n * sizeof *s);
    if (!s) return ea_err(EA_ERR_NOMEM, "%s", path);
    for (int i = 0; i < n; i++) s[i] = (pair_at){p[i], i};
    qsort(s, (size_t)n, sizeof *s, pair_at_cmp);
    ea_status st = EA_OK;
    for (int i = 1; i < n && st == EA_OK; i++)
        if (s[i].p.layer == s[i - 1].p.layer && s[i].p.expert == s[i - 1].p.expert)
            st = ea_err(EA_ERR_RANGE, "%s[%d]: [%d, %d] is also %s[%d] (no pair twice)", path, s[i].at, (int)s[i].p.layer,
                        (int)s[i].p.expert, path, s[i - 1].at);
    ea_free(s);
    return st;
}

/* The array a (at `path`): [[layer, expert], ...], at most EA_MON_REPLICAS_MAX pairs, each
 * 0..EA_MON_RANGE_MAX, no pair twice. OUT: *out (owns; NULL when empty), *n. */
static ea_status pairs_at(const json_t *a, const char *path, ea_mon_pair **out, int *n) {
    if (!json_is_array(a)) return ea_err(EA_ERR_FORMAT, "%s: expected an array of [layer, expert]", path);
    size_t m = json_array_size(a);
    if (m > EA_MON_REPLICAS_MAX) return ea_err(EA_ERR_RANGE, "%s: %zu pairs, more than %d", path, m, EA_MON_REPLICAS_MAX);
    ea_mon_pair *p = m ? ea_malloc(m * sizeof *p) : NULL;
    if (m && !p) return ea_err(EA_ERR_NOMEM, "%s", path);
    ea_status st = EA_OK;
    for (size_t i = 0; i < m && st == EA_OK; i++) {
        const json_t *x = json_array_get(a, i);
        char q[64];
        long long v[2] = {0, 0};
        if (!json_is_array(x) || json_array_size(x) != 2) {
            st = ea_err(EA_ERR_FORMAT, "%s[%zu]: expected [layer, expert]", path, i);
            break;
        }
        for (size_t j = 0; j < 2 && st == EA_OK; j++) {
            snprintf(q, sizeof q, "%s[%zu][%zu]", path, i, j);
            st = int_in(json_array_get(x, j), q, 0, EA_MON_RANGE_MAX, &v[j]);
        }
        p[i] = (ea_mon_pair){(int32_t)v[0], (int32_t)v[1]};
    }
    if (st == EA_OK) st = pairs_distinct(p, (int)m, path);
    if (st != EA_OK) {
        ea_free(p);
        return st;
    }
    *out = p;
    *n = (int)m;
    return EA_OK;
}

/* A client's "load": [[layer, expert, pairs], ...], at most EA_MON_LOAD_MAX triples;
 * layer and expert 0..EA_MON_RANGE_MAX, pairs 1..EA_MON_PAIRS_MAX. A pair may come twice
 * (the monitor adds them up). OUT: *out (owns; NULL when empty), *n. */
static ea_status load_at(const json_t *a, ea_mon_load **out, int *n) {
    static const long long lo[3] = {0, 0, 1}, hi[3] = {EA_MON_RANGE_MAX, EA_MON_RANGE_MAX, EA_MON_PAIRS_MAX};
    if (!json_is_array(a)) return ea_err(EA_ERR_FORMAT, "load: expected an array of [layer, expert, pairs]");
    size_t m = json_array_size(a);
    if (m > EA_MON_LOAD_MAX) return ea_err(EA_ERR_RANGE, "load: %zu triples, more than %d", m, EA_MON_LOAD_MAX);
    ea_mon_load *l = m ? ea_malloc(m * sizeof *l) : NULL;
    if (m && !l) return ea_err(EA_ERR_NOMEM, "load");
    ea_status st = EA_OK;
    for (size_t i = 0; i < m && st == EA_OK; i++) {
        const json_t *x = json_array_get(a, i);
        long long v[3] = {0, 0, 0};
        if (!json_is_array(x) || json_array_size(x) != 3) {
            st = ea_err(EA_ERR_FORMAT, "load[%zu]: expected [layer, expert, pairs]", i);
            break;
        }
        for (size_t j = 0; j < 3 && st == EA_OK; j++) {
            char q[48];
            snprintf(q, sizeof q, "load[%zu][%zu]", i, j);
            st = int_in(json_array_get(x, j), q, lo[j], hi[j], &v[j]);
        }
        l[i] = (ea_mon_load){(int32_t)v[0], (int32_t)v[1], (int64_t)v[2]};
    }
    if (st != EA_OK) {
        ea_free(l);
        return st;
    }
    *out = l;
    *n = (int)m;
    return EA_OK;
}

/* ---- requests from members ---------------------------------------------------------- */

static ea_status register_server(const json_t *o, ea_mon_register *r) {
    const char *u;
    size_t un;
    EA_TRY(get_ucx(o, "", &u, &un));
    EA_TRY(get_http(o, "", r->http));
    EA_TRY(get_slots(o, "", &r->replica_slots));
    EA_TRY(get_hosted(o, "", &r->layers, &r->n_layers, &r->experts, &r->n_experts));
    r->ucx = ea_strndup(u, un);
    return r->ucx ? EA_OK : ea_err(EA_ERR_NOMEM, "ucx");
}

ea_status ea_mon_register_parse(const char *body, size_t len, ea_mon_register *out) {
    static const char *const roles[] = {"server", "client"};
    memset(out, 0, sizeof *out);
    json_t *o;
    EA_TRY(parse_object(body, len, "register", &o));
    int role = 0;
    ea_status s = get_enum(o, "role", "", roles, 2, &role);
    if (s == EA_OK) s = get_id(o, "", out->id);
    out->role = (ea_mon_role)role;
    if (s == EA_OK && out->role == EA_MON_SERVER) s = register_server(o, out);
    json_decref(o);
    if (s != EA_OK) ea_mon_register_free(out);
    return s;
}

void ea_mon_register_free(ea_mon_register *r) {
    ea_free(r->ucx);
    ea_free(r->layers);
    ea_free(r->experts);
    memset(r, 0, sizeof *r);
}

ea_status ea_mon_id_parse(const char *body, size_t len, char id[EA_MON_ID_MAX + 1]) {
    json_t *o;
    EA_TRY(parse_object(body, len, "message", &o));
    ea_status s = get_id(o, "", id);
    json_decref(o);
    return s;
}

static ea_status heartbeat_fields(const json_t *o, ea_mon_heartbeat *h) {
    const json_t *load = json_object_get(o, "load"), *rep = json_object_get(o, "replicas");
    if (load) EA_TRY(load_at(load, &h->load, &h->n_load));
    if (rep) EA_TRY(pairs_at(rep, "replicas", &h->replicas, &h->n_replicas));
    h->has_replicas = rep != NULL;
    return EA_OK;
}

ea_status ea_mon_heartbeat_parse(const char *body, size_t len, ea_mon_heartbeat *out) {
    memset(out, 0, sizeof *out);
    json_t *o;
    EA_TRY(parse_object(body, len, "heartbeat", &o));
    ea_status s = get_id(o, "", out->id);
    if (s == EA_OK) s = heartbeat_fields(o, out);
    json_decref(o);
    if (s != EA_OK) ea_mon_heartbeat_free(out);
    return s;
}

void ea_mon_heartbeat_free(ea_mon_heartbeat *h) {
    ea_free(h->load);
    ea_free(h->replicas);
    memset(h, 0, sizeof *h);
}

ea_status ea_mon_epoch_parse(const char *s, uint64_t *epoch) {
    uint64_t v = 0;
    size_t n = s ? strlen(s) : 0;
    if (n != 16) return ea_err(EA_ERR_FORMAT, "epoch: expected 16 hex digits");
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return ea_err(EA_ERR_FORMAT, "epoch: character %zu is not a hex digit", i);
        v = v << 4 | (uint64_t)d;
    }
    *epoch = v;
    return EA_OK;
}

void ea_mon_epoch_format(uint64_t epoch, char out[17]) { snprintf(out, 17, "%016" PRIx64, epoch); }

/* A decimal in [0, max]. */
static ea_status parse_dec(const char *s, const char *name, uint64_t max, uint64_t *out) {
    size_t n = strlen(s);
    uint64_t v = 0;
    if (n == 0 || n > 19) return ea_err(EA_ERR_FORMAT, "%s: expected a decimal integer", name);
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return ea_err(EA_ERR_FORMAT, "%s: expected a decimal integer", name);
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max) return ea_err(EA_ERR_RANGE, "%s: %" PRIu64 " not in [0, %" PRIu64 "]", name, v, max);
    *out = v;
    return EA_OK;
}

ea_status ea_mon_query_parse(const char *after_s, const char *wait_s, const char *epoch_s, uint64_t *after,
                             int *wait_ms, uint64_t *epoch, int *has_epoch) {
    uint64_t a = 0, w = 0, e = 0;
    if (after_s) EA_TRY(parse_dec(after_s, "after", INT64_MAX, &a));
    if (wait_s) EA_TRY(parse_dec(wait_s, "wait_ms", EA_MON_WAIT_MAX_MS, &w));
    if (epoch_s) EA_TRY(ea_mon_epoch_parse(epoch_s, &e));
    *after = a;
    *wait_ms = (int)w;
    *epoch = e;
    *has_epoch = epoch_s != NULL;
    return EA_OK;
}

/* ---- the table (GET /cluster) ------------------------------------------------------ */

static ea_status member_common(const json_t *o, const char *path, char *id, int *live, uint64_t *since) {
    static const char *const states[] = {"dead", "live"};
    EA_TRY(get_id(o, path, id));
    EA_TRY(get_enum(o, "state", path, states, 2, live));
    return get_uint(o, "since", path, 1, since);
}

static void server_free(ea_cluster_server *s) {
    ea_free(s->ucx);
    ea_free(s->layers);
    ea_free(s->experts);
    ea_free(s->replicas);
    ea_free(s->assigned);
}

/* "replicas" (absent: none) or "assigned" (absent: no plan, *has = 0) of a server
 * entry: a set of pairs, at most its replica_slots. */
static ea_status server_pairs(const json_t *o, const char *path, const char *key, int slots, ea_mon_pair **p, int *n,
                              int *has) {
    const json_t *a = json_object_get(o, key);
    char q[48];
    *has = a != NULL;
    if (!a) return EA_OK;
    snprintf(q, sizeof q, "%s%s", path, key);
    EA_TRY(pairs_at(a, q, p, n));
    if (*n > slots) return ea_err(EA_ERR_RANGE, "%s: %d pairs, more than replica_slots %d", q, *n, slots);
    return EA_OK;
}

static ea_status cluster_server(const json_t *o, const char *path, ea_cluster_server *s) {
    if (!json_is_object(o)) return ea_err(EA_ERR_FORMAT, "%s: expected an object", path);
    EA_TRY(member_common(o, path, s->id, &s->live, &s->since));
    const char *u;
    size_t un;
    EA_TRY(get_ucx(o, path, &u, &un));
    if (!(s->ucx = ea_malloc(ea_base64_dec_max(un) + 1))) return ea_err(EA_ERR_NOMEM, "%sucx", path);
    EA_TRY(ea_base64_decode(u, un, s->ucx, &s->ucx_len));
    EA_TRY(get_http(o, path, s->http));
    EA_TRY(get_hosted(o, path, &s->layers, &s->n_layers, &s->experts, &s->n_experts));
    int has_replicas;
    EA_TRY(get_slots(o, path, &s->replica_slots));
    EA_TRY(server_pairs(o, path, "replicas", s->replica_slots, &s->replicas, &s->n_replicas, &has_replicas));
    return server_pairs(o, path, "assigned", s->replica_slots, &s->assigned, &s->n_assigned, &s->has_assigned);
}

static ea_status cluster_event(const json_t *o, const char *path, ea_cluster_event *e) {
    static const char *const roles[] = {"server", "client"};
    if (!json_is_object(o)) return ea_err(EA_ERR_FORMAT, "%s: expected an object", path);
    int kind = 0, role = 0;
    EA_TRY(get_uint(o, "version", path, 2, &e->version));
    EA_TRY(get_enum(o, "kind", path, event_names, (int)(sizeof event_names / sizeof event_names[0]), &kind));
    EA_TRY(get_enum(o, "role", path, roles, 2, &role));
    e->kind = (ea_mon_event_kind)kind;
    e->role = (ea_mon_role)role;
    return get_id(o, path, e->id);
}

/* The array `key` of o, at most max elements. OUT: *n. */
static ea_status get_array(const json_t *o, const char *key, size_t max, const json_t **a, size_t *n) {
    *a = json_object_get(o, key);
    if (!json_is_array(*a)) return ea_err(EA_ERR_FORMAT, "%s: expected an array", key);
    *n = json_array_size(*a);
    return *n <= max ? EA_OK : ea_err(EA_ERR_RANGE, "%s: %zu entries, more than %zu", key, *n, max);
}

static ea_status cluster_servers(const json_t *o, ea_cluster *c) {
    const json_t *a;
    size_t n = 0;
    EA_TRY(get_array(o, "servers", MEMBERS_MAX, &a, &n));
    if (n && !(c->servers = ea_calloc(n, sizeof *c->servers))) return ea_err(EA_ERR_NOMEM, "servers");
    for (size_t i = 0; i < n; i++, c->n_servers++) {
        char p[32];
        snprintf(p, sizeof p, "servers[%zu].", i);
        ea_status s = cluster_server(json_array_get(a, i), p, &c->servers[i]);
        if (s != EA_OK) {
            server_free(&c->servers[i]); /* not counted yet: its allocations so far */
            return s;
        }
    }
    return EA_OK;
}

static ea_status cluster_clients(const json_t *o, ea_cluster *c) {
    const json_t *a;
    size_t n = 0;
    EA_TRY(get_array(o, "clients", MEMBERS_MAX, &a, &n));
    if (n && !(c->clients = ea_calloc(n, sizeof *c->clients))) return ea_err(EA_ERR_NOMEM, "clients");
    for (size_t i = 0; i < n; i++, c->n_clients++) {
        char p[32];
        snprintf(p, sizeof p, "clients[%zu].", i);
        const json_t *x = json_array_get(a, i);
        if (!json_is_object(x)) return ea_err(EA_ERR_FORMAT, "%s: expected an object", p);
        ea_cluster_client *cl = &c->clients[i];
        EA_TRY(member_common(x, p, cl->id, &cl->live, &cl->since));
    }
    return EA_OK;
}

/* "events", when present: in strictly increasing version order, none past the table's version. */
static ea_status cluster_events(const json_t *o, ea_cluster *c) {
    const json_t *a;
    size_t n = 0;
    if (!json_object_get(o, "events")) return EA_OK;
    EA_TRY(get_array(o, "events", EVENTS_MAX, &a, &n));
    c->has_events = 1;
    if (n && !(c->events = ea_calloc(n, sizeof *c->events))) return ea_err(EA_ERR_NOMEM, "events");
    for (size_t i = 0; i < n; i++, c->n_events++) {
        char p[32];
        snprintf(p, sizeof p, "events[%zu].", i);
        ea_cluster_event *e = &c->events[i];
        EA_TRY(cluster_event(json_array_get(a, i), p, e));
        if (e->version > c->version || (i && e->version <= e[-1].version))
            return ea_err(EA_ERR_RANGE, "%sversion: %" PRIu64 " out of order", p, e->version);
    }
    return EA_OK;
}

static ea_status cluster_body(const json_t *o, ea_cluster *c) {
    const json_t *e = json_object_get(o, "epoch");
    if (!json_is_string(e) || json_string_length(e) != 16) return ea_err(EA_ERR_FORMAT, "epoch: expected 16 hex digits");
    EA_TRY(ea_mon_epoch_parse(json_string_value(e), &c->epoch));
    EA_TRY(get_uint(o, "version", "", 1, &c->version));
    EA_TRY(cluster_servers(o, c));
    EA_TRY(cluster_clients(o, c));
    return cluster_events(o, c);
}

ea_status ea_cluster_parse(const char *json, size_t len, ea_cluster *out) {
    memset(out, 0, sizeof *out);
    json_t *o;
    EA_TRY(parse_object(json, len, "cluster", &o));
    ea_status s = cluster_body(o, out);
    json_decref(o);
    if (s != EA_OK) ea_cluster_free(out);
    return s == EA_OK ? EA_OK : ea_err_wrap(s, "cluster: ");
}

void ea_cluster_free(ea_cluster *c) {
    for (int i = 0; i < c->n_servers; i++) server_free(&c->servers[i]);
    ea_free(c->servers);
    ea_free(c->clients);
    ea_free(c->events);
    memset(c, 0, sizeof *c);
}

int ea_cluster_hosts(const ea_cluster_server *s, int layer, int expert) {
    int in_l = 0, in_e = 0;
    for (int i = 0; i < s->n_layers && !in_l; i++) in_l = layer >= s->layers[i].a && layer <= s->layers[i].b;
    for (int i = 0; i < s->n_experts && !in_e; i++) in_e = expert >= s->experts[i].a && expert <= s->experts[i].b;
    if (in_l && in_e) return 1;
    for (int i = 0; i < s->n_replicas; i++)
        if (s->replicas[i].layer == layer && s->replicas[i].expert == expert) return 1;
    return 0;
}

/* ---- a server's register fields ------------------------------------------------------ */

json_t *ea__mon_ranges_json(const ea_range *r, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_pack("[ii]", (int)r[i].a, (int)r[i].b));
    return a;
}

json_t *ea_mon_pairs_json(const ea_mon_pair *p, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_pack("[ii]", (int)p[i].layer, (int)p[i].expert));
    return a;
}

/* {"ucx","http","hosted"[,"replica_slots"]} as a JSON object (new reference; NULL out
 * of memory). replica_slots goes in when it is not 0, so a negative one is refused by
 * the check below instead of left out. */
static json_t *server_fields_json(const void *ucx_addr, size_t ucx_len, const char *http, const ea_range *layers,
                                  int n_layers, const ea_range *experts, int n_experts, int replica_slots) {
    char *txt = ea_malloc(ea_base64_enc_len(ucx_len) + 1);
    if (!txt) return NULL;
    ea_base64_encode(ucx_addr, ucx_len, txt);
    json_t *o = json_pack("{s:s, s:s, s:{s:o, s:o}}", "ucx", txt, "http", http ? http : "", "hosted", "layers",
                          ea__mon_ranges_json(layers, n_layers), "experts", ea__mon_ranges_json(experts, n_experts));
    if (o && replica_slots != 0) json_object_set_new(o, "replica_slots", json_integer(replica_slots));
    ea_free(txt);
    return o;
}

char *ea_member_server_fields(const void *ucx_addr, size_t ucx_len, const char *http, const ea_range *layers,
                              int n_layers, const ea_range *experts, int n_experts, int replica_slots) {
    if (ucx_len == 0 || ea_base64_enc_len(ucx_len) > EA_MON_UCX_MAX)
        return ea_err(EA_ERR_RANGE, "ucx address of %zu bytes", ucx_len), NULL;
    json_t *o = server_fields_json(ucx_addr, ucx_len, http, layers, n_layers, experts, n_experts, replica_slots);
    char *fields = o ? json_dumps(o, JSON_COMPACT) : NULL;
    /* check them as the monitor will, inside a whole register message */
    json_object_set_new(o, "role", json_string("server"));
    json_object_set_new(o, "id", json_string("check"));
    char *whole = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    ea_mon_register r = {0};
    ea_status s = fields && whole ? ea_mon_register_parse(whole, strlen(whole), &r) : ea_err(EA_ERR_NOMEM, "server fields");
    ea_mon_register_free(&r);
    char *ret = s == EA_OK ? ea_strdup(fields) : NULL;
    free(fields);
    free(whole);
    return ret;
}
