/*
 * test_chat_template.c — the chat-template interpreter, feature by feature.
 *
 * The table of snippets below was rendered with @huggingface/jinja (the
 * reference tests/golden/chat_ref.mjs uses); each expected string is its
 * output, NULL where it throws. Further tests check what a user relies on:
 * syntax errors name the line and column, raise_exception surfaces the
 * template's message as EA_ERR_INVALID_ARG, tokenizer_config.json forms
 * (string or list templates, token strings or objects) load, the built-in
 * templates parse, and allocation failures are clean errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/util.h"
#include "harness.h"
#include "tokenizer/builtin_templates.h"
#include "tokenizer/chat_template.h"

static const struct {
    const char *tmpl, *ctx, *want;
} k_cases[] = {
    {"{{ 'a' ~ 1 ~ 2.5 ~ true }}",
     "{}",
     "a12.5true"},
    {"{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ 7 / 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}|{{ -3 }}|{{ 1.0 }}|{{ 10 / 5 }}|{{ -7 // 2 }}|{{ 2 ** -1 }}",
     "{}",
     "7|3|3.5|1|1024|-3|1.0|2.0|-4|0.5"},
    {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }},{% endfor %}",
     "{\"xs\": [\"a\", \"b\", \"c\"]}",
     "10truefalse33,21falsefalse32,32falsetrue31,"},
    {"{% for x in xs if x > 1 %}{{ x }}{% else %}empty{% endfor %}|{% for x in [] %}x{% else %}none{% endfor %}",
     "{\"xs\": [1, 2, 3]}",
     "23|none"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2, \"1\": 3}}",
     "1=3;b=1;a=2;|1ba"},
    {"{% set ns = namespace(c=0, s='') %}{% for x in xs %}{% set ns.c = ns.c + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.c }} {{ ns.s }}",
     "{\"xs\": [1, 2, 3]}",
     "6 123"},
    {"{{ xs[1:] }}{{ xs[::-1] }}{{ xs[:-1] }}{{ xs[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s[-1:] }}|{{ xs[0:3:2] }}",
     "{\"xs\": [1, 2, 3], \"s\": \"h\303\251llo\360\237\230\200\"}",
     "[2, 3][3, 2, 1][1, 2]3|\303\251l|\360\237\230\200oll\303\251h|\360\237\230\200|[1, 3]"},
    {"{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.split(',') }}|{{ s.replace('a','b') }}|{{ s.startswith(' a') }}|{{ s.endswith(('x','c ')) }}|{{ s|length }}|{{ s.upper() }}|{{ s.split() }}|{{ 'a,b,c'.split(',', 1) }}",
     "{\"s\": \" a,b,c \"}",
     "a,b,c|a,b,c | a,b,c|[\" a\", \"b\", \"c \"]| b,b,c |true|true|7| A,B,C |[\"a,b,c\"]|[\"a\", \"b,c\"]"},
    {"{{ x is defined }}{{ y is defined }}{{ none is none }}{{ 's' is string }}{{ 1 is number }}{{ [] is iterable }}{{ {} is mapping }}{{ x is not none }}{{ f is false }}{{ 3 is odd }}{{ x is integer }}",
     "{\"x\": 1, \"f\": false}",
     "truefalsetruetruetruetruetruetruetruetruetrue"},
    {"{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ '\303\274\n\"'|tojson }}|{{ d|tojson(ensure_ascii=true) }}|{{ [] | tojson(indent=2) }}",
     "{\"d\": {\"k\": [1, 2.5, null, true], \"\303\251\": \"\303\274\360\237\230\200\"}}",
     "{\"k\": [1, 2.5, null, true], \"\303\251\": \"\303\274\360\237\230\200\"}|{\n  \"k\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"\303\251\": \"\303\274\360\237\230\200\"\n}|\"\303\274\\n\\\"\"|{\"k\": [1, 2.5, null, true], \"\\u00e9\": \"\\u00fc\\ud83d\\ude00\"}|[]"},
    {"{{ 'y' if x else 'n' }}{{ 'z' if not x }}[{{ 'q' if x }}]",
     "{\"x\": 0}",
     "nz[]"},
    {"a  {%- if true -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e",
     "{}",
     "abc d e"},
    {"x\n    {% if true %}\n    y\n    {% endif %}\nz\n",
     "{}",
     "x\n    y\nz"},
    {"a{# comment #}b {#- c -#} c",
     "{}",
     "abc"},
    {"{{ 'a' in 'cat' }}{{ 2 in [1,2] }}{{ 'k' in d }}{{ 3 not in [1] }}{{ 'z' in undefined_var }}",
     "{\"d\": {\"k\": 1}}",
     "truetruetruetruefalse"},
    {"{{ 1 == 1.0 }}{{ '1' == 1 }}{{ true == 1 }}{{ none == undefined_var }}{{ [] == [] }}{{ xs == xs }}{{ '' == 0 }}",
     "{\"xs\": [1]}",
     "truetruetruetruefalsetruetrue"},
    {"{{ 0 or 'x' }}{{ 'a' and 'b' }}{{ [] or 'e' }}{{ none or 0 }}",
     "{}",
     "xbe0"},
    {"{{ 'n' + 1 }}{{ 1.5 + 'x' }}{{ 2.0 ~ '' }}{{ 'l' + [1, 'a'] }}{{ 'o' ~ {'a': 1} }}",
     "{}",
     "n11.5x2l1,ao[object Map]"},
    {"{% set x %}inner {{ 1 }}{% endset %}[{{ x }}]",
     "{}",
     "[inner 1]"},
    {"{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "{\"xs\": [1, 2, 3, 4, 5]}",
     "13"},
    {"{{ xs|first }}{{ xs|last }}{{ xs|join(',') }}{{ xs|reverse|list }}{{ 'abc'|upper }}{{ ' x '|trim }}{{ xs|length }}{{ -2|abs }}{{ '42'|int + 1 }}{{ 3|float }}{{ undefined_var|default('dflt') }}{{ ''|default('e', true) }}",
     "{\"xs\": [1, 2, 3]}",
     "131,2,3[3, 2, 1]ABCx32433.0dflte"},
    {"{{ d.get('a') }}{{ d.get('zz', 'no') }}{{ d.keys()|list }}{{ d['a'] }}{{ d.a }}{{ d.values()|list }}{{ d|length }}",
     "{\"d\": {\"a\": 1, \"b\": [2]}}",
     "1no[\"a\", \"b\"]11[1, [2]]2"},
    {"[{{ undefined_var }}][{{ none }}][{{ undefined_var.attr }}][{{ xs[9] }}]",
     "{\"xs\": [1]}",
     "[][][][]"},
    {"{{ ms|map(attribute='role')|join(' ') }}|{{ ms|selectattr('role','equalto','user')|list|length }}|{{ ms|rejectattr('role','equalto','user')|map(attribute='content')|list }}",
     "{\"ms\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"c\"}]}",
     "user assistant user|2|[\"b\"]"},
    {"{{ 'tab\\tnl\\nq\\'\\u00e9\\x41' }}",
     "{}",
     "tab\tnl\nq'\303\251A"},
    {"{{ 0.1 + 0.2 }}|{{ 1/3 }}|{{ 100000000000000000000000.0 }}|{{ 2**60 }}|{{ 0.000001 }}|{{ 0.0000001 * 1.0 }}|{{ 1/0 }}|{{ 1e3 if false else 3.25 }}",
     "{}",
     NULL},
    {"{{ i }}{{ f }}{{ g }}{{ g is integer }}{{ big }}",
     "{\"i\": 3, \"f\": 2.5, \"g\": 2.0, \"big\": 1234567890123456789}",
     "32.52true1234567890123456800"},
    {"{{ [1, 'a', none, true] }}{{ {'k': [1]} }}{{ (1, 'x') }}",
     "{}",
     NULL},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = (3, 4) %}{{ t[0] + t[1] }}",
     "{}",
     "127"},
    {"{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}",
     "{\"a\": false, \"b\": 0, \"c\": \"yes\"}",
     "C"},
    {"{{ 'Hello World'.lower() }}|{{ 'hello world foo_bar'.title() }}|{{ 'hello'|capitalize }}|{{ 'abc'.length }}|{{ '\360\237\230\200x'|length }}",
     "{}",
     "hello world|Hello World Foo_bar|Hello|3|3"},
    {"{% for m in messages %}{{ m.role }}:{{ m['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}]}",
     "user:hiassistant:yo"},
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
     "{}",
     "21"},
    {"{{ range(3)|list }}{{ range(1, 7, 2) }}{% for i in range(2) %}{{ i }}{% endfor %}",
     "{}",
     "[0, 1, 2][1, 3, 5]01"},
    {"{{ raise_exception('Boom: ' ~ n) }}",
     "{\"n\": 7}",
     NULL},
    {"{{ undefined_var + 1 }}",
     "{}",
     NULL},
    {"{{ none ~ 'x' }}",
     "{}",
     NULL},
    {"{% for c in 'abc' %}{{ c }}{% endfor %}",
     "{}",
     NULL},
    {"{{ 'a' < 'b' }}",
     "{}",
     NULL},
    {"{{ d|items|list }}{{ d.items() }}",
     "{\"d\": {\"b\": 1}}",
     "[[\"b\", 1]][[\"b\", 1]]"},
    {"{{ 'a\302\240 '|trim }}|{{ ' \343\200\200x\342\200\250'.strip() }}|{{ 'x\n\n'.rstrip('\\n') }}|{{ '\n\ny'.lstrip('z') }}",
     "{}",
     "a|x|x|y"},
    {"{{ 'aXbXc'.replace('X', '-', 1) }}|{{ 'abc'.replace('', '.') }}|{{ 'ab'.split('b') }}|{{ ''.split(',') }}|{{ '  a  b '.split(none, 1) }}",
     "{}",
     "a-bXc|.a.b.c.|[\"a\", \"\"]|[\"\"]|[\"a\", \"b \"]"},
    {"{% set ns = namespace() %}{% set ns.x = ns %}{{ ns.x is defined }}",
     "{}",
     "true"},
    {"{{ x.y.z }}",
     "{\"x\": {\"y\": null}}",
     ""},
    {"{{ messages[0]['role'] == 'system' }}{{ messages[1:] }}",
     "{\"messages\": []}",
     "false[]"},
    {"{{ 1 is lower }}{{ 'abc' is lower }}{{ 'aBc' is upper }}{{ none is upper }}",
     "{}",
     "falsetruefalsefalse"},
    {"{{ [1] == 1 }}{{ [1, 2] == '1,2' }}{{ [] == '' }}{{ [] == 0 }}{{ [2.0] == '2.0' }}{{ {} == '[object Map]' }}{{ [none] == 'null' }}{{ ['a'] != 'a' }}{{ true == [1] }}{{ [[1, 2]] == '[1, 2]' }}",
     "{}",
     "truetruetruetruetruetruefalsefalsetruetrue"},
    {"{{ [none] ~ '' }}|{{ [1, none, 'a'] ~ '' }}|{{ [y] ~ '' }}|{{ [none, z]|unique|length }}|{{ [none, 1]|join('-') }}",
     "{\"y\": null}",
     "undefined|1,undefined,a|undefined|1|-1"},
    {"{{ raise_exception(none) }}",
     "{}",
     NULL},
};

/* Render `tmpl` with JSON context text; returns heap output or NULL (status in *st). */
static char *render(const char *tmpl, const char *ctx_json, ea_status *st) {
    ea_chat_template *t = NULL;
    char *out = NULL;
    size_t n = 0;
    *st = ea_chat_template_create(tmpl, strlen(tmpl), &t);
    if (*st != EA_OK) return NULL;
    json_error_t je;
    json_t *ctx = json_loads(ctx_json, 0, &je);
    if (!ctx) {
        ea_chat_template_destroy(t);
        *st = EA_ERR_FORMAT;
        return NULL;
    }
    *st = ea_chat_template_render(t, ctx, &out, &n);
    json_decref(ctx);
    ea_chat_template_destroy(t);
    return out;
}

