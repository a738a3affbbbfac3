/* ir.h - the graph IR: a typed SSA graph, one node per op, in topological
 * order (operands always have smaller ids). The batch dimension stays
 * symbolic: a dim is either k or k*N, where N is the batch size bound at run
 * time. Semantic analysis builds it (irbuild.c), passes read it, fuse.c
 * lowers it to kernels. */
#ifndef DPC_IR_H
#define DPC_IR_H

#include "compiler.h"

#define IR_MAX_RANK 8
#define IR_MAX_IN 5

typedef struct dim {
    int64_t k;
    bool sym; /* k*N */
} dim;

typedef struct shape {
    int rank;
    dim d[IR_MAX_RANK];
} shape;

typedef enum ir_dtype { IR_F32, IR_I64, IR_I32, IR_BOOL } ir_dtype;

/* The op table: ONE row per IR op. The enum, the names, the op classes
 * (which fusion, the emitters, the printer and the FLOP count dispatch on),
 * the arity and each dialect's expression all come from here; adding an
 * elementwise function is one row (docs/internals.md, the `sin` example).
 *
 *   X(ENUM, name, class, arity, C expression, CUDA expression, function)
 *
 * class:    OC_* below. arity: operands the op always has (optional ones,
 *           a bias, come after; CAT takes any number).
 * C, CUDA:  for OC_UNARY / OC_BINARY / OC_TERNARY, the expression computing
 *           the value from $x (and $y, $z) in each dialect, a string literal; a missing
 *           one is a build error naming the op (ops.c). Other classes pass
 *           NOEXPR: their kernel emitter renders them.
 * function: the forward function lowering to the op one-to-one (`f(x)`,
 *           one tensor argument named `input`), or NOFN. */
