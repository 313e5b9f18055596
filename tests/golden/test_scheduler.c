/*
 * test_scheduler.c — continuous batching keeps every request's output exactly
 * what it is alone: under concurrency, under preemption (a KV cache too small
 * for everyone), with prefix-cache hits, greedy and seeded sampling. Also
 * cancel, queue bound, length limits. Uses a tiny model from `eaas make-model`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "harness.h"
#include "serve/scheduler.h"

static char model[1024];

typedef struct {
    int32_t toks[256];
    int n;
    ea_finish finish;
    int cached;
    int error;
} result;

static void prompt_of(int i, int32_t *p, int n) {
    uint64_t s = 1000 + (uint64_t)i * 7919;
    for (int k = 0; k < n; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[k] = (int32_t)((s >> 33) % 3000) + 10;
    }
}

static void params(ea_req_params *rp, const int32_t *p, int n, int max_tokens, int seeded, uint64_t seed) {
    memset(rp, 0, sizeof *rp);
    rp->prompt = p;
    rp->n_prompt = n;
    rp->max_tokens = max_tokens;
    rp->ignore_eos = 1;
    ea_sampling_defaults(&rp->sp);
    rp->sp.temperature = seeded ? 0.9f : 0.0f;
    rp->sp.seed = seed;
}

static void collect(ea_request *r, result *out) {
    memset(out, 0, sizeof *out);
    ea_event ev;
    for (;;) {
        if (ea_req_next(r, 60000, &ev) != EA_OK) {
            out->error = 1;
            break;
        }
        if (ev.kind == EA_EV_TOKEN && ev.token >= 0 && out->n < 256) out->toks[out->n++] = ev.token;
        if (ev.kind == EA_EV_DONE) {
            out->finish = ev.finish;
            out->cached = ev.cached_tokens;
            break;
        }
        if (ev.kind == EA_EV_ERROR) {
            fprintf(stderr, "  request error: %s\n", ev.message);
            out->error = 1;
            break;
        }
    }
    ea_req_release(r);
}

static ea_sched *start(ea_engine **e, int max_seqs, int kv_blocks, int prefix) {
    ea_engine_opts o = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 256, .max_seqs = max_seqs,
                        .kv_blocks = kv_blocks, .block_size = 16};
    if (ea_engine_create(&o, e) != EA_OK) {
        fprintf(stderr, "engine: %s\n", ea_errmsg());
        return NULL;
    }
    ea_sched_opts so = {.max_running = max_seqs, .max_queue = 64, .max_batch_tokens = 64, .prefix_cache = prefix};
    ea_sched *s;
    if (ea_sched_create(*e, NULL, &so, &s) != EA_OK || ea_sched_start(s) != EA_OK) return NULL;
    return s;
}

static void stop(ea_sched *s, ea_engine *e) {
    ea_sched_destroy(s);
    ea_engine_destroy(e);
}

#define NREQ 8
static result alone[2][NREQ];

static void run_alone(void) {
    ea_engine *e;
    ea_sched *s = start(&e, 1, 0, 0);
    for (int seeded = 0; seeded < 2; seeded++)
        for (int i = 0; i < NREQ; i++) {
            int32_t p[100];
            int n = 20 + i * 9;
            prompt_of(i, p, n);
            ea_req_params rp;
            params(&rp, p, n, 24, seeded, 42 + (uint64_t)i);
            ea_request *r;
            if (ea_sched_submit(s, &rp, &r) == EA_OK) collect(r, &alone[seeded][i]);
        }
    stop(s, e);
}

static void concurrent_matches_alone(int max_seqs, int kv_blocks, int prefix, int expect_preempt) {
    ea_engine *e;
    ea_sched *s = start(&e, max_seqs, kv_blocks, prefix);
    CHECK(s != NULL);
    for (int seeded = 0; seeded < 2; seeded++) {
        ea_request *rs[NREQ];
        int32_t p[NREQ][100];
        for (int i = 0; i < NREQ; i++) {
            int n = 20 + i * 9;
            prompt_of(i, p[i], n);
            ea_req_params rp;
            params(&rp, p[i], n, 24, seeded, 42 + (uint64_t)i);
            CHECK_EQ(ea_sched_submit(s, &rp, &rs[i]), EA_OK);
        }
        for (int i = 0; i < NREQ; i++) {
            result got;
            collect(rs[i], &got);
            CHECK(!got.error);
            CHECK_EQ(got.n, alone[seeded][i].n);
            CHECK(memcmp(got.toks, alone[seeded][i].toks, sizeof(int32_t) * (size_t)got.n) == 0);
            CHECK_EQ(got.finish, EA_FINISH_LENGTH);
        }
    }
    ea_sched_stats st;
    ea_sched_get_stats(s, &st);
    fprintf(stderr, "  seqs %d kv blocks %d: %llu steps, %llu preemptions, %d/%d blocks used at end\n", max_seqs, kv_blocks,
            (unsigned long long)st.steps, (unsigned long long)st.preemptions, st.kv_blocks_used, st.kv_blocks_total);
    if (expect_preempt) CHECK(st.preemptions > 0);
    stop(s, e);
}

TEST(concurrent_equals_alone) { concurrent_matches_alone(8, 0, 1, 0); }

TEST(preemption_keeps_outputs) {
    /* requests need up to 7 blocks of 16 tokens each; 16 blocks hold about two at a time */
    concurrent_matches_alone(8, 16, 0, 1);
    concurrent_matches_alone(8, 16, 1, 1); /* and with the prefix cache competing for blocks */
}

