/* nn_helpers.c - what the rows of the builtin modules (nn_*.c) call:
 * reading their bound constructor arguments (inst_int, inst_pair, ...),
 * checking the one `input` of their forward (builtin_one_arg),
 * registering their state_dict entries (builtin_add_param), and printing
 * values the way PyTorch's extra_repr does (repr_value, repr_kv, ...).
 *
 * It is its own file, below the module table (builtins.c), because the
 * table lists the rows and the rows call these helpers: kept in one file
 * the two made a circle. repr.c and the constructor f-strings (sema) use
 * repr_value too. */
#include "irbuild.h"

#include <string.h>

const char *val_kind_name(val_kind k) {
    switch (k) {
    case V_NONE: return "None";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_BOOL: return "bool";
    case V_STR: return "string";
    case V_TUPLE: return "tuple";
    case V_LIST: return "list";
    case V_MODULE: return "module";
    case V_CLASS: return "module class";
    case V_DICT: return "dict";
    }
    return "?";
}

/* ------------------------------------------------- bound arguments */

void tuple_of(const val *v, int n, int64_t *out) {
    for (int i = 0; i < n; i++)
        out[i] = v->kind == V_INT ? v->i : v->items[i].i;
}

void pair_of(const val *v, int64_t out[2]) { tuple_of(v, 2, out); }

int64_t inst_int(const inst *in, int i) { return in->args[i].i; }
bool inst_bool(const inst *in, int i) { return in->args[i].i != 0; }
double inst_float(const inst *in, int i) {
    return in->args[i].kind == V_INT ? (double)in->args[i].i : in->args[i].f;
}
void inst_pair(const inst *in, int i, int64_t out[2]) { pair_of(&in->args[i], out); }

/* ------------------------------------------------- forward arguments */

/* Shared by the walk (irbuild.c) and the containers' forwards
 * (nn_container.c). */
bool builtin_one_arg(builder *b, inst *m, const fargs *a, loc at) {
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

/* ------------------------------------------------ state_dict entries */

void builtin_add_param(dpc_ctx *c, model *m, inst *in, const char *leaf, int rank, const int64_t *shape,
                      int init, double fan_in) {
    param_entry *p = arena_alloc(&c->arena, sizeof *p);
    p->key = in->path[0] ? arena_printf(&c->arena, "%s.%s", in->path, leaf) : leaf;
    p->rank = rank;
    for (int i = 0; i < rank; i++)
        p->shape[i] = shape[i];
    p->init = init;
    p->fan_in = fan_in;
    p->owner = in;
    if (init == INIT_COUNTER) {
        p->is_int = true;
        p->ignored = true;
    }
    vec_push(&c->arena, &m->params, p);
}

/* --------------------------------------------------------- printing */

void repr_value(const val *v, dpc_buf *out) {
    char num[64];
    switch (v->kind) {
    case V_NONE: dpc_buf_puts(out, "None"); break;
    case V_INT: dpc_buf_printf(out, "%lld", (long long)v->i); break;
    case V_BOOL: dpc_buf_puts(out, v->i ? "True" : "False"); break;
    case V_FLOAT:
        dpc_format_pyfloat(v->f, num, sizeof num);
        dpc_buf_puts(out, num);
        break;
    case V_STR: dpc_buf_puts(out, v->s); break;
    case V_TUPLE:
    case V_LIST:
        dpc_buf_puts(out, v->kind == V_TUPLE ? "(" : "[");
        for (int i = 0; i < v->n; i++) {
            if (i)
                dpc_buf_puts(out, ", ");
            repr_value(&v->items[i], out);
        }
        if (v->kind == V_TUPLE && v->n == 1)
            dpc_buf_puts(out, ",");
        dpc_buf_puts(out, v->kind == V_TUPLE ? ")" : "]");
        break;
    case V_MODULE: dpc_buf_puts(out, v->mod->type_name); break;
    case V_CLASS: dpc_buf_puts(out, v->s); break;
    case V_DICT:
        dpc_buf_puts(out, "{");
        for (int i = 0; i < v->n; i++) {
            dpc_buf_printf(out, "%s'%s': ", i ? ", " : "", v->keys[i]);
            repr_value(&v->items[i], out);
        }
        dpc_buf_puts(out, "}");
        break;
    }
}

/* _pair(): ints and lists print as tuples */
void repr_pair(const val *v, dpc_buf *out) {
    int64_t p[2];
    pair_of(v, p);
    dpc_buf_printf(out, "(%lld, %lld)", (long long)p[0], (long long)p[1]);
}

bool pair_is(const val *v, int64_t x) {
    int64_t p[2];
    pair_of(v, p);
    return p[0] == x && p[1] == x;
}

void repr_kv(dpc_buf *out, const char *sep, const char *k, const val *v) {
    dpc_buf_printf(out, "%s%s=", sep, k);
    repr_value(v, out);
}
