/*
 * moe_local.h — the `local` MoE backend: every expert in this process.
 *
 * For one layer it sorts the (token, slot) pairs by expert, runs each
 * expert once over all its tokens (gate/up/down matmuls on the gathered rows:
 * a grouped GEMM that reads each expert's weights once per step), writes each
 * (token, slot) output to its own row, then adds a token's k rows in slot
 * order (moe.h's contract). Experts are looked up by the id the caller
 * passes, so with EPLB the ids are physical slots and `experts[layer]` holds
 * one entry per physical slot (replicas point at the same weights).
 *
 * The backend keeps its own copy of the slot table (views; the weights stay
 * the model's). apply_placement rebinds a layer's slots to `logical[layer]`'s
 * views: in one process a replica computes the same function from the same
 * bytes, so moving an expert to a slot is pointing the slot at its weights.
 */
#ifndef EA_MOE_LOCAL_H
#define EA_MOE_LOCAL_H

#include "kernels/matmul.h"
#include "moe/moe.h"

typedef struct {
    int n_layers;
    int hidden;
    int ff;                        /* expert FFN width */
    int n_experts;                 /* physical slots: entries per layer in experts[] */
    int max_tokens;                /* largest n_tokens per call */
    int max_k;
    ea_ffn_weights *const *experts; /* borrows during create (copied): [n_layers] -> array of n_experts, NULL for
                                       dense layers; an entry whose gate.data is NULL is not held here */
    ea_ffn_weights *const *logical; /* borrows for the backend's life: [n_layers] -> n_logical views that
                                       apply_placement binds slots to; NULL: the placement is fixed */
    int n_logical;
    ea_kctx *kctx;                 /* borrows; its max_m >= max_tokens, max_k >= hidden and ff */
} ea_moe_local_opts;

ea_status ea_moe_local_create(const ea_moe_local_opts *o, ea_moe_backend **out);

/* The views slot `slot` of layer `layer` computes with, which the caller may
 * read and overwrite between forward steps (the EP backend's weight moves);
 * NULL for a dense layer or a slot out of range. be must be a local backend. */
ea_ffn_weights *ea_moe_local_slot(ea_moe_backend *be, int layer, int slot);

/* Run the experts of one layer for rows already grouped: used by the local backend
 * and by remote/EP servers. pairs (n_pairs) are (token row in x, expert id);
 * out gets one row (hidden) per pair, in the order given. */
ea_status ea_moe_run_pairs(ea_moe_backend *be, int layer, const float *x, int n_pairs,
                           const int32_t *pair_row, const int32_t *pair_expert, float *out);

#endif
