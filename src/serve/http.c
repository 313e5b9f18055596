/*
 * http.c — libmicrohttpd server for the OpenAI API (see http.h).
 *
 * One MHD thread per connection, so a handler may block. This file routes
 * requests, answers the small endpoints and runs the server's life cycle; the
 * generation endpoints (choices, SSE streams, blocking answers, the client and
 * timeout checks while waiting) are in http_gen.c, and what both share is in
 * http_impl.h.
 *
 * Request body: collected in conn_ctx.body up to max_body_bytes; a declared
 * Content-Length above the limit is refused before reading it, a chunked body
 * that grows past it is dropped and refused when complete (413 either way).
 *
 * Shutdown: a generation request counts in `pending` from its submit until
 * MHD reports its response sent (on_completed), so the caller can wait, after
 * the scheduler has given every request its last event, until each of those
 * events reached its client: stopping MHD earlier cut responses off (an empty
 * reply, or a stream without its abort chunk, [DONE] and chunked terminator).
 * The listening socket stays open while draining, so /health answers.
 *
 * Idle timeout: MHD's connection timeout is the limit for a keep-alive
 * connection between requests. A generation request turns it off while it
 * runs (a long prefill may send nothing for longer; the request has its own
 * --request-timeout and dead-client check) and on_completed turns it back on.
 *
 * Ownership: conn_ctx belongs to one connection's request (freed in the
 * completed-callback); stream_ctx (http_gen.c) belongs to the response. ea_http
 * fields are written before MHD starts or, for `ready`, `sched`, `ops`,
 * `ctx_len`, published once by set_ready with a release store on `ready`.
 */
#include "serve/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "serve/http_impl.h"

typedef enum { R_NONE, R_COMPLETIONS, R_CHAT, R_MODELS, R_MODEL, R_TOKENIZE, R_DETOKENIZE, R_HEALTH, R_METRICS, R_VERSION } route;

#define MODEL_PREFIX "/v1/models/" /* GET /v1/models/{id}: the id is the rest of the path, '/' included */

/* ---- helpers -------------------------------------------------------------------- */

void ea__http_access_log(const char *method, const char *path, uint64_t id, int status, int ptok, int ctok,
                       double t0, const char *finish) {
    char ids[24] = "-";
    if (id) snprintf(ids, sizeof ids, "%llu", (unsigned long long)id);
    EA_LOGI("access id=%s %s %s status=%d prompt_tokens=%d completion_tokens=%d latency_ms=%.1f%s%s", ids, method,
            path, status, ptok, ctok, (ea_now_s() - t0) * 1e3, finish ? " finish=" : "", finish ? finish : "");
}

/* CORS (--allowed-origins): the request's Origin is echoed when listed ("*":
 * any origin gets "*"). Nothing when CORS is off or the origin is not listed:
 * the browser then refuses the response, which is the point. */
void ea__http_add_cors(const ea_http *h, struct MHD_Connection *c, struct MHD_Response *r) {
    if (!h->origins) return;
    if (strstr(h->origins, ",*,")) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        return;
    }
    const char *o = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    char key[512];
    if (!o || !o[0] || snprintf(key, sizeof key, ",%s,", o) >= (int)sizeof key || !strstr(h->origins, key)) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", o);
    MHD_add_response_header(r, "Vary", "Origin");
}

enum MHD_Result ea__http_send_buf(ea_http *h, struct MHD_Connection *c, int status, const char *ctype,
                                const char *data, size_t len, int retry_after) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    ea__http_add_cors(h, c, r);
    if (atomic_load(&h->draining) || status == 413) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    ea_metrics_http_status(h->metrics, status);
    return ret;
}

enum MHD_Result ea__http_send_json(ea_http *h, struct MHD_Connection *c, int status, ea_sbuf *b) {
    if (b->failed) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        return ea__http_send_buf(h, c, 500, "application/json", oom, sizeof oom - 1, 0);
    }
    return ea__http_send_buf(h, c, status, "application/json", b->data ? b->data : "", b->len, 0);
}

