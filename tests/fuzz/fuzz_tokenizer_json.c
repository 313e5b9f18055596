/*
 * fuzz_tokenizer_json.c — fuzz target for tokenizer.json loading.
 *
 * Input: tokenizer.json text, optionally followed by a NUL byte and
 * tokenizer_config.json text. Whatever loads is then used: a fixed text
 * (ASCII, CJK, emoji, invalid UTF-8, special-token look-alikes) is encoded
 * with and without special tokens, decoded, and streamed, so the pipeline
 * built from hostile settings (regexes, behaviors, added tokens, merges,
 * templates) is exercised too. Any ea_status is fine; crashes, leaks and
 * sanitizer reports are findings.
 *
 *   cmake -S . -B build-fuzz-tok -DCMAKE_C_COMPILER=clang -DEA_FUZZ=ON -DEA_SANITIZE=ON
 *   cmake --build build-fuzz-tok -j2 --target fuzz_tokenizer_json_libfuzzer
 *   build-fuzz-tok/tests/fuzz_tokenizer_json_libfuzzer -max_total_time=300 \
 *       tests/fuzz/corpus/fuzz_tokenizer_json
 */
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_tok_use.h"

static const char text[] = "Hello, world! It's 2024: 你好世界 안녕 こんにちは 😀👨‍👩‍👧 \t\r\n  e\xcc\x81 "
                           "<|im_start|>x<|im_end|> <s> \xff\xfe\xc3 12345 ab abc aaa";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *json = (const char *)data, *cfg = NULL;
    size_t jl = size, cl = 0;
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        jl = (size_t)(nul - data);
        cfg = (const char *)nul + 1;
        cl = size - jl - 1;
    }
    ea_tokenizer *t = NULL;
    if (ea_tokenizer_from_json(json, jl, cfg, cl, "fuzz.json", &t) != EA_OK) return 0;
    fuzz_tok_use(t, text, sizeof text - 1);
    ea_tokenizer_destroy(t);
    return 0;
}
