/* emit_cuda_chain.c - the CUDA dialect's elementwise chain kernel: a
 * grid-stride loop over the output, four elements per load and store when
 * every operand is read at the output's index. It is a KK_ELEMWISE
 * kernel's whole body and the epilogue of a GEMM, a convolution or a
 * resample, which is why it is a file of its own below the kind files
 * (emit_cuda.h). */
#include "emit_cuda.h"

#include <stdio.h>

static bool chain_needs_coords(const kgraph *kg, const kernel *k, int from, const shape *os) {
    if (emit_chain_reads_iota(kg, k, from))
        return true;
    for (int i = from; i < k->ops.len; i++)
        if (((const ir_node *)k->ops.items[i])->op == OP_BATCHNORM)
            return true;
    koperand_iter it = kernel_operands(kg, k, from);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        if (!shape_eq(&nd(kg, id)->sh, os) || kg->acc[id].kind != ACC_CONTIG)
            return true;
    return false;
}

/* Coordinates c0..c{r-1} of flat index i in shape os. */
void cu_coords(cg *g, const shape *os, const char *indent) {
    emit_coords(g->o, indent, os);
    dpc_buf_puts(g->o, indent);
    for (int j = 0; j < os->rank; j++)
        dpc_buf_printf(g->o, "(void)c%d;%s", j, j + 1 < os->rank ? " " : "\n");
}

void cu_emit_ops(cg *g, const kernel *k, int from, const shape *os, const char *indent, const char *pre) {
    for (int i = from; i < k->ops.len; i++) {
        const ir_node *n = k->ops.items[i];
        if (!ir_op_is_elementwise(n->op))
            cu_fail(g, n, "not an elementwise op");
        cu_line_of(g, n);
        if (!emit_elementwise_op(g->kg, k, g->o, n, os, indent, pre, DIALECT_CUDA))
            cu_fail(g, n, "the op has no CUDA expression");
    }
}

/* Four consecutive elements per load and store: a float4 (16 bytes), or
 * in 16-bit storage a dpc_bf16x4 / dpc_f16x4 (8 bytes, see the prelude).
 * Every buffer starts DPC_MEMPLAN_ALIGN-aligned, so group q is aligned. */
static const char *vec_type(const cg *g) {
    return g->prec == KP_BF16 ? "dpc_bf16x4" : g->prec == KP_F16 ? "dpc_f16x4" : "float4";
}

/* l_b<buf>[0..3]: the four floats of group q of buffer buf. */
static void vec_load(cg *g, int buf) {
    const char *vt = vec_type(g);
    dpc_buf_printf(g->o, "        const %s t%d = reinterpret_cast<const %s *>(b%d)[q];\n", vt, buf, vt, buf);
    if (g->prec == KP_F32)
        dpc_buf_printf(g->o, "        const float l_b%d[4] = {t%d.x, t%d.y, t%d.z, t%d.w};\n", buf, buf, buf, buf, buf);
    else
        dpc_buf_printf(g->o, "        const float l_b%d[4] = {t%d.v[0], t%d.v[1], t%d.v[2], t%d.v[3]};\n", buf, buf, buf,
                       buf, buf);
}

/* r_[0..3] into group q of buffer buf. */
static void vec_store(cg *g, int buf) {
    const char *vt = vec_type(g);
    if (g->prec == KP_F32) {
        dpc_buf_printf(g->o, "        reinterpret_cast<float4 *>(b%d)[q] = make_float4(r_[0], r_[1], r_[2], r_[3]);\n",
                       buf);
        return;
    }
    dpc_buf_printf(g->o,
                   "        %s s_;\n"
                   "        s_.v[0] = r_[0]; s_.v[1] = r_[1]; s_.v[2] = r_[2]; s_.v[3] = r_[3];\n"
                   "        reinterpret_cast<%s *>(b%d)[q] = s_;\n",
                   vt, vt, buf);
}

