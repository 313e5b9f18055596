/*
 * alloc.c — counted allocation, failure injection, and the arena. See alloc.h.
 */
#include "base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_ullong ea__n_alloc;
static atomic_long ea__fail_after = -1;

static int ea__should_fail(void) {
    long n = atomic_load(&ea__fail_after);
    if (n < 0) return 0;
    if (n == 0) return 1;
    atomic_fetch_sub(&ea__fail_after, 1);
    return 0;
}

uint64_t ea_alloc_count(void) { return atomic_load(&ea__n_alloc); }
void ea_alloc_fail_after(long n) { atomic_store(&ea__fail_after, n); }

void *ea_malloc(size_t size) {
    if (ea__should_fail()) return NULL;
    atomic_fetch_add(&ea__n_alloc, 1);
    return malloc(size ? size : 1);
}

void *ea_calloc(size_t n, size_t size) {
    if (ea__should_fail()) return NULL;
    atomic_fetch_add(&ea__n_alloc, 1);
    return calloc(n ? n : 1, size ? size : 1);
}

void *ea_realloc(void *p, size_t size) {
    if (ea__should_fail()) return NULL;
    atomic_fetch_add(&ea__n_alloc, 1);
    return realloc(p, size ? size : 1);
}

void ea_free(void *p) { free(p); }

void *ea_aligned_alloc(size_t align, size_t size) {
    if (ea__should_fail()) return NULL;
    atomic_fetch_add(&ea__n_alloc, 1);
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) != 0)
        return NULL;
    return p;
}

void ea_aligned_free(void *p) { free(p); }

char *ea_strndup(const char *s, size_t n) {
    char *d = ea_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *ea_strdup(const char *s) { return ea_strndup(s, strlen(s)); }

int ea_mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
int ea_add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

int ea_arena_init(ea_arena *a, size_t cap) {
    memset(a, 0, sizeof *a);
    a->base = ea_aligned_alloc(64, cap);
    if (!a->base) return -1;
    a->cap = cap;
    return 0;
}

void ea_arena_deinit(ea_arena *a) {
    ea_aligned_free(a->base);
    memset(a, 0, sizeof *a);
}

void *ea_arena_alloc(ea_arena *a, size_t size, size_t align) {
    size_t at = (a->used + align - 1) & ~(align - 1);
    if (at > a->cap || size > a->cap - at) return NULL;
    a->used = at + size;
    if (a->used > a->high) a->high = a->used;
    return a->base + at;
}

void ea_arena_reset(ea_arena *a) { a->used = 0; }

size_t ea_grow_cap(size_t cap, size_t need, size_t first) {
    size_t c = cap ? cap : first;
    if (c == 0) c = 1;
    while (c < need) {
        if (c > ((size_t)-1) / 2) return 0;
        c *= 2;
    }
    return c;
}

int ea_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first) {
    if (need <= *cap) return 0;
    size_t nc = ea_grow_cap(*cap, need, first), bytes;
    if (!nc || !ea_mul_ok(nc, elem, &bytes)) return -1;
    void *old;
    memcpy(&old, pp, sizeof old); /* pp is a T **: read and write it as bytes */
    void *p = ea_realloc(old, bytes);
    if (!p) return -1;
    memcpy(pp, &p, sizeof p);
    *cap = nc;
    return 0;
}
