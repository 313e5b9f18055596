/*
 * model_load.h — the weight-name mapping's shared helpers (module-internal,
 * ea__): model.c maps the classic families, model_hybrid.c the hybrid ones
 * (qwen3_next, qwen3_5_moe). Both write through the same loader state.
 */
#ifndef EA_MODEL_LOAD_H
#define EA_MODEL_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"
#include "model/model.h"
#include "model/safetensors.h"

typedef struct {
    ea_st_set *st;   /* owns (HF) */
    ea_gguf *gguf;   /* owns (GGUF) */
    uint8_t *used;   /* owns: one byte per tensor of the files */
    int n_tensors;
    uint8_t *loaded; /* owns: n_layers * n_experts, 1 once ea_model_load_experts chose the expert */
    int dense_copied; /* ea_model_load_dense ran */
    struct ea__arena { void *p; size_t n; } *arenas; /* owns each mapping: the loaded weights' copies */
    int n_arenas;
    size_t cap_arenas;
} ea__files;

typedef struct {
    void **bufs; /* owns each (ea_aligned_alloc) */
    size_t *lens;
    int n;
    size_t cap;
} ea__owned;

typedef struct {
    ea_model *m;
    ea__files *f;
    ea__owned *own;
    const char *where; /* model path for "missing" errors */
} ea__ld;

/* Find `name` and check its shape (d0[, d1[, d2]]) for nd dims; unit dims with at most one real dim
 * are normalised ((1, H) vs (H)). Errors name the file, the tensor and both shapes. Marks it used. */
ea_status ea__want(ea__ld *ld, const char *name, ea_tensor *t, int nd, int64_t d0, int64_t d1, int64_t d2);
int ea__has(ea__ld *ld, const char *name);
const char *ea__nm(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* n bytes the model owns (freed at close), or NULL. */
void *ea__own(ea__ld *ld, size_t n);
/* gate/up (ff, hidden), down (hidden, ff) */
ea_status ea__ffn(ea__ld *ld, const char *g, const char *u, const char *d, int64_t ff, ea_ffn_weights *w);

/* model.c: the MoE block of layer l (router, experts, shared expert) under HF or GGUF names;
 * model_hybrid.c uses its GGUF half */
ea_status ea__moe(ea__ld *ld, int l, ea_layer_weights *L);
/* model_hybrid.c: layer l of qwen3_next / qwen3_5_moe */
ea_status ea__hybrid_layer(ea__ld *ld, int l);

#endif
