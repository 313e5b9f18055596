/*
 * jinja_eval.c — tree-walking evaluator of the chat-template interpreter.
 *
 * One render = one value pool + a scope chain. Scopes: the global scope
 * holds the builtins (namespace, raise_exception, range, true/false/none in
 * both cases) and the context keys; a for loop opens one scope for all its
 * iterations (as the reference does); if/else opens none. Lookups walk the
 * chain; a missing name is `undefined` (falsy, prints nothing, errors when
 * used as an operand, as in the reference).
 *
 * Output of a block is appended to one buffer; a for iteration that ends in
 * break/continue drops what that iteration printed (the reference discards
 * the iteration's string when the control exception unwinds), and the else
 * block runs when no iteration completed.
 *
 * Errors name the template line and column of the node that failed.
 * raise_exception() returns EA_ERR_INVALID_ARG with the template's message.
 * Limits (steps, memory) turn runaway templates into errors, not hangs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/jinja_internal.h"

#define JJ_MAX_STEPS 50000000ull
#define JJ_POOL_LIMIT ((size_t)512 << 20)
#define JJ_MAX_RANGE 1000000

typedef struct jj_env jj_env;
struct jj_env {
    jj_env *parent;
    jj_map vars;
};

typedef enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE } jj_ctl;

typedef struct {
    jj_pool *pool;
    const jj_srcmap *sm;
    uint64_t steps, max_steps;
    jj_ctl ctl;
} rt;

/* Internal status for break/continue unwinding to the enclosing for. */
#define JJ_CONTROL EA_ERR_BUSY

static ea_status rerr(rt *R, const jj_node *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ea_status rerr(rt *R, const jj_node *at, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = 0, col = 0;
    if (at) ea__jj_linecol(R->sm, at->pos, &line, &col);
    return ea_err(EA_ERR_FORMAT, "chat template line %d column %d: %s", line, col, msg);
}

static ea_status oom(rt *R) {
    if (R->pool->limit && R->pool->used_total + 1024 > R->pool->limit)
        return ea_err(EA_ERR_RANGE, "chat template: rendering needs more than %zu MiB", R->pool->limit >> 20);
    return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
}

#define CHK(p)                          \
    do {                                \
        if (!(p)) return oom(R);        \
    } while (0)

static const char *tname(const jj_val *v) {
    switch (v->t) {
    case JV_UNDEF: return "undefined";
    case JV_NULL: return "none";
    case JV_BOOL: return "boolean";
    case JV_INT: return "integer";
    case JV_FLOAT: return "float";
    case JV_STR: return "string";
    case JV_ARRAY: return "list";
    case JV_TUPLE: return "tuple";
    case JV_OBJECT: return "dict";
    case JV_KWARGS: return "keyword arguments";
    case JV_NAMESPACE: return "namespace";
    case JV_FUNC: return "function";
    }
    return "?";
}

static bool is_arr(const jj_val *v) { return v->t == JV_ARRAY || v->t == JV_TUPLE; }
static bool is_objv(const jj_val *v) { return v->t == JV_OBJECT || v->t == JV_KWARGS; }
static bool is_num(const jj_val *v) { return v->t == JV_INT || v->t == JV_FLOAT; }

static bool name_is(const jj_node *n, const char *s) { return n->n == strlen(s) && memcmp(n->s, s, n->n) == 0; }

/* ---- scopes ----------------------------------------------------------------------- */

static jj_env *env_new(rt *R, jj_env *parent) {
    jj_env *e = ea__jj_alloc(R->pool, sizeof *e);
    if (e) e->parent = parent;
    return e;
}

static jj_val *env_lookup(jj_env *e, const char *k, size_t n) {
    for (; e; e = e->parent) {
        jj_val *v = ea__jj_map_get(&e->vars, k, n);
        if (v) return v;
    }
    return ea__jj_undef();
}

/* ---- string helpers ------------------------------------------------------------- */

static jj_val *mkstr(rt *R, const char *s, size_t n) { return ea__jj_str(R->pool, s, n); }

static void trim_js(const char *s, size_t n, bool left, bool right, size_t *st, size_t *len) {
    size_t a = 0, b = n, w;
    if (left)
        while (a < b && (w = ea__jj_ws_at(s + a, b - a)) > 0) a += w;
    if (right)
        while (b > a && (w = ea__jj_ws_before(s + a, b - a)) > 0) b -= w;
    *st = a;
    *len = b - a;
}

static bool has_non_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return true;
    return false;
}

static bool is_wordc(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static const char *memfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}

/* Code-point boundaries of a string (for slicing and join, which use Array.from). */
static ea_status code_points(rt *R, const jj_val *s, size_t **offs, size_t *n) {
    size_t cnt = 0;
    for (size_t i = 0; i < s->n;) {
        uint32_t cp;
        i += ea__jj_utf8_dec(s->s + i, s->n - i, &cp);
        cnt++;
    }
    size_t *o = ea__jj_alloc(R->pool, (cnt + 1) * sizeof *o);
    CHK(o);
    size_t k = 0;
    for (size_t i = 0; i < s->n;) {
        uint32_t cp;
        o[k++] = i;
        i += ea__jj_utf8_dec(s->s + i, s->n - i, &cp);
    }
    o[k] = s->n;
    *offs = o;
    *n = cnt;
    return EA_OK;
}

/* JS String#at for an integral index (UTF-16 units). */
static ea_status str_at(rt *R, const jj_node *at, const jj_val *s, double idx, jj_val **out) {
    double len = (double)ea__jj_utf16_len(s->s, s->n);
    if (isnan(idx)) idx = 0;
    idx = trunc(idx);
    if (idx < 0) idx += len;
    if (idx < 0 || idx >= len) {
        *out = ea__jj_undef();
        return EA_OK;
    }
    size_t unit = 0;
    for (size_t i = 0; i < s->n;) {
        uint32_t cp;
        size_t k = ea__jj_utf8_dec(s->s + i, s->n - i, &cp);
        size_t w = cp >= 0x10000 ? 2 : 1;
        if ((double)unit == idx && w == 1) {
            CHK(*out = mkstr(R, s->s + i, k));
            return EA_OK;
        }
        if ((double)unit <= idx && idx < (double)(unit + w))
            return rerr(R, at, "unsupported: indexing into the middle of a character outside the BMP");
        unit += w;
        i += k;
    }
    *out = ea__jj_undef();
    return EA_OK;
}

/* ---- forward declarations ------------------------------------------------------- */

static ea_status ev(rt *R, jj_env *env, const jj_node *n, jj_val **out);
static ea_status ev_block(rt *R, jj_env *env, jj_node *const *list, size_t n, jj_buf *out);

/* ---- arguments ------------------------------------------------------------------- */

typedef struct {
    jj_val **pos;
    size_t n_pos;
    jj_val *kw; /* KWARGS or NULL */
} args_t;

static ea_status ev_args(rt *R, jj_env *env, const jj_node *call, args_t *a) {
    memset(a, 0, sizeof *a);
    if (call->n_list) CHK(a->pos = ea__jj_alloc(R->pool, call->n_list * sizeof *a->pos));
    for (size_t i = 0; i < call->n_list; i++) {
        const jj_node *x = call->list[i];
        if (x->kind == JN_KWARG) continue;
        EA_TRY(ev(R, env, x, &a->pos[a->n_pos]));
        a->n_pos++;
    }
    for (size_t i = 0; i < call->n_list; i++) {
        const jj_node *x = call->list[i];
        if (x->kind != JN_KWARG) continue;
        if (!a->kw) CHK(a->kw = ea__jj_mapval(R->pool, JV_KWARGS));
        if (ea__jj_map_get(a->kw->map, x->s, x->n))
            return rerr(R, x, "got multiple values for keyword argument '%.*s'", (int)x->n, x->s);
        jj_val *v = NULL;
        EA_TRY(ev(R, env, x->a, &v));
        CHK(ea__jj_map_set(R->pool, a->kw->map, x->s, x->n, v));
    }
    return EA_OK;
}

static jj_val *kwarg(const args_t *a, const char *k) {
    return a->kw ? ea__jj_map_get(a->kw->map, k, strlen(k)) : NULL;
}

/* Positional view as the reference passes it to functions: kwargs appended as one value. */
static void flat_args(const args_t *a, jj_val ***v, size_t *n, rt *R) {
    if (!a->kw) {
        *v = a->pos;
        *n = a->n_pos;
        return;
    }
    jj_val **f = ea__jj_alloc(R->pool, (a->n_pos + 1) * sizeof *f);
    if (!f) {
        *v = a->pos;
        *n = a->n_pos;
        return;
    }
    if (a->n_pos) memcpy(f, a->pos, a->n_pos * sizeof *f);
    f[a->n_pos] = a->kw;
    *v = f;
    *n = a->n_pos + 1;
}

/* ---- builtin functions ------------------------------------------------------------ */

static ea_status items_of(rt *R, const jj_val *o, jj_val **out) {
    jj_val *arr = ea__jj_array(R->pool, JV_ARRAY, NULL, 0);
    CHK(arr);
    size_t n = o->map->n;
    if (n) CHK(arr->items = ea__jj_alloc(R->pool, n * sizeof *arr->items));
    for (size_t i = 0; i < n; i++) {
        jj_val *pair[2];
        CHK(pair[0] = mkstr(R, o->map->keys[i], o->map->key_lens[i]));
        pair[1] = o->map->vals[i];
        CHK(arr->items[i] = ea__jj_array(R->pool, JV_ARRAY, pair, 2));
    }
    arr->n_items = n;
    *out = arr;
    return EA_OK;
}

