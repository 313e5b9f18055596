/*
 * test_eplb.c — unit tests of src/eplb/: the reference algorithm's steps on
 * hand-checked inputs, the refined algorithm's guarantees on random workloads,
 * the metadata invariants (table-driven: each corruption must be reported as
 * the first violation at the right layer/slot/expert), the dispatch map
 * (holds the expert, nearest first, even spread), the text readers' errors,
 * the recorder's window arithmetic, and the manager's decisions including the
 * keep-the-old-placement paths under injected failures.
 * The golden comparison with ../shared/eplb/expected is tests/golden/test_eplb_reference.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "eplb/eplb.h"
#include "eplb/eplb_backend.h"
#include "eplb/eplb_internal.h"
#include "eplb/manager.h"
#include "eplb/meta.h"
#include "eplb/recorder.h"
#include "eplb/textio.h"
#include "harness.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* ---- reference steps ---- */

TEST(sort_is_stable_descending) {
    float x[] = {1, 3, 3, 0, 3, 2, 1};
    int32_t idx[7], tmp[7];
    ea__eplb_sort_desc(x, 7, idx, tmp);
    int32_t want[] = {1, 2, 4, 5, 0, 6, 3};
    for (int i = 0; i < 7; i++) CHECK_EQ(idx[i], want[i]);
}

TEST(replicate_picks_heaviest_per_replica_first_index_on_ties) {
    /* seed 004's example: 8 experts, 10 slots, experts 2 and 5 hot */
    ea_eplb_shape s = {1, 8, 10, 1, 1, 2};
    ea_eplb_ws *ws;
    CHECK_EQ(ea_eplb_ws_create(&s, &ws), EA_OK);
    float x[8] = {1, 1, 9, 1, 1, 9, 1, 1};
    int32_t p2l[10], rk[10], cnt[8];
    ea__eplb_replicate(ws, x, 8, 10, p2l, rk, cnt);
    CHECK_EQ(p2l[8], 2); /* tie 9 vs 9: first index */
    CHECK_EQ(p2l[9], 5); /* then 9 > 4.5 */
    CHECK_EQ(rk[8], 1);
    CHECK_EQ(rk[9], 1);
    CHECK_EQ(cnt[2], 2);
    CHECK_EQ(cnt[5], 2);
    CHECK_EQ(cnt[0], 1);
    ea_eplb_ws_destroy(ws);
}

TEST(pack_balances_with_lowest_pack_on_ties) {
    ea_eplb_shape s = {1, 4, 4, 1, 1, 2};
    ea_eplb_ws *ws;
    CHECK_EQ(ea_eplb_ws_create(&s, &ws), EA_OK);
    float x[4] = {5, 4, 3, 2};
    int32_t pack[4], rank[4];
    ea__eplb_pack(ws, x, 4, 2, pack, rank);
    /* 5 -> pack0, 4 -> pack1, 3 -> pack1 (4 < 5), 2 -> pack0 (full pack1) */
    CHECK_EQ(pack[0], 0);
    CHECK_EQ(pack[1], 1);
    CHECK_EQ(pack[2], 1);
    CHECK_EQ(pack[3], 0);
    CHECK_EQ(rank[0], 0);
    CHECK_EQ(rank[2], 1);
    CHECK_EQ(rank[3], 1);
    ea_eplb_ws_destroy(ws);
}

