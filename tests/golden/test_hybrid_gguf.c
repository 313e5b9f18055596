/*
 * test_hybrid_gguf.c — the hybrid families (qwen3_next, qwen3_5_moe) in GGUF,
 * as llama.cpp's converter writes them (qwen3next / qwen35moe; `eaas make-model
 * --format gguf`), and in bf16 / f16 / q8_0, on tiny models of one seed:
 *   1. HF and GGUF of the same weights: bit-identical logits of a 64-token
 *      prompt (every row) in f32 and in bf16. In f16 the converter adds the 1 to
 *      the norms and takes -exp(A_log) in f16 (torch keeps an f16 tensor in f16),
 *      so f16 GGUF differs from f16 HF by that rounding: bounded, not equal.
 *   2. bf16, f16 (HF) and q8_0 (GGUF) against the f32 model's logits (which
 *      test_hybrid checks against the NumPy reference to 1e-6): per row
 *      max|diff| / max|logit| within the bounds of docs/forward.md.
 * A planted bug the test catches: the loader not undoing qwen35moe's value-head
 * reordering (untile_rows / untile_cols), or adding the 1 twice (tests/mutants.txt).
 * Needs EAAS_BIN, EA_BUILD (set by CTest).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "harness.h"
#include "serve/engine.h"

#define NP 64

static char work[1024];

/* make-model output path for (family, format, dtype), made once */
static const char *model(const char *fam, const char *fmt, const char *dt, char *out, size_t n) {
    int gg = !strcmp(fmt, "gguf");
    snprintf(out, n, "%s/hg-%s-%s%s", work, fam, dt, gg ? ".gguf" : "-hf");
    if ((gg && ea_file_exists(out)) || (!gg && ea_is_dir(out))) return out;
    if (ea_t_sh("\"%s\" make-model --family %s --preset tiny --seed 5 --format %s --dtype %s --out %s >/dev/null",
           getenv("EAAS_BIN"), fam, fmt, dt, out))
        return NULL;
    return out;
}

/* logits of the 64-token prompt (one call, every row), malloc'd; NULL on failure */
static float *logits(const char *path, int *V) {
    if (!path) return NULL;
    ea_engine_opts o = {.model_path = path, .threads = 2, .max_tokens = 256, .max_ctx = 128, .max_seqs = 2};
    ea_engine *e = NULL;
    if (ea_engine_create(&o, &e) != EA_OK) {
        fprintf(stderr, "  %s: %s\n", path, ea_errmsg());
        return NULL;
    }
    *V = e->m->cfg.vocab_size;
    int32_t tok[NP], pos[NP], seq[NP], rows[NP];
    uint64_t s = 77;
    for (int i = 0; i < NP; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % 5000u), pos[i] = i, seq[i] = 0, rows[i] = i;
    }
    float *lg = malloc(sizeof(float) * (size_t)*V * NP);
    ea_status st = ea_kv_seq_reserve(&e->kv, 0, NP);
    if (st == EA_OK) st = ea_forward_run(e->fw, NP, tok, pos, seq, NP, rows, lg);
    if (st != EA_OK) {
        fprintf(stderr, "  %s: %s\n", path, ea_errmsg());
        free(lg);
        lg = NULL;
    }
    ea_engine_destroy(e);
    return lg;
}

static void hf_vs_gguf(const char *fam, const char *dt) {
    char a[1200], b[1200];
    int V = 0, V2 = 0;
    float *h = logits(model(fam, "hf", dt, a, sizeof a), &V), *g = logits(model(fam, "gguf", dt, b, sizeof b), &V2);
    CHECK(h && g && V == V2);
    if (h && g && V == V2) {
        int same = memcmp(h, g, sizeof(float) * (size_t)V * NP) == 0, over;
        fprintf(stderr, "  %s %s: HF vs GGUF logits %s (max row error %.3g)\n", fam, dt,
                same ? "bit-identical" : "DIFFER", ea_t_rel_err(g, h, NP, V, 0, &over));
        CHECK(same);
    }
    free(h);
    free(g);
}

