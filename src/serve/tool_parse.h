/*
 * tool_parse.h — a chat model's output text split into plain content,
 * thinking (reasoning) and tool calls, per model family, as vLLM's
 * reasoning parsers and tool parsers do. Text comes in as the deltas the
 * scheduler emits; the same machine serves non-streaming responses (fed the
 * whole text at once) and streams (fed each delta), so both give the same
 * split.
 *
 * Tool-call formats:
 *
 *   EA_TOOL_FMT_QWEN3 (Qwen2/Qwen3 "hermes" style; vLLM's hermes parser):
 *     text <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
 *          <tool_call>...</tool_call>                      (any number)
 *     an unterminated last call whose JSON parses counts (vLLM's regex does too)
 *
 *   EA_TOOL_FMT_QWEN3_XML (Qwen3.5's and Qwen3-Coder's templates; vLLM's qwen3_coder parser):
 *     text <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...
 *          </function>\n</tool_call>                     (any number)
 *     VALUE is raw text (one newline at each end is the format's, not the
 *     value's). It becomes a JSON string when the function's parameters schema
 *     (ea_chat_split_set_tools) types KEY as a string, or KEY is not in the
 *     schema; otherwise it is read as JSON (the template writes numbers,
 *     objects and arrays as JSON, and Python's True/False/None, which are read
 *     as true/false/null), and kept as a string when it is not JSON. A call
 *     cut short counts only if each of its values has its </parameter>.
 *
 *   EA_TOOL_FMT_DEEPSEEK_V3 (DeepSeek-V3's chat template; vLLM's deepseek_v3 parser):
 *     text <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n
 *          ```json\n{...}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>
 *          <｜tool▁calls▁end｜>
 *
 *   EA_TOOL_FMT_DEEPSEEK_V31 (DeepSeek-V3.1's chat template; vLLM's deepseek_v31 parser):
 *     text <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
 *          <｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
 *     (the template's text tells it from V3's: V3's writes a ```json block)
 *
 *   EA_TOOL_FMT_KIMI_K2 (Kimi K2's chat template; vLLM's kimi_k2 parser):
 *     text <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
 *          <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_call_begin|>...
 *          <|tool_calls_section_end|>
 *     the call keeps "functions.NAME:IDX" as its id (the template writes ids
 *     back into the conversation; IDX counts the conversation's calls)
 *
 * A call whose body does not parse (not JSON, no name, arguments not an
 * object, wrong type word) comes back as content, with its markers: never an
 * error. Whitespace right after a call, up to the next call or the end, is
 * dropped (it only separates calls).
 *
 * Reasoning (`--reasoning-parser`):
 *   EA_REASONING_QWEN3: output starting with <think> is reasoning up to
 *     </think>; output not starting with it is all content (Qwen3 with
 *     enable_thinking=false: the template closed the think block itself).
 *   EA_REASONING_DEEPSEEK_R1: the template opened the block (R1's prompt ends
 *     with <think>\n); output is reasoning up to </think> (a leading <think>
 *     is dropped), then content.
 *   EA_REASONING_KIMI_K2 (Kimi K2-Thinking; vLLM's kimi_k2): as QWEN3, and
 *     <|tool_calls_section_begin|> inside the think block also ends it (the
 *     model may call a tool while thinking); the section is then read as calls.
 *   An unterminated think block is all reasoning, in both modes (vLLM's
 *   streaming behaviour; its non-streaming qwen3 parser would call it content).
 *   ea_chat_split_think_open: a prompt that ends inside an open think block
 *   (Qwen3.5's and Qwen3-2507-Thinking's templates end with "<think>\n")
 *   makes the output reasoning up to </think> in either mode, as R1's does.
 *
 * Holding back: text that may be the start of a marker is kept until the next
 * delta decides, so a marker split over tokens is still seen.
 *
 *   ea_chat_split sp;
 *   ea_chat_split_init(&sp, EA_REASONING_QWEN3, EA_TOOL_FMT_QWEN3);
 *   ea_chat_delta d = {0};                       // reused; reset by each call
 *   ea_chat_split_feed(&sp, text, len, &d);      // d.content, d.reasoning, d.calls
 *   ea_chat_split_finish(&sp, &d);               // what was held back
 *   ea_chat_delta_deinit(&d); ea_chat_split_deinit(&sp);
 *
 * Owned by one choice of one response, on one thread.
 */
