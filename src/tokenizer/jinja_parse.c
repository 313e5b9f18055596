/*
 * jinja_parse.c — recursive-descent parser from tokens to the AST of
 * jinja_internal.h.
 *
 * Grammar and precedence are the reference's (lowest first):
 *   ternary `a if c else b` (without else: a filtered value, used by for)
 *   or, and, not, comparisons and (not) in (left-assoc, one level),
 *   + - ~, * / // %, **, `is [not] test`, `| filter[(args)]`, unary + -,
 *   call/member/subscript/slice, primaries (literals, names, (..), [..], {..}).
 * Statements: if/elif/else/endif, for/else/endfor (optionally filtered),
 * set (expression or block form), break, continue, comments.
 * Statements the reference knows but we do not implement (macro, call,
 * filter blocks) are rejected here with their line and column, so a template
 * that uses them fails loudly instead of rendering differently.
 * Invariant: every node is allocated in the template pool; nesting depth is
 * capped (JJ_MAX_DEPTH) so hostile input cannot exhaust the C stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_internal.h"

#define JJ_MAX_DEPTH 200

typedef struct {
    jj_pool *pool;
    const jj_token *t;
    size_t n, cur;
    const jj_srcmap *sm;
    int depth;
} parser;

static ea_status perr(parser *P, size_t tok, const char *fmt, const char *arg) {
    size_t pos = tok < P->n ? P->t[tok].pos : (P->sm->n_map);
    int line, col;
    ea__jj_linecol(P->sm, pos, &line, &col);
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    if (tok >= P->n) return ea_err(EA_ERR_FORMAT, "chat template line %d column %d: %s (at end of template)", line, col, msg);
    return ea_err(EA_ERR_FORMAT, "chat template line %d column %d: %s", line, col, msg);
}

static ea_status oom(void) { return ea_err(EA_ERR_NOMEM, "chat template: out of memory"); }

static bool is(parser *P, jj_toktype t) { return P->cur < P->n && P->t[P->cur].type == t; }
static bool is_ident_at(parser *P, size_t i, const char *name) {
    return i < P->n && P->t[i].type == JT_IDENT && P->t[i].n == strlen(name) && memcmp(P->t[i].s, name, P->t[i].n) == 0;
}
static bool is_ident(parser *P, const char *name) { return is_ident_at(P, P->cur, name); }
static bool is_stmt(parser *P, const char *name) {
    return is(P, JT_OPEN_STMT) && is_ident_at(P, P->cur + 1, name);
}

static ea_status expect(parser *P, jj_toktype t, const char *what) {
    if (!is(P, t)) return perr(P, P->cur, "expected %s", what);
    P->cur++;
    return EA_OK;
}

static ea_status expect_ident(parser *P, const char *name) {
    if (!is_ident(P, name)) return perr(P, P->cur, "expected '%s'", name);
    P->cur++;
    return EA_OK;
}

static jj_node *mk(parser *P, jj_nodekind k, size_t tok) {
    jj_node *n = ea__jj_alloc(P->pool, sizeof *n);
    if (n) {
        n->kind = k;
        n->pos = tok < P->n ? P->t[tok].pos : (uint32_t)P->sm->n_map;
    }
    return n;
}

/* Growable node list in the pool. */
typedef struct {
    jj_node **v;
    size_t n, cap;
} nlist;

static bool nl_push(parser *P, nlist *l, jj_node *x) {
    if (!ea__jj_grow(P->pool, &l->v, l->n, &l->cap, l->n + 1, sizeof *l->v, 4)) return false;
    l->v[l->n++] = x;
    return true;
}

static ea_status parse_any(parser *P, jj_node **out);
static ea_status parse_expr(parser *P, jj_node **out);
static ea_status parse_primary(parser *P, jj_node **out);
static ea_status parse_call_tail(parser *P, jj_node *callee, jj_node **out);

#define ENTER()                                                                              \
    do {                                                                                     \
        if (++P->depth > JJ_MAX_DEPTH) return perr(P, P->cur, "nesting deeper than %s levels", "200"); \
    } while (0)
