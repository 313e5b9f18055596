/*
 * test_sampler.c — what the sampler draws, not only that a seed repeats.
 *
 *   - the RNG: xoshiro256** seeded by splitmix64, first outputs equal to an
 *     independent implementation (Python, the published algorithms);
 *   - golden tokens: a fixed seed gives a fixed token sequence (recorded once,
 *     cross-checked in double precision from the RNG stream); seed + 1 does not;
 *   - temperature: draw frequencies of 200,000 draws within 0.006 of
 *     softmax(logits / T) for T = 0.5 and T = 2 (the standard error of a
 *     frequency here is <= 0.0012, so 5 sigma; the seed is fixed, so the test
 *     cannot flake, and the bound still holds for any other seed), while
 *     softmax(logits · T) is >= 0.1 away;
 *   - top_k and top_p: tokens outside the cut are never drawn, every token
 *     inside is, each at its renormalised probability (same bound);
 *   - on a 50,000-id vocabulary with many tied logits, the sampler (which
 *     orders only the prefix it needs) draws the same token as a reference
 *     that sorts every candidate, for top_k, top_p and both, over 300 draws.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "serve/sampler.h"

enum { V = 10, N_DRAWS = 200000 };
static const float base_logits[V] = {1.5f, -0.3f, 0.8f, 2.1f, 0.0f, -1.2f, 1.1f, 0.4f, -0.6f, 1.9f};

/* softmax(logits * a) in double */
static void softmax_d(const float *lg, int n, double a, double *p) {
    double m = -INFINITY, z = 0;
    for (int i = 0; i < n; i++) m = lg[i] * a > m ? lg[i] * a : m;
    for (int i = 0; i < n; i++) z += p[i] = exp(lg[i] * a - m);
    for (int i = 0; i < n; i++) p[i] /= z;
}

/* Frequencies of N_DRAWS draws with params sp from seed. */
static void draw_freq(const ea_sampling_params *sp, uint64_t seed, double *freq) {
    ea_sampler *s;
    CHECK_EQ(ea_sampler_create(V, &s), EA_OK);
    ea_rng rng;
    ea_rng_seed(&rng, seed);
    long cnt[V] = {0};
    float lg[V];
    for (int d = 0; d < N_DRAWS; d++) {
        memcpy(lg, base_logits, sizeof lg);
        int t = ea_sample(s, sp, &rng, lg, NULL, NULL);
        if (t < 0 || t >= V) {
            FAIL_("token %d out of range", t);
            break;
        }
        cnt[t]++;
    }
    for (int i = 0; i < V; i++) freq[i] = (double)cnt[i] / N_DRAWS;
    ea_sampler_destroy(s);
}

static double max_dev(const double *a, const double *b) {
    double m = 0;
    for (int i = 0; i < V; i++) m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
    return m;
}

TEST(rng_matches_reference_streams) {
    /* splitmix64 -> 4 words of state, then xoshiro256** (Blackman & Vigna) */
    static const uint64_t want0[4] = {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull,
                                      0x6aa594f1262d2d2cull};
    static const uint64_t want42[4] = {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull, 0xae17533239e499a1ull,
                                       0xecb8ad4703b360a1ull};
    ea_rng r;
    ea_rng_seed(&r, 0);
    for (int i = 0; i < 4; i++) CHECK(ea_rng_next(&r) == want0[i]);
    ea_rng_seed(&r, 42);
    for (int i = 0; i < 4; i++) CHECK(ea_rng_next(&r) == want42[i]);
    ea_rng_seed(&r, 42);
    CHECK(ea_rng_uniform(&r) == (float)(0x15780b2e0c2ec716ull >> 40) / 16777216.0f);
}

/* Seed 1234, T = 0.8, top_p 0.95, top_k 8: these 24 tokens, derived independently
 * in double precision (Python) from the RNG stream and the definition in
 * sampler.h: kept 3 9 0 6 2 7 4, u = (next >> 40) / 2^24 times their mass, walked
 * in descending p. Every u is >= 3e-3 from a boundary, so float rounding cannot
 * move a token. */
