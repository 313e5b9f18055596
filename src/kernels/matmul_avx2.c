/*
 * matmul_avx2.c — AVX2 + FMA + F16C variants. Compiled per function with
 * target attributes, so the rest of the build needs no -mavx2; called only
 * after the driver checked the CPU.
 *
 * Bit-identical to matmul_scalar.c: the 16 canonical lanes are two ymm
 * registers (lanes 0-7, 8-15); the k tail is zero-filled, which adds +0*0 to
 * an accumulator that is never -0 (it starts at +0 and a sum is -0 only if
 * both terms are), so it changes nothing, like the scalar loop that skips it.
 * The F tiles read W from the rows, or from the matrix's Fx4 copy
 * (tensor/dtype.h: 4 rows' 16-element steps side by side) when the loader
 * made one; ea__f_row hides which, and a decode tile then reads one group.
 * From 64 tokens on the F products run tiles in the broadcast form instead
 * (one canonical lane of 8 W rows per register; ea__rows2_bc).
 *
 * q8_0 runs vector over 8 W rows (ea__rows_avx2_q8): exact int32 block sums
 * with the |w| * (x * sign w) vpmaddubsw trick, then lane b%16 of every (j, i)
 * takes fma(isum, dw*dx, acc) as in matmul_scalar.c. It reads the matrix's
 * Q8_0x8 copy (tensor/dtype.h) when the loader made one, else reorders each
 * block of 8 rows itself. Decode (one token, on the copy) has its own loop:
 * x laid out once per product so that a run needs neither |w| nor sign
 * (ea__avx2_q8_xv), and W prefetched non-temporally.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/exp_impl.h"
#include "kernels/matmul_impl.h"

#define EA__T2 __attribute__((target("avx2,fma,f16c")))
#define EA__INL static inline __attribute__((always_inline))

/* v stays a running sum: an empty asm that GCC must assume reads and
 * changes it. Integer adds associate, so without it GCC turns the q8
 * tiles' chains of 8 runs (s += madd(...)) into trees over all the runs'
 * products at once — 32 live vectors in the 4-token tile — and spills them
 * to the stack. The tile cuts its chains every second run (pairs of
 * products, then the sum): faster than a cut at every run, and no spills.
 * The sums are exact integers either way, so no bit depends on it
 * (docs/kernels.md, 2026-11-27 afternoon). The decode loop keeps GCC's
 * trees (2 spills a block): cutting its two chains was not faster. */
#define ea__chain(v) __asm__("" : "+x"(v))

/* 8 consecutive weights at w as f32. */
EA__INL EA__T2 __m256 ea__ld8(const uint8_t *w, ea_dtype dt) {
    switch (dt) {
    case EA_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w));
    case EA_BF16: return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)w)), 16));
    default: return _mm256_loadu_ps((const float *)w);
    }
}

/* The canonical tree's last levels: (s4[0] + s4[2]) + (s4[1] + s4[3]). */
EA__INL EA__T2 float ea__sum4_avx2(__m128 s4) {
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

EA__INL EA__T2 float ea__reduce16_avx2(__m256 a0, __m256 a1) {
    __m256 s8 = _mm256_add_ps(a0, a1);
    return ea__sum4_avx2(_mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1)));
}

/* The canonical tree (ea__reduce16_avx2) over 16 lane vectors at once —
 * lane l at a[l * stride] — for 8 outputs: s8 = a[l] + a[l + 8], s4 =
 * s8[l] + s8[l + 4], then (s4[0] + s4[2]) + (s4[1] + s4[3]). */
EA__INL EA__T2 __m256 ea__tree16v(const __m256 *a, size_t stride) {
    __m256 s8[8], s4[4];
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) s8[q] = _mm256_add_ps(a[(size_t)q * stride], a[(size_t)(q + 8) * stride]);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) s4[q] = _mm256_add_ps(s8[q], s8[q + 4]);
    return _mm256_add_ps(_mm256_add_ps(s4[0], s4[2]), _mm256_add_ps(s4[1], s4[3]));
}

/* Where W row j's elements 16s.. start is row(j) + s * step: in the rows,
 * row(j) = w + j * row_bytes and step = 16 elements; in an Fx4 copy
 * (dtype.h), row(j) = its group + (j % 4) * 16 elements and step = 4 x 16
 * elements. The tiles read W only through this, so they are the same code,
 * and give the same bits, for both layouts. */
EA__INL const uint8_t *ea__f_row(const ea__mm *p, int j, size_t eb) {
    return p->wp ? ea__w_row(p, j - j % EA_FX4_ROWS) + (size_t)(j % EA_FX4_ROWS) * EA_FX4_STEP * eb
                 : p->w + (size_t)j * p->row_bytes;
}

/* NR W rows x MR X rows. The 16 canonical lanes of an (i, j) are two
 * independent halves (lanes 8h..8h+7 take k = 16s + 8h + l). Small tiles keep
 * both halves' accumulators in registers and read W once; a tile of more
 * than 6 (i, j) runs over k twice, one half per pass (the second pass reads W
 * and X again from L1), so a 3 x 4 tile keeps its 12 accumulators and 3 W
 * vectors in the 16 registers. */
