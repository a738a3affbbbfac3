/* onnx_imp.h - the importer's internals, shared by its files: the driver
 * (onnx_import.c), the op table (onnx_ops.c) and its families
 * (onnx_ops_*.c), nn.MultiheadAttention's export (onnx_mha.c), the
 * constants (onnx_fold.c), and below them all the values, errors and
 * attributes (onnx_values.c) and the .dp text (onnx_text.c). */
#ifndef DPC_ONNX_IMP_H
#define DPC_ONNX_IMP_H

#include "onnx.h"
#include "onnx.pb-c.h"

#include <stdarg.h>

/* A dim: concrete (s == 0, value v) or v times the symbol s (1 = the batch
 * N, 2.. the other run-time dims). */
typedef struct sdim {
    int64_t v;
    int s;
} sdim;

enum { VK_FLOAT, VK_INT, VK_BOOL };

typedef struct ival {
    const char *name;  /* the ONNX name */
    int kind;          /* VK_* */
    bool shaped;
    int rank;
    sdim d[DPC_MAX_RANK];
    dpc_tensor *c;     /* a constant (F32 for floats, I64 for ints and bools), owned by the importer */
    int *csym;         /* for an int constant: per element symbol (0 none; c holds the coefficient) */
    const char *var;   /* the .dp expression of a value computed in forward */
    int stmt;          /* the statement defining var, -1 for a forward input */
    int node;          /* the ONNX node producing it, -1 for inputs and initializers */
    int uses;          /* node inputs (and graph outputs) naming it */
    int init;          /* initializer index, -1 if none */
    bool deferred;     /* a MatMul whose only reader, an Add of a bias, makes the Linear */
    int merged;        /* >= 0: this is reshape(v[merged], -1, last dim) merging the batch with other dims,
                        * which dpc cannot represent: only a Linear and the reshape back read it */
    bool region;       /* inside a recognised nn.MultiheadAttention export (onnx_mha.c): shape only */
    /* the constant's lifetime (onnx_fold.c); all zero means "not tracked" */
    int cslot;         /* 1 + c's slot in I->tensors when the importer may free it, 0 none */
    int left;          /* readers not yet imported (once counted) */
    bool counted;      /* left holds the count */
    bool lazy;         /* an integer initializer not converted yet: c made when a node reads it */
} ival;

typedef struct istmt {
    char *line;        /* forward's text, or NULL */
    char *member;      /* a member declaration, or NULL */
    int *uses, nuses;  /* the values it reads (owned; as many as it has: a Concat may read hundreds) */
    int wfirst, wcount; /* its weights: I->w[wfirst .. wfirst + wcount) */
    bool live;
} istmt;

typedef struct iweight {
    char *key;
    dpc_tensor *t;     /* borrowed from the importer's tensors */
} iweight;

typedef struct imp {
    const char *path;
    const char *dir;
    Onnx__ModelProto *m;
    const Onnx__GraphProto *g;
    int64_t opset;
    ival *v;
    int nv, capv;
    int *hash;          /* open addressing: value index + 1 */
    size_t hcap;
    istmt *st;
    int nst, capst;
    iweight *w;
    int nw, capw;
    dpc_tensor **tensors;
    int nt, capt;
    struct imp_tslot { int refs; bool pinned; } *tslot; /* per tensor: values holding it; read by a computing node */
    int captslot;
    int64_t folded, budget; /* elements imp_tensor made, and may make (onnx_fold.c) */
    char **names;       /* every string made (owned) */
    int nnames, capnames;
    const char **idset; /* the identifiers handed out: open addressing */
    size_t idcap, nid;
    struct imp_sfx { const char *base; int next; } *sfx; /* per identifier base: the next suffix to try */
    size_t sfxcap, nsfx;
    char *syms[1 + 2 * DPC_MAX_RANK + 1]; /* symbol id -> .dp name ([1] = "N") */
    int nsyms;
    int cur;            /* the node being imported */
    struct { const char *name; int count, first; } *uses; /* readers of each name: open addressing */
    size_t ucap;
    int tmpn;
    const char *bad_attr; /* an attribute read as the wrong type */
    const char *bad_float; /* a float attribute that is NaN or infinite */
    char bad_access[160]; /* an absent input/output or a value index out of range was looked up ("" none):
                           * the importer's bug, refused as an internal error when the op returns */
    int *claim;         /* per node: 1 + the MultiheadAttention pattern that claimed it (onnx_mha.c), 0 none */
    struct imp_mha *mha;
    int nmha;
    bool oom;
    dpc_err *e;
} imp;

