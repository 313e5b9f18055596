/*
 * test_moe_failure.c — a partial MoE failure (moe.h) fails only the requests
 * whose tokens needed the missing expert, and /health says so.
 *
 * A test backend wraps the engine's chain. In "record" mode it passes every
 * call through and notes which experts each layer's tokens were routed to;
 * in "fail" mode the tokens routed to one chosen (layer, expert) are marked
 * failed (their rows zeroed) and health() is degraded naming the expert.
 *
 *   1. each request alone, in record mode: its output and the experts it used
 *   2. the expert of the last MoE layer used by the fewest requests (at least
 *      one) is chosen to go missing
 *   3. all requests at once, in fail mode: a request ends with an error naming
 *      the layer and the expert exactly when it used that expert alone; every
 *      other one completes with the same tokens as alone — once with one
 *      micro-batch per step, once with double-batch overlap (the test backend
 *      then offers two lanes and computes a call when it is waited for, so the
 *      forward pass runs two micro-batches and marks the second's failed
 *      tokens at their rows of the whole step)
 *   4. GET /health over HTTP: 503 "degraded" naming the expert while it is
 *      missing, 200 after it is back
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "tiny_model.h"
#include "serve/http.h"
#include "serve/scheduler.h"
#include "sched_util.h"

#define NREQ 16
#define MAX_E 256

static char model[1024];

typedef struct {
    ea_moe_backend base;
    ea_moe_backend *inner; /* owns */
    int fail_layer, fail_expert;
    volatile int failing; /* read by health() on HTTP threads */
    uint8_t used[MAX_E];  /* record mode: experts routed to at fail_layer since the last reset */
    int lanes;            /* 2: calls run when waited for, one per lane in flight (double-batch overlap) */
    int in_flight[2];
    long lane1_calls;
} failer;

static ea_status failer_submit(ea_moe_backend *be, const ea_moe_call *c) {
    failer *f = (failer *)be;
    if (c->layer == f->fail_layer)
        for (int i = 0; i < c->n_tokens * c->k; i++)
            if (c->ids[i] >= 0 && c->ids[i] < MAX_E) f->used[c->ids[i]] = 1;
    if (f->lanes == 1) return f->inner->vt->submit(f->inner, c);
    if (c->lane < 0 || c->lane > 1 || f->in_flight[c->lane]) return ea_err(EA_ERR_INVALID_ARG, "lane %d", c->lane);
    f->in_flight[c->lane] = 1;
    f->lane1_calls += c->lane == 1;
    return EA_OK;
}

static ea_status failer_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    failer *f = (failer *)be;
    if (f->lanes == 1) {
        EA_TRY(f->inner->vt->wait(f->inner, c, out));
    } else {
        if (c->lane < 0 || c->lane > 1 || !f->in_flight[c->lane]) return ea_err(EA_ERR_INVALID_ARG, "lane %d", c->lane);
        f->in_flight[c->lane] = 0;
        ea_moe_call one = *c;
        one.lane = 0; /* the local backend inside has one */
        EA_TRY(ea_moe_forward(f->inner, &one, out));
    }
    if (!f->failing || c->layer != f->fail_layer) return EA_OK;
    for (int t = 0; t < c->n_tokens; t++)
        for (int j = 0; j < c->k; j++)
            if (c->ids[t * c->k + j] == f->fail_expert) {
                EA_TRY(ea_moe_outcome_fail(out, t, c->layer, f->fail_expert, -1, "no live replica"));
                break;
            }
    return EA_OK;
}

static ea_moe_health failer_health(ea_moe_backend *be, char *why, size_t n) {
    failer *f = (failer *)be;
    if (!f->failing) return ea_moe_backend_health(f->inner, why, n);
    snprintf(why, n, "layer %d expert %d has no live replica", f->fail_layer, f->fail_expert);
    return EA_MOE_DEGRADED;
}

static int failer_lanes(ea_moe_backend *be) { return ((failer *)be)->lanes; }

static void failer_destroy(ea_moe_backend *be) {
    failer *f = (failer *)be;
    ea_moe_backend_destroy(f->inner);
    f->inner = NULL;
}

