/*
 * jinja_value.c — runtime values of the chat-template interpreter and the
 * JavaScript conversions the reference applies to them.
 *
 * Numbers are doubles tagged INT or FLOAT (JS has one number type; the
 * reference keeps the tag only to print 2.0 as "2.0"). A JSON number from the
 * context is INT when integral, as Number.isInteger decides in JS.
 * Objects keep JS key order: integer-like keys ascending first, then the
 * rest in insertion order. Strings are UTF-8 with explicit length; the JS
 * notions that count UTF-16 units (length, whitespace sets) are computed here.
 * Invariant: constants (undefined, null, true, false) are static and never
 * written; everything else lives in the render pool.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_internal.h"

static jj_val k_undef = {.t = JV_UNDEF}, k_null = {.t = JV_NULL}, k_true = {.t = JV_BOOL, .b = true},
              k_false = {.t = JV_BOOL, .b = false};

jj_val *ea__jj_undef(void) { return &k_undef; }
jj_val *ea__jj_null(void) { return &k_null; }
jj_val *ea__jj_bool(bool b) { return b ? &k_true : &k_false; }

jj_val *ea__jj_num(jj_pool *p, jj_vtype t, double v) {
    jj_val *r = ea__jj_alloc(p, sizeof *r);
    if (r) {
        r->t = t;
        r->num = v;
    }
    return r;
}

jj_val *ea__jj_str_take(jj_pool *p, const char *s, size_t n) {
    jj_val *r = ea__jj_alloc(p, sizeof *r);
    if (r) {
        r->t = JV_STR;
        r->s = s;
        r->n = n;
    }
    return r;
}

jj_val *ea__jj_str(jj_pool *p, const char *s, size_t n) {
    char *c = ea__jj_strndup(p, s, n);
    return c ? ea__jj_str_take(p, c, n) : NULL;
}

jj_val *ea__jj_array(jj_pool *p, jj_vtype t, jj_val **items, size_t n) {
    jj_val *r = ea__jj_alloc(p, sizeof *r);
    if (!r) return NULL;
    r->t = t;
    r->n_items = n;
    if (n) {
        r->items = ea__jj_alloc(p, n * sizeof *items);
        if (!r->items) return NULL;
        memcpy(r->items, items, n * sizeof *items);
    }
    return r;
}

jj_val *ea__jj_mapval(jj_pool *p, jj_vtype t) {
    jj_val *r = ea__jj_alloc(p, sizeof *r);
    if (!r) return NULL;
    r->t = t;
    r->map = ea__jj_alloc(p, sizeof *r->map);
    return r->map ? r : NULL;
}

jj_val *ea__jj_func(jj_pool *p, jj_func fn, jj_val *self) {
    jj_val *r = ea__jj_alloc(p, sizeof *r);
    if (r) {
        r->t = JV_FUNC;
        r->fn = fn;
        r->self = self;
    }
    return r;
}

jj_val *ea__jj_map_get(const jj_map *m, const char *k, size_t n) {
    for (size_t i = 0; i < m->n; i++)
        if (m->key_lens[i] == n && memcmp(m->keys[i], k, n) == 0) return m->vals[i];
    return NULL;
}

bool ea__jj_map_set(jj_pool *p, jj_map *m, const char *k, size_t n, jj_val *v) {
    for (size_t i = 0; i < m->n; i++)
        if (m->key_lens[i] == n && memcmp(m->keys[i], k, n) == 0) {
            m->vals[i] = v;
            return true;
        }
    size_t cap_keys = m->cap, cap_lens = m->cap; /* three arrays, one capacity: m->cap grows last */
    if (!ea__jj_grow(p, &m->keys, m->n, &cap_keys, m->n + 1, sizeof *m->keys, 8) ||
        !ea__jj_grow(p, &m->key_lens, m->n, &cap_lens, m->n + 1, sizeof *m->key_lens, 8) ||
        !ea__jj_grow(p, &m->vals, m->n, &m->cap, m->n + 1, sizeof *m->vals, 8))
        return false;
    char *kc = ea__jj_strndup(p, k, n);
    if (!kc) return false;
    m->keys[m->n] = kc;
    m->key_lens[m->n] = n;
    m->vals[m->n] = v;
    m->n++;
    return true;
}

/* A canonical array index ("0", "17", not "01"), which JS orders first. */
static bool array_index_key(const char *k, size_t n, double *idx) {
    if (n == 0 || n > 10) return false;
    if (n > 1 && k[0] == '0') return false;
    double v = 0;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9') return false;
        v = v * 10 + (k[i] - '0');
    }
    if (v > 4294967294.0) return false;
    *idx = v;
    return true;
}