TEST(golden_tokens_for_a_seed) {
    static const int want[24] = {3, 6, 0, 2, 3, 2, 9, 3, 9, 0, 9, 3, 3, 0, 9, 6, 0, 7, 7, 6, 6, 3, 9, 3};
    ea_sampling_params sp;
    ea_sampling_defaults(&sp);
    sp.temperature = 0.8f;
    sp.top_p = 0.95f;
    sp.top_k = 8;
    ea_sampler *s;
    CHECK_EQ(ea_sampler_create(V, &s), EA_OK);
    int got[2][24];
    for (int k = 0; k < 2; k++) {
        ea_rng rng;
        ea_rng_seed(&rng, 1234 + (uint64_t)k);
        for (int i = 0; i < 24; i++) {
            float lg[V];
            memcpy(lg, base_logits, sizeof lg);
            got[k][i] = ea_sample(s, &sp, &rng, lg, NULL, NULL);
        }
    }
    for (int i = 0; i < 24; i++)
        if (got[0][i] != want[i]) {
            FAIL_("seed 1234 draw %d: token %d, expected %d", i, got[0][i], want[i]);
            break;
        }
    CHECK(memcmp(got[0], got[1], sizeof got[0]) != 0); /* seed + 1 is another sequence */
    ea_sampler_destroy(s);
}

TEST(temperature_frequencies_follow_softmax_of_logits_over_t) {
    const float ts[2] = {0.5f, 2.0f};
    for (int k = 0; k < 2; k++) {
        ea_sampling_params sp;
        ea_sampling_defaults(&sp);
        sp.temperature = ts[k];
        double want[V], wrong[V], freq[V];
        softmax_d(base_logits, V, 1.0 / ts[k], want);
        softmax_d(base_logits, V, ts[k], wrong); /* dividing by 1/T */
        draw_freq(&sp, 99 + (uint64_t)k, freq);
        double dev = max_dev(freq, want), chi2 = 0;
        for (int i = 0; i < V; i++) chi2 += (freq[i] - want[i]) * (freq[i] - want[i]) / want[i] * N_DRAWS;
        fprintf(stderr, "  T=%g: max |freq - p| %.4f (bound 0.006), chi2 %.1f (9 dof), softmax(l*T) is %.3f away\n",
                (double)ts[k], dev, chi2, max_dev(want, wrong));
        CHECK(dev <= 0.006);
        CHECK(max_dev(want, wrong) >= 0.1); /* the test tells T from 1/T */
    }
}

/* Frequencies against p renormalised over the kept set; outside it, zero draws. */
static void check_cut(const ea_sampling_params *sp, const int *kept, int n_kept, uint64_t seed) {
    double p[V], want[V] = {0}, freq[V], mass = 0;
    softmax_d(base_logits, V, 1.0 / sp->temperature, p);
    for (int i = 0; i < n_kept; i++) mass += p[kept[i]];
    for (int i = 0; i < n_kept; i++) want[kept[i]] = p[kept[i]] / mass;
    draw_freq(sp, seed, freq);
    for (int i = 0; i < V; i++) {
        if (want[i] == 0 && freq[i] != 0) FAIL_("token %d outside the cut drawn (%.4f)", i, freq[i]);
        if (want[i] > 0 && freq[i] == 0) FAIL_("token %d inside the cut never drawn (p %.4f)", i, want[i]);
    }
    fprintf(stderr, "  top_k %d top_p %g: %d kept, max |freq - p| %.4f\n", sp->top_k, (double)sp->top_p, n_kept,
            max_dev(freq, want));
    CHECK(max_dev(freq, want) <= 0.006);
}

TEST(top_k_and_top_p_cut_exactly) {
    /* p at T = 1, descending: 3 .285, 9 .233, 0 .157, 6 .105, 2 .078, 7 .052, 4 .035,
     * 1 .026, 8 .019, 5 .011 */
    ea_sampling_params sp;
    ea_sampling_defaults(&sp);
    sp.top_k = 4;
    const int k4[4] = {3, 9, 0, 6};
    check_cut(&sp, k4, 4, 5);
    /* top_p 0.8: cumulative .285 .519 .675 .780 .857 -> token 2 crosses 0.8 and is kept */
    sp.top_k = 0;
    sp.top_p = 0.8f;
    const int p80[5] = {3, 9, 0, 6, 2};
    check_cut(&sp, p80, 5, 6);
    /* both: top_k 3, then top_p 0.5 -> 3, 9 (.285 < .5 <= .519; the same whether top_p
     * reads p or p renormalised over the top 3, .422 < .5 <= .769) */
    sp.top_k = 3;
    sp.top_p = 0.5f;
    check_cut(&sp, k4, 2, 7);
}

