/*
 * node.c — an expert server process (see node.h).
 */
#include "eaas/node.h"

#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/log.h"
#include "base/pool.h"
#include "base/sbuf.h"
#include "base/util.h"
#include "eaas/jhttp.h"
#include "eaas/member.h"
#include "eaas/monitor_msg.h"
#include "eaas/server.h"
#include "kernels/matmul.h"
#include "model/experts.h"
#include "moe/moe_local.h"
#include "model/model.h"

#define MAX_DROPS 64

/* A /connect waiting for the poll thread. */
typedef struct creq {
    json_t *in;     /* borrows: the checked request */
    ea_status st;
    char *reply;    /* owns: JSON text */
    int done;
    struct creq *next;
} creq;

/* A replica of a hot expert (node.h). The member's table thread adds it
 * (COPIED) and marks it DROPPING; the poll thread binds it (-> LIVE) and,
 * once drop_at has passed, unbinds and frees it. All under mu. */
typedef enum { REP_COPIED, REP_LIVE, REP_DROPPING } rep_state;
typedef struct {
    int layer, expert;
    rep_state state;
    int bound;              /* the backend's slot points at copy (poll thread) */
    ea_ffn_weights orig;    /* the slot's view before binding */
    ea_expert_copy copy;
    double drop_at;
} replica;

/* Which monitor member each slot's client is, to free its slots when it dies,
 * and which of its lanes (-1: not said): a client connecting a lane again has
 * given the old connection up (a missed deadline), so its slot goes. */
typedef struct {
    char member[EA_MON_ID_MAX + 1];
    uint32_t xid;
    int lane;
} peer;

struct ea_xnode {
    ea_xnode_opts o;
    char host[256], id[EA_MON_ID_MAX + 1];
    ea_model *m;
    ea_pool *pool;
    ea_kctx *kctx;
    ea_moe_backend *be;
    uint8_t *hosted; /* (n_layers, n_experts) */
    ea_ucx *u;
    ea_xsrv *s;
    pthread_t th;
    int th_started;
    atomic_int stop;
    pthread_mutex_t mu; /* guards queue, drops, st */
    pthread_cond_t cv;
    creq *queue;
    char drops[MAX_DROPS][EA_MON_ID_MAX + 1];
    int n_drops;
    ea_xsrv_stats st;
    peer *peers; /* poll thread only */
    int n_peers;
    size_t cap_peers;
    ea_jhttp *http;
    ea_member *mem;
    replica *reps; /* under mu */
    int n_reps;
    size_t cap_reps;
    uint64_t rep_loads, rep_drops; /* under mu */
};

ea_status ea_xnode_ranges_parse(const char *spec, int n, uint8_t *mask) {
    if (!spec || !strcmp(spec, "all")) {
        memset(mask, 1, (size_t)n);
        return EA_OK;
    }
    memset(mask, 0, (size_t)n);
    const char *p = spec;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0) return ea_err(EA_ERR_INVALID_ARG, "'%s': expected all or A-B[,C-D...]", spec);
        if (*end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
            if (end == p) return ea_err(EA_ERR_INVALID_ARG, "'%s': expected all or A-B[,C-D...]", spec);
        }
        if (b < a || b >= n) return ea_err(EA_ERR_RANGE, "'%s': %ld-%ld is not within 0-%d", spec, a, b, n - 1);
        memset(mask + a, 1, (size_t)(b - a + 1));
        if (*end == ',') end++;
        else if (*end) return ea_err(EA_ERR_INVALID_ARG, "'%s': expected all or A-B[,C-D...]", spec);
        p = end;
    }
    return EA_OK;
}

/* The runs of 1 in mask[0..n) as ranges (out has room for n). */
static int mask_ranges(const uint8_t *mask, int n, ea_range *out) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (mask[i] && (i == 0 || !mask[i - 1])) out[k++] = (ea_range){i, i};
        else if (mask[i]) out[k - 1].b = i;
    return k;
}

