/*
 * test_hybrid.c — the hybrid families qwen3_next and qwen3_5_moe (Gated
 * DeltaNet + gated full attention, model/deltanet.c) against the NumPy
 * reference (tests/reference/ref_hybrid.py), on tiny random models made by
 * `eaas make-model` (4 layers: 3 DeltaNet, 1 attention; 16 experts top-8,
 * shared expert):
 *   1. f32: logits of a 64-token prompt (every position; one chunk) within 1e-4
 *      of the reference relative to the row's largest |logit|, 32 greedy tokens
 *      identical; and a 100-token prompt (a full chunk, then 36 tokens) too.
 *   2. chunked prefill vs the same prompt fed one token per call (the recurrent
 *      form): within 1e-5.
 *   3. batch invariance: sequence A's logits alone == with 1, 7 and 31 other
 *      sequences, prefill and decode steps, 1 and 2 threads, every ISA here.
 *   4. a call that does not continue a sequence's state is refused; the decode
 *      loop allocates nothing.
 * Needs EAAS_BIN, EA_SRC, EA_BUILD (set by CTest).
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "serve/engine.h"

#define NG 32
#define NMAX 100

static char work[1024];

static void prompt(int32_t *tok, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((seed >> 33) % 5000u);
    }
}

static int make_model(const char *fam, char *out, size_t outsz) {
    snprintf(out, outsz, "%s/%s-f32", work, fam);
    if (ea_is_dir(out)) return 0;
    return ea_t_sh("\"%s\" make-model --family %s --preset tiny --seed 3 --format hf --dtype f32 --out %s >/dev/null",
              getenv("EAAS_BIN"), fam, out);
}

static ea_engine *engine(const char *model, int threads) {
    ea_engine_opts o = {.model_path = model, .threads = threads, .max_tokens = 1024, .max_ctx = 256, .max_seqs = 40};
    ea_engine *e = NULL;
    if (ea_engine_create(&o, &e) != EA_OK) {
        fprintf(stderr, "  engine: %s\n", ea_errmsg());
        return NULL;
    }
    return e;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) b = x[i] > x[b] ? i : b;
    return b;
}

/* np prompt tokens in one call (step = 0) or `step` tokens per call; every row's logits,
 * then NG greedy tokens decoded one per call. */
static ea_status run_c(ea_engine *e, const int32_t *tok, int np, int step, float *logits, int32_t *greedy) {
    int V = e->m->cfg.vocab_size;
    int32_t pos[NMAX], seq[NMAX], rows[NMAX];
    ea_kv_seq_release(&e->kv, 0);
    EA_TRY(ea_kv_seq_reserve(&e->kv, 0, np + NG + 1));
    for (int t0 = 0; t0 < np;) {
        int n = step > 0 && step < np - t0 ? step : np - t0;
        for (int i = 0; i < n; i++) pos[i] = t0 + i, seq[i] = 0, rows[i] = i;
        EA_TRY(ea_forward_run(e->fw, n, tok + t0, pos, seq, n, rows, logits + (size_t)t0 * V));
        t0 += n;
    }
    float *row = malloc(sizeof(float) * (size_t)V);
    int32_t cur = argmax(logits + (size_t)(np - 1) * V, V);
    ea_status s = EA_OK;
    for (int g = 0; g < NG && s == EA_OK; g++) {
        greedy[g] = cur;
        int32_t p = np + g, sq = 0, r0 = 0;
        s = ea_forward_run(e->fw, 1, &cur, &p, &sq, 1, &r0, row);
        cur = argmax(row, V);
    }
    free(row);
    return s;
}

