/* fn_layers.c - the functions that do a layer's work in forward: matmul,
 * the reductions (mean, sum, amax), layer_norm, group_norm,
 * adaptive_avg_pool2d, interpolate and scaled_dot_product_attention; the
 * lowerings they share with their modules are nn_*.c's. */
#include "functions.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

ir_node *fn_matmul(fcall *c) {
    ir_node *x, *y;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !want_tensor(c->b, &c->s[1], c->at, c->fn, &y))
        return NULL;
    return matmul(c->b, x, y, c->at);
}

ir_node *fn_reduce(fcall *c) {
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

ir_node *fn_layer_norm(fcall *c) {
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

ir_node *fn_group_norm(fcall *c) {
    builder *b = c->b;
    ir_node *x, *w = NULL, *bias = NULL;
    int64_t g;
    double eps = 1e-5;
    if (!want_tensor(b, &c->s[0], c->at, c->fn, &x) || !want_int(b, &c->s[1], c->sat[1], "num_groups", &g) ||
        !num_arg(c, 4, "eps", &eps))
        return NULL;
    if (c->g[2] && c->s[2].k != SV_NONE && !want_tensor(b, &c->s[2], c->sat[2], "weight", &w))
        return NULL;
    if (c->g[3] && c->s[3].k != SV_NONE && !want_tensor(b, &c->s[3], c->sat[3], "bias", &bias))
        return NULL;
    return nn_group_norm_of(b, x, g, w, bias, eps, c->at, NULL, "group_norm");
}

ir_node *fn_adaptive_avg_pool2d(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->sat[0], c->fn, &x))
        return NULL;
    if (x->sh.rank != 4) {
        error_at(b->c, c->at, "adaptive_avg_pool2d() expects a 4-D input [N, C, H, W], got %s", shp(b, &x->sh));
        return NULL;
    }
    const sv *o = &c->s[1];
    sv two[2] = {*o, *o};
    const sv *e = two;
    if (o->k == SV_TUPLE || o->k == SV_LIST) {
        if (o->n != 2) {
            error_at(b->c, c->sat[1], "adaptive_avg_pool2d(): output_size must be an int or a pair");
            return NULL;
        }
        e = o->items;
    }
    ir_node *n = mk_op(b, OP_ADAPTIVE_AVGPOOL2D, c->at, NULL, x, NULL, NULL);
    if (!n)
        return NULL;
    n->sh = x->sh;
    for (int i = 0; i < 2; i++) {
        int64_t k;
        if (e[i].k == SV_NONE)
            continue;
        if (!want_int(b, &e[i], c->sat[1], "output_size", &k))
            return NULL;
        if (k <= 0) {
            error_at(b->c, c->sat[1], "adaptive_avg_pool2d(): output_size must be positive, got %lld", (long long)k);
            return NULL;
        }
        n->sh.d[2 + i] = (dim){k, false};
    }
    return n;
}

/* One of size / scale_factor: an int or number repeated, or a pair. */
static bool interp_pair(fcall *c, int i, bool ints, double *out) {
    const sv *v = &c->s[i];
    const char *what = i == 1 ? "size" : "scale_factor";
    int n = v->k == SV_TUPLE || v->k == SV_LIST ? v->n : 1;
    if (n != 2 && n != 1) {
        error_at(c->b->c, c->sat[i], "interpolate(): %s shape must match input shape: the input has 2 spatial dims, "
                 "%s has %d", what, what, n);
        return false;
    }
    for (int j = 0; j < 2; j++) {
        const sv *e = n == 1 ? (v->k == SV_TUPLE || v->k == SV_LIST ? &v->items[0] : v) : &v->items[j];
        if (ints) {
            int64_t k;
            if (!want_int(c->b, e, c->sat[i], what, &k))
                return false;
            out[j] = (double)k;
        } else if (!num_of(e, &out[j]) || e->k != SV_NUM) {
            error_at(c->b->c, c->sat[i], "interpolate(): %s must be a number or a pair of numbers", what);
            return false;
        }
        if (out[j] <= 0) {
            error_at(c->b->c, c->sat[i], "interpolate(): %s must be positive", what);
            return false;
        }
    }
    return true;
}

