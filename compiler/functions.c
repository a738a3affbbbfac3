/* functions.c - the table of forward functions (torch.* and F.*): their
 * parameters, binding a call to them, and the dispatch to their lowerings.
 * One list serves every pass: the op table's one-to-one elementwise
 * functions (IR_OPS rows with a function name), then FUNCTIONS below.
 *
 * The lowerings are in fn_*.c, one file per family (functions.h lists
 * them); this table sits above them all. */
#include "functions.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

static const char *const P_ACT8[] = {"input", "inplace"};
static const char *const P_LEAKY[] = {"input", "negative_slope", "inplace"};
static const char *const P_HARDTANH[] = {"input", "min_val", "max_val", "inplace"};
static const char *const P_GN[] = {"input", "num_groups", "weight", "bias", "eps"};

/* float("-inf"), float(2), int(2.5), bool(0): numbers, not tensors. */
static bool number_cast(builder *b, const char *fn, const fargs *a, loc at, sv *out) {
    bool f = strcmp(fn, "float") == 0, i = strcmp(fn, "int") == 0, bo = strcmp(fn, "bool") == 0;
    if (!(f || i || bo) || a->n != 1 || a->names[0] || a->v[0].k != SV_NUM)
        return false;
    const val *v = &a->v[0].v;
    double d = 0;
    memset(out, 0, sizeof *out);
    out->k = SV_NUM;
    if (v->kind == V_STR) {
        const char *s = v->s;
        bool neg = *s == '-';
        s += *s == '-' || *s == '+';
        if (f && (strcmp(s, "inf") == 0 || strcmp(s, "infinity") == 0))
            d = neg ? -INFINITY : INFINITY;
        else if (f && strcmp(s, "nan") == 0)
            d = NAN;
        else {
            error_at(b->c, at, "%s() of a string takes \"inf\", \"-inf\" or \"nan\"", fn);
            out->k = SV_NONE;
            out->poison = true;
            return true;
        }
        out->v = (val){.kind = V_FLOAT, .f = d};
        return true;
    }
    num_of(&a->v[0], &d);
    if (f)
        out->v = (val){.kind = V_FLOAT, .f = d};
    else if (i)
        out->v = (val){.kind = V_INT, .i = (int64_t)trunc(d)};
    else
        out->v = (val){.kind = V_BOOL, .i = d != 0};
    return true;
}

static const char *const P_SIZE[] = {"input", "dim"};
static const char *const P_SPLIT[] = {"tensor", "split_size_or_sections", "dim"};
static const char *const P_CHUNK[] = {"input", "chunks", "dim"};
static const char *const P_AS[] = {"input", "other"};
static const char *const P_AAP[] = {"input", "output_size"};
static const char *const P_POW[] = {"input", "exponent"};
static const char *const P_CLAMP[] = {"input", "min", "max"};
static const char *const P_CMIN[] = {"input", "min"};
static const char *const P_CMAX[] = {"input", "max"};
static const char *const P_INTERP[] = {"input", "size", "scale_factor", "mode", "align_corners",
                                       "recompute_scale_factor", "antialias"};

