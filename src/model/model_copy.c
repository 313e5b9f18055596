/*
 * model_copy.c — loading weights into memory: each loaded tensor is copied
 * out of the file mapping into huge-page arenas (and, where a kernel wants
 * another layout, into its packed copy), the mapping's pages are dropped,
 * and the model's fingerprint is taken over the bytes copied. Split from
 * model.c, which opens the files and maps names (model_load.h holds what
 * both share).
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "model/model_load.h"

/* A loaded weight is copied out of the file mapping into anonymous memory
 * that the kernel backs with 2 MiB transparent huge pages where it can, and
 * the tensor is pointed at the copy. Streaming weights through 4 KiB pages of
 * the page cache costs a TLB miss per page: on an AMD EPYC (Zen 3) decode ran
 * 11-20% slower from the mapping than from huge pages (docs/performance.md).
 * The mapping stays, so a view taken before the copy still reads the same
 * bytes; the copied range's pages are unmapped from this process again
 * (ea__zap), so resident memory counts each weight once. */

/* Unmap the whole pages inside [p, p+n) from this process. The mapping is
 * private and never written, so this loses nothing: a later read faults the
 * same bytes back from the page cache. */
static void ea__zap(const void *p, size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1), e = ((uintptr_t)p + n) & ~(uintptr_t)(pg - 1);
    if (e > a) (void)madvise((void *)a, (size_t)(e - a), MADV_DONTNEED);
}

#define EA__HUGE ((size_t)2 << 20)

/* n bytes of anonymous memory, 2 MiB-aligned, advised for huge pages: their
 * start, or NULL; the mapping to unmap is *map, *map_len bytes. */
static uint8_t *ea__huge_map(size_t n, void **map, size_t *map_len) {
    size_t len = n + EA__HUGE;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *map = p;
    *map_len = len;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + EA__HUGE - 1) & ~(uintptr_t)(EA__HUGE - 1));
    (void)madvise(a, n, MADV_HUGEPAGE);
    return a;
}

/* ea__huge_map's memory, owned by f. */
static uint8_t *ea__arena(ea__files *f, size_t n) {
    if (ea_grow(&f->arenas, &f->cap_arenas, (size_t)f->n_arenas + 1, sizeof *f->arenas, 16)) return NULL;
    void *p;
    size_t len;
    uint8_t *a = ea__huge_map(n, &p, &len);
    if (a) f->arenas[f->n_arenas++] = (struct ea__arena){p, len};
    return a;
}

/* 1 if t's bytes are the loader's own (a rewritten copy), not the file's. */
static int ea__is_owned(const ea_model *m, const ea_tensor *t) {
    const ea__owned *o = m->owned;
    for (int i = 0; o && i < o->n; i++)
        if ((const uint8_t *)t->data >= (const uint8_t *)o->bufs[i] &&
            (const uint8_t *)t->data < (const uint8_t *)o->bufs[i] + o->lens[i])
            return 1;
    return 0;
}

/* Rows of the packed copy the kernels want of t (kernels/matmul.h), or 0.
 * The token embedding is read by rows (and, when tied, by the LM head too),
 * so it keeps the plain copy; so do vectors (norms, biases). */
static int ea__pack_rows(const ea_model *m, const ea_tensor *t, const int rows_of[EA_N_DTYPES]) {
    return t != &m->tok_embd && t->n_dims >= 2 ? rows_of[t->dtype] : 0;
}

/* Bytes of t's packed copy if the kernels want one, else 0. */
static size_t ea__packed_bytes(const ea_model *m, const ea_tensor *t, const int rows_of[EA_N_DTYPES]) {
    int rows = ea__pack_rows(m, t, rows_of);
    return rows ? ea_k_packed_bytes(t, rows) : 0;
}

/* Weights are hashed in chunks of this size, each chunk's XXH64 seeding the
 * next: the copy hashes a chunk while it sits in L2, then copies it. */
#define EA__HASH_CHUNK ((size_t)256 << 10)

/* Hash of n bytes at p as ea_tensor.hash (never 0); copies them to dst too if dst is not NULL. */
static uint64_t ea__hash_copy(uint8_t *dst, const uint8_t *p, size_t n) {
    uint64_t h = (uint64_t)n;
    for (size_t o = 0; o < n; o += EA__HASH_CHUNK) {
        size_t c = n - o < EA__HASH_CHUNK ? n - o : EA__HASH_CHUNK;
        h = ea_xxh64(p + o, c, h);
        if (dst) memcpy(dst + o, p + o, c);
    }
    return h ? h : 1;
}

/* Copy the n_t tensors of ts (file-backed, not yet copied) into one arena,
 * taking each one's hash on the way. A matrix the kernels want packed gets
 * its packed copy instead (about the same size): t->packed points at it,
 * t->data stays on the mapping (whose pages are dropped as well, and fault
 * back in if something reads them). */
