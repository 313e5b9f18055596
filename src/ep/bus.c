/*
 * bus.c — see bus.h.
 */
#include "ep/bus.h"

#include <string.h>

#include "base/alloc.h"

#define EA__BUS_MAX ((size_t)1 << 30)

ea_status ea_dist_bus_bcast(void *ctx, uint8_t **buf, size_t *len) {
    ea_dist_bus *b = ctx;
    if (ea_dist_rank(b->d) == 0) {
        ea_sbuf_reset(&b->msg);
        ea_sbuf_append(&b->msg, *buf, *len);
        if (b->msg.failed) return ea_err(EA_ERR_NOMEM, "control bus");
        return ea_dist_bcast_msg(b->d, &b->msg, 0, EA__BUS_MAX, "control bus");
    }
    EA_TRY(ea_dist_bcast_msg(b->d, &b->msg, 0, EA__BUS_MAX, "control bus"));
    *buf = ea_malloc(b->msg.len ? b->msg.len : 1);
    if (!*buf) return ea_err(EA_ERR_NOMEM, "control bus");
    memcpy(*buf, b->msg.data, b->msg.len);
    *len = b->msg.len;
    return EA_OK;
}

ea_status ea_dist_bus_agree_min(void *ctx, int *v) {
    ea_dist_bus *b = ctx;
    int64_t neg = -(int64_t)*v;
    EA_TRY(ea_dist_allreduce_max_i64(b->d, &neg, 1, "control bus: prefix hit"));
    *v = (int)-neg;
    return EA_OK;
}

ea_status ea_dist_bus_gather(void *ctx, const void *mine, size_t len, ea_sbuf *all) {
    ea_dist_bus *b = ctx;
    int N = ea_dist_size(b->d);
    if (!b->lens && !(b->lens = ea_malloc(sizeof(size_t) * 2 * (size_t)N))) return ea_err(EA_ERR_NOMEM, "control bus");
    size_t *eight = b->lens + N;
    uint64_t *got = ea_malloc(sizeof(uint64_t) * (size_t)N), me = len;
    if (!got) return ea_err(EA_ERR_NOMEM, "control bus");
    for (int r = 0; r < N; r++) eight[r] = sizeof(uint64_t);
    ea_status s = ea_dist_allgatherv(b->d, &me, got, eight, "control bus: events back");
    size_t total = 0;
    for (int r = 0; s == EA_OK && r < N; r++) {
        if (got[r] > EA__BUS_MAX) s = ea_err(EA_ERR_RANGE, "control bus: rank %d sends %llu bytes back", r, (unsigned long long)got[r]);
        total += b->lens[r] = (size_t)got[r];
    }
    uint8_t *data = s == EA_OK ? ea_malloc(total ? total : 1) : NULL;
    if (s == EA_OK && !data) s = ea_err(EA_ERR_NOMEM, "control bus");
    if (s == EA_OK) s = ea_dist_allgatherv(b->d, mine, data, b->lens, "control bus: events back");
    if (s == EA_OK) {
        ea_sbuf_reset(all);
        size_t at = 0;
        for (int r = 0; r < N; at += b->lens[r], r++) {
            ea_sbuf_append(all, &got[r], sizeof(uint64_t));
            ea_sbuf_append(all, data + at, b->lens[r]);
        }
        if (all->failed) s = ea_err(EA_ERR_NOMEM, "control bus");
    }
    ea_free(data);
    ea_free(got);
    return s;
}

void ea_dist_bus_deinit(ea_dist_bus *b) {
    ea_sbuf_deinit(&b->msg);
    ea_free(b->lens);
}
