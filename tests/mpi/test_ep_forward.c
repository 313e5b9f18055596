/*
 * test_ep_forward.c — expert and tensor parallelism against one process, on
 * real MPI ranks over loopback.
 *
 * Run by CTest without MPI, the program launches itself with mpirun (2 and 4
 * ranks) in worker mode and checks each job; `mpirun -n N test_ep_forward
 * --worker` runs one job by hand. In a job every rank:
 *   - checks the dist collectives (bcast of a message, uneven allgatherv,
 *     rank-order all-reduce gives the same bits on every rank)
 *   - for every family (tiny random models from `eaas make-model`, HF format):
 *     runs a 6-token prefill and 5 greedy decode steps with the local backend
 *     (all experts), then the same tokens with --parallel expert: every
 *     logit bit-identical, on every rank; the EP stats add up (pairs over
 *     ranks = all pairs) and render as JSON
 *   - tensor mode where the family splits (qwen3_moe, qwen2_moe, mixtral;
 *     heads and KV heads divisible by N): same greedy token at every step and
 *     logits within 1e-3 absolute (the split reorders two sums)
 *   - the combine on its own: agreeing routing gives the local backend's bits
 *     (k = 4), routing the ranks disagree on is an error on every rank
 *   - data-parallel attention: the backend on its own, and engines whose every
 *     rank runs a full call with every token on expert 0 (one product of all
 *     ranks' tokens) against one process
 * A third job checks the deadline: the last rank stays out of a barrier and
 * every other rank must fail with EA_ERR_TIMEOUT naming it.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "ep/dist.h"
#include "ep/ep.h"
#include "ep/ep_engine.h"
#include "harness.h"
#include "kernels/matmul.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "moe/moe_local.h"
#include "serve/engine.h"

/* tiny presets route top-4..8 of 16 or 32 experts; "mixtral_k4" is Mixtral's
 * tiny (8 experts, top-2) made with --top-k 4 */
static const char *families[] = {"qwen3_moe", "qwen2_moe", "mixtral", "mixtral_k4", "olmoe", "deepseek_v2", "deepseek_v3"};
#define N_FAM 7
#define N_PROMPT 6
#define N_DECODE 5
#define N_STEPS (1 + N_DECODE)

static ea_dist *g_d;
static char g_models[1024];
static ea_dtype g_kv = EA_F32; /* the KV cache dtype of every rig */