EA__INL EA__T2 void ea__tile2(const ea__mm *p, int i0, int j0, const int MR, const int NR, const ea_dtype dt) {
    int k = p->k, kmain = k & ~15;
    const size_t eb = dt == EA_F32 ? 4 : 2, step = (p->wp ? EA_FX4_ROWS : 1) * EA_FX4_STEP * eb;
    /* the first tokens stream W: fetch 6 rows ahead (in a copy, the same bytes further on) */
    const size_t pf_ahead = 6 * (p->wp ? (size_t)k * eb : p->row_bytes);
    const int NP = MR * NR > 6 ? 2 : 1; /* passes */
    const uint8_t *wr[6];
    const float *xr[4];
    __m256 acc[2][6][4]; /* [half] */
    float wt[6][16], xt[4][16]; /* the zero-filled k tail */
#pragma GCC unroll 6
    for (int a = 0; a < NR; a++) wr[a] = ea__f_row(p, j0 + a, eb);
#pragma GCC unroll 4
    for (int b = 0; b < MR; b++) xr[b] = p->x + (size_t)(i0 + b) * k;
    if (kmain < k) {
        int r = k - kmain;
        for (int a = 0; a < NR; a++) {
            memset(wt[a], 0, sizeof wt[a]);
            ea_dtypes[dt].to_f32(wr[a] + (size_t)(kmain / 16) * step, wt[a], (size_t)r);
        }
        for (int b = 0; b < MR; b++) {
            memset(xt[b], 0, sizeof xt[b]);
            memcpy(xt[b], xr[b] + kmain, (size_t)r * sizeof(float));
        }
    }
#pragma GCC unroll 2
    for (int pass = 0; pass < NP; pass++) {
        const int h0 = NP == 2 ? pass : 0, h1 = NP == 2 ? pass + 1 : 2; /* halves of this pass */
#pragma GCC unroll 2
        for (int h = h0; h < h1; h++)
#pragma GCC unroll 6
            for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
                for (int b = 0; b < MR; b++) acc[h][a][b] = _mm256_setzero_ps();
        for (int kk = 0; kk < kmain; kk += 16) {
            size_t wo = (size_t)(kk / 16) * step;
#pragma GCC unroll 2
            for (int h = h0; h < h1; h++) {
                if (i0 == 0 && pass == 0 && h == 0) {
                    if (p->wp) /* a copy's step: the lines of row j0's group */
                        for (size_t l = 0; l < step; l += 64) _mm_prefetch((const char *)wr[0] + wo + pf_ahead + l, _MM_HINT_T0);
                    else
#pragma GCC unroll 6
                        for (int a = 0; a < NR; a++) _mm_prefetch((const char *)wr[a] + wo + pf_ahead, _MM_HINT_T0);
                }
                __m256 wv[6];
#pragma GCC unroll 6
                for (int a = 0; a < NR; a++) wv[a] = ea__ld8(wr[a] + wo + 8 * (size_t)h * eb, dt);
#pragma GCC unroll 4
                for (int b = 0; b < MR; b++) {
                    __m256 xv = _mm256_loadu_ps(xr[b] + kk + 8 * h);
#pragma GCC unroll 6
                    for (int a = 0; a < NR; a++) acc[h][a][b] = _mm256_fmadd_ps(wv[a], xv, acc[h][a][b]);
                }
            }
        }
        if (kmain < k)
#pragma GCC unroll 2
            for (int h = h0; h < h1; h++)
#pragma GCC unroll 4
                for (int b = 0; b < MR; b++)
#pragma GCC unroll 6
                    for (int a = 0; a < NR; a++)
                        acc[h][a][b] = _mm256_fmadd_ps(_mm256_loadu_ps(wt[a] + 8 * h), _mm256_loadu_ps(xt[b] + 8 * h),
                                                       acc[h][a][b]);
    }
#pragma GCC unroll 6
    for (int a = 0; a < NR; a++)
#pragma GCC unroll 4
        for (int b = 0; b < MR; b++) p->y[(size_t)(i0 + b) * p->n + j0 + a] = ea__reduce16_avx2(acc[0][a][b], acc[1][a][b]);
}

/* Decode (m = 1) of the 4 rows of the Fx4 group at j0 (TWO: and of the
 * group at j1, step by step beside it; k a multiple of 16). A step's 16
 * elements of a row become two f32 vectors, one per half of the canonical
 * lanes, multiplied by x's step in the same lane order; every canonical
 * lane takes its fma(w, x, acc) in increasing k and the final sum is the
 * canonical tree, so the bits are those of ea__tile2 with one token and
 * four rows. f16: two vcvtph2ps, lanes in order (half h = elements 8h..8h+7),
 * then ea__reduce16_avx2. bf16: one 32-byte load, and vpunpck{l,h}wd with
 * zeros makes f32 without a shift, the low vector holding elements 0-3 and
 * 8-11, the high one 4-7 and 12-15: x's step is loaded in that order and
 * the tree is taken on the lanes where they now are (bench_matmul m = 1,
 * 1 thread, in cache: 12.2 -> 19.9 GB/s on an AVX2-only EPYC). f32: two
 * plain loads, lanes in order. */
EA__INL EA__T2 void ea__fx4_decode4(const ea__mm *p, int j0, int j1, const int TWO, const ea_dtype dt) {
    int k = p->k;
    const size_t eb = dt == EA_F32 ? 4 : 2, rs = EA_FX4_STEP * eb; /* bytes of a row's step */
    const uint8_t *g[2] = {ea__f_row(p, j0, eb), TWO ? ea__f_row(p, j1, eb) : NULL}; /* step s at g + s * 4 rs */
    /* 3 groups ahead (ea__tile2: 6 rows): this loop takes a step in fewer
     * cycles; in 4 alternated decode runs 12 rows beat 6 every time (by 1-8%) */
    const size_t pf_ahead = 12 * (size_t)k * eb;
    const float *x = p->x;
    const __m256i z = _mm256_setzero_si256();
    __m256 acc[2][4][2];
#pragma GCC unroll 2
    for (int t = 0; t <= TWO; t++)
#pragma GCC unroll 4
        for (int a = 0; a < 4; a++) acc[t][a][0] = acc[t][a][1] = _mm256_setzero_ps();
    for (int kk = 0; kk < k; kk += 16) {
        __m256 xl, xh;
        if (dt == EA_BF16) {
            xl = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x + kk)), _mm_loadu_ps(x + kk + 8), 1);
            xh = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x + kk + 4)), _mm_loadu_ps(x + kk + 12), 1);
        } else {
            xl = _mm256_loadu_ps(x + kk);
            xh = _mm256_loadu_ps(x + kk + 8);
        }
#pragma GCC unroll 2
        for (int t = 0; t <= TWO; t++) {
            const uint8_t *st = g[t] + (size_t)(kk / 16) * EA_FX4_ROWS * rs;
#pragma GCC unroll 4
            for (size_t l = 0; l < EA_FX4_ROWS * rs; l += 64) _mm_prefetch((const char *)st + pf_ahead + l, _MM_HINT_T0);
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) {
                const uint8_t *wr = st + (size_t)a * rs;
                __m256 lo, hi;
                if (dt == EA_BF16) {
                    __m256i w = _mm256_loadu_si256((const __m256i *)wr);
                    lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, w));
                    hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, w));
                } else if (dt == EA_F16) {
                    lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wr));
                    hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr + 16)));
                } else {
                    lo = _mm256_loadu_ps((const float *)wr);
                    hi = _mm256_loadu_ps((const float *)wr + 8);
                }
                acc[t][a][0] = _mm256_fmadd_ps(lo, xl, acc[t][a][0]);
                acc[t][a][1] = _mm256_fmadd_ps(hi, xh, acc[t][a][1]);
            }
        }
    }