TEST(reference_snippets) {
    int bad = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        ea_status st;
        char *out = render(k_cases[i].tmpl, k_cases[i].ctx, &st);
        if (k_cases[i].want) {
            if (st != EA_OK || strcmp(out, k_cases[i].want) != 0) {
                fprintf(stderr, "  case %zu: %s\n    want: %s\n    got:  %s (%s)\n", i, k_cases[i].tmpl, k_cases[i].want,
                        out ? out : "(error)", st ? ea_errmsg() : "");
                bad++;
            }
        } else if (st == EA_OK) {
            fprintf(stderr, "  case %zu: %s\n    want an error, got: %s\n", i, k_cases[i].tmpl, out);
            bad++;
        }
        ea_free(out);
    }
    CHECK_EQ(bad, 0);
}

/* The error message must name where the problem is. */
static void expect_error(const char *tmpl, const char *ctx, ea_status want_st, const char *want_sub, int *bad) {
    ea_status st;
    char *out = render(tmpl, ctx, &st);
    if (st != want_st || !strstr(ea_errmsg(), want_sub)) {
        fprintf(stderr, "  template %s\n    want %s containing \"%s\"\n    got %s: %s\n", tmpl, ea_status_name(want_st),
                want_sub, ea_status_name(st), ea_errmsg());
        (*bad)++;
    }
    ea_free(out);
}

