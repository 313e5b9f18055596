/*
 * model.c — open an HF directory or a GGUF file and map its tensors onto the
 * one internal description of model.h (the weight-name mapping).
 *
 * Name mapping (L = layer, E = expert; HF prefix "model.layers.L.", GGUF "blk.L."):
 *
 *   model.h field  HF                                         GGUF
 *   tok_embd       model.embed_tokens.weight                  token_embd.weight
 *   out_norm       model.norm.weight                          output_norm.weight
 *   lm_head        lm_head.weight (tied: tok_embd view)       output.weight (absent: tied)
 *   attn_norm      input_layernorm.weight                     attn_norm.weight
 *   ffn_norm       post_attention_layernorm.weight            ffn_norm.weight
 *   wq wk wv wo    self_attn.{q,k,v,o}_proj.weight            attn_{q,k,v,output}.weight
 *   bq bk bv       self_attn.{q,k,v}_proj.bias                attn_{q,k,v}.bias
 *   q_norm k_norm  self_attn.{q,k}_norm.weight                attn_{q,k}_norm.weight
 *   wq_a q_a_norm  self_attn.q_a_proj / q_a_layernorm         attn_q_a / attn_q_a_norm
 *   wq_b           self_attn.q_b_proj.weight                  attn_q_b.weight
 *   wkv_a          self_attn.kv_a_proj_with_mqa.weight        attn_kv_a_mqa.weight
 *   kv_a_norm      self_attn.kv_a_layernorm.weight            attn_kv_a_norm.weight
 *   wkv_b          self_attn.kv_b_proj.weight                 attn_kv_b.weight, or attn_k_b + attn_v_b
 *   router         mlp.gate.weight (mixtral block_sparse_moe.gate.weight)   ffn_gate_inp.weight
 *   router_bias    mlp.gate.e_score_correction_bias           exp_probs_b.bias
 *   experts[E]     mlp.experts.E.{gate,up,down}_proj.weight   ffn_{gate,up,down}_exps.weight [E]
 *                  (mixtral block_sparse_moe.experts.E.w1/w3/w2)  (or ffn_{gate,up,down}.E.weight)
 *   shared         mlp.shared_expert.* (qwen2_moe),           ffn_{gate,up,down}_shexp.weight
 *                  mlp.shared_experts.* (deepseek)
 *   shared_gate    mlp.shared_expert_gate.weight              ffn_gate_inp_shexp.weight
 *   dense          mlp.{gate,up,down}_proj.weight             ffn_{gate,up,down}.weight
 *
 * Where the bytes must change to reach HF layout, the loader writes an owned
 * buffer: GGUF "llama" (Mixtral) stores attn_q/attn_k rows permuted for
 * interleaved RoPE (llama.cpp's converter: per head, rows (2, hd/2) -> (hd/2, 2));
 * the rows are moved back so every format feeds rotate-half RoPE the same values.
 * Split attn_k_b (H, kv_lora, nope) / attn_v_b (H, v, kv_lora) are reassembled
 * into wkv_b (H*(nope+v), kv_lora); same dtype when both are f32/f16/bf16
 * (exact), f32 otherwise (dequantised).
 *
 * Invariants after ea_model_open: every view the config needs exists, has the
 * shape the config implies and a supported dtype; views of stacked experts lie
 * inside their stacked tensor; nothing but headers has been read.
 */
#include "model/model.h"

#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "kernels/matmul.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/model_load.h"

/* ---- lookup ---- */

static int ea__find(ea__ld *ld, const char *name, ea_tensor *t, const char **file) {
    int i;
    if (ld->f->st) {
        i = ea_st_set_find(ld->f->st, name);
        if (i < 0) return 0;
        ea_st_set_tensor(ld->f->st, i, t, file);
    } else {
        i = ea_gguf_find_tensor(ld->f->gguf, name);
        if (i < 0) return 0;
        ea_gguf_tensor(ld->f->gguf, i, t);
        if (file) *file = ld->f->gguf->path;
    }
    ld->f->used[i] = 1;
    return 1;
}

