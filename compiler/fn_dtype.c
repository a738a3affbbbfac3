/* fn_dtype.c - dtypes, masks and comparisons in forward: dtype names as
 * values, PyTorch's promotion of operands, the operators on masks and the
 * comparisons of tensors (mask_binop), finfo, and the functions that
 * convert or select: to, float/long/bool, type_as, logical_and/or/not,
 * where, masked_fill.
 *
 * bool and i64 values computed in forward are carried in float: a bool is
 * 0 or 1, an i64 an exact integer below 2^24 (checked where it is made). */
#include "functions.h"

#include <float.h>
#include <string.h>

static const struct {
    const char *name;
    ir_dtype dt;
} DTYPE_NAMES[] = {{"float32", IR_F32}, {"float", IR_F32}, {"int64", IR_I64}, {"long", IR_I64}, {"bool", IR_BOOL}};

bool dtype_named(const char *name, sv *out) {
    for (size_t i = 0; i < sizeof DTYPE_NAMES / sizeof *DTYPE_NAMES; i++)
        if (strcmp(DTYPE_NAMES[i].name, name) == 0) {
            memset(out, 0, sizeof *out);
            out->k = SV_DTYPE;
            out->v.kind = V_INT;
            out->v.i = DTYPE_NAMES[i].dt;
            return true;
        }
    return false;
}

const char *dt_word(ir_dtype t) { return t == IR_BOOL ? "bool" : t == IR_I64 ? "int64" : "float32"; }

/* The dtype of an operand: a tensor's, or a Python number's own kind. */
ir_dtype sv_dtype(const sv *v) {
    if (v->k == SV_TENSOR)
        return v->t->dt;
    if (v->k == SV_NUM && v->v.kind == V_FLOAT)
        return IR_F32;
    if (v->k == SV_NUM && v->v.kind == V_BOOL)
        return IR_BOOL;
    return IR_I64; /* ints, the batch size */
}

/* PyTorch's promotion of two operands: a Python number only lifts the kind
 * (bool < int64 < float), never a tensor's width. */
static ir_dtype promote(const sv *l, const sv *r) {
    ir_dtype a = sv_dtype(l), b = sv_dtype(r);
    if (a == IR_F32 || b == IR_F32)
        return IR_F32;
    if (a == IR_I64 || b == IR_I64)
        return IR_I64;
    return IR_BOOL;
}

ir_dtype arith_dtype(const sv *l, const sv *r, ir_op op) {
    ir_dtype t = promote(l, r);
    return op == OP_DIV ? IR_F32 : t;
}

/* An elementwise node of op over x, y, z (NULL: absent), broadcast, of dtype dt. */
ir_node *ew3(builder *b, ir_op op, ir_node *x, ir_node *y, ir_node *z, ir_dtype dt, loc at, const char *what) {
    shape s = x->sh, t;
    if (y) {
        if (!broadcast(b, &s, &y->sh, at, what, &t))
            return NULL;
        s = t;
    }
    if (z) {
        if (!broadcast(b, &s, &z->sh, at, what, &t))
            return NULL;
        s = t;
    }
    ir_node *n = mk_op(b, op, at, NULL, x, y, z);
    if (!n)
        return NULL;
    n->sh = s;
    n->dt = dt;
    return check_size(b, n, at, what) ? n : NULL;
}

/* A value as a tensor of dtype `like` when it is a number (where's
 * scalars), else the tensor itself. */
static ir_node *operand_of(builder *b, const sv *v, ir_dtype dt, loc at, const char *what) {
    double d;
    if (v->k == SV_TENSOR)
        return v->t;
    if (v->k == SV_BATCH || num_of(v, &d)) {
        ir_node *n = as_tensor(b, v, at, what);
        if (n && n->op == OP_CONST)
            n->dt = dt;
        return n;
    }
    error_at(b->c, at, "%s expects a tensor or a number, got %s", what, sv_kind_name(v));
    return NULL;
}

static ir_node *to_bool_node(builder *b, ir_node *x, loc at, const char *what) {
    return x->dt == IR_BOOL ? x : ew3(b, OP_TO_BOOL, x, NULL, NULL, IR_BOOL, at, what);
}

