/*
 * make_model_hybrid.c — `eaas make-model` for the hybrid families qwen3_next
 * (Qwen3-Next-80B-A3B) and qwen3_5_moe (the text part of Qwen3.5-397B-A17B):
 * presets, the tensor plan and config.json.
 *
 * Layer l is gated full attention when (l + 1) % full_attention_interval == 0,
 * Gated DeltaNet ("linear attention") otherwise; every layer is MoE (softmax
 * router, top-k renormalised, one shared expert behind a sigmoid gate).
 * Tensor names are the published checkpoints' (transformers' modeling files):
 *
 *   qwen3_next   model.layers.L.linear_attn.in_proj_qkvz   (2·nk·dk + 2·nv·dv, H)  grouped per key head
 *                                         .in_proj_ba      (2·nv, H)               grouped per key head
 *                mlp.experts.E.{gate,up,down}_proj.weight  one tensor per expert
 *   qwen3_5_moe  model.language_model.layers.L.linear_attn.in_proj_qkv (2·nk·dk + nv·dv, H),
 *                .in_proj_z (nv·dv, H), .in_proj_b (nv, H), .in_proj_a (nv, H)
 *                mlp.experts.gate_up_proj (E, 2·F, H) — gate rows first — and
 *                mlp.experts.down_proj (E, H, F): the experts stacked, as Qwen3.5 ships them
 *   both         linear_attn.conv1d.weight (C, 1, K), C = 2·nk·dk + nv·dv;
 *                linear_attn.dt_bias (nv), A_log (nv), norm.weight (dv), out_proj (H, nv·dv);
 *                self_attn.q_proj (2·nh·hd, H) — per head query then gate —, k/v/o_proj,
 *                q_norm/k_norm (hd); mlp.gate, mlp.shared_expert.*, mlp.shared_expert_gate (1, H)
 *
 * Values: the RMSNorms that scale by (1 + weight) (layer norms, q/k norms, the
 * final norm) get zero-centred weights (init NORM0); the DeltaNet output norm
 * multiplies by its plain weight (NORM, one-centred). A_log in (-1, 1) gives
 * A = exp(A_log) in (0.37, 2.7) (the published init draws A from (0, 16));
 * dt_bias in (-0.1, 0.1); conv1d 1/sqrt(K) as PyTorch's Conv1d init.
 *
 * GGUF (ea__mm_gguf_plan_hybrid): what llama.cpp's convert_hf_to_gguf.py writes
 * for these directories (Qwen2MoeModel -> Qwen3NextModel, and for Qwen3.5
 * _LinearAttentionVReorderBase), tensor by tensor in HF name order:
 *
 *   HF (under layers.L.)                 GGUF (blk.L.)                 what the converter does
 *   input_layernorm                      attn_norm.weight              + 1 (F32)
 *   post_attention_layernorm             post_attention_norm.weight    + 1 (F32)
 *   self_attn.{q,k,v,o}_proj             attn_{q,k,v,output}.weight
 *   self_attn.{q,k}_norm                 attn_{q,k}_norm.weight        + 1 (F32)
 *   linear_attn.in_proj_qkvz (next)      attn_qkv + attn_gate          regrouped [q|k|v], z
 *   linear_attn.in_proj_ba (next)        ssm_ba.weight                 as is (grouped per key head)
 *   linear_attn.in_proj_qkv/z/b/a (3.5)  attn_qkv, attn_gate, ssm_beta, ssm_alpha   V heads tiled
 *   linear_attn.conv1d (C, 1, K)         ssm_conv1d.weight ne [K, C]   squeezed, F32 (3.5: V channels tiled)
 *   linear_attn.dt_bias                  ssm_dt.bias                   F32 (3.5: tiled)
 *   linear_attn.A_log                    ssm_a                         -exp(A_log), F32 (3.5: tiled)
 *   linear_attn.norm                     ssm_norm.weight               as is (F32)
 *   linear_attn.out_proj                 ssm_out.weight                (3.5: column blocks tiled)
 *   mlp.gate                             ffn_gate_inp.weight           F32
 *   mlp.experts.E.* (next)               ffn_{down,gate,up}_exps       stacked at the last one
 *   mlp.experts.gate_up_proj (3.5)       ffn_gate_exps, ffn_up_exps    split (gate rows first)
 *   mlp.experts.down_proj (3.5)          ffn_down_exps
 *   mlp.shared_expert.*, _gate           ffn_*_shexp, ffn_gate_inp_shexp (H)
 *   model.norm / embed_tokens / lm_head  output_norm (+ 1) / token_embd / output
 *
 * "Tiled" (when nv != nk): value head v of key head g moves from g*r + v to v*nk + g.
 * The + 1 and -exp are computed as torch does them: in f32 (bf16 is widened to f32
 * first), in f16 for an f16 checkpoint — so f16 GGUF norms and ssm_a are rounded to
 * f16 once more, and only f32 and bf16 GGUF copies equal their HF model bit for bit.
 *
 * No Qwen3.5 tokenizer ships in any package reachable here: both families get
 * the Qwen3 tokenizer and its vocabulary (151936). A real Qwen3.5 checkpoint
 * brings its own tokenizer.json (vocab 248320), which the loader takes as is.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#include "cli/make_model_meta.h"
#include "cli/make_model_plan.h"

int ea__mm_is_hybrid(ea_mm_family f) { return f == EA_MM_QWEN3_NEXT || f == EA_MM_QWEN3_5_MOE; }

void ea__mm_hybrid_preset(ea_mm_shape *s, int bench) {
    s->norm_topk_prob = 1;
    s->qk_norm = 1;
    s->max_pos = 262144;
    s->rope_theta = 10000000.0;
    s->full_interval = 4;
    s->lin_conv = 4;
    s->partial_rotary = 0.25;
    if (bench) { /* ~2 B parameters, Qwen3-Next's ratios: 2 KV heads, value heads twice the key heads */
        s->n_layers = 24;
        s->hidden = 1024;
        s->n_heads = 16;
        s->n_kv_heads = 2;
        s->head_dim = 128;
        s->lin_nk = 8;
        s->lin_nv = 16;
        s->lin_dk = 64;
        s->lin_dv = 64;
        s->n_experts = 64;
        s->top_k = 8;
        s->moe_intermediate = 384;
        s->shared_intermediate = 384;
    } else { /* 3 DeltaNet layers then one full-attention layer */
        s->n_layers = 4;
        s->hidden = 64;
        s->n_heads = 4;
        s->n_kv_heads = 2;
        s->head_dim = 16;
        s->lin_nk = 2;
        s->lin_nv = 4;
        s->lin_dk = 16;
        s->lin_dv = 16;
        s->n_experts = 16;
        s->top_k = 8;
        s->moe_intermediate = 32;
        s->shared_intermediate = 64;
    }
    s->intermediate = s->moe_intermediate; /* no dense layers; written to config.json as the published do */
}

