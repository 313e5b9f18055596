/*
 * monitor_table.c — the versioned membership table (see monitor_table.h).
 *
 * Entries are pointers in an array kept in registration order (a removal
 * shifts the tail); a lookup is a linear scan, fine for the tens to hundreds
 * of members of one cluster (the table holds at most EA_MON_MEMBERS_MAX).
 * Events live in a ring of EA_MON_EVENTS_KEPT; event v is at v % KEPT, and the
 * ring holds versions (max(1, version - KEPT), version] (version 1, the empty
 * table, has no event).
 */
#include "eaas/monitor_table.h"

#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "base/alloc.h"

typedef struct {
    ea_mon_register r; /* owns: role, id, a server's fields */
    int live;
    uint64_t since;   /* version of this incarnation's registration */
    uint64_t last_ns; /* last heartbeat or registration, caller's clock */
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
    ea_free(x);
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

ea_status ea_mon_table_heartbeat(ea_mon_table *t, const char *id, uint64_t now_ns) {
    int i = find(t, id);
    if (i < 0) return ea_err(EA_ERR_NOT_FOUND, "member '%s' is not registered: register again", id);
    if (!t->e[i]->live) return ea_err(EA_ERR_NOT_FOUND, "member '%s' was declared dead: register again", id);
    t->e[i]->last_ns = now_ns;
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
