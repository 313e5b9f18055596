/*
 * openai.c — parse and validate OpenAI request bodies into ea_req_params
 * (see openai.h for the accepted fields and the defaults), errors as
 * ea_oai_error, /tokenize and /detokenize. Responses are rendered in
 * openai_render.c.
 *
 * Invariants:
 *   - Every field is checked for type and range before use; a failure names
 *     the field in `param` and in the message, with HTTP status 400 (the
 *     caller decides 401/404/413/503, which need server state).
 *   - JSON text comes from jansson, which rejects invalid UTF-8 and reports
 *     line/column; we pass that position on.
 *   - Strings it writes (/detokenize) are valid UTF-8 (ea__oai_jstr).
 *   - Nothing here keeps state between requests.
 */
#include "serve/openai.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- typed field access ------------------------------------------------------ */

/* A field that is absent or null counts as not given. */
static json_t *field(const json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *out, int *given,
                   ea_oai_error *e) {
    json_t *v = field(o, key);
    *given = v != NULL;
    if (!v) return 0;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (long long)json_real_value(v);
    } else {
        return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be an integer", key);
    }
    if (x < lo || x > hi)
        return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be in [%lld, %lld], got %lld", key, lo, hi, x);
    *out = x;
    return 0;
}

static int get_num(const json_t *o, const char *key, double lo, double hi, int lo_open, double *out,
                   ea_oai_error *e) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_number(v)) return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
        return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be in %s%g, %g], got %g", key, lo_open ? "(" : "[",
                           lo, hi, x);
    *out = x;
    return 0;
}

static int get_bool(const json_t *o, const char *key, int *out, ea_oai_error *e) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* ---- request parsing ----------------------------------------------------------- */

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
    memset(r, 0, sizeof *r);
}

/* The JSON path (e.g. "messages[0].content") of the first string in v holding a NUL
 * character, written to path; 0 if there is none. */
static int find_nul(const json_t *v, char *path, size_t n, size_t at) {
    if (json_is_string(v)) return strlen(json_string_value(v)) != json_string_length(v);
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int k = snprintf(path + at, at < n ? n - at : 0, "[%zu]", i);
            if (find_nul(json_array_get(v, i), path, n, at + (size_t)(k > 0 ? k : 0))) return 1;
        }
        return 0;
    }
    if (json_is_object(v)) {
        const char *key;
        const json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            int k = snprintf(path + at, at < n ? n - at : 0, "%s%s", at ? "." : "", key);
            if (find_nul(x, path, n, at + (size_t)(k > 0 ? k : 0))) return 1;
        }
    }
    return 0;
}

static int parse_body(const char *body, size_t len, json_t **root, ea_oai_error *e) {
    json_error_t je;
    /* NUL is parsed (so the error can name where it is), then refused: prompts and
     * messages are C strings downstream */
    *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!*root && strstr(je.text, "NUL"))
        return ea_oai_fail(e, 400, NULL, NULL, NULL,
                           "request body: strings and keys may not contain the NUL character (\\u0000) (line %d, "
                           "column %d)",
                           je.line, je.column);
    if (!*root)
        return ea_oai_fail(e, 400, NULL, NULL, NULL, "invalid JSON body: %s (line %d, column %d)", je.text,
                           je.line, je.column);
    char path[256] = "";
    if (find_nul(*root, path, sizeof path, 0)) {
        json_decref(*root);
        *root = NULL;
        return ea_oai_fail(e, 400, NULL, path, NULL,
                           "request body: strings may not contain the NUL character (\\u0000): '%s' does", path);
    }
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return ea_oai_fail(e, 400, NULL, NULL, NULL, "the request body must be a JSON object");
    }
    return 0;
}

/* ids from a JSON array of integers, each in [0, vocab) when vocab > 0 (checked again in prepare). */
static int parse_ids(const json_t *a, const char *param, int32_t **ids, int *n, ea_oai_error *e) {
    size_t na = json_array_size(a);
    if (na == 0) return ea_oai_fail(e, 400, NULL, param, NULL, "'%s' must not be empty", param);
    if (na > (size_t)INT_MAX / 2) return ea_oai_fail(e, 400, NULL, param, NULL, "'%s' is too long", param);
    int32_t *p = ea_malloc(na * sizeof *p);
    if (!p) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    for (size_t i = 0; i < na; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            ea_free(p);
            return ea_oai_fail(e, 400, NULL, param, NULL, "'%s[%zu]' must be a non-negative integer token id", param,
                               i);
        }
        p[i] = (int32_t)json_integer_value(v);
    }
    *ids = p;
    *n = (int)na;
    return 0;
}