static ea_status add3(ea__mm_plan *p, const char *name, int64_t d0, int64_t d1, int64_t d2, double scale) {
    EA_TRY(ea__mm_add(p, name, "", 3, d0, d1, EA__MM_MAT));
    p->v[p->n - 1].shape[2] = d2;
    p->v[p->n - 1].scale = scale;
    return EA_OK;
}

ea_status ea__mm_build_hybrid(const ea_mm_shape *s, ea__mm_plan *p) {
    const int q35 = s->family == EA_MM_QWEN3_5_MOE;
    const char *root = q35 ? "model.language_model" : "model";
    const int64_t H = s->hidden, nh = s->n_heads, nkv = s->n_kv_heads, hd = s->head_dim, E = s->n_experts;
    const int64_t nk = s->lin_nk, nv = s->lin_nv, dk = s->lin_dk, dv = s->lin_dv, F = s->moe_intermediate;
    const int64_t conv = 2 * nk * dk + nv * dv;
    char n[96], pre[96];
#define NM(fmt) (snprintf(n, sizeof n, "%s.layers.%d." fmt, root, l), n)
#define ADD(name, nd, d0, d1, init) EA_TRY(ea__mm_add(p, name, "", nd, d0, d1, init))
    snprintf(n, sizeof n, "%s.embed_tokens.weight", root);
    ADD(n, 2, s->vocab, H, EA__MM_EMB);
    for (int l = 0; l < s->n_layers; l++) {
        ADD(NM("input_layernorm.weight"), 1, H, 0, EA__MM_NORM0);
        ADD(NM("post_attention_layernorm.weight"), 1, H, 0, EA__MM_NORM0);
        if ((l + 1) % s->full_interval == 0) {
            ADD(NM("self_attn.q_proj.weight"), 2, 2 * nh * hd, H, EA__MM_MAT);
            ADD(NM("self_attn.k_proj.weight"), 2, nkv * hd, H, EA__MM_MAT);
            ADD(NM("self_attn.v_proj.weight"), 2, nkv * hd, H, EA__MM_MAT);
            ADD(NM("self_attn.o_proj.weight"), 2, H, nh * hd, EA__MM_MAT);
            ADD(NM("self_attn.q_norm.weight"), 1, hd, 0, EA__MM_NORM0);
            ADD(NM("self_attn.k_norm.weight"), 1, hd, 0, EA__MM_NORM0);
        } else {
            if (q35) {
                ADD(NM("linear_attn.in_proj_qkv.weight"), 2, conv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_z.weight"), 2, nv * dv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_b.weight"), 2, nv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_a.weight"), 2, nv, H, EA__MM_MAT);
            } else {
                ADD(NM("linear_attn.in_proj_qkvz.weight"), 2, conv + nv * dv, H, EA__MM_MAT);
                ADD(NM("linear_attn.in_proj_ba.weight"), 2, 2 * nv, H, EA__MM_MAT);
            }
            EA_TRY(add3(p, NM("linear_attn.conv1d.weight"), conv, 1, s->lin_conv, 1.0 / sqrt((double)s->lin_conv)));
            ADD(NM("linear_attn.dt_bias"), 1, nv, 0, EA__MM_BIAS);
            ADD(NM("linear_attn.A_log"), 1, nv, 0, EA__MM_BIAS);
            p->v[p->n - 1].scale = 1.0;
            ADD(NM("linear_attn.norm.weight"), 1, dv, 0, EA__MM_NORM);
            ADD(NM("linear_attn.out_proj.weight"), 2, H, nv * dv, EA__MM_MAT);
        }
        ADD(NM("mlp.gate.weight"), 2, E, H, EA__MM_MAT);
        if (q35) {
            EA_TRY(add3(p, NM("mlp.experts.gate_up_proj"), E, 2 * F, H, 1.0 / sqrt((double)H)));
            p->v[p->n - 1].fused_experts = (int)E;
            EA_TRY(add3(p, NM("mlp.experts.down_proj"), E, H, F, 1.0 / sqrt((double)F)));
            p->v[p->n - 1].fused_experts = (int)E;
        } else {
            static const char *const kn[3] = {"gate_proj", "up_proj", "down_proj"};
            for (int e = 0; e < E; e++)
                for (int k = 0; k < 3; k++) {
                    snprintf(n, sizeof n, "%s.layers.%d.mlp.experts.%d.%s.weight", root, l, e, kn[k]);
                    if (k == EA__MM_DOWN) ADD(n, 2, H, F, EA__MM_MAT);
                    else ADD(n, 2, F, H, EA__MM_MAT);
                    p->v[p->n - 1].layer = l;
                    p->v[p->n - 1].expert = e;
                    p->v[p->n - 1].ekind = k;
                }
        }
        snprintf(pre, sizeof pre, "%s.layers.%d.mlp.shared_expert", root, l);
        EA_TRY(ea__mm_add_ffn(p, l, pre, "_shexp", s->shared_intermediate, (int)H));
        ADD(NM("mlp.shared_expert_gate.weight"), 2, 1, H, EA__MM_MAT);
    }
    snprintf(n, sizeof n, "%s.norm.weight", root);
    ADD(n, 1, H, 0, EA__MM_NORM0);
    ADD("lm_head.weight", 2, s->vocab, H, EA__MM_MAT);
#undef NM
#undef ADD
    return EA_OK;
}

