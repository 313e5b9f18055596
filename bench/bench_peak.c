/*
 * bench_peak.c — this machine's arithmetic peak for the instruction mixes the
 * matmul kernels need, the ceiling of prefill and of large decode batches
 * (as bench_membw gives the ceiling of batch-1 decode).
 *
 *   bench_peak [--secs S]
 *
 * Runs register-only loops of 10-12 independent dependency chains (enough to
 * hide every latency below, few enough to stay in registers), with 1 thread
 * and with every pool thread:
 *   f32_fma    AVX2 vfmadd231ps ymm: 8 multiply-adds per instruction, the
 *              reduction order F of f32/f16/bf16 weights (docs/kernels.md);
 *   q8_avx2    vpsignb + vpmaddubsw + vpmaddwd + vpaddd per 32 multiply-adds,
 *              the exact int32 block sums of order Q on AVX2;
 *   f32_fma512 and q8_vnni (vpdpbusd, 64 per instruction) where the CPU has
 *              AVX-512 F / VNNI.
 * Prints one JSON line per mix and thread count, in G multiply-adds per second
 * (1 multiply-add = 2 FLOP or 2 integer ops):
 *   {"bench":"peak","mix":"f32_fma","threads":T,"gmacs":G}
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "base/util.h"

#define EA__CHAINS 12
#define EA__ITERS 4000000L /* per call; the caller repeats until --secs */

typedef uint64_t (*mix_fn)(long iters);

__attribute__((target("avx2,fma"), noinline)) static uint64_t mix_f32_fma(long iters) {
    __m256 a[EA__CHAINS];
    const __m256 x = _mm256_set1_ps(0.9999999f), y = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < EA__CHAINS; c++) a[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int c = 0; c < EA__CHAINS; c++) a[c] = _mm256_fmadd_ps(a[c], x, y);
    float s = 0.0f;
    for (int c = 0; c < EA__CHAINS; c++) s += _mm256_cvtss_f32(a[c]);
    return (uint64_t)(s != 0.0f);
}

/* 10 chains in ymm3..ymm12, the byte operand being each chain's own
 * accumulator (nothing loop-invariant); in assembly, because GCC kept
 * some chains in memory (a store and reload inside each chain). */
#define EA__Q8_CHAINS 10
#define EA__Q8_STEP(c, t) \
    "vpsignb %%ymm2, %%ymm" #c ", %%ymm" #t "\n\t" \
    "vpmaddubsw %%ymm" #t ", %%ymm1, %%ymm" #t "\n\t" \
    "vpmaddwd %%ymm0, %%ymm" #t ", %%ymm" #t "\n\t" \
    "vpaddd %%ymm" #t ", %%ymm" #c ", %%ymm" #c "\n\t"
__attribute__((target("avx2"), noinline)) static uint64_t mix_q8_avx2(long iters) {
    static const int8_t w[32] = {-77, 5, 90, -128, 3, -1, 127, 64, -77, 5, 90, -128, 3, -1, 127, 64,
                                 -77, 5, 90, -128, 3, -1, 127, 64, -77, 5, 90, -128, 3, -1, 127, 64};
    uint32_t out[8];
    if (iters < 1) return 0;
    __asm__ volatile("vmovdqu %[w], %%ymm2\n\t"
                     "vpabsb %%ymm2, %%ymm1\n\t"
                     "vpcmpeqw %%ymm0, %%ymm0, %%ymm0\n\t"
                     "vpsrlw $15, %%ymm0, %%ymm0\n\t" /* 16-bit ones */
                     "vmovdqa %%ymm1, %%ymm3\n\t vpaddd %%ymm0, %%ymm3, %%ymm4\n\t vpaddd %%ymm0, %%ymm4, %%ymm5\n\t"
                     "vpaddd %%ymm0, %%ymm5, %%ymm6\n\t vpaddd %%ymm0, %%ymm6, %%ymm7\n\t vpaddd %%ymm0, %%ymm7, %%ymm8\n\t"
                     "vpaddd %%ymm0, %%ymm8, %%ymm9\n\t vpaddd %%ymm0, %%ymm9, %%ymm10\n\t vpaddd %%ymm0, %%ymm10, %%ymm11\n\t"
                     "vpaddd %%ymm0, %%ymm11, %%ymm12\n\t"
                     "1:\n\t" EA__Q8_STEP(3, 13) EA__Q8_STEP(4, 14) EA__Q8_STEP(5, 15) EA__Q8_STEP(6, 13)
                         EA__Q8_STEP(7, 14) EA__Q8_STEP(8, 15) EA__Q8_STEP(9, 13) EA__Q8_STEP(10, 14)
                             EA__Q8_STEP(11, 15) EA__Q8_STEP(12, 13) "dec %[n]\n\t"
                     "jnz 1b\n\t"
                     "vpxor %%ymm3, %%ymm12, %%ymm3\n\t"
                     "vmovdqu %%ymm3, %[out]\n\t"
                     "vzeroupper"
                     : [n] "+r"(iters), [out] "=m"(out)
                     : [w] "m"(w)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                       "xmm12", "xmm13", "xmm14", "xmm15", "cc");
    return out[0];
}

