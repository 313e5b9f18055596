/*
 * model_files.h — tests write their own small model files: safetensors and
 * GGUF byte builders and a generator of a model's tensors from an
 * ea_model_config, under HF or llama.cpp GGUF names (stacked experts,
 * Mixtral's q/k row permutation, optionally DeepSeek's split attn_k_b/attn_v_b),
 * so the loader is tested against files written independently of it.
 * Header-only (static functions) so each test program stays one file.
 *
 * Values are a deterministic function of the HF tensor name and index, so the
 * same weight has the same value in both formats.
 */
#ifndef EA_TEST_MODEL_FILES_H
#define EA_TEST_MODEL_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "model/config.h"
#include "tensor/dtype.h"

/* Each test uses some of these. */
#define MF_FN static __attribute__((unused))

/* ---- byte buffer ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} mf_buf;

MF_FN void mf_put(mf_buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        b->p = realloc(b->p, c);
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
MF_FN void mf_u32(mf_buf *b, uint32_t v) { mf_put(b, &v, 4); }
MF_FN void mf_u64(mf_buf *b, uint64_t v) { mf_put(b, &v, 8); }
MF_FN void mf_zero(mf_buf *b, size_t n) {
    static const uint8_t z[256];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        mf_put(b, z, k);
        n -= k;
    }
}
MF_FN void mf_gstr(mf_buf *b, const char *s) {
    mf_u64(b, strlen(s));
    mf_put(b, s, strlen(s));
}
MF_FN int mf_write(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(d, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* ---- GGUF key/values (count them yourself) ---- */
MF_FN void mf_kv_str(mf_buf *b, const char *k, const char *v) { mf_gstr(b, k); mf_u32(b, 8); mf_gstr(b, v); }
MF_FN void mf_kv_u32(mf_buf *b, const char *k, uint32_t v) { mf_gstr(b, k); mf_u32(b, 4); mf_u32(b, v); }
MF_FN void mf_kv_i32(mf_buf *b, const char *k, int32_t v) { mf_gstr(b, k); mf_u32(b, 5); mf_put(b, &v, 4); }
MF_FN void mf_kv_f32(mf_buf *b, const char *k, float v) { mf_gstr(b, k); mf_u32(b, 6); mf_put(b, &v, 4); }
MF_FN void mf_kv_bool(mf_buf *b, const char *k, int v) {
    uint8_t x = (uint8_t)(v != 0);
    mf_gstr(b, k);
    mf_u32(b, 7);
    mf_put(b, &x, 1);
}

/* ---- tensors ---- */
typedef struct {
    char name[160]; /* as long as the callers' name buffers */
    int nd;
    int64_t shape[4]; /* PyTorch order */
    float *data;      /* owned, f32 values (already rounded to the file dtype) */
} mf_t;

typedef struct {
    mf_t *v;
    int n, cap;
} mf_list;

MF_FN int64_t mf_nelem(const mf_t *t) {
    int64_t n = 1;
    for (int i = 0; i < t->nd; i++) n *= t->shape[i];
    return n;
}

MF_FN uint64_t mf_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

/* Deterministic values in [-0.5, 0.5), exactly representable in bf16 when round_bf16. */
MF_FN float *mf_fill(const char *name, int64_t n, int round_bf16) {
    float *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    uint64_t h = mf_hash(name);
    for (int64_t i = 0; i < n; i++) {
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 29;
        float v = (float)((h >> 11) % 1000) / 1000.0f - 0.5f;
        d[i] = round_bf16 ? ea_bf16_to_f32(ea_f32_to_bf16(v)) : v;
        h += (uint64_t)i + 0x9e3779b97f4a7c15ull;
    }
    return d;
}

MF_FN mf_t *mf_add(mf_list *l, const char *name, int nd, int64_t s0, int64_t s1, int64_t s2, float *data) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    mf_t *t = &l->v[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->nd = nd;
    t->shape[0] = s0;
    t->shape[1] = s1;
    t->shape[2] = s2;
    t->data = data;
    return t;
}

MF_FN void mf_list_free(mf_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i].data);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- safetensors ---- */

