/*
 * tokenizer_json.c — a tokenizer from Hugging Face tokenizer.json (+
 * tokenizer_config.json), and ea_tokenizer_load for directories and files.
 *
 * Reading order: model (vocabulary size = max id over vocab and
 * added_tokens, then vocab, merges, added tokens), normalizer,
 * pre_tokenizer, decoder, post_processor; then the builders' finish step;
 * then tokenizer_config.json (bos/eos names, add_bos_token/add_eos_token
 * unless a TemplateProcessing decided, clean_up_tokenization_spaces,
 * additional_special_tokens). Every error names the file and the JSON path
 * of the field ("model.merges[12]", "pre_tokenizer.pretokenizers[0].pattern.Regex").
 * What is supported is listed in tokenizer.h.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "model/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer_internal.h"

#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static int jbool(const json_t *o, const char *k, int dflt) {
    const json_t *v = json_object_get(o, k);
    if (json_is_boolean(v)) return json_is_true(v);
    return dflt;
}

static ea_status load_normalizer(ea_tokenizer *t, const json_t *n, const char *path) {
    if (!n || json_is_null(n)) return EA_OK;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) return ea_err(EA_ERR_FORMAT, "%s: %s.type: missing or not a string", t->what, path);
    if (strcmp(type, "NFC") == 0) {
        t->nfc = 1;
        return EA_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(n, "normalizers");
        if (!json_is_array(arr)) return ea_err(EA_ERR_FORMAT, "%s: %s.normalizers: not an array", t->what, path);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char p[128];
            snprintf(p, sizeof p, "%s.normalizers[%zu]", path, i);
            EA_TRY(load_normalizer(t, json_array_get(arr, i), p));
        }
        return EA_OK;
    }
    return ea_err(EA_ERR_UNSUPPORTED, "%s: %s.type: normalizer '%s' is not supported (NFC, Sequence)", t->what, path,
                  type);
}

static ea_status load_pretok(ea_tokenizer *t, const json_t *n, const char *path) {
    if (!n || json_is_null(n)) return EA_OK;
    if (!json_is_object(n)) return ea_err(EA_ERR_FORMAT, "%s: %s: not an object", t->what, path);
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) return ea_err(EA_ERR_FORMAT, "%s: %s.type: missing or not a string", t->what, path);
    char f[160];
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(n, "pretokenizers");
        if (!json_is_array(arr)) return ea_err(EA_ERR_FORMAT, "%s: %s.pretokenizers: not an array", t->what, path);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            snprintf(f, sizeof f, "%s.pretokenizers[%zu]", path, i);
            EA_TRY(load_pretok(t, json_array_get(arr, i), f));
        }
        return EA_OK;
    }
    if (t->has_bytelevel)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: %s: a pre-tokenizer after ByteLevel is not supported", t->what, path);
    if (strcmp(type, "Split") == 0) {
        const json_t *pat = json_object_get(n, "pattern");
        const json_t *re = json_object_get(pat, "Regex"), *str = json_object_get(pat, "String");
        if (!json_is_string(re) && !json_is_string(str))
            return ea_err(EA_ERR_FORMAT, "%s: %s.pattern: needs a Regex or String", t->what, path);
        const char *beh = json_string_value(json_object_get(n, "behavior"));
        if (!beh) return ea_err(EA_ERR_FORMAT, "%s: %s.behavior: missing or not a string", t->what, path);
        ea__split_behavior b;
        if (strcmp(beh, "Isolated") == 0) b = EA__SPLIT_ISOLATED;
        else if (strcmp(beh, "Removed") == 0) b = EA__SPLIT_REMOVED;
        else if (strcmp(beh, "MergedWithPrevious") == 0) b = EA__SPLIT_MERGED_PREV;
        else if (strcmp(beh, "MergedWithNext") == 0) b = EA__SPLIT_MERGED_NEXT;
        else if (strcmp(beh, "Contiguous") == 0) b = EA__SPLIT_CONTIGUOUS;
        else return ea_err(EA_ERR_FORMAT, "%s: %s.behavior: unknown '%s'", t->what, path, beh);
        const json_t *ps = json_is_string(re) ? re : str;
        snprintf(f, sizeof f, "%s.pattern.%s", path, json_is_string(re) ? "Regex" : "String");
        return ea__tok_add_split(t, json_string_value(ps), json_string_length(ps), !json_is_string(re), b,
                                 jbool(n, "invert", 0), f);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        t->bl_prefix_space = jbool(n, "add_prefix_space", 1);
        if (jbool(n, "use_regex", 1)) {
            snprintf(f, sizeof f, "%s(ByteLevel regex)", path);
            EA_TRY(ea__tok_add_split(t, GPT2_REGEX, strlen(GPT2_REGEX), 0, EA__SPLIT_ISOLATED, 0, f));
            t->bl_regex = 1;
        }
        t->has_bytelevel = 1;
        return EA_OK;
    }
    return ea_err(EA_ERR_UNSUPPORTED,
                  "%s: %s.type: pre-tokenizer '%s' is not supported (Sequence, Split, ByteLevel)", t->what, path, type);
}

const char *ea__tok_config_token(const json_t *cfg, const char *key) {
    const json_t *v = json_object_get(cfg, key);
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static ea_status ids_push(int32_t **arr, int *n, int32_t id) {
    int32_t *p = ea_realloc(*arr, (size_t)(*n + 1) * sizeof *p);
    if (!p) return ea_err(EA_ERR_NOMEM, "post-processor");
    p[(*n)++] = id;
    *arr = p;
    return EA_OK;
}

static ea_status load_template(ea_tokenizer *t, const json_t *pp, const char *path) {
    const json_t *single = json_object_get(pp, "single");
    const json_t *sp = json_object_get(pp, "special_tokens");
    if (!json_is_array(single)) return ea_err(EA_ERR_FORMAT, "%s: %s.single: not an array", t->what, path);
    int seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *e = json_array_get(single, i);
        const json_t *st = json_object_get(e, "SpecialToken");
        if (json_object_get(e, "Sequence")) {
            seen_a = 1;
            continue;
        }
        const char *name = json_string_value(json_object_get(st, "id"));
        if (!name) return ea_err(EA_ERR_FORMAT, "%s: %s.single[%zu]: needs Sequence or SpecialToken.id", t->what,
                                 path, i);
        const json_t *ids = json_object_get(json_object_get(sp, name), "ids");
        if (!json_is_array(ids) || json_array_size(ids) == 0) {
            int32_t id = ea__tok_lookup(t, name, strlen(name));
            if (id < 0) return ea_err(EA_ERR_FORMAT, "%s: %s.special_tokens: '%s' has no ids", t->what, path, name);
            EA_TRY(ids_push(seen_a ? &t->suffix : &t->prefix, seen_a ? &t->n_suffix : &t->n_prefix, id));
            continue;
        }
        for (size_t k = 0; k < json_array_size(ids); k++) {
            const json_t *v = json_array_get(ids, k);
            json_int_t id = json_integer_value(v);
            if (!json_is_integer(v) || id < 0 || id >= t->n_vocab)
                return ea_err(EA_ERR_FORMAT, "%s: %s.special_tokens.%s.ids[%zu]: not a valid id", t->what, path, name,
                              k);
            EA_TRY(ids_push(seen_a ? &t->suffix : &t->prefix, seen_a ? &t->n_suffix : &t->n_prefix, (int32_t)id));
        }
    }
    return EA_OK;
}

/* Returns 1 in *has_template if a TemplateProcessing decided BOS/EOS. */
static ea_status load_post(ea_tokenizer *t, const json_t *pp, const char *path, int *has_template) {
    if (!pp || json_is_null(pp)) return EA_OK;
    const char *type = json_string_value(json_object_get(pp, "type"));
    if (!type) return ea_err(EA_ERR_FORMAT, "%s: %s.type: missing or not a string", t->what, path);
    if (strcmp(type, "ByteLevel") == 0) return EA_OK;
    if (strcmp(type, "TemplateProcessing") == 0) {
        *has_template = 1;
        return load_template(t, pp, path);
    }
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(pp, "processors");
        if (!json_is_array(arr)) return ea_err(EA_ERR_FORMAT, "%s: %s.processors: not an array", t->what, path);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char f[128];
            snprintf(f, sizeof f, "%s.processors[%zu]", path, i);
            EA_TRY(load_post(t, json_array_get(arr, i), f, has_template));
        }
        return EA_OK;
    }
    return ea_err(EA_ERR_UNSUPPORTED,
                  "%s: %s.type: post-processor '%s' is not supported (ByteLevel, TemplateProcessing, Sequence)",
                  t->what, path, type);
}

