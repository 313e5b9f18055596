/*
 * moe_local.c — the local backend; see moe_local.h.
 *
 * Per call, with n tokens and k slots (P = n*k pairs):
 *   1. counting sort of pairs by expert id -> order[P] (stable: pair index
 *      order); at[pair] = its place in that order
 *   2. per expert e with c > 0 pairs: xg (c, hidden) = gathered rows;
 *      g = xg·gateᵀ (c, ff), u = xg·upᵀ, g = silu(g)*u, yo = g·downᵀ (c, hidden)
 *   3. y[t] = 0; for j in 0..k-1: y[t] += w[t][j] * yo[at[t*k+j]]
 *      (ea_moe_run_pairs instead copies yo's rows back to pair order)
 * All scratch is allocated at create for max_tokens*max_k pairs; a call never
 * allocates. Step 2's rows never mix across tokens (batch-invariant matmul),
 * step 3's order is fixed: the sum is the same bits for any grouping. The
 * row-wise steps (gather, SiLU, combine, copy back) are split over the
 * matmul context's pool by rows.
 */
#include "moe/moe_local.h"

#include <string.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "kernels/ops.h"

typedef struct {
    ea_moe_backend base;
    ea_moe_local_opts o;
    ea_ffn_weights **experts; /* owns: [n_layers] -> rows of `slots`, NULL for dense layers */
    ea_ffn_weights *slots;    /* owns: [n_layers][n_experts] views (copied from opts); borrows the weights */
    int32_t *count;  /* (n_experts + 1) */
    int32_t *order;  /* (P) pair indices sorted by expert */
    int32_t *at;     /* (P) place of each pair in order */
    int32_t *pe;     /* (P) expert of each pair */
    int32_t *prow;   /* (P) token row of each pair */
    float *xg;       /* (P, hidden) input rows, grouped by expert */
    float *g, *u;    /* (P, ff) */
    float *yo;       /* (P, hidden) expert output rows, grouped by expert */
    ea_k_mm *mm;     /* (2 * n_experts) products of one batched call */
} ea__local;

/* The row-wise steps, each split over the pool in contiguous row ranges. */
typedef enum { EA__GATHER, EA__SILU, EA__TO_PAIRS, EA__COMBINE } ea__rowop;

typedef struct {
    ea__local *L;
    ea__rowop op;
    int n_rows;
    const float *x;        /* GATHER: input rows */
    const int32_t *prow;   /* GATHER: token row of each pair */
    float *out;            /* TO_PAIRS: pair-order output; COMBINE: y */
    int k;                 /* COMBINE: slots per token */
    const float *w;        /* COMBINE: (n, k) weights */
} ea__rowjob;

static void ea__rowtask(void *arg, int a, int b) {
    ea__rowjob *j = arg;
    ea__local *L = j->L;
    int H = L->o.hidden, F = L->o.ff;
    for (int i = a; i < b; i++) switch (j->op) {
        case EA__GATHER:
            memcpy(L->xg + (size_t)i * H, j->x + (size_t)j->prow[L->order[i]] * H, sizeof(float) * H);
            break;
        case EA__SILU: ea_k_silu_mul(L->g + (size_t)i * F, L->u + (size_t)i * F, F); break;
        case EA__TO_PAIRS:
            memcpy(j->out + (size_t)L->order[i] * H, L->yo + (size_t)i * H, sizeof(float) * H);
            break;
        case EA__COMBINE: {
            float *yt = j->out + (size_t)i * H;
            memset(yt, 0, sizeof(float) * H);
            for (int s = 0; s < j->k; s++)
                ea_k_axpy(j->w[i * j->k + s], L->yo + (size_t)L->at[i * j->k + s] * H, yt, H);
            break;
        }
        }
}

static void ea__rowwise(ea__local *L, ea__rowjob *j) {
    j->L = L;
    ea_pool_run_ranges(ea_kctx_pool(L->o.kctx), j->n_rows, 2, ea__rowtask, j);
}

/* Steps 1 and 2 for n_pairs (token row, expert) pairs; out != NULL: copy the
 * outputs back to pair order into out (n_pairs, hidden). */
