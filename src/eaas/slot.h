/*
 * slot.h — the expert-server slot protocol's byte layout (DESIGN.md section 5;
 * docs/protocol.md "Expert slots" is the same table for readers of the wire).
 *
 * An expert server keeps one SLOT per connected client, in memory the client
 * writes with one-sided puts; the client keeps one RESULT region per server,
 * which the server writes back the same way. Neither side trusts what the
 * other wrote: every field is read through the checks below.
 *
 * Slot (server memory, client writes; little-endian):
 *
 *   offset  size  field
 *   0       8     state word: bits 0-7 state, bits 8-63 sequence number
 *   8       56    reserved, 0 (the header starts on its own cache line)
 *   64      4     magic "EAX1" (0x31584145)
 *   68      2     version (1)
 *   70      2     header bytes (64)
 *   72      8     seq: the call's sequence number, equal to the state word's
 *   80      4     client id (assigned when the client connected)
 *   84      4     layer: model layer
 *   88      4     n_tokens: 1..max_tokens
 *   92      4     k: slots per token, 1..max_k
 *   96      4     hidden: must equal the model's hidden size
 *   100     4     reserved, 0
 *   104     8     payload bytes: n_tokens*hidden*4 + n_tokens*k*4
 *   112     16    reserved, 0
 *   128     ...   payload: x f32 [n_tokens][hidden], then ids i32 [n_tokens][k]:
 *                 the LOGICAL expert of each (token, slot) pair for this
 *                 server to run, or -1 for a pair another server runs
 *
 * Result (client memory, server writes):
 *
 *   0       8     result word: bits 0-7 state (COMPUTED or REFUSED), bits 8-63 seq
 *   8       4     refusal: which check failed (ea_slot_refusal), 0 when computed
 *   12      4     n_pairs: pairs the server ran
 *   16      48    reserved, 0
 *   64      ...   out f32 [n_tokens][k][hidden]: expert_{ids[t][j]}(x[t]) for
 *                 every pair with ids[t][j] >= 0; other pairs untouched
 *
 * The client adds each token's k outputs, w[t][j] * out[t][j], in slot order
 * from 0.0f — as moe_local.c does — so remote experts give the same bits.
 *
 * States and who may write them:
 *
 *   IDLE (0)      slot free; the client may write header and payload
 *   WRITTEN (1)   client -> server: put payload and header, fence, then put the
 *                 state word (WRITTEN, seq); the server may read and compute
 *   COMPUTED (2)  server -> client: the slot's own word becomes COMPUTED
 *                 (only if it still holds this call), then results put, fence,
 *                 result word put; the client may write again once the result
 *                 word says COMPUTED with its seq
 *   OFFLINE (3)   the server is leaving (or freed the slot of a dead client)
 *   REFUSED (4)   server -> client: the header or ids failed a check; nothing
 *                 was computed; the refusal says which check
 *
 * Sequence numbers rise by one per call of a client (mod 2^56) and are never
 * 0 once connected: a result whose seq is not the call's is stale or
 * duplicated and is ignored; a slot whose header seq is not the state word's
 * is refused (a torn write).
 */
#ifndef EA_SLOT_H
#define EA_SLOT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define EA_SLOT_MAGIC 0x31584145u /* "EAX1" little-endian */
#define EA_SLOT_VERSION 1
#define EA_SLOT_HEADER_OFF 64
#define EA_SLOT_HEADER_BYTES 64
#define EA_SLOT_PAYLOAD_OFF 128
#define EA_SLOT_RESULT_OUT_OFF 64
#define EA_SLOT_SEQ_MASK ((UINT64_C(1) << 56) - 1)

typedef enum {
    EA_SLOT_IDLE = 0,
    EA_SLOT_WRITTEN = 1,
    EA_SLOT_COMPUTED = 2,
    EA_SLOT_OFFLINE = 3,
    EA_SLOT_REFUSED = 4,
} ea_slot_state;

