/*
 * fuzz_safetensors.c — libFuzzer target: parse a safetensors file (8-byte
 * header length, JSON header, data) from a buffer and read the first and last
 * byte of every tensor view. A finding is a crash, a sanitizer report, a leak,
 * or a view outside the buffer (checked with an abort).
 * Command: see docs/formats.md ("Fuzzing").
 */
#include <stdint.h>
#include <stdlib.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ea_st_file f;
    if (ea_st_parse(data, size, "fuzz.safetensors", &f) != EA_OK) return 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        ea_tensor t;
        ea_st_tensor(&f, i, &t);
        const uint8_t *p = t.data;
        if (p < data || t.nbytes > size || p + t.nbytes > data + size) abort();
        if (t.nbytes) sink ^= p[0] ^ p[t.nbytes - 1];
        if (ea_st_find(&f, t.name) != i) abort();
        size_t es = f.tensors[i].f8 ? 1 : t.dtype == EA_F32 ? 4 : 2;
        if ((size_t)ea_tensor_nelem(&t) * es != t.nbytes) abort();
    }
    (void)sink;
    ea_st_deinit(&f);
    return 0;
}
