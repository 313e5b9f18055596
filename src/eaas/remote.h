/*
 * remote.h — the `remote` MoE backend (moe.h): the attention client's side of
 * Expert-as-a-Service (DESIGN.md section 5). Experts live on expert servers
 * (server.h); this backend sends each server the (token, slot) pairs it
 * hosts, collects per-pair outputs and adds each token's k outputs in slot
 * order from 0.0f — so the result is bit-identical to the local backend.
 *
 * One call (submit + wait):
 *   submit  for every pair, a live server hosting its expert (see Servers
 *           below); per chosen server: payload + header put into its
 *           slot, fence, state word (WRITTEN, seq)
 *   wait    poll the result words until each answers or its deadline passes;
 *           a server that timed out, refused or failed is marked dead, and
 *           its pairs are sent again (same x, same ids) to the next live
 *           replica; pairs whose expert has no live replica left fail their
 *           tokens (moe.h partial failure: an error naming layer and expert);
 *           then y[t] = sum_j w[t][j] * out[t][j], j = 0..k-1, from 0.0f
 *
 * Servers: the table grows and changes while the backend runs. The caller adds
 * servers (ea_remote_add_server: this client's side goes to a connect
 * function, which returns the server's slot) and reports deaths
 * (ea_remote_server_dead), and changes a server's hosted set when it gains or
 * loses replicas of hot experts (ea_remote_set_hosted); a running system does
 * all three from the monitor's table in the sync hook (eaas/client.c).
 *
 * Placement: a call's pairs of one expert with r live replicas are cut into
 * min(r, ceil(pairs / EA_REMOTE_SPLIT_MIN)) chunks of consecutive pairs; chunk
 * c of the client's call number `turn` goes to the ((layer + expert + salt +
 * turn + c) mod r)-th live replica in table order. So a few tokens of an
 * expert stay on one server in one call (its weights read once) and move to
 * the next replica in the next call, a hot expert's many tokens share its
 * replicas, clients with other salts start elsewhere, and a server that joins
 * gets its share from the next call. Any replica gives the same bits
 * (batch-invariant kernels).
 *
 * Threading: the step-loop thread owns the backend (its UCX context
 * included); health and stats read counters and flags any thread may read.
 */
#ifndef EA_REMOTE_H
#define EA_REMOTE_H

#include "eaas/server.h"
#include "moe/moe.h"

#define EA_REMOTE_SPLIT_MIN 16 /* pairs per chunk below which an expert's pairs are not cut */

typedef struct {
    /* this client's side of one connection */
    const void *addr; /* worker address */
    size_t addr_len;
    uint64_t result_addr;
    size_t result_bytes;
    const void *rkey;
    size_t rkey_len;
    int lane; /* which of the client's lanes (the server frees that lane's earlier slot) */
} ea_remote_hello;

typedef struct {
    int n_layers, n_experts, hidden, max_tokens, max_k;
    int max_servers; /* servers known at once, live or dead (a dead one's entry is reused); <= 0: 64 */
    /* Called at the start of every call on the caller's thread, before any
     * pair is placed: where membership changes (a monitor's table) are applied
     * with ea_remote_add_server and ea_remote_server_dead. NULL: none. */
    void (*sync)(void *ctx, ea_moe_backend *be);
    void *sync_ctx;
    void (*release)(void *ctx); /* called with sync_ctx when the backend is destroyed; NULL: none */
    /* Health: 1 if a live server hosting (layer, expert) is known to the
     * caller but not connected yet (sync connects it at the next call), so the
     * expert is not reported missing. Any thread. NULL: none. */
    int (*coming)(void *ctx, int layer, int expert);
    double timeout_s; /* a server's answer to one call; past it the server is treated as dead */
    int lanes;        /* calls in flight at once (moe.h): 2 holds two slots on every server; <= 1: one */
    uint32_t salt;    /* which replica this client prefers (Placement above); clients differ by it */
} ea_remote_opts;

/* Sets up one connection: given this client's side, returns the server's slot
 * (in a running system over the server's HTTP port, eaas/client.c; in tests a
 * direct call of ea_xsrv_add_client). */
typedef ea_status (*ea_remote_connect_fn)(void *ctx, const ea_remote_hello *mine, ea_xsrv_slot_info *out);

ea_status ea_remote_create(const ea_remote_opts *o, ea_moe_backend **out);

/* Adds a server hosting the (layer, expert) pairs where hosted (n_layers,
 * n_experts; copied) is 1, connecting through connect(ctx) once per lane; its index is
 * written to *index. Only on the thread that calls the backend (from sync, or
 * before the first call). name is for logs and health (copied). */
ea_status ea_remote_add_server(ea_moe_backend *be, const char *name, const uint8_t *hosted,
                               ea_remote_connect_fn connect, void *ctx, int *index);

/* Server i now hosts the (layer, expert) pairs where hosted is 1 (a replica
 * gained or dropped; copied). Only on the thread that calls the backend
 * (from sync), between calls. */
void ea_remote_set_hosted(ea_moe_backend *be, int server, const uint8_t *hosted);

/* The pairs routed to each (layer, expert) since the last take, into
 * out[n_layers * n_experts], which are zeroed then; returns how many are
 * non-zero. Any thread (the client's heartbeat reports them to the monitor). */
int ea_remote_take_load(ea_moe_backend *be, uint32_t *out);

typedef struct {
    uint64_t calls, failovers, timeouts, refusals, failed_pairs;
    uint64_t splits;     /* experts of a call whose pairs went to several replicas */
    uint64_t overlapped; /* calls submitted while another lane's call was in flight */
    int servers_live;
} ea_remote_stats;

/* be must come from ea_remote_create. */
void ea_remote_get_stats(ea_moe_backend *be, ea_remote_stats *out);

/* 1 while server i is live in this backend (not timed out, refused or reported dead). */
int ea_remote_server_live(ea_moe_backend *be, int server);

/* Mark server i dead (a monitor notice); its experts go to their replicas from
 * the next call. Any thread. */
void ea_remote_server_dead(ea_moe_backend *be, int server);

#endif