#define NOEXPR ""
#define NOFN NULL
#define IR_OPS(X)                                                                                          \
    X(INPUT, "input", OC_INPUT, 0, NOEXPR, NOEXPR, NOFN)           /* tensor parameter of forward */       \
    X(SCALAR, "scalar", OC_LEAF, 0, NOEXPR, NOEXPR, NOFN)          /* scalar parameter of forward */       \
    X(PARAM, "param", OC_INPUT, 0, NOEXPR, NOEXPR, NOFN)           /* a weight from the state_dict */      \
    X(CONST, "const", OC_LEAF, 0, NOEXPR, NOEXPR, NOFN)            /* a scalar constant (rank 0) */        \
    X(BATCH, "batch_size", OC_LEAF, 0, NOEXPR, NOEXPR, NOFN)       /* this replica's N (rank 0) */         \
    X(NEG, "neg", OC_UNARY, 1, "-$x", "-$x", "neg")                                                         \
    X(RELU, "relu", OC_UNARY, 1, IR_EXPR_RELU, IR_EXPR_RELU, "relu")                                     \
    X(GELU, "gelu", OC_UNARY, 1, "dpc_geluf($x)", IR_EXPR_GELU("erff"), NOFN) /* gelu(x, approximate="none") */          \
    X(GELU_TANH, "gelu_tanh", OC_UNARY, 1, IR_EXPR_GELU_TANH("dpc_tanhf"), IR_EXPR_GELU_TANH("tanhf"), NOFN)                     \
    X(SILU, "silu", OC_UNARY, 1, "$x / (1.0f + dpc_expf(-$x))", "$x / (1.0f + expf(-$x))", "silu")             \
    X(SIGMOID, "sigmoid", OC_UNARY, 1, "1.0f / (1.0f + dpc_expf(-$x))", "1.0f / (1.0f + expf(-$x))", "sigmoid") \
    X(TANH, "tanh", OC_UNARY, 1, "dpc_tanhf($x)", "tanhf($x)", "tanh")                                         \
    X(EXP, "exp", OC_UNARY, 1, "dpc_expf($x)", "expf($x)", "exp")                                              \
    X(LOG, "log", OC_UNARY, 1, "dpc_logf($x)", "logf($x)", "log")                                              \
    X(SQRT, "sqrt", OC_UNARY, 1, "sqrtf($x)", "sqrtf($x)", "sqrt")                                         \
    X(ABS, "abs", OC_UNARY, 1, "fabsf($x)", "fabsf($x)", "abs")                                            \
    X(SIN, "sin", OC_UNARY, 1, "sinf($x)", "sinf($x)", "sin")                                              \
    X(RELU6, "relu6", OC_UNARY, 1, IR_EXPR_RELU6, IR_EXPR_RELU6, NOFN)      /* F.relu6 (inplace=) */      \
    X(HARDSWISH, "hardswish", OC_UNARY, 1, IR_EXPR_HARDSWISH, IR_EXPR_HARDSWISH, NOFN)                     \
    X(HARDSIGMOID, "hardsigmoid", OC_UNARY, 1, IR_EXPR_HARDSIGMOID, IR_EXPR_HARDSIGMOID, NOFN)             \
    X(MISH, "mish", OC_UNARY, 1, IR_EXPR_MISH("dpc_"), IR_EXPR_MISH(""), NOFN)                                         \
    X(ADD, "add", OC_BINARY, 2, "$x + $y", "$x + $y", NOFN)                                                \
    X(SUB, "sub", OC_BINARY, 2, "$x - $y", "$x - $y", NOFN)                                                \
    X(MUL, "mul", OC_BINARY, 2, "$x * $y", "$x * $y", NOFN)                                                \
    X(DIV, "div", OC_BINARY, 2, "$x / $y", "$x / $y", NOFN)                                                \
    X(LINEAR, "linear", OC_GEMM, 2, NOEXPR, NOEXPR, NOFN)          /* x, W[out,in], b? */                  \
    X(MATMUL, "matmul", OC_GEMM, 2, NOEXPR, NOEXPR, NOFN)          /* torch.matmul */                      \
    X(CONV2D, "conv2d", OC_CONV, 2, NOEXPR, NOEXPR, NOFN)          /* x, W, b? */                          \
    X(MAXPOOL2D, "max_pool2d", OC_POOL, 1, NOEXPR, NOEXPR, NOFN)                                           \
    X(AVGPOOL2D, "avg_pool2d", OC_POOL, 1, NOEXPR, NOEXPR, NOFN)                                           \
    X(ADAPTIVE_AVGPOOL2D, "adaptive_avg_pool2d", OC_POOL, 1, NOEXPR, NOEXPR, NOFN)                         \
    X(ADAPTIVE_MAXPOOL2D, "adaptive_max_pool2d", OC_POOL, 1, NOEXPR, NOEXPR, NOFN)                         \
    X(BATCHNORM, "batch_norm", OC_CHANNEL, 3, NOEXPR, NOEXPR, NOFN) /* x, mean, var, w?, b? */             \
    X(LAYERNORM, "layer_norm", OC_ROW, 1, NOEXPR, NOEXPR, NOFN)    /* x, w?, b? */                         \
    X(EMBEDDING, "embedding", OC_EMBED, 2, NOEXPR, NOEXPR, NOFN)   /* ids, W */                            \
    X(SOFTMAX, "softmax", OC_ROW, 1, NOEXPR, NOEXPR, NOFN)                                                 \
    X(LOG_SOFTMAX, "log_softmax", OC_ROW, 1, NOEXPR, NOEXPR, NOFN)                                         \
    X(SUM, "sum", OC_REDUCE, 1, NOEXPR, NOEXPR, NOFN)                                                      \
    X(MEAN, "mean", OC_REDUCE, 1, NOEXPR, NOEXPR, NOFN)                                                    \
    X(AMAX, "amax", OC_REDUCE, 1, NOEXPR, NOEXPR, NOFN)                                                    \
    X(RESHAPE, "reshape", OC_VIEW, 1, NOEXPR, NOEXPR, NOFN)        /* same elements, new shape */          \
    X(PERMUTE, "permute", OC_VIEW, 1, NOEXPR, NOEXPR, NOFN)                                                \
    X(CAT, "cat", OC_CAT, 1, NOEXPR, NOEXPR, NOFN)                                                         \
    /* masks and created tensors: bool and i64 values computed in forward are                          \
     * carried in float (0/1, exact integers below 2^24) */                                             \
    X(IOTA, "iota", OC_LEAF, 0, NOEXPR, NOEXPR, NOFN)              /* start + step * index[dim] */         \
    X(CMP_EQ, "eq", OC_BINARY, 2, IR_CMP("=="), IR_CMP("=="), NOFN)                                           \
    X(CMP_NE, "ne", OC_BINARY, 2, IR_CMP("!="), IR_CMP("!="), NOFN)                                           \
    X(CMP_LT, "lt", OC_BINARY, 2, IR_CMP("<"), IR_CMP("<"), NOFN)                                             \
    X(CMP_LE, "le", OC_BINARY, 2, IR_CMP("<="), IR_CMP("<="), NOFN)                                           \
    X(CMP_GT, "gt", OC_BINARY, 2, IR_CMP(">"), IR_CMP(">"), NOFN)                                             \
    X(CMP_GE, "ge", OC_BINARY, 2, IR_CMP(">="), IR_CMP(">="), NOFN)                                           \
    X(LOGICAL_AND, "logical_and", OC_BINARY, 2, IR_EXPR_AND, IR_EXPR_AND, NOFN)                           \
    X(LOGICAL_OR, "logical_or", OC_BINARY, 2, IR_EXPR_OR, IR_EXPR_OR, NOFN)                               \
    X(LOGICAL_NOT, "logical_not", OC_UNARY, 1, IR_EXPR_NOT, IR_EXPR_NOT, NOFN)                            \
    X(TO_BOOL, "to_bool", OC_UNARY, 1, IR_EXPR_TOBOOL, IR_EXPR_TOBOOL, NOFN)                              \
    X(TO_LONG, "to_long", OC_UNARY, 1, "truncf((float)($x))", "truncf((float)($x))", NOFN)                 \
    X(TO_FLOAT, "to_float", OC_UNARY, 1, "(float)($x)", "(float)($x)", NOFN)                               \
    X(WHERE, "where", OC_TERNARY, 3, IR_EXPR_WHERE, IR_EXPR_WHERE, NOFN) \
    /* indexing and shape functions (W1): views read through strides, and elementwise functions */        \
    X(SLICE, "slice", OC_VIEW, 1, NOEXPR, NOEXPR, NOFN)            /* x[i, a:b:s, None, ...] */            \
    X(EXPAND, "expand", OC_VIEW, 1, NOEXPR, NOEXPR, NOFN)          /* size-1 dims read with stride 0 */    \
    X(POW, "pow", OC_BINARY, 2, "powf($x, $y)", "powf($x, $y)", NOFN)                                      \
    X(ERF, "erf", OC_UNARY, 1, "dpc_erff($x)", "erff($x)", "erf")                                              \
    X(RSQRT, "rsqrt", OC_UNARY, 1, "1.0f / sqrtf($x)", "1.0f / sqrtf($x)", "rsqrt")                        \
    X(CLAMP_MIN, "clamp_min", OC_BINARY, 2, IR_EXPR_CLAMP("<"), IR_EXPR_CLAMP("<"), NOFN)                    \
    X(CLAMP_MAX, "clamp_max", OC_BINARY, 2, IR_EXPR_CLAMP(">"), IR_EXPR_CLAMP(">"), NOFN)                    \
    /* resampling (ConvTranspose2d, Upsample / interpolate): each output pixel gathered from the input */ \
    X(CONV_TRANSPOSE2D, "conv_transpose2d", OC_RESAMPLE, 2, NOEXPR, NOEXPR, NOFN) /* x, W[in,out/g,kh,kw], b? */ \
    X(UPSAMPLE_NEAREST, "upsample_nearest2d", OC_RESAMPLE, 1, NOEXPR, NOEXPR, NOFN)                     \
    X(UPSAMPLE_BILINEAR, "upsample_bilinear2d", OC_RESAMPLE, 1, NOEXPR, NOEXPR, NOFN)

