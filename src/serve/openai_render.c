/*
 * openai_render.c — the response side of openai.h: error bodies, /v1/models,
 * the non-streaming body of a completion and its SSE chunks.
 *
 * Invariants: output strings are always valid UTF-8 (bad bytes become
 * U+FFFD, ea__oai_jstr), and numbers are finite (a -inf logprob is written as
 * -9999.0, as vLLM does). An ea_oai_output belongs to one request on one
 * thread.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "serve/openai.h"
#include "serve/openai_impl.h"

/* A JSON string of arbitrary bytes (cleaned to UTF-8). */
json_t *ea__oai_jstr(const char *s, size_t n) {
    ea_sbuf b = {0};
    ea_sbuf_append_utf8(&b, s, n);
    json_t *v = b.failed ? NULL : json_stringn(b.data ? b.data : "", b.len);
    ea_sbuf_deinit(&b);
    return v;
}

static json_t *jnum(double v) { return json_real(isfinite(v) ? v : -9999.0); }

void ea_oai_render_error(const ea_oai_error *e, ea_sbuf *out) {
    json_t *err = json_object();
    json_object_set_new(err, "message", ea__oai_jstr(e->message, strlen(e->message)));
    json_object_set_new(err, "type", json_string(e->type));
    json_object_set_new(err, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code[0] ? json_string(e->code) : json_null());
    json_t *root = json_pack("{s:o}", "error", err);
    ea_sbuf_json(out, root);
    json_decref(root);
}

static json_t *model_object(const char *model, int ctx_len, long created) {
    return json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", model, "object", "model", "created", (json_int_t)created,
                     "owned_by", "eaas", "max_model_len", ctx_len);
}

void ea_oai_render_models(const char *model, int ctx_len, long created, ea_sbuf *out) {
    json_t *o = json_pack("{s:s,s:[o]}", "object", "list", "data", model_object(model, ctx_len, created));
    ea_sbuf_json(out, o);
    json_decref(o);
}

void ea_oai_render_model(const char *model, int ctx_len, long created, ea_sbuf *out) {
    json_t *o = model_object(model, ctx_len, created);
    ea_sbuf_json(out, o);
    json_decref(o);
}

/* ---- responses ------------------------------------------------------------------- */

const char *ea_oai_finish_name(ea_finish f) {
    switch (f) {
    case EA_FINISH_STOP: return "stop";
    case EA_FINISH_LENGTH: return "length";
    case EA_FINISH_CANCELLED: return "abort";
    default: return NULL;
    }
}

/* A response id like vLLM's: the prefix and 128 random bits as 32 hex digits, so ids
 * do not repeat across requests or restarts. Without a random source (never seen on
 * Linux) the bits come from the clock and a counter, still unique in this process. */
static void response_id(char *out, size_t n, const char *prefix) {
    uint8_t b[16];
    if (ea_random_bytes(b, sizeof b) != EA_OK) {
        static _Atomic uint64_t ctr;
        uint64_t x[2] = {ea_now_ns(), ++ctr};
        memcpy(b, x, sizeof b);
    }
    int k = snprintf(out, n, "%s-", prefix);
    for (size_t i = 0; i < sizeof b && k > 0 && (size_t)k + 2 < n; i++) k += snprintf(out + k, n - (size_t)k, "%02x", b[i]);
}

/* The text echoed before prompt p's choices: the prompt as given, or its ids decoded. */
static char *echo_text(const ea_oai_request *r, const ea_text_ops *ops, int p) {
    const char *t = p == 0 ? r->prompt_text : r->more[p - 1].text;
    if (t) return ea_strdup(t);
    const int32_t *ids = p == 0 ? r->prompt_ids : r->more[p - 1].ids;
    int n = p == 0 ? r->n_prompt : r->more[p - 1].n_ids;
    char *out = NULL;
    size_t len;
    if (!ops || !ops->decode || ops->decode(ops->ctx, ids, n, &out, &len) != EA_OK) {
        ea_free(out);
        return ea_strdup("");
    }
    return out;
}

