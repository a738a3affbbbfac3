/* dp_overhead.c - host overhead of dpc_dp_forward per replica per forward,
 * with a replica function that does (almost) nothing, for 1..4 replicas on
 * "cpu" devices and a pool of 4 threads.
 *
 *   no output:   fn returns at once; measures scatter + pool fork/join.
 *   1 output:    fn allocates its [rows, 16] float32 output; adds the
 *                allocation and the gather copy.
 *
 * Each figure is the best of 5 rounds of the mean over many forwards.
 * Usage: dp_overhead [seconds per round, default 0.2] */
#define _POSIX_C_SOURCE 200809L
#include "dataparallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static dpc_status noop_fn(void *ctx, int replica, const dpc_device *dev, dpc_replica_io *io, dpc_err *e) {
    return DPC_OK;
}

static dpc_status alloc_fn(void *ctx, int replica, const dpc_device *dev, dpc_replica_io *io, dpc_err *e) {
    int64_t shape[2] = {io->inputs[0].shape[0], 16};
    return dpc_tensor_new(DPC_F32, 2, shape, &io->outputs[0], e);
}

/* Nanoseconds per forward: best over 5 rounds of `secs` each. */
static double measure(dpc_pool *pool, const dpc_device *devs, int n, dpc_replica_fn fn, int noutputs,
                      const dpc_tensor *x, double secs) {
    const dpc_tensor *in[1] = {x};
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        long iters = 0;
        double t0 = now_s(), t;
        do {
            for (int i = 0; i < 256; i++) {
                dpc_tensor *out[1] = {NULL};
                dpc_err e;
                if (dpc_dp_forward(pool, devs, n, fn, NULL, in, 1, NULL, NULL, 0, noutputs, out, NULL, &e)) {
                    fprintf(stderr, "forward failed: %s\n", e.msg);
                    exit(1);
                }
                dpc_tensor_free(out[0]);
            }
            iters += 256;
            t = now_s();
        } while (t - t0 < secs);
        double ns = (t - t0) * 1e9 / (double)iters;
        if (ns < best)
            best = ns;
    }
    return best;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.2;
    if (!(secs > 0))
        secs = 0.2;
    dpc_device devs[4];
    for (int i = 0; i < 4; i++)
        devs[i] = (dpc_device){DPC_DEV_CPU, 0};
    dpc_pool *pool = NULL;
    dpc_err e;
    if (dpc_pool_create(4, &pool, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    printf("dpc_dp_forward host overhead, no-op replicas, pool of 4 threads, %d CPUs available\n",
           dpc_cpu_count());
    printf("%-9s %14s %14s %14s %14s\n", "replicas", "none ns/fwd", "ns/replica", "1-out ns/fwd", "ns/replica");
    for (int n = 1; n <= 4; n++) {
        dpc_tensor *x = NULL;
        int64_t shape[2] = {8 * n, 16};
        if (dpc_tensor_new(DPC_F32, 2, shape, &x, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        double a = measure(pool, devs, n, noop_fn, 0, x, secs);
        double b = measure(pool, devs, n, alloc_fn, 1, x, secs);
        printf("%-9d %14.0f %14.0f %14.0f %14.0f\n", n, a, a / n, b, b / n);
        dpc_tensor_free(x);
    }
    dpc_pool_destroy(pool);
    return 0;
}