/* M-RoPE sections (t, h, w, pad) in rotary pairs: Qwen3.5's [11, 11, 10] of 32 pairs,
 * scaled to the preset's rotary dims (tiny: 4 dims, [1, 1, 0]; llama.cpp asserts that
 * the sections fit the rotary dims) */
void ea__mm_mrope_sections(const ea_mm_shape *s, int32_t sec[4]) {
    int32_t pairs = (int32_t)(s->head_dim * s->partial_rotary) / 2, a = (pairs * 11 + 16) / 32;
    sec[0] = sec[1] = a;
    sec[2] = pairs - 2 * a;
    sec[3] = 0;
}

/* ---- GGUF ---- */

enum { HR_ID = 0, HR_QKV, HR_Z, HR_TILE, HR_GATE, HR_UP };
enum { HC_ID = 0, HC_TILE };
enum { HV_NONE = 0, HV_PLUS1, HV_NEGEXP };

/* index x of a tiled run [off, off + nv*hd) -> its grouped (HF) index */
static int64_t untile(const ea_mm_shape *s, int64_t x, int64_t off, int64_t hd) {
    if (x < off) return x;
    int64_t nk = s->lin_nk, r = s->lin_nv / s->lin_nk, j = (x - off) / hd, i = (x - off) % hd;
    return off + ((j % nk) * r + j / nk) * hd + i;
}

