/*
 * matmul.c — the matmul driver: context, ISA dispatch, the reference twin,
 * activation preparation and the split of work over the thread pool.
 *
 * Why this shape: the ISA variants (matmul_*.c) only compute a range of output
 * columns j for all rows i; everything that could make a result depend on the
 * batch lives here and is made batch-independent on purpose:
 *   - activations are prepared row by row (q8 quantisation, bf16 packing), so
 *     row i's prepared data depends on X[i] only;
 *   - the n columns are cut into chunks (multiples of 32) that the pool's
 *     threads claim in turn; k is never split; each variant computes every
 *     (i, j) with the same operation sequence whatever m, the chunk and the
 *     thread (matmul_impl.h).
 *
 * ISA choice: the best the CPU offers (amx > avx512_bf16 > avx512 > avx2 >
 * scalar), or the EAAS_ISA environment variable, or ea_kctx_set_isa(). A
 * variant serves the dtypes it has a kernel for; the others fall back within
 * the context to the next ISA down that has one (e.g. f32 weights under "amx"
 * use avx512 FMA), always the same fallback for the same (ISA, dtype), so
 * invariance holds.
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

typedef enum { EA__ISA_SCALAR, EA__ISA_AVX2, EA__ISA_AVX512, EA__ISA_AVX512_BF16, EA__ISA_AMX, EA__N_ISA } ea__isa;

static const char *const ea__isa_names[EA__N_ISA] = {"scalar", "avx2", "avx512", "avx512_bf16", "amx"};

struct ea_kctx {
    ea_pool *pool; /* borrows; NULL = serial */
    int n_threads;
    int max_m, max_k;
    ea__isa isa;
    int has_vnni; /* avx512 q8 kernel usable */
    int has_amx_int8; /* q8 batches on AMX int8 tiles */
    int8_t *xq;   /* owns: xq_cap bytes (q8 activations of a batch) */
    float *xd;    /* owns: xd_cap floats (their block scales) */
    uint16_t *xp; /* owns: xp_cap bytes, AMX packed X, or NULL */
    size_t xq_cap, xd_cap, xp_cap;
    uint8_t *tscratch; /* owns: n_threads * tscratch_bytes */
    size_t tscratch_bytes;
    uint8_t *tprep; /* owns: n_threads * tprep_bytes, each thread's own prepared activations of <= 16 rows */
    size_t tprep_bytes, tprep_xq, tprep_xd; /* offsets of xd and xp inside one thread's area */
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
    case EA__ISA_AVX512_BF16: return avx512 && __builtin_cpu_supports("avx512bf16");
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
    size_t q = ea__avx2_q8_scratch_bytes(max_k);
    if (q > a) a = q;
    q = ea__avx2_f_scratch_bytes(max_k);
    if (q > a) a = q;
    q = ea__amx_q8_scratch_bytes(max_k);
    if (q > a) a = q;
    q = ea__avx512_q8_scratch_bytes(max_m, max_k);
    if (q > a) a = q;
    size_t b = ea__amx_scratch_bytes(max_k);
    return ((a > b ? a : b) + 63) & ~(size_t)63;
}

