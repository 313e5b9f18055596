/*
 * json_schema.c — a JSON Schema to the grammar of its instances, written as
 * compact JSON (no whitespace at all: short outputs that end, even from a
 * weak model; docs/decisions.md "Structured outputs").
 *
 * Supported (anything else is refused with the JSON path of the keyword):
 *   type (object, array, string, number, integer, boolean, null, or a list)
 *   properties (emitted in the schema's order), required (the others may be
 *   left out), additionalProperties false or absent (both: only the listed
 *   properties; true or a schema only on an object without properties: a map)
 *   items, minItems, maxItems; enum, const (their compact JSON text);
 *   anyOf, oneOf (as anyOf: exclusivity is not enforced), allOf of one schema;
 *   $ref to "#", "#/$defs/x", "#/definitions/x" or any local JSON pointer,
 *   recursion included (refused if it has no base case);
 *   string minLength, maxLength (code points; a bounded string has no escape
 *   sequences), pattern (regex.c, anchored; not with min/maxLength), format
 *   date, time, date-time, uuid, email, ipv4;
 *   integer minimum, maximum, exclusiveMinimum, exclusiveMaximum (digit-wise
 *   ranges); number minimum/maximum when both are integers >= 0 (or only a
 *   minimum), no exponent then;
 *   annotations ignored by nature: title, description, default, examples,
 *   $schema, $id, $comment, $defs/definitions themselves.
 * Numbers have at most 16 integer digits, 16 fraction digits and a 2-digit
 * exponent; an unbounded string allows JSON escapes. A generic value ({} or
 * true, json_object's members) nests at most opts->max_depth levels.
 *
 * Rules are named by the JSON path of their schema, so a grammar check
 * failing on a rule (recursion with no base case) reports that path.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar_internal.h"

#define PATH_MAX_LEN 400

typedef struct {
    const json_t *node;
    int rule;
} memo;

typedef struct {
    ea_gbuild *b;
    const json_t *root;
    const char *root_path;
    int max_depth;
    char *err_path, *err;
    size_t n_path, n_err;
    memo *memo;
    size_t n_memo, cap_memo;
    int r_str, r_num, r_int, r_bool, r_null; /* shared rules, -1 until made */
    int r_any[16], r_obj[16], r_arr[16];     /* generic value by depth */
    int level;
} jc;

__attribute__((format(printf, 3, 4))) static int jfail(jc *c, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ea__gfail_path(c->err_path, c->n_path, c->err, c->n_err, path, fmt, ap);
    va_end(ap);
    return -1;
}

static void lit(jc *c, ea_gseq *s, const char *t) {
    ea_gseq_lit(s, c->b, t, strlen(t));
}

/* A rule from a regex (not in a JSON string). */
static int re_rule(jc *c, const char *re, int json_string, const char *path) {
    int r;
    char e[200];
    if (ea_gb_regex_rule(c->b, re, strlen(re), json_string, &r, e, sizeof e) != EA_OK)
        return jfail(c, path, "pattern: %s", e);
    return r;
}

static const ea_grange STR_PLAIN[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};

/* "..." with escapes, unbounded: str ::= '"' body '"'; body ::= plain* tail; tail ::= "" | esc body */
static int str_rule(jc *c) {
    if (c->r_str >= 0) return c->r_str;
    ea_gseq s = {0};
    int esc = re_rule(c, "\\\\([\"\\\\/bfnrt]|u[0-9a-fA-F]{4})", 0, "");
    int body = ea_gb_rule(c->b, "string"), tail = ea_gb_rule(c->b, "string");
    ea_gseq_chars(&s, c->b, STR_PLAIN, 3, 0, 0, -1);
    ea_gseq_ref(&s, tail);
    ea_gb_alt(c->b, body, &s);
    ea_gseq_clear(&s);
    ea_gb_alt(c->b, tail, &s);
    ea_gseq_ref(&s, esc);
    ea_gseq_ref(&s, body);
    ea_gb_alt(c->b, tail, &s);
    ea_gseq_clear(&s);
    lit(c, &s, "\"");
    ea_gseq_ref(&s, body);
    lit(c, &s, "\"");
    c->r_str = ea__gb_rule_of(c->b, &s, "string");
    ea_gseq_deinit(&s);
    return c->r_str;
}

/* A literal JSON value (enum, const) as its compact text. */
static int json_text(jc *c, ea_gseq *s, const json_t *v, const char *path) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) return jfail(c, path, "cannot serialise the value");
    lit(c, s, t);
    free(t);
    return 0;
}

