/* emit.h - pieces the C and CUDA emitters share. */
#ifndef DPC_EMIT_H
#define DPC_EMIT_H

#include "kernel.h"

const char *emit_dim(char *b, size_t n, dim d);
const char *emit_prod(char *b, size_t n, const shape *s, int from, int to);
void emit_comment(dpc_buf *o, const char *indent, const ir_node *n);
void emit_offset(const kgraph *kg, dpc_buf *o, const ir_node *x, const shape *os, bool coords_ok);
void emit_coords(dpc_buf *o, const char *indent, const shape *os);
/* A leaf (constant, forward scalar, the batch size) as a float expression;
 * every kernel of both dialects has `ctx` and the local `N`. */
void emit_leaf(dpc_buf *o, const ir_node *leaf);
void emit_elementwise_op(const kgraph *kg, const kernel *k, dpc_buf *o, const ir_node *n, const shape *os,
                         const char *indent, const char *pre, bool cuda);

#endif
