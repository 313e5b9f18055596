/*
 * make_model.c — presets, the tensor plan, the value generator, and the two
 * writers' drivers of `eaas make-model` (see make_model.h; metadata and
 * tokenizer files are in make_model_meta.c).
 *
 * The tensor plan is the list of HF tensors ("sources") a family's modeling
 * code names, each with its shape (PyTorch order), its init class and its
 * GGUF destination. It is sorted by name: HF files hold tensors in that
 * order (as save_pretrained writes a single-dtype checkpoint), and the GGUF
 * tensors follow the order convert_hf_to_gguf.py produces when it reads such
 * a file — tensors one by one in name order, the routed experts of a layer
 * stacked when the last of them is met (down, gate, up; Mixtral w1, w2, w3).
 *
 * Values (the documented PRNG; a NumPy re-implementation is a few lines):
 *   key(N)   = mix64(fnv1a64(N) ^ mix64(seed))        N = HF tensor name
 *   z_i      = mix64(key + (i + 1) * 0x9E3779B97F4A7C15)   (splitmix64)
 *   v_i      = ((z_i >> 40) + 0.5) / 2^23 - 1           uniform in (-1, 1), exact in double
 *   x_i      = (float)(base + scale * v_i)              computed in double, rounded once
 *   value_i  = x_i rounded to the model dtype (bf16/f16; f32 and q8_0 keep x_i)
 * with mix64 the splitmix64 finaliser and i the flat row-major index in the
 * HF tensor. (base, scale): linear weights (0, 1/sqrt(in_features)) — the
 * PyTorch nn.Linear default range; embeddings (0, 1); RMSNorm weights
 * (1, 0.1); biases and e_score_correction_bias (0, 0.1).
 *
 * Invariants: a GGUF tensor element is always value(src, i) of exactly one
 * HF source element (stack, row permutation or kv_b split only move
 * elements), so HF and GGUF of one seed agree bit for bit once converted to
 * f32, except where the GGUF type is narrower (q8_0, or f16 fallbacks).
 */
#include "cli/make_model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/util.h"
#include "cli/make_model_meta.h"
#include "cli/make_model_plan.h"
#include "model/gguf_write.h"
#include "model/st_write.h"

const char *const ea_mm_family_names[EA_MM_N_FAMILIES] = {"qwen3_moe",   "qwen2_moe",   "mixtral",
                                                         "olmoe",       "deepseek_v2", "deepseek_v3",
                                                         "qwen3_next",  "qwen3_5_moe"};

ea_status ea_mm_family_parse(const char *name, ea_mm_family *out) {
    for (int i = 0; i < EA_MM_N_FAMILIES; i++)
        if (strcmp(name, ea_mm_family_names[i]) == 0) {
            *out = (ea_mm_family)i;
            return EA_OK;
        }
    return ea_err(EA_ERR_INVALID_ARG, "unknown family '%s' (qwen3_moe, qwen2_moe, mixtral, olmoe, deepseek_v2, deepseek_v3, "
                  "qwen3_next, qwen3_5_moe)",
                  name);
}

/* ------------------------------------------------------------------ presets */

static void ea__mm_common(ea_mm_shape *s, ea_mm_family f, int bench) {
    memset(s, 0, sizeof *s);
    s->family = f;
    s->preset = bench ? "bench" : "tiny";
    s->routed_scaling = 1.0;
    s->topk_method = "greedy";
    s->n_group = s->topk_group = 1;
    if (bench) {
        s->n_layers = 24;
        s->hidden = 1024;
        s->n_heads = 16;
        s->n_kv_heads = 4;
        s->head_dim = 64;
        s->intermediate = 3072;
        s->moe_intermediate = 384;
        s->n_experts = 64;
        s->top_k = 8;
    } else {
        s->n_layers = 2;
        s->hidden = 64;
        s->n_heads = 4;
        s->n_kv_heads = 2;
        s->head_dim = 16;
        s->intermediate = 128;
        s->moe_intermediate = 32;
        /* top-8 of 16 as Qwen3 and OLMoE route (families override): a token's
         * sum has enough terms that its order shows in the bits, and 2 or 4
         * EP ranks each own several experts */
        s->n_experts = 16;
        s->top_k = 8;
    }
    /* Qwen3 tokenizer (qwen3_moe's config.json vocab_size, ids from its tokenizer_config) */
    s->vocab = 151936;
    s->bos = 151643; /* <|endoftext|> */
    s->eos = 151645; /* <|im_end|> */
    s->pad = 151643;
    s->rms_eps = 1e-6;
    s->rope_theta = 1000000.0;
}