static const ea_moe_backend_vtable failer_vt = {.submit = failer_submit,
                                                .wait = failer_wait,
                                                .health = failer_health,
                                                .lanes = failer_lanes,
                                                .destroy = failer_destroy,
                                                .name = "failer",
                                                .fails = EA_MOE_FAILS_TOKENS};

static ea_status failer_wrap(void *ctx, ea_moe_backend *inner, ea_moe_backend **out) {
    failer *f = ctx;
    f->base.vt = &failer_vt;
    f->inner = inner;
    *out = &f->base;
    return EA_OK;
}

typedef struct {
    int32_t toks[64];
    int n, error;
    char message[256];
} outcome;

static void collect_msg(ea_request *r, outcome *o) {
    memset(o, 0, sizeof *o);
    ea_event ev;
    for (;;) {
        if (ea_req_next(r, 60000, &ev) != EA_OK) {
            o->error = 1;
            snprintf(o->message, sizeof o->message, "no event in 60 s");
            break;
        }
        if (ev.kind == EA_EV_TOKEN && ev.token >= 0 && o->n < 64) o->toks[o->n++] = ev.token;
        if (ev.kind == EA_EV_DONE) break;
        if (ev.kind == EA_EV_ERROR) {
            o->error = 1;
            snprintf(o->message, sizeof o->message, "%s", ev.message);
            break;
        }
    }
    ea_req_release(r);
}

static void params(ea_req_params *rp, const int32_t *p, int n, int i) {
    memset(rp, 0, sizeof *rp);
    rp->prompt = p;
    rp->n_prompt = n;
    rp->max_tokens = 4;
    rp->ignore_eos = 1;
    ea_sampling_defaults(&rp->sp);
    rp->sp.temperature = i % 2 ? 0.9f : 0.0f;
    rp->sp.seed = 100 + (uint64_t)i;
}

/* GET path on 127.0.0.1:port; returns the status code, body in out. */
static int http_get(int port, const char *path, char *out, size_t n) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    char req[256];
    int rl = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)rl) != rl) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t k;
    while (got + 1 < n && (k = read(fd, out + got, n - 1 - got)) > 0) got += (size_t)k;
    out[got] = 0;
    close(fd);
    int status = -1;
    return sscanf(out, "HTTP/1.1 %d", &status) == 1 ? status : -1;
}

static failer F;
static int32_t prompts[NREQ][8];
static int plen[NREQ];
static outcome alone[NREQ];
static uint8_t used[NREQ][MAX_E];

static ea_sched *start(ea_engine **e, int max_seqs, int dbo) {
    F.lanes = dbo ? 2 : 1;
    F.in_flight[0] = F.in_flight[1] = 0;
    F.lane1_calls = 0;
    ea_engine_opts o = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 64, .max_seqs = max_seqs,
                        .block_size = 16, .test_wrap_backend = failer_wrap, .test_wrap_ctx = &F,
                        .dbo_min_tokens = dbo};
    if (ea_engine_create(&o, e) != EA_OK) {
        fprintf(stderr, "engine: %s\n", ea_errmsg());
        return NULL;
    }
    ea_sched_opts so = {.max_running = max_seqs, .max_queue = 64, .max_batch_tokens = 64, .prefix_cache = 0};
    ea_sched *s;
    if (ea_sched_create(*e, NULL, &so, &s) != EA_OK || ea_sched_start(s) != EA_OK) return NULL;
    return s;
}

