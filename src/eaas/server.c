/*
 * server.c — the expert server's poll round (see server.h).
 *
 * Buffers (allocated at create, none in a round; P = max_batch_pairs,
 * H = hidden, T = lim.max_tokens, K = lim.max_k):
 *   xb (P, H)     rows gathered from the clients' slots for one layer's run
 *   ob (P, H)     the run's per-pair outputs
 *   prow, pexp, pdst (P)   pair -> row in xb, expert, destination (client, t*K_call + j)
 *   per client: out (T*K, H) result staging, kept until its flush
 * A round whose pairs of one layer exceed P runs in several chunks.
 */
#include "eaas/server.h"

#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "moe/moe_local.h"

typedef struct {
    int used, ready, connected;
    uint32_t id;
    ea_ucx_mem *slot;     /* owns */
    ea_ucx_ep *ep;        /* owns */
    ea_ucx_remote *res;   /* owns */
    size_t res_bytes;     /* its size: a call whose answer does not fit is refused */
    uint64_t seen;        /* last sequence number answered */
    ea_slot_header h;     /* the checked header of the call in this round */
    float *out;           /* owns: (T*K, H) */
    uint8_t rhdr[16];     /* result word + refusal + n_pairs, kept until the flush */
    uint32_t n_pairs;
} client;

struct ea_xsrv {
    ea_ucx *u; /* borrows */
    ea_xsrv_opts o;
    client *cl; /* owns: max_clients */
    uint32_t next_id;
    float *xb, *ob;
    int32_t *prow, *pexp, *pdst_client, *pdst_pair;
    ea_xsrv_stats st;
};

void ea_xsrv_destroy(ea_xsrv *s) {
    if (!s) return;
    for (int i = 0; s->cl && i < s->o.max_clients; i++) ea_xsrv_drop_client(s, s->cl[i].id);
    ea_free(s->cl);
    ea_aligned_free(s->xb);
    ea_aligned_free(s->ob);
    ea_free(s->prow);
    ea_free(s->pexp);
    ea_free(s->pdst_client);
    ea_free(s->pdst_pair);
    ea_free(s);
}

ea_status ea_xsrv_create(ea_ucx *u, const ea_xsrv_opts *o, ea_xsrv **out) {
    *out = NULL;
    if (!o->experts || !o->lim.hosted || o->max_clients < 1 || o->max_batch_pairs < o->lim.max_k ||
        o->lim.hidden < 1 || o->lim.max_tokens < 1 || o->lim.max_k < 1)
        return ea_err(EA_ERR_INVALID_ARG, "expert server: incomplete options");
    ea_xsrv *s = ea_calloc(1, sizeof *s);
    if (!s) return ea_err(EA_ERR_NOMEM, "expert server");
    s->u = u;
    s->o = *o;
    s->o.lim.slot_bytes = EA_SLOT_PAYLOAD_OFF + ea_slot_payload_bytes(o->lim.max_tokens, o->lim.max_k, o->lim.hidden);
    if (s->o.flush_deadline_s <= 0) s->o.flush_deadline_s = 1.0;
    size_t P = (size_t)o->max_batch_pairs, H = (size_t)o->lim.hidden;
    s->cl = ea_calloc((size_t)o->max_clients, sizeof *s->cl);
    s->xb = ea_aligned_alloc(64, P * H * sizeof(float));
    s->ob = ea_aligned_alloc(64, P * H * sizeof(float));
    s->prow = ea_calloc(P, sizeof(int32_t));
    s->pexp = ea_calloc(P, sizeof(int32_t));
    s->pdst_client = ea_calloc(P, sizeof(int32_t));
    s->pdst_pair = ea_calloc(P, sizeof(int32_t));
    if (!s->cl || !s->xb || !s->ob || !s->prow || !s->pexp || !s->pdst_client || !s->pdst_pair) {
        ea_xsrv_destroy(s);
        return ea_err(EA_ERR_NOMEM, "expert server buffers for %zu pairs", P);
    }
    *out = s;
    return EA_OK;
}