static ea_status keys_or_values(rt *R, const jj_val *o, bool keys, jj_val **out) {
    jj_val *arr = ea__jj_array(R->pool, JV_ARRAY, NULL, 0);
    CHK(arr);
    size_t n = o->map->n;
    if (n) CHK(arr->items = ea__jj_alloc(R->pool, n * sizeof *arr->items));
    for (size_t i = 0; i < n; i++) {
        if (keys) CHK(arr->items[i] = mkstr(R, o->map->keys[i], o->map->key_lens[i]));
        else arr->items[i] = o->map->vals[i];
    }
    arr->n_items = n;
    *out = arr;
    return EA_OK;
}

static ea_status str_replace(rt *R, const jj_node *at, const jj_val *s, jj_val **a, size_t na, jj_val **out) {
    if (na < 2) return rerr(R, at, "replace() requires at least two arguments");
    const jj_val *ov = a[0], *nv = a[1];
    if (ov->t != JV_STR || nv->t != JV_STR) return rerr(R, at, "replace() arguments must be strings");
    const jj_val *count = ea__jj_null();
    if (na > 2) {
        if (a[2]->t == JV_KWARGS) {
            jj_val *c = ea__jj_map_get(a[2]->map, "count", 5);
            count = c ? c : ea__jj_null();
        } else {
            count = a[2];
        }
    }
    if (count->t != JV_INT && count->t != JV_NULL) return rerr(R, at, "replace() count argument must be a number or none");
    double remaining = (count->t == JV_NULL || count->num < 0) ? INFINITY : count->num;
    if (count->t == JV_INT && count->num == 0) {
        *out = (jj_val *)s;
        return EA_OK;
    }
    jj_buf b;
    ea__jj_buf_init(&b, R->pool);
    if (ov->n == 0) { /* empty pattern matches at every code-point boundary */
        size_t i = 0;
        for (;;) {
            if (remaining > 0) {
                CHK(ea__jj_buf_add(&b, nv->s, nv->n));
                remaining--;
            }
            if (i >= s->n) break;
            uint32_t cp;
            size_t k = ea__jj_utf8_dec(s->s + i, s->n - i, &cp);
            CHK(ea__jj_buf_add(&b, s->s + i, k));
            i += k;
        }
    } else {
        size_t i = 0;
        while (i < s->n) {
            const char *f = remaining > 0 ? memfind(s->s + i, s->n - i, ov->s, ov->n) : NULL;
            if (!f) {
                CHK(ea__jj_buf_add(&b, s->s + i, s->n - i));
                break;
            }
            size_t off = (size_t)(f - s->s);
            CHK(ea__jj_buf_add(&b, s->s + i, off - i));
            CHK(ea__jj_buf_add(&b, nv->s, nv->n));
            remaining--;
            i = off + ov->n;
        }
    }
    CHK(*out = ea__jj_str_take(R->pool, b.s ? b.s : "", b.n));
    if (!b.s) CHK(*out = mkstr(R, "", 0));
    return EA_OK;
}

static ea_status push_item(rt *R, jj_val ***v, size_t *n, size_t *cap, jj_val *x) {
    CHK(ea__jj_grow(R->pool, v, *n, cap, *n + 1, sizeof **v, 8));
    (*v)[(*n)++] = x;
    return EA_OK;
}

static ea_status str_split(rt *R, const jj_node *at, const jj_val *s, jj_val **a, size_t na, jj_val **out) {
    const jj_val *sep = na > 0 ? a[0] : ea__jj_null();
    if (sep->t != JV_STR && sep->t != JV_NULL) return rerr(R, at, "split(): sep argument must be a string or none");
    const jj_val *maxv = na > 1 ? a[1] : NULL;
    if (maxv && maxv->t != JV_INT) return rerr(R, at, "split(): maxsplit argument must be a number");
    double maxsplit = maxv ? maxv->num : -1;
    jj_val **v = NULL;
    size_t n = 0, cap = 0;
    if (sep->t == JV_NULL) {
        size_t st, len;
        trim_js(s->s, s->n, true, false, &st, &len);
        const char *t = s->s + st;
        size_t i = 0;
        while (i < len) {
            size_t w;
            while (i < len && (w = ea__jj_ws_at(t + i, len - i)) > 0) i += w;
            if (i >= len) break;
            size_t ms = i;
            while (i < len && ea__jj_ws_at(t + i, len - i) == 0) {
                uint32_t cp;
                i += ea__jj_utf8_dec(t + i, len - i, &cp);
            }
            jj_val *x = NULL;
            if (maxsplit != -1 && (double)n >= maxsplit) {
                CHK(x = mkstr(R, t + ms, len - ms));
                EA_TRY(push_item(R, &v, &n, &cap, x));
                break;
            }
            CHK(x = mkstr(R, t + ms, i - ms));
            EA_TRY(push_item(R, &v, &n, &cap, x));
        }
    } else {
        if (sep->n == 0) return rerr(R, at, "split(): empty separator");
        size_t i = 0;
        for (;;) {
            const char *f = memfind(s->s + i, s->n - i, sep->s, sep->n);
            size_t end = f ? (size_t)(f - s->s) : s->n;
            jj_val *x = NULL;
            CHK(x = mkstr(R, s->s + i, end - i));
            EA_TRY(push_item(R, &v, &n, &cap, x));
            if (!f) break;
            i = end + sep->n;
        }
        if (maxsplit != -1 && (double)n > maxsplit) {
            size_t keep = maxsplit < 0 ? 0 : (size_t)maxsplit;
            /* rest = parts[keep..] joined by sep */
            jj_buf b;
            ea__jj_buf_init(&b, R->pool);
            for (size_t k = keep; k < n; k++) {
                if (k > keep) CHK(ea__jj_buf_add(&b, sep->s, sep->n));
                CHK(ea__jj_buf_add(&b, v[k]->s, v[k]->n));
            }
            jj_val *rest = NULL;
            CHK(rest = mkstr(R, b.s ? b.s : "", b.n));
            n = keep;
            EA_TRY(push_item(R, &v, &n, &cap, rest));
        }
    }
    CHK(*out = ea__jj_array(R->pool, JV_ARRAY, v, n));
    return EA_OK;
}

static ea_status ascii_case(rt *R, const jj_node *at, const jj_val *s, int mode, jj_val **out) {
    /* mode 0 upper, 1 lower, 2 title, 3 capitalize */
    if (has_non_ascii(s->s, mode == 3 ? (s->n ? 1 : 0) : (mode == 2 ? 0 : s->n)))
        return rerr(R, at, "unsupported: changing the case of non-ASCII text");
    char *c = ea__jj_strndup(R->pool, s->s, s->n);
    CHK(c);
    for (size_t i = 0; i < s->n; i++) {
        char ch = c[i];
        bool up = mode == 0 || (mode == 2 && (i == 0 || !is_wordc(s->s[i - 1])) && is_wordc(ch)) || (mode == 3 && i == 0);
        if (mode == 1 && ch >= 'A' && ch <= 'Z') c[i] = (char)(ch + 32);
        else if (up && ch >= 'a' && ch <= 'z') c[i] = (char)(ch - 32);
    }
    CHK(*out = ea__jj_str_take(R->pool, c, s->n));
    return EA_OK;
}

