/*
 * test_gguf.c — the GGUF reader: every value type through the getters (and the
 * conversions they refuse), string arrays, tensor views with reversed shapes
 * and aligned offsets for F32/F16/BF16/Q8_0, custom alignment, version 2, and
 * every truncation / random corruption of a valid file failing cleanly.
 */
#include <errno.h>

#include "harness.h"
#include "model/gguf.h"
#include "model/model.h"
#include "unit/model_files.h"

static char g_dir[512];

/* A file with every kv type and four tensors. */
static void build(mf_buf *f, uint32_t version, uint32_t align) {
    mf_buf kv = {0};
    uint64_t n = 0;
    uint8_t u8 = 200;
    int8_t i8 = -5;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint64_t u64 = 1ull << 40;
    int64_t i64 = -(1ll << 40);
    double f64 = 0.25;
    mf_kv_str(&kv, "general.architecture", "qwen3moe"), n++;
    mf_gstr(&kv, "t.u8"), mf_u32(&kv, 0), mf_put(&kv, &u8, 1), n++;
    mf_gstr(&kv, "t.i8"), mf_u32(&kv, 1), mf_put(&kv, &i8, 1), n++;
    mf_gstr(&kv, "t.u16"), mf_u32(&kv, 2), mf_put(&kv, &u16, 2), n++;
    mf_gstr(&kv, "t.i16"), mf_u32(&kv, 3), mf_put(&kv, &i16, 2), n++;
    mf_kv_u32(&kv, "t.u32", 4000000000u), n++;
    mf_kv_i32(&kv, "t.i32", -7), n++;
    mf_kv_f32(&kv, "t.f32", 1.5f), n++;
    mf_kv_bool(&kv, "t.bool", 1), n++;
    mf_gstr(&kv, "t.u64"), mf_u32(&kv, 10), mf_u64(&kv, u64), n++;
    mf_gstr(&kv, "t.i64"), mf_u32(&kv, 11), mf_put(&kv, &i64, 8), n++;
    mf_gstr(&kv, "t.f64"), mf_u32(&kv, 12), mf_put(&kv, &f64, 8), n++;
    mf_kv_str(&kv, "t.empty", ""), n++;
    /* string array with an empty string and a NUL inside */
    mf_gstr(&kv, "tokenizer.ggml.tokens"), mf_u32(&kv, 9), mf_u32(&kv, 8), mf_u64(&kv, 3);
    mf_gstr(&kv, "hello"), mf_u64(&kv, 0), mf_u64(&kv, 3), mf_put(&kv, "a\0b", 3), n++;
    mf_gstr(&kv, "tokenizer.ggml.token_type"), mf_u32(&kv, 9), mf_u32(&kv, 5), mf_u64(&kv, 3);
    for (int32_t i = -1; i < 2; i++) mf_put(&kv, &i, 4);
    n++;
    mf_gstr(&kv, "t.f32arr"), mf_u32(&kv, 9), mf_u32(&kv, 6), mf_u64(&kv, 2);
    float fa[2] = {0.5f, -2.0f};
    mf_put(&kv, fa, 8), n++;
    mf_gstr(&kv, "t.emptyarr"), mf_u32(&kv, 9), mf_u32(&kv, 4), mf_u64(&kv, 0), n++;
    if (align != 32) mf_kv_u32(&kv, "general.alignment", align), n++;
    mf_list l = {0};
    mf_add(&l, "a.f32", 2, 3, 64, 0, mf_fill("a", 3 * 64, 0));
    mf_add(&l, "b.vec", 1, 5, 0, 0, mf_fill("b", 5, 0));
    mf_add(&l, "c.3d", 3, 2, 3, 64, mf_fill("c", 2 * 3 * 64, 0));
    mf_gguf_build(f, &kv, n, &l, EA_F32, align, NULL);
    memcpy(f->p + 4, &version, 4);
    mf_list_free(&l);
    free(kv.p);
}

