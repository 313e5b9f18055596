/*
 * test_kv_disk.c — the prefix cache's disk tier: a long prompt's evicted KV
 * blocks survive a restart and give a prefix hit with the same output; a
 * different rank/world never reads them; corrupt, truncated and foreign files
 * are skipped (at start-up and at read time), never loaded, and outputs stay
 * correct; a block shared at two different prefixes has two keys. Uses a tiny model from `eaas make-model`.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "harness.h"
#include "serve/kv_disk.h"
#include "serve/scheduler.h"
#include "sched_util.h"

static char model[1024], disk[1024];
static ea_dtype g_kv = EA_F32; /* the KV cache dtype start() gives its engine */

/* 16 greedy tokens after prompt p of n tokens. */
static result run_tokens(ea_sched *s, const int32_t *p, int n) {
    ea_req_params rp;
    memset(&rp, 0, sizeof rp);
    rp.prompt = p;
    rp.n_prompt = n;
    rp.max_tokens = 16;
    rp.ignore_eos = 1;
    ea_sampling_defaults(&rp.sp);
    rp.sp.temperature = 0.0f;
    result res;
    ea_request *r;
    if (ea_sched_submit(s, &rp, &r) != EA_OK) {
        memset(&res, 0, sizeof res);
        res.error = 1;
        return res;
    }
    collect(r, &res);
    return res;
}

/* One prompt (i) of n tokens, 16 greedy tokens. */
static result run(ea_sched *s, int i, int n) {
    int32_t p[256];
    prompt_of(i, p, n);
    return run_tokens(s, p, n);
}

/* kv_blocks 12 of 16 tokens: the long prompt (100 + 16 tokens, 8 blocks) fits alone. */
static ea_sched *start(ea_engine **e, int kv_blocks, const char *dir, const char *mode, int world, int rank) {
    ea_engine_opts o = {.model_path = model, .threads = 2, .max_tokens = 64, .max_ctx = 256, .max_seqs = 1,
                        .kv_blocks = kv_blocks, .block_size = 16, .kv_dtype = g_kv};
    if (ea_engine_create(&o, e) != EA_OK) {
        fprintf(stderr, "engine: %s\n", ea_errmsg());
        return NULL;
    }
    ea_sched_opts so = {.max_running = 1, .max_queue = 64, .max_batch_tokens = 64, .prefix_cache = 1,
                        .kv_disk_dir = dir, .kv_disk_max_mib = 64, .par_mode = mode, .par_world = world, .par_rank = rank};
    ea_sched *s;
    if (ea_sched_create(*e, NULL, &so, &s) != EA_OK) {
        fprintf(stderr, "sched: %s\n", ea_errmsg());
        ea_engine_destroy(*e);
        return NULL;
    }
    if (ea_sched_start(s) != EA_OK) return NULL;
    return s;
}

static void stop(ea_sched *s, ea_engine *e) {
    ea_sched_destroy(s);
    ea_engine_destroy(e);
}

static int same(const result *a, const result *b) {
    return !a->error && !b->error && a->n == b->n && a->n > 0 && memcmp(a->toks, b->toks, sizeof(int32_t) * (size_t)a->n) == 0;
}

/* The namespace directory and file count a scheduler with these options uses. */
static int ns_files(ea_engine *e, const char *mode, int world, int rank, char *dir, size_t dn) {
    ea_kv_disk_opts o = {.dir = disk, .mode = mode, .world = world, .rank = rank};
    ea_kv_disk *d;
    if (ea_kv_disk_open(&o, e->m, &e->kv, &d) != EA_OK) return -1;
    snprintf(dir, dn, "%s", ea_kv_disk_dir(d));
    ea_kv_disk_stats st;
    ea_kv_disk_get_stats(d, &st);
    ea_kv_disk_close(d);
    return (int)st.files;
}

/* Damage every .kvb file of dir in one of four ways; returns how many. */
static int damage_all(const char *dir) {
    DIR *dd = opendir(dir);
    if (!dd) return 0;
    struct dirent *de;
    int n = 0;
    while ((de = readdir(dd)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".kvb") != 0) continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        FILE *f = fopen(p, "r+b");
        if (!f) continue;
        switch (n % 4) {
        case 0: fseek(f, 64 + 100, SEEK_SET); fputc(0x5a, f); fputc(0xa5, f); break; /* payload bytes */
        case 1: if (truncate(p, 64 + 40) != 0) perror("truncate"); break;               /* truncated */
        case 2: fseek(f, 28, SEEK_SET); fputc(0x7f, f); break;                         /* k_dim in header */
        default: fseek(f, 0, SEEK_SET); fputc('X', f); break;                          /* magic */
        }
        fclose(f);
        n++;
    }
    closedir(dd);
    return n;
}

