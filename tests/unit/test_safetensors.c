/*
 * test_safetensors.c — the safetensors reader on buffers and files: views point
 * at the right bytes with the right shapes, layout notes, sharded directories,
 * and every truncation or corruption of a valid file fails cleanly (under ASan
 * in CI, so an over-read would crash).
 */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#include "harness.h"
#include "model/fp8.h"
#include "model/safetensors.h"
#include "unit/model_files.h"

static char g_dir[512];

/* header + data: a (2,3) F32, b (4) BF16, c scalar F16, e empty (0,5) F32 */
static void valid_file(mf_buf *f, size_t *n_hdr) {
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                    "\"c\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[32,34]},"
                    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[34,34]}}";
    mf_buf hb = {0};
    mf_put(&hb, h, strlen(h));
    while (hb.n % 8) mf_put(&hb, " ", 1);
    mf_u64(f, hb.n);
    mf_put(f, hb.p, hb.n);
    for (int i = 0; i < 6; i++) {
        float v = (float)i + 0.5f;
        mf_put(f, &v, 4);
    }
    for (int i = 0; i < 4; i++) {
        uint16_t v = ea_f32_to_bf16((float)-i);
        mf_put(f, &v, 2);
    }
    uint16_t hv = ea_f32_to_f16(2.0f);
    mf_put(f, &hv, 2);
    *n_hdr = hb.n;
    free(hb.p);
}

TEST(parses_views) {
    mf_buf f = {0};
    size_t nh;
    valid_file(&f, &nh);
    ea_st_file st;
    CHECK_EQ(ea_st_parse(f.p, f.n, "mem", &st), EA_OK);
    CHECK_EQ(st.n_tensors, 4);
    CHECK_EQ(st.data_off, 8 + nh);
    int a = ea_st_find(&st, "a"), b = ea_st_find(&st, "b"), c = ea_st_find(&st, "c");
    CHECK(a >= 0 && b >= 0 && c >= 0);
    CHECK_EQ(ea_st_find(&st, "__metadata__"), -1);
    CHECK_EQ(ea_st_find(&st, "zz"), -1);
    ea_tensor t;
    ea_st_tensor(&st, a, &t);
    CHECK_STREQ(t.name, "a");
    CHECK_EQ(t.dtype, EA_F32);
    CHECK_EQ(t.n_dims, 2);
    CHECK_EQ(t.shape[0], 2);
    CHECK_EQ(t.shape[1], 3);
    CHECK_EQ(t.nbytes, 24);
    CHECK(t.data == f.p + 8 + nh);
    CHECK_NEAR(((const float *)t.data)[5], 5.5, 0);
    ea_st_tensor(&st, b, &t);
    CHECK_EQ(t.dtype, EA_BF16);
    CHECK_NEAR(ea_bf16_to_f32(((const uint16_t *)t.data)[3]), -3.0, 0);
    ea_st_tensor(&st, c, &t);
    CHECK_EQ(t.n_dims, 0);
    CHECK_EQ(t.dtype, EA_F16);
    CHECK_EQ(ea_tensor_nelem(&t), 1);
    CHECK_EQ(st.gap_bytes, 0);
    CHECK_EQ(st.n_misaligned, 0);
    ea_st_deinit(&st);
    free(f.p);
}

TEST(every_truncation_fails_cleanly) {
    mf_buf f = {0};
    size_t nh;
    valid_file(&f, &nh);
    for (size_t n = 0; n < f.n; n++) {
        uint8_t *cut = malloc(n ? n : 1); /* exact-size copy: ASan catches any over-read */
        memcpy(cut, f.p, n);
        ea_st_file st;
        ea_status s = ea_st_parse(cut, n, "cut", &st);
        free(cut);
        if (s == EA_OK) {
            ea_st_deinit(&st);
            FAIL_("prefix of %zu bytes parsed", n);
        }
        CHECK(strstr(ea_errmsg(), "cut") != NULL);
        /* a cut inside the header is caught by the length check, before any JSON is read */
        if (n >= 8 && n < 8 + nh && !strstr(ea_errmsg(), "past the end of the file"))
            FAIL_("prefix of %zu bytes: %s", n, ea_errmsg());
    }
    free(f.p);
}

