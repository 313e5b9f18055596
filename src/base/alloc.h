/*
 * alloc.h — every heap allocation of eaas goes through here.
 *
 * Why: (1) a test can count allocations around the decode loop and assert
 * there are none; (2) a test can make the Nth allocation fail and check that
 * the error path is clean (STYLE.md: failure injection); (3) aligned blocks
 * for SIMD come from one place.
 *
 * Counters are process-wide atomics; they are statistics, not state.
 *
 *   ea_malloc/ea_calloc/ea_realloc/ea_free      like libc, counted
 *   ea_aligned_alloc(align, size)               free with ea_aligned_free
 *   ea_alloc_count()                            allocations so far
 *   ea_alloc_fail_after(n)                      the (n+1)th allocation from now
 *                                               returns NULL; -1 turns it off
 *   ea_grow(&arr, &cap, need, sizeof *arr, N)   grow an array by doubling (the one rule)
 *
 * The arena (per-step scratch) hands out aligned pieces of one block sized at
 * load time; reset() makes it empty again in O(1). It never grows: running out
 * is a bug in the sizing, reported by returning NULL.
 */
#ifndef EA_ALLOC_H
#define EA_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *ea_malloc(size_t size);
void *ea_calloc(size_t n, size_t size);
void *ea_realloc(void *p, size_t size);
void ea_free(void *p);
void *ea_aligned_alloc(size_t align, size_t size);
void ea_aligned_free(void *p);
char *ea_strdup(const char *s);
char *ea_strndup(const char *s, size_t n);

uint64_t ea_alloc_count(void);
void ea_alloc_fail_after(long n);

/* Array growth, the one rule for every growable array: the capacity for `need`
 * elements of an array that has `cap` is `first` when cap is 0, else cap,
 * doubled until it is >= need (when need <= cap, cap). 0 if that overflows. */
size_t ea_grow_cap(size_t cap, size_t need, size_t first);
/* Make the ea_realloc'd array *(T **)pp, of *cap elements of elem bytes, hold at
 * least need elements (new capacity: ea_grow_cap). 0 ok (also when it already
 * did), -1 out of memory or size overflow: the array and *cap are unchanged.
 *   if (ea_grow(&v->items, &v->cap, v->n + 1, sizeof *v->items, 64)) return no memory;
 *   v->items[v->n++] = x; */
int ea_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first);

/* Checked size arithmetic for lengths from outside: returns 0 on overflow. */
int ea_mul_ok(size_t a, size_t b, size_t *out);
int ea_add_ok(size_t a, size_t b, size_t *out);

typedef struct {
    uint8_t *base; /* owns: aligned block of `cap` bytes */
    size_t cap;
    size_t used;
    size_t high; /* high-water mark, for sizing reports */
} ea_arena;

int ea_arena_init(ea_arena *a, size_t cap); /* 0 ok, -1 no memory */
void ea_arena_deinit(ea_arena *a);
void *ea_arena_alloc(ea_arena *a, size_t size, size_t align); /* NULL if it does not fit */
void ea_arena_reset(ea_arena *a);

#endif
