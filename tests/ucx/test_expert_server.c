/*
 * test_expert_server.c — the expert server loop (eaas/server.h) over real UCX,
 * two servers and two clients in one process (the servers on their own
 * thread, each with its own UCX context):
 *
 *   - remote = local, bit for bit: server A hosts the lower half of a layer's
 *     experts, server B the upper half; a client sends each server the pairs it
 *     hosts (-1 elsewhere), adds each token's k outputs in slot order from
 *     0.0f, and gets exactly the local backend's y, for every MoE layer;
 *   - cross-client batching: with the servers' poll rounds paused (their
 *     workers still progress), both clients write their slots; one round
 *     answers both with one run per layer;
 *   - a malformed header is answered REFUSED with its reason, and the same slot
 *     serves the next good call;
 *   - a client with a result region for fewer tokens than the server takes
 *     connects; a call it cannot hold the answer to is refused, one it can is
 *     served.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "eaas/server.h"
#include "eaas_rig.h"
#include "harness.h"
#include "tiny_model.h"
#include "kernels/ops.h"
#include "serve/engine.h"

#define NT 6

static char model[1024];
static ea_engine *E;        /* the reference: its local backend, on the main thread */
static rig_backend srv; /* the servers' backend (their thread) */
static int H, K, NE, L0; /* hidden, top-k, experts, first MoE layer */


static rig_server S[2];

/* server 0 the lower half of each layer's experts, server 1 the upper half */
static int lower_or_upper_half(int server, int expert, int ne) { return (expert < ne / 2) == (server == 0); }
static atomic_int paused, stop, rounds;

static void *server_loop(void *arg) {
    (void)arg;
    for (; !atomic_load(&stop); atomic_fetch_add(&rounds, 1))
        for (int i = 0; i < 2; i++) {
            if (atomic_load(&paused))
                ea_ucx_progress(S[i].u); /* puts land (their flush may need the target's progress); no slot is taken */
            else
                ea_xsrv_poll(S[i].s);
        }
    return NULL;
}

typedef struct {
    ea_ucx *u;
    ea_ucx_mem *res[2];
    ea_ucx_ep *ep[2];
    ea_ucx_remote *slot[2];
    uint32_t id[2];
    uint64_t seq;
    uint8_t *stage; /* header + payload staging, kept until the flush */
} client;
static client C[3]; /* C[2]: calls of at most NT - 2 tokens (a smaller result region) */

/* rt: the tokens of the client's largest call, which its result region holds */
static ea_status connect_client(client *c, int rt) {
    EA_TRY(ea_ucx_create(&c->u));
    size_t rb = ea_slot_result_bytes(rt, K, H);
    c->stage = calloc(1, EA_SLOT_PAYLOAD_OFF + ea_slot_payload_bytes(NT, K, H));
    for (int i = 0; i < 2; i++) {
        EA_TRY(ea_ucx_mem_alloc(c->u, rb, &c->res[i]));
        const void *a, *k;
        size_t an, kn;
        ea_ucx_address(c->u, &a, &an);
        ea_ucx_mem_rkey(c->res[i], &k, &kn);
        ea_xsrv_slot_info si;
        EA_TRY(ea_xsrv_add_client(S[i].s, a, an, ea_ucx_mem_addr(c->res[i]), rb, k, kn, &si));
        c->id[i] = si.client;
        EA_TRY(ea_ucx_connect(c->u, si.server_addr, si.server_addr_len, &c->ep[i]));
        EA_TRY(ea_ucx_remote_open(c->ep[i], si.slot_addr, si.slot_bytes, si.rkey, si.rkey_len, &c->slot[i]));
    }
    return EA_OK;
}

