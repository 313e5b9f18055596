/*
 * ops.h — the row-wise kernels of a forward pass (everything but matmul).
 *
 * Each works on one row at a time, so its result for a row never depends on
 * other rows (batch invariance for free); reductions run left to right in a
 * fixed order. Math on the first line of each.
 */
#ifndef EA_OPS_H
#define EA_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Which variant of dot, axpy, SiLU and attention (kernels/attn.h) runs: the
 * ISA names of kernels/matmul.h. "scalar" runs the _ref twins, "avx2" the
 * AVX2 + FMA forms, "avx512" (and "avx512_bf16", "amx", which have no row-wise
 * forms of their own) the AVX-512 ones. At first use: the twins under
 * EAAS_OPS_REF, else EAAS_ISA when this CPU runs it (the switch the matmul
 * contexts read), else the CPU's best. Every variant gives the twin's bits, so
 * this is for tests and benchmarks: process-wide, set it before threads run
 * kernels. NULL: back to the first-use choice. EA_ERR_UNSUPPORTED if this CPU
 * cannot run it. */
ea_status ea_k_ops_set_isa(const char *isa);
/* "scalar", "avx2" or "avx512": the variant running now. */
const char *ea_k_ops_isa(void);

/* Module-internal (kernels/): the running variant as a level, for attn.c. */
enum { EA__OPS_SCALAR = 0, EA__OPS_AVX2 = 1, EA__OPS_AVX512 = 2 };
int ea__ops_level(void);

/* y = x * rsqrt(mean(x²) + eps) * w          x, y, w: (n); y may alias x */
void ea_k_rmsnorm(const float *x, const float *w, float eps, int n, float *y);

/* RoPE, rotate-half (GPT-NeoX / HF) layout on one head of dim d, rotating the
 * first `rot` dims: for i < rot/2, (x[i], x[i+rot/2]) rotated by angle i.
 * cs holds cos[0..rot/2) then sin[0..rot/2) for this position. In place. */
void ea_k_rope_half(float *x, int rot, const float *cs);

/* RoPE, interleaved layout: pairs (x[2i], x[2i+1]) rotated by angle i. In place. */
void ea_k_rope_interleaved(float *x, int rot, const float *cs);

/* x = softmax(x) over n, max-subtracted, sums left to right. */
void ea_k_softmax(float *x, int n);

/* g = silu(g) * u = g / (1 + exp(-g)) * u      g, u: (n); exp is ea_k_expf.
 * The AVX-512 and AVX2 variants give the bits of the _ref twin. */
void ea_k_silu_mul(float *g, const float *u, int n);
void ea_k_silu_mul_ref(float *g, const float *u, int n);

/* exp(x) to ~1e-7 relative (x clamped to [-87, 88]); one polynomial with a
 * fixed operation order, shared by every variant of the kernels that use it
 * (kernels/exp_impl.h), so scalar, AVX2 and AVX-512 results are the same bits. */
float ea_k_expf(float x);

static inline float ea_k_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* y += a * x                                   (n) */
void ea_k_axpy(float a, const float *x, float *y, int n);
void ea_k_axpy_ref(float a, const float *x, float *y, int n);

/* dot(a, b) over n in f32: lane j (0..15) sums a[i]*b[i] for i ≡ j (mod 16) in
 * increasing i, then lanes fold j += j+8, j += j+4, j += j+2, j += j+1.
 * The AVX-512 and AVX2 variants give the same bits as the _ref twin. */
float ea_k_dot_f32(const float *a, const float *b, int n);
float ea_k_dot_f32_ref(const float *a, const float *b, int n);

/* Index of the largest value (lowest index on ties). */
int ea_k_argmax(const float *x, int n);

#endif
