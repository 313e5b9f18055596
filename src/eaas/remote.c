/*
 * remote.c — the remote MoE backend (see remote.h).
 *
 * State of a call (from submit to wait): owner[p] is the server running pair
 * p (-1: no live replica); a server with pairs is sent its WHOLE owned set,
 * and when failover moves more pairs to it, it is sent its whole set again
 * under a new sequence number — its result region holds one answer at a
 * time, and recomputing a pair gives the same bits.
 *
 * Lanes (double-batch overlap, moe.h): with opts.lanes = 2 the client holds
 * two connections to every server — two slots there, two result regions
 * here, each with its own sequence numbers — and a call's state (owner,
 * pending, resend) is per lane, so a call of each lane can be in flight at
 * once. To the server the two lanes are two clients; the wire is the same.
 *
 * Buffers (at create): per server and lane a result region (UCX) and a
 * staging copy of header + payload (kept until the put's flush); per lane
 * owner (T*K).
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

/* One connection to a server: its slot there, our result region here. */
typedef struct {
    ea_ucx_mem *res;     /* owns: result region */
    ea_ucx_ep *ep;       /* owns */
    ea_ucx_remote *slot; /* owns */
    uint32_t id;         /* the client id the server gave this slot */
    uint8_t *stage;      /* owns: header + payload staging */
    uint64_t word;       /* the state word being put (kept until the flush) */
    uint64_t seq;        /* rises over every server this entry has held: a stale word never matches */
    int pending;         /* sent in this lane's call, not answered yet */
    int resend;          /* its owned set grew: send again */
} rlane;

typedef struct {
    char name[64];
    uint8_t *hosted; /* owns: (n_layers, n_experts) */
    atomic_int live;
    rlane ln[EA_MOE_MAX_LANES];
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
    int32_t *owner[EA_MOE_MAX_LANES];  /* per lane: the server of each pair of the call in flight */
    double t_submit[EA_MOE_MAX_LANES];
    int in_flight[EA_MOE_MAX_LANES];   /* submitted, not waited for */
    int32_t *per_expert, *nth;         /* place(): [2][n_experts] pairs and chunks of each expert; [n_experts] placed */
    atomic_uint_least32_t *load;       /* [n_layers][n_experts]: pairs routed since ea_remote_take_load */
    atomic_uint_fast64_t calls, failovers, timeouts, refusals, failed_pairs, overlapped, splits;
    atomic_uint_fast64_t rt_count[RT_N + 1];
    _Atomic double rt_sum;
} remote;

static int hosts(const remote *R, int s, int layer, int expert) {
    return R->sv[s].hosted[(size_t)layer * R->o.n_experts + expert];
}

/* Live servers hosting (layer, expert). */
static int replicas(const remote *R, int layer, int expert) {
    int n = 0;
    for (int s = 0; s < R->n_sv; s++) n += atomic_load(&R->sv[s].live) && hosts(R, s, layer, expert);
    return n;
}

/* The live replicas of (layer, expert) share its pairs: chunk c of call
 * `turn`'s pairs of the expert goes to the ((layer + expert + salt + turn + c)
 * mod n)-th of the n live servers hosting it, in table order; -1 if none. */
static int pick(const remote *R, int layer, int expert, uint32_t turn) {
    int n = replicas(R, layer, expert);
    if (n == 0) return -1;
    int want = (int)(((uint32_t)layer + (uint32_t)expert + R->o.salt + turn) % (uint32_t)n);
    for (int s = 0; s < R->n_sv; s++)
        if (atomic_load(&R->sv[s].live) && hosts(R, s, layer, expert) && want-- == 0) return s;
    return -1;
}

static void mark_dead(remote *R, int s, const char *why) {
    if (atomic_exchange(&R->sv[s].live, 0)) EA_LOGW("remote experts: server %s is gone: %s", R->sv[s].name, why);
}

