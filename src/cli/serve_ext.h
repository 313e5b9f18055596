/*
 * serve_ext.h — the server's extra endpoints and metrics beyond the OpenAI
 * API, plugged into the HTTP layer through ea_http_ext:
 *   POST /eplb/record/start   start (and clear) the expert-distribution recorder
 *   POST /eplb/record/stop    stop it; counts stay for a dump
 *   GET  /eplb/record/dump    the recorder's window, workload format (text/plain)
 *   POST /eplb/rebalance      rebalance at the next step (202)
 *   GET  /eplb/stats          EPLB statistics (JSON)
 *   metrics: eaas:eplb_balancedness, eaas:eplb_rebalances_total, eaas:eplb_failures_total
 *   GET  /ep/stats            this rank's expert-parallel statistics (JSON), with --parallel;
 *                             with --dp-attention also "dp": {"ranks", "assigned": requests per rank}
 *   metrics: eaas:ep_* (dispatch/combine calls and bytes, seconds in communication)
 * With EPLB off the /eplb/ paths answer 404 saying so; likewise /ep/stats.
 */
#ifndef EA_SERVE_EXT_H
#define EA_SERVE_EXT_H

#include "moe/moe.h"
#include "serve/http.h"
#include "serve/scheduler.h"

struct ea_eplb_backend;

typedef struct {
    ea_moe_backend *be;           /* borrows: the engine's backend chain (statistics) */
    struct ea_eplb_backend *eplb; /* borrows; NULL when off (the /eplb/ control calls) */
    ea_sched *sched;              /* borrows; NULL: no scheduler statistics in /ep/stats */
} ea_serve_ext_ctx;

void ea_serve_ext_init(ea_serve_ext_ctx *ctx, ea_http_ext *ext);

#endif
