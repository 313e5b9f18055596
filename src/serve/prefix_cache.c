/*
 * prefix_cache.c — see prefix_cache.h for the keys, the sharing rule and the
 * disk tier.
 *
 * The table is open addressing with linear probing over a power-of-two
 * number of entries, at least twice the KV cache's blocks, so it never fills:
 * an entry is empty (block -1), a tombstone (-2, an evicted block) or holds a
 * key, its block and the stamp of its last use (for LRU). The cache's
 * reference on a block is one count of kv->refcnt: a block whose count is 1
 * is held by the cache alone and may be evicted, which puts it back on the KV
 * free list.
 *
 * Recurrent-state snapshots (hybrid models, opts.lin set): entry i may own a
 * snapshot (e[i].snap >= 0): the state of a sequence after the tokens of i's
 * chain, whose length is a multiple of snap_every = lcm(block size, 64). Its
 * floats live in snap_m KV blocks taken off the free list (refcnt 1, in no
 * table), laid out block by block, per layer the block's K rows then V rows,
 * the way kv_disk.c writes a block: so a snapshot costs blocks of the same
 * budget as the KV it sits beside, and shows in the blocks in use. Eviction
 * takes the least recently used of: a block held by the cache alone (its
 * snapshot goes with it), or a snapshot alone (its block may still be in use
 * by a sequence). A hybrid hit must end at a boundary with a snapshot
 * (memory or disk), which attach restores into the sequence's state slot.
 */
#include "serve/prefix_cache.h"

#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "kernels/deltanet.h"

typedef struct {
    uint64_t key;
    int32_t block;   /* -1 = empty slot, -2 = tombstone */
    uint64_t stamp;  /* last use, for LRU */
    int32_t snap;    /* recurrent-state snapshot of this chain, or -1 */
} pc_entry;

struct ea_prefix_cache {
    ea_kv_cache *kv;     /* borrows */
    pc_entry *e;         /* owns: (cap) */
    int cap;             /* power of two */
    uint64_t clock;
    ea_kv_disk *disk;    /* owns: the disk tier, or NULL */
    void (*on_disk)(void *ctx, const ea_kv_disk_stats *st);
    void *on_disk_ctx;
    /* recurrent-state snapshots; lin NULL: none (models without DeltaNet layers) */
    ea_lin_state *lin;   /* borrows */
    int snap_every;      /* tokens: lcm(block size, EA_K_DELTA_CHUNK) */
    int snap_m;          /* KV blocks per snapshot */
    int n_snap_max, n_snap_free;
    int32_t *snap_blocks; /* owns: (n_snap_max, snap_m) block ids */
    int32_t *snap_free;   /* owns: stack of free snapshot indices */
    uint64_t *bkeys;      /* owns: (max_blocks_per_seq) attach's boundary keys */
    int *bcov;            /* owns: (max_blocks_per_seq) and their token counts */
    float *stbuf;         /* owns: one state (seq_floats), for the disk tier */
};

/* Copy state <-> snapshot snap's blocks (to_blocks 1: into the blocks), as
 * bytes: the state stays exact f32 whatever the cache's dtype. */
static void snap_io(ea_prefix_cache *pc, int snap, float *state, int to_blocks) {
    ea_kv_cache *kv = pc->kv;
    size_t left = pc->lin->seq_floats * sizeof(float), kr = (size_t)kv->block_size * kv->k_dim * kv->esz,
           vr = (size_t)kv->block_size * kv->v_dim * kv->esz;
    uint8_t *st = (uint8_t *)state;
    const int32_t *bl = pc->snap_blocks + (size_t)snap * pc->snap_m;
    for (int j = 0; j < pc->snap_m && left; j++)
        for (int l = 0; l < kv->n_layers && left; l++)
            for (int part = 0; part < 2 && left; part++) {
                size_t n = part ? vr : kr;
                uint8_t *blk = (part ? kv->v : kv->k) + ((size_t)l * kv->n_blocks + (size_t)bl[j]) * n;
                if (n > left) n = left;
                if (to_blocks) memcpy(blk, st, n);
                else memcpy(st, blk, n);
                st += n;
                left -= n;
            }
}

