/*
 * st_write.c — streaming safetensors writer (single file or shards + index).
 * Format, sharding rule and use: see st_write.h.
 *
 * Invariants: after begin(), tensors[] is frozen; each tensor has a shard and
 * a begin offset inside that shard's data section; the tensors of one shard
 * are contiguous in declaration order and back to back (no gaps, as the
 * format requires). `cur`/`cur_done` track the tensor being streamed; the
 * file of shard tensors[cur].shard is the open one. Sizes are checked for
 * overflow when declared, so the arithmetic of write() cannot wrap.
 */
#include "model/st_write.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"

typedef struct {
    char *name; /* owns */
    ea_dtype dt;
    int n_dims;
    int64_t shape[4];
    uint64_t nbytes;
    int shard;
    uint64_t begin; /* inside its shard's data section */
} ea__stw_tensor;

struct ea_st_writer {
    char *dir; /* owns */
    int n_shards;
    ea__stw_tensor *t; /* owns: n entries */
    int n;
    size_t cap;
    int begun;
    uint64_t total;
    int cur;           /* tensor being written */
    uint64_t cur_done; /* bytes of it written */
    int open_shard;    /* shard of fp, -1 none */
    FILE *fp;          /* owns */
    char *fbuf;        /* owns: stdio buffer */
    char path[4096];   /* path of fp, for errors */
};

#define EA__STW_BUF (1u << 20)

const char *ea_st_dtype_name(ea_dtype dt) {
    switch (dt) {
    case EA_F32: return "F32";
    case EA_F16: return "F16";
    case EA_BF16: return "BF16";
    default: return NULL;
    }
}

ea_status ea_st_writer_create(const char *dir, int n_shards, ea_st_writer **out) {
    *out = NULL;
    if (n_shards < 1 || n_shards > 99999)
        return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: shard count %d out of range 1..99999", n_shards);
    if (!ea_is_dir(dir)) return ea_err(EA_ERR_NOT_FOUND, "safetensors writer: %s is not a directory", dir);
    ea_st_writer *w = ea_calloc(1, sizeof *w);
    if (!w) return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory");
    w->dir = ea_strdup(dir);
    if (!w->dir) {
        ea_free(w);
        return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory");
    }
    w->n_shards = n_shards;
    w->open_shard = -1;
    *out = w;
    return EA_OK;
}

ea_status ea_st_writer_add(ea_st_writer *w, const char *name, ea_dtype dt, int n_dims, const int64_t *shape) {
    if (w->begun) return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: add '%s' after begin", name);
    const char *dn = ((unsigned)dt < EA_N_DTYPES) ? ea_st_dtype_name(dt) : NULL;
    if (!dn) return ea_err(EA_ERR_UNSUPPORTED, "safetensors writer: tensor '%s': dtype cannot be stored in safetensors", name);
    if (n_dims < 0 || n_dims > 4)
        return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: tensor '%s': %d dims (0..4)", name, n_dims);
    size_t nb = (size_t)ea_dtypes[dt].block_bytes;
    for (int i = 0; i < n_dims; i++) {
        if (shape[i] < 0 || !ea_mul_ok(nb, (size_t)shape[i], &nb))
            return ea_err(EA_ERR_RANGE, "safetensors writer: tensor '%s': bad shape", name);
    }
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: tensor '%s' declared twice", name);
    if (ea_grow(&w->t, &w->cap, (size_t)w->n + 1, sizeof *w->t, 64))
        return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory");
    ea__stw_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = ea_strdup(name);
    if (!t->name) return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory");
    t->dt = dt;
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) t->shape[i] = shape[i];
    t->nbytes = nb;
    w->n++;
    return EA_OK;
}

static void ea__stw_shard_name(const ea_st_writer *w, int s, char *buf, size_t bufsz) {
    if (w->n_shards == 1)
        snprintf(buf, bufsz, "model.safetensors");
    else
        snprintf(buf, bufsz, "model-%05d-of-%05d.safetensors", s + 1, w->n_shards);
}

