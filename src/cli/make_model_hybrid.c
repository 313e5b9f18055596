/*
 * make_model_hybrid.c — `eaas make-model` for the hybrid families qwen3_next
 * (Qwen3-Next-80B-A3B) and qwen3_5_moe (the text part of Qwen3.5-397B-A17B):
 * presets, the tensor plan and config.json.
 *
 * Layer l is gated full attention when (l + 1) % full_attention_interval == 0,
 * Gated DeltaNet ("linear attention") otherwise; every layer is MoE (softmax
 * router, top-k renormalised, one shared expert behind a sigmoid gate).
 * Tensor names are the published checkpoints' (transformers' modeling files):
 *
 *   qwen3_next   model.layers.L.linear_attn.in_proj_qkvz   (2·nk·dk + 2·nv·dv, H)  grouped per key head
 *                                         .in_proj_ba      (2·nv, H)               grouped per key head
 *                mlp.experts.E.{gate,up,down}_proj.weight  one tensor per expert
 *   qwen3_5_moe  model.language_model.layers.L.linear_attn.in_proj_qkv (2·nk·dk + nv·dv, H),
 *                .in_proj_z (nv·dv, H), .in_proj_b (nv, H), .in_proj_a (nv, H)
 *                mlp.experts.gate_up_proj (E, 2·F, H) — gate rows first — and
 *                mlp.experts.down_proj (E, H, F): the experts stacked, as Qwen3.5 ships them
 *   both         linear_attn.conv1d.weight (C, 1, K), C = 2·nk·dk + nv·dv;
 *                linear_attn.dt_bias (nv), A_log (nv), norm.weight (dv), out_proj (H, nv·dv);
 *                self_attn.q_proj (2·nh·hd, H) — per head query then gate —, k/v/o_proj,
 *                q_norm/k_norm (hd); mlp.gate, mlp.shared_expert.*, mlp.shared_expert_gate (1, H)
 *
 * Values: the RMSNorms that scale by (1 + weight) (layer norms, q/k norms, the
 * final norm) get zero-centred weights (init NORM0); the DeltaNet output norm
 * multiplies by its plain weight (NORM, one-centred). A_log in (-1, 1) gives
 * A = exp(A_log) in (0.37, 2.7) (the published init draws A from (0, 16));
 * dt_bias in (-0.1, 0.1); conv1d 1/sqrt(K) as PyTorch's Conv1d init.
 *
 * No Qwen3.5 tokenizer ships in any package reachable here: both families get
 * the Qwen3 tokenizer and its vocabulary (151936). A real Qwen3.5 checkpoint
 * brings its own tokenizer.json (vocab 248320), which the loader takes as is.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/make_model_meta.h"
#include "cli/make_model_plan.h"

int ea__mm_is_hybrid(ea_mm_family f) { return f == EA_MM_QWEN3_NEXT || f == EA_MM_QWEN3_5_MOE; }

void ea__mm_hybrid_preset(ea_mm_shape *s, int bench) {
    s->norm_topk_prob = 1;
    s->qk_norm = 1;
    s->max_pos = 262144;
    s->rope_theta = 10000000.0;
    s->full_interval = 4;
    s->lin_conv = 4;
    s->partial_rotary = 0.25;
    if (bench) { /* ~2 B parameters, Qwen3-Next's ratios: 2 KV heads, value heads twice the key heads */
        s->n_layers = 24;
        s->hidden = 1024;
        s->n_heads = 16;
        s->n_kv_heads = 2;
        s->head_dim = 128;
        s->lin_nk = 8;
        s->lin_nv = 16;
        s->lin_dk = 64;
        s->lin_dv = 64;
        s->n_experts = 64;
        s->top_k = 8;
        s->moe_intermediate = 384;
        s->shared_intermediate = 384;
    } else { /* 3 DeltaNet layers then one full-attention layer */
        s->n_layers = 4;
        s->hidden = 64;
        s->n_heads = 4;
        s->n_kv_heads = 2;
        s->head_dim = 16;
        s->lin_nk = 2;
        s->lin_nv = 4;
        s->lin_dk = 16;
        s->lin_dv = 16;
        s->n_experts = 16;
        s->top_k = 8;
        s->moe_intermediate = 32;
        s->shared_intermediate = 64;
    }
    s->intermediate = s->moe_intermediate; /* no dense layers; written to config.json as the published do */
}

static ea_status add3(ea__mm_plan *p, const char *name, int64_t d0, int64_t d1, int64_t d2, double scale) {
    EA_TRY(ea__mm_add(p, name, "", 3, d0, d1, EA__MM_MAT));
    p->v[p->n - 1].shape[2] = d2;
    p->v[p->n - 1].scale = scale;
    return EA_OK;
}

