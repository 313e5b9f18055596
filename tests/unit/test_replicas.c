/*
 * test_replicas.c — the monitor's plan of replicas of hot experts
 * (eaas/replicas.h): exact plans computed by hand, the tie rules (per
 * replica, layer, expert, server order), the guard that keeps the max from
 * rising, unhosted pairs first, stability under min_gain, invalid current
 * plans replaced, and on random inputs: the max never rises, plans respect
 * slots and base ranges, and planning the same load again changes nothing.
 *
 * Plans are compared as text, "layer.expert" pairs in the order the planner
 * sorts them, "-" for a server without a plan.
 */
#include <stdint.h>
#include <string.h>

#include "eaas/replicas.h"
#include "harness.h"

/* One server's plan as text, e.g. "0.1 0.4"; "" for an empty plan; "-" for none. */
static const char *txt(const ea_replicas_assign *a) {
    static char buf[8][256];
    static int next;
    char *b = buf[next++ % 8];
    size_t o = 0;
    b[0] = 0;
    if (!a->has) return strcpy(b, "-");
    for (int i = 0; i < a->n && o < 200; i++)
        o += (size_t)snprintf(b + o, 256 - o, "%s%d.%d", i ? " " : "", (int)a->pairs[i].layer, (int)a->pairs[i].expert);
    return b;
}

static ea_replicas_server server(const ea_range *layers, const ea_range *experts, int slots) {
    return (ea_replicas_server){.layers = layers, .n_layers = 1, .experts = experts, .n_experts = 1, .live = 1, .slots = slots};
}

static const ea_range L0 = {0, 0}, L01 = {0, 1}, L1 = {1, 1}, L9 = {9, 9}, E03 = {0, 3}, E47 = {4, 7}, E07 = {0, 7},
                      E0 = {0, 0}, E1 = {1, 1};

/* The brief's example: layer 0, A hosts experts 0-3, B 4-7, two slots each, expert 1 hot.
 *   base: A = 1+10+1+1 = 13, B = 4; max 13
 *   1. (0,1) 10/1 -> B (A hosts it): A 8, B 9
 *   2. (0,1) 10/2: both host it: dropped
 *   3. (0,0), (0,2), (0,3): only B can take them, 9 + 0.5 is not below 9: dropped
 *   4. (0,4) -> A: A 8.5, B 8.5; (0,5) ... (0,7): A 8.5 + 0.5 not below 8.5: dropped */
static const ea_replicas_load skewed[8] = {{0, 0, 1}, {0, 1, 10}, {0, 2, 1}, {0, 3, 1},
                                           {0, 4, 1}, {0, 5, 1},  {0, 6, 1}, {0, 7, 1}};

TEST(hand_computed_plan) {
    ea_replicas_server s[2] = {server(&L0, &E03, 2), server(&L0, &E47, 2)};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 2, skewed, 8, 0.1, &r), EA_OK);
    CHECK(r.adopted && r.changed && !r.current_valid);
    CHECK_EQ(r.n_servers, 2);
    CHECK_STREQ(txt(&r.plan[0]), "0.4");
    CHECK_STREQ(txt(&r.plan[1]), "0.1");
    CHECK_NEAR(r.before.max, 13, 1e-12);
    CHECK_NEAR(r.before.mean, 8.5, 1e-12);
    CHECK_EQ(r.before.n_replicas, 0);
    CHECK_NEAR(r.after.max, 8.5, 1e-12);
    CHECK_NEAR(r.after.mean, 8.5, 1e-12);
    CHECK_EQ(r.after.n_replicas, 2);
    CHECK(r.before.unhosted == 0 && r.after.unhosted == 0);
    ea_replicas_result_free(&r);
    CHECK(r.plan == NULL);
    /* the same load in another order, (0,1) in two halves: the same plan */
    ea_replicas_load shuffled[9] = {{0, 7, 1}, {0, 1, 4}, {0, 3, 1}, {0, 0, 1}, {0, 5, 1},
                                    {0, 2, 1}, {0, 1, 6}, {0, 6, 1}, {0, 4, 1}};
    CHECK_EQ(ea_replicas_plan(s, 2, shuffled, 9, 0.1, &r), EA_OK);
    CHECK_STREQ(txt(&r.plan[0]), "0.4");
    CHECK_STREQ(txt(&r.plan[1]), "0.1");
    ea_replicas_result_free(&r);
}