TEST(kv_getters) {
    mf_buf f = {0};
    build(&f, 3, 32);
    ea_gguf g;
    ea_status s = ea_gguf_parse(f.p, f.n, "mem.gguf", &g);
    if (s) fprintf(stderr, "  %s\n", ea_errmsg());
    CHECK_EQ(s, EA_OK);
    CHECK_EQ(g.version, 3);
    CHECK_EQ(g.alignment, 32);
    const char *str;
    CHECK_EQ(ea_gguf_get_str(&g, "general.architecture", &str), EA_OK);
    CHECK_STREQ(str, "qwen3moe");
    CHECK_EQ(ea_gguf_get_str(&g, "t.empty", &str), EA_OK);
    CHECK_STREQ(str, "");
    uint32_t u;
    int32_t i;
    int64_t i64;
    uint64_t u64;
    float fl;
    int b;
    CHECK_EQ(ea_gguf_get_u32(&g, "t.u8", &u), EA_OK);
    CHECK_EQ(u, 200);
    CHECK_EQ(ea_gguf_get_i32(&g, "t.i8", &i), EA_OK);
    CHECK_EQ(i, -5);
    CHECK_EQ(ea_gguf_get_u32(&g, "t.u16", &u), EA_OK);
    CHECK_EQ(u, 60000);
    CHECK_EQ(ea_gguf_get_i32(&g, "t.i16", &i), EA_OK);
    CHECK_EQ(i, -30000);
    CHECK_EQ(ea_gguf_get_u32(&g, "t.u32", &u), EA_OK);
    CHECK_EQ(u, 4000000000u);
    CHECK_EQ(ea_gguf_get_i32(&g, "t.u32", &i), EA_ERR_RANGE);  /* does not fit */
    CHECK_EQ(ea_gguf_get_u32(&g, "t.i32", &u), EA_ERR_RANGE);  /* negative */
    CHECK(strstr(ea_errmsg(), "t.i32") && strstr(ea_errmsg(), "mem.gguf"));
    CHECK_EQ(ea_gguf_get_u64(&g, "t.u64", &u64), EA_OK);
    CHECK_EQ(u64, 1ull << 40);
    CHECK_EQ(ea_gguf_get_u32(&g, "t.u64", &u), EA_ERR_RANGE);
    CHECK_EQ(ea_gguf_get_i64(&g, "t.i64", &i64), EA_OK);
    CHECK_EQ(i64, -(1ll << 40));
    CHECK_EQ(ea_gguf_get_f32(&g, "t.f32", &fl), EA_OK);
    CHECK_NEAR(fl, 1.5, 0);
    CHECK_EQ(ea_gguf_get_f32(&g, "t.f64", &fl), EA_OK);
    CHECK_NEAR(fl, 0.25, 0);
    CHECK_EQ(ea_gguf_get_f32(&g, "t.u32", &fl), EA_OK); /* integers convert to float */
    CHECK_EQ(ea_gguf_get_bool(&g, "t.bool", &b), EA_OK);
    CHECK_EQ(b, 1);
    CHECK_EQ(ea_gguf_get_u32(&g, "t.f32", &u), EA_ERR_FORMAT); /* float is not an integer */
    CHECK_EQ(ea_gguf_get_u32(&g, "general.architecture", &u), EA_ERR_FORMAT);
    CHECK_EQ(ea_gguf_get_str(&g, "t.u8", &str), EA_ERR_FORMAT);
    CHECK_EQ(ea_gguf_get_f32(&g, "tokenizer.ggml.tokens", &fl), EA_ERR_FORMAT);
    CHECK_EQ(ea_gguf_get_u32(&g, "no.such.key", &u), EA_ERR_NOT_FOUND);
    CHECK(strstr(ea_errmsg(), "no.such.key") != NULL);
    ea_gguf_deinit(&g);
    free(f.p);
}

