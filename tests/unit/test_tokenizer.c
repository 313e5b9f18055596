/*
 * test_tokenizer.c — the tokenizer's pieces on small hand-made tokenizers:
 * merge order and tie-breaking, both merge forms, added-token splitting
 * (longest match, special vs not, lstrip/rstrip), Split behaviors, \s as
 * Unicode White_Space, NFC, ByteLevel prefix space, post-processor BOS,
 * ignore_merges, the streaming decoder on split multi-byte characters, GGUF
 * vocab arrays, and load errors that name the field.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "harness.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer.h"

/* ---- building tokenizer.json text ---- */

/* The byte-level spelling of raw bytes (GPT-2 bytes_to_unicode). */
static void bl(const char *raw, char *out) {
    int map[256], n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        map[b] = printable ? b : 256 + n++;
    }
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) o += (size_t)ea__utf8_encode((uint32_t)map[*p], (uint8_t *)out + o);
    out[o] = 0;
}

/* vocab: the 256 bytes (ids 0..255 in byte order) then `extra` words (raw
 * text, ids 256...); merges of raw "left right" pairs. Returns a new JSON
 * object (caller decrefs); pre_tokenizer/normalizer/added set by caller. */
static json_t *make_tok(const char *const *extra, const char *const *merges, int array_merges) {
    json_t *vocab = json_object();
    char buf[256];
    for (int b = 0; b < 256; b++) {
        char raw[2] = {(char)b, 0};
        if (b == 0) {
            /* byte 0 spelled directly: bl() stops at NUL */
            ea__utf8_encode(256, (uint8_t *)buf);
            buf[2] = 0;
        } else {
            bl(raw, buf);
        }
        json_object_set_new(vocab, buf, json_integer(b));
    }
    int id = 256;
    for (int i = 0; extra && extra[i]; i++) {
        bl(extra[i], buf);
        json_object_set_new(vocab, buf, json_integer(id++));
    }
    json_t *m = json_array();
    for (int i = 0; merges && merges[i]; i++) {
        char l[64], r[64], lb[120], rb[120];
        const char *sp = strchr(merges[i], ' ');
        snprintf(l, sizeof l, "%.*s", (int)(sp - merges[i]), merges[i]);
        snprintf(r, sizeof r, "%s", sp + 1);
        bl(l, lb);
        bl(r, rb);
        if (array_merges) {
            json_array_append_new(m, json_pack("[s,s]", lb, rb));
        } else {
            snprintf(buf, sizeof buf, "%s %s", lb, rb);
            json_array_append_new(m, json_string(buf));
        }
    }
    json_t *root = json_pack("{s:{s:s,s:o,s:o},s:n,s:{s:s,s:b,s:b},s:{s:s},s:[]}", "model", "type", "BPE", "vocab",
                             vocab, "merges", m, "normalizer", "pre_tokenizer", "type", "ByteLevel",
                             "add_prefix_space", 0, "use_regex", 0, "decoder", "type", "ByteLevel", "added_tokens");
    return root;
}

static ea_tokenizer *build(json_t *root, const char *cfg) {
    char *s = json_dumps(root, 0);
    ea_tokenizer *t = NULL;
    ea_status st = ea_tokenizer_from_json(s, strlen(s), cfg, cfg ? strlen(cfg) : 0, "test.json", &t);
    if (st != EA_OK) fprintf(stderr, "  load: %s\n", ea_errmsg());
    free(s);
    json_decref(root);
    return t;
}

static ea_status build_err(json_t *root) {
    char *s = json_dumps(root, 0);
    ea_tokenizer *t = NULL;
    ea_status st = ea_tokenizer_from_json(s, strlen(s), NULL, 0, "test.json", &t);
    free(s);
    json_decref(root);
    ea_tokenizer_destroy(t);
    return st;
}

