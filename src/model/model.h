/*
 * model.h — an opened model: its config, and views of every weight, from an
 * HF safetensors directory or a GGUF file, with one layout.
 *
 * Weights are views into read-only file mappings (zero copy) except where the
 * loader must change the bytes to reach the one internal layout — e.g. GGUF
 * "llama" (Mixtral) files store wq/wk rows permuted for interleaved RoPE; the
 * loader un-permutes them into owned buffers so both formats feed the forward
 * pass the same values (HF layout: rotate-half RoPE, PyTorch shapes).
 *
 * Routed experts are described per expert whatever the storage: for HF
 * (model.layers.L.mlp.experts.E.gate_proj.weight) each view is its own tensor;
 * for GGUF stacked tensors (blk.L.ffn_gate_exps.weight, shape (E, ff, hidden))
 * each view points at expert E's rows inside the stacked tensor. A caller that
 * needs only some experts (expert parallelism, expert servers) calls
 * ea_model_load_experts with a mask: those experts are read in, the others
 * are never touched, so resident memory follows the subset. Loading copies a
 * weight out of the file mapping into anonymous huge-page memory and points
 * the tensor at the copy (model.c, "loading"); until then it reads the mapping.
 *
 * Shapes (PyTorch order, see tensor.h):
 *   tok_embd   (vocab, hidden)         lm_head (vocab, hidden) — same view when tied
 *   out_norm   (hidden)
 *   attn_norm, ffn_norm (hidden)
 *   wq (n_heads*head_dim, hidden)   wk, wv (n_kv_heads*head_dim, hidden)   wo (hidden, n_heads*head_dim)
 *   bq, bk, bv (out) when attention_bias; q_norm/k_norm (head_dim) per head or (out) full
 *   MLA: wq_a (q_lora_rank, hidden), q_a_norm (q_lora_rank), wq_b (n_heads*(nope+rope), q_lora_rank)
 *        or wq (n_heads*(nope+rope), hidden) when q_lora_rank == 0;
 *        wkv_a (kv_lora_rank+rope, hidden), kv_a_norm (kv_lora_rank),
 *        wkv_b (n_heads*(nope+v), kv_lora_rank), wo (hidden, n_heads*v)
 *   router (n_experts, hidden), router_bias (n_experts) = e_score_correction_bias
 *   ffn gate/up (ff, hidden), down (hidden, ff)
 *   shared_gate (1, hidden) — qwen2_moe's sigmoid gate of the shared expert
 *   hybrid (qwen3_next, qwen3_5_moe): wq (2*n_heads*head_dim, hidden), per head [query | gate];
 *        linear layers hold lin_* (below) and no wq..wo
 */
#ifndef EA_MODEL_H
#define EA_MODEL_H

#include <stdint.h>

#include "base/status.h"
#include "model/config.h"
#include "moe/moe.h" /* ea_ffn_weights */
#include "tensor/tensor.h"

typedef struct {
    ea_tensor attn_norm, ffn_norm;
    /* standard attention */
    ea_tensor wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm;
    /* MLA */
    ea_tensor wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm, wkv_b;
    /* feed-forward: dense layers use `dense`; MoE layers the rest */
    ea_ffn_weights dense;
    ea_tensor router, router_bias;
    ea_ffn_weights shared;   /* n_shared_experts fused as one FFN (deepseek), or qwen2_moe's one */
    ea_tensor shared_gate;
    ea_ffn_weights *experts; /* owns the array (n_experts views); NULL on dense layers */
    /* Gated DeltaNet (linear layers of qwen3_next / qwen3_5_moe; model_hybrid.c). qwen3_next's grouped
     * in_proj_qkvz / in_proj_ba are regrouped at load into these (owned rows, exact copies). */
    ea_tensor lin_qkv;      /* (2*nk*dk + nv*dv, hidden): rows [q | k | v], the conv's channels */
    ea_tensor lin_z;        /* (nv*dv, hidden) output gate */
    ea_tensor lin_b, lin_a; /* (nv, hidden) beta and decay inputs */
    ea_tensor lin_conv;     /* (C, K) depthwise causal conv taps (file: (C, 1, K)) */
    ea_tensor lin_dt_bias, lin_a_log; /* (nv) */
    ea_tensor lin_norm;     /* (dv) gated RMSNorm weight (plain, not 1 + w) */
    ea_tensor lin_out;      /* (hidden, nv*dv) */
} ea_layer_weights;