/* Send server s its owned pairs of call c (ids of other servers' pairs as -1), on c's lane. */
static ea_status send_to(remote *R, int s, const ea_moe_call *c) {
    rlane *v = &R->sv[s].ln[c->lane];
    const int32_t *owner = R->owner[c->lane];
    int H = R->o.hidden, P = c->n_tokens * c->k;
    ea_slot_header h = {.seq = ++v->seq, .client = v->id, .layer = c->layer, .n_tokens = c->n_tokens, .k = c->k,
                        .hidden = H};
    uint8_t *st = v->stage;
    ea_slot_header_write(st, &h);
    memcpy(st + EA_SLOT_HEADER_BYTES, c->x, sizeof(float) * (size_t)c->n_tokens * H);
    int32_t *ids = (int32_t *)(st + EA_SLOT_HEADER_BYTES + sizeof(float) * (size_t)c->n_tokens * H);
    for (int p = 0; p < P; p++) ids[p] = owner[p] == s ? c->ids[p] : -1;
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
    int32_t *owner = R->owner[c->lane];
    for (int p = 0; p < c->n_tokens * c->k; p++) {
        int s = owner[p];
        if (s < 0 || atomic_load(&R->sv[s].live)) continue;
        int t = pick(R, c->layer, c->ids[p], 0);
        owner[p] = t;
        if (t >= 0) R->sv[t].ln[c->lane].resend = 1;
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
            rlane *v = &R->sv[s].ln[c->lane];
            if (!v->resend || v->pending || !atomic_load(&R->sv[s].live)) continue;
            ea_status st = send_to(R, s, c);
            if (st != EA_OK) {
                if (st == EA_ERR_TIMEOUT) atomic_fetch_add(&R->timeouts, 1);
                mark_dead(R, s, ea_errmsg());
                v->pending = 0;
                again = 1;
            }
        }
        if (!again) return;
        reassign(R, c);
    }
}

/* Owners of a call's pairs. An expert with r live replicas and n pairs in the
 * call is cut into min(r, ceil(n / EA_REMOTE_SPLIT_MIN)) chunks of
 * consecutive pairs, each to its own replica: a hot expert's many tokens
 * share its replicas, while a few tokens stay on one server (which then
 * reads the expert's weights once) — the next call's on the next replica, so
 * over a run of decode steps each replica takes its share too. Counts the
 * pairs for the load report. */
static void place(remote *R, const ea_moe_call *c, int32_t *owner) {
    int P = c->n_tokens * c->k, E = R->o.n_experts;
    uint32_t turn = (uint32_t)atomic_load(&R->calls); /* successive calls start at successive replicas */
    int32_t *n = R->per_expert, *chunks = R->per_expert + E, *seen = R->nth;
    memset(R->per_expert, 0, 2 * sizeof(int32_t) * (size_t)E);
    memset(seen, 0, sizeof(int32_t) * (size_t)E);
    for (int p = 0; p < P; p++) n[c->ids[p]]++;
    for (int e = 0; e < E; e++) {
        if (!n[e]) continue;
        atomic_fetch_add_explicit(&R->load[(size_t)c->layer * E + e], (uint32_t)n[e], memory_order_relaxed);
        int r = replicas(R, c->layer, e), want = (n[e] + EA_REMOTE_SPLIT_MIN - 1) / EA_REMOTE_SPLIT_MIN;
        chunks[e] = want < r ? want : r > 0 ? r : 1;
        if (chunks[e] > 1) atomic_fetch_add(&R->splits, 1);
    }
    for (int p = 0; p < P; p++) { /* the i-th pair of expert e is in chunk i * chunks / n */
        int e = c->ids[p];
        owner[p] = pick(R, c->layer, e, turn + (uint32_t)((int64_t)seen[e]++ * chunks[e] / n[e]));
        if (owner[p] >= 0) R->sv[owner[p]].ln[c->lane].resend = 1;
    }
}