#define LEAVE() (P->depth--)

/* Body statements until one of the named statements opens. */
static ea_status parse_until(parser *P, const char *const *names, size_t n_names, nlist *body, size_t open_tok,
                             const char *closer) {
    for (;;) {
        if (P->cur >= P->n) return perr(P, open_tok, "this block is never closed: expected {%% %s %%}", closer);
        for (size_t i = 0; i < n_names; i++)
            if (is_stmt(P, names[i])) return EA_OK;
        jj_node *s = NULL;
        EA_TRY(parse_any(P, &s));
        if (!nl_push(P, body, s)) return oom();
    }
}

static ea_status parse_expr_seq(parser *P, bool primary, jj_node **out) {
    size_t st = P->cur;
    jj_node *first = NULL;
    EA_TRY(primary ? parse_primary(P, &first) : parse_expr(P, &first));
    if (!is(P, JT_COMMA)) {
        *out = first;
        return EA_OK;
    }
    nlist l = {0};
    if (!nl_push(P, &l, first)) return oom();
    while (is(P, JT_COMMA)) {
        P->cur++;
        jj_node *e = NULL;
        EA_TRY(primary ? parse_primary(P, &e) : parse_expr(P, &e));
        if (!nl_push(P, &l, e)) return oom();
    }
    jj_node *t = mk(P, JN_TUPLE, st);
    if (!t) return oom();
    t->list = l.v;
    t->n_list = l.n;
    *out = t;
    return EA_OK;
}

static ea_status parse_args(parser *P, nlist *args) {
    EA_TRY(expect(P, JT_LPAREN, "'(' to open the argument list"));
    bool saw_kw = false;
    while (!is(P, JT_RPAREN)) {
        if (P->cur >= P->n) return perr(P, P->cur, "expected ')' to close the argument list%s", "");
        if (is(P, JT_POW) || (is(P, JT_MUL) && P->t[P->cur].n == 1 && P->t[P->cur].s[0] == '*'))
            return perr(P, P->cur, "unsupported: argument unpacking (* or **)%s", "");
        size_t st = P->cur;
        jj_node *a = NULL;
        EA_TRY(parse_expr(P, &a));
        if (is(P, JT_EQUALS)) {
            P->cur++;
            if (a->kind != JN_IDENT) return perr(P, st, "expected an identifier for a keyword argument%s", "");
            jj_node *v = NULL;
            EA_TRY(parse_expr(P, &v));
            jj_node *kw = mk(P, JN_KWARG, st);
            if (!kw) return oom();
            kw->s = a->s;
            kw->n = a->n;
            kw->a = v;
            a = kw;
            saw_kw = true;
        } else if (saw_kw) {
            return perr(P, st, "positional arguments must come before keyword arguments%s", "");
        }
        if (!nl_push(P, args, a)) return oom();
        if (is(P, JT_COMMA)) P->cur++;
    }
    P->cur++;
    return EA_OK;
}

/* Inside [ ]: an index or a slice start:stop:step. */
static ea_status parse_subscript(parser *P, jj_node **out) {
    size_t st = P->cur;
    jj_node *parts[8];
    size_t np = 0;
    bool slice = false;
    while (!is(P, JT_RBRACKET)) {
        if (P->cur >= P->n) return perr(P, st, "expected ']'%s", "");
        if (np >= 4) return perr(P, st, "expected 0-3 arguments for a slice%s", "");
        if (is(P, JT_COLON)) {
            parts[np++] = NULL;
            P->cur++;
            slice = true;
        } else {
            EA_TRY(parse_expr(P, &parts[np]));
            np++;
            if (is(P, JT_COLON)) {
                P->cur++;
                slice = true;
            }
        }
    }
    if (np == 0) return perr(P, st, "expected an index or slice inside [ ]%s", "");
    if (!slice) {
        *out = parts[0];
        return EA_OK;
    }
    if (np > 3) return perr(P, st, "expected 0-3 arguments for a slice%s", "");
    jj_node *s = mk(P, JN_SLICE, st);
    if (!s) return oom();
    s->a = parts[0];
    s->b = np > 1 ? parts[1] : NULL;
    s->c = np > 2 ? parts[2] : NULL;
    *out = s;
    return EA_OK;
}

