/*
 * mla.c — multi-head latent attention (DeepSeek-V2/V3, Kimi K2).
 *
 * Per token (dims: H heads, n = qk_nope_head_dim, r = qk_rope_head_dim,
 * v = v_head_dim, c = kv_lora_rank):
 *   q      = wq·x, or wq_b·rmsnorm(wq_a·x) when q_lora_rank > 0     (H*(n+r))
 *   ckv    = wkv_a·x = [latent' (c) | k_pe (r)]
 *   latent = rmsnorm(latent', kv_a_norm)
 *   q_pe, k_pe: RoPE on pairs (x[2i], x[2i+1]) — DeepSeek's published code
 *           de-interleaves then rotates halves; that permutes both vectors
 *           the same way, so dot products are unchanged
 *   cache  = [latent | k_pe]   (c + r values per token per layer)
 * wkv_b (H*(n+v), c) holds per head W_UK[h] (n rows) then W_UV[h] (v rows).
 *
 * Absorbed form (default; decode reads the latent cache once):
 *   q_abs[h] = W_UK[h]ᵀ q_nope[h]                                        (c)
 *   s[p]     = ([q_abs[h] | q_pe[h]] · [latent[p] | k_pe[p]]) · scale   (one dot product)
 *   ctx[h]   = Σ_p softmax(s)[p] · latent[p]                             (c)
 *   o[h]     = W_UV[h] · ctx[h]                                          (v)
 * Expanded form (the published one; --mla-expanded, for checking):
 *   k_nope[h][p] = W_UK[h]·latent[p], value[h][p] = W_UV[h]·latent[p]
 *   s[p] = (q_nope[h]·k_nope[h][p] + q_pe[h]·k_pe[p]) · scale, o[h] = Σ a[p] value[h][p]
 * Both equal in exact arithmetic; in f32 they agree to ~1e-6 relative.
 * scale = 1/sqrt(n + r), times mscale² under YaRN (mscale = 0.1·mscale_all_dim·ln(factor) + 1, with
 * 0.1·mscale_all_dim held as one f32, config.h yarn_log_mult, so HF and GGUF compute the same bits).
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/ops.h"
#include "model/forward_impl.h"

static float *ea__fbuf(size_t n, int *ok) {
    float *p = ea_aligned_alloc(64, (n ? n : 1) * sizeof(float));
    if (!p) *ok = 0;
    return p;
}

ea_status ea__mla_create(ea_forward *f) {
    const ea_model_config *c = f->c;
    int H = c->n_heads, n = c->qk_nope_head_dim, r = c->qk_rope_head_dim, v = c->v_head_dim, C = c->kv_lora_rank;
    size_t T = (size_t)f->o.max_tokens;
    f->mla = 1;
    f->mla_expanded = f->o.mla_expanded;
    f->q_dim = H * (n + r);
    f->kv_dim = C + r;
    f->rot = r;
    f->attn_scale = 1.0f / sqrtf((float)(n + r));
    if (c->rope_scaling == EA_ROPE_YARN && c->yarn_log_mult > 0 && c->rope_factor > 1) {
        float m = c->yarn_log_mult * logf(c->rope_factor) + 1.0f;
        f->attn_scale *= m * m;
    }
    int ok = 1;
    if (c->q_lora_rank > 0) f->qa = ea__fbuf(T * c->q_lora_rank, &ok);
    f->mla_qabs = ea__fbuf((size_t)H * T * (C + r), &ok);
    f->mla_ctx = ea__fbuf((size_t)H * T * C, &ok);
    int tw = n > v ? n : v;
    f->mla_tmp = ea__fbuf(T * (size_t)(tw + C), &ok);
    f->mla_tok_of = ea_calloc(T, sizeof(int32_t));
    if (!f->mla_tok_of) ok = 0;
    if (f->mla_expanded) {
        f->mla_lat = ea__fbuf((size_t)f->o.max_ctx * C, &ok);
        f->mla_kv = ea__fbuf((size_t)f->o.max_ctx * H * (n + v), &ok);
    }
    f->mla_ukt = ea_calloc((size_t)c->n_layers, sizeof(float *));
    if (!ok || !f->mla_ukt) return ea_err(EA_ERR_NOMEM, "MLA buffers");
    /* W_UK transposed per head, f32: ukt[h][j][i] = wkv_b[h*(n+v) + i][j] */
    float *row = ea_malloc(sizeof(float) * (size_t)C);
    if (!row) return ea_err(EA_ERR_NOMEM, "MLA");
    for (int l = 0; l < c->n_layers; l++) {
        const ea_tensor *kvb = &f->m->layers[l].wkv_b;
        size_t rb = ea_dtype_row_bytes(kvb->dtype, (size_t)C);
        float *u = f->mla_ukt[l] = ea__fbuf((size_t)H * C * n, &ok);
        if (!ok) break;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++) {
                ea_dtypes[kvb->dtype].to_f32((const uint8_t *)kvb->data + (size_t)(h * (n + v) + i) * rb, row, (size_t)C);
                for (int j = 0; j < C; j++) u[((size_t)h * C + j) * n + i] = row[j];
            }
    }
    ea_free(row);
    return ok ? EA_OK : ea_err(EA_ERR_NOMEM, "MLA absorbed weights");
}

