/*
 * matmul_amx_q8.c — q8_0 weights on AMX int8 tiles, for batches (m >= 5).
 *
 * Same trick as matmul_amx.c: Yᵀ = W · Xᵀ with W as the A operand straight
 * from the mapping. A q8_0 row is blocks of (f16 d, 32 x int8), so one A tile
 * is the 32 qs bytes of block b of 16 W rows (colsb 32, stride = row size).
 * X is quantised per row (ea__quantize_q8, as for every q8 kernel) and packed
 * per 16-token block and per k-block into B tiles (8 rows x 16 tokens x 4 bytes)
 * followed by the 16 tokens' f32 scales:
 *
 *   xp + (tb * nb + b) * 576:  [0, 512)  B[r][4 t + e] = xq[16 tb + t][32 b + 4 r + e]
 *                              [512, 576) dx[t] = xd[16 tb + t][b]   (0 for t >= m)
 *
 * One TDPBSSD per block gives the exact int32 isum_b of every (j, i) of the
 * tile (|isum| < 2^24, no wrap). The float part is the canonical Q order of
 * matmul_impl.h, vectorised over the 16 tokens: lane b%16 of (j, i) takes
 * fma((float)isum_b, f16(dw_jb) * dx_ib, acc) in increasing b, then the same
 * tree. So this kernel gives the same bits as the VNNI, AVX2 and scalar q8
 * kernels — which is why the driver may pick it by m (tests check m=1 vs 65
 * and AMX vs scalar bit for bit).
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_impl.h"

#define EA__TQ __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define EA__T5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

#define EA__QTILE 576

size_t ea__amx_q8_pack_bytes(int m, int k) {
    size_t ntb = (size_t)(m + EA__AMX_TB - 1) / EA__AMX_TB;
    return ntb * (size_t)(k / EA_QK8_0) * EA__QTILE + 64;
}

size_t ea__amx_q8_scratch_bytes(int k) {
    /* C tiles (2 pairs x 2 blocks x 2 x 1 KiB), accumulators (2 x 16 lanes x 16 rows x 16 tokens f32),
     * result (16 x 16 f32), 16 zero-padded W rows */
    return 8192 + 2 * 16 * 16 * 64 + 1024 + 16 * ((size_t)k / EA_QK8_0 * sizeof(ea_block_q8_0)) + 128;
}

EA__T5 void ea__amx_q8_pack(const int8_t *xq, const float *xd, int m, int k, int tb, uint8_t *xp) {
    int nb = k / EA_QK8_0;
    int nt = m - tb * 16 < 16 ? m - tb * 16 : 16;
    float tmp[16 * 16]; /* token t: its 8 dwords of block b, then 8 zero dwords (moved as bits) */
    memset(tmp, 0, sizeof tmp);
    for (int b = 0; b < nb; b++) {
        uint8_t *t0 = xp + ((size_t)tb * nb + b) * EA__QTILE;
        float *dx = (float *)(t0 + 512);
        for (int t = 0; t < 16; t++) {
            int i = tb * 16 + t;
            if (t < nt) memcpy(tmp + 16 * t, xq + (size_t)i * k + (size_t)b * EA_QK8_0, 32);
            dx[t] = t < nt ? xd[(size_t)i * nb + b] : 0.0f;
        }
        ea__put_transposed(tmp, 16, (float *)t0, 16, 8, 16); /* tile[r][t] = dword r of token t */
    }
}


/* acc[h][b%16][jr] += (float)isum[h][jr][t] * (dw[jr][b] * dx[h][t]), vectorised over tokens t. */
EA__T5 static inline __attribute__((always_inline)) void ea__q8_float_part(const ea__mm *p, const uint8_t *w, size_t rb,
                                                                        int tb, int nb, int nh, int b, const int32_t *c,
                                                                        __m512 *acc) {
    int l = b % 16;
    for (int h = 0; h < nh; h++) {
        const uint8_t *xt = (const uint8_t *)p->xp + ((size_t)(tb + h) * nb + b) * EA__QTILE;
        __m512 dx = _mm512_loadu_ps((const float *)(xt + 512));
        __m512 *a = acc + (h * 16 + l) * 16;
#pragma GCC unroll 16
        for (int jr = 0; jr < 16; jr++) {
            uint16_t dh;
            memcpy(&dh, w + (size_t)jr * rb + (size_t)b * sizeof(ea_block_q8_0), 2);
            __m512 d = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(dh)), dx);
            __m512 cf = _mm512_cvtepi32_ps(_mm512_loadu_si512(c + h * 256 + jr * 16));
            /* first pass (b < 16): the lane starts at +0, as in every q8 kernel */
            a[jr] = _mm512_fmadd_ps(cf, d, b < 16 ? _mm512_setzero_ps() : a[jr]);
        }
    }
}

