/*
 * client.c — the attention client's membership (see client.h).
 */
#include "eaas/client.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/util.h"
#include "eaas/http_client.h"
#include "eaas/member.h"
#include "eaas/monitor_msg.h"
#include "eaas/remote.h"
#include "eaas/slot.h"

typedef struct {
    char id[EA_MON_ID_MAX + 1];
    uint64_t since; /* the incarnation connected */
    int index;      /* in the remote backend */
    int dropped;    /* the table said it is gone */
    double retry_at, backoff; /* it missed a deadline while the table says live: connect again then */
} known;

typedef struct {
    ea_eaas_client_opts o;
    char arch[64];
    ea_member *mem;
    pthread_mutex_t mu; /* guards newest */
    char *newest;       /* owns: the newest table's JSON */
    uint8_t *live_mask; /* owns: (n_layers, n_experts): hosted by a live server of the newest table */
    atomic_int fresh;   /* newest not applied yet */
    double retry_at;    /* a server failed to connect: apply the table again after this time */
    char why[320];      /* step thread: why the last connection failed (the start's error says it) */
    known *kn;          /* step thread only */
    int n_kn;
    size_t cap_kn;
    ea_moe_backend *be; /* for the load report (ea_remote_take_load: any thread) */
    uint32_t *load;     /* owns: heartbeat thread's scratch, (n_layers, n_experts) */
    double next_report; /* heartbeat thread: when the load is reported next */
} glue;

/* ---- the member thread ---------------------------------------------------------- */

/* Which experts the table's live servers host (for health between a table and the next call). */
static void live_mask(glue *g, const char *json) {
    ea_cluster c;
    if (ea_cluster_parse(json, strlen(json), &c) != EA_OK) return;
    int L = g->o.n_layers, E = g->o.n_experts;
    pthread_mutex_lock(&g->mu);
    memset(g->live_mask, 0, (size_t)L * E);
    for (int i = 0; i < c.n_servers; i++)
        for (int l = 0; l < L && c.servers[i].live; l++)
            for (int e = 0; e < E; e++) g->live_mask[(size_t)l * E + e] |= (uint8_t)ea_cluster_hosts(&c.servers[i], l, e);
    pthread_mutex_unlock(&g->mu);
    ea_cluster_free(&c);
}

static void on_table(void *ctx, const char *json) {
    glue *g = ctx;
    char *copy = ea_strdup(json);
    if (!copy) return;
    live_mask(g, json);
    pthread_mutex_lock(&g->mu);
    ea_free(g->newest);
    g->newest = copy;
    pthread_mutex_unlock(&g->mu);
    atomic_store(&g->fresh, 1);
}

/* Heartbeat thread: {"load":[[layer,expert,pairs],...]}, the pairs this
 * client routed since its last report (the monitor plans replicas of hot
 * experts from them), at most once a second; NULL when not due or none. */
static char *beat_fields(void *ctx) {
    glue *g = ctx;
    int L = g->o.n_layers, E = g->o.n_experts;
    double now = ea_now_s();
    if (!g->be || now < g->next_report) return NULL; /* at most one report a second: the counts wait */
    g->next_report = now + 1.0;
    if (ea_remote_take_load(g->be, g->load) == 0) return NULL;
    ea_sbuf b = {0};
    ea_sbuf_printf(&b, "{\"load\":[");
    int k = 0;
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++)
            if (g->load[(size_t)l * E + e]) ea_sbuf_printf(&b, "%s[%d,%d,%u]", k++ ? "," : "", l, e, g->load[(size_t)l * E + e]);
    ea_sbuf_printf(&b, "]}");
    if (b.failed) {
        ea_sbuf_deinit(&b);
        return NULL;
    }
    return b.data;
}

static int coming(void *ctx, int layer, int expert) {
    glue *g = ctx;
    pthread_mutex_lock(&g->mu);
    int r = atomic_load(&g->fresh) && g->live_mask[(size_t)layer * g->o.n_experts + expert];
    pthread_mutex_unlock(&g->mu);
    return r;
}

/* ---- connecting to one server (step thread) ------------------------------------- */

typedef struct {
    glue *g;
    const ea_cluster_server *sv;
    uint8_t *addr, *rkey; /* owns: the server's side, borrowed by the slot info */
} dial;