/* Write tensors as one safetensors file; matrices (nd >= 2) in `dt` (F32 or BF16), vectors F32. */
MF_FN int mf_st_write(const char *path, const mf_list *l, ea_dtype dt) {
    mf_buf hdr = {0}, data = {0};
    mf_put(&hdr, "{", 1);
    char e[512];
    for (int i = 0; i < l->n; i++) {
        const mf_t *t = &l->v[i];
        int bf = dt == EA_BF16 && t->nd >= 2;
        int64_t n = mf_nelem(t);
        size_t begin = data.n;
        for (int64_t k = 0; k < n; k++) {
            if (bf) {
                uint16_t h = ea_f32_to_bf16(t->data[k]);
                mf_put(&data, &h, 2);
            } else {
                mf_put(&data, &t->data[k], 4);
            }
        }
        int o = snprintf(e, sizeof e, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t->name, bf ? "BF16" : "F32");
        for (int d = 0; d < t->nd; d++) o += snprintf(e + o, sizeof e - (size_t)o, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        snprintf(e + o, sizeof e - (size_t)o, "],\"data_offsets\":[%zu,%zu]}", begin, data.n);
        mf_put(&hdr, e, strlen(e));
    }
    mf_put(&hdr, "}", 1);
    while (hdr.n % 8) mf_put(&hdr, " ", 1);
    mf_buf f = {0};
    mf_u64(&f, hdr.n);
    mf_put(&f, hdr.p, hdr.n);
    mf_put(&f, data.p, data.n);
    int r = mf_write(path, f.p, f.n);
    free(hdr.p);
    free(data.p);
    free(f.p);
    return r;
}

/* A safetensors file from a raw header string and `data_bytes` bytes of data (pattern). */
MF_FN int mf_st_raw(const char *path, const char *header, size_t data_bytes) {
    mf_buf f = {0};
    mf_u64(&f, strlen(header));
    mf_put(&f, header, strlen(header));
    for (size_t i = 0; i < data_bytes; i++) {
        uint8_t b = (uint8_t)(i * 7 + 1);
        mf_put(&f, &b, 1);
    }
    int r = mf_write(path, f.p, f.n);
    free(f.p);
    return r;
}

/* ---- GGUF file ---- */
typedef struct {
    size_t offset_field[4096]; /* file position of each tensor's offset u64 */
    size_t data_off;
} mf_gguf_layout;

/* GGUF v3 with n_kv key/values already encoded in kv, then the tensors
 * (matrices in dt: F32, F16, BF16 or Q8_0; vectors F32). */
MF_FN void mf_gguf_build(mf_buf *out, const mf_buf *kv, uint64_t n_kv, const mf_list *l, ea_dtype dt, uint32_t align,
                          mf_gguf_layout *lay) {
    mf_buf data = {0};
    static const uint32_t ggml[] = {0, 1, 30, 8};
    mf_put(out, "GGUF", 4);
    mf_u32(out, 3);
    mf_u64(out, (uint64_t)l->n);
    mf_u64(out, n_kv);
    mf_put(out, kv->p, kv->n);
    for (int i = 0; i < l->n; i++) {
        const mf_t *t = &l->v[i];
        ea_dtype d = t->nd >= 2 ? dt : EA_F32;
        if (d == EA_Q8_0 && t->shape[t->nd - 1] % 32) d = EA_F32;
        while (data.n % align) mf_zero(&data, 1);
        mf_gstr(out, t->name);
        mf_u32(out, (uint32_t)t->nd);
        for (int k = t->nd - 1; k >= 0; k--) mf_u64(out, (uint64_t)t->shape[k]);
        mf_u32(out, ggml[d]);
        if (lay && i < 4096) lay->offset_field[i] = out->n;
        mf_u64(out, data.n);
        int64_t n = mf_nelem(t);
        size_t rb = ea_dtype_row_bytes(d, (size_t)n);
        uint8_t *tmp = malloc(rb);
        ea_dtypes[d].from_f32(t->data, tmp, (size_t)n);
        mf_put(&data, tmp, rb);
        free(tmp);
    }
    while (out->n % align) mf_zero(out, 1);
    if (lay) lay->data_off = out->n;
    mf_put(out, data.p, data.n);
    free(data.p);
}

/* ---- a model's tensors from its config ---- */

typedef struct {
    int gguf;      /* GGUF names, stacked experts */
    int split_kvb; /* GGUF deepseek: attn_k_b + attn_v_b instead of attn_kv_b */
    int bf16;      /* values rounded to bf16 */
} mf_opts;

MF_FN float *mf_permute_rows(const float *src, int64_t rows, int64_t cols, int n_head) {
    /* llama.cpp convert: per head, rows (2, hd/2) -> (hd/2, 2) */
    float *d = malloc((size_t)(rows * cols) * sizeof *d);
    int64_t hd = rows / n_head, half = hd / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t i = 0; i < half; i++)
                memcpy(d + (h * hd + 2 * i + j) * cols, src + (h * hd + j * half + i) * cols, (size_t)cols * sizeof *d);
    return d;
}

