/*
 * test_writers.c — the safetensors and GGUF writers (src/model/st_write.c,
 * src/model/gguf_write.c) round-trip small files.
 *
 * Each file is checked twice: byte by byte against the format as the docs
 * give it (header length, 8-byte header padding, data_offsets, GGUF magic /
 * version / counts / value encodings / tensor infos / 32-byte alignment and
 * zero padding / file size), decoded here by hand; and through the project's
 * readers (ea_st_parse, ea_st_set_open, ea_gguf_parse) so the writer and the
 * readers agree. Misuse (too many or too few bytes, duplicate keys, Q8_0
 * rows that are not whole blocks) must be refused.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/util.h"
#include "harness.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "model/safetensors.h"
#include "model/st_write.h"

static char tmpdir[256];

static void mk_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ea_test_writers_XXXXXX");
    if (!mkdtemp(tmpdir)) abort();
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* ------------------------------------------------------------ safetensors */

TEST(st_single_file_bytes) {
    ea_st_writer *w = NULL;
    CHECK_EQ(ea_st_writer_create(tmpdir, 1, &w), EA_OK);
    int64_t s_a[2] = {2, 3}, s_b[1] = {5};
    CHECK_EQ(ea_st_writer_add(w, "a.weight", EA_F32, 2, s_a), EA_OK);
    CHECK_EQ(ea_st_writer_add(w, "b.bias", EA_BF16, 1, s_b), EA_OK);
    CHECK_EQ(ea_st_writer_add(w, "a.weight", EA_F32, 2, s_a), EA_ERR_INVALID_ARG); /* duplicate */
    CHECK_EQ(ea_st_writer_add(w, "q", EA_Q8_0, 1, s_b), EA_ERR_UNSUPPORTED);       /* not a safetensors dtype */
    CHECK_EQ(ea_st_writer_begin(w), EA_OK);
    float a[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
    uint16_t b[5];
    for (int i = 0; i < 5; i++) b[i] = ea_f32_to_bf16((float)i - 2.0f);
    /* bytes arrive in odd-sized pieces that straddle the tensor boundary */
    uint8_t all[34];
    memcpy(all, a, 24);
    memcpy(all + 24, b, 10);
    CHECK_EQ(ea_st_writer_write(w, all, 7), EA_OK);
    CHECK_EQ(ea_st_writer_write(w, all + 7, 20), EA_OK);
    CHECK_EQ(ea_st_writer_write(w, all + 27, 7), EA_OK);
    CHECK_EQ(ea_st_writer_write(w, all, 1), EA_ERR_RANGE); /* past the last tensor */
    CHECK_EQ(ea_st_writer_finish(w), EA_OK);
    ea_st_writer_destroy(w);

    char path[512];
    ea_path_join(path, sizeof path, tmpdir, "model.safetensors");
    char *data = NULL;
    size_t size = 0;
    CHECK_EQ(ea_read_file(path, &data, &size), EA_OK);
    const uint8_t *u = (const uint8_t *)data;
    uint64_t n = le64(u);
    CHECK_EQ((8 + n) % 64, 0);
    CHECK_EQ(size, 8 + n + 34);
    CHECK_EQ(memcmp(u + 8 + n, all, 34), 0);
    /* header: JSON object, padded with spaces */
    size_t j = n;
    while (j > 0 && u[8 + j - 1] == ' ') j--;
    CHECK(u[8 + j - 1] == '}');
    json_error_t err;
    json_t *h = json_loadb(data + 8, j, 0, &err);
    CHECK(h != NULL);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(h, "__metadata__"), "format")), "pt");
    json_t *ea = json_object_get(h, "a.weight"), *eb = json_object_get(h, "b.bias");
    CHECK_STREQ(json_string_value(json_object_get(ea, "dtype")), "F32");
    CHECK_STREQ(json_string_value(json_object_get(eb, "dtype")), "BF16");
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(ea, "shape"), 1)), 3);
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(ea, "data_offsets"), 0)), 0);
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(ea, "data_offsets"), 1)), 24);
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(eb, "data_offsets"), 0)), 24);
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(eb, "data_offsets"), 1)), 34);
    json_decref(h);
    /* the project's reader agrees */
    ea_st_file f;
    CHECK_EQ(ea_st_parse(u, size, path, &f), EA_OK);
    CHECK_EQ(f.n_tensors, 2);
    int ia = ea_st_find(&f, "a.weight"), ib = ea_st_find(&f, "b.bias");
    CHECK(ia >= 0 && ib >= 0);
    ea_tensor t;
    ea_st_tensor(&f, ia, &t);
    CHECK_EQ(t.dtype, EA_F32);
    CHECK_EQ(t.n_dims, 2);
    CHECK_EQ(t.shape[0], 2);
    CHECK_EQ(memcmp(t.data, a, 24), 0);
    ea_st_tensor(&f, ib, &t);
    CHECK_EQ(t.dtype, EA_BF16);
    CHECK_EQ(memcmp(t.data, b, 10), 0);
    CHECK_EQ(f.gap_bytes, 0);
    ea_st_deinit(&f);
    ea_free(data);
    unlink(path);
}

