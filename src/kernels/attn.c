/*
 * attn.c — tiled causal attention; the contract and the operation order are
 * in attn.h.
 *
 * Scratch layout (floats): qt (dk x 16) the tile's queries transposed, one
 * row per lane; kw (8 x dk rounded up to 16) the keys of one step of the
 * scores widened to f32 (f16 / bf16 caches); vc (64 x dv rounded up to 32)
 * one chunk of values as f32 (AVX2); st (keys x 16) the scores, then
 * the exp terms, of key j for all 16 rows at st[16 j + r] (before the scores
 * it holds the query rows being transposed).
 *
 * f16 / bf16 caches: keys are widened into kw per step of 8 keys, values
 * as they are loaded; widening is exact, so the operations below see the
 * same f32 values in the same order as with an f32 cache.
 *
 * AVX-512 variant, per tile:
 *   scores  8 keys at a time; acc[u] (16 lanes = 16 rows) += qt[d] ·
 *           broadcast(k_u[d]) for d = 0..dk-1 — a row's score is one lane's
 *           chain of fused multiply-adds, as in the definition;
 *   softmax lane-wise over j: masked max, exp, left-to-right sum;
 *   values  two rows at a time (sharing the value loads up to the shorter
 *           row's last key), 64 elements of the value per pass, one lane per
 *           element, accumulators in registers.
 * AVX2 variant: the same on 8-lane halves — scores for 8 rows (8 keys at a
 * time) or 16 rows (4 keys at a time, two halves), values 32 elements per pass
 * over chunks of 64 keys copied to vc.
 */
#include "kernels/attn.h"

#include "kernels/exp_impl.h"
#include "kernels/matmul_impl.h"
#include "kernels/ops.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"

/* Keys per chunk of the AVX2 values (ea__attend_avx2_dt). */
#define EA__ATT_KC 64
/* Steps of the AVX2 scores ahead whose keys a step prefetches. */
#ifndef EA__ATT_SPF
#define EA__ATT_SPF 1
#endif
/* Keys ahead whose whole values the copy of a chunk prefetches. */
#ifndef EA__ATT_PF
#define EA__ATT_PF 16
#endif

static inline size_t ea__dv32(int dv) { return ((size_t)dv + 31) & ~(size_t)31; }

size_t ea_k_attend_scratch(int dk, int dv, int max_keys) {
    size_t dk16 = ((size_t)dk + 15) & ~(size_t)15, keys = (size_t)max_keys > dk16 ? (size_t)max_keys : dk16;
    return (size_t)EA_K_ATTN_ROWS * (dk16 + keys) + 8 * dk16 + EA__ATT_KC * ea__dv32(dv) + 16;
}

/* The scratch's parts (layout above). */
static inline float *ea__kw(const ea_k_attn_kv *kv, float *scratch) { return scratch + (size_t)EA_K_ATTN_ROWS * kv->dk; }
static inline float *ea__vc(const ea_k_attn_kv *kv, float *scratch) {
    return ea__kw(kv, scratch) + 8 * (((size_t)kv->dk + 15) & ~(size_t)15);
}
static inline float *ea__st(const ea_k_attn_kv *kv, float *scratch) {
    return ea__vc(kv, scratch) + EA__ATT_KC * ea__dv32(kv->dv);
}

/* ---- cache elements ----------------------------------------------------------- */

static inline size_t ea__esz(int dt) { return dt == EA_F32 ? 4 : 2; }

