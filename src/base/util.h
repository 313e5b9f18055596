/*
 * util.h — small helpers every layer needs: time, hashing, whole-file reads,
 * read-only file mappings, JSON loading with error positions (jansson).
 */
#ifndef EA_UTIL_H
#define EA_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Monotonic clock in nanoseconds / seconds. */
uint64_t ea_now_ns(void);
double ea_now_s(void);

/* 64-bit FNV-1a, chainable: pass the previous hash as seed (0 starts fresh). */
uint64_t ea_hash64(const void *data, size_t n, uint64_t seed);
/* splitmix64: adds the golden-ratio step (0x9e3779b97f4a7c15) to *state and
 * returns ea_splitmix64_mix of it (seeds the request RNG; spreads a counter into
 * a seed; make-model's weights are its stream). */
uint64_t ea_splitmix64(uint64_t *state);
/* splitmix64's finaliser alone: a bijective 64-bit mix (Stafford's variant 13). */
uint64_t ea_splitmix64_mix(uint64_t z);
/* XXH64 (xxHash's 64-bit hash, bit-exact with the reference: XXH64("", 0) =
 * 0xef46db3751d8e999): ~10x faster than ea_hash64 on large buffers (four
 * independent 64-bit lanes), for hashing weights. Chain by passing the
 * previous hash as seed. */
uint64_t ea_xxh64(const void *data, size_t n, uint64_t seed);

/* n bytes from the kernel's random source (getrandom(2), else /dev/urandom): for ids
 * that must not repeat across restarts. */
ea_status ea_random_bytes(void *buf, size_t n);

/* Read a whole file into a NUL-terminated heap buffer (OUT: *data, *size; free with ea_free). */
ea_status ea_read_file(const char *path, char **data, size_t *size);
ea_status ea_write_file(const char *path, const void *data, size_t size);

/* A read-only private mapping of a whole file. size 0 files map to data NULL. */
typedef struct {
    const uint8_t *data; /* views the mapping; valid until ea_mmap_close */
    size_t size;
} ea_mmap;
ea_status ea_mmap_open(const char *path, ea_mmap *m);
void ea_mmap_close(ea_mmap *m);

/* Parse JSON text/file; errors name the file (or "<what>") with line and column. */
ea_status ea_json_load_file(const char *path, json_t **out);
ea_status ea_json_parse(const char *text, size_t len, const char *what, json_t **out);

/* Join a directory and a file name into buf (cut to bufsz). */
void ea_path_join(char *buf, size_t bufsz, const char *dir, const char *name);
int ea_file_exists(const char *path);
int ea_is_dir(const char *path);

/* Resident set size of this process in bytes (from /proc/self/statm); 0 if unknown. */
size_t ea_rss_bytes(void);
/* Peak RSS (VmHWM) in bytes; 0 if unknown. */
size_t ea_peak_rss_bytes(void);

#endif
