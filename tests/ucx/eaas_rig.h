/*
 * eaas_rig.h — what the expert-server tests share: random routing for a layer
 * call, and the servers' own local backend (its own pool and kernel context,
 * so the servers' thread never shares scratch with the reference backend on
 * the main thread). Header-only.
 */
#ifndef EA_EAAS_RIG_H
#define EA_EAAS_RIG_H

#include <stdint.h>

#include "eaas/server.h"
#include "model/experts.h"
#include "serve/engine.h"

/* x (nt, h) in [-2, 2]; for each token k distinct experts in [0, ne) and weights in [0.1, 1.1). */
static inline void rig_routing(uint64_t seed, int nt, int h, int k, int ne, float *x, int32_t *ids, float *w) {
    uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < nt * h; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((int)(r >> 40) % 2001 - 1000) / 500.0f;
    }
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < k; j++) {
            int e, dup;
            do {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                e = (int)((r >> 33) % (uint64_t)ne);
                dup = 0;
                for (int q = 0; q < j; q++) dup |= ids[t * k + q] == e;
            } while (dup);
            ids[t * k + j] = e;
            w[t * k + j] = 0.1f + (float)((r >> 20) % 1000) / 997.0f;
        }
}

typedef struct {
    ea_pool *pool;
    ea_kctx *kctx;
    ea_moe_backend *be;
} rig_backend;

/* A local backend over e's model for calls of up to max_tokens tokens. */
static inline ea_status rig_backend_create(const ea_engine *e, int max_tokens, rig_backend *b) {
    const ea_model_config *c = &e->m->cfg;
    int kmax = c->hidden_size > c->moe_intermediate_size ? c->hidden_size : c->moe_intermediate_size;
    EA_TRY(ea_pool_create(1, &b->pool));
    EA_TRY(ea_kctx_create(b->pool, max_tokens * c->n_experts_per_tok, kmax, &b->kctx));
    return ea_model_local_backend(e->m, b->kctx, max_tokens, NULL, 0, &b->be);
}

static inline void rig_backend_destroy(rig_backend *b) {
    ea_moe_backend_destroy(b->be);
    ea_kctx_destroy(b->kctx);
    ea_pool_destroy(b->pool);
}

/* A test's expert server: its own UCX context, serving with backend `be` the
 * experts of every layer for which hosts(server, expert, n_experts) is true. */
typedef struct {
    ea_ucx *u;
    ea_xsrv *s;
    uint8_t *hosted; /* (n_layers, n_experts) */
} rig_server;

static inline ea_status rig_server_create(rig_server *v, const ea_engine *e, ea_moe_backend *be, int server,
                                          int (*hosts)(int server, int expert, int n_experts), int max_tokens,
                                          int max_clients, double flush_deadline_s) {
    const ea_model_config *c = &e->m->cfg;
    int ne = c->n_experts;
    v->hosted = calloc((size_t)c->n_layers * ne, 1);
    if (!v->hosted) return ea_err(EA_ERR_NOMEM, "hosted mask");
    for (int l = 0; l < c->n_layers; l++)
        for (int x = 0; x < ne; x++) v->hosted[(size_t)l * ne + x] = (uint8_t)hosts(server, x, ne);
    ea_xsrv_opts o = {.experts = be,
                      .lim = {.n_layers = c->n_layers, .n_experts = ne, .hidden = c->hidden_size,
                              .max_tokens = max_tokens, .max_k = c->n_experts_per_tok, .hosted = v->hosted},
                      .max_clients = max_clients,
                      .max_batch_pairs = 64 * c->n_experts_per_tok,
                      .flush_deadline_s = flush_deadline_s};
    EA_TRY(ea_ucx_create(&v->u));
    return ea_xsrv_create(v->u, &o, &v->s);
}

static inline void rig_server_destroy(rig_server *v) {
    ea_xsrv_destroy(v->s);
    ea_ucx_destroy(v->u);
    free(v->hosted);
}

#endif
