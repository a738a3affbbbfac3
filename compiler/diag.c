/* diag.c - compiler-style diagnostics: collected during compilation, then
 * rendered by the caller as "file:line:col: error: msg", the source line
 * and a caret under the column. */
#include "compiler.h"

#include <stdio.h>
#include <string.h>

static void add(dpc_ctx *c, loc at, bool note, const char *fmt, va_list ap) {
    if (!note && c->nerrors >= c->max_errors) {
        c->nerrors++;
        return;
    }
    if (note && (c->nerrors > c->max_errors || c->notes_dropped))
        return;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    /* the same error at the same place says nothing new (a module built
     * twice with the same bad default, say) */
    if (!note) {
        c->notes_dropped = false;
        for (int i = 0; i < c->diags.len; i++) {
            const diag *o = c->diags.items[i];
            if (!o->is_note && o->at.file == at.file && o->at.line == at.line && o->at.col == at.col &&
                strcmp(o->msg, buf) == 0) {
                c->nerrors++; /* still an error: callers count them */
                c->notes_dropped = true;
                return;
            }
        }
    }
    diag *d = arena_alloc(&c->arena, sizeof *d);
    d->at = at;
    d->is_note = note;
    d->msg = arena_strdup(&c->arena, buf);
    vec_push(&c->arena, &c->diags, d);
    if (!note)
        c->nerrors++;
}

void error_at(dpc_ctx *c, loc at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    add(c, at, false, fmt, ap);
    va_end(ap);
}

void note_at(dpc_ctx *c, loc at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    add(c, at, true, fmt, ap);
    va_end(ap);
}

/* The text of line `line` of f, without its newline. */
static const char *line_text(const src_file *f, int line, size_t *len) {
    const char *p = f->text, *end = f->text + f->len;
    for (int l = 1; l < line && p < end; p++)
        if (*p == '\n')
            l++;
    const char *q = p;
    while (q < end && *q != '\n')
        q++;
    if (q > p && q[-1] == '\r')
        q--;
    *len = (size_t)(q - p);
    return p;
}

static void render_one(const diag *d, dpc_buf *out) {
    const char *kind = d->is_note ? "note" : "error";
    if (!d->at.file || d->at.line <= 0) {
        /* not about a place in a model: said the way the CLI says errors */
        dpc_buf_printf(out, "dpc: %s: %s\n", kind, d->msg);
        return;
    }
    dpc_buf_printf(out, "%s:%d:%d: %s: %s\n", d->at.file->path, d->at.line, d->at.col, kind, d->msg);
    size_t n;
    const char *s = line_text(d->at.file, d->at.line, &n);
    if (n > 400)
        return; /* a megabyte-long line helps nobody */
    dpc_buf_puts(out, "    ");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        dpc_buf_put(out, (ch == '\t' || (ch >= 32 && ch < 127)) ? (const char *)&s[i] : "?", 1);
    }
    dpc_buf_puts(out, "\n    ");
    for (int i = 1; i < d->at.col && (size_t)(i - 1) < n; i++)
        dpc_buf_put(out, s[i - 1] == '\t' ? "\t" : " ", 1);
    dpc_buf_puts(out, "^\n");
}

void diags_render(const dpc_ctx *c, dpc_buf *out) {
    for (int i = 0; i < c->diags.len; i++)
        render_one(c->diags.items[i], out);
    if (c->nerrors > c->max_errors)
        dpc_buf_printf(out, "too many errors (%d); stopped reporting after %d\n", c->nerrors,
                       c->max_errors);
}

static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 1000;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : (a[i - 1] ^ b[j - 1]) == 32 ? 0 : 1;
            int v = prev[j - 1] + cost;
            if (prev[j] + 1 < v)
                v = prev[j] + 1;
            if (cur[j - 1] + 1 < v)
                v = cur[j - 1] + 1;
            cur[j] = v;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

const char *nearest_name(const char *name, const char *const *cands, int n) {
    const char *best = NULL;
    int bestd = 1000;
    for (int i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], name) == 0)
            continue;
        int d = edit_distance(name, cands[i]);
        if (d < bestd) {
            bestd = d;
            best = cands[i];
        }
    }
    /* close enough: at most a third of the name's letters wrong */
    int len = (int)strlen(name);
    int limit = len <= 3 ? 1 : len / 3 + 1;
    return bestd <= limit ? best : NULL;
}