/* Decimal text of v into buf (v >= 0). */
static void dec(unsigned long long v, char *buf, size_t n) {
    snprintf(buf, n, "%llu", v);
}

/* Regex for the integers lo..hi of one digit count (strings a, b of equal length). */
static void range_same_len(const char *a, const char *b, size_t n, char *out, size_t cap) {
    size_t len = strlen(out);
    if (n == 0) return;
    if (n == 1) {
        snprintf(out + len, cap - len, "[%c-%c]", a[0], b[0]);
        return;
    }
    if (a[0] == b[0]) {
        snprintf(out + len, cap - len, "%c", a[0]);
        range_same_len(a + 1, b + 1, n - 1, out, cap);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', n - 1), nines[n - 1] = 0;
    memset(zeros, '0', n - 1), zeros[n - 1] = 0;
    /* a0 (a' .. 99) | [a0+1 - b0-1] [0-9]{n-1} | b0 (00 .. b') */
    len = strlen(out);
    snprintf(out + len, cap - len, "(%c(", a[0]);
    range_same_len(a + 1, nines, n - 1, out, cap);
    len = strlen(out);
    if (b[0] - a[0] > 1)
        snprintf(out + len, cap - len, ")|[%c-%c][0-9]{%zu}|%c(", a[0] + 1, b[0] - 1, n - 1, b[0]);
    else
        snprintf(out + len, cap - len, ")|%c(", b[0]);
    range_same_len(zeros, b + 1, n - 1, out, cap);
    len = strlen(out);
    snprintf(out + len, cap - len, "))");
}

/* Regex for the non-negative integers lo..hi (no leading zeros): one branch per digit count. */
static void range_re(unsigned long long lo, unsigned long long hi, char *out, size_t cap) {
    out[0] = 0;
    unsigned long long p = 1; /* 10^(d-1) */
    for (int d = 1; d <= 17; d++, p *= 10) {
        unsigned long long a = d == 1 ? 0 : p, b = p * 10 - 1;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a > b) continue;
        char sa[24], sb[24];
        dec(a, sa, sizeof sa);
        dec(b, sb, sizeof sb);
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s(", out[0] ? "|" : "");
        range_same_len(sa, sb, strlen(sa), out, cap);
        len = strlen(out);
        snprintf(out + len, cap - len, ")");
    }
}

#define INT_LIM 9999999999999999.0 /* 16 digits */

/* Integer lo..hi (doubles holding integers, within +-INT_LIM) as a regex. */
static void int_range_re(double lo, double hi, char *out, size_t cap) {
    char a[2048] = "", b[2048] = "";
    if (hi >= 0) range_re(lo > 0 ? (unsigned long long)lo : 0, (unsigned long long)hi, a, sizeof a);
    if (lo < 0) range_re(hi < -1 ? (unsigned long long)-hi : 1, (unsigned long long)-lo, b, sizeof b);
    if (a[0] && b[0]) snprintf(out, cap, "(%s)|-(%s)", a, b);
    else if (a[0]) snprintf(out, cap, "%s", a);
    else snprintf(out, cap, "-(%s)", b);
}

static int num_field(jc *c, const json_t *s, const char *key, double *v, const char *path) {
    json_t *x = json_object_get(s, key);
    if (!x) return 0;
    char p[PATH_MAX_LEN + 64];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!json_is_number(x)) return jfail(c, p, "'%s' must be a number", key);
    *v = json_number_value(x);
    return 1;
}