/* Over layers: the pair with the highest load per replica first, not the highest load.
 * A hosts layer 0 experts 0-2, B layer 0 experts 2-7: (0,2) has 6 over 2 hosts (3 each),
 * (0,3) 4 on B alone. C (one slot) takes (0,3). */
TEST(heaviest_per_replica_first) {
    static const ea_range E02 = {0, 2}, E27 = {2, 7};
    ea_replicas_server s[3] = {server(&L0, &E02, 0), server(&L0, &E27, 0), server(&L9, &E0, 1)};
    ea_replicas_load l[2] = {{0, 2, 6}, {0, 3, 4}};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 3, l, 2, 0.1, &r), EA_OK);
    CHECK_STREQ(txt(&r.plan[0]), "-"); /* no slots: no plan */
    CHECK_STREQ(txt(&r.plan[1]), "-");
    CHECK_STREQ(txt(&r.plan[2]), "0.3");
    CHECK_NEAR(r.before.max, 7, 1e-12); /* B: 3 + 4 */
    CHECK_NEAR(r.after.max, 5, 1e-12);  /* B: 3 + 2 */
    ea_replicas_result_free(&r);
}

/* Equal load per replica: the lower layer, then the lower expert (not the input order). */
TEST(pair_ties_lower_layer_then_expert) {
    ea_replicas_server s[2] = {server(&L01, &E07, 0), server(&L9, &E0, 1)};
    ea_replicas_load l[3] = {{1, 0, 4}, {0, 5, 4}, {0, 3, 4}};
    static const char *const want[4] = {"", "0.3", "0.3 0.5", "0.3 0.5 1.0"};
    for (int slots = 1; slots <= 3; slots++) {
        /* A: 12; each step moves 2 to B and stays below: 10/2, 8/4, 6/6 */
        s[1].slots = slots;
        ea_replicas_result r;
        CHECK_EQ(ea_replicas_plan(s, 2, l, 3, 0.1, &r), EA_OK);
        CHECK_STREQ(txt(&r.plan[1]), want[slots]);
        CHECK_NEAR(r.after.max, 12 - 2 * slots, 1e-12);
        ea_replicas_result_free(&r);
    }
}

/* Receivers: the lowest load, and among equal loads the first in table order. */
TEST(server_ties_table_order) {
    /* S0 hosts layer 0, S3 layer 1, (0,1) and (1,1) 10 each; S1 (hosting (9,0)) and S2
     * (hosting (9,1)) one slot each, load 0. (0,1) first (lower layer) -> S1 (tie with S2:
     * first); then (1,1) -> S2. */
    ea_replicas_server s[4] = {server(&L0, &E07, 0), server(&L9, &E0, 1), server(&L9, &E1, 1), server(&L1, &E07, 0)};
    ea_replicas_load l[2] = {{1, 1, 10}, {0, 1, 10}};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 4, l, 2, 0.1, &r), EA_OK);
    CHECK_STREQ(txt(&r.plan[1]), "0.1");
    CHECK_STREQ(txt(&r.plan[2]), "1.1");
    CHECK_NEAR(r.after.max, 5, 1e-12);
    ea_replicas_result_free(&r);
    /* S1 now hosts (9,0) with load 1: S2 is lower and takes (0,1); S1 takes (1,1) (1 + 5 < 10) */
    ea_replicas_load l2[3] = {{1, 1, 10}, {0, 1, 10}, {9, 0, 1}};
    CHECK_EQ(ea_replicas_plan(s, 4, l2, 3, 0.1, &r), EA_OK);
    CHECK_STREQ(txt(&r.plan[1]), "1.1");
    CHECK_STREQ(txt(&r.plan[2]), "0.1");
    ea_replicas_result_free(&r);
}

/* A placement that would not stay below the max is dropped: A hosts (0,0) with 10, B hosts
 * (0,4) with 9; a replica of (0,0) on B would make B 14 > 10. No replica at all. */
TEST(no_placement_raises_the_max) {
    ea_replicas_server s[2] = {server(&L0, &E03, 1), server(&L0, &E47, 1)};
    ea_replicas_load l[2] = {{0, 0, 10}, {0, 4, 9}};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 2, l, 2, 0.1, &r), EA_OK);
    CHECK(r.adopted); /* no current plan: adopted, empty */
    CHECK_STREQ(txt(&r.plan[0]), "");
    CHECK_STREQ(txt(&r.plan[1]), "");
    CHECK_NEAR(r.after.max, 10, 1e-12);
    ea_replicas_result_free(&r);
}

