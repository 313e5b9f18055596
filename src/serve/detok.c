/* detok.c — adapter from the tokenizer to the scheduler; see detok.h.
 * (Temporary: emits the id as text until the tokenizer lands.) */
#include "serve/detok.h"

#include <stdio.h>

int ea_detok_token_bytes(const struct ea_tokenizer *tok, int32_t id, char *buf, int cap) {
    (void)tok;
    int n = snprintf(buf, (size_t)cap, "<%d>", id);
    return n < cap ? n : cap;
}
