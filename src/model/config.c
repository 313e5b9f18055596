/*
 * config.c — ea_model_config from an HF directory (config.json +
 * generation_config.json) or from GGUF metadata, and the checks and derived
 * fields both share (ea_config_finish). See config.h for the field list.
 *
 * HF defaults follow each family's transformers config class when a field is
 * absent (e.g. deepseek_v3 norm_topk_prob true, scoring sigmoid; qwen
 * decoder_sparse_step 1). GGUF keys follow llama.cpp's gguf-py constants:
 * "<arch>.block_count", "<arch>.attention.head_count_kv", ... with the
 * architecture names llama.cpp writes. Where GGUF lacks an HF field, the
 * choice is written next to the code (e.g. yarn mscale from yarn_log_multiplier).
 *
 * Invariant after ea_config_finish: every size the loader and the forward pass
 * multiply is in range (positive, bounded), heads divide evenly, top-k <= experts,
 * groups divide experts, layer_is_moe is set for every layer.
 */
#include "model/config.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "model/gguf.h"

const char *const ea_arch_names[EA_N_ARCHS] = {"qwen3_moe",   "qwen2_moe",   "mixtral",    "olmoe",
                                               "deepseek_v2", "deepseek_v3", "qwen3_next", "qwen3_5_moe"};

void ea_config_defaults(ea_model_config *c) {
    memset(c, 0, sizeof *c);
    c->rms_norm_eps = 1e-6f;
    c->rope_theta = 10000.0f;
    c->rope_factor = 1.0f;
    c->routed_scaling_factor = 1.0f;
    c->n_group = 1;
    c->topk_group = 1;
    c->moe_layer_freq = 1;
    c->bos_token_id = -1;
    c->pad_token_id = -1;
    c->gen_temperature = -1.0f;
    c->gen_top_p = -1.0f;
    c->gen_top_k = -1;
    c->yarn_beta_fast = 32.0f;
    c->yarn_beta_slow = 1.0f;
    c->llama3_low_freq_factor = 1.0f;
    c->llama3_high_freq_factor = 4.0f;
}

/* ---------------- HF config.json ---------------- */

typedef struct {
    const char *file;
    json_t *root;
} ea__js;

/* Integer field: absent -> keep *out (unless required). null counts as absent. */
static ea_status ea__js_int(const ea__js *j, const char *key, int required, int *out) {
    json_t *v = json_object_get(j->root, key);
    if (!v || json_is_null(v)) {
        if (required) return ea_err(EA_ERR_NOT_FOUND, "%s: required field '%s' is missing", j->file, key);
        return EA_OK;
    }
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))) {
        double d = json_real_value(v);
        if (d < -2147483648.0 || d > 2147483647.0)
            return ea_err(EA_ERR_RANGE, "%s: field '%s' = %g is out of range", j->file, key, d);
        *out = (int)d;
        return EA_OK;
    }
    if (!json_is_integer(v)) return ea_err(EA_ERR_FORMAT, "%s: field '%s' is not an integer", j->file, key);
    json_int_t x = json_integer_value(v);
    if (x < -2147483647LL - 1 || x > 2147483647LL)
        return ea_err(EA_ERR_RANGE, "%s: field '%s' = %lld is out of range", j->file, key, (long long)x);
    *out = (int)x;
    return EA_OK;
}

static ea_status ea__jv_float(const char *file, const char *key, json_t *v, float *out) {
    if (!v || json_is_null(v)) return EA_OK;
    if (!json_is_number(v)) return ea_err(EA_ERR_FORMAT, "%s: field '%s' is not a number", file, key);
    *out = (float)json_number_value(v);
    return EA_OK;
}

static ea_status ea__js_float(const ea__js *j, const char *key, float *out) {
    return ea__jv_float(j->file, key, json_object_get(j->root, key), out);
}

static ea_status ea__js_bool(const ea__js *j, const char *key, int *out) {
    json_t *v = json_object_get(j->root, key);
    if (!v || json_is_null(v)) return EA_OK;
    if (!json_is_boolean(v)) return ea_err(EA_ERR_FORMAT, "%s: field '%s' is not true/false", j->file, key);
    *out = json_is_true(v);
    return EA_OK;
}

static ea_status ea__js_str(const ea__js *j, const char *key, const char **out) {
    json_t *v = json_object_get(j->root, key);
    if (!v || json_is_null(v)) return EA_OK;
    if (!json_is_string(v)) return ea_err(EA_ERR_FORMAT, "%s: field '%s' is not a string", j->file, key);
    *out = json_string_value(v);
    return EA_OK;
}

/* eos_token_id: an int or a list of ints. */
static ea_status ea__js_eos(const ea__js *j, ea_model_config *c) {
    json_t *v = json_object_get(j->root, "eos_token_id");
    if (!v || json_is_null(v)) return EA_OK;
    if (json_is_integer(v)) {
        c->eos_token_ids[0] = (int)json_integer_value(v);
        c->n_eos = 1;
        return EA_OK;
    }
    if (!json_is_array(v)) return ea_err(EA_ERR_FORMAT, "%s: field 'eos_token_id' is not an int or a list", j->file);
    size_t n = json_array_size(v);
    if (n > EA_MAX_EOS)
        return ea_err(EA_ERR_RANGE, "%s: field 'eos_token_id' lists %zu ids (at most %d)", j->file, n, EA_MAX_EOS);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 0x7fffffff)
            return ea_err(EA_ERR_FORMAT, "%s: field 'eos_token_id[%zu]' is not a token id", j->file, i);
        c->eos_token_ids[i] = (int)json_integer_value(e);
    }
    c->n_eos = (int)n;
    return EA_OK;
}

static ea_status ea__rope_type(const char *file, const char *field, const char *t, ea_model_config *c) {
    if (!strcmp(t, "default") || !strcmp(t, "none")) c->rope_scaling = EA_ROPE_NONE;
    else if (!strcmp(t, "linear")) c->rope_scaling = EA_ROPE_LINEAR;
    else if (!strcmp(t, "dynamic")) c->rope_scaling = EA_ROPE_DYNAMIC;
    else if (!strcmp(t, "yarn")) c->rope_scaling = EA_ROPE_YARN;
    else if (!strcmp(t, "llama3")) c->rope_scaling = EA_ROPE_LLAMA3;
    else return ea_err(EA_ERR_UNSUPPORTED, "%s: %s '%s' is not supported (linear, dynamic, yarn, llama3 are)", file,
                       field, t);
    return EA_OK;
}