void ea__mm_hybrid_row(const ea_mm_shape *s, const ea__mm_plan *p, const ea__mm_gt *t, int64_t r, float *out,
                       ea_dtype round) {
    const ea__mm_src *src = &p->v[t->src];
    const int64_t ne0 = t->ne[0], dk = s->lin_dk, rv = (int64_t)(s->lin_nv / s->lin_nk) * s->lin_dv;
    const int64_t grp = 2 * dk + 2 * rv, kd = (int64_t)s->lin_nk * dk; /* in_proj_qkvz: per key head [q|k|v|z] */
    int64_t sr = r;
    switch (t->rmap) {
    case HR_QKV:
        sr = r < kd ? (r / dk) * grp + r % dk
           : r < 2 * kd ? ((r - kd) / dk) * grp + dk + (r - kd) % dk
           : ((r - 2 * kd) / rv) * grp + 2 * dk + (r - 2 * kd) % rv;
        break;
    case HR_Z: sr = (r / rv) * grp + 2 * dk + rv + r % rv; break;
    case HR_TILE: sr = untile(s, r, t->off, t->hd); break;
    case HR_GATE: sr = (r / t->hd) * 2 * t->hd + r % t->hd; break;
    case HR_UP: sr = (r / t->hd) * 2 * t->hd + t->hd + r % t->hd; break;
    default: break;
    }
    if (t->cmap == HC_TILE)
        for (int64_t j = 0; j < ne0; j++) ea__mm_gen(src, (uint64_t)(sr * ne0 + untile(s, j, 0, t->hd)), 1, &out[j], round);
    else
        ea__mm_gen(src, (uint64_t)(sr * ne0), (size_t)ne0, out, round);
    if (t->vt == HV_NONE) return;
    for (int64_t j = 0; j < ne0; j++) {
        float v = t->vt == HV_PLUS1 ? out[j] + 1.0f : -expf(out[j]);
        out[j] = round == EA_F16 ? ea_f16_to_f32(ea_f32_to_f16(v)) : v; /* torch keeps an f16 tensor in f16 */
    }
}

/* one HF name -> GGUF tensor(s) */
typedef struct {
    const char *hf, *gguf;
    int rmap, cmap, vt;
} hmap;