ea_status ea_mm_shape_get(const char *family, const char *preset, ea_mm_shape *s) {
    ea_mm_family f = EA_MM_QWEN3_MOE;
    EA_TRY(ea_mm_family_parse(family, &f));
    int bench;
    if (strcmp(preset, "tiny") == 0)
        bench = 0;
    else if (strcmp(preset, "bench") == 0)
        bench = 1;
    else
        return ea_err(EA_ERR_INVALID_ARG, "unknown preset '%s' (tiny, bench)", preset);
    ea__mm_common(s, f, bench);
    if (ea__mm_is_hybrid(f)) {
        ea__mm_hybrid_preset(s, bench);
        return EA_OK;
    }
    switch (f) {
    case EA_MM_QWEN3_MOE: /* Qwen3-30B-A3B layout; bench is the forward-pass issue's shape exactly */
        s->norm_topk_prob = 1;
        s->qk_norm = 1;
        s->max_pos = 40960;
        break;
    case EA_MM_QWEN2_MOE: /* Qwen1.5/2-MoE: qkv bias, one shared expert with a sigmoid gate */
        s->qkv_bias = 1;
        s->norm_topk_prob = 0;
        s->shared_intermediate = bench ? 1536 : 64;
        s->top_k = 4; /* Qwen1.5-MoE-A2.7B: 4 of 60 */
        s->max_pos = 32768;
        break;
    case EA_MM_MIXTRAL: /* Mixtral-8x7B layout: 8 experts, top-2, intermediate_size is the expert FFN */
        s->n_experts = 8;
        s->top_k = 2;
        s->intermediate = bench ? 3072 : 32;
        s->rms_eps = 1e-5;
        s->max_pos = 32768;
        break;
    case EA_MM_OLMOE: /* OLMoE-1B-7B: MHA, full-width q/k norm, intermediate_size is the expert FFN */
        s->n_kv_heads = s->n_heads;
        s->qk_norm = 2;
        s->intermediate = bench ? 384 : 32;
        s->rms_eps = 1e-5;
        s->rope_theta = 10000.0;
        s->max_pos = 4096;
        break;
    case EA_MM_DEEPSEEK_V2:
    case EA_MM_DEEPSEEK_V3: {
        int v3 = f == EA_MM_DEEPSEEK_V3;
        s->n_kv_heads = s->n_heads; /* HF config: MLA expands to MHA */
        s->head_dim = 0;
        s->first_k_dense = 1;
        s->deepseek_tok = 1;
        s->vocab = 129280; /* DeepSeek-V3 config.json */
        s->bos = 0;
        s->eos = 1;
        s->pad = 1;
        s->rope_theta = 10000.0;
        s->max_pos = 163840;
        s->yarn = 1;
        s->yarn_factor = 40;
        s->yarn_orig_max_pos = 4096;
        s->yarn_beta_fast = 32;
        s->yarn_beta_slow = 1;
        s->yarn_mscale = s->yarn_mscale_all_dim = v3 ? 1.0 : 0.707;
        if (bench) {
            s->n_layers = 24;
            s->q_lora = v3 ? 384 : 0;
            s->kv_lora = 256;
            s->qk_nope = 64;
            s->qk_rope = 32;
            s->v_head = 64;
            s->n_group = 8;
            s->topk_group = v3 ? 4 : 3;
            s->top_k = v3 ? 8 : 6;
        } else {
            s->n_layers = 3;
            s->q_lora = v3 ? 48 : 0;
            s->kv_lora = 32;
            s->qk_nope = 16;
            s->qk_rope = 8;
            s->v_head = 16;
            /* as the bench (and the real routers): 8 groups, V3 keeps 4 and routes
             * 8 of their 16 experts, V2 keeps 3 and routes 6 of 12 */
            s->n_experts = 32;
            s->n_group = 8;
            s->topk_group = v3 ? 4 : 3;
            s->top_k = v3 ? 8 : 6;
        }
        s->n_shared = v3 ? 1 : 2;
        s->norm_topk_prob = v3;
        s->sigmoid = v3;
        s->topk_method = v3 ? "noaux_tc" : "group_limited_greedy";
        s->routed_scaling = v3 ? 2.5 : 1.0;
        break;
    }
    default: break;
    }
    return EA_OK;
}

ea_status ea_mm_set_top_k(ea_mm_shape *s, int top_k) {
    if (top_k == 0) return EA_OK;
    int reach = s->n_group > 1 ? s->topk_group * (s->n_experts / s->n_group) : s->n_experts;
    if (top_k < 1 || top_k > reach)
        return ea_err(EA_ERR_INVALID_ARG, "--top-k %d: %s %s routes to 1..%d experts%s", top_k,
                      ea_mm_family_names[s->family], s->preset, reach,
                      s->n_group > 1 ? " (its kept groups)" : "");
    s->top_k = top_k;
    return EA_OK;
}

/* ---------------------------------------------------------------- the plan */