/* ---- the poll thread ------------------------------------------------------------ */

static ea_status remember_peer(ea_xnode *n, const char *member, uint32_t xid, int lane) {
    if (ea_grow(&n->peers, &n->cap_peers, (size_t)n->n_peers + 1, sizeof *n->peers, 16))
        return ea_err(EA_ERR_NOMEM, "peers");
    snprintf(n->peers[n->n_peers].member, sizeof n->peers[0].member, "%s", member);
    n->peers[n->n_peers].lane = lane;
    n->peers[n->n_peers++].xid = xid;
    return EA_OK;
}

/* Frees member's slots: every one (lane < 0: it died or left), or that lane's (it connects it again). */
static void drop_member(ea_xnode *n, const char *member, int lane) {
    for (int i = 0; i < n->n_peers;) {
        if (strcmp(n->peers[i].member, member) != 0 || (lane >= 0 && n->peers[i].lane != lane)) {
            i++;
            continue;
        }
        EA_LOGI("expert server: client %s %s, slot %u freed", member, lane < 0 ? "is gone" : "connects its lane again",
                n->peers[i].xid);
        ea_xsrv_drop_client(n->s, n->peers[i].xid);
        n->peers[i] = n->peers[--n->n_peers];
    }
}

/* The model this server serves and its largest call, as /connect carries it. */
static ea_slot_model server_model(const ea_xnode *n) {
    const ea_model_config *c = &n->m->cfg;
    ea_slot_model mo = {.n_layers = c->n_layers, .n_experts = c->n_experts, .hidden = c->hidden_size,
                        .max_tokens = n->o.max_tokens, .max_k = c->n_experts_per_tok};
    snprintf(mo.arch, sizeof mo.arch, "%s", ea_arch_names[c->arch]);
    return mo;
}

/* One /connect on the poll thread: the slot, and the reply. */
static ea_status do_connect(ea_xnode *n, creq *r) {
    uint8_t *addr = NULL, *rkey = NULL;
    size_t addr_len = 0, rkey_len = 0;
    json_int_t raddr = json_integer_value(json_object_get(r->in, "result_addr"));
    json_int_t rbytes = json_integer_value(json_object_get(r->in, "result_bytes"));
    const char *member = json_string_value(json_object_get(r->in, "client"));
    const json_t *lj = json_object_get(r->in, "lane");
    int lane = json_is_integer(lj) && json_integer_value(lj) >= 0 && json_integer_value(lj) < 64
                   ? (int)json_integer_value(lj)
                   : -1;
    if (lane >= 0) drop_member(n, member, lane);
    ea_status st = ea_base64_json_field(r->in, "ucx", &addr, &addr_len);
    if (st == EA_OK) st = ea_base64_json_field(r->in, "rkey", &rkey, &rkey_len);
    ea_xsrv_slot_info si;
    if (st == EA_OK)
        st = ea_xsrv_add_client(n->s, addr, addr_len, (uint64_t)raddr, (size_t)rbytes, rkey, rkey_len, &si);
    ea_free(addr);
    ea_free(rkey);
    if (st != EA_OK) return st;
    if ((st = remember_peer(n, member, si.client, lane)) != EA_OK) {
        ea_xsrv_drop_client(n->s, si.client);
        return st;
    }
    ea_slot_model mo = server_model(n);
    char *rk = ea_base64_dup(si.rkey, si.rkey_len), *ua = ea_base64_dup(si.server_addr, si.server_addr_len);
    json_t *j = json_pack("{s:i, s:I, s:I, s:s?, s:s?, s:o?}", "client", (int)si.client, "slot_addr",
                          (json_int_t)si.slot_addr, "slot_bytes", (json_int_t)si.slot_bytes, "rkey", rk, "ucx", ua,
                          "model", ea_slot_model_json(&mo));
    ea_free(rk);
    ea_free(ua);
    char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
    r->reply = txt ? ea_strdup(txt) : NULL;
    free(txt);
    json_decref(j);
    EA_LOGI("expert server: client %s connected (slot %u)", member, si.client);
    return r->reply ? EA_OK : ea_err(EA_ERR_NOMEM, "connect reply");
}