/* The longer expressions of the table. */
/* The C column calls the vectorisable float math of compiler/kmath.h
 * (dpc_expf, dpc_tanhf, dpc_erff, dpc_geluf, dpc_logf, dpc_log1pf: error
 * bounds there),
 * the CUDA column the device's libm; the longer expressions take the
 * function (or its prefix) as an argument. sin and pow stay libm calls in C:
 * no model of the zoo has them on a hot path. */
#define IR_EXPR_GELU(erf) "0.5f * $x * (1.0f + " erf "($x * 0.70710678118654752f))"
/* relu, relu6, hardswish and hardsigmoid are clamps, as PyTorch computes
 * them (x * min(max(x + 3, 0), 6) / 6), written as selects that keep NaN
 * (relu(NaN) = NaN, as PyTorch and ONNX; fmaxf(NaN, 0) is 0) and that GCC
 * vectorises (a compare and a blend; fmaxf is a libm call without
 * -ffinite-math-only, which kept the loop scalar). -0 stays -0, as in
 * PyTorch. mish is x * tanh(softplus(x)), with softplus = x above 20 as
 * F.softplus's threshold. */
#define IR_CLAMP06(v) "(" v " < 0.0f ? 0.0f : (" v " > 6.0f ? 6.0f : " v "))"
#define IR_EXPR_RELU "(($x) < 0.0f ? 0.0f : ($x))"
#define IR_EXPR_RELU6 IR_CLAMP06("($x)")
#define IR_EXPR_HARDSWISH "($x) * " IR_CLAMP06("(($x) + 3.0f)") " / 6.0f"
#define IR_EXPR_HARDSIGMOID IR_CLAMP06("(($x) + 3.0f)") " / 6.0f"
#define IR_EXPR_MISH(p) "$x * " p "tanhf($x > 20.0f ? $x : " p "log1pf(" p "expf($x)))"
#define IR_EXPR_GELU_TANH(tanh) "0.5f * $x * (1.0f + " tanh "(0.79788456080286536f * ($x + 0.044715f * $x * $x * $x)))"

