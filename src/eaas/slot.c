/*
 * slot.c — reading and writing the expert-slot header (see slot.h for the
 * layout). Fields are read byte by byte in little-endian order, so a slot
 * written by any client on any host reads the same; every field is checked
 * before anything else looks at the payload.
 */
#include "eaas/slot.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

uint64_t ea_slot_payload_bytes(int n_tokens, int k, int hidden) {
    return (uint64_t)n_tokens * (uint64_t)hidden * 4u + (uint64_t)n_tokens * (uint64_t)k * 4u;
}

uint64_t ea_slot_result_bytes(int n_tokens, int k, int hidden) {
    return EA_SLOT_RESULT_OUT_OFF + (uint64_t)n_tokens * (uint64_t)k * (uint64_t)hidden * 4u;
}

void ea_slot_header_write(uint8_t *hdr, const ea_slot_header *h) {
    memset(hdr, 0, EA_SLOT_HEADER_BYTES);
    put32(hdr + 0, EA_SLOT_MAGIC);
    hdr[4] = EA_SLOT_VERSION;
    hdr[6] = EA_SLOT_HEADER_BYTES;
    put64(hdr + 8, h->seq & EA_SLOT_SEQ_MASK);
    put32(hdr + 16, h->client);
    put32(hdr + 20, (uint32_t)h->layer);
    put32(hdr + 24, (uint32_t)h->n_tokens);
    put32(hdr + 28, (uint32_t)h->k);
    put32(hdr + 32, (uint32_t)h->hidden);
    put64(hdr + 40, ea_slot_payload_bytes(h->n_tokens, h->k, h->hidden));
}

/* Sets the refusal and passes the error (from ea_err) on. */
static ea_status refuse(ea_slot_refusal *refusal, ea_slot_refusal code, ea_status err) {
    *refusal = code;
    return err;
}

ea_status ea_slot_header_read(const uint8_t *hdr, const ea_slot_limits *lim, uint64_t state_seq, uint32_t client,
                              ea_slot_header *out, ea_slot_refusal *refusal) {
    memset(out, 0, sizeof *out);
    *refusal = EA_SLOT_OK;
    uint32_t magic = get32(hdr);
    unsigned version = (unsigned)hdr[4] | (unsigned)hdr[5] << 8, hbytes = (unsigned)hdr[6] | (unsigned)hdr[7] << 8;
    if (magic != EA_SLOT_MAGIC)
        return refuse(refusal, EA_SLOT_BAD_MAGIC,
                      ea_err(EA_ERR_FORMAT, "slot header: magic 0x%08x, expected 0x%08x", magic, EA_SLOT_MAGIC));
    if (version != EA_SLOT_VERSION || hbytes != EA_SLOT_HEADER_BYTES)
        return refuse(refusal, EA_SLOT_BAD_VERSION,
                      ea_err(EA_ERR_FORMAT, "slot header: version %u with %u header bytes, expected %d with %d",
                             version, hbytes, EA_SLOT_VERSION, EA_SLOT_HEADER_BYTES));
    out->seq = get64(hdr + 8);
    if (out->seq != (state_seq & EA_SLOT_SEQ_MASK))
        return refuse(refusal, EA_SLOT_BAD_SEQ,
                      ea_err(EA_ERR_FORMAT, "slot header: seq %llu, the state word says %llu (a torn or stale write)",
                             (unsigned long long)out->seq, (unsigned long long)(state_seq & EA_SLOT_SEQ_MASK)));
    out->client = get32(hdr + 16);
    if (out->client != client)
        return refuse(refusal, EA_SLOT_BAD_CLIENT,
                      ea_err(EA_ERR_FORMAT, "slot header: client %u in the slot of client %u", out->client, client));
    out->layer = (int32_t)get32(hdr + 20);
    out->n_tokens = (int32_t)get32(hdr + 24);
    out->k = (int32_t)get32(hdr + 28);
    out->hidden = (int32_t)get32(hdr + 32);
    out->payload_bytes = get64(hdr + 40);
    if (out->layer < 0 || out->layer >= lim->n_layers)
        return refuse(refusal, EA_SLOT_BAD_LAYER,
                      ea_err(EA_ERR_FORMAT, "slot header: layer %d not in [0, %d)", out->layer, lim->n_layers));
    if (out->n_tokens < 1 || out->n_tokens > lim->max_tokens)
        return refuse(refusal, EA_SLOT_BAD_TOKENS,
                      ea_err(EA_ERR_FORMAT, "slot header: %d tokens, not in [1, %d]", out->n_tokens, lim->max_tokens));
    if (out->k < 1 || out->k > lim->max_k)
        return refuse(refusal, EA_SLOT_BAD_K,
                      ea_err(EA_ERR_FORMAT, "slot header: k %d not in [1, %d]", out->k, lim->max_k));
    if (out->hidden != lim->hidden)
        return refuse(refusal, EA_SLOT_BAD_HIDDEN,
                      ea_err(EA_ERR_FORMAT, "slot header: hidden %d, the model's is %d", out->hidden, lim->hidden));
    uint64_t want = ea_slot_payload_bytes(out->n_tokens, out->k, out->hidden);
    if (out->payload_bytes != want || EA_SLOT_PAYLOAD_OFF + want > lim->slot_bytes)
        return refuse(
            refusal, EA_SLOT_BAD_SIZE,
            ea_err(EA_ERR_FORMAT,
                   "slot header: payload of %llu bytes (%d tokens x k %d needs %llu; the slot holds %llu)",
                   (unsigned long long)out->payload_bytes, out->n_tokens, out->k, (unsigned long long)want,
                   (unsigned long long)(lim->slot_bytes > EA_SLOT_PAYLOAD_OFF ? lim->slot_bytes - EA_SLOT_PAYLOAD_OFF
                                                                              : 0)));
    return EA_OK;
}

