/*
 * tool_calls.c — the grammar of a forced tool call (tool_choice "required" or
 * a named function): the calls of the functions in OpenAI's `tools`, written
 * as a chat format says (ea_tool_call_syntax, grammar.h). The arguments are
 * the JSON Schema front end's instances of each function's parameters
 * (json_schema.c), or, for Qwen3-Coder's XML format (xml_params), one
 * parameter block per property with raw text for strings.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar_internal.h"

#define PATH_LEN 512

typedef struct {
    ea_gbuild *b;
    char *err_path, *err;
    size_t n_path, n_err;
    int r_raw; /* free raw text, -1 until made */
} xc;

__attribute__((format(printf, 3, 4))) static ea_status xfail(xc *c, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ea__gfail_path(c->err_path, c->n_path, c->err, c->n_err, path, fmt, ap);
    va_end(ap);
    return ea_err(EA_ERR_INVALID_ARG, "tools: %s", c->err ? c->err : path);
}

/* Append text (may be NULL) literally. */
static void lit_text(ea_gseq *q, ea_gbuild *b, const char *text) {
    if (text && *text) ea_gseq_lit(q, b, text, strlen(text));
}

/* ---- Qwen3-Coder's parameter blocks ------------------------------------------------ */

static const ea_grange NOT_LT[] = {{'<', '<'}};
static const ea_grange NOT_SLASH_LT[] = {{'/', '/'}, {'<', '<'}};

/* Raw text with no "</" in it:  body ::= [^<]* tail;  tail ::= "" | "<" lt;
 * lt ::= "" | "<" lt | [^/<] body */
static int raw_rule(xc *c) {
    if (c->r_raw >= 0) return c->r_raw;
    int body = ea_gb_rule(c->b, "raw text"), tail = ea_gb_rule(c->b, "raw text"), lt = ea_gb_rule(c->b, "raw text");
    ea_gseq q = {0};
    ea_gseq_chars(&q, c->b, NOT_LT, 1, 1, 0, -1);
    ea_gseq_ref(&q, tail);
    ea_gb_alt(c->b, body, &q);
    ea_gseq_clear(&q);
    ea_gb_alt(c->b, tail, &q);
    ea_gb_alt(c->b, lt, &q);
    lit_text(&q, c->b, "<");
    ea_gseq_ref(&q, lt);
    ea_gb_alt(c->b, tail, &q);
    ea_gb_alt(c->b, lt, &q);
    ea_gseq_clear(&q);
    ea_gseq_chars(&q, c->b, NOT_SLASH_LT, 2, 1, 1, 1);
    ea_gseq_ref(&q, body);
    ea_gb_alt(c->b, lt, &q);
    ea_gseq_deinit(&q);
    return c->r_raw = body;
}

int ea_schema_takes_strings(const json_t *s) {
    json_t *ty = json_object_get(s, "type"), *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (ty) return json_is_string(ty) && !strcmp(json_string_value(ty), "string");
    if (cn) return json_is_string(cn);
    if (!json_is_array(en) || !json_array_size(en)) return 0;
    size_t i;
    json_t *v;
    json_array_foreach(en, i, v) if (!json_is_string(v)) return 0;
    return 1;
}

