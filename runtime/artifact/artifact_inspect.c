/* artifact_inspect.c - `dpc inspect`: the summary of a verified artifact
 * and its model (dpc_artifact_describe, artifact.h). */
#include "artifact_impl.h"
#include "nvrtc_compile.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ inspect */

static void human_bytes(double b, char *out, size_t n) {
    if (b < 1024)
        snprintf(out, n, "%.0f B", b);
    else if (b < 1024.0 * 1024)
        snprintf(out, n, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(out, n, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(out, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

/* The inputs, scalars and outputs lines of the description. */
static void describe_io(const dpc_signature *g, dpc_buf *out) {
    for (int i = 0; i < g->ninputs; i++) {
        const dpc_sig_tensor *n = &g->inputs[i];
        dpc_buf_printf(out, "%s%s: %s%s\n", i ? "               " : "inputs:        ", n->name, n->dtype_name,
                       n->shape);
    }
    if (!g->ninputs)
        dpc_buf_puts(out, "inputs:        (none)\n");
    for (int i = 0; i < g->nscalars; i++) {
        const dpc_sig_scalar *n = &g->scalars[i];
        char dv[64] = "";
        if (n->has_default) {
            char num[48];
            dpc_format_pyfloat(n->def, num, sizeof num);
            if (n->type == DPC_SIG_BOOL)
                snprintf(dv, sizeof dv, " = %s", n->def != 0 ? "True" : "False");
            else if (n->type == DPC_SIG_INT)
                snprintf(dv, sizeof dv, " = %lld", (long long)n->def);
            else
                snprintf(dv, sizeof dv, " = %s", num);
        }
        dpc_buf_printf(out, "%s%s: %s%s\n", i ? "               " : "scalars:       ", n->name,
                       n->type == DPC_SIG_FLOAT ? "float" : n->type == DPC_SIG_INT ? "int" : "bool",
                       dv[0] ? dv : " (required)");
    }
    for (int i = 0; i < g->noutputs; i++) {
        const dpc_sig_tensor *n = &g->outputs[i];
        dpc_buf_printf(out, "%s%d: %s%s\n", i ? "               " : "outputs:       ", i, n->dtype_name, n->shape);
    }
}

void dpc_artifact_describe(const dpc_artifact *a, const dpc_model *m, dpc_buf *out) {
    const dpc_signature *g = m->sig;
    char hb[32];
    dpc_buf_printf(out, "artifact:      %s (%zu bytes)\n", a->name, a->file_bytes);
    dpc_buf_printf(out, "format:        %d, written by dpc %s (checksum and IR verified)\n", a->format, a->version);
    dpc_buf_printf(out, "model:         %s%s%s%s\n", g->model_name, g->wrapper ? " in " : "",
                   g->wrapper ? g->wrapper : "", g->wrapper ? "(...)" : "");
    dpc_buf_printf(out, "sources:       %s", a->src_name[0]);
    for (int i = 1; i < a->nsrc; i++)
        dpc_buf_printf(out, ", %s", a->src_name[i]);
    dpc_buf_puts(out, "\n");
    describe_io(g, out);
    int64_t elems, bytes;
    dpc_dpa_parameter_totals(g, &elems, &bytes);
    human_bytes((double)bytes, hb, sizeof hb);
    int count = 0; /* the state_dict's: non-persistent buffers are not in it */
    for (int i = 0; i < g->nparams; i++)
        count += !g->params[i].nonpersistent;
    dpc_buf_printf(out, "parameters:    %d tensors, %lld values, %lld bytes (%s)\n", count, (long long)elems,
                   (long long)bytes, hb);
    if (dpc_artifact_has_weights(a)) {
        size_t wb = 0;
        for (size_t i = 0; i < a->st->n; i++)
            wb += a->st->t[i].nbytes;
        human_bytes((double)wb, hb, sizeof hb);
        dpc_buf_printf(out, "weights:       embedded: %zu tensors, %zu bytes (%s), data at offset %zu\n", a->st->n, wb,
                       hb, a->data_offset);
    } else {
        dpc_buf_puts(out, "weights:       not embedded (give --weights W.safetensors to run)\n");
    }
    int counts[DPC_KERNEL_KINDS] = {0}, nk = dpc_unit_nkernels(m->unit);
    for (int k = 0; k < nk; k++) {
        dpc_kernel_info kr;
        dpc_unit_kernel(m->unit, k, &kr);
        counts[kr.kind_index]++;
    }
    if (g->unbound) { /* no graph stored: compiled per value when it runs */
        dpc_buf_puts(out, "kernels:       compiled when it runs, for each value of its run-time dim");
        for (int r = 0; r < g->nrtdims; r++)
            dpc_buf_printf(out, "%s%s", r ? ", " : (g->nrtdims > 1 ? "s " : " "), g->rtdims[r].name);
        dpc_buf_puts(out, "\n");
    } else
        dpc_buf_printf(out, "kernels:       %d", nk);
    const char *sep = " (";
    for (int k = 0; k < DPC_KERNEL_KINDS; k++)
        if (counts[k]) {
            dpc_buf_printf(out, "%s%d %s", sep, counts[k], dpc_kernel_kind_name(k));
            sep = ", ";
        }
    if (!g->unbound)
        dpc_buf_puts(out, sep[0] == ',' ? ")\n" : "\n");
    if (!a->nimg)
        dpc_buf_puts(out, "architectures: none (CPU only; compile with --arch sm_XX for CUDA images)\n");
    for (int i = 0; i < a->nimg; i++) {
        human_bytes((double)a->img[i].len, hb, sizeof hb);
        dpc_buf_printf(out, "%s%s (%s, %s)\n", i ? "               " : "architectures: ", a->img[i].arch,
                       dpc_nvrtc_arch_is_ptx(a->img[i].arch) ? "PTX" : "CUBIN", hb);
    }
    dpc_buf_printf(out, "dpc version:   %s\n", a->version);
    dpc_buf_printf(out, "checksum:      %s\n", a->checksum);
}
