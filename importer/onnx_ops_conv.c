/* onnx_ops_conv.c - the windowed ops: Conv -> Conv2d, ConvTranspose ->
 * ConvTranspose2d (asymmetric pads cropped), AveragePool/MaxPool and the
 * global pools, 2-D. They share the reading of kernel, stride, pad and
 * dilation attributes and the output size arithmetic. */
#include "onnx_ops_common.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dpc_status pads2(imp *I, const Onnx__NodeProto *n, int64_t *ph, int64_t *pw) {
    const char *ap = imp_attr_s(I, n, "auto_pad", "NOTSET");
    if (!ap)
        return I->e->code;
    if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0) {
        dpc_buf b;
        dpc_buf_init(&b);
        emit_comment_text(&b, ap);
        dpc_status s = imp_err(I, "attribute auto_pad=%s is not supported", b.data ? b.data : "?");
        dpc_buf_free(&b);
        return s;
    }
    const int64_t *p;
    int np = imp_attr_ints(I, n, "pads", &p);
    *ph = *pw = 0;
    if (np < 0 || strcmp(ap, "VALID") == 0)
        return DPC_OK;
    if (np != 4)
        return imp_err(I, "pads has %d values (4 expected for 2-D)", np);
    if (p[0] != p[2] || p[1] != p[3])
        return imp_err(I, "asymmetric pads (%lld, %lld, %lld, %lld) are not supported", (long long)p[0],
                       (long long)p[1], (long long)p[2], (long long)p[3]);
    if (p[0] < 0 || p[1] < 0 || p[0] > 1 << 20 || p[1] > 1 << 20)
        return imp_err(I, "pads out of range");
    *ph = p[0], *pw = p[1];
    return DPC_OK;
}

static dpc_status pair_attr(imp *I, const Onnx__NodeProto *n, const char *name, int64_t dflt, int64_t *h, int64_t *w) {
    const int64_t *p;
    int k = imp_attr_ints(I, n, name, &p);
    *h = *w = dflt;
    if (k < 0)
        return DPC_OK;
    if (k != 2)
        return imp_err(I, "%s has %d values (2 expected for 2-D)", name, k);
    if (p[0] < 1 || p[1] < 1 || p[0] > 1 << 20 || p[1] > 1 << 20)
        return imp_err(I, "%s out of range", name);
    *h = p[0], *w = p[1];
    return DPC_OK;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil, bool ceil_mode) {
    int64_t eff = dil * (k - 1) + 1, num = in + 2 * p - eff;
    if (num < 0)
        return -1;
    int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return o;
}

