/*
 * router.h — from router logits to top-k expert ids and weights, for every
 * routing rule the supported families use.
 *
 *   scores  = softmax(logits) | sigmoid(logits)                   (scoring)
 *   choice  = scores (+ bias, noaux_tc only: e_score_correction_bias)
 *   groups  (group-limited methods): experts split into n_group equal groups;
 *           group score = max of choice in the group (group_limited_greedy)
 *                       | sum of the top-2 choices in the group (noaux_tc);
 *           keep the topk_group best groups, the others' experts are excluded
 *   ids     = the k experts with the largest choice, largest first
 *             (ties: lower expert id first)
 *   w       = scores[ids]  (never the bias)
 *   if norm_topk_prob (and k > 1): w /= (sum w + denom_eps)
 *   w *= scale_factor
 *
 * Families map onto it: qwen*_moe/olmoe softmax + greedy, norm per config;
 * mixtral softmax + greedy + norm; deepseek_v2 softmax + group_limited_greedy,
 * routed_scaling_factor only when not normalised; deepseek_v3 sigmoid +
 * noaux_tc + norm + routed_scaling_factor. The model layer fills the struct.
 */
#ifndef EA_ROUTER_H
#define EA_ROUTER_H

#include <stdint.h>

typedef enum { EA_ROUTE_SOFTMAX = 0, EA_ROUTE_SIGMOID = 1 } ea_route_scoring;
typedef enum { EA_ROUTE_GREEDY = 0, EA_ROUTE_GROUP_MAX = 1, EA_ROUTE_GROUP_TOP2 = 2 } ea_route_method;

typedef struct {
    int n_experts;
    int k;
    ea_route_scoring scoring;
    ea_route_method method;
    int n_group, topk_group;
    int norm_topk_prob;
    float denom_eps;        /* added to the sum when normalising (deepseek: 1e-20) */
    float scale;            /* multiplies the final weights (1.0 if none) */
    const float *bias;      /* borrows: (n_experts) selection-only bias, or NULL */
} ea_router;

/* Route one token. logits (n_experts) -> ids (k), w (k). scratch: 2*n_experts floats. */
void ea_route_token(const ea_router *r, const float *logits, int32_t *ids, float *w, float *scratch);

#endif