TEST(byte_flips_never_crash) {
    mf_buf f = {0};
    size_t nh;
    valid_file(&f, &nh);
    uint64_t h = 12345;
    int ok = 0, bad = 0;
    for (int it = 0; it < 3000; it++) {
        uint8_t *c = malloc(f.n);
        memcpy(c, f.p, f.n);
        for (int k = 0; k < 3; k++) {
            h = h * 6364136223846793005ull + 1442695040888963407ull;
            c[(h >> 33) % f.n] ^= (uint8_t)(1u << ((h >> 20) & 7));
        }
        ea_st_file st;
        if (ea_st_parse(c, f.n, "flip", &st) == EA_OK) {
            for (int i = 0; i < st.n_tensors; i++) { /* every view lies inside the buffer */
                ea_tensor t;
                ea_st_tensor(&st, i, &t);
                if ((const uint8_t *)t.data + t.nbytes > c + f.n) bad++;
            }
            ea_st_deinit(&st);
            ok++;
        }
        free(c);
    }
    fprintf(stderr, "  %d of 3000 corrupted files still valid\n", ok);
    free(f.p);
    CHECK_EQ(bad, 0);
}

TEST(layout_notes) {
    /* header of 7 bytes + 8: data at offset 15, so an F32 at 0 is misaligned; 4 bytes of gap */
    mf_buf f = {0};
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    mf_u64(&f, strlen(h));
    mf_put(&f, h, strlen(h));
    mf_zero(&f, 8);
    ea_st_file st;
    CHECK_EQ(ea_st_parse(f.p, f.n, "mem", &st), EA_OK);
    CHECK_EQ(st.n_misaligned, (8 + strlen(h)) % 4 != 0);
    CHECK_EQ(st.gap_bytes, 4);
    ea_st_deinit(&st);
    free(f.p);
}

TEST(duplicate_keys_rejected) {
    mf_buf f = {0};
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    mf_u64(&f, strlen(h));
    mf_put(&f, h, strlen(h));
    mf_zero(&f, 8);
    ea_st_file st;
    CHECK_EQ(ea_st_parse(f.p, f.n, "dup", &st), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "dup") && strstr(ea_errmsg(), "duplicate"));
    free(f.p);
}

TEST(dtype_table) {
    ea_dtype d = EA_Q8_0;
    int sup = 0;
    CHECK_EQ(ea_st_dtype_size("BF16", &d, &sup), 2);
    CHECK_EQ(d, EA_BF16);
    CHECK(sup);
    CHECK_EQ(ea_st_dtype_size("F8_E4M3", &d, &sup), 1);
    CHECK(!sup);
    CHECK_EQ(ea_st_dtype_size("Q8_0", &d, &sup), 0);
}