static ea_status call_func(rt *R, const jj_node *at, const jj_val *f, const args_t *A, jj_val **out) {
    jj_val **a;
    size_t na;
    flat_args(A, &a, &na, R);
    const jj_val *s = f->self;
    switch (f->fn) {
    case JF_NAMESPACE: {
        size_t np = A->n_pos;
        if (np > 1) return rerr(R, at, "namespace expected at most 1 argument, got %zu", np);
        jj_val *ns = ea__jj_mapval(R->pool, JV_NAMESPACE);
        CHK(ns);
        if (np == 1) {
            const jj_val *src = A->pos[0];
            if (is_objv(src)) {
                for (size_t i = 0; i < src->map->n; i++)
                    CHK(ea__jj_map_set(R->pool, ns->map, src->map->keys[i], src->map->key_lens[i], src->map->vals[i]));
            } else if (is_arr(src)) {
                for (size_t i = 0; i < src->n_items; i++) {
                    const jj_val *p = src->items[i];
                    if (!is_arr(p) || p->n_items != 2 || p->items[0]->t != JV_STR)
                        return rerr(R, at, "namespace expected a dict or a list of [key, value] pairs");
                    CHK(ea__jj_map_set(R->pool, ns->map, p->items[0]->s, p->items[0]->n, p->items[1]));
                }
            } else {
                return rerr(R, at, "'%s' object is not iterable", tname(src));
            }
        }
        if (A->kw)
            for (size_t i = 0; i < A->kw->map->n; i++)
                CHK(ea__jj_map_set(R->pool, ns->map, A->kw->map->keys[i], A->kw->map->key_lens[i], A->kw->map->vals[i]));
        *out = ns;
        return EA_OK;
    }
    case JF_RAISE: {
        jj_buf b;
        ea__jj_buf_init(&b, R->pool);
        if (na > 0 && a[0]->t != JV_UNDEF && a[0]->t != JV_NULL && !ea__jj_to_js_string(&b, a[0])) CHK(ea__jj_buf_add(&b, "?", 1));
        int line, col;
        ea__jj_linecol(R->sm, at->pos, &line, &col);
        return ea_err(EA_ERR_INVALID_ARG, "chat template raised an exception (line %d): %.*s", line,
                      (int)(b.n > 400 ? 400 : b.n), b.s ? b.s : "");
    }
    case JF_RANGE: {
        for (size_t i = 0; i < na; i++)
            if (a[i]->t != JV_INT) return rerr(R, at, "range() arguments must be integers");
        if (na < 1 || na > 3) return rerr(R, at, "range() takes 1 to 3 arguments");
        double start = 0, stop, step = 1;
        if (na == 1) stop = a[0]->num;
        else {
            start = a[0]->num;
            stop = a[1]->num;
            if (na == 3) step = a[2]->num;
        }
        if (step == 0) return rerr(R, at, "range() step must not be zero");
        double cnt = step > 0 ? ceil((stop - start) / step) : ceil((start - stop) / -step);
        if (!(cnt <= JJ_MAX_RANGE)) return rerr(R, at, "range() of more than %d items", JJ_MAX_RANGE);
        if (cnt < 0) cnt = 0;
        jj_val *arr = ea__jj_array(R->pool, JV_ARRAY, NULL, 0);
        CHK(arr);
        size_t n = (size_t)cnt;
        if (n) CHK(arr->items = ea__jj_alloc(R->pool, n * sizeof *arr->items));
        size_t k = 0;
        for (double i = start; k < n && (step > 0 ? i < stop : i > stop); i += step) CHK(arr->items[k++] = ea__jj_num(R->pool, JV_INT, i));
        arr->n_items = k;
        *out = arr;
        return EA_OK;
    }
    case JF_STRFTIME: return rerr(R, at, "unsupported: strftime_now() (the prompt would depend on the clock)");
    case JF_S_UPPER: return ascii_case(R, at, s, 0, out);
    case JF_S_LOWER: return ascii_case(R, at, s, 1, out);
    case JF_S_TITLE: return ascii_case(R, at, s, 2, out);
    case JF_S_CAPITALIZE: return ascii_case(R, at, s, 3, out);
    case JF_S_STRIP:
    case JF_S_LSTRIP:
    case JF_S_RSTRIP: { /* the reference ignores the argument: JS trim/trimStart/trimEnd */
        size_t st, len;
        trim_js(s->s, s->n, f->fn != JF_S_RSTRIP, f->fn != JF_S_LSTRIP, &st, &len);
        CHK(*out = mkstr(R, s->s + st, len));
        return EA_OK;
    }
    case JF_S_STARTSWITH:
    case JF_S_ENDSWITH: {
        bool starts = f->fn == JF_S_STARTSWITH;
        const char *nm = starts ? "startswith" : "endswith";
        if (na == 0) return rerr(R, at, "%s() requires at least one argument", nm);
        const jj_val *p = a[0];
        const jj_val *const *cands = &p;
        size_t nc = 1;
        if (is_arr(p)) {
            cands = (const jj_val *const *)p->items;
            nc = p->n_items;
        } else if (p->t != JV_STR) {
            return rerr(R, at, "%s() argument must be a string or tuple of strings", nm);
        }
        bool r = false;
        for (size_t i = 0; i < nc; i++) {
            const jj_val *c = cands[i];
            if (c->t != JV_STR) return rerr(R, at, "%s() tuple elements must be strings", nm);
            if (c->n <= s->n && memcmp(starts ? s->s : s->s + s->n - c->n, c->s, c->n) == 0) {
                r = true;
                break;
            }
        }
        *out = ea__jj_bool(r);
        return EA_OK;
    }
    case JF_S_SPLIT: return str_split(R, at, s, a, na, out);
    case JF_S_REPLACE: return str_replace(R, at, s, a, na, out);
    case JF_O_GET: {
        if (na == 0 || a[0]->t != JV_STR) return rerr(R, at, "get(): the key must be a string");
        jj_val *v = ea__jj_map_get(s->map, a[0]->s, a[0]->n);
        *out = v ? v : na > 1 ? a[1] : ea__jj_null();
        return EA_OK;
    }
    case JF_O_ITEMS: return items_of(R, s, out);
    case JF_O_KEYS: return keys_or_values(R, s, true, out);
    case JF_O_VALUES: return keys_or_values(R, s, false, out);
    case JF_O_DICTSORT: return rerr(R, at, "unsupported: dictsort");
    }
    return rerr(R, at, "unknown function");
}

/* ---- member access ------------------------------------------------------------------ */

static const struct {
    const char *name;
    jj_func fn;
} k_str_methods[] = {
    {"upper", JF_S_UPPER}, {"lower", JF_S_LOWER}, {"strip", JF_S_STRIP}, {"title", JF_S_TITLE},
    {"capitalize", JF_S_CAPITALIZE}, {"rstrip", JF_S_RSTRIP}, {"lstrip", JF_S_LSTRIP},
    {"startswith", JF_S_STARTSWITH}, {"endswith", JF_S_ENDSWITH}, {"split", JF_S_SPLIT}, {"replace", JF_S_REPLACE},
}, k_obj_methods[] = {
    {"get", JF_O_GET}, {"items", JF_O_ITEMS}, {"keys", JF_O_KEYS}, {"values", JF_O_VALUES}, {"dictsort", JF_O_DICTSORT},
};

static jj_val *builtin_of(rt *R, jj_val *obj, const char *k, size_t n) {
    if (obj->t == JV_STR) {
        if (n == 6 && memcmp(k, "length", 6) == 0) return ea__jj_num(R->pool, JV_INT, (double)ea__jj_utf16_len(obj->s, obj->n));
        for (size_t i = 0; i < sizeof k_str_methods / sizeof k_str_methods[0]; i++)
            if (strlen(k_str_methods[i].name) == n && memcmp(k_str_methods[i].name, k, n) == 0)
                return ea__jj_func(R->pool, k_str_methods[i].fn, obj);
    } else if (is_arr(obj)) {
        if (n == 6 && memcmp(k, "length", 6) == 0) return ea__jj_num(R->pool, JV_INT, (double)obj->n_items);
    } else if (is_objv(obj)) {
        for (size_t i = 0; i < sizeof k_obj_methods / sizeof k_obj_methods[0]; i++)
            if (strlen(k_obj_methods[i].name) == n && memcmp(k_obj_methods[i].name, k, n) == 0)
                return ea__jj_func(R->pool, k_obj_methods[i].fn, obj);
    }
    return ea__jj_undef();
}

static ea_status ev_slice(rt *R, jj_env *env, const jj_node *sl, jj_val *obj, jj_val **out) {
    if (!is_arr(obj) && obj->t != JV_STR) return rerr(R, sl, "slice object must be a list or string, not %s", tname(obj));
    jj_val *p[3];
    const jj_node *pn[3] = {sl->a, sl->b, sl->c};
    for (int i = 0; i < 3; i++) {
        p[i] = ea__jj_undef();
        if (pn[i]) EA_TRY(ev(R, env, pn[i], &p[i]));
        if (p[i]->t != JV_INT && p[i]->t != JV_UNDEF) return rerr(R, sl, "slice indices must be integers or omitted");
    }
    size_t *offs = NULL, len;
    if (obj->t == JV_STR) EA_TRY(code_points(R, obj, &offs, &len));
    else len = obj->n_items;
    double L = (double)len;
    double step = p[2]->t == JV_UNDEF ? 1 : p[2]->num;
    bool has_start = p[0]->t != JV_UNDEF, has_stop = p[1]->t != JV_UNDEF;
    double start = p[0]->num, stop = p[1]->num;
    jj_val **items = NULL;
    size_t n = 0, cap = 0;
    jj_buf b;
    ea__jj_buf_init(&b, R->pool);
    bool nan = isnan(step) || (has_start && isnan(start)) || (has_stop && isnan(stop));
    if (!nan && step != 0) {
        if (step > 0) {
            if (!has_start) start = 0;
            start = start < 0 ? fmax(L + start, 0) : fmin(start, L);
            if (!has_stop) stop = L;
            stop = stop < 0 ? fmax(L + stop, 0) : fmin(stop, L);
            for (double i = start; i < stop; i += step) {
                size_t k = (size_t)i;
                if (obj->t == JV_STR) CHK(ea__jj_buf_add(&b, obj->s + offs[k], offs[k + 1] - offs[k]));
                else EA_TRY(push_item(R, &items, &n, &cap, obj->items[k]));
            }
        } else {
            if (!has_start) start = L - 1;
            start = start < 0 ? fmax(L + start, -1) : fmin(start, L - 1);
            if (!has_stop) stop = -1;
            stop = stop < -1 ? fmax(L + stop, -1) : fmin(stop, L - 1);
            for (double i = start; i > stop; i += step) {
                size_t k = (size_t)i;
                if (obj->t == JV_STR) CHK(ea__jj_buf_add(&b, obj->s + offs[k], offs[k + 1] - offs[k]));
                else EA_TRY(push_item(R, &items, &n, &cap, obj->items[k]));
            }
        }
    }
    if (obj->t == JV_STR) CHK(*out = mkstr(R, b.s ? b.s : "", b.n));
    else CHK(*out = ea__jj_array(R->pool, JV_ARRAY, items, n));
    return EA_OK;
}