/* The error body; 503s say when to retry. */
enum MHD_Result ea__http_send_error(ea_http *h, struct MHD_Connection *c, const ea_oai_error *e) {
    ea_sbuf b = {0};
    ea_oai_render_error(e, &b);
    int retry = e->status == 503 ? 1 : 0;
    enum MHD_Result r = b.failed ? ea__http_send_json(h, c, 500, &b)
                                 : ea__http_send_buf(h, c, e->status, "application/json", b.data, b.len, retry);
    ea_sbuf_deinit(&b);
    return r;
}

/* A request refused before it reached the scheduler: answer and log it. */
enum MHD_Result ea__http_refuse(ea_http *h, struct MHD_Connection *c, const ea_oai_error *e, const char *method,
                              const char *path, double t0) {
    ea__http_access_log(method, path, 0, e->status, 0, 0, t0, NULL);
    return ea__http_send_error(h, c, e);
}

int ea__http_conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

/* 0 once the peer has closed its end (or the socket failed). */
int ea__http_client_alive(int fd) {
    if (fd < 0) return 1;
    char ch;
    ssize_t n = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return 1;
    if (n == 0) return 0;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

static route find_route(const char *url, const char *method, int *method_ok) {
    static const struct {
        const char *path, *method;
        route r;
    } table[] = {
        {"/v1/completions", "POST", R_COMPLETIONS}, {"/v1/chat/completions", "POST", R_CHAT},
        {"/v1/models", "GET", R_MODELS},            {"/tokenize", "POST", R_TOKENIZE},
        {"/detokenize", "POST", R_DETOKENIZE},      {"/health", "GET", R_HEALTH},
        {"/metrics", "GET", R_METRICS},             {"/version", "GET", R_VERSION},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(url, table[i].path) != 0) continue;
        *method_ok = strcmp(method, table[i].method) == 0 || (strcmp(method, "HEAD") == 0 && !strcmp(table[i].method, "GET"));
        return table[i].r;
    }
    if (strncmp(url, MODEL_PREFIX, strlen(MODEL_PREFIX)) == 0 && url[strlen(MODEL_PREFIX)]) {
        *method_ok = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
        return R_MODEL;
    }
    *method_ok = 0;
    return R_NONE;
}

static int auth_ok(ea_http *h, struct MHD_Connection *c) {
    if (!h->api_key) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncasecmp(a, "Bearer ", 7) != 0) return 0;
    a += 7;
    while (*a == ' ') a++;
    /* compare without an early exit on the first differing byte */
    size_t n = strlen(h->api_key), m = strlen(a);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)h->api_key[i] ^ (unsigned char)(i < m ? a[i] : 0);
    return diff == 0;
}

/* ---- other endpoints -------------------------------------------------------------- */

static enum MHD_Result handle_health(ea_http *h, struct MHD_Connection *c) {
    const char *why = NULL;
    char moe_why[256];
    ea_sched_stats st;
    if (!atomic_load_explicit(&h->ready, memory_order_acquire)) why = "loading";
    else {
        ea_sched_get_stats(h->sched, &st);
        if (st.failed) /* first: a lost rank is the reason, also while shutting down */
            why = st.failure[0] ? st.failure : "failed: the step loop stopped";
        else if (atomic_load(&h->draining))
            why = "draining";
        else if (st.running + st.waiting > 0 && h->o.stall_seconds > 0 &&
                 ea_now_s() - st.last_step_time > h->o.stall_seconds)
            why = "stalled: the step loop made no progress while requests wait";
        else {
            char r[200];
            ea_moe_health mh = ea_sched_moe_health(h->sched, r, sizeof r);
            if (mh != EA_MOE_OK) {
                snprintf(moe_why, sizeof moe_why, "%s: %s", mh == EA_MOE_DEGRADED ? "degraded" : "failed", r);
                why = moe_why;
            }
        }
    }
    ea_sbuf b = {0};
    json_t *o = json_pack("{s:s}", "status", why ? why : "ok");
    ea_sbuf_json(&b, o);
    json_decref(o);
    enum MHD_Result r = ea__http_send_json(h, c, why ? 503 : 200, &b);
    ea_sbuf_deinit(&b);
    return r;
}

