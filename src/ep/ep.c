/*
 * ep.c — the `ep` backend; see ep.h for the three steps and the record format.
 *
 * Scratch (allocated at create for P = max_tokens * max_k pairs, H = hidden):
 *   prow, pexp, pidx (P)      this rank's pairs: token row, slot, pair index
 *   cnt (size)                pairs per rank this call
 *   bytes (size)              record bytes per rank (allgatherv counts)
 *   mine (P, H)               this rank's expert outputs, pair order
 *   send (cap, 1+H)           this rank's records of one combine round
 *   recv (size * cap, 1+H)    every rank's records of one round, rank order
 *   out (P, H)                every pair's output row, by pair index
 *   got (P)                   pair index seen (each exactly once)
 * cap = ceil(capacity_factor * max_tokens * max_k / size): the exchange
 * buffers are sized for the capacity factor, and a call whose pairs on some
 * rank exceed its capacity takes more rounds (ea__ep_combine).
 * A call allocates nothing. The sum order is fixed (slot order per token), so
 * y does not depend on which rank computed which pair.
 *
 * Weight moves (apply_placement, EPLB across ranks): see ea__ep_apply.
 */
#include "ep/ep.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "kernels/ops.h"
#include "moe/moe_local.h"

/* ------------------------------------------------------------ backend */

typedef struct {
    ea_moe_backend base;
    ea_ep_opts o;          /* place and experts: not kept (borrowed during create) */
    int n_slots, per_rank; /* the placement's shape: slot p is on rank p / per_rank */
    ea_dist *d;
    int rank, size;
    ea_moe_backend *local; /* owns: only this rank's experts */
    int32_t *prow, *pexp, *pidx, *cnt;
    size_t *bytes;
    int cap;               /* records per rank per combine round the buffers hold */
    /* dp_attention (ea__ep_dp_call): P = max pairs of one rank's call */
    int64_t *dp_cnt;       /* (3, size): pairs to each rank, from each rank, fill offsets */
    size_t *sc, *rc;       /* (size) each: alltoallv byte counts */
    float *dsend;          /* (P, H+2) own dispatch records, by destination rank */
    float *drecv;          /* (size * P, H+2) the records this rank computes */
    float *dp_x, *dp_y;    /* (size * P, H) their rows and outputs */
    int32_t *dp_row, *dp_slot; /* (size * P) */
    float *csend;          /* (size * P, H+1) outputs back to their sources */
    float *crecv;          /* (P, H+1) own pairs' outputs */
    float *mine, *send, *recv, *out;
    uint8_t *got;
    uint64_t *slot_tokens; /* (n_layers, n_slots) */
    /* weight moves */
    int *moe_of;           /* model layer -> MoE layer index (-1: dense) */
    ea_eplb_meta place;    /* owns: the placement the slots hold now */
    ea_eplb_meta next;     /* owns: the one being switched to (one layer at a time) */
    void **own;            /* (n_layers, n_slots): memory of a slot filled by a move; NULL: the model's views */
    int fail_rank, fail_left; /* test hook EAAS_TEST_EP_MOVE_FAIL=RANK:N */
    ea_ep_stats st;        /* the step loop's own counters (and slot_tokens) */
    /* what stats() reads from any thread: st and slot_tokens as of the last
     * step's end or weight move, copied under pub_mu (ea__ep_publish) */
    pthread_mutex_t pub_mu;
    ea_ep_stats pub;
    uint64_t *pub_tokens;  /* (n_layers, n_slots) */
} ea__ep;

static const ea_moe_backend_vtable ea__ep_vt;

int ea_ep_backend_is(const ea_moe_backend *be) { return be && be->vt == &ea__ep_vt; }

/* dispatch: this rank's pairs (pair order) and every rank's pair count. */
static ea_status ea__ep_dispatch(ea__ep *E, int layer, int n, int k, const int32_t *ids, int *n_mine) {
    int m = 0, P = n * k;
    memset(E->cnt, 0, sizeof(int32_t) * (size_t)E->size);
    for (int p = 0; p < P; p++) {
        int s = ids[p];
        if (s < 0 || s >= E->n_slots) return ea_err(EA_ERR_RANGE, "layer %d: expert slot %d of %d", layer, s, E->n_slots);
        int r = s / E->per_rank;
        E->cnt[r]++;
        if (r != E->rank) continue;
        E->prow[m] = p / k;
        E->pexp[m] = s;
        E->pidx[m] = p;
        E->slot_tokens[(size_t)layer * E->n_slots + s]++;
        m++;
    }
    *n_mine = m;
    E->st.dispatch_calls++;
    E->st.pairs_local += (uint64_t)m;
    E->st.pairs_total += (uint64_t)P;
    return EA_OK;
}

/* compute: own experts over own pairs -> mine (m, H), in own pair order. */
static ea_status ea__ep_compute(ea__ep *E, int layer, const float *x, int m) {
    double t0 = ea_now_s();
    if (m > 0) EA_TRY(ea_moe_run_pairs(E->local, layer, x, m, E->prow, E->pexp, E->mine));
    E->st.compute_seconds += ea_now_s() - t0;
    return EA_OK;
}

/* Combine records [int32 pair index | H floats] into out by pair index; each
 * index must be in range and arrive once (else the ranks disagree on routing). */
