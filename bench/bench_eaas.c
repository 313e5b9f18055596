/*
 * bench_eaas.c — one MoE layer through an expert server, against the floor
 * (UCX's own put + flag round trip for the same bytes) and against the local
 * backend (the same experts in process). Prints JSON lines:
 *
 *   bench_eaas --model M [--tokens 1,16,64,256] [--iters 50] [--tcp]
 *   {"bench":"eaas_layer_rt","transport":"shm","tokens":16,"bytes_out":..,"bytes_back":..,
 *    "floor_us":..,"remote_us":..,"local_us":..,"overhead_us":..}
 *
 * floor_us   client puts bytes_out (x and ids) + fence + a flag word into the
 *            server's region; the server thread, polling, puts bytes_back (the
 *            per-pair outputs) + fence + flag into the client's region; median
 *            of iters round trips
 * remote_us  ea_moe_backend_forward on the remote backend (eaas/remote.h) with
 *            one expert server (eaas/server.h) on its own thread hosting every
 *            expert: transport + the server's grouped expert products
 * local_us   the same call on the local backend (moe_local.h): the products
 * overhead_us = remote_us - local_us; medians, one layer, random routing
 * --tcp sets UCX_TLS=tcp (the transport between hosts) before UCX starts.
 * Both sides run in this process (2 threads), as on one machine.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"
#include "base/util.h"
#include "eaas/remote.h"
#include "serve/engine.h"
#include "ucx/eaas_rig.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* ---- the floor: put + flag both ways ------------------------------------------- */

typedef struct {
    ea_ucx *u;
    ea_ucx_mem *in;      /* bytes_out + flag (client writes) */
    ea_ucx_ep *ep;
    ea_ucx_remote *back; /* the client's region */
    size_t bytes_out, bytes_back;
    uint8_t *src;
    atomic_int stop, ready;
    int iters;
} floor_srv;

static volatile uint64_t *flag_at(ea_ucx_mem *m, size_t off) { return (volatile uint64_t *)((uint8_t *)ea_ucx_mem_ptr(m) + off); }

static void *floor_loop(void *arg) {
    floor_srv *f = arg;
    uint64_t seen = 0;
    while (!atomic_load(&f->stop)) {
        ea_ucx_progress(f->u);
        uint64_t w = __atomic_load_n(flag_at(f->in, f->bytes_out), __ATOMIC_ACQUIRE);
        if (w == seen || !atomic_load(&f->ready)) continue;
        seen = w;
        ea_ucx_put(f->back, 0, f->src, f->bytes_back);
        ea_ucx_fence(f->u);
        ea_ucx_put(f->back, f->bytes_back, &seen, 8);
        ea_ucx_flush(f->ep, 1.0);
    }
    return NULL;
}

static double floor_us(size_t bytes_out, size_t bytes_back, int iters) {
    floor_srv f = {.bytes_out = bytes_out, .bytes_back = bytes_back, .iters = iters};
    ea_ucx *cu;
    ea_ucx_mem *res;
    ea_ucx_ep *cep;
    ea_ucx_remote *slot;
    const void *a, *k;
    size_t al, kl;
    if (ea_ucx_create(&f.u) || ea_ucx_create(&cu) || ea_ucx_mem_alloc(f.u, bytes_out + 8, &f.in) ||
        ea_ucx_mem_alloc(cu, bytes_back + 8, &res))
        return -1;
    ea_ucx_address(cu, &a, &al);
    ea_ucx_mem_rkey(res, &k, &kl);
    if (ea_ucx_connect(f.u, a, al, &f.ep) || ea_ucx_remote_open(f.ep, ea_ucx_mem_addr(res), bytes_back + 8, k, kl, &f.back))
        return -1;
    ea_ucx_address(f.u, &a, &al);
    ea_ucx_mem_rkey(f.in, &k, &kl);
    if (ea_ucx_connect(cu, a, al, &cep) || ea_ucx_remote_open(cep, ea_ucx_mem_addr(f.in), bytes_out + 8, k, kl, &slot))
        return -1;
    f.src = calloc(1, bytes_back);
    uint8_t *out = calloc(1, bytes_out);
    atomic_store(&f.ready, 1);
    pthread_t th;
    pthread_create(&th, NULL, floor_loop, &f);
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < iters + 5; i++) {
        uint64_t seq = (uint64_t)i + 1;
        double t0 = ea_now_s();
        ea_ucx_put(slot, 0, out, bytes_out);
        ea_ucx_fence(cu);
        ea_ucx_put(slot, bytes_out, &seq, 8);
        ea_ucx_flush(cep, 1.0);
        while (__atomic_load_n(flag_at(res, bytes_back), __ATOMIC_ACQUIRE) != seq) ea_ucx_progress(cu);
        if (i >= 5) t[i - 5] = ea_now_s() - t0;
    }
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    double m = median(t, iters) * 1e6;
    ea_ucx_remote_close(slot);
    ea_ucx_remote_close(f.back);
    ea_ucx_disconnect(cep, 0.2);
    ea_ucx_disconnect(f.ep, 0.2);
    ea_ucx_mem_free(res);
    ea_ucx_mem_free(f.in);
    ea_ucx_destroy(cu);
    ea_ucx_destroy(f.u);
    free(f.src), free(out), free(t);
    return m;
}

/* ---- remote vs local ------------------------------------------------------------- */

