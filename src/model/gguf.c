/*
 * gguf.c — parse and validate a GGUF file held in memory. Format and checks:
 * see gguf.h.
 *
 * The parse is one forward pass with a cursor; every read first checks the
 * bytes left, so a truncated or lying file ends in an error naming the field
 * and its file offset, never in a read past the buffer. Lengths from the file
 * are compared with the bytes left before anything is allocated for them, so
 * allocation is bounded by a small multiple of the file size.
 *
 * Invariants once ea_gguf_parse returns EA_OK: every tensor has a supported
 * dtype, 1 <= n_dims <= 4, offset % alignment == 0,
 * data_off + offset + nbytes <= size, tensors do not overlap, keys and names
 * are unique, every kv's value lies inside the buffer. Integers are read byte
 * by byte (little-endian), so the reader does not depend on host byte order
 * or alignment.
 */
#include "model/gguf.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

static const struct {
    uint32_t id;
    const char *name;
} ea__ggml_names[] = {
    {0, "F32"},      {1, "F16"},      {2, "Q4_0"},    {3, "Q4_1"},     {6, "Q5_0"},     {7, "Q5_1"},
    {8, "Q8_0"},     {9, "Q8_1"},     {10, "Q2_K"},   {11, "Q3_K"},    {12, "Q4_K"},    {13, "Q5_K"},
    {14, "Q6_K"},    {15, "Q8_K"},    {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
    {20, "IQ4_NL"},  {21, "IQ3_S"},   {22, "IQ2_S"},  {23, "IQ4_XS"},  {24, "I8"},      {25, "I16"},
    {26, "I32"},     {27, "I64"},     {28, "F64"},    {29, "IQ1_M"},   {30, "BF16"},    {34, "TQ1_0"},
    {35, "TQ2_0"},   {39, "MXFP4"},
};

const char *ea_ggml_type_name(uint32_t t) {
    for (size_t i = 0; i < sizeof ea__ggml_names / sizeof ea__ggml_names[0]; i++)
        if (ea__ggml_names[i].id == t) return ea__ggml_names[i].name;
    return "?";
}

static const char *const ea__gguf_type_names[EA_GGUF_N_TYPES] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
/* Bytes of a scalar value; strings and arrays are variable (0 here). */
static const uint8_t ea__gguf_type_size[EA_GGUF_N_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *ea_gguf_type_name(ea_gguf_type t) {
    return (unsigned)t < EA_GGUF_N_TYPES ? ea__gguf_type_names[t] : "?";
}

static uint64_t ea__rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

typedef struct {
    const uint8_t *p;
    size_t size, pos;
    const char *what;
} ea__cur;

static ea_status ea__need(ea__cur *c, uint64_t n, const char *field, const char *ctx) {
    if (n > c->size - c->pos)
        return ea_err(EA_ERR_FORMAT, "%s: %s%s%s at offset %zu needs %llu bytes but the file ends at %zu", c->what,
                      ctx ? ctx : "", ctx ? ": " : "", field, c->pos, (unsigned long long)n, c->size);
    return EA_OK;
}

static ea_status ea__u32(ea__cur *c, uint32_t *v, const char *field, const char *ctx) {
    EA_TRY(ea__need(c, 4, field, ctx));
    *v = (uint32_t)ea__rd_le(c->p + c->pos, 4);
    c->pos += 4;
    return EA_OK;
}

static ea_status ea__u64(ea__cur *c, uint64_t *v, const char *field, const char *ctx) {
    EA_TRY(ea__need(c, 8, field, ctx));
    *v = ea__rd_le(c->p + c->pos, 8);
    c->pos += 8;
    return EA_OK;
}

/* A string: u64 length, then bytes. OUT: offset of the bytes and the length. */
static ea_status ea__str(ea__cur *c, uint64_t *off, uint64_t *len, const char *field, const char *ctx) {
    size_t at = c->pos;
    *off = *len = 0;
    EA_TRY(ea__u64(c, len, field, ctx));
    if (*len > c->size - c->pos)
        return ea_err(EA_ERR_FORMAT, "%s: %s%s%s length %llu at offset %zu is past the end of the file (%zu bytes)",
                      c->what, ctx ? ctx : "", ctx ? ": " : "", field, (unsigned long long)*len, at, c->size);
    *off = c->pos;
    c->pos += (size_t)*len;
    return EA_OK;
}

/* A key or tensor name at the cursor: a GGUF string of 1..max bytes with no NUL,
 * copied to a new NUL-terminated string (OUT: *name). `field` names it in errors
 * ("key", "tensor name"), with the offset where it starts (OUT: *at). */
static ea_status ea__name(ea__cur *c, const char *field, int max, uint64_t *at, char **name) {
    uint64_t off, len;
    *at = c->pos;
    EA_TRY(ea__str(c, &off, &len, field, NULL));
    if (len == 0 || len > (uint64_t)max)
        return ea_err(EA_ERR_FORMAT, "%s: %s at offset %llu has length %llu (1..%d allowed)", c->what, field,
                      (unsigned long long)*at, (unsigned long long)len, max);
    if (memchr(c->p + off, 0, (size_t)len))
        return ea_err(EA_ERR_FORMAT, "%s: %s at offset %llu contains a NUL byte", c->what, field,
                      (unsigned long long)*at);
    *name = ea_strndup((const char *)c->p + off, (size_t)len);
    if (!*name) return ea_err(EA_ERR_NOMEM, "%s: no memory", c->what);
    return EA_OK;
}

static ea_status ea__kv(ea__cur *c, ea_gguf *g, ea_gguf_kv *kv) {
    EA_TRY(ea__name(c, "key", EA_GGUF_MAX_KEY, &kv->key_off, &kv->key));
    char k[96]; /* "key '<name>'" for messages, cut if long */
    snprintf(k, sizeof k, "key '%.80s'", kv->key);
    uint32_t t;
    EA_TRY(ea__u32(c, &t, "value type", k));
    if (t >= EA_GGUF_N_TYPES)
        return ea_err(EA_ERR_FORMAT, "%s: %s: unknown value type %u at offset %zu", c->what, k, t, c->pos - 4);
    kv->type = (ea_gguf_type)t;
    kv->n = 1;
    if (t == EA_GGUF_STRING) {
        EA_TRY(ea__str(c, &kv->off, &kv->str_len, "string value", k));
        kv->str = ea_strndup((const char *)c->p + kv->off, (size_t)kv->str_len);
        if (!kv->str) return ea_err(EA_ERR_NOMEM, "%s: no memory", c->what);
        return EA_OK;
    }
    if (t != EA_GGUF_ARRAY) {
        kv->off = c->pos;
        EA_TRY(ea__need(c, ea__gguf_type_size[t], "value", k));
        c->pos += ea__gguf_type_size[t];
        return EA_OK;
    }
    uint32_t et;
    EA_TRY(ea__u32(c, &et, "array element type", k));
    if (et >= EA_GGUF_N_TYPES)
        return ea_err(EA_ERR_FORMAT, "%s: %s: unknown array element type %u at offset %zu", c->what, k, et,
                      c->pos - 4);
    if (et == EA_GGUF_ARRAY)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: %s: nested arrays are not supported (offset %zu)", c->what, k,
                      c->pos - 4);
    kv->arr_type = (ea_gguf_type)et;
    size_t at = c->pos;
    EA_TRY(ea__u64(c, &kv->n, "array length", k));
    uint64_t min_each = et == EA_GGUF_STRING ? 8 : ea__gguf_type_size[et];
    if (kv->n > (c->size - c->pos) / min_each)
        return ea_err(EA_ERR_FORMAT, "%s: %s: array length %llu at offset %zu is past the end of the file", c->what,
                      k, (unsigned long long)kv->n, at);
    kv->off = c->pos;
    if (et != EA_GGUF_STRING) {
        c->pos += (size_t)(kv->n * min_each);
        return EA_OK;
    }
    kv->str_offs = ea_malloc((size_t)(kv->n ? kv->n : 1) * sizeof *kv->str_offs);
    if (!kv->str_offs) return ea_err(EA_ERR_NOMEM, "%s: %s: no memory for %llu strings", c->what, k,
                                     (unsigned long long)kv->n);
    for (uint64_t i = 0; i < kv->n; i++) {
        uint64_t so, sl;
        EA_TRY(ea__str(c, &so, &sl, "array string", k));
        kv->str_offs[i] = so - 8; /* points at the length; the bytes follow */
    }
    (void)g;
    return EA_OK;
}

static int ea__ggml_dtype(uint32_t t, ea_dtype *dt) {
    switch (t) {
    case EA_GGML_F32: *dt = EA_F32; return 1;
    case EA_GGML_F16: *dt = EA_F16; return 1;
    case EA_GGML_BF16: *dt = EA_BF16; return 1;
    case EA_GGML_Q8_0: *dt = EA_Q8_0; return 1;
    default: return 0;
    }
}

static ea_status ea__tinfo(ea__cur *c, ea_gguf_tinfo *ti) {
    EA_TRY(ea__name(c, "tensor name", EA_GGUF_MAX_NAME, &ti->info_off, &ti->name));
    const char *nm = ti->name;
    char ctx[EA_GGUF_MAX_NAME + 16];
    snprintf(ctx, sizeof ctx, "tensor '%s'", nm);
    uint32_t nd;
    EA_TRY(ea__u32(c, &nd, "n_dims", ctx));
    if (nd < 1 || nd > EA_MAX_DIMS)
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': n_dims %u at offset %zu (1..%d allowed)", c->what, nm, nd,
                      c->pos - 4, EA_MAX_DIMS);
    ti->n_dims = (int)nd;
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t ne;
        EA_TRY(ea__u64(c, &ne, "ne", ctx));
        if (ne < 1 || ne > (uint64_t)INT64_MAX)
            return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': ne[%u] = %llu at offset %zu", c->what, nm, d,
                          (unsigned long long)ne, c->pos - 8);
        if (nelem > (uint64_t)INT64_MAX / ne)
            return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': element count overflows", c->what, nm);
        nelem *= ne;
        ti->ne[d] = (int64_t)ne;
    }
    EA_TRY(ea__u32(c, &ti->ggml_type, "type", ctx));
    if (!ea__ggml_dtype(ti->ggml_type, &ti->dtype)) {
        const char *tn = ea_ggml_type_name(ti->ggml_type);
        if (strcmp(tn, "?") == 0)
            return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': unknown ggml type %u at offset %zu", c->what, nm,
                          ti->ggml_type, c->pos - 4);
        return ea_err(EA_ERR_UNSUPPORTED, "%s: tensor '%s': type %s (%u) is not supported (F32, F16, BF16, Q8_0 are)",
                      c->what, nm, tn, ti->ggml_type);
    }
    const ea_dtype_traits *tr = &ea_dtypes[ti->dtype];
    if ((uint64_t)ti->ne[0] % (uint64_t)tr->block)
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': ne[0] = %lld is not a multiple of the %s block (%d)", c->what,
                      nm, (long long)ti->ne[0], tr->name, tr->block);
    uint64_t blocks = nelem / (uint64_t)tr->block;
    if (blocks > UINT64_MAX / (uint64_t)tr->block_bytes)
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->what, nm);
    ti->nbytes = blocks * (uint64_t)tr->block_bytes;
    EA_TRY(ea__u64(c, &ti->offset, "offset", ctx));
    return EA_OK;
}

