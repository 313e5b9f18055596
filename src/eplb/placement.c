/*
 * placement.c — the placement arrays (ea_eplb_placement) and how a placement is
 * scored against token counts (../shared/eplb/README.md, "How placements are
 * scored").
 *
 * Scoring model: the tokens of a logical expert are split evenly over its
 * replicas, so slot p holding expert e carries counts[e] / logcnt[e]; a rank's
 * load is the sum over its P/ranks slots; balancedness = mean rank load / max
 * rank load (1.0 perfect; 1.0 for a layer without tokens). The mean rank load
 * does not depend on the placement (it is the layer's total / ranks), so a higher
 * balancedness is exactly a lower maximum rank load.
 * Arithmetic is double, summed in slot order, so two placements are compared
 * with the same rounding everywhere.
 */
#include <string.h>

#include "base/alloc.h"
#include "eplb/eplb.h"

ea_status ea_eplb_placement_init(ea_eplb_placement *pl, int n_layers, int n_logical, int n_physical) {
    memset(pl, 0, sizeof *pl);
    if (n_layers <= 0 || n_logical <= 0 || n_physical <= 0)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB placement %dx%dx%d: sizes must be > 0", n_layers, n_logical,
                      n_physical);
    size_t lp, le;
    if (!ea_mul_ok((size_t)n_layers, (size_t)n_physical, &lp) || !ea_mul_ok((size_t)n_layers, (size_t)n_logical, &le))
        return ea_err(EA_ERR_RANGE, "EPLB placement %dx%dx%d too large", n_layers, n_logical, n_physical);
    pl->phy2log = ea_calloc(lp, sizeof *pl->phy2log);
    pl->phyrank = ea_calloc(lp, sizeof *pl->phyrank);
    pl->logcnt = ea_calloc(le, sizeof *pl->logcnt);
    if (!pl->phy2log || !pl->phyrank || !pl->logcnt) {
        ea_eplb_placement_deinit(pl);
        return ea_err(EA_ERR_NOMEM, "EPLB placement %dx%dx%d", n_layers, n_logical, n_physical);
    }
    pl->n_layers = n_layers;
    pl->n_logical = n_logical;
    pl->n_physical = n_physical;
    return EA_OK;
}

void ea_eplb_placement_deinit(ea_eplb_placement *pl) {
    if (!pl) return;
    ea_free(pl->phy2log);
    ea_free(pl->phyrank);
    ea_free(pl->logcnt);
    memset(pl, 0, sizeof *pl);
}

void ea_eplb_placement_trivial(ea_eplb_placement *pl) {
    int E = pl->n_logical, P = pl->n_physical;
    for (int l = 0; l < pl->n_layers; l++) {
        int32_t *lc = pl->logcnt + (size_t)l * E;
        for (int e = 0; e < E; e++) lc[e] = 0;
        for (int p = 0; p < P; p++) {
            int32_t e = p % E;
            pl->phy2log[(size_t)l * P + p] = e;
            pl->phyrank[(size_t)l * P + p] = lc[e]++;
        }
    }
}

int ea_eplb_placement_max_replicas(const ea_eplb_placement *pl) {
    int m = 0;
    size_t n = (size_t)pl->n_layers * (size_t)pl->n_logical;
    for (size_t i = 0; i < n; i++)
        if (pl->logcnt[i] > m) m = pl->logcnt[i];
    return m;
}

double ea_eplb_layer_max_load(const int32_t *phy2log, const int32_t *logcnt, const int64_t *c, int n_physical,
                              int n_ranks) {
    int per = n_physical / n_ranks;
    double mx = 0.0;
    for (int r = 0; r < n_ranks; r++) {
        double load = 0.0;
        for (int j = 0; j < per; j++) {
            int32_t e = phy2log[r * per + j];
            load += (double)c[e] / (double)logcnt[e];
        }
        if (load > mx) mx = load;
    }
    return mx;
}

static void ea__score_finish(const double *bal, int L, ea_eplb_score *out) {
    double sum = 0.0;
    out->worst = 2.0;
    out->worst_layer = 0;
    for (int l = 0; l < L; l++) {
        sum += bal[l];
        if (bal[l] < out->worst) {
            out->worst = bal[l];
            out->worst_layer = l;
        }
    }
    out->mean = sum / (double)L;
}

static double ea__layer_total(const int64_t *c, int E) {
    double t = 0.0;
    for (int e = 0; e < E; e++) t += (double)c[e];
    return t;
}

ea_status ea_eplb_score_placement(const ea_eplb_placement *pl, const int64_t *counts, int n_ranks, double *per_layer,
                                  ea_eplb_score *out) {
    int L = pl->n_layers, E = pl->n_logical, P = pl->n_physical;
    if (n_ranks <= 0 || P % n_ranks)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB score: %d slots do not split over %d ranks", P, n_ranks);
    double *bal = per_layer ? per_layer : ea_malloc((size_t)L * sizeof *bal);
    if (!bal) return ea_err(EA_ERR_NOMEM, "EPLB score");
    for (int l = 0; l < L; l++) {
        const int64_t *c = counts + (size_t)l * E;
        const int32_t *lc = pl->logcnt + (size_t)l * E;
        for (int e = 0; e < E; e++)
            if (lc[e] <= 0 && c[e] > 0) {
                if (bal != per_layer) ea_free(bal);
                return ea_err(EA_ERR_INVALID_ARG, "EPLB score: layer %d expert %d has %lld tokens and no replica", l,
                              e, (long long)c[e]);
            }
        double mx = ea_eplb_layer_max_load(pl->phy2log + (size_t)l * P, lc, c, P, n_ranks);
        double mean = ea__layer_total(c, E) / (double)n_ranks;
        bal[l] = mx > 0.0 ? mean / mx : 1.0;
    }
    ea__score_finish(bal, L, out);
    if (bal != per_layer) ea_free(bal);
    return EA_OK;
}

ea_status ea_eplb_score_baseline(const int64_t *counts, int n_layers, int n_logical, int n_ranks, double *per_layer,
                                 ea_eplb_score *out) {
    if (n_layers <= 0 || n_logical <= 0 || n_ranks <= 0)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB baseline: layers %d experts %d ranks %d", n_layers, n_logical,
                      n_ranks);
    double *bal = per_layer ? per_layer : ea_malloc((size_t)n_layers * sizeof *bal);
    if (!bal) return ea_err(EA_ERR_NOMEM, "EPLB baseline score");
    int E = n_logical, G = n_ranks;
    for (int l = 0; l < n_layers; l++) {
        const int64_t *c = counts + (size_t)l * E;
        double mx = 0.0;
        for (int g = 0; g < G; g++) {
            int lo = (int)((long long)g * E / G), hi = (int)((long long)(g + 1) * E / G);
            double load = 0.0;
            for (int e = lo; e < hi; e++) load += (double)c[e];
            if (load > mx) mx = load;
        }
        double mean = ea__layer_total(c, E) / (double)G;
        bal[l] = mx > 0.0 ? mean / mx : 1.0;
    }
    ea__score_finish(bal, n_layers, out);
    if (bal != per_layer) ea_free(bal);
    return EA_OK;
}
