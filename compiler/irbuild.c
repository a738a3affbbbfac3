/* irbuild.c - builds the graph IR by interpreting forward symbolically.
 *
 * The root module's forward is run with symbolic tensors: each tensor
 * operation appends one IR node, its shape inferred on the spot (NumPy
 * broadcasting, PyTorch's shape rules, the batch dim kept symbolic). A call
 * of a user module inlines its forward; `for blk in layers` unrolls. Shape
 * errors name both shapes, as `fc1 expects [N, 80], got [N, 320]`. */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_CALL_DEPTH 64
#define MAX_NODES 1000000

/* SV_BATCH is the batch name used as a value: a size for reshape(), or in
 * arithmetic the run-time batch size (an OP_BATCH leaf). */
typedef enum sv_kind { SV_NONE, SV_TENSOR, SV_NUM, SV_MODULE, SV_TUPLE, SV_LIST, SV_BATCH } sv_kind;

typedef struct sv {
    sv_kind k;
    ir_node *t;     /* SV_TENSOR */
    val v;          /* SV_NUM: V_INT, V_FLOAT, V_BOOL; strings for keyword args */
    inst *mod;      /* SV_MODULE */
    int n;          /* SV_TUPLE, SV_LIST */
    struct sv *items;
    bool poison; /* the value of a statement that failed: using it reports nothing more */
} sv;

typedef struct binding {
    const char *name;
    sv v;
} binding;

/* One activation of a forward: its module and local variables. */
typedef struct frame {
    inst *self;
    vec locals; /* binding* */
    bool returned;
    sv ret;
} frame;

typedef struct builder {
    dpc_ctx *c;
    model *m;
    ir_graph *g;
    int depth;             /* user module calls in progress */
    int nest;              /* recursion levels in progress, through calls too */
    bool nest_error;       /* DPC_MAX_EVAL_NEST was reported */
    ir_node **param_nodes; /* per model.params index */
    const char *batch;     /* the batch dim's name */
    ir_node *batch_value;  /* the OP_BATCH leaf, made on first use */
} builder;

static bool eval(builder *b, frame *f, const node *n, sv *out);
static bool exec_block(builder *b, frame *f, const vec *body);
/* The arguments of a call: values, keywords (NULL when positional), where
 * each value is and where each keyword is (the value when positional). */
typedef struct fargs {
    int n;
    sv *v;
    const char **names;
    loc *at;
    loc *kw_at;
} fargs;

static bool call_module(builder *b, inst *mod, const fargs *a, loc call_at, sv *out);
static ir_node *reshape_to(builder *b, ir_node *x, const shape *s, loc at, const char *scope);
static ir_node *reduce(builder *b, ir_op op, ir_node *x, const int64_t *dims, int nd, bool keep, loc at);

/* ----------------------------------------------------------- helpers */

static const char *sv_kind_name(const sv *v) {
    switch (v->k) {
    case SV_NONE: return "None";
    case SV_TENSOR: return "a tensor";
    case SV_NUM: return v->v.kind == V_INT ? "an int" : v->v.kind == V_BOOL ? "a bool" : v->v.kind == V_STR ? "a string" : "a float";
    case SV_MODULE: return "a module";
    case SV_TUPLE: return "a tuple";
    case SV_LIST: return "a list";
    case SV_BATCH: return "the batch size";
    }
    return "?";
}

/* One more level of recursion (an expression, a statement, a module call):
 * false, reported once, past DPC_MAX_EVAL_NEST levels in all. */
static bool enter(builder *b, loc at) {
    if (b->nest >= DPC_MAX_EVAL_NEST) {
        if (!b->nest_error)
            error_at(b->c, at, "module calls and expressions nested too deeply (limit %d levels in all)",
                     DPC_MAX_EVAL_NEST);
        b->nest_error = true;
        return false;
    }
    b->nest++;
    return true;
}

/* Elements per sample, counting a 0 dim as 1 (so that any partial product
 * is bounded too); false past DPC_MAX_NUMEL. */
static bool numel_ok(const shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i].k < 0 || __builtin_mul_overflow(n, s->d[i].k > 0 ? s->d[i].k : 1, &n) || n > DPC_MAX_NUMEL)
            return false;
    return true;
}

static DPC_NOINLINE bool check_size(builder *b, const ir_node *n, loc at, const char *what);

static DPC_NOINLINE char *shp(builder *b, const shape *s) {
    char buf[256];
    shape_str(s, b->batch, buf, sizeof buf);
    return arena_strdup(&b->c->arena, buf);
}

static DPC_NOINLINE bool check_size(builder *b, const ir_node *n, loc at, const char *what) {
    if (numel_ok(&n->sh))
        return true;
    error_at(b->c, at, "%s: the result %s is too large: more than 2^40 elements%s", what, shp(b, &n->sh),
             b->batch ? " per sample" : "");
    return false;
}

static ir_node *mk(builder *b, ir_op op, loc at, const char *scope) {
    if (b->g->nodes.len >= MAX_NODES) {
        error_at(b->c, at, "the graph is too large (limit %d operations)", MAX_NODES);
        return NULL;
    }
    ir_node *n = ir_new(b->g, op, at);
    n->scope = scope;
    n->dt = IR_F32;
    return n;
}

static void add_in(ir_node *n, ir_node *x) {
    n->in[n->nin++] = x->id;
    x->uses++;
}

/* A new node of op reading x, y, z in that order; a NULL operand (a module
 * without bias, a unary op) is skipped. */