/* Element i of a row at p, as f32 (exact). */
static inline float ea__el(const uint8_t *p, int i, int dt) {
    if (dt == EA_F32) {
        float f;
        memcpy(&f, p + 4 * (size_t)i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * (size_t)i, 2);
    if (dt == EA_BF16) return ea_bf16_to_f32(h);
    float f;
    ea_dtypes[EA_F16].to_f32(&h, &f, 1);
    return f;
}

/* ---- positions -> cache rows ------------------------------------------------ */

/* Walks positions 0, 1, 2, ... of a paged sequence without a division per step. */
typedef struct {
    const ea_k_attn_kv *kv;
    int blk, off;
} ea__walk;

/* Element 0 of the key / value at the walk's position. */
static inline const uint8_t *ea__key(const ea__walk *w, int dt) {
    const ea_k_attn_kv *kv = w->kv;
    return (const uint8_t *)kv->k +
           ((size_t)kv->blocks[w->blk] * kv->k_block + (size_t)w->off * kv->k_stride) * ea__esz(dt);
}
static inline const uint8_t *ea__val(const ea__walk *w, int dt) {
    const ea_k_attn_kv *kv = w->kv;
    return (const uint8_t *)kv->v +
           ((size_t)kv->blocks[w->blk] * kv->v_block + (size_t)w->off * kv->v_stride) * ea__esz(dt);
}

static inline void ea__walk_next(ea__walk *w) {
    if (++w->off == w->kv->block_size) {
        w->off = 0;
        w->blk++;
    }
}

/* Start reading the key (value: the value) at the walk's position, and step the walk. */
static inline void ea__prefetch_row(ea__walk *w, int value, int dt) {
    const char *row = (const char *)(value ? ea__val(w, dt) : ea__key(w, dt));
    size_t bytes = (size_t)(value ? w->kv->dv : w->kv->dk) * ea__esz(dt);
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(row + o, _MM_HINT_T0);
    ea__walk_next(w);
}

/* The keys of one scores step: nk of the nu keys from the walk's position
 * (the walk then stands on the next step's first key when the step is
 * whole). kp[u] is key u as f32: its cache row, or (f16 / bf16) the row
 * widened by widen into kw + u * dk16; keys past nk repeat one that exists
 * (computed, never stored). */
typedef void (*ea__widen_fn)(const uint8_t *p, int n, float *o, int dt);
static inline __attribute__((always_inline)) void ea__step_keys(const ea_k_attn_kv *kv, ea__walk *w, int nu, int nk,
                                                               float *kw, const float **kp, ea__widen_fn widen,
                                                               int dt) {
    size_t dk16 = ((size_t)kv->dk + 15) & ~(size_t)15;
    for (int u = 0; u < nu; u++) {
        const uint8_t *row = ea__key(w, dt);
        if (dt == EA_F32) kp[u] = (const float *)row;
        else if (u < nk) {
            kp[u] = kw + u * dk16;
            widen(row, kv->dk, kw + u * dk16, dt);
        } else
            kp[u] = kw;
        if (u + 1 < nk) ea__walk_next(w);
    }
    if (nk == nu) ea__walk_next(w);
}

static int ea__n_keys(int n_rows, const int32_t *last) {
    int p = 0;
    for (int r = 0; r < n_rows; r++) p = last[r] + 1 > p ? last[r] + 1 : p;
    return p;
}

/* ---- reference twin ----------------------------------------------------------- */

void ea_k_attend_ref(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last,
                     float *const *out, float *scratch) {
    float *st = ea__st(kv, scratch);
    for (int r = 0; r < n_rows; r++) {
        ea__walk w = {kv, 0, 0};
        for (int j = 0; j <= last[r]; j++, ea__walk_next(&w)) {
            const uint8_t *k = ea__key(&w, kv->dtype);
            float acc = 0.0f;
            for (int d = 0; d < kv->dk; d++) acc = fmaf(q[r][d], ea__el(k, d, kv->dtype), acc);
            st[16 * j + r] = acc * kv->scale;
        }
        float m = st[r];
        for (int j = 1; j <= last[r]; j++) m = st[16 * j + r] > m ? st[16 * j + r] : m;
        float sum = 0.0f;
        for (int j = 0; j <= last[r]; j++) {
            float e = ea_k_expf(st[16 * j + r] - m);
            st[16 * j + r] = e;
            sum = sum + e;
        }
        float inv = 1.0f / sum;
        for (int d = 0; d < kv->dv; d++) {
            ea__walk wv = {kv, 0, 0};
            float acc = 0.0f;
            for (int j = 0; j <= last[r]; j++, ea__walk_next(&wv))
                acc = fmaf(st[16 * j + r], ea__el(ea__val(&wv, kv->dtype), d, kv->dtype),
                           acc);
            out[r][d] = acc * inv;
        }
    }
}

/* ---- AVX-512 ------------------------------------------------------------------ */

/* 16 elements of a cache row at p as f32: the lanes of m (the others 0). */
EA__T512 static inline __attribute__((always_inline)) __m512 ea__kv16(const uint8_t *p, __mmask16 m, const int dt) {
    if (dt == EA_F32) return _mm512_maskz_loadu_ps(m, p);
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return dt == EA_F16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* A key row of n elements at p, widened to f32 into o. */
EA__T512 static void ea__widen16(const uint8_t *p, int n, float *o, int dt) {
    for (int d = 0; d < n; d += 16) {
        __mmask16 m = n - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - d)) - 1);
        _mm512_mask_storeu_ps(o + d, m, ea__kv16(p + (size_t)d * 2, m, dt));
    }
}

