/*
 * dist.c — MPI wrapper with deadlines; see dist.h for the contract. The only
 * file of eaas that includes <mpi.h>.
 *
 * Communicators (both duplicates of MPI_COMM_WORLD, both MPI_ERRORS_RETURN):
 *   comm  — the collectives, in the order every rank calls them
 *   ping  — point-to-point liveness probes, so a probe can never match a
 *           collective's internal messages
 *
 * Ping protocol on `ping` (int32 payloads):
 *   tag 1 PING  seq      a rank that timed out asks "are you there?"
 *   tag 2 PONG  seq      the answer, sent by any rank that is polling a
 *                        collective (or probing) when the ping arrives
 * A prober posts one receive per peer and keeps only the PONG that carries
 * its current seq (late answers to an earlier probe are drained and ignored).
 *
 * Polling: MPI_Test in a tight loop for the first ~64 tries (decode-step
 * latency), then sleeps growing from 10 us to 1 ms so a waiting rank does not
 * steal the CPU from a computing one on a shared machine.
 *
 * Invariant: after `broken` is set nothing calls into MPI collectives on
 * `comm` again (the failed request is still active and cannot be freed).
 * `broken` is set (release) only after `error` is written, so another thread
 * that sees it through ea_dist_healthy (acquire; /health) reads the whole
 * message, not an empty or half-written one.
 */
#include "ep/dist.h"

#include <limits.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/util.h"

#define EA__TAG_PING 1
#define EA__TAG_PONG 2
#define EA__PONG_RING 32

struct ea_dist {
    MPI_Comm comm, ping;
    int rank, size;
    double timeout_s;
    atomic_int broken;  /* see the invariant above */
    int we_initialized;
    char error[512];
    char library[128];
    ea_dist_stats st;

    uint8_t *scratch; /* owns: allreduce gather space */
    size_t scratch_cap;

    /* pong answers in flight (their buffers must live until the send completes) */
    MPI_Request pong_req[EA__PONG_RING];
    int32_t pong_buf[EA__PONG_RING];
    int pong_next;
    int32_t ping_seq;
};

/* ------------------------------------------------------------ environment */

int ea_dist_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

int ea_dist_launch_size(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    if (!v) v = getenv("PMIX_SIZE");
    if (!v) return 0;
    char *end;
    long n = strtol(v, &end, 10);
    return (*end || n < 1 || n > INT_MAX) ? 0 : (int)n;
}

/* ------------------------------------------------------------ errors */

/* After d->error holds the reason. */
static void set_broken(ea_dist *d) { atomic_store_explicit(&d->broken, 1, memory_order_release); }

static ea_status ea__mpi_err(ea_dist *d, int rc, const char *what, const char *op) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    snprintf(d->error, sizeof d->error, "rank %d: collective '%s' (%s) failed: %s", d->rank, what, op, msg);
    set_broken(d);
    return ea_err(EA_ERR_PEER, "%s", d->error);
}

static void ea__sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ ping service */

/* Answer every ping waiting for us; returns without blocking. */
static void ea__serve_pings(ea_dist *d) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, EA__TAG_PING, d->ping, &flag, &st) != MPI_SUCCESS || !flag) return;
        int32_t seq = 0;
        if (MPI_Recv(&seq, 1, MPI_INT32_T, st.MPI_SOURCE, EA__TAG_PING, d->ping, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        int slot = d->pong_next;
        d->pong_next = (d->pong_next + 1) % EA__PONG_RING;
        if (d->pong_req[slot] != MPI_REQUEST_NULL) {
            /* an old answer still in flight (its receiver may be gone): let MPI finish it alone */
            MPI_Request_free(&d->pong_req[slot]);
        }
        d->pong_buf[slot] = seq;
        if (MPI_Isend(&d->pong_buf[slot], 1, MPI_INT32_T, st.MPI_SOURCE, EA__TAG_PONG, d->ping, &d->pong_req[slot]) !=
            MPI_SUCCESS)
            d->pong_req[slot] = MPI_REQUEST_NULL;
        d->st.pings_answered++;
    }
}

