/* main.c - the dpc command line (docs/cli.md). The only place that prints
 * and chooses exit codes: 0 success, 1 user error, 2 bad usage. */
#include "artifact.h"
#include "cli.h"
#include "backend_cuda.h"
#include "hostcc.h"
#include "import.h"
#include "kcache.h"
#include "model.h"
#include "mpi_run.h"
#include "nccl_lib.h"
#include "npy.h"
#include "nvrtc_compile.h"
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_IO DPC_MAX_IO /* -o and --input: no forward has more (irbuild.c) */

static const char *USAGE =
    "usage:\n"
    "  dpc compile MODEL.dp|OLD.dpa [-o MODEL.dpa] [--weights W.safetensors] [--arch sm_90[,sm_80...]]\n"
    "  dpc inspect MODEL.dpa                summary of a compiled artifact\n"
    "  dpc print   MODEL.dp|MODEL.dpa       module tree, exactly as print(model) in PyTorch\n"
    "  dpc ir      MODEL.dp|MODEL.dpa [--stage parsed|fused] [--bind S=16 ...]\n"
    "  dpc graph   MODEL.dp [-o FILE.dot|FILE.svg] [--bind S=16 ...]\n"
    "  dpc source  MODEL.dp|MODEL.dpa [--target cpu|cuda] [--dtype f32|bf16|f16] [--bind S=16 ...]\n"
    "  dpc init    MODEL.dp -o W.safetensors [--seed S]\n"
    "  dpc run     MODEL.dp|MODEL.dpa [--weights W.safetensors] --input X.npy [--input Y.npy ...]\n"
    "              [--kw NAME=VALUE ...] [--devices LIST] [--dtype f32|bf16|f16] [-v] -o OUT.npy [-o OUT2.npy ...]\n"
    "              [--mpi]  (implied under mpirun -np P: each rank runs its share of the batch)\n"
    "  dpc bench   MODEL.dp --batch B [--bind S=16 ...] [--devices LIST] [--dtype f32|bf16|f16] [--weights W] [--iters K] [--json]\n"
    "  dpc serve   MODEL.dp|MODEL.dpa|MODEL.onnx [--weights W] [--devices LIST] [--host H] [--port P] [--max-batch 64]\n"
    "              [--max-delay-us 2000] [--max-queue 1024] [--max-body BYTES] [--dtype f32|bf16|f16]\n"
    "  dpc cache   ls|clear\n"
    "  dpc import  MODEL.onnx -o MODEL.dp [--weights-out W.safetensors] [--dim NAME=SIZE ...] | --list-ops\n"
    "  (MODEL.onnx is accepted wherever MODEL.dp is: imported in memory first; docs/onnx.md)\n";

