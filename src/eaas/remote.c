/*
 * remote.c — the remote MoE backend (see remote.h).
 *
 * State of a call (from submit to wait): owner[p] is the server running pair
 * p (-1: no live replica); a server with pairs is sent its WHOLE owned set,
 * and when failover moves more pairs to it, it is sent its whole set again
 * under a new sequence number — its result region holds one answer at a
 * time, and recomputing a pair gives the same bits.
 *
 * Buffers (at create): per server a result region (UCX) and a staging copy of
 * header + payload (kept until the put's flush); owner (T*K).
 */
#include "eaas/remote.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "kernels/ops.h"

typedef struct {
    char name[64];
    uint8_t *hosted;     /* owns: (n_layers, n_experts) */
    ea_ucx_mem *res;     /* owns: result region */
    ea_ucx_ep *ep;       /* owns */
    ea_ucx_remote *slot; /* owns */
    uint32_t id;
    atomic_int live;
    uint8_t *stage; /* owns: header + payload staging */
    uint64_t word;  /* the state word being put (kept until the flush) */
    uint64_t seq;   /* rises over every server this entry has held: a stale word never matches */
    int pending;    /* sent in this call, not answered yet */
    int resend;     /* its owned set grew: send again */
} rsrv;

/* Round-trip histogram bounds (seconds) of eaas:remote_roundtrip_seconds. */
static const double rt_bounds[] = {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1, 0.25, 1.0};
#define RT_N (sizeof rt_bounds / sizeof rt_bounds[0])

typedef struct {
    ea_moe_backend base;
    ea_remote_opts o;
    ea_ucx *u;
    pthread_mutex_t mu; /* guards n_sv and the entries' name and hosted for other threads (health) */
    rsrv *sv;           /* [max_servers] */
    int n_sv;           /* entries in use */
    int32_t *owner;
    double t_submit;
    atomic_uint_fast64_t calls, failovers, timeouts, refusals, failed_pairs;
    atomic_uint_fast64_t rt_count[RT_N + 1];
    _Atomic double rt_sum;
} remote;

static int hosts(const remote *R, int s, int layer, int expert) {
    return R->sv[s].hosted[(size_t)layer * R->o.n_experts + expert];
}

/* The live replicas of (layer, expert) share its pairs: the ((layer + expert)
 * mod n)-th of the n live servers hosting it, in table order; -1 if none. */
static int pick(const remote *R, int layer, int expert) {
    int n = 0;
    for (int s = 0; s < R->n_sv; s++) n += atomic_load(&R->sv[s].live) && hosts(R, s, layer, expert);
    if (n == 0) return -1;
    int want = (layer + expert) % n;
    for (int s = 0; s < R->n_sv; s++)
        if (atomic_load(&R->sv[s].live) && hosts(R, s, layer, expert) && want-- == 0) return s;
    return -1;
}

static void mark_dead(remote *R, int s, const char *why) {
    if (atomic_exchange(&R->sv[s].live, 0)) EA_LOGW("remote experts: server %s is gone: %s", R->sv[s].name, why);
}

/* Send server s its owned pairs of call c (ids of other servers' pairs as -1). */
static ea_status send_to(remote *R, int s, const ea_moe_call *c) {
    rsrv *v = &R->sv[s];
    int H = R->o.hidden, P = c->n_tokens * c->k;
    ea_slot_header h = {.seq = ++v->seq, .client = v->id, .layer = c->layer, .n_tokens = c->n_tokens, .k = c->k,
                        .hidden = H};
    uint8_t *st = v->stage;
    ea_slot_header_write(st, &h);
    memcpy(st + EA_SLOT_HEADER_BYTES, c->x, sizeof(float) * (size_t)c->n_tokens * H);
    int32_t *ids = (int32_t *)(st + EA_SLOT_HEADER_BYTES + sizeof(float) * (size_t)c->n_tokens * H);
    for (int p = 0; p < P; p++) ids[p] = R->owner[p] == s ? c->ids[p] : -1;
    v->word = ea_slot_word(EA_SLOT_WRITTEN, v->seq);
    EA_TRY(ea_ucx_put(v->slot, EA_SLOT_HEADER_OFF, st,
                      EA_SLOT_HEADER_BYTES + ea_slot_payload_bytes(c->n_tokens, c->k, H)));
    EA_TRY(ea_ucx_fence(R->u));
    EA_TRY(ea_ucx_put(v->slot, 0, &v->word, 8));
    EA_TRY(ea_ucx_flush(v->ep, R->o.timeout_s));
    v->pending = 1;
    v->resend = 0;
    return EA_OK;
}