ea_status ea_kctx_set_isa(ea_kctx *ctx, const char *isa) {
    int i = ea__isa_parse(isa);
    if (i < 0) return ea_err(EA_ERR_INVALID_ARG, "EAAS_ISA: unknown ISA '%s' (scalar, avx2, avx512, avx512_bf16, amx)", isa);
    if (!ea__cpu_has((ea__isa)i, &ctx->has_vnni))
        return ea_err(EA_ERR_UNSUPPORTED, "ISA '%s' is not supported by this CPU", isa);
    size_t xp_need = 0;
    if (i == EA__ISA_AMX || i == EA__ISA_AVX512_BF16)
        /* one product of max_m x max_k, plus slack for the 16-row padding of small batch members
         * (AMX tiles; avx512_bf16 takes bf16 rows of k rounded up to 32, which fit the same bytes) */
        xp_need = ea__amx_pack_bytes(ctx->max_m, ctx->max_k) + (size_t)16 * EA__AMX_TB * (size_t)ctx->max_k * 2;
    else if (i == EA__ISA_AVX2 && ctx->max_m >= EA__WIDE_MIN_M) /* the F prefill tiles' X (matmul_avx2.c) */
        xp_need = ea__avx2_bc_x_bytes(ctx->max_m, ctx->max_k) + 64;
    if (xp_need > ctx->xp_cap) {
        ea_aligned_free(ctx->xp);
        ctx->xp_cap = 0;
        if (!(ctx->xp = ea_aligned_alloc(64, xp_need))) return ea_err(EA_ERR_NOMEM, "matmul context: activation buffer");
        ctx->xp_cap = xp_need;
    }
    ctx->isa = (ea__isa)i;
    ctx->has_amx_int8 = i == EA__ISA_AMX && ea__amx_int8();
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
    c->xq_cap = ((size_t)max_m * (size_t)max_k + 63) & ~(size_t)63;
    c->xd_cap = (size_t)max_m * (size_t)(max_k / EA_QK8_0);
    c->xq = ea_aligned_alloc(64, c->xq_cap + 64);
    c->xd = ea_aligned_alloc(64, (c->xd_cap + 16) * sizeof(float));
    c->tscratch_bytes = ea__tscratch_need(max_m, max_k);
    c->tscratch = ea_aligned_alloc(64, c->tscratch_bytes * (size_t)c->n_threads);
    /* per thread: xq (16, k) int8 | xd (16, k/32) f32 | xp (AMX bf16 or int8 pack of 16 rows, or avx2 decode x) */
    size_t pk = ea__amx_pack_bytes(EA__AMX_TB, max_k), pq = ea__amx_q8_pack_bytes(EA__AMX_TB, max_k);
    if (ea__avx2_q8_xv_bytes(max_k) > pq) pq = ea__avx2_q8_xv_bytes(max_k);
    c->tprep_xq = ((size_t)EA__AMX_TB * (size_t)max_k + 63) & ~(size_t)63;
    c->tprep_xd = c->tprep_xq + (((size_t)EA__AMX_TB * (size_t)(max_k / EA_QK8_0 + 1) * sizeof(float) + 63) & ~(size_t)63);
    c->tprep_bytes = c->tprep_xd + (((pk > pq ? pk : pq) + 63) & ~(size_t)63);
    c->tprep = ea_aligned_alloc(64, c->tprep_bytes * (size_t)c->n_threads);
    if (!c->xq || !c->xd || !c->tscratch || !c->tprep) {
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
    ea_aligned_free(ctx->tprep);
    ea_free(ctx);
}

const char *ea_kctx_isa(const ea_kctx *ctx) { return ea__isa_names[ctx->isa]; }

int ea_kctx_rounds_x(const ea_kctx *ctx) { return ctx->isa == EA__ISA_AMX || ctx->isa == EA__ISA_AVX512_BF16; }

ea_pool *ea_kctx_pool(const ea_kctx *ctx) { return ctx->pool; }
int ea_kctx_max_m(const ea_kctx *ctx) { return ctx->max_m; }
int ea_kctx_max_k(const ea_kctx *ctx) { return ctx->max_k; }

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

/* ---- packed copies ---------------------------------------------------------------- */

static ea__rows_fn ea__pick(const ea_kctx *ctx, ea_dtype dt, int m);

/* The layout a kernel reads its copies in (0: it reads the rows only). */
static int ea__pack_rows_of(ea__rows_fn fn) {
    return fn == ea__rows_avx2_q8     ? EA_Q8X8_ROWS
           : fn == ea__rows_avx512_q8 ? EA_Q8X16_ROWS
           : fn == ea__rows_avx2_f || fn == ea__rows_avx512_bf16 ? EA_FX4_ROWS
                                                               : 0;
}

/* A context of the ISA a new context picks: the copy its kernel for dt
 * reads, if decode steps (m = 1) and large batches run on that same kernel
 * (on AMX CPUs q8_0 batches read the rows, so a copy would hold the weights
 * twice). */
int ea_k_pack_rows(ea_dtype dt) {
    const char *env = getenv("EAAS_ISA");
    return ea_k_pack_rows_isa(env && *env ? env : ea_k_isa_best(), dt);
}

int ea_k_pack_rows_isa(const char *isa, ea_dtype dt) {
    ea_kctx c = {0};
    int i = ea__isa_parse(isa);
    if (i < 0 || !ea__cpu_has((ea__isa)i, &c.has_vnni) || (unsigned)dt >= EA_N_DTYPES) return 0;
    c.isa = (ea__isa)i;
    c.has_amx_int8 = i == EA__ISA_AMX && ea__amx_int8();
    ea__rows_fn fn = ea__pick(&c, dt, 1);
    return fn == ea__pick(&c, dt, 512) ? ea__pack_rows_of(fn) : 0;
}

size_t ea_k_packed_bytes(const ea_tensor *w, int rows) {
    int64_t n = ea_tensor_rows(w), k = ea_tensor_cols(w);
    if (w->n_dims < 2 || n < 1 || k < 1) return 0;
    if (w->dtype == EA_Q8_0) {
        if (k < EA_QK8_0 || k % EA_QK8_0 || (rows != EA_Q8X8_ROWS && rows != EA_Q8X16_ROWS)) return 0;
    } else if (w->dtype != EA_F32 && w->dtype != EA_F16 && w->dtype != EA_BF16) {
        return 0;
    } else if (rows != EA_FX4_ROWS) {
        return 0;
    }
    return (size_t)((n + rows - 1) / rows) * ea_packed_group_bytes(w->dtype, (size_t)k, rows);
}

/* Block b's scales of rows[0..nr) at q (padding rows: 0), for `rows` rows; returns the end. */
static uint8_t *ea__pack_q8_scales(const ea_block_q8_0 *const *row, int nr, int rows, size_t b, uint8_t *q) {
    for (int r = 0; r < rows; r++, q += 2) {
        uint16_t d = r < nr ? row[r][b].d : 0;
        memcpy(q, &d, 2);
    }
    return q;
}

/* The writers fill each group in address order (padding included), so a
 * copy is written once, front to back, into fresh memory. */
static void ea__pack_q8(const ea_tensor *w, int rows, uint8_t *o) {
    int64_t n = ea_tensor_rows(w);
    size_t k = (size_t)ea_tensor_cols(w), nb = k / EA_QK8_0, gb = ea_q8p_group_bytes(k, rows);
    size_t rb = ea_dtype_row_bytes(EA_Q8_0, k);
    uint32_t flip = rows == EA_Q8X16_ROWS ? 0x80808080u : 0;
    for (int64_t j0 = 0; j0 < n; j0 += rows, o += gb) {
        const ea_block_q8_0 *row[EA_Q8X16_ROWS];
        int nr = n - j0 < rows ? (int)(n - j0) : rows;
        for (int r = 0; r < nr; r++) row[r] = (const ea_block_q8_0 *)((const uint8_t *)w->data + (size_t)(j0 + r) * rb);
        uint8_t *q = o;
        for (size_t b = 0; b < nb; b++) {
            if (rows == EA_Q8X8_ROWS) q = ea__pack_q8_scales(row, nr, rows, b, q);
            if (rows == EA_Q8X16_ROWS && b % 2 == 0) { /* the pair's scales: b's, then b + 1's (or zeros) */
                q = ea__pack_q8_scales(row, nr, rows, b, q);
                q = ea__pack_q8_scales(row, b + 1 < nb ? nr : 0, rows, b + 1, q); /* nr 0: zeros */
            }
            for (int d = 0; d < 8; d++) /* run d: dword d of each row's block b */
                for (int r = 0; r < rows; r++, q += 4) {
                    uint32_t v = 0; /* padding rows: zero bytes */
                    if (r < nr) {
                        memcpy(&v, row[r][b].qs + 4 * d, 4);
                        v ^= flip;
                    }
                    memcpy(q, &v, 4);
                }
        }
        memset(q, 0, gb - (size_t)(q - o));
    }
}

/* Fx4: step s of row j's group holds its elements [16s, 16s + 16) at (j % 4) * 16. */
static void ea__pack_fx4(const ea_tensor *w, uint8_t *o) {
    int64_t n = ea_tensor_rows(w);
    size_t k = (size_t)ea_tensor_cols(w), eb = (size_t)ea_dtypes[w->dtype].block_bytes, seg = EA_FX4_STEP * eb;
    for (int64_t j0 = 0; j0 < n; j0 += EA_FX4_ROWS)
        for (size_t k0 = 0; k0 < k; k0 += EA_FX4_STEP)
            for (int64_t j = j0; j < j0 + EA_FX4_ROWS; j++, o += seg) {
                size_t e = j < n ? (k - k0 < EA_FX4_STEP ? k - k0 : EA_FX4_STEP) * eb : 0;
                if (e) memcpy(o, (const uint8_t *)w->data + ((size_t)j * k + k0) * eb, e);
                memset(o + e, 0, seg - e);
            }
}

void ea_k_pack(const ea_tensor *w, int rows, void *dst) {
    EA_ASSERT(ea_k_packed_bytes(w, rows));
    if (w->dtype == EA_Q8_0) ea__pack_q8(w, rows, dst);
    else ea__pack_fx4(w, dst);
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

/* A batch is run in groups whose prepared activations fit the scratch; each
 * group takes two pool runs: preparation (units of 16 rows), then products
 * (chunks of W rows claimed by the threads, ea__task_rows). When every product has at most 16
 * rows (decode), there is one pool run: each thread prepares the
 * activations of the products it computes into its own area (the same bits;
 * a product cut between two threads is prepared by both). */
typedef struct {
    ea__mm p;
    ea__rows_fn fn;
    int prep; /* 0 none, 1 q8, 2 amx bf16 pack, 3 q8 then amx int8 pack, 4 bf16 rows, 5 avx2 lane-major (F, m >= 64) */
    int shared; /* 1: uses the previous product's prepared activations (same x, m, k) */
    int unit0, n_units;     /* preparation units of this product: [unit0, unit0 + n_units) */
    int64_t row0;           /* its first W row in the job's row count */
} ea__prob;

typedef struct {
    ea_kctx *ctx;
    ea__prob *pr;
    int n_pr;
    int inline_prep; /* every product has <= 16 rows: each thread prepares what it computes */
    int n_units;
    int n_tasks;
    int64_t n_rows;   /* the products' W rows, one after the other ... */
    int64_t next_row; /* ... claimed by the threads in chunks from here on (atomic) */
} ea__job;

/* Prepare token block tb (16 rows) of p's activations into p's xq/xd/xp. */
static void ea__prep_block(const ea_kctx *ctx, int prep, const ea__mm *p, int tb) {
    int i0 = tb * EA__AMX_TB, i1 = i0 + EA__AMX_TB < p->m ? i0 + EA__AMX_TB : p->m;
    if (prep == 1 || prep == 3)
        (ctx->isa >= EA__ISA_AVX512 ? ea__quantize_q8_avx512
         : ctx->isa == EA__ISA_AVX2 ? ea__quantize_q8_avx2
                                    : ea__quantize_q8)(p->x, p->k, i0, i1, (int8_t *)p->xq, (float *)p->xd);
    if (prep == 2) ea__amx_pack(p->x, p->m, p->k, tb, tb + 1, (uint16_t *)p->xp);
    if (prep == 4) ea__bf16_rows(p->x, p->k, i0, i1, (uint16_t *)p->xp);
    if (prep == 5) ea__avx2_bc_x(p->x, p->m, p->k, i0, i1, (float *)p->xp);
    if (prep == 3) ea__amx_q8_pack(p->xq, p->xd, p->m, p->k, tb, (uint8_t *)p->xp);
}

static void ea__task_prep(void *arg, int task, int thread) {
    (void)thread;
    ea__job *jb = arg;
    int u0 = (int)((int64_t)jb->n_units * task / jb->n_tasks), u1 = (int)((int64_t)jb->n_units * (task + 1) / jb->n_tasks);
    for (int q = 0; q < jb->n_pr && u0 < u1; q++) {
        ea__prob *pr = &jb->pr[q];
        int a = u0 > pr->unit0 ? u0 : pr->unit0, b = u1 < pr->unit0 + pr->n_units ? u1 : pr->unit0 + pr->n_units;
        for (int u = a; u < b; u++) ea__prep_block(jb->ctx, pr->prep, &pr->p, u - pr->unit0);
    }
}

/* Claim the next chunk: rows [a, b) of product *q (*q starts from the
 * caller's hint: claims only grow). A chunk is half of what is left per
 * thread, 32..2048 rows (a multiple of 32 from its product's start, cut at
 * its end): large while there is much to do, small at the end, so the
 * threads finish within a few 32-row chunks of each other (guided
 * scheduling). Every chunk start is a new stream for the prefetchers and a
 * new pass over X: on a Zen 5, 2 threads, bench_forward with the two
 * schedules taking the steps in turn in one process, a quarter and 512
 * rows -> half and 2048 rows: q8_0 batch 1 88.0 / 88.5 / 84.2 / 84.0 ->
 * 95.0 / 96.9 / 88.8 / 87.7 tok/s (half and 1024: 93.0 / 99.7 / 90.3 /
 * 88.9), batch 64 514.6 / 456.1 / 471.3 -> 576.6 / 531.5 / 521.0; bf16
 * batch 1 54.8 / 54.4 / 51.0 -> 55.2 / 57.5 / 53.8; prefill of 512 tokens,
 * the reps in turn, q8_0 856 / 918 -> 928 / 942 (half and 1024), bf16
 * 527 / 505 -> 532 / 526 tok/s. */
#define EA__CHUNK_MIN 32   /* rows of the smallest chunk */
#define EA__CHUNK_MAX 2048 /* ... and of the largest */

static int ea__claim(ea__job *jb, int *q, int *a, int *b) {
    int64_t cur = __atomic_load_n(&jb->next_row, __ATOMIC_RELAXED);
    for (;;) {
        if (cur >= jb->n_rows) return 0;
        int64_t sz = ((jb->n_rows - cur) / (2 * (int64_t)jb->ctx->n_threads) + 31) & ~(int64_t)31;
        sz = sz < EA__CHUNK_MIN ? EA__CHUNK_MIN : sz > EA__CHUNK_MAX ? EA__CHUNK_MAX : sz;
        while (*q + 1 < jb->n_pr && jb->pr[*q + 1].row0 <= cur) (*q)++;
        const ea__prob *pr = &jb->pr[*q];
        int64_t end = cur + sz < pr->row0 + pr->p.n ? cur + sz : pr->row0 + pr->p.n;
        if (__atomic_compare_exchange_n(&jb->next_row, &cur, end, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *a = (int)(cur - pr->row0);
            *b = (int)(end - pr->row0);
            return 1;
        }
    }
}

/* Each thread claims chunks until none is left; it claims its next chunk
 * before computing the current one, so the current one's last block can
 * prefetch the next one's first rows, while more than a 32-row chunk per
 * thread is left: the thread that posts a job starts at once while the
 * others are still noticing it, and a job of two chunks (a 64-row router)
 * went whole to it (f32 64 x 1024 at m = 64, 2 threads: 75 us a call, the
 * other thread idle). Which thread computes a chunk changes only the
 * timing: every row is computed the same way by any thread. */
static void ea__task_rows(void *arg, int task, int thread) {
    (void)task;
    ea__job *jb = arg;
    ea__scratch s = {jb->ctx->tscratch + (size_t)thread * jb->ctx->tscratch_bytes, jb->ctx->tscratch_bytes};
    ea__rows_fn last_fn = NULL; /* s.held_xq is only good for the function that left it */
    const ea__prob *last = NULL; /* inline prep: the product whose activations this thread holds */
    int last_xv = 0;             /* ... and whether its xv is laid out */
    int q = 0, a, b;
    int more = ea__claim(jb, &q, &a, &b);
    while (more) {
        int qn = q, na, nb;
        /* ahead: the next chunk is claimed before this one runs */
        int ahead = jb->n_rows - __atomic_load_n(&jb->next_row, __ATOMIC_RELAXED) > EA__CHUNK_MIN * (int64_t)jb->ctx->n_threads;
        int more_n = ahead ? ea__claim(jb, &qn, &na, &nb) : 0;
        const ea__prob *pr = &jb->pr[q];
        ea__mm mine = pr->p;
        if (jb->inline_prep && pr->prep) { /* this thread's own copy; the same x again (gate, up) is kept */
            uint8_t *t = jb->ctx->tprep + (size_t)thread * jb->ctx->tprep_bytes;
            mine.xq = (const int8_t *)t;
            mine.xd = (const float *)(t + jb->ctx->tprep_xq);
            mine.xp = (const uint16_t *)(t + jb->ctx->tprep_xd);
            if (!(last && last->prep == pr->prep && last->p.x == pr->p.x && last->p.m == pr->p.m && last->p.k == pr->p.k)) {
                ea__prep_block(jb->ctx, pr->prep, &mine, 0);
                last_xv = 0;
                s.held_xq = NULL;
            }
            if (pr->fn == ea__rows_avx2_q8 && mine.m == 1 && mine.wp) { /* the packed decode loop's x */
                mine.xv = (const uint8_t *)mine.xp;
                if (!last_xv) ea__avx2_q8_xv(mine.xq, mine.k, (uint8_t *)mine.xp);
                last_xv = 1;
            }
            last = pr;
        }
        s.pf_next = NULL;
        s.pf_bytes = 0;
        if (more_n) { /* the first rows of the chunk this thread computes next */
            const ea__prob *nx = &jb->pr[qn];
            s.pf_next = ea__w_row(&nx->p, na);
            s.pf_bytes = (size_t)(nb - na < 32 ? nb - na : 32) * nx->p.row_bytes;
        }
        if (pr->fn != last_fn) s.held_xq = NULL;
        last_fn = pr->fn;
        pr->fn(&mine, a, b, &s);
        if (!ahead) more_n = ea__claim(jb, &qn, &na, &nb);
        more = more_n;
        q = qn;
        a = na;
        b = nb;
    }
}

/* Smallest m for which q8_0 goes to the AMX int8 kernel (same bits either way):
 * below it the VNNI kernel is faster (bench_matmul, 8 expert shapes, 2 threads:
 * m = 4 253-265 vs 304-324 us, m = 5 about even, m = 8 AMX 298-334 vs 342-467). */
#define EA__AMX_Q8_MIN_M 5

static ea__rows_fn ea__pick(const ea_kctx *ctx, ea_dtype dt, int m) {
    ea__isa isa = ctx->isa;
    if (dt == EA_Q8_0) {
        /* Every q8 kernel gives the same bits (matmul_impl.h); take the fastest. */
        if (isa == EA__ISA_AMX && ctx->has_amx_int8 && m >= EA__AMX_Q8_MIN_M) return ea__rows_amx_q8;
        if (isa >= EA__ISA_AVX512 && ctx->has_vnni) return ea__rows_avx512_q8;
        if (isa >= EA__ISA_AVX2) return ea__rows_avx2_q8;
        return ea__rows_scalar_q8;
    }
    if (isa == EA__ISA_AMX && dt == EA_BF16) return ea__rows_amx_bf16;
    if (isa == EA__ISA_AVX512_BF16 && dt == EA_BF16) return ea__rows_avx512_bf16;
    if (isa >= EA__ISA_AVX512) return ea__rows_avx512_f;
    if (isa >= EA__ISA_AVX2) return ea__rows_avx2_f;
    return ea__rows_scalar_f;
}

static void ea__run_group(ea_kctx *ctx, ea__prob *pr, int n_pr) {
    ea__job jb = {.ctx = ctx, .pr = pr, .n_pr = n_pr, .inline_prep = 1, .n_tasks = 1};
    for (int q = 0; q < n_pr; q++) jb.inline_prep &= pr[q].p.m <= EA__AMX_TB && pr[q].p.k <= ctx->max_k;
    double work = 0.0;
    for (int q = 0; q < n_pr; q++) {
        pr[q].unit0 = jb.n_units;
        pr[q].n_units = pr[q].prep && !pr[q].shared && !jb.inline_prep ? (pr[q].p.m + EA__AMX_TB - 1) / EA__AMX_TB : 0;
        jb.n_units += pr[q].n_units;
        pr[q].row0 = jb.n_rows;
        jb.n_rows += pr[q].p.n;
        work += (double)pr[q].p.m * pr[q].p.n * pr[q].p.k;
    }
    int nt = ctx->n_threads;
    if (jb.n_units > 0) {
        jb.n_tasks = nt < jb.n_units ? nt : jb.n_units;
        ea_pool_run(jb.n_tasks > 1 ? ctx->pool : NULL, ea__task_prep, &jb, jb.n_tasks);
    }
    /* tiny products: a pool wake-up costs more than the work */
    jb.n_tasks = work < 32768.0 ? 1 : nt;
    ea_pool_run(jb.n_tasks > 1 ? ctx->pool : NULL, ea__task_rows, &jb, jb.n_tasks);
}

void ea_k_matmul_batch(ea_kctx *ctx, const ea_k_mm *mm, int n_mm) {
    ea__prob pr[EA_K_BATCH_MAX];
    EA_ASSERT(n_mm >= 0 && n_mm <= EA_K_BATCH_MAX);
    size_t xq_used = 0, xd_used = 0, xp_used = 0;
    int n_pr = 0;
    for (int q = 0; q < n_mm; q++) {
        const ea_tensor *w = mm[q].w;
        int64_t n = ea_tensor_rows(w), k = ea_tensor_cols(w);
        int m = mm[q].m;
        EA_ASSERT(w->n_dims >= 1 && n >= 1 && n <= INT32_MAX && k >= 1);
        EA_ASSERT(m >= 0 && m <= ctx->max_m && k <= ctx->max_k);
        if (m == 0) continue;
        size_t rb = ea_dtype_row_bytes(w->dtype, (size_t)k);
        EA_ASSERT(rb != 0 && rb * (size_t)n <= w->nbytes);
        EA_ASSERT((uintptr_t)w->data % (w->dtype == EA_F32 ? 4u : 2u) == 0);
        ea__prob *p = &pr[n_pr];
        memset(p, 0, sizeof *p);
        p->p.dtype = w->dtype;
        p->p.w = w->data;
        p->p.row_bytes = rb;
        p->p.n = (int)n;
        p->p.k = (int)k;
        p->p.m = m;
        p->p.x = mm[q].x;
        p->p.y = mm[q].y;
        p->fn = ea__pick(ctx, w->dtype, m);
        if (w->packed && w->packed_rows == ea__pack_rows_of(p->fn)) {
            p->p.wp = w->packed;
            p->p.wp_rows = w->packed_rows;
        }
        size_t need_q = 0, need_d = 0, need_p = 0;
        if (w->dtype == EA_Q8_0) {
            p->prep = p->fn == ea__rows_amx_q8 ? 3 : 1;
            need_q = ((size_t)m * (size_t)k + 63) & ~(size_t)63;
            need_d = (size_t)m * (size_t)(k / EA_QK8_0);
            if (p->prep == 3) need_p = (ea__amx_q8_pack_bytes(m, (int)k) + 63) & ~(size_t)63;
        } else if (p->fn == ea__rows_amx_bf16) {
            p->prep = 2;
            need_p = (ea__amx_pack_bytes(m, (int)k) + 63) & ~(size_t)63;
        } else if (p->fn == ea__rows_avx512_bf16) {
            p->prep = 4;
            need_p = ((size_t)m * (size_t)ea__k32((int)k) * 2 + 63) & ~(size_t)63;
        } else if (p->fn == ea__rows_avx2_f && m >= EA__WIDE_MIN_M && ctx->xp) {
            p->prep = 5;
            need_p = (ea__avx2_bc_x_bytes(m, (int)k) + 63) & ~(size_t)63;
        }
        const ea__prob *prev = n_pr > 0 ? &pr[n_pr - 1] : NULL;
        if (prev && p->prep && prev->prep == p->prep && prev->p.x == p->p.x && prev->p.m == m && prev->p.k == p->p.k) {
            /* same activations as the product before (gate and up, q/k/v): share its prepared copy */
            p->shared = 1;
            p->p.xq = prev->p.xq;
            p->p.xd = prev->p.xd;
            p->p.xp = prev->p.xp;
            n_pr++;
            continue;
        }
        if (xq_used + need_q > ctx->xq_cap || xd_used + need_d > ctx->xd_cap || xp_used + need_p > ctx->xp_cap) {
            ea__run_group(ctx, pr, n_pr); /* scratch full: run what we have, start again */
            pr[0] = *p;
            p = &pr[0];
            n_pr = 0;
            xq_used = xd_used = xp_used = 0;
        }
        p->p.xq = ctx->xq + xq_used;
        p->p.xd = ctx->xd + xd_used;
        p->p.xp = ctx->xp ? (const uint16_t *)((const uint8_t *)ctx->xp + xp_used) : NULL;
        xq_used += need_q;
        xd_used += need_d;
        xp_used += need_p;
        n_pr++;
    }
    if (n_pr) ea__run_group(ctx, pr, n_pr);
}

void ea_k_matmul(ea_kctx *ctx, const ea_tensor *w, const float *x, int m, float *y) {
    ea_k_mm one = {w, x, m, y};
    ea_k_matmul_batch(ctx, &one, 1);
}
