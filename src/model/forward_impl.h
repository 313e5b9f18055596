/*
 * forward_impl.h — the forward pass's state, shared by forward.c (the data
 * path and standard attention) and mla.c (DeepSeek's multi-head latent
 * attention). Internal to src/model/.
 */
#ifndef EA_FORWARD_IMPL_H
#define EA_FORWARD_IMPL_H

#include "model/forward.h"
#include "moe/router.h"

typedef struct {
    float *attn_norm, *ffn_norm, *q_norm, *k_norm, *bq, *bk, *bv, *router_bias;
    float *q_a_norm, *kv_a_norm;
} ea__layer_vecs;

/* What attention reads and writes for one layer (ea__attend): query row of
 * (token t, head h) at q + t*q_ts + h*q_hs (dk floats), its output at
 * o + t*o_ts + h*o_hs (dv floats); heads h = g*group .. g*group+group-1 read
 * KV head g, whose key at offset i of cache block b of the layer is element
 * b*k_block + g*k_hs + i*k_stride of the layer's part of k (and the value
 * likewise of v), elements of the cache's dtype (model/kv_cache.h). */
typedef struct {
    const float *q;
    const uint8_t *k, *v;
    float *o;
    size_t q_ts, q_hs, o_ts, o_hs, k_hs, v_hs, k_stride, v_stride, k_block, v_block;
    int dk, dv, group, n_kv_heads;
    float scale;
} ea__attn_io;

/* A tile: rows [row0, row0 + n_rows) of KV head kvh over the tokens t0, t0+1,
 * ... of one sequence; row i is token t0 + i / group, head kvh*group + i % group. */
typedef struct {
    int32_t kvh, t0, row0, n_rows;
} ea__attn_tile;

struct ea_forward {
    const ea_model *m;
    const ea_model_config *c;
    ea_kctx *kctx;
    ea_pool *pool;
    ea_moe_backend *be;
    ea_kv_cache *kv;
    ea_forward_opts o;
    ea_forward_times *times; /* borrows, or NULL: phase clocks (ea_forward_set_times) */
    ea_router router;
    int rot;          /* rotary dims per head */
    float attn_scale; /* softmax scale */
    int q_dim, kv_dim, ffn_max;
    int nh, nkv;      /* query / KV heads computed here (all of them unless o.tp) */

    ea__layer_vecs *lv; /* owns: per layer f32 copies of 1-D weights */
    float *out_norm;    /* owns */
    float *rope;        /* owns: (max_ctx, rot) */

    /* per-run scratch, owns (see the header comment) */
    float *h, *xn, *y, *q, *k, *v, *att, *rl, *w, *g, *u, *sgate, *route_scratch, *scores, *lm_x;
    int32_t *ids;
    ea_moe_outcome outcome; /* per-token MoE failures of the current run; tok_fail owns (T) */
    int n_threads;
    size_t scores_per_thread; /* floats of attention scratch per thread (kernels/attn.h) */
    ea__attn_tile *tiles;     /* owns: max_tiles */
    int max_tiles, n_tiles;
    ea__attn_io att_io;       /* the current layer's (read by the tile tasks) */

    /* MLA (deepseek): see mla.c */
    int mla, mla_expanded; /* expanded: attention through expanded K/V instead of the absorbed form */
    float *qa;             /* (T, q_lora_rank) */
    float *mla_qabs;       /* (n_heads, T, kv_lora + rope) [q_nope absorbed into latent space | q_pe] */
    float *mla_ctx;        /* (n_heads, T, kv_lora) attention output in latent space */
    float *mla_tmp;        /* (T, max(nope, v) + kv_lora) gather/scatter of one head */
    float **mla_ukt;       /* (n_layers) -> (n_heads, kv_lora, nope) f32: W_UK transposed per head */
    float *mla_lat;        /* expanded form: (max_ctx, kv_lora) latents of one sequence */
    float *mla_kv;         /* expanded form: (max_ctx, n_heads*(nope+v)) K_nope|V of one sequence */
    int32_t *mla_tok_of;   /* expanded form: (T) token rows of the current sequence */
    int mla_cur_seq, mla_cur_n;

    /* Gated DeltaNet (qwen3_next, qwen3_5_moe): see deltanet.c */
    int dn_C;                 /* conv channels 2·nk·dk + nv·dv */
    float *dn_x, *dn_c;       /* (T, C) projections [q|k|v], after conv + SiLU (then q/k normed) */
    float *dn_z, *dn_o;       /* (T, nv·dv) output gate; core output, normed in place */
    float *dn_b, *dn_a;       /* (T, nv) b then beta; a then g */
    float *dn_scratch;        /* (threads, dn_scratch_per_thread) */
    size_t dn_scratch_per_thread;
    float **dn_w;             /* (n_layers) -> per linear layer f32: taps (K, C), A_log, dt_bias (nv), norm (dv) */
    int32_t *dn_runs;         /* (T + 1) first token of each sequence's run, then n */
    int dn_n_runs;
    uint8_t *dn_seen;         /* (lin->max_seqs) */
    int32_t kv_layer[EA_MAX_LAYERS]; /* model layer -> KV cache layer (hybrids cache attention layers only) */
    float *qg, *gate;         /* gated attention: (T, 2·q_dim) raw q_proj, (T, q_dim) gate */

    /* current run (read by pool tasks) */
    int run_n, run_layer;
    const int32_t *run_pos, *run_seq;

    /* Micro-batches (double-batch overlap): the buffers above with one row per
     * token are WINDOWS — each points at its micro-batch's first token — over
     * the allocations kept here; run_pos/run_seq likewise over the run's. */
    struct {
        float *h, *xn, *y, *q, *k, *v, *att, *rl, *w, *g, *u, *sgate, *route_scratch, *qg, *gate;
        int32_t *ids;
        const int32_t *pos, *seq;
    } rows;
    int att_dim;
    ea_moe_call mb_call[EA_MOE_MAX_LANES]; /* each micro-batch's MoE call (borrowed by the backend until its wait) */
    int mb_busy[EA_MOE_MAX_LANES];         /* 1: that call is in flight */
};


/* forward.c: causal attention of the current run's tokens (attn.h tiles over the pool) */
void ea__attend(ea_forward *f, int l, int n, const ea__attn_io *io);
/* forward.c: fn over contiguous token ranges of n tokens, split over the pool */
typedef void (*ea__tok_fn)(ea_forward *f, int t0, int t1, const void *arg);
void ea__over_tokens(ea_forward *f, int n, ea__tok_fn fn, const void *arg);

/* deltanet.c */
ea_status ea__dn_create(ea_forward *f);
void ea__dn_destroy(ea_forward *f);
ea_status ea__dn_begin(ea_forward *f, int n);
void ea__dn_end(ea_forward *f, int n);
ea_status ea__deltanet(ea_forward *f, int l, int n);

/* mla.c */
ea_status ea__mla_create(ea_forward *f);
void ea__mla_destroy(ea_forward *f);
ea_status ea__mla_attention(ea_forward *f, int l, int n);

#endif
