/*
 * model_hybrid.c — the weight-name mapping of one layer of the hybrid
 * families qwen3_next (Qwen3-Next) and qwen3_5_moe (Qwen3.5 MoE, text part).
 * HF directories and GGUF files as llama.cpp's converter writes them.
 *
 * HF prefix P = "model.layers.L." (qwen3_next) or "model.language_model.layers.L."
 * (qwen3_5_moe, whose checkpoint also holds a vision tower we do not read).
 *
 *   model.h field   HF (P + ...)
 *   attn_norm       input_layernorm.weight            (1 + w)
 *   ffn_norm        post_attention_layernorm.weight   (1 + w)
 *   full-attention layers ((l + 1) % full_attention_interval == 0, or layer_types):
 *   wq              self_attn.q_proj.weight (2*nh*hd, H): per head [query (hd) | gate (hd)]
 *   wk wv wo        self_attn.{k,v,o}_proj.weight
 *   q_norm k_norm   self_attn.{q,k}_norm.weight (hd)  (1 + w)
 *   linear (Gated DeltaNet) layers, r = nv / nk:
 *   lin_qkv lin_z   qwen3_5_moe: linear_attn.in_proj_qkv / in_proj_z
 *                   qwen3_next:  linear_attn.in_proj_qkvz, rows per key head g:
 *                                [q (dk) | k (dk) | v (r*dv) | z (r*dv)] — regrouped here
 *   lin_b lin_a     qwen3_5_moe: linear_attn.in_proj_b / in_proj_a
 *                   qwen3_next:  linear_attn.in_proj_ba, rows per key head g: [b (r) | a (r)]
 *   lin_conv        linear_attn.conv1d.weight (C, 1, K) viewed as (C, K)
 *   lin_dt_bias lin_a_log lin_norm lin_out
 *                   linear_attn.dt_bias, A_log, norm.weight, out_proj.weight
 *   MoE (every layer of qwen3_5_moe; qwen3_next: decoder_sparse_step / mlp_only_layers):
 *   router          mlp.gate.weight
 *   experts[E]      qwen3_next:  mlp.experts.E.{gate,up,down}_proj.weight
 *                   qwen3_5_moe: mlp.experts.gate_up_proj (E, 2F, H) rows [gate (F) | up (F)] of
 *                                expert E, mlp.experts.down_proj (E, H, F): views, no copy
 *   shared          mlp.shared_expert.{gate,up,down}_proj.weight
 *   shared_gate     mlp.shared_expert_gate.weight (1, H)
 *   dense           mlp.{gate,up,down}_proj.weight (qwen3_next's dense layers, if any)
 *
 * GGUF (llama.cpp's convert_hf_to_gguf.py: Qwen3NextModel, and for qwen35moe
 * _LinearAttentionVReorderBase on top of it; names under "blk.L."):
 *
 *   model.h field   GGUF                                   note
 *   attn_norm       attn_norm.weight                       1 + w stored (F32)
 *   ffn_norm        post_attention_norm.weight             1 + w stored (F32)
 *   wq wk wv wo     attn_q (2*nh*hd, H), attn_k, attn_v, attn_output
 *   q_norm k_norm   attn_q_norm, attn_k_norm (hd)          1 + w stored (F32)
 *   lin_qkv lin_z   attn_qkv (C, H), attn_gate (nv*dv, H)  already [q | k | v] and z; a legacy
 *                                                          qwen3next file's ssm_in is HF's in_proj_qkvz
 *   lin_b lin_a     qwen3next: ssm_ba (2*nv, H), grouped per key head as HF's in_proj_ba
 *                   qwen35moe: ssm_beta, ssm_alpha (nv, H)
 *   lin_conv        ssm_conv1d (C, K) (ggml ne [K, C])    F32
 *   lin_dt_bias     ssm_dt.bias (nv)                       F32
 *   lin_a_log       ssm_a (nv), no ".weight"               F32, holds -exp(A_log) (cfg.lin_a_neg_exp)
 *   lin_norm        ssm_norm.weight (dv)                   plain w (F32)
 *   lin_out         ssm_out.weight (H, nv*dv)
 *   MoE             ffn_gate_inp, ffn_{gate,up,down}_exps, ffn_{gate,up,down}_shexp,
 *                   ffn_gate_inp_shexp (H) — model.c's GGUF MoE block
 *
 * qwen35moe's converter also reorders the value heads, when nv != nk, from grouped
 * by key head (head g*r + v) to tiled (head v*nk + g): the V rows of attn_qkv, the
 * rows of attn_gate, ssm_beta, ssm_alpha, ssm_dt, ssm_a, the V channels of
 * ssm_conv1d and the column blocks of ssm_out. The loader moves them back.
 *
 * Every rewrite moves whole rows or blocks (exact) — except ssm_out's columns in
 * Q8_0 when dv is not a multiple of 32, which are dequantised to f32 first — so
 * the forward pass has one path for both families and both formats: the conv runs
 * over channels [q (nk*dk) | k (nk*dk) | v (nv*dv)], value head h reads key head h / r.
 */
