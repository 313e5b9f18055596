/*
 * test_eplb_integration.c — EPLB on the MoE data path of a real (tiny, random)
 * model, with routing skewed on purpose by the engine's test-only router bias.
 *
 * What a user relies on, each asserted here:
 *   - outputs are bit-identical with and without EPLB: logits of a prefill and of
 *     every decode step, before, during (layer by layer) and after a rebalance,
 *     after a failed rebalance, and generated tokens (greedy and seeded) through
 *     the scheduler while the manager rebalances on its own;
 *   - the recorder's dump (workload format) equals the routing counts exactly,
 *     counted independently by a backend wrapper outside EPLB (the engine's
 *     test_wrap_backend), over the whole run and over a short window;
 *   - the manager rebalances (count > 0), layer chunk by layer chunk with version
 *     numbers, keeps the old placement when a weight move fails, and the window's
 *     balancedness rises after the rebalance;
 *   - --init-expert-location loads a placement file (and rejects a wrong one).
 * Models: `eaas make-model --preset tiny` qwen3_moe (2 MoE layers, 16 experts,
 * top-8) and deepseek_v3 (a dense first layer, 32 experts in 8 groups, top-8,
 * its own score bias): sums of 8 terms, whose order shows in the bits.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "eplb/eplb_backend.h"
#include "eplb/textio.h"
#include "harness.h"
#include "sched_util.h"
#include "serve/scheduler.h"

static char qwen[1100], dsv3[1100], work[1024];

/* ---- an independent routing counter, outside EPLB (logical ids as the router gave them) */

#define MAX_STEPS 2048
#define MAX_L 8
#define MAX_E 64

typedef struct {
    ea_moe_backend base;
    ea_moe_backend *inner; /* owns */
    ea_eplb_backend *eplb; /* borrows, may be NULL: stats after each step */
    int E, steps;
    int64_t cur[MAX_L][MAX_E];
    int64_t (*hist)[MAX_L][MAX_E]; /* [MAX_STEPS] per completed step */
    double bal[MAX_STEPS];
    uint64_t rebal[MAX_STEPS];
} counter;

static ea_status counter_submit(ea_moe_backend *be, const ea_moe_call *call) {
    counter *c = (counter *)be;
    for (int i = 0; i < call->n_tokens * call->k; i++)
        if (call->layer < MAX_L && call->ids[i] >= 0 && call->ids[i] < c->E) c->cur[call->layer][call->ids[i]]++;
    return c->inner->vt->submit(c->inner, call);
}

static ea_status counter_wait(ea_moe_backend *be, const ea_moe_call *call, ea_moe_outcome *out) {
    counter *c = (counter *)be;
    return c->inner->vt->wait(c->inner, call, out);
}

static void counter_end_step(ea_moe_backend *be) {
    counter *c = (counter *)be;
    ea_moe_end_step(c->inner);
    if (c->steps < MAX_STEPS) {
        memcpy(c->hist[c->steps], c->cur, sizeof c->cur);
        if (c->eplb) {
            ea_eplb_backend_stats st;
            ea_eplb_backend_get_stats(c->eplb, &st);
            c->bal[c->steps] = st.balancedness;
            c->rebal[c->steps] = st.rebalances_total;
        }
    }
    c->steps++;
    memset(c->cur, 0, sizeof c->cur);
}

static void counter_destroy(ea_moe_backend *be) {
    counter *c = (counter *)be;
    ea_moe_backend_destroy(c->inner);
    c->inner = NULL;
}

static const ea_moe_backend_vtable counter_vt = {
    .submit = counter_submit, .wait = counter_wait, .end_step = counter_end_step, .destroy = counter_destroy, .name = "counter"};

static ea_status counter_wrap(void *ctx, ea_moe_backend *inner, ea_moe_backend **out) {
    counter *c = ctx;
    c->base.vt = &counter_vt;
    c->inner = inner;
    *out = &c->base;
    return EA_OK;
}

