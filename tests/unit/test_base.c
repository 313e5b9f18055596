/* test_base.c — status names and messages, allocator counting and failure
 * injection, arena, thread pool, args parsing, dtype conversions. */
#include "base/alloc.h"
#include "base/args.h"
#include "base/pool.h"
#include "base/status.h"
#include "base/util.h"
#include "harness.h"
#include "tensor/dtype.h"

TEST(status_names) {
    CHECK_STREQ(ea_status_name(EA_ERR_FORMAT), "EA_ERR_FORMAT");
    CHECK_STREQ(ea_status_name((ea_status)-999), "EA_UNKNOWN");
    CHECK_EQ(ea_err(EA_ERR_RANGE, "x=%d", 5), EA_ERR_RANGE);
    CHECK_STREQ(ea_errmsg(), "x=5");
    ea_err_wrap(EA_ERR_RANGE, "loading %s: ", "m");
    CHECK_STREQ(ea_errmsg(), "loading m: x=5");
}

TEST(alloc_fail_injection) {
    uint64_t c0 = ea_alloc_count();
    void *a = ea_malloc(10);
    CHECK(a);
    CHECK_EQ(ea_alloc_count(), c0 + 1);
    ea_alloc_fail_after(1);
    void *b = ea_malloc(10);
    void *c = ea_malloc(10);
    ea_alloc_fail_after(-1);
    CHECK(b);
    CHECK(c == NULL);
    ea_free(a);
    ea_free(b);
    size_t r;
    CHECK(!ea_mul_ok((size_t)1 << 40, (size_t)1 << 40, &r));
}

TEST(arena) {
    ea_arena a;
    CHECK_EQ(ea_arena_init(&a, 1024), 0);
    void *p = ea_arena_alloc(&a, 100, 64);
    void *q = ea_arena_alloc(&a, 100, 64);
    CHECK(p && q && ((uintptr_t)q % 64) == 0 && (char *)q >= (char *)p + 100);
    CHECK(ea_arena_alloc(&a, 2000, 64) == NULL);
    ea_arena_reset(&a);
    CHECK(ea_arena_alloc(&a, 1000, 8) != NULL);
    ea_arena_deinit(&a);
}

static void sum_task(void *ctx, int task, int thread) {
    (void)thread;
    ((long *)ctx)[task] = (long)task * task;
}

TEST(pool_runs_all_tasks) {
    ea_pool *p;
    CHECK_EQ(ea_pool_create(2, &p), EA_OK);
    long out[100];
    for (int rep = 0; rep < 50; rep++) {
        memset(out, 0, sizeof out);
        ea_pool_run(p, sum_task, out, 100);
        for (int i = 0; i < 100; i++) CHECK_EQ(out[i], (long)i * i);
    }
    ea_pool_destroy(p);
    ea_pool_destroy(NULL);
}

TEST(args) {
    int n = 3, flag = 0;
    double t = 0;
    const char *model = NULL;
    ea_arg spec[] = {{"n", EA_ARG_INT, &n, "N", ""},
                     {"flag", EA_ARG_BOOL, &flag, NULL, ""},
                     {"temp", EA_ARG_DOUBLE, &t, "T", ""},
                     {"model", EA_ARG_STR, &model, "M", ""},
                     {0}};
    char *argv[] = {"cmd", "--n", "7", "pos", "--flag", "--temp=0.5", "--model", "x"};
    ea_args_rest rest;
    CHECK_EQ(ea_args_parse(spec, 8, argv, &rest), EA_OK);
    CHECK_EQ(n, 7);
    CHECK_EQ(flag, 1);
    CHECK_NEAR(t, 0.5, 0);
    CHECK_STREQ(model, "x");
    CHECK_EQ(rest.n_pos, 1);
    char *bad[] = {"cmd", "--n", "7x"};
    CHECK_EQ(ea_args_parse(spec, 3, bad, &rest), EA_ERR_INVALID_ARG);
    char *unk[] = {"cmd", "--nope"};
    CHECK_EQ(ea_args_parse(spec, 2, unk, &rest), EA_ERR_INVALID_ARG);
    /* no range in the table: [0, type max], so a negative number is refused, naming the flag */
    char *neg[] = {"cmd", "--n", "-5"};
    CHECK_EQ(ea_args_parse(spec, 3, neg, &rest), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "--n: -5 is out of range: expected an integer >= 0") != NULL);
    CHECK_EQ(n, 7); /* unchanged */
}