/* Scores of keys [0, n_keys) for all 16 lanes into st (scaled); kw: widened keys (f16 / bf16). */
EA__T512 static inline __attribute__((always_inline)) void ea__scores(const ea_k_attn_kv *kv, const float *qt,
                                                                      int n_keys, float *kw, float *st, const int dt) {
    int dk = kv->dk;
    __m512 sc = _mm512_set1_ps(kv->scale);
    ea__walk w = {kv, 0, 0};
    for (int j0 = 0; j0 < n_keys; j0 += 8) {
        int nk = n_keys - j0 < 8 ? n_keys - j0 : 8;
        const float *kp[8];
        ea__step_keys(kv, &w, 8, nk, kw, kp, ea__widen16, dt);
        __m512 acc[8];
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) acc[u] = _mm512_setzero_ps();
        for (int d = 0; d < dk; d++) {
            __m512 qd = _mm512_load_ps(qt + 16 * d);
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++) acc[u] = _mm512_fmadd_ps(qd, _mm512_set1_ps(kp[u][d]), acc[u]);
        }
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++)
            if (u < nk) _mm512_store_ps(st + 16 * (j0 + u), _mm512_mul_ps(acc[u], sc));
    }
}

/* Values of one or two rows for elements [d0, d0 + 64) of the value:
 * oa = (Σ_{j ≤ la} e_a[j] v_j) * inva, and ob likewise when rb >= 0. The two
 * rows share the loads of v_j for j ≤ min(la, lb); the longer one then goes on
 * alone — each row's chain is its own fused multiply-adds in increasing j. */
