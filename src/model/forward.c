/*
 * forward.c — the forward pass; see forward.h for the contract.
 *
 * Reading order: ea_forward_run() at the bottom is the whole data path; each
 * step it calls is a function above it, in the same order. All buffers are
 * allocated in ea_forward_create(), sized by max_tokens and max_ctx; a run
 * allocates nothing.
 *
 * Family differences live in small switches on the config: q/k norm (none,
 * per head, full width), qkv bias, shared expert and its sigmoid gate, dense
 * leading layers, routing rule (moe/router.h), MLA (deepseek; attention_mla).
 *
 * Buffer shapes (T = max_tokens, H = hidden, Q = n_heads*head_dim,
 * KV = n_kv_heads*head_dim, E = n_experts, K = top-k):
 *   h (T,H) residual stream      xn (T,H) normed input      y (T,H) block output
 *   q (T,Q)  k,v (T,KV)  att (T,Q)     rl (T,E) router logits
 *   ids (T,K) w (T,K)                  g,u (T,Fmax) dense/shared FFN
 *   scores (threads, attn scratch)     rope (max_ctx, rot) cos|sin per position
 */
#include "model/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "kernels/attn.h"
#include "kernels/deltanet.h"
#include "kernels/ops.h"
#include "moe/router.h"
#include "model/forward_impl.h"

/* ---------------------------------------------------------------- set-up */

static ea_status ea__vec_f32(const ea_tensor *t, float **out) {
    *out = NULL;
    if (!t->data) return EA_OK;
    int64_t n = ea_tensor_nelem(t);
    *out = ea_malloc((size_t)n * sizeof(float));
    if (!*out) return ea_err(EA_ERR_NOMEM, "%s", t->name ? t->name : "vector");
    ea_dtypes[t->dtype].to_f32(t->data, *out, (size_t)n);
    return EA_OK;
}

static double ea__yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0; }

