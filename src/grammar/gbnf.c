/*
 * gbnf.c — llama.cpp's GBNF grammar text to a grammar.
 *
 *   grammar  := rule*
 *   rule     := name '::=' alts
 *   alts     := seq ('|' seq)*
 *   seq      := (atom postfix?)*          ends at '|', ')', the end, or the next `name ::=`
 *   atom     := '"' literal '"' | '[' '^'? class ']' | '.' | name | '(' alts ')'
 *   postfix  := '*' | '+' | '?' | '{' m '}' | '{' m ',' '}' | '{' m ',' n '}'
 * Names are [A-Za-z0-9_-]+; `#` starts a comment to the end of the line;
 * whitespace and newlines separate anything (a superset of llama.cpp, which
 * ends a top-level sequence at a newline). Escapes in literals and classes:
 * \n \r \t \\ \" \] \[ \- \xHH \uHHHH \UHHHHHHHH. The language is rule `root`.
 * Errors name the byte offset; a name used but never defined, a rule defined
 * twice, left recursion and rules without a finite derivation are refused.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar_internal.h"

typedef struct {
    ea_gbuild *b;
    const char *s;
    size_t n, i;
    int depth;
    char *err;
    size_t n_err;
    int failed;
    uint8_t *defined; /* per rule (n_def): 1 once `name ::=` was read */
    size_t n_def, cap_defined;
    ea_grange *rg;
    size_t n_rg, cap_rg;
} gp;

static int gfail(gp *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ea__gfail_at(p->err, p->n_err, &p->failed, p->i, fmt, ap);
    va_end(ap);
    return -1;
}

static void ws(gp *p) {
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\n') p->i++;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            p->i++;
        } else {
            break;
        }
    }
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Length of the name at i (0 if none). */
static size_t name_len(const gp *p, size_t i) {
    size_t k = 0;
    while (i + k < p->n && is_name_char(p->s[i + k])) k++;
    return k;
}

/* 1 if a `name ::=` starts at the current position (the next rule). */
static int rule_starts(gp *p) {
    size_t k = name_len(p, p->i);
    if (!k) return 0;
    size_t j = p->i + k;
    while (j < p->n && (p->s[j] == ' ' || p->s[j] == '\t' || p->s[j] == '\n' || p->s[j] == '\r')) j++;
    return j + 3 <= p->n && memcmp(p->s + j, "::=", 3) == 0;
}

static int rule_id(gp *p, const char *name, size_t k) {
    char buf[128];
    if (k >= sizeof buf) return gfail(p, "rule name too long");
    memcpy(buf, name, k);
    buf[k] = 0;
    int r = ea_gb_find_rule(p->b, buf);
    if (r < 0) r = ea_gb_rule(p->b, buf);
    if ((size_t)r >= p->n_def) {
        if (ea_grow(&p->defined, &p->cap_defined, (size_t)r + 1, 1, 64)) return gfail(p, "out of memory");
        memset(p->defined + p->n_def, 0, (size_t)r + 1 - p->n_def);
        p->n_def = (size_t)r + 1;
    }
    return r;
}

/* One (possibly escaped) code point of a literal or class. */
static int read_cp(gp *p, uint32_t *cp) {
    if (p->i >= p->n) return gfail(p, "unexpected end");
    if (p->s[p->i] != '\\') {
        uint32_t lo, hi;
        int k = ea__utf8_next((const uint8_t *)p->s + p->i, p->n - p->i, cp, &lo, &hi);
        if (k <= 0) return gfail(p, "invalid UTF-8");
        p->i += (size_t)k;
        return 0;
    }
    p->i++;
    if (p->i >= p->n) return gfail(p, "unexpected end after \\");
    char c = p->s[p->i++];
    int nd = 0;
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'x': nd = 2; break;
    case 'u': nd = 4; break;
    case 'U': nd = 8; break;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *cp = (uint32_t)c; return 0;
    default: return gfail(p, "unknown escape \\%c", c);
    }
    uint32_t v = 0;
    for (int d = 0; d < nd; d++) {
        int x = p->i < p->n ? ea__hexval(p->s[p->i]) : -1;
        if (x < 0) return gfail(p, "\\%c needs %d hex digits", c, nd);
        v = v * 16 + (uint32_t)x;
        p->i++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return gfail(p, "escape is not a Unicode scalar value");
    *cp = v;
    return 0;
}

static int parse_alts(gp *p, int rule);