static int read_ref(const char *dir, const int32_t *tok, int np, float *logits, int V, int32_t *greedy) {
    char toks[NMAX * 8] = "", *p = toks;
    for (int i = 0; i < np; i++) p += sprintf(p, "%s%d", i ? "," : "", tok[i]);
    char lf[1300], jf[1300];
    snprintf(lf, sizeof lf, "%s.ref%d.f32", dir, np);
    snprintf(jf, sizeof jf, "%s.ref%d.json", dir, np);
    if (!ea_file_exists(jf) &&
        ea_t_sh("/usr/bin/python3 %s/tests/reference/ref_forward.py --model %s --tokens %s --logits-out %s --greedy %d > %s",
           getenv("EA_SRC"), dir, toks, lf, NG, jf))
        return -1;
    char *data;
    size_t n;
    if (ea_read_file(lf, &data, &n) != EA_OK || n != sizeof(float) * (size_t)V * np) return -1;
    memcpy(logits, data, n);
    ea_free(data);
    json_t *j;
    if (ea_json_load_file(jf, &j) != EA_OK) return -1;
    json_t *g = json_object_get(j, "greedy");
    for (int i = 0; i < NG; i++) greedy[i] = (int32_t)json_integer_value(json_array_get(g, (size_t)i));
    json_decref(j);
    return 0;
}

static void check_reference(const char *fam, int np) {
    char dir[1200];
    CHECK_EQ(make_model(fam, dir, sizeof dir), 0);
    ea_engine *e = engine(dir, 2);
    CHECK(e != NULL);
    if (!e) return;
    int V = e->m->cfg.vocab_size;
    float *lc = malloc(sizeof(float) * (size_t)V * np), *lr = malloc(sizeof(float) * (size_t)V * np);
    int32_t tok[NMAX], gc[NG], gr[NG];
    prompt(tok, np, 99);
    ea_status s = run_c(e, tok, np, 0, lc, gc);
    if (s != EA_OK) fprintf(stderr, "  %s: %s\n", fam, ea_errmsg());
    CHECK_EQ(s, EA_OK);
    CHECK_EQ(read_ref(dir, tok, np, lr, V, gr), 0);
    double err = ea_t_rel_err(lc, lr, np, V, 0, NULL);
    int same = memcmp(gc, gr, sizeof gc) == 0;
    fprintf(stderr, "  %s f32, %d-token prompt vs reference: max row error %.3g; %d greedy tokens %s\n", fam, np, err,
            NG, same ? "identical" : "DIFFER");
    CHECK(err <= 1e-4);
    CHECK(same);
    free(lc);
    free(lr);
    ea_engine_destroy(e);
}

TEST(qwen3_next_f32_matches_reference) { check_reference("qwen3_next", 64); }
TEST(qwen3_5_moe_f32_matches_reference) { check_reference("qwen3_5_moe", 64); }
TEST(two_chunks_match_reference) {
    check_reference("qwen3_next", 100);
    check_reference("qwen3_5_moe", 100);
}

/* the prompt in one call (chunked form) vs one token per call (recurrent form) */
TEST(chunked_prefill_matches_recurrent_decode) {
    const char *fams[] = {"qwen3_next", "qwen3_5_moe"};
    for (int fi = 0; fi < 2; fi++) {
        char dir[1200];
        CHECK_EQ(make_model(fams[fi], dir, sizeof dir), 0);
        ea_engine *e = engine(dir, 2);
        CHECK(e != NULL);
        if (!e) return;
        int V = e->m->cfg.vocab_size;
        float *a = malloc(sizeof(float) * (size_t)V * 64), *b = malloc(sizeof(float) * (size_t)V * 64);
        int32_t tok[64], g1[NG], g2[NG];
        prompt(tok, 64, 5);
        CHECK_EQ(run_c(e, tok, 64, 0, a, g1), EA_OK);
        CHECK_EQ(run_c(e, tok, 64, 1, b, g2), EA_OK);
        double err = ea_t_rel_err(b, a, 64, V, 0, NULL);
        fprintf(stderr, "  %s: chunked prefill vs token-by-token: %.3g; greedy %s\n", fams[fi], err,
                memcmp(g1, g2, sizeof g1) ? "DIFFER" : "identical");
        CHECK(err <= 1e-5);
        CHECK(memcmp(g1, g2, sizeof g1) == 0);
        free(a);
        free(b);
        ea_engine_destroy(e);
    }
}

static int kept_vocab; /* vocabulary of the logits batch_invariance keeps */

