/*
 * fuzz_chat_template.c — fuzz target for the chat-template interpreter: the
 * input is template source; it is parsed and, if it parses, rendered against
 * one fixed context that exercises every kind of value the real templates
 * meet (system/user/assistant/tool messages, tool calls with string and object
 * arguments, reasoning content, null content, tools, unicode, flags).
 *
 * Asserted: no crash, leak or UB (sanitizers); every failure carries a
 * message; a parse error names a line; a successful render returns a
 * NUL-terminated buffer of the reported length. Limits keep each run small.
 *
 *   cmake -S . -B build-fuzz-chat -DCMAKE_C_COMPILER=clang -DEA_FUZZ=ON -DEA_SANITIZE=ON
 *   cmake --build build-fuzz-chat --target fuzz_chat_template_libfuzzer
 *   build-fuzz-chat/tests/fuzz_chat_template_libfuzzer -max_total_time=300 \
 *       tests/fuzz/corpus/fuzz_chat_template
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/chat_template.h"

static const char k_context[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    "{\"role\": \"user\", \"content\": \"Hi \\u00e9\\u4e2d\\ud83d\\ude00 {{x}}\"},"
    "{\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\nok\", \"reasoning_content\": null},"
    "{\"role\": \"user\", \"content\": \"<tool_response>t</tool_response>\"},"
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": ["
    "  {\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}},"
    "  {\"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": {\"b\": [1, 2.5, true, null]}}}]},"
    "{\"role\": \"tool\", \"content\": \"42\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"because\"}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"1\": 0}}}],"
    "\"add_generation_prompt\": true, \"enable_thinking\": false, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\","
    "\"n\": 3, \"x\": 0.5, \"empty\": [], \"obj\": {}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *ctx;
    if (!ctx) {
        json_error_t je;
        ctx = json_loads(k_context, 0, &je);
        if (!ctx) abort();
    }
    if (size > 1 << 16) return 0;
    ea_chat_template *t = NULL;
    ea_status s = ea_chat_template_create((const char *)data, size, &t);
    if (s != EA_OK) {
        if (t || ea_errmsg()[0] == 0) abort();
        if (s == EA_ERR_FORMAT && !strstr(ea_errmsg(), "line ") && !strstr(ea_errmsg(), "UTF-8")) abort();
        return 0;
    }
    ea_chat_template_set_limits(t, 200000, 16u << 20);
    char *out = NULL;
    size_t n = 0;
    s = ea_chat_template_render(t, ctx, &out, &n);
    if (s == EA_OK) {
        if (!out || out[n] != 0) abort();
    } else {
        if (out || ea_errmsg()[0] == 0) abort();
    }
    ea_free(out);
    ea_chat_template_destroy(t);
    return 0;
}