MF_FN void mf_w(mf_list *l, const mf_opts *o, const char *hf, const char *gg, int nd, int64_t s0, int64_t s1) {
    int64_t n = nd == 1 ? s0 : s0 * s1;
    mf_add(l, o->gguf ? gg : hf, nd, s0, s1, 0, mf_fill(hf, n, o->bf16));
}

MF_FN void mf_model_tensors(const ea_model_config *c, const mf_opts *o, mf_list *l) {
    int64_t H = c->hidden_size, V = c->vocab_size, E = c->n_experts, F = c->moe_intermediate_size;
    char hf[160], gg[160], h2[160];
    mf_w(l, o, "model.embed_tokens.weight", "token_embd.weight", 2, V, H);
    for (int L = 0; L < c->n_layers; L++) {
#define N2(hs, gs) (snprintf(hf, sizeof hf, "model.layers.%d." hs, L), snprintf(gg, sizeof gg, "blk.%d." gs, L))
        N2("input_layernorm.weight", "attn_norm.weight");
        mf_w(l, o, hf, gg, 1, H, 0);
        N2("post_attention_layernorm.weight", "ffn_norm.weight");
        mf_w(l, o, hf, gg, 1, H, 0);
        if (c->kv_lora_rank > 0) {
            int64_t nh = c->n_heads, qd = c->qk_nope_head_dim + c->qk_rope_head_dim, R = c->kv_lora_rank;
            int64_t NO = c->qk_nope_head_dim, VD = c->v_head_dim;
            if (c->q_lora_rank > 0) {
                N2("self_attn.q_a_proj.weight", "attn_q_a.weight");
                mf_w(l, o, hf, gg, 2, c->q_lora_rank, H);
                N2("self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight");
                mf_w(l, o, hf, gg, 1, c->q_lora_rank, 0);
                N2("self_attn.q_b_proj.weight", "attn_q_b.weight");
                mf_w(l, o, hf, gg, 2, nh * qd, c->q_lora_rank);
            } else {
                N2("self_attn.q_proj.weight", "attn_q.weight");
                mf_w(l, o, hf, gg, 2, nh * qd, H);
            }
            N2("self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight");
            mf_w(l, o, hf, gg, 2, R + c->qk_rope_head_dim, H);
            N2("self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight");
            mf_w(l, o, hf, gg, 1, R, 0);
            N2("self_attn.kv_b_proj.weight", "attn_kv_b.weight");
            if (o->gguf && o->split_kvb) {
                float *kv = mf_fill(hf, nh * (NO + VD) * R, o->bf16);
                float *kb = malloc((size_t)(nh * R * NO) * sizeof *kb), *vb = malloc((size_t)(nh * VD * R) * sizeof *vb);
                for (int64_t h = 0; h < nh; h++) {
                    for (int64_t n = 0; n < NO; n++)
                        for (int64_t r = 0; r < R; r++) kb[(h * R + r) * NO + n] = kv[(h * (NO + VD) + n) * R + r];
                    for (int64_t v = 0; v < VD; v++)
                        memcpy(vb + (h * VD + v) * R, kv + (h * (NO + VD) + NO + v) * R, (size_t)R * sizeof *vb);
                }
                free(kv);
                snprintf(gg, sizeof gg, "blk.%d.attn_k_b.weight", L);
                mf_add(l, gg, 3, nh, R, NO, kb);
                snprintf(gg, sizeof gg, "blk.%d.attn_v_b.weight", L);
                mf_add(l, gg, 3, nh, VD, R, vb);
            } else {
                mf_w(l, o, hf, gg, 2, nh * (NO + VD), R);
            }
            N2("self_attn.o_proj.weight", "attn_output.weight");
            mf_w(l, o, hf, gg, 2, H, nh * VD);
        } else {
            int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
            const char *qk_hf[2] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight"};
            const char *qk_gg[2] = {"attn_q.weight", "attn_k.weight"};
            for (int w = 0; w < 2; w++) {
                int64_t rows = w ? kv : q;
                snprintf(hf, sizeof hf, "model.layers.%d.%s", L, qk_hf[w]);
                snprintf(gg, sizeof gg, "blk.%d.%s", L, qk_gg[w]);
                float *d = mf_fill(hf, rows * H, o->bf16);
                if (o->gguf && c->arch == EA_ARCH_MIXTRAL) {
                    float *p = mf_permute_rows(d, rows, H, w ? c->n_kv_heads : c->n_heads);
                    free(d);
                    d = p;
                }
                mf_add(l, o->gguf ? gg : hf, 2, rows, H, 0, d);
            }
            N2("self_attn.v_proj.weight", "attn_v.weight");
            mf_w(l, o, hf, gg, 2, kv, H);
            N2("self_attn.o_proj.weight", "attn_output.weight");
            mf_w(l, o, hf, gg, 2, H, q);
            if (c->attention_bias) {
                N2("self_attn.q_proj.bias", "attn_q.bias");
                mf_w(l, o, hf, gg, 1, q, 0);
                N2("self_attn.k_proj.bias", "attn_k.bias");
                mf_w(l, o, hf, gg, 1, kv, 0);
                N2("self_attn.v_proj.bias", "attn_v.bias");
                mf_w(l, o, hf, gg, 1, kv, 0);
            }
            if (c->qk_norm != EA_QKNORM_NONE) {
                int full = c->qk_norm == EA_QKNORM_FULL;
                N2("self_attn.q_norm.weight", "attn_q_norm.weight");
                mf_w(l, o, hf, gg, 1, full ? q : c->head_dim, 0);
                N2("self_attn.k_norm.weight", "attn_k_norm.weight");
                mf_w(l, o, hf, gg, 1, full ? kv : c->head_dim, 0);
            }
        }
        if (!c->layer_is_moe[L]) {
            int64_t I = c->intermediate_size;
            N2("mlp.gate_proj.weight", "ffn_gate.weight");
            mf_w(l, o, hf, gg, 2, I, H);
            N2("mlp.up_proj.weight", "ffn_up.weight");
            mf_w(l, o, hf, gg, 2, I, H);
            N2("mlp.down_proj.weight", "ffn_down.weight");
            mf_w(l, o, hf, gg, 2, H, I);
            continue;
        }
        int mix = c->arch == EA_ARCH_MIXTRAL;
        const char *blk = mix ? "block_sparse_moe" : "mlp";
        snprintf(hf, sizeof hf, "model.layers.%d.%s.gate.weight", L, blk);
        snprintf(gg, sizeof gg, "blk.%d.ffn_gate_inp.weight", L);
        mf_w(l, o, hf, gg, 2, E, H);
        const char *hn[3] = {mix ? "w1" : "gate_proj", mix ? "w3" : "up_proj", mix ? "w2" : "down_proj"};
        const char *gn[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
        for (int w = 0; w < 3; w++) {
            int64_t r = w == 2 ? H : F, cc = w == 2 ? F : H;
            float *stack = o->gguf ? malloc((size_t)(E * r * cc) * sizeof *stack) : NULL;
            for (int e = 0; e < E; e++) {
                snprintf(h2, sizeof h2, "model.layers.%d.%s.experts.%d.%s.weight", L, blk, e, hn[w]);
                float *d = mf_fill(h2, r * cc, o->bf16);
                if (o->gguf) {
                    memcpy(stack + e * r * cc, d, (size_t)(r * cc) * sizeof *d);
                    free(d);
                } else {
                    mf_add(l, h2, 2, r, cc, 0, d);
                }
            }
            if (o->gguf) {
                snprintf(gg, sizeof gg, "blk.%d.%s.weight", L, gn[w]);
                mf_add(l, gg, 3, E, r, cc, stack);
            }
        }
        if (c->topk_method == EA_TOPK_NOAUX_TC) {
            N2("mlp.gate.e_score_correction_bias", "exp_probs_b.bias");
            mf_w(l, o, hf, gg, 1, E, 0);
        }
        int64_t S = c->shared_expert_intermediate_size + (int64_t)c->n_shared_experts * F;
        if (S > 0) {
            const char *sh = c->shared_expert_intermediate_size > 0 ? "shared_expert" : "shared_experts";
            const char *sp[3] = {"gate_proj", "up_proj", "down_proj"}, *sg[3] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};
            for (int w = 0; w < 3; w++) {
                snprintf(hf, sizeof hf, "model.layers.%d.mlp.%s.%s.weight", L, sh, sp[w]);
                snprintf(gg, sizeof gg, "blk.%d.%s.weight", L, sg[w]);
                mf_w(l, o, hf, gg, 2, w == 2 ? H : S, w == 2 ? S : H);
            }
        }
        if (c->shared_expert_intermediate_size > 0) {
            N2("mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight");
            if (o->gguf) mf_w(l, o, hf, gg, 1, H, 0); /* llama.cpp: 1-D (n_embd) */
            else mf_w(l, o, hf, gg, 2, 1, H);
        }
#undef N2
    }
    mf_w(l, o, "model.norm.weight", "output_norm.weight", 1, H, 0);
    if (!c->tie_word_embeddings) mf_w(l, o, "lm_head.weight", "output.weight", 2, V, H);
}

