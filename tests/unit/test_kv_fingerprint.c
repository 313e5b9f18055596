/*
 * test_kv_fingerprint.c — the KV disk tier's model fingerprint covers every
 * weight byte: one flipped byte of one attention weight (layer 0's k_proj /
 * attn_k, past the first bytes a sampler would read) or of an expert this
 * process never loaded moves the tier to another directory, so the block
 * written with the old weights is not found (issue 18 item 1). The same files
 * give the same fingerprint whatever share of the experts was loaded (as the
 * ranks of a parallel mode do), so an unchanged model still hits.
 * Model files are written by tests/unit/model_files.h (HF and GGUF, f32).
 */
#define _GNU_SOURCE
#include <string.h>

#include "base/alloc.h"
#include "harness.h"
#include "model/forward.h"
#include "model/model.h"
#include "serve/kv_disk.h"
#include "unit/model_files.h"

static char g_hf[400], g_gguf[400], g_disk[400];

enum { LOAD_ALL, LOAD_EVEN_EXPERTS, LOAD_NONE };

/* Open path, load as `how` says, open the disk tier; put block 0 under key 42 (put) or
 * report whether key 42 is there (OUT: *has). OUT: dir = the tier's namespace directory. */
static int visit(const char *path, int how, int put, char *dir, size_t dn, int *has) {
    ea_model *m = NULL;
    if (ea_model_open(path, &m) != EA_OK) {
        fprintf(stderr, "  open %s: %s\n", path, ea_errmsg());
        return -1;
    }
    const ea_model_config *c = &m->cfg;
    int rc = 0;
    if (how != LOAD_NONE) {
        uint8_t mask[256];
        for (int e = 0; e < c->n_experts && e < 256; e++) mask[e] = how == LOAD_ALL || e % 2 == 0;
        rc = ea_model_load_dense(m) != EA_OK;
        for (int l = 0; !rc && l < c->n_layers; l++)
            if (c->layer_is_moe[l]) rc = ea_model_load_experts(m, l, mask) != EA_OK;
    }
    int kd, vd, kh;
    ea_forward_kv_dims(c, NULL, &kd, &vd, &kh);
    ea_kv_cache kv;
    ea_kv_disk *d = NULL;
    if (!rc && ea_kv_init(&kv, EA_F32, c->n_layers, kd, vd, kh, 2, 4, 1, 8) == EA_OK) {
        for (size_t i = 0; i < (size_t)c->n_layers * 2 * 4 * (size_t)kd; i++) ((float *)kv.k)[i] = (float)i;
        ea_kv_disk_opts o = {.dir = g_disk, .mode = "single", .world = 1, .rank = 0};
        if (ea_kv_disk_open(&o, m, &kv, &d) == EA_OK) {
            snprintf(dir, dn, "%s", ea_kv_disk_dir(d));
            if (put) rc = ea_kv_disk_put(d, 42, &kv, 0) != EA_OK;
            else *has = ea_kv_disk_has(d, 42);
            ea_kv_disk_close(d);
        } else {
            rc = 1;
        }
        ea_kv_deinit(&kv);
    } else {
        rc = 1;
    }
    if (rc) fprintf(stderr, "  %s: %s\n", path, ea_errmsg());
    ea_model_close(m);
    return rc;
}

/* Flip the last byte of tensor `pick`'s data in the file at path (found by its last 32 bytes,
 * which must occur once in the file). */
static int flip_last_byte(const char *path, const char *model_path, const ea_tensor *(*pick)(const ea_model *)) {
    ea_model *m = NULL;
    if (ea_model_open(model_path, &m) != EA_OK) return -1;
    const ea_tensor *t = pick(m);
    uint8_t tail[32];
    int ok = t && t->nbytes >= sizeof tail;
    if (ok) memcpy(tail, (const uint8_t *)t->data + t->nbytes - sizeof tail, sizeof tail);
    ea_model_close(m);
    char *data = NULL;
    size_t n = 0;
    if (!ok || ea_read_file(path, &data, &n) != EA_OK) return -2;
    uint8_t *at = memmem(data, n, tail, sizeof tail);
    int rc = -3;
    if (at && !memmem(at + 1, n - (size_t)(at + 1 - (uint8_t *)data), tail, sizeof tail)) {
        at[sizeof tail - 1] ^= 0x01;
        rc = ea_write_file(path, data, n) == EA_OK ? 0 : -4;
    }
    ea_free(data);
    return rc;
}

