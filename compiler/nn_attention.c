/* nn_attention.c - MultiheadAttention (torch.nn, eval): one row (irbuild.h's
 * `builtin`) after its functions. The packed in_proj_weight [3E, E] and
 * in_proj_bias [3E] are the state_dict's; out_proj is a child Linear
 * printed as NonDynamicallyQuantizableLinear. Forward lowers to existing
 * ops: q, k and v projections through linear with the rows E*j..E*(j+1)
 * of the packed weight (selected by a matmul with a one-hot vector: the
 * op table has no slice), heads by reshape/permute, softmax(q k^T /
 * sqrt(d)) v by matmul and softmax, then out_proj. */
#include "irbuild.h"

#include <math.h>
#include <string.h>

enum { A_E, A_H, A_DROP, A_BIAS, A_BKV, A_ZATTN, A_KDIM, A_VDIM, A_BF };

static void mha_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    int64_t e = inst_int(in, A_E), h = inst_int(in, A_H);
    NEED(e > 0, A_E, "embed_dim must be positive, got %lld", (long long)e);
    NEED(h > 0, A_H, "num_heads must be positive, got %lld", (long long)h);
    NEED(h <= 0 || e % h == 0, A_H, "embed_dim must be divisible by num_heads");
    double p = inst_float(in, A_DROP);
    NEED(p >= 0 && p <= 1, A_DROP, "dropout probability has to be between 0 and 1");
    NEED(!inst_bool(in, A_BKV), A_BKV, "add_bias_kv=True is not supported");
    NEED(!inst_bool(in, A_ZATTN), A_ZATTN, "add_zero_attn=True is not supported");
    for (int i = A_KDIM; i <= A_VDIM; i++)
        NEED(in->args[i].kind == V_NONE || in->args[i].i == e, i,
             "%s different from embed_dim is not supported (separate q/k/v projection weights)",
             i == A_KDIM ? "kdim" : "vdim");
    /* out_proj: a Linear(E, E, bias) of class NonDynamicallyQuantizableLinear */
    inst *lin = arena_alloc(&c->arena, sizeof *lin);
    lin->bi = BI_LINEAR;
    lin->type_name = "NonDynamicallyQuantizableLinear";
    lin->at = in->at;
    lin->nargs = 3;
    lin->args = arena_alloc(&c->arena, sizeof(val) * 3);
    lin->args[0] = (val){.kind = V_INT, .i = e};
    lin->args[1] = (val){.kind = V_INT, .i = e};
    lin->args[2] = (val){.kind = V_BOOL, .i = inst_bool(in, A_BIAS)};
    inst_child *ch = arena_alloc(&c->arena, sizeof *ch);
    ch->name = "out_proj";
    ch->mod = lin;
    vec_push(&c->arena, &in->children, ch);
}

/* in_proj_weight: xavier_uniform_, U(+-sqrt(6 / (E + 3E))), which is
 * INIT_KAIMING's U(+-1/sqrt(f)) with f = 2E/3; in_proj_bias zeros. (out_proj's
 * bias is zeroed too: Linear's params see the class name.) */
static void mha_params(dpc_ctx *c, model *m, inst *in) {
    int64_t e = inst_int(in, A_E), w[2] = {3 * e, e};
    builtin_add_param(c, m, in, "in_proj_weight", 2, w, INIT_KAIMING, 2.0 * (double)e / 3.0);
    if (inst_bool(in, A_BIAS))
        builtin_add_param(c, m, in, "in_proj_bias", 1, w, INIT_ZEROS, 0);
}

typedef struct mha_fwd {
    builder *b;
    inst *m;
    loc at;
    int64_t e, h;
} mha_fwd;

/* The one-hot [3] vector e_j, from a rank-0 zero computed from w. */
static ir_node *one_hot(mha_fwd *f, ir_node *zero1, int j) {
    builder *b = f->b;
    sv one = {.k = SV_NUM, .v = {.kind = V_FLOAT, .f = 1.0}};
    ir_node *c1 = as_tensor(b, &one, f->at, "a constant");
    ir_node *o1 = c1 ? elementwise(b, OP_ADD, zero1, c1, f->at, f->m->path) : NULL;
    if (!o1)
        return NULL;
    sv items[3];
    for (int i = 0; i < 3; i++)
        items[i] = (sv){.k = SV_TENSOR, .t = i == j ? o1 : zero1};
    sv list = {.k = SV_LIST, .n = 3, .items = items};
    return cat(b, &list, 0, f->at);
}