jj_val *ea__jj_from_json(jj_pool *p, const json_t *j, int depth) {
    if (depth > 512) return NULL;
    switch (json_typeof(j)) {
    case JSON_NULL: return ea__jj_null();
    case JSON_TRUE: return ea__jj_bool(true);
    case JSON_FALSE: return ea__jj_bool(false);
    case JSON_INTEGER: return ea__jj_num(p, JV_INT, (double)json_integer_value(j));
    case JSON_REAL: {
        double d = json_real_value(j);
        return ea__jj_num(p, (isfinite(d) && d == floor(d)) ? JV_INT : JV_FLOAT, d);
    }
    case JSON_STRING: return ea__jj_str(p, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jj_val *r = ea__jj_array(p, JV_ARRAY, NULL, 0);
        if (!r) return NULL;
        if (n) {
            r->items = ea__jj_alloc(p, n * sizeof *r->items);
            if (!r->items) return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            r->items[i] = ea__jj_from_json(p, json_array_get(j, i), depth + 1);
            if (!r->items[i]) return NULL;
        }
        r->n_items = n;
        return r;
    }
    case JSON_OBJECT: {
        jj_val *r = ea__jj_mapval(p, JV_OBJECT);
        if (!r) return NULL;
        /* integer-like keys first, ascending (JS property order) */
        size_t n_idx = 0;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            double d;
            if (array_index_key(k, strlen(k), &d)) n_idx++;
        }
        if (n_idx) {
            const char **ik = ea__jj_alloc(p, n_idx * sizeof *ik);
            double *iv = ea__jj_alloc(p, n_idx * sizeof *iv);
            if (!ik || !iv) return NULL;
            size_t m = 0;
            json_object_foreach((json_t *)j, k, v) {
                double d;
                if (array_index_key(k, strlen(k), &d)) {
                    size_t pos = m++;
                    while (pos > 0 && iv[pos - 1] > d) {
                        iv[pos] = iv[pos - 1];
                        ik[pos] = ik[pos - 1];
                        pos--;
                    }
                    iv[pos] = d;
                    ik[pos] = k;
                }
            }
            for (size_t i = 0; i < n_idx; i++) {
                jj_val *x = ea__jj_from_json(p, json_object_get(j, ik[i]), depth + 1);
                if (!x || !ea__jj_map_set(p, r->map, ik[i], strlen(ik[i]), x)) return NULL;
            }
        }
        json_object_foreach((json_t *)j, k, v) {
            double d;
            if (array_index_key(k, strlen(k), &d)) continue;
            jj_val *x = ea__jj_from_json(p, v, depth + 1);
            if (!x || !ea__jj_map_set(p, r->map, k, strlen(k), x)) return NULL;
        }
        return r;
    }
    }
    return NULL;
}

/* ---- buffers -------------------------------------------------------------------- */

void ea__jj_buf_init(jj_buf *b, jj_pool *p) {
    b->pool = p;
    b->s = NULL;
    b->n = b->cap = 0;
}

bool ea__jj_buf_add(jj_buf *b, const char *s, size_t n) {
    if (!ea__jj_grow(b->pool, &b->s, b->n, &b->cap, b->n + n + 1, 1, 64)) return false;
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return true;
}

bool ea__jj_buf_addc(jj_buf *b, char c) { return ea__jj_buf_add(b, &c, 1); }

/* ---- UTF-8 / JS string notions ------------------------------------------------- */

size_t ea__jj_utf8_dec(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) {
        *cp = 0;
        return 0;
    }
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    size_t len = (u[0] & 0xE0) == 0xC0 ? 2 : (u[0] & 0xF0) == 0xE0 ? 3 : (u[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = 0xFFFD;
        return 1;
    }
    uint32_t c = u[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        c = (c << 6) | (u[i] & 0x3F);
    }
    *cp = c;
    return len;
}

size_t ea__jj_utf8_enc(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool ea__jj_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t min;
        if ((u[i] & 0xE0) == 0xC0) len = 2, min = 0x80;
        else if ((u[i] & 0xF0) == 0xE0) len = 3, min = 0x800;
        else if ((u[i] & 0xF8) == 0xF0) len = 4, min = 0x10000;
        else return false;
        if (i + len > n) return false;
        uint32_t cp;
        if (ea__jj_utf8_dec(s + i, n - i, &cp) != len) return false;
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

size_t ea__jj_utf16_len(const char *s, size_t n) {
    size_t units = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = ea__jj_utf8_dec(s + i, n - i, &cp);
        units += cp >= 0x10000 ? 2 : 1;
        i += k;
    }
    return units;
}

