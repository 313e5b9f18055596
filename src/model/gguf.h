/*
 * gguf.h — reader for GGUF files (versions 2 and 3; ggml's docs/gguf.md).
 *
 * File layout (all integers little-endian; "str" = u64 length + bytes, no NUL):
 *
 *   offset  size  field
 *   0       4     magic "GGUF" (bytes 47 47 55 46)
 *   4       4     version: u32, 2 or 3 (v1 used u32 counts and is not read)
 *   8       8     n_tensors: u64
 *   16      8     n_kv: u64
 *   24      ...   n_kv key/values:   key str | value type u32 | value
 *                   value: u8 i8 u16 i16 u32 i32 f32 bool(u8) str u64 i64 f64,
 *                          or array = elem type u32 | n u64 | n values (no nested arrays)
 *   ...     ...   n_tensors infos:   name str | n_dims u32 (1..4) | ne[n_dims] u64 |
 *                                    ggml type u32 | offset u64 (from the data section)
 *   ...     pad   zero bytes up to a multiple of general.alignment (default 32)
 *   D       ...   data section; tensor i is [D + offset_i, D + offset_i + nbytes_i)
 *
 * ne[0] is the innermost (contiguous) dimension; views reverse ne[] into
 * PyTorch order (tensor.h), so a GGUF matrix ne = [in, out] is shape (out, in).
 *
 * Value type ids: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
 * 8 string, 9 array, 10 u64, 11 i64, 12 f64. Tensor types read: F32 (0),
 * F16 (1), Q8_0 (8), BF16 (30); other known ggml types are EA_ERR_UNSUPPORTED
 * naming the tensor and the type.
 *
 * Checked before use: magic, version, counts against sanity limits and
 * against the bytes left (every kv needs >= 13 bytes, every tensor info >= 32),
 * every string and array length against the bytes left, keys and tensor
 * names unique, general.alignment a power of two, n_dims <= 4, each ne >= 1
 * with no overflow of the element count, rows of Q8_0 a whole number of
 * blocks, each tensor offset aligned and offset+size inside the file, and no
 * two tensors overlapping. Errors name the file, the key or tensor, and the
 * file offset.
 *
 * The parser works on a buffer (ea_gguf_parse; the fuzzer drives it);
 * ea_gguf_open maps the file read-only and private, so tensor pages are read
 * only when touched. Strings returned by the getters: scalar strings are
 * NUL-terminated copies owned by the ea_gguf; elements of string arrays are
 * (pointer, length) views into the file and are NOT NUL-terminated.
 *
 *   ea_gguf *g;
 *   EA_TRY(ea_gguf_open("model.gguf", &g));
 *   const char *arch; uint32_t n_layer;
 *   EA_TRY(ea_gguf_get_str(g, "general.architecture", &arch));
 *   EA_TRY(ea_gguf_get_u32(g, "qwen3moe.block_count", &n_layer));
 *   int kv = ea_gguf_find_kv(g, "tokenizer.ggml.tokens");
 *   const char *tok; size_t len;
 *   EA_TRY(ea_gguf_arr_str(g, kv, 0, &tok, &len));
 *   ea_tensor t;
 *   int i = ea_gguf_find_tensor(g, "token_embd.weight");
 *   if (i >= 0) ea_gguf_tensor(g, i, &t);
 *   ea_gguf_close(g);
 */
#ifndef EA_GGUF_H
#define EA_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/util.h"
#include "model/name_map.h"
#include "tensor/tensor.h"

typedef enum {
    EA_GGUF_U8 = 0,
    EA_GGUF_I8 = 1,
    EA_GGUF_U16 = 2,
    EA_GGUF_I16 = 3,
    EA_GGUF_U32 = 4,
    EA_GGUF_I32 = 5,
    EA_GGUF_F32 = 6,
    EA_GGUF_BOOL = 7,
    EA_GGUF_STRING = 8,
    EA_GGUF_ARRAY = 9,
    EA_GGUF_U64 = 10,
    EA_GGUF_I64 = 11,
    EA_GGUF_F64 = 12,
    EA_GGUF_N_TYPES
} ea_gguf_type;

/* ggml tensor type ids eaas reads. */
#define EA_GGML_F32 0u
#define EA_GGML_F16 1u
#define EA_GGML_Q8_0 8u
#define EA_GGML_BF16 30u

/* Sanity limits (more than any real model; a file past them is corrupt). */
#define EA_GGUF_MAX_TENSORS ((uint64_t)1 << 20)
#define EA_GGUF_MAX_KV ((uint64_t)1 << 20)
#define EA_GGUF_MAX_NAME 256       /* tensor name bytes */
#define EA_GGUF_MAX_KEY 65535      /* key bytes */
#define EA_GGUF_MAX_ALIGN (1u << 24)