static ir_node *linear_node(mha_fwd *f, ir_node *x, ir_node *w, ir_node *bias) {
    ir_node *n = mk_op(f->b, OP_LINEAR, f->at, f->m->path, x, w, bias);
    if (!n)
        return NULL;
    n->sh = x->sh;
    n->sh.d[n->sh.rank - 1] = w->sh.d[0];
    return n;
}

static ir_node *heads(mha_fwd *f, ir_node *x, const int *perm) {
    int64_t d = f->e / f->h;
    shape s = {4, {x->sh.d[0], x->sh.d[1], {f->h, false}, {d, false}}};
    ir_node *r = reshape_to(f->b, x, &s, f->at, f->m->path);
    return r ? permute(f->b, r, perm, f->at) : NULL;
}

/* Self-attention (query, key and value one tensor): one linear with the
 * packed weight [3E, E], then q, k, v its slices along the last dim (as
 * PyTorch's in_projection_packed; the attention reads them in place through
 * strides): one GEMM of 3E columns instead of three of E. */
static bool packed_proj(mha_fwd *f, ir_node *x, ir_node *w, ir_node *bias, ir_node **proj) {
    ir_node *qkv = linear_node(f, x, w, bias);
    for (int j = 0; j < 3; j++)
        if (!qkv || !(proj[j] = narrow(f->b, qkv, 2, j * f->e, f->e, f->at)))
            return false;
    return true;
}

/* Query, key and value apart: the packed projection's rows j*E..(j+1)*E, W
 * viewed [3, E, E] -> [E, E, 3] @ e_j, the bias [3, E] -> [E, 3] @ e_j. */
static bool split_proj(mha_fwd *f, ir_node **xs, ir_node *w, ir_node *bias, ir_node **proj) {
    builder *b = f->b;
    inst *m = f->m;
    loc at = f->at;
    int64_t e = f->e;
    shape w3 = {3, {{3, false}, {e, false}, {e, false}}}, b2 = {2, {{3, false}, {e, false}}}, one = {1, {{1, false}}};
    static const int wperm[3] = {1, 2, 0}, bperm[2] = {1, 0};
    static const int64_t all[2] = {0, 1};
    sv zv = {.k = SV_NUM, .v = {.kind = V_FLOAT, .f = 0.0}};
    ir_node *c0 = as_tensor(b, &zv, at, "a constant");
    ir_node *wt = permute(b, reshape_to(b, w, &w3, at, m->path), wperm, at);
    ir_node *z = c0 && wt ? elementwise(b, OP_MUL, w, c0, at, m->path) : NULL;
    z = z ? reduce(b, OP_MEAN, z, all, 2, false, at) : NULL;
    ir_node *z1 = z ? reshape_to(b, z, &one, at, m->path) : NULL;
    ir_node *bt = bias && z1 ? permute(b, reshape_to(b, bias, &b2, at, m->path), bperm, at) : NULL;
    for (int j = 0; j < 3; j++) {
        ir_node *ej = z1 ? one_hot(f, z1, j) : NULL;
        ir_node *wj = ej ? matmul(b, wt, ej, at) : NULL;
        ir_node *bj = bt && ej ? matmul(b, bt, ej, at) : NULL;
        proj[j] = wj && (bj || !bias) ? linear_node(f, xs[j], wj, bj) : NULL;
        if (!proj[j])
            return false;
    }
    return true;
}

static bool mha_tensor(builder *b, inst *m, const sv *v, loc at, const char *what, bool bf, ir_node **out) {
    if (v->k != SV_TENSOR || v->t->dt != IR_F32) {
        error_at(b->c, at, "%s: %s must be a float tensor, got %s", who(m), what, sv_kind_name(v));
        return false;
    }
    ir_node *x = v->t;
    int64_t e = inst_int(m, A_E);
    if (x->sh.rank != 3 || x->sh.d[2].sym || x->sh.d[2].k != e) {
        error_at(b->c, at, "%s: %s must be %s with E = %lld, got %s", who(m), what,
                 bf ? "[N, L, E] (batch_first=True)" : "[L, N, E]", (long long)e, shp(b, &x->sh));
        return false;
    }
    static const int swap[3] = {1, 0, 2};
    *out = bf ? x : permute(b, x, swap, at);
    return *out != NULL;
}

