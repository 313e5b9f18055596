/*
 * manager.c — the rebalance manager's state machine (contract in manager.h).
 *
 * States: idle (counting steps) -> planning (placement computed, chunks of
 * layers pending) -> awaiting commit (a chunk handed out) -> planning/idle.
 * Invariants: the current metadata changes only in commit, only for the layers
 * of the chunk just handed out, and only on success; `next` is valid (passed
 * the invariant check) whenever a plan is in progress.
 */
#include "eplb/manager.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

struct ea_eplb_manager {
    ea_eplb_manager_cfg cfg;
    ea_eplb_shape shape;
    ea_eplb_ws *ws;          /* owns */
    ea_eplb_placement pl;    /* owns: algorithm output */
    ea_eplb_meta next;       /* owns: the planned placement */
    double *bal;             /* owns [L] per-layer scratch */
    int32_t *plan;           /* owns [L] layers to switch, ascending */
    int n_plan, plan_pos;    /* plan[plan_pos ..) still to hand out */
    int chunk_pos, chunk_n;  /* the chunk awaiting commit (chunk_n == 0: none) */
    uint64_t steps;
    ea_eplb_manager_stats stats;
};

void ea_eplb_manager_destroy(ea_eplb_manager *m) {
    if (!m) return;
    ea_eplb_ws_destroy(m->ws);
    ea_eplb_placement_deinit(&m->pl);
    ea_eplb_meta_deinit(&m->next);
    ea_free(m->bal);
    ea_free(m->plan);
    ea_free(m);
}

ea_status ea_eplb_manager_create(const ea_eplb_manager_cfg *cfg, const ea_eplb_meta *cur, ea_eplb_manager **out) {
    *out = NULL;
    if (cfg->interval < 1 || cfg->layers_per_step < 0)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB manager: interval %d must be >= 1, layers per step %d >= 0",
                      cfg->interval, cfg->layers_per_step);
    ea_eplb_manager *m = ea_calloc(1, sizeof *m);
    if (!m) return ea_err(EA_ERR_NOMEM, "EPLB manager");
    m->cfg = *cfg;
    m->shape = (ea_eplb_shape){cur->n_layers, cur->n_logical, cur->n_physical, cfg->n_groups > 0 ? cfg->n_groups : 1,
                               cur->n_nodes, cur->n_ranks};
    ea_eplb_shape_policy(&m->shape);
    ea_status st = ea_eplb_ws_create(&m->shape, &m->ws);
    if (st == EA_OK) st = ea_eplb_placement_init(&m->pl, cur->n_layers, cur->n_logical, cur->n_physical);
    if (st == EA_OK)
        st = ea_eplb_meta_init(&m->next, cur->n_layers, cur->n_logical, cur->n_physical, cur->n_ranks, cur->n_nodes);
    if (st == EA_OK) {
        m->bal = ea_malloc((size_t)cur->n_layers * sizeof *m->bal);
        m->plan = ea_malloc((size_t)cur->n_layers * sizeof *m->plan);
        if (!m->bal || !m->plan) st = ea_err(EA_ERR_NOMEM, "EPLB manager plan");
    }
    if (st != EA_OK) {
        ea_eplb_manager_destroy(m);
        return st;
    }
    m->stats.last_balancedness = 1.0;
    *out = m;
    return EA_OK;
}

/* Mean balancedness of a metadata's placement on counts (no allocation). */
static double ea__meta_balancedness(ea_eplb_manager *m, const ea_eplb_meta *meta, const int64_t *counts) {
    int L = meta->n_layers, E = meta->n_logical, P = meta->n_physical, R = meta->n_ranks;
    double sum = 0.0;
    for (int l = 0; l < L; l++) {
        const int64_t *c = counts + (size_t)l * E;
        double total = 0.0;
        for (int e = 0; e < E; e++) total += (double)c[e];
        double mx = ea_eplb_layer_max_load(meta->phy2log + (size_t)l * P, meta->log2all_n + (size_t)l * E, c, P, R);
        m->bal[l] = mx > 0.0 ? total / (double)R / mx : 1.0;
        sum += m->bal[l];
    }
    return sum / (double)L;
}

static void ea__fail(ea_eplb_manager *m, const char *what) {
    snprintf(m->stats.reason, sizeof m->stats.reason, "%s: %s", what, ea_errmsg());
    m->stats.n_failures++;
    EA_LOGW("eplb: %s; keeping the current placement", m->stats.reason);
}

