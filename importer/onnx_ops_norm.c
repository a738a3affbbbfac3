/* onnx_ops_norm.c - the normalisations: BatchNormalization ->
 * BatchNorm2d/1d, LayerNormalization -> LayerNorm (imp_layernorm_stmt, also
 * for the decomposed pattern of onnx_ops_fused.c), InstanceNormalization ->
 * GroupNorm(C, C) and GroupNormalization -> GroupNorm, each honouring the
 * ONNX definition exactly or refusing with a located error. */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_status imp_layernorm_stmt(imp *I, const Onnx__NodeProto *n, int out, int x, int gamma, int beta, double eps) {
    int64_t D = V(x)->d[V(x)->rank - 1].v;
    const char *mem = imp_member_name(I, n, gamma, "norm");
    const char *es = imp_f32(I, eps);
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!mem || !e || !es)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    char *decl = imp_member_line(I, imp_printf(I, "%s = LayerNorm(%lld, eps=%s%s)", mem, (long long)D, es,
                                           beta < 0 ? ", bias=False" : ""), gamma);
    dpc_status s = imp_add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, V(x)->rank, V(x)->d, u, -1, -1);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "weight", V(gamma)->c);
    if (s == DPC_OK && beta >= 0)
        s = imp_weight(I, mem, "bias", V(beta)->c);
    return s;
}

dpc_status imp_op_batchnorm(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    int p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = imp_in(I, n, (size_t)i + 1);
        if (!is_const(I, p[i]) || V(p[i])->kind != VK_FLOAT || V(p[i])->c->rank != 1)
            return imp_err(I, "scale, bias, mean and var must be 1-D float initializers");
    }
    if (imp_attr_i(I, n, "training_mode", 0) != 0)
        return imp_err(I, "training_mode=1 is not supported");
    for (size_t k = 1; k < n->n_output; k++) {
        int o;
        if (imp_opt_out(I, n, k, &o))
            return imp_err(I, "the running statistics outputs (training) are not supported");
    }
    ival *X = V(x);
    if (X->rank != 4 && X->rank != 3 && X->rank != 2)
        return imp_err(I, "an input of rank %d", X->rank);
    int64_t C = X->d[1].v;
    if (X->d[1].s)
        return imp_err(I, "a run-time channel dim");
    for (int i = 0; i < 4; i++)
        if (V(p[i])->c->shape[0] != C)
            return imp_err(I, "parameters of %lld entries for %lld channels", (long long)V(p[i])->c->shape[0],
                           (long long)C);
    double eps = imp_attr_f(I, n, "epsilon", 1e-5);
    const char *es = imp_f32(I, eps);
    const char *mem = imp_member_name(I, n, p[0], "bn");
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!mem || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    char *decl = imp_member_line(I, imp_printf(I, "%s = BatchNorm%dd(%lld, eps=%s)", mem, X->rank == 4 ? 2 : 1,
                                           (long long)C, es), p[0]);
    dpc_status s = imp_add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, X->rank, X->d, u, -1, -1);
    static const char *keys[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4 && s == DPC_OK; i++)
        s = imp_weight(I, mem, keys[i], V(p[i])->c);
    return s;
}

dpc_status imp_op_layernorm(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), g = imp_in(I, n, 1), b, out = imp_out(I, n, 0), o;
    if (!imp_opt(I, n, 2, &b))
        b = -1; /* no bias: layernorm_stmt's bias=False */
    ival *X = V(x);
    int axis = 0;
    dpc_status s = imp_axis_norm(I, imp_attr_i(I, n, "axis", -1), X->rank, &axis);
    if (s != DPC_OK)
        return s;
    if (axis != X->rank - 1)
        return imp_err(I, "normalising over more than the last axis is not supported");
    if (imp_opt_out(I, n, 1, &o) || imp_opt_out(I, n, 2, &o))
        return imp_err(I, "the Mean and InvStdDev outputs are not supported");
    if (imp_attr_i(I, n, "stash_type", 1) != 1)
        return imp_err(I, "stash_type other than float is not supported");
    int64_t D = X->d[axis].v;
    if (!is_const(I, g) || V(g)->c->rank != 1 || V(g)->c->shape[0] != D || (b >= 0 && (!is_const(I, b) ||
        V(b)->c->rank != 1 || V(b)->c->shape[0] != D)))
        return imp_err(I, "scale and bias must be 1-D initializers of the last dim's size");
    return imp_layernorm_stmt(I, n, out, x, g, b, imp_attr_f(I, n, "epsilon", 1e-5));
}

/* What both take: x a computed float tensor of rank >= 3 with fixed
 * channels and spatial dims, scale sc and bias bi (`bname`) 1-D float
 * initializers, epsilon (into *eps) finite and >= 0. */
