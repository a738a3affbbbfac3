/* onnx_mha.c - nn.MultiheadAttention as torch.onnx.export writes it
 * (PyTorch 1.13's multi_head_attention_forward, batch_first=True, self-
 * attention without masks and need_weights=False: ViT's encoder blocks,
 * nn.TransformerEncoderLayer(batch_first=True)), recognised back into
 * dpc's MultiheadAttention module.
 *
 * The export moves the batch away and merges it with the heads, which dpc
 * cannot represent value by value:
 *
 *   t  = Transpose(x, 1 0 2)            [L, N, E]      x: [N, L, E]
 *   a  = Add(b_in, MatMul(t, W_in^T))   [L, N, 3E]     (the Add absent without bias)
 *   q, k, v = Slice(a, jE:(j+1)E, axis -1), j = 0, 1, 2
 *   q' = Transpose(Reshape(q, [L, N*H, hd]), 1 0 2)     [N*H, L, hd]
 *   k' = Transpose(Reshape(k, ...), 1 2 0)              [N*H, hd, L]  (or 1 0 2 then 0 2 1)
 *   v' = Transpose(Reshape(v, ...), 1 0 2)              [N*H, L, hd]
 *   o  = MatMul(Softmax(MatMul(Div(q', sqrt(hd)), k'), -1), v')
 *   y  = Transpose(Reshape(Gemm(Reshape(Transpose(o, 1 0 2), [L*N, E]), W_out, b_out), [L, N, E]), 1 0 2)
 *
 * imp_mha_match, called at the first Transpose, checks the structure of
 * the data edges after it (op types, permutations, every reader of every
 * value inside: only the pattern's nodes and Shape nodes may read them)
 * and claims those nodes. The constants (weights, slice bounds, reshape
 * shapes, the scale) come from nodes the importer has not reached yet (the
 * exporter's shape plumbing), so each claimed node is checked when it is
 * reached (imp_mha_node): its constant operands against the pattern, and
 * its output gets its ONNX shape (for the Shape nodes), but no
 * expression. The last Transpose writes the module and its statement,
 * `y = NAME(x, x, x, need_weights=false)[0]`. A claimed node that does not
 * fit is a located error, as the batch-merging reshape would have been. */
#include "onnx_imp.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define V(i) imp_val(I, (i)) /* never outside the values (onnx_imp.h) */

enum {
    R_T0, R_MM_IN, R_ADD_IN, R_SL_Q, R_SL_K, R_SL_V, R_RS_Q, R_RS_K, R_RS_V, R_TR_Q, R_TR_K, R_TR_K2, R_TR_V,
    R_SCALE, R_MM_QK, R_SOFTMAX, R_MM_PV, R_TR_O, R_RS_O, R_GEMM_O, R_MM_O, R_ADD_O, R_RS_O2, R_END, R_COUNT
};

struct imp_mha {
    int node[R_COUNT]; /* node index per role, -1 absent */
    int x;             /* the input value [N, L, E] */
    sdim L;
    int64_t E, H;      /* H 0 until a reshape gives it */
    int win, bin;      /* values: W_in^T [E, 3E], b_in [3E] (-1 none) */
    dpc_tensor *wout;  /* [E, E] as Linear's weight (out, in) */
    int bout;
};

/* ---- structure ---- */

static const Onnx__NodeProto *gnode(imp *I, int k) { return I->g->node[k]; }
static bool is_op(imp *I, int k, const char *op) { return k >= 0 && strcmp(gnode(I, k)->op_type, op) == 0; }
static const char *out0(imp *I, int k) { return gnode(I, k)->n_output == 1 ? gnode(I, k)->output[0] : ""; }

/* The one node after `from` that reads `name`, other than Shape nodes;
 * -1 when there are none or several, or `name` is a graph output. */