/* ---- the masks of forward: PyTorch 1.13's multi_head_attention_forward in
 * eval. attn_mask [L, S] (every batch and head) or [N*num_heads, L, S] (row
 * n*num_heads + h for sample n, head h), key_padding_mask [N, S]; each bool
 * (true: masked out, the score becomes -inf) or float (added to the
 * scaled scores). Two bool masks are or-ed; a float attn_mask with a bool
 * key_padding_mask gets -inf where the latter is true; a bool attn_mask
 * with a float key_padding_mask is or-ed with key_padding_mask != 0 (as
 * PyTorch's logical_or); two float masks are refused, as PyTorch's
 * masked_fill refuses a float mask. */
typedef struct mha_masks {
    ir_node *am, *kpm; /* as given, then viewed [.., L, S] and [N, 1, 1, S] */
    loc am_at, kpm_at;
} mha_masks;

static bool mha_mask_arg(builder *b, inst *m, const sv *v, loc at, const char *what, ir_node **out) {
    *out = NULL;
    if (v->k == SV_NONE)
        return true;
    if (v->k != SV_TENSOR) {
        error_at(b->c, at, "%s: %s must be a tensor or None, got %s", who(m), what, sv_kind_name(v));
        return false;
    }
    if (v->t->dt != IR_F32 && v->t->dt != IR_BOOL) {
        error_at(b->c, at, "%s: %s must be a bool or float tensor, got %s", who(m), what,
                 v->t->dt == IR_I64 ? "an int64 tensor" : "an int32 tensor");
        return false;
    }
    *out = v->t;
    return true;
}

/* Checks the masks against query [N, L, E] and key [N, S, E] (batch first
 * here) and views them for broadcasting over the scores [N, h, L, S]. */
static bool mha_mask_shapes(mha_fwd *f, mha_masks *mk, const ir_node *q, const ir_node *k) {
    builder *b = f->b;
    dim n = q->sh.d[0], l = q->sh.d[1], s = k->sh.d[1], one = {1, false};
    if (mk->am && mk->am->sh.rank == 2) {
        shape want = {2, {l, s}};
        if (!shape_eq(&mk->am->sh, &want)) {
            error_at(b->c, mk->am_at, "%s: the 2-D attn_mask is %s, but should be [L, S] = %s", who(f->m),
                     shp(b, &mk->am->sh), shp(b, &want));
            return false;
        }
    } else if (mk->am && mk->am->sh.rank == 3) {
        shape want = {3, {{n.k * f->h, n.sym}, l, s}};
        if (!shape_eq(&mk->am->sh, &want)) {
            error_at(b->c, mk->am_at, "%s: the 3-D attn_mask is %s, but should be [N*num_heads, L, S] = %s",
                     who(f->m), shp(b, &mk->am->sh), shp(b, &want));
            return false;
        }
        shape v4 = {4, {n, {f->h, false}, l, s}};
        if (!(mk->am = reshape_to(b, mk->am, &v4, f->at, f->m->path)))
            return false;
    } else if (mk->am) {
        error_at(b->c, mk->am_at, "%s: attn_mask must be 2-D [L, S] or 3-D [N*num_heads, L, S], got %s", who(f->m),
                 shp(b, &mk->am->sh));
        return false;
    }
    if (mk->kpm) {
        shape want = {2, {n, s}};
        if (!shape_eq(&mk->kpm->sh, &want)) {
            error_at(b->c, mk->kpm_at, "%s: key_padding_mask is %s, but should be [N, S] = %s", who(f->m),
                     shp(b, &mk->kpm->sh), shp(b, &want));
            return false;
        }
        shape v4 = {4, {n, one, one, s}};
        if (!(mk->kpm = reshape_to(b, mk->kpm, &v4, f->at, f->m->path)))
            return false;
    }
    if (mk->am && mk->kpm && mk->am->dt == IR_F32 && mk->kpm->dt == IR_F32) {
        error_at(b->c, mk->kpm_at,
                 "%s: a float attn_mask and a float key_padding_mask cannot be combined (PyTorch merges them with "
                 "masked_fill, which needs a bool mask): make one of them bool",
                 who(f->m));
        return false;
    }
    return true;
}

/* op over x, y, z (z may be NULL), broadcast, of dtype dt. */
static ir_node *mha_ew(mha_fwd *f, ir_op op, ir_node *x, ir_node *y, ir_node *z, ir_dtype dt) {
    shape s, t;
    if (!broadcast(f->b, &x->sh, &y->sh, f->at, ir_op_name(op), &s))
        return NULL;
    if (z && !broadcast(f->b, &s, &z->sh, f->at, ir_op_name(op), &t))
        return NULL;
    ir_node *n = mk_op(f->b, op, f->at, f->m->path, x, y, z);
    if (!n)
        return NULL;
    n->sh = z ? t : s;
    n->dt = dt;
    return n;
}

