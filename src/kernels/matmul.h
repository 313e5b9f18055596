/*
 * matmul.h — the matrix products of the forward pass: Y = X · Wᵀ.
 *
 *   X (m, k) f32 activations, row-major
 *   W (n, k) weights in any dtype of dtype.h, row-major (PyTorch Linear layout)
 *   Y (m, n) f32
 *
 * Batch invariance (DESIGN.md principle 1): Y[i][j] depends only on X[i] and
 * W[j] — never on m, on the other rows of X, on the thread count, or on how
 * the work was split. Every ISA variant fixes its reduction order over k;
 * runs on one machine with one ISA are bit-reproducible across batch sizes.
 * scalar, avx2 and avx512 follow one canonical order and give the same bits
 * for every dtype; q8_0 gives the same bits on every ISA; bf16 under amx
 * differs (activations rounded to bf16). Each variant is tested against its
 * plain reference twin ea_k_matmul_ref with a tolerance, and against itself
 * across batch sizes and thread counts bit for bit (docs/kernels.md).
 *
 * The context owns scratch space (e.g. quantised or repacked activations),
 * sized once by ea_kctx_create for the largest m and k it will see, so a call
 * never allocates. The ISA is chosen at create time from the CPU's features,
 * or forced with the environment variable EAAS_ISA=scalar|avx2|avx512|amx.
 */
#ifndef EA_MATMUL_H
#define EA_MATMUL_H

#include "base/pool.h"
#include "base/status.h"
#include "tensor/tensor.h"

typedef struct ea_kctx ea_kctx;

/* pool is borrowed (may be NULL = serial). max_m, max_k bound every later call. */
ea_status ea_kctx_create(ea_pool *pool, int max_m, int max_k, ea_kctx **out);
void ea_kctx_destroy(ea_kctx *ctx);
/* "scalar", "avx2", "avx512", "avx512_bf16", "amx" — what this context
 * dispatches to. Under "amx" only bf16 weights use the tiles and under
 * "avx512_bf16" only bf16 weights use VDPBF16PS; other dtypes run the avx512
 * kernels. */
const char *ea_kctx_isa(const ea_kctx *ctx);
/* 1 if products with bf16 weights round the activations to bf16 first
 * (amx, avx512_bf16); 0 if every product uses them exactly. */
int ea_kctx_rounds_x(const ea_kctx *ctx);
/* The pool the context runs on (NULL = serial), for callers that split their own row-wise work the same way. */
ea_pool *ea_kctx_pool(const ea_kctx *ctx);
/* The bounds given at create: every product has m <= max_m rows and k <= max_k. */
int ea_kctx_max_m(const ea_kctx *ctx);
int ea_kctx_max_k(const ea_kctx *ctx);

/* Force an ISA on this context ("scalar", "avx2", "avx512", "avx512_bf16", "amx");
 * EA_ERR_UNSUPPORTED if the CPU (or the OS, for AMX) lacks it. Tests use
 * this to check every variant. Not thread-safe against a running matmul. */
ea_status ea_kctx_set_isa(ea_kctx *ctx, const char *isa);
/* 1 if this CPU/OS can run `isa`. */
int ea_k_isa_supported(const char *isa);
/* The ISA a new context picks when EAAS_ISA is not set. */
const char *ea_k_isa_best(void);

/* Y (m, n) = X (m, k) · Wᵀ where W is a 2-D view (n, k). m <= max_m, k <= max_k.
 * W's data must be aligned to its element (4 bytes f32, 2 bytes f16/bf16/q8_0;
 * loaders check file offsets); X and Y need no alignment. One call at a time
 * per context (its scratch is shared), and contexts that share a pool must not
 * run at the same time (ea_pool_run is not reentrant). */
void ea_k_matmul(ea_kctx *ctx, const ea_tensor *w, const float *x, int m, float *y);

/* Several independent products in one call, e.g. the experts of a MoE layer:
 * Y_q (m_q, n_q) = X_q · W_qᵀ. One pool wake-up per group instead of one per
 * product; bit-identical to calling ea_k_matmul on each. Each m_q <= max_m,
 * k_q <= max_k; when the members' prepared activations exceed the context's
 * scratch the batch runs in several groups (never an error). */
#define EA_K_BATCH_MAX 256
typedef struct {
    const ea_tensor *w; /* (n, k) */
    const float *x;     /* (m, k) */
    int m;
    float *y; /* (m, n) */
} ea_k_mm;
void ea_k_matmul_batch(ea_kctx *ctx, const ea_k_mm *mm, int n_mm);

/* Packed copies (tensor/dtype.h): Q8_0x8 for the AVX2 q8 kernel, Q8_0x16
 * for the AVX-512 VNNI one, Fx4 (f32, f16, bf16) for the AVX2 F kernel. Such
 * a kernel reads a matrix's copy when it has one in its layout
 * (ea_tensor.packed, packed_rows) and otherwise the rows; the bits are the
 * same either way, and every other kernel reads data. Loaders make the copy
 * when ea_k_pack_rows() says a new context will use it. */
/* Rows per group of the copy that a new context (EAAS_ISA or the CPU's best
 * ISA) reads for every product of dtype dt: q8_0 8 on AVX2-only CPUs (and
 * AVX-512 ones without VNNI), 16 on AVX-512 VNNI CPUs without AMX int8;
 * f32/f16/bf16 4 on AVX2-only CPUs; else 0 (no copy). */
int ea_k_pack_rows(ea_dtype dt);
/* The same for a context of ISA `isa` ("avx2", ...; 0 if unknown or not on this CPU). */
int ea_k_pack_rows_isa(const char *isa, ea_dtype dt);
/* Bytes of w's copy of `rows` (q8_0: 8 or 16, w's rows whole blocks; f32,
 * f16, bf16: 4); 0 for any other pair. */
size_t ea_k_packed_bytes(const ea_tensor *w, int rows);
/* Write w's copy to dst (ea_k_packed_bytes(w, rows) bytes, 64-byte aligned). */
void ea_k_pack(const ea_tensor *w, int rows, void *dst);

/* The plain reference twin: same math in scalar f32 with a simple loop. */
void ea_k_matmul_ref(const ea_tensor *w, const float *x, int m, float *y);

#endif
