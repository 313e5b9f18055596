/*
 * moe.h — the seam between a model and its experts (DESIGN.md section 3).
 *
 * The forward pass computes routing in LOGICAL expert space — for each token
 * t, k expert ids ids[t*k + j] and weights w[t*k + j] in top-k slot order —
 * and calls a backend:
 *
 *   y[t] = sum over j in 0..k-1 (in that order) of w[t][j] * expert_{ids[t][j]}(x[t])
 *
 * Backends: `local` (all experts of this process, moe_local.c), `ep` (MPI
 * ranks), `eaas` (remote expert servers), and EPLB's wrapper that records
 * routing and maps logical ids to physical replicas before calling the next
 * backend. The model never knows which one it runs.
 *
 * Determinism contract every backend keeps: the expert function applied to
 * one token row gives the same bits whatever other rows share the call
 * (batch-invariant kernels), and the k weighted outputs of a token are added
 * in slot order j = 0..k-1 starting from 0.0f — so any backend, on any
 * number of ranks or servers, returns bit-identical y.
 */
#ifndef EA_MOE_H
#define EA_MOE_H

#include <stdint.h>

#include "base/status.h"
#include "tensor/tensor.h"

/* One SiLU-gated FFN: y = down( silu(gate x) * (up x) ).
 * gate/up (ff, hidden), down (hidden, ff). Views; owned by the model. */
typedef struct {
    ea_tensor gate, up, down;
} ea_ffn_weights;

typedef struct ea_moe_backend ea_moe_backend;

typedef struct {
    /* x (n_tokens, hidden); ids/w (n_tokens, k); y (n_tokens, hidden) is overwritten. */
    ea_status (*forward)(ea_moe_backend *be, int layer, const float *x, int n_tokens, int k,
                         const int32_t *ids, const float *w, float *y);
    /* Called once per forward step after all layers (statistics, recorders). May be NULL. */
    void (*end_step)(ea_moe_backend *be);
    void (*destroy)(ea_moe_backend *be);
    const char *name;
} ea_moe_backend_vtable;

struct ea_moe_backend {
    const ea_moe_backend_vtable *vt;
};

static inline ea_status ea_moe_backend_forward(ea_moe_backend *be, int layer, const float *x,
                                               int n_tokens, int k, const int32_t *ids,
                                               const float *w, float *y) {
    return be->vt->forward(be, layer, x, n_tokens, k, ids, w, y);
}

static inline void ea_moe_backend_destroy(ea_moe_backend *be) {
    if (be) be->vt->destroy(be);
}

#endif
