/*
 * regex.c — a regular expression to grammar rules (grammar.h lists the
 * syntax). Recursive descent straight into the builder:
 *   alt    := concat ('|' concat)*        one rule, one alternative per branch
 *   concat := (atom quantifier?)*
 *   atom   := '(' ('?:')? alt ')' | '[' class ']' | '.' | '\' escape | char
 * A quantified single character class becomes one CHARS element with the
 * bounds (so [a-z]{0,64} costs one element); anything else is repeated by
 * ea__gseq_repeat.
 *
 * The match is over the whole text (guided_regex, JSON Schema patterns that
 * are anchored); ^ is accepted only first and $ only last. In JSON-string
 * mode (patterns of schema strings) the text lands inside a JSON string: a
 * literal " or \ is written escaped, classes lose " \ and control characters.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar_internal.h"

typedef struct {
    ea_gbuild *b;
    const uint8_t *s;
    size_t n, i;
    int json;
    int depth;
    char *err;
    size_t n_err;
    int failed;
    ea_grange *rg; /* scratch ranges of the class being read */
    size_t n_rg, cap_rg;
} rx;

static int rfail(rx *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ea__gfail_at(r->err, r->n_err, &r->failed, r->i, fmt, ap);
    va_end(ap);
    return -1;
}

static void add_range(rx *r, uint32_t lo, uint32_t hi) {
    if (ea_grow(&r->rg, &r->cap_rg, r->n_rg + 1, sizeof *r->rg, 16)) {
        r->failed = 1;
        return;
    }
    r->rg[r->n_rg++] = (ea_grange){lo, hi};
}

/* Append the complement of the sorted, disjoint list a[0..n). */
static void add_complement(rx *r, const ea_grange *a, int n) {
    uint32_t next = 0;
    for (int i = 0; i < n; i++) {
        if (a[i].lo > next) add_range(r, next, a[i].lo - 1);
        next = a[i].hi + 1;
    }
    if (next <= 0x10FFFF) add_range(r, next, 0x10FFFF);
}

static const ea_grange DIGIT[] = {{'0', '9'}};
static const ea_grange WORD[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const ea_grange SPACE[] = {{'\t', '\r'}, {' ', ' '}};

/* Read one code point of the pattern. */
static int next_cp(rx *r, uint32_t *cp) {
    uint32_t lo, hi;
    int k = ea__utf8_next(r->s + r->i, r->n - r->i, cp, &lo, &hi);
    if (k <= 0) return rfail(r, "the pattern is not valid UTF-8");
    r->i += (size_t)k;
    return 0;
}

/* After a backslash: a class escape adds its ranges and returns 1; a literal
 * escape sets *cp and returns 0; -1 on error. */
static int escape(rx *r, uint32_t *cp) {
    if (r->i >= r->n) return rfail(r, "the pattern ends with a backslash");
    uint8_t c = r->s[r->i++];
    switch (c) {
    case 'd': for (size_t k = 0; k < 1; k++) add_range(r, DIGIT[k].lo, DIGIT[k].hi); return 1;
    case 'w': for (size_t k = 0; k < 4; k++) add_range(r, WORD[k].lo, WORD[k].hi); return 1;
    case 's': for (size_t k = 0; k < 2; k++) add_range(r, SPACE[k].lo, SPACE[k].hi); return 1;
    case 'D': add_complement(r, DIGIT, 1); return 1;
    case 'W': add_complement(r, WORD, 4); return 1;
    case 'S': add_complement(r, SPACE, 2); return 1;
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case '0': *cp = 0; return 0;
    case 'x':
    case 'u': {
        int nd = c == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int k = 0; k < nd; k++) {
            int h = r->i < r->n ? ea__hexval(r->s[r->i]) : -1;
            if (h < 0) return rfail(r, "\\%c needs %d hex digits", c, nd);
            v = v * 16 + (uint32_t)h;
            r->i++;
        }
        *cp = v;
        return 0;
    }
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
            return rfail(r, "the escape \\%c is not supported (no backreferences, word boundaries or Unicode "
                            "properties)", c);
        r->i--;
        return next_cp(r, cp);
    }
}

/* JSON-string mode: what a class may contain. */
static const ea_grange JSON_PLAIN[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};

/* Intersect the ranges r->rg[from..) with JSON_PLAIN (in place) when in JSON mode. */
static void json_clip(rx *r, size_t from) {
    if (!r->json) return;
    size_t end = r->n_rg;
    for (size_t i = from; i < end; i++) {
        for (int k = 0; k < 3; k++) {
            uint32_t lo = r->rg[i].lo > JSON_PLAIN[k].lo ? r->rg[i].lo : JSON_PLAIN[k].lo;
            uint32_t hi = r->rg[i].hi < JSON_PLAIN[k].hi ? r->rg[i].hi : JSON_PLAIN[k].hi;
            if (lo <= hi) add_range(r, lo, hi);
        }
    }
    if (r->failed) return;
    memmove(r->rg + from, r->rg + end, (r->n_rg - end) * sizeof *r->rg);
    r->n_rg -= end - from;
}

