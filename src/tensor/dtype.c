/*
 * dtype.c — conversions and the traits table. See dtype.h.
 *
 * f16 conversions are written out in integer arithmetic (no F16C), so the
 * scalar path is exact and portable; the SIMD kernels use F16C/AVX-512 where
 * present and are tested against these.
 */
#include "tensor/dtype.h"

#include <math.h>
#include <string.h>

float ea_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400u) == 0);
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t ea_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow to inf (>= 65520) */
    if (a < 0x38800000u) {                                    /* subnormal or zero in f16 */
        if (a < 0x33000000u) return (uint16_t)sign;           /* < half the smallest subnormal */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t lsb = (r >> 13) & 1u;
    r += 0xfffu + lsb;
    return (uint16_t)(sign | (r >> 13));
}

static void ea__f32_to_f32(const void *src, float *dst, size_t n) { memcpy(dst, src, n * 4); }
static void ea__f32_from_f32(const float *src, void *dst, size_t n) { memcpy(dst, src, n * 4); }

static void ea__f16_to_f32(const void *src, float *dst, size_t n) {
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = ea_f16_to_f32(s[i]);
}
static void ea__f16_from_f32(const float *src, void *dst, size_t n) {
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = ea_f32_to_f16(src[i]);
}

static void ea__bf16_to_f32(const void *src, float *dst, size_t n) {
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = ea_bf16_to_f32(s[i]);
}
static void ea__bf16_from_f32(const float *src, void *dst, size_t n) {
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = ea_f32_to_bf16(src[i]);
}

static void ea__q8_0_to_f32(const void *src, float *dst, size_t n) {
    const ea_block_q8_0 *b = src;
    for (size_t i = 0; i < n / EA_QK8_0; i++) {
        float d = ea_f16_to_f32(b[i].d);
        for (int j = 0; j < EA_QK8_0; j++) dst[i * EA_QK8_0 + j] = d * (float)b[i].qs[j];
    }
}

/* Same rounding as ggml's quantize_row_q8_0_ref: d = amax/127, q = round(x/d). */
static void ea__q8_0_from_f32(const float *src, void *dst, size_t n) {
    ea_block_q8_0 *b = dst;
    for (size_t i = 0; i < n / EA_QK8_0; i++) {
        const float *x = src + i * EA_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < EA_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ea_f32_to_f16(d);
        for (int j = 0; j < EA_QK8_0; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

const ea_dtype_traits ea_dtypes[EA_N_DTYPES] = {
    [EA_F32] = {"f32", 1, 4, ea__f32_to_f32, ea__f32_from_f32},
    [EA_F16] = {"f16", 1, 2, ea__f16_to_f32, ea__f16_from_f32},
    [EA_BF16] = {"bf16", 1, 2, ea__bf16_to_f32, ea__bf16_from_f32},
    [EA_Q8_0] = {"q8_0", EA_QK8_0, (int)sizeof(ea_block_q8_0), ea__q8_0_to_f32, ea__q8_0_from_f32},
};

size_t ea_dtype_row_bytes(ea_dtype t, size_t n) {
    const ea_dtype_traits *tr = &ea_dtypes[t];
    if (n % (size_t)tr->block) return 0;
    return n / (size_t)tr->block * (size_t)tr->block_bytes;
}

int ea_dtype_parse(const char *name) {
    for (int i = 0; i < EA_N_DTYPES; i++) {
        const char *a = ea_dtypes[i].name;
        size_t k = 0;
        for (; a[k] && name[k]; k++) {
            char c = name[k];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != a[k]) break;
        }
        if (!a[k] && !name[k]) return i;
    }
    return -1;
}