TEST(errors_name_line_and_column) {
    int bad = 0;
    expect_error("line1\n{% if x %}\nno end", "{}", EA_ERR_FORMAT, "line 2 column 1: this block is never closed", &bad);
    expect_error("a\nb {{ x | }}", "{}", EA_ERR_FORMAT, "line 2 column", &bad);
    expect_error("ok\n\n  {% macro m() %}{% endmacro %}", "{}", EA_ERR_FORMAT, "line 3 column", &bad);
    expect_error("ok\n\n  {% macro m() %}{% endmacro %}", "{}", EA_ERR_FORMAT, "unsupported statement 'macro'", &bad);
    expect_error("{{ 'unterminated }}", "{}", EA_ERR_FORMAT, "line 1 column 4: unterminated string", &bad);
    expect_error("\n\n  {{ x.y( }}", "{}", EA_ERR_FORMAT, "line 3", &bad);
    expect_error("{{ '\\q' }}", "{}", EA_ERR_FORMAT, "unexpected escaped character 'q'", &bad);
    expect_error("x\n{{ x|frobnicate }}", "{\"x\": \"s\"}", EA_ERR_FORMAT, "line 2 column 5: unknown or unsupported filter 'frobnicate'", &bad);
    expect_error("\n\n{{ a is divisibleby }}", "{}", EA_ERR_FORMAT, "line 3 column 6: unknown or unsupported test", &bad);
    expect_error("{% for x in xs %}\n  {{ x - 1 }}\n{% endfor %}", "{\"xs\": [1, \"s\"]}", EA_ERR_FORMAT, "line 2 column 8: unsupported operator '-' between string and integer", &bad);
    expect_error("{% set x = 1 %}{% endset %}", "{}", EA_ERR_FORMAT, "unknown statement 'endset'", &bad);
    expect_error("{{ 1 }", "{}", EA_ERR_FORMAT, "line 1", &bad);
    expect_error("{# never closed", "{}", EA_ERR_FORMAT, "missing end of comment", &bad);
    expect_error("{% break %}", "{}", EA_ERR_FORMAT, "break or continue outside a for loop", &bad);
    expect_error("{{ strftime_now('%Y') }}", "{}", EA_ERR_FORMAT, "unsupported: strftime_now", &bad);
    expect_error("{{ x }}", "{\"range\": 1}", EA_ERR_INVALID_ARG, "'range' is already declared", &bad);
    expect_error("{% for i in range(10000000) %}{% endfor %}", "{}", EA_ERR_FORMAT, "range() of more than", &bad);
    expect_error("{{ range == 'a' }}", "{}", EA_ERR_FORMAT, "unsupported: comparing a function with a string", &bad);
    expect_error("{{ 'ß'.upper() }}", "{}", EA_ERR_FORMAT, "non-ASCII", &bad);
    expect_error("{{ d|dictsort }}", "{\"d\": {}}", EA_ERR_FORMAT, "unsupported: dictsort", &bad);
    expect_error("\xff{{ x }}", "{}", EA_ERR_FORMAT, "not valid UTF-8", &bad);
    CHECK_EQ(bad, 0);
}

