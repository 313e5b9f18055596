/*
 * jinja_lex.c — chunk pool, source preprocessing and tokenizer of the
 * chat-template interpreter.
 *
 * Preprocessing is the reference's, step for step, on the whole source text
 * (it is text substitution, so it also applies inside string literals):
 *   1. one trailing "\n" is dropped;
 *   2. lstrip_blocks: spaces/tabs at the start of a line before "{%", "{#"
 *      (or "{-") are removed;
 *   3. trim_blocks: a "\n" right after "%}", "#}" (or "-}") is removed;
 *   4. transformers' {% generation %} / {% endgeneration %} tags are removed.
 * Each step keeps an offset map so errors name the line and column of the
 * template as the user wrote it.
 *
 * Tokenizing follows the reference lexer: text runs outside tags, {%- and
 * -%} strip whitespace (JS \s, so Unicode spaces too), "-"/"+" are unary
 * after an operator (then "-1" is one numeric token), strings decode the
 * escapes \n \t \r \b \f \v \' \" \\ \xHH \uHHHH and reject any other.
 * Invariants: every token's text lives in the pool; positions are offsets in
 * the preprocessed text; the source must be valid UTF-8 (checked first).
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/jinja_internal.h"

/* ---- pool ------------------------------------------------------------------ */

struct jj_chunk {
    jj_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

void ea__jj_pool_init(jj_pool *p, size_t limit) {
    memset(p, 0, sizeof *p);
    p->limit = limit;
}

void ea__jj_pool_deinit(jj_pool *p) {
    jj_chunk *c = p->head;
    while (c) {
        jj_chunk *n = c->next;
        ea_free(c);
        c = n;
    }
    p->head = NULL;
}

bool ea__jj_grow(jj_pool *p, void *pp, size_t n, size_t *cap, size_t need, size_t elem, size_t first) {
    if (need <= *cap) return true;
    size_t nc = ea_grow_cap(*cap, need, first), bytes;
    if (!nc || !ea_mul_ok(nc, elem, &bytes)) return false;
    void *nv = ea__jj_alloc(p, bytes), *old;
    if (!nv) return false;
    memcpy(&old, pp, sizeof old); /* pp is a T **: read and write it as bytes */
    if (n) memcpy(nv, old, n * elem);
    memcpy(pp, &nv, sizeof nv);
    *cap = nc;
    return true;
}

void *ea__jj_alloc(jj_pool *p, size_t n) {
    if (p->failed) return NULL;
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n || (p->limit && (p->used_total + need > p->limit || need > p->limit))) {
        p->failed = true;
        return NULL;
    }
    jj_chunk *c = p->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > 65536 ? need : 65536;
        c = ea_malloc(sizeof(jj_chunk) + cap);
        if (!c) {
            p->failed = true;
            return NULL;
        }
        c->next = p->head;
        c->cap = cap;
        c->used = 0;
        p->head = c;
    }
    void *r = c->data + c->used;
    c->used += need;
    p->used_total += need;
    memset(r, 0, n);
    return r;
}

char *ea__jj_strndup(jj_pool *p, const char *s, size_t n) {
    char *r = ea__jj_alloc(p, n + 1);
    if (!r) return NULL;
    if (n) memcpy(r, s, n);
    r[n] = 0;
    return r;
}