/* This client's model and largest call, as /connect carries it. */
static ea_slot_model client_model(const glue *g) {
    ea_slot_model mo = {.n_layers = g->o.n_layers, .n_experts = g->o.n_experts, .hidden = g->o.hidden,
                        .max_tokens = g->o.max_tokens, .max_k = g->o.max_k};
    snprintf(mo.arch, sizeof mo.arch, "%s", g->arch);
    return mo;
}

static ea_status parse_slot(dial *d, const json_t *j, ea_xsrv_slot_info *out) {
    ea_slot_model theirs, mine = client_model(d->g);
    EA_TRY(ea_slot_model_read(json_object_get(j, "model"), &theirs));
    EA_TRY(ea_slot_model_check(&theirs, &mine, d->sv->id)); /* a server that did not check it itself */
    ea_free(d->rkey), ea_free(d->addr); /* the last lane's, used by now (remote.c connects lane by lane) */
    d->rkey = d->addr = NULL;
    json_int_t client = json_integer_value(json_object_get(j, "client"));
    json_int_t addr = json_integer_value(json_object_get(j, "slot_addr"));
    json_int_t bytes = json_integer_value(json_object_get(j, "slot_bytes"));
    if (client <= 0 || client > UINT32_MAX || addr <= 0 || bytes <= 0)
        return ea_err(EA_ERR_FORMAT, "expert server %s: a malformed /connect answer", d->sv->id);
    *out = (ea_xsrv_slot_info){.client = (uint32_t)client, .slot_addr = (uint64_t)addr, .slot_bytes = (size_t)bytes};
    EA_TRY(ea_base64_json_field(j, "rkey", &d->rkey, &out->rkey_len));
    EA_TRY(ea_base64_json_field(j, "ucx", &d->addr, &out->server_addr_len));
    out->rkey = d->rkey;
    out->server_addr = d->addr;
    return EA_OK;
}

/* ea_remote_connect_fn: POST /connect to the server's HTTP port. */
static ea_status dial_server(void *ctx, const ea_remote_hello *me, ea_xsrv_slot_info *out) {
    dial *d = ctx;
    char *ua = ea_base64_dup(me->addr, me->addr_len), *rk = ea_base64_dup(me->rkey, me->rkey_len);
    ea_slot_model mine = client_model(d->g);
    json_t *req = json_pack("{s:s, s:s?, s:I, s:I, s:s?, s:o?, s:i}", "client", ea_member_id(d->g->mem), "ucx", ua,
                            "result_addr", (json_int_t)me->result_addr, "result_bytes", (json_int_t)me->result_bytes,
                            "rkey", rk, "model", ea_slot_model_json(&mine), "lane", me->lane);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    ea_free(ua), ea_free(rk);
    json_decref(req);
    if (!body) return ea_err(EA_ERR_NOMEM, "connect request");
    int status = 0;
    char *resp = NULL;
    ea_status st = ea_http_call(d->sv->http, "POST", "/connect", body, 1000, &status, &resp);
    free(body);
    if (st != EA_OK) return st;
    json_t *j = json_loads(resp, 0, NULL);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    if (status != 200 || !json_is_object(j))
        st = ea_err(EA_ERR_UNAVAILABLE, "expert server %s refused the connection (%d): %.200s", d->sv->id, status,
                    msg ? msg : resp);
    else
        st = parse_slot(d, j, out);
    json_decref(j);
    ea_free(resp);
    return st;
}

/* ---- applying a table (step thread) --------------------------------------------- */

static known *find_known(glue *g, const char *id) {
    for (int i = 0; i < g->n_kn; i++)
        if (!strcmp(g->kn[i].id, id)) return &g->kn[i];
    return NULL;
}

static void drop(ea_moe_backend *be, known *k, const char *why) {
    if (k->dropped) return;
    EA_LOGW("remote experts: server %s %s", k->id, why);
    ea_remote_server_dead(be, k->index);
    k->dropped = 1;
}

/* What sv hosts, its ranges and its replicas, as a (n_layers, n_experts) mask (ea_malloc'd; NULL out of memory). */
static uint8_t *hosted_mask(const glue *g, const ea_cluster_server *sv) {
    int L = g->o.n_layers, E = g->o.n_experts;
    uint8_t *hosted = ea_malloc((size_t)L * E);
    for (int l = 0; hosted && l < L; l++)
        for (int e = 0; e < E; e++) hosted[(size_t)l * E + e] = (uint8_t)ea_cluster_hosts(sv, l, e);
    return hosted;
}

