/*
 * tokenizer_tiktoken.c — a tokenizer from a tiktoken BPE file (Kimi K2's
 * tiktoken.model) and the tokenizer_config.json beside it.
 *
 * The file is one token per line, "<base64 of its bytes> <rank>"; the rank
 * is the token's id and ranks run 0..n-1. tiktoken encodes a piece that is
 * itself a token as that token, else merges, among adjacent parts, the pair
 * whose concatenation has the lowest rank (leftmost on a tie). That is our
 * byte-level BPE with ignore_merges and one merge (l, r) -> l+r of rank
 * rank(l+r) for every way of cutting a token into two tokens, so the file
 * becomes vocabulary strings (bytes through the GPT-2 byte table, as HF's
 * conversion writes them) and those merges.
 *
 * What the file does not say lives in the model's Python tokenizer class,
 * named by tokenizer_config.json's auto_map: the split pattern and the
 * special tokens. Only Kimi's class (tokenization_kimi.TikTokenTokenizer) is
 * known: its pattern (EA__RE_KIMI_K2), and 256 added ids after the file's
 * tokens, named by added_tokens_decoder or "<|reserved_token_ID|>" (tiktoken's
 * special tokens, recognised anywhere in the text: Kimi encodes with
 * allowed_special "all"). Of those, HF's special tokens (is_special) are
 * skipped in output; the others, such as the tool-call markers, are text.
 * Nothing is added before or after a text. Kimi's
 * encode also cuts runs of more than 25,000 whitespace or non-whitespace
 * characters before tiktoken sees them; we do not (docs/decisions.md).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/util.h"
#include "tokenizer/tokenizer_internal.h"

#define KIMI_CLASS "tokenization_kimi.TikTokenTokenizer"
#define KIMI_N_SPECIAL 256
#define KIMI_BOS "[BOS]" /* the class's defaults */
#define KIMI_EOS "[EOS]"

/* tokenizer_config.json's AutoTokenizer class: a string or [slow, fast]. */
static const char *auto_tokenizer(const json_t *cfg) {
    const json_t *v = json_object_get(json_object_get(cfg, "auto_map"), "AutoTokenizer");
    if (json_is_array(v)) v = json_array_get(v, 0);
    return json_string_value(v);
}

int ea__kimi_hf_special(const char *c) {
    static const char *const names[] = {
        KIMI_BOS,     KIMI_EOS,      "[UNK]",           "[PAD]", /* bos, eos, unk, pad */
        "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|start_header_id|>", "<|end_header_id|>", "[EOT]",
        "<|im_system|>", "<|im_middle|>", /* the class's additional_special_tokens */
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i], c)) return 1;
    return 0;
}

/* Whether token text c is one of HF's special tokens (all_special_tokens: the
 * config's bos/eos/unk/pad and additional_special_tokens; Kimi's class's
 * when the config names none). Those are skipped in output text and
 * recognised in input only when special tokens are; the other added tokens
 * (tool-call markers, <think>, reserved ids) are ordinary text both ways, as
 * in HF's tokenizer. */
static int is_special(const json_t *cfg, const char *c) {
    const char *const named[4] = {ea__tok_config_token(cfg, "bos_token"), ea__tok_config_token(cfg, "eos_token"),
                                  ea__tok_config_token(cfg, "unk_token"), ea__tok_config_token(cfg, "pad_token")};
    for (int i = 0; i < 4; i++)
        if (named[i] && !strcmp(named[i], c)) return 1;
    const json_t *extra = json_object_get(cfg, "additional_special_tokens");
    if (!json_is_array(extra)) return ea__kimi_hf_special(c);
    size_t i;
    const json_t *e;
    json_array_foreach(extra, i, e) {
        const char *x = json_is_object(e) ? json_string_value(json_object_get(e, "content")) : json_string_value(e);
        if (x && !strcmp(x, c)) return 1;
    }
    return 0;
}

typedef struct {
    uint8_t *bytes; /* owns: all tokens' bytes, back to back */
    size_t *off;    /* owns: by rank, n + 1 entries */
    int32_t n;
} tt_file;

static void tt_free(tt_file *f) {
    ea_free(f->bytes);
    ea_free(f->off);
}

/* The next line of s[*p..len) without "\r\n" (OUT: *l, *ll); 0 at the end. */
static int next_line(const char *s, size_t len, size_t *p, const char **l, size_t *ll) {
    if (*p >= len) return 0;
    const char *e = memchr(s + *p, '\n', len - *p);
    *l = s + *p;
    *ll = e ? (size_t)(e - *l) : len - *p;
    *p += *ll + 1;
    if (*ll && (*l)[*ll - 1] == '\r') (*ll)--;
    return 1;
}

