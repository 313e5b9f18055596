/*
 * test_openai.c — the OpenAI wire format without a server: request parsing and
 * validation into ea_req_params, prompt length checks, response/SSE/error
 * rendering, /tokenize shapes, and the Prometheus histogram text. The tokenizer
 * is a stand-in (one id per byte; a token's bytes are the byte itself), so
 * every expectation here can be computed by hand.
 */
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar.h"
#include "harness.h"
#include "serve/constraint.h"
#include "serve/metrics.h"
#include "serve/openai.h"

/* ---- stand-in tokenizer: id = byte value; id 300 is a lone 0xE4 byte; the text
 * "</think>" alone is the special token 301 --------------------------------------- */

static ea_status f_encode(void *ctx, const char *t, size_t n, int add_special, int32_t **ids, int *n_ids) {
    (void)ctx;
    if (n == 8 && !memcmp(t, "</think>", 8) && !add_special) {
        if (!(*ids = ea_malloc(sizeof **ids))) return EA_ERR_NOMEM;
        (*ids)[0] = 301;
        *n_ids = 1;
        return EA_OK;
    }
    int extra = add_special ? 1 : 0;
    int32_t *p = ea_malloc((n + 1) * sizeof *p);
    if (!p) return EA_ERR_NOMEM;
    if (extra) p[0] = 256; /* "BOS" */
    for (size_t i = 0; i < n; i++) p[i + extra] = (unsigned char)t[i];
    *ids = p;
    *n_ids = (int)n + extra;
    return EA_OK;
}

static ea_status f_decode(void *ctx, const int32_t *ids, int n, char **text, size_t *len) {
    (void)ctx;
    char *p = ea_malloc((size_t)n + 1);
    if (!p) return EA_ERR_NOMEM;
    for (int i = 0; i < n; i++) p[i] = ids[i] == 300 ? (char)0xE4 : (char)ids[i];
    p[n] = 0;
    *text = p;
    *len = (size_t)n;
    return EA_OK;
}

/* "<role>content" per message (then "<call NAME object|text>" per tool call, by how
 * its arguments came), "<assistant>" as the generation prompt; with template
 * variables: "<tools:N>" first when tools are given, "<nothink>" last when
 * enable_thinking is false, "<think>\n" last when open_think is true. A null content is an error (as in Qwen3's template). */
static ea_status f_render(void *ctx, const json_t *msgs, const json_t *vars, int agp, char **text) {
    (void)ctx;
    ea_sbuf b = {0};
    size_t i;
    json_t *m;
    ea_sbuf_puts(&b, "");
    if (json_object_get(vars, "tools")) ea_sbuf_printf(&b, "<tools:%zu>", json_array_size(json_object_get(vars, "tools")));
    json_array_foreach(msgs, i, m) {
        if (json_is_null(json_object_get(m, "content"))) {
            ea_sbuf_deinit(&b);
            return ea_err(EA_ERR_INVALID_ARG, "null content");
        }
        ea_sbuf_printf(&b, "<%s>%s", json_string_value(json_object_get(m, "role")),
                       json_string_value(json_object_get(m, "content")));
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(m, "tool_calls"), k, c) {
            json_t *f = json_object_get(c, "function"), *a = json_object_get(f, "arguments");
            ea_sbuf_printf(&b, "<call %s %s>", json_string_value(json_object_get(f, "name")),
                           json_is_object(a) ? "object" : json_is_string(a) ? "text" : "other");
        }
    }
    if (agp) ea_sbuf_puts(&b, "<assistant>");
    if (json_is_false(json_object_get(vars, "enable_thinking"))) ea_sbuf_puts(&b, "<nothink>");
    if (json_is_true(json_object_get(vars, "open_think"))) ea_sbuf_puts(&b, "<think>\n");
    *text = ea_sbuf_take(&b, NULL);
    return *text ? EA_OK : EA_ERR_NOMEM;
}

/* ids 500..511 are padding rows of the "model" vocabulary (512): no token */
static int f_has_token(void *ctx, int32_t id) {
    (void)ctx;
    return id >= 0 && id < 500;
}

static const ea_text_ops OPS = {NULL, f_encode, f_decode, f_render, 512, f_has_token};
/* the same, for a Qwen3-like model served with --reasoning-parser qwen3 and EAAS_TEST_HOOKS=1 */
static const ea_text_ops OPS_Q = {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_QWEN3,
                                  EA_REASONING_QWEN3, 1};

/* ... and a DeepSeek-V3-like one */
static const ea_text_ops OPS_D = {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_DEEPSEEK_V3};
/* ... and a Qwen3.5-like one (XML calls) */
static const ea_text_ops OPS_X = {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_QWEN3_XML};

static int parse(ea_oai_kind k, const char *body, ea_oai_request *r, ea_oai_error *e) {
    return ea_oai_parse(k, body, strlen(body), r, e);
}

/* Parse + prepare; returns the HTTP status (200 when accepted). */
static int status_of(ea_oai_kind k, const char *body, int ctx, ea_oai_error *e) {
    ea_oai_request r;
    int rc = parse(k, body, &r, e);
    if (rc == 0) {
        rc = ea_oai_prepare(&r, &OPS, ctx, 0, 7, e);
        ea_oai_request_deinit(&r);
    }
    return rc == 0 ? 200 : e->status;
}

TEST(completions_fields_reach_params) {
    ea_oai_request r;
    ea_oai_error e;
    const char *body = "{\"model\":\"m\",\"prompt\":\"abc\",\"max_tokens\":5,\"temperature\":0.5,\"top_p\":0.9,"
                       "\"top_k\":40,\"min_p\":0.05,\"seed\":-3,\"stop\":[\"x\",\"yz\"],\"presence_penalty\":0.5,"
                       "\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,\"ignore_eos\":true,\"logprobs\":3,"
                       "\"n\":1,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"user\":\"ignored\"}";
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, body, &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_STREQ(r.model, "m");
    CHECK_EQ(r.params.n_prompt, 4); /* BOS + 3 bytes: completions add special tokens */
    CHECK_EQ(r.params.prompt[0], 256);
    CHECK_EQ(r.params.prompt[3], 'c');
    CHECK_EQ(r.params.max_tokens, 5);
    CHECK_NEAR(r.params.sp.temperature, 0.5, 1e-6);
    CHECK_NEAR(r.params.sp.top_p, 0.9, 1e-6);
    CHECK_EQ(r.params.sp.top_k, 40);
    CHECK_NEAR(r.params.sp.min_p, 0.05, 1e-6);
    CHECK_EQ(r.params.sp.seed, (uint64_t)-3);
    CHECK_EQ(r.params.n_stop, 2);
    CHECK_STREQ(r.params.stop[1], "yz");
    CHECK_NEAR(r.params.sp.presence_penalty, 0.5, 1e-6);
    CHECK_NEAR(r.params.sp.frequency_penalty, -0.5, 1e-6);
    CHECK_NEAR(r.params.sp.repetition_penalty, 1.1, 1e-6);
    CHECK_EQ(r.params.ignore_eos, 1);
    CHECK_EQ(r.params.logprobs, 1);
    CHECK_EQ(r.params.top_logprobs, 3);
    CHECK_EQ(r.stream, 1);
    CHECK_EQ(r.include_usage, 1);
    ea_oai_request_deinit(&r);
}

/* truncate_prompt_tokens (vLLM's): the last k tokens; a completions text prompt
 * keeps the BOS its encoder adds and gives up text instead; chat and id prompts
 * keep their last k; -1 is the context; 0, a non-integer, or no room beside the
 * specials is a 400; the echo is then the kept tokens decoded. add_special_tokens
 * (vLLM's) turns the encoder's BOS off for completions, on for chat. */
