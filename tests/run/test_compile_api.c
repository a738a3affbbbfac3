/* test_compile_api.c - the compile API (compiler/dpc_compile.h) on the
 * models given: each stage compiles, the texts and sources of a unit are
 * those of a model compiled for running (dpc_model_compile), the
 * signature agrees with the graph IR, stage selection holds (no kernel
 * graph before DPC_STAGE_FUSED), in-memory text with an import callback
 * compiles like the file, and the one scalar rule (dpc_sig_scalars,
 * dpc_sig_scalar_parse) accepts and refuses what it documents. */
#include "../check.h"
#include "dpc_compile.h"
#include "frontend.h" /* m->front, the graph IR */
#include "kernel.h"   /* the kernel graph */
#include "model.h"

#include <stdlib.h>
#include <string.h>

static char *text_of(const dpc_unit *u, int what, kprec p) {
    dpc_buf b;
    dpc_buf_init(&b);
    if (what == 0)
        dpc_unit_print(u, &b);
    else if (what == 1 || what == 2)
        dpc_unit_ir(u, what == 2, &b);
    else
        dpc_unit_source(u, what == 3 ? DPC_DIALECT_C : DPC_DIALECT_CUDA, p, &b);
    return dpc_buf_take(&b);
}

static bool no_import(void *ud, const char *path, char *real, size_t real_n, const char **text, size_t *len) {
    (void)ud, (void)path, (void)real, (void)real_n, (void)text, (void)len;
    return false;
}

static void stages(const char *path) {
    dpc_err e;
    dpc_unit *tree, *ir, *fused;
    CHECK(dpc_compile_file(path, DPC_STAGE_TREE, &tree, NULL, &e) == DPC_OK, "%s: tree: %s", path, e.msg);
    CHECK(dpc_compile_file(path, DPC_STAGE_IR, &ir, NULL, &e) == DPC_OK, "%s: ir: %s", path, e.msg);
    CHECK(dpc_compile_file(path, DPC_STAGE_FUSED, &fused, NULL, &e) == DPC_OK, "%s: fused: %s", path, e.msg);
    if (failures)
        return;
    CHECK(!dpc_unit_kgraph(tree) && !dpc_unit_kgraph(ir) && dpc_unit_kgraph(fused), "%s: kernel graph by stage", path);
    CHECK(dpc_unit_nkernels(ir) == 0 && dpc_unit_nkernels(fused) > 0, "%s: kernel counts", path);
    char *a = text_of(tree, 0, KP_F32), *b = text_of(fused, 0, KP_F32);
    CHECK(a && b && strcmp(a, b) == 0, "%s: the module tree depends on the stage", path);
    free(a), free(b);
    a = text_of(ir, 1, KP_F32), b = text_of(fused, 1, KP_F32);
    CHECK(a && b && strcmp(a, b) == 0, "%s: fusion changed the graph IR", path);
    free(a), free(b);
    CHECK(dpc_unit_signature(ir)->nparams == dpc_unit_signature(tree)->nparams, "%s: parameter tables", path);
    dpc_unit_free(tree);
    dpc_unit_free(ir);
    dpc_unit_free(fused);
}

/* The unit's texts are byte for byte those of the model that runs. */
static void same_as_model(const char *path) {
    dpc_err e;
    dpc_unit *u;
    dpc_model *m;
    if (dpc_compile_file(path, DPC_STAGE_FUSED, &u, NULL, &e) != DPC_OK ||
        dpc_model_compile(path, &m, NULL, &e) != DPC_OK) {
        CHECK(0, "%s: %s", path, e.msg);
        return;
    }
    for (int what = 0; what < 7; what++) {
        kprec p = what == 5 ? KP_BF16 : what == 6 ? KP_F16 : KP_F32;
        char *a = text_of(u, what < 5 ? what : 4, p), *b = text_of(m->unit, what < 5 ? what : 4, p);
        CHECK(a && b && strcmp(a, b) == 0, "%s: text %d differs between two compilations", path, what);
        free(a), free(b);
    }
    dpc_buf c;
    dpc_buf_init(&c);
    dpc_kgraph_source(dpc_unit_kgraph(m->unit), DPC_DIALECT_C, KP_F32, &c);
    char *a = text_of(u, 3, KP_F32);
    CHECK(a && c.data && strcmp(a, c.data) == 0, "%s: dpc_kgraph_source differs from dpc_unit_source", path);
    free(a);
    dpc_buf_free(&c);
    const dpc_signature *s = dpc_unit_signature(u);
    CHECK(s->ninputs == m->front->g.inputs.len && s->noutputs == m->front->g.outputs.len &&
              s->nscalars == m->front->g.scalars.len && s->nparams == m->front->m.params.len,
          "%s: signature counts", path);
    for (int i = 0; i < s->ninputs; i++) {
        const ir_node *n = m->front->g.inputs.items[i];
        CHECK(strcmp(s->inputs[i].name, n->name) == 0 && s->inputs[i].rank == n->sh.rank, "%s: input %d", path, i);
        CHECK(s->inputs[i].rank > 0 && s->inputs[i].dim[0].batch, "%s: input %d: the batch dim is dim 0", path, i);
    }
    dpc_model_free(m);
    dpc_unit_free(u);
}

