/* frontend.h - parse + semantic analysis + IR, as one call. */
#ifndef DPC_FRONTEND_H
#define DPC_FRONTEND_H

#include "ir.h"

typedef enum front_stage { FRONT_TREE, FRONT_IR } front_stage;

typedef struct dpc_front {
    dpc_ctx ctx;
    model m;
    ir_graph g;
    jmp_buf oom;
} dpc_front;

/* Compiles path (or, if text != NULL, that text under the name path) up to
 * stage. On a user error returns DPC_EUSER with the rendered diagnostics in
 * diags. */
dpc_status front_run(const char *path, const char *text, size_t len, front_stage stage, dpc_front **out,
                     dpc_buf *diags, dpc_err *e);
/* The same, with imports read through read_import (see dpc_ctx) instead of
 * the file system: compiles a .dpa's stored sources. */
typedef dpc_import_fn front_import_fn; /* dpc_compile.h */
dpc_status front_run_mem(const char *path, const char *text, size_t len, front_stage stage,
                         front_import_fn read_import, void *ud, dpc_front **out, dpc_buf *diags, dpc_err *e);
/* The same with everything dpc_compile_opts says (its stage aside): the
 * run-time dims' binds too. */
dpc_status front_run_opts(const dpc_compile_opts *o, front_stage stage, dpc_front **out, dpc_buf *diags,
                          dpc_err *e);
void front_free(dpc_front *f);

#endif
