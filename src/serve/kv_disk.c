/*
 * kv_disk.c — the prefix cache's disk tier (see kv_disk.h for the layout).
 *
 * Index: open addressing over keys (power-of-two capacity, at most half full;
 * deleted slots are tombstones until the next grow). Each entry records the
 * file's size and a stamp (write/read order) so the oldest file goes first
 * when the namespace exceeds max_bytes.
 *
 * Invariants: a key is in the index only if its file passed validation at
 * open or was written by this process; a file is read into the KV cache only
 * after its header matches this cache's shape and its payload checksum
 * matches. The header is written in host byte order (the files are a cache
 * of this machine's memory, not an exchange format); a file from a machine
 * of the other byte order fails the magic/shape checks and is skipped.
 */
#define _GNU_SOURCE
#include "serve/kv_disk.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "model/model.h"

#define EA__KVD_MAGIC "EAKVBLK1"
#define EA__KVD_MAGIC_STATE "EALSTAT1" /* a recurrent-state snapshot (kind 1) */
#define EA__KVD_VERSION 2u /* 2: a block keeps each KV head's rows together (model/kv_cache.h) */
#define EA__KVD_HDR 64

typedef struct {
    char magic[8];
    uint32_t version, block_size;
    uint64_t key;
    uint32_t n_layers, k_dim, v_dim, dtype; /* dtype: the elements' ea_dtype (0 f32, 1 f16, 2 bf16) */
    uint64_t payload_bytes;
    uint64_t checksum;
    uint64_t fingerprint;
} ea__kvd_hdr;
_Static_assert(sizeof(ea__kvd_hdr) == EA__KVD_HDR, "kv disk header is 64 bytes");

typedef struct {
    uint64_t key;
    uint64_t bytes;
    uint64_t stamp;
    int state; /* 0 empty, 1 used, 2 tombstone */
    int kind;  /* 0 KV block (.kvb), 1 recurrent-state snapshot (.lss) */
} ea__kvd_ent;

static const char *const kind_ext[2] = {"kvb", "lss"};

struct ea_kv_disk {
    char *ns;             /* owns: namespace directory */
    uint64_t fp;          /* model fingerprint */
    int n_layers, block_size, k_dim, v_dim, dtype;
    uint64_t payload;     /* bytes of one block's payload */
    uint64_t state_payload; /* bytes of one state snapshot; 0: this model keeps none */
    size_t max_bytes;
    ea__kvd_ent *ix;      /* owns */
    size_t cap, used;     /* used counts live + tombstones */
    uint64_t clock;
    uint8_t *buf;         /* owns: one payload */
    ea_kv_disk_stats st;
};

/* ------------------------------------------------------------ fingerprint */

/* The model's own fingerprint (every weight byte and the parsed config) and,
 * for HF, config.json's bytes. */
static uint64_t ea__fingerprint(ea_model *m) {
    uint64_t h = ea_model_fingerprint(m);
    if (m->path && ea_is_dir(m->path)) {
        char p[4096];
        ea_path_join(p, sizeof p, m->path, "config.json");
        char *data = NULL;
        size_t n = 0;
        if (ea_read_file(p, &data, &n) == EA_OK) {
            h = ea_xxh64(data, n, h);
            ea_free(data);
        }
    }
    return h;
}

/* ------------------------------------------------------------ index */

static ea__kvd_ent *ea__ix_find(const ea_kv_disk *d, uint64_t key, int kind) {
    for (size_t i = (size_t)(key & (d->cap - 1)), n = 0; n < d->cap; i = (i + 1) & (d->cap - 1), n++) {
        if (d->ix[i].state == 0) return NULL;
        if (d->ix[i].state == 1 && d->ix[i].key == key && d->ix[i].kind == kind) return &d->ix[i];
    }
    return NULL;
}