TEST(shape_preconditions_named) {
    ea_eplb_shape bad[] = {
        {1, 8, 10, 3, 1, 2}, /* E % groups */
        {1, 8, 10, 2, 1, 3}, /* P % ranks */
        {1, 8, 7, 1, 1, 1},  /* P < E */
        {1, 8, 8 + 129, 1, 1, 1}, /* R > 128 */
        {1, 8, 12, 4, 2, 3}, /* ranks % nodes */
        {0, 8, 8, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_EQ(ea_eplb_shape_check(&bad[i]), EA_ERR_INVALID_ARG);
    ea_eplb_shape ok = {2, 8, 10, 2, 2, 2};
    CHECK_EQ(ea_eplb_shape_check(&ok), EA_OK);
    ea_eplb_shape glob = {2, 8, 10, 3, 2, 2};
    CHECK_EQ(ea_eplb_shape_policy(&glob), 0);
    CHECK_EQ(glob.n_groups, 1);
    CHECK_EQ(glob.n_nodes, 1);
}

/* Random workloads over random valid shapes: both algorithms give valid
 * placements (metadata builds), refined is never worse per layer, and the
 * algorithms allocate nothing. */
TEST(random_shapes_valid_and_refined_never_worse) {
    int n_run = 0, n_hier = 0;
    for (int it = 0; it < 120; it++) {
        int nodes = 1 + (int)(rnd() % 3), rpn = 1 + (int)(rnd() % 3), ranks = nodes * rpn;
        int gpn = 1 + (int)(rnd() % 3), groups = nodes * gpn, gs = 1 + (int)(rnd() % 4);
        int E = groups * gs;
        int spr = (E + ranks - 1) / ranks + (int)(rnd() % 3); /* slots per rank */
        int P = spr * ranks;
        if (P - E > 128) continue;
        if (it % 4 == 0) { groups = 1; nodes = 1; }
        int L = 1 + (int)(rnd() % 4);
        ea_eplb_shape s = {L, E, P, groups, nodes, ranks};
        if (ea_eplb_shape_check(&s) != EA_OK) continue;
        n_run++;
        n_hier += nodes > 1;
        int64_t *c = ea_malloc((size_t)L * E * sizeof *c);
        for (int i = 0; i < L * E; i++) {
            uint32_t r = rnd() % 100;
            c[i] = r < 10 ? 0 : r < 80 ? (int64_t)(rnd() % 100) : (int64_t)(rnd() % 10000);
        }
        ea_eplb_ws *ws;
        ea_eplb_placement a, b;
        CHECK_EQ(ea_eplb_ws_create(&s, &ws), EA_OK);
        CHECK_EQ(ea_eplb_placement_init(&a, L, E, P), EA_OK);
        CHECK_EQ(ea_eplb_placement_init(&b, L, E, P), EA_OK);
        uint64_t n0 = ea_alloc_count();
        CHECK_EQ(ea_eplb_rebalance(ws, EA_EPLB_DEEPSEEK, c, &a), EA_OK);
        CHECK_EQ(ea_eplb_rebalance(ws, EA_EPLB_REFINED, c, &b), EA_OK);
        CHECK_EQ(ea_alloc_count(), n0);
        ea_eplb_meta ma, mb;
        CHECK_EQ(ea_eplb_meta_init_from_placement(&ma, &a, ranks, nodes), EA_OK);
        CHECK_EQ(ea_eplb_meta_init_from_placement(&mb, &b, ranks, nodes), EA_OK);
        double ba[4], bb[4];
        ea_eplb_score sa, sb;
        CHECK_EQ(ea_eplb_score_placement(&a, c, ranks, ba, &sa), EA_OK);
        CHECK_EQ(ea_eplb_score_placement(&b, c, ranks, bb, &sb), EA_OK);
        for (int l = 0; l < L; l++) CHECK(bb[l] >= ba[l]);
        /* refined keeps a replica of every expert on its home node (the node of the
         * reference's replica 0), so group-limited routing stays node-local */
        int ppn = P / s.n_nodes;
        for (int l = 0; l < L; l++)
            for (int p = 0; p < P; p++) {
                if (a.phyrank[l * P + p] != 0) continue;
                int e = a.phy2log[l * P + p], home = p / ppn, found = 0;
                for (int q = home * ppn; q < (home + 1) * ppn; q++) found |= b.phy2log[l * P + q] == e;
                CHECK(found);
            }
        ea_eplb_meta_deinit(&ma);
        ea_eplb_meta_deinit(&mb);
        ea_eplb_placement_deinit(&a);
        ea_eplb_placement_deinit(&b);
        ea_eplb_ws_destroy(ws);
        ea_free(c);
    }
    CHECK(n_run >= 60);
    CHECK(n_hier >= 20);
}

TEST(refined_strictly_better_on_a_skewed_case) {
    /* 6 experts on 2 ranks of 3 slots, no redundancy. Reference (LPT with room):
     * 9 -> r0, 7 -> r1, 6 -> r1, 5 -> r0, 4 -> r1 (13 < 14, r1 now full), 1 -> r0:
     * r0 = 9+5+1 = 15, r1 = 7+6+4 = 17. One swap reaches the optimum 16 | 16. */
    int64_t c[] = {9, 7, 6, 5, 4, 1};
    ea_eplb_shape s = {1, 6, 6, 1, 1, 2};
    ea_eplb_ws *ws;
    ea_eplb_placement a, b;
    CHECK_EQ(ea_eplb_ws_create(&s, &ws), EA_OK);
    CHECK_EQ(ea_eplb_placement_init(&a, 1, 6, 6), EA_OK);
    CHECK_EQ(ea_eplb_placement_init(&b, 1, 6, 6), EA_OK);
    CHECK_EQ(ea_eplb_rebalance(ws, EA_EPLB_DEEPSEEK, c, &a), EA_OK);
    CHECK_EQ(ea_eplb_rebalance(ws, EA_EPLB_REFINED, c, &b), EA_OK);
    double ma = ea_eplb_layer_max_load(a.phy2log, a.logcnt, c, 6, 2);
    double mb = ea_eplb_layer_max_load(b.phy2log, b.logcnt, c, 6, 2);
    CHECK_NEAR(ma, 17.0, 0);
    CHECK_NEAR(mb, 16.0, 0);
    ea_eplb_placement_deinit(&a);
    ea_eplb_placement_deinit(&b);
    ea_eplb_ws_destroy(ws);
}

TEST(workspace_create_survives_every_allocation_failure) {
    ea_eplb_shape s = {4, 16, 20, 4, 2, 4};
    for (long n = 0; n < 40; n++) {
        ea_eplb_ws *ws = NULL;
        ea_alloc_fail_after(n);
        ea_status st = ea_eplb_ws_create(&s, &ws);
        ea_alloc_fail_after(-1);
        if (st == EA_OK) {
            ea_eplb_ws_destroy(ws);
            break;
        }
        CHECK_EQ(st, EA_ERR_NOMEM);
        CHECK(ws == NULL);
    }
}

/* ---- metadata: invariants, table-driven ---- */

typedef struct {
    const char *name;
    void (*corrupt)(ea_eplb_meta *m);
    int layer, slot, expert, rank;
} viol_case;

/* base: L=2, E=4, P=8, ranks=4, nodes=2; layer 1 phy2log = 0 1 2 3 0 1 2 3 */
static void c_p2l_range(ea_eplb_meta *m) { m->phy2log[1 * 8 + 5] = 7; }
static void c_p2l_disagree(ea_eplb_meta *m) { m->phy2log[1 * 8 + 6] = 3; }
static void c_no_replica(ea_eplb_meta *m) { m->log2all_n[1 * 4 + 2] = 0; }
static void c_pad(ea_eplb_meta *m) { m->log2all[(1 * 4 + 0) * m->stride + 3] = 5; }
static void c_dup(ea_eplb_meta *m) { m->log2all[(1 * 4 + 1) * m->stride + 1] = 1; }
static void c_disp_wrong(ea_eplb_meta *m) { m->dispatch[(1 * 4 + 3) * 4 + 2] = 2; }
static void c_disp_not_near(ea_eplb_meta *m) { m->dispatch[(1 * 4 + 0) * 4 + 0] = 4; } /* rank 0 has slot 0 */
static void c_first_layer0(ea_eplb_meta *m) {
    m->phy2log[0 * 8 + 3] = 9;
    m->phy2log[1 * 8 + 0] = 9;
}

TEST(metadata_invariants_first_violation) {
    viol_case cases[] = {
        {"phy2log out of range", c_p2l_range, 1, 5, 7, -1},
        {"phy2log disagrees with log2all", c_p2l_disagree, 1, 6, 2, -1},
        {"expert without replica", c_no_replica, 1, -1, 2, -1},
        {"padding not -1", c_pad, 1, 5, 0, -1},
        {"slot listed twice", c_dup, 1, 1, 1, -1},
        {"dispatch holds another expert", c_disp_wrong, 1, 2, 3, 2},
        {"dispatch not nearest", c_disp_not_near, 1, 4, 0, 0},
        {"first layer reported first", c_first_layer0, 0, 3, 9, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ea_eplb_meta m;
        CHECK_EQ(ea_eplb_meta_init_trivial(&m, 2, 4, 8, 4, 2), EA_OK);
        ea_eplb_violation v;
        CHECK_EQ(ea_eplb_meta_check(&m, &v), EA_OK);
        cases[i].corrupt(&m);
        ea_status st = ea_eplb_meta_check(&m, &v);
        if (st != EA_ERR_FORMAT || v.layer != cases[i].layer || v.slot != cases[i].slot ||
            v.expert != cases[i].expert || v.rank != cases[i].rank) {
            fprintf(stderr, "  case '%s': got st %d layer %d slot %d expert %d rank %d (%s)\n", cases[i].name, st,
                    v.layer, v.slot, v.expert, v.rank, ea_errmsg());
            ea_eplb_meta_deinit(&m);
            CHECK(0);
        }
        CHECK(strstr(ea_errmsg(), "layer") != NULL);
        ea_eplb_meta_deinit(&m);
    }
}

TEST(metadata_shape_invariants) {
    struct { int L, E, P, ranks, nodes; ea_status want; } t[] = {
        {2, 8, 8, 4, 2, EA_OK},             /* R = 0 */
        {2, 8, 136, 8, 1, EA_OK},           /* R = 128 */
        {2, 8, 137, 1, 1, EA_ERR_FORMAT},   /* R = 129 */
        {2, 8, 7, 1, 1, EA_ERR_FORMAT},     /* R < 0 */
        {2, 8, 10, 4, 1, EA_ERR_FORMAT},    /* P % ranks */
        {2, 8, 12, 4, 3, EA_ERR_FORMAT},    /* ranks % nodes */
        {0, 8, 8, 4, 1, EA_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ea_eplb_meta m;
        ea_status st = ea_eplb_meta_init_trivial(&m, t[i].L, t[i].E, t[i].P, t[i].ranks, t[i].nodes);
        if (st != t[i].want) fprintf(stderr, "  row %zu: %d (%s)\n", i, st, ea_errmsg());
        CHECK_EQ(st, t[i].want);
        if (st == EA_OK) {
            CHECK_EQ(ea_eplb_meta_check(&m, NULL), EA_OK);
            ea_eplb_meta_deinit(&m);
        }
    }
}

TEST(set_layer_rejects_bad_rows_and_keeps_the_old_layer) {
    ea_eplb_meta m;
    CHECK_EQ(ea_eplb_meta_init_trivial(&m, 1, 4, 8, 4, 1), EA_OK);
    int32_t missing[8] = {0, 1, 1, 0, 0, 1, 3, 3}; /* expert 2 has no replica */
    ea_eplb_violation v;
    CHECK_EQ(ea_eplb_meta_set_layer(&m, 0, missing, NULL), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "expert 2") != NULL);
    int32_t dup_rank[8] = {0, 1, 2, 3, 0, 1, 2, 3}, prk[8] = {0, 0, 0, 0, 1, 1, 0, 1}; /* expert 2 rank 0 twice */
    CHECK_EQ(ea_eplb_meta_set_layer(&m, 0, dup_rank, prk), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "slot 6 expert 2") != NULL);
    for (int p = 0; p < 8; p++) CHECK_EQ(m.phy2log[p], p % 4);
    CHECK_EQ(ea_eplb_meta_check(&m, &v), EA_OK);
    ea_eplb_meta_deinit(&m);
}

/* ---- dispatch ---- */

/* A placement whose slots do not split over the ranks cannot be scored (P % ranks != 0). */
TEST(score_refuses_slots_that_do_not_split_over_ranks) {
    ea_eplb_placement pl;
    CHECK_EQ(ea_eplb_placement_init(&pl, 1, 4, 6), EA_OK);
    ea_eplb_placement_trivial(&pl);
    int64_t counts[4] = {5, 1, 1, 1};
    double per_layer[1];
    ea_eplb_score sc;
    CHECK_EQ(ea_eplb_score_placement(&pl, counts, 3, per_layer, &sc), EA_OK);
    CHECK_EQ(ea_eplb_score_placement(&pl, counts, 4, per_layer, &sc), EA_ERR_INVALID_ARG);
    ea_eplb_placement_deinit(&pl);
}

/* The validator: a rank that holds a replica must dispatch to it, not to another rank's. */
TEST(metadata_remote_dispatch_with_a_local_replica_is_a_violation) {
    /* E=2, P=8, 4 ranks, 2 nodes: expert 1 has a replica on every rank (dispatch_hand_example) */
    ea_eplb_meta m;
    CHECK_EQ(ea_eplb_meta_init(&m, 1, 2, 8, 4, 2), EA_OK);
    int32_t p2l[8] = {0, 1, 1, 1, 1, 1, 0, 1};
    CHECK_EQ(ea_eplb_meta_set_layer(&m, 0, p2l, NULL), EA_OK);
    ea_eplb_violation v;
    CHECK_EQ(ea_eplb_meta_check(&m, &v), EA_OK);
    m.dispatch[1 * 4 + 1] = 7; /* rank 1 sends expert 1 to slot 7 (rank 3) although its slot 2 holds it */
    CHECK_EQ(ea_eplb_meta_check(&m, &v), EA_ERR_FORMAT);
    CHECK_EQ(v.expert, 1);
    CHECK_EQ(v.rank, 1);
    CHECK(strstr(ea_errmsg(), "remote but rank 1 has a replica") != NULL);
    ea_eplb_meta_deinit(&m);
}

TEST(dispatch_hand_example) {
    /* E=2, P=8, 4 ranks (2 slots each), 2 nodes (ranks 0,1 | 2,3).
     * expert 0: slots 0 (rank 0) and 6 (rank 3); expert 1: the other six slots. */
    ea_eplb_meta m;
    CHECK_EQ(ea_eplb_meta_init(&m, 1, 2, 8, 4, 2), EA_OK);
    int32_t p2l[8] = {0, 1, 1, 1, 1, 1, 0, 1};
    CHECK_EQ(ea_eplb_meta_set_layer(&m, 0, p2l, NULL), EA_OK);
    int32_t want0[4] = {0, 0, 6, 6}; /* rank1: same node -> slot 0; rank2: same node -> slot 6 */
    for (int r = 0; r < 4; r++) CHECK_EQ(m.dispatch[0 * 4 + r], want0[r]);
    int32_t want1[4] = {1, 2, 4, 7}; /* each rank has its own replica: lowest local slot */
    for (int r = 0; r < 4; r++) CHECK_EQ(m.dispatch[1 * 4 + r], want1[r]);
    int32_t ids[5] = {1, 0, -1, 2, 0}, phys[5];
    ea_eplb_meta_map(&m, 0, 1, ids, 5, phys);
    int32_t want_phys[5] = {2, 0, -1, -1, 0};
    for (int i = 0; i < 5; i++) CHECK_EQ(phys[i], want_phys[i]);
    ea_eplb_meta_deinit(&m);
}

TEST(dispatch_remote_spread_round_robin) {
    /* 8 ranks, 4 nodes, 1 slot per rank... P=8 E=5: expert 0 on slots 0 and 1 (node 0 only).
     * Ranks 2..7 have no replica on their node: they take 0,1,0,1,0,1 in rank order. */
    ea_eplb_meta m;
    CHECK_EQ(ea_eplb_meta_init(&m, 1, 5, 8, 8, 4), EA_OK);
    int32_t p2l[8] = {0, 0, 1, 2, 3, 4, 1, 2};
    CHECK_EQ(ea_eplb_meta_set_layer(&m, 0, p2l, NULL), EA_OK);
    int32_t want[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    for (int r = 0; r < 8; r++) CHECK_EQ(m.dispatch[0 * 8 + r], want[r]);
    ea_eplb_meta_deinit(&m);
}

TEST(dispatch_same_node_ascending_slots) {
    /* 8 ranks of one slot, one node; expert 0 on slots 1, 3, 4, listed in replica
     * (phyrank) order 4, 3, 1. Ranks 0, 2, 5, 6, 7 have no replica: in ascending
     * rank order they are dealt the node's slots in ascending slot order (meta.h),
     * not in replica order and not descending: 1, 3, 4, 1, 3. */
    ea_eplb_meta m;
    CHECK_EQ(ea_eplb_meta_init(&m, 1, 6, 8, 8, 1), EA_OK);
    int32_t p2l[8] = {1, 0, 2, 0, 0, 3, 4, 5}, prk[8] = {0, 2, 0, 1, 0, 0, 0, 0};
    CHECK_EQ(ea_eplb_meta_set_layer(&m, 0, p2l, prk), EA_OK);
    CHECK_EQ(m.log2all[0], 4); /* replica order kept in log2all */
    int32_t want[8] = {1, 1, 3, 3, 4, 4, 1, 3};
    for (int r = 0; r < 8; r++) CHECK_EQ(m.dispatch[0 * 8 + r], want[r]);
    ea_eplb_meta_deinit(&m);
}

/* Property test on random placements: the choice holds the expert; if the rank
 * has a replica the choice is on it, else if its node has one the choice is in
 * the node; and within each tier the candidates' use counts differ by <= 1. */
TEST(dispatch_properties_random) {
    for (int it = 0; it < 300; it++) {
        int nodes = 1 + (int)(rnd() % 3), ranks = nodes * (1 + (int)(rnd() % 3)), spr = 1 + (int)(rnd() % 4);
        int P = ranks * spr, E = 1 + (int)(rnd() % (unsigned)P);
        int32_t *p2l = ea_malloc((size_t)P * sizeof *p2l);
        for (int p = 0; p < P; p++) p2l[p] = p < E ? p : (int32_t)(rnd() % (unsigned)E);
        for (int p = P - 1; p > 0; p--) { /* shuffle */
            int q = (int)(rnd() % (unsigned)(p + 1));
            int32_t t = p2l[p];
            p2l[p] = p2l[q];
            p2l[q] = t;
        }
        ea_eplb_meta m;
        CHECK_EQ(ea_eplb_meta_init(&m, 1, E, P, ranks, nodes), EA_OK);
        CHECK_EQ(ea_eplb_meta_set_layer(&m, 0, p2l, NULL), EA_OK);
        int rpn = ranks / nodes;
        for (int e = 0; e < E; e++) {
            int uses[64] = {0}; /* per slot, per tier: tier*... keep simple: count per slot per tier */
            int uses_node[64] = {0}, uses_remote[64] = {0};
            for (int r = 0; r < ranks; r++) {
                int s = m.dispatch[e * ranks + r];
                CHECK_EQ(m.phy2log[s], e);
                int local = 0, innode = 0;
                for (int p = 0; p < P; p++)
                    if (p2l[p] == e) {
                        local |= p / spr == r;
                        innode |= p / spr / rpn == r / rpn;
                    }
                if (local) {
                    CHECK_EQ(s / spr, r);
                    uses[s]++;
                } else if (innode) {
                    CHECK_EQ(s / spr / rpn, r / rpn);
                    uses_node[s]++;
                } else {
                    uses_remote[s]++;
                }
            }
            /* remote tier: every replica used, counts within 1 */
            int mn = 1 << 30, mx = 0, any = 0;
            for (int p = 0; p < P; p++) any += uses_remote[p];
            if (any)
                for (int p = 0; p < P; p++)
                    if (p2l[p] == e) {
                        if (uses_remote[p] < mn) mn = uses_remote[p];
                        if (uses_remote[p] > mx) mx = uses_remote[p];
                    }
            if (any) CHECK(mx - mn <= 1);
            /* node tier, per node */
            for (int n = 0; n < nodes; n++) {
                int nmn = 1 << 30, nmx = 0, nany = 0;
                for (int p = n * rpn * spr; p < (n + 1) * rpn * spr; p++) nany += uses_node[p];
                if (!nany) continue;
                for (int p = n * rpn * spr; p < (n + 1) * rpn * spr; p++)
                    if (p2l[p] == e) {
                        if (uses_node[p] < nmn) nmn = uses_node[p];
                        if (uses_node[p] > nmx) nmx = uses_node[p];
                    }
                CHECK(nmx - nmn <= 1);
            }
        }
        CHECK_EQ(ea_eplb_meta_check(&m, NULL), EA_OK);
        ea_eplb_meta_deinit(&m);
        ea_free(p2l);
    }
}

/* ---- text formats ---- */

TEST(workload_errors_name_file_and_line) {
    struct { const char *text, *want; } t[] = {
        {"# c\n2 3\n1 2 3\n4 5\n", "w.txt:4: expected 3 integers"},
        {"2 3\n1 2 3\n4 -5 6\n", "w.txt:3: negative value -5"},
        {"2 3\n1 2 3\n", "w.txt:2: truncated"},
        {"2 3\n1 2 3\n4 x 6\n", "w.txt:3: 'x' is not an integer"},
        {"1 2\n1 2\n3 4\n", "w.txt:3: unexpected data"},
        {"", "w.txt:0: empty"},
        {"0 3\n", "w.txt:1: value 0 out of range"},
        {"60000 60000\n1 2\n", "w.txt:1: truncated: header says 60000 x 60000"},
        {"1 2\n99999999999999999999 1\n", "w.txt:2: value"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int L, E;
        int64_t *c;
        ea_status st = ea_eplb_workload_parse(t[i].text, strlen(t[i].text), "w.txt", &L, &E, &c);
        CHECK_EQ(st, EA_ERR_FORMAT);
        if (!strstr(ea_errmsg(), t[i].want)) fprintf(stderr, "  want '%s' in '%s'\n", t[i].want, ea_errmsg());
        CHECK(strstr(ea_errmsg(), t[i].want) != NULL);
    }
    int L, E;
    int64_t *c;
    const char *ok = "# comment\n2 3\n1 2 3\n\n4 5 6\n";
    CHECK_EQ(ea_eplb_workload_parse(ok, strlen(ok), "w.txt", &L, &E, &c), EA_OK);
    CHECK_EQ(L, 2);
    CHECK_EQ(E, 3);
    CHECK_EQ(c[5], 6);
    ea_free(c);
}

TEST(placement_roundtrip_and_errors) {
    /* L=1 E=3 P=4: slots 0 1 2 0 */
    const char *ok = "# x\n1 3 4 2\n0 1 2 0\n2 1 1\n0 3\n1 -1\n2 -1\n";
    ea_eplb_placement pl;
    CHECK_EQ(ea_eplb_placement_parse(ok, strlen(ok), "p.txt", &pl), EA_OK);
    CHECK_EQ(pl.phyrank[3], 1);
    char buf[256];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    CHECK_EQ(ea_eplb_placement_write(f, "# x\n", &pl), EA_OK);
    fclose(f);
    CHECK_STREQ(buf, ok);
    ea_eplb_placement_deinit(&pl);
    struct { const char *text, *want; } t[] = {
        {"1 3 4 2\n0 1 2 0\n2 1 1\n0 3\n1 -1\n", "p.txt:5: truncated"},
        {"1 3 4 2\n0 1 2 5\n2 1 1\n0 3\n1 -1\n2 -1\n", "p.txt:2: value 5 out of range"},
        {"1 3 4 2\n0 1 2 0\n1 1 1\n0 3\n1 -1\n2 -1\n", "p.txt:3: layer 0 expert 0: logcnt 1 but 2 slots"},
        {"1 3 4 2\n0 1 2 0\n2 1 1\n0 2\n1 -1\n2 -1\n", "p.txt:4: layer 0 expert 0: replica 1 is slot 2, which holds expert 2"},
        {"1 3 4 2\n0 1 2 0\n2 1 1\n0 3\n1 3\n2 -1\n", "p.txt:5: layer 0 expert 1: replica 1 is slot 3"},
        {"1 3 4 2\n0 1 2 0\n2 1 1\n0 0\n1 -1\n2 -1\n", "slot 0 listed twice"},
        {"1 3 4 2\n0 1 1 0\n2 2 0\n0 3\n1 2\n-1 -1\n", "p.txt:3: value 0 out of range [1, 2]"},
        {"1 3 200 2\n", "p.txt:1: P 200 must be in"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ea_status st = ea_eplb_placement_parse(t[i].text, strlen(t[i].text), "p.txt", &pl);
        CHECK_EQ(st, EA_ERR_FORMAT);
        if (!strstr(ea_errmsg(), t[i].want)) fprintf(stderr, "  want '%s' in '%s'\n", t[i].want, ea_errmsg());
        CHECK(strstr(ea_errmsg(), t[i].want) != NULL);
    }
}

TEST(metadata_from_file_and_algorithm_agree) {
    int64_t c[2 * 8] = {50, 1, 2, 3, 4, 5, 6, 7, 0, 0, 90, 0, 0, 0, 0, 10};
    ea_eplb_shape s = {2, 8, 12, 1, 1, 4};
    ea_eplb_ws *ws;
    ea_eplb_placement pl;
    CHECK_EQ(ea_eplb_ws_create(&s, &ws), EA_OK);
    CHECK_EQ(ea_eplb_placement_init(&pl, 2, 8, 12), EA_OK);
    CHECK_EQ(ea_eplb_rebalance(ws, EA_EPLB_DEEPSEEK, c, &pl), EA_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_eplb_%d.out.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_EQ(ea_eplb_placement_write(f, NULL, &pl), EA_OK);
    fclose(f);
    ea_eplb_meta a, b;
    CHECK_EQ(ea_eplb_meta_init_from_placement(&a, &pl, 4, 2), EA_OK);
    CHECK_EQ(ea_eplb_meta_init_from_file(&b, path, 4, 2), EA_OK);
    CHECK(memcmp(a.phy2log, b.phy2log, 2 * 12 * sizeof(int32_t)) == 0);
    CHECK(memcmp(a.log2all, b.log2all, (size_t)2 * 8 * a.stride * sizeof(int32_t)) == 0);
    CHECK(memcmp(a.dispatch, b.dispatch, 2 * 8 * 4 * sizeof(int32_t)) == 0);
    CHECK_EQ(a.log2all_n[0], 5); /* 50 of 78 tokens: the 4 extra slots all go to expert 0 */
    ea_eplb_meta_deinit(&a);
    ea_eplb_meta_deinit(&b);
    /* a file whose shape breaks an invariant for these ranks: error names the file */
    CHECK_EQ(ea_eplb_meta_init_from_file(&b, path, 5, 1), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), path) != NULL);
    CHECK(strstr(ea_errmsg(), "not a multiple of ranks 5") != NULL);
    unlink(path);
    ea_eplb_placement_deinit(&pl);
    ea_eplb_ws_destroy(ws);
}

/* Seed 003: every destination slot can be sourced from a slot holding the same
 * logical expert in the old placement; and the source is the nearest one. */
TEST(move_plan_sources_hold_the_expert) {
    for (int it = 0; it < 50; it++) {
        int nodes = 1 + (int)(rnd() % 2), ranks = nodes * (1 + (int)(rnd() % 3)), spr = 1 + (int)(rnd() % 4);
        int P = ranks * spr, E = 1 + (int)(rnd() % (unsigned)P);
        int32_t p2l[64], src[64];
        ea_eplb_meta from, to;
        CHECK_EQ(ea_eplb_meta_init_trivial(&from, 1, E, P, ranks, nodes), EA_OK);
        CHECK_EQ(ea_eplb_meta_init(&to, 1, E, P, ranks, nodes), EA_OK);
        for (int p = 0; p < P; p++) p2l[p] = p < E ? (p * 7 + 3) % E : (int32_t)(rnd() % (unsigned)E);
        for (int e = 0; e < E; e++) p2l[e] = e; /* keep every expert present */
        for (int p = P - 1; p > 0; p--) {
            int q = (int)(rnd() % (unsigned)(p + 1));
            int32_t t = p2l[p];
            p2l[p] = p2l[q];
            p2l[q] = t;
        }
        CHECK_EQ(ea_eplb_meta_set_layer(&to, 0, p2l, NULL), EA_OK);
        int moves = ea_eplb_meta_move_plan(&from, &to, 0, src), counted = 0;
        for (int p = 0; p < P; p++) {
            CHECK_EQ(from.phy2log[src[p]], to.phy2log[p]);
            counted += src[p] != p;
            /* nearest: if the old placement has the expert on p's rank, the source is on it */
            int local = 0;
            for (int q = (p / spr) * spr; q < (p / spr + 1) * spr; q++) local |= from.phy2log[q] == to.phy2log[p];
            if (local) CHECK_EQ(src[p] / spr, p / spr);
        }
        CHECK_EQ(moves, counted);
        ea_eplb_meta_deinit(&from);
        ea_eplb_meta_deinit(&to);
    }
}

/* ---- recorder ---- */

TEST(recorder_window_matches_brute_force) {
    enum { L = 3, E = 5, W = 4, STEPS = 11 };
    ea_eplb_recorder r;
    CHECK_EQ(ea_eplb_recorder_init(&r, L, E, W), EA_OK);
    int32_t ids[64];
    ea_eplb_record(&r, 0, ids, 0); /* off: nothing happens */
    ea_eplb_recorder_start(&r);
    static int64_t per_step[STEPS][L][E];
    memset(per_step, 0, sizeof per_step);
    uint64_t n0 = ea_alloc_count();
    for (int s = 0; s < STEPS; s++) {
        for (int l = 0; l < L; l++) {
            int n = (int)(rnd() % 64);
            for (int i = 0; i < n; i++) {
                ids[i] = (int32_t)(rnd() % (E + 1)) - (i % 7 == 0 ? 1 : 0); /* some -1 and some E */
                if (ids[i] >= 0 && ids[i] < E) per_step[s][l][ids[i]]++;
            }
            ea_eplb_record(&r, l, ids, n);
        }
        ea_eplb_recorder_end_step(&r);
        const int64_t *c = ea_eplb_recorder_counts(&r);
        for (int l = 0; l < L; l++)
            for (int e = 0; e < E; e++) {
                int64_t want = 0;
                for (int q = s - W + 1; q <= s; q++)
                    if (q >= 0) want += per_step[q][l][e];
                CHECK_EQ(c[l * E + e], want);
            }
        CHECK_EQ(ea_eplb_recorder_steps_in_window(&r), s + 1 < W ? s + 1 : W);
    }
    CHECK_EQ(ea_alloc_count(), n0);
    CHECK(r.n_dropped > 0);
    /* stopped: records nothing, counts kept */
    ea_eplb_recorder_stop(&r);
    int64_t before = r.sums[0];
    ids[0] = 0;
    ea_eplb_record(&r, 0, ids, 1);
    ea_eplb_recorder_end_step(&r);
    CHECK_EQ(r.sums[0], before);
    /* dump parses back as a workload with the same numbers */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_EQ(ea_eplb_recorder_dump(&r, f), EA_OK);
    fclose(f);
    int dl, de;
    int64_t *dc;
    CHECK_EQ(ea_eplb_workload_parse(buf, len, "dump", &dl, &de, &dc), EA_OK);
    CHECK_EQ(dl, L);
    CHECK_EQ(de, E);
    for (int i = 0; i < L * E; i++) CHECK_EQ(dc[i], r.sums[i]);
    ea_free(dc);
    free(buf);
    ea_eplb_recorder_deinit(&r);
}

/* ---- manager ---- */

static void skewed_counts(int64_t *c, int L, int E) {
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) c[l * E + e] = e < 2 ? 1000 : 10 + e;
}

TEST(manager_rebalances_in_chunks_with_versions) {
    enum { L = 5, E = 8, P = 12, R = 4 };
    ea_eplb_meta cur;
    CHECK_EQ(ea_eplb_meta_init_trivial(&cur, L, E, P, R, 1), EA_OK);
    ea_eplb_manager_cfg cfg = {.interval = 3, .layers_per_step = 2, .min_balancedness = 0.9,
                               .algo = EA_EPLB_REFINED, .n_groups = 1};
    ea_eplb_manager *m;
    CHECK_EQ(ea_eplb_manager_create(&cfg, &cur, &m), EA_OK);
    int64_t c[L * E];
    memset(c, 0, sizeof c);
    ea_eplb_step_result r;
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.action, EA_EPLB_IDLE);
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.action, EA_EPLB_SKIP_NO_DATA);
    skewed_counts(c, L, E);
    uint64_t n0 = ea_alloc_count();
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
        CHECK_EQ(r.action, EA_EPLB_IDLE);
    }
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.action, EA_EPLB_SWITCH);
    CHECK(r.balancedness_before < 0.9);
    CHECK(r.balancedness_after > r.balancedness_before);
    CHECK_EQ(r.n_layers, 2);
    CHECK_EQ(r.layers[0], 0);
    CHECK_EQ(r.layers[1], 1);
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_ERR_INVALID_ARG); /* must commit first */
    ea_eplb_manager_commit(m, &cur, EA_OK);
    CHECK_EQ(cur.version[0], 1);
    CHECK_EQ(cur.version[2], 0);
    const ea_eplb_meta *next = ea_eplb_manager_next(m);
    CHECK(memcmp(cur.phy2log, next->phy2log, P * sizeof(int32_t)) == 0);
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.action, EA_EPLB_SWITCH);
    CHECK_EQ(r.layers[0], 2);
    ea_eplb_manager_commit(m, &cur, EA_OK);
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.n_layers, 1);
    CHECK_EQ(r.layers[0], 4);
    ea_eplb_manager_commit(m, &cur, EA_OK);
    CHECK_EQ(ea_alloc_count(), n0);
    for (int l = 0; l < L; l++) CHECK_EQ(cur.version[l], 1);
    CHECK_EQ(ea_eplb_manager_get_stats(m)->n_rebalances, 1);
    CHECK_EQ(ea_eplb_meta_check(&cur, NULL), EA_OK);
    /* now balanced: the next rebalance step skips */
    for (int i = 0; i < 3; i++) CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.action, EA_EPLB_SKIP_BALANCED);
    CHECK(r.balancedness_before >= 0.9);
    ea_eplb_manager_destroy(m);
    ea_eplb_meta_deinit(&cur);
}