/* A pair no live server hosts gets a replica first (the heaviest of them), on the least
 * loaded server with a free slot, even if a hosted pair is heavier per replica. */
TEST(unhosted_pairs_first) {
    ea_replicas_server s[3] = {server(&L0, &E03, 0), server(&L0, &E47, 1), server(&L1, &E07, 0)};
    s[2].live = 0; /* layer 1 is hosted by a dead server only */
    ea_replicas_load l[4] = {{0, 1, 100}, {1, 2, 1}, {0, 9, 3}, {0, 4, 20}};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 3, l, 4, 0.1, &r), EA_OK);
    CHECK_STREQ(txt(&r.plan[1]), "0.9"); /* 3 > 1; and not (0,1), 100 per replica */
    CHECK_STREQ(txt(&r.plan[2]), "-");   /* not live */
    CHECK_NEAR(r.before.unhosted, 4, 1e-12);
    CHECK_NEAR(r.after.unhosted, 1, 1e-12);
    CHECK_NEAR(r.after.max, 100, 1e-12);
    CHECK_NEAR(r.after.mean, 123.0 / 2, 1e-12); /* 2 live servers; (0,9) now hosted */
    ea_replicas_result_free(&r);
    /* two free slots: both unhosted pairs, the second on the now least loaded server */
    s[0].slots = 1;
    CHECK_EQ(ea_replicas_plan(s, 3, l, 4, 0.1, &r), EA_OK);
    CHECK_STREQ(txt(&r.plan[1]), "0.9"); /* B 20 < A 100 */
    CHECK_STREQ(txt(&r.plan[0]), "1.2"); /* B is full */
    CHECK_NEAR(r.after.unhosted, 0, 1e-12);
    ea_replicas_result_free(&r);
}

/* A valid current plan stays unless the new one's max is below (1 - min_gain) x its max. */
TEST(stability_min_gain) {
    ea_replicas_server s[2] = {server(&L0, &E03, 2), server(&L0, &E47, 2)};
    /* current: A holds (0,4) (0,5), B holds (0,1): A = 3 + 5 + 0.5 + 0.5 = 9, B = 8 */
    ea_mon_pair ca[2] = {{0, 5}, {0, 4}}, cb[1] = {{0, 1}};
    s[0].has_current = s[1].has_current = 1;
    s[0].current = ca, s[0].n_current = 2;
    s[1].current = cb, s[1].n_current = 1;
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 2, skewed, 8, 0.1, &r), EA_OK); /* 8.5 is not below 0.9 x 9 */
    CHECK(r.current_valid && !r.adopted && !r.changed);
    CHECK_NEAR(r.before.max, 9, 1e-12);
    CHECK_NEAR(r.after.max, 8.5, 1e-12);
    CHECK_STREQ(txt(&r.plan[0]), "0.4 0.5"); /* the current plan, sorted */
    CHECK_STREQ(txt(&r.plan[1]), "0.1");
    ea_replicas_result_free(&r);
    CHECK_EQ(ea_replicas_plan(s, 2, skewed, 8, 0.05, &r), EA_OK); /* 8.5 < 0.95 x 9 */
    CHECK(r.adopted && r.changed);
    CHECK_STREQ(txt(&r.plan[0]), "0.4");
    CHECK_STREQ(txt(&r.plan[1]), "0.1");
    ea_replicas_result_free(&r);
    /* the greedy's own plan as the current one: nothing to gain, even with min_gain 0 */
    ea_mon_pair ga[1] = {{0, 4}};
    s[0].current = ga, s[0].n_current = 1;
    CHECK_EQ(ea_replicas_plan(s, 2, skewed, 8, 0, &r), EA_OK);
    CHECK(r.current_valid && !r.adopted && !r.changed);
    ea_replicas_result_free(&r);
}