/* One rank's runtime, built exactly as the product builds it (serve/engine.h). */
static ea_status rig_open(ea_engine **g, const char *path, ea_par_mode mode) {
    ea_engine_opts o = {.model_path = path, .threads = 1, .max_tokens = 16, .max_ctx = 64, .max_seqs = 1,
                        .kv_blocks = 8, .block_size = 16, .kv_dtype = g_kv, .moe = ea_engine_moe_parallel(mode, g_d)};
    EA_TRY(ea_engine_create(&o, g));
    return ea_kv_seq_reserve(&(*g)->kv, 0, N_PROMPT + N_DECODE + 1);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Run the prompt then N_DECODE steps. If tokens_in is NULL, choose greedily and
 * write the chosen tokens to tokens_out; else feed tokens_in. logits (N_STEPS, V). */
static ea_status run(ea_engine *g, const int32_t *tokens_in, int32_t *tokens_out, float *logits) {
    int V = g->m->cfg.vocab_size;
    int32_t tok[N_PROMPT], pos[N_PROMPT], seq[N_PROMPT] = {0};
    for (int i = 0; i < N_PROMPT; i++) tok[i] = 1000 + 37 * i, pos[i] = i;
    int32_t last = N_PROMPT - 1;
    EA_TRY(ea_forward_run(g->fw, N_PROMPT, tok, pos, seq, 1, &last, logits));
    ea_moe_end_step(g->be);
    for (int s = 1; s < N_STEPS; s++) {
        int32_t t = tokens_in ? tokens_in[s - 1] : argmax(logits + (size_t)(s - 1) * V, V);
        if (tokens_out) tokens_out[s - 1] = t;
        int32_t p = N_PROMPT + s - 1, z = 0, sq = 0;
        EA_TRY(ea_forward_run(g->fw, 1, &t, &p, &sq, 1, &z, logits + (size_t)s * V));
        ea_moe_end_step(g->be);
    }
    return EA_OK;
}

static char *model_path(const char *fam) {
    static char p[1200];
    snprintf(p, sizeof p, "%s/%s", g_models, fam);
    return p;
}

TEST(dist_collectives) {
    int r = ea_dist_rank(g_d), N = ea_dist_size(g_d);
    ea_sbuf m = {0};
    const char *text = "submit 42 {\"prompt\":\"hi\"}";
    if (r == 0) ea_sbuf_puts(&m, text);
    CHECK(ea_dist_bcast_msg(g_d, &m, 0, 1 << 20, "test msg") == EA_OK);
    CHECK_EQ(m.len, strlen(text));
    CHECK(memcmp(m.data, text, m.len) == 0);
    ea_sbuf_deinit(&m);
    /* uneven allgatherv: rank i sends i+1 bytes of value i */
    size_t counts[64], total = 0;
    for (int i = 0; i < N; i++) total += counts[i] = (size_t)i + 1;
    CHECK(N <= 64 && total <= 64 * 65 / 2);
    uint8_t send[64], recv[64 * 65 / 2];
    memset(send, r, sizeof send);
    CHECK(ea_dist_allgatherv(g_d, send, recv, counts, "test gather") == EA_OK);
    size_t o = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j <= i; j++) CHECK_EQ(recv[o++], i);
    /* rank-order sum: same bits everywhere, equal to the sum done here in order */
    float v[3] = {0.1f * (float)(r + 1), 1e8f * (float)(r % 2 ? -1 : 1), 1e-8f}, want[3] = {0, 0, 0};
    for (int i = 0; i < N; i++) {
        want[0] += 0.1f * (float)(i + 1);
        want[1] += 1e8f * (float)(i % 2 ? -1 : 1);
        want[2] += 1e-8f;
    }
    CHECK(ea_dist_allreduce_sum_f32(g_d, v, 3, "test sum") == EA_OK);
    CHECK(memcmp(v, want, sizeof v) == 0);
    int64_t mx[1] = {r};
    CHECK(ea_dist_allreduce_max_i64(g_d, mx, 1, "test max") == EA_OK);
    CHECK_EQ(mx[0], N - 1);
    CHECK(ea_dist_barrier(g_d, "test barrier") == EA_OK);
}

/* hash of this rank's bytes equals every other rank's */
static int same_on_all_ranks(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    if (ea_dist_allreduce_max_i64(g_d, v, 2, "test hash") != EA_OK) return 0;
    return v[0] == (int64_t)(h >> 1) && -v[1] == (int64_t)(h >> 1);
}