static ea_status ea__hf_rope(const ea__js *j, ea_model_config *c) {
    json_t *rs = json_object_get(j->root, "rope_scaling");
    if (!rs || json_is_null(rs)) rs = json_object_get(j->root, "rope_parameters");
    if (!rs || json_is_null(rs)) return EA_OK;
    if (!json_is_object(rs)) return ea_err(EA_ERR_FORMAT, "%s: field 'rope_scaling' is not an object", j->file);
    ea__js r = {j->file, rs};
    float theta = -1;
    EA_TRY(ea__jv_float(j->file, "rope_parameters.rope_theta", json_object_get(rs, "rope_theta"), &theta));
    if (theta > 0) c->rope_theta = theta;
    const char *t = NULL;
    EA_TRY(ea__js_str(&r, "rope_type", &t));
    if (!t) EA_TRY(ea__js_str(&r, "type", &t));
    if (!t) return ea_err(EA_ERR_FORMAT, "%s: field 'rope_scaling' has no 'type' or 'rope_type'", j->file);
    EA_TRY(ea__rope_type(j->file, "rope_scaling.type", t, c));
    static const char *const names[] = {"factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                                        "attention_factor", "low_freq_factor", "high_freq_factor"};
    float *dst[] = {&c->rope_factor, &c->yarn_beta_fast, &c->yarn_beta_slow, &c->yarn_mscale,
                    &c->yarn_mscale_all_dim, &c->yarn_attn_factor, &c->llama3_low_freq_factor,
                    &c->llama3_high_freq_factor};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char field[64];
        snprintf(field, sizeof field, "rope_scaling.%s", names[i]);
        EA_TRY(ea__jv_float(j->file, field, json_object_get(rs, names[i]), dst[i]));
    }
    json_t *mad = json_object_get(rs, "mscale_all_dim");
    if (json_is_number(mad)) c->yarn_log_mult = (float)(0.1 * json_number_value(mad));
    int orig = 0;
    EA_TRY(ea__js_int(&r, "original_max_position_embeddings", 0, &orig));
    c->rope_orig_max_pos = orig;
    if (c->rope_scaling != EA_ROPE_NONE && !(c->rope_factor > 0))
        return ea_err(EA_ERR_FORMAT, "%s: field 'rope_scaling.factor' must be > 0", j->file);
    return EA_OK;
}

static ea_status ea__hf_arch(const ea__js *j, ea_arch *arch) {
    const char *mt = NULL;
    EA_TRY(ea__js_str(j, "model_type", &mt));
    if (!mt) return ea_err(EA_ERR_NOT_FOUND, "%s: required field 'model_type' is missing", j->file);
    /* Kimi K2 names its own model_type but is DeepSeek-V3's architecture
     * (its architectures list says DeepseekV3ForCausalLM; vLLM maps it so). */
    if (!strcmp(mt, "kimi_k2")) mt = "deepseek_v3";
    for (int a = 0; a < EA_N_ARCHS; a++)
        if (!strcmp(mt, ea_arch_names[a])) {
            *arch = (ea_arch)a;
            return EA_OK;
        }
    return ea_err(EA_ERR_UNSUPPORTED,
                  "%s: model_type '%s' is not supported (qwen3_moe, qwen2_moe, mixtral, olmoe, deepseek_v2, "
                  "deepseek_v3 and kimi_k2, qwen3_next, qwen3_5_moe are)",
                  j->file, mt);
}

