/* onnx_ops_pad_resize.c - Pad and Resize (and the older Upsample), written
 * with what the .dp language has: cat/full/expand/slices for Pad,
 * interpolate() for Resize. Each honours the ONNX operator's definition
 * (onnx/defs, opsets to 21) exactly; a form whose result dpc would compute
 * differently is a located error, never an approximation. */
#include "onnx_ops_common.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "(N, 3, 2, 4)" */
static const char *dims_text(imp *I, int rank, const sdim *d) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, "(");
    for (int i = 0; i < rank; i++) {
        const char *s = imp_dim(I, d[i]);
        dpc_buf_printf(&b, "%s%s", i ? ", " : "", s ? s : "?");
    }
    dpc_buf_puts(&b, rank == 1 ? ",)" : ")");
    char *t = dpc_buf_take(&b);
    const char *r = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return r;
}

/* e[:, ..., a:b] slicing dim `dim` */
static const char *slice_text(imp *I, const char *e, int dim, int64_t a, int64_t b) {
    dpc_buf s;
    dpc_buf_init(&s);
    dpc_buf_printf(&s, "%s[", e);
    for (int i = 0; i < dim; i++)
        dpc_buf_puts(&s, ":, ");
    dpc_buf_printf(&s, "%lld:%lld]", (long long)a, (long long)b);
    char *t = dpc_buf_take(&s);
    const char *r = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return r;
}

/* A constant integer vector input (no run-time dims): its values, count in *k. */
static dpc_status const_ivec(imp *I, int v, const char *what, int64_t *out, int max, int *k) {
    if (v < 0 || !V(v)->c || V(v)->kind == VK_FLOAT)
        return imp_err(I, "%s must be a constant integer tensor (an initializer or Constant)", what);
    int64_t m = dpc_tensor_numel(V(v)->c);
    if (V(v)->c->rank > 1 || m > max)
        return imp_err(I, "%s has %lld values (at most %d)", what, (long long)m, max);
    for (int64_t i = 0; i < m; i++) {
        if (V(v)->csym && V(v)->csym[i])
            return imp_err(I, "%s depends on a run-time dim", what);
        out[i] = ((const int64_t *)V(v)->c->data)[i];
    }
    *k = (int)m;
    return DPC_OK;
}

/* One step of the padding: out = the padded/cropped `cur` along dim i. */
static dpc_status pad_dim(imp *I, int out, int cur, int i, int64_t b, int64_t e, const char *mode, const char *val) {
    ival *C = V(cur);
    int rank = C->rank, kind = C->kind;
    sdim d[DPC_MAX_RANK], pd[DPC_MAX_RANK];
    memcpy(d, C->d, sizeof d);
    int64_t L = d[i].v;
    int u;
    const char *x = imp_ref(I, cur, &u);
    if (!x)
        return imp_fail(I);
    int uses[1] = {u};
    if (b < 0 || e < 0) {
        /* a crop (constant mode only, checked by the caller) */
        int64_t lo = b < 0 ? -b : 0, hi = L - (e < 0 ? -e : 0);
        d[i] = (sdim){hi - lo, 0};
        return imp_stmt_value(I, out, NULL, slice_text(I, x, i, lo, hi), kind, rank, d, uses, 1);
    }
    dpc_buf s;
    dpc_buf_init(&s);
    dpc_buf_puts(&s, "cat([");
    bool first = true;
#define PIECE(str)                                                                                                    \
    do {                                                                                                              \
        const char *p_ = (str);                                                                                       \
        if (!p_) {                                                                                                    \
            dpc_buf_free(&s);                                                                                         \
            return imp_fail(I);                                                                                           \
        }                                                                                                             \
        dpc_buf_printf(&s, "%s%s", first ? "" : ", ", p_);                                                            \
        first = false;                                                                                                \
    } while (0)
    for (int side = 0; side < 2; side++) {
        int64_t p = side ? e : b;
        if (side)
            PIECE(x);
        if (!p)
            continue;
        memcpy(pd, C->d, sizeof pd);
        pd[i] = (sdim){p, 0};
        if (!strcmp(mode, "constant"))
            PIECE(imp_printf(I, "full(%s, %s)", dims_text(I, rank, pd), val));
        else if (!strcmp(mode, "edge")) {
            const char *sl = slice_text(I, x, i, side ? L - 1 : 0, side ? L : 1);
            PIECE(sl ? imp_printf(I, "expand(%s, %s)", sl, dims_text(I, rank, pd)) : NULL);
        } else /* reflect: x[p], ..., x[1] before; x[L-2], ..., x[L-1-p] after */
            for (int64_t k = 1; k <= p; k++) {
                int64_t at = side ? L - 1 - k : p + 1 - k;
                PIECE(slice_text(I, x, i, at, at + 1));
            }
    }
#undef PIECE
    dpc_buf_printf(&s, "], %d)", i);
    char *t = dpc_buf_take(&s);
    const char *ex = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    d[i] = (sdim){L + b + e, 0};
    return imp_stmt_value(I, out, NULL, ex, kind, rank, d, uses, 1);
}

