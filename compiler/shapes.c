/* shapes.c - the IR builder's node constructors and the shape rules of the
 * tensor ops (NumPy broadcasting, PyTorch's rules for windows, reshape,
 * reduce, matmul, cat, softmax, layer_norm), which the builtin modules
 * (nn_*.c), the forward functions (functions.c) and the operators
 * (irbuild.c) lower through. Shape errors name both shapes. */
#include "irbuild.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------ nodes, values */

const char *sv_kind_name(const sv *v) {
    switch (v->k) {
    case SV_NONE: return "None";
    case SV_TENSOR: return "a tensor";
    case SV_NUM: return v->v.kind == V_INT ? "an int" : v->v.kind == V_BOOL ? "a bool" : v->v.kind == V_STR ? "a string" : "a float";
    case SV_MODULE: return "a module";
    case SV_TUPLE: return "a tuple";
    case SV_LIST: return "a list";
    case SV_BATCH: return "the batch size";
    case SV_DTYPE: return "a dtype";
    }
    return "?";
}

/* Elements per sample, counting a 0 dim as 1 (so that any partial product
 * is bounded too); false past DPC_MAX_NUMEL. */
bool numel_ok(const shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i].k < 0 || __builtin_mul_overflow(n, s->d[i].k > 0 ? s->d[i].k : 1, &n) || n > DPC_MAX_NUMEL)
            return false;
    return true;
}


DPC_NOINLINE char *shp(builder *b, const shape *s) {
    char buf[256];
    shape_str(s, b->batch, buf, sizeof buf);
    return arena_strdup(&b->c->arena, buf);
}

DPC_NOINLINE bool check_size(builder *b, const ir_node *n, loc at, const char *what) {
    if (numel_ok(&n->sh))
        return true;
    error_at(b->c, at, "%s: the result %s is too large: more than 2^40 elements%s", what, shp(b, &n->sh),
             b->batch ? " per sample" : "");
    return false;
}

ir_node *mk(builder *b, ir_op op, loc at, const char *scope) {
    if (b->g->nodes.len >= MAX_NODES) {
        error_at(b->c, at, "the graph is too large (limit %d operations)", MAX_NODES);
        return NULL;
    }
    ir_node *n = ir_new(b->g, op, at);
    n->scope = scope;
    n->dt = IR_F32;
    return n;
}

void add_in(ir_node *n, ir_node *x) {
    n->in[n->nin++] = x->id;
    x->uses++;
}

/* A new node of op reading x, y, z in that order; a NULL operand (a module
 * without bias, a unary op) is skipped. */
ir_node *mk_op(builder *b, ir_op op, loc at, const char *scope, ir_node *x, ir_node *y, ir_node *z) {
    ir_node *n = mk(b, op, at, scope);
    if (!n)
        return NULL;
    ir_node *in[3] = {x, y, z};
    for (int i = 0; i < 3; i++)
        if (in[i])
            add_in(n, in[i]);
    return n;
}

static ir_node *const_node(builder *b, double v, loc at) {
    ir_node *n = mk(b, OP_CONST, at, NULL);
    if (n)
        n->attr.leaf.value = v;
    return n;
}

bool num_of(const sv *v, double *d) {
    if (v->k != SV_NUM)
        return false;
    if (v->v.kind == V_INT || v->v.kind == V_BOOL)
        *d = (double)v->v.i;
    else if (v->v.kind == V_FLOAT)
        *d = v->v.f;
    else
        return false;
    return true;
}

/* The batch name as a number: x.shape[0] of PyTorch's forward, so under
 * DataParallel the replica's own batch size. One leaf serves every use; the
 * kernels read N at run time. */
ir_node *batch_value(builder *b, loc at) {
    if (!b->batch_value) {
        b->batch_value = mk(b, OP_BATCH, at, NULL);
        if (b->batch_value)
            b->batch_value->name = b->batch;
    }
    return b->batch_value;
}

/* A tensor operand: tensors as they are, numbers (and the batch size) as
 * rank-0 leaves. */
