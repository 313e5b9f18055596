/*
 * refine.c — the "refined" placement: DeepSeek's result improved per layer by
 * local search on the quantity the score measures, the maximum rank load.
 *
 * Why: the reference is greedy (LPT packing with a fixed number of slots per
 * rank, replica counts chosen before packing, groups packed to nodes before
 * anything else), and leaves imbalance that a few exchanges remove. Each layer
 * is independent. Starting from the reference layer, repeat:
 *   let a be the most loaded rank (lowest index among equals), La its load;
 *   consider every move that changes rank a:
 *     swap      slot i on a with slot j on another rank b (different experts,
 *               lighter j): loads become La - d and Lb + d;
 *     retarget  slot i on a holds a replica of x with cnt[x] >= 2; make it a
 *               replica of y instead (x's other replicas get heavier, y's get
 *               lighter): this re-chooses the replica counts, which the
 *               reference fixes before it packs;
 *   take the move whose largest new load among the ranks it touches is
 *   smallest, if that is below La (by a relative 1e-12, against rounding noise);
 *   stop when no move qualifies or after 8*P moves.
 * Every accepted move lowers rank a below La and leaves every touched rank below
 * La, so the sorted vector of rank loads decreases strictly: the search ends.
 *
 * Hierarchical policy (nodes > 1): each expert keeps at least one replica on its
 * home node (where the reference's group packing put it), so group-limited
 * routing still finds every expert of a group inside the group's node; moves
 * that would take the last home replica away are skipped. Redundant replicas
 * may cross nodes — the dispatch map (meta.h) still prefers same rank, then
 * same node.
 *
 * Never worse: at the end the layer's maximum rank load is recomputed with the
 * scorer's own function (ea_eplb_layer_max_load) for the reference and the
 * candidate, and the candidate replaces the reference only if it is strictly
 * lower. So per layer, balancedness(refined) >= balancedness(reference), with
 * the same rounding on both sides.
 *
 * Output: phy2log and logcnt of the chosen placement; phyrank in slot order
 * (replica k of e is its k-th slot in ascending slot order).
 * Invariants: slots per rank never change (moves are swaps or relabels), every
 * expert keeps >= 1 replica, no allocation (workspace only).
 */
#include <string.h>

#include "eplb/eplb_internal.h"

static void ea__csr(ea_eplb_ws *ws, int E, int P) {
    ws->off[0] = 0;
    for (int e = 0; e < E; e++) {
        ws->off[e + 1] = ws->off[e] + ws->cnt[e];
        ws->cursor[e] = ws->off[e];
    }
    for (int p = 0; p < P; p++) ws->slots[ws->cursor[ws->p2l[p]]++] = p;
}

static void ea__loads(ea_eplb_ws *ws, int P, int R) {
    int ppr = P / R;
    for (int p = 0; p < P; p++) ws->sw[p] = ws->w[ws->p2l[p]] / (double)ws->cnt[ws->p2l[p]];
    for (int r = 0; r < R; r++) {
        double s = 0.0;
        for (int j = 0; j < ppr; j++) s += ws->sw[r * ppr + j];
        ws->rload[r] = s;
    }
}

static inline void ea__add(ea_eplb_ws *ws, int *nt, int r, double d) {
    if (ws->delta[r] == 0.0) {
        int seen = 0;
        for (int t = 0; t < *nt && !seen; t++) seen = ws->touched[t] == r;
        if (!seen) ws->touched[(*nt)++] = r;
    }
    ws->delta[r] += d;
}