/* One prompt: a non-empty string, or token ids. */
static int parse_one_prompt(const json_t *p, const char *param, char **text, int32_t **ids, int *n, ea_oai_error *e) {
    if (json_is_string(p)) {
        if (json_string_length(p) == 0) return ea_oai_fail(e, 400, NULL, param, NULL, "'%s' must not be empty", param);
        *text = ea_strndup(json_string_value(p), json_string_length(p));
        if (!*text) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        return 0;
    }
    if (json_is_array(p)) return parse_ids(p, param, ids, n, e);
    return ea_oai_fail(e, 400, NULL, param, NULL, "'%s' must be a string or an array of token ids", param);
}

/* prompt: a string, token ids, or a batch ([string] or [[ids]]) of up to
 * EA_OAI_MAX_CHOICES prompts; the first goes to prompt_text/prompt_ids, the rest to more. */
static int parse_prompt(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *p = field(root, "prompt");
    if (!p) return ea_oai_fail(e, 400, NULL, "prompt", NULL, "'prompt' is required");
    size_t np = 1;
    if (json_is_array(p) && json_array_size(p) >= 1 && !json_is_integer(json_array_get(p, 0))) {
        np = json_array_size(p);
        if (np > EA_OAI_MAX_CHOICES)
            return ea_oai_fail(e, 400, NULL, "prompt", NULL, "at most %d prompts in one request", EA_OAI_MAX_CHOICES);
        for (size_t i = 1; i < np; i++)
            if (json_is_string(json_array_get(p, i)) != json_is_string(json_array_get(p, 0)))
                return ea_oai_fail(e, 400, NULL, "prompt", NULL,
                                   "a batch of prompts must be all strings or all token id arrays");
        if (np > 1 && !(r->more = ea_calloc(np - 1, sizeof *r->more)))
            return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        r->n_more = (int)np - 1;
        for (size_t i = 1; i < np; i++) {
            char param[32];
            snprintf(param, sizeof param, "prompt[%zu]", i);
            ea_oai_prompt *q = &r->more[i - 1];
            if (parse_one_prompt(json_array_get(p, i), param, &q->text, &q->ids, &q->n_ids, e)) return -1;
        }
        p = json_array_get(p, 0);
    }
    r->prompt_is_ids = !json_is_string(p);
    return parse_one_prompt(p, np > 1 ? "prompt[0]" : "prompt", &r->prompt_text, &r->prompt_ids, &r->n_prompt, e);
}

