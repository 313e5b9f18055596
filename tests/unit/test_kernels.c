/*
 * test_kernels.c — the matmul kernels against their reference twin, and the
 * batch-invariance contract bit for bit (src/kernels/matmul.h).
 *
 * For every ISA this CPU runs (scalar, avx2, avx512, avx512_bf16, amx) and every weight
 * dtype (f32, f16, bf16, q8_0), on odd shapes:
 *   - Y is within tolerance of ea_k_matmul_ref (f64 accumulation, f32 X):
 *       f32/f16/bf16, X unrounded:   |err| <= 1e-5 * sum|w x|
 *       bf16 on AMX or avx512_bf16, X rounded bf16:
 *                                    |err| <= 2^-8 * sum|w x|   (2 x the rounding bound 2^-9)
 *       q8_0, X quantised per block: |err| <= sum_b (d_b/2 * sum|w_b|) * 1.01 + 1e-5 * sum|w x|
 *         with d_b = amax_b / 127 (the quantisation step of X's block b)
 *   - row i of a 70-row batch on 2 threads == row i computed alone on 1 thread
 *     == row i inside any other batch size m in {1,2,3,7,16,31,64..69} with
 *     other neighbours (memcmp of the floats);
 *   - scalar, avx2 and avx512 give the same bits for every dtype, and q8_0 gives
 *     the same bits on every ISA (the canonical orders of matmul_impl.h);
 *   - ea_k_matmul_batch over mixed dtypes/shapes == single calls, bit for bit,
 *     also when the batch is cut into groups;
 *   - matrices carry the packed copy this CPU's kernels read (q8_0: Q8_0x8
 *     for avx2, Q8_0x16 for avx512; f32/f16/bf16: Fx4 for avx2; other
 *     kernels ignore it); those kernels give the same bits without it and on
 *     row views;
 *   - a call allocates nothing.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "harness.h"
#include "kernels/matmul.h"

static const char *const isas[] = {"scalar", "avx2", "avx512", "avx512_bf16", "amx"};
#define NISA 5
static const int ms[] = {1, 2, 3, 7, 16, 31, 64, 65, 66, 67, 68, 69}; /* 64..69: every remainder of the avx2 bf16 6-token tiles */
#define MAXM 70

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

typedef struct {
    ea_tensor t;
    void *data;
    void *packed; /* the packed copy this CPU's kernel reads (q8_0: Q8_0x8, else Fx4 when none) */
    float *wf;    /* W as f32 (dequantised), for the bounds */
} wmat;

static void wmat_make(wmat *w, ea_dtype dt, int n, int k) {
    size_t rb = ea_dtype_row_bytes(dt, (size_t)k);
    float *row = malloc((size_t)k * sizeof(float));
    w->data = malloc(rb * (size_t)n);
    w->wf = malloc((size_t)n * k * sizeof(float));
    for (int j = 0; j < n; j++) {
        for (int kk = 0; kk < k; kk++) {
            float v = frand();
            if (dt == EA_F16 && kk % 13 == 5) v *= 1e-6f; /* f16 subnormals */
            if (kk % 29 == 3) v = 0.0f;
            row[kk] = v;
        }
        ea_dtypes[dt].from_f32(row, (uint8_t *)w->data + j * rb, (size_t)k);
        if (dt == EA_Q8_0) /* -128, which no quantiser writes but a file may hold, has no negation in int8 */
            for (int b = 0; b < k / 32; b++) ((ea_block_q8_0 *)((uint8_t *)w->data + j * rb))[b].qs[(j + 3 * b) % 32] = -128;
        ea_dtypes[dt].to_f32((uint8_t *)w->data + j * rb, w->wf + (size_t)j * k, (size_t)k);
    }
    memset(&w->t, 0, sizeof w->t);
    w->t.name = "w";
    w->t.dtype = dt;
    w->t.n_dims = 2;
    w->t.shape[0] = n;
    w->t.shape[1] = k;
    w->t.data = w->data;
    w->t.nbytes = rb * (size_t)n;
    w->packed = NULL;
    int pr = ea_k_pack_rows(dt) ? ea_k_pack_rows(dt) : dt == EA_Q8_0 ? EA_Q8X8_ROWS : EA_FX4_ROWS;
    if (ea_k_packed_bytes(&w->t, pr)) {
        w->packed = ea_aligned_alloc(64, ea_k_packed_bytes(&w->t, pr));
        ea_k_pack(&w->t, pr, w->packed);
        w->t.packed = w->packed;
        w->t.packed_rows = pr;
    }
    free(row);
}

