/* irbuild.h - what the IR builder's files share: the symbolic values the
 * forward interpreter computes with, the builder state, the node
 * constructors and shape rules every lowering uses, and the row type of a
 * builtin module (one row per torch.nn module, with its functions).
 *
 *   irbuild_entry.c   the entry ir_build: the root's inputs, run-time
 *                dims and outputs
 *   irbuild.c    the forward walk: module calls, expressions, statements
 *   irbuild_values.c  the operators on evaluated values (binary, unary
 *                minus, truth, sequences)
 *   irbuild_args.c  binding a call's arguments; a frame's locals
 *   shapes.c     node constructors and the shape rules of the tensor ops
 *                (broadcasting, windows, reshape, reduce, matmul, cat, ...)
 *   functions.c  the forward functions (torch.* / F.*): the FUNCTIONS
 *                table and binding; their lowerings in fn_*.c, one file per
 *                family (functions.h)
 *   builtins.c   the module table and argument binding
 *   nn_helpers.c what the module rows call: arguments, state_dict entries,
 *                repr helpers
 *   nn_*.c       the builtin modules, one row each with its functions
 *                (docs/internals.md, "Adding a module") */
#ifndef DPC_IRBUILD_H
#define DPC_IRBUILD_H

#include "ir.h"

#define MAX_CALL_DEPTH 64
#define MAX_NODES 1000000

/* ------------------------------------------------- symbolic values */

/* SV_BATCH is the batch name used as a value: a size for reshape(), or in
 * arithmetic the run-time batch size (an OP_BATCH leaf). */
/* SV_DTYPE is a dtype name used as a value (float32, torch.long, bool):
 * its ir_dtype in v.i. */
typedef enum sv_kind { SV_NONE, SV_TENSOR, SV_NUM, SV_MODULE, SV_TUPLE, SV_LIST, SV_BATCH, SV_DTYPE } sv_kind;

typedef struct sv {
    sv_kind k;
    ir_node *t;     /* SV_TENSOR */
    val v;          /* SV_NUM: V_INT, V_FLOAT, V_BOOL; strings for keyword args */
    inst *mod;      /* SV_MODULE */
    int n;          /* SV_TUPLE, SV_LIST */
    struct sv *items;
    bool poison; /* the value of a statement that failed: using it reports nothing more */
} sv;

typedef struct binding {
    const char *name;
    sv v;
} binding;

/* One activation of a forward: its module and local variables. */
typedef struct frame {
    inst *self;
    vec locals; /* binding* */
    bool returned;
    sv ret;
} frame;

struct fargs;

typedef struct builder {
    dpc_ctx *c;
    model *m;
    ir_graph *g;
    int depth;             /* user module calls in progress */
    int nest;              /* recursion levels in progress, through calls too */
    bool nest_error;       /* DPC_MAX_EVAL_NEST was reported */
    ir_node **param_nodes; /* per model.params index */
    const char *batch;     /* the batch dim's name */
    ir_node *batch_value;  /* the OP_BATCH leaf, made on first use */
    /* the walk's call_module (irbuild.c), set by ir_build: the containers'
     * forwards (nn_container.c) sit below the walk and call it through here */
    bool (*call_module)(struct builder *b, inst *mod, const struct fargs *a, loc call_at, struct sv *out);
} builder;

/* The arguments of a call: values, keywords (NULL when positional), where
 * each value is and where each keyword is (the value when positional). */
typedef struct fargs {
    int n;
    sv *v;
    const char **names;
    loc *at;
    loc *kw_at;
} fargs;

/* ---------------------------------------- shapes.c: nodes and shapes */

const char *sv_kind_name(const sv *v);
bool numel_ok(const shape *s);
DPC_NOINLINE char *shp(builder *b, const shape *s);
DPC_NOINLINE bool check_size(builder *b, const ir_node *n, loc at, const char *what);
ir_node *mk(builder *b, ir_op op, loc at, const char *scope);
void add_in(ir_node *n, ir_node *x);
/* A new node of op reading x, y, z in that order; a NULL operand (a module
 * without bias, a unary op) is skipped. */