TEST(only_requests_using_the_missing_expert_fail) {
    ea_engine *e;
    ea_sched *s = start(&e, 1, 0);
    CHECK(s != NULL);
    int n_layers = e->m->cfg.n_layers, E = e->m->cfg.n_experts;
    CHECK(E <= MAX_E);
    F.fail_layer = -1;
    for (int l = n_layers - 1; l >= 0 && F.fail_layer < 0; l--)
        if (e->m->cfg.layer_is_moe[l]) F.fail_layer = l;
    /* 1. alone, recording the experts each request used at the chosen layer */
    for (int i = 0; i < NREQ; i++) {
        plen[i] = 1 + i % 3;
        prompt_from(77, i, prompts[i], plen[i]);
        memset(F.used, 0, sizeof F.used);
        ea_req_params rp;
        params(&rp, prompts[i], plen[i], i);
        ea_request *r;
        CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
        collect_msg(r, &alone[i]);
        CHECK(!alone[i].error);
        memcpy(used[i], F.used, sizeof F.used);
    }
    ea_sched_destroy(s);
    ea_engine_destroy(e);
    /* 2. the expert used by the fewest requests, but by one at least */
    int best = -1, best_n = NREQ + 1;
    for (int x = 0; x < E; x++) {
        int c = 0;
        for (int i = 0; i < NREQ; i++) c += used[i][x];
        if (c > 0 && c < best_n) best = x, best_n = c;
    }
    CHECK(best >= 0 && best_n < NREQ);
    F.fail_expert = best;
    fprintf(stderr, "  layer %d expert %d: used by %d of %d requests alone\n", F.fail_layer, best, best_n, NREQ);

    char want[64];
    snprintf(want, sizeof want, "layer %d expert %d", F.fail_layer, best);
    /* 3. all at once with the expert missing: one micro-batch per step, then two */
    for (int dbo = 0; dbo <= 2; dbo += 2) {
    if (dbo) {
        ea_sched_destroy(s);
        ea_engine_destroy(e);
    }
    s = start(&e, 8, dbo);
    CHECK(s != NULL);
    F.failing = 1;
    ea_request *rs[NREQ];
    for (int i = 0; i < NREQ; i++) {
        ea_req_params rp;
        params(&rp, prompts[i], plen[i], i);
        CHECK_EQ(ea_sched_submit(s, &rp, &rs[i]), EA_OK);
    }
    int n_failed = 0;
    for (int i = 0; i < NREQ; i++) {
        outcome got;
        collect_msg(rs[i], &got);
        if (used[i][best]) {
            n_failed++;
            if (!got.error || !strstr(got.message, want))
                fprintf(stderr, "  request %d used the expert: error %d \"%s\"\n", i, got.error, got.message);
            CHECK(got.error);
            CHECK(strstr(got.message, want) != NULL);
        } else {
            if (got.error) fprintf(stderr, "  request %d failed: %s\n", i, got.message);
            CHECK(!got.error);
            CHECK_EQ(got.n, alone[i].n);
            CHECK(memcmp(got.toks, alone[i].toks, sizeof(int32_t) * (size_t)got.n) == 0);
        }
    }
    CHECK_EQ(n_failed, best_n);
    if (dbo) fprintf(stderr, "  with double-batch overlap: %ld calls on the second lane\n", F.lane1_calls);
    CHECK(dbo ? F.lane1_calls > 0 : F.lane1_calls == 0);
    F.failing = 0;
    }
    F.failing = 1;

    /* 4. /health over HTTP: degraded while the expert is missing, ok after */
    ea_metrics *mx = NULL;
    ea_http *h = NULL;
    ea_http_opts ho = {.host = "127.0.0.1", .port = 0, .served_model = "m", .max_body_bytes = 1 << 20,
                       .stall_seconds = 30, .keepalive_s = 10, .max_connections = 8};
    CHECK_EQ(ea_metrics_create(&mx), EA_OK);
    CHECK_EQ(ea_http_start(&ho, mx, &h), EA_OK);
    ea_http_set_ready(h, s, NULL, ea_sched_context_len(s));
    char body[2048];
    int st = http_get(ea_http_port(h), "/health", body, sizeof body);
    if (st != 503 || !strstr(body, "degraded") || !strstr(body, want)) fprintf(stderr, "  /health: %s\n", body);
    CHECK_EQ(st, 503);
    CHECK(strstr(body, "degraded") != NULL);
    CHECK(strstr(body, want) != NULL);
    F.failing = 0;
    st = http_get(ea_http_port(h), "/health", body, sizeof body);
    CHECK_EQ(st, 200);
    ea_http_stop(h);
    ea_metrics_destroy(mx);
    ea_sched_destroy(s);
    ea_engine_destroy(e);
}

int main(void) {
    if (tiny_model("moe-failure-qwen3", "--family qwen3_moe --preset tiny --seed 6 --format hf", model, sizeof model)) return 1;
    RUN(only_requests_using_the_missing_expert_fail);
    return TEST_SUMMARY();
}
