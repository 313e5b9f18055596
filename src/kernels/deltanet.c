/*
 * deltanet.c — Gated DeltaNet kernels; see deltanet.h for the contract.
 *
 * Every SIMD form below is the _ref twin with its loop over the value (or
 * channel) index done 8 (AVX2) or 16 (AVX-512) lanes at a time: each lane
 * performs the twin's multiply and add in the twin's order (no FMA; the build
 * is ISO C, so GCC does not contract the twin's either), so the bits are the
 * same. The chunked form is one body over two primitives — the dot product
 * (ops.h's fixed tree) and a lane-wise y += a·x — run with the dispatched
 * primitives or with their _ref twins; both give the same bits.
 *
 * Chunked form, per chunk of L tokens (gc = cumulative sum of g in the chunk,
 * kb = β·k, vb = β·v):
 *   A[i][j] = −(kb_i·k_j)·exp(gc_i − gc_j) for j < i; then row by row
 *   A[i][j] += Σ_{j<m<i} A[i][m]·A[m][j] (rows m already updated); T = A + I
 *   U = T·vb,  W = T·(kb·exp(gc))
 *   vnew_i = U_i − W_i·S,  o_i = (q_i·exp(gc_i))·S + Σ_{j≤i} (q_i·k_j)·exp(gc_i − gc_j)·vnew_j
 *   S = S·exp(gc_L) + Σ_j (k_j·exp(gc_L − gc_j)) ⊗ vnew_j
 * (the published torch_chunk_gated_delta_rule, with its zero padding left out:
 * padded tokens add nothing and leave gc_L unchanged).
 */
#include "kernels/deltanet.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/exp_impl.h"
#include "kernels/ops.h"

size_t ea_k_delta_chunk_scratch(int dk, int dv) {
    size_t L = EA_K_DELTA_CHUNK;
    /* gc, A (L×L), kb (L×dk), W (L×dk), U (L×dv), vnew (L×dv), one dk row */
    return L + L * L + 2 * L * (size_t)dk + 2 * L * (size_t)dv + (size_t)(dk > dv ? dk : dv) + L;
}

static float silu1(float x) { return x / (1.0f + ea_k_expf(-x)); }

/* ---------------------------------------------------------------- conv */

void ea_k_conv_silu_ref(const float *const *rows, const float *wt, int C, int K, float *y) {
    for (int c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++) acc += wt[(size_t)j * C + c] * rows[j][c];
        y[c] = silu1(acc);
    }
}

EA__T256 static void conv_silu_avx2(const float *const *rows, const float *wt, int C, int K, float *y) {
    for (int c = 0; c < C; c += 8) {
        __m256i m = ea__mask8(C - c);
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < K; j++)
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_maskload_ps(wt + (size_t)j * C + c, m),
                                                   _mm256_maskload_ps(rows[j] + c, m)));
        __m256 e = ea__expf8(_mm256_sub_ps(_mm256_setzero_ps(), acc));
        _mm256_maskstore_ps(y + c, m, _mm256_div_ps(acc, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
    }
}

EA__T512 static void conv_silu_avx512(const float *const *rows, const float *wt, int C, int K, float *y) {
    for (int c = 0; c < C; c += 16) {
        __mmask16 m = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < K; j++)
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, wt + (size_t)j * C + c),
                                                   _mm512_maskz_loadu_ps(m, rows[j] + c)));
        __m512 e = ea__expf16(_mm512_sub_ps(_mm512_setzero_ps(), acc));
        _mm512_mask_storeu_ps(y + c, m, _mm512_div_ps(acc, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
    }
}

void ea_k_conv_silu(const float *const *rows, const float *wt, int C, int K, float *y) {
    int lv = ea__ops_level();
    if (lv == EA__OPS_AVX512) conv_silu_avx512(rows, wt, C, K, y);
    else if (lv == EA__OPS_AVX2) conv_silu_avx2(rows, wt, C, K, y);
    else ea_k_conv_silu_ref(rows, wt, C, K, y);
}

/* ---------------------------------------------------------------- norms */

void ea_k_l2norm_ref(float *x, int n, float eps) {
    float r = 1.0f / sqrtf(ea_k_dot_f32_ref(x, x, n) + eps);
    for (int i = 0; i < n; i++) x[i] *= r;
}

void ea_k_l2norm(float *x, int n, float eps) {
    float r = 1.0f / sqrtf(ea_k_dot_f32(x, x, n) + eps);
    for (int i = 0; i < n; i++) x[i] *= r;
}

static void gated_tail(const float *x, const float *w, const float *z, float r, int n, float *y) {
    for (int i = 0; i < n; i++) y[i] = (w[i] * (x[i] * r)) * silu1(z[i]);
}

void ea_k_rmsnorm_gated_ref(const float *x, const float *w, const float *z, float eps, int n, float *y) {
    gated_tail(x, w, z, 1.0f / sqrtf(ea_k_dot_f32_ref(x, x, n) / (float)n + eps), n, y);
}

