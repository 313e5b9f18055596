/*
 * deltanet.h — the row-wise kernels of Gated DeltaNet linear attention
 * (Qwen3-Next, Qwen3.5): causal depthwise conv + SiLU, L2 norm, the delta
 * rule (recurrent step and chunked form) and the gated RMSNorm.
 *
 * Contract, as for ops.h: each kernel's result depends only on its own inputs
 * (one token, or one head of one sequence), in a fixed order of operations,
 * and every variant (_ref twin, AVX2, AVX-512) gives the twin's bits: the
 * SIMD forms are lane-wise over the value (or channel) dimension, with the
 * same separate multiply and add per lane as the twin, and the reductions
 * over d_k go through ea_k_dot_f32 (ops.h: one fixed 16-lane tree). The
 * variant follows ea_k_ops_set_isa / EAAS_ISA like the other row-wise kernels.
 *
 * Shapes: S (dk, dv) row-major — row i is key dimension i; q, k (dk); v, o (dv).
 */
#ifndef EA_DELTANET_H
#define EA_DELTANET_H

#include <stddef.h>

/* Largest chunk of the chunked form (tokens), and the scratch floats one call needs. */
#define EA_K_DELTA_CHUNK 64
size_t ea_k_delta_chunk_scratch(int dk, int dv);

/* y[c] = silu(Σ_j wt[j][c] · rows[j][c]) for c < C, j = 0..K-1 in order (rows[K-1] is the
 * current token, rows[0] the oldest); wt (K, C) are the conv taps transposed. */
void ea_k_conv_silu(const float *const *rows, const float *wt, int C, int K, float *y);
void ea_k_conv_silu_ref(const float *const *rows, const float *wt, int C, int K, float *y);

/* x *= 1 / sqrt(Σ x² + eps)   (n) */
void ea_k_l2norm(float *x, int n, float eps);
void ea_k_l2norm_ref(float *x, int n, float eps);

/* y = (w · (x · rsqrt(mean(x²) + eps))) · silu(z)   (n); y may alias x. */
void ea_k_rmsnorm_gated(const float *x, const float *w, const float *z, float eps, int n, float *y);
void ea_k_rmsnorm_gated_ref(const float *x, const float *w, const float *z, float eps, int n, float *y);

/* One token of the delta rule, in place on S:
 *   S = S · eg;  u = beta · (v − Sᵀk);  S = S + k uᵀ;  o = Sᵀq
 * eg = exp(g); u (dv) is scratch. */
void ea_k_delta_step(float *S, const float *q, const float *k, const float *v, float eg, float beta, int dk, int dv,
                     float *o, float *u);
void ea_k_delta_step_ref(float *S, const float *q, const float *k, const float *v, float eg, float beta, int dk,
                         int dv, float *o, float *u);

/* L (1..64) consecutive tokens of one head in the chunked (WY) form of
 * transformers' torch_chunk_gated_delta_rule, from state S (updated in place).
 * Token i reads q + i*qs, k + i*ks, v + i*vs, g[i*gs], beta[i*gs] and writes
 * o + i*os. Equal to L recurrent steps in exact arithmetic; in f32 within
 * rounding. scratch: ea_k_delta_chunk_scratch(dk, dv) floats. */
void ea_k_delta_chunk(float *S, const float *q, size_t qs, const float *k, size_t ks, const float *v, size_t vs,
                      const float *g, const float *beta, size_t gs, int L, int dk, int dv, float *o, size_t os,
                      float *scratch);
void ea_k_delta_chunk_ref(float *S, const float *q, size_t qs, const float *k, size_t ks, const float *v, size_t vs,
                          const float *g, const float *beta, size_t gs, int L, int dk, int dv, float *o, size_t os,
                          float *scratch);

#endif