#include <string.h>

#include "base/alloc.h"
#include "model/model_load.h"

/* rows [r0, r0 + nr) of a 2-D tensor, or of block e of a 3-D one (shape (E, R, cols)) */
static ea_tensor rows_of(const ea_tensor *t, int64_t e, int64_t r0, int64_t nr) {
    int64_t R = t->n_dims == 3 ? t->shape[1] : t->shape[0], cols = t->shape[t->n_dims - 1];
    size_t rb = ea_dtype_row_bytes(t->dtype, (size_t)cols);
    ea_tensor v = *t;
    v.n_dims = 2;
    v.shape[0] = nr;
    v.shape[1] = cols;
    v.shape[2] = 0;
    v.data = (const uint8_t *)t->data + (size_t)(e * R + r0) * rb;
    v.nbytes = (size_t)nr * rb;
    v.packed = NULL;
    return v;
}

/* qwen3_next: regroup in_proj_qkvz (unless NULL) / in_proj_ba (rows grouped per key head)
 * into [q | k | v | z] and [b | a], into one owned buffer each. */
static ea_status regroup(ea__ld *ld, const ea_tensor *qkvz, const ea_tensor *ba, ea_layer_weights *L) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t nk = c->lin_n_k_heads, r = c->lin_n_v_heads / nk, dk = c->lin_k_dim, dv = c->lin_v_dim;
    int64_t C = 2 * nk * dk + nk * r * dv, grp = 2 * dk + 2 * r * dv;
    size_t rb = qkvz ? ea_dtype_row_bytes(qkvz->dtype, (size_t)qkvz->shape[1]) : 0;
    uint8_t *dst = qkvz ? ea__own(ld, (size_t)qkvz->shape[0] * rb) : NULL;
    size_t rb2 = ea_dtype_row_bytes(ba->dtype, (size_t)ba->shape[1]);
    uint8_t *dst2 = ea__own(ld, (size_t)ba->shape[0] * rb2);
    if ((qkvz && !dst) || !dst2) return ea_err(EA_ERR_NOMEM, "%s: no memory to regroup %s", ld->where, ba->name);
    const uint8_t *src = qkvz ? qkvz->data : NULL, *src2 = ba->data;
    for (int64_t g = 0; g < nk; g++) {
        const uint8_t *s2 = src2 + (size_t)(g * 2 * r) * rb2;
        memcpy(dst2 + (size_t)(g * r) * rb2, s2, (size_t)r * rb2);                                /* b */
        memcpy(dst2 + (size_t)(nk * r + g * r) * rb2, s2 + (size_t)r * rb2, (size_t)r * rb2);     /* a */
        if (!qkvz) continue;
        const uint8_t *s = src + (size_t)(g * grp) * rb;
        memcpy(dst + (size_t)(g * dk) * rb, s, (size_t)dk * rb);                                /* q */
        memcpy(dst + (size_t)(nk * dk + g * dk) * rb, s + (size_t)dk * rb, (size_t)dk * rb);     /* k */
        memcpy(dst + (size_t)(2 * nk * dk + g * r * dv) * rb, s + (size_t)(2 * dk) * rb, (size_t)(r * dv) * rb); /* v */
        memcpy(dst + (size_t)(C + g * r * dv) * rb, s + (size_t)(2 * dk + r * dv) * rb, (size_t)(r * dv) * rb);  /* z */
    }
    ea_tensor all2 = *ba;
    all2.data = dst2;
    all2.packed = NULL;
    if (qkvz) {
        ea_tensor all = *qkvz;
        all.data = dst;
        all.packed = NULL;
        L->lin_qkv = rows_of(&all, 0, 0, C);
        L->lin_z = rows_of(&all, 0, C, nk * r * dv);
    }
    L->lin_b = rows_of(&all2, 0, 0, nk * r);
    L->lin_a = rows_of(&all2, 0, nk * r, nk * r);
    return EA_OK;
}