/* F.interpolate(input, size, scale_factor, mode, align_corners,
 * recompute_scale_factor, antialias): Upsample's lowering (nn_conv.c). */
ir_node *fn_interpolate(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->sat[0], c->fn, &x))
        return NULL;
    const char *mode = "nearest";
    if (c->g[3] && c->s[3].k != SV_NONE) {
        if (c->s[3].k != SV_NUM || c->s[3].v.kind != V_STR) {
            error_at(b->c, c->sat[3], "interpolate(): mode must be a string");
            return NULL;
        }
        mode = c->s[3].v.s;
    }
    bool flag[2] = {false, false}, given[2] = {false, false};
    for (int i = 0; i < 2; i++) {
        const sv *v = &c->s[4 + i];
        if (!c->g[4 + i] || v->k == SV_NONE)
            continue;
        if (v->k != SV_NUM || v->v.kind != V_BOOL) {
            error_at(b->c, c->sat[4 + i], "interpolate(): %s must be a bool or None",
                     i ? "recompute_scale_factor" : "align_corners");
            return NULL;
        }
        given[i] = true;
        flag[i] = v->v.i != 0;
    }
    if (c->g[6] && !(c->s[6].k == SV_NUM && c->s[6].v.kind == V_BOOL && !c->s[6].v.i)) {
        error_at(b->c, c->sat[6], "interpolate(): antialias=True is not supported");
        return NULL;
    }
    bool has_size = c->g[1] && c->s[1].k != SV_NONE, has_scale = c->g[2] && c->s[2].k != SV_NONE;
    int arg = 0;
    const char *msg = nn_interpolate_check(mode, has_size, has_scale, given[0], given[1] ? flag[1] : -1, &arg);
    if (msg) {
        loc at = arg == 0 ? c->at : arg == 4 ? c->sat[5] : arg == 3 ? c->sat[4] : c->sat[arg == 1 ? 2 : 3];
        char fmt[256];
        snprintf(fmt, sizeof fmt, "interpolate(): %s", msg);
        error_at(b->c, at, fmt, mode);
        return NULL;
    }
    double v[2];
    if (!interp_pair(c, has_size ? 1 : 2, has_size, v))
        return NULL;
    int64_t size[2] = {(int64_t)v[0], (int64_t)v[1]};
    return nn_interpolate_of(b, x, strcmp(mode, "bilinear") == 0, has_size ? size : NULL, has_size ? NULL : v, flag[0],
                             flag[1], c->at, NULL, "interpolate()");
}

/* scaled_dot_product_attention(query, key, value, attn_mask=None,
 * dropout_p=0.0, is_causal=False, scale=None), PyTorch 2's: softmax(q k^T *
 * scale + mask) v, a bool mask keeping where True, is_causal keeping the
 * lower triangle. Lowered to matmul, softmax, where. */
