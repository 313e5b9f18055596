/*
 * test_scheduler.c — continuous batching keeps every request's output exactly
 * what it is alone: under concurrency, under preemption (a KV cache too small
 * for everyone), with prefix-cache hits, greedy and seeded sampling. Also
 * cancel, queue bound, length limits; a seeded request's tokens replayed from its
 * seed outside the scheduler. A block shared at two different prefixes is not
 * reused (the prefix-cache key chains the previous block). Uses a tiny model
 * from `eaas make-model` (top-8).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "harness.h"
#include "serve/engine.h"
#include "serve/sampler.h"
#include "serve/scheduler.h"
#include "sched_util.h"

static char model[1024];
static ea_dtype g_kv = EA_F32; /* the KV cache dtype start() gives its engine */

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

static ea_sched *start(ea_engine **e, int max_seqs, int kv_blocks, int prefix) {
    ea_engine_opts o = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 256, .max_seqs = max_seqs,
                        .kv_blocks = kv_blocks, .block_size = 16, .kv_dtype = g_kv};
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

/* Y Z t after X Y Z t: block Y is keyed by its whole prefix, so nothing of
 * the first prompt is reused and the output equals a run without any cache. */
TEST(prefix_cache_chains_blocks) {
    enum { B = 16 };
    int32_t xyzt[3 * B + CHAIN_T], yzt[2 * B + CHAIN_T];
    chain_prompts(B, xyzt, yzt);
    ea_req_params rp;
    ea_request *r;
    result ref, first, second;
    ea_engine *e;
    ea_sched *s = start(&e, 1, 0, 0);
    CHECK(s != NULL);
    if (!s) return;
    params(&rp, yzt, 2 * B + CHAIN_T, 16, 0, 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    collect(r, &ref);
    stop(s, e);

    s = start(&e, 2, 0, 1);
    CHECK(s != NULL);
    if (!s) return;
    params(&rp, xyzt, 3 * B + CHAIN_T, 16, 0, 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    collect(r, &first);
    params(&rp, yzt, 2 * B + CHAIN_T, 16, 0, 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    collect(r, &second);
    CHECK(!ref.error && !first.error && !second.error);
    CHECK_EQ(second.n, ref.n); /* what the user sees first, then why */
    CHECK(memcmp(second.toks, ref.toks, sizeof(int32_t) * (size_t)ref.n) == 0);
    CHECK_EQ(second.cached, 0);
    stop(s, e);
}

/* A seeded request draws from the RNG seeded with its own seed: replaying the
 * request outside the scheduler (the engine's forward pass, ea_sample with an RNG
 * seeded with the request's seed) gives the scheduler's tokens exactly. (Same
 * logits: the forward pass is batch-invariant.) */
TEST(seeded_tokens_replay_from_the_seed) {
    ea_engine *e;
    ea_engine_opts o = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 256, .max_seqs = 1};
    CHECK_EQ(ea_engine_create(&o, &e), EA_OK);
    if (ea_t_cur_failed) return;
    int V = e->m->cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)V * 64);
    ea_sampler *smp;
    CHECK_EQ(ea_sampler_create(V, &smp), EA_OK);
    for (int i = 0; i < 2; i++) { /* prompts of 20 and 29 tokens: one prefill call */
        int32_t p[100], pos[100], seq[100] = {0}, rows[1];
        int n = 20 + i * 9;
        prompt_of(i, p, n);
        for (int k = 0; k < n; k++) pos[k] = k;
        ea_req_params rp;
        params(&rp, p, n, 24, 1, 42 + (uint64_t)i);
        ea_rng rng;
        ea_rng_seed(&rng, rp.sp.seed);
        ea_kv_seq_release(&e->kv, 0);
        CHECK_EQ(ea_kv_seq_reserve(&e->kv, 0, n + 24), EA_OK);
        rows[0] = n - 1;
        CHECK_EQ(ea_forward_run(e->fw, n, p, pos, seq, 1, rows, lg), EA_OK);
        const result *want = &alone[1][i];
        CHECK_EQ(want->n, 24);
        for (int t = 0; t < want->n && !ea_t_cur_failed; t++) {
            int32_t tok = ea_sample(smp, &rp.sp, &rng, lg, NULL, NULL);
            if (tok != want->toks[t]) FAIL_("request %d (seed %d) token %d: replay %d, scheduler %d", i, 42 + i, t,
                                            (int)tok, (int)want->toks[t]);
            int32_t ps = n + t, sq = 0, r0 = 0;
            CHECK_EQ(ea_forward_run(e->fw, 1, &tok, &ps, &sq, 1, &r0, lg), EA_OK);
        }
    }
    ea_sampler_destroy(smp);
    free(lg);
    ea_engine_destroy(e);
}

