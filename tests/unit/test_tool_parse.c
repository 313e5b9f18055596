/*
 * test_tool_parse.c — serve/tool_parse.c on recorded model outputs: Qwen3's
 * <tool_call> blocks and DeepSeek-V3's tool-call tokens (as their chat
 * templates write them), malformed calls (content, never an error), thinking
 * split for --reasoning-parser qwen3 / deepseek_r1 (and a prompt that left a
 * think block open), Qwen3.5's XML calls with values typed by the tools'
 * schemas, and the same split whatever the deltas (whole text, byte by byte,
 * odd chunk sizes).
 */
#include "harness.h"
#include "serve/tool_parse.h"

typedef struct {
    ea_sbuf content, reasoning;
    json_t *calls;
} result;

static void result_deinit(result *r) {
    ea_sbuf_deinit(&r->content);
    ea_sbuf_deinit(&r->reasoning);
    json_decref(r->calls);
}

static void take(result *r, const ea_chat_delta *d) {
    ea_sbuf_append(&r->content, d->content.data, d->content.len);
    ea_sbuf_append(&r->reasoning, d->reasoning.data, d->reasoning.len);
    json_array_extend(r->calls, d->calls);
}

/* Feed text in chunks of `chunk` bytes (0: all at once); tools types XML values;
 * open >= 0: ea_chat_split_think_open(open) first. */
static void run_with(ea_reasoning_mode rm, ea_tool_format f, const json_t *tools, int open, const char *text,
                     size_t chunk, result *r) {
    memset(r, 0, sizeof *r);
    r->calls = json_array();
    ea_sbuf_puts(&r->content, "");
    ea_sbuf_puts(&r->reasoning, "");
    ea_chat_split sp;
    ea_chat_delta d = {0};
    ea_chat_split_init(&sp, rm, f);
    ea_chat_split_set_tools(&sp, tools);
    if (open >= 0) ea_chat_split_think_open(&sp, open);
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        size_t k = chunk == 0 || chunk > n - i ? n - i : chunk;
        ea_chat_split_feed(&sp, text + i, k, &d);
        take(r, &d);
        i += k;
    }
    ea_chat_split_finish(&sp, &d);
    take(r, &d);
    ea_chat_delta_deinit(&d);
    ea_chat_split_deinit(&sp);
}

static void run(ea_reasoning_mode rm, ea_tool_format f, const char *text, size_t chunk, result *r) {
    run_with(rm, f, NULL, -1, text, chunk, r);
}

static int call_is(const json_t *calls, size_t i, const char *name, const char *args) {
    json_t *c = json_array_get(calls, i);
    const char *n = json_string_value(json_object_get(c, "name")), *a = json_string_value(json_object_get(c, "arguments"));
    if (!n || !a || strcmp(n, name) || strcmp(a, args)) {
        fprintf(stderr, "  call %zu: %s %s\n", i, n ? n : "(none)", a ? a : "(none)");
        return 0;
    }
    return 1;
}

static const size_t chunks[] = {0, 1, 2, 3, 7, 13};
#define NCHUNKS (sizeof chunks / sizeof chunks[0])

TEST(qwen3_one_call_with_text) {
    const char *t = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    for (size_t c = 0; c < NCHUNKS; c++) {
        result r;
        run(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3, t, chunks[c], &r);
        CHECK_STREQ(r.content.data, "Let me check.\n");
        CHECK_EQ(json_array_size(r.calls), 1);
        CHECK(call_is(r.calls, 0, "get_weather", "{\"city\":\"Paris\"}"));
        result_deinit(&r);
    }
}

