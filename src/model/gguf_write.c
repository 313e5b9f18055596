/*
 * gguf_write.c — streaming GGUF v3 writer. Layout and use: see gguf_write.h.
 *
 * Key/values are serialised into `kv` (a growable byte buffer) as they are
 * set; tensor infos are kept as a list until begin() computes the offsets:
 * offset_i = align_up(offset_{i-1} + nbytes_{i-1}), offset_0 = 0. The data
 * section starts at align_up(size of everything before it).
 *
 * Invariants during streaming: `cur` is the tensor being written and
 * `cur_done` its bytes so far; the file position is data_start +
 * offset[cur] + cur_done. Padding after a tensor is written when the next
 * tensor starts (or at finish), so write() never has to look ahead.
 */
#include "model/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

typedef struct {
    char *name; /* owns */
    ea_dtype dt;
    int n_dims;
    int64_t ne[4];
    uint64_t nbytes;
    uint64_t offset;
} ea__ggw_tensor;

struct ea_gguf_writer {
    char *path; /* owns */
    uint32_t align;
    FILE *fp;   /* owns */
    char *fbuf; /* owns */
    uint8_t *kv; /* owns: serialised key/values */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys; /* owns: for the uniqueness check */
    ea__ggw_tensor *t; /* owns */
    int n;
    size_t cap;
    int begun;
    int cur;
    uint64_t cur_done;
};

#define EA__GGW_BUF (1u << 20)

uint32_t ea_gguf_ggml_type(ea_dtype dt) {
    switch (dt) {
    case EA_F32: return 0;
    case EA_F16: return 1;
    case EA_Q8_0: return 8;
    case EA_BF16: return 30;
    default: return 0xffffffffu;
    }
}

ea_status ea_gguf_writer_create(const char *path, uint32_t alignment, ea_gguf_writer **out) {
    *out = NULL;
    if (alignment == 0 || (alignment & (alignment - 1)))
        return ea_err(EA_ERR_INVALID_ARG, "gguf writer: alignment %u is not a power of two", alignment);
    ea_gguf_writer *w = ea_calloc(1, sizeof *w);
    if (!w) return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory");
    w->path = ea_strdup(path);
    w->align = alignment;
    if (!w->path) {
        ea_free(w);
        return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory");
    }
    *out = w;
    return EA_OK;
}

void ea_gguf_writer_destroy(ea_gguf_writer *w) {
    if (!w) return;
    if (w->fp) fclose(w->fp);
    for (uint64_t i = 0; i < w->n_kv; i++) ea_free(w->keys[i]);
    ea_free(w->keys);
    for (int i = 0; i < w->n; i++) ea_free(w->t[i].name);
    ea_free(w->t);
    ea_free(w->kv);
    ea_free(w->fbuf);
    ea_free(w->path);
    ea_free(w);
}

static ea_status ea__ggw_need(ea_gguf_writer *w, size_t n) {
    if (ea_grow(&w->kv, &w->kv_cap, w->kv_len + n, 1, 4096))
        return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory (%zu bytes of metadata)", w->kv_len + n);
    return EA_OK;
}

static void ea__ggw_put(ea_gguf_writer *w, const void *p, size_t n) {
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}
static void ea__ggw_u32(ea_gguf_writer *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    ea__ggw_put(w, b, 4);
}
static void ea__ggw_u64(ea_gguf_writer *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    ea__ggw_put(w, b, 8);
}
static void ea__ggw_strv(ea_gguf_writer *w, const char *s, size_t n) {
    ea__ggw_u64(w, n);
    ea__ggw_put(w, s, n);
}

/* Start a key/value: check state and uniqueness, reserve `extra` bytes after the key and type. */
static ea_status ea__ggw_key(ea_gguf_writer *w, const char *key, uint32_t type, size_t extra) {
    if (w->begun) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: key '%s' set after begin", key);
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: key '%s' set twice", key);
    char **nk = ea_realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *nk);
    if (!nk) return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory");
    w->keys = nk;
    w->keys[w->n_kv] = ea_strdup(key);
    if (!w->keys[w->n_kv]) return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory");
    size_t kl = strlen(key);
    EA_TRY(ea__ggw_need(w, 8 + kl + 4 + extra));
    w->n_kv++;
    ea__ggw_strv(w, key, kl);
    ea__ggw_u32(w, type);
    return EA_OK;
}

enum { EA__GT_U32 = 4, EA__GT_I32 = 5, EA__GT_F32 = 6, EA__GT_BOOL = 7, EA__GT_STR = 8, EA__GT_ARR = 9, EA__GT_U64 = 10 };