TEST(raise_exception_is_invalid_arg_with_message) {
    ea_status st;
    char *out = render("a\n{{ raise_exception('roles must alternate') }}", "{}", &st);
    CHECK(out == NULL);
    CHECK_EQ(st, EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "roles must alternate") != NULL);
    CHECK(strstr(ea_errmsg(), "line 2") != NULL);
}

TEST(deep_nesting_is_an_error_not_a_crash) {
    size_t n = 5000;
    char *t = malloc(n * 2 + 16);
    strcpy(t, "{{ ");
    for (size_t i = 0; i < n; i++) strcat(t, "(");
    ea_status st;
    char *out = render(t, "{}", &st);
    CHECK(out == NULL && st == EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "nesting deeper") != NULL);
    free(t);
}

TEST(runaway_loops_stop) {
    const char *src = "{% for a in range(100000) %}{% for b in range(10) %}{% endfor %}{% endfor %}";
    ea_chat_template *t;
    CHECK_EQ(ea_chat_template_create(src, strlen(src), &t), EA_OK);
    ea_chat_template_set_limits(t, 100000, 64 << 20);
    json_t *ctx = json_object();
    char *out = NULL;
    size_t n;
    CHECK_EQ(ea_chat_template_render(t, ctx, &out, &n), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "exceeded 100000 steps") != NULL);
    ea_chat_template_set_limits(t, 0, 1 << 20); /* default steps, 1 MiB of values */
    CHECK_EQ(ea_chat_template_render(t, ctx, &out, &n), EA_ERR_RANGE);
    CHECK(strstr(ea_errmsg(), "more than 1 MiB") != NULL);
    json_decref(ctx);
    ea_chat_template_destroy(t);
}

