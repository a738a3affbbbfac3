/* backend_cpu.h - the CPU backend (backend.h): the C dialect of the kernels
 * compiled by the host compiler into a shared object, GEMMs through the
 * CPU GEMM library. The kernel ABI is compiler/kabi.h (dpc_cpu_kctx). */
#ifndef DPC_BACKEND_CPU_H
#define DPC_BACKEND_CPU_H

#include "backend.h"

/* params[i] points at model parameter i (f32), shared by all replicas: the
 * CPU needs no copy. */
dpc_status dpc_backend_cpu_new(const dpc_unit *u, float *const *params, dpc_backend **out, dpc_err *e);
/* GEMM threads per replica of the CPU backend be (its share of the cores;
 * set before running several replicas at once). Each backend has its own:
 * one program's device list does not change another's. */
void dpc_cpu_set_gemm_threads(dpc_backend *be, int n);
/* be's GEMM threads per replica (1 until set); 0 when be is not a CPU backend. */
int dpc_cpu_gemm_threads(const dpc_backend *be);
/* Products below this many multiply-adds (GEMMs, convolutions) run on one
 * thread: waking a second one costs more than it saves. 2^19 is about 5 us
 * of work; the 2^22 it was left MobileNet's and EfficientNet's batch-1
 * convs (15-150 us each) on one thread of two (docs/performance.md,
 * "Two threads at batch 1"). */
#define DPC_CPU_PARALLEL_MIN (1 << 19)
/* How many times be ran its prepare kernels (once per load, shared by its
 * replicas; again after weights_changed); -1 when be is not a CPU backend. */
long dpc_cpu_prepare_runs(const dpc_backend *be);
/* The generated C source, as the CPU backend compiles it. */
char *dpc_cpu_source(const dpc_unit *u);

#endif
