/* ops.c - the op table (IR_OPS in ir.h) as data, and what reads it by op:
 * names, classes, the elementwise expressions of each dialect. */
#include "ir.h"

#include <string.h>

static const ir_opdef OPS[] = {
#define X(e, s, cls, ar, c, cu, fn) {s, cls, ar, {c, cu}, fn},
    IR_OPS(X)
#undef X
};
_Static_assert(sizeof OPS / sizeof OPS[0] == OP_COUNT, "one row of IR_OPS per IR op");

/* An elementwise row must say how each dialect computes it: a row without
 * an expression does not build, and the message names the op. (NOEXPR is
 * "", so sizeof is 1; concatenating "" also rejects anything but a string
 * literal.) */
#define EW(cls) ((cls) == OC_UNARY || (cls) == OC_BINARY || (cls) == OC_TERNARY)
#define X(e, s, cls, ar, c, cu, fn)                                                                    \
    _Static_assert(!EW(cls) || sizeof("" c) > 1, "op " s " has no C expression");                   \
    _Static_assert(!EW(cls) || sizeof("" cu) > 1, "op " s " has no CUDA expression");               \
    _Static_assert(EW(cls) || (sizeof("" c) == 1 && sizeof("" cu) == 1), "op " s " is not elementwise"); \
    _Static_assert(cls != OC_UNARY || ar == 1, "unary op " s " takes one operand");                  \
    _Static_assert(cls != OC_BINARY || ar == 2, "binary op " s " takes two operands");                \
    _Static_assert(cls != OC_TERNARY || ar == 3, "ternary op " s " takes three operands");
IR_OPS(X)
#undef X
#undef EW

const ir_opdef *ir_opdef_of(ir_op op) { return (unsigned)op < OP_COUNT ? &OPS[op] : NULL; }

const char *ir_op_name(ir_op op) { return (unsigned)op < OP_COUNT ? OPS[op].name : "?"; }

op_class ir_op_class(ir_op op) { return (unsigned)op < OP_COUNT ? OPS[op].cls : OC_COUNT; }

bool ir_op_is_elementwise(ir_op op) {
    op_class k = ir_op_class(op);
    return k == OC_UNARY || k == OC_BINARY || k == OC_TERNARY || k == OC_CHANNEL;
}

ir_op ir_op_of_function(const char *name) {
    for (int i = 0; i < OP_COUNT; i++)
        if (OPS[i].fn && strcmp(OPS[i].fn, name) == 0)
            return (ir_op)i;
    return OP_COUNT;
}

bool ir_op_expr(ir_op op, ir_dialect d, const char *x, const char *y, const char *z, dpc_buf *out) {
    const ir_opdef *def = ir_opdef_of(op);
    if (!def || (unsigned)d >= DIALECT_COUNT || !def->expr[d][0])
        return false;
    for (const char *p = def->expr[d]; *p; p++) {
        if (p[0] == '$' && (p[1] == 'x' || p[1] == 'y' || p[1] == 'z')) {
            dpc_buf_puts(out, p[1] == 'x' ? x : p[1] == 'y' ? y : z);
            p++;
        } else
            dpc_buf_put(out, p, 1);
    }
    return true;
}
