/*
 * safetensors.c — parse and validate safetensors files and directories.
 * Format and checks: see safetensors.h.
 *
 * Invariants once ea_st_parse returns EA_OK: every ea_st_info has a supported
 * dtype, 0 <= begin <= end <= size - data_off, end - begin == nelem * esize,
 * names are unique, and the non-empty [begin, end) ranges are disjoint.
 * Nothing past the header is read here: tensor bytes stay untouched (and, for
 * a file mapping, unresident) until a caller reads the view.
 */
#include "model/safetensors.h"

#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct {
    const char *name;
    int bytes;
    int dtype; /* ea_dtype, or -1 when eaas does not compute with it */
} ea__st_dtype;

static const ea__st_dtype ea__st_dtypes[] = {
    {"F32", 4, EA_F32},   {"F16", 2, EA_F16},    {"BF16", 2, EA_BF16},   {"F64", 8, -1},
    {"I64", 8, -1},       {"I32", 4, -1},        {"I16", 2, -1},         {"I8", 1, -1},
    {"U64", 8, -1},       {"U32", 4, -1},        {"U16", 2, -1},         {"U8", 1, -1},
    {"BOOL", 1, -1},      {"F8_E4M3", 1, -1},    {"F8_E5M2", 1, -1},     {"F8_E8M0", 1, -1},
};

int ea_st_dtype_size(const char *s, ea_dtype *dt, int *supported) {
    for (size_t i = 0; i < sizeof ea__st_dtypes / sizeof ea__st_dtypes[0]; i++) {
        if (strcmp(s, ea__st_dtypes[i].name) == 0) {
            if (supported) *supported = ea__st_dtypes[i].dtype >= 0;
            if (dt && ea__st_dtypes[i].dtype >= 0) *dt = (ea_dtype)ea__st_dtypes[i].dtype;
            return ea__st_dtypes[i].bytes;
        }
    }
    if (supported) *supported = 0;
    return 0;
}

static uint64_t ea__le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A JSON integer >= 0, as u64. */
static int ea__json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return 0;
    json_int_t x = json_integer_value(v);
    if (x < 0) return 0;
    *out = (uint64_t)x;
    return 1;
}

static ea_status ea__st_entry(ea_st_file *f, const char *key, json_t *val, ea_st_info *ti) {
    const char *fp = f->path;
    if (!json_is_object(val))
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': header entry is not a JSON object", fp, key);
    json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
           *jo = json_object_get(val, "data_offsets");
    if (!json_is_string(jd))
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': field 'dtype' missing or not a string", fp, key);
    if (!json_is_array(js))
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': field 'shape' missing or not an array", fp, key);
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': field 'data_offsets' is not an array [begin, end]", fp, key);
    const char *ds = json_string_value(jd);
    int supported = 0;
    ea_dtype dt = EA_F32;
    int esize = ea_st_dtype_size(ds, &dt, &supported);
    if (esize == 0) return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", fp, key, ds);
    ti->f8 = !strcmp(ds, "F8_E4M3");
    if (!supported && !ti->f8)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (F32, F16, BF16 are)", fp,
                      key, ds);
    size_t nd = json_array_size(js);
    if (nd > EA_MAX_DIMS)
        return ea_err(EA_ERR_UNSUPPORTED, "%s: tensor '%s': %zu dimensions (at most %d supported)", fp, key, nd,
                      EA_MAX_DIMS);
    uint64_t nelem = 1;
    ti->n_dims = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!ea__json_u64(json_array_get(js, i), &d) || d > (uint64_t)INT64_MAX)
            return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer", fp, key, i);
        ti->shape[i] = (int64_t)d;
        size_t p;
        if (!ea_mul_ok((size_t)nelem, (size_t)d, &p) || p > (uint64_t)INT64_MAX)
            return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': shape product overflows", fp, key);
        nelem = p;
    }
    uint64_t b, e;
    if (!ea__json_u64(json_array_get(jo, 0), &b) || !ea__json_u64(json_array_get(jo, 1), &e))
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", fp, key);
    if (e < b)
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) end before begin", fp, key,
                      (unsigned long long)b, (unsigned long long)e);
    size_t nbytes;
    if (!ea_mul_ok((size_t)nelem, (size_t)esize, &nbytes))
        return ea_err(EA_ERR_FORMAT, "%s: tensor '%s': byte size overflows", fp, key);
    if (e - b != nbytes)
        return ea_err(EA_ERR_FORMAT,
                      "%s: tensor '%s': data_offsets [%llu, %llu) span %llu bytes but shape x %s needs %zu", fp,
                      key, (unsigned long long)b, (unsigned long long)e, (unsigned long long)(e - b), ds, nbytes);
    uint64_t avail = f->size - f->data_off;
    if (e > avail)
        return ea_err(EA_ERR_FORMAT,
                      "%s: tensor '%s': data_offsets end %llu (file offset %llu) is past the end of the file "
                      "(data section %llu bytes, file %zu bytes)",
                      fp, key, (unsigned long long)e, (unsigned long long)(f->data_off + e),
                      (unsigned long long)avail, f->size);
    ti->dtype = ti->f8 ? EA_N_DTYPES : dt;
    ti->begin = b;
    ti->end = e;
    if (e > b && (f->data_off + b) % (uint64_t)esize) f->n_misaligned++;
    return EA_OK;
}

