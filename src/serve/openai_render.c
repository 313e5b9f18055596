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

void ea_oai_output_init(ea_oai_output *o, const ea_oai_request *r, const char *model, long created,
                        const ea_text_ops *ops) {
    memset(o, 0, sizeof *o);
    o->kind = r->kind;
    response_id(o->id, sizeof o->id, r->kind == EA_OAI_CHAT ? "chatcmpl" : "cmpl");
    o->created = created;
    o->model = model;
    o->logprobs = r->params.logprobs;
    o->top_logprobs = r->params.top_logprobs;
    o->include_usage = r->include_usage;
    o->ops = ops;
}

void ea_oai_output_deinit(ea_oai_output *o) {
    ea_sbuf_deinit(&o->text);
    json_decref(o->lp);
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

void ea_oai_output_add(ea_oai_output *o, const ea_event *tok) {
    if (o->logprobs) {
        if (!o->lp) o->lp = new_logprobs(o->kind);
        add_logprobs(o, o->lp, tok, o->text.len);
    }
    ea_sbuf_append(&o->text, tok->text, (size_t)tok->text_len);
}

static json_t *usage_json(const ea_event *done) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", done->prompt_tokens, "completion_tokens",
                     done->completion_tokens, "total_tokens", done->prompt_tokens + done->completion_tokens,
                     "prompt_tokens_details", "cached_tokens", done->cached_tokens);
}

static json_t *envelope(const ea_oai_output *o, const char *object) {
    return json_pack("{s:s,s:s,s:I,s:s}", "id", o->id, "object", object, "created", (json_int_t)o->created, "model",
                     o->model);
}

static json_t *finish_json(ea_finish f) {
    const char *n = ea_oai_finish_name(f);
    return n ? json_string(n) : json_null();
}

void ea_oai_render_final(ea_oai_output *o, const ea_event *done, ea_sbuf *out) {
    json_t *text = ea__oai_jstr(o->text.data ? o->text.data : "", o->text.len);
    json_t *lp = o->lp ? json_incref(o->lp) : o->logprobs ? new_logprobs(o->kind) : json_null();
    json_t *choice;
    json_t *root;
    if (o->kind == EA_OAI_CHAT) {
        choice = json_pack("{s:i,s:{s:s,s:o},s:o,s:o}", "index", 0, "message", "role", "assistant", "content", text,
                           "logprobs", lp, "finish_reason", finish_json(done->finish));
        root = envelope(o, "chat.completion");
    } else {
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "text", text, "logprobs", lp, "finish_reason",
                           finish_json(done->finish));
        root = envelope(o, "text_completion");
    }
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    json_object_set_new(root, "usage", usage_json(done));
    ea_sbuf_json(out, root);
    json_decref(root);
}

static void sse(ea_sbuf *out, json_t *chunk) {
    ea_sbuf_puts(out, "data: ");
    ea_sbuf_json(out, chunk);
    ea_sbuf_puts(out, "\n\n");
    json_decref(chunk);
}

/* A chunk with one choice; delta is chat's delta object or completions' text. */
static json_t *chunk(const ea_oai_output *o, json_t *delta, json_t *lp, json_t *finish) {
    json_t *root = envelope(o, o->kind == EA_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    json_t *choice = o->kind == EA_OAI_CHAT
                         ? json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "delta", delta, "logprobs", lp, "finish_reason", finish)
                         : json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "text", delta, "logprobs", lp, "finish_reason", finish);
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    if (o->include_usage) json_object_set_new(root, "usage", json_null());
    return root;
}

void ea_oai_stream_start(ea_oai_output *o, ea_sbuf *out) {
    if (o->kind != EA_OAI_CHAT) return;
    sse(out, chunk(o, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), json_null(), json_null()));
}

void ea_oai_stream_token(ea_oai_output *o, const ea_event *tok, ea_sbuf *out) {
    size_t offset = o->text_offset;
    o->text_offset += (size_t)tok->text_len;
    if (tok->text_len == 0 && !o->logprobs) return;
    json_t *lp = json_null();
    if (o->logprobs) {
        lp = new_logprobs(o->kind);
        add_logprobs(o, lp, tok, offset);
    }
    json_t *text = ea__oai_jstr(tok->text, (size_t)tok->text_len);
    json_t *delta = o->kind == EA_OAI_CHAT ? json_pack("{s:o}", "content", text) : text;
    sse(out, chunk(o, delta, lp, json_null()));
}

void ea_oai_stream_end(ea_oai_output *o, const ea_event *done, ea_sbuf *out) {
    json_t *delta = o->kind == EA_OAI_CHAT ? json_object() : json_string("");
    sse(out, chunk(o, delta, json_null(), finish_json(done->finish)));
    if (o->include_usage) {
        json_t *root = envelope(o, o->kind == EA_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
        json_object_set_new(root, "choices", json_array());
        json_object_set_new(root, "usage", usage_json(done));
        sse(out, root);
    }
    ea_sbuf_puts(out, "data: [DONE]\n\n");
}

void ea_oai_stream_error(const ea_oai_error *e, ea_sbuf *out) {
    ea_sbuf_puts(out, "data: ");
    ea_oai_render_error(e, out);
    ea_sbuf_puts(out, "\n\ndata: [DONE]\n\n");
}
