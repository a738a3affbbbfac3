/* dpc_compile.h - the compiler's one entry point: sources and options in, a
 * compiled unit out. Every consumer (the CLI, the model runtime, the
 * artifact writer and reader, the C API, both backends) compiles through
 * dpc_compile and reads the result through the unit: its forward signature
 * as a typed struct, its texts (the model tree, the graph IR, the fused
 * schedule) and each dialect's source, produced on request and
 * deterministic. This is the only compiler header runtime/ includes: what
 * the stages that run kernels need (the backends and the memory plan) is
 * here too, as plain structs and accessors of the unit: the kernel list
 * (dpc_unit_kernel), the buffers the memory plan places (dpc_unit_buf) and
 * the CUDA launch plan (dpc_unit_cuda_program), with the kernel ABI
 * (kabi.h) that the generated code and the runtime share.
 *
 * Memory: a unit owns its compilation's arena; everything it hands out
 * (names, the signature, the graphs) lives until dpc_unit_free. Running out
 * of memory inside the compiler is caught here and returned as DPC_ENOMEM. */
#ifndef DPC_COMPILE_H
#define DPC_COMPILE_H

#include "base.h"
#include "kabi.h"
#include "tensor.h"

/* Counts of a forward's interface, checked where the forward is read
 * (irbuild.c, located errors), so that the runtime, the C API, the CLI and
 * the CUDA control block can hold them in arrays of these sizes:
 *   - scalar parameters: at most DPC_MAX_SCALARS;
 *   - tensor inputs, and tensors returned: at most DPC_MAX_IO each. */
#define DPC_MAX_SCALARS 1024
#define DPC_MAX_IO 64

/* How a backend stores float buffers (weights, activations, inputs and
 * outputs on the device): f32, or 16 bits (bf16, f16) read into float for
 * every operation and rounded to nearest even on every store. Integer
 * buffers (i64 indices) are never narrowed. The CPU backend is f32 only. */
typedef enum kprec { KP_F32 = 0, KP_BF16 = 1, KP_F16 = 2 } kprec;
/* "f32", "bf16", "f16". */
const char *kprec_name(kprec p);
/* The inverse, also taking "float32", "bfloat16", "float16" and "half";
 * false for anything else. */
bool kprec_parse(const char *s, kprec *out);

/* The compiler's internals (kernel.h, frontend.h define them): opaque to
 * runtime/, which never reads them; the compiler's own tests do. */
typedef struct kgraph kgraph;
typedef struct dpc_front dpc_front;

/* ------------------------------------------------------------- compiling */

/* How far to compile: the module tree (`dpc print`), the graph IR
 * (`dpc ir`), or the kernel graph fused from it (everything that runs or
 * emits source). Each stage checks everything the earlier ones do. */
typedef enum dpc_stage { DPC_STAGE_TREE, DPC_STAGE_IR, DPC_STAGE_FUSED } dpc_stage;

/* Serves an import from memory instead of the file system (a .dpa's stored
 * sources): path as written in the import, *text / *len its bytes (kept by
 * the caller until the compilation returns), real its name in
 * diagnostics. False when there is no such source. */
typedef bool (*dpc_import_fn)(void *ud, const char *path, char *real, size_t real_n, const char **text,
                              size_t *len);

/* A value for a run-time dim of the entry: `forward(ids: i64[N, S])` names
 * S, neither the batch nor a constructor value, so S is bound from the
 * input at run time; a graph is built for one value of it (`dpc ir --bind
 * S=16`, or the runtime's specialisation for the S an input has). */
typedef struct dpc_dim_bind {
    const char *name;
    int64_t value;             /* 1 .. 2^31 - 1 */
} dpc_dim_bind;
/* At most this many run-time dims at the entry (and binds). */
#define DPC_MAX_RTDIMS 8

typedef struct dpc_compile_opts {
    const char *path;          /* the root source: read from here, or its name when text is set */
    const char *text;          /* in-memory root source (len bytes), or NULL to read path */
    size_t len;
    dpc_import_fn read_import; /* NULL: imports from the file system */
    void *import_ud;
    dpc_stage stage;
    /* values for the entry's run-time dims; each name must be one of them */
    const dpc_dim_bind *binds;
    int nbinds;
    /* An entry with a run-time dim not in binds: false (the default) makes
     * that an error at DPC_STAGE_IR and later, asking for a value; true
     * stops the compilation after the entry instead: the unit is
     * "unbound" (signature.unbound): it has the module tree, the state_dict
     * and the inputs (with their run-time dims), but no graph, no outputs
     * and no kernels. The runtime compiles it again per value
     * (dpc_unit_specialise). */
    bool defer_dims;
} dpc_compile_opts;

