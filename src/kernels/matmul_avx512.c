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
 * When the matrix has a Q8_0x16 copy (tensor/dtype.h; loaders make it on
 * VNNI CPUs without AMX int8) the kernel reads that instead: lanes are 16 W
 * rows, and W is loaded once per block for all X rows (ea__q8_packed).
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_impl.h"

#define EA__T5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define EA__T5V __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#define EA__INL static inline __attribute__((always_inline))

/* Prefetch distance along a W row, in bytes (the q8 rows kernel). The f32 and
 * bf16 tiles instead prefetch, at each k step, the same k of the next tile's
 * W rows into L2 (the AVX2 tile does the same): one tile of rows ahead, so
 * the stream runs a whole tile ahead of the loads. bench_forward on an AMD
 * EPYC (Zen 5), bf16, 2 threads, against the T0 prefetch 1 KiB along each row,
 * two alternated runs: avx512 batch 1 30.1 / 32.2 -> 39.1 / 38.0 tok/s, batch
 * 16 88.3 / 87.2 -> 113.3 / 109.3, batch 64 171.8 / 176.5 -> 206.2 / 205.4;
 * avx512_bf16 batch 1 about 33 -> 44, batch 16 about 98 -> 130. */
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

/* The canonical tree (ea__reduce16_avx512) of a 4 x 4 tile's 16 accumulators
 * at once, and their stores: step by step every add pairs the same two
 * partial sums as the one-accumulator tree (lanes l and l + 8, then l and
 * l + 4, l and l + 2, l and l + 1), but each add serves 2, 4, 8 or 16
 * accumulators, so 15 adds and 30 shuffles replace 16 trees of 4 adds and
 * 4 shuffles. acc[a][b]: W row j0 + a, X row i0 + b; lane group b of the
 * result holds X row b's four outputs. */