static const ea_st_info *ea__sort_base;
static int ea__cmp_begin(const void *a, const void *b) {
    const ea_st_info *x = &ea__sort_base[*(const int *)a], *y = &ea__sort_base[*(const int *)b];
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Overlaps are errors; holes are counted for inspect. */
static ea_status ea__st_check_overlap(ea_st_file *f) {
    if (f->n_tensors == 0) {
        f->gap_bytes = f->size - f->data_off;
        return EA_OK;
    }
    int *ord = ea_malloc((size_t)f->n_tensors * sizeof *ord);
    if (!ord) return ea_err(EA_ERR_NOMEM, "%s: no memory", f->path);
    for (int i = 0; i < f->n_tensors; i++) ord[i] = i;
    /* qsort has no context argument in C11; the static is set and used only here,
     * under no lock: this parse runs on one thread, and the comparison reads only. */
    ea__sort_base = f->tensors;
    qsort(ord, (size_t)f->n_tensors, sizeof *ord, ea__cmp_begin);
    ea__sort_base = NULL;
    uint64_t covered = 0;
    int prev = -1;
    ea_status s = EA_OK;
    for (int k = 0; k < f->n_tensors; k++) {
        const ea_st_info *t = &f->tensors[ord[k]];
        if (t->begin == t->end) continue;
        if (prev >= 0 && t->begin < f->tensors[prev].end) {
            s = ea_err(EA_ERR_FORMAT, "%s: tensor '%s' [%llu, %llu) overlaps tensor '%s' [%llu, %llu)", f->path,
                       t->name, (unsigned long long)t->begin, (unsigned long long)t->end, f->tensors[prev].name,
                       (unsigned long long)f->tensors[prev].begin, (unsigned long long)f->tensors[prev].end);
            break;
        }
        covered += t->end - t->begin;
        prev = ord[k];
    }
    ea_free(ord);
    f->gap_bytes = (f->size - f->data_off) - covered;
    return s;
}

ea_status ea_st_parse(const uint8_t *data, size_t size, const char *what, ea_st_file *f) {
    memset(f, 0, sizeof *f);
    f->path = ea_strdup(what);
    if (!f->path) return ea_err(EA_ERR_NOMEM, "%s: no memory", what);
    f->base = data;
    f->size = size;
    if (size < 8) {
        ea_st_deinit(f);
        return ea_err(EA_ERR_FORMAT, "%s: file is %zu bytes, shorter than the 8-byte header length", what, size);
    }
    uint64_t n = ea__le64(data);
    if (n > size - 8) {
        ea_st_deinit(f);
        return ea_err(EA_ERR_FORMAT, "%s: header length %llu at offset 0 is past the end of the file (%zu bytes)",
                      what, (unsigned long long)n, size);
    }
    if (n > EA_ST_MAX_HEADER) {
        ea_st_deinit(f);
        return ea_err(EA_ERR_FORMAT, "%s: header length %llu exceeds the %llu-byte limit", what,
                      (unsigned long long)n, (unsigned long long)EA_ST_MAX_HEADER);
    }
    if (n < 2 || data[8] != '{') {
        ea_st_deinit(f);
        return ea_err(EA_ERR_FORMAT, "%s: header at offset 8 is not a JSON object", what);
    }
    f->data_off = 8 + n;
    json_error_t je;
    json_t *root = json_loadb((const char *)data + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        ea_st_deinit(f);
        return ea_err(EA_ERR_FORMAT, "%s: header JSON invalid at byte %d (file offset %d): %s", what, je.position,
                      8 + je.position, je.text);
    }
    ea_status s = EA_OK;
    if (!json_is_object(root)) {
        s = ea_err(EA_ERR_FORMAT, "%s: header at offset 8 is not a JSON object", what);
        goto done;
    }
    size_t cnt = json_object_size(root);
    if (cnt > 10000000) {
        s = ea_err(EA_ERR_FORMAT, "%s: header has %zu entries", what, cnt);
        goto done;
    }
    f->tensors = ea_calloc(cnt ? cnt : 1, sizeof *f->tensors);
    if (!f->tensors) {
        s = ea_err(EA_ERR_NOMEM, "%s: no memory for %zu tensors", what, cnt);
        goto done;
    }
    if ((s = ea__name_map_init(&f->names, cnt)) != EA_OK) goto done;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                s = ea_err(EA_ERR_FORMAT, "%s: field '__metadata__' is not an object", what);
                goto done;
            }
            continue;
        }
        ea_st_info *ti = &f->tensors[f->n_tensors];
        if ((s = ea__st_entry(f, key, val, ti)) != EA_OK) goto done;
        ti->name = ea_strdup(key);
        if (!ti->name) {
            s = ea_err(EA_ERR_NOMEM, "%s: no memory", what);
            goto done;
        }
        f->n_tensors++;
        if (ea__name_map_put(&f->names, ti->name, f->n_tensors - 1, NULL) != 0) {
            s = ea_err(EA_ERR_FORMAT, "%s: tensor '%s' appears twice", what, key);
            goto done;
        }
    }
    s = ea__st_check_overlap(f);