static enum MHD_Result handle_metrics(ea_http *h, struct MHD_Connection *c) {
    ea_sbuf b = {0};
    ea_sched_stats st;
    int ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    if (ready) ea_sched_get_stats(h->sched, &st);
    ea_metrics_render(h->metrics, ready ? &st : NULL, &b);
    const ea_http_ext *ext = atomic_load_explicit(&h->ext, memory_order_acquire);
    if (ext && ext->metrics) ext->metrics(ext->ctx, &b);
    ea_metrics_label_all(&b, "model_name", h->model); /* on every eaas: series, like vLLM */
    enum MHD_Result r = b.failed ? ea__http_send_json(h, c, 500, &b)
                                 : ea__http_send_buf(h, c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, 0);
    ea_sbuf_deinit(&b);
    return r;
}

static enum MHD_Result dispatch(ea_http *h, struct MHD_Connection *c, conn_ctx *cc, const char *url,
                                const char *method) {
    ea_oai_error e;
    int method_ok;
    route rt = find_route(url, method, &method_ok);
    cc->is_gen = rt == R_COMPLETIONS || rt == R_CHAT;
    if (h->origins && strcmp(method, "OPTIONS") == 0 && rt != R_NONE) { /* a CORS preflight: no key is sent with it */
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        const char *rh = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", rh && rh[0] ? rh : "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        ea__http_add_cors(h, c, r);
        enum MHD_Result ret = MHD_queue_response(c, 204, r);
        MHD_destroy_response(r);
        ea_metrics_http_status(h->metrics, 204);
        ea__http_access_log(method, url, 0, 204, 0, 0, cc->t0, NULL);
        return ret;
    }
    const ea_http_ext *ext = atomic_load_explicit(&h->ext, memory_order_acquire);
    if (rt == R_NONE && ext && ext->handle) {
        if (!auth_ok(h, c)) {
            ea_oai_fail(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                        "Incorrect or missing API key (send 'Authorization: Bearer <key>').");
            return ea__http_refuse(h, c, &e, method, url, cc->t0);
        }
        ea_sbuf b = {0};
        int status = 200;
        const char *ctype = "application/json";
        if (ext->handle(ext->ctx, method, url, &status, &ctype, &b)) {
            ea__http_access_log(method, url, 0, status, 0, 0, cc->t0, NULL);
            enum MHD_Result r = b.failed ? ea__http_send_json(h, c, 500, &b) : ea__http_send_buf(h, c, status, ctype, b.data, b.len, 0);
            ea_sbuf_deinit(&b);
            return r;
        }
        ea_sbuf_deinit(&b);
    }
    if (rt == R_NONE) {
        ea_oai_fail(&e, 404, NULL, NULL, NULL, "no such endpoint: %s %s", method, url);
        return ea__http_refuse(h, c, &e, method, url, cc->t0);
    }
    if (!method_ok) {
        ea_oai_fail(&e, 405, NULL, NULL, NULL, "method %s is not allowed for %s", method, url);
        return ea__http_refuse(h, c, &e, method, url, cc->t0);
    }
    if (rt == R_HEALTH) return handle_health(h, c);
    if (rt == R_METRICS) return handle_metrics(h, c);
    if (rt == R_VERSION) { /* vLLM's shape, plus the commit; no key, like /health */
        ea_sbuf b = {0};
        json_t *o = json_pack("{s:s,s:s}", "version", h->version, "commit", h->commit);
        ea_sbuf_json(&b, o);
        json_decref(o);
        enum MHD_Result r = ea__http_send_json(h, c, 200, &b);
        ea_sbuf_deinit(&b);
        return r;
    }
    if (!auth_ok(h, c)) {
        ea_oai_fail(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                    "Incorrect or missing API key (send 'Authorization: Bearer <key>').");
        return ea__http_refuse(h, c, &e, method, url, cc->t0);
    }
    if (cc->too_large) {
        ea_oai_fail(&e, 413, NULL, NULL, "request_too_large", "request body is larger than %zu bytes",
                    h->o.max_body_bytes);
        return ea__http_refuse(h, c, &e, method, url, cc->t0);
    }
    if (!atomic_load_explicit(&h->ready, memory_order_acquire) || atomic_load(&h->draining)) {
        ea_oai_fail(&e, 503, "server_error", NULL, NULL, "the server is %s",
                    atomic_load(&h->draining) ? "shutting down" : "loading the model");
        return ea__http_refuse(h, c, &e, method, url, cc->t0);
    }
    ea_sbuf b = {0};
    enum MHD_Result r;
    const char *body = cc->body.data ? cc->body.data : "";
    switch (rt) {
    case R_COMPLETIONS: return ea__http_generate(h, c, cc, EA_OAI_COMPLETIONS, url);
    case R_CHAT: return ea__http_generate(h, c, cc, EA_OAI_CHAT, url);
    case R_MODELS: ea_oai_render_models(h->model, h->ctx_len, h->start_time, &b); break;
    case R_MODEL:
        if (strcmp(url + strlen(MODEL_PREFIX), h->model) != 0) {
            ea_oai_fail(&e, 404, "invalid_request_error", "model", "model_not_found",
                        "The model '%s' does not exist (this server serves '%s').", url + strlen(MODEL_PREFIX), h->model);
            return ea__http_refuse(h, c, &e, method, url, cc->t0);
        }
        ea_oai_render_model(h->model, h->ctx_len, h->start_time, &b);
        break;
    case R_TOKENIZE:
        if (ea_oai_tokenize(body, cc->body.len, h->ops, h->ctx_len, &b, &e)) return ea__http_refuse(h, c, &e, method, url, cc->t0);
        break;
    case R_DETOKENIZE:
        if (ea_oai_detokenize(body, cc->body.len, h->ops, &b, &e)) return ea__http_refuse(h, c, &e, method, url, cc->t0);
        break;
    default: break;
    }
    r = ea__http_send_json(h, c, 200, &b);
    ea_sbuf_deinit(&b);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    ea_http *h = cls;
    (void)version;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        if (!(cc = ea_calloc(1, sizeof *cc))) return MHD_NO;
        cc->t0 = ea_now_s();
        *con_cls = cc;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->o.max_body_bytes) {
            /* refuse before reading the body; MHD closes the connection after */
            ea_oai_error e;
            ea_oai_fail(&e, 413, NULL, NULL, "request_too_large", "request body is larger than %zu bytes",
                        h->o.max_body_bytes);
            cc->too_large = 2;
            return ea__http_refuse(h, c, &e, method, url, cc->t0);
        }
        return MHD_YES;
    }
    if (cc->too_large == 2) { /* response already queued: discard the rest */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!cc->too_large && cc->body.len + *upload_data_size > h->o.max_body_bytes) {
            cc->too_large = 1;
            ea_sbuf_deinit(&cc->body);
        }
        if (!cc->too_large) ea_sbuf_append(&cc->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (cc->body.failed) return MHD_NO;
    return dispatch(h, c, cc, url, method);
}

