/* emit.h - pieces the C and CUDA emitters share: escape.c (the user's
 * text), emit_expr.c (expressions inside a kernel) and emit_shared.c (the
 * kernels' geometry). Each dialect's own files share emit_c.h or
 * emit_cuda.h; nothing declared here calls into a dialect. */
#ifndef DPC_EMIT_H
#define DPC_EMIT_H

#include "kernel.h"

/* escape.c: the only way text or numbers from a user's file reach generated
 * source (see there for why and what each escapes). */
/* s as text inside a C comment: never ends the comment or the line. */
void emit_comment_text(dpc_buf *o, const char *s);
/* s as the characters between the quotes of a C string literal. */
void emit_string_text(dpc_buf *o, const char *s);
/* v as a C expression of type float (f32) or double: a decimal literal,
 * a hexadecimal one where the decimal text is not a plain number, or NAN
 * or INFINITY cast to the type. */
void emit_float(dpc_buf *o, double v, bool f32);
/* The same into b (at least EMIT_FLOAT_MAX bytes), for a printf argument. */
#define EMIT_FLOAT_MAX 64
const char *emit_float_str(char *b, size_t n, double v, bool f32);

/* emit_expr.c: the expressions both dialects write. */

/* The node of id `id` of the kernel graph (a graph node or a copy). */
static inline ir_node *nd(const kgraph *kg, int id) { return (ir_node *)kgraph_node(kg, id); }
/* d, or the product of dims [from, to) of s, as an expression (k or k*N). */
const char *emit_dim(char *b, size_t n, dim d);
const char *emit_prod(char *b, size_t n, const shape *s, int from, int to);
void emit_comment(dpc_buf *o, const char *indent, const ir_node *n);
void emit_offset(const kgraph *kg, dpc_buf *o, const ir_node *x, const shape *os, bool coords_ok);
void emit_coords(dpc_buf *o, const char *indent, const shape *os);
/* A leaf (constant, forward scalar, the batch size, an iota) as a float
 * expression read at output coordinates c0.. of shape os (an iota reads
 * its dim's coordinate; the leaf broadcasts to os); every kernel of both
 * dialects has `ctx` and the local `N`. */
void emit_leaf(dpc_buf *o, const ir_node *leaf, const shape *os);
/* Whether reading the leaf needs the coordinates c0.. (an iota). */
bool emit_leaf_needs_coords(const ir_node *leaf);
/* Whether some op of k's chain from ops[from] reads an iota. */
bool emit_chain_reads_iota(const kgraph *kg, const kernel *k, int from);
/* The offset of a strided view's element (vc[0], ...) (NULL: 0), or of
 * the element at coordinates c0, c1, ... */
void emit_strided(dpc_buf *o, const kaccess *a, const char *const *vc, int rank);
void emit_coord_offset(dpc_buf *o, const kaccess *a, int rank);
/* One elementwise op of k's chain as `const float vID = ...;` in dialect d;
 * false when the op table has no expression for it in d. */
bool emit_elementwise_op(const kgraph *kg, const kernel *k, dpc_buf *o, const ir_node *n, const shape *os,
                         const char *indent, const char *pre, ir_dialect d);

/* emit_shared.c: the arithmetic behind both dialects' kernels. */

/* torch.matmul's operands as stacks of matrices, 1-D operands promoted. */
typedef struct emit_mm {
    shape x, y;  /* the operands, rank >= 2 */
    shape batch; /* the broadcast batch dims */
    dim M, K, N; /* rows of x, the contracted dim, columns of y */
} emit_mm;
void emit_mm_geom(const shape *x, const shape *y, emit_mm *mm);
/* The dim of s (mm->x or mm->y) that batch dim i steps, or -1 where s
 * broadcasts along it. */
int emit_mm_axis(const emit_mm *mm, const shape *s, int i);

/* conv2d of x [N, C, H, W] by w [Co, C/G, kh, kw] into [N, Co, Ho, Wo];
 * each group's GEMM is [Cog, Kd] x [Kd, N * HW]. */
typedef struct emit_conv_dims {
    long long C, H, W, Co, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, G, Cg, Cog, Kd, HW;
} emit_conv_dims;
/* False when the groups do not divide the channels (Cg, Cog are then 0). */
bool emit_conv_geom(const ir_node *n, const ir_node *x, const ir_node *w, emit_conv_dims *c);

/* The statements computing output (oh, ow) of pooling op n from `src`, the
 * H x W plane of x, at indent `ind` with integer type `it`: they leave the
 * window's max in `m` or its sum in `s`, with its bounds h0, h1, w0, w1
 * (and, for avg_pool2d, the padded size `padded`). */
void emit_pool_window(dpc_buf *o, const ir_node *n, const ir_node *x, const char *ind, const char *it);
/* The fused attention kernel (KK_ATTN) of both dialects: q [B.., L, E],
 * kt [B.., E, S], v [B.., S, Ev] and the output [B.., L, Ev] (pv's
 * coordinates, written through the permute after it when the kernel has
 * one) as strides over their buffers. */
typedef struct emit_attn {
    int r, nb;            /* rank, batch dims (r - 2) */
    long long L, S, E, Ev;
    shape batch;          /* dims [0, nb) */
    kaccess q, kt, v, o;  /* ACC_STRIDED */
    int qb, kb, vb, ob;   /* their buffers */
} emit_attn;
void emit_attn_geom(const kgraph *kg, const kernel *k, emit_attn *a);
/* `indent`int_t c0..c{nb-1} of flat batch index `bi`, then the base
 * pointers qp, kp, vp (const T) and op (T) of that batch. */
void emit_attn_bases(const kgraph *kg, const emit_attn *a, dpc_buf *o, const char *indent, const char *int_t,
                     const char *T);
/* The scores chain at (c{r-2}, c{r-1}) (declared by the caller, with the
 * flat batch index bi): `dst` = chain(`src`). */
void emit_attn_chain(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o, const char *indent,
                     const char *int_t, const char *src, const char *dst, ir_dialect d);

/* Whether the value reads `padded` (avg_pool2d with count_include_pad). */
bool emit_pool_uses_padded(const ir_node *n);
/* The window bounds h0, h1, w0, w1 (and `padded`) of output (oh, ow) of
 * avg_pool2d or adaptive_avg_pool2d n, without the loop over it. */
void emit_pool_bounds(dpc_buf *o, const ir_node *n, const ir_node *x, const char *ind, const char *it);
/* The output value: `m`, or `s` over the divisor. */
const char *emit_pool_value(char *b, size_t n, const ir_node *p);

/* conv_transpose2d of x [N, C, H, W] by w [C, Co/G, kh, kw] into
 * [N, Co, Ho, Wo]: Cg, Cog per group, Kd = Cog * kh * kw (the rows of one
 * group's columns), HW = H * W (the input plane). False on bad groups. */
bool emit_convt_geom(const ir_node *n, const ir_node *x, const ir_node *w, emit_conv_dims *c);
/* Upsample n of x: the source rows (d 0: ih, or ih0, ih1, lh0, lh1) or
 * columns (d 1: iw...) of output coordinate `oc` (integer type `it`), then
 * the value read from `src`, the H x W plane of x, into `const float v`. */
void emit_upsample_dim(dpc_buf *o, const ir_node *n, const ir_node *x, int d, const char *oc, const char *ind,
                       const char *it);
void emit_upsample_value(dpc_buf *o, const ir_node *n, const ir_node *x, const char *ind);

#endif
