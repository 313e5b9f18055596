/*
 * bench_matmul.c — throughput of ea_k_matmul on the shapes of the qwen3
 * `bench` preset (hidden 1024, expert FFN 384, vocab 151936).
 *
 *   bench_matmul [--isa LIST] [--dtype LIST] [--threads LIST] [--m LIST]
 *                [--shapes LIST] [--secs S] [--ws-mb MB]
 *     LIST is comma-separated (m from 1-8, 16, 32, ..., 512); defaults: every supported ISA, bf16,q8_0,
 *     threads 1,2, m 1,8,64,512, every shape, 0.3 s per point, 1024 MiB.
 *
 * Shapes (n x k, W is (n, k)): lm_head 151936x1024, q 2048x1024, kv 512x1024,
 * o 1024x2048, up 384x1024 (expert gate/up), down 1024x384 (expert down).
 * lm_head runs only at m = 1 and 8 (prefill needs logits of the last token).
 * For the expert shapes (n, k <= 1024) at m <= 64 it also times 8 different
 * expert matrices with m tokens each, as 8 ea_k_matmul calls ("call":"single",
 * shape "up_x8") and as one ea_k_matmul_batch ("call":"batch").
 *
 * Weights rotate through enough copies to fill --ws-mb (default past this
 * machine's 480 MiB L3), so each call reads W from memory as decode does,
 * and sit on huge pages as the loader's copies do.
 * q8_0 under avx2 / avx512 is timed twice, on the rows and on their Q8_0x8 / Q8_0x16 copies
 * ("layout":"rows" / "q8x8" / "q8x16"; loaders make the copies on such CPUs).
 * One JSON line per point:
 *   {"bench":"matmul","isa":..,"dtype":..,"layout":..,"m":..,"n":..,"k":..,"threads":..,
 *    "gflops":..,"gbps":..,"us":..}   gbps = weight bytes / time
 *
 *   bench_matmul --onednn [--m LIST] [--shapes LIST] [--secs S]
 * runs, side by side on the same bf16 weights (one copy, no rotation), our
 * kernel (the CPU's best ISA: "amx" where there is one) and oneDNN's matmul
 * (libdnnl, loaded with dlopen so nothing else links it; W as (n, k) "ba",
 * f32 dst; OpenMP threads = OMP_NUM_THREADS) and prints "isa":"onednn"
 * lines. With AMX oneDNN gets bf16 src (converted before timing) and bf16
 * W; without, the same values as f32 src and f32 W ("dtype":"f32"): its
 * f32 GEMM is then the yardstick for our bf16 tiles, which compute in f32.
 * Extra shapes for this mode: c64 = 768x1024 at m 64, c512 = 1024x1024 at m 512
 * (the figures quoted in issue 3).
 */
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* ---- oneDNN comparison (dlopen) ------------------------------------------------ */

typedef struct {
    dnnl_status_t (*engine_create)(dnnl_engine_t *, dnnl_engine_kind_t, size_t);
    dnnl_status_t (*stream_create)(dnnl_stream_t *, dnnl_engine_t, unsigned);
    dnnl_status_t (*md_init)(dnnl_memory_desc_t *, int, const dnnl_dims_t, dnnl_data_type_t, dnnl_format_tag_t);
    dnnl_status_t (*matmul_init)(dnnl_matmul_desc_t *, const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
                                 const dnnl_memory_desc_t *, const dnnl_memory_desc_t *);
    dnnl_status_t (*pd_create)(dnnl_primitive_desc_t *, const_dnnl_op_desc_t, const_dnnl_primitive_attr_t,
                               dnnl_engine_t, const_dnnl_primitive_desc_t);
    dnnl_status_t (*prim_create)(dnnl_primitive_t *, const_dnnl_primitive_desc_t);
    dnnl_status_t (*mem_create)(dnnl_memory_t *, const dnnl_memory_desc_t *, dnnl_engine_t, void *);
    dnnl_status_t (*execute)(const_dnnl_primitive_t, dnnl_stream_t, int, const dnnl_exec_arg_t *);
    dnnl_status_t (*wait)(dnnl_stream_t);
} dnnl_api;