static ea_status ea__copy_out(ea_model *m, ea_tensor *const *ts, int n_t) {
    int rows_of[EA_N_DTYPES];
    for (int d = 0; d < EA_N_DTYPES; d++) rows_of[d] = ea_k_pack_rows((ea_dtype)d);
    size_t total = 0;
    for (int i = 0; i < n_t; i++) {
        size_t pb = ea__packed_bytes(m, ts[i], rows_of);
        total += ((pb ? pb : ts[i]->nbytes) + 63) & ~(size_t)63;
    }
    if (!total) return EA_OK;
    uint8_t *a = ea__arena(m->files, total);
    if (!a) return ea_err(EA_ERR_NOMEM, "%s: no memory for %zu bytes of weights", m->path, total);
    for (int i = 0; i < n_t; i++) {
        ea_tensor *t = ts[i];
        size_t pb = ea__packed_bytes(m, t, rows_of);
        if (pb) {
            if (!t->hash) t->hash = ea__hash_copy(NULL, t->data, t->nbytes);
            t->packed_rows = ea__pack_rows(m, t, rows_of);
            ea_k_pack(t, t->packed_rows, a);
            t->packed = a;
        } else if (!t->hash) {
            t->hash = ea__hash_copy(a, t->data, t->nbytes);
        } else {
            memcpy(a, t->data, t->nbytes);
        }
        ea__zap(t->data, t->nbytes);
        if (!pb) t->data = a;
        a += ((pb ? pb : t->nbytes) + 63) & ~(size_t)63;
    }
    return EA_OK;
}

/* A read fault may map more than the faulting page: fault-around, and whole
 * large folios of the page cache (ext4/xfs with large folios map a folio of up
 * to several MiB at once). So after loading the chosen experts, the pages
 * lying wholly inside experts never chosen are unmapped again; resident memory
 * is then the chosen experts plus at most one shared page at each edge. */
static void ea__zap_unloaded(ea_model *m) {
    ea__files *f = m->files;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const ea_layer_weights *L = &m->layers[l];
        if (!L->experts) continue;
        for (int e = 0; e < m->cfg.n_experts; e++) {
            if (f->loaded[(size_t)l * (size_t)m->cfg.n_experts + (size_t)e]) continue;
            ea__zap(L->experts[e].gate.data, L->experts[e].gate.nbytes);
            ea__zap(L->experts[e].up.data, L->experts[e].up.nbytes);
            ea__zap(L->experts[e].down.data, L->experts[e].down.nbytes);
        }
    }
}

typedef struct {
    const ea_model *m;
    ea_tensor **ts;
    int n;
} ea__dense_list;

static void ea__list_dense(void *ctx, const ea_tensor *t, int layer, int expert) {
    (void)layer;
    ea__dense_list *d = ctx;
    /* the model is the caller's (not const): foreach only promises not to change it itself */
    if (expert < 0 && !ea__is_owned(d->m, t)) {
        if (d->ts) d->ts[d->n] = (ea_tensor *)t;
        d->n++;
    }
}

ea_status ea_model_load_dense(ea_model *m) {
    ea__files *f = m->files;
    if (f->dense_copied) return EA_OK;
    ea__dense_list d = {m, NULL, 0};
    ea_model_foreach(m, ea__list_dense, &d);
    d.ts = ea_malloc((size_t)(d.n ? d.n : 1) * sizeof *d.ts);
    if (!d.ts) return ea_err(EA_ERR_NOMEM, "%s: no memory", m->path);
    d.n = 0;
    ea_model_foreach(m, ea__list_dense, &d);
    const void *embd = m->tok_embd.data;
    ea_status s = ea__copy_out(m, d.ts, d.n);
    ea_free(d.ts);
    if (s != EA_OK) return s;
    if (m->lm_head.data == embd) m->lm_head.data = m->tok_embd.data; /* tied: the same copy */
    f->dense_copied = 1;
    ea__zap_unloaded(m);
    return EA_OK;
}

ea_status ea_model_load_experts(ea_model *m, int layer, const uint8_t *mask) {
    if (layer < 0 || layer >= m->cfg.n_layers)
        return ea_err(EA_ERR_INVALID_ARG, "%s: layer %d out of range (0..%d)", m->path, layer, m->cfg.n_layers - 1);
    ea_layer_weights *L = &m->layers[layer];
    if (!L->experts) return EA_OK; /* dense layer */
    ea__files *f = m->files;
    int E = m->cfg.n_experts, n = 0;
    ea_tensor **ts = ea_malloc((size_t)E * 3 * sizeof *ts);
    if (!ts) return ea_err(EA_ERR_NOMEM, "%s: no memory", m->path);
    for (int e = 0; e < E; e++) {
        uint8_t *ld = &f->loaded[(size_t)layer * (size_t)E + (size_t)e];
        if ((mask && !mask[e]) || *ld) continue;
        *ld = 1;
        ea_tensor *g[3] = {&L->experts[e].gate, &L->experts[e].up, &L->experts[e].down};
        for (int i = 0; i < 3; i++)
            if (g[i]->data && !ea__is_owned(m, g[i])) ts[n++] = g[i];
    }
    ea_status s = ea__copy_out(m, ts, n);
    ea_free(ts);
    if (s != EA_OK) return s;
    ea__zap_unloaded(m);
    return EA_OK;
}