/* Write one call to server i (ids: -1 where the other server hosts the expert); bad_magic corrupts it. */
static ea_status write_call_n(client *c, int i, int layer, const float *x, const int32_t *ids, int bad_magic, int nt) {
    ea_slot_header h = {.seq = c->seq, .client = c->id[i], .layer = layer, .n_tokens = nt, .k = K, .hidden = H};
    uint8_t *st = c->stage;
    ea_slot_header_write(st + EA_SLOT_HEADER_OFF, &h);
    if (bad_magic) st[EA_SLOT_HEADER_OFF] ^= 0xff;
    memcpy(st + EA_SLOT_PAYLOAD_OFF, x, sizeof(float) * nt * H);
    int32_t *mine = (int32_t *)(st + EA_SLOT_PAYLOAD_OFF + sizeof(float) * nt * H);
    for (int p = 0; p < nt * K; p++) mine[p] = S[i].hosted[(size_t)layer * NE + ids[p]] ? ids[p] : -1;
    uint64_t *word = (uint64_t *)st;
    *word = ea_slot_word(EA_SLOT_WRITTEN, c->seq);
    EA_TRY(ea_ucx_put(c->slot[i], EA_SLOT_HEADER_OFF, st + EA_SLOT_HEADER_OFF,
                      EA_SLOT_HEADER_BYTES + ea_slot_payload_bytes(nt, K, H)));
    EA_TRY(ea_ucx_fence(c->u));
    EA_TRY(ea_ucx_put(c->slot[i], 0, word, 8));
    return ea_ucx_flush(c->ep[i], 5);
}
static ea_status write_call(client *c, int i, int layer, const float *x, const int32_t *ids, int bad_magic) {
    return write_call_n(c, i, layer, x, ids, bad_magic, NT);
}

/* Wait for server i's answer to the current call: its state, and the refusal. */
static ea_slot_state wait_result(client *c, int i, uint32_t *refusal) {
    const uint8_t *r = ea_ucx_mem_ptr(c->res[i]);
    for (double end = ea_now_s() + 10; ea_now_s() < end;) {
        /* every client process progresses its worker while it waits (the server's flush needs it) */
        for (int q = 0; q < 3; q++) ea_ucx_progress(C[q].u);
        uint64_t w = __atomic_load_n((const uint64_t *)r, __ATOMIC_ACQUIRE);
        if (ea_slot_word_seq(w) == (c->seq & EA_SLOT_SEQ_MASK) && ea_slot_word_state(w) >= EA_SLOT_COMPUTED) {
            memcpy(refusal, r + 8, 4);
            return ea_slot_word_state(w);
        }
    }
    return EA_SLOT_IDLE;
}

/* y[t] = sum over j in slot order from 0.0f of w[t][j] * out[t][j], out from whichever server ran the pair. */
static void combine(client *c, int layer, const int32_t *ids, const float *w, float *y) {
    for (int t = 0; t < NT; t++) {
        float *yt = y + (size_t)t * H;
        memset(yt, 0, sizeof(float) * H);
        for (int j = 0; j < K; j++) {
            int i = S[0].hosted[(size_t)layer * NE + ids[t * K + j]] ? 0 : 1;
            const float *o = (const float *)((const uint8_t *)ea_ucx_mem_ptr(c->res[i]) + EA_SLOT_RESULT_OUT_OFF) +
                             (size_t)(t * K + j) * H;
            ea_k_axpy(w[t * K + j], o, yt, H);
        }
    }
}

static void routing(uint64_t seed, float *x, int32_t *ids, float *w) { rig_routing(seed, NT, H, K, NE, x, ids, w); }

TEST(remote_equals_local_bit_for_bit) {
    float *x = malloc(sizeof(float) * NT * H), *w = malloc(sizeof(float) * NT * K);
    float *yl = malloc(sizeof(float) * NT * H), *yr = malloc(sizeof(float) * NT * H);
    int32_t *ids = malloc(sizeof(int32_t) * NT * K);
    int layers = 0;
    for (int l = 0; l < E->m->cfg.n_layers; l++) {
        if (!E->m->cfg.layer_is_moe[l]) continue;
        routing((uint64_t)l + 7, x, ids, w);
        CHECK_EQ(ea_moe_backend_forward(E->be, l, x, NT, K, ids, w, yl), EA_OK);
        client *c = &C[0];
        c->seq++;
        for (int i = 0; i < 2; i++) CHECK_EQ(write_call(c, i, l, x, ids, 0), EA_OK);
        uint32_t why;
        for (int i = 0; i < 2; i++) CHECK_EQ(wait_result(c, i, &why), EA_SLOT_COMPUTED);
        combine(c, l, ids, w, yr);
        if (memcmp(yl, yr, sizeof(float) * NT * H) != 0) fprintf(stderr, "  layer %d: remote != local\n", l);
        CHECK(memcmp(yl, yr, sizeof(float) * NT * H) == 0);
        layers++;
    }
    fprintf(stderr, "  %d MoE layers, %d tokens x top-%d over 2 servers: identical to local\n", layers, NT, K);
    free(x), free(w), free(yl), free(yr), free(ids);
}

