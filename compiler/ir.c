/* ir.c - IR nodes, shapes and the `dpc ir` printer. */
#include "ir.h"

#include <stdio.h>
#include <string.h>

ir_node *ir_new(ir_graph *g, ir_op op, loc at) {
    ir_node *n = arena_alloc(g->arena, sizeof *n);
    n->id = g->nodes.len;
    n->op = op;
    n->at = at;
    n->param_index = -1;
    n->input_index = -1;
    vec_push(g->arena, &g->nodes, n);
    return n;
}

int ir_cat_count(const ir_node *n) { return n->nin + n->more.len; }
int ir_cat_operand(const ir_node *n, int i) {
    return i < n->nin ? n->in[i] : (int)(intptr_t)n->more.items[i - n->nin];
}

void shape_str(const shape *s, const char *batch, char *out, size_t n) {
    size_t pos = 0;
    pos += (size_t)snprintf(out + pos, n - pos, "[");
    for (int i = 0; i < s->rank && pos < n; i++) {
        const dim *d = &s->d[i];
        const char *sep = i ? ", " : "";
        if (!d->sym)
            pos += (size_t)snprintf(out + pos, n - pos, "%s%lld", sep, (long long)d->k);
        else if (d->k == 1)
            pos += (size_t)snprintf(out + pos, n - pos, "%s%s", sep, batch ? batch : "N");
        else
            pos += (size_t)snprintf(out + pos, n - pos, "%s%lld*%s", sep, (long long)d->k, batch ? batch : "N");
    }
    if (pos < n)
        snprintf(out + pos, n - pos, "]");
}

bool shape_eq(const shape *a, const shape *b) {
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i].k != b->d[i].k || a->d[i].sym != b->d[i].sym)
            return false;
    return true;
}

int64_t shape_numel(const shape *s, bool *sym) {
    int64_t k = 1;
    *sym = false;
    for (int i = 0; i < s->rank; i++) {
        /* the IR builder keeps every shape within DPC_MAX_NUMEL elements;
         * saturate rather than overflow if a shape came from elsewhere */
        if (__builtin_mul_overflow(k, s->d[i].k, &k))
            k = INT64_MAX;
        *sym |= s->d[i].sym;
    }
    return k;
}

const char *ir_dtype_name(ir_dtype t) {
    switch (t) {
    case IR_F32: return "f32";
    case IR_I64: return "i64";
    case IR_I32: return "i32";
    case IR_BOOL: return "bool";
    }
    return "?";
}

static void print_conv(const conv_attr *a, dpc_buf *out) {
    dpc_buf_printf(out, " stride=(%lld, %lld)", (long long)a->stride[0], (long long)a->stride[1]);
    if (a->pad[2] == a->pad[0] && a->pad[3] == a->pad[1])
        dpc_buf_printf(out, " padding=(%lld, %lld)", (long long)a->pad[0], (long long)a->pad[1]);
    else /* padding="same" with an even kernel: (top, bottom), (left, right) */
        dpc_buf_printf(out, " padding=((%lld, %lld), (%lld, %lld))", (long long)a->pad[0], (long long)a->pad[2],
                       (long long)a->pad[1], (long long)a->pad[3]);
    dpc_buf_printf(out, " dilation=(%lld, %lld) groups=%lld", (long long)a->dil[0], (long long)a->dil[1],
                   (long long)a->groups);
}

static void print_pool(const ir_node *n, dpc_buf *out) {
    const pool_attr *a = &n->attr.pool;
    if (n->op == OP_ADAPTIVE_AVGPOOL2D || n->op == OP_ADAPTIVE_MAXPOOL2D)
        return;
    dpc_buf_printf(out, " kernel=(%lld, %lld) stride=(%lld, %lld) padding=(%lld, %lld)", (long long)a->k[0],
                   (long long)a->k[1], (long long)a->s[0], (long long)a->s[1], (long long)a->p[0], (long long)a->p[1]);
    if (n->op == OP_MAXPOOL2D)
        dpc_buf_printf(out, " dilation=(%lld, %lld)", (long long)a->d[0], (long long)a->d[1]);
    else if (!a->count_include_pad)
        dpc_buf_puts(out, " count_include_pad=False");
    if (n->op == OP_AVGPOOL2D && a->divisor)
        dpc_buf_printf(out, " divisor=%lld", (long long)a->divisor);
    if (a->ceil)
        dpc_buf_puts(out, " ceil_mode=True");
}

