/*
 * manager.h — the rebalance manager: when to rebalance, what to switch, and
 * what to do when switching fails. It decides; the caller moves weights.
 *
 * Every forward step the step loop calls ea_eplb_manager_step with the
 * recorder's window counts. Every `interval` steps the manager scores the
 * current placement on the window (balancedness, mean over layers, placement.c)
 * and, if it is below `min_balancedness`, computes a new placement with the
 * configured algorithm into its own `next` metadata (invariants checked), and
 * plans the switch: the layers whose phy2log changed, ascending, in chunks of
 * `layers_per_step`. The current and following steps return one chunk each
 * (action EA_EPLB_SWITCH). For each chunk the caller makes every physical slot
 * of those layers hold next's expert (weights move: copy/MPI/expert servers),
 * then calls ea_eplb_manager_commit with the outcome:
 *   EA_OK  -> those layers' maps are copied from next into the current metadata
 *             (one layer at a time, version[l] bumped: a layer switches
 *             atomically between two forward steps);
 *   error  -> the plan is abandoned: layers of this chunk and all later ones keep
 *             the old placement (and the caller keeps their old weights); layers
 *             committed earlier stay switched (each layer is consistent on its
 *             own); the reason is logged and counted.
 * If computing the placement fails (bad counts, invariant violation) the current
 * placement is kept as well (action EA_EPLB_FAILED, reason in `reason`).
 *
 *   ea_eplb_manager *m;
 *   EA_TRY(ea_eplb_manager_create(&cfg, &meta, &m));
 *   each step: ea_eplb_step_result r;
 *              EA_TRY(ea_eplb_manager_step(m, &meta, ea_eplb_recorder_counts(&rec), &r));
 *              if (r.action == EA_EPLB_SWITCH)
 *                  ea_eplb_manager_commit(m, &meta, move_weights(ea_eplb_manager_next(m), r.layers, r.n_layers));
 *
 * Steps that hand out a chunk do not count towards the interval.
 * No allocation after create. Threading: the step loop owns the manager and
 * the current metadata (meta.h).
 */
#ifndef EA_EPLB_MANAGER_H
#define EA_EPLB_MANAGER_H

#include <stdint.h>

#include "eplb/eplb.h"
#include "eplb/meta.h"

typedef struct {
    int interval;            /* N >= 1: consider rebalancing every N steps */
    int layers_per_step;     /* K >= 1 layers switched per step; 0 = all in one step */
    double min_balancedness; /* rebalance only when the current mean balancedness is below */
    ea_eplb_algo algo;
    int n_groups;            /* for the hierarchical policy; 1 = global */
} ea_eplb_manager_cfg;

typedef enum {
    EA_EPLB_IDLE = 0,          /* not a rebalance step */
    EA_EPLB_SKIP_NO_DATA,      /* window has no tokens */
    EA_EPLB_SKIP_BALANCED,     /* balancedness >= min_balancedness */
    EA_EPLB_SKIP_UNCHANGED,    /* the algorithm returned the current placement */
    EA_EPLB_SWITCH,            /* switch `layers` now, then commit */
    EA_EPLB_FAILED,            /* computing the placement failed; old placement kept */
} ea_eplb_action;

typedef struct {
    ea_eplb_action action;
    const int32_t *layers;  /* views manager storage; valid until the next step */
    int n_layers;
    double balancedness_before; /* current placement on the window (when scored) */
    double balancedness_after;  /* planned placement on the window (when computed) */
} ea_eplb_step_result;

typedef struct ea_eplb_manager ea_eplb_manager;

/* cur gives the shape (layers, experts, slots, ranks, nodes). */
ea_status ea_eplb_manager_create(const ea_eplb_manager_cfg *cfg, const ea_eplb_meta *cur, ea_eplb_manager **out);
void ea_eplb_manager_destroy(ea_eplb_manager *m);

/* counts: window counts [L][E]. Errors only for misuse (a commit outstanding). */
ea_status ea_eplb_manager_step(ea_eplb_manager *m, const ea_eplb_meta *cur, const int64_t *counts,
                               ea_eplb_step_result *out);
/* Outcome of moving the weights of the last SWITCH chunk. */
void ea_eplb_manager_commit(ea_eplb_manager *m, ea_eplb_meta *cur, ea_status move_status);
/* The planned placement (valid while a plan is in progress). */
const ea_eplb_meta *ea_eplb_manager_next(const ea_eplb_manager *m);

typedef struct {
    uint64_t n_rebalances;   /* plans fully committed */
    uint64_t n_failures;     /* placement failures + abandoned plans */
    uint64_t n_layer_switches;
    double last_balancedness; /* last score of the current placement */
    char reason[256];         /* why the last failure happened */
} ea_eplb_manager_stats;
const ea_eplb_manager_stats *ea_eplb_manager_get_stats(const ea_eplb_manager *m);

#endif
