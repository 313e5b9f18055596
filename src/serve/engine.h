/*
 * engine.h — everything needed to run a model in this process, built in one
 * call: the model files, a thread pool, the kernel context, the MoE backend
 * chain, the paged KV cache and the forward pass. generate, perplexity, serve
 * and the benchmarks all start here, so they size and wire things the same way.
 *
 * The MoE backend chain is built by one function (engine.c: moe_chain), from
 * the options below, outermost last:
 *
 *   inner backend by moe.kind   local: every expert here (model/experts.h)
 *                               ep, tp: this rank's share (ep/ep_engine.h)
 *                               remote: expert servers (eaas/client.h)
 *   -> EPLB wrapper             if eplb.on (eplb/eplb_backend.h): the inner
 *                               backend is built over its initial placement's
 *                               physical slots and switched by apply_placement
 *   -> test wrapper             if test_wrap_backend
 *
 * A new backend is one more ea_backend_kind, its nested options in
 * ea_engine_moe_opts, and one case in engine.c's inner_backend.
 */
#ifndef EA_ENGINE_H
#define EA_ENGINE_H

#include <stddef.h>

#include "base/pool.h"
#include "ep/dist.h"
#include "ep/ep_engine.h"
#include "kernels/matmul.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

/* Where the routed experts run. */
typedef enum {
    EA_BACKEND_LOCAL = 0, /* every routed expert in this process (moe/moe_local.h) */
    EA_BACKEND_EP,        /* --parallel expert: experts split over MPI ranks (ep/ep.h) */
    EA_BACKEND_TP,        /* --parallel tensor: expert FFN columns split over MPI ranks (ep/tp.h) */
    EA_BACKEND_REMOTE,    /* --experts-remote: expert servers found through a monitor (eaas/client.h) */
} ea_backend_kind;

/* The inner backend's options: one nested struct per kind; only kind's is
 * read. local has none of its own: every expert of the model, read in at
 * load (the EPLB wrapper decides its slots). */
typedef struct {
    ea_backend_kind kind;
    struct {
        ea_dist *dist; /* borrows: MPI context from ea_par_launch */
        double capacity_factor; /* combine buffers per rank, times an even share of a call's pairs
                                   (more goes in further rounds); <= 0: 1.25 */
        int dp_attention;       /* 1: every rank brings its own tokens (ea_ep_opts.dp_attention) */
    } ep;
    struct {
        ea_dist *dist; /* borrows: MPI context from ea_par_launch */
    } tp;
    struct {
        const char *monitor; /* borrows: the monitor's "host:port"; this process loads no expert */
        double timeout_s;    /* an expert server's answer to one call; <= 0: 1 s */
    } remote;
} ea_engine_moe_opts;

/* The backend of a --parallel mode from ea_par_launch: local for EA_PAR_NONE,
 * else ep or tp over dist. */
static inline ea_engine_moe_opts ea_engine_moe_parallel(ea_par_mode mode, ea_dist *dist) {
    if (mode == EA_PAR_EXPERT) return (ea_engine_moe_opts){.kind = EA_BACKEND_EP, .ep.dist = dist};
    if (mode == EA_PAR_TENSOR) return (ea_engine_moe_opts){.kind = EA_BACKEND_TP, .tp.dist = dist};
    return (ea_engine_moe_opts){.kind = EA_BACKEND_LOCAL};
}

/* EPLB (docs/eplb.md "Integration"): the chain gets the EPLB wrapper over an
 * inner backend of physical slots. Zero = default. */
typedef struct {
    int on;                   /* 1: on */
    int redundant;            /* R redundant slots (P = E + R) */
    int ranks;                /* ranks the placement spreads over; <= 0: 1 */
    int nodes;                /* <= 0: 1 */
    int rank;                 /* dispatch rank of this process; -1: token t as if from rank t % ranks */
    int window;               /* <= 0: 1000 */
    int interval;             /* 0: 1000; < 0: rebalance only on request */
    double min_balancedness;  /* <= 0: 0.9 */
    int layers_per_step;      /* 0: all layers in one step */
    const char *algorithm;    /* "deepseek" (NULL) | "refined" */
    const char *init_expert_location; /* placement file, or NULL: trivial placement */
    int record;               /* start the dump recorder at load */
    int record_window;        /* steps the dump recorder keeps; <= 0: window */
} ea_engine_eplb_opts;

typedef struct {
    const char *model_path;
    int threads;        /* <= 0: CPU count */
    int max_tokens;     /* tokens per forward call (prefill chunk + decode batch) */
    int max_ctx;        /* positions per sequence; <= 0: min(model's, 4096) */
    int max_seqs;       /* sequence slots */
    size_t kv_mib;      /* KV cache size; 0: enough for max_seqs full contexts */
    int kv_blocks;      /* if > 0: exactly this many KV blocks (overrides kv_mib; tests) */
    int block_size;     /* KV block size in tokens; <= 0: 16 */
    ea_dtype kv_dtype;  /* KV cache elements: EA_F32 (0, the default), EA_F16 or EA_BF16 */
    int mla_expanded;   /* MLA models: expanded-form attention (checking only) */
    /* Loading reports the fraction done (0..1) after each layer. */
    void (*progress)(void *ctx, double frac);
    void *progress_ctx;

    ea_engine_moe_opts moe;   /* the inner MoE backend (zero: local) */
    int dbo_min_tokens;       /* double-batch overlap (--enable-dbo): steps of this many tokens or more run as
                                 two micro-batches (ea_forward_opts); 0: off */
    ea_engine_eplb_opts eplb; /* the EPLB wrapper (zero: off) */

    /* Test hooks. test_router_bias (n_experts floats, borrowed during create):
     * added to every MoE layer's selection scores (the router's score-correction
     * bias; on top of the model's own), to make routing skewed on purpose.
     * test_wrap_backend: wraps the MoE backend (outermost); the wrapper owns inner. */
    const float *test_router_bias;
    ea_status (*test_wrap_backend)(void *ctx, ea_moe_backend *inner, ea_moe_backend **out);
    void *test_wrap_ctx;
} ea_engine_opts;

typedef struct {
    ea_engine_opts o;
    ea_model *m;        /* owns */
    ea_pool *pool;      /* owns */
    ea_kctx *kctx;      /* owns */
    ea_kctx *kctx_router; /* owns: f32-activation kernels for the router when kctx rounds them (AMX) */
    ea_moe_backend *be; /* owns */
    struct ea_eplb_backend *eplb; /* views the EPLB wrapper inside be (eplb_backend.h); NULL when off */
    float *router_bias; /* owns: test_router_bias per MoE layer (the model's router_bias views it) */
    ea_kv_cache kv;     /* owns */
    ea_lin_state lin;   /* owns: DeltaNet recurrent state per KV sequence slot (hybrid models; else empty) */
    ea_forward *fw;     /* owns */
    ea_ep_engine *par;  /* owns: this rank's parallel part (NULL without --parallel) */
} ea_engine;

ea_status ea_engine_create(const ea_engine_opts *o, ea_engine **out);
void ea_engine_destroy(ea_engine *e);

#endif
