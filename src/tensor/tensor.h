/*
 * tensor.h — a tensor is a view: name, dtype, shape, and a pointer it does
 * not own (usually into a read-only file mapping).
 *
 * Shapes are in PyTorch / safetensors order: shape[0] is the outermost
 * dimension, shape[n_dims-1] the contiguous one. A linear layer's weight is
 * (out_features, in_features), so row r of the matrix is output r. GGUF stores
 * ne[] innermost-first; the GGUF reader reverses it so every tensor here has
 * one convention. Views are dense (row-major, no strides).
 */
#ifndef EA_TENSOR_H
#define EA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

#define EA_MAX_DIMS 4

typedef struct {
    const char *name;    /* borrows: owned by the file reader */
    ea_dtype dtype;
    int n_dims;
    int64_t shape[EA_MAX_DIMS];
    const void *data;    /* views: file mapping or owned buffer of the loader */
    size_t nbytes;
    /* views, or NULL: the same matrix as a packed copy of packed_rows
     * (Q8_0: 8 = Q8_0x8, 16 = Q8_0x16; f32/f16/bf16: 4 = Fx4; dtype.h), which
     * the kernel of that layout reads instead of data. Only ever a second
     * copy: data stays valid, and every other reader uses data. */
    const void *packed;
    int packed_rows;
    /* XXH64 of the tensor's bytes as the file holds them, taken by the model
     * loader when it copies (or fingerprints) the weight; 0 = not taken yet.
     * A view made from a tensor carries the whole tensor's hash. */
    uint64_t hash;
} ea_tensor;

static inline int64_t ea_tensor_nelem(const ea_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->shape[i];
    return n;
}

/* Rows = product of all but the last dim; cols = the last dim. */
static inline int64_t ea_tensor_cols(const ea_tensor *t) { return t->n_dims ? t->shape[t->n_dims - 1] : 1; }
static inline int64_t ea_tensor_rows(const ea_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i + 1 < t->n_dims; i++) n *= t->shape[i];
    return n;
}

/* A view of rows [r0, r0 + nr) of a 2-D tensor (rows are contiguous). It
 * keeps the packed copy when r0 starts a group of it (a group that runs past
 * the view only adds rows the kernel computes and does not store). */
static inline ea_tensor ea_tensor_row_view(const ea_tensor *t, int64_t r0, int64_t nr) {
    ea_tensor v = *t;
    size_t rb = ea_dtype_row_bytes(t->dtype, (size_t)t->shape[1]);
    v.shape[0] = nr;
    v.data = (const uint8_t *)t->data + (size_t)r0 * rb;
    v.nbytes = (size_t)nr * rb;
    int pr = t->packed_rows;
    v.packed = t->packed && pr > 0 && r0 % pr == 0
                   ? (const uint8_t *)t->packed + (size_t)(r0 / pr) * ea_packed_group_bytes(t->dtype, (size_t)t->shape[1], pr)
                   : NULL;
    v.packed_rows = v.packed ? pr : 0;
    return v;
}

#endif