static void wmat_free(wmat *w) {
    ea_aligned_free(w->packed);
    free(w->data);
    free(w->wf);
}

/* Tolerance bound for Y[i][j] (see the header comment). */
static double bound(const wmat *w, const float *x, int k, int i, int j, int amx) {
    const float *wr = w->wf + (size_t)j * k, *xr = x + (size_t)i * k;
    double s = 0.0;
    for (int kk = 0; kk < k; kk++) s += fabs((double)wr[kk] * xr[kk]);
    if (w->t.dtype == EA_Q8_0) {
        double q = 0.0;
        for (int b = 0; b < k / 32; b++) {
            double amax = 0.0, sw = 0.0;
            for (int l = 0; l < 32; l++) {
                amax = fmax(amax, fabs(xr[b * 32 + l]));
                sw += fabs(wr[b * 32 + l]);
            }
            q += amax / 127.0 / 2.0 * sw;
        }
        return q * 1.01 + 1e-5 * s + 1e-30;
    }
    return (amx ? 1.0 / 256.0 : 1e-5) * s + 1e-30;
}

/* One ISA x dtype x shape: tolerance and invariance. Returns 0 on success. */
static int check_one(ea_kctx *c1, ea_kctx *c2, const char *isa, ea_dtype dt, int n, int k, float *yout) {
    wmat w;
    wmat_make(&w, dt, n, k);
    float *x = malloc((size_t)(2 * MAXM) * k * sizeof(float));
    for (size_t q = 0; q < (size_t)(2 * MAXM) * k; q++) x[q] = frand() * (q % 7 == 0 ? 4.0f : 1.0f);
    float *yref = malloc((size_t)MAXM * n * sizeof(float));
    float *ybig = malloc((size_t)MAXM * n * sizeof(float));
    float *y = malloc((size_t)2 * MAXM * n * sizeof(float));
    int bad = 0;
    int amx = (!strcmp(isa, "amx") || !strcmp(isa, "avx512_bf16")) && dt == EA_BF16; /* X rounded to bf16 */

    ea_k_matmul_ref(&w.t, x, MAXM, yref);
    uint64_t a0 = ea_alloc_count();
    ea_k_matmul(c2, &w.t, x, MAXM, ybig);
    if (ea_alloc_count() != a0) {
        fprintf(stderr, "  %s %s: ea_k_matmul allocated\n", isa, ea_dtypes[dt].name);
        bad = 1;
    }
    for (int i = 0; i < MAXM && !bad; i++)
        for (int j = 0; j < n; j++) {
            double e = fabs((double)ybig[(size_t)i * n + j] - yref[(size_t)i * n + j]);
            double b = bound(&w, x, k, i, j, amx);
            if (!(e <= b)) {
                fprintf(stderr, "  %s %s n=%d k=%d: y[%d][%d] = %.9g, ref %.9g, err %.3g > bound %.3g\n", isa,
                        ea_dtypes[dt].name, n, k, i, j, ybig[(size_t)i * n + j], yref[(size_t)i * n + j], e, b);
                bad = 1;
                break;
            }
        }
    /* each row alone, 1 thread */
    for (int i = 0; i < MAXM && !bad; i++) {
        ea_k_matmul(c1, &w.t, x + (size_t)i * k, 1, y);
        if (memcmp(y, ybig + (size_t)i * n, (size_t)n * sizeof(float))) {
            fprintf(stderr, "  %s %s n=%d k=%d: row %d alone (1 thread) != in batch of %d (2 threads)\n", isa,
                    ea_dtypes[dt].name, n, k, i, MAXM);
            bad = 1;
        }
    }
    /* other batch sizes, other neighbours: rows [off, off+mm) of x, both thread counts */
    for (size_t q = 0; q < sizeof ms / sizeof ms[0] && !bad; q++) {
        int mm = ms[q];
        for (int off = 0; off <= MAXM - mm && !bad; off += (MAXM - mm) / 2 + 1) {
            ea_k_matmul(q % 2 ? c1 : c2, &w.t, x + (size_t)off * k, mm, y);
            for (int i = 0; i < mm; i++)
                if (memcmp(y + (size_t)i * n, ybig + (size_t)(off + i) * n, (size_t)n * sizeof(float))) {
                    fprintf(stderr, "  %s %s n=%d k=%d: row %d in batch m=%d at offset %d differs\n", isa,
                            ea_dtypes[dt].name, n, k, off + i, mm, off);
                    bad = 1;
                    break;
                }
        }
    }
    if (yout) memcpy(yout, ybig, (size_t)MAXM * n * sizeof(float));
    free(x);
    free(yref);
    free(ybig);
    free(y);
    wmat_free(&w);
    return bad;
}

