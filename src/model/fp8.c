/*
 * fp8.c — see fp8.h. One pass over the input set: declare the output
 * tensors (FP8 weights as BF16, scales left out, the rest as they are),
 * then stream each one's bytes into the writer, dequantizing a row at a
 * time.
 */
#include "model/fp8.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/util.h"
#include "model/safetensors.h"
#include "model/st_write.h"
#include "tensor/dtype.h"

#define SCALE_SUFFIX "_scale_inv"

float ea_fp8_e4m3_to_f32(uint8_t b) {
    int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    float v = e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m / 8.0f, -6);
    return sign ? -v : v;
}

/* The block size of config.json's quantization_config (OUT: b[2]), or an error
 * saying why this is not an FP8 checkpoint we read. */
static ea_status block_size(const char *cfg_path, const json_t *cfg, int64_t b[2]) {
    const json_t *q = json_object_get(cfg, "quantization_config");
    const char *method = json_string_value(json_object_get(q, "quant_method"));
    if (!method || strcmp(method, "fp8") != 0)
        return ea_err(EA_ERR_INVALID_ARG, "%s: quantization_config.quant_method is %s%s%s, not \"fp8\": not an FP8 "
                      "checkpoint", cfg_path, method ? "\"" : "", method ? method : "missing", method ? "\"" : "");
    const char *fmt = json_string_value(json_object_get(q, "fmt"));
    if (fmt && strcmp(fmt, "e4m3") != 0)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: quantization_config.fmt \"%s\" is not supported (e4m3)", cfg_path, fmt);
    const json_t *bs = json_object_get(q, "weight_block_size");
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_array_get(bs, (size_t)i);
        b[i] = json_is_integer(v) ? json_integer_value(v) : 0;
        if (json_array_size(bs) != 2 || b[i] <= 0 || b[i] > (1 << 20))
            return ea_err(EA_ERR_FORMAT, "%s: quantization_config.weight_block_size must be [rows, cols] of positive "
                          "integers", cfg_path);
    }
    return EA_OK;
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* The refs index of FP8 weight i's scale (OUT: *k), after checking both. */
static ea_status scale_of(const ea_st_set *s, int i, const int64_t b[2], int *k) {
    const ea_st_info *w = ea_st_set_info(s, i);
    char name[1024];
    snprintf(name, sizeof name, "%s" SCALE_SUFFIX, w->name);
    if (w->n_dims != 2)
        return ea_err(EA_ERR_UNSUPPORTED, "tensor '%s': F8_E4M3 of %d dimensions (block scales need a matrix)",
                      w->name, w->n_dims);
    *k = ea_st_set_find(s, name);
    if (*k < 0) return ea_err(EA_ERR_FORMAT, "tensor '%s': F8_E4M3 weight without its scale '%s'", w->name, name);
    const ea_st_info *sc = ea_st_set_info(s, *k);
    int64_t want[2] = {(w->shape[0] + b[0] - 1) / b[0], (w->shape[1] + b[1] - 1) / b[1]};
    if (sc->f8 || (sc->dtype != EA_F32 && sc->dtype != EA_BF16) || sc->n_dims != 2 || sc->shape[0] != want[0] ||
        sc->shape[1] != want[1])
        return ea_err(EA_ERR_FORMAT,
                      "tensor '%s': must be F32 or BF16 of shape [%lld, %lld] (weight [%lld, %lld] in blocks of "
                      "[%lld, %lld])",
                      name, (long long)want[0], (long long)want[1], (long long)w->shape[0], (long long)w->shape[1],
                      (long long)b[0], (long long)b[1]);
    return EA_OK;
}

/* Write FP8 weight i dequantized with scale k, a row at a time. */
static ea_status write_fp8(const ea_st_set *s, int i, int k, const int64_t b[2], ea_st_writer *wr, int64_t *n_nan) {
    ea_tensor w, sc;
    ea_st_set_tensor(s, i, &w, NULL);
    ea_st_set_tensor(s, k, &sc, NULL);
    int64_t rows = w.shape[0], cols = w.shape[1], sc_cols = sc.shape[1];
    float *srow = ea_malloc((size_t)(sc_cols ? sc_cols : 1) * sizeof *srow), tab[256];
    uint16_t *out = ea_malloc((size_t)(cols ? cols : 1) * sizeof *out);
    ea_status st = srow && out ? EA_OK : ea_err(EA_ERR_NOMEM, "%s", w.name);
    for (int v = 0; v < 256; v++) tab[v] = ea_fp8_e4m3_to_f32((uint8_t)v);
    const uint8_t *q = w.data;
    for (int64_t r = 0; r < rows && st == EA_OK; r++) {
        if (r % b[0] == 0) /* the scales of this block row, as f32 */
            ea_dtypes[sc.dtype].to_f32((const uint8_t *)sc.data + (size_t)(r / b[0]) * (size_t)sc_cols *
                                                                     (size_t)ea_dtypes[sc.dtype].block_bytes,
                                       srow, (size_t)sc_cols);
        for (int64_t c = 0; c < cols; c++) {
            uint8_t x = q[(size_t)r * (size_t)cols + (size_t)c];
            *n_nan += (x & 0x7f) == 0x7f;
            out[c] = ea_f32_to_bf16(tab[x] * srow[c / b[1]]);
        }
        st = ea_st_writer_write(wr, out, (size_t)cols * sizeof *out);
    }
    ea_free(srow);
    ea_free(out);
    return st;
}