EA__T512 static inline __attribute__((always_inline)) void ea__values64(const ea_k_attn_kv *kv, const float *st, int d0,
                                                                        int ra, int la, float inva, float *oa, int rb,
                                                                        int lb, float invb, float *ob, const int dt) {
    const size_t es = ea__esz(dt);
    int n = kv->dv - d0 < 64 ? kv->dv - d0 : 64;
    __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 m1 = n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
    __mmask16 m2 = n >= 48 ? 0xffff : n > 32 ? (__mmask16)((1u << (n - 32)) - 1) : 0;
    __mmask16 m3 = n >= 64 ? 0xffff : n > 48 ? (__mmask16)((1u << (n - 48)) - 1) : 0;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int both = rb >= 0 ? (la < lb ? la : lb) : -1;
    ea__walk w = {kv, 0, 0};
    int j = 0;
    for (; j <= both; j++, ea__walk_next(&w)) {
        const uint8_t *v = ea__val(&w, dt) + (size_t)d0 * es;
        __m512 x0 = ea__kv16(v, m0, dt), x1 = ea__kv16(v + 16 * es, m1, dt);
        __m512 x2 = ea__kv16(v + 32 * es, m2, dt), x3 = ea__kv16(v + 48 * es, m3, dt);
        __m512 ea = _mm512_set1_ps(st[16 * j + ra]), eb = _mm512_set1_ps(st[16 * j + rb]);
        a0 = _mm512_fmadd_ps(ea, x0, a0), a1 = _mm512_fmadd_ps(ea, x1, a1);
        a2 = _mm512_fmadd_ps(ea, x2, a2), a3 = _mm512_fmadd_ps(ea, x3, a3);
        b0 = _mm512_fmadd_ps(eb, x0, b0), b1 = _mm512_fmadd_ps(eb, x1, b1);
        b2 = _mm512_fmadd_ps(eb, x2, b2), b3 = _mm512_fmadd_ps(eb, x3, b3);
    }
    /* the rest of the longer row (or all of a single row) */
    int r = rb >= 0 && lb > la ? rb : ra, last = r == ra ? la : lb;
    __m512 c0 = r == ra ? a0 : b0, c1 = r == ra ? a1 : b1, c2 = r == ra ? a2 : b2, c3 = r == ra ? a3 : b3;
    for (; j <= last; j++, ea__walk_next(&w)) {
        const uint8_t *v = ea__val(&w, dt) + (size_t)d0 * es;
        __m512 e = _mm512_set1_ps(st[16 * j + r]);
        c0 = _mm512_fmadd_ps(e, ea__kv16(v, m0, dt), c0);
        c1 = _mm512_fmadd_ps(e, ea__kv16(v + 16 * es, m1, dt), c1);
        c2 = _mm512_fmadd_ps(e, ea__kv16(v + 32 * es, m2, dt), c2);
        c3 = _mm512_fmadd_ps(e, ea__kv16(v + 48 * es, m3, dt), c3);
    }
    if (r == ra) a0 = c0, a1 = c1, a2 = c2, a3 = c3;
    else b0 = c0, b1 = c1, b2 = c2, b3 = c3;
    __m512 ia = _mm512_set1_ps(inva), ib = _mm512_set1_ps(invb);
    _mm512_mask_storeu_ps(oa + d0, m0, _mm512_mul_ps(a0, ia));
    _mm512_mask_storeu_ps(oa + d0 + 16, m1, _mm512_mul_ps(a1, ia));
    _mm512_mask_storeu_ps(oa + d0 + 32, m2, _mm512_mul_ps(a2, ia));
    _mm512_mask_storeu_ps(oa + d0 + 48, m3, _mm512_mul_ps(a3, ia));
    if (rb >= 0) {
        _mm512_mask_storeu_ps(ob + d0, m0, _mm512_mul_ps(b0, ib));
        _mm512_mask_storeu_ps(ob + d0 + 16, m1, _mm512_mul_ps(b1, ib));
        _mm512_mask_storeu_ps(ob + d0 + 32, m2, _mm512_mul_ps(b2, ib));
        _mm512_mask_storeu_ps(ob + d0 + 48, m3, _mm512_mul_ps(b3, ib));
    }
}

EA__T512 static inline __attribute__((always_inline)) void ea__attend_avx512_dt(const ea_k_attn_kv *kv, int n_rows,
                                                                                const float *const *q,
                                                                                const int32_t *last, float *const *out,
                                                                                float *scratch, const int dt) {
    int dk = kv->dk, n_keys = ea__n_keys(n_rows, last);
    float *qt = scratch, *kw = ea__kw(kv, scratch), *st = ea__st(kv, scratch);
    /* qt[16 d + r] = q[r][d], 0 for rows >= n_rows: the rows side by side
     * in st (free until the scores), then 16 x 16 transposes */
    int dk16 = (dk + 15) & ~15;
    for (int r = 0; r < EA_K_ATTN_ROWS; r++)
        for (int d0 = 0; d0 < dk16; d0 += 16) {
            __mmask16 mk = r >= n_rows ? 0 : dk - d0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (dk - d0)) - 1);
            _mm512_storeu_ps(st + (size_t)r * dk16 + d0, _mm512_maskz_loadu_ps(mk, q[r < n_rows ? r : 0] + d0));
        }
    for (int d0 = 0; d0 < dk; d0 += 16)
        ea__put_transposed(st + d0, dk16, qt + 16 * d0, 16, dk - d0 < 16 ? dk - d0 : 16, 16);
    ea__scores(kv, qt, n_keys, kw, st, dt);

    /* softmax, one row per lane; rows past n_rows have last = -1 (no keys) */
    int32_t lastv[16];
    for (int r = 0; r < 16; r++) lastv[r] = r < n_rows ? last[r] : -1;
    __m512i lim = _mm512_loadu_si512(lastv);
    __m512 m = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
    /* the definition's max: m = s[0], then m = s[j] > m ? s[j] : m (MAXPS(s, m) is exactly that) */
    for (int j = 0; j < n_keys; j++) {
        __mmask16 in = _mm512_cmpge_epi32_mask(lim, _mm512_set1_epi32(j));
        __m512 s = _mm512_load_ps(st + 16 * j);
        m = _mm512_mask_mov_ps(m, in, j == 0 ? s : _mm512_mask_max_ps(m, in, s, m));
    }
    for (int j = 0; j < n_keys; j++) {
        __mmask16 in = _mm512_cmpge_epi32_mask(lim, _mm512_set1_epi32(j));
        __m512 e = _mm512_maskz_mov_ps(in, ea__expf16(_mm512_sub_ps(_mm512_load_ps(st + 16 * j), m)));
        _mm512_store_ps(st + 16 * j, e);
        sum = _mm512_mask_add_ps(sum, in, sum, e);
    }
    float inv[16];
    _mm512_storeu_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.0f), sum));

    for (int r = 0; r < n_rows; r += 2) /* rows two at a time */
        for (int d0 = 0; d0 < kv->dv; d0 += 64)
            if (r + 1 < n_rows)
                ea__values64(kv, st, d0, r, last[r], inv[r], out[r], r + 1, last[r + 1], inv[r + 1], out[r + 1], dt);
            else
                ea__values64(kv, st, d0, r, last[r], inv[r], out[r], -1, -1, 0.0f, NULL, dt);
}