/* qwen3_next, or qwen3_5_moe's text_config (t); root: the whole config.json. */
static ea_status ea__hf_hybrid(const ea__js *t, const ea__js *root, ea_model_config *c) {
    int q35 = c->arch == EA_ARCH_QWEN3_5_MOE;
    EA_TRY(ea__js_int(t, "vocab_size", 1, &c->vocab_size));
    EA_TRY(ea__js_int(t, "hidden_size", 1, &c->hidden_size));
    EA_TRY(ea__js_int(t, "num_hidden_layers", 1, &c->n_layers));
    EA_TRY(ea__js_int(t, "num_attention_heads", 1, &c->n_heads));
    EA_TRY(ea__js_int(t, "num_key_value_heads", 1, &c->n_kv_heads));
    EA_TRY(ea__js_int(t, "head_dim", 0, &c->head_dim));
    EA_TRY(ea__js_int(t, "max_position_embeddings", 0, &c->max_position_embeddings));
    EA_TRY(ea__js_float(t, "rms_norm_eps", &c->rms_norm_eps));
    EA_TRY(ea__js_bool(t, "tie_word_embeddings", &c->tie_word_embeddings));
    EA_TRY(ea__js_bool(root, "tie_word_embeddings", &c->tie_word_embeddings));
    EA_TRY(ea__js_bool(t, "attention_bias", &c->attention_bias));
    if (c->attention_bias) return ea_err(EA_ERR_UNSUPPORTED, "%s: attention_bias true is not supported for %s",
                                         t->file, ea_arch_names[c->arch]);
    c->qk_norm = EA_QKNORM_PER_HEAD;
    c->attn_gate = 1;
    c->norm_one_plus = 1;
    EA_TRY(ea__js_float(t, "rope_theta", &c->rope_theta));
    EA_TRY(ea__hf_rope(t, c));
    if (c->rope_scaling != EA_ROPE_NONE)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: rope scaling is not supported for %s", t->file, ea_arch_names[c->arch]);
    float prf = 1.0f;
    EA_TRY(ea__js_float(t, "partial_rotary_factor", &prf));
    json_t *rp = json_object_get(t->root, "rope_parameters");
    if (json_is_object(rp))
        EA_TRY(ea__jv_float(t->file, "rope_parameters.partial_rotary_factor",
                            json_object_get(rp, "partial_rotary_factor"), &prf));
    EA_TRY(ea__js_int(t, "num_experts", 1, &c->n_experts));
    EA_TRY(ea__js_int(t, "num_experts_per_tok", 1, &c->n_experts_per_tok));
    EA_TRY(ea__js_int(t, "moe_intermediate_size", 1, &c->moe_intermediate_size));
    EA_TRY(ea__js_int(t, "shared_expert_intermediate_size", 0, &c->shared_expert_intermediate_size));
    if (q35) {
        c->norm_topk_prob = 1; /* Qwen3.5's router always renormalises */
    } else {
        EA_TRY(ea__js_bool(t, "norm_topk_prob", &c->norm_topk_prob));
        EA_TRY(ea__js_int(t, "intermediate_size", 0, &c->intermediate_size));
        EA_TRY(ea__js_int(t, "decoder_sparse_step", 0, &c->moe_layer_freq));
        json_t *mo = json_object_get(t->root, "mlp_only_layers");
        if (mo && !json_is_null(mo)) {
            if (!json_is_array(mo)) return ea_err(EA_ERR_FORMAT, "%s: field 'mlp_only_layers' is not a list", t->file);
            for (size_t i = 0; i < json_array_size(mo); i++) {
                json_t *e = json_array_get(mo, i);
                if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= EA_MAX_LAYERS)
                    return ea_err(EA_ERR_FORMAT, "%s: field 'mlp_only_layers[%zu]' is not a layer index", t->file, i);
                c->mlp_only[json_integer_value(e)] = 1;
            }
        }
    }
    EA_TRY(ea__js_int(t, "linear_num_key_heads", 1, &c->lin_n_k_heads));
    EA_TRY(ea__js_int(t, "linear_num_value_heads", 1, &c->lin_n_v_heads));
    EA_TRY(ea__js_int(t, "linear_key_head_dim", 1, &c->lin_k_dim));
    EA_TRY(ea__js_int(t, "linear_value_head_dim", 1, &c->lin_v_dim));
    c->lin_conv_kernel = 4;
    EA_TRY(ea__js_int(t, "linear_conv_kernel_dim", 0, &c->lin_conv_kernel));
    int interval = 4;
    EA_TRY(ea__js_int(t, "full_attention_interval", 0, &interval));
    if (interval < 1) return ea_err(EA_ERR_FORMAT, "%s: full_attention_interval %d must be >= 1", t->file, interval);
    if (c->n_layers < 1 || c->n_layers > EA_MAX_LAYERS)
        return ea_err(EA_ERR_FORMAT, "%s: num_hidden_layers %d is not in 1..%d", t->file, c->n_layers, EA_MAX_LAYERS);
    json_t *lt = json_object_get(t->root, "layer_types");
    if (lt && !json_is_null(lt) && (!json_is_array(lt) || json_array_size(lt) != (size_t)c->n_layers))
        return ea_err(EA_ERR_FORMAT, "%s: field 'layer_types' is not a list of %d layer types", t->file, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        int lin = (l + 1) % interval != 0;
        if (json_is_array(lt)) {
            const char *ty = json_string_value(json_array_get(lt, (size_t)l));
            if (!ty || (strcmp(ty, "linear_attention") && strcmp(ty, "full_attention")))
                return ea_err(EA_ERR_FORMAT, "%s: field 'layer_types[%d]' is not linear_attention or full_attention",
                              t->file, l);
            lin = !strcmp(ty, "linear_attention");
        }
        c->layer_is_linear[l] = (uint8_t)lin;
    }
    if (c->head_dim <= 0 && c->n_heads > 0) c->head_dim = c->hidden_size / c->n_heads;
    c->rope_dim = (int)((float)c->head_dim * prf);
    int id = -1;
    EA_TRY(ea__js_int(t, "bos_token_id", 0, &id));
    if (id >= 0) c->bos_token_id = id;
    id = -1;
    EA_TRY(ea__js_int(t, "pad_token_id", 0, &id));
    if (id >= 0) c->pad_token_id = id;
    EA_TRY(ea__js_eos(t, c));
    return EA_OK;
}