TEST(st_short_write_is_refused) {
    ea_st_writer *w = NULL;
    CHECK_EQ(ea_st_writer_create(tmpdir, 1, &w), EA_OK);
    int64_t s[1] = {4};
    CHECK_EQ(ea_st_writer_add(w, "x", EA_F16, 1, s), EA_OK);
    CHECK_EQ(ea_st_writer_begin(w), EA_OK);
    uint16_t v[3] = {0};
    CHECK_EQ(ea_st_writer_write(w, v, 6), EA_OK);
    CHECK_EQ(ea_st_writer_finish(w), EA_ERR_RANGE); /* 6 of 8 bytes */
    ea_st_writer_destroy(w);
    char path[512];
    ea_path_join(path, sizeof path, tmpdir, "model.safetensors");
    unlink(path);
}

TEST(st_sharded_with_index) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/sharded", tmpdir);
    CHECK(mkdir(dir, 0777) == 0);
    ea_st_writer *w = NULL;
    CHECK_EQ(ea_st_writer_create(dir, 3, &w), EA_OK);
    char name[32];
    int64_t s[1];
    uint64_t total = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "t%d.weight", i);
        s[0] = 10 + i;
        total += 4 * (uint64_t)s[0];
        CHECK_EQ(ea_st_writer_add(w, name, EA_F32, 1, s), EA_OK);
    }
    CHECK_EQ(ea_st_writer_begin(w), EA_OK);
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 10 + i; k++) {
            float x = (float)(100 * i + k);
            CHECK_EQ(ea_st_writer_write(w, &x, 4), EA_OK);
        }
    CHECK_EQ(ea_st_writer_finish(w), EA_OK);
    ea_st_writer_destroy(w);
    /* three shard files and an index naming them */
    char path[600];
    int files[3] = {0};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/model-%05d-of-00003.safetensors", dir, k + 1);
        CHECK(ea_file_exists(path));
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_t *idx = NULL;
    CHECK_EQ(ea_json_load_file(path, &idx), EA_OK);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(idx, "metadata"), "total_size")), (long long)total);
    json_t *map = json_object_get(idx, "weight_map");
    CHECK_EQ(json_object_size(map), 5);
    int last = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "t%d.weight", i);
        const char *fn = json_string_value(json_object_get(map, name));
        CHECK(fn != NULL);
        int k = atoi(fn + strlen("model-")) - 1;
        CHECK(k >= last && k < 3); /* contiguous runs in declaration order */
        last = k;
        files[k]++;
    }
    json_decref(idx);
    for (int k = 0; k < 3; k++) CHECK(files[k] > 0); /* no empty shard */
    /* the reader opens the set through the index, and every value is where it belongs */
    ea_st_set *set = NULL;
    CHECK_EQ(ea_st_set_open(dir, &set), EA_OK);
    CHECK(set->indexed);
    CHECK_EQ(set->n_refs, 5);
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "t%d.weight", i);
        int r = ea_st_set_find(set, name);
        CHECK(r >= 0);
        ea_tensor t;
        ea_st_set_tensor(set, r, &t, NULL);
        CHECK_EQ(t.shape[0], 10 + i);
        const float *x = t.data;
        for (int k = 0; k < 10 + i; k++) CHECK_EQ(x[k], 100 * i + k);
    }
    ea_st_set_close(set);
    /* more shards than tensors is refused */
    CHECK_EQ(ea_st_writer_create(dir, 6, &w), EA_OK);
    CHECK_EQ(ea_st_writer_add(w, "only", EA_F32, 1, s), EA_OK);
    CHECK_EQ(ea_st_writer_begin(w), EA_ERR_INVALID_ARG);
    ea_st_writer_destroy(w);
}

