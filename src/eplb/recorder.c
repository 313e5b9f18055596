/*
 * recorder.c — sliding-window token counts per (layer, logical expert); the
 * data structure and its invariants are described in recorder.h.
 *
 * Invariant (checked by tests): after any sequence of record/end_step calls,
 * sums[l][e] == the sum of the per-step counts of the last min(W, n_steps)
 * completed steps, and the ring slot at head holds only the current step.
 */
#include "eplb/recorder.h"

#include <string.h>

#include "base/alloc.h"
#include "eplb/textio.h"

ea_status ea_eplb_recorder_init(ea_eplb_recorder *r, int n_layers, int n_experts, int window) {
    memset(r, 0, sizeof *r);
    if (n_layers <= 0 || n_experts <= 0 || window <= 0)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB recorder: layers %d, experts %d, window %d must be > 0", n_layers,
                      n_experts, window);
    size_t le, ring;
    if (!ea_mul_ok((size_t)n_layers, (size_t)n_experts, &le) || !ea_mul_ok(le, (size_t)window + 1, &ring) ||
        !ea_mul_ok(ring, sizeof(int64_t), &ring))
        return ea_err(EA_ERR_RANGE, "EPLB recorder: %d x %d x %d too large", n_layers, n_experts, window);
    r->ring = ea_calloc(ring / sizeof(int64_t), sizeof(int64_t));
    r->sums = ea_calloc(le, sizeof(int64_t));
    if (!r->ring || !r->sums) {
        ea_eplb_recorder_deinit(r);
        return ea_err(EA_ERR_NOMEM, "EPLB recorder: %d layers x %d experts x window %d", n_layers, n_experts, window);
    }
    r->n_layers = n_layers;
    r->n_experts = n_experts;
    r->window = window;
    return EA_OK;
}

void ea_eplb_recorder_deinit(ea_eplb_recorder *r) {
    if (!r) return;
    ea_free(r->ring);
    ea_free(r->sums);
    memset(r, 0, sizeof *r);
}

void ea_eplb_recorder_reset(ea_eplb_recorder *r) {
    size_t le = (size_t)r->n_layers * (size_t)r->n_experts;
    memset(r->ring, 0, le * ((size_t)r->window + 1) * sizeof *r->ring);
    memset(r->sums, 0, le * sizeof *r->sums);
    r->head = 0;
    r->n_steps = 0;
    r->n_dropped = 0;
}

void ea_eplb_recorder_start(ea_eplb_recorder *r) {
    ea_eplb_recorder_reset(r);
    r->on = 1;
}

void ea_eplb_recorder_stop(ea_eplb_recorder *r) { r->on = 0; }

void ea__eplb_record(ea_eplb_recorder *r, int layer, const int32_t *ids, int n) {
    EA_ASSERT(layer >= 0 && layer < r->n_layers);
    size_t le = (size_t)r->n_layers * (size_t)r->n_experts;
    int64_t *cur = r->ring + (size_t)r->head * le + (size_t)layer * (size_t)r->n_experts;
    uint32_t E = (uint32_t)r->n_experts;
    for (int i = 0; i < n; i++) {
        uint32_t e = (uint32_t)ids[i]; /* negative ids wrap to large values */
        if (e < E) cur[e]++;
        else r->n_dropped++;
    }
}

void ea__eplb_end_step(ea_eplb_recorder *r) {
    size_t le = (size_t)r->n_layers * (size_t)r->n_experts;
    const int64_t *cur = r->ring + (size_t)r->head * le;
    for (size_t i = 0; i < le; i++) r->sums[i] += cur[i];
    r->head = (r->head + 1) % (r->window + 1);
    /* the new head slot holds the step that just left the window (or zeros) */
    int64_t *old = r->ring + (size_t)r->head * le;
    for (size_t i = 0; i < le; i++) {
        r->sums[i] -= old[i];
        old[i] = 0;
    }
    r->n_steps++;
}

int ea_eplb_recorder_steps_in_window(const ea_eplb_recorder *r) {
    return r->n_steps < (uint64_t)r->window ? (int)r->n_steps : r->window;
}

ea_status ea_eplb_recorder_dump(const ea_eplb_recorder *r, FILE *f) {
    char comment[256];
    snprintf(comment, sizeof comment,
             "EPLB recorder dump: tokens per (layer, logical expert) over the last %d steps (window %d, %llu "
             "steps recorded, %llu ids out of range)\nformat: line 'L E', then L rows of E non-negative integers",
             ea_eplb_recorder_steps_in_window(r), r->window, (unsigned long long)r->n_steps,
             (unsigned long long)r->n_dropped);
    return ea_eplb_workload_write(f, comment, r->n_layers, r->n_experts, r->sums);
}

ea_status ea_eplb_recorder_dump_file(const ea_eplb_recorder *r, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return ea_err(EA_ERR_IO, "%s: cannot open for writing", path);
    ea_status st = ea_eplb_recorder_dump(r, f);
    if (fclose(f) != 0 && st == EA_OK) st = ea_err(EA_ERR_IO, "%s: write failed", path);
    return st;
}