typedef struct {
    ea_dtype dt;
    int n, k;
} shape;

static const shape shapes[] = {
    {EA_F32, 37, 67},    {EA_F32, 75, 160},   {EA_F16, 37, 67},    {EA_F16, 131, 33},   {EA_BF16, 37, 67},
    {EA_BF16, 75, 160},  {EA_BF16, 131, 1},   {EA_BF16, 67, 1024}, {EA_BF16, 33, 31},   {EA_Q8_0, 37, 32},
    {EA_Q8_0, 75, 96},   {EA_Q8_0, 131, 544}, {EA_Q8_0, 33, 1024}, {EA_Q8_0, 9, 416},
    /* a chunk of 21 rows: the avx2 decode loops' pairs of streams, an odd group, a short last group / row */
    {EA_Q8_0, 53, 96}, {EA_BF16, 53, 160}, {EA_F16, 53, 160}, {EA_F32, 53, 160},
    /* whole Fx4 groups to the last row, k ending in the first half of a 32-step: the batch
     * tiles' last step on a copy has no second half (reading one runs past the copy's end) */
    {EA_BF16, 36, 40},
};
#define NSH (int)(sizeof shapes / sizeof shapes[0])

static ea_pool *pool2;
static float *ysave[NISA][NSH]; /* per ISA, per shape: the 70-row result */

TEST(every_isa_matches_ref_and_is_batch_invariant) {
    int ran = 0;
    for (int a = 0; a < NISA; a++) {
        if (!ea_k_isa_supported(isas[a])) {
            fprintf(stderr, "  (skipping %s: not supported here)\n", isas[a]);
            continue;
        }
        ea_kctx *c1 = NULL, *c2 = NULL;
        CHECK_EQ(ea_kctx_create(NULL, MAXM, 1024, &c1), EA_OK);
        CHECK_EQ(ea_kctx_create(pool2, MAXM, 1024, &c2), EA_OK);
        CHECK_EQ(ea_kctx_set_isa(c1, isas[a]), EA_OK);
        CHECK_EQ(ea_kctx_set_isa(c2, isas[a]), EA_OK);
        CHECK_STREQ(ea_kctx_isa(c2), isas[a]);
        for (int s = 0; s < NSH; s++) {
            ysave[a][s] = malloc((size_t)MAXM * shapes[s].n * sizeof(float));
            rng = 1234567u + (uint64_t)s; /* same data for every ISA */
            int bad = check_one(c1, c2, isas[a], shapes[s].dt, shapes[s].n, shapes[s].k, ysave[a][s]);
            if (bad) {
                ea_kctx_destroy(c1);
                ea_kctx_destroy(c2);
            }
            CHECK(!bad);
        }
        ea_kctx_destroy(c1);
        ea_kctx_destroy(c2);
        ran++;
    }
    CHECK(ran >= 1);
}

TEST(scalar_avx2_avx512_same_bits_q8_same_bits_everywhere) {
    for (int s = 0; s < NSH; s++) {
        for (int a = 1; a < NISA; a++) {
            if (!ysave[0][s] || !ysave[a][s]) continue;
            int must = shapes[s].dt == EA_Q8_0 || a < 3 || shapes[s].dt != EA_BF16;
            if (!must) continue;
            if (memcmp(ysave[0][s], ysave[a][s], (size_t)MAXM * shapes[s].n * sizeof(float)))
                FAIL_("%s %s n=%d k=%d: differs from scalar", isas[a], ea_dtypes[shapes[s].dt].name, shapes[s].n,
                      shapes[s].k);
        }
    }
}

/* A batch of mixed products (as a MoE layer issues) == each product alone,
 * bit for bit, also when the batch must be cut into groups (small scratch)
 * and when products share their activations (gate and up: prepared once). */