ea_status ea__mm_add(ea__mm_plan *p, const char *name, const char *gguf, int n_dims, int64_t d0, int64_t d1,
                            int init) {
    if (ea_grow(&p->v, &p->cap, (size_t)p->n + 1, sizeof *p->v, 256)) return ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    ea__mm_src *s = &p->v[p->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->gguf, sizeof s->gguf, "%s", gguf);
    s->n_dims = n_dims;
    s->shape[0] = d0;
    s->shape[1] = d1;
    s->init = init;
    s->expert = -1;
    s->layer = -1;
    switch (init) {
    case EA__MM_MAT: s->base = 0.0, s->scale = 1.0 / sqrt((double)(n_dims >= 2 ? d1 : d0)); break;
    case EA__MM_EMB: s->base = 0.0, s->scale = 1.0; break;
    case EA__MM_NORM: s->base = 1.0, s->scale = 0.1; break;
    case EA__MM_NORM0: s->base = 0.0, s->scale = 0.1; break;
    default: s->base = 0.0, s->scale = 0.1; break;
    }
    return EA_OK;
}

#define EA__MM_ADD(...) EA_TRY(ea__mm_add(p, __VA_ARGS__))

/* Routed expert e of layer l: three tensors. */
static ea_status ea__mm_add_expert(ea__mm_plan *p, const ea_mm_shape *s, int l, int e) {
    int mix = s->family == EA_MM_MIXTRAL;
    int ff = (mix || s->family == EA_MM_OLMOE) ? s->intermediate : s->moe_intermediate;
    static const char *const qn[3] = {"gate_proj", "up_proj", "down_proj"};
    static const char *const mn[3] = {"w1", "w3", "w2"};
    static const char *const gn[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int k = 0; k < 3; k++) {
        char name[96], gg[64];
        if (mix)
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", l, e, mn[k]);
        else
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.%s.weight", l, e, qn[k]);
        snprintf(gg, sizeof gg, "blk.%d.%s.weight", l, gn[k]);
        if (k == EA__MM_DOWN)
            EA__MM_ADD(name, gg, 2, s->hidden, ff, EA__MM_MAT);
        else
            EA__MM_ADD(name, gg, 2, ff, s->hidden, EA__MM_MAT);
        p->v[p->n - 1].layer = l;
        p->v[p->n - 1].expert = e;
        p->v[p->n - 1].ekind = k;
    }
    return EA_OK;
}

/* A SiLU-gated FFN under HF prefix `pre` ("model.layers.0.mlp") and GGUF suffix sfx ("" or "_shexp"). */
ea_status ea__mm_add_ffn(ea__mm_plan *p, int l, const char *pre, const char *sfx, int ff, int hidden) {
    char n[96], g[64];
    snprintf(n, sizeof n, "%s.gate_proj.weight", pre);
    snprintf(g, sizeof g, "blk.%d.ffn_gate%s.weight", l, sfx);
    EA__MM_ADD(n, g, 2, ff, hidden, EA__MM_MAT);
    snprintf(n, sizeof n, "%s.up_proj.weight", pre);
    snprintf(g, sizeof g, "blk.%d.ffn_up%s.weight", l, sfx);
    EA__MM_ADD(n, g, 2, ff, hidden, EA__MM_MAT);
    snprintf(n, sizeof n, "%s.down_proj.weight", pre);
    snprintf(g, sizeof g, "blk.%d.ffn_down%s.weight", l, sfx);
    EA__MM_ADD(n, g, 2, hidden, ff, EA__MM_MAT);
    return EA_OK;
}