void ea__mla_destroy(ea_forward *f) {
    if (f->mla_ukt)
        for (int l = 0; l < f->c->n_layers; l++) ea_aligned_free(f->mla_ukt[l]);
    ea_free(f->mla_ukt);
    ea_aligned_free(f->qa);
    ea_aligned_free(f->mla_qabs);
    ea_aligned_free(f->mla_ctx);
    ea_aligned_free(f->mla_tmp);
    ea_aligned_free(f->mla_lat);
    ea_aligned_free(f->mla_kv);
    ea_free(f->mla_tok_of);
}

/* Expanded form, one (token of the current sequence, head). */
static void ea__mla_expanded_task(void *ctx, int task, int thread) {
    ea_forward *f = ctx;
    const ea_model_config *c = f->c;
    int H = c->n_heads, n = c->qk_nope_head_dim, r = c->qk_rope_head_dim, v = c->v_head_dim, C = c->kv_lora_rank;
    int t = f->mla_tok_of[task / H], h = task % H, p_end = f->run_pos[t], s = f->run_seq[t];
    const float *q = f->q + (size_t)t * f->q_dim + (size_t)h * (n + r);
    float *sc = f->scores + (size_t)thread * f->scores_per_thread;
    size_t kvw = (size_t)H * (n + v);
    for (int p = 0; p <= p_end; p++) {
        const float *kn = f->mla_kv + (size_t)p * kvw + (size_t)h * (n + v);
        float *kpe = sc + f->o.max_ctx; /* past the scores: the scratch holds 16 x (kv_dim + max_ctx) floats */
        ea_kv_get_k(f->kv, f->run_layer, s, p, C, r, kpe);
        sc[p] = (ea_k_dot_f32(q, kn, n) + ea_k_dot_f32(q + n, kpe, r)) * f->attn_scale;
    }
    ea_k_softmax(sc, p_end + 1);
    float *o = f->att + (size_t)t * H * v + (size_t)h * v;
    memset(o, 0, sizeof(float) * v);
    for (int p = 0; p <= p_end; p++) ea_k_axpy(sc[p], f->mla_kv + (size_t)p * kvw + (size_t)h * (n + v) + n, o, v);
}

static void ea__mla_expanded(ea_forward *f, const ea_layer_weights *L, int l, int n_tok) {
    const ea_model_config *c = f->c;
    int H = c->n_heads, n = c->qk_nope_head_dim, v = c->v_head_dim, C = c->kv_lora_rank;
    /* one sequence at a time, in order of first appearance */
    for (int t0 = 0; t0 < n_tok; t0++) {
        int s = f->run_seq[t0], seen = 0;
        for (int t = 0; t < t0; t++) seen |= f->run_seq[t] == s;
        if (seen) continue;
        int nt = 0, P = 0;
        for (int t = t0; t < n_tok; t++)
            if (f->run_seq[t] == s) {
                f->mla_tok_of[nt++] = t;
                if (f->run_pos[t] + 1 > P) P = f->run_pos[t] + 1;
            }
        for (int p = 0; p < P; p++) ea_kv_get_k(f->kv, l, s, p, 0, C, f->mla_lat + (size_t)p * C);
        for (int p0 = 0; p0 < P; p0 += f->o.max_tokens) {
            int m = P - p0 < f->o.max_tokens ? P - p0 : f->o.max_tokens;
            ea_k_matmul(f->kctx, &L->wkv_b, f->mla_lat + (size_t)p0 * C, m, f->mla_kv + (size_t)p0 * H * (n + v));
        }
        ea_pool_run(f->pool, ea__mla_expanded_task, f, nt * H);
    }
}

