/*
 * detok.c — adapter from the tokenizer to the scheduler; see detok.h.
 * Special tokens (EOS, <|im_end|>, ...) contribute no text, as in vLLM's
 * default skip_special_tokens=true; with keep_special their content (the
 * added token's text). Without a tokenizer (tests driving the scheduler with
 * ids only) a token has no text.
 */
#include "serve/detok.h"

#include <string.h>

#include "tokenizer/tokenizer.h"

int ea_detok_token_bytes(const struct ea_tokenizer *tok, int32_t id, int keep_special, char *buf, int cap) {
    if (!tok || (!keep_special && ea_tokenizer_is_special(tok, id))) return 0;
    size_t n = 0;
    const char *b = ea_tokenizer_token_bytes(tok, id, &n);
    if (!b) return 0;
    if (n > (size_t)cap) n = (size_t)cap;
    memcpy(buf, b, n);
    return (int)n;
}