/* stop_token_ids end a request at the id (finish stop; the id is its last token,
 * as EOS is); min_tokens keeps them from being sampled before then, so greedy
 * picks another token there. Uses the greedy outputs of run_alone. */
TEST(stop_token_ids_and_min_tokens) {
    const result *want = &alone[0][0];
    CHECK_EQ(want->n, 24);
    int k = 3; /* a position whose token does not occur before it */
    for (;; k++) {
        CHECK(k < want->n);
        if (ea_t_cur_failed) return;
        int seen = 0;
        for (int j = 0; j < k; j++) seen |= want->toks[j] == want->toks[k];
        if (!seen) break;
    }
    ea_engine *e;
    ea_sched *s = start(&e, 1, 0, 0);
    CHECK(s != NULL);
    if (ea_t_cur_failed) return;
    int32_t p[100];
    prompt_of(0, p, 20);
    ea_req_params rp;
    ea_request *r;
    result got;
    params(&rp, p, 20, 24, 0, 42);
    rp.stop_ids[0] = 1; /* another id first: any of them stops */
    rp.stop_ids[1] = want->toks[k];
    rp.n_stop_ids = 2;
    for (int j = 0; j <= k; j++) CHECK(want->toks[j] != 1);
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    collect(r, &got);
    CHECK_EQ(got.finish, EA_FINISH_STOP);
    CHECK_EQ(got.n, k + 1);
    CHECK(memcmp(got.toks, want->toks, sizeof(int32_t) * (size_t)(k + 1)) == 0);
    /* min_tokens k + 1: position k may not be the stop id, so the text goes on past it */
    rp.min_tokens = k + 1;
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
    collect(r, &got);
    CHECK(got.n > k + 1);
    CHECK(memcmp(got.toks, want->toks, sizeof(int32_t) * (size_t)k) == 0);
    CHECK(got.toks[k] != want->toks[k]);
    for (int j = 0; j < k + 1 && j < got.n; j++) CHECK(got.toks[j] != want->toks[k] && got.toks[j] != 1);
    /* out of range: refused at submit */
    rp.min_tokens = 25;
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_ERR_INVALID_ARG);
    rp.min_tokens = 0;
    rp.stop_ids[0] = -1;
    CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_ERR_INVALID_ARG);
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

/* ---- control bus: two schedulers in one process, joined by an in-memory bus */
#include <pthread.h>
#include "base/alloc.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf;
    size_t len;
    uint64_t seq, taken;
    int dead; /* rank 0 stopped sending: rank 1 times out */
    int agree_n, agree_val, agree_out; /* agree_min: the first arrival's value, then the minimum */
    uint64_t agree_gen;
} fake_bus;

