/*
 * base64.c — see base64.h. Encoding works on groups of 3 bytes -> 4
 * characters; decoding reverses it through a 256-entry table (0xff = not an
 * alphabet character) and rejects every text a canonical encoder would not
 * write.
 */
#include "base/base64.h"

#include <string.h>

#include "base/alloc.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t ea_base64_enc_len(size_t n) { return (n + 2) / 3 * 4; }

size_t ea_base64_dec_max(size_t n) { return n / 4 * 3; }

void ea_base64_encode(const void *data, size_t n, char *out) {
    const uint8_t *p = data;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        out[o++] = alphabet[v >> 18];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
    }
    out[o] = 0;
}

static uint8_t value_of(char c) {
    if (c >= 'A' && c <= 'Z') return (uint8_t)(c - 'A');
    if (c >= 'a' && c <= 'z') return (uint8_t)(c - 'a' + 26);
    if (c >= '0' && c <= '9') return (uint8_t)(c - '0' + 52);
    if (c == '+') return 62;
    if (c == '/') return 63;
    return 0xff;
}

/* One group of 4 characters; pad = '=' count allowed here (only the last group). */
static ea_status group(const char *g, size_t at, int last, uint8_t *out, size_t *n_out) {
    int pad = last ? (g[3] == '=') + (g[3] == '=' && g[2] == '=') : 0;
    uint32_t v = 0;
    for (int j = 0; j < 4; j++) {
        uint8_t x = j >= 4 - pad ? 0 : value_of(g[j]);
        if (x == 0xff) return ea_err(EA_ERR_FORMAT, "base64: bad character at offset %zu", at + (size_t)j);
        v = v << 6 | x;
    }
    if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
        return ea_err(EA_ERR_FORMAT, "base64: non-zero bits before the padding at offset %zu", at);
    out[0] = (uint8_t)(v >> 16);
    if (pad < 2) out[1] = (uint8_t)(v >> 8);
    if (pad < 1) out[2] = (uint8_t)v;
    *n_out = 3 - (size_t)pad;
    return EA_OK;
}

ea_status ea_base64_decode(const char *text, size_t len, uint8_t *out, size_t *out_len) {
    if (len % 4) return ea_err(EA_ERR_FORMAT, "base64: length %zu is not a multiple of 4", len);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        size_t n = 0;
        EA_TRY(group(text + i, i, i + 4 == len, out + o, &n));
        o += n;
    }
    *out_len = o;
    return EA_OK;
}

char *ea_base64_dup(const void *data, size_t n) {
    char *t = ea_malloc(ea_base64_enc_len(n) + 1);
    if (t) ea_base64_encode(data, n, t);
    return t;
}

ea_status ea_base64_json_field(const json_t *obj, const char *key, uint8_t **out, size_t *len) {
    *out = NULL;
    const char *t = json_string_value(json_object_get(obj, key));
    if (!t || !t[0]) return ea_err(EA_ERR_FORMAT, "%s: expected a base64 string", key);
    size_t n = strlen(t);
    if (!(*out = ea_malloc(ea_base64_dec_max(n) + 1))) return ea_err(EA_ERR_NOMEM, "%s", key);
    ea_status st = ea_base64_decode(t, n, *out, len);
    if (st != EA_OK) {
        ea_free(*out);
        *out = NULL;
    }
    return st;
}
