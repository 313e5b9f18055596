/*
 * pool.c — see pool.h.
 *
 * Protocol. A job is published in one atomic word, `job` = gen | next | n
 * (a generation counter, the next unclaimed task, the task count): the owner
 * writes fn, ctx and base, then stores the word (release). Any thread — the
 * owner too — claims a task by a compare-and-swap that bumps `next`; a claim
 * can only succeed on the word as it is now, so it always belongs to the
 * current job, and the job's fields stay put until every claimed task is
 * finished (`n_finished`, acq_rel), which is what the owner waits for.
 *
 * The owner publishes each job with task 0 already its own, runs it, then
 * claims tasks like everyone else and, once none is left, waits only for the
 * tasks that others claimed and are still running — never for a helper that
 * has not woken yet. On a shared machine a helper may be
 * descheduled for a whole time slice; with a static split (task i on thread
 * i % n) every pool run then waited for it, and decode with 2 threads ran
 * slower than with 1 under load (4.9 against 14.0 tok/s at load 3).
 *
 * Waiting spins first, then sleeps: a decode step makes hundreds of pool runs
 * of tens of microseconds each, and a condition-variable wake-up costs about
 * 10 µs, so both sides spin for up to EA__SPIN iterations (~20-50 µs) before
 * falling back to the mutex + condition variables. The sleeping paths re-check
 * the atomics under the mutex, and the wakers take the mutex before
 * signalling, so no wake-up is lost. `stop` ends the helpers at destroy.
 */
#define _GNU_SOURCE
#include "base/pool.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"

#define EA__SPIN 20000

/* The job word: generation (16 bits: it only has to differ from the last job's),
 * next task (24), task count (24); larger jobs run as several words (base). */
#define EA__TASK_BITS 24
#define EA__TASK_MAX ((1 << EA__TASK_BITS) - 1)
#define EA__W_N(w) ((int)((w) & EA__TASK_MAX))
#define EA__W_NEXT(w) ((int)(((w) >> EA__TASK_BITS) & EA__TASK_MAX))
#define EA__W_NEXT_ONE ((uint64_t)1 << EA__TASK_BITS)
#define EA__W_GEN_ONE ((uint64_t)1 << (2 * EA__TASK_BITS))

struct ea_pool {
    int n_threads;
    pthread_t *threads; /* owns: n_threads-1 helpers */
    pthread_mutex_t mu;
    pthread_cond_t cv_job;
    pthread_cond_t cv_done;
    _Atomic uint64_t job;  /* gen | next | n; see above */
    atomic_int n_finished; /* tasks of the current job finished */
    atomic_int stop;
    ea_pool_fn fn; /* job fields: written by the owner before storing job */
    void *ctx;
    int base; /* task index of the word's task 0 */
};

typedef struct {
    ea_pool *p;
    int id;
} ea__worker_arg;

/* Claim and run tasks of the job word w (as loaded) until none is left; thread
 * id runs them. Returns the last word seen. */