static rig_server S;
static atomic_int stop_srv;
static void *srv_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_srv)) ea_xsrv_poll(S.s);
    return NULL;
}
static ea_status connect_cb(void *ctx, const ea_remote_hello *me, ea_xsrv_slot_info *out) {
    (void)ctx;
    return ea_xsrv_add_client(S.s, me->addr, me->addr_len, me->result_addr, me->result_bytes, me->rkey, me->rkey_len, out);
}
static int all_experts(int server, int expert, int ne) { return (void)server, (void)expert, (void)ne, 1; }

int main(int argc, char **argv) {
    const char *model = NULL, *tokens = "1,16,64,256";
    int iters = 50, tcp = 0;
    ea_arg spec[] = {{"model", EA_ARG_STR, &model, "PATH", "model"},
                     {"tokens", EA_ARG_STR, &tokens, "LIST", "tokens per call (1,16,64,256)"},
                     {"iters", EA_ARG_INT, &iters, "N", "timed calls per point (50)", 1, 100000},
                     {"tcp", EA_ARG_BOOL, &tcp, NULL, "UCX over TCP (UCX_TLS=tcp)"},
                     {0}};
    ea_args_rest rest;
    if (ea_args_parse(spec, argc, argv, &rest) != EA_OK || !model) {
        fprintf(stderr, "bench_eaas: %s\n", model ? ea_errmsg() : "needs --model");
        return 2;
    }
    if (tcp) setenv("UCX_TLS", "tcp", 1);
    int tl[16], nt = 0;
    for (const char *p = tokens; *p && nt < 16;) {
        tl[nt++] = atoi(p);
        p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p);
    }
    int max_t = 1;
    for (int i = 0; i < nt; i++) max_t = tl[i] > max_t ? tl[i] : max_t;
    ea_engine *E;
    ea_engine_opts eo = {.model_path = model, .threads = 1, .max_tokens = max_t, .max_ctx = 64, .max_seqs = 1};
    if (ea_engine_create(&eo, &E) != EA_OK) {
        fprintf(stderr, "bench_eaas: %s\n", ea_errmsg());
        return 1;
    }
    const ea_model_config *c = &E->m->cfg;
    int H = c->hidden_size, K = c->n_experts_per_tok, NE = c->n_experts, layer = 0;
    while (!c->layer_is_moe[layer]) layer++;
    rig_backend sb;
    ea_moe_backend *RB;
    ea_remote_opts ro = {.n_layers = c->n_layers, .n_experts = NE, .hidden = H, .max_tokens = max_t, .max_k = K,
                         .timeout_s = 10};
    int idx;
    if (rig_backend_create(E, max_t, &sb) || rig_server_create(&S, E, sb.be, 0, all_experts, max_t, 2, 5) ||
        ea_remote_create(&ro, &RB) || ea_remote_add_server(RB, "bench", S.hosted, connect_cb, NULL, &idx)) {
        fprintf(stderr, "bench_eaas: %s\n", ea_errmsg());
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, srv_loop, NULL);
    float *x = malloc(sizeof(float) * (size_t)max_t * H), *w = malloc(sizeof(float) * (size_t)max_t * K);
    float *y = malloc(sizeof(float) * (size_t)max_t * H);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)max_t * K);
    double *tr = malloc(sizeof(double) * (size_t)iters), *tlo = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < nt; i++) {
        int T = tl[i];
        rig_routing((uint64_t)T, T, H, K, NE, x, ids, w);
        for (int it = 0; it < iters + 3; it++) {
            double t0 = ea_now_s();
            ea_moe_backend_forward(RB, layer, x, T, K, ids, w, y);
            double t1 = ea_now_s();
            ea_moe_backend_forward(E->be, layer, x, T, K, ids, w, y);
            double t2 = ea_now_s();
            if (it >= 3) tr[it - 3] = t1 - t0, tlo[it - 3] = t2 - t1;
        }
        size_t out_b = (size_t)ea_slot_payload_bytes(T, K, H) + EA_SLOT_HEADER_BYTES;
        size_t back_b = (size_t)ea_slot_result_bytes(T, K, H);
        atomic_store(&stop_srv, 1); /* the floor runs alone */
        pthread_join(th, NULL);
        double fl = floor_us(out_b, back_b, iters);
        atomic_store(&stop_srv, 0);
        pthread_create(&th, NULL, srv_loop, NULL);
        double r = median(tr, iters) * 1e6, l = median(tlo, iters) * 1e6;
        printf("{\"bench\":\"eaas_layer_rt\",\"transport\":\"%s\",\"model\":\"%s\",\"tokens\":%d,\"bytes_out\":%zu,"
               "\"bytes_back\":%zu,\"floor_us\":%.1f,\"remote_us\":%.1f,\"local_us\":%.1f,\"overhead_us\":%.1f}\n",
               tcp ? "tcp" : "shm", ea_arch_names[c->arch], T, out_b, back_b, fl, r, l, r - l);
        fflush(stdout);
    }
    atomic_store(&stop_srv, 1);
    pthread_join(th, NULL);
    ea_moe_backend_destroy(RB);
    rig_server_destroy(&S);
    rig_backend_destroy(&sb);
    ea_engine_destroy(E);
    free(x), free(w), free(y), free(ids), free(tr), free(tlo);
    return 0;
}