EA__INL EA__T5 void ea__store4x4(__m512 acc[8][4], float *y, size_t n) {
    __m512 t[8], u[4], w[2];
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++) { /* accumulators 2p, 2p + 1 (index a * 4 + b): lanes l + (l + 8) */
        __m512 v0 = acc[(2 * p) / 4][(2 * p) % 4], v1 = acc[(2 * p + 1) / 4][(2 * p + 1) % 4];
        t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(3, 2, 3, 2)));
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) /* l + (l + 4) */
        u[q] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * q], t[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(t[2 * q], t[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
    for (int r = 0; r < 2; r++) /* l + (l + 2) */
        w[r] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * r], u[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(u[2 * r], u[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* l + (l + 1): lane 4b + a is accumulator (a, b) */
    __m512 z = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    _mm_storeu_ps(y, _mm512_extractf32x4_ps(z, 0));
    _mm_storeu_ps(y + n, _mm512_extractf32x4_ps(z, 1));
    _mm_storeu_ps(y + 2 * n, _mm512_extractf32x4_ps(z, 2));
    _mm_storeu_ps(y + 3 * n, _mm512_extractf32x4_ps(z, 3));
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
            /* the next tile's rows, at the same k, into L2 */
            _mm_prefetch((const char *)wr[a] + (size_t)kk * eb + (size_t)NR * p->row_bytes, _MM_HINT_T1);
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
    if (MR == 4 && NR == 4) {
        ea__store4x4(acc, p->y + (size_t)i0 * p->n + j0, (size_t)p->n);
        return;
    }
#pragma GCC unroll 8
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) p->y[(size_t)(i0 + b) * p->n + j0 + a] = ea__reduce16_avx512(acc[a][b]);
}

/* Which (i, j) the f32 and bf16 rows functions compute together (never how
 * one is computed): with fewer than 4 X rows (decode) 8 W rows at a time, for
 * more W rows in flight; else 4 x 4 tiles; then the edges. TILE(i, j, MR, NR)
 * computes one tile. The inner loop rereads its operand whole once per step
 * of the outer one. It runs over the X rows (m * XB bytes, as the tile reads
 * them) unless they pass EA__X_L2 bytes, half of a 1 MiB L2, and the chunk's
 * W rows are fewer bytes: then X rows are the outer loop. A 512-token
 * prefill's router (64 f32 rows of 4 KiB against 2 MiB of X) otherwise
 * rereads X from L3 for every 4 W rows; at batch 64 (256 KiB of X, in L2)
 * the swap measured slower. */
#define EA__X_L2 ((size_t)512 << 10)
/* The last 1-3 X rows against 4 W rows, as one tile: each W row's loads then
 * serve all of them (an expert's tokens are seldom a multiple of 4). A bf16
 * prefill of 512 tokens on a Zen 5, 2 threads, one row per tile and this
 * taking the reps in turn in one process: 406.0 / 490.1 / 476.1 / 303.4 /
 * 426.8 -> 437.7 / 484.0 / 478.1 / 329.9 / 413.4 tok/s, which that hour's
 * noise covers; it is kept because it loads less. */
#define EA__TILE_EDGE(TILE, i, j, r)                                        \
    do {                                                                    \
        if ((r) == 3) TILE(i, j, 3, 4);                                     \
        else if ((r) == 2) TILE(i, j, 2, 4);                                \
        else TILE(i, j, 1, 4);                                              \
    } while (0)
#define EA__TILE_ORDER(TILE, m, j0, j1, XB, WB)                             \
    do {                                                                    \
        int j_ = (j0);                                                      \
        if ((m) < 4)                                                        \
            for (; j_ + 8 <= (j1); j_ += 8)                                 \
                for (int i_ = 0; i_ < (m); i_++) TILE(i_, j_, 1, 8);        \
        if ((size_t)(m) * (XB) > EA__X_L2 && (size_t)(m) * (XB) > (size_t)((j1) - j_) * (WB)) { \
            int jt = j_ + (((j1) - j_) & ~3), i_ = 0;                       \
            for (; i_ + 4 <= (m); i_ += 4)                                  \
                for (int t_ = j_; t_ < jt; t_ += 4) TILE(i_, t_, 4, 4);     \
            if (i_ < (m))                                                   \
                for (int t_ = j_; t_ < jt; t_ += 4) EA__TILE_EDGE(TILE, i_, t_, (m) - i_); \
            j_ = jt;                                                        \
        }                                                                   \
        for (; j_ + 4 <= (j1); j_ += 4) {                                   \
            int i_ = 0;                                                     \
            for (; i_ + 4 <= (m); i_ += 4) TILE(i_, j_, 4, 4);              \
            if (i_ < (m)) EA__TILE_EDGE(TILE, i_, j_, (m) - i_);            \
        }                                                                   \
        for (; j_ < (j1); j_++)                                             \
            for (int i_ = 0; i_ < (m); i_++) TILE(i_, j_, 1, 1);            \
    } while (0)

EA__INL EA__T5 void ea__rows5(const ea__mm *p, int j0, int j1, const ea_dtype dt) {
#define EA__TILE5(i, j, MR, NR) ea__tile5(p, i, j, MR, NR, dt)
    EA__TILE_ORDER(EA__TILE5, p->m, j0, j1, (size_t)p->k * 4, p->row_bytes); /* X as f32 */
#undef EA__TILE5
}

EA__T5 void ea__rows_avx512_f(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    switch (p->dtype) {
    case EA_F16: ea__rows5(p, j0, j1, EA_F16); break;
    case EA_BF16: ea__rows5(p, j0, j1, EA_BF16); break;
    default: ea__rows5(p, j0, j1, EA_F32); break;
    }
}

/* ---- bf16 with VDPBF16PS (avx512_bf16) -------------------------------------------- */

#define EA__T5B __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

EA__T5B void ea__bf16_rows(const float *x, int k, int i0, int i1, uint16_t *xb) {
    int kp = ea__k32(k);
    for (int i = i0; i < i1; i++) {
        const float *xr = x + (size_t)i * k;
        for (int kk = 0; kk < kp; kk += 32) {
            int left = k - kk; /* > 0: kk < kp = k rounded up to 32 */
            int n0 = left < 16 ? left : 16, n1 = left < 16 ? 0 : left < 32 ? left - 16 : 16;
            __m512 lo = _mm512_maskz_loadu_ps((__mmask16)((1u << n0) - 1), xr + kk);
            __m512 hi = _mm512_maskz_loadu_ps((__mmask16)((1u << n1) - 1), xr + kk + 16);
            _mm512_storeu_si512(xb + (size_t)i * kp + kk, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
    }
}

/* The zmm of elements [kk, kk + 32) of the 4 rows of the Fx4 group at g
 * (steps st = kk/16 and st + 1 of `steps`): the 256 bytes of the two steps
 * are rows 0-3's first halves, then their second halves, and each row's
 * pair of 32-byte halves is put together with one shuffle. Past the last
 * step the copy holds zeros, as the rows' masked loads give past k; the
 * zmm are those ea__tile_bf loads from the rows. */
EA__INL EA__T5B void ea__fx4_w4(const uint8_t *g, int st, int steps, __m512i wv[4]) {
    const uint8_t *w = g + (size_t)st * (EA_FX4_ROWS * EA_FX4_STEP * 2);
    __m512i lo01 = _mm512_loadu_si512(w), lo23 = _mm512_loadu_si512(w + 64);
    __m512i hi01 = st + 1 < steps ? _mm512_loadu_si512(w + 128) : _mm512_setzero_si512();
    __m512i hi23 = st + 1 < steps ? _mm512_loadu_si512(w + 192) : _mm512_setzero_si512();
    wv[0] = _mm512_shuffle_i64x2(lo01, hi01, _MM_SHUFFLE(1, 0, 1, 0));
    wv[1] = _mm512_shuffle_i64x2(lo01, hi01, _MM_SHUFFLE(3, 2, 3, 2));
    wv[2] = _mm512_shuffle_i64x2(lo23, hi23, _MM_SHUFFLE(1, 0, 1, 0));
    wv[3] = _mm512_shuffle_i64x2(lo23, hi23, _MM_SHUFFLE(3, 2, 3, 2));
}

/* Tile of MR X rows x NR W rows; every (i, j) runs the same VDPBF16PS chain
 * over its 16 lanes whatever the tile (matmul_impl.h). FX: W comes from the
 * Fx4 copy (NR a multiple of 4, j0 of 4), else from the rows. */
EA__INL EA__T5B void ea__tile_bf_w(const ea__mm *p, int i0, int j0, const int MR, const int NR, const int FX) {
    int k = p->k, kp = ea__k32(k), kmain = k & ~31, steps = (k + EA_FX4_STEP - 1) / EA_FX4_STEP;
    const uint16_t *wr[8], *xr[4];
    const uint8_t *wg = FX ? ea__w_row(p, j0) : NULL;
    size_t gb = FX ? ea_fx4_group_bytes((size_t)k, 2) : 0;
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int a = 0; a < NR; a++) wr[a] = (const uint16_t *)(p->w + (size_t)(j0 + a) * p->row_bytes);
#pragma GCC unroll 4
    for (int b = 0; b < MR; b++) xr[b] = p->xp + (size_t)(i0 + b) * kp;
#pragma GCC unroll 8
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) acc[a][b] = _mm512_setzero_ps();
    for (int kk = 0; kk < kp; kk += 32) {
        __m512i wv[8];
        if (FX) {
#pragma GCC unroll 2
            for (int q = 0; q < NR / 4; q++) {
                /* the next tile's group, at the same k, into L2 */
                const char *nx = (const char *)wg + (size_t)(NR / 4 + q) * gb + (size_t)kk * 8;
#pragma GCC unroll 4
                for (int l = 0; l < 4; l++) _mm_prefetch(nx + 64 * l, _MM_HINT_T1);
                ea__fx4_w4(wg + (size_t)q * gb, kk / EA_FX4_STEP, steps, wv + 4 * q);
            }
        } else {
            __mmask32 msk = kk < kmain ? ~(__mmask32)0 : (__mmask32)((1ull << (k - kmain)) - 1);
#pragma GCC unroll 8
            for (int a = 0; a < NR; a++) {
                /* the next tile's rows, at the same k, into L2 */
                _mm_prefetch((const char *)(wr[a] + kk) + (size_t)NR * p->row_bytes, _MM_HINT_T1);
                wv[a] = _mm512_maskz_loadu_epi16(msk, wr[a] + kk);
            }
        }
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(xr[b] + kk);
#pragma GCC unroll 8
            for (int a = 0; a < NR; a++) acc[a][b] = _mm512_dpbf16_ps(acc[a][b], (__m512bh)wv[a], xv);
        }
    }
    if (MR == 4 && NR == 4) {
        ea__store4x4(acc, p->y + (size_t)i0 * p->n + j0, (size_t)p->n);
        return;
    }
#pragma GCC unroll 8
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) p->y[(size_t)(i0 + b) * p->n + j0 + a] = ea__reduce16_avx512(acc[a][b]);
}

/* A tile from the Fx4 copy when there is one and the tile covers whole
 * groups: batches then read the same huge-page copy as decode, and the rows
 * (left on the file mapping by the loader) are not read at all. */
EA__INL EA__T5B void ea__tile_bf(const ea__mm *p, int i0, int j0, const int MR, const int NR) {
    if (NR % EA_FX4_ROWS == 0 && p->wp && j0 % EA_FX4_ROWS == 0) ea__tile_bf_w(p, i0, j0, MR, NR, 1);
    else ea__tile_bf_w(p, i0, j0, MR, NR, 0);
}

/* Prefetch distance in an Fx4 copy, in bytes (the decode loop below). On a
 * Zen 5, bf16 bench_forward at batch 1 (2 threads, the distances taking
 * the decode steps in turn in one process): 4 KiB 33.9 / 28.8 / 45.8 tok/s
 * against 34.5 / 30.0 / 50.4 at 2 KiB; then 2 KiB 50.1 / 50.3 / 50.0, 1 KiB
 * 48.8 / 50.1 / 48.6, 512 B 46.1 / 46.5 / 48.4 (as EA__Q16_PF_DECODE). */
#define EA__FX4_PF 2048

/* Decode (m = 1) of the 4 rows of the Fx4 group at ja (TWO: and of the group
 * at jb, step by step beside it). Row a's elements [kk, kk + 32) are the
 * a-th 32 bytes of the copy's steps kk/16 and kk/16 + 1 (zeros past its last
 * step, as the rows' masked loads give zeros past k); put together they are
 * the zmm ea__tile_bf loads from the row, so every row runs the same
 * VDPBF16PS chain on the same operands: the same bits. A group is one
 * sequential stream where a tile of rows is 8 (docs/kernels.md). */
EA__INL EA__T5B void ea__bf_decode4(const ea__mm *p, int ja, int jb, const int TWO) {
    int kp = ea__k32(p->k), steps = (p->k + EA_FX4_STEP - 1) / EA_FX4_STEP;
    const size_t rs = EA_FX4_STEP * 2, ss = EA_FX4_ROWS * rs; /* bytes of a row's step, of a step */
    const uint8_t *g[2] = {ea__w_row(p, ja), TWO ? ea__w_row(p, jb) : NULL};
    __m512 acc[2][4];
#pragma GCC unroll 2
    for (int t = 0; t <= TWO; t++)
#pragma GCC unroll 4
        for (int a = 0; a < 4; a++) acc[t][a] = _mm512_setzero_ps();
    for (int kk = 0; kk < kp; kk += 32) {
        int st = kk / EA_FX4_STEP;
        __m512bh xv = (__m512bh)_mm512_loadu_si512(p->xp + kk);
#pragma GCC unroll 2
        for (int t = 0; t <= TWO; t++) {
            const uint8_t *w = g[t] + (size_t)st * ss;
#pragma GCC unroll 4
            for (int l = 0; l < 4; l++) _mm_prefetch((const char *)w + EA__FX4_PF + 64 * l, _MM_HINT_T0);
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) {
                __m256i lo = _mm256_loadu_si256((const __m256i *)(w + (size_t)a * rs));
                __m256i hi = st + 1 < steps ? _mm256_loadu_si256((const __m256i *)(w + ss + (size_t)a * rs))
                                            : _mm256_setzero_si256();
                __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                acc[t][a] = _mm512_dpbf16_ps(acc[t][a], (__m512bh)wv, xv);
            }
        }
    }
#pragma GCC unroll 2
    for (int t = 0; t <= TWO; t++)
#pragma GCC unroll 4
        for (int a = 0; a < 4; a++) p->y[(t ? jb : ja) + a] = ea__reduce16_avx512(acc[t][a]);
}

