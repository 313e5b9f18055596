/*
 * eplb_backend.h — EPLB on the MoE data path: a moe backend that records the
 * router's logical expert ids, maps each to a physical slot, and calls an
 * inner backend with PHYSICAL ids; between forward steps it runs the
 * rebalance manager and switches layers to a new placement.
 *
 * One forward step, as data (DESIGN.md section 3, the arrow
 * "[EPLB record + logical->physical map] -> moe backend"):
 *
 *   router -> ids (n, k) logical
 *          -> ea_eplb_record(window recorder), ea_eplb_record(dump recorder)
 *          -> phys[t][j] = dispatch[layer][ids[t][j]][rank of token t]   (meta.h)
 *          -> inner backend forward(layer, x, n, k, phys, w, y)
 *   after all layers: end_step -> recorders end_step
 *                              -> manager step (every N steps: score the window,
 *                                 plan a new placement if below the threshold)
 *                              -> inner apply_placement for this step's layer
 *                                 chunk, commit (version[l]++), or keep the old placement
 *
 * Layers: EPLB indexes MoE layers only (dense leading layers of DeepSeek are
 * skipped), so the recorder dump, the placement files and --init-expert-location
 * have L = number of MoE layers, in model order.
 *
 * The inner backend. The wrapper calls any backend with PHYSICAL slot ids:
 * it is created holding the initial placement's slots (the engine builds it
 * from ea_eplb_initial_placement's phy2log, model/experts.h), and a layer
 * switch is ea_moe_apply_placement(inner, layer, next phy2log row) — local:
 * the slots' weight views are rebound (a replica computes the same function
 * from the same bytes, so in one process a view is as good as a copy); EP:
 * moving weights between ranks (ea_eplb_meta_move_plan says from where) is
 * not built yet, so a switch fails and the old placement is kept; remote:
 * expert servers will load the replicas. A chunk switches all its layers or
 * none: on a failure the layers already switched are put back.
 *
 * Ranks. The placement spreads P slots over `n_ranks` ranks so balancedness
 * means something even in one process. `rank` is the rank whose dispatch row
 * this process uses (0 for the local case); rank = -1 simulates data-parallel
 * ranks: token t is dispatched as if it came from rank t % n_ranks, so every
 * replica receives tokens (used by the tests; the output is the same bits
 * either way, see below).
 *
 * Determinism. The inner backend computes each (token, slot) pair's output with
 * a batch-invariant kernel from the same weights whatever physical slot holds
 * them, and adds a token's k outputs in slot order; so y is bit-identical with
 * and without EPLB, under any placement, before and after a rebalance.
 *
 * Threading. forward/end_step run on the step-loop thread; they are the only
 * writers of the placement and the slot views, and a layer's map changes only
 * in end_step (between forward steps, never within one). The control functions
 * below may be called from any thread (HTTP handlers): a mutex guards the
 * recorders, the stats and the pending requests; a rebalance request is carried
 * out by the step loop at the end of the next forward step.
 */
#ifndef EA_EPLB_BACKEND_H
#define EA_EPLB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "eplb/eplb.h"
#include "eplb/meta.h"
#include "moe/moe.h"

typedef struct {
    /* the model's routed experts */
    int n_layers;                   /* model layers (the forward pass's layer ids) */
    const uint8_t *layer_is_moe;    /* borrows during create: [n_layers] 1 for a layer with routed experts */
    int n_logical;                  /* E: experts the router chooses among */
    int max_tokens, max_k;          /* largest call */

    /* placement */
    int n_redundant;       /* R >= 0 redundant slots: P = E + R (with init_location: must match the file or be 0) */
    int n_ranks;           /* >= 1; P % n_ranks == 0 */
    int n_nodes;           /* >= 1; n_ranks % n_nodes == 0 */
    int n_groups;          /* expert groups for the hierarchical policy; <= 1: global policy */
    int rank;              /* this process's dispatch rank; -1: token t as if from rank t % n_ranks */
    const char *init_location; /* placement file (textio.h format) or NULL: trivial placement */

    /* recorder and manager */
    int window;            /* W >= 1: steps in the manager's sliding window */
    int interval;          /* N: consider rebalancing every N steps; 0 = only on request */
    double min_balancedness; /* rebalance when the window's mean balancedness is below */
    int layers_per_step;   /* K layers switched per step; 0 = all at once */
    ea_eplb_algo algo;
    int record;            /* start the dump recorder at create (else POST /eplb/record/start) */
    int record_window;     /* steps in the dump recorder's window; <= 0: same as window */
} ea_eplb_backend_opts;