/* Pairs of dead servers go to their next live replica (or -1); the servers that got pairs resend. */
static void reassign(remote *R, const ea_moe_call *c) {
    for (int p = 0; p < c->n_tokens * c->k; p++) {
        int s = R->owner[p];
        if (s < 0 || atomic_load(&R->sv[s].live)) continue;
        int t = pick(R, c->layer, c->ids[p]);
        R->owner[p] = t;
        if (t >= 0) R->sv[t].resend = 1;
        atomic_fetch_add(&R->failovers, 1);
    }
}

/* Send every server that has pairs and needs a (re)send; a failed send marks
 * it dead and reassigns. A server still computing an earlier send of this call
 * is sent again only after it answered (wait): the slot is the server's until
 * then (slot.h), and a put over it could be lost to the server's own state write. */
static void send_all(remote *R, const ea_moe_call *c) {
    for (int round = 0; round <= R->n_sv; round++) {
        int again = 0;
        for (int s = 0; s < R->n_sv; s++) {
            if (!R->sv[s].resend || R->sv[s].pending || !atomic_load(&R->sv[s].live)) continue;
            ea_status st = send_to(R, s, c);
            if (st != EA_OK) {
                if (st == EA_ERR_TIMEOUT) atomic_fetch_add(&R->timeouts, 1);
                mark_dead(R, s, ea_errmsg());
                R->sv[s].pending = 0;
                again = 1;
            }
        }
        if (!again) return;
        reassign(R, c);
    }
}

static ea_status remote_submit(ea_moe_backend *be, const ea_moe_call *c) {
    remote *R = (remote *)be;
    if (c->n_tokens > R->o.max_tokens || c->k > R->o.max_k || c->layer < 0 || c->layer >= R->o.n_layers)
        return ea_err(EA_ERR_RANGE, "remote experts: call of layer %d, %d tokens x %d slots exceeds %d x %d",
                      c->layer, c->n_tokens, c->k, R->o.max_tokens, R->o.max_k);
    if (R->o.sync) R->o.sync(R->o.sync_ctx, be);
    atomic_fetch_add(&R->calls, 1);
    R->t_submit = ea_now_s();
    for (int s = 0; s < R->n_sv; s++) R->sv[s].pending = R->sv[s].resend = 0;
    for (int p = 0; p < c->n_tokens * c->k; p++) {
        if (c->ids[p] < 0 || c->ids[p] >= R->o.n_experts)
            return ea_err(EA_ERR_RANGE, "remote experts: expert %d not in [0, %d)", c->ids[p], R->o.n_experts);
        R->owner[p] = pick(R, c->layer, c->ids[p]);
        if (R->owner[p] >= 0) R->sv[R->owner[p]].resend = 1;
    }
    send_all(R, c);
    return EA_OK;
}

static void observe_roundtrip(remote *R, double s) {
    size_t b = 0;
    while (b < RT_N && s > rt_bounds[b]) b++;
    atomic_fetch_add(&R->rt_count[b], 1);
    double old = atomic_load(&R->rt_sum);
    while (!atomic_compare_exchange_weak(&R->rt_sum, &old, old + s)) {
    }
}

