/*
 * chat_template.c — the public face of the chat-template interpreter:
 * create (lex + parse once), render (evaluate against a JSON context) and
 * the model-side helpers that find a template and its special tokens in a
 * tokenizer_config.json or a GGUF file.
 *
 * Ownership: a template owns a private copy of its source, the preprocessed
 * text, the offset map and the AST, all in one pool freed by destroy. Render
 * uses its own pool, so a template is read-only after create.
 */
#include "tokenizer/chat_template.h"

#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "model/gguf.h"
#include "model/model.h"
#include "tokenizer/jinja_internal.h"

struct ea_chat_template {
    jj_pool pool;
    char *src; /* owns (in pool): the source as given, NUL-terminated */
    jj_srcmap sm;
    jj_node **body;
    size_t n_body;
    jj_limits lim;
};

ea_status ea_chat_template_create(const char *src, size_t len, ea_chat_template **out) {
    *out = NULL;
    ea_chat_template *t = ea_calloc(1, sizeof *t);
    if (!t) return ea_err(EA_ERR_NOMEM, "chat template: out of memory");
    ea__jj_pool_init(&t->pool, 0);
    ea_status s = EA_OK;
    t->src = ea__jj_strndup(&t->pool, src ? src : "", src ? len : 0);
    if (!t->src) {
        s = ea_err(EA_ERR_NOMEM, "chat template: out of memory");
        goto fail;
    }
    jj_token *toks;
    size_t n_toks;
    uint32_t *map;
    size_t n_map;
    t->sm.orig = t->src;
    t->sm.orig_len = src ? len : 0;
    s = ea__jj_lex(&t->pool, t->src, t->sm.orig_len, &toks, &n_toks, &map, &n_map);
    if (s != EA_OK) goto fail;
    t->sm.map = map;
    t->sm.n_map = n_map;
    s = ea__jj_parse(&t->pool, toks, n_toks, &t->sm, &t->body, &t->n_body);
    if (s != EA_OK) goto fail;
    *out = t;
    return EA_OK;
fail:
    ea_chat_template_destroy(t);
    return s;
}

void ea_chat_template_destroy(ea_chat_template *t) {
    if (!t) return;
    ea__jj_pool_deinit(&t->pool);
    ea_free(t);
}

const char *ea_chat_template_source(const ea_chat_template *t) { return t->src; }

void ea_chat_template_set_limits(ea_chat_template *t, unsigned long long max_steps, size_t max_bytes) {
    t->lim.max_steps = max_steps;
    t->lim.max_bytes = max_bytes;
}

ea_status ea_chat_template_render(const ea_chat_template *t, const json_t *context, char **out, size_t *out_len) {
    return ea__jj_render(t->body, t->n_body, &t->sm, &t->lim, context, out, out_len);
}

/* ---- model helpers ------------------------------------------------------------- */

void ea_chat_config_deinit(ea_chat_config *cfg) {
    if (!cfg) return;
    ea_free(cfg->template_src);
    ea_free(cfg->bos_token);
    ea_free(cfg->eos_token);
    memset(cfg, 0, sizeof *cfg);
}

static ea_status token_field(const json_t *root, const char *path, const char *key, char **out) {
    const json_t *v = json_object_get(root, key);
    *out = NULL;
    if (!v || json_is_null(v)) return EA_OK;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v))
        return ea_err(EA_ERR_FORMAT, "%s: %s must be a string or an object with a string \"content\"", path, key);
    *out = ea_strndup(json_string_value(v), json_string_length(v));
    return *out ? EA_OK : ea_err(EA_ERR_NOMEM, "%s: out of memory", path);
}