static void ea__hand_out(ea_eplb_manager *m, ea_eplb_step_result *out) {
    int k = m->cfg.layers_per_step > 0 ? m->cfg.layers_per_step : m->n_plan;
    int left = m->n_plan - m->plan_pos;
    m->chunk_pos = m->plan_pos;
    m->chunk_n = k < left ? k : left;
    m->plan_pos += m->chunk_n;
    out->action = EA_EPLB_SWITCH;
    out->layers = m->plan + m->chunk_pos;
    out->n_layers = m->chunk_n;
}

ea_status ea_eplb_manager_step(ea_eplb_manager *m, const ea_eplb_meta *cur, const int64_t *counts,
                               ea_eplb_step_result *out) {
    memset(out, 0, sizeof *out);
    out->balancedness_before = out->balancedness_after = -1.0;
    if (m->chunk_n) return ea_err(EA_ERR_INVALID_ARG, "EPLB manager: step before committing the last switch");
    if (m->plan_pos < m->n_plan) {
        ea__hand_out(m, out);
        return EA_OK;
    }
    m->steps++;
    if (m->steps % (uint64_t)m->cfg.interval) return EA_OK;
    int L = cur->n_layers, E = cur->n_logical, P = cur->n_physical;
    int64_t total = 0;
    for (size_t i = 0; i < (size_t)L * E; i++) total += counts[i];
    if (total == 0) {
        out->action = EA_EPLB_SKIP_NO_DATA;
        return EA_OK;
    }
    out->balancedness_before = m->stats.last_balancedness = ea__meta_balancedness(m, cur, counts);
    if (out->balancedness_before >= m->cfg.min_balancedness) {
        out->action = EA_EPLB_SKIP_BALANCED;
        return EA_OK;
    }
    ea_status st = ea_eplb_rebalance(m->ws, m->cfg.algo, counts, &m->pl);
    for (int l = 0; l < L && st == EA_OK; l++)
        st = ea_eplb_meta_set_layer(&m->next, l, m->pl.phy2log + (size_t)l * P, m->pl.phyrank + (size_t)l * P);
    if (st != EA_OK) {
        ea__fail(m, "computing the new placement failed");
        out->action = EA_EPLB_FAILED;
        return EA_OK;
    }
    out->balancedness_after = ea__meta_balancedness(m, &m->next, counts);
    m->n_plan = m->plan_pos = 0;
    for (int l = 0; l < L; l++)
        if (memcmp(cur->phy2log + (size_t)l * P, m->next.phy2log + (size_t)l * P, (size_t)P * sizeof(int32_t)) ||
            memcmp(cur->log2all + (size_t)l * E * cur->stride, m->next.log2all + (size_t)l * E * cur->stride,
                   (size_t)E * cur->stride * sizeof(int32_t)))
            m->plan[m->n_plan++] = l;
    if (m->n_plan == 0) {
        out->action = EA_EPLB_SKIP_UNCHANGED;
        return EA_OK;
    }
    ea__hand_out(m, out);
    out->balancedness_before = m->stats.last_balancedness;
    return EA_OK;
}

void ea_eplb_manager_commit(ea_eplb_manager *m, ea_eplb_meta *cur, ea_status move_status) {
    if (!m->chunk_n) return;
    if (move_status != EA_OK) {
        char what[96];
        snprintf(what, sizeof what, "moving weights of layers %d.. (%d layers) failed", m->plan[m->chunk_pos],
                 m->chunk_n);
        ea__fail(m, what);
        m->n_plan = m->plan_pos = 0; /* abandon: the rest keeps the old placement */
        m->chunk_n = 0;
        return;
    }
    for (int i = 0; i < m->chunk_n; i++) ea_eplb_meta_copy_layer(cur, &m->next, m->plan[m->chunk_pos + i]);
    m->stats.n_layer_switches += (uint64_t)m->chunk_n;
    m->chunk_n = 0;
    if (m->plan_pos == m->n_plan) {
        m->stats.n_rebalances++;
        m->n_plan = m->plan_pos = 0;
    }
}

const ea_eplb_meta *ea_eplb_manager_next(const ea_eplb_manager *m) { return &m->next; }
const ea_eplb_manager_stats *ea_eplb_manager_get_stats(const ea_eplb_manager *m) { return &m->stats; }
