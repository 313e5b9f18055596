/*
 * sampler.h — from logits to the next token, per request, reproducibly.
 *
 * Order of operations (the same as vLLM's sampler):
 *   0. ids with no token (rows of the model's vocabulary past the
 *      tokenizer's tokens: padding) get logit -inf: never drawn, not even
 *      greedily (ea_sampler_forbid*)
 *   1. penalties on the logits: repetition (divide positive / multiply
 *      negative logits of seen tokens), frequency (−f·count of the token in
 *      the output so far), presence (−p if it appeared in the output)
 *   2. temperature == 0: greedy argmax (lowest id on ties); stop here. Also
 *      when 1/temperature overflows a float (temperature < ~3e-39: the limit
 *      T -> 0) or it is NaN
 *   3. logits / temperature -> probabilities (softmax)
 *   4. min_p: drop tokens with p < min_p · p_max
 *   5. top_k: keep the k most probable (ties: lower id first)
 *   6. top_p: keep the smallest prefix (by descending p) whose mass >= top_p
 *   7. draw u in [0,1) from the request's own RNG, walk the kept tokens
 *      (descending p, then id) until the cumulative mass passes u·mass
 *   If no token is left after 4 (the probabilities are NaN: a +inf logit from
 *   a tiny repetition_penalty, or every logit -inf), the argmax: the result is
 *   always an id below the vocabulary.
 * The RNG is xoshiro256** seeded by splitmix64 from the request's seed, so a
 * seed gives the same tokens whatever else runs beside it.
 * Logprobs are of the raw model distribution (log_softmax of the logits
 * after step 0, before step 1), as vLLM reports by default; under a
 * structured-output grammar, of the distribution after its mask.
 */
#ifndef EA_SAMPLER_H
#define EA_SAMPLER_H

#include <stdint.h>

#include "base/status.h"

typedef struct {
    float temperature;        /* 0 = greedy */
    float top_p;              /* 1 = off */
    int top_k;                /* <= 0 = off */
    float min_p;              /* 0 = off */
    float presence_penalty;   /* 0 = off */
    float frequency_penalty;  /* 0 = off */
    float repetition_penalty; /* 1 = off */
    uint64_t seed;
    unsigned given;           /* EA_SP_* bits: fields the request set itself (the model's defaults do not replace them) */
} ea_sampling_params;

enum { EA_SP_TEMPERATURE = 1, EA_SP_TOP_P = 2, EA_SP_TOP_K = 4 };

void ea_sampling_defaults(ea_sampling_params *p);
/* The model's generation_config.json defaults (vLLM's --generation-config auto): each
 * field the request did not set (p->given) takes the model's value where the model
 * has one (temperature/top_p < 0, top_k < 0: none). */
void ea_sampling_model_defaults(ea_sampling_params *p, float temperature, float top_p, int top_k);

typedef struct {
    uint64_t s[4];
} ea_rng;
void ea_rng_seed(ea_rng *r, uint64_t seed);
uint64_t ea_rng_next(ea_rng *r);
/* Uniform in [0, 1) with 24 bits. */
float ea_rng_uniform(ea_rng *r);

typedef struct ea_sampler ea_sampler; /* scratch for one vocabulary; one per step loop */

ea_status ea_sampler_create(int vocab, ea_sampler **out);
void ea_sampler_destroy(ea_sampler *s);
/* Never sample id (0 <= id < vocab). */
ea_status ea_sampler_forbid(ea_sampler *s, int32_t id);
/* Forbid every id in [0, vocab) that tok has no token for (ea_tokenizer_has_token:
 * the one rule every path uses). OUT: *n_forbidden (may be NULL). */
struct ea_tokenizer;
ea_status ea_sampler_forbid_untokenized(ea_sampler *s, const struct ea_tokenizer *tok, int *n_forbidden);
/* Step 0 alone: logits of forbidden ids to -inf (ea_sample does it itself; callers
 * that keep a raw copy for logprobs call it first). */
void ea_sampler_mask(const ea_sampler *s, float *logits);

/* Sample from logits (vocab), modified in place. out_counts (vocab) holds how many times each
 * token appeared in this request's output (NULL if no penalties); prompt_seen (vocab) marks prompt
 * tokens for the repetition penalty (NULL ok). Returns the token. */
int ea_sample(ea_sampler *s, const ea_sampling_params *p, ea_rng *rng, float *logits,
              const int32_t *out_counts, const uint8_t *prompt_seen);

/* log_softmax(logits)[token], and optionally the n best (ids, logprobs), descending. */
float ea_logprob(const float *logits, int vocab, int token, int n_top, int32_t *top_ids, float *top_lp);

#endif
