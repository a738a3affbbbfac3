/* emit_shared.c - the shape and index arithmetic the C and CUDA emitters
 * share: matmul's operand promotion and batch broadcasting, a convolution's
 * geometry, and the window of an output pixel of a pooling op.
 *
 * Each dialect still renders its own loops and launches; what lives here is
 * the arithmetic that must agree between them, so a fix to one backend's
 * index maths cannot leave the other behind. Sizes come back as `dim`
 * values (k or k*N); the CUDA emitter converts them to its k*N^p form. */
#include "emit.h"

#include <stdio.h>
#include <string.h>

/* A size-1 dim that is not the batch: broadcasts against anything. */
static bool dim_is_one(dim d) { return d.k == 1 && !d.sym; }

/* ---------------------------------------------------------- matmul */

void emit_mm_geom(const shape *x, const shape *y, emit_mm *mm) {
    mm->x = *x;
    mm->y = *y;
    /* torch.matmul: a 1-D left operand is one row [1, K], a 1-D right
     * operand one column [K, 1] */
    if (mm->x.rank == 1) {
        mm->x.rank = 2;
        mm->x.d[1] = mm->x.d[0];
        mm->x.d[0] = (dim){1, false};
    }
    if (mm->y.rank == 1) {
        mm->y.rank = 2;
        mm->y.d[1] = (dim){1, false};
    }
    const shape *xs = &mm->x, *ys = &mm->y;
    int rb = xs->rank - 2 > ys->rank - 2 ? xs->rank - 2 : ys->rank - 2;
    mm->batch = (shape){0};
    mm->batch.rank = rb;
    /* the batch dims broadcast NumPy style, aligned at the right */
    for (int i = 0; i < rb; i++) {
        int ix = xs->rank - 2 - rb + i, iy = ys->rank - 2 - rb + i;
        dim dx = ix >= 0 ? xs->d[ix] : (dim){1, false}, dy = iy >= 0 ? ys->d[iy] : (dim){1, false};
        mm->batch.d[i] = dim_is_one(dx) ? dy : dx;
    }
    mm->M = xs->d[xs->rank - 2];
    mm->K = xs->d[xs->rank - 1];
    mm->N = ys->d[ys->rank - 1];
}

int emit_mm_axis(const emit_mm *mm, const shape *s, int i) {
    int ax = s->rank - 2 - mm->batch.rank + i;
    /* a missing or size-1 dim is read at offset 0 for every batch index */
    return ax >= 0 && !dim_is_one(s->d[ax]) ? ax : -1;
}

/* ---------------------------------------------------------- conv2d */

/* The sizes and attributes a conv2d and a conv_transpose2d share. */
static void conv_dims(const ir_node *n, const ir_node *x, const ir_node *w, emit_conv_dims *c) {
    c->C = x->sh.d[1].k, c->H = x->sh.d[2].k, c->W = x->sh.d[3].k;
    c->Co = n->sh.d[1].k, c->Ho = n->sh.d[2].k, c->Wo = n->sh.d[3].k;
    c->kh = w->sh.d[2].k, c->kw = w->sh.d[3].k;
    const conv_attr *a = &n->attr.conv;
    c->sh = a->stride[0], c->sw = a->stride[1], c->ph = a->pad[0], c->pw = a->pad[1], c->dh = a->dil[0], c->dw = a->dil[1];
    c->G = a->groups;
}

bool emit_conv_geom(const ir_node *n, const ir_node *x, const ir_node *w, emit_conv_dims *c) {
    conv_dims(n, x, w, c);
    /* the front end checks groups; a graph that slipped past it gets no
     * division by zero here */
    bool ok = c->G >= 1 && c->C % c->G == 0 && c->Co % c->G == 0;
    c->Cg = ok ? c->C / c->G : 0;
    c->Cog = ok ? c->Co / c->G : 0;
    c->Kd = c->Cg * c->kh * c->kw;
    c->HW = c->Ho * c->Wo;
    return ok;
}