static void check_family(const char *fam, int *tp_checked) {
    ea_engine *g = NULL;
    ea_status s = rig_open(&g, model_path(fam), EA_PAR_NONE);
    if (s != EA_OK) FAIL_("%s: local: %s", fam, ea_errmsg());
    int V = g->m->cfg.vocab_size, N = ea_dist_size(g_d);
    const ea_model_config *c = &g->m->cfg;
    int tp_ok = c->kv_lora_rank == 0 && c->qk_norm != EA_QKNORM_FULL && c->n_heads % N == 0 && c->n_kv_heads % N == 0 &&
                c->moe_intermediate_size % N == 0;
    size_t L = (size_t)N_STEPS * V;
    float *ref = ea_malloc(L * sizeof(float)), *got = ea_malloc(L * sizeof(float));
    int32_t toks[N_DECODE];
    CHECK(ref && got);
    s = run(g, NULL, toks, ref);
    ea_engine_destroy(g);
    g = NULL;
    if (s != EA_OK) {
        ea_free(ref), ea_free(got);
        FAIL_("%s: local run: %s", fam, ea_errmsg());
    }

    s = rig_open(&g, model_path(fam), EA_PAR_EXPERT);
    if (s == EA_OK) s = run(g, toks, NULL, got);
    ea_ep_stats st;
    int have = s == EA_OK && g->par && ea_ep_engine_stats(g->par, &st);
    int64_t pairs[2] = {have ? (int64_t)st.pairs_local : -1, have ? (int64_t)st.pairs_total : -1};
    char *json = NULL;
    if (have) ea_ep_stats_json(&st, &json);
    ea_engine_destroy(g);
    g = NULL; /* the stats views die here; only copied numbers are used below */
    if (s != EA_OK) {
        ea_free(ref), ea_free(got), ea_free(json);
        FAIL_("%s: expert: %s", fam, ea_errmsg());
    }
    size_t diff = 0;
    for (size_t i = 0; i < L; i++) diff += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
    if (diff) fprintf(stderr, "  %s: expert parallel: %zu of %zu logits differ from one process\n", fam, diff, L);
    CHECK_EQ(diff, 0);
    CHECK(same_on_all_ranks(got, L * sizeof(float)));
    CHECK(have && json && strstr(json, "\"combine\"") && strstr(json, "\"experts\""));
    ea_free(json);
    int64_t tot = pairs[1];
    CHECK(ea_dist_allreduce_sum_i64(g_d, pairs, 1, "test pairs") == EA_OK);
    CHECK_EQ(pairs[0], tot); /* every pair computed by exactly one rank */

    if (tp_ok) {
        s = rig_open(&g, model_path(fam), EA_PAR_TENSOR);
        if (s == EA_OK) s = run(g, toks, NULL, got);
        ea_engine_destroy(g);
        g = NULL;
        if (s != EA_OK) {
            ea_free(ref), ea_free(got);
            FAIL_("%s: tensor: %s", fam, ea_errmsg());
        }
        double worst = 0;
        int same_tok = 1;
        for (int k = 0; k < N_STEPS; k++) {
            same_tok &= argmax(ref + (size_t)k * V, V) == argmax(got + (size_t)k * V, V);
            for (int i = 0; i < V; i++) {
                double dd = fabs((double)ref[(size_t)k * V + i] - got[(size_t)k * V + i]);
                if (dd > worst) worst = dd;
            }
        }
        if (ea_dist_rank(g_d) == 0) fprintf(stderr, "  %s: tensor parallel over %d: max |logit diff| %.3g\n", fam, N, worst);
        CHECK(same_tok);
        CHECK(worst <= 1e-3);
        CHECK(same_on_all_ranks(got, L * sizeof(float)));
        (*tp_checked)++;
    } else {
        /* the refusal is one clear error on every rank */
        s = rig_open(&g, model_path(fam), EA_PAR_TENSOR);
        ea_engine_destroy(g);
        g = NULL;
        CHECK(s != EA_OK);
        CHECK(strstr(ea_errmsg(), "--parallel tensor") != NULL);
    }
    ea_free(ref);
    ea_free(got);
}

TEST(families_ep_bit_identical_tp_close) {
    int tp_checked = 0;
    for (int f = 0; f < N_FAM; f++) {
        int before = ea_t_cur_failed;
        check_family(families[f], &tp_checked);
        if (ea_t_cur_failed && !before) fprintf(stderr, "  (family %s)\n", families[f]);
        if (ea_t_cur_failed) return;
    }
    if (ea_dist_size(g_d) == 2) CHECK(tp_checked >= 3); /* qwen3_moe, qwen2_moe, mixtral split over 2 */
}

/* --kv-cache-dtype f16 / bf16: expert parallelism still gives one process's bits
 * (GQA and MLA), tensor parallelism stays close. */
TEST(half_kv_ep_bit_identical) {
    int tp_checked = 0;
    const char *fams[] = {"qwen3_moe", "deepseek_v3"};
    const ea_dtype kvs[] = {EA_F16, EA_BF16};
    for (int f = 0; f < 2 && !ea_t_cur_failed; f++) {
        g_kv = kvs[f];
        check_family(fams[f], &tp_checked);
    }
    g_kv = EA_F32;
}