static const ea_gguf_tinfo *ea__sort_t;
static int ea__cmp_off(const void *a, const void *b) {
    const ea_gguf_tinfo *x = &ea__sort_t[*(const int *)a], *y = &ea__sort_t[*(const int *)b];
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return 0;
}

static ea_status ea__check_tensors(ea_gguf *g) {
    uint64_t dsize = g->size - g->data_off;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ea_gguf_tinfo *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                          g->path, t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->offset > dsize || t->nbytes > dsize - t->offset)
            return ea_err(EA_ERR_FORMAT,
                          "%s: tensor '%s': data [%llu, +%llu) at file offset %llu is past the end of the file "
                          "(%zu bytes)",
                          g->path, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                          (unsigned long long)(g->data_off + t->offset), g->size);
    }
    if (g->n_tensors == 0) {
        g->gap_bytes = dsize;
        return EA_OK;
    }
    int *ord = ea_malloc((size_t)g->n_tensors * sizeof *ord);
    if (!ord) return ea_err(EA_ERR_NOMEM, "%s: no memory", g->path);
    for (uint64_t i = 0; i < g->n_tensors; i++) ord[i] = (int)i;
    /* qsort in C11 has no context argument; the parse runs on one thread. */
    ea__sort_t = g->tensors;
    qsort(ord, (size_t)g->n_tensors, sizeof *ord, ea__cmp_off);
    ea__sort_t = NULL;
    ea_status s = EA_OK;
    uint64_t covered = 0;
    for (uint64_t k = 1; k < g->n_tensors; k++) {
        const ea_gguf_tinfo *a = &g->tensors[ord[k - 1]], *b = &g->tensors[ord[k]];
        if (b->offset < a->offset + a->nbytes) {
            s = ea_err(EA_ERR_FORMAT, "%s: tensor '%s' [%llu, +%llu) overlaps tensor '%s' [%llu, +%llu)", g->path,
                       b->name, (unsigned long long)b->offset, (unsigned long long)b->nbytes, a->name,
                       (unsigned long long)a->offset, (unsigned long long)a->nbytes);
            break;
        }
    }
    for (uint64_t k = 0; k < g->n_tensors; k++) covered += g->tensors[k].nbytes;
    ea_free(ord);
    g->gap_bytes = s == EA_OK ? dsize - covered : 0;
    return s;
}

