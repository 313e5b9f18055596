/*
 * tokenizer.c — byte-level BPE: the representation builders (shared by
 * tokenizer_json.c and tokenizer_vocab.c), encoding and decoding. See
 * tokenizer.h for what is supported and the encoding pipeline;
 * tokenizer_internal.h for the invariants.
 *
 * Byte-level BPE in bytes: the GPT-2 byte-level step maps each byte to a
 * printable character (bytes_to_unicode below) and the vocabulary is written
 * in those characters. Instead of building the mapped string for every word,
 * the encoder starts BPE from byte_id[b] (the id of byte b's character) and
 * merges ids: merges are a hash map (left id, right id) -> (rank, result id),
 * built once from the merge strings. The lowest rank merges first, ties go
 * to the leftmost pair (what HF tokenizers and transformers.js do), using a
 * binary heap whose stale entries are skipped on pop.
 *
 * Word cache: BPE results of words up to EA__CACHE_MAX_KEY bytes are kept in
 * a direct-mapped table of EA__CACHE_SLOTS entries (key = the word's bytes,
 * with any prefix space), guarded by cache_mu. Natural text repeats words
 * heavily, so most words skip BPE (bench/bench_tokenizer.c measures it).
 *
 * Invalid UTF-8: the text is cut into maximal valid runs and invalid runs.
 * Valid runs go through the whole pipeline; an invalid run skips added
 * tokens, normalizer and regexes and is one BPE word of raw bytes. Decoding
 * gives back the same bytes, so encode/decode round-trips any byte string.
 * (HF tokenizers only ever see valid Unicode strings; there is no reference
 * behaviour to follow.)
 */
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer_internal.h"

/* ------------------------------------------------------------------ */
/* small buffers                                                       */

void ea_tokens_free(ea_tokens *t) {
    if (!t) return;
    ea_free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}

static ea_status tokens_reserve(ea_tokens *t, size_t extra) {
    if (ea_grow(&t->ids, &t->cap, t->n + extra, sizeof *t->ids, 16))
        return ea_err(EA_ERR_NOMEM, "token array of %zu", t->n + extra);
    return EA_OK;
}

ea_status ea_tokens_push(ea_tokens *t, int32_t id) {
    EA_TRY(tokens_reserve(t, 1));
    t->ids[t->n++] = id;
    return EA_OK;
}

/* Append to a text buffer (base/sbuf.h), with the one error for a failed growth. */
static ea_status text_append(ea_sbuf *b, const void *s, size_t n) {
    ea_sbuf_append(b, s, n);
    return ea_sbuf_check(b, "text buffer");
}

/* Room for n more bytes and a NUL. */
static ea_status text_reserve(ea_sbuf *b, size_t n) { return ea_sbuf_reserve(b, n) ? EA_OK : ea_sbuf_check(b, "text buffer"); }

ea_status ea_tok_append_json(ea_sbuf *b, const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    EA_TRY(text_append(b, "\"", 1));
    for (size_t i = 0; i < n;) {
        int l = ea__utf8_valid_len(p + i, n - i);
        char esc[8];
        if (l == 0) {
            EA_TRY(text_append(b, "\xef\xbf\xbd", 3));
            i++;
            continue;
        }
        if (l == 1 && (p[i] < 0x20 || p[i] == '"' || p[i] == '\\' || p[i] == 0x7f)) {
            const char *e = p[i] == '"' ? "\\\"" : p[i] == '\\' ? "\\\\" : p[i] == '\n' ? "\\n"
                          : p[i] == '\t' ? "\\t" : p[i] == '\r' ? "\\r" : NULL;
            if (!e) {
                snprintf(esc, sizeof esc, "\\u%04x", p[i]);
                e = esc;
            }
            EA_TRY(text_append(b, e, strlen(e)));
        } else {
            EA_TRY(text_append(b, p + i, (size_t)l));
        }
        i += (size_t)l;
    }
    return text_append(b, "\"", 1);
}

/* ------------------------------------------------------------------ */
/* the GPT-2 byte <-> character table                                  */

static uint16_t byte_to_cp[256];
static int16_t cp_to_byte[324];
static pthread_once_t byte_table_once = PTHREAD_ONCE_INIT;

static void byte_table_init(void) {
    int n = 0;
    for (int i = 0; i < 324; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_cp[b] = (uint16_t)(printable ? b : 256 + n++);
        cp_to_byte[byte_to_cp[b]] = (int16_t)b;
    }
}

int ea__tok_bytelevel_char(uint8_t b, char *out) { return ea__utf8_encode(byte_to_cp[b], (uint8_t *)out); }

/* ------------------------------------------------------------------ */
/* builders                                                            */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

ea_status ea__tok_alloc(const char *what, ea_tokenizer **out) {
    *out = NULL;
    pthread_once(&byte_table_once, byte_table_init);
    ea_tokenizer *t = ea_calloc(1, sizeof *t);
    if (!t) return ea_err(EA_ERR_NOMEM, "tokenizer");
    t->what = ea_strdup(what ? what : "tokenizer");
    t->cache = ea_calloc(EA__CACHE_SLOTS, sizeof *t->cache);
    if (!t->what || !t->cache) {
        ea_free(t->what);
        ea_free(t->cache);
        ea_free(t);
        return ea_err(EA_ERR_NOMEM, "tokenizer");
    }
    pthread_mutex_init(&t->cache_mu, NULL);
    t->bos = t->eos = -1;
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    *out = t;
    return EA_OK;
}

const char *ea__tok_intern(ea_tokenizer *t, const char *s, size_t len) {
    if (len + 1 > t->pool_left) {
        size_t bs = len + 1 > ((size_t)1 << 20) ? len + 1 : ((size_t)1 << 20);
        if (ea_grow(&t->pool_blocks, &t->cap_pool_blocks, (size_t)t->n_pool_blocks + 1, sizeof *t->pool_blocks, 16))
            return NULL;
        char *b = ea_malloc(bs);
        if (!b) return NULL;
        t->pool_blocks[t->n_pool_blocks++] = b;
        t->pool_cur = b;
        t->pool_left = bs;
    }
    char *p = t->pool_cur;
    if (len) memcpy(p, s, len);
    p[len] = 0;
    t->pool_cur += len + 1;
    t->pool_left -= len + 1;
    return p;
}

