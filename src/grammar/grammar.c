/*
 * grammar.c — the rule representation: the builder every front end uses,
 * class interning, and the checks a grammar passes before use.
 *
 * Checks at ea_gb_finish (each failure names the rule):
 *   - every rule has an alternative (an undefined GBNF name has none);
 *   - every rule is productive: it derives some finite text (a fixpoint over
 *     the rules: an alternative is productive when all its elements are; a
 *     CHARS element with min > 0 needs a non-empty class). Recursion with no
 *     base case (a $ref loop in a schema) fails here;
 *   - no rule is left-recursive (a rule reachable from itself without
 *     consuming text): the matcher expands references eagerly and would loop.
 *
 * Classes are interned: equal range sets get one id, so the token index's
 * per-class tables are shared by all elements (and all grammars) that use them.
 */
#include "grammar/grammar_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define EA__CP_MAX 0x10FFFFu

struct ea_gbuild {
    ea__gelem *el;
    size_t n_el, cap_el;
    struct galt {
        int32_t rule, start;
    } *alts;
    size_t n_alts, cap_alts;
    char **names;
    size_t n_rules, cap_rules;
    ea_grange *rg;
    size_t n_rg, cap_rg;
    ea__gclass *cls;
    uint64_t *cls_hash;
    size_t n_cls, cap_cls, cap_cls_hash;
    ea_grange *tmp; /* scratch for class normalisation */
    size_t cap_tmp;
    int oom, bad_utf8;
};

/* ---- UTF-8 ---- */

int ea__utf8_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

int ea__utf8_next(const uint8_t *s, size_t n, uint32_t *cp, uint32_t *lo, uint32_t *hi) {
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    int len = ea__utf8_len(s[0]);
    if (len == 0) return -1;
    uint32_t v = len == 1 ? s[0] : (uint32_t)(s[0] & (0x7F >> len));
    int have = 1;
    for (; have < len && (size_t)have < n; have++) {
        if ((s[have] & 0xC0) != 0x80) return -1;
        v = v << 6 | (s[have] & 0x3F);
    }
    int rest = len - have;
    uint32_t l = v << (6 * rest), h = l | ((1u << (6 * rest)) - 1);
    if (l < min_of[len]) l = min_of[len];
    if (h > EA__CP_MAX) h = EA__CP_MAX;
    if (l > h) return -1;
    if (rest == 0) {
        if (v >= 0xD800 && v <= 0xDFFF) return -1;
        *cp = v;
        return len;
    }
    if (l >= 0xD800 && h <= 0xDFFF) return -1;
    *lo = l;
    *hi = h;
    return 0;
}

/* ---- classes ---- */

int ea__granges_has(const ea_grange *r, int n, uint32_t cp) {
    int a = 0, b = n;
    while (a < b) {
        int mid = (a + b) / 2;
        if (r[mid].hi < cp) a = mid + 1;
        else b = mid;
    }
    return a < n && r[a].lo <= cp;
}

int ea__granges_meets(const ea_grange *r, int n, uint32_t lo, uint32_t hi) {
    int a = 0, b = n;
    while (a < b) {
        int mid = (a + b) / 2;
        if (r[mid].hi < lo) a = mid + 1;
        else b = mid;
    }
    return a < n && r[a].lo <= hi;
}

int ea__gclass_has(const ea_grammar *g, int c, uint32_t cp) {
    return ea__granges_has(g->rg + g->cls[c].first, g->cls[c].n, cp);
}

int ea__gclass_meets(const ea_grammar *g, int c, uint32_t lo, uint32_t hi) {
    return ea__granges_meets(g->rg + g->cls[c].first, g->cls[c].n, lo, hi);
}

