/*
 * ucx.c — see ucx.h. UCX status codes become ea_status here and nowhere else.
 *
 * Requests: puts are started with ucp_put_nbx and no callback; a request UCX
 * hands back is released at once (ucp_request_free lets it finish inside UCX),
 * and completion is learnt from the endpoint flush, which covers every put
 * started before it. So the caller's source bytes must stay unchanged until the
 * next successful flush (ucx.h says so).
 *
 * Deadlines: every wait is a loop of ucp_worker_progress and
 * ucp_request_check_status bounded by ea_now_s(); on expiry the request is
 * cancelled and released and the caller gets EA_ERR_TIMEOUT.
 */
#include "eaas/ucx.h"

#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#include "base/alloc.h"
#include "base/util.h"

struct ea_ucx {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr; /* owns (ucp_worker_release_address) */
    size_t addr_len;
};

struct ea_ucx_ep {
    ea_ucx *u; /* borrows */
    ucp_ep_h ep;
    int failed; /* set by the error handler, or when a flush missed its deadline */
};

struct ea_ucx_mem {
    ea_ucx *u; /* borrows */
    ucp_mem_h mh;
    void *ptr;
    size_t size;
    void *rkey; /* owns (ucp_rkey_buffer_release) */
    size_t rkey_len;
};

struct ea_ucx_remote {
    ea_ucx_ep *ep; /* borrows */
    ucp_rkey_h rkey;
    uint64_t addr;
    size_t size;
};

static ea_status from_ucs(ucs_status_t st, const char *what) {
    if (st == UCS_OK) return EA_OK;
    ea_status code = st == UCS_ERR_NO_MEMORY                                  ? EA_ERR_NOMEM
                     : st == UCS_ERR_TIMED_OUT                                ? EA_ERR_TIMEOUT
                     : st == UCS_ERR_ENDPOINT_TIMEOUT || st == UCS_ERR_CONNECTION_RESET ||
                               st == UCS_ERR_UNREACHABLE || st == UCS_ERR_CANCELED ? EA_ERR_PEER
                                                                                   : EA_ERR_IO;
    return ea_err(code, "ucx: %s: %s", what, ucs_status_string(st));
}

ea_status ea_ucx_create(ea_ucx **out) {
    *out = NULL;
    /* UCX 1.13 drops shared memory under peer error handling without this (ucx.h) */
    setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
    ea_ucx *u = ea_calloc(1, sizeof *u);
    if (!u) return ea_err(EA_ERR_NOMEM, "ucx context");
    ucp_config_t *cfg = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        ea_free(u);
        return from_ucs(st, "reading the configuration");
    }
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
    st = ucp_init(&p, cfg, &u->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        ea_free(u);
        return from_ucs(st, "init");
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
    if ((st = ucp_worker_create(u->ctx, &wp, &u->worker)) != UCS_OK ||
        (st = ucp_worker_get_address(u->worker, &u->addr, &u->addr_len)) != UCS_OK) {
        ea_ucx_destroy(u);
        return from_ucs(st, "creating the worker");
    }
    *out = u;
    return EA_OK;
}

void ea_ucx_destroy(ea_ucx *u) {
    if (!u) return;
    if (u->addr) ucp_worker_release_address(u->worker, u->addr);
    if (u->worker) ucp_worker_destroy(u->worker);
    if (u->ctx) ucp_cleanup(u->ctx);
    ea_free(u);
}

void ea_ucx_progress(ea_ucx *u) {
    while (ucp_worker_progress(u->worker)) {
    }
}

void ea_ucx_address(const ea_ucx *u, const void **addr, size_t *len) {
    *addr = u->addr;
    *len = u->addr_len;
}

/* Waits for req (NULL: already done) until deadline_s from now; releases it. */
static ea_status wait_req(ea_ucx *u, void *req, double deadline_s, const char *what) {
    if (req == NULL) return EA_OK;
    if (UCS_PTR_IS_ERR(req)) return from_ucs(UCS_PTR_STATUS(req), what);
    double end = ea_now_s() + deadline_s;
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(u->worker);
        if (ea_now_s() > end) {
            ucp_request_cancel(u->worker, req);
            ucp_request_free(req);
            return ea_err(EA_ERR_TIMEOUT, "ucx: %s: no completion within %.3f s", what, deadline_s);
        }
    }
    ucp_request_free(req);
    return from_ucs(st, what);
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st) {
    (void)ep, (void)st;
    ((ea_ucx_ep *)arg)->failed = 1;
}

ea_status ea_ucx_connect(ea_ucx *u, const void *addr, size_t len, ea_ucx_ep **out) {
    *out = NULL;
    if (!addr || len == 0) return ea_err(EA_ERR_INVALID_ARG, "ucx: an empty worker address");
    ea_ucx_ep *e = ea_calloc(1, sizeof *e);
    if (!e) return ea_err(EA_ERR_NOMEM, "ucx endpoint");
    e->u = u;
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER,
                         .address = addr,
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = on_ep_error, .arg = e}};
    ucs_status_t st = ucp_ep_create(u->worker, &p, &e->ep);
    if (st != UCS_OK) {
        ea_free(e);
        return from_ucs(st, "connecting");
    }
    *out = e;
    return EA_OK;
}