static ea_status ea__mm_build(const ea_mm_shape *s, ea__mm_plan *p) {
    if (ea__mm_is_hybrid(s->family)) return ea__mm_build_hybrid(s, p);
    const int H = s->hidden, nh = s->n_heads, nkv = s->n_kv_heads, hd = s->head_dim;
    const int mla = s->family == EA_MM_DEEPSEEK_V2 || s->family == EA_MM_DEEPSEEK_V3;
    const int mix = s->family == EA_MM_MIXTRAL;
    char n[96], g[64], pre[64];
    EA__MM_ADD("model.embed_tokens.weight", "token_embd.weight", 2, s->vocab, H, EA__MM_EMB);
    for (int l = 0; l < s->n_layers; l++) {
#define L_(hf, gg) (snprintf(n, sizeof n, "model.layers.%d.%s", l, hf), snprintf(g, sizeof g, "blk.%d.%s", l, gg))
        L_("input_layernorm.weight", "attn_norm.weight");
        EA__MM_ADD(n, g, 1, H, 0, EA__MM_NORM);
        if (mla) {
            int qk = s->qk_nope + s->qk_rope;
            if (s->q_lora) {
                L_("self_attn.q_a_proj.weight", "attn_q_a.weight");
                EA__MM_ADD(n, g, 2, s->q_lora, H, EA__MM_MAT);
                L_("self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight");
                EA__MM_ADD(n, g, 1, s->q_lora, 0, EA__MM_NORM);
                L_("self_attn.q_b_proj.weight", "attn_q_b.weight");
                EA__MM_ADD(n, g, 2, (int64_t)nh * qk, s->q_lora, EA__MM_MAT);
            } else {
                L_("self_attn.q_proj.weight", "attn_q.weight");
                EA__MM_ADD(n, g, 2, (int64_t)nh * qk, H, EA__MM_MAT);
            }
            L_("self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight");
            EA__MM_ADD(n, g, 2, s->kv_lora + s->qk_rope, H, EA__MM_MAT);
            L_("self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight");
            EA__MM_ADD(n, g, 1, s->kv_lora, 0, EA__MM_NORM);
            L_("self_attn.kv_b_proj.weight", "attn_kv_b.weight");
            EA__MM_ADD(n, g, 2, (int64_t)nh * (s->qk_nope + s->v_head), s->kv_lora, EA__MM_MAT);
            p->v[p->n - 1].flags = EA__MM_KVB;
            L_("self_attn.o_proj.weight", "attn_output.weight");
            EA__MM_ADD(n, g, 2, H, (int64_t)nh * s->v_head, EA__MM_MAT);
        } else {
            L_("self_attn.q_proj.weight", "attn_q.weight");
            EA__MM_ADD(n, g, 2, (int64_t)nh * hd, H, EA__MM_MAT);
            if (mix) p->v[p->n - 1].flags = EA__MM_PERM_Q;
            L_("self_attn.k_proj.weight", "attn_k.weight");
            EA__MM_ADD(n, g, 2, (int64_t)nkv * hd, H, EA__MM_MAT);
            if (mix) p->v[p->n - 1].flags = EA__MM_PERM_K;
            L_("self_attn.v_proj.weight", "attn_v.weight");
            EA__MM_ADD(n, g, 2, (int64_t)nkv * hd, H, EA__MM_MAT);
            if (s->qkv_bias) {
                L_("self_attn.q_proj.bias", "attn_q.bias");
                EA__MM_ADD(n, g, 1, (int64_t)nh * hd, 0, EA__MM_BIAS);
                L_("self_attn.k_proj.bias", "attn_k.bias");
                EA__MM_ADD(n, g, 1, (int64_t)nkv * hd, 0, EA__MM_BIAS);
                L_("self_attn.v_proj.bias", "attn_v.bias");
                EA__MM_ADD(n, g, 1, (int64_t)nkv * hd, 0, EA__MM_BIAS);
            }
            L_("self_attn.o_proj.weight", "attn_output.weight");
            EA__MM_ADD(n, g, 2, H, (int64_t)nh * hd, EA__MM_MAT);
            if (s->qk_norm) {
                L_("self_attn.q_norm.weight", "attn_q_norm.weight");
                EA__MM_ADD(n, g, 1, s->qk_norm == 1 ? hd : (int64_t)nh * hd, 0, EA__MM_NORM);
                L_("self_attn.k_norm.weight", "attn_k_norm.weight");
                EA__MM_ADD(n, g, 1, s->qk_norm == 1 ? hd : (int64_t)nkv * hd, 0, EA__MM_NORM);
            }
        }
        L_("post_attention_layernorm.weight", "ffn_norm.weight");
        EA__MM_ADD(n, g, 1, H, 0, EA__MM_NORM);
        if (mla && l < s->first_k_dense) {
            snprintf(pre, sizeof pre, "model.layers.%d.mlp", l);
            EA_TRY(ea__mm_add_ffn(p, l, pre, "", s->intermediate, H));
            continue;
        }
        L_(mix ? "block_sparse_moe.gate.weight" : "mlp.gate.weight", "ffn_gate_inp.weight");
        EA__MM_ADD(n, g, 2, s->n_experts, H, EA__MM_MAT);
        if (s->family == EA_MM_DEEPSEEK_V3) {
            L_("mlp.gate.e_score_correction_bias", "exp_probs_b.bias");
            EA__MM_ADD(n, g, 1, s->n_experts, 0, EA__MM_BIAS);
        }
        for (int e = 0; e < s->n_experts; e++) EA_TRY(ea__mm_add_expert(p, s, l, e));
        if (s->shared_intermediate) {
            snprintf(pre, sizeof pre, "model.layers.%d.mlp.shared_expert", l);
            EA_TRY(ea__mm_add_ffn(p, l, pre, "_shexp", s->shared_intermediate, H));
            L_("mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight");
            EA__MM_ADD(n, g, 2, 1, H, EA__MM_MAT);
        }
        if (s->n_shared) {
            snprintf(pre, sizeof pre, "model.layers.%d.mlp.shared_experts", l);
            EA_TRY(ea__mm_add_ffn(p, l, pre, "_shexp", s->n_shared * s->moe_intermediate, H));
        }
#undef L_
    }
    EA__MM_ADD("model.norm.weight", "output_norm.weight", 1, H, 0, EA__MM_NORM);
    EA__MM_ADD("lm_head.weight", "output.weight", 2, s->vocab, H, EA__MM_MAT);
    return EA_OK;
}

static int ea__mm_cmp(const void *a, const void *b) {
    return strcmp(((const ea__mm_src *)a)->name, ((const ea__mm_src *)b)->name);
}

