/*
 * kv_cache.c — see kv_cache.h. Invariants: a block is on the free list iff
 * its refcnt is 0; a sequence's table holds seq_blocks[s] valid block ids.
 */
#include "model/kv_cache.h"

#include <string.h>

#include "base/alloc.h"

size_t ea_kv_bytes_per_block(ea_dtype dtype, int n_layers, int k_dim, int v_dim, int block_size) {
    return (size_t)n_layers * (size_t)block_size * (size_t)(k_dim + v_dim) * (size_t)ea_dtypes[dtype].block_bytes;
}

int ea_kv_dtype_parse(const char *name) {
    int d = name ? ea_dtype_parse(name) : -1;
    return d == EA_F32 || d == EA_F16 || d == EA_BF16 ? d : -1;
}

ea_status ea_kv_init(ea_kv_cache *kv, ea_dtype dtype, int n_layers, int k_dim, int v_dim, int n_heads, int n_blocks,
                     int block_size, int max_seqs, int max_ctx) {
    memset(kv, 0, sizeof *kv);
    if (n_blocks <= 0 || block_size <= 0 || max_seqs <= 0 || max_ctx <= 0)
        return ea_err(EA_ERR_INVALID_ARG, "kv cache: blocks %d, block size %d, seqs %d, ctx %d", n_blocks,
                      block_size, max_seqs, max_ctx);
    if (n_heads <= 0 || k_dim <= 0 || v_dim < 0 || k_dim % n_heads || v_dim % n_heads)
        return ea_err(EA_ERR_INVALID_ARG, "kv cache: %d heads do not divide key / value widths %d / %d", n_heads,
                      k_dim, v_dim);
    if (dtype != EA_F32 && dtype != EA_F16 && dtype != EA_BF16)
        return ea_err(EA_ERR_INVALID_ARG, "kv cache: element dtype %d (f32, f16 or bf16)", (int)dtype);
    kv->dtype = dtype;
    kv->esz = (size_t)ea_dtypes[dtype].block_bytes;
    kv->n_layers = n_layers;
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->k_dim = k_dim;
    kv->v_dim = v_dim;
    kv->n_heads = n_heads;
    kv->max_seqs = max_seqs;
    kv->max_blocks_per_seq = (max_ctx + block_size - 1) / block_size;
    size_t per = (size_t)n_layers * n_blocks * block_size;
    kv->k = ea_aligned_alloc(64, per * (size_t)k_dim * kv->esz);
    kv->v = v_dim ? ea_aligned_alloc(64, per * (size_t)v_dim * kv->esz) : NULL;
    kv->refcnt = ea_calloc((size_t)n_blocks, sizeof(int32_t));
    kv->free_list = ea_calloc((size_t)n_blocks, sizeof(int32_t));
    kv->tables = ea_calloc((size_t)max_seqs * kv->max_blocks_per_seq, sizeof(int32_t));
    kv->seq_blocks = ea_calloc((size_t)max_seqs, sizeof(int32_t));
    if (!kv->k || (v_dim && !kv->v) || !kv->refcnt || !kv->free_list || !kv->tables || !kv->seq_blocks) {
        ea_kv_deinit(kv);
        return ea_err(EA_ERR_NOMEM, "kv cache of %d blocks x %d tokens", n_blocks, block_size);
    }
    for (int i = 0; i < n_blocks; i++) kv->free_list[i] = n_blocks - 1 - i; /* pop gives block 0 first */
    kv->n_free = n_blocks;
    return EA_OK;
}

/* Element 0 of head h's part of position pos's row in part (k or v, dim elements a row). */
static uint8_t *ea__kv_head(const ea_kv_cache *kv, uint8_t *part, int dim, int layer, int s, int pos, int h) {
    int32_t b = kv->tables[(size_t)s * kv->max_blocks_per_seq + pos / kv->block_size];
    size_t hd = (size_t)(dim / kv->n_heads), block = ((size_t)layer * kv->n_blocks + (size_t)b) * kv->block_size * dim;
    return part + (block + ((size_t)h * kv->block_size + (size_t)(pos % kv->block_size)) * hd) * kv->esz;
}