/* Parse the lines of tiktoken.model into tokens by rank. */
static ea_status tt_parse(const char *path, const char *s, size_t len, tt_file *f) {
    const char *l;
    size_t ll, p = 0, n = 0;
    while (next_line(s, len, &p, &l, &ll)) n += ll > 0; /* tiktoken skips empty lines */
    if (n == 0) return ea_err(EA_ERR_FORMAT, "%s: no tokens", path);
    if (n >= EA__MAX_VOCAB) return ea_err(EA_ERR_RANGE, "%s: %zu tokens", path, n);
    uint8_t *raw = ea_malloc(len); /* decoded base64 is shorter than its text */
    size_t *start = ea_malloc(n * sizeof *start), *blen = ea_calloc(n, sizeof *blen);
    f->bytes = ea_malloc(len);
    f->off = ea_malloc((n + 1) * sizeof *f->off);
    ea_status st = (raw && start && blen && f->bytes && f->off) ? EA_OK : ea_err(EA_ERR_NOMEM, "%s", path);
    size_t used = 0, line = 0;
    p = 0;
    while (st == EA_OK && next_line(s, len, &p, &l, &ll)) {
        line++;
        if (ll == 0) continue;
        /* the text is not NUL-terminated: the rank's digits are read by hand */
        const char *sp = memchr(l, ' ', ll), *d = sp ? sp + 1 : l + ll;
        long long rank = d < l + ll ? 0 : -1;
        for (; d < l + ll && *d >= '0' && *d <= '9'; d++) rank = rank > EA__MAX_VOCAB ? rank : rank * 10 + (*d - '0');
        size_t got = 0;
        if (rank < 0 || d != l + ll)
            st = ea_err(EA_ERR_FORMAT, "%s: line %zu: expected \"<base64> <rank>\"", path, line);
        else if (ea_base64_decode(l, (size_t)(sp - l), raw + used, &got) != EA_OK || got == 0)
            st = ea_err(EA_ERR_FORMAT, "%s: line %zu: the token is not base64 of one or more bytes", path, line);
        else if ((size_t)rank >= n || blen[rank])
            st = ea_err(EA_ERR_FORMAT, "%s: line %zu: rank %lld %s (ranks run 0..%zu, once each)", path, line, rank,
                        (size_t)rank >= n ? "is out of range" : "repeats", n - 1);
        if (st != EA_OK) break;
        start[rank] = used;
        blen[rank] = got;
        used += got;
    }
    /* n lines, n distinct ranks below n: every rank is there. Pack by rank. */
    size_t o = 0;
    for (size_t r = 0; st == EA_OK && r < n; r++) {
        memcpy(f->bytes + o, raw + start[r], blen[r]);
        f->off[r] = o;
        o += blen[r];
    }
    if (st == EA_OK) {
        f->off[n] = o;
        f->n = (int32_t)n;
    }
    ea_free(raw);
    ea_free(start);
    ea_free(blen);
    return st;
}

/* The byte-level string of b[0..n) into out (2n bytes at most); its length.
 * cut[i] is where byte i's character starts. */
static size_t bytelevel(const uint8_t *b, size_t n, char *out, uint32_t *cut) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        cut[i] = (uint32_t)o;
        o += ea__tok_bytelevel_char(b[i], out + o);
    }
    cut[n] = (uint32_t)o;
    return o;
}

