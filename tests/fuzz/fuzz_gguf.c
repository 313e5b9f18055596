/*
 * fuzz_gguf.c — libFuzzer target: parse a GGUF file from a buffer, then walk
 * everything a caller can reach (every kv through the typed getters, every
 * array element, every tensor view's first and last byte) and derive a model
 * config from the metadata. A finding is a crash, a sanitizer report, a leak,
 * or a view outside the buffer (checked with an abort).
 * Command: see docs/formats.md ("Fuzzing").
 */
#include <stdint.h>
#include <stdlib.h>

#include "model/config.h"
#include "model/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ea_gguf g;
    if (ea_gguf_parse(data, size, "fuzz.gguf", &g) != EA_OK) return 0;
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const ea_gguf_kv *kv = &g.kv[i];
        const char *s;
        int64_t v;
        uint64_t u;
        float f;
        int b;
        (void)ea_gguf_get_str(&g, kv->key, &s);
        (void)ea_gguf_get_i64(&g, kv->key, &v);
        (void)ea_gguf_get_u64(&g, kv->key, &u);
        (void)ea_gguf_get_f32(&g, kv->key, &f);
        (void)ea_gguf_get_bool(&g, kv->key, &b);
        if (kv->type != EA_GGUF_ARRAY) continue;
        for (uint64_t j = 0; j < kv->n && j < 4096; j++) {
            size_t len;
            if (ea_gguf_arr_str(&g, (int)i, j, &s, &len) == EA_OK) {
                if ((const uint8_t *)s < data || (const uint8_t *)s + len > data + size) abort();
                if (len) sink ^= (uint8_t)s[len - 1];
            }
            (void)ea_gguf_arr_i64(&g, (int)i, j, &v);
            (void)ea_gguf_arr_f32(&g, (int)i, j, &f);
        }
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        ea_tensor t;
        ea_gguf_tensor(&g, (int)i, &t);
        const uint8_t *p = t.data;
        if (p < data || t.nbytes > size || p + t.nbytes > data + size) abort();
        if (t.nbytes) sink ^= p[0] ^ p[t.nbytes - 1];
        if (ea_gguf_find_tensor(&g, t.name) != (int)i) abort();
    }
    ea_model_config cfg;
    (void)ea_config_from_gguf(&g, &cfg);
    (void)sink;
    ea_gguf_deinit(&g);
    return 0;
}
