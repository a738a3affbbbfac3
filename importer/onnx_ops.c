/* onnx_ops.c - the importer's op table: one row per ONNX op type (the
 * opsets it covers, its inputs and outputs, the attributes it reads, its
 * function), the look-up of a node's row and the checks of the node against
 * it (domain, opset, attributes, arity), and the listing behind
 * `dpc import --list-ops`. A function folds its node when the inputs are
 * constants (shape plumbing) or adds a forward statement; the recognisers
 * of decomposed modules (Erf-GELU, LayerNorm, SiLU, MatMul + Add) sit in
 * the row of the pattern's last node. The functions are in the family files
 * onnx_ops_*.c (declared in onnx_ops.h). Adding an op: write its function
 * and add its row (docs/onnx.md). */
#include "onnx_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACT "alpha beta"
const imp_op imp_ops[] = {
    {"Abs", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"Add", 7, 0, "2", "1", "", imp_op_binary, "MatMul + Add -> Linear; the end of a decomposed LayerNorm -> LayerNorm"},
    {"And", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"AveragePool", 7, 0, "1", "1", "kernel_shape strides pads auto_pad ceil_mode count_include_pad dilations", imp_op_pool,
     "2-D, symmetric pads, not dilated"},
    {"BatchNormalization", 7, 0, "5", "1-5, 14: 1-3", "epsilon momentum training_mode spatial", imp_op_batchnorm,
     "-> BatchNorm2d/1d"},
    {"Cast", 6, 0, "1", "1", "to saturate", imp_op_cast, "float32, bool, int64; int32/16/8 and uint8 of floats, bools and constants"},
    {"Celu", 12, 0, "1", "1", "alpha", imp_op_act_extra, NULL},
    {"Clip", 6, 0, "1, 11: 1-3", "1", "min max", imp_op_clip, "Clip(0, 6) -> relu6"},
    {"Concat", 4, 0, "1+", "1", "axis", imp_op_concat, NULL},
    {"Constant", 9, 0, "0", "1", "value value_float value_floats value_int value_ints", imp_op_constant, NULL},
    {"ConstantOfShape", 9, 0, "1", "1", "value", imp_op_constant_of_shape, "constant shapes"},
    {"Conv", 1, 0, "2-3", "1", "kernel_shape strides pads dilations group auto_pad", imp_op_conv, "2-D, symmetric pads -> Conv2d"},
    {"ConvTranspose", 1, 0, "2-3", "1", "auto_pad dilations group kernel_shape output_padding output_shape pads strides",
     imp_op_convtranspose, "2-D -> ConvTranspose2d; asymmetric pads cropped"},
    {"Div", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"Dropout", 7, 0, "1, 12: 1-3", "1-2", "ratio seed", imp_op_identity, "identity (inference)"},
    {"Elu", 6, 0, "1", "1", "alpha", imp_op_act_extra, NULL},
    {"Equal", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"Erf", 9, 0, "1", "1", "", imp_op_unary, "x * (1 + erf(x / sqrt 2)) * 0.5 -> gelu"},
    {"Exp", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"Expand", 8, 0, "2", "1", "", imp_op_expand, NULL},
    {"Flatten", 1, 0, "1", "1", "axis", imp_op_flatten, "axis 1"},
    {"Gather", 1, 0, "2", "1", "axis", imp_op_gather, "constants; Gather(table, ids) -> Embedding; a constant index"},
    {"Gelu", 20, 0, "1", "1", "approximate", imp_op_act_extra, "-> gelu (none, tanh)"},
    {"Gemm", 7, 0, "3, 11: 2-3", "1", "alpha beta transA transB", imp_op_gemm, "-> Linear"},
    {"GlobalAveragePool", 1, 0, "1", "1", "", imp_op_global_pool, NULL},
    {"GlobalMaxPool", 1, 0, "1", "1", "", imp_op_global_pool, NULL},
    {"Greater", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"GreaterOrEqual", 12, 0, "2", "1", "", imp_op_binary, NULL},
    {"GroupNormalization", 18, 0, "3", "1", "epsilon num_groups stash_type", imp_op_groupnorm,
     "-> GroupNorm (18: a scale and bias a group, 21: a channel)"},
    {"HardSigmoid", 6, 0, "1", "1", ACT, imp_op_act, NULL},
    {"HardSwish", 14, 0, "1", "1", "", imp_op_unary, NULL},
    {"Identity", 1, 0, "1", "1", "", imp_op_identity, NULL},
    {"InstanceNormalization", 6, 0, "3", "1", "epsilon", imp_op_instancenorm, "-> GroupNorm(C, C)"},
    {"LayerNormalization", 17, 0, "2-3", "1-3", "axis epsilon stash_type", imp_op_layernorm, "-> LayerNorm"},
    {"LeakyRelu", 6, 0, "1", "1", "alpha", imp_op_act, NULL},
    {"Less", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"LessOrEqual", 12, 0, "2", "1", "", imp_op_binary, NULL},
    {"Log", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"LogSoftmax", 1, 0, "1", "1", "axis", imp_op_act, NULL},
    {"MatMul", 1, 0, "2", "1", "", imp_op_matmul, "a constant 2-D right operand -> Linear"},
    {"Max", 8, 0, "1+", "1", "", imp_op_variadic, "NaN propagates"},
    {"MaxPool", 8, 0, "1", "1-2", "kernel_shape strides pads dilations auto_pad ceil_mode storage_order", imp_op_pool, "2-D"},
    {"Mean", 8, 0, "1+", "1", "", imp_op_variadic, NULL},
    {"Min", 8, 0, "1+", "1", "", imp_op_variadic, "NaN propagates"},
    {"Mish", 18, 0, "1", "1", "", imp_op_act_extra, NULL},
    {"Mul", 7, 0, "2", "1", "", imp_op_binary, "x * sigmoid(x) -> silu; the end of an Erf GELU -> gelu"},
    {"Neg", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"Not", 1, 0, "1", "1", "", imp_op_unary, NULL},
    {"Or", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"PRelu", 7, 0, "2", "1", "", imp_op_prelu, "slope broadcast to x"},
    {"Pad", 2, 0, "1, 11: 2-3, 18: 2-4", "1", "mode pads value", imp_op_pad, "constant, reflect, edge (not wrap); constant pads and axes, not of the batch dim"},
    {"Pow", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"Range", 11, 0, "3", "1", "", imp_op_range, "constant bounds"},
    {"Reciprocal", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"ReduceL1", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceL2", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceLogSum", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceLogSumExp", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceMax", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce, "not over the batch dim"},
    {"ReduceMean", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce, "not over the batch dim"},
    {"ReduceMin", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceSum", 1, 0, "1, 13: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce, "not over the batch dim"},
    {"ReduceSumSquare", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"Relu", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"Reshape", 5, 0, "2", "1", "allowzero", imp_op_reshape, "a constant shape (run-time dims folded); the batch dim kept"},
    {"Resize", 10, 0, "2, 11: 1-4", "1",
     "coordinate_transformation_mode cubic_coeff_a exclude_outside extrapolation_value mode nearest_mode antialias axes "
     "keep_aspect_ratio_policy",
     imp_op_resize, "rank 4, H and W: nearest where its pixels are dpc's, linear half_pixel/align_corners"},
    {"Selu", 6, 0, "1", "1", "alpha gamma", imp_op_act_extra, NULL},
    {"Shape", 1, 0, "1", "1", "start end", imp_op_shape, "folded"},
    {"Shrink", 9, 0, "1", "1", "lambd bias", imp_op_act_extra, NULL},
    {"Sigmoid", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"Sign", 9, 0, "1", "1", "", imp_op_act_extra, "float"},
    {"Sin", 7, 0, "1", "1", "", imp_op_unary, NULL},
    {"Slice", 10, 0, "3-5", "1", "", imp_op_slice, "constant bounds, steps >= 1, not on the batch dim"},
    {"Softmax", 1, 0, "1", "1", "axis", imp_op_act, NULL},
    {"Softplus", 1, 0, "1", "1", "", imp_op_act_extra, NULL},
    {"Softsign", 1, 0, "1", "1", "", imp_op_act_extra, NULL},
    {"Split", 2, 0, "1, 13: 1-2", "1+", "axis split num_outputs", imp_op_split, "not along the batch dim"},
    {"Sqrt", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"Squeeze", 1, 0, "1, 13: 1-2", "1", "axes", imp_op_squeeze, NULL},
    {"Sub", 7, 0, "2", "1", "", imp_op_binary, NULL},
    {"Sum", 8, 0, "1+", "1", "", imp_op_variadic, NULL},
    {"Tanh", 6, 0, "1", "1", "", imp_op_unary, NULL},
    {"ThresholdedRelu", 10, 0, "1", "1", "alpha", imp_op_act_extra, NULL},
    {"Tile", 6, 0, "2", "1", "", imp_op_tile, "constant repeats, not of the batch dim"},
    {"Transpose", 1, 0, "1", "1", "perm", imp_op_transpose,
     "the batch dim stays first; nn.MultiheadAttention's export -> MultiheadAttention"},
    {"Unsqueeze", 1, 0, "1, 13: 2", "1", "axes", imp_op_unsqueeze, NULL},
    {"Upsample", 7, 9, "1, 9: 2", "1", "mode scales", imp_op_resize, "as Resize (asymmetric)"},
    {"Where", 9, 0, "3", "1", "", imp_op_where, NULL},
};
const int imp_nops = (int)(sizeof imp_ops / sizeof *imp_ops);