ir_node *mk_op(builder *b, ir_op op, loc at, const char *scope, ir_node *x, ir_node *y, ir_node *z);
bool num_of(const sv *v, double *d);
ir_node *batch_value(builder *b, loc at);
ir_node *as_tensor(builder *b, const sv *v, loc at, const char *what);
bool want_tensor(builder *b, const sv *v, loc at, const char *what, ir_node **t);
bool want_int(builder *b, const sv *v, loc at, const char *what, int64_t *out);
bool norm_dim(builder *b, int64_t d, int rank, loc at, int *out);
/* The state_dict entry `leaf` of owner as a param node, or NULL when the
 * module has none (bias=False). */
ir_node *param_node(builder *b, inst *owner, const char *leaf, loc at);
/* A module as diagnostics name it: its path, or its type at the root. */
const char *who(const inst *m);

ir_node *elementwise(builder *b, ir_op op, ir_node *x, ir_node *y, loc at, const char *scope);
ir_node *unary(builder *b, ir_op op, ir_node *x, loc at, const char *scope);
bool broadcast(builder *b, const shape *x, const shape *y, loc at, const char *what, shape *out);
bool window_out(builder *b, ir_node *n, const ir_node *x, const int64_t *k, const int64_t *s, const int64_t *p,
                const int64_t *d, const int64_t *extra, bool ceil, loc at, const char *whom, const char *what);
/* One output size of a conv or pool window (<= 0: the input is too small). */
int64_t window_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);
bool need_concrete(builder *b, const ir_node *x, int from, loc at, const char *what);
/* "fc1 expects [N, 80], got [N, 320]" */
void expects(builder *b, loc at, const char *who, const shape *got, int from, const int64_t *want, int nwant);
ir_node *reshape_to(builder *b, ir_node *x, const shape *s, loc at, const char *scope);
ir_node *flatten(builder *b, ir_node *x, int64_t sd, int64_t ed, loc at, const char *scope);
ir_node *softmax(builder *b, ir_op op, ir_node *x, int64_t d, loc at, const char *scope);
ir_node *layernorm(builder *b, ir_node *x, const int64_t *ns, int nd, ir_node *w, ir_node *bias, double eps,
                   loc at, const char *scope, const char *whom);
ir_node *reduce(builder *b, ir_op op, ir_node *x, const int64_t *dims, int nd, bool keep, loc at);
ir_node *permute(builder *b, ir_node *x, const int *perm, loc at);
ir_node *matmul(builder *b, ir_node *x, ir_node *y, loc at);
ir_node *cat(builder *b, const sv *list, int64_t d, loc at);

/* ------------------------------------- index.c: indexing and shapes */

/* One item of x[...], evaluated: 'i' an index (v[0]), 's' a slice
 * (v[0]:v[1]:v[2], has[k] when written), 'n' None, 'e' the ellipsis. */
typedef struct ixitem {
    char kind;
    sv v[3];
    bool has[3];
    loc at;
} ixitem;

/* x.shape: a tuple of ints, the batch dim as the batch size. */
bool shape_tuple(builder *b, const ir_node *x, loc at, sv *out);
/* base.name (x.shape, x.ndim). */
bool attr_value(builder *b, const sv *base, const char *name, loc at, sv *out);
/* base[items]: a tensor's view or a tuple's slice. */
bool subscript_value(builder *b, const sv *base, const ixitem *items, int n, loc at, sv *out);
/* x expanded to `to` (checked by the caller), a view. */
ir_node *expand_to(builder *b, ir_node *x, const shape *to, loc at);
/* x[..., start:start+count, ...] along dim d, a view. */
ir_node *narrow(builder *b, ir_node *x, int d, int64_t start, int64_t count, loc at);

/* ------------------------------------ irbuild.c: the forward walk */

bool call_module(builder *b, inst *mod, const fargs *a, loc call_at, sv *out);
/* Runs statements in f until one returns; false after a diagnostic. */
bool exec_block(builder *b, frame *f, const vec *body);

/* ------------------------------ irbuild_args.c: a call's arguments */