/* ---------------------------------------------------------- pooling */

/* The adaptive window: rows [floor(oh*H/Ho), ceil((oh+1)*H/Ho)), as torch. */
static void adaptive_window(dpc_buf *o, const char *ind, const char *it, long long H, long long W, long long Ho,
                            long long Wo) {
    dpc_buf_printf(o,
                   "%sconst %s h0 = oh * %lldLL / %lldLL, h1 = ((oh + 1) * %lldLL + %lldLL - 1) / %lldLL;\n"
                   "%sconst %s w0 = ow * %lldLL / %lldLL, w1 = ((ow + 1) * %lldLL + %lldLL - 1) / %lldLL;\n",
                   ind, it, H, Ho, H, Ho, Ho, ind, it, W, Wo, W, Wo, Wo);
}

/* The max window: dilated taps, those off the plane skipped; NaN wins, as
 * in torch's max_pool2d. */
static void max_window(dpc_buf *o, const ir_node *n, const char *ind, const char *it, long long H, long long W) {
    const pool_attr *a = &n->attr.pool;
    long long kh = a->k[0], kw = a->k[1], sh = a->s[0], sw = a->s[1], ph = a->p[0], pw = a->p[1];
    long long dh = a->d[0], dw = a->d[1];
    dpc_buf_printf(o,
                   "%sfloat m = -INFINITY;\n"
                   "%sfor (%s ki = 0; ki < %lldLL; ki++) {\n"
                   "%s    const %s ih = oh * %lldLL - %lldLL + ki * %lldLL;\n"
                   "%s    if (ih < 0 || ih >= %lldLL) continue;\n"
                   "%s    for (%s kj = 0; kj < %lldLL; kj++) {\n"
                   "%s        const %s iw = ow * %lldLL - %lldLL + kj * %lldLL;\n"
                   "%s        if (iw < 0 || iw >= %lldLL) continue;\n"
                   "%s        const float v = src[ih * %lldLL + iw];\n"
                   "%s        if (v > m || v != v) m = v;\n"
                   "%s    }\n"
                   "%s}\n",
                   ind, ind, it, kh, ind, it, sh, ph, dh, ind, H, ind, it, kw, ind, it, sw, pw, dw, ind, W, ind, W, ind,
                   ind, ind);
}

/* The avg window: `padded` counts the taps inside the padded plane
 * (count_include_pad), then the window is clipped to the plane. */
static void avg_window(dpc_buf *o, const ir_node *n, const char *ind, const char *it, long long H, long long W) {
    const pool_attr *a = &n->attr.pool;
    long long kh = a->k[0], kw = a->k[1], sh = a->s[0], sw = a->s[1], ph = a->p[0], pw = a->p[1];
    dpc_buf_printf(o,
                   "%s%s h0 = oh * %lldLL - %lldLL, w0 = ow * %lldLL - %lldLL;\n"
                   "%s%s h1 = h0 + %lldLL < %lldLL ? h0 + %lldLL : %lldLL;\n"
                   "%s%s w1 = w0 + %lldLL < %lldLL ? w0 + %lldLL : %lldLL;\n"
                   "%sconst %s padded = (h1 - h0) * (w1 - w0);\n"
                   "%sh0 = h0 < 0 ? 0 : h0; w0 = w0 < 0 ? 0 : w0;\n"
                   "%sh1 = h1 < %lldLL ? h1 : %lldLL; w1 = w1 < %lldLL ? w1 : %lldLL;\n",
                   ind, it, sh, ph, sw, pw, ind, it, kh, H + ph, kh, H + ph, ind, it, kw, W + pw, kw, W + pw, ind, it,
                   ind, ind, H, H, W, W);
}

