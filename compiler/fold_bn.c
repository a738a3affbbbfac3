/* fold_bn.c - batch norm folded into the preceding convolution or linear
 * layer (see fold_bn.h).
 *
 * The pass walks the graph once in id order and copies every node into a
 * new graph, renumbered. A folded producer and the reshapes between it and
 * its batch norm are dropped; at the batch norm's place come the ops that
 * fold the operands, the producer over them, then the reshapes again, so
 * the ids stay a topological order and the batch norm's users read the
 * same shape as before. */
#include "fold_bn.h"

#include <string.h>

#define MAX_CHAIN 4 /* reshapes between the producer and the batch norm */

typedef struct fold {
    ir_node *prod;               /* conv2d or linear */
    ir_node *chain[MAX_CHAIN];   /* reshapes from the producer's output to the batch norm's input */
    int nchain;
} fold;

typedef struct folder {
    dpc_arena *a;
    const ir_graph *g;
    ir_graph *ng;
    int *map; /* old id -> new id, -1 when dropped */
} folder;

static ir_node *old(const ir_graph *g, int id) { return g->nodes.items[id]; }
/* A parameter, or a reshape of one (Conv1d's weight viewed as Conv2d's). */
static bool is_param(const ir_graph *g, int id) {
    const ir_node *x = old(g, id);
    while (x->op == OP_RESHAPE)
        x = old(g, x->in[0]);
    return x->op == OP_PARAM;
}

static bool same_dim(dim a, dim b) { return a.k == b.k && a.sym == b.sym; }

/* The producer the batch norm bn can be folded into, or false. */
static bool find_fold(const ir_graph *g, const ir_node *bn, fold *f) {
    memset(f, 0, sizeof *f);
    for (int i = 1; i < bn->nin; i++)
        if (!is_param(g, bn->in[i])) /* statistics of the batch itself, or computed ones */
            return false;
    ir_node *x = old(g, bn->in[0]);
    ir_node *chain[MAX_CHAIN];
    int n = 0;
    while (x->op == OP_RESHAPE) {
        const ir_node *src = old(g, x->in[0]);
        if (n == MAX_CHAIN || x->uses != 1 || x->sh.rank < 2 || src->sh.rank < 2 || !same_dim(x->sh.d[0], src->sh.d[0]) ||
            !same_dim(x->sh.d[1], src->sh.d[1]))
            return false;
        chain[n++] = x;
        x = old(g, x->in[0]);
    }
    if (x->uses != 1)
        return false;
    if (x->op == OP_CONV2D) {
        if (x->sh.rank != 4)
            return false;
    } else if (x->op != OP_LINEAR || x->sh.rank != 2)
        return false;
    for (int i = 1; i < x->nin; i++)
        if (!is_param(g, x->in[i]))
            return false;
    /* the batch norm's channels are the producer's output channels */
    if (x->sh.d[1].sym || old(g, bn->in[1])->sh.rank != 1 || old(g, bn->in[1])->sh.d[0].k != x->sh.d[1].k ||
        old(g, x->in[1])->sh.d[0].k != x->sh.d[1].k)
        return false;
    f->prod = x;
    f->nchain = n;
    for (int i = 0; i < n; i++) /* producer first */
        f->chain[i] = chain[n - 1 - i];
    return true;
}

static ir_node *add(folder *fo, ir_op op, const ir_node *like, const shape *sh) {
    ir_node *n = arena_alloc(fo->a, sizeof *n);
    n->id = fo->ng->nodes.len;
    n->op = op;
    n->at = like->at;
    n->scope = like->scope;
    n->dt = IR_F32;
    n->param_index = n->input_index = -1;
    n->sh = *sh;
    vec_push(fo->a, &fo->ng->nodes, n);
    return n;
}

static ir_node *op2(folder *fo, ir_op op, const ir_node *like, const shape *sh, const ir_node *x, const ir_node *y) {
    ir_node *n = add(fo, op, like, sh);
    n->in[n->nin++] = x->id;
    if (y)
        n->in[n->nin++] = y->id;
    return n;
}

/* The copy of old node o, its operands renumbered. */
static ir_node *copy_node(folder *fo, const ir_node *o) {
    ir_node *n = arena_alloc(fo->a, sizeof *n);
    *n = *o;
    n->id = fo->ng->nodes.len;
    for (int i = 0; i < n->nin; i++)
        n->in[i] = fo->map[o->in[i]];
    memset(&n->more, 0, sizeof n->more);
    for (int i = 0; i < o->more.len; i++)
        vec_push(fo->a, &n->more, (void *)(intptr_t)fo->map[(int)(intptr_t)o->more.items[i]]);
    vec_push(fo->a, &fo->ng->nodes, n);
    fo->map[o->id] = n->id;
    return n;
}

