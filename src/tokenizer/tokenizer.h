/*
 * tokenizer.h — byte-level BPE tokenizer: text <-> token ids.
 *
 * Sources: a Hugging Face tokenizer.json (+ tokenizer_config.json beside it),
 * a tiktoken.model (+ tokenizer_config.json; Kimi K2) or the tokenizer.ggml.*
 * keys of a GGUF file. What is supported is what
 * the byte-level BPE models eaas serves use (Qwen2/3, DeepSeek-V2/V3,
 * Llama-3, OLMoE, Mixtral-in-GGUF-gpt2 form):
 *
 *   model          BPE: vocab, merges ("a b" strings or [a, b] pairs),
 *                  ignore_merges; byte_fallback/dropout/subword affixes are
 *                  refused (EA_ERR_UNSUPPORTED naming the field)
 *   normalizer     null, NFC, Sequence of those
 *   pre_tokenizer  Sequence of Split (Regex via PCRE2 with UTF+UCP, or
 *                  String; behaviors Isolated, Removed, MergedWithPrevious,
 *                  MergedWithNext, Contiguous; invert) and ByteLevel
 *                  (add_prefix_space, use_regex with the GPT-2 regex)
 *   added_tokens   matched in the text before pre-tokenization, leftmost
 *                  then longest; `normalized` ones in the normalized text;
 *                  lstrip/rstrip absorb whitespace; special or not
 *   post_processor ByteLevel (nothing added), TemplateProcessing (its
 *                  `single` template), else tokenizer_config's
 *                  add_bos_token/add_eos_token
 *   decoder        ByteLevel
 *
 * Encoding pipeline for one text:
 *   bytes -> split at invalid UTF-8 (each maximal invalid run is a pre-token
 *   of its own, encoded with byte tokens, so any byte string round-trips)
 *   -> added tokens (raw text) -> normalizer -> added tokens (normalized)
 *   -> Split regexes -> ByteLevel -> BPE (with a word cache) -> ids
 *   -> BOS/EOS if EA_TOK_ADD_SPECIAL.
 *
 * Decoding: each id maps to the bytes it stands for (byte-level characters
 * mapped back; added tokens whose characters are not all byte-level
 * characters give their UTF-8 content). ea_tokenizer_decode returns those
 * bytes as they are (the inverse of encode, invalid UTF-8 included); the
 * streaming decoder ea_detok_stream only ever emits whole, valid UTF-8
 * characters and turns bytes that can never complete one into U+FFFD.
 *
 * Thread safety: after creation a tokenizer is read-only except for the
 * BPE word cache, which has its own mutex; encode/decode may be called from
 * many threads at once.
 *
 *   ea_tokenizer *t;
 *   EA_TRY(ea_tokenizer_load("models/qwen3", &t));   // dir, tokenizer.json or .gguf
 *   ea_tokens ids = {0};
 *   EA_TRY(ea_tokenizer_encode(t, "Hello", 5, EA_TOK_ADD_SPECIAL | EA_TOK_PARSE_SPECIAL, &ids));
 *   char *text; size_t n;
 *   EA_TRY(ea_tokenizer_decode(t, ids.ids, ids.n, 0, &text, &n));
 *   ea_free(text); ea_tokens_free(&ids); ea_tokenizer_destroy(t);
 */
#ifndef EA_TOKENIZER_H
#define EA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/sbuf.h"
#include "base/status.h"

typedef struct ea_tokenizer ea_tokenizer;

/* A growable id array the caller owns (zero-initialize; ea_tokens_free). */
typedef struct {
    int32_t *ids; /* owns */
    size_t n, cap;
} ea_tokens;
void ea_tokens_free(ea_tokens *t);
ea_status ea_tokens_push(ea_tokens *t, int32_t id);

/* Append s[0..n) to b (base/sbuf.h) as a JSON string literal (quotes included).
 * Invalid UTF-8 bytes become U+FFFD, since JSON text must be valid Unicode. */
ea_status ea_tok_append_json(ea_sbuf *b, const char *s, size_t n);

/* ---- loading ---- */

/* path: a directory with tokenizer.json (and optionally tokenizer_config.json),
 * a tokenizer.json file (its directory is searched for tokenizer_config.json),
 * or a GGUF file (recognized by its magic, whatever its name). */
ea_status ea_tokenizer_load(const char *path, ea_tokenizer **out);

/* From tokenizer.json text and optional tokenizer_config.json text (NULL, 0
 * if none). `what` names the source in errors (e.g. the file path). */
ea_status ea_tokenizer_from_json(const char *json, size_t json_len, const char *config, size_t config_len,
                                 const char *what, ea_tokenizer **out);

/* GGUF token types (tokenizer.ggml.token_type). */
enum {
    EA_TOKTYPE_NORMAL = 1,
    EA_TOKTYPE_UNKNOWN = 2,
    EA_TOKTYPE_CONTROL = 3,
    EA_TOKTYPE_USER_DEFINED = 4,
    EA_TOKTYPE_UNUSED = 5,
    EA_TOKTYPE_BYTE = 6,
};

/* Same from a tiktoken BPE file's text (lines "<base64> <rank>") and the
 * tokenizer_config.json naming its class (Kimi K2's; tokenizer_tiktoken.c). */
ea_status ea_tokenizer_from_tiktoken(const char *model, size_t model_len, const char *config, size_t config_len,
                                     const char *what, ea_tokenizer **out);