bool mask_binop(builder *b, int op, const sv *l, const sv *r, loc at, loc lat, loc rat, sv *out) {
    static const struct {
        int op;
        ir_op ir;
        const char *text;
    } CMP[] = {{OP_EQ, OP_CMP_EQ, "'=='"}, {OP_NE, OP_CMP_NE, "'!='"}, {OP_LT, OP_CMP_LT, "'<'"},
               {OP_LE, OP_CMP_LE, "'<='"}, {OP_GT, OP_CMP_GT, "'>'"},  {OP_GE, OP_CMP_GE, "'>='"},
               {OP_BITAND, OP_LOGICAL_AND, "'&'"}, {OP_BITOR, OP_LOGICAL_OR, "'|'"},
               {OP_INVERT, OP_LOGICAL_NOT, "'~'"}};
    int row = -1;
    for (int i = 0; i < (int)(sizeof CMP / sizeof *CMP); i++)
        if (CMP[i].op == op)
            row = i;
    if (row < 0 || (l->k != SV_TENSOR && r->k != SV_TENSOR))
        return false;
    memset(out, 0, sizeof *out);
    out->k = SV_NONE;
    const char *what = CMP[row].text;
    bool logic = op == OP_BITAND || op == OP_BITOR || op == OP_INVERT;
    if (logic) {
        const sv *bad = sv_dtype(l) != IR_BOOL ? l : sv_dtype(r) != IR_BOOL ? r : NULL;
        if (bad) {
            error_at(b->c, bad == l ? lat : rat, "%s applies to bool tensors (masks), got %s%s%s", what,
                     bad->k == SV_TENSOR ? "a " : sv_kind_name(bad), bad->k == SV_TENSOR ? dt_word(bad->t->dt) : "",
                     bad->k == SV_TENSOR ? " tensor; compare it first (x > 0) or use .bool()" : "");
            return true;
        }
    }
    ir_node *x = operand_of(b, l, sv_dtype(l), lat, what), *y = op == OP_INVERT ? NULL : operand_of(b, r, sv_dtype(r), rat, what);
    if (!x || (op != OP_INVERT && !y))
        return true;
    ir_node *n = ew3(b, CMP[row].ir, x, y, NULL, IR_BOOL, at, what);
    if (n) {
        out->k = SV_TENSOR;
        out->t = n;
    }
    return true;
}

bool finfo_value(builder *b, const sv *dt, const char *field, loc at, sv *out) {
    if (!dt || dt->k != SV_DTYPE || dt->v.i != IR_F32) {
        error_at(b->c, at, "finfo() takes float32 (the one float dtype dpc computes in)");
        return false;
    }
    static const struct {
        const char *name;
        double v;
    } F[] = {{"min", -3.4028234663852886e+38}, {"max", 3.4028234663852886e+38},
             {"eps", 1.1920928955078125e-07},  {"tiny", 1.1754943508222875e-38}};
    for (size_t i = 0; i < sizeof F / sizeof *F; i++)
        if (strcmp(F[i].name, field) == 0) {
            memset(out, 0, sizeof *out);
            out->k = SV_NUM;
            out->v = (val){.kind = V_FLOAT, .f = F[i].v};
            return true;
        }
    error_at(b->c, at, "finfo has min, max, eps and tiny, not '%s'", field);
    return false;
}

/* x converted to dtype t (no node when it already has it). */
ir_node *convert(builder *b, ir_node *x, ir_dtype t, loc at, const char *what) {
    if (x->dt == t)
        return x;
    ir_op op = t == IR_BOOL ? OP_TO_BOOL : t == IR_I64 ? OP_TO_LONG : OP_TO_FLOAT;
    if (t == IR_I64 && x->dt == IR_BOOL)
        op = OP_TO_FLOAT; /* 0 and 1 are already integers */
    return ew3(b, op, x, NULL, NULL, t, at, what);
}