/* ---- values (onnx_values.c) ---- */
/* Value 0 is a placeholder, never a name's value: what a look-up gets
 * where there is no value (an index out of range, a position the arity
 * check should have ruled out). Such a look-up is recorded (bad_access)
 * and the node refused with an internal error when its op returns; the
 * placeholder keeps every read and write inside the values array. */
enum { IMP_PLACEHOLDER = 0 };
int imp_find(imp *I, const char *name);
int imp_new_value(imp *I, const char *name);
/* The value of index v: &I->v[v], or the placeholder (recorded) when v is
 * not an index of a value. */
ival *imp_val(imp *I, int v);
/* DPC_OK when v is a value's index (not the placeholder), else the
 * internal error: for what writes a value (statements, shapes, constants). */
dpc_status imp_check_value(imp *I, int v);

/* ---- a node's inputs and outputs ----
 * import_node checks each node against its row's arity (imp_op.ins and
 * outs) before the op function runs: a required position is given (and
 * defined), so the accessors of required positions return an index. */
/* The value of input k, a position the row requires (or of a node already
 * imported, for a pattern): always an index into the values. */
int imp_in(imp *I, const Onnx__NodeProto *n, size_t k);
/* An optional input k: true with *v its value when given, false (and *v
 * untouched) when absent, past the inputs or named "". */
bool imp_opt(imp *I, const Onnx__NodeProto *n, size_t k, int *v);
/* The value of output k, a required position; imp_opt_out the optional. */
int imp_out(imp *I, const Onnx__NodeProto *n, size_t k);
bool imp_opt_out(imp *I, const Onnx__NodeProto *n, size_t k, int *v);
/* Memory owned by the importer (freed with it); NULL after an error. */
void *imp_alloc(imp *I, size_t n);
/* A new tensor owned by the importer, counted against the import's
 * budget (onnx_fold.c); NULL after a located error. */
dpc_tensor *imp_tensor(imp *I, dpc_dtype dt, int rank, const int64_t *shape);
int64_t imp_numel(const ival *v);
bool imp_const_scalar(const ival *v, double *x);
bool imp_concrete(const ival *v); /* shaped with only concrete dims */