static ea_status ea__ix_grow(ea_kv_disk *d) {
    size_t nc = ea_grow_cap(d->cap, d->cap + 1, 256);
    size_t live = 0;
    for (size_t i = 0; i < d->cap; i++) live += d->ix[i].state == 1;
    if (d->cap && live * 4 < d->cap) nc = d->cap; /* mostly tombstones: rehash in place */
    ea__kvd_ent *ni = ea_calloc(nc, sizeof *ni);
    if (!ni) return ea_err(EA_ERR_NOMEM, "kv disk index");
    for (size_t i = 0; i < d->cap; i++)
        if (d->ix[i].state == 1) {
            size_t j = (size_t)(d->ix[i].key & (nc - 1));
            while (ni[j].state) j = (j + 1) & (nc - 1);
            ni[j] = d->ix[i];
        }
    ea_free(d->ix);
    d->ix = ni;
    d->cap = nc;
    d->used = live;
    return EA_OK;
}

static ea_status ea__ix_add(ea_kv_disk *d, uint64_t key, int kind, uint64_t bytes) {
    if (ea__ix_find(d, key, kind)) return EA_OK;
    if ((d->used + 1) * 2 > d->cap) {
        ea_status st = ea__ix_grow(d);
        if (st != EA_OK) return st;
    }
    size_t i = (size_t)(key & (d->cap - 1));
    while (d->ix[i].state == 1) i = (i + 1) & (d->cap - 1);
    if (d->ix[i].state == 0) d->used++;
    d->ix[i] = (ea__kvd_ent){.key = key, .bytes = bytes, .stamp = ++d->clock, .state = 1, .kind = kind};
    d->st.files++;
    d->st.bytes += bytes;
    return EA_OK;
}

static void ea__file_path(const ea_kv_disk *d, uint64_t key, int kind, char *buf, size_t n) {
    snprintf(buf, n, "%s/%016llx.%s", d->ns, (unsigned long long)key, kind_ext[kind]);
}

static void ea__ix_drop(ea_kv_disk *d, ea__kvd_ent *e, int unlink_file) {
    if (unlink_file) {
        char p[4096];
        ea__file_path(d, e->key, e->kind, p, sizeof p);
        if (unlink(p) == 0) d->st.deleted++;
    }
    d->st.files--;
    d->st.bytes -= e->bytes;
    e->state = 2;
}

/* Delete the oldest files until the namespace fits max_bytes (keeping at least `keep`). */
static void ea__trim(ea_kv_disk *d, uint64_t keep, int keep_kind) {
    while (d->max_bytes && d->st.bytes > d->max_bytes) {
        ea__kvd_ent *old = NULL;
        for (size_t i = 0; i < d->cap; i++)
            if (d->ix[i].state == 1 && !(d->ix[i].key == keep && d->ix[i].kind == keep_kind) && (!old || d->ix[i].stamp < old->stamp)) old = &d->ix[i];
        if (!old) return;
        ea__ix_drop(d, old, 1);
    }
}

/* ------------------------------------------------------------ files */

static ea_status ea__mkdirs(char *path) {
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            int rc = mkdir(path, 0755);
            *p = '/';
            if (rc != 0 && errno != EEXIST) return ea_err(EA_ERR_IO, "%s: mkdir: %s", path, strerror(errno));
        }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return ea_err(EA_ERR_IO, "%s: mkdir: %s", path, strerror(errno));
    if (!ea_is_dir(path)) return ea_err(EA_ERR_IO, "%s: not a directory", path);
    return EA_OK;
}

/* Read and validate a block file (kind 0) or a state snapshot file (kind 1: its
 * header's block_size, n_layers, k_dim and v_dim are 0); on success the payload
 * is in d->buf. Returns a reason on failure (static text) and NULL when valid. */