ea_status ea__tok_set_vocab_size(ea_tokenizer *t, int64_t n) {
    if (n <= 0 || n > EA__MAX_VOCAB)
        return ea_err(EA_ERR_RANGE, "%s: vocabulary size %lld out of range (1..%d)", t->what, (long long)n,
                      EA__MAX_VOCAB);
    t->n_vocab = (int32_t)n;
    t->piece = ea_calloc((size_t)n, sizeof *t->piece);
    t->piece_len = ea_calloc((size_t)n, sizeof *t->piece_len);
    t->bytes = ea_calloc((size_t)n, sizeof *t->bytes);
    t->bytes_len = ea_calloc((size_t)n, sizeof *t->bytes_len);
    t->special = ea_calloc((size_t)n, 1);
    t->map_cap = 1024; /* grows with the entries, not with the largest id */
    t->map = ea_malloc(t->map_cap * sizeof *t->map);
    if (!t->piece || !t->piece_len || !t->bytes || !t->bytes_len || !t->special || !t->map)
        return ea_err(EA_ERR_NOMEM, "%s: vocabulary of %lld", t->what, (long long)n);
    for (size_t i = 0; i < t->map_cap; i++) t->map[i].id = -1;
    return EA_OK;
}

static ea_status map_grow(ea_tokenizer *t) {
    size_t nc = ea_grow_cap(t->map_cap, t->map_cap + 1, 1024);
    ea__strmap_slot *nm = ea_malloc(nc * sizeof *nm);
    if (!nm) return ea_err(EA_ERR_NOMEM, "%s: vocabulary map", t->what);
    for (size_t i = 0; i < nc; i++) nm[i].id = -1;
    for (size_t i = 0; i < t->map_cap; i++) {
        if (t->map[i].id < 0) continue;
        size_t h = ea_hash64(t->map[i].key, t->map[i].len, 0) & (nc - 1);
        while (nm[h].id >= 0) h = (h + 1) & (nc - 1);
        nm[h] = t->map[i];
    }
    ea_free(t->map);
    t->map = nm;
    t->map_cap = nc;
    return EA_OK;
}

/* Insert or replace key -> id (key must view the pool). */
static ea_status map_put(ea_tokenizer *t, const char *key, size_t len, int32_t id) {
    if ((t->map_n + 1) * 2 > t->map_cap) EA_TRY(map_grow(t));
    size_t h = ea_hash64(key, len, 0) & (t->map_cap - 1);
    while (t->map[h].id >= 0) {
        if (t->map[h].len == len && memcmp(t->map[h].key, key, len) == 0) {
            t->map[h].id = id;
            return EA_OK;
        }
        h = (h + 1) & (t->map_cap - 1);
    }
    t->map[h].key = key;
    t->map[h].len = (uint32_t)len;
    t->map[h].id = id;
    t->map_n++;
    return EA_OK;
}

int32_t ea__tok_lookup(const ea_tokenizer *t, const char *s, size_t len) {
    if (!t->map) return -1;
    size_t h = ea_hash64(s, len, 0) & (t->map_cap - 1);
    while (t->map[h].id >= 0) {
        if (t->map[h].len == len && memcmp(t->map[h].key, s, len) == 0) return t->map[h].id;
        h = (h + 1) & (t->map_cap - 1);
    }
    return -1;
}

/* Quote s for an error message (cut, escaped) into buf. */
static const char *quote(char *buf, size_t cap, const char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '\'' || c == '\\') o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    buf[o] = 0;
    return buf;
}

ea_status ea__tok_set_piece(ea_tokenizer *t, int32_t id, const char *s, size_t len, const char *field) {
    char q[80], q2[80];
    if (id < 0 || id >= t->n_vocab) return ea_err(EA_ERR_RANGE, "%s: %s: id %d out of range", t->what, field, id);
    if (len > (1u << 20)) return ea_err(EA_ERR_RANGE, "%s: %s: token of %zu bytes", t->what, field, len);
    if (t->piece[id] && !(t->piece_len[id] == len && memcmp(t->piece[id], s, len) == 0))
        return ea_err(EA_ERR_FORMAT, "%s: %s: id %d is both '%s' and '%s'", t->what, field, id,
                      quote(q, sizeof q, t->piece[id], t->piece_len[id]), quote(q2, sizeof q2, s, len));
    const char *p = ea__tok_intern(t, s, len);
    if (!p) return ea_err(EA_ERR_NOMEM, "%s: vocabulary strings", t->what);
    t->piece[id] = p;
    t->piece_len[id] = (uint32_t)len;
    return map_put(t, p, len, id);
}

static ea_status merges_grow(ea_tokenizer *t) {
    size_t nc = ea_grow_cap(t->merges_cap, t->merges_cap + 1, 1024);
    ea__merge_slot *nm = ea_malloc(nc * sizeof *nm);
    if (!nm) return ea_err(EA_ERR_NOMEM, "%s: merge map", t->what);
    for (size_t i = 0; i < nc; i++) nm[i].key = UINT64_MAX;
    for (size_t i = 0; i < t->merges_cap; i++) {
        if (t->merges[i].key == UINT64_MAX) continue;
        size_t h = mix64(t->merges[i].key) & (nc - 1);
        while (nm[h].key != UINT64_MAX) h = (h + 1) & (nc - 1);
        nm[h] = t->merges[i];
    }
    ea_free(t->merges);
    t->merges = nm;
    t->merges_cap = nc;
    return EA_OK;
}

static const ea__merge_slot *merge_find(const ea_tokenizer *t, int32_t l, int32_t r) {
    if (!t->merges_cap) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
    size_t h = mix64(key) & (t->merges_cap - 1);
    while (t->merges[h].key != UINT64_MAX) {
        if (t->merges[h].key == key) return &t->merges[h];
        h = (h + 1) & (t->merges_cap - 1);
    }
    return NULL;
}