/* Raw vocabulary arrays, as a GGUF stores them (tokenizer.ggml.*). Strings
 * are (pointer, length) and need not be NUL-terminated; all are borrowed for
 * the call only. token_type may be NULL (all normal). Tokens of type CONTROL
 * become special added tokens, USER_DEFINED non-special added tokens (both
 * matched in text like llama.cpp does). `pre` is tokenizer.ggml.pre (NULL or
 * "" = "default") and picks the pre-tokenizer regexes as llama.cpp does. */
typedef struct {
    int64_t n_tokens;
    const char *const *tokens;
    const size_t *token_lens;
    const int32_t *token_types;
    int64_t n_merges;
    const char *const *merges; /* "left right" */
    const size_t *merge_lens;
    const char *pre;
    int32_t bos_id, eos_id; /* -1 if none */
    int add_bos, add_eos;   /* 1/0, or -1: llama.cpp's default for `pre` */
    const char *what; /* names the source in errors */
} ea_tokenizer_vocab;
ea_status ea_tokenizer_from_vocab(const ea_tokenizer_vocab *v, ea_tokenizer **out);

void ea_tokenizer_destroy(ea_tokenizer *t);

/* ---- encoding ---- */

enum {
    EA_TOK_ADD_SPECIAL = 1u << 0,   /* add BOS/EOS as the post-processor / config says */
    EA_TOK_PARSE_SPECIAL = 1u << 1, /* recognize special added tokens in the text
                                       (non-special added tokens are always recognized) */
};
/* Append the ids of text[0..len) to out (which may already hold ids). */
ea_status ea_tokenizer_encode(const ea_tokenizer *t, const char *text, size_t len, unsigned flags, ea_tokens *out);

/* ---- decoding ---- */

enum {
    EA_DETOK_SKIP_SPECIAL = 1u << 0, /* leave out special tokens (BOS, <|im_end|>, ...) */
};
/* The bytes of ids, appended to out. An id outside the vocabulary is
 * EA_ERR_RANGE naming it. */
ea_status ea_tokenizer_decode_append(const ea_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                                     ea_sbuf *out);
/* Same into a new NUL-terminated buffer (OUT: *text, *len; ea_free). */
ea_status ea_tokenizer_decode(const ea_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char **text,
                              size_t *len);

/* The bytes token id stands for (a view owned by t; *len may be 0), or NULL
 * if id is not in the vocabulary. */
const char *ea_tokenizer_token_bytes(const ea_tokenizer *t, int32_t id, size_t *len);
/* 1 if id stands for a token of this tokenizer (ea_tokenizer_token_bytes is not NULL).
 * The one rule for ids: a model's vocabulary may have more rows than the
 * tokenizer has tokens (padding); ids without a token are never sampled,
 * refused as prompt ids and by /detokenize. */
int ea_tokenizer_has_token(const ea_tokenizer *t, int32_t id);
/* The vocabulary string of id (byte-level characters, e.g. "Ġhello"), or NULL. */
const char *ea_tokenizer_piece(const ea_tokenizer *t, int32_t id, size_t *len);
/* The id whose vocabulary string (or added-token content) is exactly s, or -1. */
int32_t ea_tokenizer_find(const ea_tokenizer *t, const char *s, size_t len);

/* Streaming decoder: feeds ids one at a time and emits only whole UTF-8
 * characters; up to 3 bytes of an unfinished character wait in `pending`.
 * Bytes that cannot start or continue a character are emitted as U+FFFD
 * (EF BF BD), so the output is always valid UTF-8. Caller-owned, no heap. */
typedef struct {
    uint8_t pending[4];
    int n_pending;
    unsigned flags; /* EA_DETOK_* */
} ea_detok_stream;
void ea_detok_stream_init(ea_detok_stream *s, unsigned flags);
/* Append the complete characters now available after token id. */
ea_status ea_detok_stream_push(const ea_tokenizer *t, ea_detok_stream *s, int32_t id, ea_sbuf *out);
/* Feed raw bytes (the same logic, for callers that already have bytes). */
ea_status ea_detok_stream_push_bytes(ea_detok_stream *s, const char *bytes, size_t n, ea_sbuf *out);
/* End of stream: a pending partial character becomes U+FFFD. */
ea_status ea_detok_stream_flush(ea_detok_stream *s, ea_sbuf *out);

/* ---- facts ---- */

int32_t ea_tokenizer_n_vocab(const ea_tokenizer *t); /* max id + 1 */
int32_t ea_tokenizer_bos(const ea_tokenizer *t);     /* -1 if none */
int32_t ea_tokenizer_eos(const ea_tokenizer *t);     /* -1 if none */
int ea_tokenizer_is_special(const ea_tokenizer *t, int32_t id);
/* Whether EA_TOK_ADD_SPECIAL adds anything (a BOS, an EOS, a template). */
int ea_tokenizer_adds_bos(const ea_tokenizer *t);

/* Word-cache statistics (for benchmarks). */
typedef struct {
    uint64_t hits, misses;
} ea_tokenizer_cache_stats;
void ea_tokenizer_cache_stats_get(const ea_tokenizer *t, ea_tokenizer_cache_stats *s);
/* Turn the word cache off (1) or on (0); for benchmarks and tests. */
void ea_tokenizer_set_cache(ea_tokenizer *t, int disabled);

#endif