TEST(truncate_prompt_tokens_and_add_special_tokens) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"abcdef\",\"truncate_prompt_tokens\":3,\"echo\":true}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_prompt, 3);
    CHECK_EQ(r.params.prompt[0], 256); /* BOS kept */
    CHECK_EQ(r.params.prompt[1], 'e');
    CHECK_EQ(r.params.prompt[2], 'f');
    CHECK(r.prompt_text == NULL); /* the echo decodes the kept ids */
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[[5,6,7,8],[9,10]],\"truncate_prompt_tokens\":2}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.n_choices, 2);
    CHECK_EQ(r.choices[0].n_prompt, 2); /* ids: the last two */
    CHECK_EQ(r.choices[0].prompt[0], 7);
    CHECK_EQ(r.choices[1].n_prompt, 2);
    CHECK_EQ(r.choices[1].prompt[0], 9);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[\"abcd\",\"xyz\"],\"truncate_prompt_tokens\":2}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.choices[0].n_prompt, 2); /* BOS + "d" */
    CHECK_EQ(r.choices[0].prompt[1], 'd');
    CHECK_EQ(r.choices[1].n_prompt, 2); /* every prompt of the batch: BOS + "z" */
    CHECK_EQ(r.choices[1].prompt[0], 256);
    CHECK_EQ(r.choices[1].prompt[1], 'z');
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"truncate_prompt_tokens\":4}",
                   &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_prompt, 4); /* the end of "<user>hello<assistant>" */
    CHECK_EQ(r.params.prompt[0], 'a');
    CHECK_EQ(r.params.prompt[3], '>');
    ea_oai_request_deinit(&r);
    /* shorter than k, or -1 with a prompt inside the context: unchanged */
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"ab\",\"truncate_prompt_tokens\":9}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_prompt, 3);
    CHECK(r.prompt_text != NULL);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"ab\",\"truncate_prompt_tokens\":-1}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_prompt, 3);
    ea_oai_request_deinit(&r);
    /* -1 on a prompt past the context: cut to the context, which leaves no room */
    char body[400];
    snprintf(body, sizeof body, "{\"prompt\":\"%0150d\",\"truncate_prompt_tokens\":-1}", 0);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, body, &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), -1);
    CHECK_STREQ(e.code, "context_length_exceeded");
    ea_oai_request_deinit(&r);
    snprintf(body, sizeof body, "{\"prompt\":\"%0150d\",\"truncate_prompt_tokens\":90,\"max_tokens\":5}", 0);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, body, &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0); /* 151 tokens would not fit; 90 do */
    CHECK_EQ(r.params.n_prompt, 90);
    ea_oai_request_deinit(&r);
    static const char *const bad[] = {"{\"prompt\":\"ab\",\"truncate_prompt_tokens\":0}",
                                      "{\"prompt\":\"ab\",\"truncate_prompt_tokens\":-2}",
                                      "{\"prompt\":\"ab\",\"truncate_prompt_tokens\":1.5}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(parse(EA_OAI_COMPLETIONS, bad[i], &r, &e), -1); /* a refused parse frees r itself */
        CHECK_STREQ(e.param, "truncate_prompt_tokens");
    }
    /* prompt_logprobs (vLLM's): the prompt's logprobs with the larger top of the two asks; not streamed */
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"abc\",\"logprobs\":1,\"prompt_logprobs\":4}", &r, &e), 0);
    CHECK_EQ(r.want_prompt_lp, 1);
    CHECK_EQ(r.prompt_lp_top, 4);
    CHECK_EQ(r.params.prompt_logprobs, 1);
    CHECK_EQ(r.params.top_logprobs, 4);
    CHECK_EQ(r.gen_top, 1);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"prompt_logprobs\":0}", &r, &e), 0);
    CHECK_EQ(r.params.prompt_logprobs, 1);
    CHECK_EQ(r.params.logprobs, 0);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"abc\",\"prompt_logprobs\":21}", &r, &e), -1);
    CHECK_STREQ(e.param, "prompt_logprobs");
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"abc\",\"stream\":true,\"prompt_logprobs\":1}", &r, &e), -1);
    CHECK_STREQ(e.param, "prompt_logprobs");
    /* add_special_tokens (vLLM's): completions without the BOS; chat with one, kept by truncation */
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"abc\",\"add_special_tokens\":false}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_prompt, 3);
    CHECK_EQ(r.params.prompt[0], 'a');
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT,
                   "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"add_special_tokens\":true,"
                   "\"truncate_prompt_tokens\":3}",
                   &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_prompt, 3);
    CHECK_EQ(r.params.prompt[0], 256);
    CHECK_EQ(r.params.prompt[2], '>');
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"abc\",\"add_special_tokens\":1}", &r, &e), -1);
    CHECK_STREQ(e.param, "add_special_tokens");
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"abc\",\"truncate_prompt_tokens\":1}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), -1); /* only the BOS would fit */
    CHECK_STREQ(e.param, "truncate_prompt_tokens");
    ea_oai_request_deinit(&r);
}

TEST(defaults) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[5,6,7]}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 99, &e), 0);
    CHECK_EQ(r.params.n_prompt, 3); /* token ids are taken as they are */
    CHECK_EQ(r.params.max_tokens, 16);
    CHECK_NEAR(r.params.sp.temperature, 1.0, 0);
    CHECK_EQ(r.params.sp.seed, 99); /* no seed: the caller's */
    CHECK_EQ(r.params.n_stop, 0);
    CHECK_EQ(r.params.logprobs, 0);
    CHECK_EQ(r.params.keep_special, 0); /* vLLM's skip_special_tokens true */
    CHECK_EQ(r.params.include_stop, 0);
    ea_oai_request_deinit(&r);
    /* vLLM's two text options, on both endpoints */
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[5],\"skip_special_tokens\":false,\"include_stop_str_in_output\":true}",
                   &r, &e), 0);
    CHECK_EQ(r.params.keep_special, 1);
    CHECK_EQ(r.params.include_stop, 1);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"skip_special_tokens\":true}",
                   &r, &e), 0);
    CHECK_EQ(r.params.keep_special, 0);
    ea_oai_request_deinit(&r);
    /* chat: the rest of the context; the rendered prompt gets no extra BOS */
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
                   &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 1, &e), 0);
    CHECK_STREQ(r.prompt_text, "<user>hi<assistant>");
    CHECK_EQ(r.params.n_prompt, 19);
    CHECK_EQ(r.params.max_tokens, 100 - 19);
    ea_oai_request_deinit(&r);
    /* completions default is capped by the room left */
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[1,2,3,4,5,6,7,8,9,10]}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 20, 0, 1, &e), 0);
    CHECK_EQ(r.params.max_tokens, 10);
    ea_oai_request_deinit(&r);
    /* max_completion_tokens sets the limit, and wins over max_tokens (as in vLLM) */
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":7}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 1, &e), 0);
    CHECK_EQ(r.params.max_tokens, 7);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":9,\"max_completion_tokens\":7}",
                   &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 1, &e), 0);
    CHECK_EQ(r.params.max_tokens, 7);
    ea_oai_request_deinit(&r);
}

/* A KV cache of 50 tokens under a context of 100: what can never fit is a 400 naming the numbers,
 * the default max_tokens is cut to what fits. */
TEST(kv_cache_bounds_admission) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[1,2,3,4,5,6,7,8,9,10], \"max_tokens\": 41}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 50, 1, &e), -1);
    CHECK_EQ(e.status, 400);
    CHECK_STREQ(e.param, "max_tokens");
    CHECK(strstr(e.message, "holds 50 tokens") && strstr(e.message, "prompt has 10 tokens") &&
          strstr(e.message, "max_tokens is 41 (51 in all)"));
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[1,2,3,4,5,6,7,8,9,10], \"max_tokens\": 40}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 50, 1, &e), 0);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 50, 1, &e), 0);
    CHECK_EQ(r.params.max_tokens, 50 - 19);
    ea_oai_request_deinit(&r);
}

#define TOOL_F "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}"

