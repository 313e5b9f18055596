/*
 * test_ucx_transport.c — the one-sided transport (eaas/ucx.h) between two real
 * processes on this machine, in the expert slot's pattern (eaas/slot.h):
 *
 *   client: put payload (x) into the server's slot, fence, put the state word
 *           (WRITTEN, seq), flush
 *   server: poll its slot (progressing the worker), read x, put 2x + seq into
 *           the client's result region, fence, put the result word (COMPUTED, seq)
 *   client: poll its result word for seq, check every value
 *
 * 200 round trips of 1 KiB to 64 KiB, each result exact and in order; then a
 * put past the end of the remote region is refused locally; then the server is
 * stopped (SIGSTOP) and a call's wait ends at its deadline instead of hanging.
 * Addresses and keys travel over a pipe pair (the monitor's job later). Runs
 * on the transports UCX picks here (shared memory with
 * UCX_POSIX_ERROR_HANDLING=y, which ea_ucx_create sets), and with UCX_TLS=tcp
 * when EA_UCX_TCP=1 (test_ucx_transport_tcp.sh).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "eaas/slot.h"
#include "eaas/ucx.h"
#include "harness.h"

#define REGION (128 + 64 * 1024 + 64)
#define ROUNDS 200

/* ---- a tiny framed exchange over a pipe: [u32 len][bytes] ---- */
static int send_blob(int fd, const void *p, uint32_t n) {
    return write(fd, &n, 4) == 4 && write(fd, p, n) == (ssize_t)n;
}
static void *recv_blob(int fd, uint32_t *n) {
    if (read(fd, n, 4) != 4 || *n > (1u << 20)) return NULL;
    uint8_t *p = malloc(*n ? *n : 1);
    size_t got = 0;
    while (p && got < *n) {
        ssize_t k = read(fd, p + got, *n - got);
        if (k <= 0) {
            free(p);
            return NULL;
        }
        got += (size_t)k;
    }
    return p;
}

typedef struct {
    ea_ucx *u;
    ea_ucx_mem *mine;
    ea_ucx_ep *ep;
    ea_ucx_remote *peer;
} side;

/* Publish my address and region, read the peer's, connect. */
static ea_status meet(side *s, int rfd, int wfd) {
    EA_TRY(ea_ucx_create(&s->u));
    EA_TRY(ea_ucx_mem_alloc(s->u, REGION, &s->mine));
    const void *a, *k;
    size_t an, kn;
    ea_ucx_address(s->u, &a, &an);
    ea_ucx_mem_rkey(s->mine, &k, &kn);
    uint64_t addr = ea_ucx_mem_addr(s->mine);
    if (!send_blob(wfd, a, (uint32_t)an) || !send_blob(wfd, &addr, 8) || !send_blob(wfd, k, (uint32_t)kn))
        return ea_err(EA_ERR_IO, "pipe");
    uint32_t pan, n8, pkn;
    void *pa = recv_blob(rfd, &pan), *pad = recv_blob(rfd, &n8), *pk = recv_blob(rfd, &pkn);
    ea_status st = !pa || !pad || !pk || n8 != 8 ? ea_err(EA_ERR_IO, "pipe") : EA_OK;
    if (st == EA_OK) st = ea_ucx_connect(s->u, pa, pan, &s->ep);
    if (st == EA_OK) st = ea_ucx_remote_open(s->ep, *(uint64_t *)pad, REGION, pk, pkn, &s->peer);
    free(pa);
    free(pad);
    free(pk);
    return st;
}

static uint64_t load_word(const void *p) { return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE); }

/* The server: answers slots until its parent closes the pipe; never waits on the client but by polling. */
static int server(int rfd, int wfd) {
    side s = {0};
    if (meet(&s, rfd, wfd) != EA_OK) {
        fprintf(stderr, "server: %s\n", ea_errmsg());
        return 1;
    }
    uint8_t *slot = ea_ucx_mem_ptr(s.mine);
    float *out = malloc(64 * 1024);
    uint64_t seen = 0;
    for (double end = ea_now_s() + 60; ea_now_s() < end;) {
        ea_ucx_progress(s.u);
        uint64_t w = load_word(slot);
        if (ea_slot_word_state(w) != EA_SLOT_WRITTEN || ea_slot_word_seq(w) == seen) continue;
        seen = ea_slot_word_seq(w);
        uint32_t n = 0;
        memcpy(&n, slot + 64, 4); /* payload bytes, this test's own header */
        const float *x = (const float *)(slot + 128);
        for (uint32_t i = 0; i < n / 4; i++) out[i] = 2 * x[i] + (float)seen;
        uint64_t rw = ea_slot_word(EA_SLOT_COMPUTED, seen);
        if (ea_ucx_put(s.peer, 64, out, n) != EA_OK || ea_ucx_fence(s.u) != EA_OK ||
            ea_ucx_put(s.peer, 0, &rw, 8) != EA_OK || ea_ucx_flush(s.ep, 5) != EA_OK) {
            fprintf(stderr, "server: %s\n", ea_errmsg());
            return 1;
        }
        if (seen == ROUNDS) break;
    }
    /* stay until the parent is done (it stops us with SIGSTOP, then kills us) */
    char c;
    while (read(rfd, &c, 1) > 0) {
    }
    free(out);
    return 0;
}

