/*
 * cmd_tokenize.c — `eaas tokenize --model MODEL [--json] [--no-special]
 * [--split-special] TEXT`: print the token ids of TEXT.
 *
 * Output: with --json one JSON array of ids; otherwise one line per token,
 * "id<TAB>piece" where piece is the token's text as a JSON string (so
 * spaces, newlines and partial UTF-8 bytes are visible; a byte that is not
 * a whole character shows as U+FFFD).
 *
 * Batch mode for tests and scripts: --input-jsonl FILE reads one JSON string
 * per line and prints one JSON array per line (the tokenizer loads once).
 * TEXT "-" reads the text from standard input, byte for byte.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/util.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

static const char usage_text[] =
    "usage: eaas tokenize --model MODEL [--json] [--no-special] [--split-special] TEXT\n"
    "       eaas tokenize --model MODEL --input-jsonl FILE [--no-special] [--split-special]\n\n"
    "Print the token ids of TEXT (\"-\" reads standard input) with MODEL's tokenizer.\n"
    "MODEL is a model directory with tokenizer.json (and tokenizer_config.json),\n"
    "a tokenizer.json file, or a .gguf file. By default BOS/EOS are added the way\n"
    "the model's configuration says, and special tokens written in the text\n"
    "(e.g. <|im_start|>) are recognized. Plain output is one \"id<TAB>piece\" line\n"
    "per token; --json prints one JSON array.\n\nflags:\n";

static ea_status print_ids(const ea_tokens *ids) {
    putchar('[');
    for (size_t i = 0; i < ids->n; i++) printf(i ? ",%d" : "%d", (int)ids->ids[i]);
    puts("]");
    return EA_OK;
}

static ea_status run_jsonl(const ea_tokenizer *t, const char *path, unsigned flags) {
    char *data;
    size_t n;
    EA_TRY(ea_read_file(path, &data, &n));
    ea_status s = EA_OK;
    size_t line_no = 0;
    for (char *p = data; s == EA_OK && p < data + n;) {
        char *e = memchr(p, '\n', (size_t)(data + n - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(data + n - p);
        line_no++;
        if (len > 0) {
            json_error_t err;
            json_t *j = json_loadb(p, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
            if (!json_is_string(j)) {
                s = ea_err(EA_ERR_FORMAT, "%s:%zu: expected a JSON string per line", path, line_no);
            } else {
                ea_tokens ids = {0};
                s = ea_tokenizer_encode(t, json_string_value(j), json_string_length(j), flags, &ids);
                if (s == EA_OK) print_ids(&ids);
                ea_tokens_free(&ids);
            }
            json_decref(j);
        }
        p += len + 1;
    }
    ea_free(data);
    return s;
}

static ea_status read_stdin(char **out, size_t *n) {
    ea_sbuf b = {0};
    char buf[65536];
    size_t got;
    ea_sbuf_append(&b, "", 0);
    while ((got = fread(buf, 1, sizeof buf, stdin)) > 0) ea_sbuf_append(&b, buf, got);
    ea_status s = ea_sbuf_check(&b, "stdin");
    if (s != EA_OK) {
        ea_sbuf_deinit(&b);
        return s;
    }
    *out = b.data;
    *n = b.len;
    return EA_OK;
}

int ea_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *jsonl = NULL;
    int json = 0, no_special = 0, split_special = 0;
    ea_arg spec[] = {
        {"model", EA_ARG_STR, &model, "MODEL", "model directory, tokenizer.json or .gguf file"},
        {"json", EA_ARG_BOOL, &json, NULL, "print a JSON array of ids"},
        {"no-special", EA_ARG_BOOL, &no_special, NULL, "do not add BOS/EOS"},
        {"split-special", EA_ARG_BOOL, &split_special, NULL,
         "treat special tokens written in the text as plain text"},
        {"input-jsonl", EA_ARG_STR, &jsonl, "FILE", "tokenize each line (a JSON string); one array per line"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("tokenize", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    ea_status s;
    if (!model || (!jsonl && rest.n_pos != 1) || (jsonl && rest.n_pos != 0))
        return ea_cli_usage_error("tokenize", NULL,
                                  "needs --model MODEL and one TEXT (or --input-jsonl FILE); see --help");
    unsigned flags = (no_special ? 0u : EA_TOK_ADD_SPECIAL) | (split_special ? 0u : EA_TOK_PARSE_SPECIAL);
    ea_tokenizer *t;
    s = ea_tokenizer_load(model, &t);
    if (s != EA_OK) return ea_cli_fail(argv[0], s);
    if (jsonl) {
        s = run_jsonl(t, jsonl, flags);
        ea_tokenizer_destroy(t);
        return s == EA_OK ? 0 : ea_cli_fail(argv[0], s);
    }
    char *text = (char *)rest.pos[0], *owned = NULL;
    size_t len = strlen(text);
    if (strcmp(text, "-") == 0) {
        s = read_stdin(&owned, &len);
        if (s != EA_OK) {
            ea_tokenizer_destroy(t);
            return ea_cli_fail(argv[0], s);
        }
        text = owned;
    }
    ea_tokens ids = {0};
    s = ea_tokenizer_encode(t, text, len, flags, &ids);
    if (s == EA_OK && json) {
        print_ids(&ids);
    } else if (s == EA_OK) {
        ea_sbuf line = {0};
        for (size_t i = 0; i < ids.n && s == EA_OK; i++) {
            size_t n;
            const char *b = ea_tokenizer_token_bytes(t, ids.ids[i], &n);
            line.len = 0;
            s = ea_tok_append_json(&line, b ? b : "", n);
            if (s == EA_OK) printf("%d\t%s\n", (int)ids.ids[i], line.data);
        }
        ea_sbuf_deinit(&line);
    }
    ea_tokens_free(&ids);
    ea_free(owned);
    ea_tokenizer_destroy(t);
    return s == EA_OK ? 0 : ea_cli_fail(argv[0], s);
}
