/*
 * grammar_step.c — see grammar_step.h. The token index is made lazily from
 * the tokenizer (the bytes of every non-special token); the mask is a
 * bitset over the model's vocabulary rows, applied word by word (a word of
 * all-allowed tokens costs one compare).
 */
#include "serve/grammar_step.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/tokenizer.h"

struct ea_gstep {
    const struct ea_tokenizer *tok; /* borrows */
    int vocab;
    ea_token_index *ix;             /* owns; NULL until first used */
    uint64_t *bits;                 /* owns: (vocab + 63) / 64 */
};

ea_status ea_gstep_create(const struct ea_tokenizer *tok, int vocab, ea_gstep **out) {
    ea_gstep *g = ea_calloc(1, sizeof *g);
    if (!g) return ea_err(EA_ERR_NOMEM, "grammar step");
    g->tok = tok;
    g->vocab = vocab;
    *out = g;
    return EA_OK;
}

void ea_gstep_destroy(ea_gstep *g) {
    if (!g) return;
    ea_token_index_destroy(g->ix);
    ea_free(g->bits);
    ea_free(g);
}

static ea_status ensure_index(ea_gstep *g) {
    if (g->ix) return EA_OK;
    if (!g->tok) return ea_err(EA_ERR_UNSUPPORTED, "structured outputs need the model's tokenizer");
    const char **t = ea_calloc((size_t)g->vocab, sizeof *t);
    size_t *len = ea_calloc((size_t)g->vocab, sizeof *len);
    g->bits = ea_calloc(((size_t)g->vocab + 63) / 64, sizeof *g->bits);
    ea_status st = t && len && g->bits ? EA_OK : ea_err(EA_ERR_NOMEM, "grammar step");
    int nt = ea_tokenizer_n_vocab(g->tok);
    for (int i = 0; st == EA_OK && i < g->vocab && i < nt; i++)
        if (ea_tokenizer_has_token(g->tok, i) && !ea_tokenizer_is_special(g->tok, i))
            t[i] = ea_tokenizer_token_bytes(g->tok, i, &len[i]);
    if (st == EA_OK) st = ea_token_index_create(t, len, g->vocab, &g->ix);
    ea_free(t);
    ea_free(len);
    return st;
}

ea_status ea_gstep_mask(ea_gstep *g, ea_gmatcher *m, const int32_t *end_ids, int n_end, float *row, int *n_allowed) {
    EA_TRY(ensure_index(g));
    EA_TRY(ea_gmatcher_mask(m, g->ix, g->bits));
    int complete = ea_gmatcher_accepting(m), n = 0;
    for (int k = 0; k < n_end; k++) /* end ids are never text: allow them through the bitset */
        if (end_ids[k] >= 0 && end_ids[k] < g->vocab && complete) g->bits[end_ids[k] >> 6] |= 1ull << (end_ids[k] & 63);
    for (int w = 0; w * 64 < g->vocab; w++) {
        uint64_t b = g->bits[w];
        int hi = g->vocab - w * 64 < 64 ? g->vocab - w * 64 : 64;
        if (b == ~0ull) {
            n += 64;
            continue;
        }
        for (int i = 0; i < hi; i++) {
            if (b >> i & 1) n++;
            else row[w * 64 + i] = -INFINITY;
        }
    }
    *n_allowed = n;
    return EA_OK;
}

ea_status ea_gstep_accept(ea_gstep *g, ea_gmatcher *m, int32_t t) {
    EA_TRY(ensure_index(g));
    return ea_gmatcher_accept_token(m, g->ix, t);
}