/* inv_freq[i] for i < rot/2 under the config's rope scaling; returns the cos/sin factor. */
static double ea__rope_inv_freq(const ea_model_config *c, int rot, double *inv) {
    double base = c->rope_theta, factor = c->rope_factor > 0 ? c->rope_factor : 1.0;
    for (int i = 0; i < rot / 2; i++) inv[i] = 1.0 / pow(base, (double)(2 * i) / rot);
    switch (c->rope_scaling) {
    case EA_ROPE_NONE:
    case EA_ROPE_DYNAMIC: /* identical to none within the original context; see docs/decisions.md */
        return 1.0;
    case EA_ROPE_LINEAR:
        for (int i = 0; i < rot / 2; i++) inv[i] /= factor;
        return 1.0;
    case EA_ROPE_LLAMA3: {
        double old = c->rope_orig_max_pos, lf = c->llama3_low_freq_factor, hf = c->llama3_high_freq_factor;
        double low_wl = old / lf, high_wl = old / hf;
        for (int i = 0; i < rot / 2; i++) {
            double wl = 2 * M_PI / inv[i];
            if (wl > low_wl) {
                inv[i] /= factor;
            } else if (wl >= high_wl) {
                double s = (old / wl - lf) / (hf - lf);
                inv[i] = (1 - s) * inv[i] / factor + s * inv[i];
            }
        }
        return 1.0;
    }
    case EA_ROPE_YARN: {
        double orig = c->rope_orig_max_pos > 0 ? c->rope_orig_max_pos : c->max_position_embeddings;
        double bf = c->yarn_beta_fast > 0 ? c->yarn_beta_fast : 32, bs = c->yarn_beta_slow > 0 ? c->yarn_beta_slow : 1;
        double lo = floor(rot * log(orig / (bf * 2 * M_PI)) / (2 * log(base)));
        double hi = ceil(rot * log(orig / (bs * 2 * M_PI)) / (2 * log(base)));
        if (lo < 0) lo = 0;
        if (hi > rot - 1) hi = rot - 1;
        if (lo == hi) hi += 0.001;
        for (int i = 0; i < rot / 2; i++) {
            double ramp = (i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extrap = 1 - ramp;
            inv[i] = inv[i] / factor * (1 - extrap) + inv[i] * extrap;
        }
        if (c->yarn_attn_factor > 0) return c->yarn_attn_factor;
        if (c->yarn_mscale > 0 && c->yarn_mscale_all_dim > 0)
            return ea__yarn_mscale(factor, c->yarn_mscale) / ea__yarn_mscale(factor, c->yarn_mscale_all_dim);
        return ea__yarn_mscale(factor, 1.0);
    }
    }
    return 1.0;
}

static void ea__router_from_config(const ea_model_config *c, ea_router *r) {
    memset(r, 0, sizeof *r);
    r->n_experts = c->n_experts;
    r->k = c->n_experts_per_tok;
    r->scoring = c->scoring == EA_SCORE_SIGMOID ? EA_ROUTE_SIGMOID : EA_ROUTE_SOFTMAX;
    r->method = c->topk_method == EA_TOPK_NOAUX_TC        ? EA_ROUTE_GROUP_TOP2
                : c->topk_method == EA_TOPK_GROUP_LIMITED ? EA_ROUTE_GROUP_MAX
                                                          : EA_ROUTE_GREEDY;
    r->n_group = c->n_group > 0 ? c->n_group : 1;
    r->topk_group = c->topk_group > 0 ? c->topk_group : 1;
    r->norm_topk_prob = c->arch == EA_ARCH_MIXTRAL ? 1 : c->norm_topk_prob;
    r->scale = 1.0f;
    if (c->arch == EA_ARCH_DEEPSEEK_V2 || c->arch == EA_ARCH_DEEPSEEK_V3) {
        r->denom_eps = 1e-20f;
        /* V2 scales only when it does not normalise; V3 always scales. */
        if (c->arch == EA_ARCH_DEEPSEEK_V3 || !(r->norm_topk_prob && r->k > 1)) r->scale = c->routed_scaling_factor;
    }
}

int ea_forward_kv_layers(const ea_model_config *c) { return c->n_layers - c->n_linear_layers; }

/* Whether runs can go as two micro-batches (ea_forward_opts.dbo_min_tokens), with
 * tensor-parallel attention or not (tp), over a backend of `lanes` lanes. */
static ea_status ea__dbo_check(int tp, int lanes, const char *backend) {
    if (tp) return ea_err(EA_ERR_UNSUPPORTED, "double-batch overlap: not with tensor-parallel attention");
    if (lanes < 2)
        return ea_err(EA_ERR_UNSUPPORTED, "double-batch overlap needs a MoE backend that computes while attention "
                                          "runs (expert servers: --experts-remote); the %s backend has one lane",
                      backend);
    return EA_OK;
}

void ea_forward_kv_dims(const ea_model_config *c, const ea_forward_tp *tp, int *k_dim, int *v_dim, int *n_heads) {
    if (c->kv_lora_rank > 0) { /* one head: the latent and the rope part (tensor parallelism refuses MLA) */
        *k_dim = c->kv_lora_rank + c->qk_rope_head_dim;
        *v_dim = 0;
        *n_heads = 1;
    } else {
        *n_heads = tp ? tp->n_kv_heads : c->n_kv_heads;
        *k_dim = *n_heads * c->head_dim;
        *v_dim = *n_heads * c->head_dim;
    }
}

static void ea__window(ea_forward *f, int t0);

void ea_forward_destroy(ea_forward *f) {
    if (!f) return;
    if (f->rows.h) ea__window(f, 0); /* the allocations themselves */
    if (f->mla) ea__mla_destroy(f);
    if (f->dn_w || f->dn_x) ea__dn_destroy(f);
    if (f->lv) {
        for (int l = 0; l < f->c->n_layers; l++) {
            ea__layer_vecs *v = &f->lv[l];
            float *all[] = {v->attn_norm, v->ffn_norm, v->q_norm, v->k_norm, v->bq, v->bk, v->bv,
                            v->router_bias, v->q_a_norm, v->kv_a_norm};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ea_free(all[i]);
        }
        ea_free(f->lv);
    }
    float *bufs[] = {f->out_norm, f->rope, f->h, f->xn, f->y, f->q, f->k, f->v, f->att, f->rl, f->w, f->g,
                     f->u, f->sgate, f->route_scratch, f->scores, f->lm_x, f->qg, f->gate};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ea_aligned_free(bufs[i]);
    ea_free(f->ids);
    ea_free(f->outcome.tok_fail);
    ea_free(f->tiles);
    ea_free(f);
}

static float *ea__buf(size_t n_floats, int *ok) {
    float *p = ea_aligned_alloc(64, (n_floats ? n_floats : 1) * sizeof(float));
    if (!p) *ok = 0;
    return p;
}

ea_status ea_forward_create(const ea_model *m, ea_kctx *kctx, ea_pool *pool, ea_moe_backend *be,
                            ea_kv_cache *kv, const ea_forward_opts *o, ea_forward **out) {
    *out = NULL;
    const ea_model_config *c = &m->cfg;
    if (c->kv_lora_rank > 0 && c->arch != EA_ARCH_DEEPSEEK_V2 && c->arch != EA_ARCH_DEEPSEEK_V3)
        return ea_err(EA_ERR_UNSUPPORTED, "MLA outside the deepseek families");
    ea_forward *f = ea_calloc(1, sizeof *f);
    if (!f) return ea_err(EA_ERR_NOMEM, "forward");
    f->m = m;
    f->c = c;
    f->kctx = kctx;
    f->pool = pool;
    f->be = be;
    f->kv = kv;
    f->o = *o;
    f->n_threads = ea_pool_size(pool);
    ea__router_from_config(c, &f->router);
    f->nh = c->n_heads;
    f->nkv = c->n_kv_heads;
    if (o->tp) { /* tensor parallel: this rank's heads only (forward.h) */
        const ea_forward_tp *tp = o->tp;
        if (c->kv_lora_rank > 0 || c->qk_norm == EA_QKNORM_FULL) {
            ea_free(f);
            return ea_err(EA_ERR_UNSUPPORTED, "tensor parallel attention: %s is not split (%s)", ea_arch_names[c->arch],
                          c->kv_lora_rank > 0 ? "MLA" : "q/k norm over all heads");
        }
        if (tp->n_heads < 1 || tp->n_kv_heads < 1 || tp->head0 < 0 || tp->head0 + tp->n_heads > c->n_heads ||
            tp->kv_head0 < 0 || tp->kv_head0 + tp->n_kv_heads > c->n_kv_heads ||
            tp->n_heads * c->n_kv_heads != tp->n_kv_heads * c->n_heads ||
            tp->head0 / (c->n_heads / c->n_kv_heads) != tp->kv_head0) {
            ea_free(f);
            return ea_err(EA_ERR_INVALID_ARG, "tensor parallel: heads [%d, +%d) / KV heads [%d, +%d) of %d / %d",
                          tp->head0, tp->n_heads, tp->kv_head0, tp->n_kv_heads, c->n_heads, c->n_kv_heads);
        }
        f->nh = tp->n_heads;
        f->nkv = tp->n_kv_heads;
    }
    f->q_dim = f->nh * c->head_dim;
    f->kv_dim = f->nkv * c->head_dim;
    f->rot = c->rope_dim > 0 ? c->rope_dim : c->head_dim; /* partial rotary (qwen3_next: a quarter) */
    f->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    f->ffn_max = c->moe_intermediate_size;
    if (c->intermediate_size > f->ffn_max) f->ffn_max = c->intermediate_size;
    int shared_ff = c->shared_expert_intermediate_size + c->n_shared_experts * c->moe_intermediate_size;
    if (shared_ff > f->ffn_max) f->ffn_max = shared_ff;

    ea_status s = EA_OK;
    if (c->kv_lora_rank > 0) s = ea__mla_create(f); /* sets q_dim, kv_dim, rot, attn_scale */
    int kd, vd, kh;
    ea_forward_kv_dims(c, o->tp, &kd, &vd, &kh);
    if (s == EA_OK && kv && (kv->k_dim != kd || kv->v_dim != vd || kv->n_heads != kh))
        s = ea_err(EA_ERR_INVALID_ARG, "KV cache of key / value widths %d / %d in %d heads; this model needs %d / %d in %d",
                   kv->k_dim, kv->v_dim, kv->n_heads, kd, vd, kh);
    int att_dim = f->q_dim;
    if (f->mla && c->n_heads * c->v_head_dim > att_dim) att_dim = c->n_heads * c->v_head_dim;
    f->att_dim = att_dim;
    if (s == EA_OK) f->lv = ea_calloc((size_t)c->n_layers, sizeof *f->lv);
    if (s == EA_OK && !f->lv) s = ea_err(EA_ERR_NOMEM, "forward");
    for (int l = 0; s == EA_OK && f->lv && l < c->n_layers; l++) {
        const ea_layer_weights *L = &m->layers[l];
        ea__layer_vecs *v = &f->lv[l];
        if ((s = ea__vec_f32(&L->attn_norm, &v->attn_norm)) || (s = ea__vec_f32(&L->ffn_norm, &v->ffn_norm)) ||
            (s = ea__vec_f32(&L->q_norm, &v->q_norm)) || (s = ea__vec_f32(&L->k_norm, &v->k_norm)) ||
            (s = ea__vec_f32(&L->bq, &v->bq)) || (s = ea__vec_f32(&L->bk, &v->bk)) ||
            (s = ea__vec_f32(&L->bv, &v->bv)) || (s = ea__vec_f32(&L->router_bias, &v->router_bias)) ||
            (s = ea__vec_f32(&L->q_a_norm, &v->q_a_norm)) || (s = ea__vec_f32(&L->kv_a_norm, &v->kv_a_norm)))
            break;
    }
    if (s == EA_OK) s = ea__vec_f32(&m->out_norm, &f->out_norm);
    if (s == EA_OK && c->norm_one_plus) { /* the hybrids' RMSNorms scale by (1 + w): add the 1 once, in f32 */
        for (int l = 0; l < c->n_layers; l++) {
            float *vs[] = {f->lv[l].attn_norm, f->lv[l].ffn_norm, f->lv[l].q_norm, f->lv[l].k_norm};
            int lens[] = {c->hidden_size, c->hidden_size, c->head_dim, c->head_dim};
            for (int i = 0; i < 4; i++)
                for (int j = 0; vs[i] && j < lens[i]; j++) vs[i][j] += 1.0f;
        }
        for (int j = 0; j < c->hidden_size; j++) f->out_norm[j] += 1.0f;
    }
    for (int l = 0, kl = 0; l < c->n_layers; l++) f->kv_layer[l] = c->layer_is_linear[l] ? -1 : kl++;
    if (s == EA_OK && c->n_linear_layers > 0) s = ea__dn_create(f);

    int ok = 1;
    size_t T = (size_t)o->max_tokens, H = (size_t)c->hidden_size, E = (size_t)(c->n_experts > 0 ? c->n_experts : 1);
    size_t K = (size_t)(c->n_experts_per_tok > 0 ? c->n_experts_per_tok : 1);
    f->h = ea__buf(T * H, &ok);
    f->xn = ea__buf(T * H, &ok);
    f->y = ea__buf(T * H, &ok);
    f->q = ea__buf(T * f->q_dim, &ok);
    f->k = ea__buf(T * f->kv_dim, &ok);
    f->v = ea__buf(T * f->kv_dim, &ok);
    f->att = ea__buf(T * (size_t)att_dim, &ok);
    f->rl = ea__buf(T * E, &ok);
    f->w = ea__buf(T * K, &ok);
    f->g = ea__buf(T * f->ffn_max, &ok);
    f->u = ea__buf(T * f->ffn_max, &ok);
    f->sgate = ea__buf(T, &ok);
    f->route_scratch = ea__buf(T * 2 * E, &ok); /* per token, so tokens route in parallel */
    /* attention: a key width of q_dim/n_heads (MLA: latent + rope), tiles per KV head and sequence run */
    int n_kvh = f->mla ? 1 : f->nkv, group = f->mla ? c->n_heads : f->nh / f->nkv;
    int att_w = f->mla ? f->kv_dim : c->head_dim; /* key width, and a bound on the value's (MLA: the latent) */
    f->scores_per_thread = (ea_k_attend_scratch(att_w, att_w, o->max_ctx) + 15) & ~(size_t)15;
    f->scores = ea__buf((size_t)f->n_threads * f->scores_per_thread, &ok);
    f->max_tiles = n_kvh * (o->max_tokens * group / EA_K_ATTN_ROWS + o->max_tokens + 1);
    f->tiles = ea_calloc((size_t)f->max_tiles, sizeof *f->tiles);
    f->lm_x = ea__buf(T * H, &ok);
    if (c->attn_gate) {
        f->qg = ea__buf(T * 2 * (size_t)f->q_dim, &ok);
        f->gate = ea__buf(T * (size_t)f->q_dim, &ok);
    }
    f->rope = ea__buf((size_t)o->max_ctx * f->rot, &ok);
    f->ids = ea_calloc(T * K, sizeof(int32_t));
    f->outcome.tok_fail = ea_calloc(T, sizeof(int16_t));
    if (s == EA_OK && (!ok || !f->ids || !f->outcome.tok_fail || !f->tiles)) s = ea_err(EA_ERR_NOMEM, "forward buffers for %zu tokens", T);
    if (s == EA_OK && o->dbo_min_tokens > 0) s = ea__dbo_check(o->tp != NULL, ea_moe_lanes(be), be->vt->name);
    if (s != EA_OK) {
        ea_forward_destroy(f);
        return s;
    }
    f->rows.h = f->h, f->rows.xn = f->xn, f->rows.y = f->y, f->rows.q = f->q, f->rows.k = f->k, f->rows.v = f->v;
    f->rows.att = f->att, f->rows.rl = f->rl, f->rows.w = f->w, f->rows.g = f->g, f->rows.u = f->u;
    f->rows.sgate = f->sgate, f->rows.route_scratch = f->route_scratch, f->rows.qg = f->qg, f->rows.gate = f->gate;
    f->rows.ids = f->ids;

    double inv[512];
    if (f->rot / 2 > 512) {
        ea_forward_destroy(f);
        return ea_err(EA_ERR_UNSUPPORTED, "rotary dimension %d", f->rot);
    }
    double mscale = ea__rope_inv_freq(c, f->rot, inv);
    for (int p = 0; p < o->max_ctx; p++) {
        float *cs = f->rope + (size_t)p * f->rot;
        for (int i = 0; i < f->rot / 2; i++) {
            double a = (double)p * inv[i];
            cs[i] = (float)(cos(a) * mscale);
            cs[f->rot / 2 + i] = (float)(sin(a) * mscale);
        }
    }
    *out = f;
    return EA_OK;
}

/* ---------------------------------------------------------------- steps */

/* Row-wise steps run over the run's tokens: fn(f, t0, t1, arg) on contiguous
 * token ranges, split over the pool from 4 tokens on (a row's result never
 * depends on the split). A decode batch of 16 gains ~3% over splitting only
 * from 32 tokens: the other thread no longer waits through q/k-norm, RoPE,
 * the KV write, norms and residuals (docs/performance.md). */
typedef struct {
    ea_forward *f;
    ea__tok_fn fn;
    const void *arg;
} ea__tok_job;

static void ea__tok_range(void *ctx, int t0, int t1) {
    const ea__tok_job *j = ctx;
    j->fn(j->f, t0, t1, j->arg);
}

void ea__over_tokens(ea_forward *f, int n, ea__tok_fn fn, const void *arg) {
    ea__tok_job j = {f, fn, arg};
    ea_pool_run_ranges(f->pool, n, 4, ea__tok_range, &j);
}

static void ea__add_bias(float *x, const float *b, int n_rows, int dim) {
    if (!b) return;
    for (int t = 0; t < n_rows; t++)
        for (int i = 0; i < dim; i++) x[(size_t)t * dim + i] += b[i];
}

/* embed: h[t] = tok_embd[tokens[t]] */
static ea_status ea__embed(ea_forward *f, int n, const int32_t *tokens) {
    const ea_tensor *e = &f->m->tok_embd;
    int H = f->c->hidden_size;
    size_t row = ea_dtype_row_bytes(e->dtype, (size_t)H);
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= f->c->vocab_size)
            return ea_err(EA_ERR_RANGE, "token id %d outside the vocabulary of %d", tokens[t], f->c->vocab_size);
        ea_dtypes[e->dtype].to_f32((const uint8_t *)e->data + (size_t)tokens[t] * row, f->h + (size_t)t * H, (size_t)H);
    }
    return EA_OK;
}

