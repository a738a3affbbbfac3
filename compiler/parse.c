/* parse.c - reads a .dp file and, depth first, the files it imports.
 *
 * Imports are resolved relative to the importing file and must stay inside
 * the directory of the root model (after resolving symbolic links), so a
 * model cannot make dpc read arbitrary files. A file imported twice is read
 * once; a cycle is an error that shows the chain. */
#include "parser_state.h"
#include "dp.tab.h"

#include <limits.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* flex's generated API, declared here to keep dp.lex.h out of this file */
typedef void *yyscan_t;
int dplex_init_extra(parser_state *extra, yyscan_t *scanner);
int dplex_destroy(yyscan_t scanner);
struct yy_buffer_state *dp_scan_bytes(const char *bytes, int len, yyscan_t scanner);
int dpparse(void *scanner, parser_state *ps);

#define MAX_IMPORT_DEPTH 32

typedef struct reader {
    dpc_ctx *c;
    program *prog;
    char root_dir[PATH_MAX];
    vec stack; /* char* real paths being read: the import chain */
    vec done;  /* char* real paths already read */
} reader;

static bool parse_text(reader *r, src_file *f, int depth);

static src_file *add_file(dpc_ctx *c, const char *path, char *text, size_t len) {
    src_file *f = arena_alloc(&c->arena, sizeof *f);
    f->path = arena_strdup(&c->arena, path);
    f->text = arena_strndup(&c->arena, text, len);
    f->len = len;
    vec_push(&c->arena, &c->files, f);
    return f;
}

static bool contains(const vec *v, const char *s) {
    for (int i = 0; i < v->len; i++)
        if (strcmp(v->items[i], s) == 0)
            return true;
    return false;
}

static bool under_root(const reader *r, const char *real) {
    size_t n = strlen(r->root_dir);
    return strncmp(real, r->root_dir, n) == 0 && (real[n] == '/' || n == 1);
}

static void dir_of(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == path)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}

const char *dpc_source_rule(const char *rel, size_t len) {
    if (len > DPC_MAX_SOURCE_BYTES)
        return "is larger than the 16 MiB (16777216 bytes) a .dp file may have";
    if (!rel)
        return NULL;
    if (rel[0] == '/')
        return "is an absolute path";
    int depth = 0; /* components below the root, lexically */
    for (const char *p = rel; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return "leaves the model's directory";
        } else if (n && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n + (p[n] == '/');
    }
    return depth > 0 ? NULL : "does not name a file";
}

static void import_one(reader *r, const src_file *from, const import_decl *im, int depth) {
    dpc_ctx *c = r->c;
    char dir[PATH_MAX], joined[PATH_MAX * 2], real[PATH_MAX];
    if (im->path[0] == '/') {
        error_at(c, im->at, "import path '%s' must be relative to the importing file", im->path);
        return;
    }
    dir_of(from->path, dir, sizeof dir);
    snprintf(joined, sizeof joined, "%s/%s", dir, im->path);
    const char *mtext = NULL; /* imports served from memory (dpc_ctx.read_import) */
    size_t mlen = 0;
    /* from memory the names are those of the stored sources, relative to
     * the root's directory: the rule is lexical (on disk: resolved paths) */
    const char *why = c->read_import ? dpc_source_rule(joined, 0) : NULL;
    if (why) {
        error_at(c, im->at, "import '%s' %s", im->path, why);
        return;
    }
    if (c->read_import ? !c->read_import(c->import_ud, joined, real, sizeof real, &mtext, &mlen)
                       : !realpath(joined, real)) {
        error_at(c, im->at, "cannot import '%s': file not found", im->path);
        return;
    }
    if (!mtext && !under_root(r, real)) {
        error_at(c, im->at, "import '%s' leaves the model's directory '%s'", im->path, r->root_dir);
        return;
    }
    if (contains(&r->stack, real)) {
        dpc_buf chain;
        dpc_buf_init(&chain);
        for (int i = 0; i < r->stack.len; i++)
            dpc_buf_printf(&chain, "%s -> ", strrchr(r->stack.items[i], '/') + 1);
        dpc_buf_puts(&chain, strrchr(real, '/') + 1);
        error_at(c, im->at, "import cycle: %s", chain.data ? chain.data : "");
        dpc_buf_free(&chain);
        return;
    }
    if (contains(&r->done, real))
        return;
    if (depth >= MAX_IMPORT_DEPTH) {
        error_at(c, im->at, "imports nested too deeply (limit %d)", MAX_IMPORT_DEPTH);
        return;
    }
    char *text;
    size_t len;
    dpc_err e;
    if (mtext)
        text = (char *)mtext, len = mlen;
    else if (dpc_read_file(joined, DPC_MAX_SOURCE_BYTES, &text, &len, &e) != DPC_OK) {
        error_at(c, im->at, "cannot import '%s': %s", im->path, e.msg);
        return;
    }
    src_file *f = add_file(c, joined, text, len);
    if (!mtext)
        free(text);
    vec_push(&c->arena, &r->stack, arena_strdup(&c->arena, real));
    parse_text(r, f, depth + 1);
    r->stack.len--;
    vec_push(&c->arena, &r->done, arena_strdup(&c->arena, real));
}

