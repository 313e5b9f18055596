/*
 * tp.c — tensor parallelism; see tp.h.
 *
 * Column slices: a row-major (rows, cols) tensor's columns [c0, c0+nc) are not
 * one view, so they are copied once at set-up into an owned buffer
 * (rows, nc): row i's bytes [row_bytes(c0), row_bytes(c0+nc)) of the source
 * row. For block dtypes (q8_0) c0 and nc must be whole blocks — checked.
 * Row slices (wq/wk/wv heads, expert gate/up columns) are plain views into the
 * model's mapping.
 *
 * The MoE backend wraps a local backend over the sliced experts (ff/N wide):
 * y_r = sum_j w_j * down_r(silu(gate_r x) * up_r x), then y = sum over ranks.
 */
#include "ep/tp.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "moe/moe_local.h"

struct ea_tp {
    ea_dist *d;
    int hidden;
    ea_forward_tp fwd;
    ea_forward_tp_layer *layers; /* owns the array; wo data in `owned` */
    ea_ffn_weights *experts;     /* owns: (n_layers, n_experts) sliced views; down data in `owned` */
    void **owned;                /* owns each: column-slice copies */
    int n_owned;
    size_t owned_bytes;
    ea_moe_backend *be;          /* owns until taken */
};

typedef struct {
    ea_moe_backend base;
    ea_moe_backend *local; /* owns */
    ea_dist *d;
    int hidden;
} ea__tp_moe;

/* this rank's column slices of every expert, then the sum over ranks: all in submit */
static ea_status ea__tp_moe_submit(ea_moe_backend *be, const ea_moe_call *c) {
    ea__tp_moe *T = (ea__tp_moe *)be;
    EA_TRY(ea_moe_forward(T->local, c, NULL));
    char what[48];
    snprintf(what, sizeof what, "layer %d moe all-reduce", c->layer);
    return ea_dist_allreduce_sum_f32(T->d, c->y, (size_t)c->n_tokens * T->hidden, what);
}

static ea_status ea__tp_moe_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    (void)be, (void)c, (void)out;
    return EA_OK;
}

static ea_moe_health ea__tp_moe_health(ea_moe_backend *be, char *why, size_t n) {
    ea__tp_moe *T = (ea__tp_moe *)be;
    if (ea_dist_healthy(T->d)) return EA_MOE_OK;
    snprintf(why, n, "%s", ea_dist_error(T->d));
    return EA_MOE_FAILED;
}

static void ea__tp_moe_destroy(ea_moe_backend *be) {
    ea__tp_moe *T = (ea__tp_moe *)be;
    if (!T) return;
    ea_moe_backend_destroy(T->local);
    ea_free(T);
}

static const ea_moe_backend_vtable ea__tp_moe_vt = {.submit = ea__tp_moe_submit,
                                                    .wait = ea__tp_moe_wait,
                                                    .health = ea__tp_moe_health,
                                                    .destroy = ea__tp_moe_destroy,
                                                    .name = "tensor"};

static ea_status ea__tp_allreduce(void *ctx, float *buf, size_t n, int layer) {
    char what[48];
    snprintf(what, sizeof what, "layer %d attention all-reduce", layer);
    return ea_dist_allreduce_sum_f32(ctx, buf, n, what);
}

static ea_status ea__col_copy(ea_tp *tp, const ea_tensor *t, int64_t c0, int64_t nc, ea_tensor *out) {
    size_t full = ea_dtype_row_bytes(t->dtype, (size_t)t->shape[1]);
    size_t off = ea_dtype_row_bytes(t->dtype, (size_t)c0), nb = ea_dtype_row_bytes(t->dtype, (size_t)nc);
    if ((c0 && !off) || !nb || !full)
        return ea_err(EA_ERR_UNSUPPORTED, "--parallel tensor: %s columns [%lld, +%lld) are not whole %s blocks",
                      t->name ? t->name : "weight", (long long)c0, (long long)nc, ea_dtypes[t->dtype].name);
    size_t rows = (size_t)t->shape[0];
    uint8_t *buf = ea_aligned_alloc(64, rows * nb);
    void **grown = ea_realloc(tp->owned, sizeof(void *) * (size_t)(tp->n_owned + 1));
    if (!buf || !grown) {
        ea_aligned_free(buf);
        if (grown) tp->owned = grown;
        return ea_err(EA_ERR_NOMEM, "tensor-parallel slice of %s", t->name ? t->name : "weight");
    }
    tp->owned = grown;
    tp->owned[tp->n_owned++] = buf;
    for (size_t i = 0; i < rows; i++) memcpy(buf + i * nb, (const uint8_t *)t->data + i * full + off, nb);
    *out = *t;
    out->shape[1] = nc;
    out->data = buf;
    out->packed = NULL; /* a copy of the whole matrix's rows would be the wrong columns */
    out->packed_rows = 0;
    out->nbytes = rows * nb;
    tp->owned_bytes += rows * nb;
    return EA_OK;
}

void ea_tp_destroy(ea_tp *tp) {
    if (!tp) return;
    ea_moe_backend_destroy(tp->be);
    for (int i = 0; i < tp->n_owned; i++) ea_aligned_free(tp->owned[i]);
    ea_free(tp->owned);
    ea_free(tp->layers);
    ea_free(tp->experts);
    ea_free(tp);
}