/* The scaled scores sc [N, h, L, S] with the masks applied. */
static ir_node *mha_apply_masks(mha_fwd *f, const mha_masks *ms, ir_node *sc) {
    ir_node *am = ms->am, *kpm = ms->kpm;
    if (!am && !kpm)
        return sc;
    ir_node *ninf = NULL;
    if ((am && am->dt == IR_BOOL) || (kpm && kpm->dt == IR_BOOL)) {
        ninf = mk(f->b, OP_CONST, f->at, f->m->path);
        if (!ninf)
            return NULL;
        ninf->attr.leaf.value = -INFINITY;
        ninf->sh = (shape){0};
    }
    if (am && kpm && am->dt == IR_BOOL) { /* or-ed (a float key_padding_mask: where it is not 0) */
        ir_node *both = mha_ew(f, OP_LOGICAL_OR, am, kpm, NULL, IR_BOOL);
        return both ? mha_ew(f, OP_WHERE, both, ninf, sc, IR_F32) : NULL;
    }
    if (am && kpm) { /* a float attn_mask, a bool key_padding_mask */
        ir_node *t = mha_ew(f, OP_ADD, sc, am, NULL, IR_F32);
        return t ? mha_ew(f, OP_WHERE, kpm, ninf, t, IR_F32) : NULL;
    }
    ir_node *one = am ? am : kpm;
    return one->dt == IR_BOOL ? mha_ew(f, OP_WHERE, one, ninf, sc, IR_F32) : mha_ew(f, OP_ADD, sc, one, NULL, IR_F32);
}

/* MultiheadAttention's forward parameters, as PyTorch names them. */
static const char *const MHA_ARGS[] = {"query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
                                       "average_attn_weights"};
enum { MHA_NP = 7 };

/* Binds the forward call's arguments to MHA_ARGS: s[k] given when given[k],
 * written at sat[k]; false after a diagnostic. */
