/* onnx_ops.h - the functions of the op table's rows (onnx_ops.c), by the
 * family file that holds them, and what one family lends another. Private
 * to the importer. */
#ifndef DPC_ONNX_OPS_H
#define DPC_ONNX_OPS_H

#include "onnx_imp.h"

/* onnx_ops_const.c: the ops that make constants */
dpc_status imp_op_constant(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_constant_of_shape(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_range(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_shape(imp *I, const Onnx__NodeProto *n);

/* onnx_ops_shape.c: shape, layout and element type */
dpc_status imp_op_unsqueeze(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_squeeze(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_reshape(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_flatten(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_transpose(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_identity(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_cast(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_expand(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_tile(imp *I, const Onnx__NodeProto *n);

/* onnx_ops_slice.c: pieces and joins */
dpc_status imp_op_gather(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_concat(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_slice(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_split(imp *I, const Onnx__NodeProto *n);

/* onnx_ops_act.c: one-input elementwise ops and activations */
dpc_status imp_op_unary(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_act(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_clip(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_act_extra(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_prelu(imp *I, const Onnx__NodeProto *n);

/* onnx_ops_binary.c: elementwise ops of two or more inputs */
dpc_status imp_op_binary(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_where(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_variadic(imp *I, const Onnx__NodeProto *n);

/* onnx_ops_fused.c: whether the Add or Mul node n (inputs a, b, output
 * out) ends a decomposed module (Erf-GELU, SiLU, LayerNorm, MatMul + Add);
 * then its statement is written and *s is the status. */
bool imp_fuse_binary(imp *I, const Onnx__NodeProto *n, int a, int b, int out, dpc_status *s);

/* onnx_ops_linear.c: matrix products */
dpc_status imp_op_gemm(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_matmul(imp *I, const Onnx__NodeProto *n);
/* Linear's statement: out = Linear(x) with W [out, in] (already
 * transposed), its weight value wv (for the member's name), bias b or -1. */
dpc_status imp_linear_stmt(imp *I, const Onnx__NodeProto *n, int out, int x, dpc_tensor *W, int wv, int b);

/* onnx_ops_norm.c: normalisations */
dpc_status imp_op_batchnorm(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_layernorm(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_instancenorm(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_groupnorm(imp *I, const Onnx__NodeProto *n);
/* LayerNorm's statement over x's last dim: weight gamma, bias beta or -1. */
dpc_status imp_layernorm_stmt(imp *I, const Onnx__NodeProto *n, int out, int x, int gamma, int beta, double eps);

/* onnx_ops_conv.c: convolutions and pools */
dpc_status imp_op_conv(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_convtranspose(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_pool(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_global_pool(imp *I, const Onnx__NodeProto *n);

/* onnx_ops_reduce.c: Reduce* */
dpc_status imp_op_reduce(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_reduce_extra(imp *I, const Onnx__NodeProto *n);

/* onnx_ops_pad_resize.c: Pad, Resize and Upsample */
dpc_status imp_op_pad(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_resize(imp *I, const Onnx__NodeProto *n);

#endif