/* The ep backend on its own, 8 synthetic experts over the ranks (contiguous):
 * routing every rank agrees on gives the local backend's bits (k = 4 slots);
 * routing the ranks disagree on, with pair counts per rank that still agree
 * (rank 1 swaps token 0's two slots), makes ranks 0 and 1 both send pair 0:
 * every rank's combine reports it ("twice") instead of adding a wrong sum. */
enum { C_H = 16, C_F = 8, C_S = 8 };
static float c_wb[C_S][3][C_H * C_F];

/* C_S synthetic f32 experts (the same on every rank) */
static void synth_experts(ea_ffn_weights *ex) {
    uint64_t st = 5;
    for (int e = 0; e < C_S; e++) {
        ea_tensor *t[3] = {&ex[e].gate, &ex[e].up, &ex[e].down};
        for (int m = 0; m < 3; m++) {
            for (int i = 0; i < C_H * C_F; i++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                c_wb[e][m][i] = ((float)(st >> 40) / 16777216.0f - 0.5f) * 0.5f;
            }
            *t[m] = (ea_tensor){.name = "w", .dtype = EA_F32, .n_dims = 2, .shape = {m == 2 ? C_H : C_F, m == 2 ? C_F : C_H},
                                .data = c_wb[e][m], .nbytes = sizeof(float) * C_H * C_F};
        }
    }
}

TEST(combine_rejects_disagreeing_routing) {
    int r = ea_dist_rank(g_d), N = ea_dist_size(g_d);
    ea_ffn_weights ex[C_S];
    synth_experts(ex);
    ea_ffn_weights *layers[1] = {ex};
    ea_eplb_meta pl;
    CHECK_EQ(ea_eplb_meta_init_trivial(&pl, 1, C_S, C_S, N, 1), EA_OK);
    ea_kctx *kc;
    CHECK_EQ(ea_kctx_create(NULL, 8, 64, &kc), EA_OK);
    ea_ep_opts o = {.dist = g_d, .place = &pl, .n_layers = 1, .hidden = C_H, .ff = C_F, .max_tokens = 2, .max_k = 4,
                    .experts = (ea_ffn_weights *const *)layers, .kctx = kc};
    ea_moe_local_opts lo = {.n_layers = 1, .hidden = C_H, .ff = C_F, .n_experts = C_S, .max_tokens = 2, .max_k = 4,
                            .experts = (ea_ffn_weights *const *)layers, .kctx = kc};
    ea_moe_backend *ep = NULL, *loc = NULL;
    CHECK_EQ(ea_ep_backend_create(&o, &ep), EA_OK);
    CHECK_EQ(ea_moe_local_create(&lo, &loc), EA_OK);
    float x[2 * C_H], y[2 * C_H], yl[2 * C_H], w[8] = {0.53f, 0.29f, 0.11f, 0.07f, 0.41f, 0.33f, 0.17f, 0.09f};
    for (int i = 0; i < 2 * C_H; i++) x[i] = sinf((float)i * 0.7f);
    int32_t agree[8] = {0, 3, 5, 7, 6, 1, 2, 4};
    CHECK_EQ(ea_moe_backend_forward(ep, 0, x, 2, 4, agree, w, y), EA_OK);
    CHECK_EQ(ea_moe_backend_forward(loc, 0, x, 2, 4, agree, w, yl), EA_OK);
    CHECK(memcmp(y, yl, sizeof y) == 0);
    /* slot 0 is rank 0's, slot C_S/N rank 1's: every rank counts one pair for each */
    int32_t a = 0, b = C_S / N, ids[2] = {r == 1 ? b : a, r == 1 ? a : b};
    ea_status s = ea_moe_backend_forward(ep, 0, x, 1, 2, ids, w, y);
    if (s != EA_ERR_PEER || !strstr(ea_errmsg(), "twice"))
        FAIL_("rank %d: disagreeing routing gave %s (%s), want EA_ERR_PEER naming a pair sent twice", r,
              ea_status_name(s), ea_errmsg());
    else if (r == 0)
        fprintf(stderr, "  disagreement reported: %s\n", ea_errmsg());
    /* and the backend still works for agreeing routing afterwards */
    CHECK_EQ(ea_moe_backend_forward(ep, 0, x, 2, 4, agree, w, y), EA_OK);
    CHECK(memcmp(y, yl, sizeof y) == 0);
    /* replicated attention: every rank routed the same tokens, so EPLB's counts are kept, not summed */
    int64_t v[1] = {5};
    CHECK_EQ(ea_moe_tally(ep, v, 1), EA_OK);
    CHECK(v[0] == 5);
    ea_moe_backend_destroy(ep);
    ea_moe_backend_destroy(loc);
    ea_kctx_destroy(kc);
    ea_eplb_meta_deinit(&pl);
}