static ea_status ev_member(rt *R, jj_env *env, const jj_node *n, jj_val **out) {
    jj_val *obj = NULL, *prop = NULL;
    EA_TRY(ev(R, env, n->a, &obj));
    if (n->flag) {
        if (n->b->kind == JN_SLICE) return ev_slice(R, env, n->b, obj, out);
        EA_TRY(ev(R, env, n->b, &prop));
    } else if (n->b->kind == JN_INT) {
        CHK(prop = ea__jj_num(R->pool, JV_INT, n->b->num));
    } else {
        CHK(prop = ea__jj_str_take(R->pool, n->b->s, n->b->n));
    }
    jj_val *v = NULL;
    if (is_objv(obj) || obj->t == JV_NAMESPACE) {
        if (prop->t != JV_STR) return rerr(R, n, "cannot access a property with a %s key", tname(prop));
        v = ea__jj_map_get(obj->map, prop->s, prop->n);
        if (!v && is_objv(obj)) CHK(v = builtin_of(R, obj, prop->s, prop->n));
    } else if (is_arr(obj) || obj->t == JV_STR) {
        if (prop->t == JV_INT) {
            if (obj->t == JV_STR) {
                EA_TRY(str_at(R, n, obj, prop->num, &v));
            } else {
                double L = (double)obj->n_items, i = isnan(prop->num) ? 0 : trunc(prop->num);
                if (i < 0) i += L;
                v = (i >= 0 && i < L) ? obj->items[(size_t)i] : ea__jj_undef();
            }
        } else if (prop->t == JV_STR) {
            CHK(v = builtin_of(R, obj, prop->s, prop->n));
        } else {
            return rerr(R, n, "cannot index a %s with a %s", tname(obj), tname(prop));
        }
    } else {
        if (prop->t != JV_STR) return rerr(R, n, "cannot index %s with a %s", tname(obj), tname(prop));
        v = ea__jj_undef();
    }
    *out = v ? v : ea__jj_undef();
    return EA_OK;
}

/* ---- tests ----------------------------------------------------------------------------- */

static ea_status ev_test(rt *R, jj_env *env, const jj_node *n, jj_val **out) {
    jj_val *v = NULL;
    EA_TRY(ev(R, env, n->a, &v));
    bool r;
    if (name_is(n, "boolean")) r = v->t == JV_BOOL;
    else if (name_is(n, "callable")) r = v->t == JV_FUNC;
    else if (name_is(n, "odd") || name_is(n, "even")) {
        if (v->t != JV_INT) return rerr(R, n, "cannot test %s for %.*s", tname(v), (int)n->n, n->s);
        double m = fmod(v->num, 2);
        r = name_is(n, "odd") ? m != 0 : m == 0;
    } else if (name_is(n, "false")) r = v->t == JV_BOOL && !v->b;
    else if (name_is(n, "true")) r = v->t == JV_BOOL && v->b;
    else if (name_is(n, "none")) r = v->t == JV_NULL;
    else if (name_is(n, "string")) r = v->t == JV_STR;
    else if (name_is(n, "number")) r = is_num(v);
    else if (name_is(n, "integer")) r = v->t == JV_INT;
    else if (name_is(n, "iterable")) r = v->t == JV_ARRAY || v->t == JV_STR;
    else if (name_is(n, "mapping")) r = is_objv(v);
    else if (name_is(n, "sequence")) r = is_arr(v) || is_objv(v) || v->t == JV_STR;
    else if (name_is(n, "lower") || name_is(n, "upper")) {
        r = v->t == JV_STR; /* the reference answers false for a non-string */
        if (r && has_non_ascii(v->s, v->n)) return rerr(R, n, "unsupported: case test on non-ASCII text");
        bool lower = name_is(n, "lower");
        for (size_t i = 0; r && i < v->n; i++)
            if (lower ? (v->s[i] >= 'A' && v->s[i] <= 'Z') : (v->s[i] >= 'a' && v->s[i] <= 'z')) r = false;
    } else if (name_is(n, "defined")) r = v->t != JV_UNDEF;
    else if (name_is(n, "undefined")) r = v->t == JV_UNDEF;
    else return rerr(R, n, "unknown or unsupported test '%.*s'", (int)n->n, n->s);
    *out = ea__jj_bool(n->flag ? !r : r);
    return EA_OK;
}

/* ---- filters ---------------------------------------------------------------------------- */

static ea_status js_join_elem(rt *R, const jj_node *at, jj_buf *b, const jj_val *x) {
    /* Array#join on the raw JS values: null/undefined print as "" */
    if (x->t == JV_NULL || x->t == JV_UNDEF) return EA_OK;
    if (!ea__jj_to_js_string(b, x)) return rerr(R, at, "cannot join a %s", tname(x));
    return EA_OK;
}

static ea_status to_json_val(rt *R, const jj_node *at, const jj_val *v, const jj_json_opts *o, jj_val **out) {
    jj_buf b;
    ea__jj_buf_init(&b, R->pool);
    if (!ea__jj_to_json(&b, v, o, 0)) {
        if (R->pool->failed) return oom(R);
        return rerr(R, at, "cannot convert %s to JSON (functions, tuples and keyword arguments have none; or nesting deeper than 512)", tname(v));
    }
    CHK(*out = ea__jj_str_take(R->pool, b.s ? b.s : "", b.n));
    if (!b.s) CHK(*out = mkstr(R, "", 0));
    return EA_OK;
}

/* JS parseInt(s, 10) / parseFloat(s). */
static double js_parse_num(const char *s, size_t n, bool integer) {
    size_t st, len;
    trim_js(s, n, true, false, &st, &len);
    char buf[128];
    size_t k = len < sizeof buf - 1 ? len : sizeof buf - 1;
    memcpy(buf, s + st, k);
    buf[k] = 0;
    const char *p = buf;
    int sign = 1;
    if (*p == '+' || *p == '-') {
        if (*p == '-') sign = -1;
        p++;
    }
    if (integer) {
        if (!(*p >= '0' && *p <= '9')) return NAN;
        double v = 0;
        while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
        return sign * v;
    }
    if (!strncmp(p, "Infinity", 8)) return sign * INFINITY;
    /* longest prefix d+(.d*)?(e[+-]?d+)? | .d+(...)? */
    const char *q = p;
    size_t digits = 0;
    while (*q >= '0' && *q <= '9') q++, digits++;
    if (*q == '.') {
        const char *r = q + 1;
        size_t fd = 0;
        while (*r >= '0' && *r <= '9') r++, fd++;
        if (digits || fd) q = r, digits += fd;
    }
    if (!digits) return NAN;
    if (*q == 'e' || *q == 'E') {
        const char *r = q + 1;
        if (*r == '+' || *r == '-') r++;
        if (*r >= '0' && *r <= '9') {
            while (*r >= '0' && *r <= '9') r++;
            q = r;
        }
    }
    char num[128];
    size_t m = (size_t)(q - p);
    memcpy(num, p, m);
    num[m] = 0;
    return sign * strtod(num, NULL);
}

static ea_status indent_str(rt *R, const jj_val *s, double width, bool first, bool blank, jj_val **out) {
    jj_buf b;
    ea__jj_buf_init(&b, R->pool);
    size_t i = 0, line = 0;
    for (;;) {
        const char *nl = memchr(s->s + i, '\n', s->n - i);
        size_t end = nl ? (size_t)(nl - s->s) : s->n;
        bool empty = end == i;
        if (!((!first && line == 0) || (!blank && empty)))
            for (double k = 0; k < width; k++) CHK(ea__jj_buf_addc(&b, ' '));
        CHK(ea__jj_buf_add(&b, s->s + i, end - i));
        if (!nl) break;
        CHK(ea__jj_buf_addc(&b, '\n'));
        i = end + 1;
        line++;
    }
    CHK(*out = mkstr(R, b.s ? b.s : "", b.n));
    return EA_OK;
}