ea_status ea_gguf_parse(const uint8_t *data, size_t size, const char *what, ea_gguf *g) {
    memset(g, 0, sizeof *g);
    g->path = ea_strdup(what);
    if (!g->path) return ea_err(EA_ERR_NOMEM, "%s: no memory", what);
    g->base = data;
    g->size = size;
    g->alignment = 32;
    ea__cur c = {data, size, 0, g->path};
    ea_status s = EA_OK;
    if (size < 4 || memcmp(data, "GGUF", 4) != 0) {
        s = ea_err(EA_ERR_FORMAT, "%s: bad magic at offset 0 (not a GGUF file)", what);
        goto fail;
    }
    c.pos = 4;
    if ((s = ea__u32(&c, &g->version, "version", NULL)) != EA_OK) goto fail;
    if (g->version != 2 && g->version != 3) {
        s = ea_err(g->version == 1 ? EA_ERR_UNSUPPORTED : EA_ERR_FORMAT,
                   "%s: version %u at offset 4 is not supported (2 and 3 are%s)", what, g->version,
                   g->version > 0xffff ? "; a big-endian file?" : "");
        goto fail;
    }
    /* g->n_kv / g->n_tensors count initialised entries (what deinit frees); the
     * counts from the file stay in locals until the arrays exist. */
    uint64_t n_kv, n_t;
    if ((s = ea__u64(&c, &n_t, "tensor count", NULL)) != EA_OK) goto fail;
    if ((s = ea__u64(&c, &n_kv, "kv count", NULL)) != EA_OK) goto fail;
    if (n_t > EA_GGUF_MAX_TENSORS || n_t > (size - c.pos) / 32) {
        s = ea_err(EA_ERR_FORMAT, "%s: tensor count %llu at offset 8 is absurd for a %zu-byte file", what,
                   (unsigned long long)n_t, size);
        goto fail;
    }
    if (n_kv > EA_GGUF_MAX_KV || n_kv > (size - c.pos) / 13) {
        s = ea_err(EA_ERR_FORMAT, "%s: kv count %llu at offset 16 is absurd for a %zu-byte file", what,
                   (unsigned long long)n_kv, size);
        goto fail;
    }
    g->kv = ea_calloc((size_t)(n_kv ? n_kv : 1), sizeof *g->kv);
    g->tensors = ea_calloc((size_t)(n_t ? n_t : 1), sizeof *g->tensors);
    if (!g->kv || !g->tensors) {
        s = ea_err(EA_ERR_NOMEM, "%s: no memory", what);
        goto fail;
    }
    if ((s = ea__name_map_init(&g->kv_names, (size_t)n_kv)) != EA_OK) goto fail;
    if ((s = ea__name_map_init(&g->t_names, (size_t)n_t)) != EA_OK) goto fail;
    for (uint64_t i = 0; i < n_kv; i++) {
        ea_gguf_kv *kv = &g->kv[i];
        g->n_kv++;
        if ((s = ea__kv(&c, g, kv)) != EA_OK) goto fail;
        if (ea__name_map_put(&g->kv_names, kv->key, (int)i, NULL) != 0) {
            s = ea_err(EA_ERR_FORMAT, "%s: key '%s' at offset %llu appears twice", what, kv->key,
                       (unsigned long long)kv->key_off);
            goto fail;
        }
    }
    int ai = ea_gguf_find_kv(g, "general.alignment");
    if (ai >= 0) {
        int64_t a;
        if ((s = ea_gguf_get_i64(g, "general.alignment", &a)) != EA_OK) goto fail;
        if (a <= 0 || a > (int64_t)EA_GGUF_MAX_ALIGN || (a & (a - 1)) != 0) {
            s = ea_err(EA_ERR_FORMAT, "%s: key 'general.alignment' at offset %llu: %lld is not a power of two (1..%u)",
                       what, (unsigned long long)g->kv[ai].key_off, (long long)a, EA_GGUF_MAX_ALIGN);
            goto fail;
        }
        g->alignment = (uint64_t)a;
    }
    for (uint64_t i = 0; i < n_t; i++) {
        ea_gguf_tinfo *t = &g->tensors[i];
        g->n_tensors++;
        if ((s = ea__tinfo(&c, t)) != EA_OK) goto fail;
        if (ea__name_map_put(&g->t_names, t->name, (int)i, NULL) != 0) {
            s = ea_err(EA_ERR_FORMAT, "%s: tensor '%s' at offset %llu appears twice", what, t->name,
                       (unsigned long long)t->info_off);
            goto fail;
        }
    }
    uint64_t d = ((uint64_t)c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (d > size) {
        if (n_t > 0) {
            s = ea_err(EA_ERR_FORMAT, "%s: data section at offset %llu (after alignment) is past the end of the file "
                       "(%zu bytes)", what, (unsigned long long)d, size);
            goto fail;
        }
        d = size;
    }
    g->data_off = d;
    if ((s = ea__check_tensors(g)) != EA_OK) goto fail;
    return EA_OK;
fail:
    ea_gguf_deinit(g);
    return s;
}

void ea_gguf_deinit(ea_gguf *g) {
    if (!g) return;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        ea_free(g->kv[i].key);
        ea_free(g->kv[i].str);
        ea_free(g->kv[i].str_offs);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) ea_free(g->tensors[i].name);
    ea_free(g->kv);
    ea_free(g->tensors);
    ea__name_map_deinit(&g->kv_names);
    ea__name_map_deinit(&g->t_names);
    ea_free(g->path);
    ea_mmap_close(&g->map);
    memset(g, 0, sizeof *g);
}