static int number_rule(jc *c, const json_t *s, int integer, const char *path) {
    double mn = -INT_LIM, mx = INT_LIM, v = 0;
    int has_min = 0, has_max = 0, k;
    if ((k = num_field(c, s, "minimum", &v, path)) < 0) return -1;
    if (k) mn = v, has_min = 1;
    if ((k = num_field(c, s, "maximum", &v, path)) < 0) return -1;
    if (k) mx = v, has_max = 1;
    if ((k = num_field(c, s, "exclusiveMinimum", &v, path)) < 0) return -1;
    if (k) {
        if (!integer || floor(v) != v)
            return jfail(c, path, "exclusiveMinimum is supported only on integers, with an integer bound");
        mn = v + 1, has_min = 1;
    }
    if ((k = num_field(c, s, "exclusiveMaximum", &v, path)) < 0) return -1;
    if (k) {
        if (!integer || floor(v) != v)
            return jfail(c, path, "exclusiveMaximum is supported only on integers, with an integer bound");
        mx = v - 1, has_max = 1;
    }
    if (!has_min && !has_max) {
        int *r = integer ? &c->r_int : &c->r_num;
        if (*r < 0)
            *r = re_rule(c, integer ? "-?(0|[1-9][0-9]{0,15})"
                                    : "-?(0|[1-9][0-9]{0,15})(\\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?",
                         0, path);
        return *r;
    }
    if (integer) {
        mn = ceil(mn);
        mx = floor(mx);
    }
    if (fabs(mn) > INT_LIM || fabs(mx) > INT_LIM)
        return jfail(c, path, "minimum/maximum beyond 16 digits are not supported");
    if (mn > mx) return jfail(c, path, "minimum is above maximum: no number is allowed");
    char re[16384]; /* not static: schemas compile on many HTTP threads at once */
    if (integer) {
        int_range_re(mn, mx, re, sizeof re);
    } else {
        if (mn < 0 || floor(mn) != mn || (has_max && floor(mx) != mx))
            return jfail(c, path, "number minimum/maximum are supported only as integers >= 0 (use integer, or "
                                  "leave the bounds out)");
        char a[8192];
        if (mx > mn) {
            int_range_re(mn, mx - 1, a, sizeof a);
            snprintf(re, sizeof re, "(%s)(\\.[0-9]{1,16})?|%.0f(\\.0{1,16})?", a, mx);
        } else {
            snprintf(re, sizeof re, "%.0f(\\.0{1,16})?", mx);
        }
    }
    return re_rule(c, re, 0, path);
}