/* Sequence A (40 prompt tokens, then 3 decode steps) alone and with `others` other
 * sequences (prompts of other lengths, then their own decode steps) in the same calls. */
static void batch_invariance(const char *model, int threads, const char *isa, float **keep) {
    if (isa && !ea_k_isa_supported(isa)) {
        fprintf(stderr, "  batch invariance: %s isa %s: not supported by this CPU, skipped\n", model, isa);
        return;
    }
    /* the matmul contexts read EAAS_ISA at create; the row-wise kernels (DeltaNet's among them) switch here */
    if (isa) setenv("EAAS_ISA", isa, 1);
    if (isa) CHECK_EQ(ea_k_ops_set_isa(isa), EA_OK);
    ea_engine *e = engine(model, threads);
    if (isa) unsetenv("EAAS_ISA");
    CHECK(e != NULL);
    if (!e) return;
    fprintf(stderr, "  batch invariance: %s, %d thread(s), isa %s\n", model, threads, ea_kctx_isa(e->kctx));
    int V = e->m->cfg.vocab_size;
    enum { NA = 40, ND = 3 };
    float *alone = malloc(sizeof(float) * (size_t)V * (NA + ND)), *in = malloc(sizeof(float) * (size_t)V * (NA + ND));
    int32_t *tok = malloc(sizeof(int32_t) * 1024), *pos = malloc(sizeof(int32_t) * 1024),
            *seq = malloc(sizeof(int32_t) * 1024), *rows = malloc(sizeof(int32_t) * 1024);
    int others[] = {0, 1, 7, 31};
    for (size_t oi = 0; oi < 4; oi++) {
        float *dst = oi == 0 ? alone : in;
        int lens[32];
        int n = 0;
        for (int q = 0; q <= others[oi]; q++) { /* A is slot q = 0 */
            int len = lens[q] = q == 0 ? NA : 3 + (q * 7) % 29;
            ea_kv_seq_release(&e->kv, q);
            CHECK_EQ(ea_kv_seq_reserve(&e->kv, q, len + ND), EA_OK);
            int32_t p[NA];
            prompt(p, len, q == 0 ? 11 : 100 + (uint64_t)q);
            for (int i = 0; i < len; i++) {
                tok[n] = p[i], pos[n] = i, seq[n] = q;
                if (q == 0) rows[i] = n;
                n++;
            }
        }
        CHECK_EQ(ea_forward_run(e->fw, n, tok, pos, seq, NA, rows, dst), EA_OK);
        for (int d = 0; d < ND; d++) { /* decode: one token of every sequence per call */
            n = 0;
            for (int q = 0; q <= others[oi]; q++) {
                tok[n] = 17 + d + q, pos[n] = lens[q] + d, seq[n] = q;
                n++;
            }
            int32_t r0 = 0;
            CHECK_EQ(ea_forward_run(e->fw, n, tok, pos, seq, 1, &r0, dst + (size_t)(NA + d) * V), EA_OK);
        }
        if (oi > 0 && memcmp(alone, in, sizeof(float) * (size_t)V * (NA + ND)) != 0) {
            fprintf(stderr, "  %s threads=%d: differs with %d others (max %.3g)\n", model, threads, others[oi],
                    ea_t_rel_err(in, alone, NA + ND, V, 0, NULL));
            ea_t_cur_failed = 1;
        }
    }
    if (keep) {
        kept_vocab = V;
        *keep = alone;
        alone = NULL;
    }
    free(alone); free(in); free(tok); free(pos); free(seq); free(rows);
    ea_engine_destroy(e);
    ea_k_ops_set_isa(NULL);
}