/* Validate messages and copy them with content flattened to a string. */
static int parse_messages(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    static const char *roles[] = {"system", "developer", "user", "assistant", "tool"};
    json_t *m = field(root, "messages");
    if (!m) return ea_oai_fail(e, 400, NULL, "messages", NULL, "'messages' is required");
    if (!json_is_array(m)) return ea_oai_fail(e, 400, NULL, "messages", NULL, "'messages' must be an array");
    if (json_array_size(m) == 0) return ea_oai_fail(e, 400, NULL, "messages", NULL, "'messages' must not be empty");
    json_t *out = json_array();
    if (!out) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) {
            json_decref(out);
            return ea_oai_fail(e, 400, NULL, param, NULL, "'%s' must be an object", param);
        }
        json_t *role = json_object_get(msg, "role");
        int known = 0;
        for (size_t k = 0; json_is_string(role) && k < sizeof roles / sizeof roles[0]; k++)
            known |= strcmp(json_string_value(role), roles[k]) == 0;
        if (!known) {
            json_decref(out);
            snprintf(param, sizeof param, "messages[%zu].role", i);
            return ea_oai_fail(e, 400, NULL, param, NULL,
                               "'%s' must be one of system, developer, user, assistant, tool", param);
        }
        json_t *c = json_object_get(msg, "content");
        ea_sbuf text = {0};
        ea_sbuf_puts(&text, "");
        if (json_is_string(c)) {
            ea_sbuf_append(&text, json_string_value(c), json_string_length(c));
        } else if (json_is_array(c)) {
            size_t k;
            json_t *part;
            json_array_foreach(c, k, part) {
                json_t *t = json_object_get(part, "text");
                if (!json_is_object(part) || !json_is_string(json_object_get(part, "type")) ||
                    strcmp(json_string_value(json_object_get(part, "type")), "text") != 0 || !json_is_string(t)) {
                    json_decref(out);
                    ea_sbuf_deinit(&text);
                    snprintf(param, sizeof param, "messages[%zu].content[%zu]", i, k);
                    return ea_oai_fail(e, 400, NULL, param, NULL,
                                       "'%s' must be {\"type\": \"text\", \"text\": string} (only text is supported)",
                                       param);
                }
                ea_sbuf_append(&text, json_string_value(t), json_string_length(t));
            }
        } else if (!(c == NULL || json_is_null(c)) || strcmp(json_string_value(role), "assistant") != 0) {
            json_decref(out);
            ea_sbuf_deinit(&text);
            snprintf(param, sizeof param, "messages[%zu].content", i);
            return ea_oai_fail(e, 400, NULL, param, NULL, "'%s' must be a string or an array of text parts", param);
        }
        /* an assistant turn of tool calls keeps content null: DeepSeek-V3's template writes the
         * calls only then (prepare falls back to "" for templates that cannot take null) */
        int keep_null = (c == NULL || json_is_null(c)) && json_array_size(json_object_get(msg, "tool_calls")) > 0;
        json_t *copy = json_deep_copy(msg);
        if (!copy || text.failed ||
            json_object_set_new(copy, "content", keep_null ? json_null() : json_stringn(text.data, text.len)) != 0 ||
            json_array_append_new(out, copy) != 0) {
            json_decref(out);
            ea_sbuf_deinit(&text);
            return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        }
        ea_sbuf_deinit(&text);
    }
    r->messages = out;
    return 0;
}

static int parse_stop(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *s = field(root, "stop");
    if (!s) return 0;
    const json_t *items[EA_MAX_STOP];
    int n = 0;
    if (json_is_string(s)) {
        items[n++] = s;
    } else if (json_is_array(s)) {
        if (json_array_size(s) > EA_MAX_STOP)
            return ea_oai_fail(e, 400, NULL, "stop", NULL, "at most %d stop sequences are supported", EA_MAX_STOP);
        for (size_t i = 0; i < json_array_size(s); i++) items[n++] = json_array_get(s, i);
    } else {
        return ea_oai_fail(e, 400, NULL, "stop", NULL, "'stop' must be a string or an array of strings");
    }
    for (int i = 0; i < n; i++) {
        if (!json_is_string(items[i]))
            return ea_oai_fail(e, 400, NULL, "stop", NULL, "'stop' must be a string or an array of strings");
        size_t len = json_string_length(items[i]);
        if (len == 0 || len > 255)
            return ea_oai_fail(e, 400, NULL, "stop", NULL, "each stop sequence must be 1 to 255 bytes long");
        r->stop_store[i] = ea_strndup(json_string_value(items[i]), len);
        if (!r->stop_store[i]) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        r->params.stop[i] = r->stop_store[i];
    }
    r->params.n_stop = n;
    return 0;
}

/* stop_token_ids: up to EA_MAX_STOP_IDS ids (checked against the vocabulary in
 * prepare); min_tokens: >= 0 (checked against max_tokens in prepare). */
