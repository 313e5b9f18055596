/*
 * kv_cache.h — a paged KV cache: fixed-size blocks, a block table per
 * sequence slot, a free list, and a reference count per block (so a prefix
 * cache can share blocks between sequences).
 *
 * Storage (f32), per layer l, block b, offset i inside the block:
 *   K: k + ((l * n_blocks + b) * block_size + i) * k_dim
 *   V: v + ((l * n_blocks + b) * block_size + i) * v_dim    (v_dim may be 0: MLA)
 * Position p of sequence s lives in block tables[s][p / block_size] at
 * offset p % block_size. The owner of the cache (the step loop) is the only
 * thread that changes tables; the forward pass only reads them.
 */
#ifndef EA_KV_CACHE_H
#define EA_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct {
    int n_layers, n_blocks, block_size, k_dim, v_dim;
    int max_seqs, max_blocks_per_seq;
    float *k, *v;          /* owns */
    int32_t *refcnt;       /* owns: (n_blocks) */
    int32_t *free_list;    /* owns: stack of free block ids */
    int n_free;
    int32_t *tables;       /* owns: (max_seqs, max_blocks_per_seq) */
    int32_t *seq_blocks;   /* owns: (max_seqs) blocks in each table */
} ea_kv_cache;

ea_status ea_kv_init(ea_kv_cache *kv, int n_layers, int k_dim, int v_dim, int n_blocks,
                     int block_size, int max_seqs, int max_ctx);
void ea_kv_deinit(ea_kv_cache *kv);
/* Bytes a cache of these dimensions takes (for sizing from --kv-cache-mib). */
size_t ea_kv_bytes_per_block(int n_layers, int k_dim, int v_dim, int block_size);

/* Make sequence s cover positions [0, n_pos): takes blocks from the free list.
 * EA_ERR_BUSY (cache full) leaves the table as it was. */
ea_status ea_kv_seq_reserve(ea_kv_cache *kv, int s, int n_pos);
/* Drop sequence s: unreference its blocks (freed when no one else holds them). */
void ea_kv_seq_release(ea_kv_cache *kv, int s);
/* Keep only the first n_keep blocks of s's table, unreferencing the rest. */
void ea_kv_seq_truncate(ea_kv_cache *kv, int s, int n_keep);
/* Append an existing block (shared prefix) to s's table and reference it. */
ea_status ea_kv_seq_share(ea_kv_cache *kv, int s, int32_t block);

static inline float *ea_kv_k(const ea_kv_cache *kv, int layer, int s, int pos) {
    int32_t b = kv->tables[(size_t)s * kv->max_blocks_per_seq + pos / kv->block_size];
    return kv->k + (((size_t)layer * kv->n_blocks + b) * kv->block_size + pos % kv->block_size) * kv->k_dim;
}
static inline float *ea_kv_v(const ea_kv_cache *kv, int layer, int s, int pos) {
    int32_t b = kv->tables[(size_t)s * kv->max_blocks_per_seq + pos / kv->block_size];
    return kv->v + (((size_t)layer * kv->n_blocks + b) * kv->block_size + pos % kv->block_size) * kv->v_dim;
}

#endif