static ea_status remote_submit(ea_moe_backend *be, const ea_moe_call *c) {
    remote *R = (remote *)be;
    if (c->n_tokens > R->o.max_tokens || c->k > R->o.max_k || c->layer < 0 || c->layer >= R->o.n_layers)
        return ea_err(EA_ERR_RANGE, "remote experts: call of layer %d, %d tokens x %d slots exceeds %d x %d",
                      c->layer, c->n_tokens, c->k, R->o.max_tokens, R->o.max_k);
    if (c->lane < 0 || c->lane >= R->o.lanes || R->in_flight[c->lane])
        return ea_err(EA_ERR_INVALID_ARG, "remote experts: lane %d of %d %s", c->lane, R->o.lanes,
                      c->lane < 0 || c->lane >= R->o.lanes ? "does not exist" : "has a call in flight");
    for (int p = 0; p < c->n_tokens * c->k; p++)
        if (c->ids[p] < 0 || c->ids[p] >= R->o.n_experts)
            return ea_err(EA_ERR_RANGE, "remote experts: expert %d not in [0, %d)", c->ids[p], R->o.n_experts);
    /* membership changes only while no call is in flight: a call's owners name entries a new server may reuse */
    int busy = 0;
    for (int i = 0; i < R->o.lanes; i++) busy |= R->in_flight[i];
    if (R->o.sync && !busy) R->o.sync(R->o.sync_ctx, be);
    atomic_fetch_add(&R->calls, 1);
    if (busy) atomic_fetch_add(&R->overlapped, 1);
    R->t_submit[c->lane] = ea_now_s();
    R->in_flight[c->lane] = 1;
    int32_t *owner = R->owner[c->lane];
    for (int s = 0; s < R->n_sv; s++) R->sv[s].ln[c->lane].pending = R->sv[s].ln[c->lane].resend = 0;
    place(R, c, owner);
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
    int H = R->o.hidden, k = c->k, lane = c->lane;
    if (lane < 0 || lane >= R->o.lanes || !R->in_flight[lane])
        return ea_err(EA_ERR_INVALID_ARG, "remote experts: wait on lane %d with no call in flight", lane);
    R->in_flight[lane] = 0;
    for (int round = 0; round <= 2 * R->n_sv; round++) { /* each round a server answers, or dies */
        double end = ea_now_s() + R->o.timeout_s;
        int left = 0;
        for (int s = 0; s < R->n_sv; s++) left += R->sv[s].ln[lane].pending;
        double t_spin = ea_now_s() + 20e-6;
        while (left > 0) {
            /* spin 20 us, then give the core away between polls: the servers
             * may share this machine's cores with us */
            if (ea_now_s() > t_spin) sched_yield();
            ea_ucx_progress(R->u);
            for (int s = 0; s < R->n_sv; s++) {
                rlane *v = &R->sv[s].ln[lane];
                if (!v->pending) continue;
                if (!atomic_load(&R->sv[s].live)) { /* the other lane's wait gave it up: reassign now */
                    v->pending = 0;
                    left--;
                    continue;
                }
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
                    if (R->sv[s].ln[lane].pending) {
                        atomic_fetch_add(&R->timeouts, 1);
                        mark_dead(R, s, "no answer within the deadline");
                        R->sv[s].ln[lane].pending = 0;
                    }
                left = 0;
            }
        }
        reassign(R, c);
        int resend = 0;
        for (int s = 0; s < R->n_sv; s++) resend |= R->sv[s].ln[lane].resend && atomic_load(&R->sv[s].live);
        if (!resend) break;
        send_all(R, c);
    }
    observe_roundtrip(R, ea_now_s() - R->t_submit[lane]);
    const int32_t *owner = R->owner[lane];
    /* combine in slot order from 0.0f (moe.h), as moe_local.c does */
    for (int t = 0; t < c->n_tokens; t++) {
        float *yt = c->y + (size_t)t * H;
        memset(yt, 0, sizeof(float) * (size_t)H);
        for (int j = 0; j < k; j++) {
            int p = t * k + j, s = owner[p];
            if (s < 0) {
                atomic_fetch_add(&R->failed_pairs, 1);
                EA_TRY(ea_moe_outcome_fail(out, t, c->layer, c->ids[p], -1, "no live replica"));
                continue;
            }
            const float *o = (const float *)((const uint8_t *)ea_ucx_mem_ptr(R->sv[s].ln[lane].res) + EA_SLOT_RESULT_OUT_OFF);
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
            if (hosted_anywhere && pick(R, l, e, 0) < 0 && !(R->o.coming && R->o.coming(R->o.sync_ctx, l, e))) {
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
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i}", "calls", (json_int_t)st.calls,
                                      "overlapped", (json_int_t)st.overlapped, "failovers", (json_int_t)st.failovers,
                                      "timeouts", (json_int_t)st.timeouts, "refusals", (json_int_t)st.refusals,
                                      "failed_pairs", (json_int_t)st.failed_pairs, "replica_splits", (json_int_t)st.splits,
                                      "servers_live", st.servers_live));
    if (!prom) return;
    ea_sbuf_printf(prom,
                   "# HELP eaas:remote_calls_total MoE layer calls sent to the expert servers\n"
                   "# TYPE eaas:remote_calls_total counter\neaas:remote_calls_total %llu\n"
                   "# HELP eaas:remote_overlapped_calls_total calls sent while the other micro-batch's call was in "
                   "flight (double-batch overlap)\n"
                   "# TYPE eaas:remote_overlapped_calls_total counter\neaas:remote_overlapped_calls_total %llu\n"
                   "# HELP eaas:remote_failovers_total (token, slot) pairs moved to a replica\n"
                   "# TYPE eaas:remote_failovers_total counter\neaas:remote_failovers_total %llu\n"
                   "# HELP eaas:remote_timeouts_total expert server answers that missed the deadline\n"
                   "# TYPE eaas:remote_timeouts_total counter\neaas:remote_timeouts_total %llu\n"
                   "# HELP eaas:remote_failed_pairs_total (token, slot) pairs whose expert had no live replica\n"
                   "# TYPE eaas:remote_failed_pairs_total counter\neaas:remote_failed_pairs_total %llu\n"
                   "# HELP eaas:remote_replica_splits_total experts of a call whose pairs were cut over several replicas\n"
                   "# TYPE eaas:remote_replica_splits_total counter\neaas:remote_replica_splits_total %llu\n"
                   "# HELP eaas:remote_servers_live expert servers this client sends work to\n"
                   "# TYPE eaas:remote_servers_live gauge\neaas:remote_servers_live %d\n",
                   (unsigned long long)st.calls, (unsigned long long)st.overlapped,
                   (unsigned long long)st.failovers, (unsigned long long)st.timeouts,
                   (unsigned long long)st.failed_pairs, (unsigned long long)st.splits, st.servers_live);
    roundtrip_prom((remote *)be, prom);
}

