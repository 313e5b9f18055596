/*
 * cmd_bench.c — `eaas bench serve`: a load generator for any OpenAI-compatible
 * server, reporting the figures vLLM's benchmark_serving reports, with the
 * same definitions, so results compare side by side:
 *
 *   TTFT   time from sending the request to the first streamed chunk with text
 *   ITL    time between consecutive chunks with text (all requests pooled)
 *   TPOT   (E2E - TTFT) / (output tokens - 1), per request with > 1 token
 *   E2E    time from sending the request to the end of the stream
 *   request throughput = completed / duration, output throughput = output
 *   tokens / duration (output tokens from the final usage chunk, else the
 *   number of text chunks); percentiles by linear interpolation (numpy's).
 *
 * Load: --concurrency N keeps N requests in flight (N worker threads, each
 * sends its next request as soon as the last ended); --request-rate R sends
 * requests at Poisson arrivals of rate R (seeded), with at most --concurrency
 * (default: all) in flight. Prompts: random token ids of --input-len (sent as
 * a token-id array, which OpenAI-compatible servers accept), or a JSONL file
 * of {"prompt": "..."} lines (optional "output_len"). Every request streams
 * /v1/completions with ignore_eos, temperature 0, max_tokens = --output-len.
 *
 * HTTP/1.1 over plain sockets, one connection per request; the response is
 * read with Content-Length, chunked encoding or until close, and the body is
 * split into SSE `data:` lines.
 */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/util.h"
#include "cli/commands.h"
#include "base/sbuf.h"

typedef struct {
    char host[256];
    char port[8];
    char prefix[256]; /* path before /v1/... ("" usually; a trailing "/v1" of the URL is left out) */
} url_parts;

typedef struct {
    char *prompt_text;   /* owns; NULL: use ids */
    int32_t *ids;        /* owns */
    int n_ids;
    int output_len;
} bench_prompt;

typedef struct {
    int ok;
    double ttft, e2e;
    int output_tokens, prompt_tokens;
    double *itl; /* owns */
    int n_itl;
    size_t cap_itl;
    char error[160];
} bench_result;

typedef struct {
    url_parts u;
    const char *model;
    double timeout_s;
    bench_prompt *prompts;
    bench_result *results;
    double *arrival; /* seconds after start; NULL: closed loop */
    int n;
    atomic_int next;
    double t_start;
} bench_ctx;

/* ---- HTTP ---------------------------------------------------------------------- */

static int parse_url(const char *url, url_parts *u) {
    memset(u, 0, sizeof *u);
    if (strncmp(url, "http://", 7) != 0) return -1;
    const char *p = url + 7, *slash = strchr(p, '/');
    size_t hl = slash ? (size_t)(slash - p) : strlen(p);
    const char *colon = memchr(p, ':', hl);
    size_t nl = colon ? (size_t)(colon - p) : hl;
    if (nl == 0 || nl >= sizeof u->host) return -1;
    memcpy(u->host, p, nl);
    if (colon) {
        size_t pl = hl - nl - 1;
        if (pl == 0 || pl >= sizeof u->port) return -1;
        memcpy(u->port, colon + 1, pl);
    } else {
        strcpy(u->port, "80");
    }
    if (slash) snprintf(u->prefix, sizeof u->prefix, "%s", slash);
    size_t l = strlen(u->prefix);
    while (l > 0 && u->prefix[l - 1] == '/') u->prefix[--l] = 0;
    /* http://host:port/v1 is how OpenAI clients name the base; requests add /v1/... themselves */
    if (l >= 3 && strcmp(u->prefix + l - 3, "/v1") == 0) u->prefix[l - 3] = 0;
    return 0;
}

