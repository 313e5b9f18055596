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

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kernels/exp_impl.h"
#include "kernels/matmul.h"

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

/* The scalar form of exp_impl.h's ea__expf16 / ea__expf8: the same operations in the same order. */
float ea_k_expf(float x) {
    x = x < EA__EXP_LO ? EA__EXP_LO : x > EA__EXP_HI ? EA__EXP_HI : x;
    float n = rintf(x * EA__LOG2E);
    float r = fmaf(n, -EA__LN2_HI, x);
    r = fmaf(n, -EA__LN2_LO, r);
    float p = EA__E0;
    p = fmaf(p, r, EA__E1);
    p = fmaf(p, r, EA__E2);
    p = fmaf(p, r, EA__E3);
    p = fmaf(p, r, EA__E4);
    p = fmaf(p, r, EA__E5);
    float y = fmaf(p, r * r, r) + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return y * s;
}

void ea_k_silu_mul_ref(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + ea_k_expf(-g[i])) * u[i];
}

EA__T512 static void ea__silu_mul_avx512(float *g, const float *u, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        __m512 e = ea__expf16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        __m512 y = _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), _mm512_maskz_loadu_ps(m, u + i));
        _mm512_mask_storeu_ps(g + i, m, y);
    }
}

/* The AVX2 form: 8 lanes, the tail masked (its lanes past n compute on zeros
 * and are not stored). */
EA__T256 static void ea__silu_mul_avx2(float *g, const float *u, int n) {
    for (int i = 0; i < n; i += 8) {
        __m256i m = ea__mask8(n - i);
        __m256 x = _mm256_maskload_ps(g + i, m);
        __m256 e = ea__expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        __m256 y = _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_maskload_ps(u + i, m));
        _mm256_maskstore_ps(g + i, m, y);
    }
}

/* The dot product and axpy are the inner loops of attention; each has a plain
 * twin (_ref) and AVX-512 and AVX2 variants that perform the same operations
 * in the same order (separate multiply and add, no FMA — the build is ISO C,
 * so GCC does not contract them either; the same 16 lanes and the same
 * reduction tree), so all give the same bits. The variant is picked at first
 * use from EAAS_ISA or the CPU's features, or set by ea_k_ops_set_isa (tests
 * run every variant the CPU has against the twins). */
void ea_k_axpy_ref(float a, const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

float ea_k_dot_f32_ref(const float *a, const float *b, int n) {
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += a[i + j] * b[i + j];
    for (int j = 0; i < n; i++, j++) acc[j] += a[i] * b[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

__attribute__((target("avx512f"))) static void ea__axpy_avx512(float a, const float *x, float *y, int n) {
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_mul_ps(va, _mm512_loadu_ps(x + i))));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, x + i)));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

__attribute__((target("avx512f"))) static float ea__dot_avx512(const float *a, const float *b, int n) {
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc = _mm512_mask_add_ps(acc, m, acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
    /* tree: lanes j += j+8, then j += j+4, j += j+2, j += j+1 */
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

EA__T256 static void ea__axpy_avx2(float a, const float *x, float *y, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
    if (i < n) {
        __m256i m = ea__mask8(n - i);
        __m256 r = _mm256_add_ps(_mm256_maskload_ps(y + i, m), _mm256_mul_ps(va, _mm256_maskload_ps(x + i, m)));
        _mm256_maskstore_ps(y + i, m, r);
    }
}

/* The 16 lanes are two ymm: lo = lanes 0..7, hi = lanes 8..15. Tail lanes past
 * n keep their sum (blend), as in the twin. */
EA__T256 static float ea__dot_avx2(const float *a, const float *b, int n) {
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8)));
    }
    if (i < n) {
        __m256i m0 = ea__mask8(n - i), m1 = ea__mask8(n - i - 8);
        __m256 p0 = _mm256_mul_ps(_mm256_maskload_ps(a + i, m0), _mm256_maskload_ps(b + i, m0));
        __m256 p1 = _mm256_mul_ps(_mm256_maskload_ps(a + i + 8, m1), _mm256_maskload_ps(b + i + 8, m1));
        lo = _mm256_blendv_ps(lo, _mm256_add_ps(lo, p0), _mm256_castsi256_ps(m0));
        hi = _mm256_blendv_ps(hi, _mm256_add_ps(hi, p1), _mm256_castsi256_ps(m1));
    }
    /* tree: lanes j += j+8, then j += j+4, j += j+2, j += j+1 */
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

