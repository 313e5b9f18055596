/*
 * fuzz_connect_model.c — the "model" of an expert server's POST /connect
 * (eaas/slot.h ea_slot_model_read), which a client controls entirely, and the
 * check against the server's own model.
 *
 * Input: the request body's "model" value as JSON text.
 * Properties beyond "no crash, no over-read, no UB":
 *   - an accepted model has an arch of at most 63 bytes and every number in
 *     [1, 2^24];
 *   - it survives ea_slot_model_json and a second read unchanged;
 *   - a model that passes the check against the server's has the server's
 *     shapes and calls of at most the server's max_tokens; a refused one says so.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "eaas/slot.h"

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_connect_model: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    ea_slot_model m, m2;
    if (ea_slot_model_read(j, &m) != EA_OK) {
        json_decref(j);
        return 0;
    }
    check(strlen(m.arch) < sizeof m.arch, "arch too long");
    int v[] = {m.n_layers, m.n_experts, m.hidden, m.max_tokens, m.max_k};
    for (int i = 0; i < 5; i++) check(v[i] >= 1 && v[i] <= (1 << 24), "a number out of range");
    json_t *again = ea_slot_model_json(&m);
    check(again && ea_slot_model_read(again, &m2) == EA_OK && memcmp(&m, &m2, sizeof m) == 0,
          "an accepted model does not survive a write and read");
    json_decref(again);
    ea_slot_model server = {.arch = "qwen3_moe", .n_layers = 4, .n_experts = 16, .hidden = 64, .max_tokens = 512,
                            .max_k = 4};
    if (ea_slot_model_check(&server, &m, "fuzz") == EA_OK)
        check(!strcmp(m.arch, "qwen3_moe") && m.n_layers == 4 && m.n_experts == 16 && m.hidden == 64 && m.max_k == 4 &&
                  m.max_tokens <= 512,
              "a model the server cannot serve was accepted");
    else
        check(strstr(ea_errmsg(), "expert server fuzz") != NULL, "a refusal that does not say why");
    json_decref(j);
    return 0;
}