/* xn = rmsnorm(h) with weight w, per token */
static void ea__norm_task(ea_forward *f, int t0, int t1, const void *w) {
    int H = f->c->hidden_size;
    for (int t = t0; t < t1; t++) ea_k_rmsnorm(f->h + (size_t)t * H, w, f->c->rms_norm_eps, H, f->xn + (size_t)t * H);
}

static void ea__norm_rows(ea_forward *f, int n, const float *w) { ea__over_tokens(f, n, ea__norm_task, w); }

/* Tile tl's rows (queries, outputs, last positions) and its view of the current layer's KV cache. */
static void ea__tile_kv(const ea_forward *f, const ea__attn_tile *tl, const float **q, float **o, int32_t *last,
                        ea_k_attn_kv *a) {
    const ea__attn_io *io = &f->att_io;
    for (int i = 0; i < tl->n_rows; i++) {
        int row = tl->row0 + i, t = tl->t0 + row / io->group, h = tl->kvh * io->group + row % io->group;
        if (q) q[i] = io->q + (size_t)t * io->q_ts + (size_t)h * io->q_hs;
        if (o) o[i] = io->o + (size_t)t * io->o_ts + (size_t)h * io->o_hs;
        last[i] = f->run_pos[t];
    }
    const ea_kv_cache *kv = f->kv;
    size_t layer_blocks = (size_t)f->run_layer * kv->n_blocks;
    *a = (ea_k_attn_kv){.dk = io->dk,
                        .dv = io->dv,
                        .scale = io->scale,
                        .dtype = kv->dtype,
                        .k = io->k + (layer_blocks * io->k_block + (size_t)tl->kvh * io->k_hs) * kv->esz,
                        .v = io->v + (layer_blocks * io->v_block + (size_t)tl->kvh * io->v_hs) * kv->esz,
                        .k_stride = io->k_stride,
                        .v_stride = io->v_stride,
                        .k_block = io->k_block,
                        .v_block = io->v_block,
                        .blocks = kv->tables + (size_t)f->run_seq[tl->t0] * kv->max_blocks_per_seq,
                        .block_size = kv->block_size};
}