static counter *counter_new(int E) {
    counter *c = calloc(1, sizeof *c);
    c->hist = calloc(MAX_STEPS, sizeof *c->hist);
    c->E = E;
    return c;
}
static void counter_free(counter *c) {
    if (!c) return;
    free(c->hist);
    free(c);
}

/* ---- engines */

static float g_bias[MAX_E];

typedef struct {
    int eplb, redundant, ranks, rank, window, interval, layers_per_step, record, record_window;
    const char *algo;
    double min_bal;
    const char *init;
} eplb_cfg;

static ea_status engine(const char *model, const eplb_cfg *ec, counter *c, int max_seqs, ea_engine **out) {
    ea_engine_opts o = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 256, .max_seqs = max_seqs,
                        .block_size = 16, .test_router_bias = g_bias, .test_wrap_backend = counter_wrap,
                        .test_wrap_ctx = c};
    if (ec && ec->eplb) {
        o.eplb.on = 1;
        o.eplb.redundant = ec->redundant;
        o.eplb.ranks = ec->ranks;
        o.eplb.rank = ec->rank;
        o.eplb.window = ec->window;
        o.eplb.interval = ec->interval;
        o.eplb.layers_per_step = ec->layers_per_step;
        o.eplb.min_balancedness = ec->min_bal;
        o.eplb.record = ec->record;
        o.eplb.init_expert_location = ec->init;
        o.eplb.record_window = ec->record_window;
        o.eplb.algorithm = ec->algo;
    }
    ea_status s = ea_engine_create(&o, out);
    if (s == EA_OK) c->eplb = (*out)->eplb;
    return s;
}

/* Run tokens [pos0, pos0+n) of seq through the forward pass (one step); logits of every row. */
static ea_status run_step(ea_engine *e, int seq, int pos0, int n, const int32_t *tok, float *logits) {
    int32_t pos[64], sq[64], rows[64];
    for (int i = 0; i < n; i++) pos[i] = pos0 + i, sq[i] = seq, rows[i] = i;
    EA_TRY(ea_kv_seq_reserve(&e->kv, seq, pos0 + n));
    ea_status s = ea_forward_run(e->fw, n, tok, pos, sq, n, rows, logits);
    ea_moe_end_step(e->be); /* EPLB rebalances here */
    return s;
}


/* Sum of the counter's last `w` steps for model layer l into out[E]; steps_total = completed steps. */
static void counter_window(const counter *c, int l, int w, int64_t *out) {
    memset(out, 0, sizeof(int64_t) * (size_t)c->E);
    int from = c->steps > w ? c->steps - w : 0;
    for (int s = from; s < c->steps; s++)
        for (int e = 0; e < c->E; e++) out[e] += c->hist[s][l][e];
}

/* The dump parsed back equals the counter over the last w steps, MoE layers only. */
static int dump_matches(ea_engine *e, const counter *c, int w, int64_t *total_tokens) {
    char *text;
    size_t len;
    if (ea_eplb_record_dump(e->eplb, &text, &len) != EA_OK) {
        fprintf(stderr, "  dump: %s\n", ea_errmsg());
        return 0;
    }
    int L, E;
    int64_t *counts;
    ea_status s = ea_eplb_workload_parse(text, len, "dump", &L, &E, &counts);
    ea_free(text);
    if (s != EA_OK) {
        fprintf(stderr, "  dump parse: %s\n", ea_errmsg());
        return 0;
    }
    int ok = E == c->E, ml = 0;
    *total_tokens = 0;
    for (int l = 0; l < e->m->cfg.n_layers && ok; l++) {
        if (!e->m->cfg.layer_is_moe[l]) continue;
        if (ea_eplb_backend_moe_layer(e->eplb, l) != ml) ok = 0;
        int64_t want[MAX_E];
        counter_window(c, l, w, want);
        for (int x = 0; x < E && ok; x++) {
            if (counts[(size_t)ml * E + x] != want[x]) {
                fprintf(stderr, "  dump layer %d expert %d: %lld, counted %lld\n", ml, x,
                        (long long)counts[(size_t)ml * E + x], (long long)want[x]);
                ok = 0;
            }
            *total_tokens += want[x];
        }
        ml++;
    }
    if (ml != L) ok = 0;
    ea_free(counts);
    return ok;
}