/* An invalid current plan is replaced even when min_gain 1 keeps every valid one. */
TEST(invalid_current_plan_replaced) {
    static const ea_mon_pair base_pair[1] = {{0, 2}}, twice[2] = {{0, 4}, {0, 4}}, three[3] = {{0, 4}, {0, 5}, {0, 6}},
                             fine[1] = {{0, 4}}, b1[1] = {{0, 1}};
    static const struct {
        const ea_mon_pair *a;
        int n;
        int dead_c; /* a third, dead server has a plan */
    } cases[] = {{base_pair, 1, 0}, {twice, 2, 0}, {three, 3, 0}, {fine, 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ea_replicas_server s[3] = {server(&L0, &E03, 2), server(&L0, &E47, 2), server(&L1, &E07, 2)};
        s[0].has_current = 1, s[0].current = cases[i].a, s[0].n_current = cases[i].n;
        s[1].has_current = 1, s[1].current = b1, s[1].n_current = 1;
        s[2].live = 0;
        s[2].has_current = cases[i].dead_c;
        ea_replicas_result r;
        CHECK_EQ(ea_replicas_plan(s, 3, skewed, 8, 1.0, &r), EA_OK);
        if (r.current_valid || !r.adopted || !r.changed) FAIL_("case %zu: valid %d adopted %d", i, r.current_valid, r.adopted);
        CHECK_STREQ(txt(&r.plan[0]), "0.4");
        CHECK_STREQ(txt(&r.plan[1]), "0.1");
        CHECK_STREQ(txt(&r.plan[2]), "-");
        ea_replicas_result_free(&r);
    }
    /* the same shape with a valid plan: kept under min_gain 1 */
    ea_replicas_server s[3] = {server(&L0, &E03, 2), server(&L0, &E47, 2), server(&L1, &E07, 2)};
    s[0].has_current = 1, s[0].current = three, s[0].n_current = 2;
    s[2].live = 0;
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 3, skewed, 8, 1.0, &r), EA_OK);
    CHECK(r.current_valid && !r.adopted && !r.changed);
    ea_replicas_result_free(&r);
}

/* A server that died with replicas: the pairs it alone hosted are unhosted in the current
 * plan, so a plan that hosts them again is adopted whatever min_gain says. */
TEST(unhosted_load_beats_min_gain) {
    ea_replicas_server s[3] = {server(&L0, &E03, 1), server(&L0, &E47, 1), server(&L1, &E07, 0)};
    s[2].live = 0;
    ea_mon_pair ca[1] = {{0, 4}};
    s[0].has_current = 1, s[0].current = ca, s[0].n_current = 1;
    s[1].has_current = 1, s[1].n_current = 0;
    ea_replicas_load l[3] = {{0, 1, 10}, {0, 4, 10}, {1, 3, 1}};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 3, l, 3, 1.0, &r), EA_OK);
    CHECK(r.current_valid && r.adopted && r.changed);
    CHECK_NEAR(r.before.unhosted, 1, 1e-12);
    CHECK_NEAR(r.after.unhosted, 0, 1e-12);
    /* from no replicas: A 10, B 10; (1,3) first -> A (tie: first): A 11; (0,1) -> B would
     * make B 15, not below 11: dropped; (0,4): A is full, B hosts it: dropped; (1,3) again,
     * 1/1 -> B: 10 + 0.5 < 11, A 10.5 */
    CHECK_STREQ(txt(&r.plan[0]), "1.3");
    CHECK_STREQ(txt(&r.plan[1]), "1.3");
    CHECK_NEAR(r.before.max, 15, 1e-12); /* A 10 + (0,4) 10/2 */
    CHECK_NEAR(r.after.max, 10.5, 1e-12);
    ea_replicas_result_free(&r);
}

TEST(zero_slots_and_empty_inputs) {
    ea_replicas_server s[2] = {server(&L0, &E03, 0), server(&L0, &E47, 0)};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(s, 2, skewed, 8, 0.1, &r), EA_OK);
    CHECK(!r.changed && r.after.n_replicas == 0);
    CHECK_STREQ(txt(&r.plan[0]), "-");
    CHECK_STREQ(txt(&r.plan[1]), "-");
    ea_replicas_result_free(&r);
    CHECK_EQ(ea_replicas_plan(s, 2, NULL, 0, 0.1, &r), EA_OK);
    CHECK(r.after.max == 0 && r.after.mean == 0 && !r.changed);
    ea_replicas_result_free(&r);
    CHECK_EQ(ea_replicas_plan(NULL, 0, skewed, 8, 0.1, &r), EA_OK);
    CHECK(r.n_servers == 0 && r.after.unhosted == 17 && !r.changed);
    ea_replicas_result_free(&r);
}

/* ---- random inputs ----------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* Every live server's plan respects its slots and base ranges and names no pair twice;
 * no plan for a server that is not live or has no slots. */
