/*
 * engine.h — everything needed to run a model in this process, built in one
 * call: the model files, a thread pool, the kernel context, the MoE backend
 * (local unless the caller supplies one), the paged KV cache and the forward
 * pass. generate, perplexity, serve and the benchmarks all start here, so
 * they size and wire things the same way.
 */
#ifndef EA_ENGINE_H
#define EA_ENGINE_H

#include <stddef.h>

#include "base/pool.h"
#include "ep/ep_engine.h"
#include "kernels/matmul.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

typedef struct {
    const char *model_path;
    int threads;        /* <= 0: CPU count */
    int max_tokens;     /* tokens per forward call (prefill chunk + decode batch) */
    int max_ctx;        /* positions per sequence; <= 0: min(model's, 4096) */
    int max_seqs;       /* sequence slots */
    size_t kv_mib;      /* KV cache size; 0: enough for max_seqs full contexts */
    int kv_blocks;      /* if > 0: exactly this many KV blocks (overrides kv_mib; tests) */
    int block_size;     /* KV block size in tokens; <= 0: 16 */
    int mla_expanded;   /* MLA models: expanded-form attention (checking only) */
    ea_dist *dist;      /* borrows: MPI context from ea_par_launch; NULL = one process */
    ea_par_mode parallel; /* EA_PAR_NONE, or expert/tensor over dist's ranks (ep/ep_engine.h) */
    /* If set: every weight is read in at load (not on first use), reporting the
     * fraction done (0..1) after each layer. */
    void (*progress)(void *ctx, double frac);
    void *progress_ctx;

    /* EPLB (docs/eplb.md "Integration"): the MoE backend becomes the eplb
     * wrapper over a local backend of physical slots. Zero = default. */
    int eplb;                   /* 1: on */
    int eplb_redundant;         /* R redundant slots (P = E + R) */
    int eplb_ranks;             /* ranks the placement spreads over; <= 0: 1 */
    int eplb_nodes;             /* <= 0: 1 */
    int eplb_rank;              /* dispatch rank of this process; -1: token t as if from rank t % ranks */
    int eplb_window;            /* <= 0: 1000 */
    int eplb_interval;          /* 0: 1000; < 0: rebalance only on request */
    double eplb_min_balancedness; /* <= 0: 0.9 */
    int eplb_layers_per_step;   /* 0: all layers in one step */
    const char *eplb_algorithm; /* "deepseek" (NULL) | "refined" */
    const char *init_expert_location; /* placement file, or NULL: trivial placement */
    int eplb_record;            /* start the dump recorder at load */
    int eplb_record_window;     /* steps the dump recorder keeps; <= 0: eplb_window */

    /* Remote experts (eaas/client.h): the monitor "host:port"; the experts run
     * on expert servers, this process loads none. NULL: experts are here. */
    const char *experts_remote;
    double expert_timeout_s;    /* an expert server's answer to one call; <= 0: 1 s */

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
    ea_forward *fw;     /* owns */
    ea_ep_engine *par;  /* owns: this rank's parallel part (NULL without --parallel) */
} ea_engine;

ea_status ea_engine_create(const ea_engine_opts *o, ea_engine **out);
void ea_engine_destroy(ea_engine *e);

#endif
