/*
 * make_model_plan.h — the tensor plan of `eaas make-model`, shared by
 * make_model.c (the classic families, values, writers) and make_model_hybrid.c
 * (qwen3_next / qwen3_5_moe). Private to src/cli/.
 *
 * A plan is the list of HF tensors ("sources") a family's modeling code names:
 * name, PyTorch shape (up to 3 dims), init class (base, scale of the values,
 * make_model.c) and the GGUF destination where the family has one.
 */
#ifndef EA_MAKE_MODEL_PLAN_H
#define EA_MAKE_MODEL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "cli/make_model.h"
#include "tensor/dtype.h"

/* init classes: linear weight (0, 1/sqrt(last dim)), embedding (0, 1), RMSNorm weight
 * (1, 0.1), bias (0, 0.1), and a zero-centred norm weight (0, 0.1) for the norms that
 * scale by (1 + weight) (qwen3_next / qwen3_5_moe, initialised to zeros there) */
enum { EA__MM_MAT = 0, EA__MM_EMB, EA__MM_NORM, EA__MM_BIAS, EA__MM_NORM0 };
enum { EA__MM_PERM_Q = 1, EA__MM_PERM_K = 2, EA__MM_KVB = 4 };
enum { EA__MM_GATE = 0, EA__MM_UP = 1, EA__MM_DOWN = 2 };

typedef struct {
    char name[96];  /* HF name */
    char gguf[64];  /* GGUF name; for routed experts the stacked tensor's name */
    int n_dims;
    int64_t shape[3];
    int init;
    double base, scale;
    int layer, expert, ekind; /* expert = -1 unless a routed expert tensor */
    int fused_experts;        /* > 0: one tensor stacking this many experts (qwen3_5_moe) */
    int flags;
    uint64_t key;
} ea__mm_src;

typedef struct {
    ea__mm_src *v; /* owns */
    int n;
    size_t cap;
} ea__mm_plan;

/* The GGUF plan: one entry per GGUF tensor, in the converter's order. */
enum { EA__GT_COPY = 0, EA__GT_STACK, EA__GT_PERM, EA__GT_KB, EA__GT_VB, EA__GT_HYB };

typedef struct {
    char name[64];
    int n_dims;
    int64_t ne[4]; /* ggml order */
    ea_dtype dt;
    int kind;
    int src;
    int *srcs; /* owns (STACK): source index of expert e */
    int n_srcs;
    int perm_heads;
    /* HYB (make_model_hybrid.c): element (r, j) = vt(source row rmap(r), column cmap(j)) */
    int rmap, cmap, vt;
    int64_t off, hd;
} ea__mm_gt;

typedef struct {
    ea__mm_gt *v; /* owns */
    int n;
    size_t cap;
} ea__mm_gplan;

/* Append a GGUF tensor made from source src (torch shape, squeezed and reversed here) with
 * the converter's type rules (1-D, norms, routers, non-weights F32; Q8_0 rows of whole blocks
 * else F16); make_model.c. */
ea_status ea__mm_gpush(ea__mm_gplan *g, const char *name, int kind, int src, int n_dims, const int64_t *torch_shape,
                       ea_dtype want);
/* out[k] = value of element i0 + k of source t, rounded to `round` (the model dtype); make_model.c. */
void ea__mm_gen(const ea__mm_src *t, uint64_t i0, size_t n, float *out, ea_dtype round);

/* Append a source of n_dims <= 2 (d0, d1); make_model.c. */
ea_status ea__mm_add(ea__mm_plan *p, const char *name, const char *gguf, int n_dims, int64_t d0, int64_t d1, int init);
/* A SiLU-gated FFN under HF prefix pre ("model.layers.0.mlp.shared_expert"), GGUF suffix sfx. */
ea_status ea__mm_add_ffn(ea__mm_plan *p, int l, const char *pre, const char *sfx, int ff, int hidden);
int64_t ea__mm_nelem(const ea__mm_src *t);

/* make_model_hybrid.c: presets and the plan of qwen3_next / qwen3_5_moe */
void ea__mm_hybrid_preset(ea_mm_shape *s, int bench);
ea_status ea__mm_build_hybrid(const ea_mm_shape *s, ea__mm_plan *p);
int ea__mm_is_hybrid(ea_mm_family f);
/* Qwen3.5's mrope_section for the preset's rotary dims, padded to 4 */
void ea__mm_mrope_sections(const ea_mm_shape *s, int32_t sec[4]);
/* the GGUF plan of a hybrid family (qwen3next / qwen35moe), and row r of its HYB tensors */
ea_status ea__mm_gguf_plan_hybrid(const ea_mm_shape *s, const ea__mm_plan *p, ea_dtype want, ea__mm_gplan *g);
void ea__mm_hybrid_row(const ea_mm_shape *s, const ea__mm_plan *p, const ea__mm_gt *t, int64_t r, float *out,
                       ea_dtype round);

#endif
