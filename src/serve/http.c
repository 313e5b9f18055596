/*
 * http.c — libmicrohttpd server for the OpenAI API (see http.h).
 *
 * One MHD thread per connection, so a handler may block: a non-streaming
 * request waits for its events in the access handler; a streaming one
 * returns a callback response whose reader waits for the next event (at most
 * POLL_MS at a time) and returns SSE bytes. Between waits both check that the
 * client is still there (a zero-length MSG_PEEK read means it closed) and the
 * per-request timeout; when the client is gone the request is cancelled at
 * once and the reader returns END_WITH_ERROR.
 *
 * Choices: a request with n > 1 or a batch of prompts is one scheduler
 * request per choice (ea_oai_request.choices); the handler reads their events
 * in turn (choices_next: one short wait per round on the first choice not
 * done, then a look at the others) and renders them as one response. An
 * error or a cancel of the response ends every choice.
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
 * completed-callback); stream_ctx belongs to the response (freed in its free
 * callback, which also cancels and releases the scheduler request). ea_http
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
    const ea_http_ext *ext; /* borrows: caller's extra endpoints, or NULL */
};

typedef enum { R_NONE, R_COMPLETIONS, R_CHAT, R_MODELS, R_MODEL, R_TOKENIZE, R_DETOKENIZE, R_HEALTH, R_METRICS, R_VERSION } route;

#define MODEL_PREFIX "/v1/models/" /* GET /v1/models/{id}: the id is the rest of the path, '/' included */

typedef struct {
    ea_sbuf body;
    int too_large;
    int is_gen;       /* a generation endpoint: counts for --max-requests once answered */
    int pending;      /* counted in ea_http.pending (a request was submitted) */
    double t0;
} conn_ctx;

/* The scheduler requests of one HTTP request: one per choice (prompts x n). */
typedef struct {
    ea_request **req; /* owns: (n), each released by choices_release */
    uint8_t *done;    /* (n) DONE or ERROR seen */
    int n, left;      /* choices, choices not done */
    int next;         /* the choice polled first next time (round robin) */
} choices;

typedef struct {
    ea_http *h;
    choices ch;       /* owns (released in stream_free) */
    ea_oai_output out;
    ea_sbuf pend;     /* bytes produced, not yet handed to MHD */
    size_t pend_off;
    int fd;
    int ended;        /* the last bytes are in pend */
    int finished_ok;  /* DONE or ERROR seen (no cancel needed) */
    int status;       /* for the access log: 200, or the error status sent in-stream */
    int prompt_tokens, completion_tokens;
    int tokens0;      /* TOKEN events of choice 0 (inter-token latency) */
    ea_finish finish;
    double t0, t_last_send, t_last_tok, t_check;
    char path[32];
} stream_ctx;

/* ---- helpers -------------------------------------------------------------------- */

static void access_log(const char *method, const char *path, uint64_t id, int status, int ptok, int ctok,
                       double t0, const char *finish) {
    char ids[24] = "-";
    if (id) snprintf(ids, sizeof ids, "%llu", (unsigned long long)id);
    EA_LOGI("access id=%s %s %s status=%d prompt_tokens=%d completion_tokens=%d latency_ms=%.1f%s%s", ids, method,
            path, status, ptok, ctok, (ea_now_s() - t0) * 1e3, finish ? " finish=" : "", finish ? finish : "");
}

/* CORS (--allowed-origins): the request's Origin is echoed when listed ("*":
 * any origin gets "*"). Nothing when CORS is off or the origin is not listed:
 * the browser then refuses the response, which is the point. */
static void add_cors(const ea_http *h, struct MHD_Connection *c, struct MHD_Response *r) {
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

static enum MHD_Result send_buf(ea_http *h, struct MHD_Connection *c, int status, const char *ctype,
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
    add_cors(h, c, r);
    if (atomic_load(&h->draining) || status == 413) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    ea_metrics_http_status(h->metrics, status);
    return ret;
}

static enum MHD_Result send_json(ea_http *h, struct MHD_Connection *c, int status, ea_sbuf *b) {
    if (b->failed) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        return send_buf(h, c, 500, "application/json", oom, sizeof oom - 1, 0);
    }
    return send_buf(h, c, status, "application/json", b->data ? b->data : "", b->len, 0);
}

