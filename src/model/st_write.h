/*
 * st_write.h — a streaming writer of Hugging Face safetensors files, single
 * or sharded with model.safetensors.index.json. Used by `eaas make-model`
 * and by tests that need small files; the format is the one safetensors.h
 * reads:
 *
 *   offset      size   field
 *   0           8      N: u64 little-endian, byte length of the JSON header
 *   8           N      header: {"__metadata__":{"format":"pt"},
 *                               "<name>":{"dtype":"BF16","shape":[..],"data_offsets":[b,e]},...}
 *                      padded with spaces so that 8+N is a multiple of 64 (the
 *                      format asks for 8; 64 puts the data section on a cache
 *                      line, so SIMD loads of the first tensor are aligned)
 *   8+N         ...    tensor bytes, back to back in declaration order, no gaps
 *
 * Use: declare every tensor (name, dtype, shape) first, then begin(), then
 * stream each tensor's bytes in declaration order with any number of
 * write() calls (a tensor may span calls and a call may span tensors), then
 * finish(). Nothing but a small write buffer is held in memory, so a model
 * of any size streams through.
 *
 *   ea_st_writer *w;
 *   EA_TRY(ea_st_writer_create("out/dir", 1, &w));
 *   int64_t shape[2] = {4, 8};
 *   EA_TRY(ea_st_writer_add(w, "a.weight", EA_F32, 2, shape));
 *   EA_TRY(ea_st_writer_begin(w));
 *   EA_TRY(ea_st_writer_write(w, floats, 4 * 8 * 4));
 *   EA_TRY(ea_st_writer_finish(w));
 *   ea_st_writer_destroy(w);
 *
 * Sharding: with n_shards = 1 the file is <dir>/model.safetensors and no
 * index is written. With n_shards = S > 1 the tensors are cut, in
 * declaration order, into S contiguous runs of about total/S bytes each,
 * written to <dir>/model-0000i-of-0000S.safetensors, and
 * <dir>/model.safetensors.index.json holds {"metadata":{"total_size":T},
 * "weight_map":{name: file}} with keys sorted (as transformers writes it).
 * S may not exceed the tensor count (no empty shards).
 *
 * Q8_0 is not a safetensors dtype; add() refuses it.
 */
#ifndef EA_ST_WRITE_H
#define EA_ST_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

typedef struct ea_st_writer ea_st_writer;

/* dir must exist. n_shards >= 1. */
ea_status ea_st_writer_create(const char *dir, int n_shards, ea_st_writer **out);
/* Declare the next tensor. shape in PyTorch order, 0..4 dims (0 = scalar). */
ea_status ea_st_writer_add(ea_st_writer *w, const char *name, ea_dtype dt, int n_dims, const int64_t *shape);
/* Freeze the tensor list, assign shards, open the first file and write its header. */
ea_status ea_st_writer_begin(ea_st_writer *w);
/* Append n bytes of tensor data (declaration order). */
ea_status ea_st_writer_write(ea_st_writer *w, const void *data, size_t n);
/* Check that every byte was written, close the files, write the index. */
ea_status ea_st_writer_finish(ea_st_writer *w);
/* Frees everything; files of an unfinished writer are left as they are. NULL is fine. */
void ea_st_writer_destroy(ea_st_writer *w);

/* "BF16" for EA_BF16 ...; NULL for dtypes safetensors cannot hold. */
const char *ea_st_dtype_name(ea_dtype dt);

#endif
