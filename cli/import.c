/* import.c - `dpc import MODEL.onnx -o MODEL.dp [--weights-out W.safetensors]
 * [--dim NAME=SIZE ...] [--list-ops]`, and the one function every other
 * verb calls on its model path: an .onnx file is imported in memory, and
 * its .dp text and weights are handed to the compiler and the runtime from
 * there (nothing is staged on disk). */
#include "import.h"

#include "onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(const char *msg, const char *arg) {
    fprintf(stderr, "dpc: error: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\nusage: dpc import MODEL.onnx -o MODEL.dp [--weights-out W.safetensors] [--dim NAME=SIZE ...]\n"
                    "       dpc import --list-ops\n");
    return 2;
}

static int fail(dpc_status s, const dpc_err *e) {
    fprintf(stderr, "dpc: error: %s\n", e->msg);
    return s == DPC_EUSAGE ? 2 : 1;
}

static int parse_dim(const char *a, dpc_onnx_dim *d, char *buf, size_t n) {
    const char *eq = strchr(a, '=');
    if (!eq || eq == a || (size_t)(eq - a) >= n)
        return usage("--dim takes NAME=SIZE, got '%s'", a);
    memcpy(buf, a, (size_t)(eq - a));
    buf[eq - a] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || end == eq + 1 || *end || v < 1 || v > 2147483647)
        return usage("--dim SIZE must be an integer from 1 to 2147483647, got '%s'", a);
    d->name = buf;
    d->value = v;
    return 0;
}

/* The weights file beside out: MODEL.dp -> MODEL.safetensors. */
static void default_weights(const char *out, char *buf, size_t n) {
    size_t L = strlen(out);
    if (L > 3 && strcmp(out + L - 3, ".dp") == 0)
        snprintf(buf, n, "%.*s.safetensors", (int)(L - 3), out);
    else
        snprintf(buf, n, "%s.safetensors", out);
}

static int list_ops(void) {
    for (int i = 0; i < dpc_onnx_nops(); i++) {
        int lo, hi;
        const char *note;
        const char *name = dpc_onnx_op_name(i, &lo, &hi, &note), *ins = "", *outs = "";
        dpc_onnx_op_arity(i, &ins, &outs);
        printf("%s\t%d\t%d\t%s\t%s\t%s\n", name, lo < DPC_ONNX_MIN_OPSET ? DPC_ONNX_MIN_OPSET : lo,
               hi ? hi : DPC_ONNX_MAX_OPSET, ins, outs, note ? note : "");
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

/* An output (option opt, path) that names file, what the command reads or
 * the other output: refused, as every verb refuses it (cli/main.c). */
static int refuse_output(const char *opt, const char *path, const char *what, const char *file) {
    char msg[8400];
    snprintf(msg, sizeof msg, "%s '%.4000s' is %s ('%.3000s'): it would be overwritten; choose another output file",
             opt, path, what, file);
    return usage("%s", msg);
}

/* Refuses an output that is one of the files the model reads past the
 * .onnx (checked before the import): its external data. Writing it would
 * replace the user's weights. */
static int check_read_files(const dpc_onnx_result *r, const char *out, const char *wout) {
    for (size_t k = 1; k < r->nfiles; k++)
        if (dpc_same_file(out, r->files[k]) || dpc_same_file(wout, r->files[k])) {
            bool o = dpc_same_file(out, r->files[k]);
            return refuse_output(o ? "-o" : "--weights-out", o ? out : wout, "the model's external data", r->files[k]);
        }
    return 0;
}

int cli_import(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *wout = NULL;
    dpc_onnx_dim dims[DPC_ONNX_MAX_DIMS];
    char dimbuf[DPC_ONNX_MAX_DIMS][256];
    int ndims = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--list-ops"))
            return list_ops();
        bool val = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--weights-out") || !strcmp(a, "--dim");
        if (val && i + 1 >= argc)
            return usage("option '%s' needs a value", a);
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (out)
                return usage("%s", "give -o once");
            out = argv[++i];
        } else if (!strcmp(a, "--weights-out")) {
            if (wout)
                return usage("%s", "give --weights-out once");
            wout = argv[++i];
        } else if (!strcmp(a, "--dim")) {
            if (ndims == DPC_ONNX_MAX_DIMS)
                return usage("too many --dim options (at most %s)", "8");
            int rc = parse_dim(argv[++i], &dims[ndims], dimbuf[ndims], sizeof dimbuf[ndims]);
            if (rc)
                return rc;
            ndims++;
        } else if (a[0] == '-' && a[1])
            return usage("unknown option '%s'", a);
        else if (model)
            return usage("unexpected argument '%s'", a);
        else
            model = a;
    }
    if (!model)
        return usage("%s", "missing the model file");
    if (!out)
        return usage("%s", "import needs -o MODEL.dp");
    char wdef[4096];
    if (!wout) {
        default_weights(out, wdef, sizeof wdef);
        wout = wdef;
    }
    if (dpc_same_file(out, model))
        return refuse_output("-o", out, "the model", model);
    if (dpc_same_file(wout, model))
        return refuse_output("--weights-out", wout, "the model", model);
    if (dpc_same_file(out, wout))
        return refuse_output("--weights-out", wout, "the other output", out);
    dpc_onnx_import_opts io = {.path = model, .dims = dims, .ndims = ndims};
    dpc_onnx_result r;
    dpc_err e;
    dpc_status s = dpc_onnx_import(&io, &r, &e);
    if (s != DPC_OK)
        return fail(s, &e);
    int rc = check_read_files(&r, out, wout); /* its external data, now that they are known */
    if (rc) {
        dpc_onnx_result_free(&r);
        return rc;
    }
    dpc_buf img;
    s = dpc_st_serialize(r.weights, r.nweights, NULL, NULL, 0, &img, &e);
    if (s == DPC_OK) {
        const char *paths[2] = {out, wout};
        const void *data[2] = {r.dp, img.data};
        size_t lens[2] = {r.dp_len, img.len};
        s = dpc_write_files_atomic(2, paths, data, lens, &e); /* both or neither */
        dpc_buf_free(&img);
    }
    dpc_onnx_result_free(&r);
    return s == DPC_OK ? 0 : fail(s, &e);
}

