/*
 * openai_impl.h — what openai.c (requests) and openai_render.c (responses)
 * share; not for other callers.
 */
#ifndef EA_OPENAI_IMPL_H
#define EA_OPENAI_IMPL_H

#include <jansson.h>
#include <stddef.h>

/* A JSON string of arbitrary bytes, cleaned to UTF-8 (ea_sbuf_append_utf8); NULL if out of memory. */
json_t *ea__oai_jstr(const char *s, size_t n);

#endif
