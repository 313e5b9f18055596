/*
 * deltanet.c — the Gated DeltaNet ("linear attention") layers of the hybrid
 * families qwen3_next and qwen3_5_moe, as mla.c is for MLA: one layer's
 * x -> y over a ragged batch, with the per-sequence recurrent state of
 * model/lin_state.h instead of the KV cache.
 *
 * Per token (C = 2·nk·dk + nv·dv, r = nv / nk, weights regrouped by the loader):
 *   [q | k | v] = lin_qkv·x (C)   z = lin_z·x   b = lin_b·x   a = lin_a·x
 *   conv: c = silu(Σ_j taps[j] ⊙ input[p − K + 1 + j]) per channel; inputs before the
 *         run come from the conv state (zeros before position 0)
 *   q, k: L2-normalised per key head (eps 1e-6), q · dk^−½; value head h reads key head h / r
 *   beta = sigmoid(b), g = −exp(A_log) · softplus(a + dt_bias)
 *   delta rule per value head (kernels/deltanet.h), o per head
 *   y = lin_out · [rmsnorm(o_h) · norm_w · silu(z_h)]_h
 *
 * Forms: a sequence's run of tokens in one call is cut at positions that are
 * multiples of 64 (EA_K_DELTA_CHUNK); a piece of 2..64 tokens runs the chunked
 * form, a piece of one token the recurrent step. So a prompt prefilled from
 * position 0 in one call is cut exactly as transformers cuts it, decode is
 * recurrent, and the bits of a sequence depend on how its tokens were split
 * into calls, never on the other sequences of a call (each (sequence, head)
 * is one task over its own state). The scheduler keeps the split a function
 * of the prompt alone (docs/decisions.md).
 *
 * Rules a call must keep (checked, with an error naming the slot): a
 * sequence's tokens in a call are one run of consecutive positions; a run
 * starts at position 0 (the state is cleared) or where the state stopped.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/deltanet.h"
#include "kernels/ops.h"
#include "model/forward_impl.h"

static float *fbuf(size_t n, int *ok) {
    float *p = ea_aligned_alloc(64, (n ? n : 1) * sizeof(float));
    if (!p) *ok = 0;
    return p;
}

static void vec(const ea_tensor *t, float *out) { ea_dtypes[t->dtype].to_f32(t->data, out, (size_t)ea_tensor_nelem(t)); }

ea_status ea__dn_create(ea_forward *f) {
    const ea_model_config *c = f->c;
    if (!f->o.lin) return ea_err(EA_ERR_INVALID_ARG, "%s has DeltaNet layers: the forward pass needs a recurrent state",
                                 ea_arch_names[c->arch]);
    if (f->o.tp) return ea_err(EA_ERR_UNSUPPORTED, "tensor parallel attention for %s", ea_arch_names[c->arch]);
    int nk = c->lin_n_k_heads, nv = c->lin_n_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim, K = c->lin_conv_kernel;
    size_t T = (size_t)f->o.max_tokens, C = 2 * (size_t)nk * dk + (size_t)nv * dv;
    f->dn_C = (int)C;
    int ok = 1;
    f->dn_x = fbuf(T * C, &ok);
    f->dn_c = fbuf(T * C, &ok);
    f->dn_z = fbuf(T * (size_t)nv * dv, &ok);
    f->dn_o = fbuf(T * (size_t)nv * dv, &ok);
    f->dn_b = fbuf(T * (size_t)nv, &ok);
    f->dn_a = fbuf(T * (size_t)nv, &ok);
    f->dn_scratch_per_thread = (ea_k_delta_chunk_scratch(dk, dv) + (size_t)dv + 15) & ~(size_t)15;
    f->dn_scratch = fbuf((size_t)f->n_threads * f->dn_scratch_per_thread, &ok);
    f->dn_runs = ea_calloc(T + 1, sizeof *f->dn_runs);
    f->dn_seen = ea_calloc((size_t)f->o.lin->max_seqs, 1);
    f->dn_w = ea_calloc((size_t)c->n_layers, sizeof *f->dn_w);
    if (!ok || !f->dn_runs || !f->dn_seen || !f->dn_w) return ea_err(EA_ERR_NOMEM, "DeltaNet buffers");
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->layer_is_linear[l]) continue;
        const ea_layer_weights *L = &f->m->layers[l];
        /* per layer, f32: taps transposed (K, C), then A = -exp(A_log), dt_bias (nv) and the norm weight (dv) */
        float *w = f->dn_w[l] = fbuf((size_t)K * C + 2 * (size_t)nv + (size_t)dv, &ok);
        float *taps = fbuf((size_t)K * C, &ok);
        if (!ok) {
            ea_aligned_free(taps);
            return ea_err(EA_ERR_NOMEM, "DeltaNet weights");
        }
        vec(&L->lin_conv, taps);
        for (size_t ch = 0; ch < C; ch++)
            for (int j = 0; j < K; j++) w[(size_t)j * C + ch] = taps[ch * (size_t)K + (size_t)j];
        ea_aligned_free(taps);
        vec(&L->lin_a_log, w + (size_t)K * C);
        if (!c->lin_a_neg_exp) /* HF A_log; GGUF's ssm_a is already -exp(A_log), computed the same way */
            for (int h = 0; h < nv; h++) w[(size_t)K * C + (size_t)h] = -expf(w[(size_t)K * C + (size_t)h]);
        vec(&L->lin_dt_bias, w + (size_t)K * C + nv);
        vec(&L->lin_norm, w + (size_t)K * C + 2 * nv);
    }
    return EA_OK;
}