/* ---- .onnx wherever a .dp is accepted ----
 * The import stays in memory (docs/onnx.md): the .dp text reaches the
 * compiler as dpc_compile_opts.text under the name MODEL.dp beside the
 * .onnx (never read from disk), the weights reach the runtime as a parsed
 * safetensors. Nothing is written, so neither a signal nor a crash can
 * leave a copy of the model behind. */

static struct {
    const char *orig;          /* the .onnx as given */
    char *name;                /* its .dp's name */
    char *dp;                  /* the .dp text */
    size_t dp_len;
    dpc_safetensors *weights;  /* until a verb takes them */
    char **files;              /* what the model reads (dpc_onnx_result.files) */
    size_t nfiles;
} g_onnx;

static void release(void) {
    dpc_free(g_onnx.name);
    dpc_free(g_onnx.dp);
    if (g_onnx.weights)
        dpc_st_free(g_onnx.weights);
    dpc_onnx_files_free(g_onnx.files, g_onnx.nfiles);
    memset(&g_onnx, 0, sizeof g_onnx);
}

const char *cli_onnx_original(void) { return g_onnx.orig; }

bool cli_onnx_source(const char *path, const char **text, size_t *len) {
    if (!g_onnx.dp || !path || strcmp(path, g_onnx.name) != 0)
        return false;
    *text = g_onnx.dp;
    *len = g_onnx.dp_len;
    return true;
}

dpc_safetensors *cli_onnx_take_weights(void) {
    dpc_safetensors *w = g_onnx.weights;
    g_onnx.weights = NULL;
    return w;
}

size_t cli_onnx_files(const char *const **files) {
    *files = (const char *const *)g_onnx.files;
    return g_onnx.nfiles;
}

dpc_safetensors *cli_onnx_artifact(const char *path, bool weights, dpc_artifact_opts *ao) {
    if (!cli_onnx_source(path, &ao->text, &ao->len) || !weights)
        return NULL;
    dpc_safetensors *w = cli_onnx_take_weights();
    ao->weights_st = w;
    ao->weights = g_onnx.orig; /* names them in messages */
    return w;
}

int cli_onnx_stage(const char **model) {
    if (!dpc_onnx_path(*model))
        return 0;
    if (g_onnx.orig) {
        fprintf(stderr, "dpc: error: one ONNX model per command\n");
        return 1;
    }
    dpc_onnx_import_opts io = {.path = *model};
    dpc_onnx_result r;
    dpc_err e;
    dpc_status s = dpc_onnx_import(&io, &r, &e);
    if (s != DPC_OK)
        return fail(s, &e);
    atexit(release);
    g_onnx.orig = *model;
    g_onnx.dp = r.dp, g_onnx.dp_len = r.dp_len, r.dp = NULL;
    g_onnx.files = r.files, g_onnx.nfiles = r.nfiles, r.files = NULL, r.nfiles = 0;
    /* MODEL.dp beside MODEL.onnx, so that messages, `dpc print` and the
     * default `dpc compile` output (MODEL.dpa) read as for the .dp */
    size_t L = strlen(*model) - 5; /* ".onnx" (dpc_onnx_path) */
    if ((g_onnx.name = dpc_malloc(L + 4)))
        snprintf(g_onnx.name, L + 4, "%.*s.dp", (int)L, *model);
    s = g_onnx.name ? dpc_onnx_result_weights(&r, &g_onnx.weights, &e) : dpc_errf(&e, DPC_ENOMEM, "out of memory");
    dpc_onnx_result_free(&r);
    if (s != DPC_OK)
        return fail(s, &e);
    *model = g_onnx.name;
    return 0;
}