/* ids of text as "a,b,c" (ids >= 256 are the extra words). */
static const char *enc(const ea_tokenizer *t, const char *text, unsigned flags) {
    static char out[512];
    ea_tokens ids = {0};
    if (ea_tokenizer_encode(t, text, strlen(text), flags, &ids) != EA_OK) return "ERROR";
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < ids.n && o < sizeof out - 16; i++) o += (size_t)snprintf(out + o, sizeof out - o, i ? ",%d" : "%d", ids.ids[i]);
    ea_tokens_free(&ids);
    return out;
}

static void set_pre(json_t *root, json_t *pre) { json_object_set_new(root, "pre_tokenizer", pre); }

static json_t *split(const char *re, const char *behavior, int invert) {
    return json_pack("{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b,s:b}]}", "type", "Sequence", "pretokenizers", "type",
                     "Split", "pattern", "Regex", re, "behavior", behavior, "invert", invert, "type", "ByteLevel",
                     "add_prefix_space", 0, "use_regex", 0);
}

/* ---- tests ---- */

static const char *const words[] = {"he", "ll", "hell", "hello", "ab", "bc", "aa", NULL}; /* 256.. */
static const char *const hello_merges[] = {"h e", "l l", "he ll", "hell o", NULL};

TEST(merges_string_and_array_forms) {
    for (int arr = 0; arr < 2; arr++) {
        ea_tokenizer *t = build(make_tok(words, hello_merges, arr), NULL);
        CHECK(t);
        CHECK_STREQ(enc(t, "hello", 0), "259");
        CHECK_STREQ(enc(t, "hel", 0), "256,108");
        CHECK_STREQ(enc(t, "hellohello", 0), "259,259");
        CHECK_STREQ(enc(t, "", 0), "");
        ea_tokenizer_destroy(t);
    }
}

TEST(merge_rank_order_and_leftmost_ties) {
    const char *const m1[] = {"a b", "b c", NULL};
    const char *const m2[] = {"b c", "a b", NULL};
    const char *const m3[] = {"a a", NULL};
    ea_tokenizer *t = build(make_tok(words, m1, 0), NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "abc", 0), "260,99"); /* ab, c: rank 0 first */
    ea_tokenizer_destroy(t);
    t = build(make_tok(words, m2, 0), NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "abc", 0), "97,261"); /* a, bc */
    ea_tokenizer_destroy(t);
    t = build(make_tok(words, m3, 0), NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "aaa", 0), "262,97"); /* leftmost pair merges first */
    CHECK_STREQ(enc(t, "aaaa", 0), "262,262");
    ea_tokenizer_destroy(t);
}

TEST(ignore_merges_uses_whole_word) {
    const char *const m[] = {"h e", "l l", "he ll", NULL}; /* no path to "hello" by merges */
    json_t *r = make_tok(words, m, 0);
    ea_tokenizer *t = build(json_deep_copy(r), NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "hello", 0), "258,111");
    ea_tokenizer_destroy(t);
    json_object_set_new(json_object_get(r, "model"), "ignore_merges", json_true());
    t = build(r, NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "hello", 0), "259");
    ea_tokenizer_destroy(t);
}

static json_t *with_added(void) {
    json_t *r = make_tok(words, hello_merges, 0);
    json_t *a = json_object_get(r, "added_tokens");
    /* ids past the vocabulary grow it */
    json_array_append_new(a, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b}", "id", 300, "content", "<x>", "special", 1, "lstrip",
                                       0, "rstrip", 0, "normalized", 0));
    json_array_append_new(a, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b}", "id", 301, "content", "<x>y", "special", 1,
                                       "lstrip", 0, "rstrip", 0, "normalized", 0));
    json_array_append_new(a, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b}", "id", 302, "content", "[S]", "special", 0, "lstrip",
                                       1, "rstrip", 1, "normalized", 0));
    return r;
}

