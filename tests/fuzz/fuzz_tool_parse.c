/*
 * fuzz_tool_parse.c — fuzz target for serve/tool_parse.c, the split of a
 * model's output into reasoning, content and tool calls. The first byte picks
 * the reasoning mode (bits 0-1: none, qwen3, deepseek_r1, kimi_k2), the tool
 * format (bits 2-4, modulo 6: none, hermes, deepseek_v3, qwen3_coder, kimi_k2,
 * deepseek_v31) and the size of the deltas (bits 5-7, 0 = the whole text; an
 * odd size also starts inside a think block the prompt opened); the rest is
 * the output text. XML calls are typed by a fixed set of tools.
 *
 * Asserted: no crash, leak or UB (sanitizers); the split is the same whether
 * the text comes whole or in deltas (streams and non-streaming answers agree);
 * every call has a non-empty name and arguments that parse as a JSON object.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DEA_FUZZ=ON -DEA_SANITIZE=ON
 *   cmake --build build-fuzz --target fuzz_tool_parse_libfuzzer
 *   build-fuzz/tests/fuzz_tool_parse_libfuzzer -max_total_time=300 tests/fuzz/corpus/fuzz_tool_parse
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/tool_parse.h"

typedef struct {
    ea_sbuf content, reasoning;
    json_t *calls;
} split;

static void take(split *out, const ea_chat_delta *d) {
    ea_sbuf_append(&out->content, d->content.data, d->content.len);
    ea_sbuf_append(&out->reasoning, d->reasoning.data, d->reasoning.len);
    json_array_extend(out->calls, d->calls);
}

/* Feed t[0..n) in deltas of `chunk` bytes, then finish. */
static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"s\":{\"type\":\"string\"},\"n\":{\"type\":\"number\"},\"o\":{\"type\":\"object\"},\"b\":{\"type\":\"boolean\"}}}}}]";

static void split_run(ea_reasoning_mode rm, ea_tool_format f, int open, const json_t *tools, const char *t, size_t n,
                      size_t chunk, split *out) {
    ea_chat_split sp;
    ea_chat_delta d = {0};
    memset(out, 0, sizeof *out);
    out->calls = json_array();
    ea_chat_split_init(&sp, rm, f);
    ea_chat_split_set_tools(&sp, tools);
    if (open) ea_chat_split_think_open(&sp, 1);
    for (size_t i = 0; i < n; i += chunk) {
        ea_chat_split_feed(&sp, t + i, chunk < n - i ? chunk : n - i, &d);
        take(out, &d);
    }
    ea_chat_split_finish(&sp, &d);
    take(out, &d);
    ea_chat_delta_deinit(&d);
    ea_chat_split_deinit(&sp);
}

static int same_buf(const ea_sbuf *a, const ea_sbuf *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void split_free(split *s) {
    ea_sbuf_deinit(&s->content);
    ea_sbuf_deinit(&s->reasoning);
    json_decref(s->calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 14) return 0;
    ea_reasoning_mode rm = (ea_reasoning_mode)(data[0] & 3);
    ea_tool_format f = (ea_tool_format)(((data[0] >> 2) & 7) % 6);
    size_t chunk = data[0] >> 5;
    int open = (int)(chunk & 1);
    const char *t = (const char *)data + 1;
    size_t n = size - 1;
    static json_t *tools;
    if (!tools) tools = json_loads(TOOLS, 0, NULL); /* kept for the process: the leak checker ignores statics */
    split whole, parts;
    split_run(rm, f, open, tools, t, n, n ? n : 1, &whole);
    split_run(rm, f, open, tools, t, n, chunk ? chunk : 1, &parts);
    if (!same_buf(&whole.content, &parts.content) || !same_buf(&whole.reasoning, &parts.reasoning) ||
        !json_equal(whole.calls, parts.calls))
        abort();
    size_t i;
    json_t *c;
    json_array_foreach(whole.calls, i, c) {
        json_t *name = json_object_get(c, "name"), *args = json_object_get(c, "arguments");
        if (!json_is_string(name) || json_string_length(name) == 0 || !json_is_string(args)) abort();
        json_error_t je;
        json_t *a = json_loads(json_string_value(args), JSON_ALLOW_NUL, &je); /* raw XML values may hold NUL */
        if (!json_is_object(a)) abort();
        json_decref(a);
    }
    split_free(&whole);
    split_free(&parts);
    return 0;
}