/* Largest new load among touched ranks after a retarget of slot i (x -> y); resets delta. */
static double ea__retarget_max(ea_eplb_ws *ws, int ppr, int i, int x, int y) {
    int nt = 0;
    double gx = ws->w[x] / (double)(ws->cnt[x] - 1) - ws->w[x] / (double)ws->cnt[x];
    double ny = ws->w[y] / (double)(ws->cnt[y] + 1);
    double gy = ny - ws->w[y] / (double)ws->cnt[y];
    for (int k = ws->off[x]; k < ws->off[x + 1]; k++)
        if (ws->slots[k] != i) ea__add(ws, &nt, ws->slots[k] / ppr, gx);
    for (int k = ws->off[y]; k < ws->off[y + 1]; k++) ea__add(ws, &nt, ws->slots[k] / ppr, gy);
    ea__add(ws, &nt, i / ppr, ny - ws->sw[i]);
    double v = 0.0;
    for (int t = 0; t < nt; t++) {
        int r = ws->touched[t];
        double nl = ws->rload[r] + ws->delta[r];
        if (nl > v) v = nl;
        ws->delta[r] = 0.0;
    }
    return v;
}

static void ea__refine_layer(ea_eplb_ws *ws, const int64_t *c, int32_t *p2l_out, int32_t *prk_out, int32_t *lc_out) {
    int E = ws->s.n_logical, P = ws->s.n_physical, R = ws->s.n_ranks;
    int ppr = P / R, ppn = P / ws->s.n_nodes;
    double total = 0.0;
    for (int e = 0; e < E; e++) {
        ws->w[e] = (double)c[e];
        ws->cnt[e] = lc_out[e];
        ws->homecnt[e] = 0;
        total += ws->w[e];
    }
    if (total == 0.0) return;
    for (int p = 0; p < P; p++) {
        ws->p2l[p] = p2l_out[p];
        if (prk_out[p] == 0) ws->home[p2l_out[p]] = p / ppn;
    }
    for (int p = 0; p < P; p++) ws->homecnt[ws->p2l[p]] += ws->home[ws->p2l[p]] == p / ppn;
    for (int r = 0; r < R; r++) {
        ws->delta[r] = 0.0;
        ws->xr[r] = 0;
    }
    for (int e = 0; e < E; e++) ws->on_a[e] = 0;
    ea__csr(ws, E, P);
    ea__loads(ws, P, R);
    for (int iter = 0; iter < 8 * P; iter++) {
        int a = 0;
        for (int r = 1; r < R; r++)
            if (ws->rload[r] > ws->rload[a]) a = r;
        double La = ws->rload[a], bestv = La - La * 1e-12;
        int kind = 0, bi = -1, bj = -1; /* kind 1 swap (bi, slot bj), 2 retarget (bi, expert bj) */
        int na = a * ppr / ppn;
        for (int i = a * ppr; i < (a + 1) * ppr; i++) {
            int x = ws->p2l[i];
            for (int j = 0; j < P; j++) {
                int b = j / ppr, y = ws->p2l[j];
                double d = ws->sw[i] - ws->sw[j];
                if (b == a || x == y || d <= 0.0) continue;
                double nb = ws->rload[b] + d, v = nb > La - d ? nb : La - d;
                if (v >= bestv) continue;
                int nbn = j / ppn;
                if (nbn != na && ((ws->home[x] == na && ws->homecnt[x] < 2) || (ws->home[y] == nbn && ws->homecnt[y] < 2)))
                    continue;
                bestv = v;
                kind = 1;
                bi = i;
                bj = j;
            }
        }
        for (int i = a * ppr; i < (a + 1) * ppr; i++) ws->on_a[ws->p2l[i]]++;
        for (int i = a * ppr; i < (a + 1) * ppr; i++) {
            int x = ws->p2l[i];
            if (ws->cnt[x] < 2 || (ws->home[x] == na && ws->homecnt[x] < 2)) continue;
            /* Two bounds that hold for every y, so most y need no full evaluation:
             *  - rank a's new load is newa + (what y adds on a), and y adds >= 0;
             *  - ranks holding x's other replicas get heavier by gx each; only a y
             *    with a slot on one of those ranks can lower them again, so if the
             *    heaviest of them (mx) already reaches bestv, other y cannot win. */
            double gx = ws->w[x] / (double)(ws->cnt[x] - 1) - ws->w[x] / (double)ws->cnt[x];
            for (int k = ws->off[x]; k < ws->off[x + 1]; k++)
                if (ws->slots[k] != i) ws->xr[ws->slots[k] / ppr]++;
            double newa = La - ws->sw[i] + gx * (double)ws->xr[a], mx = 0.0;
            for (int k = ws->off[x]; k < ws->off[x + 1]; k++) {
                int r = ws->slots[k] / ppr;
                if (r != a && ws->rload[r] + gx * (double)ws->xr[r] > mx) mx = ws->rload[r] + gx * (double)ws->xr[r];
            }
            for (int y = 0; y < E && newa < bestv; y++) {
                if (y == x) continue;
                double ny = ws->w[y] / (double)(ws->cnt[y] + 1), oy = ws->w[y] / (double)ws->cnt[y];
                if (newa + ny + (double)ws->on_a[y] * (ny - oy) >= bestv) continue;
                if (mx >= bestv) {
                    int shares = 0;
                    for (int k = ws->off[y]; k < ws->off[y + 1] && !shares; k++) {
                        int r = ws->slots[k] / ppr;
                        shares = r != a && ws->xr[r] > 0;
                    }
                    if (!shares) continue;
                }
                double v = ea__retarget_max(ws, ppr, i, x, y);
                if (v < bestv) {
                    bestv = v;
                    kind = 2;
                    bi = i;
                    bj = y;
                }
            }
            for (int k = ws->off[x]; k < ws->off[x + 1]; k++) ws->xr[ws->slots[k] / ppr] = 0;
        }
        for (int i = a * ppr; i < (a + 1) * ppr; i++) ws->on_a[ws->p2l[i]] = 0;
        if (kind == 0) break;
        if (kind == 1) {
            int x = ws->p2l[bi], y = ws->p2l[bj];
            int ni = bi / ppn, nj = bj / ppn;
            ws->homecnt[x] += (ws->home[x] == nj) - (ws->home[x] == ni);
            ws->homecnt[y] += (ws->home[y] == ni) - (ws->home[y] == nj);
            ws->p2l[bi] = y;
            ws->p2l[bj] = x;
        } else {
            int x = ws->p2l[bi], y = bj, ni = bi / ppn;
            ws->homecnt[x] -= ws->home[x] == ni;
            ws->homecnt[y] += ws->home[y] == ni;
            ws->cnt[x]--;
            ws->cnt[y]++;
            ws->p2l[bi] = y;
        }
        ea__csr(ws, E, P);
        ea__loads(ws, P, R);
    }
    double ref = ea_eplb_layer_max_load(p2l_out, lc_out, c, P, R);
    double mine = ea_eplb_layer_max_load(ws->p2l, ws->cnt, c, P, R);
    if (mine < ref) {
        memcpy(p2l_out, ws->p2l, (size_t)P * sizeof *p2l_out);
        ea__eplb_ranks_from_p2l(p2l_out, P, E, prk_out, lc_out);
    }
}

ea_status ea_eplb_refine(ea_eplb_ws *ws, const int64_t *counts, ea_eplb_placement *pl) {
    const ea_eplb_shape *s = &ws->s;
    if (pl->n_layers != s->n_layers || pl->n_logical != s->n_logical || pl->n_physical != s->n_physical)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB refine: placement %dx%dx%d does not match workspace %dx%dx%d",
                      pl->n_layers, pl->n_logical, pl->n_physical, s->n_layers, s->n_logical, s->n_physical);
    size_t E = (size_t)s->n_logical, P = (size_t)s->n_physical;
    for (int l = 0; l < s->n_layers; l++)
        ea__refine_layer(ws, counts + l * E, pl->phy2log + l * P, pl->phyrank + l * P, pl->logcnt + l * E);
    return EA_OK;
}