TEST(added_tokens_longest_special_strip) {
    ea_tokenizer *t = build(with_added(), NULL);
    CHECK(t);
    unsigned P = EA_TOK_PARSE_SPECIAL;
    CHECK_STREQ(enc(t, "<x>", P), "300");
    CHECK_STREQ(enc(t, "<x>y", P), "301");            /* the longest wins */
    CHECK_STREQ(enc(t, "hello<x>hello", P), "259,300,259");
    CHECK_STREQ(enc(t, "<x<x>", P), "60,120,300");    /* leftmost match after a false start */
    CHECK_STREQ(enc(t, "<x>", 0), "60,120,62");       /* special not parsed: plain text */
    CHECK_STREQ(enc(t, "a  [S]  b", 0), "97,302,98"); /* non-special always; lstrip/rstrip eat spaces */
    CHECK(ea_tokenizer_is_special(t, 300));
    CHECK(!ea_tokenizer_is_special(t, 302));
    char *out;
    int32_t ids[] = {259, 300, 302, 259};
    CHECK(ea_tokenizer_decode(t, ids, 4, 0, &out, NULL) == EA_OK);
    CHECK_STREQ(out, "hello<x>[S]hello");
    ea_free(out);
    CHECK(ea_tokenizer_decode(t, ids, 4, EA_DETOK_SKIP_SPECIAL, &out, NULL) == EA_OK);
    CHECK_STREQ(out, "hello[S]hello");
    ea_free(out);
    int32_t bad[] = {5, 100000};
    CHECK_EQ(ea_tokenizer_decode(t, bad, 2, 0, &out, NULL), EA_ERR_RANGE);
    CHECK(strstr(ea_errmsg(), "100000"));
    CHECK_EQ(ea_tokenizer_find(t, "<x>", 3), 300);
    ea_tokenizer_destroy(t);
}

TEST(split_behaviors) {
    const char *const m[] = {"a -", "- b", "- -", "a b", NULL};
    const char *const w[] = {"a-", "-b", "--", "ab", NULL}; /* 256..259 */
    struct {
        const char *beh;
        int invert;
        const char *text, *want;
    } cases[] = {
        {"Isolated", 0, "a-b", "97,45,98"},        {"Removed", 0, "a-b", "97,98"},
        {"MergedWithPrevious", 0, "a-b", "256,98"}, {"MergedWithNext", 0, "a-b", "97,257"},
        {"Contiguous", 0, "a--b", "97,258,98"},     {"Isolated", 0, "a--b", "97,45,45,98"},
        {"Removed", 1, "a-b", "45"},                {"MergedWithNext", 0, "a--b", "97,45,257"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *r = make_tok(w, m, 0);
        set_pre(r, split("-", cases[i].beh, cases[i].invert));
        ea_tokenizer *t = build(r, NULL);
        CHECK(t);
        const char *got = enc(t, cases[i].text, 0);
        if (strcmp(got, cases[i].want) != 0)
            FAIL_("%s%s on %s: got %s want %s", cases[i].beh, cases[i].invert ? " (invert)" : "", cases[i].text, got,
                  cases[i].want);
        ea_tokenizer_destroy(t);
    }
}

TEST(split_string_pattern_is_literal) {
    /* {"String": ...} matches the text literally (regex characters included) */
    const char *const w[] = {"a-", "-b", "--", "ab", NULL};
    json_t *r = make_tok(w, NULL, 0);
    set_pre(r, json_pack("{s:s,s:[{s:s,s:{s:s},s:s},{s:s,s:b,s:b}]}", "type", "Sequence", "pretokenizers", "type",
                         "Split", "pattern", "String", ".+", "behavior", "Removed", "type", "ByteLevel",
                         "add_prefix_space", 0, "use_regex", 0));
    ea_tokenizer *t = build(r, NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "a.+b", 0), "97,98");
    CHECK_STREQ(enc(t, "a.b", 0), "97,46,98");
    ea_tokenizer_destroy(t);
}