static dpc_status norm_inputs(imp *I, const Onnx__NodeProto *n, int x, int sc, int bi, const char *bname, double *eps) {
    if (!V(x)->shaped)
        return imp_err(I, "an input of unknown shape");
    if (!V(sc)->c || !V(bi)->c || V(sc)->kind != VK_FLOAT || V(bi)->kind != VK_FLOAT ||
        V(sc)->c->rank != 1 || V(bi)->c->rank != 1)
        return imp_err(I, "scale and %s must be 1-D float initializers", bname);
    ival *X = V(x);
    if (X->c)
        return imp_err(I, "an %s of a constant", n->op_type);
    if (X->kind != VK_FLOAT)
        return imp_err(I, "on a non-float tensor");
    if (X->rank < 3)
        return imp_err(I, "an input of rank %d (at least 3: [N, C, D1, ...])", X->rank);
    for (int i = 1; i < X->rank; i++)
        if (X->d[i].s)
            return imp_err(I, "channels and spatial dims must be fixed (give --dim NAME=SIZE)");
    *eps = imp_attr_f(I, n, "epsilon", 1e-5);
    if (!(*eps >= 0) || !isfinite(*eps))
        return imp_err(I, "epsilon out of range");
    return DPC_OK;
}

/* out = GroupNorm(G, C, eps)(x) with weight w and bias b ([C] each), the
 * member named after the initializer sc (else `prefix`). */
static dpc_status groupnorm_stmt(imp *I, const Onnx__NodeProto *n, int x, int sc, int out, int64_t G, double eps,
                                 dpc_tensor *w, dpc_tensor *b, const char *prefix) {
    const char *mem = imp_member_name(I, n, sc, prefix);
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!mem || !e)
        return imp_fail(I);
    char *decl = imp_member_line(
        I, imp_printf(I, "%s = GroupNorm(%lld, %lld, eps=%s)", mem, (long long)G, (long long)V(x)->d[1].v, imp_f32(I, eps)),
        sc);
    if (!decl)
        return imp_fail(I);
    ival *X = V(x);
    int uses[1] = {u};
    dpc_status s = imp_stmt_value(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, X->rank, X->d, uses, 1);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "weight", w);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "bias", b);
    return s;
}

/* InstanceNormalization(x, scale, B) = GroupNorm(C, C) with weight scale
 * and bias B: each (n, c) normalised over the spatial dims with the
 * biased variance, then scaled. */
dpc_status imp_op_instancenorm(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), sc = imp_in(I, n, 1), bi = imp_in(I, n, 2), out = imp_out(I, n, 0);
    double eps = 0; /* set by norm_inputs when it succeeds */
    dpc_status s = norm_inputs(I, n, x, sc, bi, "B", &eps);
    if (s != DPC_OK)
        return s;
    int64_t C = V(x)->d[1].v;
    if (V(sc)->c->shape[0] != C || V(bi)->c->shape[0] != C)
        return imp_err(I, "scale and B of %lld and %lld entries for %lld channels", (long long)V(sc)->c->shape[0],
                       (long long)V(bi)->c->shape[0], (long long)C);
    return groupnorm_stmt(I, n, x, sc, out, C, eps, V(sc)->c, V(bi)->c, "inorm");
}

/* GroupNormalization (opsets 18 and 21) -> GroupNorm(num_groups, C): at
 * 18 scale and bias hold one value a group (each channel of group g takes
 * g's), from 21 one a channel, as PyTorch's. */
dpc_status imp_op_groupnorm(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), sc = imp_in(I, n, 1), bi = imp_in(I, n, 2), out = imp_out(I, n, 0);
    double eps = 0; /* set by norm_inputs when it succeeds */
    dpc_status s = norm_inputs(I, n, x, sc, bi, "bias", &eps);
    if (s != DPC_OK)
        return s;
    int64_t C = V(x)->d[1].v, G = imp_attr_i(I, n, "num_groups", 0);
    if (G < 1 || C % G)
        return imp_err(I, "num_groups %lld does not divide the %lld channels", (long long)G, (long long)C);
    if (imp_attr_i(I, n, "stash_type", 1) != 1)
        return imp_err(I, "stash_type other than float is not supported");
    int64_t per = I->opset >= 21 ? C : G; /* the entries scale and bias hold */
    if (V(sc)->c->shape[0] != per || V(bi)->c->shape[0] != per)
        return imp_err(I, "scale and bias of %lld and %lld entries (%lld expected at opset %lld)",
                       (long long)V(sc)->c->shape[0], (long long)V(bi)->c->shape[0], (long long)per,
                       (long long)I->opset);
    dpc_tensor *w = imp_tensor(I, DPC_F32, 1, &C), *b = imp_tensor(I, DPC_F32, 1, &C);
    if (!w || !b)
        return imp_fail(I);
    for (int64_t c = 0; c < C; c++) {
        int64_t k = per == C ? c : c / (C / G);
        ((float *)w->data)[c] = ((const float *)V(sc)->c->data)[k];
        ((float *)b->data)[c] = ((const float *)V(bi)->c->data)[k];
    }
    return groupnorm_stmt(I, n, x, sc, out, G, eps, w, b, "gnorm");
}