typedef struct dpc_unit dpc_unit;

/* Compiles o->path (or o->text) up to o->stage. On a user error returns
 * DPC_EUSER with the rendered diagnostics in diags (may be NULL); on
 * exhaustion DPC_ENOMEM. */
dpc_status dpc_compile(const dpc_compile_opts *o, dpc_unit **out, dpc_buf *diags, dpc_err *e);
/* The unit of u's very sources (the files it read, served from memory:
 * the disk is not read again) compiled to stage with these values for its
 * run-time dims, each value 1 .. 2^31 - 1, in signature.rtdims order. */
dpc_status dpc_unit_specialise(const dpc_unit *u, const int64_t *values, dpc_stage stage, dpc_unit **out,
                               dpc_buf *diags, dpc_err *e);
/* Parses "S=16" (`--bind`) into b (name pointing into text, cut at '='
 * in buf, which must hold strlen(text) + 1 bytes). */
dpc_status dpc_dim_bind_parse(const char *text, char *buf, size_t bufn, dpc_dim_bind *b, dpc_err *e);
/* The same for a file, the common case. */
dpc_status dpc_compile_file(const char *path, dpc_stage stage, dpc_unit **out, dpc_buf *diags, dpc_err *e);
void dpc_unit_free(dpc_unit *u);
dpc_stage dpc_unit_stage(const dpc_unit *u);

/* ------------------------------------------------------- the signature */

/* A dim: k, or k * N for the batch dim (batch true). rt: 1 + the index in
 * signature.rtdims of the run-time dim it is (k then its bound value, 0
 * while unbound), 0 for a dim fixed in the source. */
typedef struct dpc_sig_dim {
    int64_t k;
    bool batch;
    int rt;
} dpc_sig_dim;

/* A run-time dim of the entry (S of `ids: i64[N, S]`): its name, its value
 * in this unit (0 when unbound) and the input dim it is first read from
 * (other inputs may name it too: their dim[].rt says so). */
typedef struct dpc_sig_rtdim {
    const char *name;
    int64_t value;
    int input, dim;
} dpc_sig_rtdim;

/* A tensor of forward: an input (named) or an output (name NULL). */
typedef struct dpc_sig_tensor {
    const char *name;
    dpc_dtype dtype;           /* DPC_F32, DPC_I64 (indices) or DPC_I32 */
    const char *dtype_name;    /* as the IR writes it: "f32", "i64", "i32" */
    int rank;
    dpc_sig_dim dim[DPC_MAX_RANK];
    const char *shape;         /* written as in the .dp file, "[N, 784]" */
    int64_t limit;             /* index inputs: rows of the smallest embedding reading it, 0 if none */
    const char *file;          /* outputs: where forward returns it */
    int line;
} dpc_sig_tensor;

/* Scalar keyword parameter types (dpc.h's dpc_scalar_type). */
typedef enum dpc_sig_scalar_type { DPC_SIG_FLOAT = 0, DPC_SIG_INT = 1, DPC_SIG_BOOL = 2 } dpc_sig_scalar_type;

typedef struct dpc_sig_scalar {
    const char *name;
    dpc_sig_scalar_type type;
    bool has_default;
    double def;                /* the default (0 when none) */
} dpc_sig_scalar;

/* How `dpc init` fills a parameter: PyTorch's defaults. */
enum {
    INIT_KAIMING = 1, /* kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    INIT_BIAS,        /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)), 0 when fan_in == 0 */
    INIT_ONES,
    INIT_ZEROS,
    INIT_NORMAL,      /* N(0, 1): Embedding */
    INIT_COUNTER,     /* num_batches_tracked: int64 0 */
    INIT_NORMAL_STD,  /* N(0, std^2), std in fan_in: HF Conv1D's normal_(std=0.02) */
    INIT_TENSOR,      /* a Parameter/Buffer member: as its creation expression says (dpc_sig_param.value) */
};

/* The value of a Parameter/Buffer member (INIT_TENSOR): every element
 * `a` (DPC_SIG_FILL), data (DPC_SIG_DATA, numel values, row-major), or
 * drawn by `dpc init` from N(a, b^2) (DPC_SIG_NORMAL) or U(a, b)
 * (DPC_SIG_UNIFORM). */