static const ea_tensor *pick_wk(const ea_model *m) { return &m->layers[0].wk; }
static const ea_tensor *pick_odd_expert(const ea_model *m) {
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->layers[l].experts) return &m->layers[l].experts[1].down; /* never loaded by LOAD_EVEN_EXPERTS */
    return NULL;
}

/* Write a block with the model at path; then any load share finds it; then flip a byte of
 * pick's tensor in file: another directory, no block. */
static void flip_test(const char *model_path, const char *file, const ea_tensor *(*pick)(const ea_model *), int how) {
    char d0[1024] = "", d1[1024] = "", d2[1024] = "";
    int has = -1;
    CHECK_EQ(visit(model_path, LOAD_ALL, 1, d0, sizeof d0, &has), 0);
    CHECK_EQ(visit(model_path, how, 0, d1, sizeof d1, &has), 0);
    CHECK_STREQ(d0, d1);
    CHECK_EQ(has, 1);
    CHECK_EQ(flip_last_byte(file, model_path, pick), 0);
    has = -1;
    CHECK_EQ(visit(model_path, how, 0, d2, sizeof d2, &has), 0);
    fprintf(stderr, "  before %s\n  after  %s\n", d0, d2);
    CHECK(strcmp(d0, d2) != 0);
    CHECK_EQ(has, 0);
}

TEST(same_files_same_fingerprint_whatever_is_loaded) {
    char a[1024] = "", b[1024] = "", c[1024] = "";
    int has = -1;
    CHECK_EQ(visit(g_hf, LOAD_ALL, 1, a, sizeof a, &has), 0);
    CHECK_EQ(visit(g_hf, LOAD_EVEN_EXPERTS, 0, b, sizeof b, &has), 0);
    CHECK_EQ(has, 1);
    CHECK_EQ(visit(g_hf, LOAD_NONE, 0, c, sizeof c, &has), 0);
    CHECK_EQ(has, 1);
    CHECK_STREQ(a, b);
    CHECK_STREQ(a, c);
}

TEST(hf_flipped_k_proj_byte_misses) {
    char st[700];
    snprintf(st, sizeof st, "%s/model.safetensors", g_hf);
    flip_test(g_hf, st, pick_wk, LOAD_ALL);
}

TEST(gguf_flipped_attn_k_byte_misses) { flip_test(g_gguf, g_gguf, pick_wk, LOAD_ALL); }

TEST(gguf_flipped_unloaded_expert_byte_misses) { flip_test(g_gguf, g_gguf, pick_odd_expert, LOAD_EVEN_EXPERTS); }

int main(void) {
    const char *tmp = mf_tmpdir();
    if (!tmp) return 2;
    snprintf(g_hf, sizeof g_hf, "%s/hf", tmp);
    snprintf(g_gguf, sizeof g_gguf, "%s/m.gguf", tmp);
    snprintf(g_disk, sizeof g_disk, "%s/kvdisk", tmp);
    mf_opts o = {0};
    ea_model_config cfg;
    if (mf_write_family(EA_ARCH_QWEN3_MOE, g_hf, g_gguf, &o, &cfg)) {
        fprintf(stderr, "cannot write the model files: %s\n", ea_errmsg());
        return 2;
    }
    RUN(same_files_same_fingerprint_whatever_is_loaded);
    RUN(hf_flipped_k_proj_byte_misses);
    RUN(gguf_flipped_attn_k_byte_misses);
    RUN(gguf_flipped_unloaded_expert_byte_misses);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return TEST_SUMMARY();
}