ea_status ea_gguf_w_u32(ea_gguf_writer *w, const char *key, uint32_t v) {
    EA_TRY(ea__ggw_key(w, key, EA__GT_U32, 4));
    ea__ggw_u32(w, v);
    return EA_OK;
}
ea_status ea_gguf_w_i32(ea_gguf_writer *w, const char *key, int32_t v) {
    EA_TRY(ea__ggw_key(w, key, EA__GT_I32, 4));
    ea__ggw_u32(w, (uint32_t)v);
    return EA_OK;
}
ea_status ea_gguf_w_u64(ea_gguf_writer *w, const char *key, uint64_t v) {
    EA_TRY(ea__ggw_key(w, key, EA__GT_U64, 8));
    ea__ggw_u64(w, v);
    return EA_OK;
}
ea_status ea_gguf_w_f32(ea_gguf_writer *w, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    EA_TRY(ea__ggw_key(w, key, EA__GT_F32, 4));
    ea__ggw_u32(w, u);
    return EA_OK;
}
ea_status ea_gguf_w_bool(ea_gguf_writer *w, const char *key, int v) {
    EA_TRY(ea__ggw_key(w, key, EA__GT_BOOL, 1));
    uint8_t b = v ? 1 : 0;
    ea__ggw_put(w, &b, 1);
    return EA_OK;
}
ea_status ea_gguf_w_str(ea_gguf_writer *w, const char *key, const char *v) {
    size_t n = strlen(v);
    EA_TRY(ea__ggw_key(w, key, EA__GT_STR, 8 + n));
    ea__ggw_strv(w, v, n);
    return EA_OK;
}
ea_status ea_gguf_w_arr_str(ea_gguf_writer *w, const char *key, const char *const *s, const size_t *len, size_t n) {
    size_t total = 12;
    for (size_t i = 0; i < n; i++) total += 8 + len[i];
    EA_TRY(ea__ggw_key(w, key, EA__GT_ARR, total));
    ea__ggw_u32(w, EA__GT_STR);
    ea__ggw_u64(w, n);
    for (size_t i = 0; i < n; i++) ea__ggw_strv(w, s[i], len[i]);
    return EA_OK;
}
ea_status ea_gguf_w_arr_i32(ea_gguf_writer *w, const char *key, const int32_t *v, size_t n) {
    EA_TRY(ea__ggw_key(w, key, EA__GT_ARR, 12 + 4 * n));
    ea__ggw_u32(w, EA__GT_I32);
    ea__ggw_u64(w, n);
    for (size_t i = 0; i < n; i++) ea__ggw_u32(w, (uint32_t)v[i]);
    return EA_OK;
}
ea_status ea_gguf_w_arr_f32(ea_gguf_writer *w, const char *key, const float *v, size_t n) {
    EA_TRY(ea__ggw_key(w, key, EA__GT_ARR, 12 + 4 * n));
    ea__ggw_u32(w, EA__GT_F32);
    ea__ggw_u64(w, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        ea__ggw_u32(w, u);
    }
    return EA_OK;
}

ea_status ea_gguf_writer_add_tensor(ea_gguf_writer *w, const char *name, ea_dtype dt, int n_dims, const int64_t *ne) {
    if (w->begun) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: tensor '%s' declared after begin", name);
    if ((unsigned)dt >= EA_N_DTYPES) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: tensor '%s': bad dtype", name);
    if (n_dims < 1 || n_dims > 4)
        return ea_err(EA_ERR_INVALID_ARG, "gguf writer: tensor '%s': %d dims (1..4)", name, n_dims);
    for (int i = 0; i < n_dims; i++)
        if (ne[i] < 1) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: tensor '%s': ne[%d] = %lld", name, i, (long long)ne[i]);
    size_t nb = ea_dtype_row_bytes(dt, (size_t)ne[0]);
    if (nb == 0)
        return ea_err(EA_ERR_INVALID_ARG, "gguf writer: tensor '%s': ne[0] = %lld is not a multiple of the %s block",
                      name, (long long)ne[0], ea_dtypes[dt].name);
    for (int i = 1; i < n_dims; i++)
        if (!ea_mul_ok(nb, (size_t)ne[i], &nb)) return ea_err(EA_ERR_RANGE, "gguf writer: tensor '%s': too big", name);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: tensor '%s' declared twice", name);
    if (ea_grow(&w->t, &w->cap, (size_t)w->n + 1, sizeof *w->t, 64)) return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory");
    ea__ggw_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = ea_strdup(name);
    if (!t->name) return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory");
    t->dt = dt;
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) t->ne[i] = ne[i];
    t->nbytes = nb;
    w->n++;
    return EA_OK;
}