TEST(manager_keeps_old_placement_on_failure) {
    enum { L = 4, E = 8, P = 12, R = 4 };
    ea_eplb_meta cur, orig;
    CHECK_EQ(ea_eplb_meta_init_trivial(&cur, L, E, P, R, 1), EA_OK);
    CHECK_EQ(ea_eplb_meta_init_trivial(&orig, L, E, P, R, 1), EA_OK);
    ea_eplb_manager_cfg cfg = {.interval = 1, .layers_per_step = 1, .min_balancedness = 0.95,
                               .algo = EA_EPLB_DEEPSEEK, .n_groups = 1};
    ea_eplb_manager *m;
    CHECK_EQ(ea_eplb_manager_create(&cfg, &cur, &m), EA_OK);
    int64_t c[L * E];
    skewed_counts(c, L, E);
    ea_eplb_step_result r;
    /* 1. weight move of the second chunk fails: layer 0 switched, layers 1.. keep the old placement */
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.action, EA_EPLB_SWITCH);
    ea_eplb_manager_commit(m, &cur, EA_OK);
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.layers[0], 1);
    ea_eplb_manager_commit(m, &cur, ea_err(EA_ERR_PEER, "injected: rank 2 lost"));
    CHECK_EQ(cur.version[0], 1);
    for (int l = 1; l < L; l++) {
        CHECK_EQ(cur.version[l], 0);
        CHECK(memcmp(cur.phy2log + l * P, orig.phy2log + l * P, P * sizeof(int32_t)) == 0);
        CHECK(memcmp(cur.dispatch + l * E * R, orig.dispatch + l * E * R, E * R * sizeof(int32_t)) == 0);
    }
    const ea_eplb_manager_stats *st = ea_eplb_manager_get_stats(m);
    CHECK_EQ(st->n_failures, 1);
    CHECK(strstr(st->reason, "injected: rank 2 lost") != NULL);
    CHECK_EQ(st->n_rebalances, 0);
    CHECK_EQ(ea_eplb_meta_check(&cur, NULL), EA_OK);
    /* 2. the placement computation fails (bad counts): nothing changes */
    ea_eplb_meta snap;
    CHECK_EQ(ea_eplb_meta_init_trivial(&snap, L, E, P, R, 1), EA_OK);
    for (int l = 0; l < L; l++) ea_eplb_meta_copy_layer(&snap, &cur, l);
    c[3 * E + 5] = -7;
    CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
    CHECK_EQ(r.action, EA_EPLB_FAILED);
    CHECK(memcmp(cur.phy2log, snap.phy2log, L * P * sizeof(int32_t)) == 0);
    CHECK(strstr(st->reason, "negative") != NULL);
    CHECK_EQ(st->n_failures, 2);
    /* 3. next time with good counts the plan restarts and completes */
    c[3 * E + 5] = 15;
    int switched = 0;
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(ea_eplb_manager_step(m, &cur, c, &r), EA_OK);
        if (r.action == EA_EPLB_SWITCH) {
            switched += r.n_layers;
            ea_eplb_manager_commit(m, &cur, EA_OK);
        }
    }
    CHECK_EQ(switched, L - 1); /* layer 0 was already in place */
    CHECK_EQ(st->n_rebalances, 1);
    ea_eplb_meta_deinit(&snap);
    ea_eplb_manager_destroy(m);
    ea_eplb_meta_deinit(&cur);
    ea_eplb_meta_deinit(&orig);
}