static int parse_stop_ids(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *a = field(root, "stop_token_ids");
    if (a) {
        if (!json_is_array(a))
            return ea_oai_fail(e, 400, NULL, "stop_token_ids", NULL, "'stop_token_ids' must be an array of token ids");
        if (json_array_size(a) > EA_MAX_STOP_IDS)
            return ea_oai_fail(e, 400, NULL, "stop_token_ids", NULL, "at most %d stop token ids are supported",
                               EA_MAX_STOP_IDS);
        for (size_t i = 0; i < json_array_size(a); i++) {
            json_t *v = json_array_get(a, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
                return ea_oai_fail(e, 400, NULL, "stop_token_ids", NULL,
                                   "'stop_token_ids[%zu]' must be a non-negative integer token id", i);
            r->params.stop_ids[i] = (int32_t)json_integer_value(v);
        }
        r->params.n_stop_ids = (int)json_array_size(a);
    }
    long long v;
    int given;
    if (get_int(root, "min_tokens", 0, INT_MAX, &v, &given, e)) return -1;
    if (given) r->params.min_tokens = (int)v;
    return 0;
}

/* Fields we refuse rather than silently ignore. */
static int parse_unsupported(const json_t *root, ea_oai_error *e) {
    if (field(root, "suffix")) return ea_oai_fail(e, 400, NULL, "suffix", NULL, "'suffix' is not supported");
    long long best_of = 1;
    int given;
    if (get_int(root, "best_of", 1, 1, &best_of, &given, e)) return -1;
    return 0;
}

/* logit_bias: {"token id": bias}, bias in [-100, 100]; ids checked against the vocabulary in prepare. */
static int parse_logit_bias(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *lb = field(root, "logit_bias");
    if (!lb) return 0;
    if (!json_is_object(lb))
        return ea_oai_fail(e, 400, NULL, "logit_bias", NULL, "'logit_bias' must be an object of token id -> bias");
    size_t n = json_object_size(lb);
    if (n == 0) return 0;
    if (n > EA_MAX_LOGIT_BIAS)
        return ea_oai_fail(e, 400, NULL, "logit_bias", NULL, "at most %d logit_bias entries", EA_MAX_LOGIT_BIAS);
    if (!(r->bias_store = ea_malloc(sizeof *r->bias_store * n))) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    const char *key;
    json_t *v;
    int i = 0;
    json_object_foreach(lb, key, v) {
        char *end;
        long id = strtol(key, &end, 10);
        if (!key[0] || *end || id < 0 || id > INT32_MAX)
            return ea_oai_fail(e, 400, NULL, "logit_bias", NULL, "'logit_bias' key '%.40s' is not a token id", key);
        double b = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(b >= -100 && b <= 100))
            return ea_oai_fail(e, 400, NULL, "logit_bias", NULL, "'logit_bias[%s]' must be a number in [-100, 100]", key);
        r->bias_store[i++] = (ea_logit_bias){(int32_t)id, (float)b};
    }
    r->params.bias = r->bias_store;
    r->params.n_bias = i;
    return 0;
}

/* Chat template options: chat_template_kwargs (an object whose keys become template
 * variables), add_generation_prompt, continue_final_message (vLLM's: the last
 * message, an assistant's, is left open; both true is a 400). */
static int parse_chat_options(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    r->add_generation_prompt = 1;
    r->agp_given = field(root, "add_generation_prompt") != NULL;
    if (get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e) ||
        get_bool(root, "continue_final_message", &r->continue_final, e))
        return -1;
    if (r->continue_final && r->agp_given && r->add_generation_prompt)
        return ea_oai_fail(e, 400, NULL, "continue_final_message", NULL,
                           "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    if (r->continue_final) {
        r->add_generation_prompt = 0;
        json_t *last = json_array_get(r->messages, json_array_size(r->messages) - 1);
        json_t *role = json_object_get(last, "role");
        if (!json_is_string(role) || strcmp(json_string_value(role), "assistant") != 0)
            return ea_oai_fail(e, 400, NULL, "continue_final_message", NULL,
                               "'continue_final_message' needs the last message to be the assistant's");
    }
    json_t *kw = field(root, "chat_template_kwargs");
    if (kw && !json_is_object(kw))
        return ea_oai_fail(e, 400, NULL, "chat_template_kwargs", NULL, "'chat_template_kwargs' must be an object");
    static const char *reserved[] = {"messages", "add_generation_prompt", "tools"};
    for (size_t i = 0; kw && i < sizeof reserved / sizeof reserved[0]; i++)
        if (json_object_get(kw, reserved[i]))
            return ea_oai_fail(e, 400, NULL, "chat_template_kwargs", NULL,
                               "'chat_template_kwargs.%s' is set by the request itself", reserved[i]);
    r->template_vars = kw ? json_deep_copy(kw) : json_object();
    if (!r->template_vars || (r->tools && json_object_set(r->template_vars, "tools", r->tools)))
        return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    return 0;
}

