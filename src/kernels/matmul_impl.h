/*
 * matmul_impl.h — the interface between the matmul driver (matmul.c) and its
 * ISA variants (matmul_scalar.c, matmul_avx2.c, matmul_avx512.c, matmul_amx.c).
 * Internal to src/kernels/ (ea__ prefix).
 *
 * The driver prepares the activations once per call (q8 blocks for Q8_0
 * weights, bf16 VNNI tiles for AMX), splits the n output columns into
 * contiguous chunks, one per pool thread, and calls the variant's `rows`
 * function on each chunk. A `rows` function computes Y[i][j] for every i < m
 * and j in [j0, j1); whatever tile shape it uses, every (i, j) goes through
 * the same sequence of floating-point operations (docs/kernels.md):
 *
 *   f32/f16/bf16 (scalar, avx2, avx512): 16 lanes; lane l accumulates, with
 *     one fused multiply-add per element, the products w[k]*x[k] for
 *     k = l, l+16, l+32, ... in increasing k (W converted exactly to f32, X
 *     unrounded); then the tree s8[l]=a[l]+a[l+8], s4[l]=s8[l]+s8[l+4],
 *     s2[l]=s4[l]+s4[l+2], y=s2[0]+s2[1]. Same bits in all three ISAs.
 *   q8_0 (all ISAs): X quantised per 32-block (ea__quantize_q8); the block
 *     dot product is an exact int32 isum_b; lane b%16 accumulates
 *     fma((float)isum_b, dw_b*dx_b, acc) in increasing b; same tree. Same
 *     bits in every ISA (the integer part is exact, the float part identical).
 *   bf16 on AMX: X rounded to bf16 (RNE); per (j,i) the tile accumulator runs
 *     over k-steps of 32 in increasing k (TDPBF16PS), then the k%32 tail is
 *     added with scalar fmaf in increasing k.
 *   bf16 on avx512_bf16: X rounded to bf16 (RNE) and zero-padded to a
 *     multiple of 32; lane l accumulates the pairs (k, k+1), k = 2l, 2l+32,
 *     ... in increasing k with VDPBF16PS; then the 16-lane tree. Like AMX,
 *     these bits are the instruction's own (no scalar twin): the tests bound
 *     them against the reference and check batch invariance.
 */
#ifndef EA_MATMUL_IMPL_H
#define EA_MATMUL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

/* One matrix product Y (m, n) = X (m, k) · Wᵀ with its prepared activations. */
typedef struct {
    ea_dtype dtype;
    const uint8_t *w; /* views: n rows of row_bytes */
    size_t row_bytes;
    const uint8_t *wp; /* views: W's packed copy (dtype.h) for the kernel of its layout, or NULL */
    int wp_rows;       /* its rows per group: 8 (Q8_0x8, avx2), 16 (Q8_0x16, avx512) or 4 (Fx4, avx2) */
    int n, k, m;
    const float *x; /* borrows: (m, k) */
    float *y;       /* borrows: (m, n) */
    /* Q8_0: X quantised, m rows of k int8 plus m rows of k/32 f32 scales. */
    const int8_t *xq;
    const float *xd;
    /* AVX2 q8_0 at m = 1 with a Q8_0x8 copy: xq laid out by ea__avx2_q8_xv, or NULL. */
    const uint8_t *xv;
    /* AMX: X in bf16 tiles; see ea__amx_pack. */
    const uint16_t *xp;
} ea__mm;

/* Per-thread scratch handed to a rows function (owned by the context). */
typedef struct {
    uint8_t *buf; /* bytes, 64-aligned */
    size_t size;
    /* the weights this thread reads after the current rows call (the next
     * product's first rows), for prefetching; NULL when there are none */
    const uint8_t *pf_next;
    size_t pf_bytes;
    /* What buf holds between two calls of the same rows function in one
     * task: the X (xq, m, k) whose per-block values a rows function left
     * there (the Q8_0x16 loop's block sums), or NULL. The driver clears it
     * when the function changes or a thread's activations are prepared anew
     * (so the same xq may hold another X). */
    const int8_t *held_xq;
    int held_m, held_k;
} ea__scratch;

typedef void (*ea__rows_fn)(const ea__mm *p, int j0, int j1, ea__scratch *s);

/* Where W row j's bytes start: in the packed copy when there is one, its
 * group's start (j a multiple of its rows). */
static inline const uint8_t *ea__w_row(const ea__mm *p, int j) {
    return p->wp ? p->wp + (size_t)(j / p->wp_rows) * ea_packed_group_bytes(p->dtype, (size_t)p->k, p->wp_rows)
                 : p->w + (size_t)j * p->row_bytes;
}

/* What a rows function reads after its block of `rows` W rows at jb (of its
 * chunk [.., j1)): the chunk's next block, or after the last one the next
 * product's first rows (s->pf_next, possibly NULL); *bytes: their size. */
static inline const uint8_t *ea__pf_after(const ea__mm *p, const ea__scratch *s, int jb, int j1, int rows,
                                          size_t *bytes) {
    if (jb + rows < j1) {
        *bytes = (size_t)(j1 - jb - rows < rows ? j1 - jb - rows : rows) * p->row_bytes;
        return ea__w_row(p, jb + rows);
    }
    *bytes = s->pf_bytes;
    return s->pf_next;
}

/* Cache lines to prefetch per step so that `bytes` are covered in `steps` steps. */
static inline int ea__pf_lines(const void *pf, size_t bytes, int steps) {
    return pf && steps > 0 ? (int)((bytes / 64 + (size_t)steps - 1) / (size_t)steps) : 0;
}