ea_status ea__tok_add_merge(ea_tokenizer *t, const char *l, size_t ll, const char *r, size_t rl, int32_t rank,
                            const char *field) {
    char q[80], q2[80];
    int32_t li = ea__tok_lookup(t, l, ll), ri = ea__tok_lookup(t, r, rl);
    if (li < 0) return ea_err(EA_ERR_FORMAT, "%s: %s: token '%s' is not in the vocabulary", t->what, field,
                              quote(q, sizeof q, l, ll));
    if (ri < 0) return ea_err(EA_ERR_FORMAT, "%s: %s: token '%s' is not in the vocabulary", t->what, field,
                              quote(q, sizeof q, r, rl));
    char stack[512];
    char *cat = ll + rl <= sizeof stack ? stack : ea_malloc(ll + rl);
    if (!cat) return ea_err(EA_ERR_NOMEM, "%s: %s", t->what, field);
    memcpy(cat, l, ll);
    memcpy(cat + ll, r, rl);
    int32_t res = ea__tok_lookup(t, cat, ll + rl);
    if (cat != stack) ea_free(cat);
    if (res < 0)
        return ea_err(EA_ERR_FORMAT, "%s: %s: merged token '%s%s' is not in the vocabulary", t->what, field,
                      quote(q, sizeof q, l, ll), quote(q2, sizeof q2, r, rl));
    if ((t->n_merges + 1) * 2 > t->merges_cap) EA_TRY(merges_grow(t));
    uint64_t key = ((uint64_t)(uint32_t)li << 32) | (uint32_t)ri;
    size_t h = mix64(key) & (t->merges_cap - 1);
    while (t->merges[h].key != UINT64_MAX) {
        if (t->merges[h].key == key) return EA_OK; /* duplicate: the first (lowest rank) wins */
        h = (h + 1) & (t->merges_cap - 1);
    }
    t->merges[h].key = key;
    t->merges[h].rank = rank;
    t->merges[h].result = res;
    t->n_merges++;
    return EA_OK;
}

ea_status ea__tok_add_added(ea_tokenizer *t, int32_t id, const char *s, size_t len, int special, int lstrip,
                            int rstrip, int normalized, int single_word, const char *field) {
    if (id < 0 || id >= t->n_vocab) return ea_err(EA_ERR_RANGE, "%s: %s: id %d out of range", t->what, field, id);
    if (len == 0) return ea_err(EA_ERR_FORMAT, "%s: %s: empty content", t->what, field);
    if (len > (1u << 16)) return ea_err(EA_ERR_RANGE, "%s: %s: content of %zu bytes", t->what, field, len);
    /* an added token may re-label an id of the model vocabulary */
    const char *p = ea__tok_intern(t, s, len);
    if (!p) return ea_err(EA_ERR_NOMEM, "%s: %s", t->what, field);
    t->piece[id] = p;
    t->piece_len[id] = (uint32_t)len;
    EA_TRY(map_put(t, p, len, id));
    if (special) t->special[id] = 1;
    if (ea_grow(&t->added, &t->cap_added, (size_t)t->n_added + 1, sizeof *t->added, 8))
        return ea_err(EA_ERR_NOMEM, "%s: added tokens", t->what);
    t->added[t->n_added++] = (ea__added){.content = p,
                                         .len = (uint32_t)len,
                                         .id = id,
                                         .special = (uint8_t)!!special,
                                         .lstrip = (uint8_t)!!lstrip,
                                         .rstrip = (uint8_t)!!rstrip,
                                         .normalized = (uint8_t)!!normalized,
                                         .single_word = (uint8_t)!!single_word};
    return EA_OK;
}

/* \s in tokenizer regexes means Unicode White_Space, as in HF tokenizers
 * (Oniguruma): PCRE2's \s also takes U+180E, JavaScript's also U+FEFF and
 * not U+0085. Outside a class \s and \S become this set and its negation;
 * inside a class \s becomes its members (\S inside a class is left to PCRE2). */
#define WS_SET "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

static ea_status rewrite_ws(const char *p, size_t n, ea_sbuf *o) {
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            if (d == 's' || (d == 'S' && !in_class)) {
                const char *pre = in_class ? "" : d == 's' ? "[" : "[^";
                EA_TRY(text_append(o, pre, strlen(pre)));
                EA_TRY(text_append(o, WS_SET, strlen(WS_SET)));
                if (!in_class) EA_TRY(text_append(o, "]", 1));
            } else {
                EA_TRY(text_append(o, p + i, 2));
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            EA_TRY(text_append(o, p + i, 1));
            /* a ']' right after '[' or '[^' is a literal member */
            if (i + 1 < n && p[i + 1] == '^') EA_TRY(text_append(o, p + ++i, 1));
            if (i + 1 < n && p[i + 1] == ']') EA_TRY(text_append(o, p + ++i, 1));
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') {
            const char *e = memchr(p + i + 2, ']', n - i - 2); /* POSIX class [:name:] */
            size_t l = e ? (size_t)(e - (p + i)) + 1 : 1;
            EA_TRY(text_append(o, p + i, l));
            i += l - 1;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        EA_TRY(text_append(o, p + i, 1));
    }
    return EA_OK;
}

