/*
 * matmul_amx.c — bf16 weights on AMX tiles, without repacking the weights.
 *
 * We compute Yᵀ = W · Xᵀ: W (n, k) bf16 row-major is the A operand as it
 * lies in the file mapping (a tile is 16 W rows x 32 k, 64 bytes per row, row
 * stride = the W row size); X is the B operand, rounded to bf16 and packed per
 * call into VNNI tiles (ea__amx_pack). C tiles (16 W rows x 16 tokens, f32)
 * accumulate over the k-steps in increasing k, then are stored and written
 * transposed into Y.
 *
 *   packed X: token block tb (16 tokens), k-step s (32 k), one 1 KiB tile each
 *     xp[((tb * n_ks + s) * 16 + p) * 32 + t * 2 + e] = bf16(X[16 tb + t][32 s + 2 p + e])
 *     (0 for tokens >= m); n_ks = k / 32 (whole steps only).
 *
 * Reduction order of one (i, j): c = 0; for s in 0 .. k/32-1: c = TDPBF16PS
 * step s (the hardware's fixed order within a step); then for the k%32 tail
 * c = fmaf(w, bf16(x), c) in increasing k. No step depends on which other
 * rows or tokens share the tile (each C element reads one A row and one B
 * column), so the result is the same for m = 1 and m = 512 — the tests
 * check this bit for bit. W rows past the end of a chunk (< 32) are copied
 * into zero-padded scratch so the same kernel serves them.
 *
 * Tiles: tmm0-3 C (2 W blocks x 2 token blocks), tmm4-5 A (W), tmm6-7 B (X).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/matmul_impl.h"

#define EA__TA __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define EA__T5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

#define EA__ARCH_REQ_XCOMP_PERM 0x1023
#define EA__XFEATURE_XTILEDATA 18

int ea__amx_enable(void) {
    static int state; /* 0 unknown, 1 yes, -1 no; CPU feature detection */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s) return s > 0;
    __builtin_cpu_init();
    int ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    if (ok) {
        unsigned a, b, c, d;
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
        ok = (d >> 22 & 1) && (d >> 24 & 1); /* AMX-BF16, AMX-TILE */
    }
    if (ok) ok = syscall(SYS_arch_prctl, EA__ARCH_REQ_XCOMP_PERM, EA__XFEATURE_XTILEDATA) == 0;
    __atomic_store_n(&state, ok ? 1 : -1, __ATOMIC_RELEASE);
    return ok;
}

int ea__amx_int8(void) {
    if (!ea__amx_enable()) return 0;
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    return (d >> 25) & 1; /* AMX-INT8 */
}

size_t ea__amx_pack_bytes(int m, int k) {
    size_t ntb = (size_t)(m + EA__AMX_TB - 1) / EA__AMX_TB;
    return ntb * (size_t)(k / EA__AMX_KS) * 1024 + 64;
}

/* c (32 x 32 f32) and 32 W rows of k bf16 for a chunk's last rows. */
size_t ea__amx_scratch_bytes(int k) { return 32 * 32 * 4 + 32 * (size_t)k * 2 + 128; }

/* y[i * ldy + j] = c[j * ldc + i] for i < ni, j < nj: a 16 x 16 transpose in
 * registers (unpack ps, unpack pd, two 128-bit lane shuffles). Moves bits only. */
EA__T5 void ea__put_transposed(const float *c, int ldc, float *y, int ldy, int ni, int nj) {
    __mmask16 msk = (__mmask16)(nj == 16 ? 0xffffu : (1u << nj) - 1);
    if (ni <= 4) { /* few tokens (decode): gather each output row instead of transposing all 16 */
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(ldc));
        for (int i = 0; i < ni; i++)
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, msk,
                                  _mm512_mask_i32gather_ps(_mm512_setzero_ps(), msk, idx, c + i, 4));
        return;
    }
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(c + (size_t)j * ldc);
#pragma GCC unroll 16
    for (int j = 0; j < 16; j += 2) {
        t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; j += 4) {
        r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
        r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
        r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
        r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
    }
    /* r[4g + e] row e (0..3) of group g: in 128-bit lane L, columns 4L..4L+3 of rows 4g..4g+3 */
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++)
#pragma GCC unroll 4
        for (int e = 0; e < 4; e++) {
            t[8 * g + e] = _mm512_shuffle_f32x4(r[8 * g + e], r[8 * g + 4 + e], 0x88);
            t[8 * g + 4 + e] = _mm512_shuffle_f32x4(r[8 * g + e], r[8 * g + 4 + e], 0xdd);
        }