static void ea__fmt_shape(char *buf, size_t n, int nd, const int64_t *s) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "(");
    for (int i = 0; i < nd && o < n; i++) o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (o < n) snprintf(buf + o, n - o, ")");
}

/* Find `name` and check it has shape (d0, ..., d[nd-1]). Shapes that differ only by unit
 * dims with at most one real dim ((1, H) vs (H)) are the same bytes and are normalised to
 * the wanted shape. */
ea_status ea__want(ea__ld *ld, const char *name, ea_tensor *t, int nd, int64_t d0, int64_t d1, int64_t d2) {
    const char *file = NULL;
    if (!ea__find(ld, name, t, &file))
        return ea_err(EA_ERR_NOT_FOUND, "%s: tensor '%s' is missing (needed by %s)", ld->where, name,
                      ea_arch_names[ld->m->cfg.arch]);
    int64_t want[3] = {d0, d1, d2};
    int ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == want[i];
    if (!ok && ea_tensor_nelem(t) == (nd == 1 ? d0 : nd == 2 ? d0 * d1 : d0 * d1 * d2)) {
        /* same elements with unit dims added or dropped, e.g. (1, H) vs (H): same bytes */
        int real_t = 0, real_w = 0;
        for (int i = 0; i < t->n_dims; i++) real_t += t->shape[i] != 1;
        for (int i = 0; i < nd; i++) real_w += want[i] != 1;
        if (real_t == real_w && real_t <= 1) ok = 1;
    }
    if (!ok) {
        char a[96], w[96];
        ea__fmt_shape(a, sizeof a, t->n_dims, t->shape);
        ea__fmt_shape(w, sizeof w, nd, want);
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': shape %s but the config implies %s", file, name, a, w);
    }
    t->n_dims = nd;
    for (int i = 0; i < nd; i++) t->shape[i] = want[i];
    if ((size_t)ea_tensor_cols(t) % (size_t)ea_dtypes[t->dtype].block)
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': rows of %lld are not whole %s blocks", file, name,
                      (long long)ea_tensor_cols(t), ea_dtypes[t->dtype].name);
    return EA_OK;
}

int ea__has(ea__ld *ld, const char *name) {
    if (ld->f->st) return ea_st_set_find(ld->f->st, name) >= 0;
    return ea_gguf_find_tensor(ld->f->gguf, name) >= 0;
}

const char *ea__nm(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return buf;
}

void *ea__own(ea__ld *ld, size_t n) {
    ea__owned *o = ld->own;
    size_t cap_bufs = o->cap; /* bufs and lens share one capacity: grow bufs first, then lens and the count */
    if (ea_grow(&o->bufs, &cap_bufs, (size_t)o->n + 1, sizeof *o->bufs, 16) ||
        ea_grow(&o->lens, &o->cap, (size_t)o->n + 1, sizeof *o->lens, 16))
        return NULL;
    void *p = ea_aligned_alloc(64, n ? n : 64);
    if (p) {
        o->lens[o->n] = n;
        o->bufs[o->n++] = p;
    }
    return p;
}

/* ---- byte rewrites ---- */

/* GGUF llama: undo the converter's per-head row permutation of wq/wk. */
static ea_status ea__unpermute(ea__ld *ld, ea_tensor *t, int n_head) {
    int64_t rows = t->shape[0];
    size_t rb = ea_dtype_row_bytes(t->dtype, (size_t)t->shape[1]);
    if (rows % n_head || (rows / n_head) % 2)
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': %lld rows do not split into %d heads of even size", ld->where,
                      t->name, (long long)rows, n_head);
    int64_t hd = rows / n_head, half = hd / 2;
    uint8_t *dst = ea__own(ld, (size_t)rows * rb);
    if (!dst) return ea_err(EA_ERR_NOMEM, "%s: tensor '%s': no memory", ld->where, t->name);
    const uint8_t *src = t->data;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t i = 0; i < half; i++)
                memcpy(dst + (size_t)(h * hd + j * half + i) * rb, src + (size_t)(h * hd + 2 * i + j) * rb, rb);
    t->data = dst;
    return EA_OK;
}