ea_status ea__tok_add_split(ea_tokenizer *t, const char *pattern, size_t len, int literal,
                            ea__split_behavior behavior, int invert, const char *field) {
    int errcode;
    PCRE2_SIZE erroff;
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL refuses UCP */
    ea_sbuf rw = {0};
    if (!literal) {
        ea_status s = rewrite_ws(pattern, len, &rw);
        if (s == EA_OK) s = text_append(&rw, "", 0);
        if (s != EA_OK) {
            ea_sbuf_deinit(&rw);
            return s;
        }
        pattern = rw.data;
        len = rw.len;
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &errcode, &erroff, NULL);
    ea_sbuf_deinit(&rw);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        return ea_err(EA_ERR_FORMAT, "%s: %s: regex error at offset %zu: %s", t->what, field, (size_t)erroff,
                      (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is used if JIT fails */
    ea__split *ns = ea_realloc(t->splits, (size_t)(t->n_splits + 1) * sizeof *ns);
    if (!ns) {
        pcre2_code_free(re);
        return ea_err(EA_ERR_NOMEM, "%s: %s", t->what, field);
    }
    t->splits = ns;
    t->splits[t->n_splits++] = (ea__split){.re = re, .behavior = behavior, .invert = invert};
    return EA_OK;
}

static int added_cmp(const void *a, const void *b) {
    const ea__added *x = a, *y = b;
    if (x->content[0] != y->content[0]) return (unsigned char)x->content[0] < (unsigned char)y->content[0] ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    int c = memcmp(x->content, y->content, x->len);
    if (c) return c;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Decoded bytes of a vocabulary string: each character mapped back through
 * the byte table when all of them are byte-level characters, else the
 * string itself (added tokens such as "<｜begin▁of▁sentence｜>"). */
static ea_status decode_piece(ea_tokenizer *t, int32_t id) {
    const uint8_t *s = (const uint8_t *)t->piece[id];
    size_t n = t->piece_len[id];
    char stack[256];
    char *o = n <= sizeof stack ? stack : ea_malloc(n);
    if (!o) return ea_err(EA_ERR_NOMEM, "%s: token %d", t->what, id);
    size_t on = 0;
    int all = 1;
    for (size_t i = 0; i < n;) {
        int l = ea__utf8_valid_len(s + i, n - i);
        if (l == 0) {
            all = 0;
            break;
        }
        uint32_t cp = ea__utf8_decode(s + i, l);
        if (cp >= 324 || cp_to_byte[cp] < 0) {
            all = 0;
            break;
        }
        o[on++] = (char)cp_to_byte[cp];
        i += (size_t)l;
    }
    const char *p;
    if (all) {
        p = ea__tok_intern(t, o, on);
    } else {
        p = t->piece[id];
        on = n;
    }
    if (o != stack) ea_free(o);
    if (!p) return ea_err(EA_ERR_NOMEM, "%s: token %d", t->what, id);
    t->bytes[id] = p;
    t->bytes_len[id] = (uint32_t)on;
    return EA_OK;
}

ea_status ea__tok_finish(ea_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        int l = ea__utf8_encode(byte_to_cp[b], u);
        t->byte_id[b] = ea__tok_lookup(t, (const char *)u, (size_t)l);
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->piece[id]) EA_TRY(decode_piece(t, id));
    if (t->n_added) qsort(t->added, (size_t)t->n_added, sizeof *t->added, added_cmp);
    t->match_index = ea_malloc((size_t)(t->n_added ? t->n_added : 1) * sizeof *t->match_index);
    if (!t->match_index) return ea_err(EA_ERR_NOMEM, "%s: added tokens", t->what);
    int k = 0;
    for (int b = 0; b < 256; b++) {
        t->match_start[b] = k;
        for (int i = 0; i < t->n_added; i++)
            if ((unsigned char)t->added[i].content[0] == b) t->match_index[k++] = i;
    }
    t->match_start[256] = k;
    for (int i = 0; i < t->n_added; i++) {
        if (t->added[i].normalized && t->nfc) t->any_normalized_added = 1;
        else t->any_raw_added = 1;
    }
    return EA_OK;
}

void ea_tokenizer_destroy(ea_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_splits; i++) pcre2_code_free(t->splits[i].re);
    ea_free(t->splits);
    for (int i = 0; i < EA__CACHE_SLOTS; i++) ea_free(t->cache ? t->cache[i].blob : NULL);
    ea_free(t->cache);
    pthread_mutex_destroy(&t->cache_mu);
    for (int i = 0; i < t->n_pool_blocks; i++) ea_free(t->pool_blocks[i]);
    ea_free(t->pool_blocks);
    ea_free(t->piece);
    ea_free(t->piece_len);
    ea_free(t->bytes);
    ea_free(t->bytes_len);
    ea_free(t->special);
    ea_free(t->map);
    ea_free(t->merges);
    ea_free(t->added);
    ea_free(t->match_index);
    ea_free(t->prefix);
    ea_free(t->suffix);
    ea_free(t->what);
    ea_free(t);
}

/* ------------------------------------------------------------------ */
/* encoding                                                            */

typedef struct {
    size_t off, len; /* into the context's work buffer */
} piece;

typedef struct {
    piece *v;
    size_t n, cap;
} pieces;

typedef struct {
    int32_t rank;
    int32_t left, right; /* symbol positions */
    int32_t lid, rid;
} heap_item;

typedef struct {
    const ea_tokenizer *t;
    unsigned flags;
    ea_tokens *out;
    pcre2_match_data *md;
    ea_sbuf work; /* bytes the pieces point into */
    pieces a, b;
    /* BPE scratch */
    int32_t *sid, *prev, *next;
    size_t sym_cap;
    heap_item *heap;
    size_t heap_n, heap_cap;
    ea_sbuf bl; /* byte-level string of a word (ignore_merges) */
} enc_ctx;

static void ctx_free(enc_ctx *c) {
    if (c->md) pcre2_match_data_free(c->md);
    ea_sbuf_deinit(&c->work);
    ea_sbuf_deinit(&c->bl);
    ea_free(c->a.v);
    ea_free(c->b.v);
    ea_free(c->sid);
    ea_free(c->prev);
    ea_free(c->next);
    ea_free(c->heap);
}

static ea_status pieces_push(pieces *p, size_t off, size_t len) {
    if (len == 0) return EA_OK;
    if (ea_grow(&p->v, &p->cap, p->n + 1, sizeof *p->v, 64)) return ea_err(EA_ERR_NOMEM, "pre-tokenizer pieces");
    p->v[p->n++] = (piece){off, len};
    return EA_OK;
}

static int heap_less(const heap_item *a, const heap_item *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static ea_status heap_push(enc_ctx *c, heap_item it) {
    if (ea_grow(&c->heap, &c->heap_cap, c->heap_n + 1, sizeof *c->heap, 64)) return ea_err(EA_ERR_NOMEM, "bpe heap");
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = it;
    return EA_OK;
}

static heap_item heap_pop(enc_ctx *c) {
    heap_item top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    if (n == 0) return top;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t m = (l + 1 < n && heap_less(&c->heap[l + 1], &c->heap[l])) ? l + 1 : l;
        if (!heap_less(&c->heap[m], &last)) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    c->heap[i] = last;
    return top;
}

static ea_status try_pair(enc_ctx *c, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return EA_OK;
    const ea__merge_slot *m = merge_find(c->t, c->sid[left], c->sid[right]);
    if (!m) return EA_OK;
    return heap_push(c, (heap_item){m->rank, left, right, c->sid[left], c->sid[right]});
}

/* BPE over the bytes w[0..n) -> ids appended to ids (no cache). */
static ea_status bpe_word(enc_ctx *c, const uint8_t *w, size_t n, ea_tokens *ids) {
    const ea_tokenizer *t = c->t;
    if (t->ignore_merges) {
        c->bl.len = 0;
        for (size_t i = 0; i < n; i++) {
            uint8_t u[4];
            int l = ea__utf8_encode(byte_to_cp[w[i]], u);
            EA_TRY(text_append(&c->bl, u, (size_t)l));
        }
        int32_t id = ea__tok_lookup(t, c->bl.data, c->bl.len);
        if (id >= 0) return ea_tokens_push(ids, id);
    }
    if (n > INT32_MAX / 2) return ea_err(EA_ERR_RANGE, "word of %zu bytes", n);
    if (n > c->sym_cap) {
        size_t nc = n < 64 ? 64 : n;
        int32_t *a = ea_realloc(c->sid, nc * sizeof *a);
        if (a) c->sid = a;
        int32_t *b = ea_realloc(c->prev, nc * sizeof *b);
        if (b) c->prev = b;
        int32_t *d = ea_realloc(c->next, nc * sizeof *d);
        if (d) c->next = d;
        if (!a || !b || !d) return ea_err(EA_ERR_NOMEM, "bpe word of %zu bytes", n);
        c->sym_cap = nc;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0)
            return ea_err(EA_ERR_NOT_FOUND, "%s: byte 0x%02x has no token in the vocabulary", t->what, w[i]);
        c->sid[i] = id;
        c->prev[i] = (int32_t)i - 1;
        c->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    c->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) EA_TRY(try_pair(c, (int32_t)i, (int32_t)i + 1));
    while (c->heap_n) {
        heap_item it = heap_pop(c);
        /* stale if either side has merged since: a merged left changes id,
         * a merged-away right is unlinked (sid -1) */
        if (c->sid[it.left] != it.lid || c->next[it.left] != it.right || c->sid[it.right] != it.rid) continue;
        const ea__merge_slot *m = merge_find(t, it.lid, it.rid);
        c->sid[it.left] = m->result;
        int32_t nx = c->next[it.right];
        c->next[it.left] = nx;
        if (nx >= 0) c->prev[nx] = it.left;
        c->sid[it.right] = -1;
        c->next[it.right] = -1;
        EA_TRY(try_pair(c, c->prev[it.left], it.left));
        EA_TRY(try_pair(c, it.left, nx));
    }
    for (int32_t i = 0; i >= 0; i = c->next[i]) EA_TRY(ea_tokens_push(ids, c->sid[i]));
    return EA_OK;
}

/* BPE with the word cache. */
static ea_status bpe_cached(enc_ctx *c, const uint8_t *w, size_t n) {
    ea_tokenizer *t = (ea_tokenizer *)c->t; /* the cache is the one mutable part (cache_mu) */
    if (n == 0) return EA_OK;
    if (t->cache_disabled) return bpe_word(c, w, n, c->out);
    if (n > EA__CACHE_MAX_KEY) {
        pthread_mutex_lock(&t->cache_mu);
        t->cache_misses++;
        pthread_mutex_unlock(&t->cache_mu);
        return bpe_word(c, w, n, c->out);
    }
    uint64_t h = ea_hash64(w, n, 0);
    ea__cache_slot *sl = &t->cache[h & (EA__CACHE_SLOTS - 1)];
    pthread_mutex_lock(&t->cache_mu);
    if (sl->blob && sl->hash == h && sl->key_len == n && memcmp(sl->blob, w, n) == 0) {
        t->cache_hits++;
        ea_status s = tokens_reserve(c->out, sl->n_ids);
        if (s == EA_OK) {
            memcpy(c->out->ids + c->out->n, sl->blob + ((n + 3) & ~(size_t)3), sl->n_ids * sizeof(int32_t));
            c->out->n += sl->n_ids;
        }
        pthread_mutex_unlock(&t->cache_mu);
        return s;
    }
    t->cache_misses++;
    pthread_mutex_unlock(&t->cache_mu);
    size_t start = c->out->n;
    EA_TRY(bpe_word(c, w, n, c->out));
    size_t n_ids = c->out->n - start;
    size_t koff = (n + 3) & ~(size_t)3;
    uint8_t *blob = ea_malloc(koff + n_ids * sizeof(int32_t));
    if (!blob) return EA_OK; /* the cache is an optimisation; the ids are already out */
    memcpy(blob, w, n);
    memcpy(blob + koff, c->out->ids + start, n_ids * sizeof(int32_t));
    pthread_mutex_lock(&t->cache_mu);
    uint8_t *old = sl->blob;
    sl->blob = blob;
    sl->hash = h;
    sl->key_len = (uint32_t)n;
    sl->n_ids = (uint32_t)n_ids;
    pthread_mutex_unlock(&t->cache_mu);
    ea_free(old);
    return EA_OK;
}

/* Apply one Split to every piece of c->a, results into c->b. */
static ea_status apply_split(enc_ctx *c, const ea__split *sp) {
    c->b.n = 0;
    for (size_t pi = 0; pi < c->a.n; pi++) {
        piece p = c->a.v[pi];
        const uint8_t *s = (const uint8_t *)c->work.data + p.off;
        /* matches as (start, end, is_match) spans in order, folded by behavior */
        size_t pos = 0, gap = 0;
        int have_prev = 0, prev_match = 0;
        size_t prev_s = 0, prev_e = 0; /* pending span, for the merging behaviors */
        size_t first_out = c->b.n;
        for (;;) {
            int rc = pos <= p.len ? pcre2_match(sp->re, s, p.len, pos, PCRE2_NO_UTF_CHECK, c->md, NULL) : -1;
            size_t ms, me;
            if (rc >= 0) {
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
                ms = ov[0];
                me = ov[1];
                if (ms > p.len || me > p.len || me < ms) return ea_err(EA_ERR_INTERNAL, "regex match out of range");
                if (me == ms) { /* empty match: step one character and retry */
                    if (ms >= p.len) rc = -1;
                    else {
                        int l = ea__utf8_valid_len(s + ms, p.len - ms);
                        pos = ms + (size_t)(l > 0 ? l : 1);
                        continue;
                    }
                }
            } else if (rc != PCRE2_ERROR_NOMATCH) {
                PCRE2_UCHAR msg[128];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return ea_err(EA_ERR_INTERNAL, "%s: regex match failed: %s", c->t->what, (const char *)msg);
            }
            /* spans: [gap, ms) non-match, [ms, me) match; at the end [gap, len) */
            size_t spans[2][2];
            int is_m[2], n_sp = 0;
            if (rc < 0) {
                ms = me = p.len;
            }
            if (ms > gap) {
                spans[n_sp][0] = gap;
                spans[n_sp][1] = ms;
                is_m[n_sp++] = 0;
            }
            if (me > ms) {
                spans[n_sp][0] = ms;
                spans[n_sp][1] = me;
                is_m[n_sp++] = 1;
            }
            for (int k = 0; k < n_sp; k++) {
                size_t a = spans[k][0], e = spans[k][1];
                int m = is_m[k] ^ sp->invert;
                switch (sp->behavior) {
                case EA__SPLIT_ISOLATED: EA_TRY(pieces_push(&c->b, p.off + a, e - a)); break;
                case EA__SPLIT_REMOVED:
                    if (!m) EA_TRY(pieces_push(&c->b, p.off + a, e - a));
                    break;
                case EA__SPLIT_MERGED_PREV:
                    if (m && !prev_match && c->b.n > first_out) c->b.v[c->b.n - 1].len = p.off + e - c->b.v[c->b.n - 1].off;
                    else EA_TRY(pieces_push(&c->b, p.off + a, e - a));
                    prev_match = m;
                    break;
                case EA__SPLIT_CONTIGUOUS:
                    if (m == prev_match && c->b.n > first_out) c->b.v[c->b.n - 1].len = p.off + e - c->b.v[c->b.n - 1].off;
                    else EA_TRY(pieces_push(&c->b, p.off + a, e - a));
                    prev_match = m;
                    break;
                case EA__SPLIT_MERGED_NEXT:
                    /* a match joins the span after it: hold it until the next span */
                    if (have_prev) {
                        if (prev_match && !m) {
                            prev_e = e; /* [prev_s, e) */
                            EA_TRY(pieces_push(&c->b, p.off + prev_s, prev_e - prev_s));
                            have_prev = 0;
                            prev_match = 0;
                            continue;
                        }
                        EA_TRY(pieces_push(&c->b, p.off + prev_s, prev_e - prev_s));
                        have_prev = 0;
                    }
                    if (m) {
                        have_prev = 1;
                        prev_match = 1;
                        prev_s = a;
                        prev_e = e;
                    } else {
                        EA_TRY(pieces_push(&c->b, p.off + a, e - a));
                        prev_match = 0;
                    }
                    break;
                }
            }
            gap = me;
            if (rc < 0) break;
            pos = me;
        }
        if (have_prev) EA_TRY(pieces_push(&c->b, p.off + prev_s, prev_e - prev_s));
    }
    pieces tmp = c->a;
    c->a = c->b;
    c->b = tmp;
    return EA_OK;
}

/* Pre-tokenize and BPE one piece of (normalized) valid text. */
static ea_status encode_text(enc_ctx *c, const char *s, size_t n) {
    if (n == 0) return EA_OK;
    const ea_tokenizer *t = c->t;
    c->work.len = 0;
    EA_TRY(text_append(&c->work, s, n));
    c->a.n = 0;
    EA_TRY(pieces_push(&c->a, 0, n));
    /* the Split steps, then ByteLevel: its prefix space per piece (as HF
     * does, for every piece not starting with a space), then its regex */
    int n_pre = t->n_splits - (t->bl_regex ? 1 : 0);
    for (int i = 0; i < n_pre; i++) EA_TRY(apply_split(c, &t->splits[i]));
    if (t->bl_prefix_space) {
        for (size_t i = 0; i < c->a.n; i++) {
            if (c->work.data[c->a.v[i].off] == ' ') continue;
            EA_TRY(text_reserve(&c->work, c->a.v[i].len + 1));
            size_t off = c->work.len;
            c->work.data[off] = ' ';
            memcpy(c->work.data + off + 1, c->work.data + c->a.v[i].off, c->a.v[i].len);
            c->work.len += c->a.v[i].len + 1;
            c->a.v[i].off = off;
            c->a.v[i].len += 1;
        }
    }
    if (t->bl_regex) EA_TRY(apply_split(c, &t->splits[t->n_splits - 1]));
    for (size_t i = 0; i < c->a.n; i++)
        EA_TRY(bpe_cached(c, (const uint8_t *)c->work.data + c->a.v[i].off, c->a.v[i].len));
    return EA_OK;
}

static int is_ws(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

/* Bytes of whitespace at the end / start of valid UTF-8 s[0..n). */
static size_t trailing_ws(const char *s, size_t n) {
    size_t e = n;
    while (e > 0) {
        size_t b = e - 1;
        while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80 && e - b < 4) b--;
        int l = ea__utf8_valid_len((const uint8_t *)s + b, e - b);
        if (l <= 0 || (size_t)l != e - b || !is_ws(ea__utf8_decode((const uint8_t *)s + b, l))) break;
        e = b;
    }
    return n - e;
}

static size_t leading_ws(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        int l = ea__utf8_valid_len((const uint8_t *)s + i, n - i);
        if (l <= 0 || !is_ws(ea__utf8_decode((const uint8_t *)s + i, l))) break;
        i += (size_t)l;
    }
    return i;
}