static ea_status ea__hf_config(const ea__js *j, ea_model_config *c) {
    EA_TRY(ea__hf_arch(j, &c->arch));
    if (c->arch == EA_ARCH_QWEN3_NEXT) return ea__hf_hybrid(j, j, c);
    if (c->arch == EA_ARCH_QWEN3_5_MOE) {
        json_t *tc = json_object_get(j->root, "text_config");
        if (!json_is_object(tc)) return ea_err(EA_ERR_NOT_FOUND, "%s: qwen3_5_moe without a 'text_config' object", j->file);
        ea__js t = {j->file, tc};
        return ea__hf_hybrid(&t, j, c);
    }
    ea_arch a = c->arch;
    int ds = a == EA_ARCH_DEEPSEEK_V2 || a == EA_ARCH_DEEPSEEK_V3;
    int qwen = a == EA_ARCH_QWEN3_MOE || a == EA_ARCH_QWEN2_MOE;
    if (a == EA_ARCH_MIXTRAL) c->rope_theta = 1e6f;
    if (a == EA_ARCH_MIXTRAL || a == EA_ARCH_OLMOE) c->rms_norm_eps = 1e-5f;
    EA_TRY(ea__js_int(j, "vocab_size", 1, &c->vocab_size));
    EA_TRY(ea__js_int(j, "hidden_size", 1, &c->hidden_size));
    EA_TRY(ea__js_int(j, "num_hidden_layers", 1, &c->n_layers));
    EA_TRY(ea__js_int(j, "num_attention_heads", 1, &c->n_heads));
    c->n_kv_heads = c->n_heads;
    EA_TRY(ea__js_int(j, "num_key_value_heads", 0, &c->n_kv_heads));
    EA_TRY(ea__js_int(j, "head_dim", 0, &c->head_dim));
    EA_TRY(ea__js_int(j, "max_position_embeddings", 0, &c->max_position_embeddings));
    EA_TRY(ea__js_float(j, "rms_norm_eps", &c->rms_norm_eps));
    EA_TRY(ea__js_bool(j, "tie_word_embeddings", &c->tie_word_embeddings));
    c->attention_bias = a == EA_ARCH_QWEN2_MOE;
    EA_TRY(ea__js_bool(j, "attention_bias", &c->attention_bias));
    c->qk_norm = a == EA_ARCH_QWEN3_MOE ? EA_QKNORM_PER_HEAD : a == EA_ARCH_OLMOE ? EA_QKNORM_FULL : EA_QKNORM_NONE;
    EA_TRY(ea__js_float(j, "rope_theta", &c->rope_theta));
    EA_TRY(ea__hf_rope(j, c));
    EA_TRY(ea__js_int(j, "intermediate_size", 0, &c->intermediate_size));
    EA_TRY(ea__js_int(j, "num_experts_per_tok", 1, &c->n_experts_per_tok));
    EA_TRY(ea__js_bool(j, "norm_topk_prob", &c->norm_topk_prob));

    if (qwen) {
        EA_TRY(ea__js_int(j, "num_experts", 1, &c->n_experts));
        EA_TRY(ea__js_int(j, "moe_intermediate_size", 1, &c->moe_intermediate_size));
        EA_TRY(ea__js_int(j, "decoder_sparse_step", 0, &c->moe_layer_freq));
        if (a == EA_ARCH_QWEN2_MOE)
            EA_TRY(ea__js_int(j, "shared_expert_intermediate_size", 1, &c->shared_expert_intermediate_size));
        json_t *mo = json_object_get(j->root, "mlp_only_layers");
        if (mo && !json_is_null(mo)) {
            if (!json_is_array(mo)) return ea_err(EA_ERR_FORMAT, "%s: field 'mlp_only_layers' is not a list", j->file);
            for (size_t i = 0; i < json_array_size(mo); i++) {
                json_t *e = json_array_get(mo, i);
                if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= EA_MAX_LAYERS)
                    return ea_err(EA_ERR_FORMAT, "%s: field 'mlp_only_layers[%zu]' is not a layer index", j->file, i);
                c->mlp_only[json_integer_value(e)] = 1;
            }
        }
    } else if (a == EA_ARCH_MIXTRAL || a == EA_ARCH_OLMOE) {
        EA_TRY(ea__js_int(j, a == EA_ARCH_MIXTRAL ? "num_local_experts" : "num_experts", 1, &c->n_experts));
        if (!c->intermediate_size)
            return ea_err(EA_ERR_NOT_FOUND, "%s: required field 'intermediate_size' is missing", j->file);
        c->moe_intermediate_size = c->intermediate_size; /* the expert FFN; no dense layers */
        if (a == EA_ARCH_MIXTRAL) c->norm_topk_prob = 1;  /* softmax over the top-k logits */
    } else if (ds) {
        int v3 = a == EA_ARCH_DEEPSEEK_V3;
        const char *tm = v3 ? "noaux_tc" : "greedy", *sf = v3 ? "sigmoid" : "softmax";
        c->norm_topk_prob = v3;
        EA_TRY(ea__js_bool(j, "norm_topk_prob", &c->norm_topk_prob));
        EA_TRY(ea__js_int(j, "n_routed_experts", 1, &c->n_experts));
        EA_TRY(ea__js_int(j, "moe_intermediate_size", 1, &c->moe_intermediate_size));
        EA_TRY(ea__js_int(j, "n_shared_experts", 0, &c->n_shared_experts));
        EA_TRY(ea__js_int(j, "first_k_dense_replace", 0, &c->first_k_dense_replace));
        EA_TRY(ea__js_int(j, "moe_layer_freq", 0, &c->moe_layer_freq));
        if (v3) c->n_group = 8, c->topk_group = 4;
        EA_TRY(ea__js_int(j, "n_group", 0, &c->n_group));
        EA_TRY(ea__js_int(j, "topk_group", 0, &c->topk_group));
        EA_TRY(ea__js_float(j, "routed_scaling_factor", &c->routed_scaling_factor));
        EA_TRY(ea__js_str(j, "topk_method", &tm));
        EA_TRY(ea__js_str(j, "scoring_func", &sf));
        if (!strcmp(tm, "greedy")) c->topk_method = EA_TOPK_GREEDY;
        else if (!strcmp(tm, "group_limited_greedy")) c->topk_method = EA_TOPK_GROUP_LIMITED;
        else if (!strcmp(tm, "noaux_tc")) c->topk_method = EA_TOPK_NOAUX_TC;
        else return ea_err(EA_ERR_UNSUPPORTED, "%s: topk_method '%s' is not supported", j->file, tm);
        if (!strcmp(sf, "softmax")) c->scoring = EA_SCORE_SOFTMAX;
        else if (!strcmp(sf, "sigmoid")) c->scoring = EA_SCORE_SIGMOID;
        else return ea_err(EA_ERR_UNSUPPORTED, "%s: scoring_func '%s' is not supported", j->file, sf);
        EA_TRY(ea__js_int(j, "q_lora_rank", 0, &c->q_lora_rank)); /* null -> 0: plain q projection */
        EA_TRY(ea__js_int(j, "kv_lora_rank", 1, &c->kv_lora_rank));
        EA_TRY(ea__js_int(j, "qk_nope_head_dim", 1, &c->qk_nope_head_dim));
        EA_TRY(ea__js_int(j, "qk_rope_head_dim", 1, &c->qk_rope_head_dim));
        EA_TRY(ea__js_int(j, "v_head_dim", 1, &c->v_head_dim));
        c->head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
    }
    if (!qwen && !ds) c->moe_layer_freq = 1;
    int id = -1;
    EA_TRY(ea__js_int(j, "bos_token_id", 0, &id));
    if (id >= 0) c->bos_token_id = id;
    id = -1;
    EA_TRY(ea__js_int(j, "pad_token_id", 0, &id));
    if (id >= 0) c->pad_token_id = id;
    EA_TRY(ea__js_eos(j, c));
    return EA_OK;
}

static ea_status ea__hf_generation(const ea__js *j, ea_model_config *c) {
    if (!json_is_object(j->root)) return ea_err(EA_ERR_FORMAT, "%s: not a JSON object", j->file);
    int id = -1;
    EA_TRY(ea__js_int(j, "bos_token_id", 0, &id));
    if (id >= 0) c->bos_token_id = id;
    id = -1;
    EA_TRY(ea__js_int(j, "pad_token_id", 0, &id));
    if (id >= 0) c->pad_token_id = id;
    EA_TRY(ea__js_eos(j, c));
    EA_TRY(ea__js_float(j, "temperature", &c->gen_temperature));
    EA_TRY(ea__js_float(j, "top_p", &c->gen_top_p));
    EA_TRY(ea__js_int(j, "top_k", 0, &c->gen_top_k));
    return EA_OK;
}