ea_status ea_xsrv_add_client(ea_xsrv *s, const void *addr, size_t addr_len, uint64_t result_addr, size_t result_bytes,
                             const void *rkey, size_t rkey_len, ea_xsrv_slot_info *out) {
    memset(out, 0, sizeof *out);
    const ea_slot_limits *lim = &s->o.lim;
    /* a client sizes its region for its own largest call, which may be smaller than ours
     * (serve --max-batch-tokens below --max-tokens): each call is checked against it */
    uint64_t least = ea_slot_result_bytes(1, 1, lim->hidden);
    if (result_bytes < least)
        return ea_err(EA_ERR_INVALID_ARG,
                      "expert server: a result region of %zu bytes holds no answer (one pair needs %llu)", result_bytes,
                      (unsigned long long)least);
    client *c = NULL;
    for (int i = 0; i < s->o.max_clients && !c; i++)
        if (!s->cl[i].used) c = &s->cl[i];
    if (!c) return ea_err(EA_ERR_BUSY, "expert server: all %d client slots are taken", s->o.max_clients);
    memset(c, 0, sizeof *c);
    ea_status st = ea_ucx_mem_alloc(s->u, lim->slot_bytes, &c->slot);
    if (st == EA_OK) st = ea_ucx_connect(s->u, addr, addr_len, &c->ep);
    if (st == EA_OK) st = ea_ucx_remote_open(c->ep, result_addr, result_bytes, rkey, rkey_len, &c->res);
    if (st == EA_OK && !(c->out = ea_aligned_alloc(64, (size_t)lim->max_tokens * lim->max_k * lim->hidden * sizeof(float))))
        st = ea_err(EA_ERR_NOMEM, "expert server: client result buffer");
    c->used = 1; /* so that drop frees what was made */
    c->res_bytes = result_bytes;
    c->id = ++s->next_id;
    if (st != EA_OK) {
        ea_xsrv_drop_client(s, c->id);
        return st;
    }
    c->connected = 1;
    s->st.clients++;
    out->client = c->id;
    out->slot_addr = ea_ucx_mem_addr(c->slot);
    out->slot_bytes = lim->slot_bytes;
    ea_ucx_mem_rkey(c->slot, &out->rkey, &out->rkey_len);
    ea_ucx_address(s->u, &out->server_addr, &out->server_addr_len);
    return EA_OK;
}

void ea_xsrv_drop_client(ea_xsrv *s, uint32_t id) {
    for (int i = 0; i < s->o.max_clients; i++) {
        client *c = &s->cl[i];
        if (!c->used || c->id != id) continue;
        if (c->slot) __atomic_store_n((uint64_t *)ea_ucx_mem_ptr(c->slot), ea_slot_word(EA_SLOT_OFFLINE, c->seen),
                                      __ATOMIC_RELEASE);
        ea_ucx_remote_close(c->res);
        ea_ucx_disconnect(c->ep, 0.2);
        ea_ucx_mem_free(c->slot);
        ea_aligned_free(c->out);
        if (c->connected) s->st.clients--;
        memset(c, 0, sizeof *c);
        return;
    }
}