static ea_status parse_member_tail(parser *P, jj_node *obj, jj_node **out) {
    while (is(P, JT_DOT) || is(P, JT_LBRACKET)) {
        size_t st = P->cur;
        bool computed = is(P, JT_LBRACKET);
        P->cur++;
        jj_node *prop = NULL;
        if (computed) {
            EA_TRY(parse_subscript(P, &prop));
            EA_TRY(expect(P, JT_RBRACKET, "']'"));
        } else {
            size_t pt = P->cur;
            EA_TRY(parse_primary(P, &prop));
            if (prop->kind != JN_IDENT && prop->kind != JN_INT)
                return perr(P, pt, "expected a name or integer after '.'%s", "");
        }
        jj_node *m = mk(P, JN_MEMBER, st);
        if (!m) return oom();
        m->a = obj;
        m->b = prop;
        m->flag = computed;
        obj = m;
    }
    *out = obj;
    return EA_OK;
}

static ea_status parse_call_tail(parser *P, jj_node *callee, jj_node **out) {
    ENTER();
    size_t st = P->cur;
    nlist args = {0};
    EA_TRY(parse_args(P, &args));
    jj_node *c = mk(P, JN_CALL, st);
    if (!c) return oom();
    c->a = callee;
    c->list = args.v;
    c->n_list = args.n;
    jj_node *e = NULL;
    EA_TRY(parse_member_tail(P, c, &e));
    if (is(P, JT_LPAREN)) EA_TRY(parse_call_tail(P, e, &e));
    *out = e;
    LEAVE();
    return EA_OK;
}

static ea_status parse_call_member(parser *P, jj_node **out) {
    jj_node *p = NULL, *m = NULL;
    EA_TRY(parse_primary(P, &p));
    EA_TRY(parse_member_tail(P, p, &m));
    if (is(P, JT_LPAREN)) return parse_call_tail(P, m, out);
    *out = m;
    return EA_OK;
}

static ea_status parse_unary_sign(parser *P, jj_node **out) {
    ENTER();
    if (P->cur < P->n && (P->t[P->cur].type == JT_UNARY || P->t[P->cur].type == JT_ADD) && P->t[P->cur].n == 1 &&
        (P->t[P->cur].s[0] == '-' || P->t[P->cur].s[0] == '+')) {
        size_t st = P->cur++;
        jj_node *a = NULL;
        EA_TRY(parse_unary_sign(P, &a));
        jj_node *u = mk(P, JN_UNARY, st);
        if (!u) return oom();
        u->op = P->t[st].s[0] == '-' ? JOP_NEG : JOP_POS;
        u->a = a;
        *out = u;
    } else {
        EA_TRY(parse_call_member(P, out));
    }
    LEAVE();
    return EA_OK;
}

static ea_status parse_filter(parser *P, jj_node **out) {
    jj_node *operand = NULL;
    EA_TRY(parse_unary_sign(P, &operand));
    while (is(P, JT_PIPE)) {
        size_t st = P->cur++;
        size_t ft = P->cur;
        jj_node *f = NULL;
        EA_TRY(parse_primary(P, &f));
        if (f->kind != JN_IDENT) return perr(P, ft, "expected a filter name after '|'%s", "");
        if (is(P, JT_LPAREN)) EA_TRY(parse_call_tail(P, f, &f));
        jj_node *n = mk(P, JN_FILTER, st);
        if (!n) return oom();
        n->a = operand;
        n->b = f;
        operand = n;
    }
    *out = operand;
    return EA_OK;
}

