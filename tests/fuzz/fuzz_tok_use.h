/*
 * fuzz_tok_use.h — what the tokenizer fuzz targets do with a tokenizer that
 * loaded: encode a text with and without special tokens, decode it whole and
 * as a stream, and look up pieces around the ids, so the pipeline built from
 * hostile settings is exercised too.
 */
#ifndef EA_FUZZ_TOK_USE_H
#define EA_FUZZ_TOK_USE_H

#include "base/alloc.h"
#include "tokenizer/tokenizer.h"

static void fuzz_tok_use(const ea_tokenizer *t, const char *text, size_t n) {
    for (unsigned flags = 0; flags < 4; flags++) {
        ea_tokens ids = {0};
        if (ea_tokenizer_encode(t, text, n, flags, &ids) == EA_OK) {
            char *out = NULL;
            size_t len;
            if (ea_tokenizer_decode(t, ids.ids, ids.n, flags & 1, &out, &len) == EA_OK) ea_free(out);
            ea_detok_stream st;
            ea_detok_stream_init(&st, flags & 1);
            ea_sbuf acc = {0};
            for (size_t i = 0; i < ids.n; i++) ea_detok_stream_push(t, &st, ids.ids[i], &acc);
            ea_detok_stream_flush(&st, &acc);
            ea_sbuf_deinit(&acc);
        }
        ea_tokens_free(&ids);
    }
    for (int32_t id = -1; id < 300; id += 37) {
        size_t len;
        ea_tokenizer_token_bytes(t, id, &len);
        ea_tokenizer_piece(t, id, &len);
    }
}

#endif
