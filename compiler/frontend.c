/* frontend.c - runs the front half of the compiler: parse (with imports),
 * instantiate the module tree, build the IR. Owns the compilation's arena
 * and catches its out-of-memory jumps. */
#include "frontend.h"

#include <stdlib.h>
#include <string.h>

void front_free(dpc_front *f) {
    if (!f)
        return;
    arena_free_all(&f->ctx.arena);
    free(f);
}

dpc_status front_run(const char *path, const char *text, size_t len, front_stage stage, dpc_front **out,
                     dpc_buf *diags, dpc_err *e) {
    return front_run_mem(path, text, len, stage, NULL, NULL, out, diags, e);
}

dpc_status front_run_mem(const char *path, const char *text, size_t len, front_stage stage,
                         front_import_fn read_import, void *ud, dpc_front **out, dpc_buf *diags, dpc_err *e) {
    dpc_compile_opts o = {.path = path, .text = text, .len = len, .read_import = read_import, .import_ud = ud};
    return front_run_opts(&o, stage, out, diags, e);
}

dpc_status front_run_opts(const dpc_compile_opts *o, front_stage stage, dpc_front **out, dpc_buf *diags,
                          dpc_err *e) {
    const char *path = o->path, *text = o->text;
    size_t len = o->len;
    *out = NULL;
    dpc_front *f = calloc(1, sizeof *f);
    if (!f)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    f->ctx.max_errors = 50;
    f->ctx.max_depth = 200;
    f->ctx.arena.oom_jump = &f->oom;
    f->ctx.read_import = o->read_import;
    f->ctx.import_ud = o->import_ud;
    f->ctx.binds = o->binds;
    f->ctx.nbinds = o->nbinds;
    f->ctx.defer_dims = o->defer_dims;
    if (setjmp(f->oom)) {
        front_free(f);
        return dpc_errf(e, DPC_ENOMEM, "out of memory while compiling '%s'", path);
    }
    const char *failed = "parsing";
    bool ok = text ? parse_source(&f->ctx, path, text, len, &f->m.prog)
                   : parse_program(&f->ctx, path, &f->m.prog);
    if (ok) {
        failed = "semantic analysis";
        ok = sema_instantiate(&f->ctx, &f->m);
    }
    if (ok && stage >= FRONT_IR) {
        failed = "building the IR";
        f->g.arena = &f->ctx.arena;
        ok = ir_build(&f->ctx, &f->m, &f->g);
    }
    ok = ok && f->ctx.nerrors == 0;
    if (!ok && f->ctx.nerrors == 0) /* a stage failed without saying why: never silently */
        error_at(&f->ctx, (loc){0}, "internal error: %s of '%s' failed without a diagnostic; please report this",
                 failed, path);
    if (!ok) {
        if (diags)
            diags_render(&f->ctx, diags);
        dpc_status s = dpc_errf(e, DPC_EUSER, "%d error%s in '%s'", f->ctx.nerrors,
                                f->ctx.nerrors == 1 ? "" : "s", path);
        front_free(f);
        return s;
    }
    *out = f;
    return DPC_OK;
}