/* wkv_b (H*(nope+v), kv_lora) from k_b (H, kv_lora, nope) and v_b (H, v, kv_lora). */
static ea_status ea__join_kv_b(ea__ld *ld, int l, ea_tensor *out) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t H = c->n_heads, R = c->kv_lora_rank, N = c->qk_nope_head_dim, V = c->v_head_dim;
    char n1[96], n2[96];
    ea_tensor kb, vb;
    EA_TRY(ea__want(ld, ea__nm(n1, sizeof n1, "blk.%d.attn_k_b.weight", l), &kb, 3, H, R, N));
    EA_TRY(ea__want(ld, ea__nm(n2, sizeof n2, "blk.%d.attn_v_b.weight", l), &vb, 3, H, V, R));
    int same = kb.dtype == vb.dtype && kb.dtype != EA_Q8_0;
    ea_dtype dt = same ? kb.dtype : EA_F32;
    size_t es = dt == EA_F32 ? 4 : 2;
    uint8_t *dst = ea__own(ld, (size_t)(H * (N + V) * R) * es);
    float *krow = ea__own(ld, (size_t)(N > R ? N : R) * sizeof(float));
    if (!dst || !krow) return ea_err(EA_ERR_NOMEM, "%s: no memory for wkv_b of layer %d", ld->where, l);
    size_t kb_row = ea_dtype_row_bytes(kb.dtype, (size_t)N), vb_row = ea_dtype_row_bytes(vb.dtype, (size_t)R);
    for (int64_t h = 0; h < H; h++) {
        uint8_t *hb = dst + (size_t)(h * (N + V) * R) * es;
        for (int64_t r = 0; r < R; r++) { /* k_b[h][r][:] is column r of the nope rows */
            const uint8_t *src = (const uint8_t *)kb.data + (size_t)(h * R + r) * kb_row;
            if (same) {
                for (int64_t n = 0; n < N; n++) memcpy(hb + (size_t)(n * R + r) * es, src + (size_t)n * es, es);
            } else {
                ea_dtypes[kb.dtype].to_f32(src, krow, (size_t)N);
                for (int64_t n = 0; n < N; n++) memcpy(hb + (size_t)(n * R + r) * 4, &krow[n], 4);
            }
        }
        for (int64_t v = 0; v < V; v++) {
            const uint8_t *src = (const uint8_t *)vb.data + (size_t)(h * V + v) * vb_row;
            uint8_t *d = hb + (size_t)((N + v) * R) * es;
            if (same) memcpy(d, src, (size_t)R * es);
            else ea_dtypes[vb.dtype].to_f32(src, (float *)(void *)d, (size_t)R);
        }
    }
    memset(out, 0, sizeof *out);
    out->name = kb.name;
    out->dtype = dt;
    out->n_dims = 2;
    out->shape[0] = H * (N + V);
    out->shape[1] = R;
    out->data = dst;
    out->nbytes = (size_t)(H * (N + V) * R) * es;
    return EA_OK;
}

/* ---- per layer ---- */

typedef struct {
    int gguf;
    const char *pre; /* "model.layers.%d." or "blk.%d." already formatted */
} ea__names;

ea_status ea__ffn(ea__ld *ld, const char *g, const char *u, const char *d, int64_t ff, ea_ffn_weights *w) {
    int64_t H = ld->m->cfg.hidden_size;
    EA_TRY(ea__want(ld, g, &w->gate, 2, ff, H, 0));
    EA_TRY(ea__want(ld, u, &w->up, 2, ff, H, 0));
    EA_TRY(ea__want(ld, d, &w->down, 2, H, ff, 0));
    return EA_OK;
}

static ea_tensor ea__slice(const ea_tensor *s, int e) {
    ea_tensor t = *s;
    t.n_dims = 2;
    t.shape[0] = s->shape[1];
    t.shape[1] = s->shape[2];
    t.nbytes = s->nbytes / (size_t)s->shape[0];
    t.data = (const uint8_t *)s->data + (size_t)e * t.nbytes;
    return t;
}