/* JS WhiteSpace + LineTerminator (what \s and trim() use). */
static bool js_ws(uint32_t c) {
    return c == 0x09 || c == 0x0A || c == 0x0B || c == 0x0C || c == 0x0D || c == 0x20 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

size_t ea__jj_ws_at(const char *s, size_t n) {
    if (n == 0) return 0;
    uint32_t cp;
    size_t k = ea__jj_utf8_dec(s, n, &cp);
    return js_ws(cp) ? k : 0;
}

size_t ea__jj_ws_before(const char *s, size_t n) {
    if (n == 0) return 0;
    size_t st = n - 1;
    while (st > 0 && n - st < 4 && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
    uint32_t cp;
    size_t k = ea__jj_utf8_dec(s + st, n - st, &cp);
    if (st + k != n) return 0;
    return js_ws(cp) ? k : 0;
}

/* ---- numbers ------------------------------------------------------------------- */

/* Number.prototype.toString(): shortest round-trip digits in JS layout. */
void ea__jj_fmt_num(char out[40], double v) {
    if (isnan(v)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(v)) {
        strcpy(out, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (v == 0) {
        strcpy(out, "0");
        return;
    }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    /* tmp = [-]d.ddde[+-]XX */
    char digits[24];
    size_t k = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0') k--;
    digits[k] = 0;
    int e = atoi(p + 1);
    int n = e + 1; /* decimal point position */
    char *o = out;
    if (neg) *o++ = '-';
    if ((int)k <= n && n <= 21) {
        memcpy(o, digits, k);
        o += k;
        for (int i = 0; i < n - (int)k; i++) *o++ = '0';
    } else if (0 < n && n <= 21) {
        memcpy(o, digits, (size_t)n);
        o += n;
        *o++ = '.';
        memcpy(o, digits + n, k - (size_t)n);
        o += k - (size_t)n;
    } else if (-6 < n && n <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -n; i++) *o++ = '0';
        memcpy(o, digits, k);
        o += k;
    } else {
        *o++ = digits[0];
        if (k > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, k - 1);
            o += k - 1;
        }
        o += sprintf(o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
    }
    *o = 0;
}

static void fmt_float_value(char out[48], double v) {
    if (v == 0 && signbit(v)) {
        strcpy(out, "-0.0");
        return;
    }
    if (isfinite(v) && v == floor(v) && fabs(v) < 1e21) {
        snprintf(out, 48, "%.1f", v); /* toFixed(1) of an integral value */
        return;
    }
    ea__jj_fmt_num(out, v);
}

/* ---- conversions --------------------------------------------------------------- */

static bool json_str(jj_buf *b, const char *s, size_t n, bool ascii) {
    if (!ea__jj_buf_addc(b, '"')) return false;
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        char esc[16];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            if (!ea__jj_buf_add(b, esc, 2)) return false;
            i++;
        } else if (c < 0x20) {
            const char *e = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (e) {
                if (!ea__jj_buf_add(b, e, 2)) return false;
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                if (!ea__jj_buf_add(b, esc, 6)) return false;
            }
            i++;
        } else if (ascii && c >= 0x7F) {
            uint32_t cp;
            size_t k = ea__jj_utf8_dec(s + i, n - i, &cp);
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                if (!ea__jj_buf_add(b, esc, 12)) return false;
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
                if (!ea__jj_buf_add(b, esc, 6)) return false;
            }
            i += k;
        } else {
            if (!ea__jj_buf_addc(b, (char)c)) return false;
            i++;
        }
    }
    return ea__jj_buf_addc(b, '"');
}

static bool add_s(jj_buf *b, const char *s) { return ea__jj_buf_add(b, s, strlen(s)); }

static bool pad(jj_buf *b, const jj_json_opts *o, int depth) {
    if (!ea__jj_buf_addc(b, '\n')) return false;
    for (int i = 0; i < depth * o->indent; i++)
        if (!ea__jj_buf_addc(b, ' ')) return false;
    return true;
}