EA__TQ void ea__rows_amx_q8(const ea__mm *p, int j0, int j1, ea__scratch *sc) {
    int k = p->k, m = p->m, n = p->n, nb = k / EA_QK8_0;
    int ntb = (m + 15) / 16;
    size_t rb = p->row_bytes;
    int32_t *cb = (int32_t *)sc->buf;                    /* 2 pairs x 2 blocks x 2 x 16 x 16 int32 */
    __m512 *acc = (__m512 *)(sc->buf + 8192);            /* [h][lane][row] over 16 tokens */
    float *res = (float *)(sc->buf + 8192 + 2 * 16 * 16 * 64);
    uint8_t *wt = sc->buf + 8192 + 2 * 16 * 16 * 64 + 1024;

    ea__amx_config(EA__AMX_CFG_Q8); /* C: 16 W rows x 16 tokens int32; A: 16 W rows x 32 int8; B: 8 x (16 x 4 int8) */

    for (int jb = j0; jb < j1; jb += 16) {
        int nr = j1 - jb < 16 ? j1 - jb : 16;
        const uint8_t *w = p->w + (size_t)jb * rb;
        /* what this thread reads after these 16 rows: the next 16, or the next product's first rows */
        size_t pf_bytes;
        const uint8_t *pf = ea__pf_after(p, sc, jb, j1, 16, &pf_bytes);
        if (nr < 16) {
            memcpy(wt, w, (size_t)nr * rb);
            memset(wt + (size_t)nr * rb, 0, (size_t)(16 - nr) * rb);
            w = wt;
        }
        for (int tb = 0; tb < ntb; tb += 2) {
            int nh = tb + 1 < ntb ? 2 : 1;
            int nl = nb < 16 ? nb : 16; /* lanes in use (written first at b = lane); the others are +0 */
            /* Two blocks in flight (C tiles 0,1 and 2,3), so one block's
             * zero/multiply/store chain overlaps the next; the int32 tiles of a
             * pair are stored while the previous pair's float part runs (a
             * vector load right after a tile store of the same bytes waits). */
            int npairs = (nb + 1) / 2;
            int pf_lines = tb == 0 ? ea__pf_lines(pf, pf_bytes, npairs) : 0;
            for (int pp = 0; pp <= npairs; pp++) {
                if (pp < npairs) {
                    for (int l = 0; l < pf_lines; l++)
                        _mm_prefetch((const char *)pf + ((size_t)pp * pf_lines + l) * 64, _MM_HINT_T1);
                    int b0 = 2 * pp, has1 = b0 + 1 < nb;
                    const uint8_t *x0 = (const uint8_t *)p->xp + ((size_t)tb * nb + b0) * EA__QTILE;
                    const uint8_t *x1 = x0 + (size_t)nb * EA__QTILE; /* next token block */
                    int32_t *c = cb + (pp & 1) * 1024;
                    _tile_loadd(4, w + (size_t)b0 * sizeof(ea_block_q8_0) + 2, rb);
                    _tile_zero(0);
                    _tile_loadd(6, x0, 64);
                    _tile_dpbssd(0, 4, 6);
                    if (nh == 2) {
                        _tile_zero(1);
                        _tile_loadd(7, x1, 64);
                        _tile_dpbssd(1, 4, 7);
                    }
                    if (has1) {
                        _tile_loadd(5, w + (size_t)(b0 + 1) * sizeof(ea_block_q8_0) + 2, rb);
                        _tile_zero(2);
                        _tile_loadd(6, x0 + EA__QTILE, 64);
                        _tile_dpbssd(2, 5, 6);
                        if (nh == 2) {
                            _tile_zero(3);
                            _tile_loadd(7, x1 + EA__QTILE, 64);
                            _tile_dpbssd(3, 5, 7);
                        }
                    }
                    _tile_stored(0, c, 64);
                    if (nh == 2) _tile_stored(1, c + 256, 64);
                    if (has1) {
                        _tile_stored(2, c + 512, 64);
                        if (nh == 2) _tile_stored(3, c + 768, 64);
                    }
                }
                if (pp > 0) {
                    int b0 = 2 * (pp - 1);
                    const int32_t *c = cb + ((pp - 1) & 1) * 1024;
                    ea__q8_float_part(p, w, rb, tb, nb, nh, b0, c, acc);
                    if (b0 + 1 < nb) ea__q8_float_part(p, w, rb, tb, nb, nh, b0 + 1, c + 512, acc);
                }
            }
            for (int h = 0; h < nh; h++) {
                __m512 *a = acc + h * 16 * 16;
                for (int jr = 0; jr < 16; jr++) { /* canonical tree over the 16 lanes (unused lanes: +0) */
                    __m512 s8[8], s4[4], z = _mm512_setzero_ps();
                    for (int q = 0; q < 8; q++)
                        s8[q] = _mm512_add_ps(q < nl ? a[q * 16 + jr] : z, q + 8 < nl ? a[(q + 8) * 16 + jr] : z);
                    for (int q = 0; q < 4; q++) s4[q] = _mm512_add_ps(s8[q], s8[q + 4]);
                    __m512 s20 = _mm512_add_ps(s4[0], s4[2]), s21 = _mm512_add_ps(s4[1], s4[3]);
                    _mm512_storeu_ps(res + jr * 16, _mm512_add_ps(s20, s21));
                }
                int t0 = (tb + h) * 16, nt = m - t0 < 16 ? m - t0 : 16;
                ea__put_transposed(res, 16, p->y + (size_t)t0 * n + jb, n, nt, nr);
            }
        }
    }
}
