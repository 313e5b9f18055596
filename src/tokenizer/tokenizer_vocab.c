/*
 * tokenizer_vocab.c — a tokenizer from raw vocabulary arrays (GGUF's
 * tokenizer.ggml.*), and ea_tokenizer_load for .gguf files.
 *
 * A GGUF stores no pre-tokenizer description, only a name
 * (tokenizer.ggml.pre) that llama.cpp maps to a fixed list of regexes; each
 * regex of the list splits every piece (matches and the text between them
 * are both kept, HF's "Isolated"), then bytes are mapped byte-level and BPE
 * runs. The table below is that mapping (llama.cpp src/llama-vocab.cpp,
 * llm_tokenizer_bpe and the tokenizer_pre name checks); names not in it are
 * EA_ERR_UNSUPPORTED, as in llama.cpp. "llama-bpe" (Llama-3) also sets
 * ignore_merges: a word that is itself a vocabulary entry is one token.
 *
 * Token types: CONTROL tokens become special added tokens and USER_DEFINED
 * tokens non-special added tokens, both matched in text before BPE (special
 * ones only with EA_TOK_PARSE_SPECIAL), like llama.cpp's special-token
 * partition. "kimi-k2" files mark all of Kimi's added tokens CONTROL; of
 * those only its class's special tokens stay special (ea__kimi_hf_special),
 * so its tool-call markers and <think> reach the parsers as with its
 * tiktoken.model.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "model/gguf.h"
#include "tokenizer/tokenizer_internal.h"

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                                     \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "           \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                                      \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    int ignore_merges;
    int add_bos; /* llama.cpp's default when the GGUF does not say */
    const char *re[6];
} pre_entry;

static const pre_entry pre_table[] = {
    {"default", 0, 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL}},
    {"llama3|llama-v3|llama-bpe|falcon3", 1, 1, {RE_LLAMA3, NULL}},
    {"deepseek-llm", 0, 0,
     {"[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+", }},
    {"deepseek-coder", 0, 0, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}", NULL}},
    {"deepseek-v3", 0, 0,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {"falcon", 0, 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva", 0, 0, {"\\p{N}", RE_GPT2, NULL}},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|roberta-bpe|mpt|olmo|jais", 0, 0, {RE_GPT2, NULL}},
    {"qwen2|stablelm2|deepseek-r1-qwen", 0, 0, {RE_QWEN2, NULL}},
    {"kimi-k2", 0, 0, {EA__RE_KIMI_K2, NULL}},
};

static const pre_entry *find_pre(const char *name) {
    if (!name || !name[0]) name = "default";
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++) {
        const char *p = pre_table[i].names;
        while (*p) {
            const char *e = strchr(p, '|');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == n && memcmp(p, name, n) == 0) return &pre_table[i];
            p += l + (e ? 1 : 0);
        }
    }
    return NULL;
}

