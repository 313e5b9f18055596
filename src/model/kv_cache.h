/*
 * kv_cache.h — a paged KV cache: fixed-size blocks, a block table per
 * sequence slot, a free list, and a reference count per block (so a prefix
 * cache can share blocks between sequences).
 *
 * Storage, per layer l, block b, offset i inside the block, head h of the
 * n_heads parts of a row (elements of the cache's dtype: f32, or f16 / bf16
 * rounded to nearest even on store, --kv-cache-dtype), with k_hd = k_dim /
 * n_heads and v_hd = v_dim / n_heads:
 *   K: k + (l * n_blocks + b) * block_size * k_dim + (h * block_size + i) * k_hd
 *   V: v + (l * n_blocks + b) * block_size * v_dim + (h * block_size + i) * v_hd
 * (v_dim may be 0: MLA, one head). A block keeps each head's rows together:
 * attention reads one head's keys, and with the heads side by side in a row
 * they were a quarter of every 1 KiB row (four heads of 64 f32), which
 * filled a quarter of the cache sets and defeated the hardware prefetcher
 * (decode at a 2048-token context read them at 3.5 GB/s on a Zen 3 core,
 * 6 GB/s head by head; docs/kernels.md). A block is still one contiguous
 * range per layer, which the prefix cache and its disk tier copy whole.
 * Position p of sequence s lives in block tables[s][p / block_size] at
 * offset p % block_size. The owner of the cache (the step loop) is the only
 * thread that changes tables; the forward pass only reads them.
 */
#ifndef EA_KV_CACHE_H
#define EA_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

typedef struct {
    int n_layers, n_blocks, block_size, k_dim, v_dim, n_heads;
    int max_seqs, max_blocks_per_seq;
    ea_dtype dtype;        /* of the elements: EA_F32, EA_F16 or EA_BF16 */
    size_t esz;            /* bytes of one element */
    uint8_t *k, *v;        /* owns */
    int32_t *refcnt;       /* owns: (n_blocks) */
    int32_t *free_list;    /* owns: stack of free block ids */
    int n_free;
    int32_t *tables;       /* owns: (max_seqs, max_blocks_per_seq) */
    int32_t *seq_blocks;   /* owns: (max_seqs) blocks in each table */
} ea_kv_cache;

/* n_heads divides k_dim and v_dim. */
ea_status ea_kv_init(ea_kv_cache *kv, ea_dtype dtype, int n_layers, int k_dim, int v_dim, int n_heads, int n_blocks,
                     int block_size, int max_seqs, int max_ctx);
void ea_kv_deinit(ea_kv_cache *kv);
/* Bytes one block of a cache of these dimensions takes (for sizing from --kv-cache-mib). */
size_t ea_kv_bytes_per_block(ea_dtype dtype, int n_layers, int k_dim, int v_dim, int block_size);
/* "f32", "f16", "bf16" (--kv-cache-dtype) -> the dtype; -1 for anything else. */
int ea_kv_dtype_parse(const char *name);

/* Make sequence s cover positions [0, n_pos): takes blocks from the free list.
 * EA_ERR_BUSY (cache full) leaves the table as it was. */
ea_status ea_kv_seq_reserve(ea_kv_cache *kv, int s, int n_pos);
/* Drop sequence s: unreference its blocks (freed when no one else holds them). */
void ea_kv_seq_release(ea_kv_cache *kv, int s);
/* Keep only the first n_keep blocks of s's table, unreferencing the rest. */
void ea_kv_seq_truncate(ea_kv_cache *kv, int s, int n_keep);
/* Append an existing block (shared prefix) to s's table and reference it. */
ea_status ea_kv_seq_share(ea_kv_cache *kv, int s, int32_t block);

/* Position pos of sequence s in layer `layer`: store its key (k_dim floats,
 * the heads side by side) and value (v_dim floats; NULL when v_dim is 0),
 * rounded to the cache's dtype; read back n key elements from element off of
 * that row, widened to f32 (exact). */
void ea_kv_put(ea_kv_cache *kv, int layer, int s, int pos, const float *k, const float *v);
void ea_kv_get_k(const ea_kv_cache *kv, int layer, int s, int pos, int off, int n, float *out);

#endif