static ea_status filter_ident(rt *R, const jj_node *at, const char *f, jj_val *v, jj_env *env, jj_val **out) {
    (void)env;
    jj_json_opts jo = {0};
#define IS(x) (!strcmp(f, x))
    if (IS("safe")) {
        *out = v;
        return EA_OK;
    }
    if (IS("tojson")) {
        jo.undef_as_null = true;
        return to_json_val(R, at, v, &jo, out);
    }
    if (is_arr(v)) {
        if (IS("list")) *out = v;
        else if (IS("first") || IS("last")) {
            if (!v->n_items) return rerr(R, at, "'%s' of an empty list", f);
            *out = v->items[IS("first") ? 0 : v->n_items - 1];
        } else if (IS("length")) CHK(*out = ea__jj_num(R->pool, JV_INT, (double)v->n_items));
        else if (IS("reverse")) {
            jj_val *r = ea__jj_array(R->pool, JV_ARRAY, v->items, v->n_items);
            CHK(r);
            for (size_t i = 0; i < r->n_items / 2; i++) {
                jj_val *t = r->items[i];
                r->items[i] = r->items[r->n_items - 1 - i];
                r->items[r->n_items - 1 - i] = t;
            }
            *out = r;
        } else if (IS("join")) {
            jj_buf b;
            ea__jj_buf_init(&b, R->pool);
            for (size_t i = 0; i < v->n_items; i++) EA_TRY(js_join_elem(R, at, &b, v->items[i]));
            CHK(*out = mkstr(R, b.s ? b.s : "", b.n));
        } else if (IS("string")) {
            return to_json_val(R, at, v, &jo, out);
        } else if (IS("unique")) {
            jj_val **u = NULL;
            size_t n = 0, cap = 0;
            for (size_t i = 0; i < v->n_items; i++) {
                bool seen = false;
                for (size_t k = 0; k < n && !seen; k++) {
                    const jj_val *a = u[k], *b = v->items[i];
                    seen = ea__jj_strict_eq(a, b) || (is_num(a) && is_num(b) && isnan(a->num) && isnan(b->num));
                }
                if (!seen) EA_TRY(push_item(R, &u, &n, &cap, v->items[i]));
            }
            CHK(*out = ea__jj_array(R->pool, JV_ARRAY, u, n));
        } else return rerr(R, at, "unknown or unsupported filter '%s' for a list", f);
        return EA_OK;
    }
    if (v->t == JV_STR) {
        if (IS("length")) CHK(*out = ea__jj_num(R->pool, JV_INT, (double)ea__jj_utf16_len(v->s, v->n)));
        else if (IS("upper")) return ascii_case(R, at, v, 0, out);
        else if (IS("lower")) return ascii_case(R, at, v, 1, out);
        else if (IS("title")) return ascii_case(R, at, v, 2, out);
        else if (IS("capitalize")) return ascii_case(R, at, v, 3, out);
        else if (IS("trim")) {
            size_t st, len;
            trim_js(v->s, v->n, true, true, &st, &len);
            CHK(*out = mkstr(R, v->s + st, len));
        } else if (IS("indent")) return indent_str(R, v, 4, false, false, out);
        else if (IS("join") || IS("string")) *out = v;
        else if (IS("int")) {
            double d = js_parse_num(v->s, v->n, true);
            CHK(*out = ea__jj_num(R->pool, JV_INT, isnan(d) ? 0 : d));
        } else if (IS("float")) {
            double d = js_parse_num(v->s, v->n, false);
            CHK(*out = ea__jj_num(R->pool, JV_FLOAT, isnan(d) ? 0 : d));
        } else return rerr(R, at, "unknown or unsupported filter '%s' for a string", f);
        return EA_OK;
    }
    if (is_num(v)) {
        if (IS("abs")) CHK(*out = ea__jj_num(R->pool, v->t, fabs(v->num)));
        else if (IS("int")) CHK(*out = ea__jj_num(R->pool, JV_INT, floor(v->num)));
        else if (IS("float")) CHK(*out = ea__jj_num(R->pool, JV_FLOAT, v->num));
        else if (IS("string")) {
            jj_buf b;
            ea__jj_buf_init(&b, R->pool);
            CHK(ea__jj_to_output(&b, v));
            CHK(*out = mkstr(R, b.s, b.n));
        } else return rerr(R, at, "unknown or unsupported filter '%s' for a number", f);
        return EA_OK;
    }
    if (is_objv(v)) {
        if (IS("items")) return items_of(R, v, out);
        if (IS("length")) {
            CHK(*out = ea__jj_num(R->pool, JV_INT, (double)v->map->n));
            return EA_OK;
        }
        jj_val *b = builtin_of(R, v, f, strlen(f));
        CHK(b);
        if (b->t == JV_FUNC) {
            args_t none = {0};
            return call_func(R, at, b, &none, out);
        }
        return rerr(R, at, "unknown or unsupported filter '%s' for a dict", f);
    }
    if (v->t == JV_BOOL) {
        if (IS("bool")) *out = v;
        else if (IS("int")) CHK(*out = ea__jj_num(R->pool, JV_INT, v->b ? 1 : 0));
        else if (IS("float")) CHK(*out = ea__jj_num(R->pool, JV_FLOAT, v->b ? 1 : 0));
        else if (IS("string")) CHK(*out = mkstr(R, v->b ? "true" : "false", v->b ? 4 : 5));
        else return rerr(R, at, "unknown or unsupported filter '%s' for a boolean", f);
        return EA_OK;
    }
    return rerr(R, at, "cannot apply filter '%s' to %s", f, tname(v));
#undef IS
}

static ea_status filter_call(rt *R, jj_env *env, const jj_node *at, const jj_node *call, jj_val *v, jj_val **out) {
    char f[64];
    snprintf(f, sizeof f, "%.*s", (int)(call->a->n < 63 ? call->a->n : 63), call->a->s);
#define IS(x) (!strcmp(f, x))
    args_t A;
    if (IS("selectattr") || IS("rejectattr")) {
        if (!is_arr(v)) return rerr(R, at, "'%s' needs a list, not %s", f, tname(v));
        for (size_t i = 0; i < v->n_items; i++)
            if (!is_objv(v->items[i]) && v->items[i]->t != JV_NAMESPACE)
                return rerr(R, at, "'%s' can only be applied to a list of dicts", f);
        for (size_t i = 0; i < call->n_list; i++)
            if (call->list[i]->kind != JN_STR) return rerr(R, at, "arguments of '%s' must be string literals", f);
        if (call->n_list == 0) return rerr(R, at, "'%s' needs an attribute name", f);
        const jj_node *attr = call->list[0];
        const jj_node *test = call->n_list > 1 ? call->list[1] : NULL;
        if (test && !(test->n == 7 && !memcmp(test->s, "equalto", 7)) && !(test->n == 2 && !memcmp(test->s, "eq", 2)) &&
            !(test->n == 7 && !memcmp(test->s, "defined", 7)) && !(test->n == 4 && !memcmp(test->s, "none", 4)) &&
            !(test->n == 6 && !memcmp(test->s, "string", 6)))
            return rerr(R, at, "unsupported test '%.*s' in %s", (int)test->n, test->s, f);
        if (test && (test->s[0] == 'e') && call->n_list < 3) return rerr(R, at, "'%s' with equalto needs a value", f);
        jj_val *cmp = NULL;
        if (call->n_list > 2) CHK(cmp = mkstr(R, call->list[2]->s, call->list[2]->n));
        bool select = IS("selectattr");
        jj_val **r = NULL;
        size_t n = 0, cap = 0;
        for (size_t i = 0; i < v->n_items; i++) {
            jj_val *a = ea__jj_map_get(v->items[i]->map, attr->s, attr->n);
            bool res = false;
            if (a) {
                if (!test) res = ea__jj_truthy(a);
                else if (test->s[0] == 'e') res = ea__jj_strict_eq(a, cmp);
                else if (test->s[0] == 'd') res = a->t != JV_UNDEF;
                else if (test->s[0] == 'n') res = a->t == JV_NULL;
                else res = a->t == JV_STR;
            }
            if (res == select) EA_TRY(push_item(R, &r, &n, &cap, v->items[i]));
        }
        CHK(*out = ea__jj_array(R->pool, JV_ARRAY, r, n));
        return EA_OK;
    }
    EA_TRY(ev_args(R, env, call, &A));
    if (IS("tojson")) {
        jj_json_opts o = {.undef_as_null = true};
        jj_val *x = NULL;
        if ((x = kwarg(&A, "indent"))) {
            if (x->t != JV_INT && x->t != JV_NULL) return rerr(R, at, "tojson: indent must be a number");
            if (x->t == JV_INT) {
                if (x->num < 0 || x->num > 64) return rerr(R, at, "tojson: indent %g is out of range", x->num);
                o.indent = (int)x->num;
            }
        }
        if ((x = kwarg(&A, "ensure_ascii"))) {
            if (x->t != JV_BOOL) return rerr(R, at, "tojson: ensure_ascii must be a boolean");
            o.ensure_ascii = x->b;
        }
        if ((x = kwarg(&A, "sort_keys"))) {
            if (x->t != JV_BOOL) return rerr(R, at, "tojson: sort_keys must be a boolean");
            if (x->b) return rerr(R, at, "unsupported: tojson(sort_keys=true) (locale-dependent order)");
        }
        if ((x = kwarg(&A, "separators")) && x->t != JV_NULL) {
            if (!is_arr(x) || x->n_items != 2 || x->items[0]->t != JV_STR || x->items[1]->t != JV_STR)
                return rerr(R, at, "tojson: separators must be a tuple of two strings");
            o.item_sep = x->items[0]->s;
            o.item_sep_n = x->items[0]->n;
            o.key_sep = x->items[1]->s;
            o.key_sep_n = x->items[1]->n;
        }
        return to_json_val(R, at, v, &o, out);
    }
    if (IS("join")) {
        const jj_val *sep = A.n_pos ? A.pos[0] : kwarg(&A, "separator");
        jj_buf b;
        ea__jj_buf_init(&b, R->pool);
        if (v->t != JV_STR && !is_arr(v)) return rerr(R, at, "cannot apply filter 'join' to %s", tname(v));
        if (sep && sep->t != JV_STR) return rerr(R, at, "join: separator must be a string");
        if (v->t == JV_STR) {
            size_t *offs, n;
            EA_TRY(code_points(R, v, &offs, &n));
            for (size_t i = 0; i < n; i++) {
                if (i && sep) CHK(ea__jj_buf_add(&b, sep->s, sep->n));
                CHK(ea__jj_buf_add(&b, v->s + offs[i], offs[i + 1] - offs[i]));
            }
        } else {
            for (size_t i = 0; i < v->n_items; i++) {
                if (i && sep) CHK(ea__jj_buf_add(&b, sep->s, sep->n));
                EA_TRY(js_join_elem(R, at, &b, v->items[i]));
            }
        }
        CHK(*out = mkstr(R, b.s ? b.s : "", b.n));
        return EA_OK;
    }
    if (IS("int") || IS("float")) {
        bool isint = IS("int");
        jj_val *def = A.n_pos ? A.pos[0] : kwarg(&A, "default");
        if (!def) CHK(def = ea__jj_num(R->pool, isint ? JV_INT : JV_FLOAT, 0));
        if (v->t == JV_STR) {
            double d = js_parse_num(v->s, v->n, isint);
            if (isnan(d)) *out = def;
            else CHK(*out = ea__jj_num(R->pool, isint ? JV_INT : JV_FLOAT, d));
        } else if (is_num(v)) {
            *out = v;
        } else if (v->t == JV_BOOL) {
            CHK(*out = ea__jj_num(R->pool, isint ? JV_INT : JV_FLOAT, v->b ? 1 : 0));
        } else {
            return rerr(R, at, "cannot apply filter '%s' to %s", f, tname(v));
        }
        return EA_OK;
    }
    if (IS("default") || IS("d")) {
        if (IS("d")) return rerr(R, at, "unknown filter 'd'");
        jj_val *def = A.n_pos ? A.pos[0] : NULL;
        if (!def) CHK(def = mkstr(R, "", 0));
        jj_val *bo = A.n_pos > 1 ? A.pos[1] : kwarg(&A, "boolean");
        if (bo && bo->t != JV_BOOL) return rerr(R, at, "default: the boolean flag must be a boolean");
        bool boolean = bo && bo->b;
        *out = (v->t == JV_UNDEF || (boolean && !ea__jj_truthy(v))) ? def : v;
        return EA_OK;
    }
    if (is_arr(v)) {
        if (IS("map")) {
            jj_val *attr = kwarg(&A, "attribute");
            if (!attr) return rerr(R, at, "unsupported: map without attribute=");
            if (attr->t != JV_STR) return rerr(R, at, "map: attribute must be a string");
            jj_val *def = kwarg(&A, "default");
            jj_val **r = NULL;
            size_t n = 0, cap = 0;
            for (size_t i = 0; i < v->n_items; i++) {
                jj_val *x = v->items[i];
                if (!is_objv(x) && x->t != JV_NAMESPACE) return rerr(R, at, "map: items must be dicts");
                /* dotted path through dicts and list indices */
                const char *p = attr->s, *end = attr->s + attr->n;
                for (;;) {
                    const char *dot = memchr(p, '.', (size_t)(end - p));
                    size_t pl = dot ? (size_t)(dot - p) : (size_t)(end - p);
                    if (is_objv(x) || x->t == JV_NAMESPACE) {
                        jj_val *y = ea__jj_map_get(x->map, p, pl);
                        x = y ? y : ea__jj_undef();
                    } else if (is_arr(x)) {
                        char nb[24];
                        snprintf(nb, sizeof nb, "%.*s", (int)(pl < 20 ? pl : 20), p);
                        char *e;
                        long idx = strtol(nb, &e, 10);
                        x = (e != nb && idx >= 0 && (size_t)idx < x->n_items) ? x->items[idx] : ea__jj_undef();
                    } else {
                        x = ea__jj_undef();
                    }
                    if (!dot || x->t == JV_UNDEF) break;
                    p = dot + 1;
                }
                if (x->t == JV_UNDEF && def) x = def;
                EA_TRY(push_item(R, &r, &n, &cap, x));
            }
            CHK(*out = ea__jj_array(R->pool, JV_ARRAY, r, n));
            return EA_OK;
        }
        return rerr(R, at, "unknown or unsupported filter '%s(...)' for a list", f);
    }
    if (v->t == JV_STR) {
        if (IS("indent")) {
            jj_val *w = A.n_pos > 0 ? A.pos[0] : kwarg(&A, "width");
            if (w && w->t != JV_INT) return rerr(R, at, "indent: width must be a number");
            if (w && (w->num < 0 || w->num > 1024)) return rerr(R, at, "indent: width out of range");
            jj_val *fi = A.n_pos > 1 ? A.pos[1] : kwarg(&A, "first");
            jj_val *bl = A.n_pos > 2 ? A.pos[2] : kwarg(&A, "blank");
            return indent_str(R, v, w ? w->num : 4, fi && ea__jj_truthy(fi), bl && ea__jj_truthy(bl), out);
        }
        if (IS("replace")) {
            jj_val **a;
            size_t na;
            args_t B = A;
            if (!B.kw) CHK(B.kw = ea__jj_mapval(R->pool, JV_KWARGS));
            flat_args(&B, &a, &na, R);
            return str_replace(R, at, v, a, na, out);
        }
        return rerr(R, at, "unknown or unsupported filter '%s(...)' for a string", f);
    }
    if (is_objv(v)) {
        jj_val *b = builtin_of(R, v, f, strlen(f));
        CHK(b);
        if (b->t == JV_FUNC) return call_func(R, at, b, &A, out);
        return rerr(R, at, "unknown or unsupported filter '%s(...)' for a dict", f);
    }
    return rerr(R, at, "cannot apply filter '%s' to %s", f, tname(v));
#undef IS
}

