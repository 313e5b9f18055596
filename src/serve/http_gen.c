/*
 * http_gen.c — the generation endpoints of the HTTP front (http.c routes
 * POST /v1/completions and /v1/chat/completions here): parse and prepare the
 * request (openai.c), submit one scheduler request per choice, and answer with
 * one JSON body (run_blocking) or an SSE stream (start_stream).
 *
 * Choices: a request with n > 1 or a batch of prompts is one scheduler
 * request per choice (ea_oai_request.choices); the handler reads their events
 * in turn (choices_next: one short wait per round on the first choice not
 * done, then a look at the others) and renders them as one response. An
 * error or a cancel of the response ends every choice.
 *
 * Waiting: a non-streaming request waits for its events in the access
 * handler; a streaming one returns a callback response whose reader waits for
 * the next event (at most POLL_MS at a time) and returns SSE bytes. Between
 * waits both check that the client is still there and the per-request
 * timeout; when the client is gone the request is cancelled at once and the
 * reader returns END_WITH_ERROR.
 *
 * Ownership: stream_ctx belongs to the response (freed in its free callback,
 * which also cancels and releases the scheduler requests).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "serve/http_impl.h"

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
            if (st == EA_OK && (ev->kind == EA_EV_DONE || ev->kind == EA_EV_ERROR)) {
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
    ea__http_access_log("POST", s->path, ea_req_id(s->ch.req[0]), s->status, s->prompt_tokens, s->completion_tokens, s->t0,
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
    } else if (st == EA_OK && ev.kind == EA_EV_PROMPT) {
        ea_oai_output_prompt(&s->out, c, &ev); /* sent with the echo, before the choice's first token */
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
    if (!ea__http_client_alive(s->fd)) return -1;
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
        s->fd = ea__http_conn_fd(c);
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
    ea__http_add_cors(h, c, resp);
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
    int fd = ea__http_conn_fd(c);
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
        } else if (st == EA_OK && ev.kind == EA_EV_PROMPT) {
            ea_oai_output_prompt(&out, ch, &ev);
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
        if (!ea__http_client_alive(fd)) {
            choices_cancel(cs);
            choices_finish_metrics(h, cs, EA_FINISH_CANCELLED);
            ea__http_access_log("POST", path, id, 499, r->n_prompt, ntok, t0, "abort");
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
        ret = ea__http_send_json(h, c, 200, &b);
        ea_sbuf_deinit(&b);
        int pt = 0, ct = 0;
        for (int i = 0; i < out.n_ch; i++) {
            if (i % out.n == 0) pt += out.ch[i].done.prompt_tokens;
            ct += out.ch[i].done.completion_tokens;
        }
        ea__http_access_log("POST", path, id, b.failed ? 500 : 200, pt, ct, t0, ea_oai_finish_name(ev.finish));
    } else {
        ret = ea__http_send_error(h, c, &e);
        ea__http_access_log("POST", path, id, e.status, r->n_prompt, ntok, t0, NULL);
    }
    ea_oai_output_deinit(&out);
    return ret;
}

enum MHD_Result ea__http_generate(ea_http *h, struct MHD_Connection *c, conn_ctx *cc, ea_oai_kind kind,
                                       const char *path) {
    ea_oai_request r;
    ea_oai_error e;
    const char *body = cc->body.data ? cc->body.data : "";
    if (ea_oai_parse(kind, body, cc->body.len, &r, &e)) return ea__http_refuse(h, c, &e, "POST", path, cc->t0);
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
    return ea__http_refuse(h, c, &e, "POST", path, cc->t0);
}

