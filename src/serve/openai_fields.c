/*
 * openai_fields.c — parse and validate the body of /v1/completions and
 * /v1/chat/completions into an ea_oai_request (ea_oai_parse), field by field;
 * the helpers /tokenize and /detokenize share (openai_impl.h). Structured
 * output fields are compiled in constraint.c, tools in tool_choice.c.
 *
 * Invariants:
 *   - Every field is checked for type and range before use; a failure names
 *     the field in `param` and in the message, with HTTP status 400.
 *   - A field not in known_fields is refused with a 400 naming it.
 *   - JSON text comes from jansson, which rejects invalid UTF-8 and reports
 *     line/column; we pass that position on.
 *   - Nothing here keeps state between requests.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "serve/constraint.h"
#include "serve/openai.h"
#include "serve/openai_impl.h"
#include "serve/tool_choice.h"

/* ---- typed field access ------------------------------------------------------ */

/* A field that is absent or null counts as not given. */
json_t *ea__oai_field(const json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *out, int *given,
                   ea_oai_error *e) {
    json_t *v = ea__oai_field(o, key);
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
    json_t *v = ea__oai_field(o, key);
    if (!v) return 0;
    if (!json_is_number(v)) return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
        return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be in %s%g, %g], got %g", key, lo_open ? "(" : "[",
                           lo, hi, x);
    *out = x;
    return 0;
}