static result ref_long;

TEST(restart_hits_from_disk) {
    ea_engine *e;
    ea_sched *s = start(&e, 12, disk, NULL, 1, 0);
    CHECK(s != NULL);
    if (!s) return;
    result a = run(s, 1, 100);
    CHECK(same(&a, &ref_long));
    CHECK_EQ(a.cached, 0);
    /* two other long prompts need the long one's blocks: they are evicted to disk */
    result o1 = run(s, 2, 100), o2 = run(s, 3, 100);
    CHECK(!o1.error && !o2.error);
    ea_sched_stats st;
    ea_sched_get_stats(s, &st);
    fprintf(stderr, "  first run: %llu blocks written on eviction\n", (unsigned long long)st.kv_disk_writes);
    CHECK(st.kv_disk_writes >= 6);
    stop(s, e);

    s = start(&e, 12, disk, NULL, 1, 0); /* restart */
    CHECK(s != NULL);
    if (!s) return;
    result b = run(s, 1, 100);
    ea_sched_get_stats(s, &st);
    fprintf(stderr, "  restart: cached %d tokens, %llu blocks read, prefix hit tokens %llu\n", b.cached,
            (unsigned long long)st.kv_disk_reads, (unsigned long long)st.prefix_hit_tokens);
    CHECK_EQ(b.cached, 96); /* 6 full blocks; the 7th would leave no prompt token to compute */
    CHECK(st.kv_disk_reads >= 6);
    CHECK_EQ(st.prefix_hit_tokens, 96);
    CHECK_EQ(st.kv_disk_skipped, 0);
    CHECK(same(&b, &ref_long));
    stop(s, e);
}

TEST(other_rank_never_reads) {
    ea_engine *e;
    ea_sched *s = start(&e, 12, disk, "expert", 2, 1);
    CHECK(s != NULL);
    if (!s) return;
    char d0[2048], d1[2048];
    int n0 = ns_files(e, "single", 1, 0, d0, sizeof d0);
    int n1_before = ns_files(e, "expert", 2, 1, d1, sizeof d1);
    CHECK(n0 >= 6);
    CHECK_EQ(n1_before, 0);
    CHECK(strcmp(d0, d1) != 0);
    result b = run(s, 1, 100);
    CHECK_EQ(b.cached, 0);
    CHECK(same(&b, &ref_long));
    (void)run(s, 2, 100);
    (void)run(s, 3, 100);
    ea_sched_stats st;
    ea_sched_get_stats(s, &st);
    CHECK_EQ(st.kv_disk_reads, 0);
    CHECK_EQ(st.prefix_hit_tokens, 0);
    CHECK(st.kv_disk_writes >= 6);
    stop(s, e);
    /* its files went to its own directory; the single-process one is unchanged */
    ea_engine_opts o = {.model_path = model, .threads = 1, .max_tokens = 64, .max_ctx = 256, .max_seqs = 1, .kv_blocks = 12,
                        .block_size = 16};
    CHECK_EQ(ea_engine_create(&o, &e), EA_OK);
    int n1 = ns_files(e, "expert", 2, 1, d1, sizeof d1), n0b = ns_files(e, "single", 1, 0, d0, sizeof d0);
    fprintf(stderr, "  single-1/rank_0: %d files; expert-2/rank_1: %d files (%s)\n", n0b, n1, d1);
    CHECK(n1 >= 6);
    CHECK(strstr(d1, "/expert-2/rank_1") != NULL);
    CHECK_EQ(n0b, n0);
    ea_engine_destroy(e);
}

/* An f16 cache: its blocks go to their own directory (-f16), come back
 * from disk after a restart with the output of an f16 run without the disk
 * tier, and an f32 cache's directory never sees them. */
