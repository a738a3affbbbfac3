/* emit_cuda_attn.c - the CUDA dialect's fused attention (KK_ATTN), one
 * block per (batch, tile of queries) with an online softmax. Its geometry
 * is shared with the C dialect (emit_attn_geom, emit_shared.c). */
#include "emit_cuda.h"

#include <stdio.h>

/* KK_ATTN (fuse.c / attn.c): one block per (batch, tile of ATTN_TQ
 * queries); the keys in blocks of 32 staged in shared memory with the
 * value block, one thread per (query, key) score with the chain (scale,
 * mask), one warp per query row for the online softmax (running max and
 * sum, shuffle reductions), and every thread holding ATTN_NA outputs
 * (query, d) that it rescales and accumulates p . v into. */
#define ATTN_TQ 16
#define ATTN_KB 32
/* The shared arrays, the query tile staged in qs (zero past L), the
 * running max and sum, and this thread's na accumulators at zero. */
static void attn_stage_q(cg *g, const emit_attn *a, long long na) {
    const int r = a->r;
    const long long E1 = a->E + 1;
    char t1[96], t2[96];
    dpc_buf_printf(g->o,
                   "    __shared__ float qs[%d * %lld], ks[%d * %lld], vs[%d * %lld], ps[%d * %d], mx[%d], sm[%d], cr[%d];\n"
                   "    const int t = threadIdx.x, lane = t %% 32, warp = t / 32;\n"
                   "    for (int x = t; x < %d * %lld; x += %d) {\n"
                   "        const long long ii = x / %lld, e = x %% %lld;\n"
                   "        qs[x] = i0 + ii < %lldLL ? (float)qp[(i0 + ii) * %s + e * %s] : 0.0f;\n"
                   "    }\n"
                   "    if (t < %d) { mx[t] = -INFINITY; sm[t] = 0.0f; }\n"
                   "    float acc[%lld];\n"
                   "    for (int u = 0; u < %lld; u++) acc[u] = 0.0f;\n"
                   "    __syncthreads();\n",
                   ATTN_TQ, a->E, ATTN_KB, E1, ATTN_KB, a->Ev, ATTN_TQ, ATTN_KB, ATTN_TQ, ATTN_TQ, ATTN_TQ, ATTN_TQ, a->E,
                   DPC_CU_BLOCK, a->E, a->E, a->L, emit_dim(t1, sizeof t1, a->q.stride[r - 2]),
                   emit_dim(t2, sizeof t2, a->q.stride[r - 1]), ATTN_TQ, na, na);
}

/* The key loop opened: the key block in ks (rows of E + 1, no bank
 * conflicts) and the value block in vs, zero past S; then one thread per
 * (query, key) score with the chain, -inf outside the tile, into ps. */
static void attn_scores(cg *g, const kernel *k, const emit_attn *a) {
    const int r = a->r;
    const long long E1 = a->E + 1;
    char t3[96], t4[96], t5[96], t6[96];
    dpc_buf_printf(g->o,
                   "    for (long long j0 = 0; j0 < %lldLL; j0 += %d) {\n"
                   "        for (int x = t; x < %d * %lld; x += %d) {\n"
                   "            const long long jj = x / %lld, e = x %% %lld;\n"
                   "            ks[jj * %lld + e] = j0 + jj < %lldLL ? (float)kp[e * %s + (j0 + jj) * %s] : 0.0f;\n"
                   "        }\n"
                   "        for (int x = t; x < %d * %lld; x += %d) {\n"
                   "            const long long jj = x / %lld, d = x %% %lld;\n"
                   "            vs[x] = j0 + jj < %lldLL ? (float)vp[(j0 + jj) * %s + d * %s] : 0.0f;\n"
                   "        }\n"
                   "        __syncthreads();\n"
                   "        for (int x = t; x < %d * %d; x += %d) {\n"
                   "            const int ii = x / %d, jj = x %% %d;\n"
                   "            float sv = -INFINITY;\n"
                   "            if (i0 + ii < %lldLL && j0 + jj < %lldLL) {\n"
                   "                float dot = 0.0f;\n"
                   "                for (int e = 0; e < %lld; e++) dot += qs[ii * %lld + e] * ks[jj * %lld + e];\n"
                   "                const long long c%d = i0 + ii, c%d = j0 + jj;\n",
                   a->S, ATTN_KB, ATTN_KB, a->E, DPC_CU_BLOCK, a->E, a->E, E1, a->S,
                   emit_dim(t3, sizeof t3, a->kt.stride[r - 2]), emit_dim(t4, sizeof t4, a->kt.stride[r - 1]), ATTN_KB,
                   a->Ev, DPC_CU_BLOCK, a->Ev, a->Ev, a->S, emit_dim(t5, sizeof t5, a->v.stride[r - 2]),
                   emit_dim(t6, sizeof t6, a->v.stride[r - 1]), ATTN_TQ, ATTN_KB, DPC_CU_BLOCK, ATTN_KB, ATTN_KB, a->L,
                   a->S, a->E, a->E, E1, r - 2, r - 1);
    for (int i = 0; i < k->ops.len; i++)
        cu_line_of(g, k->ops.items[i]);
    emit_attn_chain(g->kg, k, a, g->o, "                ", "long long", "dot", "sv", DIALECT_CUDA);
}

