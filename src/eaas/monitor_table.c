/*
 * monitor_table.c — the versioned membership table (see monitor_table.h).
 *
 * Entries are pointers in an array kept in registration order (a removal
 * shifts the tail); a lookup is a linear scan, fine for the tens to hundreds
 * of members of one cluster (the table holds at most EA_MON_MEMBERS_MAX).
 * Events live in a ring of EA_MON_EVENTS_KEPT; event v is at v % KEPT, and the
 * ring holds versions (max(1, version - KEPT), version] (version 1, the empty
 * table, has no event).
 *
 * A server's replicas and assigned pairs are sorted by (layer, expert), so
 * "the same set" is one memcmp.
 */
#include "eaas/monitor_table.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct {
    ea_mon_pair *p; /* owns [n], sorted by (layer, expert), distinct */
    int n;
} pair_set;

typedef struct {
    ea_mon_register r; /* owns: role, id, a server's fields */
    int live;
    uint64_t since;   /* version of this incarnation's registration */
    uint64_t last_ns; /* last heartbeat or registration, caller's clock */
    /* servers only; empty after a registration */
    pair_set replicas; /* what it holds beyond `hosted` (its heartbeats' "replicas") */
    int has_assigned;  /* the monitor has a plan for it */
    pair_set assigned; /* the plan */
} entry;

typedef ea_cluster_event event; /* an event as a member parses it */

struct ea_mon_table {
    uint64_t epoch, version, deaths;
    entry **e; /* owns [n]; capacity EA_MON_MEMBERS_MAX */
    int n;
    event ring[EA_MON_EVENTS_KEPT];
};

ea_status ea_mon_table_create(uint64_t epoch, ea_mon_table **out) {
    ea_mon_table *t = ea_calloc(1, sizeof *t);
    if (t) t->e = ea_calloc(EA_MON_MEMBERS_MAX, sizeof *t->e);
    if (!t || !t->e) {
        ea_free(t);
        return ea_err(EA_ERR_NOMEM, "monitor table");
    }
    t->epoch = epoch;
    t->version = 1;
    *out = t;
    return EA_OK;
}

static void entry_free(entry *x) {
    if (!x) return;
    ea_mon_register_free(&x->r);
    ea_free(x->replicas.p);
    ea_free(x->assigned.p);
    ea_free(x);
}

static int pair_cmp(const void *a, const void *b) {
    const ea_mon_pair *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->expert > y->expert) - (x->expert < y->expert);
}

/* 1 if set equals p[0..n) (sorted). */
static int same_set(const pair_set *set, const ea_mon_pair *p, int n) {
    return set->n == n && (n == 0 || memcmp(set->p, p, (size_t)n * sizeof *p) == 0);
}

/* A sorted copy of p[0..n) (distinct), or NULL when n is 0; *ok 0 out of memory. */
static ea_mon_pair *sorted_copy(const ea_mon_pair *p, int n, int *ok) {
    *ok = 1;
    if (n == 0) return NULL;
    ea_mon_pair *c = ea_malloc((size_t)n * sizeof *c);
    if (!c) return (*ok = 0), NULL;
    memcpy(c, p, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, pair_cmp);
    return c;
}

void ea_mon_table_destroy(ea_mon_table *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) entry_free(t->e[i]);
    ea_free(t->e);
    ea_free(t);
}

uint64_t ea_mon_table_version(const ea_mon_table *t) { return t->version; }
uint64_t ea_mon_table_epoch(const ea_mon_table *t) { return t->epoch; }

/* One change: version + 1 and its event. */
static void change(ea_mon_table *t, ea_mon_event_kind kind, const entry *x) {
    t->version++;
    event *ev = &t->ring[t->version % EA_MON_EVENTS_KEPT];
    ev->version = t->version;
    ev->kind = kind;
    ev->role = x->r.role;
    memcpy(ev->id, x->r.id, sizeof ev->id);
}