static ir_node *newn(folder *fo, int old_id) { return fo->ng->nodes.items[fo->map[old_id]]; }

/* The folded producer and its reshapes, at the batch norm's place. */
static void emit_fold(folder *fo, const ir_node *bn, const fold *f) {
    const ir_node *p = f->prod;
    ir_node *w = newn(fo, p->in[1]);
    ir_node *mean = newn(fo, bn->in[1]), *var = newn(fo, bn->in[2]);
    ir_node *gamma = bn->nin > 3 ? newn(fo, bn->in[3]) : NULL, *beta = bn->nin > 4 ? newn(fo, bn->in[4]) : NULL;
    ir_node *bias = p->nin > 2 ? newn(fo, p->in[2]) : NULL;
    shape c = {1, {p->sh.d[1]}}, scalar = {0, {{0, false}}};
    ir_node *eps = add(fo, OP_CONST, bn, &scalar);
    eps->attr.leaf.value = bn->attr.norm.eps;
    ir_node *s = op2(fo, OP_RSQRT, bn, &c, op2(fo, OP_ADD, bn, &c, var, eps), NULL);
    if (gamma)
        s = op2(fo, OP_MUL, bn, &c, s, gamma);
    shape ws = {w->sh.rank, {p->sh.d[1]}};
    for (int i = 1; i < ws.rank; i++)
        ws.d[i] = (dim){1, false};
    ir_node *sw = op2(fo, OP_RESHAPE, bn, &ws, s, NULL);
    ir_node *w2 = op2(fo, OP_MUL, bn, &w->sh, w, sw);
    ir_node *b2 = bias ? op2(fo, OP_SUB, bn, &c, bias, mean) : op2(fo, OP_NEG, bn, &c, mean, NULL);
    b2 = op2(fo, OP_MUL, bn, &c, b2, s);
    if (beta)
        b2 = op2(fo, OP_ADD, bn, &c, b2, beta);
    ir_node *np = copy_node(fo, p);
    np->in[1] = w2->id;
    np->in[2] = b2->id;
    np->nin = 3;
    for (int i = 0; i < f->nchain; i++)
        copy_node(fo, f->chain[i]);
    fo->map[bn->id] = fo->ng->nodes.len - 1;
}

static void remap_vec(folder *fo, vec *dst, const vec *src) {
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < src->len; i++)
        vec_push(fo->a, dst, newn(fo, ((const ir_node *)src->items[i])->id));
}

ir_graph *fold_bn(dpc_arena *a, ir_graph *g, int *nfolded) {
    int n = g->nodes.len, count = 0;
    fold *folds = arena_alloc(a, sizeof *folds * (size_t)(n + 1));
    bool *drop = arena_alloc(a, (size_t)n + 1);
    for (int i = 0; i < n; i++) {
        const ir_node *x = old(g, i);
        if (x->op != OP_BATCHNORM || !find_fold(g, x, &folds[i]))
            continue;
        drop[folds[i].prod->id] = true;
        for (int k = 0; k < folds[i].nchain; k++)
            drop[folds[i].chain[k]->id] = true;
        count++;
    }
    if (nfolded)
        *nfolded = count;
    if (!count)
        return g;
    ir_graph *ng = arena_alloc(a, sizeof *ng);
    *ng = *g;
    memset(&ng->nodes, 0, sizeof ng->nodes);
    folder fo = {.a = a, .g = g, .ng = ng, .map = arena_alloc(a, sizeof(int) * (size_t)(n + 1))};
    for (int i = 0; i < n; i++)
        fo.map[i] = -1;
    for (int i = 0; i < n; i++) {
        const ir_node *x = old(g, i);
        if (drop[i])
            continue;
        if (folds[i].prod)
            emit_fold(&fo, x, &folds[i]);
        else
            copy_node(&fo, x);
    }
    remap_vec(&fo, &ng->inputs, &g->inputs);
    remap_vec(&fo, &ng->scalars, &g->scalars);
    remap_vec(&fo, &ng->outputs, &g->outputs);
    /* uses, counted again over the new graph (a graph output is a use) */
    for (int i = 0; i < ng->nodes.len; i++)
        ((ir_node *)ng->nodes.items[i])->uses = 0;
    for (int i = 0; i < ng->nodes.len; i++) {
        const ir_node *x = ng->nodes.items[i];
        int cnt = x->op == OP_CAT ? ir_cat_count(x) : x->nin;
        for (int j = 0; j < cnt; j++)
            ((ir_node *)ng->nodes.items[x->op == OP_CAT ? ir_cat_operand(x, j) : x->in[j]])->uses++;
    }
    for (int i = 0; i < ng->outputs.len; i++)
        ((ir_node *)ng->outputs.items[i])->uses++;
    return ng;
}