int cli_usage_error(const char *usage, const char *fmt, const char *arg) {
    fprintf(stderr, "dpc: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return 2;
}

static int usage_error(const char *fmt, const char *arg) {
    return cli_usage_error(USAGE, fmt, arg);
}

static int fail(dpc_status s, const dpc_err *e) {
    fprintf(stderr, "dpc: error: %s\n", e->msg);
    return s == DPC_EUSAGE ? 2 : 1;
}

/* Options common to the verbs: one positional model path and flags. */
typedef struct opts {
    const char *model;
    const char *out[MAX_IO];
    int nout;
    const char *inputs[MAX_IO];
    int ninputs;
    const char *kw[DPC_MAX_SCALARS];
    int nkw;
    const char *bind[DPC_MAX_RTDIMS]; /* --bind S=16 */
    int nbind;
    const char *weights, *devices, *stage, *target, *seed, *arch, *batch, *iters, *dtype;
    bool verbose, json, mpi;
} opts;

/* The options that take a value: their spellings, the key a verb's
 * `allowed` string lists, and where a single value goes (NULL for the
 * repeatable -o, --input and --kw). */
typedef struct opt_spec {
    const char *name, *alias;
    char key;
    size_t slot; /* offsetof(opts, field), or 0 for a repeatable option */
} opt_spec;

static const opt_spec VALUE_OPTS[] = {
    {"-o", "--output", 'o', 0},
    {"--input", "-i", 'i', 0},
    {"--kw", NULL, 'k', 0},
    {"--bind", NULL, 'B', 0},
    {"--weights", "-w", 'w', offsetof(opts, weights)},
    {"--devices", NULL, 'd', offsetof(opts, devices)},
    {"--stage", NULL, 's', offsetof(opts, stage)},
    {"--target", NULL, 't', offsetof(opts, target)},
    {"--seed", NULL, 'S', offsetof(opts, seed)},
    {"--arch", NULL, 'a', offsetof(opts, arch)},
    {"--batch", NULL, 'b', offsetof(opts, batch)},
    {"--iters", NULL, 'n', offsetof(opts, iters)},
    {"--dtype", NULL, 'D', offsetof(opts, dtype)},
};

static const opt_spec *value_opt(const char *a) {
    for (size_t i = 0; i < sizeof VALUE_OPTS / sizeof VALUE_OPTS[0]; i++)
        if (strcmp(a, VALUE_OPTS[i].name) == 0 || (VALUE_OPTS[i].alias && strcmp(a, VALUE_OPTS[i].alias) == 0))
            return &VALUE_OPTS[i];
    return NULL;
}

/* Stores the value of option a (spec sp): once, or appended for -o, --input, --kw, --bind. */
static int store_opt(opts *o, const opt_spec *sp, const char *a, const char *v) {
    if (sp->slot) {
        *(const char **)((char *)o + sp->slot) = v;
        return 0;
    }
    int *n = sp->key == 'o' ? &o->nout : sp->key == 'i' ? &o->ninputs : sp->key == 'B' ? &o->nbind : &o->nkw;
    const char **arr = sp->key == 'o' ? o->out : sp->key == 'i' ? o->inputs : sp->key == 'B' ? o->bind : o->kw;
    if (*n >= (sp->key == 'k' ? DPC_MAX_SCALARS : sp->key == 'B' ? DPC_MAX_RTDIMS : MAX_IO))
        return usage_error("too many '%s' options", a);
    arr[(*n)++] = v;
    return 0;
}

static int parse_opts(int argc, char **argv, opts *o, const char *allowed) {
    memset(o, 0, sizeof *o);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const opt_spec *sp = value_opt(a);
        if (sp) {
            if (!strchr(allowed, sp->key))
                return usage_error("option '%s' does not apply to this command", a);
            if (i + 1 >= argc)
                return usage_error("option '%s' needs a value", a);
            int rc = store_opt(o, sp, a, argv[++i]);
            if (rc)
                return rc;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->verbose = true;
        } else if (strcmp(a, "--mpi") == 0) {
            if (!strchr(allowed, 'M'))
                return usage_error("option '%s' does not apply to this command", a);
            o->mpi = true;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (o->model) {
            return usage_error("unexpected argument '%s'", a);
        } else {
            o->model = a;
        }
    }
    if (!o->model)
        return usage_error("%s", "missing the model file");
    return cli_onnx_stage(&o->model); /* MODEL.onnx: imported in memory first (cli/import.c) */
}

/* A stream output (/dev/null, a pipe) cannot lose a file, so it may repeat. */
static bool is_stream(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
}

/* Refuses an output that is also a file the command reads (the model, an
 * imported .onnx's external data, the weights, an input) or another
 * output: writing it would destroy what the command needs, or one output
 * would silently replace the other. outs defaults to o->out; compile
 * passes its derived default. */
static int check_outputs(const opts *o, const char *const *outs, int nout) {
    char msg[8400];
    const char *const *files; /* an imported .onnx: [0] the .onnx; its .dp (o->model) is not on disk */
    size_t nfiles = cli_onnx_files(&files);
    for (int i = 0; i < nout; i++) {
        const char *p = outs[i], *clash = NULL, *what = NULL;
        if (is_stream(p))
            continue;
        if (!nfiles && dpc_same_file(p, o->model))
            clash = o->model, what = "the model";
        for (size_t k = 0; !clash && k < nfiles; k++)
            if (dpc_same_file(p, files[k]))
                clash = files[k], what = k ? "the model's external data" : "the model";
        if (!clash && o->weights && dpc_same_file(p, o->weights))
            clash = o->weights, what = "the weights";
        for (int k = 0; !clash && k < o->ninputs; k++)
            if (dpc_same_file(p, o->inputs[k]))
                clash = o->inputs[k], what = "an input";
        for (int k = 0; !clash && k < i; k++)
            if (dpc_same_file(p, outs[k]))
                clash = outs[k], what = "another output";
        if (clash) {
            bool spelled = strcmp(p, clash) != 0; /* name the other spelling of the same file */
            snprintf(msg, sizeof msg, "-o '%.4000s' is %s%s%.4000s%s: it would be overwritten; choose another output file",
                     p, what, spelled ? " ('" : "", spelled ? clash : "", spelled ? "')" : "");
            return usage_error("%s", msg);
        }
    }
    return 0;
}

static int unit_dpa(const char *path, dpc_unit **u);
/* The model of path (a .dp source or a .dpa) compiled up to stage; a model
 * with run-time dims (`ids: i64[N, S]`) stops after its inputs
 * (dpc_compile_opts.defer_dims): see graph_unit. */
/* Prints a failed compile's diagnostics (or its error) and frees them;
 * true when s is a failure. */
static bool compile_failed(dpc_status s, dpc_buf *diags, const dpc_err *e) {
    if (s != DPC_OK) {
        if (diags->len)
            fputs(diags->data, stderr);
        else
            fprintf(stderr, "dpc: error: %s\n", e->msg);
    }
    dpc_buf_free(diags);
    return s != DPC_OK;
}

static int front(const char *path, dpc_stage st, dpc_unit **u) {
    if (dpc_artifact_path(path))
        return unit_dpa(path, u);
    dpc_buf diags;
    dpc_err e;
    dpc_buf_init(&diags);
    dpc_compile_opts co = {.path = path, .stage = st, .defer_dims = true};
    cli_onnx_source(path, &co.text, &co.len); /* an imported .onnx: its .dp, in memory */
    dpc_status s = dpc_compile(&co, u, &diags, &e);
    if (compile_failed(s, &diags, &e))
        return s == DPC_EUSAGE ? 2 : 1;
    return 0;
}

/* The values --bind gives u's run-time dims, in signature order: each one
 * must be given (where the unit is unbound) and name one of them. */
static int bind_values(const opts *o, const dpc_signature *g, int64_t *values) {
    char names[DPC_MAX_RTDIMS][128], msg[1024];
    dpc_dim_bind b[DPC_MAX_RTDIMS];
    dpc_err e;
    for (int i = 0; i < o->nbind; i++) {
        dpc_status s = dpc_dim_bind_parse(o->bind[i], names[i], sizeof names[i], &b[i], &e);
        if (s != DPC_OK)
            return usage_error("%s", e.msg);
        bool found = false;
        for (int r = 0; r < g->nrtdims; r++)
            found |= strcmp(g->rtdims[r].name, b[i].name) == 0;
        if (!found) {
            size_t pos = 0;
            msg[0] = 0;
            for (int r = 0; r < g->nrtdims && pos < sizeof msg; r++)
                pos += (size_t)snprintf(msg + pos, sizeof msg - pos, "%s%s", r ? ", " : "", g->rtdims[r].name);
            fprintf(stderr, "dpc: error: --bind %s: forward of %s has no run-time dim '%s' (%s%s)\n", o->bind[i],
                    g->model_name, b[i].name, g->nrtdims ? "its run-time dims: " : "it has none", msg);
            return 1;
        }
    }
    for (int r = 0; r < g->nrtdims; r++) {
        values[r] = g->rtdims[r].value;
        for (int i = 0; i < o->nbind; i++)
            if (strcmp(b[i].name, g->rtdims[r].name) == 0)
                values[r] = b[i].value;
        if (values[r] == 0) {
            const dpc_sig_rtdim *d = &g->rtdims[r];
            fprintf(stderr,
                    "dpc: error: %s has the run-time dim %s (dim %d of input '%s'), bound from the input when it runs; "
                    "its graph is built for one value: give it with --bind %s=VALUE (e.g. --bind %s=16)\n",
                    g->model_name, d->name, d->dim, g->inputs[d->input].name, d->name, d->name);
            return 1;
        }
    }
    return 0;
}

/* The unit of path with a graph up to stage (ir, source, graph): a model
 * with run-time dims specialised to the --bind values. */
static int graph_unit(const opts *o, dpc_stage st, dpc_unit **u) {
    int rc = front(o->model, st, u);
    if (rc)
        return rc;
    const dpc_signature *g = dpc_unit_signature(*u);
    int64_t values[DPC_MAX_RTDIMS];
    if (!g->unbound && !o->nbind)
        return 0;
    if ((rc = bind_values(o, g, values))) {
        dpc_unit_free(*u);
        return rc;
    }
    dpc_unit *spec;
    dpc_buf diags;
    dpc_err e;
    dpc_buf_init(&diags);
    dpc_status s = dpc_unit_specialise(*u, values, st, &spec, &diags, &e);
    dpc_unit_free(*u);
    *u = NULL;
    if (compile_failed(s, &diags, &e))
        return s == DPC_EUSAGE ? 2 : 1;
    *u = spec;
    return 0;
}

static int load_dpa(const char *path, dpc_model **m);
static int compile_model(const char *path, dpc_model **m) {
    if (dpc_artifact_path(path))
        return load_dpa(path, m);
    dpc_unit *u;
    if (front(path, DPC_STAGE_FUSED, &u))
        return 1;
    dpc_err e;
    dpc_status s = dpc_model_from_unit(u, m, &e);
    return s == DPC_OK ? 0 : fail(s, &e);
}

static int emit(dpc_buf *b) {
    if (b->oom) {
        fprintf(stderr, "dpc: error: out of memory\n");
        return 1;
    }
    if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len) {
        fprintf(stderr, "dpc: error: cannot write to standard output\n");
        return 1;
    }
    dpc_buf_free(b);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_print(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "");
    dpc_unit *u;
    /* up to the IR, as `dpc ir`: a model whose forward does not compile is
     * an error here too, and nothing is printed */
    if (rc || (rc = front(o.model, DPC_STAGE_IR, &u)))
        return rc;
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_unit_print(u, &out);
    dpc_unit_free(u);
    return emit(&out);
}

