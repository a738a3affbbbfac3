/* onnx_ops_binary.c - the elementwise ops of two or more inputs:
 * arithmetic, comparisons and logic (Add, Sub, Mul, Div, Pow, Equal, Less,
 * And, ...), Where, and the n-input Sum/Mean/Max/Min. Constant operands
 * fold, exactly: int64 arithmetic is checked for overflow and carries the
 * run-time dims' symbols (a shape computation). The decomposed modules that
 * end in an Add or a Mul are recognised first (onnx_ops_fused.c). */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool cmp_op(const char *op) {
    return !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") || !strcmp(op, "LessOrEqual") ||
           !strcmp(op, "GreaterOrEqual") || !strcmp(op, "And") || !strcmp(op, "Or");
}

/* a ** b in int64 (a negative b truncates 1 / a ** -b toward 0, as C's
 * cast of pow did); false when it overflows or divides by 0 */
static bool ipow(int64_t a, int64_t b, int64_t *r) {
    if (b < 0) {
        if (a == 0)
            return false;
        *r = a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
        return true;
    }
    int64_t acc = 1, base = a;
    while (b) { /* a squaring that overflows with bits left means the result does */
        if ((b & 1) && __builtin_mul_overflow(acc, base, &acc))
            return false;
        b >>= 1;
        if (b && __builtin_mul_overflow(base, base, &base))
            return false;
    }
    *r = acc;
    return true;
}

/* Integer folding, exact: int64 as ONNX defines it, false where C's
 * arithmetic would be undefined (overflow) or a division is by 0. */
static bool fold2i(const char *op, int64_t a, int64_t b, int64_t *r) {
    switch (op[0]) {
    case 'A':
        if (op[1] == 'd')
            return !__builtin_add_overflow(a, b, r);
        *r = a != 0 && b != 0;
        return true;
    case 'S': return !__builtin_sub_overflow(a, b, r);
    case 'M':
        if (op[1] == 'u')
            return !__builtin_mul_overflow(a, b, r);
        *r = op[1] == 'a' ? (a > b ? a : b) : (a < b ? a : b);
        return true;
    case 'D':
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *r = a / b;
        return true;
    case 'P': return ipow(a, b, r);
    case 'E': *r = a == b; return true;
    case 'O': *r = a != 0 || b != 0; return true;
    case 'L': *r = op[4] == 'O' ? a <= b : a < b; return true;
    case 'G': *r = op[7] == 'O' ? a >= b : a > b; return true;
    }
    return false;
}

/* One element of an integer fold where a run-time dim's symbol is
 * involved (sa, sb: x = x*S): 0 done, 1 overflow, 2 not foldable. */
static int fold_sym_i(const char *op, int64_t x, int64_t y, int sa, int sb, int64_t *v, int *sv) {
    *sv = 0;
    if ((!strcmp(op, "Add") || !strcmp(op, "Sub")) && sa && sa == sb) { /* a*S +- b*S */
        if (op[0] == 'A' ? __builtin_add_overflow(x, y, v) : __builtin_sub_overflow(x, y, v))
            return 1;
        *sv = *v != 0 ? sa : 0;
    } else if (!strcmp(op, "Mul") && (!sa || !sb)) {
        if (__builtin_mul_overflow(x, y, v))
            return 1;
        *sv = sa ? sa : sb;
    } else if (!strcmp(op, "Div") && sa && !sb && y != 0 && !(x == INT64_MIN && y == -1) && x % y == 0)
        *v = x / y, *sv = sa;
    else if (!strcmp(op, "Equal") && sa && sa == sb)
        *v = x == y;
    else if (!strcmp(op, "Equal") && (sa || sb) && ((sa ? y : x) == -1 || (sa ? y : x) == 0))
        *v = 0; /* a run-time dim is never -1 or 0 (torch's reshape plumbing compares with -1) */
    else
        return 2;
    return 0;
}

/* One element of an integer fold into t[o] (and cs[o]); the located error
 * when it overflows or cannot be folded. */
static dpc_status fold_elem_i(imp *I, const char *op, int64_t x, int64_t y, int sa, int sb, dpc_tensor *t, int *cs,
                              int64_t o) {
    int64_t v = 0;
    int sv = 0, r = !sa && !sb ? (fold2i(op, x, y, &v) ? 0 : 1) : fold_sym_i(op, x, y, sa, sb, &v, &sv);
    if (r == 1)
        return imp_err(I, "folding %s of the integers %lld and %lld overflows int64 (or divides by 0)", op,
                       (long long)x, (long long)y);
    if (r == 2)
        return imp_err(I, "arithmetic on a run-time dim that dpc cannot fold (give it with --dim NAME=SIZE)");
    ((int64_t *)t->data)[o] = v;
    if (cs)
        cs[o] = sv;
    return DPC_OK;
}

