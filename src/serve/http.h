/*
 * http.h — the HTTP front of `eaas serve` (libmicrohttpd, one thread per
 * connection), speaking the OpenAI API (openai.h) to the scheduler.
 *
 * Endpoints:
 *   POST /v1/completions, POST /v1/chat/completions   (stream: true -> SSE)
 *   GET  /v1/models, POST /tokenize, POST /detokenize
 *   GET  /health   200 ok; 503 while loading, draining, when the scheduler
 *                  failed (a rank or collective), or when the step loop made
 *                  no progress for stall_seconds while work waits
 *   GET  /metrics  Prometheus text (metrics.h)
 * Everything but /health and /metrics needs `Authorization: Bearer <api_key>`
 * when an api_key is set (401 otherwise).
 *
 * Life cycle (cmd_serve.c):
 *   ea_http_start(&opts, metrics, &h)       listening; /health says 503 "loading"
 *   ... load the engine, create and start the scheduler ...
 *   ea_http_set_ready(h, sched, &ops, ctx)  requests are served from now on
 *   ... until a signal or ea_http_exit_requested(h) ...
 *   ea_http_shutdown(h, drain_s, force, x)  new generation requests 503 (the port stays
 *                                           open, /health says 503 "draining"); in-flight
 *                                           requests finish or are cancelled; every
 *                                           client gets its last bytes
 *   ea_http_stop(h)                         connections closed, threads joined
 *
 * Connections: up to max_connections at once (one thread each), set well above
 * the work the scheduler takes (max-running + max-queue), so that overload is
 * answered by the scheduler's 503 + Retry-After and /health, /metrics still get
 * a connection. A connection idle (no request in progress) for idle_timeout_s
 * is closed; while a generation request runs the idle clock is off (the request
 * has its own timeout and a dead client is noticed by polling the socket).
 *
 * Threads: MHD's listener thread plus one thread per connection; a handler
 * blocks on its own request's events (ea_req_next) and nothing else. The
 * fields set by set_ready are published with a release store and read with
 * an acquire load. A client that goes away (checked every poll interval while
 * waiting, and on every failed write) gets its request cancelled at once.
 */
#ifndef EA_HTTP_H
#define EA_HTTP_H

#include <stddef.h>

#include "base/status.h"
#include "serve/metrics.h"
#include "serve/openai.h"
#include "serve/scheduler.h"

typedef struct {
    const char *host;          /* numeric or resolvable; default 127.0.0.1 */
    int port;                  /* 0: any free port (see ea_http_port) */
    const char *api_key;       /* NULL or "": no check */
    const char *served_model;  /* the one model name; requests naming another get 404 */
    const char *version;       /* GET /version's "version" and "commit" (copied); NULL: "unknown" */
    const char *commit;
    const char *allowed_origins; /* CORS: "a,b" or "*" (copied); NULL or "": off, no CORS headers, OPTIONS 405 */
    size_t max_body_bytes;     /* larger bodies get 413 */
    double request_timeout_s;  /* <= 0: none; past it a request is cancelled with 504 */
    double stall_seconds;      /* /health stall threshold */
    double keepalive_s;        /* SSE ": keep-alive" comment after this long without output */
    int max_requests;          /* > 0: ea_http_exit_requested after this many generation requests */
    int max_connections;       /* concurrent connections (threads); <= 0: 1024 */
    double idle_timeout_s;     /* close a connection idle this long; <= 0: never */
} ea_http_opts;

typedef struct ea_http ea_http;

ea_status ea_http_start(const ea_http_opts *o, ea_metrics *m, ea_http **out);
/* The bound port (useful with port 0). */
int ea_http_port(const ea_http *h);
/* s, ops (and ops->ctx) are borrowed until ea_http_stop. */
void ea_http_set_ready(ea_http *h, ea_sched *s, const ea_text_ops *ops, int ctx_len);
/* Refuse new generation requests with 503 (the port stays open: /health says
 * "draining", unless the scheduler failed, which it names instead). */
void ea_http_begin_drain(ea_http *h);
/* Generation requests accepted whose response is not yet wholly sent. */
int ea_http_pending(const ea_http *h);
/* The graceful stop (after set_ready): begin_drain; the scheduler finishes
 * in-flight requests for up to drain_s and cancels the rest — at once when
 * force(ctx) returns 1 (NULL: never), checked every few ms — and its step loop
 * is joined; then the handlers get up to EA_HTTP_FLUSH_S (1 s once forced) to
 * send each client its last event: the JSON body, or the final chunk, [DONE]
 * and the chunked terminator. Returns the responses not wholly sent. */
#define EA_HTTP_FLUSH_S 5.0
int ea_http_shutdown(ea_http *h, double drain_s, int (*force)(void *ctx), void *ctx);
/* --max-requests reached. */
int ea_http_exit_requested(const ea_http *h);
/* Extra endpoints and metrics owned by the caller (EPLB endpoints under /eplb/, EP statistics at /ep/stats):
 * handle() is asked about every path the server does not know, after the API-key
 * check; it fills *status, *ctype and out and returns 1 if the path is its own.
 * metrics() appends Prometheus lines to /metrics. Both may run on any HTTP thread. */
typedef struct {
    void *ctx;
    int (*handle)(void *ctx, const char *method, const char *url, int *status, const char **ctype, ea_sbuf *out);
    void (*metrics)(void *ctx, ea_sbuf *out);
} ea_http_ext;
/* ext (and ext->ctx) is borrowed until ea_http_stop; call before ea_http_set_ready. */
void ea_http_set_ext(ea_http *h, const ea_http_ext *ext);

/* Close all connections, join all threads, free. NULL is fine. */
void ea_http_stop(ea_http *h);

#endif