static int cmp_range(const void *a, const void *b) {
    const ea_grange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

static uint64_t hash_ranges(const ea_grange *r, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ r[i].lo) * 0x100000001B3ull;
        h = (h ^ r[i].hi) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

/* Normalise r (sort, merge, complement if negate, drop surrogates) into b->tmp; returns the count. */
static size_t normalise(ea_gbuild *b, const ea_grange *r, int n, int negate) {
    size_t need = (size_t)n * 2 + 4;
    if (ea_grow(&b->tmp, &b->cap_tmp, need * 2, sizeof *b->tmp, 64)) {
        b->oom = 1;
        return 0;
    }
    ea_grange *a = b->tmp, *o = b->tmp + need;
    size_t k = 0;
    for (int i = 0; i < n; i++)
        if (r[i].lo <= r[i].hi && r[i].lo <= EA__CP_MAX) a[k++] = (ea_grange){r[i].lo, r[i].hi > EA__CP_MAX ? EA__CP_MAX : r[i].hi};
    qsort(a, k, sizeof *a, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && a[i].lo <= o[m - 1].hi + 1) {
            if (a[i].hi > o[m - 1].hi) o[m - 1].hi = a[i].hi;
        } else {
            o[m++] = a[i];
        }
    }
    if (negate) {
        size_t c = 0;
        uint32_t next = 0;
        for (size_t i = 0; i < m; i++) {
            if (o[i].lo > next) a[c++] = (ea_grange){next, o[i].lo - 1};
            next = o[i].hi + 1;
        }
        if (m == 0 || o[m - 1].hi < EA__CP_MAX) a[c++] = (ea_grange){next, EA__CP_MAX};
        memcpy(o, a, c * sizeof *a);
        m = c;
    }
    /* drop surrogates: split ranges around D800..DFFF */
    size_t c = 0;
    for (size_t i = 0; i < m; i++) {
        ea_grange x = o[i];
        if (x.hi < 0xD800 || x.lo > 0xDFFF) {
            a[c++] = x;
            continue;
        }
        if (x.lo < 0xD800) a[c++] = (ea_grange){x.lo, 0xD7FF};
        if (x.hi > 0xDFFF) a[c++] = (ea_grange){0xE000, x.hi};
    }
    return c; /* result in b->tmp[0..c) */
}

static int intern_class(ea_gbuild *b, const ea_grange *r, int n, int negate) {
    size_t k = normalise(b, r, n, negate);
    if (b->oom) return 0;
    ea_grange *a = b->tmp;
    uint64_t h = hash_ranges(a, k);
    if (b->cap_cls_hash < (b->n_cls + 1) * 2) { /* open addressing, ids + 1 */
        size_t nc = b->cap_cls_hash ? b->cap_cls_hash * 2 : 64;
        uint64_t *t = ea_calloc(nc, sizeof *t);
        if (!t) {
            b->oom = 1;
            return 0;
        }
        for (size_t i = 0; i < b->n_cls; i++) {
            uint64_t hh = hash_ranges(b->rg + b->cls[i].first, (size_t)b->cls[i].n);
            size_t j = hh & (nc - 1);
            while (t[j]) j = (j + 1) & (nc - 1);
            t[j] = i + 1;
        }
        ea_free(b->cls_hash);
        b->cls_hash = t;
        b->cap_cls_hash = nc;
    }
    size_t j = h & (b->cap_cls_hash - 1);
    for (; b->cls_hash[j]; j = (j + 1) & (b->cap_cls_hash - 1)) {
        const ea__gclass *c = &b->cls[b->cls_hash[j] - 1];
        if ((size_t)c->n == k && memcmp(b->rg + c->first, a, k * sizeof *a) == 0) return (int)(b->cls_hash[j] - 1);
    }
    if (ea_grow(&b->cls, &b->cap_cls, b->n_cls + 1, sizeof *b->cls, 32) ||
        ea_grow(&b->rg, &b->cap_rg, b->n_rg + k + 1, sizeof *b->rg, 64)) {
        b->oom = 1;
        return 0;
    }
    memcpy(b->rg + b->n_rg, a, k * sizeof *a);
    b->cls[b->n_cls] = (ea__gclass){(int32_t)b->n_rg, (int32_t)k};
    b->n_rg += k;
    b->cls_hash[j] = b->n_cls + 1;
    return (int)b->n_cls++;
}

/* ---- builder ---- */

ea_status ea_gb_create(ea_gbuild **out) {
    *out = ea_calloc(1, sizeof **out);
    return *out ? EA_OK : ea_err(EA_ERR_NOMEM, "grammar builder");
}

