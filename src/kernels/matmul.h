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
 * Results differ between ISAs (scalar vs AVX-512 vs AMX); each variant is
 * tested against its plain reference twin ea_k_matmul_ref with a tolerance,
 * and against itself across batch sizes bit for bit.
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
/* "scalar", "avx2", "avx512", "amx" — what this context dispatches to. Under
 * "amx" only bf16 weights use the tiles; other dtypes run the avx512 kernels. */
const char *ea_kctx_isa(const ea_kctx *ctx);

/* Force an ISA on this context ("scalar", "avx2", "avx512", "amx");
 * EA_ERR_UNSUPPORTED if the CPU (or the OS, for AMX) lacks it. Tests use
 * this to check every variant. Not thread-safe against a running matmul. */
ea_status ea_kctx_set_isa(ea_kctx *ctx, const char *isa);
/* 1 if this CPU/OS can run `isa`. */
int ea_k_isa_supported(const char *isa);
/* The ISA a new context picks when EAAS_ISA is not set. */
const char *ea_k_isa_best(void);

/* Y (m, n) = X (m, k) · Wᵀ where W is a 2-D view (n, k). m <= max_m, k <= max_k. */
void ea_k_matmul(ea_kctx *ctx, const ea_tensor *w, const float *x, int m, float *y);

/* The plain reference twin: same math in scalar f32 with a simple loop. */
void ea_k_matmul_ref(const ea_tensor *w, const float *x, int m, float *y);

#endif