static uint64_t ea__ggw_align(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

static ea_status ea__ggw_fwrite(ea_gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->fp) != n) return ea_err(EA_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    return EA_OK;
}

static ea_status ea__ggw_zeros(ea_gguf_writer *w, uint64_t n) {
    static const uint8_t z[64];
    while (n > 0) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        EA_TRY(ea__ggw_fwrite(w, z, k));
        n -= k;
    }
    return EA_OK;
}

ea_status ea_gguf_writer_begin(ea_gguf_writer *w) {
    if (w->begun) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: begin called twice");
    /* tensor infos go into the kv buffer's tail (it is only written once) */
    uint64_t off = 0;
    size_t info_bytes = 0;
    for (int i = 0; i < w->n; i++) {
        w->t[i].offset = off;
        off = ea__ggw_align(off + w->t[i].nbytes, w->align);
        info_bytes += 8 + strlen(w->t[i].name) + 4 + 8 * (size_t)w->t[i].n_dims + 4 + 8;
    }
    EA_TRY(ea__ggw_need(w, 24 + info_bytes));
    for (int i = 0; i < w->n; i++) {
        const ea__ggw_tensor *t = &w->t[i];
        ea__ggw_strv(w, t->name, strlen(t->name));
        ea__ggw_u32(w, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) ea__ggw_u64(w, (uint64_t)t->ne[d]);
        ea__ggw_u32(w, ea_gguf_ggml_type(t->dt));
        ea__ggw_u64(w, t->offset);
    }
    w->begun = 1;
    w->fp = fopen(w->path, "wb");
    if (!w->fp) return ea_err(EA_ERR_IO, "%s: cannot create: %s", w->path, strerror(errno));
    w->fbuf = ea_malloc(EA__GGW_BUF);
    if (!w->fbuf) return ea_err(EA_ERR_NOMEM, "gguf writer: out of memory");
    setvbuf(w->fp, w->fbuf, _IOFBF, EA__GGW_BUF);
    uint8_t hdr[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    for (int i = 0; i < 8; i++) hdr[8 + i] = (uint8_t)((uint64_t)w->n >> (8 * i));
    for (int i = 0; i < 8; i++) hdr[16 + i] = (uint8_t)(w->n_kv >> (8 * i));
    EA_TRY(ea__ggw_fwrite(w, hdr, 24));
    EA_TRY(ea__ggw_fwrite(w, w->kv, w->kv_len));
    uint64_t pos = 24 + (uint64_t)w->kv_len;
    EA_TRY(ea__ggw_zeros(w, ea__ggw_align(pos, w->align) - pos));
    ea_free(w->kv); /* the metadata is on disk; drop the (possibly MB-sized) copy */
    w->kv = NULL;
    w->kv_len = w->kv_cap = 0;
    w->cur = 0;
    w->cur_done = 0;
    return EA_OK;
}

/* Close tensor `cur` (pad it) and move to the next. */
static ea_status ea__ggw_next(ea_gguf_writer *w) {
    const ea__ggw_tensor *t = &w->t[w->cur];
    EA_TRY(ea__ggw_zeros(w, ea__ggw_align(t->nbytes, w->align) - t->nbytes));
    w->cur++;
    w->cur_done = 0;
    return EA_OK;
}

ea_status ea_gguf_writer_write(ea_gguf_writer *w, const void *data, size_t n) {
    if (!w->begun) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: write before begin");
    const uint8_t *p = data;
    while (n > 0) {
        while (w->cur < w->n && w->cur_done == w->t[w->cur].nbytes) EA_TRY(ea__ggw_next(w));
        if (w->cur >= w->n) return ea_err(EA_ERR_RANGE, "%s: %zu bytes written past the last tensor", w->path, n);
        const ea__ggw_tensor *t = &w->t[w->cur];
        uint64_t room = t->nbytes - w->cur_done;
        size_t k = n < room ? n : (size_t)room;
        EA_TRY(ea__ggw_fwrite(w, p, k));
        w->cur_done += k;
        p += k;
        n -= k;
    }
    return EA_OK;
}

ea_status ea_gguf_writer_finish(ea_gguf_writer *w) {
    if (!w->begun) return ea_err(EA_ERR_INVALID_ARG, "gguf writer: finish before begin");
    while (w->cur < w->n && w->cur_done == w->t[w->cur].nbytes) EA_TRY(ea__ggw_next(w));
    if (w->cur < w->n)
        return ea_err(EA_ERR_RANGE, "%s: tensor '%s' has %llu of %llu bytes written", w->path, w->t[w->cur].name,
                      (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].nbytes);
    int bad = ferror(w->fp);
    int rc = fclose(w->fp);
    w->fp = NULL;
    if (bad || rc) return ea_err(EA_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    return EA_OK;
}