/* The elementwise kernel `fn` computing ops[from..] of k over its output.
 * With a seed, the chain starts from that value (named v<seed_id>): the
 * GEMM result already in the output buffer (seed_reads_out), or a
 * convolution's scattered result (an expression in coordinates). */
void cu_chain_kernel(cg *g, const kernel *k, const char *fn, int from, const char *seed, int seed_id,
                              bool seed_reads_out, bool seed_coords, const plist *extra) {
    const kgraph *kg = g->kg;
    const shape *os = &k->out->sh;
    int outb = kg->buf_of[k->out->id];
    dpc_cu_dim total = cd_prod(os, 0, os->rank);
    char t[96];
    plist pl = {0};
    cu_padd(g, &pl, outb, true);
    for (int i = 0; extra && i < extra->n; i++)
        cu_padd(g, &pl, extra->id[i], false);
    cu_padd_chain(g, &pl, k, from);
    bool need_coords = seed_coords || chain_needs_coords(kg, k, from, os);
    bool vec = !need_coords && total.k % 4 == 0;
    for (int i = 0; i < pl.n && vec; i++)
        vec = kb(g, pl.id[i])->esize == 4;
    const ir_node *first = from < k->ops.len ? k->ops.items[from] : k->root;
    dpc_buf_printf(g->o, "\n/* %s: %s%d elementwise op%s over [", fn, seed ? "epilogue, " : "", k->ops.len - from,
                   k->ops.len - from == 1 ? "" : "s");
    for (int i = 0; i < os->rank; i++)
        dpc_buf_printf(g->o, "%s%s", i ? ", " : "", cd_txt(t, sizeof t, cd_of(os->d[i])));
    dpc_buf_printf(g->o, "]%s%s%s */\n", vec ? ", four per thread (" : "", vec ? vec_type(g) : "", vec ? ")" : "");
    cu_kernel_head(g, fn, &pl);
    dpc_buf_printf(g->o, "    const long long total = %s;\n", cd_str(t, sizeof t, total));
    if (vec) {
        dpc_buf_puts(g->o, "    const long long n4 = total / 4;\n"
                           "    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < n4;\n"
                           "         q += (long long)gridDim.x * blockDim.x) {\n");
        for (int i = 1; i < pl.n; i++)
            vec_load(g, pl.id[i]);
        if (seed_reads_out)
            vec_load(g, outb);
        dpc_buf_puts(g->o, "        float r_[4];\n#pragma unroll\n        for (int i = 0; i < 4; i++) {\n");
        if (seed)
            dpc_buf_printf(g->o, "            const float v%d = l_%s;\n", seed_id, seed);
        cu_emit_ops(g, k, from, os, "            ", "l_");
        dpc_buf_printf(g->o, "            r_[i] = v%d;\n        }\n", k->out->id);
        vec_store(g, outb);
        dpc_buf_puts(g->o, "    }\n");
    } else {
        dpc_buf_printf(g->o, "    for (long long i = %s) {\n", grid_stride());
        if (need_coords)
            cu_coords(g, os, "        ");
        if (seed) {
            cu_line_of(g, first == k->root ? k->root : first);
            dpc_buf_printf(g->o, "        const float v%d = %s;\n", seed_id, seed);
        }
        cu_emit_ops(g, k, from, os, "        ", "");
        dpc_buf_printf(g->o, "        b%d[i] = v%d;\n    }\n", outb, k->out->id);
    }
    cu_kernel_tail(g);
    cu_plan_launch(g, fn, "", DPC_CU_ELEMS, total, vec ? 4 : 1, &pl);
}

/* Whether an op of k's chain from op `from` on reads value id (a diamond:
 * then id must still be there when that op runs). */
bool cu_reads_after(const kernel *k, int from, int id) {
    for (int i = from; i < k->ops.len; i++) {
        const ir_node *x = k->ops.items[i];
        for (int j = 0; j < x->nin; j++)
            if (x->in[j] == id)
                return true;
    }
    return false;
}