static int cmd_ir(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "sB");
    if (rc)
        return rc;
    bool fused = false;
    if (o.stage && strcmp(o.stage, "fused") == 0)
        fused = true;
    else if (o.stage && strcmp(o.stage, "parsed") != 0)
        return usage_error("unknown stage '%s' (parsed or fused)", o.stage);
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_unit *u;
    if ((rc = graph_unit(&o, fused ? DPC_STAGE_FUSED : DPC_STAGE_IR, &u)))
        return rc;
    dpc_unit_ir(u, fused, &out);
    dpc_unit_free(u);
    return emit(&out);
}

/* --dtype f32|bf16|f16: how the CUDA backend stores floats. */
static int dtype_opt(const opts *o, kprec *p) {
    const char *d = o->dtype ? o->dtype : "f32";
    if (!kprec_parse(d, p))
        return usage_error("unknown dtype '%s' (f32, bf16 or f16)", d);
    return 0;
}

static int cmd_source(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "tDB");
    if (rc)
        return rc;
    const char *t = o.target ? o.target : "cpu";
    if (strcmp(t, "cpu") != 0 && strcmp(t, "cuda") != 0)
        return usage_error("unknown target '%s' (cpu or cuda)", t);
    kprec prec;
    if ((rc = dtype_opt(&o, &prec)))
        return rc;
    if (prec != KP_F32 && strcmp(t, "cuda") != 0)
        return usage_error("--dtype %s applies to --target cuda (the CPU backend computes in f32)", o.dtype);
    dpc_unit *u;
    if ((rc = graph_unit(&o, DPC_STAGE_FUSED, &u)))
        return rc;
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_unit_source(u, strcmp(t, "cpu") == 0 ? DPC_DIALECT_C : DPC_DIALECT_CUDA, prec, &out);
    dpc_unit_free(u);
    return emit(&out);
}

static int cmd_init(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "oS");
    if (rc)
        return rc;
    if (o.nout != 1)
        return usage_error("%s", "init needs exactly one -o W.safetensors");
    if ((rc = check_outputs(&o, o.out, o.nout)))
        return rc;
    uint64_t seed = 0;
    if (o.seed) {
        char *end;
        errno = 0;
        seed = strtoull(o.seed, &end, 10);
        if (errno || *end || !*o.seed)
            return usage_error("--seed needs a non-negative integer, got '%s'", o.seed);
    }
    dpc_model *m;
    if ((rc = compile_model(o.model, &m)))
        return rc;
    dpc_err e;
    dpc_status s = dpc_model_init_weights(m, seed, o.out[0], &e);
    dpc_model_free(m);
    return s == DPC_OK ? 0 : fail(s, &e);
}

/* --kw NAME=VALUE against forward's scalar parameters: each VALUE read as
 * its scalar's type, then the library's one rule (dpc_sig_scalars). */
static int parse_kw(const dpc_model *m, const opts *o, double *scalars) {
    const dpc_signature *g = m->sig;
    char *names[DPC_MAX_SCALARS];
    double values[DPC_MAX_SCALARS];
    dpc_err e;
    dpc_status s = DPC_OK;
    int n = 0, rc = 0;
    for (; n < o->nkw && s == DPC_OK; n++) {
        const char *eq = strchr(o->kw[n], '=');
        if (!eq) {
            rc = usage_error("--kw needs NAME=VALUE, got '%s'", o->kw[n]);
            break;
        }
        names[n] = dpc_strndup(o->kw[n], (size_t)(eq - o->kw[n]));
        if (!names[n]) {
            s = dpc_errf(&e, DPC_ENOMEM, "out of memory");
            break;
        }
        int idx = dpc_sig_scalar_index(g, names[n]);
        values[n] = 0; /* an unknown name: dpc_sig_scalars names it */
        if (idx >= 0)
            s = dpc_sig_scalar_parse(&g->scalars[idx], eq + 1, &values[n], &e);
    }
    if (!rc && s == DPC_OK)
        s = dpc_sig_scalars(g, (const char *const *)names, values, n, scalars, &e);
    for (int k = 0; k < n; k++)
        dpc_free(names[k]);
    return rc ? rc : s == DPC_OK ? 0 : fail(s, &e);
}

/* ---- .dpa artifacts: dpc compile, dpc inspect, and loading for the other verbs */

static dpc_artifact *g_dpa; /* the artifact this process loaded */

static void free_dpa(void) { dpc_artifact_free(g_dpa); }

/* Reads and verifies an artifact; the model comes from its stored sources. */
static int load_dpa(const char *path, dpc_model **m) {
    static bool registered;
    dpc_err e;
    if (!registered)
        registered = atexit(free_dpa) == 0;
    dpc_artifact_free(g_dpa);
    g_dpa = NULL;
    dpc_status s = dpc_artifact_read(path, &g_dpa, &e);
    if (s == DPC_OK)
        s = dpc_artifact_instantiate(g_dpa, m, &e);
    return s == DPC_OK ? 0 : fail(s, &e);
}

static int unit_dpa(const char *path, dpc_unit **u) {
    dpc_model *m;
    int rc = load_dpa(path, &m);
    if (rc)
        return rc;
    *u = m->unit; /* the model is unbound: nothing else to keep */
    m->unit = m->gunit = NULL;
    m->sig = m->gsig = NULL;
    m->front = NULL;
    dpc_model_free(m);
    return 0;
}