static ea_status remote_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    remote *R = (remote *)be;
    int H = R->o.hidden, k = c->k;
    for (int round = 0; round <= 2 * R->n_sv; round++) { /* each round a server answers, or dies */
        double end = ea_now_s() + R->o.timeout_s;
        int left = 0;
        for (int s = 0; s < R->n_sv; s++) left += R->sv[s].pending;
        double t_spin = ea_now_s() + 20e-6;
        while (left > 0) {
            /* spin 20 us, then give the core away between polls: the servers
             * may share this machine's cores with us */
            if (ea_now_s() > t_spin) sched_yield();
            ea_ucx_progress(R->u);
            for (int s = 0; s < R->n_sv; s++) {
                rsrv *v = &R->sv[s];
                if (!v->pending) continue;
                uint64_t w = __atomic_load_n((const uint64_t *)ea_ucx_mem_ptr(v->res), __ATOMIC_ACQUIRE);
                if (ea_slot_word_seq(w) != (v->seq & EA_SLOT_SEQ_MASK)) continue; /* stale: an older answer */
                ea_slot_state st = ea_slot_word_state(w);
                if (st == EA_SLOT_COMPUTED) {
                    v->pending = 0;
                    left--;
                } else if (st == EA_SLOT_REFUSED || st == EA_SLOT_OFFLINE) {
                    uint32_t why;
                    memcpy(&why, (const uint8_t *)ea_ucx_mem_ptr(v->res) + 8, 4);
                    atomic_fetch_add(&R->refusals, 1);
                    char msg[96];
                    snprintf(msg, sizeof msg, "slot %s", st == EA_SLOT_OFFLINE ? "offline" : ea_slot_refusal_name(why));
                    mark_dead(R, s, msg);
                    v->pending = 0;
                    left--;
                }
            }
            if (left > 0 && ea_now_s() > end) {
                for (int s = 0; s < R->n_sv; s++)
                    if (R->sv[s].pending) {
                        atomic_fetch_add(&R->timeouts, 1);
                        mark_dead(R, s, "no answer within the deadline");
                        R->sv[s].pending = 0;
                    }
                left = 0;
            }
        }
        reassign(R, c);
        int resend = 0;
        for (int s = 0; s < R->n_sv; s++) resend |= R->sv[s].resend && atomic_load(&R->sv[s].live);
        if (!resend) break;
        send_all(R, c);
    }
    observe_roundtrip(R, ea_now_s() - R->t_submit);
    /* combine in slot order from 0.0f (moe.h), as moe_local.c does */
    for (int t = 0; t < c->n_tokens; t++) {
        float *yt = c->y + (size_t)t * H;
        memset(yt, 0, sizeof(float) * (size_t)H);
        for (int j = 0; j < k; j++) {
            int p = t * k + j, s = R->owner[p];
            if (s < 0) {
                atomic_fetch_add(&R->failed_pairs, 1);
                EA_TRY(ea_moe_outcome_fail(out, t, c->layer, c->ids[p], -1, "no live replica"));
                continue;
            }
            const float *o = (const float *)((const uint8_t *)ea_ucx_mem_ptr(R->sv[s].res) + EA_SLOT_RESULT_OUT_OFF);
            ea_k_axpy(c->w[p], o + (size_t)p * H, yt, H);
        }
    }
    return EA_OK;
}

static ea_moe_health remote_health(ea_moe_backend *be, char *why, size_t n) {
    remote *R = (remote *)be;
    ea_moe_health h = EA_MOE_OK;
    pthread_mutex_lock(&R->mu);
    if (R->n_sv == 0) {
        snprintf(why, n, "no expert server has connected");
        h = EA_MOE_DEGRADED;
    }
    for (int l = 0; l < R->o.n_layers && h == EA_MOE_OK; l++)
        for (int e = 0; e < R->o.n_experts && h == EA_MOE_OK; e++) {
            int hosted_anywhere = 0;
            for (int s = 0; s < R->n_sv; s++) hosted_anywhere |= hosts(R, s, l, e);
            if (hosted_anywhere && pick(R, l, e) < 0 && !(R->o.coming && R->o.coming(R->o.sync_ctx, l, e))) {
                snprintf(why, n, "layer %d expert %d has no live replica", l, e);
                h = EA_MOE_DEGRADED;
            }
        }
    pthread_mutex_unlock(&R->mu);
    return h;
}