/* A raw string value of schema s (ea_schema_takes_strings(s)). */
static ea_status raw_value_rule(xc *c, const json_t *s, const char *path, int *rule) {
    char p[PATH_LEN + 400];
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    json_t *mnl = json_object_get(s, "minLength"), *mxl = json_object_get(s, "maxLength");
    if (en || cn) {
        json_t *one = cn ? json_pack("[O]", cn) : NULL;
        const json_t *vals = cn ? one : en;
        size_t n = json_array_size(vals);
        const char **t = ea_calloc(n ? n : 1, sizeof *t);
        size_t *lens = ea_calloc(n ? n : 1, sizeof *lens);
        ea_status st = t && lens ? EA_OK : ea_err(EA_ERR_NOMEM, "tools");
        for (size_t i = 0; st == EA_OK && i < n; i++) {
            json_t *v = json_array_get(vals, i);
            snprintf(p, sizeof p, "%s.%s", path, cn ? "const" : "enum");
            if (!json_is_string(v)) st = xfail(c, p, "'%s' must hold strings for a string parameter", p);
            else if (strstr(json_string_value(v), "</"))
                st = xfail(c, p, "'%s': a value written raw between parameter tags cannot hold \"</\"", p);
            else t[i] = json_string_value(v), lens[i] = json_string_length(v);
        }
        if (st == EA_OK && (*rule = ea__gb_literals_rule(c->b, t, lens, (int)n, path)) < 0)
            st = xfail(c, path, "'%s': a value is not valid UTF-8", path);
        ea_free(t), ea_free(lens), json_decref(one);
        return st;
    }
    const char *re = NULL;
    if (fmt) {
        snprintf(p, sizeof p, "%s.format", path);
        if (!json_is_string(fmt) || !(re = ea__json_format_regex(json_string_value(fmt))))
            return xfail(c, p, "format must be one of date, time, date-time, uuid, email, ipv4");
    }
    if (pat) {
        snprintf(p, sizeof p, "%s.pattern", path);
        size_t n = json_is_string(pat) ? json_string_length(pat) : 0;
        re = json_is_string(pat) ? json_string_value(pat) : "";
        if (fmt) return xfail(c, p, "'pattern' together with 'format' is not supported");
        if (n < 2 || re[0] != '^' || re[n - 1] != '$' || re[n - 2] == '\\')
            return xfail(c, p, "only anchored patterns (^...$) are supported: the whole string must match");
    }
    if (re) {
        char e[200] = "";
        if (ea_gb_regex_rule(c->b, re, strlen(re), 0, rule, e, sizeof e) != EA_OK)
            return xfail(c, pat ? p : path, "pattern: %s", e);
        return EA_OK;
    }
    if (mnl || mxl) {
        long long lo = json_is_integer(mnl) ? json_integer_value(mnl) : mnl ? -1 : 0;
        long long hi = json_is_integer(mxl) ? json_integer_value(mxl) : mxl ? -2 : -1;
        if (lo < 0 || lo > 100000 || hi < -1 || (hi >= 0 && (hi < lo || hi > 100000)))
            return xfail(c, path, "minLength/maxLength must be integers with 0 <= minLength <= maxLength <= 100000");
        ea_gseq q = {0};
        ea_gseq_chars(&q, c->b, NOT_LT, 1, 1, (int)lo, (int)hi); /* bounded raw text: no '<' at all */
        *rule = ea__gb_rule_of(c->b, &q, path);
        ea_gseq_deinit(&q);
        return EA_OK;
    }
    *rule = raw_rule(c);
    return EA_OK;
}

/* Keys a parameters schema may carry at its top for xml_params. */
static const char *const XML_TOP[] = {"type", "properties", "required", "additionalProperties", "title",
                                      "description", "$defs", "definitions", "$schema", "$id", "$comment", NULL};