static uint64_t ea__claim_and_run(ea_pool *p, uint64_t w, int id) {
    while (EA__W_NEXT(w) < EA__W_N(w)) {
        if (!atomic_compare_exchange_weak_explicit(&p->job, &w, w + EA__W_NEXT_ONE, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* w now holds the current word: maybe another job */
        int n = EA__W_N(w);
        p->fn(p->ctx, p->base + EA__W_NEXT(w), id);
        if (atomic_fetch_add_explicit(&p->n_finished, 1, memory_order_acq_rel) + 1 == n && id != 0) {
            pthread_mutex_lock(&p->mu); /* the owner may be asleep waiting for this last task */
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
        w = atomic_load_explicit(&p->job, memory_order_acquire);
    }
    return w;
}

static void *ea__worker(void *arg) {
    ea__worker_arg *wa = arg;
    ea_pool *p = wa->p;
    int id = wa->id;
    ea_free(wa);
    uint64_t seen = atomic_load_explicit(&p->job, memory_order_acquire);
    for (;;) {
        seen = ea__claim_and_run(p, seen, id);
        uint64_t w = atomic_load_explicit(&p->job, memory_order_acquire);
        for (int i = 0; w == seen && i < EA__SPIN && !atomic_load(&p->stop); i++) {
            _mm_pause();
            w = atomic_load_explicit(&p->job, memory_order_acquire);
        }
        if (w == seen) {
            pthread_mutex_lock(&p->mu);
            while (!atomic_load(&p->stop) && (w = atomic_load_explicit(&p->job, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->cv_job, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = w;
    }
    return NULL;
}

int ea_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

ea_status ea_pool_create(int n_threads, ea_pool **out) {
    *out = NULL;
    if (n_threads <= 0) n_threads = ea_cpu_count();
    if (n_threads > 1024) return ea_err(EA_ERR_INVALID_ARG, "thread count %d is too large", n_threads);
    ea_pool *p = ea_calloc(1, sizeof *p);
    if (!p) return ea_err(EA_ERR_NOMEM, "thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_job, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->job, 0);
    atomic_init(&p->n_finished, 0);
    atomic_init(&p->stop, 0);
    if (n_threads > 1) {
        p->threads = ea_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads) {
            ea_pool_destroy(p);
            return ea_err(EA_ERR_NOMEM, "thread pool");
        }
    }
    for (int i = 1; i < n_threads; i++) {
        ea__worker_arg *wa = ea_malloc(sizeof *wa);
        if (!wa) {
            p->n_threads = i;
            ea_pool_destroy(p);
            return ea_err(EA_ERR_NOMEM, "thread pool");
        }
        wa->p = p;
        wa->id = i;
        if (pthread_create(&p->threads[i - 1], NULL, ea__worker, wa) != 0) {
            ea_free(wa);
            p->n_threads = i;
            ea_pool_destroy(p);
            return ea_err(EA_ERR_INTERNAL, "pthread_create failed for worker %d", i);
        }
    }
    *out = p;
    return EA_OK;
}

void ea_pool_destroy(ea_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv_job);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++)
        if (p->threads) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_job);
    pthread_cond_destroy(&p->cv_done);
    ea_free(p->threads);
    ea_free(p);
}

int ea_pool_size(const ea_pool *p) { return p ? p->n_threads : 1; }

typedef struct {
    ea_pool_range_fn fn;
    void *ctx;
    int n, n_tasks;
} ea__ranges;

static void ea__range_task(void *arg, int task, int thread) {
    (void)thread;
    const ea__ranges *r = arg;
    r->fn(r->ctx, (int)((int64_t)r->n * task / r->n_tasks), (int)((int64_t)r->n * (task + 1) / r->n_tasks));
}

void ea_pool_run_ranges(ea_pool *p, int n, int min_parallel, ea_pool_range_fn fn, void *ctx) {
    if (n <= 0) return;
    int nt = ea_pool_size(p) < n ? ea_pool_size(p) : n;
    ea__ranges r = {fn, ctx, n, n < min_parallel ? 1 : nt};
    ea_pool_run(r.n_tasks > 1 ? p : NULL, ea__range_task, &r, r.n_tasks);
}

void ea_pool_run(ea_pool *p, ea_pool_fn fn, void *ctx, int n_tasks) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    for (int base = 0; base < n_tasks; base += EA__TASK_MAX) {
        int n = n_tasks - base < EA__TASK_MAX ? n_tasks - base : EA__TASK_MAX;
        p->fn = fn;
        p->ctx = ctx;
        p->base = base;
        atomic_store_explicit(&p->n_finished, 0, memory_order_relaxed);
        uint64_t w = atomic_load_explicit(&p->job, memory_order_relaxed);
        /* next gen, task 0 already the owner's: with the helpers awake, task i
         * then runs on the thread it ran on with a static split (locality,
         * the tasks' prefetch of their successors), and no CAS races the
         * helpers for the first task */
        w = ((w & ~(EA__W_GEN_ONE - 1)) + EA__W_GEN_ONE) | EA__W_NEXT_ONE | (uint64_t)n;
        pthread_mutex_lock(&p->mu);
        atomic_store_explicit(&p->job, w, memory_order_release);
        pthread_cond_broadcast(&p->cv_job);
        pthread_mutex_unlock(&p->mu);
        fn(ctx, base, 0);
        atomic_fetch_add_explicit(&p->n_finished, 1, memory_order_acq_rel);
        ea__claim_and_run(p, atomic_load_explicit(&p->job, memory_order_acquire), 0);
        for (int i = 0; i < EA__SPIN && atomic_load_explicit(&p->n_finished, memory_order_acquire) < n; i++) _mm_pause();
        if (atomic_load_explicit(&p->n_finished, memory_order_acquire) < n) {
            pthread_mutex_lock(&p->mu);
            while (atomic_load_explicit(&p->n_finished, memory_order_acquire) < n) pthread_cond_wait(&p->cv_done, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
    }
}