static int sole_reader(imp *I, const char *name, int from) {
    if (!name[0])
        return -1;
    for (size_t i = 0; i < I->g->n_output; i++)
        if (strcmp(I->g->output[i]->name, name) == 0)
            return -1;
    int found = -1;
    for (size_t k = (size_t)from + 1; k < I->g->n_node; k++) {
        const Onnx__NodeProto *n = gnode(I, (int)k);
        bool reads = false;
        for (size_t i = 0; i < n->n_input && !reads; i++)
            reads = strcmp(n->input[i], name) == 0;
        if (!reads || (strcmp(n->op_type, "Shape") == 0 && n->n_input == 1))
            continue;
        if (found >= 0)
            return -1;
        found = (int)k;
    }
    return found;
}

/* the readers of a: exactly three Slices, each of a alone */
static int three_slices(imp *I, const char *name, int from, int *sl) {
    int m = 0;
    for (size_t k = (size_t)from + 1; k < I->g->n_node; k++) {
        const Onnx__NodeProto *n = gnode(I, (int)k);
        bool reads = false;
        for (size_t i = 0; i < n->n_input; i++)
            reads |= strcmp(n->input[i], name) == 0;
        if (!reads || (strcmp(n->op_type, "Shape") == 0 && n->n_input == 1))
            continue;
        if (m == 3 || strcmp(n->op_type, "Slice") || n->n_input < 3 || strcmp(n->input[0], name) != 0)
            return 0;
        for (size_t i = 1; i < n->n_input; i++)
            if (strcmp(n->input[i], name) == 0)
                return 0;
        sl[m++] = (int)k;
    }
    for (size_t i = 0; i < I->g->n_output; i++)
        if (strcmp(I->g->output[i]->name, name) == 0)
            return 0;
    return m;
}

static bool perm_is(imp *I, int k, int a, int b, int c) {
    if (!is_op(I, k, "Transpose"))
        return false;
    const Onnx__AttributeProto *p = imp_attr(gnode(I, k), "perm"); /* read here, not through imp_attr_ints: a bad
                                                                     * attribute is that node's error, later */
    return p && p->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && p->n_ints == 3 && p->ints[0] == a &&
           p->ints[1] == b && p->ints[2] == c;
}

/* the node reading `name` as its input i, alone */
static int next(imp *I, const char *name, int from, const char *op, int i) {
    int k = sole_reader(I, name, from);
    if (k < 0 || !is_op(I, k, op) || (size_t)i >= gnode(I, k)->n_input || strcmp(gnode(I, k)->input[i], name) != 0 ||
        gnode(I, k)->n_output != 1)
        return -1;
    for (size_t j = 0; j < gnode(I, k)->n_input; j++)
        if ((int)j != i && strcmp(gnode(I, k)->input[j], name) == 0)
            return -1;
    return k;
}