/* Data-parallel attention: every rank brings its own tokens (rank r has r + 2,
 * the last rank none) and routing; each rank's y equals the local backend's
 * rows for those tokens in one batch of all ranks' tokens, bit for bit. */
TEST(dp_attention_bit_identical) {
    int r = ea_dist_rank(g_d), N = ea_dist_size(g_d), K = 4, total = 0, first = 0;
    ea_ffn_weights ex[C_S];
    synth_experts(ex);
    ea_ffn_weights *layers[1] = {ex};
    ea_eplb_meta pl;
    CHECK_EQ(ea_eplb_meta_init_trivial(&pl, 1, C_S, C_S, N, 1), EA_OK);
    ea_kctx *kc;
    CHECK_EQ(ea_kctx_create(NULL, 64, 64, &kc), EA_OK);
    for (int q = 0; q < N; q++) {
        int nq = q == N - 1 ? 0 : q + 2;
        if (q < r) first += nq;
        total += nq;
    }
    int n = r == N - 1 ? 0 : r + 2;
    ea_ep_opts o = {.dist = g_d, .place = &pl, .n_layers = 1, .hidden = C_H, .ff = C_F, .max_tokens = 5, .max_k = K,
                    .experts = (ea_ffn_weights *const *)layers, .kctx = kc, .dp_attention = 1};
    ea_moe_local_opts lo = {.n_layers = 1, .hidden = C_H, .ff = C_F, .n_experts = C_S, .max_tokens = 64, .max_k = K,
                            .experts = (ea_ffn_weights *const *)layers, .kctx = kc};
    ea_moe_backend *ep = NULL, *loc = NULL;
    CHECK_EQ(ea_ep_backend_create(&o, &ep), EA_OK);
    CHECK_EQ(ea_moe_local_create(&lo, &loc), EA_OK);
    float x[64 * C_H], w[64 * 4], yl[64 * C_H], y[8 * C_H];
    int32_t ids[64 * 4];
    for (int t = 0; t < total; t++) {
        for (int i = 0; i < C_H; i++) x[t * C_H + i] = sinf((float)(t * C_H + i) * 0.37f);
        for (int j = 0; j < K; j++) ids[t * K + j] = (t * 3 + j * 5) % C_S, w[t * K + j] = 0.5f / (float)(j + 1);
    }
    CHECK_EQ(ea_moe_backend_forward(loc, 0, x, total, K, ids, w, yl), EA_OK);
    /* the second call sends every pair to rank 0's slots: rank 0 computes all ranks' pairs,
     * more than one rank's largest call */
    for (int rep = 0; rep < 3; rep++) {
        if (rep == 2) {
            for (int i = 0; i < total * K; i++) ids[i] = i % (C_S / N);
            CHECK_EQ(ea_moe_backend_forward(loc, 0, x, total, K, ids, w, yl), EA_OK);
        }
        memset(y, 0, sizeof y);
        CHECK_EQ(ea_moe_backend_forward(ep, 0, x + first * C_H, n, K, ids + first * K, w + first * K, y), EA_OK);
        if (memcmp(y, yl + first * C_H, sizeof(float) * (size_t)n * C_H) != 0)
            FAIL_("rank %d: %d tokens differ from the local backend's rows %d..%d", r, n, first, first + n - 1);
    }
    ea_ep_stats st;
    ea_ep_backend_stats(ep, &st);
    if (r == 0) fprintf(stderr, "  dp: %d ranks, %d tokens in all, rank 0 dispatched %llu bytes to other ranks\n", N, total,
                        (unsigned long long)st.dispatch_bytes);
    CHECK(N == 1 || st.dispatch_bytes > 0 || n == 0);
    /* EPLB's counts: each rank routed its own tokens, so tally sums them; the local backend keeps its own */
    int64_t v[3] = {r + 1, 10 * r, -1}, lv[1] = {7};
    CHECK_EQ(ea_moe_tally(ep, v, 3), EA_OK);
    CHECK(v[0] == (int64_t)N * (N + 1) / 2 && v[1] == 10 * (int64_t)N * (N - 1) / 2 && v[2] == -N);
    CHECK_EQ(ea_moe_tally(loc, lv, 1), EA_OK);
    CHECK(lv[0] == 7);
    ea_moe_backend_destroy(ep);
    ea_moe_backend_destroy(loc);
    ea_kctx_destroy(kc);
    ea_eplb_meta_deinit(&pl);
}