/* One tile of attention (kernels/attn.h) against the current layer's KV cache.
 * The pool hands a thread tasks task, task + n_threads, ...: while this tile
 * runs, the keys and values of the first 64 positions of the thread's next
 * tile are fetched. Decode tiles are small and would otherwise wait on their
 * cache rows, written steps ago: attention per decode step 2.6 -> 2.1 ms at
 * batch 16, 11.5 -> 8.8 ms at batch 64 (bench model, docs/performance.md). */
static void ea__attn_tile_task(void *ctx, int task, int thread) {
    ea_forward *f = ctx;
    const float *q[EA_K_ATTN_ROWS];
    float *o[EA_K_ATTN_ROWS];
    int32_t last[EA_K_ATTN_ROWS];
    ea_k_attn_kv a;
    int next = task + ea_pool_size(f->pool);
    if (next < f->n_tiles) {
        ea__tile_kv(f, &f->tiles[next], NULL, NULL, last, &a);
        ea_k_attend_prefetch(&a, f->tiles[next].n_rows, last);
    }
    const ea__attn_tile *tl = &f->tiles[task];
    ea__tile_kv(f, tl, q, o, last, &a);
    ea_k_attend(&a, tl->n_rows, q, last, o, f->scores + (size_t)thread * f->scores_per_thread);
}