/* Poll thread, between rounds: copied replicas are bound (the backend's slot
 * points at the copy, the expert is hosted), dropped ones past their grace
 * unbound and freed (all of them when stopping). Returns 1 if any changed. */
static int bind_replicas(ea_xnode *n, int stopping) {
    int E = n->m->cfg.n_experts, changed = 0;
    double now = ea_now_s();
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->n_reps;) {
        replica *r = &n->reps[i];
        ea_ffn_weights *slot = ea_moe_local_slot(n->be, r->layer, r->expert);
        if (r->state == REP_COPIED && !stopping) {
            r->orig = *slot;
            *slot = r->copy.w;
            r->bound = 1;
            n->hosted[(size_t)r->layer * E + r->expert] = 1;
            r->state = REP_LIVE;
            changed = 1;
            EA_LOGI("expert server: replica of layer %d expert %d is served", r->layer, r->expert);
        }
        if ((r->state == REP_DROPPING && now >= r->drop_at) || stopping) {
            if (r->bound) {
                n->hosted[(size_t)r->layer * E + r->expert] = 0;
                *slot = r->orig;
            }
            ea_expert_copy_free(&r->copy);
            if (!stopping) EA_LOGI("expert server: replica of layer %d expert %d dropped", r->layer, r->expert);
            n->reps[i] = n->reps[--n->n_reps];
            changed = 1;
            continue;
        }
        i++;
    }
    pthread_mutex_unlock(&n->mu);
    return changed;
}

/* What the HTTP and member threads left for the poll thread (connects are
 * refused once stopping). Returns 1 if there was any. */
static int take_requests(ea_xnode *n, int stopping) {
    pthread_mutex_lock(&n->mu);
    creq *q = n->queue;
    n->queue = NULL;
    char drops[MAX_DROPS][EA_MON_ID_MAX + 1];
    int nd = n->n_drops;
    memcpy(drops, n->drops, sizeof drops[0] * (size_t)nd);
    n->n_drops = 0;
    pthread_mutex_unlock(&n->mu);
    for (int i = 0; i < nd; i++) drop_member(n, drops[i], -1);
    int rep_work = bind_replicas(n, stopping);
    for (creq *r = q; r;) {
        creq *next = r->next;
        r->st = stopping ? ea_err(EA_ERR_UNAVAILABLE, "the expert server is stopping") : do_connect(n, r);
        if (r->st != EA_OK) r->reply = ea_strdup(ea_errmsg());
        pthread_mutex_lock(&n->mu);
        r->done = 1;
        pthread_cond_broadcast(&n->cv);
        pthread_mutex_unlock(&n->mu);
        r = next;
    }
    return q != NULL || nd > 0 || rep_work;
}

static void *poll_loop(void *arg) {
    ea_xnode *n = arg;
    double last_work = ea_now_s();
    unsigned rounds = 0;
    while (!atomic_load(&n->stop)) {
        int work = take_requests(n, 0);
        int r = ea_xsrv_poll(n->s);
        if (r < 0) EA_LOGE("expert server: poll round failed: %s", ea_errmsg());
        if (work || r != 0 || (++rounds & 1023) == 0) {
            pthread_mutex_lock(&n->mu);
            ea_xsrv_get_stats(n->s, &n->st);
            pthread_mutex_unlock(&n->mu);
        }
        double now = ea_now_s();
        if (work || r > 0) last_work = now;
        else if (now - last_work > 0.1) nanosleep(&(struct timespec){0, 2000000}, NULL); /* idle: ~0 CPU */
        else if (now - last_work > 2e-3) nanosleep(&(struct timespec){0, 50000}, NULL);
        else if (now - last_work > 20e-6) sched_yield(); /* clients may share our cores */
    }
    take_requests(n, 1);
    return NULL;
}