static int parse_atom(gp *p, ea_gseq *atom) {
    char c = p->s[p->i];
    if (c == '"') {
        p->i++;
        while (p->i < p->n && p->s[p->i] != '"') {
            uint32_t cp;
            if (read_cp(p, &cp)) return -1;
            ea_grange r = {cp, cp};
            ea_gseq_chars(atom, p->b, &r, 1, 0, 1, 1);
        }
        if (p->i >= p->n) return gfail(p, "unterminated literal");
        p->i++;
        return 0;
    }
    if (c == '[') {
        p->i++;
        int neg = 0;
        if (p->i < p->n && p->s[p->i] == '^') neg = 1, p->i++;
        p->n_rg = 0;
        while (p->i < p->n && p->s[p->i] != ']') {
            uint32_t lo, hi;
            if (read_cp(p, &lo)) return -1;
            hi = lo;
            if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
                p->i++;
                if (read_cp(p, &hi)) return -1;
                if (hi < lo) return gfail(p, "range out of order");
            }
            if (ea_grow(&p->rg, &p->cap_rg, p->n_rg + 1, sizeof *p->rg, 16)) return gfail(p, "out of memory");
            p->rg[p->n_rg++] = (ea_grange){lo, hi};
        }
        if (p->i >= p->n) return gfail(p, "unterminated [");
        p->i++;
        ea_gseq_chars(atom, p->b, p->rg, (int)p->n_rg, neg, 1, 1);
        return 0;
    }
    if (c == '.') {
        p->i++;
        ea_gseq_chars(atom, p->b, NULL, 0, 1, 1, 1);
        return 0;
    }
    if (c == '(') {
        p->i++;
        if (++p->depth > 100) return gfail(p, "groups nested too deeply");
        int r = ea_gb_rule(p->b, "(group)"); /* not a GBNF name: never found by one */
        if (parse_alts(p, r)) return -1;
        ws(p);
        if (p->i >= p->n || p->s[p->i] != ')') return gfail(p, "missing )");
        p->i++;
        p->depth--;
        ea_gseq_ref(atom, r);
        return 0;
    }
    size_t k = name_len(p, p->i);
    if (!k) return gfail(p, "unexpected character '%c'", c);
    int r = rule_id(p, p->s + p->i, k);
    if (r < 0) return -1;
    p->i += k;
    ea_gseq_ref(atom, r);
    return 0;
}

static int read_num(gp *p, int *v) {
    long x = 0;
    size_t at = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9' && x <= 100000) x = x * 10 + (p->s[p->i++] - '0');
    if (p->i == at || x > 100000) return gfail(p, "bad repeat count");
    *v = (int)x;
    return 0;
}

static int parse_seq(gp *p, ea_gseq *seq) {
    ea_gseq atom = {0};
    int rc = 0;
    for (;;) {
        ws(p);
        if (p->i >= p->n || p->s[p->i] == '|' || p->s[p->i] == ')' || rule_starts(p)) break;
        ea_gseq_clear(&atom);
        if ((rc = parse_atom(p, &atom))) break;
        int min = 1, max = 1;
        if (p->i < p->n) {
            char c = p->s[p->i];
            if (c == '*') min = 0, max = -1, p->i++;
            else if (c == '+') min = 1, max = -1, p->i++;
            else if (c == '?') min = 0, max = 1, p->i++;
            else if (c == '{') {
                p->i++;
                ws(p);
                if ((rc = read_num(p, &min))) break;
                ws(p);
                max = min;
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    ws(p);
                    if (p->i < p->n && p->s[p->i] == '}') max = -1;
                    else if ((rc = read_num(p, &max))) break;
                    ws(p);
                }
                if (p->i >= p->n || p->s[p->i] != '}' || (max >= 0 && max < min)) {
                    rc = gfail(p, "bad {m,n}");
                    break;
                }
                p->i++;
            }
        }
        if (min == 1 && max == 1) {
            ea__gseq_append(seq, &atom);
        } else if (!ea__gseq_repeat(p->b, seq, &atom, min, max, "(repeat)")) {
            rc = gfail(p, "repeat count too large (at most 1000)");
            break;
        }
    }
    ea_gseq_deinit(&atom);
    return rc;
}

static int parse_alts(gp *p, int rule) {
    ea_gseq seq = {0};
    int rc = 0;
    for (;;) {
        ea_gseq_clear(&seq);
        if ((rc = parse_seq(p, &seq))) break;
        ea_gb_alt(p->b, rule, &seq);
        ws(p);
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            continue;
        }
        break;
    }
    ea_gseq_deinit(&seq);
    return rc;
}

ea_status ea_grammar_from_gbnf(const char *text, size_t n, ea_grammar **out, char *err, size_t n_err) {
    *out = NULL;
    if (err && n_err) err[0] = 0;
    ea_gbuild *b;
    EA_TRY(ea_gb_create(&b));
    gp p = {.b = b, .s = text, .n = n, .err = err, .n_err = n_err};
    for (;;) {
        ws(&p);
        if (p.i >= p.n) break;
        size_t k = name_len(&p, p.i);
        if (!k) {
            gfail(&p, "expected a rule name");
            break;
        }
        int r = rule_id(&p, p.s + p.i, k);
        if (r < 0) break;
        if (p.defined[r]) {
            gfail(&p, "rule '%.*s' is defined twice", (int)k, p.s + p.i);
            break;
        }
        p.defined[r] = 1;
        p.i += k;
        ws(&p);
        if (p.i + 3 > p.n || memcmp(p.s + p.i, "::=", 3) != 0) {
            gfail(&p, "expected ::=");
            break;
        }
        p.i += 3;
        if (parse_alts(&p, r)) break;
        ws(&p);
        if (p.i < p.n && p.s[p.i] == ')') {
            gfail(&p, "unbalanced )");
            break;
        }
    }
    int root = ea_gb_find_rule(b, "root");
    if (!p.failed && root < 0) gfail(&p, "no rule 'root'");
    ea_free(p.defined);
    ea_free(p.rg);
    if (p.failed) {
        ea_gb_destroy(b);
        return ea_err(EA_ERR_INVALID_ARG, "gbnf: %s", err ? err : "invalid");
    }
    return ea_gb_finish(b, root, out, err, n_err);
}