EA__T5B void ea__rows_avx512_bf16(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    (void)s;
    int j = j0;
    if (p->m == 1 && p->wp) { /* decode from an Fx4 copy: group g beside g + ng/2, two streams */
        for (; j < j1 && j % EA_FX4_ROWS; j++) ea__tile_bf(p, 0, j, 1, 1);
        int ng = (j1 - j) / EA_FX4_ROWS, h = ng / 2;
        for (int g = 0; g < h; g++) ea__bf_decode4(p, j + g * EA_FX4_ROWS, j + (g + h) * EA_FX4_ROWS, 1);
        j += 2 * h * EA_FX4_ROWS;
        for (; j + EA_FX4_ROWS <= j1; j += EA_FX4_ROWS) ea__bf_decode4(p, j, 0, 0);
    }
#define EA__TILE_BF(i, jj, MR, NR) ea__tile_bf(p, i, jj, MR, NR)
    /* the rows (p->w), also when there is a copy; X as padded bf16 */
    EA__TILE_ORDER(EA__TILE_BF, p->m, j, j1, (size_t)ea__k32(p->k) * 2, p->row_bytes);
#undef EA__TILE_BF
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

EA__T5V static void ea__q8_rows(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int k = p->k, nb = k / EA_QK8_0, m = p->m;
    __m512 *acc = (__m512 *)s->buf; /* m accumulators (driver sizes it) */
    s->held_xq = NULL;               /* over whatever ea__q8_packed left */
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

/* ---- q8_0 with VNNI on Q8_0x16 copies -------------------------------------------- */

/* An int32 read from int8 data (any alignment). */
typedef int32_t ea__i32u __attribute__((may_alias, aligned(1)));

/* Rows of X per pass over a group's blocks: their accumulators (16 zmm each)
 * stay in L1 while the group's W (16 rows) is reread from L1/L2 per pass. */
#define EA__Q16_MT 16
/* Prefetch distance in the copy, in bytes, for batches (16 blocks of 16 rows).
 * bench_matmul on an AMD EPYC (Zen 5), q8_0 m = 8, 1 thread, GOP/s for 0 / 1
 * / 2 / 4 / 8 / 16 / 32 KiB: LM head 114 / 162 / 151 / 188 / 200-240 / 269 /
 * 243, expert up 110 / 155 / 163 / 199 / 204 / 236 / 240. */
#define EA__Q16_PF 8192
/* ... and for decode (m = 1), where the loop streams at the memory's speed
 * and the hardware prefetcher runs ahead of it: further software prefetches
 * only crowd it. The same Zen 5, 2 threads, one process timing the
 * distances call by call in turn (GB/s, three runs): expert up x 8 (batch
 * call) 46.8 / 47.6 / 43.6 at 8 KiB, 49.3 / 49.7 / 46.2 at 2 KiB; down x 8
 * 43.0 / 43.4 / 41.3 and 46.0 / 46.5 / 43.9; LM head 53.5 / 50.6 / 50.1 and
 * 55.9 / 54.5 / 54.3. 1 KiB and 512 bytes read less than 2 KiB. In
 * bench_forward, q8_0 batch 1, the distances taking the decode steps in
 * turn: 2 KiB 65.9 / 65.1 / 58.0 tok/s against 62.7 / 61.4 / 56.9 at 8 KiB;
 * then 2 KiB 82.9 / 79.7 / 75.8, 4 KiB 82.8 / 79.6 / 74.3, 1 KiB 77.9 /
 * 75.8 / 72.7. */
#define EA__Q16_PF_DECODE 2048

static size_t ea__q16_sx_bytes(int m, int k) { return ((size_t)m * (size_t)(k / EA_QK8_0) * 4 + 63) & ~(size_t)63; }

size_t ea__avx512_q8_scratch_bytes(int m, int k) {
    size_t rows = (size_t)m * 64, packed = ea__q16_sx_bytes(m, k) + (size_t)EA__Q16_MT * 16 * 64;
    return rows > packed ? rows : packed;
}

/* Lanes are the 16 W rows of a group; block b of every row is one pass of 8
 * vpdpbusd(w + 128, x dword broadcast), started from -128 * sum(x block), so
 * each lane ends with the exact isum of its row. Lane l of accumulator
 * acc[i][b % 16] then takes fma(isum, dw * dx, acc) in increasing b: for
 * every row the canonical 16 chains of matmul_impl.h, one row per lane, and
 * the final tree is 15 vertical adds. */

/* Block b of group G: its 8 runs into W, its 16 scales as f32; prefetches
 * the same bytes PF further on (even b: the pair's scales and b's runs, 9
 * lines; odd b: b's runs, 8). Sending the prefetch past a chunk's end to
 * the next chunk's first rows (s->pf_next) instead measured the same
 * (bench_matmul, expert shapes, Zen 5). */
EA__INL EA__T5V __m512 ea__q16_load(const uint8_t *G, int b, __m512i W[8], const int PF) {
    const uint8_t *pair = G + (size_t)(b / 2) * EA_Q8X16_PAIR, *wb = pair + 64 + (size_t)(b & 1) * 512;
    const char *pf = (const char *)pair + (b & 1) * 576 + PF;
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) W[t] = _mm512_loadu_si512(wb + 64 * t);
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) _mm_prefetch(pf + 64 * t, _MM_HINT_T0);
    if (!(b & 1)) _mm_prefetch(pf + 512, _MM_HINT_T0);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pair + (size_t)(b & 1) * 32)));
}

