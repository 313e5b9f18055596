/*
 * serve_ext.c — see serve_ext.h. Every call here is one the EPLB wrapper
 * allows from any thread.
 */
#include "cli/serve_ext.h"

#include <string.h>

#include "base/alloc.h"
#include "eplb/eplb_backend.h"
#include "ep/ep.h"
#include "ep/ep_engine.h"

static int ea__ext_handle(void *vctx, const char *method, const char *url, int *status, const char **ctype,
                          ea_sbuf *out) {
    ea_serve_ext_ctx *x = vctx;
    if (!strcmp(url, "/ep/stats")) {
        ea_ep_stats st;
        char *json = NULL;
        if (!x->par || !ea_ep_engine_stats(x->par, &st) || ea_ep_stats_json(&st, &json) != EA_OK) {
            *status = 404;
            ea_sbuf_puts(out, "{\"error\":{\"message\":\"expert parallelism is not on (start under mpirun with "
                              "--parallel expert)\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
            return 1;
        }
        ea_sbuf_puts(out, json);
        ea_free(json);
        return 1;
    }
    if (strncmp(url, "/eplb/", 6) != 0) return 0;
    int post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
    const char *what = url + 6;
    int known = !strcmp(what, "record/start") || !strcmp(what, "record/stop") || !strcmp(what, "record/dump") ||
                !strcmp(what, "rebalance") || !strcmp(what, "stats");
    if (!known) return 0;
    if (!x->eplb) {
        *status = 404;
        ea_sbuf_puts(out, "{\"error\":{\"message\":\"EPLB is not enabled (start the server with --eplb)\","
                          "\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
        return 1;
    }
    int want_get = !strcmp(what, "record/dump") || !strcmp(what, "stats");
    if ((want_get && !get) || (!want_get && !post)) {
        *status = 405;
        ea_sbuf_printf(out, "{\"error\":{\"message\":\"method %s is not allowed for %s\",\"type\":"
                            "\"invalid_request_error\",\"param\":null,\"code\":null}}", method, url);
        return 1;
    }
    if (!strcmp(what, "record/start")) {
        ea_eplb_record_start(x->eplb);
        ea_sbuf_puts(out, "{\"status\":\"recording\"}");
    } else if (!strcmp(what, "record/stop")) {
        ea_eplb_record_stop(x->eplb);
        ea_sbuf_puts(out, "{\"status\":\"stopped\"}");
    } else if (!strcmp(what, "record/dump")) {
        char *text = NULL;
        size_t len = 0;
        if (ea_eplb_record_dump(x->eplb, &text, &len) != EA_OK) {
            *status = 500;
            ea_sbuf_puts(out, "{\"error\":{\"message\":\"dump failed\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
            return 1;
        }
        *ctype = "text/plain; charset=utf-8";
        ea_sbuf_append(out, text, len);
        ea_free(text);
    } else if (!strcmp(what, "rebalance")) {
        ea_eplb_request_rebalance(x->eplb);
        *status = 202;
        ea_sbuf_puts(out, "{\"status\":\"rebalance requested\"}");
    } else {
        ea_eplb_backend_stats st;
        ea_eplb_backend_get_stats(x->eplb, &st);
        ea_sbuf_printf(out,
                       "{\"balancedness\":%.6f,\"rebalances_total\":%llu,\"failures\":%llu,\"layer_switches\":%llu,"
                       "\"steps\":%llu,\"plan_in_progress\":%d,\"recording\":%d,\"layers\":%d,\"logical\":%d,"
                       "\"physical\":%d,\"ranks\":%d,\"last_plan_before\":%.6f,\"last_plan_after\":%.6f}",
                       st.balancedness, (unsigned long long)st.rebalances_total, (unsigned long long)st.failures,
                       (unsigned long long)st.layer_switches, (unsigned long long)st.steps, st.plan_in_progress,
                       st.recording, st.n_layers, st.n_logical, st.n_physical, st.n_ranks, st.last_plan_before,
                       st.last_plan_after);
    }
    return 1;
}

static void ea__ext_metrics(void *vctx, ea_sbuf *out) {
    ea_serve_ext_ctx *x = vctx;
    ea_ep_stats es;
    char *prom = NULL;
    if (x->par && ea_ep_engine_stats(x->par, &es) && ea_ep_stats_prometheus(&es, &prom) == EA_OK) {
        ea_sbuf_puts(out, prom);
        ea_free(prom);
    }
    if (!x->eplb) return;
    ea_eplb_backend_stats st;
    ea_eplb_backend_get_stats(x->eplb, &st);
    ea_sbuf_printf(out,
                   "# HELP eaas:eplb_balancedness Mean over MoE layers of mean/max rank load on the window.\n"
                   "# TYPE eaas:eplb_balancedness gauge\neaas:eplb_balancedness %.6f\n"
                   "# HELP eaas:eplb_rebalances_total Placements fully switched.\n"
                   "# TYPE eaas:eplb_rebalances_total counter\neaas:eplb_rebalances_total %llu\n"
                   "# HELP eaas:eplb_failures_total Rebalances that failed (old placement kept).\n"
                   "# TYPE eaas:eplb_failures_total counter\neaas:eplb_failures_total %llu\n",
                   st.balancedness, (unsigned long long)st.rebalances_total, (unsigned long long)st.failures);
}

void ea_serve_ext_init(ea_serve_ext_ctx *ctx, ea_http_ext *ext) {
    ext->ctx = ctx;
    ext->handle = ea__ext_handle;
    ext->metrics = ea__ext_metrics;
}