/* clamp_min (<) and clamp_max (>) to the bound $y: NaN in either gives NaN,
 * as torch.clamp_min / torch.clamp with a tensor bound (the test of a
 * constant bound folds away) */
#define IR_EXPR_CLAMP(op) "(($x) " op " ($y) || ($y) != ($y) ? ($y) : ($x))"
#define IR_CMP(op) "(($x) " op " ($y) ? 1.0f : 0.0f)"
#define IR_EXPR_AND "(($x) != 0.0f && ($y) != 0.0f ? 1.0f : 0.0f)"
#define IR_EXPR_OR "(($x) != 0.0f || ($y) != 0.0f ? 1.0f : 0.0f)"
#define IR_EXPR_NOT "(($x) == 0.0f ? 1.0f : 0.0f)"
#define IR_EXPR_TOBOOL "(($x) != 0.0f ? 1.0f : 0.0f)"
#define IR_EXPR_WHERE "(($x) != 0.0f ? ($y) : ($z))"

/* What an op is, for every pass that treats ops alike. */
typedef enum op_class {
    OC_INPUT,   /* a tensor in a buffer of its own: forward input, parameter */
    OC_LEAF,    /* a rank-0 value: scalar, constant, batch size */
    OC_UNARY,   /* elementwise f($x): fuses into chains */
    OC_BINARY,  /* elementwise f($x, $y), broadcasting */
    OC_TERNARY, /* elementwise f($x, $y, $z), broadcasting (where) */
    OC_CHANNEL, /* elementwise with per-channel operands (eval batch norm) */
    OC_GEMM,    /* linear, matmul */
    OC_CONV,    /* conv2d */
    OC_POOL,    /* max / avg / adaptive pooling */
    OC_ROW,     /* softmax, log_softmax, layer_norm: one pass per row */
    OC_REDUCE,  /* sum, mean, amax over one axis */
    OC_EMBED,   /* embedding gather */
    OC_CAT,     /* concatenation */
    OC_VIEW,    /* reshape, permute, slice, expand: no kernel of their own */
    OC_RESAMPLE, /* conv_transpose2d, upsample: one pass gathering each output pixel */
    OC_COUNT
} op_class;