static ea_status load_model(ea_tokenizer *t, const json_t *root) {
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return ea_err(EA_ERR_FORMAT, "%s: model: missing or not an object", t->what);
    const char *type = json_string_value(json_object_get(model, "type"));
    if (type && strcmp(type, "BPE") != 0)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: model.type: '%s' is not supported (BPE)", t->what, type);
    if (jbool(model, "byte_fallback", 0))
        return ea_err(EA_ERR_UNSUPPORTED, "%s: model.byte_fallback: true is not supported", t->what);
    const json_t *dropout = json_object_get(model, "dropout");
    if (json_is_number(dropout) && json_number_value(dropout) != 0.0)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: model.dropout: BPE dropout is not supported", t->what);
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *s = json_string_value(json_object_get(model, affix[i]));
        if (s && s[0]) return ea_err(EA_ERR_UNSUPPORTED, "%s: model.%s: '%s' is not supported", t->what, affix[i], s);
    }
    t->ignore_merges = jbool(model, "ignore_merges", 0);

    const json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) return ea_err(EA_ERR_FORMAT, "%s: model.vocab: missing or not an object", t->what);
    const json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return ea_err(EA_ERR_FORMAT, "%s: added_tokens: not an array", t->what);

    /* the vocabulary size: max id + 1 over vocab and added tokens */
    json_int_t max_id = -1;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= EA__MAX_VOCAB)
            return ea_err(EA_ERR_FORMAT, "%s: model.vocab[\"%.40s\"]: id is not an integer in 0..%d", t->what, key,
                          EA__MAX_VOCAB - 1);
        if (json_integer_value(val) > max_id) max_id = json_integer_value(val);
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= EA__MAX_VOCAB)
            return ea_err(EA_ERR_FORMAT, "%s: added_tokens[%zu].id: not an integer in 0..%d", t->what, i,
                          EA__MAX_VOCAB - 1);
        if (!json_is_string(json_object_get(a, "content")))
            return ea_err(EA_ERR_FORMAT, "%s: added_tokens[%zu].content: missing or not a string", t->what, i);
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    if (max_id < 0) return ea_err(EA_ERR_FORMAT, "%s: model.vocab: empty", t->what);
    EA_TRY(ea__tok_set_vocab_size(t, max_id + 1));

    json_object_foreach((json_t *)vocab, key, val) {
        char f[96];
        snprintf(f, sizeof f, "model.vocab[\"%.40s\"]", key);
        EA_TRY(ea__tok_set_piece(t, (int32_t)json_integer_value(val), key, strlen(key), f));
    }

    const json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges)) return ea_err(EA_ERR_FORMAT, "%s: model.merges: missing or not an array", t->what);
    for (size_t i = 0; i < json_array_size(merges); i++) {
        const json_t *m = json_array_get(merges, i);
        char f[64];
        snprintf(f, sizeof f, "model.merges[%zu]", i);
        if (i >= (size_t)INT32_MAX) return ea_err(EA_ERR_RANGE, "%s: %s: too many merges", t->what, f);
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            size_t n = json_string_length(m);
            const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
            if (!sp || sp + 1 == s + n)
                return ea_err(EA_ERR_FORMAT, "%s: %s: expected \"left right\", got \"%.60s\"", t->what, f, s);
            EA_TRY(ea__tok_add_merge(t, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp - s) - 1, (int32_t)i, f));
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            const json_t *l = json_array_get(m, 0), *r = json_array_get(m, 1);
            EA_TRY(ea__tok_add_merge(t, json_string_value(l), json_string_length(l), json_string_value(r),
                                     json_string_length(r), (int32_t)i, f));
        } else {
            return ea_err(EA_ERR_FORMAT, "%s: %s: expected \"left right\" or [left, right]", t->what, f);
        }
    }

    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *c = json_object_get(a, "content");
        char f[64];
        snprintf(f, sizeof f, "added_tokens[%zu]", i);
        EA_TRY(ea__tok_add_added(t, (int32_t)json_integer_value(json_object_get(a, "id")), json_string_value(c),
                                 json_string_length(c), jbool(a, "special", 0), jbool(a, "lstrip", 0),
                                 jbool(a, "rstrip", 0), jbool(a, "normalized", !jbool(a, "special", 0)),
                                 jbool(a, "single_word", 0), f));
    }
    return EA_OK;
}