static ea_status linear_attn(ea__ld *ld, const char *P, ea_layer_weights *L) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t H = c->hidden_size, nv = c->lin_n_v_heads, dv = c->lin_v_dim, K = c->lin_conv_kernel;
    int64_t C = 2 * (int64_t)c->lin_n_k_heads * c->lin_k_dim + nv * dv;
    char n[200];
    if (c->arch == EA_ARCH_QWEN3_NEXT) {
        ea_tensor qkvz, ba;
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.in_proj_qkvz.weight", P), &qkvz, 2, C + nv * dv, H, 0));
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.in_proj_ba.weight", P), &ba, 2, 2 * nv, H, 0));
        EA_TRY(regroup(ld, &qkvz, &ba, L));
    } else {
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.in_proj_qkv.weight", P), &L->lin_qkv, 2, C, H, 0));
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.in_proj_z.weight", P), &L->lin_z, 2, nv * dv, H, 0));
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.in_proj_b.weight", P), &L->lin_b, 2, nv, H, 0));
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.in_proj_a.weight", P), &L->lin_a, 2, nv, H, 0));
    }
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.conv1d.weight", P), &L->lin_conv, 3, C, 1, K));
    L->lin_conv.n_dims = 2;
    L->lin_conv.shape[1] = K;
    L->lin_conv.shape[2] = 0;
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.dt_bias", P), &L->lin_dt_bias, 1, nv, 0, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.A_log", P), &L->lin_a_log, 1, nv, 0, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.norm.weight", P), &L->lin_norm, 1, dv, 0, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%slinear_attn.out_proj.weight", P), &L->lin_out, 2, H, nv * dv, 0));
    return EA_OK;
}

static ea_status gated_attn(ea__ld *ld, const char *P, ea_layer_weights *L) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t H = c->hidden_size, q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    char n[200];
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%sself_attn.q_proj.weight", P), &L->wq, 2, 2 * q, H, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%sself_attn.k_proj.weight", P), &L->wk, 2, kv, H, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%sself_attn.v_proj.weight", P), &L->wv, 2, kv, H, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%sself_attn.o_proj.weight", P), &L->wo, 2, H, q, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%sself_attn.q_norm.weight", P), &L->q_norm, 1, c->head_dim, 0, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%sself_attn.k_norm.weight", P), &L->k_norm, 1, c->head_dim, 0, 0));
    return EA_OK;
}

