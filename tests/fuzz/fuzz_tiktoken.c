/*
 * fuzz_tiktoken.c — fuzz target for tiktoken.model loading (Kimi K2's
 * tokenizer form).
 *
 * Input: tiktoken.model text ("<base64> <rank>" lines), optionally followed
 * by a NUL byte and tokenizer_config.json text; without one, a config naming
 * Kimi's class with a few special tokens is used, so the file parser is what
 * gets fuzzed. Whatever loads encodes a fixed text (ASCII, CJK, emoji,
 * invalid UTF-8, Kimi's special tokens) with and without special tokens and
 * decodes it. Any ea_status is fine; crashes, leaks and sanitizer reports
 * are findings.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DEA_FUZZ=ON -DEA_SANITIZE=ON
 *   cmake --build build-fuzz -j2 --target fuzz_tiktoken_libfuzzer
 *   build-fuzz/tests/fuzz_tiktoken_libfuzzer -max_total_time=300 tests/fuzz/corpus/fuzz_tiktoken
 */
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_tok_use.h"

static const char text[] = "Hello, world! It's DON'T 2024: 你好世界。 こんにちは 😀 \t\r\n  e\xcc\x81 "
                           "<|im_user|>x<|im_end|> [BOS] \xff\xfe\xc3 12345 ab abc aaa";
static const char kimi_cfg[] =
    "{\"auto_map\": {\"AutoTokenizer\": [\"tokenization_kimi.TikTokenTokenizer\", null]},"
    " \"added_tokens_decoder\": {\"4\": {\"content\": \"[BOS]\"}, \"5\": {\"content\": \"<|im_end|>\"},"
    " \"7\": {\"content\": \"<|im_user|>\"}}, \"bos_token\": \"[BOS]\", \"eos_token\": {\"content\": \"<|im_end|>\"}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *model = (const char *)data, *cfg = kimi_cfg;
    size_t ml = size, cl = sizeof kimi_cfg - 1;
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        ml = (size_t)(nul - data);
        cfg = (const char *)nul + 1;
        cl = size - ml - 1;
    }
    ea_tokenizer *t = NULL;
    if (ea_tokenizer_from_tiktoken(model, ml, cfg, cl, "fuzz.tiktoken", &t) != EA_OK) return 0;
    fuzz_tok_use(t, text, sizeof text - 1);
    ea_tokenizer_destroy(t);
    return 0;
}
