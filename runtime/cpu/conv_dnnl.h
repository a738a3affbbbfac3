/* conv_dnnl.h - the CPU backend's convolutions as oneDNN primitives
 * (built with DPC_BLAS=dnnl): every conv2d kernel of the unit
 * (dpc_unit_conv) becomes one oneDNN convolution with its bias and
 * post-ops fused, created per replica and batch size when the replica
 * plans that size, its weights reordered once into the layout the
 * primitive prefers and kept for the backend's life, its scratchpad in a
 * per-replica buffer: a forward neither allocates nor reorders weights.
 * backend_cpu.c hands it to the generated C as ctx->conv (kabi.h).
 *
 * The layout the primitive computes in is chosen by DPC_CONV_LAYOUT:
 * "nhwc" (oneDNN's brgemm kernels on AVX-512, depthwise and 1x1
 * included), "blocked" (oneDNN picks: nChw8c on AVX2), "plain" (NCHW
 * throughout; oneDNN then runs its GEMM-based convolution, gemm:jit) or
 * "auto", the default (nhwc with AVX-512, else blocked where it measures
 * faster: auto_layout). Outside plain, a conv's result that only convs
 * read stays NHWC in its buffer (the compiler's y_keep, unless
 * DPC_CONV_KEEP=0), or in the primitives' own layout when no NHWC reader
 * reads it and they all take that one (opaque_fits), and a call reorders
 * only where a tensor's layout is not the primitive's: docs/internals.md,
 * "Convolutions on the CPU"; docs/performance.md. */
#ifndef DPC_CONV_DNNL_H
#define DPC_CONV_DNNL_H

#include "base.h"
#include "cpu_env.h"
#include "dpc_compile.h"

typedef struct dpc_dnnl_convs dpc_dnnl_convs; /* per backend: descriptions, engine, weights */
typedef struct dpc_dnnl_rconvs dpc_dnnl_rconvs; /* per replica: primitives per batch size */

typedef void (*dpc_dnnl_threads_fn)(int n);

/* The unit's convolutions over params (model parameter i at params[i]),
 * as the switches env asks (dpc_conv_env_read); *out NULL when the unit
 * has none or env switches them off. set_threads bounds the library's
 * threads (called before each creation and execution). */
dpc_status dpc_dnnl_convs_new(const dpc_unit *u, float *const *params, const dpc_conv_env *env,
                              dpc_dnnl_threads_fn set_threads, dpc_dnnl_convs **out, dpc_err *e);
void dpc_dnnl_convs_free(dpc_dnnl_convs *c);

/* The replica's primitives for batch N with at most `threads` threads per
 * convolution (created once per (N, threads), a few sets kept). *r is
 * created on first use. A convolution oneDNN refuses is declined (the
 * kernel computes it itself); other failures are errors. */
dpc_status dpc_dnnl_plan(dpc_dnnl_convs *c, dpc_dnnl_rconvs **r, int64_t N, int threads, dpc_err *e);
void dpc_dnnl_rconvs_free(dpc_dnnl_rconvs *r);

/* Runs conv i of the planned set (ctx->conv's contract: 0 done, 1
 * declined, -1 failed with e set). */
int dpc_dnnl_run(dpc_dnnl_rconvs *r, int i, const float *x, const float *w, const float *bias, const float *sum,
                 float *y, dpc_err *e);

/* The prepare kernels ran (their results, weights of some convs, changed):
 * those weights are reordered again at their next call. */
void dpc_dnnl_consts_changed(dpc_dnnl_convs *c);
/* The parameters were bound again (dpc_model_bind): the kept layouts of
 * parameter weights are reordered again from the new values at their next
 * call, so a bind keeps the backend, its primitives and its plans. */
void dpc_dnnl_params_changed(dpc_dnnl_convs *c);

/* Whether oneDNN dispatches AVX-512 kernels here (its effective ISA, which
 * DNNL_MAX_CPU_ISA lowers): the layouts and GEMM paths measured fastest
 * differ with and without (auto_layout; linear_dnnl.h). */
bool dpc_dnnl_avx512(void);

/* The layout conv i's result is kept in by the planned set, ctx->kept's
 * answer (compiler/kabi.h): 0 none, DPC_KEPT_NHWC, DPC_KEPT_NCHW8C. */
int dpc_dnnl_kept(const dpc_dnnl_rconvs *r, int i);

/* The implementation oneDNN chose for conv i of the planned set
 * ("jit:avx512_core", "gemm:jit", ...; "declined"), for tests and docs. */
const char *dpc_dnnl_impl(const dpc_dnnl_rconvs *r, int i);

#endif
