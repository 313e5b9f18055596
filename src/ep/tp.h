/*
 * tp.h — tensor parallelism over MPI ranks (seed 002), kept to compare with EP.
 *
 * Rank r of N computes:
 *   attention  query heads [r*nh/N, (r+1)*nh/N) and their KV heads: wq/wk/wv
 *              as row views, wo as a copy of its columns; the output
 *              projection's partial sums are all-reduced (forward.h ea_forward_tp)
 *   routed experts  FFN columns [r*ff/N, (r+1)*ff/N): gate/up row views, down
 *              column copies; the MoE backend adds a token's k slots in order
 *              over this rank's columns, then all-reduces y
 * Everything else is replicated. The all-reduce adds ranks' partials in rank
 * order (dist.h), so every rank has the same bits and runs stay reproducible,
 * but the split reorders the sums inside the two products: close to one
 * process, not bit-identical.
 */
#ifndef EA_TP_H
#define EA_TP_H

#include "ep/dist.h"
#include "kernels/matmul.h"
#include "model/forward.h"
#include "model/model.h"

typedef struct ea_tp ea_tp;

/* Checks divisibility (heads, KV heads, expert FFN) and that column slices
 * hold whole dtype blocks; errors say which. */
ea_status ea_tp_create(ea_dist *d, const ea_model *m, ea_kctx *kctx, int max_tokens, ea_tp **out);
/* Ownership of the MoE backend passes to the caller (once). */
ea_moe_backend *ea_tp_take_backend(ea_tp *tp);
const ea_forward_tp *ea_tp_forward(const ea_tp *tp);
/* Bytes of weight copies this rank owns (wo and down column slices). */
size_t ea_tp_owned_bytes(const ea_tp *tp);
/* Destroy after the backend and the forward pass that use it. */
void ea_tp_destroy(ea_tp *tp);

#endif
