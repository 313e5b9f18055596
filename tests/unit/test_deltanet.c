/*
 * test_deltanet.c — the Gated DeltaNet kernels (kernels/deltanet.h) against
 * their _ref twins, bit for bit, under every variant of the row-wise kernels
 * this CPU has (ops_variants.h), on odd shapes (tails of 8 and 16 lanes);
 * the twins against double precision; and the chunked form against the
 * recurrent steps it replaces.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/deltanet.h"
#include "kernels/ops.h"
#include "ops_variants.h"

static uint64_t rng = 88172645463325252ull;
static float urand(void) { /* (-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = urand() * scale;
}

static const int dims[][2] = {{16, 16}, {7, 13}, {24, 5}, {33, 17}, {64, 128}};

TEST(conv_silu_same_bits_as_twin) {
    const int Cs[] = {1, 7, 8, 15, 16, 17, 100, 384};
    for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++)
        for (int K = 1; K <= 4; K++) {
            int C = Cs[ci];
            float *rows = malloc(sizeof(float) * (size_t)K * C), *wt = malloc(sizeof(float) * (size_t)K * C);
            float *a = malloc(sizeof(float) * (size_t)C), *b = malloc(sizeof(float) * (size_t)C);
            fill(rows, (size_t)K * C, 2.0f);
            fill(wt, (size_t)K * C, 0.5f);
            const float *rp[4];
            for (int j = 0; j < K; j++) rp[j] = rows + (size_t)j * C;
            ea_k_conv_silu(rp, wt, C, K, a);
            ea_k_conv_silu_ref(rp, wt, C, K, b);
            CHECK(memcmp(a, b, sizeof(float) * (size_t)C) == 0);
            for (int c = 0; c < C; c++) { /* the twin against double */
                double acc = 0;
                for (int j = 0; j < K; j++) acc += (double)wt[(size_t)j * C + c] * rp[j][c];
                double y = acc / (1.0 + exp(-acc));
                CHECK(fabs(b[c] - y) <= 1e-6 * (1 + fabs(y)));
            }
            free(rows), free(wt), free(a), free(b);
        }
}

TEST(norms_same_bits_as_twin) {
    const int ns[] = {1, 5, 16, 17, 100, 128};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int n = ns[i];
        float x[128], w[128], z[128], a[128], b[128];
        fill(x, (size_t)n, 3.0f), fill(w, (size_t)n, 1.0f), fill(z, (size_t)n, 4.0f);
        memcpy(a, x, (size_t)n * sizeof *x), memcpy(b, x, (size_t)n * sizeof *x);
        ea_k_l2norm(a, n, 1e-6f);
        ea_k_l2norm_ref(b, n, 1e-6f);
        CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0);
        double ss = 0;
        for (int j = 0; j < n; j++) ss += (double)x[j] * x[j];
        for (int j = 0; j < n; j++) CHECK(fabs(b[j] - x[j] / sqrt(ss + 1e-6)) <= 1e-6);
        ea_k_rmsnorm_gated(x, w, z, 1e-6f, n, a);
        ea_k_rmsnorm_gated_ref(x, w, z, 1e-6f, n, b);
        CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0);
        for (int j = 0; j < n; j++) {
            double y = w[j] * (x[j] / sqrt(ss / n + 1e-6)) * (z[j] / (1 + exp(-(double)z[j])));
            CHECK(fabs(b[j] - y) <= 1e-5 * (1 + fabs(y)));
        }
    }
}

/* Double-precision delta rule over L tokens (the definition), from state S0. */
static void delta_double(const double *S0, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, int L, int dk, int dv, double *S, double *o) {
    memcpy(S, S0, sizeof(double) * (size_t)dk * dv);
    for (int t = 0; t < L; t++) {
        double eg = exp((double)g[t]);
        for (int i = 0; i < dk * dv; i++) S[i] *= eg;
        for (int j = 0; j < dv; j++) {
            double m = 0;
            for (int i = 0; i < dk; i++) m += S[(size_t)i * dv + j] * k[(size_t)t * dk + i];
            double u = beta[t] * (v[(size_t)t * dv + j] - m);
            for (int i = 0; i < dk; i++) S[(size_t)i * dv + j] += k[(size_t)t * dk + i] * u;
        }
        for (int j = 0; j < dv; j++) {
            double a = 0;
            for (int i = 0; i < dk; i++) a += S[(size_t)i * dv + j] * q[(size_t)t * dk + i];
            o[(size_t)t * dv + j] = a;
        }
    }
}

/* random normalised q, k (q scaled), v, decays g < 0, beta in (0, 1) */
static void inputs(int L, int dk, int dv, float *q, float *k, float *v, float *g, float *beta, float *S) {
    fill(q, (size_t)L * dk, 1), fill(k, (size_t)L * dk, 1), fill(v, (size_t)L * dv, 1), fill(S, (size_t)dk * dv, 0.5f);
    for (int t = 0; t < L; t++) {
        ea_k_l2norm_ref(q + (size_t)t * dk, dk, 1e-6f);
        ea_k_l2norm_ref(k + (size_t)t * dk, dk, 1e-6f);
        for (int i = 0; i < dk; i++) q[(size_t)t * dk + i] /= sqrtf((float)dk);
        g[t] = -0.3f * (urand() + 1.0f);
        beta[t] = 0.5f + 0.49f * urand();
    }
}