static ea_status moe(ea__ld *ld, const char *P, ea_layer_weights *L) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t H = c->hidden_size, E = c->n_experts, F = c->moe_intermediate_size;
    char n[200], n2[200], n3[200];
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%smlp.gate.weight", P), &L->router, 2, E, H, 0));
    L->experts = ea_calloc((size_t)E, sizeof *L->experts);
    if (!L->experts) return ea_err(EA_ERR_NOMEM, "%s: no memory for %lld experts", ld->where, (long long)E);
    if (ea__has(ld, ea__nm(n, sizeof n, "%smlp.experts.gate_up_proj", P))) { /* stacked (Qwen3.5) */
        ea_tensor gu, dn;
        EA_TRY(ea__want(ld, n, &gu, 3, E, 2 * F, H));
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%smlp.experts.down_proj", P), &dn, 3, E, H, F));
        for (int64_t e = 0; e < E; e++) {
            L->experts[e].gate = rows_of(&gu, e, 0, F);
            L->experts[e].up = rows_of(&gu, e, F, F);
            L->experts[e].down = rows_of(&dn, e, 0, H);
        }
    } else {
        for (int64_t e = 0; e < E; e++)
            EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "%smlp.experts.%lld.gate_proj.weight", P, (long long)e),
                           ea__nm(n2, sizeof n2, "%smlp.experts.%lld.up_proj.weight", P, (long long)e),
                           ea__nm(n3, sizeof n3, "%smlp.experts.%lld.down_proj.weight", P, (long long)e), F,
                           &L->experts[e]));
    }
    if (c->shared_expert_intermediate_size > 0) {
        EA_TRY(ea__ffn(ld, ea__nm(n, sizeof n, "%smlp.shared_expert.gate_proj.weight", P),
                       ea__nm(n2, sizeof n2, "%smlp.shared_expert.up_proj.weight", P),
                       ea__nm(n3, sizeof n3, "%smlp.shared_expert.down_proj.weight", P),
                       c->shared_expert_intermediate_size, &L->shared));
        EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%smlp.shared_expert_gate.weight", P), &L->shared_gate, 2, 1, H, 0));
    }
    return EA_OK;
}

/* qwen35moe GGUF: value heads from tiled back to grouped order in the rows [off, off + nv*hd)
 * of t (a vector's rows are its elements). Whole rows move: exact in any dtype. */
static ea_status untile_rows(ea__ld *ld, ea_tensor *t, int64_t off, int64_t hd) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t nk = c->lin_n_k_heads, r = c->lin_n_v_heads / nk;
    size_t rb = t->nbytes / (size_t)t->shape[0];
    uint8_t *dst = ea__own(ld, t->nbytes);
    if (!dst) return ea_err(EA_ERR_NOMEM, "%s: no memory to reorder %s", ld->where, t->name);
    const uint8_t *src = t->data;
    memcpy(dst, src, (size_t)off * rb);
    for (int64_t g = 0; g < nk; g++)
        for (int64_t v = 0; v < r; v++)
            memcpy(dst + (size_t)(off + (g * r + v) * hd) * rb, src + (size_t)(off + (v * nk + g) * hd) * rb,
                   (size_t)hd * rb);
    t->data = dst;
    t->packed = NULL;
    return EA_OK;
}

/* The same on the columns of ssm_out (H, nv*dv), in blocks of hd columns. A Q8_0 block
 * that straddles two heads cannot move: such a tensor is dequantised to f32 first. */
