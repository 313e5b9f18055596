/*
 * recorder.h — the expert-distribution recorder: per layer, per logical expert
 * token counts over a sliding window of the last W forward steps.
 *
 * Data: a ring of W+1 per-step count arrays [L][E] (W completed steps plus the
 * step being recorded) and the running window sums [L][E]. record() adds into
 * the current step's array; end_step() adds the finished step to the sums,
 * moves to the next ring slot, subtracts the step that leaves the window and
 * zeroes its array. So window sums always equal the sum of the last
 * min(W, steps) completed steps, exactly (integers), at O(L*E) per step.
 *
 *   ea_eplb_recorder rec;
 *   EA_TRY(ea_eplb_recorder_init(&rec, n_layers, n_experts, window));
 *   ea_eplb_recorder_start(&rec);
 *   for each step: for each MoE layer: ea_eplb_record(&rec, layer, topk_ids, n_tokens * k);
 *                  ea_eplb_recorder_end_step(&rec);
 *   ea_eplb_recorder_dump(&rec, f);   // workload format (textio.h): `eaas eplb place` reads it
 *
 * Cost when off: ea_eplb_record and end_step test one flag and return (inline).
 * Ids outside [0, E) (e.g. -1 for padding) are not counted; they are tallied in
 * n_dropped. No allocation after init. Threading: owned by the step loop
 * (record from the forward pass, end_step after it, dump between steps); an
 * HTTP dump request must be served by that loop, not from another thread.
 */
#ifndef EA_EPLB_RECORDER_H
#define EA_EPLB_RECORDER_H

#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

typedef struct {
    int on;                /* recording; the one branch of the hot path */
    int n_layers, n_experts, window;
    int head;              /* ring slot of the step being recorded */
    int64_t *ring;         /* owns [W+1][L][E] per-step counts */
    int64_t *sums;         /* owns [L][E] sum over the window */
    uint64_t n_steps;      /* completed steps since start (or reset) */
    uint64_t n_dropped;    /* ids outside [0, E) */
} ea_eplb_recorder;

ea_status ea_eplb_recorder_init(ea_eplb_recorder *r, int n_layers, int n_experts, int window);
void ea_eplb_recorder_deinit(ea_eplb_recorder *r);

/* start: clear everything and record; stop: keep the counts, record nothing. */
void ea_eplb_recorder_start(ea_eplb_recorder *r);
void ea_eplb_recorder_stop(ea_eplb_recorder *r);
void ea_eplb_recorder_reset(ea_eplb_recorder *r);

void ea__eplb_record(ea_eplb_recorder *r, int layer, const int32_t *ids, int n);
void ea__eplb_end_step(ea_eplb_recorder *r);

/* ids: the router's top-k logical ids of a batch, n = n_tokens * k. layer must be in range. */
static inline void ea_eplb_record(ea_eplb_recorder *r, int layer, const int32_t *ids, int n) {
    if (__builtin_expect(r->on, 0)) ea__eplb_record(r, layer, ids, n);
}
static inline void ea_eplb_recorder_end_step(ea_eplb_recorder *r) {
    if (__builtin_expect(r->on, 0)) ea__eplb_end_step(r);
}

/* Window sums [L][E] (views r->sums; valid until the next end_step). */
static inline const int64_t *ea_eplb_recorder_counts(const ea_eplb_recorder *r) { return r->sums; }
/* The current step's counts [L][E], still open to record() (and to be
 * replaced by the sum over ranks before end_step, eplb_backend.c). */
static inline int64_t *ea_eplb_recorder_step(ea_eplb_recorder *r) {
    return r->ring + (size_t)r->head * (size_t)r->n_layers * (size_t)r->n_experts;
}
/* Steps in the window: min(W, n_steps). */
int ea_eplb_recorder_steps_in_window(const ea_eplb_recorder *r);

/* Write the window sums in the workload format, with a comment naming the window. */
ea_status ea_eplb_recorder_dump(const ea_eplb_recorder *r, FILE *f);
ea_status ea_eplb_recorder_dump_file(const ea_eplb_recorder *r, const char *path);

#endif