ir_node *as_tensor(builder *b, const sv *v, loc at, const char *what) {
    double d;
    if (v->k == SV_TENSOR)
        return v->t;
    if (v->k == SV_BATCH)
        return batch_value(b, at);
    if (num_of(v, &d))
        return const_node(b, d, at);
    error_at(b->c, at, "%s needs a tensor, got %s", what, sv_kind_name(v));
    return NULL;
}

bool want_tensor(builder *b, const sv *v, loc at, const char *what, ir_node **t) {
    if (v->k != SV_TENSOR) {
        error_at(b->c, at, "%s expects a tensor, got %s", what, sv_kind_name(v));
        return false;
    }
    if (v->t->dt != IR_F32) {
        error_at(b->c, at, "%s expects a float tensor, got %s tensor%s", what,
                 v->t->dt == IR_BOOL ? "a bool" : "an integer",
                 v->t->dt == IR_BOOL ? " (convert it with .float())" : "");
        return false;
    }
    *t = v->t;
    return true;
}

bool want_int(builder *b, const sv *v, loc at, const char *what, int64_t *out) {
    if (v->k == SV_BATCH) {
        error_at(b->c, at, "%s must be an int known when compiling; the batch size '%s' is only known at run time",
                 what, b->batch);
        return false;
    }
    if (v->k != SV_NUM || v->v.kind != V_INT) {
        error_at(b->c, at, "%s must be an int, got %s", what, sv_kind_name(v));
        return false;
    }
    *out = v->v.i;
    return true;
}

/* Normalises a possibly negative dim against rank, PyTorch style. */
bool norm_dim(builder *b, int64_t d, int rank, loc at, int *out) {
    int r = rank == 0 ? 1 : rank;
    if (d < -r || d >= r) {
        error_at(b->c, at, "dimension out of range (expected to be in range of [%d, %d], but got %lld)", -r, r - 1,
                 (long long)d);
        return false;
    }
    *out = (int)(d < 0 ? d + r : d);
    return true;
}

ir_node *param_node(builder *b, inst *owner, const char *leaf, loc at) {
    const char *key = owner->path[0] ? arena_printf(&b->c->arena, "%s.%s", owner->path, leaf) : leaf;
    for (int i = 0; i < b->m->params.len; i++) {
        param_entry *p = b->m->params.items[i];
        if (strcmp(p->key, key) != 0)
            continue;
        if (!b->param_nodes[i]) {
            ir_node *n = mk(b, OP_PARAM, p->owner->at, owner->path);
            if (!n)
                return NULL;
            n->name = p->key;
            n->param_index = i;
            n->sh.rank = p->rank;
            for (int k = 0; k < p->rank; k++)
                n->sh.d[k] = (dim){p->shape[k], false};
            b->param_nodes[i] = n;
        }
        return b->param_nodes[i];
    }
    return NULL; /* no such parameter (e.g. bias=False) */
}

/* --------------------------------------------------- shape rules */

bool broadcast(builder *b, const shape *x, const shape *y, loc at, const char *what, shape *out) {
    int r = x->rank > y->rank ? x->rank : y->rank;
    out->rank = r;
    for (int i = 0; i < r; i++) {
        int ix = x->rank - r + i, iy = y->rank - r + i;
        dim dx = ix >= 0 ? x->d[ix] : (dim){1, false};
        dim dy = iy >= 0 ? y->d[iy] : (dim){1, false};
        if (dx.k == dy.k && dx.sym == dy.sym)
            out->d[i] = dx;
        else if (!dx.sym && dx.k == 1)
            out->d[i] = dy;
        else if (!dy.sym && dy.k == 1)
            out->d[i] = dx;
        else {
            error_at(b->c, at, "%s: shapes %s and %s cannot be broadcast together", what, shp(b, x), shp(b, y));
            return false;
        }
    }
    return true;
}

