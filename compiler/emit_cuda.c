/* emit_cuda.c - the CUDA dialect of the kernel IR, for NVRTC: one
 * extern "C" __global__ function per elementwise kernel (grid-stride loop
 * over the output), with #line directives mapping back to the .dp source.
 * GEMMs and convolutions are cuBLASLt calls made by the runtime and appear
 * here as comments; the other kernel kinds follow the same pattern. */
#include "emit.h"

#include <stdio.h>
#include <string.h>

static void emit_elementwise(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const shape *os = &k->out->sh;
    char t[96];
    dpc_buf_printf(o, "\nextern \"C\" __global__ void %s(void *const *buf, const float *scalars, long long N) {\n", k->name);
    int outb = kg->buf_of[k->out->id];
    dpc_buf_printf(o, "    float *b%d = (float *)buf[%d];\n", outb, outb);
    for (int i = 0; i < kg->bufs.len; i++)
        if (i != outb)
            dpc_buf_printf(o, "    const float *b%d = (const float *)buf[%d]; (void)b%d;\n", i, i, i);
    dpc_buf_printf(o, "    const long long total = %s;\n", emit_prod(t, sizeof t, os, 0, os->rank));
    dpc_buf_puts(o, "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;\n"
                    "         i += (long long)gridDim.x * blockDim.x) {\n");
    emit_coords(o, "        ", os);
    for (int i = 0; i < k->ops.len; i++) {
        const ir_node *n = k->ops.items[i];
        if (n->at.file)
            dpc_buf_printf(o, "#line %d \"%s\"\n", n->at.line, n->at.file->path);
        emit_elementwise_op(kg, k, o, n, os, "        ", "", true);
    }
    dpc_buf_printf(o, "        b%d[i] = v%d;\n    }\n}\n", outb, k->out->id);
}

void emit_cuda(const kgraph *kg, dpc_buf *o) {
    const ir_graph *g = kg->g;
    dpc_buf_printf(o, "/* dpc %s: CUDA kernels for %s (%s). Generated; compiled with NVRTC. */\n", DPC_VERSION,
                   g->model_name, g->file);
    dpc_buf_puts(o, "#define INFINITY __int_as_float(0x7f800000)\n#define NAN __int_as_float(0x7fffffff)\n");
    for (int i = 0; i < kg->kernels.len; i++) {
        const kernel *k = kg->kernels.items[i];
        const ir_node *r = k->root ? k->root : k->out;
        if (k->kind == KK_ELEMWISE) {
            emit_elementwise(kg, k, o);
            continue;
        }
        dpc_buf_printf(o, "\n/* %s: %s at %s:%d runs through the %s path of the CUDA runtime */\n", k->name,
                       ir_op_name(r->op), r->at.file ? r->at.file->path : "?", r->at.line,
                       k->kind == KK_GEMM || k->kind == KK_CONV ? "cuBLASLt" : "library");
    }
}