static ea_status untile_cols(ea__ld *ld, ea_tensor *t, int64_t hd) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t nk = c->lin_n_k_heads, r = c->lin_n_v_heads / nk, R = t->shape[0], cols = t->shape[1];
    const ea_dtype_traits *tr = &ea_dtypes[t->dtype];
    const uint8_t *src = t->data;
    size_t unit, rb;
    if (hd % tr->block == 0) {
        unit = (size_t)(hd / tr->block) * (size_t)tr->block_bytes;
        rb = ea_dtype_row_bytes(t->dtype, (size_t)cols);
    } else { /* f32 copy of the whole tensor, then move f32 blocks */
        float *f = ea__own(ld, (size_t)(R * cols) * sizeof(float));
        if (!f) return ea_err(EA_ERR_NOMEM, "%s: no memory to reorder %s", ld->where, t->name);
        size_t srb = ea_dtype_row_bytes(t->dtype, (size_t)cols);
        for (int64_t i = 0; i < R; i++) tr->to_f32(src + (size_t)i * srb, f + i * cols, (size_t)cols);
        src = (const uint8_t *)f;
        t->dtype = EA_F32;
        t->nbytes = (size_t)(R * cols) * sizeof(float);
        unit = (size_t)hd * sizeof(float);
        rb = (size_t)cols * sizeof(float);
    }
    uint8_t *dst = ea__own(ld, t->nbytes);
    if (!dst) return ea_err(EA_ERR_NOMEM, "%s: no memory to reorder %s", ld->where, t->name);
    for (int64_t i = 0; i < R; i++)
        for (int64_t g = 0; g < nk; g++)
            for (int64_t v = 0; v < r; v++)
                memcpy(dst + (size_t)i * rb + (size_t)(g * r + v) * unit, src + (size_t)i * rb + (size_t)(v * nk + g) * unit,
                       unit);
    t->data = dst;
    t->packed = NULL;
    return EA_OK;
}

static ea_status gguf_linear_attn(ea__ld *ld, int l, ea_layer_weights *L) {
    const ea_model_config *c = &ld->m->cfg;
    int64_t H = c->hidden_size, nk = c->lin_n_k_heads, nv = c->lin_n_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim;
    int64_t C = 2 * nk * dk + nv * dv, K = c->lin_conv_kernel;
    int q35 = c->arch == EA_ARCH_QWEN3_5_MOE;
    char n[96];
#define G(sfx) ea__nm(n, sizeof n, "blk.%d." sfx, l)
    if (!q35 && !ea__has(ld, G("attn_qkv.weight")) && ea__has(ld, G("ssm_in.weight"))) { /* legacy: HF's qkvz */
        ea_tensor qkvz, ba;
        EA_TRY(ea__want(ld, G("ssm_in.weight"), &qkvz, 2, C + nv * dv, H, 0));
        EA_TRY(ea__want(ld, G("ssm_ba.weight"), &ba, 2, 2 * nv, H, 0));
        EA_TRY(regroup(ld, &qkvz, &ba, L));
    } else {
        EA_TRY(ea__want(ld, G("attn_qkv.weight"), &L->lin_qkv, 2, C, H, 0));
        EA_TRY(ea__want(ld, G("attn_gate.weight"), &L->lin_z, 2, nv * dv, H, 0));
        if (q35) {
            EA_TRY(ea__want(ld, G("ssm_beta.weight"), &L->lin_b, 2, nv, H, 0));
            EA_TRY(ea__want(ld, G("ssm_alpha.weight"), &L->lin_a, 2, nv, H, 0));
        } else {
            ea_tensor ba;
            EA_TRY(ea__want(ld, G("ssm_ba.weight"), &ba, 2, 2 * nv, H, 0));
            EA_TRY(regroup(ld, NULL, &ba, L));
        }
    }
    EA_TRY(ea__want(ld, G("ssm_conv1d.weight"), &L->lin_conv, 2, C, K, 0));
    EA_TRY(ea__want(ld, G("ssm_dt.bias"), &L->lin_dt_bias, 1, nv, 0, 0));
    EA_TRY(ea__want(ld, G("ssm_a"), &L->lin_a_log, 1, nv, 0, 0));
    EA_TRY(ea__want(ld, G("ssm_norm.weight"), &L->lin_norm, 1, dv, 0, 0));
    EA_TRY(ea__want(ld, G("ssm_out.weight"), &L->lin_out, 2, H, nv * dv, 0));
#undef G
    if (q35 && nv != nk) {
        EA_TRY(untile_rows(ld, &L->lin_qkv, 2 * nk * dk, dv));
        EA_TRY(untile_rows(ld, &L->lin_z, 0, dv));
        EA_TRY(untile_rows(ld, &L->lin_b, 0, 1));
        EA_TRY(untile_rows(ld, &L->lin_a, 0, 1));
        EA_TRY(untile_rows(ld, &L->lin_conv, 2 * nk * dk, dv));
        EA_TRY(untile_rows(ld, &L->lin_dt_bias, 0, 1));
        EA_TRY(untile_rows(ld, &L->lin_a_log, 0, 1));
        EA_TRY(untile_cols(ld, &L->lin_out, dv));
    }
    return EA_OK;
}