/* Ping every other rank and wait up to `window` seconds; missing[r] = 1 for
 * ranks that did not answer. Returns the number missing. */
static int ea__probe(ea_dist *d, double window, uint8_t *missing) {
    int n = d->size, n_missing = 0;
    MPI_Request *sreq = ea_calloc((size_t)n, sizeof *sreq), *rreq = ea_calloc((size_t)n, sizeof *rreq);
    int32_t *in = ea_calloc((size_t)n, sizeof *in);
    if (!sreq || !rreq || !in) {
        ea_free(sreq), ea_free(rreq), ea_free(in);
        for (int r = 0; r < n; r++) missing[r] = r != d->rank;
        return n - 1;
    }
    int32_t seq = ++d->ping_seq; /* the send buffer is d->ping_seq: it outlives this call */
    for (int r = 0; r < n; r++) {
        sreq[r] = rreq[r] = MPI_REQUEST_NULL;
        missing[r] = r != d->rank;
        if (r == d->rank) continue;
        if (MPI_Isend(&d->ping_seq, 1, MPI_INT32_T, r, EA__TAG_PING, d->ping, &sreq[r]) != MPI_SUCCESS) sreq[r] = MPI_REQUEST_NULL;
        if (MPI_Irecv(&in[r], 1, MPI_INT32_T, r, EA__TAG_PONG, d->ping, &rreq[r]) != MPI_SUCCESS) rreq[r] = MPI_REQUEST_NULL;
    }
    double end = ea_now_s() + window;
    int left = n - 1;
    while (left > 0 && ea_now_s() < end) {
        ea__serve_pings(d);
        for (int r = 0; r < n; r++) {
            if (!missing[r] || rreq[r] == MPI_REQUEST_NULL) continue;
            int flag = 0;
            if (MPI_Test(&rreq[r], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                rreq[r] = MPI_REQUEST_NULL; /* the library saw this peer fail */
                continue;
            }
            if (!flag) continue;
            if (in[r] == seq) {
                missing[r] = 0;
                left--;
            } else if (MPI_Irecv(&in[r], 1, MPI_INT32_T, r, EA__TAG_PONG, d->ping, &rreq[r]) != MPI_SUCCESS) {
                rreq[r] = MPI_REQUEST_NULL; /* a late answer to an older probe: wait for ours */
            }
        }
        ea__sleep_us(200);
    }
    for (int r = 0; r < n; r++) {
        if (rreq[r] != MPI_REQUEST_NULL) {
            MPI_Cancel(&rreq[r]);
            MPI_Request_free(&rreq[r]);
        }
        if (sreq[r] != MPI_REQUEST_NULL) {
            int flag = 0;
            if (MPI_Test(&sreq[r], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag)
                if (sreq[r] != MPI_REQUEST_NULL) MPI_Request_free(&sreq[r]);
        }
        n_missing += missing[r];
    }
    ea_free(sreq), ea_free(rreq), ea_free(in);
    return n_missing;
}

/* ------------------------------------------------------------ waiting */

static ea_status ea__wait(ea_dist *d, MPI_Request *req, const char *what, const char *op, double t0) {
    double deadline = t0 + d->timeout_s;
    for (long i = 0;; i++) {
        int flag = 0;
        int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return ea__mpi_err(d, rc, what, op);
        if (flag) break;
        ea__serve_pings(d);
        if (i < 64) continue;
        double now = ea_now_s();
        if (now >= deadline) {
            uint8_t *missing = ea_calloc((size_t)d->size, 1);
            double window = d->timeout_s * 0.2;
            if (window > 2.0) window = 2.0;
            if (window < 0.5) window = 0.5;
            int n_missing = missing ? ea__probe(d, window, missing) : -1;
            char list[256] = "";
            size_t o = 0;
            for (int r = 0; missing && r < d->size && o < sizeof list - 16; r++)
                if (missing[r]) o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", o ? ", " : "", r);
            ea_free(missing);
            if (n_missing > 0)
                snprintf(d->error, sizeof d->error,
                         "rank %d: collective '%s' (%s) timed out after %.1f s: rank(s) %s did not arrive "
                         "(no answer to a ping within %.1f s)",
                         d->rank, what, op, d->timeout_s, list, window);
            else
                snprintf(d->error, sizeof d->error,
                         "rank %d: collective '%s' (%s) timed out after %.1f s: every rank answered a ping, "
                         "so some are alive but in a different collective (ranks out of step)",
                         d->rank, what, op, d->timeout_s);
            set_broken(d);
            d->st.seconds += ea_now_s() - t0;
            return ea_err(EA_ERR_TIMEOUT, "%s", d->error);
        }
        long us = 10L << (i - 64 < 7 ? i - 64 : 7); /* 10 us .. 1.28 ms */
        ea__sleep_us(us > 1000 ? 1000 : us);
    }
    d->st.n_collectives++;
    d->st.seconds += ea_now_s() - t0;
    return EA_OK;
}

static ea_status ea__check(ea_dist *d, const char *what) {
    if (d->broken)
        return ea_err(EA_ERR_PEER, "rank %d: collective '%s' refused: an earlier collective failed (%s)", d->rank,
                      what, d->error);
    return EA_OK;
}

/* ------------------------------------------------------------ lifecycle */

ea_status ea_dist_create(int *argc, char ***argv, double timeout_s, ea_dist **out) {
    *out = NULL;
    if (!(timeout_s > 0)) return ea_err(EA_ERR_INVALID_ARG, "--dist-timeout must be > 0 (got %g)", timeout_s);
    ea_dist *d = ea_calloc(1, sizeof *d);
    if (!d) return ea_err(EA_ERR_NOMEM, "dist context");
    d->timeout_s = timeout_s;
    d->comm = d->ping = MPI_COMM_NULL;
    for (int i = 0; i < EA__PONG_RING; i++) d->pong_req[i] = MPI_REQUEST_NULL;
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            ea_free(d);
            return ea_err(EA_ERR_PEER, "MPI_Init_thread failed (code %d)", rc);
        }
        d->we_initialized = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &d->comm) != MPI_SUCCESS || MPI_Comm_dup(MPI_COMM_WORLD, &d->ping) != MPI_SUCCESS) {
        ea_dist_destroy(d);
        return ea_err(EA_ERR_PEER, "MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(d->ping, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    size_t n = strcspn(lib, "\n,");
    if (n >= sizeof d->library) n = sizeof d->library - 1;
    memcpy(d->library, lib, n);
    d->library[n] = 0;
    if (provided < MPI_THREAD_SERIALIZED && d->rank == 0)
        fprintf(stderr, "eaas: warning: MPI gives thread level %d (< SERIALIZED); keep MPI calls on the main thread\n",
                provided);
    *out = d;
    return EA_OK;
}

void ea_dist_destroy(ea_dist *d) {
    if (!d) return;
    if (!d->broken) {
        for (int i = 0; i < EA__PONG_RING; i++)
            if (d->pong_req[i] != MPI_REQUEST_NULL) MPI_Request_free(&d->pong_req[i]);
        if (d->ping != MPI_COMM_NULL) MPI_Comm_free(&d->ping);
        if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
        if (d->we_initialized) MPI_Finalize();
    }
    ea_free(d->scratch);
    ea_free(d);
}

int ea_dist_rank(const ea_dist *d) { return d->rank; }
int ea_dist_size(const ea_dist *d) { return d->size; }
double ea_dist_timeout(const ea_dist *d) { return d->timeout_s; }
void ea_dist_set_timeout(ea_dist *d, double timeout_s) {
    if (timeout_s > 0) d->timeout_s = timeout_s;
}
int ea_dist_healthy(const ea_dist *d) { return !atomic_load_explicit(&((ea_dist *)d)->broken, memory_order_acquire); }
const char *ea_dist_error(const ea_dist *d) { return d->error; }
const char *ea_dist_library(const ea_dist *d) { return d->library; }
void ea_dist_get_stats(const ea_dist *d, ea_dist_stats *out) { *out = d->st; }

ea_status ea_dist_reserve(ea_dist *d, size_t bytes) {
    size_t need;
    if (!ea_mul_ok(bytes, (size_t)d->size, &need)) return ea_err(EA_ERR_RANGE, "dist scratch of %zu bytes x %d", bytes, d->size);
    if (need <= d->scratch_cap) return EA_OK;
    uint8_t *p = ea_realloc(d->scratch, need);
    if (!p) return ea_err(EA_ERR_NOMEM, "dist scratch of %zu bytes", need);
    d->scratch = p;
    d->scratch_cap = need;
    return EA_OK;
}

/* ------------------------------------------------------------ collectives */

ea_status ea_dist_barrier(ea_dist *d, const char *what) {
    EA_TRY(ea__check(d, what));
    double t0 = ea_now_s();
    MPI_Request req;
    int rc = MPI_Ibarrier(d->comm, &req);
    if (rc != MPI_SUCCESS) return ea__mpi_err(d, rc, what, "barrier");
    return ea__wait(d, &req, what, "barrier", t0);
}

ea_status ea_dist_bcast(ea_dist *d, void *buf, size_t n, int root, const char *what) {
    EA_TRY(ea__check(d, what));
    if (root < 0 || root >= d->size) return ea_err(EA_ERR_INVALID_ARG, "bcast '%s': root %d of %d ranks", what, root, d->size);
    if (n > INT_MAX) return ea_err(EA_ERR_RANGE, "bcast '%s' of %zu bytes (limit %d)", what, n, INT_MAX);
    double t0 = ea_now_s();
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)n, MPI_BYTE, root, d->comm, &req);
    if (rc != MPI_SUCCESS) return ea__mpi_err(d, rc, what, "bcast");
    EA_TRY(ea__wait(d, &req, what, "bcast", t0));
    if (d->rank == root) d->st.bytes_sent += n;
    else d->st.bytes_recv += n;
    return EA_OK;
}

