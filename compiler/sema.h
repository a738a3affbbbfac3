/* sema.h - what the files of semantic analysis share: the interpreter's
 * state and scope, and the functions one file calls in another.
 *
 *   sema.c         the module tree: instantiation, member bodies, the
 *                  entry sema_instantiate
 *   sema_expr.c    the interpreter of constructor expressions, sema_eval
 *   sema_values.c  values and their operators, Python's scalar builtins
 *
 * Calls go down that list; building a module from a call (sema.c) is
 * reached from the interpreter only through sema.construct. */
#ifndef DPC_SEMA_H
#define DPC_SEMA_H

#include "compiler.h"

#define MAX_INST_DEPTH 64

/* The names in scope: constructor parameters, body constants, loop
 * variables (the last of a name wins). */
typedef struct env {
    const char **names;
    val *vals;
    int n;
} env;

typedef struct sema sema;
struct sema {
    dpc_ctx *c;
    model *m;
    int ninst;
    const module_def *stack[MAX_INST_DEPTH];
    int depth;
    int nest;         /* eval levels in progress, through constructions too */
    bool nest_error;  /* DPC_MAX_EVAL_NEST was reported */
    bool consts_only; /* sema_eval: a constant expression, nothing is built */
    /* a call that builds a module (sema.c): set by sema_instantiate; never
     * reached when consts_only, where calls are refused */
    bool (*construct)(sema *s, const env *e, const node *n, val *out);
};

/* sema_expr.c */
bool eval(sema *s, const env *e, const node *n, val *out);
DPC_NOINLINE bool eval_args(sema *s, const env *e, const node *call, bound_arg **out, int *n);
const module_def *find_module(const program *p, const char *name);
const val *lookup_env(const env *e, const char *name);

/* sema_values.c */
/* A constructor parameter's value (an int given for a float already widened). */
bool param_accepts(const param *p, const val *v);
/* Python's builtins on constructor values: max, min, abs, int, float, round, len. */
bool is_scalar_fn(const char *name);
bool sema_scalar_fn(sema *s, const char *fn, val *a, int k, loc at, val *out);

#endif
