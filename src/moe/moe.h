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
 * ranks, ep/ep.c), `tensor` (ep/tp.c), `eaas` (remote expert servers), and
 * EPLB's wrapper (eplb/eplb_backend.c) that records routing and maps logical
 * ids to physical replicas before calling the backend inside it. The model
 * never knows which one it runs; docs/architecture.md lists who builds the
 * chain.
 *
 * Determinism contract every backend keeps: the expert function applied to
 * one token row gives the same bits whatever other rows share the call
 * (batch-invariant kernels), and the k weighted outputs of a token are added
 * in slot order j = 0..k-1 starting from 0.0f — so any backend, on any
 * number of ranks or servers, returns bit-identical y.
 *
 * The calls of a backend:
 *
 *   submit(call)        start the MoE work of one layer for one micro-batch
 *                       and return; x, ids, w and y stay the caller's until
 *                       wait returns. call.lane (0 .. lanes-1) names the
 *                       micro-batch: calls of different lanes may be in
 *                       flight at once, one per lane
 *   wait(call, out)     finish it: y is written; per-token failures in *out
 *   end_step()          after a forward step's last layer: statistics, and
 *                       EPLB's rebalancing — which may MOVE EXPERT WEIGHTS, so
 *                       callers make it visible (ea_moe_end_step)
 *   apply_placement(l, physical_to_logical, P)
 *                       from now on physical slot p of layer l computes logical
 *                       expert physical_to_logical[p] (EPLB's wrapper calls it
 *                       between forward steps; ea_moe_apply_placement)
 *   agree(v, n)         multi-rank backends: every rank gets rank 0's v[0..n)
 *                       (a collective at the same point of the step on every
 *                       rank — EPLB agrees on a requested rebalance with it)
 *   tally(v, n)         multi-rank backends whose ranks route different tokens
 *                       (data-parallel attention): v[0..n) becomes the sum
 *                       over ranks (a collective, like agree) — EPLB's
 *                       routing counts of a step, so every rank plans alike
 *   health(why)         ok / degraded (some experts cannot run) / failed
 *   stats(json, prom)   this backend's statistics, then its inner backend's
 *   lanes()             how many calls may be in flight at once (NULL: 1)
 *
 * A call is submit+wait (ea_moe_forward). With two lanes the forward pass
 * submits one micro-batch, runs attention of the other, then waits
 * (double-batch overlap, forward.c); only a backend that computes while the
 * caller goes on (remote: the expert servers) offers a second lane. A
 * backend may do all the work in submit (local, ep) or in wait.
 *
 * Two kinds of failure, and a backend says which it reports (`fails`):
 *   - a status other than EA_OK from submit or wait stops the whole forward
 *     step: a bug, bad input, or a lost lockstep (MPI: a rank did not arrive;
 *     the ranks can no longer agree, so nothing of the step is kept);
 *   - a partial failure (EA_MOE_FAILS_TOKENS backends only): some (token, slot)
 *     pairs could not run — a remote expert with no live replica. wait returns
 *     EA_OK, marks each such token in out->tok_fail and names the layer, the
 *     logical expert and the peer. The rows of the other tokens are exact
 *     (bit-identical to a run without the failure); the rows of failed tokens
 *     hold unspecified values. The scheduler fails only the requests those
 *     tokens belong to.
 *
 * Threading: submit, wait and end_step run on the step-loop thread. health
 * and stats may be called from any thread (HTTP handlers) at any time; a
 * backend guards what they read.
 */
#ifndef EA_MOE_H
#define EA_MOE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/sbuf.h"
#include "base/status.h"
#include "tensor/tensor.h"

/* One SiLU-gated FFN: y = down( silu(gate x) * (up x) ).
 * gate/up (ff, hidden), down (hidden, ff). Views; owned by the model. */
typedef struct {
    ea_tensor gate, up, down;
} ea_ffn_weights;

/* Bind n physical slots of one layer to the experts they hold:
 * slot[p] = logical[p2l[p]] (p2l NULL: logical[p]); with keep, a slot whose
 * keep[p] is 0 is left empty (gate.data NULL: not held by this process).
 * The caller has checked every p2l[p] against the number of logical experts. */
void ea_ffn_bind_slots(ea_ffn_weights *slot, const ea_ffn_weights *logical, const int32_t *p2l, const uint8_t *keep,
                       int n);

typedef struct ea_moe_backend ea_moe_backend;

/* One MoE call: x (n_tokens, hidden); ids/w (n_tokens, k) in slot order;
 * y (n_tokens, hidden) is overwritten. All borrowed from the caller. */
#define EA_MOE_MAX_LANES 2

typedef struct {
    int layer; /* model layer */
    int lane;  /* the micro-batch: 0 .. ea_moe_lanes(be) - 1 */
    const float *x;
    int n_tokens, k;
    const int32_t *ids;
    const float *w;
    float *y;
} ea_moe_call;

/* Why some tokens' experts did not run. */
typedef struct {
    int layer;    /* model layer */
    int expert;   /* LOGICAL expert id (EPLB's wrapper maps physical ids back) */
    int peer;     /* rank or server index that did not answer; -1: none */
    char why[96]; /* e.g. "no live replica" */
} ea_moe_failure;

#define EA_MOE_MAX_FAILURES 8

/* Per-token outcome of calls. The caller owns it and the tok_fail array
 * (n_tokens entries) and clears it with ea_moe_outcome_clear before a step;
 * the calls of a step's layers add to it, so a token's first failure is kept. */
