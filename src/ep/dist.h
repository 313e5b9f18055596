/*
 * dist.h — the MPI layer of eaas: a launcher context and collectives that
 * never hang.
 *
 * This header is MPI-free: only src/ep/dist.c includes <mpi.h> (STYLE.md), so
 * the rest of the code sees an opaque context and ea_status codes. It builds
 * against OpenMPI and MPICH alike (MPI-3 only: non-blocking collectives,
 * MPI_Comm_set_errhandler, MPI_Iprobe).
 *
 *   ea_dist *d;
 *   EA_TRY(ea_dist_create(&argc, &argv, 30.0, &d));       // MPI_Init_thread
 *   if (ea_dist_rank(d) == 0) fill(buf);
 *   EA_TRY(ea_dist_bcast(d, buf, n, 0, "config"));          // every rank, same order
 *   ...
 *   ea_dist_destroy(d);                                     // MPI_Finalize (if healthy)
 *
 * Deadlines. Every collective is started non-blocking (MPI_Ibcast,
 * MPI_Iallgatherv, MPI_Iallgather, MPI_Iallreduce, MPI_Ialltoallv, MPI_Ibarrier) and polled
 * with MPI_Test and short sleeps until it completes or `timeout_s` passes.
 * While a rank polls it also answers pings on a private duplicate of
 * MPI_COMM_WORLD. On expiry it pings every other rank and waits a short
 * window: ranks that do not answer are dead, or stuck outside MPI — they "did
 * not arrive" — and the error (EA_ERR_TIMEOUT) names them:
 *
 *   rank 0: collective 'layer 1 combine' (allgatherv) timed out after 30.0 s:
 *   rank(s) 1 did not arrive (no answer to a ping within 2.0 s)
 *
 * A collective that cannot complete can be neither cancelled nor finished, so
 * after any failure the context is broken: later collectives fail at once
 * (EA_ERR_PEER) and ea_dist_destroy skips MPI_Finalize (which would hang on
 * the dead peer). The caller should report and exit. Errors the MPI library
 * itself returns (MPI_ERRORS_RETURN is set on our communicators) become
 * EA_ERR_PEER with the library's message.
 *
 * Threads: MPI is initialised with MPI_THREAD_SERIALIZED; all calls on one
 * context must come from one thread at a time (the step loop). Not reentrant.
 *
 * Determinism: ea_dist_allreduce_sum_f32 gathers every rank's vector and adds
 * them in rank order 0..N-1 starting from 0.0f, so every rank gets the same
 * bits and a run is reproducible (MPI_Allreduce promises neither).
 */
#ifndef EA_DIST_H
#define EA_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "base/sbuf.h"
#include "base/status.h"

typedef struct ea_dist ea_dist;

/* Launcher detection from the environment (no MPI call): 1 if this process was
 * started by mpirun/mpiexec (OpenMPI OMPI_COMM_WORLD_SIZE, MPICH/Hydra PMI_SIZE,
 * PMIx PMIX_RANK). */
int ea_dist_launched(void);
/* The world size the launcher announced, or 0 if unknown / not launched. */
int ea_dist_launch_size(void);

/* Initialise MPI (once per process) and build the context. timeout_s > 0 is the
 * deadline of every collective. argc/argv may be NULL. */
ea_status ea_dist_create(int *argc, char ***argv, double timeout_s, ea_dist **out);
/* MPI_Finalize when healthy; after a failure only frees (see above). NULL is fine. */
void ea_dist_destroy(ea_dist *d);

int ea_dist_rank(const ea_dist *d);
int ea_dist_size(const ea_dist *d);
double ea_dist_timeout(const ea_dist *d);
void ea_dist_set_timeout(ea_dist *d, double timeout_s);
/* 0 once a collective failed or timed out; the error message stays in ea_dist_error. */
int ea_dist_healthy(const ea_dist *d);
const char *ea_dist_error(const ea_dist *d);
/* "Open MPI v4.1.4, ..." (library version string, first line). */
const char *ea_dist_library(const ea_dist *d);

/* Make sure collectives of up to `bytes` per rank need no allocation later
 * (allreduce scratch is size * bytes). Call at set-up time. */
ea_status ea_dist_reserve(ea_dist *d, size_t bytes);

/* `what` names the collective in error messages ("layer 3 combine"). */
ea_status ea_dist_barrier(ea_dist *d, const char *what);
/* buf (n bytes) from root to all. */
ea_status ea_dist_bcast(ea_dist *d, void *buf, size_t n, int root, const char *what);

/* A byte message of any length (an ea_sbuf, base/sbuf.h), e.g. the control
 * bus's event batch: root's m->data[0..len) to every rank, length first, then
 * bytes. Non-root ranks get m's content replaced (m grows as needed; the
 * caller frees it with ea_sbuf_deinit); `max_len` bounds what they accept. */
ea_status ea_dist_bcast_msg(ea_dist *d, ea_sbuf *m, int root, size_t max_len, const char *what);

/* Every rank contributes send[0..counts[rank]) bytes; recv gets all
 * contributions concatenated in rank order (recv holds sum(counts) bytes).
 * counts (size entries) must be the same on every rank. */
ea_status ea_dist_allgatherv(ea_dist *d, const void *send, void *recv, const size_t *counts, const char *what);

/* Every rank sends send[...] to every other: sendc[r] bytes to rank r (in rank
 * order, back to back in send) and receives recvc[r] bytes from rank r (in rank
 * order into recv). The counts must match pairwise (what r sends to q is what
 * q expects from r); a rank's own share is copied locally. */
ea_status ea_dist_alltoallv(ea_dist *d, const void *send, const size_t *sendc, void *recv, const size_t *recvc,
                            const char *what);

/* buf (n floats) = sum over ranks, added in rank order from 0.0f (same bits on every rank). */
ea_status ea_dist_allreduce_sum_f32(ea_dist *d, float *buf, size_t n, const char *what);
/* v (n values) = element-wise max / sum over ranks (MPI_Iallreduce; exact for integers). */
ea_status ea_dist_allreduce_max_i64(ea_dist *d, int64_t *v, int n, const char *what);
ea_status ea_dist_allreduce_sum_i64(ea_dist *d, int64_t *v, int n, const char *what);

/* Communication statistics of this rank since create. */
typedef struct {
    uint64_t n_collectives;
    uint64_t bytes_sent, bytes_recv; /* payload bytes this rank contributed / received */
    double seconds;                  /* wall time inside collectives (including waiting for peers) */
    uint64_t pings_answered;
} ea_dist_stats;
void ea_dist_get_stats(const ea_dist *d, ea_dist_stats *out);

#endif
