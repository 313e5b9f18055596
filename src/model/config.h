/*
 * config.h — one internal description of a model's hyper-parameters, filled
 * from an HF directory (config.json + generation_config.json) or from GGUF
 * metadata. Every family-specific field lives here with the HF name it comes
 * from; the forward pass reads only this struct, never the files.
 *
 * Families and where their fields come from (HF name -> field):
 *   qwen3_moe   num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob,
 *               decoder_sparse_step, mlp_only_layers, head_dim; q/k RMSNorm per head
 *   qwen2_moe   + shared_expert_intermediate_size (one shared expert, sigmoid gate),
 *               qkv bias; no q/k norm
 *   mixtral     num_local_experts, num_experts_per_tok, intermediate_size is the expert
 *               FFN; softmax top-k renormalised
 *   olmoe       num_experts, num_experts_per_tok, norm_topk_prob; q/k RMSNorm over
 *               the whole projection (n_heads*head_dim / n_kv_heads*head_dim)
 *   deepseek_v2 / deepseek_v3
 *               n_routed_experts, n_shared_experts, moe_intermediate_size,
 *               first_k_dense_replace, moe_layer_freq, n_group, topk_group, topk_method,
 *               scoring_func, routed_scaling_factor, norm_topk_prob, q_lora_rank,
 *               kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
 *   qwen3_next / qwen3_5_moe (Qwen3.5: the fields of config.json's text_config)
 *               as qwen3_moe + shared_expert_intermediate_size, full_attention_interval or
 *               layer_types, linear_num_key_heads, linear_num_value_heads,
 *               linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim,
 *               partial_rotary_factor (top level or in rope_parameters); q_proj carries a
 *               per-head output gate; RMSNorms scale by (1 + weight); qwen3_5_moe always
 *               renormalises top-k and has no dense layers
 *
 * GGUF architecture names (as llama.cpp writes them): "llama" with
 * llama.expert_count > 0 (Mixtral), "qwen2moe", "qwen3moe", "olmoe", "deepseek2".
 */
#ifndef EA_CONFIG_H
#define EA_CONFIG_H

#include <stdint.h>

#include "base/status.h"

typedef enum {
    EA_ARCH_QWEN3_MOE = 0,
    EA_ARCH_QWEN2_MOE,
    EA_ARCH_MIXTRAL,
    EA_ARCH_OLMOE,
    EA_ARCH_DEEPSEEK_V2,
    EA_ARCH_DEEPSEEK_V3,
    EA_ARCH_QWEN3_NEXT,   /* hybrid: Gated DeltaNet + gated full attention (model/deltanet.c) */
    EA_ARCH_QWEN3_5_MOE,
    EA_N_ARCHS
} ea_arch;

/* HF model_type strings, indexed by ea_arch: "qwen3_moe", "qwen2_moe", ... */
extern const char *const ea_arch_names[EA_N_ARCHS];

typedef enum { EA_SCORE_SOFTMAX = 0, EA_SCORE_SIGMOID } ea_scoring;
typedef enum {
    EA_TOPK_GREEDY = 0,        /* plain top-k over all experts */
    EA_TOPK_GROUP_LIMITED,     /* deepseek_v2 "group_limited_greedy": group score = max */
    EA_TOPK_NOAUX_TC           /* deepseek_v3 "noaux_tc": group score = sum of top-2, bias for selection */
} ea_topk_method;
typedef enum { EA_QKNORM_NONE = 0, EA_QKNORM_PER_HEAD, EA_QKNORM_FULL } ea_qknorm;
typedef enum { EA_ROPE_NONE = 0, EA_ROPE_LINEAR, EA_ROPE_DYNAMIC, EA_ROPE_YARN, EA_ROPE_LLAMA3 } ea_rope_scaling;

#define EA_MAX_EOS 8
#define EA_MAX_LAYERS 256