static int dnnl_load(dnnl_api *a) {
    void *h = dlopen("libdnnl.so.2", RTLD_NOW);
    if (!h) h = dlopen("libdnnl.so", RTLD_NOW);
    if (!h) return 0;
#define LOAD(f, name) \
    if (!(*(void **)&a->f = dlsym(h, name))) return 0;
    LOAD(engine_create, "dnnl_engine_create")
    LOAD(stream_create, "dnnl_stream_create")
    LOAD(md_init, "dnnl_memory_desc_init_by_tag")
    LOAD(matmul_init, "dnnl_matmul_desc_init")
    LOAD(pd_create, "dnnl_primitive_desc_create")
    LOAD(prim_create, "dnnl_primitive_create")
    LOAD(mem_create, "dnnl_memory_create")
    LOAD(execute, "dnnl_primitive_execute")
    LOAD(wait, "dnnl_stream_wait")
#undef LOAD
    return 1;
}

static double time_loop(double secs, void (*fn)(void *), void *arg) {
    fn(arg);
    int iters = 0;
    double t0 = ea_now_s(), t;
    do {
        fn(arg);
        iters++;
        t = ea_now_s() - t0;
    } while (t < secs);
    return t / iters;
}

typedef struct {
    dnnl_api *a;
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_exec_arg_t args[3];
} dnnl_run;

static void dnnl_once(void *arg) {
    dnnl_run *r = arg;
    r->a->execute(r->prim, r->stream, 3, r->args);
    r->a->wait(r->stream);
}

typedef struct {
    ea_kctx *ctx;
    ea_tensor *w;
    const float *x;
    int m;
    float *y;
} ours_run;

static void ours_once(void *arg) {
    ours_run *r = arg;
    ea_k_matmul(r->ctx, r->w, r->x, r->m, r->y);
}

static int run_onednn(const char *mlist, const char *shl, double secs, int nt) {
    dnnl_api a;
    memset(&a, 0, sizeof a);
    if (!dnnl_load(&a)) {
        fprintf(stderr, "bench_matmul: libdnnl not found (Debian libdnnl-dev)\n");
        return 1;
    }
    static const struct {
        const char *name;
        int m, n, k;
    } cs[] = {{"c64", 64, 768, 1024},  {"c512", 512, 1024, 1024}, {"up", 64, 384, 1024}, {"down", 64, 1024, 384},
              {"up", 512, 384, 1024},  {"down", 512, 1024, 384},  {"q", 512, 2048, 1024}, {"up", 8, 384, 1024},
              {"q", 1, 2048, 1024}};
    dnnl_engine_t eng;
    dnnl_stream_t st;
    if (a.engine_create(&eng, dnnl_cpu, 0) || a.stream_create(&st, eng, dnnl_stream_default_flags)) return 1;
    ea_pool *pool = NULL;
    ea_kctx *ctx = NULL;
    int amx = ea_k_isa_supported("amx");
    const char *isa = amx ? "amx" : ea_k_isa_best();
    if (ea_pool_create(nt, &pool) != EA_OK || ea_kctx_create(pool, 512, 2048, &ctx) != EA_OK ||
        ea_kctx_set_isa(ctx, isa) != EA_OK) {
        fprintf(stderr, "bench_matmul: %s\n", ea_errmsg());
        return 1;
    }
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        if (!in_list(shl, cs[c].name) || !in_list_int(mlist, cs[c].m)) continue;
        int m = cs[c].m, n = cs[c].n, k = cs[c].k;
        float *x = ea_aligned_alloc(64, (size_t)m * k * 4), *y = ea_aligned_alloc(64, (size_t)m * n * 4);
        uint16_t *xb = ea_aligned_alloc(64, (size_t)m * k * 2), *wb = ea_aligned_alloc(64, (size_t)n * k * 2);
        float *wf = ea_aligned_alloc(64, (size_t)n * k * 4); /* W's values as f32, for oneDNN without AMX */
        for (size_t i = 0; i < (size_t)m * k; i++) {
            x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
            xb[i] = ea_f32_to_bf16(x[i]);
        }
        for (size_t i = 0; i < (size_t)n * k; i++) {
            wb[i] = ea_f32_to_bf16((float)((i * 7919u) % 2001) / 1000.0f - 1.0f);
            wf[i] = ea_bf16_to_f32(wb[i]);
        }
        ea_tensor wt = {.name = "w", .dtype = EA_BF16, .n_dims = 2, .shape = {n, k}, .data = wb, .nbytes = (size_t)n * k * 2};
        ours_run orun = {ctx, &wt, x, m, y};
        double t_ours = time_loop(secs, ours_once, &orun);

        dnnl_memory_desc_t sd, wd, dd;
        dnnl_dims_t sdim = {m, k}, wdim = {k, n}, ddim = {m, n};
        dnnl_matmul_desc_t md;
        dnnl_primitive_desc_t pd;
        dnnl_run r = {&a, NULL, st, {{0}}};
        dnnl_memory_t ms, mw, mdst;
        dnnl_data_type_t dt = amx ? dnnl_bf16 : dnnl_f32;
        if (a.md_init(&sd, 2, sdim, dt, dnnl_ab) || a.md_init(&wd, 2, wdim, dt, dnnl_ba) ||
            a.md_init(&dd, 2, ddim, dnnl_f32, dnnl_ab) || a.matmul_init(&md, &sd, &wd, NULL, &dd) ||
            a.pd_create(&pd, &md, NULL, eng, NULL) || a.prim_create(&r.prim, pd) ||
            a.mem_create(&ms, &sd, eng, amx ? (void *)xb : (void *)x) ||
            a.mem_create(&mw, &wd, eng, amx ? (void *)wb : (void *)wf) || a.mem_create(&mdst, &dd, eng, y)) {
            fprintf(stderr, "bench_matmul: oneDNN setup failed for %dx%dx%d\n", m, n, k);
            return 1;
        }
        r.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, ms};
        r.args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mw};
        r.args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, mdst};
        double t_dnnl = time_loop(secs, dnnl_once, &r);
        double fl = 2.0 * m * (double)n * k;
        const char *omp = getenv("OMP_NUM_THREADS");
        printf("{\"bench\":\"matmul\",\"isa\":\"%s\",\"dtype\":\"bf16\",\"shape\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,"
               "\"threads\":%d,\"gflops\":%.1f,\"gbps\":%.2f,\"us\":%.1f}\n",
               isa, cs[c].name, m, n, k, nt, fl / t_ours / 1e9, (double)n * k * 2 / t_ours / 1e9, t_ours * 1e6);
        printf("{\"bench\":\"matmul\",\"isa\":\"onednn\",\"dtype\":\"%s\",\"shape\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,"
               "\"threads\":\"%s\",\"gflops\":%.1f,\"gbps\":%.2f,\"us\":%.1f}\n",
               amx ? "bf16" : "f32", cs[c].name, m, n, k, omp ? omp : "default", fl / t_dnnl / 1e9,
               (double)n * k * (amx ? 2 : 4) / t_dnnl / 1e9, t_dnnl * 1e6);
        fflush(stdout);
        ea_aligned_free(x);
        ea_aligned_free(y);
        ea_aligned_free(xb);
        ea_aligned_free(wb);
        ea_aligned_free(wf);
    }
    ea_kctx_destroy(ctx);
    ea_pool_destroy(pool);
    return 0;
}

