/*
 * openai.h — the OpenAI wire format: request bodies in, response bodies out.
 * No sockets here (http.c owns those), so everything is testable without a
 * server (tests/unit/test_openai.c).
 *
 * A generation request goes through three steps:
 *
 *   ea_oai_request r; ea_oai_error e;
 *   ea_oai_parse(EA_OAI_CHAT, body, len, &r, &e)   JSON -> typed fields, validated
 *   ea_oai_prepare(&r, ops, ctx_len, kv_tokens, seed, &e)  prompt -> token ids, length checks,
 *                                                   defaults, r.params ready to submit
 *   ... ea_sched_submit(s, &r.params, &req) ...
 *   ea_oai_request_deinit(&r);
 *
 * Every failure fills an ea_oai_error (HTTP status, OpenAI error type, the
 * offending field as `param`, a message) and returns -1; ea_oai_render_error
 * turns it into {"error":{"message","type","param","code"}}.
 *
 * Accepted fields (any other field is refused with a 400 naming it; the table
 * is known_fields in openai.c, the accepted-with-no-effect ones are user,
 * safety_identifier, metadata, store, service_tier, prompt_cache_key):
 *   model (string), prompt (completions: string, [string], [int token ids] or
 *   [[int]]: a batch of up to EA_OAI_MAX_CHOICES prompts), messages (chat:
 *   [{role: system|developer|user|assistant|tool, content: string |
 *   [{type:"text", text}] | null, tool_calls, tool_call_id, name, reasoning_content}]),
 *   max_tokens, max_completion_tokens,
 *   temperature (>= 0), top_p (0,1], top_k (-1/0 off, or >= 1), min_p [0,1],
 *   seed (int), stop (string | [string], <= EA_MAX_STOP, each 1..255 bytes),
 *   n (1..EA_OAI_MAX_CHOICES, prompts x n at most that), stream (bool),
 *   stream_options.include_usage (only with stream), stream_options.continuous_usage_stats
 *   (vLLM's: every chunk carries its choice's usage so far; needs include_usage),
 *   logprobs (completions: int 0..20; chat: bool), top_logprobs (chat: 0..20,
 *   needs logprobs), presence_penalty and frequency_penalty [-2,2],
 *   repetition_penalty (0, 100], ignore_eos (bool), stop_token_ids ([id],
 *   <= EA_MAX_STOP_IDS, checked as prompt ids), min_tokens (0..max_tokens),
 *   skip_special_tokens (bool, default true: special tokens give no text),
 *   truncate_prompt_tokens (-1 = the context length, or >= 1: a longer prompt keeps its last tokens),
 *   add_special_tokens (bool; default true for completions, false for chat),
 *   prompt_logprobs (vLLM's, 0..20, not with stream: per prompt token {id: {logprob, rank,
 *   decoded_token}} for it and its top alternatives; completions per choice, chat top level),
 *   include_stop_str_in_output (bool: the stop string, EOS or stop id text ends the output),
 *   logit_bias ({"id": bias in [-100, 100]}, ids checked as prompt ids),
 *   echo (completions; with logprobs the prompt's tokens come first in
 *   logprobs, the first with null), tools, tool_choice,
 *   parallel_tool_calls (chat; tool_choice.c), chat_template_kwargs,
 *   add_generation_prompt, continue_final_message (chat), and with the test
 *   hooks on (ea_text_ops.test_hooks) eaas_test_forced_text;
 *   structured outputs: response_format (text, json_object, json_schema),
 *   guided_json, guided_choice, guided_regex, grammar / guided_grammar (GBNF) (constraint.h).
 * Refused with 400 because we would silently do something else: suffix,
 * best_of > 1, functions/function_call.
 *
 * Defaults: max_tokens 16 for completions (OpenAI's), the rest of the context
 * for chat; temperature 1, top_p 1; seed: the caller's (random per request).
 *
 * Responses: ea_oai_output collects a request's events and renders the
 * non-streaming body, or one SSE chunk per event (`data: {...}\n\n`) and the
 * tail (finish chunk, usage chunk when asked, `data: [DONE]\n\n`). Strings
 * that are not valid UTF-8 (a lone token of a multi-byte character, in
 * logprobs) are rendered with U+FFFD in place of each bad byte; the chat
 * logprobs' `bytes` carry the raw bytes.
 */