/* ---- HTTP ----------------------------------------------------------------------- */

static int json_uint(const json_t *j, const char *key) {
    const json_t *v = json_object_get(j, key);
    return json_is_integer(v) && json_integer_value(v) >= 0;
}

static void http_connect(ea_xnode *n, const ea_jhttp_req *r, ea_jhttp_reply *out) {
    json_error_t err;
    json_t *in = json_loadb(r->body, r->body_len, 0, &err);
    const char *member = json_string_value(json_object_get(in, "client"));
    if (!json_is_object(in) || !member || !member[0] || strlen(member) > EA_MON_ID_MAX ||
        !json_uint(in, "result_addr") || !json_uint(in, "result_bytes")) {
        ea_jhttp_reply_error(out, 400, "invalid_request_error",
                             "expected {\"client\":ID,\"ucx\":BASE64,\"result_addr\":N,\"result_bytes\":N,"
                             "\"rkey\":BASE64}");
        json_decref(in);
        return;
    }
    /* the client's model (optional: older clients check the answer's): refused before a slot is made, so
     * that a client that cannot use this server, retrying, does not take every slot */
    const json_t *cm = json_object_get(in, "model");
    ea_slot_model theirs, mine = server_model(n);
    if (cm && (ea_slot_model_read(cm, &theirs) != EA_OK || ea_slot_model_check(&mine, &theirs, n->id) != EA_OK)) {
        ea_jhttp_reply_error(out, 400, "invalid_request_error", ea_errmsg());
        json_decref(in);
        return;
    }
    creq q = {.in = in};
    pthread_mutex_lock(&n->mu);
    q.next = n->queue;
    n->queue = &q;
    while (!q.done) pthread_cond_wait(&n->cv, &n->mu); /* the loop answers every request, at stop too */
    pthread_mutex_unlock(&n->mu);
    if (q.st != EA_OK)
        ea_jhttp_reply_error(out, q.st == EA_ERR_BUSY || q.st == EA_ERR_UNAVAILABLE ? 503 : 400,
                             "invalid_request_error", q.reply ? q.reply : "out of memory");
    else ea_jhttp_reply_set(out, 200, q.reply, NULL);
    ea_free(q.reply);
    json_decref(in);
}