TEST(batch_equals_single_calls) {
    static const struct {
        ea_dtype dt;
        int n, k, m, share; /* share: same x as the product before */
    } ps[] = {{EA_BF16, 75, 160, 5, 0}, {EA_BF16, 77, 160, 5, 1}, {EA_Q8_0, 37, 96, 17, 0}, {EA_Q8_0, 38, 96, 17, 1},
              {EA_BF16, 40, 64, 0, 0}, {EA_F32, 33, 67, 1, 0}, {EA_Q8_0, 131, 544, 3, 0}, {EA_BF16, 64, 1024, 33, 0},
              {EA_F16, 9, 31, 2, 0},
              /* these overflow the scratch of a max_m = 33 context: q8 after 1, AMX after 6 */
              {EA_Q8_0, 20, 1024, 33, 0}, {EA_Q8_0, 21, 1024, 33, 0}, {EA_BF16, 24, 1024, 33, 0},
              {EA_BF16, 24, 1024, 33, 1}, {EA_BF16, 24, 1024, 33, 0}, {EA_BF16, 24, 1024, 33, 0},
              {EA_BF16, 24, 1024, 33, 1}, {EA_BF16, 24, 1024, 33, 0}, {EA_BF16, 24, 1024, 33, 0},
              {EA_BF16, 24, 1024, 33, 0}, {EA_Q8_0, 24, 1024, 33, 0}, {EA_Q8_0, 25, 1024, 33, 1}};
    enum { NP = sizeof ps / sizeof ps[0] };
    wmat w[NP];
    float *x[NP], *y1[NP], *yb[NP];
    ea_k_mm mm[NP];
    for (int q = 0; q < NP; q++) {
        wmat_make(&w[q], ps[q].dt, ps[q].n, ps[q].k);
        x[q] = malloc((size_t)(ps[q].m + 1) * ps[q].k * sizeof(float));
        for (int e = 0; e < ps[q].m * ps[q].k; e++) x[q][e] = frand();
        y1[q] = calloc((size_t)(ps[q].m + 1) * ps[q].n, sizeof(float));
        yb[q] = calloc((size_t)(ps[q].m + 1) * ps[q].n, sizeof(float));
        mm[q] = (ea_k_mm){&w[q].t, ps[q].share ? mm[q - 1].x : x[q], ps[q].m, yb[q]};
    }
    int bad = 0;
    for (int a = 0; a < NISA && !bad; a++) {
        if (!ea_k_isa_supported(isas[a])) continue;
        for (int big = 0; big < 4 && !bad; big++) {
            /* big & 2: every product cut to <= 16 rows, the decode case (activations prepared per thread) */
            for (int q = 0; q < NP; q++) mm[q].m = big & 2 && ps[q].m > 16 ? 16 : ps[q].m;
            ea_kctx *c = NULL;
            /* max_m 33: the batch needs more scratch than one product -> several groups */
            if (ea_kctx_create(pool2, big & 1 ? 128 : 33, 1024, &c) != EA_OK || ea_kctx_set_isa(c, isas[a]) != EA_OK) {
                bad = 1;
                break;
            }
            for (int q = 0; q < NP; q++) ea_k_matmul(c, &w[q].t, mm[q].x, mm[q].m, y1[q]);
            uint64_t a0 = ea_alloc_count();
            ea_k_matmul_batch(c, mm, NP);
            if (ea_alloc_count() != a0) bad = 1;
            for (int q = 0; q < NP; q++)
                if (memcmp(y1[q], yb[q], (size_t)mm[q].m * ps[q].n * sizeof(float))) {
                    fprintf(stderr, "  %s: batch member %d differs from a single call\n", isas[a], q);
                    bad = 1;
                }
            ea_kctx_destroy(c);
        }
    }
    for (int q = 0; q < NP; q++) {
        wmat_free(&w[q]);
        free(x[q]);
        free(y1[q]);
        free(yb[q]);
    }
    CHECK(!bad);
}

/* A kernel on its packed copy (avx2: Q8_0x8 and Fx4, avx512: Q8_0x16, avx512_bf16: Fx4) == on
 * the rows, bit for bit, at every batch size and on row views (a view keeps
 * the copy only from a group's first row). */
