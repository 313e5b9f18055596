/*
 * exp_impl.h — the exp of the kernels (ea_k_expf in ops.h) in its AVX-512
 * and AVX2 forms, for the files that vectorise over it (ops.c: SiLU; attn.c:
 * softmax), the tail mask of their AVX2 loops, and an 8 x 8 transpose (attn.c,
 * matmul_avx2.c). Internal to src/kernels/.
 *
 * exp(x) = 2^n · (1 + r + r²·P(r)) with n = rint(x·log2 e), r = x − n·ln2 in
 * two fused steps (ln2 split in a high part exact in 9 bits and a low part),
 * P Cephes' degree-5 minimax polynomial for |r| ≤ ln2/2, evaluated with fused
 * multiply-adds (Horner); x clamped to [−87, 88] so 2^n is a normal float
 * built from its exponent bits. The scalar form (ops.c) performs the same
 * IEEE operations in the same order, so all three give the same bits.
 */
#ifndef EA_EXP_IMPL_H
#define EA_EXP_IMPL_H

#include <immintrin.h>

#define EA__EXP_LO (-87.0f)
#define EA__EXP_HI 88.0f
#define EA__LOG2E 1.44269504088896341f
#define EA__LN2_HI 0.693359375f
#define EA__LN2_LO (-2.12194440e-4f)
#define EA__E0 1.9875691500e-4f
#define EA__E1 1.3981999507e-3f
#define EA__E2 8.3334519073e-3f
#define EA__E3 4.1665795894e-2f
#define EA__E4 1.6666665459e-1f
#define EA__E5 5.0000001201e-1f

#define EA__T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

EA__T512 static inline __m512 ea__expf16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(EA__EXP_LO)), _mm512_set1_ps(EA__EXP_HI));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EA__LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-EA__LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-EA__LN2_LO), r);
    __m512 p = _mm512_set1_ps(EA__E0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EA__E1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EA__E2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EA__E3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EA__E4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EA__E5));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

#define EA__T256 __attribute__((target("avx2,fma,f16c")))

/* ea__expf16 on 8 lanes. The clamp's operands are in the scalar form's order
 * (MAXPS(a, b) is a > b ? a : b), so a NaN also stays NaN as it does there. */
EA__T256 static inline __m256 ea__expf8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(EA__EXP_HI), _mm256_max_ps(_mm256_set1_ps(EA__EXP_LO), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EA__LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-EA__LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-EA__LN2_LO), r);
    __m256 p = _mm256_set1_ps(EA__E0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EA__E1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EA__E2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EA__E3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EA__E4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EA__E5));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* Lanes i < n set (all ones), for maskload / maskstore / blendv of a tail. */
EA__T256 static inline __m256i ea__mask8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 x 8 transpose: r[c] lane l -> o[l] lane c. */
EA__T256 static inline __attribute__((always_inline)) void ea__tr8(const __m256 *r, __m256 *o) {
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int c = 0; c < 8; c += 2) {
        t[c] = _mm256_unpacklo_ps(r[c], r[c + 1]);
        t[c + 1] = _mm256_unpackhi_ps(r[c], r[c + 1]);
    }
#pragma GCC unroll 2
    for (int c = 0; c < 8; c += 4) {
        u[c] = _mm256_shuffle_ps(t[c], t[c + 2], 0x44);
        u[c + 1] = _mm256_shuffle_ps(t[c], t[c + 2], 0xee);
        u[c + 2] = _mm256_shuffle_ps(t[c + 1], t[c + 3], 0x44);
        u[c + 3] = _mm256_shuffle_ps(t[c + 1], t[c + 3], 0xee);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        o[c] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x20);
        o[c + 4] = _mm256_permute2f128_ps(u[c], u[c + 4], 0x31);
    }
}

#endif
