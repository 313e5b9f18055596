/*
 * make_model_meta.h — the non-tensor half of `eaas make-model` (private to
 * make_model.c): HF config.json / generation_config.json / tokenizer files,
 * and the GGUF key/values (hyper-parameters and the tokenizer.ggml.* vocab)
 * as llama.cpp's convert_hf_to_gguf.py writes them.
 */
#ifndef EA_MAKE_MODEL_META_H
#define EA_MAKE_MODEL_META_H

#include <jansson.h>

#include "cli/make_model.h"
#include "model/gguf_write.h"

/* config.json, generation_config.json, tokenizer.json, tokenizer_config.json into o->out. */
ea_status ea__mm_write_hf_meta(const ea_mm_shape *s, const ea_mm_options *o);
/* Every key/value of the GGUF file, in the order the converter writes them. */
ea_status ea__mm_gguf_meta(ea_gguf_writer *w, const ea_mm_shape *s, const ea_mm_options *o);
/* GGUF general.architecture of a family: "qwen3moe", "qwen2moe", "llama", "olmoe", "deepseek2". */
const char *ea__mm_gguf_arch(ea_mm_family f);

/* config.json of qwen3_next / qwen3_5_moe (make_model_hybrid.c); the caller owns the result. */

json_t *ea__mm_hybrid_config_json(const ea_mm_shape *s, const char *torch_dtype);

#endif
