/* outputs.c - what the verbs write: standard output (print, ir, source, a
 * graph without -o, inspect, cache ls) and -o files, refused when they
 * would overwrite a file the command reads or another output, and written
 * all or none. */
#include "cli.h"
#include "import.h"
#include "npy.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
int cli_check_outputs(const cli_opts *o, const char *const *outs, int nout) {
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
            return cli_usage("%s", msg);
        }
    }
    return 0;
}

int cli_emit(dpc_buf *b) {
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

/* Serialises every output, then writes them as one (dpc_write_files_atomic):
 * a failure anywhere leaves every previous file as it was. */
dpc_status cli_write_outputs(const cli_opts *o, dpc_tensor **out, dpc_err *e) {
    dpc_status s = DPC_OK;
    dpc_buf bufs[CLI_MAX_IO];
    const void *data[CLI_MAX_IO];
    size_t lens[CLI_MAX_IO];
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