typedef enum dpc_sig_value_kind { DPC_SIG_FILL, DPC_SIG_DATA, DPC_SIG_NORMAL, DPC_SIG_UNIFORM } dpc_sig_value_kind;
typedef struct dpc_sig_value {
    dpc_sig_value_kind kind;
    double a, b;
    const double *data;
} dpc_sig_value;

/* A state_dict entry: every parameter and buffer of the module tree, in
 * model order (the index of the model's parameter table). */
typedef struct dpc_sig_param {
    const char *key;           /* "fc1.weight" */
    int rank;
    int64_t shape[DPC_MAX_RANK];
    bool is_int;               /* an integer buffer (num_batches_tracked) */
    bool ignored;              /* in the state_dict, not read by forward */
    int init;                  /* INIT_*: how `dpc init` fills it */
    double fan_in;             /* for INIT_KAIMING and INIT_BIAS */
    int64_t zero_row;          /* INIT_NORMAL: the row left zero (Embedding's padding_idx), -1 none */
    dpc_sig_value value;       /* INIT_TENSOR */
    /* a buffer registered with persistent=False: not in the state_dict (not
     * loaded, not written by `dpc init`, not listed); the runtime fills it
     * from value, a constant, when the weights are bound */
    bool nonpersistent;
} dpc_sig_param;

typedef struct dpc_signature {
    const char *model_name;
    const char *wrapper;       /* "DataParallel" when the source wraps the model, else NULL */
    const char *batch_name;    /* "N" */
    const char *file;          /* the root source */
    int ninputs, nscalars, noutputs, nparams;
    const dpc_sig_tensor *inputs, *outputs; /* outputs: at DPC_STAGE_IR and later */
    const dpc_sig_scalar *scalars;
    const dpc_sig_param *params;
    /* the entry's run-time dims (DPC_STAGE_IR and later, or an unbound
     * unit), in the order the inputs first name them */
    int nrtdims;
    const dpc_sig_rtdim *rtdims;
    /* some run-time dim has no value (dpc_compile_opts.defer_dims): inputs
     * only, noutputs 0, no graph */
    bool unbound;
} dpc_signature;

const dpc_signature *dpc_unit_signature(const dpc_unit *u);
/* Whether input t has no batch dim (`table: [10, 4]`): it is passed whole
 * to every replica, not split. */
static inline bool dpc_sig_input_whole(const dpc_sig_tensor *t) { return t->rank == 0 || !t->dim[0].batch; }

/* The one rule for forward's scalar keyword arguments (the CLI's --kw and
 * dpc_program_run): out[i] receives scalar i, its default unless given.
 * Each name must be a scalar of forward, given once; a bool takes 0 or 1,
 * an int an integral value; a scalar without default must be given.
 * DPC_EUSER naming the offender otherwise. */
dpc_status dpc_sig_scalars(const dpc_signature *s, const char *const *names, const double *values, int n,
                           double *out, dpc_err *e);
/* The index of scalar `name`, -1 when forward has none. */
int dpc_sig_scalar_index(const dpc_signature *s, const char *name);
/* The value of --kw NAME=TEXT for scalar sc: a float or an int as strtod
 * reads it (an int integral), a bool as true/True/1 or false/False/0. */
dpc_status dpc_sig_scalar_parse(const dpc_sig_scalar *sc, const char *text, double *out, dpc_err *e);

/* ------------------------------------------------------------ the texts */

/* The module tree as PyTorch prints it (`dpc print`). */
void dpc_unit_print(const dpc_unit *u, dpc_buf *out);
/* The graph IR (`dpc ir`, DPC_STAGE_IR and later), or with fused the
 * kernel schedule (`dpc ir --stage fused`, DPC_STAGE_FUSED); nothing is
 * written for a unit not compiled that far. */
void dpc_unit_ir(const dpc_unit *u, bool fused, dpc_buf *out);

/* The graph and its kernels as Graphviz DOT (`dpc graph`; DPC_STAGE_FUSED,
 * else nothing). */
void dpc_unit_dot(const dpc_unit *u, dpc_buf *out);

typedef enum dpc_dialect { DPC_DIALECT_C, DPC_DIALECT_CUDA } dpc_dialect;
/* A dialect's source of the kernel graph (DPC_STAGE_FUSED, else nothing),
 * CUDA with floats stored as prec (the C dialect is f32 only):
 * deterministic, byte for byte what the backends compile. */
void dpc_unit_source(const dpc_unit *u, dpc_dialect d, kprec prec, dpc_buf *out);