/* run without --weights: the weights embedded in the artifact */
static dpc_status dpa_weights(dpc_safetensors **st, dpc_err *e) {
    return dpc_artifact_take_weights(g_dpa, st, e);
}

static int cmd_compile(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "owa");
    if (rc)
        return rc;
    if (o.nout > 1)
        return usage_error("%s", "compile writes one artifact: give -o once");
    char def[4096];
    const char *out = o.nout ? o.out[0] : NULL;
    if (!out) {
        size_t n = strlen(o.model);
        if (n > 3 && strcmp(o.model + n - 3, ".dp") == 0)
            snprintf(def, sizeof def, "%.*s.dpa", (int)(n - 3), o.model);
        else
            snprintf(def, sizeof def, "%s.dpa", o.model);
        out = def;
    }
    if ((rc = check_outputs(&o, &out, 1)))
        return rc;
    char archbuf[1024];
    const char *archs[DPC_ARTIFACT_MAX_ARCHS];
    int narchs = 0;
    if (o.arch) {
        if (strlen(o.arch) >= sizeof archbuf)
            return usage_error("%s", "--arch list too long");
        snprintf(archbuf, sizeof archbuf, "%s", o.arch);
        for (char *p = archbuf;;) {
            char *q = strchr(p, ',');
            if (q)
                *q = 0;
            if (!dpc_nvrtc_arch_valid(p))
                return usage_error("bad --arch '%s' (expected sm_XX or compute_XX, e.g. sm_90)", p);
            if (narchs == DPC_ARTIFACT_MAX_ARCHS)
                return usage_error("%s", "too many --arch entries");
            archs[narchs++] = p;
            if (!q)
                break;
            p = q + 1;
        }
    }
    dpc_artifact_opts ao = {.weights = o.weights, .archs = archs, .narchs = narchs,
                            .cuda_suffix = getenv("DPC_FAULT_CUDA_SOURCE")};
    dpc_safetensors *imported = cli_onnx_artifact(o.model, !o.weights, &ao); /* MODEL.onnx: embeds its weights */
    dpc_buf img, diags, warn;
    dpc_buf_init(&diags);
    dpc_buf_init(&warn);
    dpc_err e;
    dpc_status s = dpc_artifact_build(o.model, &ao, &img, &diags, &warn, &e);
    if (imported)
        dpc_st_free(imported);
    if (warn.len)
        fprintf(stderr, "dpc: warning: %s\n", warn.data);
    dpc_buf_free(&warn);
    if (s == DPC_OK)
        s = dpc_write_file_atomic(out, img.data, img.len, &e);
    dpc_buf_free(&img);
    if (s != DPC_OK && diags.len) {
        fputs(diags.data, stderr);
        dpc_buf_free(&diags);
        return 1;
    }
    dpc_buf_free(&diags);
    return s == DPC_OK ? 0 : fail(s, &e);
}

static int cmd_inspect(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "");
    if (rc)
        return rc;
    if (!dpc_artifact_path(o.model))
        return usage_error("inspect takes a compiled artifact (.dpa), got '%s'",
                           cli_onnx_original() ? cli_onnx_original() : o.model);
    dpc_model *m;
    if ((rc = load_dpa(o.model, &m)))
        return rc;
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_artifact_describe(g_dpa, m, &out);
    dpc_model_free(m);
    return emit(&out);
}

/* The device list with every "cuda:local" entry made "cuda:<this
 * process's rank on its machine>" (0 outside MPI), so that one command line
 * gives each rank its own GPU. False if it does not fit. */
static bool expand_local(const char *list, char *out, size_t n) {
    size_t len = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t el = end ? (size_t)(end - p) : strlen(p);
        const char *s = p, *t = p + el;
        while (s < t && (*s == ' ' || *s == '\t'))
            s++;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        int w = (size_t)(t - s) == 10 && !memcmp(s, "cuda:local", 10)
                    ? snprintf(out + len, n - len, "cuda:%d%s", dpc_mpi_env_local_rank(), end ? "," : "")
                    : snprintf(out + len, n - len, "%.*s%s", (int)el, p, end ? "," : "");
        if (w < 0 || (size_t)w >= n - len)
            return false;
        len += (size_t)w;
        if (!end)
            return true;
        p = end + 1;
    }
}

/* --devices LIST, or the CPU alone. Returns 0 or the exit status. */
static int devices_opt(const opts *o, dpc_device *devs, int *ndev) {
    dpc_err e;
    *ndev = 1;
    devs[0] = (dpc_device){DPC_DEV_CPU, 0};
    if (!o->devices)
        return 0;
    char list[4096];
    if (!expand_local(o->devices, list, sizeof list))
        return usage_error("%s", "--devices list too long");
    dpc_status s = dpc_parse_devices(list, devs, DPC_MAX_DEVICES, ndev, &e);
    return s == DPC_OK ? 0 : fail(s, &e);
}

/* What run and bench hold until they return. */
static void free_run(dpc_tensor **in, dpc_tensor **out, dpc_safetensors *st, dpc_model *m) {
    for (int i = 0; i < MAX_IO; i++) {
        dpc_tensor_free(in[i]);
        dpc_tensor_free(out[i]);
    }
    if (st)
        dpc_st_free(st);
    dpc_model_free(m);
}

static double now_s(void);

/* Serialises every output, then writes them as one (dpc_write_files_atomic):
 * a failure anywhere leaves every previous file as it was. */
static dpc_status write_outputs(const opts *o, dpc_tensor **out, dpc_err *e) {
    dpc_status s = DPC_OK;
    dpc_buf bufs[MAX_IO];
    const void *data[MAX_IO];
    size_t lens[MAX_IO];
    for (int i = 0; i < o->nout; i++) {
        dpc_buf_init(&bufs[i]);
        if (s == DPC_OK)
            s = dpc_npy_serialize(out[i], &bufs[i], e);
        data[i] = bufs[i].data;
        lens[i] = bufs[i].len;
    }
    if (s == DPC_OK)
        s = dpc_write_files_atomic(o->nout, o->out, data, lens, e);
    for (int i = 0; i < o->nout; i++)
        dpc_buf_free(&bufs[i]);
    return s;
}

/* ---- dpc run under mpirun (cli/mpi_run.h) ------------------------------
 * Every rank runs cmd_run up to the forward on its share of the batch. Until
 * the ranks agree on how that went, what a rank would print goes to a
 * temporary file instead of stderr: then only rank 0 speaks, either the
 * lowest failing rank's text with its error lines naming that rank, or its
 * own warnings, and alone writes the gathered outputs. */

typedef struct cli_mpi {
    bool on;
    dpc_mpi mpi;
    int saved_stderr; /* fd 2 while it points at the capture file */
    FILE *capture;
    dpc_mpi_share share;
    double seconds; /* this rank's forward */
} cli_mpi;