bool imp_mha_match(imp *I, int t0) {
    const Onnx__NodeProto *n0 = gnode(I, t0);
    int x = imp_in(I, n0, 0);
    if (!I->claim || !perm_is(I, t0, 1, 0, 2) || n0->n_output != 1 || V(x)->c || !V(x)->shaped ||
        V(x)->rank != 3 || V(x)->d[0].s != 1 || V(x)->d[0].v != 1 || V(x)->d[2].s)
        return false;
    struct imp_mha M;
    for (int r = 0; r < R_COUNT; r++)
        M.node[r] = -1;
    M.node[R_T0] = t0;
    int mm = next(I, out0(I, t0), t0, "MatMul", 0);
    if (mm < 0)
        return false;
    M.node[R_MM_IN] = mm;
    const char *a = out0(I, mm);
    int ad = sole_reader(I, a, mm);
    if (is_op(I, ad, "Add") && gnode(I, ad)->n_input == 2 && gnode(I, ad)->n_output == 1 &&
        strcmp(gnode(I, ad)->input[0], gnode(I, ad)->input[1]) != 0) {
        M.node[R_ADD_IN] = ad;
        a = out0(I, ad);
    }
    int sl[3];
    if (three_slices(I, a, t0, sl) != 3)
        return false;
    int tr_q = -1, tr_v = -1, kt = -1;
    for (int j = 0; j < 3; j++) {
        int rs = next(I, out0(I, sl[j]), sl[j], "Reshape", 0);
        int tr = rs >= 0 ? next(I, out0(I, rs), rs, "Transpose", 0) : -1;
        if (tr < 0)
            return false;
        int role;
        if (perm_is(I, tr, 1, 2, 0))
            role = 1, kt = tr, M.node[R_TR_K] = tr;
        else if (perm_is(I, tr, 1, 0, 2)) {
            int r2 = sole_reader(I, out0(I, tr), tr);
            if (perm_is(I, r2, 0, 2, 1) && next(I, out0(I, tr), tr, "Transpose", 0) == r2)
                role = 1, kt = r2, M.node[R_TR_K] = tr, M.node[R_TR_K2] = r2;
            else if ((is_op(I, r2, "Div") || is_op(I, r2, "Mul")) && gnode(I, r2)->n_input == 2 &&
                     next(I, out0(I, tr), tr, gnode(I, r2)->op_type, 0) == r2)
                role = 0, tr_q = r2, M.node[R_TR_Q] = tr, M.node[R_SCALE] = r2;
            else if (is_op(I, r2, "MatMul") && next(I, out0(I, tr), tr, "MatMul", 1) == r2)
                role = 2, tr_v = tr, M.node[R_TR_V] = tr;
            else
                return false;
        } else
            return false;
        if (M.node[R_SL_Q + role] >= 0)
            return false;
        M.node[R_SL_Q + role] = sl[j];
        M.node[R_RS_Q + role] = rs;
    }
    if (tr_q < 0 || tr_v < 0 || kt < 0)
        return false;
    int qk = next(I, out0(I, tr_q), tr_q, "MatMul", 0);
    if (qk < 0 || next(I, out0(I, kt), kt, "MatMul", 1) != qk)
        return false;
    int sm = next(I, out0(I, qk), qk, "Softmax", 0);
    int pv = sm >= 0 ? next(I, out0(I, sm), sm, "MatMul", 0) : -1;
    if (pv < 0 || next(I, out0(I, tr_v), tr_v, "MatMul", 1) != pv)
        return false;
    int to = next(I, out0(I, pv), pv, "Transpose", 0);
    int ro = to >= 0 && perm_is(I, to, 1, 0, 2) ? next(I, out0(I, to), to, "Reshape", 0) : -1;
    if (ro < 0)
        return false;
    M.node[R_MM_QK] = qk, M.node[R_SOFTMAX] = sm, M.node[R_MM_PV] = pv, M.node[R_TR_O] = to, M.node[R_RS_O] = ro;
    int g = sole_reader(I, out0(I, ro), ro), last;
    if (is_op(I, g, "Gemm") && next(I, out0(I, ro), ro, "Gemm", 0) == g)
        M.node[R_GEMM_O] = last = g;
    else if (is_op(I, g, "MatMul") && next(I, out0(I, ro), ro, "MatMul", 0) == g) {
        M.node[R_MM_O] = last = g;
        int ao = sole_reader(I, out0(I, g), g); /* its bias, or none (bias=False) */
        if (is_op(I, ao, "Add")) {
            if (gnode(I, ao)->n_input != 2 || gnode(I, ao)->n_output != 1 ||
                strcmp(gnode(I, ao)->input[0], gnode(I, ao)->input[1]) == 0)
                return false;
            M.node[R_ADD_O] = last = ao;
        }
    } else
        return false;
    int ro2 = next(I, out0(I, last), last, "Reshape", 0);
    int end = ro2 >= 0 ? next(I, out0(I, ro2), ro2, "Transpose", 0) : -1;
    if (end < 0 || !perm_is(I, end, 1, 0, 2) || !out0(I, end)[0])
        return false;
    M.node[R_RS_O2] = ro2, M.node[R_END] = end;
    /* the operands that are not part of the pattern must not be its values either */
    for (int r = 0; r < R_COUNT; r++)
        if (M.node[r] >= 0 && I->claim[M.node[r]])
            return false;
    struct imp_mha *nm = dpc_realloc(I->mha, (size_t)(I->nmha + 1) * sizeof *nm);
    if (!nm)
        return false; /* then the pattern is refused where the batch merges */
    I->mha = nm;
    M.x = x, M.L = V(x)->d[1], M.E = V(x)->d[2].v, M.H = 0, M.win = M.bin = M.bout = -1, M.wout = NULL;
    I->mha[I->nmha++] = M;
    for (int r = 0; r < R_COUNT; r++)
        if (M.node[r] >= 0)
            I->claim[M.node[r]] = I->nmha;
    return true;
}