done:
    json_decref(root);
    if (s != EA_OK) ea_st_deinit(f);
    return s;
}

void ea_st_deinit(ea_st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_tensors; i++) ea_free(f->tensors[i].name);
    ea_free(f->tensors);
    ea__name_map_deinit(&f->names);
    ea_free(f->path);
    ea_mmap_close(&f->map);
    memset(f, 0, sizeof *f);
}

ea_status ea_st_open(const char *path, ea_st_file **out) {
    *out = NULL;
    ea_st_file *f = ea_calloc(1, sizeof *f);
    if (!f) return ea_err(EA_ERR_NOMEM, "%s: no memory", path);
    ea_mmap m;
    ea_status s = ea_mmap_open(path, &m);
    if (s != EA_OK) {
        ea_free(f);
        return s;
    }
    s = ea_st_parse(m.data, m.size, path, f);
    if (s != EA_OK) {
        ea_mmap_close(&m);
        ea_free(f);
        return s;
    }
    f->map = m;
    *out = f;
    return EA_OK;
}

void ea_st_close(ea_st_file *f) {
    if (!f) return;
    ea_st_deinit(f);
    ea_free(f);
}

int ea_st_find(const ea_st_file *f, const char *name) { return ea__name_map_get(&f->names, name); }

void ea_st_tensor(const ea_st_file *f, int i, ea_tensor *t) {
    EA_ASSERT(i >= 0 && i < f->n_tensors);
    const ea_st_info *ti = &f->tensors[i];
    memset(t, 0, sizeof *t);
    t->name = ti->name;
    t->dtype = ti->dtype;
    t->n_dims = ti->n_dims;
    for (int d = 0; d < ti->n_dims; d++) t->shape[d] = ti->shape[d];
    t->data = f->base + f->data_off + ti->begin;
    t->nbytes = (size_t)(ti->end - ti->begin);
}