TEST(args_ranges_and_needs) {
    int w = 1000, iv = 1000, cap = 1024, on = 0;
    long big = 0;
    double x = 0.9;
    const char *dir = NULL;
    ea_arg spec[] = {{"window", EA_ARG_INT, &w, "W", "", 1, 100},
                     {"interval", EA_ARG_INT, &iv, "N", "", -1, EA_ARG_NO_MAX},
                     {"bal", EA_ARG_DOUBLE, &x, "X", "", 0, 1},
                     {"big", EA_ARG_LONG, &big, "N", ""},
                     {"on", EA_ARG_BOOL, &on, NULL, ""},
                     {"dir", EA_ARG_STR, &dir, "D", ""},
                     {"cap", EA_ARG_INT, &cap, "N", "", 0, 0, "dir"},
                     {"tune", EA_ARG_INT, &w, "N", "", 0, 0, "on|dir"},
                     {0}};
    ea_args_rest rest;
    struct {
        const char *a, *b, *msg; /* NULL msg: accepted */
    } cases[] = {
        {"--window", "-5", "--window: -5 is out of range: expected an integer in [1, 100]"},
        {"--window", "101", "--window: 101 is out of range: expected an integer in [1, 100]"},
        {"--window", "100", NULL},
        {"--interval", "-1", NULL},
        {"--interval", "-2", "--interval: -2 is out of range: expected an integer >= -1"},
        {"--interval", "2147483647", NULL},
        {"--interval", "2147483648", "out of range"},
        {"--bal", "1.5", "--bal: 1.5 is out of range: expected a number in [0, 1]"},
        {"--bal", "nan", "out of range"},
        {"--bal", "1", NULL},
        {"--big", "-1", "expected an integer >= 0"},
        {"--big", "99999999999999999999", "out of range"},
        {"--cap", "5", "--cap needs --dir"},
        {"--tune", "5", "--tune needs --on or --dir"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {"cmd", (char *)cases[i].a, (char *)cases[i].b};
        ea_status s = ea_args_parse(spec, 3, argv, &rest);
        if (!cases[i].msg) {
            CHECK_EQ(s, EA_OK);
        } else {
            CHECK_EQ(s, EA_ERR_INVALID_ARG);
            CHECK(strstr(ea_errmsg(), cases[i].msg) != NULL);
        }
    }
    char *with[] = {"cmd", "--dir", "d", "--cap=5", "--on", "--tune", "3"};
    CHECK_EQ(ea_args_parse(spec, 7, with, &rest), EA_OK);
    CHECK_EQ(cap, 5);
    CHECK(ea_args_given(spec, &rest, "cap") && !ea_args_given(spec, &rest, "window"));
}

TEST(dtype_roundtrip) {
    /* every f16 value converts to f32 and back exactly */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ea_f16_to_f32((uint16_t)h);
        if (f != f) continue;
        CHECK_EQ(ea_f32_to_f16(f), h);
    }
    CHECK_EQ(ea_f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ(ea_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ(ea_f32_to_f16(1e6f), 0x7c00);
    CHECK_EQ(ea_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ(ea_f32_to_bf16(1.00390625f), 0x3f80); /* tie rounds to even */
    CHECK_EQ(ea_dtype_parse("BF16"), EA_BF16);
    CHECK_EQ(ea_dtype_parse("q8_0"), EA_Q8_0);
    CHECK_EQ(ea_dtype_parse("q4_k"), -1);
    CHECK_EQ(ea_dtype_row_bytes(EA_Q8_0, 64), 68);
    CHECK_EQ(ea_dtype_row_bytes(EA_Q8_0, 33), 0);
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) * 0.25f;
    ea_block_q8_0 b;
    ea_dtypes[EA_Q8_0].from_f32(x, &b, 32);
    ea_dtypes[EA_Q8_0].to_f32(&b, y, 32);
    for (int i = 0; i < 32; i++) CHECK_NEAR(y[i], x[i], 0.02);
}

int main(void) {
    RUN(status_names);
    RUN(alloc_fail_injection);
    RUN(arena);
    RUN(pool_runs_all_tasks);
    RUN(args);
    RUN(args_ranges_and_needs);
    RUN(dtype_roundtrip);
    return TEST_SUMMARY();
}