ea_status ea_dist_bcast_msg(ea_dist *d, ea_sbuf *m, int root, size_t max_len, const char *what) {
    uint64_t len = d->rank == root ? (uint64_t)m->len : 0;
    EA_TRY(ea_dist_bcast(d, &len, sizeof len, root, what));
    if (len > max_len || len > INT_MAX) {
        snprintf(d->error, sizeof d->error, "rank %d: message '%s' of %llu bytes exceeds the limit of %zu", d->rank,
                 what, (unsigned long long)len, max_len);
        set_broken(d); /* the root's next bcast would not be matched: stop here on every rank */
        return ea_err(EA_ERR_RANGE, "%s", d->error);
    }
    if (d->rank != root) {
        ea_sbuf_reset(m);
        if (len > 0 && !ea_sbuf_extend(m, (size_t)len)) {
            snprintf(d->error, sizeof d->error, "rank %d: no memory for message '%s' of %llu bytes", d->rank, what,
                     (unsigned long long)len);
            set_broken(d);
            return ea_err(EA_ERR_NOMEM, "%s", d->error);
        }
    }
    if (len == 0) return EA_OK;
    return ea_dist_bcast(d, m->data, (size_t)len, root, what);
}

/* counts and displacements as MPI's ints, or EA_ERR_RANGE naming the collective */
static ea_status ea__int_counts(const size_t *c, int n, int *ci, int *oi, size_t *total, const char *what) {
    size_t off = 0;
    for (int r = 0; r < n; r++) {
        if (c[r] > INT_MAX || off > INT_MAX)
            return ea_err(EA_ERR_RANGE, "'%s': %zu bytes at offset %zu for rank %d exceed MPI's int counts", what, c[r],
                          off, r);
        ci[r] = (int)c[r];
        oi[r] = (int)off;
        off += c[r];
    }
    *total = off;
    return EA_OK;
}