ir_node *elementwise(builder *b, ir_op op, ir_node *x, ir_node *y, loc at, const char *scope) {
    shape s;
    if (y) {
        static const char *const what[OP_COUNT] = {[OP_ADD] = "'+'", [OP_SUB] = "'-'", [OP_MUL] = "'*'", [OP_DIV] = "'/'",
                                                   [OP_POW] = "'**'", [OP_CLAMP_MIN] = "clamp", [OP_CLAMP_MAX] = "clamp"};
        if (!broadcast(b, &x->sh, &y->sh, at, what[op] ? what[op] : ir_op_name(op), &s))
            return NULL;
        if (x->dt == IR_BOOL || y->dt == IR_BOOL) {
            error_at(b->c, at, "arithmetic on a bool tensor: convert it first (.float())");
            return NULL;
        }
    } else
        s = x->sh;
    ir_node *n = mk_op(b, op, at, scope, x, y, NULL);
    if (!n)
        return NULL;
    n->sh = s;
    return n;
}

/* Shapes for conv and pools: one spatial size. */
int64_t window_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    if (span < 0)
        return 0;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return o;
}

/* Sets H and W of n->sh to the output sizes of the 2-D window over x
 * (kernel k, stride s, padding p, dilation d; ceil mode when `ceil`, which
 * a conv passes false). extra[i] is trailing padding past p[i]
 * (conv's padding="same" with an even kernel), counted as that many more
 * input rows. Conv and the pools share it so that they agree on the sizes
 * and word the error alike: "<whom>: input <shape> is too small for <what>". */
bool window_out(builder *b, ir_node *n, const ir_node *x, const int64_t *k, const int64_t *s, const int64_t *p,
                       const int64_t *d, const int64_t *extra, bool ceil, loc at, const char *whom,
                       const char *what) {
    for (int i = 0; i < 2; i++) {
        int64_t o = window_size(x->sh.d[2 + i].k + extra[i], k[i], s[i], p[i], d[i], ceil);
        if (o <= 0) {
            error_at(b->c, at, "%s: input %s is too small for %s", whom, shp(b, &x->sh), what);
            return false;
        }
        n->sh.d[2 + i] = (dim){o, false};
    }
    return true;
}

bool need_concrete(builder *b, const ir_node *x, int from, loc at, const char *what) {
    for (int i = from; i < x->sh.rank; i++)
        if (x->sh.d[i].sym) {
            error_at(b->c, at, "%s: dimension %d of %s depends on the batch size", what, i, shp(b, &x->sh));
            return false;
        }
    return true;
}

/* "fc1 expects [N, 80], got [N, 320]": the actual shape with the dims the
 * module constrains replaced by what it wants. */
void expects(builder *b, loc at, const char *who, const shape *got, int from, const int64_t *want, int nwant) {
    shape e = *got;
    if (e.rank < from + nwant)
        e.rank = from + nwant;
    for (int i = 0; i < nwant; i++)
        e.d[from + i] = (dim){want[i], false};
    error_at(b->c, at, "%s expects %s, got %s", who, shp(b, &e), shp(b, got));
}

const char *who(const inst *m) { return m->path[0] ? m->path : m->type_name; }

/* ------------------------------------------------------ tensor ops */

ir_node *unary(builder *b, ir_op op, ir_node *x, loc at, const char *scope) {
    return elementwise(b, op, x, NULL, at, scope);
}

ir_node *softmax(builder *b, ir_op op, ir_node *x, int64_t d, loc at, const char *scope) {
    ir_node *n = mk(b, op, at, scope);
    if (!n || !norm_dim(b, d, x->sh.rank, at, &n->attr.ax.axis))
        return NULL;
    add_in(n, x);
    n->sh = x->sh;
    return n;
}

ir_node *reshape_to(builder *b, ir_node *x, const shape *s, loc at, const char *scope) {
    if (shape_eq(&x->sh, s))
        return x;
    ir_node *n = mk_op(b, OP_RESHAPE, at, scope, x, NULL, NULL);
    if (!n)
        return NULL;
    n->sh = *s;
    n->dt = x->dt;
    return n;
}

