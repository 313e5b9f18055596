/*
 * server.h — the expert server's loop (DESIGN.md section 5): stateless
 * service of the experts it hosts to any number of attention clients, over the
 * slot protocol (slot.h) and the one-sided transport (ucx.h).
 *
 * Each connected client gets one slot in UCX-registered memory. A poll round
 *
 *   1. progresses the worker (emulated puts land only then);
 *   2. gathers EVERY slot in state WRITTEN with a new sequence number, from
 *      all clients (with a gather window, waiting up to gather_s for the
 *      clients not written yet), and checks its header and ids (a slot that fails a check
 *      is answered REFUSED with the reason; the others go on);
 *   3. groups the gathered (token, slot) pairs by layer and runs each layer's
 *      experts once over all of them (moe_local's ea_moe_run_pairs: one
 *      grouped product per expert, whatever client a row came from);
 *   4. puts each client's per-(token, slot) outputs into its result region,
 *      fences, puts its result word (COMPUTED, seq), and marks the slot.
 *
 * The server never waits on a client except for the flush of its own puts,
 * bounded by a deadline; a client whose flush misses it is dropped (its slot
 * goes OFFLINE). Outputs are per (token, slot), so the client adds them in slot
 * order itself and remote experts give the same bits as local ones.
 *
 * Connection set-up is a plain call here (ea_xsrv_add_client); carrying it
 * over the network (the monitor, the server's HTTP port) is the caller's.
 *
 * Threading: one thread owns the server (its ucx context included).
 */
#ifndef EA_XSRV_H
#define EA_XSRV_H

#include <stddef.h>
#include <stdint.h>

#include "eaas/slot.h"
#include "eaas/ucx.h"
#include "moe/moe.h"

typedef struct {
    ea_moe_backend *experts; /* borrows: a local backend (moe_local.h) holding at least the hosted experts */
    ea_slot_limits lim;      /* shapes and the hosted mask (borrowed); lim.slot_bytes is computed here */
    int max_clients;
    int max_batch_pairs;     /* pairs of one layer in one round, across clients (<= the backend's max_tokens*max_k) */
    double flush_deadline_s; /* a client's result flush; past it the client is dropped */
    double gather_s;         /* once a slot is written, wait up to this long for the other clients' (0: none) */
} ea_xsrv_opts;

typedef struct ea_xsrv ea_xsrv;

/* What a client needs to write into its slot. Borrowed while the client is connected. */
typedef struct {
    uint32_t client;  /* the id to put in every header */
    uint64_t slot_addr;
    size_t slot_bytes;
    const void *rkey;
    size_t rkey_len;
    const void *server_addr; /* the server's worker address */
    size_t server_addr_len;
} ea_xsrv_slot_info;

typedef struct {
    uint64_t batches;       /* rounds that ran experts */
    uint64_t tokens;        /* (token, slot) pairs run */
    uint64_t cross_client_rounds;  /* poll rounds that gathered the calls of more than one client */
    uint64_t cross_client_batches; /* runs holding pairs of more than one client (same layer) */
    uint64_t slots_refused;
    int clients;            /* connected now */
    uint64_t clients_dropped;
} ea_xsrv_stats;

ea_status ea_xsrv_create(ea_ucx *u, const ea_xsrv_opts *o, ea_xsrv **out);
void ea_xsrv_destroy(ea_xsrv *s);

/* A client connects: its worker address and its result region (address, size, key). */
ea_status ea_xsrv_add_client(ea_xsrv *s, const void *addr, size_t addr_len, uint64_t result_addr, size_t result_bytes,
                             const void *rkey, size_t rkey_len, ea_xsrv_slot_info *out);
/* The client is gone (monitor notice): its slot is freed. */
void ea_xsrv_drop_client(ea_xsrv *s, uint32_t client);

/* One poll round (steps 1-4 above). Returns the number of slots answered, or a
 * negative ea_status on an error of the server itself (out of memory, a bug). */
int ea_xsrv_poll(ea_xsrv *s);

void ea_xsrv_get_stats(const ea_xsrv *s, ea_xsrv_stats *out);

#endif