TEST(bad_requests_get_400_naming_the_field) {
    static const struct {
        int kind;
        const char *body, *param;
        int status;
    } cases[] = {
        {0, "{\"prompt\": \"x\",", "", 400},
        {0, "[1,2]", "", 400},
        {0, "{}", "prompt", 400},
        {0, "{\"prompt\": 5}", "prompt", 400},
        {0, "{\"prompt\": \"\"}", "prompt", 400},
        {0, "{\"prompt\": []}", "prompt", 400},
        {0, "{\"prompt\": [1, -2]}", "prompt", 400},
        {0, "{\"prompt\": [1, 2.5]}", "prompt", 400},
        {0, "{\"prompt\": [\"a\", [1]]}", "prompt", 400}, /* a batch mixing text and ids */
        {0, "{\"prompt\": [1, 600]}", "prompt", 400}, /* outside the vocabulary (512) */
        {0, "{\"prompt\": \"x\", \"max_tokens\": \"5\"}", "max_tokens", 400},
        {0, "{\"prompt\": \"x\", \"max_tokens\": -1}", "max_tokens", 400},
        {0, "{\"prompt\": \"x\", \"max_tokens\": 0}", "max_tokens", 400},
        {0, "{\"prompt\": \"x\", \"max_tokens\": 99999999999}", "max_tokens", 400},
        {0, "{\"prompt\": \"x\", \"max_tokens\": 99}", "max_tokens", 400}, /* 2 + 99 > 100 */
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": 0}", "max_completion_tokens", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": -3}", "max_completion_tokens", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": 2.5}", "max_completion_tokens", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": \"5\"}", "max_completion_tokens", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": 99999999999}", "max_completion_tokens", 400},
        {0, "{\"prompt\": \"x\", \"max_completion_tokens\": 0}", "max_completion_tokens", 400},
        {0, "{\"prompt\": \"x\", \"temperature\": \"hot\"}", "temperature", 400},
        {0, "{\"prompt\": \"x\", \"temperature\": -1}", "temperature", 400},
        {0, "{\"prompt\": \"x\", \"top_p\": 0}", "top_p", 400},
        {0, "{\"prompt\": \"x\", \"top_p\": 1.5}", "top_p", 400},
        {0, "{\"prompt\": \"x\", \"top_k\": -2}", "top_k", 400},
        {0, "{\"prompt\": \"x\", \"min_p\": 2}", "min_p", 400},
        {0, "{\"prompt\": \"x\", \"presence_penalty\": 3}", "presence_penalty", 400},
        {0, "{\"prompt\": \"x\", \"repetition_penalty\": 0}", "repetition_penalty", 400},
        {0, "{\"prompt\": \"x\", \"seed\": \"s\"}", "seed", 400},
        {0, "{\"prompt\": \"x\", \"stop\": 5}", "stop", 400},
        {0, "{\"prompt\": \"x\", \"stop\": [\"a\", 1]}", "stop", 400},
        {0, "{\"prompt\": \"x\", \"stop\": [\"\"]}", "stop", 400},
        {0, "{\"prompt\": \"x\", \"stop\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]}", "stop", 400},
        {0, "{\"prompt\": \"x\", \"n\": 65}", "n", 400},
        {0, "{\"prompt\": [\"a\", \"b\", \"c\"], \"n\": 22}", "n", 400}, /* 66 choices */
        {0, "{\"prompt\": \"x\", \"stream\": \"yes\"}", "stream", 400},
        {0, "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true}}", "stream_options", 400},
        {0, "{\"prompt\": \"x\", \"logprobs\": 21}", "logprobs", 400},
        {0, "{\"prompt\": \"x\", \"logprobs\": true}", "logprobs", 400},
        {0, "{\"prompt\": \"x\", \"logit_bias\": {\"5\": 101}}", "logit_bias", 400},
        {0, "{\"prompt\": \"x\", \"logit_bias\": {\"five\": 1}}", "logit_bias", 400},
        {0, "{\"prompt\": \"x\", \"logit_bias\": {\"600\": 1}}", "logit_bias", 400}, /* outside the vocabulary */
        {0, "{\"prompt\": \"x\", \"logit_bias\": {\"505\": 1}}", "logit_bias", 400}, /* a padding row */
        {0, "{\"prompt\": \"x\", \"eaas_test_forced_text\": \"y\"}", "eaas_test_forced_text", 400}, /* hooks off */
        {0, "{\"prompt\": \"x\", \"best_of\": 3}", "best_of", 400},
        {0, "{\"prompt\": \"x\", \"model\": 3}", "model", 400},
        {0, "{\"prompt\": \"x\", \"ignore_eos\": 1}", "ignore_eos", 400},
        {0, "{\"prompt\": \"x\", \"skip_special_tokens\": 0}", "skip_special_tokens", 400},
        {0, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"continuous_usage_stats\": true}}",
         "stream_options.continuous_usage_stats", 400}, /* without include_usage it would do nothing */
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"include_stop_str_in_output\": \"yes\"}",
         "include_stop_str_in_output", 400},
        {1, "{\"messages\": []}", "messages", 400},
        {1, "{\"messages\": {}}", "messages", 400},
        {1, "{\"prompt\": \"x\"}", "messages", 400},
        {1, "{\"messages\": [\"hi\"]}", "messages[0]", 400},
        {1, "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", "messages[0].role", 400},
        {1, "{\"messages\": [{\"content\": \"x\"}]}", "messages[0].role", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content", 400},
        {1, "{\"messages\": [{\"role\": \"user\"}]}", "messages[0].content", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages[0].content[0]", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", "top_logprobs", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": 2}", "logprobs", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\"}]}", "tools[0]", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [" TOOL_F "], \"tool_choice\": \"required\"}", "tools", 400}, /* no parser for this family */
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [" TOOL_F "], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}}}", "tools", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [" TOOL_F "], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}", "tool_choice", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"auto\"}", "tool_choice", 400}, /* no tools */
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [" TOOL_F "]}", "tools", 400}, /* no parser for this family */
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"functions\": []}", "functions", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": 1}", "chat_template_kwargs", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"continue_final_message\": true}", "continue_final_message", 400}, /* last is the user's */
        {1, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}], \"continue_final_message\": true, \"add_generation_prompt\": true}", "continue_final_message", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"xml\"}}", "response_format.type", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"r\", \"schema\": {\"type\": \"object\", \"properties\": {\"items\": {\"type\": \"array\", \"items\": {\"properties\": {\"deeply_nested_name\": {\"$ref\": \"#/$defs/missing\"}}}}}}}}}", "response_format.json_schema.schema.properties.items.items.properties.deeply_nested_name.$ref", 400},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": {}}}}", "response_format.json_schema.name", 400},
        {0, "{\"prompt\": \"x\", \"guided_choice\": []}", "guided_choice", 400},
        {0, "{\"prompt\": \"x\", \"guided_regex\": \"(a\"}", "guided_regex", 400},
        {0, "{\"prompt\": \"x\", \"guided_regex\": \"a\", \"guided_choice\": [\"a\"]}", "guided_regex", 400},
        {0, "{\"prompt\": \"x\", \"grammar\": \"root ::= item\"}", "grammar", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ea_oai_error e;
        memset(&e, 0, sizeof e);
        int st = status_of(cases[i].kind ? EA_OAI_CHAT : EA_OAI_COMPLETIONS, cases[i].body, 100, &e);
        if (st != cases[i].status || strcmp(e.param, cases[i].param) != 0 || !e.message[0])
            FAIL_("case %zu %s: status %d param '%s' message '%s'", i, cases[i].body, st, e.param, e.message);
        CHECK_STREQ(e.type, "invalid_request_error");
    }
}

/* A field we neither honour nor list as accepted-with-no-effect is refused with a
 * 400 naming it, never dropped: the fields vLLM honours and we do not yet
 * (chat_template_kwargs, stop_token_ids, min_tokens) were accepted and ignored
 * before this. A field of the other endpoint counts as unknown. */
TEST(unknown_fields_refused_naming_them) {
    static const struct {
        int kind;
        const char *body, *param;
    } cases[] = {
        {0, "{\"prompt\": \"x\", \"prompt_embeds\": \"AAAA\"}", "prompt_embeds"},
        {0, "{\"prompt\": \"x\", \"temprature\": 0}", "temprature"},
        {0, "{\"prompt\": \"x\", \"top_logprobs\": 2}", "top_logprobs"}, /* chat's field */
        {0, "{\"prompt\": \"x\", \"messages\": []}", "messages"},
        {0, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"include_obfuscation\": true}}",
         "stream_options.include_obfuscation"},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template\": \"{{x}}\"}",
         "chat_template"},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"spaces_between_special_tokens\": true}",
         "spaces_between_special_tokens"},
        {1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"echo\": false}", "echo"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ea_oai_error e;
        memset(&e, 0, sizeof e);
        int st = status_of(cases[i].kind ? EA_OAI_CHAT : EA_OAI_COMPLETIONS, cases[i].body, 100, &e);
        if (st != 400 || strcmp(e.param, cases[i].param) != 0 || !strstr(e.message, cases[i].param))
            FAIL_("case %zu %s: status %d param '%s' message '%s'", i, cases[i].body, st, e.param, e.message);
        CHECK_STREQ(e.type, "invalid_request_error");
    }
    /* the documented accepted-with-no-effect fields pass, on both endpoints */
    const char *noop = "\"user\": \"u\", \"metadata\": {\"k\": \"v\"}, \"store\": false, \"service_tier\": "
                       "\"auto\", \"safety_identifier\": \"s\", \"prompt_cache_key\": \"p\"";
    char body[512];
    ea_oai_error e;
    snprintf(body, sizeof body, "{\"prompt\": \"x\", %s}", noop);
    CHECK_EQ(status_of(EA_OAI_COMPLETIONS, body, 100, &e), 200);
    snprintf(body, sizeof body,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"parallel_tool_calls\": true, %s}", noop);
    CHECK_EQ(status_of(EA_OAI_CHAT, body, 100, &e), 200);
    /* /tokenize and /detokenize too */
    ea_sbuf b = {0};
    const char *t = "{\"prompt\": \"ab\", \"return_token_strs\": true}";
    CHECK_EQ(ea_oai_tokenize(t, strlen(t), &OPS, 64, &b, &e), -1);
    CHECK_STREQ(e.param, "return_token_strs");
    t = "{\"tokens\": [97], \"skip_special_tokens\": true}";
    CHECK_EQ(ea_oai_detokenize(t, strlen(t), &OPS, &b, &e), -1);
    CHECK_STREQ(e.param, "skip_special_tokens");
    ea_sbuf_deinit(&b);
}

/* stop_token_ids and min_tokens reach the scheduler's params; bad values are 400s
 * naming them (ids by the prompt-id rule, min_tokens against max_tokens after defaults). */
TEST(stop_token_ids_and_min_tokens) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"ab\",\"stop_token_ids\":[7,300],\"min_tokens\":4}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_stop_ids, 2);
    CHECK_EQ(r.params.stop_ids[0], 7);
    CHECK_EQ(r.params.stop_ids[1], 300);
    CHECK_EQ(r.params.min_tokens, 4);
    ea_oai_request_deinit(&r);
    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{\"prompt\": \"x\", \"stop_token_ids\": 5}", "stop_token_ids"},
        {"{\"prompt\": \"x\", \"stop_token_ids\": [1, -1]}", "stop_token_ids"},
        {"{\"prompt\": \"x\", \"stop_token_ids\": [600]}", "stop_token_ids"}, /* outside the vocabulary (512) */
        {"{\"prompt\": \"x\", \"min_tokens\": -1}", "min_tokens"},
        {"{\"prompt\": \"x\", \"min_tokens\": 17}", "min_tokens"}, /* > the default max_tokens 16 */
        {"{\"prompt\": \"x\", \"max_tokens\": 3, \"min_tokens\": 4}", "min_tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        int st = status_of(EA_OAI_COMPLETIONS, bad[i].body, 100, &e);
        if (st != 400 || strcmp(e.param, bad[i].param) != 0)
            FAIL_("case %zu %s: status %d param '%s' message '%s'", i, bad[i].body, st, e.param, e.message);
    }
    CHECK_EQ(status_of(EA_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": 4, \"min_tokens\": 4}", 100, &e), 200);
}