static ea_status ev_filter(rt *R, jj_env *env, const jj_node *n, jj_val **out) {
    jj_val *v = NULL;
    EA_TRY(ev(R, env, n->a, &v));
    if (n->b->kind == JN_IDENT) {
        char f[64];
        if (n->b->n >= sizeof f) return rerr(R, n, "unknown filter");
        memcpy(f, n->b->s, n->b->n);
        f[n->b->n] = 0;
        return filter_ident(R, n, f, v, env, out);
    }
    if (n->b->kind == JN_CALL && n->b->a->kind == JN_IDENT) return filter_call(R, env, n, n->b, v, out);
    return rerr(R, n, "unsupported filter expression");
}

/* ---- operators ----------------------------------------------------------------------------- */

static ea_status concat_js(rt *R, const jj_node *n, const jj_val *l, const jj_val *r, jj_val **out) {
    jj_buf b;
    ea__jj_buf_init(&b, R->pool);
    if (!ea__jj_to_js_string(&b, l) || !ea__jj_to_js_string(&b, r)) {
        if (R->pool->failed) return oom(R);
        return rerr(R, n, "cannot concatenate a function");
    }
    CHK(*out = ea__jj_str_take(R->pool, b.s ? b.s : "", b.n));
    if (!b.s) CHK(*out = mkstr(R, "", 0));
    return EA_OK;
}

static const char *opname(jj_op op) {
    switch (op) {
    case JOP_IN: return "in";
    case JOP_NOT_IN: return "not in";
    case JOP_ADD: return "+";
    case JOP_SUB: return "-";
    case JOP_CONCAT: return "~";
    case JOP_MUL: return "*";
    case JOP_DIV: return "/";
    case JOP_FLOORDIV: return "//";
    case JOP_MOD: return "%";
    case JOP_POW: return "**";
    case JOP_LT: return "<";
    case JOP_GT: return ">";
    case JOP_LE: return "<=";
    case JOP_GE: return ">=";
    default: return "?";
    }
}