void ea__jj_linecol(const jj_srcmap *m, size_t pos, int *line, int *col) {
    size_t o = m->orig_len;
    if (m->map && pos <= m->n_map) o = m->map[pos];
    if (o > m->orig_len) o = m->orig_len;
    int l = 1, c = 1;
    for (size_t i = 0; i < o; i++) {
        if (m->orig[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* ---- preprocessing ------------------------------------------------------------ */

typedef struct {
    char *s;
    uint32_t *map; /* n + 1 entries: the last maps the end */
    size_t n;
} pp_text;

static bool pp_alloc(jj_pool *pool, pp_text *t, size_t cap) {
    t->s = ea__jj_alloc(pool, cap + 1);
    t->map = ea__jj_alloc(pool, (cap + 1) * sizeof(uint32_t));
    t->n = 0;
    return t->s && t->map;
}

static void pp_put(pp_text *o, const pp_text *in, size_t i) {
    o->s[o->n] = in->s[i];
    o->map[o->n] = in->map[i];
    o->n++;
}

static void pp_end(pp_text *o, const pp_text *in) {
    o->s[o->n] = 0;
    o->map[o->n] = in->map[in->n];
}

/* JS multiline ^: start, or after \n, \r, U+2028, U+2029. */
static bool at_line_start(const pp_text *t, size_t i) {
    if (i == 0) return true;
    char c = t->s[i - 1];
    if (c == '\n' || c == '\r') return true;
    if (i >= 3 && (unsigned char)t->s[i - 3] == 0xE2 && (unsigned char)t->s[i - 2] == 0x80 &&
        ((unsigned char)t->s[i - 1] == 0xA8 || (unsigned char)t->s[i - 1] == 0xA9))
        return true;
    return false;
}

static bool pp_lstrip(jj_pool *pool, const pp_text *in, pp_text *o) {
    if (!pp_alloc(pool, o, in->n)) return false;
    size_t i = 0;
    while (i < in->n) {
        if (at_line_start(in, i)) {
            size_t j = i;
            while (j < in->n && (in->s[j] == ' ' || in->s[j] == '\t')) j++;
            if (j + 1 < in->n && in->s[j] == '{' &&
                (in->s[j + 1] == '#' || in->s[j + 1] == '%' || in->s[j + 1] == '-')) {
                pp_put(o, in, j);
                pp_put(o, in, j + 1);
                i = j + 2;
                continue;
            }
        }
        pp_put(o, in, i);
        i++;
    }
    pp_end(o, in);
    return true;
}

static bool pp_trim(jj_pool *pool, const pp_text *in, pp_text *o) {
    if (!pp_alloc(pool, o, in->n)) return false;
    size_t i = 0;
    while (i < in->n) {
        char c = in->s[i];
        if ((c == '#' || c == '%' || c == '-') && i + 2 < in->n + 0 && in->s[i + 1] == '}' &&
            in->s[i + 2] == '\n') {
            pp_put(o, in, i);
            pp_put(o, in, i + 1);
            i += 3;
            continue;
        }
        pp_put(o, in, i);
        i++;
    }
    pp_end(o, in);
    return true;
}

/* Matches "{%" -? \s* (end)? "generation" \s* -? "%}" at i; OUT: end, lstrip, rstrip. */
static bool gen_tag_at(const pp_text *t, size_t i, size_t *end, bool *l, bool *r) {
    const char *s = t->s;
    size_t n = t->n;
    if (i + 1 >= n || s[i] != '{' || s[i + 1] != '%') return false;
    size_t j = i + 2;
    *l = false;
    if (j < n && s[j] == '-') {
        *l = true;
        j++;
    }
    size_t w;
    while (j < n && (w = ea__jj_ws_at(s + j, n - j)) > 0) j += w;
    if (j + 3 <= n && memcmp(s + j, "end", 3) == 0 && j + 13 <= n && memcmp(s + j + 3, "generation", 10) == 0)
        j += 3;
    if (j + 10 > n || memcmp(s + j, "generation", 10) != 0) return false;
    j += 10;
    while (j < n && (w = ea__jj_ws_at(s + j, n - j)) > 0) j += w;
    *r = false;
    if (j < n && s[j] == '-') {
        *r = true;
        j++;
    }
    if (j + 1 >= n + 0 || s[j] != '%' || s[j + 1] != '}') return false;
    *end = j + 2;
    return true;
}

static bool pp_generation(jj_pool *pool, const pp_text *in, pp_text *o) {
    if (!pp_alloc(pool, o, in->n)) return false;
    size_t i = 0, last_end = 0;
    while (i < in->n) {
        size_t end;
        bool l, r;
        if (in->s[i] == '{' && gen_tag_at(in, i, &end, &l, &r)) {
            if (l) { /* drop whitespace emitted since the previous match */
                size_t w;
                while (o->n > 0 && (w = ea__jj_ws_before(o->s, o->n)) > 0 && o->n - w >= last_end) o->n -= w;
            }
            i = end;
            if (r) {
                size_t w;
                while (i < in->n && (w = ea__jj_ws_at(in->s + i, in->n - i)) > 0) i += w;
            }
            last_end = o->n;
            continue;
        }
        pp_put(o, in, i);
        i++;
    }
    pp_end(o, in);
    return true;
}

/* ---- tokenizer ---------------------------------------------------------------- */

typedef struct {
    jj_pool *pool;
    const char *src;
    size_t n, pos;
    jj_token *toks;
    size_t n_toks, cap;
    const uint32_t *map;
    const char *orig;
    size_t orig_len;
} lexer;

static ea_status lex_err(lexer *L, size_t at, const char *what) {
    jj_srcmap sm = {L->orig, L->orig_len, L->map, L->n};
    int line, col;
    ea__jj_linecol(&sm, at, &line, &col);
    return ea_err(EA_ERR_FORMAT, "chat template line %d column %d: %s", line, col, what);
}

static ea_status push(lexer *L, jj_toktype t, const char *s, size_t n, size_t pos) {
    if (!ea__jj_grow(L->pool, &L->toks, L->n_toks, &L->cap, L->n_toks + 1, sizeof *L->toks, 256))
        return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
    char *c = ea__jj_strndup(L->pool, s, n);
    if (!c) return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
    L->toks[L->n_toks++] = (jj_token){t, c, n, (uint32_t)pos};
    return EA_OK;
}

static jj_token *last_tok(lexer *L) { return L->n_toks ? &L->toks[L->n_toks - 1] : NULL; }

static void strip_trailing_ws(lexer *L) {
    jj_token *t = last_tok(L);
    if (t && t->type == JT_TEXT) {
        size_t w;
        while (t->n > 0 && (w = ea__jj_ws_before(t->s, t->n)) > 0) t->n -= w;
        if (t->n == 0) L->n_toks--;
    }
}

static void skip_leading_ws(lexer *L) {
    size_t w;
    while (L->pos < L->n && (w = ea__jj_ws_at(L->src + L->pos, L->n - L->pos)) > 0) L->pos += w;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* consumeWhile over a predicate class, with the reference's end-of-input rule:
 * running into the end of the source after consuming a character is an error. */
typedef enum { CW_DIGIT, CW_WORD, CW_WS } cw_class;
static ea_status consume_class(lexer *L, cw_class k, size_t *start, size_t *len) {
    *start = L->pos;
    *len = 0; /* also on the error path (GCC 12 -O3 -Werror=maybe-uninitialized) */
    for (;;) {
        if (L->pos >= L->n) break;
        size_t w = 1;
        char c = L->src[L->pos];
        bool ok;
        if (k == CW_DIGIT) ok = is_digit(c);
        else if (k == CW_WORD) ok = is_word(c);
        else ok = (w = ea__jj_ws_at(L->src + L->pos, L->n - L->pos)) > 0;
        if (!ok) break;
        L->pos += w;
        if (L->pos >= L->n) return lex_err(L, *start, "unexpected end of template inside a tag");
    }
    *len = L->pos - *start;
    return EA_OK;
}

static ea_status lex_string(lexer *L, char quote) {
    size_t start = L->pos;
    L->pos++; /* opening quote */
    jj_buf b;
    ea__jj_buf_init(&b, L->pool);
    for (;;) {
        if (L->pos >= L->n) return lex_err(L, start, "unterminated string literal");
        char c = L->src[L->pos];
        if (c == quote) break;
        if (c == '\\') {
            L->pos++;
            if (L->pos >= L->n) return lex_err(L, start, "unterminated string literal");
            char e = L->src[L->pos++];
            if (e == 'x' || e == 'u') {
                size_t hl = e == 'x' ? 2 : 4;
                uint32_t cp = 0;
                if (L->pos + hl > L->n) return lex_err(L, L->pos - 2, "invalid hexadecimal escape sequence");
                for (size_t i = 0; i < hl; i++) {
                    int h = hexval(L->src[L->pos + i]);
                    if (h < 0) return lex_err(L, L->pos - 2, "invalid hexadecimal escape sequence");
                    cp = cp * 16 + (uint32_t)h;
                }
                L->pos += hl;
                if (cp >= 0xD800 && cp <= 0xDBFF) { /* a pair written as two \u escapes */
                    uint32_t lo = 0;
                    bool ok = L->pos + 6 <= L->n && L->src[L->pos] == '\\' && L->src[L->pos + 1] == 'u';
                    for (int i = 0; ok && i < 4; i++) {
                        int h = hexval(L->src[L->pos + 2 + i]);
                        if (h < 0) ok = false;
                        else lo = lo * 16 + (uint32_t)h;
                    }
                    if (!ok || lo < 0xDC00 || lo > 0xDFFF)
                        return lex_err(L, L->pos - 6, "unsupported: lone UTF-16 surrogate in \\u escape");
                    L->pos += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return lex_err(L, L->pos - 6, "unsupported: lone UTF-16 surrogate in \\u escape");
                }
                char u[4];
                size_t k = ea__jj_utf8_enc(cp, u);
                if (!ea__jj_buf_add(&b, u, k)) return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
                continue;
            }
            char r;
            switch (e) {
            case 'n': r = '\n'; break;
            case 't': r = '\t'; break;
            case 'r': r = '\r'; break;
            case 'b': r = '\b'; break;
            case 'f': r = '\f'; break;
            case 'v': r = '\v'; break;
            case '\'': r = '\''; break;
            case '"': r = '"'; break;
            case '\\': r = '\\'; break;
            default: {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected escaped character '%c'", (e >= 32 && e < 127) ? e : '?');
                return lex_err(L, L->pos - 2, msg);
            }
            }
            if (!ea__jj_buf_addc(&b, r)) return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
            continue;
        }
        if (!ea__jj_buf_addc(&b, c)) return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
        L->pos++;
        if (L->pos >= L->n) return lex_err(L, start, "unterminated string literal");
    }
    L->pos++; /* closing quote */
    return push(L, JT_STR, b.s ? b.s : "", b.n, start);
}

static const struct {
    const char *seq;
    jj_toktype t;
} k_table[] = {
    {"{%", JT_OPEN_STMT}, {"%}", JT_CLOSE_STMT}, {"{{", JT_OPEN_EXPR}, {"}}", JT_CLOSE_EXPR},
    {"(", JT_LPAREN}, {")", JT_RPAREN}, {"{", JT_LBRACE}, {"}", JT_RBRACE},
    {"[", JT_LBRACKET}, {"]", JT_RBRACKET}, {",", JT_COMMA}, {".", JT_DOT}, {":", JT_COLON},
    {"|", JT_PIPE}, {"<=", JT_CMP}, {">=", JT_CMP}, {"==", JT_CMP}, {"!=", JT_CMP},
    {"<", JT_CMP}, {">", JT_CMP}, {"+", JT_ADD}, {"-", JT_ADD}, {"~", JT_ADD},
    {"**", JT_POW}, {"*", JT_MUL}, {"//", JT_MUL}, {"/", JT_MUL}, {"%", JT_MUL}, {"=", JT_EQUALS},
};

static ea_status tokenize(lexer *L) {
    int curly = 0;
    while (L->pos < L->n) {
        jj_token *lt = last_tok(L);
        if (!lt || lt->type == JT_CLOSE_STMT || lt->type == JT_CLOSE_EXPR || lt->type == JT_COMMENT) {
            size_t st = L->pos;
            while (L->pos < L->n && !(L->src[L->pos] == '{' && L->pos + 1 < L->n &&
                                      (L->src[L->pos + 1] == '%' || L->src[L->pos + 1] == '{' ||
                                       L->src[L->pos + 1] == '#')))
                L->pos++;
            if (L->pos > st) {
                EA_TRY(push(L, JT_TEXT, L->src + st, L->pos - st, st));
                continue;
            }
        }
        const char *s = L->src;
        size_t p = L->pos, n = L->n;
        if (s[p] == '{' && p + 1 < n && s[p + 1] == '#') {
            size_t st = p;
            L->pos += 2;
            bool strip_before = L->pos < n && s[L->pos] == '-';
            if (strip_before) L->pos++;
            size_t cst = L->pos;
            while (!(L->pos + 1 < n && s[L->pos] == '#' && s[L->pos + 1] == '}')) {
                if (L->pos + 2 >= n) return lex_err(L, st, "missing end of comment tag");
                L->pos++;
            }
            size_t clen = L->pos - cst;
            bool strip_after = clen > 0 && s[cst + clen - 1] == '-';
            if (strip_after) clen--;
            if (strip_before) strip_trailing_ws(L);
            EA_TRY(push(L, JT_COMMENT, s + cst, clen, st));
            L->pos += 2;
            if (strip_after) skip_leading_ws(L);
            continue;
        }
        if (p + 2 < n + 0 && s[p] == '{' && s[p + 1] == '%' && s[p + 2] == '-') {
            strip_trailing_ws(L);
            EA_TRY(push(L, JT_OPEN_STMT, "{%", 2, p));
            L->pos += 3;
            continue;
        }
        if (p + 2 < n + 0 && s[p] == '{' && s[p + 1] == '{' && s[p + 2] == '-') {
            strip_trailing_ws(L);
            EA_TRY(push(L, JT_OPEN_EXPR, "{{", 2, p));
            curly = 0;
            L->pos += 3;
            continue;
        }
        size_t ws_st, ws_n;
        EA_TRY(consume_class(L, CW_WS, &ws_st, &ws_n));
        p = L->pos;
        if (p >= n) break;
        if (p + 2 < n + 0 && s[p] == '-' && s[p + 1] == '%' && s[p + 2] == '}') {
            EA_TRY(push(L, JT_CLOSE_STMT, "%}", 2, p));
            L->pos += 3;
            skip_leading_ws(L);
            continue;
        }
        if (p + 2 < n + 0 && s[p] == '-' && s[p + 1] == '}' && s[p + 2] == '}') {
            EA_TRY(push(L, JT_CLOSE_EXPR, "}}", 2, p));
            L->pos += 3;
            skip_leading_ws(L);
            continue;
        }
        char c = s[p];
        if (c == '-' || c == '+') {
            lt = last_tok(L);
            if (!lt || lt->type == JT_TEXT) return lex_err(L, p, "unexpected character");
            if (!(lt->type == JT_IDENT || lt->type == JT_NUM || lt->type == JT_STR || lt->type == JT_RPAREN ||
                  lt->type == JT_RBRACKET)) {
                L->pos++;
                size_t ds, dn;
                EA_TRY(consume_class(L, CW_DIGIT, &ds, &dn));
                size_t end = L->pos;
                if (dn > 0 && L->pos + 1 < n && s[L->pos] == '.' && is_digit(s[L->pos + 1])) {
                    L->pos++;
                    size_t fs, fn;
                    EA_TRY(consume_class(L, CW_DIGIT, &fs, &fn));
                    end = L->pos;
                }
                if (dn > 0) {
                    jj_buf b;
                    ea__jj_buf_init(&b, L->pool);
                    if (!ea__jj_buf_addc(&b, c) || !ea__jj_buf_add(&b, s + ds, end - ds))
                        return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
                    EA_TRY(push(L, JT_NUM, b.s, b.n, p));
                } else {
                    EA_TRY(push(L, JT_UNARY, &c, 1, p));
                }
                continue;
            }
        }
        bool matched = false;
        for (size_t i = 0; i < sizeof k_table / sizeof k_table[0]; i++) {
            if (k_table[i].t == JT_CLOSE_EXPR && curly > 0) continue;
            size_t k = strlen(k_table[i].seq);
            if (p + k <= n && memcmp(s + p, k_table[i].seq, k) == 0) {
                EA_TRY(push(L, k_table[i].t, s + p, k, p));
                if (k_table[i].t == JT_OPEN_EXPR) curly = 0;
                else if (k_table[i].t == JT_LBRACE) curly++;
                else if (k_table[i].t == JT_RBRACE) curly--;
                L->pos += k;
                matched = true;
                break;
            }
        }
        if (matched) continue;
        if (c == '\'' || c == '"') {
            EA_TRY(lex_string(L, c));
            continue;
        }
        if (is_digit(c)) {
            size_t ds, dn;
            EA_TRY(consume_class(L, CW_DIGIT, &ds, &dn));
            lt = last_tok(L);
            if (!(lt && lt->type == JT_DOT) && L->pos + 1 < n && s[L->pos] == '.' && is_digit(s[L->pos + 1])) {
                L->pos++;
                size_t fs, fn;
                EA_TRY(consume_class(L, CW_DIGIT, &fs, &fn));
            }
            EA_TRY(push(L, JT_NUM, s + ds, L->pos - ds, ds));
            continue;
        }
        if (is_word(c)) {
            size_t ws, wn;
            EA_TRY(consume_class(L, CW_WORD, &ws, &wn));
            EA_TRY(push(L, JT_IDENT, s + ws, wn, ws));
            continue;
        }
        return lex_err(L, p, "unexpected character");
    }
    return EA_OK;
}

ea_status ea__jj_lex(jj_pool *pool, const char *text, size_t len, jj_token **toks, size_t *n_toks,
                     uint32_t **map, size_t *n_map) {
    if (len > 0x7fffffffu) return ea_err(EA_ERR_RANGE, "chat template: %zu bytes is too large", len);
    if (!ea__jj_utf8_valid(text, len)) return ea_err(EA_ERR_FORMAT, "chat template: not valid UTF-8");
    pp_text t0;
    if (!pp_alloc(pool, &t0, len)) return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
    memcpy(t0.s, text, len);
    for (size_t i = 0; i <= len; i++) t0.map[i] = (uint32_t)i;
    t0.n = len;
    if (t0.n > 0 && t0.s[t0.n - 1] == '\n') t0.n--;
    t0.s[t0.n] = 0;
    pp_text t1, t2, t3;
    if (!pp_lstrip(pool, &t0, &t1) || !pp_trim(pool, &t1, &t2) || !pp_generation(pool, &t2, &t3))
        return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
    lexer L = {.pool = pool, .src = t3.s, .n = t3.n, .map = t3.map, .orig = text, .orig_len = len};
    EA_TRY(tokenize(&L));
    *toks = L.toks;
    *n_toks = L.n_toks;
    *map = t3.map;
    *n_map = t3.n;
    return EA_OK;
}