TEST(prompt_longer_than_context) {
    ea_oai_error e;
    CHECK_EQ(status_of(EA_OAI_COMPLETIONS, "{\"prompt\": [1,2,3,4,5]}", 5, &e), 400);
    CHECK_STREQ(e.code, "context_length_exceeded");
    CHECK(strstr(e.message, "maximum context length is 5 tokens") != NULL);
    CHECK_EQ(status_of(EA_OAI_COMPLETIONS, "{\"prompt\": [1,2,3,4], \"max_tokens\": 1}", 5, &e), 200);
    CHECK_EQ(status_of(EA_OAI_COMPLETIONS, "{\"prompt\": [1,2,3,4], \"max_tokens\": 2}", 5, &e), 400);
}

TEST(invalid_utf8_and_position_in_error) {
    ea_oai_request r;
    ea_oai_error e;
    const char bad[] = "{\"prompt\": \"a\xff\"}";
    CHECK_EQ(ea_oai_parse(EA_OAI_COMPLETIONS, bad, sizeof bad - 1, &r, &e), -1);
    CHECK_EQ(e.status, 400);
    CHECK(strstr(e.message, "line 1") != NULL);
    const char nested[] = "{\n \"prompt\": \"x\",\n \"stop\": [\"a\" \"b\"]}";
    CHECK_EQ(ea_oai_parse(EA_OAI_COMPLETIONS, nested, sizeof nested - 1, &r, &e), -1);
    CHECK(strstr(e.message, "line 3") != NULL);
    const char dup[] = "{\"prompt\": \"x\", \"prompt\": \"y\"}";
    CHECK_EQ(ea_oai_parse(EA_OAI_COMPLETIONS, dup, sizeof dup - 1, &r, &e), -1);
}

/* \u0000 in a body: the user's words and where it is, not jansson's "JSON_ALLOW_NUL" */
TEST(nul_in_body_named) {
    ea_oai_request r;
    ea_oai_error e;
    const char *chat = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000b\"}]}";
    CHECK_EQ(ea_oai_parse(EA_OAI_CHAT, chat, strlen(chat), &r, &e), -1);
    CHECK_EQ(e.status, 400);
    CHECK_STREQ(e.message, "request body: strings may not contain the NUL character (\\u0000): "
                           "'messages[0].content' does");
    CHECK_STREQ(e.param, "messages[0].content");
    const char *key = "{\"pro\\u0000mpt\": \"x\"}";
    CHECK_EQ(ea_oai_parse(EA_OAI_COMPLETIONS, key, strlen(key), &r, &e), -1);
    CHECK(strstr(e.message, "may not contain the NUL character") != NULL);
    CHECK(strstr(e.message, "JSON_ALLOW_NUL") == NULL);
    ea_sbuf b = {0};
    const char *det = "{\"tokens\": [1], \"x\": [\"\\u0000\"]}";
    CHECK_EQ(ea_oai_detokenize(det, strlen(det), &OPS, &b, &e), -1);
    CHECK(strstr(e.message, "'x[0]' does") != NULL);
    ea_sbuf_deinit(&b);
}

TEST(error_json_shape) {
    ea_oai_error e;
    ea_oai_fail(&e, 404, NULL, "model", "model_not_found", "no model '%s'", "q\"\xff");
    ea_sbuf b = {0};
    ea_oai_render_error(&e, &b);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    CHECK(j != NULL);
    json_t *err = json_object_get(j, "error");
    CHECK_STREQ(json_string_value(json_object_get(err, "type")), "not_found_error");
    CHECK_STREQ(json_string_value(json_object_get(err, "param")), "model");
    CHECK_STREQ(json_string_value(json_object_get(err, "code")), "model_not_found");
    CHECK_STREQ(json_string_value(json_object_get(err, "message")), "no model 'q\"\xEF\xBF\xBD'");
    json_decref(j);
    ea_sbuf_reset(&b);
    ea_oai_fail(&e, 400, NULL, NULL, NULL, "x");
    ea_oai_render_error(&e, &b);
    CHECK_STREQ(b.data, "{\"error\":{\"message\":\"x\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
    ea_sbuf_deinit(&b);
    ea_oai_error_from_status(EA_ERR_BUSY, "queue full", &e);
    CHECK_EQ(e.status, 503);
    ea_oai_error_from_status(EA_ERR_RANGE, "too long", &e);
    CHECK_EQ(e.status, 400);
}

static ea_event done_event(ea_finish f, int pt, int ct) {
    ea_event d;
    memset(&d, 0, sizeof d);
    d.kind = EA_EV_DONE;
    d.finish = f;
    d.prompt_tokens = pt;
    d.completion_tokens = ct;
    return d;
}

static ea_event tok_event(const char *text, int32_t id, float lp) {
    ea_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EA_EV_TOKEN;
    ev.text_len = (int)strlen(text);
    memcpy(ev.text, text, (size_t)ev.text_len);
    ev.token = id;
    ev.logprob = lp;
    ev.n_top = 2;
    ev.top_ids[0] = id;
    ev.top_lp[0] = lp;
    ev.top_ids[1] = 300;
    ev.top_lp[1] = -1.0f / 0.0f;
    return ev;
}

/* prefix + 32 lowercase hex digits (vLLM's form) */
static int is_response_id(const char *id, const char *prefix) {
    size_t n = strlen(prefix);
    if (!id || strncmp(id, prefix, n) || strlen(id) != n + 32) return 0;
    for (const char *p = id + n; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

/* Ids are random, so they differ between two outputs made alike (as after a restart, when the
 * scheduler's request numbers start again at 1). */
TEST(response_ids_random) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"x\"}", &r, &e), 0);
    ea_oai_output a, b;
    ea_oai_output_init(&a, &r, "m", 1000, &OPS);
    ea_oai_output_init(&b, &r, "m", 1000, &OPS);
    CHECK(is_response_id(a.id, "cmpl-") && is_response_id(b.id, "cmpl-"));
    CHECK(strcmp(a.id, b.id) != 0);
    ea_oai_output_deinit(&a);
    ea_oai_output_deinit(&b);
    ea_oai_request_deinit(&r);
}

TEST(nonstreaming_chat_with_logprobs) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":1}",
                   &r, &e), 0);
    ea_oai_output o;
    ea_oai_output_init(&o, &r, "m", 1000, &OPS);
    ea_event a = tok_event("H", 'H', -0.5f), b = tok_event("", 300, -2.0f);
    ea_oai_output_add(&o, 0, &a);
    ea_oai_output_add(&o, 0, &b);
    ea_event done = done_event(EA_FINISH_STOP, 7, 2);
    done.cached_tokens = 4;
    ea_sbuf out = {0};
    ea_oai_output_done(&o, 0, &done);
    ea_oai_render_final(&o, &out);
    json_t *j = json_loadb(out.data, out.len, 0, NULL);
    CHECK(j != NULL);
    CHECK(is_response_id(json_string_value(json_object_get(j, "id")), "chatcmpl-"));
    CHECK_STREQ(json_string_value(json_object_get(j, "id")), o.id);
    CHECK_STREQ(json_string_value(json_object_get(j, "object")), "chat.completion");
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(c0, "message"), "content")), "H");
    CHECK_STREQ(json_string_value(json_object_get(c0, "finish_reason")), "stop");
    json_t *lp = json_object_get(json_object_get(c0, "logprobs"), "content");
    CHECK_EQ(json_array_size(lp), 2);
    json_t *l1 = json_array_get(lp, 1);
    CHECK_STREQ(json_string_value(json_object_get(l1, "token")), "\xEF\xBF\xBD"); /* a lone byte */
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(l1, "bytes"), 0)), 0xE4);
    CHECK_NEAR(json_real_value(json_object_get(l1, "logprob")), -2.0, 1e-6);
    CHECK_EQ(json_array_size(json_object_get(l1, "top_logprobs")), 1); /* top_logprobs = 1 of the 2 given */
    json_t *u = json_object_get(j, "usage");
    CHECK_EQ(json_integer_value(json_object_get(u, "total_tokens")), 9);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")), 4);
    json_decref(j);
    ea_sbuf_deinit(&out);
    ea_oai_output_deinit(&o);
    ea_oai_request_deinit(&r);
}

/* Split an SSE body into its data payloads. */
static int sse_payloads(const char *s, char out[][2048], int max) {
    int n = 0;
    while ((s = strstr(s, "data: ")) && n < max) {
        s += 6;
        const char *end = strstr(s, "\n\n");
        if (!end) return -1;
        snprintf(out[n++], 2048, "%.*s", (int)(end - s), s);
        s = end + 2;
    }
    return n;
}