#pragma GCC unroll 8
    for (int e = 0; e < 8; e++) {
        r[e] = _mm512_shuffle_f32x4(t[e], t[8 + e], 0x88);
        r[8 + e] = _mm512_shuffle_f32x4(t[e], t[8 + e], 0xdd);
    }
    if (ni == 16 && nj == 16) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) _mm512_storeu_ps(y + (size_t)i * ldy, r[i]);
        return;
    }
    for (int i = 0; i < ni; i++) _mm512_mask_storeu_ps(y + (size_t)i * ldy, msk, r[i]);
}

/* 32 floats -> 16 dwords of bf16 pairs (x[2p] low half, x[2p+1] high half),
 * rounded to nearest even exactly as ea_f32_to_bf16 (NaN made quiet). */
EA__T5 static __m512i ea__bf16_pairs(const float *x) {
    __m256i r[2];
    for (int h = 0; h < 2; h++) {
        __m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + 16 * h));
        __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
        __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i rn = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
        rn = _mm512_mask_or_epi32(rn, nan, u, _mm512_set1_epi32(0x00400000));
        /* qword = lane 2p (low) | lane 2p+1 (high): keep bits 16-31 and 48-63 */
        __m512i lo = _mm512_and_si512(_mm512_srli_epi64(rn, 16), _mm512_set1_epi64(0xffff));
        __m512i hi = _mm512_and_si512(_mm512_srli_epi64(rn, 32), _mm512_set1_epi64(0xffff0000));
        r[h] = _mm512_cvtepi64_epi32(_mm512_or_si512(lo, hi));
    }
    return _mm512_inserti64x4(_mm512_castsi256_si512(r[0]), r[1], 1);
}

EA__T5 void ea__amx_pack(const float *x, int m, int k, int tb0, int tb1, uint16_t *xp) {
    int nks = k / EA__AMX_KS;
    float tmp[16 * 16]; /* 16 tokens x 16 dwords, moved as floats (bits only) */
    for (int tb = tb0; tb < tb1; tb++) {
        int nt = m - tb * EA__AMX_TB < EA__AMX_TB ? m - tb * EA__AMX_TB : EA__AMX_TB;
        for (int s = 0; s < nks; s++) {
            for (int t = 0; t < 16; t++) {
                __m512i v = t < nt ? ea__bf16_pairs(x + (size_t)(tb * EA__AMX_TB + t) * k + (size_t)s * EA__AMX_KS)
                                   : _mm512_setzero_si512();
                _mm512_storeu_si512(tmp + 16 * t, v);
            }
            /* tile[p][t] = tmp[t][p] */
            ea__put_transposed(tmp, 16, (float *)(xp + ((size_t)tb * nks + s) * 512), 16, 16, 16);
        }
    }
}

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} ea__tilecfg;

/* The tile shapes of the two kernels, as static data: GCC may drop the stores
 * that fill a configuration on the stack before LDTILECFG (it does not treat
 * the intrinsic as reading them). bf16: C 16 x 16 f32, A 16 W rows x 32 bf16,
 * B 16 x (16 tokens x 2 bf16). q8: A 16 W rows x 32 int8, B 8 x (16 tokens x 4 int8). */
static const ea__tilecfg ea__cfg_bf16 = {.palette = 1,
                                         .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                         .rows = {16, 16, 16, 16, 16, 16, 16, 16}};
static const ea__tilecfg ea__cfg_q8 = {.palette = 1,
                                       .colsb = {64, 64, 64, 64, 32, 32, 64, 64},
                                       .rows = {16, 16, 16, 16, 16, 16, 8, 8}};

/* A thread loads a configuration when it first needs it and keeps it (tile
 * state survives context switches): loading and releasing it per call cost
 * more than a small expert product at decode. */
EA__TA void ea__amx_config(int which) {
    static _Thread_local int cur;
    if (cur == which) return;
    _tile_loadconfig(which == EA__AMX_CFG_Q8 ? &ea__cfg_q8 : &ea__cfg_bf16);
    cur = which;
}

