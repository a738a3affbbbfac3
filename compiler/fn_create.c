/* fn_create.c - the functions that create tensors in forward: constants
 * and ranges as graph leaves (full_node, iota_node), ones, zeros, full,
 * ones_like, zeros_like, full_like, arange, and tril/triu, which are built
 * from them. */
#include "functions.h"

#include <math.h>
#include <string.h>

#define IOTA_EXACT 16777216.0 /* 2^24: integers a float carries exactly */

/* A rank-0 or shaped constant of dtype dt. */
ir_node *full_node(builder *b, const shape *s, double v, ir_dtype dt, loc at) {
    ir_node *n = mk(b, OP_CONST, at, NULL);
    if (!n)
        return NULL;
    n->attr.leaf.value = v;
    n->sh = *s;
    n->dt = dt;
    return n;
}

static ir_node *iota_node(builder *b, const shape *s, int axis, double start, double step, ir_dtype dt, loc at) {
    ir_node *n = mk(b, OP_IOTA, at, NULL);
    if (!n)
        return NULL;
    n->attr.leaf.value = start;
    n->attr.leaf.step = step;
    n->attr.leaf.axis = axis;
    n->sh = *s;
    n->dt = dt;
    return n;
}

/* The sizes of a creation function: ints (dims bound from inputs are ints),
 * the batch size, or one tuple or list of them. */
static bool create_shape(fcall *c, const sv *items, int n, shape *out) {
    if (n == 1 && (items[0].k == SV_TUPLE || items[0].k == SV_LIST)) {
        n = items[0].n;
        items = items[0].items;
    }
    if (n > IR_MAX_RANK) {
        error_at(c->b->c, c->at, "%s(): too many dimensions", c->fn);
        return false;
    }
    out->rank = n;
    for (int i = 0; i < n; i++) {
        if (items[i].k == SV_BATCH) {
            out->d[i] = (dim){1, true};
            continue;
        }
        if (items[i].k == SV_TENSOR) {
            error_at(c->b->c, c->at, "%s(): sizes must be known when compiling (ints, or dims named in forward's "
                                     "parameters), not a tensor", c->fn);
            return false;
        }
        int64_t d;
        if (!want_int(c->b, &items[i], c->at, "a size", &d))
            return false;
        if (d < 0) {
            error_at(c->b->c, c->at, "%s(): negative dimension %lld", c->fn, (long long)d);
            return false;
        }
        out->d[i] = (dim){d, false};
    }
    if (!numel_ok(out)) {
        error_at(c->b->c, c->at, "%s(): the shape %s is too large: more than 2^40 elements", c->fn, shp(c->b, out));
        return false;
    }
    return true;
}

/* The keyword arguments of a variadic creation function: dtype (and for
 * the others, none); sizes are the positional ones. */
static bool create_kwargs(fcall *c, int *npos, ir_dtype *dt, bool *has_dt) {
    const fargs *a = c->a;
    *npos = 0;
    *has_dt = false;
    for (int i = 0; i < a->n; i++) {
        if (!a->names[i]) {
            if (*npos != i) {
                error_at(c->b->c, a->at[i], "%s(): positional argument after a keyword", c->fn);
                return false;
            }
            (*npos)++;
        } else if (strcmp(a->names[i], "dtype") == 0) {
            if (a->v[i].k != SV_NONE && !want_dtype(c->b, &a->v[i], a->at[i], "dtype", false, dt))
                return false;
            *has_dt = a->v[i].k != SV_NONE;
        } else if (strcmp(a->names[i], "size") != 0 && strcmp(a->names[i], "device") != 0 &&
                   strcmp(a->names[i], "requires_grad") != 0) {
            error_at(c->b->c, a->kw_at[i], "%s() has no argument '%s'", c->fn, a->names[i]);
            return false;
        }
    }
    return true;
}