static bool mha_bind(builder *b, inst *m, const fargs *a, loc at, sv *s, bool *given, loc *sat) {
    int pos = 0;
    for (int i = 0; i < a->n; i++) {
        int slot = -1;
        if (!a->names[i])
            slot = pos < MHA_NP ? pos++ : -2;
        else
            for (int k = 0; k < MHA_NP; k++)
                if (strcmp(MHA_ARGS[k], a->names[i]) == 0)
                    slot = k;
        if (slot == -2) {
            error_at(b->c, a->at[i], "%s: forward takes at most %d arguments, got %d", who(m), MHA_NP, a->n);
            return false;
        }
        if (slot < 0) {
            const char *near = nearest_name(a->names[i], MHA_ARGS, MHA_NP);
            error_at(b->c, a->kw_at[i], "%s (MultiheadAttention) has no forward argument '%s'%s%s%s", who(m),
                     a->names[i], near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
            return false;
        }
        if (given[slot]) {
            error_at(b->c, a->kw_at[i], "%s: forward got argument '%s' twice", who(m), MHA_ARGS[slot]);
            return false;
        }
        s[slot] = a->v[i], given[slot] = true, sat[slot] = a->at[i];
    }
    for (int k = 0; k < 3; k++)
        if (!given[k]) {
            error_at(b->c, at, "%s: forward missing required argument '%s'", who(m), MHA_ARGS[k]);
            return false;
        }
    return true;
}

static bool mha_call(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    sv s[MHA_NP];
    bool given[MHA_NP] = {0};
    loc sat[MHA_NP];
    if (!mha_bind(b, m, a, at, s, given, sat))
        return false;
    ir_node *kpm = NULL, *am = NULL;
    if ((given[3] && !mha_mask_arg(b, m, &s[3], sat[3], MHA_ARGS[3], &kpm)) ||
        (given[5] && !mha_mask_arg(b, m, &s[5], sat[5], MHA_ARGS[5], &am)))
        return false;
    bool need = true, avg = true;
    for (int k = 4; k <= 6; k += 2)
        if (given[k]) {
            if (s[k].k != SV_NUM || s[k].v.kind != V_BOOL) {
                error_at(b->c, sat[k], "%s: %s must be a bool", who(m), MHA_ARGS[k]);
                return false;
            }
            *(k == 4 ? &need : &avg) = s[k].v.i != 0;
        }
    bool bf = inst_bool(m, A_BF);
    ir_node *q, *k, *v;
    if (!mha_tensor(b, m, &s[0], sat[0], "query", bf, &q) || !mha_tensor(b, m, &s[1], sat[1], "key", bf, &k) ||
        !mha_tensor(b, m, &s[2], sat[2], "value", bf, &v))
        return false;
    if (!shape_eq(&k->sh, &v->sh) || k->sh.d[0].k != q->sh.d[0].k || k->sh.d[0].sym != q->sh.d[0].sym) {
        error_at(b->c, at, "%s: key %s and value %s must have the same shape, and the batch of query %s", who(m),
                 shp(b, &s[1].t->sh), shp(b, &s[2].t->sh), shp(b, &s[0].t->sh));
        return false;
    }
    int first = b->g->nodes.len;
    mha_fwd f = {b, m, at, inst_int(m, A_E), inst_int(m, A_H)};
    mha_masks ms = {am, kpm, sat[5], sat[3]};
    if (!mha_mask_shapes(&f, &ms, q, k))
        return false;
    int64_t e = f.e, d = e / f.h;
    ir_node *w = param_node(b, m, "in_proj_weight", at), *bias = param_node(b, m, "in_proj_bias", at);
    if (!w)
        return false;
    ir_node *proj[3], *xs[3] = {q, k, v};
    bool self = s[0].t == s[1].t && s[1].t == s[2].t;
    if (!(self ? packed_proj(&f, q, w, bias, proj) : split_proj(&f, xs, w, bias, proj)))
        return false;
    static const int pq[4] = {0, 2, 1, 3}, pk[4] = {0, 2, 3, 1};
    ir_node *qh = heads(&f, proj[0], pq), *kh = heads(&f, proj[1], pk), *vh = heads(&f, proj[2], pq);
    ir_node *sc = qh && kh ? matmul(b, qh, kh, at) : NULL; /* [N, h, L, S] */
    sv scale = {.k = SV_NUM, .v = {.kind = V_FLOAT, .f = 1.0 / sqrt((double)d)}};
    ir_node *cs = sc ? as_tensor(b, &scale, at, "a constant") : NULL;
    sc = cs ? elementwise(b, OP_MUL, sc, cs, at, m->path) : NULL;
    sc = sc ? mha_apply_masks(&f, &ms, sc) : NULL;
    ir_node *att = sc ? softmax(b, OP_SOFTMAX, sc, -1, at, m->path) : NULL;
    ir_node *o = att && vh ? matmul(b, att, vh, at) : NULL; /* [N, h, L, d] */
    o = o ? permute(b, o, pq, at) : NULL;
    if (!o)
        return false;
    shape os = {3, {o->sh.d[0], o->sh.d[1], {e, false}}};
    o = reshape_to(b, o, &os, at, m->path);
    inst *op = ((inst_child *)m->children.items[0])->mod;
    ir_node *ow = param_node(b, op, "weight", at), *ob = param_node(b, op, "bias", at);
    ir_node *y = o && ow ? mk_op(b, OP_LINEAR, at, op->path, o, ow, ob) : NULL;
    if (!y)
        return false;
    y->sh = o->sh;
    static const int swap[3] = {1, 0, 2};
    if (!bf && !(y = permute(b, y, swap, at)))
        return false;
    ir_node *wts = NULL;
    if (need) {
        static const int64_t hd = 1;
        wts = avg ? reduce(b, OP_MEAN, att, &hd, 1, false, at) : att;
        if (!wts)
            return false;
    }
    for (int i = first; i < b->g->nodes.len; i++) { /* reduce(), matmul() and permute() leave it unset */
        ir_node *n = b->g->nodes.items[i];
        if (!n->scope)
            n->scope = m->path;
    }
    out->k = SV_TUPLE;
    out->n = 2;
    out->items = arena_alloc(&b->c->arena, sizeof(sv) * 2);
    out->items[0] = (sv){.k = SV_TENSOR, .t = y};
    out->items[1] = wts ? (sv){.k = SV_TENSOR, .t = wts} : (sv){.k = SV_NONE};
    return check_size(b, y, at, who(m));
}

const builtin nn_multiheadattention = {
    "MultiheadAttention", 9,
    {{"embed_dim", 'i', NULL}, {"num_heads", 'i', NULL}, {"dropout", 'f', "0.0"}, {"bias", 'b', "True"},
     {"add_bias_kv", 'b', "False"}, {"add_zero_attn", 'b', "False"}, {"kdim", 'n', "None"}, {"vdim", 'n', "None"},
     {"batch_first", 'b', "False"}},
    .init = mha_init, .params = mha_params, .call = mha_call,
};
