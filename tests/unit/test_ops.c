/* test_ops.c — the row-wise kernels: every variant of dot, axpy and SiLU this
 * CPU runs (scalar, AVX2, AVX-512, each selected with ea_k_ops_set_isa; absent
 * ISAs skipped) gives the same bits as the plain twins on every length (every
 * tail of 8 and 16); EAAS_ISA picks the variant at first use; rmsnorm, softmax
 * and RoPE against direct formulas; the kernels' exp against libm. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "ops_variants.h"

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2 - 1);
}

TEST(dot_and_axpy_match_ref_bits) {
    uint64_t s = 1;
    float a[300], b[300], y1[300], y2[300];
    for (int i = 0; i < 300; i++) a[i] = rnd(&s), b[i] = rnd(&s) * 100;
    for (int n = 0; n <= 300; n++) {
        float d1 = ea_k_dot_f32(a, b, n), d2 = ea_k_dot_f32_ref(a, b, n);
        CHECK(memcmp(&d1, &d2, 4) == 0);
        for (int i = 0; i < n; i++) y1[i] = y2[i] = b[i];
        ea_k_axpy(0.37f, a, y1, n);
        ea_k_axpy_ref(0.37f, a, y2, n);
        CHECK(memcmp(y1, y2, sizeof(float) * (size_t)n) == 0);
    }
    double exact = 0;
    for (int i = 0; i < 300; i++) exact += (double)a[i] * b[i];
    CHECK_NEAR(ea_k_dot_f32(a, b, 300), exact, 1e-3);
}

TEST(rmsnorm_softmax_rope) {
    float x[8] = {1, 2, 3, 4, -1, -2, -3, -4}, w[8] = {1, 1, 1, 1, 2, 2, 2, 2}, y[8];
    ea_k_rmsnorm(x, w, 1e-6f, 8, y);
    double ms = (1 + 4 + 9 + 16) * 2 / 8.0;
    CHECK_NEAR(y[0], 1 / sqrt(ms + 1e-6), 1e-6);
    CHECK_NEAR(y[7], -4 * 2 / sqrt(ms + 1e-6), 1e-5);
    float p[3] = {1, 2, 3};
    ea_k_softmax(p, 3);
    double z = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(p[2], exp(3) / z, 1e-6);
    /* rotate-half: pair (x0, x2) and (x1, x3) by angles 0 and pi/2 */
    float r[4] = {1, 2, 3, 4}, cs[4] = {1, 0, 0, 1}; /* cos0=1, cos1=0, sin0=0, sin1=1 */
    ea_k_rope_half(r, 4, cs);
    CHECK_NEAR(r[0], 1, 1e-7);
    CHECK_NEAR(r[2], 3, 1e-7);
    CHECK_NEAR(r[1], -4, 1e-7); /* x1*cos - x3*sin */
    CHECK_NEAR(r[3], 2, 1e-7);  /* x3*cos + x1*sin */
    float q[4] = {1, 2, 3, 4};
    ea_k_rope_interleaved(q, 4, cs);
    CHECK_NEAR(q[0], 1, 1e-7);
    CHECK_NEAR(q[1], 2, 1e-7);
    CHECK_NEAR(q[2], -4, 1e-7);
    CHECK_NEAR(q[3], 3, 1e-7);
}

TEST(expf_accuracy) {
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double e = exp((double)x), rel = fabs(ea_k_expf(x) - e) / e;
        worst = rel > worst ? rel : worst;
    }
    fprintf(stderr, "  exp on [-87, 88]: worst relative error %.2e\n", worst);
    CHECK(worst < 3e-7);
    CHECK(ea_k_expf(0.0f) == 1.0f);
    CHECK(ea_k_expf(-1000.0f) == ea_k_expf(-87.0f));
}

TEST(silu_matches_ref_bits) {
    uint64_t s = 7;
    float g1[100], g2[100], u[100] = {0};
    for (int n = 0; n <= 100; n++) {
        for (int i = 0; i < n; i++) g1[i] = g2[i] = rnd(&s) * 30, u[i] = rnd(&s);
        if (n > 2) g1[0] = g2[0] = -200.0f, g1[1] = g2[1] = 200.0f;
        if (n > 4) g1[2] = g2[2] = 0.0f, g1[3] = g2[3] = -0.0f;
        ea_k_silu_mul(g1, u, n);
        ea_k_silu_mul_ref(g2, u, n);
        CHECK(memcmp(g1, g2, sizeof(float) * (size_t)n) == 0);
    }
    float g = 1.5f, one = 1.0f;
    ea_k_silu_mul(&g, &one, 1);
    CHECK_NEAR(g, 1.5 / (1 + exp(-1.5)), 2e-7);
}

/* Before any kernel ran: EAAS_ISA (the matmul contexts' switch) picks the variant too. */
TEST(eaas_isa_picks_the_variant_at_first_use) {
    CHECK_STREQ(ea_k_ops_isa(), "scalar");
    CHECK_EQ(ea_k_ops_set_isa("avx3"), EA_ERR_INVALID_ARG);
    if (!ea_k_isa_supported("avx512")) CHECK_EQ(ea_k_ops_set_isa("avx512"), EA_ERR_UNSUPPORTED);
    CHECK_EQ(ea_k_ops_set_isa(NULL), EA_OK); /* back to the first-use choice */
    CHECK_STREQ(ea_k_ops_isa(), "scalar");
    unsetenv("EAAS_ISA");
    CHECK_EQ(ea_k_ops_set_isa(NULL), EA_OK);
    const char *best = ea_k_isa_best();
    CHECK_STREQ(ea_k_ops_isa(), !strcmp(best, "amx") || !strcmp(best, "avx512_bf16") ? "avx512" : best);
}

int main(void) {
    if (!getenv("EAAS_ISA") && !getenv("EAAS_OPS_REF")) {
        setenv("EAAS_ISA", "scalar", 1);
        RUN(eaas_isa_picks_the_variant_at_first_use);
    }
    for (int i = 0; i < OPS_N_VARIANTS; i++) {
        int sel = ops_variant_select(i);
        if (sel < 0) return 1;
        if (!sel) continue;
        RUN(dot_and_axpy_match_ref_bits);
        RUN(silu_matches_ref_bits);
    }
    RUN(rmsnorm_softmax_rope);
    RUN(expf_accuracy);
    return TEST_SUMMARY();
}