static int find(const ea_mon_table *t, const char *id) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->e[i]->r.id, id) == 0) return i;
    return -1;
}

static void remove_at(ea_mon_table *t, int i) {
    entry_free(t->e[i]);
    memmove(&t->e[i], &t->e[i + 1], (size_t)(t->n - i - 1) * sizeof *t->e);
    t->n--;
}

/* A place for a new id: the end, or (table full) the oldest dead entry's. */
static ea_status make_room(ea_mon_table *t) {
    if (t->n < EA_MON_MEMBERS_MAX) return EA_OK;
    int oldest = -1;
    for (int i = 0; i < t->n; i++)
        if (!t->e[i]->live && (oldest < 0 || t->e[i]->since < t->e[oldest]->since)) oldest = i;
    if (oldest < 0) return ea_err(EA_ERR_BUSY, "the table is full: %d live members", EA_MON_MEMBERS_MAX);
    remove_at(t, oldest);
    return EA_OK;
}

ea_status ea_mon_table_register(ea_mon_table *t, ea_mon_register *r, uint64_t now_ns) {
    int i = find(t, r->id);
    ea_status s = i >= 0 ? EA_OK : make_room(t);
    entry *x = s == EA_OK ? ea_calloc(1, sizeof *x) : NULL;
    if (s == EA_OK && !x) s = ea_err(EA_ERR_NOMEM, "monitor entry");
    if (s != EA_OK) {
        ea_mon_register_free(r);
        return s;
    }
    x->r = *r;
    memset(r, 0, sizeof *r);
    x->live = 1;
    x->last_ns = now_ns;
    if (i >= 0) entry_free(t->e[i]);
    else i = t->n++;
    t->e[i] = x;
    change(t, EA_MON_EV_REGISTER, x);
    x->since = t->version;
    return EA_OK;
}

/* A server's heartbeat "replicas": replace its set, a "hosted" event if it changed. */
static ea_status take_replicas(ea_mon_table *t, entry *x, const ea_mon_heartbeat *h) {
    if (h->n_replicas > x->r.replica_slots)
        return ea_err(EA_ERR_RANGE, "replicas: %d pairs, more than replica_slots %d of server '%s'", h->n_replicas,
                      x->r.replica_slots, x->r.id);
    int ok;
    ea_mon_pair *p = sorted_copy(h->replicas, h->n_replicas, &ok);
    if (!ok) return ea_err(EA_ERR_NOMEM, "replicas of '%s'", x->r.id);
    if (same_set(&x->replicas, p, h->n_replicas)) {
        ea_free(p);
        return EA_OK;
    }
    ea_free(x->replicas.p);
    x->replicas = (pair_set){p, h->n_replicas};
    change(t, EA_MON_EV_HOSTED, x);
    return EA_OK;
}

ea_status ea_mon_table_heartbeat(ea_mon_table *t, const ea_mon_heartbeat *h, uint64_t now_ns, ea_mon_role *role) {
    int i = find(t, h->id);
    if (i < 0) return ea_err(EA_ERR_NOT_FOUND, "member '%s' is not registered: register again", h->id);
    entry *x = t->e[i];
    if (!x->live) return ea_err(EA_ERR_NOT_FOUND, "member '%s' was declared dead: register again", h->id);
    if (x->r.role == EA_MON_SERVER && h->has_replicas) EA_TRY(take_replicas(t, x, h));
    x->last_ns = now_ns;
    *role = x->r.role;
    return EA_OK;
}

ea_status ea_mon_table_leave(ea_mon_table *t, const char *id) {
    int i = find(t, id);
    if (i < 0) return ea_err(EA_ERR_NOT_FOUND, "member '%s' is not registered", id);
    change(t, EA_MON_EV_LEAVE, t->e[i]);
    remove_at(t, i);
    return EA_OK;
}

