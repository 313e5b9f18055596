/*
 * deepseek.c — DeepSeek's EPLB, reproduced exactly (../shared/eplb/README.md).
 *
 * Why a port and not a re-design: the expected outputs in ../shared/eplb/ come
 * from the public reference, and a placement that other systems (SGLang, vLLM)
 * compute from the same counts must come out the same here. So every step keeps
 * the reference's arithmetic:
 *   - counts are cast to float32; group loads and pack totals are float32 sums
 *     accumulated in assignment order; per-replica loads are float32 divisions
 *     x / (float)cnt; comparisons are on float32 values (never cross-multiplied);
 *   - sorts are descending and stable (equal keys keep index order);
 *   - argmax and "smallest pack" take the first index among equals.
 * The algorithm (per layer; global policy = one group on one node):
 *   1. groups -> nodes by balanced packing of group loads;
 *   2. per node, replicate its experts into Pn slots (heaviest load per replica
 *      gets the next slot);
 *   3. per node, balanced packing of the Pn slots onto its Gn ranks;
 *   4. compose the permutations into phy2log / phyrank / logcnt.
 * Invariants: no allocation after ea_eplb_ws_create; the result depends only on
 * the counts and the shape (no hidden state in the workspace between calls).
 */
#include <string.h>

#include "base/alloc.h"
#include "eplb/eplb_internal.h"

ea_status ea_eplb_algo_parse(const char *name, ea_eplb_algo *out) {
    if (name && strcmp(name, "deepseek") == 0) *out = EA_EPLB_DEEPSEEK;
    else if (name && strcmp(name, "refined") == 0) *out = EA_EPLB_REFINED;
    else
        return ea_err(EA_ERR_INVALID_ARG, "unknown EPLB algorithm '%s' (choose deepseek or refined)",
                      name ? name : "(null)");
    return EA_OK;
}

const char *ea_eplb_algo_name(ea_eplb_algo a) { return a == EA_EPLB_REFINED ? "refined" : "deepseek"; }

int ea_eplb_shape_policy(ea_eplb_shape *s) {
    if (s->n_groups <= 0 || s->n_nodes <= 0) return 0; /* left for ea_eplb_shape_check to report */
    if (s->n_groups % s->n_nodes == 0) return s->n_nodes > 1 || s->n_groups > 1;
    s->n_groups = 1;
    s->n_nodes = 1;
    return 0;
}

ea_status ea_eplb_shape_check(const ea_eplb_shape *s) {
    if (s->n_layers <= 0 || s->n_logical <= 0 || s->n_physical <= 0 || s->n_groups <= 0 ||
        s->n_nodes <= 0 || s->n_ranks <= 0)
        return ea_err(EA_ERR_INVALID_ARG,
                      "EPLB shape: layers %d, logical %d, physical %d, groups %d, nodes %d, ranks %d must all be > 0",
                      s->n_layers, s->n_logical, s->n_physical, s->n_groups, s->n_nodes, s->n_ranks);
    if (s->n_physical < s->n_logical)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB shape: physical %d < logical %d", s->n_physical, s->n_logical);
    if (s->n_physical - s->n_logical > EA_EPLB_MAX_REDUNDANT)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB shape: %d redundant slots > %d", s->n_physical - s->n_logical,
                      EA_EPLB_MAX_REDUNDANT);
    if (s->n_logical % s->n_groups)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB shape: logical %d not divisible by groups %d", s->n_logical,
                      s->n_groups);
    if (s->n_groups % s->n_nodes)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB shape: groups %d not divisible by nodes %d (hierarchical policy)",
                      s->n_groups, s->n_nodes);
    if (s->n_ranks % s->n_nodes)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB shape: ranks %d not divisible by nodes %d", s->n_ranks, s->n_nodes);
    if (s->n_physical % s->n_ranks)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB shape: physical %d not divisible by ranks %d", s->n_physical,
                      s->n_ranks);
    return EA_OK;
}

void ea_eplb_ws_destroy(ea_eplb_ws *ws) {
    if (!ws) return;
    void *ptrs[] = {ws->wf,     ws->gload, ws->gpack,    ws->grank,    ws->log2mlog, ws->mlog2log,
                    ws->y,      ws->ratio, ws->mcnt,     ws->phy2mlog, ws->prank,    ws->z,
                    ws->pk,     ws->rk,    ws->pphy2phy, ws->sidx,     ws->stmp,     ws->packw,
                    ws->packn,  ws->w,     ws->sw,       ws->rload,    ws->delta,    ws->p2l,
                    ws->cnt,    ws->home,  ws->homecnt,  ws->off,      ws->slots,    ws->touched, ws->cursor, ws->xr, ws->on_a};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) ea_free(ptrs[i]);
    ea_free(ws);
}