/* One X row's block (its 32 int8 at xw, -128 * their sum sxb, scale xdb)
 * against a loaded block: acc + isum * (dw * dx), lane = W row. */
EA__INL EA__T5V __m512 ea__q16_row(const __m512i W[8], __m512 dw, const ea__i32u *xw, int32_t sxb, float xdb,
                                   __m512 acc) {
    /* two chains (integer adds: exact in any order); x dwords as broadcast operands */
    __m512i s0 = _mm512_set1_epi32(sxb), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int t = 0; t < 8; t += 2) {
        s0 = _mm512_dpbusd_epi32(s0, W[t], _mm512_set1_epi32(xw[t]));
        s1 = _mm512_dpbusd_epi32(s1, W[t + 1], _mm512_set1_epi32(xw[t + 1]));
    }
    __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xdb));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), d, acc);
}

/* The canonical tree over a row's 16 lane accumulators; its nr outputs to y. */
EA__INL EA__T5V void ea__q16_store(const __m512 *a, float *y, int nr) {
    __m512 s8[8], s4[4];
#pragma GCC unroll 8
    for (int l = 0; l < 8; l++) s8[l] = _mm512_add_ps(a[l], a[l + 8]);
#pragma GCC unroll 4
    for (int l = 0; l < 4; l++) s4[l] = _mm512_add_ps(s8[l], s8[l + 4]);
    __m512 v = _mm512_add_ps(_mm512_add_ps(s4[0], s4[2]), _mm512_add_ps(s4[1], s4[3]));
    _mm512_mask_storeu_ps(y, (__mmask16)((1u << nr) - 1), v);
}

