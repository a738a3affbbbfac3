/* replan_cost.c - what a change of batch size costs a served model on the
 * CPU backend, through the public API (dpc.h) only.
 *
 * The CPU backend plans memory and oneDNN convolution primitives per batch
 * size and keeps the primitives of the last few sizes per replica. A
 * dynamic batcher under load sends batches of every size from 1 to
 * max-batch, so this measures, for MODEL at batch sizes SIZES:
 *   steady    ms per forward at each size, planned (the same size again)
 *   first     ms of the first forward at a size never run (a plan)
 *   change    the cost of a change of batch size before each forward:
 *             every size once in turn (which re-plans each forward once
 *             there are more sizes than the backend keeps) against the
 *             same forwards each run right after one of its own size,
 *             interleaved round by round; wall and process CPU time
 * Usage: replan_cost MODEL.dp WEIGHTS DEVICES ROUNDS SIZE...
 * Build: cc -O2 -std=c11 -Iruntime/api bench/replan_cost.c -Lbuild -ldpc
 *        -Wl,-rpath,$PWD/build -o replan_cost */
#define _POSIX_C_SOURCE 200809L
#include "dpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static dpc_program *P;
static dpc_tensor *X[64];

static double run(int i) {
    dpc_tensor *out[8] = {NULL};
    int no = dpc_program_num_outputs(P);
    const dpc_tensor *in[1] = {X[i]};
    double t0 = now_ms();
    if (dpc_program_run(P, in, 1, NULL, NULL, 0, out, no) != DPC_OK) {
        fprintf(stderr, "run: %s\n", dpc_program_error(P));
        exit(1);
    }
    double t = now_ms() - t0;
    for (int k = 0; k < no; k++)
        dpc_tensor_free(out[k]);
    return t;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: replan_cost MODEL.dp WEIGHTS DEVICES ROUNDS SIZE...\n");
        return 2;
    }
    int rounds = atoi(argv[4]), n = argc - 5;
    if (n > 64)
        n = 64;
    if (dpc_program_load(argv[1], &P) != DPC_OK || dpc_program_bind_weights(P, argv[2]) != DPC_OK ||
        dpc_program_set_devices(P, argv[3]) != DPC_OK) {
        fprintf(stderr, "load: %s\n", dpc_last_error());
        return 1;
    }
    int rank;
    int64_t shape[DPC_MAX_RANK];
    dpc_program_input(P, 0, NULL, NULL, &rank, shape);
    int64_t sizes[64];
    for (int i = 0; i < n; i++) {
        sizes[i] = atoll(argv[5 + i]);
        int64_t s[DPC_MAX_RANK];
        for (int d = 0; d < rank; d++)
            s[d] = shape[d] < 0 ? -shape[d] * sizes[i] : shape[d];
        if (dpc_tensor_create(DPC_F32, rank, s, NULL, &X[i]) != DPC_OK)
            return 1;
        float *f = dpc_tensor_data(X[i]);
        for (int64_t k = 0; k < dpc_tensor_numel(X[i]); k++)
            f[k] = (float)((k * 7919) % 1000) * 1e-3f;
    }
    /* first: compiles the kernels at the first size; then each size's first run */
    run(0);
    double first[64], steady[64];
    for (int i = 1; i < n; i++)
        first[i] = run(i);
    first[0] = 0;
    for (int i = 0; i < n; i++) {
        double best = 1e30;
        run(i);
        for (int r = 0; r < rounds; r++) {
            double t = run(i);
            best = t < best ? t : best;
        }
        steady[i] = best;
    }
    /* the same forwards with and without a change of size before each,
     * interleaved round by round so that the load of the machine cancels:
     * A runs every size once in turn (a change of size before each);
     * B runs every size twice in a row and counts the second run (none).
     * Wall and process CPU time (all threads). */
    double aw = 0, bw = 0, ac = 0, bc = 0;
    for (int r = 0; r < rounds; r++) {
        double c0 = cpu_ms();
        for (int i = 0; i < n; i++)
            aw += run(i);
        ac += cpu_ms() - c0;
        for (int i = 0; i < n; i++) {
            run(i);
            c0 = cpu_ms();
            bw += run(i);
            bc += cpu_ms() - c0;
        }
    }
    printf("size   steady_ms  first_ms\n");
    for (int i = 0; i < n; i++)
        printf("%4lld  %9.2f  %8.2f\n", (long long)sizes[i], steady[i], first[i]);
    printf("%d sizes, %d rounds: changing size before each forward costs x%.3f wall (%.2f vs %.2f ms per forward), "
           "x%.3f CPU (%.2f vs %.2f ms)\n",
           n, rounds, aw / bw, aw / (rounds * n), bw / (rounds * n), ac / bc, ac / (rounds * n), bc / (rounds * n));
    for (int i = 0; i < n; i++)
        dpc_tensor_free(X[i]);
    dpc_program_free(P);
    return 0;
}
