/* onnx_ops_linear.c - the matrix products: Gemm and MatMul with a constant
 * 2-D right operand become a Linear member (its weight transposed to
 * [out, in]; a MatMul whose only reader adds a bias is deferred to that
 * Add), other MatMuls a `@`. imp_linear_stmt writes the Linear, also for
 * the MatMul + Add pattern (onnx_ops_fused.c). */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Linear's statement: y = lin(x) with W [out, in] (already transposed) and bias b or -1 */
dpc_status imp_linear_stmt(imp *I, const Onnx__NodeProto *n, int out, int x, dpc_tensor *W, int wv, int b) {
    if (V(x)->merged >= 0) {
        /* Linear(reshape(x, -1, K)) = reshape(Linear(x), -1, M): computed on x, the result merged again */
        char nm[32];
        snprintf(nm, sizeof nm, "\x01merged%d", I->nv);
        const char *vn = imp_printf(I, "%s", nm);
        int y = vn ? imp_new_value(I, vn) : -1;
        if (y < 0)
            return I->e->code ? I->e->code : DPC_ENOMEM;
        dpc_status s = imp_linear_stmt(I, n, y, V(x)->merged, W, wv, b);
        if (s != DPC_OK)
            return s;
        V(out)->merged = y;
        V(out)->kind = VK_FLOAT;
        sdim m[2] = {{1, 0}, {W->shape[0], 0}};
        return imp_set_shape(I, out, 2, m);
    }
    ival *X = V(x);
    int64_t in = W->shape[1], o = W->shape[0];
    if (!X->shaped || X->rank < 2 || X->d[X->rank - 1].s || X->d[X->rank - 1].v != in)
        return imp_err(I, "the input's last dim is not %lld", (long long)in);
    const char *mem = imp_member_name(I, n, wv, "linear");
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!mem || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    char *decl = imp_member_line(I, imp_printf(I, "%s = Linear(%lld, %lld%s)", mem, (long long)in, (long long)o,
                                           b < 0 ? ", bias=False" : ""), wv);
    sdim d[DPC_MAX_RANK];
    memcpy(d, X->d, sizeof d);
    d[X->rank - 1] = (sdim){o, 0};
    dpc_status s = imp_add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, X->rank, d, u, -1, -1);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "weight", W);
    if (s == DPC_OK && b >= 0)
        s = imp_weight(I, mem, "bias", V(b)->c);
    return s;
}

dpc_status imp_op_gemm(imp *I, const Onnx__NodeProto *n) {
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), c, out = imp_out(I, n, 0);
    if (!imp_opt(I, n, 2, &c))
        c = -1; /* no C: a Linear without bias */
    if (imp_attr_f(I, n, "alpha", 1) != 1 || imp_attr_f(I, n, "beta", 1) != 1)
        return imp_err(I, "alpha or beta other than 1 is not supported");
    if (imp_attr_i(I, n, "transA", 0))
        return imp_err(I, "transA=1 is not supported");
    if (!is_const(I, b) || V(b)->c->rank != 2 || V(b)->kind != VK_FLOAT || (c >= 0 && !is_const(I, c)))
        return imp_err(I, "B (and C) must be float initializers");
    if (V(a)->rank != 2 || V(a)->c)
        return imp_err(I, "A must be a computed 2-D tensor");
    if (V(a)->merged >= 0 && V(a)->d[1].v != (imp_attr_i(I, n, "transB", 0) ? V(b)->c->shape[1] : V(b)->c->shape[0]))
        return imp_err(I, "inner dims differ");
    dpc_tensor *W = imp_attr_i(I, n, "transB", 0) ? V(b)->c : imp_transposed(I, V(b)->c);
    if (!W)
        return DPC_ENOMEM;
    int bias = -1;
    if (c >= 0) {
        const dpc_tensor *C = V(c)->c;
        int64_t k = dpc_tensor_numel(C);
        if (k != W->shape[0] || (C->rank == 2 && C->shape[0] != 1) || C->rank > 2)
            return imp_err(I, "C must be a vector of the output size");
        if (C->rank != 1) {
            int64_t sh = k;
            dpc_tensor *t = imp_copy_tensor(I, C, 1, &sh);
            if (!t)
                return DPC_ENOMEM;
            int nv = imp_new_value(I, imp_printf(I, "%s (as a vector)", V(c)->name));
            if (nv < 0)
                return I->e->code;
            V(nv)->c = t, V(nv)->kind = VK_FLOAT;
            bias = nv;
        } else
            bias = c;
    }
    return imp_linear_stmt(I, n, out, a, W, b, bias);
}

dpc_status imp_op_matmul(imp *I, const Onnx__NodeProto *n) {
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), out = imp_out(I, n, 0);
    if (is_const(I, b) && !is_const(I, a) && V(b)->c->rank == 2 && V(b)->kind == VK_FLOAT) {
        /* read only by an Add of a bias: that Add makes the Linear (imp_op_binary) */
        int first;
        if (out >= 0 && imp_uses(I, n->output[0], &first) == 1 && first >= 0 &&
            !strcmp(I->g->node[first]->op_type, "Add") && I->g->node[first]->n_input == 2) {
            const Onnx__NodeProto *A = I->g->node[first];
            const char *other = strcmp(A->input[0], n->output[0]) == 0 ? A->input[1] : A->input[0];
            int bv = imp_find(I, other);
            if (bv >= 0 && is_const(I, bv) && V(bv)->kind == VK_FLOAT && V(bv)->c->rank == 1 &&
                V(bv)->c->shape[0] == V(b)->c->shape[1] && V(a)->merged < 0 && V(a)->shaped && V(a)->rank >= 2) {
                V(out)->deferred = true;
                V(out)->kind = VK_FLOAT;
                sdim d[DPC_MAX_RANK];
                memcpy(d, V(a)->d, sizeof d);
                d[V(a)->rank - 1] = (sdim){V(b)->c->shape[1], 0};
                return imp_set_shape(I, out, V(a)->rank, d);
            }
        }
        dpc_tensor *W = imp_transposed(I, V(b)->c);
        if (!W)
            return DPC_ENOMEM;
        return imp_linear_stmt(I, n, out, a, W, b, -1);
    }
    ival *A = V(a), *B = V(b);
    if (A->rank < 2 || B->rank < 2)
        return imp_err(I, "1-D operands are not supported");
    if (A->d[A->rank - 1].v != B->d[B->rank - 2].v || A->d[A->rank - 1].s != B->d[B->rank - 2].s)
        return imp_err(I, "inner dims differ");
    ival As = *A, Bs = *B;
    As.rank -= 2, Bs.rank -= 2;
    int r;
    sdim d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, &As, &Bs, &r, d);
    if (s != DPC_OK)
        return s;
    d[r] = A->d[A->rank - 2], d[r + 1] = B->d[B->rank - 1];
    int ua, ub;
    const char *ea = imp_ref(I, a, &ua), *eb = ea ? imp_ref(I, b, &ub) : NULL;
    if (!eb)
        return I->e->code;
    return imp_add_stmt(I, out, NULL, imp_printf(I, "%s @ %s", ea, eb), VK_FLOAT, r + 2, d, ua, ub, -1);
}