typedef enum ir_op {
#define X(e, s, cls, ar, c, cu, fn) OP_##e,
    IR_OPS(X)
#undef X
        OP_COUNT
} ir_op;

/* The dialects an elementwise expression is written in. */
typedef enum ir_dialect { DIALECT_C, DIALECT_CUDA, DIALECT_COUNT } ir_dialect;

/* One row of IR_OPS (ops.c). */
typedef struct ir_opdef {
    const char *name;
    op_class cls;
    int arity;
    const char *expr[DIALECT_COUNT]; /* "" when the class's emitter renders it */
    const char *fn;                  /* forward function, or NULL */
} ir_opdef;

const ir_opdef *ir_opdef_of(ir_op op);
op_class ir_op_class(ir_op op);
/* Unary, binary and per-channel ops: the ones fusion chains. */
bool ir_op_is_elementwise(ir_op op);
/* The op whose table function is `name` (a one-to-one lowering), or OP_COUNT. */
ir_op ir_op_of_function(const char *name);
/* Renders op's expression in dialect d with x, y for $x, $y into out;
 * false (nothing written) when the op has none in that dialect. */
bool ir_op_expr(ir_op op, ir_dialect d, const char *x, const char *y, const char *z, dpc_buf *out);

const char *ir_op_name(ir_op op);

/* Typed attributes, one struct per kind of op (ir_node.attr): each field
 * means one thing, whatever file reads it. */
typedef struct leaf_attr {   /* CONST, SCALAR, IOTA */
    double value;            /* CONST: the value (every element of its shape); SCALAR: the default;
                              * IOTA: the start */
    double step;             /* IOTA: element i along `axis` is value + step * i */
    int axis;                /* IOTA */
    int type;                /* SCALAR: 0 float, 1 int, 2 bool (dpc_scalar_type) */
    bool has_default;        /* SCALAR */
} leaf_attr;
typedef struct conv_attr {   /* CONV2D, CONV_TRANSPOSE2D */
    int64_t stride[2];       /* h, w */
    int64_t pad[4];          /* top, left, bottom, right (bottom/right larger by one
                              * for padding="same" with an even kernel) */
    int64_t dil[2];          /* h, w */
    int64_t groups;
    int64_t out_pad[2];      /* CONV_TRANSPOSE2D: output_padding (h, w), in the output's shape only */
} conv_attr;
typedef struct resample_attr { /* UPSAMPLE_NEAREST, UPSAMPLE_BILINEAR */
    double scale[2];         /* h, w: the scale_factor given (PyTorch's `scales`), 0 for none (in / out) */
    bool align_corners;      /* bilinear */
} resample_attr;
typedef struct pool_attr {   /* MAXPOOL2D, AVGPOOL2D */
    int64_t k[2], s[2], p[2]; /* kernel, stride, padding (h, w) */
    int64_t d[2];            /* max_pool2d: dilation */
    int64_t divisor;         /* avg_pool2d: divisor_override, 0 if none */
    bool ceil;               /* ceil_mode */
    bool count_include_pad;  /* avg_pool2d */
} pool_attr;
typedef struct norm_attr {   /* BATCHNORM, LAYERNORM */
    double eps;
    int dims;                /* layer_norm: the normalised trailing dims */
    bool has_weight, has_bias; /* layer_norm: which affine operands follow x */
} norm_attr;
typedef struct axis_attr {   /* SOFTMAX, LOG_SOFTMAX, SUM, MEAN, AMAX, CAT */
    int axis;                /* normalised */
    bool keepdim;            /* reductions */
} axis_attr;
typedef struct perm_attr {   /* PERMUTE */
    int perm[IR_MAX_RANK];
} perm_attr;
typedef struct view_attr {   /* SLICE, EXPAND */
    int64_t start[IR_MAX_RANK]; /* SLICE, per input dim: the first element read */
    int64_t step[IR_MAX_RANK];  /* SLICE, per input dim: the step (>= 1), 0 for an index (the dim is dropped) */
    int src[IR_MAX_RANK];       /* per output dim: the input dim it reads, -1 for a new dim (None, or
                                 * expand's leading dims) */
    int rank_in;                /* the input's rank */
} view_attr;
typedef struct embed_attr {  /* EMBEDDING */
    int64_t num;             /* num_embeddings */
} embed_attr;
typedef union ir_attr {
    leaf_attr leaf;
    conv_attr conv;
    pool_attr pool;
    norm_attr norm;
    axis_attr ax;
    perm_attr perm;
    view_attr view;
    embed_attr embed;
    resample_attr rs;
} ir_attr;