static ea_status connect_server(glue *g, ea_moe_backend *be, const ea_cluster_server *sv, known *k) {
    uint8_t *hosted = hosted_mask(g, sv);
    if (!hosted) return ea_err(EA_ERR_NOMEM, "hosted mask");
    dial d = {.g = g, .sv = sv};
    int index;
    ea_status st = ea_remote_add_server(be, sv->id, hosted, dial_server, &d, &index);
    ea_free(hosted), ea_free(d.addr), ea_free(d.rkey);
    if (st != EA_OK) return st;
    if (!k) {
        if (ea_grow(&g->kn, &g->cap_kn, (size_t)g->n_kn + 1, sizeof *g->kn, 8)) return ea_err(EA_ERR_NOMEM, "servers");
        k = &g->kn[g->n_kn++];
        *k = (known){0}; /* ea_grow does not zero: a stale retry_at and a 0 backoff made revive spin */
    }
    snprintf(k->id, sizeof k->id, "%s", sv->id);
    k->since = sv->since;
    k->index = index;
    k->dropped = 0;
    return EA_OK;
}

/* A server this backend gave up (a missed deadline, a refusal) that the
 * monitor still lists live — slow for a moment, not dead: connected again
 * (a new slot) after 1 s, backing off to 30 s while that fails. Returns 1 if
 * it is still waiting. */
static int revive(glue *g, ea_moe_backend *be, const ea_cluster_server *sv, known *k) {
    double now = ea_now_s();
    if (k->retry_at == 0) {
        k->backoff = 1.0;
        k->retry_at = now + k->backoff;
    }
    if (now < k->retry_at) return 1;
    EA_LOGI("remote experts: server %s missed a deadline but the monitor lists it live: connecting again", k->id);
    if (connect_server(g, be, sv, k) == EA_OK) {
        k->retry_at = k->backoff = 0;
        return 0;
    }
    EA_LOGW("remote experts: server %s: %s", k->id, ea_errmsg());
    k->backoff = k->backoff < 1 ? 1 : k->backoff * 2 < 30 ? k->backoff * 2 : 30;
    k->retry_at = now + k->backoff;
    return 1;
}

static void apply_server(glue *g, ea_moe_backend *be, const ea_cluster_server *sv, int *failed) {
    known *k = find_known(g, sv->id);
    if (k && k->since != sv->since) drop(be, k, "registered again: the old connection is dropped");
    else if (k && !sv->live) drop(be, k, "is dead (monitor)");
    if (k && k->since == sv->since && sv->live && !k->dropped && !ea_remote_server_live(be, k->index)) {
        revive(g, be, sv, k);
        return;
    }
    if (k && k->since == sv->since && sv->live && !k->dropped) { /* replicas gained or dropped */
        uint8_t *hosted = hosted_mask(g, sv);
        if (hosted) ea_remote_set_hosted(be, k->index, hosted);
        ea_free(hosted);
    }
    if (!sv->live || (k && k->since == sv->since)) return;
    if (connect_server(g, be, sv, k) != EA_OK) {
        snprintf(g->why, sizeof g->why, "%s", ea_errmsg());
        EA_LOGW("remote experts: cannot connect to expert server %s at %s: %s", sv->id, sv->http, g->why);
        *failed = 1;
    }
}

