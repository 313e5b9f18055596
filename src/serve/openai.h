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
 * safety_identifier, metadata, store, service_tier, prompt_cache_key and, on
 * chat, parallel_tool_calls):
 *   model (string), prompt (completions: string, [string], or [int token ids]),
 *   messages (chat: [{role: system|developer|user|assistant|tool, content:
 *   string | [{type:"text", text}] | null}]), max_tokens, max_completion_tokens,
 *   temperature (>= 0), top_p (0,1], top_k (-1/0 off, or >= 1), min_p [0,1],
 *   seed (int), stop (string | [string], <= EA_MAX_STOP, each 1..255 bytes),
 *   n (only 1), stream (bool), stream_options.include_usage (only with stream),
 *   logprobs (completions: int 0..20; chat: bool), top_logprobs (chat: 0..20,
 *   needs logprobs), presence_penalty and frequency_penalty [-2,2],
 *   repetition_penalty (0, 100], ignore_eos (bool), stop_token_ids ([id],
 *   <= EA_MAX_STOP_IDS, checked as prompt ids), min_tokens (0..max_tokens),
 *   structured outputs: response_format (text, json_object, json_schema),
 *   guided_json, guided_choice, guided_regex, grammar / guided_grammar (GBNF) (constraint.h).
 * Refused with 400 because we would silently do something else: echo=true,
 * suffix, best_of > 1, tools/functions, logit_bias with entries.
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
    /* messages (validated JSON array of {role, content}) -> prompt text */
    ea_status (*render_chat)(void *ctx, const json_t *messages, int add_generation_prompt, char **text);
    int vocab; /* the model's vocabulary rows */
    /* 1 if id stands for a token (ea_tokenizer_has_token); NULL: every id below vocab does */
    int (*has_token)(void *ctx, int32_t id);
} ea_text_ops;

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
    int seed_given;
    char *stop_store[EA_MAX_STOP]; /* owns */
    struct ea_grammar *grammar; /* owns a reference: structured output (constraint.h), NULL: none */
    ea_req_params params;   /* complete after prepare; borrows prompt_ids and stop_store */
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

typedef struct {
    ea_oai_kind kind;
    char id[48];            /* cmpl-<32 hex> / chatcmpl-<32 hex>, random (unique across restarts) */
    long created;           /* unix seconds */
    const char *model;      /* borrows */
    int logprobs, top_logprobs, include_usage;
    const ea_text_ops *ops; /* borrows: token strings for logprobs */
    ea_sbuf text;           /* non-streaming: the whole completion */
    json_t *lp;             /* non-streaming logprobs so far (owns); NULL without logprobs */
    size_t text_offset;     /* completions logprobs text_offset */
} ea_oai_output;

void ea_oai_output_init(ea_oai_output *o, const ea_oai_request *r, const char *model,
                        long created, const ea_text_ops *ops);
void ea_oai_output_deinit(ea_oai_output *o);
/* Non-streaming: add a TOKEN event; render the body once DONE arrives. */
void ea_oai_output_add(ea_oai_output *o, const ea_event *tok);
void ea_oai_render_final(ea_oai_output *o, const ea_event *done, ea_sbuf *out);
/* Streaming. start: chat's first chunk (role); nothing for completions. */
void ea_oai_stream_start(ea_oai_output *o, ea_sbuf *out);
/* One chunk for a TOKEN event; nothing when the event carries no text and no logprobs are wanted. */
void ea_oai_stream_token(ea_oai_output *o, const ea_event *tok, ea_sbuf *out);
/* Finish chunk, usage chunk (include_usage), then data: [DONE]. */
void ea_oai_stream_end(ea_oai_output *o, const ea_event *done, ea_sbuf *out);
/* An error after the stream started: data: {"error": ...} then data: [DONE]. */
void ea_oai_stream_error(const ea_oai_error *e, ea_sbuf *out);

const char *ea_oai_finish_name(ea_finish f);
/* Map a scheduler status (from submit or an ERROR event) to an OpenAI error. */
void ea_oai_error_from_status(ea_status s, const char *msg, ea_oai_error *e);

#endif
