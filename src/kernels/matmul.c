/*
 * matmul.c — the matmul driver: context, ISA dispatch, the reference twin,
 * activation preparation and the split of work over the thread pool.
 *
 * Why this shape: the ISA variants (matmul_*.c) only compute a range of output
 * columns j for all rows i; everything that could make a result depend on the
 * batch lives here and is made batch-independent on purpose:
 *   - activations are prepared row by row (q8 quantisation, bf16 packing), so
 *     row i's prepared data depends on X[i] only;
 *   - the n columns are cut into contiguous chunks (multiples of 32), one per
 *     pool task; k is never split; each variant computes every (i, j) with
 *     the same operation sequence whatever m and the chunk (matmul_impl.h).
 *
 * ISA choice: the best the CPU offers (amx > avx512 > avx2 > scalar), or the
 * EAAS_ISA environment variable, or ea_kctx_set_isa(). A variant serves the
 * dtypes it has a kernel for; the others fall back within the context to the
 * next ISA down that has one (e.g. f32 weights under "amx" use avx512 FMA),
 * always the same fallback for the same (ISA, dtype), so invariance holds.
 *
 * Scratch (owned by the context, sized at create for max_m, max_k): q8
 * activations, AMX packed activations, and one per-thread area. No call
 * allocates.
 */
#include "kernels/matmul.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/matmul_impl.h"

typedef enum { EA__ISA_SCALAR, EA__ISA_AVX2, EA__ISA_AVX512, EA__ISA_AMX, EA__N_ISA } ea__isa;

static const char *const ea__isa_names[EA__N_ISA] = {"scalar", "avx2", "avx512", "amx"};

struct ea_kctx {
    ea_pool *pool; /* borrows; NULL = serial */
    int n_threads;
    int max_m, max_k;
    ea__isa isa;
    int has_vnni; /* avx512 q8 kernel usable */
    int8_t *xq;   /* owns: max_m * max_k */
    float *xd;    /* owns: max_m * max_k/32 */
    uint16_t *xp; /* owns: AMX packed X, or NULL */
    uint8_t *tscratch; /* owns: n_threads * tscratch_bytes */
    size_t tscratch_bytes;
};

/* ---- CPU features ---------------------------------------------------------- */

/* F16C is CPUID.1:ECX bit 29 (not every compiler's __builtin_cpu_supports knows it). */
static int ea__has_f16c(void) {
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    return (c >> 29) & 1;
}

static int ea__cpu_has(ea__isa isa, int *vnni) {
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && ea__has_f16c();
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (vnni) *vnni = avx512 && __builtin_cpu_supports("avx512vnni");
    switch (isa) {
    case EA__ISA_SCALAR: return 1;
    case EA__ISA_AVX2: return avx2;
    case EA__ISA_AVX512: return avx512;
    case EA__ISA_AMX: return avx512 && ea__amx_enable();
    default: return 0;
    }
}

static int ea__isa_parse(const char *name) {
    for (int i = 0; i < EA__N_ISA; i++)
        if (!strcmp(name, ea__isa_names[i])) return i;
    return -1;
}

int ea_k_isa_supported(const char *isa) {
    int i = ea__isa_parse(isa);
    return i >= 0 && ea__cpu_has((ea__isa)i, NULL);
}

const char *ea_k_isa_best(void) {
    for (int i = EA__N_ISA - 1; i > 0; i--)
        if (ea__cpu_has((ea__isa)i, NULL)) return ea__isa_names[i];
    return ea__isa_names[0];
}

/* ---- context ---------------------------------------------------------------- */

static size_t ea__tscratch_need(int max_m, int max_k) {
    size_t a = (size_t)max_k * sizeof(float) + 64; /* scalar: one W row in f32 */
    size_t q = (size_t)max_m * 64;                 /* avx512 q8: one zmm per X row */
    if (q > a) a = q;
    size_t b = ea__amx_scratch_bytes(max_k);
    return ((a > b ? a : b) + 63) & ~(size_t)63;
}

ea_status ea_kctx_set_isa(ea_kctx *ctx, const char *isa) {
    int i = ea__isa_parse(isa);
    if (i < 0) return ea_err(EA_ERR_INVALID_ARG, "EAAS_ISA: unknown ISA '%s' (scalar, avx2, avx512, amx)", isa);
    if (!ea__cpu_has((ea__isa)i, &ctx->has_vnni))
        return ea_err(EA_ERR_UNSUPPORTED, "ISA '%s' is not supported by this CPU", isa);
    if (i == EA__ISA_AMX && !ctx->xp) {
        ctx->xp = ea_aligned_alloc(64, ea__amx_pack_bytes(ctx->max_m, ctx->max_k));
        if (!ctx->xp) return ea_err(EA_ERR_NOMEM, "matmul context: AMX activation buffer");
    }
    ctx->isa = (ea__isa)i;
    return EA_OK;
}