/* Decode (m = 1): the chunk's ng groups as two streams, group g beside
 * group g + ng/2 (the last one alone when ng is odd), as the AVX2 decode
 * loop does (docs/kernels.md, "two streams"). On a Zen 5, 2 threads, the
 * LM head read 5-20% more with two; the expert shapes the same. Every row
 * takes the operations of ea__q8_packed's loop. */
EA__T5V static void ea__q8_packed_decode(const ea__mm *p, int j0, int j1, const int32_t *sx) {
    int nb = p->k / EA_QK8_0, ng = (j1 - j0 + EA_Q8X16_ROWS - 1) / EA_Q8X16_ROWS, h = ng / 2;
    const ea__i32u *xw = (const ea__i32u *)p->xq;
    for (int g = 0; g < h + ng % 2; g++) {
        int two = g < h, ga = two ? g : ng - 1, jb = j0 + (g + h) * EA_Q8X16_ROWS;
        const uint8_t *G = ea__w_row(p, j0 + ga * EA_Q8X16_ROWS), *G2 = two ? ea__w_row(p, jb) : NULL;
        __m512 acc[16], acc2[16];
        for (int q = 0; q < 16; q++) acc[q] = acc2[q] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            __m512i W[8];
            __m512 dw = ea__q16_load(G, b, W, EA__Q16_PF_DECODE);
            acc[b & 15] = ea__q16_row(W, dw, xw + 8 * b, sx[b], p->xd[b], acc[b & 15]);
            if (two) {
                dw = ea__q16_load(G2, b, W, EA__Q16_PF_DECODE);
                acc2[b & 15] = ea__q16_row(W, dw, xw + 8 * b, sx[b], p->xd[b], acc2[b & 15]);
            }
        }
        int ja = j0 + ga * EA_Q8X16_ROWS;
        ea__q16_store(acc, p->y + ja, j1 - ja < EA_Q8X16_ROWS ? j1 - ja : EA_Q8X16_ROWS);
        if (two) ea__q16_store(acc2, p->y + jb, j1 - jb < EA_Q8X16_ROWS ? j1 - jb : EA_Q8X16_ROWS);
    }
}