/* Phase clocks (ea_forward_set_times): t = ea__tick(f) before a phase,
 * ea__tock(f, phase, t, outer) after; both do nothing unless a place to add
 * to was given. A phase inside another (attend inside attention) moves its
 * seconds out of the outer one. */
static double ea__tick(const ea_forward *f) { return f->times ? ea_now_s() : 0.0; }

static void ea__tock(ea_forward *f, int phase, double t0, int outer) {
    if (!f->times) return;
    double dt = ea_now_s() - t0;
    f->times->s[phase] += dt;
    if (outer >= 0) f->times->s[outer] -= dt;
}

void ea_forward_set_times(ea_forward *f, ea_forward_times *t) { f->times = t; }

/* Causal attention of the run's n tokens for layer l (whose K/V are in the
 * cache already): tiles of up to 16 rows — per KV head, the heads of its group
 * at consecutive tokens of one sequence — run over the pool. */
void ea__attend(ea_forward *f, int l, int n, const ea__attn_io *io) {
    int nt = 0;
    for (int g = 0; g < io->n_kv_heads; g++)
        for (int t0 = 0; t0 < n;) {
            int t1 = t0 + 1;
            while (t1 < n && f->run_seq[t1] == f->run_seq[t0]) t1++;
            for (int row = 0, rows = (t1 - t0) * io->group; row < rows; row += EA_K_ATTN_ROWS) {
                EA_ASSERT(nt < f->max_tiles);
                f->tiles[nt++] = (ea__attn_tile){g, t0, row, rows - row < EA_K_ATTN_ROWS ? rows - row : EA_K_ATTN_ROWS};
            }
            t0 = t1;
        }
    f->n_tiles = nt;
    f->att_io = *io;
    f->run_layer = l;
    double t0 = ea__tick(f);
    ea_pool_run(f->pool, ea__attn_tile_task, f, nt);
    ea__tock(f, EA_PHASE_ATTEND, t0, EA_PHASE_ATTENTION);
}

/* Per token of layer run_layer: q/k norm, RoPE, and k, v into the KV cache. */
static void ea__qk_rope_store(ea_forward *f, int t0, int t1, const void *lv) {
    const ea_model_config *c = f->c;
    const ea__layer_vecs *v = lv;
    int hd = c->head_dim, l = f->run_layer;
    for (int t = t0; t < t1; t++) {
        float *q = f->q + (size_t)t * f->q_dim, *k = f->k + (size_t)t * f->kv_dim;
        if (c->qk_norm == EA_QKNORM_FULL) {
            ea_k_rmsnorm(q, v->q_norm, c->rms_norm_eps, f->q_dim, q);
            ea_k_rmsnorm(k, v->k_norm, c->rms_norm_eps, f->kv_dim, k);
        } else if (c->qk_norm == EA_QKNORM_PER_HEAD) {
            for (int h = 0; h < f->nh; h++) ea_k_rmsnorm(q + h * hd, v->q_norm, c->rms_norm_eps, hd, q + h * hd);
            for (int h = 0; h < f->nkv; h++) ea_k_rmsnorm(k + h * hd, v->k_norm, c->rms_norm_eps, hd, k + h * hd);
        }
        const float *cs = f->rope + (size_t)f->run_pos[t] * f->rot;
        for (int h = 0; h < f->nh; h++) ea_k_rope_half(q + h * hd, f->rot, cs);
        for (int h = 0; h < f->nkv; h++) ea_k_rope_half(k + h * hd, f->rot, cs);
        ea_kv_put(f->kv, l, f->run_seq[t], f->run_pos[t], k, f->v + (size_t)t * f->kv_dim);
    }
}