/* ------------------------------------------------------------------- GGUF */

typedef struct {
    const uint8_t *p;
    size_t at, size;
} rd;
static uint64_t r64(rd *r) { uint64_t v = le64(r->p + r->at); r->at += 8; return v; }
static uint32_t r32(rd *r) { uint32_t v = le32(r->p + r->at); r->at += 4; return v; }
static int rstr(rd *r, const char *want) {
    uint64_t n = r64(r);
    int ok = n == strlen(want) && memcmp(r->p + r->at, want, (size_t)n) == 0;
    r->at += (size_t)n;
    return ok;
}

TEST(gguf_bytes_and_reader) {
    char path[512];
    snprintf(path, sizeof path, "%s/t.gguf", tmpdir);
    ea_gguf_writer *w = NULL;
    CHECK_EQ(ea_gguf_writer_create(path, 32, &w), EA_OK);
    CHECK_EQ(ea_gguf_w_str(w, "general.architecture", "qwen3moe"), EA_OK);
    CHECK_EQ(ea_gguf_w_u32(w, "general.alignment", 32), EA_OK);
    CHECK_EQ(ea_gguf_w_f32(w, "x.eps", 1e-6f), EA_OK);
    CHECK_EQ(ea_gguf_w_bool(w, "x.flag", 1), EA_OK);
    CHECK_EQ(ea_gguf_w_i32(w, "x.neg", -5), EA_OK);
    CHECK_EQ(ea_gguf_w_u64(w, "x.big", 1ull << 40), EA_OK);
    const char *strs[3] = {"a", "", "h\xc3\xa9llo"};
    size_t lens[3] = {1, 0, 6};
    CHECK_EQ(ea_gguf_w_arr_str(w, "x.strs", strs, lens, 3), EA_OK);
    int32_t ids[4] = {1, -1, 3, 5};
    CHECK_EQ(ea_gguf_w_arr_i32(w, "x.ids", ids, 4), EA_OK);
    CHECK_EQ(ea_gguf_w_u32(w, "x.neg", 1), EA_ERR_INVALID_ARG); /* duplicate key */
    int64_t ne_a[1] = {5}, ne_b[2] = {32, 2}, ne_c[2] = {3, 2}, ne_bad[2] = {16, 2};
    CHECK_EQ(ea_gguf_writer_add_tensor(w, "a", EA_F32, 1, ne_a), EA_OK);
    CHECK_EQ(ea_gguf_writer_add_tensor(w, "b", EA_Q8_0, 2, ne_b), EA_OK);
    CHECK_EQ(ea_gguf_writer_add_tensor(w, "bad", EA_Q8_0, 2, ne_bad), EA_ERR_INVALID_ARG); /* 16 % 32 */
    CHECK_EQ(ea_gguf_writer_add_tensor(w, "c", EA_BF16, 2, ne_c), EA_OK);
    CHECK_EQ(ea_gguf_writer_begin(w), EA_OK);
    CHECK_EQ(ea_gguf_w_u32(w, "late", 1), EA_ERR_INVALID_ARG);
    float a[5] = {1, 2, 3, 4, 5};
    float bsrc[64];
    for (int i = 0; i < 64; i++) bsrc[i] = (float)(i - 32) / 8.0f;
    ea_block_q8_0 bq[2];
    ea_dtypes[EA_Q8_0].from_f32(bsrc, bq, 64);
    uint16_t c[6];
    for (int i = 0; i < 6; i++) c[i] = ea_f32_to_bf16((float)i * 0.25f);
    CHECK_EQ(ea_gguf_writer_write(w, a, 20), EA_OK);
    CHECK_EQ(ea_gguf_writer_write(w, bq, 68), EA_OK);
    CHECK_EQ(ea_gguf_writer_write(w, c, 12), EA_OK);
    CHECK_EQ(ea_gguf_writer_finish(w), EA_OK);
    ea_gguf_writer_destroy(w);

    char *data = NULL;
    size_t size = 0;
    CHECK_EQ(ea_read_file(path, &data, &size), EA_OK);
    rd r = {(const uint8_t *)data, 0, size};
    CHECK(memcmp(data, "GGUF", 4) == 0);
    r.at = 4;
    CHECK_EQ(r32(&r), 3);  /* version */
    CHECK_EQ(r64(&r), 3);  /* tensors */
    CHECK_EQ(r64(&r), 8);  /* key/values */
    CHECK(rstr(&r, "general.architecture"));
    CHECK_EQ(r32(&r), 8);
    CHECK(rstr(&r, "qwen3moe"));
    CHECK(rstr(&r, "general.alignment"));
    CHECK_EQ(r32(&r), 4);
    CHECK_EQ(r32(&r), 32);
    CHECK(rstr(&r, "x.eps"));
    CHECK_EQ(r32(&r), 6);
    uint32_t fu = r32(&r);
    float fv;
    memcpy(&fv, &fu, 4);
    CHECK(fv == 1e-6f);
    CHECK(rstr(&r, "x.flag"));
    CHECK_EQ(r32(&r), 7);
    CHECK_EQ(r.p[r.at++], 1);
    CHECK(rstr(&r, "x.neg"));
    CHECK_EQ(r32(&r), 5);
    CHECK_EQ((int32_t)r32(&r), -5);
    CHECK(rstr(&r, "x.big"));
    CHECK_EQ(r32(&r), 10);
    CHECK_EQ(r64(&r), 1ull << 40);
    CHECK(rstr(&r, "x.strs"));
    CHECK_EQ(r32(&r), 9);
    CHECK_EQ(r32(&r), 8);
    CHECK_EQ(r64(&r), 3);
    CHECK(rstr(&r, "a"));
    CHECK(rstr(&r, ""));
    CHECK(rstr(&r, "h\xc3\xa9llo"));
    CHECK(rstr(&r, "x.ids"));
    CHECK_EQ(r32(&r), 9);
    CHECK_EQ(r32(&r), 5);
    CHECK_EQ(r64(&r), 4);
    for (int i = 0; i < 4; i++) CHECK_EQ((int32_t)r32(&r), ids[i]);
    /* tensor infos: name, n_dims, ne[], type, offset (aligned, back to back) */
    const struct { const char *name; uint32_t nd; uint64_t ne0, ne1; uint32_t type; uint64_t off; } ti[3] = {
        {"a", 1, 5, 0, 0, 0}, {"b", 2, 32, 2, 8, 32}, {"c", 2, 3, 2, 30, 128}};
    for (int k = 0; k < 3; k++) {
        CHECK(rstr(&r, ti[k].name));
        CHECK_EQ(r32(&r), ti[k].nd);
        CHECK_EQ(r64(&r), ti[k].ne0);
        if (ti[k].nd == 2) CHECK_EQ(r64(&r), ti[k].ne1);
        CHECK_EQ(r32(&r), ti[k].type);
        CHECK_EQ(r64(&r), ti[k].off);
    }
    size_t data_off = (r.at + 31) / 32 * 32;
    for (size_t i = r.at; i < data_off; i++) CHECK_EQ(r.p[i], 0);
    CHECK_EQ(memcmp(r.p + data_off, a, 20), 0);
    for (size_t i = data_off + 20; i < data_off + 32; i++) CHECK_EQ(r.p[i], 0); /* padding after a */
    CHECK_EQ(memcmp(r.p + data_off + 32, bq, 68), 0);
    for (size_t i = data_off + 100; i < data_off + 128; i++) CHECK_EQ(r.p[i], 0);
    CHECK_EQ(memcmp(r.p + data_off + 128, c, 12), 0);
    CHECK_EQ(size, data_off + 160); /* the last tensor is padded too */

    /* the project's reader agrees */
    ea_gguf g;
    CHECK_EQ(ea_gguf_parse(r.p, size, path, &g), EA_OK);
    CHECK_EQ(g.data_off, data_off);
    const char *arch = NULL;
    CHECK_EQ(ea_gguf_get_str(&g, "general.architecture", &arch), EA_OK);
    CHECK_STREQ(arch, "qwen3moe");
    int32_t neg = 0;
    CHECK_EQ(ea_gguf_get_i32(&g, "x.neg", &neg), EA_OK);
    CHECK_EQ(neg, -5);
    int kv = ea_gguf_find_kv(&g, "x.strs");
    CHECK(kv >= 0);
    const char *s2;
    size_t l2;
    CHECK_EQ(ea_gguf_arr_str(&g, kv, 2, &s2, &l2), EA_OK);
    CHECK(l2 == 6 && memcmp(s2, "h\xc3\xa9llo", 6) == 0);
    int ib = ea_gguf_find_tensor(&g, "b");
    CHECK(ib >= 0);
    ea_tensor t;
    ea_gguf_tensor(&g, ib, &t);
    CHECK_EQ(t.dtype, EA_Q8_0);
    CHECK_EQ(t.shape[0], 2); /* PyTorch order */
    CHECK_EQ(t.shape[1], 32);
    float back[64];
    ea_dtypes[EA_Q8_0].to_f32(t.data, back, 64);
    for (int i = 0; i < 64; i++) CHECK_NEAR(back[i], bsrc[i], 0.02);
    ea_gguf_deinit(&g);
    ea_free(data);
    unlink(path);
}

