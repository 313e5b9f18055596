/*
 * test_expert_slot.c — the expert-slot header (eaas/slot.h): what a client
 * writes reads back field for field at the documented offsets, and every
 * malformed field is refused with its own reason and a message naming it.
 */
#include <string.h>

#include "eaas/slot.h"
#include "harness.h"

static uint8_t hosted[2 * 8];
static ea_slot_limits lim;

static void setup(void) {
    for (int i = 0; i < 16; i++) hosted[i] = i < 8 || i % 2; /* layer 0 all, layer 1 odd experts */
    lim = (ea_slot_limits){.n_layers = 2, .n_experts = 8, .hidden = 16, .max_tokens = 32, .max_k = 4,
                           .slot_bytes = EA_SLOT_PAYLOAD_OFF + ea_slot_payload_bytes(32, 4, 16), .hosted = hosted};
}

static ea_slot_header good(void) {
    return (ea_slot_header){.seq = 41, .client = 3, .layer = 1, .n_tokens = 5, .k = 4, .hidden = 16};
}

TEST(state_word) {
    uint64_t w = ea_slot_word(EA_SLOT_WRITTEN, 0x123456789abcdull);
    CHECK_EQ(ea_slot_word_state(w), EA_SLOT_WRITTEN);
    CHECK_EQ(ea_slot_word_seq(w), 0x123456789abcdull);
    CHECK_EQ(w & 0xff, 1);
    CHECK_EQ(ea_slot_word_seq(ea_slot_word(EA_SLOT_COMPUTED, EA_SLOT_SEQ_MASK + 2)), 1); /* 56-bit wrap */
}

TEST(header_layout_and_round_trip) {
    setup();
    ea_slot_header h = good(), r;
    uint8_t b[EA_SLOT_HEADER_BYTES];
    ea_slot_header_write(b, &h);
    /* the offsets of docs/protocol.md, header-relative */
    CHECK(memcmp(b, "EAX1", 4) == 0);
    CHECK_EQ(b[4], 1);
    CHECK_EQ(b[6], 64);
    CHECK_EQ(b[8], 41);
    CHECK_EQ(b[16], 3);
    CHECK_EQ(b[20], 1);
    CHECK_EQ(b[24], 5);
    CHECK_EQ(b[28], 4);
    CHECK_EQ(b[32], 16);
    uint64_t pay = 0;
    for (int i = 0; i < 8; i++) pay |= (uint64_t)b[40 + i] << (8 * i);
    CHECK_EQ(pay, 5 * 16 * 4 + 5 * 4 * 4);
    ea_slot_refusal why;
    CHECK_EQ(ea_slot_header_read(b, &lim, 41, 3, &r, &why), EA_OK);
    CHECK_EQ(why, EA_SLOT_OK);
    CHECK_EQ(r.layer, 1);
    CHECK_EQ(r.n_tokens, 5);
    CHECK_EQ(r.payload_bytes, pay);
}

/* write a good header, apply `edit` to it, and expect refusal `want` with `word` in the message */
static int refused(void (*edit)(uint8_t *b, ea_slot_header *h), ea_slot_refusal want, uint64_t state_seq,
                   const char *word) {
    setup();
    ea_slot_header h = good(), r;
    uint8_t b[EA_SLOT_HEADER_BYTES];
    if (edit) edit(b, &h);
    ea_slot_header_write(b, &h);
    if (edit) edit(b, NULL);
    ea_slot_refusal why;
    ea_status s = ea_slot_header_read(b, &lim, state_seq, 3, &r, &why);
    if (s != EA_ERR_FORMAT || why != want || !strstr(ea_errmsg(), word)) {
        fprintf(stderr, "  want refusal %d (%s), got status %d refusal %d: %s\n", want, word, s, why, ea_errmsg());
        return 0;
    }
    return 1;
}