static float *slot_state(const ea_prefix_cache *pc, int seq) { return pc->lin->data + (size_t)seq * pc->lin->seq_floats; }

/* Snapshot sn's blocks back to the free list, sn back to the pool. */
static void snap_release(ea_prefix_cache *pc, int sn) {
    for (int j = 0; j < pc->snap_m; j++) {
        int32_t b = pc->snap_blocks[(size_t)sn * pc->snap_m + j];
        pc->kv->refcnt[b] = 0;
        pc->kv->free_list[pc->kv->n_free++] = b;
    }
    pc->snap_free[pc->n_snap_free++] = sn;
}

/* Entry i loses its snapshot (if any). */
static void snap_drop(ea_prefix_cache *pc, int i) {
    if (pc->e[i].snap < 0) return;
    snap_release(pc, pc->e[i].snap);
    pc->e[i].snap = -1;
}

static int find(const ea_prefix_cache *pc, uint64_t key) {
    for (int i = (int)(key & (uint64_t)(pc->cap - 1)), n = 0; n < pc->cap; i = (i + 1) & (pc->cap - 1), n++) {
        if (pc->e[i].block == -1) return -1;
        if (pc->e[i].block >= 0 && pc->e[i].key == key) return i;
    }
    return -1;
}

static void insert(ea_prefix_cache *pc, uint64_t key, int32_t block) {
    if (find(pc, key) >= 0) return;
    for (int i = (int)(key & (uint64_t)(pc->cap - 1)), n = 0; n < pc->cap; i = (i + 1) & (pc->cap - 1), n++)
        if (pc->e[i].block < 0) {
            pc->e[i].key = key;
            pc->e[i].block = block;
            pc->e[i].stamp = ++pc->clock;
            pc->e[i].snap = -1;
            pc->kv->refcnt[block]++; /* the cache's reference */
            return;
        }
}

static void disk_stats(ea_prefix_cache *pc) {
    if (!pc->on_disk) return;
    ea_kv_disk_stats ds;
    ea_kv_disk_get_stats(pc->disk, &ds);
    pc->on_disk(pc->on_disk_ctx, &ds);
}

/* Write entry i's snapshot to the disk tier (a failure costs only the copy). */
static void disk_put_state(ea_prefix_cache *pc, int i) {
    if (!pc->disk || pc->e[i].snap < 0 || ea_kv_disk_has_state(pc->disk, pc->e[i].key)) return;
    snap_io(pc, pc->e[i].snap, pc->stbuf, 0);
    if (ea_kv_disk_put_state(pc->disk, pc->e[i].key, pc->stbuf) != EA_OK)
        EA_LOGW("kv disk: recurrent state not written: %s", ea_errmsg());
    disk_stats(pc);
}

/* Write entry i's block (and snapshot) to the disk tier (a failure costs only the copy). */
static void disk_put(ea_prefix_cache *pc, int i) {
    disk_put_state(pc, i);
    if (!pc->disk || ea_kv_disk_has(pc->disk, pc->e[i].key)) return;
    if (ea_kv_disk_put(pc->disk, pc->e[i].key, pc->kv, pc->e[i].block) != EA_OK)
        EA_LOGW("kv disk: block not written: %s", ea_errmsg());
    disk_stats(pc);
}

int ea_prefix_cache_evict_one(ea_prefix_cache *pc) {
    if (!pc) return 0;
    ea_kv_cache *kv = pc->kv;
    int best = -1;
    for (int i = 0; i < pc->cap; i++)
        if (pc->e[i].block >= 0 && (kv->refcnt[pc->e[i].block] == 1 || pc->e[i].snap >= 0) &&
            (best < 0 || pc->e[i].stamp < pc->e[best].stamp))
            best = i;
    if (best < 0) return 0;
    if (kv->refcnt[pc->e[best].block] != 1) { /* the block is in use: only its snapshot goes */
        disk_put_state(pc, best);
        snap_drop(pc, best);
        return 1;
    }
    disk_put(pc, best);
    snap_drop(pc, best);
    int32_t b = pc->e[best].block;
    kv->refcnt[b] = 0;
    kv->free_list[kv->n_free++] = b;
    pc->e[best].block = -2;
    return 1;
}