void ea_k_rmsnorm_gated(const float *x, const float *w, const float *z, float eps, int n, float *y) {
    gated_tail(x, w, z, 1.0f / sqrtf(ea_k_dot_f32(x, x, n) / (float)n + eps), n, y);
}

/* ---------------------------------------------------------------- recurrent step */

void ea_k_delta_step_ref(float *S, const float *q, const float *k, const float *v, float eg, float beta, int dk,
                         int dv, float *o, float *u) {
    for (int j = 0; j < dv; j++) u[j] = 0.0f;
    for (int i = 0; i < dk; i++) { /* decay, and the memory's read-out Sᵀk */
        float *row = S + (size_t)i * dv;
        for (int j = 0; j < dv; j++) {
            row[j] = row[j] * eg;
            u[j] = u[j] + k[i] * row[j];
        }
    }
    for (int j = 0; j < dv; j++) u[j] = (v[j] - u[j]) * beta;
    for (int j = 0; j < dv; j++) o[j] = 0.0f;
    for (int i = 0; i < dk; i++) { /* write k uᵀ, read Sᵀq */
        float *row = S + (size_t)i * dv;
        for (int j = 0; j < dv; j++) {
            row[j] = row[j] + k[i] * u[j];
            o[j] = o[j] + q[i] * row[j];
        }
    }
}

EA__T256 static void delta_step_avx2(float *S, const float *q, const float *k, const float *v, float eg, float beta,
                                     int dk, int dv, float *o, float *u) {
    __m256 veg = _mm256_set1_ps(eg), vb = _mm256_set1_ps(beta);
    for (int j = 0; j < dv; j += 8) {
        __m256i m = ea__mask8(dv - j);
        __m256 mem = _mm256_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *row = S + (size_t)i * dv + j;
            __m256 r = _mm256_mul_ps(_mm256_maskload_ps(row, m), veg);
            _mm256_maskstore_ps(row, m, r);
            mem = _mm256_add_ps(mem, _mm256_mul_ps(_mm256_set1_ps(k[i]), r));
        }
        __m256 uu = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(v + j, m), mem), vb);
        _mm256_maskstore_ps(u + j, m, uu);
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *row = S + (size_t)i * dv + j;
            __m256 r = _mm256_add_ps(_mm256_maskload_ps(row, m), _mm256_mul_ps(_mm256_set1_ps(k[i]), uu));
            _mm256_maskstore_ps(row, m, r);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(q[i]), r));
        }
        _mm256_maskstore_ps(o + j, m, acc);
    }
}

EA__T512 static void delta_step_avx512(float *S, const float *q, const float *k, const float *v, float eg, float beta,
                                       int dk, int dv, float *o, float *u) {
    __m512 veg = _mm512_set1_ps(eg), vb = _mm512_set1_ps(beta);
    for (int j = 0; j < dv; j += 16) {
        __mmask16 m = dv - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (dv - j)) - 1);
        __m512 mem = _mm512_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *row = S + (size_t)i * dv + j;
            __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row), veg);
            _mm512_mask_storeu_ps(row, m, r);
            mem = _mm512_add_ps(mem, _mm512_mul_ps(_mm512_set1_ps(k[i]), r));
        }
        __m512 uu = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + j), mem), vb);
        _mm512_mask_storeu_ps(u + j, m, uu);
        __m512 acc = _mm512_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *row = S + (size_t)i * dv + j;
            __m512 r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, row), _mm512_mul_ps(_mm512_set1_ps(k[i]), uu));
            _mm512_mask_storeu_ps(row, m, r);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(q[i]), r));
        }
        _mm512_mask_storeu_ps(o + j, m, acc);
    }
}

void ea_k_delta_step(float *S, const float *q, const float *k, const float *v, float eg, float beta, int dk, int dv,
                     float *o, float *u) {
    int lv = ea__ops_level();
    if (lv == EA__OPS_AVX512) delta_step_avx512(S, q, k, v, eg, beta, dk, dv, o, u);
    else if (lv == EA__OPS_AVX2) delta_step_avx2(S, q, k, v, eg, beta, dk, dv, o, u);
    else ea_k_delta_step_ref(S, q, k, v, eg, beta, dk, dv, o, u);
}

/* ---------------------------------------------------------------- chunked form */

typedef struct {
    float (*dot)(const float *, const float *, int);
    void (*axpy)(float, const float *, float *, int);
} prims;