/* The parameter blocks of one function: see grammar.h (xml_params). */
static ea_status xml_params_rule(xc *c, const json_t *params, const char *path, int *rule) {
    char p[PATH_LEN + 300];
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)params, key, v) {
        int ok = 0;
        for (size_t i = 0; XML_TOP[i] && !ok; i++) ok = !strcmp(key, XML_TOP[i]);
        snprintf(p, sizeof p, "%s.%s", path, key);
        if (!ok)
            return xfail(c, p, "'%s': this model writes arguments as <parameter=...> blocks, so its parameters schema "
                               "must be an object with 'properties' ('%s' is not supported there)", p, key);
    }
    json_t *ty = json_object_get(params, "type"), *props = json_object_get(params, "properties");
    json_t *req = json_object_get(params, "required"), *ap = json_object_get(params, "additionalProperties");
    snprintf(p, sizeof p, "%s.type", path);
    if (ty && !(json_is_string(ty) && !strcmp(json_string_value(ty), "object")))
        return xfail(c, p, "'%s' must be \"object\"", p);
    snprintf(p, sizeof p, "%s.properties", path);
    if (props && !json_is_object(props)) return xfail(c, p, "'%s' must be an object", p);
    snprintf(p, sizeof p, "%s.required", path);
    if (req && !json_is_array(req)) return xfail(c, p, "'%s' must be an array of property names", p);
    for (size_t i = 0; req && i < json_array_size(req); i++) {
        json_t *x = json_array_get(req, i);
        snprintf(p, sizeof p, "%s.required[%zu]", path, i);
        if (!json_is_string(x) || !json_object_get(props, json_string_value(x)))
            return xfail(c, p, "'%s' must name a property in 'properties'", p);
    }
    size_t np = props ? json_object_size(props) : 0;
    int open = ap && !json_is_false(ap);
    ea_gseq q = {0}, item = {0};
    if (np == 0) { /* any parameters of raw text (a map, as for JSON); none when additionalProperties is false */
        if (!json_is_false(ap)) {
            static const ea_grange NAME[] = {{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}, {'-', '.'}};
            lit_text(&item, c->b, "<parameter=");
            ea_gseq_chars(&item, c->b, NAME, 5, 0, 1, 64);
            lit_text(&item, c->b, ">\n");
            ea_gseq_ref(&item, raw_rule(c));
            lit_text(&item, c->b, "\n</parameter>\n");
            ea__gseq_repeat(c->b, &q, &item, 0, -1, path);
        }
        *rule = ea__gb_rule_of(c->b, &q, path);
        ea_gseq_deinit(&q), ea_gseq_deinit(&item);
        return EA_OK;
    }
    if (open) {
        snprintf(p, sizeof p, "%s.additionalProperties", path);
        return xfail(c, p, "additionalProperties other than false, together with 'properties', is not supported "
                           "(leave it out: only the listed properties are generated)");
    }
    /* rest = the blocks from property k on: kv[k] rest[k+1], or rest[k+1] when k is optional */
    int rest = ea__gb_rule_of(c->b, &q, path);
    int *kv = ea_malloc(np * sizeof *kv), *opt = ea_malloc(np * sizeof *opt);
    ea_status st = kv && opt ? EA_OK : ea_err(EA_ERR_NOMEM, "tools");
    size_t i = 0;
    json_object_foreach(props, key, v) {
        if (st != EA_OK) break;
        snprintf(p, sizeof p, "%s.properties.%s", path, key);
        if (!*key || strpbrk(key, "<>\n")) {
            st = xfail(c, p, "'%s': a parameter name written as <parameter=NAME> cannot be empty or hold '<', '>' or "
                             "a newline", p);
            break;
        }
        int val;
        if (ea_schema_takes_strings(v)) st = raw_value_rule(c, v, p, &val);
        else st = ea__gb_json_subschema_rule(c->b, params, path, v, p, NULL, &val, c->err_path, c->n_path, c->err, c->n_err);
        if (st != EA_OK) break;
        ea_gseq_clear(&q);
        lit_text(&q, c->b, "<parameter=");
        lit_text(&q, c->b, key);
        lit_text(&q, c->b, ">\n");
        ea_gseq_ref(&q, val);
        lit_text(&q, c->b, "\n</parameter>\n");
        kv[i] = ea__gb_rule_of(c->b, &q, p);
        opt[i] = 1;
        for (size_t k = 0; req && k < json_array_size(req); k++)
            if (!strcmp(json_string_value(json_array_get(req, k)), key)) opt[i] = 0;
        i++;
    }
    for (size_t k = np; st == EA_OK && k-- > 0;) {
        int r = ea_gb_rule(c->b, path);
        ea_gseq_clear(&q);
        ea_gseq_ref(&q, kv[k]);
        ea_gseq_ref(&q, rest);
        st = ea_gb_alt(c->b, r, &q);
        if (opt[k] && st == EA_OK) {
            ea_gseq_clear(&q);
            ea_gseq_ref(&q, rest);
            st = ea_gb_alt(c->b, r, &q);
        }
        rest = r;
    }
    *rule = rest;
    ea_free(kv), ea_free(opt);
    ea_gseq_deinit(&q), ea_gseq_deinit(&item);
    return st;
}

/* ---- the calls ------------------------------------------------------------------------ */

