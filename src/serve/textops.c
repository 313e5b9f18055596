/*
 * textops.c — tokenizer + chat template behind ea_text_ops (see textops.h).
 *
 * The chat template is parsed once at load (ea_chat_config_load +
 * ea_chat_template_create); each render builds the context
 * {messages, add_generation_prompt, bos_token, eos_token} plus the request's
 * variables (tools, chat_template_kwargs' keys such as enable_thinking). A
 * model whose chat_template is a list uses its "tool_use" entry when the
 * request has tools (transformers' rule).
 *
 * Prompts are encoded with special tokens recognised in the text (a chat
 * template writes them as text); BOS/EOS are added only for completions
 * prompts (add_special), as vLLM does: a rendered chat prompt carries its own.
 */
#include "serve/textops.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

struct ea_serve_text {
    ea_tokenizer *tok;       /* owns */
    ea_chat_config cfg;      /* owns */
    ea_chat_template *tpl;   /* owns; NULL: the model has no chat template */
    ea_chat_template *tool_tpl; /* owns: the "tool_use" template of a list, used when tools are given; NULL: tpl */
    char *tool_src;          /* owns: tool_tpl's source; NULL: cfg.template_src */
    char tpl_error[256];     /* why tpl is NULL */
    int vocab;
};

static ea_status t_encode(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int *n) {
    ea_serve_text *t = ctx;
    ea_tokens out = {0};
    unsigned flags = EA_TOK_PARSE_SPECIAL | (add_special ? EA_TOK_ADD_SPECIAL : 0);
    ea_status s = ea_tokenizer_encode(t->tok, text, len, flags, &out);
    if (s == EA_OK && out.n > (size_t)INT32_MAX) s = ea_err(EA_ERR_RANGE, "%zu tokens", out.n);
    if (s != EA_OK) {
        ea_tokens_free(&out);
        return s;
    }
    *ids = out.ids; /* ea_malloc'd: the caller frees with ea_free */
    *n = (int)out.n;
    return EA_OK;
}

static ea_status t_decode(void *ctx, const int32_t *ids, int n, char **text, size_t *len) {
    ea_serve_text *t = ctx;
    return ea_tokenizer_decode(t->tok, ids, (size_t)(n > 0 ? n : 0), 0, text, len);
}

static int t_has_token(void *ctx, int32_t id) {
    ea_serve_text *t = ctx;
    return ea_tokenizer_has_token(t->tok, id);
}

static ea_status t_render(void *ctx, const json_t *messages, const json_t *vars, int add_generation_prompt,
                          char **text) {
    ea_serve_text *t = ctx;
    if (!t->tpl) return ea_err(EA_ERR_UNSUPPORTED, "this model has no usable chat template (%s)", t->tpl_error);
    json_t *c = vars ? json_deep_copy(vars) : json_object(); /* tools, chat_template_kwargs' keys */
    if (!c || json_object_set(c, "messages", (json_t *)messages) ||
        json_object_set_new(c, "add_generation_prompt", json_boolean(add_generation_prompt))) {
        json_decref(c);
        return ea_err(EA_ERR_NOMEM, "chat context");
    }
    if (t->cfg.bos_token && !json_object_get(c, "bos_token")) json_object_set_new(c, "bos_token", json_string(t->cfg.bos_token));
    if (t->cfg.eos_token && !json_object_get(c, "eos_token")) json_object_set_new(c, "eos_token", json_string(t->cfg.eos_token));
    size_t n;
    ea_status s = ea_chat_template_render(json_object_get(c, "tools") && t->tool_tpl ? t->tool_tpl : t->tpl, c, text, &n);
    json_decref(c);
    return s;
}

ea_status ea_serve_text_load(const char *model_path, int vocab, ea_serve_text **out, ea_text_ops *ops) {
    ea_serve_text *t = ea_calloc(1, sizeof *t);
    if (!t) return ea_err(EA_ERR_NOMEM, "text ops");
    t->vocab = vocab;
    ea_status s = ea_tokenizer_load(model_path, &t->tok);
    if (s != EA_OK) {
        ea_serve_text_destroy(t);
        return s;
    }
    s = ea_chat_config_load(model_path, 0, &t->cfg);
    if (s == EA_OK && t->cfg.template_src)
        s = ea_chat_template_create(t->cfg.template_src, strlen(t->cfg.template_src), &t->tpl);
    else if (s == EA_OK)
        s = ea_err(EA_ERR_NOT_FOUND, "no chat_template");
    if (s != EA_OK) {
        snprintf(t->tpl_error, sizeof t->tpl_error, "%s", ea_errmsg());
        EA_LOGW("chat template: %s; /v1/chat/completions will answer 400", t->tpl_error);
        t->tpl = NULL;
    } else {
        ea_chat_config tc = {0}; /* a template list's "tool_use" entry, for requests with tools */
        if (ea_chat_config_load(model_path, 1, &tc) == EA_OK && tc.template_src &&
            (tc.template_len != t->cfg.template_len || memcmp(tc.template_src, t->cfg.template_src, tc.template_len)) &&
            ea_chat_template_create(tc.template_src, tc.template_len, &t->tool_tpl) != EA_OK)
            t->tool_tpl = NULL;
        if (t->tool_tpl) t->tool_src = ea_strndup(tc.template_src, tc.template_len);
        ea_chat_config_deinit(&tc);
    }
    *ops = (ea_text_ops){.ctx = t, .encode = t_encode, .decode = t_decode, .render_chat = t_render,
                         .has_token = t_has_token, .vocab = vocab};
    *out = t;
    return EA_OK;
}

const struct ea_tokenizer *ea_serve_text_tokenizer(const ea_serve_text *t) { return t->tok; }

ea_tool_format ea_serve_text_tool_format(const ea_serve_text *t, const char *model_type) {
    return ea_tool_format_for_model(t->tool_src ? t->tool_src : t->tpl ? t->cfg.template_src : NULL, model_type);
}

void ea_serve_text_destroy(ea_serve_text *t) {
    if (!t) return;
    ea_chat_template_destroy(t->tpl);
    ea_chat_template_destroy(t->tool_tpl);
    ea_free(t->tool_src);
    ea_chat_config_deinit(&t->cfg);
    ea_tokenizer_destroy(t->tok);
    ea_free(t);
}
