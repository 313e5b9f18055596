/*
 * kv_disk.h — the prefix cache's disk tier: full KV blocks evicted from memory
 * are written as one file each, keyed by the block's hash-chain key, and read
 * back on a prefix hit after the memory copy is gone (or after a restart).
 *
 * Layout: <dir>/<model fingerprint>/<mode>-<world>[-<kv dtype>]/rank_<r>/<key as 16 hex>.kvb
 * The fingerprint (ea_model_fingerprint) covers the parsed config, HF's
 * config.json, the tensor table and every byte of every weight, so other
 * weights (one flipped byte), another parallel mode, world size, rank or
 * KV cache dtype (the suffix -f16 / -bf16; none for f32) look in a
 * different directory by construction.
 *
 * File: a 64-byte header (magic "EAKVBLK1", version, key, block size, layer
 * count, k_dim, v_dim, element dtype (0 f32, 1 f16, 2 bf16), payload bytes,
 * FNV-1a checksum of the payload) then the payload: for each layer, the
 * block's K rows then its V rows, as the cache holds them.
 * Hybrid models (DeltaNet layers) also keep recurrent-state snapshots, one
 * <key as 16 hex>.lss file each (magic "EALSTAT1", the same header with block
 * size, layer count and dims 0, payload the state's floats as
 * model/lin_state.h lays out one slot): the state after the tokens of the
 * chain that ends with block `key`. Writes go
 * to a temp file then rename(2), so a reader never sees half a file.
 * At open, the namespace directory is scanned once; every file that is not a
 * whole, valid block of this shape is skipped with one warning and never
 * loaded (a bad <key>.kvb is also deleted; files with other names are left
 * alone). Reads check the header and checksum again.
 *
 * Not thread-safe: the scheduler's step loop is the only user.
 */
#ifndef EA_KV_DISK_H
#define EA_KV_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/kv_cache.h"

struct ea_model;
typedef struct ea_kv_disk ea_kv_disk;

typedef struct {
    const char *dir;       /* root directory (created if missing) */
    const char *mode;      /* "single", "expert", "tensor"; NULL: "single" */
    int world, rank;       /* world <= 0: 1 */
    size_t max_bytes;      /* bound on the namespace's files; 0: unbounded. Oldest deleted first. */
    size_t state_bytes;    /* bytes of one recurrent-state snapshot (hybrid models); 0: none kept */
} ea_kv_disk_opts;

typedef struct {
    uint64_t files;        /* valid files in the index */
    uint64_t bytes;        /* their total size */
    uint64_t writes, reads, skipped, deleted;
} ea_kv_disk_stats;

/* m: its weights are hashed here if a load did not already (ea_model_fingerprint). */
ea_status ea_kv_disk_open(const ea_kv_disk_opts *o, struct ea_model *m, const ea_kv_cache *kv, ea_kv_disk **out);
void ea_kv_disk_close(ea_kv_disk *d);
/* 1 if the index holds key. */
int ea_kv_disk_has(const ea_kv_disk *d, uint64_t key);
/* Write block `block` of kv under key (no-op if present). */
ea_status ea_kv_disk_put(ea_kv_disk *d, uint64_t key, const ea_kv_cache *kv, int32_t block);
/* Read key into block `block` of kv. A file that fails validation is dropped from
 * the index (and deleted) with a warning; EA_ERR_NOT_FOUND if key is not indexed. */
ea_status ea_kv_disk_get(ea_kv_disk *d, uint64_t key, ea_kv_cache *kv, int32_t block);
/* Recurrent-state snapshots (state_bytes of floats at state), keyed like blocks. */
int ea_kv_disk_has_state(const ea_kv_disk *d, uint64_t key);
ea_status ea_kv_disk_put_state(ea_kv_disk *d, uint64_t key, const float *state);
ea_status ea_kv_disk_get_state(ea_kv_disk *d, uint64_t key, float *state);
void ea_kv_disk_get_stats(const ea_kv_disk *d, ea_kv_disk_stats *st);
/* The namespace directory (…/rank_<r>). */
const char *ea_kv_disk_dir(const ea_kv_disk *d);

#endif