#ifndef EA_OPENAI_H
#define EA_OPENAI_H

#include <jansson.h>
#include <stdint.h>

#include "base/status.h"
#include "base/sbuf.h"
#include "serve/scheduler.h"
#include "serve/tool_parse.h"

#define EA_OAI_MAX_CHOICES 64 /* choices of one request: prompts x n */

/* What openai.c and http.c need from the tokenizer and chat template, as a
 * table so this layer can be tested and built apart from them. All outputs
 * are ea_malloc'd. */
typedef struct {
    void *ctx; /* borrows */
    /* text -> ids; special tokens written in the text are recognised; add_special:
     * also add BOS/EOS as the tokenizer's post-processor says (completions prompts,
     * not rendered chat prompts, which carry their own) */
    ea_status (*encode)(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, int *n_ids);
    /* ids -> text (NUL-terminated, raw bytes: may be partial UTF-8 for one token) */
    ea_status (*decode)(void *ctx, const int32_t *ids, int n_ids, char **text, size_t *len);
    /* messages (validated JSON array of {role, content, ...}) -> prompt text; vars (may be
     * NULL): more template variables (tools, chat_template_kwargs' keys) */
    ea_status (*render_chat)(void *ctx, const json_t *messages, const json_t *vars, int add_generation_prompt,
                             char **text);
    int vocab; /* the model's vocabulary rows */
    /* 1 if id stands for a token (ea_tokenizer_has_token); NULL: every id below vocab does */
    int (*has_token)(void *ctx, int32_t id);
    ea_tool_format tool_format;  /* how the model writes tool calls; NONE: requests with tools are refused */
    ea_reasoning_mode reasoning; /* --reasoning-parser: split <think> into reasoning_content */
    int test_hooks;              /* EAAS_TEST_HOOKS=1: accept eaas_test_forced_text (docs/serving.md) */
} ea_text_ops;

/* tool_choice (tool_choice.c) */
typedef enum { EA_TOOL_CHOICE_NONE = 0, EA_TOOL_CHOICE_AUTO, EA_TOOL_CHOICE_REQUIRED, EA_TOOL_CHOICE_NAMED } ea_tool_choice;

/* One more prompt of a batched completions request. */
typedef struct {
    char *text;     /* owns; NULL when given as ids */
    int32_t *ids;   /* owns */
    int n_ids;
} ea_oai_prompt;

typedef enum { EA_OAI_COMPLETIONS = 0, EA_OAI_CHAT = 1 } ea_oai_kind;

typedef struct {
    int status;        /* HTTP status: 400, 401, 404, 413, 503, ... */
    char type[40];     /* invalid_request_error, authentication_error, not_found_error, server_error, ... */
    char param[256];   /* the offending field (a JSON path into a schema can be long); "" renders as null */
    char code[40];     /* "" renders as null */
    char message[512];
} ea_oai_error;