static void sync_table(void *ctx, ea_moe_backend *be) {
    glue *g = ctx;
    double now = ea_now_s();
    int due = atomic_load(&g->fresh) && now >= g->retry_at;
    for (int i = 0; i < g->n_kn && !due; i++) /* a server given up by the backend, to revive */
        due = !g->kn[i].dropped && !ea_remote_server_live(be, g->kn[i].index) &&
              (g->kn[i].retry_at == 0 || now >= g->kn[i].retry_at);
    if (!due) return;
    atomic_store(&g->fresh, 0);
    pthread_mutex_lock(&g->mu);
    char *json = g->newest ? ea_strdup(g->newest) : NULL;
    pthread_mutex_unlock(&g->mu);
    ea_cluster c;
    if (!json || ea_cluster_parse(json, strlen(json), &c) != EA_OK) {
        if (json) EA_LOGW("remote experts: a table from the monitor was refused: %s", ea_errmsg());
        ea_free(json);
        return;
    }
    int failed = 0;
    for (int i = 0; i < c.n_events; i++) {
        known *k = find_known(g, c.events[i].id);
        if (k && c.events[i].role == EA_MON_SERVER && c.events[i].kind == EA_MON_EV_LEAVE) drop(be, k, "left");
    }
    for (int i = 0; i < c.n_servers; i++) apply_server(g, be, &c.servers[i], &failed);
    for (int i = 0; i < g->n_kn; i++) /* given up, and not in this table: look again in 1 s, not at every call */
        if (!g->kn[i].dropped && !ea_remote_server_live(be, g->kn[i].index) && g->kn[i].retry_at <= now) {
            g->kn[i].backoff = g->kn[i].backoff > 0 ? g->kn[i].backoff : 1.0;
            g->kn[i].retry_at = now + g->kn[i].backoff;
        }
    if (failed) { /* try again from a later call */
        g->retry_at = ea_now_s() + 0.5;
        atomic_store(&g->fresh, 1);
    }
    ea_cluster_free(&c);
    ea_free(json);
}

static void release(void *ctx) {
    glue *g = ctx;
    ea_member_stop(g->mem);
    ea_free(g->newest);
    ea_free(g->live_mask);
    ea_free(g->load);
    ea_free(g->kn);
    pthread_mutex_destroy(&g->mu);
    ea_free(g);
}

/* Waits for a table and applies it; 1 once some server is connected. A table
 * arriving is applied at once, a failed connection tried again after 0.5 s
 * (sync_table), not at every look. */
static int first_table(glue *g, ea_moe_backend *be) {
    double end = ea_now_s() + (g->o.wait_first_s > 0 ? g->o.wait_first_s : 30.0);
    while (ea_now_s() < end) {
        sync_table(g, be);
        for (int i = 0; i < g->n_kn; i++)
            if (!g->kn[i].dropped) return 1;
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    return 0;
}

ea_status ea_eaas_client_create(const ea_eaas_client_opts *o, ea_moe_backend **out) {
    *out = NULL;
    glue *g = ea_calloc(1, sizeof *g);
    if (!g) return ea_err(EA_ERR_NOMEM, "remote experts");
    g->o = *o;
    snprintf(g->arch, sizeof g->arch, "%s", o->arch ? o->arch : "");
    pthread_mutex_init(&g->mu, NULL);
    uint32_t salt = 0;
    if (!(g->live_mask = ea_calloc((size_t)o->n_layers * o->n_experts, 1)) ||
        !(g->load = ea_calloc((size_t)o->n_layers * o->n_experts, sizeof *g->load)) ||
        ea_random_bytes(&salt, sizeof salt) != EA_OK) {
        release(g);
        return ea_err(EA_ERR_NOMEM, "remote experts");
    }
    ea_remote_opts ro = {.n_layers = o->n_layers, .n_experts = o->n_experts, .hidden = o->hidden,
                         .max_tokens = o->max_tokens, .max_k = o->max_k, .sync = sync_table, .sync_ctx = g,
                         .release = release, .coming = coming, .timeout_s = o->timeout_s,
                         .lanes = o->lanes, .salt = salt};
    ea_moe_backend *be;
    ea_status st = ea_remote_create(&ro, &be);
    if (st != EA_OK) {
        release(g);
        return st;
    }
    g->be = be;
    ea_member_opts mo = {.monitor = o->monitor, .role = EA_MON_CLIENT, .id = o->id, .on_table = on_table,
                         .beat_fields = beat_fields, .ctx = g};
    if ((st = ea_member_start(&mo, &g->mem)) != EA_OK) {
        ea_moe_backend_destroy(be);
        return st;
    }
    if (!first_table(g, be)) {
        char why[sizeof g->why];
        snprintf(why, sizeof why, "%s", g->why);
        ea_moe_backend_destroy(be); /* releases g */
        return ea_err(EA_ERR_UNAVAILABLE,
                      "no expert server could be reached through the monitor at %s within %.0f s%s%s", o->monitor,
                      o->wait_first_s > 0 ? o->wait_first_s : 30.0, why[0] ? "; the last one: " : "", why);
    }
    *out = be;
    return EA_OK;
}