static const imp_op *find_op(const char *name) {
    for (int i = 0; i < imp_nops; i++)
        if (strcmp(imp_ops[i].name, name) == 0)
            return &imp_ops[i];
    return NULL;
}

int dpc_onnx_nops(void) { return imp_nops; }

const char *dpc_onnx_op_name(int i, int *min_opset, int *max_opset, const char **note) {
    if (i < 0 || i >= imp_nops)
        return NULL;
    if (min_opset)
        *min_opset = imp_ops[i].min_opset;
    if (max_opset)
        *max_opset = imp_ops[i].max_opset;
    if (note)
        *note = imp_ops[i].note;
    return imp_ops[i].name;
}

bool dpc_onnx_op_arity(int i, const char **ins, const char **outs) {
    if (i < 0 || i >= imp_nops)
        return false;
    *ins = imp_ops[i].ins, *outs = imp_ops[i].outs;
    return true;
}

/* "2-3" at *p: lo and hi (-1 for "2+": unbounded, every position required) */
static bool arity_range(const char **p, int *lo, int *hi) {
    char *e;
    long a = strtol(*p, &e, 10), b = a;
    if (e == *p || a < 0 || a > 64)
        return false;
    if (*e == '-') {
        const char *q = e + 1;
        b = strtol(q, &e, 10);
        if (e == q || b < a || b > 64)
            return false;
    } else if (*e == '+') {
        b = -1;
        e++;
    }
    *lo = (int)a, *hi = (int)b, *p = e;
    return true;
}

