/*
 * engine.c — see engine.h. Order matters for error messages: the model is
 * opened first (its errors name files and tensors), then the runtime parts
 * are sized from its config.
 */
#include "serve/engine.h"

#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "eaas/client.h"
#include "ep/ep.h"
#include "eplb/eplb_backend.h"
#include "model/experts.h"

void ea_engine_destroy(ea_engine *e) {
    if (!e) return;
    ea_forward_destroy(e->fw);
    ea_kv_deinit(&e->kv);
    ea_lin_state_deinit(&e->lin);
    ea_moe_backend_destroy(e->be);
    ea_ep_engine_destroy(e->par);
    ea_kctx_destroy(e->kctx_router);
    ea_kctx_destroy(e->kctx);
    ea_pool_destroy(e->pool);
    ea_model_close(e->m);
    ea_free(e->router_bias);
    ea_free(e);
}

/* test_router_bias: each MoE layer's router_bias becomes (model's bias or 0) + the test bias */
static ea_status apply_test_router_bias(ea_engine *e) {
    const float *tb = e->o.test_router_bias;
    if (!tb) return EA_OK;
    const ea_model_config *c = &e->m->cfg;
    int E = c->n_experts;
    e->router_bias = ea_calloc((size_t)c->n_layers * (size_t)E, sizeof(float));
    if (!e->router_bias) return ea_err(EA_ERR_NOMEM, "test router bias");
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->layer_is_moe[l]) continue;
        ea_tensor *t = &e->m->layers[l].router_bias;
        float *b = e->router_bias + (size_t)l * E;
        if (t->data) {
            if (ea_tensor_nelem(t) != E) return ea_err(EA_ERR_FORMAT, "layer %d router bias: %lld values, %d experts", l,
                                                       (long long)ea_tensor_nelem(t), E);
            ea_dtypes[t->dtype].to_f32(t->data, b, (size_t)E);
        }
        for (int i = 0; i < E; i++) b[i] += tb[i];
        *t = (ea_tensor){.name = "test_router_bias", .dtype = EA_F32, .n_dims = 1, .shape = {E}, .data = b,
                         .nbytes = sizeof(float) * (size_t)E};
    }
    return EA_OK;
}

/* The engine's EPLB options (zero = default) as the wrapper's. */
static ea_status eplb_opts(const ea_engine *e, ea_eplb_backend_opts *o) {
    const ea_model_config *c = &e->m->cfg;
    const ea_engine_eplb_opts *eo = &e->o.eplb;
    ea_eplb_backend_opts_default(o);
    o->n_layers = c->n_layers;
    o->layer_is_moe = c->layer_is_moe;
    o->n_logical = c->n_experts;
    o->max_tokens = e->o.max_tokens;
    o->max_k = c->n_experts_per_tok;
    o->n_redundant = eo->redundant;
    if (eo->ranks > 0) o->n_ranks = eo->ranks;
    if (eo->nodes > 0) o->n_nodes = eo->nodes;
    o->n_groups = c->n_group > 1 ? c->n_group : 1;
    o->rank = eo->rank;
    o->init_location = eo->init_expert_location;
    if (eo->window > 0) o->window = eo->window;
    if (eo->interval != 0) o->interval = eo->interval > 0 ? eo->interval : 0;
    if (eo->min_balancedness > 0) o->min_balancedness = eo->min_balancedness;
    o->layers_per_step = eo->layers_per_step;
    if (e->o.moe.kind == EA_BACKEND_EP) { /* the placement spreads over the job's ranks */
        int N = ea_dist_size(e->o.moe.ep.dist);
        if (eo->ranks > 0 && eo->ranks != N)
            return ea_err(EA_ERR_INVALID_ARG, "--eplb-ranks %d: under --parallel expert the placement spreads over "
                          "the job's %d ranks", eo->ranks, N);
        if ((c->n_experts + eo->redundant) % N)
            return ea_err(EA_ERR_INVALID_ARG, "--parallel expert --eplb: %d experts + %d redundant slots do not split "
                          "evenly over %d ranks; give --eplb-redundant R with (%d + R) %% %d == 0",
                          c->n_experts, eo->redundant, N, c->n_experts, N);
        o->n_ranks = N;
        /* replicated attention: every rank maps a token to the same replica (ep needs the same ids
         * everywhere); data-parallel: a rank's own tokens go to the replica nearest to it */
        o->rank = e->o.moe.ep.dp_attention ? ea_dist_rank(e->o.moe.ep.dist) : -1;
    }
    o->record = eo->record;
    o->record_window = eo->record_window;
    return eo->algorithm ? ea_eplb_algo_parse(eo->algorithm, &o->algo) : EA_OK;
}

