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
} ea_engine_opts;

typedef struct {
    ea_engine_opts o;
    ea_model *m;        /* owns */
    ea_pool *pool;      /* owns */
    ea_kctx *kctx;      /* owns */
    ea_kctx *kctx_router; /* owns: f32-activation kernels for the router when kctx rounds them (AMX) */
    ea_moe_backend *be; /* owns */
    ea_kv_cache kv;     /* owns */
    ea_forward *fw;     /* owns */
} ea_engine;

ea_status ea_engine_create(const ea_engine_opts *o, ea_engine **out);
void ea_engine_destroy(ea_engine *e);

#endif
