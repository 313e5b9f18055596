/*
 * matmul_scalar.c — the portable variants, written as the definition of the
 * canonical reduction orders of matmul_impl.h (16 lanes, fused multiply-add,
 * fixed tree). The SIMD variants reproduce these bits exactly; the tests
 * check that they do.
 *
 * fmaf is the C99 correctly rounded fused multiply-add (a library call when
 * the build has no FMA instructions): it is what makes the scalar lanes equal
 * to the vfmadd lanes of AVX2/AVX-512.
 */
#include <math.h>

#include "kernels/matmul_impl.h"

/* f32 / f16 / bf16: convert the W row once, then one canonical dot per X row. */
void ea__rows_scalar_f(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int k = p->k;
    float *wf = (float *)s->buf;
    for (int j = j0; j < j1; j++) {
        ea_dtypes[p->dtype].to_f32(p->w + (size_t)j * p->row_bytes, wf, (size_t)k);
        for (int i = 0; i < p->m; i++) {
            const float *x = p->x + (size_t)i * k;
            float acc[16] = {0};
            int kk = 0;
            for (; kk + 16 <= k; kk += 16)
                for (int l = 0; l < 16; l++) acc[l] = fmaf(wf[kk + l], x[kk + l], acc[l]);
            for (int l = 0; kk + l < k; l++) acc[l] = fmaf(wf[kk + l], x[kk + l], acc[l]);
            p->y[(size_t)i * p->n + j] = ea__reduce16(acc);
        }
    }
}

/* q8_0: exact int32 block sums, then the canonical float accumulation. */
void ea__rows_scalar_q8(const ea__mm *p, int j0, int j1, ea__scratch *s) {
    int k = p->k, nb = k / EA_QK8_0;
    for (int j = j0; j < j1; j++) {
        const ea_block_q8_0 *wb = (const ea_block_q8_0 *)(p->w + (size_t)j * p->row_bytes);
        for (int i = 0; i < p->m; i++) {
            const int8_t *xq = p->xq + (size_t)i * k;
            const float *xd = p->xd + (size_t)i * nb;
            float acc[16] = {0};
            for (int b = 0; b < nb; b++) {
                int32_t isum = 0;
                for (int l = 0; l < EA_QK8_0; l++) isum += (int32_t)wb[b].qs[l] * (int32_t)xq[b * EA_QK8_0 + l];
                float d = ea_f16_to_f32(wb[b].d) * xd[b];
                acc[b % 16] = fmaf((float)isum, d, acc[b % 16]);
            }
            p->y[(size_t)i * p->n + j] = ea__reduce16(acc);
        }
    }
}
