/*
 * name_map.h — a string -> int index for tensor names (module-internal, ea__).
 *
 * Model files hold up to ~10^5 tensors (sharded HF DeepSeek-V3); the weight
 * mapping looks each name up once, so a hash table keeps opening linear.
 * Keys are borrowed: they must outlive the map (the readers own them).
 * Open addressing, power-of-two capacity, load factor <= 1/2.
 */
#ifndef EA_NAME_MAP_H
#define EA_NAME_MAP_H

#include <stddef.h>

#include "base/status.h"

typedef struct {
    const char **keys; /* owns the array; borrows the strings */
    int *vals;         /* owns */
    size_t cap;        /* power of two, 0 when empty */
    size_t n;
} ea__name_map;

/* Make room for n keys. */
ea_status ea__name_map_init(ea__name_map *m, size_t n);
void ea__name_map_deinit(ea__name_map *m);
/* Insert key -> val. Returns 0 if inserted, 1 if the key was already there
 * (*old gets its value, nothing changes), -1 if the map is full (a bug). */
int ea__name_map_put(ea__name_map *m, const char *key, int val, int *old);
/* Value for key, or -1. */
int ea__name_map_get(const ea__name_map *m, const char *key);

#endif
