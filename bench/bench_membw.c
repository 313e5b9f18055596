/*
 * bench_membw.c — this machine's memory read bandwidth, the physical limit of
 * batch-1 decode (every weight byte is read once per token).
 *
 *   bench_membw [--mb N] [--reps R]
 *
 * Reads a buffer of N MiB (default 2048, well past the last-level cache) with
 * 1 thread and with every pool thread, each thread a contiguous share, best
 * of R passes (the reader is membw.h's, which bench_forward shares). Prints
 * one JSON line per thread count:
 *   {"bench":"membw","threads":T,"mb":N,"gbps":G}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membw.h"

int main(int argc, char **argv) {
    size_t mb = 2048;
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb")) mb = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    membw_buf j;
    if (!membw_init(&j, mb)) {
        fprintf(stderr, "bench_membw: cannot allocate %zu MiB\n", mb);
        return 1;
    }
    ea_pool *pool = NULL;
    if (ea_pool_create(0, &pool) != EA_OK) return 1;
    int nmax = ea_pool_size(pool);
    for (int nt = 1; nt <= nmax; nt = nt == nmax ? nmax + 1 : (nt * 2 < nmax ? nt * 2 : nmax)) {
        double gbps = membw_measure(&j, pool, nt, reps);
        uint64_t s = 0;
        for (int t = 0; t < nt; t++) s ^= j.sink[t];
        printf("{\"bench\":\"membw\",\"threads\":%d,\"mb\":%zu,\"gbps\":%.2f,\"check\":%u}\n", nt, mb, gbps,
               (unsigned)(s & 1));
    }
    ea_pool_destroy(pool);
    membw_free(&j);
    return 0;
}