TEST(delta_step_same_bits_as_twin_and_exact) {
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        int dk = dims[di][0], dv = dims[di][1], L = 5;
        float q[5 * 64], k[5 * 64], v[5 * 128], g[5], beta[5], u[128];
        float *S1 = malloc(sizeof(float) * (size_t)dk * dv), *S2 = malloc(sizeof(float) * (size_t)dk * dv);
        double *S0 = malloc(sizeof(double) * (size_t)dk * dv), *Sd = malloc(sizeof(double) * (size_t)dk * dv);
        float o1[5 * 128], o2[5 * 128];
        double od[5 * 128];
        inputs(L, dk, dv, q, k, v, g, beta, S1);
        memcpy(S2, S1, sizeof(float) * (size_t)dk * dv);
        for (int i = 0; i < dk * dv; i++) S0[i] = S1[i];
        for (int t = 0; t < L; t++) {
            ea_k_delta_step(S1, q + t * dk, k + t * dk, v + t * dv, expf(g[t]), beta[t], dk, dv, o1 + t * dv, u);
            ea_k_delta_step_ref(S2, q + t * dk, k + t * dk, v + t * dv, expf(g[t]), beta[t], dk, dv, o2 + t * dv, u);
        }
        CHECK(memcmp(S1, S2, sizeof(float) * (size_t)dk * dv) == 0);
        CHECK(memcmp(o1, o2, sizeof(float) * (size_t)L * dv) == 0);
        delta_double(S0, q, k, v, g, beta, L, dk, dv, Sd, od);
        for (int i = 0; i < L * dv; i++) CHECK(fabs(o2[i] - od[i]) <= 1e-5);
        for (int i = 0; i < dk * dv; i++) CHECK(fabs(S2[i] - Sd[i]) <= 1e-5);
        free(S1), free(S2), free(S0), free(Sd);
    }
}

/* The chunked form: same bits as its twin, and within rounding of the definition. Tokens are
 * read with strides (as the forward pass lays them out: q, k, v in one row of C channels). */
TEST(delta_chunk_same_bits_as_twin_and_exact) {
    const int Ls[] = {2, 3, 17, 64};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t li = 0; li < sizeof Ls / sizeof Ls[0]; li++) {
            int dk = dims[di][0], dv = dims[di][1], L = Ls[li];
            size_t C = 2 * (size_t)dk + (size_t)dv + 3; /* a row: q | k | v | pad */
            float *q = malloc(sizeof(float) * (size_t)L * dk), *k = malloc(sizeof(float) * (size_t)L * dk);
            float *v = malloc(sizeof(float) * (size_t)L * dv), g[64], beta[64], gb[2 * 64];
            float *S1 = malloc(sizeof(float) * (size_t)dk * dv), *S2 = malloc(sizeof(float) * (size_t)dk * dv);
            float *row = malloc(sizeof(float) * (size_t)L * C), *o1 = malloc(sizeof(float) * (size_t)L * dv * 2);
            float *o2 = malloc(sizeof(float) * (size_t)L * dv * 2);
            float *sc = malloc(sizeof(float) * ea_k_delta_chunk_scratch(dk, dv));
            double *S0 = malloc(sizeof(double) * (size_t)dk * dv), *Sd = malloc(sizeof(double) * (size_t)dk * dv);
            double *od = malloc(sizeof(double) * (size_t)L * dv);
            inputs(L, dk, dv, q, k, v, g, beta, S1);
            memcpy(S2, S1, sizeof(float) * (size_t)dk * dv);
            for (int i = 0; i < dk * dv; i++) S0[i] = S1[i];
            for (int t = 0; t < L; t++) {
                memcpy(row + t * C, q + (size_t)t * dk, sizeof(float) * (size_t)dk);
                memcpy(row + t * C + dk, k + (size_t)t * dk, sizeof(float) * (size_t)dk);
                memcpy(row + t * C + 2 * dk, v + (size_t)t * dv, sizeof(float) * (size_t)dv);
                gb[2 * t] = g[t], gb[2 * t + 1] = beta[t];
            }
            ea_k_delta_chunk(S1, row, C, row + dk, C, row + 2 * dk, C, gb, gb + 1, 2, L, dk, dv, o1, 2 * (size_t)dv, sc);
            ea_k_delta_chunk_ref(S2, row, C, row + dk, C, row + 2 * dk, C, gb, gb + 1, 2, L, dk, dv, o2, 2 * (size_t)dv,
                                 sc);
            CHECK(memcmp(S1, S2, sizeof(float) * (size_t)dk * dv) == 0);
            int same = 1;
            for (int t = 0; t < L; t++) same &= memcmp(o1 + 2 * t * dv, o2 + 2 * t * dv, sizeof(float) * (size_t)dv) == 0;
            CHECK(same);
            delta_double(S0, q, k, v, g, beta, L, dk, dv, Sd, od);
            double worst = 0;
            for (int t = 0; t < L; t++)
                for (int j = 0; j < dv; j++) worst = fmax(worst, fabs(o2[2 * t * dv + j] - od[(size_t)t * dv + j]));
            for (int i = 0; i < dk * dv; i++) worst = fmax(worst, fabs(S2[i] - Sd[i]));
            if (worst > 2e-5) fprintf(stderr, "  dk %d dv %d L %d: chunked vs exact %.3g\n", dk, dv, L, worst);
            CHECK(worst <= 2e-5);
            free(q), free(k), free(v), free(S1), free(S2), free(row), free(o1), free(o2), free(sc), free(S0), free(Sd),
                free(od);
        }
}

int main(void) {
    for (int i = 0; i < OPS_N_VARIANTS; i++) {
        int sel = ops_variant_select(i);
        if (sel < 0) return 1;
        if (!sel) continue;
        RUN(conv_silu_same_bits_as_twin);
        RUN(norms_same_bits_as_twin);
        RUN(delta_step_same_bits_as_twin_and_exact);
        RUN(delta_chunk_same_bits_as_twin_and_exact);
    }
    return TEST_SUMMARY();
}