static ea_status ea__ep_take(ea__ep *E, int layer, const float *recs, size_t n_recs, int P) {
    int H = E->o.hidden;
    for (size_t q = 0; q < n_recs; q++) {
        const float *r = recs + q * (size_t)(H + 1);
        int32_t idx;
        memcpy(&idx, r, sizeof idx);
        if (idx < 0 || idx >= P || E->got[idx])
            return ea_err(EA_ERR_PEER, "layer %d combine: record %zu names pair %d (%s of %d pairs): ranks disagree on routing",
                          layer, q, idx, idx >= 0 && idx < P ? "twice" : "outside", P);
        E->got[idx] = 1;
        memcpy(E->out + (size_t)idx * H, r + 1, sizeof(float) * (size_t)H);
    }
    return EA_OK;
}

/* y[t] = sum over j of w[t][j] * out[t*k+j], j = 0..k-1 in order from 0.0f:
 * the local backend's arithmetic (moe.h), once every pair arrived. */
static ea_status ea__ep_sum(ea__ep *E, int layer, int n, int k, const float *w, float *y) {
    int H = E->o.hidden;
    for (int p = 0; p < n * k; p++)
        if (!E->got[p]) return ea_err(EA_ERR_PEER, "layer %d combine: no rank sent pair %d", layer, p);
    for (int t = 0; t < n; t++) {
        float *yt = y + (size_t)t * H;
        memset(yt, 0, sizeof(float) * (size_t)H);
        for (int j = 0; j < k; j++) ea_k_axpy(w[t * k + j], E->out + (size_t)(t * k + j) * H, yt, H);
    }
    return EA_OK;
}

/* Records per rank per round for a call of P pairs: the capacity factor times
 * an even share, at least 1, at most what the buffers hold. */
static int ea__ep_capacity(const ea__ep *E, int P) {
    double c = E->o.capacity_factor * (double)P / E->size;
    int C = (int)c + (c > (int)c);
    return C < 1 ? 1 : C > E->cap ? E->cap : C;
}

/* combine: rounds of allgatherv of at most C records per rank (what a rank has
 * beyond C goes in the next round: no pair is dropped); each record's row into
 * out by its pair index, checked; then each token's slots added in order. */
static ea_status ea__ep_combine(ea__ep *E, int layer, int n, int k, const float *w, float *y) {
    int H = E->o.hidden, P = n * k, C = ea__ep_capacity(E, P), rounds = 1;
    size_t rec = sizeof(float) * (size_t)(H + 1);
    for (int r = 0; r < E->size; r++) {
        int need = (E->cnt[r] + C - 1) / C;
        if (need > rounds) rounds = need;
        if (E->cnt[r] > C) E->st.overflow_pairs += (uint64_t)(E->cnt[r] - C);
    }
    memset(E->got, 0, (size_t)P);
    char what[48];
    snprintf(what, sizeof what, "layer %d combine", layer);
    for (int rd = 0; rd < rounds; rd++) {
        size_t total = 0;
        for (int r = 0; r < E->size; r++) {
            int left = E->cnt[r] - rd * C;
            total += E->bytes[r] = (size_t)(left < 0 ? 0 : left > C ? C : left) * rec;
        }
        for (int i = rd * C, j = 0; i < E->cnt[E->rank] && j < C; i++, j++) {
            float *r = E->send + (size_t)j * (H + 1);
            memcpy(r, &E->pidx[i], sizeof(int32_t));
            memcpy(r + 1, E->mine + (size_t)i * H, sizeof(float) * (size_t)H);
        }
        double t0 = ea_now_s();
        EA_TRY(ea_dist_allgatherv(E->d, E->send, E->recv, E->bytes, what));
        E->st.comm_seconds += ea_now_s() - t0;
        E->st.combine_bytes_sent += E->bytes[E->rank];
        E->st.combine_bytes_recv += total - E->bytes[E->rank];
        EA_TRY(ea__ep_take(E, layer, E->recv, total / rec, P));
    }
    E->st.combine_calls++;
    E->st.combine_rounds += (uint64_t)rounds;
    E->st.overflow_rounds += (uint64_t)(rounds - 1);
    return ea__ep_sum(E, layer, n, k, w, y);
}

/* dispatch, compute and combine are one lockstep exchange: all in submit */
/* ------------------------------------------------------------ data-parallel attention
 *
 * With dp_attention every rank brings its own tokens (n differs per rank, 0
 * included; every rank still makes every MoE call). One call:
 *   dispatch  each own pair's record [int32 pair index | int32 slot | x row]
 *             to the rank owning the slot, in pair order: an alltoall of the
 *             counts, then one alltoallv of the records
 *   compute   the owner runs the pairs it received (source ranks in order)
 *   combine   each output [int32 pair index | row] goes back to its source
 *             rank, in the order it came: one alltoallv; every rank checks
 *             each of its pairs came back once and adds its tokens' k outputs
 *             in slot order from 0.0f, so y is bit-identical to one process.
 */
