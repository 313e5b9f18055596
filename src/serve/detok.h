/*
 * detok.h — what the scheduler needs from the tokenizer: the bytes one token
 * stands for (byte-level BPE decoding of a single id; special tokens give no
 * bytes). The scheduler assembles whole UTF-8 characters itself.
 */
#ifndef EA_DETOK_H
#define EA_DETOK_H

#include <stdint.h>

struct ea_tokenizer;

/* Write the bytes of token `id` to buf (at most cap); returns the count (0 for special tokens). */
int ea_detok_token_bytes(const struct ea_tokenizer *tok, int32_t id, char *buf, int cap);

#endif