#pragma GCC unroll 2
    for (int t = 0; t <= TWO; t++)
#pragma GCC unroll 4
        for (int a = 0; a < 4; a++) {
            float *y = &p->y[(t ? j1 : j0) + a];
            if (dt != EA_BF16) {
                *y = ea__reduce16_avx2(acc[t][a][0], acc[t][a][1]);
                continue;
            }
            /* lanes 0-3 | 8-11 and 4-7 | 12-15: s8 = lane l + lane l + 8, then as ea__reduce16_avx2 */
            __m128 s8a = _mm_add_ps(_mm256_castps256_ps128(acc[t][a][0]), _mm256_extractf128_ps(acc[t][a][0], 1));
            __m128 s8b = _mm_add_ps(_mm256_castps256_ps128(acc[t][a][1]), _mm256_extractf128_ps(acc[t][a][1], 1));
            *y = ea__sum4_avx2(_mm_add_ps(s8a, s8b));
        }
}

/* Rows in blocks of EA__RB2: within a block the 4-token groups are the
 * outer loop, so a group's X (4 x 4k bytes) stays in L1 while the block's W
 * rows (read from memory by the first group) come again from L2. */
#define EA__RB2 48

EA__INL EA__T2 void ea__rows2(const ea__mm *p, int j0, int j1, const ea_dtype dt) {
    int j = j0, m = p->m;
    if (m == 1 && p->wp) { /* decode from an Fx4 copy: two groups at a time, two streams */
        for (; j < j1 && j % EA_FX4_ROWS; j++) ea__tile2(p, 0, j, 1, 1, dt);
        if (p->k % EA_FX4_STEP == 0) { /* group g beside g + ng/2, as the q8_0 decode loop */
            int ng = (j1 - j) / EA_FX4_ROWS, h = ng / 2;
            for (int g = 0; g < h; g++) ea__fx4_decode4(p, j + g * EA_FX4_ROWS, j + (g + h) * EA_FX4_ROWS, 1, dt);
            j += 2 * h * EA_FX4_ROWS;
            for (; j + EA_FX4_ROWS <= j1; j += EA_FX4_ROWS) ea__fx4_decode4(p, j, 0, 0, dt);
        }
        for (; j + EA_FX4_ROWS <= j1; j += EA_FX4_ROWS) ea__tile2(p, 0, j, 1, EA_FX4_ROWS, dt);
    } else if (m == 1) /* decode from the rows: more W rows in flight */
        for (; j + 6 <= j1; j += 6) ea__tile2(p, 0, j, 1, 6, dt);
    int j3 = j1 - (j1 - j) % 3; /* the rows in whole 3-row tiles */
    for (int jb = j; jb < j3; jb += EA__RB2) {
        int je = jb + EA__RB2 < j3 ? jb + EA__RB2 : j3;
        int i = 0;
        for (; i + 4 <= m; i += 4)
            for (int jj = jb; jj < je; jj += 3) ea__tile2(p, i, jj, 4, 3, dt);
        for (int jj = jb; jj < je && i < m; jj += 3) switch (m - i) {
            case 3: ea__tile2(p, i, jj, 3, 3, dt); break;
            case 2: ea__tile2(p, i, jj, 2, 3, dt); break;
            default: ea__tile2(p, i, jj, 1, 3, dt); break;
            }
    }
    for (j = j3; j < j1; j++)
        for (int i = 0; i < m; i++) ea__tile2(p, i, j, 1, 1, dt);
}

/* bf16 with many tokens (prefill) goes to the broadcast-form tiles below
 * (ea__rows2_bc); the rows after their last whole panel come here: each
 * block of W rows is widened to f32 once, into the thread's scratch
 * (row-major, at most EA__WIDE_BYTES so it stays in L2), and the f32 tiles
 * run on it. Without it every 4-token group widened the block's rows again
 * with a widening load and a shift per 8 weights; the f32 tiles do the same
 * fmas in the same order on the same (exactly widened) values, so the bits
 * are the same, and bench_matmul at m = 512 ran 26 G multiply-adds/s in bf16
 * against 30 in f32. The scratch also holds the broadcast form's panels. */

size_t ea__avx2_f_scratch_bytes(int max_k) {
    size_t row = (size_t)max_k * sizeof(float);
    return 3 * row > EA__WIDE_BYTES ? 0 : EA__WIDE_BYTES;
}

EA__T2 static void ea__widen_rows(const ea__mm *p, int j0, int j1, float *o) {
    int k = p->k;
    const size_t step = (p->wp ? EA_FX4_ROWS : 1) * EA_FX4_STEP * 2;
    for (int j = j0; j < j1; j++, o += k) {
        const uint8_t *r = ea__f_row(p, j, 2);
        int kk = 0;
        for (; kk + 16 <= k; kk += 16, r += step) {
            _mm256_storeu_ps(o + kk, ea__ld8(r, EA_BF16));
            _mm256_storeu_ps(o + kk + 8, ea__ld8(r + 16, EA_BF16));
        }
        if (kk < k) ea_dtypes[EA_BF16].to_f32(r, o + kk, (size_t)(k - kk));
    }
}

/* Blocks of up to EA__RB2 rows (a multiple of 3 that fits the scratch),
 * each widened and then run by ea__rows2 as f32 rows; the last rows that
 * make no whole 3-row tile stay bf16. */
EA__T2 static void ea__rows2_wide(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int k = p->k;
    size_t cap = s->size < EA__WIDE_BYTES ? s->size : EA__WIDE_BYTES;
    int rb = (int)(cap / ((size_t)k * sizeof(float))) / 3 * 3;
    rb = rb > EA__RB2 ? EA__RB2 : rb;
    if (rb < 3) {
        ea__rows2(p, j0, j1, EA_BF16);
        return;
    }
    int j3 = j1 - (j1 - j0) % 3;
    float *wf = (float *)s->buf;
    for (int jb = j0; jb < j3; jb += rb) {
        int nr = j3 - jb < rb ? j3 - jb : rb;
        ea__widen_rows(p, jb, jb + nr, wf);
        ea__mm q = *p;
        q.dtype = EA_F32;
        q.w = (const uint8_t *)wf;
        q.row_bytes = (size_t)k * sizeof(float);
        q.wp = NULL;
        q.y = p->y + jb;
        ea__rows2(&q, 0, nr, EA_F32);
    }
    ea__rows2(p, j3, j1, EA_BF16);
}

