/*
 * http_impl.h — what http.c (routing, endpoints, life cycle) and http_gen.c
 * (generation requests: choices, SSE streams, blocking answers) share; not
 * for other callers. Ownership and threading rules: http.c's header comment.
 */
#ifndef EA_HTTP_IMPL_H
#define EA_HTTP_IMPL_H

#include <microhttpd.h>
#include <stdatomic.h>

#include "serve/http.h"

#define POLL_MS 100

struct ea_http {
    ea_http_opts o;
    char *host, *api_key, *model, *version, *commit; /* owns copies */
    char *origins;                                   /* owns: ",a,b," or NULL (CORS off) */
    ea_metrics *metrics;          /* borrows */
    struct MHD_Daemon *d;
    int port;
    /* published by set_ready */
    ea_sched *sched;
    const ea_text_ops *ops;
    int ctx_len;
    atomic_int ready;
    atomic_int draining;
    atomic_int gen_done;          /* generation requests answered */
    atomic_int pending;           /* generation requests submitted, response not yet sent */
    atomic_uint_fast64_t seq;     /* seeds for requests without one, ids of other requests */
    long start_time;
    /* borrows: caller's extra endpoints, or NULL; set while requests may already run
     * (the server answers during loading), so published with release, read with acquire */
    _Atomic(const ea_http_ext *) ext;
};

typedef struct {
    ea_sbuf body;
    int too_large;
    int is_gen;       /* a generation endpoint: counts for --max-requests once answered */
    int pending;      /* counted in ea_http.pending (a request was submitted) */
    double t0;
} conn_ctx;

/* helpers of http.c */
void ea__http_access_log(const char *method, const char *path, uint64_t id, int status, int ptok, int ctok,
                         double t0, const char *finish);
void ea__http_add_cors(const ea_http *h, struct MHD_Connection *c, struct MHD_Response *r);
enum MHD_Result ea__http_send_buf(ea_http *h, struct MHD_Connection *c, int status, const char *ctype,
                                  const char *data, size_t len, int retry_after);
enum MHD_Result ea__http_send_json(ea_http *h, struct MHD_Connection *c, int status, ea_sbuf *b);
enum MHD_Result ea__http_send_error(ea_http *h, struct MHD_Connection *c, const ea_oai_error *e);
enum MHD_Result ea__http_refuse(ea_http *h, struct MHD_Connection *c, const ea_oai_error *e, const char *method,
                                const char *path, double t0);
int ea__http_conn_fd(struct MHD_Connection *c);
int ea__http_client_alive(int fd);

/* http_gen.c: POST /v1/completions and /v1/chat/completions, from the body in cc
 * to the response (blocking JSON or an SSE stream). */
enum MHD_Result ea__http_generate(ea_http *h, struct MHD_Connection *c, conn_ctx *cc, ea_oai_kind kind,
                                  const char *path);

#endif
