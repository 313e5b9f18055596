/*
 * lin_state.c — per-sequence recurrent state of the DeltaNet layers; see lin_state.h.
 */
#include "model/lin_state.h"

#include <string.h>

#include "base/alloc.h"

static size_t conv_floats(const ea_model_config *c) {
    size_t C = 2 * (size_t)c->lin_n_k_heads * c->lin_k_dim + (size_t)c->lin_n_v_heads * c->lin_v_dim;
    return (size_t)(c->lin_conv_kernel - 1) * C;
}

static size_t ssm_floats(const ea_model_config *c) {
    return (size_t)c->lin_n_v_heads * c->lin_k_dim * c->lin_v_dim;
}

size_t ea_lin_state_bytes_per_seq(const ea_model_config *c) {
    return (size_t)c->n_linear_layers * (conv_floats(c) + ssm_floats(c)) * sizeof(float);
}

ea_status ea_lin_state_init(ea_lin_state *st, const ea_model_config *c, int max_seqs) {
    memset(st, 0, sizeof *st);
    if (c->n_linear_layers <= 0) return ea_err(EA_ERR_INVALID_ARG, "recurrent state for a model without DeltaNet layers");
    if (max_seqs < 1) return ea_err(EA_ERR_INVALID_ARG, "recurrent state for %d sequences", max_seqs);
    st->n_lin = c->n_linear_layers;
    st->max_seqs = max_seqs;
    st->conv_floats = conv_floats(c);
    st->ssm_floats = ssm_floats(c);
    st->seq_floats = (size_t)st->n_lin * (st->conv_floats + st->ssm_floats);
    for (int l = 0, i = 0; l < EA_MAX_LAYERS; l++) st->lin_of[l] = l < c->n_layers && c->layer_is_linear[l] ? i++ : -1;
    size_t bytes = (size_t)max_seqs * st->seq_floats * sizeof(float);
    st->data = ea_aligned_alloc(64, bytes);
    st->next_pos = ea_calloc((size_t)max_seqs, sizeof *st->next_pos);
    if (!st->data || !st->next_pos) {
        ea_lin_state_deinit(st);
        return ea_err(EA_ERR_NOMEM, "recurrent state: %zu bytes for %d sequences", bytes, max_seqs);
    }
    memset(st->data, 0, bytes);
    return EA_OK;
}

void ea_lin_state_deinit(ea_lin_state *st) {
    ea_aligned_free(st->data);
    ea_free(st->next_pos);
    memset(st, 0, sizeof *st);
}

void ea_lin_state_reset(ea_lin_state *st, int s) {
    memset(st->data + (size_t)s * st->seq_floats, 0, st->seq_floats * sizeof(float));
    st->next_pos[s] = 0;
}

void ea_lin_state_copy(ea_lin_state *st, int dst, int src) {
    if (dst == src) return;
    memcpy(st->data + (size_t)dst * st->seq_floats, st->data + (size_t)src * st->seq_floats,
           st->seq_floats * sizeof(float));
    st->next_pos[dst] = st->next_pos[src];
}