ir_node *flatten(builder *b, ir_node *x, int64_t sd, int64_t ed, loc at, const char *scope) {
    int s, e;
    if (x->sh.rank == 0) {
        shape one = {1, {{1, false}}};
        return reshape_to(b, x, &one, at, scope);
    }
    if (!norm_dim(b, sd, x->sh.rank, at, &s) || !norm_dim(b, ed, x->sh.rank, at, &e))
        return NULL;
    if (s > e) {
        error_at(b->c, at, "flatten() has invalid args: start_dim cannot come after end_dim");
        return NULL;
    }
    shape out = {0};
    for (int i = 0; i < s; i++)
        out.d[out.rank++] = x->sh.d[i];
    dim merged = {1, false};
    for (int i = s; i <= e; i++) {
        if (merged.sym && x->sh.d[i].sym) {
            error_at(b->c, at, "flatten: cannot merge the batch dimension twice");
            return NULL;
        }
        if (__builtin_mul_overflow(merged.k, x->sh.d[i].k, &merged.k)) {
            error_at(b->c, at, "flatten: the size of %s overflows", shp(b, &x->sh));
            return NULL;
        }
        merged.sym |= x->sh.d[i].sym;
    }
    out.d[out.rank++] = merged;
    for (int i = e + 1; i < x->sh.rank; i++)
        out.d[out.rank++] = x->sh.d[i];
    return reshape_to(b, x, &out, at, scope);
}

ir_node *layernorm(builder *b, ir_node *x, const int64_t *ns, int nd, ir_node *w, ir_node *bias, double eps,
                          loc at, const char *scope, const char *whom) {
    bool bad = x->sh.rank < nd;
    for (int i = 0; i < nd && !bad; i++) {
        const dim *d = &x->sh.d[x->sh.rank - nd + i];
        bad = d->sym || d->k != ns[i];
    }
    if (bad) {
        expects(b, at, whom, &x->sh, x->sh.rank >= nd ? x->sh.rank - nd : 0, ns, nd);
        return NULL;
    }
    ir_node *n = mk_op(b, OP_LAYERNORM, at, scope, x, w, bias);
    if (!n)
        return NULL;
    n->attr.norm = (norm_attr){.eps = eps, .dims = nd, .has_weight = w != NULL, .has_bias = bias != NULL};
    n->sh = x->sh;
    return n;
}

ir_node *reduce(builder *b, ir_op op, ir_node *x, const int64_t *dims, int nd, bool keep, loc at) {
    /* several dims reduce one after another, highest first */
    int norm[IR_MAX_RANK];
    for (int i = 0; i < nd; i++)
        if (!norm_dim(b, dims[i], x->sh.rank, at, &norm[i]))
            return NULL;
    for (int i = 0; i < nd; i++)
        for (int j = i + 1; j < nd; j++)
            if (norm[j] > norm[i]) {
                int t = norm[i];
                norm[i] = norm[j];
                norm[j] = t;
            } else if (norm[j] == norm[i]) {
                error_at(b->c, at, "dim %d appears multiple times in the list of dims", norm[i]);
                return NULL;
            }
    ir_node *cur = x;
    for (int i = 0; i < nd; i++) {
        ir_node *n = mk(b, op, at, NULL);
        if (!n)
            return NULL;
        add_in(n, cur);
        n->attr.ax = (axis_attr){.axis = norm[i], .keepdim = keep};
        n->sh = cur->sh;
        if (cur->sh.rank == 0)
            ;
        else if (keep)
            n->sh.d[norm[i]] = (dim){1, false};
        else {
            for (int k = norm[i]; k + 1 < n->sh.rank; k++)
                n->sh.d[k] = n->sh.d[k + 1];
            n->sh.rank--;
        }
        cur = n;
    }
    return cur;
}

ir_node *permute(builder *b, ir_node *x, const int *perm, loc at) {
    bool ident = true;
    for (int i = 0; i < x->sh.rank; i++)
        ident &= perm[i] == i;
    if (ident)
        return x;
    ir_node *n = mk_op(b, OP_PERMUTE, at, NULL, x, NULL, NULL);
    if (!n)
        return NULL;
    n->dt = x->dt;
    n->sh.rank = x->sh.rank;
    for (int i = 0; i < x->sh.rank; i++) {
        n->attr.perm.perm[i] = perm[i];
        n->sh.d[i] = x->sh.d[perm[i]];
    }
    return n;
}