/* Build the header JSON of shard s (spaces-padded so 8 + len is a multiple of 64). */
static ea_status ea__stw_header(const ea_st_writer *w, int s, char **out, size_t *out_len) {
    json_t *root = json_object();
    json_t *meta = json_object();
    if (!root || !meta) goto nomem;
    if (json_object_set_new(meta, "format", json_string("pt")) || json_object_set_new(root, "__metadata__", meta)) {
        meta = NULL;
        goto nomem;
    }
    meta = NULL;
    for (int i = 0; i < w->n; i++) {
        const ea__stw_tensor *t = &w->t[i];
        if (t->shard != s) continue;
        json_t *e = json_object(), *sh = json_array(), *off = json_array();
        if (!e || !sh || !off) {
            json_decref(e);
            json_decref(sh);
            json_decref(off);
            goto nomem;
        }
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(sh, json_integer((json_int_t)t->shape[d]));
        json_array_append_new(off, json_integer((json_int_t)t->begin));
        json_array_append_new(off, json_integer((json_int_t)(t->begin + t->nbytes)));
        json_object_set_new(e, "dtype", json_string(ea_st_dtype_name(t->dt)));
        json_object_set_new(e, "shape", sh);
        json_object_set_new(e, "data_offsets", off);
        if (json_object_set_new(root, t->name, e)) goto nomem;
    }
    char *txt = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!txt) return ea_err(EA_ERR_NOMEM, "safetensors writer: cannot serialise header");
    size_t len = strlen(txt);
    size_t padded = len + (64 - (8 + len) % 64) % 64;
    char *buf = ea_malloc(padded + 1);
    if (!buf) {
        free(txt);
        return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory");
    }
    memcpy(buf, txt, len);
    memset(buf + len, ' ', padded - len);
    buf[padded] = 0;
    free(txt); /* jansson allocates with malloc */
    *out = buf;
    *out_len = padded;
    return EA_OK;
nomem:
    json_decref(meta);
    json_decref(root);
    return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory building header");
}

static ea_status ea__stw_close(ea_st_writer *w) {
    if (!w->fp) return EA_OK;
    int bad = ferror(w->fp);
    int rc = fclose(w->fp);
    w->fp = NULL;
    w->open_shard = -1;
    if (bad || rc != 0) return ea_err(EA_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    return EA_OK;
}

static ea_status ea__stw_open(ea_st_writer *w, int s) {
    EA_TRY(ea__stw_close(w));
    char name[64];
    ea__stw_shard_name(w, s, name, sizeof name);
    ea_path_join(w->path, sizeof w->path, w->dir, name);
    w->fp = fopen(w->path, "wb");
    if (!w->fp) return ea_err(EA_ERR_IO, "%s: cannot create: %s", w->path, strerror(errno));
    if (!w->fbuf) {
        w->fbuf = ea_malloc(EA__STW_BUF);
        if (!w->fbuf) return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory");
    }
    setvbuf(w->fp, w->fbuf, _IOFBF, EA__STW_BUF);
    w->open_shard = s;
    char *hdr = NULL;
    size_t hlen = 0;
    EA_TRY(ea__stw_header(w, s, &hdr, &hlen));
    uint8_t n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    size_t ok = fwrite(n8, 1, 8, w->fp) + fwrite(hdr, 1, hlen, w->fp);
    ea_free(hdr);
    if (ok != 8 + hlen) return ea_err(EA_ERR_IO, "%s: header write failed: %s", w->path, strerror(errno));
    return EA_OK;
}

ea_status ea_st_writer_begin(ea_st_writer *w) {
    if (w->begun) return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: begin called twice");
    if (w->n == 0) return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: no tensors declared");
    if (w->n_shards > w->n)
        return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: %d shards for %d tensors (a shard may not be empty)",
                      w->n_shards, w->n);
    uint64_t total = 0;
    for (int i = 0; i < w->n; i++) total += w->t[i].nbytes;
    w->total = total;
    /* contiguous runs of ~total/S bytes; advance early when the tensors left
     * are exactly enough to give every remaining shard one */
    int s = 0;
    uint64_t cum = 0, off = 0;
    for (int i = 0; i < w->n; i++) {
        w->t[i].shard = s;
        w->t[i].begin = off;
        off += w->t[i].nbytes;
        cum += w->t[i].nbytes;
        int S = w->n_shards;
        if (s < S - 1 &&
            (cum >= (uint64_t)((double)total * (s + 1) / S) || w->n - i - 1 == S - 1 - s)) {
            s++;
            off = 0;
        }
    }
    EA_ASSERT(s == w->n_shards - 1);
    w->begun = 1;
    w->cur = 0;
    w->cur_done = 0;
    return ea__stw_open(w, 0);
}