static const char *const FORMATS[][2] = {
    {"date", "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"},
    {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"date-time", "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
                  "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    {"email", "[a-zA-Z0-9_+-]{1,20}(\\.[a-zA-Z0-9_+-]{1,20}){0,2}@[a-zA-Z0-9]([a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?){0,3}\\.[a-zA-Z]{2,6}"},
    {"ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
};

const char *ea__json_format_regex(const char *name) {
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (strcmp(name, FORMATS[i][0]) == 0) return FORMATS[i][1];
    return NULL;
}

static int string_rule(jc *c, const json_t *s, const char *path) {
    char p[PATH_MAX_LEN + 64];
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    json_t *mnl = json_object_get(s, "minLength"), *mxl = json_object_get(s, "maxLength");
    const char *re = NULL;
    if (fmt) {
        snprintf(p, sizeof p, "%s.format", path);
        if (!json_is_string(fmt)) return jfail(c, p, "'format' must be a string");
        re = ea__json_format_regex(json_string_value(fmt));
        if (!re)
            return jfail(c, p, "format '%s' is not supported (date, time, date-time, uuid, email, ipv4 are)",
                         json_string_value(fmt));
    }
    if (pat) {
        snprintf(p, sizeof p, "%s.pattern", path);
        if (!json_is_string(pat)) return jfail(c, p, "'pattern' must be a string");
        if (re) return jfail(c, p, "'pattern' together with 'format' is not supported");
        re = json_string_value(pat);
        size_t n = strlen(re);
        if (n == 0 || re[0] != '^' || re[n - 1] != '$' || (n >= 2 && re[n - 2] == '\\'))
            return jfail(c, p, "only anchored patterns (^...$) are supported: the whole string must match");
    }
    if (re && (mnl || mxl))
        return jfail(c, path, "minLength/maxLength together with pattern or format are not supported");
    ea_gseq q = {0};
    lit(c, &q, "\"");
    if (re) {
        int r = re_rule(c, re, 1, pat ? p : path);
        if (r < 0) {
            ea_gseq_deinit(&q);
            return -1;
        }
        ea_gseq_ref(&q, r);
    } else if (mnl || mxl) {
        long long lo = 0, hi = -1;
        if (mnl) {
            snprintf(p, sizeof p, "%s.minLength", path);
            if (!json_is_integer(mnl) || json_integer_value(mnl) < 0 || json_integer_value(mnl) > 100000) {
                ea_gseq_deinit(&q);
                return jfail(c, p, "'minLength' must be an integer in [0, 100000]");
            }
            lo = json_integer_value(mnl);
        }
        if (mxl) {
            snprintf(p, sizeof p, "%s.maxLength", path);
            if (!json_is_integer(mxl) || json_integer_value(mxl) < lo || json_integer_value(mxl) > 100000) {
                ea_gseq_deinit(&q);
                return jfail(c, p, "'maxLength' must be an integer in [minLength, 100000]");
            }
            hi = json_integer_value(mxl);
        }
        ea_gseq_chars(&q, c->b, STR_PLAIN, 3, 0, (int)lo, (int)hi);
    } else {
        ea_gseq_deinit(&q);
        return str_rule(c);
    }
    lit(c, &q, "\"");
    int r = ea__gb_rule_of(c->b, &q, path);
    ea_gseq_deinit(&q);
    return r;
}

static int gen(jc *c, const json_t *s, const char *path);

/* Any JSON value nesting at most d more levels. */
static int any_rule(jc *c, int d) {
    if (d < 0) d = 0;
    if (d > 15) d = 15;
    if (c->r_any[d] >= 0) return c->r_any[d];
    int r = c->r_any[d] = ea_gb_rule(c->b, "value");
    ea_gseq s = {0};
    str_rule(c);
    number_rule(c, NULL, 0, "value");
    const char *words[] = {"true", "false", "null"};
    for (int i = 0; i < 2; i++) {
        ea_gseq_clear(&s);
        ea_gseq_ref(&s, i == 0 ? c->r_str : c->r_num);
        ea_gb_alt(c->b, r, &s);
    }
    for (int i = 0; i < 3; i++) {
        ea_gseq_clear(&s);
        lit(c, &s, words[i]);
        ea_gb_alt(c->b, r, &s);
    }
    if (d > 0) {
        int sub = any_rule(c, d - 1);
        /* object: {} | { str : v (, str : v)* } ; array: [] | [ v (, v)* ] */
        for (int k = 0; k < 2; k++) {
            ea_gseq item = {0}, more = {0};
            if (k == 0) {
                ea_gseq_ref(&item, c->r_str);
                lit(c, &item, ":");
            }
            ea_gseq_ref(&item, sub);
            lit(c, &more, ",");
            ea__gseq_append(&more, &item);
            ea_gseq_clear(&s);
            lit(c, &s, k == 0 ? "{}" : "[]");
            ea_gb_alt(c->b, r, &s);
            ea_gseq_clear(&s);
            lit(c, &s, k == 0 ? "{" : "[");
            ea__gseq_append(&s, &item);
            ea__gseq_repeat(c->b, &s, &more, 0, -1, k == 0 ? "object" : "array");
            lit(c, &s, k == 0 ? "}" : "]");
            ea_gb_alt(c->b, r, &s);
            ea_gseq_deinit(&item);
            ea_gseq_deinit(&more);
        }
    }
    ea_gseq_deinit(&s);
    return r;
}

/* 1 if the schema object s has key. */
static int has(const json_t *s, const char *key) {
    return json_object_get(s, key) != NULL;
}

static int object_rule(jc *c, const json_t *s, const char *path) {
    char p[PATH_MAX_LEN + 64];
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *ap = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) {
        snprintf(p, sizeof p, "%s.properties", path);
        return jfail(c, p, "'properties' must be an object");
    }
    if (req && !json_is_array(req)) {
        snprintf(p, sizeof p, "%s.required", path);
        return jfail(c, p, "'required' must be an array of property names");
    }
    if (ap && !json_is_boolean(ap) && !json_is_object(ap)) {
        snprintf(p, sizeof p, "%s.additionalProperties", path);
        return jfail(c, p, "'additionalProperties' must be a boolean or a schema");
    }
    size_t np = props ? json_object_size(props) : 0;
    for (size_t i = 0; req && i < json_array_size(req); i++) {
        json_t *x = json_array_get(req, i);
        snprintf(p, sizeof p, "%s.required[%zu]", path, i);
        if (!json_is_string(x)) return jfail(c, p, "'required' entries must be strings");
        if (!props || !json_object_get(props, json_string_value(x)))
            return jfail(c, p, "required property '%s' is not in 'properties' (only listed properties are "
                               "generated)", json_string_value(x));
    }
    int open = ap && !json_is_false(ap);
    if (np == 0) {
        if (!ap || json_is_true(ap) || json_is_object(ap)) { /* a map: any keys */
            int v;
            if (ap && json_is_object(ap)) {
                snprintf(p, sizeof p, "%s.additionalProperties", path);
                if ((v = gen(c, ap, p)) < 0) return -1;
            } else {
                v = any_rule(c, c->max_depth - 1);
            }
            ea_gseq item = {0}, more = {0}, q = {0};
            ea_gseq_ref(&item, str_rule(c));
            lit(c, &item, ":");
            ea_gseq_ref(&item, v);
            lit(c, &more, ",");
            ea__gseq_append(&more, &item);
            int r = ea_gb_rule(c->b, path);
            lit(c, &q, "{}");
            ea_gb_alt(c->b, r, &q);
            ea_gseq_clear(&q);
            lit(c, &q, "{");
            ea__gseq_append(&q, &item);
            ea__gseq_repeat(c->b, &q, &more, 0, -1, path);
            lit(c, &q, "}");
            ea_gb_alt(c->b, r, &q);
            ea_gseq_deinit(&item);
            ea_gseq_deinit(&more);
            ea_gseq_deinit(&q);
            return r;
        }
        ea_gseq q = {0};
        lit(c, &q, "{}");
        int r = ea__gb_rule_of(c->b, &q, path);
        ea_gseq_deinit(&q);
        return r;
    }
    if (open) {
        snprintf(p, sizeof p, "%s.additionalProperties", path);
        return jfail(c, p, "additionalProperties other than false, together with 'properties', is not supported "
                           "(leave it out: only the listed properties are generated)");
    }
    /* kv[i] = "key":value; rest[i][e] = the properties from i on, e = 1 if one was emitted before */
    int *kv = ea_malloc(np * sizeof *kv), *opt = ea_malloc(np * sizeof *opt);
    int(*rest)[2] = ea_malloc((np + 1) * sizeof *rest);
    if (!kv || !opt || !rest) {
        ea_free(kv), ea_free(opt), ea_free(rest);
        return jfail(c, path, "out of memory");
    }
    const char *key;
    json_t *sub;
    size_t i = 0;
    int rc = 0;
    json_object_foreach(props, key, sub) {
        snprintf(p, sizeof p, "%s.properties.%s", path, key);
        int v = gen(c, sub, p);
        if (v < 0) {
            rc = -1;
            break;
        }
        ea_gseq q = {0};
        json_t *ks = json_string(key);
        json_text(c, &q, ks, p);
        json_decref(ks);
        lit(c, &q, ":");
        ea_gseq_ref(&q, v);
        kv[i] = ea__gb_rule_of(c->b, &q, p);
        ea_gseq_deinit(&q);
        opt[i] = 1;
        for (size_t k = 0; req && k < json_array_size(req); k++)
            if (strcmp(json_string_value(json_array_get(req, k)), key) == 0) opt[i] = 0;
        i++;
    }
    int r = -1;
    if (rc == 0) {
        ea_gseq q = {0};
        for (int e = 0; e < 2; e++) {
            rest[np][e] = ea_gb_rule(c->b, path);
            ea_gb_alt(c->b, rest[np][e], &q);
        }
        for (size_t k = np; k-- > 0;) {
            for (int e = 0; e < 2; e++) {
                rest[k][e] = ea_gb_rule(c->b, path);
                ea_gseq_clear(&q);
                if (e) lit(c, &q, ",");
                ea_gseq_ref(&q, kv[k]);
                ea_gseq_ref(&q, rest[k + 1][1]);
                ea_gb_alt(c->b, rest[k][e], &q);
                if (opt[k]) {
                    ea_gseq_clear(&q);
                    ea_gseq_ref(&q, rest[k + 1][e]);
                    ea_gb_alt(c->b, rest[k][e], &q);
                }
            }
        }
        ea_gseq_clear(&q);
        lit(c, &q, "{");
        ea_gseq_ref(&q, rest[0][0]);
        lit(c, &q, "}");
        r = ea__gb_rule_of(c->b, &q, path);
        ea_gseq_deinit(&q);
    }
    ea_free(kv), ea_free(opt), ea_free(rest);
    return r;
}

static int array_rule(jc *c, const json_t *s, const char *path) {
    char p[PATH_MAX_LEN + 64];
    json_t *items = json_object_get(s, "items");
    long long lo = 0, hi = -1;
    json_t *x;
    if ((x = json_object_get(s, "minItems"))) {
        snprintf(p, sizeof p, "%s.minItems", path);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 1000)
            return jfail(c, p, "'minItems' must be an integer in [0, 1000]");
        lo = json_integer_value(x);
    }
    if ((x = json_object_get(s, "maxItems"))) {
        snprintf(p, sizeof p, "%s.maxItems", path);
        if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > 1000)
            return jfail(c, p, "'maxItems' must be an integer in [minItems, 1000]");
        hi = json_integer_value(x);
    }
    int v;
    if (items) {
        snprintf(p, sizeof p, "%s.items", path);
        if (json_is_array(items)) return jfail(c, p, "'items' as an array (tuples) is not supported");
        if ((v = gen(c, items, p)) < 0) return -1;
    } else {
        v = any_rule(c, c->max_depth - 1);
    }
    int r = ea_gb_rule(c->b, path);
    ea_gseq q = {0}, more = {0};
    if (lo == 0) {
        lit(c, &q, "[]");
        ea_gb_alt(c->b, r, &q);
    }
    if (hi != 0) {
        ea_gseq_clear(&q);
        lit(c, &q, "[");
        ea_gseq_ref(&q, v);
        lit(c, &more, ",");
        ea_gseq_ref(&more, v);
        ea__gseq_repeat(c->b, &q, &more, lo > 1 ? (int)lo - 1 : 0, hi < 0 ? -1 : (int)hi - 1, path);
        lit(c, &q, "]");
        ea_gb_alt(c->b, r, &q);
    }
    ea_gseq_deinit(&q);
    ea_gseq_deinit(&more);
    return r;
}