static ea_status ea__ep_dp_call(ea__ep *E, const ea_moe_call *c) {
    int H = E->o.hidden, N = E->size, n = c->n_tokens, k = c->k, P = n * k, layer = c->layer, S = E->per_rank;
    size_t drec = (size_t)H + 2, crec = (size_t)H + 1, cap = (size_t)E->o.max_tokens * (size_t)E->o.max_k;
    int64_t *cnt = E->dp_cnt, *got_n = cnt + N, *fill = cnt + 2 * N;
    memset(cnt, 0, sizeof(int64_t) * 3 * (size_t)N);
    for (int p = 0; p < P; p++) {
        int s = c->ids[p];
        if (s < 0 || s >= E->n_slots) return ea_err(EA_ERR_RANGE, "layer %d: expert slot %d of %d", layer, s, E->n_slots);
        cnt[s / S]++;
    }
    for (int r = 1; r < N; r++) fill[r] = fill[r - 1] + cnt[r - 1];
    for (int p = 0; p < P; p++) {
        float *rec = E->dsend + (size_t)fill[c->ids[p] / S]++ * drec;
        int32_t head[2] = {p, c->ids[p]};
        memcpy(rec, head, sizeof head);
        memcpy(rec + 2, c->x + (size_t)(p / k) * H, sizeof(float) * (size_t)H);
    }
    char what[48];
    snprintf(what, sizeof what, "layer %d dispatch", layer);
    for (int r = 0; r < N; r++) E->sc[r] = E->rc[r] = sizeof(int64_t);
    double t0 = ea_now_s();
    EA_TRY(ea_dist_alltoallv(E->d, cnt, E->sc, got_n, E->rc, what));
    size_t m = 0, sent = 0;
    for (int r = 0; r < N; r++) {
        if (got_n[r] < 0 || (size_t)got_n[r] > cap)
            return ea_err(EA_ERR_PEER, "layer %d dispatch: rank %d announces %lld pairs (at most %zu)", layer, r,
                          (long long)got_n[r], cap);
        m += (size_t)got_n[r];
        sent += E->sc[r] = (size_t)cnt[r] * drec * sizeof(float);
        E->rc[r] = (size_t)got_n[r] * drec * sizeof(float);
    }
    EA_TRY(ea_dist_alltoallv(E->d, E->dsend, E->sc, E->drecv, E->rc, what));
    E->st.comm_seconds += ea_now_s() - t0;
    E->st.dispatch_calls++;
    E->st.dispatch_bytes += sent - E->sc[E->rank];
    /* compute the received pairs */
    for (size_t q = 0; q < m; q++) {
        const float *rec = E->drecv + q * drec;
        int32_t head[2];
        memcpy(head, rec, sizeof head);
        if (head[1] / S != E->rank || head[1] < 0)
            return ea_err(EA_ERR_PEER, "layer %d dispatch: record %zu names slot %d, not this rank's", layer, q, head[1]);
        E->dp_row[q] = (int32_t)q;
        E->dp_slot[q] = head[1];
        E->slot_tokens[(size_t)layer * E->n_slots + head[1]]++;
        memcpy(E->dp_x + q * H, rec + 2, sizeof(float) * (size_t)H);
    }
    t0 = ea_now_s();
    if (m > 0) EA_TRY(ea_moe_run_pairs(E->local, layer, E->dp_x, (int)m, E->dp_row, E->dp_slot, E->dp_y));
    E->st.compute_seconds += ea_now_s() - t0;
    E->st.pairs_local += m;
    E->st.pairs_total += (uint64_t)P;
    /* combine: back to the sources in the order received */
    for (size_t q = 0; q < m; q++) {
        float *rec = E->csend + q * crec;
        memcpy(rec, E->drecv + q * drec, sizeof(int32_t));
        memcpy(rec + 1, E->dp_y + q * H, sizeof(float) * (size_t)H);
    }
    snprintf(what, sizeof what, "layer %d combine", layer);
    sent = 0;
    for (int r = 0; r < N; r++) {
        sent += E->sc[r] = (size_t)got_n[r] * crec * sizeof(float);
        E->rc[r] = (size_t)cnt[r] * crec * sizeof(float);
    }
    t0 = ea_now_s();
    EA_TRY(ea_dist_alltoallv(E->d, E->csend, E->sc, E->crecv, E->rc, what));
    E->st.comm_seconds += ea_now_s() - t0;
    E->st.combine_calls++;
    E->st.combine_rounds++;
    E->st.combine_bytes_sent += sent - E->sc[E->rank];
    E->st.combine_bytes_recv += (size_t)P * crec * sizeof(float) - E->rc[E->rank];
    memset(E->got, 0, (size_t)P);
    EA_TRY(ea__ep_take(E, layer, E->crecv, (size_t)P, P));
    return ea__ep_sum(E, layer, n, k, c->w, c->y);
}

static ea_status ea__ep_submit(ea_moe_backend *be, const ea_moe_call *c) {
    ea__ep *E = (ea__ep *)be;
    int n = c->n_tokens, k = c->k, layer = c->layer;
    if (n > E->o.max_tokens || k > E->o.max_k)
        return ea_err(EA_ERR_RANGE, "ep call of %d tokens x %d slots exceeds %d x %d", n, k, E->o.max_tokens, E->o.max_k);
    if (layer < 0 || layer >= E->o.n_layers) return ea_err(EA_ERR_RANGE, "ep: layer %d", layer);
    if (E->o.dp_attention) return ea__ep_dp_call(E, c);
    int m = 0;
    EA_TRY(ea__ep_dispatch(E, layer, n, k, c->ids, &m));
    EA_TRY(ea__ep_compute(E, layer, c->x, m));
    return ea__ep_combine(E, layer, n, k, c->w, c->y);
}

static ea_status ea__ep_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    (void)be, (void)c, (void)out;
    return EA_OK;
}

/* a rank that missed a deadline breaks the context: every later step would fail */
static ea_moe_health ea__ep_health(ea_moe_backend *be, char *why, size_t n) {
    ea__ep *E = (ea__ep *)be;
    if (ea_dist_healthy(E->o.dist)) return EA_MOE_OK;
    snprintf(why, n, "%s", ea_dist_error(E->o.dist));
    return EA_MOE_FAILED;
}

/* Copy the step loop's counters where stats() reads them (step-loop thread). */
static void ea__ep_publish(ea__ep *E) {
    pthread_mutex_lock(&E->pub_mu);
    ea_ep_backend_stats(&E->base, &E->pub);
    memcpy(E->pub_tokens, E->slot_tokens, sizeof(uint64_t) * (size_t)E->o.n_layers * (size_t)E->n_slots);
    E->pub.slot_tokens = E->pub_tokens;
    pthread_mutex_unlock(&E->pub_mu);
}