void ea_gb_destroy(ea_gbuild *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n_rules; i++) ea_free(b->names[i]);
    ea_free(b->names);
    ea_free(b->el);
    ea_free(b->alts);
    ea_free(b->rg);
    ea_free(b->cls);
    ea_free(b->cls_hash);
    ea_free(b->tmp);
    ea_free(b);
}

int ea_gb_rule(ea_gbuild *b, const char *name) {
    if (ea_grow(&b->names, &b->cap_rules, b->n_rules + 1, sizeof *b->names, 32)) {
        b->oom = 1;
        return 0;
    }
    b->names[b->n_rules] = name ? ea_strdup(name) : NULL;
    if (name && !b->names[b->n_rules]) b->oom = 1;
    return (int)b->n_rules++;
}

int ea_gb_find_rule(const ea_gbuild *b, const char *name) {
    for (size_t i = 0; i < b->n_rules; i++)
        if (b->names[i] && strcmp(b->names[i], name) == 0) return (int)i;
    return -1;
}

ea_status ea_gb_alt(ea_gbuild *b, int rule, const ea_gseq *s) {
    if (s->oom) b->oom = 1;
    if (b->oom) return ea_err(EA_ERR_NOMEM, "grammar");
    EA_ASSERT(rule >= 0 && (size_t)rule < b->n_rules);
    if (ea_grow(&b->el, &b->cap_el, b->n_el + s->n + 1, sizeof *b->el, 256) ||
        ea_grow(&b->alts, &b->cap_alts, b->n_alts + 1, sizeof *b->alts, 64)) {
        b->oom = 1;
        return ea_err(EA_ERR_NOMEM, "grammar");
    }
    b->alts[b->n_alts++] = (struct galt){rule, (int32_t)b->n_el};
    if (s->n) memcpy(b->el + b->n_el, s->e, s->n * sizeof *s->e);
    b->n_el += s->n;
    b->el[b->n_el++] = (ea__gelem){EA__GE_END, rule, 0, 0};
    return EA_OK;
}

void ea_gseq_deinit(ea_gseq *s) {
    ea_free(s->e);
    memset(s, 0, sizeof *s);
}

void ea_gseq_clear(ea_gseq *s) {
    s->n = 0;
}

static void seq_push(ea_gseq *s, ea__gelem e) {
    if (ea_grow(&s->e, &s->cap, s->n + 1, sizeof *s->e, 16)) {
        s->oom = 1;
        return;
    }
    s->e[s->n++] = e;
}

void ea_gseq_chars(ea_gseq *s, ea_gbuild *b, const ea_grange *r, int n, int negate, int min, int max) {
    int c = intern_class(b, r, n, negate);
    if (b->oom) {
        s->oom = 1;
        return;
    }
    if (max == 0) return;
    seq_push(s, (ea__gelem){EA__GE_CHARS, c, min, max});
}

void ea_gseq_ref(ea_gseq *s, int rule) {
    seq_push(s, (ea__gelem){EA__GE_REF, rule, 0, 0});
}

void ea_gseq_lit(ea_gseq *s, ea_gbuild *b, const char *text, size_t n) {
    const uint8_t *p = (const uint8_t *)text;
    for (size_t i = 0; i < n;) {
        uint32_t cp, lo, hi;
        int k = ea__utf8_next(p + i, n - i, &cp, &lo, &hi);
        if (k <= 0) {
            b->bad_utf8 = 1;
            return;
        }
        ea_grange r = {cp, cp};
        ea_gseq_chars(s, b, &r, 1, 0, 1, 1);
        i += (size_t)k;
    }
}

/* ---- finish ---- */