typedef enum { EA_FORMAT_HF = 0, EA_FORMAT_GGUF = 1 } ea_model_format;

typedef struct ea_model {
    ea_model_config cfg;
    ea_model_format format;
    char *path;              /* owns */
    ea_tensor tok_embd, out_norm, lm_head;
    ea_layer_weights *layers; /* owns: cfg.n_layers */
    ea_ffn_weights **experts; /* owns the array: [n_layers] -> layers[l].experts, NULL for dense layers —
                                 the per-layer expert table the MoE backends take */
    int64_t weight_bytes;     /* all tensors */
    void *files;              /* owns: the open safetensors set or GGUF file (reader-private) */
    void *owned;              /* owns: buffers the loader had to write (reader-private) */
    char *layout_notes;       /* owns: file layout problems, one per line ("" if none); for inspect */
    int n_unused;             /* tensors in the files that no weight maps to */
} ea_model;

/* Open `path`: a directory with config.json + *.safetensors, or a .gguf file.
 * Checks every tensor the config needs exists with the right shape and a
 * supported dtype; errors name the file and tensor. Nothing is read beyond
 * headers: weights are paged in on first use or by the load functions below. */
ea_status ea_model_open(const char *path, ea_model **out);
void ea_model_close(ea_model *m);

/* What ea_model_open checks first, for callers that must refuse a bad path
 * before doing anything else (serve, before it opens its port): path is a
 * directory, or a file that starts with the GGUF magic. Otherwise one error
 * naming path: "no such model directory or .gguf file", or "expected a model
 * directory or a .gguf file" (with the directory to pass instead when path is
 * a file inside a model directory, e.g. dir/config.json). */
ea_status ea_model_check_path(const char *path);
/* 1 if the file path lies in an HF model directory (one with config.json),
 * which is written to dir (n bytes). */
int ea_model_dir_of_file(const char *path, char *dir, size_t n);
/* The config only (config.json, or the GGUF metadata), without the tensors:
 * cheap, for checks before the load. */
ea_status ea_model_read_config(const char *path, ea_model_config *cfg);

/* Load (copy into huge-page memory, pointing the tensors at the copies) the
 * non-expert weights, and the routed experts of `layer` whose mask byte is
 * non-zero (mask has cfg.n_experts bytes; NULL = all). Experts chosen by earlier
 * calls stay in; pages of the file mapping lying wholly inside copied weights or
 * experts never chosen are unmapped again (the kernel may map neighbours of a
 * faulting page), so resident memory follows the chosen subset. Tensor structs
 * copied before a load keep reading the (still valid) mapping. */
ea_status ea_model_load_dense(ea_model *m);
ea_status ea_model_load_experts(ea_model *m, int layer, const uint8_t *mask);

/* A copy of routed expert `expert` of `layer` in memory of its own (huge
 * pages, with the kernels' packed copies, like a load), which the caller
 * frees whenever it likes — an expert server's replica of a hot expert.
 * The model is not changed: the expert's file pages are dropped again
 * unless the model loaded it. Threading: may run beside a forward pass or
 * an expert server's loop, which read other experts; not beside another
 * load or copy. */
typedef struct {
    ea_ffn_weights w; /* gate, up, down: views into mem */
    void *mem;        /* owns: the mapping */
    size_t mem_len;
} ea_expert_copy;
ea_status ea_model_expert_copy(ea_model *m, int layer, int expert, ea_expert_copy *out);
void ea_expert_copy_free(ea_expert_copy *c); /* zeroes *c; an empty one is fine */

/* A fingerprint of every byte of every weight the model uses (and of the
 * parsed config): two models get the same value only if all their weights
 * are equal. Each weight's XXH64 is taken once, while ea_model_load_* copies
 * it (the bytes pass through the cache then anyway); weights this process
 * did not load (another rank's experts, remote experts) are hashed here from
 * the file mapping, whose pages are dropped again. So every rank of every
 * parallel mode gets the same value, whatever share it loaded. */
uint64_t ea_model_fingerprint(ea_model *m);

/* Every weight view of the model (tok_embd, out_norm, lm_head unless tied, each
 * layer's tensors, each expert's gate/up/down), once each, in a fixed order:
 * fn(ctx, t, layer, expert) with layer = -1 outside the layers and expert = -1
 * for non-expert weights. For sizes and dtype mixes. */
void ea_model_foreach(const ea_model *m, void (*fn)(void *ctx, const ea_tensor *t, int layer, int expert),
                      void *ctx);

#endif