static ea_status fake_bcast(void *ctx, uint8_t **buf, size_t *len, int rank) {
    fake_bus *b = ctx;
    pthread_mutex_lock(&b->mu);
    if (rank == 0) {
        while (b->seq != b->taken) pthread_cond_wait(&b->cv, &b->mu); /* rank 1 has the last one */
        ea_free(b->buf);
        b->buf = ea_malloc(*len);
        memcpy(b->buf, *buf, *len);
        b->len = *len;
        b->seq++;
        pthread_cond_broadcast(&b->cv);
    } else {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 2;
        while (b->seq == b->taken && !b->dead)
            if (pthread_cond_timedwait(&b->cv, &b->mu, &dl) != 0) break;
        if (b->seq == b->taken) {
            pthread_mutex_unlock(&b->mu);
            return ea_err(EA_ERR_TIMEOUT, "rank 0 did not arrive within 2 s");
        }
        *buf = ea_malloc(b->len);
        memcpy(*buf, b->buf, b->len);
        *len = b->len;
        b->taken++;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return EA_OK;
}
/* The two ranks' minimum: the first to arrive waits (2 s) for the other. */
static ea_status fake_agree_min(void *ctx, int *v) {
    fake_bus *b = ctx;
    pthread_mutex_lock(&b->mu);
    uint64_t gen = b->agree_gen;
    if (b->agree_n == 0) {
        b->agree_n = 1;
        b->agree_val = *v;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 2;
        while (b->agree_gen == gen)
            if (pthread_cond_timedwait(&b->cv, &b->mu, &dl) != 0) break;
        if (b->agree_gen == gen) {
            b->agree_n = 0;
            pthread_mutex_unlock(&b->mu);
            return ea_err(EA_ERR_TIMEOUT, "the other rank did not agree within 2 s");
        }
    } else {
        b->agree_out = b->agree_val < *v ? b->agree_val : *v;
        b->agree_n = 0;
        b->agree_gen++;
        pthread_cond_broadcast(&b->cv);
    }
    *v = b->agree_out;
    pthread_mutex_unlock(&b->mu);
    return EA_OK;
}
static ea_status fake_bcast0(void *ctx, uint8_t **buf, size_t *len) { return fake_bcast(ctx, buf, len, 0); }
static ea_status fake_bcast1(void *ctx, uint8_t **buf, size_t *len) { return fake_bcast(ctx, buf, len, 1); }

static void *run_follower(void *arg) {
    ea_sched_run(arg);
    return NULL;
}

TEST(control_bus_lockstep) {
    fake_bus fb;
    memset(&fb, 0, sizeof fb);
    pthread_mutex_init(&fb.mu, NULL);
    pthread_cond_init(&fb.cv, NULL);
    ea_sched_bus b0 = {&fb, 0, fake_bcast0, fake_agree_min}, b1 = {&fb, 1, fake_bcast1, fake_agree_min};
    ea_engine_opts o = {.model_path = model, .threads = 1, .max_tokens = 64, .max_ctx = 256, .max_seqs = 8, .block_size = 16};
    ea_engine *e0, *e1;
    CHECK_EQ(ea_engine_create(&o, &e0), EA_OK);
    CHECK_EQ(ea_engine_create(&o, &e1), EA_OK);
    ea_sched_opts so0 = {.bus = &b0, .max_running = 8, .max_queue = 64, .max_batch_tokens = 64, .prefix_cache = 1};
    ea_sched_opts so1 = so0;
    so1.bus = &b1;
    ea_sched *s0, *s1;
    CHECK_EQ(ea_sched_create(e0, NULL, &so0, &s0), EA_OK);
    CHECK_EQ(ea_sched_create(e1, NULL, &so1, &s1), EA_OK);
    pthread_t th;
    pthread_create(&th, NULL, run_follower, s1);
    CHECK_EQ(ea_sched_start(s0), EA_OK);
    ea_request *r;
    ea_req_params rp;
    int32_t p[60];
    prompt_of(2, p, 60);
    params(&rp, p, 60, 8, 0, 1);
    CHECK_EQ(ea_sched_submit(s1, &rp, &r), EA_ERR_INVALID_ARG); /* only rank 0 takes requests */
    /* 8 requests at once; one cancelled after its first token */
    ea_request *rs[NREQ];
    int32_t ps[NREQ][100];
    for (int i = 0; i < NREQ; i++) {
        prompt_of(i, ps[i], 20 + i * 9);
        params(&rp, ps[i], 20 + i * 9, i == 3 ? 200 : 24, i % 2, 42 + (uint64_t)i);
        CHECK_EQ(ea_sched_submit(s0, &rp, &rs[i]), EA_OK);
    }
    ea_event ev;
    CHECK_EQ(ea_req_next(rs[3], 60000, &ev), EA_OK);
    ea_req_cancel(rs[3]);
    for (int i = 0; i < NREQ; i++) {
        result got;
        collect(rs[i], &got);
        CHECK(!got.error);
        if (i != 3 && i % 2 == 0) { /* greedy ones equal their output alone */
            CHECK_EQ(got.n, alone[0][i].n);
            CHECK(memcmp(got.toks, alone[0][i].toks, sizeof(int32_t) * (size_t)got.n) == 0);
        }
        if (i == 3) CHECK_EQ(got.finish, EA_FINISH_CANCELLED);
    }
    ea_sched_stop(s0, 5); /* sends the shutdown through the bus */
    pthread_join(th, NULL);
    ea_sched_stats a, b;
    ea_sched_get_stats(s0, &a);
    ea_sched_get_stats(s1, &b);
    fprintf(stderr, "  rank0: %llu steps %llu prompt %llu generated %llu finished; rank1: %llu %llu %llu %llu\n",
            (unsigned long long)a.steps, (unsigned long long)a.prompt_tokens, (unsigned long long)a.generation_tokens,
            (unsigned long long)a.requests_finished, (unsigned long long)b.steps, (unsigned long long)b.prompt_tokens,
            (unsigned long long)b.generation_tokens, (unsigned long long)b.requests_finished);
    CHECK_EQ(a.steps, b.steps);
    CHECK_EQ(a.prompt_tokens, b.prompt_tokens);
    CHECK_EQ(a.generation_tokens, b.generation_tokens);
    CHECK_EQ(a.requests_finished, b.requests_finished);
    CHECK_EQ(b.failed, 0);
    ea_sched_destroy(s0);
    ea_sched_destroy(s1);

    /* rank 0 goes silent: the follower reports it and stops instead of hanging */
    fb.seq = fb.taken = 0;
    CHECK_EQ(ea_sched_create(e1, NULL, &so1, &s1), EA_OK);
    double t0 = ea_now_s();
    CHECK_EQ(ea_sched_run(s1), EA_ERR_PEER);
    ea_sched_get_stats(s1, &b);
    CHECK(b.failed);
    CHECK(strstr(b.failure, "rank 0") != NULL);
    CHECK(ea_now_s() - t0 < 10);
    ea_sched_destroy(s1);
    ea_engine_destroy(e0);
    ea_engine_destroy(e1);
    ea_free(fb.buf);
}

/* A hybrid model (qwen3_5_moe: DeltaNet layers with a recurrent state per sequence): the same
 * guarantees, with prompts (20..83 tokens) cut into calls by a 64-token budget shared with other
 * requests, and recomputed after preemption, with and without the prefix cache. */
TEST(hybrid_concurrent_and_preempted_equal_alone) {
    const char *bin = getenv("EAAS_BIN"), *b = getenv("EA_BUILD");
    char saved[1024], cmd[8192];
    snprintf(saved, sizeof saved, "%s", model);
    snprintf(model, sizeof model, "%s/golden-models/sched-qwen3_5_moe", b ? b : ".");
    snprintf(cmd, sizeof cmd, "[ -d %s ] || \"%s\" make-model --family qwen3_5_moe --preset tiny --seed 5 --format hf "
             "--dtype bf16 --out %s >/dev/null", model, bin, model);
    CHECK_EQ(system(cmd), 0);
    run_alone();
    concurrent_matches_alone(8, 0, 1, 0); /* the seeded pass repeats the prompts: hits from 64 tokens on */
    concurrent_matches_alone(8, 16, 0, 1);
    concurrent_matches_alone(8, 16, 1, 1); /* state snapshots compete for the 16 blocks too */
    snprintf(model, sizeof model, "%s", saved);
}

/* Hybrid prefix-cache hits restore the recurrent state snapshot at the hit's end: a prompt
 * sharing 150, 100 and 64+ tokens with earlier ones (and one that extends an earlier prompt
 * with its answer, as a chat's next turn does) gives the same tokens as with no cache. With
 * an f16 KV cache too, given the bytes of the f32 one (kv_blocks 64, not the 32 of full
 * contexts): the f32 state snapshots take twice the blocks, copied as bytes, and the same
 * snapshots fit. */
static void hybrid_prefix_hits(int kv_blocks) {
    const char *b = getenv("EA_BUILD");
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", model);
    snprintf(model, sizeof model, "%s/golden-models/sched-qwen3_5_moe", b ? b : ".");
    enum { NP = 5 };
    int32_t p[NP][240];
    int n[NP] = {150, 150, 170, 130, 0};
    prompt_of(11, p[0], 150);
    memcpy(p[1], p[0], sizeof(int32_t) * 150);                              /* the same prompt */
    memcpy(p[2], p[0], sizeof(int32_t) * 100), prompt_of(12, p[2] + 100, 70); /* shares 100 */
    memcpy(p[3], p[0], sizeof(int32_t) * 129), prompt_of(13, p[3] + 129, 1);  /* shares 129 */
    result want[NP], got[NP];
    for (int pass = 0; pass < 2; pass++) {
        ea_engine *e;
        ea_sched *s = start(&e, 2, kv_blocks, pass);
        CHECK(s != NULL);
        for (int i = 0; i < NP; i++) {
            if (i == NP - 1) { /* the next turn: prompt 0, its answer, and more */
                memcpy(p[i], p[0], sizeof(int32_t) * 150);
                memcpy(p[i] + 150, want[0].toks, sizeof(int32_t) * (size_t)want[0].n);
                n[i] = 150 + want[0].n;
                prompt_of(14, p[i] + n[i], 30);
                n[i] += 30;
            }
            ea_req_params rp;
            params(&rp, p[i], n[i], 20, 1, 7 + (uint64_t)i);
            ea_request *r;
            CHECK_EQ(ea_sched_submit(s, &rp, &r), EA_OK);
            collect(r, pass ? &got[i] : &want[i]);
        }
        ea_sched_stats st;
        ea_sched_get_stats(s, &st);
        fprintf(stderr, "  hybrid prefix cache %s: %llu hit tokens, %d snapshots (%llu bytes), state %llu bytes\n",
                pass ? "on" : "off", (unsigned long long)st.prefix_hit_tokens, st.state_snapshots,
                (unsigned long long)st.state_snapshot_bytes, (unsigned long long)st.lin_state_bytes);
        if (pass) CHECK(st.state_snapshots > 0);
        CHECK(st.lin_state_bytes > 0);
        stop(s, e);
    }
    int cached_want[NP] = {0, 128, 64, 128, 128};
    for (int i = 0; i < NP; i++) {
        fprintf(stderr, "  prompt %d (%d tokens): %d cached\n", i, n[i], got[i].cached);
        CHECK(!got[i].error && !want[i].error);
        CHECK_EQ(got[i].cached, cached_want[i]);
        CHECK_EQ(got[i].n, want[i].n);
        CHECK(memcmp(got[i].toks, want[i].toks, sizeof(int32_t) * (size_t)want[i].n) == 0);
    }
    snprintf(model, sizeof model, "%s", saved);
}
TEST(hybrid_prefix_hits_equal_misses) { hybrid_prefix_hits(0); }
TEST(hybrid_prefix_hits_f16_cache) {
    g_kv = EA_F16;
    hybrid_prefix_hits(64);
    g_kv = EA_F32;
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
    RUN(prefix_cache_chains_blocks);
    RUN(seeded_tokens_replay_from_the_seed);
    RUN(stop_token_ids_and_min_tokens);
    RUN(cancel_and_limits);
    RUN(control_bus_lockstep);
    RUN(hybrid_concurrent_and_preempted_equal_alone);
    RUN(hybrid_prefix_hits_equal_misses);
    RUN(hybrid_prefix_hits_f16_cache);
    return TEST_SUMMARY();
}