static void chunk_body(const prims *P, float *S, const float *q, size_t qs, const float *k, size_t ks, const float *v,
                       size_t vs, const float *g, const float *beta, size_t gs, int L, int dk, int dv, float *o,
                       size_t os, float *sc) {
    float *gc = sc, *A = gc + EA_K_DELTA_CHUNK, *kb = A + EA_K_DELTA_CHUNK * EA_K_DELTA_CHUNK;
    float *W = kb + (size_t)EA_K_DELTA_CHUNK * dk, *U = W + (size_t)EA_K_DELTA_CHUNK * dk;
    float *vn = U + (size_t)EA_K_DELTA_CHUNK * dv, *row = vn + (size_t)EA_K_DELTA_CHUNK * dv;
    const int N = EA_K_DELTA_CHUNK;
    float acc = 0.0f;
    for (int i = 0; i < L; i++) {
        acc += g[(size_t)i * gs];
        gc[i] = acc;
        for (int d = 0; d < dk; d++) kb[(size_t)i * dk + d] = k[(size_t)i * ks + d] * beta[(size_t)i * gs];
    }
    for (int i = 0; i < L; i++)
        for (int j = 0; j < i; j++)
            A[i * N + j] = -(P->dot(kb + (size_t)i * dk, k + (size_t)j * ks, dk) * expf(gc[i] - gc[j]));
    for (int i = 1; i < L; i++) { /* forward substitution, as published: row i from its original
                                      * values and the rows above it, already updated */
        for (int j = 0; j < i; j++) {
            float s = A[i * N + j];
            for (int m = j + 1; m < i; m++) s += A[i * N + m] * A[m * N + j];
            row[j] = s;
        }
        memcpy(A + i * N, row, sizeof(float) * (size_t)i);
    }
    for (int i = 0; i < L; i++) { /* U = T·vb, W = T·(kb·exp(gc)) with T[i][i] = 1 */
        float *u = U + (size_t)i * dv, *w = W + (size_t)i * dk;
        memset(u, 0, sizeof(float) * (size_t)dv);
        memset(w, 0, sizeof(float) * (size_t)dk);
        for (int m = 0; m <= i; m++) {
            float t = m == i ? 1.0f : A[i * N + m], bm = beta[(size_t)m * gs], em = expf(gc[m]);
            for (int d = 0; d < dv; d++) row[d] = v[(size_t)m * vs + d] * bm;
            P->axpy(t, row, u, dv);
            for (int d = 0; d < dk; d++) row[d] = kb[(size_t)m * dk + d] * em;
            P->axpy(t, row, w, dk);
        }
    }
    for (int i = 0; i < L; i++) { /* vnew = U − W·S (old S) */
        float *vi = vn + (size_t)i * dv;
        memset(vi, 0, sizeof(float) * (size_t)dv);
        for (int d = 0; d < dk; d++) P->axpy(W[(size_t)i * dk + d], S + (size_t)d * dv, vi, dv);
        for (int d = 0; d < dv; d++) vi[d] = U[(size_t)i * dv + d] - vi[d];
    }
    for (int i = 0; i < L; i++) { /* o = (q·exp(gc))·S + Σ_{j≤i} (q·k_j)·exp(gc_i − gc_j)·vnew_j */
        float *oi = o + (size_t)i * os;
        const float *qi = q + (size_t)i * qs;
        float ei = expf(gc[i]);
        memset(oi, 0, sizeof(float) * (size_t)dv);
        for (int d = 0; d < dk; d++) P->axpy(qi[d] * ei, S + (size_t)d * dv, oi, dv);
        for (int j = 0; j <= i; j++)
            P->axpy(P->dot(qi, k + (size_t)j * ks, dk) * expf(gc[i] - gc[j]), vn + (size_t)j * dv, oi, dv);
    }
    float gl = gc[L - 1], el = expf(gl);
    for (int d = 0; d < dk; d++) { /* S = S·exp(gc_L) + Σ_j (k_j·exp(gc_L − gc_j)) ⊗ vnew_j */
        float *sr = S + (size_t)d * dv;
        for (int e = 0; e < dv; e++) sr[e] = sr[e] * el;
        for (int j = 0; j < L; j++) P->axpy(k[(size_t)j * ks + d] * expf(gl - gc[j]), vn + (size_t)j * dv, sr, dv);
    }
}

void ea_k_delta_chunk_ref(float *S, const float *q, size_t qs, const float *k, size_t ks, const float *v, size_t vs,
                          const float *g, const float *beta, size_t gs, int L, int dk, int dv, float *o, size_t os,
                          float *scratch) {
    prims P = {ea_k_dot_f32_ref, ea_k_axpy_ref};
    chunk_body(&P, S, q, qs, k, ks, v, vs, g, beta, gs, L, dk, dv, o, os, scratch);
}

void ea_k_delta_chunk(float *S, const float *q, size_t qs, const float *k, size_t ks, const float *v, size_t vs,
                      const float *g, const float *beta, size_t gs, int L, int dk, int dv, float *o, size_t os,
                      float *scratch) {
    prims P = {ea_k_dot_f32, ea_k_axpy};
    chunk_body(&P, S, q, qs, k, ks, v, vs, g, beta, gs, L, dk, dv, o, os, scratch);
}