/* Pad's pads (2 * rank at most, into p[*np]) and constant value: the
 * attributes before opset 11, the inputs from it. */
static dpc_status pad_amounts(imp *I, const Onnx__NodeProto *n, int rank, int kind, int64_t *p, int *np, double *val) {
    if (I->opset < 11) {
        const int64_t *a;
        *np = imp_attr_ints(I, n, "pads", &a);
        if (*np < 0)
            return imp_err(I, "the pads attribute is missing");
        if (*np > 2 * DPC_MAX_RANK)
            return imp_err(I, "pads has %d values for a rank-%d input", *np, rank);
        memcpy(p, a, sizeof *p * (size_t)*np);
        *val = imp_attr_f(I, n, "value", 0.0);
    } else {
        if (imp_attr(n, "pads") || imp_attr(n, "value"))
            return imp_err(I, "the pads and value attributes are inputs from opset 11");
        dpc_status s = const_ivec(I, imp_in(I, n, 1), "pads", p, 2 * DPC_MAX_RANK, np);
        if (s != DPC_OK)
            return s;
        int cv;
        if (imp_opt(I, n, 2, &cv)) {
            if (!V(cv)->c || dpc_tensor_numel(V(cv)->c) != 1 || (V(cv)->csym && V(cv)->csym[0]))
                return imp_err(I, "constant_value must be a constant scalar");
            if (V(cv)->kind != kind)
                return imp_err(I, "constant_value's element type differs from the input's");
            *val = V(cv)->c->dtype == DPC_F32 ? ((const float *)V(cv)->c->data)[0]
                                             : (double)((const int64_t *)V(cv)->c->data)[0];
        }
    }
    return DPC_OK;
}

/* Opset 18's axes: pads p[*np] for the axes given only, spread to all
 * rank dims (the others 0). */
static dpc_status pad_axes(imp *I, int ax, int rank, int64_t *p, int *np) {
    int64_t axes[DPC_MAX_RANK], full[2 * DPC_MAX_RANK] = {0};
    int na = 0;
    dpc_status s = const_ivec(I, ax, "axes", axes, DPC_MAX_RANK, &na);
    if (s != DPC_OK)
        return s;
    if (*np != 2 * na)
        return imp_err(I, "pads has %d values for %d axes (%d expected)", *np, na, 2 * na);
    bool seen[DPC_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        if (axes[i] < -rank || axes[i] >= rank)
            return imp_err(I, "axis %lld out of range for rank %d", (long long)axes[i], rank);
        int a = (int)(axes[i] < 0 ? axes[i] + rank : axes[i]);
        if (seen[a])
            return imp_err(I, "axis %d given twice", a);
        seen[a] = true;
        full[a] = p[i], full[a + rank] = p[i + na];
    }
    memcpy(p, full, sizeof full);
    *np = 2 * rank;
    return DPC_OK;
}

/* Pad: opsets 2-10 take pads and value as attributes, 11 on as inputs
 * (pads, constant_value; from 18 axes, the dims pads are for); modes
 * constant, reflect and edge as np.pad (19's wrap is refused). */
