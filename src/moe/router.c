/*
 * router.c — see router.h. Selection is a k-pass argmax over the candidates
 * (n_experts <= a few hundred, k <= 16), which gives "largest first, lower id
 * on ties" with no sort and no allocation.
 */
#include "moe/router.h"

#include <math.h>

#include "kernels/ops.h"

static int ea__argmax_masked(const float *v, const uint8_t *excluded, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!excluded[i] && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

void ea_route_token(const ea_router *r, const float *logits, int32_t *ids, float *w, float *scratch) {
    int n = r->n_experts;
    float *scores = scratch;
    float *choice = scratch + n;
    uint8_t excluded[1024];
    for (int i = 0; i < n; i++) scores[i] = logits[i];
    if (r->scoring == EA_ROUTE_SOFTMAX)
        ea_k_softmax(scores, n);
    else
        for (int i = 0; i < n; i++) scores[i] = ea_k_sigmoid(scores[i]);
    for (int i = 0; i < n; i++) {
        choice[i] = r->bias ? scores[i] + r->bias[i] : scores[i];
        excluded[i] = 0;
    }

    if (r->method != EA_ROUTE_GREEDY && r->n_group > 1) {
        int gs = n / r->n_group;
        float gscore[256];
        uint8_t gout[256];
        for (int g = 0; g < r->n_group; g++) {
            const float *c = choice + g * gs;
            int a = 0;
            for (int i = 1; i < gs; i++)
                if (c[i] > c[a]) a = i;
            float s = c[a];
            if (r->method == EA_ROUTE_GROUP_TOP2 && gs > 1) {
                int b = a == 0 ? 1 : 0;
                for (int i = 0; i < gs; i++)
                    if (i != a && c[i] > c[b]) b = i;
                s = c[a] + c[b];
            }
            gscore[g] = s;
            gout[g] = 1;
        }
        for (int kept = 0; kept < r->topk_group; kept++) {
            int best = -1;
            for (int g = 0; g < r->n_group; g++)
                if (gout[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
            gout[best] = 0;
        }
        for (int g = 0; g < r->n_group; g++)
            if (gout[g])
                for (int i = 0; i < gs; i++) excluded[g * gs + i] = 1;
    }

    float sum = 0.0f;
    for (int j = 0; j < r->k; j++) {
        int e = ea__argmax_masked(choice, excluded, n);
        excluded[e] = 1;
        ids[j] = e;
        w[j] = scores[e];
        sum += w[j];
    }
    if (r->norm_topk_prob && r->k > 1) {
        float d = sum + r->denom_eps;
        for (int j = 0; j < r->k; j++) w[j] /= d;
    }
    if (r->scale != 1.0f)
        for (int j = 0; j < r->k; j++) w[j] *= r->scale;
}