/* Local and remote: read now, layer by layer (into huge-page memory, see
 * model.c), every weight this process computes with — the routed experts too
 * when they are local — and say how far it got. ep and tp read only each
 * rank's share, in ea_ep_engine_setup, rank 0 included. Before the test
 * router bias replaces the router_bias views (the fingerprint hashes what is
 * loaded). */
static ea_status load_here(ea_engine *e) {
    const ea_model_config *c = &e->m->cfg;
    int experts = e->o.moe.kind == EA_BACKEND_LOCAL;
    EA_TRY(ea_model_load_dense(e->m));
    if (e->o.progress) e->o.progress(e->o.progress_ctx, 0.0);
    for (int l = 0; l < c->n_layers; l++) {
        if (c->layer_is_moe[l] && experts) EA_TRY(ea_model_load_experts(e->m, l, NULL));
        if (e->o.progress) e->o.progress(e->o.progress_ctx, (double)(l + 1) / c->n_layers);
    }
    return EA_OK;
}

/* ep, tp: this rank's share is read in and its backend built (ep/ep_engine.c),
 * rank 0 included; ep holds the slots of place (EPLB's; NULL: one per expert). */
static ea_status parallel_backend(ea_engine *e, ea_dist *dist, ea_par_mode mode, const ea_eplb_meta *place,
                                  ea_moe_backend **out) {
    const ea_engine_opts *o = &e->o;
    if (o->progress) o->progress(o->progress_ctx, 0.0);
    ea_ep_engine_opts po = {.max_tokens = o->max_tokens, .place = place,
                            .capacity_factor = o->moe.ep.capacity_factor, .dp_attention = o->moe.ep.dp_attention};
    EA_TRY(ea_ep_engine_setup(dist, mode, e->m, e->kctx, &po, &e->par));
    if (o->progress) o->progress(o->progress_ctx, 1.0);
    *out = ea_ep_engine_take_backend(e->par);
    ea_ep_engine_print_plan(e->par, stderr);
    return EA_OK;
}

/* remote: expert servers found through the monitor (eaas/client.h); this process holds no expert. */
static ea_status remote_backend(ea_engine *e, ea_moe_backend **out) {
    const ea_model_config *c = &e->m->cfg;
    ea_eaas_client_opts co = {.monitor = e->o.moe.remote.monitor, .arch = ea_arch_names[c->arch],
                              .n_layers = c->n_layers, .n_experts = c->n_experts, .hidden = c->hidden_size,
                              .max_tokens = e->o.max_tokens, .max_k = c->n_experts_per_tok,
                              .timeout_s = e->o.moe.remote.timeout_s,
                              .lanes = e->o.dbo_min_tokens > 0 ? 2 : 1};
    return ea_eaas_client_create(&co, out);
}

/* The inner backend by kind; place: EPLB's initial placement, whose slots it
 * holds (NULL without EPLB: one slot per expert). */
static ea_status inner_backend(ea_engine *e, const ea_eplb_meta *place, ea_moe_backend **out) {
    const ea_engine_moe_opts *mo = &e->o.moe;
    switch (mo->kind) {
    case EA_BACKEND_LOCAL: /* the weights were read in by load_here */
        return ea_model_local_backend(e->m, e->kctx, e->o.max_tokens, place ? place->phy2log : NULL,
                                      place ? place->n_physical : 0, out);
    case EA_BACKEND_EP: return parallel_backend(e, mo->ep.dist, EA_PAR_EXPERT, place, out);
    case EA_BACKEND_TP: return parallel_backend(e, mo->tp.dist, EA_PAR_TENSOR, NULL, out);
    case EA_BACKEND_REMOTE: return remote_backend(e, out);
    }
    return ea_err(EA_ERR_INVALID_ARG, "unknown MoE backend kind %d", (int)mo->kind);
}