/* ---- the claimed nodes ---- */

static dpc_status bad(imp *I, const char *what) {
    return imp_err(I, "in nn.MultiheadAttention's export: %s", what);
}

static bool sd_eq(sdim a, sdim b) { return a.v == b.v && a.s == b.s; }

/* a constant float input of the given shape (rank 1 or 2) */
static int const_f(imp *I, const Onnx__NodeProto *n, int i, int rank, int64_t d0, int64_t d1) {
    int v;
    if (!imp_opt(I, n, (size_t)i, &v) || !V(v)->c || V(v)->kind != VK_FLOAT || V(v)->c->rank != rank || V(v)->c->shape[0] != d0 ||
        (rank == 2 && V(v)->c->shape[1] != d1))
        return -1;
    return v;
}

/* the single value of a constant int input (1 element, no run-time dim) */
static bool const_int1(imp *I, const Onnx__NodeProto *n, int i, int64_t *out) {
    int v;
    if (!imp_opt(I, n, (size_t)i, &v) || !V(v)->c || V(v)->kind != VK_INT || dpc_tensor_numel(V(v)->c) != 1 || (V(v)->csym && V(v)->csym[0]))
        return false;
    *out = ((int64_t *)V(v)->c->data)[0];
    return true;
}

/* Reshape's shape operand against the expected dims (0 copies the input's
 * dim, one -1 takes the rest, which then is the expected one). */
static bool shape_is(imp *I, const Onnx__NodeProto *n, const sdim *want, int r) {
    int v = imp_in(I, n, 1), x = imp_in(I, n, 0); /* a Reshape's: both required */
    if (!V(v)->c || V(v)->kind != VK_INT || V(v)->c->rank != 1 || V(v)->c->shape[0] != r ||
        imp_attr_i(I, n, "allowzero", 0))
        return false;
    int neg = 0;
    for (int i = 0; i < r; i++) {
        sdim d = {((int64_t *)V(v)->c->data)[i], V(v)->csym ? V(v)->csym[i] : 0};
        if (!d.s && d.v == 0 && i < V(x)->rank)
            d = V(x)->d[i];
        if (!d.s && d.v == -1)
            neg++;
        else if (!sd_eq(d, want[i]))
            return false;
    }
    return neg <= 1;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b); }