void ea_oai_output_init(ea_oai_output *o, const ea_oai_request *r, const char *model, long created,
                        const ea_text_ops *ops) {
    memset(o, 0, sizeof *o);
    o->kind = r->kind;
    response_id(o->id, sizeof o->id, r->kind == EA_OAI_CHAT ? "chatcmpl" : "cmpl");
    o->created = created;
    o->model = model;
    o->logprobs = r->params.logprobs;
    o->top_logprobs = r->want_prompt_lp ? r->gen_top : r->params.top_logprobs;
    o->plp_top = r->want_prompt_lp ? r->prompt_lp_top : -1;
    o->include_usage = r->include_usage;
    o->continuous_usage = r->include_usage && r->continuous_usage;
    for (int i = 0; i < r->params.n_stop && i < EA_MAX_STOP; i++)
        if ((o->stop[o->n_stop] = ea_strdup(r->params.stop[i]))) o->n_stop++;
    o->ops = ops;
    o->n = r->n > 0 ? r->n : 1;
    o->n_ch = r->n_choices > 0 ? r->n_choices : 1;
    o->parse_tools = r->kind == EA_OAI_CHAT && r->tools && r->tool_choice != EA_TOOL_CHOICE_NONE && ops &&
                     ops->tool_format != EA_TOOL_FMT_NONE;
    o->parallel_tool_calls = r->parallel_tool_calls;
    o->ch = ea_calloc((size_t)o->n_ch, sizeof *o->ch);
    if (!o->ch) { /* no memory: one choice on the stack would be worse; render nothing */
        o->n_ch = 0;
        return;
    }
    ea_reasoning_mode rmode = ops && r->kind == EA_OAI_CHAT ? ops->reasoning : EA_REASONING_NONE;
    /* the grammar of a forced call writes it at once, unless it waits for the think block to close
     * (grammar_after_think): then no think block is open, whatever the prompt ends with */
    int forced = o->parse_tools && (r->tool_choice == EA_TOOL_CHOICE_REQUIRED || r->tool_choice == EA_TOOL_CHOICE_NAMED) &&
                 !r->params.grammar_after_think;
    int open_think = ea_prompt_opens_think(r->prompt_text);
    for (int c = 0; c < o->n_ch; c++) {
        o->ch[c].n_prompt = r->choices ? r->choices[c].n_prompt : r->n_prompt;
        ea_chat_split_init(&o->ch[c].split, rmode, o->parse_tools ? ops->tool_format : EA_TOOL_FMT_NONE);
        ea_chat_split_set_tools(&o->ch[c].split, r->tools);
        if (forced || open_think) ea_chat_split_think_open(&o->ch[c].split, !forced);
    }
    if (r->echo && (o->echo = ea_calloc((size_t)(o->n_ch / o->n), sizeof *o->echo)))
        for (int p = 0; p < o->n_ch / o->n; p++) o->echo[p] = echo_text(r, ops, p);
    o->prompt_lp = o->echo && r->params.logprobs;
}

void ea_oai_output_deinit(ea_oai_output *o) {
    for (int c = 0; c < o->n_ch; c++) {
        ea_oai_choice *ch = &o->ch[c];
        ea_sbuf_deinit(&ch->text);
        ea_sbuf_deinit(&ch->reasoning);
        json_decref(ch->calls);
        json_decref(ch->lp);
        json_decref(ch->plp);
        ea_chat_split_deinit(&ch->split);
    }
    for (int i = 0; i < o->n_stop; i++) ea_free(o->stop[i]);
    for (int p = 0; o->echo && p < o->n_ch / o->n; p++) ea_free(o->echo[p]);
    ea_free(o->echo);
    ea_free(o->ch);
    ea_chat_delta_deinit(&o->scratch);
    memset(o, 0, sizeof *o);
}

/* The raw bytes of one token. */
static char *token_bytes(const ea_oai_output *o, int32_t id, size_t *len) {
    char *t = NULL;
    *len = 0;
    if (o->ops && o->ops->decode && o->ops->decode(o->ops->ctx, &id, 1, &t, len) == EA_OK && t) return t;
    ea_free(t);
    *len = 0;
    return NULL;
}

