/*
 * gguf_write.h — a streaming writer of GGUF v3 files (the layout gguf.h
 * reads, as ggml's gguf-py GGUFWriter writes it):
 *
 *   offset  size  field
 *   0       4     magic "GGUF"
 *   4       4     version u32 = 3
 *   8       8     n_tensors u64
 *   16      8     n_kv u64
 *   24      ...   key/values in the order they were set:
 *                   key (u64 len + bytes) | type u32 | value
 *                   (string = u64 len + bytes; array = elem type u32 | u64 n | values)
 *   ...     ...   tensor infos in declaration order:
 *                   name (u64 len + bytes) | n_dims u32 | ne[n_dims] u64 | ggml type u32 |
 *                   offset u64 (from the start of the data section)
 *   ...     pad   zero bytes up to a multiple of `alignment`
 *   D       ...   tensor data in declaration order; each tensor starts at an
 *                 offset that is a multiple of `alignment` and is followed by
 *                 zero padding to the next multiple (also after the last one)
 *
 * ne[] is ggml order: ne[0] is the contiguous (innermost) dimension, i.e. the
 * reverse of a PyTorch shape. Tensor types: F32 (0), F16 (1), Q8_0 (8),
 * BF16 (30); a Q8_0 tensor needs ne[0] % 32 == 0.
 *
 * The alignment given to create() is used for padding; the caller should
 * also record it as the u32 key "general.alignment" (readers default to 32
 * when it is absent). Key/values are serialised as they are set (the big
 * tokenizer arrays take a few MB); tensors are declared, then begin() writes
 * the header and write() streams the data like ea_st_writer_write.
 *
 *   ea_gguf_writer *w;
 *   EA_TRY(ea_gguf_writer_create("m.gguf", 32, &w));
 *   EA_TRY(ea_gguf_w_str(w, "general.architecture", "qwen3moe"));
 *   EA_TRY(ea_gguf_w_u32(w, "general.alignment", 32));
 *   int64_t ne[2] = {1024, 151936};
 *   EA_TRY(ea_gguf_writer_add_tensor(w, "token_embd.weight", EA_BF16, 2, ne));
 *   EA_TRY(ea_gguf_writer_begin(w));
 *   ... ea_gguf_writer_write(w, bytes, n) ...
 *   EA_TRY(ea_gguf_writer_finish(w));
 *   ea_gguf_writer_destroy(w);
 */
#ifndef EA_GGUF_WRITE_H
#define EA_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

typedef struct ea_gguf_writer ea_gguf_writer;

/* ggml type id of an eaas dtype: F32 0, F16 1, Q8_0 8, BF16 30. */
uint32_t ea_gguf_ggml_type(ea_dtype dt);

/* alignment: a power of two >= 1 (llama.cpp uses 32). */
ea_status ea_gguf_writer_create(const char *path, uint32_t alignment, ea_gguf_writer **out);
void ea_gguf_writer_destroy(ea_gguf_writer *w);

/* Key/values (before begin). Keys must be unique. */
ea_status ea_gguf_w_u32(ea_gguf_writer *w, const char *key, uint32_t v);
ea_status ea_gguf_w_i32(ea_gguf_writer *w, const char *key, int32_t v);
ea_status ea_gguf_w_u64(ea_gguf_writer *w, const char *key, uint64_t v);
ea_status ea_gguf_w_f32(ea_gguf_writer *w, const char *key, float v);
ea_status ea_gguf_w_bool(ea_gguf_writer *w, const char *key, int v);
ea_status ea_gguf_w_str(ea_gguf_writer *w, const char *key, const char *v);
/* Arrays. Strings are (pointer, length) pairs, so they need no NUL. */
ea_status ea_gguf_w_arr_str(ea_gguf_writer *w, const char *key, const char *const *s, const size_t *len, size_t n);
ea_status ea_gguf_w_arr_i32(ea_gguf_writer *w, const char *key, const int32_t *v, size_t n);
ea_status ea_gguf_w_arr_f32(ea_gguf_writer *w, const char *key, const float *v, size_t n);

/* Declare the next tensor; ne in ggml order (ne[0] innermost), 1..4 dims. */
ea_status ea_gguf_writer_add_tensor(ea_gguf_writer *w, const char *name, ea_dtype dt, int n_dims, const int64_t *ne);
/* Write header, key/values, tensor infos and padding. */
ea_status ea_gguf_writer_begin(ea_gguf_writer *w);
/* Append tensor bytes in declaration order (padding is inserted by the writer). */
ea_status ea_gguf_writer_write(ea_gguf_writer *w, const void *data, size_t n);
/* Check every byte was written, pad the last tensor, close. */
ea_status ea_gguf_writer_finish(ea_gguf_writer *w);

#endif