/* ---- f32 / f16 / bf16 prefill: tiles in the broadcast form ------------------------ */

/* The tiles above hold the 16 canonical lanes of an (i, j) in two registers
 * and load W and X along k, so 12 accumulators cover 6 (i, j) per pass and
 * every output ends in a horizontal sum. Here a register holds one lane of
 * 8 W rows instead: lane l of (i, j..j+7) takes fma(w[j][k], x[i][k], acc)
 * for k = l, l+16, ... in increasing k from +0, x[i][k] broadcast — exactly
 * the canonical lane — so a tile of 6 tokens x 16 rows keeps 12
 * accumulators for 12 (i, j-vector) pairs, with 2 W loads and 6
 * broadcasts per 12 fmas. The 16 lanes go to a small buffer and the
 * canonical tree adds them as whole vectors of 8 outputs. W is widened (f16,
 * bf16) into f32 panels of EA__BC_ROWS rows and X is laid out once per product
 * (ea__avx2_bc_x, the driver's preparation), both lane-major, so a tile
 * streams both. */
#define EA__BC_ROWS 16
#define EA__BC_LB_FLOATS (16 * EA__BC_TOK * EA__BC_ROWS) /* a tile's lane buffer */

/* f32 floats of one panel for k. */
static inline size_t ea__bc_panel_floats(int k) { return (size_t)16 * (size_t)((k + 15) / 16) * EA__BC_ROWS; }

/* X of tokens [i0, i1) of m, lane-major per group of EA__BC_TOK tokens:
 * group g (its mr tokens) at xp + g * EA__BC_TOK * 16 * ns, and x[t][k] of
 * its token t at ((k % 16) * ns + k / 16) * mr + t (ns = ceil(k / 16)). */
size_t ea__avx2_bc_x_bytes(int m, int k) {
    return (size_t)(m + EA__BC_TOK - 1) / EA__BC_TOK * EA__BC_TOK * 16 * (size_t)((k + 15) / 16) * sizeof(float);
}

void ea__avx2_bc_x(const float *x, int m, int k, int i0, int i1, float *xp) {
    size_t ns = (size_t)(k + 15) / 16;
    for (int i = i0; i < i1; i++) {
        int g = i / EA__BC_TOK, t = i % EA__BC_TOK, mr = m - g * EA__BC_TOK < EA__BC_TOK ? m - g * EA__BC_TOK : EA__BC_TOK;
        float *o = xp + (size_t)g * EA__BC_TOK * 16 * ns + t;
        const float *xr = x + (size_t)i * k;
        for (int l = 0; l < 16 && l < k; l++)
            for (int kk = l, st = 0; kk < k; kk += 16, st++) o[((size_t)l * ns + (size_t)st) * (size_t)mr] = xr[kk];
    }
}

/* Rows j0 .. j0+15 of W (f32, f16 or bf16) as a lane-major f32 panel:
 * element k of row r at pan[((k % 16) * ns + k / 16) * 16 + r] (zeros past k). */
EA__INL EA__T2 void ea__bc_panel(const ea__mm *p, int j0, float *pan, const ea_dtype dt) {
    int k = p->k, ns = (k + 15) / 16, full = k / 16;
    const size_t eb = dt == EA_F32 ? 4 : 2, step = (p->wp ? EA_FX4_ROWS : 1) * EA_FX4_STEP * eb;
    const uint8_t *row[EA__BC_ROWS];
    for (int r = 0; r < EA__BC_ROWS; r++) row[r] = ea__f_row(p, j0 + r, eb);
    for (int st = 0; st < full; st++)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)     /* lanes 8h .. 8h+7 */
            for (int rb = 0; rb < 2; rb++) { /* rows 8rb .. 8rb+7 */
                __m256 r8[8], o8[8];
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) r8[c] = ea__ld8(row[8 * rb + c] + (size_t)st * step + 8 * (size_t)h * eb, dt);
                ea__tr8(r8, o8);
#pragma GCC unroll 8
                for (int l = 0; l < 8; l++)
                    _mm256_store_ps(pan + ((size_t)(8 * h + l) * ns + (size_t)st) * EA__BC_ROWS + 8 * rb, o8[l]);
            }
    if (full < ns) /* the k tail */
        for (int r = 0; r < EA__BC_ROWS; r++) {
            float t[16] = {0};
            ea_dtypes[dt].to_f32(row[r] + (size_t)full * step, t, (size_t)(k - 16 * full));
            for (int l = 0; l < 16; l++) pan[((size_t)l * ns + (size_t)full) * EA__BC_ROWS + r] = t[l];
        }
}

/* MR tokens (their group of ea__avx2_bc_x at xp) against a panel; y: their
 * rows (stride n) from the panel's first column. lb: the lane buffer. */
EA__INL EA__T2 void ea__bc_tile(const float *pan, int k, const float *xp, float *y, size_t n, __m256 *lb, const int MR) {
    int ns = (k + 15) / 16;
    for (int l = 0; l < 16; l++) {
        int nl = l < k ? (k - 1 - l) / 16 + 1 : 0; /* lane l's steps: k = l + 16 st < k */
        __m256 acc[EA__BC_TOK][2];
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        const float *w = pan + (size_t)l * ns * EA__BC_ROWS, *xl = xp + (size_t)l * ns * MR;
        for (int st = 0; st < nl; st++, w += EA__BC_ROWS, xl += MR) {
            __m256 w0 = _mm256_load_ps(w), w1 = _mm256_load_ps(w + 8);
#pragma GCC unroll 6
            for (int i = 0; i < MR; i++) {
                __m256 xb = _mm256_broadcast_ss(xl + i);
                acc[i][0] = _mm256_fmadd_ps(w0, xb, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(w1, xb, acc[i][1]);
            }
        }
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            lb[(l * EA__BC_TOK + i) * 2] = acc[i][0];
            lb[(l * EA__BC_TOK + i) * 2 + 1] = acc[i][1];
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) /* the canonical tree, 8 outputs at a time */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(y + (size_t)i * n + 8 * h, ea__tree16v(lb + i * 2 + h, 2 * EA__BC_TOK));
}

/* One function per tile height, each compiled alone. */
#define EA__BC_FN(MR)                                                                                                  \
    __attribute__((noinline)) EA__T2 static void ea__bc_tile##MR(const float *pan, int k, const float *xp, float *y,   \
                                                                 size_t n, __m256 *lb) {                               \
        ea__bc_tile(pan, k, xp, y, n, lb, MR);                                                                         \
    }