static double fold2(const char *op, double a, double b) {
    switch (op[0]) {
    case 'A': return op[1] == 'd' ? a + b : (a != 0 && b != 0);
    case 'S': return a - b;
    case 'M': return op[1] == 'u' ? a * b : op[1] == 'a' ? (a > b ? a : b) : (a < b ? a : b);
    case 'D': return a / b;
    case 'P': return pow(a, b);
    case 'E': return a == b;
    case 'O': return a != 0 || b != 0;
    case 'L': return op[4] == 'O' ? a <= b : a < b;
    case 'G': return op[7] == 'O' ? a >= b : a > b;
    }
    return 0;
}

static dpc_status fold_binary(imp *I, const Onnx__NodeProto *n, int a, int b, int out) {
    ival *A = V(a), *B = V(b);
    int r;
    sdim d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, A, B, &r, d);
    if (s != DPC_OK)
        return s;
    int64_t shape[DPC_MAX_RANK];
    for (int i = 0; i < r; i++)
        shape[i] = d[i].v;
    bool cmp = cmp_op(n->op_type), isint = A->kind != VK_FLOAT && B->kind != VK_FLOAT;
    int kind = cmp ? VK_BOOL : isint ? VK_INT : VK_FLOAT;
    dpc_tensor *t = imp_tensor(I, kind == VK_FLOAT ? DPC_F32 : DPC_I64, r, shape);
    if (!t)
        return DPC_ENOMEM;
    int64_t total = dpc_tensor_numel(t);
    bool sym = A->csym || B->csym;
    int *cs = sym ? dpc_calloc((size_t)(total ? total : 1), sizeof *cs) : NULL;
    if (sym && !cs)
        return imp_oom(I);
    for (int64_t o = 0; o < total; o++) {
        int64_t ia = imp_bsrc(o, shape, r, A->c->shape, A->c->rank), ib = imp_bsrc(o, shape, r, B->c->shape, B->c->rank);
        int sa = A->csym ? A->csym[ia] : 0, sb = B->csym ? B->csym[ib] : 0;
        if (isint) { /* exact, in int64: through double it loses bits past 2^53 and converts out of range */
            if ((s = fold_elem_i(I, n->op_type, I64(A)[ia], I64(B)[ib], sa, sb, t, cs, o)) != DPC_OK) {
                dpc_free(cs);
                return s;
            }
            continue;
        }
        double x = A->c->dtype == DPC_F32 ? F32(A)[ia] : (double)I64(A)[ia];
        double y = B->c->dtype == DPC_F32 ? F32(B)[ib] : (double)I64(B)[ib];
        double v;
        int sv = 0;
        if (!sa && !sb)
            v = fold2(n->op_type, x, y);
        else if ((!strcmp(n->op_type, "Add") || !strcmp(n->op_type, "Sub")) && sa && sa == sb) {
            v = n->op_type[0] == 'A' ? x + y : x - y; /* a*S +- b*S */
            sv = v != 0 ? sa : 0;
        } else if (!strcmp(n->op_type, "Mul") && (!sa || !sb))
            v = x * y, sv = sa ? sa : sb;
        else if (!strcmp(n->op_type, "Div") && sa && !sb && y != 0 && fmod(x, y) == 0)
            v = x / y, sv = sa;
        else if (!strcmp(n->op_type, "Equal") && sa && sa == sb)
            v = x == y;
        else if (!strcmp(n->op_type, "Equal") && (sa || sb) && ((sa ? y : x) == -1 || (sa ? y : x) == 0))
            v = 0; /* a run-time dim is never -1 or 0 (torch's reshape plumbing compares with -1) */
        else {
            dpc_free(cs);
            return imp_err(I, "arithmetic on a run-time dim that dpc cannot fold (give it with --dim NAME=SIZE)");
        }
        if (kind == VK_FLOAT)
            ((float *)t->data)[o] = (float)v;
        else /* a comparison of floats: 0 or 1 */
            ((int64_t *)t->data)[o] = v != 0;
        if (cs)
            cs[o] = sv;
    }
    return imp_set_const(I, out, t, kind, cs);
}

static const char *binop_text(const char *op) {
    return !strcmp(op, "Add") ? "+" : !strcmp(op, "Sub") ? "-" : !strcmp(op, "Mul") ? "*" : !strcmp(op, "Div") ? "/"
         : !strcmp(op, "Pow") ? "**" : !strcmp(op, "Equal") ? "==" : !strcmp(op, "Less") ? "<"
         : !strcmp(op, "Greater") ? ">" : !strcmp(op, "LessOrEqual") ? "<=" : !strcmp(op, "GreaterOrEqual") ? ">="
         : !strcmp(op, "And") ? "&" : !strcmp(op, "Or") ? "|" : NULL;
}

