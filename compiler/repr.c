/* repr.c - the module tree exactly as PyTorch's print(model): the generic
 * Module.__repr__ (extra_repr lines, then "(name): child" lines, children
 * indented by _addindent), PyTorch 2.x's ModuleList repr that compresses
 * runs of identical children into "(0-1): 2 x Block(", and the
 * DataParallel wrapper, which shows only its (module) child. */
#include "compiler.h"

#include <stdio.h>
#include <string.h>

static char *repr_inst(const inst *in);

/* _addindent(s, 2): every line but the first gets two more spaces. */
static void add_indented(dpc_buf *out, const char *s) {
    for (const char *p = s; *p; p++) {
        dpc_buf_put(out, p, 1);
        if (*p == '\n')
            dpc_buf_puts(out, "  ");
    }
}

/* Assembles "Name(...)" from lines (each a NUL-terminated string). */
static DPC_NOINLINE char *assemble(const char *name, char **lines, int n, int nextra) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, name);
    dpc_buf_puts(&b, "(");
    if (n == 1 && nextra == 1) {
        dpc_buf_puts(&b, lines[0]);
    } else if (n > 0) {
        dpc_buf_puts(&b, "\n");
        for (int i = 0; i < n; i++) {
            dpc_buf_puts(&b, "  ");
            dpc_buf_puts(&b, lines[i]);
            dpc_buf_puts(&b, "\n");
        }
    }
    dpc_buf_puts(&b, ")");
    return dpc_buf_take(&b);
}

static DPC_NOINLINE char *child_line(const char *key, const char *child_repr) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "(%s): ", key);
    add_indented(&b, child_repr);
    return dpc_buf_take(&b);
}

static char *repr_modulelist(const inst *in) {
    int n = in->children.len;
    char **reprs = dpc_calloc((size_t)n + 1, sizeof(char *));
    char **lines = dpc_calloc((size_t)n + 1, sizeof(char *));
    int nl = 0;
    for (int i = 0; i < n; i++)
        reprs[i] = repr_inst(((inst_child *)in->children.items[i])->mod);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && strcmp(reprs[j + 1], reprs[i]) == 0)
            j++;
        if (j == i) {
            char key[32];
            snprintf(key, sizeof key, "%d", i);
            lines[nl++] = child_line(key, reprs[i]);
        } else {
            dpc_buf b;
            dpc_buf_init(&b);
            dpc_buf_printf(&b, "(%d-%d): %d x ", i, j, j - i + 1);
            add_indented(&b, reprs[i]);
            lines[nl++] = dpc_buf_take(&b);
        }
        i = j + 1;
    }
    char *r = assemble("ModuleList", lines, nl, 0);
    for (int i = 0; i < n; i++)
        dpc_free(reprs[i]);
    for (int i = 0; i < nl; i++)
        dpc_free(lines[i]);
    dpc_free(reprs);
    dpc_free(lines);
    return r;
}

static char *repr_inst(const inst *in) {
    if (in->bi == BI_MODULELIST)
        return repr_modulelist(in);
    dpc_buf extra;
    dpc_buf_init(&extra);
    if (in->bi != BI_NONE)
        builtin_extra_repr(in, &extra);
    else if (in->extra_repr)
        dpc_buf_puts(&extra, in->extra_repr);
    int n = in->children.len;
    char **lines = dpc_calloc((size_t)n + 2, sizeof(char *));
    int nl = 0, nextra = 0;
    if (extra.len) {
        lines[nl++] = dpc_buf_take(&extra);
        nextra = 1;
    }
    dpc_buf_free(&extra);
    for (int i = 0; i < n; i++) {
        const inst_child *ch = in->children.items[i];
        char *cr = repr_inst(ch->mod);
        lines[nl++] = child_line(ch->name, cr);
        dpc_free(cr);
    }
    char *r = assemble(in->type_name, lines, nl, nextra);
    for (int i = 0; i < nl; i++)
        dpc_free(lines[i]);
    dpc_free(lines);
    return r;
}

void repr_model(const model *m, dpc_buf *out) {
    char *r = repr_inst(m->wrapper ? m->wrapper : m->root);
    if (r) {
        dpc_buf_puts(out, r);
        dpc_buf_puts(out, "\n");
    } else
        out->oom = true;
    dpc_free(r);
}