/* Result header, then a fence, then the result word; flushed within the deadline or the client is dropped. */
static int answer(ea_xsrv *s, client *c, ea_slot_state state, ea_slot_refusal why, size_t out_bytes) {
    uint64_t w = ea_slot_word(state, c->seen);
    uint32_t r32 = (uint32_t)why;
    memcpy(c->rhdr, &w, 8);
    memcpy(c->rhdr + 8, &r32, 4);
    memcpy(c->rhdr + 12, &c->n_pairs, 4);
    /* The slot's own word first: once the result word lands the client may
     * write its next call (WRITTEN, seq+1), which a later store here would
     * overwrite. Only the word of this call is replaced. */
    uint64_t mine = ea_slot_word(EA_SLOT_WRITTEN, c->seen);
    __atomic_compare_exchange_n((uint64_t *)ea_ucx_mem_ptr(c->slot), &mine, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    ea_status st = EA_OK;
    if (out_bytes) st = ea_ucx_put(c->res, EA_SLOT_RESULT_OUT_OFF, c->out, out_bytes);
    if (st == EA_OK) st = ea_ucx_put(c->res, 8, c->rhdr + 8, 8);
    if (st == EA_OK) st = ea_ucx_fence(s->u);
    if (st == EA_OK) st = ea_ucx_put(c->res, 0, c->rhdr, 8);
    if (st == EA_OK) st = ea_ucx_flush(c->ep, s->o.flush_deadline_s);
    if (st != EA_OK) {
        EA_LOGW("expert server: client %u dropped: %s", c->id, ea_errmsg());
        s->st.clients_dropped++;
        ea_xsrv_drop_client(s, c->id);
        return 0;
    }
    return 1;
}

/* Step 2: a client's slot in state WRITTEN with a new seq, checked. Returns 1 if it is ready to run. */
static int take_slot(ea_xsrv *s, client *c) {
    const uint8_t *slot = ea_ucx_mem_ptr(c->slot);
    uint64_t w = __atomic_load_n((const uint64_t *)slot, __ATOMIC_ACQUIRE);
    if (ea_slot_word_state(w) != EA_SLOT_WRITTEN || ea_slot_word_seq(w) == c->seen) return 0;
    c->seen = ea_slot_word_seq(w);
    c->n_pairs = 0;
    uint8_t hdr[EA_SLOT_HEADER_BYTES];
    memcpy(hdr, slot + EA_SLOT_HEADER_OFF, sizeof hdr); /* read once: the client may not touch it now, but trust nothing */
    ea_slot_refusal why;
    ea_status st = ea_slot_header_read(hdr, &s->o.lim, c->seen, c->id, &c->h, &why);
    if (st == EA_OK && ea_slot_result_bytes(c->h.n_tokens, c->h.k, c->h.hidden) > c->res_bytes) {
        why = EA_SLOT_BAD_SIZE;
        st = ea_err(EA_ERR_FORMAT, "slot header: the answer to %d tokens x k %d takes %llu bytes, the client's result "
                    "region %zu", c->h.n_tokens, c->h.k,
                    (unsigned long long)ea_slot_result_bytes(c->h.n_tokens, c->h.k, c->h.hidden), c->res_bytes);
    }
    if (st == EA_OK) {
        const int32_t *ids = (const int32_t *)(slot + EA_SLOT_PAYLOAD_OFF + (size_t)c->h.n_tokens * c->h.hidden * 4);
        st = ea_slot_ids_check(ids, &c->h, &s->o.lim, &why);
    }
    if (st != EA_OK) {
        EA_LOGW("expert server: client %u seq %llu refused: %s", c->id, (unsigned long long)c->seen, ea_errmsg());
        s->st.slots_refused++;
        answer(s, c, EA_SLOT_REFUSED, why, 0);
        return 0;
    }
    return 1;
}

/* Step 3 for one layer: every ready client's pairs at `layer`, in chunks of max_batch_pairs. */
static ea_status run_layer(ea_xsrv *s, int layer) {
    int H = s->o.lim.hidden, np = 0, nrow = 0, chunk_client = -1, chunk_mixed = 0;
    for (int ci = 0; ci <= s->o.max_clients; ci++) {
        client *c = ci < s->o.max_clients ? &s->cl[ci] : NULL;
        int last = c == NULL;
        if (!last && !(c->used && c->ready && c->h.layer == layer)) continue;
        int n = last ? 0 : c->h.n_tokens, k = last ? 0 : c->h.k;
        const uint8_t *slot = last ? NULL : ea_ucx_mem_ptr(c->slot);
        const float *x = last ? NULL : (const float *)(slot + EA_SLOT_PAYLOAD_OFF);
        const int32_t *ids = last ? NULL : (const int32_t *)(slot + EA_SLOT_PAYLOAD_OFF + (size_t)n * H * 4);
        for (int t = 0; t <= n; t++) {
            /* run what is gathered when the next token might not fit, and at the very end */
            if (np > 0 && ((t < n && np + k > s->o.max_batch_pairs) || last)) {
                EA_TRY(ea_moe_run_pairs(s->o.experts, layer, s->xb, np, s->prow, s->pexp, s->ob));
                for (int p = 0; p < np; p++)
                    memcpy(s->cl[s->pdst_client[p]].out + (size_t)s->pdst_pair[p] * H, s->ob + (size_t)p * H,
                           sizeof(float) * (size_t)H);
                s->st.tokens += (uint64_t)np;
                s->st.batches++;
                s->st.cross_client_batches += (uint64_t)chunk_mixed;
                np = nrow = 0;
                chunk_client = -1, chunk_mixed = 0;
            }
            if (t == n) break;
            int any = 0;
            for (int j = 0; j < k; j++) {
                int32_t e = ids[t * k + j];
                if (e < 0) continue;
                s->prow[np] = nrow;
                s->pexp[np] = e;
                s->pdst_client[np] = ci;
                if (chunk_client >= 0 && chunk_client != ci) chunk_mixed = 1;
                chunk_client = ci;
                s->pdst_pair[np] = t * k + j;
                np++;
                c->n_pairs++;
                any = 1;
            }
            if (any) memcpy(s->xb + (size_t)nrow++ * H, x + (size_t)t * H, sizeof(float) * (size_t)H);
        }
        if (last) break;
    }
    return EA_OK;
}

int ea_xsrv_poll(ea_xsrv *s) {
    ea_ucx_progress(s->u);
    int n_ready = 0;
    for (int i = 0; i < s->o.max_clients; i++) {
        client *c = &s->cl[i];
        c->ready = c->used && take_slot(s, c);
        n_ready += c->ready;
    }
    if (!n_ready) return 0;
    /* gather window: other connected clients get up to gather_s to write too */
    double end = s->o.gather_s > 0 && n_ready < s->st.clients ? ea_now_s() + s->o.gather_s : 0;
    while (n_ready < s->st.clients && ea_now_s() < end) {
        ea_ucx_progress(s->u);
        for (int i = 0; i < s->o.max_clients; i++) {
            client *c = &s->cl[i];
            if (c->used && !c->ready && (c->ready = take_slot(s, c))) n_ready++;
        }
    }
    if (n_ready > 1) s->st.cross_client_rounds++;
    /* step 3: one run per distinct layer among the ready slots */
    for (int i = 0; i < s->o.max_clients; i++) {
        client *c = &s->cl[i];
        if (!c->ready) continue;
        int layer = c->h.layer, first = 1;
        for (int j = 0; j < i; j++) first &= !(s->cl[j].ready && s->cl[j].h.layer == layer);
        if (!first) continue;
        ea_status st = run_layer(s, layer);
        if (st != EA_OK) return (int)st;
    }
    /* step 4 */
    int answered = 0;
    for (int i = 0; i < s->o.max_clients; i++) {
        client *c = &s->cl[i];
        if (!c->ready) continue;
        c->ready = 0;
        answered += answer(s, c, EA_SLOT_COMPUTED, EA_SLOT_OK, (size_t)c->h.n_tokens * c->h.k * c->h.hidden * 4);
    }
    return answered;
}

void ea_xsrv_get_stats(const ea_xsrv *s, ea_xsrv_stats *out) { *out = s->st; }