/* ------------------------------------------------- what runs: kernels */

/* What a runtime says about kernel k (in execution order) of the unit: in
 * listings, and in errors blamed on it. */
typedef struct dpc_kernel_info {
    const char *name;  /* its function name in both dialects */
    const char *kind;  /* "elementwise", "gemm", "conv", ... */
    int kind_index;    /* 0 .. DPC_KERNEL_KINDS - 1, in the order dpc_kernel_kind_name lists them */
    const char *file;  /* the .dp file and line of its main op ("?", 0 if unknown) */
    int line;
    const char *scope; /* the module path of its main op, "" if none */
} dpc_kernel_info;
#define DPC_KERNEL_KINDS 11
const char *dpc_kernel_kind_name(int kind_index);
/* Kernels of the kernel graph (0 before DPC_STAGE_FUSED), and kernel k,
 * 0 <= k < dpc_unit_nkernels. */
int dpc_unit_nkernels(const dpc_unit *u);
/* The prepare kernels: kernels 0 .. dpc_unit_nprepare - 1 read parameters
 * and constants only and write BUF_CONST buffers; a backend runs them once
 * when the weights are bound (again if they are bound again), and every
 * forward runs the rest. Batch norms folded into convolutions
 * (compiler/fold_bn.c) are their first users. */
int dpc_unit_nprepare(const dpc_unit *u);
void dpc_unit_kernel(const dpc_unit *u, int k, dpc_kernel_info *out);
/* Nodes of the graph IR (DPC_STAGE_IR and later). */
int dpc_unit_nnodes(const dpc_unit *u);
/* Floating-point operations of one forward at batch N (DPC_STAGE_FUSED). */
double dpc_unit_flops(const dpc_unit *u, int64_t N);

/* ------------------------------------------- what runs: the buffers */

/* A buffer of the kernel graph, the memory plan's input (memplan.h): every
 * buffer a kernel reads or writes, by id (the index the kernels and the
 * launch plan name it by: dpc_cpu_kctx.buf[id], dpc_cu_launch.bufs). */
/* BUF_CONST: written by a prepare kernel (one whose operands are parameters
 * and constants only: kgraph.nprepare), once per load; it lives as long as
 * the weights and is never placed by the per-forward memory plan. */
typedef enum buf_kind { BUF_INPUT, BUF_PARAM, BUF_TEMP, BUF_OUTPUT, BUF_SCRATCH, BUF_CONST } buf_kind;

typedef struct kbuf {
    int id;
    buf_kind kind;
    int64_t elems;  /* elements per ... */
    bool sym;       /* ... times N when true */
    int esize;      /* bytes per element */
    int index;      /* BUF_INPUT/OUTPUT: position; BUF_PARAM: model param index */
    int first, last;/* kernels that write first and read last (liveness) */
    const char *what;
} kbuf;

/* Bytes per element of b when floats are stored as p. */
static inline int kbuf_esize(const kbuf *b, kprec p) { return b->esize == 4 && p != KP_F32 ? 2 : b->esize; }

/* Buffers of the kernel graph (0 before DPC_STAGE_FUSED), and buffer id,
 * 0 <= id < dpc_unit_nbufs. */
int dpc_unit_nbufs(const dpc_unit *u);
const kbuf *dpc_unit_buf(const dpc_unit *u, int id);

/* ------------------------------------- what runs: the convolutions */

/* Each conv2d kernel described for a runtime that runs it as one library
 * call (the CPU backend's oneDNN convolution, ctx->conv of kabi.h): the
 * geometry without the batch, and the post-ops that the call computes
 * after the convolution and its bias, in order: activations and at most
 * one residual sum (y = conv(x) + bias, then each post-op; a sum adds
 * the tensor passed as `sum` to the value so far). The kernel's epilogue
 * ops after the first `nfused` stay in the generated C, run over y after
 * the call. The same description decides what the generated C leaves to
 * the call (emit_c_conv.c) and what the runtime asks the library for
 * (compiler/conv_post.c). */