/* Variants. NULL entries mean "not compiled for this ISA". */
void ea__rows_scalar_f(const ea__mm *p, int j0, int j1, ea__scratch *s); /* f32, f16, bf16 */
void ea__rows_scalar_q8(const ea__mm *p, int j0, int j1, ea__scratch *s);
void ea__rows_avx2_f(const ea__mm *p, int j0, int j1, ea__scratch *s);
void ea__rows_avx2_q8(const ea__mm *p, int j0, int j1, ea__scratch *s);
/* Tokens per pass of the avx2 q8 kernel, and the scratch it needs for k. */
#define EA__Q8_TOK 16
size_t ea__avx2_q8_scratch_bytes(int k);
/* One token's q8 x laid out for the packed decode loop (matmul_avx2.c), and its bytes for k. */
size_t ea__avx2_q8_xv_bytes(int k);
void ea__avx2_q8_xv(const int8_t *xq, int k, uint8_t *xv);
/* avx2 f32/f16/bf16 with m >= EA__WIDE_MIN_M (prefill): X laid out once per product,
 * lane-major in groups of EA__BC_TOK tokens, for the broadcast-form tiles
 * (matmul_avx2.c); its bytes for (m, k) and the layout of tokens [i0, i1). */
#ifndef EA__WIDE_MIN_M
#define EA__WIDE_MIN_M 64
#endif
#define EA__BC_TOK 6
size_t ea__avx2_bc_x_bytes(int m, int k);
void ea__avx2_bc_x(const float *x, int m, int k, int i0, int i1, float *xp);
/* Scratch of ea__rows_avx2_f: bf16 W blocks widened to f32 for prefill (0 if max_k is too long for it). */
#define EA__WIDE_BYTES ((size_t)384 << 10)
size_t ea__avx2_f_scratch_bytes(int max_k);
void ea__rows_avx512_f(const ea__mm *p, int j0, int j1, ea__scratch *s);
void ea__rows_avx512_q8(const ea__mm *p, int j0, int j1, ea__scratch *s); /* needs VNNI; reads wp when set */
/* Scratch the avx512 q8 kernel needs for up to m rows of k. */
size_t ea__avx512_q8_scratch_bytes(int m, int k);
void ea__rows_amx_bf16(const ea__mm *p, int j0, int j1, ea__scratch *s);
void ea__rows_avx512_bf16(const ea__mm *p, int j0, int j1, ea__scratch *s); /* xp from ea__bf16_rows */
/* k rounded up to 32: the row length of ea__bf16_rows's X. */
static inline int ea__k32(int k) { return (k + 31) & ~31; }
/* X rows [i0, i1) rounded to bf16 (RNE) into rows of ea__k32(k), zero-padded (AVX512_BF16). */
void ea__bf16_rows(const float *x, int k, int i0, int i1, uint16_t *xb);
void ea__rows_amx_q8(const ea__mm *p, int j0, int j1, ea__scratch *s); /* xp from ea__amx_q8_pack */

/* Q8_0 activations: xq (m, k) int8, xd (m, k/32) scales; rows [i0, i1). */
void ea__quantize_q8(const float *x, int k, int i0, int i1, int8_t *xq, float *xd);
void ea__quantize_q8_avx512(const float *x, int k, int i0, int i1, int8_t *xq, float *xd); /* same bits */
void ea__quantize_q8_avx2(const float *x, int k, int i0, int i1, int8_t *xq, float *xd);   /* same bits */

/* y[i * ldy + j] = c[j * ldc + i] for i < ni <= 16, j < nj <= 16 (AVX-512; moves bits only). */
void ea__put_transposed(const float *c, int ldc, float *y, int ldy, int ni, int nj);

/* AMX: rows of X per token block and k per k-step. */
#define EA__AMX_TB 16
#define EA__AMX_KS 32
/* Bytes of the packed X of (m, k); tiles of 16 tokens x 32 k, 1 KiB each. */
size_t ea__amx_pack_bytes(int m, int k);
/* Pack token blocks [tb0, tb1) of X (m, k) into xp (see matmul_amx.c). */
void ea__amx_pack(const float *x, int m, int k, int tb0, int tb1, uint16_t *xp);
/* Per-thread scratch the AMX rows function needs for k. */
size_t ea__amx_scratch_bytes(int k);
/* Ask Linux for the AMX tile state; 1 if usable (tile + bf16). */
int ea__amx_enable(void);
/* Load tile configuration `which` on this thread unless it is loaded already. */
#define EA__AMX_CFG_BF16 1
#define EA__AMX_CFG_Q8 2
void ea__amx_config(int which);
/* 1 if AMX-INT8 is usable too. */
int ea__amx_int8(void);
/* q8_0 on AMX: packed X tiles of token block tb from quantised xq/xd (see matmul_amx_q8.c). */
size_t ea__amx_q8_pack_bytes(int m, int k);
size_t ea__amx_q8_scratch_bytes(int k);
void ea__amx_q8_pack(const int8_t *xq, const float *xd, int m, int k, int tb, uint8_t *xp);

/* The canonical 16-lane tree reduction (scalar form; SIMD variants match it). */
static inline float ea__reduce16(const float a[16]) {
    float s8[8], s4[4];
    for (int l = 0; l < 8; l++) s8[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) s4[l] = s8[l] + s8[l + 4];
    float s20 = s4[0] + s4[2], s21 = s4[1] + s4[3];
    return s20 + s21;
}

#endif
