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

static int reserve(ea_sbuf *b, size_t extra) {
    if (b->failed) return 0;
    size_t need;
    if (!ea_add_ok(b->len, extra, &need) || !ea_add_ok(need, 1, &need)) {
        b->failed = 1;
        return 0;
    }
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > ((size_t)-1) / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
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
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
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
    if (!reserve(b, (size_t)n)) return;
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
    if (!reserve(b, 0)) return NULL;
    b->data[b->len] = 0;
    char *p = b->data;
    if (len) *len = b->len;
    memset(b, 0, sizeof *b);
    return p;
}
