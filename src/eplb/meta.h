/*
 * meta.h — placement metadata: the three maps the MoE dispatch path reads.
 *
 * For each MoE layer l (L layers, E logical experts, P physical slots, P/ranks
 * slots per rank, ranks/nodes ranks per node; slot p is on rank p / (P/ranks),
 * rank r on node r / (ranks/nodes)):
 *
 *   phy2log[l][p]          logical expert held by slot p                      [L][P]
 *   log2all[l][e][k]       slot of replica k of expert e, k < log2all_n[l][e]; [L][E][stride]
 *                          -1 beyond; replica order (phyrank)                  stride = P - E + 1
 *   log2all_n[l][e]        number of replicas of e (>= 1)                      [L][E]
 *   dispatch[l][e][r]      the replica of e that rank r sends its tokens to    [L][E][ranks]
 *   version[l]             bumped each time layer l switches placement         [L]
 *
 * Dispatch (nearest replica first, deterministic, even): let C = e's slots in
 * ascending slot order.
 *   1. same rank: if some slot of C is on rank r, the lowest such slot;
 *   2. same node: else, if node(r) holds k > 0 slots of C (ascending c_0..c_k-1),
 *      the ranks of node(r) that reach this step, taken in ascending rank
 *      order, get c_0, c_1, ..., c_{k-1}, c_0, ... (the i-th gets c_{i mod k});
 *   3. anywhere: else the ranks that reach this step (every rank of every node
 *      without a replica of e), in ascending rank order, get C round robin the
 *      same way (the i-th gets C[i mod |C|]).
 *   So within each step the ranks are spread over the candidates with counts
 *   differing by at most one, and the map depends only on the placement.
 *
 * Invariants (seed 003), checked by every constructor (ea_eplb_meta_check),
 * and the first violation is reported as "layer L slot S expert X: ...":
 *   E_physical = E_logical + R with 0 <= R <= 128; E_physical % ranks == 0;
 *   ranks % nodes == 0; every phy2log in [0, E); every logical expert has >= 1
 *   replica; log2all lists exactly the slots holding e, each once; every slot is
 *   listed under its expert; dispatch[l][e][r] holds e and is nearest-first.
 *
 * Ownership: all arrays are owned by the struct (init/deinit). Threading: one
 * writer (the step loop, between forward steps); readers are the forward pass of
 * the same loop, so no lock. A layer switch replaces all rows of that layer
 * (ea_eplb_meta_copy_layer) before the next forward step reads it.
 */
#ifndef EA_EPLB_META_H
#define EA_EPLB_META_H

#include <stdint.h>

#include "eplb/eplb.h"

typedef struct {
    int n_layers, n_logical, n_physical, n_ranks, n_nodes;
    int stride;         /* = P - E + 1, the most replicas an expert can have */
    int32_t *phy2log;   /* owns [L][P] */
    int32_t *log2all;   /* owns [L][E][stride] */
    int32_t *log2all_n; /* owns [L][E] */
    int32_t *dispatch;  /* owns [L][E][ranks] */
    uint64_t *version;  /* owns [L] */
    int32_t *scratch;   /* owns [3P]: per-layer construction scratch */
} ea_eplb_meta;

/* Sizes only (maps zeroed; not valid until a layer is set). Checks the shape invariants. */
ea_status ea_eplb_meta_init(ea_eplb_meta *m, int n_layers, int n_logical, int n_physical, int n_ranks, int n_nodes);
void ea_eplb_meta_deinit(ea_eplb_meta *m);

/* Constructors: trivial contiguous placement (slot p holds p mod E); an algorithm's
 * placement; a placement file (textio.h format). */
ea_status ea_eplb_meta_init_trivial(ea_eplb_meta *m, int n_layers, int n_logical, int n_physical, int n_ranks,
                                    int n_nodes);
ea_status ea_eplb_meta_init_from_placement(ea_eplb_meta *m, const ea_eplb_placement *pl, int n_ranks, int n_nodes);
ea_status ea_eplb_meta_init_from_file(ea_eplb_meta *m, const char *path, int n_ranks, int n_nodes);

/* Rebuild all maps of layer l from a phy2log row (phyrank row, or NULL for slot
 * order) and check the layer. A bad row is reported before anything of the layer
 * changes (the final full-layer check is a self-check). No allocation. */
ea_status ea_eplb_meta_set_layer(ea_eplb_meta *m, int layer, const int32_t *phy2log, const int32_t *phyrank);
/* Copy every map row of layer l from src (same shape) and bump dst->version[l]. */
void ea_eplb_meta_copy_layer(ea_eplb_meta *dst, const ea_eplb_meta *src, int layer);

/* Weight-move plan for one layer, from placement `from` to `to` (same shape):
 * src[p] = the slot of `from` whose weights slot p must hold under `to`:
 * p itself if it already holds the right expert, else from's dispatch choice for
 * p's rank (same rank, then same node, then spread), which holds that expert.
 * Slots that are both a source and a destination must be read before they are
 * overwritten (stage them, or copy from a snapshot of the old weights).
 * Returns the number of slots that need a copy. */
int ea_eplb_meta_move_plan(const ea_eplb_meta *from, const ea_eplb_meta *to, int layer, int32_t *src);

typedef struct {
    int layer, slot, expert, rank; /* -1 where not applicable */
} ea_eplb_violation;

/* EA_OK, or EA_ERR_FORMAT with the first violation (layers ascending; within a
 * layer: slots, then experts' replica lists, then dispatch) in *v (may be NULL)
 * and in the error message. */
ea_status ea_eplb_meta_check(const ea_eplb_meta *m, ea_eplb_violation *v);
ea_status ea_eplb_meta_check_layer(const ea_eplb_meta *m, int layer, ea_eplb_violation *v);

/* The data path: map n logical ids (top-k output of the router, in logical space)
 * to the physical slots rank `rank` sends them to. ids outside [0, E) become -1. */
static inline void ea_eplb_meta_map(const ea_eplb_meta *m, int layer, int rank, const int32_t *logical, int n,
                                    int32_t *physical) {
    const int32_t *d = m->dispatch + (size_t)layer * (size_t)m->n_logical * (size_t)m->n_ranks + rank;
    for (int i = 0; i < n; i++) {
        int32_t e = logical[i];
        physical[i] = (e >= 0 && e < m->n_logical) ? d[(size_t)e * (size_t)m->n_ranks] : -1;
    }
}

static inline int ea_eplb_meta_rank_of_slot(const ea_eplb_meta *m, int slot) {
    return slot / (m->n_physical / m->n_ranks);
}
static inline int ea_eplb_meta_node_of_rank(const ea_eplb_meta *m, int rank) {
    return rank / (m->n_ranks / m->n_nodes);
}

#endif