/* The error body; 503s say when to retry. */
static enum MHD_Result send_error(ea_http *h, struct MHD_Connection *c, const ea_oai_error *e) {
    ea_sbuf b = {0};
    ea_oai_render_error(e, &b);
    int retry = e->status == 503 ? 1 : 0;
    enum MHD_Result r = b.failed ? send_json(h, c, 500, &b)
                                 : send_buf(h, c, e->status, "application/json", b.data, b.len, retry);
    ea_sbuf_deinit(&b);
    return r;
}

/* A request refused before it reached the scheduler: answer and log it. */
static enum MHD_Result refuse(ea_http *h, struct MHD_Connection *c, const ea_oai_error *e, const char *method,
                              const char *path, double t0) {
    access_log(method, path, 0, e->status, 0, 0, t0, NULL);
    return send_error(h, c, e);
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

/* 0 once the peer has closed its end (or the socket failed). */
static int client_alive(int fd) {
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

/* ---- generation ------------------------------------------------------------------- */

static void finish_metrics(ea_http *h, ea_request *req, ea_finish f) {
    double arrival = 0, first = 0, fin = 0, queued = 0;
    ea_req_times(req, &arrival, &first, &fin, &queued);
    if (first > 0 && first >= arrival) ea_metrics_observe(h->metrics, EA_HIST_TTFT, first - arrival);
    if (fin > 0 && fin >= arrival) ea_metrics_observe(h->metrics, EA_HIST_E2E, fin - arrival);
    if (first > 0) ea_metrics_observe(h->metrics, EA_HIST_QUEUE, queued); /* queued: a duration */
    ea_metrics_finished(h->metrics, f);
}

static int timed_out(const ea_http *h, double t0) {
    return h->o.request_timeout_s > 0 && ea_now_s() - t0 > h->o.request_timeout_s;
}

/* ---- the choices of one request ------------------------------------------------------ */

/* Submit every choice of r; on a failure the ones submitted are cancelled and released. */
static ea_status choices_submit(ea_sched *sched, const ea_oai_request *r, choices *cs) {
    memset(cs, 0, sizeof *cs);
    cs->req = ea_calloc((size_t)r->n_choices, sizeof *cs->req);
    cs->done = ea_calloc((size_t)r->n_choices, 1);
    if (!cs->req || !cs->done) {
        ea_free(cs->req);
        ea_free(cs->done);
        return ea_err(EA_ERR_NOMEM, "request");
    }
    for (int i = 0; i < r->n_choices; i++) {
        ea_status st = ea_sched_submit(sched, &r->choices[i], &cs->req[i]);
        if (st != EA_OK) {
            for (int k = 0; k < i; k++) ea_req_release(cs->req[k]); /* release cancels */
            ea_free(cs->req);
            ea_free(cs->done);
            memset(cs, 0, sizeof *cs);
            return st;
        }
    }
    cs->n = cs->left = r->n_choices;
    return EA_OK;
}

/* The next event of any choice not done, waiting up to POLL_MS in all. OUT: *c, the choice. */
static ea_status choices_next(choices *cs, ea_event *ev, int *c) {
    int wait = cs->left > 1 ? 5 : POLL_MS; /* several: look at each in turn, briefly */
    double t_end = ea_now_s() + POLL_MS * 1e-3;
    for (;;) {
        int waited = 0; /* one wait per round, on the first choice not done; the others are only looked at */
        for (int k = 0; k < cs->n; k++) {
            int i = (cs->next + k) % cs->n;
            if (cs->done[i]) continue;
            ea_status st = ea_req_next(cs->req[i], waited ? 0 : wait, ev);
            waited = 1;
            if (st == EA_ERR_TIMEOUT) continue;
            if (st == EA_OK && ev->kind != EA_EV_TOKEN) {
                cs->done[i] = 1;
                cs->left--;
            }
            cs->next = i; /* stay with a choice while it has events: its tokens come in bursts */
            *c = i;
            return st;
        }
        if (ea_now_s() >= t_end) return EA_ERR_TIMEOUT;
        cs->next = (cs->next + 1) % cs->n;
    }
}

static void choices_cancel(choices *cs) {
    for (int i = 0; i < cs->n; i++)
        if (!cs->done[i]) ea_req_cancel(cs->req[i]);
}

static void choices_release(choices *cs) {
    for (int i = 0; i < cs->n; i++) ea_req_release(cs->req[i]);
    ea_free(cs->req);
    ea_free(cs->done);
    memset(cs, 0, sizeof *cs);
}

/* Metrics of every choice not done (cancelled, failed). */
static void choices_finish_metrics(ea_http *h, choices *cs, ea_finish f) {
    for (int i = 0; i < cs->n; i++)
        if (!cs->done[i]) finish_metrics(h, cs->req[i], f);
}

static void stream_free(void *cls) {
    stream_ctx *s = cls;
    if (!s->finished_ok) {
        choices_cancel(&s->ch);
        s->status = 499; /* client closed request (nginx's code), for the log only */
        s->finish = EA_FINISH_CANCELLED;
        choices_finish_metrics(s->h, &s->ch, EA_FINISH_CANCELLED);
    }
    access_log("POST", s->path, ea_req_id(s->ch.req[0]), s->status, s->prompt_tokens, s->completion_tokens, s->t0,
               ea_oai_finish_name(s->finish));
    choices_release(&s->ch);
    ea_oai_output_deinit(&s->out);
    ea_sbuf_deinit(&s->pend);
    ea_free(s);
}

/* Produce more bytes into s->pend. -1: the client is gone (the caller cancels). */
static int stream_step(stream_ctx *s) {
    ea_event ev;
    int c = 0;
    ea_status st = choices_next(&s->ch, &ev, &c);
    double now = ea_now_s();
    if (st == EA_OK && ev.kind == EA_EV_TOKEN) {
        if (c == 0) { /* inter-token latency: of the first choice */
            if (s->tokens0++ > 0) ea_metrics_observe(s->h->metrics, EA_HIST_ITL, now - s->t_last_tok);
            s->t_last_tok = now;
        }
        s->completion_tokens++;
        ea_oai_stream_token(&s->out, c, &ev, &s->pend);
    } else if (st == EA_OK && ev.kind == EA_EV_DONE) {
        s->finish = ev.finish;
        finish_metrics(s->h, s->ch.req[c], ev.finish);
        ea_oai_stream_done(&s->out, c, &ev, &s->pend);
        if (s->ch.left == 0) {
            s->prompt_tokens = s->completion_tokens = 0; /* for the log: the usage's sums */
            for (int i = 0; i < s->out.n_ch; i++) {
                if (i % s->out.n == 0) s->prompt_tokens += s->out.ch[i].done.prompt_tokens;
                s->completion_tokens += s->out.ch[i].done.completion_tokens;
            }
            ea_oai_stream_end(&s->out, &s->pend);
            s->ended = s->finished_ok = 1;
        }
    } else if (st == EA_OK) {
        ea_oai_error e;
        ea_oai_error_from_status(ev.status, ev.message, &e);
        ea_oai_stream_error(&e, &s->pend);
        s->status = e.status;
        finish_metrics(s->h, s->ch.req[c], EA_FINISH_NONE);
        choices_cancel(&s->ch);
        choices_finish_metrics(s->h, &s->ch, EA_FINISH_CANCELLED);
        s->ended = s->finished_ok = 1;
    } else if (st == EA_ERR_TIMEOUT) {
        if (s->h->o.keepalive_s > 0 && now - s->t_last_send >= s->h->o.keepalive_s)
            ea_sbuf_puts(&s->pend, ": keep-alive\n\n");
    } else {
        ea_oai_error e;
        ea_oai_error_from_status(st, ea_errmsg(), &e);
        ea_oai_stream_error(&e, &s->pend);
        s->status = e.status;
        s->ended = 1;
    }
    /* by the clock, not only on timeouts: tokens may come faster than POLL_MS */
    if (s->ended || now - s->t_check < POLL_MS * 1e-3) return 0;
    s->t_check = now;
    if (!client_alive(s->fd)) return -1;
    if (timed_out(s->h, s->t0)) {
        ea_oai_error e;
        ea_oai_fail(&e, 504, "server_error", NULL, "timeout", "request timed out after %g s", s->h->o.request_timeout_s);
        choices_cancel(&s->ch);
        ea_oai_stream_error(&e, &s->pend);
        s->status = 504;
        s->finish = EA_FINISH_CANCELLED;
        s->ended = s->finished_ok = 1;
        choices_finish_metrics(s->h, &s->ch, EA_FINISH_CANCELLED);
    }
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_ctx *s = cls;
    (void)pos;
    for (;;) {
        if (s->pend.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (s->pend_off < s->pend.len) {
            size_t n = s->pend.len - s->pend_off;
            if (n > max) n = max;
            memcpy(buf, s->pend.data + s->pend_off, n);
            s->pend_off += n;
            if (s->pend_off == s->pend.len) {
                ea_sbuf_reset(&s->pend);
                s->pend_off = 0;
            }
            s->t_last_send = ea_now_s();
            return (ssize_t)n;
        }
        if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (stream_step(s) < 0) return MHD_CONTENT_READER_END_WITH_ERROR; /* stream_free cancels */
    }
}

static enum MHD_Result start_stream(ea_http *h, struct MHD_Connection *c, ea_oai_request *r, choices *cs,
                                    const char *path, double t0) {
    stream_ctx *s = ea_calloc(1, sizeof *s);
    struct MHD_Response *resp = NULL;
    if (s) {
        s->h = h;
        s->ch = *cs;
        s->fd = conn_fd(c);
        s->status = 200;
        s->prompt_tokens = r->n_prompt;
        s->t0 = t0;
        s->t_last_send = s->t_last_tok = s->t_check = ea_now_s();
        snprintf(s->path, sizeof s->path, "%s", path);
        ea_oai_output_init(&s->out, r, h->model, (long)time(NULL), h->ops);
        ea_oai_stream_start(&s->out, &s->pend);
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free);
    }
    if (!resp) {
        if (s) stream_free(s); /* cancels and releases */
        else choices_release(cs);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    add_cors(h, c, resp);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    ea_metrics_http_status(h->metrics, 200);
    return ret;
}

/* Wait for the whole answer (every choice), then send it. */
static enum MHD_Result run_blocking(ea_http *h, struct MHD_Connection *c, ea_oai_request *r, choices *cs,
                                    const char *path, double t0) {
    ea_oai_output out;
    ea_oai_output_init(&out, r, h->model, (long)time(NULL), h->ops);
    int fd = conn_fd(c);
    ea_oai_error e = {0};
    ea_event ev;
    int ok = 0, ntok = 0, ch = 0;
    double t_last = ea_now_s(), t_check = t_last;
    uint64_t id = ea_req_id(cs->req[0]);
    for (;;) {
        ea_status st = choices_next(cs, &ev, &ch);
        double now = ea_now_s();
        if (st == EA_OK && ev.kind == EA_EV_TOKEN) {
            if (ch == 0 && ntok > 0) ea_metrics_observe(h->metrics, EA_HIST_ITL, now - t_last);
            if (ch == 0) t_last = now;
            ntok++;
            ea_oai_output_add(&out, ch, &ev);
        } else if (st == EA_OK && ev.kind == EA_EV_DONE) {
            finish_metrics(h, cs->req[ch], ev.finish);
            ea_oai_output_done(&out, ch, &ev);
            if (cs->left == 0) {
                ok = 1;
                break;
            }
        } else if (st == EA_OK) {
            ea_oai_error_from_status(ev.status, ev.message, &e);
            finish_metrics(h, cs->req[ch], EA_FINISH_NONE);
            choices_cancel(cs);
            choices_finish_metrics(h, cs, EA_FINISH_CANCELLED);
            break;
        } else if (st != EA_ERR_TIMEOUT) {
            ea_oai_error_from_status(st, ea_errmsg(), &e);
            choices_cancel(cs);
            choices_finish_metrics(h, cs, EA_FINISH_NONE);
            break;
        }
        /* by the clock, not only on timeouts: tokens may come faster than POLL_MS */
        if (now - t_check < POLL_MS * 1e-3) continue;
        t_check = now;
        if (!client_alive(fd)) {
            choices_cancel(cs);
            choices_finish_metrics(h, cs, EA_FINISH_CANCELLED);
            access_log("POST", path, id, 499, r->n_prompt, ntok, t0, "abort");
            choices_release(cs);
            ea_oai_output_deinit(&out);
            return MHD_NO; /* nobody to answer: MHD closes the connection */
        }
        if (timed_out(h, t0)) {
            choices_cancel(cs);
            ea_oai_fail(&e, 504, "server_error", NULL, "timeout", "request timed out after %g s", h->o.request_timeout_s);
            choices_finish_metrics(h, cs, EA_FINISH_CANCELLED);
            break;
        }
    }
    choices_release(cs);
    enum MHD_Result ret;
    if (ok) {
        ea_sbuf b = {0};
        ea_oai_render_final(&out, &b);
        ret = send_json(h, c, 200, &b);
        ea_sbuf_deinit(&b);
        int pt = 0, ct = 0;
        for (int i = 0; i < out.n_ch; i++) {
            if (i % out.n == 0) pt += out.ch[i].done.prompt_tokens;
            ct += out.ch[i].done.completion_tokens;
        }
        access_log("POST", path, id, b.failed ? 500 : 200, pt, ct, t0, ea_oai_finish_name(ev.finish));
    } else {
        ret = send_error(h, c, &e);
        access_log("POST", path, id, e.status, r->n_prompt, ntok, t0, NULL);
    }
    ea_oai_output_deinit(&out);
    return ret;
}

static enum MHD_Result handle_generate(ea_http *h, struct MHD_Connection *c, conn_ctx *cc, ea_oai_kind kind,
                                       const char *path) {
    ea_oai_request r;
    ea_oai_error e;
    const char *body = cc->body.data ? cc->body.data : "";
    if (ea_oai_parse(kind, body, cc->body.len, &r, &e)) return refuse(h, c, &e, "POST", path, cc->t0);
    if (r.model && strcmp(r.model, h->model) != 0) {
        ea_oai_fail(&e, 404, "invalid_request_error", "model", "model_not_found",
                    "The model '%s' does not exist (this server serves '%s').", r.model, h->model);
        goto fail;
    }
    uint64_t mix = atomic_fetch_add(&h->seq, 1) ^ ea_now_ns();
    uint64_t seed = ea_splitmix64(&mix);
    if (ea_oai_prepare(&r, h->ops, h->ctx_len, ea_sched_kv_tokens(h->sched), seed, &e)) goto fail;
    choices cs;
    ea_status st = choices_submit(h->sched, &r, &cs);
    if (st != EA_OK) {
        ea_oai_error_from_status(st, ea_errmsg(), &e);
        goto fail;
    }
    cc->pending = 1;
    atomic_fetch_add(&h->pending, 1);
    /* the request may outlast the idle timeout: off until on_completed */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    enum MHD_Result ret = r.stream ? start_stream(h, c, &r, &cs, path, cc->t0) : run_blocking(h, c, &r, &cs, path, cc->t0);
    ea_oai_request_deinit(&r);
    return ret;
fail:
    ea_oai_request_deinit(&r);
    return refuse(h, c, &e, "POST", path, cc->t0);
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
    enum MHD_Result r = send_json(h, c, why ? 503 : 200, &b);
    ea_sbuf_deinit(&b);
    return r;
}

static enum MHD_Result handle_metrics(ea_http *h, struct MHD_Connection *c) {
    ea_sbuf b = {0};
    ea_sched_stats st;
    int ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    if (ready) ea_sched_get_stats(h->sched, &st);
    ea_metrics_render(h->metrics, ready ? &st : NULL, &b);
    if (h->ext && h->ext->metrics) h->ext->metrics(h->ext->ctx, &b);
    ea_metrics_label_all(&b, "model_name", h->model); /* on every eaas: series, like vLLM */
    enum MHD_Result r = b.failed ? send_json(h, c, 500, &b)
                                 : send_buf(h, c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, 0);
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
        add_cors(h, c, r);
        enum MHD_Result ret = MHD_queue_response(c, 204, r);
        MHD_destroy_response(r);
        ea_metrics_http_status(h->metrics, 204);
        access_log(method, url, 0, 204, 0, 0, cc->t0, NULL);
        return ret;
    }
    if (rt == R_NONE && h->ext && h->ext->handle) {
        if (!auth_ok(h, c)) {
            ea_oai_fail(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                        "Incorrect or missing API key (send 'Authorization: Bearer <key>').");
            return refuse(h, c, &e, method, url, cc->t0);
        }
        ea_sbuf b = {0};
        int status = 200;
        const char *ctype = "application/json";
        if (h->ext->handle(h->ext->ctx, method, url, &status, &ctype, &b)) {
            access_log(method, url, 0, status, 0, 0, cc->t0, NULL);
            enum MHD_Result r = b.failed ? send_json(h, c, 500, &b) : send_buf(h, c, status, ctype, b.data, b.len, 0);
            ea_sbuf_deinit(&b);
            return r;
        }
        ea_sbuf_deinit(&b);
    }
    if (rt == R_NONE) {
        ea_oai_fail(&e, 404, NULL, NULL, NULL, "no such endpoint: %s %s", method, url);
        return refuse(h, c, &e, method, url, cc->t0);
    }
    if (!method_ok) {
        ea_oai_fail(&e, 405, NULL, NULL, NULL, "method %s is not allowed for %s", method, url);
        return refuse(h, c, &e, method, url, cc->t0);
    }
    if (rt == R_HEALTH) return handle_health(h, c);
    if (rt == R_METRICS) return handle_metrics(h, c);
    if (rt == R_VERSION) { /* vLLM's shape, plus the commit; no key, like /health */
        ea_sbuf b = {0};
        json_t *o = json_pack("{s:s,s:s}", "version", h->version, "commit", h->commit);
        ea_sbuf_json(&b, o);
        json_decref(o);
        enum MHD_Result r = send_json(h, c, 200, &b);
        ea_sbuf_deinit(&b);
        return r;
    }
    if (!auth_ok(h, c)) {
        ea_oai_fail(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                    "Incorrect or missing API key (send 'Authorization: Bearer <key>').");
        return refuse(h, c, &e, method, url, cc->t0);
    }
    if (cc->too_large) {
        ea_oai_fail(&e, 413, NULL, NULL, "request_too_large", "request body is larger than %zu bytes",
                    h->o.max_body_bytes);
        return refuse(h, c, &e, method, url, cc->t0);
    }
    if (!atomic_load_explicit(&h->ready, memory_order_acquire) || atomic_load(&h->draining)) {
        ea_oai_fail(&e, 503, "server_error", NULL, NULL, "the server is %s",
                    atomic_load(&h->draining) ? "shutting down" : "loading the model");
        return refuse(h, c, &e, method, url, cc->t0);
    }
    ea_sbuf b = {0};
    enum MHD_Result r;
    const char *body = cc->body.data ? cc->body.data : "";
    switch (rt) {
    case R_COMPLETIONS: return handle_generate(h, c, cc, EA_OAI_COMPLETIONS, url);
    case R_CHAT: return handle_generate(h, c, cc, EA_OAI_CHAT, url);
    case R_MODELS: ea_oai_render_models(h->model, h->ctx_len, h->start_time, &b); break;
    case R_MODEL:
        if (strcmp(url + strlen(MODEL_PREFIX), h->model) != 0) {
            ea_oai_fail(&e, 404, "invalid_request_error", "model", "model_not_found",
                        "The model '%s' does not exist (this server serves '%s').", url + strlen(MODEL_PREFIX), h->model);
            return refuse(h, c, &e, method, url, cc->t0);
        }
        ea_oai_render_model(h->model, h->ctx_len, h->start_time, &b);
        break;
    case R_TOKENIZE:
        if (ea_oai_tokenize(body, cc->body.len, h->ops, h->ctx_len, &b, &e)) return refuse(h, c, &e, method, url, cc->t0);
        break;
    case R_DETOKENIZE:
        if (ea_oai_detokenize(body, cc->body.len, h->ops, &b, &e)) return refuse(h, c, &e, method, url, cc->t0);
        break;
    default: break;
    }
    r = send_json(h, c, 200, &b);
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
            return refuse(h, c, &e, method, url, cc->t0);
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

void ea_http_set_ext(ea_http *h, const ea_http_ext *ext) { h->ext = ext; }

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