EA__BC_FN(1)
EA__BC_FN(2)
EA__BC_FN(3)
EA__BC_FN(4)
EA__BC_FN(5)
EA__BC_FN(6)
#undef EA__BC_FN

typedef void (*ea__bc_fn)(const float *, int, const float *, float *, size_t, __m256 *);
static const ea__bc_fn ea__bc_tiles[EA__BC_TOK + 1] = {NULL,         ea__bc_tile1, ea__bc_tile2, ea__bc_tile3,
                                                       ea__bc_tile4, ea__bc_tile5, ea__bc_tile6};

/* Rows [j0, j1) for many tokens, X laid out in p->xp: as many whole panels
 * as the scratch holds are widened, then every token group runs against all
 * of them (the panels stay in L2); rows after the last whole panel go to
 * the tiles above. */
EA__INL EA__T2 void ea__rows2_bc(const ea__mm *p, int j0, int j1, ea__scratch *s, const ea_dtype dt) {
    int k = p->k, m = p->m;
    size_t pf = ea__bc_panel_floats(k), gx = (size_t)EA__BC_TOK * 16 * (size_t)((k + 15) / 16);
    /* at most EA__WIDE_BYTES, as ea__rows2_wide: the panels stay in L2 (the scratch is larger when other
     * variants' need is, e.g. the avx512 q8 scratch of a large max_m) */
    size_t room = (s->size < EA__WIDE_BYTES ? s->size : EA__WIDE_BYTES) / sizeof(float);
    int cap = room > EA__BC_LB_FLOATS ? (int)((room - EA__BC_LB_FLOATS) / pf) : 0; /* panels that fit */
    __m256 *lb = (__m256 *)s->buf;
    float *pan = (float *)s->buf + EA__BC_LB_FLOATS;
    int j = j0;
    if (cap > 0 && p->xp)
        while (j + EA__BC_ROWS <= j1) {
            int np = (j1 - j) / EA__BC_ROWS < cap ? (j1 - j) / EA__BC_ROWS : cap;
            for (int q = 0; q < np; q++) ea__bc_panel(p, j + q * EA__BC_ROWS, pan + (size_t)q * pf, dt);
            for (int i = 0; i < m; i += EA__BC_TOK) {
                int mr = m - i < EA__BC_TOK ? m - i : EA__BC_TOK;
                const float *xg = (const float *)p->xp + (size_t)(i / EA__BC_TOK) * gx;
                for (int q = 0; q < np; q++)
                    ea__bc_tiles[mr](pan + (size_t)q * pf, k, xg, p->y + (size_t)i * p->n + j + q * EA__BC_ROWS,
                                     (size_t)p->n, lb);
            }
            j += np * EA__BC_ROWS;
        }
    if (j < j1) {
        if (dt == EA_BF16) ea__rows2_wide(p, j, j1, s);
        else ea__rows2(p, j, j1, dt);
    }
}

/* Many tokens (m >= EA__WIDE_MIN_M, X laid out by the driver): the
 * broadcast form; fewer: the tiles above. */
EA__T2 void ea__rows_avx2_f(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int bc = p->m >= EA__WIDE_MIN_M;
    switch (p->dtype) {
    case EA_F16:
        if (bc) ea__rows2_bc(p, j0, j1, s, EA_F16);
        else ea__rows2(p, j0, j1, EA_F16);
        break;
    case EA_BF16:
        if (bc) ea__rows2_bc(p, j0, j1, s, EA_BF16);
        else ea__rows2(p, j0, j1, EA_BF16);
        break;
    default:
        if (bc) ea__rows2_bc(p, j0, j1, s, EA_F32);
        else ea__rows2(p, j0, j1, EA_F32);
        break;
    }
}

/* ---- q8_0: vector over 8 W rows -------------------------------------------------- */

/* Scratch of ea__rows_avx2_q8 for k (matmul.c sizes it): lane accumulators
 * of EA__Q8_TOK tokens, block b's transposed W bytes, 8 zero-padded W rows. */
size_t ea__avx2_q8_scratch_bytes(int k) {
    return (size_t)EA__Q8_TOK * 16 * 32 + 8 * 32 + 8 * ((size_t)k / EA_QK8_0 * sizeof(ea_block_q8_0)) + 64;
}

/* Block b of the 8 Q8_0 rows at w (stride rb), reordered as in Q8_0x8
 * (dtype.h): wt[r] lane jr = dword r (qs bytes 4r..4r+3) of row jr (stored);
 * returns the rows' scales (lane jr = row jr). */
EA__INL EA__T2 __m256 ea__q8_wblock2(const uint8_t *w, size_t rb, int b, __m256i *wt) {
    const uint8_t *q = w + (size_t)b * sizeof(ea_block_q8_0) + 2;
    __m256i R[8], T[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) R[r] = _mm256_loadu_si256((const __m256i *)(q + r * rb));
#pragma GCC unroll 4
    for (int r = 0; r < 8; r += 2) {
        T[r] = _mm256_unpacklo_epi32(R[r], R[r + 1]);     /* dwords 0,1 | 4,5 of rows r, r+1 */
        T[r + 1] = _mm256_unpackhi_epi32(R[r], R[r + 1]); /* 2,3 | 6,7 */
    }
#pragma GCC unroll 2
    for (int r = 0; r < 8; r += 4) {
        R[r] = _mm256_unpacklo_epi64(T[r], T[r + 2]);         /* dword 0 | 4 of rows r..r+3 */
        R[r + 1] = _mm256_unpackhi_epi64(T[r], T[r + 2]);     /* 1 | 5 */
        R[r + 2] = _mm256_unpacklo_epi64(T[r + 1], T[r + 3]); /* 2 | 6 */
        R[r + 3] = _mm256_unpackhi_epi64(T[r + 1], T[r + 3]); /* 3 | 7 */
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        _mm256_store_si256(wt + c, _mm256_permute2x128_si256(R[c], R[c + 4], 0x20));
        _mm256_store_si256(wt + c + 4, _mm256_permute2x128_si256(R[c], R[c + 4], 0x31));
    }
    uint16_t d[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) memcpy(&d[r], q - 2 + r * rb, 2);
    return _mm256_cvtph_ps(_mm_setr_epi16((short)d[0], (short)d[1], (short)d[2], (short)d[3], (short)d[4], (short)d[5],
                                          (short)d[6], (short)d[7]));
}