ea_status ea_tp_create(ea_dist *d, const ea_model *m, ea_kctx *kctx, int max_tokens, ea_tp **out) {
    *out = NULL;
    const ea_model_config *c = &m->cfg;
    int N = ea_dist_size(d), r = ea_dist_rank(d);
    if (c->kv_lora_rank > 0)
        return ea_err(EA_ERR_UNSUPPORTED, "--parallel tensor: %s uses MLA, whose heads are not split here; use --parallel expert",
                      ea_arch_names[c->arch]);
    if (c->qk_norm == EA_QKNORM_FULL)
        return ea_err(EA_ERR_UNSUPPORTED,
                      "--parallel tensor: %s normalises q/k over all heads at once, which is not split here; use --parallel expert",
                      ea_arch_names[c->arch]);
    if (c->n_heads % N || c->n_kv_heads % N)
        return ea_err(EA_ERR_INVALID_ARG, "--parallel tensor: %d attention heads / %d KV heads do not split over %d ranks",
                      c->n_heads, c->n_kv_heads, N);
    int ff = c->moe_intermediate_size;
    if (c->n_experts > 0 && ff % N)
        return ea_err(EA_ERR_INVALID_ARG, "--parallel tensor: expert FFN width %d does not split over %d ranks", ff, N);
    ea_tp *tp = ea_calloc(1, sizeof *tp);
    if (!tp) return ea_err(EA_ERR_NOMEM, "tensor parallel");
    tp->d = d;
    tp->hidden = c->hidden_size;
    int nh = c->n_heads / N, nkv = c->n_kv_heads / N, hd = c->head_dim, fr = ff / N;
    tp->fwd = (ea_forward_tp){.rank = r, .size = N, .head0 = r * nh, .n_heads = nh, .kv_head0 = r * nkv,
                              .n_kv_heads = nkv, .allreduce = ea__tp_allreduce, .ctx = d};
    tp->layers = ea_calloc((size_t)c->n_layers, sizeof *tp->layers);
    size_t S = (size_t)(c->n_experts > 0 ? c->n_experts : 1);
    tp->experts = ea_calloc((size_t)c->n_layers * S, sizeof *tp->experts);
    ea_ffn_weights **per_layer = ea_calloc((size_t)c->n_layers, sizeof *per_layer);
    ea_status s = (!tp->layers || !tp->experts || !per_layer) ? ea_err(EA_ERR_NOMEM, "tensor parallel") : EA_OK;
    for (int l = 0; s == EA_OK && l < c->n_layers; l++) {
        const ea_layer_weights *L = &m->layers[l];
        ea_forward_tp_layer *tl = &tp->layers[l];
        tl->wq = ea_tensor_row_view(&L->wq, (int64_t)r * nh * hd, (int64_t)nh * hd);
        tl->wk = ea_tensor_row_view(&L->wk, (int64_t)r * nkv * hd, (int64_t)nkv * hd);
        tl->wv = ea_tensor_row_view(&L->wv, (int64_t)r * nkv * hd, (int64_t)nkv * hd);
        s = ea__col_copy(tp, &L->wo, (int64_t)r * nh * hd, (int64_t)nh * hd, &tl->wo);
        if (s != EA_OK || !c->layer_is_moe[l] || !L->experts) continue;
        per_layer[l] = tp->experts + (size_t)l * S;
        for (int e = 0; s == EA_OK && e < c->n_experts; e++) {
            const ea_ffn_weights *src = &L->experts[e];
            ea_ffn_weights *dst = &per_layer[l][e];
            dst->gate = ea_tensor_row_view(&src->gate, (int64_t)r * fr, fr);
            dst->up = ea_tensor_row_view(&src->up, (int64_t)r * fr, fr);
            s = ea__col_copy(tp, &src->down, (int64_t)r * fr, fr, &dst->down);
        }
    }
    if (s == EA_OK) s = ea_dist_reserve(d, (size_t)max_tokens * (size_t)c->hidden_size * sizeof(float));
    if (s == EA_OK && c->n_experts > 0) {
        ea__tp_moe *T = ea_calloc(1, sizeof *T);
        if (!T) {
            s = ea_err(EA_ERR_NOMEM, "tensor parallel backend");
        } else {
            T->base.vt = &ea__tp_moe_vt;
            T->d = d;
            T->hidden = c->hidden_size;
            ea_moe_local_opts lo = {.n_layers = c->n_layers, .hidden = c->hidden_size, .ff = fr,
                                    .n_experts = c->n_experts, .max_tokens = max_tokens,
                                    .max_k = c->n_experts_per_tok, .experts = (ea_ffn_weights *const *)per_layer,
                                    .kctx = kctx};
            s = ea_moe_local_create(&lo, &T->local);
            tp->be = &T->base;
        }
    }
    ea_free(per_layer);
    if (s != EA_OK) {
        ea_tp_destroy(tp);
        return s;
    }
    tp->fwd.layers = tp->layers;
    *out = tp;
    return EA_OK;
}

ea_moe_backend *ea_tp_take_backend(ea_tp *tp) {
    ea_moe_backend *be = tp->be;
    tp->be = NULL;
    return be;
}

const ea_forward_tp *ea_tp_forward(const ea_tp *tp) { return &tp->fwd; }
size_t ea_tp_owned_bytes(const ea_tp *tp) { return tp->owned_bytes; }