/* C (32 W rows x 16|32 tokens) = W block (32 rows from w, stride ldw) · Xᵀ blocks. */
EA__TA static void ea__amx_block(const uint8_t *w, size_t ldw, int nks, const uint16_t *xb0, const uint16_t *xb1,
                                 float *c, const uint8_t *pf, int pf_lines) {
    _tile_zero(0);
    _tile_zero(2);
    if (xb1) {
        _tile_zero(1);
        _tile_zero(3);
        for (int s = 0; s < nks; s++) {
            for (int l = 0; l < pf_lines; l++) _mm_prefetch((const char *)pf + ((size_t)s * pf_lines + l) * 64, _MM_HINT_T1);
            _tile_loadd(4, w + (size_t)s * 64, ldw);
            _tile_loadd(5, w + 16 * ldw + (size_t)s * 64, ldw);
            _tile_loadd(6, xb0 + (size_t)s * 512, 64);
            _tile_loadd(7, xb1 + (size_t)s * 512, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(1, c + 16, 128);
        _tile_stored(3, c + 16 * 32 + 16, 128);
    } else {
        for (int s = 0; s < nks; s++) {
            /* the weights read next into L2 (into L1 they would evict the current ones), spread over the steps */
            for (int l = 0; l < pf_lines; l++) _mm_prefetch((const char *)pf + ((size_t)s * pf_lines + l) * 64, _MM_HINT_T1);
            _tile_loadd(4, w + (size_t)s * 64, ldw);
            _tile_loadd(5, w + 16 * ldw + (size_t)s * 64, ldw);
            _tile_loadd(6, xb0 + (size_t)s * 512, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(2, 5, 6);
        }
    }
    _tile_stored(0, c, 128);
    _tile_stored(2, c + 16 * 32, 128);
}

EA__TA void ea__rows_amx_bf16(const ea__mm *p, int j0, int j1, ea__scratch *sc) {
    int k = p->k, m = p->m, n = p->n;
    int nks = k / EA__AMX_KS, kmain = nks * EA__AMX_KS;
    int ntb = (m + EA__AMX_TB - 1) / EA__AMX_TB;
    size_t ldw = p->row_bytes;
    float *c = (float *)sc->buf;
    uint8_t *wt = sc->buf + 32 * 32 * 4;

    ea__amx_config(EA__AMX_CFG_BF16);

    for (int jb = j0; jb < j1; jb += 32) {
        int nr = j1 - jb < 32 ? j1 - jb : 32;
        const uint8_t *w = p->w + (size_t)jb * ldw;
        if (nr < 32) { /* last rows: zero-padded copy, same kernel */
            memcpy(wt, w, (size_t)nr * ldw);
            memset(wt + (size_t)nr * ldw, 0, (size_t)(32 - nr) * ldw);
            w = wt;
        }
        /* what this thread reads after this block: the next block, or the next product's first rows */
        size_t pf_bytes;
        const uint8_t *pf = ea__pf_after(p, sc, jb, j1, 32, &pf_bytes);
        int pf_lines = ea__pf_lines(pf, pf_bytes, nks);
        if (nks > 0) {
            for (int tb = 0; tb < ntb; tb += 2) {
                const uint16_t *xb0 = p->xp + (size_t)tb * nks * 512;
                const uint16_t *xb1 = tb + 1 < ntb ? xb0 + (size_t)nks * 512 : NULL;
                ea__amx_block(w, ldw, nks, xb0, xb1, c, pf, tb == 0 ? pf_lines : 0);
                int nt = m - tb * 16 < 32 ? m - tb * 16 : 32;
                for (int q = 0; q < 4; q++) { /* the four 16 x 16 quarters of c */
                    int jq = (q >> 1) * 16, iq = (q & 1) * 16;
                    if (iq >= nt || jq >= nr) continue;
                    int ni = nt - iq < 16 ? nt - iq : 16, nj = nr - jq < 16 ? nr - jq : 16;
                    ea__put_transposed(c + jq * 32 + iq, 32, p->y + (size_t)(tb * 16 + iq) * n + jb + jq, n, ni, nj);
                }
            }
        } else {
            for (int i = 0; i < m; i++)
                for (int jr = 0; jr < nr; jr++) p->y[(size_t)i * n + jb + jr] = 0.0f;
        }
        if (kmain < k) { /* k % 32 tail, scalar, increasing k */
            for (int i = 0; i < m; i++) {
                const float *xr = p->x + (size_t)i * k;
                for (int jr = 0; jr < nr; jr++) {
                    const uint16_t *wr = (const uint16_t *)(w + (size_t)jr * ldw);
                    float v = p->y[(size_t)i * n + jb + jr];
                    for (int kk = kmain; kk < k; kk++)
                        v = fmaf(ea_bf16_to_f32(wr[kk]), ea_bf16_to_f32(ea_f32_to_bf16(xr[kk])), v);
                    p->y[(size_t)i * n + jb + jr] = v;
                }
            }
        }
    }
}