static json_t *byte_array(const char *t, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((unsigned char)t[i]));
    return a;
}

/* Chat: one entry of logprobs.content. */
static json_t *chat_lp_entry(const ea_oai_output *o, int32_t id, float lp) {
    size_t n;
    char *t = token_bytes(o, id, &n);
    json_t *v = json_pack("{s:o,s:o,s:o}", "token", ea__oai_jstr(t ? t : "", n), "logprob", jnum(lp), "bytes",
                          byte_array(t, n));
    ea_free(t);
    return v;
}

/* Add one TOKEN event's logprobs to lp (chat: {"content": [...]}; completions:
 * {"tokens", "token_logprobs", "top_logprobs", "text_offset"}). */
static void add_logprobs(const ea_oai_output *o, json_t *lp, const ea_event *ev, size_t text_offset) {
    if (o->kind == EA_OAI_CHAT) {
        json_t *entry = chat_lp_entry(o, ev->token, ev->logprob);
        json_t *top = json_array();
        for (int i = 0; i < ev->n_top && i < o->top_logprobs; i++)
            json_array_append_new(top, chat_lp_entry(o, ev->top_ids[i], ev->top_lp[i]));
        json_object_set_new(entry, "top_logprobs", top);
        json_array_append_new(json_object_get(lp, "content"), entry);
        return;
    }
    size_t n;
    char *t = token_bytes(o, ev->token, &n);
    json_array_append_new(json_object_get(lp, "tokens"), ea__oai_jstr(t ? t : "", n));
    ea_free(t);
    if (isnan(ev->logprob)) { /* the prompt's first token: no context, no logprob */
        json_array_append_new(json_object_get(lp, "token_logprobs"), json_null());
        json_array_append_new(json_object_get(lp, "top_logprobs"), json_null());
        json_array_append_new(json_object_get(lp, "text_offset"), json_integer((json_int_t)text_offset));
        return;
    }
    json_array_append_new(json_object_get(lp, "token_logprobs"), jnum(ev->logprob));
    json_t *top = json_object();
    for (int i = 0; i < ev->n_top && i < o->top_logprobs; i++) {
        t = token_bytes(o, ev->top_ids[i], &n);
        json_t *key = ea__oai_jstr(t ? t : "", n);
        ea_free(t);
        if (key && !json_object_get(top, json_string_value(key)))
            json_object_set_new(top, json_string_value(key), jnum(ev->top_lp[i]));
        json_decref(key);
    }
    json_array_append_new(json_object_get(lp, "top_logprobs"), top);
    json_array_append_new(json_object_get(lp, "text_offset"), json_integer((json_int_t)text_offset));
}

static json_t *new_logprobs(ea_oai_kind kind) {
    if (kind == EA_OAI_CHAT) return json_pack("{s:[]}", "content");
    return json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

/* A tool call's id: call_ and 24 random hex digits (as vLLM's random ids);
 * a format whose calls carry their own id (Kimi K2's) keeps the model's. */
static void call_id(char *out, size_t n) {
    uint8_t b[12];
    if (ea_random_bytes(b, sizeof b) != EA_OK) {
        static _Atomic uint64_t ctr;
        uint64_t x = ea_now_ns() ^ ++ctr;
        memset(b, 0, sizeof b);
        memcpy(b, &x, sizeof x);
    }
    int k = snprintf(out, n, "call_");
    for (size_t i = 0; i < sizeof b && k > 0 && (size_t)k + 2 < n; i++) k += snprintf(out + k, n - (size_t)k, "%02x", b[i]);
}

/* The calls of one delta as OpenAI tool_call objects, appended to ch->calls; with
 * parallel_tool_calls false only the first call of the choice is kept. Returns the
 * index in ch->calls of the first new one. */
static size_t take_calls(ea_oai_output *o, ea_oai_choice *ch, const json_t *calls) {
    if (!ch->calls) ch->calls = json_array();
    size_t first = json_array_size(ch->calls), i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        if (!o->parallel_tool_calls && json_array_size(ch->calls) >= 1) break;
        char id[48] = "";
        const char *model_id = json_string_value(json_object_get(c, "id")); /* Kimi's functions.NAME:IDX */
        if (!model_id) call_id(id, sizeof id);
        json_array_append_new(ch->calls, json_pack("{s:s,s:s,s:{s:O,s:O}}", "id", model_id ? model_id : id, "type",
                                                   "function", "function",
                                                   "name", json_object_get(c, "name"), "arguments",
                                                   json_object_get(c, "arguments")));
    }
    return first;
}

