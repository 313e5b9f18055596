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

/* Append a source of n_dims <= 2 (d0, d1); make_model.c. */
ea_status ea__mm_add(ea__mm_plan *p, const char *name, const char *gguf, int n_dims, int64_t d0, int64_t d1, int init);
/* A SiLU-gated FFN under HF prefix pre ("model.layers.0.mlp.shared_expert"), GGUF suffix sfx. */
ea_status ea__mm_add_ffn(ea__mm_plan *p, int l, const char *pre, const char *sfx, int ff, int hidden);
int64_t ea__mm_nelem(const ea__mm_src *t);

/* make_model_hybrid.c: presets and the plan of qwen3_next / qwen3_5_moe */
void ea__mm_hybrid_preset(ea_mm_shape *s, int bench);
ea_status ea__mm_build_hybrid(const ea_mm_shape *s, ea__mm_plan *p);
int ea__mm_is_hybrid(ea_mm_family f);

#endif
