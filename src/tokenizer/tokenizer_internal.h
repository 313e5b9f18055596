/*
 * tokenizer_internal.h — the tokenizer's representation, shared by
 * tokenizer.c (tokenizer.json, encode, decode) and tokenizer_vocab.c
 * (GGUF vocab arrays). Not for use outside src/tokenizer/.
 *
 * Invariants once built (ea__tok_finish returned EA_OK):
 *   - every id in [0, n_vocab) with piece[id] != NULL has bytes[id] set;
 *   - byte_id[b] is the id of the byte-level character of byte b, or -1;
 *   - every merge (l, r) has l, r and the concatenation in the vocabulary;
 *   - added[] is sorted by content bytes; match_index lists, for each first
 *     byte, the added tokens starting with it, longest first.
 */
#ifndef EA_TOKENIZER_INTERNAL_H
#define EA_TOKENIZER_INTERNAL_H

#include <jansson.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef enum {
    EA__SPLIT_ISOLATED,
    EA__SPLIT_REMOVED,
    EA__SPLIT_MERGED_PREV,
    EA__SPLIT_MERGED_NEXT,
    EA__SPLIT_CONTIGUOUS,
} ea__split_behavior;

typedef struct {
    pcre2_code *re; /* owns */
    ea__split_behavior behavior;
    int invert;
} ea__split;

typedef struct {
    const char *content; /* views t->pool */
    uint32_t len;
    int32_t id;
    uint8_t special, lstrip, rstrip, normalized, single_word;
} ea__added;

/* string -> id, open addressing; keys view t->pool. */
typedef struct {
    const char *key;
    uint32_t len;
    int32_t id; /* -1: empty slot */
} ea__strmap_slot;

/* (left id, right id) -> merge rank and result id. */
typedef struct {
    uint64_t key; /* (left << 32) | right; UINT64_MAX: empty */
    int32_t rank;
    int32_t result;
} ea__merge_slot;

/* One cached word: key bytes then ids, in one block. */
typedef struct {
    uint64_t hash;
    uint32_t key_len, n_ids;
    uint8_t *blob; /* owns: key_len bytes, then n_ids int32 (aligned) */
} ea__cache_slot;

/* Largest vocabulary accepted (ids 0..EA__MAX_VOCAB-1); real ones are <= ~260k. */
#define EA__MAX_VOCAB (1 << 21)

#define EA__CACHE_SLOTS 65536
#define EA__CACHE_MAX_KEY 256

struct ea_tokenizer {
    char *what; /* owns: source name for errors */

    /* string pool: every piece, decoded byte string and added token content */
    char **pool_blocks; /* owns each block */
    int n_pool_blocks;
    size_t cap_pool_blocks;
    char *pool_cur;
    size_t pool_left;

    int32_t n_vocab;    /* max id + 1 */
    const char **piece; /* views pool: vocabulary string of id, or NULL */
    uint32_t *piece_len;
    const char **bytes; /* views pool: decoded bytes of id */
    uint32_t *bytes_len;
    uint8_t *special; /* 1 if id is a special token */

    ea__strmap_slot *map; /* owns */
    size_t map_cap, map_n;

    ea__merge_slot *merges; /* owns */
    size_t merges_cap, n_merges;
    int ignore_merges;

    int32_t byte_id[256];

    ea__added *added; /* owns: (cap_added) */
    int n_added;
    size_t cap_added;
    int32_t *match_index; /* owns: indices into added[], grouped by first byte */
    int32_t match_start[257];
    uint8_t any_normalized_added, any_raw_added;

    int nfc;
    ea__split *splits; /* owns */
    int n_splits;
    int has_bytelevel;
    int bl_prefix_space;
    int bl_regex; /* the last split is ByteLevel's GPT-2 regex */