/* One copy per cache dtype, each with its loads inlined. */
EA__T512 static void ea__attend_avx512(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last,
                                       float *const *out, float *scratch) {
    switch (kv->dtype) {
    case EA_F16: ea__attend_avx512_dt(kv, n_rows, q, last, out, scratch, EA_F16); break;
    case EA_BF16: ea__attend_avx512_dt(kv, n_rows, q, last, out, scratch, EA_BF16); break;
    default: ea__attend_avx512_dt(kv, n_rows, q, last, out, scratch, EA_F32); break;
    }
}

/* ---- AVX2 --------------------------------------------------------------------- */

/* The AVX-512 variant on 8-lane halves: lanes 0..7 (rows 0..7) and, for a tile
 * of more than 8 rows, lanes 8..15 of the same qt and st layout. Every lane
 * still runs its row's operations of the definition and nothing else. */

/* 8 elements of a cache row at p as f32: all of them (full), or the first
 * n (the lanes of m; the others 0). */
EA__T256 static inline __attribute__((always_inline)) __m256 ea__kv8(const uint8_t *p, __m256i m, int n, int full,
                                                                     const int dt) {
    if (dt == EA_F32) return full ? _mm256_loadu_ps((const float *)p) : _mm256_maskload_ps((const float *)p, m);
    __m128i h;
    if (full) h = _mm_loadu_si128((const __m128i *)p);
    else {
        uint16_t t[8] = {0};
        memcpy(t, p, 2 * (size_t)(n < 0 ? 0 : n > 8 ? 8 : n));
        h = _mm_loadu_si128((const __m128i *)t);
    }
    return dt == EA_F16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* A key row of n elements at p, widened to f32 into o. */
EA__T256 static void ea__widen8(const uint8_t *p, int n, float *o, int dt) {
    int d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(o + d, ea__kv8(p + (size_t)d * 2, _mm256_setzero_si256(), 8, 1, dt));
    for (; d < n; d++) o[d] = ea__el(p, d, dt);
}

/* Scores for nh halves (a constant after inlining): 8 / nh keys at a time,
 * acc[u nh + h] += qt[d] (half h) · broadcast(k_u[d]) for d = 0..dk-1;
 * kw: the widened keys (f16 / bf16). */
EA__T256 static inline __attribute__((always_inline)) void ea__scores8(const ea_k_attn_kv *kv, const float *qt,
                                                                       int n_keys, float *kw, float *st, int nh,
                                                                       const int dt) {
    int dk = kv->dk, nu = 8 / nh;
    __m256 sc = _mm256_set1_ps(kv->scale);
    ea__walk w = {kv, 0, 0};
    int jp = nu * EA__ATT_SPF; /* the keys EA__ATT_SPF steps ahead, from memory while this step computes: a
                                * block holds few of a head's rows, and the hardware prefetcher stops at
                                * every page */
    ea__walk wp = {kv, jp / kv->block_size, jp % kv->block_size};
    for (int j0 = 0; j0 < n_keys; j0 += nu) {
        int nk = n_keys - j0 < nu ? n_keys - j0 : nu;
        const float *kp[8];
        ea__step_keys(kv, &w, nu, nk, kw, kp, ea__widen8, dt);
        for (int u = 0; u < nu && jp < n_keys; u++, jp++)
            ea__prefetch_row(&wp, 0, dt);
        __m256 acc[8];
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) acc[u] = _mm256_setzero_ps();
        for (int d = 0; d < dk; d++) {
            __m256 q0 = _mm256_load_ps(qt + 16 * d), q1 = _mm256_load_ps(qt + 16 * d + 8);
#pragma GCC unroll 8
            for (int u = 0; u < nu; u++) {
                __m256 k = _mm256_set1_ps(kp[u][d]);
                acc[u * nh] = _mm256_fmadd_ps(q0, k, acc[u * nh]);
                if (nh == 2) acc[u * 2 + 1] = _mm256_fmadd_ps(q1, k, acc[u * 2 + 1]);
            }
        }
#pragma GCC unroll 8
        for (int u = 0; u < nu; u++)
            if (u < nk)
                for (int h = 0; h < nh; h++)
                    _mm256_store_ps(st + 16 * (j0 + u) + 8 * h, _mm256_mul_ps(acc[u * nh + h], sc));
    }
}

