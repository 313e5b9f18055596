/*
 * bench_parallel.c — expert vs tensor parallelism, run under mpirun; rank 0
 * prints JSON lines (bench/bench_parallel.sh runs both modes and the ratio).
 *
 *   mpirun -n 2 bench_parallel --model M --parallel expert|tensor [--threads 1]
 *          [--batches 1,16,64] [--steps 8] [--prefill 512]
 *
 * prefill: one sequence, `prefill` prompt tokens in one forward call
 *   {"bench":"parallel_prefill","mode":"expert","ranks":2,"tokens":512,"tok_s":...}
 * decode at batch B: B sequences with 16-token prompts already in the cache,
 * then `steps` steps of B tokens (one per sequence); tok/s = B*steps/time
 *   {"bench":"parallel_decode","mode":"expert","ranks":2,"batch":16,"tok_s":...,"comm_s":...}
 * comm_s is rank 0's time inside collectives during the timed part (waiting
 * for slower ranks included). Weights are paged in by one warm-up step first.
 *
 * --rebalance R (expert mode): R times per MoE layer, the layer is switched to
 * a placement where every expert moves to the next rank down (slot p takes
 * expert p + E/N) and back, through the ep backend's apply_placement (EPLB's
 * weight move); each switch is timed beside one MPI_Alltoallv of the same
 * bytes (the exchange alone):
 *   {"bench":"parallel_rebalance","ranks":2,"layer":0,"experts_moved":..,"bytes":..,"switch_s":..,"alltoallv_s":..}
 * bytes: what rank 0 sent in the switch (it received as much).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/util.h"
#include "ep/dist.h"
#include "ep/ep.h"
#include "ep/ep_engine.h"
#include "serve/engine.h"
#include "model/forward.h"

static double comm_s(ea_dist *d) {
    if (!d) return 0;
    ea_dist_stats st;
    ea_dist_get_stats(d, &st);
    return st.seconds;
}

/* --rebalance: each MoE layer to the rotated placement and back, R times, beside a bare alltoallv. */
static ea_status bench_rebalance(ea_engine *g, ea_dist *d, int reps) {
    const ea_model_config *c = &g->m->cfg;
    int E = c->n_experts, N = ea_dist_size(d), me = ea_dist_rank(d), S = E / N;
    int32_t *rot = ea_malloc(sizeof(int32_t) * 2 * (size_t)E), *id = rot + E;
    size_t *sc = ea_calloc(2 * (size_t)N, sizeof(size_t)), *rc = sc + N;
    if (!rot || !sc) return ea_err(EA_ERR_NOMEM, "rebalance bench");
    for (int p = 0; p < E; p++) rot[p] = (p + S) % E, id[p] = p;
    ea_status s = EA_OK;
    for (int l = 0; s == EA_OK && l < c->n_layers; l++) {
        if (!c->layer_is_moe[l]) continue;
        for (int r = 0; s == EA_OK && r < reps; r++)
            for (int back = 0; s == EA_OK && back < 2; back++) {
                ea_ep_stats a, b;
                ea_ep_backend_stats(g->be, &a);
                if ((s = ea_dist_barrier(d, "rebalance bench")) != EA_OK) break;
                double t0 = ea_now_s();
                if ((s = ea_moe_apply_placement(g->be, l, back ? id : rot, E)) != EA_OK) break;
                double t_switch = ea_now_s() - t0;
                ea_ep_backend_stats(g->be, &b);
                /* the same bytes, bare: to the rank below, from the rank above (the reverse when moving back) */
                size_t out = b.move_bytes_sent - a.move_bytes_sent, in = b.move_bytes_recv - a.move_bytes_recv;
                memset(sc, 0, sizeof(size_t) * 2 * (size_t)N);
                sc[(me + (back ? 1 : N - 1)) % N] += out;
                rc[(me + (back ? N - 1 : 1)) % N] += in;
                uint8_t *sb = ea_malloc(out ? out : 1), *rb = ea_malloc(in ? in : 1);
                if (!sb || !rb) s = ea_err(EA_ERR_NOMEM, "rebalance bench buffers");
                if (s == EA_OK) memset(sb, 1, out);
                double t1 = 0;
                if (s == EA_OK && (s = ea_dist_barrier(d, "rebalance bench")) == EA_OK) {
                    t1 = ea_now_s();
                    s = ea_dist_alltoallv(d, sb, sc, rb, rc, "rebalance bench");
                    t1 = ea_now_s() - t1;
                }
                ea_free(sb), ea_free(rb);
                if (s == EA_OK && me == 0)
                    printf("{\"bench\":\"parallel_rebalance\",\"ranks\":%d,\"layer\":%d,\"experts_moved\":%llu,"
                           "\"bytes\":%zu,\"switch_s\":%.5f,\"alltoallv_s\":%.5f}\n",
                           N, l, (unsigned long long)(b.experts_moved - a.experts_moved), out, t_switch, t1);
                fflush(stdout);
            }
    }
    ea_free(rot), ea_free(sc);
    return s;
}