TEST(arrays) {
    mf_buf f = {0};
    build(&f, 3, 32);
    ea_gguf g;
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "mem.gguf", &g), EA_OK);
    ea_gguf_type et;
    uint64_t n;
    CHECK_EQ(ea_gguf_get_arr(&g, "tokenizer.ggml.tokens", &et, &n), EA_OK);
    CHECK_EQ(et, EA_GGUF_STRING);
    CHECK_EQ(n, 3);
    int kv = ea_gguf_find_kv(&g, "tokenizer.ggml.tokens");
    const char *s;
    size_t len;
    CHECK_EQ(ea_gguf_arr_str(&g, kv, 0, &s, &len), EA_OK);
    CHECK_EQ(len, 5);
    CHECK(!memcmp(s, "hello", 5));
    CHECK_EQ(ea_gguf_arr_str(&g, kv, 1, &s, &len), EA_OK);
    CHECK_EQ(len, 0);
    CHECK_EQ(ea_gguf_arr_str(&g, kv, 2, &s, &len), EA_OK);
    CHECK_EQ(len, 3);
    CHECK(!memcmp(s, "a\0b", 3));
    CHECK_EQ(ea_gguf_arr_str(&g, kv, 3, &s, &len), EA_ERR_RANGE);
    int64_t v;
    CHECK_EQ(ea_gguf_arr_i64(&g, kv, 0, &v), EA_ERR_FORMAT);
    int tt = ea_gguf_find_kv(&g, "tokenizer.ggml.token_type");
    CHECK_EQ(ea_gguf_arr_i64(&g, tt, 0, &v), EA_OK);
    CHECK_EQ(v, -1);
    CHECK_EQ(ea_gguf_arr_i64(&g, tt, 2, &v), EA_OK);
    CHECK_EQ(v, 1);
    CHECK_EQ(ea_gguf_arr_str(&g, tt, 0, &s, &len), EA_ERR_FORMAT);
    float fv;
    int fa = ea_gguf_find_kv(&g, "t.f32arr");
    CHECK_EQ(ea_gguf_arr_f32(&g, fa, 1, &fv), EA_OK);
    CHECK_NEAR(fv, -2.0, 0);
    CHECK_EQ(ea_gguf_get_arr(&g, "t.emptyarr", &et, &n), EA_OK);
    CHECK_EQ(n, 0);
    CHECK_EQ(ea_gguf_get_arr(&g, "t.u32", &et, &n), EA_ERR_FORMAT);
    CHECK_EQ(ea_gguf_arr_i64(&g, -1, 0, &v), EA_ERR_INVALID_ARG);
    ea_gguf_deinit(&g);
    free(f.p);
}

TEST(tensor_views) {
    for (int align = 32; align <= 256; align *= 8) {
        mf_buf f = {0};
        build(&f, 2, (uint32_t)align); /* version 2 reads the same */
        ea_gguf g;
        CHECK_EQ(ea_gguf_parse(f.p, f.n, "mem.gguf", &g), EA_OK);
        CHECK_EQ(g.version, 2);
        CHECK_EQ(g.alignment, (uint64_t)align);
        CHECK_EQ(g.data_off % (uint64_t)align, 0);
        int c = ea_gguf_find_tensor(&g, "c.3d");
        CHECK(c >= 0);
        ea_tensor t;
        ea_gguf_tensor(&g, c, &t);
        CHECK_EQ(t.n_dims, 3); /* ne = [64, 3, 2] reversed */
        CHECK_EQ(t.shape[0], 2);
        CHECK_EQ(t.shape[1], 3);
        CHECK_EQ(t.shape[2], 64);
        CHECK_EQ(t.nbytes, 2 * 3 * 64 * 4);
        CHECK_EQ(((const uint8_t *)t.data - f.p) % align, 0);
        float *want = mf_fill("c", 2 * 3 * 64, 0);
        CHECK(!memcmp(t.data, want, t.nbytes));
        free(want);
        CHECK_EQ(ea_gguf_find_tensor(&g, "nope"), -1);
        ea_gguf_deinit(&g);
        free(f.p);
    }
}

