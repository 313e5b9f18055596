/*
 * attn.h — causal attention of a tile of query rows against a paged KV cache.
 *
 * A tile is up to 16 query rows that read the same keys: the query heads of
 * one KV head (a GQA group; all heads for MLA's shared latent) at one or more
 * positions of one sequence. Row r attends to the keys at positions
 * 0..last[r]:
 *
 *   s[j]   = (q_r · k_j) · scale              j = 0..last[r]
 *   e[j]   = exp(s[j] − max_j s)
 *   out_r  = (Σ_j e[j] · v_j) · (1 / Σ_j e[j])
 *
 * Batch invariance: every value of row r goes through the same operations in
 * the same order whatever the other rows of the tile are (and whether the
 * tile has 1 or 16 rows):
 *   q·k     one fused multiply-add per element, d = 0..dk-1 in increasing d,
 *           from +0; then one multiply by scale;
 *   max     over j ≤ last[r];  sum: left to right in j, from +0;
 *   exp     ea_k_expf (ops.h; the same polynomial in every variant);
 *   out[d]  fused multiply-adds e[j]·v_j[d] in increasing j from +0, then one
 *           multiply by 1/sum.
 * The AVX-512 and AVX2 variants keep one row per lane (scores) or one element
 * per lane (values), so they perform exactly these operations; the _ref twin
 * is the plain definition and gives the same bits (tests/unit/test_attn.c).
 */
#ifndef EA_ATTN_H
#define EA_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define EA_K_ATTN_ROWS 16

/* Where the keys and values of one sequence and one KV head are. Position p
 * is in block b = blocks[p / block_size] at offset i = p % block_size; its
 * key is element b * k_block + i * k_stride of k (dk elements), its value
 * element b * v_block + i * v_stride of v (dv elements). A cache that keeps
 * each head's rows of a block together (model/kv_cache.h) has k_stride = dk
 * and k_block = the block's elements of all heads. v may point into the keys
 * (MLA: the value is the latent part). Elements are of dtype: EA_F32, or EA_F16 / EA_BF16
 * (tensor/dtype.h), which every variant widens to f32 exactly before the
 * operations below, so a cache of rounded values gives the bits of an f32
 * cache holding the same values. */
typedef struct {
    int dk, dv;
    float scale;
    int dtype;
    const void *k, *v;
    size_t k_stride, v_stride, k_block, v_block;
    const int32_t *blocks;
    int block_size;
} ea_k_attn_kv;

/* Floats of scratch ea_k_attend needs for keys up to max_keys, keys of dk
 * elements and values of dv (or fewer). */
size_t ea_k_attend_scratch(int dk, int dv, int max_keys);

/* Attention of n_rows (1..16) query rows: q[r] (dk floats) over positions
 * 0..last[r] into out[r] (dv floats). scratch: ea_k_attend_scratch floats,
 * 64-byte aligned. Runs the variant of kernels/ops.h (ea_k_ops_isa: AVX-512,
 * AVX2 + FMA, or the twin), all with the twin's bits. */
void ea_k_attend(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last, float *const *out,
                 float *scratch);
void ea_k_attend_ref(const ea_k_attn_kv *kv, int n_rows, const float *const *q, const int32_t *last,
                     float *const *out, float *scratch);

/* A hint only: start reading into L2 the keys and values that
 * ea_k_attend(kv, n_rows, ..., last, ...) reads first (positions 0..63 at most);
 * a caller prefetches the tile it runs next while it runs this one. */
void ea_k_attend_prefetch(const ea_k_attn_kv *kv, int n_rows, const int32_t *last);

#endif
