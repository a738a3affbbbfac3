/* pool.h - the worker threads dpc owns, for running CPU replicas (and, later,
 * any other fork-join work) concurrently without a thread per call.
 *
 * A pool of N threads is the calling thread plus N-1 workers started once by
 * dpc_pool_create. dpc_pool_run(pool, ntasks, fn, arg) calls fn(arg, t) for
 * t = 0..ntasks-1 and returns when every call has returned (fork-join).
 *
 * Task placement is static, so it is predictable and thread-local state
 * (fault-injection counters, a GEMM library's per-thread settings, NUMA
 * first-touch of a replica's weights) stays with a task number across runs:
 *   task t runs on participant t % N, where participant 0 is the calling
 *   thread and participant j >= 1 is worker j; a participant with several
 *   tasks runs them in increasing order.
 * So with ntasks <= N every task has its own thread and they all run at the
 * same time; a single task runs on the caller, with no thread hop and no
 * worker woken; workers with no task in a run are not woken either.
 *
 * Cost: the caller publishes the job with one atomic store per worker used
 * and joins with one atomic counter. Workers spin briefly (tens of
 * microseconds) waiting for the next job before sleeping on a condition
 * variable, so back-to-back runs cost a few microseconds and an idle pool
 * costs no CPU. Worker threads block all signals (signals go to the
 * application's threads).
 *
 * Thread safety: dpc_pool_run may be called from several threads; the runs
 * are serialised. A task that calls dpc_pool_run on the pool it is running
 * in gets its tasks run one after the other on its own thread (no deadlock).
 * dpc_pool_destroy must not race with a run. */
#ifndef DPC_POOL_H
#define DPC_POOL_H

#include "base.h"

#define DPC_POOL_MAX_THREADS 1024

typedef struct dpc_pool dpc_pool;
typedef void (*dpc_pool_fn)(void *arg, int task);

/* A pool of nthreads threads, the caller included (1 <= nthreads <=
 * DPC_POOL_MAX_THREADS): nthreads - 1 workers are started. DPC_EUSAGE for a
 * bad count, DPC_ENOMEM when memory or a thread cannot be had. */
dpc_status dpc_pool_create(int nthreads, dpc_pool **out, dpc_err *e);
/* Runs fn(arg, t) for t in [0, ntasks) as described above and joins them
 * all. ntasks <= 0 does nothing. fn reports failures through arg. */
void dpc_pool_run(dpc_pool *pool, int ntasks, dpc_pool_fn fn, void *arg);
/* N, as given to dpc_pool_create. */
int dpc_pool_threads(const dpc_pool *pool);
/* Stops and joins the workers; NULL is ignored. */
void dpc_pool_destroy(dpc_pool *pool);

/* The number of CPUs this process may run on (its affinity mask, so taskset
 * and cpusets are honoured), at least 1. */
int dpc_cpu_count(void);

#endif