static const hmap hmaps[] = {
    {"input_layernorm.weight", "attn_norm.weight", HR_ID, HC_ID, HV_PLUS1},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", HR_ID, HC_ID, HV_PLUS1},
    {"self_attn.q_proj.weight", "attn_q.weight", 0, 0, 0},
    {"self_attn.k_proj.weight", "attn_k.weight", 0, 0, 0},
    {"self_attn.v_proj.weight", "attn_v.weight", 0, 0, 0},
    {"self_attn.o_proj.weight", "attn_output.weight", 0, 0, 0},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", HR_ID, HC_ID, HV_PLUS1},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", HR_ID, HC_ID, HV_PLUS1},
    {"linear_attn.in_proj_ba.weight", "ssm_ba.weight", 0, 0, 0},
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight", HR_TILE, 0, 0},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight", HR_TILE, 0, 0},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight", HR_TILE, 0, 0},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight", HR_TILE, 0, 0},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight", HR_TILE, 0, 0},
    {"linear_attn.dt_bias", "ssm_dt.bias", 0, HC_TILE, 0},
    {"linear_attn.A_log", "ssm_a", 0, HC_TILE, HV_NEGEXP},
    {"linear_attn.norm.weight", "ssm_norm.weight", 0, 0, 0},
    {"linear_attn.out_proj.weight", "ssm_out.weight", 0, HC_TILE, 0},
    {"mlp.gate.weight", "ffn_gate_inp.weight", 0, 0, 0},
    {"mlp.experts.down_proj", "ffn_down_exps.weight", 0, 0, 0},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", 0, 0, 0},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", 0, 0, 0},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", 0, 0, 0},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", 0, 0, 0},
};

static ea_status push(ea__mm_gplan *g, const ea_mm_shape *s, const ea__mm_src *t, int i, const char *name, int rmap,
                      int cmap, int vt, ea_dtype want) {
    const int tiled = s->family == EA_MM_QWEN3_5_MOE && s->lin_nv != s->lin_nk;
    const int64_t C = 2 * (int64_t)s->lin_nk * s->lin_dk + (int64_t)s->lin_nv * s->lin_dv;
    int64_t shp[3] = {t->shape[0], t->shape[1], t->shape[2]};
    int nd = t->n_dims;
    if (rmap == HR_QKV) shp[0] = C;
    if (rmap == HR_Z) shp[0] = (int64_t)s->lin_nv * s->lin_dv;
    if (rmap == HR_GATE || rmap == HR_UP) shp[1] /= 2;
    EA_TRY(ea__mm_gpush(g, name, EA__GT_HYB, i, nd, shp, want));
    ea__mm_gt *o = &g->v[g->n - 1];
    o->rmap = rmap;
    o->cmap = tiled ? cmap : HC_ID;
    o->vt = vt;
    o->hd = s->lin_dv;
    if (rmap == HR_TILE) {
        if (!tiled) o->rmap = HR_ID;
        if (strstr(name, "attn_qkv") || strstr(name, "ssm_conv1d")) o->off = C - (int64_t)s->lin_nv * s->lin_dv;
        if (strstr(name, "ssm_beta") || strstr(name, "ssm_alpha")) o->hd = 1;
    }
    if (cmap == HC_TILE && nd == 1) o->hd = 1; /* ssm_dt, ssm_a: one value per head */
    if (rmap == HR_GATE || rmap == HR_UP) o->hd = shp[1];
    if (strstr(name, "ssm_conv1d")) o->dt = EA_F32; /* the converter keeps SSM_CONV1D in F32 */
    return EA_OK;
}

