/*
 * test_remote_backend.c — the remote MoE backend (eaas/remote.h) against four
 * expert servers over real UCX (servers on their own thread, one process):
 * server 0 hosts the lower half of every layer's experts, server 1 the upper
 * half, servers 2 and 3 all of them (replicas of both).
 *
 *   - remote = local bit for bit, on every MoE layer, with a call on each of
 *     the backend's two lanes in flight at once (double-batch overlap: two
 *     slots per server);
 *   - a hot expert (every token's choice) with three live replicas has its 40
 *     pairs of a call cut in three chunks, one per replica (13, 13 and 14
 *     pairs), bit for bit; taken off one server (ea_remote_set_hosted: a
 *     replica dropped) it is cut in two and that server runs none of it; the
 *     load report (ea_remote_take_load) counts every pair once; three calls
 *     of 8 pairs of it (not cut) go to its three replicas in turn;
 *   - server 3 hangs (its worker still takes the puts, it computes nothing):
 *     with a call of each lane in flight, the first wait times out and moves
 *     its pairs to a replica; the second finds server 3 given up and moves at
 *     once — one deadline is waited out, not two — and the bits are local;
 *   - server 0 stops answering (its thread no longer polls it): the same calls
 *     still give the local bits, through failover to server 2, and the
 *     failover and timeout counters count it;
 *   - server 2 stops too (3 hangs): the lower-half experts have no live replica; only
 *     the tokens routed to one of them fail (moe.h partial failure, naming
 *     layer and expert), the other tokens' rows are still exact, and health
 *     is degraded naming an expert; on lane 1, with the outcome's rows
 *     starting at t0 (a second micro-batch), the same tokens fail at t0 + t.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "eaas/remote.h"
#include "eaas_rig.h"
#include "harness.h"
#include "tiny_model.h"
#include "serve/engine.h"

#define NT 40 /* > 2 * EA_REMOTE_SPLIT_MIN: one expert's pairs of a call can be cut in three */
#define NS 4

static char model[1024];
static ea_engine *E;
static int H, K, NE;
static rig_backend srv; /* the servers' backend (their thread) */
static ea_moe_backend *RB;


static rig_server S[NS];
static atomic_int down[NS]; /* 1: the server thread no longer polls server i; 2: it only progresses its worker (hung) */

/* server 0 the lower half of each layer's experts, server 1 the upper half, servers 2 and 3 all of them */
static int halves_and_a_replica(int server, int expert, int ne) { return server >= 2 || (expert < ne / 2) == (server == 0); }
static atomic_int stop;

static void *server_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop))
        for (int i = 0; i < NS; i++)
            if (!atomic_load(&down[i]))
                ea_xsrv_poll(S[i].s);
            else if (atomic_load(&down[i]) == 2)
                ea_ucx_progress(S[i].u);
    return NULL;
}

static ea_status connect_cb(void *ctx, const ea_remote_hello *me, ea_xsrv_slot_info *out) {
    return ea_xsrv_add_client(((rig_server *)ctx)->s, me->addr, me->addr_len, me->result_addr, me->result_bytes, me->rkey,
                              me->rkey_len, out);
}

static void routing(uint64_t seed, float *x, int32_t *ids, float *w) { rig_routing(seed, NT, H, K, NE, x, ids, w); }

/* remote vs local on every MoE layer, two calls at once (lane 0: this layer,
 * lane 1: the next MoE layer or this one, other tokens); returns the number of
 * calls that differ */