TEST(whitespace_is_unicode_white_space) {
    json_t *r = make_tok(NULL, NULL, 0);
    set_pre(r, split("\\s+", "Removed", 0));
    ea_tokenizer *t = build(r, NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "a\xc2\x85" "b", 0), "97,98");          /* U+0085 NEL is White_Space */
    CHECK_STREQ(enc(t, "a\xe3\x80\x80" "b", 0), "97,98");      /* U+3000 */
    CHECK_STREQ(enc(t, "a\xe1\xa0\x8e" "b", 0), "97,225,160,142,98"); /* U+180E is not */
    CHECK_STREQ(enc(t, "a\xef\xbb\xbf" "b", 0), "97,239,187,191,98"); /* U+FEFF is not */
    ea_tokenizer_destroy(t);
}

TEST(nfc) {
    char *o;
    size_t n;
    CHECK(ea__nfc("e\xcc\x81", 3, &o, &n) == EA_OK); /* e + acute -> é */
    CHECK_STREQ(o, "\xc3\xa9");
    ea_free(o);
    CHECK(ea__nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", 9, &o, &n) == EA_OK); /* L V T -> 각 */
    CHECK_STREQ(o, "\xea\xb0\x81");
    ea_free(o);
    /* a + ogonek(202) + acute(230) and a + acute + ogonek: same NFC (ą́) */
    char *o2;
    CHECK(ea__nfc("a\xcc\xa8\xcc\x81", 5, &o, &n) == EA_OK);
    CHECK(ea__nfc("a\xcc\x81\xcc\xa8", 5, &o2, &n) == EA_OK);
    CHECK_STREQ(o, o2);
    CHECK_STREQ(o, "\xc4\x85\xcc\x81");
    ea_free(o);
    ea_free(o2);
    CHECK(ea__nfc("\xe2\x84\xab", 3, &o, &n) == EA_OK); /* Angstrom sign -> Å (singleton) */
    CHECK_STREQ(o, "\xc3\x85");
    ea_free(o);
    CHECK(ea__nfc_trivial("plain ascii \xc3\xa9", 14));
    CHECK(!ea__nfc_trivial("e\xcc\x81", 3));
    /* in a tokenizer with an NFC normalizer, both spellings give the same ids */
    json_t *r = make_tok(NULL, NULL, 0);
    json_object_set_new(r, "normalizer", json_pack("{s:s,s:[{s:s}]}", "type", "Sequence", "normalizers", "type", "NFC"));
    ea_tokenizer *t = build(r, NULL);
    CHECK(t);
    char a[64];
    snprintf(a, sizeof a, "%s", enc(t, "caf\xc3\xa9", 0));
    CHECK_STREQ(enc(t, "cafe\xcc\x81", 0), a);
    ea_tokenizer_destroy(t);
}

TEST(bytelevel_prefix_space_and_regex) {
    const char *const w[] = {" hi", NULL};
    const char *const m[] = {"  h", NULL}; /* "Ġ h" */
    json_t *r = make_tok(w, NULL, 0);
    (void)m;
    json_t *mm = json_array();
    char g[8], h[8], buf[32];
    bl(" ", g);
    bl("h", h);
    snprintf(buf, sizeof buf, "%s %s", g, h);
    json_array_append_new(mm, json_string(buf));
    bl(" h", g);
    snprintf(buf, sizeof buf, "%s i", g);
    json_array_append_new(mm, json_string(buf));
    json_object_set_new(json_object_get(r, "model"), "merges", mm);
    /* " h" is needed in the vocabulary for the first merge */
    bl(" h", g);
    json_object_set_new(json_object_get(json_object_get(r, "model"), "vocab"), g, json_integer(400));
    set_pre(r, json_pack("{s:s,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 1, "use_regex", 1));
    ea_tokenizer *t = build(r, NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "hi", 0), "256");      /* becomes " hi" */
    CHECK_STREQ(enc(t, "hi hi", 0), "256,256"); /* GPT-2 regex: "hi", " hi" -> both " hi" */
    ea_tokenizer_destroy(t);
}

TEST(post_processor_and_config_bos) {
    json_t *r = make_tok(words, hello_merges, 0);
    json_array_append_new(json_object_get(r, "added_tokens"),
                          json_pack("{s:i,s:s,s:b}", "id", 300, "content", "<s>", "special", 1));
    json_t *r2 = json_deep_copy(r);
    json_object_set_new(r, "post_processor",
                        json_pack("{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}}],s:{s:{s:s,s:[i],s:[s]}}}", "type",
                                  "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0, "Sequence",
                                  "id", "A", "type_id", 0, "special_tokens", "<s>", "id", "<s>", "ids", 300, "tokens",
                                  "<s>"));
    ea_tokenizer *t = build(r, NULL);
    CHECK(t);
    CHECK_STREQ(enc(t, "hello", EA_TOK_ADD_SPECIAL), "300,259");
    CHECK_STREQ(enc(t, "hello", 0), "259");
    ea_tokenizer_destroy(t);
    /* no template: tokenizer_config's add_bos_token decides */
    t = build(r2, "{\"add_bos_token\": true, \"bos_token\": {\"content\": \"<s>\"}, \"eos_token\": \"hello\"}");
    CHECK(t);
    CHECK_STREQ(enc(t, "hello", EA_TOK_ADD_SPECIAL), "300,259");
    CHECK_EQ(ea_tokenizer_bos(t), 300);
    CHECK_EQ(ea_tokenizer_eos(t), 259);
    ea_tokenizer_destroy(t);
}

TEST(stream_decoder_split_characters) {
    ea_detok_stream s;
    ea_sbuf out = {0};
    ea_detok_stream_init(&s, 0);
    /* é = C3 A9 split over two pushes: nothing, then the whole character */
    CHECK(ea_detok_stream_push_bytes(&s, "caf\xc3", 4, &out) == EA_OK);
    CHECK_STREQ(out.data, "caf");
    CHECK(ea_detok_stream_push_bytes(&s, "\xa9!", 2, &out) == EA_OK);
    CHECK_STREQ(out.data, "caf\xc3\xa9!");
    /* a 4-byte emoji one byte at a time */
    out.len = 0;
    const char *e = "\xf0\x9f\x98\x80";
    for (int i = 0; i < 4; i++) {
        CHECK(ea_detok_stream_push_bytes(&s, e + i, 1, &out) == EA_OK);
        CHECK_EQ(out.len, i < 3 ? 0 : 4);
    }
    CHECK(memcmp(out.data, e, 4) == 0);
    /* a lone continuation byte, an impossible lead, a broken sequence */
    out.len = 0;
    CHECK(ea_detok_stream_push_bytes(&s, "\x80" "a\xff" "b\xe4\xbd" "c", 7, &out) == EA_OK);
    CHECK_STREQ(out.data, "\xef\xbf\xbd" "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c");
    /* a surrogate lead pair never completes */
    out.len = 0;
    CHECK(ea_detok_stream_push_bytes(&s, "\xed\xa0", 2, &out) == EA_OK);
    CHECK_STREQ(out.data, "\xef\xbf\xbd\xef\xbf\xbd");
    /* end of stream with a partial character pending */
    out.len = 0;
    CHECK(ea_detok_stream_push_bytes(&s, "x\xe4\xbd", 3, &out) == EA_OK);
    CHECK_STREQ(out.data, "x");
    CHECK(ea_detok_stream_flush(&s, &out) == EA_OK);
    CHECK_STREQ(out.data, "x\xef\xbf\xbd");
    ea_sbuf_deinit(&out);
}

TEST(stream_decoder_over_tokens) {
    /* tokens that are single bytes of a multi-byte character */
    ea_tokenizer *t = build(make_tok(NULL, NULL, 0), NULL);
    CHECK(t);
    ea_detok_stream s;
    ea_detok_stream_init(&s, 0);
    ea_sbuf out = {0};
    int32_t ids[] = {0xe4, 0xbd, 0xa0, 'h', 0xf0, 0x9f};
    size_t lens[] = {0, 0, 3, 4, 4, 4};
    for (int i = 0; i < 6; i++) {
        CHECK(ea_detok_stream_push(t, &s, ids[i], &out) == EA_OK);
        CHECK_EQ(out.len, lens[i]);
    }
    CHECK(ea_detok_stream_flush(&s, &out) == EA_OK);
    CHECK_STREQ(out.data, "\xe4\xbd\xa0h\xef\xbf\xbd");
    CHECK_EQ(ea_detok_stream_push(t, &s, 99999, &out), EA_ERR_RANGE);
    ea_sbuf_deinit(&out);
    ea_tokenizer_destroy(t);
}

TEST(invalid_utf8_input_round_trips) {
    ea_tokenizer *t = build(make_tok(words, hello_merges, 0), NULL);
    CHECK(t);
    const char s[] = "hello\xff\xfehello\xc3";
    CHECK_STREQ(enc(t, s, 0), "259,255,254,259,195");
    ea_tokens ids = {0};
    CHECK(ea_tokenizer_encode(t, s, sizeof s - 1, 0, &ids) == EA_OK);
    char *out;
    size_t n;
    CHECK(ea_tokenizer_decode(t, ids.ids, ids.n, 0, &out, &n) == EA_OK);
    CHECK_EQ(n, sizeof s - 1);
    CHECK(memcmp(out, s, n) == 0);
    ea_free(out);
    ea_tokens_free(&ids);
    ea_tokenizer_destroy(t);
}

TEST(load_errors_name_the_field) {
    struct {
        const char *what, *want;
        ea_status code;
    } cases[] = {
        {"merge without space", "model.merges[1]", EA_ERR_FORMAT},
        {"unknown merge token", "not in the vocabulary", EA_ERR_FORMAT},
        {"merged not in vocab", "merged token", EA_ERR_FORMAT},
        {"vocab not object", "model.vocab", EA_ERR_FORMAT},
        {"vocab id not int", "model.vocab[\"", EA_ERR_FORMAT},
        {"bad normalizer", "normalizer.type", EA_ERR_UNSUPPORTED},
        {"bad regex", "pre_tokenizer.pretokenizers[0].pattern.Regex", EA_ERR_FORMAT},
        {"byte_fallback", "model.byte_fallback", EA_ERR_UNSUPPORTED},
        {"added id bad", "added_tokens[0].id", EA_ERR_FORMAT},
        {"WordPiece", "model.type", EA_ERR_UNSUPPORTED},
        {"duplicate id", "id 97 is both", EA_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *r = make_tok(words, hello_merges, 0);
        json_t *model = json_object_get(r, "model");
        switch (i) {
        case 0: json_array_set_new(json_object_get(model, "merges"), 1, json_string("nospace")); break;
        case 1: json_array_set_new(json_object_get(model, "merges"), 0, json_string("h QQ")); break;
        case 2: json_array_append_new(json_object_get(model, "merges"), json_string("x y")); break;
        case 3: json_object_set_new(model, "vocab", json_array()); break;
        case 4: json_object_set_new(json_object_get(model, "vocab"), "zz", json_string("1")); break;
        case 5: json_object_set_new(r, "normalizer", json_pack("{s:s}", "type", "Lowercase")); break;
        case 6: set_pre(r, split("(unclosed", "Isolated", 0)); break;
        case 7: json_object_set_new(model, "byte_fallback", json_true()); break;
        case 8:
            json_array_append_new(json_object_get(r, "added_tokens"), json_pack("{s:s,s:s}", "id", "x", "content", "y"));
            break;
        case 9: json_object_set_new(model, "type", json_string("WordPiece")); break;
        case 10: json_object_set_new(json_object_get(model, "vocab"), "QQ", json_integer(97)); break;
        }
        ea_status st = build_err(r);
        if (st != cases[i].code || !strstr(ea_errmsg(), cases[i].want) || !strstr(ea_errmsg(), "test.json"))
            FAIL_("%s: got %s \"%s\", want %s containing \"%s\"", cases[i].what, ea_status_name(st), ea_errmsg(),
                  ea_status_name(cases[i].code), cases[i].want);
    }
    /* JSON syntax errors give the position */
    ea_tokenizer *t = NULL;
    CHECK(ea_tokenizer_from_json("{\"model\": [1,}", 14, NULL, 0, "broken.json", &t) == EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "broken.json"));
    CHECK(strstr(ea_errmsg(), "line 1"));
    CHECK(t == NULL);
    CHECK(ea_tokenizer_from_json("[]", 2, NULL, 0, "arr.json", &t) == EA_ERR_FORMAT);
    CHECK(ea_tokenizer_load("/nonexistent/dir/tokenizer.json", &t) == EA_ERR_IO);
}

TEST(gguf_vocab_arrays) {
    /* bytes, then "he", "ll", "hello"... as a GGUF would list them */
    static char bufs[300][8];
    const char *tok[300];
    size_t len[300];
    int32_t type[300];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        char raw[2] = {(char)b, 0};
        if (b == 0) ea__utf8_encode(256, (uint8_t *)bufs[n]), bufs[n][2] = 0;
        else bl(raw, bufs[n]);
        tok[n] = bufs[n];
        len[n] = strlen(bufs[n]);
        type[n++] = EA_TOKTYPE_NORMAL;
    }
    const char *extra[] = {"he", "ll", "hell", "hello"};
    for (int i = 0; i < 4; i++, n++) {
        tok[n] = extra[i];
        len[n] = strlen(extra[i]);
        type[n] = EA_TOKTYPE_NORMAL;
    }
    tok[n] = "<|end|>";
    len[n] = 7;
    type[n++] = EA_TOKTYPE_CONTROL;
    const char *digits[] = {"12", "123"};
    for (int i = 0; i < 2; i++, n++) {
        tok[n] = digits[i];
        len[n] = strlen(digits[i]);
        type[n] = EA_TOKTYPE_NORMAL;
    }
    tok[n] = "<|im_end|>";
    len[n] = 10;
    type[n++] = EA_TOKTYPE_CONTROL;
    const char *merges[] = {"h e", "l l", "he ll", "hell o", "1 2", "12 3"};
    size_t ml[] = {3, 3, 5, 6, 3, 4};
    ea_tokenizer_vocab v = {.n_tokens = n, .tokens = tok, .token_lens = len, .token_types = type, .n_merges = 6,
                            .merges = merges, .merge_lens = ml, .pre = "qwen2", .bos_id = -1, .eos_id = 260,
                            .add_bos = 0, .add_eos = 0, .what = "test.gguf"};
    ea_tokenizer *t;
    CHECK(ea_tokenizer_from_vocab(&v, &t) == EA_OK);
    CHECK_STREQ(enc(t, "hello<|end|>hello", EA_TOK_PARSE_SPECIAL), "259,260,259");
    CHECK_STREQ(enc(t, "123", 0), "49,50,51"); /* qwen2: digits one by one */
    CHECK(ea_tokenizer_is_special(t, 260));
    CHECK_EQ(ea_tokenizer_eos(t), 260);
    ea_tokenizer_destroy(t);
    v.pre = "kimi-k2"; /* llama.cpp's name for Kimi K2's pattern: digits in threes */
    CHECK(ea_tokenizer_from_vocab(&v, &t) == EA_OK);
    CHECK_STREQ(enc(t, "hello 1234", 0), "259,32,262,52");
    /* Kimi's class: <|im_end|> stays special, another CONTROL token (its tool-call markers) is text */
    CHECK(ea_tokenizer_is_special(t, 263));
    CHECK(!ea_tokenizer_is_special(t, 260));
    CHECK_STREQ(enc(t, "hello<|end|>", 0), "259,260");
    ea_tokenizer_destroy(t);
    v.pre = "no-such-pre";
    CHECK_EQ(ea_tokenizer_from_vocab(&v, &t), EA_ERR_UNSUPPORTED);
    CHECK(strstr(ea_errmsg(), "no-such-pre"));
    v.pre = "llama-bpe"; /* adds BOS by default; ignore_merges */
    v.bos_id = 104;
    v.add_bos = -1;
    CHECK(ea_tokenizer_from_vocab(&v, &t) == EA_OK);
    CHECK_STREQ(enc(t, "hello", EA_TOK_ADD_SPECIAL), "104,259");
    ea_tokenizer_destroy(t);
    v.pre = "gpt-2";
    merges[1] = "l QQ";
    CHECK_EQ(ea_tokenizer_from_vocab(&v, &t), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "tokenizer.ggml.merges[1]"));
}

