/*
 * bench_membw.c — this machine's memory read bandwidth, the physical limit of
 * batch-1 decode (every weight byte is read once per token).
 *
 *   bench_membw [--mb N] [--reps R]
 *
 * Reads a buffer of N MiB (default 2048, well past the last-level cache) with
 * 1 thread and with every pool thread, each thread a contiguous share, with
 * plain sequential vector loads (AVX-512, else AVX2, else 64-bit scalar;
 * prefetchers doing their usual job), best of R passes. The scalar reader
 * understates a machine: on an AVX2-only AMD EPYC it read 11 / 19 GB/s with
 * 1 / 2 threads where 256-bit loads read 15-16 / 24-26. Prints one JSON line
 * per thread count:
 *   {"bench":"membw","threads":T,"mb":N,"gbps":G}
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "base/util.h"

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    int n_tasks;
    uint64_t sink[64];
} job;

__attribute__((target("avx512f"))) static uint64_t read512(const uint8_t *p, size_t n) {
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

__attribute__((target("avx2"))) static uint64_t read256(const uint8_t *p, size_t n) {
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
static uint64_t read64(const uint8_t *p, size_t n) {
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

static int has512, has256;

static void task(void *arg, int t, int thread) {
    job *j = arg;
    size_t share = j->bytes / (size_t)j->n_tasks & ~(size_t)255;
    const uint8_t *p = j->buf + share * (size_t)t;
    j->sink[t] = has512 ? read512(p, share) : has256 ? read256(p, share) : read64(p, share);
}

int main(int argc, char **argv) {
    size_t mb = 2048;
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb")) mb = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    __builtin_cpu_init();
    has512 = __builtin_cpu_supports("avx512f");
    has256 = __builtin_cpu_supports("avx2");
    size_t bytes = mb << 20;
    uint8_t *buf = ea_aligned_alloc(4096, bytes);
    if (!buf) {
        fprintf(stderr, "bench_membw: cannot allocate %zu MiB\n", mb);
        return 1;
    }
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t v = i * 0x9e3779b97f4a7c15ull;
        memcpy(buf + i, &v, 8);
    }
    ea_pool *pool = NULL;
    if (ea_pool_create(0, &pool) != EA_OK) return 1;
    int nmax = ea_pool_size(pool);
    for (int nt = 1; nt <= nmax; nt = nt == nmax ? nmax + 1 : (nt * 2 < nmax ? nt * 2 : nmax)) {
        job j = {buf, bytes, nt, {0}};
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = ea_now_s();
            ea_pool_run(nt > 1 ? pool : NULL, task, &j, nt);
            double dt = ea_now_s() - t0;
            if (dt < best) best = dt;
        }
        uint64_t s = 0;
        for (int t = 0; t < nt; t++) s ^= j.sink[t];
        printf("{\"bench\":\"membw\",\"threads\":%d,\"mb\":%zu,\"gbps\":%.2f,\"check\":%u}\n", nt, mb,
               (double)bytes / best / 1e9, (unsigned)(s & 1));
    }
    ea_pool_destroy(pool);
    ea_aligned_free(buf);
    return 0;
}