ea_status ea_kctx_create(ea_pool *pool, int max_m, int max_k, ea_kctx **out) {
    *out = NULL;
    if (max_m < 1 || max_k < 1 || max_m > (1 << 24) || max_k > (1 << 24))
        return ea_err(EA_ERR_INVALID_ARG, "matmul context: max_m %d / max_k %d out of range", max_m, max_k);
    ea_kctx *c = ea_calloc(1, sizeof *c);
    if (!c) return ea_err(EA_ERR_NOMEM, "matmul context");
    c->pool = pool;
    c->n_threads = ea_pool_size(pool);
    c->max_m = max_m;
    c->max_k = max_k;
    c->xq = ea_aligned_alloc(64, (size_t)max_m * (size_t)max_k + 64);
    c->xd = ea_aligned_alloc(64, ((size_t)max_m * (size_t)(max_k / EA_QK8_0 + 1)) * sizeof(float));
    c->tscratch_bytes = ea__tscratch_need(max_m, max_k);
    c->tscratch = ea_aligned_alloc(64, c->tscratch_bytes * (size_t)c->n_threads);
    if (!c->xq || !c->xd || !c->tscratch) {
        ea_kctx_destroy(c);
        return ea_err(EA_ERR_NOMEM, "matmul context scratch (max_m %d, max_k %d)", max_m, max_k);
    }
    const char *env = getenv("EAAS_ISA");
    ea_status s = ea_kctx_set_isa(c, env && *env ? env : ea_k_isa_best());
    if (s != EA_OK) {
        ea_kctx_destroy(c);
        return s;
    }
    *out = c;
    return EA_OK;
}

void ea_kctx_destroy(ea_kctx *ctx) {
    if (!ctx) return;
    ea_aligned_free(ctx->xq);
    ea_aligned_free(ctx->xd);
    ea_aligned_free(ctx->xp);
    ea_aligned_free(ctx->tscratch);
    ea_free(ctx);
}

const char *ea_kctx_isa(const ea_kctx *ctx) { return ea__isa_names[ctx->isa]; }

/* ---- reference twin ----------------------------------------------------------- */

void ea_k_matmul_ref(const ea_tensor *w, const float *x, int m, float *y) {
    int n = (int)ea_tensor_rows(w), k = (int)ea_tensor_cols(w);
    size_t rb = ea_dtype_row_bytes(w->dtype, (size_t)k);
    float *row = ea_malloc((size_t)k * sizeof(float));
    EA_ASSERT(row);
    for (int j = 0; j < n; j++) {
        ea_dtypes[w->dtype].to_f32((const uint8_t *)w->data + (size_t)j * rb, row, (size_t)k);
        for (int i = 0; i < m; i++) {
            double acc = 0.0;
            for (int kk = 0; kk < k; kk++) acc += (double)row[kk] * (double)x[(size_t)i * k + kk];
            y[(size_t)i * n + j] = (float)acc;
        }
    }
    ea_free(row);
}

/* ---- q8 activations ----------------------------------------------------------- */

/* Same rule as the Q8_0 weights (ggml's reference): d = amax/127, q = rint(x/d),
 * except d is kept in f32. rint rounds half to even, like cvtps2dq. */
void ea__quantize_q8(const float *x, int k, int i0, int i1, int8_t *xq, float *xd) {
    int nb = k / EA_QK8_0;
    for (int i = i0; i < i1; i++) {
        const float *xr = x + (size_t)i * k;
        for (int b = 0; b < nb; b++) {
            float amax = 0.0f;
            for (int l = 0; l < EA_QK8_0; l++) {
                float a = fabsf(xr[b * EA_QK8_0 + l]);
                amax = a > amax ? a : amax;
            }
            float d = amax / 127.0f;
            float id = d != 0.0f ? 1.0f / d : 0.0f;
            xd[(size_t)i * nb + b] = d;
            for (int l = 0; l < EA_QK8_0; l++)
                xq[(size_t)i * k + b * EA_QK8_0 + l] = (int8_t)rintf(xr[b * EA_QK8_0 + l] * id);
        }
    }
}

/* ---- driver ------------------------------------------------------------------- */

typedef struct {
    ea_kctx *ctx;
    ea__mm p;
    ea__rows_fn fn;
    int chunk;
    int n_prep; /* rows (q8) or token blocks (amx) per preparation task */
} ea__job;