void emit_pool_window(dpc_buf *o, const ir_node *n, const ir_node *x, const char *ind, const char *it) {
    long long H = x->sh.d[2].k, W = x->sh.d[3].k, Ho = n->sh.d[2].k, Wo = n->sh.d[3].k;
    if (n->op == OP_MAXPOOL2D) {
        max_window(o, n, ind, it, H, W);
        return;
    }
    if (n->op == OP_ADAPTIVE_MAXPOOL2D) { /* the adaptive window's max; NaN wins */
        adaptive_window(o, ind, it, H, W, Ho, Wo);
        dpc_buf_printf(o,
                       "%sfloat m = -INFINITY;\n"
                       "%sfor (%s ih = h0; ih < h1; ih++)\n"
                       "%s    for (%s iw = w0; iw < w1; iw++) {\n"
                       "%s        const float v = src[ih * %lldLL + iw];\n"
                       "%s        if (v > m || v != v) m = v;\n"
                       "%s    }\n",
                       ind, ind, it, ind, it, ind, W, ind, ind);
        return;
    }
    if (n->op == OP_ADAPTIVE_AVGPOOL2D)
        adaptive_window(o, ind, it, H, W, Ho, Wo);
    else
        avg_window(o, n, ind, it, H, W);
    dpc_buf_printf(o,
                   "%sfloat s = 0.0f;\n"
                   "%sfor (%s ih = h0; ih < h1; ih++)\n"
                   "%s    for (%s iw = w0; iw < w1; iw++)\n"
                   "%s        s += src[ih * %lldLL + iw];\n",
                   ind, ind, it, ind, it, ind, W);
}

void emit_pool_bounds(dpc_buf *o, const ir_node *n, const ir_node *x, const char *ind, const char *it) {
    long long H = x->sh.d[2].k, W = x->sh.d[3].k, Ho = n->sh.d[2].k, Wo = n->sh.d[3].k;
    if (n->op == OP_ADAPTIVE_AVGPOOL2D)
        adaptive_window(o, ind, it, H, W, Ho, Wo);
    else
        avg_window(o, n, ind, it, H, W);
}

bool emit_pool_uses_padded(const ir_node *n) {
    return n->op == OP_AVGPOOL2D && !n->attr.pool.divisor && n->attr.pool.count_include_pad;
}

const char *emit_pool_value(char *b, size_t n, const ir_node *p) {
    if (p->op == OP_MAXPOOL2D || p->op == OP_ADAPTIVE_MAXPOOL2D)
        snprintf(b, n, "m");
    else if (p->op == OP_AVGPOOL2D && p->attr.pool.divisor) /* divisor_override */
        snprintf(b, n, "s / %lld.0f", (long long)p->attr.pool.divisor);
    else if (emit_pool_uses_padded(p))
        snprintf(b, n, "s / (float)padded");
    else
        snprintf(b, n, "s / (float)((h1 - h0) * (w1 - w0))");
    return b;
}

/* ---------------------------------------------------------- fused attention */


void emit_attn_geom(const kgraph *kg, const kernel *k, emit_attn *a) {
    const ir_node *q = kgraph_node(kg, k->root->in[0]), *kt = kgraph_node(kg, k->root->in[1]);
    const ir_node *v = kgraph_node(kg, k->attn.pv->in[1]), *pv = k->attn.pv;
    memset(a, 0, sizeof *a);
    a->r = pv->sh.rank;
    a->nb = a->r - 2;
    a->L = pv->sh.d[a->r - 2].k;
    a->Ev = pv->sh.d[a->r - 1].k;
    a->E = q->sh.d[a->r - 1].k;
    a->S = kt->sh.d[a->r - 1].k;
    a->batch.rank = a->nb;
    for (int i = 0; i < a->nb; i++)
        a->batch.d[i] = pv->sh.d[i];
    a->q = kaccess_strided(kg, q);
    a->kt = kaccess_strided(kg, kt);
    a->v = kaccess_strided(kg, v);
    a->qb = kg->buf_of[q->id];
    a->kb = kg->buf_of[kt->id];
    a->vb = kg->buf_of[v->id];
    a->ob = kg->buf_of[k->out->id];
    if (!k->attn.perm) {
        a->o = kaccess_strided(kg, pv);
        a->o.off = a->o.off_n = 0;
        return;
    }
    /* the permute's contiguous layout, seen from pv's coordinates */
    const ir_node *p = k->attn.perm;
    a->o = (kaccess){.kind = ACC_STRIDED, .base = (ir_node *)p};
    dim st = {1, false};
    for (int j = p->sh.rank - 1; j >= 0; j--) {
        a->o.stride[p->attr.perm.perm[j]] = st;
        st.k *= p->sh.d[j].k;
        st.sym |= p->sh.d[j].sym;
    }
}

