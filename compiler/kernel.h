/* kernel.h - the kernel IR that fuse.c lowers the graph IR into, and that
 * the emitters (emit_c*.c, emit_cuda*.c) render as source.
 *
 * A kernel computes one materialised value (its `out`, the tail of a fused
 * chain). Kernels run in the order of their tails' ids, which is a
 * topological order because every materialised operand is itself a tail
 * with a smaller id. Values that are not materialised are either inside a
 * fused chain (registers), views of a buffer (reshape of a contiguous value,
 * permute, slice and expand read through strides), or leaves (constants and scalars). */
#ifndef DPC_KERNEL_H
#define DPC_KERNEL_H

#include "dpc_compile.h"
#include "ir.h"
#include "kabi.h"

typedef enum kkind {
    KK_ELEMWISE, /* a chain of elementwise ops (and batch norm) */
    KK_GEMM,     /* linear / matmul through the GEMM library, then an epilogue chain */
    KK_CONV,     /* conv2d: im2col + GEMM, then an epilogue chain */
    KK_POOL,     /* max/avg/adaptive pooling */
    KK_ROW,      /* softmax, log_softmax, layer_norm: one pass per row */
    KK_REDUCE,   /* sum, mean, amax over one axis */
    KK_EMBED,    /* embedding gather */
    KK_CAT,      /* concatenation */
    KK_COPY,     /* materialise a view (permute, slice, expand) as a contiguous tensor */
    KK_ATTN,     /* softmax(chain(q @ k^T)) @ v in one pass, online softmax (fuse_attention) */
    KK_RESAMPLE, /* conv_transpose2d, upsample: a gather per output pixel, then an epilogue chain */
} kkind;

/* How a value is read: from the buffer of `base` (a materialised value,
 * input or parameter) in its contiguous layout, through strides (a view:
 * permute, slice, index, expand), or as a leaf (constant / scalar, base ==
 * the leaf). */
typedef enum acc_kind { ACC_CONTIG, ACC_STRIDED, ACC_LEAF } acc_kind;
typedef struct kaccess {
    acc_kind kind;
    ir_node *base;
    /* ACC_STRIDED: element (c0, c1, ...) of the view is element
     * off + off_n * N + sum(c_i * stride[i]) of base's buffer; a stride is
     * k or k*N (dim.sym), 0 for an expanded dim */
    dim stride[IR_MAX_RANK];
    int64_t off, off_n;
} kaccess;

typedef struct kernel {
    int id;
    kaccess src;     /* KK_COPY: what it copies */
    kkind kind;
    ir_node *root;  /* the op that is not elementwise (gemm, conv, row...) or NULL */
    vec ops;        /* ir_node*: elementwise ops in order (the body, or the epilogue) */
    ir_node *out;   /* the tail: the value written */
    const char *name;
    int scratch;    /* KK_CONV: buffer id of the im2col columns [K, N*Ho*Wo]; KK_RESAMPLE conv_transpose2d
                     * (C dialect): the columns of one image and group; else -1 */
    int scratch2;   /* KK_CONV: buffer id of the GEMM result [Cout, N*Ho*Wo], else -1 */
    /* KK_ATTN: root is the scores matmul q @ k^T ([B.., L, E] @ [B.., E, S]),
     * ops the elementwise chain on the scores (scale, mask), then softmax
     * over the last dim, pv = softmax @ v ([B.., S, Ev]), and perm, when
     * not NULL, the permute of pv (keeping the last dim) that the kernel
     * writes contiguously instead of pv. out is perm or pv. */
    struct {
        ir_node *softmax, *pv, *perm;
    } attn;
    bool prepare;   /* reads parameters and constants only: runs once per load (kgraph.nprepare) */
    /* KK_GEMM of a linear whose weight W [out, in] is a parameter: W
     * transposed, [in, out], written once per load by a prepare copy, so
     * the GEMM reads both operands untransposed (faster: docs/performance.md);
     * the root's operand 1 reads it in W's place. NULL: W read transposed. */
    ir_node *wt;
} kernel;

/* kbuf, buf_kind and kbuf_esize: dpc_compile.h (the memory plan reads them). */

typedef struct unfused {
    ir_node *producer, *consumer;
    const char *why;
} unfused;

typedef struct kgraph {
    ir_graph *g;
    vec kernels;  /* kernel*, in execution order: the prepare kernels first */
    int nprepare; /* kernels[0..nprepare-1] read only parameters and constants (no
                   * input, no batch size, no scalar) and write BUF_CONST buffers: they
                   * run once when the weights are bound, not in every forward */
    vec bufs;     /* kbuf* */
    int *buf_of;  /* per IR node id: buffer id holding its data (views share), -1 if none */
    int *kern_of; /* per IR node id: kernel computing it, -1 for leaves and views */
    kaccess *acc;  /* per IR node id: how it is read */
    vec unfused;  /* unfused* */
    vec out_bufs; /* per graph output, its buffer id */
    /* Fusion never changes its input graph: the copies it adds (a graph
     * output that is an input, a view or a value returned twice gets a
     * buffer of its own) are nodes of the kernel graph only, with ids from
     * g->nodes.len on. The per-node tables above have nnodes entries. */
    vec copies;   /* ir_node*: copy node of id g->nodes.len + i */
    int nnodes;   /* g->nodes.len + copies.len */
    vec outputs;  /* ir_node*: per graph output, the node whose buffer holds it */
} kgraph;