dpc_status imp_op_pad(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    if (!V(x)->shaped)
        return imp_err(I, "an input of unknown shape");
    if (V(x)->c)
        return imp_err(I, "a Pad of a constant is not supported");
    int rank = V(x)->rank, kind = V(x)->kind;
    if (kind != VK_FLOAT)
        return imp_err(I, "on a non-float tensor (dpc's cat joins float tensors only)");
    const char *mode = imp_attr_s(I, n, "mode", "constant");
    if (!mode)
        return imp_fail(I);
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
        return imp_bad_string(I, "mode", mode);
    int64_t p[2 * DPC_MAX_RANK];
    int np = 0;
    double val = 0;
    dpc_status s = pad_amounts(I, n, rank, kind, p, &np, &val);
    if (s != DPC_OK)
        return s;
    int ax;
    if (I->opset >= 18 && imp_opt(I, n, 3, &ax) && (s = pad_axes(I, ax, rank, p, &np)) != DPC_OK)
        return s;
    if (np != 2 * rank)
        return imp_err(I, "pads has %d values for a rank-%d input (%d expected)", np, rank, 2 * rank);
    const char *vt = "0";
    if (!strcmp(mode, "constant")) {
        if (!isfinite(val))
            return imp_err(I, "a non-finite constant_value is not supported");
        char b[48];
        dpc_format_pyfloat((float)val, b, sizeof b);
        vt = imp_printf(I, val < 0 ? "(%s)" : "%s", b);
        if (!vt)
            return imp_fail(I);
    }
    bool any = false;
    for (int i = 0; i < rank; i++) {
        int64_t b = p[i], e = p[i + rank];
        if (!b && !e)
            continue;
        any = true;
        if (i == 0)
            return imp_err(I, "padding the batch dim (dim 0) is not supported");
        if (V(x)->d[i].s)
            return imp_err(I, "padding run-time dim %d is not supported (give it with --dim NAME=SIZE)", i);
        if (llabs(b) > (1 << 20) || llabs(e) > (1 << 20))
            return imp_err(I, "pads out of range");
        int64_t L = V(x)->d[i].v;
        if (strcmp(mode, "constant") && (b < 0 || e < 0))
            return imp_err(I, "negative pads in %s mode are not supported", mode);
        if (L + (b < 0 ? b : 0) + (e < 0 ? e : 0) < 1)
            return imp_err(I, "pads crop dim %d (of %lld) to nothing", i, (long long)L);
        if (!strcmp(mode, "reflect")) {
            if (b > L - 1 || e > L - 1)
                return imp_err(I, "reflect pads of dim %d must be smaller than its size %lld", i, (long long)L);
            if (b > 64 || e > 64)
                return imp_err(I, "reflect pads over 64 are not supported");
        }
    }
    if (!any) {
        /* a copy */
        ival *X = V(x), *O = V(out);
        O->kind = X->kind, O->var = X->var, O->stmt = X->stmt;
        return imp_set_shape(I, out, X->rank, X->d);
    }
    /* one statement per dim padded (crops first: they commute with constant padding) */
    int last = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 1; i < rank; i++) {
            int64_t b = p[i], e = p[i + rank];
            int64_t cb = pass ? (b > 0 ? b : 0) : (b < 0 ? b : 0), ce = pass ? (e > 0 ? e : 0) : (e < 0 ? e : 0);
            if (cb || ce)
                last = pass * rank + i;
        }
    int cur = x;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 1; i < rank; i++) {
            int64_t b = p[i], e = p[i + rank];
            int64_t cb = pass ? (b > 0 ? b : 0) : (b < 0 ? b : 0), ce = pass ? (e > 0 ? e : 0) : (e < 0 ? e : 0);
            if (!cb && !ce)
                continue;
            int dst = pass * rank + i == last ? out : imp_tmp_value(I, "nn");
            if (dst < 0)
                return imp_fail(I);
            dpc_status s = pad_dim(I, dst, cur, i, cb, ce, mode, vt);
            if (s != DPC_OK)
                return s;
            cur = dst;
        }
    return DPC_OK;
}

/* ONNX's source coordinate of output index x (onnx/defs Resize; the
 * backend test's reference interpolate_1d_with_x), in double. */