static ea_status ea__run_pairs(ea__local *L, int layer, const float *x, int n_pairs,
                               const int32_t *prow, const int32_t *pexp, float *out) {
    const ea_moe_local_opts *o = &L->o;
    const ea_ffn_weights *ex = L->experts[layer];
    if (!ex) return ea_err(EA_ERR_INVALID_ARG, "layer %d has no experts", layer);
    int E = o->n_experts, H = o->hidden, F = o->ff;
    memset(L->count, 0, sizeof(int32_t) * (size_t)(E + 1));
    for (int p = 0; p < n_pairs; p++) {
        int e = pexp[p];
        if (e < 0 || e >= E || !ex[e].gate.data)
            return ea_err(EA_ERR_NOT_FOUND, "layer %d: expert %d is not held by this backend", layer, e);
        L->count[e + 1]++;
    }
    for (int e = 0; e < E; e++) L->count[e + 1] += L->count[e];
    /* count[e] = start of e's run; fill order stably, then count[e] = end of e's run */
    for (int p = 0; p < n_pairs; p++) {
        L->at[p] = L->count[pexp[p]]++;
        L->order[L->at[p]] = p;
    }
    ea__rowwise(L, &(ea__rowjob){.op = EA__GATHER, .n_rows = n_pairs, .x = x, .prow = prow});
    /* gate and up of every expert in as few pool runs as possible, then down */
    int n_mm = 0, start = 0;
    for (int e = 0; e < E; e++) {
        int c = L->count[e] - start;
        if (c > 0) {
            L->mm[n_mm++] = (ea_k_mm){&ex[e].gate, L->xg + (size_t)start * H, c, L->g + (size_t)start * F};
            L->mm[n_mm++] = (ea_k_mm){&ex[e].up, L->xg + (size_t)start * H, c, L->u + (size_t)start * F};
        }
        start = L->count[e];
    }
    for (int i = 0; i < n_mm; i += EA_K_BATCH_MAX)
        ea_k_matmul_batch(o->kctx, L->mm + i, n_mm - i < EA_K_BATCH_MAX ? n_mm - i : EA_K_BATCH_MAX);
    ea__rowwise(L, &(ea__rowjob){.op = EA__SILU, .n_rows = n_pairs});
    n_mm = 0;
    start = 0;
    for (int e = 0; e < E; e++) {
        int c = L->count[e] - start;
        if (c > 0) L->mm[n_mm++] = (ea_k_mm){&ex[e].down, L->g + (size_t)start * F, c, L->yo + (size_t)start * H};
        start = L->count[e];
    }
    for (int i = 0; i < n_mm; i += EA_K_BATCH_MAX)
        ea_k_matmul_batch(o->kctx, L->mm + i, n_mm - i < EA_K_BATCH_MAX ? n_mm - i : EA_K_BATCH_MAX);
    if (out) ea__rowwise(L, &(ea__rowjob){.op = EA__TO_PAIRS, .n_rows = n_pairs, .out = out});
    return EA_OK;
}

/* The whole call runs in submit; wait has nothing left to do. */
static ea_status ea__local_submit(ea_moe_backend *be, const ea_moe_call *c) {
    ea__local *L = (ea__local *)be;
    int n = c->n_tokens, k = c->k;
    if (n > L->o.max_tokens || k > L->o.max_k)
        return ea_err(EA_ERR_RANGE, "moe call of %d tokens x %d slots exceeds %d x %d", n, k,
                      L->o.max_tokens, L->o.max_k);
    int P = n * k;
    for (int p = 0; p < P; p++) {
        L->prow[p] = p / k;
        L->pe[p] = c->ids[p];
    }
    EA_TRY(ea__run_pairs(L, c->layer, c->x, P, L->prow, L->pe, NULL));
    ea__rowwise(L, &(ea__rowjob){.op = EA__COMBINE, .n_rows = n, .out = c->y, .k = k, .w = c->w});
    return EA_OK;
}

static ea_status ea__local_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    (void)be, (void)c, (void)out;
    return EA_OK;
}

ea_status ea_moe_run_pairs(ea_moe_backend *be, int layer, const float *x, int n_pairs,
                           const int32_t *pair_row, const int32_t *pair_expert, float *out) {
    ea__local *L = (ea__local *)be;
    if (n_pairs > L->o.max_tokens * L->o.max_k)
        return ea_err(EA_ERR_RANGE, "%d pairs exceed %d", n_pairs, L->o.max_tokens * L->o.max_k);
    return ea__run_pairs(L, layer, x, n_pairs, pair_row, pair_expert, out);
}

/* Rebind one layer's slots to the logical experts they now hold; checked before any slot changes. */
static ea_status ea__local_apply(ea_moe_backend *be, int layer, const int32_t *p2l, int n) {
    ea__local *L = (ea__local *)be;
    const ea_moe_local_opts *o = &L->o;
    if (!o->logical) return ea_err(EA_ERR_UNSUPPORTED, "local MoE backend: created without a placement to change");
    if (layer < 0 || layer >= o->n_layers || !L->experts[layer] || !o->logical[layer])
        return ea_err(EA_ERR_INVALID_ARG, "local MoE backend: layer %d has no experts", layer);
    if (n != o->n_experts)
        return ea_err(EA_ERR_INVALID_ARG, "local MoE backend: placement of %d slots, layer %d has %d", n, layer,
                      o->n_experts);
    for (int p = 0; p < n; p++)
        if (p2l[p] < 0 || p2l[p] >= o->n_logical)
            return ea_err(EA_ERR_RANGE, "local MoE backend: layer %d slot %d: expert %d not in [0, %d)", layer, p,
                          p2l[p], o->n_logical);
    ea_ffn_bind_slots(L->experts[layer], o->logical[layer], p2l, NULL, n);
    return EA_OK;
}