static ea_status ea__attn(ea__ld *ld, int l, ea_layer_weights *L) {
    const ea_model_config *c = &ld->m->cfg;
    int gg = ld->f->gguf != NULL;
    int64_t H = c->hidden_size;
    char n[160];
#define NM(hf, gf) (gg ? ea__nm(n, sizeof n, "blk.%d." gf, l) : ea__nm(n, sizeof n, "model.layers.%d." hf, l))
    EA_TRY(ea__want(ld, NM("input_layernorm.weight", "attn_norm.weight"), &L->attn_norm, 1, H, 0, 0));
    EA_TRY(ea__want(ld, NM("post_attention_layernorm.weight", "ffn_norm.weight"), &L->ffn_norm, 1, H, 0, 0));
    if (c->kv_lora_rank > 0) {
        int64_t nh = c->n_heads, qd = c->qk_nope_head_dim + c->qk_rope_head_dim, R = c->kv_lora_rank;
        if (c->q_lora_rank > 0) {
            EA_TRY(ea__want(ld, NM("self_attn.q_a_proj.weight", "attn_q_a.weight"), &L->wq_a, 2, c->q_lora_rank, H, 0));
            EA_TRY(ea__want(ld, NM("self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"), &L->q_a_norm, 1,
                            c->q_lora_rank, 0, 0));
            EA_TRY(ea__want(ld, NM("self_attn.q_b_proj.weight", "attn_q_b.weight"), &L->wq_b, 2, nh * qd,
                            c->q_lora_rank, 0));
        } else {
            EA_TRY(ea__want(ld, NM("self_attn.q_proj.weight", "attn_q.weight"), &L->wq, 2, nh * qd, H, 0));
        }
        EA_TRY(ea__want(ld, NM("self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"), &L->wkv_a, 2,
                        R + c->qk_rope_head_dim, H, 0));
        EA_TRY(ea__want(ld, NM("self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"), &L->kv_a_norm, 1, R, 0, 0));
        if (gg && !ea__has(ld, NM("", "attn_kv_b.weight")) && ea__has(ld, NM("", "attn_k_b.weight")))
            EA_TRY(ea__join_kv_b(ld, l, &L->wkv_b));
        else
            EA_TRY(ea__want(ld, NM("self_attn.kv_b_proj.weight", "attn_kv_b.weight"), &L->wkv_b, 2,
                            nh * (c->qk_nope_head_dim + c->v_head_dim), R, 0));
        EA_TRY(ea__want(ld, NM("self_attn.o_proj.weight", "attn_output.weight"), &L->wo, 2, H, nh * c->v_head_dim, 0));
        return EA_OK;
    }
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    EA_TRY(ea__want(ld, NM("self_attn.q_proj.weight", "attn_q.weight"), &L->wq, 2, q, H, 0));
    EA_TRY(ea__want(ld, NM("self_attn.k_proj.weight", "attn_k.weight"), &L->wk, 2, kv, H, 0));
    EA_TRY(ea__want(ld, NM("self_attn.v_proj.weight", "attn_v.weight"), &L->wv, 2, kv, H, 0));
    EA_TRY(ea__want(ld, NM("self_attn.o_proj.weight", "attn_output.weight"), &L->wo, 2, H, q, 0));
    if (gg && c->arch == EA_ARCH_MIXTRAL) {
        EA_TRY(ea__unpermute(ld, &L->wq, c->n_heads));
        EA_TRY(ea__unpermute(ld, &L->wk, c->n_kv_heads));
    }
    if (c->attention_bias) {
        EA_TRY(ea__want(ld, NM("self_attn.q_proj.bias", "attn_q.bias"), &L->bq, 1, q, 0, 0));
        EA_TRY(ea__want(ld, NM("self_attn.k_proj.bias", "attn_k.bias"), &L->bk, 1, kv, 0, 0));
        EA_TRY(ea__want(ld, NM("self_attn.v_proj.bias", "attn_v.bias"), &L->bv, 1, kv, 0, 0));
    }
    if (c->qk_norm != EA_QKNORM_NONE) {
        int full = c->qk_norm == EA_QKNORM_FULL;
        EA_TRY(ea__want(ld, NM("self_attn.q_norm.weight", "attn_q_norm.weight"), &L->q_norm, 1, full ? q : c->head_dim,
                        0, 0));
        EA_TRY(ea__want(ld, NM("self_attn.k_norm.weight", "attn_k_norm.weight"), &L->k_norm, 1,
                        full ? kv : c->head_dim, 0, 0));
    }
#undef NM
    return EA_OK;
}

