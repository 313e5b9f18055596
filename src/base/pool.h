/*
 * pool.h — a fixed thread pool that runs parallel-for loops.
 *
 * The calling thread is worker 0 and takes part; n_threads-1 helper threads
 * wait (spinning, then on a condition variable) between jobs. A job is
 * fn(ctx, task, thread) for task in [0, n_tasks): the threads claim tasks in
 * order, each as soon as it is free, so which thread runs a task depends on
 * timing. `thread` (0..n_threads-1) names the thread running the task, for
 * per-thread scratch; a task's result must depend only on its own inputs,
 * never on which thread ran it or what else that thread ran — batch
 * invariance and the bit-identity of every mode rely on it. The owner never
 * waits for a helper that has not started: on a loaded machine it runs the
 * tasks itself.
 *
 * One job at a time per pool: ea_pool_run is not reentrant and is called from
 * the thread that owns the pool (the step loop).
 */
#ifndef EA_POOL_H
#define EA_POOL_H

#include "base/status.h"

typedef struct ea_pool ea_pool;
typedef void (*ea_pool_fn)(void *ctx, int task, int thread);

/* n_threads <= 0 means the CPU count. */
ea_status ea_pool_create(int n_threads, ea_pool **out);
void ea_pool_destroy(ea_pool *p);
int ea_pool_size(const ea_pool *p);
/* Run fn(ctx, task, thread) for task in [0, n_tasks) and wait for all. p may be NULL (serial). */
void ea_pool_run(ea_pool *p, ea_pool_fn fn, void *ctx, int n_tasks);
/* fn(ctx, i0, i1) over [0, n) cut into one contiguous range per thread (at
 * most n ranges); one serial call when n < min_parallel. For row-wise steps. */
typedef void (*ea_pool_range_fn)(void *ctx, int i0, int i1);
void ea_pool_run_ranges(ea_pool *p, int n, int min_parallel, ea_pool_range_fn fn, void *ctx);
/* Online CPUs of this process (sched affinity), at least 1. */
int ea_cpu_count(void);

#endif