typedef enum dpc_conv_act {
    DPC_ACT_RELU,      /* max(x, 0) */
    DPC_ACT_CLIP,      /* min(max(x, alpha), beta): relu6, clamp */
    DPC_ACT_HARDSWISH, /* x * relu6(x + 3) / 6 */
    DPC_ACT_SWISH,     /* x * sigmoid(x): SiLU */
    DPC_ACT_LOGISTIC,  /* sigmoid */
    DPC_ACT_TANH,
    DPC_ACT_GELU_ERF,
    DPC_ACT_GELU_TANH,
    DPC_ACT_SUM,       /* + the residual tensor `sum` (same shape as y) */
} dpc_conv_act;
#define DPC_CONV_MAX_POST 6
typedef struct dpc_conv_post {
    dpc_conv_act act;
    float alpha, beta; /* DPC_ACT_CLIP's bounds */
} dpc_conv_post;
typedef struct dpc_conv_desc {
    int kernel;                 /* its index in dpc_unit_kernel's list */
    int64_t C, H, W;            /* input channels and size (the batch N apart) */
    int64_t Co, Ho, Wo;         /* output */
    int64_t kh, kw, groups;
    int64_t stride[2], dil[2];  /* h, w; dilation 1 is none */
    int64_t pad_l[2], pad_r[2]; /* top, left; bottom, right */
    bool bias;                  /* a bias is passed */
    int w_param;                /* the weights' model parameter index, -1 when computed in forward */
    int npost;
    dpc_conv_post post[DPC_CONV_MAX_POST];
    int nfused;                 /* epilogue ops the post-ops compute */
    /* the activation layout between convs (conv_keep_marks, conv_post.c):
     * the result may stay in the library's layout (its epilogue is all
     * post-ops, it is no graph output, and only convs read it, as their
     * source or residual); the convs whose result is this conv's source
     * and residual when they may (-1: another kernel's, NCHW) */
    bool y_keep;
    bool y_convs;               /* y_keep, and only convs read it (no NHWC reader): it may stay in
                                   the primitives' own layout (runtime/cpu/conv_dnnl.c, opaque) */
    bool y_blk;                 /* y_keep, some NHWC reader reads it, and each has an nChw8c loop
                                   too (conv_blk_reader): it may be kept in nChw8c */
    int src_conv, sum_conv;
    bool w_const;               /* the weights are a prepare kernel's result (BUF_CONST) */
} dpc_conv_desc;

/* Convolution kernels of the unit (0 before DPC_STAGE_FUSED), and conv i
 * (the i-th conv kernel in execution order, the conv_index of ctx->conv). */
int dpc_unit_nconvs(const dpc_unit *u);
void dpc_unit_conv(const dpc_unit *u, int i, dpc_conv_desc *out);

/* ------------------------------------------ what runs: the CUDA program */

/* The CUDA dialect's source (byte for byte dpc_unit_source's) and its
 * launch plan (kabi.h), floats stored as prec. *source is malloc'ed; free
 * the plan with dpc_cu_plan_free. DPC_EUSER (naming the op and its .dp
 * line) for a graph the CUDA dialect cannot run, DPC_ENOMEM;
 * DPC_EINTERNAL before DPC_STAGE_FUSED. */
dpc_status dpc_unit_cuda_program(const dpc_unit *u, kprec prec, char **source, dpc_cu_plan *plan, dpc_err *e);
void dpc_cu_plan_free(dpc_cu_plan *plan);

/* ---------------------------------------------------------- the sources */

/* The files the compilation read, the root first: dpc_unit_nfiles of
 * them; file i's path as read, with its text (NUL-terminated, len bytes). */
int dpc_unit_nfiles(const dpc_unit *u);
const char *dpc_unit_file(const dpc_unit *u, int i, const char **text, size_t *len);

/* The rules every source file of a model is held to, whether read from
 * disk (parse.c) or stored in a .dpa (artifact.c), so that an artifact can
 * carry nothing a .dp could not: at most DPC_MAX_SOURCE_BYTES, and named by
 * a '/'-separated path relative to the root model's directory that stays
 * inside it (not absolute, no ".." above the root). rel may be NULL to
 * check the size alone (a root read from disk, named as the user wrote
 * it; on disk the path rule is enforced on resolved paths, symbolic links
 * included). Returns NULL when they hold, else what is wrong, to follow
 * the file's name ("leaves the model's directory"). */
#define DPC_MAX_SOURCE_BYTES (16u << 20)
const char *dpc_source_rule(const char *rel, size_t len);

/* ---------------------------------------------------------- the internals */

/* The kernel graph (DPC_STAGE_FUSED; NULL before) and the front end's
 * result (model tree and graph IR): opaque here, for the compiler's own
 * tests, which include kernel.h and frontend.h. */
const kgraph *dpc_unit_kgraph(const dpc_unit *u);
dpc_front *dpc_unit_front(const dpc_unit *u);

#endif