static int compare_all(uint64_t seed) {
    float *x[2], *w[2], *yl[2], *yr[2];
    int32_t *ids[2];
    for (int i = 0; i < 2; i++) {
        x[i] = malloc(sizeof(float) * NT * H), w[i] = malloc(sizeof(float) * NT * K);
        yl[i] = malloc(sizeof(float) * NT * H), yr[i] = malloc(sizeof(float) * NT * H);
        ids[i] = malloc(sizeof(int32_t) * NT * K);
    }
    int bad = 0, L = E->m->cfg.n_layers;
    for (int l = 0; l < L; l++) {
        if (!E->m->cfg.layer_is_moe[l]) continue;
        int l2 = l + 1;
        while (l2 < L && !E->m->cfg.layer_is_moe[l2]) l2++;
        if (l2 == L) l2 = l;
        ea_moe_call c[2];
        for (int i = 0; i < 2; i++) {
            routing(seed + (uint64_t)l + 1000u * (uint64_t)i, x[i], ids[i], w[i]);
            c[i] = (ea_moe_call){.layer = i ? l2 : l, .lane = i, .x = x[i], .n_tokens = NT, .k = K, .ids = ids[i],
                                 .w = w[i], .y = yr[i]};
            if (ea_moe_backend_forward(E->be, c[i].layer, x[i], NT, K, ids[i], w[i], yl[i]) != EA_OK) bad++;
        }
        ea_status s = ea_moe_submit(RB, &c[0]);
        if (s == EA_OK) s = ea_moe_submit(RB, &c[1]);
        if (s == EA_OK) s = ea_moe_wait(RB, &c[0], NULL);
        if (s == EA_OK) s = ea_moe_wait(RB, &c[1], NULL);
        for (int i = 0; i < 2; i++)
            if (s != EA_OK || memcmp(yl[i], yr[i], sizeof(float) * NT * H) != 0) {
                fprintf(stderr, "  layer %d lane %d: remote != local (%s)\n", c[i].layer, i, ea_errmsg());
                bad++;
            }
    }
    for (int i = 0; i < 2; i++) free(x[i]), free(w[i]), free(yl[i]), free(yr[i]), free(ids[i]);
    return bad;
}

TEST(a_lane_in_flight_takes_no_second_call) {
    int l = 0;
    while (!E->m->cfg.layer_is_moe[l]) l++;
    float x[NT * 64] = {0}, w[NT * 16] = {0}, y[NT * 64];
    int32_t ids[NT * 16] = {0};
    CHECK(H <= 64 && K <= 16);
    ea_moe_call c = {.layer = l, .lane = 1, .x = x, .n_tokens = NT, .k = K, .ids = ids, .w = w, .y = y};
    CHECK_EQ(ea_moe_lanes(RB), 2);
    CHECK_EQ(ea_moe_submit(RB, &c), EA_OK);
    CHECK_EQ(ea_moe_submit(RB, &c), EA_ERR_INVALID_ARG);
    CHECK(strstr(ea_errmsg(), "in flight") != NULL);
    CHECK_EQ(ea_moe_wait(RB, &c, NULL), EA_OK);
    CHECK_EQ(ea_moe_wait(RB, &c, NULL), EA_ERR_INVALID_ARG);
    c.lane = 2;
    CHECK_EQ(ea_moe_submit(RB, &c), EA_ERR_INVALID_ARG);
}

TEST(remote_equals_local) { CHECK_EQ(compare_all(1), 0); }

/* Pairs server i has run so far. */
static uint64_t ran(int i) {
    ea_xsrv_stats st;
    ea_xsrv_get_stats(S[i].s, &st);
    return st.tokens;
}