__attribute__((target("avx512f"), noinline)) static uint64_t mix_f32_fma512(long iters) {
    __m512 a[EA__CHAINS];
    const __m512 x = _mm512_set1_ps(0.9999999f), y = _mm512_set1_ps(1e-7f);
    for (int c = 0; c < EA__CHAINS; c++) a[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int c = 0; c < EA__CHAINS; c++) a[c] = _mm512_fmadd_ps(a[c], x, y);
    float s = 0.0f;
    for (int c = 0; c < EA__CHAINS; c++) s += _mm512_cvtss_f32(a[c]);
    return (uint64_t)(s != 0.0f);
}

__attribute__((target("avx512f,avx512vnni"), noinline)) static uint64_t mix_q8_vnni(long iters) {
    __m512i a[EA__CHAINS];
    const __m512i w = _mm512_set1_epi8(-77);
    for (int c = 0; c < EA__CHAINS; c++) a[c] = _mm512_set1_epi32(c * 0x01020304);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int c = 0; c < EA__CHAINS; c++) a[c] = _mm512_dpbusd_epi32(a[c], a[c], w);
    uint64_t s = 0;
    for (int c = 0; c < EA__CHAINS; c++) s += (uint32_t)_mm512_cvtsi512_si32(a[c]);
    return s;
}

typedef struct {
    mix_fn fn;
    long calls;
    uint64_t sink[64];
} job;

static void task(void *arg, int t, int thread) {
    (void)thread;
    job *j = arg;
    for (long c = 0; c < j->calls; c++) j->sink[t] += j->fn(EA__ITERS);
}

int main(int argc, char **argv) {
    double secs = 1.0;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--secs")) secs = atof(argv[i + 1]);
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = __builtin_cpu_supports("avx512f"), vnni = avx512 && __builtin_cpu_supports("avx512vnni");
    static const struct {
        const char *name;
        mix_fn fn;
        int macs; /* multiply-adds per loop iteration, all chains */
    } mixes[] = {{"f32_fma", mix_f32_fma, 8 * EA__CHAINS},
                 {"q8_avx2", mix_q8_avx2, 32 * EA__Q8_CHAINS},
                 {"f32_fma512", mix_f32_fma512, 16 * EA__CHAINS},
                 {"q8_vnni", mix_q8_vnni, 64 * EA__CHAINS}};
    int have[] = {avx2, avx2, avx512, vnni};
    ea_pool *pool = NULL;
    if (ea_pool_create(0, &pool) != EA_OK) return 1;
    int nmax = ea_pool_size(pool);
    for (int m = 0; m < 4; m++) {
        if (!have[m]) continue;
        /* calls per thread for about --secs, from one timed call */
        double t0 = ea_now_s();
        uint64_t warm = mixes[m].fn(EA__ITERS);
        double one = ea_now_s() - t0;
        long calls = (long)(secs / (one > 1e-6 ? one : 1e-6)) + 1;
        for (int nt = 1; nt <= nmax; nt = nt == nmax ? nmax + 1 : (nt * 2 < nmax ? nt * 2 : nmax)) {
            job j = {mixes[m].fn, calls, {warm}};
            t0 = ea_now_s();
            ea_pool_run(nt > 1 ? pool : NULL, task, &j, nt);
            double dt = ea_now_s() - t0;
            double macs = (double)nt * (double)calls * EA__ITERS * mixes[m].macs;
            uint64_t s = 0;
            for (int t = 0; t < nt; t++) s ^= j.sink[t];
            printf("{\"bench\":\"peak\",\"mix\":\"%s\",\"threads\":%d,\"gmacs\":%.1f,\"check\":%u}\n", mixes[m].name, nt,
                   macs / dt / 1e9, (unsigned)(s & 1));
        }
    }
    ea_pool_destroy(pool);
    return 0;
}