ea_status ea__mm_gguf_plan_hybrid(const ea_mm_shape *s, const ea__mm_plan *p, ea_dtype want, ea__mm_gplan *g) {
    const int E = s->n_experts;
    static const char *const kn[3] = {"gate", "up", "down"};
    static const int order[3] = {EA__MM_DOWN, EA__MM_GATE, EA__MM_UP}; /* Qwen2MoeModel's stacking order */
    int seen[256] = {0};
    char nm[64];
    if (s->n_layers > 256) return ea_err(EA_ERR_INVALID_ARG, "make-model: %d layers (at most 256)", s->n_layers);
    for (int i = 0; i < p->n; i++) {
        const ea__mm_src *t = &p->v[i];
        const char *lp = strstr(t->name, ".layers.");
        if (!lp) { /* embed_tokens, norm, lm_head */
            int norm = strstr(t->name, ".norm.weight") != NULL, emb = strstr(t->name, "embed_tokens") != NULL;
            EA_TRY(push(g, s, t, i, norm ? "output_norm.weight" : emb ? "token_embd.weight" : "output.weight", HR_ID,
                        HC_ID, norm ? HV_PLUS1 : HV_NONE, want));
            continue;
        }
        int l = atoi(lp + 8);
        const char *sfx = strchr(lp + 8, '.') + 1;
        if (t->expert >= 0) { /* qwen3_next: stack a layer's experts when the last is met */
            if (++seen[l] < 3 * E) continue;
            for (int k = 0; k < 3; k++) {
                int *srcs = ea_malloc((size_t)E * sizeof *srcs), first = -1;
                if (!srcs) return ea_err(EA_ERR_NOMEM, "make-model: out of memory");
                for (int j = 0; j < p->n; j++)
                    if (p->v[j].expert >= 0 && p->v[j].layer == l && p->v[j].ekind == order[k]) {
                        srcs[p->v[j].expert] = j;
                        if (first < 0) first = j;
                    }
                int64_t shp[3] = {E, p->v[first].shape[0], p->v[first].shape[1]};
                snprintf(nm, sizeof nm, "blk.%d.ffn_%s_exps.weight", l, kn[order[k]]);
                ea_status st = ea__mm_gpush(g, nm, EA__GT_STACK, -1, 3, shp, want);
                if (st != EA_OK) {
                    ea_free(srcs);
                    return st;
                }
                g->v[g->n - 1].srcs = srcs;
                g->v[g->n - 1].n_srcs = E;
            }
            continue;
        }
        if (!strcmp(sfx, "linear_attn.in_proj_qkvz.weight")) {
            snprintf(nm, sizeof nm, "blk.%d.attn_qkv.weight", l);
            EA_TRY(push(g, s, t, i, nm, HR_QKV, HC_ID, HV_NONE, want));
            snprintf(nm, sizeof nm, "blk.%d.attn_gate.weight", l);
            EA_TRY(push(g, s, t, i, nm, HR_Z, HC_ID, HV_NONE, want));
            continue;
        }
        if (!strcmp(sfx, "mlp.experts.gate_up_proj")) {
            snprintf(nm, sizeof nm, "blk.%d.ffn_gate_exps.weight", l);
            EA_TRY(push(g, s, t, i, nm, HR_GATE, HC_ID, HV_NONE, want));
            snprintf(nm, sizeof nm, "blk.%d.ffn_up_exps.weight", l);
            EA_TRY(push(g, s, t, i, nm, HR_UP, HC_ID, HV_NONE, want));
            continue;
        }
        size_t k = 0;
        while (k < sizeof hmaps / sizeof hmaps[0] && strcmp(sfx, hmaps[k].hf)) k++;
        if (k == sizeof hmaps / sizeof hmaps[0])
            return ea_err(EA_ERR_INVALID_ARG, "make-model: no GGUF name for %s (a bug)", t->name);
        snprintf(nm, sizeof nm, "blk.%d.%s", l, hmaps[k].gguf);
        EA_TRY(push(g, s, t, i, nm, hmaps[k].rmap, hmaps[k].cmap, hmaps[k].vt, want));
    }
    return EA_OK;
}

#define J_INT(o, k, v) json_object_set_new(o, k, json_integer((json_int_t)(v)))
#define J_REAL(o, k, v) json_object_set_new(o, k, json_real(v))
#define J_BOOL(o, k, v) json_object_set_new(o, k, json_boolean(v))
#define J_STR(o, k, v) json_object_set_new(o, k, json_string(v))

