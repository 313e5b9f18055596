/*
 * prefix_cache.h — the scheduler's prefix cache: full KV blocks kept after
 * their request ends, keyed by the hash chain of their tokens, shared by a
 * later request with the same prefix; with an optional disk tier (kv_disk.h)
 * that keeps evicted blocks and reads them back on a hit.
 *
 *   ea_prefix_cache *pc;
 *   ea_prefix_cache_create(&kv, model, &opts, &pc);      // opts.disk_dir NULL: memory only
 *   r->n_computed = ea_prefix_cache_attach(pc, seq, tokens, n_tokens, n_tokens);  // at admission
 *   ea_prefix_cache_add_seq(pc, seq, tokens, n_computed);              // at finish / preemption
 *   while (out of blocks && ea_prefix_cache_evict_one(pc)) ...         // make room
 *   ea_prefix_cache_destroy(pc);                           // every cached block to disk first
 *
 * Keys: block i of a sequence is keyed by
 *   h_i = hash(h_{i-1}, tokens of block i)        (h_{-1} = 0)
 * and maps to a KV block the cache holds one reference on (kv->refcnt). Only
 * full blocks are inserted. attach shares the longest run of cached blocks of
 * the tokens, leaving at least one token to compute (its logits are needed).
 * Blocks whose only holder is the cache are evicted least-recently-used first.
 * Disk tier: an evicted block is written to disk under its key first (and
 * every cached block at destroy); at attach, when the chain misses in memory,
 * the next key is looked up on disk and, if valid, read into a free block
 * that joins the memory cache and is shared. Multi-rank: every rank evicts
 * and reads the same keys since all run the same schedule, but a rank's disk
 * can lack a block another rank has (a damaged file), so the scheduler agrees
 * on the minimum hit over ranks and attaches again with that cap
 * (docs/serving.md "Prefix cache disk tier").
 *
 * Hybrid models (opts.lin: DeltaNet layers with a recurrent state per
 * sequence): a cached prefix is usable only with the state at its end, so
 * the scheduler calls ea_prefix_cache_snapshot when a prompt call ends at a
 * multiple of snap_every (lcm(block size, 64)); the snapshot lives in KV
 * blocks taken from the free list (it counts against the cache's budget) and
 * is evicted with its block, or alone, least recently used first; the disk
 * tier keeps it too. attach then ends a hit at the last such boundary whose
 * snapshot it finds, restores it into seq's state slot and sets its position
 * (docs/decisions.md "Prefix caching for hybrid models").
 *
 * Not thread-safe: the scheduler's step loop is its only user. on_disk is
 * called on that thread after every disk operation, with the tier's counters.
 */
#ifndef EA_PREFIX_CACHE_H
#define EA_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/kv_cache.h"
#include "model/lin_state.h"
#include "serve/kv_disk.h"

struct ea_model;
typedef struct ea_prefix_cache ea_prefix_cache;

typedef struct {
    /* Disk tier: evicted full blocks go to <disk_dir>/<fingerprint>/<par_mode>-<par_world>/rank_<par_rank>/.
     * NULL or "": off. */
    const char *disk_dir;
    size_t disk_max_mib;       /* 0: unbounded */
    const char *par_mode;      /* NULL: "single" */
    int par_world, par_rank;   /* world <= 0: 1 */
    void (*on_disk)(void *ctx, const ea_kv_disk_stats *st); /* NULL: none */
    void *on_disk_ctx;
    ea_lin_state *lin;         /* hybrid models: the recurrent state to snapshot and restore (borrowed); NULL: none */
} ea_prefix_cache_opts;

/* kv is borrowed and must outlive the cache; m is only read (the disk tier's fingerprint).
 * EA_ERR_NOMEM names "scheduler buffers" (the caller's words for its memory). */
ea_status ea_prefix_cache_create(ea_kv_cache *kv, struct ea_model *m, const ea_prefix_cache_opts *o,
                                 ea_prefix_cache **out);
/* Writes every cached block to the disk tier (when on), then frees. NULL is fine. */
void ea_prefix_cache_destroy(ea_prefix_cache *pc);
/* Share the longest cached prefix of tokens[0..n_tokens), at most max_covered
 * tokens of it, with sequence seq (whose table is empty); returns the number of
 * tokens now covered (a multiple of the block size, < n_tokens; 0 when pc is NULL). */
int ea_prefix_cache_attach(ea_prefix_cache *pc, int seq, const int32_t *tokens, int n_tokens, int max_covered);
/* Insert sequence seq's full blocks of tokens[0..n_computed) (keys already present
 * are skipped, so repeating it is cheap). NULL pc: nothing. */
void ea_prefix_cache_add_seq(ea_prefix_cache *pc, int seq, const int32_t *tokens, int n_computed);
/* Free one block held only by the cache (LRU; written to disk first when the
 * tier is on). 1 if one was freed; 0 when none can be (or pc is NULL). */
int ea_prefix_cache_evict_one(ea_prefix_cache *pc);
/* Hybrid models: sequence seq's state has reached n_pos (a multiple of
 * ea_prefix_cache_snap_every) at the end of a prompt call: insert its blocks
 * of tokens[0..n_pos) and keep a snapshot of the state under the last one's key
 * (skipped when one is kept already or no blocks can be freed for it). */
void ea_prefix_cache_snapshot(ea_prefix_cache *pc, int seq, const int32_t *tokens, int n_pos);
/* Tokens between snapshot boundaries; 0 when pc is NULL or keeps no snapshots. */
int ea_prefix_cache_snap_every(const ea_prefix_cache *pc);
/* Snapshots held in memory and the KV-block bytes they take. */
void ea_prefix_cache_get_stats(const ea_prefix_cache *pc, int *n_snapshots, size_t *snapshot_bytes);

#endif