void ea__dn_destroy(ea_forward *f) {
    if (f->dn_w)
        for (int l = 0; l < f->c->n_layers; l++) ea_aligned_free(f->dn_w[l]);
    ea_free(f->dn_w);
    float *bufs[] = {f->dn_x, f->dn_c, f->dn_z, f->dn_o, f->dn_b, f->dn_a, f->dn_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ea_aligned_free(bufs[i]);
    ea_free(f->dn_runs);
    ea_free(f->dn_seen);
}

/* The runs (one per sequence) of the n tokens from run_seq on: dn_runs, dn_n_runs. */
static void dn_runs(ea_forward *f, int n) {
    int nr = 0;
    for (int t = 0; t < n; t++)
        if (t == 0 || f->run_seq[t] != f->run_seq[t - 1]) f->dn_runs[nr++] = t;
    f->dn_runs[nr] = n;
    f->dn_n_runs = nr;
}

/* Before the layers: the call's runs (one per sequence), checked against the states; a run
 * from position 0 clears its state. */
ea_status ea__dn_begin(ea_forward *f, int n) {
    ea_lin_state *st = f->o.lin;
    dn_runs(f, n);
    int nr = f->dn_n_runs, checked = 0; /* runs whose slot is in range (their dn_seen marks are cleared below) */
    ea_status err = EA_OK;
    for (int i = 0; i < nr && err == EA_OK; i++) {
        int t0 = f->dn_runs[i], t1 = f->dn_runs[i + 1], s = f->run_seq[t0];
        if (s < 0 || s >= st->max_seqs) {
            err = ea_err(EA_ERR_RANGE, "sequence slot %d of %d", s, st->max_seqs);
            break;
        }
        checked = i + 1;
        for (int t = t0 + 1; t < t1 && err == EA_OK; t++)
            if (f->run_pos[t] != f->run_pos[t - 1] + 1)
                err = ea_err(EA_ERR_INVALID_ARG, "sequence slot %d: positions %d then %d in one call (DeltaNet layers "
                             "need consecutive positions)", s, f->run_pos[t - 1], f->run_pos[t]);
        if (err == EA_OK && f->dn_seen[s])
            err = ea_err(EA_ERR_INVALID_ARG, "sequence slot %d has two runs of tokens in one call", s);
        f->dn_seen[s] = 1;
    }
    for (int i = 0; i < checked; i++) f->dn_seen[f->run_seq[f->dn_runs[i]]] = 0;
    for (int i = 0; i < nr && err == EA_OK; i++) {
        int s = f->run_seq[f->dn_runs[i]], p0 = f->run_pos[f->dn_runs[i]];
        if (p0 == 0) ea_lin_state_reset(st, s);
        else if (p0 != st->next_pos[s])
            err = ea_err(EA_ERR_INVALID_ARG, "sequence slot %d: its recurrent state holds positions [0, %d) but the call "
                         "continues at %d", s, st->next_pos[s], p0);
    }
    return err;
}

/* After the layers: each state has reached the end of its run. */
void ea__dn_end(ea_forward *f, int n) {
    dn_runs(f, n);
    for (int i = 0; i < f->dn_n_runs; i++) {
        int t1 = f->dn_runs[i + 1] - 1;
        f->o.lin->next_pos[f->run_seq[t1]] = f->run_pos[t1] + 1;
    }
}

/* conv + SiLU of one run's tokens, then its conv state moves on (task = run index) */
static void conv_task(void *ctx, int run, int thread) {
    (void)thread;
    ea_forward *f = ctx;
    const ea_model_config *c = f->c;
    int K = c->lin_conv_kernel, C = f->dn_C, t0 = f->dn_runs[run], nrun = f->dn_runs[run + 1] - t0;
    float *state = ea_lin_conv(f->o.lin, f->run_layer, f->run_seq[t0]); /* (K−1, C), oldest first */
    const float *taps = f->dn_w[f->run_layer];
    const float *rows[16];
    for (int i = 0; i < nrun; i++) {
        for (int j = 0; j < K; j++) {
            int d = i - (K - 1) + j; /* input offset in the run */
            rows[j] = d >= 0 ? f->dn_x + (size_t)(t0 + d) * C : state + (size_t)(K - 1 + d) * C;
        }
        ea_k_conv_silu(rows, taps, C, K, f->dn_c + (size_t)(t0 + i) * C);
    }
    for (int r = 0; r < K - 1; r++) { /* ascending: row r reads row r + nrun (not yet written) or the run */
        int d = nrun - (K - 1) + r;
        const float *src = d >= 0 ? f->dn_x + (size_t)(t0 + d) * C : state + (size_t)(K - 1 + d) * C;
        memmove(state + (size_t)r * C, src, sizeof(float) * (size_t)C);
    }
}

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* per token: q, k L2 norm (+ q scale), beta, g */
static void qk_gate_task(ea_forward *f, int t0, int t1, const void *arg) {
    (void)arg;
    const ea_model_config *c = f->c;
    int nk = c->lin_n_k_heads, nv = c->lin_n_v_heads, dk = c->lin_k_dim, C = f->dn_C, K = c->lin_conv_kernel;
    const float *w = f->dn_w[f->run_layer] + (size_t)K * C, *A = w, *dt_bias = w + nv;
    float scale = 1.0f / sqrtf((float)dk);
    for (int t = t0; t < t1; t++) {
        float *x = f->dn_c + (size_t)t * C;
        for (int h = 0; h < 2 * nk; h++) ea_k_l2norm(x + (size_t)h * dk, dk, 1e-6f);
        for (int i = 0; i < nk * dk; i++) x[i] *= scale;
        float *b = f->dn_b + (size_t)t * nv, *a = f->dn_a + (size_t)t * nv;
        for (int h = 0; h < nv; h++) {
            b[h] = 1.0f / (1.0f + expf(-b[h]));                    /* beta */
            a[h] = A[h] * softplus(a[h] + dt_bias[h]);              /* g = -exp(A_log) · softplus(a + dt_bias) */
        }
    }
}

/* the delta rule of one (run, value head): pieces cut at multiples of 64 */
static void delta_task(void *ctx, int task, int thread) {
    ea_forward *f = ctx;
    const ea_model_config *c = f->c;
    int nk = c->lin_n_k_heads, nv = c->lin_n_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim, C = f->dn_C;
    int run = task / nv, h = task % nv, kh = h / (nv / nk);
    int t0 = f->dn_runs[run], t1 = f->dn_runs[run + 1];
    float *S = ea_lin_ssm(f->o.lin, f->run_layer, f->run_seq[t0]) + (size_t)h * dk * dv;
    float *sc = f->dn_scratch + (size_t)thread * f->dn_scratch_per_thread;
    size_t od = (size_t)nv * dv;
    for (int t = t0; t < t1;) {
        int p = f->run_pos[t], len = EA_K_DELTA_CHUNK - p % EA_K_DELTA_CHUNK;
        if (len > t1 - t) len = t1 - t;
        const float *x = f->dn_c + (size_t)t * C;
        const float *q = x + (size_t)kh * dk, *k = x + (size_t)(nk + kh) * dk, *v = x + 2 * (size_t)nk * dk + (size_t)h * dv;
        const float *g = f->dn_a + (size_t)t * nv + h, *beta = f->dn_b + (size_t)t * nv + h;
        float *o = f->dn_o + (size_t)t * od + (size_t)h * dv;
        if (len == 1)
            ea_k_delta_step(S, q, k, v, expf(*g), *beta, dk, dv, o, sc);
        else
            ea_k_delta_chunk(S, q, (size_t)C, k, (size_t)C, v, (size_t)C, g, beta, (size_t)nv, len, dk, dv, o, od, sc);
        t += len;
    }
}

/* per token and value head: o = rmsnorm(o) · w · silu(z) */
static void gated_norm_task(ea_forward *f, int t0, int t1, const void *arg) {
    (void)arg;
    const ea_model_config *c = f->c;
    int nv = c->lin_n_v_heads, dv = c->lin_v_dim;
    const float *w = f->dn_w[f->run_layer] + (size_t)c->lin_conv_kernel * f->dn_C + 2 * (size_t)nv;
    for (int t = t0; t < t1; t++)
        for (int h = 0; h < nv; h++) {
            float *o = f->dn_o + ((size_t)t * nv + h) * dv;
            ea_k_rmsnorm_gated(o, w, f->dn_z + ((size_t)t * nv + h) * dv, c->rms_norm_eps, dv, o);
        }
}

ea_status ea__deltanet(ea_forward *f, int l, int n) {
    const ea_layer_weights *L = &f->m->layers[l];
    ea_k_mm mm[4] = {{&L->lin_qkv, f->xn, n, f->dn_x}, {&L->lin_z, f->xn, n, f->dn_z},
                     {&L->lin_b, f->xn, n, f->dn_b}, {&L->lin_a, f->xn, n, f->dn_a}};
    ea_k_matmul_batch(f->kctx, mm, 4);
    f->run_layer = l;
    dn_runs(f, n); /* of this micro-batch (forward.c: a sequence cut in two continues its state in the second) */
    ea_pool_run(f->pool, conv_task, f, f->dn_n_runs);
    ea__over_tokens(f, n, qk_gate_task, NULL);
    ea_pool_run(f->pool, delta_task, f, f->dn_n_runs * f->c->lin_n_v_heads);
    ea__over_tokens(f, n, gated_norm_task, NULL);
    ea_k_matmul(f->kctx, &L->lin_out, f->dn_o, n, f->y);
    return EA_OK;
}