static ir_node *mk_op(builder *b, ir_op op, loc at, const char *scope, ir_node *x, ir_node *y, ir_node *z) {
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

static bool num_of(const sv *v, double *d) {
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
static ir_node *batch_value(builder *b, loc at) {
    if (!b->batch_value) {
        b->batch_value = mk(b, OP_BATCH, at, NULL);
        if (b->batch_value)
            b->batch_value->name = b->batch;
    }
    return b->batch_value;
}

/* A tensor operand: tensors as they are, numbers (and the batch size) as
 * rank-0 leaves. */
static ir_node *as_tensor(builder *b, const sv *v, loc at, const char *what) {
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

static bool want_tensor(builder *b, const sv *v, loc at, const char *what, ir_node **t) {
    if (v->k != SV_TENSOR) {
        error_at(b->c, at, "%s expects a tensor, got %s", what, sv_kind_name(v));
        return false;
    }
    if (v->t->dt != IR_F32) {
        error_at(b->c, at, "%s expects a float tensor, got an integer tensor", what);
        return false;
    }
    *t = v->t;
    return true;
}

static bool want_int(builder *b, const sv *v, loc at, const char *what, int64_t *out) {
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
static bool norm_dim(builder *b, int64_t d, int rank, loc at, int *out) {
    int r = rank == 0 ? 1 : rank;
    if (d < -r || d >= r) {
        error_at(b->c, at, "dimension out of range (expected to be in range of [%d, %d], but got %lld)", -r, r - 1,
                 (long long)d);
        return false;
    }
    *out = (int)(d < 0 ? d + r : d);
    return true;
}

static ir_node *param_node(builder *b, inst *owner, const char *leaf, loc at) {
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

static bool broadcast(builder *b, const shape *x, const shape *y, loc at, const char *what, shape *out) {
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

static ir_node *elementwise(builder *b, ir_op op, ir_node *x, ir_node *y, loc at, const char *scope) {
    shape s;
    if (y) {
        static const char *const what[] = {[OP_ADD] = "'+'", [OP_SUB] = "'-'", [OP_MUL] = "'*'", [OP_DIV] = "'/'"};
        if (!broadcast(b, &x->sh, &y->sh, at, what[op], &s))
            return NULL;
        if (x->dt != IR_F32 || y->dt != IR_F32) {
            error_at(b->c, at, "arithmetic on integer tensors is not supported");
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
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
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
static bool window_out(builder *b, ir_node *n, const ir_node *x, const int64_t *k, const int64_t *s, const int64_t *p,
                       const int64_t *d, const int64_t *extra, bool ceil, loc at, const char *whom,
                       const char *what) {
    for (int i = 0; i < 2; i++) {
        int64_t o = pool_out(x->sh.d[2 + i].k + extra[i], k[i], s[i], p[i], d[i], ceil);
        if (o <= 0) {
            error_at(b->c, at, "%s: input %s is too small for %s", whom, shp(b, &x->sh), what);
            return false;
        }
        n->sh.d[2 + i] = (dim){o, false};
    }
    return true;
}

static bool need_concrete(builder *b, const ir_node *x, int from, loc at, const char *what) {
    for (int i = from; i < x->sh.rank; i++)
        if (x->sh.d[i].sym) {
            error_at(b->c, at, "%s: dimension %d of %s depends on the batch size", what, i, shp(b, &x->sh));
            return false;
        }
    return true;
}

/* "fc1 expects [N, 80], got [N, 320]": the actual shape with the dims the
 * module constrains replaced by what it wants. */
static void expects(builder *b, loc at, const char *who, const shape *got, int from, const int64_t *want, int nwant) {
    shape e = *got;
    if (e.rank < from + nwant)
        e.rank = from + nwant;
    for (int i = 0; i < nwant; i++)
        e.d[from + i] = (dim){want[i], false};
    error_at(b->c, at, "%s expects %s, got %s", who, shp(b, &e), shp(b, got));
}

static const char *who(const inst *m) { return m->path[0] ? m->path : m->type_name; }

/* ------------------------------------------------- builtin modules */

static ir_node *op_linear(builder *b, inst *m, ir_node *x, loc at) {
    int64_t in = inst_int(m, 0), out = inst_int(m, 1);
    if (x->sh.rank < 1 || x->sh.d[x->sh.rank - 1].sym || x->sh.d[x->sh.rank - 1].k != in) {
        expects(b, at, who(m), &x->sh, x->sh.rank ? x->sh.rank - 1 : 0, &in, 1);
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    ir_node *n = mk_op(b, OP_LINEAR, at, m->path, x, w, bias);
    if (!n)
        return NULL;
    n->sh = x->sh;
    n->sh.d[n->sh.rank - 1] = (dim){out, false};
    return n;
}

static bool want_4d(builder *b, inst *m, ir_node *x, loc at, int64_t channels) {
    if (x->sh.rank != 4) {
        error_at(b->c, at, "%s expects a 4-D input [N, C, H, W], got %s", who(m), shp(b, &x->sh));
        return false;
    }
    if (channels >= 0 && (x->sh.d[1].sym || x->sh.d[1].k != channels)) {
        expects(b, at, who(m), &x->sh, 1, &channels, 1);
        return false;
    }
    return need_concrete(b, x, 1, at, who(m));
}

static ir_node *op_conv(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_4d(b, m, x, at, inst_int(m, 0)))
        return NULL;
    int64_t k[2], s[2], d[2], p[2] = {0, 0}, extra[2] = {0, 0};
    inst_pair(m, 2, k), inst_pair(m, 3, s), inst_pair(m, 5, d);
    const val *pv = &m->args[4];
    if (pv->kind == V_STR) {
        /* "same": PyTorch pads total = dilation * (kernel - 1), total / 2
         * before; an odd total puts the extra row/column after (bottom,
         * right). The kernels read out-of-range input as zero, so only the
         * leading padding and the output size need to know. */
        if (strcmp(pv->s, "same") == 0)
            for (int i = 0; i < 2; i++) {
                int64_t total = d[i] * (k[i] - 1);
                p[i] = total / 2;
                extra[i] = total % 2;
            }
    } else
        inst_pair(m, 4, p);
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    ir_node *n = mk_op(b, OP_CONV2D, at, m->path, x, w, bias);
    if (!n)
        return NULL;
    n->attr.conv = (conv_attr){.stride = {s[0], s[1]},
                               .pad = {p[0], p[1], p[0] + extra[0], p[1] + extra[1]},
                               .dil = {d[0], d[1]},
                               .groups = inst_int(m, 6)};
    n->sh = x->sh;
    n->sh.d[1] = (dim){inst_int(m, 1), false};
    char what[64];
    snprintf(what, sizeof what, "kernel_size (%lld, %lld)", (long long)k[0], (long long)k[1]);
    return window_out(b, n, x, k, s, p, d, extra, false, at, who(m), what) ? n : NULL;
}

static ir_node *op_pool(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_4d(b, m, x, at, -1))
        return NULL;
    bool maxp = m->bi == BI_MAXPOOL2D;
    int64_t k[2], s[2], p[2], d[2] = {1, 1};
    inst_pair(m, 0, k), inst_pair(m, 1, s), inst_pair(m, 2, p);
    if (maxp)
        inst_pair(m, 3, d);
    ir_node *n = mk_op(b, maxp ? OP_MAXPOOL2D : OP_AVGPOOL2D, at, m->path, x, NULL, NULL);
    if (!n)
        return NULL;
    pool_attr *pa = &n->attr.pool;
    *pa = (pool_attr){.k = {k[0], k[1]}, .s = {s[0], s[1]}, .p = {p[0], p[1]}};
    pa->ceil = maxp ? inst_bool(m, 5) : inst_bool(m, 3);
    pa->count_include_pad = maxp ? false : inst_bool(m, 4);
    if (maxp)
        pa->d[0] = d[0], pa->d[1] = d[1];
    else
        pa->divisor = m->args[5].kind == V_INT ? m->args[5].i : 0;
    n->sh = x->sh;
    static const int64_t none[2] = {0, 0};
    return window_out(b, n, x, k, s, p, d, none, pa->ceil, at, who(m), "the pooling window") ? n : NULL;
}

static ir_node *op_adaptive(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_4d(b, m, x, at, -1))
        return NULL;
    ir_node *n = mk_op(b, OP_ADAPTIVE_AVGPOOL2D, at, m->path, x, NULL, NULL);
    if (!n)
        return NULL;
    n->sh = x->sh;
    const val *o = &m->args[0];
    for (int i = 0; i < 2; i++) {
        const val *e = o->kind == V_INT || o->kind == V_NONE ? o : &o->items[i];
        if (e->kind == V_INT)
            n->sh.d[2 + i] = (dim){e->i, false};
    }
    return n;
}

/* The mean over dims 0, 2 and 3 of x [N, C, H, W], as [C]: the mean over
 * H*W of a [N, C, H*W] view per image, then over the images. Every image
 * has H*W values, so the mean of the means is the mean. */
static ir_node *channel_mean(builder *b, ir_node *x, loc at, const char *scope) {
    shape v = {3, {x->sh.d[0], x->sh.d[1], {x->sh.d[2].k * x->sh.d[3].k, false}}};
    shape c = {1, {x->sh.d[1]}};
    static const int64_t hw = 2, batch = 0;
    ir_node *r = reshape_to(b, x, &v, at, scope);
    r = r ? reduce(b, OP_MEAN, r, &hw, 1, true, at) : NULL;
    r = r ? reduce(b, OP_MEAN, r, &batch, 1, true, at) : NULL;
    return r ? reshape_to(b, r, &c, at, scope) : NULL;
}

/* BatchNorm2d(track_running_stats=False) normalises with the batch's own
 * statistics even in eval mode, as PyTorch does: per channel mean and
 * biased variance over (N, H, W), the variance as the mean of (x - mean)^2.
 * Built from reductions and broadcast arithmetic, so every backend runs it
 * with kernels it has; the batch_norm node then uses them as it would the
 * running statistics. Under DataParallel the statistics are the replica's
 * chunk's, as in torch's DataParallel. */
static bool batch_stats(builder *b, ir_node *x, loc at, const char *scope, ir_node **mean, ir_node **var) {
    int first = b->g->nodes.len;
    shape c4 = {4, {{1, false}, x->sh.d[1], {1, false}, {1, false}}};
    *mean = channel_mean(b, x, at, scope);
    ir_node *m4 = *mean ? reshape_to(b, *mean, &c4, at, scope) : NULL;
    ir_node *d = m4 ? elementwise(b, OP_SUB, x, m4, at, scope) : NULL;
    ir_node *sq = d ? elementwise(b, OP_MUL, d, d, at, scope) : NULL;
    *var = sq ? channel_mean(b, sq, at, scope) : NULL;
    for (int i = first; i < b->g->nodes.len; i++) /* reduce() leaves the scope unset */
        ((ir_node *)b->g->nodes.items[i])->scope = scope;
    return *var != NULL;
}

static ir_node *op_batchnorm(builder *b, inst *m, ir_node *x, loc at) {
    if (x->sh.rank != 4) {
        error_at(b->c, at, "%s: expected 4D input (got %dD input)", who(m), x->sh.rank);
        return NULL;
    }
    if (!want_4d(b, m, x, at, inst_int(m, 0)))
        return NULL;
    ir_node *mean, *var;
    if (inst_bool(m, 4)) {
        mean = param_node(b, m, "running_mean", at);
        var = param_node(b, m, "running_var", at);
    } else if (!batch_stats(b, x, at, m->path, &mean, &var))
        return NULL;
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    ir_node *n = mk_op(b, OP_BATCHNORM, at, m->path, x, mean, var);
    if (!n)
        return NULL;
    if (w) {
        add_in(n, w);
        add_in(n, bias);
    }
    n->attr.norm.eps = inst_float(m, 1);
    n->sh = x->sh;
    return n;
}

static ir_node *layernorm(builder *b, ir_node *x, const int64_t *ns, int nd, ir_node *w, ir_node *bias, double eps,
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

static ir_node *op_layernorm(builder *b, inst *m, ir_node *x, loc at) {
    const val *t = &m->args[0];
    int64_t ns[8];
    int nd = t->kind == V_INT ? 1 : t->n;
    if (nd > 8)
        nd = 8;
    for (int i = 0; i < nd; i++)
        ns[i] = t->kind == V_INT ? t->i : t->items[i].i;
    ir_node *w = param_node(b, m, "weight", at);
    ir_node *bias = param_node(b, m, "bias", at);
    return layernorm(b, x, ns, nd, w, bias, inst_float(m, 1), at, m->path, who(m));
}

static ir_node *op_embedding(builder *b, inst *m, const sv *arg, loc at) {
    if (arg->k != SV_TENSOR || arg->t->dt != IR_I64) {
        error_at(b->c, at, "%s expects an integer tensor of indices (i64), got %s", who(m),
                 arg->k == SV_TENSOR ? "a float tensor" : sv_kind_name(arg));
        return NULL;
    }
    ir_node *x = arg->t;
    if (x->sh.rank >= IR_MAX_RANK) {
        error_at(b->c, at, "%s: input has too many dimensions", who(m));
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at);
    ir_node *n = mk_op(b, OP_EMBEDDING, at, m->path, x, w, NULL);
    if (!n)
        return NULL;
    n->sh = x->sh;
    n->sh.d[n->sh.rank++] = (dim){inst_int(m, 1), false};
    n->attr.embed.num = inst_int(m, 0);
    return n;
}

static ir_node *unary(builder *b, ir_op op, ir_node *x, loc at, const char *scope) {
    return elementwise(b, op, x, NULL, at, scope);
}

static ir_node *softmax(builder *b, ir_op op, ir_node *x, int64_t d, loc at, const char *scope) {
    ir_node *n = mk(b, op, at, scope);
    if (!n || !norm_dim(b, d, x->sh.rank, at, &n->attr.ax.axis))
        return NULL;
    add_in(n, x);
    n->sh = x->sh;
    return n;
}

/* nn.Softmax(dim=None) picks dim 0 for 0-, 1- and 3-D input, else 1 */
static int64_t implicit_softmax_dim(int rank) { return (rank == 0 || rank == 1 || rank == 3) ? 0 : 1; }

static ir_node *reshape_to(builder *b, ir_node *x, const shape *s, loc at, const char *scope) {
    if (shape_eq(&x->sh, s))
        return x;
    ir_node *n = mk_op(b, OP_RESHAPE, at, scope, x, NULL, NULL);
    if (!n)
        return NULL;
    n->sh = *s;
    n->dt = x->dt;
    return n;
}

static ir_node *flatten(builder *b, ir_node *x, int64_t sd, int64_t ed, loc at, const char *scope) {
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

/* -------------------------------------------------- module calls */

/* A builtin module's forward takes one argument, PyTorch's `input`. */
static bool one_arg(builder *b, inst *m, const fargs *a, loc at) {
    if (a->n != 1) {
        error_at(b->c, at, "%s takes one tensor argument, got %d argument%s", who(m), a->n,
                 a->n == 1 ? "" : "s");
        return false;
    }
    if (a->names[0] && strcmp(a->names[0], "input") != 0) {
        error_at(b->c, a->kw_at[0], "%s (%s) has no forward argument '%s'; pass its input positionally or as 'input='",
                 who(m), m->type_name, a->names[0]);
        return false;
    }
    return true;
}

static bool one_tensor_arg(builder *b, inst *m, const fargs *a, loc at) {
    if (!one_arg(b, m, a, at))
        return false;
    const sv *args = a->v;
    if (args[0].k != SV_TENSOR) {
        error_at(b->c, at, "%s expects a tensor, got %s", who(m), sv_kind_name(&args[0]));
        return false;
    }
    if (m->bi != BI_EMBEDDING && m->bi != BI_IDENTITY && m->bi != BI_DROPOUT && m->bi != BI_DROPOUT2D &&
        args[0].t->dt != IR_F32) {
        error_at(b->c, at, "%s expects a float tensor, got an integer tensor", who(m));
        return false;
    }
    return true;
}

/* Sequential: its modules one after another, the value in *cur. */
static DPC_NOINLINE bool call_sequential(builder *b, inst *m, sv *cur, loc at) {
    /* the call's bits in the arena: this frame recurses through nested Sequentials */
    fargs *one = arena_alloc(&b->c->arena, sizeof *one + sizeof(sv) + sizeof(char *) + 2 * sizeof(loc));
    sv *next = (sv *)(one + 1);
    one->n = 1;
    one->v = cur;
    one->names = (const char **)(next + 1);
    one->at = (loc *)(one->names + 1);
    one->kw_at = one->at + 1;
    one->at[0] = one->kw_at[0] = at;
    for (int i = 0; i < m->children.len; i++) {
        inst_child *ch = m->children.items[i];
        if (!call_module(b, ch->mod, one, at, next))
            return false;
        *cur = *next;
    }
    return true;
}

static DPC_NOINLINE bool call_layer(builder *b, inst *m, const fargs *a, loc at, sv *out);

static DPC_NOINLINE bool call_builtin(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    if (m->bi == BI_SEQUENTIAL) {
        if (!one_arg(b, m, a, at))
            return false;
        *out = a->v[0];
        return call_sequential(b, m, out, at);
    }
    if (m->bi == BI_MODULELIST) {
        error_at(b->c, at, "a ModuleList is not callable; iterate over it with 'for' or index it");
        return false;
    }
    return call_layer(b, m, a, at, out);
}

static DPC_NOINLINE bool call_layer(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    if (!one_tensor_arg(b, m, a, at))
        return false;
    const sv *args = a->v;
    ir_node *x = args[0].t, *r = NULL;
    switch (m->bi) {
    case BI_LINEAR: r = op_linear(b, m, x, at); break;
    case BI_CONV2D: r = op_conv(b, m, x, at); break;
    case BI_MAXPOOL2D:
    case BI_AVGPOOL2D: r = op_pool(b, m, x, at); break;
    case BI_ADAPTIVEAVGPOOL2D: r = op_adaptive(b, m, x, at); break;
    case BI_BATCHNORM2D: r = op_batchnorm(b, m, x, at); break;
    case BI_LAYERNORM: r = op_layernorm(b, m, x, at); break;
    case BI_EMBEDDING: r = op_embedding(b, m, &args[0], at); break;
    case BI_DROPOUT:
    case BI_DROPOUT2D:
    case BI_IDENTITY: r = x; break; /* identity in eval mode */
    case BI_RELU: r = unary(b, OP_RELU, x, at, m->path); break;
    case BI_GELU: r = unary(b, strcmp(m->args[0].s, "tanh") == 0 ? OP_GELU_TANH : OP_GELU, x, at, m->path); break;
    case BI_SILU: r = unary(b, OP_SILU, x, at, m->path); break;
    case BI_SIGMOID: r = unary(b, OP_SIGMOID, x, at, m->path); break;
    case BI_TANH: r = unary(b, OP_TANH, x, at, m->path); break;
    case BI_SOFTMAX:
    case BI_LOGSOFTMAX: {
        int64_t d = m->args[0].kind == V_INT ? m->args[0].i : implicit_softmax_dim(x->sh.rank);
        r = softmax(b, m->bi == BI_SOFTMAX ? OP_SOFTMAX : OP_LOG_SOFTMAX, x, d, at, m->path);
        break;
    }
    case BI_FLATTEN: r = flatten(b, x, inst_int(m, 0), inst_int(m, 1), at, m->path); break;
    default:
        error_at(b->c, at, "%s cannot be called", m->type_name);
        return false;
    }
    if (!r || !check_size(b, r, at, who(m)))
        return false;
    out->k = SV_TENSOR;
    out->t = r;
    return true;
}

static sv *lookup(frame *f, const char *name) {
    for (int i = f->locals.len - 1; i >= 0; i--) {
        binding *bd = f->locals.items[i];
        if (strcmp(bd->name, name) == 0)
            return &bd->v;
    }
    return NULL;
}

static void bind(builder *b, frame *f, const char *name, const sv *v) {
    sv *old = lookup(f, name);
    if (old) {
        *old = *v;
        return;
    }
    binding *bd = arena_alloc(&b->c->arena, sizeof *bd);
    bd->name = name;
    bd->v = *v;
    vec_push(&b->c->arena, &f->locals, bd);
}

/* Checks a tensor argument against a declared [N, 10]-style type, binding
 * dim names that are not constructor parameters (the batch name). */
static DPC_NOINLINE bool check_param_shape(builder *b, inst *m, const param *p, const ir_node *x, vec *dimnames,
                                           loc at) {
    bool ok = x->sh.rank == p->dims.len;
    shape want = x->sh;
    want.rank = p->dims.len;
    for (int i = 0; i < p->dims.len && i < IR_MAX_RANK; i++) {
        const node *dn = p->dims.items[i];
        bool is_ctor = false;
        if (dn->kind == ND_NAME)
            for (int k = 0; k < m->np; k++)
                is_ctor |= strcmp(m->pnames[k], dn->str) == 0;
        if (dn->kind == ND_NAME && !is_ctor) {
            if (i >= x->sh.rank)
                continue;
            /* a named dim: equal to every other use of the same name */
            for (int k = 0; k + 1 < dimnames->len; k += 2)
                if (strcmp(dimnames->items[k], dn->str) == 0) {
                    const dim *prev = dimnames->items[k + 1];
                    if (prev->k != x->sh.d[i].k || prev->sym != x->sh.d[i].sym) {
                        if (!prev->sym && !x->sh.d[i].sym && i > 0) {
                            char gs[256];
                            shape_str(&x->sh, b->batch, gs, sizeof gs);
                            error_at(b->c, at, "%s: dim '%s' is %lld from an earlier parameter, but '%s' is %s",
                                     who(m), dn->str, (long long)prev->k, p->name, gs);
                            return false;
                        }
                        ok = false;
                    }
                }
            vec_push(&b->c->arena, dimnames, (void *)dn->str);
            vec_push(&b->c->arena, dimnames, (void *)&x->sh.d[i]);
            want.d[i] = x->sh.d[i];
            continue;
        }
        val v;
        if (!sema_eval(b->c, b->m, m, dn, &v))
            return false;
        if (v.kind != V_INT) {
            error_at(b->c, dn->at, "a dimension must be an int");
            return false;
        }
        want.d[i] = (dim){v.i, false};
        if (i < x->sh.rank && (x->sh.d[i].sym || x->sh.d[i].k != v.i))
            ok = false;
    }
    if (!ok) {
        char ws[256], gs[256];
        /* print the declared dims by name where they were named */
        size_t pos = 0;
        pos += (size_t)snprintf(ws, sizeof ws, "[");
        for (int i = 0; i < p->dims.len && pos < sizeof ws; i++) {
            const node *dn = p->dims.items[i];
            if (dn->kind == ND_NAME && i < want.rank && want.d[i].sym)
                pos += (size_t)snprintf(ws + pos, sizeof ws - pos, "%s%s", i ? ", " : "", dn->str);
            else if (i < want.rank) {
                char one[64];
                shape s1 = {1, {want.d[i]}};
                shape_str(&s1, b->batch, one, sizeof one);
                one[strlen(one) - 1] = 0;
                pos += (size_t)snprintf(ws + pos, sizeof ws - pos, "%s%s", i ? ", " : "", one + 1);
            }
        }
        if (pos < sizeof ws)
            snprintf(ws + pos, sizeof ws - pos, "]");
        shape_str(&x->sh, b->batch, gs, sizeof gs);
        error_at(b->c, at, "%s expects %s for '%s', got %s", who(m), ws, p->name, gs);
        return false;
    }
    return true;
}

/* Binds a call's arguments to a user module's forward parameters, in f. */
static DPC_NOINLINE bool bind_forward(builder *b, inst *m, frame *f, const fargs *a, loc at) {
    const module_def *d = m->def;
    int np = d->fparams.len, pos = 0, before = b->c->nerrors;
    bool *set = arena_alloc(&b->c->arena, (size_t)(np ? np : 1));
    const char **pnames = arena_alloc(&b->c->arena, sizeof(char *) * (size_t)(np ? np : 1));
    for (int k = 0; k < np; k++)
        pnames[k] = ((param *)d->fparams.items[k])->name;
    vec dimnames = {0};
    const sv *args = a->v;
    for (int i = 0; i < a->n; i++) {
        int slot = -1;
        if (!a->names[i]) {
            if (pos >= np) {
                error_at(b->c, a->at[i], "%s takes %d argument%s, got %d", who(m), np, np == 1 ? "" : "s", a->n);
                return false;
            }
            slot = pos++;
        } else
            for (int k = 0; k < np; k++)
                if (strcmp(pnames[k], a->names[i]) == 0)
                    slot = k;
        if (slot < 0) {
            const char *near = nearest_name(a->names[i], pnames, np);
            error_at(b->c, a->kw_at[i], "forward of %s has no parameter '%s'%s%s%s", d->name, a->names[i],
                     near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
            continue;
        }
        if (set[slot]) {
            error_at(b->c, a->kw_at[i], "parameter '%s' given twice", pnames[slot]);
            continue;
        }
        const param *p = d->fparams.items[slot];
        set[slot] = true;
        if (p->kind == PT_TENSOR) {
            if (args[i].k != SV_TENSOR) {
                error_at(b->c, a->at[i], "%s expects a tensor for '%s', got %s", who(m), p->name, sv_kind_name(&args[i]));
                continue;
            }
            if (check_param_shape(b, m, p, args[i].t, &dimnames, a->at[i]))
                bind(b, f, p->name, &args[i]);
        } else {
            if (args[i].k != SV_NUM && !(args[i].k == SV_TENSOR && args[i].t->sh.rank == 0)) {
                error_at(b->c, a->at[i], "%s expects a number for '%s', got %s", who(m), p->name, sv_kind_name(&args[i]));
                continue;
            }
            bind(b, f, p->name, &args[i]);
        }
    }
    for (int k = 0; k < np; k++) {
        const param *p = d->fparams.items[k];
        if (set[k])
            continue;
        if (p->kind == PT_TENSOR || !p->deflt) {
            error_at(b->c, at, "%s: missing argument '%s'", who(m), p->name);
            continue;
        }
        sv v = {.k = SV_NUM};
        if (!sema_eval(b->c, b->m, m, p->deflt, &v.v) || !sema_scalar_default(b->c, p, &v.v, p->deflt->at))
            continue;
        bind(b, f, p->name, &v);
    }
    /* the dims the parameters named (x: [N, C, H, W]) are values in the
     * body: C, H and W as ints, the batch dim as the batch size */
    for (int k = 0; k + 1 < dimnames.len; k += 2) {
        const char *name = dimnames.items[k];
        const dim *d = dimnames.items[k + 1];
        if (lookup(f, name) || (b->batch && strcmp(name, b->batch) == 0))
            continue;
        if (!d->sym) {
            sv v = {.k = SV_NUM, .v = {.kind = V_INT, .i = d->k}};
            bind(b, f, name, &v);
        } else if (d->k == 1) {
            sv v = {.k = SV_BATCH};
            bind(b, f, name, &v);
        }
    }
    return b->c->nerrors == before;
}

static DPC_NOINLINE bool call_user(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    const module_def *d = m->def;
    if (!d->has_forward && d->base) {
        /* a Sequential subclass: its entries in order */
        if (!one_arg(b, m, a, at))
            return false;
        *out = a->v[0];
        return call_sequential(b, m, out, at);
    }
    if (!d->has_forward) {
        error_at(b->c, at, "module '%s' has no forward", d->name);
        return false;
    }
    if (b->depth >= MAX_CALL_DEPTH) {
        error_at(b->c, at, "module calls nested too deeply (limit %d)", MAX_CALL_DEPTH);
        return false;
    }
    frame f = {.self = m};
    if (!bind_forward(b, m, &f, a, at))
        return false;
    b->depth++;
    bool ok = exec_block(b, &f, &d->body);
    b->depth--;
    if (!ok)
        return false;
    if (!f.returned) {
        error_at(b->c, d->forward_at, "forward of '%s' does not return a value", d->name);
        return false;
    }
    *out = f.ret;
    return true;
}

static bool call_module(builder *b, inst *mod, const fargs *a, loc call_at, sv *out) {
    if (!enter(b, call_at))
        return false;
    bool ok = mod->bi == BI_NONE ? call_user(b, mod, a, call_at, out) : call_builtin(b, mod, a, call_at, out);
    b->nest--;
    return ok;
}

/* ----------------------------------------------- builtin functions */

/* Binds call arguments to a function signature "x,dim,keepdim=False". The
 * defaults are given as sv values by the caller; slot_at (if not NULL) gets
 * where each given value is. Returns false on error. */
static bool fbind(builder *b, const char *fn, const fargs *a, const char *const *pnames, int np, int nrequired,
                  sv *slots, bool *given, loc *slot_at, loc at) {
    int pos = 0;
    for (int i = 0; i < a->n; i++) {
        int slot = -1;
        if (!a->names[i])
            slot = pos < np ? pos++ : -2;
        else
            for (int k = 0; k < np; k++)
                if (strcmp(pnames[k], a->names[i]) == 0)
                    slot = k;
        if (slot == -2) {
            error_at(b->c, a->at[i], "%s() takes at most %d argument%s, got %d", fn, np, np == 1 ? "" : "s", a->n);
            return false;
        }
        if (slot < 0) {
            const char *near = nearest_name(a->names[i], pnames, np);
            error_at(b->c, a->kw_at[i], "%s() has no argument '%s'%s%s%s", fn, a->names[i],
                     near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
            return false;
        }
        if (given[slot]) {
            error_at(b->c, a->kw_at[i], "%s() got argument '%s' twice", fn, pnames[slot]);
            return false;
        }
        slots[slot] = a->v[i];
        given[slot] = true;
        if (slot_at)
            slot_at[slot] = a->at[i];
    }
    for (int k = 0; k < nrequired; k++)
        if (!given[k]) {
            error_at(b->c, at, "%s() missing required argument '%s'", fn, pnames[k]);
            return false;
        }
    return true;
}

static bool dims_list(builder *b, const sv *v, loc at, const char *what, int64_t *out, int *n) {
    for (int i = 0; (v->k == SV_TUPLE || v->k == SV_LIST) && i < v->n; i++)
        if (v->items[i].k == SV_BATCH) {
            error_at(b->c, at, "%s cannot contain the batch size '%s'", what, b->batch);
            return false;
        }
    if (v->k == SV_NUM || v->k == SV_BATCH) {
        *n = 1;
        return want_int(b, v, at, what, out);
    }
    if (v->k != SV_TUPLE && v->k != SV_LIST) {
        error_at(b->c, at, "%s must be an int or a list of ints, got %s", what, sv_kind_name(v));
        return false;
    }
    if (v->n > IR_MAX_RANK) {
        error_at(b->c, at, "%s: too many dimensions", what);
        return false;
    }
    *n = v->n;
    for (int i = 0; i < v->n; i++)
        if (!want_int(b, &v->items[i], at, what, &out[i]))
            return false;
    return true;
}

static ir_node *reduce(builder *b, ir_op op, ir_node *x, const int64_t *dims, int nd, bool keep, loc at) {
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

/* Whether x is computed from the batch size. A walk down the ids (operands
 * have smaller ids), not a recursion: a long `N + 1 + 1 ...` chain is deep. */
static bool uses_batch(builder *b, const ir_node *x) {
    bool *reach = arena_alloc(&b->c->arena, (size_t)x->id + 1);
    reach[x->id] = true;
    for (int id = x->id; id >= 0; id--) {
        const ir_node *n = b->g->nodes.items[id];
        if (!reach[id])
            continue;
        if (n->op == OP_BATCH)
            return true;
        for (int i = 0; i < n->nin; i++)
            reach[n->in[i]] = true;
    }
    return false;
}

static ir_node *fn_reshape(builder *b, ir_node *x, const fargs *a, int first, loc at) {
    /* reshape(x, 2, 3) or reshape(x, [2, 3]) or reshape(x, (2, 3)) */
    const sv *items = a->v + first;
    int n = a->n - first;
    if (n == 1 && (items[0].k == SV_TUPLE || items[0].k == SV_LIST)) {
        n = items[0].n;
        items = items[0].items;
    }
    if (n > IR_MAX_RANK || n < 0) {
        error_at(b->c, at, "reshape: too many dimensions");
        return NULL;
    }
    shape out = {.rank = n};
    int infer = -1;
    int64_t known = 1;
    bool known_sym = false;
    for (int i = 0; i < n; i++) {
        const sv *v = &items[i];
        if (v->k == SV_TENSOR && v->t->sh.rank == 0) {
            loc vat = items == a->v + first ? a->at[first + i] : at;
            if (uses_batch(b, v->t))
                error_at(b->c, vat,
                         "reshape: this size is computed from the batch size '%s', which is known only at run "
                         "time; write %s itself, or -1 for the size to infer",
                         b->batch, b->batch);
            else
                error_at(b->c, vat, "reshape sizes must be known when compiling");
            return NULL;
        }
        if (v->k == SV_BATCH) {
            out.d[i] = (dim){1, true};
            known_sym = true;
            continue;
        }
        int64_t d;
        if (!want_int(b, v, at, "a reshape size", &d))
            return NULL;
        if (d == -1) {
            if (infer >= 0) {
                error_at(b->c, at, "reshape: only one dimension can be inferred (-1)");
                return NULL;
            }
            infer = i;
            continue;
        }
        if (d < 0) {
            error_at(b->c, at, "reshape: invalid size %lld", (long long)d);
            return NULL;
        }
        out.d[i] = (dim){d, false};
        if (!dpc_mul_i64(known, d, &known)) {
            error_at(b->c, at, "reshape: size overflow");
            return NULL;
        }
    }
    bool tsym;
    int64_t total = shape_numel(&x->sh, &tsym);
    if (infer >= 0) {
        if (known == 0 || total % known != 0 || (known_sym && !tsym)) {
            error_at(b->c, at, "shape '%s' is invalid for input of shape %s", shp(b, &out), shp(b, &x->sh));
            return NULL;
        }
        out.d[infer] = (dim){total / known, tsym && !known_sym};
    } else if (total != known || tsym != known_sym) {
        error_at(b->c, at, "shape '%s' is invalid for input of shape %s", shp(b, &out), shp(b, &x->sh));
        return NULL;
    }
    if (!numel_ok(&out)) {
        error_at(b->c, at, "reshape: shape '%s' is too large: more than 2^40 elements", shp(b, &out));
        return NULL;
    }
    return reshape_to(b, x, &out, at, NULL);
}

static ir_node *permute(builder *b, ir_node *x, const int *perm, loc at) {
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

static ir_node *matmul(builder *b, ir_node *x, ir_node *y, loc at) {
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

static ir_node *cat(builder *b, const sv *list, int64_t d, loc at) {
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

/* A call of a forward function: its arguments bound to the function's
 * parameters (s[i] given when g[i], written at sat[i]). */
typedef struct fcall {
    builder *b;
    const char *fn;
    const fargs *a;
    loc at;
    sv s[8];
    bool g[8];
    loc sat[8];
} fcall;

/* The lowering of one function: the value, or NULL after a diagnostic. */
typedef ir_node *(*fn_lower)(fcall *c);

/* One row per forward function that is not a one-to-one elementwise op
 * (those are rows of IR_OPS with a function name: see fn_unary). params
 * NULL: the lowering binds its arguments itself (variadic). */
typedef struct fndef {
    const char *name;
    const char *const *params;
    int np, nrequired;
    fn_lower lower;
} fndef;

static ir_node *fn_unary(fcall *c) {
    ir_node *x;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    return unary(c->b, ir_op_of_function(c->fn), x, c->at, NULL);
}

static ir_node *fn_gelu(fcall *c) {
    ir_node *x;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    bool tanh_ = false;
    if (c->g[1]) {
        const sv *ap = &c->s[1];
        if (ap->k != SV_NUM || ap->v.kind != V_STR || (strcmp(ap->v.s, "tanh") != 0 && strcmp(ap->v.s, "none") != 0)) {
            error_at(c->b->c, c->at, "gelu(): approximate must be \"none\" or \"tanh\"");
            return NULL;
        }
        tanh_ = strcmp(ap->v.s, "tanh") == 0;
    }
    return unary(c->b, tanh_ ? OP_GELU_TANH : OP_GELU, x, c->at, NULL);
}

static ir_node *fn_softmax(fcall *c) {
    ir_node *x;
    int64_t d;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !want_int(c->b, &c->s[1], c->at, "dim", &d))
        return NULL;
    return softmax(c->b, c->fn[0] == 's' ? OP_SOFTMAX : OP_LOG_SOFTMAX, x, d, c->at, NULL);
}

static ir_node *fn_flatten(fcall *c) {
    builder *b = c->b;
    int64_t sd = 0, ed = -1;
    ir_node *x;
    if (c->s[0].k != SV_TENSOR && !want_tensor(b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    x = c->s[0].t;
    if ((c->g[1] && !want_int(b, &c->s[1], c->at, "start_dim", &sd)) ||
        (c->g[2] && !want_int(b, &c->s[2], c->at, "end_dim", &ed)))
        return NULL;
    return flatten(b, x, sd, ed, c->at, NULL);
}

static ir_node *fn_reshape_call(fcall *c) {
    const fargs *a = c->a;
    if (a->n < 2) {
        error_at(c->b->c, c->at, "reshape() needs a tensor and a shape");
        return NULL;
    }
    for (int i = 0; i < a->n; i++)
        if (a->names[i]) {
            error_at(c->b->c, a->at[i], "reshape() takes no keyword arguments");
            return NULL;
        }
    if (a->v[0].k != SV_TENSOR) {
        error_at(c->b->c, c->at, "reshape() expects a tensor, got %s", sv_kind_name(&a->v[0]));
        return NULL;
    }
    return fn_reshape(c->b, a->v[0].t, a, 1, c->at);
}

static ir_node *fn_transpose(fcall *c) {
    builder *b = c->b;
    int64_t d0, d1;
    int n0, n1;
    if (c->s[0].k != SV_TENSOR) {
        error_at(b->c, c->sat[0], "transpose() expects a tensor, got %s", sv_kind_name(&c->s[0]));
        return NULL;
    }
    ir_node *x = c->s[0].t;
    if (!want_int(b, &c->s[1], c->at, "dim0", &d0) || !want_int(b, &c->s[2], c->at, "dim1", &d1) ||
        !norm_dim(b, d0, x->sh.rank, c->at, &n0) || !norm_dim(b, d1, x->sh.rank, c->at, &n1))
        return NULL;
    int perm[IR_MAX_RANK];
    for (int i = 0; i < x->sh.rank; i++)
        perm[i] = i;
    perm[n0] = n1;
    perm[n1] = n0;
    return permute(b, x, perm, c->at);
}

/* permute's dims: a tuple or list, or the arguments after the tensor. */
static bool permute_dims(fcall *c, int64_t *dims, int *nd) {
    const fargs *a = c->a;
    *nd = 0;
    if (a->n == 2 && (a->v[1].k == SV_TUPLE || a->v[1].k == SV_LIST))
        return dims_list(c->b, &a->v[1], c->at, "permute dims", dims, nd);
    if (a->n - 1 > IR_MAX_RANK) {
        error_at(c->b->c, c->at, "permute(): too many dims");
        return false;
    }
    for (int i = 1; i < a->n; i++)
        if (!want_int(c->b, &a->v[i], a->at[i], "a permute dim", &dims[(*nd)++]))
            return false;
    return true;
}

static ir_node *fn_permute(fcall *c) {
    builder *b = c->b;
    if (c->a->n < 1 || c->a->v[0].k != SV_TENSOR) {
        error_at(b->c, c->at, "permute() expects a tensor and dims");
        return NULL;
    }
    ir_node *x = c->a->v[0].t;
    int64_t dims[IR_MAX_RANK];
    int nd;
    if (!permute_dims(c, dims, &nd))
        return NULL;
    if (nd != x->sh.rank) {
        error_at(b->c, c->at, "permute(): number of dims don't match (%d given for a %d-D tensor)", nd, x->sh.rank);
        return NULL;
    }
    int perm[IR_MAX_RANK], seen[IR_MAX_RANK] = {0};
    for (int i = 0; i < nd; i++) {
        if (!norm_dim(b, dims[i], x->sh.rank, c->at, &perm[i]))
            return NULL;
        if (seen[perm[i]]++) {
            error_at(b->c, c->at, "permute(): repeated dim %d", perm[i]);
            return NULL;
        }
    }
    return permute(b, x, perm, c->at);
}

static ir_node *fn_matmul(fcall *c) {
    ir_node *x, *y;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !want_tensor(c->b, &c->s[1], c->at, c->fn, &y))
        return NULL;
    return matmul(c->b, x, y, c->at);
}

static ir_node *fn_cat(fcall *c) {
    int64_t d = 0;
    if (c->g[1] && !want_int(c->b, &c->s[1], c->at, "dim", &d))
        return NULL;
    return cat(c->b, &c->s[0], d, c->at);
}

static ir_node *fn_reduce(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    int64_t dims[IR_MAX_RANK];
    int nd = 0;
    bool keep = false;
    if (c->g[2]) {
        if (c->s[2].k != SV_NUM || c->s[2].v.kind != V_BOOL) {
            error_at(b->c, c->at, "keepdim must be a bool");
            return NULL;
        }
        keep = c->s[2].v.i;
    }
    if (!c->g[1] || c->s[1].k == SV_NONE) {
        nd = x->sh.rank; /* all dims */
        for (int i = 0; i < nd; i++)
            dims[i] = i;
    } else if (!dims_list(b, &c->s[1], c->at, "dim", dims, &nd))
        return NULL;
    ir_op op = c->fn[0] == 'm' ? OP_MEAN : c->fn[0] == 's' ? OP_SUM : OP_AMAX;
    return nd == 0 ? x : reduce(b, op, x, dims, nd, keep, c->at);
}

static ir_node *fn_layer_norm(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    int64_t ns[IR_MAX_RANK];
    int nd;
    double eps = 1e-5;
    if (!dims_list(b, &c->s[1], c->sat[1], "normalized_shape", ns, &nd))
        return NULL;
    if (c->g[4] && !num_of(&c->s[4], &eps)) {
        error_at(b->c, c->at, "eps must be a number");
        return NULL;
    }
    ir_node *w = NULL, *bias = NULL;
    if (c->g[2] && c->s[2].k != SV_NONE && !want_tensor(b, &c->s[2], c->at, "weight", &w))
        return NULL;
    if (c->g[3] && c->s[3].k != SV_NONE && !want_tensor(b, &c->s[3], c->at, "bias", &bias))
        return NULL;
    return layernorm(b, x, ns, nd, w, bias, eps, c->at, NULL, "layer_norm");
}

static ir_node *fn_dropout(fcall *c) {
    if (c->s[0].k != SV_TENSOR) {
        error_at(c->b->c, c->sat[0], "dropout() expects a tensor, got %s", sv_kind_name(&c->s[0]));
        return NULL;
    }
    double p = 0.5;
    if (c->g[1] && (!num_of(&c->s[1], &p) || p < 0 || p > 1)) {
        error_at(c->b->c, c->at, "dropout probability has to be between 0 and 1");
        return NULL;
    }
    return c->s[0].t; /* identity in eval mode */
}

static const char *const P_X[] = {"input"};
static const char *const P_GELU[] = {"input", "approximate"};
static const char *const P_SOFTMAX[] = {"input", "dim"};
static const char *const P_FLAT[] = {"input", "start_dim", "end_dim"};
static const char *const P_T[] = {"input", "dim0", "dim1"};
static const char *const P_MM[] = {"input", "other"};
static const char *const P_CAT[] = {"tensors", "dim"};
static const char *const P_RED[] = {"input", "dim", "keepdim"};
static const char *const P_LN[] = {"input", "normalized_shape", "weight", "bias", "eps"};
static const char *const P_DROP[] = {"input", "p", "training", "inplace"};

/* The forward functions besides the op table's: name, parameters, how
 * many are required, lowering. */
static const fndef FUNCTIONS[] = {
    {"gelu", P_GELU, 2, 1, fn_gelu},
    {"softmax", P_SOFTMAX, 2, 2, fn_softmax},
    {"log_softmax", P_SOFTMAX, 2, 2, fn_softmax},
    {"flatten", P_FLAT, 3, 1, fn_flatten},
    {"reshape", NULL, 0, 0, fn_reshape_call},
    {"transpose", P_T, 3, 3, fn_transpose},
    {"permute", NULL, 0, 0, fn_permute},
    {"matmul", P_MM, 2, 2, fn_matmul},
    {"cat", P_CAT, 2, 1, fn_cat},
    {"mean", P_RED, 3, 1, fn_reduce},
    {"sum", P_RED, 3, 1, fn_reduce},
    {"amax", P_RED, 3, 1, fn_reduce},
    {"layer_norm", P_LN, 5, 2, fn_layer_norm},
    {"dropout", P_DROP, 4, 1, fn_dropout},
};
#define NFUNCTIONS ((int)(sizeof FUNCTIONS / sizeof *FUNCTIONS))

/* The row of a forward function: an op table row (one-to-one elementwise,
 * bound as f(input)) or one of FUNCTIONS; false if `name` is neither. */
static bool function_row(const char *name, fndef *out) {
    if (ir_op_of_function(name) != OP_COUNT) {
        *out = (fndef){name, P_X, 1, 1, fn_unary};
        return true;
    }
    for (int i = 0; i < NFUNCTIONS; i++)
        if (strcmp(FUNCTIONS[i].name, name) == 0) {
            *out = FUNCTIONS[i];
            return true;
        }
    return false;
}

bool dpc_is_function(const char *name) {
    fndef d;
    return function_row(name, &d);
}

int dpc_function_names(const char **out, int max) {
    int n = 0;
    for (int i = 0; i < OP_COUNT && n < max; i++)
        if (ir_opdef_of((ir_op)i)->fn)
            out[n++] = ir_opdef_of((ir_op)i)->fn;
    for (int i = 0; i < NFUNCTIONS && n < max; i++)
        out[n++] = FUNCTIONS[i].name;
    return n;
}

static DPC_NOINLINE bool call_function(builder *b, const char *fn, const fargs *a, loc at, sv *out) {
    fndef d;
    if (!function_row(fn, &d))
        return false; /* caller reports unknown names */
    fcall *c = arena_alloc(&b->c->arena, sizeof *c);
    *c = (fcall){.b = b, .fn = fn, .a = a, .at = at};
    for (int i = 0; i < 8; i++)
        c->sat[i] = at;
    if (d.params && !fbind(b, fn, a, d.params, d.np, d.nrequired, c->s, c->g, c->sat, at))
        return false;
    ir_node *r = d.lower(c);
    if (!r || !check_size(b, r, at, fn))
        return false;
    out->k = SV_TENSOR;
    out->t = r;
    return true;
}

/* ------------------------------------------------------ expressions */

static inst *find_member(inst *self, const char *name) {
    for (int i = 0; i < self->children.len; i++) {
        inst_child *ch = self->children.items[i];
        if (strcmp(ch->name, name) == 0)
            return ch->mod;
    }
    return NULL;
}

static DPC_NOINLINE void unknown_name(builder *b, frame *f, const char *name, loc at, bool callee) {
    const char *cands[256];
    int n = 0;
    for (int i = 0; i < f->locals.len && n < 200; i++)
        cands[n++] = ((binding *)f->locals.items[i])->name;
    for (int i = 0; i < f->self->children.len && n < 230; i++)
        cands[n++] = ((inst_child *)f->self->children.items[i])->name;
    for (int i = 0; i < f->self->np && n < 240; i++)
        cands[n++] = f->self->pnames[i];
    if (callee)
        n += dpc_function_names(cands + n, 256 - n);
    const char *near = nearest_name(name, cands, n);
    const char *what = callee ? "unknown function or member" : "unknown name";
    if (near)
        error_at(b->c, at, "%s '%s'; did you mean '%s'?", what, name, near);
    else
        error_at(b->c, at, "%s '%s'", what, name);
}

static DPC_NOINLINE bool resolve_name(builder *b, frame *f, const node *n, sv *out) {
    sv *v = lookup(f, n->str);
    if (v) {
        *out = *v;
        return !v->poison;
    }
    inst *m = find_member(f->self, n->str);
    if (m) {
        out->k = m->bi == BI_MODULELIST ? SV_LIST : SV_MODULE;
        out->mod = m;
        return true;
    }
    for (int i = f->self->np - 1; i >= 0; i--)
        if (strcmp(f->self->pnames[i], n->str) == 0) {
            const val *pv = &f->self->pvals[i];
            if (pv->kind == V_NONE)
                out->k = SV_NONE;
            else if (pv->kind == V_MODULE) {
                out->k = pv->mod->bi == BI_MODULELIST ? SV_LIST : SV_MODULE;
                out->mod = pv->mod;
            } else {
                out->k = SV_NUM;
                out->v = *pv;
            }
            return true;
        }
    if (b->batch && strcmp(n->str, b->batch) == 0) {
        /* the batch size, for reshape(y, N, seq, dim) */
        out->k = SV_BATCH;
        return true;
    }
    unknown_name(b, f, n->str, n->at, false);
    return false;
}

/* Where a call's callee resolves to: a module, a builtin function, or an
 * error (reported). */
static DPC_NOINLINE bool call_named(builder *b, frame *f, const node *n, const fargs *a, sv *out) {
    const node *callee = n->lhs;
    sv *local = lookup(f, callee->str);
    inst *mod = NULL;
    if (local && local->k == SV_MODULE)
        mod = local->mod;
    else if (!local)
        mod = find_member(f->self, callee->str);
    if (mod)
        return call_module(b, mod, a, n->at, out);
    if (local) {
        if (!local->poison)
            error_at(b->c, callee->at, "'%s' is %s, not a module", callee->str, sv_kind_name(local));
        return false;
    }
    if (dpc_is_function(callee->str)) {
        int before = b->c->nerrors;
        if (call_function(b, callee->str, a, n->at, out))
            return true;
        if (b->c->nerrors == before)
            error_at(b->c, n->at, "internal error: %s() failed without a diagnostic; please report this",
                     callee->str);
        return false;
    }
    if (strcmp(callee->str, "range") == 0) {
        error_at(b->c, callee->at, "range() is only allowed in a list comprehension member");
        return false;
    }
    if (builtin_lookup(callee->str)) {
        error_at(b->c, callee->at, "modules are created as members, not in forward: add 'x = %s(...)' to the module",
                 callee->str);
        return false;
    }
    for (int i = f->self->np - 1; i >= 0; i--)
        if (strcmp(f->self->pnames[i], callee->str) == 0) {
            const val *v = &f->self->pvals[i];
            if (v->kind == V_MODULE)
                return call_module(b, v->mod, a, n->at, out);
            if (v->kind == V_CLASS) {
                error_at(b->c, callee->at, "'%s' is the class %s: modules are created as members ('%s = %s(...)')",
                         callee->str, v->s, callee->str, v->s);
                return false;
            }
            error_at(b->c, callee->at, "'%s' is %s, not a module", callee->str,
                     v->kind == V_NONE ? "None" : v->kind == V_INT ? "an int" : v->kind == V_FLOAT ? "a float"
                     : v->kind == V_BOOL ? "a bool" : v->kind == V_STR ? "a string" : "a constant");
            if (v->kind == V_NONE)
                note_at(b->c, callee->at, "write 'if %s is not None { ... }' around the call", callee->str);
            return false;
        }
    unknown_name(b, f, callee->str, callee->at, true);
    return false;
}

static DPC_NOINLINE bool eval_call(builder *b, frame *f, const node *n, sv *out) {
    int na = n->args.len;
    fargs a = {na, arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(na + 1)),
               arena_alloc(&b->c->arena, sizeof(char *) * (size_t)(na + 1)),
               arena_alloc(&b->c->arena, sizeof(loc) * (size_t)(na + 1)),
               arena_alloc(&b->c->arena, sizeof(loc) * (size_t)(na + 1))};
    for (int i = 0; i < na; i++) {
        const arg *ag = n->args.items[i];
        a.names[i] = ag->name;
        a.at[i] = ag->value->at;
        a.kw_at[i] = ag->at;
        if (!eval(b, f, ag->value, &a.v[i]))
            return false;
    }
    if (n->lhs->kind == ND_NAME)
        return call_named(b, f, n, &a, out);
    sv *c = arena_alloc(&b->c->arena, sizeof *c);
    if (!eval(b, f, n->lhs, c))
        return false;
    if (c->k != SV_MODULE) {
        error_at(b->c, n->lhs->at, "%s is not callable", sv_kind_name(c));
        return false;
    }
    return call_module(b, c->mod, &a, n->at, out);
}

/* A value known when compiling (a number, None, a module) as a
 * constructor value; false for tensors and the batch size. */
static bool sv_const(const sv *v, val *out) {
    memset(out, 0, sizeof *out);
    if (v->k == SV_NUM)
        *out = v->v;
    else if (v->k == SV_NONE)
        out->kind = V_NONE;
    else if ((v->k == SV_MODULE || v->k == SV_LIST) && v->mod) {
        out->kind = V_MODULE;
        out->mod = v->mod;
    } else
        return false;
    return true;
}

/* The truth of an `if` or `not` in forward: it must be known when
 * compiling (a constructor value, a member or None), since one graph is
 * built for all inputs. */
static bool const_truth(builder *b, const frame *f, const node *cond, const sv *v, bool *out) {
    val c;
    loc at = cond->at;
    if (!sv_const(v, &c)) {
        if (v->poison)
            return false;
        /* a forward scalar parameter is a value of the run, not of the compile */
        const param *sp = NULL;
        if (cond->kind == ND_NAME && f->self->def)
            for (int i = 0; i < f->self->def->fparams.len; i++) {
                const param *p = f->self->def->fparams.items[i];
                if (p->kind != PT_TENSOR && strcmp(p->name, cond->str) == 0)
                    sp = p;
            }
        if (sp && v->k == SV_TENSOR && v->t && v->t->sh.rank == 0)
            error_at(b->c, at,
                     "'%s' is a scalar parameter of forward, given when the model runs: a condition in forward "
                     "must be known when compiling (constructor values, dims after the batch, members, None); "
                     "make '%s' a constructor parameter",
                     sp->name, sp->name);
        else
            error_at(b->c, at,
                     "this condition is %s: a condition in forward must be known when compiling "
                     "(constructor values, dims after the batch, members, None), since one graph serves every input",
                     sv_kind_name(v));
        return false;
    }
    *out = sema_truthy(&c);
    return true;
}

/* l op r, both evaluated. */
static DPC_NOINLINE bool binop_values(builder *b, const node *n, const sv *l, const sv *r, sv *out) {
    memset(out, 0, sizeof *out);
    val lc, rc;
    if (sv_const(l, &lc) && sv_const(r, &rc)) {
        out->k = SV_NUM;
        return sema_arith(b->c, n->op, &lc, &rc, n->at, &out->v);
    }
    if ((n->op == OP_IS || n->op == OP_ISNOT) && (l->k == SV_NONE || r->k == SV_NONE)) {
        /* a tensor (or the batch size) is never None */
        out->k = SV_NUM;
        out->v = (val){.kind = V_BOOL, .i = n->op == OP_ISNOT};
        return true;
    }
    if (n->op == '@') {
        ir_node *x, *y;
        if (!want_tensor(b, l, n->at, "'@'", &x) || !want_tensor(b, r, n->at, "'@'", &y))
            return false;
        out->t = matmul(b, x, y, n->at);
        out->k = SV_TENSOR;
        return out->t != NULL && check_size(b, out->t, n->at, "'@'");
    }
    ir_op op = n->op == '+' ? OP_ADD : n->op == '-' ? OP_SUB : n->op == '*' ? OP_MUL : n->op == '/' ? OP_DIV : OP_COUNT;
    if (op == OP_COUNT) {
        bool logic = n->op == OP_EQ || n->op == OP_NE || n->op == OP_LT || n->op == OP_GT || n->op == OP_LE ||
                     n->op == OP_GE || n->op == OP_IS || n->op == OP_ISNOT || n->op == OP_AND || n->op == OP_OR;
        if (logic)
            error_at(b->c, n->at,
                     "'%s' is given %s: comparisons, 'and', 'or' and 'is' take values known when compiling "
                     "(constructor values, dims after the batch, members, None), not tensors or the batch size",
                     sema_op_text(n->op), sv_kind_name(sv_const(l, &lc) ? r : l));
        else
            error_at(b->c, n->at, "operator '%s' is not supported on tensors (only +, -, *, / and @ are)",
                     sema_op_text(n->op));
        return false;
    }
    ir_node *x = as_tensor(b, l, n->lhs->at, "arithmetic"), *y = as_tensor(b, r, n->rhs->at, "arithmetic");
    if (!x || !y)
        return false;
    out->t = elementwise(b, op, x, y, n->at, NULL);
    out->k = SV_TENSOR;
    return out->t != NULL && check_size(b, out->t, n->at, "arithmetic");
}

typedef struct build_cx {
    builder *b;
    frame *f;
} build_cx;

static bool build_chain_eval(void *cx, const node *n, void *out) {
    return eval(((build_cx *)cx)->b, ((build_cx *)cx)->f, n, out);
}

static bool build_chain_apply(void *cx, const node *op, void *acc, const void *r) {
    sv t;
    if (!binop_values(((build_cx *)cx)->b, op, acc, r, &t))
        return false;
    *(sv *)acc = t;
    return true;
}

/* The chain walk is sema.c's (eval_binop_chain), shared with constructor
 * arithmetic; only the values and the operators on them differ. */
static bool build_chain_skip(void *cx, const node *op, const void *acc) {
    (void)cx;
    val c;
    return sv_const(acc, &c) && sema_truthy(&c) == (op->op == OP_OR);
}

static DPC_NOINLINE bool eval_binop(builder *b, frame *f, const node *n, sv *out) {
    build_cx cx = {b, f};
    return eval_binop_chain(&b->c->arena, n, &cx, sizeof *out, build_chain_eval, build_chain_apply, build_chain_skip,
                            out);
}

static DPC_NOINLINE bool neg_value(builder *b, const node *n, const sv *v, sv *out) {
    if (v->k == SV_NUM) {
        val zero = {.kind = V_INT, .i = 0};
        out->k = SV_NUM;
        return sema_arith(b->c, '-', &zero, &v->v, n->at, &out->v);
    }
    ir_node *x;
    if (v->k == SV_BATCH)
        x = batch_value(b, n->at);
    else if (!want_tensor(b, v, n->at, "unary '-'", &x))
        return false;
    out->k = SV_TENSOR;
    out->t = unary(b, OP_NEG, x, n->at, NULL);
    return out->t != NULL;
}

/* A ModuleList, a Sequential (a subclass too: `extends Sequential`) or a
 * tuple as a sequence: its length, or -1. */
static int seq_len(const sv *v) {
    if (v->k == SV_TUPLE)
        return v->n;
    if ((v->k == SV_LIST || v->k == SV_MODULE) && v->mod &&
        (v->mod->bi == BI_MODULELIST || v->mod->bi == BI_SEQUENTIAL ||
         (v->mod->bi == BI_NONE && v->mod->def && v->mod->def->base)))
        return v->mod->children.len;
    return -1;
}

/* Entry i of a sequence (seq_len(v) > i). */
static sv seq_item(const sv *v, int64_t i) {
    if (v->k == SV_TUPLE)
        return v->items[i];
    inst *m = ((inst_child *)v->mod->children.items[i])->mod;
    return (sv){.k = m->bi == BI_MODULELIST ? SV_LIST : SV_MODULE, .mod = m};
}

static DPC_NOINLINE bool index_value(builder *b, const node *n, const sv *base, const sv *idx, sv *out) {
    int len = seq_len(base);
    if (len < 0) {
        error_at(b->c, n->at, "only ModuleLists, Sequentials and tuples can be indexed, not %s", sv_kind_name(base));
        return false;
    }
    int64_t i;
    if (!want_int(b, idx, n->rhs->at, "an index", &i))
        return false;
    if (i < -len || i >= len) {
        error_at(b->c, n->rhs->at, "index %lld is out of range (length %d)", (long long)i, len);
        return false;
    }
    *out = seq_item(base, i < 0 ? i + len : i);
    return true;
}

static DPC_NOINLINE bool eval_index(builder *b, frame *f, const node *n, sv *out) {
    sv *bi = arena_alloc(&b->c->arena, 2 * sizeof *bi);
    if (!eval(b, f, n->lhs, &bi[0]) || !eval(b, f, n->rhs, &bi[1]))
        return false;
    return index_value(b, n, &bi[0], &bi[1], out);
}

static DPC_NOINLINE bool eval_seq(builder *b, frame *f, const node *n, sv *out) {
    out->n = n->args.len;
    out->items = arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(out->n + 1));
    for (int i = 0; i < out->n; i++)
        if (!eval(b, f, n->args.items[i], &out->items[i]))
            return false;
    /* a tuple, or a list: a plain sequence in forward (cat's argument) */
    out->k = n->kind == ND_TUPLE ? SV_TUPLE : SV_LIST;
    out->mod = NULL;
    return true;
}

static bool eval_node(builder *b, frame *f, const node *n, sv *out) {
    switch (n->kind) {
    case ND_INT: out->k = SV_NUM; out->v = (val){.kind = V_INT, .i = n->ival}; return true;
    case ND_FLOAT: out->k = SV_NUM; out->v = (val){.kind = V_FLOAT, .f = n->fval}; return true;
    case ND_BOOL: out->k = SV_NUM; out->v = (val){.kind = V_BOOL, .i = n->ival}; return true;
    case ND_STR: out->k = SV_NUM; out->v = (val){.kind = V_STR, .s = n->str}; return true;
    case ND_NONE: out->k = SV_NONE; return true;
    case ND_NAME: return resolve_name(b, f, n, out);
    case ND_NEG: {
        sv *v = arena_alloc(&b->c->arena, sizeof *v);
        return eval(b, f, n->lhs, v) && neg_value(b, n, v, out);
    }
    case ND_BINOP: return eval_binop(b, f, n, out);
    case ND_NOT: {
        sv *v = arena_alloc(&b->c->arena, sizeof *v);
        bool t;
        if (!eval(b, f, n->lhs, v) || !const_truth(b, f, n->lhs, v, &t))
            return false;
        out->k = SV_NUM;
        out->v = (val){.kind = V_BOOL, .i = !t};
        return true;
    }
    case ND_COND: {
        sv *v = arena_alloc(&b->c->arena, sizeof *v);
        bool t;
        if (!eval(b, f, n->third, v) || !const_truth(b, f, n->third, v, &t))
            return false;
        return eval(b, f, t ? n->lhs : n->rhs, out);
    }
    case ND_CALL: return eval_call(b, f, n, out);
    case ND_INDEX: return eval_index(b, f, n, out);
    case ND_SUBSCRIPT:
    case ND_ATTR:
        error_at(b->c, n->at, "%s is not supported yet", n->kind == ND_ATTR ? "attribute access" : "slicing");
        return false;
    case ND_SLICE:
    case ND_ELLIPSIS:
        error_at(b->c, n->at, "a slice is only allowed inside [...]");
        return false;
    case ND_TUPLE:
    case ND_LIST: return eval_seq(b, f, n, out);
    case ND_LISTCOMP:
    case ND_DICTCOMP:
        error_at(b->c, n->at, "comprehensions are only allowed in module members");
        return false;
    case ND_FSTR:
    case ND_DICT:
        error_at(b->c, n->at, "%s only allowed in module members", n->kind == ND_FSTR ? "f-strings are" : "dicts are");
        return false;
    }
    return false;
}

/* Every level of expression evaluation goes through here: the nesting is
 * counted in all, through module calls (enter). Temporaries live in the
 * arena, not in these recursive frames, to keep the stack small. */
static bool eval(builder *b, frame *f, const node *n, sv *out) {
    memset(out, 0, sizeof *out);
    if (!enter(b, n->at))
        return false;
    bool ok = eval_node(b, f, n, out);
    b->nest--;
    return ok;
}

/* ------------------------------------------------------- statements */

/* Binds every name a failed statement (or a loop body that did not run)
 * would have assigned to a poison value: using one reports nothing more. */
static void poison_targets(builder *b, frame *f, const stmt *s) {
    static const sv bad = {.poison = true};
    if (!s)
        return;
    for (int i = 0; i < s->targets.len; i++) /* assigned names, or the loop variable */
        bind(b, f, s->targets.items[i], &bad);
    if (s->kind == ST_FOR || s->kind == ST_IF)
        for (int i = 0; i < s->body.len; i++)
            poison_targets(b, f, s->body.items[i]);
    if (s->kind == ST_IF)
        for (int i = 0; i < s->orelse.len; i++)
            poison_targets(b, f, s->orelse.items[i]);
}

static DPC_NOINLINE bool exec_assign(builder *b, frame *f, const stmt *s) {
    sv *v = arena_alloc(&b->c->arena, sizeof *v);
    if (!eval(b, f, s->values.items[0], v)) {
        poison_targets(b, f, s);
        return false;
    }
    if (s->targets.len == 1) {
        bind(b, f, s->targets.items[0], v);
        return true;
    }
    if (v->k != SV_TUPLE || v->n != s->targets.len) {
        if (v->k == SV_TUPLE)
            error_at(b->c, s->at, "cannot unpack %d value%s into %d names", v->n, v->n == 1 ? "" : "s",
                     s->targets.len);
        else
            error_at(b->c, s->at, "cannot unpack %s into %d names", sv_kind_name(v), s->targets.len);
        poison_targets(b, f, s);
        return false;
    }
    for (int i = 0; i < v->n; i++)
        bind(b, f, s->targets.items[i], &v->items[i]);
    return true;
}

static DPC_NOINLINE bool exec_return(builder *b, frame *f, const stmt *s) {
    if (s->values.len == 1) {
        if (!eval(b, f, s->values.items[0], &f->ret))
            return false;
    } else {
        f->ret.k = SV_TUPLE;
        f->ret.n = s->values.len;
        f->ret.items = arena_alloc(&b->c->arena, sizeof(sv) * (size_t)s->values.len);
        for (int i = 0; i < s->values.len; i++)
            if (!eval(b, f, s->values.items[i], &f->ret.items[i]))
                return false;
    }
    f->returned = true;
    return true;
}

/* The iterable of a for loop (reported when it is not one), or NULL. */
static DPC_NOINLINE bool for_iterable(builder *b, frame *f, const node *iter, sv *it) {
    if (iter->kind == ND_CALL && iter->lhs->kind == ND_NAME && strcmp(iter->lhs->str, "range") == 0 &&
        !lookup(f, "range") && !find_member(f->self, "range")) {
        error_at(b->c, iter->at,
                 "'for' in forward iterates over a ModuleList or a Sequential; range() loops are not "
                 "supported in forward (build the modules with a list comprehension member)");
        return false;
    }
    if (!eval(b, f, iter, it))
        return false;
    if (it->k == SV_TUPLE || seq_len(it) < 0) {
        error_at(b->c, iter->at, "'for' iterates over a ModuleList or a Sequential, not %s", sv_kind_name(it));
        return false;
    }
    return true;
}

static DPC_NOINLINE bool exec_for(builder *b, frame *f, const stmt *s) {
    sv *it = arena_alloc(&b->c->arena, sizeof *it);
    if (!for_iterable(b, f, s->values.items[0], it)) {
        poison_targets(b, f, s);
        return false;
    }
    for (int i = 0, n = seq_len(it); i < n && !f->returned; i++) {
        sv mv = seq_item(it, i);
        bind(b, f, s->targets.items[0], &mv);
        if (!exec_block(b, f, &s->body)) {
            poison_targets(b, f, s);
            return false;
        }
    }
    return true;
}

/* The branch the condition picks, known when compiling; the other is not
 * built (as PyTorch runs one of them). */
static bool exec_if(builder *b, frame *f, const stmt *s) {
    sv *v = arena_alloc(&b->c->arena, sizeof *v);
    bool t;
    if (!eval(b, f, s->values.items[0], v) || !const_truth(b, f, s->values.items[0], v, &t)) {
        poison_targets(b, f, s);
        return false;
    }
    if (!exec_block(b, f, t ? &s->body : &s->orelse)) {
        poison_targets(b, f, s);
        return false;
    }
    return true;
}

static bool exec_stmt(builder *b, frame *f, const stmt *s) {
    if (!enter(b, s->at))
        return false;
    bool ok = false;
    switch (s->kind) {
    case ST_ASSIGN: ok = exec_assign(b, f, s); break;
    case ST_RETURN: ok = exec_return(b, f, s); break;
    case ST_FOR: ok = exec_for(b, f, s); break;
    case ST_IF: ok = exec_if(b, f, s); break;
    }
    b->nest--;
    return ok;
}

static bool exec_block(builder *b, frame *f, const vec *body) {
    bool ok = true;
    for (int i = 0; i < body->len && !f->returned; i++)
        ok &= exec_stmt(b, f, body->items[i]);
    return ok;
}

/* ------------------------------------------------------------ entry */

static ir_dtype parse_dtype(builder *b, const param *p) {
    if (strcmp(p->dtype, "f32") == 0 || strcmp(p->dtype, "float32") == 0)
        return IR_F32;
    if (strcmp(p->dtype, "i64") == 0 || strcmp(p->dtype, "int64") == 0)
        return IR_I64;
    error_at(b->c, p->dtype_at, "unsupported tensor dtype '%s' (use f32 or i64)", p->dtype);
    return IR_F32;
}

static DPC_NOINLINE bool root_inputs(builder *b, frame *f) {
    inst *root = b->m->root;
    const module_def *d = root->def;
    int before = b->c->nerrors;
    for (int i = 0; i < d->fparams.len; i++) {
        const param *p = d->fparams.items[i];
        sv v = {0};
        if (p->kind != PT_TENSOR && b->g->scalars.len == DPC_MAX_SCALARS) {
            error_at(b->c, p->at, "forward has more than %d scalar parameters", DPC_MAX_SCALARS);
            return false;
        }
        if (p->kind == PT_TENSOR && b->g->inputs.len == DPC_MAX_IO) {
            error_at(b->c, p->at, "forward has more than %d tensor inputs", DPC_MAX_IO);
            return false;
        }
        if (p->kind != PT_TENSOR) {
            ir_node *n = mk(b, OP_SCALAR, p->at, "");
            if (!n)
                return false;
            n->name = p->name;
            /* scalars reach kernels as floats, as a Python number does in
             * PyTorch arithmetic; the declared type checks --kw values */
            n->dt = IR_F32;
            n->attr.leaf.type = p->kind == PT_FLOAT ? 0 : p->kind == PT_INT ? 1 : 2;
            n->input_index = b->g->scalars.len;
            if (p->deflt) {
                val dv;
                if (sema_eval(b->c, b->m, root, p->deflt, &dv) && sema_scalar_default(b->c, p, &dv, p->deflt->at)) {
                    n->attr.leaf.value = dv.kind == V_FLOAT ? dv.f : (double)dv.i;
                    n->attr.leaf.has_default = true;
                }
            }
            vec_push(b->g->arena, &b->g->scalars, n);
            v.k = SV_TENSOR;
            v.t = n;
            bind(b, f, p->name, &v);
            continue;
        }
        if (p->dims.len == 0 || p->dims.len > IR_MAX_RANK) {
            error_at(b->c, p->at, "input '%s' needs between 1 and %d dims, the first the batch dim", p->name, IR_MAX_RANK);
            continue;
        }
        const node *first = p->dims.items[0];
        bool is_ctor = false;
        if (first->kind == ND_NAME)
            for (int k = 0; k < root->np; k++)
                is_ctor |= strcmp(root->pnames[k], first->str) == 0;
        if (first->kind != ND_NAME || is_ctor) {
            error_at(b->c, first->at, "the first dim of input '%s' must be the batch name (like N)", p->name);
            continue;
        }
        if (!b->batch)
            b->batch = first->str;
        else if (strcmp(b->batch, first->str) != 0) {
            error_at(b->c, first->at, "inputs must share one batch name: '%s' here, '%s' before", first->str, b->batch);
            continue;
        }
        ir_node *n = mk(b, OP_INPUT, p->at, "");
        if (!n)
            return false;
        n->name = p->name;
        n->dt = parse_dtype(b, p);
        n->input_index = b->g->inputs.len;
        n->sh.rank = p->dims.len;
        n->sh.d[0] = (dim){1, true};
        for (int k = 1; k < p->dims.len; k++) {
            const node *dn = p->dims.items[k];
            val dv;
            if (dn->kind == ND_NAME && strcmp(dn->str, b->batch) == 0) {
                error_at(b->c, dn->at, "only the first dim can be the batch dim");
                continue;
            }
            if (dn->kind == ND_NAME) {
                bool known = false;
                for (int j = 0; j < root->np && !known; j++)
                    known = strcmp(root->pnames[j], dn->str) == 0;
                if (!known) {
                    error_at(b->c, dn->at,
                             "the entry model's input '%s' needs every dim after the batch known: '%s' is not a "
                             "constructor parameter or constant (a dim named freely takes its size from the "
                             "caller, and the entry model has none)",
                             p->name, dn->str);
                    continue;
                }
            }
            if (!sema_eval(b->c, b->m, root, dn, &dv))
                continue;
            if (dv.kind != V_INT || dv.i < 0) {
                error_at(b->c, dn->at, "a dimension must be a non-negative int");
                continue;
            }
            if (dv.i > DPC_MAX_DIM) {
                error_at(b->c, dn->at, "dimension %lld of input '%s' is too large (limit %lld)", (long long)dv.i,
                         p->name, (long long)DPC_MAX_DIM);
                continue;
            }
            n->sh.d[k] = (dim){dv.i, false};
        }
        if (b->c->nerrors == before && !numel_ok(&n->sh)) {
            error_at(b->c, p->at, "input '%s' is too large: %s has more than 2^40 elements per sample", p->name,
                     shp(b, &n->sh));
            continue;
        }
        vec_push(b->g->arena, &b->g->inputs, n);
        v.k = SV_TENSOR;
        v.t = n;
        bind(b, f, p->name, &v);
    }
    if (b->g->inputs.len == 0 && b->c->nerrors == before)
        error_at(b->c, d->forward_at, "forward of '%s' needs at least one tensor input", d->name);
    return b->c->nerrors == before;
}

static bool collect_outputs(builder *b, const sv *r, loc at) {
    if (r->k == SV_TENSOR) {
        if (b->g->outputs.len == DPC_MAX_IO) {
            error_at(b->c, at, "forward returns more than %d tensors", DPC_MAX_IO);
            return false;
        }
        vec_push(b->g->arena, &b->g->outputs, r->t);
        r->t->uses++;
        return true;
    }
    if (r->k == SV_TUPLE) {
        for (int i = 0; i < r->n; i++)
            if (!collect_outputs(b, &r->items[i], at))
                return false;
        return true;
    }
    error_at(b->c, at, "forward must return tensors, not %s", sv_kind_name(r));
    return false;
}

bool ir_build(dpc_ctx *c, model *m, ir_graph *g) {
    builder b = {.c = c, .m = m, .g = g};
    inst *root = m->root;
    if (root->bi != BI_NONE) {
        error_at(c, root->at, "the model must be a user module with a forward, not %s", root->type_name);
        return false;
    }
    if (!root->def->has_forward) {
        error_at(c, root->def->at, "module '%s' has no forward", root->def->name);
        return false;
    }
    g->model_name = root->type_name;
    g->file = root->def->at.file ? root->def->at.file->path : "";
    b.param_nodes = arena_alloc(&c->arena, sizeof(ir_node *) * (size_t)(m->params.len + 1));
    frame f = {.self = root};
    if (!root_inputs(&b, &f))
        return false;
    g->batch_name = b.batch;
    b.depth = 1;
    if (!exec_block(&b, &f, &root->def->body))
        return false;
    if (!f.returned) {
        error_at(c, root->def->forward_at, "forward of '%s' does not return a value", root->def->name);
        return false;
    }
    if (!collect_outputs(&b, &f.ret, root->def->forward_at))
        return false;
    for (int i = 0; i < m->params.len; i++)
        if (!b.param_nodes[i])
            ((param_entry *)m->params.items[i])->ignored = true;
    return c->nerrors == 0;
}