static const char *const TYPES[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

static int type_rule(jc *c, const json_t *s, const char *type, const char *path) {
    if (strcmp(type, "object") == 0) return object_rule(c, s, path);
    if (strcmp(type, "array") == 0) return array_rule(c, s, path);
    if (strcmp(type, "string") == 0) return string_rule(c, s, path);
    if (strcmp(type, "number") == 0) return number_rule(c, s, 0, path);
    if (strcmp(type, "integer") == 0) return number_rule(c, s, 1, path);
    ea_gseq q = {0};
    if (strcmp(type, "boolean") == 0) {
        if (c->r_bool < 0) {
            c->r_bool = ea_gb_rule(c->b, "boolean");
            lit(c, &q, "true");
            ea_gb_alt(c->b, c->r_bool, &q);
            ea_gseq_clear(&q);
            lit(c, &q, "false");
            ea_gb_alt(c->b, c->r_bool, &q);
        }
        ea_gseq_deinit(&q);
        return c->r_bool;
    }
    if (c->r_null < 0) {
        lit(c, &q, "null");
        c->r_null = ea__gb_rule_of(c->b, &q, "null");
    }
    ea_gseq_deinit(&q);
    return c->r_null;
}

/* Keywords a schema may carry; anything else is refused. */
static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
    "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "title", "description", "default", "examples",
    "$schema", "$id", "$comment", NULL};