static int parse_sampling(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    ea_sampling_params *sp = &r->params.sp;
    ea_sampling_defaults(sp);
    sp->temperature = 1.0f;
    sp->top_p = 1.0f;
    sp->given = (field(root, "temperature") ? EA_SP_TEMPERATURE : 0u) | (field(root, "top_p") ? EA_SP_TOP_P : 0u) |
                (field(root, "top_k") ? EA_SP_TOP_K : 0u);
    double d;
    d = sp->temperature;
    if (get_num(root, "temperature", 0, 1e6, 0, &d, e)) return -1;
    sp->temperature = (float)d;
    d = sp->top_p;
    if (get_num(root, "top_p", 0, 1, 1, &d, e)) return -1;
    sp->top_p = (float)d;
    d = sp->min_p;
    if (get_num(root, "min_p", 0, 1, 0, &d, e)) return -1;
    sp->min_p = (float)d;
    d = sp->presence_penalty;
    if (get_num(root, "presence_penalty", -2, 2, 0, &d, e)) return -1;
    sp->presence_penalty = (float)d;
    d = sp->frequency_penalty;
    if (get_num(root, "frequency_penalty", -2, 2, 0, &d, e)) return -1;
    sp->frequency_penalty = (float)d;
    d = sp->repetition_penalty;
    if (get_num(root, "repetition_penalty", 0, 100, 1, &d, e)) return -1;
    sp->repetition_penalty = (float)d;
    long long v;
    int given;
    if (get_int(root, "top_k", -1, INT_MAX, &v, &given, e)) return -1;
    if (given) sp->top_k = v <= 0 ? 0 : (int)v;
    if (get_int(root, "seed", LLONG_MIN, LLONG_MAX, &v, &given, e)) return -1;
    if (given) {
        sp->seed = (uint64_t)v;
        r->seed_given = 1;
    }
    return 0;
}