/* ---- directories ---- */

static int ea__cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Shard file names from the index (unique, sorted) or *.safetensors in the directory. */
static ea_status ea__st_list(const char *dir, json_t *wmap, const char *ipath, char ***names, int *n) {
    *names = NULL;
    *n = 0;
    size_t cap = 16, cnt = 0;
    char **v = ea_malloc(cap * sizeof *v);
    if (!v) return ea_err(EA_ERR_NOMEM, "%s: no memory", dir);
    ea_status s = EA_OK;
    if (wmap) {
        const char *key;
        json_t *val;
        json_object_foreach(wmap, key, val) {
            if (!json_is_string(val)) {
                s = ea_err(EA_ERR_FORMAT, "%s: weight_map['%s'] is not a file name string", ipath, key);
                break;
            }
            const char *fn = json_string_value(val);
            if (!fn[0] || strchr(fn, '/') || strcmp(fn, "..") == 0 || strcmp(fn, ".") == 0) {
                s = ea_err(EA_ERR_FORMAT, "%s: weight_map['%s'] = '%s' is not a file name in the directory", ipath,
                           key, fn);
                break;
            }
            int seen = 0;
            for (size_t i = 0; i < cnt && !seen; i++) seen = strcmp(v[i], fn) == 0;
            if (seen) continue;
            if (ea_grow(&v, &cap, cnt + 1, sizeof *v, 16)) { s = ea_err(EA_ERR_NOMEM, "%s: no memory", dir); break; }
            if (!(v[cnt] = ea_strdup(fn))) { s = ea_err(EA_ERR_NOMEM, "%s: no memory", dir); break; }
            cnt++;
        }
    } else {
        DIR *d = opendir(dir);
        if (!d) {
            ea_free(v);
            return ea_err(EA_ERR_IO, "%s: cannot open directory", dir);
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l < 13 || strcmp(e->d_name + l - 12, ".safetensors") != 0 || e->d_name[0] == '.') continue;
            if (ea_grow(&v, &cap, cnt + 1, sizeof *v, 16)) { s = ea_err(EA_ERR_NOMEM, "%s: no memory", dir); break; }
            if (!(v[cnt] = ea_strdup(e->d_name))) { s = ea_err(EA_ERR_NOMEM, "%s: no memory", dir); break; }
            cnt++;
        }
        closedir(d);
        if (s == EA_OK && cnt == 0)
            s = ea_err(EA_ERR_NOT_FOUND, "%s: no model.safetensors, model.safetensors.index.json or *.safetensors",
                       dir);
    }
    if (s != EA_OK) {
        for (size_t i = 0; i < cnt; i++) ea_free(v[i]);
        ea_free(v);
        return s;
    }
    qsort(v, cnt, sizeof *v, ea__cmp_str);
    *names = v;
    *n = (int)cnt;
    return EA_OK;
}