bool ea__jj_to_json(jj_buf *b, const jj_val *v, const jj_json_opts *o, int depth) {
    if (depth > 512) return false;
    const char *isep = o->item_sep ? o->item_sep : (o->indent ? "," : ", ");
    size_t isep_n = o->item_sep ? o->item_sep_n : strlen(isep);
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    size_t ksep_n = o->key_sep ? o->key_sep_n : 2;
    char num[48];
    switch (v->t) {
    case JV_NULL: return add_s(b, "null");
    case JV_UNDEF: return add_s(b, o->undef_as_null ? "null" : "undefined");
    case JV_BOOL: return add_s(b, v->b ? "true" : "false");
    case JV_INT:
    case JV_FLOAT:
        if (!isfinite(v->num)) return add_s(b, "null");
        ea__jj_fmt_num(num, v->num);
        return add_s(b, num);
    case JV_STR: return json_str(b, v->s, v->n, o->ensure_ascii);
    case JV_TUPLE:
    case JV_KWARGS:
    case JV_FUNC:
        return false; /* the reference has no JSON form for these and throws */
    case JV_ARRAY:
        if (!ea__jj_buf_addc(b, '[')) return false;
        for (size_t i = 0; i < v->n_items; i++) {
            if (i && !ea__jj_buf_add(b, isep, isep_n)) return false;
            if (o->indent && !pad(b, o, depth + 1)) return false;
            if (!ea__jj_to_json(b, v->items[i], o, depth + 1)) return false;
        }
        if (o->indent && v->n_items && !pad(b, o, depth)) return false;
        return ea__jj_buf_addc(b, ']');
    case JV_OBJECT:
    case JV_NAMESPACE:
        if (!ea__jj_buf_addc(b, '{')) return false;
        for (size_t i = 0; i < v->map->n; i++) {
            if (i && !ea__jj_buf_add(b, isep, isep_n)) return false;
            if (o->indent && !pad(b, o, depth + 1)) return false;
            if (!json_str(b, v->map->keys[i], v->map->key_lens[i], o->ensure_ascii)) return false;
            if (!ea__jj_buf_add(b, ksep, ksep_n)) return false;
            if (!ea__jj_to_json(b, v->map->vals[i], o, depth + 1)) return false;
        }
        if (o->indent && v->map->n && !pad(b, o, depth)) return false;
        return ea__jj_buf_addc(b, '}');
    }
    return false;
}

bool ea__jj_to_output(jj_buf *b, const jj_val *v) {
    char num[48];
    jj_json_opts o = {0};
    switch (v->t) {
    case JV_UNDEF:
    case JV_NULL: return true;
    case JV_BOOL: return add_s(b, v->b ? "true" : "false");
    case JV_INT: ea__jj_fmt_num(num, v->num); return add_s(b, num);
    case JV_FLOAT: fmt_float_value(num, v->num); return add_s(b, num);
    case JV_STR: return ea__jj_buf_add(b, v->s, v->n);
    case JV_FUNC: return false;
    default: return ea__jj_to_json(b, v, &o, 0);
    }
}

/* RuntimeValue#toString for an element of an array being joined by JS. The
 * reference builds `none` as NullValue() with no argument, so its JS value is
 * `undefined`, and it stringifies (and compares with ===) as undefined. */
static bool elem_to_string(jj_buf *b, const jj_val *v) {
    switch (v->t) {
    case JV_UNDEF:
    case JV_NULL: return add_s(b, "undefined");
    default: return ea__jj_to_output(b, v);
    }
}

bool ea__jj_to_js_string(jj_buf *b, const jj_val *v) {
    char num[48];
    switch (v->t) {
    case JV_UNDEF:
    case JV_NULL: return add_s(b, "undefined"); /* see elem_to_string */
    case JV_BOOL: return add_s(b, v->b ? "true" : "false");
    case JV_INT:
    case JV_FLOAT: ea__jj_fmt_num(num, v->num); return add_s(b, num);
    case JV_STR: return ea__jj_buf_add(b, v->s, v->n);
    case JV_ARRAY:
    case JV_TUPLE: /* Array#toString: join(",") of the elements' toString() */
        for (size_t i = 0; i < v->n_items; i++) {
            if (i && !ea__jj_buf_addc(b, ',')) return false;
            if (!elem_to_string(b, v->items[i])) return false;
        }
        return true;
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NAMESPACE: return add_s(b, "[object Map]");
    case JV_FUNC: return false;
    }
    return false;
}

bool ea__jj_truthy(const jj_val *v) {
    switch (v->t) {
    case JV_UNDEF:
    case JV_NULL: return false;
    case JV_BOOL: return v->b;
    case JV_INT:
    case JV_FLOAT: return !(v->num == 0 || isnan(v->num));
    case JV_STR: return v->n > 0;
    case JV_ARRAY:
    case JV_TUPLE: return v->n_items > 0;
    case JV_OBJECT:
    case JV_KWARGS: return v->map->n > 0;
    case JV_NAMESPACE:
    case JV_FUNC: return true;
    }
    return false;
}