static ea_status parse_test(parser *P, jj_node **out) {
    jj_node *operand = NULL;
    EA_TRY(parse_filter(P, &operand));
    while (is_ident(P, "is")) {
        size_t st = P->cur++;
        bool neg = is_ident(P, "not");
        if (neg) P->cur++;
        size_t tt = P->cur;
        jj_node *t = NULL;
        EA_TRY(parse_primary(P, &t));
        if (t->kind != JN_IDENT) return perr(P, tt, "expected a test name after 'is'%s", "");
        jj_node *n = mk(P, JN_TEST, st);
        if (!n) return oom();
        n->a = operand;
        n->s = t->s;
        n->n = t->n;
        n->flag = neg;
        operand = n;
    }
    *out = operand;
    return EA_OK;
}

static jj_node *binary(parser *P, size_t tok, jj_op op, jj_node *a, jj_node *b) {
    jj_node *n = mk(P, JN_BINARY, tok);
    if (n) {
        n->op = op;
        n->a = a;
        n->b = b;
    }
    return n;
}

static ea_status parse_power(parser *P, jj_node **out) {
    jj_node *l = NULL;
    EA_TRY(parse_test(P, &l));
    while (is(P, JT_POW)) {
        size_t st = P->cur++;
        jj_node *r = NULL;
        EA_TRY(parse_test(P, &r));
        if (!(l = binary(P, st, JOP_POW, l, r))) return oom();
    }
    *out = l;
    return EA_OK;
}

static ea_status parse_mul(parser *P, jj_node **out) {
    jj_node *l = NULL;
    EA_TRY(parse_power(P, &l));
    while (is(P, JT_MUL)) {
        size_t st = P->cur++;
        const jj_token *t = &P->t[st];
        jj_op op = t->n == 2 ? JOP_FLOORDIV : t->s[0] == '*' ? JOP_MUL : t->s[0] == '/' ? JOP_DIV : JOP_MOD;
        jj_node *r = NULL;
        EA_TRY(parse_power(P, &r));
        if (!(l = binary(P, st, op, l, r))) return oom();
    }
    *out = l;
    return EA_OK;
}

static ea_status parse_add(parser *P, jj_node **out) {
    jj_node *l = NULL;
    EA_TRY(parse_mul(P, &l));
    while (is(P, JT_ADD)) {
        size_t st = P->cur++;
        char c = P->t[st].s[0];
        jj_op op = c == '+' ? JOP_ADD : c == '-' ? JOP_SUB : JOP_CONCAT;
        jj_node *r = NULL;
        EA_TRY(parse_mul(P, &r));
        if (!(l = binary(P, st, op, l, r))) return oom();
    }
    *out = l;
    return EA_OK;
}

static ea_status parse_cmp(parser *P, jj_node **out) {
    jj_node *l = NULL;
    EA_TRY(parse_add(P, &l));
    for (;;) {
        size_t st = P->cur;
        jj_op op;
        if (is_ident(P, "not") && is_ident_at(P, P->cur + 1, "in")) {
            op = JOP_NOT_IN;
            P->cur += 2;
        } else if (is_ident(P, "in")) {
            op = JOP_IN;
            P->cur++;
        } else if (is(P, JT_CMP)) {
            const jj_token *t = &P->t[P->cur++];
            if (t->n == 2) op = t->s[0] == '<' ? JOP_LE : t->s[0] == '>' ? JOP_GE : t->s[0] == '=' ? JOP_EQ : JOP_NE;
            else op = t->s[0] == '<' ? JOP_LT : JOP_GT;
        } else {
            break;
        }
        jj_node *r = NULL;
        EA_TRY(parse_add(P, &r));
        if (!(l = binary(P, st, op, l, r))) return oom();
    }
    *out = l;
    return EA_OK;
}

static ea_status parse_not(parser *P, jj_node **out) {
    ENTER();
    if (is_ident(P, "not")) {
        size_t st = P->cur++;
        jj_node *a = NULL;
        EA_TRY(parse_not(P, &a));
        jj_node *u = mk(P, JN_UNARY, st);
        if (!u) return oom();
        u->op = JOP_NOT;
        u->a = a;
        *out = u;
    } else {
        EA_TRY(parse_cmp(P, out));
    }
    LEAVE();
    return EA_OK;
}