/* MHD's connection timeout in whole seconds (0: none). */
static unsigned idle_timeout(const ea_http *h) {
    double t = h->o.idle_timeout_s;
    if (t <= 0) return 0;
    return t < 1 ? 1u : (unsigned)(t + 0.5);
}

/* Called once the response was sent (or the connection failed). */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    ea_http *h = cls;
    (void)toe;
    conn_ctx *cc = *con_cls;
    if (cc) {
        if (cc->is_gen) atomic_fetch_add(&h->gen_done, 1);
        if (cc->pending) {
            MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, idle_timeout(h));
            atomic_fetch_sub(&h->pending, 1);
        }
        ea_sbuf_deinit(&cc->body);
        ea_free(cc);
    }
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    EA_LOGD("http: %s", msg);
}

/* ---- life cycle ------------------------------------------------------------------- */

ea_status ea_http_start(const ea_http_opts *o, ea_metrics *m, ea_http **out) {
    *out = NULL;
    ea_http *h = ea_calloc(1, sizeof *h);
    if (!h) return ea_err(EA_ERR_NOMEM, "http");
    h->o = *o;
    h->metrics = m;
    h->host = ea_strdup(o->host && o->host[0] ? o->host : "127.0.0.1");
    h->model = ea_strdup(o->served_model ? o->served_model : "default");
    h->version = ea_strdup(o->version ? o->version : "unknown");
    if (o->allowed_origins && o->allowed_origins[0]) {
        ea_sbuf ob = {0};
        ea_sbuf_puts(&ob, ",");
        for (const char *p = o->allowed_origins; *p; p++)
            if (*p != ' ') ea_sbuf_append(&ob, p, 1);
        ea_sbuf_puts(&ob, ",");
        h->origins = ob.failed ? NULL : ea_strdup(ob.data);
        ea_sbuf_deinit(&ob);
    }
    h->commit = ea_strdup(o->commit ? o->commit : "unknown");
    h->api_key = o->api_key && o->api_key[0] ? ea_strdup(o->api_key) : NULL;
    h->start_time = (long)time(NULL);
    atomic_init(&h->seq, (uint_fast64_t)ea_now_ns());
    if (h->o.max_body_bytes == 0) h->o.max_body_bytes = 1 << 20;
    if (h->o.max_connections <= 0) h->o.max_connections = 1024;
    if (!h->host || !h->model || (o->api_key && o->api_key[0] && !h->api_key)) {
        ea_http_stop(h);
        return ea_err(EA_ERR_NOMEM, "http");
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(h->host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        ea_status s = ea_err(EA_ERR_INVALID_ARG, "--host %s: %s", h->host, gai_strerror(gai));
        ea_http_stop(h);
        return s;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)h->o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout(h),
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        ea_status s = ea_err(EA_ERR_IO, "cannot listen on %s:%d (port in use or address not available)", h->host, o->port);
        ea_http_stop(h);
        return s;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : o->port;
    *out = h;
    return EA_OK;
}

int ea_http_port(const ea_http *h) { return h->port; }

void ea_http_set_ready(ea_http *h, ea_sched *s, const ea_text_ops *ops, int ctx_len) {
    h->sched = s;
    h->ops = ops;
    h->ctx_len = ctx_len;
    atomic_store_explicit(&h->ready, 1, memory_order_release);
}

void ea_http_set_ext(ea_http *h, const ea_http_ext *ext) { atomic_store_explicit(&h->ext, ext, memory_order_release); }

void ea_http_begin_drain(ea_http *h) { atomic_store(&h->draining, 1); }

int ea_http_pending(const ea_http *h) { return atomic_load(&((ea_http *)h)->pending); }

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int ea_http_shutdown(ea_http *h, double drain_s, int (*force)(void *ctx), void *ctx) {
    if (!h || !atomic_load_explicit(&h->ready, memory_order_acquire)) return 0;
    ea_http_begin_drain(h);
    int forced = force && force(ctx);
    ea_sched_shutdown(h->sched, forced ? 0 : drain_s);
    while (!ea_sched_done(h->sched)) {
        if (!forced && force && force(ctx)) {
            forced = 1;
            EA_LOGW("second signal: cancelling every request now");
            ea_sched_shutdown(h->sched, 0);
        }
        nap_ms(10);
    }
    ea_sched_stop(h->sched, 0); /* joins; every request has its last event */
    double t_end = ea_now_s() + (forced ? 1.0 : EA_HTTP_FLUSH_S);
    while (ea_http_pending(h) > 0 && ea_now_s() < t_end) {
        if (!forced && force && force(ctx)) {
            forced = 1;
            if (ea_now_s() + 1.0 < t_end) t_end = ea_now_s() + 1.0;
        }
        nap_ms(10);
    }
    int left = ea_http_pending(h);
    if (left) EA_LOGW("%d response(s) not wholly sent when the server stopped", left);
    return left;
}

int ea_http_exit_requested(const ea_http *h) {
    return h->o.max_requests > 0 && atomic_load(&((ea_http *)h)->gen_done) >= h->o.max_requests;
}

void ea_http_stop(ea_http *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d);
    ea_free(h->host);
    ea_free(h->model);
    ea_free(h->version);
    ea_free(h->origins);
    ea_free(h->commit);
    ea_free(h->api_key);
    ea_free(h);
}
