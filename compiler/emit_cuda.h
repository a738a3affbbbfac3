/* emit_cuda.h - what the files of the CUDA dialect share (emit_cuda*.c):
 * the emitter's state, sizes as k * N^p, and the functions that write
 * one __global__ function and plan its launch (emit_cuda_plan.c) and the
 * elementwise chain kernel (emit_cuda_chain.c), and the function of each
 * kernel kind that the frame (emit_cuda.c) calls:
 *   emit_cuda_chain.c   KK_ELEMWISE, and the epilogue of the others
 *   emit_cuda_gemm.c    KK_GEMM
 *   emit_cuda_conv.c    KK_CONV, KK_POOL, KK_RESAMPLE
 *   emit_cuda_reduce.c  KK_ROW, KK_REDUCE
 *   emit_cuda_copy.c    KK_EMBED, KK_CAT, KK_COPY
 *   emit_cuda_attn.c    KK_ATTN
 * The files depend downwards only: the frame on the kind files, those on
 * emit_cuda_chain.c and emit_cuda_plan.c, all of them on emit.h's shared
 * pieces. */
#ifndef DPC_EMIT_CUDA_H
#define DPC_EMIT_CUDA_H

#include "emit.h"
#include "kabi.h"

#include <stdio.h>

/* ---------------------------------------------------------- state */

typedef struct cg {
    const kgraph *kg;
    dpc_buf *o;
    dpc_cu_plan *plan; /* may be NULL: source only */
    int cap;
    int kernel;        /* index of the kernel being emitted */
    size_t counted;    /* bytes of o already scanned for newlines */
    int lines;         /* newlines in o[0, counted) */
    const char *unit;  /* the generated source's own name, "<Model>.cu" */
    /* one function per distinct body: the repeated layers of a model share
     * their kernels (see dedupe) */
    size_t fn_start;   /* where the function being written starts, or NO_FN */
    size_t saved_counted;
    int saved_lines;
    char fn_name[512];
    const char *cur_fn, *cur_suffix; /* the function launches refer to */
    struct seen_fn {
        char *canon;
        const char *fn, *suffix;
    } *seen;
    int nseen, capseen;
    dpc_status st;     /* first failure */
    dpc_err *e;
    kprec prec;        /* how float buffers are stored */
    const char *ft;    /* their element type: float, dpc_bf16, dpc_f16 */
} cg;

#define NO_FN ((size_t)-1)

static inline const kbuf *kb(const cg *g, int id) { return g->kg->bufs.items[id]; }

/* ---------------------------------------------------------- sizes: k * N^p */

static inline dpc_cu_dim cd(int64_t k, int p) { return (dpc_cu_dim){k, p}; }
static inline dpc_cu_dim cd_of(dim d) { return cd(d.k, d.sym ? 1 : 0); }
static inline dpc_cu_dim cd_mul(dpc_cu_dim a, dpc_cu_dim b) { return cd(a.k * b.k, a.p + b.p); }
static inline bool cd_eq(dpc_cu_dim a, dpc_cu_dim b) { return a.k == b.k && (a.k == 0 || a.p == b.p); }
static inline bool cd_one(dpc_cu_dim a) { return a.k == 1 && a.p == 0; }

static inline dpc_cu_dim cd_prod(const shape *s, int from, int to) {
    dpc_cu_dim r = cd(1, 0);
    for (int i = from; i < to; i++)
        r = cd_mul(r, cd_of(s->d[i]));
    return r;
}

/* As a device-code expression. */
static inline const char *cd_str(char *b, size_t n, dpc_cu_dim d) {
    if (d.p == 0)
        snprintf(b, n, "%lldLL", (long long)d.k);
    else if (d.p == 1)
        snprintf(b, n, d.k == 1 ? "N" : "(%lldLL * N)", (long long)d.k);
    else
        snprintf(b, n, "(%lldLL * N * N)", (long long)d.k);
    return b;
}

/* As text for a comment: 8, N, 8*N. */
static inline const char *cd_txt(char *b, size_t n, dpc_cu_dim d) {
    if (d.p == 0)
        snprintf(b, n, "%lld", (long long)d.k);
    else if (d.k == 1)
        snprintf(b, n, d.p == 1 ? "N" : "N*N");
    else
        snprintf(b, n, d.p == 1 ? "%lld*N" : "%lld*N*N", (long long)d.k);
    return b;
}

/* The header of a grid-stride loop over i < total, after `for (long long i = `. */
static inline const char *grid_stride(void) {
    return "blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x";
}

/* ---------------------------------------------------------- emit_cuda_plan.c */

/* The translation unit fails (DPC_EUSER, naming op n and its .dp line, or
 * the graph when n is NULL) and the source holds an #error. */
void cu_fail(cg *g, const ir_node *n, const char *what);
void cu_comment_loc(dpc_buf *o, const ir_node *n);
void cu_line_of(cg *g, const ir_node *n);
dpc_cu_step *cu_new_step(cg *g, dpc_cu_step_kind kind);

/* Buffer parameters of one launch: the written buffer first, then those read. */
typedef struct plist {
    int n;
    int id[DPC_CU_MAX_PARAMS];
    bool wr[DPC_CU_MAX_PARAMS];
} plist;

void cu_padd(cg *g, plist *pl, int buf, bool write);
void cu_padd_chain(cg *g, plist *pl, const kernel *k, int from);
/* The function `fn`'s head (the comment before it just written) and its
 * tail; then the launch of the function, or of an identical one written
 * before (the dedupe). */
void cu_kernel_head(cg *g, const char *fn, const plist *pl);
void cu_kernel_tail(cg *g);
dpc_cu_launch *cu_plan_launch(cg *g, const char *fn, const char *suffix, dpc_cu_grid grid, dpc_cu_dim work, int vec,
                              const plist *pl);

/* ---------------------------------------------------------- emit_cuda_chain.c */

void cu_coords(cg *g, const shape *os, const char *indent);
void cu_emit_ops(cg *g, const kernel *k, int from, const shape *os, const char *indent, const char *pre);
void cu_chain_kernel(cg *g, const kernel *k, const char *fn, int from, const char *seed, int seed_id,
                     bool seed_reads_out, bool seed_coords, const plist *extra);
bool cu_reads_after(const kernel *k, int from, int id);

/* ---------------------------------------------------------- the kinds */

/* emit_cuda_gemm.c; cu_new_gemm is also the conv's GEMM step */
dpc_cu_gemm *cu_new_gemm(cg *g, int a, int b, int c);
void emit_cuda_linear(cg *g, const kernel *k);
void emit_cuda_matmul(cg *g, const kernel *k);
/* emit_cuda_conv.c */
void emit_cuda_conv(cg *g, const kernel *k);
void emit_cuda_pool(cg *g, const kernel *k);
void emit_cuda_resample(cg *g, const kernel *k);
/* emit_cuda_reduce.c */
void emit_cuda_row(cg *g, const kernel *k);
void emit_cuda_reduce(cg *g, const kernel *k);
/* emit_cuda_copy.c */
void emit_cuda_embed(cg *g, const kernel *k);
void emit_cuda_cat(cg *g, const kernel *k);
void emit_cuda_copy(cg *g, const kernel *k);
/* emit_cuda_attn.c */
void emit_attn_cuda(cg *g, const kernel *k);

#endif
