/*
 * pool.c — see pool.h.
 *
 * Protocol: the owner writes the job fields, then publishes them by bumping
 * `gen` (release); each helper sees the new generation (acquire), runs its
 * static share of tasks, and increments `n_done` (release); the owner runs
 * share 0 and waits until n_done == n_threads-1 (acquire).
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
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"

#define EA__SPIN 20000

struct ea_pool {
    int n_threads;
    pthread_t *threads; /* owns: n_threads-1 helpers */
    pthread_mutex_t mu;
    pthread_cond_t cv_job;
    pthread_cond_t cv_done;
    atomic_ulong gen;   /* job generation; bumped by the owner to publish a job */
    atomic_int n_done;  /* helpers finished with the current job */
    atomic_int stop;
    ea_pool_fn fn;      /* job fields: written by the owner before bumping gen */
    void *ctx;
    int n_tasks;
};

typedef struct {
    ea_pool *p;
    int id;
} ea__worker_arg;

static void ea__run_share(ea_pool *p, int id) {
    for (int t = id; t < p->n_tasks; t += p->n_threads) p->fn(p->ctx, t, id);
}

static void *ea__worker(void *arg) {
    ea__worker_arg *wa = arg;
    ea_pool *p = wa->p;
    int id = wa->id;
    ea_free(wa);
    unsigned long seen = 0;
    for (;;) {
        unsigned long g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < EA__SPIN && !atomic_load(&p->stop); i++) {
            _mm_pause();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while (!atomic_load(&p->stop) && (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->cv_job, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        ea__run_share(p, id);
        if (atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel) + 1 == p->n_threads - 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->n_done, 0);
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
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_job);
    pthread_mutex_unlock(&p->mu);
    ea__run_share(p, 0);
    int want = p->n_threads - 1;
    for (int i = 0; i < EA__SPIN && atomic_load_explicit(&p->n_done, memory_order_acquire) < want; i++) _mm_pause();
    if (atomic_load_explicit(&p->n_done, memory_order_acquire) < want) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->n_done, memory_order_acquire) < want) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
