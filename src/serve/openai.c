/*
 * openai.c — the OpenAI request after parsing: errors as ea_oai_error, a
 * request's storage, ea_oai_prepare (chat template, tokens, lengths, the
 * choices), /tokenize and /detokenize. The request fields are parsed and
 * validated in openai_fields.c (see openai.h for the accepted fields and the
 * defaults); responses are rendered in openai_render.c.
 *
 * Invariants:
 *   - A failure names the field in `param` and in the message, with HTTP
 *     status 400 (the caller decides 401/404/413/503, which need server state).
 *   - Token ids from a client are checked against the vocabulary and the
 *     tokenizer (check_ids) before they reach the scheduler.
 *   - Strings it writes (/detokenize) are valid UTF-8 (ea__oai_jstr).
 *   - Nothing here keeps state between requests.
 */
#include "serve/openai.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "serve/constraint.h"
#include "serve/openai_impl.h"
#include "serve/tool_choice.h"

/* ---- errors ----------------------------------------------------------------- */

static const char *type_for_status(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

int ea_oai_fail(ea_oai_error *e, int status, const char *type, const char *param, const char *code,
                const char *fmt, ...) {
    memset(e, 0, sizeof *e);
    e->status = status;
    snprintf(e->type, sizeof e->type, "%s", type ? type : type_for_status(status));
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

void ea_oai_error_from_status(ea_status s, const char *msg, ea_oai_error *e) {
    const char *m = msg && msg[0] ? msg : ea_status_text(s);
    switch (s) {
    case EA_ERR_BUSY:
        ea_oai_fail(e, 503, "server_error", NULL, "overloaded", "server is busy: %s", m);
        break;
    case EA_ERR_INVALID_ARG:
    case EA_ERR_RANGE:
    case EA_ERR_FORMAT:
        ea_oai_fail(e, 400, NULL, NULL, NULL, "%s", m);
        break;
    case EA_ERR_TIMEOUT:
        ea_oai_fail(e, 504, "server_error", NULL, "timeout", "%s", m);
        break;
    case EA_ERR_CANCELLED:
        ea_oai_fail(e, 503, "server_error", NULL, "cancelled", "%s", m);
        break;
    case EA_ERR_UNAVAILABLE: /* an expert with no live replica (moe.h partial failure) */
        ea_oai_fail(e, 503, "server_error", NULL, "expert_unavailable", "%s", m);
        break;
    default:
        ea_oai_fail(e, 500, "server_error", NULL, NULL, "%s", m);
        break;
    }
}

/* ---- a request's storage ------------------------------------------------------ */

void ea_oai_request_deinit(ea_oai_request *r) {
    ea_free(r->model);
    ea_free(r->prompt_text);
    ea_free(r->prompt_ids);
    json_decref(r->messages);
    for (int i = 0; i < EA_MAX_STOP; i++) ea_free(r->stop_store[i]);
    for (int i = 0; i < r->n_more; i++) {
        ea_free(r->more[i].text);
        ea_free(r->more[i].ids);
    }
    ea_free(r->more);
    ea_free(r->bias_store);
    json_decref(r->tools);
    ea_free(r->tool_name);
    json_decref(r->template_vars);
    ea_free(r->forced_text);
    ea_free(r->forced_ids);
    ea_free(r->choices);
    ea_grammar_destroy(r->grammar);
    ea_free(r->grammar_src);
    memset(r, 0, sizeof *r);
}

/* ---- prepare: tokens, lengths, defaults ---------------------------------------- */

static int tok_fail(ea_oai_error *e, ea_status s, const char *what) {
    const char *m = ea_errmsg();
    if (s == EA_ERR_NOMEM) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    return ea_oai_fail(e, 400, NULL, what, NULL, "%s: %s", what, m[0] ? m : ea_status_text(s));
}

/* The one rule for token ids given by a client (prompt ids, /detokenize): below the
 * model's vocabulary and standing for a token of the tokenizer (tokenizer.h). */
static int check_ids(const int32_t *ids, int n, const ea_text_ops *ops, const char *param, ea_oai_error *e) {
    for (int i = 0; i < n; i++) {
        if (ops->vocab > 0 && ids[i] >= ops->vocab)
            return ea_oai_fail(e, 400, NULL, param, NULL, "'%s[%d]' = %d is not a token id (vocabulary size %d)", param,
                               i, (int)ids[i], ops->vocab);
        if (ops->has_token && !ops->has_token(ops->ctx, ids[i]))
            return ea_oai_fail(e, 400, NULL, param, NULL,
                               "'%s[%d]' = %d is not a token id (the tokenizer has no token for it: a padding row of "
                               "the model's vocabulary)",
                               param, i, (int)ids[i]);
    }
    return 0;
}

/* Replace the null contents of messages (assistant tool-call turns) with "". 1 if any was. */
static int null_contents_to_empty(json_t *messages) {
    size_t i;
    json_t *m;
    int any = 0;
    json_array_foreach(messages, i, m) {
        json_t *c = json_object_get(m, "content");
        if (c && json_is_null(c)) any |= json_object_set_new(m, "content", json_string("")) == 0;
    }
    return any;
}

/* The assistant calls' arguments (JSON text, as OpenAI sends them) parsed into
 * objects where they are JSON objects. */
static void arguments_to_objects(json_t *messages) {
    size_t i, k;
    json_t *m, *c;
    json_array_foreach(messages, i, m) {
        json_array_foreach(json_object_get(m, "tool_calls"), k, c) {
            json_t *f = json_object_get(c, "function"), *a = json_object_get(f, "arguments");
            json_t *o = json_is_string(a) ? json_loadb(json_string_value(a), json_string_length(a), 0, NULL) : NULL;
            if (json_is_object(o)) json_object_set_new(f, "arguments", o);
            else json_decref(o);
        }
    }
}

/* The chat prompt: the template over messages, tools and chat_template_kwargs. A
 * template that cannot take a null content (Qwen3's tests '</think>' in it) gets ""
 * instead, as vLLM passes. A template that writes each argument of a call
 * (Qwen3.5's <parameter=...> blocks) iterates them as a mapping: it gets them
 * parsed, as vLLM gives every template (the others get the client's text).
 * continue_final_message cuts the text after the last message's content
 * (transformers' rule: its last occurrence, whitespace-trimmed). */
static int render_prompt(ea_oai_request *r, const ea_text_ops *ops, ea_oai_error *e) {
    if (ops->tool_format == EA_TOOL_FMT_QWEN3_XML) arguments_to_objects(r->messages);
    ea_status s = ops->render_chat(ops->ctx, r->messages, r->template_vars, r->add_generation_prompt, &r->prompt_text);
    if (s != EA_OK && s != EA_ERR_NOMEM && null_contents_to_empty(r->messages)) {
        ea_free(r->prompt_text);
        r->prompt_text = NULL;
        s = ops->render_chat(ops->ctx, r->messages, r->template_vars, r->add_generation_prompt, &r->prompt_text);
    }
    if (s != EA_OK) return tok_fail(e, s, "messages");
    if (!r->continue_final) return 0;
    const char *c = json_string_value(json_object_get(json_array_get(r->messages, json_array_size(r->messages) - 1), "content"));
    size_t n = c ? strlen(c) : 0;
    while (n && strchr(" \t\r\n", c[n - 1])) n--;
    while (n && strchr(" \t\r\n", c[0])) c++, n--;
    if (n == 0)
        return ea_oai_fail(e, 400, NULL, "continue_final_message", NULL,
                           "'continue_final_message' needs the last message to have content to continue");
    char *at = NULL; /* the last occurrence of the trimmed content */
    for (char *p = r->prompt_text; (p = strchr(p, c[0])) != NULL; p++)
        if (strncmp(p, c, n) == 0) at = p;
    if (!at)
        return ea_oai_fail(e, 400, NULL, "continue_final_message", NULL,
                           "the chat template does not write the last message's content, so it cannot be continued");
    at[n] = 0;
    return 0;
}

/* Reasoning first, as vLLM orders them: a constrained chat answer whose prompt
 * left a think block open (or under --reasoning-parser deepseek_r1) thinks
 * freely, and the grammar applies from the token after the one that closes
 * the block. Without a one-token "</think>" in the vocabulary the grammar
 * applies from the first token, as before. */
static int gate_grammar(ea_oai_request *r, const ea_text_ops *ops, ea_oai_error *e) {
    if (!r->params.grammar || ops->reasoning == EA_REASONING_NONE ||
        (ops->reasoning != EA_REASONING_DEEPSEEK_R1 && !ea_prompt_opens_think(r->prompt_text)))
        return 0;
    int32_t *ids = NULL;
    int n = 0;
    ea_status s = ops->encode(ops->ctx, "</think>", 8, 0, &ids, &n);
    if (s != EA_OK) return tok_fail(e, s, "messages");
    if (n == 1) {
        r->params.grammar_after_think = 1;
        r->params.think_end = ids[0];
    }
    ea_free(ids);
    return 0;
}

/* Length checks of one prompt of n tokens; *room gets what is left of the context and cache. */
static int check_prompt_len(const ea_oai_request *r, int n, int ctx_len, int kv_tokens, int *room, ea_oai_error *e) {
    const char *what = r->kind == EA_OAI_CHAT ? "messages" : "prompt";
    if (n <= 0) return ea_oai_fail(e, 400, NULL, what, NULL, "the prompt is empty after tokenization");
    if (n >= ctx_len)
        return ea_oai_fail(e, 400, NULL, what, "context_length_exceeded",
                           "This model's maximum context length is %d tokens. However, your prompt has %d tokens "
                           "(leaving no room for the completion).",
                           ctx_len, n);
    *room = ctx_len - n;
    if (r->max_tokens > *room)
        return ea_oai_fail(e, 400, NULL, "max_tokens", "context_length_exceeded",
                           "This model's maximum context length is %d tokens. However, you requested %lld tokens "
                           "(%d in the prompt, %d for the completion). Reduce the prompt or max_tokens.",
                           ctx_len, (long long)n + r->max_tokens, n, r->max_tokens);
    if (kv_tokens > 0 && (long long)n + (r->max_tokens > 0 ? r->max_tokens : 1) > kv_tokens)
        return ea_oai_fail(e, 400, NULL, r->max_tokens > 0 ? "max_tokens" : what, NULL,
                           "This request can never fit in the server's KV cache, which holds %d tokens in all: "
                           "the prompt has %d tokens and max_tokens is %d (%lld in all). Reduce the prompt or "
                           "max_tokens, or start the server with a larger --kv-cache-mib.",
                           kv_tokens, n, r->max_tokens > 0 ? r->max_tokens : 1,
                           (long long)n + (r->max_tokens > 0 ? r->max_tokens : 1));
    if (kv_tokens > 0 && *room > kv_tokens - n) *room = kv_tokens - n; /* the default fits the cache */
    return 0;
}

/* Encode (or check) one prompt given as text or ids. */
static int encode_prompt(ea_oai_request *r, const ea_text_ops *ops, const char *text, int32_t **ids, int *n,
                         ea_oai_error *e) {
    const char *what = r->kind == EA_OAI_CHAT ? "messages" : "prompt";
    if (!text) return check_ids(*ids, *n, ops, what, e);
    ea_status s = ops->encode(ops->ctx, text, strlen(text), r->add_special, ids, n);
    return s != EA_OK ? tok_fail(e, s, what) : 0;
}

/* truncate_prompt_tokens (vLLM's, which asks the tokenizer to truncate from the
 * left): a prompt of more than k tokens keeps its last k. A completions text
 * prompt keeps the special tokens its tokenizer added around the text (BOS,
 * add_special_tokens) and gives up text tokens instead, as a tokenizer
 * truncating to k does; its echo is then the kept tokens decoded (*text
 * freed), what the model continued. Chat prompts (templates write their own
 * specials) and id prompts keep their last k tokens. */
static int truncate_prompt(ea_oai_request *r, const ea_text_ops *ops, int ctx_len, char **text, int32_t *ids, int *n,
                           ea_oai_error *e) {
    int k = r->truncate < 0 ? ctx_len : r->truncate;
    if (r->truncate == 0 || *n <= k) return 0;
    int pre = 0, post = 0; /* special tokens the encoder added before and after the text */
    if (*text && r->add_special) {
        int32_t *c = NULL;
        int nc = 0;
        ea_status s = ops->encode(ops->ctx, *text, strlen(*text), 0, &c, &nc);
        if (s != EA_OK) return tok_fail(e, s, "prompt");
        for (pre = 0; pre <= *n - nc; pre++)
            if (memcmp(ids + pre, c, sizeof(int32_t) * (size_t)nc) == 0) break;
        ea_free(c);
        if (pre > *n - nc) pre = 0; /* the text's ids are not inside: no specials to keep */
        else post = *n - nc - pre;
        if (k <= pre + post)
            return ea_oai_fail(e, 400, NULL, "truncate_prompt_tokens", NULL,
                               "'truncate_prompt_tokens' (%d) leaves no room for the prompt's text beside its %d "
                               "special tokens",
                               k, pre + post);
    }
    int keep = k - pre - post, from = *n - post - keep; /* text tokens [from, from + keep) stay */
    memmove(ids + pre, ids + from, sizeof(int32_t) * (size_t)(keep + post));
    *n = k;
    if (*text && r->kind == EA_OAI_COMPLETIONS) {
        ea_free(*text);
        *text = NULL;
    }
    return 0;
}

/* The choices: prompt-major, choice j of a prompt seeded params.sp.seed + j (vLLM's
 * rule for n > 1), so choice 0 is the request with n = 1 and the same seed. */
static int make_choices(ea_oai_request *r, ea_oai_error *e) {
    int np = 1 + r->n_more;
    r->n_choices = np * r->n;
    if (!(r->choices = ea_calloc((size_t)r->n_choices, sizeof *r->choices)))
        return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    for (int p = 0; p < np; p++)
        for (int j = 0; j < r->n; j++) {
            ea_req_params *c = &r->choices[p * r->n + j];
            *c = r->params;
            if (p > 0) {
                c->prompt = r->more[p - 1].ids;
                c->n_prompt = r->more[p - 1].n_ids;
            }
            c->sp.seed = r->params.sp.seed + (uint64_t)j;
        }
    return 0;
}

int ea_oai_prepare(ea_oai_request *r, const ea_text_ops *ops, int ctx_len, int kv_tokens, uint64_t seed,
                   ea_oai_error *e) {
    if (r->forced_text && !ops->test_hooks)
        return ea_oai_fail(e, 400, NULL, "eaas_test_forced_text", NULL,
                           "unknown field 'eaas_test_forced_text' (a test hook, on only when the server runs with "
                           "EAAS_TEST_HOOKS=1)");
    if (r->kind == EA_OAI_CHAT) {
        if (r->tools && r->tool_choice != EA_TOOL_CHOICE_NONE && ops->tool_format == EA_TOOL_FMT_NONE)
            return ea_oai_fail(e, 400, NULL, "tools", NULL,
                               "this model's family has no tool-call parser, so tool calls could not be returned "
                               "(use tool_choice \"none\" or a qwen3/deepseek family model)");
        if (ea_tool_choice_grammar(r, ops->tool_format, e)) return -1;
        if (render_prompt(r, ops, e)) return -1;
        if (gate_grammar(r, ops, e)) return -1;
    }
    if (encode_prompt(r, ops, r->prompt_text, &r->prompt_ids, &r->n_prompt, e) ||
        truncate_prompt(r, ops, ctx_len, &r->prompt_text, r->prompt_ids, &r->n_prompt, e))
        return -1;
    for (int i = 0; i < r->n_more; i++)
        if (encode_prompt(r, ops, r->more[i].text, &r->more[i].ids, &r->more[i].n_ids, e) ||
            truncate_prompt(r, ops, ctx_len, &r->more[i].text, r->more[i].ids, &r->more[i].n_ids, e))
            return -1;
    int room;
    if (check_prompt_len(r, r->n_prompt, ctx_len, kv_tokens, &room, e)) return -1;
    for (int i = 0; i < r->n_more; i++) {
        int rm;
        if (check_prompt_len(r, r->more[i].n_ids, ctx_len, kv_tokens, &rm, e)) return -1;
        room = rm < room ? rm : room;
    }
    if (r->max_tokens == 0) r->max_tokens = r->kind == EA_OAI_COMPLETIONS && room > 16 ? 16 : room;
    if (r->params.min_tokens > r->max_tokens)
        return ea_oai_fail(e, 400, NULL, "min_tokens", NULL, "'min_tokens' (%d) must not exceed max_tokens (%d)",
                           r->params.min_tokens, r->max_tokens);
    if (check_ids(r->params.stop_ids, r->params.n_stop_ids, ops, "stop_token_ids", e)) return -1;
    for (int i = 0; i < r->params.n_bias; i++)
        if (check_ids(&r->params.bias[i].id, 1, ops, "logit_bias", e)) return -1;
    if (r->forced_text) {
        ea_status s = ops->encode(ops->ctx, r->forced_text, strlen(r->forced_text), 0, &r->forced_ids,
                                  &r->params.n_forced);
        if (s != EA_OK) return tok_fail(e, s, "eaas_test_forced_text");
        if (r->params.n_forced > r->max_tokens) r->params.n_forced = r->max_tokens;
        r->params.forced = r->forced_ids;
    }
    r->params.prompt = r->prompt_ids;
    r->params.n_prompt = r->n_prompt;
    r->params.max_tokens = r->max_tokens;
    if (!r->seed_given) r->params.sp.seed = seed;
    return make_choices(r, e);
}

/* ---- /tokenize, /detokenize, /v1/models ------------------------------------------ */

int ea_oai_tokenize(const char *body, size_t len, const ea_text_ops *ops, int ctx_len, ea_sbuf *out,
                    ea_oai_error *e) {
    json_t *root;
    if (ea__oai_parse_body(body, len, &root, e)) return -1;
    ea_oai_request r = {0};
    int rc = -1;
    if (ea__oai_field(root, "messages")) {
        r.kind = EA_OAI_CHAT;
        if (ea__oai_parse_messages(root, &r, e) || ea_oai_parse_tools(root, &r, e) || ea__oai_parse_chat_options(root, &r, e) ||
            render_prompt(&r, ops, e))
            goto done;
    } else {
        json_t *p = ea__oai_field(root, "prompt");
        if (!json_is_string(p)) {
            ea_oai_fail(e, 400, NULL, "prompt", NULL, "'prompt' (a string) or 'messages' is required");
            goto done;
        }
        if (!(r.prompt_text = ea_strndup(json_string_value(p), json_string_length(p)))) {
            ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
            goto done;
        }
    }
    static const char *const tokenize_fields[] = {"model", "prompt", "messages", "add_generation_prompt",
                                                  "add_special_tokens", "tools", "tool_choice", "parallel_tool_calls",
                                                  "chat_template_kwargs", "continue_final_message", NULL};
    if (ea__oai_refuse_unknown(root, r.kind, tokenize_fields, "", "/tokenize", e)) goto done;
    if (r.prompt_text[0]) {
        int add_special = r.kind == EA_OAI_COMPLETIONS;
        if (ea__oai_get_bool(root, "add_special_tokens", &add_special, e)) goto done;
        ea_status s = ops->encode(ops->ctx, r.prompt_text, strlen(r.prompt_text), add_special, &r.prompt_ids,
                                  &r.n_prompt);
        if (s != EA_OK) {
            tok_fail(e, s, "prompt");
            goto done;
        }
    }
    json_t *ids = json_array();
    for (int i = 0; i < r.n_prompt; i++) json_array_append_new(ids, json_integer(r.prompt_ids[i]));
    json_t *o = json_pack("{s:i,s:i,s:o}", "count", r.n_prompt, "max_model_len", ctx_len, "tokens", ids);
    ea_sbuf_json(out, o);
    json_decref(o);
    rc = 0;
done:
    ea_oai_request_deinit(&r);
    json_decref(root);
    return rc;
}

int ea_oai_detokenize(const char *body, size_t len, const ea_text_ops *ops, ea_sbuf *out, ea_oai_error *e) {
    json_t *root;
    if (ea__oai_parse_body(body, len, &root, e)) return -1;
    json_t *t = ea__oai_field(root, "tokens");
    int32_t *ids = NULL;
    int n = 0, rc = -1;
    char *text = NULL;
    size_t tlen = 0;
    static const char *const detokenize_fields[] = {"model", "tokens", NULL};
    if (!json_is_array(t)) {
        ea_oai_fail(e, 400, NULL, "tokens", NULL, "'tokens' must be an array of token ids");
        goto done;
    }
    if (ea__oai_refuse_unknown(root, EA_OAI_COMPLETIONS, detokenize_fields, "", "/detokenize", e)) goto done;
    if (json_array_size(t) > 0 &&
        (ea__oai_parse_ids(t, "tokens", &ids, &n, e) || check_ids(ids, n, ops, "tokens", e)))
        goto done;
    ea_status s = ops->decode(ops->ctx, ids, n, &text, &tlen);
    if (s != EA_OK) {
        tok_fail(e, s, "tokens");
        goto done;
    }
    json_t *o = json_pack("{s:o}", "prompt", ea__oai_jstr(text ? text : "", text ? tlen : 0));
    ea_sbuf_json(out, o);
    json_decref(o);
    rc = 0;
done:
    ea_free(ids);
    ea_free(text);
    json_decref(root);
    return rc;
}