TEST(batch_invariance) {
    const char *isas[] = {"scalar", "avx2", "avx512"};
    const char *fams[] = {"qwen3_next", "qwen3_5_moe"};
    for (int fi = 0; fi < 2; fi++) {
        char dir[1200];
        CHECK_EQ(make_model(fams[fi], dir, sizeof dir), 0);
        float *first[3] = {NULL};
        for (int th = 1; th <= 2; th++)
            for (size_t i = 0; i < 3; i++) batch_invariance(dir, th, isas[i], th == 1 ? &first[i] : NULL);
        /* f32 weights: every ISA gives the scalar twins' bits, DeltaNet kernels included */
        for (size_t i = 1; i < 3; i++)
            if (first[0] && first[i] && memcmp(first[0], first[i], sizeof(float) * (size_t)kept_vocab * 43) != 0)
                FAIL_("%s: logits under %s differ from scalar", fams[fi], isas[i]);
        for (size_t i = 0; i < 3; i++) free(first[i]);
    }
}

TEST(call_must_continue_the_state) {
    char dir[1200];
    CHECK_EQ(make_model("qwen3_5_moe", dir, sizeof dir), 0);
    ea_engine *e = engine(dir, 1);
    CHECK(e != NULL);
    if (!e) return;
    int V = e->m->cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)V * 4);
    int32_t tok[4] = {1, 2, 3, 4}, pos[4] = {0, 1, 2, 3}, seq[4] = {0, 0, 0, 0}, rows[1] = {0};
    CHECK_EQ(ea_kv_seq_reserve(&e->kv, 0, 16), EA_OK);
    CHECK_EQ(ea_forward_run(e->fw, 4, tok, pos, seq, 1, rows, lg), EA_OK);
    int32_t p = 6; /* the state holds [0, 4) */
    CHECK_EQ(ea_forward_run(e->fw, 1, tok, &p, seq, 1, rows, lg), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "holds positions [0, 4)") != NULL);
    int32_t pos2[2] = {4, 6};
    CHECK_EQ(ea_forward_run(e->fw, 2, tok, pos2, seq, 1, rows, lg), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "positions 4 then 6") != NULL);
    /* a refused call leaves nothing behind: slot 0 then a slot out of range, then slot 0 alone continues */
    int32_t pos3[2] = {4, 0}, seq3[2] = {0, 99};
    CHECK_EQ(ea_forward_run(e->fw, 2, tok, pos3, seq3, 1, rows, lg), EA_ERR_RANGE);
    CHECK_EQ(ea_forward_run(e->fw, 1, tok, pos3, seq, 1, rows, lg), EA_OK);
    free(lg);
    ea_engine_destroy(e);
}

TEST(decode_loop_allocates_nothing) {
    char dir[1200];
    CHECK_EQ(make_model("qwen3_next", dir, sizeof dir), 0);
    ea_engine *e = engine(dir, 2);
    CHECK(e != NULL);
    if (!e) return;
    int V = e->m->cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)V * 4);
    int32_t tok[4] = {1, 2, 3, 4}, pos[4] = {0, 0, 0, 0}, seq[4] = {0, 1, 2, 3}, rows[4] = {0, 1, 2, 3};
    for (int q = 0; q < 4; q++) CHECK_EQ(ea_kv_seq_reserve(&e->kv, q, 64), EA_OK);
    CHECK_EQ(ea_forward_run(e->fw, 4, tok, pos, seq, 4, rows, lg), EA_OK);
    uint64_t before = ea_alloc_count();
    for (int step = 1; step < 40; step++) {
        for (int q = 0; q < 4; q++) pos[q] = step;
        CHECK_EQ(ea_forward_run(e->fw, 4, tok, pos, seq, 4, rows, lg), EA_OK);
    }
    CHECK_EQ(ea_alloc_count(), before);
    free(lg);
    ea_engine_destroy(e);
}

int main(void) {
    snprintf(work, sizeof work, "%s/golden-models", getenv("EA_BUILD") ? getenv("EA_BUILD") : ".");
    ea_t_sh("mkdir -p %s", work);
    RUN(qwen3_next_f32_matches_reference);
    RUN(qwen3_5_moe_f32_matches_reference);
    RUN(two_chunks_match_reference);
    RUN(chunked_prefill_matches_recurrent_decode);
    RUN(call_must_continue_the_state);
    RUN(decode_loop_allocates_nothing);
    RUN(batch_invariance);
    return TEST_SUMMARY();
}
