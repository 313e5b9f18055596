/*
 * tool_choice.h — the request side of tool calling: `tools`, `tool_choice`
 * and `parallel_tool_calls` of a chat request, checked and kept in the
 * ea_oai_request (openai.h); the output side is tool_parse.h.
 *
 *   tools         [{"type": "function", "function": {"name", "description"?,
 *                  "parameters"? (object), "strict"? (bool)}}], names unique
 *   tool_choice   "none" | "auto" | "required" | {"type": "function",
 *                  "function": {"name": one of the tools}}; default "auto"
 *                  with tools, "none" without (anything but "none" without
 *                  tools is a 400, as OpenAI answers)
 *   parallel_tool_calls  bool (default true); false: only the first call is returned
 *
 * With "none" the tools are still given to the chat template (vLLM's
 * default) and the output is not parsed; with "auto" the output is parsed
 * into tool_calls. "required" and a named function constrain decoding
 * (ea_tool_choice_grammar below, through the grammar engine) so that the
 * model can only write a well-formed call whose arguments are an instance of
 * the function's parameters schema; the output is then parsed like "auto".
 */
#ifndef EA_TOOL_CHOICE_H
#define EA_TOOL_CHOICE_H

#include <jansson.h>

#include "base/status.h"
#include "serve/openai.h"

/* Read and check tools, tool_choice and parallel_tool_calls of root into r. -1 with e filled. */
int ea_oai_parse_tools(const json_t *root, ea_oai_request *r, ea_oai_error *e);

/* The grammar that makes the model write its tool calls in its family's
 * format fmt when r->tool_choice is "required" (one call to any of the tools,
 * or several when parallel_tool_calls) or a named function (one call to it),
 * set as the request's grammar with its source for the other ranks of a
 * control bus; nothing for "none" and "auto". -1 with e filled: a parameters
 * schema the grammar engine refuses (400 naming its JSON path, e.g.
 * tools[1].function.parameters.properties.x.type), or a response_format /
 * guided_* constraint on the same request. */
int ea_tool_choice_grammar(ea_oai_request *r, ea_tool_format fmt, ea_oai_error *e);
/* The same grammar from the source's "eaas_tool_calls" object, on another rank
 * (constraint.c: ea_oai_constraint_compile). EA_ERR_FORMAT if malformed. */
ea_status ea_tool_choice_compile(const json_t *src, struct ea_grammar **g);

#endif