typedef struct {
    ea_arch arch;

    int vocab_size;
    int hidden_size;
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int head_dim;               /* qwen3_moe: explicit; others hidden/n_heads */
    int max_position_embeddings;
    float rms_norm_eps;
    int tie_word_embeddings;
    int attention_bias;         /* q/k/v projections have a bias (qwen2_moe) */
    ea_qknorm qk_norm;

    /* RoPE */
    float rope_theta;
    ea_rope_scaling rope_scaling;
    float rope_factor;
    int rope_orig_max_pos;      /* original_max_position_embeddings */
    float yarn_beta_fast, yarn_beta_slow, yarn_mscale, yarn_mscale_all_dim;
    float yarn_attn_factor;     /* "attention_factor" if given, else 0 (= derive) */
    float yarn_log_mult;        /* 0.1 * mscale_all_dim rounded to f32, as GGUF stores it
                                   (rope.scaling.yarn_log_multiplier); MLA's softmax-scale
                                   correction is computed from this one f32 in both formats */
    float llama3_low_freq_factor, llama3_high_freq_factor;

    /* Feed-forward */
    int intermediate_size;      /* dense FFN (leading dense layers); mixtral: expert FFN */
    int moe_intermediate_size;  /* routed expert FFN */
    int n_experts;              /* routed experts */
    int n_experts_per_tok;      /* top-k */
    int n_shared_experts;       /* deepseek: count of shared experts (FFN = n * moe_intermediate) */
    int shared_expert_intermediate_size; /* qwen2_moe: one shared expert of this size, with sigmoid gate */
    int norm_topk_prob;
    float routed_scaling_factor; /* 1.0 if absent */
    ea_scoring scoring;
    ea_topk_method topk_method;
    int n_group, topk_group;    /* 1,1 when not group-limited */
    int first_k_dense_replace;  /* layers [0, k) are dense */
    int moe_layer_freq;         /* deepseek; qwen: decoder_sparse_step */
    uint8_t mlp_only[EA_MAX_LAYERS]; /* qwen mlp_only_layers: 1 = dense even if the step says MoE */
    uint8_t layer_is_moe[EA_MAX_LAYERS]; /* derived: 1 if layer l has routed experts */

    /* MLA (deepseek); 0 when not used. q_lora_rank 0 = plain q projection. */
    int q_lora_rank;
    int kv_lora_rank;
    int qk_nope_head_dim;
    int qk_rope_head_dim;
    int v_head_dim;

    /* Hybrid models (qwen3_next, qwen3_5_moe); zero elsewhere. */
    uint8_t layer_is_linear[EA_MAX_LAYERS]; /* 1: Gated DeltaNet layer (no KV cache), 0: attention */
    int n_linear_layers;
    int lin_n_k_heads, lin_n_v_heads, lin_k_dim, lin_v_dim, lin_conv_kernel;
    int rope_dim;               /* rotary dims per head (head_dim * partial_rotary_factor); 0 = head_dim */
    int attn_gate;              /* q_proj rows per head: [query (head_dim) | gate (head_dim)]; o *= sigmoid(gate) */
    int norm_one_plus;          /* layer, q/k and final RMSNorms scale by (1 + weight) (HF; GGUF stores 1 + w) */
    int lin_a_neg_exp;          /* lin_a_log holds A = -exp(A_log) (GGUF ssm_a), not A_log (HF) */

    /* Tokens and generation defaults (generation_config.json / GGUF tokenizer.ggml.*) */
    int bos_token_id;           /* -1 if none */
    int eos_token_ids[EA_MAX_EOS];
    int n_eos;
    int pad_token_id;           /* -1 if none */
    float gen_temperature;      /* < 0 if unset */
    float gen_top_p;            /* < 0 if unset */
    int gen_top_k;              /* < 0 if unset */
} ea_model_config;

/* Set defaults, then fill from HF config.json (+ generation_config.json beside it, if present).
 * dir is the model directory. Errors name the file and field. */
ea_status ea_config_from_hf_dir(const char *dir, ea_model_config *cfg);

/* Set the defaults both loaders start from (arch-independent: -1 ids, scale 1, ...). */
void ea_config_defaults(ea_model_config *cfg);

/* Fill from GGUF metadata as llama.cpp writes it (<arch>.block_count, ...); the
 * tensor list decides tie_word_embeddings (no output.weight) and deepseek V3
 * (exp_probs_b tensors). Unsupported architecture or a missing required key:
 * one message naming the file and the key. */
struct ea_gguf;
ea_status ea_config_from_gguf(const struct ea_gguf *g, ea_model_config *cfg);
/* config_hybrid.c: the keys of qwen3next / qwen35moe beyond the common ones (ssm.*,
 * full_attention_interval, rope.dimension_count); called by ea_config_from_gguf. */
ea_status ea__config_gguf_hybrid(const struct ea_gguf *g, const char *arch, ea_model_config *cfg);

/* Derived fields (layer_is_moe, head_dim default, ...) and range checks shared by both
 * loaders; called by them at the end. Errors name the field. */
ea_status ea_config_finish(ea_model_config *cfg);

/* Parameter counts: total, and active per token (top-k routed + shared + dense parts). */
void ea_config_param_counts(const ea_model_config *cfg, int64_t *total, int64_t *active);

#endif