ir_node *fn_sdpa(fcall *c) {
    builder *b = c->b;
    ir_node *q, *k, *v;
    const char *what = "scaled_dot_product_attention()";
    if (!want_tensor(b, &c->s[0], c->sat[0], what, &q) || !want_tensor(b, &c->s[1], c->sat[1], what, &k) ||
        !want_tensor(b, &c->s[2], c->sat[2], what, &v))
        return NULL;
    if (q->sh.rank < 2 || k->sh.rank < 2 || v->sh.rank < 2) {
        error_at(b->c, c->at, "%s: query, key and value need at least 2 dimensions", what);
        return NULL;
    }
    dim E = q->sh.d[q->sh.rank - 1];
    if (!shape_eq(&(shape){1, {E}}, &(shape){1, {k->sh.d[k->sh.rank - 1]}}) ||
        !shape_eq(&(shape){1, {k->sh.d[k->sh.rank - 2]}}, &(shape){1, {v->sh.d[v->sh.rank - 2]}})) {
        error_at(b->c, c->at, "%s: query %s, key %s and value %s do not fit (query and key share the last dim, key "
                 "and value the one before)", what, shp(b, &q->sh), shp(b, &k->sh), shp(b, &v->sh));
        return NULL;
    }
    if (E.sym) {
        error_at(b->c, c->at, "%s: the embedding dim depends on the batch size", what);
        return NULL;
    }
    double p = 0, scale = 1.0 / sqrt((double)E.k);
    if (c->g[4] && (!num_of(&c->s[4], &p) || p != 0)) {
        error_at(b->c, c->sat[4], "%s: dropout_p must be 0 (dpc runs inference; PyTorch applies it in eval mode too)",
                 what);
        return NULL;
    }
    bool causal = false;
    if (c->g[5]) {
        if (c->s[5].k != SV_NUM || c->s[5].v.kind != V_BOOL) {
            error_at(b->c, c->sat[5], "%s: is_causal must be a bool known when compiling", what);
            return NULL;
        }
        causal = c->s[5].v.i;
    }
    if (c->g[6] && c->s[6].k != SV_NONE && !num_of(&c->s[6], &scale)) {
        error_at(b->c, c->sat[6], "%s: scale must be a number or None", what);
        return NULL;
    }
    ir_node *mask = NULL;
    if (c->g[3] && c->s[3].k != SV_NONE) {
        if (c->s[3].k != SV_TENSOR) {
            error_at(b->c, c->sat[3], "%s: attn_mask must be a tensor or None, got %s", what, sv_kind_name(&c->s[3]));
            return NULL;
        }
        mask = c->s[3].t;
        if (mask->dt == IR_I64) {
            error_at(b->c, c->sat[3], "%s: attn_mask must be bool or float, got an int64 tensor", what);
            return NULL;
        }
        if (causal) {
            error_at(b->c, c->sat[3], "%s: attn_mask and is_causal cannot both be set", what);
            return NULL;
        }
    }
    int perm[IR_MAX_RANK];
    for (int i = 0; i < k->sh.rank; i++)
        perm[i] = i;
    perm[k->sh.rank - 2] = k->sh.rank - 1;
    perm[k->sh.rank - 1] = k->sh.rank - 2;
    ir_node *kt = permute(b, k, perm, c->at);
    ir_node *w = kt ? matmul(b, q, kt, c->at) : NULL;
    shape s0 = {0};
    ir_node *sc = w ? full_node(b, &s0, scale, IR_F32, c->at) : NULL;
    if (!sc || !(w = ew3(b, OP_MUL, w, sc, NULL, IR_F32, c->at, what)))
        return NULL;
    ir_node *ninf = NULL;
    if (causal || (mask && mask->dt == IR_BOOL))
        if (!(ninf = full_node(b, &s0, -INFINITY, IR_F32, c->at)))
            return NULL;
    if (causal) {
        shape ls = {2, {w->sh.d[w->sh.rank - 2], w->sh.d[w->sh.rank - 1]}};
        ir_node *one = full_node(b, &ls, 1, IR_BOOL, c->at);
        if (!one || !(mask = tri(b, one, 0, true, c->at, what)))
            return NULL;
    }
    if (mask) {
        shape ws = w->sh;
        w = mask->dt == IR_BOOL ? ew3(b, OP_WHERE, mask, w, ninf, IR_F32, c->at, what)
                                : ew3(b, OP_ADD, w, mask, NULL, IR_F32, c->at, what);
        if (w && !shape_eq(&w->sh, &ws)) {
            error_at(b->c, c->sat[3], "%s: attn_mask %s does not broadcast to the attention weights %s", what,
                     shp(b, &mask->sh), shp(b, &ws));
            return NULL;
        }
        if (!w)
            return NULL;
    }
    ir_node *a = softmax(b, OP_SOFTMAX, w, -1, c->at, NULL);
    return a ? matmul(b, a, v, c->at) : NULL;
}
