/*
 * eplb.h — expert-placement load balancing: the placement algorithms and their score.
 *
 * A MoE layer has E logical experts (what the router chooses among) and P >= E
 * physical slots (what holds weights), P = E + R with R redundant slots. Slots
 * are split evenly over `ranks`: slot p lives on rank p / (P/ranks) and on node
 * p / (P/nodes). A placement says, per layer, which logical expert each slot
 * holds (`phy2log`), which replica of that expert it is (`phyrank`, 0..cnt-1),
 * and how many replicas each expert has (`logcnt`).
 *
 * Algorithms (ea_eplb_algo):
 *   EA_EPLB_DEEPSEEK  DeepSeek's EPLB exactly as ../shared/eplb/README.md states
 *                     it: balanced packing of groups to nodes, replication of heavy
 *                     experts inside each node, balanced packing of slots to ranks,
 *                     float32 arithmetic, stable descending sorts. Global policy =
 *                     hierarchical with one group on one node.
 *   EA_EPLB_REFINED   starts from the DeepSeek result and improves each layer by
 *                     local search (slot swaps between the most loaded rank and the
 *                     others, and replica re-targeting, which re-chooses replica
 *                     counts); per layer it keeps whichever of the two has the lower
 *                     maximum rank load, so it is never worse. See refine.c and
 *                     docs/eplb.md.
 *
 * Usage — one workspace per shape, created once, reused without allocation:
 *
 *   ea_eplb_shape s = {.n_layers = 48, .n_logical = 128, .n_physical = 144,
 *                      .n_groups = 1, .n_nodes = 1, .n_ranks = 8};
 *   ea_eplb_ws *ws; ea_eplb_placement pl;
 *   EA_TRY(ea_eplb_ws_create(&s, &ws));
 *   EA_TRY(ea_eplb_placement_init(&pl, 48, 128, 144));
 *   EA_TRY(ea_eplb_rebalance(ws, EA_EPLB_DEEPSEEK, counts, &pl));   // counts: [48][128]
 *   ... ea_eplb_placement_deinit(&pl); ea_eplb_ws_destroy(ws);
 *
 * Counts are int64 token counts per (layer, logical expert); the algorithms cast
 * them to float32 as the reference does (exact while a layer's sum is < 2^24).
 */
#ifndef EA_EPLB_H
#define EA_EPLB_H

#include <stdint.h>

#include "base/status.h"

#define EA_EPLB_MAX_REDUNDANT 128 /* seed 003: R <= 128 */

typedef enum { EA_EPLB_DEEPSEEK = 0, EA_EPLB_REFINED = 1 } ea_eplb_algo;

/* "deepseek" / "refined" -> algo; EA_ERR_INVALID_ARG naming the choices otherwise. */
ea_status ea_eplb_algo_parse(const char *name, ea_eplb_algo *out);
const char *ea_eplb_algo_name(ea_eplb_algo a);

typedef struct {
    int n_layers;   /* L */
    int n_logical;  /* E */
    int n_physical; /* P = E + R */
    int n_groups;   /* expert groups (DeepSeek-V3: 8); 1 for the global policy */
    int n_nodes;    /* 1 for the global policy */
    int n_ranks;    /* EP ranks ("gpus" in the reference) */
} ea_eplb_shape;

/* The reference's policy choice: hierarchical iff groups % nodes == 0; otherwise
 * the global policy, i.e. groups and nodes become 1. Returns 1 if hierarchical. */
int ea_eplb_shape_policy(ea_eplb_shape *s);

/* Check the preconditions of the algorithm (E % groups, groups % nodes, ranks %
 * nodes, P % ranks, P >= E, P - E <= 128, all > 0); the error names the one that fails. */
ea_status ea_eplb_shape_check(const ea_eplb_shape *s);

typedef struct {
    int n_layers, n_logical, n_physical;
    int32_t *phy2log; /* owns: [L][P] logical expert held by slot p */
    int32_t *phyrank; /* owns: [L][P] replica index of slot p among its expert's replicas */
    int32_t *logcnt;  /* owns: [L][E] replicas of expert e (>= 1) */
} ea_eplb_placement;

ea_status ea_eplb_placement_init(ea_eplb_placement *pl, int n_layers, int n_logical, int n_physical);
void ea_eplb_placement_deinit(ea_eplb_placement *pl);
/* The trivial placement: slot p holds expert p % E (contiguous, then the R
 * redundant slots round robin from expert 0); replica ranks in slot order. */
void ea_eplb_placement_trivial(ea_eplb_placement *pl);
/* Largest logcnt over all layers (the M of the text format). */
int ea_eplb_placement_max_replicas(const ea_eplb_placement *pl);

typedef struct ea_eplb_ws ea_eplb_ws;
ea_status ea_eplb_ws_create(const ea_eplb_shape *s, ea_eplb_ws **out);
void ea_eplb_ws_destroy(ea_eplb_ws *ws);

/* counts: [L][E], non-negative. Fills pl (shape must match ws). No allocation.
 * On error (a negative count) pl is partly written and must not be used. */
ea_status ea_eplb_rebalance(ea_eplb_ws *ws, ea_eplb_algo algo, const int64_t *counts,
                            ea_eplb_placement *pl);

/* The reference alone, and the refinement of an existing placement in place
 * (both used by ea_eplb_rebalance; exposed for tests and the benchmark). */
ea_status ea_eplb_deepseek(ea_eplb_ws *ws, const int64_t *counts, ea_eplb_placement *pl);
ea_status ea_eplb_refine(ea_eplb_ws *ws, const int64_t *counts, ea_eplb_placement *pl);

/* ---- scoring (README "How placements are scored") ----
 * slot load = counts[l][e] / logcnt[l][e] (double); rank load = sum of its P/ranks
 * slots; balancedness(l) = mean rank load / max rank load, 1.0 for a layer with no
 * tokens. Mean and worst over layers. */
typedef struct {
    double mean;    /* mean over layers of balancedness */
    double worst;   /* minimum over layers */
    int worst_layer;
} ea_eplb_score;

/* per_layer: optional OUT [L]. ranks must divide P. */
ea_status ea_eplb_score_placement(const ea_eplb_placement *pl, const int64_t *counts, int n_ranks,
                                  double *per_layer, ea_eplb_score *out);
/* Max rank load of one layer (the quantity the refinement minimises). */
double ea_eplb_layer_max_load(const int32_t *phy2log, const int32_t *logcnt, const int64_t *counts_l,
                              int n_physical, int n_ranks);
/* Baseline: no replicas, rank g owns experts floor(g*E/G) .. floor((g+1)*E/G)-1. */
ea_status ea_eplb_score_baseline(const int64_t *counts, int n_layers, int n_logical, int n_ranks,
                                 double *per_layer, ea_eplb_score *out);

#endif