static int is_word_byte(unsigned char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           ch >= 0x80;
}

/* The added token matching at s[i..n), longest first, or NULL. */
static const ea__added *match_added(const ea_tokenizer *t, const char *s, size_t n, size_t i, int normalized_pass,
                                    unsigned flags) {
    unsigned char b = (unsigned char)s[i];
    for (int k = t->match_start[b]; k < t->match_start[b + 1]; k++) {
        const ea__added *a = &t->added[t->match_index[k]];
        if (a->len > n - i || memcmp(s + i, a->content, a->len) != 0) continue;
        int is_norm = a->normalized && t->nfc;
        if (is_norm != normalized_pass) continue;
        if (a->special && !(flags & EA_TOK_PARSE_SPECIAL)) continue;
        if (a->single_word && ((i > 0 && is_word_byte((unsigned char)s[i - 1])) ||
                               (i + a->len < n && is_word_byte((unsigned char)s[i + a->len]))))
            continue;
        return a;
    }
    return NULL;
}

static ea_status encode_valid(enc_ctx *c, const char *s, size_t n, int normalized_pass);

/* Text between added tokens: normalize (first pass only), then either look
 * for normalized added tokens or pre-tokenize. */
static ea_status encode_segment(enc_ctx *c, const char *s, size_t n, int normalized_pass) {
    const ea_tokenizer *t = c->t;
    if (n == 0) return EA_OK;
    if (!normalized_pass && t->nfc && !ea__nfc_trivial(s, n)) {
        char *norm;
        size_t nn;
        EA_TRY(ea__nfc(s, n, &norm, &nn));
        ea_status st = t->any_normalized_added ? encode_valid(c, norm, nn, 1) : encode_text(c, norm, nn);
        ea_free(norm);
        return st;
    }
    if (!normalized_pass && t->any_normalized_added) return encode_valid(c, s, n, 1);
    return encode_text(c, s, n);
}

