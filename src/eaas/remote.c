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

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "kernels/ops.h"

typedef struct {
    ea_ucx_mem *res;     /* owns: result region */
    ea_ucx_ep *ep;       /* owns */
    ea_ucx_remote *slot; /* owns */
    uint32_t id;
    atomic_int live;
    uint8_t *stage; /* owns: header + payload staging */
    uint64_t word;  /* the state word being put (kept until the flush) */
    uint64_t seq;
    int pending;    /* sent in this call, not answered yet */
    int resend;     /* its owned set grew: send again */
} rsrv;

typedef struct {
    ea_moe_backend base;
    ea_remote_opts o;
    ea_ucx *u;
    rsrv *sv;
    int32_t *owner;
    atomic_uint_fast64_t calls, failovers, timeouts, refusals, failed_pairs;
} remote;

static int pick(const remote *R, int layer, int expert) {
    for (int s = 0; s < R->o.n_servers; s++)
        if (atomic_load(&R->sv[s].live) && R->o.hosted[s][(size_t)layer * R->o.n_experts + expert]) return s;
    return -1;
}

static void mark_dead(remote *R, int s, const char *why) {
    if (atomic_exchange(&R->sv[s].live, 0)) EA_LOGW("remote experts: server %d is gone: %s", s, why);
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

/* Send every server that has pairs and needs a (re)send; a failed send marks it dead and reassigns. */
static void send_all(remote *R, const ea_moe_call *c) {
    for (int round = 0; round <= R->o.n_servers; round++) {
        int again = 0;
        for (int s = 0; s < R->o.n_servers; s++) {
            if (!R->sv[s].resend || !atomic_load(&R->sv[s].live)) continue;
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
    atomic_fetch_add(&R->calls, 1);
    for (int s = 0; s < R->o.n_servers; s++) R->sv[s].pending = R->sv[s].resend = 0;
    for (int p = 0; p < c->n_tokens * c->k; p++) {
        if (c->ids[p] < 0 || c->ids[p] >= R->o.n_experts)
            return ea_err(EA_ERR_RANGE, "remote experts: expert %d not in [0, %d)", c->ids[p], R->o.n_experts);
        R->owner[p] = pick(R, c->layer, c->ids[p]);
        if (R->owner[p] >= 0) R->sv[R->owner[p]].resend = 1;
    }
    send_all(R, c);
    return EA_OK;
}

static ea_status remote_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    remote *R = (remote *)be;
    int H = R->o.hidden, k = c->k;
    for (int round = 0; round <= R->o.n_servers; round++) {
        double end = ea_now_s() + R->o.timeout_s;
        int left = 0;
        for (int s = 0; s < R->o.n_servers; s++) left += R->sv[s].pending;
        while (left > 0) {
            ea_ucx_progress(R->u);
            for (int s = 0; s < R->o.n_servers; s++) {
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
                for (int s = 0; s < R->o.n_servers; s++)
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
        for (int s = 0; s < R->o.n_servers; s++) resend |= R->sv[s].resend;
        if (!resend) break;
        send_all(R, c);
    }
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
    for (int l = 0; l < R->o.n_layers; l++)
        for (int e = 0; e < R->o.n_experts; e++) {
            int hosted_anywhere = 0;
            for (int s = 0; s < R->o.n_servers; s++) hosted_anywhere |= R->o.hosted[s][(size_t)l * R->o.n_experts + e];
            if (hosted_anywhere && pick(R, l, e) < 0) {
                snprintf(why, n, "layer %d expert %d has no live replica", l, e);
                return EA_MOE_DEGRADED;
            }
        }
    return EA_MOE_OK;
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
    if (prom)
        ea_sbuf_printf(prom,
                       "# HELP eaas:remote_failovers_total (token, slot) pairs moved to a replica\n"
                       "# TYPE eaas:remote_failovers_total counter\neaas:remote_failovers_total %llu\n"
                       "# HELP eaas:remote_timeouts_total expert server answers that missed the deadline\n"
                       "# TYPE eaas:remote_timeouts_total counter\neaas:remote_timeouts_total %llu\n",
                       (unsigned long long)st.failovers, (unsigned long long)st.timeouts);
}

static void remote_destroy(ea_moe_backend *be) {
    remote *R = (remote *)be;
    for (int s = 0; R->sv && s < R->o.n_servers; s++) {
        ea_ucx_remote_close(R->sv[s].slot);
        ea_ucx_disconnect(R->sv[s].ep, 0.2);
        ea_ucx_mem_free(R->sv[s].res);
        ea_free(R->sv[s].stage);
    }
    ea_free(R->sv);
    ea_free(R->owner);
    ea_ucx_destroy(R->u);
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
    if (o->n_servers < 1 || !o->hosted || !o->connect || o->hidden < 1 || o->max_tokens < 1 || o->max_k < 1)
        return ea_err(EA_ERR_INVALID_ARG, "remote experts: incomplete options");
    remote *R = ea_calloc(1, sizeof *R);
    if (!R) return ea_err(EA_ERR_NOMEM, "remote experts");
    R->base.vt = &remote_vt;
    R->o = *o;
    if (R->o.timeout_s <= 0) R->o.timeout_s = 1.0;
    R->sv = ea_calloc((size_t)o->n_servers, sizeof *R->sv);
    R->owner = ea_calloc((size_t)o->max_tokens * (size_t)o->max_k, sizeof(int32_t));
    ea_status st = !R->sv || !R->owner ? ea_err(EA_ERR_NOMEM, "remote experts") : ea_ucx_create(&R->u);
    size_t rb = ea_slot_result_bytes(o->max_tokens, o->max_k, o->hidden);
    size_t sb = EA_SLOT_HEADER_BYTES + ea_slot_payload_bytes(o->max_tokens, o->max_k, o->hidden);
    for (int s = 0; st == EA_OK && s < o->n_servers; s++) {
        rsrv *v = &R->sv[s];
        if (!(v->stage = ea_malloc(sb))) st = ea_err(EA_ERR_NOMEM, "remote experts: staging");
        if (st == EA_OK) st = ea_ucx_mem_alloc(R->u, rb, &v->res);
        if (st != EA_OK) break;
        ea_remote_hello me = {.result_addr = ea_ucx_mem_addr(v->res), .result_bytes = rb};
        ea_ucx_address(R->u, &me.addr, &me.addr_len);
        ea_ucx_mem_rkey(v->res, &me.rkey, &me.rkey_len);
        ea_xsrv_slot_info si;
        if ((st = o->connect(o->connect_ctx, s, &me, &si)) != EA_OK) break;
        v->id = si.client;
        if ((st = ea_ucx_connect(R->u, si.server_addr, si.server_addr_len, &v->ep)) == EA_OK)
            st = ea_ucx_remote_open(v->ep, si.slot_addr, si.slot_bytes, si.rkey, si.rkey_len, &v->slot);
        atomic_store(&v->live, st == EA_OK);
    }
    if (st != EA_OK) {
        remote_destroy(&R->base);
        return st;
    }
    *out = &R->base;
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
    for (int s = 0; s < R->o.n_servers; s++) out->servers_live += atomic_load(&R->sv[s].live);
}

void ea_remote_server_dead(ea_moe_backend *be, int server) {
    remote *R = (remote *)be;
    if (server >= 0 && server < R->o.n_servers) mark_dead(R, server, "monitor notice");
}