/* JS StringToNumber. */
static double js_str_to_num(const char *s, size_t n) {
    size_t w;
    while (n > 0 && (w = ea__jj_ws_at(s, n)) > 0) s += w, n -= w;
    while (n > 0 && (w = ea__jj_ws_before(s, n)) > 0) n -= w;
    if (n == 0) return 0;
    char buf[64];
    if (n >= sizeof buf) return NAN;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (!strcmp(buf, "Infinity") || !strcmp(buf, "+Infinity")) return INFINITY;
    if (!strcmp(buf, "-Infinity")) return -INFINITY;
    if (n > 2 && buf[0] == '0' && buf[1] != 0 && strchr("xXoObB", buf[1])) {
        int base = (buf[1] | 32) == 'x' ? 16 : (buf[1] | 32) == 'o' ? 8 : 2;
        double v = 0;
        for (size_t i = 2; i < n; i++) {
            int d = buf[i] >= '0' && buf[i] <= '9' ? buf[i] - '0' : (buf[i] | 32) >= 'a' && (buf[i] | 32) <= 'f' ? (buf[i] | 32) - 'a' + 10 : 99;
            if (d >= base) return NAN;
            v = v * base + d;
        }
        return v;
    }
    /* decimal literal: [+-]? (d+ (. d*)? | . d+) ([eE][+-]?d+)? */
    size_t i = 0, digits = 0;
    if (buf[i] == '+' || buf[i] == '-') i++;
    while (buf[i] >= '0' && buf[i] <= '9') i++, digits++;
    if (buf[i] == '.') {
        i++;
        while (buf[i] >= '0' && buf[i] <= '9') i++, digits++;
    }
    if (digits == 0) return NAN;
    if (buf[i] == 'e' || buf[i] == 'E') {
        i++;
        if (buf[i] == '+' || buf[i] == '-') i++;
        size_t ed = 0;
        while (buf[i] >= '0' && buf[i] <= '9') i++, ed++;
        if (ed == 0) return NAN;
    }
    if (i != n) return NAN;
    return strtod(buf, NULL);
}

static bool is_obj(const jj_val *v) {
    return v->t == JV_ARRAY || v->t == JV_TUPLE || v->t == JV_OBJECT || v->t == JV_KWARGS || v->t == JV_NAMESPACE ||
           v->t == JV_FUNC;
}
static bool is_number(const jj_val *v) { return v->t == JV_INT || v->t == JV_FLOAT; }

int ea__jj_loose_eq(const jj_val *a, const jj_val *b) {
    bool an = a->t == JV_NULL || a->t == JV_UNDEF, bn = b->t == JV_NULL || b->t == JV_UNDEF;
    if (an || bn) return an && bn;
    if (is_obj(a) || is_obj(b)) {
        if (is_obj(a) && is_obj(b)) {
            if (a->t == JV_ARRAY || a->t == JV_TUPLE) return (b->t == JV_ARRAY || b->t == JV_TUPLE) && a->items == b->items && a->n_items == b->n_items && a == b;
            return a == b || (a->map && a->map == b->map);
        }
        return -1; /* object vs primitive: JS would compare toString() forms; not reproduced */
    }
    if (a->t == JV_STR && b->t == JV_STR) return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
    if (a->t == JV_BOOL && b->t == JV_BOOL) return a->b == b->b;
    double x = a->t == JV_BOOL ? (a->b ? 1 : 0) : a->t == JV_STR ? js_str_to_num(a->s, a->n) : a->num;
    double y = b->t == JV_BOOL ? (b->b ? 1 : 0) : b->t == JV_STR ? js_str_to_num(b->s, b->n) : b->num;
    return x == y;
}

bool ea__jj_strict_eq(const jj_val *a, const jj_val *b) {
    if (is_number(a) && is_number(b)) return a->num == b->num;
    if ((a->t == JV_NULL || a->t == JV_UNDEF) && (b->t == JV_NULL || b->t == JV_UNDEF)) return true; /* both JS undefined */
    if (a->t != b->t) {
        bool aa = a->t == JV_ARRAY || a->t == JV_TUPLE, ba = b->t == JV_ARRAY || b->t == JV_TUPLE;
        bool am = a->t == JV_OBJECT || a->t == JV_KWARGS, bm = b->t == JV_OBJECT || b->t == JV_KWARGS;
        if ((aa && ba) || (am && bm)) return a == b;
        return false;
    }
    switch (a->t) {
    case JV_UNDEF:
    case JV_NULL: return true;
    case JV_BOOL: return a->b == b->b;
    case JV_STR: return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
    default: return a == b || (a->map && a->map == b->map);
    }
}