TEST(f16_cache_has_its_own_files) {
    ea_engine *e;
    g_kv = EA_F16;
    ea_sched *s = start(&e, 0, NULL, NULL, 1, 0);
    CHECK(s != NULL);
    if (!s) goto out;
    result ref16 = run(s, 1, 100);
    stop(s, e);
    char d32[2048], d16[2048];
    g_kv = EA_F32;
    ea_engine_opts o = {.model_path = model, .threads = 1, .max_tokens = 64, .max_ctx = 256, .max_seqs = 1, .kv_blocks = 12,
                        .block_size = 16};
    CHECK_EQ(ea_engine_create(&o, &e), EA_OK);
    int n32 = ns_files(e, "single", 1, 0, d32, sizeof d32);
    ea_engine_destroy(e);
    g_kv = EA_F16;
    s = start(&e, 12, disk, NULL, 1, 0);
    CHECK(s != NULL);
    if (!s) goto out;
    CHECK_EQ(ns_files(e, "single", 1, 0, d16, sizeof d16), 0);
    fprintf(stderr, "  f32 cache: %s (%d files); f16 cache: %s\n", d32, n32, d16);
    CHECK(strstr(d16, "/single-1-f16/rank_0") != NULL);
    result a = run(s, 1, 100);
    CHECK(same(&a, &ref16));
    (void)run(s, 2, 100);
    (void)run(s, 3, 100);
    ea_sched_stats st;
    ea_sched_get_stats(s, &st);
    CHECK(st.kv_disk_writes >= 6);
    stop(s, e);
    s = start(&e, 12, disk, NULL, 1, 0); /* restart */
    CHECK(s != NULL);
    if (!s) goto out;
    result b = run(s, 1, 100);
    ea_sched_get_stats(s, &st);
    CHECK_EQ(b.cached, 96);
    CHECK(st.kv_disk_reads >= 6);
    CHECK_EQ(st.kv_disk_skipped, 0);
    CHECK(same(&b, &ref16));
    stop(s, e);
    g_kv = EA_F32;
    CHECK_EQ(ea_engine_create(&o, &e), EA_OK);
    CHECK_EQ(ns_files(e, "single", 1, 0, d32, sizeof d32), n32); /* the f32 directory is unchanged */
    ea_engine_destroy(e);
out:
    g_kv = EA_F32;
}

TEST(corrupt_and_foreign_skipped) {
    ea_engine *e;
    ea_engine_opts o = {.model_path = model, .threads = 1, .max_tokens = 64, .max_ctx = 256, .max_seqs = 1, .kv_blocks = 12,
                        .block_size = 16};
    CHECK_EQ(ea_engine_create(&o, &e), EA_OK);
    char d0[2048], p[2200];
    int n0 = ns_files(e, "single", 1, 0, d0, sizeof d0);
    ea_engine_destroy(e);
    int nd = damage_all(d0);
    CHECK_EQ(nd, n0);
    snprintf(p, sizeof p, "%s/notes.txt", d0); /* foreign name */
    CHECK_EQ(ea_write_file(p, "hello", 5), EA_OK);
    snprintf(p, sizeof p, "%s/0123456789abcdef.kvb", d0); /* right name, not a block */
    CHECK_EQ(ea_write_file(p, "EAKVBLK1 but not really a block file at all", 43), EA_OK);

    ea_sched *s = start(&e, 12, disk, NULL, 1, 0);
    CHECK(s != NULL);
    if (!s) return;
    ea_sched_stats st;
    ea_sched_get_stats(s, &st);
    fprintf(stderr, "  start-up: %d damaged + 2 foreign files, %llu skipped\n", nd, (unsigned long long)st.kv_disk_skipped);
    CHECK_EQ(st.kv_disk_skipped, (uint64_t)nd + 2);
    result b = run(s, 1, 100);
    CHECK_EQ(b.cached, 0);
    CHECK(same(&b, &ref_long));
    ea_sched_get_stats(s, &st);
    CHECK_EQ(st.kv_disk_reads, 0);
    stop(s, e); /* destroy writes the cached blocks (valid again) */

    /* damage after the start-up scan: the read-time check catches it */
    s = start(&e, 12, disk, NULL, 1, 0);
    CHECK(s != NULL);
    if (!s) return;
    ea_sched_get_stats(s, &st);
    uint64_t skipped0 = st.kv_disk_skipped;
    CHECK_EQ(skipped0, 1); /* bad block files were deleted at the last start-up; other names are left alone */
    snprintf(p, sizeof p, "%s/notes.txt", d0);
    CHECK(ea_file_exists(p));
    snprintf(p, sizeof p, "%s/0123456789abcdef.kvb", d0);
    CHECK(!ea_file_exists(p));
    nd = damage_all(d0);
    CHECK(nd >= 6);
    b = run(s, 1, 100);
    ea_sched_get_stats(s, &st);
    fprintf(stderr, "  damaged after start-up: cached %d, %llu more skipped at read\n", b.cached,
            (unsigned long long)(st.kv_disk_skipped - skipped0));
    CHECK_EQ(b.cached, 0);
    CHECK_EQ(st.kv_disk_reads, 0);
    CHECK(st.kv_disk_skipped > skipped0);
    CHECK(same(&b, &ref_long));
    stop(s, e);
}

/* Disk keys chain too: X Y Z t is written at shutdown; after a restart
 * Y Z t finds nothing on disk and its output equals a run without a cache. */
