/*
 * matmul_avx512.c — AVX-512 variants (F/BW/VL/DQ; VNNI for q8_0). Compiled
 * per function with target attributes; called only after the CPU check.
 *
 * f32/f16/bf16: one zmm accumulator per (i, j) holds the 16 canonical lanes;
 * W is converted exactly to f32 in registers (bf16: shift, f16: vcvtph2ps),
 * X stays f32; the k tail uses zero-masked loads (adds +0*0, see
 * matmul_avx2.c); the horizontal sum follows the canonical tree. Tiles of
 * 4 W rows x 4 X rows share loads; the shape only decides which (i, j) are
 * computed together, never the operations of one (i, j).
 *
 * q8_0 (VNNI): per W row and group of 16 blocks, the W bytes stay in 8 zmm
 * (two blocks each). For every X row, vpdpbusd(|w| as u8, x * sign(w))
 * gives exact int32 partial sums of w*x (each product <= 128*127; the
 * per-row abs/sign costs less than spilling them). A shuffle tree sums each
 * block's 8 dwords into one lane (integer adds, exact in any order);
 * lane b%16 then takes fma(isum, dw*dx, acc) as in matmul_scalar.c.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_impl.h"

#define EA__T5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define EA__T5V __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#define EA__INL static inline __attribute__((always_inline))

/* Prefetch distance along a W row, in bytes. */
#define EA__PF 1024

EA__INL EA__T5 __m512 ea__ld16(const uint8_t *row, ea_dtype dt, int kk) {
    switch (dt) {
    case EA_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * (size_t)kk)));
    case EA_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + 2 * (size_t)kk))), 16));
    default: return _mm512_loadu_ps((const float *)(row + 4 * (size_t)kk));
    }
}

EA__INL EA__T5 __m512 ea__ld16z(const uint8_t *row, ea_dtype dt, int kk, __mmask16 msk) {
    switch (dt) {
    case EA_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(msk, row + 2 * (size_t)kk));
    case EA_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(msk, row + 2 * (size_t)kk)), 16));
    default: return _mm512_maskz_loadu_ps(msk, row + 4 * (size_t)kk);
    }
}

EA__INL EA__T5 float ea__reduce16_avx512(__m512 a) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

EA__INL EA__T5 void ea__tile5(const ea__mm *p, int i0, int j0, const int MR, const int NR, const ea_dtype dt) {
    int k = p->k, kmain = k & ~15;
    size_t eb = (size_t)ea_dtypes[dt].block_bytes;
    const uint8_t *wr[8];
    const float *xr[4];
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int a = 0; a < NR; a++) wr[a] = p->w + (size_t)(j0 + a) * p->row_bytes;
#pragma GCC unroll 4
    for (int b = 0; b < MR; b++) xr[b] = p->x + (size_t)(i0 + b) * k;
#pragma GCC unroll 8
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) acc[a][b] = _mm512_setzero_ps();
    for (int kk = 0; kk < kmain; kk += 16) {
        __m512 wv[8];
#pragma GCC unroll 8
        for (int a = 0; a < NR; a++) {
            _mm_prefetch((const char *)wr[a] + (size_t)kk * eb + EA__PF, _MM_HINT_T0);
            wv[a] = ea__ld16(wr[a], dt, kk);
        }
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) {
            __m512 xv = _mm512_loadu_ps(xr[b] + kk);
#pragma GCC unroll 8
            for (int a = 0; a < NR; a++) acc[a][b] = _mm512_fmadd_ps(wv[a], xv, acc[a][b]);
        }
    }
    if (kmain < k) {
        __mmask16 msk = (__mmask16)((1u << (k - kmain)) - 1);
        __m512 wv[8];
#pragma GCC unroll 8
        for (int a = 0; a < NR; a++) wv[a] = ea__ld16z(wr[a], dt, kmain, msk);
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) {
            __m512 xv = _mm512_maskz_loadu_ps(msk, xr[b] + kmain);
#pragma GCC unroll 8
            for (int a = 0; a < NR; a++) acc[a][b] = _mm512_fmadd_ps(wv[a], xv, acc[a][b]);
        }
    }
#pragma GCC unroll 8
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) p->y[(size_t)(i0 + b) * p->n + j0 + a] = ea__reduce16_avx512(acc[a][b]);
}

EA__INL EA__T5 void ea__rows5(const ea__mm *p, int j0, int j1, const ea_dtype dt) {
    int j = j0;
    if (p->m < 4) { /* decode: more W rows in flight */
        for (; j + 8 <= j1; j += 8)
            for (int i = 0; i < p->m; i++) ea__tile5(p, i, j, 1, 8, dt);
    }
    for (; j + 4 <= j1; j += 4) {
        int i = 0;
        for (; i + 4 <= p->m; i += 4) ea__tile5(p, i, j, 4, 4, dt);
        for (; i < p->m; i++) ea__tile5(p, i, j, 1, 4, dt);
    }
    for (; j < j1; j++)
        for (int i = 0; i < p->m; i++) ea__tile5(p, i, j, 1, 1, dt);
}

EA__T5 void ea__rows_avx512_f(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    switch (p->dtype) {
    case EA_F16: ea__rows5(p, j0, j1, EA_F16); break;
    case EA_BF16: ea__rows5(p, j0, j1, EA_BF16); break;
    default: ea__rows5(p, j0, j1, EA_F32); break;
    }
}