typedef struct {
    char *key;              /* owns: NUL-terminated */
    ea_gguf_type type;
    ea_gguf_type arr_type;  /* element type when type == EA_GGUF_ARRAY */
    uint64_t n;             /* array elements; 1 for scalars */
    uint64_t off;           /* file offset of the value (arrays: of the first element) */
    uint64_t key_off;       /* file offset of the key's length */
    char *str;              /* owns: NUL-terminated copy when type == EA_GGUF_STRING */
    uint64_t str_len;
    uint64_t *str_offs;     /* owns: string arrays: file offset of each element's bytes */
} ea_gguf_kv;

typedef struct {
    char *name;             /* owns */
    int n_dims;
    int64_t ne[EA_MAX_DIMS];/* GGUF order: ne[0] innermost */
    uint32_t ggml_type;
    ea_dtype dtype;
    uint64_t offset;        /* from the data section */
    uint64_t nbytes;
    uint64_t info_off;      /* file offset of this tensor info */
} ea_gguf_tinfo;

typedef struct ea_gguf {
    char *path;             /* owns: file path or `what` */
    ea_mmap map;            /* owns the mapping when opened with ea_gguf_open */
    const uint8_t *base;    /* views: the whole file */
    size_t size;
    uint32_t version;
    uint64_t n_kv, n_tensors;
    ea_gguf_kv *kv;         /* owns: n_kv */
    ea_gguf_tinfo *tensors; /* owns: n_tensors */
    uint64_t alignment;
    uint64_t data_off;      /* file offset of the data section */
    uint64_t gap_bytes;     /* bytes of the data section no tensor covers (padding included) */
    ea__name_map kv_names, t_names;
} ea_gguf;

ea_status ea_gguf_parse(const uint8_t *data, size_t size, const char *what, ea_gguf *g);
ea_status ea_gguf_open(const char *path, ea_gguf **out);
void ea_gguf_deinit(ea_gguf *g); /* for ea_gguf_parse */
void ea_gguf_close(ea_gguf *g);  /* for ea_gguf_open; NULL is fine */
/* 1 if the file at path starts with the magic "GGUF" (0 if not, or unreadable). */
int ea_gguf_file_has_magic(const char *path);

/* ---- key/values ---- */
int ea_gguf_find_kv(const ea_gguf *g, const char *key); /* index or -1 */
/* Typed getters. EA_ERR_NOT_FOUND if the key is absent, EA_ERR_FORMAT if its
 * type does not convert, EA_ERR_RANGE if the value does not fit; the message
 * names the file and key. Integer getters accept any integer type (and bool);
 * the float getter accepts f32, f64 and integers. */
ea_status ea_gguf_get_str(const ea_gguf *g, const char *key, const char **s);
ea_status ea_gguf_get_i64(const ea_gguf *g, const char *key, int64_t *v);
ea_status ea_gguf_get_u64(const ea_gguf *g, const char *key, uint64_t *v);
ea_status ea_gguf_get_u32(const ea_gguf *g, const char *key, uint32_t *v);
ea_status ea_gguf_get_i32(const ea_gguf *g, const char *key, int32_t *v);
ea_status ea_gguf_get_f32(const ea_gguf *g, const char *key, float *v);
ea_status ea_gguf_get_bool(const ea_gguf *g, const char *key, int *v);
/* An array: its element type and length (EA_ERR_FORMAT if the key is not an array). */
ea_status ea_gguf_get_arr(const ea_gguf *g, const char *key, ea_gguf_type *elem, uint64_t *n);
/* Element i of the array at kv index `kv` (from ea_gguf_find_kv). */
ea_status ea_gguf_arr_i64(const ea_gguf *g, int kv, uint64_t i, int64_t *v);
ea_status ea_gguf_arr_f32(const ea_gguf *g, int kv, uint64_t i, float *v);
ea_status ea_gguf_arr_str(const ea_gguf *g, int kv, uint64_t i, const char **s, size_t *len);

const char *ea_gguf_type_name(ea_gguf_type t); /* "u32", "string", "array", ... */
const char *ea_ggml_type_name(uint32_t t);     /* "F32", "Q8_0", "Q4_K", ..., "?" */

/* ---- tensors ---- */
int ea_gguf_find_tensor(const ea_gguf *g, const char *name); /* index or -1 */
void ea_gguf_tensor(const ea_gguf *g, int i, ea_tensor *t);  /* view, PyTorch-order shape */

#endif