int ea_gguf_file_has_magic(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char m[4] = {0};
    size_t got = fread(m, 1, 4, f);
    fclose(f);
    return got == 4 && memcmp(m, "GGUF", 4) == 0;
}

ea_status ea_gguf_open(const char *path, ea_gguf **out) {
    *out = NULL;
    ea_gguf *g = ea_calloc(1, sizeof *g);
    if (!g) return ea_err(EA_ERR_NOMEM, "%s: no memory", path);
    ea_mmap m;
    ea_status s = ea_mmap_open(path, &m);
    if (s == EA_OK) s = ea_gguf_parse(m.data, m.size, path, g);
    if (s != EA_OK) {
        ea_mmap_close(&m);
        ea_free(g);
        return s;
    }
    g->map = m;
    *out = g;
    return EA_OK;
}

void ea_gguf_close(ea_gguf *g) {
    if (!g) return;
    ea_gguf_deinit(g);
    ea_free(g);
}

/* ---- key/value getters ---- */

int ea_gguf_find_kv(const ea_gguf *g, const char *key) { return ea__name_map_get(&g->kv_names, key); }

static ea_status ea__lookup(const ea_gguf *g, const char *key, const ea_gguf_kv **kv) {
    int i = ea_gguf_find_kv(g, key);
    if (i < 0) return ea_err(EA_ERR_NOT_FOUND, "%s: key '%s' is missing", g->path, key);
    *kv = &g->kv[i];
    return EA_OK;
}