/* ---- q8_0 with VNNI ------------------------------------------------------------ */

/* 8 zmm of per-block partial dword sums (zmm q: block 2q in lanes 0-7, 2q+1 in
 * 8-15) -> one zmm, lane 4L+r = total of block 4r+L (unpermuted). */
EA__INL EA__T5V __m512i ea__blocksum(const __m512i P[8]) {
    __m512i T[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        T[r] = _mm512_add_epi32(_mm512_shuffle_i32x4(P[2 * r], P[2 * r + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i32x4(P[2 * r], P[2 * r + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    __m512i U0 = _mm512_add_epi32(_mm512_unpacklo_epi32(T[0], T[1]), _mm512_unpackhi_epi32(T[0], T[1]));
    __m512i U1 = _mm512_add_epi32(_mm512_unpacklo_epi32(T[2], T[3]), _mm512_unpackhi_epi32(T[2], T[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(U0, U1), _mm512_unpackhi_epi64(U0, U1));
}

EA__T5V void ea__rows_avx512_q8(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int k = p->k, nb = k / EA_QK8_0, m = p->m;
    __m512 *acc = (__m512 *)s->buf; /* m accumulators (driver sizes it) */
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i didx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)sizeof(ea_block_q8_0)));
    for (int j = j0; j < j1; j++) {
        const ea_block_q8_0 *wb = (const ea_block_q8_0 *)(p->w + (size_t)j * p->row_bytes);
        for (int i = 0; i < m; i++) acc[i] = _mm512_setzero_ps();
        for (int g = 0; g < nb; g += 16) {
            int cnt = nb - g < 16 ? nb - g : 16;
            __mmask16 msk = (__mmask16)(cnt == 16 ? 0xffffu : (1u << cnt) - 1);
            __m512i W[8];
#pragma GCC unroll 8
            for (int q = 0; q < 8; q++) {
                int b = g + 2 * q;
                __m256i lo = 2 * q < cnt ? _mm256_loadu_si256((const __m256i *)wb[b].qs) : _mm256_setzero_si256();
                __m256i hi = 2 * q + 1 < cnt ? _mm256_loadu_si256((const __m256i *)wb[b + 1].qs) : _mm256_setzero_si256();
                W[q] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                _mm_prefetch((const char *)(wb + b) + EA__PF, _MM_HINT_T0);
            }
            /* 16 f16 scales at a 34-byte stride: 4-byte gathers (d and the first 2 bytes of qs, inside the block) */
            __m512i dg = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), msk, didx, &wb[g].d, 1);
            __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dg));
            __mmask64 xmsk = cnt == 16 ? ~(__mmask64)0 : (((__mmask64)1 << (cnt * 32 % 64)) - 1);
            for (int i = 0; i < m; i++) {
                const int8_t *xq = p->xq + (size_t)i * k + (size_t)g * EA_QK8_0;
                __m512i P[8];
#pragma GCC unroll 8
                for (int q = 0; q < 8; q++) {
                    __m512i xv;
                    if (2 * q + 2 <= cnt) xv = _mm512_loadu_si512(xq + 64 * q);
                    else if (2 * q < cnt) xv = _mm512_maskz_loadu_epi8(xmsk, xq + 64 * q);
                    else xv = _mm512_setzero_si512();
                    /* x * sign(w): |x| <= 127, so negation cannot overflow */
                    xv = _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(W[q]), _mm512_setzero_si512(), xv);
                    P[q] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(W[q]), xv);
                }
                __m512i isum = _mm512_permutexvar_epi32(perm, ea__blocksum(P));
                __m512 dx = _mm512_maskz_loadu_ps(msk, p->xd + (size_t)i * nb + g);
                __m512 d = _mm512_mul_ps(dw, dx);
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[i]);
            }
        }
        for (int i = 0; i < m; i++) p->y[(size_t)i * p->n + j] = ea__reduce16_avx512(acc[i]);
    }
}

/* ---- q8 activation quantisation ---------------------------------------------- */

/* Same bits as ea__quantize_q8 (matmul.c): amax is exact, d = amax/127 and
 * 1/d are the same IEEE operations, vcvtps2dq rounds half to even like rintf
 * in the default rounding mode, and |q| <= 127 so the narrowing is exact. */
EA__T5 void ea__quantize_q8_avx512(const float *x, int k, int i0, int i1, int8_t *xq, float *xd) {
    int nb = k / EA_QK8_0;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int i = i0; i < i1; i++) {
        const float *xr = x + (size_t)i * k;
        for (int b = 0; b < nb; b++) {
            __m512 v0 = _mm512_loadu_ps(xr + b * EA_QK8_0), v1 = _mm512_loadu_ps(xr + b * EA_QK8_0 + 16);
            __m512 a = _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1));
            float amax = _mm512_reduce_max_ps(a);
            float d = amax / 127.0f;
            float id = d != 0.0f ? 1.0f / d : 0.0f;
            xd[(size_t)i * nb + b] = d;
            __m512 vid = _mm512_set1_ps(id);
            __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)));
            __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid)));
            _mm_storeu_si128((__m128i *)(xq + (size_t)i * k + b * EA_QK8_0), q0);
            _mm_storeu_si128((__m128i *)(xq + (size_t)i * k + b * EA_QK8_0 + 16), q1);
        }
    }
}