static ea_status from_vocab(ea_tokenizer *t, const ea_tokenizer_vocab *v) {
    const pre_entry *pre = find_pre(v->pre);
    if (!pre)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre: pre-tokenizer '%s' is not supported", t->what,
                      v->pre);
    if (v->n_tokens <= 0) return ea_err(EA_ERR_FORMAT, "%s: tokenizer.ggml.tokens: empty", t->what);
    EA_TRY(ea__tok_set_vocab_size(t, v->n_tokens));
    int kimi = v->pre && !strcmp(v->pre, "kimi-k2");
    char f[64];
    for (int64_t i = 0; i < v->n_tokens; i++) {
        int type = v->token_types ? v->token_types[i] : EA_TOKTYPE_NORMAL;
        snprintf(f, sizeof f, "tokenizer.ggml.tokens[%lld]", (long long)i);
        if (!v->tokens[i]) return ea_err(EA_ERR_FORMAT, "%s: %s: missing", t->what, f);
        int special = type == EA_TOKTYPE_CONTROL;
        if (special && kimi) { /* as the tiktoken loader: only HF's special tokens of Kimi's class */
            char c[64];
            snprintf(c, sizeof c, "%.*s", (int)(v->token_lens[i] < 63 ? v->token_lens[i] : 63), v->tokens[i]);
            special = v->token_lens[i] < 63 && ea__kimi_hf_special(c);
        }
        if ((type == EA_TOKTYPE_CONTROL || type == EA_TOKTYPE_USER_DEFINED) && v->token_lens[i] > 0)
            EA_TRY(ea__tok_add_added(t, (int32_t)i, v->tokens[i], v->token_lens[i], special, 0, 0, 0, 0, f));
        else
            EA_TRY(ea__tok_set_piece(t, (int32_t)i, v->tokens[i], v->token_lens[i], f));
    }
    for (int64_t i = 0; i < v->n_merges; i++) {
        snprintf(f, sizeof f, "tokenizer.ggml.merges[%lld]", (long long)i);
        const char *s = v->merges[i];
        size_t n = v->merge_lens[i];
        const char *sp = s && n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        if (!sp || sp + 1 == s + n)
            return ea_err(EA_ERR_FORMAT, "%s: %s: expected \"left right\"", t->what, f);
        if (i >= INT32_MAX) return ea_err(EA_ERR_RANGE, "%s: %s: too many merges", t->what, f);
        EA_TRY(ea__tok_add_merge(t, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp - s) - 1, (int32_t)i, f));
    }
    for (int i = 0; i < 6 && pre->re[i]; i++) {
        snprintf(f, sizeof f, "pre-tokenizer '%s' regex %d", v->pre && v->pre[0] ? v->pre : "default", i);
        EA_TRY(ea__tok_add_split(t, pre->re[i], strlen(pre->re[i]), 0, EA__SPLIT_ISOLATED, 0, f));
    }
    t->ignore_merges = pre->ignore_merges;
    t->has_bytelevel = 1;
    EA_TRY(ea__tok_finish(t));
    if (v->bos_id >= v->n_tokens || v->eos_id >= v->n_tokens)
        return ea_err(EA_ERR_RANGE, "%s: bos/eos id %d/%d past the vocabulary (%lld)", t->what, v->bos_id, v->eos_id,
                      (long long)v->n_tokens);
    t->bos = v->bos_id >= 0 ? v->bos_id : -1;
    t->eos = v->eos_id >= 0 ? v->eos_id : -1;
    int add_bos = v->add_bos < 0 ? pre->add_bos : v->add_bos;
    if (add_bos && t->bos >= 0) {
        t->prefix = ea_malloc(sizeof *t->prefix);
        if (!t->prefix) return ea_err(EA_ERR_NOMEM, "%s", t->what);
        t->prefix[0] = t->bos;
        t->n_prefix = 1;
    }
    if (v->add_eos > 0 && t->eos >= 0) {
        t->suffix = ea_malloc(sizeof *t->suffix);
        if (!t->suffix) return ea_err(EA_ERR_NOMEM, "%s", t->what);
        t->suffix[0] = t->eos;
        t->n_suffix = 1;
    }
    return EA_OK;
}

ea_status ea_tokenizer_from_vocab(const ea_tokenizer_vocab *v, ea_tokenizer **out) {
    *out = NULL;
    ea_tokenizer *t;
    EA_TRY(ea__tok_alloc(v->what ? v->what : "vocab", &t));
    ea_status s = from_vocab(t, v);
    if (s != EA_OK) {
        ea_tokenizer_destroy(t);
        return s;
    }
    *out = t;
    return EA_OK;
}

/* A string array of the GGUF as (pointer, length) arrays (OUT: owned arrays). */
static ea_status gguf_strings(const ea_gguf *g, const char *key, int64_t *n, const char ***s, size_t **lens) {
    ea_gguf_type et;
    uint64_t cnt;
    EA_TRY(ea_gguf_get_arr(g, key, &et, &cnt));
    if (et != EA_GGUF_STRING) return ea_err(EA_ERR_FORMAT, "%s: %s: not an array of strings", g->path, key);
    if (cnt > (1u << 24)) return ea_err(EA_ERR_RANGE, "%s: %s: %llu entries", g->path, key, (unsigned long long)cnt);
    int kv = ea_gguf_find_kv(g, key);
    *s = ea_calloc(cnt ? cnt : 1, sizeof **s);
    *lens = ea_calloc(cnt ? cnt : 1, sizeof **lens);
    if (!*s || !*lens) return ea_err(EA_ERR_NOMEM, "%s: %s", g->path, key);
    for (uint64_t i = 0; i < cnt; i++) EA_TRY(ea_gguf_arr_str(g, kv, i, &(*s)[i], &(*lens)[i]));
    *n = (int64_t)cnt;
    return EA_OK;
}