ea_status ea__mla_attention(ea_forward *f, int l, int n_tok) {
    const ea_model_config *c = f->c;
    const ea_layer_weights *L = &f->m->layers[l];
    const ea__layer_vecs *lv = &f->lv[l];
    int H = c->n_heads, n = c->qk_nope_head_dim, r = c->qk_rope_head_dim, v = c->v_head_dim, C = c->kv_lora_rank;
    size_t T = (size_t)f->o.max_tokens;

    if (c->q_lora_rank > 0) {
        ea_k_matmul(f->kctx, &L->wq_a, f->xn, n_tok, f->qa);
        for (int t = 0; t < n_tok; t++) {
            float *x = f->qa + (size_t)t * c->q_lora_rank;
            ea_k_rmsnorm(x, lv->q_a_norm, c->rms_norm_eps, c->q_lora_rank, x);
        }
        ea_k_matmul(f->kctx, &L->wq_b, f->qa, n_tok, f->q);
    } else {
        ea_k_matmul(f->kctx, &L->wq, f->xn, n_tok, f->q);
    }
    ea_k_matmul(f->kctx, &L->wkv_a, f->xn, n_tok, f->k);
    for (int t = 0; t < n_tok; t++) {
        if (f->run_pos[t] >= f->o.max_ctx)
            return ea_err(EA_ERR_RANGE, "position %d beyond the context of %d", f->run_pos[t], f->o.max_ctx);
        const float *cs = f->rope + (size_t)f->run_pos[t] * f->rot;
        float *ckv = f->k + (size_t)t * f->kv_dim;
        ea_k_rmsnorm(ckv, lv->kv_a_norm, c->rms_norm_eps, C, ckv);
        ea_k_rope_interleaved(ckv + C, r, cs);
        for (int h = 0; h < H; h++) ea_k_rope_interleaved(f->q + (size_t)t * f->q_dim + (size_t)h * (n + r) + n, r, cs);
        ea_kv_put(f->kv, l, f->run_seq[t], f->run_pos[t], ckv, NULL);
    }
    f->run_layer = l;

    if (f->mla_expanded) {
        ea__mla_expanded(f, L, l, n_tok);
    } else {
        for (int h = 0; h < H; h++) { /* q_abs[h] = [q_nope[h] · W_UK[h] | q_pe[h]], the query against [latent | k_pe] */
            for (int t = 0; t < n_tok; t++)
                memcpy(f->mla_tmp + (size_t)t * n, f->q + (size_t)t * f->q_dim + (size_t)h * (n + r), sizeof(float) * n);
            ea_tensor ukt = {.name = "w_uk_t", .dtype = EA_F32, .n_dims = 2, .shape = {C, n},
                             .data = f->mla_ukt[l] + (size_t)h * C * n, .nbytes = sizeof(float) * C * n};
            ea_k_matmul(f->kctx, &ukt, f->mla_tmp, n_tok, f->mla_tmp + (size_t)T * n);
            for (int t = 0; t < n_tok; t++) {
                float *qa = f->mla_qabs + ((size_t)h * T + t) * (C + r);
                memcpy(qa, f->mla_tmp + (size_t)T * n + (size_t)t * C, sizeof(float) * C);
                memcpy(qa + C, f->q + (size_t)t * f->q_dim + (size_t)h * (n + r) + n, sizeof(float) * r);
            }
        }
        ea__attn_io io = {.q = f->mla_qabs, .k = f->kv->k, .v = f->kv->k, .o = f->mla_ctx,
                          .q_ts = (size_t)(C + r), .q_hs = T * (C + r), .o_ts = (size_t)C, .o_hs = T * C,
                          .k_stride = (size_t)f->kv_dim, .v_stride = (size_t)f->kv_dim, /* one head: the latent */
                          .k_block = (size_t)f->kv->block_size * f->kv_dim, .v_block = (size_t)f->kv->block_size * f->kv_dim,
                          .dk = C + r, .dv = C, .group = H, .n_kv_heads = 1, .scale = f->attn_scale};
        ea__attend(f, l, n_tok, &io);
        for (int h = 0; h < H; h++) { /* o[h] = W_UV[h] · ctx[h] */
            ea_tensor uv = ea_tensor_row_view(&L->wkv_b, (int64_t)h * (n + v) + n, v);
            ea_k_matmul(f->kctx, &uv, f->mla_ctx + (size_t)h * T * C, n_tok, f->mla_tmp);
            for (int t = 0; t < n_tok; t++)
                memcpy(f->att + (size_t)t * H * v + (size_t)h * v, f->mla_tmp + (size_t)t * v, sizeof(float) * v);
        }
    }
    ea_k_matmul(f->kctx, &L->wo, f->att, n_tok, f->y);
    return EA_OK;
}