static const char *ea__read_valid(ea_kv_disk *d, const char *path, uint64_t key, int kind) {
    uint64_t want = kind ? d->state_payload : d->payload;
    int bs = kind ? 0 : d->block_size, nl = kind ? 0 : d->n_layers, kd = kind ? 0 : d->k_dim, vd = kind ? 0 : d->v_dim,
        dt = kind ? 0 : d->dtype;
    FILE *f = fopen(path, "rb");
    if (!f) return "cannot open";
    ea__kvd_hdr h;
    const char *why = NULL;
    if (fread(&h, 1, sizeof h, f) != sizeof h) why = "shorter than the header";
    else if (memcmp(h.magic, kind ? EA__KVD_MAGIC_STATE : EA__KVD_MAGIC, 8) != 0)
        why = kind ? "bad magic (not a recurrent-state file)" : "bad magic (not a KV block file)";
    else if (kind && !d->state_payload) why = "a recurrent-state file, and this model keeps no recurrent state";
    else if (h.version != EA__KVD_VERSION) why = "unsupported version";
    else if (h.key != key) why = "key does not match the file name";
    else if (h.fingerprint != d->fp) why = "written for another model";
    else if ((int)h.block_size != bs || (int)h.n_layers != nl || (int)h.k_dim != kd || (int)h.v_dim != vd)
        why = "block shape differs from this KV cache";
    else if ((int)h.dtype != dt) why = "element dtype differs from this KV cache";
    else if (h.payload_bytes != want) why = "payload size differs from the block shape";
    else if (fread(d->buf, 1, (size_t)want, f) != (size_t)want) why = "truncated payload";
    else if (fgetc(f) != EOF) why = "trailing bytes after the payload";
    else if (ea_hash64(d->buf, (size_t)want, 0) != h.checksum) why = "payload checksum mismatch";
    fclose(f);
    return why;
}