static void http_metrics(ea_xnode *n, ea_jhttp_reply *out) {
    pthread_mutex_lock(&n->mu);
    ea_xsrv_stats st = n->st;
    int live_reps = 0;
    for (int i = 0; i < n->n_reps; i++) live_reps += n->reps[i].state == REP_LIVE;
    uint64_t loads = n->rep_loads, drops = n->rep_drops;
    pthread_mutex_unlock(&n->mu);
    ea_sbuf b = {0};
    ea_sbuf_printf(&b,
                   "# HELP eaas:expert_tokens_total (token, expert) pairs this server ran\n"
                   "# TYPE eaas:expert_tokens_total counter\neaas:expert_tokens_total %llu\n"
                   "# HELP eaas:expert_batches_total grouped expert runs (one layer, pairs of every client)\n"
                   "# TYPE eaas:expert_batches_total counter\neaas:expert_batches_total %llu\n"
                   "# HELP eaas:expert_cross_client_rounds_total poll rounds that gathered calls of several clients\n"
                   "# TYPE eaas:expert_cross_client_rounds_total counter\neaas:expert_cross_client_rounds_total %llu\n"
                   "# HELP eaas:expert_cross_client_batches_total grouped runs holding pairs of several clients\n"
                   "# TYPE eaas:expert_cross_client_batches_total counter\neaas:expert_cross_client_batches_total %llu\n"
                   "# HELP eaas:expert_clients clients holding a slot\n"
                   "# TYPE eaas:expert_clients gauge\neaas:expert_clients %d\n"
                   "# HELP eaas:expert_clients_dropped_total slots freed because the client stopped answering\n"
                   "# TYPE eaas:expert_clients_dropped_total counter\neaas:expert_clients_dropped_total %llu\n"
                   "# HELP eaas:expert_slots_refused_total calls refused for a malformed header or ids\n"
                   "# TYPE eaas:expert_slots_refused_total counter\neaas:expert_slots_refused_total %llu\n",
                   (unsigned long long)st.tokens, (unsigned long long)st.batches,
                   (unsigned long long)st.cross_client_rounds, (unsigned long long)st.cross_client_batches, st.clients,
                   (unsigned long long)st.clients_dropped, (unsigned long long)st.slots_refused);
    ea_sbuf_printf(&b,
                   "# HELP eaas:expert_replicas replicas of hot experts served now (beyond --layers x --experts)\n"
                   "# TYPE eaas:expert_replicas gauge\neaas:expert_replicas %d\n"
                   "# HELP eaas:expert_replica_slots replicas this server may hold\n"
                   "# TYPE eaas:expert_replica_slots gauge\neaas:expert_replica_slots %d\n"
                   "# HELP eaas:expert_replica_loads_total replicas copied in from the model file\n"
                   "# TYPE eaas:expert_replica_loads_total counter\neaas:expert_replica_loads_total %llu\n"
                   "# HELP eaas:expert_replica_drops_total replicas the monitor took back\n"
                   "# TYPE eaas:expert_replica_drops_total counter\neaas:expert_replica_drops_total %llu\n",
                   live_reps, n->o.replica_slots, (unsigned long long)loads, (unsigned long long)drops);
    ea_jhttp_reply_set(out, b.failed ? 500 : 200, b.data, "text/plain; version=0.0.4");
    ea_sbuf_deinit(&b);
}

static void handle(void *ctx, const ea_jhttp_req *r, ea_jhttp_reply *out) {
    ea_xnode *n = ctx;
    if (!strcmp(r->path, "/connect") && !strcmp(r->method, "POST")) http_connect(n, r, out);
    else if (!strcmp(r->path, "/metrics")) http_metrics(n, out);
    else if (!strcmp(r->path, "/health")) {
        char body[256];
        pthread_mutex_lock(&n->mu);
        snprintf(body, sizeof body, "{\"status\":\"ok\",\"id\":\"%s\",\"clients\":%d}", n->id, n->st.clients);
        pthread_mutex_unlock(&n->mu);
        ea_jhttp_reply_set(out, 200, body, NULL);
    }
}

/* ---- membership ----------------------------------------------------------------- */

static void queue_drop(ea_xnode *n, const char *member) {
    pthread_mutex_lock(&n->mu);
    if (n->n_drops < MAX_DROPS) snprintf(n->drops[n->n_drops++], sizeof n->drops[0], "%s", member);
    pthread_mutex_unlock(&n->mu);
}

/* Member thread: the monitor's assignment of replicas to this server. Those
 * no longer assigned start their grace; new ones are copied in (here, while
 * the poll thread serves) and left for the poll thread to bind. */