/* GGUF metadata for a config, with llama.cpp's keys. Returns the kv count. */
MF_FN uint64_t mf_gguf_meta(const ea_model_config *c, mf_buf *kv) {
    static const char *const archs[] = {"qwen3moe", "qwen2moe", "llama", "olmoe", "deepseek2", "deepseek2"};
    const char *a = archs[c->arch];
    char k[128];
    uint64_t n = 0;
#define KU(s, v) (snprintf(k, sizeof k, "%s.%s", a, s), mf_kv_u32(kv, k, (uint32_t)(v)), n++)
#define KF(s, v) (snprintf(k, sizeof k, "%s.%s", a, s), mf_kv_f32(kv, k, (float)(v)), n++)
    mf_kv_str(kv, "general.architecture", a), n++;
    mf_kv_str(kv, "general.name", "test"), n++;
    KU("block_count", c->n_layers);
    KU("context_length", c->max_position_embeddings);
    KU("embedding_length", c->hidden_size);
    KU("feed_forward_length", c->intermediate_size);
    KU("attention.head_count", c->n_heads);
    KU("attention.head_count_kv", c->n_kv_heads);
    KF("attention.layer_norm_rms_epsilon", c->rms_norm_eps);
    KF("rope.freq_base", c->rope_theta);
    KU("expert_count", c->n_experts);
    KU("expert_used_count", c->n_experts_per_tok);
    if (c->arch != EA_ARCH_MIXTRAL && c->arch != EA_ARCH_OLMOE) KU("expert_feed_forward_length", c->moe_intermediate_size);
    if (c->shared_expert_intermediate_size) KU("expert_shared_feed_forward_length", c->shared_expert_intermediate_size);
    if (c->arch == EA_ARCH_QWEN3_MOE) KU("attention.key_length", c->head_dim), KU("attention.value_length", c->head_dim);
    if (c->arch == EA_ARCH_MIXTRAL) KU("rope.dimension_count", c->head_dim);
    if (c->arch == EA_ARCH_QWEN3_MOE || c->arch == EA_ARCH_OLMOE || c->arch == EA_ARCH_QWEN2_MOE) {
        snprintf(k, sizeof k, "%s.expert_weights_norm", a);
        mf_kv_bool(kv, k, c->norm_topk_prob), n++;
    }
    if (c->kv_lora_rank > 0) {
        KU("leading_dense_block_count", c->first_k_dense_replace);
        KU("expert_shared_count", c->n_shared_experts);
        KF("expert_weights_scale", c->routed_scaling_factor);
        snprintf(k, sizeof k, "%s.expert_weights_norm", a);
        mf_kv_bool(kv, k, c->norm_topk_prob), n++;
        KU("expert_gating_func", c->scoring == EA_SCORE_SIGMOID ? 2 : 1);
        KU("expert_group_count", c->n_group);
        KU("expert_group_used_count", c->topk_group);
        if (c->q_lora_rank) KU("attention.q_lora_rank", c->q_lora_rank);
        KU("attention.kv_lora_rank", c->kv_lora_rank);
        KU("rope.dimension_count", c->qk_rope_head_dim);
        KU("attention.key_length", c->kv_lora_rank + c->qk_rope_head_dim);
        KU("attention.value_length", c->kv_lora_rank);
        KU("attention.key_length_mla", c->qk_nope_head_dim + c->qk_rope_head_dim);
        KU("attention.value_length_mla", c->v_head_dim);
    }
    if (c->rope_scaling == EA_ROPE_YARN) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        mf_kv_str(kv, k, "yarn"), n++;
        KF("rope.scaling.factor", c->rope_factor);
        KU("rope.scaling.original_context_length", c->rope_orig_max_pos);
        KF("rope.scaling.yarn_log_multiplier", 0.1f * c->yarn_mscale_all_dim);
    }
    /* tokenizer: a string array of vocab_size tokens */
    mf_gstr(kv, "tokenizer.ggml.tokens");
    mf_u32(kv, 9);
    mf_u32(kv, 8);
    mf_u64(kv, (uint64_t)c->vocab_size);
    for (int i = 0; i < c->vocab_size; i++) {
        char t[32];
        snprintf(t, sizeof t, "tok%d", i);
        mf_gstr(kv, t);
    }
    n++;
    mf_kv_str(kv, "tokenizer.ggml.model", "gpt2"), n++;
    if (c->bos_token_id >= 0) mf_kv_u32(kv, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_token_id), n++;
    if (c->n_eos > 0) mf_kv_u32(kv, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_token_ids[0]), n++;
