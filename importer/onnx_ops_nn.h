/* onnx_ops_nn.h - the handlers of the op rows for Pad, Resize/Upsample,
 * ConvTranspose and InstanceNormalization (onnx_ops_nn.c); their rows are
 * in onnx_ops.c's imp_ops[] with the others. */
#ifndef DPC_ONNX_OPS_NN_H
#define DPC_ONNX_OPS_NN_H

#include "onnx_imp.h"

dpc_status imp_op_pad(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_resize(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_convtranspose(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_instancenorm(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_groupnorm(imp *I, const Onnx__NodeProto *n);

/* onnx_ops.c's member naming, shared: a member named after the initializer
 * of weight value w (or the node), and its declaration line with the
 * "# from INIT" comment. */
const char *imp_member_name(imp *I, const Onnx__NodeProto *n, int w, const char *fallback);
char *imp_member_line(imp *I, const char *decl, int w);

#endif