static void add_modules(reader *r, const vec *mods) {
    for (int i = 0; i < mods->len; i++) {
        module_def *m = mods->items[i];
        module_def *prev = NULL;
        for (int j = 0; j < r->prog->modules.len; j++) {
            module_def *o = r->prog->modules.items[j];
            if (strcmp(o->name, m->name) == 0)
                prev = o;
        }
        if (prev) {
            error_at(r->c, m->at, "module '%s' is defined twice", m->name);
            note_at(r->c, prev->at, "first defined here");
            continue;
        }
        if (builtin_lookup(m->name) != BI_NONE) {
            error_at(r->c, m->at, "module '%s' has the name of a builtin module", m->name);
            continue;
        }
        vec_push(&r->c->arena, &r->prog->modules, m);
    }
}

static bool parse_text(reader *r, src_file *f, int depth) {
    dpc_ctx *c = r->c;
    if (f->len > INT_MAX / 2) {
        error_at(c, (loc){f, 0, 0}, "%s: file too large", f->path);
        return false;
    }
    parser_state ps = {.c = c, .file = f, .line = 1, .col = 1};
    dp_lex_fatal = c->arena.oom_jump;
    yyscan_t scanner;
    if (dplex_init_extra(&ps, &scanner) != 0)
        longjmp(*c->arena.oom_jump, 1);
    dp_scan_bytes(f->text, (int)f->len, scanner);
    int before = c->nerrors;
    dpparse(scanner, &ps);
    dplex_destroy(scanner);
    /* imports first, so their modules are defined before this file's */
    for (int i = 0; i < ps.imports.len; i++)
        import_one(r, f, ps.imports.items[i], depth);
    add_modules(r, &ps.modules);
    if (ps.model) {
        if (depth > 0)
            error_at(c, ps.model_at, "an imported file cannot name the model");
        else {
            r->prog->model = ps.model;
            r->prog->model_at = ps.model_at;
        }
    }
    return c->nerrors == before;
}

bool parse_source(dpc_ctx *c, const char *path, const char *text, size_t len, program *prog) {
    reader r = {.c = c, .prog = prog};
    const char *why = dpc_source_rule(NULL, len); /* text given: not read through dpc_read_file's limit */
    if (why) {
        error_at(c, (loc){0}, "'%s' %s", path, why);
        return false;
    }
    char real[PATH_MAX];
    if (realpath(path, real))
        dir_of(real, r.root_dir, sizeof r.root_dir);
    else if (!getcwd(r.root_dir, sizeof r.root_dir))
        snprintf(r.root_dir, sizeof r.root_dir, "/");
    src_file *f = add_file(c, path, (char *)text, len);
    if (realpath(path, real))
        vec_push(&c->arena, &r.stack, arena_strdup(&c->arena, real));
    parse_text(&r, f, 0);
    if (c->nerrors == 0 && prog->modules.len == 0)
        error_at(c, (loc){f, 1, 1}, "no module is defined in '%s'", path);
    return c->nerrors == 0;
}

bool parse_program(dpc_ctx *c, const char *path, program *prog) {
    char *text;
    size_t len;
    dpc_err e;
    if (dpc_read_file(path, DPC_MAX_SOURCE_BYTES, &text, &len, &e) != DPC_OK) {
        error_at(c, (loc){0}, "%s", e.msg);
        return false;
    }
    bool ok = parse_source(c, path, text, len, prog);
    free(text);
    return ok;
}