static void gerr(char *err, size_t n, const char *fmt, ...) {
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

static const char *rname(const ea_grammar *g, int r, char *buf, size_t n) {
    if (g->names[r]) return g->names[r];
    snprintf(buf, n, "#%d", r);
    return buf;
}

/* DFS over "rule r may start with rule q" edges; 1 if a cycle is found (*bad = a rule on it). */
static int left_cycle(const ea_grammar *g, const uint8_t *nullable, uint8_t *mark, int r, int *bad) {
    mark[r] = 1;
    for (int a = 0; a < g->rule_nalt[r]; a++) {
        for (int p = g->alt[g->rule_alt0[r] + a]; g->el[p].kind != EA__GE_END; p++) {
            const ea__gelem *e = &g->el[p];
            if (e->kind == EA__GE_REF) {
                int q = e->arg;
                if (mark[q] == 1) {
                    *bad = q;
                    return 1;
                }
                if (mark[q] == 0 && left_cycle(g, nullable, mark, q, bad)) return 1;
                if (!nullable[q]) break;
            } else if (e->min > 0) {
                break;
            }
        }
    }
    mark[r] = 2;
    return 0;
}

static ea_status check(const ea_grammar *g, char *err, size_t n_err) {
    char nb[32];
    size_t nr = (size_t)g->n_rules;
    uint8_t *prod = ea_calloc(nr * 3 + 1, 1);
    if (!prod) return ea_err(EA_ERR_NOMEM, "grammar");
    uint8_t *nullable = prod + nr, *mark = prod + 2 * nr;
    for (int r = 0; r < g->n_rules; r++)
        if (g->rule_nalt[r] == 0) {
            gerr(err, n_err, "rule '%s' is not defined", rname(g, r, nb, sizeof nb));
            ea_free(prod);
            return ea_err(EA_ERR_INVALID_ARG, "grammar: rule '%s' is not defined", rname(g, r, nb, sizeof nb));
        }
    for (int changed = 1; changed;) { /* productive and nullable, to a fixpoint */
        changed = 0;
        for (int r = 0; r < g->n_rules; r++) {
            for (int a = 0; a < g->rule_nalt[r]; a++) {
                int pr = 1, nu = 1;
                for (int p = g->alt[g->rule_alt0[r] + a]; g->el[p].kind != EA__GE_END; p++) {
                    const ea__gelem *e = &g->el[p];
                    if (e->kind == EA__GE_REF) {
                        pr &= prod[e->arg];
                        nu &= nullable[e->arg];
                    } else {
                        if (e->min > 0 && g->cls[e->arg].n == 0) pr = 0;
                        if (e->min > 0) nu = 0;
                    }
                }
                if (pr && !prod[r]) prod[r] = 1, changed = 1;
                if (nu && !nullable[r]) nullable[r] = 1, changed = 1;
            }
        }
    }
    ea_status st = EA_OK;
    for (int r = 0; r < g->n_rules && st == EA_OK; r++)
        if (!prod[r]) {
            gerr(err, n_err, "rule '%s' never ends: every alternative recurses without a base case (or needs a "
                             "character from an empty class)", rname(g, r, nb, sizeof nb));
            st = ea_err(EA_ERR_INVALID_ARG, "grammar: rule '%s' derives no finite text", rname(g, r, nb, sizeof nb));
        }
    int bad = -1;
    for (int r = 0; r < g->n_rules && st == EA_OK; r++)
        if (mark[r] == 0 && left_cycle(g, nullable, mark, r, &bad)) {
            gerr(err, n_err, "rule '%s' is left-recursive (it can reach itself without consuming text)",
                 rname(g, bad, nb, sizeof nb));
            st = ea_err(EA_ERR_INVALID_ARG, "grammar: rule '%s' is left-recursive", rname(g, bad, nb, sizeof nb));
        }
    ea_free(prod);
    return st;
}

static int cmp_alt(const void *a, const void *b) {
    const struct galt *x = a, *y = b;
    if (x->rule != y->rule) return x->rule < y->rule ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

ea_status ea_gb_finish(ea_gbuild *b, int root, ea_grammar **out, char *err, size_t n_err) {
    *out = NULL;
    if (err && n_err) err[0] = 0;
    if (b->oom) {
        ea_gb_destroy(b);
        gerr(err, n_err, "out of memory");
        return ea_err(EA_ERR_NOMEM, "grammar");
    }
    if (b->bad_utf8) {
        ea_gb_destroy(b);
        gerr(err, n_err, "a literal is not valid UTF-8");
        return ea_err(EA_ERR_INVALID_ARG, "grammar: a literal is not valid UTF-8");
    }
    ea_grammar *g = ea_calloc(1, sizeof *g);
    if (!g) {
        ea_gb_destroy(b);
        return ea_err(EA_ERR_NOMEM, "grammar");
    }
    atomic_init(&g->refs, 1);
    if (b->n_alts) qsort(b->alts, b->n_alts, sizeof *b->alts, cmp_alt);
    g->n_rules = (int)b->n_rules;
    g->rule_alt0 = ea_calloc(b->n_rules * 2 + 1, sizeof(int32_t));
    g->alt = ea_malloc((b->n_alts + 1) * sizeof(int32_t));
    if (!g->rule_alt0 || !g->alt) {
        ea_grammar_destroy(g);
        ea_gb_destroy(b);
        return ea_err(EA_ERR_NOMEM, "grammar");
    }
    g->rule_nalt = g->rule_alt0 + b->n_rules;
    for (size_t i = 0; i < b->n_alts; i++) {
        g->alt[i] = b->alts[i].start;
        if (g->rule_nalt[b->alts[i].rule]++ == 0) g->rule_alt0[b->alts[i].rule] = (int32_t)i;
    }
    g->n_alt = (int)b->n_alts;
    /* take the builder's arrays */
    g->el = b->el, g->n_el = (int)b->n_el, b->el = NULL;
    g->names = b->names, b->names = NULL, b->n_rules = 0;
    g->rg = b->rg, g->n_rg = (int)b->n_rg, b->rg = NULL;
    g->cls = b->cls, g->n_cls = (int)b->n_cls, b->cls = NULL;
    g->root = root;
    ea_gb_destroy(b);
    ea_status st = check(g, err, n_err);
    if (st != EA_OK) {
        ea_grammar_destroy(g);
        return st;
    }
    *out = g;
    return EA_OK;
}

ea_grammar *ea_grammar_ref(ea_grammar *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void ea_grammar_destroy(ea_grammar *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) > 1) return;
    for (int i = 0; g->names && i < g->n_rules; i++) ea_free(g->names[i]);
    ea_free(g->names);
    ea_free(g->el);
    ea_free(g->alt);
    ea_free(g->rule_alt0);
    ea_free(g->rg);
    ea_free(g->cls);
    ea_free(g);
}

void ea_grammar_size(const ea_grammar *g, int *n_rules, int *n_elems, int *n_classes) {
    *n_rules = g->n_rules;
    *n_elems = g->n_el;
    *n_classes = g->n_cls;
}

typedef struct {
    const char *s;
    size_t len;
} lit_ref;

static int cmp_lit(const void *a, const void *b) {
    const lit_ref *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len < y->len ? -1 : x->len > y->len);
}