/* Data-parallel attention through the engine, as `serve --dp-attention` builds
 * it: every rank runs a full call (max_tokens tokens of its own) and a router
 * bias puts expert 0 among every token's experts, so rank 0 multiplies all
 * ranks' tokens by expert 0 in one product: N times one rank's largest call
 * (the matmul context is sized for it). Each rank's logits equal one process
 * running the same tokens, bit for bit. */
TEST(dp_attention_engine_full_calls) {
    enum { T = 16 };
    int r = ea_dist_rank(g_d);
    static float bias[1024];
    bias[0] = 1000.0f;
    ea_engine *g[2] = {NULL, NULL};
    float *lg[2] = {NULL, NULL};
    int32_t tok[T], pos[T], seq[T], last = T - 1;
    for (int i = 0; i < T; i++) tok[i] = 500 + 11 * i + 97 * r, pos[i] = i, seq[i] = 0;
    for (int k = 0; k < 2; k++) { /* 0: dp over the ranks, 1: one process */
        ea_engine_opts o = {.model_path = model_path("qwen3_moe"), .threads = 1, .max_tokens = T, .max_ctx = 64,
                            .max_seqs = 1, .kv_blocks = 8, .block_size = 16, .test_router_bias = bias,
                            .moe = ea_engine_moe_parallel(k ? EA_PAR_NONE : EA_PAR_EXPERT, g_d)};
        o.moe.ep.dp_attention = !k;
        ea_status s = ea_engine_create(&o, &g[k]);
        if (s == EA_OK) s = ea_kv_seq_reserve(&g[k]->kv, 0, T);
        if (s == EA_OK && !(lg[k] = ea_malloc(sizeof(float) * (size_t)g[k]->m->cfg.vocab_size)))
            s = ea_err(EA_ERR_NOMEM, "logits");
        if (s == EA_OK) s = ea_forward_run(g[k]->fw, T, tok, pos, seq, 1, &last, lg[k]);
        if (s != EA_OK) fprintf(stderr, "  rank %d, %s: %s\n", r, k ? "one process" : "dp", ea_errmsg());
        CHECK_EQ(s, EA_OK);
    }
    if (lg[0] && lg[1]) CHECK(memcmp(lg[0], lg[1], sizeof(float) * (size_t)g[1]->m->cfg.vocab_size) == 0);
    for (int k = 0; k < 2; k++) ea_free(lg[k]), ea_engine_destroy(g[k]);
}