/* Any thread (HTTP): the last published counters, rendered under the lock that guards them. */
static void ea__ep_stats(ea_moe_backend *be, json_t *json, ea_sbuf *prom) {
    ea__ep *E = (ea__ep *)be;
    pthread_mutex_lock(&E->pub_mu);
    if (json) json_object_set_new(json, "ep", ea_ep_stats_to_json(&E->pub));
    if (prom) ea_ep_stats_prometheus(&E->pub, prom);
    pthread_mutex_unlock(&E->pub_mu);
}

static void ea__ep_end_step(ea_moe_backend *be) {
    ea__ep *E = (ea__ep *)be;
    E->st.steps++;
    ea__ep_publish(E);
}

/* ------------------------------------------------------------ weight moves
 *
 * apply_placement(layer, row) is collective: every rank calls it with the same
 * row at the same step (EPLB runs the same plan on every rank; see agree, and
 * tally for data-parallel attention).
 *   1. every rank checks the row and that all ranks hold the same one (the
 *      row's hash, min and max over ranks)
 *   2. the move plan (ea_eplb_meta_move_plan): for each slot whose expert
 *      changes, the source slot — on the same rank if one holds the expert,
 *      else the nearest replica by the old dispatch map
 *   3. each rank allocates its incoming slots; all ranks agree that every one
 *      could (allreduce) — otherwise all keep the old placement
 *   4. one MPI_Alltoallv: for each destination rank, in slot order, the whole
 *      expert as the model holds it — gate, up, down back to back, quantized
 *      blocks with their scales, so an expert moves as one unit
 *   5. unpack (same-rank sources are copied directly), make the kernels'
 *      packed copies, and switch the slots' views; the old memory of replaced
 *      slots is freed. A failed exchange breaks the MPI context (dist.h).
 */

/* One expert's bytes on the wire. */
static size_t ea__expert_bytes(const ea_ffn_weights *w) { return w->gate.nbytes + w->up.nbytes + w->down.nbytes; }

static void ea__expert_put(const ea_ffn_weights *w, uint8_t *dst) {
    memcpy(dst, w->gate.data, w->gate.nbytes);
    memcpy(dst + w->gate.nbytes, w->up.data, w->up.nbytes);
    memcpy(dst + w->gate.nbytes + w->up.nbytes, w->down.data, w->down.nbytes);
}

static size_t ea__round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Memory for a slot shaped like `like` (same layer): the three matrices' bytes,
 * then a packed copy of each one the kernels read packed. */
static size_t ea__slot_mem_bytes(const ea_ffn_weights *like) {
    const ea_tensor *t[3] = {&like->gate, &like->up, &like->down};
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        n += ea__round64(t[i]->nbytes);
        if (t[i]->packed) n += ea__round64(ea_k_packed_bytes(t[i], t[i]->packed_rows));
    }
    return n;
}

/* Views of a slot whose bytes (ea__expert_put's layout) were written at mem:
 * `like`'s shapes and dtypes, the data in mem, the packed copies made. */
static ea_ffn_weights ea__slot_views(const ea_ffn_weights *like, uint8_t *mem, const uint8_t *bytes) {
    ea_ffn_weights w = *like;
    ea_tensor *t[3] = {&w.gate, &w.up, &w.down};
    size_t at = 0, in = 0;
    for (int i = 0; i < 3; i++) {
        memcpy(mem + at, bytes + in, t[i]->nbytes);
        t[i]->data = mem + at;
        t[i]->hash = 0;
        in += t[i]->nbytes;
        at += ea__round64(t[i]->nbytes);
    }
    for (int i = 0; i < 3; i++)
        if (t[i]->packed) {
            ea_k_pack(t[i], t[i]->packed_rows, mem + at);
            t[i]->packed = mem + at;
            at += ea__round64(ea_k_packed_bytes(t[i], t[i]->packed_rows));
        }
    return w;
}

static uint64_t ea__row_hash(const int32_t *p2l, int n) { return ea_xxh64(p2l, sizeof(int32_t) * (size_t)n, 3); }

/* Steps 1 and 3: every rank's ok (and row hash) the same; else the reason. */
static ea_status ea__ep_all_ok(ea__ep *E, int layer, int ok, uint64_t h, const char *stage) {
    int64_t v[3] = {ok ? 0 : 1, (int64_t)(h >> 1), -(int64_t)(h >> 1)}; /* max of "failed", max and -min of hash */
    char what[64];
    snprintf(what, sizeof what, "layer %d weight move (%s)", layer, stage);
    EA_TRY(ea_dist_allreduce_max_i64(E->d, v, 3, what));
    if (v[0]) return ea_err(EA_ERR_PEER, "ep: layer %d: a rank could not take the new placement (%s); every rank keeps the old one", layer, stage);
    if (v[1] != -v[2]) return ea_err(EA_ERR_PEER, "ep: layer %d: the ranks were given different placements; every rank keeps the old one", layer);
    return EA_OK;
}

