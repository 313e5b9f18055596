/*
 * monitor_load.c — the clients' load summed per (layer, expert) and decayed
 * (see monitor_load.h).
 *
 * Invariants: e[0..n) are distinct pairs; slot[] has n_slot entries (a power
 * of two, 0 before the first pair), each 0 (empty) or 1 + an index into e[];
 * every pair of e[] is reachable from its hash by linear probing without
 * crossing an empty slot; n * 2 <= n_slot.
 */
#include "eaas/monitor_load.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct {
    int32_t layer, expert;
    double reported, decayed;
} pair_load;

struct ea_mon_loadsum {
    int max_pairs;
    pair_load *e; /* owns [n], capacity cap_e */
    size_t n, cap_e;
    uint32_t *slot; /* owns [n_slot] */
    size_t n_slot;
    uint64_t pairs_total, ignored;
};

ea_status ea_mon_loadsum_create(int max_pairs, ea_mon_loadsum **out) {
    EA_ASSERT(max_pairs > 0);
    ea_mon_loadsum *s = ea_calloc(1, sizeof *s);
    if (!s) return ea_err(EA_ERR_NOMEM, "monitor load");
    s->max_pairs = max_pairs;
    *out = s;
    return EA_OK;
}

void ea_mon_loadsum_destroy(ea_mon_loadsum *s) {
    if (!s) return;
    ea_free(s->e);
    ea_free(s->slot);
    ea_free(s);
}

static size_t hash(int32_t layer, int32_t expert) { /* splitmix64's finalizer */
    uint64_t x = (uint64_t)(uint32_t)layer << 32 | (uint32_t)expert;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (size_t)x;
}

/* The slot holding (layer, expert), or the empty slot where it would go. */
static size_t probe(const ea_mon_loadsum *s, int32_t layer, int32_t expert) {
    size_t mask = s->n_slot - 1, i = hash(layer, expert) & mask;
    while (s->slot[i]) {
        const pair_load *p = &s->e[s->slot[i] - 1];
        if (p->layer == layer && p->expert == expert) break;
        i = (i + 1) & mask;
    }
    return i;
}

/* slot[] of n_slot entries (a power of two > 2n) holding every pair of e[]. */
static ea_status rehash(ea_mon_loadsum *s, size_t n_slot) {
    uint32_t *slot = ea_calloc(n_slot, sizeof *slot);
    if (!slot) return ea_err(EA_ERR_NOMEM, "monitor load: %zu slots", n_slot);
    ea_free(s->slot);
    s->slot = slot;
    s->n_slot = n_slot;
    for (size_t k = 0; k < s->n; k++) s->slot[probe(s, s->e[k].layer, s->e[k].expert)] = (uint32_t)k + 1;
    return EA_OK;
}

/* The pair's entry, made if new and there is room; NULL when full or out of memory. */
static pair_load *find_or_add(ea_mon_loadsum *s, int32_t layer, int32_t expert) {
    if (s->n_slot) {
        size_t i = probe(s, layer, expert);
        if (s->slot[i]) return &s->e[s->slot[i] - 1];
    }
    if (s->n >= (size_t)s->max_pairs) return NULL;
    if ((s->n + 1) * 2 > s->n_slot && rehash(s, s->n_slot ? s->n_slot * 2 : 256) != EA_OK) return NULL;
    if (ea_grow(&s->e, &s->cap_e, s->n + 1, sizeof *s->e, 256)) return NULL;
    size_t i = probe(s, layer, expert);
    s->e[s->n] = (pair_load){.layer = layer, .expert = expert};
    s->slot[i] = (uint32_t)++s->n;
    return &s->e[s->n - 1];
}

int ea_mon_loadsum_add(ea_mon_loadsum *s, const ea_mon_load *l, int n) {
    int ignored = 0;
    for (int i = 0; i < n; i++) {
        EA_ASSERT(l[i].pairs > 0);
        s->pairs_total += (uint64_t)l[i].pairs;
        pair_load *p = find_or_add(s, l[i].layer, l[i].expert);
        if (p) p->reported += (double)l[i].pairs;
        else ignored++;
    }
    s->ignored += (uint64_t)ignored;
    return ignored;
}

static int load_cmp(const void *a, const void *b) {
    const ea_replicas_load *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->expert > y->expert) - (x->expert < y->expert);
}

ea_status ea_mon_loadsum_tick(ea_mon_loadsum *s, double keep, ea_replicas_load **out, int *n) {
    size_t m = 0;
    *out = NULL;
    *n = 0;
    for (size_t k = 0; k < s->n; k++) {
        pair_load p = s->e[k];
        p.decayed = keep * p.decayed + p.reported;
        p.reported = 0;
        if (p.decayed >= EA_MON_LOAD_FORGET) s->e[m++] = p;
    }
    s->n = m;
    if (s->n_slot) {
        memset(s->slot, 0, s->n_slot * sizeof *s->slot);
        for (size_t k = 0; k < s->n; k++) s->slot[probe(s, s->e[k].layer, s->e[k].expert)] = (uint32_t)k + 1;
    }
    if (m == 0) return EA_OK;
    ea_replicas_load *l = ea_malloc(m * sizeof *l);
    if (!l) return ea_err(EA_ERR_NOMEM, "monitor load: %zu pairs", m);
    for (size_t k = 0; k < m; k++) l[k] = (ea_replicas_load){s->e[k].layer, s->e[k].expert, s->e[k].decayed};
    qsort(l, m, sizeof *l, load_cmp);
    *out = l;
    *n = (int)m;
    return EA_OK;
}

void ea_mon_loadsum_get_stats(const ea_mon_loadsum *s, ea_mon_loadsum_stats *out) {
    out->pairs_total = s->pairs_total;
    out->triples_ignored = s->ignored;
    out->n_pairs = (int)s->n;
}