void ea_kv_put(ea_kv_cache *kv, int layer, int s, int pos, const float *k, const float *v) {
    size_t khd = (size_t)(kv->k_dim / kv->n_heads), vhd = (size_t)(kv->v_dim / kv->n_heads);
    for (int h = 0; h < kv->n_heads; h++) {
        ea_dtypes[kv->dtype].from_f32(k + h * khd, ea__kv_head(kv, kv->k, kv->k_dim, layer, s, pos, h), khd);
        if (kv->v_dim) ea_dtypes[kv->dtype].from_f32(v + h * vhd, ea__kv_head(kv, kv->v, kv->v_dim, layer, s, pos, h), vhd);
    }
}

void ea_kv_get_k(const ea_kv_cache *kv, int layer, int s, int pos, int off, int n, float *out) {
    EA_ASSERT(off >= 0 && n >= 0 && off + n <= kv->k_dim);
    int hd = kv->k_dim / kv->n_heads;
    while (n > 0) { /* the part of each head the range crosses */
        int h = off / hd, e = off % hd, c = hd - e < n ? hd - e : n;
        ea_dtypes[kv->dtype].to_f32(ea__kv_head(kv, kv->k, kv->k_dim, layer, s, pos, h) + (size_t)e * kv->esz, out,
                                    (size_t)c);
        off += c, out += c, n -= c;
    }
}

void ea_kv_deinit(ea_kv_cache *kv) {
    ea_aligned_free(kv->k);
    ea_aligned_free(kv->v);
    ea_free(kv->refcnt);
    ea_free(kv->free_list);
    ea_free(kv->tables);
    ea_free(kv->seq_blocks);
    memset(kv, 0, sizeof *kv);
}

ea_status ea_kv_seq_reserve(ea_kv_cache *kv, int s, int n_pos) {
    EA_ASSERT(s >= 0 && s < kv->max_seqs);
    int need = (n_pos + kv->block_size - 1) / kv->block_size;
    if (need > kv->max_blocks_per_seq)
        return ea_err(EA_ERR_RANGE, "sequence of %d positions exceeds the context of %d", n_pos,
                      kv->max_blocks_per_seq * kv->block_size);
    int have = kv->seq_blocks[s];
    if (need - have > kv->n_free)
        return ea_err(EA_ERR_BUSY, "kv cache full: need %d blocks, %d free", need - have, kv->n_free);
    int32_t *t = kv->tables + (size_t)s * kv->max_blocks_per_seq;
    for (int i = have; i < need; i++) {
        int32_t b = kv->free_list[--kv->n_free];
        kv->refcnt[b] = 1;
        t[i] = b;
    }
    if (need > have) kv->seq_blocks[s] = need;
    return EA_OK;
}

ea_status ea_kv_seq_share(ea_kv_cache *kv, int s, int32_t block) {
    EA_ASSERT(s >= 0 && s < kv->max_seqs && block >= 0 && block < kv->n_blocks && kv->refcnt[block] > 0);
    if (kv->seq_blocks[s] >= kv->max_blocks_per_seq) return ea_err(EA_ERR_RANGE, "sequence table full");
    kv->tables[(size_t)s * kv->max_blocks_per_seq + kv->seq_blocks[s]++] = block;
    kv->refcnt[block]++;
    return EA_OK;
}

void ea_kv_seq_truncate(ea_kv_cache *kv, int s, int n_keep) {
    EA_ASSERT(s >= 0 && s < kv->max_seqs && n_keep >= 0);
    int32_t *t = kv->tables + (size_t)s * kv->max_blocks_per_seq;
    for (int i = n_keep; i < kv->seq_blocks[s]; i++) {
        int32_t b = t[i];
        EA_ASSERT(kv->refcnt[b] > 0);
        if (--kv->refcnt[b] == 0) kv->free_list[kv->n_free++] = b;
    }
    if (n_keep < kv->seq_blocks[s]) kv->seq_blocks[s] = n_keep;
}

void ea_kv_seq_release(ea_kv_cache *kv, int s) { ea_kv_seq_truncate(kv, s, 0); }