/* Same routing step by step (forward calls driven by the test, so the same batches). */
static int same_counts(const counter *a, const counter *b) {
    if (a->steps != b->steps) return 0;
    for (int s = 0; s < a->steps && s < MAX_STEPS; s++)
        if (memcmp(a->hist[s], b->hist[s], sizeof a->hist[s])) return 0;
    return 1;
}

/* Same routing in total (the scheduler may cut the same work into different steps). */
static int same_totals(const counter *a, const counter *b) {
    for (int l = 0; l < MAX_L; l++) {
        int64_t x[MAX_E], y[MAX_E];
        counter_window(a, l, MAX_STEPS, x);
        counter_window(b, l, MAX_STEPS, y);
        if (memcmp(x, y, sizeof(int64_t) * (size_t)a->E)) return 0;
    }
    return 1;
}

/* ---- 1. forward level: bit-identical logits through a failed and a successful rebalance */

static void forward_identity(const char *model, int n_ranks, int redundant, const char *algo) {
    counter *ca = counter_new(MAX_E), *cb = counter_new(MAX_E);
    ea_engine *a = NULL, *b = NULL;
    eplb_cfg ec = {.eplb = 1, .redundant = redundant, .ranks = n_ranks, .rank = -1, .window = 3, .interval = -1,
                   .layers_per_step = 1, .record = 1, .algo = algo};
    CHECK_EQ(engine(model, NULL, ca, 4, &a), EA_OK);
    if (engine(model, &ec, cb, 4, &b) != EA_OK) FAIL_("engine with EPLB: %s", ea_errmsg());
    CHECK(b->eplb != NULL);
    ca->E = cb->E = a->m->cfg.n_experts;
    int V = a->m->cfg.vocab_size, NPR = 40;
    size_t sz = sizeof(float) * (size_t)V * NPR;
    float *la = malloc(sz), *lb = malloc(sz), *first = malloc(sz);
    int32_t p[64];
    prompt_from(77, 1, p, NPR);
    CHECK_EQ(run_step(a, 0, 0, NPR, p, la), EA_OK);
    CHECK_EQ(run_step(b, 0, 0, NPR, p, lb), EA_OK);
    CHECK(memcmp(la, lb, sz) == 0);
    memcpy(first, la, sz);
    const ea_eplb_meta *m = ea_eplb_backend_meta(b->eplb);
    int Lm = m->n_layers, P = m->n_physical, E = m->n_logical;
    int32_t *trivial = malloc(sizeof(int32_t) * (size_t)Lm * P);
    memcpy(trivial, m->phy2log, sizeof(int32_t) * (size_t)Lm * P);

    /* a failed weight move: nothing switches, outputs unchanged */
    ea_eplb_backend_fail_moves(b->eplb, 1);
    ea_eplb_request_rebalance(b->eplb);
    int pos = NPR;
    int32_t t = p[NPR - 1];
    CHECK_EQ(run_step(a, 0, pos, 1, &t, la), EA_OK);
    CHECK_EQ(run_step(b, 0, pos, 1, &t, lb), EA_OK);
    pos++;
    CHECK(memcmp(la, lb, sizeof(float) * (size_t)V) == 0);
    ea_eplb_backend_stats st;
    ea_eplb_backend_get_stats(b->eplb, &st);
    CHECK_EQ(st.failures, 1);
    CHECK_EQ(st.rebalances_total, 0);
    CHECK(strstr(st.reason, "injected") != NULL);
    CHECK(memcmp(trivial, m->phy2log, sizeof(int32_t) * (size_t)Lm * P) == 0);
    for (int l = 0; l < Lm; l++) CHECK_EQ(m->version[l], 0);
    fprintf(stderr, "  failed move kept the old placement: \"%s\"\n", st.reason);

    /* a successful rebalance: one layer per step, logits identical at every step */
    ea_eplb_request_rebalance(b->eplb);
    int switched_steps = 0;
    for (int i = 0; i < Lm + 2; i++) {
        t = (int32_t)(100 + i);
        CHECK_EQ(run_step(a, 0, pos, 1, &t, la), EA_OK);
        CHECK_EQ(run_step(b, 0, pos, 1, &t, lb), EA_OK);
        pos++;
        CHECK(memcmp(la, lb, sizeof(float) * (size_t)V) == 0);
        ea_eplb_backend_get_stats(b->eplb, &st);
        int n_switched = 0;
        for (int l = 0; l < Lm; l++) n_switched += m->version[l] > 0;
        if (st.plan_in_progress) {
            CHECK_EQ(n_switched, i + 1); /* K = 1 layer per step */
            switched_steps++;
        }
    }
    ea_eplb_backend_get_stats(b->eplb, &st);
    CHECK_EQ(st.rebalances_total, 1);
    CHECK(!st.plan_in_progress);
    CHECK(memcmp(trivial, m->phy2log, sizeof(int32_t) * (size_t)Lm * P) != 0);
    for (int l = 0; l < Lm; l++) CHECK(m->version[l] <= 1);
    fprintf(stderr, "  rebalance: %llu layers switched over %d steps, balancedness planned %.4f -> %.4f\n",
            (unsigned long long)st.layer_switches, switched_steps + 1, st.last_plan_before, st.last_plan_after);
    CHECK(st.last_plan_after > st.last_plan_before);
    /* the hot expert got replicas on several ranks, and different ranks dispatch to different ones */
    int hot = 0;
    for (int e = 1; e < E; e++)
        if (g_bias[e] > g_bias[hot]) hot = e;
    int distinct = 0;
    for (int l = 0; l < Lm; l++) {
        CHECK(m->log2all_n[l * E + hot] >= 2);
        const int32_t *d = m->dispatch + ((size_t)l * E + hot) * m->n_ranks;
        for (int r = 1; r < m->n_ranks; r++) distinct += d[r] != d[0];
    }
    CHECK(distinct > 0);

    /* the same prompt again on a fresh sequence, after the rebalance: same bits as before it */
    CHECK_EQ(run_step(a, 1, 0, NPR, p, la), EA_OK);
    CHECK_EQ(run_step(b, 1, 0, NPR, p, lb), EA_OK);
    CHECK(memcmp(la, lb, sz) == 0);
    CHECK(memcmp(lb, first, sz) == 0);
    CHECK(same_counts(ca, cb));

    /* the dump: window of 3 steps (the recorder's window = the manager's here), exact */
    int64_t tokens;
    CHECK(dump_matches(b, cb, 3, &tokens));
    fprintf(stderr, "  dump over the last 3 steps: %lld routed tokens, equal to the independent count\n",
            (long long)tokens);
    free(trivial);
    free(la);
    free(lb);
    free(first);
    ea_engine_destroy(a);
    ea_engine_destroy(b);
    counter_free(ca);
    counter_free(cb);
}