/* the module: member, statement, weights */
static dpc_status write_module(imp *I, struct imp_mha *M, int out) {
    const char *base = NULL;
    if (M->bin >= 0 && V(M->bin)->init >= 0) {
        const char *nm = V(M->bin)->name;
        size_t L = strlen(nm), s = strlen(".in_proj_bias");
        if (L > s && L < 200 && strcmp(nm + L - s, ".in_proj_bias") == 0 && strncmp(nm, "onnx", 4) != 0)
            base = imp_printf(I, "%.*s", (int)(L - s), nm);
    }
    const char *mem = base ? imp_ident(I, base, "self_attention")
                           : imp_member_name(I, gnode(I, M->node[R_T0]), -1, "self_attention");
    int u;
    const char *e = mem ? imp_ref(I, M->x, &u) : NULL;
    if (!e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    const char *decl = imp_member_line(I, imp_printf(I, "%s = MultiheadAttention(%lld, %lld%s, batch_first=true)", mem,
                                                     (long long)M->E, (long long)M->H, M->bin < 0 ? ", bias=false" : ""),
                                       M->bin);
    const char *expr = imp_printf(I, "%s(%s, %s, %s, need_weights=false)[0]", mem, e, e, e);
    dpc_tensor *win = imp_transposed(I, V(M->win)->c);
    if (!decl || !expr || !win)
        return DPC_ENOMEM;
    int st = imp_stmt(I, out, decl, expr, &u, 1);
    if (st < 0)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    /* the comment names the pattern's first and last node */
    int count = 0;
    for (int r = 0; r < R_COUNT; r++)
        count += M->node[r] >= 0;
    dpc_buf b;
    dpc_buf_init(&b);
    const Onnx__NodeProto *first = gnode(I, M->node[R_T0]), *end = gnode(I, M->node[R_END]);
    dpc_buf_puts(&b, "        # ");
    emit_comment_text(&b, first->name && *first->name ? first->name : "(unnamed)");
    dpc_buf_puts(&b, " ... ");
    emit_comment_text(&b, end->name && *end->name ? end->name : "(unnamed)");
    dpc_buf_printf(&b, " (nn.MultiheadAttention's export: %d nodes and their shape plumbing)\n        %s = %s\n",
                   count, V(out)->var, expr);
    char *line = dpc_buf_take(&b);
    if (!line)
        return imp_oom(I);
    dpc_free(I->st[st].line);
    I->st[st].line = line;
    V(out)->kind = VK_FLOAT;
    sdim d[3] = {V(M->x)->d[0], M->L, {M->E, 0}};
    dpc_status s = imp_set_shape(I, out, 3, d);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "in_proj_weight", win);
    if (s == DPC_OK && M->bin >= 0)
        s = imp_weight(I, mem, "in_proj_bias", V(M->bin)->c);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "out_proj.weight", M->wout);
    if (s == DPC_OK && M->bout >= 0)
        s = imp_weight(I, mem, "out_proj.bias", V(M->bout)->c);
    return s;
}

/* Whether the Mul or Div node n scales q by 1 / sqrt(hd). */
static bool scaled_right(imp *I, const Onnx__NodeProto *n, int64_t hd) {
    int c = imp_in(I, n, 1);
    double s;
    bool div = strcmp(n->op_type, "Div") == 0;
    return V(c)->c && V(c)->kind == VK_FLOAT && imp_const_scalar(V(c), &s) &&
           near(s, div ? sqrt((double)hd) : 1 / sqrt((double)hd));
}

/* A Slice of q, k or v (role) out of the input projection: its third of
 * the last dim. */
static dpc_status mha_slice(imp *I, const Onnx__NodeProto *n, const struct imp_mha *M, int role) {
    const int64_t E = M->E;
    int64_t j = role - R_SL_Q, st, en, ax = -1, step = 1;
    if (!const_int1(I, n, 1, &st) || !const_int1(I, n, 2, &en) ||
        (n->n_input > 3 && n->input[3][0] && !const_int1(I, n, 3, &ax)) ||
        (n->n_input > 4 && n->input[4][0] && !const_int1(I, n, 4, &step)) || (ax != -1 && ax != 2) || step != 1 ||
        st != j * E || (en != (j + 1) * E && (j != 2 || en < 3 * E)))
        return bad(I, j == 0 ? "q must be the slice 0:E of the last dim of the projection"
                      : j == 1 ? "k must be the slice E:2E of the last dim of the projection"
                               : "v must be the slice 2E:3E of the last dim of the projection");
    return DPC_OK;
}

