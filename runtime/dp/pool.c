/* pool.c - a fork-join worker pool: static task placement, a generation
 * counter per worker to hand out a job, one counter to join, and
 * spin-then-sleep waits on both sides.
 *
 * Wake-up protocol (used twice: caller -> worker for a job, last worker ->
 * caller for the join). The waiter spins for up to SPIN_NS, then announces
 * `sleeping = 1` and re-checks its condition under its mutex before waiting
 * on the condition variable. The waker first makes the condition true, then
 * reads `sleeping`, and only if it is set takes the mutex and signals. Both
 * sides use sequentially consistent atomics, so at least one of them sees
 * the other's store: either the waiter sees the condition and does not
 * sleep, or the waker sees `sleeping` and signals under the mutex (which
 * cannot happen between the waiter's re-check and its wait). An uncontended
 * run therefore makes no system call at all. */
#include "pool.h"
#include "tensor.h" /* dpc_aligned_alloc */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a waiting thread spins before it sleeps. Long enough to cover
 * the gap between back-to-back forwards, short enough that an idle pool
 * stops burning CPU almost at once. */
#define SPIN_NS 50000ull

typedef struct worker {
    _Alignas(64) atomic_uint gen; /* bumped by the caller to hand over a job */
    atomic_int sleeping;
    /* The job: written by the caller before it bumps gen, read by the worker
     * after it sees the new gen, not written again before the join. */
    int ntasks;
    dpc_pool_fn fn;
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    struct dpc_pool *pool;
    int index; /* participant number, 1..N-1 */
} worker;

struct dpc_pool {
    int nthreads;
    int nworkers; /* started; nthreads - 1 once created */
    worker *w;    /* w[j - 1] is participant j */
    pthread_mutex_t run_mu; /* serialises runs from different threads */
    atomic_bool stop;
    _Alignas(64) atomic_int pending; /* workers of this run not yet done */
    atomic_int caller_sleeping;
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
};

/* The pool whose task this thread is running (workers: always their pool). */
static _Thread_local const dpc_pool *tl_pool;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Spins until done(a, old) or SPIN_NS pass; true if done. */
static inline bool spin_until(bool (*done)(void *a, unsigned old), void *a, unsigned old) {
    uint64_t start = 0;
    for (unsigned i = 1;; i++) {
        if (done(a, old))
            return true;
        cpu_relax();
        if ((i & 255) == 0) {
            uint64_t t = now_ns();
            if (!start)
                start = t;
            else if (t - start > SPIN_NS)
                return false;
            sched_yield(); /* let a descheduled worker run on a busy machine */
        }
    }
}

static bool changed(void *a, unsigned old) { return atomic_load_explicit((atomic_uint *)a, memory_order_acquire) != old; }
static bool is_zero(void *a, unsigned old) {
    (void)old;
    return atomic_load_explicit((atomic_int *)a, memory_order_acquire) == 0;
}
/* Spins until *a != old, or *a == 0, or SPIN_NS pass; true if it happened. */
static bool spin_until_changed(atomic_uint *a, unsigned old) { return spin_until(changed, a, old); }
static bool spin_until_zero(atomic_int *a) { return spin_until(is_zero, a, 0); }

static void run_tasks(int first, int step, int ntasks, dpc_pool_fn fn, void *arg) {
    for (int t = first; t < ntasks; t += step)
        fn(arg, t);
}

static void *worker_main(void *p) {
    worker *w = p;
    dpc_pool *pool = w->pool;
    tl_pool = pool;
    unsigned seen = 0;
    for (;;) {
        if (!spin_until_changed(&w->gen, seen)) {
            atomic_store(&w->sleeping, 1);
            pthread_mutex_lock(&w->mu);
            while (atomic_load(&w->gen) == seen)
                pthread_cond_wait(&w->cv, &w->mu);
            pthread_mutex_unlock(&w->mu);
            atomic_store(&w->sleeping, 0);
        }
        seen = atomic_load_explicit(&w->gen, memory_order_acquire);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        run_tasks(w->index, pool->nthreads, w->ntasks, w->fn, w->arg);
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->caller_sleeping)) {
            pthread_mutex_lock(&pool->done_mu);
            pthread_cond_signal(&pool->done_cv);
            pthread_mutex_unlock(&pool->done_mu);
        }
    }
    return NULL;
}