static ea_status parse_and(parser *P, jj_node **out) {
    jj_node *l = NULL;
    EA_TRY(parse_not(P, &l));
    while (is_ident(P, "and")) {
        size_t st = P->cur++;
        jj_node *r = NULL;
        EA_TRY(parse_not(P, &r));
        if (!(l = binary(P, st, JOP_AND, l, r))) return oom();
    }
    *out = l;
    return EA_OK;
}

static ea_status parse_or(parser *P, jj_node **out) {
    jj_node *l = NULL;
    EA_TRY(parse_and(P, &l));
    while (is_ident(P, "or")) {
        size_t st = P->cur++;
        jj_node *r = NULL;
        EA_TRY(parse_and(P, &r));
        if (!(l = binary(P, st, JOP_OR, l, r))) return oom();
    }
    *out = l;
    return EA_OK;
}

static ea_status parse_expr(parser *P, jj_node **out) {
    ENTER();
    jj_node *a = NULL;
    EA_TRY(parse_or(P, &a));
    if (is_ident(P, "if")) {
        size_t st = P->cur++;
        jj_node *test = NULL;
        EA_TRY(parse_or(P, &test));
        if (is_ident(P, "else")) {
            P->cur++;
            jj_node *f = NULL;
            EA_TRY(parse_expr(P, &f));
            jj_node *t = mk(P, JN_TERNARY, st);
            if (!t) return oom();
            t->a = test;
            t->b = a;
            t->c = f;
            a = t;
        } else {
            jj_node *s = mk(P, JN_SELECT, st);
            if (!s) return oom();
            s->a = a;
            s->b = test;
            a = s;
        }
    }
    *out = a;
    LEAVE();
    return EA_OK;
}

static ea_status parse_primary(parser *P, jj_node **out) {
    ENTER();
    if (P->cur >= P->n) return perr(P, P->cur, "unexpected end of template, expected an expression%s", "");
    size_t st = P->cur;
    const jj_token *t = &P->t[P->cur++];
    jj_node *n = NULL;
    switch (t->type) {
    case JT_NUM: {
        bool is_float = memchr(t->s, '.', t->n) != NULL;
        n = mk(P, is_float ? JN_FLOAT : JN_INT, st);
        if (!n) return oom();
        n->num = strtod(t->s, NULL);
        break;
    }
    case JT_STR: {
        jj_buf b;
        ea__jj_buf_init(&b, P->pool);
        if (!ea__jj_buf_add(&b, t->s, t->n)) return oom();
        while (is(P, JT_STR)) { /* adjacent literals concatenate */
            if (!ea__jj_buf_add(&b, P->t[P->cur].s, P->t[P->cur].n)) return oom();
            P->cur++;
        }
        n = mk(P, JN_STR, st);
        if (!n) return oom();
        n->s = b.s ? b.s : "";
        n->n = b.n;
        break;
    }
    case JT_IDENT:
        n = mk(P, JN_IDENT, st);
        if (!n) return oom();
        n->s = t->s;
        n->n = t->n;
        break;
    case JT_LPAREN:
        EA_TRY(parse_expr_seq(P, false, &n));
        EA_TRY(expect(P, JT_RPAREN, "')'"));
        break;
    case JT_LBRACKET: {
        nlist l = {0};
        while (!is(P, JT_RBRACKET)) {
            if (P->cur >= P->n) return perr(P, st, "this list is never closed with ']'%s", "");
            jj_node *e = NULL;
            EA_TRY(parse_expr(P, &e));
            if (!nl_push(P, &l, e)) return oom();
            if (is(P, JT_COMMA)) P->cur++;
        }
        P->cur++;
        n = mk(P, JN_ARRAY, st);
        if (!n) return oom();
        n->list = l.v;
        n->n_list = l.n;
        break;
    }
    case JT_LBRACE: {
        nlist k = {0}, v = {0};
        while (!is(P, JT_RBRACE)) {
            if (P->cur >= P->n) return perr(P, st, "this dict is never closed with '}'%s", "");
            jj_node *ke = NULL, *ve = NULL;
            EA_TRY(parse_expr(P, &ke));
            EA_TRY(expect(P, JT_COLON, "':' between key and value"));
            EA_TRY(parse_expr(P, &ve));
            if (!nl_push(P, &k, ke) || !nl_push(P, &v, ve)) return oom();
            if (is(P, JT_COMMA)) P->cur++;
        }
        P->cur++;
        n = mk(P, JN_OBJECT, st);
        if (!n) return oom();
        n->list = k.v;
        n->n_list = k.n;
        n->list2 = v.v;
        n->n_list2 = v.n;
        break;
    }
    default:
        return perr(P, st, "unexpected '%s'", t->type == JT_TEXT ? "text" : t->s);
    }
    *out = n;
    LEAVE();
    return EA_OK;
}