TEST(streaming_completions_with_usage_and_logprobs) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS,
                   "{\"prompt\":\"x\",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"logprobs\":2}", &r, &e),
             0);
    ea_oai_output o;
    ea_oai_output_init(&o, &r, "m", 1000, &OPS);
    ea_sbuf out = {0};
    ea_oai_stream_start(&o, &out);
    CHECK_EQ(out.len, 0); /* completions have no role chunk */
    ea_event a = tok_event("ab", 'a', -0.25f), b = tok_event("c", 'c', -1.0f);
    ea_oai_stream_token(&o, 0, &a, &out);
    ea_oai_stream_token(&o, 0, &b, &out);
    ea_event done = done_event(EA_FINISH_LENGTH, 1, 2);
    ea_oai_stream_done(&o, 0, &done, &out);
    ea_oai_stream_end(&o, &out);
    static char p[8][2048];
    int n = sse_payloads(out.data, p, 8);
    CHECK_EQ(n, 5);
    CHECK_STREQ(p[4], "[DONE]");
    json_t *j = json_loads(p[1], 0, NULL);
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    CHECK_STREQ(json_string_value(json_object_get(c0, "text")), "c");
    CHECK(json_is_null(json_object_get(j, "usage")));
    json_t *lp = json_object_get(c0, "logprobs");
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), 0)), 2);
    CHECK_NEAR(json_real_value(json_array_get(json_object_get(lp, "token_logprobs"), 0)), -1.0, 1e-6);
    json_t *top = json_array_get(json_object_get(lp, "top_logprobs"), 0);
    CHECK_NEAR(json_real_value(json_object_get(top, "\xEF\xBF\xBD")), -9999.0, 0); /* -inf */
    json_decref(j);
    j = json_loads(p[2], 0, NULL);
    CHECK_STREQ(json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "finish_reason")),
                "length");
    json_decref(j);
    j = json_loads(p[3], 0, NULL);
    CHECK_EQ(json_array_size(json_object_get(j, "choices")), 0);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), 2);
    json_decref(j);
    ea_sbuf_deinit(&out);
    ea_oai_output_deinit(&o);
    ea_oai_request_deinit(&r);
}

TEST(streaming_chat_role_then_deltas) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}", &r, &e), 0);
    ea_oai_output o;
    ea_oai_output_init(&o, &r, "m", 1000, &OPS);
    ea_sbuf out = {0};
    ea_oai_stream_start(&o, &out);
    ea_event held = tok_event("", 'a', 0), a = tok_event("hi", 'h', 0);
    ea_oai_stream_token(&o, 0, &held, &out); /* held-back text, no logprobs: no chunk */
    ea_oai_stream_token(&o, 0, &a, &out);
    ea_event done = done_event(EA_FINISH_STOP, 0, 0);
    ea_oai_stream_done(&o, 0, &done, &out);
    ea_oai_stream_end(&o, &out);
    static char p[8][2048];
    CHECK_EQ(sse_payloads(out.data, p, 8), 4);
    json_t *j = json_loads(p[0], 0, NULL);
    CHECK_STREQ(json_string_value(json_object_get(j, "object")), "chat.completion.chunk");
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta"), "role")),
                "assistant");
    CHECK(json_object_get(j, "usage") == NULL);
    json_decref(j);
    j = json_loads(p[1], 0, NULL);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta"), "content")),
                "hi");
    json_decref(j);
    CHECK_STREQ(p[3], "[DONE]");
    ea_sbuf_deinit(&out);
    ea_oai_output_deinit(&o);
    ea_oai_request_deinit(&r);
}

TEST(tokenize_detokenize_models) {
    ea_sbuf b = {0};
    ea_oai_error e;
    const char *t = "{\"prompt\": \"ab\"}";
    CHECK_EQ(ea_oai_tokenize(t, strlen(t), &OPS, 64, &b, &e), 0);
    CHECK_STREQ(b.data, "{\"count\":3,\"max_model_len\":64,\"tokens\":[256,97,98]}");
    ea_sbuf_reset(&b);
    t = "{\"prompt\": \"ab\", \"add_special_tokens\": false}";
    CHECK_EQ(ea_oai_tokenize(t, strlen(t), &OPS, 64, &b, &e), 0);
    CHECK_STREQ(b.data, "{\"count\":2,\"max_model_len\":64,\"tokens\":[97,98]}");
    ea_sbuf_reset(&b);
    t = "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}";
    CHECK_EQ(ea_oai_tokenize(t, strlen(t), &OPS, 64, &b, &e), 0);
    CHECK(strstr(b.data, "\"count\":18") != NULL); /* "<user>q<assistant>" */
    ea_sbuf_reset(&b);
    t = "{\"tokens\": [104, 105]}";
    CHECK_EQ(ea_oai_detokenize(t, strlen(t), &OPS, &b, &e), 0);
    CHECK_STREQ(b.data, "{\"prompt\":\"hi\"}");
    ea_sbuf_reset(&b);
    t = "{\"tokens\": [104, 9999]}";
    CHECK_EQ(ea_oai_detokenize(t, strlen(t), &OPS, &b, &e), -1);
    CHECK_EQ(e.status, 400);
    t = "{\"tokens\": \"hi\"}";
    CHECK_EQ(ea_oai_detokenize(t, strlen(t), &OPS, &b, &e), -1);
    /* one rule for ids with no token (a padding row): /detokenize and a prompt of ids both refuse it, alike */
    t = "{\"tokens\": [104, 505]}";
    CHECK_EQ(ea_oai_detokenize(t, strlen(t), &OPS, &b, &e), -1);
    CHECK_EQ(e.status, 400);
    CHECK(strstr(e.message, "= 505 is not a token id (the tokenizer has no token") != NULL);
    ea_oai_error e2;
    CHECK_EQ(status_of(EA_OAI_COMPLETIONS, "{\"prompt\": [104, 505], \"max_tokens\": 2}", 64, &e2), 400);
    CHECK(strstr(e2.message, "= 505 is not a token id (the tokenizer has no token") != NULL);
    CHECK_EQ(status_of(EA_OAI_COMPLETIONS, "{\"prompt\": [104, 499], \"max_tokens\": 2}", 64, &e2), 200);
    t = "{\"text\": \"hi\"}";
    CHECK_EQ(ea_oai_tokenize(t, strlen(t), &OPS, 64, &b, &e), -1);
    CHECK_STREQ(e.param, "prompt");
    ea_sbuf_reset(&b);
    ea_oai_render_models("tiny", 4096, 5, &b);
    CHECK_STREQ(b.data, "{\"object\":\"list\",\"data\":[{\"id\":\"tiny\",\"object\":\"model\",\"created\":5,"
                        "\"owned_by\":\"eaas\",\"max_model_len\":4096}]}");
    ea_sbuf_deinit(&b);
}

TEST(metrics_histograms_are_cumulative) {
    ea_metrics *m;
    CHECK_EQ(ea_metrics_create(&m), EA_OK);
    ea_metrics_observe(m, EA_HIST_TTFT, 0.003);  /* bucket le=0.005 */
    ea_metrics_observe(m, EA_HIST_TTFT, 0.005);  /* le is inclusive */
    ea_metrics_observe(m, EA_HIST_TTFT, 9999.0); /* only +Inf */
    ea_metrics_finished(m, EA_FINISH_LENGTH);
    ea_metrics_http_status(m, 200);
    ea_metrics_http_status(m, 400);
    ea_metrics_http_status(m, 200);
    ea_sched_stats st;
    memset(&st, 0, sizeof st);
    st.running = 3;
    st.kv_blocks_total = 10;
    st.kv_blocks_used = 5;
    st.generation_tokens = 77;
    ea_sbuf b = {0};
    ea_metrics_render(m, &st, &b);
    CHECK(strstr(b.data, "eaas:time_to_first_token_seconds_bucket{le=\"0.001\"} 0\n") != NULL);
    CHECK(strstr(b.data, "eaas:time_to_first_token_seconds_bucket{le=\"0.005\"} 2\n") != NULL);
    CHECK(strstr(b.data, "eaas:time_to_first_token_seconds_bucket{le=\"2560\"} 2\n") != NULL);
    CHECK(strstr(b.data, "eaas:time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n") != NULL);
    CHECK(strstr(b.data, "eaas:time_to_first_token_seconds_count 3\n") != NULL);
    CHECK(strstr(b.data, "eaas:time_to_first_token_seconds_sum 9999.008\n") != NULL);
    CHECK(strstr(b.data, "# TYPE eaas:e2e_request_latency_seconds histogram\n") != NULL);
    CHECK(strstr(b.data, "eaas:num_requests_running 3\n") != NULL);
    CHECK(strstr(b.data, "eaas:kv_cache_usage_perc 0.5\n") != NULL);
    CHECK(strstr(b.data, "eaas:generation_tokens_total 77\n") != NULL);
    CHECK(strstr(b.data, "eaas:request_success_total{finished_reason=\"length\"} 1\n") != NULL);
    CHECK(strstr(b.data, "eaas:http_requests_total{code=\"200\"} 2\n") != NULL);
    /* model_name on every sample line, first; comments untouched; the value escaped */
    ea_sbuf_puts(&b, "eaas:ep_pairs_total{rank=\"0\",where=\"local\"} 5\neaas:empty{} 1\n");
    ea_metrics_label_all(&b, "model_name", "tiny");
    CHECK(strstr(b.data, "eaas:num_requests_running{model_name=\"tiny\"} 3\n") != NULL);
    CHECK(strstr(b.data, "eaas:request_success_total{model_name=\"tiny\",finished_reason=\"length\"} 1\n") != NULL);
    CHECK(strstr(b.data, "eaas:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 3\n") != NULL);
    CHECK(strstr(b.data, "eaas:ep_pairs_total{model_name=\"tiny\",rank=\"0\",where=\"local\"} 5\n") != NULL);
    CHECK(strstr(b.data, "eaas:empty{model_name=\"tiny\"} 1\n") != NULL);
    CHECK(strstr(b.data, "# TYPE eaas:e2e_request_latency_seconds histogram\n") != NULL);
    int n_samples = 0, n_labelled = 0;
    for (const char *l = b.data; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "eaas:", 5)) continue;
        n_samples++;
        const char *brace = strchr(l, '{'), *sp = strchr(l, ' ');
        n_labelled += brace && sp && brace < sp && !strncmp(brace, "{model_name=\"tiny\"", 18);
    }
    CHECK(n_samples > 50);
    CHECK_EQ(n_labelled, n_samples);
    ea_sbuf_reset(&b);
    ea_sbuf_puts(&b, "eaas:x 1\n");
    ea_metrics_label_all(&b, "model_name", "a\"b\\c");
    CHECK_STREQ(b.data, "eaas:x{model_name=\"a\\\"b\\\\c\"} 1\n");
    ea_sbuf_reset(&b);
    ea_metrics_render(m, NULL, &b); /* loading: no scheduler gauges */
    CHECK(strstr(b.data, "num_requests_running") == NULL);
    CHECK(strstr(b.data, "inter_token_latency_seconds_count 0\n") != NULL);
    ea_sbuf_deinit(&b);
    ea_metrics_destroy(m);
}

