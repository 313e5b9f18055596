/*
 * lin_state.h — the recurrent state of the Gated DeltaNet layers (qwen3_next,
 * qwen3_5_moe), per sequence slot: a new kind of cache beside the paged KV
 * cache (which holds only the full-attention layers of these models).
 *
 * Per sequence slot s, per linear layer i (the i-th DeltaNet layer):
 *   conv  (K−1, C)       the last K−1 inputs of the causal conv, oldest first
 *                        (C = 2·nk·dk + nv·dv channels: q | k | v)
 *   ssm   (nv, dk, dv)   the delta-rule state of each value head
 * plus next_pos[s]: the position the state has reached (positions [0, next_pos)
 * went in). Storage is one block of floats per slot:
 *   seq block s: [layer 0: conv | ssm][layer 1: conv | ssm] ...   (seq_floats)
 *
 * Slots are the KV cache's (ea_kv_cache tables): the scheduler that admits,
 * preempts and frees a sequence's KV slot owns the same slot here, so the
 * state follows the sequence without a second allocator. A run that starts at
 * position 0 begins from a zero state (the forward pass clears it), so
 * admission and recompute-after-preemption need no call; a run that starts
 * anywhere but next_pos is refused (a prefix-cache hit cannot restore this
 * state yet: docs/decisions.md). ea_lin_state_copy/reset are for a scheduler
 * that snapshots states (prefix caching, later).
 *
 * Thread ownership: the step thread; the forward pass writes a slot's state
 * only from the tasks of that slot's sequence.
 */
#ifndef EA_LIN_STATE_H
#define EA_LIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/config.h"

typedef struct {
    int n_lin;          /* DeltaNet layers */
    int max_seqs;
    size_t conv_floats; /* (K−1)·C per layer */
    size_t ssm_floats;  /* nv·dk·dv per layer */
    size_t seq_floats;  /* n_lin · (conv + ssm) */
    float *data;        /* owns: (max_seqs, seq_floats), 64-byte aligned */
    int32_t *next_pos;  /* owns: (max_seqs) */
    int32_t lin_of[EA_MAX_LAYERS]; /* model layer -> DeltaNet layer index, -1 for attention layers */
} ea_lin_state;

/* Bytes of recurrent state per sequence of model c (0 for models without DeltaNet layers). */
size_t ea_lin_state_bytes_per_seq(const ea_model_config *c);

/* max_seqs slots for model c (which must have DeltaNet layers), all at position 0. */
ea_status ea_lin_state_init(ea_lin_state *st, const ea_model_config *c, int max_seqs);
void ea_lin_state_deinit(ea_lin_state *st);

/* Slot s back to the empty sequence (zero state, next_pos 0). */
void ea_lin_state_reset(ea_lin_state *st, int s);
/* Slot dst = slot src (state and position). */
void ea_lin_state_copy(ea_lin_state *st, int dst, int src);

static inline float *ea_lin_conv(const ea_lin_state *st, int layer, int s) {
    return st->data + (size_t)s * st->seq_floats + (size_t)st->lin_of[layer] * (st->conv_floats + st->ssm_floats);
}
static inline float *ea_lin_ssm(const ea_lin_state *st, int layer, int s) {
    return ea_lin_conv(st, layer, s) + st->conv_floats;
}

#endif
