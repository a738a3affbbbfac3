/* attn.c - finds attention in the graph IR, for the fused attention kernel
 * (KK_ATTN, docs/internals.md "Fused attention").
 *
 * The pattern, on the lowered ops (so scaled_dot_product_attention,
 * MultiheadAttention and hand-written forms in .dp all match, whatever
 * masks they add):
 *
 *   s  = matmul(q, kt)        q [B.., L, E], kt [B.., E, S] (any strides)
 *   s' = e_n(...e_1(s, m1)..) elementwise ops of s's shape (scale, + mask,
 *                             where(mask, s, -inf), ...), each reading the
 *                             previous value once; their other operands
 *                             are read at (b.., i, j), broadcasting
 *   p  = softmax(s', dim=-1)
 *   o  = matmul(p, v)         v [B.., S, Ev]
 *   o' = permute(o)           optional, when it keeps the last dim last
 *
 * with every intermediate used once and not a graph output, the batch dims
 * B.. equal (no broadcasting between q, kt and v), L, S, E, Ev independent
 * of the batch and E, Ev <= ATTN_MAX_HEAD. Nothing between s and o is then
 * materialised: the kernel computes o (or o') from q, kt, v and the chain's
 * other operands. */
#include "kernel.h"

#include <string.h>

static const ir_node *gnode(const ir_graph *g, int id) { return g->nodes.items[id]; }

static bool single(const ir_node *n, const bool *is_output) { return n->uses == 1 && !is_output[n->id]; }

static bool fixed(dim d) { return !d.sym; }

/* Batch dims [0, r-2) of a and b are equal. */
static bool same_batch(const shape *a, const shape *b) {
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i + 2 < a->rank; i++)
        if (a->d[i].k != b->d[i].k || a->d[i].sym != b->d[i].sym)
            return false;
    return true;
}

static bool is_ew(ir_op op) {
    op_class c = ir_op_class(op);
    return c == OC_UNARY || c == OC_BINARY || c == OC_TERNARY;
}

/* Walks back from x (the softmax's operand) through the chain to the
 * scores matmul; false when the path is not the pattern's. */
static bool chain_to_qk(const ir_graph *g, const ir_node *x, const shape *ss, const bool *is_output, attn_match *m,
                        int depth) {
    if (!single(x, is_output) || !shape_eq(&x->sh, ss) || x->dt != IR_F32)
        return false;
    if (x->op == OP_MATMUL) {
        const ir_node *q = gnode(g, x->in[0]), *kt = gnode(g, x->in[1]);
        if (!same_batch(&q->sh, ss) || !same_batch(&kt->sh, ss) || q->dt != IR_F32 || kt->dt != IR_F32)
            return false;
        int r = ss->rank;
        dim E = q->sh.d[r - 1];
        if (!fixed(E) || E.k > ATTN_MAX_HEAD || E.k < 1 || kt->sh.d[r - 2].k != E.k || kt->sh.d[r - 2].sym)
            return false;
        m->qk = (ir_node *)x;
        m->nchain = depth;
        return true;
    }
    if (!is_ew(x->op) || depth == (int)(sizeof m->chain / sizeof m->chain[0]))
        return false;
    /* the operand the chain continues through: the first that leads to the
     * matmul (where's condition never does: it is read as a mask) */
    for (int i = x->op == OP_WHERE ? 1 : 0; i < x->nin; i++) {
        const ir_node *p = gnode(g, x->in[i]);
        int dup = 0;
        for (int j = 0; j < x->nin; j++)
            dup += x->in[j] == p->id;
        if (dup != 1)
            continue; /* s * s reads the scores twice */
        if (chain_to_qk(g, p, ss, is_output, m, depth + 1)) {
            /* the chain in execution order: the op nearest the matmul first */
            m->chain[m->nchain - 1 - depth] = (ir_node *)x;
            return true;
        }
    }
    return false;
}

int *attn_find(dpc_ctx *c, const ir_graph *g, const bool *is_output, vec *out) {
    int n = g->nodes.len;
    int *of = arena_alloc(&c->arena, sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        of[i] = -1;
    /* the single use of each node, when it has one */
    int *user = arena_alloc(&c->arena, sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        user[i] = -1;
    for (int i = 0; i < n; i++) {
        const ir_node *x = gnode(g, i);
        int cnt = x->op == OP_CAT ? ir_cat_count(x) : x->nin;
        for (int j = 0; j < cnt; j++)
            user[x->op == OP_CAT ? ir_cat_operand(x, j) : x->in[j]] = i;
    }
    for (int i = 0; i < n; i++) {
        const ir_node *pv = gnode(g, i);
        if (pv->op != OP_MATMUL || pv->dt != IR_F32)
            continue;
        const ir_node *sm = gnode(g, pv->in[0]), *v = gnode(g, pv->in[1]);
        int r = pv->sh.rank;
        if (sm->op != OP_SOFTMAX || r < 2 || sm->sh.rank != r || sm->attr.ax.axis != r - 1 || !single(sm, is_output))
            continue;
        const ir_node *s = gnode(g, sm->in[0]);
        if (s->sh.rank != r || !same_batch(&v->sh, &sm->sh) || v->dt != IR_F32)
            continue;
        dim L = sm->sh.d[r - 2], S = sm->sh.d[r - 1], Ev = v->sh.d[r - 1];
        if (!fixed(L) || !fixed(S) || !fixed(Ev) || Ev.k > ATTN_MAX_HEAD || Ev.k < 1 || L.k < 1 || S.k < 1 ||
            v->sh.d[r - 2].k != S.k || v->sh.d[r - 2].sym)
            continue;
        attn_match m = {0};
        if (!chain_to_qk(g, s, &sm->sh, is_output, &m, 0))
            continue;
        m.softmax = (ir_node *)sm;
        m.pv = (ir_node *)pv;
        /* the permute back to [B, L, heads, d] that every model writes next */
        if (single(pv, is_output) && user[pv->id] >= 0) {
            const ir_node *p = gnode(g, user[pv->id]);
            if (p->op == OP_PERMUTE && p->attr.perm.perm[r - 1] == r - 1)
                m.perm = (ir_node *)p;
        }
        /* every op of the match is in one match only (a chain op could
         * otherwise be claimed by two matmuls) */
        bool taken = of[m.qk->id] >= 0;
        for (int j = 0; j < m.nchain; j++)
            taken |= of[m.chain[j]->id] >= 0;
        if (taken)
            continue;
        attn_match *keep = arena_alloc(&c->arena, sizeof *keep);
        *keep = m;
        int idx = out->len;
        vec_push(&c->arena, out, keep);
        of[m.qk->id] = of[m.softmax->id] = of[m.pv->id] = idx;
        for (int j = 0; j < m.nchain; j++)
            of[m.chain[j]->id] = idx;
        if (m.perm)
            of[m.perm->id] = idx;
    }
    return of;
}