/* A scalar of numeric type t at p, as integer (ok=1) or double. */
static int ea__num(ea_gguf_type t, const uint8_t *p, int64_t *iv, uint64_t *uv, double *dv, int *is_unsigned) {
    *is_unsigned = 0;
    if ((unsigned)t >= EA_GGUF_N_TYPES || ea__gguf_type_size[t] == 0) return 0; /* string, array */
    uint64_t raw = ea__rd_le(p, ea__gguf_type_size[t]);
    switch (t) {
    case EA_GGUF_U8: case EA_GGUF_U16: case EA_GGUF_U32: case EA_GGUF_U64: case EA_GGUF_BOOL:
        *uv = raw;
        *is_unsigned = 1;
        *dv = (double)raw;
        return 1;
    case EA_GGUF_I8: *iv = (int8_t)raw; break;
    case EA_GGUF_I16: *iv = (int16_t)raw; break;
    case EA_GGUF_I32: *iv = (int32_t)raw; break;
    case EA_GGUF_I64: *iv = (int64_t)raw; break;
    case EA_GGUF_F32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        *dv = f;
        return 2;
    }
    case EA_GGUF_F64: {
        double f;
        memcpy(&f, &raw, 8);
        *dv = f;
        return 2;
    }
    default: return 0;
    }
    *dv = (double)*iv;
    return 1;
}