/* Resolve a local JSON pointer ("#", "#/a/b", with ~0 ~1 escapes). */
static const json_t *resolve(const json_t *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const json_t *cur = root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t k = 0;
        while (*p && *p != '/' && k + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') tok[k++] = '~', p += 2;
            else if (p[0] == '~' && p[1] == '1') tok[k++] = '/', p += 2;
            else tok[k++] = *p++;
        }
        tok[k] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            cur = *end || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = NULL;
        }
        if (!cur) return NULL;
    }
    return *p ? NULL : cur;
}

static int gen_body(jc *c, const json_t *s, const char *path);

/* A rule whose alternatives are the rules ids[0..n) (anyOf, a list of types). */
static int alts_rule(jc *c, const char *path, const int *ids, size_t n) {
    int r = ea_gb_rule(c->b, path);
    ea_gseq q = {0};
    for (size_t i = 0; i < n; i++) {
        ea_gseq_clear(&q);
        ea_gseq_ref(&q, ids[i]);
        ea_gb_alt(c->b, r, &q);
    }
    ea_gseq_deinit(&q);
    return r;
}

static int gen(jc *c, const json_t *s, const char *path) {
    if (strlen(path) > PATH_MAX_LEN) return jfail(c, path, "the schema is nested too deeply");
    if (++c->level > 64) {
        c->level--;
        return jfail(c, path, "the schema is nested too deeply (more than 64 levels)");
    }
    int r = gen_body(c, s, path);
    c->level--;
    return r;
}

