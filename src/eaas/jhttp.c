/*
 * jhttp.c — HTTP/JSON endpoint on libmicrohttpd (see jhttp.h).
 */
#include "eaas/jhttp.h"

#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/sbuf.h"

struct ea_jhttp {
    struct MHD_Daemon *d;
    size_t max_body;
    ea_jhttp_handler h;
    void *ctx;
    int port;
};

typedef struct {
    ea_sbuf body;
    int too_big;
} conn_state;

void ea_jhttp_reply_set(ea_jhttp_reply *out, int status, const char *body, const char *content_type) {
    ea_free(out->body);
    out->status = status;
    out->body = ea_strdup(body ? body : "");
    out->content_type = content_type;
}

void ea_jhttp_reply_error(ea_jhttp_reply *out, int status, const char *type, const char *msg) {
    json_t *j = json_pack("{s:{s:s, s:s, s:i}}", "error", "message", msg, "type", type, "code", status);
    char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
    ea_jhttp_reply_set(out, status, txt ? txt : "{\"error\":{\"message\":\"out of memory\"}}", NULL);
    free(txt);
    json_decref(j);
}

const char *ea_jhttp_arg(const ea_jhttp_req *r, const char *name) {
    return MHD_lookup_connection_value((struct MHD_Connection *)r->conn, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, ea_jhttp_reply *rep) {
    size_t n = strlen(rep->body);
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, rep->body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", rep->content_type ? rep->content_type : "application/json");
    enum MHD_Result r = MHD_queue_response(c, (unsigned)rep->status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    ea_jhttp *h = cls;
    conn_state *cs = *con_cls;
    if (!cs) { /* first call: headers only */
        if (!(cs = ea_calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_size) {
        if (cs->body.len + *upload_size > h->max_body) cs->too_big = 1;
        else ea_sbuf_append(&cs->body, upload, *upload_size);
        if (cs->body.failed) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    ea_jhttp_reply rep = {0};
    if (cs->too_big) {
        char msg[96];
        snprintf(msg, sizeof msg, "request body over %zu bytes", h->max_body);
        ea_jhttp_reply_error(&rep, 413, "invalid_request_error", msg);
    } else {
        ea_jhttp_req r = {.method = method, .path = url, .body = cs->body.len ? cs->body.data : "",
                          .body_len = cs->body.len, .conn = c};
        h->h(h->ctx, &r, &rep);
        if (rep.status == 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "no route %s %.100s", method, url);
            ea_jhttp_reply_error(&rep, 404, "not_found_error", msg);
        }
    }
    enum MHD_Result res = rep.body ? send_reply(c, &rep) : MHD_NO;
    ea_free(rep.body);
    return res;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn_state *cs = *con_cls;
    if (!cs) return;
    ea_sbuf_deinit(&cs->body);
    ea_free(cs);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    EA_LOGD("jhttp: %s", msg);
}

ea_status ea_jhttp_start(const char *host, int port, size_t max_body, ea_jhttp_handler handler, void *ctx,
                         ea_jhttp **out) {
    *out = NULL;
    ea_jhttp *h = ea_calloc(1, sizeof *h);
    if (!h) return ea_err(EA_ERR_NOMEM, "http");
    *h = (ea_jhttp){.max_body = max_body ? max_body : 1 << 20, .h = handler, .ctx = ctx};
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host && host[0] ? host : "127.0.0.1", ps, &hints, &ai);
    if (gai != 0 || !ai) {
        ea_free(h);
        return ea_err(EA_ERR_INVALID_ARG, "--host %s: %s", host, gai_strerror(gai));
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        ea_free(h);
        return ea_err(EA_ERR_IO, "cannot listen on %s:%d (port in use or address not available)", host, port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : port;
    *out = h;
    return EA_OK;
}

int ea_jhttp_port(const ea_jhttp *h) { return h->port; }

void ea_jhttp_stop(ea_jhttp *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d);
    ea_free(h);
}