ea_ffn_weights *ea_moe_local_slot(ea_moe_backend *be, int layer, int slot) {
    ea__local *L = (ea__local *)be;
    if (layer < 0 || layer >= L->o.n_layers || !L->experts[layer] || slot < 0 || slot >= L->o.n_experts) return NULL;
    return &L->experts[layer][slot];
}

static void ea__local_destroy(ea_moe_backend *be) {
    ea__local *L = (ea__local *)be;
    if (!L) return;
    ea_free(L->experts);
    ea_free(L->slots);
    ea_free(L->mm);
    ea_free(L->count);
    ea_free(L->order);
    ea_free(L->at);
    ea_free(L->pe);
    ea_free(L->prow);
    ea_aligned_free(L->xg);
    ea_aligned_free(L->g);
    ea_aligned_free(L->u);
    ea_aligned_free(L->yo);
    ea_free(L);
}

static const ea_moe_backend_vtable ea__local_vt = {.submit = ea__local_submit,
                                                   .wait = ea__local_wait,
                                                   .apply_placement = ea__local_apply,
                                                   .destroy = ea__local_destroy,
                                                   .name = "local"};

/* The backend's own copy of the slot table. */
static ea_status ea__copy_table(ea__local *L, const ea_moe_local_opts *o) {
    size_t S = (size_t)o->n_experts;
    L->experts = ea_calloc((size_t)o->n_layers, sizeof *L->experts);
    L->slots = ea_calloc((size_t)o->n_layers * S, sizeof *L->slots);
    if (!L->experts || !L->slots) return ea_err(EA_ERR_NOMEM, "moe local backend: %d x %zu slots", o->n_layers, S);
    for (int l = 0; l < o->n_layers; l++) {
        if (!o->experts[l]) continue;
        L->experts[l] = L->slots + (size_t)l * S;
        memcpy(L->experts[l], o->experts[l], sizeof *L->slots * S);
    }
    return EA_OK;
}

ea_status ea_moe_local_create(const ea_moe_local_opts *o, ea_moe_backend **out) {
    *out = NULL;
    /* one expert may get every token of a call: its products have up to max_tokens rows */
    int kk = o->hidden > o->ff ? o->hidden : o->ff;
    if (ea_kctx_max_m(o->kctx) < o->max_tokens || ea_kctx_max_k(o->kctx) < kk)
        return ea_err(EA_ERR_INVALID_ARG, "moe local backend: its matmul context takes %d x %d, its calls need %d x %d",
                      ea_kctx_max_m(o->kctx), ea_kctx_max_k(o->kctx), o->max_tokens, kk);
    ea__local *L = ea_calloc(1, sizeof *L);
    if (!L) return ea_err(EA_ERR_NOMEM, "moe local backend");
    L->base.vt = &ea__local_vt;
    L->o = *o;
    size_t P = (size_t)o->max_tokens * (size_t)o->max_k;
    ea_status s = ea__copy_table(L, o);
    L->o.experts = NULL; /* borrowed during create only */
    if (s != EA_OK) {
        ea__local_destroy(&L->base);
        return s;
    }
    L->count = ea_calloc((size_t)o->n_experts + 1, sizeof(int32_t));
    L->order = ea_calloc(P, sizeof(int32_t));
    L->pe = ea_calloc(P, sizeof(int32_t));
    L->prow = ea_calloc(P, sizeof(int32_t));
    L->xg = ea_aligned_alloc(64, P * (size_t)o->hidden * sizeof(float));
    L->g = ea_aligned_alloc(64, P * (size_t)o->ff * sizeof(float));
    L->u = ea_aligned_alloc(64, P * (size_t)o->ff * sizeof(float));
    L->yo = ea_aligned_alloc(64, P * (size_t)o->hidden * sizeof(float));
    L->mm = ea_calloc(2 * (size_t)o->n_experts, sizeof(ea_k_mm));
    L->at = ea_calloc(P, sizeof(int32_t));
    if (!L->mm || !L->count || !L->order || !L->pe || !L->prow || !L->xg || !L->g || !L->u || !L->yo || !L->at) {
        ea__local_destroy(&L->base);
        return ea_err(EA_ERR_NOMEM, "moe local backend scratch (%zu pairs)", P);
    }
    *out = &L->base;
    return EA_OK;
}
