/*
 * textops.c — tokenizer + chat template behind ea_text_ops (see textops.h).
 *
 * The chat template is parsed once at load (ea_chat_config_load +
 * ea_chat_template_create); each render builds the context
 * {messages, add_generation_prompt, bos_token, eos_token}.
 *
 * TEMPORARY until src/tokenizer/tokenizer.h lands: encode maps each byte of
 * the text to the token id of the same value and decode writes "<id>" (the
 * same stand-in src/serve/detok.c uses), so the HTTP layer can be exercised
 * with token-id prompts. Replaced by the real tokenizer calls when it lands.
 */
#include "serve/textops.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "tokenizer/chat_template.h"

struct ea_serve_text {
    ea_chat_config cfg;      /* owns */
    ea_chat_template *tpl;   /* owns; NULL: the model has no chat template */
    char tpl_error[256];     /* why tpl is NULL */
    int vocab;
};

static ea_status t_encode(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int *n) {
    ea_serve_text *t = ctx;
    (void)add_special;
    if (len > (size_t)1 << 28) return ea_err(EA_ERR_RANGE, "text too long");
    int32_t *p = ea_malloc((len ? len : 1) * sizeof *p);
    if (!p) return ea_err(EA_ERR_NOMEM, "encode");
    for (size_t i = 0; i < len; i++) p[i] = (int32_t)((unsigned char)text[i] % (unsigned)(t->vocab > 0 ? t->vocab : 256));
    *ids = p;
    *n = (int)len;
    return EA_OK;
}

static ea_status t_decode(void *ctx, const int32_t *ids, int n, char **text, size_t *len) {
    (void)ctx;
    ea_sbuf b = {0};
    ea_sbuf_puts(&b, "");
    for (int i = 0; i < n; i++) ea_sbuf_printf(&b, "<%d>", (int)ids[i]);
    if (!(*text = ea_sbuf_take(&b, len))) return ea_err(EA_ERR_NOMEM, "decode");
    return EA_OK;
}

static ea_status t_render(void *ctx, const json_t *messages, int add_generation_prompt, char **text) {
    ea_serve_text *t = ctx;
    if (!t->tpl) return ea_err(EA_ERR_UNSUPPORTED, "this model has no usable chat template (%s)", t->tpl_error);
    json_t *c = json_pack("{s:O,s:b}", "messages", messages, "add_generation_prompt", add_generation_prompt);
    if (!c) return ea_err(EA_ERR_NOMEM, "chat context");
    if (t->cfg.bos_token) json_object_set_new(c, "bos_token", json_string(t->cfg.bos_token));
    if (t->cfg.eos_token) json_object_set_new(c, "eos_token", json_string(t->cfg.eos_token));
    size_t n;
    ea_status s = ea_chat_template_render(t->tpl, c, text, &n);
    json_decref(c);
    return s;
}

ea_status ea_serve_text_load(const char *model_path, int vocab, ea_serve_text **out, ea_text_ops *ops) {
    ea_serve_text *t = ea_calloc(1, sizeof *t);
    if (!t) return ea_err(EA_ERR_NOMEM, "text ops");
    t->vocab = vocab;
    ea_status s = ea_chat_config_load(model_path, 0, &t->cfg);
    if (s == EA_OK && t->cfg.template_src)
        s = ea_chat_template_create(t->cfg.template_src, strlen(t->cfg.template_src), &t->tpl);
    else if (s == EA_OK)
        s = ea_err(EA_ERR_NOT_FOUND, "no chat_template");
    if (s != EA_OK) {
        snprintf(t->tpl_error, sizeof t->tpl_error, "%s", ea_errmsg());
        EA_LOGW("chat template: %s; /v1/chat/completions will answer 400", t->tpl_error);
        t->tpl = NULL;
    }
    *ops = (ea_text_ops){.ctx = t, .encode = t_encode, .decode = t_decode, .render_chat = t_render, .vocab = vocab};
    *out = t;
    return EA_OK;
}

const struct ea_tokenizer *ea_serve_text_tokenizer(const ea_serve_text *t) {
    (void)t;
    return NULL;
}

void ea_serve_text_destroy(ea_serve_text *t) {
    if (!t) return;
    ea_chat_template_destroy(t->tpl);
    ea_chat_config_deinit(&t->cfg);
    ea_free(t);
}