/* attention: y = wo · attend(rope(qk_norm(wq·xn + bq)), rope(...k...), v) */
static ea_status ea__attention(ea_forward *f, int l, int n) {
    const ea_model_config *c = f->c;
    const ea_layer_weights *L = &f->m->layers[l];
    const ea__layer_vecs *v = &f->lv[l];
    const ea_forward_tp *tp = f->o.tp;
    const ea_forward_tp_layer *tl = tp ? &tp->layers[l] : NULL;
    int hd = c->head_dim;
    size_t qo = tp ? (size_t)tp->head0 * hd : 0, ko = tp ? (size_t)tp->kv_head0 * hd : 0; /* bias offsets */
    ea_k_mm qkv[3] = {{tl ? &tl->wq : &L->wq, f->xn, n, c->attn_gate ? f->qg : f->q},
                      {tl ? &tl->wk : &L->wk, f->xn, n, f->k}, {tl ? &tl->wv : &L->wv, f->xn, n, f->v}};
    ea_k_matmul_batch(f->kctx, qkv, 3); /* one pass over the pool; xn prepared once */
    if (c->attn_gate) /* q_proj rows per head: [query | gate] */
        for (int t = 0; t < n; t++)
            for (int h = 0; h < f->nh; h++) {
                const float *src = f->qg + (size_t)t * 2 * f->q_dim + (size_t)h * 2 * hd;
                memcpy(f->q + (size_t)t * f->q_dim + (size_t)h * hd, src, sizeof(float) * (size_t)hd);
                memcpy(f->gate + (size_t)t * f->q_dim + (size_t)h * hd, src + hd, sizeof(float) * (size_t)hd);
            }
    ea__add_bias(f->q, v->bq ? v->bq + qo : NULL, n, f->q_dim);
    ea__add_bias(f->k, v->bk ? v->bk + ko : NULL, n, f->kv_dim);
    ea__add_bias(f->v, v->bv ? v->bv + ko : NULL, n, f->kv_dim);
    for (int t = 0; t < n; t++)
        if (f->run_pos[t] >= f->o.max_ctx)
            return ea_err(EA_ERR_RANGE, "position %d beyond the context of %d", f->run_pos[t], f->o.max_ctx);
    int kvl = f->kv_layer[l]; /* the KV cache holds the attention layers only */
    f->run_layer = kvl;
    ea__over_tokens(f, n, ea__qk_rope_store, v);
    const ea_kv_cache *kv = f->kv;
    size_t bs = (size_t)kv->block_size; /* a block keeps each head's rows together (model/kv_cache.h) */
    ea__attn_io io = {.q = f->q, .k = kv->k, .v = kv->v, .o = f->att,
                      .q_ts = (size_t)f->q_dim, .q_hs = (size_t)hd, .o_ts = (size_t)f->q_dim, .o_hs = (size_t)hd,
                      .k_hs = bs * hd, .v_hs = bs * hd, .k_stride = (size_t)hd, .v_stride = (size_t)hd,
                      .k_block = bs * kv->k_dim, .v_block = bs * kv->v_dim,
                      .dk = hd, .dv = hd, .group = f->nh / f->nkv, .n_kv_heads = f->nkv, .scale = f->attn_scale};
    ea__attend(f, kvl, n, &io);
    if (c->attn_gate) /* o = attn · sigmoid(gate), before o_proj */
        for (size_t i = 0; i < (size_t)n * f->q_dim; i++) f->att[i] *= 1.0f / (1.0f + expf(-f->gate[i]));
    ea_k_matmul(f->kctx, tl ? &tl->wo : &L->wo, f->att, n, f->y);
    if (tp) EA_TRY(tp->allreduce(tp->ctx, f->y, (size_t)n * c->hidden_size, l)); /* sum of the ranks' heads */
    return EA_OK;
}

/* A SiLU-gated FFN over n rows of xn, result in out (n, H). */
static void ea__ffn(ea_forward *f, const ea_ffn_weights *w, int n, float *out) {
    int ff = (int)w->gate.shape[0];
    ea_k_matmul(f->kctx, &w->gate, f->xn, n, f->g);
    ea_k_matmul(f->kctx, &w->up, f->xn, n, f->u);
    for (int t = 0; t < n; t++) ea_k_silu_mul(f->g + (size_t)t * ff, f->u + (size_t)t * ff, ff);
    ea_k_matmul(f->kctx, &w->down, f->g, n, out);
}

/* Routing of tokens [t0, t1) from their router logits (rl) into ids/w; arg: the layer's router. */
static void ea__route_task(ea_forward *f, int t0, int t1, const void *arg) {
    const ea_router *r = arg;
    int E = f->c->n_experts, K = f->c->n_experts_per_tok;
    for (int t = t0; t < t1; t++)
        ea_route_token(r, f->rl + (size_t)t * E, f->ids + (size_t)t * K, f->w + (size_t)t * K,
                       f->route_scratch + (size_t)t * 2 * E);
}

/* moe, first half: ids, w = route(router · xn); the backend starts
 * y = experts(xn) on micro-batch `lane`'s call; the shared expert runs
 * meanwhile (into att, free at this point; its gate into sgate). */
static ea_status ea__moe_submit(ea_forward *f, int l, int n, int lane) {
    const ea_model_config *c = f->c;
    const ea_layer_weights *L = &f->m->layers[l];
    ea_kctx *kr = f->o.kctx_router ? f->o.kctx_router : f->kctx;
    double t0 = ea__tick(f);
    ea_k_matmul(kr, &L->router, f->xn, n, f->rl);
    ea_router r = f->router;
    r.bias = f->lv[l].router_bias;
    ea__over_tokens(f, n, ea__route_task, &r);
    ea__tock(f, EA_PHASE_ROUTER, t0, -1);
    t0 = ea__tick(f);
    ea_moe_call *call = &f->mb_call[lane];
    *call = (ea_moe_call){.layer = l, .lane = lane, .x = f->xn, .n_tokens = n, .k = c->n_experts_per_tok,
                          .ids = f->ids, .w = f->w, .y = f->y};
    EA_TRY(ea_moe_submit(f->be, call));
    f->mb_busy[lane] = 1;
    if (L->shared.gate.data) {
        ea__ffn(f, &L->shared, n, f->att);
        if (L->shared_gate.data) ea_k_matmul(kr, &L->shared_gate, f->xn, n, f->sgate);
    }
    ea__tock(f, EA_PHASE_EXPERTS, t0, -1);
    return EA_OK;
}