static double onnx_coord(const char *ctm, double x, double scale, int64_t in, int64_t out) {
    if (!strcmp(ctm, "align_corners"))
        return out == 1 ? 0.0 : x * (double)(in - 1) / (double)(out - 1);
    if (!strcmp(ctm, "asymmetric"))
        return x / scale;
    if (!strcmp(ctm, "pytorch_half_pixel"))
        return out == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    if (!strcmp(ctm, "tf_half_pixel_for_nn"))
        return (x + 0.5) / scale;
    return (x + 0.5) / scale - 0.5; /* half_pixel */
}

static int64_t onnx_nearest(const char *nm, double xo, int64_t in) {
    double f = floor(xo), r = xo - f;
    int64_t k;
    if (r == 0)
        k = (int64_t)f;
    else if (!strcmp(nm, "floor"))
        k = (int64_t)f;
    else if (!strcmp(nm, "ceil"))
        k = (int64_t)f + 1;
    else if (!strcmp(nm, "round_prefer_ceil"))
        k = (int64_t)f + (r >= 0.5);
    else /* round_prefer_floor */
        k = (int64_t)f + (r > 0.5);
    return k < 0 ? 0 : k > in - 1 ? in - 1 : k;
}

/* dpc's nearest source index (emit_shared.c resample_dim, ATen's
 * nearest_idx): sf > 0 the scale_factor given, else the sizes' ratio. */
static int64_t dpc_nearest(int64_t o, double sf, int64_t in, int64_t out) {
    if (out == in)
        return o;
    if (out == 2 * in)
        return o >> 1;
    const float scale = sf > 0 ? (float)(1.0 / sf) : (float)in / (float)out;
    int64_t k = (int64_t)floorf((float)o * scale);
    return k > in - 1 ? in - 1 : k;
}

/* a scale as a .dp literal that reads back as the same double */
static const char *scale_lit(imp *I, double s) {
    char b[48];
    dpc_format_pyfloat(s, b, sizeof b);
    if (strtod(b, NULL) != s)
        snprintf(b, sizeof b, "%.17g", s);
    if (!strchr(b, '.') && !strchr(b, 'e'))
        strcat(b, ".0");
    return imp_printf(I, "%s", b);
}

/* Resize's coordinate_transformation_mode and nearest_mode into *ctmp and
 * *nmp, checked (fixed before opset 11). */
static dpc_status resize_coord_modes(imp *I, const Onnx__NodeProto *n, bool up, const char **ctmp, const char **nmp) {
    /* opset 10 Resize and Upsample: asymmetric coordinates; Upsample's
     * nearest is floor (its definition's example repeats pixels), Resize-10's
     * rounding is not pinned down, so floor and round_prefer_floor must agree */
    bool old = up || I->opset < 11;
    const char *ctm = *ctmp = old ? "asymmetric" : imp_attr_s(I, n, "coordinate_transformation_mode", "half_pixel");
    const char *nm = *nmp = old ? "floor" : imp_attr_s(I, n, "nearest_mode", "round_prefer_floor");
    if (!ctm || !nm)
        return imp_fail(I);
    if (old && (imp_attr(n, "coordinate_transformation_mode") || imp_attr(n, "nearest_mode")))
        return imp_err(I, "coordinate_transformation_mode and nearest_mode are attributes from opset 11");
    if (up && I->opset >= 9 && imp_attr(n, "scales"))
        return imp_err(I, "scales is an input from opset 9");
    static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                       "tf_half_pixel_for_nn"};
    bool known = false;
    for (size_t i = 0; i < sizeof ctms / sizeof *ctms; i++)
        known |= !strcmp(ctm, ctms[i]);
    if (!known)
        return imp_bad_string(I, "coordinate_transformation_mode", ctm);
    if (strcmp(nm, "floor") && strcmp(nm, "ceil") && strcmp(nm, "round_prefer_floor") && strcmp(nm, "round_prefer_ceil"))
        return imp_bad_string(I, "nearest_mode", nm);
    return DPC_OK;
}

/* Resize's axes (opset 18: the dims scales and sizes are for, pos[*nax];
 * the default all four) and its aspect ratio policy. */