/* The rule for v[0..n) (sorted) from byte d on: an empty alternative if one ends at
 * d, then one alternative per distinct next code point. */
static int trie_rule(ea_gbuild *b, const lit_ref *v, int n, size_t d, const char *name, int depth) {
    if (depth > 10000) {
        b->oom = 1;
        return 0;
    }
    int r = ea_gb_rule(b, name);
    ea_gseq s = {0};
    int i = 0;
    if (n > 0 && v[0].len == d) { /* the shortest sorts first */
        ea_gb_alt(b, r, &s);
        i = 1;
        while (i < n && v[i].len == d) i++; /* duplicates */
    }
    while (i < n) {
        int cl = ea__utf8_len((uint8_t)v[i].s[d]);
        if (cl == 0 || d + (size_t)cl > v[i].len) {
            b->bad_utf8 = 1;
            break;
        }
        int j = i + 1;
        while (j < n && v[j].len >= d + (size_t)cl && memcmp(v[j].s + d, v[i].s + d, (size_t)cl) == 0) j++;
        ea_gseq_clear(&s);
        if (j == i + 1) { /* one text left: the rest of it literally */
            ea_gseq_lit(&s, b, v[i].s + d, v[i].len - d);
        } else {
            ea_gseq_lit(&s, b, v[i].s + d, (size_t)cl);
            ea_gseq_ref(&s, trie_rule(b, v + i, j - i, d + (size_t)cl, name, depth + 1));
        }
        ea_gb_alt(b, r, &s);
        i = j;
    }
    ea_gseq_deinit(&s);
    return r;
}