#undef KU
#undef KF
    return n;
}

/* ---- tiny configs per family (HF config.json text) ---- */
MF_FN const char *mf_config_json(ea_arch a) {
    switch (a) {
    case EA_ARCH_QWEN3_MOE:
        return "{\"model_type\":\"qwen3_moe\",\"vocab_size\":64,\"hidden_size\":32,\"num_hidden_layers\":3,"
               "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,\"intermediate_size\":48,"
               "\"moe_intermediate_size\":16,\"num_experts\":8,\"num_experts_per_tok\":2,\"norm_topk_prob\":true,"
               "\"decoder_sparse_step\":1,\"mlp_only_layers\":[],\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"
               "\"max_position_embeddings\":256,\"tie_word_embeddings\":false,\"bos_token_id\":1,\"eos_token_id\":2}";
    case EA_ARCH_QWEN2_MOE:
        return "{\"model_type\":\"qwen2_moe\",\"vocab_size\":64,\"hidden_size\":32,\"num_hidden_layers\":2,"
               "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"intermediate_size\":48,"
               "\"moe_intermediate_size\":16,\"shared_expert_intermediate_size\":32,\"num_experts\":4,"
               "\"num_experts_per_tok\":2,\"norm_topk_prob\":false,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"
               "\"max_position_embeddings\":256,\"tie_word_embeddings\":true,\"eos_token_id\":3}";
    case EA_ARCH_MIXTRAL:
        return "{\"model_type\":\"mixtral\",\"vocab_size\":64,\"hidden_size\":32,\"num_hidden_layers\":2,"
               "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":24,"
               "\"num_local_experts\":4,\"num_experts_per_tok\":2,\"rms_norm_eps\":1e-5,\"rope_theta\":1000000.0,"
               "\"max_position_embeddings\":256,\"tie_word_embeddings\":false,\"bos_token_id\":1,\"eos_token_id\":2}";
    case EA_ARCH_OLMOE:
        return "{\"model_type\":\"olmoe\",\"vocab_size\":64,\"hidden_size\":32,\"num_hidden_layers\":2,"
               "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"intermediate_size\":16,\"num_experts\":8,"
               "\"num_experts_per_tok\":2,\"norm_topk_prob\":false,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
               "\"max_position_embeddings\":256,\"tie_word_embeddings\":false,\"eos_token_id\":5}";
    case EA_ARCH_DEEPSEEK_V2:
        return "{\"model_type\":\"deepseek_v2\",\"vocab_size\":64,\"hidden_size\":32,\"num_hidden_layers\":3,"
               "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"intermediate_size\":48,"
               "\"moe_intermediate_size\":16,\"n_routed_experts\":8,\"n_shared_experts\":2,\"num_experts_per_tok\":2,"
               "\"first_k_dense_replace\":1,\"moe_layer_freq\":1,\"n_group\":4,\"topk_group\":2,"
               "\"topk_method\":\"group_limited_greedy\",\"scoring_func\":\"softmax\",\"routed_scaling_factor\":16.0,"
               "\"norm_topk_prob\":false,\"q_lora_rank\":null,\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,"
               "\"qk_rope_head_dim\":8,\"v_head_dim\":8,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"
               "\"max_position_embeddings\":1024,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4.0,"
               "\"original_max_position_embeddings\":256,\"beta_fast\":32,\"beta_slow\":1,\"mscale\":0.707,"
               "\"mscale_all_dim\":0.707},\"tie_word_embeddings\":false,\"bos_token_id\":0,\"eos_token_id\":1}";
    case EA_ARCH_DEEPSEEK_V3:
    default:
        return "{\"model_type\":\"deepseek_v3\",\"vocab_size\":64,\"hidden_size\":32,\"num_hidden_layers\":3,"
               "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"intermediate_size\":48,"
               "\"moe_intermediate_size\":16,\"n_routed_experts\":8,\"n_shared_experts\":1,\"num_experts_per_tok\":2,"
               "\"first_k_dense_replace\":1,\"moe_layer_freq\":1,\"n_group\":4,\"topk_group\":2,"
               "\"topk_method\":\"noaux_tc\",\"scoring_func\":\"sigmoid\",\"routed_scaling_factor\":2.5,"
               "\"norm_topk_prob\":true,\"q_lora_rank\":16,\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,"
               "\"qk_rope_head_dim\":8,\"v_head_dim\":8,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"
               "\"max_position_embeddings\":1024,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,"
               "\"original_max_position_embeddings\":256,\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1.0,"
               "\"mscale_all_dim\":1.0},\"tie_word_embeddings\":false,\"bos_token_id\":0,\"eos_token_id\":1}";
    }
}

