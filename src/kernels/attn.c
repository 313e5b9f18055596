/*
 * attn.c — tiled causal attention; the contract and the operation order are
 * in attn.h.
 *
 * Scratch layout (floats): qt (dk x 16) the tile's queries transposed, one
 * row per lane; st (keys x 16) the scores, then the exp terms, of key j for
 * all 16 rows at st[16 j + r].
 *
 * AVX-512 variant, per tile:
 *   scores  8 keys at a time; acc[u] (16 lanes = 16 rows) += qt[d] ·
 *           broadcast(k_u[d]) for d = 0..dk-1 — a row's score is one lane's
 *           chain of fused multiply-adds, as in the definition;
 *   softmax lane-wise over j: masked max, exp, left-to-right sum;
 *   values  per row (two rows at once when they end at the same key), 64
 *           elements of the value per pass, one lane per element.
 */
#include "kernels/attn.h"

#include "kernels/exp_impl.h"
#include "kernels/ops.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t ea_k_attend_scratch(int dk, int max_keys) {
    return (size_t)EA_K_ATTN_ROWS * ((size_t)dk + (size_t)max_keys) + 16;
}

/* ---- positions -> cache rows ------------------------------------------------ */

/* Walks positions 0, 1, 2, ... of a paged sequence without a division per step. */
typedef struct {
    const ea_k_attn_kv *kv;
    int blk, off;
} ea__walk;

static inline size_t ea__walk_row(const ea__walk *w) {
    return (size_t)w->kv->blocks[w->blk] * (size_t)w->kv->block_size + (size_t)w->off;
}

static inline void ea__walk_next(ea__walk *w) {
    if (++w->off == w->kv->block_size) {
        w->off = 0;
        w->blk++;
    }
}

static int ea__n_keys(int n_rows, const int32_t *last) {
    int p = 0;
    for (int r = 0; r < n_rows; r++) p = last[r] + 1 > p ? last[r] + 1 : p;
    return p;
}

/* ---- reference twin ----------------------------------------------------------- */

void ea_k_attend_ref(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last,
                     float *const *out, float *scratch) {
    float *st = scratch + (size_t)EA_K_ATTN_ROWS * kv->dk;
    for (int r = 0; r < n_rows; r++) {
        ea__walk w = {kv, 0, 0};
        for (int j = 0; j <= last[r]; j++, ea__walk_next(&w)) {
            const float *k = kv->k + ea__walk_row(&w) * kv->k_stride;
            float acc = 0.0f;
            for (int d = 0; d < kv->dk; d++) acc = fmaf(q[r][d], k[d], acc);
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
                acc = fmaf(st[16 * j + r], kv->v[ea__walk_row(&wv) * kv->v_stride + d], acc);
            out[r][d] = acc * inv;
        }
    }
}

/* ---- AVX-512 ------------------------------------------------------------------ */

