/*
 * constraint.h — the structured-output fields of an OpenAI request, parsed
 * and compiled into a grammar (grammar/grammar.h). Kept apart from openai.c,
 * which calls ea_oai_parse_constraint once per request.
 *
 *   response_format  {"type":"text"} (nothing), {"type":"json_object"},
 *                    {"type":"json_schema","json_schema":{"name","schema","strict","description"}}
 *   guided_json      a JSON Schema (object, or a string holding one) — vLLM's
 *   guided_choice    [string, ...] — vLLM's: the output is one of them
 *   guided_regex     string — vLLM's: the output matches it in full
 *   grammar, guided_grammar  llama.cpp's GBNF text (`root ::= ...`)
 * At most one of them; each error is a 400 naming the field, and for schemas
 * the JSON path of the offending keyword
 * (e.g. response_format.json_schema.schema.properties.a.$ref).
 */
#ifndef EA_CONSTRAINT_H
#define EA_CONSTRAINT_H

#include <jansson.h>

#include "grammar/grammar.h"
#include "serve/openai.h"

/* OUT: *g (NULL when the request has no constraint; the caller owns a reference). */
int ea_oai_parse_constraint(const json_t *root, ea_grammar **g, ea_oai_error *e);

/* The grammar's source for the other ranks of a control bus (scheduler.h,
 * ea_req_params.grammar_src): the request's constraint fields alone, as compact
 * JSON ({"guided_regex": "..."}); ea_oai_constraint_compile runs the same
 * ea_oai_parse_constraint over it, so every rank builds the same grammar.
 * OUT: *src (ea_malloc'd, NUL-terminated), *n its length. EA_ERR_NOMEM. */
ea_status ea_oai_constraint_source(const json_t *root, char **src, int *n);
/* ea_sched_opts.compile_grammar: src from ea_oai_constraint_source. OUT: *g. */
ea_status ea_oai_constraint_compile(const char *src, size_t n, ea_grammar **g);

#endif