static const char *const P_X[] = {"input"};
static const char *const P_GELU[] = {"input", "approximate"};
static const char *const P_SOFTMAX[] = {"input", "dim", "dtype"};
static const char *const P_FLAT[] = {"input", "start_dim", "end_dim"};
static const char *const P_T[] = {"input", "dim0", "dim1"};
static const char *const P_MM[] = {"input", "other"};
static const char *const P_CAT[] = {"tensors", "dim"};
static const char *const P_RED[] = {"input", "dim", "keepdim"};
static const char *const P_LN[] = {"input", "normalized_shape", "weight", "bias", "eps"};
static const char *const P_DROP[] = {"input", "p", "training", "inplace"};
static const char *const P_TO[] = {"input", "dtype", "non_blocking", "copy"};
static const char *const P_TYPE_AS[] = {"input", "other"};
static const char *const P_LOGIC[] = {"input", "other"};
static const char *const P_WHERE[] = {"condition", "input", "other"};
static const char *const P_MFILL[] = {"input", "mask", "value"};
static const char *const P_FULL[] = {"size", "fill_value", "dtype"};
static const char *const P_LIKE[] = {"input", "dtype"};
static const char *const P_FULL_LIKE[] = {"input", "fill_value", "dtype"};
static const char *const P_TRI[] = {"input", "diagonal"};
static const char *const P_SDPA[] = {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"};

/* The forward functions besides the op table's: name, parameters, how
 * many are required, lowering. */
static const fndef FUNCTIONS[] = {
    {"gelu", P_GELU, 2, 1, fn_gelu},
    {"softmax", P_SOFTMAX, 3, 2, fn_softmax_dtype},
    {"log_softmax", P_SOFTMAX, 3, 2, fn_softmax_dtype},
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
    /* models.md group 8 */
    {"relu6", P_ACT8, 2, 1, fn_act8},
    {"hardswish", P_ACT8, 2, 1, fn_act8},
    {"hardsigmoid", P_ACT8, 2, 1, fn_act8},
    {"mish", P_ACT8, 2, 1, fn_act8},
    {"leaky_relu", P_LEAKY, 3, 1, fn_leaky_relu},
    {"hardtanh", P_HARDTANH, 4, 1, fn_hardtanh},
    {"group_norm", P_GN, 5, 2, fn_group_norm},
    /* masks, bool, created tensors, attention */
    {"to", P_TO, 4, 1, fn_to},
    {"float", P_X, 1, 1, fn_cast},
    {"long", P_X, 1, 1, fn_cast},
    {"bool", P_X, 1, 1, fn_cast},
    {"type_as", P_TYPE_AS, 2, 2, fn_type_as},
    {"logical_and", P_LOGIC, 2, 2, fn_logical},
    {"logical_or", P_LOGIC, 2, 2, fn_logical},
    {"logical_not", P_X, 1, 1, fn_logical},
    {"where", P_WHERE, 3, 3, fn_where},
    {"masked_fill", P_MFILL, 3, 3, fn_masked_fill},
    {"arange", NULL, 0, 0, fn_arange},
    {"ones", NULL, 0, 0, fn_ones_zeros},
    {"zeros", NULL, 0, 0, fn_ones_zeros},
    {"full", P_FULL, 3, 2, fn_full},
    {"ones_like", P_LIKE, 2, 1, fn_like},
    {"zeros_like", P_LIKE, 2, 1, fn_like},
    {"full_like", P_FULL_LIKE, 3, 2, fn_like},
    {"tril", P_TRI, 2, 1, fn_tri},
    {"triu", P_TRI, 2, 1, fn_tri},
    {"scaled_dot_product_attention", P_SDPA, 7, 3, fn_sdpa},
    /* indexing and shape functions (W1) */
    {"view", NULL, 0, 0, fn_reshape_call},
    {"size", P_SIZE, 2, 1, NULL, fn_size},
    {"dim", P_X, 1, 1, NULL, fn_dim},
    {"unsqueeze", P_SIZE, 2, 2, fn_unsqueeze},
    {"squeeze", P_SIZE, 2, 1, fn_squeeze},
    {"expand", NULL, 0, 0, fn_expand},
    {"expand_as", P_AS, 2, 2, fn_expand_as},
    {"contiguous", P_X, 1, 1, fn_contiguous},
    {"split", P_SPLIT, 3, 2, NULL, fn_split},
    {"chunk", P_CHUNK, 3, 2, NULL, fn_chunk},
    {"t", P_X, 1, 1, fn_t},
    {"adaptive_avg_pool2d", P_AAP, 2, 2, fn_adaptive_avg_pool2d},
    {"pow", P_POW, 2, 2, fn_pow},
    {"clamp", P_CLAMP, 3, 1, fn_clamp},
    {"clamp_min", P_CMIN, 2, 2, fn_clamp},
    {"clamp_max", P_CMAX, 2, 2, fn_clamp},
    {"interpolate", P_INTERP, 7, 1, fn_interpolate},
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

DPC_NOINLINE bool call_function(builder *b, const char *fn, const fargs *a, loc at, sv *out) {
    fndef d;
    if (!function_row(fn, &d))
        return false; /* caller reports unknown names */
    if (number_cast(b, fn, a, at, out))
        return !out->poison;
    fcall *c = arena_alloc(&b->c->arena, sizeof *c);
    *c = (fcall){.b = b, .fn = fn, .a = a, .at = at};
    for (int i = 0; i < 8; i++)
        c->sat[i] = at;
    if (d.params && !fbind(b, fn, a, d.params, d.np, d.nrequired, c->s, c->g, c->sat, at))
        return false;
    if (d.call)
        return d.call(c, out);
    ir_node *r = d.lower(c);
    if (!r || !check_size(b, r, at, fn))
        return false;
    out->k = SV_TENSOR;
    out->t = r;
    return true;
}