/* moe, second half: y = the backend's result (+ the shared expert, gated for
 * qwen2_moe). Tokens whose experts could not run are marked in f->outcome
 * (moe.h), at their rows of the whole run (t0: the micro-batch's first). */
static ea_status ea__moe_wait(ea_forward *f, int lane, int t0) {
    const ea_moe_call *call = &f->mb_call[lane];
    const ea_layer_weights *L = &f->m->layers[call->layer];
    int n = call->n_tokens, H = f->c->hidden_size;
    f->mb_busy[lane] = 0; /* no longer in flight, whatever wait answers */
    f->outcome.t0 = t0;
    double tw = ea__tick(f);
    ea_status st = ea_moe_wait(f->be, call, &f->outcome);
    ea__tock(f, EA_PHASE_EXPERTS, tw, -1);
    f->outcome.t0 = 0;
    EA_TRY(st);
    if (L->shared.gate.data) {
        for (int t = 0; t < n; t++) {
            float gsc = L->shared_gate.data ? ea_k_sigmoid(f->sgate[t]) : 1.0f;
            float *y = f->y + (size_t)t * H;
            const float *s = f->att + (size_t)t * H;
            if (L->shared_gate.data)
                for (int i = 0; i < H; i++) y[i] += gsc * s[i];
            else
                for (int i = 0; i < H; i++) y[i] += s[i];
        }
    }
    return EA_OK;
}

/* h += y, per token */
static void ea__residual_task(ea_forward *f, int t0, int t1, const void *arg) {
    (void)arg;
    size_t H = (size_t)f->c->hidden_size;
    for (size_t i = (size_t)t0 * H; i < (size_t)t1 * H; i++) f->h[i] += f->y[i];
}

static void ea__residual(ea_forward *f, int n) { ea__over_tokens(f, n, ea__residual_task, NULL); }

/* ---------------------------------------------------------------- micro-batches */

/* One micro-batch: tokens [t0, t0 + n) of the run, its MoE calls on `lane`. */
typedef struct {
    int t0, n, lane;
} ea__mb;

/* Points the per-token buffers and run_pos/run_seq at token t0 (forward_impl.h). */
static void ea__window(ea_forward *f, int t0) {
    const ea_model_config *c = f->c;
    size_t t = (size_t)t0, H = (size_t)c->hidden_size, E = (size_t)(c->n_experts > 0 ? c->n_experts : 1);
    size_t K = (size_t)(c->n_experts_per_tok > 0 ? c->n_experts_per_tok : 1), F = (size_t)f->ffn_max;
    f->h = f->rows.h + t * H, f->xn = f->rows.xn + t * H, f->y = f->rows.y + t * H;
    f->q = f->rows.q + t * f->q_dim, f->k = f->rows.k + t * f->kv_dim, f->v = f->rows.v + t * f->kv_dim;
    f->att = f->rows.att + t * f->att_dim, f->rl = f->rows.rl + t * E, f->w = f->rows.w + t * K;
    f->ids = f->rows.ids + t * K, f->g = f->rows.g + t * F, f->u = f->rows.u + t * F, f->sgate = f->rows.sgate + t;
    f->route_scratch = f->rows.route_scratch + t * 2 * E;
    if (f->rows.qg) f->qg = f->rows.qg + t * 2 * f->q_dim, f->gate = f->rows.gate + t * f->q_dim;
    if (f->rows.pos) f->run_pos = f->rows.pos + t, f->run_seq = f->rows.seq + t;
}

/* Token t may start micro-batch B: a sequence boundary, or inside a sequence
 * (its earlier tokens in A) — with DeltaNet layers only where a chunk of the
 * delta rule starts (a multiple of 64), so that the pieces are the same. */
static int ea__cut_ok(const ea_forward *f, int t, int inside) {
    if (f->rows.seq[t] != f->rows.seq[t - 1]) return !inside;
    return inside && (f->c->n_linear_layers == 0 || f->rows.pos[t] % EA_K_DELTA_CHUNK == 0);
}

/* How the run splits: with overlap on and a run long enough, two
 * micro-batches — at the sequence boundary nearest the middle if one lies in
 * the middle half, else at the allowed cut inside a sequence nearest the
 * middle (a long prompt alone). A sequence cut in two keeps its earlier tokens
 * in A: at every layer A's attention writes their KV rows (A's DeltaNet
 * layers advance their state) before B's run (ea__layers). Returns the number
 * of micro-batches. */
static int ea__split(const ea_forward *f, int n, ea__mb mb[2]) {
    mb[0] = (ea__mb){0, n, 0};
    if (f->o.dbo_min_tokens <= 0 || n < f->o.dbo_min_tokens || n < 2) return 1;
    int cut = 0;
    for (int inside = 0; inside < 2 && (cut == 0 || abs(2 * cut - n) > n / 2); inside++)
        for (int t = 1; t < n; t++)
            if (ea__cut_ok(f, t, inside) && (cut == 0 || abs(2 * t - n) < abs(2 * cut - n))) cut = t;
    if (cut == 0) return 1;
    mb[0].n = cut;
    mb[1] = (ea__mb){cut, n - cut, 1};
    return 2;
}

/* Layer l of a micro-batch up to its MoE call, which stays in flight:
 * attention (or DeltaNet), residual, norm, then the routed experts submitted
 * (ea__layer_end collects them) — or, for a dense layer, the whole layer. */