TEST(a_hot_expert_is_cut_over_its_replicas) {
    int l = 0;
    while (!E->m->cfg.layer_is_moe[l]) l++;
    const int X = 1, LE = E->m->cfg.n_layers * NE; /* X in the lower half: servers 0, 2 and 3 host it */
    float *x = malloc(sizeof(float) * NT * H), *w = malloc(sizeof(float) * NT * K);
    float *yl = malloc(sizeof(float) * NT * H), *yr = malloc(sizeof(float) * NT * H);
    int32_t *ids = malloc(sizeof(int32_t) * NT * K), one[NT];
    float w1[NT];
    uint32_t *load = calloc((size_t)LE, sizeof *load);
    uint8_t *h = malloc((size_t)LE);
    routing(11, x, ids, w);
    for (int t = 0; t < NT; t++) one[t] = X, w1[t] = w[t * K];
    /* every token's only choice is X (k = 1): 40 pairs; then server 2 drops X */
    const uint64_t want[2][NS] = {{0, 13, 13, 14}, {0, 0, 20, 20}}; /* sorted: 3 chunks of 40, then 2 */
    for (int i = 0; i < 2; i++) {
        if (i == 1) {
            memcpy(h, S[2].hosted, (size_t)LE);
            h[(size_t)l * NE + X] = 0;
            ea_remote_set_hosted(RB, 2, h);
        }
        ea_remote_stats a, b;
        ea_remote_get_stats(RB, &a);
        uint64_t d[NS];
        for (int s = 0; s < NS; s++) d[s] = ran(s);
        ea_remote_take_load(RB, load);
        CHECK_EQ(ea_moe_backend_forward(E->be, l, x, NT, 1, one, w1, yl), EA_OK);
        ea_moe_call c = {.layer = l, .x = x, .n_tokens = NT, .k = 1, .ids = one, .w = w1, .y = yr};
        CHECK_EQ(ea_moe_forward(RB, &c, NULL), EA_OK);
        CHECK(memcmp(yl, yr, sizeof(float) * NT * H) == 0);
        ea_remote_get_stats(RB, &b);
        CHECK_EQ(b.splits - a.splits, 1);
        for (int s = 0; s < NS; s++) d[s] = ran(s) - d[s];
        fprintf(stderr, "  hot expert %d, %d pairs%s: servers ran %llu / %llu / %llu / %llu of them\n", X, NT,
                i ? ", server 2 without it" : "", (unsigned long long)d[0], (unsigned long long)d[1],
                (unsigned long long)d[2], (unsigned long long)d[3]);
        CHECK_EQ(d[1], 0);
        if (i == 1) CHECK_EQ(d[2], 0);
        for (int p = 0; p < NS; p++) /* sort */
            for (int q = p + 1; q < NS; q++)
                if (d[q] < d[p]) {
                    uint64_t t = d[p];
                    d[p] = d[q], d[q] = t;
                }
        for (int s = 0; s < NS; s++) CHECK_EQ(d[s], want[i][s]);
        CHECK_EQ(ea_remote_take_load(RB, load), 1);
        CHECK_EQ(load[(size_t)l * NE + X], NT);
    }
    /* top-K routing with X first everywhere: the whole call still equals local, and the load counts every pair */
    for (int t = 0; t < NT; t++) {
        int at = 0;
        for (int j = 0; j < K; j++) at = ids[t * K + j] == X ? j : at;
        ids[t * K + at] = ids[t * K];
        ids[t * K] = X;
    }
    CHECK_EQ(ea_moe_backend_forward(E->be, l, x, NT, K, ids, w, yl), EA_OK);
    ea_moe_call c = {.layer = l, .x = x, .n_tokens = NT, .k = K, .ids = ids, .w = w, .y = yr};
    CHECK_EQ(ea_moe_forward(RB, &c, NULL), EA_OK);
    CHECK(memcmp(yl, yr, sizeof(float) * NT * H) == 0);
    ea_remote_take_load(RB, load);
    uint64_t sum = 0;
    for (int q = 0; q < LE; q++) sum += load[q];
    CHECK_EQ(sum, (uint64_t)NT * K);
    CHECK_EQ(load[(size_t)l * NE + X], NT);
    ea_remote_set_hosted(RB, 2, S[2].hosted);
    /* a few pairs of X (8, not cut) go to one replica per call, the next call's to the next one */
    int seen_by[NS] = {0};
    for (int call = 0; call < 3; call++) {
        uint64_t d[NS];
        for (int s = 0; s < NS; s++) d[s] = ran(s);
        ea_moe_call c8 = {.layer = l, .x = x, .n_tokens = 8, .k = 1, .ids = one, .w = w1, .y = yr};
        CHECK_EQ(ea_moe_backend_forward(E->be, l, x, 8, 1, one, w1, yl), EA_OK);
        CHECK_EQ(ea_moe_forward(RB, &c8, NULL), EA_OK);
        CHECK(memcmp(yl, yr, sizeof(float) * 8 * H) == 0);
        int by = -1;
        for (int s = 0; s < NS; s++)
            if (ran(s) - d[s] == 8) by = s;
        CHECK(by == 0 || by == 2 || by == 3);
        if (by >= 0) seen_by[by]++;
    }
    CHECK(seen_by[0] == 1 && seen_by[2] == 1 && seen_by[3] == 1);
    free(x), free(w), free(yl), free(yr), free(ids), free(load), free(h);
}