/* ---- the EPLB wrapper over an inner backend of any kind */

/* An inner backend that keeps the placement rows it is given and refuses the
 * layer `fail_layer` (model numbering; -1: none). It computes nothing. */
enum { WL = 3, WE = 4, WP = 6 };
typedef struct {
    ea_moe_backend base;
    int32_t row[WL][WP];
    int fail_layer, n_applied;
} rows_be;

static ea_status rows_submit(ea_moe_backend *be, const ea_moe_call *c) {
    (void)be, (void)c;
    return EA_OK;
}
static ea_status rows_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    (void)be, (void)c, (void)out;
    return EA_OK;
}
static ea_status rows_apply(ea_moe_backend *be, int layer, const int32_t *p2l, int n) {
    rows_be *r = (rows_be *)be;
    if (layer == r->fail_layer) return ea_err(EA_ERR_UNSUPPORTED, "rows_be: layer %d refused", layer);
    memcpy(r->row[layer], p2l, sizeof(int32_t) * (size_t)n);
    r->n_applied++;
    return EA_OK;
}
static void rows_destroy(ea_moe_backend *be) { (void)be; }
static const ea_moe_backend_vtable rows_vt = {.submit = rows_submit, .wait = rows_wait,
                                              .apply_placement = rows_apply, .destroy = rows_destroy,
                                              .name = "rows"};

