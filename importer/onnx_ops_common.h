/* onnx_ops_common.h - what the op families (onnx_ops_*.c) share: the value
 * accessors below and the helpers of onnx_ops_common.c. Private to the
 * family files; the importer's internals are in onnx_imp.h. */
#ifndef DPC_ONNX_OPS_COMMON_H
#define DPC_ONNX_OPS_COMMON_H

#include "onnx_imp.h"
#include "onnx_ops.h"

#include <math.h>

#define V(i) imp_val(I, (i)) /* never outside the values (onnx_imp.h) */

static inline bool is_const(imp *I, int v) { return v >= 0 && V(v)->c; }

/* Whether a value's dim 0 is the batch N (a tensor made in forward, an
 * arange(S) say, has none). */
static inline bool batched(const ival *x) { return x->rank > 0 && x->d[0].s == 1 && x->d[0].v == 1; }

static inline int64_t *I64(const ival *x) { return (int64_t *)x->c->data; }
static inline float *F32(const ival *x) { return (float *)x->c->data; }

/* a float equal to b but for rounding (the constants of a pattern) */
static inline bool imp_near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b) + 1e-12; }

/* The error already set, or out of memory. */
static inline dpc_status imp_fail(imp *I) { return I->e->code ? I->e->code : DPC_ENOMEM; }

/* ---- constants and aliases ---- */
/* Makes v the constant t (kind, with per-element symbols csym, owned). */
dpc_status imp_set_const(imp *I, int v, dpc_tensor *t, int kind, int *csym);
/* The int constant v as a list of sdims (a shape operand), at most max. */
dpc_status imp_const_dims(imp *I, int v, sdim *d, int *n, int max, const char *what);
/* The same without run-time dims (refused). */
dpc_status imp_const_ints(imp *I, int v, int64_t *d, int *n, int max, const char *what);
/* An axis a of a rank into [0, rank), or the error. */
dpc_status imp_axis_norm(imp *I, int64_t a, int rank, int *out);
/* Alias: out is in (Identity, Dropout, a Cast to the same kind). */
dpc_status imp_alias(imp *I, int out, int in);
dpc_tensor *imp_copy_tensor(imp *I, const dpc_tensor *src, int rank, const int64_t *shape);
int *imp_copy_sym(imp *I, const ival *x);

/* ---- indexing constant tensors ---- */
/* a * b for dims (>= 0), saturated at INT64_MAX. */
int64_t imp_sat_mul(int64_t a, int64_t b);
void imp_strides(const int64_t *shape, int r, int64_t *st);
/* The source index in a tensor of ishape broadcast to oshape of output
 * index o. */
int64_t imp_bsrc(int64_t o, const int64_t *oshape, int orank, const int64_t *ishape, int irank);
/* The broadcast shape of a and b, or the error. */
dpc_status imp_broadcast(imp *I, const ival *a, const ival *b, int *rank, sdim *d);

/* ---- statements ---- */
/* Adds a statement out = expr reading the given values (-1 entries skipped). */
dpc_status imp_add_stmt(imp *I, int out, const char *member, const char *expr, int kind, int rank, const sdim *d,
                        int u0, int u1, int u2);
/* A fresh value for an intermediate statement of this node ("\x01" tag nv). */
int imp_tmp_value(imp *I, const char *tag);
/* The float tensor input 0 as an expression (NULL after the error). */
const char *imp_float_in(imp *I, const Onnx__NodeProto *n, int *x, int *u);
/* The refusal "what=S is not supported", S escaped. */
dpc_status imp_bad_string(imp *I, const char *what, const char *s);

#endif
