/* test_moe.c — routing rules on hand-computed cases, and the local backend:
 * grouped execution equals running each token alone, bit for bit, and the
 * combine adds slots in order. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "moe/moe_local.h"
#include "moe/router.h"

static float sc[64];

TEST(softmax_greedy_topk) {
    ea_router r = {.n_experts = 4, .k = 2, .scoring = EA_ROUTE_SOFTMAX, .scale = 1.0f};
    float lg[4] = {1, 3, 2, 0};
    int32_t ids[2];
    float w[2];
    ea_route_token(&r, lg, ids, w, sc);
    double z = exp(1) + exp(3) + exp(2) + exp(0);
    CHECK_EQ(ids[0], 1);
    CHECK_EQ(ids[1], 2);
    CHECK_NEAR(w[0], exp(3) / z, 1e-6);
    CHECK_NEAR(w[1], exp(2) / z, 1e-6);
    r.norm_topk_prob = 1;
    ea_route_token(&r, lg, ids, w, sc);
    CHECK_NEAR(w[0] + w[1], 1.0, 1e-6);
    CHECK_NEAR(w[0], exp(3) / (exp(3) + exp(2)), 1e-6);
}

TEST(ties_pick_lower_id) {
    ea_router r = {.n_experts = 4, .k = 2, .scoring = EA_ROUTE_SOFTMAX, .scale = 1.0f};
    float lg[4] = {0, 1, 1, 1};
    int32_t ids[2];
    float w[2];
    ea_route_token(&r, lg, ids, w, sc);
    CHECK_EQ(ids[0], 1);
    CHECK_EQ(ids[1], 2);
}

/* Route lg with r; the ids must be want (r->k of them, <= 8). */
static void check_ids(const ea_router *r, const float *lg, const int32_t *want) {
    int32_t ids[8];
    float w[8];
    ea_route_token(r, lg, ids, w, sc);
    for (int j = 0; j < r->k; j++)
        if (ids[j] != want[j]) FAIL_("slot %d: expert %d, expected %d", j, (int)ids[j], (int)want[j]);
}

TEST(group_limited_max) {
    /* groups {0,1} {2,3} {4,5} {6,7}; group max 5, 4.4, 4.5, 1 -> keep groups 0 and 2.
     * expert 3 (4.4) beats expert 1 (3.9) but its group is out. */
    ea_router r = {.n_experts = 8, .k = 3, .scoring = EA_ROUTE_SOFTMAX, .method = EA_ROUTE_GROUP_MAX,
                   .n_group = 4, .topk_group = 2, .scale = 1.0f};
    float lg[8] = {5, 3.9f, 0, 4.4f, 4.5f, 0, 1, 0};
    check_ids(&r, lg, (const int32_t[]){0, 4, 1});
}

TEST(noaux_bias_selects_but_does_not_weigh) {
    /* all logits 0 -> sigmoid 0.5; bias makes group 1 ({2,3}) win by top-2 sum */
    float bias[4] = {0, 0, 0.1f, 0.05f};
    ea_router r = {.n_experts = 4, .k = 2, .scoring = EA_ROUTE_SIGMOID, .method = EA_ROUTE_GROUP_TOP2,
                   .n_group = 2, .topk_group = 1, .norm_topk_prob = 1, .denom_eps = 1e-20f,
                   .scale = 2.5f, .bias = bias};
    float lg[4] = {0, 0, 0, 0};
    int32_t ids[2];
    float w[2];
    ea_route_token(&r, lg, ids, w, sc);
    CHECK_EQ(ids[0], 2);
    CHECK_EQ(ids[1], 3);
    CHECK_NEAR(w[0], 1.25, 1e-6);
    CHECK_NEAR(w[1], 1.25, 1e-6);
    /* top-2 sum, not max: group 0 has one high (0.3) but group 1 two medium (0.2+0.2) */
    float bias2[4] = {0.3f, -0.2f, 0.2f, 0.2f};
    r.bias = bias2;
    ea_route_token(&r, lg, ids, w, sc);
    CHECK_EQ(ids[0], 2);
    CHECK_EQ(ids[1], 3);
}

/* Tied group scores keep the lower group index, as the reference does
 * (tests/reference/ref_forward.py: a stable sort of -score; DeepSeek-V3's
 * torch.topk(group_scores) on CPU returns equal values lowest index first). */