static void from_memory(void) {
    const char *src = "module M {\n    forward(x: [N, 4], s: float = 2.0, k: int = 1, b: bool = False) {\n"
                      "        return x * s + k\n    }\n}\n";
    dpc_compile_opts o = {.path = "mem.dp", .text = src, .len = strlen(src), .read_import = no_import,
                          .stage = DPC_STAGE_FUSED};
    dpc_unit *u;
    dpc_err e;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_status st = dpc_compile(&o, &u, &diags, &e);
    CHECK(st == DPC_OK, "in-memory source: %s %s", e.msg, diags.data ? diags.data : "");
    dpc_buf_free(&diags);
    if (st != DPC_OK)
        return;
    const dpc_signature *s = dpc_unit_signature(u);
    CHECK(s->nscalars == 3 && s->ninputs == 1 && s->noutputs == 1, "in-memory signature");
    CHECK(strcmp(s->model_name, "M") == 0 && !s->wrapper, "model name");
    CHECK(s->inputs[0].dtype == DPC_F32 && strcmp(s->inputs[0].dtype_name, "f32") == 0, "input dtype");
    double v[3];
    CHECK(dpc_sig_scalars(s, NULL, NULL, 0, v, &e) == DPC_OK && v[0] == 2.0 && v[1] == 1 && v[2] == 0, "defaults");
    const char *n1[] = {"k", "s"};
    double x1[] = {3, 0.5};
    CHECK(dpc_sig_scalars(s, n1, x1, 2, v, &e) == DPC_OK && v[0] == 0.5 && v[1] == 3, "given values");
    const char *n2[] = {"k"};
    double x2[] = {1.5};
    CHECK(dpc_sig_scalars(s, n2, x2, 1, v, &e) == DPC_EUSER && strstr(e.msg, "is an int"), "int refused: %s", e.msg);
    const char *n3[] = {"b"};
    double x3[] = {2};
    CHECK(dpc_sig_scalars(s, n3, x3, 1, v, &e) == DPC_EUSER && strstr(e.msg, "is a bool"), "bool refused: %s", e.msg);
    const char *n4[] = {"zz"};
    CHECK(dpc_sig_scalars(s, n4, x3, 1, v, &e) == DPC_EUSER && strstr(e.msg, "no scalar parameter 'zz'"), "unknown");
    const char *n5[] = {"s", "s"};
    CHECK(dpc_sig_scalars(s, n5, x1, 2, v, &e) == DPC_EUSER && strstr(e.msg, "given twice"), "twice: %s", e.msg);
    double d;
    CHECK(dpc_sig_scalar_parse(&s->scalars[2], "True", &d, &e) == DPC_OK && d == 1, "bool text");
    CHECK(dpc_sig_scalar_parse(&s->scalars[2], "yes", &d, &e) == DPC_EUSER, "bool text refused");
    CHECK(dpc_sig_scalar_parse(&s->scalars[1], "7", &d, &e) == DPC_OK && d == 7, "int text");
    CHECK(dpc_sig_scalar_parse(&s->scalars[1], "7.5", &d, &e) == DPC_EUSER, "int text refused");
    CHECK(dpc_sig_scalar_parse(&s->scalars[0], "", &d, &e) == DPC_EUSER, "empty float refused");
    dpc_unit_free(u);

    o.text = "module M {\n    forward(x: [N, 4]) {\n        return y\n    }\n}\n";
    o.len = strlen(o.text);
    dpc_buf_init(&diags);
    CHECK(dpc_compile(&o, &u, &diags, &e) == DPC_EUSER && diags.len && strstr(diags.data, "mem.dp"),
          "a user error comes back as diagnostics naming the source");
    dpc_buf_free(&diags);
}

/* A model with the run-time dim S (ids: i64[N, S], bias: [S, 16]): an
 * error without a value, an unbound unit with defer_dims, a graph per
 * bind, dpc_unit_specialise equal to compiling with the bind. */
