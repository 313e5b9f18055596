/*
 * test_sampler_mask.c — the sampler never draws an id with no token (issue 18
 * item 3): the forbidden ids get the highest logits here, so a sampler that
 * ignored its mask would draw them greedily and most of the time at a high
 * temperature; and the mask built from a tokenizer is exactly the ids past
 * its tokens.
 */
#include <string.h>

#include "harness.h"
#include "serve/sampler.h"
#include "tokenizer/tokenizer.h"

#define V 16
#define N_TOK 12 /* ids 12..15: padding rows */

static void fill(float *l) {
    for (int i = 0; i < V; i++) l[i] = i < N_TOK ? (float)(i % 3) : 8.0f; /* padding ids far ahead */
}

TEST(forbidden_ids_never_drawn) {
    ea_sampler *s;
    CHECK_EQ(ea_sampler_create(V, &s), EA_OK);
    for (int id = N_TOK; id < V; id++) CHECK_EQ(ea_sampler_forbid(s, id), EA_OK);
    CHECK_EQ(ea_sampler_forbid(s, V), EA_ERR_RANGE);
    float l[V];
    ea_sampling_params p;
    ea_sampling_defaults(&p);
    ea_rng rng;
    /* greedy: the best id that has a token (2, 5, 8, 11 tie at 2.0: lowest id) */
    p.temperature = 0.0f;
    fill(l);
    ea_rng_seed(&rng, 1);
    CHECK_EQ(ea_sample(s, &p, &rng, l, NULL, NULL), 2);
    /* hot sampling, many seeds, with and without top-k / top-p / min-p: never 12..15, every allowed id seen */
    int seen[V] = {0};
    for (int cfg = 0; cfg < 4; cfg++) {
        ea_sampling_defaults(&p);
        p.temperature = 50.0f;
        if (cfg == 1) p.top_k = 6;
        if (cfg == 2) p.top_p = 0.9f;
        if (cfg == 3) p.min_p = 0.01f;
        for (uint64_t seed = 0; seed < 500; seed++) {
            ea_rng_seed(&rng, seed);
            fill(l);
            int t = ea_sample(s, &p, &rng, l, NULL, NULL);
            CHECK(t >= 0 && t < V);
            seen[t]++;
        }
    }
    for (int id = N_TOK; id < V; id++) CHECK_EQ(seen[id], 0);
    for (int id = 0; id < N_TOK; id++) CHECK(seen[id] > 0);
    /* the mask alone, as the scheduler applies it before copying logits for logprobs */
    fill(l);
    ea_sampler_mask(s, l);
    for (int id = 0; id < V; id++) CHECK(id < N_TOK ? l[id] == (float)(id % 3) : l[id] < -1e30f);
    ea_sampler_destroy(s);
}

/* A tokenizer of 12 tokens against a vocabulary of 16: ids 12..15 are forbidden, no others. */
TEST(mask_from_tokenizer) {
    const char *tok[N_TOK];
    size_t len[N_TOK];
    static const char letters[] = "abcdefghijkl";
    char store[N_TOK][2];
    for (int i = 0; i < N_TOK; i++) {
        store[i][0] = letters[i];
        store[i][1] = 0;
        tok[i] = store[i];
        len[i] = 1;
    }
    ea_tokenizer_vocab v = {.n_tokens = N_TOK, .tokens = tok, .token_lens = len, .bos_id = -1, .eos_id = -1,
                            .add_bos = 0, .add_eos = 0, .what = "test"};
    ea_tokenizer *t;
    CHECK_EQ(ea_tokenizer_from_vocab(&v, &t), EA_OK);
    CHECK(ea_tokenizer_has_token(t, 0) && ea_tokenizer_has_token(t, N_TOK - 1));
    CHECK(!ea_tokenizer_has_token(t, N_TOK) && !ea_tokenizer_has_token(t, -1));
    ea_sampler *s;
    CHECK_EQ(ea_sampler_create(V, &s), EA_OK);
    int n = -1;
    CHECK_EQ(ea_sampler_forbid_untokenized(s, t, &n), EA_OK);
    CHECK_EQ(n, V - N_TOK);
    float l[V];
    fill(l);
    ea_sampler_mask(s, l);
    for (int id = 0; id < V; id++) CHECK(id < N_TOK ? l[id] > -1.0f : l[id] < -1e30f);
    ea_sampler_destroy(s);
    ea_tokenizer_destroy(t);
}

int main(void) {
    RUN(forbidden_ids_never_drawn);
    RUN(mask_from_tokenizer);
    return TEST_SUMMARY();
}
