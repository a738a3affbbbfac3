/* onnx_ops_fused.c - the modules an exporter decomposed, recognised at
 * their last node (an Add or a Mul, onnx_ops_binary.c), which then reads
 * straight from the pattern's input: Erf-GELU -> gelu, x * sigmoid(x) ->
 * silu, LayerNorm before opset 17 -> LayerNorm, MatMul + Add of a bias ->
 * Linear. The nodes in between are left to the liveness pass. Its own file:
 * the look back over producers is another concern than the arithmetic. */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int producer_of(imp *I, int v, const char *op) {
    if (v < 0 || V(v)->node < 0)
        return -1;
    const Onnx__NodeProto *p = I->g->node[V(v)->node];
    return strcmp(p->op_type, op) == 0 ? V(v)->node : -1;
}

/* Erf-GELU: Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5), in either operand order */
static int match_gelu(imp *I, int a, int b) {
    double h;
    if (!imp_const_scalar(V(b), &h) || !imp_near(h, 0.5))
        return -1;
    int m = producer_of(I, a, "Mul");
    if (m < 0)
        return -1;
    const Onnx__NodeProto *M = I->g->node[m];
    for (int side = 0; side < 2; side++) {
        int x = imp_in(I, M, (size_t)side), ad = imp_in(I, M, (size_t)(1 - side));
        int an = producer_of(I, ad, "Add");
        if (an < 0 || x < 0)
            continue;
        const Onnx__NodeProto *A = I->g->node[an];
        for (int s2 = 0; s2 < 2; s2++) {
            double one;
            int er = imp_in(I, A, (size_t)s2), c1 = imp_in(I, A, (size_t)(1 - s2));
            int en = producer_of(I, er, "Erf");
            if (en < 0 || c1 < 0 || !imp_const_scalar(V(c1), &one) || one != 1)
                continue;
            int dn = producer_of(I, imp_in(I, I->g->node[en], 0), "Div");
            if (dn < 0)
                continue;
            const Onnx__NodeProto *D = I->g->node[dn];
            double c;
            if (imp_in(I, D, 0) == x && imp_const_scalar(V(imp_in(I, D, 1)), &c) && imp_near(c, sqrt(2.0)))
                return x;
        }
    }
    return -1;
}

/* LayerNorm before opset 17: Add(Mul(Div(Sub(x, mean(x)), Sqrt(Add(mean(Pow(Sub, 2)), eps))), gamma), beta) */
static int match_layernorm(imp *I, int a, int beta, int *gamma, double *eps) {
    if (!is_const(I, beta) || V(beta)->c->rank != 1 || V(beta)->kind != VK_FLOAT)
        return -1;
    int mu = producer_of(I, a, "Mul");
    if (mu < 0)
        return -1;
    const Onnx__NodeProto *M = I->g->node[mu];
    for (int side = 0; side < 2; side++) {
        int dv = imp_in(I, M, (size_t)side), g = imp_in(I, M, (size_t)(1 - side));
        int dn = producer_of(I, dv, "Div");
        if (dn < 0 || !is_const(I, g) || V(g)->c->rank != 1 || V(g)->kind != VK_FLOAT)
            continue;
        const Onnx__NodeProto *D = I->g->node[dn];
        int sub = imp_in(I, D, 0), sq = imp_in(I, D, 1);
        int sn = producer_of(I, sub, "Sub"), qn = producer_of(I, sq, "Sqrt");
        if (sn < 0 || qn < 0)
            continue;
        const Onnx__NodeProto *S = I->g->node[sn];
        int x = imp_in(I, S, 0), rm = producer_of(I, imp_in(I, S, 1), "ReduceMean");
        if (rm < 0 || imp_in(I, I->g->node[rm], 0) != x)
            continue;
        int ae = producer_of(I, imp_in(I, I->g->node[qn], 0), "Add");
        if (ae < 0)
            continue;
        const Onnx__NodeProto *AE = I->g->node[ae];
        double e;
        int rm2 = producer_of(I, imp_in(I, AE, 0), "ReduceMean");
        if (rm2 < 0 || !imp_const_scalar(V(imp_in(I, AE, 1)), &e))
            continue;
        int pw = producer_of(I, imp_in(I, I->g->node[rm2], 0), "Pow");
        double two;
        if (pw < 0 || imp_in(I, I->g->node[pw], 0) != sub || !imp_const_scalar(V(imp_in(I, I->g->node[pw], 1)), &two) ||
            two != 2)
            continue;
        /* both means over the last axis only */
        const Onnx__NodeProto *rms[2] = {I->g->node[rm], I->g->node[rm2]};
        bool ok = true;
        for (int k = 0; k < 2; k++) {
            const int64_t *ax;
            int na = imp_attr_ints(I, rms[k], "axes", &ax);
            ok &= na == 1 && (ax[0] == -1 || ax[0] == V(x)->rank - 1) && imp_attr_i(I, rms[k], "keepdims", 1) == 1;
        }
        int64_t D0 = V(x)->rank ? V(x)->d[V(x)->rank - 1].v : 0;
        if (!ok || V(x)->d[V(x)->rank - 1].s || V(g)->c->shape[0] != D0 || V(beta)->c->shape[0] != D0)
            continue;
        *gamma = g, *eps = e;
        return x;
    }
    return -1;
}

