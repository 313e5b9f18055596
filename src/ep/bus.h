/*
 * bus.h — the control bus's MPI transport (DESIGN.md section 4; the batch
 * format is docs/protocol.md "Control bus"): the function the scheduler's
 * ea_sched_bus calls each step. Rank 0 broadcasts its batch; every other rank
 * receives it into a new buffer. `eaas serve` and `eaas generate` both use it.
 *
 *   ea_dist_bus b = {.d = dist};
 *   ea_sched_bus bus = {&b, ea_dist_rank(dist), ea_dist_bus_bcast, ea_dist_bus_agree_min};
 *   ...
 *   ea_dist_bus_deinit(&b);
 */
#ifndef EA_BUS_H
#define EA_BUS_H

#include <stddef.h>
#include <stdint.h>

#include "ep/dist.h"

typedef struct {
    ea_dist *d;      /* borrows */
    ea_sbuf msg;     /* owns: the last batch */
    size_t *lens;    /* owns: (size) gather lengths */
} ea_dist_bus;

/* Rank 0: send buf[0..len). Others: receive into a new ea_malloc'd *buf of *len bytes (the caller frees it).
 * Fails, naming the rank, when the collective's deadline passes. */
ea_status ea_dist_bus_bcast(void *ctx, uint8_t **buf, size_t *len);
/* *v = its minimum over ranks (every rank calls it at the same point of the schedule). */
ea_status ea_dist_bus_agree_min(void *ctx, int *v);
/* Every rank's bytes to every rank: *all = (u64 length, bytes) per rank, in rank order. */
ea_status ea_dist_bus_gather(void *ctx, const void *mine, size_t len, ea_sbuf *all);
void ea_dist_bus_deinit(ea_dist_bus *b);

#endif