/* F8_E4M3 is parsed and flagged (for eaas convert-fp8); its values follow the bit fields. */
TEST(fp8_flagged_and_decoded) {
    mf_buf f = {0};
    const char *h = "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,4],\"data_offsets\":[0,8]},"
                    "\"s\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[8,12]}}";
    mf_u64(&f, strlen(h));
    mf_put(&f, h, strlen(h));
    mf_zero(&f, 12);
    ea_st_file st;
    CHECK_EQ(ea_st_parse(f.p, f.n, "fp8", &st), EA_OK);
    int w = ea_st_find(&st, "w"), s = ea_st_find(&st, "s");
    CHECK(st.tensors[w].f8 && !st.tensors[s].f8);
    CHECK_EQ(st.tensors[w].end - st.tensors[w].begin, 8);
    ea_st_deinit(&st);
    free(f.p);
    static const struct {
        uint8_t b;
        float v;
    } cases[] = {{0x00, 0.0f},       {0x80, -0.0f},        {0x01, 0.001953125f}, {0x07, 0.013671875f},
                 {0x08, 0.015625f},  {0x38, 1.0f},         {0x39, 1.125f},       {0x40, 2.0f},
                 {0x7e, 448.0f},     {0xfe, -448.0f},      {0xb8, -1.0f},        {0x77, 240.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float v = ea_fp8_e4m3_to_f32(cases[i].b);
        if (v != cases[i].v || signbit(v) != signbit(cases[i].v)) FAIL_("e4m3 0x%02x: %g, want %g", cases[i].b, v, cases[i].v);
    }
    CHECK(isnan(ea_fp8_e4m3_to_f32(0x7f)) && isnan(ea_fp8_e4m3_to_f32(0xff)));
}

TEST(sharded_directory) {
    char dir[600], p[700];
    snprintf(dir, sizeof dir, "%s/sharded", g_dir);
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    const char *idx = "{\"metadata\":{\"total_size\":12},\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\","
                      "\"z\":\"s2.safetensors\"}}";
    CHECK_EQ(mf_write(p, idx, strlen(idx)), 0);
    snprintf(p, sizeof p, "%s/s1.safetensors", dir);
    CHECK_EQ(mf_st_raw(p, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4), 0);
    snprintf(p, sizeof p, "%s/s2.safetensors", dir);
    CHECK_EQ(mf_st_raw(p, "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                          "\"z\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}", 8), 0);
    ea_st_set *s;
    CHECK_EQ(ea_st_set_open(dir, &s), EA_OK);
    CHECK(s->indexed);
    CHECK_EQ(s->n_files, 2);
    CHECK_EQ(s->n_refs, 3);
    int z = ea_st_set_find(s, "z");
    CHECK(z >= 0);
    ea_tensor t;
    const char *file;
    ea_st_set_tensor(s, z, &t, &file);
    CHECK(strstr(file, "s2.safetensors") != NULL);
    CHECK_EQ(t.dtype, EA_F16);
    CHECK_EQ(t.shape[0], 2);
    CHECK_EQ(ea_st_set_find(s, "w"), -1);
    ea_st_set_close(s);
    /* without the index: every *.safetensors file */
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    CHECK_EQ(unlink(p), 0);
    CHECK_EQ(ea_st_set_open(dir, &s), EA_OK);
    CHECK(!s->indexed);
    CHECK_EQ(s->n_refs, 3);
    ea_st_set_close(s);
    /* an index naming a path outside the directory */
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    const char *evil = "{\"weight_map\":{\"x\":\"../s1.safetensors\"}}";
    CHECK_EQ(mf_write(p, evil, strlen(evil)), 0);
    CHECK_EQ(ea_st_set_open(dir, &s), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "../s1.safetensors") != NULL);
    /* an empty directory */
    snprintf(dir, sizeof dir, "%s/empty", g_dir);
    mkdir(dir, 0755);
    CHECK_EQ(ea_st_set_open(dir, &s), EA_ERR_NOT_FOUND);
    CHECK(strstr(ea_errmsg(), dir) != NULL);
}

TEST(open_file_maps_lazily) {
    char p[700];
    snprintf(p, sizeof p, "%s/one.safetensors", g_dir);
    CHECK_EQ(mf_st_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), 0);
    ea_st_file *f;
    CHECK_EQ(ea_st_open(p, &f), EA_OK);
    CHECK_STREQ(f->path, p);
    ea_tensor t;
    ea_st_tensor(f, 0, &t);
    CHECK_EQ(((const uint8_t *)t.data)[1], 8); /* mf_st_raw's pattern i*7+1 */
    ea_st_close(f);
    ea_st_close(NULL);
    snprintf(p, sizeof p, "%s/none.safetensors", g_dir);
    CHECK_EQ(ea_st_open(p, &f), EA_ERR_IO);
    CHECK(strstr(ea_errmsg(), p) != NULL);
}

int main(void) {
    const char *d = mf_tmpdir();
    if (!d) {
        fprintf(stderr, "no temp dir: %s\n", strerror(errno));
        return 1;
    }
    snprintf(g_dir, sizeof g_dir, "%s", d);
    RUN(parses_views);
    RUN(every_truncation_fails_cleanly);
    RUN(byte_flips_never_crash);
    RUN(layout_notes);
    RUN(duplicate_keys_rejected);
    RUN(dtype_table);
    RUN(fp8_flagged_and_decoded);
    RUN(sharded_directory);
    RUN(open_file_maps_lazily);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return TEST_SUMMARY();
}