/* A call that does not parse comes back as content, as written (DeepSeek's block markers go). */
#define DS_BLOCK(x) "<｜tool▁calls▁begin｜>" x "<｜tool▁calls▁end｜>"
#define DS_BAD_TYPE "<｜tool▁call▁begin｜>tool<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜>"
#define DS_BAD_JSON "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\":\n```<｜tool▁call▁end｜>"
#define DS_NO_SEP "<｜tool▁call▁begin｜>function f\n```json\n{}\n```<｜tool▁call▁end｜>"
#define DS_ARRAY "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]\n```<｜tool▁call▁end｜>"
TEST(malformed_is_content) {
    static const struct {
        ea_tool_format fmt;
        const char *text, *content;
    } cases[] = {
        {EA_TOOL_FMT_QWEN3, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}\n</tool_call>", NULL}, /* JSON cut short */
        {EA_TOOL_FMT_QWEN3, "<tool_call>\n{\"arguments\": {}}\n</tool_call>", NULL},                         /* no name */
        {EA_TOOL_FMT_QWEN3, "<tool_call>\n{\"name\": \"a\", \"arguments\": \"{}\"}\n</tool_call>", NULL},     /* arguments a string */
        {EA_TOOL_FMT_QWEN3, "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>", NULL},          /* empty name */
        {EA_TOOL_FMT_QWEN3, "<tool_call>not json at all", NULL},                                              /* unterminated */
        {EA_TOOL_FMT_QWEN3, "text <tool_ca", NULL},                                                           /* a marker's start */
        {EA_TOOL_FMT_DEEPSEEK_V3, DS_BLOCK(DS_BAD_TYPE), DS_BAD_TYPE},                                        /* type not function */
        {EA_TOOL_FMT_DEEPSEEK_V3, DS_BLOCK(DS_BAD_JSON), DS_BAD_JSON},
        {EA_TOOL_FMT_DEEPSEEK_V3, DS_BLOCK(DS_NO_SEP), DS_NO_SEP},
        {EA_TOOL_FMT_DEEPSEEK_V3, DS_BLOCK(DS_ARRAY), DS_ARRAY},                                              /* not an object */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t c = 0; c < NCHUNKS; c++) {
            result r;
            run(EA_REASONING_NONE, cases[i].fmt, cases[i].text, chunks[c], &r);
            int ok = json_array_size(r.calls) == 0 &&
                     !strcmp(r.content.data, cases[i].content ? cases[i].content : cases[i].text);
            result_deinit(&r);
            if (!ok) FAIL_("case %zu, chunks of %zu", i, chunks[c]);
        }
}

TEST(qwen3_unterminated_valid_call_counts) {
    result r;
    run(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": true}}\n", 1, &r);
    CHECK_EQ(json_array_size(r.calls), 1);
    CHECK(call_is(r.calls, 0, "f", "{\"k\":true}"));
    CHECK_STREQ(r.content.data, "");
    result_deinit(&r);
}

/* Text after a malformed call keeps its whitespace before the next call, however
 * the deltas cut it (the fuzzer found the streamed split dropping that newline). */
TEST(qwen3_good_then_bad_then_text) {
    const char *t = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>oops</tool_call> after\n"
                    "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
    for (size_t c = 0; c < NCHUNKS; c++) {
        result r;
        run(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3, t, chunks[c], &r);
        CHECK_EQ(json_array_size(r.calls), 2);
        CHECK_STREQ(r.content.data, "<tool_call>oops</tool_call> after\n");
        result_deinit(&r);
    }
}

/* as DeepSeek-V3's chat template writes an assistant turn with two calls */
#define DS_TWO                                                                                                        \
    "I will look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "   \
    "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": "      \
    "\"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"

/* as DeepSeek-V3.1's chat template writes an assistant turn with two calls */
#define DS31_TWO                                                                                                      \
    "I will look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"            \
    "<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": \"CET\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"

/* as Kimi K2's chat template writes an assistant turn with two calls */
#define KIMI_TWO                                                                                                      \
    "I will look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:3<|tool_call_argument_begin|>" \
    "{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:4<|tool_call_argument_begin|>"       \
    "{\"tz\": \"CET\"}<|tool_call_end|><|tool_calls_section_end|>"

