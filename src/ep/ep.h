/*
 * ep.h — the `ep` MoE backend: routed experts split across MPI ranks
 * (DESIGN.md section 4, seed 000).
 *
 * Every rank runs the same batch with the same attention, router and shared
 * experts, so at each MoE layer every rank holds the same x, ids and w. A
 * placement says which rank owns each physical expert slot of each layer
 * (contiguous ranges by default; any table, e.g. from EPLB, plugs in). One
 * MoE call is three steps, each its own function in ep.c:
 *
 *   dispatch  the (token, slot) pairs of this rank's experts, in pair order,
 *             and how many pairs every other rank has. With attention
 *             replicated no bytes move: x is already everywhere. (A future
 *             data-parallel-attention mode exchanges rows here with an
 *             all-to-all; the plan already lists rows per destination rank.)
 *   compute   ea_moe_run_pairs on a local backend holding only own experts
 *   combine   allgatherv of [pair index | output row] records; every rank
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
#include "kernels/matmul.h"
#include "moe/moe.h"

/* Which rank owns each physical expert slot, per layer. */
typedef struct {
    int n_layers, n_slots, n_ranks;
    int32_t *owner; /* owns: (n_layers, n_slots) rank of each slot */
} ea_ep_placement;

/* Slots [r*S/N, (r+1)*S/N) to rank r in every layer; S % N must be 0. */
ea_status ea_ep_placement_contiguous(int n_layers, int n_slots, int n_ranks, ea_ep_placement *out);
/* From an explicit table (n_layers * n_slots entries, each in [0, n_ranks)). */
ea_status ea_ep_placement_from_table(int n_layers, int n_slots, int n_ranks, const int32_t *owner,
                                     ea_ep_placement *out);
void ea_ep_placement_deinit(ea_ep_placement *p);
static inline int ea_ep_owner(const ea_ep_placement *p, int layer, int slot) {
    return p->owner[(size_t)layer * (size_t)p->n_slots + (size_t)slot];
}

typedef struct {
    ea_dist *dist;                  /* borrows */
    const ea_ep_placement *place;   /* copied */
    int n_layers, hidden, ff, max_tokens, max_k;
    ea_ffn_weights *const *experts; /* borrows: [n_layers] -> n_slots entries (NULL for dense layers);
                                       only entries this rank owns are read */
    ea_kctx *kctx;                  /* borrows */
} ea_ep_opts;

ea_status ea_ep_backend_create(const ea_ep_opts *o, ea_moe_backend **out);

/* Per-rank statistics, for /metrics (eaas:ep_*) and GET /ep/stats. */
typedef struct {
    int rank, size;
    uint64_t steps;                 /* forward steps (end_step calls) */
    uint64_t dispatch_calls, combine_calls;
    uint64_t dispatch_bytes;        /* rows moved to owners: 0 while attention is replicated */
    uint64_t combine_bytes_sent, combine_bytes_recv;
    uint64_t pairs_local, pairs_total; /* (token, slot) pairs computed here / in all */
    double comm_seconds;            /* in combine collectives, including waiting for peers */
    double compute_seconds;         /* in this rank's experts */
    int n_layers, n_slots;
    const uint64_t *slot_tokens;    /* views the backend: (n_layers, n_slots) tokens per owned slot */
    const int32_t *owner;           /* views the backend's placement: (n_layers, n_slots) */
} ea_ep_stats;

/* be must come from ea_ep_backend_create; the views stay valid while be lives. */
void ea_ep_backend_stats(ea_moe_backend *be, ea_ep_stats *out);
/* 1 if be is an ep backend. */
int ea_ep_backend_is(const ea_moe_backend *be);

/* GET /ep/stats body (JSON object; *out from ea_malloc, NUL-terminated):
 *   {"rank":0,"size":2,"steps":..,"dispatch":{"calls":..,"bytes":..},
 *    "combine":{"calls":..,"bytes_sent":..,"bytes_recv":..},"pairs":{"local":..,"total":..},
 *    "seconds":{"comm":..,"compute":..},
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