typedef struct ir_node {
    int id;
    ir_op op;
    int nin;
    int in[IR_MAX_IN];     /* operand ids; CAT keeps extra operands in `more` */
    vec more;              /* CAT operands beyond IR_MAX_IN (int stored as intptr_t) */
    shape sh;
    ir_dtype dt;
    ir_attr attr;          /* the member for the op's kind (above) */
    /* provenance */
    loc at;
    const char *scope;     /* module path, "layers.1.attn" */
    const char *name;      /* INPUT/SCALAR: param name; PARAM: state_dict key */
    int param_index;       /* PARAM: index in model.params */
    int input_index;       /* INPUT/SCALAR: position among forward's tensor/scalar params */
    int uses;
} ir_node;

typedef struct ir_graph {
    dpc_arena *arena;
    vec nodes;    /* ir_node*, id == index */
    vec inputs;   /* ir_node* of OP_INPUT, forward order */
    vec scalars;  /* ir_node* of OP_SCALAR, forward order */
    vec outputs;  /* ir_node*; a tuple return has several */
    const char *batch_name; /* "N" */
    const char *model_name;
    const char *file;
    /* the entry's run-time dims (`ids: i64[N, S]`): ir_rtdim*, and each
     * input dim that names one, ir_rtuse*; deferred: one has no value
     * (dpc_ctx.defer_dims), the graph stops after the inputs */
    vec rtdims, rtuses;
    bool deferred;
} ir_graph;

typedef struct ir_rtdim {
    const char *name;
    int64_t value; /* 0: unbound */
    loc at;        /* its first use */
} ir_rtdim;
typedef struct ir_rtuse {
    int rt, input, dim;
} ir_rtuse;

/* irbuild.c: interprets the root module's forward symbolically. */
bool ir_build(dpc_ctx *c, model *m, ir_graph *g);
/* ir.c */
ir_node *ir_new(ir_graph *g, ir_op op, loc at);
void ir_print(const ir_graph *g, dpc_buf *out);
/* "f32", "i64", "i32", "bool": the one name of each IR dtype. */
const char *ir_dtype_name(ir_dtype t);
void shape_str(const shape *s, const char *batch, char *out, size_t n);
bool shape_eq(const shape *a, const shape *b);
/* Elements as k * N^p: returns k and sets *sym (p is at most 1). Shapes the
 * IR builder makes have at most DPC_MAX_NUMEL elements; others saturate at
 * INT64_MAX instead of overflowing. */
int64_t shape_numel(const shape *s, bool *sym);
int ir_cat_count(const ir_node *n);
int ir_cat_operand(const ir_node *n, int i);

#endif
