/*
 * harness.h — the test harness: TEST functions, CHECK macros, a summary line.
 *
 *   TEST(parses_header) { CHECK_EQ(1 + 1, 2); }
 *   int main(void) { RUN(parses_header); return TEST_SUMMARY(); }
 *
 * Prints "N passed, N failed" and returns non-zero if any check failed.
 * A failed CHECK reports file:line and the expression, and ends that test.
 */
#ifndef EA_HARNESS_H
#define EA_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ea_t_passed, ea_t_failed, ea_t_cur_failed;

/* Run a shell command (printf-style); a non-zero status is reported on stderr
 * with the command. Returns system()'s status. For tests that build models
 * with the eaas binary or run the NumPy reference. */
static inline int ea_t_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int ea_t_sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "  command failed (%d): %s\n", rc, cmd);
    return rc;
}

/* Logits of rows of V: row r's max|a−b| / max|b|. */
static inline double ea_t_row_err(const float *a, const float *b, int r, int V) {
    double md = 0, mb = 0;
    for (int i = 0; i < V; i++) {
        double d = fabs((double)a[(size_t)r * V + i] - b[(size_t)r * V + i]);
        md = d > md ? d : md;
        mb = fabs(b[(size_t)r * V + i]) > mb ? fabs(b[(size_t)r * V + i]) : mb;
    }
    return md / mb;
}

/* The worst row's ea_t_row_err; *n_over (if not NULL): the rows above bound. */
static inline double ea_t_rel_err(const float *a, const float *b, int rows, int V, double bound, int *n_over) {
    double worst = 0;
    if (n_over) *n_over = 0;
    for (int r = 0; r < rows; r++) {
        double e = ea_t_row_err(a, b, r, V);
        if (n_over) *n_over += e > bound;
        worst = e > worst ? e : worst;
    }
    return worst;
}

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                          \
    do {                                                                   \
        ea_t_cur_failed = 0;                                               \
        test_##name();                                                     \
        if (ea_t_cur_failed) { ea_t_failed++; fprintf(stderr, "FAIL %s\n", #name); } \
        else { ea_t_passed++; fprintf(stderr, "ok   %s\n", #name); }     \
    } while (0)
#define FAIL_(...)                                                         \
    do {                                                                   \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                 \
        fprintf(stderr, __VA_ARGS__);                                      \
        fprintf(stderr, "\n");                                             \
        ea_t_cur_failed = 1;                                               \
        return;                                                            \
    } while (0)
#define CHECK(c) do { if (!(c)) FAIL_("CHECK(%s)", #c); } while (0)
#define CHECK_EQ(a, b)                                                     \
    do {                                                                   \
        long long ea_a_ = (long long)(a), ea_b_ = (long long)(b);          \
        if (ea_a_ != ea_b_) FAIL_("CHECK_EQ(%s, %s): %lld != %lld", #a, #b, ea_a_, ea_b_); \
    } while (0)
#define CHECK_STREQ(a, b)                                                  \
    do {                                                                   \
        const char *ea_a_ = (a), *ea_b_ = (b);                             \
        if (!ea_a_ || !ea_b_ || strcmp(ea_a_, ea_b_))                      \
            FAIL_("CHECK_STREQ(%s, %s): \"%s\" != \"%s\"", #a, #b, ea_a_ ? ea_a_ : "(null)", ea_b_ ? ea_b_ : "(null)"); \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                              \
    do {                                                                   \
        double ea_a_ = (a), ea_b_ = (b);                                   \
        if (!(fabs(ea_a_ - ea_b_) <= (tol)))                               \
            FAIL_("CHECK_NEAR(%s, %s): %.9g vs %.9g (tol %g)", #a, #b, ea_a_, ea_b_, (double)(tol)); \
    } while (0)
#define TEST_SUMMARY() \
    (printf("%d passed, %d failed\n", ea_t_passed, ea_t_failed), ea_t_failed ? 1 : 0)

#endif