TEST(group_ties_keep_lower_group) {
    /* groups {0,1} {2,3} {4,5} {6,7}, all with max 1: keep groups 0 and 1 ->
     * the top 3 of experts 0..3 are 0, 2 (1.0, lower id first) and 3 (0.5);
     * keeping the higher groups would give 4, 6, 7. */
    ea_router r = {.n_experts = 8, .k = 3, .scoring = EA_ROUTE_SOFTMAX, .method = EA_ROUTE_GROUP_MAX,
                   .n_group = 4, .topk_group = 2, .scale = 1.0f};
    float lg[8] = {1, 0, 1, 0.5f, 1, 0.2f, 1, 0.9f};
    check_ids(&r, lg, (const int32_t[]){0, 2, 3});
    /* noaux_tc (sum of the top 2): groups 1 and 2 tie at 0.4 + 0.2 above groups 0
     * and 3; one group kept -> group 1 (experts 2, 3), not group 2 */
    float bias[8] = {0.1f, 0, 0.4f, 0.2f, 0.2f, 0.4f, 0, 0};
    ea_router r2 = {.n_experts = 8, .k = 2, .scoring = EA_ROUTE_SIGMOID, .method = EA_ROUTE_GROUP_TOP2,
                    .n_group = 4, .topk_group = 1, .norm_topk_prob = 1, .denom_eps = 1e-20f, .scale = 1.0f,
                    .bias = bias};
    float z[8] = {0};
    check_ids(&r2, z, (const int32_t[]){2, 3});
}

/* ---- local backend */
enum { H = 32, F = 24, E = 6, K = 3, NT = 9 };
static float wbuf[E][3][H * F];
static ea_ffn_weights ex[E];

static void make_experts(void) {
    uint64_t st = 7;
    for (int e = 0; e < E; e++) {
        for (int m = 0; m < 3; m++)
            for (int i = 0; i < H * F; i++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                wbuf[e][m][i] = ((float)(st >> 40) / 16777216.0f - 0.5f) * 0.3f;
            }
        ea_tensor g = {.name = "gate", .dtype = EA_F32, .n_dims = 2, .shape = {F, H}, .data = wbuf[e][0], .nbytes = sizeof(float) * H * F};
        ea_tensor u = {.name = "up", .dtype = EA_F32, .n_dims = 2, .shape = {F, H}, .data = wbuf[e][1], .nbytes = sizeof(float) * H * F};
        ea_tensor d = {.name = "down", .dtype = EA_F32, .n_dims = 2, .shape = {H, F}, .data = wbuf[e][2], .nbytes = sizeof(float) * H * F};
        ex[e].gate = g;
        ex[e].up = u;
        ex[e].down = d;
    }
}

TEST(local_backend_matches_per_token) {
    make_experts();
    ea_kctx *kc;
    CHECK_EQ(ea_kctx_create(NULL, NT, 64, &kc), EA_OK);
    ea_ffn_weights *layers[1] = {ex};
    ea_moe_local_opts o = {.n_layers = 1, .hidden = H, .ff = F, .n_experts = E, .max_tokens = NT, .max_k = K,
                           .experts = (ea_ffn_weights *const *)layers, .kctx = kc};
    ea_moe_backend *be;
    /* a call may send every token to one expert: a context for fewer rows is refused at create */
    o.max_tokens = NT + 1;
    CHECK_EQ(ea_moe_local_create(&o, &be), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "matmul context") != NULL);
    o.max_tokens = NT;
    CHECK_EQ(ea_moe_local_create(&o, &be), EA_OK);
    float x[NT * H], y[NT * H], y1[H];
    int32_t ids[NT * K];
    float w[NT * K];
    for (int i = 0; i < NT * H; i++) x[i] = sinf((float)i * 0.37f);
    for (int t = 0; t < NT; t++)
        for (int j = 0; j < K; j++) {
            ids[t * K + j] = (t * 5 + j * 2) % E;
            w[t * K + j] = 0.1f + 0.05f * (float)j + 0.01f * (float)t;
        }
    CHECK_EQ(ea_moe_backend_forward(be, 0, x, NT, K, ids, w, y), EA_OK);
    /* each token alone gives the same bits */
    for (int t = 0; t < NT; t++) {
        CHECK_EQ(ea_moe_backend_forward(be, 0, x + t * H, 1, K, ids + t * K, w + t * K, y1), EA_OK);
        CHECK(memcmp(y1, y + t * H, sizeof y1) == 0);
    }
    /* and equals the naive sum in slot order with the reference matmul (close, other kernel) */
    for (int t = 0; t < NT; t++) {
        float acc[H] = {0}, g[F], u[F], d[H];
        for (int j = 0; j < K; j++) {
            const ea_ffn_weights *fw = &ex[ids[t * K + j]];
            ea_k_matmul_ref(&fw->gate, x + t * H, 1, g);
            ea_k_matmul_ref(&fw->up, x + t * H, 1, u);
            ea_k_silu_mul(g, u, F);
            ea_k_matmul_ref(&fw->down, g, 1, d);
            ea_k_axpy(w[t * K + j], d, acc, H);
        }
        for (int i = 0; i < H; i++) CHECK_NEAR(acc[i], y[t * H + i], 1e-5);
    }
    /* an expert id out of range is a clear error, not a crash */
    int32_t bad[K] = {0, 1, E};
    CHECK_EQ(ea_moe_backend_forward(be, 0, x, 1, K, bad, w, y1), EA_ERR_NOT_FOUND);
    ea_moe_backend_destroy(be);
    ea_kctx_destroy(kc);
}