ir_node *fn_to(fcall *c) {
    ir_node *x = want_any_tensor(c, 0);
    ir_dtype t;
    if (!x)
        return NULL;
    if (!c->g[1]) {
        error_at(c->b->c, c->at, "to() needs a dtype (to(float32)) or a tensor");
        return NULL;
    }
    if (!want_dtype(c->b, &c->s[1], c->sat[1], "to()'s dtype", true, &t))
        return NULL;
    return convert(c->b, x, t, c->at, "to()");
}

ir_node *fn_cast(fcall *c) { /* float(x), long(x), bool(x) on a tensor */
    ir_node *x = want_any_tensor(c, 0);
    if (!x)
        return NULL;
    ir_dtype t = c->fn[0] == 'f' ? IR_F32 : c->fn[0] == 'l' ? IR_I64 : IR_BOOL;
    return convert(c->b, x, t, c->at, c->fn);
}

ir_node *fn_type_as(fcall *c) {
    ir_node *x = want_any_tensor(c, 0), *y = x ? want_any_tensor(c, 1) : NULL;
    return y ? convert(c->b, x, y->dt, c->at, "type_as()") : NULL;
}

ir_node *fn_logical(fcall *c) {
    ir_node *x = want_any_tensor(c, 0);
    if (!x || !(x = to_bool_node(c->b, x, c->at, c->fn)))
        return NULL;
    if (c->fn[8] == 'n') /* logical_not */
        return ew3(c->b, OP_LOGICAL_NOT, x, NULL, NULL, IR_BOOL, c->at, c->fn);
    ir_node *y = want_any_tensor(c, 1);
    if (!y || !(y = to_bool_node(c->b, y, c->at, c->fn)))
        return NULL;
    return ew3(c->b, c->fn[8] == 'a' ? OP_LOGICAL_AND : OP_LOGICAL_OR, x, y, NULL, IR_BOOL, c->at, c->fn);
}

static bool want_mask(fcall *c, int i, ir_node **out) {
    ir_node *m = want_any_tensor(c, i);
    if (!m)
        return false;
    if (m->dt != IR_BOOL) {
        error_at(c->b->c, c->sat[i], "%s() expects a bool mask, got a %s tensor (compare it, or use .bool())", c->fn,
                 dt_word(m->dt));
        return false;
    }
    *out = m;
    return true;
}

ir_node *fn_where(fcall *c) {
    ir_node *cond;
    if (!want_mask(c, 0, &cond))
        return NULL;
    ir_dtype t = promote(&c->s[1], &c->s[2]);
    ir_node *x = operand_of(c->b, &c->s[1], t, c->sat[1], "where()");
    ir_node *y = x ? operand_of(c->b, &c->s[2], t, c->sat[2], "where()") : NULL;
    if (!y || !(x = convert(c->b, x, t, c->at, "where()")) || !(y = convert(c->b, y, t, c->at, "where()")))
        return NULL;
    return ew3(c->b, OP_WHERE, cond, x, y, t, c->at, "where()");
}

ir_node *fn_masked_fill(fcall *c) {
    ir_node *x = want_any_tensor(c, 0), *m;
    if (!x || !want_mask(c, 1, &m))
        return NULL;
    const sv *v = &c->s[2];
    if (v->k == SV_TENSOR && v->t->sh.rank != 0) {
        error_at(c->b->c, c->sat[2], "masked_fill only supports a 0-dimensional value tensor, but got tensor with %d dimension(s)",
                 v->t->sh.rank);
        return NULL;
    }
    ir_node *val = operand_of(c->b, v, x->dt, c->sat[2], "masked_fill()");
    if (!val || !(val = convert(c->b, val, x->dt, c->at, "masked_fill()")))
        return NULL;
    ir_node *n = ew3(c->b, OP_WHERE, m, val, x, x->dt, c->at, "masked_fill()");
    if (n && !shape_eq(&n->sh, &x->sh)) {
        error_at(c->b->c, c->at, "masked_fill(): the mask %s does not broadcast to the input %s", shp(c->b, &m->sh),
                 shp(c->b, &x->sh));
        return NULL;
    }
    return n;
}