/* Two calls in each format (Qwen3 with only whitespace around, which is dropped). */
TEST(two_calls) {
    static const struct {
        ea_tool_format fmt;
        const char *text, *content, *name[2], *args[2];
    } cases[] = {
        {EA_TOOL_FMT_QWEN3,
         "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
         "{\"name\": \"b\", \"arguments\": {\"x\": [1, 2], \"y\": \"é\"}}\n</tool_call>\n",
         "", {"a", "b"}, {"{}", "{\"x\":[1,2],\"y\":\"é\"}"}},
        {EA_TOOL_FMT_DEEPSEEK_V3, DS_TWO, "I will look.", {"get_weather", "get_time"},
         {"{\"city\":\"Paris\"}", "{\"tz\":\"CET\"}"}},
        {EA_TOOL_FMT_DEEPSEEK_V31, DS31_TWO, "I will look.", {"get_weather", "get_time"},
         {"{\"city\":\"Paris\"}", "{\"tz\":\"CET\"}"}},
        {EA_TOOL_FMT_KIMI_K2, KIMI_TWO, "I will look.", {"get_weather", "get_time"},
         {"{\"city\":\"Paris\"}", "{\"tz\":\"CET\"}"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t c = 0; c < NCHUNKS; c++) {
            result r;
            run(EA_REASONING_NONE, cases[i].fmt, cases[i].text, chunks[c], &r);
            int ok = !strcmp(r.content.data, cases[i].content) && json_array_size(r.calls) == 2 &&
                     call_is(r.calls, 0, cases[i].name[0], cases[i].args[0]) &&
                     call_is(r.calls, 1, cases[i].name[1], cases[i].args[1]);
            result_deinit(&r);
            if (!ok) FAIL_("case %zu, chunks of %zu", i, chunks[c]);
        }
}

TEST(deepseek_fenceless_and_cut_off) {
    result r;
    run(EA_REASONING_NONE, EA_TOOL_FMT_DEEPSEEK_V3,
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n{\"a\": 1}<｜tool▁call▁end｜>"
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{\"b\"",
        5, &r);
    CHECK_EQ(json_array_size(r.calls), 1);
    CHECK(call_is(r.calls, 0, "f", "{\"a\":1}"));
    CHECK_STREQ(r.content.data, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{\"b\"");
    result_deinit(&r);
}

/* Kimi: the model's id is the call's id; an id without ":IDX" or arguments that are no object is content. */
TEST(kimi_ids_and_malformed) {
    for (size_t c = 0; c < NCHUNKS; c++) {
        result r;
        run(EA_REASONING_NONE, EA_TOOL_FMT_KIMI_K2, KIMI_TWO, chunks[c], &r);
        CHECK_STREQ(json_string_value(json_object_get(json_array_get(r.calls, 0), "id")), "functions.get_weather:3");
        CHECK_STREQ(json_string_value(json_object_get(json_array_get(r.calls, 1), "id")), "functions.get_time:4");
        result_deinit(&r);
    }
    static const char *const bad[] = {
        "<|tool_call_begin|>functions.f<|tool_call_argument_begin|>{}<|tool_call_end|>",      /* no :IDX */
        "<|tool_call_begin|>functions.f:<|tool_call_argument_begin|>{}<|tool_call_end|>",     /* no digits */
        "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]<|tool_call_end|>",   /* not an object */
        "<|tool_call_begin|>functions.f:0{\"a\": 1}<|tool_call_end|>",                        /* no argument marker */
        "<|tool_call_begin|>functions.:0<|tool_call_argument_begin|>{}<|tool_call_end|>",     /* no name */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "<|tool_calls_section_begin|>%s<|tool_calls_section_end|>", bad[i]);
        result r;
        run(EA_REASONING_NONE, EA_TOOL_FMT_KIMI_K2, text, 4, &r);
        if (json_array_size(r.calls) != 0 || strcmp(r.content.data, bad[i])) FAIL_("bad case %zu: content %s", i, r.content.data);
        result_deinit(&r);
    }
    /* a bare name (no "functions." prefix) is the name itself */
    result r;
    run(EA_REASONING_NONE, EA_TOOL_FMT_KIMI_K2,
        "<|tool_calls_section_begin|><|tool_call_begin|>lookup:12<|tool_call_argument_begin|> {\"q\": 1} "
        "<|tool_call_end|><|tool_calls_section_end|>",
        0, &r);
    CHECK(call_is(r.calls, 0, "lookup", "{\"q\":1}"));
    result_deinit(&r);
}

TEST(no_format_passes_everything) {
    result r;
    run(EA_REASONING_NONE, EA_TOOL_FMT_NONE, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>", 3, &r);
    CHECK_EQ(json_array_size(r.calls), 0);
    CHECK_STREQ(r.content.data, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>");
    result_deinit(&r);
}

/* Think blocks: the reasoning and content each parser gives, whatever the deltas. */
TEST(reasoning_split) {
    static const struct {
        ea_reasoning_mode mode;
        const char *text, *reasoning, *content;
    } cases[] = {
        {EA_REASONING_QWEN3, "<think>\nLet me think.\n</think>\n\nHello!", "\nLet me think.\n", "\n\nHello!"},
        {EA_REASONING_QWEN3, "Hello <think> there", "", "Hello <think> there"}, /* no block (enable_thinking false) */
        {EA_REASONING_QWEN3, "<think>still going </thi", "still going </thi", ""},   /* unterminated */
        {EA_REASONING_QWEN3, "<th", "", "<th"},                                        /* a prefix of <think> */
        {EA_REASONING_DEEPSEEK_R1, "step 1, step 2</think>The answer is 4.", "step 1, step 2", "The answer is 4."},
        {EA_REASONING_DEEPSEEK_R1, "<think>abc</think>def", "abc", "def"},
        {EA_REASONING_DEEPSEEK_R1, "no end in sight", "no end in sight", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t c = 0; c < NCHUNKS; c++) {
            result r;
            run(cases[i].mode, EA_TOOL_FMT_QWEN3, cases[i].text, chunks[c], &r);
            if (strcmp(r.reasoning.data, cases[i].reasoning) || strcmp(r.content.data, cases[i].content)) {
                result_deinit(&r);
                FAIL_("case %zu, chunks of %zu: reasoning/content differ", i, chunks[c]);
            }
            result_deinit(&r);
        }
}

TEST(reasoning_then_tool_call) {
    const char *t = "<think>\nweather needed\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": \"P\"}}\n</tool_call>";
    for (size_t c = 0; c < NCHUNKS; c++) {
        result r;
        run(EA_REASONING_QWEN3, EA_TOOL_FMT_QWEN3, t, chunks[c], &r);
        CHECK_STREQ(r.reasoning.data, "\nweather needed\n");
        CHECK_STREQ(r.content.data, "\n\n");
        CHECK_EQ(json_array_size(r.calls), 1);
        CHECK(call_is(r.calls, 0, "w", "{\"c\":\"P\"}"));
        result_deinit(&r);
    }
}

/* kimi_k2 reasoning: a tool-call section inside the think block ends it; qwen3's would keep it as reasoning. */
TEST(kimi_call_while_thinking) {
    const char *t = "<think>need weather<|tool_calls_section_begin|><|tool_call_begin|>functions.w:0"
                    "<|tool_call_argument_begin|>{\"c\": \"P\"}<|tool_call_end|><|tool_calls_section_end|>";
    for (size_t c = 0; c < NCHUNKS; c++) {
        result r;
        run(EA_REASONING_KIMI_K2, EA_TOOL_FMT_KIMI_K2, t, chunks[c], &r);
        CHECK_STREQ(r.reasoning.data, "need weather");
        CHECK_STREQ(r.content.data, "");
        CHECK_EQ(json_array_size(r.calls), 1);
        CHECK(call_is(r.calls, 0, "w", "{\"c\":\"P\"}"));
        result_deinit(&r);
        run(EA_REASONING_KIMI_K2, EA_TOOL_FMT_KIMI_K2, "<think>a <|tool_calls</think>b", chunks[c], &r);
        CHECK_STREQ(r.reasoning.data, "a <|tool_calls");
        CHECK_STREQ(r.content.data, "b");
        result_deinit(&r);
        run(EA_REASONING_QWEN3, EA_TOOL_FMT_KIMI_K2, t, chunks[c], &r);
        CHECK_EQ(json_array_size(r.calls), 0);
        CHECK(strstr(r.reasoning.data, "<|tool_calls_section_begin|>") != NULL);
        result_deinit(&r);
    }
    CHECK_EQ(ea_reasoning_mode_parse("kimi_k2"), EA_REASONING_KIMI_K2);
}

/* The tools of the XML tests: each parameter's type decides how its raw text is read. */
static const char XML_TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"zip\": {\"type\": \"string\"}, \"days\": {\"type\": "
    "\"integer\"}, \"units\": {\"type\": \"object\"}, \"hourly\": {\"type\": \"boolean\"}, \"unit\": {\"enum\": "
    "[\"C\", \"F\"]}, \"when\": {\"type\": [\"string\", \"null\"]}}}}}]";

/* Qwen3.5 writes <function=NAME> and <parameter=KEY> blocks: values are raw text, read by the schema's type. */
TEST(qwen3_xml_calls) {
    json_error_t je;
    json_t *tools = json_loads(XML_TOOLS, 0, &je);
    CHECK(tools != NULL);
    const char *t = "I'll check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n"
                    "<parameter=zip>\n01234\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=units>\n"
                    "{\"temp\": \"C\", \"wind\": [1, 2]}\n</parameter>\n<parameter=hourly>\nTrue\n</parameter>\n"
                    "<parameter=unit>\nF\n</parameter>\n<parameter=when>\nnull\n</parameter>\n<parameter=note>\nline 1\n"
                    "line 2 has 5 < 6\n\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n"
                    "<parameter=days>\nsoon\n</parameter>\n</function>\n</tool_call>";
    for (size_t c = 0; c < NCHUNKS; c++) {
        result r;
        run_with(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3_XML, tools, -1, t, chunks[c], &r);
        CHECK_STREQ(r.content.data, "I'll check.\n\n");
        CHECK_EQ(json_array_size(r.calls), 2);
        CHECK(call_is(r.calls, 0, "get_weather",
                      "{\"city\":\"San Francisco\",\"zip\":\"01234\",\"days\":3,\"units\":{\"temp\":\"C\",\"wind\":[1,2]},"
                      "\"hourly\":true,\"unit\":\"F\",\"when\":null,\"note\":\"line 1\\nline 2 has 5 < 6\\n\"}"));
        CHECK(call_is(r.calls, 1, "get_weather", "{\"days\":\"soon\"}")); /* not JSON: kept as text */
        result_deinit(&r);
    }
    /* without the tools every value is a string (vLLM's qwen3_coder reads unknown parameters so) */
    result r;
    run(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3_XML,
        "<tool_call>\n<function=f>\n<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>", 0, &r);
    CHECK(call_is(r.calls, 0, "f", "{\"n\":\"7\"}"));
    result_deinit(&r);
    /* a call cut off at the end of the output counts; no parameters is {} */
    run(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3_XML, "<tool_call>\n<function=f>\n<parameter=n>\n7\n</parameter>\n", 0, &r);
    CHECK(call_is(r.calls, 0, "f", "{\"n\":\"7\"}"));
    result_deinit(&r);
    run(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3_XML, "<tool_call>\n<function=now>\n</function>\n</tool_call>", 0, &r);
    CHECK(call_is(r.calls, 0, "now", "{}"));
    result_deinit(&r);
    json_decref(tools);
}

/* XML calls that do not parse come back as content, as written. */
TEST(qwen3_xml_malformed_is_content) {
    static const char *const bad[] = {
        "<tool_call>\n<function=f>\nnot a parameter\n</function>\n</tool_call>",
        "<tool_call>\n<function=a\nb>\n</function>\n</tool_call>",                  /* a newline in the name */
        "<tool_call>\n<function=>\n</function>\n</tool_call>",                       /* no name */
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",           /* hermes JSON */
        "<tool_call>\n<function=f>\n</function>\ntrailing\n</tool_call>",            /* text after </function> */
        "<tool_call>\n<function=f>\n<parameter=>\n1\n</parameter>\n</function>\n</tool_call>", /* no key */
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n[]\n</",         /* cut in a value */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (size_t c = 0; c < NCHUNKS; c++) {
            result r;
            run(EA_REASONING_NONE, EA_TOOL_FMT_QWEN3_XML, bad[i], chunks[c], &r);
            if (json_array_size(r.calls) != 0 || strcmp(r.content.data, bad[i])) {
                result_deinit(&r);
                FAIL_("case %zu, chunks of %zu: not returned as content", i, chunks[c]);
            }
            result_deinit(&r);
        }
}

/* Qwen3.5's prompt ends with "<think>\n": the output is reasoning up to </think>;
 * a forced call (think_open 0) is read from the start, in R1 mode too. */
TEST(think_opened_by_prompt) {
    const char *t = "the user wants weather\n</think>\n\n<tool_call>\n<function=w>\n</function>\n</tool_call>";
    for (size_t c = 0; c < NCHUNKS; c++) {
        result r;
        run_with(EA_REASONING_QWEN3, EA_TOOL_FMT_QWEN3_XML, NULL, 1, t, chunks[c], &r);
        CHECK_STREQ(r.reasoning.data, "the user wants weather\n");
        CHECK_STREQ(r.content.data, "\n\n");
        CHECK(call_is(r.calls, 0, "w", "{}"));
        result_deinit(&r);
        run_with(EA_REASONING_DEEPSEEK_R1, EA_TOOL_FMT_QWEN3_XML, NULL, 0,
                 "<tool_call>\n<function=w>\n</function>\n</tool_call>", chunks[c], &r);
        CHECK_STREQ(r.reasoning.data, "");
        CHECK(call_is(r.calls, 0, "w", "{}"));
        result_deinit(&r);
        run_with(EA_REASONING_NONE, EA_TOOL_FMT_NONE, NULL, 1, "a</think>b", chunks[c], &r); /* no parser: no split */
        CHECK_STREQ(r.content.data, "a</think>b");
        result_deinit(&r);
    }
    CHECK(ea_prompt_opens_think("<|im_start|>assistant\n<think>\n"));
    CHECK(!ea_prompt_opens_think("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    CHECK(!ea_prompt_opens_think("<|im_start|>user\n<think>\nhi<|im_end|>\n<|im_start|>assistant\n"));
    CHECK(!ea_prompt_opens_think(NULL));
}

TEST(names) {
    CHECK_EQ(ea_tool_format_for_model(NULL, "qwen3_moe"), EA_TOOL_FMT_QWEN3);
    CHECK_EQ(ea_tool_format_for_model(NULL, "qwen3_5_moe"), EA_TOOL_FMT_QWEN3_XML);
    CHECK_EQ(ea_tool_format_for_model(NULL, "deepseek_v3"), EA_TOOL_FMT_DEEPSEEK_V3);
    CHECK_EQ(ea_tool_format_for_model(NULL, "mixtral"), EA_TOOL_FMT_NONE);
    /* the template's text decides over the family */
    CHECK_EQ(ea_tool_format_for_model("{{- '<tool_call>\\n<function=' + tc.name + '>' }}", "qwen3_moe"),
             EA_TOOL_FMT_QWEN3_XML);
    CHECK_EQ(ea_tool_format_for_model("{{- '<tool_call>\\n{\"name\": \"' }}", "qwen3_5_moe"), EA_TOOL_FMT_QWEN3);
    CHECK_EQ(ea_tool_format_for_model("{{'<｜tool▁calls▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + name + '\\n```json'}}",
                                      "mixtral"),
             EA_TOOL_FMT_DEEPSEEK_V3);
    /* DeepSeek-V3.1: the same markers, no json fence */
    CHECK_EQ(ea_tool_format_for_model("{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>'}}",
                                      "deepseek_v3"),
             EA_TOOL_FMT_DEEPSEEK_V31);
    CHECK_EQ(ea_tool_format_parse("deepseek_v31"), EA_TOOL_FMT_DEEPSEEK_V31);
    CHECK_EQ(ea_tool_format_for_model("{{ messages }}", "qwen3_5_moe"), EA_TOOL_FMT_QWEN3_XML);
    /* Kimi K2 (a deepseek_v3 model) writes its own sections */
    CHECK_EQ(ea_tool_format_for_model("<|tool_calls_section_begin|>{%- for tc in m.tool_calls %}<|tool_call_begin|>",
                                      "deepseek_v3"),
             EA_TOOL_FMT_KIMI_K2);
    /* a template rendering tool_calls in a way we do not parse (Mistral's): no parser, whatever the family */
    CHECK_EQ(ea_tool_format_for_model("{%- for tc in m.tool_calls %}[TOOL_CALLS]{{ tc.id }}", "deepseek_v3"),
             EA_TOOL_FMT_NONE);
    CHECK_EQ(ea_tool_format_parse("kimi_k2"), EA_TOOL_FMT_KIMI_K2);
    CHECK_EQ(ea_tool_format_parse("hermes"), EA_TOOL_FMT_QWEN3);
    CHECK_EQ(ea_tool_format_parse("qwen3_coder"), EA_TOOL_FMT_QWEN3_XML);
    CHECK_EQ(ea_tool_format_parse("deepseek_v3"), EA_TOOL_FMT_DEEPSEEK_V3);
    CHECK_EQ(ea_tool_format_parse("none"), EA_TOOL_FMT_NONE);
    CHECK_EQ(ea_tool_format_parse("auto"), -2);
    CHECK_EQ(ea_tool_format_parse("mistral"), -1);
    CHECK_EQ(ea_reasoning_mode_parse("qwen3"), EA_REASONING_QWEN3);
    CHECK_EQ(ea_reasoning_mode_parse("deepseek_r1"), EA_REASONING_DEEPSEEK_R1);
    CHECK_EQ(ea_reasoning_mode_parse("none"), EA_REASONING_NONE);
    CHECK_EQ(ea_reasoning_mode_parse("granite"), -1);
}

int main(void) {
    RUN(qwen3_one_call_with_text);
    RUN(malformed_is_content);
    RUN(qwen3_unterminated_valid_call_counts);
    RUN(qwen3_good_then_bad_then_text);
    RUN(two_calls);
    RUN(deepseek_fenceless_and_cut_off);
    RUN(kimi_ids_and_malformed);
    RUN(no_format_passes_everything);
    RUN(reasoning_split);
    RUN(reasoning_then_tool_call);
    RUN(kimi_call_while_thinking);
    RUN(qwen3_xml_calls);
    RUN(qwen3_xml_malformed_is_content);
    RUN(think_opened_by_prompt);
    RUN(names);
    return TEST_SUMMARY();
}