TEST(two_clients_batched_in_one_round) {
    float x[2][NT * 64], w[2][NT * 8];
    int32_t ids[2][NT * 8];
    CHECK(H <= 64 && K <= 8);
    ea_xsrv_stats before[2], after[2];
    atomic_store(&paused, 1);
    for (int r0 = atomic_load(&rounds); atomic_load(&rounds) < r0 + 2;) {
    } /* a round that began before the pause is over */
    for (int i = 0; i < 2; i++) ea_xsrv_get_stats(S[i].s, &before[i]);
    for (int ci = 0; ci < 2; ci++) {
        routing(100 + (uint64_t)ci, x[ci], ids[ci], w[ci]);
        C[ci].seq++;
        for (int i = 0; i < 2; i++) CHECK_EQ(write_call(&C[ci], i, L0, x[ci], ids[ci], 0), EA_OK);
    }
    atomic_store(&paused, 0);
    uint32_t why;
    for (int ci = 0; ci < 2; ci++)
        for (int i = 0; i < 2; i++) CHECK_EQ(wait_result(&C[ci], i, &why), EA_SLOT_COMPUTED);
    for (int i = 0; i < 2; i++) ea_xsrv_get_stats(S[i].s, &after[i]);
    for (int i = 0; i < 2; i++) {
        fprintf(stderr, "  server %d: %d clients, +%llu batches, +%llu pairs\n", i, after[i].clients,
                (unsigned long long)(after[i].batches - before[i].batches),
                (unsigned long long)(after[i].tokens - before[i].tokens));
        CHECK_EQ(after[i].clients, 3); /* C[2] is connected too, and sends nothing here */
        CHECK_EQ(after[i].batches - before[i].batches, 1); /* both clients' pairs in one run */
    }
    CHECK_EQ(after[0].tokens - before[0].tokens + after[1].tokens - before[1].tokens, 2 * NT * K);
    /* and each client's answer is its own */
    for (int ci = 0; ci < 2; ci++) {
        float yl[NT * 64], yr[NT * 64];
        CHECK_EQ(ea_moe_backend_forward(E->be, L0, x[ci], NT, K, ids[ci], w[ci], yl), EA_OK);
        combine(&C[ci], L0, ids[ci], w[ci], yr);
        CHECK(memcmp(yl, yr, sizeof(float) * NT * H) == 0);
    }
}

TEST(malformed_header_refused_then_served) {
    float *x = malloc(sizeof(float) * NT * H), *w = malloc(sizeof(float) * NT * K);
    int32_t *ids = malloc(sizeof(int32_t) * NT * K);
    routing(5, x, ids, w);
    client *c = &C[1];
    c->seq++;
    CHECK_EQ(write_call(c, 0, L0, x, ids, 1), EA_OK);
    uint32_t why = 0;
    CHECK_EQ(wait_result(c, 0, &why), EA_SLOT_REFUSED);
    CHECK_EQ(why, EA_SLOT_BAD_MAGIC);
    c->seq++;
    CHECK_EQ(write_call(c, 0, L0, x, ids, 0), EA_OK);
    CHECK_EQ(wait_result(c, 0, &why), EA_SLOT_COMPUTED);
    CHECK_EQ(why, 0);
    ea_xsrv_stats st;
    ea_xsrv_get_stats(S[0].s, &st);
    CHECK_EQ(st.slots_refused, 1);
    free(x), free(w), free(ids);
}