dpc_status imp_op_binary(imp *I, const Onnx__NodeProto *n) {
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), out = imp_out(I, n, 0);
    /* ONNX types both operands T (Pow alone has T and T1): a float and an
     * integer tensor is an invalid model, not a promotion */
    if (strcmp(n->op_type, "Pow") != 0 && V(a)->kind != V(b)->kind)
        return imp_err(I, "operands of different element types (%s and %s)", V(a)->kind == VK_FLOAT ? "float" : V(a)->kind == VK_INT ? "integer" : "bool",
                       V(b)->kind == VK_FLOAT ? "float" : V(b)->kind == VK_INT ? "integer" : "bool");
    if (is_const(I, a) && is_const(I, b))
        return fold_binary(I, n, a, b, out);
    const char *op = n->op_type;
    dpc_status fs;
    if (imp_fuse_binary(I, n, a, b, out, &fs)) /* a decomposed module's last node (onnx_ops_fused.c) */
        return fs;
    int r;
    sdim d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, V(a), V(b), &r, d);
    if (s != DPC_OK)
        return s;
    const char *sym = binop_text(op);
    bool cmp = cmp_op(op);
    int kind = cmp ? VK_BOOL : (V(a)->kind == VK_FLOAT || V(b)->kind == VK_FLOAT) ? VK_FLOAT : VK_INT;
    if ((!strcmp(op, "And") || !strcmp(op, "Or")) && (V(a)->kind != VK_BOOL || V(b)->kind != VK_BOOL))
        return imp_err(I, "on non-bool tensors");
    int ua, ub;
    const char *ea = imp_ref(I, a, &ua), *eb = ea ? imp_ref(I, b, &ub) : NULL;
    if (!ea || !eb)
        return I->e->code;
    const char *ex;
    if (!strcmp(op, "Max") || !strcmp(op, "Min"))
        ex = imp_printf(I, "where(%s %s %s, %s, %s)", ea, op[1] == 'a' ? ">=" : "<=", eb, ea, eb);
    else
        ex = imp_printf(I, "%s %s %s", ea, sym, eb);
    if (!strcmp(op, "Div") && kind == VK_INT)
        return imp_err(I, "integer division of computed tensors is not supported");
    /* parenthesise: each operand is a name, a literal or a call */
    return imp_add_stmt(I, out, NULL, ex, kind, r, d, ua, ub, -1);
}

dpc_status imp_op_where(imp *I, const Onnx__NodeProto *n) {
    int c = imp_in(I, n, 0), a = imp_in(I, n, 1), b = imp_in(I, n, 2), out = imp_out(I, n, 0);
    int r1, r;
    sdim d1[DPC_MAX_RANK], d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, V(c), V(a), &r1, d1);
    if (s != DPC_OK)
        return s;
    ival T = {.shaped = true, .rank = r1};
    memcpy(T.d, d1, sizeof d1);
    if ((s = imp_broadcast(I, &T, V(b), &r, d)) != DPC_OK)
        return s;
    if (is_const(I, c) && is_const(I, a) && is_const(I, b)) {
        int64_t shape[DPC_MAX_RANK];
        for (int i = 0; i < r; i++)
            shape[i] = d[i].v;
        ival *A = V(a), *B = V(b), *C = V(c);
        if (A->c->dtype != B->c->dtype)
            return imp_err(I, "branches of different types");
        dpc_tensor *t = imp_tensor(I, A->c->dtype, r, shape);
        if (!t)
            return DPC_ENOMEM;
        int64_t total = dpc_tensor_numel(t);
        bool sym = A->csym || B->csym;
        int *cs = sym ? dpc_calloc((size_t)(total ? total : 1), sizeof *cs) : NULL;
        if (sym && !cs)
            return imp_oom(I);
        size_t es = dpc_dtype_size(t->dtype);
        for (int64_t o = 0; o < total; o++) {
            int64_t ic = imp_bsrc(o, shape, r, C->c->shape, C->c->rank);
            const ival *S = I64(C)[ic] ? A : B;
            if (C->csym && C->csym[ic]) {
                dpc_free(cs);
                return imp_err(I, "a condition on a run-time dim");
            }
            int64_t is = imp_bsrc(o, shape, r, S->c->shape, S->c->rank);
            memcpy((char *)t->data + (size_t)o * es, (char *)S->c->data + (size_t)is * es, es);
            if (cs)
                cs[o] = S->csym ? S->csym[is] : 0;
        }
        return imp_set_const(I, out, t, A->kind, cs);
    }
    int uc, ua, ub;
    const char *ec = imp_ref(I, c, &uc), *ea = ec ? imp_ref(I, a, &ua) : NULL, *eb = ea ? imp_ref(I, b, &ub) : NULL;
    if (!eb)
        return I->e->code;
    if (V(c)->kind != VK_BOOL)
        return imp_err(I, "a condition that is not bool");
    int kind = V(a)->kind == VK_FLOAT || V(b)->kind == VK_FLOAT ? VK_FLOAT : V(a)->kind;
    return imp_add_stmt(I, out, NULL, imp_printf(I, "where(%s, %s, %s)", ec, ea, eb), kind, r, d, uc, ua, ub);
}