static ea_status load_gguf(ea_gguf *g, ea_tokenizer **out) {
    const char *model = NULL;
    ea_status s = ea_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (s != EA_OK) return s;
    if (strcmp(model, "gpt2") != 0)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model: '%s' is not supported (gpt2 byte-level BPE)",
                      g->path, model);
    ea_tokenizer_vocab v = {.bos_id = -1, .eos_id = -1, .add_bos = -1, .add_eos = -1, .what = g->path};
    const char **toks = NULL, **merges = NULL;
    size_t *tl = NULL, *ml = NULL;
    int32_t *types = NULL;
    s = gguf_strings(g, "tokenizer.ggml.tokens", &v.n_tokens, &toks, &tl);
    if (s == EA_OK) s = gguf_strings(g, "tokenizer.ggml.merges", &v.n_merges, &merges, &ml);
    int kv = ea_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (s == EA_OK && kv >= 0) {
        ea_gguf_type et;
        uint64_t cnt;
        s = ea_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &cnt);
        if (s == EA_OK && cnt != (uint64_t)v.n_tokens)
            s = ea_err(EA_ERR_FORMAT, "%s: tokenizer.ggml.token_type: %llu entries for %lld tokens", g->path,
                       (unsigned long long)cnt, (long long)v.n_tokens);
        if (s == EA_OK && !(types = ea_malloc((size_t)(cnt ? cnt : 1) * sizeof *types)))
            s = ea_err(EA_ERR_NOMEM, "%s: token types", g->path);
        for (uint64_t i = 0; s == EA_OK && i < cnt; i++) {
            int64_t x;
            s = ea_gguf_arr_i64(g, kv, i, &x);
            types[i] = (int32_t)(x < 0 || x > 6 ? EA_TOKTYPE_NORMAL : x);
        }
    }
    const char *pre = NULL;
    if (s == EA_OK && ea_gguf_find_kv(g, "tokenizer.ggml.pre") >= 0) s = ea_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    uint32_t u;
    int b;
    if (s == EA_OK && ea_gguf_find_kv(g, "tokenizer.ggml.bos_token_id") >= 0 &&
        (s = ea_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u)) == EA_OK)
        v.bos_id = u > INT32_MAX ? INT32_MAX : (int32_t)u;
    if (s == EA_OK && ea_gguf_find_kv(g, "tokenizer.ggml.eos_token_id") >= 0 &&
        (s = ea_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &u)) == EA_OK)
        v.eos_id = u > INT32_MAX ? INT32_MAX : (int32_t)u;
    if (s == EA_OK && ea_gguf_find_kv(g, "tokenizer.ggml.add_bos_token") >= 0 &&
        (s = ea_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) == EA_OK)
        v.add_bos = b;
    if (s == EA_OK && ea_gguf_find_kv(g, "tokenizer.ggml.add_eos_token") >= 0 &&
        (s = ea_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) == EA_OK)
        v.add_eos = b;
    if (s == EA_OK) {
        v.tokens = toks;
        v.token_lens = tl;
        v.token_types = types;
        v.merges = merges;
        v.merge_lens = ml;
        v.pre = pre;
        s = ea_tokenizer_from_vocab(&v, out);
    }
    ea_free(toks);
    ea_free(tl);
    ea_free(merges);
    ea_free(ml);
    ea_free(types);
    return s;
}

ea_status ea__tok_load_gguf(const char *path, ea_tokenizer **out) {
    ea_gguf *g;
    EA_TRY(ea_gguf_open(path, &g));
    ea_status s = load_gguf(g, out);
    ea_gguf_close(g);
    return s;
}
