/*
 * ops_variants.h — run tests under every variant of the row-wise kernels
 * (kernels/ops.h: dot, axpy, SiLU, attention) this CPU has, as test_kernels
 * does for matmul: scalar (the twins), AVX2, AVX-512, each selected with
 * ea_k_ops_set_isa; an ISA the CPU lacks is skipped and said so.
 * Header-only; included by tests/unit/test_ops.c and test_attn.c.
 *
 *   for (int i = 0; i < OPS_N_VARIANTS; i++) {
 *       int sel = ops_variant_select(i);
 *       if (sel < 0) return 1;
 *       if (sel) RUN(...);
 *   }
 */
#ifndef EA_TEST_OPS_VARIANTS_H
#define EA_TEST_OPS_VARIANTS_H

#include <stdio.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"

#define OPS_N_VARIANTS 3

/* 1: variant i runs now; 0: not on this CPU (skipped); -1: could not be selected. */
static inline int ops_variant_select(int i) {
    static const char *const isas[OPS_N_VARIANTS] = {"scalar", "avx2", "avx512"};
    if (!ea_k_isa_supported(isas[i])) {
        fprintf(stderr, "(skipping %s: not supported here)\n", isas[i]);
        return 0;
    }
    if (ea_k_ops_set_isa(isas[i]) != EA_OK || strcmp(ea_k_ops_isa(), isas[i]) != 0) {
        fprintf(stderr, "FAIL: cannot select the %s variant (%s)\n", isas[i], ea_k_ops_isa());
        return -1;
    }
    fprintf(stderr, "variant %s:\n", isas[i]);
    return 1;
}

#endif