/* The inputs of Sum, Mean, Max, Min: shaped, not bool, of one element
 * type (*kind); Mean's float. */
static dpc_status variadic_inputs(imp *I, const Onnx__NodeProto *n, int *kind) {
    *kind = VK_INT;
    for (size_t i = 0; i < n->n_input; i++) {
        const ival *v = V(imp_in(I, n, i)); /* every one given (the row's "1+") */
        if (!v->shaped)
            return imp_err(I, "an input of unknown shape");
        if (v->kind == VK_BOOL)
            return imp_err(I, "on a bool tensor");
        if (v->kind == VK_FLOAT)
            *kind = VK_FLOAT;
    }
    for (size_t i = 0; i < n->n_input; i++)
        if (V(imp_in(I, n, i))->kind != *kind)
            return imp_err(I, "inputs of different element types");
    if (!strcmp(n->op_type, "Mean") && *kind != VK_FLOAT)
        return imp_err(I, "on integer tensors");
    return DPC_OK;
}

/* Sum, Mean, Max, Min of any number of inputs, broadcasting
 * (multidirectionally): a chain of statements, each joining the partial
 * result so far with the next inputs (Sum and Mean 8 terms a statement,
 * Max and Min one pair, whose text names each operand three times), so
 * the text grows with the inputs, not faster. */
dpc_status imp_op_variadic(imp *I, const Onnx__NodeProto *n) {
    int kind, part = -1, r = 0;
    dpc_status s = variadic_inputs(I, n, &kind);
    if (s != DPC_OK)
        return s;
    const char *op = n->op_type;
    bool add = !strcmp(op, "Sum") || !strcmp(op, "Mean");
    size_t m = n->n_input, i = 0;
    sdim d[DPC_MAX_RANK];
    do {
        int uses[8], nu = 0;
        const char *acc = part >= 0 ? imp_ref(I, part, &uses[nu++]) : NULL;
        if (part >= 0 && !acc)
            return I->e->code;
        for (size_t take = (add ? 8 : 2) - (part >= 0); take > 0 && i < m; take--, i++) {
            int v = imp_in(I, n, i);
            const char *e = imp_ref(I, v, &uses[nu++]);
            if (!e)
                return I->e->code;
            if (!acc) { /* the first input */
                r = V(v)->rank;
                memcpy(d, V(v)->d, sizeof *d * (size_t)r);
                acc = e;
                continue;
            }
            ival sh = {.shaped = true, .rank = r};
            memcpy(sh.d, d, sizeof *d * (size_t)r);
            if ((s = imp_broadcast(I, &sh, V(v), &r, d)) != DPC_OK)
                return s;
            if (add)
                acc = imp_printf(I, "%s + %s", acc, e);
            else { /* np.maximum / np.minimum: a NaN on either side gives NaN */
                const char *t = imp_printf(I, "(%s)", acc);
                acc = t ? imp_printf(I, "where((%s %s %s) | (%s != %s), %s, %s)", t, op[1] == 'a' ? ">=" : "<=", e, t,
                                     t, t, e)
                        : NULL;
            }
            if (!acc)
                return I->e->code;
        }
        if (m == 1) /* one input: a copy (a statement, so the output is a computed value) */
            acc = imp_printf(I, "%s %s", acc, kind == VK_FLOAT ? "+ 0.0" : "+ 0");
        else if (i >= m && !strcmp(op, "Mean"))
            acc = imp_printf(I, "(%s) / %zu.0", acc, m);
        int dst = i >= m ? imp_out(I, n, 0) : imp_tmp_value(I, "ex");
        if (dst < 0)
            return I->e->code ? I->e->code : DPC_ENOMEM;
        if ((s = imp_stmt_value(I, dst, NULL, acc, kind, r, d, uses, nu)) != DPC_OK)
            return s;
        part = dst;
    } while (i < m);
    return DPC_OK;
}