/* NT tokens against block b (its 8 rows' qs reordered in wt): exact isums per
 * row (|w| * (x * sign w) in u8 x s8 pairs, each pair <= 2*128*127, widened
 * to int32), then lane b%16 of every (j, i) takes fma((float)isum, dw * dx,
 * acc) (+0 on the first pass). */
EA__INL EA__T2 void ea__q8_tokens2(const int8_t *xq, int k, const float *xd, int nb, int b, const __m256i *wt,
                                   __m256 dw, __m256 *acc, const int NT) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256i s[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        __m256i wr = _mm256_loadu_si256(wt + r), a = _mm256_abs_epi8(wr);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            int32_t xv;
            memcpy(&xv, xq + (size_t)t * k + (size_t)b * EA_QK8_0 + 4 * r, 4);
            __m256i p16 = _mm256_maddubs_epi16(a, _mm256_sign_epi8(_mm256_set1_epi32(xv), wr));
            s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p16, one));
            if (r % 2) ea__chain(s[t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
        __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xd[(size_t)t * nb + b]));
        __m256 *ac = acc + t * 16 + b % 16;
        *ac = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), d, b < 16 ? _mm256_setzero_ps() : *ac);
    }
}

/* ---- q8_0 decode: x laid out for the Q8_0x8 runs ---------------------------------- */

/* One token's x, laid out once per product for the packed decode loop
 * (ea__q8_decode_blocks): per block b, EA__Q8_XV_BLOCK bytes =
 *   |x| (32 bytes), masks (32 bytes: 0xff where x < 0, else 0), and
 *   c_b = the sum of |x| over the block's negative x, in all 8 lanes.
 * Run r then takes dword r of |x| and of the masks, broadcast. With them a
 * run's products need no |w| and no sign: for x < 0,
 * |x| * (w ^ 0xff) = |x| * (-w - 1) = x * w - |x|, so the isum is
 * c_b + sum |x| * (w ^ mask), exactly, for every w including -128 (each
 * u8 x s8 pair is at most 2 * 127 * 128, inside vpmaddubsw's range).
 * Runs laid out in full (8 broadcast vectors each, 544 bytes a block) were
 * slower from memory: they crowd W out of L1 (docs/kernels.md). */
#define EA__Q8_XV_BLOCK (3 * 32)

size_t ea__avx2_q8_xv_bytes(int k) { return (size_t)(k / EA_QK8_0) * EA__Q8_XV_BLOCK; }

EA__T2 void ea__avx2_q8_xv(const int8_t *xq, int k, uint8_t *xv) {
    for (int b = 0; b < k / EA_QK8_0; b++, xv += EA__Q8_XV_BLOCK) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(xq + (size_t)b * EA_QK8_0));
        __m256i a = _mm256_abs_epi8(x), neg = _mm256_cmpgt_epi8(_mm256_setzero_si256(), x);
        int32_t c = 0;
        for (int l = 0; l < EA_QK8_0; l++) c += xq[(size_t)b * EA_QK8_0 + l] < 0 ? -xq[(size_t)b * EA_QK8_0 + l] : 0;
        _mm256_storeu_si256((__m256i *)xv, a);
        _mm256_storeu_si256((__m256i *)(xv + 32), neg);
        _mm256_storeu_si256((__m256i *)(xv + 64), _mm256_set1_epi32(c));
    }
}

/* The blocks of one Q8_0x8 group (TWO: of two, w and w2, block by block)
 * against one token laid out in xv: the same isums as ea__q8_tokens2 and
 * the same float steps after them, group w into the lanes acc, w2 into acc2.
 * The two groups share the x loads; each prefetches its own lines. */
EA__INL EA__T2 void ea__q8_decode_blocks(const uint8_t *w, const uint8_t *w2, int nb, const uint8_t *xv,
                                         const float *xd, __m256 *acc, __m256 *acc2, const uint8_t *pf, int pf_lines,
                                         const uint8_t *pf2, int pf_lines2, const int TWO) {
    const __m256i one = _mm256_set1_epi16(1);
    for (int b = 0; b < nb; b++) {
        for (int l = 0; l < pf_lines; l++) _mm_prefetch((const char *)pf + ((size_t)b * pf_lines + l) * 64, _MM_HINT_NTA);
        if (TWO)
            for (int l = 0; l < pf_lines2; l++)
                _mm_prefetch((const char *)pf2 + ((size_t)b * pf_lines2 + l) * 64, _MM_HINT_NTA);
        const uint8_t *wb = w + (size_t)b * EA_Q8X8_BLOCK, *wb2 = TWO ? w2 + (size_t)b * EA_Q8X8_BLOCK : NULL;
        const __m256i *xb = (const __m256i *)(xv + (size_t)b * EA__Q8_XV_BLOCK);
        __m256i s = _mm256_load_si256(xb + 2), s2 = s;
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            int32_t xa, xm; /* dword r of |x| and of the masks */
            memcpy(&xa, (const uint8_t *)xb + 4 * r, 4);
            memcpy(&xm, (const uint8_t *)xb + 32 + 4 * r, 4);
            __m256i a = _mm256_set1_epi32(xa), mk = _mm256_set1_epi32(xm);
            __m256i wr = _mm256_loadu_si256((const __m256i *)(wb + 16) + r);
            s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_xor_si256(wr, mk)), one));
            if (TWO) {
                __m256i wr2 = _mm256_loadu_si256((const __m256i *)(wb2 + 16) + r);
                s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_xor_si256(wr2, mk)), one));
            }
        }
        __m256 xs = _mm256_set1_ps(xd[b]);
        __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb)), xs);
        acc[b % 16] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, b < 16 ? _mm256_setzero_ps() : acc[b % 16]);
        if (TWO) {
            __m256 d2 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb2)), xs);
            acc2[b % 16] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s2), d2, b < 16 ? _mm256_setzero_ps() : acc2[b % 16]);
        }
    }
}
__attribute__((noinline)) EA__T2 static void ea__q8_group2_decode(const uint8_t *w, int nb, const uint8_t *xv,
                                                                  const float *xd, __m256 *acc, const uint8_t *pf,
                                                                  int pf_lines) {
    ea__q8_decode_blocks(w, NULL, nb, xv, xd, acc, NULL, pf, pf_lines, NULL, 0, 0);
}
__attribute__((noinline)) EA__T2 static void ea__q8_group2_decode2(const uint8_t *w, const uint8_t *w2, int nb,
                                                                   const uint8_t *xv, const float *xd, __m256 *acc,
                                                                   __m256 *acc2, const uint8_t *pf, int pf_lines,
                                                                   const uint8_t *pf2, int pf_lines2) {
    ea__q8_decode_blocks(w, w2, nb, xv, xd, acc, acc2, pf, pf_lines, pf2, pf_lines2, 1);
}