/* Chat: one delta's split (o->scratch) into ch's whole texts (non-streaming). */
static void keep_split(ea_oai_output *o, ea_oai_choice *ch) {
    ea_sbuf_append(&ch->text, o->scratch.content.data, o->scratch.content.len);
    ea_sbuf_append(&ch->reasoning, o->scratch.reasoning.data, o->scratch.reasoning.len);
    take_calls(o, ch, o->scratch.calls);
}

/* Echo with logprobs: generated tokens' text_offset counts the echoed text too. */
static size_t echo_len(const ea_oai_output *o, int c) {
    return o->prompt_lp && o->echo[c / o->n] ? strlen(o->echo[c / o->n]) : 0;
}

/* One {token id: {logprob, rank, decoded_token}} entry of vLLM's prompt_logprobs. */
static void plp_put(const ea_oai_output *o, json_t *entry, int32_t id, float lp, int rank) {
    char key[16];
    snprintf(key, sizeof key, "%d", (int)id);
    if (json_object_get(entry, key)) return;
    size_t n;
    char *t = token_bytes(o, id, &n);
    json_object_set_new(entry, key, json_pack("{s:o,s:i,s:o}", "logprob", jnum(lp), "rank", rank, "decoded_token",
                                              ea__oai_jstr(t ? t : "", n)));
    ea_free(t);
}

/* vLLM's prompt_logprobs: null for the first prompt token (no context), then the
 * token itself with its rank and its top plp_top alternatives (ranks 1..k). */
static void plp_add(const ea_oai_output *o, ea_oai_choice *ch, const ea_event *ev) {
    if (!ch->plp && !(ch->plp = json_array())) return;
    if (isnan(ev->logprob)) {
        json_array_append_new(ch->plp, json_null());
        return;
    }
    json_t *entry = json_object();
    plp_put(o, entry, ev->token, ev->logprob, ev->rank);
    for (int i = 0; i < ev->n_top && i < o->plp_top; i++) plp_put(o, entry, ev->top_ids[i], ev->top_lp[i], i + 1);
    json_array_append_new(ch->plp, entry);
}

void ea_oai_output_prompt(ea_oai_output *o, int c, const ea_event *ev) {
    if (c < 0 || c >= o->n_ch) return;
    ea_oai_choice *ch = &o->ch[c];
    if (o->plp_top >= 0) plp_add(o, ch, ev);
    if (!o->prompt_lp) return;
    if (!ch->lp) ch->lp = new_logprobs(o->kind);
    add_logprobs(o, ch->lp, ev, ch->prompt_offset);
    size_t n;
    ea_free(token_bytes(o, ev->token, &n)); /* offsets: the tokens' bytes, as the tokens array shows them */
    ch->prompt_offset += n;
}

void ea_oai_output_add(ea_oai_output *o, int c, const ea_event *tok) {
    if (c < 0 || c >= o->n_ch) return;
    ea_oai_choice *ch = &o->ch[c];
    if (o->logprobs) {
        if (!ch->lp) ch->lp = new_logprobs(o->kind);
        add_logprobs(o, ch->lp, tok, echo_len(o, c) + ch->text.len);
    }
    if (o->kind != EA_OAI_CHAT) {
        ea_sbuf_append(&ch->text, tok->text, (size_t)tok->text_len);
        return;
    }
    ea_chat_split_feed(&ch->split, tok->text, (size_t)tok->text_len, &o->scratch);
    keep_split(o, ch);
}