/* A requested rebalance of skewed layers 0 and 2 (1 is dense): with the inner
 * backend refusing layer 2, layer 0 is put back and the maps stay; then both switch. */
TEST(wrapper_switches_any_inner_backend_all_or_nothing) {
    static const uint8_t is_moe[WL] = {1, 0, 1};
    rows_be inner = {.base.vt = &rows_vt, .fail_layer = 2};
    ea_eplb_backend_opts o;
    ea_eplb_backend_opts_default(&o);
    o.n_layers = WL;
    o.layer_is_moe = is_moe;
    o.n_logical = WE;
    o.max_tokens = 8;
    o.max_k = 2;
    o.n_redundant = WP - WE;
    o.n_ranks = 2;
    o.interval = 0;
    o.window = 4;
    ea_eplb_meta place;
    CHECK_EQ(ea_eplb_initial_placement(&o, &place), EA_OK);
    for (int l = 0, ml = 0; l < WL; l++)
        if (is_moe[l]) memcpy(inner.row[l], place.phy2log + (size_t)ml++ * WP, sizeof inner.row[l]);
    int32_t before[WL][WP];
    memcpy(before, inner.row, sizeof before);
    ea_eplb_backend *b;
    CHECK_EQ(ea_eplb_backend_create(&o, &place, &inner.base, &b), EA_OK);
    ea_moe_backend *be = ea_eplb_backend_moe(b);
    int32_t ids[16] = {2, 0, 2, 1, 2, 3, 2, 0, 2, 1, 2, 3, 2, 0, 2, 1}; /* expert 2 hot, no replica */
    float w[16] = {0}, x[8] = {0}, y[8];
    for (int l = 0; l < WL; l += 2) CHECK_EQ(ea_moe_backend_forward(be, l, x, 8, 2, ids, w, y), EA_OK);
    ea_eplb_request_rebalance(b);
    ea_moe_end_step(be);
    ea_eplb_backend_stats st;
    ea_eplb_backend_get_stats(b, &st);
    CHECK_EQ(st.failures, 1);
    CHECK(strstr(st.reason, "layer 2 refused") != NULL);
    CHECK_EQ(inner.n_applied, 2); /* layer 0 switched, then put back */
    CHECK(memcmp(before, inner.row, sizeof before) == 0);
    const ea_eplb_meta *m = ea_eplb_backend_meta(b);
    CHECK(memcmp(m->phy2log, before[0], sizeof before[0]) == 0 && m->version[0] == 0 && m->version[1] == 0);
    inner.fail_layer = -1;
    ea_eplb_request_rebalance(b);
    ea_moe_end_step(be);
    ea_eplb_backend_get_stats(b, &st);
    CHECK_EQ(st.rebalances_total, 1);
    CHECK(memcmp(m->phy2log, inner.row[0], sizeof inner.row[0]) == 0);
    CHECK(memcmp(m->phy2log + WP, inner.row[2], sizeof inner.row[2]) == 0);
    CHECK(memcmp(before[0], inner.row[0], sizeof before[0]) != 0); /* the skew moved something */
    ea_moe_backend_destroy(be);
}