static int worker(int timeout_mode) {
    ea_status s = ea_dist_create(NULL, NULL, timeout_mode ? 1.0 : 30.0, &g_d);
    if (s != EA_OK) {
        fprintf(stderr, "dist: %s\n", ea_errmsg());
        return 1;
    }
    int r = ea_dist_rank(g_d), N = ea_dist_size(g_d);
    if (timeout_mode) {
        /* the last rank stays away well past the deadline and the probe window */
        if (r == N - 1) {
            sleep(5);
            printf("rank %d: slept\n", r);
            fflush(stdout);
            _exit(0);
        }
        s = ea_dist_barrier(g_d, "deadline test");
        printf("rank %d: status %s: %s\n", r, ea_status_name(s), ea_errmsg());
        fflush(stdout);
        _exit(0); /* MPI cannot be finalized with a peer missing */
    }
    if (r != 0 && !freopen("/dev/null", "w", stderr)) return 1; /* one rank's narration is enough */
    RUN(dist_collectives);
    RUN(combine_rejects_disagreeing_routing);
    RUN(dp_attention_bit_identical);
    RUN(dp_attention_engine_full_calls);
    RUN(families_ep_bit_identical_tp_close);
    RUN(half_kv_ep_bit_identical);
    int bad = ea_t_failed;
    int64_t v[1] = {bad};
    if (ea_dist_allreduce_max_i64(g_d, v, 1, "test result") != EA_OK) v[0] = 1;
    printf("rank %d of %d: %d passed, %d failed\n", r, N, ea_t_passed, ea_t_failed);
    ea_dist_destroy(g_d);
    return v[0] ? 1 : 0;
}

static const char *mpirun_flags(void) {
    return "--oversubscribe --allow-run-as-root --mca btl self,vader,tcp --bind-to none";
}

static int make_models(const char *eaas) {
    for (int f = 0; f < N_FAM; f++) {
        char cmd[4096];
        int k4 = strcmp(families[f], "mixtral_k4") == 0;
        snprintf(cmd, sizeof cmd, "test -f '%s/%s/config.json' || '%s' make-model --family %s%s --preset tiny --seed 11 --format hf --out '%s/%s' >/dev/null",
                 g_models, families[f], eaas, k4 ? "mixtral" : families[f], k4 ? " --top-k 4" : "", g_models, families[f]);
        if (system(cmd) != 0) {
            fprintf(stderr, "make-model %s failed\n", families[f]);
            return 1;
        }
    }
    return 0;
}

TEST(two_ranks) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mpirun %s -n 2 '%s' --worker '%s'", mpirun_flags(), getenv("EP_SELF"), g_models);
    CHECK_EQ(system(cmd), 0);
}

TEST(four_ranks) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mpirun %s -n 4 '%s' --worker '%s'", mpirun_flags(), getenv("EP_SELF"), g_models);
    CHECK_EQ(system(cmd), 0);
}

TEST(deadline_names_missing_rank) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 60 mpirun %s -n 3 '%s' --worker-timeout '%s' 2>&1", mpirun_flags(),
             getenv("EP_SELF"), g_models);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    char line[1024];
    int named = 0, slept = 0;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stderr);
        if (strstr(line, "EA_ERR_TIMEOUT") && strstr(line, "rank(s) 2 did not arrive") && strstr(line, "deadline test"))
            named++;
        if (strstr(line, "rank 2: slept")) slept++;
    }
    pclose(p);
    CHECK_EQ(named, 2); /* ranks 0 and 1 both name rank 2 */
    /* (rank 2 usually never prints "slept": when ranks 0 and 1 exit without
     * MPI_Finalize, OpenMPI's mpirun kills the rest of the job) */
    (void)slept;
}

int main(int argc, char **argv) {
    if (argc >= 3 && (strcmp(argv[1], "--worker") == 0 || strcmp(argv[1], "--worker-timeout") == 0)) {
        snprintf(g_models, sizeof g_models, "%s", argv[2]);
        return worker(strcmp(argv[1], "--worker-timeout") == 0);
    }
    const char *eaas = getenv("EAAS_BIN"), *build = getenv("EA_BUILD");
    if (!eaas || !build) {
        fprintf(stderr, "needs EAAS_BIN and EA_BUILD (run through ctest)\n");
        return 1;
    }
    snprintf(g_models, sizeof g_models, "%s/mpi-models", build);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    setenv("EP_SELF", self, 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char mk[1200];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", g_models);
    if (system(mk) != 0 || make_models(eaas) != 0) return 1;
    RUN(two_ranks);
    RUN(four_ranks);
    RUN(deadline_names_missing_rank);
    return TEST_SUMMARY();
}
