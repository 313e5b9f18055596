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
 */
#include "serve/prefix_cache.h"

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"

typedef struct {
    uint64_t key;
    int32_t block;   /* -1 = empty slot, -2 = tombstone */
    uint64_t stamp;  /* last use, for LRU */
} pc_entry;

struct ea_prefix_cache {
    ea_kv_cache *kv;     /* borrows */
    pc_entry *e;         /* owns: (cap) */
    int cap;             /* power of two */
    uint64_t clock;
    ea_kv_disk *disk;    /* owns: the disk tier, or NULL */
    void (*on_disk)(void *ctx, const ea_kv_disk_stats *st);
    void *on_disk_ctx;
};

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

/* Write entry i's block to the disk tier (a failure costs only the copy). */
static void disk_put(ea_prefix_cache *pc, int i) {
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
        if (pc->e[i].block >= 0 && kv->refcnt[pc->e[i].block] == 1 && (best < 0 || pc->e[i].stamp < pc->e[best].stamp))
            best = i;
    if (best < 0) return 0;
    disk_put(pc, best);
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

int ea_prefix_cache_attach(ea_prefix_cache *pc, int seq, const int32_t *tokens, int n_tokens, int max_covered) {
    if (!pc) return 0;
    ea_kv_cache *kv = pc->kv;
    int B = kv->block_size, covered = 0;
    uint64_t h = 0;
    for (int i = 0; (i + 1) * B < n_tokens && (i + 1) * B <= max_covered; i++) {
        h = block_hash(h, tokens + (size_t)i * B, B);
        int at = find(pc, h);
        if (at < 0) at = disk_load(pc, h);
        if (at < 0) break;
        if (ea_kv_seq_share(kv, seq, pc->e[at].block) != EA_OK) break;
        pc->e[at].stamp = ++pc->clock;
        covered = (i + 1) * B;
    }
    return covered;
}

ea_status ea_prefix_cache_create(ea_kv_cache *kv, struct ea_model *m, const ea_prefix_cache_opts *o,
                                 ea_prefix_cache **out) {
    *out = NULL;
    ea_prefix_cache *pc = ea_calloc(1, sizeof *pc);
    if (!pc) return ea_err(EA_ERR_NOMEM, "scheduler buffers");
    pc->kv = kv;
    pc->on_disk = o->on_disk;
    pc->on_disk_ctx = o->on_disk_ctx;
    pc->cap = (int)ea_grow_cap(0, 2 * (size_t)kv->n_blocks, 1);
    pc->e = ea_malloc(sizeof *pc->e * (size_t)pc->cap);
    if (!pc->e) {
        ea_free(pc);
        return ea_err(EA_ERR_NOMEM, "scheduler buffers");
    }
    for (int i = 0; i < pc->cap; i++) pc->e[i].block = -1;
    if (o->disk_dir && o->disk_dir[0]) {
        ea_kv_disk_opts dopt = {.dir = o->disk_dir, .mode = o->par_mode, .world = o->par_world, .rank = o->par_rank,
                                .max_bytes = o->disk_max_mib * 1024 * 1024};
        ea_status st = ea_kv_disk_open(&dopt, m, kv, &pc->disk);
        if (st != EA_OK) {
            ea_free(pc->e);
            ea_free(pc);
            return st;
        }
        disk_stats(pc);
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
    ea_free(pc);
}