static ea_status load_hf(const char *dir, int want_tools, ea_chat_config *cfg) {
    char path[4096];
    ea_path_join(path, sizeof path, dir, "tokenizer_config.json");
    json_t *root;
    EA_TRY(ea_json_load_file(path, &root));
    ea_status s = EA_OK;
    const json_t *ct = json_object_get(root, "chat_template");
    const json_t *src = NULL;
    /* chat_template.jinja beside it (what transformers saves since 4.50)
     * wins over the config's field, as in transformers. */
    char jinja[4096];
    ea_path_join(jinja, sizeof jinja, dir, "chat_template.jinja");
    if (ea_file_exists(jinja)) {
        size_t n = 0;
        s = ea_read_file(jinja, &cfg->template_src, &n);
        if (s != EA_OK) goto done;
        cfg->template_len = n;
        goto tokens;
    }
    if (!ct || json_is_null(ct)) {
        s = ea_err(EA_ERR_NOT_FOUND, "%s: no chat_template (and no chat_template.jinja beside it)", path);
        goto done;
    }
    if (json_is_string(ct)) {
        src = ct;
    } else if (json_is_array(ct)) {
        const json_t *def = NULL, *tool = NULL;
        for (size_t i = 0; i < json_array_size(ct); i++) {
            const json_t *e = json_array_get(ct, i);
            const json_t *name = json_object_get(e, "name"), *tmpl = json_object_get(e, "template");
            if (!json_is_string(name) || !json_is_string(tmpl)) {
                s = ea_err(EA_ERR_FORMAT, "%s: chat_template[%zu] must be {\"name\": string, \"template\": string}", path, i);
                goto done;
            }
            if (!strcmp(json_string_value(name), "default")) def = tmpl;
            if (!strcmp(json_string_value(name), "tool_use")) tool = tmpl;
        }
        src = (want_tools && tool) ? tool : def;
        if (!src) {
            s = ea_err(EA_ERR_NOT_FOUND, "%s: chat_template list has no \"default\" template", path);
            goto done;
        }
    } else {
        s = ea_err(EA_ERR_FORMAT, "%s: chat_template must be a string or a list of {name, template}", path);
        goto done;
    }
    cfg->template_len = json_string_length(src);
    cfg->template_src = ea_strndup(json_string_value(src), cfg->template_len);
    if (!cfg->template_src) {
        s = ea_err(EA_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
tokens:
    s = token_field(root, path, "bos_token", &cfg->bos_token);
    if (s == EA_OK) s = token_field(root, path, "eos_token", &cfg->eos_token);
done:
    json_decref(root);
    return s;
}

static ea_status gguf_token(const ea_gguf *g, const char *path, const char *key, char **out) {
    *out = NULL;
    if (ea_gguf_find_kv(g, key) < 0) return EA_OK;
    uint64_t id;
    EA_TRY(ea_gguf_get_u64(g, key, &id));
    int kv = ea_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (kv < 0) return ea_err(EA_ERR_FORMAT, "%s: %s is set but tokenizer.ggml.tokens is missing", path, key);
    const char *s;
    size_t len;
    EA_TRY(ea_gguf_arr_str(g, kv, id, &s, &len));
    *out = ea_strndup(s, len);
    return *out ? EA_OK : ea_err(EA_ERR_NOMEM, "%s: out of memory", path);
}

static ea_status load_gguf(const char *path, ea_chat_config *cfg) {
    ea_gguf *g;
    EA_TRY(ea_gguf_open(path, &g));
    const char *src;
    ea_status s = ea_gguf_get_str(g, "tokenizer.chat_template", &src);
    if (s == EA_ERR_NOT_FOUND) s = ea_err(EA_ERR_NOT_FOUND, "%s: no tokenizer.chat_template", path);
    if (s == EA_OK && !(cfg->template_src = ea_strdup(src))) s = ea_err(EA_ERR_NOMEM, "%s: out of memory", path);
    if (s == EA_OK) cfg->template_len = strlen(cfg->template_src);
    if (s == EA_OK) s = gguf_token(g, path, "tokenizer.ggml.bos_token_id", &cfg->bos_token);
    if (s == EA_OK) s = gguf_token(g, path, "tokenizer.ggml.eos_token_id", &cfg->eos_token);
    ea_gguf_close(g);
    return s;
}

ea_status ea_chat_config_load(const char *model, int want_tools, ea_chat_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    EA_TRY(ea_model_check_path(model)); /* a model directory or a .gguf file; the same words in every command */
    ea_status s = ea_is_dir(model) ? load_hf(model, want_tools, cfg) : load_gguf(model, cfg);
    if (s != EA_OK) ea_chat_config_deinit(cfg);
    return s;
}

ea_status ea_chat_render_model(const char *model, const json_t *messages, const json_t *tools,
                               int add_generation_prompt, const json_t *extra, char **out, size_t *out_len) {
    ea_chat_config cfg;
    EA_TRY(ea_chat_config_load(model, tools != NULL, &cfg));
    ea_chat_template *t = NULL;
    json_t *ctx = extra ? json_deep_copy(extra) : json_object();
    ea_status s = ctx ? EA_OK : ea_err(EA_ERR_NOMEM, "chat template: out of memory");
    if (s == EA_OK) s = ea_chat_template_create(cfg.template_src, cfg.template_len, &t);
    if (s == EA_OK) {
        json_object_set(ctx, "messages", (json_t *)messages);
        if (tools) json_object_set(ctx, "tools", (json_t *)tools);
        json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt));
        if (cfg.bos_token) json_object_set_new(ctx, "bos_token", json_string(cfg.bos_token));
        if (cfg.eos_token) json_object_set_new(ctx, "eos_token", json_string(cfg.eos_token));
        s = ea_chat_template_render(t, ctx, out, out_len);
    }
    if (s != EA_OK) ea_err_wrap(s, "%s: ", model);
    json_decref(ctx);
    ea_chat_template_destroy(t);
    ea_chat_config_deinit(&cfg);
    return s;
}