int ea_mon_table_reap(ea_mon_table *t, uint64_t now_ns, uint64_t dead_after_ns) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        entry *x = t->e[i];
        if (!x->live || now_ns < x->last_ns || now_ns - x->last_ns <= dead_after_ns) continue;
        x->live = 0;
        t->deaths++;
        change(t, EA_MON_EV_DEAD, x);
        n++;
    }
    return n;
}

void ea_mon_table_counts(const ea_mon_table *t, ea_mon_counts *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < t->n; i++) {
        int srv = t->e[i]->r.role == EA_MON_SERVER, live = t->e[i]->live;
        *(srv ? (live ? &out->servers_live : &out->servers_dead) : (live ? &out->clients_live : &out->clients_dead)) += 1;
        out->replicas_assigned += t->e[i]->has_assigned ? t->e[i]->assigned.n : 0;
    }
    out->deaths = t->deaths;
}

int ea_mon_table_event(const ea_mon_table *t, uint64_t version, ea_cluster_event *out) {
    const event *ev = &t->ring[version % EA_MON_EVENTS_KEPT];
    if (version < 2 || version > t->version || ev->version != version) return 0;
    *out = *ev;
    return 1;
}

/* ---- rendering --------------------------------------------------------------------- */

static json_t *entry_json(const entry *x) {
    json_t *o = json_pack("{s:s, s:s, s:I}", "id", x->r.id, "state", x->live ? "live" : "dead", "since",
                          (json_int_t)x->since);
    if (!o || x->r.role != EA_MON_SERVER) return o;
    json_object_set_new(o, "ucx", json_string(x->r.ucx));
    json_object_set_new(o, "http", json_string(x->r.http));
    json_object_set_new(o, "hosted", json_pack("{s:o, s:o}", "layers", ea__mon_ranges_json(x->r.layers, x->r.n_layers),
                                               "experts", ea__mon_ranges_json(x->r.experts, x->r.n_experts)));
    json_object_set_new(o, "replica_slots", json_integer(x->r.replica_slots));
    json_object_set_new(o, "replicas", ea_mon_pairs_json(x->replicas.p, x->replicas.n));
    if (x->has_assigned) json_object_set_new(o, "assigned", ea_mon_pairs_json(x->assigned.p, x->assigned.n));
    return o;
}

/* The events after `after`, or NULL when the ring no longer holds all of them. */
static json_t *events_json(const ea_mon_table *t, uint64_t after) {
    uint64_t oldest = t->version > EA_MON_EVENTS_KEPT ? t->version - EA_MON_EVENTS_KEPT + 1 : 2;
    if (after < 1) after = 1;
    if (after + 1 < oldest) return NULL;
    json_t *a = json_array();
    for (uint64_t v = after + 1; a && v <= t->version; v++) {
        const event *ev = &t->ring[v % EA_MON_EVENTS_KEPT];
        json_array_append_new(a, json_pack("{s:I, s:s, s:s, s:s}", "version", (json_int_t)ev->version, "kind",
                                           ea_mon_event_name(ev->kind), "role", ea_mon_role_name(ev->role), "id",
                                           ev->id));
    }
    return a;
}

void ea_mon_table_render(const ea_mon_table *t, int with_events, uint64_t after, ea_sbuf *out) {
    char ep[17];
    ea_mon_epoch_format(t->epoch, ep);
    json_t *servers = json_array(), *clients = json_array();
    for (int i = 0; i < t->n; i++)
        json_array_append_new(t->e[i]->r.role == EA_MON_SERVER ? servers : clients, entry_json(t->e[i]));
    json_t *o = json_pack("{s:s, s:I, s:o, s:o}", "epoch", ep, "version", (json_int_t)t->version, "servers", servers,
                          "clients", clients);
    json_t *ev = with_events && o ? events_json(t, after) : NULL;
    if (ev) json_object_set_new(o, "events", ev);
    if (!o) out->failed = 1;
    else ea_sbuf_json(out, o);
    json_decref(o);
}