ea_status ea_config_from_hf_dir(const char *dir, ea_model_config *cfg) {
    char path[4096];
    ea_config_defaults(cfg);
    ea_path_join(path, sizeof path, dir, "config.json");
    if (!ea_file_exists(path)) return ea_err(EA_ERR_NOT_FOUND, "%s: no config.json in the model directory", dir);
    json_t *root;
    EA_TRY(ea_json_load_file(path, &root));
    ea__js j = {path, root};
    ea_status s = json_is_object(root) ? ea__hf_config(&j, cfg)
                                       : ea_err(EA_ERR_FORMAT, "%s: not a JSON object", path);
    json_decref(root);
    EA_TRY(s);
    ea_path_join(path, sizeof path, dir, "generation_config.json");
    if (ea_file_exists(path)) {
        EA_TRY(ea_json_load_file(path, &root));
        ea__js g = {path, root};
        s = ea__hf_generation(&g, cfg);
        json_decref(root);
        EA_TRY(s);
    }
    s = ea_config_finish(cfg);
    if (s != EA_OK) return ea_err_wrap(s, "%s/config.json: ", dir);
    return EA_OK;
}

/* ---------------- GGUF metadata ---------------- */

typedef struct {
    const ea_gguf *g;
    const char *arch; /* GGUF architecture name, the key prefix */
} ea__gk;

/* "<arch>.<suffix>" as int: absent -> keep *out unless required. */
static ea_status ea__gk_int(const ea__gk *k, const char *suffix, int required, int *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", k->arch, suffix);
    if (ea_gguf_find_kv(k->g, key) < 0) {
        if (required) return ea_err(EA_ERR_NOT_FOUND, "%s: required key '%s' is missing", k->g->path, key);
        return EA_OK;
    }
    ea_gguf_type et;
    if (ea_gguf_get_arr(k->g, key, &et, NULL) == EA_OK)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: key '%s' is a per-layer array (not supported)", k->g->path, key);
    int32_t v;
    EA_TRY(ea_gguf_get_i32(k->g, key, &v));
    *out = v;
    return EA_OK;
}

static ea_status ea__gk_float(const ea__gk *k, const char *suffix, float *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", k->arch, suffix);
    if (ea_gguf_find_kv(k->g, key) < 0) return EA_OK;
    return ea_gguf_get_f32(k->g, key, out);
}

static ea_status ea__gk_bool(const ea__gk *k, const char *suffix, int *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", k->arch, suffix);
    if (ea_gguf_find_kv(k->g, key) < 0) return EA_OK;
    return ea_gguf_get_bool(k->g, key, out);
}

static int ea__has_exp_probs_b(const ea_gguf *g) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strstr(g->tensors[i].name, ".exp_probs_b")) return 1;
    return 0;
}

