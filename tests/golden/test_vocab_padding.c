/*
 * test_vocab_padding.c — ids with no token are never sampled (issue 18 item
 * 3). The Qwen3 tiny model has 151,936 vocabulary rows and its tokenizer
 * 151,669 tokens; its random weights give the 267 padding rows real
 * probability, so hot sampling over many seeds draws some of them unless the
 * sampler masks them (`eaas generate` stopped with "token id 151864 is not in
 * the vocabulary"; the server emitted empty text). Runs the scheduler with the
 * model's tokenizer, as `eaas serve` does, and checks every drawn id has a
 * token; the same ids are refused as prompt ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tiny_model.h"
#include "sched_util.h"
#include "serve/engine.h"
#include "serve/scheduler.h"
#include "tokenizer/tokenizer.h"

static char model[1024];

#define N_REQ 16
#define N_GEN 256

TEST(padding_ids_never_sampled) {
    ea_engine_opts o = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 512, .max_seqs = N_REQ};
    ea_engine *e = NULL;
    ea_tokenizer *tok = NULL;
    CHECK_EQ(ea_engine_create(&o, &e), EA_OK);
    if (ea_tokenizer_load(model, &tok) != EA_OK) {
        ea_engine_destroy(e);
        FAIL_("tokenizer: %s", ea_errmsg());
    }
    int V = e->m->cfg.vocab_size, n_tok = 0;
    for (int id = 0; id < V; id++) n_tok += (ea_tokenizer_token_bytes(tok, id, NULL) != NULL);
    fprintf(stderr, "  vocabulary %d rows, %d with a token\n", V, n_tok);
    ea_sched_opts so = {.max_running = N_REQ, .max_queue = 64, .max_batch_tokens = 64};
    ea_sched *s = NULL;
    ea_status st = ea_sched_create(e, tok, &so, &s);
    if (st == EA_OK) st = ea_sched_start(s);
    if (st != EA_OK) {
        ea_sched_destroy(s);
        ea_tokenizer_destroy(tok);
        ea_engine_destroy(e);
        FAIL_("sched: %s", ea_errmsg());
    }
    ea_request *r[N_REQ];
    int32_t p[N_REQ][8];
    int submitted = 0;
    for (int i = 0; i < N_REQ; i++) {
        prompt_of(i, p[i], 8);
        ea_req_params rp;
        memset(&rp, 0, sizeof rp);
        rp.prompt = p[i];
        rp.n_prompt = 8;
        rp.max_tokens = N_GEN;
        rp.ignore_eos = 1;
        ea_sampling_defaults(&rp.sp);
        rp.sp.temperature = i % 2 ? 3.0f : 1.0f;
        rp.sp.seed = (uint64_t)i;
        if (ea_sched_submit(s, &rp, &r[i]) != EA_OK) break;
        submitted++;
    }
    int drawn = 0, padding = 0, errors = 0;
    for (int i = 0; i < submitted; i++) {
        result res;
        collect(r[i], &res);
        errors += res.error;
        drawn += res.n;
        for (int k = 0; k < res.n; k++)
            if (!ea_tokenizer_token_bytes(tok, res.toks[k], NULL)) {
                if (padding < 5) fprintf(stderr, "  request %d drew id %d, which has no token\n", i, res.toks[k]);
                padding++;
            }
    }
    fprintf(stderr, "  %d tokens drawn by %d requests (temperature 1 and 3), %d without a token\n", drawn, submitted,
            padding);
    /* a prompt id without a token is refused at submit, like /detokenize refuses it */
    ea_req_params rp;
    memset(&rp, 0, sizeof rp);
    int32_t bad[2] = {100, V - 1};
    rp.prompt = bad;
    rp.n_prompt = 2;
    rp.max_tokens = 1;
    ea_sampling_defaults(&rp.sp);
    ea_request *rb = NULL;
    ea_status sb = ea_sched_submit(s, &rp, &rb);
    if (sb == EA_OK) {
        result res;
        collect(rb, &res);
    }
    ea_sched_destroy(s);
    ea_tokenizer_destroy(tok);
    ea_engine_destroy(e);
    CHECK_EQ(submitted, N_REQ);
    CHECK_EQ(errors, 0);
    CHECK_EQ(drawn, N_REQ * N_GEN);
    CHECK(n_tok < V);
    CHECK_EQ(padding, 0);
    CHECK_EQ(sb, EA_ERR_INVALID_ARG);
}

int main(void) {
    if (tiny_model("padding-qwen3", "--family qwen3_moe --preset tiny --seed 1 --format hf", model, sizeof model)) return 1;
    RUN(padding_ids_never_sampled);
    return TEST_SUMMARY();
}
