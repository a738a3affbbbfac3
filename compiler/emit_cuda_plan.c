/* emit_cuda_plan.c - writing one __global__ function of the CUDA dialect
 * and planning its launch: the error for what the dialect cannot run, the
 * #line mapping back to the .dp file, the parameter list, the function's
 * head and tail, the dedupe of identical bodies (the repeated layers of a
 * model share one function) and the steps of the launch plan (kabi.h).
 * Every kind file (emit_cuda_*.c) writes its kernels through these. */
#include "emit_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cu_fail(cg *g, const ir_node *n, const char *what) {
    if (g->st != DPC_OK)
        return;
    g->st = DPC_EUSER;
    if (g->e) {
        if (n && n->at.file)
            dpc_errf(g->e, DPC_EUSER, "%s:%d: %s is not supported by the CUDA backend: %s", n->at.file->path,
                     n->at.line, ir_op_name(n->op), what);
        else
            dpc_errf(g->e, DPC_EUSER, "the CUDA backend cannot run this graph: %s", what);
    }
    dpc_buf_puts(g->o, "#error \"unsupported: ");
    emit_string_text(g->o, what);
    dpc_buf_puts(g->o, "\"\n");
}

/* ---------------------------------------------------------- line mapping */

static void count_lines(cg *g) {
    for (; g->counted < g->o->len; g->counted++)
        if (g->o->data[g->counted] == '\n')
            g->lines++;
}

/* "FILE:LINE (SCOPE)" of op n inside a comment: the path and the scope are
 * the user's text, so they go through emit_comment_text. */
void cu_comment_loc(dpc_buf *o, const ir_node *n) {
    if (n->at.file)
        emit_comment_text(o, n->at.file->path);
    else
        dpc_buf_puts(o, "?");
    dpc_buf_printf(o, ":%d", n->at.line);
    if (n->scope && n->scope[0]) {
        dpc_buf_puts(o, " in ");
        emit_comment_text(o, n->scope);
    }
}

/* `#line` naming op n's .dp line (nothing for an op without a location). */
void cu_line_of(cg *g, const ir_node *n) {
    if (!n || !n->at.file || n->at.line <= 0)
        return;
    dpc_buf_printf(g->o, "#line %d \"", n->at.line);
    emit_string_text(g->o, n->at.file->path);
    dpc_buf_puts(g->o, "\"\n");
}

/* Back to the generated source's own numbering. */
static void line_reset(cg *g) {
    count_lines(g);
    dpc_buf_printf(g->o, "#line %d \"", g->lines + 2);
    emit_string_text(g->o, g->unit);
    dpc_buf_puts(g->o, "\"\n");
}

/* ---------------------------------------------------------- the plan */

/* The function text with everything that names this instance rather than
 * its computation made neutral: comments and #line dropped, its own name
 * replaced, buffers (b42), values (v17), float4 temporaries (t42) and lane
 * arrays (l_b42) renumbered in order of appearance. Two kernels with the
 * same canonical text compute the same thing from their (positional)
 * arguments. */
static char *canonical(const char *p, size_t n, const char *self) {
    dpc_buf o;
    dpc_buf_init(&o);
    char names[4][256][16];
    int counts[4] = {0};
    size_t selfn = strlen(self);
    for (size_t i = 0; i < n;) {
        if (p[i] == '/' && i + 1 < n && p[i + 1] == '*') {
            const char *end = strstr(p + i + 2, "*/");
            i = end && (size_t)(end - p) < n ? (size_t)(end - p) + 2 : n;
            continue;
        }
        if (p[i] == '#' && (i == 0 || p[i - 1] == '\n')) {
            while (i < n && p[i] != '\n')
                i++;
            continue;
        }
        if ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || p[i] == '_') {
            size_t j = i;
            while (j < n && ((p[j] >= 'a' && p[j] <= 'z') || (p[j] >= 'A' && p[j] <= 'Z') || p[j] == '_' ||
                             (p[j] >= '0' && p[j] <= '9')))
                j++;
            size_t len = j - i;
            int cat = -1;
            size_t pre = 0;
            if (len == selfn && memcmp(p + i, self, len) == 0) {
                dpc_buf_puts(&o, "F");
                i = j;
                continue;
            }
            if (len > 3 && p[i] == 'l' && p[i + 1] == '_' && p[i + 2] == 'b')
                cat = 3, pre = 3;
            else if (len > 1 && (p[i] == 'b' || p[i] == 'v' || p[i] == 't'))
                cat = p[i] == 'b' ? 0 : p[i] == 'v' ? 1 : 2, pre = 1;
            bool digits = cat >= 0 && len - pre < 12;
            for (size_t k = i + pre; digits && k < j; k++)
                digits = p[k] >= '0' && p[k] <= '9';
            if (!digits) {
                dpc_buf_put(&o, p + i, len);
                i = j;
                continue;
            }
            char id[16];
            snprintf(id, sizeof id, "%.*s", (int)len, p + i);
            int k = 0;
            while (k < counts[cat] && strcmp(names[cat][k], id) != 0)
                k++;
            if (k == counts[cat] && k < 256)
                snprintf(names[cat][counts[cat]++], 16, "%s", id);
            dpc_buf_printf(&o, "%c#%d", "bvtl"[cat], k);
            i = j;
            continue;
        }
        dpc_buf_put(&o, p + i, 1);
        i++;
    }
    return dpc_buf_take(&o);
}

/* Called when a function's text is complete: if an identical function was
 * written before, drop this one and launch that one instead. */