/* Defaults: R 0, 1 rank, 1 node, global policy, rank 0, window 1000, interval
 * 1000, min balancedness 0.9, all layers at once, deepseek, not recording. */
void ea_eplb_backend_opts_default(ea_eplb_backend_opts *o);

typedef struct ea_eplb_backend ea_eplb_backend;

/* The placement EPLB starts from: init_location's (checked against the
 * model's MoE layers, experts and n_redundant), else the trivial one of
 * E + n_redundant slots. OUT: *out (init; ea_eplb_meta_deinit, or pass it on). */
ea_status ea_eplb_initial_placement(const ea_eplb_backend_opts *o, ea_eplb_meta *out);
/* Wraps inner, which holds *place's physical slots as *place says. Takes
 * ownership of inner and of *place's arrays (moved out: *place is zeroed),
 * on failure too. */
ea_status ea_eplb_backend_create(const ea_eplb_backend_opts *o, ea_eplb_meta *place, ea_moe_backend *inner,
                                 ea_eplb_backend **out);
/* The wrapper as a moe backend; destroying that destroys the wrapper and its inner backend. */
ea_moe_backend *ea_eplb_backend_moe(ea_eplb_backend *b);
void ea_eplb_backend_destroy(ea_eplb_backend *b);

/* ---- control (any thread) ---- */

/* POST /eplb/record/start: clear the dump recorder and record from now on. */
void ea_eplb_record_start(ea_eplb_backend *b);
/* POST /eplb/record/stop: stop recording; the counts stay for a dump. */
void ea_eplb_record_stop(ea_eplb_backend *b);
/* GET /eplb/record/dump: the dump recorder's window in the workload format
 * (textio.h; `eaas eplb place --workload` reads it). OUT: *text (NUL-terminated,
 * free with ea_free), *len. */
ea_status ea_eplb_record_dump(ea_eplb_backend *b, char **text, size_t *len);
/* POST /eplb/rebalance: at the end of the next forward step, compute a placement
 * from the window whatever the balancedness, and switch to it (layer chunks as
 * configured). Returns at once; the outcome shows in the stats (rebalances_total,
 * failures, reason). A request while a plan is in progress is merged into it. */
void ea_eplb_request_rebalance(ea_eplb_backend *b);

typedef struct {
    double balancedness;        /* eaas:eplb_balancedness: mean over MoE layers of
                                   mean/max rank load, current placement on the window (1 if empty) */
    uint64_t rebalances_total;  /* eaas:eplb_rebalances_total: plans fully switched */
    uint64_t failures;          /* placements that failed + plans abandoned (old placement kept) */
    uint64_t layer_switches;
    uint64_t steps;             /* forward steps seen */
    uint64_t last_switch_step;  /* step count when a layer last switched (0: never) */
    double last_plan_before;    /* balancedness of the old placement when the last plan was made (-1: none) */
    double last_plan_after;     /* the planned placement's, on the same window (-1: none) */
    int plan_in_progress;       /* layers still to switch */
    int recording;              /* dump recorder on */
    int n_layers, n_logical, n_physical, n_ranks; /* EPLB shape (MoE layers) */
    char reason[256];           /* last failure, "" if none */
} ea_eplb_backend_stats;
void ea_eplb_backend_get_stats(ea_eplb_backend *b, ea_eplb_backend_stats *out);

/* ---- inspection (step-loop thread, or while no step runs: tests, `inspect`) ---- */

/* The current placement metadata (meta.h; version[l] counts switches of layer l). */
const ea_eplb_meta *ea_eplb_backend_meta(const ea_eplb_backend *b);
/* MoE index of model layer `layer`, or -1 for a dense layer. */
int ea_eplb_backend_moe_layer(const ea_eplb_backend *b, int layer);
/* Test hook: make the next n weight moves fail (the manager must keep the old placement). */
void ea_eplb_backend_fail_moves(ea_eplb_backend *b, int n);

#endif
