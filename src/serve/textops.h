/*
 * textops.h — the model's text side for the server: its tokenizer and chat
 * template, loaded once and offered to http/openai as an ea_text_ops table.
 *
 *   ea_serve_text *t; ea_text_ops ops;
 *   EA_TRY(ea_serve_text_load(model_path, &t, &ops));
 *   ... ea_sched_create(engine, ea_serve_text_tokenizer(t), ...), ea_http_set_ready(h, s, &ops, ctx) ...
 *   ea_serve_text_destroy(t);
 *
 * A model without a chat template still serves /v1/completions; chat
 * requests then get 400 naming the missing template. Everything here is
 * immutable after load, so HTTP threads call the ops concurrently.
 */
#ifndef EA_TEXTOPS_H
#define EA_TEXTOPS_H

#include "base/status.h"
#include "serve/openai.h"

typedef struct ea_serve_text ea_serve_text;
struct ea_tokenizer;

ea_status ea_serve_text_load(const char *model_path, int vocab, ea_serve_text **out, ea_text_ops *ops);
const struct ea_tokenizer *ea_serve_text_tokenizer(const ea_serve_text *t);
/* How the chat template used with tools renders an assistant's calls
 * (ea_tool_format_for_model: the template's text, else model_type). */
ea_tool_format ea_serve_text_tool_format(const ea_serve_text *t, const char *model_type);
void ea_serve_text_destroy(ea_serve_text *t);

#endif