EA__T256 static inline __attribute__((always_inline)) void ea__st8(float *p, __m256i m, int full, __m256 x) {
    if (full) _mm256_storeu_ps(p, x);
    else _mm256_maskstore_ps(p, m, x);
}

/* The values of keys [j0, j1) as f32, one after another in vc (key j at
 * vc + (j - j0) * dv32, zeros past dv): every (row pair, 32 elements) pass
 * of the chunk then reads them from L1 by pointer, with no walk of the paged
 * cache and (f16 / bf16) no widening of its own. Made when a head's value was
 * a strided part of a 1 KB row (before the cache kept a head's rows
 * together), so that 64 keys of it fell into a quarter of L1's sets and every
 * pass read them from L2 (docs/kernels.md). Widening is exact, so the passes
 * see the cache's values. */
EA__T256 static inline __attribute__((always_inline)) void ea__copy_values(const ea_k_attn_kv *kv, int j0, int j1,
                                                                           int n_keys, float *vc, size_t dv32,
                                                                           const int dt) {
    size_t vb = (size_t)kv->dv * ea__esz(dt);
    int bs = kv->block_size, jp = j0 + EA__ATT_PF;
    ea__walk w = {kv, j0 / bs, j0 % bs}, wp = {kv, jp / bs, jp % bs};
    for (int j = j0; j < j1; j++, ea__walk_next(&w)) {
        if (jp < n_keys) ea__prefetch_row(&wp, 1, dt), jp++;
        const uint8_t *v = ea__val(&w, dt);
        float *o = vc + (size_t)(j - j0) * dv32;
        if (dt == EA_F32) memcpy(o, v, vb);
        else ea__widen8(v, kv->dv, o, dt);
        for (size_t d = (size_t)kv->dv; d < dv32; d++) o[d] = 0.0f;
    }
}

/* ea__values64 for elements [d0, d0 + 32) in 4 ymm per row, over the keys
 * [j0, j1) of a chunk copied to vc (ea__copy_values): a row's sums so far
 * (j0 > 0) come from its output and go back there, multiplied by its 1/sum in
 * the chunk that holds its last key. Every lane still takes its fused
 * multiply-adds in increasing j: chunks change where the accumulators wait,
 * not the operations. full: all 32 elements exist, else the outputs' lanes
 * past dv are masked. */