int64_t ea__mm_nelem(const ea__mm_src *t) {
    int64_t ne = 1;
    for (int d = 0; d < t->n_dims; d++) ne *= t->shape[d];
    return ne;
}

ea_status ea_mm_param_counts(const ea_mm_shape *s, int64_t *total, int64_t *active) {
    ea__mm_plan p = {0};
    ea_status st = ea__mm_build(s, &p);
    int64_t tot = 0, act = 0;
    for (int i = 0; st == EA_OK && i < p.n; i++) {
        int64_t ne = ea__mm_nelem(&p.v[i]);
        tot += ne;
        if (p.v[i].init == EA__MM_EMB) continue;           /* a token reads one row */
        if (p.v[i].expert >= s->top_k) continue;            /* k of n_experts run per token */
        if (p.v[i].fused_experts > 0) ne = ne / p.v[i].fused_experts * s->top_k;
        act += ne;
    }
    ea_free(p.v);
    *total = tot;
    *active = act;
    return st;
}

/* ----------------------------------------------------------------- values */

uint64_t ea_mm_tensor_key(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        h ^= *c;
        h *= 0x100000001b3ull;
    }
    return ea_splitmix64_mix(h ^ ea_splitmix64_mix(seed));
}

double ea_mm_uniform(uint64_t key, uint64_t i) {
    uint64_t st = key + i * 0x9E3779B97F4A7C15ull; /* z_i: element i of key's splitmix64 stream */
    uint64_t z = ea_splitmix64(&st);
    return ((double)(z >> 40) + 0.5) * (1.0 / 8388608.0) - 1.0;
}

/* out[k] = value of element i0 + k of source t, rounded to `round` (the model dtype). */
void ea__mm_gen(const ea__mm_src *t, uint64_t i0, size_t n, float *out, ea_dtype round) {
    const uint64_t key = t->key;
    const double base = t->base, scale = t->scale;
    uint64_t st = key + i0 * 0x9E3779B97F4A7C15ull; /* key's splitmix64 stream from element i0 */
    for (size_t k = 0; k < n; k++) {
        uint64_t z = ea_splitmix64(&st);
        double v = ((double)(z >> 40) + 0.5) * (1.0 / 8388608.0) - 1.0;
        out[k] = (float)(base + scale * v);
    }
    if (round == EA_BF16)
        for (size_t k = 0; k < n; k++) out[k] = ea_bf16_to_f32(ea_f32_to_bf16(out[k]));
    else if (round == EA_F16)
        for (size_t k = 0; k < n; k++) out[k] = ea_f16_to_f32(ea_f32_to_f16(out[k]));
}

/* ---------------------------------------------------------------- GGUF plan */