/* conv_transpose2d: conv2d's attributes and output_padding; upsample: the
 * scales given (PyTorch's `scales`), align_corners. */
static void print_resample(const ir_node *n, dpc_buf *out) {
    if (n->op == OP_CONV_TRANSPOSE2D) {
        print_conv(&n->attr.conv, out);
        dpc_buf_printf(out, " output_padding=(%lld, %lld)", (long long)n->attr.conv.out_pad[0],
                       (long long)n->attr.conv.out_pad[1]);
        return;
    }
    const resample_attr *a = &n->attr.rs;
    if (a->scale[0] > 0 || a->scale[1] > 0) {
        char h[64], w[64];
        dpc_format_pyfloat(a->scale[0], h, sizeof h);
        dpc_format_pyfloat(a->scale[1], w, sizeof w);
        dpc_buf_printf(out, " scales=(%s, %s)", h, w);
    }
    if (a->align_corners)
        dpc_buf_puts(out, " align_corners=True");
}

static void print_leaf(const ir_node *n, dpc_buf *out) {
    char num[64];
    if (n->op == OP_BATCH)
        return;
    if (n->op == OP_SCALAR && !n->attr.leaf.has_default) {
        dpc_buf_puts(out, " required"); /* no default: dpc run needs --kw */
        return;
    }
    dpc_format_pyfloat(n->attr.leaf.value, num, sizeof num);
    if (n->op == OP_IOTA) {
        char step[64];
        dpc_format_pyfloat(n->attr.leaf.step, step, sizeof step);
        dpc_buf_printf(out, " start=%s step=%s dim=%d", num, step, n->attr.leaf.axis);
        return;
    }
    dpc_buf_printf(out, " %s%s", n->op == OP_SCALAR ? "default=" : "", num);
}

/* A slice as PyTorch's index: [:, 0, 1:5:2, None]. */
static void print_slice(const ir_node *n, dpc_buf *out) {
    const view_attr *v = &n->attr.view;
    int in = 0;
    dpc_buf_puts(out, " [");
    for (int j = 0; j <= n->sh.rank; j++) {
        int upto = j < n->sh.rank ? v->src[j] : v->rank_in;
        if (upto < 0) {
            dpc_buf_printf(out, "%sNone", j || in ? ", " : "");
            continue;
        }
        for (; in < upto; in++) /* indexed dims before this one */
            dpc_buf_printf(out, "%s%lld", j || in ? ", " : "", (long long)v->start[in]);
        if (j == n->sh.rank)
            break;
        const char *sep = j || in ? ", " : "";
        const dim *d = &n->sh.d[j];
        if (d->sym)
            dpc_buf_printf(out, "%s:", sep);
        else {
            long long st = v->start[in], stop = d->k ? st + (d->k - 1) * v->step[in] + 1 : st;
            dpc_buf_printf(out, "%s%lld:%lld", sep, st, stop);
            if (v->step[in] != 1)
                dpc_buf_printf(out, ":%lld", (long long)v->step[in]);
        }
        in++;
    }
    dpc_buf_puts(out, "]");
}

