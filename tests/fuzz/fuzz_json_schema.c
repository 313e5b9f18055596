/*
 * fuzz_json_schema.c — fuzz target for the JSON Schema, regex and GBNF front ends
 * of the grammar engine and the matcher behind them.
 *
 * Input: JSON text (a schema as a client would send it in response_format)
 * or, when it is not JSON, GBNF grammar text, optionally followed by a NUL byte and bytes fed to the matcher. A schema
 * that compiles is matched against those bytes one byte at a time and as a
 * whole, and its mask is computed over a small fixed vocabulary (ASCII,
 * JSON punctuation runs, multi-byte and split UTF-8 tokens) and compared
 * with the reference mask (every token through the matcher). The schema's
 * "pattern" strings also go through the regex front end alone. Any
 * ea_status is fine; crashes, leaks, sanitizer reports and a mask that
 * differs from the reference (abort) are findings.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DEA_FUZZ=ON -DEA_SANITIZE=ON
 *   cmake --build build-fuzz -j2 --target fuzz_json_schema_libfuzzer
 *   build-fuzz/tests/fuzz_json_schema_libfuzzer -max_total_time=300 -max_len=4096 \
 *       /tmp/fz_js tests/fuzz/corpus/fuzz_json_schema
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static const char *const VOCAB[] = {
    "{", "}", "[", "]", ":", ",", "\"", "\\", "a", "b", "z", "0", "1", "9", "-", ".", "e", "E", "+", " ", "\n",
    "t", "r", "u", "f", "l", "s", "n", "{\"", "\":", "\",\"", "\"}", "\"]", "],", "true", "false", "null", "12",
    "ab", "abc\"", "\xCE", "\xB1", "\xCE\xB1", "\xE2\x82", "\xAC", "\xF0\x9F\x98\x80", "2024-", "01", "T", "Z",
    "\\\"", "\\u00", "ff", "x\"", "@", "é", "中文"};
#define N_VOCAB (int)(sizeof VOCAB / sizeof *VOCAB)

static ea_token_index *vocab(void) {
    static ea_token_index *ix;
    if (!ix) {
        size_t lens[N_VOCAB];
        for (int i = 0; i < N_VOCAB; i++) lens[i] = strlen(VOCAB[i]);
        if (ea_token_index_create(VOCAB, lens, N_VOCAB, &ix) != EA_OK) abort();
    }
    return ix;
}

static void run(const ea_grammar *g, const uint8_t *text, size_t n) {
    ea_gmatcher *m;
    if (ea_gmatcher_create(g, &m) != EA_OK) return;
    uint64_t a[(N_VOCAB + 63) / 64], b[(N_VOCAB + 63) / 64];
    for (size_t i = 0; i <= n; i++) {
        /* the fast mask must equal the reference (unless a run passed the stack limit);
         * not with more than 64 stacks, where the reference is too slow to fuzz */
        if (i % 3 == 0 && ea_gmatcher_n_stacks(m) <= 64 && ea_gmatcher_mask(m, vocab(), a) == EA_OK && ea_gmatcher_mask_ref(m, vocab(), b) == EA_OK &&
            memcmp(a, b, sizeof a) != 0)
            abort();
        if (i == n || ea_gmatcher_accept_bytes(m, (const char *)text + i, 1) != EA_OK) break;
    }
    (void)ea_gmatcher_accepting(m);
    ea_gmatcher_reset(m);
    (void)ea_gmatcher_accept_bytes(m, (const char *)text, n);
    ea_gmatcher_destroy(m);
}

static void patterns(const json_t *v, int depth) {
    if (depth > 16) return;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (strcmp(k, "pattern") == 0 && json_is_string(x)) {
                ea_grammar *g = NULL;
                char err[128];
                if (ea_grammar_from_regex(json_string_value(x), json_string_length(x), &g, err, sizeof err) == EA_OK) {
                    run(g, (const uint8_t *)"abc123", 6);
                    ea_grammar_destroy(g);
                }
            }
            patterns(x, depth + 1);
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) patterns(json_array_get(v, i), depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t jl = nul ? (size_t)(nul - data) : size;
    const uint8_t *text = nul ? nul + 1 : (const uint8_t *)"";
    size_t tl = nul ? size - jl - 1 : 0;
    json_error_t je;
    json_t *s = json_loadb((const char *)data, jl, JSON_DECODE_ANY, &je);
    if (!s) { /* not JSON: a GBNF grammar */
        ea_grammar *g = NULL;
        char err[256];
        if (ea_grammar_from_gbnf((const char *)data, jl, &g, err, sizeof err) == EA_OK) {
            run(g, text, tl);
            ea_grammar_destroy(g);
        }
        return 0;
    }
    patterns(s, 0);
    ea_grammar *g = NULL;
    char ep[256], err[256];
    ea_json_grammar_opts o = {.max_depth = 3};
    if (ea_grammar_from_json_schema(s, "schema", &o, &g, ep, sizeof ep, err, sizeof err) == EA_OK) {
        run(g, text, tl);
        ea_grammar_destroy(g);
    }
    json_decref(s);
    return 0;
}