void ea_oai_output_done(ea_oai_output *o, int c, const ea_event *done) {
    if (c < 0 || c >= o->n_ch) return;
    ea_oai_choice *ch = &o->ch[c];
    if (o->kind == EA_OAI_CHAT) {
        ea_chat_split_finish(&ch->split, &o->scratch);
        keep_split(o, ch);
    }
    ch->done = *done;
    ch->finished = 1;
}

/* Usage over all choices: each prompt's tokens once (its first choice's), every choice's completion. */
static json_t *usage_json(const ea_oai_output *o) {
    int pt = 0, ct = 0, cached = 0;
    for (int c = 0; c < o->n_ch; c++) {
        const ea_event *d = &o->ch[c].done;
        if (c % o->n == 0) pt += d->prompt_tokens, cached += d->cached_tokens;
        ct += d->completion_tokens;
    }
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", pt, "completion_tokens", ct, "total_tokens", pt + ct,
                     "prompt_tokens_details", "cached_tokens", cached);
}

static json_t *envelope(const ea_oai_output *o, const char *object) {
    return json_pack("{s:s,s:s,s:I,s:s}", "id", o->id, "object", object, "created", (json_int_t)o->created, "model",
                     o->model);
}

/* A choice that called tools finishes with "tool_calls", unless max_tokens cut it
 * ("length": what followed the calls may be a call cut short; vLLM says
 * "tool_calls" whenever calls were parsed, OpenAI "length"). */
static json_t *finish_json(const ea_oai_choice *ch) {
    if (json_array_size(ch->calls) > 0 && ch->done.finish != EA_FINISH_CANCELLED && ch->done.finish != EA_FINISH_LENGTH)
        return json_string("tool_calls");
    const char *n = ea_oai_finish_name(ch->done.finish);
    return n ? json_string(n) : json_null();
}

/* vLLM's stop_reason: the stop string or the stop_token_ids id that ended the
 * choice; null for EOS, length, tool calls, cancellation. */
static json_t *stop_reason_json(const ea_oai_output *o, const ea_oai_choice *ch) {
    if (ch->done.finish != EA_FINISH_STOP) return json_null();
    if (ch->done.stop_index >= 0 && ch->done.stop_index < o->n_stop) return json_string(o->stop[ch->done.stop_index]);
    if (ch->done.stop_id >= 0) return json_integer(ch->done.stop_id);
    return json_null();
}

static json_t *sbuf_str(const ea_sbuf *b) { return ea__oai_jstr(b->data ? b->data : "", b->len); }

static json_t *chat_message(const ea_oai_output *o, const ea_oai_choice *ch) {
    int calls = json_array_size(ch->calls) > 0;
    json_t *m = json_pack("{s:s,s:o}", "role", "assistant", "content",
                          calls && ch->text.len == 0 ? json_null() : sbuf_str(&ch->text));
    if (o->ops && o->ops->reasoning != EA_REASONING_NONE)
        json_object_set_new(m, "reasoning_content", ch->reasoning.len ? sbuf_str(&ch->reasoning) : json_null());
    if (calls) json_object_set(m, "tool_calls", ch->calls);
    return m;
}

