/* emit_cuda_gemm.c - the CUDA dialect's KK_GEMM kernel: the plan's
 * cuBLASLt step for a linear (bias and bias + ReLU as cuBLASLt epilogues)
 * or a matmul (batch dims merged into one strided batch where they can be,
 * host loops over the others), then the rest of the chain as an
 * elementwise kernel over the result. */
#include "emit_cuda.h"

#include <stdio.h>

static void gemm_epilogue(cg *g, const kernel *k, int first_op) {
    if (first_op >= k->ops.len)
        return;
    int outb = g->kg->buf_of[k->out->id];
    int seed_id = first_op > 0 ? ((const ir_node *)k->ops.items[first_op - 1])->id : k->root->id;
    char seed[32];
    snprintf(seed, sizeof seed, "b%d[i]", outb);
    cu_chain_kernel(g, k, k->name, first_op, seed, seed_id, true, false, NULL);
}

/* A GEMM step C = A x B over buffers a, b, c: no bias, one batch; the
 * caller sets the sizes. */
dpc_cu_gemm *cu_new_gemm(cg *g, int a, int b, int c) {
    dpc_cu_gemm *m = &cu_new_step(g, DPC_CU_GEMM)->u.gemm;
    m->a = a;
    m->b = b;
    m->c = c;
    m->bias = -1;
    m->batch = cd(1, 0);
    return m;
}

void emit_cuda_linear(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    dpc_cu_gemm *m = cu_new_gemm(g, kg->buf_of[x->id], kg->buf_of[w->id], kg->buf_of[k->out->id]);
    dpc_cu_dim K = cd(w->sh.d[1].k, 0), No = cd(w->sh.d[0].k, 0);
    m->transB = true;
    m->M = cd_prod(&x->sh, 0, x->sh.rank - 1);
    m->N = No;
    m->K = K;
    m->lda = K;
    m->ldb = K;
    if (k->wt) { /* W^T [K, No], written at load (fuse.c linear_wt) */
        m->b = kg->buf_of[k->wt->id];
        m->transB = false;
        m->ldb = No;
    }
    m->ldc = No;
    int first_op = 0;
    m->epilogue = 0; /* DPC_LT_EPI_NONE */
    if (n->nin > 2) {
        m->bias = kg->buf_of[n->in[2]];
        m->epilogue = 1; /* DPC_LT_EPI_BIAS */
        if (k->ops.len > 0 && ((const ir_node *)k->ops.items[0])->op == OP_RELU && !cu_reads_after(k, 1, n->id)) {
            m->epilogue = 2; /* DPC_LT_EPI_RELU_BIAS */
            first_op = 1;
        }
    }
    static const char *const epi[] = {"", " + bias", " + bias, ReLU"};
    dpc_buf_printf(g->o, "\n/* %s: linear [M, %lld] x [%lld, %lld]^T%s through cuBLASLt (", k->name, (long long)K.k,
                   (long long)No.k, (long long)K.k, epi[m->epilogue]);
    cu_comment_loc(g->o, n);
    dpc_buf_printf(g->o, ")%s */\n", first_op < k->ops.len ? "; the rest of the chain follows" : "");
    gemm_epilogue(g, k, first_op);
}

/* One batch dimension of a matmul: its size and the element strides of x,
 * y and the output along it (0: broadcast). */
typedef struct bdim {
    dpc_cu_dim size, sx, sy, so;
} bdim;

static bool bdim_mergeable(const bdim *outer, const bdim *inner) {
    return cd_eq(outer->sx, cd_mul(inner->sx, inner->size)) && cd_eq(outer->sy, cd_mul(inner->sy, inner->size)) &&
           cd_eq(outer->so, cd_mul(inner->so, inner->size));
}

void emit_cuda_matmul(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *y = nd(kg, n->in[1]);
    emit_mm mm;
    emit_mm_geom(&x->sh, &y->sh, &mm);
    const shape *xs = &mm.x, *ys = &mm.y, *bs = &mm.batch;
    dpc_cu_dim M = cd_of(mm.M), K = cd_of(mm.K), Nn = cd_of(mm.N);
    int rb = bs->rank;
    dpc_cu_gemm *m = cu_new_gemm(g, kg->buf_of[x->id], kg->buf_of[y->id], kg->buf_of[k->out->id]);
    m->N = Nn;
    m->K = K;
    m->lda = K;
    m->ldb = Nn;
    m->ldc = Nn;
    if (ys->rank == 2) {
        /* the right operand is one matrix: fold all batches into M */
        m->M = cd_mul(cd_prod(bs, 0, rb), M);
    } else {
        m->M = M;
        bdim d[IR_MAX_RANK];
        int nd_ = 0;
        for (int i = 0; i < rb; i++) {
            int ix = emit_mm_axis(&mm, xs, i), iy = emit_mm_axis(&mm, ys, i);
            bdim b;
            b.size = cd_of(bs->d[i]);
            if (cd_one(b.size))
                continue;
            b.sx = ix < 0 ? cd(0, 0) : cd_mul(cd_prod(xs, ix + 1, xs->rank - 2), cd_mul(M, K));
            b.sy = iy < 0 ? cd(0, 0) : cd_mul(cd_prod(ys, iy + 1, ys->rank - 2), cd_mul(K, Nn));
            b.so = cd_mul(cd_prod(bs, i + 1, rb), cd_mul(M, Nn));
            d[nd_++] = b;
        }
        /* merge dimensions that are one strided dimension for all three */
        bdim grp[IR_MAX_RANK];
        int ng = 0;
        for (int i = nd_ - 1; i >= 0; i--) {
            if (ng > 0 && bdim_mergeable(&d[i], &grp[ng - 1]))
                grp[ng - 1].size = cd_mul(grp[ng - 1].size, d[i].size);
            else
                grp[ng++] = d[i];
        }
        /* grp[0] is innermost: one strided-batched cuBLASLt call when no
         * operand broadcasts along it, host loops over the others */
        int first_loop = 0;
        if (ng > 0 && grp[0].sx.k && grp[0].sy.k && grp[0].so.k) {
            m->batch = grp[0].size;
            m->strideA = grp[0].sx;
            m->strideB = grp[0].sy;
            m->strideC = grp[0].so;
            first_loop = 1;
        }
        for (int i = ng - 1; i >= first_loop; i--) {
            if (m->nloops == DPC_CU_MAX_LOOPS) {
                cu_fail(g, n, "too many broadcast batch dimensions");
                break;
            }
            m->loop[m->nloops].count = grp[i].size;
            m->loop[m->nloops].sA = grp[i].sx;
            m->loop[m->nloops].sB = grp[i].sy;
            m->loop[m->nloops].sC = grp[i].so;
            m->nloops++;
        }
    }
    char t1[64], t2[64];
    char t3[64];
    dpc_buf_printf(g->o, "\n/* %s: matmul [%s, %s] x [%s, %s]", k->name, cd_txt(t1, sizeof t1, m->M),
                   cd_txt(t3, sizeof t3, K), t3, cd_txt(t2, sizeof t2, Nn));
    if (!cd_one(m->batch))
        dpc_buf_printf(g->o, ", batch %s", cd_txt(t1, sizeof t1, m->batch));
    if (m->nloops)
        dpc_buf_printf(g->o, ", %d host loop%s", m->nloops, m->nloops == 1 ? "" : "s");
    dpc_buf_puts(g->o, " through cuBLASLt (");
    cu_comment_loc(g->o, n);
    dpc_buf_printf(g->o, ")%s */\n", k->ops.len ? "; the fused chain follows" : "");
    gemm_epilogue(g, k, 0);
}