int ea__gb_literals_rule(ea_gbuild *b, const char *const *texts, const size_t *lens, int n, const char *name) {
    lit_ref *v = ea_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) {
        b->oom = 1;
        return -1;
    }
    for (int i = 0; i < n; i++) v[i] = (lit_ref){texts[i], lens[i]};
    qsort(v, (size_t)n, sizeof *v, cmp_lit);
    int r = trie_rule(b, v, n, 0, name, 0);
    ea_free(v);
    return b->oom || b->bad_utf8 ? -1 : r;
}

ea_status ea_grammar_choice(const char *const *choices, const size_t *lens, int n, ea_grammar **out, char *err,
                            size_t n_err) {
    if (n <= 0) {
        gerr(err, n_err, "the list of choices is empty");
        return ea_err(EA_ERR_INVALID_ARG, "guided_choice: empty");
    }
    ea_gbuild *b;
    EA_TRY(ea_gb_create(&b));
    int root = ea__gb_literals_rule(b, choices, lens, n, "root");
    return ea_gb_finish(b, root < 0 ? 0 : root, out, err, n_err);
}

/* ---- shared helpers of the front ends ---- */

int ea__gfail_at(char *err, size_t n, int *failed, size_t at, const char *fmt, va_list ap) {
    if (*failed) return -1;
    *failed = 1;
    if (err && n) {
        int k = snprintf(err, n, "at offset %zu: ", at);
        if (k >= 0 && (size_t)k < n) vsnprintf(err + k, n - (size_t)k, fmt, ap);
    }
    return -1;
}

int ea__gfail_path(char *err_path, size_t n_path, char *err, size_t n_err, const char *path, const char *fmt,
                   va_list ap) {
    if (err_path && n_path) snprintf(err_path, n_path, "%s", path);
    if (err && n_err) vsnprintf(err, n_err, fmt, ap);
    return -1;
}

int ea__hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void ea__gseq_append(ea_gseq *s, const ea_gseq *a) {
    for (size_t i = 0; i < a->n; i++) seq_push(s, a->e[i]);
    if (a->oom) s->oom = 1;
}

int ea__gb_rule_of(ea_gbuild *b, const ea_gseq *seq, const char *name) {
    int r = ea_gb_rule(b, name);
    ea_gb_alt(b, r, seq);
    return r;
}

int ea__gseq_repeat(ea_gbuild *b, ea_gseq *s, const ea_gseq *atom, int min, int max, const char *name) {
    if (max >= 0 && max < min) return 0;
    if (atom->n == 1 && atom->e[0].kind == EA__GE_CHARS && atom->e[0].min == 1 && atom->e[0].max == 1) {
        if (max == 0) return 1;
        ea__gelem e = atom->e[0];
        e.min = min;
        e.max = max;
        seq_push(s, e);
        return 1;
    }
    if (min > 1000 || (max > 1000)) return 0;
    int x = ea__gb_rule_of(b, atom, name);
    for (int i = 0; i < min; i++) ea_gseq_ref(s, x);
    if (max == min) return 1;
    ea_gseq t = {0};
    int tail;
    if (max < 0) { /* tail ::= "" | x tail */
        tail = ea_gb_rule(b, name);
        ea_gb_alt(b, tail, &t);
        ea_gseq_ref(&t, x);
        ea_gseq_ref(&t, tail);
        ea_gb_alt(b, tail, &t);
    } else { /* opt_k ::= "" | x opt_{k-1}, opt_1 ::= "" | x */
        tail = -1;
        for (int k = 1; k <= max - min; k++) {
            int r = ea_gb_rule(b, name);
            ea_gseq_clear(&t);
            ea_gb_alt(b, r, &t);
            ea_gseq_ref(&t, x);
            if (tail >= 0) ea_gseq_ref(&t, tail);
            ea_gb_alt(b, r, &t);
            tail = r;
        }
    }
    ea_gseq_deinit(&t);
    ea_gseq_ref(s, tail);
    return 1;
}