/* A connected socket, or -1 with the reason in why (getaddrinfo's or connect's). */
static int dial(const url_parts *u, double timeout_s, char *why, size_t why_n) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(u->host, u->port, &hints, &ai);
    if (g != 0 || !ai) {
        snprintf(why, why_n, "%s", g ? gai_strerror(g) : "no address");
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0) snprintf(why, why_n, "%s", strerror(err));
    if (fd >= 0) {
        struct timeval tv = {(time_t)timeout_s, (suseconds_t)((timeout_s - floor(timeout_s)) * 1e6)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

typedef struct {
    int fd;
    char buf[16384];
    size_t len, off;
} reader;

static int rd_fill(reader *r) {
    if (r->off < r->len) return 1;
    for (;;) {
        ssize_t n = recv(r->fd, r->buf, sizeof r->buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n == 0 ? 0 : -1;
        r->len = (size_t)n;
        r->off = 0;
        return 1;
    }
}

/* A line without its CR LF, into out (cut to cap). 0 ok, -1 on EOF/error. */
static int rd_line(reader *r, char *out, size_t cap) {
    size_t n = 0;
    for (;;) {
        if (rd_fill(r) <= 0) return -1;
        char c = r->buf[r->off++];
        if (c == '\n') break;
        if (c != '\r' && n + 1 < cap) out[n++] = c;
    }
    out[n] = 0;
    return 0;
}

typedef void (*body_fn)(void *ctx, const char *p, size_t n);

/* Send one request; call fn with the body bytes as they arrive. Returns the
 * HTTP status, or -1 with the reason in why ("cannot connect to ...: ...",
 * "no complete response"). */
static int http_do(const url_parts *u, double timeout_s, const char *method, const char *path, const char *body,
                   body_fn fn, void *ctx, char *why, size_t why_n) {
    char reason[128];
    int fd = dial(u, timeout_s, reason, sizeof reason);
    if (fd < 0) {
        snprintf(why, why_n, "cannot connect to http://%.60s:%s%.60s: %.80s", u->host, u->port, u->prefix, reason);
        return -1;
    }
    snprintf(why, why_n, "the connection closed before a complete response");
    ea_sbuf req = {0};
    size_t blen = body ? strlen(body) : 0;
    ea_sbuf_printf(&req, "%s %s%s HTTP/1.1\r\nHost: %s:%s\r\nAccept: */*\r\nConnection: close\r\n", method, u->prefix,
                   path, u->host, u->port);
    if (body) ea_sbuf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
    ea_sbuf_puts(&req, "\r\n");
    if (body) ea_sbuf_append(&req, body, blen);
    int status = -1;
    reader *r = ea_calloc(1, sizeof *r);
    if (!r || req.failed || send_all(fd, req.data, req.len) != 0) goto done;
    r->fd = fd;
    char line[1024];
    if (rd_line(r, line, sizeof line) != 0 || sscanf(line, "HTTP/%*s %d", &status) != 1) {
        status = -1;
        goto done;
    }
    long long clen = -1;
    int chunked = 0;
    for (;;) {
        if (rd_line(r, line, sizeof line) != 0) {
            status = -1;
            goto done;
        }
        if (!line[0]) break;
        if (strncasecmp(line, "content-length:", 15) == 0) clen = atoll(line + 15);
        if (strncasecmp(line, "transfer-encoding:", 18) == 0 && strstr(line + 18, "chunked")) chunked = 1;
    }
    for (;;) {
        long long want;
        if (chunked) {
            if (rd_line(r, line, sizeof line) != 0) {
                status = -1;
                break;
            }
            want = strtoll(line, NULL, 16);
            if (want <= 0) break;
        } else {
            want = clen >= 0 ? clen : -1;
        }
        while (want != 0) {
            int f = rd_fill(r);
            if (f <= 0) {
                if (f < 0 || chunked || want > 0) status = -1;
                goto done;
            }
            size_t n = r->len - r->off;
            if (want > 0 && (long long)n > want) n = (size_t)want;
            fn(ctx, r->buf + r->off, n);
            r->off += n;
            if (want > 0) want -= (long long)n;
        }
        if (!chunked) break;
        if (rd_line(r, line, sizeof line) != 0) { /* CRLF after the chunk */
            status = -1;
            break;
        }
    }
done:
    ea_free(r);
    ea_sbuf_deinit(&req);
    close(fd);
    return status;
}

/* ---- one streamed completion -------------------------------------------------------- */

typedef struct {
    ea_sbuf line;
    ea_sbuf raw; /* first bytes of the body, for error messages */
    bench_result *res;
    double t0, t_last;
    int done;
} sse_state;

static void push_itl(bench_result *res, double v) {
    if (ea_grow(&res->itl, &res->cap_itl, (size_t)res->n_itl + 1, sizeof *res->itl, 64)) return;
    res->itl[res->n_itl++] = v;
}

static void sse_line(sse_state *s, const char *l, size_t n) {
    if (n < 5 || strncmp(l, "data:", 5) != 0) return;
    l += 5;
    n -= 5;
    while (n && *l == ' ') l++, n--;
    if (n == 6 && strncmp(l, "[DONE]", 6) == 0) {
        s->done = 1;
        return;
    }
    double now = ea_now_s();
    json_t *j = json_loadb(l, n, 0, NULL);
    if (!j) return;
    json_t *choices = json_object_get(j, "choices");
    json_t *c0 = json_array_get(choices, 0);
    json_t *text = json_object_get(c0, "text");
    if (!text) text = json_object_get(json_object_get(c0, "delta"), "content");
    if (json_is_string(text) && json_string_length(text) > 0) {
        if (s->res->ttft == 0) s->res->ttft = now - s->t0;
        else push_itl(s->res, now - s->t_last);
        s->t_last = now;
        s->res->output_tokens++; /* replaced by usage when the server sends it */
    }
    json_t *usage = json_object_get(j, "usage");
    if (json_is_object(usage) && json_is_integer(json_object_get(usage, "completion_tokens"))) {
        s->res->output_tokens = (int)json_integer_value(json_object_get(usage, "completion_tokens"));
        s->res->prompt_tokens = (int)json_integer_value(json_object_get(usage, "prompt_tokens"));
    }
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    if (json_object_get(j, "error") && !s->res->error[0])
        snprintf(s->res->error, sizeof s->res->error, "error in stream: %.120s", msg ? msg : "?");
    json_decref(j);
}

static void sse_bytes(void *ctx, const char *p, size_t n) {
    sse_state *s = ctx;
    if (s->raw.len < 200) ea_sbuf_append(&s->raw, p, n < 200 ? n : 200);
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            sse_line(s, s->line.data ? s->line.data : "", s->line.len);
            ea_sbuf_reset(&s->line);
        } else if (p[i] != '\r') {
            ea_sbuf_append(&s->line, p + i, 1);
        }
    }
}

static void run_one(bench_ctx *b, int i) {
    bench_prompt *p = &b->prompts[i];
    bench_result *res = &b->results[i];
    json_t *body = json_pack("{s:s,s:i,s:b,s:b,s:{s:b},s:f}", "model", b->model, "max_tokens", p->output_len,
                             "ignore_eos", 1, "stream", 1, "stream_options", "include_usage", 1, "temperature", 0.0);
    if (p->prompt_text) {
        json_object_set_new(body, "prompt", json_string(p->prompt_text));
    } else {
        json_t *a = json_array();
        for (int k = 0; k < p->n_ids; k++) json_array_append_new(a, json_integer(p->ids[k]));
        json_object_set_new(body, "prompt", a);
    }
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    sse_state s = {.res = res};
    s.t0 = s.t_last = ea_now_s();
    char why[sizeof res->error] = "no memory for the request";
    int status = text ? http_do(&b->u, b->timeout_s, "POST", "/v1/completions", text, sse_bytes, &s, why, sizeof why) : -1;
    free(text);
    res->e2e = ea_now_s() - s.t0;
    if (s.line.len) sse_line(&s, s.line.data, s.line.len);
    if (status < 0) {
        snprintf(res->error, sizeof res->error, "%s", why);
    } else if (status != 200) {
        snprintf(res->error, sizeof res->error, "HTTP %d: %.120s", status, s.raw.data ? s.raw.data : "");
    } else if (!s.done && !res->error[0]) {
        snprintf(res->error, sizeof res->error, "stream ended without [DONE]");
    }
    res->ok = !res->error[0] && res->ttft > 0;
    if (!res->ok && !res->error[0]) snprintf(res->error, sizeof res->error, "no text streamed");
    ea_sbuf_deinit(&s.line);
    ea_sbuf_deinit(&s.raw);
}

static void *worker(void *arg) {
    bench_ctx *b = arg;
    for (;;) {
        int i = atomic_fetch_add(&b->next, 1);
        if (i >= b->n) break;
        if (b->arrival) {
            double wait = b->t_start + b->arrival[i] - ea_now_s();
            if (wait > 0) {
                struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
        run_one(b, i);
    }
    return NULL;
}

/* ---- prompts ------------------------------------------------------------------------ */

static double rng_unit(uint64_t *s) { return (double)(ea_splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }

static ea_status load_dataset(const char *path, int n, int output_len, bench_prompt *out) {
    char *data;
    size_t size;
    EA_TRY(ea_read_file(path, &data, &size));
    int got = 0, line_no = 0;
    char *save = NULL;
    ea_status st = EA_OK;
    /* reuse lines cyclically if the file has fewer than n */
    char **lines = NULL;
    int n_lines = 0;
    for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line_no++;
        if (!*l) continue;
        char **nl = ea_realloc(lines, (size_t)(n_lines + 1) * sizeof *nl);
        if (!nl) {
            st = ea_err(EA_ERR_NOMEM, "dataset");
            goto done;
        }
        lines = nl;
        lines[n_lines++] = l;
    }
    if (n_lines == 0) {
        st = ea_err(EA_ERR_FORMAT, "%s: no prompts", path);
        goto done;
    }
    for (; got < n; got++) {
        const char *l = lines[got % n_lines];
        json_error_t je;
        json_t *j = json_loads(l, 0, &je);
        json_t *pr = json_object_get(j, "prompt");
        if (!pr) pr = json_object_get(j, "text");
        if (!json_is_string(pr)) {
            json_decref(j);
            st = ea_err(EA_ERR_FORMAT, "%s: line %d: needs {\"prompt\": string}", path, got % n_lines + 1);
            goto done;
        }
        out[got].prompt_text = ea_strdup(json_string_value(pr));
        json_t *ol = json_object_get(j, "output_len");
        out[got].output_len = json_is_integer(ol) && json_integer_value(ol) > 0 ? (int)json_integer_value(ol) : output_len;
        json_decref(j);
        if (!out[got].prompt_text) {
            st = ea_err(EA_ERR_NOMEM, "dataset");
            goto done;
        }
    }
done:
    ea_free(lines);
    ea_free(data);
    return st;
}

/* ---- statistics ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double mean, p50, p90, p99;
    int n;
} stat4;

static double pct(const double *v, int n, double p) {
    double idx = p / 100.0 * (n - 1);
    int lo = (int)floor(idx), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (idx - lo);
}

static stat4 stats(double *v, int n) {
    stat4 s = {0};
    s.n = n;
    if (n == 0) return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s.mean = sum / n * 1e3;
    s.p50 = pct(v, n, 50) * 1e3;
    s.p90 = pct(v, n, 90) * 1e3;
    s.p99 = pct(v, n, 99) * 1e3;
    return s;
}

static void json_stat(FILE *f, const char *name, stat4 s, int last) {
    fprintf(f, "\"%s_ms\":{\"mean\":%.3f,\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f}%s", name, s.mean, s.p50, s.p90, s.p99,
            last ? "" : ",");
}

/* ---- model discovery ------------------------------------------------------------------ */

static void collect(void *ctx, const char *p, size_t n) { ea_sbuf_append(ctx, p, n); }

/* The first model id of GET /v1/models; NULL with the reason in why. */
static char *first_model(const url_parts *u, double timeout_s, char *why, size_t why_n) {
    ea_sbuf b = {0};
    int st = http_do(u, timeout_s, "GET", "/v1/models", NULL, collect, &b, why, why_n);
    if (st >= 0) snprintf(why, why_n, "GET http://%.60s:%s%.60s/v1/models gave no model (HTTP %d); pass --model", u->host,
                          u->port, u->prefix, st);
    char *name = NULL;
    json_t *j = st == 200 && b.data ? json_loadb(b.data, b.len, 0, NULL) : NULL;
    json_t *id = json_object_get(json_array_get(json_object_get(j, "data"), 0), "id");
    if (json_is_string(id)) name = ea_strdup(json_string_value(id));
    json_decref(j);
    ea_sbuf_deinit(&b);
    return name;
}

/* ---- the command ----------------------------------------------------------------------- */

static const char usage_text[] =
    "usage: eaas bench serve --url URL [flags]\n\nDrive an OpenAI-compatible server with streamed "
    "/v1/completions and report\nrequests/s, output tokens/s, TTFT, TPOT, ITL, E2E (mean, p50, p90, "
    "p99).\n\n";

static int bench_serve(int argc, char **argv) {
    const char *url = NULL, *model = NULL, *dataset = NULL;
    int concurrency = 0, num_prompts = 100, input_len = 128, output_len = 128, as_json = 0;
    long seed = 0;
    double rate = 0, timeout_s = 600;
    ea_arg spec[] = {
        {"url", EA_ARG_STR, &url, "URL", "server base URL, e.g. http://127.0.0.1:8000 (or .../v1)"},
        {"model", EA_ARG_STR, &model, "NAME", "model name (default: the first of GET /v1/models)"},
        {"concurrency", EA_ARG_INT, &concurrency, "N", "requests in flight (default 1 without --request-rate)", 1, 100000},
        {"request-rate", EA_ARG_DOUBLE, &rate, "R", "Poisson arrivals at R requests/s (0 = as fast as concurrency allows)"},
        {"num-prompts", EA_ARG_INT, &num_prompts, "N", "requests to send (default 100)", 1, 10000000},
        {"input-len", EA_ARG_INT, &input_len, "L", "random prompt length in tokens (default 128)", 1, 1 << 24},
        {"output-len", EA_ARG_INT, &output_len, "L", "max_tokens per request, with ignore_eos (default 128)", 1, 1 << 24},
        {"dataset", EA_ARG_STR, &dataset, "FILE", "JSONL prompts: {\"prompt\": \"...\", \"output_len\": N?}"},
        {"seed", EA_ARG_LONG, &seed, "S", "seed for prompts and arrivals (default 0)"},
        {"timeout", EA_ARG_DOUBLE, &timeout_s, "S", "socket timeout per request (default 600)", 0.001, 604800},
        {"json", EA_ARG_BOOL, &as_json, NULL, "print only the JSON line"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("bench serve", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    url_parts u;
    if (!url || parse_url(url, &u) != 0 || rest.n_pos)
        return ea_cli_usage_error("bench serve", NULL, "--url http://HOST:PORT is required");
    if (dataset && ea_args_given(spec, &rest, "input-len"))
        return ea_cli_usage_error("bench serve", NULL,
                                  "--input-len does not apply with --dataset (the prompts come from the file)");
    if (concurrency == 0) concurrency = rate > 0 ? (num_prompts < 1024 ? num_prompts : 1024) : 1;
    if (concurrency > num_prompts) concurrency = num_prompts;

    /* one connection first, so a wrong URL is one clear line, not N failed requests */
    char why[256];
    int probe = dial(&u, timeout_s, why, sizeof why);
    if (probe < 0) {
        fprintf(stderr, "eaas bench serve: cannot connect to %s: %s\n", url, why);
        return 1;
    }
    close(probe);
    char *found = NULL;
    if (!model) {
        if (!(found = first_model(&u, timeout_s, why, sizeof why))) {
            fprintf(stderr, "eaas bench serve: %s\n", why);
            return 1;
        }
        model = found;
    }
    bench_ctx b = {.u = u, .model = model, .timeout_s = timeout_s, .n = num_prompts};
    b.prompts = ea_calloc((size_t)num_prompts, sizeof *b.prompts);
    b.results = ea_calloc((size_t)num_prompts, sizeof *b.results);
    pthread_t *th = ea_calloc((size_t)concurrency, sizeof *th);
    rc = 1;
    uint64_t rs = (uint64_t)seed;
    if (!b.prompts || !b.results || !th) goto out;
    if (dataset) {
        if (load_dataset(dataset, num_prompts, output_len, b.prompts) != EA_OK) {
            ea_cli_fail("bench serve", EA_ERR_FORMAT);
            goto out;
        }
    } else {
        for (int i = 0; i < num_prompts; i++) {
            bench_prompt *p = &b.prompts[i];
            if (!(p->ids = ea_malloc((size_t)input_len * sizeof *p->ids))) goto out;
            for (int k = 0; k < input_len; k++) p->ids[k] = 1000 + (int32_t)(ea_splitmix64(&rs) % 20000);
            p->n_ids = input_len;
            p->output_len = output_len;
        }
    }
    if (rate > 0) {
        if (!(b.arrival = ea_malloc((size_t)num_prompts * sizeof *b.arrival))) goto out;
        double t = 0;
        for (int i = 0; i < num_prompts; i++) {
            b.arrival[i] = t;
            t += -log(1.0 - rng_unit(&rs)) / rate;
        }
    }
    b.t_start = ea_now_s();
    int started = 0;
    for (; started < concurrency; started++)
        if (pthread_create(&th[started], NULL, worker, &b) != 0) break;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    double dur = ea_now_s() - b.t_start;

    int completed = 0, failed = 0;
    long long in_tok = 0, out_tok = 0;
    int n_itl = 0;
    for (int i = 0; i < num_prompts; i++) n_itl += b.results[i].n_itl;
    double *ttft = ea_malloc(sizeof(double) * (size_t)num_prompts), *e2e = ea_malloc(sizeof(double) * (size_t)num_prompts);
    double *tpot = ea_malloc(sizeof(double) * (size_t)num_prompts), *itl = ea_malloc(sizeof(double) * (size_t)(n_itl + 1));
    int n_tpot = 0, k_itl = 0;
    const char *first_err = NULL;
    for (int i = 0; i < num_prompts && ttft && e2e && tpot && itl; i++) {
        bench_result *r = &b.results[i];
        if (!r->ok) {
            failed++;
            if (!first_err) first_err = r->error;
            continue;
        }
        ttft[completed] = r->ttft;
        e2e[completed] = r->e2e;
        completed++;
        in_tok += r->prompt_tokens ? r->prompt_tokens : b.prompts[i].n_ids;
        out_tok += r->output_tokens;
        if (r->output_tokens > 1) tpot[n_tpot++] = (r->e2e - r->ttft) / (r->output_tokens - 1);
        for (int k = 0; k < r->n_itl; k++) itl[k_itl++] = r->itl[k];
    }
    if (!ttft || !e2e || !tpot || !itl) goto free_stats;
    stat4 s_ttft = stats(ttft, completed), s_tpot = stats(tpot, n_tpot), s_itl = stats(itl, k_itl),
          s_e2e = stats(e2e, completed);
    double req_s = completed / dur, out_s = out_tok / dur;
    if (!as_json) {
        printf("============ Serving Benchmark Result ============\n");
        printf("%-40s %s\n", "Model:", model);
        printf("%-40s %d\n", "Concurrency:", concurrency);
        if (rate > 0) printf("%-40s %.2f\n", "Request rate (req/s):", rate);
        else printf("%-40s %s\n", "Request rate (req/s):", "inf");
        printf("%-40s %d\n", "Successful requests:", completed);
        printf("%-40s %d\n", "Failed requests:", failed);
        printf("%-40s %.2f\n", "Benchmark duration (s):", dur);
        printf("%-40s %lld\n", "Total input tokens:", in_tok);
        printf("%-40s %lld\n", "Total generated tokens:", out_tok);
        printf("%-40s %.2f\n", "Request throughput (req/s):", req_s);
        printf("%-40s %.2f\n", "Output token throughput (tok/s):", out_s);
        printf("%-40s %.2f\n", "Total token throughput (tok/s):", (in_tok + out_tok) / dur);
        printf("%-12s %12s %12s %12s %12s\n", "(ms)", "mean", "p50", "p90", "p99");
        const struct {
            const char *n;
            stat4 s;
        } rows[] = {{"TTFT", s_ttft}, {"TPOT", s_tpot}, {"ITL", s_itl}, {"E2E", s_e2e}};
        for (int i = 0; i < 4; i++)
            printf("%-12s %12.2f %12.2f %12.2f %12.2f\n", rows[i].n, rows[i].s.mean, rows[i].s.p50, rows[i].s.p90,
                   rows[i].s.p99);
        if (first_err) printf("first error: %s\n", first_err);
        printf("==================================================\n");
    }
    printf("{\"bench\":\"serve\",\"model\":\"%s\",\"concurrency\":%d,\"request_rate\":%g,\"num_prompts\":%d,"
           "\"input_len\":%d,\"output_len\":%d,\"completed\":%d,\"failed\":%d,\"duration_s\":%.3f,"
           "\"total_input_tokens\":%lld,\"total_output_tokens\":%lld,\"request_throughput\":%.3f,"
           "\"output_throughput\":%.3f,\"total_token_throughput\":%.3f,",
           model, concurrency, rate, num_prompts, dataset ? -1 : input_len, output_len, completed, failed, dur, in_tok,
           out_tok, req_s, out_s, (in_tok + out_tok) / dur);
    json_stat(stdout, "ttft", s_ttft, 0);
    json_stat(stdout, "tpot", s_tpot, 0);
    json_stat(stdout, "itl", s_itl, 0);
    json_stat(stdout, "e2el", s_e2e, 1);
    printf("}\n");
    rc = failed ? 1 : 0;
free_stats:
    ea_free(ttft);
    ea_free(e2e);
    ea_free(tpot);
    ea_free(itl);
out:
    for (int i = 0; b.prompts && i < num_prompts; i++) {
        ea_free(b.prompts[i].prompt_text);
        ea_free(b.prompts[i].ids);
    }
    for (int i = 0; b.results && i < num_prompts; i++) ea_free(b.results[i].itl);
    ea_free(b.prompts);
    ea_free(b.results);
    ea_free(b.arrival);
    ea_free(th);
    ea_free(found);
    return rc;
}

int ea_cmd_bench(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fprintf(argc < 2 ? stderr : stdout, "usage: eaas bench serve --url URL [flags]   (see 'eaas bench serve --help')\n");
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "serve") == 0) return bench_serve(argc - 1, argv + 1);
    return ea_cli_usage_error("bench", NULL, "unknown benchmark '%s' (known: serve)", argv[1]);
}
