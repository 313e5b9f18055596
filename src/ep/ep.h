/*
 * ep.h — the `ep` MoE backend: routed experts split across MPI ranks
 * (DESIGN.md section 4, seed 000).
 *
 * Every rank runs the same batch with the same attention, router and shared
 * experts, so at each MoE layer every rank holds the same x, ids and w. The
 * placement (eplb/meta.h, the one placement representation of the engine)
 * says which rank owns each physical expert slot: slot p of every layer is on
 * rank p / (P / ranks); ids are physical slots (logical experts under the
 * trivial placement). One MoE call is three steps, each its own function in
 * ep.c:
 *
 *   dispatch  the (token, slot) pairs of this rank's experts, in pair order,
 *             and how many pairs every other rank has. With attention
 *             replicated no bytes move: x is already everywhere. With
 *             dp_attention every rank brings its own tokens, and their rows go
 *             to the owner ranks with an alltoallv (ep.c "data-parallel
 *             attention"; the outputs come back the same way).
 *   compute   ea_moe_run_pairs on a local backend holding only own experts
 *   combine   allgatherv of [pair index | output row] records, in rounds of
 *             at most the capacity (--ep-capacity-factor times an even share)
 *             per rank: a rank's pairs beyond it go in the next round, none is
 *             dropped (seed 000 drops them); every rank
 *             fills y[t] = sum over j of w[t][j] * out[t*k+j], j = 0..k-1 in
 *             order from 0.0f — the local backend's exact arithmetic, so the
 *             result is bit-identical to one process (moe.h's contract)
 *
 * Combine record (one per pair, little-endian as the ranks share a machine
 * type): int32 pair index (t*k + j) stored in the first 4 bytes, then hidden
 * f32. A receiver checks every index is in range and arrives exactly once —
 * ranks that disagree on routing fail loudly instead of summing garbage.
 */
#ifndef EA_EP_H
#define EA_EP_H

#include <stdint.h>

#include "ep/dist.h"
#include "eplb/meta.h"
#include "kernels/matmul.h"
#include "moe/moe.h"

typedef struct {
    ea_dist *dist;                  /* borrows */
    const ea_eplb_meta *place;      /* borrows during create: one row per MoE layer, n_ranks = the world size */
    int n_layers, hidden, ff, max_tokens, max_k;
    ea_ffn_weights *const *experts; /* borrows during create (copied): [n_layers] -> place->n_physical slots
                                       (NULL for dense layers), this rank's filled in (model/experts.h) */
    ea_kctx *kctx;                  /* borrows */
    int dp_attention;               /* 1: every rank brings its own tokens (data-parallel attention):
                                       pairs and outputs move by alltoallv (ep.c) */
    double capacity_factor;         /* combine buffers hold this times an even share of the pairs;
                                       what exceeds it goes in further rounds; <= 0: 1.25 */
} ea_ep_opts;

/* The most tokens one expert of this rank can get in one call, for calls of
 * at most max_tokens tokens on each of n_ranks ranks: with data-parallel
 * attention every rank's largest call at once (the matmul context and the
 * local backend are sized with it), else one call's. */
static inline int ea_ep_expert_max_tokens(int max_tokens, int n_ranks, int dp_attention) {
    return dp_attention ? max_tokens * n_ranks : max_tokens;
}

/* apply_placement moves expert weights between ranks (collective; ep.c
 * "weight moves"): a layer switches on every rank or on none. */
ea_status ea_ep_backend_create(const ea_ep_opts *o, ea_moe_backend **out);

/* Per-rank statistics, for /metrics (eaas:ep_*) and GET /ep/stats. */
typedef struct {
    int rank, size;
    uint64_t steps;                 /* forward steps (end_step calls) */
    uint64_t dispatch_calls, combine_calls;
    uint64_t dispatch_bytes;        /* rows moved to owners: 0 while attention is replicated */
    uint64_t combine_bytes_sent, combine_bytes_recv;
    uint64_t combine_rounds;        /* allgatherv rounds of combine (one per call, more on overflow) */
    uint64_t overflow_rounds;       /* rounds beyond the first */
    uint64_t overflow_pairs;        /* (token, slot) pairs over a rank's capacity, sent in a later round */
    uint64_t pairs_local, pairs_total; /* (token, slot) pairs computed here / in all */
    double comm_seconds;            /* in combine collectives, including waiting for peers */
    double compute_seconds;         /* in this rank's experts */
    /* weight moves (apply_placement: EPLB across ranks) */
    uint64_t layer_switches;        /* layers switched to a new placement */
    uint64_t experts_moved;         /* slots (all ranks) that took another expert in those switches */
    uint64_t move_bytes_sent, move_bytes_recv; /* this rank's expert bytes over MPI */
    uint64_t move_failures;         /* switches refused (every rank kept the old placement) */
    double move_seconds;            /* in successful switches, exchange included */
    int n_layers, n_slots;
    int slots_per_rank;             /* rank r owns slots [r * slots_per_rank, (r + 1) * slots_per_rank) */
    const uint64_t *slot_tokens;    /* views the backend: (n_layers, n_slots) tokens per owned slot */
} ea_ep_stats;

/* be must come from ea_ep_backend_create; the views stay valid while be lives.
 * The live counters: call it on the thread that runs be's calls. Other threads
 * (HTTP) go through the vtable's stats, which reads a copy made at each step's
 * end and weight move under a lock. */
void ea_ep_backend_stats(ea_moe_backend *be, ea_ep_stats *out);
/* 1 if be is an ep backend. */
int ea_ep_backend_is(const ea_moe_backend *be);

/* GET /ep/stats body (JSON object; *out from ea_malloc, NUL-terminated):
 *   {"rank":0,"size":2,"steps":..,"dispatch":{"calls":..,"bytes":..},
 *    "combine":{"calls":..,"bytes_sent":..,"bytes_recv":..,"rounds":..},"overflow":{"rounds":..,"pairs":..},
 *    "pairs":{"local":..,"total":..},
 *    "seconds":{"comm":..,"compute":..},
 *    "moves":{"layer_switches":..,"experts":..,"bytes_sent":..,"bytes_recv":..,"failures":..,"seconds":..},
 *    "experts":[{"layer":L,"slot":S,"tokens":N}, ...]}   (owned slots only) */
ea_status ea_ep_stats_json(const ea_ep_stats *s, char **out);
/* The same object as a new jansson reference (NULL when out of memory). */
json_t *ea_ep_stats_to_json(const ea_ep_stats *s);
/* /metrics lines (Prometheus text, with # HELP/# TYPE), labelled rank="r":
 *   eaas:ep_dispatch_calls_total, eaas:ep_combine_calls_total, eaas:ep_combine_bytes_total{dir},
 *   eaas:ep_pairs_total{where}, eaas:ep_comm_seconds_total, eaas:ep_compute_seconds_total,
 *   eaas:ep_expert_tokens_total{layer,slot} */
void ea_ep_stats_prometheus(const ea_ep_stats *s, ea_sbuf *out);

#endif