static ea_status ea__int_of(const ea_gguf *g, const char *key, ea_gguf_type t, const uint8_t *p, int64_t *lo,
                            uint64_t *hi, int *neg) {
    *lo = 0;
    *hi = 0;
    *neg = 0;
    int64_t iv = 0;
    uint64_t uv = 0;
    double dv;
    int is_u;
    if (ea__num(t, p, &iv, &uv, &dv, &is_u) != 1)
        return ea_err(EA_ERR_FORMAT, "%s: key '%s' is %s, not an integer", g->path, key, ea_gguf_type_name(t));
    *neg = !is_u && iv < 0;
    *lo = iv;
    *hi = is_u ? uv : (iv >= 0 ? (uint64_t)iv : 0);
    return EA_OK;
}

ea_status ea_gguf_get_u64(const ea_gguf *g, const char *key, uint64_t *v) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__lookup(g, key, &kv));
    int64_t lo;
    int neg;
    EA_TRY(ea__int_of(g, key, kv->type, g->base + kv->off, &lo, v, &neg));
    if (neg) return ea_err(EA_ERR_RANGE, "%s: key '%s' = %lld is negative", g->path, key, (long long)lo);
    return EA_OK;
}

ea_status ea_gguf_get_i64(const ea_gguf *g, const char *key, int64_t *v) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__lookup(g, key, &kv));
    int64_t lo;
    uint64_t hi;
    int neg;
    EA_TRY(ea__int_of(g, key, kv->type, g->base + kv->off, &lo, &hi, &neg));
    if (neg) {
        *v = lo;
        return EA_OK;
    }
    if (hi > (uint64_t)INT64_MAX)
        return ea_err(EA_ERR_RANGE, "%s: key '%s' = %llu is out of range", g->path, key, (unsigned long long)hi);
    *v = (int64_t)hi;
    return EA_OK;
}

ea_status ea_gguf_get_u32(const ea_gguf *g, const char *key, uint32_t *v) {
    uint64_t x;
    EA_TRY(ea_gguf_get_u64(g, key, &x));
    if (x > UINT32_MAX)
        return ea_err(EA_ERR_RANGE, "%s: key '%s' = %llu does not fit in u32", g->path, key, (unsigned long long)x);
    *v = (uint32_t)x;
    return EA_OK;
}

ea_status ea_gguf_get_i32(const ea_gguf *g, const char *key, int32_t *v) {
    int64_t x = 0;
    EA_TRY(ea_gguf_get_i64(g, key, &x));
    if (x < INT32_MIN || x > INT32_MAX)
        return ea_err(EA_ERR_RANGE, "%s: key '%s' = %lld does not fit in i32", g->path, key, (long long)x);
    *v = (int32_t)x;
    return EA_OK;
}

ea_status ea_gguf_get_f32(const ea_gguf *g, const char *key, float *v) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__lookup(g, key, &kv));
    int64_t iv;
    uint64_t uv;
    double dv;
    int is_u;
    if (kv->type == EA_GGUF_STRING || kv->type == EA_GGUF_ARRAY ||
        !ea__num(kv->type, g->base + kv->off, &iv, &uv, &dv, &is_u))
        return ea_err(EA_ERR_FORMAT, "%s: key '%s' is %s, not a number", g->path, key, ea_gguf_type_name(kv->type));
    *v = (float)dv;
    return EA_OK;
}

ea_status ea_gguf_get_bool(const ea_gguf *g, const char *key, int *v) {
    int64_t x = 0;
    EA_TRY(ea_gguf_get_i64(g, key, &x));
    *v = x != 0;
    return EA_OK;
}

ea_status ea_gguf_get_str(const ea_gguf *g, const char *key, const char **s) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__lookup(g, key, &kv));
    if (kv->type != EA_GGUF_STRING)
        return ea_err(EA_ERR_FORMAT, "%s: key '%s' is %s, not a string", g->path, key, ea_gguf_type_name(kv->type));
    *s = kv->str;
    return EA_OK;
}