static dpc_status resize_axes(imp *I, const Onnx__NodeProto *n, int *pos, int *nax) {
    /* opset 18: the dims scales and sizes are for (the others kept), and
     * antialiasing and a kept aspect ratio, which dpc's interpolate lacks */
    const int64_t *axes = NULL;
    int na = imp_attr_ints(I, n, "axes", &axes);
    if (na >= 0) {
        if (na < 1 || na > 4)
            return imp_err(I, "axes has %d values for a rank-4 input", na);
        bool seen[4] = {0};
        for (int i = 0; i < na; i++) {
            if (axes[i] < -4 || axes[i] >= 4)
                return imp_err(I, "axis %lld out of range for rank 4", (long long)axes[i]);
            pos[i] = (int)(axes[i] < 0 ? axes[i] + 4 : axes[i]);
            if (seen[pos[i]])
                return imp_err(I, "axis %d given twice", pos[i]);
            seen[pos[i]] = true;
        }
        *nax = na;
    }
    const char *policy = imp_attr_s(I, n, "keep_aspect_ratio_policy", "stretch");
    if (!policy)
        return imp_fail(I);
    if (strcmp(policy, "stretch"))
        return strcmp(policy, "not_larger") && strcmp(policy, "not_smaller")
                   ? imp_bad_string(I, "keep_aspect_ratio_policy", policy)
                   : imp_err(I, "keep_aspect_ratio_policy=%s is not supported (stretch only)", policy);
    return DPC_OK;
}

/* Resize's scales (sc) or sizes (sz, pre-set to the input's dims): the
 * attribute of Upsample before opset 9, else the inputs; exactly one. */
static dpc_status resize_targets(imp *I, const Onnx__NodeProto *n, bool up, const int *pos, int nax, double *sc,
                                 sdim *sz, bool *have_scales) {
    bool have_sizes = false;
    if (up && I->opset < 9) {
        const Onnx__AttributeProto *a = imp_attr(n, "scales");
        if (!a || a->n_floats != 4)
            return imp_err(I, "the scales attribute must have 4 values");
        for (int i = 0; i < 4; i++)
            sc[i] = a->floats[i];
        *have_scales = true;
    } else {
        /* scales: input 1 (Upsample 9, Resize 10: required), 2 from 11 on; sizes 3 from 11 */
        int si, zi;
        if (imp_opt(I, n, up || I->opset < 11 ? 1 : 2, &si)) {
            if (!V(si)->c || V(si)->kind != VK_FLOAT)
                return imp_err(I, "scales must be a constant float tensor (an initializer or Constant)");
            int64_t k = dpc_tensor_numel(V(si)->c);
            if (k != 0 && k != nax)
                return imp_err(I, "scales has %lld values (%d expected)", (long long)k, nax);
            for (int64_t i = 0; i < k; i++)
                sc[pos[i]] = ((const float *)V(si)->c->data)[i];
            *have_scales = k == nax;
        }
        if (!up && I->opset >= 11 && imp_opt(I, n, 3, &zi)) {
            if (!V(zi)->c || V(zi)->kind == VK_FLOAT || V(zi)->c->rank != 1 || V(zi)->c->shape[0] != nax)
                return imp_err(I, "sizes must be a constant integer tensor of %d values", nax);
            for (int i = 0; i < nax; i++)
                sz[pos[i]] = (sdim){((const int64_t *)V(zi)->c->data)[i], V(zi)->csym ? V(zi)->csym[i] : 0};
            have_sizes = true;
        }
        if (*have_scales == have_sizes)
            return imp_err(I, "exactly one of scales and sizes must be given");
    }
    return DPC_OK;
}

/* The output's H and W, o, from the scales or the sizes (the batch and
 * channels kept), in range. */