/* Rows [jb, jb + nr) of one token's y: the canonical tree over a group's 16 lane vectors. */
EA__INL EA__T2 void ea__q8_store_group(float *yr, const __m256 *acc, int nr) {
    __m256 y = ea__tree16v(acc, 1);
    if (nr == 8) _mm256_storeu_ps(yr, y);
    else {
        float tmp[8];
        _mm256_storeu_ps(tmp, y);
        memcpy(yr, tmp, sizeof(float) * (size_t)nr);
    }
}

/* Decode: one token (laid out in p->xv) against the Q8_0x8 copy. The chunk's
 * ng groups run as two sequential streams, group g beside group g + ng/2
 * (and the last one alone when ng is odd): one core then keeps two
 * hardware-prefetched streams in flight, which read the bandwidth that a
 * single stream with the same arithmetic between its loads does not
 * (docs/kernels.md, "two streams"). Every row is computed as alone. */
EA__T2 static void ea__rows_avx2_q8_decode(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int nb = p->k / EA_QK8_0;
    __m256 *acc = (__m256 *)s->buf, *acc2 = acc + 16;
    for (int q = nb < 16 ? nb : 16; q < 16; q++) acc[q] = acc2[q] = _mm256_setzero_ps(); /* lanes no block reaches */
    size_t stride = ea_q8p_group_bytes((size_t)p->k, EA_Q8X8_ROWS), pf_bytes;
    const uint8_t *w0 = ea__w_row(p, j0);
    int ng = (j1 - j0 + 7) / 8, h = ng / 2, full_lines = ea__pf_lines(w0, stride, nb);
    for (int g = 0; g < h; g++) {
        /* stream 1 prefetches its next group (none after its last: stream 2 has read it); stream 2 its
         * next, the odd group, or what the thread reads after this chunk */
        int ja = j0 + 8 * g, jb = j0 + 8 * (g + h);
        const uint8_t *wa = w0 + (size_t)g * stride, *wb = w0 + (size_t)(g + h) * stride;
        const uint8_t *pfb = ea__pf_after(p, s, jb, j1, 8, &pf_bytes);
        ea__q8_group2_decode2(wa, wb, nb, p->xv, p->xd, acc, acc2, wa + stride, g + 1 < h ? full_lines : 0, pfb,
                              ea__pf_lines(pfb, pf_bytes, nb));
        ea__q8_store_group(p->y + ja, acc, 8);
        ea__q8_store_group(p->y + jb, acc2, j1 - jb < 8 ? j1 - jb : 8);
    }
    if (ng % 2) {
        int jb = j0 + 8 * (ng - 1);
        const uint8_t *pf = ea__pf_after(p, s, jb, j1, 8, &pf_bytes);
        ea__q8_group2_decode(w0 + (size_t)(ng - 1) * stride, nb, p->xv, p->xd, acc, pf, ea__pf_lines(pf, pf_bytes, nb));
        ea__q8_store_group(p->y + jb, acc, j1 - jb);
    }
}

/* The blocks of an 8-row group against nt tokens, prefetching pf_lines lines
 * of pf per block. PACKED: the group is a Q8_0x8 group at w, read as it is;
 * else 8 Q8_0 rows at w (stride rb), each block reordered into wt first.
 * ONE: nt is 1 (decode), and the loop holds nothing else. */
EA__INL EA__T2 void ea__q8_blocks2(const uint8_t *w, size_t rb, int nb, const int8_t *xq, int k, const float *xd,
                                   int nt, __m256i *wt, __m256 *acc, const uint8_t *pf, int pf_lines, const int PACKED,
                                   const int ONE) {
    for (int b = 0; b < nb; b++) {
        for (int l = 0; l < pf_lines; l++) _mm_prefetch((const char *)pf + ((size_t)b * pf_lines + l) * 64, _MM_HINT_T0);
        const uint8_t *wb = w + (size_t)b * EA_Q8X8_BLOCK; /* PACKED: block b's 8 scales, then its runs */
        const __m256i *bt = PACKED ? (const __m256i *)(wb + 16) : wt;
        __m256 dw = PACKED ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb)) : ea__q8_wblock2(w, rb, b, wt);
        if (ONE || nt == 1) { /* decode: its own copy (without it GCC's allocation cost 25% at m = 1 and 8) */
            ea__q8_tokens2(xq, k, xd, nb, b, bt, dw, acc, 1);
            continue;
        }
        int t = 0;
        for (; t + 4 <= nt; t += 4)
            ea__q8_tokens2(xq + (size_t)t * k, k, xd + (size_t)t * nb, nb, b, bt, dw, acc + t * 16, 4);
        for (; t + 2 <= nt; t += 2)
            ea__q8_tokens2(xq + (size_t)t * k, k, xd + (size_t)t * nb, nb, b, bt, dw, acc + t * 16, 2);
        if (t < nt) ea__q8_tokens2(xq + (size_t)t * k, k, xd + (size_t)t * nb, nb, b, bt, dw, acc + t * 16, 1);
    }
}