TEST(qwen3_forward_identical_through_rebalance) {
    memset(g_bias, 0, sizeof g_bias);
    g_bias[0] = 0.5f; /* expert 0 is always chosen; the other 7 follow the router */
    forward_identity(qwen, 4, 4, "deepseek");
}

TEST(deepseek_v3_forward_identical_through_rebalance) {
    memset(g_bias, 0, sizeof g_bias);
    g_bias[5] = 0.5f; /* on top of the model's own score-correction bias */
    forward_identity(dsv3, 2, 2, "refined");
}

/* ---- 2. generation through the scheduler, the manager rebalancing on its own */

typedef struct {
    ea_eplb_backend *b;
    int stop, polls, errors;
} poller;

static void *poll_main(void *arg) {
    poller *p = arg;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        ea_eplb_backend_stats st;
        ea_eplb_backend_get_stats(p->b, &st);
        char *text;
        size_t len;
        if (ea_eplb_record_dump(p->b, &text, &len) != EA_OK || len == 0 || !(st.balancedness > 0.0))
            p->errors++;
        else
            ea_free(text);
        p->polls++;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

#define NREQ 4
#define NTOK 48

static void generate(ea_engine *e, result out[2][NREQ]) {
    ea_sched_opts so = {.max_running = NREQ, .max_queue = 16, .max_batch_tokens = 64, .prefix_cache = 0};
    ea_sched *s;
    if (ea_sched_create(e, NULL, &so, &s) != EA_OK || ea_sched_start(s) != EA_OK) {
        fprintf(stderr, "  scheduler: %s\n", ea_errmsg());
        memset(out, 0, sizeof(result) * 2 * NREQ);
        out[0][0].error = 1;
        return;
    }
    for (int seeded = 0; seeded < 2; seeded++) {
        ea_request *rs[NREQ];
        for (int i = 0; i < NREQ; i++) {
            int32_t p[64];
            int n = 12 + 5 * i;
            prompt_from(77, 10 + i, p, n);
            ea_req_params rp;
            memset(&rp, 0, sizeof rp);
            rp.prompt = p;
            rp.n_prompt = n;
            rp.max_tokens = NTOK;
            rp.ignore_eos = 1;
            ea_sampling_defaults(&rp.sp);
            rp.sp.temperature = seeded ? 0.9f : 0.0f;
            rp.sp.seed = 1234 + (uint64_t)i;
            if (ea_sched_submit(s, &rp, &rs[i]) != EA_OK) rs[i] = NULL;
        }
        for (int i = 0; i < NREQ; i++) {
            if (rs[i])
                collect(rs[i], &out[seeded][i]);
            else
                out[seeded][i].error = 1;
        }
    }
    ea_sched_destroy(s);
}

TEST(generation_identical_manager_rebalances) {
    memset(g_bias, 0, sizeof g_bias);
    g_bias[0] = 0.5f;
    g_bias[1] = 0.02f;
    enum { W = 12 };
    counter *ca = counter_new(MAX_E), *cb = counter_new(MAX_E);
    ea_engine *a = NULL, *b = NULL;
    eplb_cfg ec = {.eplb = 1, .redundant = 4, .ranks = 4, .rank = -1, .window = W, .interval = W,
                   .layers_per_step = 1, .min_bal = 0.9, .record_window = MAX_STEPS};
    CHECK_EQ(engine(qwen, NULL, ca, NREQ, &a), EA_OK);
    if (engine(qwen, &ec, cb, NREQ, &b) != EA_OK) FAIL_("engine with EPLB: %s", ea_errmsg());
    ca->E = cb->E = a->m->cfg.n_experts;
    static result ra[2][NREQ], rb[2][NREQ];
    generate(a, ra);
    ea_eplb_record_start(b->eplb); /* HTTP start: recording from here on */
    ea_eplb_backend_stats st0;
    ea_eplb_backend_get_stats(b->eplb, &st0);
    CHECK(st0.recording);
    /* another thread reads metrics and dumps while the step loop runs (as HTTP handlers will) */
    poller pl = {.b = b->eplb};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, poll_main, &pl), 0);
    generate(b, rb);
    __atomic_store_n(&pl.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK(pl.polls > 0 && pl.errors == 0);
    fprintf(stderr, "  %d stats+dump polls from another thread during generation\n", pl.polls);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < NREQ; i++) {
            CHECK(!ra[s][i].error && !rb[s][i].error);
            CHECK_EQ(ra[s][i].n, NTOK);
            CHECK_EQ(rb[s][i].n, NTOK);
            CHECK(memcmp(ra[s][i].toks, rb[s][i].toks, sizeof(int32_t) * NTOK) == 0);
        }
    ea_eplb_backend_stats st;
    ea_eplb_backend_get_stats(b->eplb, &st);
    fprintf(stderr, "  %llu steps, %llu rebalances, %llu layer switches, %llu failures; plan %.4f -> %.4f\n",
            (unsigned long long)st.steps, (unsigned long long)st.rebalances_total,
            (unsigned long long)st.layer_switches, (unsigned long long)st.failures, st.last_plan_before,
            st.last_plan_after);
    CHECK(st.rebalances_total > 0);
    CHECK_EQ(st.failures, 0);
    CHECK_EQ((int)st.steps, cb->steps);

    /* balancedness of the window: just before the first rebalance vs a full window after it */
    int first = -1;
    for (int s = 0; s < cb->steps && s < MAX_STEPS; s++)
        if (cb->rebal[s] > 0) {
            first = s;
            break;
        }
    CHECK(first >= W);
    double before = cb->bal[first - 2]; /* the step before its first layer switched */
    CHECK(first + W < cb->steps);
    double after = cb->bal[first + W];
    fprintf(stderr, "  window balancedness: %.4f before the first rebalance (step %d), %.4f a full window after\n",
            before, first - 1, after);
    CHECK(after > before + 0.05);

    /* the dump: recording since record_start, window >= all steps: the whole run, exact */
    CHECK(cb->steps < MAX_STEPS);
    int64_t tokens;
    CHECK(dump_matches(b, cb, MAX_STEPS, &tokens));
    int64_t routed = 0; /* layer 0's (token, expert) pairs; layer 1 has as many (2 MoE layers) */
    for (int s = 0; s < cb->steps; s++)
        for (int e = 0; e < cb->E; e++) routed += cb->hist[s][0][e];
    CHECK(tokens > 0 && tokens == 2 * routed);
    ea_eplb_record_stop(b->eplb);
    ea_eplb_backend_get_stats(b->eplb, &st0);
    CHECK(!st0.recording);
    CHECK(same_totals(ca, cb));
    fprintf(stderr, "  tokens identical (greedy and seeded, %d requests x %d tokens each); dump of all %d steps "
            "= %lld routed (token, expert) pairs, exact\n", NREQ, NTOK, cb->steps, (long long)tokens);
    ea_engine_destroy(a);
    ea_engine_destroy(b);
    counter_free(ca);
    counter_free(cb);
}

