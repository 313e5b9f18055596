/*
 * bench_eplb.c — CPU time of the placement algorithms, one JSON line per
 * (case, algorithm).
 *
 *   bench_eplb [--reps N] [--shared DIR]
 *
 * Cases: every line of DIR/eplb/cases.txt (DIR from --shared, $EA_SHARED, or
 * $EA_SRC/../shared), plus two synthetic 48 x 128 cases generated here (Zipf
 * 1.0 token counts, P = 144, global and hierarchical 8 groups / 2 nodes) and
 * two DeepSeek-V3-like 58 x 256 cases (P = 288, 32 ranks, global and 8 groups /
 * 4 nodes), so
 * the benchmark runs without the shared folder too.
 * Per case and algorithm: `place_ms` = CPU time of ea_eplb_rebalance alone
 * (min and median over reps, CLOCK_PROCESS_CPUTIME_ID), `end_to_end_ms` = parse
 * the workload text + rebalance + write the placement text (what `eaas eplb
 * place` does after reading the file), and the balancedness reached. The
 * workspace is created once per case, outside the timed region (as in the
 * engine, where it is created at start-up).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/util.h"
#include "eplb/eplb.h"
#include "eplb/recorder.h"
#include "eplb/textio.h"

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_case(const char *name, const int64_t *c, const char *text, size_t text_len, int L, int E, int P,
                       int G, int N, int R, int reps) {
    ea_eplb_shape s = {L, E, P, G, N, R};
    ea_eplb_shape_policy(&s);
    ea_eplb_ws *ws;
    ea_eplb_placement pl;
    if (ea_eplb_ws_create(&s, &ws) != EA_OK || ea_eplb_placement_init(&pl, L, E, P) != EA_OK) {
        fprintf(stderr, "%s: %s\n", name, ea_errmsg());
        exit(1);
    }
    double *t = malloc((size_t)reps * sizeof *t);
    for (int a = 0; a < 2; a++) {
        ea_eplb_algo algo = a ? EA_EPLB_REFINED : EA_EPLB_DEEPSEEK;
        uint64_t n_alloc = ea_alloc_count();
        for (int i = 0; i < reps; i++) {
            double t0 = cpu_ms();
            if (ea_eplb_rebalance(ws, algo, c, &pl) != EA_OK) {
                fprintf(stderr, "%s: %s\n", name, ea_errmsg());
                exit(1);
            }
            t[i] = cpu_ms() - t0;
        }
        uint64_t allocs = (ea_alloc_count() - n_alloc) / (uint64_t)reps;
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        ea_eplb_score sc;
        ea_eplb_score_placement(&pl, c, R, NULL, &sc);
        /* end to end: parse text, place, write text */
        double e2e = 1e30;
        for (int i = 0; i < (reps < 20 ? reps : 20); i++) {
            double t0 = cpu_ms();
            int l2, e2;
            int64_t *c2 = NULL;
            if (text) ea_eplb_workload_parse(text, text_len, name, &l2, &e2, &c2);
            ea_eplb_rebalance(ws, algo, c2 ? c2 : c, &pl);
            char *buf = NULL;
            size_t n = 0;
            FILE *f = open_memstream(&buf, &n);
            ea_eplb_placement_write(f, "# bench\n", &pl);
            fclose(f);
            double dt = cpu_ms() - t0;
            free(buf);
            ea_free(c2);
            if (dt < e2e) e2e = dt;
        }
        printf("{\"bench\":\"eplb\",\"case\":\"%s\",\"algorithm\":\"%s\",\"layers\":%d,\"logical\":%d,\"physical\":%d,"
               "\"groups\":%d,\"nodes\":%d,\"ranks\":%d,\"reps\":%d,\"place_ms_min\":%.4f,\"place_ms_median\":%.4f,"
               "\"end_to_end_ms\":%.4f,\"allocs_per_call\":%llu,\"balancedness_mean\":%.6f,\"balancedness_worst\":%.6f}\n",
               name, ea_eplb_algo_name(algo), L, E, P, G, N, R, reps, t[0], t[reps / 2], e2e,
               (unsigned long long)allocs, sc.mean, sc.worst);
        fflush(stdout);
    }
    free(t);
    ea_eplb_placement_deinit(&pl);
    ea_eplb_ws_destroy(ws);
}