static ea_status ev_binary(rt *R, jj_env *env, const jj_node *n, jj_val **out) {
    jj_val *l = NULL, *r = NULL;
    EA_TRY(ev(R, env, n->a, &l));
    if (n->op == JOP_AND) return ea__jj_truthy(l) ? ev(R, env, n->b, out) : (*out = l, EA_OK);
    if (n->op == JOP_OR) return ea__jj_truthy(l) ? (*out = l, EA_OK) : ev(R, env, n->b, out);
    EA_TRY(ev(R, env, n->b, &r));
    if (n->op == JOP_EQ || n->op == JOP_NE) {
        int e = ea__jj_loose_eq(l, r);
        if (e < 0 && l->t != JV_FUNC && r->t != JV_FUNC) {
            /* object == primitive: JS compares the object's toString() form */
            jj_val *obj = (l->t == JV_NULL || l->t == JV_UNDEF || l->t == JV_BOOL || l->t == JV_INT || l->t == JV_FLOAT ||
                           l->t == JV_STR) ? r : l;
            jj_buf b;
            ea__jj_buf_init(&b, R->pool);
            if (ea__jj_to_js_string(&b, obj)) {
                jj_val *sv = ea__jj_str_take(R->pool, b.s ? b.s : "", b.n);
                CHK(sv);
                if (!b.s) CHK(sv = mkstr(R, "", 0));
                e = obj == l ? ea__jj_loose_eq(sv, r) : ea__jj_loose_eq(l, sv);
            } else if (R->pool->failed) {
                return oom(R);
            } else {
                return rerr(R, n, "unsupported: comparing a %s with a %s", tname(l), tname(r));
            }
        }
        if (e < 0) return rerr(R, n, "unsupported: comparing a %s with a %s", tname(l), tname(r));
        *out = ea__jj_bool(n->op == JOP_EQ ? e : !e);
        return EA_OK;
    }
    jj_op op = n->op;
    if (l->t == JV_UNDEF || r->t == JV_UNDEF) {
        if (r->t == JV_UNDEF && (op == JOP_IN || op == JOP_NOT_IN)) {
            *out = ea__jj_bool(op == JOP_NOT_IN);
            return EA_OK;
        }
        return rerr(R, n, "cannot apply '%s' to an undefined value", opname(op));
    }
    if (l->t == JV_NULL || r->t == JV_NULL) return rerr(R, n, "cannot apply '%s' to none", opname(op));
    if (op == JOP_CONCAT) return concat_js(R, n, l, r, out);
    bool lnum = is_num(l) || l->t == JV_BOOL, rnum = is_num(r) || r->t == JV_BOOL;
    if (op == JOP_POW && lnum && rnum) {
        double a = l->t == JV_BOOL ? l->b : l->num, b = r->t == JV_BOOL ? r->b : r->num;
        if (a == 0 && b < 0) return rerr(R, n, "0.0 cannot be raised to a negative power");
        double res = pow(a, b);
        if (!isfinite(res)) return rerr(R, n, "exponentiation result is not a finite real number");
        CHK(*out = ea__jj_num(R->pool, (l->t == JV_FLOAT || r->t == JV_FLOAT || b < 0) ? JV_FLOAT : JV_INT, res));
        return EA_OK;
    }
    if (is_num(l) && is_num(r)) {
        double a = l->num, b = r->num;
        jj_vtype ft = (l->t == JV_FLOAT || r->t == JV_FLOAT) ? JV_FLOAT : JV_INT;
        switch (op) {
        case JOP_ADD: CHK(*out = ea__jj_num(R->pool, ft, a + b)); return EA_OK;
        case JOP_SUB: CHK(*out = ea__jj_num(R->pool, ft, a - b)); return EA_OK;
        case JOP_MUL: CHK(*out = ea__jj_num(R->pool, ft, a * b)); return EA_OK;
        case JOP_DIV: CHK(*out = ea__jj_num(R->pool, JV_FLOAT, a / b)); return EA_OK;
        case JOP_FLOORDIV: CHK(*out = ea__jj_num(R->pool, ft, floor(a / b))); return EA_OK;
        case JOP_MOD: CHK(*out = ea__jj_num(R->pool, ft, fmod(a, b))); return EA_OK;
        case JOP_LT: *out = ea__jj_bool(a < b); return EA_OK;
        case JOP_GT: *out = ea__jj_bool(a > b); return EA_OK;
        case JOP_GE: *out = ea__jj_bool(a >= b); return EA_OK;
        case JOP_LE: *out = ea__jj_bool(a <= b); return EA_OK;
        default: break;
        }
    } else if (is_arr(l) && is_arr(r)) {
        if (op == JOP_ADD) {
            jj_val *c = ea__jj_array(R->pool, JV_ARRAY, NULL, 0);
            CHK(c);
            size_t tot = l->n_items + r->n_items;
            if (tot) CHK(c->items = ea__jj_alloc(R->pool, tot * sizeof *c->items));
            if (l->n_items) memcpy(c->items, l->items, l->n_items * sizeof *c->items);
            if (r->n_items) memcpy(c->items + l->n_items, r->items, r->n_items * sizeof *c->items);
            c->n_items = tot;
            *out = c;
            return EA_OK;
        }
    } else if (is_arr(r)) {
        if (op == JOP_IN || op == JOP_NOT_IN) {
            bool m = false;
            for (size_t i = 0; i < r->n_items && !m; i++) m = ea__jj_strict_eq(r->items[i], l);
            *out = ea__jj_bool(op == JOP_IN ? m : !m);
            return EA_OK;
        }
    }
    if ((l->t == JV_STR || r->t == JV_STR) && op == JOP_ADD) return concat_js(R, n, l, r, out);
    if (l->t == JV_STR && r->t == JV_STR && (op == JOP_IN || op == JOP_NOT_IN)) {
        bool m = memfind(r->s, r->n, l->s, l->n) != NULL;
        *out = ea__jj_bool(op == JOP_IN ? m : !m);
        return EA_OK;
    }
    if (l->t == JV_STR && is_objv(r) && (op == JOP_IN || op == JOP_NOT_IN)) {
        bool m = ea__jj_map_get(r->map, l->s, l->n) != NULL;
        *out = ea__jj_bool(op == JOP_IN ? m : !m);
        return EA_OK;
    }
    return rerr(R, n, "unsupported operator '%s' between %s and %s", opname(op), tname(l), tname(r));
}

/* ---- statements ------------------------------------------------------------------------------- */

static ea_status assign_target(rt *R, jj_env *env, const jj_node *target, jj_val *v, bool in_for) {
    if (target->kind == JN_IDENT) {
        CHK(ea__jj_map_set(R->pool, &env->vars, target->s, target->n, v));
        return EA_OK;
    }
    if (target->kind == JN_TUPLE) {
        if (in_for ? v->t != JV_ARRAY : !is_arr(v)) return rerr(R, target, "cannot unpack a %s", tname(v));
        if (v->n_items != target->n_list)
            return rerr(R, target, "too %s items to unpack", target->n_list > v->n_items ? "few" : "many");
        for (size_t i = 0; i < target->n_list; i++) {
            const jj_node *t = target->list[i];
            if (t->kind != JN_IDENT) return rerr(R, t, "cannot unpack into a non-name");
            CHK(ea__jj_map_set(R->pool, &env->vars, t->s, t->n, v->items[i]));
        }
        return EA_OK;
    }
    return rerr(R, target, "invalid assignment target");
}

static ea_status ev_set(rt *R, jj_env *env, const jj_node *n) {
    jj_val *v = NULL;
    if (n->b) {
        EA_TRY(ev(R, env, n->b, &v));
    } else {
        jj_buf b;
        ea__jj_buf_init(&b, R->pool);
        EA_TRY(ev_block(R, env, n->list, n->n_list, &b));
        CHK(v = mkstr(R, b.s ? b.s : "", b.n));
    }
    const jj_node *t = n->a;
    if (t->kind == JN_MEMBER) {
        jj_val *obj = NULL;
        EA_TRY(ev(R, env, t->a, &obj));
        if (obj->t != JV_NAMESPACE) return rerr(R, t, "cannot assign an attribute of a %s (only of a namespace)", tname(obj));
        if (t->b->kind != JN_IDENT) return rerr(R, t, "cannot assign to a member with a non-name property");
        CHK(ea__jj_map_set(R->pool, obj->map, t->b->s, t->b->n, v));
        return EA_OK;
    }
    if (t->kind == JN_TUPLE) {
        if (!is_arr(v)) return rerr(R, t, "cannot unpack a %s in set", tname(v));
        return assign_target(R, env, t, v, false);
    }
    if (t->kind != JN_IDENT) return rerr(R, t, "invalid left-hand side in set");
    return assign_target(R, env, t, v, false);
}

