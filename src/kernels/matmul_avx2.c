/*
 * matmul_avx2.c — AVX2 + FMA + F16C variants. Compiled per function with
 * target attributes, so the rest of the build needs no -mavx2; called only
 * after the driver checked the CPU.
 *
 * Bit-identical to matmul_scalar.c: the 16 canonical lanes are two ymm
 * registers (lanes 0-7, 8-15); the k tail is zero-filled, which adds +0*0 to
 * an accumulator that is never -0 (it starts at +0 and a sum is -0 only if
 * both terms are), so it changes nothing, like the scalar loop that skips it.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_impl.h"

#define EA__T2 __attribute__((target("avx2,fma,f16c")))
#define EA__INL static inline __attribute__((always_inline))

/* 8 consecutive weights as f32. */
EA__INL EA__T2 __m256 ea__ld8(const uint8_t *row, ea_dtype dt, int kk) {
    switch (dt) {
    case EA_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)kk)));
    case EA_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)kk))), 16));
    default: return _mm256_loadu_ps((const float *)(row + 4 * (size_t)kk));
    }
}

EA__INL EA__T2 float ea__reduce16_avx2(__m256 a0, __m256 a1) {
    __m256 s8 = _mm256_add_ps(a0, a1);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* NR W rows x MR X rows; one pair of ymm accumulators per (i, j). */
EA__INL EA__T2 void ea__tile2(const ea__mm *p, int i0, int j0, const int MR, const int NR, const ea_dtype dt) {
    int k = p->k, kmain = k & ~15;
    const uint8_t *wr[4];
    const float *xr[4];
    __m256 acc[4][4][2];
#pragma GCC unroll 4
    for (int a = 0; a < NR; a++) wr[a] = p->w + (size_t)(j0 + a) * p->row_bytes;
#pragma GCC unroll 4
    for (int b = 0; b < MR; b++) xr[b] = p->x + (size_t)(i0 + b) * k;
#pragma GCC unroll 4
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) acc[a][b][0] = acc[a][b][1] = _mm256_setzero_ps();
    for (int kk = 0; kk < kmain; kk += 16) {
        __m256 wv[4][2];
#pragma GCC unroll 4
        for (int a = 0; a < NR; a++) {
            _mm_prefetch((const char *)wr[a] + (size_t)kk * ea_dtypes[dt].block_bytes + 768, _MM_HINT_T0);
            wv[a][0] = ea__ld8(wr[a], dt, kk);
            wv[a][1] = ea__ld8(wr[a], dt, kk + 8);
        }
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) {
            __m256 x0 = _mm256_loadu_ps(xr[b] + kk), x1 = _mm256_loadu_ps(xr[b] + kk + 8);
#pragma GCC unroll 4
            for (int a = 0; a < NR; a++) {
                acc[a][b][0] = _mm256_fmadd_ps(wv[a][0], x0, acc[a][b][0]);
                acc[a][b][1] = _mm256_fmadd_ps(wv[a][1], x1, acc[a][b][1]);
            }
        }
    }
    if (kmain < k) { /* zero-filled tail through a small buffer */
        int r = k - kmain;
        float wt[4][16], xt[16];
        for (int a = 0; a < NR; a++) {
            memset(wt[a], 0, sizeof wt[a]);
            ea_dtypes[dt].to_f32(wr[a] + (size_t)kmain * ea_dtypes[dt].block_bytes, wt[a], (size_t)r);
        }
        for (int b = 0; b < MR; b++) {
            memset(xt, 0, sizeof xt);
            memcpy(xt, xr[b] + kmain, (size_t)r * sizeof(float));
            for (int a = 0; a < NR; a++) {
                acc[a][b][0] = _mm256_fmadd_ps(_mm256_loadu_ps(wt[a]), _mm256_loadu_ps(xt), acc[a][b][0]);
                acc[a][b][1] = _mm256_fmadd_ps(_mm256_loadu_ps(wt[a] + 8), _mm256_loadu_ps(xt + 8), acc[a][b][1]);
            }
        }
    }
#pragma GCC unroll 4
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++)
            p->y[(size_t)(i0 + b) * p->n + j0 + a] = ea__reduce16_avx2(acc[a][b][0], acc[a][b][1]);
}

EA__INL EA__T2 void ea__rows2(const ea__mm *p, int j0, int j1, const ea_dtype dt) {
    int j = j0;
    for (; j + 3 <= j1; j += 3) {
        int i = 0;
        for (; i + 3 <= p->m; i += 3) ea__tile2(p, i, j, 3, 3, dt);
        for (; i < p->m; i++) ea__tile2(p, i, j, 1, 3, dt);
    }
    for (; j < j1; j++)
        for (int i = 0; i < p->m; i++) ea__tile2(p, i, j, 1, 1, dt);
}

EA__T2 void ea__rows_avx2_f(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    switch (p->dtype) {
    case EA_F16: ea__rows2(p, j0, j1, EA_F16); break;
    case EA_BF16: ea__rows2(p, j0, j1, EA_BF16); break;
    default: ea__rows2(p, j0, j1, EA_F32); break;
    }
}

/* Exact int32 dot of one q8 block: |w| * (x * sign w) in u8 x s8 pairs
 * (each pair <= 2*128*127, no saturation), widened to int32. */
EA__INL EA__T2 int32_t ea__q8_block_avx2(const int8_t *wq, const int8_t *xq) {
    __m256i w = _mm256_loadu_si256((const __m256i *)wq), x = _mm256_loadu_si256((const __m256i *)xq);
    __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p32), _mm256_extracti128_si256(p32, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

EA__T2 void ea__rows_avx2_q8(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int k = p->k, nb = k / EA_QK8_0;
    for (int j = j0; j < j1; j++) {
        const ea_block_q8_0 *wb = (const ea_block_q8_0 *)(p->w + (size_t)j * p->row_bytes);
        _mm_prefetch((const char *)(wb + nb) + 0, _MM_HINT_T0);
        for (int i = 0; i < p->m; i++) {
            const int8_t *xq = p->xq + (size_t)i * k;
            const float *xd = p->xd + (size_t)i * nb;
            __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
            for (int g = 0; g < nb; g += 16) {
                float fs[16], dw[16];
                int cnt = nb - g < 16 ? nb - g : 16;
                memset(fs, 0, sizeof fs);
                memset(dw, 0, sizeof dw);
                for (int l = 0; l < cnt; l++) {
                    fs[l] = (float)ea__q8_block_avx2(wb[g + l].qs, xq + (size_t)(g + l) * EA_QK8_0);
                    dw[l] = ea_f16_to_f32(wb[g + l].d) * xd[g + l];
                }
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(fs), _mm256_loadu_ps(dw), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(fs + 8), _mm256_loadu_ps(dw + 8), acc1);
            }
            p->y[(size_t)i * p->n + j] = ea__reduce16_avx2(acc0, acc1);
        }
    }
}
