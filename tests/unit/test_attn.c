/* test_attn.c — the attention tile kernel (kernels/attn.h): every variant this
 * CPU runs (scalar, AVX2, AVX-512, selected with ea_k_ops_set_isa; absent ISAs
 * skipped) gives the bits of the plain twin; a row's output never depends on the other rows of its tile
 * (tiles of 1, 3, 8, 9 and 16 rows: one or two AVX2 halves); both agree with
 * a double-precision softmax attention. Paged caches with odd block sizes and
 * shuffled blocks, key/value widths with and without 8- and 16-element tails,
 * MLA's values inside the keys. f16 and bf16 caches give the bits of an f32
 * cache holding the same (rounded) values. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/attn.h"
#include "tensor/dtype.h"
#include "ops_variants.h"

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2 - 1);
}

typedef struct {
    int dk, dv, bs, n_pos, shared_v; /* shared_v: values are the first dv key elements (MLA) */
    float *k, *v;
    int32_t blocks[64];
    ea_k_attn_kv kv;
} cache;

static void cache_make(cache *c, int dk, int dv, int bs, int n_pos, int shared_v, uint64_t *s) {
    memset(c, 0, sizeof *c);
    c->dk = dk, c->dv = dv, c->bs = bs, c->n_pos = n_pos, c->shared_v = shared_v;
    int nb = (n_pos + bs - 1) / bs;
    /* blocks in reverse order with a gap, so position order != memory order; a block holds this
     * head's rows and, after them, another head's (model/kv_cache.h), so k_block != bs * k_stride */
    for (int b = 0; b < nb; b++) c->blocks[b] = 2 * (nb - 1 - b) + 1;
    size_t rows = (size_t)(2 * nb + 2) * bs * 2;
    c->k = malloc(rows * dk * sizeof(float));
    c->v = malloc(rows * dv * sizeof(float));
    for (size_t i = 0; i < rows * dk; i++) c->k[i] = rnd(s) * 2;
    for (size_t i = 0; i < rows * dv; i++) c->v[i] = rnd(s);
    c->kv = (ea_k_attn_kv){.dk = dk, .dv = dv, .scale = 1.0f / sqrtf((float)dk), .k = c->k,
                           .v = shared_v ? c->k : c->v, .k_stride = (size_t)dk,
                           .v_stride = shared_v ? (size_t)dk : (size_t)dv, .k_block = 2 * (size_t)bs * dk,
                           .v_block = 2 * (size_t)bs * (shared_v ? dk : dv), .blocks = c->blocks, .block_size = bs};
}

static const float *key_at(const cache *c, int p) {
    return (const float *)c->kv.k + (size_t)c->blocks[p / c->bs] * c->kv.k_block + (size_t)(p % c->bs) * c->kv.k_stride;
}
static const float *val_at(const cache *c, int p) {
    return (const float *)c->kv.v + (size_t)c->blocks[p / c->bs] * c->kv.v_block + (size_t)(p % c->bs) * c->kv.v_stride;
}

/* double-precision softmax attention of one row */
static void exact(const cache *c, const float *q, int last, double *o) {
    double *s = malloc(sizeof(double) * (last + 1)), m = -INFINITY, z = 0;
    for (int j = 0; j <= last; j++) {
        double a = 0;
        for (int d = 0; d < c->dk; d++) a += (double)q[d] * key_at(c, j)[d];
        s[j] = a * c->kv.scale;
        m = s[j] > m ? s[j] : m;
    }
    for (int j = 0; j <= last; j++) z += s[j] = exp(s[j] - m);
    for (int d = 0; d < c->dv; d++) {
        double a = 0;
        for (int j = 0; j <= last; j++) a += s[j] * val_at(c, j)[d];
        o[d] = a / z;
    }
    free(s);
}

/* One configuration: a 16-row tile with varied lasts vs the twin, vs rows
 * alone, and vs the exact result. Returns the worst relative error. */
