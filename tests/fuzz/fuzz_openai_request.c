/*
 * fuzz_openai_request.c — the body of POST /v1/completions and
 * /v1/chat/completions as a client sends it: ea_oai_parse (every field,
 * tools / tool_choice of tool_choice.c, the structured-output fields of
 * constraint.c) and then ea_oai_prepare with a stand-in tokenizer (one id per
 * byte, as tests/unit/test_openai.c's), up to the parameters that would be
 * submitted.
 *
 * Input: byte 0 picks the setting, the rest is the body (copied into a buffer
 * of exactly its length: the parser takes a length, not a C string):
 *   bit 0     0 completions, 1 chat
 *   bits 1-2  the model family: 0 no tool parser, 1 Qwen3 with the reasoning
 *             parser and the test hooks on, 2 DeepSeek-V3, 3 Qwen3.5 (XML calls)
 *   bits 3-4  ctx_len 24, 512, 4096, 100000
 *   bit 5     kv_tokens 0 (no bound) or 300
 *   bit 6     instead: the body to /tokenize and to /detokenize (ea_oai_tokenize,
 *             ea_oai_detokenize), whose answers must be JSON of vLLM's shape
 * Properties beyond "no crash, no over-read, no leak, no UB":
 *   - a refused request has an HTTP status 400..599, a message, and renders as
 *     {"error": {"message": string, ...}};
 *   - a prepared request has (prompts x n) choices, each with a prompt of
 *     1..ctx_len-1 ids that are tokens of the vocabulary, max_tokens in
 *     1..ctx_len - n_prompt (and within kv_tokens), min_tokens <= max_tokens,
 *     stop ids and logit_bias ids that are tokens, n_forced <= max_tokens;
 *   - a request with a grammar carries its source, and that source compiles
 *     again as every other rank compiles it (ea_oai_constraint_compile);
 *   - every choice, written as a control-bus submit, reads back (a request the
 *     API accepts is never one the other ranks refuse), and one token sampled
 *     with its parameters (bias, repetition penalty over its prompt) is an id
 *     of the vocabulary;
 *   - /tokenize answers {"count": n, "tokens": [n ids that are tokens]},
 *     /detokenize {"prompt": string}.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar.h"
#include "serve/bus_codec.h"
#include "serve/constraint.h"
#include "serve/openai.h"
#include "serve/sampler.h"

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_openai_request: %s\n", what);
        abort();
    }
}

/* ---- stand-in tokenizer: id = byte value, 256 is BOS, ids 500..511 are padding rows ---- */

static ea_status f_encode(void *ctx, const char *t, size_t n, int add_special, int32_t **ids, int *n_ids) {
    (void)ctx;
    int extra = add_special ? 1 : 0;
    int32_t *p = ea_malloc((n + 1) * sizeof *p);
    if (!p) return EA_ERR_NOMEM;
    if (extra) p[0] = 256;
    for (size_t i = 0; i < n; i++) p[i + extra] = (unsigned char)t[i];
    *ids = p;
    *n_ids = (int)n + extra;
    return EA_OK;
}

static ea_status f_decode(void *ctx, const int32_t *ids, int n, char **text, size_t *len) {
    (void)ctx;
    char *p = ea_malloc((size_t)n + 1);
    if (!p) return EA_ERR_NOMEM;
    for (int i = 0; i < n; i++) p[i] = (char)ids[i];
    p[n] = 0;
    *text = p;
    *len = (size_t)n;
    return EA_OK;
}

/* "<role>content" per message (a null content is an error, as in Qwen3's template),
 * "<tools:N>" first with tools, "<assistant>" as the generation prompt. */
static ea_status f_render(void *ctx, const json_t *msgs, const json_t *vars, int agp, char **text) {
    (void)ctx;
    ea_sbuf b = {0};
    size_t i;
    json_t *m;
    ea_sbuf_puts(&b, "");
    if (json_object_get(vars, "tools")) ea_sbuf_printf(&b, "<tools:%zu>", json_array_size(json_object_get(vars, "tools")));
    json_array_foreach(msgs, i, m) {
        const json_t *c = json_object_get(m, "content");
        if (json_is_null(c)) {
            ea_sbuf_deinit(&b);
            return ea_err(EA_ERR_INVALID_ARG, "null content");
        }
        ea_sbuf_printf(&b, "<%s>%s", json_string_value(json_object_get(m, "role")),
                       json_is_string(c) ? json_string_value(c) : "");
    }
    if (agp) ea_sbuf_puts(&b, "<assistant>");
    *text = ea_sbuf_take(&b, NULL);
    return *text ? EA_OK : EA_ERR_NOMEM;
}

