/*
 * fp8.h — FP8 checkpoints (DeepSeek-V3, Kimi K2, the Qwen3 "-FP8" models)
 * converted to bf16, which the loader serves.
 *
 * Such a directory's config.json says
 *
 *   "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
 *                           "weight_block_size": [B0, B1], ...}
 *
 * and each quantized weight W [rows, cols] is stored as F8_E4M3 next to
 * "<its name>_scale_inv" [ceil(rows/B0), ceil(cols/B1)] (F32 or BF16):
 *
 *   W[r][c] = e4m3(q[r][c]) * scale_inv[r / B0][c / B1]
 *
 * e4m3 is sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
 * subnormal (m/8 * 2^-6); S.1111.111 is NaN; there are no infinities; the
 * largest value is 448.
 *
 * ea_fp8_convert writes a bf16 copy of a directory: each FP8 weight is
 * dequantized in f32 and rounded to bf16 (to nearest, ties to even), what
 * DeepSeek's fp8_cast_bf16.py computes; the scales are dropped; every other
 * tensor is copied as it is (same name, dtype and bytes); config.json loses
 * quantization_config; the directory's other files (tokenizer, chat
 * template, generation config) are copied. A scale without its FP8 weight, an
 * FP8 weight without its scale or of another shape, or a block size that is
 * not two positive integers is an error naming it. The weights stream
 * through (one row at a time), so a checkpoint of any size converts in little
 * memory.
 *
 *   ea_fp8_stats st;
 *   EA_TRY(ea_fp8_convert("DeepSeek-V3", "DeepSeek-V3-bf16", 1, &st));
 */
#ifndef EA_FP8_H
#define EA_FP8_H

#include <stdint.h>

#include "base/status.h"

typedef struct {
    int n_fp8;       /* weights dequantized */
    int n_copied;    /* other tensors copied */
    int n_files;     /* other files copied */
    int64_t n_nan;   /* FP8 NaN codes met (they stay NaN) */
} ea_fp8_stats;

/* out_dir is created if missing and must hold no *.safetensors or config.json yet.
 * n_shards as ea_st_writer_create (1: one model.safetensors). */
ea_status ea_fp8_convert(const char *in_dir, const char *out_dir, int n_shards, ea_fp8_stats *stats);

/* The value of an e4m3 byte (NaN for 0x7f and 0xff). */
float ea_fp8_e4m3_to_f32(uint8_t b);

#endif