/* Whether the Add or Mul node n (a, b: its inputs; out: its output) ends a
 * decomposed module: then its statement is written and *s is the status. */
bool imp_fuse_binary(imp *I, const Onnx__NodeProto *n, int a, int b, int out, dpc_status *s) {
    const char *op = n->op_type;
    if (!strcmp(op, "Mul")) {
        for (int side = 0; side < 2; side++) {
            int p = side ? b : a, q = side ? a : b;
            int x = match_gelu(I, p, q);
            if (x >= 0) {
                int u;
                const char *e = imp_ref(I, x, &u);
                *s = imp_add_stmt(I, out, NULL, e ? imp_printf(I, "gelu(%s)", e) : NULL, VK_FLOAT, V(x)->rank, V(x)->d, u,
                                  -1, -1);
                return true;
            }
            int sg = producer_of(I, p, "Sigmoid");
            if (sg >= 0 && imp_in(I, I->g->node[sg], 0) == q) {
                int u;
                const char *e = imp_ref(I, q, &u);
                *s = imp_add_stmt(I, out, NULL, e ? imp_printf(I, "silu(%s)", e) : NULL, VK_FLOAT, V(q)->rank, V(q)->d, u,
                                  -1, -1);
                return true;
            }
        }
    }
    if (!strcmp(op, "Add")) {
        for (int side = 0; side < 2; side++) {
            int p = side ? b : a, q = side ? a : b;
            int gamma;
            double eps;
            int x = match_layernorm(I, p, q, &gamma, &eps);
            if (x >= 0) {
                *s = imp_layernorm_stmt(I, n, out, x, gamma, q, eps);
                return true;
            }
            /* MatMul(x, W) + b -> Linear */
            int mm = producer_of(I, p, "MatMul");
            if (mm >= 0 && is_const(I, q) && V(q)->kind == VK_FLOAT && V(q)->c->rank == 1) {
                const Onnx__NodeProto *M = I->g->node[mm];
                int x2 = imp_in(I, M, 0), w = imp_in(I, M, 1);
                if (!is_const(I, x2) && is_const(I, w) && V(w)->c->rank == 2 && V(w)->kind == VK_FLOAT &&
                    V(w)->c->shape[1] == V(q)->c->shape[0]) {
                    dpc_tensor *W = imp_transposed(I, V(w)->c);
                    *s = W ? imp_linear_stmt(I, n, out, x2, W, w, q) : DPC_ENOMEM;
                    return true;
                }
            }
        }
    }
    return false;
}