/* Why a server refused a slot (the result's refusal field). */
typedef enum {
    EA_SLOT_OK = 0,
    EA_SLOT_BAD_MAGIC = 1,
    EA_SLOT_BAD_VERSION = 2,
    EA_SLOT_BAD_SEQ = 3,
    EA_SLOT_BAD_CLIENT = 4,
    EA_SLOT_BAD_LAYER = 5,
    EA_SLOT_BAD_TOKENS = 6,
    EA_SLOT_BAD_K = 7,
    EA_SLOT_BAD_HIDDEN = 8,
    EA_SLOT_BAD_SIZE = 9,
    EA_SLOT_BAD_EXPERT = 10, /* an id out of range, or an expert this server does not host */
} ea_slot_refusal;

static inline uint64_t ea_slot_word(ea_slot_state st, uint64_t seq) {
    return (uint64_t)st | ((seq & EA_SLOT_SEQ_MASK) << 8);
}
static inline ea_slot_state ea_slot_word_state(uint64_t w) { return (ea_slot_state)(w & 0xff); }
static inline uint64_t ea_slot_word_seq(uint64_t w) { return w >> 8; }

typedef struct {
    uint64_t seq;
    uint32_t client;
    int32_t layer, n_tokens, k, hidden;
    uint64_t payload_bytes;
} ea_slot_header;

/* What a server accepts: its model's shape, the experts it hosts, its slot size. */
typedef struct {
    int n_layers, n_experts, hidden;
    int max_tokens, max_k;
    size_t slot_bytes;      /* bytes of the whole slot (state, header, payload) */
    const uint8_t *hosted;  /* (n_layers, n_experts): 1 where this server hosts the expert */
} ea_slot_limits;

/* The model a server serves and a client runs, as POST /connect carries it
 * ("model": {"arch", "n_layers", "n_experts", "hidden", "max_tokens", "max_k"};
 * max_tokens: the server's largest call, the client's largest call). */
typedef struct {
    char arch[64];
    int n_layers, n_experts, hidden, max_tokens, max_k;
} ea_slot_model;

struct json_t;
/* Reads m ("model"); EA_ERR_FORMAT if a field is missing or out of range. */
ea_status ea_slot_model_read(const struct json_t *m, ea_slot_model *out);
/* A new JSON object of mo (NULL without memory). */
struct json_t *ea_slot_model_json(const ea_slot_model *mo);
/* EA_OK if a client running `client` can use server `who` serving `server`:
 * the same shapes, and calls of at most the server's max_tokens; else
 * EA_ERR_INVALID_ARG saying what differs. Both sides check: the server before
 * it makes a slot, the client on the server's answer. */
ea_status ea_slot_model_check(const ea_slot_model *server, const ea_slot_model *client, const char *who);

/* Bytes of a payload / a result region for n tokens of k slots. */
uint64_t ea_slot_payload_bytes(int n_tokens, int k, int hidden);
uint64_t ea_slot_result_bytes(int n_tokens, int k, int hidden);

/* Writes h (with payload_bytes computed from its shape) at hdr[0..64). */
void ea_slot_header_write(uint8_t *hdr, const ea_slot_header *h);

/* Reads and checks the header at hdr[0..64) against lim, the state word's seq
 * and the slot's client: EA_OK, or EA_ERR_FORMAT with a message naming the
 * field and *refusal set. */
ea_status ea_slot_header_read(const uint8_t *hdr, const ea_slot_limits *lim, uint64_t state_seq, uint32_t client,
                              ea_slot_header *out, ea_slot_refusal *refusal);

/* Checks a checked header's ids (n_tokens*k of them): each -1 or an expert in
 * [0, n_experts) this server hosts at the header's layer. */
ea_status ea_slot_ids_check(const int32_t *ids, const ea_slot_header *h, const ea_slot_limits *lim,
                            ea_slot_refusal *refusal);

const char *ea_slot_refusal_name(ea_slot_refusal r);

#endif