static int f_has_token(void *ctx, int32_t id) {
    (void)ctx;
    return id >= 0 && id < 500;
}

static const ea_text_ops OPS[4] = {
    {NULL, f_encode, f_decode, f_render, 512, f_has_token},
    {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_QWEN3, EA_REASONING_QWEN3, 1},
    {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_DEEPSEEK_V3},
    {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_QWEN3_XML},
};

static int is_token(int32_t id) { return id >= 0 && id < 500; }

static void check_error(const ea_oai_error *e) {
    check(e->status >= 400 && e->status <= 599 && e->message[0] && e->type[0], "an error without status or message");
    ea_sbuf b = {0};
    ea_oai_render_error(e, &b);
    json_t *o = b.failed ? NULL : json_loadb(b.data, b.len, 0, NULL);
    check(o && json_is_string(json_object_get(json_object_get(o, "error"), "message")), "an error renders badly");
    json_decref(o);
    ea_sbuf_deinit(&b);
}

/* Choice p as a control-bus submit, read back with the same counts. */
static void through_bus(const ea_req_params *p) {
    ea_sbuf b = {0};
    ea_bus_begin(&b, 1);
    ea_bus_put_submit(&b, 5, p);
    check(!b.failed, "no memory");
    ea_bus_reader rd;
    ea_bus_event *ev = malloc(sizeof *ev);
    int more = 0;
    check(ev && ea_bus_read_begin(&rd, b.data, b.len) == EA_OK, "bus header");
    check(ea_bus_read_next(&rd, ev, &more) == EA_OK && more, "an accepted request is refused on the control bus");
    check(ev->p.n_prompt == p->n_prompt && ev->p.n_stop == p->n_stop && ev->p.n_bias == p->n_bias &&
              ev->p.n_grammar_src == (p->grammar_src ? p->n_grammar_src : 0) && rd.p == rd.end,
          "the control bus changed a request");
    for (int k = 0; k < p->n_stop; k++) check(!strcmp(ev->p.stop[k], p->stop[k]), "a stop string changed on the bus");
    free(ev);
    ea_sbuf_deinit(&b);
}

/* One token for choice p as the step loop draws it: bias added, repetition penalty over the prompt. */
static void sample_one(const ea_req_params *p) {
    static ea_sampler *s;
    if (!s) check(ea_sampler_create(512, &s) == EA_OK, "no memory");
    float logits[512];
    uint8_t seen[512] = {0};
    int32_t counts[512] = {0};
    for (int i = 0; i < 512; i++) logits[i] = (float)((i * 37) % 101) / 10.0f;
    for (int i = 0; i < p->n_bias; i++) logits[p->bias[i].id] += p->bias[i].bias;
    for (int i = 0; i < p->n_prompt; i++) seen[p->prompt[i]] = 1;
    counts[p->prompt[0]] = 1;
    ea_rng rng;
    ea_rng_seed(&rng, p->sp.seed);
    int t = ea_sample(s, &p->sp, &rng, logits, counts, seen);
    check(t >= 0 && t < 512, "a prepared request samples a token outside the vocabulary");
}

