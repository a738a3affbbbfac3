/* compiler.h - the one header the compiler's stages share (chibicc style):
 * source locations and diagnostics, the AST the parser builds, the module
 * tree semantic analysis instantiates, and the graph IR it lowers forward
 * into. Later stages (fuse.c, emit_*.c) add the kernel IR in kernel.h.
 *
 * Memory: everything a compilation creates lives in one arena (dpc_arena)
 * freed at once. Arena exhaustion longjmps back to the compile entry point,
 * which turns it into DPC_ENOMEM, as Lua does with its error handler. */
#ifndef DPC_COMPILER_H
#define DPC_COMPILER_H

#include "base.h"
#include "dpc_compile.h"
#include <setjmp.h>

/* --------------------------------------------------------------- limits */

/* Size limits, checked where sizes are written or computed, so that no size
 * arithmetic in the compiler or the runtime can overflow (docs/language.md
 * §14 "Limits"):
 *   - a dim written in a forward declaration, and every size argument of a
 *     builtin module (features, channels, kernel, stride, padding, ...):
 *     at most DPC_MAX_DIM;
 *   - every tensor the model computes, and every parameter: at most
 *     DPC_MAX_NUMEL elements (per sample for tensors with the batch dim),
 *     counting a 0 dim as 1, so every partial product stays below it too;
 *   - all parameters together: at most DPC_MAX_PARAM_BYTES bytes. */
#define DPC_MAX_DIM INT64_C(2147483647)
#define DPC_MAX_NUMEL (INT64_C(1) << 40)
#define DPC_MAX_PARAM_BYTES (INT64_C(1) << 40)

/* DPC_MAX_SCALARS, DPC_MAX_IO: the counts of a forward's interface, in
 * dpc_compile.h. */

/* Nesting limits. An expression nests at most dpc_ctx.max_depth (200)
 * levels, and so do brackets. Evaluation also nests through module calls
 * and constructions (a module's forward calls another's, a member builds a
 * module whose members build more), so the recursive passes count every
 * level they go down, in all, and stop at DPC_MAX_EVAL_NEST: that bounds
 * their stack use (tests/front/check_deep.py runs them in 1 MiB). */
#define DPC_MAX_EVAL_NEST 600

/* Keeps a non-recursive helper with big locals out of a recursive caller's
 * frame. */
#define DPC_NOINLINE __attribute__((noinline))

/* ---------------------------------------------------------------- arena */

typedef struct dpc_arena_block dpc_arena_block;
typedef struct dpc_arena {
    dpc_arena_block *head;
    jmp_buf *oom_jump; /* where to go when an allocation fails */
} dpc_arena;