EA__T256 static inline __attribute__((always_inline)) void ea__values32(const ea_k_attn_kv *kv, const float *vc,
                                                                        size_t dv32, const float *st, int d0, int j0,
                                                                        int j1, int ra, int la, float inva, float *oa,
                                                                        int rb, int lb, float invb, float *ob,
                                                                        int full) {
    int act_a = j0 <= la, act_b = rb >= 0 && j0 <= lb;
    if (!act_a && !act_b) return;
    __m256i m[4];
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) m[s] = ea__mask8(kv->dv - d0 - 8 * s);
    __m256 a[4], b[4], c[4];
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        a[s] = act_a && j0 > 0 ? (full ? _mm256_loadu_ps(oa + d0 + 8 * s) : _mm256_maskload_ps(oa + d0 + 8 * s, m[s]))
                               : _mm256_setzero_ps();
        b[s] = act_b && j0 > 0 ? (full ? _mm256_loadu_ps(ob + d0 + 8 * s) : _mm256_maskload_ps(ob + d0 + 8 * s, m[s]))
                               : _mm256_setzero_ps();
    }
    int both = rb >= 0 ? (la < lb ? la : lb) : -1, jend = both < j1 - 1 ? both : j1 - 1;
    const float *v = vc + d0;
    int j = j0;
    for (; j <= jend; j++, v += dv32) {
        __m256 ea = _mm256_set1_ps(st[16 * j + ra]), eb = _mm256_set1_ps(st[16 * j + rb]);
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++) {
            __m256 x = _mm256_load_ps(v + 8 * s);
            a[s] = _mm256_fmadd_ps(ea, x, a[s]);
            b[s] = _mm256_fmadd_ps(eb, x, b[s]);
        }
    }
    /* the rest of the longer row (or all of a single row) in this chunk */
    int r = rb >= 0 && lb > la ? rb : ra, last = r == ra ? la : lb, jl = last < j1 - 1 ? last : j1 - 1;
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) c[s] = r == ra ? a[s] : b[s];
    for (; j <= jl; j++, v += dv32) {
        __m256 e = _mm256_set1_ps(st[16 * j + r]);
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++) c[s] = _mm256_fmadd_ps(e, _mm256_load_ps(v + 8 * s), c[s]);
    }
    __m256 ia = _mm256_set1_ps(j1 > la ? inva : 1.0f), ib = _mm256_set1_ps(rb >= 0 && j1 > lb ? invb : 1.0f);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        if (r == ra) a[s] = c[s];
        else b[s] = c[s];
        /* a row's last chunk stores sum * (1/sum); the others store the sum as it is */
        if (act_a) ea__st8(oa + d0 + 8 * s, m[s], full, j1 > la ? _mm256_mul_ps(a[s], ia) : a[s]);
        if (act_b) ea__st8(ob + d0 + 8 * s, m[s], full, j1 > lb ? _mm256_mul_ps(b[s], ib) : b[s]);
    }
}

