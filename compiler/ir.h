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

#define IR_OPS(X)                                                                            \
    X(INPUT, "input")           /* tensor parameter of forward */                          \
    X(SCALAR, "scalar")         /* scalar keyword parameter of forward (rank 0) */          \
    X(PARAM, "param")           /* a weight from the state_dict */                          \
    X(CONST, "const")           /* a scalar constant (rank 0) */                            \
    X(BATCH, "batch_size")      /* the batch name as a value: this replica's N (rank 0) */  \
    X(NEG, "neg") X(RELU, "relu") X(GELU, "gelu") X(GELU_TANH, "gelu_tanh")                 \
    X(SILU, "silu") X(SIGMOID, "sigmoid") X(TANH, "tanh") X(EXP, "exp") X(LOG, "log")        \
    X(SQRT, "sqrt") X(ABS, "abs")                                                           \
    X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div")                                 \
    X(LINEAR, "linear")         /* x, W[out,in], b? */                                      \
    X(MATMUL, "matmul")         /* torch.matmul */                                          \
    X(CONV2D, "conv2d")         /* x, W, b? */                                              \
    X(MAXPOOL2D, "max_pool2d") X(AVGPOOL2D, "avg_pool2d")                                   \
    X(ADAPTIVE_AVGPOOL2D, "adaptive_avg_pool2d")                                            \
    X(BATCHNORM, "batch_norm")  /* x, mean, var, w?, b?: running or batch statistics */      \
    X(LAYERNORM, "layer_norm")  /* x, w?, b? */                                             \
    X(EMBEDDING, "embedding")   /* ids, W */                                                \
    X(SOFTMAX, "softmax") X(LOG_SOFTMAX, "log_softmax")                                     \
    X(SUM, "sum") X(MEAN, "mean") X(AMAX, "amax")                                           \
    X(RESHAPE, "reshape")       /* a view: same elements, new shape */                      \
    X(PERMUTE, "permute")                                                                   \
    X(CAT, "cat")

typedef enum ir_op {
#define X(e, s) OP_##e,
    IR_OPS(X)
#undef X
        OP_COUNT
} ir_op;

const char *ir_op_name(ir_op op);

typedef struct ir_node {
    int id;
    ir_op op;
    int nin;
    int in[IR_MAX_IN];     /* operand ids; CAT keeps extra operands in `more` */
    vec more;              /* CAT operands beyond IR_MAX_IN (int stored as intptr_t) */
    shape sh;
    ir_dtype dt;
    /* attributes */
    int64_t ia[10];        /* conv: stride h,w pad top,left dil h,w groups pad bottom,right;
                            * pool: k,s,p,d (h,w) ... */
    int nia;
    double fa;             /* CONST value, eps */
    int axis;              /* softmax/reduce/cat axis (normalised) */
    bool keepdim;          /* reductions */
    bool ceil;             /* pools: ceil_mode */
    bool flag;             /* avg_pool2d: count_include_pad */
    int perm[IR_MAX_RANK]; /* PERMUTE */
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
} ir_graph;

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