ea_status ea_st_writer_write(ea_st_writer *w, const void *data, size_t n) {
    if (!w->begun) return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: write before begin");
    const uint8_t *p = data;
    while (n > 0) {
        while (w->cur < w->n && w->cur_done == w->t[w->cur].nbytes) {
            w->cur++;
            w->cur_done = 0;
        }
        if (w->cur >= w->n)
            return ea_err(EA_ERR_RANGE, "safetensors writer: %zu bytes written past the last tensor", n);
        ea__stw_tensor *t = &w->t[w->cur];
        /* shards holding only empty tensors are opened (header only) on the way */
        while (w->open_shard < t->shard) EA_TRY(ea__stw_open(w, w->open_shard + 1));
        uint64_t room = t->nbytes - w->cur_done;
        size_t k = n < room ? n : (size_t)room;
        if (fwrite(p, 1, k, w->fp) != k)
            return ea_err(EA_ERR_IO, "%s: tensor '%s': write failed: %s", w->path, t->name, strerror(errno));
        w->cur_done += k;
        p += k;
        n -= k;
    }
    return EA_OK;
}

static ea_status ea__stw_index(ea_st_writer *w) {
    json_t *root = json_object(), *meta = json_object(), *map = json_object();
    if (!root || !meta || !map) {
        json_decref(root);
        json_decref(meta);
        json_decref(map);
        return ea_err(EA_ERR_NOMEM, "safetensors writer: out of memory");
    }
    json_object_set_new(meta, "total_size", json_integer((json_int_t)w->total));
    json_object_set_new(root, "metadata", meta);
    for (int i = 0; i < w->n; i++) {
        char name[64];
        ea__stw_shard_name(w, w->t[i].shard, name, sizeof name);
        json_object_set_new(map, w->t[i].name, json_string(name));
    }
    json_object_set_new(root, "weight_map", map);
    char *txt = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    if (!txt) return ea_err(EA_ERR_NOMEM, "safetensors writer: cannot serialise index");
    char path[4096];
    ea_path_join(path, sizeof path, w->dir, "model.safetensors.index.json");
    size_t len = strlen(txt);
    ea_status st = ea_write_file(path, txt, len);
    free(txt);
    return st;
}

ea_status ea_st_writer_finish(ea_st_writer *w) {
    if (!w->begun) return ea_err(EA_ERR_INVALID_ARG, "safetensors writer: finish before begin");
    while (w->cur < w->n && w->cur_done == w->t[w->cur].nbytes) {
        w->cur++;
        w->cur_done = 0;
    }
    if (w->cur < w->n)
        return ea_err(EA_ERR_RANGE, "safetensors writer: tensor '%s' has %llu of %llu bytes written", w->t[w->cur].name,
                      (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].nbytes);
    /* trailing shards holding only empty tensors: write their headers too */
    while (w->open_shard < w->n_shards - 1) EA_TRY(ea__stw_open(w, w->open_shard + 1));
    EA_TRY(ea__stw_close(w));
    if (w->n_shards > 1) EA_TRY(ea__stw_index(w));
    return EA_OK;
}

void ea_st_writer_destroy(ea_st_writer *w) {
    if (!w) return;
    if (w->fp) fclose(w->fp);
    for (int i = 0; i < w->n; i++) ea_free(w->t[i].name);
    ea_free(w->t);
    ea_free(w->fbuf);
    ea_free(w->dir);
    ea_free(w);
}
