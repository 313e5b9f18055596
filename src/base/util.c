/*
 * util.c — see util.h.
 */
#define _GNU_SOURCE
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"

uint64_t ea_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double ea_now_s(void) { return (double)ea_now_ns() * 1e-9; }

uint64_t ea_hash64(const void *data, size_t n, uint64_t seed) {
    const uint8_t *p = data;
    uint64_t h = seed ? seed : 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* XXH64 as specified in xxHash's doc/xxhash_spec.md: four lanes over 32-byte
 * stripes, then the tail in 8/4/1-byte steps and the avalanche. Reads are
 * memcpy'd (no alignment assumed; little-endian host, like the weight files). */
#define EA__P1 0x9E3779B185EBCA87ull
#define EA__P2 0xC2B2AE3D27D4EB4Full
#define EA__P3 0x165667B19E3779F9ull
#define EA__P4 0x85EBCA77C2B2AE63ull
#define EA__P5 0x27D4EB2F165667C5ull

static uint64_t xxh_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t xxh_rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint64_t xxh_round(uint64_t acc, uint64_t in) { return xxh_rotl(acc + in * EA__P2, 31) * EA__P1; }
static uint64_t xxh_merge(uint64_t h, uint64_t v) { return (h ^ xxh_round(0, v)) * EA__P1 + EA__P4; }

uint64_t ea_xxh64(const void *data, size_t n, uint64_t seed) {
    const uint8_t *p = data, *end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v1 = seed + EA__P1 + EA__P2, v2 = seed + EA__P2, v3 = seed, v4 = seed - EA__P1;
        for (; end - p >= 32; p += 32) {
            v1 = xxh_round(v1, xxh_rd64(p));
            v2 = xxh_round(v2, xxh_rd64(p + 8));
            v3 = xxh_round(v3, xxh_rd64(p + 16));
            v4 = xxh_round(v4, xxh_rd64(p + 24));
        }
        h = xxh_rotl(v1, 1) + xxh_rotl(v2, 7) + xxh_rotl(v3, 12) + xxh_rotl(v4, 18);
        h = xxh_merge(xxh_merge(xxh_merge(xxh_merge(h, v1), v2), v3), v4);
    } else {
        h = seed + EA__P5;
    }
    h += (uint64_t)n;
    for (; end - p >= 8; p += 8) h = xxh_rotl(h ^ xxh_round(0, xxh_rd64(p)), 27) * EA__P1 + EA__P4;
    if (end - p >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        h = xxh_rotl(h ^ (uint64_t)w * EA__P1, 23) * EA__P2 + EA__P3;
        p += 4;
    }
    for (; p < end; p++) h = xxh_rotl(h ^ (uint64_t)*p * EA__P5, 11) * EA__P1;
    h ^= h >> 33;
    h *= EA__P2;
    h ^= h >> 29;
    h *= EA__P3;
    return h ^ (h >> 32);
}

ea_status ea_random_bytes(void *buf, size_t n) {
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t k = getrandom(p + got, n - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    if (got == n) return EA_OK;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f && fread(p + got, 1, n - got, f) == n - got) got = n;
    if (f) fclose(f);
    return got == n ? EA_OK : ea_err(EA_ERR_IO, "no random source (getrandom, /dev/urandom): %s", strerror(errno));
}

ea_status ea_read_file(const char *path, char **data, size_t *size) {
    *data = NULL;
    if (size) *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ea_err(EA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return ea_err(EA_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    }
    long n = ftell(f);
    if (n < 0) {
        fclose(f);
        return ea_err(EA_ERR_IO, "%s: cannot size: %s", path, strerror(errno));
    }
    rewind(f);
    char *buf = ea_malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return ea_err(EA_ERR_NOMEM, "%s: %ld bytes", path, n);
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        ea_free(buf);
        fclose(f);
        return ea_err(EA_ERR_IO, "%s: short read", path);
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    if (size) *size = (size_t)n;
    return EA_OK;
}

ea_status ea_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return ea_err(EA_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    size_t w = fwrite(data, 1, size, f);
    int bad = fclose(f) != 0 || w != size;
    if (bad) return ea_err(EA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return EA_OK;
}

ea_status ea_mmap_open(const char *path, ea_mmap *m) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ea_err(EA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return ea_err(EA_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ea_err(EA_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return ea_err(EA_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        }
        m->data = p;
        m->size = (size_t)st.st_size;
    }
    close(fd);
    return EA_OK;
}

void ea_mmap_close(ea_mmap *m) {
    if (m->data) munmap((void *)m->data, m->size);
    memset(m, 0, sizeof *m);
}

ea_status ea_json_parse(const char *text, size_t len, const char *what, json_t **out) {
    json_error_t e;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (!*out)
        return ea_err(EA_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", what, e.line,
                      e.column, e.text);
    return EA_OK;
}

ea_status ea_json_load_file(const char *path, json_t **out) {
    char *text;
    size_t n;
    *out = NULL;
    EA_TRY(ea_read_file(path, &text, &n));
    ea_status s = ea_json_parse(text, n, path, out);
    ea_free(text);
    return s;
}

void ea_path_join(char *buf, size_t bufsz, const char *dir, const char *name) {
    size_t n = strlen(dir);
    snprintf(buf, bufsz, "%s%s%s", dir, (n && dir[n - 1] == '/') ? "" : "/", name);
}

int ea_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int ea_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

size_t ea_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size, rss;
    int ok = fscanf(f, "%lu %lu", &size, &rss) == 2;
    fclose(f);
    return ok ? (size_t)rss * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

size_t ea_peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

uint64_t ea_splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t ea_splitmix64(uint64_t *state) { return ea_splitmix64_mix(*state += 0x9e3779b97f4a7c15ull); }