static void wake(worker *w) {
    atomic_fetch_add(&w->gen, 1);
    if (atomic_load(&w->sleeping)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* Stops and joins the started workers, then frees everything. */
static void teardown(dpc_pool *pool) {
    atomic_store_explicit(&pool->stop, true, memory_order_release);
    for (int j = 0; j < pool->nworkers; j++)
        wake(&pool->w[j]);
    for (int j = 0; j < pool->nworkers; j++)
        pthread_join(pool->w[j].thread, NULL);
    for (int j = 0; j < pool->nthreads - 1; j++) {
        pthread_cond_destroy(&pool->w[j].cv);
        pthread_mutex_destroy(&pool->w[j].mu);
    }
    pthread_cond_destroy(&pool->done_cv);
    pthread_mutex_destroy(&pool->done_mu);
    pthread_mutex_destroy(&pool->run_mu);
    dpc_free(pool->w);
    dpc_free(pool);
}

dpc_status dpc_pool_create(int nthreads, dpc_pool **out, dpc_err *e) {
    *out = NULL;
    if (nthreads < 1 || nthreads > DPC_POOL_MAX_THREADS)
        return dpc_errf(e, DPC_EUSAGE, "a thread pool needs 1 to %d threads, not %d", DPC_POOL_MAX_THREADS,
                        nthreads);
    dpc_pool *pool = dpc_aligned_alloc(sizeof *pool);
    worker *w = nthreads > 1 ? dpc_aligned_alloc((size_t)(nthreads - 1) * sizeof *w) : NULL;
    if (!pool || (nthreads > 1 && !w)) {
        dpc_free(pool);
        dpc_free(w);
        return dpc_errf(e, DPC_ENOMEM, "out of memory creating a pool of %d threads", nthreads);
    }
    memset(pool, 0, sizeof *pool);
    if (w)
        memset(w, 0, (size_t)(nthreads - 1) * sizeof *w);
    pool->nthreads = nthreads;
    pool->w = w;
    atomic_init(&pool->stop, false);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->caller_sleeping, 0);
    /* Mutex and condition variable initialisation cannot fail on Linux
     * with default attributes (they allocate nothing). */
    pthread_mutex_init(&pool->run_mu, NULL);
    pthread_mutex_init(&pool->done_mu, NULL);
    pthread_cond_init(&pool->done_cv, NULL);
    for (int j = 0; j < nthreads - 1; j++) {
        atomic_init(&w[j].gen, 0);
        atomic_init(&w[j].sleeping, 0);
        pthread_mutex_init(&w[j].mu, NULL);
        pthread_cond_init(&w[j].cv, NULL);
        w[j].pool = pool;
        w[j].index = j + 1;
    }

    /* Workers start with every signal blocked: signals are the
     * application's business, and must not land on a pool thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    for (int j = 0; j < nthreads - 1; j++) {
        rc = pthread_create(&w[j].thread, NULL, worker_main, &w[j]);
        if (rc)
            break;
        pool->nworkers++;
#if defined(__GLIBC__)
        char name[16];
        snprintf(name, sizeof name, "dpc-pool-%d", (j + 1) % 10000); /* a name fits 15 bytes */
        pthread_setname_np(w[j].thread, name);
#endif
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        int started = pool->nworkers;
        teardown(pool);
        return dpc_errf(e, DPC_ENOMEM, "cannot start worker thread %d of a pool of %d: %s", started + 1,
                        nthreads, strerror(rc));
    }
    *out = pool;
    return DPC_OK;
}

void dpc_pool_run(dpc_pool *pool, int ntasks, dpc_pool_fn fn, void *arg) {
    if (ntasks <= 0)
        return;
    int n = pool->nthreads;
    if (ntasks == 1 || n == 1 || tl_pool == pool) {
        /* One task, no workers, or a task of this pool asking for more
         * work: run inline, in order. */
        run_tasks(0, 1, ntasks, fn, arg);
        return;
    }
    pthread_mutex_lock(&pool->run_mu);
    const dpc_pool *prev = tl_pool;
    tl_pool = pool;
    int used = ntasks < n ? ntasks : n; /* participants with a task */
    atomic_store_explicit(&pool->pending, used - 1, memory_order_relaxed);
    for (int j = 1; j < used; j++) {
        worker *w = &pool->w[j - 1];
        w->ntasks = ntasks;
        w->fn = fn;
        w->arg = arg;
        wake(w); /* seq_cst: publishes the job and pending */
    }
    run_tasks(0, n, ntasks, fn, arg);
    if (!spin_until_zero(&pool->pending)) {
        atomic_store(&pool->caller_sleeping, 1);
        pthread_mutex_lock(&pool->done_mu);
        while (atomic_load(&pool->pending) != 0)
            pthread_cond_wait(&pool->done_cv, &pool->done_mu);
        pthread_mutex_unlock(&pool->done_mu);
        atomic_store(&pool->caller_sleeping, 0);
    }
    tl_pool = prev;
    pthread_mutex_unlock(&pool->run_mu);
}

int dpc_pool_threads(const dpc_pool *pool) { return pool->nthreads; }

void dpc_pool_destroy(dpc_pool *pool) {
    if (pool)
        teardown(pool);
}

int dpc_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 1 << 20 ? 1 << 20 : n) : 1;
}