/* MPI mode: `--mpi`, or started by a launcher with more than one process.
 * A plain run leaves MPI alone (fast start, clean sanitizer runs). */
static int mpi_begin(const opts *o, cli_mpi *x) {
    memset(x, 0, sizeof *x);
    x->saved_stderr = -1;
    int n = dpc_mpi_env_size();
    if (!o->mpi && (n == 0 || n == 1))
        return 0;
    dpc_err e;
    if (!dpc_mpi_built()) {
        if (!o->mpi && n < 0) /* PMIx alone does not say there are several: run whole */
            return 0;
        if (dpc_mpi_env_rank() > 0) /* rank 0 says it for all */
            return 1;
        dpc_status s = dpc_mpi_init(&x->mpi, &e);
        if (o->mpi)
            dpc_err_prefix(&e, "--mpi: ");
        else
            dpc_err_prefix(&e, "started by an MPI launcher as %d processes (run it without mpirun), but ", n);
        return fail(s, &e);
    }
    dpc_status s = dpc_mpi_init(&x->mpi, &e);
    if (s != DPC_OK)
        return fail(s, &e);
    x->on = true;
    fflush(stderr);
    x->capture = tmpfile(); /* without one every rank speaks for itself: noisier, still correct */
    x->saved_stderr = x->capture ? dup(STDERR_FILENO) : -1;
    if (x->saved_stderr >= 0)
        dup2(fileno(x->capture), STDERR_FILENO);
    return 0;
}

/* Puts stderr back and returns what was written to it meanwhile. */
static char *capture_end(cli_mpi *x, size_t *len) {
    *len = 0;
    if (x->saved_stderr < 0) {
        if (x->capture)
            fclose(x->capture);
        x->capture = NULL;
        return NULL;
    }
    fflush(stderr);
    dup2(x->saved_stderr, STDERR_FILENO);
    close(x->saved_stderr);
    x->saved_stderr = -1;
    long n = ftell(x->capture);
    char *t = n > 0 ? malloc((size_t)n + 1) : NULL;
    rewind(x->capture);
    if (t) {
        *len = fread(t, 1, (size_t)n, x->capture);
        t[*len] = 0;
    }
    fclose(x->capture);
    x->capture = NULL;
    return t;
}

/* The forward: the whole batch, or under MPI this rank's share (none on an
 * idle rank). */
static dpc_status run_forward(const opts *o, cli_mpi *x, dpc_model *m, dpc_tensor **in, const double *scalars,
                              dpc_tensor **out, dpc_err *e) {
    if (!x->on)
        return dpc_model_run(m, (const dpc_tensor *const *)in, o->ninputs, scalars, out, e);
    const char *names[MAX_IO];
    dpc_tensor views[MAX_IO];
    const dpc_tensor *vp[MAX_IO];
    bool whole[MAX_IO];
    for (int i = 0; i < o->ninputs; i++) {
        names[i] = dpc_model_gsig(m)->inputs[i].name, vp[i] = &views[i];
        whole[i] = dpc_sig_input_whole(&dpc_model_gsig(m)->inputs[i]);
    }
    dpc_status s =
        dpc_mpi_take_share(&x->mpi, (const dpc_tensor *const *)in, o->ninputs, names, whole, views, &x->share, e);
    if (s != DPC_OK || !x->share.works)
        return s;
    double t0 = now_s();
    s = dpc_model_run(m, vp, o->ninputs, scalars, out, e);
    x->seconds = now_s() - t0;
    return s;
}

/* Rank 0 repeats the failing rank's text, its error lines naming it. */
static void print_rank_error(int rank, const char *text) {
    bool said = false;
    const char *tag = "dpc: error: ";
    for (const char *p = text ? text : ""; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (!strncmp(p, tag, strlen(tag))) {
            fprintf(stderr, "dpc: error: rank %d: %.*s\n", rank, len - (int)strlen(tag), p + strlen(tag));
            said = true;
        } else
            fprintf(stderr, "%.*s\n", len, p);
        p += len + (nl != NULL);
    }
    if (!said)
        fprintf(stderr, "dpc: error: rank %d failed\n", rank);
}

static void print_mpi_split(const cli_mpi *x, const dpc_mpi_rank_report *all) {
    const dpc_mpi_share *sh = &x->share;
    int n = x->mpi.size;
    fprintf(stderr, "dpc: batch %lld over %d MPI rank%s, %d working%s\n", (long long)sh->batch, n, n == 1 ? "" : "s",
            sh->k, sh->scattered ? "" : " (no scatter)");
    for (int r = 0; r < n; r++) {
        const dpc_mpi_rank_report *p = &all[r];
        if (!p->works)
            fprintf(stderr, "dpc:   rank %d on %s: idle\n", r, p->host);
        else
            fprintf(stderr, "dpc:   rank %d on %s (%s): rows [%lld, %lld) in %.3f ms\n", r, p->host, p->devices,
                    (long long)p->offset, (long long)(p->offset + (p->rows < 0 ? 0 : p->rows)), p->seconds * 1e3);
    }
}

static dpc_status write_outputs(const opts *o, dpc_tensor **out, dpc_err *e);

/* After the ranks agreed that all went well: the gather, and rank 0 writes.
 * Rank 0's verdict on the write reaches every rank. */
static int mpi_gather_write(const opts *o, cli_mpi *x, dpc_tensor **out) {
    dpc_mpi_rank_report me = {.works = x->share.works, .offset = x->share.offset, .rows = x->share.rows,
                              .seconds = x->seconds}, *all = NULL;
    gethostname(me.host, sizeof me.host - 1);
    snprintf(me.devices, sizeof me.devices, "%s", o->devices ? o->devices : "cpu");
    dpc_tensor *g[MAX_IO] = {0};
    dpc_err e;
    int nzero = 0;
    bool root = x->mpi.rank == 0;
    dpc_status s = dpc_mpi_gather(&x->mpi, &x->share, out, o->nout, g, &nzero, &me, &all, &e);
    if (s != DPC_OK)
        return root ? fail(s, &e) : 1;
    if (root && nzero && x->share.scattered)
        fprintf(stderr, "dpc: warning: %d 0-dim output%s gathered as a vector of one value per rank (%d), as "
                        "PyTorch's DataParallel does\n", nzero, nzero == 1 ? "" : "s", x->share.k);
    if (root && o->verbose)
        print_mpi_split(x, all);
    if (root)
        s = write_outputs(o, g, &e);
    for (int j = 0; j < MAX_IO; j++)
        dpc_tensor_free(g[j]);
    free(all);
    int rc = s == DPC_OK ? 0 : root ? fail(s, &e) : 1;
    return dpc_mpi_bcast_status(&x->mpi, s) == DPC_OK ? rc : (rc ? rc : 1);
}