/* ---- the replica plan ------------------------------------------------------------------ */

void ea_mon_plan_input_free(ea_mon_plan_input *in) {
    ea_free(in->s);
    ea_free(in->id);
    ea_free(in->since);
    ea_free(in->ranges);
    ea_free(in->pairs);
    memset(in, 0, sizeof *in);
}

ea_status ea_mon_table_plan_input(const ea_mon_table *t, ea_mon_plan_input *out) {
    memset(out, 0, sizeof *out);
    size_t n = 0, n_ranges = 0, n_pairs = 0;
    for (int i = 0; i < t->n; i++) {
        const entry *x = t->e[i];
        if (x->r.role != EA_MON_SERVER) continue;
        n++;
        n_ranges += (size_t)x->r.n_layers + (size_t)x->r.n_experts;
        n_pairs += (size_t)x->assigned.n;
    }
    out->s = ea_calloc(n + 1, sizeof *out->s);
    out->id = ea_calloc(n + 1, sizeof *out->id);
    out->since = ea_calloc(n + 1, sizeof *out->since);
    out->ranges = ea_malloc((n_ranges + 1) * sizeof *out->ranges);
    out->pairs = ea_malloc((n_pairs + 1) * sizeof *out->pairs);
    if (!out->s || !out->id || !out->since || !out->ranges || !out->pairs) {
        ea_mon_plan_input_free(out);
        return ea_err(EA_ERR_NOMEM, "replica plan input: %zu servers", n);
    }
    ea_range *r = out->ranges;
    ea_mon_pair *p = out->pairs;
    for (int i = 0; i < t->n; i++) {
        const entry *x = t->e[i];
        if (x->r.role != EA_MON_SERVER) continue;
        ea_replicas_server *v = &out->s[out->n];
        memcpy(r, x->r.layers, (size_t)x->r.n_layers * sizeof *r);
        memcpy(r + x->r.n_layers, x->r.experts, (size_t)x->r.n_experts * sizeof *r);
        if (x->assigned.n) memcpy(p, x->assigned.p, (size_t)x->assigned.n * sizeof *p);
        *v = (ea_replicas_server){.layers = r, .n_layers = x->r.n_layers, .experts = r + x->r.n_layers,
                                  .n_experts = x->r.n_experts, .live = x->live, .slots = x->r.replica_slots,
                                  .has_current = x->has_assigned, .current = p, .n_current = x->assigned.n};
        r += x->r.n_layers + x->r.n_experts;
        p += x->assigned.n;
        memcpy(out->id[out->n], x->r.id, sizeof out->id[0]);
        out->since[out->n] = x->since;
        out->n_slotted += x->live && x->r.replica_slots > 0;
        out->n_planned += x->has_assigned;
        out->n++;
    }
    return EA_OK;
}

ea_status ea_mon_table_assign(ea_mon_table *t, const ea_mon_plan_input *in, const ea_replicas_assign *plan,
                              int *n_changed) {
    *n_changed = 0;
    for (int k = 0; k < in->n; k++) {
        int i = find(t, in->id[k]);
        if (i < 0 || t->e[i]->since != in->since[k] || t->e[i]->r.role != EA_MON_SERVER) continue;
        entry *x = t->e[i];
        const ea_replicas_assign *a = &plan[k];
        if (x->has_assigned == a->has && same_set(&x->assigned, a->pairs, a->n)) continue;
        int ok;
        ea_mon_pair *p = sorted_copy(a->pairs, a->n, &ok);
        if (!ok) return ea_err(EA_ERR_NOMEM, "assigned replicas of '%s'", x->r.id);
        ea_free(x->assigned.p);
        x->assigned = (pair_set){p, a->n};
        x->has_assigned = a->has;
        change(t, EA_MON_EV_ASSIGN, x);
        ++*n_changed;
    }
    return EA_OK;
}
