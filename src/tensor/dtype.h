/*
 * dtype.h — the element types of weights, as one traits table.
 *
 * A dtype is a row in ea_dtype_traits: block size in elements, bytes per
 * block, and a row conversion to f32. Kernels read the same table (ggml's
 * pattern): there is no copy of a driver per dtype.
 *
 *   dtype   block  bytes/block  layout of one block
 *   F32       1       4         IEEE binary32, little-endian
 *   F16       1       2         IEEE binary16
 *   BF16      1       2         upper 16 bits of binary32
 *   Q8_0     32      34         f16 scale d, then 32 x int8 q; x[i] = d * q[i]
 *
 * A row of a quantised tensor must hold a whole number of blocks; readers
 * check this (K % 32 == 0 for Q8_0) before building a view.
 */
#ifndef EA_DTYPE_H
#define EA_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { EA_F32 = 0, EA_F16 = 1, EA_BF16 = 2, EA_Q8_0 = 3, EA_N_DTYPES } ea_dtype;

#define EA_QK8_0 32
typedef struct {
    uint16_t d; /* f16 scale */
    int8_t qs[EA_QK8_0];
} ea_block_q8_0;

/* Packed q8_0 copies: a second copy of a Q8_0 matrix, interleaved by R rows,
 * in the layout one q8 kernel reads without reshuffling (ea_k_pack in
 * kernels/matmul.h writes it). Rows go in groups of R, the last one padded
 * with zero bytes. With nb = k/32 blocks per row, block b of the R rows is
 *   2R bytes   their R f16 scales, rows 0..R-1;
 *   32R bytes  their qs as 8 runs of 4R bytes: run r holds dword r (qs
 *              bytes 4r..4r+3) of rows 0..R-1 in turn.
 * Q8_0x8 (R = 8, the AVX2 kernel) keeps the qs bytes as they are and puts
 * each block's scales before its runs (272 bytes a block), so a group is one
 * sequential stream: with the scales in a second stream at the group's end,
 * batch-1 decode on an AMD EPYC read 10 instead of 13 GB/s per core
 * (docs/kernels.md). Q8_0x16 (R = 16, the AVX-512 VNNI kernel) stores each
 * qs byte as w + 128 (w XOR 0x80), the unsigned operand of vpdpbusd, and
 * goes by pairs of blocks, so that its 64-byte loads stay on cache lines:
 * the scales of blocks b and b + 1 (64 bytes; zeros after the last block
 * when nb is odd), then b's runs (512 bytes), then b + 1's (512). A group
 * is padded with zeros to a multiple of 64 bytes; either takes R * 34 * nb
 * bytes before the padding. */
#define EA_Q8X8_ROWS 8
#define EA_Q8X16_ROWS 16
#define EA_Q8X8_BLOCK (8 * 34)       /* bytes of one block of a Q8_0x8 group */
#define EA_Q8X16_PAIR (2 * 16 * 34) /* bytes of a pair of blocks of a Q8_0x16 group */
static inline size_t ea_q8p_group_bytes(size_t k, int rows) {
    return (k / EA_QK8_0 * 34 * (size_t)rows + 63) & ~(size_t)63;
}

/* Packed f32 / f16 / bf16 copies ("Fx4", the AVX2 F kernel; ea_k_pack in
 * kernels/matmul.h writes it): rows in groups of 4, the last one padded with
 * zero rows, and k padded with zeros to a multiple of 16. A group is
 * ceil(k/16) steps; step s holds elements 16s..16s+15 of rows 0..3 in turn,
 * in the dtype's own encoding (64 elements, a whole number of cache lines).
 * The four rows of a decode tile are then one sequential stream of memory
 * instead of four, which the hardware prefetcher follows to the end of the
 * matrix. */
#define EA_FX4_ROWS 4
#define EA_FX4_STEP 16
static inline size_t ea_fx4_group_bytes(size_t k, size_t elem_bytes) {
    return (k + EA_FX4_STEP - 1) / EA_FX4_STEP * EA_FX4_ROWS * EA_FX4_STEP * elem_bytes;
}

typedef struct {
    const char *name; /* "f32", "f16", "bf16", "q8_0" */
    int block;        /* elements per block */
    int block_bytes;  /* bytes per block */
    /* dst[0..n) = src row of n elements (n % block == 0) */
    void (*to_f32)(const void *src, float *dst, size_t n);
    /* src[0..n) f32 -> dst row (round to nearest even); n % block == 0 */
    void (*from_f32)(const float *src, void *dst, size_t n);
} ea_dtype_traits;

extern const ea_dtype_traits ea_dtypes[EA_N_DTYPES];

/* Bytes of a row of n elements; 0 if n is not a whole number of blocks. */
size_t ea_dtype_row_bytes(ea_dtype t, size_t n);
/* "bf16" -> EA_BF16 (also accepts "BF16", "F32", "Q8_0"); -1 if unknown. */
int ea_dtype_parse(const char *name);

/* Bytes of one group of a packed copy of `rows` (Q8_0x8, Q8_0x16 or Fx4) of rows of k. */
static inline size_t ea_packed_group_bytes(ea_dtype dt, size_t k, int rows) {
    return dt == EA_Q8_0 ? ea_q8p_group_bytes(k, rows) : ea_fx4_group_bytes(k, (size_t)ea_dtypes[dt].block_bytes);
}

static inline float ea_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t ea_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                           /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float ea_f16_to_f32(uint16_t h);
uint16_t ea_f32_to_f16(float f);

#endif