/* The Reshape of q, k or v to the heads, [L, N * H, hd]: H (M->H, the
 * same for the three) from its shape operand; d the result's dims. */
static dpc_status mha_heads(imp *I, const Onnx__NodeProto *n, struct imp_mha *M, sdim *d) {
    const int64_t E = M->E;
    const sdim L = M->L;
    /* [L, N * H, hd]: H from the shape operand */
    int v = imp_in(I, n, 1);
    int64_t H = 0;
    if (V(v)->c && V(v)->kind == VK_INT && V(v)->c->rank == 1 && V(v)->c->shape[0] == 3) {
        const int64_t *w = (const int64_t *)V(v)->c->data;
        if (V(v)->csym && V(v)->csym[1] == 1)
            H = w[1];
        else if (!(V(v)->csym && V(v)->csym[2]) && w[2] > 0 && E % w[2] == 0)
            H = E / w[2];
    }
    if (H <= 0 || E % H || (M->H && H != M->H))
        return bad(I, "the reshape to the heads must give [L, N * heads, E / heads]");
    M->H = H;
    sdim want[3] = {L, {H, 1}, {E / H, 0}};
    if (!shape_is(I, n, want, 3))
        return bad(I, "the reshape to the heads must give [L, N * heads, E / heads]");
    memcpy(d, want, sizeof want);
    return DPC_OK;
}

/* The output projection's nodes (role): the reshape back to [L * N, E]
 * (d), the Gemm or MatMul of a constant [E, E] and its bias, which the
 * input projection must match. */
static dpc_status mha_out_proj(imp *I, const Onnx__NodeProto *n, struct imp_mha *M, int role, const sdim *d) {
    const int64_t E = M->E;
    if (role == R_RS_O && !shape_is(I, n, d, 2))
        return bad(I, "the reshape back must give [L * N, E]");
    if (role == R_GEMM_O) {
        if (imp_attr_f(I, n, "alpha", 1) != 1 || imp_attr_f(I, n, "beta", 1) != 1 || imp_attr_i(I, n, "transA", 0))
            return bad(I, "the output projection must be a Gemm with alpha = beta = 1 and no transA");
        int w = const_f(I, n, 1, 2, E, E);
        if (w < 0 || (n->n_input > 2 && n->input[2][0] && (M->bout = const_f(I, n, 2, 1, E, 0)) < 0))
            return bad(I, "the output projection must be a constant [E, E] matrix and [E] bias");
        M->wout = imp_attr_i(I, n, "transB", 0) ? V(w)->c : imp_transposed(I, V(w)->c);
    } else if (role == R_MM_O) {
        int w = const_f(I, n, 1, 2, E, E);
        if (w < 0)
            return bad(I, "the output projection must be a constant [E, E] matrix");
        M->wout = imp_transposed(I, V(w)->c);
    } else if (role == R_ADD_O) {
        int j = strcmp(n->input[0], gnode(I, M->node[R_MM_O])->output[0]) == 0 ? 1 : 0;
        if ((M->bout = const_f(I, n, j, 1, E, 0)) < 0)
            return bad(I, "the output projection's bias must be a constant [E] vector");
    }
    if ((role == R_GEMM_O || role == R_MM_O) && !M->wout)
        return DPC_ENOMEM;
    if (role == R_GEMM_O || role == R_ADD_O || (role == R_MM_O && M->node[R_ADD_O] < 0)) {
        if ((M->bin < 0) != (M->bout < 0))
            return bad(I, "the input and output projections must both have a bias or both none");
    }
    return DPC_OK;
}