int ea__oai_get_bool(const json_t *o, const char *key, int *out, ea_oai_error *e) {
    json_t *v = ea__oai_field(o, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return ea_oai_fail(e, 400, NULL, key, NULL, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* ---- request parsing ----------------------------------------------------------- */

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

int ea__oai_parse_body(const char *body, size_t len, json_t **root, ea_oai_error *e) {
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
int ea__oai_parse_ids(const json_t *a, const char *param, int32_t **ids, int *n, ea_oai_error *e) {
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
    if (json_is_array(p)) return ea__oai_parse_ids(p, param, ids, n, e);
    return ea_oai_fail(e, 400, NULL, param, NULL, "'%s' must be a string or an array of token ids", param);
}

/* prompt: a string, token ids, or a batch ([string] or [[ids]]) of up to
 * EA_OAI_MAX_CHOICES prompts; the first goes to prompt_text/prompt_ids, the rest to more. */
static int parse_prompt(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *p = ea__oai_field(root, "prompt");
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
int ea__oai_parse_messages(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    static const char *roles[] = {"system", "developer", "user", "assistant", "tool"};
    json_t *m = ea__oai_field(root, "messages");
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
    json_t *s = ea__oai_field(root, "stop");
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
 * prepare); min_tokens: >= 0 (checked against max_tokens in prepare);
 * truncate_prompt_tokens: -1 or >= 1 (applied in prepare, after encoding). */
static int parse_stop_ids(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *a = ea__oai_field(root, "stop_token_ids");
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
    if (get_int(root, "truncate_prompt_tokens", -1, INT_MAX, &v, &given, e)) return -1;
    if (given && v == 0)
        return ea_oai_fail(e, 400, NULL, "truncate_prompt_tokens", NULL,
                           "'truncate_prompt_tokens' must be -1 (the context length) or at least 1, got 0");
    if (given) r->truncate = (int)v;
    return 0;
}

/* Fields we refuse rather than silently ignore. */
static int parse_unsupported(const json_t *root, ea_oai_error *e) {
    if (ea__oai_field(root, "suffix")) return ea_oai_fail(e, 400, NULL, "suffix", NULL, "'suffix' is not supported");
    long long best_of = 1;
    int given;
    if (get_int(root, "best_of", 1, 1, &best_of, &given, e)) return -1;
    return 0;
}

/* logit_bias: {"token id": bias}, bias in [-100, 100]; ids checked against the vocabulary in prepare. */
static int parse_logit_bias(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    json_t *lb = ea__oai_field(root, "logit_bias");
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
int ea__oai_parse_chat_options(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    r->add_generation_prompt = 1;
    r->agp_given = ea__oai_field(root, "add_generation_prompt") != NULL;
    if (ea__oai_get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e) ||
        ea__oai_get_bool(root, "continue_final_message", &r->continue_final, e))
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
    json_t *kw = ea__oai_field(root, "chat_template_kwargs");
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
    sp->given = (ea__oai_field(root, "temperature") ? EA_SP_TEMPERATURE : 0u) | (ea__oai_field(root, "top_p") ? EA_SP_TOP_P : 0u) |
                (ea__oai_field(root, "top_k") ? EA_SP_TOP_K : 0u);
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
        json_t *lp = ea__oai_field(root, "logprobs");
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
    if (ea__oai_get_bool(root, "logprobs", &want, e)) return -1;
    if (get_int(root, "top_logprobs", 0, EA_MAX_TOP_LOGPROBS, &v, &given, e)) return -1;
    if (given && !want)
        return ea_oai_fail(e, 400, NULL, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs': true");
    r->params.logprobs = want;
    r->params.top_logprobs = given ? (int)v : 0;
    return 0;
}

/* prompt_logprobs (vLLM's, both endpoints): 0..EA_MAX_TOP_LOGPROBS alternatives per
 * prompt token; refused with stream (vLLM's rule: they come in the body). */
static int parse_prompt_logprobs(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    long long v;
    if (get_int(root, "prompt_logprobs", 0, EA_MAX_TOP_LOGPROBS, &v, &r->want_prompt_lp, e)) return -1;
    if (r->want_prompt_lp && r->stream)
        return ea_oai_fail(e, 400, NULL, "prompt_logprobs", NULL, "'prompt_logprobs' is not available with 'stream': true");
    r->prompt_lp_top = r->want_prompt_lp ? (int)v : 0;
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
    {"seed", FOR_BOTH}, {"stop", FOR_BOTH}, {"stop_token_ids", FOR_BOTH}, {"min_tokens", FOR_BOTH},
    {"skip_special_tokens", FOR_BOTH}, {"include_stop_str_in_output", FOR_BOTH}, {"truncate_prompt_tokens", FOR_BOTH},
    {"add_special_tokens", FOR_BOTH}, {"prompt_logprobs", FOR_BOTH},
    {"logprobs", FOR_BOTH}, {"top_logprobs", FOR_CHAT},
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
int ea__oai_refuse_unknown(const json_t *o, ea_oai_kind kind, const char *const *known, const char *prefix,
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
    json_t *m = ea__oai_field(root, "model");
    if (m) {
        if (!json_is_string(m)) return ea_oai_fail(e, 400, NULL, "model", NULL, "'model' must be a string");
        if (!(r->model = ea_strdup(json_string_value(m)))) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    }
    if (r->kind == EA_OAI_COMPLETIONS ? parse_prompt(root, r, e) : ea__oai_parse_messages(root, r, e)) return -1;
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
    if (ea__oai_get_bool(root, "stream", &r->stream, e)) return -1;
    json_t *so = ea__oai_field(root, "stream_options");
    if (so) {
        if (!json_is_object(so))
            return ea_oai_fail(e, 400, NULL, "stream_options", NULL, "'stream_options' must be an object");
        if (!r->stream)
            return ea_oai_fail(e, 400, NULL, "stream_options", NULL, "'stream_options' is only allowed with 'stream': true");
        if (ea__oai_get_bool(so, "include_usage", &r->include_usage, e) ||
            ea__oai_get_bool(so, "continuous_usage_stats", &r->continuous_usage, e))
            return -1;
        if (r->continuous_usage && !r->include_usage) /* vLLM ignores it then; we say so */
            return ea_oai_fail(e, 400, NULL, "stream_options.continuous_usage_stats", NULL,
                               "'stream_options.continuous_usage_stats' needs 'stream_options.include_usage': true");
    }
    if (ea__oai_get_bool(root, "ignore_eos", &r->params.ignore_eos, e)) return -1;
    int skip_special = 1; /* vLLM's two text options (sampling params) */
    if (ea__oai_get_bool(root, "skip_special_tokens", &skip_special, e) ||
        ea__oai_get_bool(root, "include_stop_str_in_output", &r->params.include_stop, e))
        return -1;
    r->params.keep_special = !skip_special;
    r->add_special = r->kind == EA_OAI_COMPLETIONS; /* as /tokenize: the chat template writes its own */
    if (ea__oai_get_bool(root, "add_special_tokens", &r->add_special, e)) return -1;
    if (parse_unsupported(root, e) || parse_sampling(root, r, e) || parse_stop(root, r, e) || parse_stop_ids(root, r, e) ||
        parse_logprobs(root, r, e) || parse_prompt_logprobs(root, r, e) || parse_logit_bias(root, r, e) ||
        ea_oai_parse_constraint(root, &r->grammar, e))
        return -1;
    r->params.grammar = r->grammar;
    if (r->grammar) { /* what the other ranks compile it from, under --parallel */
        if (ea_oai_constraint_source(root, &r->grammar_src, &r->n_grammar_src) != EA_OK)
            return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        r->params.grammar_src = r->grammar_src;
        r->params.n_grammar_src = r->n_grammar_src;
    }
    if (ea__oai_get_bool(root, "echo", &r->echo, e)) return -1;
    r->params.prompt_logprobs = r->echo && r->params.logprobs; /* the echoed prompt's logprobs come first */
    r->gen_top = r->params.top_logprobs;
    if (r->want_prompt_lp) { /* the PROMPT events carry the larger top; each rendering takes its own */
        r->params.prompt_logprobs = 1;
        if (r->prompt_lp_top > r->params.top_logprobs) r->params.top_logprobs = r->prompt_lp_top;
    }
    if (r->kind == EA_OAI_CHAT && (ea_oai_parse_tools(root, r, e) || ea__oai_parse_chat_options(root, r, e))) return -1;
    json_t *ft = ea__oai_field(root, "eaas_test_forced_text");
    if (ft && (!json_is_string(ft) || !(r->forced_text = ea_strndup(json_string_value(ft), json_string_length(ft)))))
        return ea_oai_fail(e, 400, NULL, "eaas_test_forced_text", NULL, "'eaas_test_forced_text' must be a string");
    static const char *const stream_fields[] = {"include_usage", "continuous_usage_stats", NULL};
    const char *endpoint = r->kind == EA_OAI_CHAT ? "/v1/chat/completions" : "/v1/completions";
    if (ea__oai_refuse_unknown(root, r->kind, NULL, "", endpoint, e) ||
        (so && ea__oai_refuse_unknown(so, r->kind, stream_fields, "stream_options.", endpoint, e)))
        return -1;
    return 0;
}

int ea_oai_parse(ea_oai_kind kind, const char *body, size_t len, ea_oai_request *r, ea_oai_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    json_t *root;
    if (ea__oai_parse_body(body, len, &root, e)) return -1;
    int rc = parse_fields(root, r, e);
    json_decref(root);
    if (rc) ea_oai_request_deinit(r);
    return rc;
}