static void e_magic(uint8_t *b, ea_slot_header *h) { if (!h) b[0] ^= 1; }
static void e_version(uint8_t *b, ea_slot_header *h) { if (!h) b[4] = 2; }
static void e_client(uint8_t *b, ea_slot_header *h) { (void)b; if (h) h->client = 4; }
static void e_layer(uint8_t *b, ea_slot_header *h) { (void)b; if (h) h->layer = 2; }
static void e_neg_layer(uint8_t *b, ea_slot_header *h) { (void)b; if (h) h->layer = -1; }
static void e_tokens(uint8_t *b, ea_slot_header *h) { (void)b; if (h) h->n_tokens = 33; }
static void e_no_tokens(uint8_t *b, ea_slot_header *h) { (void)b; if (h) h->n_tokens = 0; }
static void e_k(uint8_t *b, ea_slot_header *h) { (void)b; if (h) h->k = 5; }
static void e_hidden(uint8_t *b, ea_slot_header *h) { (void)b; if (h) h->hidden = 32; }
static void e_payload(uint8_t *b, ea_slot_header *h) { if (!h) b[40] ^= 4; }

TEST(each_bad_field_refused) {
    CHECK(refused(e_magic, EA_SLOT_BAD_MAGIC, 41, "magic"));
    CHECK(refused(e_version, EA_SLOT_BAD_VERSION, 41, "version"));
    CHECK(refused(NULL, EA_SLOT_BAD_SEQ, 42, "seq"));
    CHECK(refused(e_client, EA_SLOT_BAD_CLIENT, 41, "client"));
    CHECK(refused(e_layer, EA_SLOT_BAD_LAYER, 41, "layer 2"));
    CHECK(refused(e_neg_layer, EA_SLOT_BAD_LAYER, 41, "layer -1"));
    CHECK(refused(e_tokens, EA_SLOT_BAD_TOKENS, 41, "33 tokens"));
    CHECK(refused(e_no_tokens, EA_SLOT_BAD_TOKENS, 41, "0 tokens"));
    CHECK(refused(e_k, EA_SLOT_BAD_K, 41, "k 5"));
    CHECK(refused(e_hidden, EA_SLOT_BAD_HIDDEN, 41, "hidden 32"));
    CHECK(refused(e_payload, EA_SLOT_BAD_SIZE, 41, "payload"));
}

TEST(payload_must_fit_the_slot) {
    setup();
    lim.slot_bytes = EA_SLOT_PAYLOAD_OFF + ea_slot_payload_bytes(5, 4, 16) - 1;
    ea_slot_header h = good(), r;
    uint8_t b[EA_SLOT_HEADER_BYTES];
    ea_slot_header_write(b, &h);
    ea_slot_refusal why;
    CHECK_EQ(ea_slot_header_read(b, &lim, 41, 3, &r, &why), EA_ERR_FORMAT);
    CHECK_EQ(why, EA_SLOT_BAD_SIZE);
    lim.slot_bytes++;
    CHECK_EQ(ea_slot_header_read(b, &lim, 41, 3, &r, &why), EA_OK);
}

TEST(ids_hosted_here) {
    setup();
    ea_slot_header h = good();
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = i % 3 ? 2 * (i % 4) + 1 : -1; /* layer 1: odd experts or -1 */
    ea_slot_refusal why;
    CHECK_EQ(ea_slot_ids_check(ids, &h, &lim, &why), EA_OK);
    ids[7] = 4; /* even: not hosted at layer 1 */
    CHECK_EQ(ea_slot_ids_check(ids, &h, &lim, &why), EA_ERR_FORMAT);
    CHECK_EQ(why, EA_SLOT_BAD_EXPERT);
    CHECK(strstr(ea_errmsg(), "token 1 slot 3") != NULL);
    CHECK(strstr(ea_errmsg(), "not hosted") != NULL);
    ids[7] = 8;
    CHECK_EQ(ea_slot_ids_check(ids, &h, &lim, &why), EA_ERR_FORMAT);
    ids[7] = -2;
    CHECK_EQ(ea_slot_ids_check(ids, &h, &lim, &why), EA_ERR_FORMAT);
    h.layer = 0;
    ids[7] = 4; /* layer 0 hosts every expert */
    CHECK_EQ(ea_slot_ids_check(ids, &h, &lim, &why), EA_OK);
}

int main(void) {
    RUN(state_word);
    RUN(header_layout_and_round_trip);
    RUN(each_bad_field_refused);
    RUN(payload_must_fit_the_slot);
    RUN(ids_hosted_here);
    return TEST_SUMMARY();
}
