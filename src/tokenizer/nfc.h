/*
 * nfc.h — Unicode NFC normalization (internal to the tokenizer).
 *
 * Qwen3's tokenizer.json has normalizer {"type": "NFC"}: text is put in
 * Normalization Form C before added-token matching of `normalized` tokens
 * and before pre-tokenization. The algorithm is the one of UAX #15:
 * full canonical decomposition (Hangul arithmetically), canonical ordering
 * of combining marks by their combining class (stable), then canonical
 * composition with the blocking rule. Tables come from nfc_tables.c,
 * generated from Python's unicodedata (gen_nfc_tables.py; the Unicode
 * version is ea__nfc_unicode_version).
 *
 * Input must be valid UTF-8 (the tokenizer only normalizes valid runs).
 */
#ifndef EA_TOK_NFC_H
#define EA_TOK_NFC_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct { uint32_t cp; uint8_t ccc; } ea__nfc_ccc_entry;
typedef struct { uint32_t cp; uint32_t off; uint32_t len; } ea__nfc_decomp_entry;
typedef struct { uint32_t first, second, composite; } ea__nfc_comp_entry;

extern const char ea__nfc_unicode_version[];
extern const ea__nfc_ccc_entry ea__nfc_ccc[];
extern const int ea__nfc_n_ccc;
extern const ea__nfc_decomp_entry ea__nfc_decomp[];
extern const int ea__nfc_n_decomp;
extern const uint32_t ea__nfc_decomp_cps[];
extern const ea__nfc_comp_entry ea__nfc_comp[];
extern const int ea__nfc_n_comp;

/* 1 if NFC cannot change s (every code point below U+0300: no combining
 * marks, no composable pairs there); a cheap pre-check. */
int ea__nfc_trivial(const char *s, size_t n);

/* NFC of valid UTF-8 s[0..n) into a new heap buffer (OUT: *out, *out_n;
 * NUL-terminated; free with ea_free). */
ea_status ea__nfc(const char *s, size_t n, char **out, size_t *out_n);

/* UTF-8 helpers shared by the tokenizer. */
/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 if invalid
 * (bad lead byte, truncated, overlong, surrogate, > U+10FFFF). */
int ea__utf8_valid_len(const uint8_t *s, size_t n);
/* Decode the valid sequence at s (length from ea__utf8_valid_len). */
uint32_t ea__utf8_decode(const uint8_t *s, int len);
/* Encode cp (<= U+10FFFF) into out (4 bytes room); returns the length. */
int ea__utf8_encode(uint32_t cp, uint8_t *out);

#endif