int main(int argc, char **argv) {
    const char *model = NULL, *parallel = NULL, *batches = "1,16,64";
    int threads = 1, steps = 8, prefill = 512, rebalance = 0;
    ea_arg spec[] = {{"model", EA_ARG_STR, &model, "PATH", "model"},
                     {"parallel", EA_ARG_STR, &parallel, "MODE", "expert|tensor (under mpirun)"},
                     {"threads", EA_ARG_INT, &threads, "N", "threads per rank (default 1)"},
                     {"batches", EA_ARG_STR, &batches, "LIST", "decode batch sizes"},
                     {"steps", EA_ARG_INT, &steps, "S", "decode steps per batch size"},
                     {"prefill", EA_ARG_INT, &prefill, "N", "prefill tokens"},
                     {"rebalance", EA_ARG_INT, &rebalance, "R", "expert mode: time R weight-move switches per layer"},
                     {0}};
    ea_args_rest rest;
    if (ea_args_parse(spec, argc, argv, &rest) != EA_OK || !model || rest.help) {
        ea_args_usage(stderr, spec);
        return 2;
    }
    ea_par_mode mode;
    ea_dist *d = NULL;
    ea_status s = ea_par_launch(parallel, -1, &mode, &d);
    if (s != EA_OK) {
        fprintf(stderr, "bench_parallel: %s\n", ea_errmsg());
        return 1;
    }
    int bl[16], nb = 0;
    for (const char *p = batches; *p && nb < 16;) {
        bl[nb++] = atoi(p);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    int maxb = 1;
    for (int i = 0; i < nb; i++)
        if (bl[i] > maxb) maxb = bl[i];
    int T = prefill > maxb * 16 ? prefill : maxb * 16;
    if (T > 1024) T = 1024;
    int ctx = prefill + 16 > 16 + steps + 2 ? prefill + 16 : 16 + steps + 2;
    ea_engine *g = NULL;
    int rank = d ? ea_dist_rank(d) : 0, N = d ? ea_dist_size(d) : 1;
    ea_engine_opts eo = {.model_path = model, .threads = threads, .max_tokens = T, .max_ctx = ctx, .max_seqs = maxb,
                         .kv_blocks = (prefill + 15) / 16 + maxb * ((16 + steps + 1 + 15) / 16) + 4,
                         .block_size = 16, .moe = ea_engine_moe_parallel(mode, d)};
    if ((s = ea_engine_create(&eo, &g)) != EA_OK) {
        fprintf(stderr, "bench_parallel: rank %d: %s\n", rank, ea_errmsg());
        ea_dist_destroy(d);
        return 1;
    }
    const ea_model_config *c = &g->m->cfg;
    int32_t *tok = ea_malloc(sizeof(int32_t) * (size_t)T), *pos = ea_malloc(sizeof(int32_t) * (size_t)T);
    int32_t *seq = ea_malloc(sizeof(int32_t) * (size_t)T), *rows = ea_malloc(sizeof(int32_t) * (size_t)T);
    float *logits = ea_malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)maxb);
    const char *mname = ea_par_mode_name(mode);
    /* prefill (sequence 0), after a warm-up that pages weights in */
    for (int rep = 0; s == EA_OK && rep < 2; rep++) {
        ea_kv_seq_release(&g->kv, 0);
        if ((s = ea_kv_seq_reserve(&g->kv, 0, prefill)) != EA_OK) break;
        for (int i = 0; i < prefill; i++) tok[i] = 100 + (i * 7919) % 30000, pos[i] = i, seq[i] = 0;
        int32_t last = prefill - 1;
        double c0 = comm_s(d), t0 = ea_now_s();
        s = ea_forward_run(g->fw, prefill, tok, pos, seq, 1, &last, logits);
        double dt = ea_now_s() - t0;
        if (s == EA_OK && rep == 1 && rank == 0)
            printf("{\"bench\":\"parallel_prefill\",\"mode\":\"%s\",\"ranks\":%d,\"threads\":%d,\"tokens\":%d,\"seconds\":%.4f,"
                   "\"tok_s\":%.2f,\"comm_s\":%.4f}\n",
                   mname, N, threads, prefill, dt, prefill / dt, comm_s(d) - c0);
    }
    ea_kv_seq_release(&g->kv, 0);
    for (int bi = 0; s == EA_OK && bi < nb; bi++) {
        int B = bl[bi];
        for (int q = 0; q < B; q++) {
            ea_kv_seq_release(&g->kv, q);
            if ((s = ea_kv_seq_reserve(&g->kv, q, 16 + steps + 1)) != EA_OK) break;
        }
        /* 16-token prompts, in chunks of up to T tokens */
        for (int at = 0; s == EA_OK && at < B * 16; at += T) {
            int n = B * 16 - at < T ? B * 16 - at : T;
            for (int i = 0; i < n; i++) tok[i] = 200 + (at + i) % 977, pos[i] = (at + i) % 16, seq[i] = (at + i) / 16;
            s = ea_forward_run(g->fw, n, tok, pos, seq, 0, rows, logits);
        }
        double c0 = comm_s(d), t0 = 0;
        for (int st = 0; s == EA_OK && st <= steps; st++) {
            if (st == 1) t0 = ea_now_s(), c0 = comm_s(d); /* step 0 is the warm-up */
            for (int q = 0; q < B; q++) tok[q] = 300 + (q * 31 + st) % 5000, pos[q] = 16 + st, seq[q] = q, rows[q] = q;
            s = ea_forward_run(g->fw, B, tok, pos, seq, B, rows, logits);
        }
        double dt = ea_now_s() - t0;
        if (s == EA_OK && rank == 0)
            printf("{\"bench\":\"parallel_decode\",\"mode\":\"%s\",\"ranks\":%d,\"threads\":%d,\"batch\":%d,\"steps\":%d,"
                   "\"seconds\":%.4f,\"tok_s\":%.2f,\"comm_s\":%.4f}\n",
                   mname, N, threads, B, steps, dt, (double)B * steps / dt, comm_s(d) - c0);
        fflush(stdout);
        for (int q = 0; q < B; q++) ea_kv_seq_release(&g->kv, q);
    }
    if (s == EA_OK && rebalance > 0 && mode == EA_PAR_EXPERT) s = bench_rebalance(g, d, rebalance);
    if (s != EA_OK) fprintf(stderr, "bench_parallel: rank %d: %s\n", rank, ea_errmsg());
    ea_free(tok), ea_free(pos), ea_free(seq), ea_free(rows), ea_free(logits);
    ea_engine_destroy(g);
    ea_dist_destroy(d);
    return s == EA_OK ? 0 : 1;
}