ea_status ea_slot_ids_check(const int32_t *ids, const ea_slot_header *h, const ea_slot_limits *lim,
                            ea_slot_refusal *refusal) {
    *refusal = EA_SLOT_OK;
    const uint8_t *hosted = lim->hosted + (size_t)h->layer * (size_t)lim->n_experts;
    for (int i = 0; i < h->n_tokens * h->k; i++) {
        int32_t e = ids[i];
        if (e == -1)
            continue;
        if (e < 0 || e >= lim->n_experts)
            return refuse(refusal, EA_SLOT_BAD_EXPERT,
                          ea_err(EA_ERR_FORMAT, "slot ids: token %d slot %d: expert %d not in [0, %d)", i / h->k,
                                 i % h->k, e, lim->n_experts));
        if (!hosted[e])
            return refuse(refusal, EA_SLOT_BAD_EXPERT,
                          ea_err(EA_ERR_FORMAT, "slot ids: token %d slot %d: layer %d expert %d is not hosted here",
                                 i / h->k, i % h->k, h->layer, e));
    }
    return EA_OK;
}

const char *ea_slot_refusal_name(ea_slot_refusal r) {
    static const char *names[] = {
        "ok",           "bad magic",       "bad version", "bad sequence number", "wrong client",
        "bad layer",    "bad token count", "bad k",       "bad hidden size",     "bad payload size",
        "bad expert id"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown refusal";
}

ea_status ea_slot_model_read(const json_t *m, ea_slot_model *out) {
    memset(out, 0, sizeof *out);
    const char *arch = json_string_value(json_object_get(m, "arch"));
    const char *keys[] = {"n_layers", "n_experts", "hidden", "max_tokens", "max_k"};
    int *dst[] = {&out->n_layers, &out->n_experts, &out->hidden, &out->max_tokens, &out->max_k};
    if (!json_is_object(m) || !arch || strlen(arch) >= sizeof out->arch)
        return ea_err(EA_ERR_FORMAT, "model: expected {\"arch\":S, \"n_layers\":N, \"n_experts\":N, \"hidden\":N, "
                      "\"max_tokens\":N, \"max_k\":N}");
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *v = json_object_get(m, keys[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
            return ea_err(EA_ERR_FORMAT, "model: \"%s\" is not an integer in [1, %d]", keys[i], 1 << 24);
        *dst[i] = (int)json_integer_value(v);
    }
    return EA_OK;
}

json_t *ea_slot_model_json(const ea_slot_model *mo) {
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "arch", mo->arch, "n_layers", mo->n_layers, "n_experts",
                     mo->n_experts, "hidden", mo->hidden, "max_tokens", mo->max_tokens, "max_k", mo->max_k);
}

ea_status ea_slot_model_check(const ea_slot_model *server, const ea_slot_model *client, const char *who) {
    const ea_slot_model *s = server, *c = client;
    if (strcmp(s->arch, c->arch) != 0 || s->n_layers != c->n_layers || s->n_experts != c->n_experts ||
        s->hidden != c->hidden || s->max_k != c->max_k)
        return ea_err(EA_ERR_INVALID_ARG,
                      "expert server %s serves another model (%s, %d layers, %d experts, hidden %d, top-%d; the "
                      "client's: %s, %d, %d, %d, %d)",
                      who, s->arch, s->n_layers, s->n_experts, s->hidden, s->max_k, c->arch, c->n_layers, c->n_experts,
                      c->hidden, c->max_k);
    if (s->max_tokens < c->max_tokens)
        return ea_err(EA_ERR_INVALID_ARG, "expert server %s takes %d tokens per call, the client sends up to %d "
                      "(start it with --max-tokens %d or more, or give the client a smaller --max-batch-tokens)",
                      who, s->max_tokens, c->max_tokens, c->max_tokens);
    return EA_OK;
}