    int32_t bos, eos;
    int32_t *prefix; /* owns: ids added before the text (ADD_SPECIAL) */
    int n_prefix;
    int32_t *suffix; /* owns: ids added after */
    int n_suffix;
    int clean_up_spaces;

    pthread_mutex_t cache_mu; /* guards cache and stats */
    ea__cache_slot *cache;    /* owns: EA__CACHE_SLOTS */
    int cache_disabled;
    uint64_t cache_hits, cache_misses;
};

/* Builders (tokenizer.c) used by both sources. */
ea_status ea__tok_alloc(const char *what, ea_tokenizer **out);
const char *ea__tok_intern(ea_tokenizer *t, const char *s, size_t len); /* NULL: no memory */
ea_status ea__tok_set_vocab_size(ea_tokenizer *t, int64_t n);
ea_status ea__tok_set_piece(ea_tokenizer *t, int32_t id, const char *s, size_t len, const char *field);
ea_status ea__tok_add_merge(ea_tokenizer *t, const char *l, size_t ll, const char *r, size_t rl, int32_t rank,
                            const char *field);
ea_status ea__tok_add_added(ea_tokenizer *t, int32_t id, const char *s, size_t len, int special, int lstrip,
                            int rstrip, int normalized, int single_word, const char *field);
ea_status ea__tok_add_split(ea_tokenizer *t, const char *pattern, size_t len, int literal,
                            ea__split_behavior behavior, int invert, const char *field);
/* Called after all pieces, merges and added tokens: byte table, decoded
 * bytes, the added-token index, the merge map. */
ea_status ea__tok_finish(ea_tokenizer *t);
int32_t ea__tok_lookup(const ea_tokenizer *t, const char *s, size_t len);

/* The UTF-8 of byte b's byte-level character into out (1 or 2 bytes); its
 * length. Valid once a tokenizer has been allocated. */
int ea__tok_bytelevel_char(uint8_t b, char *out);

/* Kimi K2's split pattern (tokenization_kimi.py's pat_str; llama.cpp's
 * "kimi-k2"). Its classes [X&&[^\p{Han}]] are written (?:(?!\p{sc:Han})[X]),
 * since PCRE2 has no class intersection, and \p{Han} is \p{sc:Han}: the
 * Script property, as in Rust's regex; PCRE2's \p{Han} also takes the
 * characters whose Script_Extensions list Han, like "。". */
#define EA__KIMI_UPPER "(?:(?!\\p{sc:Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])"
#define EA__KIMI_LOWER "(?:(?!\\p{sc:Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])"
#define EA__KIMI_CONTRACTION "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
#define EA__RE_KIMI_K2                                                                 \
    "[\\p{sc:Han}]+"                                                                   \
    "|[^\\r\\n\\p{L}\\p{N}]?" EA__KIMI_UPPER "*" EA__KIMI_LOWER "+" EA__KIMI_CONTRACTION \
    "|[^\\r\\n\\p{L}\\p{N}]?" EA__KIMI_UPPER "+" EA__KIMI_LOWER "*" EA__KIMI_CONTRACTION \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* 1 if c is one of the special tokens of Kimi's tokenizer class (HF's
 * all_special_tokens: [BOS] [EOS] [UNK] [PAD] and its eight
 * additional_special_tokens); Kimi's other added tokens (tool-call markers,
 * <think>) are text in its output. For tiktoken.model and "kimi-k2" GGUFs. */
int ea__kimi_hf_special(const char *c);

/* A token name in tokenizer_config.json: a string or {"content": ...}; NULL
 * if absent (tokenizer_json.c). */
const char *ea__tok_config_token(const json_t *cfg, const char *key);

/* GGUF (tokenizer_vocab.c). */
ea_status ea__tok_load_gguf(const char *path, ea_tokenizer **out);
/* A directory's tiktoken.model with its tokenizer_config.json (tokenizer_tiktoken.c). */
ea_status ea__tok_load_tiktoken(const char *dir, ea_tokenizer **out);

#endif