ea_status ea_dist_alltoallv(ea_dist *d, const void *send, const size_t *sendc, void *recv, const size_t *recvc,
                            const char *what) {
    EA_TRY(ea__check(d, what));
    int n = d->size;
    int *v = ea_malloc(sizeof(int) * 4 * (size_t)n);
    if (!v) return ea_err(EA_ERR_NOMEM, "alltoallv '%s'", what);
    size_t sent = 0, got = 0;
    ea_status s = ea__int_counts(sendc, n, v, v + n, &sent, what);
    if (s == EA_OK) s = ea__int_counts(recvc, n, v + 2 * n, v + 3 * n, &got, what);
    if (s == EA_OK) {
        double t0 = ea_now_s();
        MPI_Request req;
        int rc = MPI_Ialltoallv(send, v, v + n, MPI_BYTE, recv, v + 2 * n, v + 3 * n, MPI_BYTE, d->comm, &req);
        s = rc != MPI_SUCCESS ? ea__mpi_err(d, rc, what, "alltoallv") : ea__wait(d, &req, what, "alltoallv", t0);
        if (s == EA_OK) {
            d->st.bytes_sent += sent - sendc[d->rank];
            d->st.bytes_recv += got - recvc[d->rank];
        }
    }
    ea_free(v);
    return s;
}