ir_node *matmul(builder *b, ir_node *x, ir_node *y, loc at) {
    if (x->sh.rank == 0 || y->sh.rank == 0) {
        error_at(b->c, at, "matmul: both arguments need to be at least 1D");
        return NULL;
    }
    /* torch.matmul: 1-D operands are promoted, batch dims broadcast */
    shape xs = x->sh, ys = y->sh;
    bool xv = xs.rank == 1, yv = ys.rank == 1;
    if (xv) {
        xs.rank = 2;
        xs.d[1] = xs.d[0];
        xs.d[0] = (dim){1, false};
    }
    if (yv) {
        ys.rank = 2;
        ys.d[1] = (dim){1, false};
    }
    dim k1 = xs.d[xs.rank - 1], k2 = ys.d[ys.rank - 2];
    if (k1.k != k2.k || k1.sym != k2.sym) {
        error_at(b->c, at, "matmul: shapes %s and %s cannot be multiplied", shp(b, &x->sh), shp(b, &y->sh));
        return NULL;
    }
    /* k1.sym: the product sums over the batch (transpose(x) @ x); like a
     * reduction over the batch dim, each replica sums over its own chunk */
    shape bx = xs, by = ys, bs;
    bx.rank -= 2;
    by.rank -= 2;
    if (!broadcast(b, &bx, &by, at, "matmul", &bs))
        return NULL;
    ir_node *n = mk_op(b, OP_MATMUL, at, NULL, x, y, NULL);
    if (!n)
        return NULL;
    n->sh = bs;
    if (!xv)
        n->sh.d[n->sh.rank++] = xs.d[xs.rank - 2];
    if (!yv)
        n->sh.d[n->sh.rank++] = ys.d[ys.rank - 1];
    return n;
}

ir_node *cat(builder *b, const sv *list, int64_t d, loc at) {
    if (list->k != SV_LIST && list->k != SV_TUPLE) {
        error_at(b->c, at, "cat() expects a list of tensors, got %s", sv_kind_name(list));
        return NULL;
    }
    if (list->n == 0) {
        error_at(b->c, at, "cat() expects a non-empty list of tensors");
        return NULL;
    }
    ir_node *first = NULL;
    for (int i = 0; i < list->n; i++)
        if (list->items[i].k != SV_TENSOR || list->items[i].t->dt != IR_F32) {
            error_at(b->c, at, "cat() expects float tensors, element %d is %s", i, sv_kind_name(&list->items[i]));
            return NULL;
        }
    first = list->items[0].t;
    if (first->sh.rank == 0) {
        error_at(b->c, at, "cat(): zero-dimensional tensors cannot be concatenated");
        return NULL;
    }
    int ax;
    if (!norm_dim(b, d, first->sh.rank, at, &ax))
        return NULL;
    ir_node *n = mk(b, OP_CAT, at, NULL);
    if (!n)
        return NULL;
    n->attr.ax.axis = ax;
    n->sh = first->sh;
    n->sh.d[ax] = (dim){0, first->sh.d[ax].sym};
    for (int i = 0; i < list->n; i++) {
        ir_node *t = list->items[i].t;
        bool ok = t->sh.rank == first->sh.rank;
        for (int k = 0; ok && k < t->sh.rank; k++)
            if (k != ax)
                ok = t->sh.d[k].k == first->sh.d[k].k && t->sh.d[k].sym == first->sh.d[k].sym;
        if (!ok || t->sh.d[ax].sym != first->sh.d[ax].sym) {
            error_at(b->c, at, "cat(): sizes of tensors must match except in dimension %d, got %s and %s", ax,
                     shp(b, &first->sh), shp(b, &t->sh));
            return NULL;
        }
        if (__builtin_add_overflow(n->sh.d[ax].k, t->sh.d[ax].k, &n->sh.d[ax].k) || n->sh.d[ax].k > DPC_MAX_NUMEL) {
            error_at(b->c, at, "cat(): the result is too large: more than 2^40 elements");
            return NULL;
        }
        if (i < IR_MAX_IN)
            add_in(n, t);
        else {
            vec_push(b->g->arena, &n->more, (void *)(intptr_t)t->id);
            t->uses++;
        }
    }
    return n;
}