static const float *ref_p;
static int ref_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (ref_p[x] != ref_p[y]) return ref_p[x] > ref_p[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* The sampler as specified: softmax at T, sort all, cut top_k then top_p, draw. */
static int ref_sample(const ea_sampling_params *sp, ea_rng *rng, const float *lg, int n_v, float *p, int32_t *idx) {
    float m = lg[0], sum = 0.0f;
    for (int i = 1; i < n_v; i++) m = lg[i] > m ? lg[i] : m;
    for (int i = 0; i < n_v; i++) sum += p[i] = expf((lg[i] - m) * (1.0f / sp->temperature));
    for (int i = 0; i < n_v; i++) p[i] /= sum;
    int n = 0;
    for (int i = 0; i < n_v; i++)
        if (p[i] > 0.0f) idx[n++] = i;
    ref_p = p;
    qsort(idx, (size_t)n, sizeof *idx, ref_cmp);
    if (sp->top_k > 0 && sp->top_k < n) n = sp->top_k;
    float cum = 0.0f;
    for (int i = 0; i < n && sp->top_p < 1.0f; i++)
        if ((cum += p[idx[i]]) >= sp->top_p) {
            n = i + 1;
            break;
        }
    float mass = 0.0f;
    for (int i = 0; i < n; i++) mass += p[idx[i]];
    float u = ea_rng_uniform(rng) * mass;
    cum = 0.0f;
    for (int i = 0; i < n; i++)
        if (u < (cum += p[idx[i]])) return idx[i];
    return idx[n - 1];
}

/* repetition_penalty (vLLM's, the CTRL rule): a logit of a token seen in the
 * prompt or the output is divided by the penalty when positive, multiplied when
 * negative; greedy shows which token wins after it. */
TEST(repetition_penalty_moves_the_argmax) {
    enum { V = 8 };
    ea_sampler *s;
    CHECK_EQ(ea_sampler_create(V, &s), EA_OK);
    ea_sampling_params sp;
    ea_sampling_defaults(&sp);
    sp.temperature = 0.0f;
    sp.repetition_penalty = 2.0f;
    int32_t counts[V] = {0};
    uint8_t seen[V] = {0};
    ea_rng rng;
    ea_rng_seed(&rng, 1);
    const float base[V] = {-1.0f, -0.5f, 1.0f, 2.0f, 3.0f, 5.0f, 6.5f, 7.0f};
    float lg[V];
    memcpy(lg, base, sizeof lg);
    CHECK_EQ(ea_sample(s, &sp, &rng, lg, counts, seen), 7); /* nothing seen: the plain argmax */
    counts[7] = 1;                                         /* 7 -> 3.5: 6 wins */
    memcpy(lg, base, sizeof lg);
    CHECK_EQ(ea_sample(s, &sp, &rng, lg, counts, seen), 6);
    seen[6] = 1; /* from the prompt: 6.5 -> 3.25, so 5 (5.0) wins over 7 (3.5) */
    memcpy(lg, base, sizeof lg);
    CHECK_EQ(ea_sample(s, &sp, &rng, lg, counts, seen), 5);
    /* negative logits are multiplied (a division would raise them) */
    for (int i = 2; i < V; i++) counts[i] = 1;
    float neg[V] = {-1.0f, -0.5f, -9.0f, -9.0f, -9.0f, -9.0f, -9.0f, -9.0f};
    seen[1] = 1; /* 1: -0.5 -> -1.0; 0 unseen stays -1.0: a tie, the lowest id wins */
    CHECK_EQ(ea_sample(s, &sp, &rng, neg, counts, seen), 0);
    ea_sampler_destroy(s);
}

/* Parameters the API accepts (temperature 1e-45 >= 0, repetition_penalty 1e-40 > 0) made
 * every probability NaN, no candidate survived and the sampler read idx[-1] (a token id
 * from the heap); found by fuzz_bus_codec. Now a temperature whose 1/T overflows is
 * greedy, and a draw where nothing survives (NaN, or every logit -inf) is the argmax. */
TEST(extreme_parameters_still_draw_a_vocabulary_token) {
    enum { V = 8 };
    ea_sampler *s;
    CHECK_EQ(ea_sampler_create(V, &s), EA_OK);
    const float base[V] = {-1.0f, -0.5f, 1.0f, 2.0f, 3.0f, 5.0f, 6.5f, 7.0f};
    float lg[V];
    ea_rng rng;
    ea_rng_seed(&rng, 1);
    ea_sampling_params sp;
    ea_sampling_defaults(&sp);
    sp.temperature = 1e-45f; /* the limit T -> 0: greedy */
    memcpy(lg, base, sizeof lg);
    CHECK_EQ(ea_sample(s, &sp, &rng, lg, NULL, NULL), 7);
    sp.temperature = NAN;
    memcpy(lg, base, sizeof lg);
    CHECK_EQ(ea_sample(s, &sp, &rng, lg, NULL, NULL), 7);
    ea_sampling_defaults(&sp);
    sp.repetition_penalty = 1e-40f; /* a seen positive logit becomes +inf: it is the argmax */
    int32_t counts[V] = {0};
    uint8_t seen[V] = {0};
    seen[3] = 1;
    memcpy(lg, base, sizeof lg);
    CHECK_EQ(ea_sample(s, &sp, &rng, lg, counts, seen), 3);
    ea_sampling_defaults(&sp);
    for (int i = 0; i < V; i++) lg[i] = -INFINITY; /* a mask that leaves nothing */
    int t = ea_sample(s, &sp, &rng, lg, NULL, NULL);
    CHECK(t >= 0 && t < V);
    ea_sampler_destroy(s);
}

TEST(prefix_order_draws_what_a_full_sort_draws) {
    enum { BV = 50000 };
    float *lg = malloc(sizeof(float) * BV), *work = malloc(sizeof(float) * BV), *p = malloc(sizeof(float) * BV);
    int32_t *idx = malloc(sizeof(int32_t) * BV);
    ea_sampler *s;
    CHECK_EQ(ea_sampler_create(BV, &s), EA_OK);
    const struct { int k; float top_p, t; } cases[] = {{20, 1.0f, 0.8f}, {0, 0.95f, 0.8f}, {20, 0.95f, 0.6f},
                                                      {0, 0.5f, 2.0f}, {1000, 0.9f, 1.0f}, {0, 0.999f, 1.5f}};
    int differ = 0;
    ea_rng lr;
    ea_rng_seed(&lr, 42);
    for (int d = 0; d < 300; d++) {
        for (int i = 0; i < BV; i++) /* quantised: many exact ties */
            lg[i] = (float)(int)(ea_rng_uniform(&lr) * 40.0f) * 0.25f - 5.0f;
        ea_sampling_params sp;
        ea_sampling_defaults(&sp);
        sp.top_k = cases[d % 6].k, sp.top_p = cases[d % 6].top_p, sp.temperature = cases[d % 6].t;
        ea_rng a, b;
        ea_rng_seed(&a, (uint64_t)d);
        ea_rng_seed(&b, (uint64_t)d);
        memcpy(work, lg, sizeof(float) * BV);
        int got = ea_sample(s, &sp, &a, work, NULL, NULL);
        int want = ref_sample(&sp, &b, lg, BV, p, idx);
        differ += got != want;
    }
    CHECK_EQ(differ, 0);
    ea_sampler_destroy(s);
    free(lg), free(work), free(p), free(idx);
}

int main(void) {
    RUN(rng_matches_reference_streams);
    RUN(golden_tokens_for_a_seed);
    RUN(temperature_frequencies_follow_softmax_of_logits_over_t);
    RUN(top_k_and_top_p_cut_exactly);
    RUN(repetition_penalty_moves_the_argmax);
    RUN(prefix_order_draws_what_a_full_sort_draws);
    RUN(extreme_parameters_still_draw_a_vocabulary_token);
    return TEST_SUMMARY();
}
