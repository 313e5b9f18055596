/*
 * bench_load.c — what loading a model's weights costs, and what of it is the
 * weight fingerprint (ea_model_fingerprint, the KV disk tier's namespace).
 *
 *   bench_load --model PATH [--reps R]
 *
 * Per rep, the page cache warm (rep 0 warms it and is reported apart):
 *   load_s        ea_model_open + ea_model_load_dense + every layer's experts
 *                 (the copy into huge pages, which hashes each weight)
 *   fp_after_s    ea_model_fingerprint after that load (combines the hashes)
 *   fp_cold_s     ea_model_fingerprint on a freshly opened, unloaded model:
 *                 every weight hashed from the file mapping (what a rank pays
 *                 for the weights it does not load), pages dropped again
 * One JSON line per rep: {"bench":"load","rep":i,"gb":G,"load_s":..,
 * "fp_after_s":..,"fp_cold_s":..,"fingerprint":"<16 hex>"}
 * and first one line of XXH64's speed on 256 MiB already in memory (best of 3),
 * the compute the loader adds per byte: {"bench":"xxh64","gbps":G}
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model/model.h"

static int run(const char *path, int rep) {
    double t0 = ea_now_s();
    ea_model *m = NULL;
    if (ea_model_open(path, &m) != EA_OK) return -1;
    int rc = ea_model_load_dense(m) != EA_OK;
    for (int l = 0; !rc && l < m->cfg.n_layers; l++)
        if (m->cfg.layer_is_moe[l]) rc = ea_model_load_experts(m, l, NULL) != EA_OK;
    double t1 = ea_now_s();
    uint64_t fp = ea_model_fingerprint(m);
    double t2 = ea_now_s();
    double gb = (double)m->weight_bytes / 1e9;
    ea_model_close(m);
    if (rc) return -1;
    ea_model *c = NULL;
    if (ea_model_open(path, &c) != EA_OK) return -1;
    double t3 = ea_now_s();
    uint64_t fc = ea_model_fingerprint(c);
    double t4 = ea_now_s();
    ea_model_close(c);
    printf("{\"bench\":\"load\",\"rep\":%d,\"gb\":%.3f,\"load_s\":%.3f,\"fp_after_s\":%.4f,\"fp_cold_s\":%.3f,"
           "\"fingerprint\":\"%016llx\",\"same\":%s}\n",
           rep, gb, t1 - t0, t2 - t1, t4 - t3, (unsigned long long)fp, fp == fc ? "true" : "false");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL;
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_load --model PATH [--reps R]\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "usage: bench_load --model PATH [--reps R]\n");
        return 2;
    }
    size_t nb = (size_t)256 << 20;
    uint8_t *buf = malloc(nb);
    if (!buf) return 1;
    for (size_t i = 0; i < nb; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
    double best = 1e9;
    uint64_t sink = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = ea_now_s();
        sink ^= ea_xxh64(buf, nb, (uint64_t)k);
        double t = ea_now_s() - t0;
        best = t < best ? t : best;
    }
    free(buf);
    printf("{\"bench\":\"xxh64\",\"mb\":256,\"gbps\":%.2f,\"sink\":%llu}\n", (double)nb / best / 1e9,
           (unsigned long long)(sink & 1));
    fflush(stdout);
    for (int r = 0; r <= reps; r++)
        if (run(model, r)) {
            fprintf(stderr, "bench_load: %s\n", ea_errmsg());
            return 1;
        }
    return 0;
}
