/*
 * ops.c — row-wise kernels; see ops.h.
 *
 * These are plain C the compiler vectorises; their order of summation is
 * fixed by the source (no -ffast-math anywhere), so results are reproducible
 * and identical for a row whatever batch it is in. The dot product uses 16
 * partial sums (lane j takes elements j, j+16, ...) combined pairwise at the
 * end — one fixed order, written so the compiler can keep it in one vector.
 */
#include "kernels/ops.h"

#include <math.h>

void ea_k_rmsnorm(const float *x, const float *w, float eps, int n, float *y) {
    float ss = ea_k_dot_f32(x, x, n);
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * r) * w[i];
}

void ea_k_rope_half(float *x, int rot, const float *cs) {
    int h = rot / 2;
    const float *c = cs, *s = cs + h;
    for (int i = 0; i < h; i++) {
        float x0 = x[i], x1 = x[i + h];
        x[i] = x0 * c[i] - x1 * s[i];
        x[i + h] = x1 * c[i] + x0 * s[i];
    }
}

void ea_k_rope_interleaved(float *x, int rot, const float *cs) {
    int h = rot / 2;
    const float *c = cs, *s = cs + h;
    for (int i = 0; i < h; i++) {
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c[i] - x1 * s[i];
        x[2 * i + 1] = x1 * c[i] + x0 * s[i];
    }
}

void ea_k_softmax(float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void ea_k_silu_mul(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ea_k_axpy(float a, const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

float ea_k_dot_f32(const float *a, const float *b, int n) {
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += a[i + j] * b[i + j];
    for (int j = 0; i < n; i++, j++) acc[j] += a[i] * b[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

int ea_k_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