ea_status ea__mm_gpush(ea__mm_gplan *g, const char *name, int kind, int src, int n_dims, const int64_t *torch_shape,
                       ea_dtype want) {
    if (ea_grow(&g->v, &g->cap, (size_t)g->n + 1, sizeof *g->v, 256)) return ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    ea__mm_gt *t = &g->v[g->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->src = src;
    /* squeeze size-1 dims (the converter does), then reverse into ggml order */
    int nd = 0;
    int64_t sq[4];
    for (int i = 0; i < n_dims; i++)
        if (torch_shape[i] != 1) sq[nd++] = torch_shape[i];
    if (nd == 0) sq[nd++] = 1;
    t->n_dims = nd;
    for (int i = 0; i < nd; i++) t->ne[i] = sq[nd - 1 - i];
    /* llama.cpp's type rules: 1-D and *_norm.weight in F32; routers F32; non-weights F32;
     * Q8_0 needs ne[0] % 32 == 0, else F16 */
    size_t ln = strlen(name);
    int is_weight = ln > 7 && strcmp(name + ln - 7, ".weight") == 0;
    int is_norm = ln > 12 && strcmp(name + ln - 12, "_norm.weight") == 0;
    int is_router = strstr(name, ".ffn_gate_inp.") || strstr(name, ".ffn_gate_inp_shexp.");
    ea_dtype dt = want;
    if (nd <= 1 || is_norm || is_router || !is_weight)
        dt = EA_F32;
    else if (want == EA_Q8_0 && t->ne[0] % EA_QK8_0 != 0)
        dt = EA_F16;
    t->dt = dt;
    return EA_OK;
}

/* GGUF tensors in the order the converter emits them from the sorted HF list. */
static ea_status ea__mm_gguf_plan(const ea_mm_shape *s, const ea__mm_plan *p, int legacy_mla, ea_dtype want,
                                  ea__mm_gplan *g) {
    if (ea__mm_is_hybrid(s->family)) return ea__mm_gguf_plan_hybrid(s, p, want, g);
    const int E = s->n_experts;
    int *seen = ea_calloc((size_t)s->n_layers, sizeof *seen);
    if (!seen) return ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    static const int order_qwen[3] = {EA__MM_DOWN, EA__MM_GATE, EA__MM_UP};
    static const int order_mix[3] = {EA__MM_GATE, EA__MM_DOWN, EA__MM_UP}; /* w1, w2, w3 */
    const int *order = s->family == EA_MM_MIXTRAL ? order_mix : order_qwen;
    ea_status st = EA_OK;
    for (int i = 0; st == EA_OK && i < p->n; i++) {
        const ea__mm_src *t = &p->v[i];
        if (t->expert >= 0) {
            if (++seen[t->layer] < 3 * E) continue;
            for (int k = 0; st == EA_OK && k < 3; k++) {
                int first = -1;
                int *srcs = ea_malloc((size_t)E * sizeof *srcs);
                if (!srcs) {
                    st = ea_err(EA_ERR_NOMEM, "make-model: out of memory");
                    break;
                }
                for (int j = 0; j < p->n; j++) {
                    const ea__mm_src *u = &p->v[j];
                    if (u->expert >= 0 && u->layer == t->layer && u->ekind == order[k]) {
                        srcs[u->expert] = j;
                        if (first < 0) first = j;
                    }
                }
                int64_t shp[3] = {E, p->v[first].shape[0], p->v[first].shape[1]};
                st = ea__mm_gpush(g, p->v[first].gguf, EA__GT_STACK, -1, 3, shp, want);
                if (st != EA_OK) {
                    ea_free(srcs);
                    break;
                }
                g->v[g->n - 1].srcs = srcs;
                g->v[g->n - 1].n_srcs = E;
            }
            continue;
        }
        if ((t->flags & EA__MM_KVB) && !legacy_mla) {
            /* kv_b (nh*(nope+v), kv_lora) -> k_b (nh, kv_lora, nope) transposed, v_b (nh, v, kv_lora) */
            char kb[64], vb[64];
            snprintf(kb, sizeof kb, "blk.%d.attn_k_b.weight", atoi(t->name + strlen("model.layers.")));
            snprintf(vb, sizeof vb, "blk.%d.attn_v_b.weight", atoi(t->name + strlen("model.layers.")));
            int64_t ks[3] = {s->n_heads, s->kv_lora, s->qk_nope}, vs[3] = {s->n_heads, s->v_head, s->kv_lora};
            st = ea__mm_gpush(g, kb, EA__GT_KB, i, 3, ks, want);
            if (st == EA_OK) st = ea__mm_gpush(g, vb, EA__GT_VB, i, 3, vs, want);
            continue;
        }
        int kind = (t->flags & (EA__MM_PERM_Q | EA__MM_PERM_K)) ? EA__GT_PERM : EA__GT_COPY;
        st = ea__mm_gpush(g, t->gguf, kind, i, t->n_dims, t->shape, want);
        if (st == EA_OK && kind == EA__GT_PERM)
            g->v[g->n - 1].perm_heads = (t->flags & EA__MM_PERM_Q) ? s->n_heads : s->n_kv_heads;
    }
    ea_free(seen);
    return st;
}

static void ea__mm_gplan_free(ea__mm_gplan *g) {
    for (int i = 0; i < g->n; i++) ea_free(g->v[i].srcs);
    ea_free(g->v);
}

/* Row r (ne[0] values) of GGUF tensor t. */
static void ea__mm_grow(const ea_mm_shape *s, const ea__mm_plan *p, const ea__mm_gt *t, int64_t r, float *out,
                        ea_dtype round) {
    const int64_t ne0 = t->ne[0];
    switch (t->kind) {
    case EA__GT_STACK: {
        int64_t rows = 1;
        for (int i = 1; i < t->n_dims; i++) rows *= t->ne[i];
        int64_t rpe = rows / t->n_srcs;
        ea__mm_gen(&p->v[t->srcs[r / rpe]], (uint64_t)((r % rpe) * ne0), (size_t)ne0, out, round);
        break;
    }
    case EA__GT_PERM: { /* new row h*hd + 2i + j = old row h*hd + j*hd/2 + i (LlamaModel.permute) */
        const ea__mm_src *src = &p->v[t->src];
        int64_t hd = src->shape[0] / t->perm_heads;
        int64_t h = r / hd, w = r % hd, i = w / 2, j = w % 2;
        int64_t sr = h * hd + j * (hd / 2) + i;
        ea__mm_gen(src, (uint64_t)(sr * ne0), (size_t)ne0, out, round);
        break;
    }
    case EA__GT_KB: { /* k_b[h][c][j] = kv_b[h*(nope+v) + j][c] */
        const ea__mm_src *src = &p->v[t->src];
        int64_t h = r / s->kv_lora, c = r % s->kv_lora, stride = s->qk_nope + s->v_head;
        for (int64_t j = 0; j < ne0; j++)
            ea__mm_gen(src, (uint64_t)((h * stride + j) * s->kv_lora + c), 1, &out[j], round);
        break;
    }
    case EA__GT_VB: { /* v_b[h][j][:] = kv_b[h*(nope+v) + nope + j][:] */
        const ea__mm_src *src = &p->v[t->src];
        int64_t h = r / s->v_head, j = r % s->v_head;
        int64_t sr = h * (s->qk_nope + s->v_head) + s->qk_nope + j;
        ea__mm_gen(src, (uint64_t)(sr * ne0), (size_t)ne0, out, round);
        break;
    }
    case EA__GT_HYB: ea__mm_hybrid_row(s, p, t, r, out, round); break;
    default: ea__mm_gen(&p->v[t->src], (uint64_t)(r * ne0), (size_t)ne0, out, round); break;
    }
}

/* ----------------------------------------------------------------- driver */

#define EA__MM_CHUNK ((size_t)1 << 18) /* floats per streamed block */

static ea_status ea__mm_mkdir_p(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *c = buf + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return ea_err(EA_ERR_IO, "%s: cannot create: %s", buf, strerror(errno));
        *c = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return ea_err(EA_ERR_IO, "%s: cannot create: %s", buf, strerror(errno));
    return EA_OK;
}

static void ea__mm_shape_str(char *buf, size_t n, int nd, const int64_t *d) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static ea_status ea__mm_write_hf(const ea_mm_shape *s, const ea_mm_options *o, const ea__mm_plan *p, ea_dtype round,
                                 FILE *rep, uint64_t *bytes) {
    ea_st_writer *w = NULL;
    float *fb = NULL;
    uint8_t *ob = NULL;
    ea_status st = ea_st_writer_create(o->out, o->n_shards, &w);
    for (int i = 0; st == EA_OK && i < p->n; i++)
        st = ea_st_writer_add(w, p->v[i].name, o->dtype, p->v[i].n_dims, p->v[i].shape);
    if (st == EA_OK) st = ea_st_writer_begin(w);
    if (st == EA_OK) {
        fb = ea_malloc(EA__MM_CHUNK * sizeof *fb);
        ob = ea_malloc(EA__MM_CHUNK * 4);
        if (!fb || !ob) st = ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    }
    const ea_dtype_traits *tr = &ea_dtypes[o->dtype];
    for (int i = 0; st == EA_OK && i < p->n; i++) {
        uint64_t ne = (uint64_t)ea__mm_nelem(&p->v[i]);
        for (uint64_t at = 0; st == EA_OK && at < ne; at += EA__MM_CHUNK) {
            size_t k = (size_t)(ne - at < EA__MM_CHUNK ? ne - at : EA__MM_CHUNK);
            ea__mm_gen(&p->v[i], at, k, fb, round);
            tr->from_f32(fb, ob, k);
            st = ea_st_writer_write(w, ob, k * (size_t)tr->block_bytes);
            *bytes += k * (size_t)tr->block_bytes;
        }
    }
    if (st == EA_OK) st = ea_st_writer_finish(w);
    ea_st_writer_destroy(w);
    ea_free(fb);
    ea_free(ob);
    (void)s;
    (void)rep;
    return st;
}

static ea_status ea__mm_write_gguf(const ea_mm_shape *s, const ea_mm_options *o, const ea__mm_plan *p,
                                   const ea__mm_gplan *g, ea_dtype round, uint64_t *bytes) {
    ea_gguf_writer *w = NULL;
    float *fb = NULL;
    uint8_t *ob = NULL;
    ea_status st = ea_gguf_writer_create(o->out, 32, &w);
    if (st == EA_OK) st = ea__mm_gguf_meta(w, s, o);
    for (int i = 0; st == EA_OK && i < g->n; i++)
        st = ea_gguf_writer_add_tensor(w, g->v[i].name, g->v[i].dt, g->v[i].n_dims, g->v[i].ne);
    if (st == EA_OK) st = ea_gguf_writer_begin(w);
    size_t cap = EA__MM_CHUNK;
    for (int i = 0; i < g->n; i++)
        if ((size_t)g->v[i].ne[0] > cap) cap = (size_t)g->v[i].ne[0];
    if (st == EA_OK) {
        fb = ea_malloc(cap * sizeof *fb);
        ob = ea_malloc(cap * 4);
        if (!fb || !ob) st = ea_err(EA_ERR_NOMEM, "make-model: out of memory");
    }
    for (int i = 0; st == EA_OK && i < g->n; i++) {
        const ea__mm_gt *t = &g->v[i];
        const ea_dtype_traits *tr = &ea_dtypes[t->dt];
        int64_t rows = 1;
        for (int d = 1; d < t->n_dims; d++) rows *= t->ne[d];
        int64_t per = (int64_t)(cap / (size_t)t->ne[0]);
        for (int64_t r0 = 0; st == EA_OK && r0 < rows; r0 += per) {
            int64_t nr = rows - r0 < per ? rows - r0 : per;
            for (int64_t r = 0; r < nr; r++) ea__mm_grow(s, p, t, r0 + r, fb + r * t->ne[0], round);
            size_t nel = (size_t)(nr * t->ne[0]);
            tr->from_f32(fb, ob, nel);
            size_t nb = ea_dtype_row_bytes(t->dt, (size_t)t->ne[0]) * (size_t)nr;
            st = ea_gguf_writer_write(w, ob, nb);
            *bytes += nb;
        }
    }
    if (st == EA_OK) st = ea_gguf_writer_finish(w);
    ea_gguf_writer_destroy(w);
    ea_free(fb);
    ea_free(ob);
    return st;
}

ea_status ea_make_model(const ea_mm_options *o, FILE *rep) {
    ea_mm_shape s;
    EA_TRY(ea_mm_shape_get(o->family, o->preset, &s));
    EA_TRY(ea_mm_set_top_k(&s, o->top_k));
    if (o->dtype == EA_Q8_0 && o->format == EA_MM_HF)
        return ea_err(EA_ERR_INVALID_ARG, "q8_0 is a GGUF type; HF safetensors take f32, f16 or bf16");
    if ((unsigned)o->dtype >= EA_N_DTYPES) return ea_err(EA_ERR_INVALID_ARG, "bad dtype");
    if (o->format == EA_MM_GGUF && o->n_shards > 1)
        return ea_err(EA_ERR_INVALID_ARG, "--shards applies to HF output only (GGUF is one file)");
    /* the values every format stores: rounded once to the model dtype (q8_0 quantises the f32 values) */
    ea_dtype round = o->dtype == EA_Q8_0 ? EA_F32 : o->dtype;

    ea__mm_plan p = {0};
    ea__mm_gplan g = {0};
    ea_status st = ea__mm_build(&s, &p);
    if (st == EA_OK) {
        qsort(p.v, (size_t)p.n, sizeof *p.v, ea__mm_cmp);
        for (int i = 0; i < p.n; i++) p.v[i].key = ea_mm_tensor_key(o->seed, p.v[i].name);
        if (o->format == EA_MM_GGUF) st = ea__mm_gguf_plan(&s, &p, o->legacy_mla, o->dtype, &g);
    }
    int64_t total = 0, active = 0;
    if (st == EA_OK) st = ea_mm_param_counts(&s, &total, &active);
    if (st == EA_OK && rep) {
        fprintf(rep, "make-model: %s %s seed %llu -> %s (%s, %s%s)\n", o->family, o->preset,
                (unsigned long long)o->seed, o->out, o->format == EA_MM_HF ? "hf" : "gguf", ea_dtypes[o->dtype].name,
                o->format == EA_MM_HF && o->n_shards > 1 ? ", sharded" : "");
        fprintf(rep, "shape: %d layers, hidden %d, heads %d/%d, experts %d top-%d, vocab %d\n", s.n_layers, s.hidden,
                s.n_heads, s.n_kv_heads, s.n_experts, s.top_k, s.vocab);
        fprintf(rep, "params: total %lld (%.2f B), active per token %lld (%.1f M; embedding rows excluded)\n",
                (long long)total, (double)total / 1e9, (long long)active, (double)active / 1e6);
    }
    if (st == EA_OK && o->dry_run && rep) {
        char sh[96];
        if (o->format == EA_MM_HF)
            for (int i = 0; i < p.n; i++) {
                ea__mm_shape_str(sh, sizeof sh, p.v[i].n_dims, p.v[i].shape);
                fprintf(rep, "tensor %s %s %s\n", p.v[i].name, ea_st_dtype_name(o->dtype), sh);
            }
        else
            for (int i = 0; i < g.n; i++) {
                ea__mm_shape_str(sh, sizeof sh, g.v[i].n_dims, g.v[i].ne);
                static const char *const gn[EA_N_DTYPES] = {"F32", "F16", "BF16", "Q8_0"}; /* ggml names */
                fprintf(rep, "tensor %s %s %s\n", g.v[i].name, gn[g.v[i].dt], sh);
            }
    }
    if (st == EA_OK && !o->dry_run) {
        double t0 = ea_now_s();
        uint64_t bytes = 0;
        if (o->format == EA_MM_HF) {
            st = ea__mm_mkdir_p(o->out);
            if (st == EA_OK) st = ea__mm_write_hf_meta(&s, o);
            if (st == EA_OK) st = ea__mm_write_hf(&s, o, &p, round, rep, &bytes);
        } else {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s", o->out);
            char *slash = strrchr(dir, '/');
            if (slash && slash != dir) {
                *slash = 0;
                st = ea__mm_mkdir_p(dir);
            }
            if (st == EA_OK) st = ea__mm_write_gguf(&s, o, &p, &g, round, &bytes);
        }
        double dt = ea_now_s() - t0;
        if (st == EA_OK && rep)
            fprintf(rep, "wrote %d tensors, %.1f MB of weights in %.2f s (%.0f MB/s)\n",
                    o->format == EA_MM_HF ? p.n : g.n, (double)bytes / 1e6, dt, dt > 0 ? (double)bytes / 1e6 / dt : 0.0);
    }
    ea__mm_gplan_free(&g);
    ea_free(p.v);
    return st;
}