static int gen_body(jc *c, const json_t *s, const char *path) {
    char p[PATH_MAX_LEN + 64];
    if (json_is_true(s)) return any_rule(c, c->max_depth);
    if (json_is_false(s)) return jfail(c, path, "the schema false allows no value");
    if (!json_is_object(s)) return jfail(c, path, "a schema must be an object or a boolean");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        int ok = 0;
        for (size_t i = 0; KNOWN[i] && !ok; i++) ok = strcmp(key, KNOWN[i]) == 0;
        if (!ok) {
            snprintf(p, sizeof p, "%s.%s", path, key);
            return jfail(c, p, "the keyword '%s' is not supported", key);
        }
    }
    json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        snprintf(p, sizeof p, "%s.$ref", path);
        if (!json_is_string(ref)) return jfail(c, p, "'$ref' must be a string");
        const json_t *t = resolve(c->root, json_string_value(ref));
        if (!t)
            return jfail(c, p, "'$ref' %s does not resolve to a schema in this document (only local refs \"#...\")",
                         json_string_value(ref));
        for (size_t i = 0; i < c->n_memo; i++)
            if (c->memo[i].node == t) return c->memo[i].rule;
        char tp[PATH_MAX_LEN + 64];
        snprintf(tp, sizeof tp, "%s%s", c->root_path, json_string_value(ref) + 1);
        for (char *q = tp + strlen(c->root_path); *q; q++)
            if (*q == '/') *q = '.';
        int r = ea_gb_rule(c->b, tp);
        if (ea_grow(&c->memo, &c->cap_memo, c->n_memo + 1, sizeof *c->memo, 16)) return jfail(c, p, "out of memory");
        c->memo[c->n_memo++] = (memo){t, r};
        int body = gen(c, t, tp);
        if (body < 0) return -1;
        ea_gseq q = {0};
        ea_gseq_ref(&q, body);
        ea_gb_alt(c->b, r, &q);
        ea_gseq_deinit(&q);
        return r;
    }
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (en || cn) {
        if (en && (!json_is_array(en) || json_array_size(en) == 0)) {
            snprintf(p, sizeof p, "%s.enum", path);
            return jfail(c, p, "'enum' must be a non-empty array");
        }
        /* the values' compact JSON texts, as a trie (many values share prefixes) */
        size_t n = en ? json_array_size(en) : 1;
        char **t = ea_calloc(n, sizeof *t);
        size_t *lens = ea_calloc(n, sizeof *lens);
        int r = t && lens ? 0 : jfail(c, path, "out of memory");
        for (size_t i = 0; r == 0 && i < n; i++) {
            t[i] = json_dumps(en ? json_array_get(en, i) : cn, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!t[i]) r = jfail(c, path, "cannot serialise the value");
            else lens[i] = strlen(t[i]);
        }
        if (r == 0 && (r = ea__gb_literals_rule(c->b, (const char *const *)t, lens, (int)n, path)) < 0)
            r = jfail(c, path, "out of memory");
        for (size_t i = 0; t && i < n; i++) free(t[i]);
        ea_free(t);
        ea_free(lens);
        return r;
    }
    static const char *const comb[] = {"anyOf", "oneOf", "allOf"};
    for (int k = 0; k < 3; k++) {
        json_t *a = json_object_get(s, comb[k]);
        if (!a) continue;
        snprintf(p, sizeof p, "%s.%s", path, comb[k]);
        if (!json_is_array(a) || json_array_size(a) == 0) return jfail(c, p, "'%s' must be a non-empty array", comb[k]);
        if (k == 2 && json_array_size(a) != 1) return jfail(c, p, "'allOf' with more than one schema is not supported");
        if (has(s, "type") || has(s, "properties") || has(s, "items"))
            return jfail(c, p, "'%s' beside type/properties/items is not supported (move them into each branch)",
                         comb[k]);
        size_t n = json_array_size(a);
        int *ids = ea_malloc(n * sizeof *ids);
        if (!ids) return jfail(c, p, "out of memory");
        for (size_t i = 0; i < n; i++) {
            char pi[PATH_MAX_LEN + 128];
            snprintf(pi, sizeof pi, "%s[%zu]", p, i);
            if ((ids[i] = gen(c, json_array_get(a, i), pi)) < 0) {
                ea_free(ids);
                return -1;
            }
        }
        int r = alts_rule(c, path, ids, n);
        ea_free(ids);
        return r;
    }
    json_t *ty = json_object_get(s, "type");
    const char *one = NULL;
    if (!ty) {
        if (has(s, "properties") || has(s, "required") || has(s, "additionalProperties")) one = "object";
        else if (has(s, "items") || has(s, "minItems") || has(s, "maxItems")) one = "array";
        else if (has(s, "pattern") || has(s, "format") || has(s, "minLength") || has(s, "maxLength")) one = "string";
        else if (has(s, "minimum") || has(s, "maximum")) one = "number";
        else return any_rule(c, c->max_depth);
        return type_rule(c, s, one, path);
    }
    snprintf(p, sizeof p, "%s.type", path);
    size_t nt = json_is_array(ty) ? json_array_size(ty) : 1;
    if (!json_is_string(ty) && !(json_is_array(ty) && nt > 0))
        return jfail(c, p, "'type' must be a type name or a non-empty list of them");
    for (size_t i = 0; i < nt; i++) {
        json_t *t = json_is_array(ty) ? json_array_get(ty, i) : ty;
        int ok = 0;
        for (size_t k = 0; json_is_string(t) && k < 7 && !ok; k++) ok = strcmp(json_string_value(t), TYPES[k]) == 0;
        if (!ok) return jfail(c, p, "unknown type (object, array, string, number, integer, boolean, null)");
    }
    if (json_is_string(ty)) return type_rule(c, s, json_string_value(ty), path);
    int ids[7];
    if (nt > 7) return jfail(c, p, "'type' lists a type twice");
    for (size_t i = 0; i < nt; i++)
        if ((ids[i] = type_rule(c, s, json_string_value(json_array_get(ty, i)), path)) < 0) return -1;
    return alts_rule(c, path, ids, nt);
}

