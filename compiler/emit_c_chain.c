/* emit_c_chain.c - the C dialect's loops: the OpenMP pragma of a parallel
 * loop, the loop nest with one loop per dim, and the elementwise chain
 * over a kernel's output. The chain is a KK_ELEMWISE kernel's whole body
 * and the epilogue of every other kind (GEMM, conv, resample), which is
 * why it is a file of its own below the kind files (emit_c.h). */
#include "emit_c.h"

#include <string.h>

/* The pragma before a loop nest of `collapse` loops touching `work`
 * elements (a C expression). */
void emit_par_for(dpc_buf *o, const char *indent, int collapse, const char *work) {
    dpc_buf_printf(o, "%s" PAR_FOR_PRAGMA, indent);
    if (collapse > 1)
        dpc_buf_printf(o, " collapse(%d)", collapse);
    dpc_buf_printf(o, " if (ctx->threads > 1 && (%s) >= %dLL)\n", work, DPC_PAR_MIN);
}

/* The dim of os along which view a (its rank-ra coordinates the last ra of
 * os's) is contiguous, when that is not os's innermost dim: a permute's
 * NHWC read in an NCHW loop. -1 when there is none. */
int emit_unit_dim(const kaccess *a, int ra, const shape *os) {
    if (a->kind != ACC_STRIDED)
        return -1;
    for (int j = 0; j < ra; j++)
        if (a->stride[j].k == 1 && !a->stride[j].sym && os->rank - ra + j < os->rank - 1 &&
            os->d[os->rank - ra + j].k > 1)
            return os->rank - ra + j;
    return -1;
}

/* One loop per dim of os, opening two blocks (the caller closes both): no
 * division per element, and the innermost loop vectorises; the outer dims
 * are split over the threads, and each row of the innermost dim starts at
 * its flat index i. The loop over dim `near` (unit_dim, or -1) runs just
 * outside the innermost: the rows the inner loop gathers at a stride are
 * then a block that stays in L1 (ConvNeXt's layer-scale + residual over the
 * NHWC block output, its NCHW copies: 56 pixels x C floats per row, not the
 * whole image per channel); each element is computed as before. */
void emit_dim_loops(dpc_buf *o, const shape *os, const char *total, int near) {
    char t[96];
    int r = os->rank;
    emit_par_for(o, "", r - 1, total);
    for (int q = 0; q < r - 1; q++) {
        int j = near < 0 ? q : q < r - 2 ? q + (q >= near) : near;
        dpc_buf_printf(o, "    for (int64_t c%d = 0; c%d < %s; c%d++)\n", j, j, emit_dim(t, sizeof t, os->d[j]), j);
    }
    dpc_buf_puts(o, "    {\n        int64_t i = ");
    for (int j = 0; j < r - 1; j++)
        dpc_buf_puts(o, "(");
    dpc_buf_puts(o, "0");
    for (int j = 0; j < r - 1; j++)
        dpc_buf_printf(o, " + c%d) * %s", j, emit_dim(t, sizeof t, os->d[j + 1]));
    dpc_buf_printf(o, "; /* the flat index of (c0, c1, ...) */\n"
                      "        for (int64_t c%d = 0; c%d < %s; c%d++, i++) {\n",
                   r - 1, r - 1, emit_dim(t, sizeof t, os->d[r - 1]), r - 1);
}

/* unit_dim of the first operand of k's chain that has one */
static int chain_unit_dim(const kgraph *kg, const kernel *k, const shape *os) {
    koperand_iter it = kernel_operands(kg, k, 0);
    int id, buf;
    while (koperand_next(&it, &id, &buf)) {
        int d = emit_unit_dim(&kg->acc[id], nd(kg, id)->sh.rank, os);
        if (d >= 0)
            return d;
    }
    return -1;
}

static bool needs_coords(const kgraph *kg, const kernel *k, const shape *os) {
    if (emit_chain_reads_iota(kg, k, 0))
        return true;
    for (int i = 0; i < k->ops.len; i++)
        if (ir_op_class(((const ir_node *)k->ops.items[i])->op) == OC_CHANNEL)
            return true; /* per-channel operands are read at c1 */
    koperand_iter it = kernel_operands(kg, k, 0);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        if (!shape_eq(&nd(kg, id)->sh, os) || kg->acc[id].kind != ACC_CONTIG)
            return true;
    if (k->kind == KK_COPY && k->src.kind == ACC_STRIDED)
        return true;
    return false;
}

/* The loop that applies a kernel's elementwise chain over its output. The
 * first op reads `first_value` instead of a buffer when the chain follows a
 * GEMM (the epilogue). */
void emit_chain_loop_from(const kgraph *kg, const kernel *k, dpc_buf *o, const char *seed, int from) {
    const shape *os = &k->out->sh;
    int outb = kg->buf_of[k->out->id];
    bool coords = needs_coords(kg, k, os) || (seed && (strstr(seed, "c1") || strstr(seed, "[c")));
    char total[96];
    emit_prod(total, sizeof total, os, 0, os->rank);
    int close = 1;
    if (coords && os->rank > 1) {
        emit_dim_loops(o, os, total, chain_unit_dim(kg, k, os));
        close = 2;
    } else if (coords && os->rank == 1) {
        emit_par_for(o, "", 1, total);
        dpc_buf_printf(o, "    for (int64_t c0 = 0; c0 < %s; c0++) {\n        const int64_t i = c0;\n", total);
    } else {
        dpc_buf_printf(o, "    const int64_t total = %s;\n", total);
        emit_par_for(o, "", 1, "total");
        dpc_buf_puts(o, "    for (int64_t i = 0; i < total; i++) {\n");
        if (coords)
            emit_coords(o, "        ", os);
    }
    if (seed)
        dpc_buf_printf(o, "        const float v%d = %s;\n",
                       from > 0 ? ((const ir_node *)k->ops.items[from - 1])->id : k->root->id, seed);
    for (int i = from; i < k->ops.len; i++)
        emit_elementwise_op(kg, k, o, k->ops.items[i], os, "        ", "", DIALECT_C);
    dpc_buf_printf(o, "        b%d[i] = v%d;\n", outb, k->out->id);
    dpc_buf_puts(o, close == 2 ? "    }\n    }\n" : "    }\n");
}

void emit_chain_loop(const kgraph *kg, const kernel *k, dpc_buf *o, const char *seed) {
    emit_chain_loop_from(kg, k, o, seed, 0);
}