TEST(builtin_templates_render) {
    const char *fams[] = {"mixtral", "olmoe"};
    for (int i = 0; i < 2; i++) {
        const char *src = ea_builtin_chat_template(fams[i]), *bos, *eos;
        CHECK(src != NULL);
        CHECK_EQ(ea_builtin_special_tokens(fams[i], &bos, &eos), 0);
        ea_chat_template *t;
        CHECK_EQ(ea_chat_template_create(src, strlen(src), &t), EA_OK);
        json_t *ctx = json_pack("{s:[{s:s,s:s},{s:s,s:s},{s:s,s:s}], s:b, s:s, s:s}", "messages", "role", "system",
                                "content", "S", "role", "user", "content", "U", "role", "assistant", "content", "A",
                                "add_generation_prompt", 1, "bos_token", bos, "eos_token", eos);
        char *out;
        size_t n;
        CHECK_EQ(ea_chat_template_render(t, ctx, &out, &n), EA_OK);
        if (i == 0) CHECK_STREQ(out, "<s> [INST] S\n\nU [/INST] A</s>");
        else CHECK_STREQ(out, "<|endoftext|><|system|>\nS\n<|user|>\nU\n<|assistant|>\nA<|endoftext|><|assistant|>\n");
        ea_free(out);
        json_decref(ctx);
        ea_chat_template_destroy(t);
    }
    CHECK(ea_builtin_chat_template("nope") == NULL);
    CHECK(ea_builtin_chat_template(NULL) == NULL);
}

TEST(mixtral_rejects_non_alternating_roles) {
    const char *src = ea_builtin_chat_template("mixtral");
    ea_chat_template *t;
    CHECK_EQ(ea_chat_template_create(src, strlen(src), &t), EA_OK);
    json_t *ctx = json_pack("{s:[{s:s,s:s},{s:s,s:s}], s:s, s:s}", "messages", "role", "user", "content", "a", "role",
                            "user", "content", "b", "bos_token", "<s>", "eos_token", "</s>");
    char *out = NULL;
    size_t n;
    CHECK_EQ(ea_chat_template_render(t, ctx, &out, &n), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "conversation roles must alternate") != NULL);
    json_decref(ctx);
    ea_chat_template_destroy(t);
}

static void write_config(const char *dir, const char *json) {
    char p[512];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(p, "w");
    fputs(json, f);
    fclose(f);
}

