/*
 * name_map.c — see name_map.h. FNV-1a hash (base/util.h), linear probing.
 * Invariant: n <= cap/2 whenever cap > 0, so a probe always finds a hole.
 */
#include "model/name_map.h"

#include <string.h>

#include "base/alloc.h"
#include "base/util.h"

ea_status ea__name_map_init(ea__name_map *m, size_t n) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < 2 * n + 2) {
        if (cap > ((size_t)1 << 40)) return ea_err(EA_ERR_NOMEM, "name map: %zu names is too many", n);
        cap <<= 1;
    }
    m->keys = ea_calloc(cap, sizeof *m->keys);
    m->vals = ea_calloc(cap, sizeof *m->vals);
    if (!m->keys || !m->vals) {
        ea__name_map_deinit(m);
        return ea_err(EA_ERR_NOMEM, "name map: no memory for %zu names", n);
    }
    m->cap = cap;
    return EA_OK;
}

void ea__name_map_deinit(ea__name_map *m) {
    ea_free(m->keys);
    ea_free(m->vals);
    memset(m, 0, sizeof *m);
}

int ea__name_map_put(ea__name_map *m, const char *key, int val, int *old) {
    if (m->cap == 0 || m->n + 1 > m->cap / 2) return -1;
    size_t i = (size_t)ea_hash64(key, strlen(key), 0) & (m->cap - 1);
    while (m->keys[i]) {
        if (strcmp(m->keys[i], key) == 0) {
            if (old) *old = m->vals[i];
            return 1;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

int ea__name_map_get(const ea__name_map *m, const char *key) {
    if (m->cap == 0) return -1;
    size_t i = (size_t)ea_hash64(key, strlen(key), 0) & (m->cap - 1);
    while (m->keys[i]) {
        if (strcmp(m->keys[i], key) == 0) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}