dpc_status imp_mha_node(imp *I, const Onnx__NodeProto *n) {
    int k = I->cur;
    struct imp_mha *M = &I->mha[I->claim[k] - 1];
    int role = 0;
    while (role < R_COUNT && M->node[role] != k)
        role++;
    int out = imp_out(I, n, 0); /* every claimed op's row requires its output 0 */
    if (role == R_COUNT)
        return imp_err(I, "internal: a claimed node without its role");
    if (role == R_END)
        return write_module(I, M, out);
    const int64_t E = M->E, hd = M->H ? E / M->H : 0;
    const sdim N = V(M->x)->d[0], L = M->L, e1 = {E, 0}, e3 = {3 * E, 0}, hdd = {hd, 0}, NH = {M->H, 1};
    sdim d[3];
    int rank = 3;
    dpc_status st;
    switch (role) {
    case R_T0:
        d[0] = L, d[1] = N, d[2] = e1;
        break;
    case R_MM_IN:
        if ((M->win = const_f(I, n, 1, 2, E, 3 * E)) < 0)
            return bad(I, "the input projection must be a constant [E, 3E] matrix");
        d[0] = L, d[1] = N, d[2] = e3;
        break;
    case R_ADD_IN: {
        int j = strcmp(n->input[0], gnode(I, M->node[R_MM_IN])->output[0]) == 0 ? 1 : 0;
        if ((M->bin = const_f(I, n, j, 1, 3 * E, 0)) < 0)
            return bad(I, "the input projection's bias must be a constant [3E] vector");
        d[0] = L, d[1] = N, d[2] = e3;
        break;
    }
    case R_SL_Q:
    case R_SL_K:
    case R_SL_V:
        if ((st = mha_slice(I, n, M, role)) != DPC_OK)
            return st;
        d[0] = L, d[1] = N, d[2] = e1;
        break;
    case R_RS_Q:
    case R_RS_K:
    case R_RS_V:
        if ((st = mha_heads(I, n, M, d)) != DPC_OK)
            return st;
        break;
    case R_TR_Q:
    case R_TR_V:
    case R_SCALE:
        if (role == R_SCALE && !scaled_right(I, n, hd))
            return bad(I, "q must be scaled by 1 / sqrt(E / heads)");
        d[0] = NH, d[1] = L, d[2] = hdd;
        break;
    case R_TR_K:
        if (M->node[R_TR_K2] >= 0)
            d[0] = NH, d[1] = L, d[2] = hdd;
        else
            d[0] = NH, d[1] = hdd, d[2] = L;
        break;
    case R_TR_K2:
        d[0] = NH, d[1] = hdd, d[2] = L;
        break;
    case R_MM_QK:
    case R_SOFTMAX:
        if (role == R_SOFTMAX) {
            const Onnx__AttributeProto *a = imp_attr(n, "axis");
            int64_t ax = imp_attr_i(I, n, "axis", I->opset >= 13 ? -1 : 1);
            if ((ax != -1 && ax != 2) || (I->opset < 13 && !a))
                return bad(I, "the softmax must be over the last dim");
        }
        d[0] = NH, d[1] = L, d[2] = L;
        break;
    case R_MM_PV:
        d[0] = NH, d[1] = L, d[2] = hdd;
        break;
    case R_TR_O:
        d[0] = L, d[1] = NH, d[2] = hdd;
        break;
    case R_RS_O:
    case R_GEMM_O:
    case R_MM_O:
    case R_ADD_O:
        if (L.s)
            return bad(I, "a run-time sequence length merged with the batch is not supported");
        rank = 2, d[0] = (sdim){L.v, 1}, d[1] = e1;
        if ((st = mha_out_proj(I, n, M, role, d)) != DPC_OK)
            return st;
        break;
    case R_RS_O2:
        d[0] = L, d[1] = N, d[2] = e1;
        if (!shape_is(I, n, d, 3))
            return bad(I, "the reshape back must give [L, N, E]");
        break;
    default:
        return imp_err(I, "internal: a claimed node without its role");
    }
    V(out)->kind = VK_FLOAT;
    V(out)->region = true;
    return imp_set_shape(I, out, rank, d);
}