TEST(packed_copy_same_bits_as_rows) {
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_BF16, .n_dims = 2, .shape = {8, 64}}, 8), 0);
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_Q8_0, .n_dims = 2, .shape = {9, 64}}, 8), 2 * 576);
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_Q8_0, .n_dims = 2, .shape = {17, 64}}, 16), 2 * 1088);
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_Q8_0, .n_dims = 2, .shape = {9, 64}}, 4), 0);
    /* Fx4: 4-row groups, k padded to 16: 3 groups x 3 steps x 64 elements */
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_BF16, .n_dims = 2, .shape = {9, 33}}, 4), 3 * 3 * 64 * 2);
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_F32, .n_dims = 2, .shape = {4, 16}}, 4), 64 * 4);
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_F16, .n_dims = 1, .shape = {64}}, 4), 0); /* a vector */
    CHECK_EQ(ea_k_packed_bytes(&(ea_tensor){.dtype = EA_F16, .n_dims = 2, .shape = {8, 64}}, 8), 0);
    static const struct {
        const char *isa;
        int q8; /* 1: the q8_0 shapes, 0: the f32/f16/bf16 ones */
        int rows;
    } lay[] = {{"avx2", 1, EA_Q8X8_ROWS},
               {"avx512", 1, EA_Q8X16_ROWS},
               {"avx2", 0, EA_FX4_ROWS},
               {"avx512_bf16", 0, EA_FX4_ROWS}}; /* bf16 only: its f32 / f16 read the rows */
    static const int NL = (int)(sizeof lay / sizeof lay[0]);
    static const int sm[] = {1, 2, 5, 16, 17, 65};
    int bad = 0, ran = 0;
    for (int L = 0; L < NL && !bad; L++) {
        ea_kctx *c = NULL, *c1 = NULL; /* c1: one thread */
        if (!ea_k_isa_supported(lay[L].isa) || ea_kctx_create(pool2, MAXM, 1024, &c) != EA_OK ||
            ea_kctx_set_isa(c, lay[L].isa) != EA_OK) {
            fprintf(stderr, "  (skipping %s: not supported here)\n", lay[L].isa);
            ea_kctx_destroy(c);
            continue;
        }
        if (ea_kctx_create(NULL, MAXM, 1024, &c1) != EA_OK || ea_kctx_set_isa(c1, lay[L].isa) != EA_OK) bad = 1;
        int rows = lay[L].rows;
        for (int s = 0; s < NSH && !bad; s++) {
            if ((shapes[s].dt == EA_Q8_0) != lay[L].q8) continue;
            int n = shapes[s].n, k = shapes[s].k;
            const char *dn = ea_dtypes[shapes[s].dt].name;
            wmat w;
            wmat_make(&w, shapes[s].dt, n, k);
            ea_tensor rows_t = w.t, packed_t = w.t;
            rows_t.packed = NULL;
            rows_t.packed_rows = 0;
            void *pk = ea_aligned_alloc(64, ea_k_packed_bytes(&w.t, rows));
            ea_k_pack(&w.t, rows, pk);
            packed_t.packed = pk;
            packed_t.packed_rows = rows;
            float *x = malloc((size_t)MAXM * k * sizeof(float));
            for (size_t q = 0; q < (size_t)MAXM * k; q++) x[q] = frand() * (q % 5 == 0 ? 3.0f : 1.0f);
            float *yp = malloc((size_t)MAXM * n * sizeof(float)), *yr = malloc((size_t)MAXM * n * sizeof(float));
            for (size_t q = 0; q < sizeof sm / sizeof sm[0] && !bad; q++) {
                ea_k_matmul(c, &packed_t, x, sm[q], yp);
                ea_k_matmul(c, &rows_t, x, sm[q], yr);
                if (memcmp(yp, yr, (size_t)sm[q] * n * sizeof(float))) {
                    fprintf(stderr, "  %s %s n=%d k=%d m=%d: packed != rows\n", lay[L].isa, dn, n, k, sm[q]);
                    bad = 1;
                }
            }
            /* decode inside a batch: 8 products of one token each, so that a product's
             * rows are cut at its end into chunks of any number of groups (the two-stream
             * decode loops' odd last group among them, e.g. n = 37) */
            enum { NB8 = 8 };
            ea_k_mm bm[NB8];
            float *yb = malloc((size_t)NB8 * n * sizeof(float));
            for (int q = 0; q < NB8; q++) bm[q] = (ea_k_mm){&packed_t, x + (size_t)q * k, 1, yb + (size_t)q * n};
            ea_k_matmul_batch(c, bm, NB8);
            for (int q = 0; q < NB8 && !bad; q++) {
                ea_k_matmul(c, &rows_t, x + (size_t)q * k, 1, yr);
                if (memcmp(yb + (size_t)q * n, yr, (size_t)n * sizeof(float))) {
                    fprintf(stderr, "  %s %s n=%d k=%d: batch of decodes, member %d: packed != rows\n", lay[L].isa,
                            dn, n, k, q);
                    bad = 1;
                }
            }
            free(yb);
            /* one thread, one x shared by copy / rows / copy: the rows kernel's use of the
             * scratch must not leave the third product the first one's per-X values */
            if (c1) {
                float *y3 = malloc((size_t)3 * 17 * n * sizeof(float));
                ea_k_mm b3[3] = {{&packed_t, x, 17, y3}, {&rows_t, x, 17, y3 + (size_t)17 * n},
                                 {&packed_t, x, 17, y3 + (size_t)34 * n}};
                ea_k_matmul_batch(c1, b3, 3);
                ea_k_matmul(c1, &rows_t, x, 17, yr);
                for (int q = 0; q < 3 && !bad; q++)
                    if (memcmp(y3 + (size_t)q * 17 * n, yr, (size_t)17 * n * sizeof(float))) {
                        fprintf(stderr, "  %s %s n=%d k=%d: copy/rows/copy on one x, member %d differs\n",
                                lay[L].isa, dn, n, k, q);
                        bad = 1;
                    }
                free(y3);
            }
            ea_k_matmul(c, &rows_t, x, MAXM, yr);
            for (int r0 = 3; r0 <= rows && r0 < n && !bad; r0 += rows - 3) { /* 3: the copy is dropped; rows: kept */
                int nr = n - r0 > 13 ? 13 : n - r0;
                ea_tensor v = ea_tensor_row_view(&packed_t, r0, nr);
                if ((v.packed != NULL) != (r0 == rows)) bad = 1;
                ea_k_matmul(c, &v, x, MAXM, yp);
                for (int i = 0; i < MAXM && !bad; i++)
                    if (memcmp(yp + (size_t)i * nr, yr + (size_t)i * n + r0, (size_t)nr * sizeof(float))) {
                        fprintf(stderr, "  %s %s n=%d k=%d: view of rows %d..%d differs\n", lay[L].isa, dn, n, k,
                                r0, r0 + nr);
                        bad = 1;
                    }
            }
            ran++;
            free(x);
            free(yp);
            free(yr);
            ea_aligned_free(pk);
            wmat_free(&w);
        }
        ea_kctx_destroy(c);
        ea_kctx_destroy(c1);
    }
    fprintf(stderr, "  %d shape/layout pairs\n", ran);
    CHECK(!bad);
}