int main(void) {
    RUN(sort_is_stable_descending);
    RUN(replicate_picks_heaviest_per_replica_first_index_on_ties);
    RUN(pack_balances_with_lowest_pack_on_ties);
    RUN(shape_preconditions_named);
    RUN(random_shapes_valid_and_refined_never_worse);
    RUN(refined_strictly_better_on_a_skewed_case);
    RUN(workspace_create_survives_every_allocation_failure);
    RUN(metadata_invariants_first_violation);
    RUN(metadata_shape_invariants);
    RUN(set_layer_rejects_bad_rows_and_keeps_the_old_layer);
    RUN(score_refuses_slots_that_do_not_split_over_ranks);
    RUN(metadata_remote_dispatch_with_a_local_replica_is_a_violation);
    RUN(dispatch_hand_example);
    RUN(dispatch_remote_spread_round_robin);
    RUN(dispatch_same_node_ascending_slots);
    RUN(dispatch_properties_random);
    RUN(metadata_from_file_and_algorithm_agree);
    RUN(move_plan_sources_hold_the_expert);
    RUN(workload_errors_name_file_and_line);
    RUN(placement_roundtrip_and_errors);
    RUN(recorder_window_matches_brute_force);
    RUN(manager_rebalances_in_chunks_with_versions);
    RUN(manager_keeps_old_placement_on_failure);
    RUN(wrapper_switches_any_inner_backend_all_or_nothing);
    return TEST_SUMMARY();
}