/* One function per form, so that each one's registers are allocated alone
 * (inlined into the loops below, GCC spilled the reordering). The packed
 * decode form has its own: sharing the function with the tiles of several
 * tokens, GCC loaded the 8 x dwords of a block into general registers and
 * the stack before choosing the path, and in-cache m = 1 products ran at
 * 11.7 GB/s per core where the loop alone reaches 14 (docs/kernels.md). */
__attribute__((noinline)) EA__T2 static void ea__q8_group2(const uint8_t *w, size_t rb, int nb, const int8_t *xq,
                                                           int k, const float *xd, int nt, __m256i *wt, __m256 *acc,
                                                           const uint8_t *pf, int pf_lines) {
    ea__q8_blocks2(w, rb, nb, xq, k, xd, nt, wt, acc, pf, pf_lines, 0, 0);
}
__attribute__((noinline)) EA__T2 static void ea__q8_group2_packed(const uint8_t *w, int nb, const int8_t *xq, int k,
                                                                  const float *xd, int nt, __m256 *acc,
                                                                  const uint8_t *pf, int pf_lines) {
    if (nt == 1) ea__q8_blocks2(w, 0, nb, xq, k, xd, 1, NULL, acc, pf, pf_lines, 1, 1);
    else ea__q8_blocks2(w, 0, nb, xq, k, xd, nt, NULL, acc, pf, pf_lines, 1, 0);
}

/* Per group of 8 W rows and block, lane jr holds row jr: the rows' qs are
 * reordered in registers (ea__q8_wblock2), or read so from the matrix's
 * Q8_0x8 copy (p->wp). A token then needs 8 broadcast x dwords for 8 rows'
 * isums of the block, and no horizontal sums. The lane accumulators stay in
 * scratch per (token, lane); the canonical tree adds the 16 lane vectors,
 * giving 8 outputs of a token at once. */
EA__T2 void ea__rows_avx2_q8(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    if (p->xv) {
        ea__rows_avx2_q8_decode(p, j0, j1, s);
        return;
    }
    int k = p->k, nb = k / EA_QK8_0, m = p->m, n = p->n;
    size_t rb = p->row_bytes;
    __m256 *acc = (__m256 *)s->buf;                                   /* [token][lane] */
    __m256i *wt = (__m256i *)(s->buf + (size_t)EA__Q8_TOK * 16 * 32); /* block b of the group, reordered */
    uint8_t *wpad = (uint8_t *)(wt + 8);                              /* 8 padded W rows */
    /* lanes no block reaches (k < 512) hold +0 for the tree, as in the scalar twin */
    for (int t = 0; t < (m < EA__Q8_TOK ? m : EA__Q8_TOK); t++)
        for (int q = nb < 16 ? nb : 16; q < 16; q++) acc[t * 16 + q] = _mm256_setzero_ps();
    /* groups of 8 rows one stride apart; no division per group (they cost ~5% at m = 1) */
    size_t stride = p->wp ? ea_q8p_group_bytes((size_t)k, EA_Q8X8_ROWS) : 8 * rb;
    const uint8_t *wj0 = ea__w_row(p, j0);
    int full_lines = ea__pf_lines(wj0, 8 * rb, nb);
    for (int jb = j0; jb < j1; jb += 8) {
        int nr = j1 - jb < 8 ? j1 - jb : 8;
        const uint8_t *w = wj0 + (size_t)((jb - j0) / 8) * stride, *pf = w + stride;
        int pf_lines = full_lines;
        if (jb + 16 > j1) { /* the next block is short, or another chunk's */
            size_t pf_bytes;
            pf = ea__pf_after(p, s, jb, j1, 8, &pf_bytes);
            pf_lines = ea__pf_lines(pf, pf_bytes, nb);
        }
        if (nr < 8 && !p->wp) {
            memcpy(wpad, w, (size_t)nr * rb);
            memset(wpad + (size_t)nr * rb, 0, (size_t)(8 - nr) * rb);
            w = wpad;
        }
        for (int i0 = 0; i0 < m; i0 += EA__Q8_TOK) {
            int nt = m - i0 < EA__Q8_TOK ? m - i0 : EA__Q8_TOK;
            const int8_t *xq = p->xq + (size_t)i0 * k;
            const float *xd = p->xd + (size_t)i0 * nb;
            if (p->wp) ea__q8_group2_packed(w, nb, xq, k, xd, nt, acc, pf, i0 == 0 ? pf_lines : 0);
            else ea__q8_group2(w, rb, nb, xq, k, xd, nt, wt, acc, pf, i0 == 0 ? pf_lines : 0);
            for (int t = 0; t < nt; t++) ea__q8_store_group(p->y + (size_t)(i0 + t) * n + jb, acc + t * 16, nr);
        }
    }
}

/* ---- q8 activation quantisation ---------------------------------------------- */

/* Same bits as ea__quantize_q8 (matmul.c): amax is exact, d = amax/127 and
 * 1/d are the same IEEE operations, vcvtps2dq rounds half to even like rintf
 * in the default rounding mode, and |q| <= 127 so the narrowing is exact. */
EA__T2 void ea__quantize_q8_avx2(const float *x, int k, int i0, int i1, int8_t *xq, float *xd) {
    int nb = k / EA_QK8_0;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int i = i0; i < i1; i++) {
        const float *xr = x + (size_t)i * k;
        for (int b = 0; b < nb; b++) {
            __m256 v[4], a = _mm256_setzero_ps();
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                v[q] = _mm256_loadu_ps(xr + b * EA_QK8_0 + 8 * q);
                a = _mm256_max_ps(a, _mm256_andnot_ps(sign, v[q]));
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
            float d = amax / 127.0f;
            float id = d != 0.0f ? 1.0f / d : 0.0f;
            xd[(size_t)i * nb + b] = d;
            __m256 vid = _mm256_set1_ps(id);
            __m256i q01 = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[0], vid)),
                                             _mm256_cvtps_epi32(_mm256_mul_ps(v[1], vid)));
            __m256i q23 = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[2], vid)),
                                             _mm256_cvtps_epi32(_mm256_mul_ps(v[3], vid)));
            /* packs interleave 128-bit lanes: restore element order */
            __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(xq + (size_t)i * k + b * EA_QK8_0), q8);
        }
    }
}