/* Closes entry s's connections (their result regions and staging stay for reuse). */
static void close_server(rsrv *v) {
    for (int i = 0; i < EA_MOE_MAX_LANES; i++) {
        ea_ucx_remote_close(v->ln[i].slot);
        ea_ucx_disconnect(v->ln[i].ep, 0.05);
        v->ln[i].slot = NULL;
        v->ln[i].ep = NULL;
    }
}

static void remote_destroy(ea_moe_backend *be) {
    remote *R = (remote *)be;
    if (R->o.release) R->o.release(R->o.sync_ctx);
    for (int s = 0; R->sv && s < R->o.max_servers; s++) {
        close_server(&R->sv[s]);
        for (int i = 0; i < EA_MOE_MAX_LANES; i++) {
            ea_ucx_mem_free(R->sv[s].ln[i].res);
            ea_free(R->sv[s].ln[i].stage);
        }
        ea_free(R->sv[s].hosted);
    }
    ea_free(R->sv);
    for (int i = 0; i < EA_MOE_MAX_LANES; i++) ea_free(R->owner[i]);
    ea_free(R->per_expert), ea_free(R->nth), ea_free(R->load);
    ea_ucx_destroy(R->u);
    pthread_mutex_destroy(&R->mu);
    ea_free(R);
}

static int remote_lanes(ea_moe_backend *be) { return ((remote *)be)->o.lanes; }

static const ea_moe_backend_vtable remote_vt = {.submit = remote_submit,
                                                .wait = remote_wait,
                                                .lanes = remote_lanes,
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
    R->o.lanes = o->lanes < 1 ? 1 : o->lanes > EA_MOE_MAX_LANES ? EA_MOE_MAX_LANES : o->lanes;
    pthread_mutex_init(&R->mu, NULL);
    R->sv = ea_calloc((size_t)R->o.max_servers, sizeof *R->sv);
    int ok = R->sv != NULL;
    for (int i = 0; i < R->o.lanes; i++)
        ok &= (R->owner[i] = ea_calloc((size_t)o->max_tokens * (size_t)o->max_k, sizeof(int32_t))) != NULL;
    ok &= (R->per_expert = ea_calloc(2 * (size_t)o->n_experts, sizeof(int32_t))) != NULL;
    ok &= (R->nth = ea_calloc((size_t)o->n_experts, sizeof(int32_t))) != NULL;
    ok &= (R->load = ea_calloc((size_t)o->n_layers * (size_t)o->n_experts, sizeof *R->load)) != NULL;
    ea_status st = !ok ? ea_err(EA_ERR_NOMEM, "remote experts") : ea_ucx_create(&R->u);
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
            for (int i = 0; i < EA_MOE_MAX_LANES; i++) {
                ea_ucx_mem_free(R->sv[s].ln[i].res);
                R->sv[s].ln[i].res = NULL;
            }
            return s;
        }
    return -1;
}