TEST(a_hung_server_costs_one_deadline_for_both_lanes) {
    ea_remote_stats a, b;
    ea_remote_get_stats(RB, &a);
    atomic_store(&down[3], 2);
    double t0 = ea_now_s();
    CHECK_EQ(compare_all(7), 0);
    double dt = ea_now_s() - t0;
    ea_remote_get_stats(RB, &b);
    fprintf(stderr, "  server 3 hung: %.3f s, %llu timeout(s), %llu failovers\n", dt,
            (unsigned long long)(b.timeouts - a.timeouts), (unsigned long long)(b.failovers - a.failovers));
    CHECK_EQ(b.timeouts - a.timeouts, 1);
    CHECK(b.failovers > a.failovers);
    CHECK_EQ(b.servers_live, 3);
    atomic_store(&down[3], 1);
}

TEST(failover_to_a_replica_keeps_the_bits) {
    atomic_store(&down[0], 1);
    CHECK_EQ(compare_all(2), 0);
    ea_remote_stats st;
    ea_remote_get_stats(RB, &st);
    fprintf(stderr, "  server 0 down: %llu failovers, %llu timeouts, %d servers live\n",
            (unsigned long long)st.failovers, (unsigned long long)st.timeouts, st.servers_live);
    CHECK(st.failovers > 0);
    CHECK(st.timeouts > 0);
    CHECK_EQ(st.servers_live, 2);
    char why[128];
    CHECK_EQ(ea_moe_backend_health(RB, why, sizeof why), EA_MOE_OK);
}

TEST(no_replica_fails_only_its_tokens) {
    atomic_store(&down[2], 1);
    int l = 0;
    while (!E->m->cfg.layer_is_moe[l]) l++;
    float *x = malloc(sizeof(float) * NT * H), *w = malloc(sizeof(float) * NT * K);
    float *yl = malloc(sizeof(float) * NT * H), *yr = malloc(sizeof(float) * NT * H);
    int32_t *ids = malloc(sizeof(int32_t) * NT * K);
    int16_t tf[NT];
    ea_moe_outcome oc = {.tok_fail = tf};
    int lower = 0, upper = 0;
    for (uint64_t seed = 3; seed < 40 && !(lower && upper); seed++) { /* a routing with tokens of both kinds */
        routing(seed, x, ids, w);
        /* with top-8 of 16 a random token almost never misses the lower half:
         * odd tokens take K distinct upper-half experts (K <= NE / 2) */
        for (int t = 1; t < NT && K <= NE / 2; t += 2)
            for (int j = 0; j < K; j++) ids[t * K + j] = NE / 2 + (j + t) % (NE / 2);
        lower = upper = 0;
        for (int t = 0; t < NT; t++) {
            int any_lower = 0;
            for (int j = 0; j < K; j++) any_lower |= ids[t * K + j] < NE / 2;
            lower += any_lower, upper += !any_lower;
        }
    }
    CHECK(lower > 0 && upper > 0);
    CHECK_EQ(ea_moe_backend_forward(E->be, l, x, NT, K, ids, w, yl), EA_OK);
    ea_moe_outcome_clear(&oc, NT);
    ea_moe_call c = {.layer = l, .x = x, .n_tokens = NT, .k = K, .ids = ids, .w = w, .y = yr};
    CHECK_EQ(ea_moe_forward(RB, &c, &oc), EA_OK);
    for (int t = 0; t < NT; t++) {
        int any_lower = 0;
        for (int j = 0; j < K; j++) any_lower |= ids[t * K + j] < NE / 2;
        CHECK_EQ(oc.tok_fail[t] >= 0, any_lower);
        if (!any_lower) CHECK(memcmp(yl + (size_t)t * H, yr + (size_t)t * H, sizeof(float) * H) == 0);
    }
    CHECK_EQ(oc.n_failed_tokens, lower);
    CHECK(oc.n_fail >= 1 && oc.fail[0].layer == l && oc.fail[0].expert < NE / 2);
    CHECK(strstr(oc.fail[0].why, "no live replica") != NULL);
    /* lane 1, as the second micro-batch of a run of 2*NT tokens: the rows from NT on */
    int16_t tf2[2 * NT];
    ea_moe_outcome oc2 = {.tok_fail = tf2};
    ea_moe_outcome_clear(&oc2, 2 * NT);
    oc2.t0 = NT;
    c.lane = 1;
    CHECK_EQ(ea_moe_forward(RB, &c, &oc2), EA_OK);
    for (int t = 0; t < NT; t++) {
        CHECK_EQ(oc2.tok_fail[t], -1);
        CHECK_EQ(oc2.tok_fail[NT + t] >= 0, oc.tok_fail[t] >= 0);
    }
    CHECK_EQ(oc2.n_failed_tokens, lower);
    /* without an outcome the call fails, naming the expert */
    CHECK_EQ(ea_moe_backend_forward(RB, l, x, NT, K, ids, w, yr), EA_ERR_UNAVAILABLE);
    CHECK(strstr(ea_errmsg(), "expert") != NULL);
    char why[128];
    CHECK_EQ(ea_moe_backend_health(RB, why, sizeof why), EA_MOE_DEGRADED);
    CHECK(strstr(why, "no live replica") != NULL);
    fprintf(stderr, "  servers 0, 2 and 3 down: %d of %d tokens failed; health: %s\n", oc.n_failed_tokens, NT, why);
    free(x), free(w), free(yl), free(yr), free(ids);
}