/* A literal code point into atom (escaped in JSON mode). */
static void literal(rx *r, ea_gseq *atom, uint32_t cp) {
    char buf[8];
    if (r->json && (cp == '"' || cp == '\\' || cp < 0x20)) {
        static const char *const esc[] = {"\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005",
                                          "\\u0006", "\\u0007", "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r"};
        const char *e = cp == '"' ? "\\\"" : cp == '\\' ? "\\\\" : cp < 14 ? esc[cp] : NULL;
        if (!e) {
            snprintf(buf, sizeof buf, "\\u%04x", (unsigned)cp);
            e = buf;
        }
        ea_gseq_lit(atom, r->b, e, strlen(e));
        return;
    }
    ea_grange g = {cp, cp};
    ea_gseq_chars(atom, r->b, &g, 1, 0, 1, 1);
}

static int parse_alt(rx *r, int *rule);

static int parse_class(rx *r, ea_gseq *atom) {
    r->n_rg = 0;
    int neg = 0;
    if (r->i < r->n && r->s[r->i] == '^') neg = 1, r->i++;
    int first = 1;
    for (;;) {
        if (r->i >= r->n) return rfail(r, "unterminated [");
        if (r->s[r->i] == ']' && !first) {
            r->i++;
            break;
        }
        first = 0;
        uint32_t lo;
        if (r->s[r->i] == '\\') {
            r->i++;
            int e = escape(r, &lo);
            if (e < 0) return -1;
            if (e == 1) continue;
        } else if (next_cp(r, &lo)) {
            return -1;
        }
        uint32_t hi = lo;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            if (r->s[r->i] == '\\') {
                r->i++;
                if (escape(r, &hi) != 0) return rfail(r, "a range cannot end with a class escape");
            } else if (next_cp(r, &hi)) {
                return -1;
            }
            if (hi < lo) return rfail(r, "range out of order");
        }
        add_range(r, lo, hi);
    }
    if (r->failed) return -1;
    if (neg && r->json) { /* complement first, then clip */
        size_t n0 = r->n_rg;
        ea_grange *cp = ea_malloc((n0 + 1) * sizeof *cp);
        if (!cp) return rfail(r, "out of memory");
        memcpy(cp, r->rg, n0 * sizeof *cp);
        /* sort and merge, then complement (the builder normalises only whole classes) */
        for (size_t i = 1; i < n0; i++)
            for (size_t j = i; j > 0 && cp[j - 1].lo > cp[j].lo; j--) {
                ea_grange t = cp[j];
                cp[j] = cp[j - 1];
                cp[j - 1] = t;
            }
        size_t m = 0;
        for (size_t i = 0; i < n0; i++) {
            if (m && cp[i].lo <= cp[m - 1].hi + 1) {
                if (cp[i].hi > cp[m - 1].hi) cp[m - 1].hi = cp[i].hi;
            } else {
                cp[m++] = cp[i];
            }
        }
        r->n_rg = 0;
        add_complement(r, cp, (int)m);
        ea_free(cp);
        neg = 0;
    }
    json_clip(r, 0);
    ea_gseq_chars(atom, r->b, r->rg, (int)r->n_rg, neg, 1, 1);
    return r->failed ? -1 : 0;
}

static int parse_atom(rx *r, ea_gseq *atom) {
    uint8_t c = r->s[r->i];
    if (c == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else return rfail(r, "only (?: ) groups are supported (no lookaround or named groups)");
        }
        int rule = -1;
        if (parse_alt(r, &rule)) return -1;
        if (r->i >= r->n || r->s[r->i] != ')') return rfail(r, "missing )");
        r->i++;
        ea_gseq_ref(atom, rule);
        return 0;
    }
    if (c == '[') {
        r->i++;
        return parse_class(r, atom);
    }
    if (c == '.') {
        r->i++;
        r->n_rg = 0;
        add_range(r, 0, '\n' - 1);
        add_range(r, '\n' + 1, 0x10FFFF);
        json_clip(r, 0);
        ea_gseq_chars(atom, r->b, r->rg, (int)r->n_rg, 0, 1, 1);
        return r->failed ? -1 : 0;
    }
    uint32_t cp;
    if (c == '\\') {
        r->i++;
        r->n_rg = 0;
        int e = escape(r, &cp);
        if (e < 0) return -1;
        if (e == 1) {
            json_clip(r, 0);
            ea_gseq_chars(atom, r->b, r->rg, (int)r->n_rg, 0, 1, 1);
            return r->failed ? -1 : 0;
        }
    } else {
        if (c == '*' || c == '+' || c == '?' || c == '{') return rfail(r, "a quantifier with nothing before it");
        if (c == '^' || c == '$') return rfail(r, "anchors are only supported at the start (^) and end ($)");
        if (next_cp(r, &cp)) return -1;
    }
    literal(r, atom, cp);
    return 0;
}