/* dtype model (fmt) against the f32 HF model: worst row within `bound`, at most max_over rows above
 * `tight` (routing near-ties: a token whose top-k set flips) */
static void vs_f32(const char *fam, const char *fmt, const char *dt, double tight, int max_over, double bound) {
    char a[1200], b[1200];
    int V = 0, V2 = 0;
    float *r = logits(model(fam, "hf", "f32", a, sizeof a), &V), *x = logits(model(fam, fmt, dt, b, sizeof b), &V2);
    CHECK(r && x && V == V2);
    if (r && x && V == V2) {
        int over;
        double err = ea_t_rel_err(x, r, NP, V, tight, &over);
        fprintf(stderr, "  %s %s (%s) vs f32: max row error %.3g, %d rows above %g\n", fam, dt, fmt, err, over, tight);
        CHECK(err <= bound);
        CHECK(over <= max_over);
    }
    free(r);
    free(x);
}

TEST(qwen3_next_hf_gguf_identical_f32) { hf_vs_gguf("qwen3_next", "f32"); }
TEST(qwen3_5_moe_hf_gguf_identical_f32) { hf_vs_gguf("qwen3_5_moe", "f32"); }
TEST(qwen3_next_hf_gguf_identical_bf16) { hf_vs_gguf("qwen3_next", "bf16"); }
TEST(qwen3_5_moe_hf_gguf_identical_bf16) { hf_vs_gguf("qwen3_5_moe", "bf16"); }
TEST(f16_gguf_within_f16_rounding_of_hf) {
    /* the converter's f16 (1 + w) and -exp(A_log): the f16 GGUF against the f16 HF model */
    const char *fams[2] = {"qwen3_next", "qwen3_5_moe"};
    for (int i = 0; i < 2; i++) {
        char a[1200], b[1200];
        int V = 0, V2 = 0, over;
        float *h = logits(model(fams[i], "hf", "f16", a, sizeof a), &V), *g = logits(model(fams[i], "gguf", "f16", b, sizeof b), &V2);
        CHECK(h && g && V == V2);
        if (h && g && V == V2) {
            double err = ea_t_rel_err(g, h, NP, V, 5e-3, &over);
            fprintf(stderr, "  %s f16: GGUF vs HF max row error %.3g\n", fams[i], err);
            CHECK(err > 0); /* the converter's f16 rounding is there */
            CHECK(err <= 5e-3);
        }
        free(h);
        free(g);
    }
}
TEST(dtypes_within_bounds) {
    const char *fams[2] = {"qwen3_next", "qwen3_5_moe"};
    for (int i = 0; i < 2; i++) {
        vs_f32(fams[i], "hf", "f16", 5e-3, 0, 5e-3);
        vs_f32(fams[i], "gguf", "f16", 5e-3, 0, 5e-3);
        vs_f32(fams[i], "hf", "bf16", 5e-2, 2, 0.15);
        vs_f32(fams[i], "gguf", "bf16", 5e-2, 2, 0.15);
        vs_f32(fams[i], "gguf", "q8_0", 5e-2, 4, 0.3);
    }
}

int main(void) {
    snprintf(work, sizeof work, "%s/golden-models", getenv("EA_BUILD") ? getenv("EA_BUILD") : ".");
    ea_t_sh("mkdir -p %s", work);
    RUN(qwen3_next_hf_gguf_identical_f32);
    RUN(qwen3_5_moe_hf_gguf_identical_f32);
    RUN(qwen3_next_hf_gguf_identical_bf16);
    RUN(qwen3_5_moe_hf_gguf_identical_bf16);
    RUN(f16_gguf_within_f16_rounding_of_hf);
    RUN(dtypes_within_bounds);
    return TEST_SUMMARY();
}