int main(void) {
    if (tiny_model("remote-qwen3", "--family qwen3_moe --preset tiny --seed 9 --format hf", model, sizeof model)) return 1;
    ea_engine_opts eo = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 64, .max_seqs = 1};
    if (ea_engine_create(&eo, &E) != EA_OK) return 1;
    const ea_model_config *cfg = &E->m->cfg;
    H = cfg->hidden_size, K = cfg->n_experts_per_tok, NE = cfg->n_experts;
    if (rig_backend_create(E, 64, &srv) != EA_OK) {
        fprintf(stderr, "server backend: %s\n", ea_errmsg());
        return 1;
    }
    ea_remote_opts ro = {.n_layers = cfg->n_layers, .n_experts = NE, .hidden = H, .max_tokens = NT, .max_k = K,
                         .timeout_s = 0.3, .lanes = 2};
    if (ea_remote_create(&ro, &RB) != EA_OK) {
        fprintf(stderr, "remote: %s\n", ea_errmsg());
        return 1;
    }
    for (int i = 0; i < NS; i++) {
        char name[16];
        int index;
        snprintf(name, sizeof name, "s%d", i);
        if (rig_server_create(&S[i], E, srv.be, i, halves_and_a_replica, NT, 2, 1) != EA_OK ||
            ea_remote_add_server(RB, name, S[i].hosted, connect_cb, &S[i], &index) != EA_OK || index != i) {
            fprintf(stderr, "server %d: %s\n", i, ea_errmsg());
            return 1;
        }
    }
    pthread_t th;
    pthread_create(&th, NULL, server_loop, NULL);
    RUN(remote_equals_local);
    RUN(a_hot_expert_is_cut_over_its_replicas);
    RUN(a_lane_in_flight_takes_no_second_call);
    RUN(a_hung_server_costs_one_deadline_for_both_lanes);
    RUN(failover_to_a_replica_keeps_the_bits);
    RUN(no_replica_fails_only_its_tokens);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    ea_moe_backend_destroy(RB);
    for (int i = 0; i < NS; i++) rig_server_destroy(&S[i]);
    rig_backend_destroy(&srv);
    ea_engine_destroy(E);
    return TEST_SUMMARY();
}