static int read_int(rx *r, int *v) {
    if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9') return -1;
    long x = 0;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
        x = x * 10 + (r->s[r->i++] - '0');
        if (x > 100000) return -1;
    }
    *v = (int)x;
    return 0;
}

/* A quantifier at r->i, if any: *min, *max (-1 unbounded); 0 none, 1 read, -1 error. */
static int quantifier(rx *r, int *min, int *max) {
    if (r->i >= r->n) return 0;
    uint8_t c = r->s[r->i];
    if (c == '*') *min = 0, *max = -1;
    else if (c == '+') *min = 1, *max = -1;
    else if (c == '?') *min = 0, *max = 1;
    else if (c == '{') {
        size_t at = r->i;
        r->i++;
        if (read_int(r, min)) {
            r->i = at;
            return rfail(r, "bad {n,m} quantifier");
        }
        *max = *min;
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            if (r->i < r->n && r->s[r->i] == '}') *max = -1;
            else if (read_int(r, max)) return rfail(r, "bad {n,m} quantifier");
        }
        if (r->i >= r->n || r->s[r->i] != '}') return rfail(r, "bad {n,m} quantifier");
        if (*max >= 0 && *max < *min) return rfail(r, "{n,m} with m < n");
        /* r->i is at the closing brace, consumed below */
    } else {
        return 0;
    }
    r->i++;
    if (r->i < r->n && r->s[r->i] == '?') r->i++; /* lazy: the same set of full matches */
    else if (r->i < r->n && r->s[r->i] == '+') return rfail(r, "possessive quantifiers are not supported");
    return 1;
}

static int parse_concat(rx *r, ea_gseq *seq) {
    ea_gseq atom = {0};
    int rc = 0;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (r->s[r->i] == '$' && r->i + 1 == r->n && r->depth == 1) {
            r->i++;
            break;
        }
        ea_gseq_clear(&atom);
        if ((rc = parse_atom(r, &atom))) break;
        int min = 0, max = 0, q = quantifier(r, &min, &max);
        if (q < 0) {
            rc = -1;
            break;
        }
        if (q == 0) {
            ea__gseq_append(seq, &atom);
        } else if (!ea__gseq_repeat(r->b, seq, &atom, min, max, "regex")) {
            rc = rfail(r, "a repeat count is too large (at most 1000)");
            break;
        }
    }
    ea_gseq_deinit(&atom);
    return rc;
}

static int parse_alt(rx *r, int *rule) {
    if (++r->depth > 100) return rfail(r, "groups nested too deeply");
    int R = ea_gb_rule(r->b, "regex");
    ea_gseq seq = {0};
    int rc = 0;
    for (;;) {
        ea_gseq_clear(&seq);
        if ((rc = parse_concat(r, &seq))) break;
        ea_gb_alt(r->b, R, &seq);
        if (r->i < r->n && r->s[r->i] == '|') {
            r->i++;
            continue;
        }
        break;
    }
    ea_gseq_deinit(&seq);
    r->depth--;
    *rule = R;
    return rc;
}

ea_status ea_gb_regex_rule(ea_gbuild *b, const char *re, size_t n, int json_string, int *rule, char *err,
                           size_t n_err) {
    rx r = {.b = b, .s = (const uint8_t *)re, .n = n, .json = json_string, .err = err, .n_err = n_err};
    if (err && n_err) err[0] = 0;
    if (r.n && r.s[0] == '^') r.i = 1;
    int rc = parse_alt(&r, rule);
    if (!rc && r.i < r.n) rc = rfail(&r, "unbalanced )");
    ea_free(r.rg);
    if (rc || r.failed) {
        if (err && n_err && !err[0]) snprintf(err, n_err, "invalid regular expression");
        return ea_err(EA_ERR_INVALID_ARG, "regex: %s", err ? err : "invalid");
    }
    return EA_OK;
}

ea_status ea_grammar_from_regex(const char *re, size_t n, ea_grammar **out, char *err, size_t n_err) {
    ea_gbuild *b;
    EA_TRY(ea_gb_create(&b));
    int rule;
    ea_status st = ea_gb_regex_rule(b, re, n, 0, &rule, err, n_err);
    if (st != EA_OK) {
        ea_gb_destroy(b);
        return st;
    }
    return ea_gb_finish(b, rule, out, err, n_err);
}