int ea_ucx_ep_ok(const ea_ucx_ep *ep) { return !ep->failed; }

void ea_ucx_disconnect(ea_ucx_ep *e, double deadline_s) {
    if (!e) return;
    /* a peer that failed or hung gets no flush: close at once */
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = e->failed ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    (void)wait_req(e->u, ucp_ep_close_nbx(e->ep, &p), deadline_s, "closing an endpoint");
    ea_free(e);
}

ea_status ea_ucx_mem_alloc(ea_ucx *u, size_t bytes, ea_ucx_mem **out) {
    *out = NULL;
    if (bytes == 0) return ea_err(EA_ERR_INVALID_ARG, "ucx: a region of 0 bytes");
    ea_ucx_mem *m = ea_calloc(1, sizeof *m);
    if (!m) return ea_err(EA_ERR_NOMEM, "ucx region");
    m->u = u;
    ucp_mem_map_params_t p = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                                            UCP_MEM_MAP_PARAM_FIELD_FLAGS,
                              .address = NULL,
                              .length = bytes,
                              .flags = UCP_MEM_MAP_ALLOCATE};
    ucs_status_t st = ucp_mem_map(u->ctx, &p, &m->mh);
    if (st != UCS_OK) {
        ea_free(m);
        return from_ucs(st, "allocating a region");
    }
    ucp_mem_attr_t a = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH};
    if ((st = ucp_mem_query(m->mh, &a)) != UCS_OK || (st = ucp_rkey_pack(u->ctx, m->mh, &m->rkey, &m->rkey_len)) != UCS_OK) {
        ea_ucx_mem_free(m);
        return from_ucs(st, "registering a region");
    }
    m->ptr = a.address;
    m->size = bytes;
    memset(m->ptr, 0, bytes);
    *out = m;
    return EA_OK;
}

void *ea_ucx_mem_ptr(const ea_ucx_mem *m) { return m->ptr; }
size_t ea_ucx_mem_size(const ea_ucx_mem *m) { return m->size; }
uint64_t ea_ucx_mem_addr(const ea_ucx_mem *m) { return (uint64_t)(uintptr_t)m->ptr; }

void ea_ucx_mem_rkey(const ea_ucx_mem *m, const void **rkey, size_t *len) {
    *rkey = m->rkey;
    *len = m->rkey_len;
}

void ea_ucx_mem_free(ea_ucx_mem *m) {
    if (!m) return;
    if (m->rkey) ucp_rkey_buffer_release(m->rkey);
    if (m->mh) ucp_mem_unmap(m->u->ctx, m->mh);
    ea_free(m);
}

ea_status ea_ucx_remote_open(ea_ucx_ep *ep, uint64_t addr, size_t size, const void *rkey, size_t rkey_len,
                             ea_ucx_remote **out) {
    *out = NULL;
    if (!rkey || rkey_len == 0) return ea_err(EA_ERR_INVALID_ARG, "ucx: an empty remote key");
    ea_ucx_remote *r = ea_calloc(1, sizeof *r);
    if (!r) return ea_err(EA_ERR_NOMEM, "ucx remote region");
    ucs_status_t st = ucp_ep_rkey_unpack(ep->ep, rkey, &r->rkey);
    if (st != UCS_OK) {
        ea_free(r);
        return from_ucs(st, "unpacking a remote key");
    }
    r->ep = ep;
    r->addr = addr;
    r->size = size;
    *out = r;
    return EA_OK;
}

void ea_ucx_remote_close(ea_ucx_remote *r) {
    if (!r) return;
    ucp_rkey_destroy(r->rkey);
    ea_free(r);
}

ea_status ea_ucx_put(ea_ucx_remote *r, size_t off, const void *src, size_t n) {
    if (r->ep->failed) return ea_err(EA_ERR_PEER, "ucx: put to a peer that failed");
    if (off > r->size || n > r->size - off)
        return ea_err(EA_ERR_RANGE, "ucx: put of %zu bytes at %zu into a region of %zu", n, off, r->size);
    ucp_request_param_t p = {.op_attr_mask = 0};
    ucs_status_ptr_t req = ucp_put_nbx(r->ep->ep, src, n, r->addr + off, r->rkey, &p);
    if (UCS_PTR_IS_ERR(req)) return from_ucs(UCS_PTR_STATUS(req), "put");
    if (req) ucp_request_free(req); /* completes inside UCX; the next flush waits for it */
    return EA_OK;
}

ea_status ea_ucx_fence(ea_ucx *u) { return from_ucs(ucp_worker_fence(u->worker), "fence"); }

ea_status ea_ucx_flush(ea_ucx_ep *ep, double deadline_s) {
    if (ep->failed) return ea_err(EA_ERR_PEER, "ucx: flush to a peer that failed");
    ucp_request_param_t p = {.op_attr_mask = 0};
    ea_status s = wait_req(ep->u, ucp_ep_flush_nbx(ep->ep, &p), deadline_s, "flush");
    if (s == EA_OK && ep->failed) return ea_err(EA_ERR_PEER, "ucx: the peer failed during a flush");
    if (s == EA_ERR_TIMEOUT) ep->failed = 1; /* a hung peer is treated as gone (ucx.h) */
    return s;
}