/* Valid UTF-8: split at added tokens of this pass, encode the rest. */
static ea_status encode_valid(enc_ctx *c, const char *s, size_t n, int normalized_pass) {
    const ea_tokenizer *t = c->t;
    int any = normalized_pass ? t->any_normalized_added : t->any_raw_added;
    if (!any) return encode_segment(c, s, n, normalized_pass);
    size_t seg = 0, i = 0;
    size_t skip_ws_from = (size_t)-1; /* rstrip of the previous token */
    while (i < n) {
        const ea__added *a = t->match_start[(unsigned char)s[i]] < t->match_start[(unsigned char)s[i] + 1]
                                 ? match_added(t, s, n, i, normalized_pass, c->flags)
                                 : NULL;
        if (!a) {
            i++;
            continue;
        }
        size_t end = i;
        if (seg == skip_ws_from) seg += leading_ws(s + seg, end - seg);
        if (a->lstrip) end -= trailing_ws(s + seg, end - seg);
        EA_TRY(encode_segment(c, s + seg, end - seg, normalized_pass));
        EA_TRY(ea_tokens_push(c->out, a->id));
        i += a->len;
        seg = i;
        skip_ws_from = a->rstrip ? seg : (size_t)-1;
    }
    if (seg == skip_ws_from) seg += leading_ws(s + seg, n - seg);
    return encode_segment(c, s + seg, n - seg, normalized_pass);
}