/* Fill e; returns -1. type NULL picks one from the status. */
int ea_oai_fail(ea_oai_error *e, int status, const char *type, const char *param, const char *code,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void ea_oai_render_error(const ea_oai_error *e, ea_sbuf *out);

typedef struct {
    ea_oai_kind kind;
    char *model;            /* owns; NULL when absent */
    char *prompt_text;      /* owns: the completions prompt, or the rendered chat prompt */
    int32_t *prompt_ids;    /* owns: token ids (given, or encoded by prepare) */
    int n_prompt;
    json_t *messages;       /* owns a reference: chat messages, content flattened to strings */
    int max_tokens;         /* 0 = not given (prepare picks the default) */
    int stream;
    int include_usage;
    int continuous_usage;   /* stream_options.continuous_usage_stats (vLLM's; needs include_usage) */
    int seed_given;
    char *stop_store[EA_MAX_STOP]; /* owns */
    struct ea_grammar *grammar; /* owns a reference: structured output (constraint.h), NULL: none */
    char *grammar_src;          /* owns: its source for the other ranks (ea_oai_constraint_source) */
    int n_grammar_src;
    ea_req_params params;   /* complete after prepare; borrows prompt_ids and stop_store */
    int n;                  /* choices per prompt */
    int echo;               /* completions: the prompt text before each choice's text */
    int prompt_is_ids;      /* completions: the prompts were token ids (echo decodes them) */
    int add_special;        /* add_special_tokens (vLLM's): the encoder adds BOS/EOS as the tokenizer says;
                               default 1 for completions, 0 for chat (its template writes them) */
    int want_prompt_lp;     /* prompt_logprobs (vLLM's) given: each prompt token's logprob, rank and */
    int prompt_lp_top;      /* this many alternatives (non-streaming only) */
    int gen_top;            /* top alternatives of generated tokens as asked (params.top_logprobs is
                               raised to prompt_lp_top when that is more: the PROMPT events use it) */
    int truncate;           /* truncate_prompt_tokens (vLLM's): a longer prompt keeps its last `truncate`
                               tokens (its special tokens kept); -1: the context length; 0: not given */
    ea_oai_prompt *more;    /* owns: (n_more) batched prompts after the first (prompt_text/prompt_ids) */
    int n_more;
    ea_logit_bias *bias_store; /* owns: params.bias */
    /* chat */
    json_t *tools;          /* owns a reference; NULL: none */
    ea_tool_choice tool_choice;
    char *tool_name;        /* owns: the function of a named tool_choice */
    int parallel_tool_calls; /* 0: only the first call is returned */
    json_t *template_vars;  /* owns: chat_template_kwargs (and tools) for the template; NULL: none */
    int add_generation_prompt, agp_given, continue_final;
    char *forced_text;      /* owns: the test hook's text (encoded by prepare into params.forced) */
    int32_t *forced_ids;    /* owns */
    /* after prepare: every choice's parameters, prompt-major (choice p * n + j: prompt p,
     * seed params.sp.seed + j); borrow the prompts' ids */
    ea_req_params *choices; /* owns the array */
    int n_choices;
} ea_oai_request;

int ea_oai_parse(ea_oai_kind kind, const char *body, size_t len, ea_oai_request *r, ea_oai_error *e);
/* seed is used when the request gave none. ctx_len: positions per sequence. */
/* kv_tokens: what the whole KV cache holds (0 = no bound); a request whose prompt +
 * max_tokens exceeds it could never finish and is refused (400) here, and the
 * default max_tokens is cut to fit it. */
int ea_oai_prepare(ea_oai_request *r, const ea_text_ops *ops, int ctx_len, int kv_tokens, uint64_t seed,
                   ea_oai_error *e);
void ea_oai_request_deinit(ea_oai_request *r);

/* /tokenize and /detokenize (vLLM's shapes):
 *   {"prompt": "..."} or {"messages": [...], "add_generation_prompt": true}
 *     -> {"count": n, "max_model_len": ctx, "tokens": [...]}
 *   {"tokens": [...]} -> {"prompt": "..."} */
int ea_oai_tokenize(const char *body, size_t len, const ea_text_ops *ops, int ctx_len, ea_sbuf *out,
                    ea_oai_error *e);
int ea_oai_detokenize(const char *body, size_t len, const ea_text_ops *ops, ea_sbuf *out, ea_oai_error *e);
void ea_oai_render_models(const char *model, int ctx_len, long created, ea_sbuf *out);
/* GET /v1/models/{id}: the one model object of the list above */
void ea_oai_render_model(const char *model, int ctx_len, long created, ea_sbuf *out);

/* One choice of a response (openai_render.c). */
typedef struct {
    ea_sbuf text;           /* non-streaming: the content (completions: the text, echo first) */
    ea_sbuf reasoning;      /* non-streaming chat: reasoning_content */
    json_t *calls;          /* owns: tool_calls so far (OpenAI's objects); NULL: none */
    json_t *lp;             /* non-streaming logprobs so far (owns); NULL without logprobs */
    size_t text_offset;     /* completions logprobs text_offset */
    size_t prompt_offset;   /* echo with logprobs: text_offset of the next prompt token */
    int echo_sent;          /* streaming echo with logprobs: the echo chunk went out */
    ea_chat_split split;    /* chat: reasoning / tool-call split of the text */
    ea_event done;          /* the DONE event (finish, usage) once it came */
    int finished;
    int n_prompt, n_gen;    /* streaming with continuous usage: the prompt's tokens, tokens so far */
    json_t *plp;            /* owns: prompt_logprobs (vLLM's) so far; NULL: not asked */
} ea_oai_choice;

typedef struct {
    ea_oai_kind kind;
    char id[48];            /* cmpl-<32 hex> / chatcmpl-<32 hex>, random (unique across restarts) */
    long created;           /* unix seconds */
    const char *model;      /* borrows */
    int logprobs, top_logprobs, include_usage;
    int continuous_usage;   /* with include_usage: every chunk has its choice's usage so far */
    int plp_top;            /* prompt_logprobs: alternatives per prompt token; -1: not asked */
    char *stop[EA_MAX_STOP]; /* owns: the request's stop strings, for stop_reason */
    int n_stop;
    int n;                  /* choices per prompt (usage counts each prompt once) */
    int parse_tools;        /* chat: tool calls are split out of the text */
    int parallel_tool_calls;
    const ea_text_ops *ops; /* borrows: token strings for logprobs */
    ea_oai_choice *ch;      /* owns: (n_ch) */
    int n_ch;
    char **echo;            /* owns: (n_ch / n) prompt texts to echo; NULL: no echo */
    int prompt_lp;          /* echo with logprobs: PROMPT events come first; streaming sends the echo
                               with their logprobs before the choice's first token */
    ea_chat_delta scratch;  /* chat: one delta's split */
} ea_oai_output;

void ea_oai_output_init(ea_oai_output *o, const ea_oai_request *r, const char *model,
                        long created, const ea_text_ops *ops);
void ea_oai_output_deinit(ea_oai_output *o);
/* Non-streaming: add choice c's TOKEN and DONE events; render the body once every choice is done. */
void ea_oai_output_add(ea_oai_output *o, int c, const ea_event *tok);
/* Choice c's PROMPT event (echo with logprobs), streaming or not: kept for the echo. */
void ea_oai_output_prompt(ea_oai_output *o, int c, const ea_event *ev);
void ea_oai_output_done(ea_oai_output *o, int c, const ea_event *done);
void ea_oai_render_final(ea_oai_output *o, ea_sbuf *out);
/* Streaming. start: chat's first chunk per choice (role); completions: the echo. */
void ea_oai_stream_start(ea_oai_output *o, ea_sbuf *out);
/* Chunks for choice c's TOKEN event; nothing when it carries no text and no logprobs are wanted. */
void ea_oai_stream_token(ea_oai_output *o, int c, const ea_event *tok, ea_sbuf *out);
/* Choice c is done: what was held back, then its finish chunk. */
void ea_oai_stream_done(ea_oai_output *o, int c, const ea_event *done, ea_sbuf *out);
/* After every choice is done: the usage chunk (include_usage), then data: [DONE]. */
void ea_oai_stream_end(ea_oai_output *o, ea_sbuf *out);
/* An error after the stream started: data: {"error": ...} then data: [DONE]. */
void ea_oai_stream_error(const ea_oai_error *e, ea_sbuf *out);

const char *ea_oai_finish_name(ea_finish f);
/* Map a scheduler status (from submit or an ERROR event) to an OpenAI error. */
void ea_oai_error_from_status(ea_status s, const char *msg, ea_oai_error *e);

#endif