TEST(dtypes) {
    static const ea_dtype dts[] = {EA_F16, EA_BF16, EA_Q8_0};
    for (int k = 0; k < 3; k++) {
        mf_list l = {0};
        mf_add(&l, "w", 2, 2, 64, 0, mf_fill("w", 128, 0));
        mf_buf kv = {0}, f = {0};
        mf_kv_str(&kv, "general.architecture", "x");
        mf_gguf_build(&f, &kv, 1, &l, dts[k], 32, NULL);
        ea_gguf g;
        CHECK_EQ(ea_gguf_parse(f.p, f.n, "mem.gguf", &g), EA_OK);
        ea_tensor t;
        ea_gguf_tensor(&g, 0, &t);
        CHECK_EQ(t.dtype, dts[k]);
        CHECK_EQ(t.nbytes, ea_dtype_row_bytes(dts[k], 64) * 2);
        float row[64];
        ea_dtypes[t.dtype].to_f32((const uint8_t *)t.data + ea_dtype_row_bytes(dts[k], 64), row, 64);
        CHECK_NEAR(row[5], l.v[0].data[64 + 5], dts[k] == EA_Q8_0 ? 0.01 : 0.004);
        ea_gguf_deinit(&g);
        mf_list_free(&l);
        free(kv.p);
        free(f.p);
    }
    /* Q8_0 rows must be whole blocks: ne[0] = 40 */
    mf_buf f = {0};
    mf_put(&f, "GGUF", 4), mf_u32(&f, 3), mf_u64(&f, 1), mf_u64(&f, 0);
    mf_gstr(&f, "q"), mf_u32(&f, 1), mf_u64(&f, 40), mf_u32(&f, 8), mf_u64(&f, 0);
    mf_zero(&f, 200);
    ea_gguf g;
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "q.gguf", &g), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "tensor 'q'") && strstr(ea_errmsg(), "block"));
    free(f.p);
}

TEST(structural_errors) {
    ea_gguf g;
    mf_buf f = {0};
    /* v1 is unsupported, a byte-swapped version hints big-endian */
    mf_put(&f, "GGUF", 4), mf_u32(&f, 1), mf_u64(&f, 0), mf_u64(&f, 0);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "v1.gguf", &g), EA_ERR_UNSUPPORTED);
    f.n = 4;
    mf_u32(&f, 0x03000000u), mf_u64(&f, 0), mf_u64(&f, 0);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "be.gguf", &g), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "big-endian") != NULL);
    /* nested arrays */
    f.n = 0;
    mf_put(&f, "GGUF", 4), mf_u32(&f, 3), mf_u64(&f, 0), mf_u64(&f, 1);
    mf_gstr(&f, "k"), mf_u32(&f, 9), mf_u32(&f, 9), mf_u64(&f, 0);
    mf_zero(&f, 16);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "nest.gguf", &g), EA_ERR_UNSUPPORTED);
    CHECK(strstr(ea_errmsg(), "'k'") != NULL);
    /* duplicate key */
    f.n = 0;
    mf_put(&f, "GGUF", 4), mf_u32(&f, 3), mf_u64(&f, 0), mf_u64(&f, 2);
    mf_kv_u32(&f, "k", 1), mf_kv_u32(&f, "k", 2);
    mf_zero(&f, 16);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "dup.gguf", &g), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "'k'") && strstr(ea_errmsg(), "twice"));
    /* unknown value type */
    f.n = 0;
    mf_put(&f, "GGUF", 4), mf_u32(&f, 3), mf_u64(&f, 0), mf_u64(&f, 1);
    mf_gstr(&f, "k"), mf_u32(&f, 13), mf_zero(&f, 16);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "type.gguf", &g), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "unknown value type 13") != NULL);
    /* duplicate tensor name */
    f.n = 0;
    mf_put(&f, "GGUF", 4), mf_u32(&f, 3), mf_u64(&f, 2), mf_u64(&f, 0);
    mf_gstr(&f, "t"), mf_u32(&f, 1), mf_u64(&f, 8), mf_u32(&f, 0), mf_u64(&f, 0);
    mf_gstr(&f, "t"), mf_u32(&f, 1), mf_u64(&f, 8), mf_u32(&f, 0), mf_u64(&f, 32);
    while (f.n % 32) mf_zero(&f, 1);
    mf_zero(&f, 64);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "tdup.gguf", &g), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "tensor 't'") && strstr(ea_errmsg(), "twice"));
    /* empty file, zero-dim */
    CHECK_EQ(ea_gguf_parse(f.p, 0, "empty.gguf", &g), EA_ERR_FORMAT);
    f.n = 0;
    mf_put(&f, "GGUF", 4), mf_u32(&f, 3), mf_u64(&f, 1), mf_u64(&f, 0);
    mf_gstr(&f, "z"), mf_u32(&f, 1), mf_u64(&f, 0), mf_u32(&f, 0), mf_u64(&f, 0);
    mf_zero(&f, 64);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "zero.gguf", &g), EA_ERR_FORMAT);
    CHECK(strstr(ea_errmsg(), "ne[0] = 0") != NULL);
    /* a file with no tensors and no padding is fine */
    f.n = 0;
    mf_put(&f, "GGUF", 4), mf_u32(&f, 3), mf_u64(&f, 0), mf_u64(&f, 1);
    mf_kv_u32(&f, "k", 7);
    CHECK_EQ(ea_gguf_parse(f.p, f.n, "kvonly.gguf", &g), EA_OK);
    ea_gguf_deinit(&g);
    free(f.p);
}