static void roundtrip_prom(remote *R, ea_sbuf *prom) {
    ea_sbuf_printf(prom, "# HELP eaas:remote_roundtrip_seconds one MoE layer call to the expert servers, submit to "
                         "last answer\n# TYPE eaas:remote_roundtrip_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t b = 0; b <= RT_N; b++) {
        cum += atomic_load(&R->rt_count[b]);
        if (b < RT_N)
            ea_sbuf_printf(prom, "eaas:remote_roundtrip_seconds_bucket{le=\"%g\"} %llu\n", rt_bounds[b],
                           (unsigned long long)cum);
        else
            ea_sbuf_printf(prom, "eaas:remote_roundtrip_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    ea_sbuf_printf(prom, "eaas:remote_roundtrip_seconds_sum %.9f\neaas:remote_roundtrip_seconds_count %llu\n",
                   atomic_load(&R->rt_sum), (unsigned long long)cum);
}

static void remote_stats(ea_moe_backend *be, json_t *json, ea_sbuf *prom) {
    ea_remote_stats st;
    ea_remote_get_stats(be, &st);
    if (json)
        json_object_set_new(json, "remote",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:i}", "calls", (json_int_t)st.calls, "failovers",
                                      (json_int_t)st.failovers, "timeouts", (json_int_t)st.timeouts, "refusals",
                                      (json_int_t)st.refusals, "failed_pairs", (json_int_t)st.failed_pairs,
                                      "servers_live", st.servers_live));
    if (!prom) return;
    ea_sbuf_printf(prom,
                   "# HELP eaas:remote_failovers_total (token, slot) pairs moved to a replica\n"
                   "# TYPE eaas:remote_failovers_total counter\neaas:remote_failovers_total %llu\n"
                   "# HELP eaas:remote_timeouts_total expert server answers that missed the deadline\n"
                   "# TYPE eaas:remote_timeouts_total counter\neaas:remote_timeouts_total %llu\n"
                   "# HELP eaas:remote_failed_pairs_total (token, slot) pairs whose expert had no live replica\n"
                   "# TYPE eaas:remote_failed_pairs_total counter\neaas:remote_failed_pairs_total %llu\n"
                   "# HELP eaas:remote_servers_live expert servers this client sends work to\n"
                   "# TYPE eaas:remote_servers_live gauge\neaas:remote_servers_live %d\n",
                   (unsigned long long)st.failovers, (unsigned long long)st.timeouts,
                   (unsigned long long)st.failed_pairs, st.servers_live);
    roundtrip_prom((remote *)be, prom);
}

/* Closes entry s's connection (its result region and staging stay for reuse). */
static void close_server(rsrv *v) {
    ea_ucx_remote_close(v->slot);
    ea_ucx_disconnect(v->ep, 0.05);
    v->slot = NULL;
    v->ep = NULL;
}

static void remote_destroy(ea_moe_backend *be) {
    remote *R = (remote *)be;
    if (R->o.release) R->o.release(R->o.sync_ctx);
    for (int s = 0; R->sv && s < R->o.max_servers; s++) {
        close_server(&R->sv[s]);
        ea_ucx_mem_free(R->sv[s].res);
        ea_free(R->sv[s].stage);
        ea_free(R->sv[s].hosted);
    }
    ea_free(R->sv);
    ea_free(R->owner);
    ea_ucx_destroy(R->u);
    pthread_mutex_destroy(&R->mu);
    ea_free(R);
}

static const ea_moe_backend_vtable remote_vt = {.submit = remote_submit,
                                                .wait = remote_wait,
                                                .health = remote_health,
                                                .stats = remote_stats,
                                                .destroy = remote_destroy,
                                                .name = "remote",
                                                .fails = EA_MOE_FAILS_TOKENS};

ea_status ea_remote_create(const ea_remote_opts *o, ea_moe_backend **out) {
    *out = NULL;
    if (o->n_layers < 1 || o->n_experts < 1 || o->hidden < 1 || o->max_tokens < 1 || o->max_k < 1)
        return ea_err(EA_ERR_INVALID_ARG, "remote experts: incomplete options");
    remote *R = ea_calloc(1, sizeof *R);
    if (!R) return ea_err(EA_ERR_NOMEM, "remote experts");
    R->base.vt = &remote_vt;
    R->o = *o;
    if (R->o.timeout_s <= 0) R->o.timeout_s = 1.0;
    if (R->o.max_servers <= 0) R->o.max_servers = 64;
    pthread_mutex_init(&R->mu, NULL);
    R->sv = ea_calloc((size_t)R->o.max_servers, sizeof *R->sv);
    R->owner = ea_calloc((size_t)o->max_tokens * (size_t)o->max_k, sizeof(int32_t));
    ea_status st = !R->sv || !R->owner ? ea_err(EA_ERR_NOMEM, "remote experts") : ea_ucx_create(&R->u);
    if (st != EA_OK) {
        remote_destroy(&R->base);
        return st;
    }
    *out = &R->base;
    return EA_OK;
}