TEST(prefix_cache_hit_same_output) {
    ea_engine *e;
    ea_sched *s = start(&e, 2, 0, 1);
    int32_t p[100];
    prompt_of(3, p, 80);
    result a, b;
    ea_req_params rp;
    params(&rp, p, 80, 16, 0, 1);
    ea_request *r;
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    collect(r, &a);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    collect(r, &b);
    CHECK_EQ(a.cached, 0);
    CHECK(b.cached >= 64);
    CHECK_EQ(a.n, b.n);
    CHECK(memcmp(a.toks, b.toks, sizeof(int32_t) * (size_t)a.n) == 0);
    ea_sched_stats st;
    ea_sched_get_stats(s, &st);
    CHECK(st.prefix_hit_tokens >= 64);
    stop(s, e);
}

TEST(cancel_and_limits) {
    ea_engine *e;
    ea_sched *s = start(&e, 2, 0, 0);
    int32_t p[300];
    prompt_of(1, p, 300);
    ea_req_params rp;
    ea_request *r;
    params(&rp, p, 300, 4, 0, 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_ERR_RANGE); /* longer than the context */
    params(&rp, p, 200, 100, 0, 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_ERR_RANGE); /* prompt + max_tokens > context */
    params(&rp, p, 10, 0, 0, 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_ERR_INVALID_ARG);
    /* cancel mid-generation: DONE with CANCELLED, slot freed */
    params(&rp, p, 10, 200, 0, 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    ea_event ev;
    CHECK_EQ(ea_req_next(r, 60000, &ev), EA_OK);
    ea_req_cancel(r);
    int done = 0;
    while (ea_req_next(r, 60000, &ev) == EA_OK)
        if (ev.kind == EA_EV_DONE) {
            done = 1;
            CHECK_EQ(ev.finish, EA_FINISH_CANCELLED);
            break;
        }
    CHECK(done);
    ea_req_release(r);
    ea_sched_stats st;
    for (int i = 0; i < 100; i++) {
        ea_sched_get_stats(s, &st);
        if (st.running == 0) break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(st.running, 0);
    stop(s, e);
}

int main(void) {
    const char *bin = getenv("EAAS_BIN"), *b = getenv("EA_BUILD");
    snprintf(model, sizeof model, "%s/golden-models/sched-qwen3", b ? b : ".");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/golden-models && [ -d %s ] || \"%s\" make-model --family qwen3_moe --preset tiny --seed 5 --format hf --dtype bf16 --out %s >/dev/null",
             b ? b : ".", model, bin, model);
    if (system(cmd) != 0) {
        fprintf(stderr, "make-model failed\n");
        return 1;
    }
    run_alone();
    RUN(concurrent_equals_alone);
    RUN(preemption_keeps_outputs);
    RUN(prefix_cache_hit_same_output);
    RUN(cancel_and_limits);
    return TEST_SUMMARY();
}