static int check_config(int dk, int dv, int bs, int n_pos, int shared_v, double *worst) {
    uint64_t s = (uint64_t)(dk * 131 + dv * 7 + bs);
    cache c;
    cache_make(&c, dk, dv, bs, n_pos, shared_v, &s);
    float *q[16], *o1[16], *o2[16], *o3[16];
    int32_t last[16];
    for (int r = 0; r < 16; r++) {
        q[r] = malloc(sizeof(float) * dk);
        o1[r] = malloc(sizeof(float) * dv), o2[r] = malloc(sizeof(float) * dv), o3[r] = malloc(sizeof(float) * dv);
        for (int d = 0; d < dk; d++) q[r][d] = rnd(&s) * 3;
        /* groups of 4 rows ending at the same key (GQA heads of one token), one odd row */
        last[r] = n_pos - 1 - (r / 4) * 3 - (r == 13 ? 5 : 0);
        if (last[r] < 0) last[r] = 0;
    }
    size_t ns = ea_k_attend_scratch(dk, dv, n_pos);
    float *scr = aligned_alloc(64, ((ns * sizeof(float)) + 63) & ~(size_t)63);
    int ok = 1;
    ea_k_attend(&c.kv, 16, (const float *const *)q, last, o1, scr);
    ea_k_attend_ref(&c.kv, 16, (const float *const *)q, last, o2, scr);
    *worst = 0;
    for (int r = 0; r < 16 && ok; r++) {
        if (memcmp(o1[r], o2[r], sizeof(float) * dv)) ok = 0, fprintf(stderr, "  row %d: dispatched != ref\n", r);
        /* the row alone, and first in tiles of 3, 8 and 9 */
        static const int sizes[] = {1, 3, 8, 9};
        for (int t = 0; t < 4; t++) {
            if (r + sizes[t] > 16) continue;
            ea_k_attend(&c.kv, sizes[t], (const float *const *)&q[r], &last[r], &o3[r], scr);
            if (memcmp(o1[r], o3[r], sizeof(float) * dv))
                ok = 0, fprintf(stderr, "  row %d: in a tile of %d != in a tile of 16\n", r, sizes[t]);
        }
        double *ex = malloc(sizeof(double) * dv), mx = 0, err = 0;
        exact(&c, q[r], last[r], ex);
        for (int d = 0; d < dv; d++) mx = fabs(ex[d]) > mx ? fabs(ex[d]) : mx;
        for (int d = 0; d < dv; d++) err = fabs(o1[r][d] - ex[d]) > err ? fabs(o1[r][d] - ex[d]) : err;
        if (err / mx > *worst) *worst = err / mx;
        free(ex);
    }
    for (int r = 0; r < 16; r++) free(q[r]), free(o1[r]), free(o2[r]), free(o3[r]);
    free(scr), free(c.k), free(c.v);
    return ok;
}

TEST(tile_matches_ref_alone_and_exact) {
    static const int cfg[][5] = {
        {64, 64, 16, 100, 0},  /* qwen3 / mixtral heads */
        {64, 64, 5, 37, 0},    /* odd block size */
        {128, 128, 16, 70, 0}, /* wider heads */
        {24, 40, 3, 29, 0},    /* 16-element tails in both widths */
        {19, 37, 4, 23, 0},    /* 8-element tails in both widths */
        {5, 13, 1, 17, 0},     /* narrow; one position per block */
        {288, 256, 16, 90, 1}, /* MLA: latent 256 + rope 32, value = latent */
        {64, 64, 16, 1, 0},    /* a single key */
        {64, 64, 16, 76, 0},   /* rows 12 and 13 (lasts 66, 61) end in different 64-key chunks of the values */
        {160, 128, 16, 200, 1}, /* MLA-like, four chunks */
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        double worst;
        int ok = check_config(cfg[i][0], cfg[i][1], cfg[i][2], cfg[i][3], cfg[i][4], &worst);
        fprintf(stderr, "  dk %d dv %d block %d keys %d: worst relative error vs double %.2e\n", cfg[i][0], cfg[i][1],
                cfg[i][2], cfg[i][3], worst);
        CHECK(ok);
        CHECK(worst < 2e-6);
    }
}