ea_status ea__mm_build_hybrid(const ea_mm_shape *s, ea__mm_plan *p) {
    const int q35 = s->family == EA_MM_QWEN3_5_MOE;
    const char *root = q35 ? "model.language_model" : "model";
    const int64_t H = s->hidden, nh = s->n_heads, nkv = s->n_kv_heads, hd = s->head_dim, E = s->n_experts;
    const int64_t nk = s->lin_nk, nv = s->lin_nv, dk = s->lin_dk, dv = s->lin_dv, F = s->moe_intermediate;
    const int64_t conv = 2 * nk * dk + nv * dv;
    char n[96], pre[96];
#define NM(fmt) (snprintf(n, sizeof n, "%s.layers.%d." fmt, root, l), n)
#define ADD(name, nd, d0, d1, init) EA_TRY(ea__mm_add(p, name, "", nd, d0, d1, init))
    snprintf(n, sizeof n, "%s.embed_tokens.weight", root);
    ADD(n, 2, s->vocab, H, EA__MM_EMB);
    for (int l = 0; l < s->n_layers; l++) {
        ADD(NM("input_layernorm.weight"), 1, H, 0, EA__MM_NORM0);
        ADD(NM("post_attention_layernorm.weight"), 1, H, 0, EA__MM_NORM0);
        if ((l + 1) % s->full_interval == 0) {
            ADD(NM("self_attn.q_proj.weight"), 2, 2 * nh * hd, H, EA__MM_MAT);
            ADD(NM("self_attn.k_proj.weight"), 2, nkv * hd, H, EA__MM_MAT);
            ADD(NM("self_attn.v_proj.weight"), 2, nkv * hd, H, EA__MM_MAT);
            ADD(NM("self_attn.o_proj.weight"), 2, H, nh * hd, EA__MM_MAT);
            ADD(NM("self_attn.q_norm.weight"), 1, hd, 0, EA__MM_NORM0);
            ADD(NM("self_attn.k_norm.weight"), 1, hd, 0, EA__MM_NORM0);
        } else {
            if (q35) {
                ADD(NM("linear_attn.in_proj_qkv.weight"), 2, conv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_z.weight"), 2, nv * dv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_b.weight"), 2, nv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_a.weight"), 2, nv, H, EA__MM_MAT);
            } else {
                ADD(NM("linear_attn.in_proj_qkvz.weight"), 2, conv + nv * dv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_ba.weight"), 2, 2 * nv, H, EA__MM_MAT);
            }
            EA_TRY(add3(p, NM("linear_attn.conv1d.weight"), conv, 1, s->lin_conv, 1.0 / sqrt((double)s->lin_conv)));
            ADD(NM("linear_attn.dt_bias"), 1, nv, 0, EA__MM_BIAS);
            ADD(NM("linear_attn.A_log"), 1, nv, 0, EA__MM_BIAS);
            p->v[p->n - 1].scale = 1.0;
            ADD(NM("linear_attn.norm.weight"), 1, dv, 0, EA__MM_NORM);
            ADD(NM("linear_attn.out_proj.weight"), 2, H, nv * dv, EA__MM_MAT);
        }
        ADD(NM("mlp.gate.weight"), 2, E, H, EA__MM_MAT);
        if (q35) {
            EA_TRY(add3(p, NM("mlp.experts.gate_up_proj"), E, 2 * F, H, 1.0 / sqrt((double)H)));
            p->v[p->n - 1].fused_experts = (int)E;
            EA_TRY(add3(p, NM("mlp.experts.down_proj"), E, H, F, 1.0 / sqrt((double)F)));
            p->v[p->n - 1].fused_experts = (int)E;
        } else {
            static const char *const kn[3] = {"gate_proj", "up_proj", "down_proj"};
            for (int e = 0; e < E; e++)
                for (int k = 0; k < 3; k++) {
                    snprintf(n, sizeof n, "%s.layers.%d.mlp.experts.%d.%s.weight", root, l, e, kn[k]);
                    if (k == EA__MM_DOWN) ADD(n, 2, H, F, EA__MM_MAT);
                    else ADD(n, 2, F, H, EA__MM_MAT);
                    p->v[p->n - 1].layer = l;
                    p->v[p->n - 1].expert = e;
                    p->v[p->n - 1].ekind = k;
                }
        }
        snprintf(pre, sizeof pre, "%s.layers.%d.mlp.shared_expert", root, l);
        EA_TRY(ea__mm_add_ffn(p, l, pre, "_shexp", s->shared_intermediate, (int)H));
        ADD(NM("mlp.shared_expert_gate.weight"), 2, 1, H, EA__MM_MAT);
    }
    snprintf(n, sizeof n, "%s.norm.weight", root);
    ADD(n, 1, H, 0, EA__MM_NORM0);
    ADD("lm_head.weight", 2, s->vocab, H, EA__MM_MAT);
#undef NM
#undef ADD
    return EA_OK;
}

#define J_INT(o, k, v) json_object_set_new(o, k, json_integer((json_int_t)(v)))
#define J_REAL(o, k, v) json_object_set_new(o, k, json_real(v))
#define J_BOOL(o, k, v) json_object_set_new(o, k, json_boolean(v))
#define J_STR(o, k, v) json_object_set_new(o, k, json_string(v))

/* The text model's fields, as Qwen3-Next's config.json and Qwen3.5's text_config name them. */
json_t *ea__mm_hybrid_config_json(const ea_mm_shape *s, const char *torch_dtype) {
    int q35 = s->family == EA_MM_QWEN3_5_MOE;
    json_t *t = json_object();
    J_BOOL(t, "attention_bias", 0);
    J_REAL(t, "attention_dropout", 0.0);
    if (q35) J_BOOL(t, "attn_output_gate", 1);
    J_INT(t, "bos_token_id", s->bos);
    if (!q35) J_INT(t, "decoder_sparse_step", 1);
    J_INT(t, "eos_token_id", s->eos);
    J_INT(t, "full_attention_interval", s->full_interval);
    J_INT(t, "head_dim", s->head_dim);
    J_STR(t, "hidden_act", "silu");
    J_INT(t, "hidden_size", s->hidden);
    J_REAL(t, "initializer_range", 0.02);
    if (!q35) J_INT(t, "intermediate_size", s->intermediate);
    json_t *lt = json_array();
    for (int l = 0; l < s->n_layers; l++)
        json_array_append_new(lt, json_string((l + 1) % s->full_interval ? "linear_attention" : "full_attention"));
    json_object_set_new(t, "layer_types", lt);
    J_INT(t, "linear_conv_kernel_dim", s->lin_conv);
    J_INT(t, "linear_key_head_dim", s->lin_dk);
    J_INT(t, "linear_num_key_heads", s->lin_nk);
    J_INT(t, "linear_num_value_heads", s->lin_nv);
    J_INT(t, "linear_value_head_dim", s->lin_dv);
    J_INT(t, "max_position_embeddings", s->max_pos);
    if (!q35) json_object_set_new(t, "mlp_only_layers", json_array());
    J_STR(t, "model_type", q35 ? "qwen3_5_moe_text" : "qwen3_next");
    J_INT(t, "moe_intermediate_size", s->moe_intermediate);
    if (!q35) J_BOOL(t, "norm_topk_prob", s->norm_topk_prob);
    J_INT(t, "num_attention_heads", s->n_heads);
    J_INT(t, "num_experts", s->n_experts);
    J_INT(t, "num_experts_per_tok", s->top_k);
    J_INT(t, "num_hidden_layers", s->n_layers);
    J_INT(t, "num_key_value_heads", s->n_kv_heads);
    J_BOOL(t, "output_router_logits", 0);
    J_REAL(t, "rms_norm_eps", s->rms_eps);
    if (q35) { /* rope in rope_parameters; interleaved M-RoPE is plain RoPE for text positions */
        json_t *r = json_object();
        J_BOOL(r, "mrope_interleaved", 1);
        json_t *sec = json_array();
        json_array_append_new(sec, json_integer(11));
        json_array_append_new(sec, json_integer(11));
        json_array_append_new(sec, json_integer(10));
        json_object_set_new(r, "mrope_section", sec);
        J_REAL(r, "partial_rotary_factor", s->partial_rotary);
        J_STR(r, "rope_type", "default");
        J_REAL(r, "rope_theta", s->rope_theta);
        json_object_set_new(t, "rope_parameters", r);
    } else {
        J_REAL(t, "partial_rotary_factor", s->partial_rotary);
        json_object_set_new(t, "rope_scaling", json_null());
        J_REAL(t, "rope_theta", s->rope_theta);
    }
    J_REAL(t, "router_aux_loss_coef", 0.001);
    J_INT(t, "shared_expert_intermediate_size", s->shared_intermediate);
    J_BOOL(t, "tie_word_embeddings", 0);
    J_STR(t, "torch_dtype", torch_dtype);
    J_BOOL(t, "use_cache", 1);
    if (!q35) J_BOOL(t, "use_sliding_window", 0);
    J_INT(t, "vocab_size", s->vocab);
    json_t *a = json_array();
    json_array_append_new(a, json_string(q35 ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3NextForCausalLM"));
    if (!q35) {
        json_object_set_new(t, "architectures", a);
        return t;
    }
    /* Qwen3.5: the text model nested under text_config (the vision tower is not written) */
    json_t *c = json_object();
    json_object_set_new(c, "architectures", a);
    J_STR(c, "model_type", "qwen3_5_moe");
    json_object_set_new(c, "text_config", t);
    J_BOOL(c, "tie_word_embeddings", 0);
    J_STR(c, "torch_dtype", torch_dtype);
    J_STR(c, "transformers_version", "4.57.0");
    return c;
}