#ifndef EA_TOOL_PARSE_H
#define EA_TOOL_PARSE_H

#include <jansson.h>
#include <stddef.h>

#include "base/sbuf.h"

typedef enum {
    EA_TOOL_FMT_NONE = 0,
    EA_TOOL_FMT_QWEN3,
    EA_TOOL_FMT_DEEPSEEK_V3,
    EA_TOOL_FMT_QWEN3_XML,
    EA_TOOL_FMT_KIMI_K2,
    EA_TOOL_FMT_DEEPSEEK_V31
} ea_tool_format;
typedef enum { EA_REASONING_NONE = 0, EA_REASONING_QWEN3, EA_REASONING_DEEPSEEK_R1, EA_REASONING_KIMI_K2 } ea_reasoning_mode;

/* The format a chat template teaches: read from the template's text (how it
 * renders an assistant's tool_calls), else the family's (HF model_type; a
 * template may be NULL); NONE when we have no parser for it, and for a
 * template that renders tool_calls in none of our formats (Mistral's). */
ea_tool_format ea_tool_format_for_model(const char *chat_template, const char *model_type);
/* `--tool-call-parser` names, as vLLM's: "hermes" (QWEN3), "qwen3_coder"
 * (QWEN3_XML), "deepseek_v3", "deepseek_v31", "kimi_k2", "none"; "auto" -> -2 (ea_tool_format_for_model
 * decides); -1 for another name. */
int ea_tool_format_parse(const char *name);
/* 1 if a rendered prompt ends inside an open think block ("<think>" then only whitespace). */
int ea_prompt_opens_think(const char *prompt);
/* "qwen3" / "deepseek_r1" / "kimi_k2" / "none" -> mode; -1 for another name. */
int ea_reasoning_mode_parse(const char *name);

/* Parse one call's body (the text between its markers); tools (OpenAI's
 * array; NULL ok) types the values of QWEN3_XML calls. OUT: *call, a new
 * {"name": string, "arguments": string (JSON text)} object, with the model's
 * "id" too for KIMI_K2. 0, or -1 when the body is malformed. */
int ea_tool_parse_call(ea_tool_format fmt, const json_t *tools, const char *body, size_t n, json_t **call);

typedef struct {
    ea_sbuf content;    /* plain text for message.content */
    ea_sbuf reasoning;  /* for message.reasoning_content */
    json_t *calls;      /* owns: array of {"name", "arguments"}, completed calls in order */
} ea_chat_delta;

typedef struct {
    ea_reasoning_mode rmode;
    ea_tool_format fmt;
    int rstate;         /* reasoning: 0 start, 1 in think, 2 content */
    int tstate;         /* tools: 0 text, 1 inside a calls block (DeepSeek), 2 inside a call */
    int n_calls;        /* calls found so far */
    int after_call;     /* only whitespace since the last call ended */
    json_t *tools;      /* a reference to the request's tools (QWEN3_XML values), or NULL */
    ea_sbuf rhold;      /* reasoning machine: undecided text */
    ea_sbuf thold;      /* tool machine: undecided text (or the body of the open call) */
} ea_chat_split;

void ea_chat_split_init(ea_chat_split *sp, ea_reasoning_mode rmode, ea_tool_format fmt);
/* The request's tools, for QWEN3_XML's typed values (sp keeps a reference: a
 * stream outlives its request). */
void ea_chat_split_set_tools(ea_chat_split *sp, const json_t *tools);
/* Before the first feed: open 1, the prompt left a think block open (output
 * is reasoning up to </think>, any mode but NONE); open 0, no block is open
 * (R1 mode then reads like qwen3: a forced tool call starts at once). */
void ea_chat_split_think_open(ea_chat_split *sp, int open);
void ea_chat_split_deinit(ea_chat_split *sp);
/* Feed n bytes; d is reset, then holds what this delta decided. */
void ea_chat_split_feed(ea_chat_split *sp, const char *text, size_t n, ea_chat_delta *d);
/* End of output: d is reset, then holds everything held back. */
void ea_chat_split_finish(ea_chat_split *sp, ea_chat_delta *d);
void ea_chat_delta_deinit(ea_chat_delta *d);

#endif
