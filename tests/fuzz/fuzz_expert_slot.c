/*
 * fuzz_expert_slot.c — an expert server's checks (eaas/slot.h) on a slot whose
 * bytes a client controls entirely.
 *
 * Input: the slot as the server sees it — bytes 0-7 the state word, 64-127 the
 * header, 128.. the payload (a shorter input is zero-padded to 128 bytes; the
 * slot is exactly as long as the input, so payload sizes near the end are
 * exercised). Limits: 3 layers, 8 experts (layer 1 hosts the odd ones only),
 * hidden 4, at most 16 tokens and k 4; client 7.
 * Properties beyond "no crash, no over-read, no UB":
 *   - an accepted header has every field in range and a payload that fits the
 *     slot, so reading x and ids from it stays inside;
 *   - a refused header or ids always names a refusal (never EA_SLOT_OK);
 *   - an accepted header written back with ea_slot_header_write reads back equal.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eaas/slot.h"

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_expert_slot: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t n = size < EA_SLOT_PAYLOAD_OFF ? EA_SLOT_PAYLOAD_OFF : size;
    uint8_t *slot = calloc(1, n);
    if (!slot) return 0;
    memcpy(slot, data, size);
    uint8_t hosted[3 * 8];
    for (int i = 0; i < 24; i++) hosted[i] = i / 8 != 1 || (i % 8) % 2 == 1;
    ea_slot_limits lim = {.n_layers = 3, .n_experts = 8, .hidden = 4, .max_tokens = 16, .max_k = 4,
                          .slot_bytes = n, .hosted = hosted};
    uint64_t word = 0;
    for (int i = 0; i < 8; i++) word |= (uint64_t)slot[i] << (8 * i);
    ea_slot_header h;
    ea_slot_refusal why;
    if (ea_slot_header_read(slot + EA_SLOT_HEADER_OFF, &lim, ea_slot_word_seq(word), 7, &h, &why) != EA_OK) {
        check(why != EA_SLOT_OK, "a refused header names no refusal");
        free(slot);
        return 0;
    }
    check(h.layer >= 0 && h.layer < 3 && h.n_tokens >= 1 && h.n_tokens <= 16 && h.k >= 1 && h.k <= 4 && h.hidden == 4,
          "an accepted header has a field out of range");
    check(EA_SLOT_PAYLOAD_OFF + h.payload_bytes <= n, "an accepted payload does not fit the slot");
    size_t ids_off = EA_SLOT_PAYLOAD_OFF + (size_t)h.n_tokens * (size_t)h.hidden * 4;
    int32_t *ids = malloc((size_t)h.n_tokens * (size_t)h.k * sizeof *ids);
    if (ids) {
        memcpy(ids, slot + ids_off, (size_t)h.n_tokens * (size_t)h.k * sizeof *ids);
        if (ea_slot_ids_check(ids, &h, &lim, &why) != EA_OK) check(why == EA_SLOT_BAD_EXPERT, "ids refused without a reason");
        free(ids);
    }
    uint8_t again[EA_SLOT_HEADER_BYTES];
    ea_slot_header h2;
    ea_slot_header_write(again, &h);
    check(ea_slot_header_read(again, &lim, h.seq, 7, &h2, &why) == EA_OK && memcmp(&h, &h2, sizeof h) == 0,
          "an accepted header does not survive a write and read");
    free(slot);
    return 0;
}