/* A local variable of f, or NULL; binding one (again) sets its value. */
sv *frame_lookup(frame *f, const char *name);
void frame_bind(builder *b, frame *f, const char *name, const sv *v);
/* The child module `name` of self, or NULL. */
inst *find_member(inst *self, const char *name);
/* Whether name is a constructor value of m (a parameter or body constant). */
bool sema_eval_has(const inst *m, const char *name);
/* Binds a call's arguments to a user module's forward parameters, in f. */
DPC_NOINLINE bool bind_forward(builder *b, inst *m, frame *f, const fargs *a, loc at);
/* f(*xs): the items of a tuple or list as positional arguments. */
DPC_NOINLINE bool spread_args(builder *b, const node *n, fargs *a);

/* ---------------------- irbuild_values.c: operators on evaluated values */

/* A constructor value as a forward value. */
void sv_of_val(const val *v, sv *out, dpc_arena *a);
/* A value known when compiling (a number, None, a module) as a
 * constructor value; false for tensors and the batch size. */
bool sv_const(const sv *v, val *out);
/* The truth of a condition (cond, evaluated to v) in f, which must be
 * known when compiling; false after a diagnostic. */
bool const_truth(builder *b, const frame *f, const node *cond, const sv *v, bool *out);
/* l op r (n: the ND_BINOP), -v (n: the ND_NEG). */
DPC_NOINLINE bool binop_values(builder *b, const node *n, const sv *l, const sv *r, sv *out);
DPC_NOINLINE bool neg_value(builder *b, const node *n, const sv *v, sv *out);
/* A ModuleList, a Sequential or a tuple as a sequence: its length (-1 for
 * anything else), its entry i, base[idx] (n: the ND_INDEX). */
int seq_len(const sv *v);
sv seq_item(const sv *v, int64_t i);
DPC_NOINLINE bool index_value(builder *b, const node *n, const sv *base, const sv *idx, sv *out);

/* ------------------------------------------ nn_container.c, functions.c */
/* A Sequential's forward (also a user module that extends Sequential): its
 * children in order. */
bool nn_sequential_call(builder *b, inst *m, const fargs *a, loc at, sv *out);
/* A forward function call (false with nothing reported if fn is none). */
DPC_NOINLINE bool call_function(builder *b, const char *fn, const fargs *a, loc at, sv *out);

/* ------------------------------ fn_dtype.c: dtypes, masks, finfo */

/* A dtype name (float32, float, int64, long, bool) as a value; false for
 * other names. */
bool dtype_named(const char *name, sv *out);
/* The operators on masks and the comparisons of tensors: ==, !=, <, <=, >,
 * >= (to bool), &, |, ~ (OP_INVERT; r is l) on bool tensors. False with
 * nothing reported when op is none of them or no operand is a tensor; else
 * true, with out->k SV_TENSOR or SV_NONE after a diagnostic. */
bool mask_binop(builder *b, int op, const sv *l, const sv *r, loc at, loc lat, loc rat, sv *out);
/* The dtype of l op r (+ - * /, no bool operand): PyTorch's promotion, a
 * Python number taking the tensor's kind. */
ir_dtype arith_dtype(const sv *l, const sv *r, ir_op op);
/* finfo(float32).min / .max / .eps / .tiny (dt NULL: finfo()) */
bool finfo_value(builder *b, const sv *dt, const char *field, loc at, sv *out);

/* ------------------------------------------------- builtin modules */

/* Argument kinds: i int, f float (an int is kept as int), b bool, s string,
 * p int or pair, P int, pair or None, q int/pair/string (conv padding),
 * n int or None, g float or None, t int or tuple of ints (normalized_shape),
 * o int, None or pair of int/None (adaptive output size), l list of modules,
 * m a module, L list of ints or None, u int or tuple of one int,
 * U int, tuple of one int or string (Conv1d padding), B bool or None,
 * r number, tuple of numbers or None (Upsample's scale_factor). */
typedef struct argspec {
    const char *name;
    char kind;
    const char *deflt; /* NULL: required; else a literal: 1, 0.5, True, None, 'zeros' */
} argspec;