TEST(every_truncation_fails_cleanly) {
    mf_buf f = {0};
    build(&f, 3, 32);
    int passed = 0;
    for (size_t n = 0; n < f.n; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, f.p, n);
        ea_gguf g;
        ea_status s = ea_gguf_parse(cut, n, "cut.gguf", &g);
        free(cut);
        if (s == EA_OK) {
            ea_gguf_deinit(&g);
            passed++;
            continue;
        }
        if (!strstr(ea_errmsg(), "cut.gguf")) FAIL_("message without file name: %s", ea_errmsg());
    }
    CHECK_EQ(passed, 0);
    free(f.p);
}

TEST(byte_flips_never_crash) {
    mf_buf f = {0};
    build(&f, 3, 32);
    uint64_t h = 99;
    int ok = 0, bad = 0;
    for (int it = 0; it < 5000; it++) {
        uint8_t *c = malloc(f.n);
        memcpy(c, f.p, f.n);
        for (int k = 0; k < 2; k++) {
            h = h * 6364136223846793005ull + 1442695040888963407ull;
            c[(h >> 33) % f.n] ^= (uint8_t)(1u << ((h >> 20) & 7));
        }
        ea_gguf g;
        if (ea_gguf_parse(c, f.n, "flip.gguf", &g) == EA_OK) {
            ok++;
            for (uint64_t i = 0; i < g.n_tensors; i++) {
                ea_tensor t;
                ea_gguf_tensor(&g, (int)i, &t);
                if ((const uint8_t *)t.data + t.nbytes > c + f.n) bad++;
            }
            for (uint64_t i = 0; i < g.n_kv; i++) { /* read every array element */
                if (g.kv[i].type != EA_GGUF_ARRAY) continue;
                for (uint64_t j = 0; j < g.kv[i].n && j < 100; j++) {
                    const char *s;
                    size_t len;
                    int64_t v;
                    if (ea_gguf_arr_str(&g, (int)i, j, &s, &len) == EA_OK && s + len > (const char *)c + f.n) bad++;
                    (void)ea_gguf_arr_i64(&g, (int)i, j, &v);
                }
            }
            ea_gguf_deinit(&g);
        }
        free(c);
    }
    fprintf(stderr, "  %d of 5000 corrupted files still valid\n", ok);
    free(f.p);
    CHECK_EQ(bad, 0);
}