ea_status ea__moe(ea__ld *ld, int l, ea_layer_weights *L) {
    const ea_model_config *c = &ld->m->cfg;
    int gg = ld->f->gguf != NULL, mix = c->arch == EA_ARCH_MIXTRAL;
    int64_t H = c->hidden_size, E = c->n_experts, F = c->moe_intermediate_size;
    char n[160], n2[160], n3[160];
    L->experts = ea_calloc((size_t)E, sizeof *L->experts);
    if (!L->experts) return ea_err(EA_ERR_NOMEM, "%s: no memory for %lld experts", ld->where, (long long)E);
    if (gg) {
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "blk.%d.ffn_gate_inp.weight", l), &L->router, 2, E, H, 0));
        ea__nm(n, sizeof n, "blk.%d.ffn_gate_exps.weight", l);
        if (ea__has(ld, n) || !ea__has(ld, ea__nm(n2, sizeof n2, "blk.%d.ffn_gate.0.weight", l))) {
            ea_tensor g, u, d;
            EA_TRY(ea__want(ld, n, &g, 3, E, F, H));
            EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "blk.%d.ffn_up_exps.weight", l), &u, 3, E, F, H));
            EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "blk.%d.ffn_down_exps.weight", l), &d, 3, E, H, F));
            for (int e = 0; e < E; e++) {
                L->experts[e].gate = ea__slice(&g, e);
                L->experts[e].up = ea__slice(&u, e);
                L->experts[e].down = ea__slice(&d, e);
            }
        } else { /* older llama.cpp Mixtral files: one tensor per expert */
            for (int e = 0; e < E; e++)
                EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "blk.%d.ffn_gate.%d.weight", l, e),
                               ea__nm(n2, sizeof n2, "blk.%d.ffn_up.%d.weight", l, e),
                               ea__nm(n3, sizeof n3, "blk.%d.ffn_down.%d.weight", l, e), F, &L->experts[e]));
        }
        if (c->topk_method == EA_TOPK_NOAUX_TC) {
            ea__nm(n, sizeof n, "blk.%d.exp_probs_b.bias", l);
            if (!ea__has(ld, n)) ea__nm(n, sizeof n, "blk.%d.exp_probs_b", l);
            EA_TRY(ea__want(ld, n, &L->router_bias, 1, E, 0, 0));
        }
        int64_t S = c->shared_expert_intermediate_size + (int64_t)c->n_shared_experts * F;
        if (S > 0)
            EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "blk.%d.ffn_gate_shexp.weight", l),
                           ea__nm(n2, sizeof n2, "blk.%d.ffn_up_shexp.weight", l),
                           ea__nm(n3, sizeof n3, "blk.%d.ffn_down_shexp.weight", l), S, &L->shared));
        if (c->shared_expert_intermediate_size > 0)
            EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "blk.%d.ffn_gate_inp_shexp.weight", l), &L->shared_gate, 2, 1, H, 0));
        return EA_OK;
    }
    const char *blk = mix ? "block_sparse_moe" : "mlp";
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "model.layers.%d.%s.gate.weight", l, blk), &L->router, 2, E, H, 0));
    for (int e = 0; e < E; e++) {
        if (mix)
            EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e),
                           ea__nm(n2, sizeof n2, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e),
                           ea__nm(n3, sizeof n3, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e), F,
                           &L->experts[e]));
        else
            EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e),
                           ea__nm(n2, sizeof n2, "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e),
                           ea__nm(n3, sizeof n3, "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e), F,
                           &L->experts[e]));
    }
    if (c->topk_method == EA_TOPK_NOAUX_TC)
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "model.layers.%d.mlp.gate.e_score_correction_bias", l),
                        &L->router_bias, 1, E, 0, 0));
    if (c->shared_expert_intermediate_size > 0) {
        int64_t S = c->shared_expert_intermediate_size;
        EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "model.layers.%d.mlp.shared_expert.gate_proj.weight", l),
                       ea__nm(n2, sizeof n2, "model.layers.%d.mlp.shared_expert.up_proj.weight", l),
                       ea__nm(n3, sizeof n3, "model.layers.%d.mlp.shared_expert.down_proj.weight", l), S, &L->shared));
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "model.layers.%d.mlp.shared_expert_gate.weight", l), &L->shared_gate,
                        2, 1, H, 0));
    }
    if (c->n_shared_experts > 0) {
        int64_t S = (int64_t)c->n_shared_experts * F;
        EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "model.layers.%d.mlp.shared_experts.gate_proj.weight", l),
                       ea__nm(n2, sizeof n2, "model.layers.%d.mlp.shared_experts.up_proj.weight", l),
                       ea__nm(n3, sizeof n3, "model.layers.%d.mlp.shared_experts.down_proj.weight", l), S, &L->shared));
    }
    return EA_OK;
}