static void follow_assignment(ea_xnode *n, const ea_mon_pair *a, int n_a) {
    const ea_model_config *c = &n->m->cfg;
    int E = c->n_experts;
    double grace = (n->o.replica_grace_ms > 0 ? n->o.replica_grace_ms : 3000) * 1e-3;
    uint8_t *want = ea_calloc((size_t)c->n_layers * E, 1); /* 1 assigned, 2 assigned and held already */
    if (!want) return; /* the next table tries again */
    for (int i = 0; i < n_a; i++) {
        if (a[i].layer < c->n_layers && a[i].expert < E && c->layer_is_moe[a[i].layer])
            want[(size_t)a[i].layer * E + a[i].expert] = 1;
        else
            EA_LOGW("expert server: the monitor assigns layer %d expert %d, which the model does not have",
                    a[i].layer, a[i].expert);
    }
    int held = 0;
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->n_reps; i++) {
        replica *r = &n->reps[i];
        uint8_t *w = &want[(size_t)r->layer * E + r->expert];
        if (!*w && r->state != REP_DROPPING) {
            r->state = REP_DROPPING;
            r->drop_at = ea_now_s() + grace;
            n->rep_drops++;
        } else if (*w && r->state == REP_DROPPING) { /* assigned again within its grace */
            r->state = r->bound ? REP_LIVE : REP_COPIED;
        }
        if (*w) *w = 2;
        held += r->state != REP_DROPPING;
    }
    for (size_t q = 0; q < (size_t)c->n_layers * E; q++) /* hosted by --layers x --experts: nothing to copy */
        if (want[q] == 1 && n->hosted[q]) want[q] = 0;
    pthread_mutex_unlock(&n->mu);
    for (int i = 0; i < n_a; i++) {
        int l = a[i].layer, e = a[i].expert;
        if (l >= c->n_layers || e >= E || want[(size_t)l * E + e] != 1) continue;
        want[(size_t)l * E + e] = 2;
        if (held >= n->o.replica_slots) {
            EA_LOGW("expert server: the monitor assigns more replicas than --replica-slots %d", n->o.replica_slots);
            break;
        }
        replica r = {.layer = l, .expert = e, .state = REP_COPIED};
        double t0 = ea_now_s();
        if (ea_model_expert_copy(n->m, l, e, &r.copy) != EA_OK) {
            EA_LOGW("expert server: replica of layer %d expert %d: %s", l, e, ea_errmsg());
            continue;
        }
        pthread_mutex_lock(&n->mu);
        if (ea_grow(&n->reps, &n->cap_reps, (size_t)n->n_reps + 1, sizeof *n->reps, 8)) {
            pthread_mutex_unlock(&n->mu);
            ea_expert_copy_free(&r.copy);
            EA_LOGW("expert server: replica of layer %d expert %d: out of memory", l, e);
            continue;
        }
        n->reps[n->n_reps++] = r;
        n->rep_loads++;
        held++;
        pthread_mutex_unlock(&n->mu);
        EA_LOGI("expert server: replica of layer %d expert %d copied in (%.1f MB, %.0f ms)", l, e,
                (double)r.copy.mem_len / 1e6, (ea_now_s() - t0) * 1e3);
    }
    ea_free(want);
}

/* Heartbeat thread: {"replicas":[[layer,expert],...]}, the replicas served now. */
static char *beat_fields(void *ctx) {
    ea_xnode *n = ctx;
    if (n->o.replica_slots <= 0) return NULL;
    ea_sbuf b = {0};
    ea_sbuf_printf(&b, "{\"replicas\":[");
    pthread_mutex_lock(&n->mu);
    int k = 0;
    for (int i = 0; i < n->n_reps && k < n->o.replica_slots; i++) /* more than the slots: the beat is refused */
        if (n->reps[i].state == REP_LIVE)
            ea_sbuf_printf(&b, "%s[%d,%d]", k++ ? "," : "", n->reps[i].layer, n->reps[i].expert);
    pthread_mutex_unlock(&n->mu);
    ea_sbuf_printf(&b, "]}");
    if (b.failed) {
        ea_sbuf_deinit(&b);
        return NULL;
    }
    return b.data;
}

