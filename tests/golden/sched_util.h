/*
 * sched_util.h — what the scheduler tests share: a deterministic prompt per
 * index, the two prompts of the prefix-chain tests, and collecting a request's
 * events into its token ids and outcome. Header-only; included by
 * tests/golden/test_scheduler.c, test_kv_disk.c and test_eplb_integration.c.
 */
#ifndef EA_SCHED_UTIL_H
#define EA_SCHED_UTIL_H

#include <stdio.h>
#include <string.h>

#include "serve/scheduler.h"

typedef struct {
    int32_t toks[256];
    int n;
    ea_finish finish;
    int cached;
    int error;
} result;

/* n token ids in [10, 3010) from a generator seeded by (base, i) */
static inline void prompt_from(uint64_t base, int i, int32_t *p, int n) {
    uint64_t s = base + (uint64_t)i * 7919;
    for (int k = 0; k < n; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[k] = (int32_t)((s >> 33) % 3000) + 10;
    }
}

static inline void prompt_of(int i, int32_t *p, int n) { prompt_from(1000, i, p, n); }

/* Two prompts that share block Y at different prefixes: xyzt = X Y Z t and
 * yzt = Y Z t, where X, Y, Z are one block of B tokens each and t is 5 tokens.
 * If the prefix cache keyed a block by its own tokens only (no chain), yzt
 * would reuse the KV of Y and Z computed after X: wrong context, wrong
 * positions, wrong output. Sizes: xyzt 3*B+5, yzt 2*B+5. */
#define CHAIN_T 5
static inline void chain_prompts(int B, int32_t *xyzt, int32_t *yzt) {
    prompt_from(77, 0, xyzt, 3 * B + CHAIN_T);
    memcpy(yzt, xyzt + B, sizeof(int32_t) * (size_t)(2 * B + CHAIN_T));
}

static inline void collect(ea_request *r, result *out) {
    memset(out, 0, sizeof *out);
    ea_event ev;
    for (;;) {
        if (ea_req_next(r, 60000, &ev) != EA_OK) {
            out->error = 1;
            break;
        }
        if (ev.kind == EA_EV_TOKEN && ev.token >= 0 && out->n < 256) out->toks[out->n++] = ev.token;
        if (ev.kind == EA_EV_DONE) {
            out->finish = ev.finish;
            out->cached = ev.cached_tokens;
            break;
        }
        if (ev.kind == EA_EV_ERROR) {
            fprintf(stderr, "  request error: %s\n", ev.message);
            out->error = 1;
            break;
        }
    }
    ea_req_release(r);
}

#endif