/* A client whose calls are smaller than the server's largest (serve
 * --max-batch-tokens below the server's --max-tokens) sizes its result region
 * for them: it connects, a call whose answer would not fit is refused (bad
 * payload size) and one that fits is served, bit for bit. */
TEST(smaller_result_region) {
    float *x = malloc(sizeof(float) * NT * H), *w = malloc(sizeof(float) * NT * K);
    float *yl = malloc(sizeof(float) * NT * H);
    int32_t *ids = malloc(sizeof(int32_t) * NT * K);
    routing(9, x, ids, w);
    client *c = &C[2];
    uint32_t why = 0;
    c->seq++;
    CHECK_EQ(write_call_n(c, 0, L0, x, ids, 0, NT), EA_OK);
    CHECK_EQ(wait_result(c, 0, &why), EA_SLOT_REFUSED);
    CHECK_EQ(why, EA_SLOT_BAD_SIZE);
    int nt = NT - 2;
    c->seq++;
    for (int i = 0; i < 2; i++) CHECK_EQ(write_call_n(c, i, L0, x, ids, 0, nt), EA_OK);
    for (int i = 0; i < 2; i++) CHECK_EQ(wait_result(c, i, &why), EA_SLOT_COMPUTED);
    CHECK_EQ(ea_moe_backend_forward(E->be, L0, x, nt, K, ids, w, yl), EA_OK);
    for (int t = 0; t < nt; t++) { /* combine(), for nt tokens */
        float yt[64] = {0};
        CHECK(H <= 64);
        for (int j = 0; j < K; j++) {
            int i = S[0].hosted[(size_t)L0 * NE + ids[t * K + j]] ? 0 : 1;
            const float *o = (const float *)((const uint8_t *)ea_ucx_mem_ptr(c->res[i]) + EA_SLOT_RESULT_OUT_OFF) +
                             (size_t)(t * K + j) * H;
            ea_k_axpy(w[t * K + j], o, yt, H);
        }
        CHECK(memcmp(yt, yl + (size_t)t * H, sizeof(float) * H) == 0);
    }
    free(x), free(w), free(yl), free(ids);
}

int main(void) {
    if (tiny_model("expert-server-qwen3", "--family qwen3_moe --preset tiny --seed 8 --format hf", model, sizeof model)) return 1;
    ea_engine_opts eo = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 64, .max_seqs = 1};
    if (ea_engine_create(&eo, &E) != EA_OK) {
        fprintf(stderr, "engine: %s\n", ea_errmsg());
        return 1;
    }
    const ea_model_config *cfg = &E->m->cfg;
    H = cfg->hidden_size, K = cfg->n_experts_per_tok, NE = cfg->n_experts;
    for (L0 = 0; !cfg->layer_is_moe[L0]; L0++) {
    }
    if (rig_backend_create(E, 64, &srv) != EA_OK) {
        fprintf(stderr, "server backend: %s\n", ea_errmsg());
        return 1;
    }
    for (int i = 0; i < 2; i++)
        if (rig_server_create(&S[i], E, srv.be, i, lower_or_upper_half, NT, 4, 2) != EA_OK) {
            fprintf(stderr, "server: %s\n", ea_errmsg());
            return 1;
        }
    for (int c = 0; c < 3; c++)
        if (connect_client(&C[c], c == 2 ? NT - 2 : NT) != EA_OK) {
            fprintf(stderr, "client: %s\n", ea_errmsg());
            return 1;
        }
    pthread_t th;
    pthread_create(&th, NULL, server_loop, NULL);
    RUN(remote_equals_local_bit_for_bit);
    RUN(two_clients_batched_in_one_round);
    RUN(malformed_header_refused_then_served);
    RUN(smaller_result_region);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < 2; i++) {
            ea_ucx_remote_close(C[c].slot[i]);
            ea_ucx_disconnect(C[c].ep[i], 0.2);
            ea_ucx_mem_free(C[c].res[i]);
        }
        ea_ucx_destroy(C[c].u);
        free(C[c].stage);
    }
    for (int i = 0; i < 2; i++) rig_server_destroy(&S[i]);
    rig_backend_destroy(&srv);
    ea_engine_destroy(E);
    return TEST_SUMMARY();
}