TEST(json_text_helper) {
    ea_sbuf b = {0};
    CHECK(ea_tok_append_json(&b, "a\"\\\n\x01\xff\xc3\xa9", 8) == EA_OK);
    CHECK_STREQ(b.data, "\"a\\\"\\\\\\n\\u0001\xef\xbf\xbd\xc3\xa9\"");
    ea_sbuf_deinit(&b);
}

/* Many threads encoding at once (the word cache is shared) give the serial ids. */
static ea_tokenizer *mt_tok;
static const char *mt_texts[] = {"hello hello hell he", "abc abc ab bc", "hellohello\xff\xfe", "a b c d e f g h"};
static char mt_want[4][128];

static void *mt_worker(void *arg) {
    long bad = 0;
    for (int rep = 0; rep < 2000; rep++) {
        int k = (int)(((long)arg + rep) % 4);
        ea_tokens ids = {0};
        char got[128];
        size_t o = 0;
        got[0] = 0;
        if (ea_tokenizer_encode(mt_tok, mt_texts[k], strlen(mt_texts[k]), 0, &ids) != EA_OK) bad++;
        for (size_t i = 0; i < ids.n && o < sizeof got - 12; i++) o += (size_t)snprintf(got + o, sizeof got - o, ",%d", ids.ids[i]);
        if (strcmp(got, mt_want[k]) != 0) bad++;
        ea_tokens_free(&ids);
    }
    return (void *)bad;
}