static ea_status build(ea_tokenizer *t, const tt_file *f, const json_t *cfg) {
    const json_t *dec = json_object_get(cfg, "added_tokens_decoder");
    int32_t n_special = KIMI_N_SPECIAL;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)dec, key, v) {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (*end || id < f->n) continue; /* ids inside the file are its own tokens */
        if (id >= EA__MAX_VOCAB) return ea_err(EA_ERR_RANGE, "%s: added_tokens_decoder: id %lld", t->what, id);
        if (id - f->n + 1 > n_special) n_special = (int32_t)(id - f->n + 1);
    }
    EA_TRY(ea__tok_set_vocab_size(t, (int64_t)f->n + n_special));
    size_t max_len = 0;
    for (int32_t r = 0; r < f->n; r++)
        if (f->off[r + 1] - f->off[r] > max_len) max_len = f->off[r + 1] - f->off[r];
    char *piece = ea_malloc(2 * max_len + 1);
    uint32_t *cut = ea_malloc((max_len + 1) * sizeof *cut);
    ea_status st = piece && cut ? EA_OK : ea_err(EA_ERR_NOMEM, "%s", t->what);
    char field[64];
    for (int32_t r = 0; r < f->n && st == EA_OK; r++) {
        size_t pl = bytelevel(f->bytes + f->off[r], f->off[r + 1] - f->off[r], piece, cut);
        int32_t prev = ea__tok_lookup(t, piece, pl);
        snprintf(field, sizeof field, "rank %d", r);
        if (prev >= 0)
            st = ea_err(EA_ERR_FORMAT, "%s: %s: the same bytes as rank %d", t->what, field, prev);
        else
            st = ea__tok_set_piece(t, r, piece, pl, field);
    }
    /* every cut of a token into two tokens merges at the token's rank */
    for (int32_t r = 0; r < f->n && st == EA_OK; r++) {
        size_t nb = f->off[r + 1] - f->off[r];
        if (nb < 2) continue;
        size_t pl = bytelevel(f->bytes + f->off[r], nb, piece, cut);
        for (size_t k = 1; k < nb && st == EA_OK; k++) {
            if (ea__tok_lookup(t, piece, cut[k]) < 0 || ea__tok_lookup(t, piece + cut[k], pl - cut[k]) < 0) continue;
            snprintf(field, sizeof field, "rank %d", r);
            st = ea__tok_add_merge(t, piece, cut[k], piece + cut[k], pl - cut[k], r, field);
        }
    }
    ea_free(piece);
    ea_free(cut);
    for (int32_t i = 0; i < n_special && st == EA_OK; i++) {
        int32_t id = f->n + i;
        char k[16], name[48];
        snprintf(k, sizeof k, "%d", id);
        const char *c = json_string_value(json_object_get(json_object_get(dec, k), "content"));
        if (!c) {
            snprintf(name, sizeof name, "<|reserved_token_%d|>", id);
            c = name;
        }
        snprintf(field, sizeof field, "added_tokens_decoder[\"%d\"]", id);
        st = ea__tok_add_added(t, id, c, strlen(c), is_special(cfg, c), 0, 0, 0, 0, field);
    }
    if (st != EA_OK) return st;
    EA_TRY(ea__tok_add_split(t, EA__RE_KIMI_K2, strlen(EA__RE_KIMI_K2), 0, EA__SPLIT_ISOLATED, 0, "Kimi pattern"));
    t->ignore_merges = 1;
    t->has_bytelevel = 1;
    EA_TRY(ea__tok_finish(t));
    const char *bos = ea__tok_config_token(cfg, "bos_token"), *eos = ea__tok_config_token(cfg, "eos_token");
    t->bos = ea__tok_lookup(t, bos ? bos : KIMI_BOS, strlen(bos ? bos : KIMI_BOS));
    t->eos = ea__tok_lookup(t, eos ? eos : KIMI_EOS, strlen(eos ? eos : KIMI_EOS));
    t->clean_up_spaces = 0;
    return EA_OK;
}

ea_status ea_tokenizer_from_tiktoken(const char *model, size_t model_len, const char *config, size_t config_len,
                                     const char *what, ea_tokenizer **out) {
    *out = NULL;
    what = what ? what : "tiktoken.model";
    json_t *cfg;
    EA_TRY(ea_json_parse(config, config_len, "tokenizer_config.json", &cfg));
    const char *cls = json_is_object(cfg) ? auto_tokenizer(cfg) : NULL;
    if (!cls || strcmp(cls, KIMI_CLASS) != 0) {
        ea_status s = ea_err(EA_ERR_UNSUPPORTED,
                             "tokenizer_config.json: auto_map.AutoTokenizer: tiktoken tokenizer class '%s' is not "
                             "supported (only Kimi's %s: a tiktoken file's split pattern lives in its Python class)",
                             cls ? cls : "(none)", KIMI_CLASS);
        json_decref(cfg);
        return s;
    }
    tt_file f = {0};
    ea_tokenizer *t = NULL;
    ea_status s = tt_parse(what, model, model_len, &f);
    if (s == EA_OK) s = ea__tok_alloc(what, &t);
    if (s == EA_OK) s = build(t, &f, cfg);
    tt_free(&f);
    json_decref(cfg);
    if (s != EA_OK) {
        ea_tokenizer_destroy(t);
        return s;
    }
    *out = t;
    return EA_OK;
}

ea_status ea__tok_load_tiktoken(const char *dir, ea_tokenizer **out) {
    *out = NULL;
    char mp[4096], cp[4096];
    ea_path_join(mp, sizeof mp, dir, "tiktoken.model");
    ea_path_join(cp, sizeof cp, dir, "tokenizer_config.json");
    if (!ea_file_exists(cp))
        return ea_err(EA_ERR_NOT_FOUND,
                      "%s: tiktoken.model needs tokenizer_config.json beside it (its class says how text is split)",
                      dir);
    char *model = NULL, *config = NULL;
    size_t ml = 0, cl = 0;
    ea_status s = ea_read_file(mp, &model, &ml);
    if (s == EA_OK) s = ea_read_file(cp, &config, &cl);
    if (s == EA_OK) s = ea_tokenizer_from_tiktoken(model, ml, config, cl, mp, out);
    ea_free(model);
    ea_free(config);
    return s;
}