ea_status ea_config_from_gguf(const ea_gguf *g, ea_model_config *c) {
    ea_config_defaults(c);
    const char *arch;
    if (ea_gguf_find_kv(g, "general.architecture") < 0)
        return ea_err(EA_ERR_NOT_FOUND, "%s: required key 'general.architecture' is missing", g->path);
    EA_TRY(ea_gguf_get_str(g, "general.architecture", &arch));
    ea__gk k = {g, arch};
    int n_exp = 0, gating = 0;
    EA_TRY(ea__gk_int(&k, "expert_count", 0, &n_exp));
    EA_TRY(ea__gk_int(&k, "expert_gating_func", 0, &gating));
    if (!strcmp(arch, "llama")) {
        if (n_exp <= 0)
            return ea_err(EA_ERR_UNSUPPORTED, "%s: architecture 'llama' without llama.expert_count > 0 is a dense "
                          "model (only MoE models are supported)", g->path);
        c->arch = EA_ARCH_MIXTRAL;
    } else if (!strcmp(arch, "qwen2moe")) {
        c->arch = EA_ARCH_QWEN2_MOE;
    } else if (!strcmp(arch, "qwen3moe")) {
        c->arch = EA_ARCH_QWEN3_MOE;
    } else if (!strcmp(arch, "olmoe")) {
        c->arch = EA_ARCH_OLMOE;
    } else if (!strcmp(arch, "qwen3next") || !strcmp(arch, "qwen35moe")) {
        c->arch = !strcmp(arch, "qwen3next") ? EA_ARCH_QWEN3_NEXT : EA_ARCH_QWEN3_5_MOE;
    } else if (!strcmp(arch, "deepseek2")) {
        /* one GGUF arch for V2 and V3: V3 routes with sigmoid (gating func 2) and a correction bias */
        c->arch = (gating == 2 || ea__has_exp_probs_b(g)) ? EA_ARCH_DEEPSEEK_V3 : EA_ARCH_DEEPSEEK_V2;
    } else {
        return ea_err(EA_ERR_UNSUPPORTED,
                      "%s: architecture '%s' is not supported (llama with experts, qwen2moe, qwen3moe, olmoe, "
                      "deepseek2, qwen3next, qwen35moe are)",
                      g->path, arch);
    }
    ea_arch a = c->arch;
    int ds = a == EA_ARCH_DEEPSEEK_V2 || a == EA_ARCH_DEEPSEEK_V3;
    int hyb = a == EA_ARCH_QWEN3_NEXT || a == EA_ARCH_QWEN3_5_MOE;
    char key_eps[160];
    EA_TRY(ea__gk_int(&k, "block_count", 1, &c->n_layers));
    EA_TRY(ea__gk_int(&k, "embedding_length", 1, &c->hidden_size));
    EA_TRY(ea__gk_int(&k, "attention.head_count", 1, &c->n_heads));
    c->n_kv_heads = c->n_heads;
    EA_TRY(ea__gk_int(&k, "attention.head_count_kv", 0, &c->n_kv_heads));
    EA_TRY(ea__gk_int(&k, "context_length", 1, &c->max_position_embeddings));
    /* required, as llama.cpp requires it for these architectures: a default would
     * silently differ from the HF config (1e-5 vs 1e-6) */
    snprintf(key_eps, sizeof key_eps, "%s.attention.layer_norm_rms_epsilon", arch);
    if (ea_gguf_find_kv(g, key_eps) < 0)
        return ea_err(EA_ERR_NOT_FOUND, "%s: required key '%s' is missing", g->path, key_eps);
    EA_TRY(ea__gk_float(&k, "attention.layer_norm_rms_epsilon", &c->rms_norm_eps));
    EA_TRY(ea__gk_float(&k, "rope.freq_base", &c->rope_theta));
    EA_TRY(ea__gk_int(&k, "feed_forward_length", 0, &c->intermediate_size));
    c->n_experts = n_exp;
    if (n_exp <= 0) return ea_err(EA_ERR_NOT_FOUND, "%s: required key '%s.expert_count' is missing", g->path, arch);
    EA_TRY(ea__gk_int(&k, "expert_used_count", 1, &c->n_experts_per_tok));
    c->moe_intermediate_size = c->intermediate_size;
    EA_TRY(ea__gk_int(&k, "expert_feed_forward_length", a == EA_ARCH_QWEN2_MOE || a == EA_ARCH_QWEN3_MOE || ds || hyb,
                      &c->moe_intermediate_size));
    if (a == EA_ARCH_MIXTRAL || a == EA_ARCH_OLMOE) {
        if (c->moe_intermediate_size <= 0)
            return ea_err(EA_ERR_NOT_FOUND, "%s: required key '%s.feed_forward_length' is missing", g->path, arch);
        c->intermediate_size = c->moe_intermediate_size;
    }
    c->attention_bias = a == EA_ARCH_QWEN2_MOE;
    c->qk_norm = a == EA_ARCH_QWEN3_MOE || hyb ? EA_QKNORM_PER_HEAD : a == EA_ARCH_OLMOE ? EA_QKNORM_FULL : EA_QKNORM_NONE;
    /* llama.cpp fixes the top-k renormalisation per architecture (llama/Mixtral and
     * qwen3moe yes; qwen2moe, olmoe no; deepseek2 from expert_weights_norm). Those are
     * the defaults here; an expert_weights_norm key, when a file has one, wins. */
    c->norm_topk_prob = a == EA_ARCH_MIXTRAL || a == EA_ARCH_QWEN3_MOE || hyb;
    EA_TRY(ea__gk_bool(&k, "expert_weights_norm", &c->norm_topk_prob));
    if (a == EA_ARCH_QWEN2_MOE || hyb)
        EA_TRY(ea__gk_int(&k, "expert_shared_feed_forward_length", 1, &c->shared_expert_intermediate_size));
    if (hyb) EA_TRY(ea__config_gguf_hybrid(g, arch, c));
    if (ds) {
        int v3 = a == EA_ARCH_DEEPSEEK_V3;
        EA_TRY(ea__gk_int(&k, "leading_dense_block_count", 0, &c->first_k_dense_replace));
        EA_TRY(ea__gk_int(&k, "expert_shared_count", 0, &c->n_shared_experts));
        EA_TRY(ea__gk_float(&k, "expert_weights_scale", &c->routed_scaling_factor));
        EA_TRY(ea__gk_int(&k, "expert_group_count", 0, &c->n_group));
        EA_TRY(ea__gk_int(&k, "expert_group_used_count", 0, &c->topk_group));
        c->scoring = gating == 2 ? EA_SCORE_SIGMOID : EA_SCORE_SOFTMAX;
        if (gating != 0 && gating != 1 && gating != 2)
            return ea_err(EA_ERR_UNSUPPORTED, "%s: key '%s.expert_gating_func' = %d (1 softmax, 2 sigmoid)", g->path,
                          arch, gating);
        c->topk_method = v3 ? EA_TOPK_NOAUX_TC : c->n_group > 1 ? EA_TOPK_GROUP_LIMITED : EA_TOPK_GREEDY;
        EA_TRY(ea__gk_int(&k, "attention.q_lora_rank", 0, &c->q_lora_rank));
        EA_TRY(ea__gk_int(&k, "attention.kv_lora_rank", 1, &c->kv_lora_rank));
        EA_TRY(ea__gk_int(&k, "rope.dimension_count", 1, &c->qk_rope_head_dim));
        int kl = 0, vl = 0, klm = 0, vlm = 0;
        EA_TRY(ea__gk_int(&k, "attention.key_length_mla", 0, &klm));
        EA_TRY(ea__gk_int(&k, "attention.value_length_mla", 0, &vlm));
        if (klm > 0) { /* newer converters: key_length is the absorbed (kv_lora + rope) width */
            kl = klm;
            vl = vlm;
        } else {
            EA_TRY(ea__gk_int(&k, "attention.key_length", 1, &kl));
            EA_TRY(ea__gk_int(&k, "attention.value_length", 1, &vl));
        }
        c->qk_nope_head_dim = kl - c->qk_rope_head_dim;
        c->v_head_dim = vl;
        c->head_dim = kl;
        if (c->qk_nope_head_dim <= 0 || vl <= 0)
            return ea_err(EA_ERR_FORMAT, "%s: key '%s.attention.key_length%s' = %d is not more than "
                          "rope.dimension_count %d", g->path, arch, klm > 0 ? "_mla" : "", kl, c->qk_rope_head_dim);
    } else {
        EA_TRY(ea__gk_int(&k, "attention.key_length", 0, &c->head_dim));
        int vl = 0;
        EA_TRY(ea__gk_int(&k, "attention.value_length", 0, &vl));
        if (vl && c->head_dim && vl != c->head_dim)
            return ea_err(EA_ERR_UNSUPPORTED, "%s: key '%s.attention.value_length' %d differs from key_length %d",
                          g->path, arch, vl, c->head_dim);
    }
    /* rope scaling */
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (ea_gguf_find_kv(g, key) >= 0) {
        const char *t;
        EA_TRY(ea_gguf_get_str(g, key, &t));
        EA_TRY(ea__rope_type(g->path, key, t, c));
        EA_TRY(ea__gk_float(&k, "rope.scaling.factor", &c->rope_factor));
        EA_TRY(ea__gk_int(&k, "rope.scaling.original_context_length", 0, &c->rope_orig_max_pos));
        EA_TRY(ea__gk_float(&k, "rope.scaling.yarn_beta_fast", &c->yarn_beta_fast));
        EA_TRY(ea__gk_float(&k, "rope.scaling.yarn_beta_slow", &c->yarn_beta_slow));
        EA_TRY(ea__gk_float(&k, "rope.scaling.attn_factor", &c->yarn_attn_factor));
        float ylm = 0;
        EA_TRY(ea__gk_float(&k, "rope.scaling.yarn_log_multiplier", &ylm));
        /* llama.cpp stores 0.1 * mscale_all_dim; HF DeepSeek configs carry mscale == mscale_all_dim,
         * so both come back from the one number (the cos/sin factor is then 1). */
        if (ylm > 0) c->yarn_mscale = c->yarn_mscale_all_dim = ylm / 0.1f;
        c->yarn_log_mult = ylm;
        if (c->rope_scaling != EA_ROPE_NONE && !(c->rope_factor > 0))
            return ea_err(EA_ERR_FORMAT, "%s: key '%s.rope.scaling.factor' must be > 0", g->path, arch);
    } else {
        float lin = 0;
        EA_TRY(ea__gk_float(&k, "rope.scale_linear", &lin));
        if (lin > 0 && lin != 1.0f) c->rope_scaling = EA_ROPE_LINEAR, c->rope_factor = lin;
    }
    /* vocabulary and tokens */
    EA_TRY(ea__gk_int(&k, "vocab_size", 0, &c->vocab_size));
    if (c->vocab_size <= 0) {
        uint64_t n = 0;
        if (ea_gguf_find_kv(g, "tokenizer.ggml.tokens") >= 0)
            EA_TRY(ea_gguf_get_arr(g, "tokenizer.ggml.tokens", NULL, &n));
        int te = ea_gguf_find_tensor(g, "token_embd.weight");
        if (n == 0 && te >= 0) n = (uint64_t)g->tensors[te].ne[g->tensors[te].n_dims - 1];
        if (n == 0 || n > 0x7fffffff)
            return ea_err(EA_ERR_NOT_FOUND, "%s: no '%s.vocab_size', tokenizer.ggml.tokens or token_embd.weight",
                          g->path, arch);
        c->vocab_size = (int)n;
    }
    int32_t id;
    if (ea_gguf_find_kv(g, "tokenizer.ggml.bos_token_id") >= 0) {
        EA_TRY(ea_gguf_get_i32(g, "tokenizer.ggml.bos_token_id", &id));
        c->bos_token_id = id;
    }
    if (ea_gguf_find_kv(g, "tokenizer.ggml.eos_token_id") >= 0) {
        EA_TRY(ea_gguf_get_i32(g, "tokenizer.ggml.eos_token_id", &id));
        c->eos_token_ids[c->n_eos++] = id;
    }
    if (ea_gguf_find_kv(g, "tokenizer.ggml.eot_token_id") >= 0) {
        EA_TRY(ea_gguf_get_i32(g, "tokenizer.ggml.eot_token_id", &id));
        if (c->n_eos == 0 || c->eos_token_ids[0] != id) c->eos_token_ids[c->n_eos++] = id;
    }
    if (ea_gguf_find_kv(g, "tokenizer.ggml.padding_token_id") >= 0) {
        EA_TRY(ea_gguf_get_i32(g, "tokenizer.ggml.padding_token_id", &id));
        c->pad_token_id = id;
    }
    c->tie_word_embeddings = ea_gguf_find_tensor(g, "output.weight") < 0;
    ea_status s = ea_config_finish(c);
    if (s != EA_OK) return ea_err_wrap(s, "%s: ", g->path);
    return EA_OK;
}