static uint64_t block_hash(uint64_t prev, const int32_t *t, int n) {
    return ea_hash64(t, sizeof(int32_t) * (size_t)n, prev ? prev : 0x9e3779b97f4a7c15ull);
}

void ea_prefix_cache_add_seq(ea_prefix_cache *pc, int seq, const int32_t *tokens, int n_computed) {
    if (!pc) return;
    ea_kv_cache *kv = pc->kv;
    int B = kv->block_size;
    uint64_t h = 0;
    const int32_t *table = kv->tables + (size_t)seq * kv->max_blocks_per_seq;
    for (int i = 0; (i + 1) * B <= n_computed; i++) {
        h = block_hash(h, tokens + (size_t)i * B, B);
        insert(pc, h, table[i]);
    }
}

/* Read key from the disk tier into a free block and insert it in the memory cache.
 * The entry's index, or -1 (not on disk, invalid, or no block free). */
static int disk_load(ea_prefix_cache *pc, uint64_t key) {
    if (!pc->disk || !ea_kv_disk_has(pc->disk, key)) return -1;
    ea_kv_cache *kv = pc->kv;
    if (kv->n_free == 0 && !ea_prefix_cache_evict_one(pc)) return -1;
    int32_t b = kv->free_list[--kv->n_free];
    int at = -1;
    if (ea_kv_disk_get(pc->disk, key, kv, b) == EA_OK) {
        insert(pc, key, b);
        at = find(pc, key);
        if (at >= 0 && pc->e[at].block != b) at = -1; /* cannot happen: the key missed in memory */
    } else {
        EA_LOGW("kv disk: %s", ea_errmsg());
    }
    if (at < 0) kv->free_list[kv->n_free++] = b; /* refcnt stays 0 */
    disk_stats(pc);
    return at;
}

/* A free snapshot with its blocks taken off the free list (evicting as needed), or -1. */
static int snap_alloc(ea_prefix_cache *pc) {
    if (pc->n_snap_free == 0) return -1;
    ea_kv_cache *kv = pc->kv;
    while (kv->n_free < pc->snap_m)
        if (!ea_prefix_cache_evict_one(pc)) return -1;
    if (pc->n_snap_free == 0) return -1;
    int sn = pc->snap_free[--pc->n_snap_free];
    for (int j = 0; j < pc->snap_m; j++) {
        int32_t b = kv->free_list[--kv->n_free];
        kv->refcnt[b] = 1;
        pc->snap_blocks[(size_t)sn * pc->snap_m + j] = b;
    }
    return sn;
}

/* The snapshot keyed `key` (tokens [0, n_pos)) into sequence seq's state slot,
 * from memory or else the disk tier (then kept in memory too when blocks allow).
 * 1 if restored. */
static int snap_restore(ea_prefix_cache *pc, int seq, uint64_t key, int n_pos) {
    int at = find(pc, key);
    float *dst = slot_state(pc, seq);
    if (at >= 0 && pc->e[at].snap >= 0) {
        snap_io(pc, pc->e[at].snap, dst, 0);
    } else {
        if (!pc->disk || !ea_kv_disk_has_state(pc->disk, key)) return 0;
        ea_status st = ea_kv_disk_get_state(pc->disk, key, dst);
        disk_stats(pc);
        if (st != EA_OK) {
            EA_LOGW("kv disk: %s", ea_errmsg());
            return 0;
        }
        int sn;
        if ((at = find(pc, key)) >= 0 && pc->e[at].snap < 0 && (sn = snap_alloc(pc)) >= 0) {
            at = find(pc, key); /* still there: its block is in seq's table, so never evicted */
            pc->e[at].snap = sn;
            snap_io(pc, sn, dst, 1);
        }
    }
    pc->lin->next_pos[seq] = n_pos;
    return 1;
}