TEST(open_file) {
    mf_buf f = {0};
    build(&f, 3, 32);
    char p[700];
    snprintf(p, sizeof p, "%s/x.gguf", g_dir);
    CHECK_EQ(mf_write(p, f.p, f.n), 0);
    ea_gguf *g;
    CHECK_EQ(ea_gguf_open(p, &g), EA_OK);
    CHECK_STREQ(g->path, p);
    CHECK_EQ(g->n_tensors, 3);
    ea_gguf_close(g);
    ea_gguf_close(NULL);
    snprintf(p, sizeof p, "%s/missing.gguf", g_dir);
    CHECK_EQ(ea_gguf_open(p, &g), EA_ERR_IO);
    CHECK(strstr(ea_errmsg(), "missing.gguf") != NULL);
    free(f.p);
}

TEST(names) {
    CHECK_STREQ(ea_ggml_type_name(30), "BF16");
    CHECK_STREQ(ea_ggml_type_name(12), "Q4_K");
    CHECK_STREQ(ea_ggml_type_name(1000), "?");
    CHECK_STREQ(ea_gguf_type_name(EA_GGUF_STRING), "string");
}

/* The fuzz seeds named valid_* must be valid, the bad_* ones must fail (else the corpus lies). */
TEST(fuzz_seeds_are_what_they_say) {
    const char *src = getenv("EA_SRC");
    if (!src) src = ".";
    static const char *const seeds[] = {"valid_qwen3moe_tiny", "valid_v2_align64", "valid_dtypes", "bad_magic",
                                        "bad_truncated", "bad_strlen", "bad_align", "bad_nested"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/tests/fuzz/corpus/fuzz_gguf/%s", src, seeds[i]);
        ea_gguf *g = NULL;
        ea_status s = ea_gguf_open(p, &g);
        int want_ok = seeds[i][0] == 'v';
        if ((s == EA_OK) != want_ok) FAIL_("%s: %s", seeds[i], s ? ea_errmsg() : "parsed");
        if (g && !strcmp(seeds[i], "valid_qwen3moe_tiny")) {
            ea_model_config c;
            ea_status cs = ea_config_from_gguf(g, &c);
            if (cs) fprintf(stderr, "  %s\n", ea_errmsg());
            CHECK_EQ(cs, EA_OK);
            CHECK_EQ(c.arch, EA_ARCH_QWEN3_MOE);
            CHECK_EQ(c.vocab_size, 16);
            CHECK_EQ(c.eos_token_ids[0], 2);
        }
        if (g && !strcmp(seeds[i], "valid_dtypes")) {
            ea_tensor t;
            ea_gguf_tensor(g, ea_gguf_find_tensor(g, "q8"), &t);
            CHECK_EQ(t.dtype, EA_Q8_0);
        }
        ea_gguf_close(g);
    }
    ea_model *m;
    char p[1024];
    snprintf(p, sizeof p, "%s/tests/fuzz/corpus/fuzz_gguf/valid_qwen3moe_tiny", src);
    ea_status s = ea_model_open(p, &m);
    if (s) fprintf(stderr, "  %s\n", ea_errmsg());
    CHECK_EQ(s, EA_OK);
    CHECK_EQ(m->n_unused, 0);
    ea_model_close(m);
}

int main(void) {
    const char *d = mf_tmpdir();
    if (!d) {
        fprintf(stderr, "no temp dir: %s\n", strerror(errno));
        return 1;
    }
    snprintf(g_dir, sizeof g_dir, "%s", d);
    RUN(kv_getters);
    RUN(arrays);
    RUN(tensor_views);
    RUN(dtypes);
    RUN(structural_errors);
    RUN(every_truncation_fails_cleanly);
    RUN(byte_flips_never_crash);
    RUN(open_file);
    RUN(names);
    RUN(fuzz_seeds_are_what_they_say);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return TEST_SUMMARY();
}