TEST(concurrent_encode) {
    mt_tok = build(make_tok(words, hello_merges, 0), NULL);
    CHECK(mt_tok);
    for (int k = 0; k < 4; k++) {
        ea_tokens ids = {0};
        size_t o = 0;
        CHECK(ea_tokenizer_encode(mt_tok, mt_texts[k], strlen(mt_texts[k]), 0, &ids) == EA_OK);
        for (size_t i = 0; i < ids.n; i++) o += (size_t)snprintf(mt_want[k] + o, sizeof mt_want[k] - o, ",%d", ids.ids[i]);
        ea_tokens_free(&ids);
    }
    pthread_t th[4];
    for (long i = 0; i < 4; i++) pthread_create(&th[i], NULL, mt_worker, (void *)i);
    long bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += (long)r;
    }
    CHECK_EQ(bad, 0);
    ea_tokenizer_destroy(mt_tok);
}

int main(void) {
    RUN(merges_string_and_array_forms);
    RUN(merge_rank_order_and_leftmost_ties);
    RUN(ignore_merges_uses_whole_word);
    RUN(added_tokens_longest_special_strip);
    RUN(split_behaviors);
    RUN(split_string_pattern_is_literal);
    RUN(whitespace_is_unicode_white_space);
    RUN(nfc);
    RUN(bytelevel_prefix_space_and_regex);
    RUN(post_processor_and_config_bos);
    RUN(stream_decoder_split_characters);
    RUN(stream_decoder_over_tokens);
    RUN(invalid_utf8_input_round_trips);
    RUN(load_errors_name_the_field);
    RUN(gguf_vocab_arrays);
    RUN(json_text_helper);
    RUN(concurrent_encode);
    return TEST_SUMMARY();
}