int ea_prefix_cache_attach(ea_prefix_cache *pc, int seq, const int32_t *tokens, int n_tokens, int max_covered) {
    if (!pc) return 0;
    ea_kv_cache *kv = pc->kv;
    int B = kv->block_size, covered = 0, nb = 0;
    uint64_t h = 0;
    for (int i = 0; (i + 1) * B < n_tokens && (i + 1) * B <= max_covered; i++) {
        h = block_hash(h, tokens + (size_t)i * B, B);
        int at = find(pc, h);
        if (at < 0) at = disk_load(pc, h);
        if (at < 0) break;
        if (ea_kv_seq_share(kv, seq, pc->e[at].block) != EA_OK) break;
        pc->e[at].stamp = ++pc->clock;
        covered = (i + 1) * B;
        if (pc->lin && covered % pc->snap_every == 0) pc->bkeys[nb] = h, pc->bcov[nb++] = covered;
    }
    if (!pc->lin) return covered;
    /* hybrid: the hit ends at the last boundary whose state can be restored */
    covered = 0;
    for (int j = nb - 1; j >= 0 && !covered; j--)
        if (snap_restore(pc, seq, pc->bkeys[j], pc->bcov[j])) covered = pc->bcov[j];
    ea_kv_seq_truncate(kv, seq, covered / B);
    return covered;
}

void ea_prefix_cache_snapshot(ea_prefix_cache *pc, int seq, const int32_t *tokens, int n_pos) {
    if (!pc || !pc->lin || n_pos <= 0 || n_pos % pc->snap_every) return;
    EA_ASSERT(pc->lin->next_pos[seq] == n_pos);
    ea_prefix_cache_add_seq(pc, seq, tokens, n_pos);
    uint64_t h = 0;
    for (int i = 0; i < n_pos / pc->kv->block_size; i++)
        h = block_hash(h, tokens + (size_t)i * pc->kv->block_size, pc->kv->block_size);
    int at = find(pc, h), sn;
    if (at < 0 || pc->e[at].snap >= 0) return;
    pc->e[at].stamp = ++pc->clock; /* the last to go while making room */
    if ((sn = snap_alloc(pc)) < 0) return;
    if ((at = find(pc, h)) < 0) { /* another sequence's block under this key, evicted to make room */
        snap_release(pc, sn);
        return;
    }
    pc->e[at].snap = sn;
    pc->e[at].stamp = ++pc->clock;
    snap_io(pc, sn, slot_state(pc, seq), 1);
}

void ea_prefix_cache_get_stats(const ea_prefix_cache *pc, int *n_snapshots, size_t *snapshot_bytes) {
    *n_snapshots = 0;
    *snapshot_bytes = 0;
    if (!pc || !pc->lin) return;
    *n_snapshots = pc->n_snap_max - pc->n_snap_free;
    *snapshot_bytes = (size_t)*n_snapshots * pc->snap_m *
                      ea_kv_bytes_per_block(pc->kv->dtype, pc->kv->n_layers, pc->kv->k_dim, pc->kv->v_dim,
                                            pc->kv->block_size);
}

int ea_prefix_cache_snap_every(const ea_prefix_cache *pc) { return pc && pc->lin ? pc->snap_every : 0; }

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