/* x's access as strides: a contiguous x over its own shape (x may be a
 * reshape of its base's data, which is contiguous over the base buffer),
 * or the view x already is (fusion's views, the attention kernel's q, k, v). */
kaccess kaccess_strided(const kgraph *kg, const ir_node *x);

/* The node of id `id`, a graph node or a copy added by fusion. */
const ir_node *kgraph_node(const kgraph *kg, int id);

/* The one enumeration of the buffers a kernel reads: liveness (fuse.c),
 * the CPU declarations (emit_c.c) and the CUDA parameter lists
 * (emit_cuda_plan.c) all walk it, so none can miss a buffer another sees, and
 * a chain of any length is walked whole. With from < 0: the root's
 * operands (every kind but KK_COPY), then the operands of every op of the
 * chain, then a KK_COPY's source. With from >= 0: the operands of
 * ops[from..] of the chain only (what a CUDA epilogue kernel reads besides
 * the root's result). Operands without a buffer are skipped: leaves, and
 * values the kernel computes itself (an earlier op of the chain, the root
 * under an epilogue). A buffer read twice is yielded twice. */
typedef struct koperand_iter {
    const kgraph *kg;
    const kernel *k;
    bool all; /* from < 0 */
    int op;   /* -1: the root; 0..ops.len-1: the chain; ops.len: the copy source */
    int arg;  /* next operand of that op */
} koperand_iter;
koperand_iter kernel_operands(const kgraph *kg, const kernel *k, int from);
bool koperand_next(koperand_iter *it, int *node, int *buf);

/* attn.c: the attention pattern (docs/internals.md, "Fused attention"). */
typedef struct attn_match {
    ir_node *qk, *softmax, *pv, *perm; /* perm may be NULL */
    int nchain;                        /* elementwise ops between qk and softmax */
    ir_node *chain[16];
} attn_match;
/* Per node id, the index of the match it belongs to (-1 none); the matches
 * in *out (arena). */
int *attn_find(dpc_ctx *c, const ir_graph *g, const bool *is_output, vec *out);
/* The largest head dim (E, Ev) the fused kernel takes. */
#define ATTN_MAX_HEAD 128

/* fuse.c (fuse_graph also hoists the prepare kernels) */
bool fuse_graph(dpc_ctx *c, ir_graph *g, kgraph *kg);
void fuse_print(const kgraph *kg, dpc_buf *out);
/* dot.c: the graph and its kernels as Graphviz (`dpc graph`). */
void kgraph_dot(const kgraph *kg, dpc_buf *out);
double kgraph_flops(const kgraph *kg, int64_t N);
/* "elementwise", "gemm", ...: the one name of each kind. */
const char *kkind_name(kkind k);

/* emit_c.c / emit_cuda.c: deterministic source, one function per kernel,
 * each op commented with its .dp line. */
void emit_c(const kgraph *kg, dpc_buf *out);
void emit_cuda(const kgraph *kg, kprec prec, dpc_buf *out);

/* emit_cuda.c: the source (as emit_cuda writes it) and its launch plan
 * (kabi.h). *source is malloc'ed; free the plan with dpc_cu_plan_free.
 * DPC_EUSER (naming the op and its .dp line) for a graph the CUDA dialect
 * cannot run, DPC_ENOMEM. */
dpc_status dpc_cuda_program(const kgraph *kg, kprec prec, char **source, dpc_cu_plan *plan, dpc_err *e);
/* dpc_cu_plan_free: dpc_compile.h. */

/* conv_post.c: conv kernel k as one library call (dpc_conv_desc), with the
 * node id of its residual (-1 none); and k's index among the conv kernels. */
void conv_describe(const kgraph *kg, const kernel *k, dpc_conv_desc *d, int *sum_node);
/* conv_post.c: d's y_keep, y_convs, y_blk, src_conv, sum_conv and w_const (d from
 * conv_describe of k, sum its sum_node). */
void conv_keep_marks(const kgraph *kg, const kernel *k, dpc_conv_desc *d, int sum);
int conv_index_of(const kgraph *kg, const kernel *k);
/* conv_post.c: the value a pool or elementwise kernel reads in the layout
 * of its result when it has an NHWC loop (-1: none), *absorbs when its
 * result is [N, C, 1, 1]; and the conv whose kept result decides which
 * loop runs (ctx->kept of kabi.h; -1: the NCHW loop only); whether such
 * a kernel also has an nChw8c loop. */
int conv_nhwc_source(const kgraph *kg, const kernel *k, bool *absorbs);
bool conv_cl_view(const kgraph *kg, const ir_node *x, const shape *os);
bool conv_blk_reader(const kgraph *kg, const kernel *k);
int conv_nhwc_root(const kgraph *kg, const kernel *k);

/* compile.c: a dialect's source of a kernel graph, as dpc_unit_source
 * (tests that hold a kernel graph). */
void dpc_kgraph_source(const kgraph *kg, dpc_dialect d, kprec prec, dpc_buf *out);

#endif