TEST(disk_keys_chain_blocks) {
    enum { B = 16 };
    int32_t xyzt[3 * B + CHAIN_T], yzt[2 * B + CHAIN_T];
    chain_prompts(B, xyzt, yzt);
    ea_engine *e;
    ea_sched *s = start(&e, 0, NULL, NULL, 1, 0);
    CHECK(s != NULL);
    if (!s) return;
    result ref = run_tokens(s, yzt, 2 * B + CHAIN_T);
    stop(s, e);

    s = start(&e, 12, disk, "chain", 1, 0);
    CHECK(s != NULL);
    if (!s) return;
    result first = run_tokens(s, xyzt, 3 * B + CHAIN_T);
    CHECK(!first.error);
    stop(s, e); /* destroy writes X, Y, Z to disk */

    s = start(&e, 12, disk, "chain", 1, 0);
    CHECK(s != NULL);
    if (!s) return;
    char d[2048];
    CHECK(ns_files(e, "chain", 1, 0, d, sizeof d) >= 3);
    result second = run_tokens(s, yzt, 2 * B + CHAIN_T);
    ea_sched_stats st;
    ea_sched_get_stats(s, &st);
    CHECK(same(&second, &ref)); /* what the user sees first, then why */
    CHECK_EQ(second.cached, 0);
    CHECK_EQ(st.kv_disk_reads, 0);
    stop(s, e);
}

TEST(size_bound_deletes_oldest) {
    ea_engine *e;
    ea_engine_opts o = {.model_path = model, .threads = 1, .max_tokens = 64, .max_ctx = 256, .max_seqs = 1, .kv_blocks = 12,
                        .block_size = 16};
    CHECK_EQ(ea_engine_create(&o, &e), EA_OK);
    size_t per = 64 + ea_kv_bytes_per_block(e->kv.dtype, e->kv.n_layers, e->kv.k_dim, e->kv.v_dim, e->kv.block_size);
    ea_kv_disk_opts dopt = {.dir = disk, .mode = "bound", .world = 1, .rank = 0, .max_bytes = 3 * per};
    ea_kv_disk *d;
    CHECK_EQ(ea_kv_disk_open(&dopt, e->m, &e->kv, &d), EA_OK);
    for (int b = 0; b < 5; b++) {
        for (size_t i = 0; i < (size_t)e->kv.block_size * (size_t)e->kv.k_dim; i++)
            ((float *)e->kv.k)[(size_t)b * (size_t)e->kv.block_size * (size_t)e->kv.k_dim + i] =
                (float)(b * 1000 + (int)(i % 997));
        CHECK_EQ(ea_kv_disk_put(d, 100 + (uint64_t)b, &e->kv, b), EA_OK);
    }
    ea_kv_disk_stats st;
    ea_kv_disk_get_stats(d, &st);
    CHECK_EQ(st.files, 3);
    CHECK(st.bytes <= 3 * per);
    CHECK(!ea_kv_disk_has(d, 100) && !ea_kv_disk_has(d, 101));
    CHECK(ea_kv_disk_has(d, 102) && ea_kv_disk_has(d, 104));
    /* a block read back is bit-identical */
    CHECK_EQ(ea_kv_disk_get(d, 104, &e->kv, 11), EA_OK);
    size_t kr = (size_t)e->kv.block_size * (size_t)e->kv.k_dim;
    CHECK(memcmp(e->kv.k + 11 * kr * sizeof(float), e->kv.k + 4 * kr * sizeof(float), kr * sizeof(float)) == 0);
    CHECK_EQ(ea_kv_disk_get(d, 100, &e->kv, 11), EA_ERR_NOT_FOUND);
    ea_kv_disk_close(d);
    ea_engine_destroy(e);
}

int main(void) {
    const char *bin = getenv("EAAS_BIN"), *b = getenv("EA_BUILD");
    snprintf(model, sizeof model, "%s/golden-models/kvdisk-qwen3", b ? b : ".");
    snprintf(disk, sizeof disk, "%s/kvdisk-test", b ? b : ".");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/golden-models && { [ -d %s ] || \"%s\" make-model --family qwen3_moe --preset tiny --seed 5 --format hf --dtype bf16 --out %s >/dev/null; }",
             disk, b ? b : ".", model, bin, model);
    if (system(cmd) != 0) {
        fprintf(stderr, "make-model failed\n");
        return 1;
    }
    /* reference: the long prompt with no cache at all */
    ea_engine *e;
    ea_sched *s = start(&e, 0, NULL, NULL, 1, 0);
    if (!s) return 1;
    ref_long = run(s, 1, 100);
    stop(s, e);
    if (ref_long.error || ref_long.n != 16) {
        fprintf(stderr, "reference run failed\n");
        return 1;
    }
    RUN(restart_hits_from_disk);
    RUN(other_rank_never_reads);
    RUN(f16_cache_has_its_own_files);
    RUN(corrupt_and_foreign_skipped);
    RUN(disk_keys_chain_blocks);
    RUN(size_bound_deletes_oldest);
    return TEST_SUMMARY();
}