/* n, batched prompts, seeds: choice p * n + j has prompt p and seed + j. */
TEST(choices_prompt_major_with_derived_seeds) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[\"ab\",\"cde\"],\"n\":3,\"seed\":10,\"max_tokens\":2}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.n_choices, 6);
    for (int c = 0; c < 6; c++) {
        CHECK_EQ(r.choices[c].n_prompt, c < 3 ? 3 : 4); /* BOS + bytes */
        CHECK_EQ(r.choices[c].prompt[1], c < 3 ? 'a' : 'c');
        CHECK_EQ(r.choices[c].sp.seed, 10 + (uint64_t)(c % 3));
        CHECK_EQ(r.choices[c].max_tokens, 2);
    }
    ea_oai_request_deinit(&r);
    /* without a seed: the server's, + j */
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[[1,2],[3]],\"n\":2}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 1000, &e), 0);
    CHECK_EQ(r.n_choices, 4);
    CHECK_EQ(r.choices[3].sp.seed, 1001);
    CHECK_EQ(r.choices[2].n_prompt, 1);
    CHECK_EQ(r.choices[2].prompt[0], 3);
    ea_oai_request_deinit(&r);
}

TEST(logit_bias_and_forced_text_reach_params) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"65\":-100,\"66\":2.5},\"eaas_test_forced_text\":\"AB\"}",
                   &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 100, 0, 7, &e), 0);
    CHECK_EQ(r.params.n_bias, 2);
    CHECK_EQ(r.choices[0].bias[0].id, 65);
    CHECK_NEAR(r.choices[0].bias[0].bias, -100, 0);
    CHECK_NEAR(r.choices[0].bias[1].bias, 2.5, 0);
    CHECK_EQ(r.choices[0].n_forced, 2); /* no BOS: the text the model says */
    CHECK_EQ(r.choices[0].forced[1], 'B');
    ea_oai_request_deinit(&r);
}

/* Is text in the language of g (whole)? */
static int in_language(const ea_grammar *g, const char *text) {
    ea_gmatcher *m;
    if (ea_gmatcher_create(g, &m) != EA_OK) return -1;
    int ok = ea_gmatcher_accept_bytes(m, text, strlen(text)) == EA_OK && ea_gmatcher_accepting(m);
    ea_gmatcher_destroy(m);
    return ok;
}

/* tool_choice "required" / a named function: a grammar in the family's own
 * call format whose arguments follow the function's parameters schema. */
TEST(tool_choice_constrains_to_the_family_format) {
#define TOOLS_FG "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"," \
                 "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}},"                            \
                 "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]"
#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
    static const char *F1 = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\":1}}\n</tool_call>";
    static const char *G1 = "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
    char two[256];
    snprintf(two, sizeof two, "%s\n%s", F1, G1);
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS TOOLS_FG ",\"tool_choice\":\"required\"}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 400, 0, 7, &e), 0);
    CHECK(r.params.grammar != NULL && r.choices[0].grammar == r.params.grammar);
    CHECK_EQ(in_language(r.params.grammar, F1), 1);
    CHECK_EQ(in_language(r.params.grammar, two), 1); /* parallel_tool_calls defaults to true */
    CHECK_EQ(in_language(r.params.grammar, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"), 0);
    CHECK_EQ(in_language(r.params.grammar, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\":\"1\"}}\n</tool_call>"), 0);
    CHECK_EQ(in_language(r.params.grammar, "Sure. <tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"), 0);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS TOOLS_FG ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 400, 0, 7, &e), 0);
    CHECK_EQ(in_language(r.params.grammar, G1), 1);
    CHECK_EQ(in_language(r.params.grammar, two), 0);
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS TOOLS_FG ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 400, 0, 7, &e), 0);
    CHECK_EQ(in_language(r.params.grammar, G1), 1);
    CHECK_EQ(in_language(r.params.grammar, F1), 0);
    { /* another rank compiles the same grammar from the source in the bus's submit event */
        ea_grammar *g2 = NULL;
        CHECK(r.params.grammar_src && r.params.n_grammar_src > 0);
        CHECK_EQ(ea_oai_constraint_compile(r.params.grammar_src, (size_t)r.params.n_grammar_src, &g2), EA_OK);
        CHECK_EQ(in_language(g2, G1), 1);
        CHECK_EQ(in_language(g2, F1), 0);
        ea_grammar_destroy(g2);
        static const char *bad = "{\"eaas_tool_calls\":{\"format\":1,\"choice\":3,\"name\":\"zz\",\"parallel\":true,"
                                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]}}";
        CHECK(ea_oai_constraint_compile(bad, strlen(bad), &g2) != EA_OK && g2 == NULL); /* names no tool */
    }
    ea_oai_request_deinit(&r);
    /* DeepSeek-V3: its marker tokens, bare names, a ```json block */
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS TOOLS_FG ",\"tool_choice\":\"required\"}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_D, 400, 0, 7, &e), 0);
    CHECK_EQ(in_language(r.params.grammar,
                         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\":2}\n```"
                         "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{}\n```"
                         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"), 1);
    CHECK_EQ(in_language(r.params.grammar, F1), 0);
    ea_oai_request_deinit(&r);
    /* DeepSeek-V3.1: the same markers, NAME<｜tool▁sep｜>ARGS, no type word, no fence, no separator */
    {
        static const ea_text_ops OPS_D31 = {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_DEEPSEEK_V31};
        CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS TOOLS_FG ",\"tool_choice\":\"required\"}", &r, &e), 0);
        CHECK_EQ(ea_oai_prepare(&r, &OPS_D31, 400, 0, 7, &e), 0);
        CHECK_EQ(in_language(r.params.grammar, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\":2}"
                                               "<｜tool▁call▁end｜><｜tool▁call▁begin｜>g<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
                                               "<｜tool▁calls▁end｜>"), 1);
        CHECK_EQ(in_language(r.params.grammar, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
                                               "{\"a\":2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"), 0); /* V3's layout */
        ea_oai_request_deinit(&r);
    }
    /* Kimi K2: its section markers, functions.NAME:IDX ids with an index of the model's choosing */
    {
        static const ea_text_ops OPS_K = {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_KIMI_K2};
#define K_CALL(id, args) "<|tool_call_begin|>functions." id "<|tool_call_argument_begin|>" args "<|tool_call_end|>"
#define K_SECTION(calls) "<|tool_calls_section_begin|>" calls "<|tool_calls_section_end|>"
        CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS TOOLS_FG ",\"tool_choice\":\"required\"}", &r, &e), 0);
        CHECK_EQ(ea_oai_prepare(&r, &OPS_K, 400, 0, 7, &e), 0);
        CHECK_EQ(in_language(r.params.grammar, K_SECTION(K_CALL("f:0", "{\"a\":2}"))), 1);
        CHECK_EQ(in_language(r.params.grammar, K_SECTION(K_CALL("f:12", "{\"a\":2}") K_CALL("g:13", "{}"))), 1);
        CHECK_EQ(in_language(r.params.grammar, K_SECTION(K_CALL("f", "{\"a\":2}"))), 0);     /* no index */
        CHECK_EQ(in_language(r.params.grammar, K_SECTION(K_CALL("f:x", "{\"a\":2}"))), 0);   /* not digits */
        CHECK_EQ(in_language(r.params.grammar, K_SECTION(K_CALL("f:1", "{\"a\":\"2\"}"))), 0); /* a is an integer */
        CHECK_EQ(in_language(r.params.grammar, K_SECTION(K_CALL("h:1", "{}"))), 0);          /* no such function */
        ea_grammar *g2 = NULL; /* the bus's copy compiles the same */
        CHECK_EQ(ea_oai_constraint_compile(r.params.grammar_src, (size_t)r.params.n_grammar_src, &g2), EA_OK);
        CHECK_EQ(in_language(g2, K_SECTION(K_CALL("g:7", "{}"))), 1);
        ea_grammar_destroy(g2);
        ea_oai_request_deinit(&r);