/* The snapshot pool: as many snapshots as the KV cache's blocks could hold. */
static ea_status snap_init(ea_prefix_cache *pc) {
    ea_kv_cache *kv = pc->kv;
    size_t per_block = ea_kv_bytes_per_block(kv->dtype, kv->n_layers, kv->k_dim, kv->v_dim, kv->block_size);
    size_t state = pc->lin->seq_floats * sizeof(float);
    pc->snap_every = kv->block_size / gcd(kv->block_size, EA_K_DELTA_CHUNK) * EA_K_DELTA_CHUNK;
    pc->snap_m = (int)((state + per_block - 1) / per_block);
    pc->n_snap_max = pc->n_snap_free = kv->n_blocks / pc->snap_m;
    if (pc->n_snap_max == 0)
        EA_LOGW("prefix cache: one recurrent-state snapshot needs %d KV blocks and the cache has %d: no prefix of this "
                "model can be cached (give a larger --kv-cache-mib)", pc->snap_m, kv->n_blocks);
    size_t ns = (size_t)(pc->n_snap_max > 0 ? pc->n_snap_max : 1);
    pc->snap_blocks = ea_malloc(sizeof(int32_t) * ns * (size_t)pc->snap_m);
    pc->snap_free = ea_malloc(sizeof(int32_t) * ns);
    pc->bkeys = ea_malloc(sizeof(uint64_t) * (size_t)kv->max_blocks_per_seq);
    pc->bcov = ea_malloc(sizeof(int) * (size_t)kv->max_blocks_per_seq);
    pc->stbuf = ea_malloc(pc->lin->seq_floats * sizeof(float));
    if (!pc->snap_blocks || !pc->snap_free || !pc->bkeys || !pc->bcov || !pc->stbuf)
        return ea_err(EA_ERR_NOMEM, "scheduler buffers");
    for (int i = 0; i < pc->n_snap_max; i++) pc->snap_free[i] = pc->n_snap_max - 1 - i;
    return EA_OK;
}

ea_status ea_prefix_cache_create(ea_kv_cache *kv, struct ea_model *m, const ea_prefix_cache_opts *o,
                                 ea_prefix_cache **out) {
    *out = NULL;
    ea_prefix_cache *pc = ea_calloc(1, sizeof *pc);
    if (!pc) return ea_err(EA_ERR_NOMEM, "scheduler buffers");
    pc->kv = kv;
    pc->lin = o->lin;
    pc->on_disk = o->on_disk;
    pc->on_disk_ctx = o->on_disk_ctx;
    pc->cap = (int)ea_grow_cap(0, 2 * (size_t)kv->n_blocks, 1);
    pc->e = ea_malloc(sizeof *pc->e * (size_t)pc->cap);
    if (!pc->e) {
        ea_free(pc);
        return ea_err(EA_ERR_NOMEM, "scheduler buffers");
    }
    for (int i = 0; i < pc->cap; i++) pc->e[i].block = -1, pc->e[i].snap = -1;
    ea_status st = pc->lin ? snap_init(pc) : EA_OK;
    if (st == EA_OK && o->disk_dir && o->disk_dir[0]) {
        ea_kv_disk_opts dopt = {.dir = o->disk_dir, .mode = o->par_mode, .world = o->par_world, .rank = o->par_rank,
                                .max_bytes = o->disk_max_mib * 1024 * 1024,
                                .state_bytes = pc->lin ? pc->lin->seq_floats * sizeof(float) : 0};
        st = ea_kv_disk_open(&dopt, m, kv, &pc->disk);
        if (st == EA_OK) disk_stats(pc);
    }
    if (st != EA_OK) {
        ea_prefix_cache_destroy(pc);
        return st;
    }
    *out = pc;
    return EA_OK;
}

void ea_prefix_cache_destroy(ea_prefix_cache *pc) {
    if (!pc) return;
    if (pc->disk) { /* keep what the memory cache holds for the next start */
        for (int i = 0; i < pc->cap; i++)
            if (pc->e[i].block >= 0) disk_put(pc, i);
        ea_kv_disk_close(pc->disk);
    }
    ea_free(pc->e);
    ea_free(pc->snap_blocks);
    ea_free(pc->snap_free);
    ea_free(pc->bkeys);
    ea_free(pc->bcov);
    ea_free(pc->stbuf);
    ea_free(pc);
}