/* Ends MPI mode: every rank brings its exit status so far (rc), the ranks
 * agree, and either all fail (rank 0 reports the lowest failing rank) or
 * the outputs are gathered. MPI is finalised on every path. */
static int mpi_complete(const opts *o, cli_mpi *x, int rc, dpc_tensor **out) {
    size_t len;
    char *text = capture_end(x, &len), *fail_text = NULL;
    int fail_rank, fail_rc;
    dpc_err e;
    bool root = x->mpi.rank == 0;
    dpc_status s = dpc_mpi_agree(&x->mpi, rc, text, len, &fail_rank, &fail_rc, &fail_text, &e);
    if (s != DPC_OK) {
        rc = fail(s, &e);
    } else if (fail_rank >= 0) {
        if (root)
            print_rank_error(fail_rank, fail_text);
        rc = root ? fail_rc : rc ? rc : 1;
    } else {
        if (root && text)
            fputs(text, stderr); /* its warnings; the other ranks' are the same */
        rc = mpi_gather_write(o, x, out);
    }
    free(text);
    free(fail_text);
    fflush(stderr);
    dpc_mpi_finalize(&x->mpi);
    return rc;
}

/* The state_dict entries a model needs: its parameters and buffers, less
 * those forward ignores (num_batches_tracked). */
static int needed_weights(const dpc_model *m) {
    int n = 0;
    for (int i = 0; i < m->sig->nparams; i++)
        n += !m->sig->params[i].ignored && !m->sig->params[i].nonpersistent;
    return n;
}

/* The weights for run: --weights; else an imported .onnx's initializers;
 * else those embedded in the .dpa; else none (*st NULL) for a model that
 * needs none. */
static dpc_status run_weights(const opts *o, const dpc_model *m, dpc_safetensors **st, dpc_err *e) {
    *st = NULL;
    if (o->weights)
        return dpc_st_read(o->weights, st, e);
    if ((*st = cli_onnx_take_weights()))
        return DPC_OK;
    int n = needed_weights(m);
    if (g_dpa && (n || dpc_artifact_has_weights(g_dpa)))
        return dpa_weights(st, e); /* its message says to give --weights */
    if (n)
        return dpc_errf(e, DPC_EUSAGE,
                        "%s has parameters or buffers (%d state_dict entr%s): give --weights W.safetensors (`dpc "
                        "init %s -o W.safetensors` writes initial ones)",
                        m->sig->model_name, n, n == 1 ? "y" : "ies", o->model);
    return DPC_OK;
}

/* int32 index inputs widened in place (dpc_model_widen_inputs). */
static dpc_status widen_inputs(const dpc_model *m, dpc_tensor **in, int n, dpc_err *e) {
    dpc_tensor *wide[MAX_IO];
    dpc_status s = dpc_model_widen_inputs(m, (const dpc_tensor *const *)in, n, wide, e);
    for (int i = 0; i < n; i++)
        if (wide[i]) {
            dpc_tensor_free(in[i]);
            in[i] = wide[i];
        }
    return s;
}

static int cmd_run(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "oiwkdbDM");
    if (rc)
        return rc;
    kprec prec;
    if ((rc = dtype_opt(&o, &prec)))
        return rc;
    if (o.nout == 0)
        return usage_error("%s", "run needs -o OUT.npy for each returned tensor");
    if ((rc = check_outputs(&o, o.out, o.nout)))
        return rc;
    cli_mpi x; /* from here on, under MPI every path ends in mpi_complete */
    if ((rc = mpi_begin(&o, &x)))
        return rc;
    dpc_device devs[DPC_MAX_DEVICES];
    int ndev;
    dpc_err e;
    dpc_model *m = NULL;
    dpc_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    dpc_safetensors *st = NULL;
    double scalars[DPC_MAX_SCALARS];
    dpc_status s = DPC_OK;
    if ((rc = devices_opt(&o, devs, &ndev)) || (rc = compile_model(o.model, &m)))
        goto done;
    const dpc_signature *g = m->sig;
    rc = 1;
    if (!g->unbound && o.nout != g->noutputs) { /* run-time dims: known once the inputs are read */
        fprintf(stderr, "dpc: error: %s returns %d tensor%s but %d -o option%s given\n", g->model_name, g->noutputs,
                g->noutputs == 1 ? "" : "s", o.nout, o.nout == 1 ? " was" : "s were");
        rc = 2;
        goto done;
    }
    if (o.ninputs != g->ninputs) {
        fprintf(stderr, "dpc: error: forward of %s takes %d tensor input%s but %d --input given\n", g->model_name,
                g->ninputs, g->ninputs == 1 ? "" : "s", o.ninputs);
        rc = 2;
        goto done;
    }
    if (parse_kw(m, &o, scalars))
        goto done;
    if ((s = run_weights(&o, m, &st, &e)) != DPC_OK)
        goto failed;
    dpc_safetensors none = {0}; /* the empty state_dict of a model without parameters */
    dpc_buf warn;
    dpc_buf_init(&warn);
    s = dpc_model_bind(m, st ? st : &none, &warn, &e);
    if (warn.len)
        fprintf(stderr, "dpc: warning: %s\n", warn.data);
    dpc_buf_free(&warn);
    if (s != DPC_OK)
        goto failed;
    for (int i = 0; i < o.ninputs; i++)
        if ((s = dpc_npy_read(o.inputs[i], &in[i], &e)) != DPC_OK)
            goto failed;
    if ((s = widen_inputs(m, in, o.ninputs, &e)) != DPC_OK)
        goto failed;
    dpc_model_set_precision(m, prec);
    if ((s = dpc_model_set_devices(m, devs, ndev, &e)) != DPC_OK)
        goto failed;
    if ((s = dpc_model_faults_from_env(m, &e)) != DPC_OK)
        goto failed;
    if (g->unbound) { /* the specialisation for these inputs' run-time dims says what forward returns */
        if ((s = dpc_model_select(m, (const dpc_tensor *const *)in, o.ninputs, &e)) != DPC_OK)
            goto failed;
        if (o.nout != m->sig->noutputs) {
            fprintf(stderr, "dpc: error: %s returns %d tensor%s but %d -o option%s given\n", g->model_name,
                    m->sig->noutputs, m->sig->noutputs == 1 ? "" : "s", o.nout, o.nout == 1 ? " was" : "s were");
            rc = 2;
            goto done;
        }
    }
    if ((s = run_forward(&o, &x, m, in, scalars, out, &e)) != DPC_OK)
        goto failed;
    for (int w = 0; w < m->last.nwarnings && w < DPC_DP_MAX_WARNINGS; w++)
        fprintf(stderr, "dpc: warning: %s\n", m->last.warnings[w]);
    if (o.verbose && !x.on) {
        fprintf(stderr, "dpc: batch %lld over %d device%s, %d replica%s%s\n", (long long)m->last.batch, m->last.ndevices,
                m->last.ndevices == 1 ? "" : "s", m->last.nreplicas, m->last.nreplicas == 1 ? "" : "s",
                m->last.scattered ? "" : " (no scatter)");
        for (int r = 0; r < m->last.nreplicas; r++) {
            char nm[32];
            dpc_device_name(&m->last.replica[r].device, nm, sizeof nm);
            fprintf(stderr, "dpc:   replica %d on %s: rows [%lld, %lld) in %.3f ms\n", r, nm,
                    (long long)m->last.replica[r].row_offset,
                    (long long)(m->last.replica[r].row_offset + m->last.replica[r].rows), m->last.replica[r].seconds * 1e3);
        }
        dpc_cuda_weights_info wi; /* how further GPUs got the weights: NCCL, or peer copy and why */
        if (dpc_cuda_weights(m->be, &wi) && wi.how[0])
            fprintf(stderr, "dpc: weights: %s\n", wi.how);
        char kh[1024]; /* a .dpa's CUBIN/PTX, or NVRTC */
        if (dpc_cuda_kernels(m->be, kh, sizeof kh))
            fprintf(stderr, "dpc: kernels: %s\n", kh);
    }
    rc = 0;
    if (!x.on && (s = write_outputs(&o, out, &e)) != DPC_OK) /* under MPI rank 0 writes after the gather */
        goto failed;
    goto done;