/* Copy the directory's other files (not weights, not config.json). */
static ea_status copy_others(const char *in, const char *out, int *n) {
    DIR *d = opendir(in);
    if (!d) return ea_err(EA_ERR_IO, "%s: cannot list: %s", in, strerror(errno));
    ea_status st = EA_OK;
    struct dirent *e;
    while (st == EA_OK && (e = readdir(d))) {
        const char *nm = e->d_name;
        char from[4096], to[4096];
        ea_path_join(from, sizeof from, in, nm);
        if (nm[0] == '.' || ea_is_dir(from) || ends_with(nm, ".safetensors") ||
            !strcmp(nm, "model.safetensors.index.json") || !strcmp(nm, "config.json"))
            continue;
        char *data = NULL;
        size_t len = 0;
        ea_path_join(to, sizeof to, out, nm);
        st = ea_read_file(from, &data, &len);
        if (st == EA_OK) st = ea_write_file(to, data, len);
        ea_free(data);
        (*n)++;
    }
    closedir(d);
    return st;
}

static ea_status prepare_out(const char *out) {
    if (mkdir(out, 0777) != 0 && errno != EEXIST) return ea_err(EA_ERR_IO, "%s: cannot create: %s", out, strerror(errno));
    char p[4096];
    ea_path_join(p, sizeof p, out, "config.json");
    int taken = ea_file_exists(p);
    ea_path_join(p, sizeof p, out, "model.safetensors");
    taken |= ea_file_exists(p);
    ea_path_join(p, sizeof p, out, "model.safetensors.index.json");
    taken |= ea_file_exists(p);
    return taken ? ea_err(EA_ERR_INVALID_ARG, "%s: already holds a model (config.json or weights); give a new directory",
                          out)
                 : EA_OK;
}

ea_status ea_fp8_convert(const char *in_dir, const char *out_dir, int n_shards, ea_fp8_stats *stats) {
    memset(stats, 0, sizeof *stats);
    char cfg_path[4096], p[4096];
    ea_path_join(cfg_path, sizeof cfg_path, in_dir, "config.json");
    json_t *cfg;
    EA_TRY(ea_json_load_file(cfg_path, &cfg));
    int64_t b[2];
    ea_status st = block_size(cfg_path, cfg, b);
    ea_st_set *s = NULL;
    ea_st_writer *wr = NULL;
    int *scale = NULL; /* per ref: its scale's index (FP8 weights), -2 (a scale, left out), -1 (copied) */
    if (st == EA_OK) st = ea_st_set_open(in_dir, &s);
    if (st == EA_OK && !(scale = ea_malloc((size_t)(s->n_refs ? s->n_refs : 1) * sizeof *scale)))
        st = ea_err(EA_ERR_NOMEM, "%s", in_dir);
    for (int i = 0; st == EA_OK && i < s->n_refs; i++) scale[i] = -1;
    for (int i = 0; st == EA_OK && i < s->n_refs; i++) {
        if (!ea_st_set_info(s, i)->f8) continue;
        int k = -1;
        if ((st = scale_of(s, i, b, &k)) == EA_OK) {
            scale[i] = k;
            scale[k] = -2;
        }
    }
    if (st != EA_OK && s) ea_err_wrap(st, "%s: ", in_dir);
    for (int i = 0; st == EA_OK && i < s->n_refs; i++) { /* a scale nobody uses is a layout we do not know */
        const char *nm = ea_st_set_info(s, i)->name;
        if (scale[i] == -1 && ends_with(nm, SCALE_SUFFIX))
            st = ea_err(EA_ERR_FORMAT, "%s: %s: a scale without an F8_E4M3 weight", in_dir, nm);
    }
    if (st == EA_OK) st = prepare_out(out_dir); /* only once the input is known good */
    if (st == EA_OK) st = ea_st_writer_create(out_dir, n_shards, &wr);
    for (int i = 0; st == EA_OK && i < s->n_refs; i++) {
        const ea_st_info *t = ea_st_set_info(s, i);
        if (scale[i] == -2) continue;
        st = ea_st_writer_add(wr, t->name, scale[i] >= 0 ? EA_BF16 : t->dtype, t->n_dims, t->shape);
    }
    if (st == EA_OK) st = ea_st_writer_begin(wr);
    for (int i = 0; st == EA_OK && i < s->n_refs; i++) {
        if (scale[i] == -2) continue;
        if (scale[i] >= 0) {
            st = write_fp8(s, i, scale[i], b, wr, &stats->n_nan);
            stats->n_fp8++;
        } else {
            ea_tensor t;
            ea_st_set_tensor(s, i, &t, NULL);
            st = ea_st_writer_write(wr, t.data, t.nbytes);
            stats->n_copied++;
        }
    }
    if (st == EA_OK) st = ea_st_writer_finish(wr);
    if (st == EA_OK) { /* config.json without quantization_config, written last: a half-written copy has none */
        json_object_del(cfg, "quantization_config");
        ea_path_join(p, sizeof p, out_dir, "config.json");
        char *txt = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        st = txt ? ea_write_file(p, txt, strlen(txt)) : ea_err(EA_ERR_NOMEM, "config.json");
        free(txt);
    }
    if (st == EA_OK) st = copy_others(in_dir, out_dir, &stats->n_files);
    ea_st_writer_destroy(wr);
    ea_st_set_close(s);
    ea_free(scale);
    json_decref(cfg);
    return st;
}