/* ---- errors (onnx_values.c) ---- */
dpc_status imp_err(imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
dpc_status imp_oom(imp *I);
/* An ONNX string for a message: escaped as a comment, cut at 200 bytes. */
void imp_comment(char *out, size_t n, const char *s);

/* ---- the importer's bookkeeping (onnx_values.c) ---- */
uint64_t imp_hash(const char *s);
/* Grows the array *p of *cap elements (zeroed) to hold need; false when
 * out of memory. */
bool imp_grow(void **p, int *cap, int need, size_t elem);
/* Value 0, the placeholder (made first, before any name's value). */
dpc_status imp_add_placeholder(imp *I);
/* Counts the readers of every name (imp_uses). */
dpc_status imp_count_uses(imp *I);

/* ---- names and text (onnx_text.c; imp_printf, imp_uses: onnx_values.c) ---- */
/* A fresh identifier made from an ONNX string (sanitised; never pasted). */
const char *imp_ident(imp *I, const char *base, const char *fallback);
const char *imp_tmp(imp *I);
/* The .dp expression of v: its variable, a literal for a constant scalar,
 * a symbol for a symbolic int; a float constant tensor becomes a Parameter
 * member (with its weight). *vi is the value to record as used, -1 for a
 * literal. NULL after an error. */
const char *imp_ref(imp *I, int v, int *vi);
const char *imp_dim(imp *I, sdim d); /* "N", "S", "S * 12", "64" */
/* The shortest decimal that reads back as the float32 v ("1e-05"). */
const char *imp_f32(imp *I, double v);
/* How many node inputs and graph outputs name `name`; *first: the first
 * reading node (-1 for none or a graph output). */
int imp_uses(imp *I, const char *name, int *first);
char *imp_printf(imp *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- statements (onnx_text.c) ---- */
/* Adds a statement of the current node: `out = expr` (out given a fresh
 * variable), with the values it reads; member may be NULL. Returns the
 * statement index or -1. */
int imp_stmt(imp *I, int out, const char *member, const char *expr, const int *uses, int nuses);
/* imp_stmt, then gives out its kind and shape; expr NULL (an allocation
 * that failed) is an error. Returns DPC_OK or the error. */
dpc_status imp_stmt_value(imp *I, int out, const char *member, const char *expr, int kind, int rank, const sdim *d,
                          const int *uses, int nuses);
/* Adds a weight to the last statement. */
dpc_status imp_weight(imp *I, const char *member, const char *suffix, dpc_tensor *t);

/* ---- attributes of a node (onnx_values.c) ---- */
const Onnx__AttributeProto *imp_attr(const Onnx__NodeProto *n, const char *name);
/* An attribute of another type than the accessor's is recorded in
 * I->bad_attr, and the node is refused (import_node). */
int64_t imp_attr_i(imp *I, const Onnx__NodeProto *n, const char *name, int64_t dflt);
double imp_attr_f(imp *I, const Onnx__NodeProto *n, const char *name, double dflt);
/* ints attribute: count, or -1 when absent */
int imp_attr_ints(imp *I, const Onnx__NodeProto *n, const char *name, const int64_t **vals);
const char *imp_attr_s(imp *I, const Onnx__NodeProto *n, const char *name, const char *dflt);

/* ---- the op table (onnx_ops.c; the functions: onnx_ops.h) ---- */
typedef dpc_status (*imp_op_fn)(imp *I, const Onnx__NodeProto *n);
typedef struct imp_op {
    const char *name;
    int min_opset, max_opset;
    /* Its inputs and outputs: "1" (one), "2-3" (two required, a third
     * optional), "1+" (one or more, every one required: variadic), "0";
     * where an opset changed them, "1, 11: 1-3" (from opset 11 on, 1-3).
     * Positions below the minimum are required (a "" name there is
     * refused), the others optional ("" or left out). */
    const char *ins, *outs;
    const char *attrs; /* the attributes it reads, space-separated; any other is an error */
    imp_op_fn fn;
    const char *note;
} imp_op;
extern const imp_op imp_ops[];
extern const int imp_nops;
/* The op of node k as the table has it at this opset, or NULL after a
 * located error (a domain, op type or opset dpc does not take). */
const imp_op *imp_claim_node(imp *I, int k);
/* Node n against its row op: the attributes it reads, no reference, its
 * input and output counts; DPC_OK or the located error. */
dpc_status imp_check_node(imp *I, const Onnx__NodeProto *n, const imp_op *op);

/* a value's shape (onnx_values.c) */
dpc_status imp_set_shape(imp *I, int v, int rank, const sdim *d);

/* member naming (onnx_ops_common.c): after the initializer w when it is a
 * state_dict name, else the node's scope or name; the member line with
 * its "# from INITIALIZER" comment */
const char *imp_member_name(imp *I, const Onnx__NodeProto *n, int w, const char *fallback);
char *imp_member_line(imp *I, const char *decl, int w);
/* The transpose of a constant 2-D float tensor (onnx_ops_common.c). */
dpc_tensor *imp_transposed(imp *I, const dpc_tensor *w);
/* ---- nn.MultiheadAttention's export (onnx_mha.c) ---- */
/* At node k, a Transpose(1, 0, 2) of a computed [N, L, E]: whether the
 * nodes after it are nn.MultiheadAttention's export; if so they are
 * claimed (I->claim) and each is handled by imp_mha_node when reached. */
bool imp_mha_match(imp *I, int k);
dpc_status imp_mha_node(imp *I, const Onnx__NodeProto *n);

/* ---- constants: the folding budget and their lifetime (onnx_fold.c) ----
 * Every tensor imp_tensor makes counts against one budget for the whole
 * import: IMP_FOLD_BASE elements, plus IMP_FOLD_PER for each element of
 * the model's own tensors (initializers, Constant nodes). What folding
 * makes (and the time it takes) stays in proportion to the file; nothing
 * is refunded when a constant is freed. */
#define IMP_FOLD_BASE (INT64_C(1) << 26)
#define IMP_FOLD_PER 4
/* Charges numel elements to the budget, or the located refusal. */
dpc_status imp_budget_charge(imp *I, int64_t numel);
/* Widens the budget for a tensor of the model holding numel elements. */
void imp_budget_grant(imp *I, int64_t numel);
/* The initializers as values: float ones converted now, integer ones
 * checked now and converted when a node first reads them. */
dpc_status imp_load_initializers(imp *I);
/* Converts the lazy initializers node n reads. */
dpc_status imp_load_inputs(imp *I, const Onnx__NodeProto *n);
/* v's constant c was just made by imp_tensor: v holds it (so the importer
 * may free it once nothing reads v). */
void imp_const_own(imp *I, int v);
/* to's constant is from's (Identity): both hold it. */
void imp_const_share(imp *I, int to, int from);
/* After node k was imported: its inputs have one reader fewer; a constant
 * no node reads any more, and no computing node (a statement, a weight, a
 * pattern) read, is freed. */
void imp_release(imp *I, int k);
/* v as an int64 when it is an integer in range (not NaN, not past
 * +-2^63): C's conversion is undefined outside. */
bool imp_i64_of(double v, int64_t *out);

#endif