/* The combine is the sum of w[j] * expert_j(x) added in slot order j = 0..k-1,
 * starting from 0.0f (DESIGN.md principle 1), bit for bit: k = 4 terms chosen
 * so that adding them in another order gives other bits for some elements. */
TEST(combine_adds_slots_in_order_exactly) {
    make_experts();
    ea_kctx *kc;
    CHECK_EQ(ea_kctx_create(NULL, NT, 64, &kc), EA_OK);
    ea_ffn_weights *layers[1] = {ex};
    enum { K4 = 4 };
    ea_moe_local_opts o = {.n_layers = 1, .hidden = H, .ff = F, .n_experts = E, .max_tokens = NT, .max_k = K4,
                           .experts = (ea_ffn_weights *const *)layers, .kctx = kc};
    ea_moe_backend *be;
    CHECK_EQ(ea_moe_local_create(&o, &be), EA_OK);
    float x[NT * H], y[NT * H], part[K4][H];
    int32_t ids[NT * K4];
    float w[NT * K4];
    static const float wk[K4] = {0.61f, 0.23f, 0.0917f, 0.0683f};
    for (int i = 0; i < NT * H; i++) x[i] = sinf((float)i * 0.91f) * 1.7f;
    for (int t = 0; t < NT; t++)
        for (int j = 0; j < K4; j++) {
            ids[t * K4 + j] = (t + j * 2 + (j > 1)) % E; /* 4 distinct experts */
            w[t * K4 + j] = wk[j] * (1.0f + 0.013f * (float)t);
        }
    CHECK_EQ(ea_moe_backend_forward(be, 0, x, NT, K4, ids, w, y), EA_OK);
    int order_shows = 0;
    for (int t = 0; t < NT; t++) {
        /* each expert's output alone: k = 1, weight 1 gives 0 + 1 * out = out exactly */
        for (int j = 0; j < K4; j++) {
            float one = 1.0f;
            CHECK_EQ(ea_moe_backend_forward(be, 0, x + t * H, 1, 1, ids + t * K4 + j, &one, part[j]), EA_OK);
        }
        for (int i = 0; i < H; i++) {
            volatile float fwd = 0.0f, rev = 0.0f, p;
            for (int j = 0; j < K4; j++) {
                p = w[t * K4 + j] * part[j][i];
                fwd = fwd + p;
            }
            for (int j = K4 - 1; j >= 0; j--) {
                p = w[t * K4 + j] * part[j][i];
                rev = rev + p;
            }
            order_shows += fwd != rev;
            if (memcmp((const void *)&fwd, &y[t * H + i], sizeof(float)) != 0) {
                FAIL_("token %d element %d: %.9g, slot-order sum %.9g (reverse order %.9g)", t, i, y[t * H + i],
                      (double)fwd, (double)rev);
                t = NT;
                break;
            }
        }
    }
    fprintf(stderr, "  %d of %d elements change with the order of the %d terms\n", order_shows, NT * H, K4);
    CHECK(order_shows >= 10); /* the inputs make the contract observable */
    ea_moe_backend_destroy(be);
    ea_kctx_destroy(kc);
}