/* The text model's fields, as Qwen3-Next's config.json and Qwen3.5's text_config name them. */
json_t *ea__mm_hybrid_config_json(const ea_mm_shape *s, const char *torch_dtype) {
    int q35 = s->family == EA_MM_QWEN3_5_MOE;
    json_t *t = json_object();
    J_BOOL(t, "attention_bias", 0);
    J_REAL(t, "attention_dropout", 0.0);
    if (q35) J_BOOL(t, "attn_output_gate", 1);
    J_INT(t, "bos_token_id", s->bos);
    if (!q35) J_INT(t, "decoder_sparse_step", 1);
    J_INT(t, "eos_token_id", s->eos);
    J_INT(t, "full_attention_interval", s->full_interval);
    J_INT(t, "head_dim", s->head_dim);
    J_STR(t, "hidden_act", "silu");
    J_INT(t, "hidden_size", s->hidden);
    J_REAL(t, "initializer_range", 0.02);
    if (!q35) J_INT(t, "intermediate_size", s->intermediate);
    json_t *lt = json_array();
    for (int l = 0; l < s->n_layers; l++)
        json_array_append_new(lt, json_string((l + 1) % s->full_interval ? "linear_attention" : "full_attention"));
    json_object_set_new(t, "layer_types", lt);
    J_INT(t, "linear_conv_kernel_dim", s->lin_conv);
    J_INT(t, "linear_key_head_dim", s->lin_dk);
    J_INT(t, "linear_num_key_heads", s->lin_nk);
    J_INT(t, "linear_num_value_heads", s->lin_nv);
    J_INT(t, "linear_value_head_dim", s->lin_dv);
    J_INT(t, "max_position_embeddings", s->max_pos);
    if (!q35) json_object_set_new(t, "mlp_only_layers", json_array());
    J_STR(t, "model_type", q35 ? "qwen3_5_moe_text" : "qwen3_next");
    J_INT(t, "moe_intermediate_size", s->moe_intermediate);
    if (!q35) J_BOOL(t, "norm_topk_prob", s->norm_topk_prob);
    J_INT(t, "num_attention_heads", s->n_heads);
    J_INT(t, "num_experts", s->n_experts);
    J_INT(t, "num_experts_per_tok", s->top_k);
    J_INT(t, "num_hidden_layers", s->n_layers);
    J_INT(t, "num_key_value_heads", s->n_kv_heads);
    J_BOOL(t, "output_router_logits", 0);
    J_REAL(t, "rms_norm_eps", s->rms_eps);
    if (q35) { /* rope in rope_parameters; interleaved M-RoPE is plain RoPE for text positions */
        json_t *r = json_object();
        J_BOOL(r, "mrope_interleaved", 1);
        json_t *sec = json_array();
        int32_t ms[4];
        ea__mm_mrope_sections(s, ms);
        for (int i = 0; i < 3; i++) json_array_append_new(sec, json_integer(ms[i]));
        json_object_set_new(r, "mrope_section", sec);
        J_REAL(r, "partial_rotary_factor", s->partial_rotary);
        J_STR(r, "rope_type", "default");
        J_REAL(r, "rope_theta", s->rope_theta);
        json_object_set_new(t, "rope_parameters", r);
    } else {
        J_REAL(t, "partial_rotary_factor", s->partial_rotary);
        json_object_set_new(t, "rope_scaling", json_null());
        J_REAL(t, "rope_theta", s->rope_theta);
    }
    J_REAL(t, "router_aux_loss_coef", 0.001);
    J_INT(t, "shared_expert_intermediate_size", s->shared_intermediate);
    J_BOOL(t, "tie_word_embeddings", 0);
    J_STR(t, "torch_dtype", torch_dtype);
    J_BOOL(t, "use_cache", 1);
    if (!q35) J_BOOL(t, "use_sliding_window", 0);
    J_INT(t, "vocab_size", s->vocab);
    json_t *a = json_array();
    json_array_append_new(a, json_string(q35 ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3NextForCausalLM"));
    if (!q35) {
        json_object_set_new(t, "architectures", a);
        return t;
    }
    /* Qwen3.5: the text model nested under text_config (the vision tower is not written) */
    json_t *c = json_object();
    json_object_set_new(c, "architectures", a);
    J_STR(c, "model_type", "qwen3_5_moe");
    json_object_set_new(c, "text_config", t);
    J_BOOL(c, "tie_word_embeddings", 0);
    J_STR(c, "torch_dtype", torch_dtype);
    J_STR(c, "transformers_version", "4.57.0");
    return c;
}