EA__T256 static inline __attribute__((always_inline)) void ea__attend_avx2_dt(const ea_k_attn_kv *kv, int n_rows,
                                                                              const float *const *q,
                                                                              const int32_t *last, float *const *out,
                                                                              float *scratch, const int dt) {
    int dk = kv->dk, n_keys = ea__n_keys(n_rows, last), nh = n_rows > 8 ? 2 : 1;
    float *qt = scratch, *kw = ea__kw(kv, scratch), *st = ea__st(kv, scratch);
    /* qt[16 d + r] = q[r][d], 0 for the rows >= n_rows of the halves in use: 8 x 8 transposes */
    int d8 = dk & ~7;
    for (int h = 0; h < nh; h++) {
        for (int d = 0; d < d8; d += 8) {
            __m256 x[8], xt[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) x[i] = 8 * h + i < n_rows ? _mm256_loadu_ps(q[8 * h + i] + d) : _mm256_setzero_ps();
            ea__tr8(x, xt);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm256_store_ps(qt + 16 * (d + i) + 8 * h, xt[i]);
        }
        for (int d = d8; d < dk; d++)
            for (int r = 8 * h; r < 8 * h + 8; r++) qt[16 * d + r] = r < n_rows ? q[r][d] : 0.0f;
    }
    if (nh == 1) ea__scores8(kv, qt, n_keys, kw, st, 1, dt);
    else ea__scores8(kv, qt, n_keys, kw, st, 2, dt);

    /* softmax, one row per lane, as in the AVX-512 variant (MAXPS(s, m) is s > m ? s : m) */
    int32_t lastv[16];
    for (int r = 0; r < 16; r++) lastv[r] = r < n_rows ? last[r] : -1;
    float inv[16];
    for (int h = 0; h < nh; h++) {
        float *sh = st + 8 * h;
        __m256i lim = _mm256_loadu_si256((const __m256i *)(lastv + 8 * h));
        __m256 m = _mm256_set1_ps(-INFINITY), sum = _mm256_setzero_ps();
        for (int j = 0; j < n_keys; j++) {
            __m256 in = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lim, _mm256_set1_epi32(j - 1)));
            __m256 s = _mm256_load_ps(sh + 16 * j);
            m = _mm256_blendv_ps(m, j == 0 ? s : _mm256_max_ps(s, m), in);
        }
        for (int j = 0; j < n_keys; j++) {
            __m256 in = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lim, _mm256_set1_epi32(j - 1)));
            __m256 e = _mm256_and_ps(in, ea__expf8(_mm256_sub_ps(_mm256_load_ps(sh + 16 * j), m)));
            _mm256_store_ps(sh + 16 * j, e);
            sum = _mm256_blendv_ps(sum, _mm256_add_ps(sum, e), in);
        }
        _mm256_storeu_ps(inv + 8 * h, _mm256_div_ps(_mm256_set1_ps(1.0f), sum));
    }

    float *vc = ea__vc(kv, scratch);
    size_t dv32 = ea__dv32(kv->dv);
    for (int j0 = 0; j0 < n_keys; j0 += EA__ATT_KC) { /* a chunk of keys, then rows two at a time */
        int j1 = n_keys - j0 < EA__ATT_KC ? n_keys : j0 + EA__ATT_KC;
        ea__copy_values(kv, j0, j1, n_keys, vc, dv32, dt);
        for (int r = 0; r < n_rows; r += 2) {
            int rb = r + 1 < n_rows ? r + 1 : -1;
            int lb = rb >= 0 ? last[rb] : -1;
            float invb = rb >= 0 ? inv[rb] : 0.0f, *ob = rb >= 0 ? out[rb] : NULL;
            for (int d0 = 0; d0 < kv->dv; d0 += 32)
                if (kv->dv - d0 >= 32)
                    ea__values32(kv, vc, dv32, st, d0, j0, j1, r, last[r], inv[r], out[r], rb, lb, invb, ob, 1);
                else ea__values32(kv, vc, dv32, st, d0, j0, j1, r, last[r], inv[r], out[r], rb, lb, invb, ob, 0);
        }
    }
}

/* One copy per cache dtype, each with its loads inlined. */
EA__T256 static void ea__attend_avx2(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last,
                                     float *const *out, float *scratch) {
    switch (kv->dtype) {
    case EA_F16: ea__attend_avx2_dt(kv, n_rows, q, last, out, scratch, EA_F16); break;
    case EA_BF16: ea__attend_avx2_dt(kv, n_rows, q, last, out, scratch, EA_BF16); break;
    default: ea__attend_avx2_dt(kv, n_rows, q, last, out, scratch, EA_F32); break;
    }
}

/* ---- dispatch ----------------------------------------------------------------- */

void ea_k_attend_prefetch(const ea_k_attn_kv *kv, int n_rows, const int32_t *last) {
    int n_keys = ea__n_keys(n_rows, last);
    if (n_keys > 64) n_keys = 64;
    ea__walk w = {kv, 0, 0};
    for (int j = 0; j < n_keys; j++, ea__walk_next(&w)) {
        const char *k = (const char *)ea__key(&w, kv->dtype);
        const char *v = (const char *)ea__val(&w, kv->dtype);
        for (size_t b = 0; b < (size_t)kv->dk * ea__esz(kv->dtype); b += 64) _mm_prefetch(k + b, _MM_HINT_T1);
        for (size_t b = 0; b < (size_t)kv->dv * ea__esz(kv->dtype); b += 64) _mm_prefetch(v + b, _MM_HINT_T1);
    }
}

void ea_k_attend(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last, float *const *out,
                 float *scratch) {
    switch (ea__ops_level()) { /* kernels/ops.h: EAAS_ISA, the CPU, or ea_k_ops_set_isa */
    case EA__OPS_AVX512: ea__attend_avx512(kv, n_rows, q, last, out, scratch); break;
    case EA__OPS_AVX2: ea__attend_avx2(kv, n_rows, q, last, out, scratch); break;
    default: ea_k_attend_ref(kv, n_rows, q, last, out, scratch); break;
    }
}