ir_node *fn_ones_zeros(fcall *c) { /* ones(*size, dtype=None), zeros(...) */
    int npos;
    ir_dtype dt = IR_F32;
    bool has;
    shape s;
    if (!create_kwargs(c, &npos, &dt, &has))
        return NULL;
    const sv *items = c->a->v;
    for (int i = 0; i < c->a->n; i++)
        if (c->a->names[i] && strcmp(c->a->names[i], "size") == 0) {
            items = &c->a->v[i];
            npos = 1;
        }
    if (!create_shape(c, items, npos, &s))
        return NULL;
    return full_node(c->b, &s, c->fn[0] == 'o' ? 1 : 0, dt, c->at);
}

static bool fill_number(fcall *c, const sv *v, loc at, double *out) {
    if (!num_of(v, out)) {
        error_at(c->b->c, at, "%s(): fill_value must be a number known when compiling, got %s", c->fn, sv_kind_name(v));
        return false;
    }
    return true;
}

ir_node *fn_full(fcall *c) { /* full(size, fill_value, dtype=None) */
    shape s;
    double v;
    ir_dtype dt = sv_dtype(&c->s[1]);
    if (!create_shape(c, &c->s[0], 1, &s) || !fill_number(c, &c->s[1], c->sat[1], &v) ||
        (c->g[2] && c->s[2].k != SV_NONE && !want_dtype(c->b, &c->s[2], c->sat[2], "dtype", false, &dt)))
        return NULL;
    return full_node(c->b, &s, dt == IR_BOOL ? v != 0 : dt == IR_I64 ? trunc(v) : v, dt, c->at);
}

ir_node *fn_like(fcall *c) { /* ones_like(input, dtype=None), zeros_like, full_like(input, fill_value, dtype) */
    ir_node *x = want_any_tensor(c, 0);
    if (!x)
        return NULL;
    bool full = c->fn[0] == 'f';
    int di = full ? 2 : 1;
    double v = c->fn[0] == 'o' ? 1 : 0;
    ir_dtype dt = x->dt;
    if ((full && !fill_number(c, &c->s[1], c->sat[1], &v)) ||
        (c->g[di] && c->s[di].k != SV_NONE && !want_dtype(c->b, &c->s[di], c->sat[di], "dtype", false, &dt)))
        return NULL;
    return full_node(c->b, &x->sh, dt == IR_BOOL ? v != 0 : dt == IR_I64 ? trunc(v) : v, dt, c->at);
}