/* A new table: clients declared dead, or that left, lose their slots. */
static void on_table(void *ctx, const char *json) {
    ea_xnode *n = ctx;
    ea_cluster c;
    if (ea_cluster_parse(json, strlen(json), &c) != EA_OK) {
        EA_LOGW("expert server: a table from the monitor was refused: %s", ea_errmsg());
        return;
    }
    for (int i = 0; i < c.n_clients; i++)
        if (!c.clients[i].live) queue_drop(n, c.clients[i].id);
    for (int i = 0; i < c.n_events; i++)
        if (c.events[i].role == EA_MON_CLIENT &&
            (c.events[i].kind == EA_MON_EV_DEAD || c.events[i].kind == EA_MON_EV_LEAVE))
            queue_drop(n, c.events[i].id);
    for (int i = 0; i < c.n_servers; i++)
        if (!strcmp(c.servers[i].id, n->id) && c.servers[i].has_assigned)
            follow_assignment(n, c.servers[i].assigned, c.servers[i].n_assigned);
    ea_cluster_free(&c);
}

static ea_status join_monitor(ea_xnode *n) {
    const ea_model_config *c = &n->m->cfg;
    int L = c->n_layers, E = c->n_experts;
    uint8_t *lm = ea_calloc((size_t)L, 1), *em = ea_calloc((size_t)E, 1);
    ea_range *lr = ea_calloc((size_t)L, sizeof *lr), *er = ea_calloc((size_t)E, sizeof *er);
    ea_status st = lm && em && lr && er ? EA_OK : ea_err(EA_ERR_NOMEM, "ranges");
    if (st == EA_OK) st = ea_xnode_ranges_parse(n->o.layers, L, lm);
    if (st == EA_OK) st = ea_xnode_ranges_parse(n->o.experts, E, em);
    char http[300];
    snprintf(http, sizeof http, "%s:%d", n->host, ea_jhttp_port(n->http));
    const void *addr;
    size_t alen;
    ea_ucx_address(n->u, &addr, &alen);
    char *fields = st == EA_OK ? ea_member_server_fields(addr, alen, http, lr, mask_ranges(lm, L, lr), er,
                                                         mask_ranges(em, E, er), n->o.replica_slots)
                               : NULL;
    if (st == EA_OK && !fields) st = ea_err(EA_ERR_NOMEM, "register fields");
    if (st == EA_OK) {
        ea_member_opts mo = {.monitor = n->o.monitor, .role = EA_MON_SERVER, .id = n->id, .fields = fields,
                             .on_table = on_table, .beat_fields = beat_fields, .ctx = n};
        st = ea_member_start(&mo, &n->mem);
    }
    ea_free(fields);
    ea_free(lm), ea_free(em), ea_free(lr), ea_free(er);
    return st;
}

/* ---- start and stop ------------------------------------------------------------- */

/* The hosted mask, the experts read in, and a local backend over them. */
static ea_status load_experts(ea_xnode *n) {
    EA_TRY(ea_model_open(n->o.model_path, &n->m));
    const ea_model_config *c = &n->m->cfg;
    int L = c->n_layers, E = c->n_experts, K = c->n_experts_per_tok;
    uint8_t *lm = ea_calloc((size_t)L, 1), *em = ea_calloc((size_t)E, 1);
    n->hosted = ea_calloc((size_t)L * E, 1);
    ea_status st = lm && em && n->hosted ? EA_OK : ea_err(EA_ERR_NOMEM, "hosted mask");
    if (st == EA_OK && (st = ea_xnode_ranges_parse(n->o.layers, L, lm)) != EA_OK) ea_err(st, "--layers %s", ea_errmsg());
    if (st == EA_OK && (st = ea_xnode_ranges_parse(n->o.experts, E, em)) != EA_OK) ea_err(st, "--experts %s", ea_errmsg());
    int n_hosted = 0;
    for (int l = 0; st == EA_OK && l < L; l++) {
        if (!c->layer_is_moe[l] || !lm[l]) continue;
        memcpy(n->hosted + (size_t)l * E, em, (size_t)E);
        for (int e = 0; e < E; e++) n_hosted += em[e];
        st = ea_model_load_experts(n->m, l, em);
    }
    ea_free(lm), ea_free(em);
    if (st != EA_OK) return st;
    EA_LOGI("expert server: %d experts of %s loaded", n_hosted, n->o.model_path);
    int kmax = c->hidden_size > c->moe_intermediate_size ? c->hidden_size : c->moe_intermediate_size;
    EA_TRY(ea_pool_create(n->o.threads, &n->pool));
    EA_TRY(ea_kctx_create(n->pool, 256 * K, kmax, &n->kctx));
    return ea_model_local_backend(n->m, n->kctx, 256, NULL, 0, &n->be);
}

