/*
 * sbuf.h — the growable byte buffer of eaas: HTTP bodies (JSON, SSE,
 * Prometheus text), decoded text (the tokenizer), messages of any length
 * (the control bus's batch and its MPI broadcast).
 *
 *   ea_sbuf b = {0};
 *   ea_sbuf_printf(&b, "eaas:num_requests_running %d\n", n);
 *   ... b.data (NUL-terminated, owns), b.len ...
 *   ea_sbuf_deinit(&b);
 *
 * Once an allocation fails, b.failed is set and later appends do nothing, so
 * a caller checks once at the end instead of after every append.
 */
#ifndef EA_SBUF_H
#define EA_SBUF_H

#include <jansson.h>
#include <stddef.h>

#include "base/status.h"

typedef struct {
    char *data; /* owns; NUL-terminated when len > 0 or after any append */
    size_t len;
    size_t cap;
    int failed;
} ea_sbuf;

void ea_sbuf_deinit(ea_sbuf *b);
void ea_sbuf_reset(ea_sbuf *b); /* len = 0, keeps the storage */
void ea_sbuf_append(ea_sbuf *b, const void *data, size_t n);
/* Room for n more bytes and a NUL without moving data again: 1, or 0 once failed. */
int ea_sbuf_reserve(ea_sbuf *b, size_t n);
/* Append n bytes left for the caller to write (NUL after them); their address, or NULL once failed. */
void *ea_sbuf_extend(ea_sbuf *b, size_t n);
/* EA_OK, or EA_ERR_NOMEM "<what>: out of memory" once an append failed: for callers that return ea_status. */
ea_status ea_sbuf_check(const ea_sbuf *b, const char *what);
void ea_sbuf_puts(ea_sbuf *b, const char *s);
/* Append s[0..n) as valid UTF-8: each byte that starts no valid sequence (overlongs,
 * surrogates and > U+10FFFF included) becomes U+FFFD — the one rule for text that
 * leaves eaas (API responses, `eaas generate`). */
void ea_sbuf_append_utf8(ea_sbuf *b, const char *s, size_t n);
void ea_sbuf_printf(ea_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compact JSON of v (keys in insertion order). */
void ea_sbuf_json(ea_sbuf *b, const json_t *v);
/* Hand the storage to the caller (NULL if failed); b is empty afterwards. */
char *ea_sbuf_take(ea_sbuf *b, size_t *len);

#endif
