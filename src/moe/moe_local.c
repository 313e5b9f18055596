/*
 * moe_local.c — the local backend; see moe_local.h.
 *
 * Per call, with n tokens and k slots (P = n*k pairs):
 *   1. counting sort of pairs by expert id -> order[P] (stable: pair index order)
 *   2. per expert e with c > 0 pairs: xg (c, hidden) = gathered rows;
 *      g = xg·gateᵀ (c, ff), u = xg·upᵀ, g = silu(g)*u, o = g·downᵀ (c, hidden);
 *      o's rows go to ys[pair] (P, hidden)
 *   3. y[t] = 0; for j in 0..k-1: y[t] += w[t][j] * ys[t*k+j]
 * All scratch is allocated at create for max_tokens*max_k pairs; a call never
 * allocates. Step 2's rows never mix across tokens (batch-invariant matmul),
 * step 3's order is fixed: the sum is the same bits for any grouping.
 */
#include "moe/moe_local.h"

#include <string.h>

#include "base/alloc.h"
#include "kernels/ops.h"

typedef struct {
    ea_moe_backend base;
    ea_moe_local_opts o;
    ea_ffn_weights **experts; /* owns the array (copied from opts); borrows the weights */
    int32_t *count;  /* (n_experts + 1) */
    int32_t *order;  /* (P) pair indices sorted by expert */
    int32_t *pe;     /* (P) expert of each pair */
    int32_t *prow;   /* (P) token row of each pair */
    float *xg;       /* (P, hidden) input rows, grouped by expert */
    float *g, *u;    /* (P, ff) */
    float *yo;       /* (P, hidden) expert output rows, grouped by expert */
    ea_k_mm *mm;     /* (2 * n_experts) products of one batched call */
    float *ys;       /* (P, hidden) per-pair outputs */
} ea__local;

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
    for (int p = 0; p < n_pairs; p++) L->order[L->count[pexp[p]]++] = p;
    for (int i = 0; i < n_pairs; i++)
        memcpy(L->xg + (size_t)i * H, x + (size_t)prow[L->order[i]] * H, sizeof(float) * H);
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
    for (int i = 0; i < n_pairs; i++) ea_k_silu_mul(L->g + (size_t)i * F, L->u + (size_t)i * F, F);
    n_mm = 0;
    start = 0;
    for (int e = 0; e < E; e++) {
        int c = L->count[e] - start;
        if (c > 0) L->mm[n_mm++] = (ea_k_mm){&ex[e].down, L->g + (size_t)start * F, c, L->yo + (size_t)start * H};
        start = L->count[e];
    }
    for (int i = 0; i < n_mm; i += EA_K_BATCH_MAX)
        ea_k_matmul_batch(o->kctx, L->mm + i, n_mm - i < EA_K_BATCH_MAX ? n_mm - i : EA_K_BATCH_MAX);
    for (int i = 0; i < n_pairs; i++)
        memcpy(out + (size_t)L->order[i] * H, L->yo + (size_t)i * H, sizeof(float) * H);
    return EA_OK;
}

static ea_status ea__local_forward(ea_moe_backend *be, int layer, const float *x, int n, int k,
                                   const int32_t *ids, const float *w, float *y) {
    ea__local *L = (ea__local *)be;
    int H = L->o.hidden;
    if (n > L->o.max_tokens || k > L->o.max_k)
        return ea_err(EA_ERR_RANGE, "moe call of %d tokens x %d slots exceeds %d x %d", n, k,
                      L->o.max_tokens, L->o.max_k);
    int P = n * k;
    for (int p = 0; p < P; p++) {
        L->prow[p] = p / k;
        L->pe[p] = ids[p];
    }
    EA_TRY(ea__run_pairs(L, layer, x, P, L->prow, L->pe, L->ys));
    for (int t = 0; t < n; t++) {
        float *yt = y + (size_t)t * H;
        memset(yt, 0, sizeof(float) * H);
        for (int j = 0; j < k; j++) ea_k_axpy(w[t * k + j], L->ys + (size_t)(t * k + j) * H, yt, H);
    }
    return EA_OK;
}

ea_status ea_moe_run_pairs(ea_moe_backend *be, int layer, const float *x, int n_pairs,
                           const int32_t *pair_row, const int32_t *pair_expert, float *out) {
    ea__local *L = (ea__local *)be;
    if (n_pairs > L->o.max_tokens * L->o.max_k)
        return ea_err(EA_ERR_RANGE, "%d pairs exceed %d", n_pairs, L->o.max_tokens * L->o.max_k);
    return ea__run_pairs(L, layer, x, n_pairs, pair_row, pair_expert, out);
}

static void ea__local_destroy(ea_moe_backend *be) {
    ea__local *L = (ea__local *)be;
    if (!L) return;
    ea_free(L->experts);
    ea_free(L->mm);
    ea_free(L->count);
    ea_free(L->order);
    ea_free(L->pe);
    ea_free(L->prow);
    ea_aligned_free(L->xg);
    ea_aligned_free(L->g);
    ea_aligned_free(L->u);
    ea_aligned_free(L->yo);
    ea_aligned_free(L->ys);
    ea_free(L);
}

static const ea_moe_backend_vtable ea__local_vt = {ea__local_forward, NULL, ea__local_destroy, "local"};

ea_status ea_moe_local_create(const ea_moe_local_opts *o, ea_moe_backend **out) {
    *out = NULL;
    ea__local *L = ea_calloc(1, sizeof *L);
    if (!L) return ea_err(EA_ERR_NOMEM, "moe local backend");
    L->base.vt = &ea__local_vt;
    L->o = *o;
    size_t P = (size_t)o->max_tokens * (size_t)o->max_k;
    L->experts = ea_calloc((size_t)o->n_layers, sizeof *L->experts);
    if (L->experts) memcpy(L->experts, o->experts, sizeof *L->experts * (size_t)o->n_layers);
    L->count = ea_calloc((size_t)o->n_experts + 1, sizeof(int32_t));
    L->order = ea_calloc(P, sizeof(int32_t));
    L->pe = ea_calloc(P, sizeof(int32_t));
    L->prow = ea_calloc(P, sizeof(int32_t));
    L->xg = ea_aligned_alloc(64, P * (size_t)o->hidden * sizeof(float));
    L->g = ea_aligned_alloc(64, P * (size_t)o->ff * sizeof(float));
    L->u = ea_aligned_alloc(64, P * (size_t)o->ff * sizeof(float));
    L->yo = ea_aligned_alloc(64, P * (size_t)o->hidden * sizeof(float));
    L->mm = ea_calloc(2 * (size_t)o->n_experts, sizeof(ea_k_mm));
    L->ys = ea_aligned_alloc(64, P * (size_t)o->hidden * sizeof(float));
    if (!L->mm || !L->experts || !L->count || !L->order || !L->pe || !L->prow || !L->xg || !L->g || !L->u || !L->yo || !L->ys) {
        ea__local_destroy(&L->base);
        return ea_err(EA_ERR_NOMEM, "moe local backend scratch (%zu pairs)", P);
    }
    *out = &L->base;
    return EA_OK;
}
