/*
 * serve_ext.c — see serve_ext.h. Statistics come from the MoE backend chain
 * (moe.h: each backend adds its own); the EPLB control calls go to the EPLB
 * wrapper, and every call here is one it allows from any thread.
 */
#include "cli/serve_ext.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "eplb/eplb_backend.h"
#include "serve/openai.h"

/* The chain's JSON statistics member `name` ("ep", "eplb"), or NULL when no backend in it has that name.
 * "ep" gains the scheduler's data-parallel assignment ("dp") when it is on. */
static int ea__chain_member(const ea_serve_ext_ctx *x, const char *name, ea_sbuf *out) {
    json_t *all = json_object();
    if (x->be && all) ea_moe_backend_stats(x->be, all, NULL);
    json_t *m = all ? json_object_get(all, name) : NULL;
    ea_sched_stats st;
    if (m && x->sched && !strcmp(name, "ep") && (ea_sched_get_stats(x->sched, &st), st.dp_ranks > 0)) {
        json_t *a = json_array();
        for (int r = 0; a && r < st.dp_ranks; r++) json_array_append_new(a, json_integer((json_int_t)st.dp_assigned[r]));
        json_object_set_new(m, "dp", json_pack("{s:i, s:o}", "ranks", st.dp_ranks, "assigned", a));
    }
    if (m) ea_sbuf_json(out, m);
    json_decref(all);
    return m != NULL;
}

/* An OpenAI error body (openai.h) with its status. */
static void ea__error(ea_sbuf *out, int *status, int code, const char *type, const char *what) {
    ea_oai_error e;
    ea_oai_fail(&e, code, type, NULL, NULL, "%s", what);
    *status = code;
    ea_oai_render_error(&e, out);
}

static void ea__not_on(ea_sbuf *out, int *status, const char *what) {
    ea__error(out, status, 404, "invalid_request_error", what);
}

static int ea__ext_handle(void *vctx, const char *method, const char *url, int *status, const char **ctype,
                          ea_sbuf *out) {
    ea_serve_ext_ctx *x = vctx;
    if (!strcmp(url, "/ep/stats")) {
        if (!ea__chain_member(x, "ep", out))
            ea__not_on(out, status, "expert parallelism is not on (start under mpirun with --parallel expert)");
        return 1;
    }
    if (strncmp(url, "/eplb/", 6) != 0) return 0;
    int post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
    const char *what = url + 6;
    int known = !strcmp(what, "record/start") || !strcmp(what, "record/stop") || !strcmp(what, "record/dump") ||
                !strcmp(what, "rebalance") || !strcmp(what, "stats");
    if (!known) return 0;
    if (!x->eplb) {
        ea__not_on(out, status, "EPLB is not enabled (start the server with --eplb)");
        return 1;
    }
    int want_get = !strcmp(what, "record/dump") || !strcmp(what, "stats");
    if ((want_get && !get) || (!want_get && !post)) {
        char msg[256];
        snprintf(msg, sizeof msg, "method %s is not allowed for %s", method, url);
        ea__error(out, status, 405, "invalid_request_error", msg);
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
            ea__error(out, status, 500, "server_error", "dump failed");
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
        ea__chain_member(x, "eplb", out);
    }
    return 1;
}

/* every backend of the chain adds its own lines (eaas:ep_*, eaas:eplb_*) */
static void ea__ext_metrics(void *vctx, ea_sbuf *out) {
    ea_serve_ext_ctx *x = vctx;
    if (x->be) ea_moe_backend_stats(x->be, NULL, out);
}

void ea_serve_ext_init(ea_serve_ext_ctx *ctx, ea_http_ext *ext) {
    ext->ctx = ctx;
    ext->handle = ea__ext_handle;
    ext->metrics = ea__ext_metrics;
}
