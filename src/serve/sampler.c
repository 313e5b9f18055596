/*
 * sampler.c — see sampler.h. Scratch (probabilities and candidate ids) is
 * allocated once per vocabulary; ea_sample allocates nothing.
 */
#include "serve/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "tokenizer/tokenizer.h"

struct ea_sampler {
    int vocab;
    float *p;          /* (vocab) */
    int32_t *idx;      /* (vocab) candidate ids */
    int32_t *forbid;   /* owns: (n_forbid) ids never sampled, ascending */
    int n_forbid;
};

void ea_sampling_defaults(ea_sampling_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

void ea_sampling_model_defaults(ea_sampling_params *p, float temperature, float top_p, int top_k) {
    if (!(p->given & EA_SP_TEMPERATURE) && temperature >= 0) p->temperature = temperature;
    if (!(p->given & EA_SP_TOP_P) && top_p >= 0) p->top_p = top_p;
    if (!(p->given & EA_SP_TOP_K) && top_k >= 0) p->top_k = top_k;
}

void ea_rng_seed(ea_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = ea_splitmix64(&seed);
}

static uint64_t ea__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ea_rng_next(ea_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = ea__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ea__rotl(s[3], 45);
    return out;
}

float ea_rng_uniform(ea_rng *r) { return (float)(ea_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

ea_status ea_sampler_create(int vocab, ea_sampler **out) {
    ea_sampler *s = ea_calloc(1, sizeof *s);
    if (!s) return ea_err(EA_ERR_NOMEM, "sampler");
    s->vocab = vocab;
    s->p = ea_malloc(sizeof(float) * (size_t)vocab);
    s->idx = ea_malloc(sizeof(int32_t) * (size_t)vocab);
    if (!s->p || !s->idx) {
        ea_sampler_destroy(s);
        return ea_err(EA_ERR_NOMEM, "sampler for %d tokens", vocab);
    }
    *out = s;
    return EA_OK;
}

void ea_sampler_destroy(ea_sampler *s) {
    if (!s) return;
    ea_free(s->p);
    ea_free(s->idx);
    ea_free(s->forbid);
    ea_free(s);
}

ea_status ea_sampler_forbid(ea_sampler *s, int32_t id) {
    if (id < 0 || id >= s->vocab) return ea_err(EA_ERR_RANGE, "sampler: id %d outside the vocabulary (%d)", id, s->vocab);
    int at = s->n_forbid;
    while (at > 0 && s->forbid[at - 1] > id) at--;
    if (at > 0 && s->forbid[at - 1] == id) return EA_OK;
    int32_t *nf = ea_realloc(s->forbid, sizeof(int32_t) * (size_t)(s->n_forbid + 1));
    if (!nf) return ea_err(EA_ERR_NOMEM, "sampler mask");
    s->forbid = nf;
    memmove(nf + at + 1, nf + at, sizeof(int32_t) * (size_t)(s->n_forbid - at));
    nf[at] = id;
    s->n_forbid++;
    return EA_OK;
}

ea_status ea_sampler_forbid_untokenized(ea_sampler *s, const struct ea_tokenizer *tok, int *n_forbidden) {
    int n = 0;
    for (int32_t id = 0; id < s->vocab; id++)
        if (!ea_tokenizer_has_token(tok, id)) {
            EA_TRY(ea_sampler_forbid(s, id));
            n++;
        }
    if (n_forbidden) *n_forbidden = n;
    return EA_OK;
}

void ea_sampler_mask(const ea_sampler *s, float *logits) {
    for (int i = 0; i < s->n_forbid; i++) logits[s->forbid[i]] = -INFINITY;
}

static const float *ea__cmp_p;
/* descending probability, then ascending id — a total order, so qsort is deterministic */
static int ea__by_p_desc(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float px = ea__cmp_p[x], py = ea__cmp_p[y];
    if (px != py) return px > py ? -1 : 1;
    return (x > y) - (x < y);
}

static int ea__by_p_desc_ids(const float *p, int32_t x, int32_t y) {
    if (p[x] != p[y]) return p[x] > p[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* Sort ids[0..n) by (p desc, id asc). The comparator reads a file-static pointer; the
 * sampler runs on the step-loop thread only. */
static void ea__sort_desc(const float *p, int32_t *ids, int n) {
    ea__cmp_p = p;
    qsort(ids, (size_t)n, sizeof *ids, ea__by_p_desc);
}

/* The k best of ids[0..n) (k < n), sorted, moved to the front: one pass
 * keeping them in a sorted array (k is small: top_k). */
static void ea__select_k(const float *p, int32_t *ids, int n, int k, int32_t *best) {
    int have = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (have == k && ea__by_p_desc_ids(p, id, best[k - 1]) > 0) continue;
        int at = have < k ? have++ : k - 1;
        while (at > 0 && ea__by_p_desc_ids(p, id, best[at - 1]) < 0) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = id;
    }
    memcpy(ids, best, sizeof *ids * (size_t)k);
}

/* Puts the first ids of the order (p desc, id asc) at the front, sorted, and
 * returns how many: the k best when k < n; else (top_p < 1) at least the
 * prefix whose mass reaches top_p. The rest stays unsorted. Sorting all of a
 * 150k vocabulary for every sampled token is what this avoids: the prefix
 * depends only on the order, so the token drawn is the same. */
static int ea__sort_prefix(const float *p, int32_t *ids, int n, int k, float top_p) {
    if (k < n && k <= 1024) {
        int32_t *best = malloc(sizeof *best * (size_t)k);
        if (best) {
            ea__select_k(p, ids, n, k, best);
            free(best);
            return k;
        }
    }
    if (k < n || top_p >= 1.0f) {
        ea__sort_desc(p, ids, n);
        return k < n ? k : n;
    }
    /* top_p only: the ids at or above a threshold whose mass exceeds top_p hold
     * the prefix; halve the threshold until they do */
    float pmax = 0.0f;
    for (int i = 0; i < n; i++) pmax = p[ids[i]] > pmax ? p[ids[i]] : pmax;
    for (float t = pmax * 0.5f; t > 1e-30f; t *= 0.5f) {
        double mass = 0.0;
        int m = 0;
        for (int i = 0; i < n; i++)
            if (p[ids[i]] >= t) mass += p[ids[i]], m++;
        if (mass < (double)top_p + 1e-3 && m < n) continue;
        for (int i = 0, j = 0; i < n; i++) /* partition: ids at or above t first */
            if (p[ids[i]] >= t) {
                int32_t x = ids[j];
                ids[j++] = ids[i];
                ids[i] = x;
            }
        ea__sort_desc(p, ids, m);
        float cum = 0.0f;
        for (int i = 0; i < m; i++)
            if ((cum += p[ids[i]]) >= top_p) return m;
        break; /* rounding left the prefix short: sort all */
    }
    ea__sort_desc(p, ids, n);
    return n;
}

/* The first id of the largest logit; whatever NaNs it holds, an id below V. */
static int argmax(const float *logits, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

int ea_sample(ea_sampler *s, const ea_sampling_params *p, ea_rng *rng, float *logits,
              const int32_t *out_counts, const uint8_t *prompt_seen) {
    int V = s->vocab;
    ea_sampler_mask(s, logits);
    if (p->repetition_penalty != 1.0f && (out_counts || prompt_seen))
        for (int i = 0; i < V; i++)
            if ((out_counts && out_counts[i] > 0) || (prompt_seen && prompt_seen[i]))
                logits[i] = logits[i] > 0 ? logits[i] / p->repetition_penalty : logits[i] * p->repetition_penalty;
    if (out_counts && (p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f))
        for (int i = 0; i < V; i++)
            if (out_counts[i] > 0)
                logits[i] -= p->frequency_penalty * (float)out_counts[i] + p->presence_penalty;

    /* greedy: temperature 0, or so small that 1/T overflows (the limit T -> 0; the softmax
     * below would be NaN), or NaN */
    if (!(p->temperature > 0.0f) || !(1.0f / p->temperature <= FLT_MAX)) return argmax(logits, V);

    float m = logits[0];
    for (int i = 1; i < V; i++) m = logits[i] > m ? logits[i] : m;
    float inv_t = 1.0f / p->temperature, sum = 0.0f;
    for (int i = 0; i < V; i++) {
        s->p[i] = expf((logits[i] - m) * inv_t);
        sum += s->p[i];
    }
    for (int i = 0; i < V; i++) s->p[i] /= sum;

    /* candidates: min_p filter first (cheap), then sort only if top_k/top_p need an order */
    float pmax = expf(0.0f) / sum; /* the max token's probability */
    float floor_p = p->min_p > 0.0f ? p->min_p * pmax : 0.0f;
    int n = 0;
    for (int i = 0; i < V; i++)
        if (s->p[i] >= floor_p && s->p[i] > 0.0f) s->idx[n++] = i;
    /* nothing survived: the probabilities are NaN (a +inf logit, from a tiny
     * repetition_penalty, or every logit -inf). The argmax is still a token of the
     * vocabulary, the same on every rank. */
    if (n == 0) return argmax(logits, V);
    int need_order = (p->top_k > 0 && p->top_k < n) || p->top_p < 1.0f;
    if (need_order) {
        int sorted = ea__sort_prefix(s->p, s->idx, n, p->top_k > 0 && p->top_k < n ? p->top_k : n, p->top_p);
        n = sorted;
        if (p->top_p < 1.0f) {
            float cum = 0.0f;
            int keep = n;
            for (int i = 0; i < n; i++) {
                cum += s->p[s->idx[i]];
                if (cum >= p->top_p) {
                    keep = i + 1;
                    break;
                }
            }
            n = keep;
        }
    }
    float mass = 0.0f;
    for (int i = 0; i < n; i++) mass += s->p[s->idx[i]];
    float u = ea_rng_uniform(rng) * mass, cum = 0.0f;
    for (int i = 0; i < n; i++) {
        cum += s->p[s->idx[i]];
        if (u < cum) return s->idx[i];
    }
    return s->idx[n - 1];
}

float ea_logprob(const float *logits, int vocab, int token, int n_top, int32_t *top_ids, float *top_lp) {
    float m = logits[0];
    for (int i = 1; i < vocab; i++) m = logits[i] > m ? logits[i] : m;
    double sum = 0.0;
    for (int i = 0; i < vocab; i++) sum += exp((double)(logits[i] - m));
    float lse = m + (float)log(sum);
    /* one pass keeping the n_top best in a sorted array (value desc, id asc) */
    int have = 0;
    for (int i = 0; i < vocab && n_top > 0; i++) {
        if (have == n_top && !(logits[i] > logits[top_ids[have - 1]])) continue;
        int at = have < n_top ? have++ : have - 1;
        while (at > 0 && logits[i] > logits[top_ids[at - 1]]) {
            top_ids[at] = top_ids[at - 1];
            at--;
        }
        top_ids[at] = i;
    }
    for (int j = 0; j < have; j++) top_lp[j] = logits[top_ids[j]] - lse;
    return logits[token] - lse;
}