/* Entry s's buffers, made once and kept when the entry is reused. */
static ea_status entry_buffers(remote *R, rsrv *v) {
    size_t hb = (size_t)R->o.n_layers * R->o.n_experts;
    size_t sb = EA_SLOT_HEADER_BYTES + ea_slot_payload_bytes(R->o.max_tokens, R->o.max_k, R->o.hidden);
    if (!v->hosted && !(v->hosted = ea_malloc(hb))) return ea_err(EA_ERR_NOMEM, "remote experts: hosted table");
    for (int i = 0; i < R->o.lanes; i++) {
        rlane *l = &v->ln[i];
        if (!l->stage && !(l->stage = ea_malloc(sb))) return ea_err(EA_ERR_NOMEM, "remote experts: staging");
        if (!l->res)
            EA_TRY(ea_ucx_mem_alloc(R->u, ea_slot_result_bytes(R->o.max_tokens, R->o.max_k, R->o.hidden), &l->res));
        memset(ea_ucx_mem_ptr(l->res), 0, EA_SLOT_RESULT_OUT_OFF); /* no word of the entry's last server is read again */
    }
    return EA_OK;
}

/* Connects lane l of entry v: our side goes to connect(), the server's slot comes back. */
static ea_status connect_lane(remote *R, rlane *l, int lane, ea_remote_connect_fn connect, void *ctx) {
    ea_remote_hello me = {.result_addr = ea_ucx_mem_addr(l->res), .result_bytes = ea_ucx_mem_size(l->res),
                          .lane = lane};
    ea_ucx_address(R->u, &me.addr, &me.addr_len);
    ea_ucx_mem_rkey(l->res, &me.rkey, &me.rkey_len);
    ea_xsrv_slot_info si;
    EA_TRY(connect(ctx, &me, &si));
    EA_TRY(ea_ucx_connect(R->u, si.server_addr, si.server_addr_len, &l->ep));
    EA_TRY(ea_ucx_remote_open(l->ep, si.slot_addr, si.slot_bytes, si.rkey, si.rkey_len, &l->slot));
    l->id = si.client;
    return EA_OK;
}

ea_status ea_remote_add_server(ea_moe_backend *be, const char *name, const uint8_t *hosted,
                               ea_remote_connect_fn connect, void *ctx, int *index) {
    remote *R = (remote *)be;
    int s = free_entry(R);
    if (s < 0) return ea_err(EA_ERR_RANGE, "remote experts: %d servers are live, no room for %s", R->n_sv, name);
    rsrv *v = &R->sv[s];
    EA_TRY(entry_buffers(R, v));
    ea_status st = EA_OK;
    for (int i = 0; i < R->o.lanes && st == EA_OK; i++) st = connect_lane(R, &v->ln[i], i, connect, ctx);
    if (st != EA_OK) {
        close_server(v);
        return st;
    }
    pthread_mutex_lock(&R->mu);
    snprintf(v->name, sizeof v->name, "%s", name);
    memcpy(v->hosted, hosted, (size_t)R->o.n_layers * R->o.n_experts);
    atomic_store(&v->live, 1);
    if (s == R->n_sv) R->n_sv++;
    pthread_mutex_unlock(&R->mu);
    *index = s;
    EA_LOGI("remote experts: server %s connected (client id %u%s)", v->name, v->ln[0].id,
            R->o.lanes > 1 ? ", and a second slot for double-batch overlap" : "");
    return EA_OK;
}

void ea_remote_get_stats(ea_moe_backend *be, ea_remote_stats *out) {
    remote *R = (remote *)be;
    out->calls = atomic_load(&R->calls);
    out->failovers = atomic_load(&R->failovers);
    out->timeouts = atomic_load(&R->timeouts);
    out->refusals = atomic_load(&R->refusals);
    out->failed_pairs = atomic_load(&R->failed_pairs);
    out->overlapped = atomic_load(&R->overlapped);
    out->splits = atomic_load(&R->splits);
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

void ea_remote_set_hosted(ea_moe_backend *be, int server, const uint8_t *hosted) {
    remote *R = (remote *)be;
    if (server < 0 || server >= R->n_sv) return;
    pthread_mutex_lock(&R->mu);
    memcpy(R->sv[server].hosted, hosted, (size_t)R->o.n_layers * R->o.n_experts);
    pthread_mutex_unlock(&R->mu);
}

int ea_remote_take_load(ea_moe_backend *be, uint32_t *out) {
    remote *R = (remote *)be;
    int nz = 0;
    for (size_t i = 0; i < (size_t)R->o.n_layers * R->o.n_experts; i++)
        nz += (out[i] = atomic_exchange_explicit(&R->load[i], 0, memory_order_relaxed)) != 0;
    return nz;
}