ea_status ea_eplb_ws_create(const ea_eplb_shape *s, ea_eplb_ws **out) {
    *out = NULL;
    EA_TRY(ea_eplb_shape_check(s));
    ea_eplb_ws *ws = ea_calloc(1, sizeof *ws);
    if (!ws) return ea_err(EA_ERR_NOMEM, "EPLB workspace");
    ws->s = *s;
    int E = s->n_logical, P = s->n_physical, G = s->n_groups, N = s->n_nodes, R = s->n_ranks;
    ws->gs = E / G;
    ws->gpn = G / N;
    ws->En = E / N;
    ws->Pn = P / N;
    ws->Gn = R / N;
    ws->ppg = P / R;
    size_t nsort = (size_t)(ws->Pn > G ? ws->Pn : G), npack = (size_t)(N > ws->Gn ? N : ws->Gn);
    size_t e = (size_t)E, p = (size_t)P, g = (size_t)G, en = (size_t)ws->En, pn = (size_t)ws->Pn;
#define EA__A(field, n) (ws->field = ea_calloc((n) ? (n) : 1, sizeof *ws->field)) == NULL
    if (EA__A(wf, e) || EA__A(gload, g) || EA__A(gpack, g) || EA__A(grank, g) || EA__A(log2mlog, e) ||
        EA__A(mlog2log, e) || EA__A(y, en) || EA__A(ratio, en) || EA__A(mcnt, e) || EA__A(phy2mlog, pn) ||
        EA__A(prank, pn) || EA__A(z, pn) || EA__A(pk, pn) || EA__A(rk, pn) || EA__A(pphy2phy, pn) ||
        EA__A(sidx, nsort) || EA__A(stmp, nsort) || EA__A(packw, npack) || EA__A(packn, npack) ||
        EA__A(w, e) || EA__A(sw, p) || EA__A(rload, (size_t)R) || EA__A(delta, (size_t)R) || EA__A(p2l, p) ||
        EA__A(cnt, e) || EA__A(home, e) || EA__A(homecnt, e) || EA__A(off, e + 1) || EA__A(slots, p) ||
        EA__A(touched, (size_t)R) || EA__A(cursor, e) || EA__A(xr, (size_t)R) || EA__A(on_a, e)) {
        ea_eplb_ws_destroy(ws);
        return ea_err(EA_ERR_NOMEM, "EPLB workspace for %d layers x %d experts x %d slots", s->n_layers, E, P);
    }
#undef EA__A
    *out = ws;
    return EA_OK;
}

/* a before b in descending order, ties by lower index: a total order, so the
 * merge sort below gives exactly the stable descending sort. */
static inline int ea__before(const float *x, int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); }

void ea__eplb_sort_desc(const float *x, int n, int32_t *idx, int32_t *tmp) {
    for (int i = 0; i < n; i++) idx[i] = i;
    /* bottom-up merge sort: runs of width w, merged into tmp, then swapped back */
    int32_t *src = idx, *dst = tmp;
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = ea__before(x, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx) memcpy(idx, src, (size_t)n * sizeof *idx);
}

void ea__eplb_pack(ea_eplb_ws *ws, const float *x, int n, int m, int32_t *pack, int32_t *rank) {
    int k = n / m;
    if (k == 1) {
        for (int i = 0; i < n; i++) {
            pack[i] = i;
            rank[i] = 0;
        }
        return;
    }
    ea__eplb_sort_desc(x, n, ws->sidx, ws->stmp);
    float *pw = ws->packw;
    int32_t *pn = ws->packn;
    for (int b = 0; b < m; b++) {
        pw[b] = 0.0f;
        pn[b] = 0;
    }
    for (int t = 0; t < n; t++) {
        int32_t it = ws->sidx[t];
        int best = -1;
        for (int b = 0; b < m; b++)
            if (pn[b] < k && (best < 0 || pw[b] < pw[best])) best = b;
        pack[it] = best;
        rank[it] = pn[best]++;
        pw[best] += x[it];
    }
}