/* X larger than half an L2 (EA__X_L2) and than the chunk's W rows: the
 * AVX-512 tiles run X rows outer (a prefill's router). Every row of a
 * 302-token product must equal that row alone: 37 W rows (the column edge,
 * 2 threads) and 600 (one thread, chunks of 320, 160, 64, 32 and 24 rows;
 * f32's 320 rows are more bytes than X, so that chunk runs W rows outer),
 * with the row edge (302 % 4). */
TEST(x_rows_outer_same_bits_as_one_row) {
    static const struct {
        const char *isa;
        ea_dtype dt;
    } cs[] = {{"avx512", EA_F32}, {"avx512", EA_BF16}, {"avx512_bf16", EA_BF16}, {"avx512_bf16", EA_F32}};
    static const int ns[] = {37, 600};
    enum { M = 302, K = 1024 };
    int bad = 0, ran = 0;
    for (size_t q = 0; q < sizeof cs / sizeof cs[0] && !bad; q++)
        for (int v = 0; v < 2 && !bad; v++) {
            int n = ns[v];
            ea_kctx *c = NULL;
            if (!ea_k_isa_supported(cs[q].isa)) continue;
            if (ea_kctx_create(v ? NULL : pool2, M, K, &c) != EA_OK || ea_kctx_set_isa(c, cs[q].isa) != EA_OK) {
                ea_kctx_destroy(c);
                bad = 1;
                break;
            }
            wmat w;
            wmat_make(&w, cs[q].dt, n, K);
            float *x = malloc((size_t)M * K * sizeof(float)), *y = malloc((size_t)M * n * sizeof(float));
            float *y1 = malloc((size_t)n * sizeof(float));
            for (size_t e = 0; e < (size_t)M * K; e++) x[e] = frand();
            ea_k_matmul(c, &w.t, x, M, y);
            for (int i = 0; i < M && !bad; i++) {
                ea_k_matmul(c, &w.t, x + (size_t)i * K, 1, y1);
                if (memcmp(y1, y + (size_t)i * n, (size_t)n * sizeof(float))) {
                    fprintf(stderr, "  %s %s n=%d: row %d of %d differs from the row alone\n", cs[q].isa,
                            ea_dtypes[cs[q].dt].name, n, i, M);
                    bad = 1;
                }
            }
            free(x);
            free(y);
            free(y1);
            wmat_free(&w);
            ea_kctx_destroy(c);
            ran++;
        }
    fprintf(stderr, "  %d isa/dtype/shape cases\n", ran);
    CHECK(!bad);
}