static ea_status ea__ep_apply(ea_moe_backend *be, int layer, const int32_t *p2l, int n) {
    ea__ep *E = (ea__ep *)be;
    int P = E->n_slots, S = E->per_rank, me = E->rank, ml = layer >= 0 && layer < E->o.n_layers ? E->moe_of[layer] : -1;
    if (ml < 0) return ea_err(EA_ERR_INVALID_ARG, "ep: layer %d has no routed experts", layer);
    if (n != P) return ea_err(EA_ERR_INVALID_ARG, "ep: placement of %d slots, layer %d has %d", n, layer, P);
    double t0 = ea_now_s();
    uint64_t h = ea__row_hash(p2l, P);
    /* 1. the row, the same on every rank */
    ea_status s = ea_eplb_meta_set_layer(&E->next, ml, p2l, NULL);
    EA_TRY(ea__ep_all_ok(E, layer, s == EA_OK, h, "placement"));
    /* 2. the plan; bytes to each destination and from each source rank */
    const ea_ffn_weights *like = ea_moe_local_slot(E->local, layer, me * S); /* this layer's shapes */
    size_t B = ea__expert_bytes(like), ns = 0, nr = 0;
    int32_t *src = ea_malloc(sizeof(int32_t) * (size_t)P);
    size_t *sc = ea_calloc(3 * (size_t)E->size, sizeof(size_t)), *rc = sc ? sc + E->size : NULL,
           *roff = sc ? sc + 2 * (size_t)E->size : NULL;
    uint8_t **stage = ea_calloc((size_t)S, sizeof(uint8_t *));
    ea_ffn_weights *nw = ea_malloc(sizeof *nw * (size_t)S);
    uint8_t *sbuf = NULL, *rbuf = NULL, *tmp = ea_malloc(B ? B : 1);
    int ok = src && sc && stage && nw && tmp, moves = 0;
    if (ok) {
        moves = ea_eplb_meta_move_plan(&E->place, &E->next, ml, src);
        for (int p = 0; p < P; p++) {
            int to = p / S, from = src[p] / S;
            if (src[p] == p || from == to) continue;
            if (from == me) sc[to] += B;
            if (to == me) rc[from] += B;
        }
        for (int r = 0; r < E->size; r++) roff[r] = nr, ns += sc[r], nr += rc[r];
        /* 3. this rank's incoming slots and the exchange buffers, all before anything moves */
        sbuf = ea_malloc(ns ? ns : 1);
        rbuf = ea_malloc(nr ? nr : 1);
        ok = sbuf && rbuf;
        for (int i = 0; ok && i < S; i++)
            if (src[me * S + i] != me * S + i && !(stage[i] = ea_aligned_alloc(64, ea__slot_mem_bytes(like)))) ok = 0;
    }
    if (E->fail_left > 0 && E->fail_rank == me) {
        E->fail_left--;
        ok = 0; /* the test hook: this rank reports a failure */
    }
    s = ea__ep_all_ok(E, layer, ok, h, "memory");
    /* 4. the exchange: per destination rank, in slot order */
    if (s == EA_OK) {
        size_t at = 0;
        for (int p = 0; p < P; p++)
            if (src[p] != p && src[p] / S == me && p / S != me) {
                ea__expert_put(ea_moe_local_slot(E->local, layer, src[p]), sbuf + at);
                at += B;
            }
        char what[48];
        snprintf(what, sizeof what, "layer %d weight move", layer);
        s = ea_dist_alltoallv(E->d, sbuf, sc, rbuf, rc, what);
    }
    /* 5. unpack every new slot (reading old slots before any changes), then switch them */
    if (s == EA_OK) {
        for (int i = 0; i < S; i++) {
            int p = me * S + i, from = src[p] / S;
            if (src[p] == p) continue;
            const uint8_t *bytes = rbuf + roff[from];
            if (from == me) {
                ea__expert_put(ea_moe_local_slot(E->local, layer, src[p]), tmp);
                bytes = tmp;
            } else {
                roff[from] += B;
            }
            nw[i] = ea__slot_views(like, stage[i], bytes);
        }
        for (int i = 0; i < S; i++) {
            int p = me * S + i;
            if (src[p] == p) continue;
            *ea_moe_local_slot(E->local, layer, p) = nw[i];
            void **own = &E->own[(size_t)layer * P + p];
            ea_aligned_free(*own);
            *own = stage[i];
            stage[i] = NULL;
        }
        ea_eplb_meta_copy_layer(&E->place, &E->next, ml);
        E->st.layer_switches++;
        E->st.experts_moved += (uint64_t)moves;
        for (int r = 0; r < E->size; r++) E->st.move_bytes_sent += sc[r], E->st.move_bytes_recv += rc[r];
        E->st.move_seconds += ea_now_s() - t0;
    } else {
        E->st.move_failures++;
    }
    ea__ep_publish(E);
    for (int i = 0; stage && i < S; i++) ea_aligned_free(stage[i]);
    ea_free(stage);
    ea_free(nw);
    ea_free(tmp);
    ea_free(sbuf);
    ea_free(rbuf);
    ea_free(sc);
    ea_free(src);
    return s;
}

static ea_status ea__ep_agree(ea_moe_backend *be, int64_t *v, int n) {
    return ea_dist_bcast(((ea__ep *)be)->d, v, sizeof(int64_t) * (size_t)n, 0, "agree");
}

/* data-parallel attention: each rank routed its own tokens, so EPLB's counts are summed */
static ea_status ea__ep_tally(ea_moe_backend *be, int64_t *v, int n) {
    ea__ep *E = (ea__ep *)be;
    return E->o.dp_attention ? ea_dist_allreduce_sum_i64(E->d, v, n, "EPLB routing counts") : EA_OK;
}