static int plan_ok(const ea_replicas_server *s, int n, const ea_replicas_result *r) {
    for (int i = 0; i < n; i++) {
        const ea_replicas_assign *a = &r->plan[i];
        if (a->has != (s[i].live && s[i].slots > 0) || a->n > s[i].slots) return 0;
        for (int k = 0; k < a->n; k++) {
            if (ea_replicas_base_hosts(&s[i], a->pairs[k].layer, a->pairs[k].expert)) return 0;
            if (k && a->pairs[k].layer == a->pairs[k - 1].layer && a->pairs[k].expert <= a->pairs[k - 1].expert) return 0;
            if (k && a->pairs[k].layer < a->pairs[k - 1].layer) return 0;
        }
    }
    return 1;
}

TEST(random_max_never_rises_and_replanning_is_stable) {
    for (int round = 0; round < 400; round++) {
        int n = 2 + (int)rnd(5), n_l = 0;
        ea_range lr[8], er[8];
        ea_replicas_server s[8];
        for (int i = 0; i < n; i++) {
            int la = (int)rnd(4), ea = (int)rnd(8);
            lr[i] = (ea_range){la, la + (int)rnd((uint32_t)(4 - la))};
            er[i] = (ea_range){ea, ea + (int)rnd((uint32_t)(8 - ea))};
            s[i] = server(&lr[i], &er[i], (int)rnd(4));
            s[i].live = rnd(6) != 0;
        }
        s[0].live = 1;
        /* loads on pairs some live server hosts (so no unhosted pair raises the max) */
        ea_replicas_load l[32];
        for (int layer = 0; layer < 4; layer++)
            for (int e = 0; e < 8 && n_l < 32; e++) {
                int hosted = 0;
                for (int i = 0; i < n; i++) hosted |= s[i].live && ea_replicas_base_hosts(&s[i], layer, e);
                if (hosted && rnd(3)) l[n_l++] = (ea_replicas_load){layer, e, 1 + rnd(1000) / 8.0};
            }
        ea_replicas_result r, again, r2;
        CHECK_EQ(ea_replicas_plan(s, n, l, n_l, 0.1, &r), EA_OK);
        if (!plan_ok(s, n, &r)) FAIL_("round %d: a plan breaks slots or base ranges", round);
        if (r.after.max > r.before.max * (1 + 1e-12)) FAIL_("round %d: max rose %.17g -> %.17g", round, r.before.max, r.after.max);
        CHECK_NEAR(r.after.mean, r.before.mean, 1e-9 * (1 + r.before.mean));
        CHECK_EQ(ea_replicas_plan(s, n, l, n_l, 0.1, &again), EA_OK); /* deterministic */
        for (int i = 0; i < n; i++) CHECK_STREQ(txt(&r.plan[i]), txt(&again.plan[i]));
        ea_replicas_result_free(&again);
        /* the plan as the current one, the same load: nothing changes, even with min_gain 0 */
        ea_replicas_server s2[8];
        memcpy(s2, s, sizeof s);
        for (int i = 0; i < n; i++) {
            s2[i].has_current = r.plan[i].has;
            s2[i].current = r.plan[i].pairs;
            s2[i].n_current = r.plan[i].n;
        }
        CHECK_EQ(ea_replicas_plan(s2, n, l, n_l, 0, &r2), EA_OK);
        if (r2.changed) FAIL_("round %d: planning the same load again changed the plan", round);
        ea_replicas_result_free(&r2);
        /* with that plan current and the load of one pair tripled: an adopted plan is better by min_gain */
        if (n_l) l[rnd((uint32_t)n_l)].load *= 3;
        CHECK_EQ(ea_replicas_plan(s2, n, l, n_l, 0.1, &r2), EA_OK);
        if (r2.adopted && r2.current_valid && !(r2.after.max < 0.9 * r2.before.max))
            FAIL_("round %d: adopted without the gain", round);
        if (!plan_ok(s2, n, &r2)) FAIL_("round %d: a replanned plan breaks slots or base ranges", round);
        ea_replicas_result_free(&r2);
        ea_replicas_result_free(&r);
    }
}

int main(void) {
    RUN(hand_computed_plan);
    RUN(heaviest_per_replica_first);
    RUN(pair_ties_lower_layer_then_expert);
    RUN(server_ties_table_order);
    RUN(no_placement_raises_the_max);
    RUN(unhosted_pairs_first);
    RUN(stability_min_gain);
    RUN(invalid_current_plan_replaced);
    RUN(unhosted_load_beats_min_gain);
    RUN(zero_slots_and_empty_inputs);
    RUN(random_max_never_rises_and_replanning_is_stable);
    return TEST_SUMMARY();
}