/* A row's arity (imp_op.ins/outs) at this opset; false when the spec is
 * malformed (the table's bug). */
static bool arity_at(const char *spec, int64_t opset, int *lo, int *hi) {
    const char *p = spec;
    if (!p || !arity_range(&p, lo, hi))
        return false;
    while (*p) {
        char *e;
        if (p[0] != ',' || p[1] != ' ')
            return false;
        long from = strtol(p + 2, &e, 10);
        if (e == p + 2 || e[0] != ':' || e[1] != ' ')
            return false;
        p = e + 2;
        int a, b;
        if (!arity_range(&p, &a, &b))
            return false;
        if (opset >= from)
            *lo = a, *hi = b;
    }
    return true;
}

/* The node's input or output count against its row, and no "" at a
 * required position: "takes 1 input, got 0", "input 1 (of 3) is required
 * but empty". */
static dpc_status check_arity(imp *I, const Onnx__NodeProto *n, const imp_op *op, bool outs) {
    const char *what = outs ? "output" : "input";
    size_t got = outs ? n->n_output : n->n_input;
    char **names = outs ? n->output : n->input;
    int lo, hi;
    if (!arity_at(outs ? op->outs : op->ins, I->opset, &lo, &hi))
        return imp_err(I, "internal: the op table's %s count of %s is malformed", what, op->name);
    if (got < (size_t)lo || (hi >= 0 && got > (size_t)hi)) {
        char takes[64];
        if (hi < 0)
            snprintf(takes, sizeof takes, "%d or more %ss", lo, what);
        else if (hi == 0)
            snprintf(takes, sizeof takes, "no %ss", what);
        else if (lo == hi)
            snprintf(takes, sizeof takes, "%d %s%s", lo, what, lo == 1 ? "" : "s");
        else
            snprintf(takes, sizeof takes, "%d to %d %ss", lo, hi, what);
        return imp_err(I, "takes %s, got %zu", takes, got);
    }
    for (size_t k = 0; k < got; k++)
        if (!names[k][0] && (k < (size_t)lo || hi < 0))
            return imp_err(I, "%s %zu (of %zu) is required but empty", what, k, got);
    return DPC_OK;
}

static bool attr_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ' ')
            p++;
        const char *q = strchr(p, ' ');
        size_t L = q ? (size_t)(q - p) : strlen(p);
        if (L == n && strncmp(p, name, n) == 0)
            return true;
        if (!q)
            break;
        p = q + 1;
    }
    return false;
}

/* The op of node k as the table has it at this opset, or NULL after a
 * located error. Run over every node before anything else is looked at,
 * so that an op dpc does not claim is the error, whatever else the model
 * holds (an input type, a rank) that dpc would also refuse. */
const imp_op *imp_claim_node(imp *I, int k) {
    const Onnx__NodeProto *n = I->g->node[k];
    I->cur = k;
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) {
        char d[260];
        imp_comment(d, sizeof d, n->domain);
        imp_err(I, "ops of domain '%s' are not supported", d);
        return NULL;
    }
    const imp_op *op = find_op(n->op_type);
    if (!op) {
        imp_err(I, "op type not supported (`dpc import --list-ops` lists the supported ones)");
        return NULL;
    }
    if (I->opset < op->min_opset || (op->max_opset && I->opset > op->max_opset)) {
        imp_err(I, "this op is supported at opsets %d to %d only", op->min_opset,
                op->max_opset ? op->max_opset : DPC_ONNX_MAX_OPSET);
        return NULL;
    }
    I->cur = -1;
    return op;
}

/* Node n against its row: no attribute reference, no attribute the row
 * does not read, then its input and output counts. */
dpc_status imp_check_node(imp *I, const Onnx__NodeProto *n, const imp_op *op) {
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (a->ref_attr_name && *a->ref_attr_name)
            return imp_err(I, "attribute references are not supported");
        if (!attr_listed(op->attrs, a->name)) {
            char an[260];
            imp_comment(an, sizeof an, a->name);
            return imp_err(I, "attribute %s is not supported", an);
        }
    }
    dpc_status s;
    if ((s = check_arity(I, n, op, false)) != DPC_OK || (s = check_arity(I, n, op, true)) != DPC_OK)
        return s;
    return DPC_OK;
}