static void synthetic(int64_t *c, int L, int E, uint64_t seed) {
    for (int l = 0; l < L; l++) {
        /* Zipf(1.0) weights over a per-layer random permutation of experts */
        int perm[1024];
        for (int e = 0; e < E; e++) perm[e] = e;
        for (int e = E - 1; e > 0; e--) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int j = (int)((seed >> 33) % (uint64_t)(e + 1));
            int x = perm[e];
            perm[e] = perm[j];
            perm[j] = x;
        }
        double h = 0.0;
        for (int k = 1; k <= E; k++) h += 1.0 / k;
        for (int e = 0; e < E; e++) c[l * E + perm[e]] = (int64_t)(524288.0 / (e + 1) / h) + 1;
    }
}

/* Recorder cost per forward step (48 layers, 64 tokens x top-8 = 512 ids per
 * layer): off (one branch per call) and on, plus end_step. */
static void bench_recorder(int reps) {
    enum { RL = 48, RE = 128, NIDS = 512 };
    ea_eplb_recorder r;
    if (ea_eplb_recorder_init(&r, RL, RE, 1000) != EA_OK) exit(1);
    static int32_t ids[NIDS];
    uint64_t x = 1;
    for (int i = 0; i < NIDS; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % RE);
    }
    double ms[2];
    for (int on = 0; on < 2; on++) {
        if (on) ea_eplb_recorder_start(&r);
        double best = 1e30;
        for (int rep = 0; rep < reps; rep++) {
            double t0 = cpu_ms();
            for (int l = 0; l < RL; l++) ea_eplb_record(&r, l, ids, NIDS);
            ea_eplb_recorder_end_step(&r);
            double dt = cpu_ms() - t0;
            if (dt < best) best = dt;
        }
        ms[on] = best;
    }
    printf("{\"bench\":\"eplb_recorder\",\"layers\":%d,\"experts\":%d,\"ids_per_layer\":%d,\"window\":1000,"
           "\"step_us_off\":%.3f,\"step_us_on\":%.3f}\n",
           RL, RE, NIDS, ms[0] * 1e3, ms[1] * 1e3);
    ea_eplb_recorder_deinit(&r);
}

int main(int argc, char **argv) {
    int reps = 200;
    const char *shared = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--shared") == 0 && i + 1 < argc) shared = argv[++i];
        else {
            fprintf(stderr, "usage: bench_eplb [--reps N] [--shared DIR]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    char dir[1024] = "";
    if (shared) snprintf(dir, sizeof dir, "%s", shared);
    else if (getenv("EA_SHARED")) snprintf(dir, sizeof dir, "%s", getenv("EA_SHARED"));
    else if (getenv("EA_SRC")) snprintf(dir, sizeof dir, "%s/../shared", getenv("EA_SRC"));

    bench_recorder(reps);
    enum { L = 48, E = 128 };
    static int64_t c[L * E];
    synthetic(c, L, E, 42);
    bench_case("synthetic_48x128_zipf1.0_r16_global", c, NULL, 0, L, E, 144, 1, 1, 8, reps);
    bench_case("synthetic_48x128_zipf1.0_r16_hier8g2n", c, NULL, 0, L, E, 144, 8, 2, 8, reps);
    /* DeepSeek-V3-like: 58 MoE layers x 256 experts, 32 redundant, 32 ranks on 4 nodes */
    static int64_t c3[58 * 256];
    synthetic(c3, 58, 256, 7);
    bench_case("synthetic_58x256_zipf1.0_r32_global", c3, NULL, 0, 58, 256, 288, 1, 1, 32, reps);
    bench_case("synthetic_58x256_zipf1.0_r32_hier8g4n", c3, NULL, 0, 58, 256, 288, 8, 4, 32, reps);

    char path[2048];
    snprintf(path, sizeof path, "%s/eplb/cases.txt", dir);
    FILE *f = dir[0] ? fopen(path, "r") : NULL;
    if (!f) {
        fprintf(stderr, "bench_eplb: no cases.txt (%s); synthetic cases only\n", dir[0] ? path : "set EA_SRC");
        return 0;
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char name[256], wl[512];
        int l, e, p, g, n, r;
        if (line[0] == '#' || sscanf(line, "%255s %511s %d %d %d %d %d %d", name, wl, &l, &e, &p, &g, &n, &r) != 8)
            continue;
        char wpath[2048];
        snprintf(wpath, sizeof wpath, "%s/eplb/%s", dir, wl);
        char *text;
        size_t len;
        int l2, e2;
        int64_t *cc;
        if (ea_read_file(wpath, &text, &len) != EA_OK ||
            ea_eplb_workload_parse(text, len, wpath, &l2, &e2, &cc) != EA_OK) {
            fprintf(stderr, "bench_eplb: %s\n", ea_errmsg());
            return 1;
        }
        bench_case(name, cc, text, len, l2, e2, p, g, n, r, reps);
        ea_free(cc);
        ea_free(text);
    }
    fclose(f);
    return 0;
}