static ea_status ev_for(rt *R, jj_env *env, const jj_node *n, jj_buf *out) {
    jj_env *scope = env_new(R, env);
    CHK(scope);
    const jj_node *test = NULL;
    jj_val *it = NULL;
    if (n->b->kind == JN_SELECT) {
        EA_TRY(ev(R, scope, n->b->a, &it));
        test = n->b->b;
    } else {
        EA_TRY(ev(R, scope, n->b, &it));
    }
    if (!is_arr(it) && !is_objv(it)) return rerr(R, n, "cannot loop over a %s", tname(it));
    if (is_objv(it)) EA_TRY(keys_or_values(R, it, true, &it));
    jj_val **items = NULL;
    size_t n_items = 0, cap = 0;
    for (size_t i = 0; i < it->n_items; i++) {
        if (++R->steps > R->max_steps) return rerr(R, n, "template evaluation exceeded %llu steps", (unsigned long long)R->max_steps);
        jj_val *cur = it->items[i];
        if (n->a->kind == JN_TUPLE) {
            if (cur->t != JV_ARRAY) return rerr(R, n->a, "cannot unpack a %s", tname(cur));
            if (cur->n_items != n->a->n_list)
                return rerr(R, n->a, "too %s items to unpack", n->a->n_list > cur->n_items ? "few" : "many");
        }
        if (test) {
            jj_env *ls = env_new(R, scope);
            CHK(ls);
            EA_TRY(assign_target(R, ls, n->a, cur, true));
            jj_val *tv = NULL;
            EA_TRY(ev(R, ls, test, &tv));
            if (!ea__jj_truthy(tv)) continue;
        }
        EA_TRY(push_item(R, &items, &n_items, &cap, cur));
    }
    static const char *const k_loop[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem", "nextitem"};
    bool none = true;
    for (size_t i = 0; i < n_items; i++) {
        if (++R->steps > R->max_steps) return rerr(R, n, "template evaluation exceeded %llu steps", (unsigned long long)R->max_steps);
        jj_val *loop = ea__jj_mapval(R->pool, JV_OBJECT);
        CHK(loop);
        jj_val *lv[9];
        double L = (double)n_items, I = (double)i;
        CHK(lv[0] = ea__jj_num(R->pool, JV_INT, I + 1));
        CHK(lv[1] = ea__jj_num(R->pool, JV_INT, I));
        CHK(lv[2] = ea__jj_num(R->pool, JV_INT, L - I));
        CHK(lv[3] = ea__jj_num(R->pool, JV_INT, L - I - 1));
        lv[4] = ea__jj_bool(i == 0);
        lv[5] = ea__jj_bool(i + 1 == n_items);
        CHK(lv[6] = ea__jj_num(R->pool, JV_INT, L));
        lv[7] = i > 0 ? items[i - 1] : ea__jj_undef();
        lv[8] = i + 1 < n_items ? items[i + 1] : ea__jj_undef();
        for (int k = 0; k < 9; k++) CHK(ea__jj_map_set(R->pool, loop->map, k_loop[k], strlen(k_loop[k]), lv[k]));
        CHK(ea__jj_map_set(R->pool, &scope->vars, "loop", 4, loop));
        EA_TRY(assign_target(R, scope, n->a, items[i], true));
        size_t mark = out->n;
        ea_status s = ev_block(R, scope, n->list, n->n_list, out);
        if (s == JJ_CONTROL) {
            out->n = mark; /* the interrupted iteration's output is discarded */
            if (out->s) out->s[mark] = 0;
            jj_ctl c = R->ctl;
            R->ctl = CTL_NONE;
            if (c == CTL_BREAK) break;
            continue;
        }
        if (s != EA_OK) return s;
        none = false;
    }
    if (none) EA_TRY(ev_block(R, scope, n->list2, n->n_list2, out));
    return EA_OK;
}

static ea_status ev_block(rt *R, jj_env *env, jj_node *const *list, size_t n, jj_buf *out) {
    for (size_t i = 0; i < n; i++) {
        const jj_node *s = list[i];
        if (++R->steps > R->max_steps) return rerr(R, s, "template evaluation exceeded %llu steps", (unsigned long long)R->max_steps);
        switch (s->kind) {
        case JN_TEXT: CHK(ea__jj_buf_add(out, s->s, s->n)); break;
        case JN_COMMENT: break;
        case JN_SET: EA_TRY(ev_set(R, env, s)); break;
        case JN_IF: {
            jj_val *t = NULL;
            EA_TRY(ev(R, env, s->a, &t));
            if (ea__jj_truthy(t)) EA_TRY(ev_block(R, env, s->list, s->n_list, out));
            else EA_TRY(ev_block(R, env, s->list2, s->n_list2, out));
            break;
        }
        case JN_FOR: EA_TRY(ev_for(R, env, s, out)); break;
        case JN_BREAK:
        case JN_CONTINUE:
            R->ctl = s->kind == JN_BREAK ? CTL_BREAK : CTL_CONTINUE;
            return JJ_CONTROL;
        default: {
            jj_val *v = NULL;
            EA_TRY(ev(R, env, s, &v));
            if (!ea__jj_to_output(out, v)) {
                if (R->pool->failed) return oom(R);
                return rerr(R, s, "cannot print a %s", tname(v));
            }
            if (R->pool->failed) return oom(R);
        }
        }
    }
    return EA_OK;
}

/* ---- expressions ------------------------------------------------------------------------------ */

static ea_status ev(rt *R, jj_env *env, const jj_node *n, jj_val **out) {
    if (++R->steps > R->max_steps) return rerr(R, n, "template evaluation exceeded %llu steps", (unsigned long long)R->max_steps);
    switch (n->kind) {
    case JN_INT: CHK(*out = ea__jj_num(R->pool, JV_INT, n->num)); return EA_OK;
    case JN_FLOAT: CHK(*out = ea__jj_num(R->pool, JV_FLOAT, n->num)); return EA_OK;
    case JN_STR:
    case JN_TEXT: CHK(*out = ea__jj_str_take(R->pool, n->s, n->n)); return EA_OK;
    case JN_IDENT: *out = env_lookup(env, n->s, n->n); return EA_OK;
    case JN_ARRAY:
    case JN_TUPLE: {
        jj_val *a = ea__jj_array(R->pool, n->kind == JN_ARRAY ? JV_ARRAY : JV_TUPLE, NULL, 0);
        CHK(a);
        if (n->n_list) CHK(a->items = ea__jj_alloc(R->pool, n->n_list * sizeof *a->items));
        for (size_t i = 0; i < n->n_list; i++) EA_TRY(ev(R, env, n->list[i], &a->items[i]));
        a->n_items = n->n_list;
        *out = a;
        return EA_OK;
    }
    case JN_OBJECT: {
        jj_val *o = ea__jj_mapval(R->pool, JV_OBJECT);
        CHK(o);
        for (size_t i = 0; i < n->n_list; i++) {
            jj_val *k = NULL, *v = NULL;
            EA_TRY(ev(R, env, n->list[i], &k));
            if (k->t != JV_STR) return rerr(R, n->list[i], "dict keys must be strings, not %s", tname(k));
            EA_TRY(ev(R, env, n->list2[i], &v));
            CHK(ea__jj_map_set(R->pool, o->map, k->s, k->n, v));
        }
        *out = o;
        return EA_OK;
    }
    case JN_MEMBER: return ev_member(R, env, n, out);
    case JN_CALL: {
        args_t A;
        EA_TRY(ev_args(R, env, n, &A));
        jj_val *f = NULL;
        EA_TRY(ev(R, env, n->a, &f));
        if (f->t != JV_FUNC) return rerr(R, n, "cannot call a %s", tname(f));
        return call_func(R, n, f, &A, out);
    }
    case JN_UNARY: {
        jj_val *v = NULL;
        EA_TRY(ev(R, env, n->a, &v));
        if (n->op == JOP_NOT) {
            *out = ea__jj_bool(!ea__jj_truthy(v));
            return EA_OK;
        }
        if (!is_num(v) && v->t != JV_BOOL) return rerr(R, n, "unary %c of a %s", n->op == JOP_NEG ? '-' : '+', tname(v));
        double x = v->t == JV_BOOL ? v->b : v->num;
        CHK(*out = ea__jj_num(R->pool, v->t == JV_FLOAT ? JV_FLOAT : JV_INT, n->op == JOP_NEG ? -x : x));
        return EA_OK;
    }
    case JN_BINARY: return ev_binary(R, env, n, out);
    case JN_FILTER: return ev_filter(R, env, n, out);
    case JN_TEST: return ev_test(R, env, n, out);
    case JN_SELECT: {
        jj_val *t = NULL;
        EA_TRY(ev(R, env, n->b, &t));
        if (!ea__jj_truthy(t)) {
            *out = ea__jj_undef();
            return EA_OK;
        }
        return ev(R, env, n->a, out);
    }
    case JN_TERNARY: {
        jj_val *t = NULL;
        EA_TRY(ev(R, env, n->a, &t));
        return ev(R, env, ea__jj_truthy(t) ? n->b : n->c, out);
    }
    case JN_SLICE: return rerr(R, n, "a slice outside [ ]");
    case JN_KWARG: return rerr(R, n, "a keyword argument outside a call");
    default: {
        /* statements used as values: render them to a string */
        jj_buf b;
        ea__jj_buf_init(&b, R->pool);
        jj_node *one = (jj_node *)n;
        EA_TRY(ev_block(R, env, &one, 1, &b));
        CHK(*out = mkstr(R, b.s ? b.s : "", b.n));
        return EA_OK;
    }
    }
}

/* ---- entry ----------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int kind; /* 0 func, 1 true, 2 false, 3 none */
    jj_func fn;
} k_globals[] = {
    {"namespace", 0, JF_NAMESPACE}, {"false", 2, 0}, {"true", 1, 0}, {"none", 3, 0},
    {"raise_exception", 0, JF_RAISE}, {"range", 0, JF_RANGE}, {"strftime_now", 0, JF_STRFTIME},
    {"True", 1, 0}, {"False", 2, 0}, {"None", 3, 0},
};

ea_status ea__jj_render(jj_node **body, size_t n_body, const jj_srcmap *sm, const jj_limits *lim, const json_t *ctx,
                        char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (ctx && !json_is_object(ctx)) return ea_err(EA_ERR_INVALID_ARG, "chat template: the context must be a JSON object");
    jj_pool pool;
    ea__jj_pool_init(&pool, lim && lim->max_bytes ? lim->max_bytes : JJ_POOL_LIMIT);
    rt R = {.pool = &pool, .sm = sm, .max_steps = lim && lim->max_steps ? lim->max_steps : JJ_MAX_STEPS};
    ea_status st = EA_OK;
    jj_env *g = env_new(&R, NULL);
    if (!g) {
        st = oom(&R);
        goto done;
    }
    for (size_t i = 0; i < sizeof k_globals / sizeof k_globals[0]; i++) {
        jj_val *v = k_globals[i].kind == 0   ? ea__jj_func(&pool, k_globals[i].fn, NULL)
                    : k_globals[i].kind == 3 ? ea__jj_null()
                                             : ea__jj_bool(k_globals[i].kind == 1);
        if (!v || !ea__jj_map_set(&pool, &g->vars, k_globals[i].name, strlen(k_globals[i].name), v)) {
            st = oom(&R);
            goto done;
        }
    }
    if (ctx) {
        const char *k;
        json_t *jv;
        json_object_foreach((json_t *)ctx, k, jv) {
            if (ea__jj_map_get(&g->vars, k, strlen(k))) {
                st = ea_err(EA_ERR_INVALID_ARG, "chat template: context variable '%s' is already declared (a builtin)", k);
                goto done;
            }
            jj_val *v = ea__jj_from_json(&pool, jv, 0);
            if (!v || !ea__jj_map_set(&pool, &g->vars, k, strlen(k), v)) {
                st = pool.failed ? oom(&R) : ea_err(EA_ERR_RANGE, "chat template: context '%s' nests too deeply", k);
                goto done;
            }
        }
    }
    jj_buf b;
    ea__jj_buf_init(&b, &pool);
    st = ev_block(&R, g, body, n_body, &b);
    if (st == JJ_CONTROL) st = ea_err(EA_ERR_FORMAT, "chat template: break or continue outside a for loop");
    if (st != EA_OK) goto done;
    *out = ea_malloc(b.n + 1);
    if (!*out) {
        st = ea_err(EA_ERR_NOMEM, "chat template: out of memory");
        goto done;
    }
    if (b.n) memcpy(*out, b.s, b.n);
    (*out)[b.n] = 0;
    *out_len = b.n;
done:
    ea__jj_pool_deinit(&pool);
    return st;
}
