/*
 * nfc.c — Unicode NFC (UAX #15) over valid UTF-8; see nfc.h.
 *
 * Steps, on an array of code points sized 4x the input characters (no
 * canonical decomposition is longer than 4, Hangul gives 3):
 *   1. decompose every character fully (tables, Hangul arithmetically);
 *   2. canonical ordering: within each run of non-starters (ccc != 0),
 *      a stable insertion sort by ccc;
 *   3. compose left to right: a character C composes with the last starter
 *      S if nothing between them blocks it (the last kept character is S
 *      itself, or has a ccc lower than C's and nonzero) and (S, C) is a
 *      primary composite (table, or Hangul L+V / LV+T).
 * Tables are sorted by code point and searched by binary search.
 */
#include "tokenizer/nfc.h"

#include <string.h>

#include "base/alloc.h"

#define SBASE 0xAC00u
#define LBASE 0x1100u
#define VBASE 0x1161u
#define TBASE 0x11A7u
#define LCOUNT 19u
#define VCOUNT 21u
#define TCOUNT 28u
#define NCOUNT (VCOUNT * TCOUNT)
#define SCOUNT (LCOUNT * NCOUNT)

int ea__utf8_valid_len(const uint8_t *s, size_t n) {
    if (n == 0) return 0;
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0; /* continuation byte or overlong 2-byte lead */
    if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

uint32_t ea__utf8_decode(const uint8_t *s, int len) {
    switch (len) {
    case 1: return s[0];
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
               (s[3] & 0x3F);
    }
}

int ea__utf8_encode(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int ea__nfc_trivial(const char *s, size_t n) {
    /* U+0300 is CC 80; every byte below 0xCC is a character below U+0300 or
     * a continuation byte; a lead byte >= 0xCC starts a character >= U+0300. */
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < n; i++)
        if (p[i] >= 0xCC) return 0;
    return 1;
}

static int ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    int lo = 0, hi = ea__nfc_n_ccc - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (ea__nfc_ccc[mid].cp == cp) return ea__nfc_ccc[mid].ccc;
        if (ea__nfc_ccc[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

/* Append the full decomposition of cp to out; returns the count written. */
static int decompose(uint32_t cp, uint32_t *out) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t si = cp - SBASE;
        out[0] = LBASE + si / NCOUNT;
        out[1] = VBASE + (si % NCOUNT) / TCOUNT;
        if (si % TCOUNT) {
            out[2] = TBASE + si % TCOUNT;
            return 3;
        }
        return 2;
    }
    if (cp >= 0xC0) {
        int lo = 0, hi = ea__nfc_n_decomp - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (ea__nfc_decomp[mid].cp == cp) {
                const ea__nfc_decomp_entry *e = &ea__nfc_decomp[mid];
                memcpy(out, ea__nfc_decomp_cps + e->off, e->len * sizeof *out);
                return (int)e->len;
            }
            if (ea__nfc_decomp[mid].cp < cp) lo = mid + 1;
            else hi = mid - 1;
        }
    }
    out[0] = cp;
    return 1;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = ea__nfc_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const ea__nfc_comp_entry *e = &ea__nfc_comp[mid];
        if (e->first == a && e->second == b) return e->composite;
        if (e->first < a || (e->first == a && e->second < b)) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

ea_status ea__nfc(const char *s, size_t n, char **out, size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    size_t cap_cp;
    if (!ea_mul_ok(n, 4, &cap_cp) || !ea_mul_ok(cap_cp + 1, sizeof(uint32_t), &cap_cp))
        return ea_err(EA_ERR_RANGE, "nfc: text of %zu bytes too long", n);
    uint32_t *cp = ea_malloc(cap_cp);
    if (!cp) return ea_err(EA_ERR_NOMEM, "nfc: %zu bytes", cap_cp);
    const uint8_t *p = (const uint8_t *)s;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        int l = ea__utf8_valid_len(p + i, n - i);
        EA_ASSERT(l > 0); /* callers pass valid UTF-8 */
        m += (size_t)decompose(ea__utf8_decode(p + i, l), cp + m);
        i += (size_t)l;
    }
    /* canonical ordering: stable insertion sort inside runs of non-starters */
    for (size_t i = 1; i < m; i++) {
        int c = ccc_of(cp[i]);
        if (c == 0) continue;
        size_t j = i;
        uint32_t v = cp[i];
        while (j > 0) {
            int pc = ccc_of(cp[j - 1]);
            if (pc == 0 || pc <= c) break;
            cp[j] = cp[j - 1];
            j--;
        }
        cp[j] = v;
    }
    /* canonical composition */
    size_t k = 0;
    long starter = -1;
    int last_cc = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t c = cp[i];
        int cc = ccc_of(c);
        if (starter >= 0) {
            int adjacent = (long)k - 1 == starter;
            if (adjacent || (last_cc != 0 && last_cc < cc)) {
                uint32_t comp = compose(cp[starter], c);
                if (comp) {
                    cp[starter] = comp;
                    continue;
                }
            }
        }
        if (cc == 0) starter = (long)k;
        last_cc = cc;
        cp[k++] = c;
    }
    char *o = ea_malloc(k * 4 + 1);
    if (!o) {
        ea_free(cp);
        return ea_err(EA_ERR_NOMEM, "nfc: %zu code points", k);
    }
    size_t on = 0;
    for (size_t i = 0; i < k; i++) on += (size_t)ea__utf8_encode(cp[i], (uint8_t *)o + on);
    o[on] = 0;
    ea_free(cp);
    *out = o;
    *out_n = on;
    return EA_OK;
}