static ea_status load_json(ea_tokenizer *t, const json_t *root, const json_t *cfg) {
    if (!json_is_object(root)) return ea_err(EA_ERR_FORMAT, "%s: top level is not an object", t->what);
    EA_TRY(load_model(t, root));
    EA_TRY(load_normalizer(t, json_object_get(root, "normalizer"), "normalizer"));
    EA_TRY(load_pretok(t, json_object_get(root, "pre_tokenizer"), "pre_tokenizer"));
    if (!t->has_bytelevel)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: pre_tokenizer: no ByteLevel step (only byte-level BPE is supported)",
                      t->what);
    const json_t *dec = json_object_get(root, "decoder");
    if (dec && !json_is_null(dec)) {
        const char *type = json_string_value(json_object_get(dec, "type"));
        if (!type || strcmp(type, "ByteLevel") != 0)
            return ea_err(EA_ERR_UNSUPPORTED, "%s: decoder.type: '%s' is not supported (ByteLevel)", t->what,
                          type ? type : "(missing)");
    }
    int has_template = 0;
    EA_TRY(load_post(t, json_object_get(root, "post_processor"), "post_processor", &has_template));
    EA_TRY(ea__tok_finish(t));

    if (cfg) {
        const char *bos = ea__tok_config_token(cfg, "bos_token"), *eos = ea__tok_config_token(cfg, "eos_token");
        if (bos) t->bos = ea__tok_lookup(t, bos, strlen(bos));
        if (eos) t->eos = ea__tok_lookup(t, eos, strlen(eos));
        if (!has_template) {
            if (jbool(cfg, "add_bos_token", 0)) {
                if (t->bos < 0)
                    return ea_err(EA_ERR_FORMAT, "tokenizer_config.json: add_bos_token is true but bos_token is %s",
                                  bos ? "not in the vocabulary" : "missing");
                EA_TRY(ids_push(&t->prefix, &t->n_prefix, t->bos));
            }
            if (jbool(cfg, "add_eos_token", 0)) {
                if (t->eos < 0)
                    return ea_err(EA_ERR_FORMAT, "tokenizer_config.json: add_eos_token is true but eos_token is %s",
                                  eos ? "not in the vocabulary" : "missing");
                EA_TRY(ids_push(&t->suffix, &t->n_suffix, t->eos));
            }
        }
        t->clean_up_spaces = jbool(cfg, "clean_up_tokenization_spaces", 1);
        const json_t *extra = json_object_get(cfg, "additional_special_tokens");
        for (size_t i = 0; i < json_array_size(extra); i++) {
            const json_t *e = json_array_get(extra, i);
            const char *s = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "content"));
            int32_t id = s ? ea__tok_lookup(t, s, strlen(s)) : -1;
            if (id >= 0) t->special[id] = 1;
        }
    } else if (t->n_prefix > 0) {
        t->bos = t->prefix[0];
    }
    return EA_OK;
}