ir_node *fn_arange(fcall *c) { /* arange(end), arange(start, end, step=1), dtype= */
    const fargs *a = c->a;
    int npos;
    ir_dtype dt = IR_I64;
    bool has_dt;
    if (!create_kwargs(c, &npos, &dt, &has_dt))
        return NULL;
    if (npos < 1 || npos > 3) {
        error_at(c->b->c, c->at, "arange() takes end, or start, end and step (%d given)", npos);
        return NULL;
    }
    sv v[3] = {{.k = SV_NUM, .v = {.kind = V_INT, .i = 0}}, {0}, {.k = SV_NUM, .v = {.kind = V_INT, .i = 1}}};
    loc at[3] = {c->at, c->at, c->at};
    if (npos == 1) {
        v[1] = a->v[0];
        at[1] = a->at[0];
    } else
        for (int i = 0; i < npos; i++) {
            v[i] = a->v[i];
            at[i] = a->at[i];
        }
    if (v[0].k == SV_NUM && v[0].v.i == 0 && v[1].k == SV_BATCH && v[2].k == SV_NUM && v[2].v.kind == V_INT &&
        v[2].v.i == 1) { /* arange(N): the batch's indices */
        shape s = {1, {{1, true}}};
        return iota_node(c->b, &s, 0, 0, 1, has_dt ? dt : IR_I64, c->at);
    }
    double d[3];
    bool all_int = true;
    static const char *const names[] = {"start", "end", "step"};
    for (int i = 0; i < 3; i++) {
        if (!num_of(&v[i], &d[i]) || v[i].v.kind == V_STR) {
            error_at(c->b->c, at[i], "arange(): %s must be a number known when compiling, got %s", names[i],
                     v[i].k == SV_BATCH ? "the batch size (only arange(N) takes it)" : sv_kind_name(&v[i]));
            return NULL;
        }
        all_int &= v[i].v.kind != V_FLOAT;
    }
    if (!has_dt)
        dt = all_int ? IR_I64 : IR_F32;
    if (d[2] == 0) {
        error_at(c->b->c, at[2], "arange(): step must be nonzero");
        return NULL;
    }
    if ((d[2] > 0 && d[1] < d[0]) || (d[2] < 0 && d[1] > d[0])) {
        error_at(c->b->c, c->at, "arange(): upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    if (dt == IR_BOOL) {
        error_at(c->b->c, c->at, "arange() does not make bool tensors");
        return NULL;
    }
    if (dt == IR_I64 && (d[0] != trunc(d[0]) || d[2] != trunc(d[2]))) {
        error_at(c->b->c, at[d[0] != trunc(d[0]) ? 0 : 2],
                 "arange(): %s %g is not an integer, but the dtype is int64 (write dtype=float32, or integer bounds)",
                 d[0] != trunc(d[0]) ? "start" : "step", d[0] != trunc(d[0]) ? d[0] : d[2]);
        return NULL;
    }
    double len = ceil((d[1] - d[0]) / d[2]);
    if (len > (double)DPC_MAX_NUMEL) {
        error_at(c->b->c, c->at, "arange(): %g elements are too many", len);
        return NULL;
    }
    double last = d[0] + d[2] * (len - 1);
    if (dt == IR_I64 && len > 0 && (fabs(d[0]) > IOTA_EXACT || fabs(last) > IOTA_EXACT)) {
        error_at(c->b->c, c->at, "arange(): int64 values up to %.0f do not fit: dpc carries integers computed in "
                                 "forward in float32, exact below 2^24", fmax(fabs(d[0]), fabs(last)));
        return NULL;
    }
    shape s = {1, {{(int64_t)len, false}}};
    return iota_node(c->b, &s, 0, d[0], d[2], dt, c->at);
}

/* tril/triu of the last two dims: keep where col - row <= k (tril) or >= k. */
ir_node *tri(builder *b, ir_node *x, int64_t k, bool lower, loc at, const char *what) {
    if (x->sh.rank < 2) {
        error_at(b->c, at, "%s: input tensor must have at least 2 dimensions, got %s", what, shp(b, &x->sh));
        return NULL;
    }
    dim R = x->sh.d[x->sh.rank - 2], C = x->sh.d[x->sh.rank - 1];
    shape rs = {2, {R, {1, false}}}, cs = {2, {{1, false}, C}}, ks = {0};
    ir_node *rows = iota_node(b, &rs, 0, 0, 1, IR_I64, at), *cols = iota_node(b, &cs, 1, 0, 1, IR_I64, at);
    ir_node *kk = full_node(b, &ks, (double)k, IR_I64, at), *zero = full_node(b, &ks, 0, x->dt, at);
    if (!rows || !cols || !kk || !zero)
        return NULL;
    ir_node *diff = ew3(b, OP_SUB, cols, rows, NULL, IR_I64, at, what);
    ir_node *keep = diff ? ew3(b, lower ? OP_CMP_LE : OP_CMP_GE, diff, kk, NULL, IR_BOOL, at, what) : NULL;
    return keep ? ew3(b, OP_WHERE, keep, x, zero, x->dt, at, what) : NULL;
}

ir_node *fn_tri(fcall *c) { /* tril(input, diagonal=0), triu */
    ir_node *x = want_any_tensor(c, 0);
    int64_t k = 0;
    if (!x || (c->g[1] && !want_int(c->b, &c->s[1], c->sat[1], "diagonal", &k)))
        return NULL;
    return tri(c->b, x, k, c->fn[3] == 'l', c->at, c->fn);
}