ea_status ea_dist_allgatherv(ea_dist *d, const void *send, void *recv, const size_t *counts, const char *what) {
    EA_TRY(ea__check(d, what));
    int n = d->size;
    int *v = ea_malloc(sizeof(int) * 2 * (size_t)n);
    if (!v) return ea_err(EA_ERR_NOMEM, "allgatherv '%s'", what);
    size_t off = 0;
    ea_status s = ea__int_counts(counts, n, v, v + n, &off, what);
    if (s == EA_OK) {
        double t0 = ea_now_s();
        MPI_Request req;
        int rc = MPI_Iallgatherv(send, v[d->rank], MPI_BYTE, recv, v, v + n, MPI_BYTE, d->comm, &req);
        s = rc != MPI_SUCCESS ? ea__mpi_err(d, rc, what, "allgatherv") : ea__wait(d, &req, what, "allgatherv", t0);
        if (s == EA_OK) {
            d->st.bytes_sent += counts[d->rank];
            d->st.bytes_recv += off - counts[d->rank];
        }
    }
    ea_free(v);
    return s;
}

ea_status ea_dist_allreduce_sum_f32(ea_dist *d, float *buf, size_t n, const char *what) {
    EA_TRY(ea__check(d, what));
    size_t bytes = n * sizeof(float);
    if (bytes / sizeof(float) != n || bytes > INT_MAX)
        return ea_err(EA_ERR_RANGE, "allreduce '%s' of %zu floats", what, n);
    EA_TRY(ea_dist_reserve(d, bytes)); /* no-op once reserved at set-up */
    double t0 = ea_now_s();
    MPI_Request req;
    int rc = MPI_Iallgather(buf, (int)bytes, MPI_BYTE, d->scratch, (int)bytes, MPI_BYTE, d->comm, &req);
    if (rc != MPI_SUCCESS) return ea__mpi_err(d, rc, what, "allreduce");
    EA_TRY(ea__wait(d, &req, what, "allreduce", t0));
    d->st.bytes_sent += bytes;
    d->st.bytes_recv += bytes * (size_t)(d->size - 1);
    const float *all = (const float *)(void *)d->scratch;
    for (size_t i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int r = 0; r < d->size; r++) acc += all[(size_t)r * n + i];
        buf[i] = acc;
    }
    return EA_OK;
}

static ea_status ea__allreduce_i64(ea_dist *d, int64_t *v, int n, MPI_Op op, const char *what) {
    EA_TRY(ea__check(d, what));
    double t0 = ea_now_s();
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, op, d->comm, &req);
    if (rc != MPI_SUCCESS) return ea__mpi_err(d, rc, what, "allreduce");
    EA_TRY(ea__wait(d, &req, what, "allreduce", t0));
    d->st.bytes_sent += sizeof(int64_t) * (size_t)n;
    d->st.bytes_recv += sizeof(int64_t) * (size_t)n;
    return EA_OK;
}

ea_status ea_dist_allreduce_max_i64(ea_dist *d, int64_t *v, int n, const char *what) {
    return ea__allreduce_i64(d, v, n, MPI_MAX, what);
}

ea_status ea_dist_allreduce_sum_i64(ea_dist *d, int64_t *v, int n, const char *what) {
    return ea__allreduce_i64(d, v, n, MPI_SUM, what);
}
