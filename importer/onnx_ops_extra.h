/* onnx_ops_extra.h - the handlers of the op rows that onnx_ops.c's table
 * ends with (onnx_ops_extra.c). */
#ifndef DPC_ONNX_OPS_EXTRA_H
#define DPC_ONNX_OPS_EXTRA_H

#include "onnx_imp.h"

dpc_status imp_op_act_extra(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_prelu(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_variadic(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_reduce_extra(imp *I, const Onnx__NodeProto *n);
dpc_status imp_op_tile(imp *I, const Onnx__NodeProto *n);

#endif