typedef struct {
    int16_t *tok_fail; /* (n_tokens) -1: the token's experts all ran; else an index into fail[] */
    int n_tokens;
    int t0;            /* the row of tok_fail that a call's token 0 is (its micro-batch's first token); 0 */
    int n_failed_tokens;
    int n_fail;        /* distinct failures in fail[]; beyond EA_MOE_MAX_FAILURES the last is reused */
    ea_moe_failure fail[EA_MOE_MAX_FAILURES];
} ea_moe_outcome;

void ea_moe_outcome_clear(ea_moe_outcome *o, int n_tokens);
/* Token t of the call failed at (layer, expert, peer): marks it (if not
 * already) and records the failure, returning EA_OK. With o == NULL (a caller
 * that takes no per-token failures) returns EA_ERR_UNAVAILABLE naming the
 * expert instead; the backend returns that status. */
ea_status ea_moe_outcome_fail(ea_moe_outcome *o, int t, int layer, int expert, int peer, const char *why);

typedef enum {
    EA_MOE_FAILS_STEP,   /* every failure is a status that stops the step (local, ep, tensor) */
    EA_MOE_FAILS_TOKENS, /* can also fail single tokens (remote experts) */
} ea_moe_fail_kind;

typedef enum { EA_MOE_OK, EA_MOE_DEGRADED, EA_MOE_FAILED } ea_moe_health;

typedef struct {
    ea_status (*submit)(ea_moe_backend *be, const ea_moe_call *c);
    ea_status (*wait)(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out);
    /* Once per forward step after all layers. May be NULL. */
    void (*end_step)(ea_moe_backend *be);
    /* State, and when not OK the reason in why[0..n). May be NULL: always OK. */
    ea_moe_health (*health)(ea_moe_backend *be, char *why, size_t n);
    /* Adds a member named after the backend to json (if not NULL) and
     * Prometheus text to prom (if not NULL); wrappers then ask the inner
     * backend. May be NULL: no statistics. */
    void (*stats)(ea_moe_backend *be, json_t *json, ea_sbuf *prom);
    /* Model layer `layer`'s physical slot p now holds logical expert
     * physical_to_logical[p], p < n_physical (the backend's slots per layer).
     * Step-loop thread, between forward steps. On error the layer keeps its
     * old placement. May be NULL: the placement is fixed (EA_ERR_UNSUPPORTED). */
    ea_status (*apply_placement)(ea_moe_backend *be, int layer, const int32_t *physical_to_logical, int n_physical);
    /* Backends whose ranks run in lockstep (ep): v[0..n) becomes rank 0's values
     * on every rank; every rank calls it at the same point of a step. Collective
     * backends also make apply_placement collective: every rank switches the same
     * layer at the same step, or none does. May be NULL: one process, v kept. */
    ea_status (*agree)(ea_moe_backend *be, int64_t *v, int n);
    /* Backends whose ranks route different tokens (ep with data-parallel
     * attention): v[0..n) becomes the sum of every rank's v; every rank calls
     * it at the same point of a step. May be NULL: every rank routes the same
     * tokens, or one process: v kept. */
    ea_status (*tally)(ea_moe_backend *be, int64_t *v, int n);
    /* Calls that may be in flight at once, each on its own lane (<= EA_MOE_MAX_LANES).
     * May be NULL: 1. Wrappers answer for the backend inside them. */
    int (*lanes)(ea_moe_backend *be);
    void (*destroy)(ea_moe_backend *be);
    const char *name;
    ea_moe_fail_kind fails;
} ea_moe_backend_vtable;

struct ea_moe_backend {
    const ea_moe_backend_vtable *vt;
};

/* The vtable's submit and wait (ea_moe_wait adds the call's failures to out). */
ea_status ea_moe_submit(ea_moe_backend *be, const ea_moe_call *c);
ea_status ea_moe_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out);
/* Calls the chain may have in flight at once (the vtable's lanes). */
int ea_moe_lanes(ea_moe_backend *be);

/* submit + wait. With out == NULL a partial failure fails the whole call
 * (EA_ERR_UNAVAILABLE naming the expert). */
ea_status ea_moe_forward(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out);

/* The same, positional (the tests' and wrappers' short form; fails on any partial failure). */
static inline ea_status ea_moe_backend_forward(ea_moe_backend *be, int layer, const float *x, int n_tokens, int k,
                                               const int32_t *ids, const float *w, float *y) {
    ea_moe_call c = {.layer = layer, .x = x, .n_tokens = n_tokens, .k = k, .ids = ids, .w = w, .y = y};
    return ea_moe_forward(be, &c, NULL);
}

/* End of a forward step: statistics; under EPLB this is where a rebalance
 * moves expert weights between slots (or ranks, or servers). */
void ea_moe_end_step(ea_moe_backend *be);

/* Switch layer `layer` of be to a placement (see the vtable's apply_placement);
 * EA_ERR_UNSUPPORTED naming the backend when it cannot. */
ea_status ea_moe_apply_placement(ea_moe_backend *be, int layer, const int32_t *physical_to_logical, int n_physical);

/* v[0..n) = rank 0's values on every rank (see the vtable's agree); a no-op for one process. */
ea_status ea_moe_agree(ea_moe_backend *be, int64_t *v, int n);
/* v[0..n) = the sum over ranks that route different tokens (see the vtable's tally); else kept. */
ea_status ea_moe_tally(ea_moe_backend *be, int64_t *v, int n);

/* The chain's health: the worst state of every backend in it, with its reason. */
ea_moe_health ea_moe_backend_health(ea_moe_backend *be, char *why, size_t n);
/* The chain's statistics (see the vtable's stats). */
void ea_moe_backend_stats(ea_moe_backend *be, json_t *json, ea_sbuf *prom);

static inline void ea_moe_backend_destroy(ea_moe_backend *be) {
    if (be) be->vt->destroy(be);
}

#endif