/* A temp directory for this test (mkdtemp under $TMPDIR or /tmp). */
MF_FN const char *mf_tmpdir(void) {
    static char dir[256];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/eaas-test-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir)) return NULL;
    }
    return dir;
}

/* Write an HF dir (config.json + model.safetensors) and a GGUF file for family a.
 * OUT: cfg (as loaded back from config.json). Returns 0 on success. */
MF_FN int mf_write_family(ea_arch a, const char *dir, const char *gguf_path, const mf_opts *gopts, ea_model_config *cfg) {
    char p[512];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/config.json", dir);
    const char *js = mf_config_json(a);
    if (mf_write(p, js, strlen(js))) return -1;
    if (ea_config_from_hf_dir(dir, cfg) != EA_OK) return -2;
    mf_opts ho = *gopts;
    ho.gguf = 0;
    mf_list hl = {0};
    mf_model_tensors(cfg, &ho, &hl);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    int r = mf_st_write(p, &hl, ho.bf16 ? EA_BF16 : EA_F32);
    mf_list_free(&hl);
    if (r) return -3;
    if (!gguf_path) return 0;
    mf_opts go = *gopts;
    go.gguf = 1;
    mf_list gl = {0};
    mf_model_tensors(cfg, &go, &gl);
    mf_buf kv = {0}, f = {0};
    uint64_t nkv = mf_gguf_meta(cfg, &kv);
    mf_gguf_build(&f, &kv, nkv, &gl, go.bf16 ? EA_BF16 : EA_F32, 32, NULL);
    r = mf_write(gguf_path, f.p, f.n);
    mf_list_free(&gl);
    free(kv.p);
    free(f.p);
    return r ? -4 : 0;
}

#endif