TEST(gguf_short_write_is_refused) {
    char path[512];
    snprintf(path, sizeof path, "%s/short.gguf", tmpdir);
    ea_gguf_writer *w = NULL;
    CHECK_EQ(ea_gguf_writer_create(path, 32, &w), EA_OK);
    int64_t ne[1] = {4};
    CHECK_EQ(ea_gguf_writer_add_tensor(w, "x", EA_F32, 1, ne), EA_OK);
    CHECK_EQ(ea_gguf_writer_begin(w), EA_OK);
    float x[5] = {0};
    CHECK_EQ(ea_gguf_writer_write(w, x, 8), EA_OK);
    CHECK_EQ(ea_gguf_writer_finish(w), EA_ERR_RANGE);
    CHECK_EQ(ea_gguf_writer_write(w, x, 12), EA_ERR_RANGE); /* 8 + 12 > 16 */
    ea_gguf_writer_destroy(w);
    CHECK_EQ(ea_gguf_writer_create(path, 24, &w), EA_ERR_INVALID_ARG); /* not a power of two */
    unlink(path);
}

int main(void) {
    mk_tmpdir();
    RUN(st_single_file_bytes);
    RUN(st_short_write_is_refused);
    RUN(st_sharded_with_index);
    RUN(gguf_bytes_and_reader);
    RUN(gguf_short_write_is_refused);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_SUMMARY();
}
