/*
 * detok.h — what the scheduler needs from the tokenizer: the bytes one token
 * stands for (byte-level BPE decoding of a single id; special tokens give no
 * bytes unless the request keeps them). The scheduler assembles whole UTF-8
 * characters itself.
 */
#ifndef EA_DETOK_H
#define EA_DETOK_H

#include <stdint.h>

struct ea_tokenizer;

/* Write the bytes of token `id` to buf (at most cap); returns the count (0 for
 * special tokens unless keep_special: vLLM's skip_special_tokens false). */
int ea_detok_token_bytes(const struct ea_tokenizer *tok, int32_t id, int keep_special, char *buf, int cap);

#endif