ea_status ea_st_set_open(const char *dir, ea_st_set **out) {
    *out = NULL;
    ea_st_set *s = ea_calloc(1, sizeof *s);
    if (!s || !(s->dir = ea_strdup(dir))) {
        ea_free(s);
        return ea_err(EA_ERR_NOMEM, "%s: no memory", dir);
    }
    char ipath[4096], path[4096];
    ea_path_join(ipath, sizeof ipath, dir, "model.safetensors.index.json");
    json_t *index = NULL, *wmap = NULL;
    char **names = NULL;
    int n_names = 0;
    ea_status st = EA_OK;
    if (ea_file_exists(ipath)) {
        if ((st = ea_json_load_file(ipath, &index)) != EA_OK) goto fail;
        wmap = json_object_get(index, "weight_map");
        if (!json_is_object(wmap)) {
            st = ea_err(EA_ERR_FORMAT, "%s: field 'weight_map' missing or not an object", ipath);
            goto fail;
        }
        s->indexed = 1;
        st = ea__st_list(dir, wmap, ipath, &names, &n_names);
    } else {
        ea_path_join(path, sizeof path, dir, "model.safetensors");
        if (ea_file_exists(path)) {
            names = ea_malloc(sizeof *names);
            if (!names || !(names[0] = ea_strdup("model.safetensors"))) {
                ea_free(names);
                names = NULL;
                st = ea_err(EA_ERR_NOMEM, "%s: no memory", dir);
            } else {
                n_names = 1;
            }
        } else {
            st = ea__st_list(dir, NULL, NULL, &names, &n_names);
        }
    }
    if (st != EA_OK) goto fail;
    s->files = ea_calloc((size_t)n_names, sizeof *s->files);
    if (!s->files) {
        st = ea_err(EA_ERR_NOMEM, "%s: no memory", dir);
        goto fail;
    }
    size_t total = 0;
    for (int i = 0; i < n_names; i++) {
        ea_path_join(path, sizeof path, dir, names[i]);
        if (!ea_file_exists(path)) {
            st = ea_err(EA_ERR_NOT_FOUND, "%s: names shard '%s', which does not exist", ipath, names[i]);
            goto fail;
        }
        if ((st = ea_st_open(path, &s->files[i])) != EA_OK) goto fail;
        s->n_files++;
        total += (size_t)s->files[i]->n_tensors;
    }
    s->refs = ea_calloc(total ? total : 1, sizeof *s->refs);
    if (!s->refs) {
        st = ea_err(EA_ERR_NOMEM, "%s: no memory", dir);
        goto fail;
    }
    if ((st = ea__name_map_init(&s->names, total)) != EA_OK) goto fail;
    for (int fi = 0; fi < s->n_files; fi++) {
        const ea_st_file *f = s->files[fi];
        for (int ti = 0; ti < f->n_tensors; ti++) {
            int old = -1;
            s->refs[s->n_refs].file = fi;
            s->refs[s->n_refs].index = ti;
            if (ea__name_map_put(&s->names, f->tensors[ti].name, s->n_refs, &old) != 0) {
                st = ea_err(EA_ERR_FORMAT, "%s: tensor '%s' is also in %s", f->path, f->tensors[ti].name,
                            s->files[s->refs[old].file]->path);
                goto fail;
            }
            s->n_refs++;
        }
    }
    if (wmap) {
        const char *key;
        json_t *val;
        json_object_foreach(wmap, key, val) {
            const char *fn = json_string_value(val);
            int r = ea__name_map_get(&s->names, key);
            const char *holder = r >= 0 ? s->files[s->refs[r].file]->path : NULL;
            ea_path_join(path, sizeof path, dir, fn);
            if (r < 0 || strcmp(holder, path) != 0) {
                st = ea_err(EA_ERR_NOT_FOUND, "%s: weight_map names tensor '%s' in shard '%s', which does not hold it",
                            ipath, key, fn);
                goto fail;
            }
        }
    }
    for (int i = 0; i < n_names; i++) ea_free(names[i]);
    ea_free(names);
    json_decref(index);
    *out = s;
    return EA_OK;
fail:
    for (int i = 0; i < n_names; i++) ea_free(names[i]);
    ea_free(names);
    json_decref(index);
    ea_st_set_close(s);
    return st;
}

void ea_st_set_close(ea_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) ea_st_close(s->files[i]);
    ea_free(s->files);
    ea_free(s->refs);
    ea__name_map_deinit(&s->names);
    ea_free(s->dir);
    ea_free(s);
}

int ea_st_set_find(const ea_st_set *s, const char *name) { return ea__name_map_get(&s->names, name); }

const ea_st_info *ea_st_set_info(const ea_st_set *s, int i) {
    EA_ASSERT(i >= 0 && i < s->n_refs);
    return &s->files[s->refs[i].file]->tensors[s->refs[i].index];
}

void ea_st_set_tensor(const ea_st_set *s, int i, ea_tensor *t, const char **file) {
    EA_ASSERT(i >= 0 && i < s->n_refs);
    const ea_st_file *f = s->files[s->refs[i].file];
    ea_st_tensor(f, s->refs[i].index, t);
    if (file) *file = f->path;
}
