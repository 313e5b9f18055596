/*
 * forward.h — the forward pass of an MoE transformer over a ragged batch.
 *
 * One call takes n tokens from any number of sequences at any positions
 * (prefill chunks and decode tokens mixed) and produces logits for the rows
 * the caller asks for. Per token t: tokens[t] at position pos[t] of sequence
 * slot seq[t]; the KV cache must already cover pos[t] for that slot
 * (ea_kv_seq_reserve). K/V of every token in the call are written before
 * attention runs, and token t attends to positions 0..pos[t] of its own
 * sequence, so a call may hold a whole prompt.
 *
 * The data path (DESIGN.md section 3), each arrow one function in forward.c:
 *   embed -> for each layer: attn_norm -> attention (KV cache) -> residual
 *         -> ffn_norm -> router -> moe backend (+ shared expert) -> residual
 *   -> out_norm -> lm_head
 *
 * Batch invariance: every step is row-wise or a batch-invariant matmul, and
 * the MoE combine adds slots in order, so the logits of a token depend only on
 * its own sequence — not on what else is in the batch, nor on thread count.
 */
#ifndef EA_FORWARD_H
#define EA_FORWARD_H

#include <stdint.h>

#include "base/pool.h"
#include "kernels/matmul.h"
#include "model/experts.h"
#include "model/kv_cache.h"
#include "model/lin_state.h"
#include "model/model.h"
#include "moe/moe.h"

typedef struct ea_forward ea_forward;

/* Tensor parallelism (optional; src/ep/ builds it). This rank computes query
 * heads [head0, head0 + n_heads) and KV heads [kv_head0, kv_head0 + n_kv_heads)
 * of each layer with the views below, and `allreduce` sums the output
 * projection's partial result over ranks in place (same bits on every rank).
 * Only standard attention with per-head or no q/k norm is split (not MLA, not
 * olmoe's full-width q/k norm). The MoE block's split lives in its backend. */
typedef struct {
    ea_tensor wq, wk, wv; /* row views: this rank's heads (wq (n_heads*head_dim, hidden), ...) */
    ea_tensor wo;         /* (hidden, n_heads*head_dim): this rank's columns; owned by the provider */
} ea_forward_tp_layer;

typedef struct {
    int rank, size;
    int head0, n_heads, kv_head0, n_kv_heads;
    const ea_forward_tp_layer *layers; /* borrows: [n_layers] */
    ea_status (*allreduce)(void *ctx, float *buf, size_t n, int layer);
    void *ctx;
} ea_forward_tp;

typedef struct {
    int max_tokens;  /* largest n per call */
    int max_ctx;     /* positions per sequence (RoPE table, attention scratch) */
    ea_kctx *kctx_router; /* borrows: kernels for the gating products (router, shared-expert gate), one
                             that keeps activations in f32: routing decides on near-ties that bf16
                             rounding flips, and a gate stored as f32 in GGUF but bf16 in HF must give
                             the same bits both ways; NULL = kctx */
    int mla_expanded; /* MLA models: attend through expanded K/V (the published form) instead of
                         the absorbed form over the latent cache; for checking, slower */
    const ea_forward_tp *tp; /* borrows: tensor-parallel slice of attention; NULL = all heads here */
    ea_lin_state *lin;  /* borrows: recurrent state of the DeltaNet layers (qwen3_next, qwen3_5_moe; required
                           there), slots = the KV cache's sequence slots; the KV cache then holds only the
                           full-attention layers (ea_forward_kv_layers) */
    int dbo_min_tokens; /* double-batch overlap: a run of at least this many tokens (>= 2) goes as two
                           micro-batches, one's attention beside the other's experts
                           (forward.c); needs a backend with two lanes (moe.h) and no
                           tensor-parallel attention. 0: off */
} ea_forward_opts;

/* model, kctx, pool, backend and kv are borrowed and must outlive the forward. */
ea_status ea_forward_create(const ea_model *m, ea_kctx *kctx, ea_pool *pool, ea_moe_backend *be,
                            ea_kv_cache *kv, const ea_forward_opts *o, ea_forward **out);
void ea_forward_destroy(ea_forward *f);

/* Run n tokens. out_rows (n_out indices into 0..n-1) say which rows' logits
 * to write into logits (n_out, vocab). The backend's end of step is the
 * caller's: call ea_moe_end_step(backend) after each run (EPLB rebalances
 * there). A token whose experts could not run (a partial failure, moe.h) is
 * marked in ea_forward_outcome; the other rows are exact. */
ea_status ea_forward_run(ea_forward *f, int n, const int32_t *tokens, const int32_t *pos,
                         const int32_t *seq, int n_out, const int32_t *out_rows, float *logits);
/* A step with no tokens of this rank's own: only each MoE layer's backend call,
 * with 0 tokens — a data-parallel-attention backend needs every rank in each
 * layer's exchange (ep.h). No logits. */
ea_status ea_forward_run_empty(ea_forward *f);
/* The last run's per-token MoE outcome (valid until the next run). */
const ea_moe_outcome *ea_forward_outcome(const ea_forward *f);

/* Where the runs' time goes (bench_forward --phases): while set, every run
 * adds its seconds per phase to *t, measured on the calling thread.
 * attention: the attention block (projections, norms, RoPE, cache writes)
 * without the attend kernel; attend: that kernel; router: the router product
 * and top-k; experts: the routed and shared experts (the backend's submit and
 * wait); lm_head: final norm and LM head; total: the whole run (the rest is
 * embedding, norms and residuals). NULL stops. Costs two clock reads per phase. */
enum { EA_PHASE_ATTENTION, EA_PHASE_ATTEND, EA_PHASE_ROUTER, EA_PHASE_EXPERTS, EA_PHASE_LM_HEAD, EA_N_PHASES };
typedef struct {
    double s[EA_N_PHASES], total;
} ea_forward_times;
void ea_forward_set_times(ea_forward *f, ea_forward_times *t);

/* Layers that keep K/V in the KV cache: all but the DeltaNet layers. */
int ea_forward_kv_layers(const ea_model_config *c);

/* The KV cache this model needs (ea_kv_init): widths per token per layer
 * (k_dim, v_dim) and the heads they hold, for this rank's heads under tensor
 * parallelism (tp, or NULL). */
void ea_forward_kv_dims(const ea_model_config *c, const ea_forward_tp *tp, int *k_dim, int *v_dim, int *n_heads);

#endif