ea_status ea_tokenizer_from_json(const char *json, size_t json_len, const char *config, size_t config_len,
                                 const char *what, ea_tokenizer **out) {
    *out = NULL;
    json_t *root = NULL, *cfg = NULL;
    EA_TRY(ea_json_parse(json, json_len, what ? what : "tokenizer.json", &root));
    if (config) {
        ea_status s = ea_json_parse(config, config_len, "tokenizer_config.json", &cfg);
        if (s != EA_OK) {
            json_decref(root);
            return s;
        }
        if (!json_is_object(cfg)) {
            json_decref(root);
            json_decref(cfg);
            return ea_err(EA_ERR_FORMAT, "tokenizer_config.json: top level is not an object");
        }
    }
    ea_tokenizer *t;
    ea_status s = ea__tok_alloc(what ? what : "tokenizer.json", &t);
    if (s == EA_OK) s = load_json(t, root, cfg);
    json_decref(root);
    json_decref(cfg);
    if (s != EA_OK) {
        ea_tokenizer_destroy(t);
        return s;
    }
    *out = t;
    return EA_OK;
}

/* A file of an HF model directory other than the tokenizer (config.json,
 * *.safetensors, ...): the user meant the directory; say so, in the words of
 * ea_model_check_path. */
static ea_status not_the_tokenizer(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    int other = !strcmp(base, "config.json") || !strcmp(base, "tokenizer_config.json") ||
                !strcmp(base, "generation_config.json") || (n > 12 && !strcmp(base + n - 12, ".safetensors")) ||
                (n > 23 && !strcmp(base + n - 23, ".safetensors.index.json"));
    char dir[4096];
    if (other && ea_model_dir_of_file(path, dir, sizeof dir))
        return ea_err(EA_ERR_INVALID_ARG,
                      "%s: expected a model directory, a tokenizer.json or a .gguf file, got a file of the model "
                      "directory %s (pass the directory)", path, dir);
    return EA_OK;
}

