/*
 * base64.h — standard base64 (RFC 4648 section 4: A-Z a-z 0-9 + /, '='
 * padding), for binary blobs inside JSON (a UCX worker address in the
 * monitor's table).
 *
 *   size_t n = ea_base64_enc_len(len);     char *txt = ea_malloc(n + 1);
 *   ea_base64_encode(bytes, len, txt);     // n chars + NUL
 *   uint8_t *raw = ea_malloc(ea_base64_dec_max(strlen(txt)));  size_t m;
 *   ea_base64_decode(txt, strlen(txt), raw, &m);
 *
 * Decoding is strict: the length must be a multiple of 4, padding only at
 * the end (at most two '='), no whitespace, and the unused bits of the last
 * group must be zero, so every byte string has exactly one accepted text.
 * Input from outside is never trusted: a bad text is EA_ERR_FORMAT naming
 * the offset, and nothing is read past text[len).
 */
#ifndef EA_BASE64_H
#define EA_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/status.h"

/* Characters of the encoding of n bytes (without the NUL). */
size_t ea_base64_enc_len(size_t n);
/* Bytes at most decoded from a text of n characters. */
size_t ea_base64_dec_max(size_t n);
/* Writes ea_base64_enc_len(n) characters and a NUL to out. */
void ea_base64_encode(const void *data, size_t n, char *out);
/* OUT: out[0..*out_len); out holds at least ea_base64_dec_max(len) bytes. */
ea_status ea_base64_decode(const char *text, size_t len, uint8_t *out, size_t *out_len);

/* The encoding of data[0..n) as a new NUL-terminated string (ea_free), or NULL. */
char *ea_base64_dup(const void *data, size_t n);
/* Decodes the base64 string member `key` of the JSON object obj into a new
 * buffer (*out, ea_free; NULL on an error) of *len bytes. A missing, empty or
 * non-string member is EA_ERR_FORMAT naming the key. */
ea_status ea_base64_json_field(const json_t *obj, const char *key, uint8_t **out, size_t *len);

#endif
