/*
 * safetensors.h — reader for Hugging Face safetensors files and sharded
 * directories (model.safetensors.index.json).
 *
 * File layout (all integers little-endian):
 *
 *   offset      size   field
 *   0           8      N: u64, byte length of the JSON header
 *   8           N      header: UTF-8 JSON object
 *                        "<tensor name>": {"dtype": "BF16", "shape": [d0, d1, ...],
 *                                          "data_offsets": [begin, end]}
 *                        "__metadata__": {"<key>": "<string>", ...}   (optional)
 *   8+N         ...    data section; tensor bytes are [8+N+begin, 8+N+end)
 *
 * Every check the loader relies on is done at parse time, before any view is
 * handed out: N <= file size - 8, the header is a JSON object, each dtype is
 * known (F32/F16/BF16 are supported; F8_E4M3 is parsed, flagged `f8`, for
 * `eaas convert-fp8` only — the model loader refuses such a file and points
 * at the command; any other known dtype is EA_ERR_UNSUPPORTED naming the
 * tensor and dtype), shape product * element
 * size == end - begin (with overflow checks), end <= data section size, and
 * no two tensors overlap. Errors name the file, the tensor, and the byte
 * offset or JSON field that was wrong.
 *
 * The parser works on a memory buffer (ea_st_parse) so the fuzzer can drive
 * it; ea_st_open wraps it with a read-only private mapping (ea_mmap_open), so
 * a tensor's pages are read from disk only when something touches them.
 *
 * A set is the tensors of a model directory: model.safetensors, or the shards
 * named by model.safetensors.index.json (weight_map: tensor -> file), or, with
 * neither, every *.safetensors file in the directory. Names are unique across
 * the set; an index entry that names a missing file or a tensor its shard does
 * not hold is an error.
 */
#ifndef EA_SAFETENSORS_H
#define EA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/util.h"
#include "model/name_map.h"
#include "tensor/tensor.h"

/* Header byte limit: larger headers are rejected before parsing (HF uses 100 MB). */
#define EA_ST_MAX_HEADER ((uint64_t)100 * 1024 * 1024)

typedef struct {
    char *name; /* owns */
    ea_dtype dtype;
    int n_dims; /* 0..EA_MAX_DIMS; 0 = scalar */
    int64_t shape[EA_MAX_DIMS];
    uint64_t begin, end; /* relative to the data section */
    int f8;              /* 1: dtype F8_E4M3 (FP8 checkpoints); dtype is then EA_N_DTYPES: bytes, not a view to compute with */
} ea_st_info;

typedef struct {
    char *path;              /* owns: file path, or the `what` given to ea_st_parse */
    ea_mmap map;             /* owns the mapping when opened with ea_st_open */
    const uint8_t *base;     /* views: the whole file */
    size_t size;
    uint64_t data_off;       /* 8 + N */
    ea_st_info *tensors;     /* owns: n_tensors entries, in header order */
    int n_tensors;
    ea__name_map names;      /* name -> index into tensors */
    /* layout notes for `eaas inspect` (not errors) */
    int n_misaligned;        /* tensors whose data is not aligned to their element size */
    uint64_t gap_bytes;      /* bytes of the data section no tensor covers */
} ea_st_file;

/* Parse a whole file held in memory (borrowed: must outlive f). `what` names it in errors. */
ea_status ea_st_parse(const uint8_t *data, size_t size, const char *what, ea_st_file *f);
/* Map and parse `path`. */
ea_status ea_st_open(const char *path, ea_st_file **out);
void ea_st_deinit(ea_st_file *f);  /* for ea_st_parse */
void ea_st_close(ea_st_file *f);   /* for ea_st_open; NULL is fine */

/* Index of `name` or -1. */
int ea_st_find(const ea_st_file *f, const char *name);
/* A view of tensor i (0 <= i < n_tensors). */
void ea_st_tensor(const ea_st_file *f, int i, ea_tensor *t);

typedef struct {
    int file, index; /* tensors[index] of files[file] */
} ea_st_ref;

typedef struct {
    char *dir;           /* owns */
    ea_st_file **files;  /* owns: n_files open files */
    int n_files;
    ea_st_ref *refs;     /* owns: every tensor of every file */
    int n_refs;
    ea__name_map names;  /* name -> index into refs */
    int indexed;         /* 1 if opened through model.safetensors.index.json */
} ea_st_set;

ea_status ea_st_set_open(const char *dir, ea_st_set **out);
void ea_st_set_close(ea_st_set *s);
/* Index of `name` in refs, or -1. */
int ea_st_set_find(const ea_st_set *s, const char *name);
/* The header entry of refs[i]. */
const ea_st_info *ea_st_set_info(const ea_st_set *s, int i);
/* View of refs[i]; *file (optional) gets the path of the file holding it. */
void ea_st_set_tensor(const ea_st_set *s, int i, ea_tensor *t, const char **file);

/* "F32" -> element bytes and, if supported, *dt. Returns 0 for unknown dtypes,
 * and sets *supported to 0 for known dtypes eaas does not compute with. */
int ea_st_dtype_size(const char *s, ea_dtype *dt, int *supported);

#endif