ea_status ea_tokenizer_encode(const ea_tokenizer *t, const char *text, size_t len, unsigned flags, ea_tokens *out) {
    enc_ctx c = {.t = t, .flags = flags, .out = out};
    c.md = pcre2_match_data_create(16, NULL);
    if (!c.md) return ea_err(EA_ERR_NOMEM, "regex match data");
    ea_status s = EA_OK;
    if (flags & EA_TOK_ADD_SPECIAL)
        for (int i = 0; i < t->n_prefix && s == EA_OK; i++) s = ea_tokens_push(out, t->prefix[i]);
    const uint8_t *p = (const uint8_t *)text;
    size_t i = 0;
    while (i < len && s == EA_OK) {
        /* a maximal valid run, then a maximal invalid run */
        size_t j = i;
        while (j < len) {
            int l = ea__utf8_valid_len(p + j, len - j);
            if (l == 0) break;
            j += (size_t)l;
        }
        if (j > i) s = encode_valid(&c, text + i, j - i, 0);
        size_t k = j;
        while (k < len && ea__utf8_valid_len(p + k, len - k) == 0) k++;
        if (k > j && s == EA_OK) s = bpe_cached(&c, p + j, k - j);
        i = k;
    }
    if (flags & EA_TOK_ADD_SPECIAL)
        for (int k = 0; k < t->n_suffix && s == EA_OK; k++) s = ea_tokens_push(out, t->suffix[k]);
    ctx_free(&c);
    return s;
}

/* ------------------------------------------------------------------ */
/* decoding                                                            */

const char *ea_tokenizer_token_bytes(const ea_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab || !t->bytes[id]) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->bytes_len[id];
    return t->bytes[id];
}

int ea_tokenizer_has_token(const ea_tokenizer *t, int32_t id) { return ea_tokenizer_token_bytes(t, id, NULL) != NULL; }

const char *ea_tokenizer_piece(const ea_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab || !t->piece[id]) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->piece_len[id];
    return t->piece[id];
}