/* ---------------- shared checks ---------------- */

#define EA__CHECK(cond, ...)                                       \
    do {                                                           \
        if (!(cond)) return ea_err(EA_ERR_FORMAT, __VA_ARGS__);    \
    } while (0)

ea_status ea_config_finish(ea_model_config *c) {
    const int big = 1 << 20;
    EA__CHECK(c->n_layers >= 1 && c->n_layers <= EA_MAX_LAYERS, "num_hidden_layers %d is not in 1..%d", c->n_layers,
              EA_MAX_LAYERS);
    EA__CHECK(c->hidden_size >= 1 && c->hidden_size <= big, "hidden_size %d is out of range", c->hidden_size);
    EA__CHECK(c->vocab_size >= 1 && c->vocab_size <= (1 << 24), "vocab_size %d is out of range", c->vocab_size);
    EA__CHECK(c->n_heads >= 1 && c->n_heads <= 4096, "num_attention_heads %d is out of range", c->n_heads);
    EA__CHECK(c->n_kv_heads >= 1 && c->n_heads % c->n_kv_heads == 0,
              "num_key_value_heads %d does not divide num_attention_heads %d", c->n_kv_heads, c->n_heads);
    if (c->head_dim <= 0) {
        EA__CHECK(c->hidden_size % c->n_heads == 0, "hidden_size %d is not a multiple of num_attention_heads %d",
                  c->hidden_size, c->n_heads);
        c->head_dim = c->hidden_size / c->n_heads;
    }
    EA__CHECK(c->head_dim <= 4096 && (c->kv_lora_rank > 0 || c->head_dim % 2 == 0),
              "head_dim %d must be even and <= 4096", c->head_dim);
    if (c->max_position_embeddings <= 0) c->max_position_embeddings = 4096;
    EA__CHECK(c->rms_norm_eps > 0 && c->rms_norm_eps < 1, "rms_norm_eps %g is out of range", (double)c->rms_norm_eps);
    EA__CHECK(c->rope_theta > 0, "rope_theta %g must be > 0", (double)c->rope_theta);
    EA__CHECK(c->n_experts >= 1 && c->n_experts <= 4096, "number of experts %d is out of range", c->n_experts);
    EA__CHECK(c->n_experts_per_tok >= 1 && c->n_experts_per_tok <= c->n_experts,
              "num_experts_per_tok %d is not in 1..%d", c->n_experts_per_tok, c->n_experts);
    EA__CHECK(c->moe_intermediate_size >= 1 && c->moe_intermediate_size <= big,
              "moe_intermediate_size %d is out of range", c->moe_intermediate_size);
    EA__CHECK(c->intermediate_size >= 0 && c->intermediate_size <= big, "intermediate_size %d is out of range",
              c->intermediate_size);
    EA__CHECK(c->shared_expert_intermediate_size >= 0 && c->shared_expert_intermediate_size <= big,
              "shared_expert_intermediate_size %d is out of range", c->shared_expert_intermediate_size);
    EA__CHECK(c->n_shared_experts >= 0 && c->n_shared_experts <= 64, "n_shared_experts %d is out of range",
              c->n_shared_experts);
    if (c->n_group <= 0) c->n_group = 1;
    if (c->topk_group <= 0) c->topk_group = 1;
    EA__CHECK(c->n_experts % c->n_group == 0, "n_group %d does not divide the %d experts", c->n_group, c->n_experts);
    EA__CHECK(c->topk_group <= c->n_group, "topk_group %d > n_group %d", c->topk_group, c->n_group);
    EA__CHECK(c->first_k_dense_replace >= 0 && c->first_k_dense_replace <= c->n_layers,
              "first_k_dense_replace %d is out of range", c->first_k_dense_replace);
    if (c->moe_layer_freq <= 0) c->moe_layer_freq = 1;
    EA__CHECK(c->n_eos >= 0 && c->n_eos <= EA_MAX_EOS, "too many eos ids");
    if (c->arch == EA_ARCH_DEEPSEEK_V2 || c->arch == EA_ARCH_DEEPSEEK_V3) {
        EA__CHECK(c->kv_lora_rank >= 1 && c->kv_lora_rank <= big, "kv_lora_rank %d is out of range", c->kv_lora_rank);
        EA__CHECK(c->q_lora_rank >= 0 && c->q_lora_rank <= big, "q_lora_rank %d is out of range", c->q_lora_rank);
        EA__CHECK(c->qk_rope_head_dim >= 2 && c->qk_rope_head_dim % 2 == 0 && c->qk_rope_head_dim <= 4096,
                  "qk_rope_head_dim %d must be even and positive", c->qk_rope_head_dim);
        EA__CHECK(c->qk_nope_head_dim >= 1 && c->qk_nope_head_dim <= 4096, "qk_nope_head_dim %d is out of range",
                  c->qk_nope_head_dim);
        EA__CHECK(c->v_head_dim >= 1 && c->v_head_dim <= 4096, "v_head_dim %d is out of range", c->v_head_dim);
        EA__CHECK(c->n_kv_heads == c->n_heads || c->n_kv_heads >= 1, "bad kv heads");
        c->n_kv_heads = c->n_heads; /* MLA: every head has its own k/v from the latent */
    }
    c->n_linear_layers = 0;
    if (c->arch == EA_ARCH_QWEN3_NEXT || c->arch == EA_ARCH_QWEN3_5_MOE) {
        EA__CHECK(c->lin_n_k_heads >= 1 && c->lin_n_k_heads <= 1024 && c->lin_n_v_heads >= 1 &&
                      c->lin_n_v_heads <= 4096 && c->lin_n_v_heads % c->lin_n_k_heads == 0,
                  "linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c->lin_n_v_heads,
                  c->lin_n_k_heads);
        EA__CHECK(c->lin_k_dim >= 1 && c->lin_k_dim <= 1024 && c->lin_v_dim >= 1 && c->lin_v_dim <= 1024,
                  "linear_key_head_dim %d / linear_value_head_dim %d out of range", c->lin_k_dim, c->lin_v_dim);
        EA__CHECK(c->lin_conv_kernel >= 1 && c->lin_conv_kernel <= 16, "linear_conv_kernel_dim %d is not in 1..16",
                  c->lin_conv_kernel);
        EA__CHECK(c->rope_dim >= 2 && c->rope_dim % 2 == 0 && c->rope_dim <= c->head_dim,
                  "partial_rotary_factor gives %d rotary dims of head_dim %d (must be even, >= 2)", c->rope_dim,
                  c->head_dim);
        for (int l = 0; l < c->n_layers; l++) c->n_linear_layers += c->layer_is_linear[l];
    }
    int any_dense = 0;
    for (int l = 0; l < c->n_layers; l++) {
        int moe;
        switch (c->arch) {
        case EA_ARCH_QWEN3_NEXT:
        case EA_ARCH_QWEN3_MOE:
        case EA_ARCH_QWEN2_MOE: moe = !c->mlp_only[l] && (l + 1) % c->moe_layer_freq == 0; break;
        case EA_ARCH_DEEPSEEK_V2:
        case EA_ARCH_DEEPSEEK_V3: moe = l >= c->first_k_dense_replace && l % c->moe_layer_freq == 0; break;
        default: moe = 1; break;
        }
        c->layer_is_moe[l] = (uint8_t)moe;
        any_dense |= !moe;
    }
    EA__CHECK(!any_dense || c->intermediate_size >= 1, "intermediate_size is needed by the dense layers");
    return EA_OK;
}

