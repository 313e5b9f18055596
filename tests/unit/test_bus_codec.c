/*
 * test_bus_codec.c — the control bus's submit event (serve/bus_codec.h) carries
 * every field of ea_req_params that changes what a rank computes: what rank 0
 * writes, every rank reads back. A field left out would make the followers
 * sample differently from rank 0 (stop_token_ids, min_tokens change which
 * tokens may be drawn; logit_bias and the test hook's forced tokens too; the
 * grammar's source, which every rank compiles; prompt_logprobs, which changes
 * the rows and the prefix hit). Truncated batches are refused, not over-read;
 * a grammar source length past the limit is refused before it is read; what
 * rank 0 never writes (a stop string with a NUL, sampling parameters the
 * sampler is not defined for) is refused, on decoding or when the follower
 * makes the request.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "serve/bus_codec.h"
#include "serve/request.h"

TEST(submit_round_trips_every_field) {
    int32_t prompt[3] = {5, 6, 7};
    ea_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = prompt;
    p.n_prompt = 3;
    p.max_tokens = 9;
    p.ignore_eos = 1;
    p.logprobs = 1;
    p.top_logprobs = 2;
    p.stop[0] = "ab";
    p.n_stop = 1;
    p.stop_ids[0] = 11;
    p.stop_ids[1] = 12;
    p.n_stop_ids = 2;
    p.min_tokens = 4;
    p.sp.temperature = 0.5f;
    p.sp.top_p = 0.9f;
    p.sp.top_k = 3;
    p.sp.min_p = 0.1f;
    p.sp.presence_penalty = 0.2f;
    p.sp.frequency_penalty = 0.3f;
    p.sp.repetition_penalty = 1.1f;
    p.sp.seed = 77;
    ea_logit_bias bias[2] = {{100, -5.5f}, {3, 100.0f}};
    int32_t forced[2] = {8, 9};
    p.bias = bias;
    p.n_bias = 2;
    p.forced = forced;
    p.n_forced = 2;
    p.prompt_logprobs = 1;
    static const char src[] = "{\"guided_regex\":\"[a-z]+\"}";
    p.grammar_src = src;
    p.n_grammar_src = (int)strlen(src);
    p.grammar_after_think = 1;
    p.think_end = 151668;
    p.keep_special = 1;
    p.include_stop = 1;
    ea_sbuf b = {0};
    ea_bus_begin(&b, 1);
    ea_bus_put_submit(&b, 42, &p);
    CHECK(!b.failed);
    ea_bus_reader rd;
    ea_bus_event ev;
    int more = 0;
    CHECK_EQ(ea_bus_read_begin(&rd, b.data, b.len), EA_OK);
    CHECK_EQ(ea_bus_read_next(&rd, &ev, &more), EA_OK);
    CHECK_EQ(more, 1);
    CHECK_EQ(ev.id, 42);
    CHECK_EQ(ev.p.n_stop_ids, 2);
    CHECK_EQ(ev.p.stop_ids[1], 12);
    CHECK_EQ(ev.p.min_tokens, 4);
    CHECK_EQ(ev.p.max_tokens, 9);
    CHECK_EQ(ev.p.n_stop, 1);
    CHECK_STREQ(ev.p.stop[0], "ab");
    CHECK_EQ(ev.p.sp.seed, 77);
    CHECK_NEAR(ev.p.sp.repetition_penalty, 1.1, 1e-6);
    CHECK_EQ(ev.p.n_bias, 2);
    ea_logit_bias b1;
    memcpy(&b1, ev.bias + 8, sizeof b1);
    CHECK_EQ(b1.id, 3);
    CHECK_NEAR(b1.bias, 100.0, 0);
    CHECK_EQ(ev.p.n_forced, 2);
    int32_t f1;
    memcpy(&f1, ev.forced + 4, 4);
    CHECK_EQ(f1, 9);
    int32_t last;
    memcpy(&last, ev.prompt + 8, 4);
    CHECK_EQ(last, 7);
    CHECK_EQ(ev.p.prompt_logprobs, 1);
    CHECK_EQ(ev.p.n_grammar_src, (int)strlen(src));
    CHECK(ev.grammar_src && memcmp(ev.grammar_src, src, strlen(src)) == 0);
    CHECK_EQ(ev.p.grammar_after_think, 1);
    CHECK_EQ(ev.p.think_end, 151668);
    CHECK_EQ(ev.p.keep_special, 1);
    CHECK_EQ(ev.p.include_stop, 1);
    /* every shorter batch is refused */
    for (size_t n = 16; n < b.len; n++) {
        CHECK_EQ(ea_bus_read_begin(&rd, b.data, n), EA_OK);
        if (ea_bus_read_next(&rd, &ev, &more) == EA_OK) FAIL_("a batch cut to %zu of %zu bytes was read", n, b.len);
    }
    ea_sbuf_deinit(&b);
}

/* Without a grammar the source is absent; a length field past the limit (or past
 * the batch) is refused, naming the grammar source. */