/* The MoE backend chain (engine.h): inner backend, EPLB wrapper, test wrapper. */
static ea_status moe_chain(ea_engine *e) {
    const ea_engine_opts *o = &e->o;
    ea_eplb_backend_opts bo;
    ea_eplb_meta place = {0};
    /* the local backend rebinds slots, ep moves weights between ranks; remote experts are balanced by the
     * monitor's replicas of hot experts instead (docs/protocol.md), tp takes no placement yet */
    if (o->eplb.on && o->moe.kind == EA_BACKEND_REMOTE)
        return ea_err(EA_ERR_UNSUPPORTED,
                      "--eplb with --experts-remote: remote experts are balanced by the monitor instead, which "
                      "places replicas of hot experts on expert servers started with --replica-slots N "
                      "(eaas monitor --replicate-ms)");
    if (o->eplb.on && o->moe.kind != EA_BACKEND_LOCAL && o->moe.kind != EA_BACKEND_EP)
        return ea_err(EA_ERR_UNSUPPORTED, "--eplb with --parallel tensor is not supported yet");
    if (o->eplb.on) {
        EA_TRY(eplb_opts(e, &bo));
        EA_TRY(ea_eplb_initial_placement(&bo, &place));
    }
    ea_status s = inner_backend(e, o->eplb.on ? &place : NULL, &e->be);
    if (s == EA_OK && o->eplb.on) {
        ea_moe_backend *inner = e->be;
        e->be = NULL;
        if ((s = ea_eplb_backend_create(&bo, &place, inner, &e->eplb)) == EA_OK) e->be = ea_eplb_backend_moe(e->eplb);
    }
    ea_eplb_meta_deinit(&place);
    if (s != EA_OK || !o->test_wrap_backend) return s;
    ea_moe_backend *outer;
    EA_TRY(o->test_wrap_backend(o->test_wrap_ctx, e->be, &outer));
    e->be = outer;
    return EA_OK;
}

