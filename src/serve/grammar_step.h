/*
 * grammar_step.h — the grammar's part of a decode step (structured outputs):
 * between the logits and the sampler, the tokens that would take a
 * request's text out of its grammar's language get logit -inf; after the
 * sampler, the request's matcher takes the chosen token.
 *
 * The step loop owns one ea_gstep: the vocabulary as the grammar engine sees
 * it (grammar/grammar.h: ea_token_index, with its per-class token tables
 * shared by every request) and a mask buffer. Built on the first constrained
 * request, so servers that never see one pay nothing. Special tokens and ids
 * without a token are never text; the ids that end a request (EOS, stop ids)
 * are allowed exactly when the text so far is complete.
 */
#ifndef EA_GRAMMAR_STEP_H
#define EA_GRAMMAR_STEP_H

#include <stdint.h>

#include "base/status.h"
#include "grammar/grammar.h"

struct ea_tokenizer;
typedef struct ea_gstep ea_gstep;

/* tok and vocab (the model's rows) are borrowed/copied; *out is NULL until the first mask. */
ea_status ea_gstep_create(const struct ea_tokenizer *tok, int vocab, ea_gstep **out);
void ea_gstep_destroy(ea_gstep *g);
/* row (vocab logits): tokens m does not allow to -inf; end_ids[0..n_end) keep their
 * logit only if m is complete. OUT: *n_allowed (0: no token can continue the text). */
ea_status ea_gstep_mask(ea_gstep *g, ea_gmatcher *m, const int32_t *end_ids, int n_end, float *row, int *n_allowed);
/* m takes token t (not an end id). */
ea_status ea_gstep_accept(ea_gstep *g, ea_gmatcher *m, int32_t t);

#endif