/* ---- 3. --init-expert-location */

TEST(init_expert_location) {
    memset(g_bias, 0, sizeof g_bias);
    g_bias[0] = 0.5f;
    /* a placement for 2 layers x 16 experts over 20 slots (5 on each of 4 ranks):
     * expert 0 thrice, 3 and 6 twice */
    enum { NE = 16, NP = 20 };
    ea_eplb_placement pl;
    CHECK_EQ(ea_eplb_placement_init(&pl, 2, NE, NP), EA_OK);
    static const int32_t p2l[NP] = {0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 3, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    for (int l = 0; l < 2; l++) memcpy(pl.phy2log + l * NP, p2l, sizeof p2l);
    for (int l = 0; l < 2; l++) {
        int seen[NE] = {0};
        for (int p = 0; p < NP; p++) pl.phyrank[l * NP + p] = seen[p2l[p]]++;
        for (int e = 0; e < NE; e++) pl.logcnt[l * NE + e] = seen[e];
    }
    char path[1100], bad[1100];
    snprintf(path, sizeof path, "%s/eplb-init.txt", work);
    snprintf(bad, sizeof bad, "%s/eplb-init-bad.txt", work);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_EQ(ea_eplb_placement_write(f, "# test placement\n", &pl), EA_OK);
    fclose(f);
    ea_eplb_placement_deinit(&pl);

    counter *ca = counter_new(MAX_E), *cb = counter_new(MAX_E);
    ea_engine *a = NULL, *b = NULL;
    eplb_cfg ec = {.eplb = 1, .ranks = 4, .rank = -1, .window = 8, .interval = -1, .init = path};
    CHECK_EQ(engine(qwen, NULL, ca, 1, &a), EA_OK);
    if (engine(qwen, &ec, cb, 1, &b) != EA_OK) FAIL_("engine with --init-expert-location: %s", ea_errmsg());
    const ea_eplb_meta *m = ea_eplb_backend_meta(b->eplb);
    CHECK_EQ(m->n_physical, NP);
    CHECK(memcmp(m->phy2log, p2l, sizeof p2l) == 0 && memcmp(m->phy2log + NP, p2l, sizeof p2l) == 0);
    int V = a->m->cfg.vocab_size;
    size_t sz = sizeof(float) * (size_t)V * 24;
    float *la = malloc(sz), *lb = malloc(sz);
    int32_t p[24];
    prompt_from(77, 3, p, 24);
    CHECK_EQ(run_step(a, 0, 0, 24, p, la), EA_OK);
    CHECK_EQ(run_step(b, 0, 0, 24, p, lb), EA_OK);
    CHECK(memcmp(la, lb, sz) == 0);
    free(la);
    free(lb);
    ea_engine_destroy(a);
    ea_engine_destroy(b);

    /* wrong: --eplb-redundant disagrees with the file; a file for another expert count */
    ec.redundant = 8;
    ea_engine *x = NULL;
    CHECK_EQ(engine(qwen, &ec, cb, 1, &x), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "eplb-init.txt") != NULL && strstr(ea_errmsg(), "--eplb-redundant 8") != NULL);
    fprintf(stderr, "  mismatch reported: %s\n", ea_errmsg());
    CHECK_EQ(ea_eplb_placement_init(&pl, 2, 4, 4), EA_OK);
    ea_eplb_placement_trivial(&pl);
    f = fopen(bad, "w");
    CHECK(f != NULL);
    CHECK_EQ(ea_eplb_placement_write(f, NULL, &pl), EA_OK);
    fclose(f);
    ea_eplb_placement_deinit(&pl);
    ec.redundant = 0;
    ec.init = bad;
    CHECK_EQ(engine(qwen, &ec, cb, 1, &x), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "4 experts") != NULL && strstr(ea_errmsg(), "16 experts") != NULL);
    fprintf(stderr, "  mismatch reported: %s\n", ea_errmsg());
    counter_free(ca);
    counter_free(cb);
}