/* The attributes by op class: each class's attribute struct (ir.h). */
static void print_attrs(const ir_node *n, dpc_buf *out) {
    char num[64];
    switch (ir_op_class(n->op)) {
    case OC_LEAF: print_leaf(n, out); break;
    case OC_CONV: print_conv(&n->attr.conv, out); break;
    case OC_POOL: print_pool(n, out); break;
    case OC_RESAMPLE: print_resample(n, out); break;
    case OC_CHANNEL:
        dpc_format_pyfloat(n->attr.norm.eps, num, sizeof num);
        dpc_buf_printf(out, " eps=%s", num);
        break;
    case OC_ROW:
        if (n->op == OP_LAYERNORM) {
            dpc_format_pyfloat(n->attr.norm.eps, num, sizeof num);
            dpc_buf_printf(out, " eps=%s dims=%d", num, n->attr.norm.dims);
        } else
            dpc_buf_printf(out, " dim=%d", n->attr.ax.axis);
        break;
    case OC_REDUCE: dpc_buf_printf(out, " dim=%d%s", n->attr.ax.axis, n->attr.ax.keepdim ? " keepdim" : ""); break;
    case OC_CAT: dpc_buf_printf(out, " dim=%d", n->attr.ax.axis); break;
    case OC_VIEW:
        if (n->op == OP_SLICE)
            print_slice(n, out);
        if (n->op != OP_PERMUTE)
            break;
        dpc_buf_puts(out, " perm=(");
        for (int i = 0; i < n->sh.rank; i++)
            dpc_buf_printf(out, "%s%d", i ? ", " : "", n->attr.perm.perm[i]);
        dpc_buf_puts(out, ")");
        break;
    default: break;
    }
}

void ir_print(const ir_graph *g, dpc_buf *out) {
    char sh[256];
    dpc_buf_printf(out, "graph %s(", g->model_name);
    for (int i = 0; i < g->inputs.len; i++) {
        const ir_node *n = g->inputs.items[i];
        shape_str(&n->sh, g->batch_name, sh, sizeof sh);
        dpc_buf_printf(out, "%s%%%d: %s%s", i ? ", " : "", n->id, ir_dtype_name(n->dt), sh);
    }
    for (int i = 0; i < g->scalars.len; i++) {
        const ir_node *n = g->scalars.items[i];
        dpc_buf_printf(out, ", %s: %s", n->name, n->attr.leaf.type == 0 ? "float" : n->attr.leaf.type == 1 ? "int" : "bool");
    }
    dpc_buf_puts(out, ")\n");
    for (int i = 0; i < g->rtdims.len; i++) { /* the values this graph was built for */
        const ir_rtdim *r = g->rtdims.items[i];
        dpc_buf_printf(out, "  # run-time dim %s = %lld\n", r->name, (long long)r->value);
    }
    for (int i = 0; i < g->nodes.len; i++) {
        const ir_node *n = g->nodes.items[i];
        dpc_buf_printf(out, "  %%%d = %s", n->id, ir_op_name(n->op));
        if (n->op == OP_INPUT || n->op == OP_SCALAR || n->op == OP_PARAM || n->op == OP_BATCH)
            dpc_buf_printf(out, " %s", n->name); /* OP_BATCH: the batch name */
        int cnt = n->op == OP_CAT ? ir_cat_count(n) : n->nin;
        for (int k = 0; k < cnt; k++)
            dpc_buf_printf(out, "%s%%%d", k ? ", " : " ", n->op == OP_CAT ? ir_cat_operand(n, k) : n->in[k]);
        print_attrs(n, out);
        shape_str(&n->sh, g->batch_name, sh, sizeof sh);
        dpc_buf_printf(out, " : %s%s", ir_dtype_name(n->dt), sh);
        if (n->at.file)
            dpc_buf_printf(out, "  # %s:%d", n->at.file->path, n->at.line);
        if (n->scope && n->scope[0])
            dpc_buf_printf(out, " (%s)", n->scope);
        dpc_buf_puts(out, "\n");
    }
    dpc_buf_puts(out, "  return");
    for (int i = 0; i < g->outputs.len; i++)
        dpc_buf_printf(out, "%s%%%d", i ? ", " : " ", ((ir_node *)g->outputs.items[i])->id);
    dpc_buf_puts(out, "\n");
}