static int parse_logprobs(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    long long v;
    int given;
    if (r->kind == EA_OAI_COMPLETIONS) {
        json_t *lp = field(root, "logprobs");
        if (lp && json_is_boolean(lp))
            return ea_oai_fail(e, 400, NULL, "logprobs", NULL, "'logprobs' must be an integer for completions");
        if (get_int(root, "logprobs", 0, EA_MAX_TOP_LOGPROBS, &v, &given, e)) return -1;
        if (given) {
            r->params.logprobs = 1;
            r->params.top_logprobs = (int)v;
        }
        return 0;
    }
    int want = 0;
    if (get_bool(root, "logprobs", &want, e)) return -1;
    if (get_int(root, "top_logprobs", 0, EA_MAX_TOP_LOGPROBS, &v, &given, e)) return -1;
    if (given && !want)
        return ea_oai_fail(e, 400, NULL, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs': true");
    r->params.logprobs = want;
    r->params.top_logprobs = given ? (int)v : 0;
    return 0;
}

/* Every top-level field a request may carry, and for which endpoint. A field
 * not in this table is refused with a 400 naming it (docs/decisions.md, "Unknown
 * request fields"): a client that sends a field expects it to do something, and
 * silently dropping it (vLLM logs a warning and goes on) hides the mistake.
 * `accepted, no effect` fields change nothing here by their nature (who the
 * user is, OpenAI-side storage and billing tiers, tool options without tools)
 * and are listed in docs/serving.md. The rest are read by the parse_* functions
 * above (some only to refuse values we cannot honour). */
enum { FOR_CMPL = 1, FOR_CHAT = 2, FOR_BOTH = 3 };
static const struct {
    const char *name;
    int kinds;
} known_fields[] = {
    {"model", FOR_BOTH}, {"prompt", FOR_CMPL}, {"messages", FOR_CHAT},
    {"max_tokens", FOR_BOTH}, {"max_completion_tokens", FOR_BOTH}, {"n", FOR_BOTH},
    {"stream", FOR_BOTH}, {"stream_options", FOR_BOTH}, {"ignore_eos", FOR_BOTH},
    {"temperature", FOR_BOTH}, {"top_p", FOR_BOTH}, {"top_k", FOR_BOTH}, {"min_p", FOR_BOTH},
    {"presence_penalty", FOR_BOTH}, {"frequency_penalty", FOR_BOTH}, {"repetition_penalty", FOR_BOTH},
    {"seed", FOR_BOTH}, {"stop", FOR_BOTH}, {"stop_token_ids", FOR_BOTH}, {"min_tokens", FOR_BOTH}, {"logprobs", FOR_BOTH}, {"top_logprobs", FOR_CHAT},
    {"logit_bias", FOR_BOTH}, {"echo", FOR_CMPL},
    {"tools", FOR_CHAT}, {"tool_choice", FOR_CHAT}, {"parallel_tool_calls", FOR_CHAT},
    {"chat_template_kwargs", FOR_CHAT}, {"add_generation_prompt", FOR_CHAT}, {"continue_final_message", FOR_CHAT},
    /* the test hook: known here, refused by prepare unless the server runs with EAAS_TEST_HOOKS=1 */
    {"eaas_test_forced_text", FOR_BOTH},
    /* structured outputs (constraint.c) */
    {"response_format", FOR_BOTH}, {"guided_json", FOR_BOTH}, {"guided_choice", FOR_BOTH},
    {"guided_regex", FOR_BOTH}, {"grammar", FOR_BOTH}, {"guided_grammar", FOR_BOTH},
    /* read only to refuse what we would not honour (parse_unsupported, ea_oai_parse_tools) */
    {"suffix", FOR_CMPL}, {"best_of", FOR_CMPL}, {"functions", FOR_CHAT}, {"function_call", FOR_CHAT},
    /* accepted, no effect */
    {"user", FOR_BOTH}, {"metadata", FOR_BOTH}, {"store", FOR_BOTH}, {"service_tier", FOR_BOTH},
    {"safety_identifier", FOR_BOTH}, {"prompt_cache_key", FOR_BOTH},
};

/* 400 naming the first field of o (a request body, or an object under `prefix`)
 * that `known` (NULL-terminated; when NULL, the table above for kind) does not list. */
static int refuse_unknown(const json_t *o, ea_oai_kind kind, const char *const *known, const char *prefix,
                          const char *endpoint, ea_oai_error *e) {
    const char *key;
    const json_t *v;
    int bit = kind == EA_OAI_CHAT ? FOR_CHAT : FOR_CMPL;
    json_object_foreach((json_t *)o, key, v) {
        int ok = 0;
        if (known) {
            for (size_t i = 0; !ok && known[i]; i++) ok = strcmp(key, known[i]) == 0;
        } else {
            for (size_t i = 0; !ok && i < sizeof known_fields / sizeof known_fields[0]; i++)
                ok = strcmp(key, known_fields[i].name) == 0 && (known_fields[i].kinds & bit);
        }
        if (ok) continue;
        char param[64];
        snprintf(param, sizeof param, "%s%s", prefix, key);
        return ea_oai_fail(e, 400, NULL, param, NULL,
                           "unknown field '%s' for %s (refused rather than ignored; see the request fields in "
                           "docs/serving.md)",
                           param, endpoint);
    }
    return 0;
}

static int parse_fields(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *m = field(root, "model");
    if (m) {
        if (!json_is_string(m)) return ea_oai_fail(e, 400, NULL, "model", NULL, "'model' must be a string");
        if (!(r->model = ea_strdup(json_string_value(m)))) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    }
    if (r->kind == EA_OAI_COMPLETIONS ? parse_prompt(root, r, e) : parse_messages(root, r, e)) return -1;
    long long v;
    int given;
    if (get_int(root, "max_tokens", 1, INT_MAX, &v, &given, e)) return -1;
    if (given) r->max_tokens = (int)v;
    if (get_int(root, "max_completion_tokens", 1, INT_MAX, &v, &given, e)) return -1;
    if (given) r->max_tokens = (int)v;
    r->n = 1;
    if (get_int(root, "n", 1, EA_OAI_MAX_CHOICES, &v, &given, e)) return -1;
    if (given) r->n = (int)v;
    if ((long)r->n * (1 + r->n_more) > EA_OAI_MAX_CHOICES)
        return ea_oai_fail(e, 400, NULL, "n", NULL, "prompts x n must be at most %d, got %d x %d", EA_OAI_MAX_CHOICES,
                           1 + r->n_more, r->n);
    if (get_bool(root, "stream", &r->stream, e)) return -1;
    json_t *so = field(root, "stream_options");
    if (so) {
        if (!json_is_object(so))
            return ea_oai_fail(e, 400, NULL, "stream_options", NULL, "'stream_options' must be an object");
        if (!r->stream)
            return ea_oai_fail(e, 400, NULL, "stream_options", NULL, "'stream_options' is only allowed with 'stream': true");
        if (get_bool(so, "include_usage", &r->include_usage, e)) return -1;
    }
    if (get_bool(root, "ignore_eos", &r->params.ignore_eos, e)) return -1;
    if (parse_unsupported(root, e) || parse_sampling(root, r, e) || parse_stop(root, r, e) || parse_stop_ids(root, r, e) ||
        parse_logprobs(root, r, e) || parse_logit_bias(root, r, e) || ea_oai_parse_constraint(root, &r->grammar, e))
        return -1;
    r->params.grammar = r->grammar;
    if (get_bool(root, "echo", &r->echo, e)) return -1;
    if (r->echo && r->params.logprobs)
        return ea_oai_fail(e, 400, NULL, "echo", NULL, "'echo' together with 'logprobs' is not supported");
    if (r->kind == EA_OAI_CHAT && (ea_oai_parse_tools(root, r, e) || parse_chat_options(root, r, e))) return -1;
    json_t *ft = field(root, "eaas_test_forced_text");
    if (ft && (!json_is_string(ft) || !(r->forced_text = ea_strndup(json_string_value(ft), json_string_length(ft)))))
        return ea_oai_fail(e, 400, NULL, "eaas_test_forced_text", NULL, "'eaas_test_forced_text' must be a string");
    static const char *const stream_fields[] = {"include_usage", NULL};
    const char *endpoint = r->kind == EA_OAI_CHAT ? "/v1/chat/completions" : "/v1/completions";
    if (refuse_unknown(root, r->kind, NULL, "", endpoint, e) ||
        (so && refuse_unknown(so, r->kind, stream_fields, "stream_options.", endpoint, e)))
        return -1;
    return 0;
}

int ea_oai_parse(ea_oai_kind kind, const char *body, size_t len, ea_oai_request *r, ea_oai_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    json_t *root;
    if (parse_body(body, len, &root, e)) return -1;
    int rc = parse_fields(root, r, e);
    json_decref(root);
    if (rc) ea_oai_request_deinit(r);
    return rc;
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

/* The chat prompt: the template over messages, tools and chat_template_kwargs. A
 * template that cannot take a null content (Qwen3's tests '</think>' in it) gets ""
 * instead, as vLLM passes. continue_final_message cuts the text after the last
 * message's content (transformers' rule: its last occurrence, whitespace-trimmed). */
static int render_prompt(ea_oai_request *r, const ea_text_ops *ops, ea_oai_error *e) {
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
    ea_status s = ops->encode(ops->ctx, text, strlen(text), r->kind == EA_OAI_COMPLETIONS, ids, n);
    return s != EA_OK ? tok_fail(e, s, what) : 0;
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
        ea_grammar *calls;
        if (ea_tool_choice_grammar(r, ops->tool_format, &calls, e)) return -1;
        if (calls) r->grammar = r->params.grammar = calls;
        if (render_prompt(r, ops, e)) return -1;
    }
    if (encode_prompt(r, ops, r->prompt_text, &r->prompt_ids, &r->n_prompt, e)) return -1;
    for (int i = 0; i < r->n_more; i++)
        if (encode_prompt(r, ops, r->more[i].text, &r->more[i].ids, &r->more[i].n_ids, e)) return -1;
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
    if (parse_body(body, len, &root, e)) return -1;
    ea_oai_request r = {0};
    int rc = -1;
    if (field(root, "messages")) {
        r.kind = EA_OAI_CHAT;
        if (parse_messages(root, &r, e) || ea_oai_parse_tools(root, &r, e) || parse_chat_options(root, &r, e) ||
            render_prompt(&r, ops, e))
            goto done;
    } else {
        json_t *p = field(root, "prompt");
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
    if (refuse_unknown(root, r.kind, tokenize_fields, "", "/tokenize", e)) goto done;
    if (r.prompt_text[0]) {
        int add_special = r.kind == EA_OAI_COMPLETIONS;
        if (get_bool(root, "add_special_tokens", &add_special, e)) goto done;
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
    if (parse_body(body, len, &root, e)) return -1;
    json_t *t = field(root, "tokens");
    int32_t *ids = NULL;
    int n = 0, rc = -1;
    char *text = NULL;
    size_t tlen = 0;
    static const char *const detokenize_fields[] = {"model", "tokens", NULL};
    if (!json_is_array(t)) {
        ea_oai_fail(e, 400, NULL, "tokens", NULL, "'tokens' must be an array of token ids");
        goto done;
    }
    if (refuse_unknown(root, EA_OAI_COMPLETIONS, detokenize_fields, "", "/detokenize", e)) goto done;
    if (json_array_size(t) > 0 &&
        (parse_ids(t, "tokens", &ids, &n, e) || check_ids(ids, n, ops, "tokens", e)))
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