failed:
    rc = fail(s, &e);
done:
    if (x.on)
        rc = mpi_complete(&o, &x, rc, out);
    free_run(in, out, st, m);
    return rc;
}

/* Writes all of b to fd; false on an error. */
static bool write_all(int fd, const dpc_buf *b) {
    for (size_t off = 0; off < b->len;) {
        ssize_t w = write(fd, b->data + off, b->len - off);
        if (w < 0 && errno != EINTR)
            return false;
        off += w > 0 ? (size_t)w : 0;
    }
    return true;
}

/* Graphviz's `dot -Tsvg` on the text in dot: its standard output read into
 * svg, so that the SVG is written like every other output (no shell, no
 * temporary name next to the output). Its standard input is an anonymous
 * in-memory file holding the text: no name on disk that a signal could
 * leave behind, and no pipe to keep full while reading the other. Its
 * stderr is the user's. */
static dpc_status render_svg(const dpc_buf *dot, dpc_buf *svg, dpc_err *e) {
    int fd = memfd_create("dpc-graph", MFD_CLOEXEC), p[2] = {-1, -1};
    bool ok = fd >= 0 && write_all(fd, dot) && lseek(fd, 0, SEEK_SET) == 0;
    if (!ok || pipe2(p, O_CLOEXEC) != 0) {
        ok = false;
        dpc_errf(e, DPC_EIO, "cannot hold the graph for Graphviz: %s", strerror(errno));
        goto out;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    char *argv[] = {"dot", "-Tsvg", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "dot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        ok = false;
        dpc_errf(e, DPC_EIO, "cannot run Graphviz 'dot' (is graphviz installed?): %s", strerror(rc));
        goto out;
    }
    char chunk[65536];
    for (ssize_t r; (r = read(p[0], chunk, sizeof chunk)) != 0;)
        if (r > 0)
            dpc_buf_put(svg, chunk, (size_t)r);
        else if (errno != EINTR)
            break;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && svg->len && !svg->oom;
    if (!ok)
        dpc_errf(e, DPC_EIO, "Graphviz 'dot' failed to render the graph%s", svg->oom ? ": out of memory" : "");
out:
    if (p[0] >= 0)
        close(p[0]);
    if (fd >= 0)
        close(fd);
    return ok ? DPC_OK : e->code;
}

static int cmd_graph(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "oB");
    if (rc)
        return rc;
    if (o.nout > 1)
        return usage_error("%s", "graph writes one file: give -o once");
    if ((rc = check_outputs(&o, o.out, o.nout)))
        return rc;
    dpc_unit *u;
    if ((rc = graph_unit(&o, DPC_STAGE_FUSED, &u)))
        return rc;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_unit_dot(u, &b);
    dpc_unit_free(u);
    if (o.nout == 0)
        return emit(&b);
    dpc_err e;
    const char *path = o.out[0];
    size_t len = strlen(path);
    dpc_status s = DPC_OK;
    if (len > 4 && strcmp(path + len - 4, ".svg") == 0) {
        dpc_buf svg;
        dpc_buf_init(&svg);
        s = render_svg(&b, &svg, &e);
        dpc_buf_free(&b);
        b = svg;
    }
    if (s == DPC_OK)
        s = dpc_write_file_atomic(path, b.data, b.len, &e);
    dpc_buf_free(&b);
    return s == DPC_OK ? 0 : fail(s, &e);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times forwards in this process: compile and weight loading are not
 * counted, the memory plan is made by the warm-up runs. */
static int cmd_bench(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o, "bdwnDB");
    if (rc)
        return rc;
    kprec prec;
    if ((rc = dtype_opt(&o, &prec)))
        return rc;
    char *end;
    long long batch = o.batch ? strtoll(o.batch, &end, 10) : -1;
    if (!o.batch || *end || batch < 0 || batch > (1 << 24))
        return usage_error("%s", "bench needs --batch B (0 <= B <= 16777216)");
    long iters = o.iters ? strtol(o.iters, &end, 10) : 0;
    if (o.iters && (*end || iters <= 0 || iters > 1000000))
        return usage_error("--iters needs a positive count, got '%s'", o.iters);
    dpc_device devs[DPC_MAX_DEVICES];
    int ndev;
    dpc_err e;
    dpc_status s;
    if ((rc = devices_opt(&o, devs, &ndev)))
        return rc;
    dpc_model *m;
    if ((rc = compile_model(o.model, &m)))
        return rc;
    const dpc_signature *g = m->sig;
    dpc_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    dpc_safetensors *st = NULL;
    double scalars[DPC_MAX_SCALARS] = {0}, *times = NULL;
    int64_t rt[DPC_MAX_RTDIMS]; /* the run-time dims of the inputs: --bind */
    if ((g->unbound || o.nbind) && (rc = bind_values(&o, g, rt))) {
        dpc_model_free(m);
        return rc;
    }
    rc = 1;
    if (!o.weights && (st = cli_onnx_take_weights())) /* an imported .onnx's initializers */
        s = dpc_model_bind(m, st, NULL, &e);
    else if (!o.weights)
        s = dpc_model_bind_init(m, 0, &e); /* dpc init's weights, seed 0 */
    else if ((s = dpc_st_read(o.weights, &st, &e)) == DPC_OK)
        s = dpc_model_bind(m, st, NULL, &e);
    if (s != DPC_OK)
        goto failed;
    for (int i = 0; i < g->nscalars; i++)
        scalars[i] = g->scalars[i].def;
    uint64_t rng = 88172645463325252ull;
    for (int i = 0; i < g->ninputs; i++) {
        if ((s = dpc_model_input_new(m, i, batch, g->nrtdims ? rt : NULL, &in[i], &e)) != DPC_OK)
            goto failed;
        if (i == g->ninputs - 1 && (s = dpc_model_select(m, (const dpc_tensor *const *)in, g->ninputs, &e)) != DPC_OK)
            goto failed; /* a specialisation's index limits are known once it is compiled */
    }
    for (int i = 0; i < g->ninputs; i++) {
        const dpc_sig_tensor *p = &g->inputs[i];
        int64_t limit = dpc_model_input_limit(m, i) ? dpc_model_input_limit(m, i) : 1;
        int64_t cnt = dpc_tensor_numel(in[i]);
        for (int64_t k = 0; k < cnt; k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            if (p->dtype == DPC_I64)
                ((int64_t *)in[i]->data)[k] = (int64_t)(rng % (uint64_t)limit);
            else
                ((float *)in[i]->data)[k] = (float)((double)(rng >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        }
    }
    dpc_model_set_precision(m, prec);
    if ((s = dpc_model_set_devices(m, devs, ndev, &e)) != DPC_OK)
        goto failed;
    /* warm-up: 3 forwards, or fewer once they have taken a second (a
     * batch-64 ViT-B/16 forward takes seconds) */
    int warm = 3;
    long n = iters ? iters : 100000;
    times = calloc((size_t)n, sizeof(double));
    long done = 0;
    double t_start = now_s();
    for (long it = -warm; it < n; it++) {
        double t0 = now_s();
        s = dpc_model_run(m, (const dpc_tensor *const *)in, g->ninputs, scalars, out, &e);
        double t1 = now_s();
        for (int j = 0; j < MAX_IO; j++) {
            dpc_tensor_free(out[j]);
            out[j] = NULL;
        }
        if (s != DPC_OK)
            goto failed;
        if (it < -1 && t1 - t_start > 1.0)
            it = -1; /* the warm-up ends here */
        if (it >= 0)
            times[done++] = t1 - t0;
        if (!iters && it >= 10 && t1 - t_start > 1.0)
            break;
    }
    qsort(times, (size_t)done, sizeof(double), cmp_double);
    double med = times[done / 2], best = times[0];
    double flops = dpc_unit_flops(m->unit, batch);
    char devname[256] = "";
    for (int i = 0; i < ndev; i++) {
        char d[32];
        dpc_device_name(&devs[i], d, sizeof d);
        snprintf(devname + strlen(devname), sizeof devname - strlen(devname), "%s%s", i ? "," : "", d);
    }
    if (o.json)
        printf("{\"model\": \"%s\", \"batch\": %lld, \"devices\": \"%s\", \"iters\": %ld, \"median_us\": %.3f, "
               "\"min_us\": %.3f, \"flops\": %.0f, \"gflops\": %.3f}\n",
               g->model_name, batch, devname, done, med * 1e6, best * 1e6, flops, med > 0 ? flops / med * 1e-9 : 0);
    else
        printf("%s batch %lld on %s: median %.1f us, min %.1f us over %ld forwards; %.3g GFLOP/forward, %.1f GFLOP/s\n",
               g->model_name, batch, devname, med * 1e6, best * 1e6, done, flops * 1e-9,
               med > 0 ? flops / med * 1e-9 : 0);
    rc = 0;
    goto done;
failed:
    rc = fail(s, &e);
done:
    free(times);
    free_run(in, out, st, m);
    return rc;
}

static int cmd_cache(int argc, char **argv) {
    dpc_err e;
    if (argc != 1)
        return usage_error("%s", "cache needs ls or clear");
    if (strcmp(argv[0], "ls") == 0) {
        dpc_buf b;
        dpc_buf_init(&b);
        dpc_status s = dpc_kcache_list(&b, &e);
        if (s != DPC_OK)
            return fail(s, &e);
        return emit(&b);
    }
    if (strcmp(argv[0], "clear") == 0) {
        long n = 0;
        dpc_status s = dpc_kcache_clear(&n, &e);
        if (s != DPC_OK)
            return fail(s, &e);
        printf("removed %ld cached file%s\n", n, n == 1 ? "" : "s");
        return 0;
    }
    return usage_error("unknown cache command '%s' (ls or clear)", argv[0]);
}

/* SIGINT, SIGTERM, SIGHUP: kill the host compiler children and remove
 * their temporary directories (the library installs no handler, and only
 * exposes the async-signal-safe cleanup), then die of the same signal. */
static void on_fatal_signal(int sig) {
    dpc_hostcc_abort();
    raise(sig); /* SA_RESETHAND restored the default; delivered on return */
}

static void install_signal_handlers(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa = {.sa_handler = on_fatal_signal, .sa_flags = SA_RESETHAND};
        sigemptyset(&sa.sa_mask);
        /* a signal ignored by whoever started dpc (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

/* A refused kernel cache directory, said once per run. */
static void report_cache_refusal(void) {
    char msg[1024];
    if (dpc_kcache_refusal(msg, sizeof msg))
        fprintf(stderr, "dpc: warning: %s; compiled kernels are not kept\n", msg);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return usage_error("%s", "missing command");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("dpc %s\n", DPC_VERSION);
        return 0;
    }
    struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"print", cmd_print}, {"ir", cmd_ir}, {"source", cmd_source}, {"init", cmd_init},
        {"run", cmd_run}, {"graph", cmd_graph}, {"cache", cmd_cache}, {"bench", cmd_bench},
        {"compile", cmd_compile}, {"inspect", cmd_inspect}, {"serve", dpc_cmd_serve}, {"import", cli_import},
    };
    install_signal_handlers();
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        if (!strcmp(cmd, cmds[i].name)) {
            int rc = cmds[i].fn(argc - 2, argv + 2);
            report_cache_refusal();
            return rc;
        }
    return usage_error("unknown command '%s'", cmd);
}