static void check_prepared(const ea_oai_request *r, int ctx_len, int kv_tokens) {
    check(r->n >= 1 && r->n_choices == (1 + r->n_more) * r->n && r->n_choices <= EA_OAI_MAX_CHOICES,
          "wrong number of choices");
    for (int c = 0; c < r->n_choices; c++) {
        const ea_req_params *p = &r->choices[c];
        check(p->n_prompt >= 1 && p->n_prompt < ctx_len, "a prompt of the wrong length");
        for (int i = 0; i < p->n_prompt; i++) check(is_token(p->prompt[i]), "a prompt id that is no token");
        check(p->max_tokens >= 1 && p->max_tokens <= ctx_len - p->n_prompt, "max_tokens outside the context");
        check(kv_tokens <= 0 || p->n_prompt + p->max_tokens <= kv_tokens, "a request that never fits the cache");
        check(p->min_tokens >= 0 && p->min_tokens <= p->max_tokens, "min_tokens past max_tokens");
        check(p->n_forced >= 0 && p->n_forced <= p->max_tokens, "more forced tokens than max_tokens");
        check(p->n_stop >= 0 && p->n_stop <= EA_MAX_STOP && p->n_stop_ids >= 0 && p->n_stop_ids <= EA_MAX_STOP_IDS,
              "too many stops");
        for (int i = 0; i < p->n_stop; i++) check(p->stop[i] && p->stop[i][0], "an empty stop string");
        for (int i = 0; i < p->n_stop_ids; i++) check(is_token(p->stop_ids[i]), "a stop id that is no token");
        check(p->n_bias >= 0 && p->n_bias <= EA_MAX_LOGIT_BIAS, "too many logit biases");
        for (int i = 0; i < p->n_bias; i++)
            check(is_token(p->bias[i].id) && p->bias[i].bias >= -100 && p->bias[i].bias <= 100, "a bad logit bias");
        check(!p->grammar == !p->grammar_src && (!p->grammar_src || p->n_grammar_src > 0),
              "a grammar without its source (or a source without a grammar)");
        through_bus(p);
        sample_one(p);
    }
    if (r->params.grammar) { /* as every other rank builds it */
        ea_grammar *g = NULL;
        ea_status st = ea_oai_constraint_compile(r->params.grammar_src, (size_t)r->params.n_grammar_src, &g);
        if (st != EA_OK) fprintf(stderr, "%s\n", ea_errmsg());
        check(st == EA_OK && g, "the grammar's source does not compile again");
        ea_grammar_destroy(g);
    }
}

static void fuzz_tokenize(const char *body, size_t n, const ea_text_ops *ops, int ctx_len) {
    ea_sbuf b = {0};
    ea_oai_error e;
    memset(&e, 0, sizeof e);
    if (ea_oai_tokenize(body, n, ops, ctx_len, &b, &e) != 0) {
        check_error(&e);
    } else {
        json_t *o = b.failed ? NULL : json_loadb(b.data, b.len, 0, NULL), *t = json_object_get(o, "tokens");
        check(o && json_is_array(t) && json_integer_value(json_object_get(o, "count")) == (json_int_t)json_array_size(t),
              "a /tokenize answer of the wrong shape");
        for (size_t i = 0; i < json_array_size(t); i++)
            check(json_integer_value(json_array_get(t, i)) >= 0 && json_integer_value(json_array_get(t, i)) <= 256,
                  "/tokenize gave an id the stand-in tokenizer has not");
        json_decref(o);
    }
    ea_sbuf_reset(&b);
    memset(&e, 0, sizeof e);
    if (ea_oai_detokenize(body, n, ops, &b, &e) != 0) {
        check_error(&e);
    } else {
        /* the text may hold a NUL (a tokenizer's <0x00> byte token), sent as \u0000 */
        json_t *o = b.failed ? NULL : json_loadb(b.data, b.len, JSON_ALLOW_NUL, NULL);
        check(o && json_is_string(json_object_get(o, "prompt")), "a /detokenize answer of the wrong shape");
        json_decref(o);
    }
    ea_sbuf_deinit(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int ctx[4] = {24, 512, 4096, 100000};
    if (size < 1) return 0;
    size_t n = size - 1;
    char *body = malloc(n ? n : 1);
    if (!body) return 0;
    memcpy(body, data + 1, n);
    ea_oai_kind kind = data[0] & 1 ? EA_OAI_CHAT : EA_OAI_COMPLETIONS;
    const ea_text_ops *ops = &OPS[(data[0] >> 1) & 3];
    int ctx_len = ctx[(data[0] >> 3) & 3], kv = data[0] & 32 ? 300 : 0;
    if (data[0] & 64) {
        fuzz_tokenize(body, n, ops, ctx_len);
        free(body);
        return 0;
    }
    ea_oai_request r;
    ea_oai_error e;
    memset(&e, 0, sizeof e);
    if (ea_oai_parse(kind, body, n, &r, &e) != 0) {
        check_error(&e);
        check(!r.model && !r.prompt_text && !r.messages && !r.grammar && !r.tools && !r.more,
              "a refused request left allocations");
    } else if (ea_oai_prepare(&r, ops, ctx_len, kv, 1234, &e) != 0) {
        check_error(&e);
    } else {
        check_prepared(&r, ctx_len, kv);
    }
    ea_oai_request_deinit(&r);
    free(body);
    return 0;
}