static void ea__ep_destroy(ea_moe_backend *be) {
    ea__ep *E = (ea__ep *)be;
    if (!E) return;
    ea_moe_backend_destroy(E->local);
    ea_free(E->prow);
    ea_free(E->pexp);
    ea_free(E->pidx);
    ea_free(E->cnt);
    ea_free(E->bytes);
    ea_free(E->got);
    ea_aligned_free(E->out);
    ea_free(E->dp_cnt);
    ea_free(E->sc);
    ea_free(E->dp_row);
    ea_free(E->dp_slot);
    ea_aligned_free(E->dsend);
    ea_aligned_free(E->drecv);
    ea_aligned_free(E->dp_x);
    ea_aligned_free(E->dp_y);
    ea_aligned_free(E->csend);
    ea_aligned_free(E->crecv);
    ea_free(E->slot_tokens);
    ea_free(E->pub_tokens);
    pthread_mutex_destroy(&E->pub_mu);
    for (size_t i = 0; E->own && i < (size_t)E->o.n_layers * (size_t)E->n_slots; i++) ea_aligned_free(E->own[i]);
    ea_free(E->own);
    ea_free(E->moe_of);
    ea_eplb_meta_deinit(&E->place);
    ea_eplb_meta_deinit(&E->next);
    ea_aligned_free(E->mine);
    ea_aligned_free(E->send);
    ea_aligned_free(E->recv);
    ea_free(E);
}

static const ea_moe_backend_vtable ea__ep_vt = {.submit = ea__ep_submit,
                                                .wait = ea__ep_wait,
                                                .end_step = ea__ep_end_step,
                                                .health = ea__ep_health,
                                                .stats = ea__ep_stats,
                                                .apply_placement = ea__ep_apply,
                                                .agree = ea__ep_agree,
                                                .tally = ea__ep_tally,
                                                .destroy = ea__ep_destroy,
                                                .name = "ep"};

/* The placement against the world and the model: one row per MoE layer, slots split evenly. */
static ea_status ea__ep_check(const ea_ep_opts *o, int size) {
    const ea_eplb_meta *pl = o->place;
    int n_moe = 0;
    for (int l = 0; l < o->n_layers; l++) n_moe += o->experts[l] != NULL;
    if (pl->n_ranks != size)
        return ea_err(EA_ERR_INVALID_ARG, "placement for %d ranks, but %d ranks run", pl->n_ranks, size);
    if (pl->n_layers != n_moe)
        return ea_err(EA_ERR_INVALID_ARG, "placement for %d layers, model has %d MoE layers", pl->n_layers, n_moe);
    if (pl->n_physical % size)
        return ea_err(EA_ERR_INVALID_ARG, "%d routed experts do not split evenly over %d ranks", pl->n_physical, size);
    return EA_OK;
}

static ea_status ea__ep_scratch(ea__ep *E, const ea_ep_opts *o) {
    int H = o->hidden;
    size_t P = (size_t)o->max_tokens * (size_t)o->max_k;
    E->slot_tokens = ea_calloc((size_t)o->n_layers * (size_t)E->n_slots, sizeof(uint64_t));
    E->pub_tokens = ea_calloc((size_t)o->n_layers * (size_t)E->n_slots, sizeof(uint64_t));
    E->prow = ea_calloc(P, sizeof(int32_t));
    E->pexp = ea_calloc(P, sizeof(int32_t));
    E->pidx = ea_calloc(P, sizeof(int32_t));
    E->cnt = ea_calloc((size_t)E->size, sizeof(int32_t));
    E->bytes = ea_calloc((size_t)E->size, sizeof(size_t));
    double c = E->o.capacity_factor * (double)P / E->size;
    E->cap = (int)c + (c > (int)c);
    if (E->cap < 1) E->cap = 1;
    if ((size_t)E->cap > P) E->cap = (int)P;
    E->got = ea_calloc(P, 1);
    E->mine = ea_aligned_alloc(64, P * (size_t)H * sizeof(float));
    E->out = ea_aligned_alloc(64, P * (size_t)H * sizeof(float));
    E->send = ea_aligned_alloc(64, (size_t)E->cap * (size_t)(H + 1) * sizeof(float));
    E->recv = ea_aligned_alloc(64, (size_t)E->size * (size_t)E->cap * (size_t)(H + 1) * sizeof(float));
    E->own = ea_calloc((size_t)o->n_layers * (size_t)E->n_slots, sizeof(void *));
    E->moe_of = ea_malloc(sizeof(int) * (size_t)o->n_layers);
    if (!E->slot_tokens || !E->pub_tokens || !E->prow || !E->pexp || !E->pidx || !E->cnt || !E->bytes || !E->got || !E->mine ||
        !E->out || !E->send || !E->recv || !E->own || !E->moe_of)
        return ea_err(EA_ERR_NOMEM, "ep backend scratch for %zu pairs", P);
    for (int l = 0, ml = 0; l < o->n_layers; l++) E->moe_of[l] = o->experts[l] ? ml++ : -1;
    if (!o->dp_attention) return EA_OK;
    size_t NP = (size_t)E->size * P;
    E->dp_cnt = ea_calloc(3 * (size_t)E->size, sizeof(int64_t));
    E->sc = ea_calloc(2 * (size_t)E->size, sizeof(size_t));
    E->rc = E->sc ? E->sc + E->size : NULL;
    E->dp_row = ea_malloc(sizeof(int32_t) * NP);
    E->dp_slot = ea_malloc(sizeof(int32_t) * NP);
    E->dsend = ea_aligned_alloc(64, P * ((size_t)H + 2) * sizeof(float));
    E->drecv = ea_aligned_alloc(64, NP * ((size_t)H + 2) * sizeof(float));
    E->dp_x = ea_aligned_alloc(64, NP * (size_t)H * sizeof(float));
    E->dp_y = ea_aligned_alloc(64, NP * (size_t)H * sizeof(float));
    E->csend = ea_aligned_alloc(64, NP * ((size_t)H + 1) * sizeof(float));
    E->crecv = ea_aligned_alloc(64, P * ((size_t)H + 1) * sizeof(float));
    if (!E->dp_cnt || !E->sc || !E->dp_row || !E->dp_slot || !E->dsend || !E->drecv || !E->dp_x || !E->dp_y ||
        !E->csend || !E->crecv)
        return ea_err(EA_ERR_NOMEM, "ep backend: data-parallel buffers for %zu pairs", NP);
    return EA_OK;
}