static void runtime_dims(const char *path) {
    dpc_err e;
    dpc_buf d;
    dpc_buf_init(&d);
    dpc_unit *u = NULL, *un = NULL, *b6 = NULL, *sp = NULL;
    CHECK(dpc_compile_file(path, DPC_STAGE_IR, &u, &d, &e) == DPC_EUSER && d.data &&
              strstr(d.data, "error: dim 'S' is a run-time dim (neither the batch name 'N' nor a constructor value)"),
          "%s: no value is an error: %s", path, d.data ? d.data : e.msg);
    dpc_buf_free(&d);
    dpc_compile_opts o = {.path = path, .stage = DPC_STAGE_FUSED, .defer_dims = true};
    CHECK(dpc_compile(&o, &un, NULL, &e) == DPC_OK, "%s: deferred: %s", path, e.msg);
    if (!un)
        return;
    const dpc_signature *g = dpc_unit_signature(un);
    CHECK(g->unbound && g->nrtdims == 1 && !strcmp(g->rtdims[0].name, "S") && g->rtdims[0].value == 0 &&
              g->rtdims[0].input == 0 && g->rtdims[0].dim == 1,
          "%s: the unbound signature lists S", path);
    CHECK(g->ninputs == 2 && g->inputs[0].dim[1].rt == 1 && g->inputs[1].dim[0].rt == 1 &&
              g->inputs[1].dim[1].rt == 0 && !strcmp(g->inputs[0].shape, "[N, S]") &&
              !strcmp(g->inputs[1].shape, "[S, 16]"),
          "%s: inputs name S (%s, %s)", path, g->inputs[0].shape, g->inputs[1].shape);
    CHECK(g->noutputs == 0 && dpc_unit_nkernels(un) == 0 && g->nparams == 5, "%s: no graph, the state_dict", path);
    dpc_buf_init(&d);
    dpc_unit_ir(un, false, &d);
    dpc_unit_ir(un, true, &d);
    dpc_unit_source(un, DPC_DIALECT_C, KP_F32, &d);
    dpc_unit_dot(un, &d);
    CHECK(d.len == 0, "%s: an unbound unit has no IR, schedule, source or graph", path);
    dpc_buf_free(&d);
    dpc_dim_bind bind = {"S", 6};
    o = (dpc_compile_opts){.path = path, .stage = DPC_STAGE_FUSED, .binds = &bind, .nbinds = 1};
    CHECK(dpc_compile(&o, &b6, NULL, &e) == DPC_OK, "%s: S=6: %s", path, e.msg);
    int64_t six = 6;
    CHECK(dpc_unit_specialise(un, &six, DPC_STAGE_FUSED, &sp, NULL, &e) == DPC_OK, "%s: specialise: %s", path, e.msg);
    if (b6 && sp) {
        const dpc_signature *h = dpc_unit_signature(b6);
        CHECK(!h->unbound && h->nrtdims == 1 && h->rtdims[0].value == 6 && h->inputs[0].dim[1].k == 6 &&
                  h->inputs[0].dim[1].rt == 1 && h->noutputs == 2 && h->outputs[1].dim[1].k == 96,
              "%s: the signature at S = 6", path);
        for (int what = 1; what <= 3; what++) {
            char *a = text_of(b6, what, KP_F32), *c = text_of(sp, what, KP_F32);
            CHECK(a && c && *a && !strcmp(a, c), "%s: text %d of dpc_unit_specialise differs", path, what);
            free(a), free(c);
        }
    }
    dpc_unit_free(b6);
    dpc_unit_free(sp);
    dpc_dim_bind bad = {"T", 3};
    o = (dpc_compile_opts){.path = path, .stage = DPC_STAGE_IR, .binds = &bad, .nbinds = 1, .defer_dims = true};
    dpc_buf_init(&d);
    dpc_unit *x = NULL;
    CHECK(dpc_compile(&o, &x, &d, &e) == DPC_EUSER && d.data &&
              strstr(d.data, "cannot bind 'T': the entry of SeqMean has no run-time dim of that name (its run-time "
                             "dims: S)"),
          "%s: a bind of no run-time dim: %s", path, d.data ? d.data : "");
    dpc_buf_free(&d);
    dpc_unit_free(x);
    dpc_unit_free(un);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rtdims") && i + 1 < argc) {
            runtime_dims(argv[++i]);
            continue;
        }
        stages(argv[i]);
        same_as_model(argv[i]);
    }
    from_memory();
    return finish("test_compile_api");
}