ea_status ea_grammar_tool_calls(const json_t *tools, const char *path, const ea_tool_call_syntax *syntax,
                                ea_grammar **out, char *err_path, size_t n_path, char *err, size_t n_err) {
    static const ea_tool_call_syntax bare = {.call_open = "{\"name\":", .name_args = ",\"arguments\":",
                                             .call_close = "}", .name_json = 1};
    const ea_tool_call_syntax *sy = syntax ? syntax : &bare;
    *out = NULL;
    size_t n = json_is_array(tools) ? json_array_size(tools) : 0;
    if (n == 0) {
        if (err_path && n_path) snprintf(err_path, n_path, "%s", path);
        if (err && n_err) snprintf(err, n_err, "'%s' must be a non-empty array of functions", path);
        return ea_err(EA_ERR_INVALID_ARG, "tools: empty");
    }
    ea_gbuild *b;
    EA_TRY(ea_gb_create(&b));
    int call = ea_gb_rule(b, path);
    ea_gseq q = {0};
    ea_status st = EA_OK;
    int raw = -1; /* the free raw-text rule, shared by the functions */
    int index = -1; /* ":" and the call's index (name_index) */
    if (sy->name_index) st = ea_gb_regex_rule(b, ":[0-9]{1,4}", strlen(":[0-9]{1,4}"), 0, &index, err, n_err);
    for (size_t i = 0; i < n && st == EA_OK; i++) {
        char p[PATH_LEN];
        json_t *f = json_object_get(json_array_get(tools, i), "function");
        json_t *name = json_object_get(f, "name"), *params = json_object_get(f, "parameters");
        snprintf(p, sizeof p, "%.200s[%zu].function.name", path, i);
        if (!json_is_string(name)) {
            if (err_path && n_path) snprintf(err_path, n_path, "%s", p);
            if (err && n_err) snprintf(err, n_err, "'%s' must be a string", p);
            st = ea_err(EA_ERR_INVALID_ARG, "tools: no function name");
            break;
        }
        snprintf(p, sizeof p, "%.200s[%zu].function.parameters", path, i);
        int args;
        json_t *any = NULL;
        if (!params || json_is_null(params)) /* OpenAI: no parameters is an empty parameter list */
            params = any = json_pack("{s:s,s:{},s:b}", "type", "object", "properties", "additionalProperties", 0);
        if (sy->xml_params) {
            xc x = {.b = b, .err_path = err_path, .n_path = n_path, .err = err, .n_err = n_err, .r_raw = raw};
            st = xml_params_rule(&x, params, p, &args);
            raw = x.r_raw;
        } else {
            st = ea_gb_json_schema_rule(b, params, p, NULL, &args, err_path, n_path, err, n_err);
        }
        json_decref(any);
        if (st != EA_OK) break;
        char *quoted = sy->name_json ? json_dumps(name, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        if (sy->name_json && !quoted) {
            st = ea_err(EA_ERR_NOMEM, "tools");
            break;
        }
        ea_gseq_clear(&q);
        lit_text(&q, b, sy->call_open);
        lit_text(&q, b, quoted ? quoted : json_string_value(name));
        free(quoted);
        if (index >= 0) ea_gseq_ref(&q, index);
        lit_text(&q, b, sy->name_args);
        ea_gseq_ref(&q, args);
        lit_text(&q, b, sy->call_close);
        st = ea_gb_alt(b, call, &q);
    }
    int root = -1;
    if (st == EA_OK) { /* root ::= begin call more end;  more ::= "" | sep call more */
        int more = -1;
        if (sy->many) {
            more = ea_gb_rule(b, "more calls");
            ea_gseq_clear(&q);
            st = ea_gb_alt(b, more, &q);
            lit_text(&q, b, sy->sep);
            ea_gseq_ref(&q, call);
            ea_gseq_ref(&q, more);
            if (st == EA_OK) st = ea_gb_alt(b, more, &q);
        }
        root = ea_gb_rule(b, "tool calls");
        ea_gseq_clear(&q);
        lit_text(&q, b, sy->begin);
        ea_gseq_ref(&q, call);
        if (more >= 0) ea_gseq_ref(&q, more);
        lit_text(&q, b, sy->end);
        if (st == EA_OK) st = ea_gb_alt(b, root, &q);
    }
    ea_gseq_deinit(&q);
    if (st != EA_OK) {
        ea_gb_destroy(b);
        return st;
    }
    return ea_gb_finish(b, root, out, err, n_err);
}