/* The online softmax of the key block, one warp per query row: the new
 * max, the block's exps in ps, the rescale of what came before in cr. */
static void attn_softmax(cg *g, const kernel *k) {
    cu_line_of(g, k->attn.softmax);
    dpc_buf_printf(g->o,
                   "            }\n"
                   "            ps[x] = sv;\n"
                   "        }\n"
                   "        __syncthreads();\n"
                   "        /* online softmax, one warp per query row */\n"
                   "        for (int ii = warp; ii < %d; ii += %d) {\n"
                   "            const float sv = ps[ii * %d + lane], mo = mx[ii];\n"
                   "            const float mb = warp_max(fmaxf(mo, sv));\n"
                   "            const float p = mb == -INFINITY ? 0.0f : expf(sv - mb);\n"
                   "            const float ls = warp_sum(p);\n"
                   "            ps[ii * %d + lane] = p;\n"
                   "            if (lane == 0) {\n"
                   "                const float c = mb == -INFINITY ? 1.0f : expf(mo - mb);\n"
                   "                cr[ii] = c;\n"
                   "                sm[ii] = sm[ii] * c + ls;\n"
                   "                mx[ii] = mb;\n"
                   "            }\n"
                   "        }\n"
                   "        __syncthreads();\n",
                   ATTN_TQ, DPC_CU_BLOCK / 32, ATTN_KB, ATTN_KB);
}

/* p . v into the accumulators (rescaled by cr), the key loop closed, and
 * the output rows written over the sum. */
static void attn_pv(cg *g, const kernel *k, const emit_attn *a, long long na) {
    const int r = a->r;
    char t7[96], t8[96];
    cu_line_of(g, k->attn.pv);
    dpc_buf_printf(g->o,
                   "        for (int u = 0; u < %lld; u++) {\n"
                   "            const int x = t + u * %d;\n"
                   "            if (x >= %d * %lld) break;\n"
                   "            const int ii = x / %lld, d = x %% %lld;\n"
                   "            float o = acc[u] * cr[ii];\n"
                   "            for (int jj = 0; jj < %d; jj++) o += ps[ii * %d + jj] * vs[jj * %lld + d];\n"
                   "            acc[u] = o;\n"
                   "        }\n"
                   "        __syncthreads();\n"
                   "    }\n"
                   "    for (int u = 0; u < %lld; u++) {\n"
                   "        const int x = t + u * %d;\n"
                   "        if (x >= %d * %lld) break;\n"
                   "        const int ii = x / %lld, d = x %% %lld;\n"
                   "        if (i0 + ii < %lldLL) op[(i0 + ii) * %s + d * %s] = acc[u] / sm[ii];\n"
                   "    }\n",
                   na, DPC_CU_BLOCK, ATTN_TQ, a->Ev, a->Ev, a->Ev, ATTN_KB, ATTN_KB, a->Ev, na, DPC_CU_BLOCK, ATTN_TQ,
                   a->Ev, a->Ev, a->Ev, a->L, emit_dim(t7, sizeof t7, a->o.stride[r - 2]),
                   emit_dim(t8, sizeof t8, a->o.stride[r - 1]));
}

void emit_attn_cuda(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    emit_attn a;
    emit_attn_geom(kg, k, &a);
    long long nt = (a.L + ATTN_TQ - 1) / ATTN_TQ, na = (ATTN_TQ * a.Ev + DPC_CU_BLOCK - 1) / DPC_CU_BLOCK;
    char t1[96];
    plist pl = {0};
    cu_padd(g, &pl, a.ob, true);
    koperand_iter it = kernel_operands(kg, k, -1);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        cu_padd(g, &pl, buf, false);
    dpc_cu_dim work = cd_mul(cd_prod(&a.batch, 0, a.nb), cd(nt, 0));
    dpc_buf_printf(g->o, "\n/* %s: fused attention [L=%lld, E=%lld] x [S=%lld, Ev=%lld], one block per %d queries */\n",
                   k->name, a.L, a.E, a.S, a.Ev, ATTN_TQ);
    cu_kernel_head(g, k->name, &pl);
    cu_line_of(g, k->root);
    dpc_buf_printf(g->o,
                   "    const long long row = blockIdx.x;\n"
                   "    if (row >= %s) return;\n"
                   "    const long long bi = row / %lldLL, i0 = (row %% %lldLL) * %d;\n",
                   cd_str(t1, sizeof t1, work), nt, nt, ATTN_TQ);
    emit_attn_bases(kg, &a, g->o, "    ", "long long", g->ft);
    attn_stage_q(g, &a, na);
    attn_scores(g, k, &a);
    attn_softmax(g, k);
    attn_pv(g, k, &a, na);
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_BLOCK_ROWS, work, 1, &pl);
}
