/*
 * openai_impl.h — what openai.c (prepare, /tokenize, /detokenize),
 * openai_fields.c (request parsing) and openai_render.c (responses) share;
 * not for other callers.
 */
#ifndef EA_OPENAI_IMPL_H
#define EA_OPENAI_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/openai.h"

/* A JSON string of arbitrary bytes, cleaned to UTF-8 (ea_sbuf_append_utf8); NULL if out of memory. */
json_t *ea__oai_jstr(const char *s, size_t n);

/* openai_fields.c: the field helpers the other endpoints share. A field that
 * is absent or null counts as not given (ea__oai_field returns NULL). Each
 * int-returning function returns 0, or -1 with *e filled (a 400 naming the field). */
json_t *ea__oai_field(const json_t *o, const char *key);
int ea__oai_get_bool(const json_t *o, const char *key, int *out, ea_oai_error *e);
/* The body as a JSON object; NUL characters anywhere are refused naming their path. */
int ea__oai_parse_body(const char *body, size_t len, json_t **root, ea_oai_error *e);
/* ids from a non-empty JSON array of non-negative integers. OUT: *ids (caller frees), *n. */
int ea__oai_parse_ids(const json_t *a, const char *param, int32_t **ids, int *n, ea_oai_error *e);
/* messages validated and copied into r->messages, content flattened to a string. */
int ea__oai_parse_messages(const json_t *root, ea_oai_request *r, ea_oai_error *e);
/* chat_template_kwargs, add_generation_prompt, continue_final_message into r. */
int ea__oai_parse_chat_options(const json_t *root, ea_oai_request *r, ea_oai_error *e);
/* 400 naming the first field of o that `known` (NULL-terminated; NULL: the request
 * field table for kind) does not list; prefix is put before the name. */
int ea__oai_refuse_unknown(const json_t *o, ea_oai_kind kind, const char *const *known, const char *prefix,
                           const char *endpoint, ea_oai_error *e);

#endif