/* 1 for "<16 hex>.kvb" or ".lss", with *key and *kind. */
static int ea__parse_name(const char *name, uint64_t *key, int *kind) {
    if (strlen(name) != 20 || name[16] != '.') return 0;
    if (strcmp(name + 17, kind_ext[0]) == 0) *kind = 0;
    else if (strcmp(name + 17, kind_ext[1]) == 0) *kind = 1;
    else return 0;
    uint64_t k = 0;
    for (int i = 0; i < 16; i++) {
        char c = name[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return 0;
        k = k << 4 | (uint64_t)v;
    }
    *key = k;
    return 1;
}

static ea_status ea__scan(ea_kv_disk *d) {
    DIR *dir = opendir(d->ns);
    if (!dir) return ea_err(EA_ERR_IO, "%s: opendir: %s", d->ns, strerror(errno));
    struct dirent *de;
    ea_status st = EA_OK;
    while (st == EA_OK && (de = readdir(dir)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", d->ns, de->d_name);
        uint64_t key;
        int kind;
        if (!ea__parse_name(de->d_name, &key, &kind)) {
            size_t nl = strlen(de->d_name);
            struct stat sb;
            if (nl > 8 && strncmp(de->d_name, ".tmp-", 5) == 0) { /* a write that never finished (an hour ago) */
                if (stat(p, &sb) == 0 && sb.st_mtime + 3600 < time(NULL)) unlink(p);
                continue;
            }
            EA_LOGW("kv disk: %s: not a KV block file name; skipped", p);
            d->st.skipped++;
            continue;
        }
        const char *why = ea__read_valid(d, p, key, kind);
        if (why) {
            /* a block file of ours that went bad: it would be rewritten on the next eviction anyway */
            EA_LOGW("kv disk: %s: %s; skipped (never loaded) and deleted", p, why);
            d->st.skipped++;
            if (unlink(p) == 0) d->st.deleted++;
            continue;
        }
        st = ea__ix_add(d, key, kind, EA__KVD_HDR + (kind ? d->state_payload : d->payload));
    }
    closedir(dir);
    return st;
}

/* ------------------------------------------------------------ API */

ea_status ea_kv_disk_open(const ea_kv_disk_opts *o, ea_model *m, const ea_kv_cache *kv, ea_kv_disk **out) {
    *out = NULL;
    if (!o->dir || !o->dir[0]) return ea_err(EA_ERR_INVALID_ARG, "--kv-disk-dir: empty path");
    const char *mode = o->mode && o->mode[0] ? o->mode : "single";
    for (const char *c = mode; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return ea_err(EA_ERR_INVALID_ARG, "kv disk: mode \"%s\": only [a-z0-9_]", mode);
    int world = o->world > 0 ? o->world : 1;
    if (o->rank < 0 || o->rank >= world)
        return ea_err(EA_ERR_INVALID_ARG, "kv disk: rank %d outside world %d", o->rank, world);
    ea_kv_disk *d = ea_calloc(1, sizeof *d);
    if (!d) return ea_err(EA_ERR_NOMEM, "kv disk");
    d->fp = ea__fingerprint(m);
    d->n_layers = kv->n_layers;
    d->block_size = kv->block_size;
    d->k_dim = kv->k_dim;
    d->v_dim = kv->v_dim;
    d->dtype = (int)kv->dtype;
    d->payload = ea_kv_bytes_per_block(kv->dtype, kv->n_layers, kv->k_dim, kv->v_dim, kv->block_size);
    d->state_payload = o->state_bytes;
    d->max_bytes = o->max_bytes;
    size_t nl = strlen(o->dir) + 128, nb = (size_t)(d->payload > d->state_payload ? d->payload : d->state_payload);
    d->ns = ea_malloc(nl);
    d->buf = ea_malloc(nb ? nb : 1);
    ea_status st = (!d->ns || !d->buf) ? ea_err(EA_ERR_NOMEM, "kv disk") : EA_OK;
    if (st == EA_OK) {
        snprintf(d->ns, nl, "%s/%016llx/%s-%d%s%s/rank_%d", o->dir, (unsigned long long)d->fp, mode, world,
                 kv->dtype == EA_F32 ? "" : "-", kv->dtype == EA_F32 ? "" : ea_dtypes[kv->dtype].name, o->rank);
        st = ea__mkdirs(d->ns);
    }
    if (st == EA_OK) st = ea__ix_grow(d);
    if (st == EA_OK) st = ea__scan(d);
    if (st == EA_OK) ea__trim(d, 0, -1);
    if (st != EA_OK) {
        ea_kv_disk_close(d);
        return st;
    }
    EA_LOGI("kv disk: %s: %llu blocks (%.1f MiB) indexed, %llu skipped", d->ns, (unsigned long long)d->st.files,
            (double)d->st.bytes / (1024.0 * 1024.0), (unsigned long long)d->st.skipped);
    *out = d;
    return EA_OK;
}

void ea_kv_disk_close(ea_kv_disk *d) {
    if (!d) return;
    ea_free(d->ns);
    ea_free(d->ix);
    ea_free(d->buf);
    ea_free(d);
}

int ea_kv_disk_has(const ea_kv_disk *d, uint64_t key) { return d && ea__ix_find(d, key, 0) != NULL; }
int ea_kv_disk_has_state(const ea_kv_disk *d, uint64_t key) { return d && ea__ix_find(d, key, 1) != NULL; }

/* d->buf's payload (kind 0: a block, 1: a state) to its file, through a temp file and rename. */
static ea_status write_file(ea_kv_disk *d, uint64_t key, int kind) {
    uint64_t n = kind ? d->state_payload : d->payload;
    ea__kvd_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, kind ? EA__KVD_MAGIC_STATE : EA__KVD_MAGIC, 8);
    h.version = EA__KVD_VERSION;
    h.key = key;
    if (!kind) {
        h.block_size = (uint32_t)d->block_size;
        h.n_layers = (uint32_t)d->n_layers;
        h.k_dim = (uint32_t)d->k_dim;
        h.v_dim = (uint32_t)d->v_dim;
        h.dtype = (uint32_t)d->dtype;
    }
    h.payload_bytes = n;
    h.checksum = ea_hash64(d->buf, (size_t)n, 0);
    h.fingerprint = d->fp;
    char tmp[4096], fin[4096];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%016llx-%ld", d->ns, (unsigned long long)key, (long)getpid());
    ea__file_path(d, key, kind, fin, sizeof fin);
    FILE *f = fopen(tmp, "wb");
    if (!f) return ea_err(EA_ERR_IO, "%s: %s", tmp, strerror(errno));
    int ok = fwrite(&h, 1, sizeof h, f) == sizeof h && fwrite(d->buf, 1, (size_t)n, f) == (size_t)n;
    int e = errno;
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, fin) != 0) {
        if (ok) e = errno;
        unlink(tmp);
        return ea_err(EA_ERR_IO, "%s: write: %s", fin, strerror(e));
    }
    ea_status st = ea__ix_add(d, key, kind, EA__KVD_HDR + n);
    if (st != EA_OK) {
        unlink(fin);
        return st;
    }
    d->st.writes++;
    ea__trim(d, key, kind);
    return EA_OK;
}