ea_status ea_tokenizer_load(const char *path, ea_tokenizer **out) {
    *out = NULL;
    if (!ea_is_dir(path) && ea_gguf_file_has_magic(path)) return ea__tok_load_gguf(path, out);
    char tj[4096], tc[4096], dir[4096];
    if (ea_is_dir(path)) {
        snprintf(dir, sizeof dir, "%s", path);
        ea_path_join(tj, sizeof tj, path, "tokenizer.json");
        if (!ea_file_exists(tj)) {
            ea_path_join(tc, sizeof tc, path, "tiktoken.model");
            if (ea_file_exists(tc)) return ea__tok_load_tiktoken(path, out);
            return ea_err(EA_ERR_NOT_FOUND, "%s: no tokenizer.json (or tiktoken.model) in this directory", path);
        }
    } else {
        EA_TRY(not_the_tokenizer(path));
        snprintf(tj, sizeof tj, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
    }
    ea_path_join(tc, sizeof tc, dir, "tokenizer_config.json");
    char *js = NULL, *cs = NULL;
    size_t jn = 0, cn = 0;
    EA_TRY(ea_read_file(tj, &js, &jn));
    if (ea_file_exists(tc)) {
        ea_status s = ea_read_file(tc, &cs, &cn);
        if (s != EA_OK) {
            ea_free(js);
            return s;
        }
    }
    ea_status s = ea_tokenizer_from_json(js, jn, cs, cn, tj, out);
    ea_free(js);
    ea_free(cs);
    return s;
}