static ea_status start(ea_xnode *n) {
    EA_TRY(load_experts(n));
    const ea_model_config *c = &n->m->cfg;
    ea_xsrv_opts xo = {.experts = n->be,
                       .lim = {.n_layers = c->n_layers, .n_experts = c->n_experts, .hidden = c->hidden_size,
                               .max_tokens = n->o.max_tokens, .max_k = c->n_experts_per_tok, .hosted = n->hosted},
                       .max_clients = n->o.max_clients,
                       .max_batch_pairs = 256 * c->n_experts_per_tok,
                       .flush_deadline_s = n->o.flush_deadline_s,
                       .gather_s = n->o.gather_s};
    EA_TRY(ea_ucx_create(&n->u));
    EA_TRY(ea_xsrv_create(n->u, &xo, &n->s));
    EA_TRY(ea_jhttp_start(n->host, n->o.port, 1 << 16, handle, n, &n->http));
    if (!n->id[0]) snprintf(n->id, sizeof n->id, "expert-%.64s-%d", n->host, ea_jhttp_port(n->http));
    if (pthread_create(&n->th, NULL, poll_loop, n) != 0) return ea_err(EA_ERR_IO, "expert server: poll thread");
    n->th_started = 1;
    if (n->o.monitor) EA_TRY(join_monitor(n));
    EA_LOGI("expert server %s: http %s:%d%s%s", n->id, n->host, ea_jhttp_port(n->http),
            n->o.monitor ? ", monitor " : "", n->o.monitor ? n->o.monitor : "");
    return EA_OK;
}

ea_status ea_xnode_start(const ea_xnode_opts *o, ea_xnode **out) {
    *out = NULL;
    ea_xnode *n = ea_calloc(1, sizeof *n);
    if (!n) return ea_err(EA_ERR_NOMEM, "expert server");
    n->o = *o;
    if (n->o.max_tokens <= 0) n->o.max_tokens = 512;
    if (n->o.max_clients <= 0) n->o.max_clients = 16;
    snprintf(n->host, sizeof n->host, "%s", o->host && o->host[0] ? o->host : "127.0.0.1");
    if (o->id) snprintf(n->id, sizeof n->id, "%s", o->id);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    ea_status st = start(n);
    if (st != EA_OK) {
        ea_xnode_stop(n);
        return st;
    }
    *out = n;
    return EA_OK;
}

int ea_xnode_port(const ea_xnode *n) { return ea_jhttp_port(n->http); }

void ea_xnode_stop(ea_xnode *n) {
    if (!n) return;
    ea_member_stop(n->mem); /* /leave: clients move to replicas from the monitor's notice */
    ea_jhttp_stop(n->http);
    atomic_store(&n->stop, 1);
    if (n->th_started) pthread_join(n->th, NULL);
    ea_xsrv_destroy(n->s);
    ea_ucx_destroy(n->u);
    ea_moe_backend_destroy(n->be);
    for (int i = 0; i < n->n_reps; i++) ea_expert_copy_free(&n->reps[i].copy); /* the poll thread never started */
    ea_free(n->reps);
    ea_kctx_destroy(n->kctx);
    ea_pool_destroy(n->pool);
    ea_model_close(n->m);
    ea_free(n->hosted);
    ea_free(n->peers);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    ea_free(n);
}