ea_status ea_gguf_get_arr(const ea_gguf *g, const char *key, ea_gguf_type *elem, uint64_t *n) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__lookup(g, key, &kv));
    if (kv->type != EA_GGUF_ARRAY)
        return ea_err(EA_ERR_FORMAT, "%s: key '%s' is %s, not an array", g->path, key, ea_gguf_type_name(kv->type));
    if (elem) *elem = kv->arr_type;
    if (n) *n = kv->n;
    return EA_OK;
}

static ea_status ea__arr_elem(const ea_gguf *g, int kvi, uint64_t i, const ea_gguf_kv **kv) {
    if (kvi < 0 || (uint64_t)kvi >= g->n_kv) return ea_err(EA_ERR_INVALID_ARG, "%s: no kv #%d", g->path, kvi);
    *kv = &g->kv[kvi];
    if ((*kv)->type != EA_GGUF_ARRAY)
        return ea_err(EA_ERR_FORMAT, "%s: key '%s' is not an array", g->path, (*kv)->key);
    if (i >= (*kv)->n)
        return ea_err(EA_ERR_RANGE, "%s: key '%s': index %llu past the array length %llu", g->path, (*kv)->key,
                      (unsigned long long)i, (unsigned long long)(*kv)->n);
    return EA_OK;
}

ea_status ea_gguf_arr_i64(const ea_gguf *g, int kvi, uint64_t i, int64_t *v) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__arr_elem(g, kvi, i, &kv));
    int64_t lo;
    uint64_t hi;
    int neg;
    ea_gguf_type t = kv->arr_type;
    if (t == EA_GGUF_STRING) return ea_err(EA_ERR_FORMAT, "%s: key '%s' is an array of strings", g->path, kv->key);
    EA_TRY(ea__int_of(g, kv->key, t, g->base + kv->off + i * ea__gguf_type_size[t], &lo, &hi, &neg));
    if (!neg && hi > (uint64_t)INT64_MAX)
        return ea_err(EA_ERR_RANGE, "%s: key '%s'[%llu] is out of range", g->path, kv->key, (unsigned long long)i);
    *v = neg ? lo : (int64_t)hi;
    return EA_OK;
}

ea_status ea_gguf_arr_f32(const ea_gguf *g, int kvi, uint64_t i, float *v) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__arr_elem(g, kvi, i, &kv));
    ea_gguf_type t = kv->arr_type;
    int64_t iv;
    uint64_t uv;
    double dv;
    int is_u;
    if (t == EA_GGUF_STRING || !ea__num(t, g->base + kv->off + i * ea__gguf_type_size[t], &iv, &uv, &dv, &is_u))
        return ea_err(EA_ERR_FORMAT, "%s: key '%s' is an array of %s, not numbers", g->path, kv->key,
                      ea_gguf_type_name(t));
    *v = (float)dv;
    return EA_OK;
}

ea_status ea_gguf_arr_str(const ea_gguf *g, int kvi, uint64_t i, const char **s, size_t *len) {
    const ea_gguf_kv *kv = NULL;
    EA_TRY(ea__arr_elem(g, kvi, i, &kv));
    if (kv->arr_type != EA_GGUF_STRING)
        return ea_err(EA_ERR_FORMAT, "%s: key '%s' is an array of %s, not strings", g->path, kv->key,
                      ea_gguf_type_name(kv->arr_type));
    const uint8_t *p = g->base + kv->str_offs[i];
    *len = (size_t)ea__rd_le(p, 8);
    *s = (const char *)p + 8;
    return EA_OK;
}

/* ---- tensors ---- */

int ea_gguf_find_tensor(const ea_gguf *g, const char *name) { return ea__name_map_get(&g->t_names, name); }

void ea_gguf_tensor(const ea_gguf *g, int i, ea_tensor *t) {
    EA_ASSERT(i >= 0 && (uint64_t)i < g->n_tensors);
    const ea_gguf_tinfo *ti = &g->tensors[i];
    memset(t, 0, sizeof *t);
    t->name = ti->name;
    t->dtype = ti->dtype;
    t->n_dims = ti->n_dims;
    for (int d = 0; d < ti->n_dims; d++) t->shape[d] = ti->ne[ti->n_dims - 1 - d];
    t->data = g->base + g->data_off + ti->offset;
    t->nbytes = (size_t)ti->nbytes;
}
