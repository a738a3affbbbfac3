/* emit_c.h - what the files of the C dialect share (emit_c*.c): the
 * parallel loops and the elementwise chain loop (emit_c_chain.c), and the
 * function of each kernel kind that the frame (emit_c.c) calls:
 *   emit_c_chain.c   KK_ELEMWISE, and the epilogue loop of the others
 *   emit_c_gemm.c    KK_GEMM
 *   emit_c_conv.c    KK_CONV, KK_POOL, KK_RESAMPLE
 *   emit_c_nhwc.c    the loops over a kept NHWC / nChw8c conv result
 *   emit_c_reduce.c  KK_ROW, KK_REDUCE
 *   emit_c_copy.c    KK_EMBED, KK_CAT, KK_COPY
 *   emit_c_attn.c    KK_ATTN
 * The files depend downwards only: the frame on the kind files, those on
 * emit_c_chain.c, all of them on emit.h's shared pieces. */
#ifndef DPC_EMIT_C_H
#define DPC_EMIT_C_H

#include "emit.h"

/* ---------------------------------------------------------- threads
 *
 * A kernel's outer loop is split over the replica's threads (ctx->threads,
 * its share of the cores: backend_cpu.c) by an OpenMP `parallel for` with a
 * static schedule, when the kernel touches at least DPC_PAR_MIN elements;
 * smaller ones stay on the calling thread (forking costs more than they
 * take, measured: docs/performance.md). Only independent iterations are
 * split (elements, rows, columns), never a reduction, so the result does
 * not depend on the thread count. The kernels are compiled with -fopenmp
 * (backend_cpu.c); oneDNN's GEMMs use the same OpenMP runtime. */
#define DPC_PAR_MIN 32768

/* The pragma emit_par_for writes (the frame drops its lines from a
 * kernel's single-thread copy, NAME_1t). */
#define PAR_FOR_PRAGMA "#pragma omp parallel for schedule(static) num_threads(ctx->threads)"

/* emit_c_chain.c */
void emit_par_for(dpc_buf *o, const char *indent, int collapse, const char *work);
int emit_unit_dim(const kaccess *a, int ra, const shape *os);
void emit_dim_loops(dpc_buf *o, const shape *os, const char *total, int near);
void emit_chain_loop_from(const kgraph *kg, const kernel *k, dpc_buf *o, const char *seed, int from);
void emit_chain_loop(const kgraph *kg, const kernel *k, dpc_buf *o, const char *seed);

/* the kinds: the body of kernel k's function, after its declarations */
void emit_c_gemm(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_conv(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_pool(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_resample(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_kept_loops(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_row(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_reduce(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_embed(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_cat(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_c_copy(const kgraph *kg, const kernel *k, dpc_buf *o);
void emit_attn_c(const kgraph *kg, const kernel *k, dpc_buf *o);

#endif