#define BUILTIN_MAX_ARGS 10

/* One torch.nn module: everything dpc knows of it, in one row. Only name
 * and the signature are required; a hook left NULL does nothing (no
 * checks, no parameters, an empty extra_repr). A row is defined beside its
 * functions in nn_*.c and listed in DPC_MODULES (compiler.h). */
typedef struct builtin {
    const char *name; /* PyTorch's class name */
    int nargs;
    argspec args[BUILTIN_MAX_ARGS]; /* PyTorch's constructor signature */
    /* variadic constructors (Sequential(*modules), Identity(*args)): binds
     * the arguments itself, instead of args */
    bool (*varargs)(dpc_ctx *c, inst *in, const bound_arg *args, int nargs);
    /* after binding: PyTorch's __init__ checks and normalisations (errors
     * located at arg_at[i], see NEED), and the children it registers */
    void (*init)(dpc_ctx *c, inst *in, const loc *arg_at);
    /* the state_dict entries, through builtin_add_param */
    void (*params)(dpc_ctx *c, model *m, inst *in);
    /* extra_repr, as PyTorch prints it */
    void (*repr)(const inst *in, dpc_buf *out);
    /* forward of one tensor `input` (a float tensor unless any_dtype): the
     * result, or NULL after a diagnostic */
    ir_node *(*lower)(builder *b, inst *m, ir_node *x, loc at);
    bool any_dtype;
    /* forward taking the call as it is (containers), instead of lower */
    bool (*call)(builder *b, inst *m, const fargs *a, loc at, sv *out);
} builtin;

/* In an init hook (dpc_ctx *c, const loc *arg_at in scope): reports the
 * message at argument i unless cond holds. */
#define NEED(cond, i, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            error_at(c, arg_at[i], __VA_ARGS__);                                                   \
    } while (0)

#define X(e, id) extern const builtin nn_##id;
DPC_MODULES(X)
#undef X

/* The lowerings shared by a module and its function (nn_basic.c, nn_norm.c). */
ir_node *nn_hardtanh_of(builder *b, ir_node *x, double lo, double hi, loc at, const char *scope);
ir_node *nn_leaky_relu_of(builder *b, ir_node *x, double slope, loc at, const char *scope);
/* F.interpolate (nn_conv.c): the check of its arguments (the message, a
 * format taking the mode, and in *arg the argument it is about: 0 size,
 * 1 scale_factor, 2 mode, 3 align_corners, 4 recompute_scale_factor; NULL
 * when they are fine; recompute -1 for None), and the lowering (size or
 * scale, two spatial dims each). */
const char *nn_interpolate_check(const char *mode, bool has_size, bool has_scale, bool align_given, int recompute,
                                 int *arg);
ir_node *nn_interpolate_of(builder *b, ir_node *x, bool bilinear, const int64_t *size, const double *scale,
                           bool align, bool recompute, loc at, const char *scope, const char *whom);
ir_node *nn_group_norm_of(builder *b, ir_node *x, int64_t groups, ir_node *w, ir_node *bias, double eps, loc at,
                          const char *scope, const char *whom);

const builtin *builtin_row(builtin_kind k);
/* nn_helpers.c: what the rows call. A builtin module's forward takes one
 * argument, PyTorch's `input`. */
bool builtin_one_arg(builder *b, inst *m, const fargs *a, loc at);
void builtin_add_param(dpc_ctx *c, model *m, inst *in, const char *leaf, int rank, const int64_t *shape, int init,
                       double fan_in);
/* repr helpers: `sep` `k`=`v`; a pair as a tuple (_pair: 3 prints (3, 3));
 * whether a pair argument is (x, x). */
void repr_kv(dpc_buf *out, const char *sep, const char *k, const val *v);
void repr_pair(const val *v, dpc_buf *out);
bool pair_is(const val *v, int64_t x);
void pair_of(const val *v, int64_t out[2]);
/* n ints from an int (repeated) or a tuple of n ints (_single, _pair) */
void tuple_of(const val *v, int n, int64_t *out);

#endif