static side C;
static pid_t child;

/* One call: x of n bytes with sequence number seq; waits for the result at most deadline_s. */
static ea_status call(uint64_t seq, const float *x, uint32_t n, float *y, double deadline_s) {
    uint8_t hdr[64] = {0};
    memcpy(hdr, &n, 4);
    static uint64_t word;
    word = ea_slot_word(EA_SLOT_WRITTEN, seq);
    EA_TRY(ea_ucx_put(C.peer, 128, x, n));
    EA_TRY(ea_ucx_put(C.peer, 64, hdr, sizeof hdr));
    EA_TRY(ea_ucx_fence(C.u));
    EA_TRY(ea_ucx_put(C.peer, 0, &word, 8));
    EA_TRY(ea_ucx_flush(C.ep, deadline_s));
    const uint8_t *res = ea_ucx_mem_ptr(C.mine);
    for (double end = ea_now_s() + deadline_s;;) {
        ea_ucx_progress(C.u);
        uint64_t w = load_word(res);
        if (ea_slot_word_state(w) == EA_SLOT_COMPUTED && ea_slot_word_seq(w) == seq) break;
        if (ea_now_s() > end) return ea_err(EA_ERR_TIMEOUT, "no result for call %llu in %.1f s", (unsigned long long)seq, deadline_s);
    }
    memcpy(y, res + 64, n);
    return EA_OK;
}

TEST(round_trips_exact_and_in_order) {
    float *x = malloc(64 * 1024), *y = malloc(64 * 1024);
    double t0 = ea_now_s();
    for (uint64_t seq = 1; seq <= ROUNDS; seq++) {
        uint32_t n = (uint32_t)(1024u << (seq % 7)); /* 1 KiB .. 64 KiB */
        for (uint32_t i = 0; i < n / 4; i++) x[i] = (float)(i % 977) * 0.25f - (float)seq;
        ea_status s = call(seq, x, n, y, 10);
        if (s != EA_OK) fprintf(stderr, "  call %llu: %s\n", (unsigned long long)seq, ea_errmsg());
        CHECK_EQ(s, EA_OK);
        for (uint32_t i = 0; i < n / 4; i++)
            if (y[i] != 2 * x[i] + (float)seq) {
                fprintf(stderr, "  call %llu value %u: %g != %g\n", (unsigned long long)seq, i, y[i],
                        2 * x[i] + (float)seq);
                CHECK(0);
            }
    }
    fprintf(stderr, "  %d round trips of 1-64 KiB in %.3f s\n", ROUNDS, ea_now_s() - t0);
    free(x);
    free(y);
}

TEST(put_past_the_region_refused) {
    uint8_t b[16] = {0};
    CHECK_EQ(ea_ucx_put(C.peer, REGION - 8, b, 16), EA_ERR_RANGE);
    CHECK_EQ(ea_ucx_put(C.peer, (size_t)-1, b, 1), EA_ERR_RANGE);
}

TEST(hung_server_gives_a_timeout_not_a_hang) {
    CHECK_EQ(kill(child, SIGSTOP), 0);
    float x[16] = {1}, y[16];
    double t0 = ea_now_s();
    ea_status s = call(ROUNDS + 1, x, sizeof x, y, 0.5);
    double dt = ea_now_s() - t0;
    fprintf(stderr, "  stopped server: %s after %.2f s\n", ea_errmsg(), dt);
    CHECK_EQ(s, EA_ERR_TIMEOUT);
    CHECK(dt < 5);
    kill(child, SIGKILL);
}

int main(void) {
    if (getenv("EA_UCX_TCP")) setenv("UCX_TLS", "tcp", 1);
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent)) return 1;
    child = fork();
    if (child == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        _exit(server(to_child[0], to_parent[1]));
    }
    close(to_child[0]);
    close(to_parent[1]);
    if (meet(&C, to_parent[0], to_child[1]) != EA_OK) {
        fprintf(stderr, "client: %s\n", ea_errmsg());
        kill(child, SIGKILL);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(round_trips_exact_and_in_order);
    RUN(put_past_the_region_refused);
    RUN(hung_server_gives_a_timeout_not_a_hang);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(to_child[1]);
    ea_ucx_remote_close(C.peer);
    ea_ucx_disconnect(C.ep, 0.5);
    ea_ucx_mem_free(C.mine);
    ea_ucx_destroy(C.u);
    return TEST_SUMMARY();
}