static void jc_init(jc *c, ea_gbuild *b, const json_t *root, const char *path, const ea_json_grammar_opts *o) {
    memset(c, 0, sizeof *c);
    c->b = b;
    c->root = root;
    c->root_path = path ? path : "";
    c->max_depth = o && o->max_depth > 0 ? o->max_depth : 8;
    if (c->max_depth > 15) c->max_depth = 15;
    c->r_str = c->r_num = c->r_int = c->r_bool = c->r_null = -1;
    for (int i = 0; i < 16; i++) c->r_any[i] = c->r_obj[i] = c->r_arr[i] = -1;
}

ea_status ea__gb_json_subschema_rule(ea_gbuild *b, const json_t *root, const char *root_path, const json_t *schema,
                                     const char *path, const ea_json_grammar_opts *opts, int *rule, char *err_path,
                                     size_t n_path, char *err, size_t n_err) {
    jc c;
    jc_init(&c, b, root, root_path, opts);
    c.err_path = err_path, c.n_path = n_path, c.err = err, c.n_err = n_err;
    int r = gen(&c, schema, path);
    ea_free(c.memo);
    if (r < 0) return ea_err(EA_ERR_INVALID_ARG, "json schema: %s", err ? err : "invalid");
    *rule = r;
    return EA_OK;
}

ea_status ea_gb_json_schema_rule(ea_gbuild *b, const json_t *schema, const char *path,
                                 const ea_json_grammar_opts *opts, int *rule, char *err_path, size_t n_path,
                                 char *err, size_t n_err) {
    return ea__gb_json_subschema_rule(b, schema, path ? path : "", schema, path ? path : "", opts, rule, err_path,
                                      n_path, err, n_err);
}

ea_status ea_grammar_from_json_schema(const json_t *schema, const char *path, const ea_json_grammar_opts *opts,
                                      ea_grammar **out, char *err_path, size_t n_path, char *err, size_t n_err) {
    ea_gbuild *b;
    EA_TRY(ea_gb_create(&b));
    int rule;
    ea_status st = ea_gb_json_schema_rule(b, schema, path, opts, &rule, err_path, n_path, err, n_err);
    if (st != EA_OK) {
        ea_gb_destroy(b);
        return st;
    }
    char e[300];
    st = ea_gb_finish(b, rule, out, e, sizeof e);
    if (st != EA_OK) {
        /* the rule named in the message is a schema path */
        const char *q1 = strchr(e, '\''), *q2 = q1 ? strchr(q1 + 1, '\'') : NULL;
        if (err_path && n_path)
            snprintf(err_path, n_path, "%.*s", q1 && q2 ? (int)(q2 - q1 - 1) : 0, q1 && q2 ? q1 + 1 : "");
        if (err && n_err) {
            size_t k = strlen(e) < n_err ? strlen(e) : n_err - 1;
            memcpy(err, e, k);
            err[k] = 0;
        }
    }
    return st;
}

ea_status ea_grammar_json_object(const ea_json_grammar_opts *opts, ea_grammar **out) {
    json_t *s = json_pack("{s:s}", "type", "object");
    if (!s) return ea_err(EA_ERR_NOMEM, "json_object");
    char ep[64], e[200];
    ea_status st = ea_grammar_from_json_schema(s, "", opts, out, ep, sizeof ep, e, sizeof e);
    json_decref(s);
    return st;
}