static dpc_status resize_out_size(imp *I, const ival *X, const double *sc, const sdim *sz, bool have_scales,
                                  const int64_t *in, int64_t *o) {
    if (have_scales) {
        if (sc[0] != 1 || sc[1] != 1)
            return imp_err(I, "scaling the batch or channel dim is not supported");
        for (int i = 0; i < 2; i++) {
            if (!(sc[2 + i] > 0) || sc[2 + i] > 1 << 16)
                return imp_err(I, "scale %g out of range", sc[2 + i]);
            double v = floor((double)in[i] * sc[2 + i]);
            if (v < 1 || v > 1 << 24)
                return imp_err(I, "an output size of %g", v);
            o[i] = (int64_t)v;
        }
    } else {
        bool batch_ok = (sz[0].s == X->d[0].s && sz[0].v == X->d[0].v) || (!sz[0].s && sz[0].v == 1);
        if (!batch_ok || sz[1].s || sz[1].v != X->d[1].v)
            return imp_err(I, "resizing the batch or channel dim is not supported");
        for (int i = 0; i < 2; i++) {
            if (sz[2 + i].s || sz[2 + i].v < 1 || sz[2 + i].v > 1 << 24)
                return imp_err(I, "sizes out of range");
            o[i] = sz[2 + i].v;
        }
    }
    return DPC_OK;
}

/* nearest: whether dpc's nearest (floor(x * in / out), by scale_factor
 * or by size: *use_sf) picks the pixels ONNX's mode picks, else the
 * refusal. */
static dpc_status resize_nearest(imp *I, const char *ctm, const char *nm, bool ambiguous, bool have_scales,
                                 const double *sc, const double *ons, const int64_t *in, const int64_t *o,
                                 bool *use_sf) {
    for (int tries = 0; tries < 2; tries++) {
        bool same = true;
        for (int i = 0; i < 2 && same; i++)
            for (int64_t j = 0; j < o[i] && same; j++) {
                int64_t want = onnx_nearest(nm, onnx_coord(ctm, (double)j, ons[i], in[i], o[i]), in[i]);
                if (ambiguous && onnx_nearest("round_prefer_floor", onnx_coord(ctm, (double)j, ons[i], in[i], o[i]),
                                        in[i]) != want)
                    return imp_err(I, "nearest rounding is ambiguous before opset 11 for these sizes "
                                      "(floor and round_prefer_floor differ)");
                same = dpc_nearest(j, *use_sf ? sc[2 + i] : 0, in[i], o[i]) == want;
            }
        if (same)
            return DPC_OK;
        if (!have_scales)
            break;
        *use_sf = !*use_sf;
    }
    dpc_buf b;
    dpc_buf_init(&b);
    emit_comment_text(&b, ctm);
    emit_comment_text(&b, "/");
    emit_comment_text(&b, nm);
    dpc_status s = imp_err(I, "nearest with %s picks other source pixels than dpc's nearest (floor(x * in / out)) "
                              "for %lldx%lld -> %lldx%lld",
                           b.data ? b.data : "?", (long long)in[0], (long long)in[1], (long long)o[0],
                           (long long)o[1]);
    dpc_buf_free(&b);
    return s;
}

/* linear: align_corners, or half_pixel where dpc's bilinear computes the
 * same; the other coordinate modes refused. */
static dpc_status resize_linear(imp *I, const char *ctm, bool have_scales, const double *sc, const double *ons,
                                const int64_t *in, const int64_t *o, bool *align, bool *use_sf) {
    if (!strcmp(ctm, "align_corners")) {
        *align = true;
        *use_sf = false;
        for (int i = 0; i < 2; i++)
            if (have_scales && (double)in[i] * sc[2 + i] != (double)o[i])
                return imp_err(I, "align_corners with a scale that does not give a whole output size");
    } else if (!strcmp(ctm, "half_pixel") || !strcmp(ctm, "pytorch_half_pixel")) {
        for (int i = 0; i < 2; i++) {
            if (!strcmp(ctm, "pytorch_half_pixel") && o[i] == 1 && in[i] > 1)
                return imp_err(I, "pytorch_half_pixel to an output size of 1 is not supported");
            if (o[i] == in[i] && ons[i] != 1)
                return imp_err(I, "a scale other than 1 that keeps the size is not supported");
        }
    } else
        return imp_err(I, "linear with coordinate_transformation_mode=%s is not supported (dpc's bilinear is "
                          "half_pixel or align_corners)",
                       !strcmp(ctm, "asymmetric") ? "asymmetric" : "tf_half_pixel_for_nn");
    return DPC_OK;
}

/* Resize (opsets 10-21) and Upsample (7-9) of a rank-4 [N, C, H, W] input
 * over H and W, as interpolate(): nearest when ONNX's index map equals
 * dpc's for these sizes, linear as bilinear for the coordinate modes that
 * are PyTorch's (half_pixel, pytorch_half_pixel, align_corners). */