/* ---- statements ------------------------------------------------------------ */

static ea_status parse_if(parser *P, size_t open_tok, jj_node **out) {
    ENTER();
    jj_node *n = mk(P, JN_IF, open_tok);
    if (!n) return oom();
    EA_TRY(parse_expr(P, &n->a));
    EA_TRY(expect(P, JT_CLOSE_STMT, "'%}' to close the if"));
    nlist body = {0}, alt = {0};
    static const char *const stops[] = {"elif", "else", "endif"};
    EA_TRY(parse_until(P, stops, 3, &body, open_tok, "endif"));
    if (is_stmt(P, "elif")) {
        size_t et = P->cur;
        P->cur += 2;
        jj_node *e = NULL;
        EA_TRY(parse_if(P, et, &e));
        if (!nl_push(P, &alt, e)) return oom();
    } else if (is_stmt(P, "else")) {
        P->cur += 2;
        EA_TRY(expect(P, JT_CLOSE_STMT, "'%}' after else"));
        static const char *const endif[] = {"endif"};
        EA_TRY(parse_until(P, endif, 1, &alt, open_tok, "endif"));
    }
    n->list = body.v;
    n->n_list = body.n;
    n->list2 = alt.v;
    n->n_list2 = alt.n;
    *out = n;
    LEAVE();
    return EA_OK;
}

static ea_status parse_for(parser *P, size_t open_tok, jj_node **out) {
    jj_node *n = mk(P, JN_FOR, open_tok);
    if (!n) return oom();
    size_t vt = P->cur;
    EA_TRY(parse_expr_seq(P, true, &n->a));
    if (n->a->kind != JN_IDENT && n->a->kind != JN_TUPLE)
        return perr(P, vt, "expected a name or a tuple of names as the loop variable%s", "");
    if (!is_ident(P, "in")) return perr(P, P->cur, "expected 'in' after the loop variable%s", "");
    P->cur++;
    EA_TRY(parse_expr(P, &n->b));
    EA_TRY(expect(P, JT_CLOSE_STMT, "'%}' to close the for"));
    nlist body = {0}, alt = {0};
    static const char *const stops[] = {"endfor", "else"};
    EA_TRY(parse_until(P, stops, 2, &body, open_tok, "endfor"));
    if (is_stmt(P, "else")) {
        P->cur += 2;
        EA_TRY(expect(P, JT_CLOSE_STMT, "'%}' after else"));
        static const char *const endfor[] = {"endfor"};
        EA_TRY(parse_until(P, endfor, 1, &alt, open_tok, "endfor"));
    }
    n->list = body.v;
    n->n_list = body.n;
    n->list2 = alt.v;
    n->n_list2 = alt.n;
    *out = n;
    return EA_OK;
}