void ea__eplb_replicate(ea_eplb_ws *ws, const float *x, int n, int q, int32_t *phy2log, int32_t *rank,
                        int32_t *cnt) {
    float *ratio = ws->ratio;
    for (int i = 0; i < n; i++) {
        phy2log[i] = i;
        rank[i] = 0;
        cnt[i] = 1;
        ratio[i] = x[i]; /* x / 1.0f is x */
    }
    for (int i = n; i < q; i++) {
        int j = 0;
        float best = ratio[0];
        for (int e = 1; e < n; e++)
            if (ratio[e] > best) {
                best = ratio[e];
                j = e;
            }
        phy2log[i] = j;
        rank[i] = cnt[j]++;
        ratio[j] = x[j] / (float)cnt[j];
    }
}

void ea__eplb_ranks_from_p2l(const int32_t *p2l, int n_physical, int n_logical, int32_t *rank, int32_t *cnt) {
    for (int e = 0; e < n_logical; e++) cnt[e] = 0;
    for (int p = 0; p < n_physical; p++) rank[p] = cnt[p2l[p]]++;
}

ea_status ea_eplb_deepseek(ea_eplb_ws *ws, const int64_t *counts, ea_eplb_placement *pl) {
    const ea_eplb_shape *s = &ws->s;
    if (pl->n_layers != s->n_layers || pl->n_logical != s->n_logical || pl->n_physical != s->n_physical)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB: placement %dx%dx%d does not match workspace %dx%dx%d",
                      pl->n_layers, pl->n_logical, pl->n_physical, s->n_layers, s->n_logical, s->n_physical);
    int E = s->n_logical, P = s->n_physical, G = s->n_groups, N = s->n_nodes;
    int gs = ws->gs, gpn = ws->gpn, En = ws->En, Pn = ws->Pn, Gn = ws->Gn, ppg = ws->ppg;
    for (int l = 0; l < s->n_layers; l++) {
        const int64_t *c = counts + (size_t)l * E;
        for (int e = 0; e < E; e++) {
            if (c[e] < 0) return ea_err(EA_ERR_INVALID_ARG, "EPLB: layer %d expert %d has negative count %lld", l, e,
                                        (long long)c[e]);
            ws->wf[e] = (float)c[e];
        }
        /* 1. groups -> nodes */
        for (int g = 0; g < G; g++) {
            float sum = 0.0f;
            for (int j = 0; j < gs; j++) sum += ws->wf[g * gs + j];
            ws->gload[g] = sum;
        }
        ea__eplb_pack(ws, ws->gload, G, N, ws->gpack, ws->grank);
        for (int g = 0; g < G; g++)
            for (int j = 0; j < gs; j++) {
                int32_t m = (ws->gpack[g] * gpn + ws->grank[g]) * gs + j;
                ws->log2mlog[g * gs + j] = m;
                ws->mlog2log[m] = g * gs + j;
            }
        int32_t *p2l = pl->phy2log + (size_t)l * P, *prk = pl->phyrank + (size_t)l * P;
        for (int n = 0; n < N; n++) {
            /* 2. replicate inside the node */
            for (int k = 0; k < En; k++) ws->y[k] = ws->wf[ws->mlog2log[n * En + k]];
            int32_t *mcnt = ws->mcnt + (size_t)n * En;
            ea__eplb_replicate(ws, ws->y, En, Pn, ws->phy2mlog, ws->prank, mcnt);
            /* 3. slots -> ranks of the node */
            for (int i = 0; i < Pn; i++) ws->z[i] = ws->y[ws->phy2mlog[i]] / (float)mcnt[ws->phy2mlog[i]];
            ea__eplb_pack(ws, ws->z, Pn, Gn, ws->pk, ws->rk);
            for (int i = 0; i < Pn; i++) ws->pphy2phy[ws->pk[i] * ppg + ws->rk[i]] = i;
            /* 4. compose */
            for (int j = 0; j < Pn; j++) {
                int32_t i = ws->pphy2phy[j];
                p2l[n * Pn + j] = ws->mlog2log[n * En + ws->phy2mlog[i]];
                prk[n * Pn + j] = ws->prank[i];
            }
        }
        int32_t *lc = pl->logcnt + (size_t)l * E;
        for (int e = 0; e < E; e++) lc[e] = ws->mcnt[ws->log2mlog[e]];
    }
    return EA_OK;
}

ea_status ea_eplb_rebalance(ea_eplb_ws *ws, ea_eplb_algo algo, const int64_t *counts, ea_eplb_placement *pl) {
    EA_TRY(ea_eplb_deepseek(ws, counts, pl));
    if (algo == EA_EPLB_REFINED) EA_TRY(ea_eplb_refine(ws, counts, pl));
    return EA_OK;
}