ea_status ea_kv_disk_put_state(ea_kv_disk *d, uint64_t key, const float *state) {
    if (!d->state_payload) return ea_err(EA_ERR_INVALID_ARG, "kv disk: this model keeps no recurrent state");
    if (ea__ix_find(d, key, 1)) return EA_OK;
    memcpy(d->buf, state, (size_t)d->state_payload);
    return write_file(d, key, 1);
}

/* Read key's file (a block's, or with is_state its recurrent-state snapshot)
 * into d->buf and check it; a file that fails the check is dropped from the
 * index. OUT: *ent, the entry to stamp once its payload is used. */
static ea_status ea__load(ea_kv_disk *d, uint64_t key, int is_state, ea__kvd_ent **ent) {
    ea__kvd_ent *e = ea__ix_find(d, key, is_state);
    if (!e) return ea_err(EA_ERR_NOT_FOUND, "kv disk: %s %016llx", is_state ? "state" : "key", (unsigned long long)key);
    char p[4096];
    ea__file_path(d, key, is_state, p, sizeof p);
    const char *why = ea__read_valid(d, p, key, is_state);
    if (why) {
        EA_LOGW("kv disk: %s: %s; dropped, not loaded", p, why);
        d->st.skipped++;
        ea__ix_drop(d, e, 1);
        return ea_err(EA_ERR_FORMAT, "%s: %s", p, why);
    }
    *ent = e;
    return EA_OK;
}

ea_status ea_kv_disk_get_state(ea_kv_disk *d, uint64_t key, float *state) {
    ea__kvd_ent *e;
    EA_TRY(ea__load(d, key, 1, &e));
    memcpy(state, d->buf, (size_t)d->state_payload);
    e->stamp = ++d->clock;
    d->st.reads++;
    return EA_OK;
}

ea_status ea_kv_disk_put(ea_kv_disk *d, uint64_t key, const ea_kv_cache *kv, int32_t block) {
    if (ea__ix_find(d, key, 0)) return EA_OK;
    if (block < 0 || block >= kv->n_blocks) return ea_err(EA_ERR_RANGE, "kv disk: block %d of %d", block, kv->n_blocks);
    size_t kr = (size_t)d->block_size * (size_t)d->k_dim * kv->esz, vr = (size_t)d->block_size * (size_t)d->v_dim * kv->esz;
    uint8_t *p = d->buf;
    for (int l = 0; l < d->n_layers; l++) {
        memcpy(p, kv->k + ((size_t)l * (size_t)kv->n_blocks + (size_t)block) * kr, kr);
        p += kr;
        if (vr) {
            memcpy(p, kv->v + ((size_t)l * (size_t)kv->n_blocks + (size_t)block) * vr, vr);
            p += vr;
        }
    }
    return write_file(d, key, 0);
}

ea_status ea_kv_disk_get(ea_kv_disk *d, uint64_t key, ea_kv_cache *kv, int32_t block) {
    if (!ea__ix_find(d, key, 0)) return ea_err(EA_ERR_NOT_FOUND, "kv disk: key %016llx", (unsigned long long)key);
    if (block < 0 || block >= kv->n_blocks) return ea_err(EA_ERR_RANGE, "kv disk: block %d of %d", block, kv->n_blocks);
    ea__kvd_ent *e;
    EA_TRY(ea__load(d, key, 0, &e));
    size_t kr = (size_t)d->block_size * (size_t)d->k_dim * kv->esz, vr = (size_t)d->block_size * (size_t)d->v_dim * kv->esz;
    const uint8_t *q = d->buf;
    for (int l = 0; l < d->n_layers; l++) {
        memcpy(kv->k + ((size_t)l * (size_t)kv->n_blocks + (size_t)block) * kr, q, kr);
        q += kr;
        if (vr) {
            memcpy(kv->v + ((size_t)l * (size_t)kv->n_blocks + (size_t)block) * vr, q, vr);
            q += vr;
        }
    }
    e->stamp = ++d->clock;
    d->st.reads++;
    return EA_OK;
}

void ea_kv_disk_get_stats(const ea_kv_disk *d, ea_kv_disk_stats *st) {
    if (d) *st = d->st;
    else memset(st, 0, sizeof *st);
}

const char *ea_kv_disk_dir(const ea_kv_disk *d) { return d->ns; }