/* ---------------- parameter counts ---------------- */

void ea_config_param_counts(const ea_model_config *c, int64_t *total, int64_t *active) {
    int64_t H = c->hidden_size, V = c->vocab_size;
    int64_t t = V * H + H + (c->tie_word_embeddings ? 0 : V * H), a = t;
    for (int l = 0; l < c->n_layers; l++) {
        int64_t att = 2 * H; /* attn_norm + ffn_norm */
        if (c->kv_lora_rank > 0) {
            int64_t qd = (int64_t)c->n_heads * (c->qk_nope_head_dim + c->qk_rope_head_dim);
            att += c->q_lora_rank > 0 ? H * c->q_lora_rank + c->q_lora_rank + (int64_t)c->q_lora_rank * qd : H * qd;
            att += H * (c->kv_lora_rank + c->qk_rope_head_dim) + c->kv_lora_rank;
            att += (int64_t)c->kv_lora_rank * c->n_heads * (c->qk_nope_head_dim + c->v_head_dim);
            att += (int64_t)c->n_heads * c->v_head_dim * H;
        } else if (c->layer_is_linear[l]) {
            int64_t nv = c->lin_n_v_heads, kd = (int64_t)c->lin_n_k_heads * c->lin_k_dim, vd = nv * c->lin_v_dim;
            int64_t conv = 2 * kd + vd;
            att += H * (conv + vd + 2 * nv) + conv * c->lin_conv_kernel + 2 * nv + c->lin_v_dim + vd * H;
        } else {
            int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
            att += (c->attn_gate ? 3 : 2) * H * q + 2 * H * kv;
            if (c->attention_bias) att += q + 2 * kv;
            if (c->qk_norm == EA_QKNORM_PER_HEAD) att += 2 * c->head_dim;
            if (c->qk_norm == EA_QKNORM_FULL) att += q + kv;
        }
        t += att;
        a += att;
        if (!c->layer_is_moe[l]) {
            t += 3 * H * c->intermediate_size;
            a += 3 * H * c->intermediate_size;
            continue;
        }
        int64_t router = (int64_t)c->n_experts * H + (c->topk_method == EA_TOPK_NOAUX_TC ? c->n_experts : 0);
        int64_t expert = 3 * H * c->moe_intermediate_size;
        int64_t shared = 3 * H * ((int64_t)c->n_shared_experts * c->moe_intermediate_size +
                                  c->shared_expert_intermediate_size);
        if (c->shared_expert_intermediate_size > 0) shared += H; /* qwen2_moe's sigmoid gate */
        t += router + shared + (int64_t)c->n_experts * expert;
        a += router + shared + (int64_t)c->n_experts_per_tok * expert;
    }
    if (total) *total = t;
    if (active) *active = a;
}