static void dedupe(cg *g, const char *fn, const char *suffix) {
    g->cur_fn = fn;
    g->cur_suffix = suffix;
    if (g->fn_start == NO_FN || g->fn_start > g->o->len || g->o->oom)
        return;
    char *canon = canonical(g->o->data + g->fn_start, g->o->len - g->fn_start, g->fn_name);
    size_t start = g->fn_start;
    g->fn_start = NO_FN;
    if (!canon)
        return;
    for (int i = 0; i < g->nseen; i++)
        if (strcmp(g->seen[i].canon, canon) == 0) {
            free(canon);
            g->o->len = start;
            g->o->data[start] = 0;
            g->counted = g->saved_counted;
            g->lines = g->saved_lines;
            g->cur_fn = g->seen[i].fn;
            g->cur_suffix = g->seen[i].suffix;
            dpc_buf_printf(g->o, "\n/* %s%s: the same as %s%s */\n", fn, suffix, g->cur_fn, g->cur_suffix);
            return;
        }
    if (g->nseen == g->capseen) {
        int cap = g->capseen ? 2 * g->capseen : 32;
        struct seen_fn *s = realloc(g->seen, sizeof *s * (size_t)cap);
        if (!s) {
            free(canon);
            return;
        }
        g->seen = s;
        g->capseen = cap;
    }
    g->seen[g->nseen++] = (struct seen_fn){canon, fn, suffix};
    if (g->plan)
        g->plan->nkernels++;
}

dpc_cu_step *cu_new_step(cg *g, dpc_cu_step_kind kind) {
    static dpc_cu_step dummy;
    if (!g->plan) {
        memset(&dummy, 0, sizeof dummy);
        return &dummy;
    }
    dpc_cu_plan *p = g->plan;
    if (p->nsteps == g->cap) {
        int cap = g->cap ? 2 * g->cap : 32;
        dpc_cu_step *s = realloc(p->steps, sizeof *s * (size_t)cap);
        if (!s) {
            if (g->st == DPC_OK) {
                g->st = DPC_ENOMEM;
                if (g->e)
                    dpc_errf(g->e, DPC_ENOMEM, "out of memory planning CUDA launches");
            }
            memset(&dummy, 0, sizeof dummy);
            return &dummy;
        }
        p->steps = s;
        g->cap = cap;
    }
    dpc_cu_step *s = &p->steps[p->nsteps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->kernel = g->kernel;
    return s;
}

void cu_padd(cg *g, plist *pl, int buf, bool write) {
    if (buf < 0)
        return;
    for (int i = 0; i < pl->n; i++)
        if (pl->id[i] == buf) {
            pl->wr[i] |= write;
            return;
        }
    if (pl->n == DPC_CU_MAX_PARAMS) {
        /* a launch's parameter space is bounded: located at the kernel's value */
        const kernel *k = g->kg->kernels.items[g->kernel];
        char why[80];
        snprintf(why, sizeof why, "one kernel would take more than %d buffers", DPC_CU_MAX_PARAMS);
        cu_fail(g, k->out, why);
        return;
    }
    pl->id[pl->n] = buf;
    pl->wr[pl->n++] = write;
}

/* The buffers read by ops[from..] of k's chain. */
void cu_padd_chain(cg *g, plist *pl, const kernel *k, int from) {
    koperand_iter it = kernel_operands(g->kg, k, from);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        cu_padd(g, pl, buf, false);
}

static const char *ctype(const cg *g, int buf) { return kb(g, buf)->esize == 8 ? "long long" : g->ft; }

void cu_kernel_head(cg *g, const char *fn, const plist *pl) {
    /* the function's text starts with the comment just written */
    size_t start = g->o->len;
    while (start > 0 && !(g->o->data[start - 1] == '\n' && strncmp(g->o->data + start, "/* ", 3) == 0))
        start--;
    g->fn_start = start > 0 ? start - 1 : 0;
    g->saved_counted = g->counted;
    g->saved_lines = g->lines;
    snprintf(g->fn_name, sizeof g->fn_name, "%s", fn);
    dpc_buf_printf(g->o, "extern \"C\" __global__ void %s(", fn);
    for (int i = 0; i < pl->n; i++)
        dpc_buf_printf(g->o, "%s%s *__restrict__ b%d, ", pl->wr[i] ? "" : "const ", ctype(g, pl->id[i]), pl->id[i]);
    dpc_buf_puts(g->o, "const dpc_kctx ctx_) {\n"
                       "    const dpc_kctx *const ctx = &ctx_;\n"
                       "    const long long N = ctx->N;\n"
                       "    (void)ctx; (void)N;\n");
}

void cu_kernel_tail(cg *g) {
    dpc_buf_puts(g->o, "}\n");
    line_reset(g);
}

dpc_cu_launch *cu_plan_launch(cg *g, const char *fn, const char *suffix, dpc_cu_grid grid, dpc_cu_dim work, int vec,
                                  const plist *pl) {
    if (g->fn_start != NO_FN)
        dedupe(g, fn, suffix);
    dpc_cu_step *s = cu_new_step(g, DPC_CU_LAUNCH);
    dpc_cu_launch *l = &s->u.launch;
    l->fn = g->cur_fn;
    l->suffix = g->cur_suffix;
    l->grid = grid;
    l->work = work;
    l->vec = vec;
    l->nbufs = pl->n;
    memcpy(l->bufs, pl->id, sizeof(int) * (size_t)pl->n);
    return l;
}