static ea_status gguf_layer(ea__ld *ld, int l) {
    const ea_model_config *c = &ld->m->cfg;
    ea_layer_weights *L = &ld->m->layers[l];
    int64_t H = c->hidden_size, q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    char n[96], n2[96], n3[96];
#define G(sfx) ea__nm(n, sizeof n, "blk.%d." sfx, l)
    EA_TRY(ea__want(ld, G("attn_norm.weight"), &L->attn_norm, 1, H, 0, 0));
    EA_TRY(ea__want(ld, G("post_attention_norm.weight"), &L->ffn_norm, 1, H, 0, 0));
    if (c->layer_is_linear[l]) {
        EA_TRY(gguf_linear_attn(ld, l, L));
    } else {
        EA_TRY(ea__want(ld, G("attn_q.weight"), &L->wq, 2, 2 * q, H, 0));
        EA_TRY(ea__want(ld, G("attn_k.weight"), &L->wk, 2, kv, H, 0));
        EA_TRY(ea__want(ld, G("attn_v.weight"), &L->wv, 2, kv, H, 0));
        EA_TRY(ea__want(ld, G("attn_output.weight"), &L->wo, 2, H, q, 0));
        EA_TRY(ea__want(ld, G("attn_q_norm.weight"), &L->q_norm, 1, c->head_dim, 0, 0));
        EA_TRY(ea__want(ld, G("attn_k_norm.weight"), &L->k_norm, 1, c->head_dim, 0, 0));
    }
#undef G
    if (c->layer_is_moe[l]) return ea__moe(ld, l, L);
    return ea__ffn(ld, ea__nm(n, sizeof n, "blk.%d.ffn_gate.weight", l), ea__nm(n2, sizeof n2, "blk.%d.ffn_up.weight", l),
                   ea__nm(n3, sizeof n3, "blk.%d.ffn_down.weight", l), c->intermediate_size, &L->dense);
}

ea_status ea__hybrid_layer(ea__ld *ld, int l) {
    const ea_model_config *c = &ld->m->cfg;
    ea_layer_weights *L = &ld->m->layers[l];
    if (ld->f->gguf) return gguf_layer(ld, l);
    char P[96], n[200], n2[200], n3[200];
    snprintf(P, sizeof P, "%s.layers.%d.", c->arch == EA_ARCH_QWEN3_5_MOE ? "model.language_model" : "model", l);
    int64_t H = c->hidden_size;
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%sinput_layernorm.weight", P), &L->attn_norm, 1, H, 0, 0));
    EA_TRY(ea__want(ld, ea__nm(n, sizeof n, "%spost_attention_layernorm.weight", P), &L->ffn_norm, 1, H, 0, 0));
    EA_TRY(c->layer_is_linear[l] ? linear_attn(ld, P, L) : gated_attn(ld, P, L));
    if (c->layer_is_moe[l]) return moe(ld, P, L);
    return ea__ffn(ld, ea__nm(n, sizeof n, "%smlp.gate_proj.weight", P), ea__nm(n2, sizeof n2, "%smlp.up_proj.weight", P),
                   ea__nm(n3, sizeof n3, "%smlp.down_proj.weight", P), c->intermediate_size, &L->dense);
}