int main(void) {
    const char *bin = getenv("EAAS_BIN"), *b = getenv("EA_BUILD");
    if (!bin || !b) {
        fprintf(stderr, "needs EAAS_BIN and EA_BUILD (run through ctest)\n");
        return 1;
    }
    snprintf(work, sizeof work, "%s/golden-models", b);
    snprintf(qwen, sizeof qwen, "%s/eplb-qwen3", work);
    snprintf(dsv3, sizeof dsv3, "%s/eplb-dsv3", work);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && ([ -d %s ] || \"%s\" make-model --family qwen3_moe --preset tiny --seed 11 --format hf "
             "--dtype bf16 --out %s >/dev/null) && ([ -d %s ] || \"%s\" make-model --family deepseek_v3 --preset tiny "
             "--seed 11 --format hf --dtype bf16 --out %s >/dev/null)",
             work, qwen, bin, qwen, dsv3, bin, dsv3);
    if (system(cmd) != 0) {
        fprintf(stderr, "make-model failed\n");
        return 1;
    }
    RUN(qwen3_forward_identical_through_rebalance);
    RUN(deepseek_v3_forward_identical_through_rebalance);
    RUN(generation_identical_manager_rebalances);
    RUN(init_expert_location);
    return TEST_SUMMARY();
}