/* Scores of keys [0, n_keys) for all 16 lanes into st (scaled). */
EA__T512 static void ea__scores(const ea_k_attn_kv *kv, const float *qt, int n_keys, float *st) {
    int dk = kv->dk;
    __m512 sc = _mm512_set1_ps(kv->scale);
    ea__walk w = {kv, 0, 0};
    for (int j0 = 0; j0 < n_keys; j0 += 8) {
        int nk = n_keys - j0 < 8 ? n_keys - j0 : 8;
        const float *kp[8];
        for (int u = 0; u < 8; u++) {
            kp[u] = kv->k + ea__walk_row(&w) * kv->k_stride;
            if (u + 1 < nk) ea__walk_next(&w);
        }
        if (nk == 8) ea__walk_next(&w);
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

/* out rows ra (and rb if rb >= 0, same last) = (Σ_j e_j v_j) * inv, 64 elements per pass. */
EA__T512 static void ea__values(const ea_k_attn_kv *kv, const float *st, int ra, int rb, int last, float inva,
                              float invb, float *oa, float *ob) {
    int dv = kv->dv;
    for (int d0 = 0; d0 < dv; d0 += 64) {
        int nv = (dv - d0 + 15) / 16 < 4 ? (dv - d0 + 15) / 16 : 4;
        __mmask16 tail = (dv - d0) % 16 && nv == (dv - d0 + 15) / 16 ? (__mmask16)((1u << ((dv - d0) % 16)) - 1) : 0xffff;
        __m512 a[4], b[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) a[c] = b[c] = _mm512_setzero_ps();
        ea__walk w = {kv, 0, 0};
        for (int j = 0; j <= last; j++, ea__walk_next(&w)) {
            const float *v = kv->v + ea__walk_row(&w) * kv->v_stride + d0;
            __m512 ea = _mm512_set1_ps(st[16 * j + ra]);
            __m512 eb = _mm512_set1_ps(rb >= 0 ? st[16 * j + rb] : 0.0f);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                if (c >= nv) break;
                __m512 x = _mm512_maskz_loadu_ps(c == nv - 1 ? tail : 0xffff, v + 16 * c);
                a[c] = _mm512_fmadd_ps(ea, x, a[c]);
                if (rb >= 0) b[c] = _mm512_fmadd_ps(eb, x, b[c]);
            }
        }
        for (int c = 0; c < nv; c++) {
            __mmask16 mk = c == nv - 1 ? tail : 0xffff;
            _mm512_mask_storeu_ps(oa + d0 + 16 * c, mk, _mm512_mul_ps(a[c], _mm512_set1_ps(inva)));
            if (rb >= 0) _mm512_mask_storeu_ps(ob + d0 + 16 * c, mk, _mm512_mul_ps(b[c], _mm512_set1_ps(invb)));
        }
    }
}

EA__T512 static void ea__attend_avx512(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last,
                                     float *const *out, float *scratch) {
    int dk = kv->dk, n_keys = ea__n_keys(n_rows, last);
    float *qt = scratch, *st = scratch + (size_t)EA_K_ATTN_ROWS * dk;
    /* qt[16 d + r] = q[r][d], 0 for rows >= n_rows: 16 elements of a row per scatter */
    for (int d = 0; d < dk; d++) _mm512_store_ps(qt + 16 * d, _mm512_setzero_ps());
    __m512i col = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                     _mm512_set1_epi32(16));
    for (int r = 0; r < n_rows; r++)
        for (int d0 = 0; d0 < dk; d0 += 16) {
            __mmask16 mk = dk - d0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (dk - d0)) - 1);
            _mm512_mask_i32scatter_ps(qt + 16 * d0 + r, mk, col, _mm512_maskz_loadu_ps(mk, q[r] + d0), 4);
        }
    ea__scores(kv, qt, n_keys, st);

    /* softmax, one row per lane; rows past n_rows have last = -1 (no keys) */
    int32_t lastv[16];
    for (int r = 0; r < 16; r++) lastv[r] = r < n_rows ? last[r] : -1;
    __m512i lim = _mm512_loadu_si512(lastv);
    __m512 m = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
    for (int j = 0; j < n_keys; j++) {
        __mmask16 in = _mm512_cmpge_epi32_mask(lim, _mm512_set1_epi32(j));
        __m512 s = _mm512_load_ps(st + 16 * j);
        m = _mm512_mask_mov_ps(m, in, j == 0 ? s : _mm512_mask_max_ps(m, in, s, m));
    }
    /* the definition's max: m = s[0], then m = s[j] > m ? s[j] : m (same value for non-NaN scores) */
    for (int j = 0; j < n_keys; j++) {
        __mmask16 in = _mm512_cmpge_epi32_mask(lim, _mm512_set1_epi32(j));
        __m512 e = _mm512_maskz_mov_ps(in, ea__expf16(_mm512_sub_ps(_mm512_load_ps(st + 16 * j), m)));
        _mm512_store_ps(st + 16 * j, e);
        sum = _mm512_mask_add_ps(sum, in, sum, e);
    }
    float inv[16];
    _mm512_storeu_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.0f), sum));

    for (int r = 0; r < n_rows; r++) {
        int pair = r + 1 < n_rows && last[r + 1] == last[r];
        ea__values(kv, st, r, pair ? r + 1 : -1, last[r], inv[r], pair ? inv[r + 1] : 0.0f, out[r],
                   pair ? out[r + 1] : NULL);
        r += pair;
    }
}

/* ---- dispatch ----------------------------------------------------------------- */

typedef void (*ea__attend_fn)(const ea_k_attn_kv *, int, const float *const *, const int32_t *, float *const *,
                              float *);
static ea__attend_fn ea__attend_impl;

void ea_k_attend(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last, float *const *out,
                 float *scratch) {
    ea__attend_fn fn = __atomic_load_n(&ea__attend_impl, __ATOMIC_RELAXED);
    if (!fn) {
        __builtin_cpu_init();
        int v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && !getenv("EAAS_OPS_REF");
        fn = v ? ea__attend_avx512 : ea_k_attend_ref;
        __atomic_store_n(&ea__attend_impl, fn, __ATOMIC_RELAXED);
    }
    fn(kv, n_rows, q, last, out, scratch);
}