dpc_status imp_op_conv(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), w = imp_in(I, n, 1), b, out = imp_out(I, n, 0);
    if (!imp_opt(I, n, 2, &b))
        b = -1; /* no bias */
    ival *X = V(x);
    if (!is_const(I, w) || (b >= 0 && !is_const(I, b)))
        return imp_err(I, "weights that are not initializers are not supported");
    dpc_tensor *W = V(w)->c;
    if (X->rank != 4 || W->rank != 4)
        return imp_err(I, "only 2-D convolutions (rank-4 input and weight) are supported, got rank %d", X->rank);
    if (X->c)
        return imp_err(I, "a convolution of a constant");
    int64_t kh, kw, sh, sw, dh, dw, ph, pw, grp = imp_attr_i(I, n, "group", 1);
    dpc_status s;
    if ((s = pair_attr(I, n, "strides", 1, &sh, &sw)) || (s = pair_attr(I, n, "dilations", 1, &dh, &dw)) ||
        (s = pair_attr(I, n, "kernel_shape", 0, &kh, &kw)) || (s = pads2(I, n, &ph, &pw)))
        return s;
    if (kh && (kh != W->shape[2] || kw != W->shape[3]))
        return imp_err(I, "kernel_shape differs from the weight's");
    kh = W->shape[2], kw = W->shape[3];
    int64_t cin = X->d[1].v, cout = W->shape[0];
    if (X->d[1].s || X->d[2].s || X->d[3].s)
        return imp_err(I, "channels and spatial dims must be fixed (give --dim NAME=SIZE)");
    if (grp < 1 || cin % grp || cout % grp || W->shape[1] * grp != cin)
        return imp_err(I, "group %lld does not fit %lld input channels and a weight of %lld", (long long)grp,
                       (long long)cin, (long long)W->shape[1]);
    if (b >= 0 && (V(b)->c->rank != 1 || V(b)->c->shape[0] != cout))
        return imp_err(I, "a bias of the wrong shape");
    int64_t ho = out_size(X->d[2].v, kh, sh, ph, dh, false), wo = out_size(X->d[3].v, kw, sw, pw, dw, false);
    if (ho < 1 || wo < 1)
        return imp_err(I, "the kernel is larger than the padded input");
    const char *mem = imp_member_name(I, n, w, "conv");
    if (!mem)
        return DPC_ENOMEM;
    dpc_buf db;
    dpc_buf_init(&db);
    dpc_buf_printf(&db, "%s = Conv2d(%lld, %lld, kernel_size=(%lld, %lld), stride=(%lld, %lld)", mem, (long long)cin,
                   (long long)cout, (long long)kh, (long long)kw, (long long)sh, (long long)sw);
    if (ph || pw)
        dpc_buf_printf(&db, ", padding=(%lld, %lld)", (long long)ph, (long long)pw);
    if (dh != 1 || dw != 1)
        dpc_buf_printf(&db, ", dilation=(%lld, %lld)", (long long)dh, (long long)dw);
    if (grp != 1)
        dpc_buf_printf(&db, ", groups=%lld", (long long)grp);
    if (b < 0)
        dpc_buf_puts(&db, ", bias=False");
    dpc_buf_puts(&db, ")");
    char *dt = dpc_buf_take(&db);
    char *decl = dt ? imp_member_line(I, dt, w) : NULL;
    dpc_free(dt);
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!decl || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    sdim d[4] = {X->d[0], {cout, 0}, {ho, 0}, {wo, 0}};
    if ((s = imp_add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, 4, d, u, -1, -1)) != DPC_OK)
        return s;
    if ((s = imp_weight(I, mem, "weight", W)) != DPC_OK)
        return s;
    return b >= 0 ? imp_weight(I, mem, "bias", V(b)->c) : DPC_OK;
}

dpc_status imp_op_pool(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (X->rank != 4 || X->c)
        return imp_err(I, "only 2-D pooling of a computed rank-4 tensor is supported");
    if (X->d[1].s || X->d[2].s || X->d[3].s)
        return imp_err(I, "channels and spatial dims must be fixed");
    bool mx = n->op_type[0] == 'M';
    int ix;
    if (imp_opt_out(I, n, 1, &ix))
        return imp_err(I, "the Indices output is not supported");
    int64_t kh, kw, sh, sw, dh = 1, dw = 1, ph, pw;
    dpc_status s;
    if ((s = pair_attr(I, n, "kernel_shape", 0, &kh, &kw)) || (s = pair_attr(I, n, "strides", 1, &sh, &sw)) ||
        (s = pads2(I, n, &ph, &pw)) || (s = pair_attr(I, n, "dilations", 1, &dh, &dw)))
        return s;
    if (!mx && (dh != 1 || dw != 1)) /* (AveragePool's from opset 19) */
        return imp_err(I, "a dilated AveragePool is not supported (PyTorch's AvgPool2d has no dilation)");
    if (!kh)
        return imp_err(I, "kernel_shape is required");
    if (mx && imp_attr_i(I, n, "storage_order", 0) != 0)
        return imp_err(I, "storage_order=1 is not supported");
    bool ceil_mode = imp_attr_i(I, n, "ceil_mode", 0) != 0;
    if (2 * ph > kh || 2 * pw > kw)
        return imp_err(I, "padding larger than half the kernel (PyTorch's pooling refuses it)");
    int64_t ho = out_size(X->d[2].v, kh, sh, ph, dh, ceil_mode), wo = out_size(X->d[3].v, kw, sw, pw, dw, ceil_mode);
    if (ho < 1 || wo < 1)
        return imp_err(I, "the window is larger than the padded input");
    const char *mem = imp_member_name(I, n, -1, mx ? "maxpool" : "avgpool");
    if (!mem)
        return DPC_ENOMEM;
    const char *decl;
    if (mx)
        decl = imp_printf(I, "%s = MaxPool2d(kernel_size=(%lld, %lld), stride=(%lld, %lld), padding=(%lld, %lld), "
                             "dilation=(%lld, %lld), ceil_mode=%s)", mem, (long long)kh, (long long)kw, (long long)sh,
                          (long long)sw, (long long)ph, (long long)pw, (long long)dh, (long long)dw,
                          ceil_mode ? "True" : "False");
    else
        decl = imp_printf(I, "%s = AvgPool2d(kernel_size=(%lld, %lld), stride=(%lld, %lld), padding=(%lld, %lld), "
                             "ceil_mode=%s, count_include_pad=%s)", mem, (long long)kh, (long long)kw, (long long)sh,
                          (long long)sw, (long long)ph, (long long)pw, ceil_mode ? "True" : "False",
                          imp_attr_i(I, n, "count_include_pad", 0) ? "True" : "False");
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!decl || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    sdim d[4] = {X->d[0], X->d[1], {ho, 0}, {wo, 0}};
    return imp_add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, 4, d, u, -1, -1);
}