static ea_status parse_stmt(parser *P, jj_node **out) {
    size_t open_tok = P->cur;
    EA_TRY(expect(P, JT_OPEN_STMT, "'{%'"));
    if (!is(P, JT_IDENT)) return perr(P, P->cur, "expected a statement name after '{%%'%s", "");
    const jj_token *name = &P->t[P->cur];
    char nm[32];
    snprintf(nm, sizeof nm, "%.*s", (int)(name->n < 31 ? name->n : 31), name->s);
    P->cur++;
    if (!strcmp(nm, "set")) {
        jj_node *n = mk(P, JN_SET, open_tok);
        if (!n) return oom();
        EA_TRY(parse_expr_seq(P, false, &n->a));
        if (is(P, JT_EQUALS)) {
            P->cur++;
            EA_TRY(parse_expr_seq(P, false, &n->b));
        } else {
            EA_TRY(expect(P, JT_CLOSE_STMT, "'=' or '%}' in set"));
            nlist body = {0};
            static const char *const endset[] = {"endset"};
            EA_TRY(parse_until(P, endset, 1, &body, open_tok, "endset"));
            P->cur++;
            EA_TRY(expect_ident(P, "endset"));
            n->list = body.v;
            n->n_list = body.n;
        }
        EA_TRY(expect(P, JT_CLOSE_STMT, "'%}' to close the set"));
        *out = n;
        return EA_OK;
    }
    if (!strcmp(nm, "if")) {
        EA_TRY(parse_if(P, open_tok, out));
        EA_TRY(expect(P, JT_OPEN_STMT, "'{%'"));
        EA_TRY(expect_ident(P, "endif"));
        return expect(P, JT_CLOSE_STMT, "'%}' after endif");
    }
    if (!strcmp(nm, "for")) {
        ENTER();
        EA_TRY(parse_for(P, open_tok, out));
        EA_TRY(expect(P, JT_OPEN_STMT, "'{%'"));
        EA_TRY(expect_ident(P, "endfor"));
        LEAVE();
        return expect(P, JT_CLOSE_STMT, "'%}' after endfor");
    }
    if (!strcmp(nm, "break") || !strcmp(nm, "continue")) {
        jj_node *n = mk(P, nm[0] == 'b' ? JN_BREAK : JN_CONTINUE, open_tok);
        if (!n) return oom();
        EA_TRY(expect(P, JT_CLOSE_STMT, "'%}'"));
        *out = n;
        return EA_OK;
    }
    if (!strcmp(nm, "macro") || !strcmp(nm, "call") || !strcmp(nm, "filter"))
        return perr(P, open_tok, "unsupported statement '%s' (this interpreter implements if, for, set, break, continue)", nm);
    return perr(P, open_tok, "unknown statement '%s'", nm);
}

static ea_status parse_any(parser *P, jj_node **out) {
    if (P->cur >= P->n) return perr(P, P->cur, "unexpected end of template%s", "");
    const jj_token *t = &P->t[P->cur];
    switch (t->type) {
    case JT_COMMENT: {
        jj_node *n = mk(P, JN_COMMENT, P->cur++);
        if (!n) return oom();
        *out = n;
        return EA_OK;
    }
    case JT_TEXT: {
        jj_node *n = mk(P, JN_TEXT, P->cur++);
        if (!n) return oom();
        n->s = t->s;
        n->n = t->n;
        *out = n;
        return EA_OK;
    }
    case JT_OPEN_STMT:
        return parse_stmt(P, out);
    case JT_OPEN_EXPR: {
        P->cur++;
        EA_TRY(parse_expr(P, out));
        return expect(P, JT_CLOSE_EXPR, "'}}' to close the expression");
    }
    default:
        return perr(P, P->cur, "unexpected '%s'", t->s);
    }
}

ea_status ea__jj_parse(jj_pool *pool, const jj_token *toks, size_t n_toks, const jj_srcmap *sm, jj_node ***body,
                       size_t *n_body) {
    parser P = {.pool = pool, .t = toks, .n = n_toks, .sm = sm};
    nlist l = {0};
    while (P.cur < P.n) {
        jj_node *s = NULL;
        EA_TRY(parse_any(&P, &s));
        if (!nl_push(&P, &l, s)) return oom();
    }
    *body = l.v;
    *n_body = l.n;
    return EA_OK;
}