#undef K_CALL
#undef K_SECTION
    }
    /* Qwen3.5: <function=NAME> with a <parameter=KEY> block per property, strings raw */
#define X_CALL(name, params) "<tool_call>\n<function=" name ">\n" params "</function>\n</tool_call>"
#define X_PAR(k, v) "<parameter=" k ">\n" v "\n</parameter>\n"
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
                   "\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"s\":{\"type\":\"string\"},"
                   "\"u\":{\"enum\":[\"C\",\"F\"]},\"o\":{\"$ref\":\"#/$defs/pt\"},\"d\":{\"type\":\"string\",\"format\":\"date\"}},"
                   "\"required\":[\"a\",\"s\"],\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},"
                   "\"required\":[\"x\"]}}}}},{\"type\":\"function\",\"function\":{\"name\":\"g\"}}],"
                   "\"tool_choice\":\"required\"}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_X, 400, 0, 7, &e), 0);
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a", "12") X_PAR("s", "two\nlines, 5 < 6"))), 1);
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a", "-3") X_PAR("s", "") X_PAR("u", "F")
                                                       X_PAR("o", "{\"x\":1.5}") X_PAR("d", "2026-11-26"))
                                           "\n" X_CALL("g", "")), 1);
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a", "1"))), 0);                          /* s is required */
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a", "\"1\"") X_PAR("s", "x"))), 0);      /* a is an integer */
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a", "1") X_PAR("s", "a</b"))), 0);        /* no "</" in raw text */
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a", "1") X_PAR("s", "x") X_PAR("u", "K"))), 0); /* enum */
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("s", "x") X_PAR("a", "1"))), 0);          /* schema order */
    CHECK_EQ(in_language(r.params.grammar, X_CALL("g", X_PAR("z", "1"))), 0);                          /* g has none */
    CHECK_EQ(in_language(r.params.grammar, F1), 0);
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a", "1") X_PAR("s", "x") X_PAR("d", "2026-02-30"))), 0); /* format */
    {
        ea_grammar *g2 = NULL;
        CHECK_EQ(ea_oai_constraint_compile(r.params.grammar_src, (size_t)r.params.n_grammar_src, &g2), EA_OK);
        CHECK_EQ(in_language(g2, X_CALL("g", "")), 1);
        ea_grammar_destroy(g2);
    }
    ea_oai_request_deinit(&r);
    /* an object schema without properties (additionalProperties not false): any parameters, raw */
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
                   "\"type\":\"object\"}}}],\"tool_choice\":\"required\"}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_X, 400, 0, 7, &e), 0);
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", "")), 1);
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("path", "/tmp/a b") X_PAR("n.2", "{x"))), 1);
    CHECK_EQ(in_language(r.params.grammar, X_CALL("f", X_PAR("a>b", "1"))), 0);
    ea_oai_request_deinit(&r);
    /* a parameters schema that is no object of properties cannot be written as parameter blocks */
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
                   "\"anyOf\":[{\"type\":\"object\"}]}}}],\"tool_choice\":\"required\"}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_X, 400, 0, 7, &e), -1);
    CHECK_EQ(e.status, 400);
    CHECK_STREQ(e.param, "tools[0].function.parameters.anyOf");
    ea_oai_request_deinit(&r);
#undef X_CALL
#undef X_PAR
    /* refused: another constraint on the same output; a schema the engine cannot compile (named by path) */
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS TOOLS_FG ",\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 400, 0, 7, &e), -1);
    CHECK_STREQ(e.param, "tool_choice");
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{" MSGS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":\"function\","
                   "\"function\":{\"name\":\"h\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"tuple\"}}}}}],"
                   "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"h\"}}}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 400, 0, 7, &e), -1);
    CHECK_EQ(e.status, 400);
    CHECK_STREQ(e.param, "tools[1].function.parameters.properties.x.type");
    ea_oai_request_deinit(&r);
#undef TOOLS_FG
#undef MSGS
}

/* Reasoning first: a constrained answer whose prompt opened a think block (or
 * under deepseek_r1) gets its grammar only after the token that closes it. */
TEST(grammar_waits_for_the_think_block) {
    static const ea_text_ops OPS_XR = {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_QWEN3_XML,
                                       EA_REASONING_QWEN3};
    static const ea_text_ops OPS_R1 = {NULL, f_encode, f_decode, f_render, 512, f_has_token, EA_TOOL_FMT_QWEN3,
                                       EA_REASONING_DEEPSEEK_R1};
    static const struct {
        const ea_text_ops *ops;
        const char *extra;
        int gated;
    } cases[] = {
        {&OPS_XR, ",\"chat_template_kwargs\":{\"open_think\":true}", 1},
        {&OPS_XR, "", 0},                                                      /* the prompt opened no block */
        {&OPS_R1, "", 1},                                                      /* R1 opens it */
        {&OPS_X, ",\"chat_template_kwargs\":{\"open_think\":true}", 0},        /* no reasoning parser */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        ea_oai_request r;
        ea_oai_error e;
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"response_format\":{\"type\":\"json_object\"}%s}", cases[i].extra);
        CHECK_EQ(parse(EA_OAI_CHAT, body, &r, &e), 0);
        CHECK_EQ(ea_oai_prepare(&r, cases[i].ops, 400, 0, 7, &e), 0);
        CHECK_EQ(r.choices[0].grammar_after_think, cases[i].gated);
        CHECK_EQ(r.choices[0].think_end, cases[i].gated ? 301 : 0);
        ea_oai_request_deinit(&r);
    }
    ea_oai_request r; /* unconstrained: nothing to wait for */
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_R1, 400, 0, 7, &e), 0);
    CHECK_EQ(r.choices[0].grammar_after_think, 0);
    ea_oai_request_deinit(&r);
}

/* Template variables, continue_final_message, and the fallback for null contents. */
TEST(chat_template_options) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":{\"enable_thinking\":false},"
                   "\"tools\":[" TOOL_F "," "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 100, 0, 7, &e), 0);
    CHECK_STREQ(r.prompt_text, "<tools:2><user>hi<assistant><nothink>");
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"Once up \"}],"
                   "\"continue_final_message\":true}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_STREQ(r.prompt_text, "<user>hi<assistant>Once up");
    ea_oai_request_deinit(&r);
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"add_generation_prompt\":false}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_STREQ(r.prompt_text, "<user>hi");
    ea_oai_request_deinit(&r);
    /* an assistant tool-call turn keeps content null; a template that refuses null gets "" */
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,"
                   "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
                   "{\"role\":\"tool\",\"content\":\"42\"}]}", &r, &e), 0);
    CHECK(json_is_null(json_object_get(json_array_get(r.messages, 1), "content")));
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_STREQ(r.prompt_text, "<user>hi<assistant><call f text><tool>42<assistant>");
    ea_oai_request_deinit(&r);
    /* a template of XML calls (Qwen3.5) iterates the arguments: it gets them parsed (not JSON: left as text) */
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"\","
                   "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},"
                   "{\"id\":\"d\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"[1\"}}]},"
                   "{\"role\":\"tool\",\"content\":\"42\"}],\"tools\":[" TOOL_F "]}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_X, 100, 0, 7, &e), 0);
    CHECK_STREQ(r.prompt_text, "<tools:1><user>hi<assistant><call f object><call g text><tool>42<assistant>");
    ea_oai_request_deinit(&r);
}