static ea_status ea__layer_begin(ea_forward *f, int l, const ea__mb *mb) {
    const ea_model_config *c = f->c;
    int n = mb->n;
    ea__norm_rows(f, n, f->lv[l].attn_norm);
    double t0 = ea__tick(f);
    if (c->layer_is_linear[l])
        EA_TRY(ea__deltanet(f, l, n));
    else
        EA_TRY(f->mla ? ea__mla_attention(f, l, n) : ea__attention(f, l, n));
    ea__tock(f, EA_PHASE_ATTENTION, t0, -1);
    ea__residual(f, n);
    ea__norm_rows(f, n, f->lv[l].ffn_norm);
    if (c->layer_is_moe[l]) return ea__moe_submit(f, l, n, mb->lane);
    ea__ffn(f, &f->m->layers[l].dense, n, f->y);
    ea__residual(f, n);
    return EA_OK;
}

/* The rest of a micro-batch's layer: its MoE call's result, residual. */
static ea_status ea__layer_end(ea_forward *f, const ea__mb *mb) {
    if (!f->mb_busy[mb->lane]) return EA_OK;
    EA_TRY(ea__moe_wait(f, mb->lane, mb->t0));
    ea__residual(f, mb->n);
    return EA_OK;
}

/* Every layer of the run. With two micro-batches A and B, layer l runs as
 *   end(A, l-1)  begin(A, l)  end(B, l-1)  begin(B, l)
 * so B's attention runs while A's experts are computed elsewhere, and A's
 * attention of the next layer while B's are; with one, begin and end alternate.
 * Every token sees the same operations either way (the kernels are batch
 * invariant), so the bits do not depend on the split. */
static ea_status ea__layers(ea_forward *f, const ea__mb *mb, int n_mb) {
    for (int l = 0; l < f->c->n_layers; l++)
        for (int i = 0; i < n_mb; i++) {
            ea__window(f, mb[i].t0);
            EA_TRY(ea__layer_end(f, &mb[i]));
            EA_TRY(ea__layer_begin(f, l, &mb[i]));
        }
    for (int i = 0; i < n_mb; i++) {
        ea__window(f, mb[i].t0);
        EA_TRY(ea__layer_end(f, &mb[i]));
    }
    return EA_OK;
}

static ea_status ea__run(ea_forward *f, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                         int n_out, const int32_t *out_rows, float *logits);

ea_status ea_forward_run(ea_forward *f, int n, const int32_t *tokens, const int32_t *pos,
                         const int32_t *seq, int n_out, const int32_t *out_rows, float *logits) {
    double t0 = ea__tick(f);
    ea_status s = ea__run(f, n, tokens, pos, seq, n_out, out_rows, logits);
    if (f->times) f->times->total += ea_now_s() - t0; /* not a phase: the phases are parts of it */
    return s;
}

static ea_status ea__run(ea_forward *f, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                         int n_out, const int32_t *out_rows, float *logits) {
    const ea_model_config *c = f->c;
    int H = c->hidden_size;
    if (n <= 0 || n > f->o.max_tokens)
        return ea_err(EA_ERR_RANGE, "batch of %d tokens (limit %d)", n, f->o.max_tokens);
    f->run_n = n;
    f->rows.pos = pos;
    f->rows.seq = seq;
    ea__window(f, 0);
    ea_moe_outcome_clear(&f->outcome, n);
    for (int i = 0; i < EA_MOE_MAX_LANES; i++) f->mb_busy[i] = 0;

    EA_TRY(ea__embed(f, n, tokens));
    if (c->n_linear_layers > 0) EA_TRY(ea__dn_begin(f, n));
    ea__mb mb[2];
    int n_mb = ea__split(f, n, mb);
    ea_status s = ea__layers(f, mb, n_mb);
    if (s != EA_OK) { /* a call still in flight is collected (its lane free again); the first error stands */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ea_errmsg());
        for (int i = 0; i < n_mb; i++)
            if (f->mb_busy[mb[i].lane]) {
                ea__window(f, mb[i].t0);
                (void)ea__moe_wait(f, mb[i].lane, mb[i].t0);
            }
        ea__window(f, 0);
        return ea_err(s, "%s", msg);
    }
    ea__window(f, 0);
    if (c->n_linear_layers > 0) ea__dn_end(f, n);

    double t0 = ea__tick(f);
    for (int i = 0; i < n_out; i++) {
        if (out_rows[i] < 0 || out_rows[i] >= n) return ea_err(EA_ERR_RANGE, "logits row %d of %d", out_rows[i], n);
        ea_k_rmsnorm(f->h + (size_t)out_rows[i] * H, f->out_norm, c->rms_norm_eps, H, f->lm_x + (size_t)i * H);
    }
    if (n_out > 0) ea_k_matmul(f->kctx, &f->m->lm_head, f->lm_x, n_out, logits);
    ea__tock(f, EA_PHASE_LM_HEAD, t0, -1);
    return EA_OK;
}

ea_status ea_forward_run_empty(ea_forward *f) {
    const ea_model_config *c = f->c;
    f->run_n = 0;
    ea__window(f, 0);
    ea_moe_outcome_clear(&f->outcome, 0);
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->layer_is_moe[l]) continue;
        ea_moe_call call = {.layer = l, .x = f->xn, .n_tokens = 0, .k = c->n_experts_per_tok, .ids = f->ids,
                            .w = f->w, .y = f->y};
        EA_TRY(ea_moe_forward(f->be, &call, &f->outcome));
    }
    return EA_OK;
}

const ea_moe_outcome *ea_forward_outcome(const ea_forward *f) { return &f->outcome; }