static ea_status ea__layer(ea__ld *ld, int l) {
    ea_layer_weights *L = &ld->m->layers[l];
    const ea_model_config *c = &ld->m->cfg;
    if (c->arch == EA_ARCH_QWEN3_NEXT || c->arch == EA_ARCH_QWEN3_5_MOE) return ea__hybrid_layer(ld, l);
    EA_TRY(ea__attn(ld, l, L));
    if (c->layer_is_moe[l]) return ea__moe(ld, l, L);
    char n[160], n2[160], n3[160];
    if (ld->f->gguf)
        return ea__ffn(ld, ea__nm(n, sizeof n, "blk.%d.ffn_gate.weight", l), ea__nm(n2, sizeof n2, "blk.%d.ffn_up.weight", l),
                       ea__nm(n3, sizeof n3, "blk.%d.ffn_down.weight", l), c->intermediate_size, &L->dense);
    return ea__ffn(ld, ea__nm(n, sizeof n, "model.layers.%d.mlp.gate_proj.weight", l),
                   ea__nm(n2, sizeof n2, "model.layers.%d.mlp.up_proj.weight", l),
                   ea__nm(n3, sizeof n3, "model.layers.%d.mlp.down_proj.weight", l), c->intermediate_size, &L->dense);
}

/* ---- layout notes for inspect ---- */

static void ea__note(char **notes, size_t *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ea__note(char **notes, size_t *len, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    size_t add = strlen(line);
    char *p = ea_realloc(*notes, *len + add + 2);
    if (!p) return;
    memcpy(p + *len, line, add);
    p[*len + add] = '\n';
    p[*len + add + 1] = 0;
    *notes = p;
    *len += add + 1;
}

static void ea__layout(ea_model *m, ea__files *f) {
    char *notes = ea_strdup("");
    size_t len = 0;
    if (!notes) return;
    int unused = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        if (f->used[i]) continue;
        ea_tensor t;
        const char *file = NULL;
        if (f->st) ea_st_set_tensor(f->st, i, &t, &file);
        else ea_gguf_tensor(f->gguf, i, &t), file = f->gguf->path;
        if (unused < 8) ea__note(&notes, &len, "unused tensor '%s' in %s", t.name, file);
        unused++;
    }
    if (unused > 8) ea__note(&notes, &len, "... %d unused tensors in all", unused);
    m->n_unused = unused;
    if (f->st) {
        for (int i = 0; i < f->st->n_files; i++) {
            const ea_st_file *sf = f->st->files[i];
            if (sf->n_misaligned)
                ea__note(&notes, &len, "%s: %d tensors' data not aligned to their element size (header length %llu)",
                         sf->path, sf->n_misaligned, (unsigned long long)(sf->data_off - 8));
            else if (sf->data_off % 64)
                ea__note(&notes, &len, "%s: data section starts at offset %llu, not 64-byte aligned", sf->path,
                         (unsigned long long)sf->data_off);
            if (sf->gap_bytes)
                ea__note(&notes, &len, "%s: %llu bytes of the data section belong to no tensor", sf->path,
                         (unsigned long long)sf->gap_bytes);
        }
    } else {
        if (f->gguf->alignment < 32)
            ea__note(&notes, &len, "%s: general.alignment %llu is below 32 bytes", f->gguf->path,
                     (unsigned long long)f->gguf->alignment);
    }
    m->layout_notes = notes;
}