/* Slot of logical expert e under p2l (P slots): the first replica, or the last when `last`. */
static int32_t slot_of(const int32_t *p2l, int P, int32_t e, int last) {
    int32_t s = -1;
    for (int p = 0; p < P; p++)
        if (p2l[p] == e && (s < 0 || last)) s = p;
    return s;
}

/* Physical ids under p2l give the logical ids' bits: the backend's slots hold p2l's experts. */
static int same_as_logical(ea_moe_backend *be, ea_moe_backend *ref, const int32_t *p2l, int P) {
    float x[NT * H], y[NT * H], yr[NT * H], w[NT * K];
    int32_t ids[NT * K], phys[NT * K];
    for (int i = 0; i < NT * H; i++) x[i] = cosf((float)i * 0.53f);
    for (int i = 0; i < NT * K; i++) {
        ids[i] = (i * 7 + i / K) % E;
        phys[i] = slot_of(p2l, P, ids[i], i % 2);
        w[i] = 0.2f + 0.03f * (float)(i % K);
    }
    return ea_moe_backend_forward(be, 0, x, NT, K, phys, w, y) == EA_OK &&
           ea_moe_backend_forward(ref, 0, x, NT, K, ids, w, yr) == EA_OK && memcmp(y, yr, sizeof y) == 0;
}

/* apply_placement rebinds a layer's slots to the logical experts of a new row
 * (replicas included); a bad row changes nothing; without logical experts the
 * placement is fixed. */
TEST(local_backend_apply_placement) {
    make_experts();
    enum { P = E + 2 };
    const int32_t a[P] = {5, 4, 3, 2, 1, 0, 0, 3}, b[P] = {0, 1, 2, 3, 4, 5, 1, 1}, bad[P] = {0, 1, 2, 3, 4, E, 1, 1};
    ea_kctx *kc;
    CHECK_EQ(ea_kctx_create(NULL, NT * K, 64, &kc), EA_OK);
    ea_ffn_weights slots[P], *logical[1] = {ex}, *layers[1] = {slots};
    ea_ffn_bind_slots(slots, ex, a, NULL, P);
    ea_moe_local_opts o = {.n_layers = 1, .hidden = H, .ff = F, .n_experts = P, .max_tokens = NT, .max_k = K,
                           .experts = (ea_ffn_weights *const *)layers, .logical = (ea_ffn_weights *const *)logical,
                           .n_logical = E, .kctx = kc};
    ea_moe_local_opts ro = o;
    ro.n_experts = E;
    ro.experts = (ea_ffn_weights *const *)logical;
    ro.logical = NULL;
    ea_moe_backend *be, *ref;
    CHECK_EQ(ea_moe_local_create(&o, &be), EA_OK);
    memset(slots, 0, sizeof slots); /* the backend holds its own copy */
    CHECK_EQ(ea_moe_local_create(&ro, &ref), EA_OK);
    CHECK(same_as_logical(be, ref, a, P));
    CHECK_EQ(ea_moe_apply_placement(be, 0, b, P), EA_OK);
    CHECK(same_as_logical(be, ref, b, P));
    CHECK(!same_as_logical(be, ref, a, P)); /* the inputs show a placement that was not applied */
    CHECK_EQ(ea_moe_apply_placement(be, 0, bad, P), EA_ERR_RANGE);
    CHECK_EQ(ea_moe_apply_placement(be, 0, b, P - 1), EA_ERR_INVALID_ARG);
    CHECK_EQ(ea_moe_apply_placement(be, 1, b, P), EA_ERR_INVALID_ARG);
    CHECK(same_as_logical(be, ref, b, P));
    CHECK_EQ(ea_moe_apply_placement(ref, 0, b, E), EA_ERR_UNSUPPORTED);
    ea_moe_backend_destroy(be);
    ea_moe_backend_destroy(ref);
    ea_kctx_destroy(kc);
}

int main(void) {
    RUN(softmax_greedy_topk);
    RUN(ties_pick_lower_id);
    RUN(group_limited_max);
    RUN(noaux_bias_selects_but_does_not_weigh);
    RUN(group_ties_keep_lower_group);
    RUN(local_backend_matches_per_token);
    RUN(combine_adds_slots_in_order_exactly);
    RUN(local_backend_apply_placement);
    return TEST_SUMMARY();
}