/* f16 / bf16 caches: every variant gives, on a cache of rounded values, the
 * bits of an f32 cache holding the same values (widening is exact), and the
 * twin's bits on the same half cache. */
static int check_half(int dk, int dv, int bs, int n_pos, int shared_v, ea_dtype dt) {
    uint64_t s = (uint64_t)(dk * 31 + dv * 5 + bs + dt);
    cache c;
    cache_make(&c, dk, dv, bs, n_pos, shared_v, &s);
    int nb = (n_pos + bs - 1) / bs;
    size_t rows = (size_t)(2 * nb + 2) * bs * 2, nk = rows * dk, nv = rows * dv;
    uint16_t *hk = malloc(nk * 2), *hv = malloc(nv * 2);
    /* round the f32 cache in place, keep the half copy */
    ea_dtypes[dt].from_f32(c.k, hk, nk);
    ea_dtypes[dt].to_f32(hk, c.k, nk);
    ea_dtypes[dt].from_f32(c.v, hv, nv);
    ea_dtypes[dt].to_f32(hv, c.v, nv);
    ea_k_attn_kv h = c.kv;
    h.dtype = (int)dt;
    h.k = hk;
    h.v = shared_v ? (const void *)hk : (const void *)hv;
    float *q[16], *of[16], *oh[16], *or[16];
    int32_t last[16];
    for (int r = 0; r < 16; r++) {
        q[r] = malloc(sizeof(float) * dk);
        of[r] = malloc(sizeof(float) * dv), oh[r] = malloc(sizeof(float) * dv), or[r] = malloc(sizeof(float) * dv);
        for (int d = 0; d < dk; d++) q[r][d] = rnd(&s) * 3;
        last[r] = n_pos - 1 - (r / 4) * 3;
        if (last[r] < 0) last[r] = 0;
    }
    size_t ns = ea_k_attend_scratch(dk, dv, n_pos);
    float *scr = aligned_alloc(64, ((ns * sizeof(float)) + 63) & ~(size_t)63);
    int ok = 1;
    static const int sizes[] = {16, 9, 1};
    for (int t = 0; t < 3; t++) {
        ea_k_attend(&c.kv, sizes[t], (const float *const *)q, last, of, scr);
        ea_k_attend(&h, sizes[t], (const float *const *)q, last, oh, scr);
        ea_k_attend_ref(&h, sizes[t], (const float *const *)q, last, or, scr);
        for (int r = 0; r < sizes[t]; r++) {
            if (memcmp(of[r], oh[r], sizeof(float) * dv))
                ok = 0, fprintf(stderr, "  %s tile %d row %d: != f32 cache of the same values\n", ea_dtypes[dt].name,
                                sizes[t], r);
            if (memcmp(or[r], oh[r], sizeof(float) * dv))
                ok = 0, fprintf(stderr, "  %s tile %d row %d: dispatched != ref\n", ea_dtypes[dt].name, sizes[t], r);
        }
    }
    for (int r = 0; r < 16; r++) free(q[r]), free(of[r]), free(oh[r]), free(or[r]);
    free(scr), free(c.k), free(c.v), free(hk), free(hv);
    return ok;
}

TEST(half_caches_match_f32_of_same_values) {
    static const int cfg[][5] = {
        {64, 64, 16, 100, 0}, {128, 128, 16, 70, 0}, {24, 40, 3, 29, 0}, {19, 37, 4, 23, 0},
        {5, 13, 1, 17, 0},    {288, 256, 16, 90, 1}, {64, 64, 16, 1, 0}, {64, 64, 16, 76, 0},
    };
    const ea_dtype dts[] = {EA_F16, EA_BF16};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++)
            CHECK(check_half(cfg[i][0], cfg[i][1], cfg[i][2], cfg[i][3], cfg[i][4], dts[d]));
}

int main(void) {
    for (int i = 0; i < OPS_N_VARIANTS; i++) {
        int sel = ops_variant_select(i);
        if (sel < 0) return 1;
        if (sel) {
            RUN(tile_matches_ref_alone_and_exact);
            RUN(half_caches_match_f32_of_same_values);
        }
    }
    return TEST_SUMMARY();
}
