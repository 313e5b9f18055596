/*
 * cmd_detokenize.c — `eaas detokenize --model MODEL [--skip-special] [--json]
 * IDS...`: print the text of token ids.
 *
 * IDS are integers as separate arguments, or one argument holding a JSON
 * array ("[9707, 11]") or comma-separated ids; "-" reads a JSON array from
 * standard input. Plain output writes the decoded bytes exactly as they are
 * (invalid UTF-8 included) followed by a newline; --json prints a JSON
 * string instead (invalid bytes there become U+FFFD).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

static const char usage_text[] =
    "usage: eaas detokenize --model MODEL [--skip-special] [--json] IDS...\n\n"
    "Print the text of token IDS with MODEL's tokenizer. IDS are integers, or one\n"
    "argument with a JSON array (\"[9707, 11]\") or comma-separated ids; \"-\" reads a\n"
    "JSON array from standard input. MODEL is a model directory with tokenizer.json,\n"
    "a tokenizer.json file, or a .gguf file.\n\nflags:\n";

static ea_status parse_json_ids(const char *s, size_t n, ea_tokens *ids) {
    json_error_t err;
    json_t *j = json_loadb(s, n, JSON_DECODE_ANY, &err);
    if (!json_is_array(j)) {
        json_decref(j);
        return ea_err(EA_ERR_INVALID_ARG, "expected a JSON array of ids (line %d column %d: %s)", err.line,
                      err.column, j ? "not an array" : err.text);
    }
    ea_status st = EA_OK;
    for (size_t i = 0; i < json_array_size(j) && st == EA_OK; i++) {
        json_t *v = json_array_get(j, i);
        if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX)
            st = ea_err(EA_ERR_INVALID_ARG, "element %zu is not a 32-bit integer", i);
        else st = ea_tokens_push(ids, (int32_t)json_integer_value(v));
    }
    json_decref(j);
    return st;
}

static ea_status parse_list(const char *s, ea_tokens *ids) {
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        errno = 0;
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p || errno || v < INT32_MIN || v > INT32_MAX || (*e && *e != ',' && *e != ' '))
            return ea_err(EA_ERR_INVALID_ARG, "'%s' is not a list of token ids", s);
        EA_TRY(ea_tokens_push(ids, (int32_t)v));
        p = e;
    }
    return EA_OK;
}

static ea_status collect(int n_pos, const char *const *pos, ea_tokens *ids) {
    if (n_pos == 1 && strcmp(pos[0], "-") == 0) {
        ea_sbuf b = {0};
        char buf[65536];
        size_t got;
        ea_sbuf_append(&b, "", 0);
        while ((got = fread(buf, 1, sizeof buf, stdin)) > 0) ea_sbuf_append(&b, buf, got);
        ea_status s = ea_sbuf_check(&b, "stdin");
        if (s == EA_OK) s = parse_json_ids(b.data, b.len, ids);
        ea_sbuf_deinit(&b);
        return s;
    }
    for (int i = 0; i < n_pos; i++) {
        const char *a = pos[i];
        while (*a == ' ') a++;
        if (*a == '[') EA_TRY(parse_json_ids(a, strlen(a), ids));
        else EA_TRY(parse_list(a, ids));
    }
    return EA_OK;
}

int ea_cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    int skip = 0, json = 0;
    ea_arg spec[] = {{"model", EA_ARG_STR, &model, "MODEL", "model directory, tokenizer.json or .gguf file"},
                     {"skip-special", EA_ARG_BOOL, &skip, NULL, "leave out special tokens (BOS, <|im_end|>, ...)"},
                     {"json", EA_ARG_BOOL, &json, NULL, "print the text as a JSON string"},
                     {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("detokenize", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    ea_status s;
    if (!model || rest.n_pos < 1)
        return ea_cli_usage_error("detokenize", NULL, "needs --model MODEL and token ids; see --help");
    ea_tokens ids = {0};
    s = collect(rest.n_pos, rest.pos, &ids);
    if (s != EA_OK) {
        ea_tokens_free(&ids);
        return ea_cli_usage_error("detokenize", NULL, "%s", ea_errmsg());
    }
    ea_tokenizer *t;
    s = ea_tokenizer_load(model, &t);
    if (s != EA_OK) {
        ea_tokens_free(&ids);
        return ea_cli_fail(argv[0], s);
    }
    ea_sbuf text = {0};
    s = ea_tokenizer_decode_append(t, ids.ids, ids.n, skip ? EA_DETOK_SKIP_SPECIAL : 0, &text);
    if (s == EA_OK && json) {
        ea_sbuf j = {0};
        s = ea_tok_append_json(&j, text.data, text.len);
        if (s == EA_OK) puts(j.data);
        ea_sbuf_deinit(&j);
    } else if (s == EA_OK) {
        fwrite(text.data, 1, text.len, stdout);
        putchar('\n');
    }
    ea_sbuf_deinit(&text);
    ea_tokens_free(&ids);
    ea_tokenizer_destroy(t);
    return s == EA_OK ? 0 : ea_cli_fail(argv[0], s);
}