/* Weights as the model loader holds them (model_copy.c): 2 MiB-aligned and
 * advised for huge pages, so the from-memory figures pay no 4 KiB-page TLB
 * misses that decode does not pay. */
static uint8_t *weights_alloc(size_t n) {
    uint8_t *p = ea_aligned_alloc((size_t)2 << 20, n);
    if (p) (void)madvise(p, n, MADV_HUGEPAGE);
    return p;
}

int main(int argc, char **argv) {
    const char *isas = NULL, *dtypes = "bf16,q8_0", *threads = "1,2", *mlist = "1,8,64,512", *shl = NULL;
    double secs = 0.3;
    size_t ws_mb = 1024;
    int onednn = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--onednn")) {
            onednn = 1;
            for (int q = i; q + 1 < argc; q++) argv[q] = argv[q + 1];
            argc--;
        }
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
    if (onednn) return run_onednn(mlist, shl, secs, in_list_int(threads, 1) && !in_list_int(threads, 2) ? 1 : 2);
    const int maxm = 512, maxk = 2048;
    float *x = ea_aligned_alloc(64, (size_t)maxm * maxk * sizeof(float));
    size_t ny = (size_t)8 * 151936 > (size_t)maxm * maxk ? (size_t)8 * 151936 : (size_t)maxm * maxk;
    float *y = ea_aligned_alloc(64, ny * sizeof(float));
    if (!x || !y) return 1;
    for (size_t i = 0; i < (size_t)maxm * maxk; i++) x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    memset(y, 0, ny * sizeof(float));

    static const char *const all_isas[] = {"scalar", "avx2", "avx512", "avx512_bf16", "amx"};
    for (int dt = 0; dt < EA_N_DTYPES; dt++) {
        if (!in_list(dtypes, ea_dtypes[dt].name)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (!in_list(shl, shapes[s].name)) continue;
            size_t rb = ea_dtype_row_bytes((ea_dtype)dt, (size_t)shapes[s].k);
            size_t bytes = rb * (size_t)shapes[s].n;
            int ncopy = (int)((ws_mb << 20) / bytes) + 1;
            uint8_t *wbuf = weights_alloc(bytes * (size_t)ncopy);
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
            /* a kernel that reads packed copies runs twice: on the rows ("layout":"rows") and on the
             * copies that loaders make for it (ea_k_pack_rows_isa): q8_0 under avx2 ("q8x8") and
             * avx512 with VNNI ("q8x16"), f32/f16/bf16 under avx2 ("fx4") */
            uint8_t *pbuf = NULL;
            for (int v = 0; v < 10; v++) {
                int a = v / 2, lay = v % 2, prow = ea_k_pack_rows_isa(all_isas[a], (ea_dtype)dt);
                size_t pbytes = lay && prow ? ea_k_packed_bytes(&wt[0], prow) : 0;
                if (lay && !pbytes) continue;
                if (pbytes) {
                    ea_aligned_free(pbuf);
                    pbuf = weights_alloc(pbytes * (size_t)ncopy);
                    for (int c = 0; c < ncopy; c++) ea_k_pack(&wt[c], prow, pbuf + (size_t)c * pbytes);
                }
                for (int c = 0; c < ncopy; c++) {
                    wt[c].packed = pbytes ? pbuf + (size_t)c * pbytes : NULL;
                    wt[c].packed_rows = pbytes ? prow : 0;
                }
                const char *layout = !pbytes                   ? "rows"
                                     : prow == EA_FX4_ROWS     ? "fx4"
                                     : prow == EA_Q8X8_ROWS    ? "q8x8"
                                                               : "q8x16";
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
                    static const int mvals[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 256, 512};
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
                        printf("{\"bench\":\"matmul\",\"isa\":\"%s\",\"dtype\":\"%s\",\"layout\":\"%s\",\"shape\":\"%s\","
                               "\"m\":%d,\"n\":%d,\"k\":%d,\"threads\":%d,\"gflops\":%.1f,\"gbps\":%.2f,\"us\":%.1f}\n",
                               all_isas[a], ea_dtypes[dt].name, layout, shapes[s].name, m, shapes[s].n, shapes[s].k, nt,
                               fl / per / 1e9, (double)bytes / per / 1e9, per * 1e6);
                        fflush(stdout);
                        /* the MoE pattern: 8 experts' matrices, m tokens each — one batch call vs 8 calls */
                        if (shapes[s].n <= 1024 && shapes[s].k <= 1024 && m <= 64 && ncopy >= 16) {
                            for (int mode = 0; mode < 2; mode++) {
                                ea_k_mm mm[8];
                                iters = 0;
                                t0 = ea_now_s();
                                do {
                                    c = (c + 8) % (ncopy - 8);
                                    for (int e = 0; e < 8; e++)
                                        mm[e] = (ea_k_mm){&wt[c + e], x, m, y + (size_t)e * m * shapes[s].n};
                                    if (mode) ea_k_matmul_batch(ctx, mm, 8);
                                    else
                                        for (int e = 0; e < 8; e++) ea_k_matmul(ctx, mm[e].w, x, m, mm[e].y);
                                    iters++;
                                    t = ea_now_s() - t0;
                                } while (t < secs);
                                per = t / iters;
                                printf("{\"bench\":\"matmul\",\"isa\":\"%s\",\"dtype\":\"%s\",\"layout\":\"%s\","
                                       "\"shape\":\"%s_x8\",\"call\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"threads\":%d,"
                                       "\"gflops\":%.1f,\"gbps\":%.2f,\"us\":%.1f}\n",
                                       all_isas[a], ea_dtypes[dt].name, layout, shapes[s].name, mode ? "batch" : "single", m,
                                       shapes[s].n, shapes[s].k, nt, 8 * fl / per / 1e9, 8.0 * (double)bytes / per / 1e9,
                                       per * 1e6);
                                fflush(stdout);
                            }
                        }
                    }
                    ea_kctx_destroy(ctx);
                    ea_pool_destroy(pool);
                }
            }
            ea_free(wt);
            ea_aligned_free(pbuf);
            ea_aligned_free(wbuf);
        }
    }
    ea_aligned_free(x);
    ea_aligned_free(y);
    return 0;
}