dpc_status imp_op_global_pool(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (X->rank != 4 || X->c)
        return imp_err(I, "only a computed rank-4 input is supported");
    int u;
    const char *e = imp_ref(I, x, &u), *ex;
    if (!e)
        return I->e->code;
    if (n->op_type[6] == 'A')
        ex = imp_printf(I, "adaptive_avg_pool2d(%s, 1)", e);
    else
        ex = imp_printf(I, "amax(amax(%s, 3, keepdim=True), 2, keepdim=True)", e);
    sdim d[4] = {X->d[0], X->d[1], {1, 0}, {1, 0}};
    return imp_add_stmt(I, out, NULL, ex, VK_FLOAT, 4, d, u, -1, -1);
}

static dpc_status pair(imp *I, const Onnx__NodeProto *n, const char *name, int64_t dflt, int64_t lo, int64_t *v) {
    const int64_t *p;
    int k = imp_attr_ints(I, n, name, &p);
    v[0] = v[1] = dflt;
    if (k < 0)
        return DPC_OK;
    if (k != 2)
        return imp_err(I, "%s has %d values (2 expected for 2-D)", name, k);
    for (int i = 0; i < 2; i++) {
        if (p[i] < lo || p[i] > 1 << 20)
            return imp_err(I, "%s out of range", name);
        v[i] = p[i];
    }
    return DPC_OK;
}