void ea_oai_render_final(ea_oai_output *o, ea_sbuf *out) {
    json_t *choices = json_array();
    for (int c = 0; c < o->n_ch; c++) {
        ea_oai_choice *ch = &o->ch[c];
        json_t *lp = ch->lp ? json_incref(ch->lp) : o->logprobs ? new_logprobs(o->kind) : json_null();
        json_t *choice;
        if (o->kind == EA_OAI_CHAT) {
            choice = json_pack("{s:i,s:o,s:o,s:o,s:o}", "index", c, "message", chat_message(o, ch), "logprobs", lp,
                               "finish_reason", finish_json(ch), "stop_reason", stop_reason_json(o, ch));
        } else {
            ea_sbuf t = {0};
            if (o->echo) ea_sbuf_puts(&t, o->echo[c / o->n]);
            ea_sbuf_append(&t, ch->text.data ? ch->text.data : "", ch->text.len);
            choice = json_pack("{s:i,s:o,s:o,s:o,s:o}", "index", c, "text", sbuf_str(&t), "logprobs", lp,
                               "finish_reason", finish_json(ch), "stop_reason", stop_reason_json(o, ch));
            if (o->plp_top >= 0)
                json_object_set_new(choice, "prompt_logprobs", ch->plp ? json_incref(ch->plp) : json_array());
            ea_sbuf_deinit(&t);
        }
        json_array_append_new(choices, choice);
    }
    json_t *root = envelope(o, o->kind == EA_OAI_CHAT ? "chat.completion" : "text_completion");
    json_object_set_new(root, "choices", choices);
    if (o->kind == EA_OAI_CHAT && o->plp_top >= 0) /* vLLM's: the prompt's, once, at the top level */
        json_object_set_new(root, "prompt_logprobs", o->n_ch && o->ch[0].plp ? json_incref(o->ch[0].plp) : json_array());
    json_object_set_new(root, "usage", usage_json(o));
    ea_sbuf_json(out, root);
    json_decref(root);
}

static void sse(ea_sbuf *out, json_t *chunk) {
    ea_sbuf_puts(out, "data: ");
    ea_sbuf_json(out, chunk);
    ea_sbuf_puts(out, "\n\n");
    json_decref(chunk);
}

/* Continuous usage (vLLM's continuous_usage_stats): choice c's prompt and the
 * tokens it has so far (its DONE event's counts once it came). */
static json_t *choice_usage(const ea_oai_output *o, int c) {
    const ea_oai_choice *ch = &o->ch[c];
    int pt = ch->finished ? ch->done.prompt_tokens : ch->n_prompt;
    int ct = ch->finished ? ch->done.completion_tokens : ch->n_gen;
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", pt, "completion_tokens", ct, "total_tokens", pt + ct);
}

/* A chunk with choice c; delta is chat's delta object or completions' text. */
static json_t *chunk(const ea_oai_output *o, int c, json_t *delta, json_t *lp, json_t *finish) {
    json_t *root = envelope(o, o->kind == EA_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    json_t *choice = o->kind == EA_OAI_CHAT
                         ? json_pack("{s:i,s:o,s:o,s:o}", "index", c, "delta", delta, "logprobs", lp, "finish_reason", finish)
                         : json_pack("{s:i,s:o,s:o,s:o}", "index", c, "text", delta, "logprobs", lp, "finish_reason", finish);
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    if (o->include_usage) json_object_set_new(root, "usage", o->continuous_usage ? choice_usage(o, c) : json_null());
    return root;
}

void ea_oai_stream_start(ea_oai_output *o, ea_sbuf *out) {
    for (int c = 0; c < o->n_ch; c++) {
        if (o->kind == EA_OAI_CHAT)
            sse(out, chunk(o, c, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), json_null(), json_null()));
        else if (o->echo && !o->prompt_lp)
            sse(out, chunk(o, c, ea__oai_jstr(o->echo[c / o->n], strlen(o->echo[c / o->n])), json_null(), json_null()));
    }
}

/* Echo with logprobs, streaming: choice c's echo chunk, with the prompt's logprobs
 * (its PROMPT events came first), before its first token or its end. */
static void stream_echo(ea_oai_output *o, int c, ea_sbuf *out) {
    ea_oai_choice *ch = &o->ch[c];
    if (!o->prompt_lp || ch->echo_sent) return;
    ch->echo_sent = 1;
    json_t *lp = ch->lp ? ch->lp : new_logprobs(o->kind);
    ch->lp = NULL;
    sse(out, chunk(o, c, ea__oai_jstr(o->echo[c / o->n], strlen(o->echo[c / o->n])), lp, json_null()));
    ch->text_offset = echo_len(o, c);
}

/* Chat: the chunks of one split delta (o->scratch) of choice c: reasoning, content (with
 * lp, which is sent even when the content is held back), then each tool call as OpenAI
 * streams it: index, id, type, name and "" arguments, then the arguments. */