typedef float (*ea__dot_fn)(const float *, const float *, int);
typedef void (*ea__axpy_fn)(float, const float *, float *, int);
typedef void (*ea__silu_fn)(float *, const float *, int);
static ea__dot_fn ea__dot_impl;
static ea__axpy_fn ea__axpy_impl;
static ea__silu_fn ea__silu_impl;
static int ea__level = -1; /* ea__ops_level; -1 until the first call picks */

/* "scalar" 0, "avx2" 1, "avx512" / "avx512_bf16" / "amx" 2 (the row-wise
 * kernels have no bf16 or AMX form: those contexts run the AVX-512 ones). */
static int ea__level_of(const char *isa) {
    if (!strcmp(isa, "scalar")) return EA__OPS_SCALAR;
    if (!strcmp(isa, "avx2")) return EA__OPS_AVX2;
    if (!strcmp(isa, "avx512") || !strcmp(isa, "avx512_bf16") || !strcmp(isa, "amx")) return EA__OPS_AVX512;
    return -1;
}

/* The pointers are stored and loaded atomically: the first calls may come from
 * several pool threads at once, each installing the same choice (found by
 * ThreadSanitizer; on x86 the loads are plain moves). Callers go through
 * ea__ops_level first, whose acquire of the level makes them visible. */
static void ea__install(int level) {
    __atomic_store_n(&ea__dot_impl,
                     level == EA__OPS_AVX512 ? ea__dot_avx512 : level == EA__OPS_AVX2 ? ea__dot_avx2 : ea_k_dot_f32_ref,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&ea__axpy_impl,
                     level == EA__OPS_AVX512 ? ea__axpy_avx512 : level == EA__OPS_AVX2 ? ea__axpy_avx2 : ea_k_axpy_ref,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&ea__silu_impl,
                     level == EA__OPS_AVX512 ? ea__silu_mul_avx512
                     : level == EA__OPS_AVX2 ? ea__silu_mul_avx2
                                             : ea_k_silu_mul_ref,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&ea__level, level, __ATOMIC_RELEASE);
}

/* First use: EAAS_OPS_REF -> the twins; else EAAS_ISA (the matmul contexts'
 * switch) if this CPU runs it; else the CPU's best (AVX-512 > AVX2 + FMA > scalar). */
static int ea__pick(void) {
    const char *env = getenv("EAAS_ISA");
    int level = ea__level_of(ea_k_isa_best());
    if (getenv("EAAS_OPS_REF"))
        level = EA__OPS_SCALAR;
    else if (env && ea__level_of(env) >= 0 && ea_k_isa_supported(env))
        level = ea__level_of(env);
    ea__install(level);
    return level;
}

int ea__ops_level(void) {
    int level = __atomic_load_n(&ea__level, __ATOMIC_ACQUIRE);
    return level >= 0 ? level : ea__pick();
}

ea_status ea_k_ops_set_isa(const char *isa) {
    if (!isa) {
        ea__pick();
        return EA_OK;
    }
    int level = ea__level_of(isa);
    if (level < 0) return ea_err(EA_ERR_INVALID_ARG, "unknown ISA '%s' (scalar, avx2, avx512, avx512_bf16, amx)", isa);
    if (!ea_k_isa_supported(isa)) return ea_err(EA_ERR_UNSUPPORTED, "ISA '%s' is not supported by this CPU", isa);
    ea__install(level);
    return EA_OK;
}

const char *ea_k_ops_isa(void) {
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    return names[ea__ops_level()];
}

void ea_k_silu_mul(float *g, const float *u, int n) {
    ea__ops_level(); /* installs the kernels on first use */
    __atomic_load_n(&ea__silu_impl, __ATOMIC_ACQUIRE)(g, u, n);
}

void ea_k_axpy(float a, const float *x, float *y, int n) {
    ea__ops_level(); /* installs the kernels on first use */
    __atomic_load_n(&ea__axpy_impl, __ATOMIC_ACQUIRE)(a, x, y, n);
}

float ea_k_dot_f32(const float *a, const float *b, int n) {
    ea__ops_level(); /* installs the kernels on first use */
    return __atomic_load_n(&ea__dot_impl, __ATOMIC_ACQUIRE)(a, b, n);
}

int ea_k_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