static void ea__task_rows(void *arg, int task, int thread) {
    ea__job *jb = arg;
    int j0 = task * jb->chunk;
    int j1 = j0 + jb->chunk < jb->p.n ? j0 + jb->chunk : jb->p.n;
    if (j0 >= j1) return;
    ea__scratch s = {jb->ctx->tscratch + (size_t)thread * jb->ctx->tscratch_bytes, jb->ctx->tscratch_bytes};
    jb->fn(&jb->p, j0, j1, &s);
}

static void ea__task_q8(void *arg, int task, int thread) {
    ea__job *jb = arg;
    int i0 = task * jb->n_prep, i1 = i0 + jb->n_prep < jb->p.m ? i0 + jb->n_prep : jb->p.m;
    ea__quantize_q8(jb->p.x, jb->p.k, i0, i1, jb->ctx->xq, jb->ctx->xd);
}

static void ea__task_pack(void *arg, int task, int thread) {
    ea__job *jb = arg;
    int ntb = (jb->p.m + EA__AMX_TB - 1) / EA__AMX_TB;
    int t0 = task * jb->n_prep, t1 = t0 + jb->n_prep < ntb ? t0 + jb->n_prep : ntb;
    ea__amx_pack(jb->p.x, jb->p.m, jb->p.k, t0, t1, jb->ctx->xp);
}

/* Split `count` items into at most n_threads tasks of `*per` items each. */
static int ea__split(int count, int n_threads, int *per) {
    int t = n_threads < count ? n_threads : count;
    if (t < 1) t = 1;
    *per = (count + t - 1) / t;
    return (count + *per - 1) / *per;
}

static ea__rows_fn ea__pick(const ea_kctx *ctx, ea_dtype dt) {
    ea__isa isa = ctx->isa;
    if (dt == EA_Q8_0) {
        /* Every q8 kernel gives the same bits (matmul_impl.h); take the fastest. */
        if (isa >= EA__ISA_AVX512 && ctx->has_vnni) return ea__rows_avx512_q8;
        if (isa >= EA__ISA_AVX2) return ea__rows_avx2_q8;
        return ea__rows_scalar_q8;
    }
    if (isa == EA__ISA_AMX && dt == EA_BF16) return ea__rows_amx_bf16;
    if (isa >= EA__ISA_AVX512) return ea__rows_avx512_f;
    if (isa >= EA__ISA_AVX2) return ea__rows_avx2_f;
    return ea__rows_scalar_f;
}

void ea_k_matmul(ea_kctx *ctx, const ea_tensor *w, const float *x, int m, float *y) {
    int64_t n = ea_tensor_rows(w), k = ea_tensor_cols(w);
    EA_ASSERT(w->n_dims >= 1 && n >= 1 && n <= INT32_MAX && k >= 1);
    EA_ASSERT(m >= 0 && m <= ctx->max_m && k <= ctx->max_k);
    if (m == 0) return;
    size_t rb = ea_dtype_row_bytes(w->dtype, (size_t)k);
    EA_ASSERT(rb != 0 && rb * (size_t)n <= w->nbytes);

    ea__job jb;
    memset(&jb, 0, sizeof jb);
    jb.ctx = ctx;
    jb.p.dtype = w->dtype;
    jb.p.w = w->data;
    jb.p.row_bytes = rb;
    jb.p.n = (int)n;
    jb.p.k = (int)k;
    jb.p.m = m;
    jb.p.x = x;
    jb.p.y = y;
    jb.fn = ea__pick(ctx, w->dtype);

    /* Activation preparation: row-local, so row i's result never depends on other rows. */
    ea_pool *pool = ctx->pool;
    if (w->dtype == EA_Q8_0) {
        jb.p.xq = ctx->xq;
        jb.p.xd = ctx->xd;
        int nt = ea__split(m, m * k >= 65536 ? ctx->n_threads : 1, &jb.n_prep);
        ea_pool_run(nt > 1 ? pool : NULL, ea__task_q8, &jb, nt);
    } else if (jb.fn == ea__rows_amx_bf16) {
        jb.p.xp = ctx->xp;
        int ntb = (m + EA__AMX_TB - 1) / EA__AMX_TB;
        int nt = ea__split(ntb, m * k >= 65536 ? ctx->n_threads : 1, &jb.n_prep);
        ea_pool_run(nt > 1 ? pool : NULL, ea__task_pack, &jb, nt);
    }

    /* Columns: contiguous chunks, multiples of 32, one per thread. */
    int nt = ctx->n_threads;
    if ((int64_t)m * n * k < 32768) nt = 1; /* tiny products: a pool wake-up costs more */
    int chunk = (int)((n + nt - 1) / nt);
    chunk = (chunk + 31) & ~31;
    jb.chunk = chunk;
    int tasks = (int)((n + chunk - 1) / chunk);
    ea_pool_run(tasks > 1 ? pool : NULL, ea__task_rows, &jb, tasks);
}