void *arena_alloc(dpc_arena *a, size_t n); /* zeroed; longjmps on failure */
char *arena_strndup(dpc_arena *a, const char *s, size_t n);
char *arena_strdup(dpc_arena *a, const char *s);
char *arena_printf(dpc_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free_all(dpc_arena *a);

/* A growable array of pointers, in the arena. */
typedef struct vec {
    void **items;
    int len, cap;
} vec;
void vec_push(dpc_arena *a, vec *v, void *item);

/* -------------------------------------------------------- diagnostics */

typedef struct src_file {
    const char *path;    /* as given or as resolved relative to the importer */
    const char *text;    /* NUL-terminated copy of the contents */
    size_t len;
} src_file;

typedef struct loc {
    const src_file *file;
    int line, col; /* 1-based; 0 means "no location" */
} loc;

typedef struct diag {
    loc at;
    bool is_note; /* a note attached to the previous error */
    char *msg;
} diag;

/* The state of one compilation: arena, diagnostics, files read so far. */
typedef struct dpc_ctx {
    dpc_arena arena;
    vec diags;   /* of diag* */
    int nerrors;
    vec files;   /* of src_file* */
    int max_errors;
    int max_depth; /* nesting limit for brackets, blocks and expressions */
    bool notes_dropped; /* the last error repeated an earlier one: its notes go too */
    /* When set, imports are served from memory (a .dpa's stored sources)
     * instead of the file system: path is the joined import path; fill real
     * (a canonical name containing '/', for cycle detection) and text. */
    bool (*read_import)(void *ud, const char *path, char *real, size_t real_n, const char **text, size_t *len);
    void *import_ud;
    /* the entry's run-time dims: values given (dpc_compile_opts.binds), and
     * whether one without a value stops the IR after the entry */
    const dpc_dim_bind *binds;
    int nbinds;
    bool defer_dims;
} dpc_ctx;

void error_at(dpc_ctx *c, loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void note_at(dpc_ctx *c, loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Renders all diagnostics compiler-style: "file:line:col: error: msg", the
 * source line, a caret. */
void diags_render(const dpc_ctx *c, dpc_buf *out);
/* The candidate nearest to name by edit distance, or NULL if none is close. */
const char *nearest_name(const char *name, const char *const *cands, int n);

/* ------------------------------------------------------------------ AST */

typedef enum node_kind {
    ND_INT, ND_FLOAT, ND_STR, ND_BOOL, ND_NONE,
    ND_NAME,
    ND_BINOP,     /* op: '+', '-', '*', '/', '@', 'f' (//), 'p' (**), '%', or an OP_ below */
    ND_NEG,
    ND_NOT,       /* not lhs */
    ND_COND,      /* lhs if third else rhs */
    ND_CALL,      /* callee(args); op 'm' when written as a method, x.f(...) = f(x, ...) */
    ND_INDEX,     /* base[index]: one plain index */
    ND_SUBSCRIPT, /* base[items]: args holds node*s, each an expression, ND_SLICE or ND_ELLIPSIS */
    ND_SLICE,     /* lhs:rhs:third, each NULL when left out */
    ND_ELLIPSIS,  /* ... */
    ND_ATTR,      /* lhs.str (x.shape) */
    ND_TUPLE,     /* (a, b) */
    ND_LIST,      /* [a, b] */
    ND_LISTCOMP,  /* [elem for var in iter] */
    ND_FSTR,      /* f"...{name}...": str is the text between the quotes */
    ND_DICT,      /* {k: v, ...}: args holds key, value, key, value, ... */
    ND_DICTCOMP,  /* {lhs: third for str in rhs} */
} node_kind;

/* ND_BINOP codes of the comparison and boolean operators (the arithmetic
 * ones are their own character). */
enum {
    OP_EQ = '=', OP_NE = '!', OP_LT = '<', OP_GT = '>', OP_LE = 'l', OP_GE = 'g',
    OP_IS = 'i', OP_ISNOT = 'I', OP_AND = '&', OP_OR = '|',
    /* on bool tensors: x & y, x | y (ND_BINOP), ~x (ND_NOT with this op) */
    OP_BITAND = 'A', OP_BITOR = 'O', OP_INVERT = '~',
};

typedef struct node node;
/* The name of a `*xs` argument (compared by address): a list or tuple
 * spread into positional arguments, as Python's f(*xs). */
extern const char dp_splat[];
typedef struct arg {
    const char *name; /* keyword, or NULL for positional */
    node *value;
    loc at;
} arg;

struct node {
    node_kind kind;
    loc at;
    int depth;      /* height of the subtree: bounded so passes can recurse */
    int op;
    int64_t ival;   /* ND_INT, ND_BOOL */
    double fval;    /* ND_FLOAT */
    const char *str;/* ND_STR, ND_NAME, ND_LISTCOMP var */
    node *lhs, *rhs;/* ND_BINOP, ND_NEG (lhs), ND_INDEX (lhs[rhs]), ND_CALL callee=lhs, ND_LISTCOMP elem=lhs iter=rhs */
    node *third;    /* ND_COND: the condition; ND_SLICE: the step */
    vec args;       /* ND_CALL: arg*; ND_TUPLE, ND_LIST: node* */
};

typedef enum stmt_kind { ST_ASSIGN, ST_FOR, ST_RETURN, ST_IF } stmt_kind;
typedef struct stmt stmt;
struct stmt {
    stmt_kind kind;
    loc at;
    vec targets;  /* ST_ASSIGN: char* names; ST_FOR: one loop variable */
    vec values;   /* ST_ASSIGN: one node*; ST_RETURN: node*s; ST_FOR: iterable node*; ST_IF: the condition */
    vec body;     /* ST_FOR, ST_IF: stmt* */
    vec orelse;   /* ST_IF: stmt* of the else branch (an elif is one ST_IF there) */
};

/* A parameter's declared type. */
typedef enum ptype_kind { PT_INT, PT_FLOAT, PT_BOOL, PT_TENSOR, PT_STR, PT_MODULE } ptype_kind;

typedef struct param {
    const char *name;
    loc at;
    ptype_kind kind;
    const char *dtype; /* tensors: "f32" (default), "i64", ... */
    loc dtype_at;
    vec dims;          /* tensors: node* per dim */
    node *deflt;       /* scalars: default value or NULL */
} param;

/* One item of a module body, in source order. */
typedef enum member_kind {
    MB_ASSIGN,  /* name = value */
    MB_ENTRY,   /* a bare module: the next numbered entry of a Sequential subclass */
    MB_IF,      /* if value { then_items } else { else_items } (an elif is one MB_IF there) */
    MB_FORWARD, /* the forward method (parsing only; moved into module_def) */
} member_kind;

typedef struct module_def module_def;
typedef struct member member;
struct member {
    member_kind kind;
    const char *name; /* MB_ASSIGN */
    loc at;
    node *value;      /* MB_ASSIGN, MB_ENTRY: the module; MB_IF: the condition */
    vec then_items, else_items; /* MB_IF: member* */
    module_def *forward;        /* MB_FORWARD */
};

struct module_def {
    const char *name;
    loc at;
    const char *base; /* `extends Sequential`: the builtin it is, or NULL */
    loc base_at;
    vec params;  /* constructor params, param* */
    vec members; /* member*, in source order (= registration order) */
    vec fparams; /* forward params, param* */
    vec body;    /* forward statements, stmt* */
    bool has_forward;
    loc forward_at;
};

typedef struct program {
    vec modules;  /* module_def*, across imports, in definition order */
    node *model;  /* the `model = ...` expression, or NULL */
    loc model_at;
} program;

/* parse.c: reads path (and its imports) into prog. Returns false on errors
 * (diagnostics in c). The lexer and parser live in grammar/. */
bool parse_program(dpc_ctx *c, const char *path, program *prog);
bool parse_source(dpc_ctx *c, const char *path, const char *text, size_t len, program *prog);

/* dpc_source_rule, DPC_MAX_SOURCE_BYTES: dpc_compile.h (artifact.c holds a .dpa's sources to them). */

/* ------------------------------------------------- semantic values */

/* V_CLASS: a module not yet built (`activation_layer: Module = ReLU`,
 * `partial(BatchNorm2d, eps=0.001)`): s is its name, items/keys the
 * arguments bound by partial (keys[i] NULL for a positional one). */
typedef enum val_kind { V_NONE, V_INT, V_FLOAT, V_BOOL, V_STR, V_TUPLE, V_LIST, V_MODULE, V_CLASS, V_DICT } val_kind;
typedef struct inst inst;
typedef struct val val;
struct val {
    val_kind kind;
    int64_t i;
    double f;
    const char *s;
    int n;          /* tuple/list length */
    val *items;     /* tuple/list items; V_CLASS: bound arguments */
    const char **keys; /* V_CLASS: bound argument names; V_DICT: the keys (items: the values) */
    inst *mod;      /* V_MODULE */
};
/* "int", "module class", ... (nn_helpers.c) */
const char *val_kind_name(val_kind k);

/* ----------------------------------------------------- module tree */

/* The builtin modules: one entry each, X(ENUM, id) for BI_ENUM and its row
 * nn_id (irbuild.h's `builtin`, defined beside its functions in nn_*.c).
 * The order is the order of "did you mean" candidates. */
#define DPC_MODULES(X)                                                                                     \
    X(LINEAR, linear) X(CONV2D, conv2d) X(CONV1D, conv1d) X(MAXPOOL2D, maxpool2d) X(AVGPOOL2D, avgpool2d)   \
    X(ADAPTIVEAVGPOOL2D, adaptiveavgpool2d) X(BATCHNORM2D, batchnorm2d) X(LAYERNORM, layernorm)            \
    X(EMBEDDING, embedding) X(DROPOUT, dropout) X(DROPOUT2D, dropout2d) X(RELU, relu) X(GELU, gelu)         \
    X(SILU, silu) X(SIGMOID, sigmoid) X(TANH, tanh) X(SOFTMAX, softmax) X(LOGSOFTMAX, logsoftmax)           \
    X(FLATTEN, flatten) X(IDENTITY, identity) X(SEQUENTIAL, sequential) X(MODULELIST, modulelist)         \
    X(DATAPARALLEL, dataparallel)                                                                           \
    X(RELU6, relu6) X(HARDTANH, hardtanh) X(HARDSWISH, hardswish) X(HARDSIGMOID, hardsigmoid)               \
    X(LEAKYRELU, leakyrelu) X(MISH, mish) X(BATCHNORM1D, batchnorm1d) X(GROUPNORM, groupnorm)               \
    X(ADAPTIVEMAXPOOL2D, adaptivemaxpool2d) X(STOCHASTICDEPTH, stochasticdepth) X(PERMUTE, permute)         \
    X(HFCONV1D, hfconv1d) X(MULTIHEADATTENTION, multiheadattention)                                        \
    X(CONVTRANSPOSE2D, convtranspose2d) X(UPSAMPLE, upsample)

typedef enum builtin_kind {
    BI_NONE = 0, /* a user module */
#define X(e, id) BI_##e,
    DPC_MODULES(X)
#undef X
    BI_COUNT
} builtin_kind;

typedef struct inst_child {
    const char *name;
    inst *mod;
} inst_child;

/* One instantiated module: a node of the tree `dpc print` shows. */
struct inst {
    builtin_kind bi;
    const char *type_name;   /* "Linear", "ParallelModel", ... */
    const module_def *def;   /* user modules */
    loc at;                  /* where it was constructed */
    const char *path;        /* state_dict prefix: "layers.1.ln" ("" for the root) */
    vec children;            /* inst_child*, registration order */
    /* constructor arguments after binding, in the builtin's signature order
     * (as given: an int stays an int, a tuple a tuple), for repr and lowering */
    val *args;
    int nargs;
    /* user modules: constructor parameter values, then the constants the
     * body defines (`use_res = stride == 1`, `downsample = None`): np names
     * visible to later members and to forward */
    const char **pnames;
    val *pvals;
    int np;
    const char *extra_repr;  /* user modules: `extra_repr = "..."`, formatted, or NULL */
    vec tensors;             /* user modules: tmember*, Parameter and buffer members in registration order */
};

/* A tensor member's value at construction (`Parameter(zeros(1, 1, d))`,
 * `Buffer(arange(n).expand((1, -1)))`): its dtype and shape, and how it is
 * filled: a constant (CT_FILL: every element a; CT_DATA: data, row-major)
 * or a random draw (CT_NORMAL: N(a, b^2); CT_UNIFORM: U(a, b)), which
 * `dpc init` draws with its seed. ctensor.c evaluates the creation
 * expressions. */
typedef enum ctensor_kind { CT_FILL, CT_DATA, CT_NORMAL, CT_UNIFORM } ctensor_kind;
typedef enum ctensor_dtype { CTD_F32, CTD_I64, CTD_BOOL } ctensor_dtype;
typedef struct ctensor {
    ctensor_kind kind;
    ctensor_dtype dtype;
    int rank;
    int64_t shape[8];
    double a, b;
    double *data; /* CT_DATA: numel values */
} ctensor;

/* A Parameter or buffer member of a user module (`class_token =
 * Parameter(...)`, `bias = Buffer(..., persistent=False)`), in
 * registration order. */
typedef struct tmember {
    const char *name;
    bool is_param;
    bool persistent; /* buffers: in the state_dict (parameters always are) */
    ctensor *ct;
    loc at;
} tmember;

typedef struct param_entry {
    const char *key;     /* state_dict key, "fc1.weight" */
    int rank;
    int64_t shape[8];
    bool is_int;         /* num_batches_tracked (I64, ignored on load) */
    bool ignored;        /* present in state_dict, not used by forward */
    int init;            /* how `dpc init` fills it, see init.c */
    double fan_in;
    inst *owner;
    const ctensor *ct;   /* a Parameter/Buffer member's value (INIT_TENSOR), else NULL */
    bool nonpersistent;  /* a buffer with persistent=False: not in the state_dict, its value is ct's */
} param_entry;

typedef struct model {
    program prog;
    inst *root;        /* the user's module */
    inst *wrapper;     /* DataParallel(...) if written, else NULL */
    vec params;        /* param_entry*, state_dict order */
} model;

/* sema.c: evaluates the model line and instantiates the module tree. */
bool sema_instantiate(dpc_ctx *c, model *m);
/* sema_expr.c: evaluates a constant expression in the scope of self's
 * constructor parameters (dims, reshape sizes, defaults). */
bool sema_eval(dpc_ctx *c, model *m, const inst *self, const node *n, val *out);
/* sema_values.c: a op b on constructor values. */
bool sema_arith(dpc_ctx *c, int op, const val *a, const val *b, loc at, val *out);
/* ctensor.c: evaluates a creation expression in the scope of self's
 * constructor (zeros(...), empty(...).normal_(std=0.02), ones(d, 1, 1) * s,
 * arange(n), tril(ones(n, n, dtype=bool)).view(...)); false after a
 * diagnostic. */
bool ctensor_eval(dpc_ctx *c, model *m, const inst *self, const node *n, ctensor *out);
int64_t ctensor_numel(const ctensor *t);
/* Whether value is a tensor member: `Parameter(...)`, `Buffer(...,
 * persistent=...)`, or with name NULL a body item `register_buffer("name",
 * ..., persistent=...)` / `register_parameter("name", Parameter(...))`.
 * When it is, adds it to in (or reports why not) and returns true. */
bool ctensor_member(dpc_ctx *c, model *m, inst *in, const char *name, const node *value, loc at);
/* The state_dict entries of in's tensor members: its Parameters, then its
 * persistent buffers (PyTorch's _save_to_state_dict order), then the
 * non-persistent buffers, which are not in the state_dict. */
void ctensor_add_params(dpc_ctx *c, model *m, inst *in);
/* Python's truth value of a constructor value (None, 0 and "" are false). */
bool sema_truthy(const val *v);
/* An operator's text as written: "+", "//", "is not", "and" (op: node.op). */
const char *sema_op_text(int op);
/* The one interpreter of a chain of binary operators (sema_values.c), for
 * sema_expr.c's constructor arithmetic (values: val) and irbuild.c's
 * forward (values: its symbolic values): a + b + c + ... parses as
 * ((a + b) + c) + ..., so
 * the chain is walked in a loop down its left operands and a flat chain of
 * any length needs no recursion; only right operands recurse (see ast.c).
 * ev evaluates an operand into a value of `size` bytes; ap combines
 * acc = acc op r (op: the ND_BINOP node). Both sides are evaluated even
 * after an error, for their diagnostics, except that `and` and `or`
 * short-circuit as in Python: when sk says acc decides the result (a false
 * left side of `and`, a true one of `or`), the right side is not evaluated
 * and acc is the result (`a is not None and a > 1` with a None is False).
 * The result goes to out. */
typedef bool (*chain_eval)(void *cx, const node *n, void *out);
typedef bool (*chain_apply)(void *cx, const node *op, void *acc, const void *r);
typedef bool (*chain_skip)(void *cx, const node *op, const void *acc);
bool eval_binop_chain(dpc_arena *arena, const node *n, void *cx, size_t size, chain_eval ev, chain_apply ap,
                      chain_skip sk, void *out);
/* functions.c: the one list of forward functions (the op table's one-to-one
 * elementwise functions, then functions.c's FUNCTIONS), for every pass that
 * resolves or suggests a function name. */
bool dpc_is_function(const char *name);
/* Up to max names into out, in a fixed order; returns how many. */
int dpc_function_names(const char **out, int max);
/* Checks (and widens int to float) the value of scalar parameter p, given
 * by the default expression at `at`. */
bool sema_scalar_default(dpc_ctx *c, const param *p, val *v, loc at);
/* builtins.c: signatures, binding, the rows' hooks; nn_helpers.c: what the
 * rows call (arguments, state_dict entries, repr). */
builtin_kind builtin_lookup(const char *name);
const char *builtin_name(builtin_kind k);
typedef struct bound_arg {
    const char *name; /* keyword or NULL */
    val v;
    loc at;      /* the value */
    loc name_at; /* the keyword (the value for a positional argument) */
} bound_arg;
bool builtin_bind_values(dpc_ctx *c, inst *in, const bound_arg *args, int nargs, loc at);
const char *const *builtin_names(int *n);
int64_t inst_int(const inst *in, int i);
bool inst_bool(const inst *in, int i);
double inst_float(const inst *in, int i);
void inst_pair(const inst *in, int i, int64_t out[2]);
void builtin_params(dpc_ctx *c, model *m, inst *in);
void builtin_extra_repr(const inst *in, dpc_buf *out);
/* The rows of the builtin modules (DPC_MODULES) are irbuild.h's. */
/* repr.c: the module tree exactly as PyTorch's print(model). */
void repr_model(const model *m, dpc_buf *out);
void repr_value(const val *v, dpc_buf *out);

#endif
