/*
 * chat_template.h — render a model's chat template (the Jinja `chat_template`
 * of tokenizer_config.json, or `tokenizer.chat_template` of a GGUF file) into
 * the prompt text the model was trained on.
 *
 * The interpreter implements the Jinja subset that chat templates use (see
 * docs/chat-templates.md) with the semantics of @huggingface/jinja, the
 * reference the tests compare against byte for byte. Anything outside the
 * subset is an error naming the template line and column, never a guess.
 *
 *   ea_chat_template *t;
 *   EA_TRY(ea_chat_template_create(src, strlen(src), &t));   // parse once
 *   json_t *ctx = json_pack("{s:o, s:b, s:s, s:s}", "messages", msgs,
 *                           "add_generation_prompt", 1, "bos_token", "<s>", "eos_token", "</s>");
 *   char *prompt; size_t n;
 *   ea_status s = ea_chat_template_render(t, ctx, &prompt, &n); // ea_free(prompt)
 *   ea_chat_template_destroy(t);
 *
 * Context: any JSON object; templates read `messages` (role, content,
 * tool_calls, reasoning_content, ...), `tools`, `add_generation_prompt`,
 * `bos_token`, `eos_token`, `enable_thinking`. A key the context lacks is
 * `undefined` in the template. A template calling raise_exception() (e.g.
 * Mixtral's role alternation) makes render return EA_ERR_INVALID_ARG with the
 * template's message. A created template is immutable: render may run from
 * several threads at once.
 */
#ifndef EA_CHAT_TEMPLATE_H
#define EA_CHAT_TEMPLATE_H

#include <stddef.h>

#include <jansson.h>

#include "base/status.h"

typedef struct ea_chat_template ea_chat_template;

/* Parse `len` bytes of template source (copied). Syntax errors: EA_ERR_FORMAT
 * with "chat template line L column C: ...". */
ea_status ea_chat_template_create(const char *src, size_t len, ea_chat_template **out);
void ea_chat_template_destroy(ea_chat_template *t);
/* The template source as given (owned by t). */
const char *ea_chat_template_source(const ea_chat_template *t);

/* Bound the work of one render: evaluation steps (default 50,000,000) and
 * bytes of intermediate values (default 512 MiB); 0 keeps the default. A
 * render over a limit fails with EA_ERR_FORMAT (steps) or EA_ERR_RANGE (bytes). */
void ea_chat_template_set_limits(ea_chat_template *t, unsigned long long max_steps, size_t max_bytes);

/* OUT: *out (NUL-terminated, ea_malloc'd; may contain NUL if the data did), *out_len. */
ea_status ea_chat_template_render(const ea_chat_template *t, const json_t *context, char **out, size_t *out_len);

/* What a model ships for chat formatting. */
typedef struct {
    char *template_src; /* owns; NUL-terminated, but may contain NUL: use template_len */
    size_t template_len;
    char *bos_token;    /* owns; NULL when the model has none */
    char *eos_token;    /* owns; NULL when the model has none */
} ea_chat_config;

/* Load from a model: a directory with tokenizer_config.json (chat_template is a
 * string or a list of {name, template}: "default" is used, or "tool_use" when
 * `want_tools` and the list has one; bos_token/eos_token are strings or
 * objects with "content"), or a .gguf file (tokenizer.chat_template, and the
 * token texts of tokenizer.ggml.bos_token_id / eos_token_id). */
ea_status ea_chat_config_load(const char *model, int want_tools, ea_chat_config *cfg);
void ea_chat_config_deinit(ea_chat_config *cfg);

/* Render a model's template: context = `extra` (may be NULL; copied) plus
 * messages, tools (if not NULL), add_generation_prompt, bos_token, eos_token. */
ea_status ea_chat_render_model(const char *model, const json_t *messages, const json_t *tools,
                               int add_generation_prompt, const json_t *extra, char **out, size_t *out_len);

#endif