static void stream_split(ea_oai_output *o, int c, json_t *lp, ea_sbuf *out) {
    ea_oai_choice *ch = &o->ch[c];
    const ea_chat_delta *d = &o->scratch;
    if (d->reasoning.len)
        sse(out, chunk(o, c, json_pack("{s:o}", "reasoning_content", sbuf_str(&d->reasoning)), json_null(), json_null()));
    if (d->content.len || lp)
        sse(out, chunk(o, c, json_pack("{s:o}", "content", sbuf_str(&d->content)), lp ? lp : json_null(), json_null()));
    size_t first = take_calls(o, ch, d->calls);
    for (size_t k = first; k < json_array_size(ch->calls); k++) {
        json_t *call = json_array_get(ch->calls, k), *f = json_object_get(call, "function");
        json_t *head = json_pack("{s:[{s:i,s:O,s:s,s:{s:O,s:s}}]}", "tool_calls", "index", (int)k, "id",
                                 json_object_get(call, "id"), "type", "function", "function", "name",
                                 json_object_get(f, "name"), "arguments", "");
        sse(out, chunk(o, c, head, json_null(), json_null()));
        json_t *args = json_pack("{s:[{s:i,s:{s:O}}]}", "tool_calls", "index", (int)k, "function", "arguments",
                                 json_object_get(f, "arguments"));
        sse(out, chunk(o, c, args, json_null(), json_null()));
    }
}

void ea_oai_stream_token(ea_oai_output *o, int c, const ea_event *tok, ea_sbuf *out) {
    if (c < 0 || c >= o->n_ch) return;
    stream_echo(o, c, out);
    ea_oai_choice *ch = &o->ch[c];
    if (tok->token >= 0) ch->n_gen++; /* a token's later events (token -1) carry more of its text */
    size_t offset = ch->text_offset;
    ch->text_offset += (size_t)tok->text_len;
    if (tok->text_len == 0 && !o->logprobs) return;
    json_t *lp = NULL;
    if (o->logprobs) {
        lp = new_logprobs(o->kind);
        add_logprobs(o, lp, tok, offset);
    }
    if (o->kind == EA_OAI_CHAT) {
        ea_chat_split_feed(&ch->split, tok->text, (size_t)tok->text_len, &o->scratch);
        stream_split(o, c, lp, out);
        return;
    }
    sse(out, chunk(o, c, ea__oai_jstr(tok->text, (size_t)tok->text_len), lp ? lp : json_null(), json_null()));
}

void ea_oai_stream_done(ea_oai_output *o, int c, const ea_event *done, ea_sbuf *out) {
    if (c < 0 || c >= o->n_ch) return;
    stream_echo(o, c, out);
    ea_oai_choice *ch = &o->ch[c];
    if (o->kind == EA_OAI_CHAT) {
        ea_chat_split_finish(&ch->split, &o->scratch);
        stream_split(o, c, NULL, out);
    }
    ch->done = *done;
    ch->finished = 1;
    json_t *delta = o->kind == EA_OAI_CHAT ? json_object() : json_string("");
    json_t *fin = chunk(o, c, delta, json_null(), finish_json(ch));
    json_object_set_new(json_array_get(json_object_get(fin, "choices"), 0), "stop_reason", stop_reason_json(o, ch));
    sse(out, fin);
}

void ea_oai_stream_end(ea_oai_output *o, ea_sbuf *out) {
    if (o->include_usage) {
        json_t *root = envelope(o, o->kind == EA_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
        json_object_set_new(root, "choices", json_array());
        json_object_set_new(root, "usage", usage_json(o));
        sse(out, root);
    }
    ea_sbuf_puts(out, "data: [DONE]\n\n");
}

void ea_oai_stream_error(const ea_oai_error *e, ea_sbuf *out) {
    ea_sbuf_puts(out, "data: ");
    ea_oai_render_error(e, out);
    ea_sbuf_puts(out, "\n\ndata: [DONE]\n\n");
}