void emit_attn_bases(const kgraph *kg, const emit_attn *a, dpc_buf *o, const char *indent, const char *int_t,
                     const char *T) {
    char t[96];
    (void)kg;
    dpc_buf_printf(o, "%s%s rem = bi;\n", indent, int_t);
    for (int j = a->nb - 1; j >= 0; j--) {
        emit_dim(t, sizeof t, a->batch.d[j]);
        dpc_buf_printf(o, "%sconst %s c%d = rem %% %s; rem /= %s;\n", indent, int_t, j, t, t);
    }
    dpc_buf_printf(o, "%s(void)rem;\n", indent);
    const char *vc[IR_MAX_RANK] = {0};
    char vcb[IR_MAX_RANK][16];
    for (int j = 0; j < a->nb; j++) {
        snprintf(vcb[j], sizeof vcb[j], "c%d", j);
        vc[j] = vcb[j];
    }
    const struct {
        const char *name;
        const kaccess *acc;
        int buf;
        bool wr;
    } ps[] = {{"qp", &a->q, a->qb, false}, {"kp", &a->kt, a->kb, false}, {"vp", &a->v, a->vb, false}, {"op", &a->o, a->ob, true}};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        dpc_buf_printf(o, "%s%s%s *const %s = b%d + ", indent, ps[i].wr ? "" : "const ", T, ps[i].name, ps[i].buf);
        emit_strided(o, ps[i].acc, vc, a->r);
        dpc_buf_puts(o, ";\n");
    }
}

void emit_attn_chain(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o, const char *indent,
                     const char *int_t, const char *src, const char *dst, ir_dialect d) {
    const ir_node *s = k->attn.softmax;
    const ir_node *last = k->ops.len ? k->ops.items[k->ops.len - 1] : k->root;
    /* the flat index of (c0, ..): an operand of the scores' own shape reads it */
    dpc_buf_printf(o, "%sconst %s i = (bi * %lldLL + c%d) * %lldLL + c%d;\n%s(void)i;\n", indent, int_t, a->L, a->r - 2,
                   a->S, a->r - 1, indent);
    dpc_buf_printf(o, "%sconst float v%d = %s;\n", indent, k->root->id, src);
    for (int i = 0; i < k->ops.len; i++)
        emit_elementwise_op(kg, k, o, k->ops.items[i], &s->sh, indent, "", d);
    dpc_buf_printf(o, "%s%s = v%d;\n", indent, dst, last->id);
}

/* ---------------------------------------------------------- resampling */

bool emit_convt_geom(const ir_node *n, const ir_node *x, const ir_node *w, emit_conv_dims *c) {
    conv_dims(n, x, w, c);
    bool ok = c->G >= 1 && c->C % c->G == 0 && c->Co % c->G == 0 && w->sh.d[1].k * c->G == c->Co;
    c->Cg = ok ? c->C / c->G : 0;
    c->Cog = ok ? c->Co / c->G : 0;
    c->Kd = c->Cog * c->kh * c->kw;
    c->HW = c->H * c->W;
    return ok;
}

