/*
 * sbuf.c — growable byte buffer (see sbuf.h). Grows geometrically through
 * ea_realloc; a failed growth sets `failed` and turns later appends into
 * no-ops, so the data is always a prefix of what was asked and never torn.
 */
#include "base/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

int ea_sbuf_reserve(ea_sbuf *b, size_t extra) {
    if (b->failed) return 0;
    size_t need;
    if (!ea_add_ok(b->len, extra, &need) || !ea_add_ok(need, 1, &need)) {
        b->failed = 1;
        return 0;
    }
    if (need <= b->cap) return 1;
    size_t cap = ea_grow_cap(b->cap, need, 256);
    if (!cap) cap = need; /* doubling would overflow */
    char *p = ea_realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void ea_sbuf_deinit(ea_sbuf *b) {
    ea_free(b->data);
    memset(b, 0, sizeof *b);
}

void ea_sbuf_reset(ea_sbuf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void ea_sbuf_append(ea_sbuf *b, const void *data, size_t n) {
    if (!ea_sbuf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
}

void *ea_sbuf_extend(ea_sbuf *b, size_t n) {
    if (!ea_sbuf_reserve(b, n)) return NULL;
    char *p = b->data + b->len;
    b->len += n;
    b->data[b->len] = 0;
    return p;
}

ea_status ea_sbuf_check(const ea_sbuf *b, const char *what) {
    return b->failed ? ea_err(EA_ERR_NOMEM, "%s: out of memory", what) : EA_OK;
}

void ea_sbuf_puts(ea_sbuf *b, const char *s) { ea_sbuf_append(b, s, strlen(s)); }

void ea_sbuf_printf(ea_sbuf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        ea_sbuf_append(b, small, (size_t)n);
        return;
    }
    if (!ea_sbuf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static int dump_cb(const char *buffer, size_t size, void *data) {
    ea_sbuf *b = data;
    ea_sbuf_append(b, buffer, size);
    return b->failed ? -1 : 0;
}

void ea_sbuf_json(ea_sbuf *b, const json_t *v) {
    if (!v || json_dump_callback(v, dump_cb, b, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) != 0) b->failed = 1;
}

char *ea_sbuf_take(ea_sbuf *b, size_t *len) {
    if (b->failed) {
        ea_sbuf_deinit(b);
        if (len) *len = 0;
        return NULL;
    }
    if (!ea_sbuf_reserve(b, 0)) return NULL;
    b->data[b->len] = 0;
    char *p = b->data;
    if (len) *len = b->len;
    memset(b, 0, sizeof *b);
    return p;
}

/* Append s[0..n) to out with every byte that does not start a valid UTF-8
 * sequence (overlongs, surrogates and > U+10FFFF included) replaced by U+FFFD. */
void ea_sbuf_append_utf8(ea_sbuf *out, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len = 0;
        unsigned cp = 0, min = 0;
        if (c < 0x80) len = 1, cp = c;
        else if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) ok = 0;
            else cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (ok && len > 1 && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = 0;
        if (ok) {
            ea_sbuf_append(out, p + i, len);
            i += len;
        } else {
            ea_sbuf_append(out, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
}
