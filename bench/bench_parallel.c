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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/util.h"
#include "ep/dist.h"
#include "ep/ep_engine.h"
#include "serve/engine.h"
#include "model/forward.h"

static double comm_s(ea_dist *d) {
    if (!d) return 0;
    ea_dist_stats st;
    ea_dist_get_stats(d, &st);
    return st.seconds;
}

int main(int argc, char **argv) {
    const char *model = NULL, *parallel = NULL, *batches = "1,16,64";
    int threads = 1, steps = 8, prefill = 512;
    ea_arg spec[] = {{"model", EA_ARG_STR, &model, "PATH", "model"},
                     {"parallel", EA_ARG_STR, &parallel, "MODE", "expert|tensor (under mpirun)"},
                     {"threads", EA_ARG_INT, &threads, "N", "threads per rank (default 1)"},
                     {"batches", EA_ARG_STR, &batches, "LIST", "decode batch sizes"},
                     {"steps", EA_ARG_INT, &steps, "S", "decode steps per batch size"},
                     {"prefill", EA_ARG_INT, &prefill, "N", "prefill tokens"},
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
    if (s != EA_OK) fprintf(stderr, "bench_parallel: rank %d: %s\n", rank, ea_errmsg());
    ea_free(tok), ea_free(pos), ea_free(seq), ea_free(rows), ea_free(logits);
    ea_engine_destroy(g);
    ea_dist_destroy(d);
    return s == EA_OK ? 0 : 1;
}
