/*
 * config_hybrid.c — the GGUF metadata of the hybrid families, as llama.cpp's
 * converter writes it (Qwen3NextModel.set_gguf_parameters, shared by qwen35moe)
 * and its loader reads it (llama_model_qwen3next / qwen35moe::load_arch_hparams).
 * ea_config_from_gguf reads the common keys (block_count, heads, key_length,
 * expert_*); this adds, with prefix "<arch>." (qwen3next | qwen35moe):
 *
 *   key                       config field                 note
 *   ssm.conv_kernel           lin_conv_kernel              required
 *   ssm.group_count           lin_n_k_heads                required
 *   ssm.time_step_rank        lin_n_v_heads                required
 *   ssm.state_size            lin_k_dim                    required
 *   ssm.inner_size            lin_v_dim * lin_n_v_heads    required
 *   full_attention_interval   layer_is_linear              default 4 (as llama.cpp)
 *   rope.dimension_count      rope_dim (head_dim · partial_rotary_factor)   required
 *   rope.dimension_sections   (qwen35moe: M-RoPE sections; text positions: plain RoPE, not read)
 *
 * What the converter changed in the tensors is recorded here for the forward
 * pass: the (1 + w) norms are stored with the 1 added (norm_one_plus = 0) and
 * ssm_a holds A = -exp(A_log) (lin_a_neg_exp = 1).
 */
#include <stdio.h>

#include "model/config.h"
#include "model/gguf.h"

static ea_status key_int(const ea_gguf *g, const char *arch, const char *suffix, int required, int *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (ea_gguf_find_kv(g, key) < 0) {
        if (required) return ea_err(EA_ERR_NOT_FOUND, "%s: required key '%s' is missing", g->path, key);
        return EA_OK;
    }
    int32_t v;
    EA_TRY(ea_gguf_get_i32(g, key, &v));
    *out = v;
    return EA_OK;
}

ea_status ea__config_gguf_hybrid(const ea_gguf *g, const char *arch, ea_model_config *c) {
    int inner = 0, interval = 4;
    EA_TRY(key_int(g, arch, "ssm.conv_kernel", 1, &c->lin_conv_kernel));
    EA_TRY(key_int(g, arch, "ssm.group_count", 1, &c->lin_n_k_heads));
    EA_TRY(key_int(g, arch, "ssm.time_step_rank", 1, &c->lin_n_v_heads));
    EA_TRY(key_int(g, arch, "ssm.state_size", 1, &c->lin_k_dim));
    EA_TRY(key_int(g, arch, "ssm.inner_size", 1, &inner));
    EA_TRY(key_int(g, arch, "full_attention_interval", 0, &interval));
    EA_TRY(key_int(g, arch, "rope.dimension_count", 1, &c->rope_dim));
    if (c->lin_n_v_heads < 1 || inner < 1 || inner % c->lin_n_v_heads)
        return ea_err(EA_ERR_FORMAT, "%s: key '%s.ssm.inner_size' %d is not a multiple of ssm.time_step_rank %d",
                      g->path, arch, inner, c->lin_n_v_heads);
    c->lin_v_dim = inner / c->lin_n_v_heads;
    if (interval < 1)
        return ea_err(EA_ERR_FORMAT, "%s: key '%s.full_attention_interval' %d must be >= 1", g->path, arch, interval);
    if (c->n_layers < 1 || c->n_layers > EA_MAX_LAYERS)
        return ea_err(EA_ERR_FORMAT, "%s: block_count %d is not in 1..%d", g->path, c->n_layers, EA_MAX_LAYERS);
    for (int l = 0; l < c->n_layers; l++) c->layer_is_linear[l] = (uint8_t)((l + 1) % interval != 0);
    c->attn_gate = 1;
    c->norm_one_plus = 0; /* the converter stored 1 + w */
    c->lin_a_neg_exp = 1; /* and -exp(A_log) */
    return EA_OK;
}
