/*
 * membw.h — the memory read bandwidth reader shared by bench_membw and
 * bench_forward (which reads it beside every batch-1 decode round, so that a
 * round's bw_frac is against the bandwidth of the same seconds).
 *
 * Each task reads a contiguous share of the buffer with plain sequential
 * vector loads (AVX-512, else AVX2, else 64-bit scalar; prefetchers doing
 * their usual job). The scalar reader understates a machine: on an AVX2-only
 * AMD EPYC it read 11 / 19 GB/s with 1 / 2 threads where 256-bit loads read
 * 15-16 / 24-26.
 */
#ifndef EA_BENCH_MEMBW_H
#define EA_BENCH_MEMBW_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "base/util.h"

typedef struct {
    uint8_t *buf;
    size_t bytes;
    int n_tasks;
    int isa; /* 2: AVX-512, 1: AVX2, 0: scalar */
    uint64_t sink[64];
} membw_buf;

__attribute__((target("avx512f"))) static uint64_t membw_read512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
        a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + i + 64));
        a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + i + 128));
        a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + i + 192));
    }
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(a0);
}

__attribute__((target("avx2"))) static uint64_t membw_read256(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(a0, 0) ^ (uint64_t)_mm256_extract_epi64(a0, 3);
}

static uint64_t membw_read64(const uint8_t *p, size_t n) {
    uint64_t a = 0, b = 0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        uint64_t x, y;
        memcpy(&x, p + i, 8);
        memcpy(&y, p + i + 8, 8);
        a ^= x;
        b ^= y;
    }
    return a ^ b;
}

static void membw_task(void *arg, int t, int thread) {
    (void)thread;
    membw_buf *j = arg;
    size_t share = j->bytes / (size_t)j->n_tasks & ~(size_t)255;
    const uint8_t *p = j->buf + share * (size_t)t;
    j->sink[t] = j->isa == 2 ? membw_read512(p, share) : j->isa == 1 ? membw_read256(p, share) : membw_read64(p, share);
}

/* A buffer of mb MiB, written once (so every page is backed); 0 without memory. */
static int membw_init(membw_buf *j, size_t mb) {
    memset(j, 0, sizeof *j);
    __builtin_cpu_init();
    j->isa = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
    j->bytes = mb << 20;
    if (!(j->buf = ea_aligned_alloc(4096, j->bytes))) return 0;
    for (size_t i = 0; i < j->bytes; i += 8) {
        uint64_t v = i * 0x9e3779b97f4a7c15ull;
        memcpy(j->buf + i, &v, 8);
    }
    return 1;
}

/* GB/s of the best of reps passes over the buffer, nt tasks on pool (NULL: this thread). */
static double membw_measure(membw_buf *j, ea_pool *pool, int nt, int reps) {
    j->n_tasks = nt;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = ea_now_s();
        ea_pool_run(nt > 1 ? pool : NULL, membw_task, j, nt);
        double dt = ea_now_s() - t0;
        if (dt < best) best = dt;
    }
    return (double)j->bytes / best / 1e9;
}

static void membw_free(membw_buf *j) { ea_aligned_free(j->buf); }

#endif