static int64_t floordiv2(int64_t a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

/* ConvTranspose's pads at the start (pb) and end (pe) of H and W: from
 * output_shape or SAME_* (total = full - wanted, split as ONNX does), else
 * the pads attribute (none for VALID). */
static dpc_status convt_pads(imp *I, const Onnx__NodeProto *n, const char *ap, bool same, const int64_t *in,
                             const int64_t *s, const int64_t *full, int64_t *pb, int64_t *pe) {
    const int64_t *osh;
    int nos = imp_attr_ints(I, n, "output_shape", &osh);
    if (nos >= 0 || same) {
        int64_t want[2];
        if (nos >= 0) {
            if (nos != 2 && nos != 4)
                return imp_err(I, "output_shape has %d values (2 expected)", nos);
            want[0] = osh[nos - 2], want[1] = osh[nos - 1];
        } else
            want[0] = in[0] * s[0], want[1] = in[1] * s[1];
        for (int i = 0; i < 2; i++) {
            if (want[i] < 1 || want[i] > 1 << 24)
                return imp_err(I, "output_shape out of range");
            int64_t total = full[i] - want[i];
            if (!strcmp(ap, "SAME_UPPER"))
                pb[i] = floordiv2(total), pe[i] = total - pb[i];
            else
                pb[i] = total - floordiv2(total), pe[i] = floordiv2(total);
        }
    } else if (strcmp(ap, "VALID")) {
        const int64_t *p;
        int np = imp_attr_ints(I, n, "pads", &p);
        if (np >= 0 && np != 4)
            return imp_err(I, "pads has %d values (4 expected for 2-D)", np);
        for (int i = 0; i < 2 && np == 4; i++) {
            if (p[i] < 0 || p[i + 2] < 0 || p[i] > 1 << 20 || p[i + 2] > 1 << 20)
                return imp_err(I, "pads out of range");
            pb[i] = p[i], pe[i] = p[i + 2];
        }
    }
    return DPC_OK;
}

/* The output size o, and what ConvTranspose2d is given for it: padding
 * tp, output_padding top, and the crop of the end that a negative one
 * becomes (crop). */
static dpc_status convt_geometry(imp *I, const int64_t *full, const int64_t *pb, const int64_t *pe, const int64_t *op,
                                 const int64_t *s, const int64_t *dl, int64_t *tp, int64_t *top, int64_t *crop,
                                 int64_t *o) {
    for (int i = 0; i < 2; i++) {
        if (pb[i] < 0)
            return imp_err(I, "output_shape larger than the transposed convolution's at the start is not supported");
        o[i] = full[i] - pb[i] - pe[i];
        if (o[i] < 1)
            return imp_err(I, "the output would be empty");
        tp[i] = pb[i];
        top[i] = op[i] + pb[i] - pe[i];
        crop[i] = 0;
        if (top[i] < 0)
            crop[i] = -top[i], top[i] = 0;
        if (top[i] >= s[i] && top[i] >= dl[i])
            return imp_err(I, "pads/output_shape giving an output padding of %lld (not below the stride %lld or "
                              "dilation %lld) are not supported",
                           (long long)top[i], (long long)s[i], (long long)dl[i]);
    }
    return DPC_OK;
}

/* The ConvTranspose2d member's declaration (owned by the caller; NULL when
 * out of memory). */
static char *convt_decl(const char *mem, int64_t cin, int64_t cout, const int64_t *k, const int64_t *s,
                        const int64_t *tp, const int64_t *top, int64_t grp, bool bias, const int64_t *dl) {
    dpc_buf db;
    dpc_buf_init(&db);
    dpc_buf_printf(&db, "%s = ConvTranspose2d(%lld, %lld, kernel_size=(%lld, %lld), stride=(%lld, %lld)", mem,
                   (long long)cin, (long long)cout, (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1]);
    if (tp[0] || tp[1])
        dpc_buf_printf(&db, ", padding=(%lld, %lld)", (long long)tp[0], (long long)tp[1]);
    if (top[0] || top[1])
        dpc_buf_printf(&db, ", output_padding=(%lld, %lld)", (long long)top[0], (long long)top[1]);
    if (grp != 1)
        dpc_buf_printf(&db, ", groups=%lld", (long long)grp);
    if (!bias)
        dpc_buf_puts(&db, ", bias=False");
    if (dl[0] != 1 || dl[1] != 1)
        dpc_buf_printf(&db, ", dilation=(%lld, %lld)", (long long)dl[0], (long long)dl[1]);
    dpc_buf_puts(&db, ")");
    return dpc_buf_take(&db);
}

/* ConvTranspose (2-D) -> ConvTranspose2d: ONNX's pads (start, end) become
 * PyTorch's symmetric padding = start and output_padding = output_padding +
 * start - end; an end beyond that is cropped by a slice. */
dpc_status imp_op_convtranspose(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), w = imp_in(I, n, 1), b, out = imp_out(I, n, 0);
    if (!imp_opt(I, n, 2, &b))
        b = -1; /* no bias */
    if (!V(x)->shaped)
        return imp_err(I, "an input of unknown shape");
    if (!V(w)->c || V(w)->kind != VK_FLOAT || (b >= 0 && (!V(b)->c || V(b)->kind != VK_FLOAT)))
        return imp_err(I, "weights that are not initializers are not supported");
    ival *X = V(x);
    dpc_tensor *W = V(w)->c;
    if (X->rank != 4 || W->rank != 4)
        return imp_err(I, "only 2-D transposed convolutions (rank-4 input and weight) are supported, got rank %d",
                       X->rank);
    if (X->c)
        return imp_err(I, "a convolution of a constant");
    if (X->kind != VK_FLOAT)
        return imp_err(I, "on a non-float tensor");
    for (int i = 1; i < 4; i++)
        if (X->d[i].s)
            return imp_err(I, "channels and spatial dims must be fixed (give --dim NAME=SIZE)");
    int64_t s[2], dl[2], k[2], op[2], grp = imp_attr_i(I, n, "group", 1);
    dpc_status st;
    if ((st = pair(I, n, "strides", 1, 1, s)) || (st = pair(I, n, "dilations", 1, 1, dl)) ||
        (st = pair(I, n, "kernel_shape", 0, 1, k)) || (st = pair(I, n, "output_padding", 0, 0, op)))
        return st;
    if (k[0] && (k[0] != W->shape[2] || k[1] != W->shape[3]))
        return imp_err(I, "kernel_shape differs from the weight's");
    k[0] = W->shape[2], k[1] = W->shape[3];
    int64_t cin = X->d[1].v;
    if (grp < 1 || W->shape[0] != cin || cin % grp)
        return imp_err(I, "group %lld does not fit %lld input channels and a weight of %lld", (long long)grp,
                       (long long)cin, (long long)W->shape[0]);
    int64_t cout = W->shape[1] * grp;
    if (b >= 0 && (V(b)->c->rank != 1 || V(b)->c->shape[0] != cout))
        return imp_err(I, "a bias of the wrong shape");
    const char *ap = imp_attr_s(I, n, "auto_pad", "NOTSET");
    if (!ap)
        return imp_fail(I);
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    if (!same && strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return imp_bad_string(I, "auto_pad", ap);
    int64_t full[2], pb[2] = {0, 0}, pe[2] = {0, 0}, in[2] = {X->d[2].v, X->d[3].v};
    for (int i = 0; i < 2; i++)
        full[i] = s[i] * (in[i] - 1) + op[i] + (k[i] - 1) * dl[i] + 1;
    if ((st = convt_pads(I, n, ap, same, in, s, full, pb, pe)) != DPC_OK)
        return st;
    int64_t tp[2], top[2], crop[2], o[2];
    if ((st = convt_geometry(I, full, pb, pe, op, s, dl, tp, top, crop, o)) != DPC_OK)
        return st;
    const char *mem = imp_member_name(I, n, w, "convt");
    if (!mem)
        return imp_fail(I);
    char *dt = convt_decl(mem, cin, cout, k, s, tp, top, grp, b >= 0, dl);
    char *decl = dt ? imp_member_line(I, dt, w) : NULL;
    dpc_free(dt);
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!decl || !e)
        return imp_fail(I);
    bool crops = crop[0] || crop[1];
    int y = crops ? imp_tmp_value(I, "nn") : out;
    if (y < 0)
        return imp_fail(I);
    X = V(x);
    sdim d[4] = {X->d[0], {cout, 0}, {o[0] + crop[0], 0}, {o[1] + crop[1], 0}};
    int uses[1] = {u};
    if ((st = imp_stmt_value(I, y, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, 4, d, uses, 1)) != DPC_OK)
        return st;
    if ((st = imp_weight(I, mem, "weight", W)) != DPC_OK)
        return st;
    if (b >= 0 && (st = imp_weight(I, mem, "bias", V(b)->c)) != DPC_OK)
        return st;
    if (!crops)
        return DPC_OK;
    const char *ye = imp_ref(I, y, &u);
    if (!ye)
        return imp_fail(I);
    uses[0] = u;
    d[2].v = o[0], d[3].v = o[1];
    return imp_stmt_value(I, out, NULL, imp_printf(I, "%s[:, :, 0:%lld, 0:%lld]", ye, (long long)o[0], (long long)o[1]),
                VK_FLOAT, 4, d, uses, 1);
}
