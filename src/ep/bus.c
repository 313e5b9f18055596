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

void ea_dist_bus_deinit(ea_dist_bus *b) { ea_sbuf_deinit(&b->msg); }
