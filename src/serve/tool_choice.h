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
 * into tool_calls. "required" and a named function must constrain decoding
 * so that the model can only write a call: that is the grammar engine's job,
 * through ea_tool_choice_grammar below — until it exists they are refused.
 */
#ifndef EA_TOOL_CHOICE_H
#define EA_TOOL_CHOICE_H

#include <jansson.h>

#include "base/status.h"
#include "serve/openai.h"

/* Read and check tools, tool_choice and parallel_tool_calls of root into r. -1 with e filled. */
int ea_oai_parse_tools(const json_t *root, ea_oai_request *r, ea_oai_error *e);

/* INTEGRATION POINT for constrained decoding (src/grammar/, branch `grammar`):
 * the grammar that makes the model write a call in `fmt` to one of `tools`
 * (EA_TOOL_CHOICE_REQUIRED) or to the function `name` (EA_TOOL_CHOICE_NAMED).
 * OUT: *grammar, for the request's grammar pointer. Today: EA_ERR_UNSUPPORTED,
 * and the request is refused with 400 "tool_choice 'required' needs constrained
 * decoding, not built yet". NONE and AUTO need no grammar (*grammar = NULL). */
ea_status ea_tool_choice_grammar(const json_t *tools, ea_tool_choice choice, const char *name, ea_tool_format fmt,
                                 void **grammar);

#endif