/* An entry for a new server: an unused one, else a dead one, closed and with
 * a new result region (a hung server that comes back must not write into the
 * next one's: its key dies with the old region); -1 if all are live. */
static int free_entry(remote *R) {
    if (R->n_sv < R->o.max_servers) return R->n_sv;
    for (int s = 0; s < R->n_sv; s++)
        if (!atomic_load(&R->sv[s].live)) {
            close_server(&R->sv[s]);
            ea_ucx_mem_free(R->sv[s].res);
            R->sv[s].res = NULL;
            return s;
        }
    return -1;
}

/* Entry s's buffers, made once and kept when the entry is reused. */
static ea_status entry_buffers(remote *R, rsrv *v) {
    size_t hb = (size_t)R->o.n_layers * R->o.n_experts;
    size_t sb = EA_SLOT_HEADER_BYTES + ea_slot_payload_bytes(R->o.max_tokens, R->o.max_k, R->o.hidden);
    if (!v->hosted && !(v->hosted = ea_malloc(hb))) return ea_err(EA_ERR_NOMEM, "remote experts: hosted table");
    if (!v->stage && !(v->stage = ea_malloc(sb))) return ea_err(EA_ERR_NOMEM, "remote experts: staging");
    if (!v->res) EA_TRY(ea_ucx_mem_alloc(R->u, ea_slot_result_bytes(R->o.max_tokens, R->o.max_k, R->o.hidden), &v->res));
    memset(ea_ucx_mem_ptr(v->res), 0, EA_SLOT_RESULT_OUT_OFF); /* no word of the entry's last server is read again */
    return EA_OK;
}

ea_status ea_remote_add_server(ea_moe_backend *be, const char *name, const uint8_t *hosted,
                               ea_remote_connect_fn connect, void *ctx, int *index) {
    remote *R = (remote *)be;
    int s = free_entry(R);
    if (s < 0) return ea_err(EA_ERR_RANGE, "remote experts: %d servers are live, no room for %s", R->n_sv, name);
    rsrv *v = &R->sv[s];
    EA_TRY(entry_buffers(R, v));
    ea_remote_hello me = {.result_addr = ea_ucx_mem_addr(v->res),
                          .result_bytes = ea_ucx_mem_size(v->res)};
    ea_ucx_address(R->u, &me.addr, &me.addr_len);
    ea_ucx_mem_rkey(v->res, &me.rkey, &me.rkey_len);
    ea_xsrv_slot_info si;
    EA_TRY(connect(ctx, &me, &si));
    ea_status st = ea_ucx_connect(R->u, si.server_addr, si.server_addr_len, &v->ep);
    if (st == EA_OK) st = ea_ucx_remote_open(v->ep, si.slot_addr, si.slot_bytes, si.rkey, si.rkey_len, &v->slot);
    if (st != EA_OK) {
        close_server(v);
        return st;
    }
    pthread_mutex_lock(&R->mu);
    snprintf(v->name, sizeof v->name, "%s", name);
    memcpy(v->hosted, hosted, (size_t)R->o.n_layers * R->o.n_experts);
    v->id = si.client;
    atomic_store(&v->live, 1);
    if (s == R->n_sv) R->n_sv++;
    pthread_mutex_unlock(&R->mu);
    *index = s;
    EA_LOGI("remote experts: server %s connected (client id %u)", v->name, v->id);
    return EA_OK;
}

void ea_remote_get_stats(ea_moe_backend *be, ea_remote_stats *out) {
    remote *R = (remote *)be;
    out->calls = atomic_load(&R->calls);
    out->failovers = atomic_load(&R->failovers);
    out->timeouts = atomic_load(&R->timeouts);
    out->refusals = atomic_load(&R->refusals);
    out->failed_pairs = atomic_load(&R->failed_pairs);
    out->servers_live = 0;
    for (int s = 0; s < R->n_sv; s++) out->servers_live += atomic_load(&R->sv[s].live);
}

int ea_remote_server_live(ea_moe_backend *be, int server) {
    remote *R = (remote *)be;
    return server >= 0 && server < R->n_sv && atomic_load(&R->sv[server].live);
}

void ea_remote_server_dead(ea_moe_backend *be, int server) {
    remote *R = (remote *)be;
    if (server >= 0 && server < R->n_sv) mark_dead(R, server, "monitor notice");
}