TEST(tokenizer_config_forms) {
    char dir[] = "/tmp/ea_chat_cfgXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char d1[256], d2[256], d3[256];
    snprintf(d1, sizeof d1, "%s/string", dir);
    snprintf(d2, sizeof d2, "%s/list", dir);
    snprintf(d3, sizeof d3, "%s/bad", dir);
    write_config(d1, "{\"chat_template\": \"{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}\","
                     " \"bos_token\": {\"content\": \"<B>\", \"lstrip\": false}, \"eos_token\": \"<E>\"}");
    write_config(d2, "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T{{ tools|length }}\"},"
                     " {\"name\": \"default\", \"template\": \"D{{ messages|length }}\"}], \"bos_token\": null}");
    write_config(d3, "{\"chat_template\": 5}");
    json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", "hi");
    json_t *tools = json_pack("[{s:s}]", "type", "function");
    char *out;
    size_t n;
    CHECK_EQ(ea_chat_render_model(d1, msgs, NULL, 1, NULL, &out, &n), EA_OK);
    CHECK_STREQ(out, "<B>hi<E>");
    ea_free(out);
    CHECK_EQ(ea_chat_render_model(d2, msgs, NULL, 1, NULL, &out, &n), EA_OK);
    CHECK_STREQ(out, "D1");
    ea_free(out);
    CHECK_EQ(ea_chat_render_model(d2, msgs, tools, 1, NULL, &out, &n), EA_OK);
    CHECK_STREQ(out, "T1");
    ea_free(out);
    CHECK_EQ(ea_chat_render_model(d3, msgs, NULL, 1, NULL, &out, &n), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "chat_template must be a string") != NULL);
    /* chat_template.jinja beside tokenizer_config.json wins over its field; the tokens still come from the config */
    char jf[300];
    snprintf(jf, sizeof jf, "%s/chat_template.jinja", d1);
    const char *jinja = "J{{ bos_token }}{{ messages[0].content }}";
    CHECK_EQ(ea_write_file(jf, jinja, strlen(jinja)), EA_OK);
    CHECK_EQ(ea_chat_render_model(d1, msgs, NULL, 1, NULL, &out, &n), EA_OK);
    CHECK_STREQ(out, "J<B>hi");
    ea_free(out);
    char none[300];
    snprintf(none, sizeof none, "%s/missing", dir);
    CHECK(ea_chat_render_model(none, msgs, NULL, 1, NULL, &out, &n) != EA_OK);
    json_decref(msgs);
    json_decref(tools);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
}

TEST(allocation_failures_are_clean) {
    const char *src = ea_builtin_chat_template("mixtral");
    json_t *ctx = json_pack("{s:[{s:s,s:s}], s:s, s:s}", "messages", "role", "user", "content", "hi", "bos_token", "<s>",
                            "eos_token", "</s>");
    int ok_seen = 0;
    for (long k = 0; k < 40; k++) {
        ea_alloc_fail_after(k);
        ea_chat_template *t = NULL;
        char *out = NULL;
        size_t n;
        ea_status s = ea_chat_template_create(src, strlen(src), &t);
        if (s == EA_OK) s = ea_chat_template_render(t, ctx, &out, &n);
        ea_alloc_fail_after(-1);
        if (s == EA_OK) {
            ok_seen = 1;
            CHECK_STREQ(out, "<s> [INST] hi [/INST]");
        } else {
            CHECK(s == EA_ERR_NOMEM || s == EA_ERR_RANGE);
        }
        ea_free(out);
        ea_chat_template_destroy(t);
    }
    CHECK(ok_seen);
    ea_chat_template_destroy(NULL);
    json_decref(ctx);
}

TEST(render_is_repeatable) {
    ea_chat_template *t;
    const char *src = "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}";
    CHECK_EQ(ea_chat_template_create(src, strlen(src), &t), EA_OK);
    json_t *ctx = json_pack("{s:[i,i,i]}", "messages", 1, 2, 3);
    for (int i = 0; i < 3; i++) {
        char *out;
        size_t n;
        CHECK_EQ(ea_chat_template_render(t, ctx, &out, &n), EA_OK);
        CHECK_STREQ(out, "3");
        ea_free(out);
    }
    json_decref(ctx);
    ea_chat_template_destroy(t);
}

int main(void) {
    RUN(reference_snippets);
    RUN(errors_name_line_and_column);
    RUN(raise_exception_is_invalid_arg_with_message);
    RUN(deep_nesting_is_an_error_not_a_crash);
    RUN(runaway_loops_stop);
    RUN(builtin_templates_render);
    RUN(mixtral_rejects_non_alternating_roles);
    RUN(tokenizer_config_forms);
    RUN(allocation_failures_are_clean);
    RUN(render_is_repeatable);
    return TEST_SUMMARY();
}