/* ---- open / close ---- */

static ea_status ea__map_all(ea__ld *ld) {
    ea_model *m = ld->m;
    const ea_model_config *c = &m->cfg;
    int gg = ld->f->gguf != NULL;
    int64_t V = c->vocab_size, H = c->hidden_size;
    const char *root = c->arch == EA_ARCH_QWEN3_5_MOE ? "model.language_model" : "model"; /* Qwen3.5: text model */
    char n[160];
    EA_TRY(ea__want(ld, gg ? "token_embd.weight" : ea__nm(n, sizeof n, "%s.embed_tokens.weight", root), &m->tok_embd, 2,
                    V, H, 0));
    EA_TRY(ea__want(ld, gg ? "output_norm.weight" : ea__nm(n, sizeof n, "%s.norm.weight", root), &m->out_norm, 1, H, 0,
                    0));
    const char *lm = gg ? "output.weight" : "lm_head.weight";
    if (ea__has(ld, lm) || !c->tie_word_embeddings) EA_TRY(ea__want(ld, lm, &m->lm_head, 2, V, H, 0));
    else m->lm_head = m->tok_embd;
    m->layers = ea_calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return ea_err(EA_ERR_NOMEM, "%s: no memory", ld->where);
    for (int l = 0; l < c->n_layers; l++) EA_TRY(ea__layer(ld, l));
    return EA_OK;
}

int ea_model_dir_of_file(const char *path, char *dir, size_t n) {
    snprintf(dir, n, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, n, ".");
    char cfg[4200];
    ea_path_join(cfg, sizeof cfg, dir, "config.json");
    return ea_file_exists(cfg);
}

ea_status ea_model_check_path(const char *path) {
    if (ea_is_dir(path)) return EA_OK;
    if (!ea_file_exists(path)) return ea_err(EA_ERR_NOT_FOUND, "%s: no such model directory or .gguf file", path);
    if (ea_gguf_file_has_magic(path)) return EA_OK;
    /* a file of an HF model directory (config.json, *.safetensors, ...): name the directory */
    char dir[4096];
    if (ea_model_dir_of_file(path, dir, sizeof dir))
        return ea_err(EA_ERR_INVALID_ARG,
                      "%s: expected a model directory or a .gguf file, got a file of the model directory %s (pass "
                      "the directory)", path, dir);
    return ea_err(EA_ERR_FORMAT,
                  "%s: expected a model directory or a .gguf file; this file is neither (bad magic at offset 0, "
                  "not GGUF)", path);
}

ea_status ea_model_read_config(const char *path, ea_model_config *cfg) {
    EA_TRY(ea_model_check_path(path));
    if (ea_is_dir(path)) return ea_config_from_hf_dir(path, cfg);
    ea_gguf *g = NULL;
    EA_TRY(ea_gguf_open(path, &g));
    ea_status s = ea_config_from_gguf(g, cfg);
    ea_gguf_close(g);
    return s;
}