/* The placement the slots hold (copied) and a second one of the same shape for switches. */
static ea_status ea__ep_placement(ea__ep *E, const ea_eplb_meta *pl) {
    EA_TRY(ea_eplb_meta_init(&E->place, pl->n_layers, pl->n_logical, pl->n_physical, pl->n_ranks, pl->n_nodes));
    EA_TRY(ea_eplb_meta_init(&E->next, pl->n_layers, pl->n_logical, pl->n_physical, pl->n_ranks, pl->n_nodes));
    for (int l = 0; l < pl->n_layers; l++) {
        ea_eplb_meta_copy_layer(&E->place, pl, l);
        ea_eplb_meta_copy_layer(&E->next, pl, l);
    }
    const char *hook = getenv("EAAS_TEST_EP_MOVE_FAIL"); /* "RANK:N": rank RANK fails its next N layer switches */
    if (hook && sscanf(hook, "%d:%d", &E->fail_rank, &E->fail_left) != 2) E->fail_left = 0;
    return EA_OK;
}

ea_status ea_ep_backend_create(const ea_ep_opts *o, ea_moe_backend **out) {
    *out = NULL;
    int size = ea_dist_size(o->dist);
    EA_TRY(ea__ep_check(o, size));
    ea__ep *E = ea_calloc(1, sizeof *E);
    if (!E) return ea_err(EA_ERR_NOMEM, "ep backend");
    E->base.vt = &ea__ep_vt;
    pthread_mutex_init(&E->pub_mu, NULL);
    E->o = *o;
    if (E->o.capacity_factor <= 0) E->o.capacity_factor = 1.25;
    E->o.place = NULL;
    E->o.experts = NULL;
    E->d = o->dist;
    E->rank = ea_dist_rank(o->dist);
    E->size = size;
    E->n_slots = o->place->n_physical;
    E->per_rank = E->n_slots / size;
    /* the local backend runs this rank's slots (the caller's table holds only those) */
    ea_moe_local_opts lo = {.n_layers = o->n_layers, .hidden = o->hidden, .ff = o->ff, .n_experts = E->n_slots,
                            .max_tokens = ea_ep_expert_max_tokens(o->max_tokens, size, o->dp_attention),
                            .max_k = o->max_k,
                            .experts = o->experts, .kctx = o->kctx};
    ea_status s = ea_moe_local_create(&lo, &E->local);
    if (s == EA_OK) s = ea__ep_scratch(E, o);
    if (s == EA_OK) s = ea__ep_placement(E, o->place);
    if (s != EA_OK) {
        ea__ep_destroy(&E->base);
        return s;
    }
    ea__ep_publish(E);
    *out = &E->base;
    return EA_OK;
}

void ea_ep_backend_stats(ea_moe_backend *be, ea_ep_stats *out) {
    ea__ep *E = (ea__ep *)be;
    EA_ASSERT(ea_ep_backend_is(be));
    *out = E->st;
    out->rank = E->rank;
    out->size = E->size;
    out->n_layers = E->o.n_layers;
    out->n_slots = E->n_slots;
    out->slots_per_rank = E->per_rank;
    out->slot_tokens = E->slot_tokens;
}

/* ------------------------------------------------------------ rendering */

json_t *ea_ep_stats_to_json(const ea_ep_stats *s) {
    json_t *ex = json_array();
    for (int l = 0; ex && l < s->n_layers; l++)
        for (int e = 0; e < s->n_slots; e++) {
            size_t i = (size_t)l * s->n_slots + e;
            if (e / s->slots_per_rank != s->rank) continue;
            json_array_append_new(ex, json_pack("{s:i, s:i, s:I}", "layer", l, "slot", e, "tokens",
                                                (json_int_t)s->slot_tokens[i]));
        }
    return json_pack("{s:i, s:i, s:I, s:{s:I, s:I}, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I}, s:{s:f, s:f}, "
                     "s:{s:I, s:I, s:I, s:I, s:I, s:f}, s:o}",
                     "rank", s->rank, "size", s->size, "steps", (json_int_t)s->steps,
                     "dispatch", "calls", (json_int_t)s->dispatch_calls, "bytes", (json_int_t)s->dispatch_bytes,
                     "combine", "calls", (json_int_t)s->combine_calls, "bytes_sent",
                     (json_int_t)s->combine_bytes_sent, "bytes_recv", (json_int_t)s->combine_bytes_recv, "rounds",
                     (json_int_t)s->combine_rounds, "overflow", "rounds", (json_int_t)s->overflow_rounds, "pairs",
                     (json_int_t)s->overflow_pairs,
                     "pairs", "local", (json_int_t)s->pairs_local, "total", (json_int_t)s->pairs_total,
                     "seconds", "comm", s->comm_seconds, "compute", s->compute_seconds, "moves", "layer_switches",
                     (json_int_t)s->layer_switches, "experts", (json_int_t)s->experts_moved, "bytes_sent",
                     (json_int_t)s->move_bytes_sent, "bytes_recv", (json_int_t)s->move_bytes_recv, "failures",
                     (json_int_t)s->move_failures, "seconds", s->move_seconds, "experts", ex);
}