TEST(grammar_source_absent_and_oversized) {
    int32_t prompt[1] = {5};
    ea_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = prompt;
    p.n_prompt = 1;
    p.max_tokens = 1;
    ea_sbuf b = {0};
    ea_bus_begin(&b, 1);
    ea_bus_put_submit(&b, 7, &p);
    ea_bus_reader rd;
    ea_bus_event ev;
    int more = 0;
    CHECK_EQ(ea_bus_read_begin(&rd, b.data, b.len), EA_OK);
    CHECK_EQ(ea_bus_read_next(&rd, &ev, &more), EA_OK);
    CHECK(ev.grammar_src == NULL);
    CHECK_EQ(ev.p.n_grammar_src, 0);
    CHECK_EQ(ev.p.prompt_logprobs, 0);
    CHECK_EQ(ev.p.grammar_after_think, 0);
    /* the gate (2 x i32) before the prompt's 4 bytes: anything but 0/1, or a negative token, is refused */
    int32_t two = 2;
    memcpy(b.data + b.len - 12, &two, 4);
    CHECK_EQ(ea_bus_read_begin(&rd, b.data, b.len), EA_OK);
    CHECK_EQ(ea_bus_read_next(&rd, &ev, &more), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "grammar gate") != NULL);
    int32_t zero = 0;
    memcpy(b.data + b.len - 12, &zero, 4);
    /* the u32 before the gate is the source length: make it huge */
    uint32_t huge = EA_BUS_MAX_GRAMMAR_SRC + 1;
    memcpy(b.data + b.len - 16, &huge, 4);
    CHECK_EQ(ea_bus_read_begin(&rd, b.data, b.len), EA_OK);
    CHECK_EQ(ea_bus_read_next(&rd, &ev, &more), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "grammar source") != NULL);
    ea_sbuf_deinit(&b);
}

/* A stop string rank 0 could not have written (it writes non-empty C strings) is
 * refused: one holding a NUL was read as its first part, an empty one matched
 * nothing stop_text expects (fuzz_bus_codec, corpus input stop_with_nul). */
TEST(stop_string_with_nul_or_empty_refused) {
    int32_t prompt[1] = {5};
    ea_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = prompt;
    p.n_prompt = 1;
    p.max_tokens = 1;
    p.stop[0] = "abc";
    p.n_stop = 1;
    ea_sbuf b = {0};
    ea_bus_begin(&b, 1);
    ea_bus_put_submit(&b, 7, &p);
    CHECK(!b.failed);
    size_t at = b.len - 4 - 4 - 8 - 8 - 3; /* the stop's bytes: before n_bias, n_forced, n_grammar_src, the gate, the prompt */
    CHECK(memcmp(b.data + at, "abc", 3) == 0);
    ea_bus_reader rd;
    ea_bus_event ev;
    int more = 0;
    b.data[at + 1] = 0;
    CHECK_EQ(ea_bus_read_begin(&rd, b.data, b.len), EA_OK);
    CHECK_EQ(ea_bus_read_next(&rd, &ev, &more), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "stop string") != NULL);
    uint32_t zero = 0; /* an empty stop string: the length 0, its 3 bytes then read as the next fields */
    memcpy(b.data + at - 4, &zero, 4);
    CHECK_EQ(ea_bus_read_begin(&rd, b.data, b.len), EA_OK);
    CHECK_EQ(ea_bus_read_next(&rd, &ev, &more), EA_ERR_FORMAT);
    ea_sbuf_deinit(&b);
}

/* A follower makes the request of a submit with ea__req_new: sampling parameters no
 * rank 0 sends (NaN, min_p past 1, a negative temperature) are refused with an error
 * that names them, not sampled; the API's own extremes are still taken. */
TEST(follower_refuses_undefined_sampling_parameters) {
    int32_t prompt[2] = {5, 6};
    ea_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = prompt;
    p.n_prompt = 2;
    p.max_tokens = 4;
    ea_sampling_defaults(&p.sp);
    ea__req_limits lim = {.max_ctx = 64, .kv_tokens = 64, .vocab = 16};
    ea_request *r;
    CHECK_EQ(ea__req_new(&lim, &p, 1, &r), EA_OK);
    ea__req_unref(r);
    p.sp.temperature = 1e-45f; /* the API takes it (>= 0): greedy */
    p.sp.repetition_penalty = 1e-40f;
    p.sp.top_p = 0.0f; /* eaas generate --top-p 0 */
    CHECK_EQ(ea__req_new(&lim, &p, 1, &r), EA_OK);
    ea__req_unref(r);
    const float bad[][3] = {{NAN, 1, 0}, {-1, 1, 0}, {1, 1.5f, 0}, {1, 1, 2}, {1, NAN, 0}, {INFINITY, 1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ea_sampling_defaults(&p.sp);
        p.sp.temperature = bad[i][0], p.sp.top_p = bad[i][1], p.sp.min_p = bad[i][2];
        CHECK_EQ(ea__req_new(&lim, &p, 1, &r), EA_ERR_INVALID_ARG);
        CHECK(strstr(ea_errmsg(), "sampling parameters") != NULL);
    }
    ea_sampling_defaults(&p.sp);
    p.sp.repetition_penalty = 0.0f;
    CHECK_EQ(ea__req_new(&lim, &p, 1, &r), EA_ERR_INVALID_ARG);
    p.sp.repetition_penalty = 1.0f;
    p.sp.presence_penalty = -INFINITY;
    CHECK_EQ(ea__req_new(&lim, &p, 1, &r), EA_ERR_INVALID_ARG);
}

int main(void) {
    RUN(submit_round_trips_every_field);
    RUN(grammar_source_absent_and_oversized);
    RUN(stop_string_with_nul_or_empty_refused);
    RUN(follower_refuses_undefined_sampling_parameters);
    return TEST_SUMMARY();
}