dpc_status imp_op_resize(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    bool up = !strcmp(n->op_type, "Upsample");
    if (!V(x)->shaped)
        return imp_err(I, "an input of unknown shape");
    ival *X = V(x);
    if (X->c)
        return imp_err(I, "a Resize of a constant is not supported");
    if (X->kind != VK_FLOAT)
        return imp_err(I, "on a non-float tensor (dpc interpolates float32 only)");
    if (X->rank != 4)
        return imp_err(I, "only rank-4 [N, C, H, W] inputs are supported (dpc's interpolate is 2-D), got rank %d",
                       X->rank);
    for (int i = 1; i < 4; i++)
        if (X->d[i].s)
            return imp_err(I, "channels and spatial dims must be fixed (give --dim NAME=SIZE)");
    const char *mode = imp_attr_s(I, n, "mode", "nearest");
    if (!mode)
        return imp_fail(I);
    bool linear = !strcmp(mode, "linear") || (up && !strcmp(mode, "bilinear"));
    if (!linear && strcmp(mode, "nearest"))
        return !strcmp(mode, "cubic") ? imp_err(I, "mode=cubic is not supported (dpc has no bicubic interpolation)")
                                      : imp_bad_string(I, "mode", mode);
    bool ambiguous = !up && I->opset < 11; /* Resize-10's rounding (resize_coord_modes) */
    const char *ctm, *nm;
    dpc_status s;
    if ((s = resize_coord_modes(I, n, up, &ctm, &nm)) != DPC_OK)
        return s;
    int pos[4] = {0, 1, 2, 3}, nax = 4;
    if ((s = resize_axes(I, n, pos, &nax)) != DPC_OK)
        return s;
    bool antialias = imp_attr_i(I, n, "antialias", 0) != 0;
    /* the scales or the sizes */
    double sc[4] = {1, 1, 1, 1};
    bool have_scales = false;
    sdim sz[4];
    for (int i = 0; i < 4; i++)
        sz[i] = X->d[i];
    if ((s = resize_targets(I, n, up, pos, nax, sc, sz, &have_scales)) != DPC_OK)
        return s;
    int64_t in[2] = {X->d[2].v, X->d[3].v}, o[2] = {0, 0};
    if ((s = resize_out_size(I, X, sc, sz, have_scales, in, o)) != DPC_OK)
        return s;
    double ons[2]; /* ONNX's scale per spatial dim */
    for (int i = 0; i < 2; i++)
        ons[i] = have_scales ? sc[2 + i] : (double)o[i] / (double)in[i];
    if (antialias && linear && (ons[0] < 1 || ons[1] < 1))
        return imp_err(I, "antialias=1 when downscaling is not supported (dpc's interpolate does not antialias)");
    /* the interpolate() arguments: scale_factor when ONNX's scales were
     * given (dpc then uses 1/scale, as ONNX does), else size */
    bool use_sf = have_scales, align = false;
    if (!linear)
        s = resize_nearest(I, ctm, nm, ambiguous, have_scales, sc, ons, in, o, &use_sf);
    else
        s = resize_linear(I, ctm, have_scales, sc, ons, in, o, &align, &use_sf);
    if (s != DPC_OK)
        return s;
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!e)
        return imp_fail(I);
    const char *arg = use_sf ? imp_printf(I, "scale_factor=(%s, %s)", scale_lit(I, sc[2]), scale_lit(I, sc[3]))
                             : imp_printf(I, "size=(%lld, %lld)", (long long)o[0], (long long)o[1]);
    const char *ex = arg ? imp_printf(I, "interpolate(%s, %s, mode=\"%s\"%s)", e, arg, linear ? "bilinear" : "nearest",
                                      linear ? (align ? ", align_corners=True" : ", align_corners=False") : "")
                         : NULL;
    X = V(x);
    sdim d[4] = {X->d[0], X->d[1], {o[0], 0}, {o[1], 0}};
    int uses[1] = {u};
    return imp_stmt_value(I, out, NULL, ex, VK_FLOAT, 4, d, uses, 1);
}
