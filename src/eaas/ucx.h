/*
 * ucx.h — one-sided transport for the expert slots (DESIGN.md section 5): UCX
 * (UCP RMA) behind one opaque context, as ep/dist.h does for MPI. This file
 * and ucx.c are the only ones that include <ucp/api/ucp.h>.
 *
 * What it offers: a worker with an address to publish (through the monitor),
 * endpoints to peers, memory regions allocated by UCX (so puts into them are
 * truly one-sided on shared memory) with packed remote keys, non-blocking puts
 * into a peer's region, a fence that orders earlier puts before later ones,
 * and a flush with a deadline.
 *
 *   ea_ucx *u;  ea_ucx_create(&u);
 *   ea_ucx_mem *slot;  ea_ucx_mem_alloc(u, bytes, &slot);       // server: one per client
 *   ... publish ea_ucx_address(u), ea_ucx_mem_addr(slot), ea_ucx_mem_rkey(slot) ...
 *
 *   ea_ucx_ep *ep;  ea_ucx_connect(u, peer_addr, n, &ep);        // client
 *   ea_ucx_remote *r;  ea_ucx_remote_open(ep, raddr, rkey, n, &r);
 *   ea_ucx_put(r, 128, payload, bytes);                          // payload first
 *   ea_ucx_fence(u);                                             // ordered before ...
 *   ea_ucx_put(r, 0, &word, 8);                                  // ... the state word
 *   ea_ucx_flush(ep, 0.5);                                       // done, or EA_ERR_TIMEOUT
 *
 * Deadlines are ours. UCX notices a dead shared-memory peer only through its
 * keepalive (20 s by default), and a flush to a dead peer may never finish:
 * every wait here polls the worker until its deadline and then returns
 * EA_ERR_TIMEOUT (the peer is then treated as gone; the endpoint is closed
 * with force). An endpoint error (the peer's process died and UCX noticed)
 * turns later calls on it into EA_ERR_PEER.
 *
 * UCX 1.13 (Debian 12) facts this relies on: peer error handling drops the
 * shared-memory transports unless UCX_POSIX_ERROR_HANDLING=y, so ea_ucx_create
 * sets it (without overriding a value the user gave); a process that only
 * waits on its memory must still call ea_ucx_progress, or emulated puts (TCP)
 * never land.
 *
 * Threading: one context per thread that uses it (UCS_THREAD_MODE_SINGLE);
 * the server loop and a client backend each own theirs.
 */
#ifndef EA_UCX_H
#define EA_UCX_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct ea_ucx ea_ucx;
typedef struct ea_ucx_ep ea_ucx_ep;
typedef struct ea_ucx_mem ea_ucx_mem;
typedef struct ea_ucx_remote ea_ucx_remote;

ea_status ea_ucx_create(ea_ucx **out);
/* Closes nothing it does not own: endpoints and regions must be gone first. NULL is fine. */
void ea_ucx_destroy(ea_ucx *u);
/* Makes progress on every pending operation (call it in every poll loop). */
void ea_ucx_progress(ea_ucx *u);
/* The worker's address, to give to peers; borrowed while u lives. */
void ea_ucx_address(const ea_ucx *u, const void **addr, size_t *len);

/* An endpoint to the worker at addr (an address from a peer's ea_ucx_address). */
ea_status ea_ucx_connect(ea_ucx *u, const void *addr, size_t len, ea_ucx_ep **out);
/* 1 while UCX has reported no error on ep. */
int ea_ucx_ep_ok(const ea_ucx_ep *ep);
/* Closes ep (with force if a flush does not finish within deadline_s). NULL is fine. */
void ea_ucx_disconnect(ea_ucx_ep *ep, double deadline_s);

/* A zeroed region of `bytes` allocated and registered by UCX. */
ea_status ea_ucx_mem_alloc(ea_ucx *u, size_t bytes, ea_ucx_mem **out);
void *ea_ucx_mem_ptr(const ea_ucx_mem *m);
size_t ea_ucx_mem_size(const ea_ucx_mem *m);
/* The region's remote address and packed key, for a peer's ea_ucx_remote_open; borrowed while m lives. */
uint64_t ea_ucx_mem_addr(const ea_ucx_mem *m);
void ea_ucx_mem_rkey(const ea_ucx_mem *m, const void **rkey, size_t *len);
void ea_ucx_mem_free(ea_ucx_mem *m);

/* A peer's region [addr, addr + size) through ep. */
ea_status ea_ucx_remote_open(ea_ucx_ep *ep, uint64_t addr, size_t size, const void *rkey, size_t rkey_len,
                             ea_ucx_remote **out);
void ea_ucx_remote_close(ea_ucx_remote *r);
/* Starts a put of src[0..n) to the region at offset off (checked against its size).
 * src may be reused once the call returns (UCX copies it, or the call waited). */
ea_status ea_ucx_put(ea_ucx_remote *r, size_t off, const void *src, size_t n);
/* Orders every put started on u before every put started after it. */
ea_status ea_ucx_fence(ea_ucx *u);
/* Waits until every put started on ep is complete at the peer, at most deadline_s. */
ea_status ea_ucx_flush(ea_ucx_ep *ep, double deadline_s);

#endif