ea_status ea_model_expert_copy(ea_model *m, int layer, int expert, ea_expert_copy *out) {
    memset(out, 0, sizeof *out);
    if (layer < 0 || layer >= m->cfg.n_layers || !m->layers[layer].experts || expert < 0 || expert >= m->cfg.n_experts)
        return ea_err(EA_ERR_RANGE, "%s: layer %d has no routed expert %d", m->path, layer, expert);
    int rows_of[EA_N_DTYPES];
    for (int d = 0; d < EA_N_DTYPES; d++) rows_of[d] = ea_k_pack_rows((ea_dtype)d);
    const ea_ffn_weights *src = &m->layers[layer].experts[expert];
    const ea_tensor *from[3] = {&src->gate, &src->up, &src->down};
    ea_tensor *to[3] = {&out->w.gate, &out->w.up, &out->w.down};
    size_t total = 0;
    for (int i = 0; i < 3; i++) {
        size_t pb = ea__packed_bytes(m, from[i], rows_of);
        total += ((pb ? pb : from[i]->nbytes) + 63) & ~(size_t)63;
    }
    uint8_t *a = ea__huge_map(total, &out->mem, &out->mem_len);
    if (!a) return ea_err(EA_ERR_NOMEM, "%s: no memory for a copy of expert %d of layer %d", m->path, expert, layer);
    const ea__files *f = m->files;
    int loaded = f->loaded[(size_t)layer * (size_t)m->cfg.n_experts + (size_t)expert];
    for (int i = 0; i < 3; i++) {
        *to[i] = *from[i];
        size_t pb = ea__packed_bytes(m, from[i], rows_of);
        if (pb) { /* the copy reads the plain bytes, as a load does */
            to[i]->packed_rows = ea__pack_rows(m, from[i], rows_of);
            ea_k_pack(from[i], to[i]->packed_rows, a);
            to[i]->packed = a;
        } else {
            memcpy(a, from[i]->data, from[i]->nbytes);
            to[i]->data = a;
        }
        if (!loaded) ea__zap(from[i]->data, from[i]->nbytes);
        a += ((pb ? pb : from[i]->nbytes) + 63) & ~(size_t)63;
    }
    return EA_OK;
}

void ea_expert_copy_free(ea_expert_copy *c) {
    if (c->mem) munmap(c->mem, c->mem_len);
    memset(c, 0, sizeof *c);
}

typedef struct {
    ea_model *m;
    uint64_t h;
} ea__fp;

static void ea__fp_tensor(void *ctx, const ea_tensor *ct, int layer, int expert) {
    ea__fp *c = ctx;
    /* the model is the caller's (not const): foreach only promises not to change it itself */
    ea_tensor *t = (ea_tensor *)ct;
    if (!t->hash) { /* not loaded here: hash it from where it lies */
        t->hash = ea__hash_copy(NULL, t->data, t->nbytes);
        if (!ea__is_owned(c->m, t)) ea__zap(t->data, t->nbytes); /* file pages: drop them again */
    }
    int64_t rec[8] = {(int64_t)t->hash, layer, expert, t->dtype, t->n_dims};
    for (int i = 0; i < t->n_dims && i < 3; i++) rec[5 + i] = t->shape[i];
    c->h = ea_xxh64(rec, sizeof rec, c->h);
    if (t->name) c->h = ea_xxh64(t->name, strlen(t->name), c->h);
}

uint64_t ea_model_fingerprint(ea_model *m) {
    ea__fp c = {m, ea_xxh64(&m->cfg, sizeof m->cfg, (uint64_t)m->format)};
    ea_model_foreach(m, ea__fp_tensor, &c);
    return c.h;
}

void ea_model_foreach(const ea_model *m, void (*fn)(void *ctx, const ea_tensor *t, int layer, int expert), void *ctx) {
#define V_(t, l, e) \
    do { if ((t).data) fn(ctx, &(t), l, e); } while (0)
    V_(m->tok_embd, -1, -1);
    V_(m->out_norm, -1, -1);
    if (m->lm_head.data != m->tok_embd.data) V_(m->lm_head, -1, -1);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const ea_layer_weights *L = &m->layers[l];
        const ea_tensor *ts[] = {&L->attn_norm, &L->ffn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk,
                                 &L->bv, &L->q_norm, &L->k_norm, &L->wq_a, &L->q_a_norm, &L->wq_b, &L->wkv_a,
                                 &L->kv_a_norm, &L->wkv_b, &L->dense.gate, &L->dense.up, &L->dense.down,
                                 &L->router, &L->router_bias, &L->shared.gate, &L->shared.up, &L->shared.down,
                                 &L->shared_gate, &L->lin_qkv, &L->lin_z, &L->lin_b, &L->lin_a, &L->lin_conv,
                                 &L->lin_dt_bias, &L->lin_a_log, &L->lin_norm, &L->lin_out};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) V_(*ts[i], l, -1);
        if (L->experts)
            for (int e = 0; e < m->cfg.n_experts; e++) {
                V_(L->experts[e].gate, l, e);
                V_(L->experts[e].up, l, e);
                V_(L->experts[e].down, l, e);
            }
    }
#undef V_
}