int32_t ea_tokenizer_find(const ea_tokenizer *t, const char *s, size_t len) { return ea__tok_lookup(t, s, len); }

ea_status ea_tokenizer_decode_append(const ea_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                                     ea_sbuf *out) {
    size_t start = out->len;
    EA_TRY(text_append(out, "", 0));
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab || !t->bytes[id])
            return ea_err(EA_ERR_RANGE, "token id %d at position %zu is not in the vocabulary (size %d)", id, i,
                          t->n_vocab);
        if ((flags & EA_DETOK_SKIP_SPECIAL) && t->special[id]) continue;
        EA_TRY(text_append(out, t->bytes[id], t->bytes_len[id]));
    }
    if (t->clean_up_spaces) {
        /* HF clean_up_tokenization: " ." -> "." and friends, in place */
        static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
        static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
        for (size_t r = 0; r < sizeof from / sizeof from[0]; r++) {
            size_t fl = strlen(from[r]), tl = strlen(to[r]), w = start;
            for (size_t i = start; i < out->len;) {
                if (out->len - i >= fl && memcmp(out->data + i, from[r], fl) == 0) {
                    memmove(out->data + w, to[r], tl);
                    w += tl;
                    i += fl;
                } else {
                    out->data[w++] = out->data[i++];
                }
            }
            out->len = w;
            out->data[w] = 0;
        }
    }
    return EA_OK;
}

ea_status ea_tokenizer_decode(const ea_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char **text,
                              size_t *len) {
    ea_sbuf b = {0};
    ea_status s = ea_tokenizer_decode_append(t, ids, n, flags, &b);
    if (s != EA_OK) {
        ea_sbuf_deinit(&b);
        return s;
    }
    *text = b.data;
    if (len) *len = b.len;
    return EA_OK;
}

void ea_detok_stream_init(ea_detok_stream *s, unsigned flags) {
    memset(s, 0, sizeof *s);
    s->flags = flags;
}

/* Expected length of a sequence from its lead byte, 0 if it cannot lead. */
static int lead_len(uint8_t c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c < 0xE0) return 2;
    if (c >= 0xE0 && c < 0xF0) return 3;
    if (c >= 0xF0 && c < 0xF5) return 4;
    return 0;
}

/* Could p[0..n) (n < lead_len) still become a valid character? */
static int valid_prefix(const uint8_t *p, int n) {
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        if (i == 1) {
            if (p[0] == 0xE0 && p[1] < 0xA0) return 0;
            if (p[0] == 0xED && p[1] >= 0xA0) return 0;
            if (p[0] == 0xF0 && p[1] < 0x90) return 0;
            if (p[0] == 0xF4 && p[1] >= 0x90) return 0;
        }
    }
    return 1;
}

static const char replacement[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

ea_status ea_detok_stream_push_bytes(ea_detok_stream *s, const char *bytes, size_t n, ea_sbuf *out) {
    const uint8_t *b = (const uint8_t *)bytes;
    EA_TRY(text_append(out, "", 0));
    for (size_t i = 0; i < n; i++) {
        uint8_t c = b[i];
        if (s->n_pending == 0) {
            int l = lead_len(c);
            if (l == 1) {
                /* runs of ASCII go out directly */
                size_t j = i;
                while (j < n && b[j] < 0x80) j++;
                EA_TRY(text_append(out, b + i, j - i));
                i = j - 1;
            } else if (l == 0) {
                EA_TRY(text_append(out, replacement, 3));
            } else {
                s->pending[s->n_pending++] = c;
            }
            continue;
        }
        s->pending[s->n_pending++] = c;
        int need = lead_len(s->pending[0]);
        if (!valid_prefix(s->pending, s->n_pending)) {
            /* the lead (and what followed it) cannot complete: one U+FFFD for
             * the broken prefix, then reconsider this byte on its own */
            s->n_pending = 0;
            EA_TRY(text_append(out, replacement, 3));
            i--;
            continue;
        }
        if (s->n_pending == need) {
            EA_TRY(text_append(out, s->pending, (size_t)need));
            s->n_pending = 0;
        }
    }
    return EA_OK;
}

ea_status ea_detok_stream_push(const ea_tokenizer *t, ea_detok_stream *s, int32_t id, ea_sbuf *out) {
    size_t n;
    const char *b = ea_tokenizer_token_bytes(t, id, &n);
    if (!b) return ea_err(EA_ERR_RANGE, "token id %d is not in the vocabulary (size %d)", id, t->n_vocab);
    if ((s->flags & EA_DETOK_SKIP_SPECIAL) && t->special[id]) return text_append(out, "", 0);
    return ea_detok_stream_push_bytes(s, b, n, out);
}

ea_status ea_detok_stream_flush(ea_detok_stream *s, ea_sbuf *out) {
    EA_TRY(text_append(out, "", 0));
    if (s->n_pending) {
        s->n_pending = 0;
        EA_TRY(text_append(out, replacement, 3));
    }
    return EA_OK;
}

/* ------------------------------------------------------------------ */
/* facts                                                               */

int32_t ea_tokenizer_n_vocab(const ea_tokenizer *t) { return t->n_vocab; }
int32_t ea_tokenizer_bos(const ea_tokenizer *t) { return t->bos; }
int32_t ea_tokenizer_eos(const ea_tokenizer *t) { return t->eos; }
int ea_tokenizer_is_special(const ea_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && t->special[id];
}
int ea_tokenizer_adds_bos(const ea_tokenizer *t) { return t->n_prefix > 0; }

void ea_tokenizer_cache_stats_get(const ea_tokenizer *t, ea_tokenizer_cache_stats *s) {
    ea_tokenizer *m = (ea_tokenizer *)t;
    pthread_mutex_lock(&m->cache_mu);
    s->hits = t->cache_hits;
    s->misses = t->cache_misses;
    pthread_mutex_unlock(&m->cache_mu);
}

void ea_tokenizer_set_cache(ea_tokenizer *t, int disabled) { t->cache_disabled = disabled; }
