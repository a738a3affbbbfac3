/* fn_args.c - reading a forward function's bound arguments (fcall): a
 * tensor, a number, a dim or a list of dims, a dtype, `inplace`.
 *
 * It is its own file, below every family of functions (fn_*.c), because
 * all of them read their arguments this way and the table that lists them
 * (functions.c) sits above them. */
#include "functions.h"

#include <string.h>

bool dims_list(builder *b, const sv *v, loc at, const char *what, int64_t *out, int *n) {
    for (int i = 0; (v->k == SV_TUPLE || v->k == SV_LIST) && i < v->n; i++)
        if (v->items[i].k == SV_BATCH) {
            error_at(b->c, at, "%s cannot contain the batch size '%s'", what, b->batch);
            return false;
        }
    if (v->k == SV_NUM || v->k == SV_BATCH) {
        *n = 1;
        return want_int(b, v, at, what, out);
    }
    if (v->k != SV_TUPLE && v->k != SV_LIST) {
        error_at(b->c, at, "%s must be an int or a list of ints, got %s", what, sv_kind_name(v));
        return false;
    }
    if (v->n > IR_MAX_RANK) {
        error_at(b->c, at, "%s: too many dimensions", what);
        return false;
    }
    *n = v->n;
    for (int i = 0; i < v->n; i++)
        if (!want_int(b, &v->items[i], at, what, &out[i]))
            return false;
    return true;
}

bool tensor_arg(fcall *c, int i, ir_node **x) {
    if (c->s[i].k != SV_TENSOR) {
        if (!c->s[i].poison)
            error_at(c->b->c, c->sat[i], "%s() expects a tensor, got %s", c->fn, sv_kind_name(&c->s[i]));
        return false;
    }
    *x = c->s[i].t;
    return true;
}

ir_node *want_any_tensor(fcall *c, int i) {
    if (c->s[i].k != SV_TENSOR) {
        error_at(c->b->c, c->sat[i], "%s() expects a tensor, got %s", c->fn, sv_kind_name(&c->s[i]));
        return NULL;
    }
    return c->s[i].t;
}

bool num_arg(fcall *c, int i, const char *what, double *out) {
    if (!c->g[i])
        return true;
    if (!num_of(&c->s[i], out) || c->s[i].v.kind == V_BOOL) {
        error_at(c->b->c, c->sat[i], "%s(): %s must be a number, got %s", c->fn, what, sv_kind_name(&c->s[i]));
        return false;
    }
    return true;
}

bool inplace_arg(fcall *c, int i) {
    if (c->g[i] && (c->s[i].k != SV_NUM || c->s[i].v.kind != V_BOOL)) {
        error_at(c->b->c, c->sat[i], "%s(): inplace must be a bool", c->fn);
        return false;
    }
    return true;
}

/* A dtype argument: SV_DTYPE, or a tensor's dtype when `tensor_ok`. */
bool want_dtype(builder *b, const sv *v, loc at, const char *what, bool tensor_ok, ir_dtype *out) {
    if (v->k == SV_DTYPE) {
        *out = (ir_dtype)v->v.i;
        return true;
    }
    if (tensor_ok && v->k == SV_TENSOR) {
        *out = v->t->dt;
        return true;
    }
    error_at(b->c, at, "%s must be a dtype (float32, int64, bool), got %s", what, sv_kind_name(v));
    return false;
}
