/*
 * remote.h — the `remote` MoE backend (moe.h): the attention client's side of
 * Expert-as-a-Service (DESIGN.md section 5). Experts live on expert servers
 * (server.h); this backend sends each server the (token, slot) pairs it
 * hosts, collects per-pair outputs and adds each token's k outputs in slot
 * order from 0.0f — so the result is bit-identical to the local backend.
 *
 * One call (submit + wait):
 *   submit  for every pair, the first live server hosting its expert (in the
 *           table's order); per chosen server: payload + header put into its
 *           slot, fence, state word (WRITTEN, seq)
 *   wait    poll the result words until each answers or its deadline passes;
 *           a server that timed out, refused or failed is marked dead, and
 *           its pairs are sent again (same x, same ids) to the next live
 *           replica; pairs whose expert has no live replica left fail their
 *           tokens (moe.h partial failure: an error naming layer and expert);
 *           then y[t] = sum_j w[t][j] * out[t][j], j = 0..k-1, from 0.0f
 *
 * The server table and each connection's set-up (the worker addresses and
 * keys the two sides exchange) come from the caller: `connect` is called once
 * per server at create with this client's side and returns the server's slot
 * (in a running system over the monitor and the server's HTTP port; in tests,
 * a direct call of ea_xsrv_add_client).
 *
 * Threading: the step-loop thread owns the backend (its UCX context
 * included); health and stats read counters and flags any thread may read.
 */
#ifndef EA_REMOTE_H
#define EA_REMOTE_H

#include "eaas/server.h"
#include "moe/moe.h"

typedef struct {
    /* this client's side of one connection */
    const void *addr; /* worker address */
    size_t addr_len;
    uint64_t result_addr;
    size_t result_bytes;
    const void *rkey;
    size_t rkey_len;
} ea_remote_hello;

typedef struct {
    int n_layers, n_experts, hidden, max_tokens, max_k;
    int n_servers;
    const uint8_t *const *hosted; /* borrows: [n_servers] -> (n_layers, n_experts) 1 where that server hosts */
    /* sets up the connection to server i: gives this client's side, gets the server's slot */
    ea_status (*connect)(void *ctx, int server, const ea_remote_hello *mine, ea_xsrv_slot_info *out);
    void *connect_ctx;
    double timeout_s; /* a server's answer to one call; past it the server is treated as dead */
} ea_remote_opts;

ea_status ea_remote_create(const ea_remote_opts *o, ea_moe_backend **out);

typedef struct {
    uint64_t calls, failovers, timeouts, refusals, failed_pairs;
    int servers_live;
} ea_remote_stats;

/* be must come from ea_remote_create. */
void ea_remote_get_stats(ea_moe_backend *be, ea_remote_stats *out);
/* Mark server i dead (a monitor notice); its experts go to their replicas from the next call. */
void ea_remote_server_dead(ea_moe_backend *be, int server);

#endif