ea_status ea_model_open(const char *path, ea_model **out) {
    *out = NULL;
    EA_TRY(ea_model_check_path(path));
    ea_model *m = ea_calloc(1, sizeof *m);
    ea__files *f = ea_calloc(1, sizeof *f);
    ea__owned *own = ea_calloc(1, sizeof *own);
    if (!m || !f || !own || !(m->path = ea_strdup(path))) {
        ea_free(m ? m->path : NULL);
        ea_free(m);
        ea_free(f);
        ea_free(own);
        return ea_err(EA_ERR_NOMEM, "%s: no memory", path);
    }
    m->files = f;
    m->owned = own;
    ea_status s;
    if (ea_is_dir(path)) {
        m->format = EA_FORMAT_HF;
        if ((s = ea_config_from_hf_dir(path, &m->cfg)) != EA_OK) goto fail;
        if ((s = ea_st_set_open(path, &f->st)) != EA_OK) goto fail;
        f->n_tensors = f->st->n_refs;
        for (int i = 0; i < f->st->n_refs; i++) {
            ea_tensor t;
            const char *file;
            ea_st_set_tensor(f->st, i, &t, &file);
            if (ea_st_set_info(f->st, i)->f8) {
                s = ea_err(EA_ERR_UNSUPPORTED,
                           "%s: tensor '%s': dtype F8_E4M3 (an FP8 checkpoint) is not loaded; convert it to bf16 "
                           "first: eaas convert-fp8 --model %s --out NEW_DIR",
                           file, t.name, path);
                goto fail;
            }
            m->weight_bytes += (int64_t)t.nbytes;
        }
    } else if (ea_file_exists(path)) {
        m->format = EA_FORMAT_GGUF;
        if ((s = ea_gguf_open(path, &f->gguf)) != EA_OK) goto fail;
        if ((s = ea_config_from_gguf(f->gguf, &m->cfg)) != EA_OK) goto fail;
        f->n_tensors = (int)f->gguf->n_tensors;
        for (uint64_t i = 0; i < f->gguf->n_tensors; i++) m->weight_bytes += (int64_t)f->gguf->tensors[i].nbytes;
    } else {
        s = ea_err(EA_ERR_NOT_FOUND, "%s: no such model directory or .gguf file", path);
        goto fail;
    }
    f->used = ea_calloc((size_t)(f->n_tensors ? f->n_tensors : 1), 1);
    f->loaded = ea_calloc((size_t)m->cfg.n_layers * (size_t)m->cfg.n_experts, 1);
    if (!f->used || !f->loaded) {
        s = ea_err(EA_ERR_NOMEM, "%s: no memory", path);
        goto fail;
    }
    ea__ld ld = {m, f, own, path};
    if ((s = ea__map_all(&ld)) != EA_OK) goto fail;
    if (!(m->experts = ea_calloc((size_t)m->cfg.n_layers, sizeof *m->experts))) {
        s = ea_err(EA_ERR_NOMEM, "%s: no memory", path);
        goto fail;
    }
    for (int l = 0; l < m->cfg.n_layers; l++) m->experts[l] = m->cfg.layer_is_moe[l] ? m->layers[l].experts : NULL;
    ea__layout(m, f);
    *out = m;
    return EA_OK;
fail:
    ea_model_close(m);
    return s;
}

void ea_model_close(ea_model *m) {
    if (!m) return;
    if (m->layers)
        for (int l = 0; l < m->cfg.n_layers; l++) ea_free(m->layers[l].experts);
    ea_free(m->layers);
    ea_free(m->experts);
    ea__files *f = m->files;
    if (f) {
        ea_st_set_close(f->st);
        ea_gguf_close(f->gguf);
        ea_free(f->used);
        ea_free(f->loaded);
        for (int i = 0; i < f->n_arenas; i++) munmap(f->arenas[i].p, f->arenas[i].n);
        ea_free(f->arenas);
        ea_free(f);
    }
    ea__owned *o = m->owned;
    if (o) {
        for (int i = 0; i < o->n; i++) ea_aligned_free(o->bufs[i]);
        ea_free(o->bufs);
        ea_free(o->lens);
        ea_free(o);
    }
    ea_free(m->layout_notes);
    ea_free(m->path);
    ea_free(m);
}

/* ---- loading ---- */