EA__T5V static void ea__q8_packed(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int k = p->k, nb = k / EA_QK8_0, m = p->m;
    const int8_t *xq = p->xq;
    const float *xd = p->xd;
    int32_t *sx = (int32_t *)s->buf; /* (m, nb): -128 * the sum of each X block */
    __m512 *acc = (__m512 *)(s->buf + ea__q16_sx_bytes(m, k)); /* (EA__Q16_MT, 16) */
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    /* the sums, unless this thread's previous chunk left them for the same X
     * (the chunks of one product, gate and up on one x): a batch-64 LM head
     * is some 150 chunks per thread */
    if (!(s->held_xq == xq && s->held_m == m && s->held_k == k)) {
        for (int i = 0; i < m; i++)
            for (int b = 0; b < nb; b++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(xq + (size_t)i * k + (size_t)b * EA_QK8_0));
                __m256i u = _mm256_sad_epu8(_mm256_xor_si256(v, flip), _mm256_setzero_si256()); /* sums of x + 128 */
                __m128i h = _mm_add_epi64(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
                int32_t sum = (int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
                sx[(size_t)i * nb + b] = -128 * sum;
            }
        s->held_xq = xq;
        s->held_m = m;
        s->held_k = k;
    }
    if (m == 1) {
        ea__q8_packed_decode(p, j0, j1, sx);
        return;
    }
    for (int g0 = j0; g0 < j1; g0 += EA_Q8X16_ROWS) {
        const uint8_t *G = ea__w_row(p, g0);
        int nr = j1 - g0 < EA_Q8X16_ROWS ? j1 - g0 : EA_Q8X16_ROWS;
        for (int i0 = 0; i0 < m; i0 += EA__Q16_MT) {
            int mt = m - i0 < EA__Q16_MT ? m - i0 : EA__Q16_MT;
            /* blocks 0-15 start their lanes from +0 (no pass zeroing mt * 1 KiB: 12% of a batch-64
             * step went to that memset); lanes no block reaches are zeroed */
            for (int i = 0; i < mt; i++)
                for (int q = nb < 16 ? nb : 16; q < 16; q++) acc[i * 16 + q] = _mm512_setzero_ps();
            for (int b = 0; b < nb; b++) {
                __m512i W[8];
                __m512 dw = ea__q16_load(G, b, W, EA__Q16_PF);
                for (int i = 0; i < mt; i++) {
                    size_t row = (size_t)(i0 + i);
                    const ea__i32u *xw = (const ea__i32u *)(xq + row * (size_t)k + (size_t)b * EA_QK8_0);
                    __m512 *a = &acc[i * 16 + (b & 15)];
                    *a = ea__q16_row(W, dw, xw, sx[row * (size_t)nb + (size_t)b], xd[row * (size_t)nb + (size_t)b],
                                     b < 16 ? _mm512_setzero_ps() : *a);
                }
            }
            for (int i = 0; i < mt; i++) ea__q16_store(&acc[i * 16], p->y + (size_t)(i0 + i) * p->n + g0, nr);
        }
    }
}

EA__T5V void ea__rows_avx512_q8(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    if (p->wp) ea__q8_packed(p, j0, j1, s);
    else ea__q8_rows(p, j0, j1, s);
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