ea_status ea_ep_stats_json(const ea_ep_stats *s, char **out) {
    *out = NULL;
    ea_sbuf b = {0};
    json_t *o = ea_ep_stats_to_json(s);
    if (o) ea_sbuf_json(&b, o);
    json_decref(o);
    *out = o ? ea_sbuf_take(&b, NULL) : NULL;
    ea_sbuf_deinit(&b);
    return *out ? EA_OK : ea_err(EA_ERR_NOMEM, "ep stats json");
}

void ea_ep_stats_prometheus(const ea_ep_stats *s, ea_sbuf *t) {
    int r = s->rank;
    ea_sbuf_printf(t, "# HELP eaas:ep_dispatch_calls_total MoE dispatch steps of this rank\n"
               "# TYPE eaas:ep_dispatch_calls_total counter\neaas:ep_dispatch_calls_total{rank=\"%d\"} %llu\n",
           r, (unsigned long long)s->dispatch_calls);
    ea_sbuf_printf(t, "# HELP eaas:ep_combine_calls_total MoE combine collectives of this rank\n"
               "# TYPE eaas:ep_combine_calls_total counter\neaas:ep_combine_calls_total{rank=\"%d\"} %llu\n",
           r, (unsigned long long)s->combine_calls);
    ea_sbuf_printf(t, "# HELP eaas:ep_combine_bytes_total combine payload bytes\n# TYPE eaas:ep_combine_bytes_total counter\n"
               "eaas:ep_combine_bytes_total{rank=\"%d\",dir=\"sent\"} %llu\n"
               "eaas:ep_combine_bytes_total{rank=\"%d\",dir=\"recv\"} %llu\n",
           r, (unsigned long long)s->combine_bytes_sent, r, (unsigned long long)s->combine_bytes_recv);
    ea_sbuf_printf(t, "# HELP eaas:ep_dispatch_bytes_total rows moved to expert owners (0: attention replicated)\n"
               "# TYPE eaas:ep_dispatch_bytes_total counter\neaas:ep_dispatch_bytes_total{rank=\"%d\"} %llu\n",
           r, (unsigned long long)s->dispatch_bytes);
    ea_sbuf_printf(t, "# HELP eaas:ep_pairs_total (token, slot) pairs\n# TYPE eaas:ep_pairs_total counter\n"
               "eaas:ep_pairs_total{rank=\"%d\",where=\"local\"} %llu\neaas:ep_pairs_total{rank=\"%d\",where=\"all\"} %llu\n",
           r, (unsigned long long)s->pairs_local, r, (unsigned long long)s->pairs_total);
    ea_sbuf_printf(t, "# HELP eaas:ep_comm_seconds_total seconds in combine collectives\n"
               "# TYPE eaas:ep_comm_seconds_total counter\neaas:ep_comm_seconds_total{rank=\"%d\"} %.6f\n",
           r, s->comm_seconds);
    ea_sbuf_printf(t, "# HELP eaas:ep_compute_seconds_total seconds in this rank's experts\n"
               "# TYPE eaas:ep_compute_seconds_total counter\neaas:ep_compute_seconds_total{rank=\"%d\"} %.6f\n",
           r, s->compute_seconds);
    ea_sbuf_printf(t, "# HELP eaas:ep_overflow_tokens_total (token, slot) pairs over a rank's combine capacity, "
               "sent in a later round (never dropped)\n"
               "# TYPE eaas:ep_overflow_tokens_total counter\neaas:ep_overflow_tokens_total{rank=\"%d\"} %llu\n"
               "# HELP eaas:ep_overflow_rounds_total combine rounds beyond the first\n"
               "# TYPE eaas:ep_overflow_rounds_total counter\neaas:ep_overflow_rounds_total{rank=\"%d\"} %llu\n",
           r, (unsigned long long)s->overflow_pairs, r, (unsigned long long)s->overflow_rounds);
    ea_sbuf_printf(t, "# HELP eaas:ep_weight_move_bytes_total expert weight bytes moved between ranks by EPLB\n"
               "# TYPE eaas:ep_weight_move_bytes_total counter\n"
               "eaas:ep_weight_move_bytes_total{rank=\"%d\",dir=\"sent\"} %llu\n"
               "eaas:ep_weight_move_bytes_total{rank=\"%d\",dir=\"recv\"} %llu\n",
           r, (unsigned long long)s->move_bytes_sent, r, (unsigned long long)s->move_bytes_recv);
    ea_sbuf_printf(t, "# HELP eaas:ep_layer_switches_total MoE layers switched to a new placement\n"
               "# TYPE eaas:ep_layer_switches_total counter\neaas:ep_layer_switches_total{rank=\"%d\"} %llu\n"
               "# HELP eaas:ep_layer_switch_failures_total layer switches refused (old placement kept on every rank)\n"
               "# TYPE eaas:ep_layer_switch_failures_total counter\neaas:ep_layer_switch_failures_total{rank=\"%d\"} %llu\n",
           r, (unsigned long long)s->layer_switches, r, (unsigned long long)s->move_failures);
    ea_sbuf_printf(t, "# HELP eaas:ep_expert_tokens_total tokens routed to each expert slot this rank owns\n"
               "# TYPE eaas:ep_expert_tokens_total counter\n");
    for (int l = 0; l < s->n_layers; l++)
        for (int e = 0; e < s->n_slots; e++) {
            size_t i = (size_t)l * s->n_slots + e;
            if (e / s->slots_per_rank == r)
                ea_sbuf_printf(t, "eaas:ep_expert_tokens_total{rank=\"%d\",layer=\"%d\",slot=\"%d\"} %llu\n", r, l, e,
                       (unsigned long long)s->slot_tokens[i]);
        }
}