/* One spatial dim of an upsample: the source index (nearest) or the two
 * source indices and their weights (bilinear) of output coordinate `oc`,
 * as ATen's CPU kernels compute them in float (UpSample.h:
 * nearest_idx, area_pixel_compute_scale / _source_index and
 * guard_index_and_lambda). `p` names the results: ih, or ih0, ih1, lh0, lh1. */
static void resample_dim(dpc_buf *o, const ir_node *n, int d, long long in, long long out, const char *oc,
                         const char *p, const char *ind, const char *it) {
    const resample_attr *a = &n->attr.rs;
    char f[EMIT_FLOAT_MAX];
    if (n->op == OP_UPSAMPLE_NEAREST) {
        if (out == in)
            dpc_buf_printf(o, "%sconst %s %s = %s;\n", ind, it, p, oc);
        else if (out == 2 * in)
            dpc_buf_printf(o, "%sconst %s %s = %s >> 1;\n", ind, it, p, oc);
        else {
            const float scale = a->scale[d] > 0 ? (float)(1.0 / a->scale[d]) : (float)in / (float)out;
            dpc_buf_printf(o, "%s%s %s = (%s)floorf((float)%s * %s);\n%sif (%s > %lldLL) %s = %lldLL;\n", ind, it, p,
                           it, oc, emit_float_str(f, sizeof f, scale, true), ind, p, in - 1, p, in - 1);
        }
        return;
    }
    if (out == in) {
        dpc_buf_printf(o, "%sconst %s %s0 = %s, %s1 = %s;\n%sconst float l%s0 = 1.0f, l%s1 = 0.0f;\n", ind, it, p, oc, p,
                       oc, ind, p + 1, p + 1);
        return;
    }
    float ratio;
    if (a->align_corners)
        ratio = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
    else
        ratio = a->scale[d] > 0 ? (float)(1.0 / a->scale[d]) : (float)in / (float)out;
    emit_float_str(f, sizeof f, ratio, true);
    if (a->align_corners)
        dpc_buf_printf(o, "%sconst float r%s = %s * (float)%s;\n", ind, p, f, oc);
    else
        dpc_buf_printf(o, "%sconst float r%s = fmaxf(%s * ((float)%s + 0.5f) - 0.5f, 0.0f);\n", ind, p, f, oc);
    dpc_buf_printf(o,
                   "%s%s %s0 = (%s)floorf(r%s);\n"
                   "%sif (%s0 > %lldLL) %s0 = %lldLL;\n"
                   "%sconst %s %s1 = %s0 + (%s0 < %lldLL ? 1 : 0);\n"
                   "%sconst float l%s1 = fminf(fmaxf(r%s - (float)%s0, 0.0f), 1.0f), l%s0 = 1.0f - l%s1;\n",
                   ind, it, p, it, p, ind, p, in - 1, p, in - 1, ind, it, p, p, p, in - 1, ind, p + 1, p, p, p + 1,
                   p + 1);
}

void emit_upsample_dim(dpc_buf *o, const ir_node *n, const ir_node *x, int d, const char *oc, const char *ind,
                       const char *it) {
    resample_dim(o, n, d, x->sh.d[2 + d].k, n->sh.d[2 + d].k, oc, d ? "iw" : "ih", ind, it);
}

void emit_upsample_value(dpc_buf *o, const ir_node *n, const ir_node *x, const char *ind) {
    long long W = x->sh.d[3].k;
    if (n->op == OP_UPSAMPLE_NEAREST) {
        dpc_buf_printf(o, "%sconst float v = src[ih * %lldLL + iw];\n", ind, W);
        return;
    }
    dpc_buf_printf(o,
                   "%sconst float v = lh0 * (lw0 * (float)src[ih0 * %lldLL + iw0] + lw1 * (float)src[ih0 * %lldLL + iw1])\n"
                   "%s    + lh1 * (lw0 * (float)src[ih1 * %lldLL + iw0] + lw1 * (float)src[ih1 * %lldLL + iw1]);\n",
                   ind, W, W, ind, W, W);
}
