/*
 * meta.c — building and checking the placement metadata (maps in meta.h).
 *
 * Why the check lives here: every way a placement enters the engine (trivial,
 * algorithm, file, manager switch) goes through ea_eplb_meta_set_layer, which
 * builds the maps into the struct only after the layer's phy2log passes the
 * checks, and then runs the full layer check on the result. So a wrong map
 * never reaches the dispatch path, and the error says which layer, slot and
 * expert is wrong.
 */
#include "eplb/meta.h"

#include <stdarg.h>
#include <string.h>

#include "base/alloc.h"
#include "eplb/textio.h"

/* Record the violation in *v (if given) and as the error message; EA_ERR_FORMAT. */
static ea_status ea__viol(ea_eplb_violation *v, int layer, int slot, int expert, int rank, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static ea_status ea__viol(ea_eplb_violation *v, int layer, int slot, int expert, int rank, const char *fmt, ...) {
    if (v) {
        v->layer = layer;
        v->slot = slot;
        v->expert = expert;
        v->rank = rank;
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ea_err(EA_ERR_FORMAT, "EPLB placement invariant: layer %d slot %d expert %d rank %d: %s", layer, slot,
                  expert, rank, msg);
}

static ea_status ea__shape(int L, int E, int P, int ranks, int nodes, ea_eplb_violation *v) {
    if (L <= 0 || E <= 0 || ranks <= 0 || nodes <= 0)
        return ea__viol(v, -1, -1, -1, -1, "layers %d, logical %d, ranks %d, nodes %d must be > 0", L, E, ranks, nodes);
    if (P < E || P - E > EA_EPLB_MAX_REDUNDANT)
        return ea__viol(v, -1, -1, -1, -1, "E_physical %d = E_logical %d + R needs 0 <= R <= %d (R = %d)", P, E,
                        EA_EPLB_MAX_REDUNDANT, P - E);
    if (P % ranks) return ea__viol(v, -1, -1, -1, -1, "E_physical %d is not a multiple of ranks %d", P, ranks);
    if (ranks % nodes) return ea__viol(v, -1, -1, -1, -1, "ranks %d is not a multiple of nodes %d", ranks, nodes);
    return EA_OK;
}

ea_status ea_eplb_meta_init(ea_eplb_meta *m, int L, int E, int P, int ranks, int nodes) {
    memset(m, 0, sizeof *m);
    EA_TRY(ea__shape(L, E, P, ranks, nodes, NULL));
    m->n_layers = L;
    m->n_logical = E;
    m->n_physical = P;
    m->n_ranks = ranks;
    m->n_nodes = nodes;
    m->stride = P - E + 1;
    size_t l = (size_t)L, e = (size_t)E, p = (size_t)P;
    m->phy2log = ea_calloc(l * p, sizeof *m->phy2log);
    m->log2all = ea_calloc(l * e * (size_t)m->stride, sizeof *m->log2all);
    m->log2all_n = ea_calloc(l * e, sizeof *m->log2all_n);
    m->dispatch = ea_calloc(l * e * (size_t)ranks, sizeof *m->dispatch);
    m->version = ea_calloc(l, sizeof *m->version);
    m->scratch = ea_calloc(3 * p, sizeof *m->scratch);
    if (!m->phy2log || !m->log2all || !m->log2all_n || !m->dispatch || !m->version || !m->scratch) {
        ea_eplb_meta_deinit(m);
        return ea_err(EA_ERR_NOMEM, "EPLB metadata for %d layers x %d experts x %d slots x %d ranks", L, E, P, ranks);
    }
    return EA_OK;
}

void ea_eplb_meta_deinit(ea_eplb_meta *m) {
    if (!m) return;
    ea_free(m->phy2log);
    ea_free(m->log2all);
    ea_free(m->log2all_n);
    ea_free(m->dispatch);
    ea_free(m->version);
    ea_free(m->scratch);
    memset(m, 0, sizeof *m);
}

/* dispatch[e][*] of one layer, from log2all (rules in meta.h). */
static void ea__dispatch_layer(ea_eplb_meta *m, int l) {
    int E = m->n_logical, R = m->n_ranks, rpn = R / m->n_nodes;
    int32_t *cand = m->scratch; /* [<= stride] slots of e, ascending */
    for (int e = 0; e < E; e++) {
        const int32_t *all = m->log2all + ((size_t)l * E + e) * m->stride;
        int n = m->log2all_n[(size_t)l * E + e];
        for (int k = 0; k < n; k++) { /* insertion sort: n is small */
            int32_t s = all[k];
            int j = k;
            while (j > 0 && cand[j - 1] > s) {
                cand[j] = cand[j - 1];
                j--;
            }
            cand[j] = s;
        }
        int32_t *d = m->dispatch + ((size_t)l * E + e) * R;
        int remote_i = 0;
        for (int node = 0; node < m->n_nodes; node++) {
            int r0 = node * rpn, node_i = 0;
            /* candidates on this node are a contiguous run of cand (slots ascending) */
            int c0 = 0, c1;
            while (c0 < n && ea_eplb_meta_node_of_rank(m, ea_eplb_meta_rank_of_slot(m, cand[c0])) < node) c0++;
            c1 = c0;
            while (c1 < n && ea_eplb_meta_node_of_rank(m, ea_eplb_meta_rank_of_slot(m, cand[c1])) == node) c1++;
            for (int r = r0; r < r0 + rpn; r++) {
                int32_t pick = -1;
                for (int c = c0; c < c1 && pick < 0; c++)
                    if (ea_eplb_meta_rank_of_slot(m, cand[c]) == r) pick = cand[c];
                if (pick < 0 && c1 > c0) pick = cand[c0 + (node_i++) % (c1 - c0)];
                if (pick < 0) pick = cand[(remote_i++) % n];
                d[r] = pick;
            }
        }
    }
}

ea_status ea_eplb_meta_set_layer(ea_eplb_meta *m, int l, const int32_t *p2l, const int32_t *prk) {
    int E = m->n_logical, P = m->n_physical;
    if (l < 0 || l >= m->n_layers) return ea__viol(NULL, l, -1, -1, -1, "layer out of range [0, %d)", m->n_layers);
    int32_t *cnt = m->scratch; /* [E] <= [2P] */
    for (int e = 0; e < E; e++) cnt[e] = 0;
    for (int p = 0; p < P; p++) {
        if (p2l[p] < 0 || p2l[p] >= E)
            return ea__viol(NULL, l, p, p2l[p], -1, "logical expert out of range [0, %d)", E);
        cnt[p2l[p]]++;
    }
    for (int e = 0; e < E; e++)
        if (cnt[e] == 0) return ea__viol(NULL, l, -1, e, -1, "logical expert has no replica");
    if (prk)
        for (int p = 0; p < P; p++)
            if (prk[p] < 0 || prk[p] >= cnt[p2l[p]])
                return ea__viol(NULL, l, p, p2l[p], -1, "replica rank %d not in [0, %d)", prk[p], cnt[p2l[p]]);
    /* fill: replica k of e at log2all[e][k]; a repeated (e, k) is caught by the check */
    int32_t *all = m->log2all + (size_t)l * E * m->stride, *n = m->log2all_n + (size_t)l * E;
    /* keep the old rows until the new ones are known good: build into scratch first */
    int32_t *tmp = m->scratch + P; /* [P]: slot per (e, k) packed by prefix sums of cnt */
    int32_t *off = m->scratch;     /* reuse cnt as offsets */
    int acc = 0;
    for (int e = 0; e < E; e++) {
        int c = off[e];
        off[e] = acc;
        acc += c;
    }
    for (int p = 0; p < P; p++) tmp[p] = -1;
    int32_t *seen = m->scratch + 2 * P; /* [E]: slots of e met so far (slot-order ranks) */
    for (int e = 0; e < E; e++) seen[e] = 0;
    for (int p = 0; p < P; p++) {
        int e = p2l[p];
        int k = prk ? prk[p] : seen[e];
        seen[e]++;
        int c = (e + 1 < E ? off[e + 1] : P) - off[e];
        if (k >= c) return ea__viol(NULL, l, p, e, -1, "replica rank %d not in [0, %d)", k, c);
        if (tmp[off[e] + k] >= 0)
            return ea__viol(NULL, l, p, e, -1, "replica rank %d also used by slot %d", k, tmp[off[e] + k]);
        tmp[off[e] + k] = p;
    }
    /* commit */
    memcpy(m->phy2log + (size_t)l * P, p2l, (size_t)P * sizeof *p2l);
    for (int e = 0; e < E; e++) {
        int c = (e + 1 < E ? off[e + 1] : P) - off[e];
        n[e] = c;
        int32_t *row = all + (size_t)e * m->stride;
        for (int k = 0; k < m->stride; k++) row[k] = k < c ? tmp[off[e] + k] : -1;
    }
    ea__dispatch_layer(m, l);
    return ea_eplb_meta_check_layer(m, l, NULL);
}

ea_status ea_eplb_meta_check_layer(const ea_eplb_meta *m, int l, ea_eplb_violation *v) {
    int E = m->n_logical, P = m->n_physical, R = m->n_ranks;
    const int32_t *p2l = m->phy2log + (size_t)l * P;
    const int32_t *all = m->log2all + (size_t)l * E * m->stride, *n = m->log2all_n + (size_t)l * E;
    for (int p = 0; p < P; p++)
        if (p2l[p] < 0 || p2l[p] >= E) return ea__viol(v, l, p, p2l[p], -1, "logical expert out of range [0, %d)", E);
    int total = 0;
    for (int e = 0; e < E; e++) {
        const int32_t *row = all + (size_t)e * m->stride;
        if (n[e] < 1) return ea__viol(v, l, -1, e, -1, "logical expert has no replica");
        if (n[e] > m->stride) return ea__viol(v, l, -1, e, -1, "%d replicas > %d", n[e], m->stride);
        total += n[e];
        for (int k = 0; k < m->stride; k++) {
            int s = row[k];
            if (k >= n[e]) {
                if (s != -1) return ea__viol(v, l, s, e, -1, "log2all entry %d past the count %d is not -1", k, n[e]);
                continue;
            }
            if (s < 0 || s >= P) return ea__viol(v, l, s, e, -1, "replica %d: slot out of range [0, %d)", k, P);
            if (p2l[s] != e)
                return ea__viol(v, l, s, e, -1, "replica %d: slot holds expert %d (phy2log disagrees)", k, p2l[s]);
            for (int j = 0; j < k; j++)
                if (row[j] == s) return ea__viol(v, l, s, e, -1, "replica %d: slot listed twice", k);
        }
    }
    if (total != P) {
        /* some slot is not listed under its expert: find the first */
        for (int p = 0; p < P; p++) {
            int e = p2l[p], found = 0;
            for (int k = 0; k < n[e] && !found; k++) found = all[(size_t)e * m->stride + k] == p;
            if (!found) return ea__viol(v, l, p, e, -1, "slot is not listed among its expert's replicas");
        }
    }
    for (int e = 0; e < E; e++) {
        const int32_t *d = m->dispatch + ((size_t)l * E + e) * R;
        const int32_t *row = all + (size_t)e * m->stride;
        for (int r = 0; r < R; r++) {
            int s = d[r];
            if (s < 0 || s >= P) return ea__viol(v, l, s, e, r, "dispatch slot out of range [0, %d)", P);
            if (p2l[s] != e) return ea__viol(v, l, s, e, r, "dispatch slot holds expert %d", p2l[s]);
            int on_rank = 0, on_node = 0, node = ea_eplb_meta_node_of_rank(m, r);
            for (int k = 0; k < n[e]; k++) {
                int rr = ea_eplb_meta_rank_of_slot(m, row[k]);
                on_rank |= rr == r;
                on_node |= ea_eplb_meta_node_of_rank(m, rr) == node;
            }
            int sr = ea_eplb_meta_rank_of_slot(m, s);
            if (on_rank && sr != r) return ea__viol(v, l, s, e, r, "dispatch is remote but rank %d has a replica", r);
            if (on_node && ea_eplb_meta_node_of_rank(m, sr) != node)
                return ea__viol(v, l, s, e, r, "dispatch leaves node %d which has a replica", node);
        }
    }
    return EA_OK;
}

ea_status ea_eplb_meta_check(const ea_eplb_meta *m, ea_eplb_violation *v) {
    EA_TRY(ea__shape(m->n_layers, m->n_logical, m->n_physical, m->n_ranks, m->n_nodes, v));
    for (int l = 0; l < m->n_layers; l++) EA_TRY(ea_eplb_meta_check_layer(m, l, v));
    return EA_OK;
}

void ea_eplb_meta_copy_layer(ea_eplb_meta *dst, const ea_eplb_meta *src, int l) {
    EA_ASSERT(dst->n_layers == src->n_layers && dst->n_logical == src->n_logical &&
              dst->n_physical == src->n_physical && dst->n_ranks == src->n_ranks && dst->stride == src->stride);
    size_t E = (size_t)dst->n_logical, P = (size_t)dst->n_physical, R = (size_t)dst->n_ranks, S = (size_t)dst->stride;
    memcpy(dst->phy2log + l * P, src->phy2log + l * P, P * sizeof *dst->phy2log);
    memcpy(dst->log2all + l * E * S, src->log2all + l * E * S, E * S * sizeof *dst->log2all);
    memcpy(dst->log2all_n + l * E, src->log2all_n + l * E, E * sizeof *dst->log2all_n);
    memcpy(dst->dispatch + l * E * R, src->dispatch + l * E * R, E * R * sizeof *dst->dispatch);
    dst->version[l]++;
}

ea_status ea_eplb_meta_init_trivial(ea_eplb_meta *m, int L, int E, int P, int ranks, int nodes) {
    EA_TRY(ea_eplb_meta_init(m, L, E, P, ranks, nodes));
    int32_t *p2l = ea_malloc((size_t)P * sizeof *p2l);
    if (!p2l) {
        ea_eplb_meta_deinit(m);
        return ea_err(EA_ERR_NOMEM, "EPLB trivial placement row");
    }
    for (int p = 0; p < P; p++) p2l[p] = p % E;
    ea_status st = EA_OK;
    for (int l = 0; l < L && st == EA_OK; l++) st = ea_eplb_meta_set_layer(m, l, p2l, NULL);
    ea_free(p2l);
    if (st != EA_OK) ea_eplb_meta_deinit(m);
    return st;
}

ea_status ea_eplb_meta_init_from_placement(ea_eplb_meta *m, const ea_eplb_placement *pl, int ranks, int nodes) {
    EA_TRY(ea_eplb_meta_init(m, pl->n_layers, pl->n_logical, pl->n_physical, ranks, nodes));
    size_t P = (size_t)pl->n_physical;
    for (int l = 0; l < pl->n_layers; l++) {
        ea_status st = ea_eplb_meta_set_layer(m, l, pl->phy2log + l * P, pl->phyrank ? pl->phyrank + l * P : NULL);
        if (st != EA_OK) {
            ea_eplb_meta_deinit(m);
            return st;
        }
    }
    return EA_OK;
}

ea_status ea_eplb_meta_init_from_file(ea_eplb_meta *m, const char *path, int ranks, int nodes) {
    ea_eplb_placement pl;
    memset(m, 0, sizeof *m);
    EA_TRY(ea_eplb_placement_read(path, &pl));
    ea_status st = ea_eplb_meta_init_from_placement(m, &pl, ranks, nodes);
    ea_eplb_placement_deinit(&pl);
    if (st != EA_OK) return ea_err_wrap(st, "%s: ", path);
    return EA_OK;
}

int ea_eplb_meta_move_plan(const ea_eplb_meta *from, const ea_eplb_meta *to, int l, int32_t *src) {
    EA_ASSERT(from->n_physical == to->n_physical && from->n_logical == to->n_logical &&
              from->n_ranks == to->n_ranks && l >= 0 && l < from->n_layers);
    int E = from->n_logical, P = from->n_physical, R = from->n_ranks, moves = 0;
    const int32_t *old = from->phy2log + (size_t)l * P, *want = to->phy2log + (size_t)l * P;
    for (int p = 0; p < P; p++) {
        if (old[p] == want[p]) {
            src[p] = p;
            continue;
        }
        src[p] = from->dispatch[((size_t)l * E + want[p]) * R + ea_eplb_meta_rank_of_slot(from, p)];
        moves++;
    }
    return moves;
}