TEST(isa_selection) {
    ea_kctx *c = NULL;
    setenv("EAAS_ISA", "scalar", 1);
    CHECK_EQ(ea_kctx_create(NULL, 4, 64, &c), EA_OK);
    CHECK_STREQ(ea_kctx_isa(c), "scalar");
    ea_kctx_destroy(c);
    setenv("EAAS_ISA", "sse9", 1);
    CHECK_EQ(ea_kctx_create(NULL, 4, 64, &c), EA_ERR_INVALID_ARG);
    CHECK(c == NULL);
    CHECK(strstr(ea_errmsg(), "sse9") != NULL);
    unsetenv("EAAS_ISA");
    CHECK_EQ(ea_kctx_create(NULL, 4, 64, &c), EA_OK);
    CHECK_STREQ(ea_kctx_isa(c), ea_k_isa_best());
    CHECK_EQ(ea_kctx_set_isa(c, "bogus"), EA_ERR_INVALID_ARG);
    ea_kctx_destroy(c);
    ea_kctx_destroy(NULL);
    CHECK_EQ(ea_kctx_create(NULL, 0, 64, &c), EA_ERR_INVALID_ARG);
    /* the copies a context of each ISA reads (loaders and bench_matmul ask this) */
    CHECK_EQ(ea_k_pack_rows_isa("bogus", EA_BF16), 0);
    for (int d = 0; d < EA_N_DTYPES; d++) CHECK_EQ(ea_k_pack_rows_isa("scalar", (ea_dtype)d), 0);
    if (ea_k_isa_supported("avx2")) {
        CHECK_EQ(ea_k_pack_rows_isa("avx2", EA_F32), EA_FX4_ROWS);
        CHECK_EQ(ea_k_pack_rows_isa("avx2", EA_F16), EA_FX4_ROWS);
        CHECK_EQ(ea_k_pack_rows_isa("avx2", EA_BF16), EA_FX4_ROWS);
        CHECK_EQ(ea_k_pack_rows_isa("avx2", EA_Q8_0), EA_Q8X8_ROWS);
    }
    if (ea_k_isa_supported("avx512")) {
        CHECK_EQ(ea_k_pack_rows_isa("avx512", EA_BF16), 0); /* the AVX-512 F kernel reads the rows */
        int r = ea_k_pack_rows_isa("avx512", EA_Q8_0); /* 16 with VNNI, else the avx2 kernel's 8 */
        CHECK(r == EA_Q8X16_ROWS || r == EA_Q8X8_ROWS);
    }
    if (ea_k_isa_supported("avx512_bf16")) {
        CHECK_EQ(ea_k_pack_rows_isa("avx512_bf16", EA_BF16), EA_FX4_ROWS); /* decode reads the copy */
        CHECK_EQ(ea_k_pack_rows_isa("avx512_bf16", EA_F32), 0);
    }
}

int main(void) {
    if (ea_pool_create(2, &pool2) != EA_OK) return 1;
    RUN(every_isa_matches_ref_and_is_batch_invariant);
    RUN(scalar_avx2_avx512_same_bits_q8_same_bits_everywhere);
    RUN(batch_equals_single_calls);
    RUN(packed_copy_same_bits_as_rows);
    RUN(x_rows_outer_same_bits_as_one_row);
    RUN(isa_selection);
    for (int a = 0; a < NISA; a++)
        for (int s = 0; s < NSH; s++) free(ysave[a][s]);
    ea_pool_destroy(pool2);
    return TEST_SUMMARY();
}
