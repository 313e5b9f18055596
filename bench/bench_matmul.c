/*
 * bench_matmul.c — throughput of ea_k_matmul on the shapes of the qwen3
 * `bench` preset (hidden 1024, expert FFN 384, vocab 151936).
 *
 *   bench_matmul [--isa LIST] [--dtype LIST] [--threads LIST] [--m LIST]
 *                [--shapes LIST] [--secs S] [--ws-mb MB]
 *     LIST is comma-separated; defaults: every supported ISA, bf16,q8_0,
 *     threads 1,2, m 1,8,64,512, every shape, 0.3 s per point, 1024 MiB.
 *
 * Shapes (n x k, W is (n, k)): lm_head 151936x1024, q 2048x1024, kv 512x1024,
 * o 1024x2048, up 384x1024 (expert gate/up), down 1024x384 (expert down).
 * lm_head runs only at m = 1 and 8 (prefill needs logits of the last token).
 *
 * Weights rotate through enough copies to fill --ws-mb (default past this
 * machine's 480 MiB L3), so each call reads W from memory as decode does.
 * One JSON line per point:
 *   {"bench":"matmul","isa":..,"dtype":..,"m":..,"n":..,"k":..,"threads":..,
 *    "gflops":..,"gbps":..,"us":..}   gbps = weight bytes / time
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "base/util.h"
#include "kernels/matmul.h"

typedef struct {
    const char *name;
    int n, k;
} shape;

static const shape shapes[] = {{"lm_head", 151936, 1024}, {"q", 2048, 1024}, {"kv", 512, 1024},
                               {"o", 1024, 2048},        {"up", 384, 1024},  {"down", 1024, 384}};

static int in_list(const char *list, const char *item) {
    if (!list) return 1;
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, item, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int in_list_int(const char *list, int v) {
    char b[32];
    snprintf(b, sizeof b, "%d", v);
    return in_list(list, b);
}

int main(int argc, char **argv) {
    const char *isas = NULL, *dtypes = "bf16,q8_0", *threads = "1,2", *mlist = "1,8,64,512", *shl = NULL;
    double secs = 0.3;
    size_t ws_mb = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--isa")) isas = argv[i + 1];
        else if (!strcmp(argv[i], "--dtype")) dtypes = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
        else if (!strcmp(argv[i], "--m")) mlist = argv[i + 1];
        else if (!strcmp(argv[i], "--shapes")) shl = argv[i + 1];
        else if (!strcmp(argv[i], "--secs")) secs = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--ws-mb")) ws_mb = (size_t)atol(argv[i + 1]);
        else {
            fprintf(stderr, "bench_matmul: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    const int maxm = 512, maxk = 2048;
    float *x = ea_aligned_alloc(64, (size_t)maxm * maxk * sizeof(float));
    size_t ny = (size_t)8 * 151936 > (size_t)maxm * maxk ? (size_t)8 * 151936 : (size_t)maxm * maxk;
    float *y = ea_aligned_alloc(64, ny * sizeof(float));
    if (!x || !y) return 1;
    for (size_t i = 0; i < (size_t)maxm * maxk; i++) x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    memset(y, 0, ny * sizeof(float));

    static const char *const all_isas[] = {"scalar", "avx2", "avx512", "amx"};
    for (int dt = 0; dt < EA_N_DTYPES; dt++) {
        if (!in_list(dtypes, ea_dtypes[dt].name)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (!in_list(shl, shapes[s].name)) continue;
            size_t rb = ea_dtype_row_bytes((ea_dtype)dt, (size_t)shapes[s].k);
            size_t bytes = rb * (size_t)shapes[s].n;
            int ncopy = (int)((ws_mb << 20) / bytes) + 1;
            uint8_t *wbuf = ea_aligned_alloc(64, bytes * (size_t)ncopy);
            if (!wbuf) {
                fprintf(stderr, "bench_matmul: cannot allocate %zu MiB of weights\n", bytes * (size_t)ncopy >> 20);
                return 1;
            }
            { /* random-ish weights in [-1, 1], converted row by row */
                float *row = ea_malloc((size_t)shapes[s].k * sizeof(float));
                for (int j = 0; j < shapes[s].n; j++) {
                    for (int q = 0; q < shapes[s].k; q++)
                        row[q] = (float)(((size_t)j * 7919u + (size_t)q * 104729u) % 2001) / 1000.0f - 1.0f;
                    ea_dtypes[dt].from_f32(row, wbuf + (size_t)j * rb, (size_t)shapes[s].k);
                }
                ea_free(row);
                for (int c = 1; c < ncopy; c++) memcpy(wbuf + (size_t)c * bytes, wbuf, bytes);
            }
            ea_tensor *wt = ea_calloc((size_t)ncopy, sizeof *wt);
            for (int c = 0; c < ncopy; c++) {
                wt[c].name = shapes[s].name;
                wt[c].dtype = (ea_dtype)dt;
                wt[c].n_dims = 2;
                wt[c].shape[0] = shapes[s].n;
                wt[c].shape[1] = shapes[s].k;
                wt[c].data = wbuf + (size_t)c * bytes;
                wt[c].nbytes = bytes;
            }
            for (int a = 0; a < 4; a++) {
                if (!in_list(isas, all_isas[a]) || !ea_k_isa_supported(all_isas[a])) continue;
                if (!isas && a < 2) continue; /* scalar/avx2 only when asked for */
                for (int nt = 1; nt <= 64; nt++) {
                    if (!in_list_int(threads, nt)) continue;
                    ea_pool *pool = NULL;
                    ea_kctx *ctx = NULL;
                    if (ea_pool_create(nt, &pool) != EA_OK || ea_kctx_create(pool, maxm, maxk, &ctx) != EA_OK ||
                        ea_kctx_set_isa(ctx, all_isas[a]) != EA_OK) {
                        fprintf(stderr, "bench_matmul: %s\n", ea_errmsg());
                        return 1;
                    }
                    static const int mvals[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
                    for (size_t mi = 0; mi < sizeof mvals / sizeof mvals[0]; mi++) {
                        int m = mvals[mi];
                        if (!in_list_int(mlist, m)) continue;
                        if (shapes[s].n > 100000 && m > 8) continue;
                        int c = 0, iters = 0;
                        ea_k_matmul(ctx, &wt[0], x, m, y); /* warm-up */
                        double t0 = ea_now_s(), t;
                        do {
                            c = (c + 1) % ncopy;
                            ea_k_matmul(ctx, &wt[c], x, m, y);
                            iters++;
                            t = ea_now_s() - t0;
                        } while (t < secs);
                        double per = t / iters;
                        double fl = 2.0 * m * shapes[s].n * (double)shapes[s].k;
                        printf("{\"bench\":\"matmul\",\"isa\":\"%s\",\"dtype\":\"%s\",\"shape\":\"%s\",\"m\":%d,\"n\":%d,"
                               "\"k\":%d,\"threads\":%d,\"gflops\":%.1f,\"gbps\":%.2f,\"us\":%.1f}\n",
                               all_isas[a], ea_dtypes[dt].name, shapes[s].name, m, shapes[s].n, shapes[s].k, nt,
                               fl / per / 1e9, (double)bytes / per / 1e9, per * 1e6);
                        fflush(stdout);
                    }
                    ea_kctx_destroy(ctx);
                    ea_pool_destroy(pool);
                }
            }
            ea_free(wt);
            ea_aligned_free(wbuf);
        }
    }
    ea_aligned_free(x);
    ea_aligned_free(y);
    return 0;
}