ea_status ea_engine_create(const ea_engine_opts *o, ea_engine **out) {
    *out = NULL;
    ea_engine *e = ea_calloc(1, sizeof *e);
    if (!e) return ea_err(EA_ERR_NOMEM, "engine");
    e->o = *o;
    ea_engine_opts *eo = &e->o;
    ea_status s = ea_model_open(o->model_path, &e->m);
    if (s != EA_OK) goto fail;
    const ea_model_config *c = &e->m->cfg;
    int here = eo->moe.kind == EA_BACKEND_LOCAL || eo->moe.kind == EA_BACKEND_REMOTE;
    if (here && (s = load_here(e)) != EA_OK) goto fail;
    if (eo->max_tokens <= 0) eo->max_tokens = 512;
    if (eo->max_seqs <= 0) eo->max_seqs = 1;
    if (eo->block_size <= 0) eo->block_size = 16;
    if (eo->max_ctx <= 0) eo->max_ctx = c->max_position_embeddings > 0 && c->max_position_embeddings < 4096
                                            ? c->max_position_embeddings : 4096;
    if ((s = ea_pool_create(eo->threads, &e->pool)) != EA_OK) goto fail;

    int max_k = c->hidden_size;
    int dims[] = {c->n_heads * c->head_dim, c->intermediate_size, c->moe_intermediate_size,
                  c->shared_expert_intermediate_size, c->n_shared_experts * c->moe_intermediate_size,
                  c->kv_lora_rank, c->q_lora_rank, c->n_heads * c->v_head_dim, c->lin_n_v_heads * c->lin_v_dim};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > max_k) max_k = dims[i];
    /* the largest product: a call's tokens, or under ep an expert's (every rank's with dp attention) */
    int max_m = eo->moe.kind == EA_BACKEND_EP ? ea_ep_expert_max_tokens(eo->max_tokens, ea_dist_size(eo->moe.ep.dist),
                                                                        eo->moe.ep.dp_attention)
                                              : eo->max_tokens;
    if ((s = ea_kctx_create(e->pool, max_m, max_k, &e->kctx)) != EA_OK) goto fail;
    /* AMX and avx512_bf16 round activations to bf16; the router gets exact f32 activations (docs/forward.md) */
    if (ea_kctx_rounds_x(e->kctx)) {
        if ((s = ea_kctx_create(e->pool, eo->max_tokens, max_k, &e->kctx_router)) != EA_OK) goto fail;
        const char *alt = ea_k_isa_supported("avx512") ? "avx512" : ea_k_isa_supported("avx2") ? "avx2" : "scalar";
        if ((s = ea_kctx_set_isa(e->kctx_router, alt)) != EA_OK) goto fail;
    }
    if ((s = apply_test_router_bias(e)) != EA_OK) goto fail;
    if ((s = moe_chain(e)) != EA_OK) goto fail;

    int kd, vd, kh;
    const ea_forward_tp *tp = e->par ? ea_ep_engine_forward_tp(e->par) : NULL;
    ea_forward_kv_dims(c, tp, &kd, &vd, &kh);
    int kv_layers = ea_forward_kv_layers(c); /* hybrids: the full-attention layers only */
    size_t per_block = ea_kv_bytes_per_block(eo->kv_dtype, kv_layers, kd, vd, eo->block_size);
    int blocks_full = eo->max_seqs * ((eo->max_ctx + eo->block_size - 1) / eo->block_size);
    /* hybrids: --kv-cache-mib pays for the sequences' recurrent state first (docs/serving.md "Memory") */
    size_t state_bytes = ea_lin_state_bytes_per_seq(c) * (size_t)eo->max_seqs, budget = eo->kv_mib << 20;
    int n_blocks = eo->kv_blocks > 0 ? eo->kv_blocks
                   : eo->kv_mib ? (budget > state_bytes ? (int)((budget - state_bytes) / per_block) : 0) : blocks_full;
    if (n_blocks < 1) {
        s = ea_err(EA_ERR_INVALID_ARG, "KV cache of %zu MiB holds no block of %zu bytes%s", eo->kv_mib, per_block,
                   state_bytes ? " after the recurrent state of every sequence slot" : "");
        goto fail;
    }
    if (state_bytes)
        EA_LOGI("memory plan: KV cache %d blocks x %d tokens (%.1f MiB) + recurrent state %d slots x %.1f KiB "
                "(%.1f MiB); a prefix-cache state snapshot takes %zu KV blocks", n_blocks, eo->block_size,
                (double)per_block * n_blocks / (1 << 20), eo->max_seqs,
                (double)ea_lin_state_bytes_per_seq(c) / 1024.0, (double)state_bytes / (1 << 20),
                (ea_lin_state_bytes_per_seq(c) + per_block - 1) / per_block);
    if ((s = ea_kv_init(&e->kv, eo->kv_dtype, kv_layers, kd, vd, kh, n_blocks, eo->block_size, eo->max_seqs,
                        eo->max_ctx)) != EA_OK)
        goto fail;
    if (c->n_linear_layers > 0 && (s = ea_lin_state_init(&e->lin, c, eo->max_seqs)) != EA_OK) goto fail;
    if ((long long)n_blocks * eo->block_size < eo->max_ctx)
        EA_LOGW("the KV cache holds %lld tokens (%d blocks of %d), less than one full context of %d tokens: requests "
                "whose prompt + max_tokens exceed %lld are refused; for full contexts give --kv-cache-mib %zu or more",
                (long long)n_blocks * eo->block_size, n_blocks, eo->block_size, eo->max_ctx,
                (long long)n_blocks * eo->block_size,
                (size_t)(((size_t)((eo->max_ctx + eo->block_size - 1) / eo->block_size) * per_block + (1u << 20) - 1) >> 20));
    ea_forward_opts fo = {.max_tokens = eo->max_tokens, .max_ctx = eo->max_ctx, .kctx_router = e->kctx_router,
                         .mla_expanded = eo->mla_expanded, .tp = tp,
                         .lin = c->n_linear_layers > 0 ? &e->lin : NULL, .dbo_min_tokens = eo->dbo_min_tokens};
    if ((s = ea_forward_create(e->m, e->kctx, e->pool, e->be, &e->kv, &fo, &e->fw)) != EA_OK) goto fail;
    EA_LOGD("engine: %s, %d threads, isa %s, kv %s %d blocks x %d tokens (%.1f MiB)", ea_arch_names[c->arch],
            ea_pool_size(e->pool), ea_kctx_isa(e->kctx), ea_dtypes[eo->kv_dtype].name, n_blocks, eo->block_size,
            (double)per_block * n_blocks / (1 << 20));
    *out = e;
    return EA_OK;
fail:
    ea_engine_destroy(e);
    return s;
}