/* Tool calls and reasoning split out of a chat answer; tokens arrive cut anywhere. */
TEST(chat_tool_calls_and_reasoning_rendered) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[" TOOL_F "]}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS_Q, 400, 0, 7, &e), 0);
    static const char *pieces[] = {"<think>\nhm", "m\n</th", "ink>\n\nOk.\n<tool_", "call>\n{\"name\": \"f\", ",
                                   "\"arguments\": {\"a\": 1}}\n</tool_call>"};
    ea_oai_output o, so;
    ea_oai_output_init(&o, &r, "m", 1000, &OPS_Q);
    ea_oai_output_init(&so, &r, "m", 1000, &OPS_Q);
    ea_sbuf sse = {0};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        ea_event t = tok_event(pieces[i], 1, 0);
        ea_oai_output_add(&o, 0, &t);
        ea_oai_stream_token(&so, 0, &t, &sse);
    }
    ea_event d = done_event(EA_FINISH_STOP, 5, 9);
    ea_oai_output_done(&o, 0, &d);
    ea_oai_stream_done(&so, 0, &d, &sse);
    ea_sbuf out = {0};
    ea_oai_render_final(&o, &out);
    json_t *j = json_loadb(out.data, out.len, 0, NULL);
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0), *m = json_object_get(c0, "message");
    CHECK_STREQ(json_string_value(json_object_get(c0, "finish_reason")), "tool_calls");
    CHECK_STREQ(json_string_value(json_object_get(m, "reasoning_content")), "\nhmm\n");
    CHECK_STREQ(json_string_value(json_object_get(m, "content")), "\n\nOk.\n");
    json_t *tc = json_array_get(json_object_get(m, "tool_calls"), 0);
    CHECK(!strncmp(json_string_value(json_object_get(tc, "id")), "call_", 5));
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(tc, "function"), "name")), "f");
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")), "{\"a\":1}");
    json_decref(j);
    /* the stream: reasoning and content deltas, the call's head then its arguments, finish tool_calls */
    static char p[16][2048];
    int n = sse_payloads(sse.data, p, 16);
    ea_sbuf rs = {0}, cs = {0};
    int heads = 0, args = 0, fin = 0;
    for (int i = 0; i < n; i++) {
        json_t *k = json_loads(p[i], 0, NULL);
        json_t *ch = json_array_get(json_object_get(k, "choices"), 0), *dl = json_object_get(ch, "delta");
        json_t *rc = json_object_get(dl, "reasoning_content"), *ct = json_object_get(dl, "content");
        if (rc) ea_sbuf_puts(&rs, json_string_value(rc));
        if (ct) ea_sbuf_puts(&cs, json_string_value(ct));
        json_t *t = json_array_get(json_object_get(dl, "tool_calls"), 0);
        if (t && json_object_get(t, "id")) {
            heads++;
            CHECK_STREQ(json_string_value(json_object_get(json_object_get(t, "function"), "arguments")), "");
        } else if (t) {
            args++;
            CHECK_STREQ(json_string_value(json_object_get(json_object_get(t, "function"), "arguments")), "{\"a\":1}");
        }
        json_t *f = json_object_get(ch, "finish_reason");
        if (json_is_string(f)) fin += !strcmp(json_string_value(f), "tool_calls");
        json_decref(k);
    }
    CHECK_STREQ(rs.data, "\nhmm\n");
    CHECK_STREQ(cs.data, "\n\nOk.\n");
    CHECK_EQ(heads, 1);
    CHECK_EQ(args, 1);
    CHECK_EQ(fin, 1);
    ea_sbuf_deinit(&rs);
    ea_sbuf_deinit(&cs);
    ea_sbuf_deinit(&sse);
    ea_sbuf_deinit(&out);
    ea_oai_output_deinit(&o);
    ea_oai_output_deinit(&so);
    /* max_tokens cut a second call short: the whole one is a call, the rest content, and the finish is "length" */
    ea_oai_output_init(&o, &r, "m", 1000, &OPS_Q);
    ea_event t = tok_event("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"argu", 1, 0);
    ea_oai_output_add(&o, 0, &t);
    d = done_event(EA_FINISH_LENGTH, 5, 30);
    ea_oai_output_done(&o, 0, &d);
    ea_oai_render_final(&o, &out);
    j = json_loadb(out.data, out.len, 0, NULL);
    c0 = json_array_get(json_object_get(j, "choices"), 0), m = json_object_get(c0, "message");
    CHECK_STREQ(json_string_value(json_object_get(c0, "finish_reason")), "length");
    CHECK_EQ(json_array_size(json_object_get(m, "tool_calls")), 1);
    CHECK_STREQ(json_string_value(json_object_get(m, "content")), "<tool_call>\n{\"name\": \"f\", \"argu");
    json_decref(j);
    ea_sbuf_deinit(&out);
    ea_oai_output_deinit(&o);
    ea_oai_request_deinit(&r);
}

/* echo with logprobs: every choice asks for prompt logprobs; the PROMPT events come
 * first in logprobs (token 0's null), generated tokens' text_offset counts the echo. */
TEST(completions_echo_logprobs) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[97,98],\"echo\":true,\"logprobs\":1,\"n\":2}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    CHECK_EQ(r.choices[0].prompt_logprobs, 1);
    CHECK_EQ(r.choices[1].prompt_logprobs, 1);
    ea_oai_output o;
    ea_oai_output_init(&o, &r, "m", 1000, &OPS);
    for (int c = 0; c < 2; c++) {
        ea_event p0 = tok_event("", 97, NAN), p1 = tok_event("", 98, -1.5f);
        p0.kind = p1.kind = EA_EV_PROMPT;
        p0.n_top = 0;
        ea_oai_output_prompt(&o, c, &p0);
        ea_oai_output_prompt(&o, c, &p1);
        ea_event k = tok_event("c", 99, -0.25f);
        ea_oai_output_add(&o, c, &k);
        ea_event d = done_event(EA_FINISH_LENGTH, 2, 1);
        ea_oai_output_done(&o, c, &d);
    }
    ea_sbuf out = {0};
    ea_oai_render_final(&o, &out);
    json_t *j = json_loadb(out.data, out.len, 0, NULL);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 1);
    CHECK_STREQ(json_string_value(json_object_get(ch, "text")), "abc");
    json_t *lp = json_object_get(ch, "logprobs");
    json_t *tl = json_object_get(lp, "token_logprobs"), *top = json_object_get(lp, "top_logprobs");
    json_t *off = json_object_get(lp, "text_offset");
    CHECK_EQ(json_array_size(tl), 3);
    CHECK(json_is_null(json_array_get(tl, 0)));
    CHECK(json_is_null(json_array_get(top, 0)));
    CHECK_NEAR(json_real_value(json_array_get(tl, 1)), -1.5, 1e-9);
    CHECK_NEAR(json_real_value(json_array_get(tl, 2)), -0.25, 1e-9);
    CHECK_EQ(json_integer_value(json_array_get(off, 1)), 1);
    CHECK_EQ(json_integer_value(json_array_get(off, 2)), 2); /* after the echo "ab" */
    json_decref(j);
    ea_sbuf_deinit(&out);
    ea_oai_output_deinit(&o);
    ea_oai_request_deinit(&r);
}

/* Two prompts x n = 2: four choices indexed prompt-major, echo per prompt, usage counts each prompt once. */
TEST(completions_choices_echo_and_usage) {
    ea_oai_request r;
    ea_oai_error e;
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[\"ab\",[99,100]],\"n\":2,\"echo\":true}", &r, &e), -1); /* mixed batch */
    CHECK_EQ(parse(EA_OAI_COMPLETIONS, "{\"prompt\":[[97,98],[99,100,101]],\"n\":2,\"echo\":true}", &r, &e), 0);
    CHECK_EQ(ea_oai_prepare(&r, &OPS, 100, 0, 7, &e), 0);
    ea_oai_output o;
    ea_oai_output_init(&o, &r, "m", 1000, &OPS);
    for (int c = 0; c < 4; c++) {
        char t[2] = {(char)('0' + c), 0};
        ea_event k = tok_event(t, '0' + c, 0);
        ea_oai_output_add(&o, c, &k);
        ea_event d = done_event(EA_FINISH_LENGTH, c < 2 ? 2 : 3, 1);
        ea_oai_output_done(&o, c, &d);
    }
    ea_sbuf out = {0};
    ea_oai_render_final(&o, &out);
    json_t *j = json_loadb(out.data, out.len, 0, NULL);
    json_t *ch = json_object_get(j, "choices");
    CHECK_EQ(json_array_size(ch), 4);
    CHECK_STREQ(json_string_value(json_object_get(json_array_get(ch, 1), "text")), "ab1");
    CHECK_STREQ(json_string_value(json_object_get(json_array_get(ch, 3), "text")), "cde3");
    CHECK_EQ(json_integer_value(json_object_get(json_array_get(ch, 3), "index")), 3);
    json_t *u = json_object_get(j, "usage");
    CHECK_EQ(json_integer_value(json_object_get(u, "prompt_tokens")), 5);
    CHECK_EQ(json_integer_value(json_object_get(u, "completion_tokens")), 4);
    json_decref(j);
    ea_sbuf_deinit(&out);
    ea_oai_output_deinit(&o);
    ea_oai_request_deinit(&r);
}

int main(void) {
    RUN(completions_fields_reach_params);
    RUN(defaults);
    RUN(truncate_prompt_tokens_and_add_special_tokens);
    RUN(nul_in_body_named);
    RUN(response_ids_random);
    RUN(kv_cache_bounds_admission);
    RUN(bad_requests_get_400_naming_the_field);
    RUN(unknown_fields_refused_naming_them);
    RUN(stop_token_ids_and_min_tokens);
    RUN(prompt_longer_than_context);
    RUN(invalid_utf8_and_position_in_error);
    RUN(error_json_shape);
    RUN(nonstreaming_chat_with_logprobs);
    RUN(streaming_completions_with_usage_and_logprobs);
    RUN(streaming_chat_role_then_deltas);
    RUN(tokenize_detokenize_models);
    RUN(metrics_histograms_are_cumulative);
    RUN(choices_prompt_major_with_derived_seeds);
    RUN(logit_bias_and_forced_text_reach_params);
    RUN(tool_choice_constrains_to_the_family_format);
    RUN(grammar_waits_for_the_think_block);
    RUN(chat_template_options);
    RUN(chat_tool_calls_and_reasoning_rendered);
    RUN(completions_choices_echo_and_usage);
    RUN(completions_echo_logprobs);
    return TEST_SUMMARY();
}
