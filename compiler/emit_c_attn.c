/* emit_c_attn.c - the C dialect's fused attention (KK_ATTN): the GEMM
 * form for larger heads, the one-key-block form for short sequences, and
 * the register-tiled form with an online softmax. Its geometry (q, k^T, v
 * and the output as strides) is shared with the CUDA dialect
 * (emit_attn_geom, emit_shared.c). */
#include "emit_c.h"

#include <stdio.h>

/* Fused attention (KK_ATTN, fuse.c / attn.c): per batch (b.., a head) and
 * block of ATTN_BQ queries, the keys in blocks of ATTN_BK with an online
 * softmax. The (batch, query block) pairs are independent (each writes its
 * own output rows), so that loop is split over the replica's threads. Per
 * key block: the key block copied transposed ([E][BK]) and the value block
 * copied ([BK][Ev]), both zero-padded past the last key; the scores of the
 * whole query block into a tile s[BQ][BK], ATTN_RQ queries x ATTN_RK keys
 * at a time with the head dim inner (the accumulators stay in registers,
 * the key loop vectorises); the chain (scale, mask) at each (query, key)
 * and -inf past the last key; per row the running max and sum over
 * ATTN_RK lanes (selects and adds GCC vectorises without -ffast-math) and
 * the exp over the row with dpc_expf (vectorised); p . v for ATTN_RQ
 * queries at a time, each value row read once for them, inner loop over
 * Ev. q, k^T and v are read through their strides; the output is written
 * in the layout of the permute after it, when the kernel has one. */
#define ATTN_BQ 128
#define ATTN_BK 64
#define ATTN_RQ 4
#define ATTN_RK 16
/* whether k^T is closer to contiguous along e than along the keys */
static bool kt_by_key(const emit_attn *a) {
    const dim se = a->kt.stride[a->r - 2], sk = a->kt.stride[a->r - 1];
    return !se.sym && (sk.sym || se.k < sk.k);
}
/* The GEMM form of the fused attention, for the larger heads: per (batch,
 * block of queries) the scores of the block, [nq, S], by one ctx->sgemm
 * (q . k^T, read through their strides), the chain and a softmax row by row
 * in place (the max and sum over ATTN_RK lanes, the exp with dpc_expf, the
 * row scaled by 1 / sum), then p . v by a second sgemm straight into the
 * output rows. At BERT's S = 128, E = 64 the whole kernel runs 1.5x faster
 * than the register-tiled loops (docs/performance.md, "Transformer rows,
 * part 2"). Needs each operand contiguous along one of its two dims (a leading
 * dimension for the GEMM) and the output along Ev. */
#define ATTN_GEMM_MIN 16384LL /* L * S * E from which the GEMM form is used */
#define ATTN_GEMM_TILE 16384LL /* floats of the scores block: BQ * S */
typedef struct attn_ld {
    int t;         /* transposed: contiguous along the first of the two dims */
    char ld[96];   /* the leading dimension */
} attn_ld;
/* Whether the [rows, cols] operand with access a (its last two dims) can be
 * a GEMM operand: contiguous along cols (t = 0), or along rows (t = 1). */
static bool attn_gemm_operand(const kaccess *a, int r, long long rows, long long cols, bool may_t, attn_ld *out) {
    const dim sr = a->stride[r - 2], sc = a->stride[r - 1];
    if (!sc.sym && sc.k == 1 && sr.k >= cols && sr.k >= 1) {
        out->t = 0;
        emit_dim(out->ld, sizeof out->ld, sr);
        return true;
    }
    if (may_t && !sr.sym && sr.k == 1 && sc.k >= rows && sc.k >= 1) {
        out->t = 1;
        emit_dim(out->ld, sizeof out->ld, sc);
        return true;
    }
    return false;
}
/* The head both forms share: the (batch, query block) loop, split over the
 * replica's threads, with the operands' bases and nq, the block's queries. */
static void emit_attn_loop_head(const kgraph *kg, const emit_attn *a, dpc_buf *o, long long nqb, long long BQ) {
    char t1[96], t2[96];
    dpc_buf_printf(o, "    const int64_t nbat = %s;\n", emit_prod(t1, sizeof t1, &a->batch, 0, a->nb));
    snprintf(t2, sizeof t2, "nbat * %lldLL", a->L * a->S * (a->E + a->Ev));
    emit_par_for(o, "    ", 1, t2);
    dpc_buf_printf(o,
                   "    for (int64_t t = 0; t < nbat * %lldLL; t++) {\n"
                   "        const int64_t bi = t / %lldLL, i0 = (t %% %lldLL) * %lld;\n",
                   nqb, nqb, nqb, BQ);
    emit_attn_bases(kg, a, o, "        ", "int64_t", "float");
    dpc_buf_printf(o, "        const int64_t nq = %lldLL - i0 < %lld ? %lldLL - i0 : %lld;\n", (long long)a->L, BQ,
                   (long long)a->L, BQ);
}

static bool emit_attn_gemm(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o) {
    const int r = a->r, RK = ATTN_RK;
    const long long L = a->L, E = a->E, S = a->S, Ev = a->Ev;
    attn_ld lq, lk, lv, lo;
    if (L * S * E < ATTN_GEMM_MIN || S > ATTN_GEMM_TILE || !attn_gemm_operand(&a->q, r, L, E, true, &lq) ||
        !attn_gemm_operand(&a->kt, r, E, S, true, &lk) || !attn_gemm_operand(&a->v, r, S, Ev, true, &lv) ||
        !attn_gemm_operand(&a->o, r, L, Ev, false, &lo))
        return false;
    char t1[96];
    long long BQ = ATTN_GEMM_TILE / S < L ? ATTN_GEMM_TILE / S : L;
    const long long nqb = (L + BQ - 1) / BQ;
    BQ = (L + nqb - 1) / nqb; /* the blocks as even as they go */
    const long long S16 = S / RK * RK;
    dpc_buf_printf(o, "    /* fused attention, GEMM form: [L=%lld, E=%lld] x [S=%lld, Ev=%lld], %lld queries a block */\n",
                   L, E, S, Ev, BQ);
    emit_attn_loop_head(kg, a, o, nqb, BQ);
    dpc_buf_printf(o, "        float s[%lld * %lld];\n", BQ, S);
    /* q rows i0.. : offset i0 along q's row dim */
    dpc_buf_printf(o, "        ctx->sgemm(%d, %d, nq, %lldLL, %lldLL, qp + i0 * %s, %s, kp, %s, s, %lldLL);\n", lq.t,
                   lk.t, S, E, emit_dim(t1, sizeof t1, a->q.stride[r - 2]), lq.ld, lk.ld, S);
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "            float *const sr = s + ii * %lldLL;\n"
                   "            const int64_t c%d = i0 + ii;\n"
                   "            for (int64_t jj = 0; jj < %lldLL; jj++) {\n"
                   "                const int64_t c%d = jj;\n",
                   S, r - 2, S, r - 1);
    emit_attn_chain(kg, k, a, o, "                ", "int64_t", "sr[jj]", "sr[jj]", DIALECT_C);
    dpc_buf_printf(o,
                   "            }\n"
                   "            float lm[%d], ls[%d];\n"
                   "            for (int64_t l = 0; l < %d; l++) lm[l] = -INFINITY;\n"
                   "            for (int64_t jb = 0; jb < %lldLL; jb += %d)\n"
                   "                for (int64_t l = 0; l < %d; l++) lm[l] = sr[jb + l] > lm[l] ? sr[jb + l] : lm[l];\n"
                   "            float mb = -INFINITY;\n"
                   "            for (int64_t l = 0; l < %d; l++) mb = lm[l] > mb ? lm[l] : mb;\n"
                   "            for (int64_t jj = %lldLL; jj < %lldLL; jj++) mb = sr[jj] > mb ? sr[jj] : mb;\n"
                   "            for (int64_t jj = 0; jj < %lldLL; jj++) sr[jj] = dpc_expf(sr[jj] - mb);\n"
                   "            for (int64_t l = 0; l < %d; l++) ls[l] = 0.0f;\n"
                   "            for (int64_t jb = 0; jb < %lldLL; jb += %d)\n"
                   "                for (int64_t l = 0; l < %d; l++) ls[l] += sr[jb + l];\n"
                   "            float lsum = 0.0f;\n"
                   "            for (int64_t l = 0; l < %d; l++) lsum += ls[l];\n"
                   "            for (int64_t jj = %lldLL; jj < %lldLL; jj++) lsum += sr[jj];\n"
                   "            const float inv = 1.0f / lsum;\n"
                   "            for (int64_t jj = 0; jj < %lldLL; jj++) sr[jj] *= inv;\n"
                   "        }\n",
                   RK, RK, RK, S16, RK, RK, RK, S16, S, S, RK, S16, RK, RK, RK, S16, S, S);
    dpc_buf_printf(o, "        ctx->sgemm(0, %d, nq, %lldLL, %lldLL, s, %lldLL, vp, %s, op + i0 * %s, %s);\n    }\n", lv.t, Ev,
                   S, S, lv.ld, emit_dim(t1, sizeof t1, a->o.stride[r - 2]), lo.ld);
    return true;
}

/* The query rows i0.. copied to qb [BQ][E], zero past nq (the score tiles
 * read RQ rows at a time). */
static void emit_attn_qcopy(const emit_attn *a, dpc_buf *o, int BQ) {
    char t1[96];
    const int r = a->r;
    const long long E = a->E;
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < nq; ii++)\n"
                   "            for (int64_t e = 0; e < %lldLL; e++) qb[ii * %lld + e] = qp[(i0 + ii) * %s",
                   E, E, emit_dim(t1, sizeof t1, a->q.stride[r - 2]));
    dpc_buf_printf(o, " + e * %s];\n", emit_dim(t1, sizeof t1, a->q.stride[r - 1]));
    /* the score loop reads the query rows up to nq rounded up to RQ */
    dpc_buf_printf(o, "        for (int64_t x = nq * %lld; x < %d * %lld; x++) qb[x] = 0.0f;\n", E, BQ, E);
}

/* Inside a key block (j0, nk): the block of k^T copied to kb [E][BK] and of
 * v to vb [BK][EvP], zero past nk, and the scores of the block into s
 * [BQ][BK], RQ queries x RK keys in registers. */
static void emit_attn_kv_scores(const emit_attn *a, dpc_buf *o, int BQ, int BK, long long EvP) {
    char t1[96];
    const int r = a->r, RQ = ATTN_RQ, RK = ATTN_RK;
    const long long E = a->E, Ev = a->Ev;
    dpc_buf_printf(o, "            float kb[%lld * %d], vb[%d * %lld], s[%d * %d];\n", E, BK, BK, EvP, BQ, BK);
    /* the transposing copy reads along the smaller stride (BERT's k: along
     * e, one key row after the other) */
    if (kt_by_key(a))
        dpc_buf_printf(o,
                       "            for (int64_t jj = 0; jj < %d; jj++)\n"
                       "                for (int64_t e = 0; e < %lldLL; e++) kb[e * %d + jj] = jj < nk ? kp[e * %s",
                       BK, E, BK, emit_dim(t1, sizeof t1, a->kt.stride[r - 2]));
    else
        dpc_buf_printf(o,
                       "            for (int64_t e = 0; e < %lldLL; e++)\n"
                       "                for (int64_t jj = 0; jj < %d; jj++) kb[e * %d + jj] = jj < nk ? kp[e * %s",
                       E, BK, BK, emit_dim(t1, sizeof t1, a->kt.stride[r - 2]));
    dpc_buf_printf(o, " + (j0 + jj) * %s] : 0.0f;\n", emit_dim(t1, sizeof t1, a->kt.stride[r - 1]));
    dpc_buf_printf(o,
                   "            for (int64_t jj = 0; jj < %d; jj++)\n"
                   "                for (int64_t d = 0; d < %lldLL; d++) vb[jj * %lld + d] = jj < nk && d < %lldLL ? vp[(j0 + jj) * %s",
                   BK, EvP, EvP, Ev, emit_dim(t1, sizeof t1, a->v.stride[r - 2]));
    dpc_buf_printf(o, " + d * %s] : 0.0f;\n", emit_dim(t1, sizeof t1, a->v.stride[r - 1]));
    /* the scores: RQ queries x RK keys in registers, E inner */
    dpc_buf_printf(o,
                   "            /* scores, %d queries x %d keys at a time (padded query rows are zero) */\n"
                   "            for (int64_t ii = 0; ii < nq; ii += %d)\n"
                   "                for (int64_t jb = 0; jb < nk; jb += %d) {\n"
                   "                    float r0[%d], r1[%d], r2[%d], r3[%d];\n"
                   "                    for (int64_t l = 0; l < %d; l++) r0[l] = r1[l] = r2[l] = r3[l] = 0.0f;\n"
                   "                    const float *const q0 = qb + ii * %lld;\n"
                   "                    for (int64_t e = 0; e < %lldLL; e++) {\n"
                   "                        const float a0 = q0[e], a1 = q0[%lld + e], a2 = q0[%lld + e], a3 = q0[%lld + e];\n"
                   "                        const float *const kr = kb + e * %d + jb;\n"
                   "                        for (int64_t l = 0; l < %d; l++) {\n"
                   "                            const float kv = kr[l];\n"
                   "                            r0[l] += a0 * kv; r1[l] += a1 * kv; r2[l] += a2 * kv; r3[l] += a3 * kv;\n"
                   "                        }\n"
                   "                    }\n"
                   "                    float *const s0 = s + ii * %d + jb;\n"
                   "                    for (int64_t l = 0; l < %d; l++) {\n"
                   "                        s0[l] = r0[l]; s0[%d + l] = r1[l]; s0[%d + l] = r2[l]; s0[%d + l] = r3[l];\n"
                   "                    }\n"
                   "                }\n",
                   RQ, RK, RQ, RK, RK, RK, RK, RK, RK, E, E, E, 2 * E, 3 * E, BK, RK, BK, RK, BK, 2 * BK, 3 * BK);
}

/* The chain at each (query, key) of the block's rows, c(r-2) the query and
 * c(r-1) the key; leaves the row loop and sr open. */
static void emit_attn_rows_chain(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o, int BK) {
    const int r = a->r;
    dpc_buf_printf(o,
                   "            for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "                float *const sr = s + ii * %d;\n"
                   "                const int64_t c%d = i0 + ii;\n"
                   "                for (int64_t jj = 0; jj < nk; jj++) {\n"
                   "                    const int64_t c%d = j0 + jj;\n",
                   BK, r - 2, r - 1);
    emit_attn_chain(kg, k, a, o, "                    ", "int64_t", "sr[jj]", "sr[jj]", DIALECT_C);
}

/* The inner loop of p . v shared by the one-key-block and tiled forms:
 * RQ = 4 query rows of p (p0, rows pstride apart) times the value rows
 * (vb, vstride apart, from column db) over `bound` keys, added into the
 * RK-lane registers r0..r3. */
static void emit_attn_pv_keys(dpc_buf *o, const char *bound, long long pstride, long long vstride) {
    dpc_buf_printf(o,
                   "                    for (int64_t jj = 0; jj < %s; jj++) {\n"
                   "                        const float e0 = p0[jj], e1 = p0[%lld + jj], e2 = p0[%lld + jj], e3 = p0[%lld + jj];\n"
                   "                        const float *const vr = vb + jj * %lld + db;\n"
                   "                        for (int64_t l = 0; l < %d; l++) {\n"
                   "                            const float vv = vr[l];\n"
                   "                            r0[l] += e0 * vv; r1[l] += e1 * vv; r2[l] += e2 * vv; r3[l] += e3 * vv;\n"
                   "                        }\n"
                   "                    }\n",
                   bound, pstride, 2 * pstride, 3 * pstride, vstride, ATTN_RK);
}

/* The one-key-block form (S <= the key block, ViT's 17 tokens): no online
 * softmax (no running max, no rescale of an accumulator). Per row the max
 * over RK lanes of the padded scores, then the row minus its max packed
 * into p [nq][S] with no padding, one dpc_expf pass over the nq * S packed
 * values (17 x 17: 19 vectors, not 34 padded rows), the sums over RK lanes,
 * and p . v with RQ queries x RK of Ev in registers written straight to
 * the output, scaled by 1 / sum. */
static void emit_attn_short(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o, int BQ, int BK,
                            long long EvP) {
    char t1[96], t2[96];
    const int r = a->r, RK = ATTN_RK;
    const long long S = a->S, Ev = a->Ev, S16 = a->S / ATTN_RK * ATTN_RK;
    emit_attn_loop_head(kg, a, o, (a->L + BQ - 1) / BQ, BQ);
    dpc_buf_printf(o, "        float qb[%d * %lld], p[%d * %lld], inv[%d];\n", BQ, a->E, BQ, S, BQ);
    emit_attn_qcopy(a, o, BQ);
    dpc_buf_printf(o, "        /* one key block */\n        {\n            const int64_t j0 = 0, nk = %lldLL;\n", S);
    emit_attn_kv_scores(a, o, BQ, BK, EvP);
    emit_attn_rows_chain(kg, k, a, o, BK);
    dpc_buf_printf(o,
                   "                }\n"
                   "                for (int64_t jj = nk; jj < %d; jj++) sr[jj] = -INFINITY;\n"
                   "                float lm[%d];\n"
                   "                for (int64_t l = 0; l < %d; l++) lm[l] = sr[l];\n"
                   "                for (int64_t jb = %d; jb < %d; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) lm[l] = sr[jb + l] > lm[l] ? sr[jb + l] : lm[l];\n"
                   "                float mb = -INFINITY;\n"
                   "                for (int64_t l = 0; l < %d; l++) mb = lm[l] > mb ? lm[l] : mb;\n"
                   "                for (int64_t jj = 0; jj < %lldLL; jj++) p[ii * %lld + jj] = sr[jj] - mb;\n"
                   "            }\n"
                   "            /* padded query rows: zeros (read by p . v, never stored) */\n"
                   "            for (int64_t x = nq * %lldLL; x < %d * %lldLL; x++) p[x] = 0.0f;\n"
                   "            for (int64_t x = 0; x < nq * %lldLL; x++) p[x] = dpc_expf(p[x]);\n"
                   "            for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "                const float *const pr = p + ii * %lld;\n"
                   "                float ls[%d];\n"
                   "                for (int64_t l = 0; l < %d; l++) ls[l] = 0.0f;\n"
                   "                for (int64_t jb = 0; jb < %lldLL; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) ls[l] += pr[jb + l];\n"
                   "                float lsum = 0.0f;\n"
                   "                for (int64_t l = 0; l < %d; l++) lsum += ls[l];\n"
                   "                for (int64_t jj = %lldLL; jj < %lldLL; jj++) lsum += pr[jj];\n"
                   "                inv[ii] = 1.0f / lsum;\n"
                   "            }\n",
                   BK, RK, RK, RK, BK, RK, RK, RK, S, S, S, BQ, S, S, S, RK, RK, S16, RK, RK, RK, S16, S);
    dpc_buf_printf(o,
                   "            /* p . v: %d queries x %d of Ev in registers over the S keys, to the output */\n"
                   "            for (int64_t ii = 0; ii < nq; ii += %d)\n"
                   "                for (int64_t db = 0; db < %lldLL; db += %d) {\n"
                   "                    const float *const p0 = p + ii * %lld;\n"
                   "                    float r0[%d], r1[%d], r2[%d], r3[%d];\n"
                   "                    for (int64_t l = 0; l < %d; l++) r0[l] = r1[l] = r2[l] = r3[l] = 0.0f;\n",
                   ATTN_RQ, RK, ATTN_RQ, EvP, RK, S, RK, RK, RK, RK, RK);
    char bound[32];
    snprintf(bound, sizeof bound, "%lldLL", S);
    emit_attn_pv_keys(o, bound, S, EvP);
    dpc_buf_printf(o, "                    const int64_t nl = %lldLL - db < %d ? %lldLL - db : %d;\n", Ev, RK, Ev, RK);
    /* one store loop per query row (vectorised), the rows past nq skipped */
    for (int q = 0; q < ATTN_RQ; q++)
        dpc_buf_printf(o,
                       "                    if (ii + %d < nq) {\n"
                       "                        float *const o%d = op + (i0 + ii + %d) * %s;\n"
                       "                        const float w%d = inv[ii + %d];\n"
                       "                        for (int64_t l = 0; l < nl; l++) o%d[(db + l) * %s] = r%d[l] * w%d;\n"
                       "                    }\n",
                       q, q, q, emit_dim(t1, sizeof t1, a->o.stride[r - 2]), q, q, q,
                       emit_dim(t2, sizeof t2, a->o.stride[r - 1]), q, q);
    dpc_buf_puts(o, "                }\n        }\n    }\n");
}

void emit_attn_c(const kgraph *kg, const kernel *k, dpc_buf *o) {
    emit_attn a;
    emit_attn_geom(kg, k, &a);
    char t1[96];
    int r = a.r;
    const int RQ = ATTN_RQ, RK = ATTN_RK;
    const long long L = a.L, E = a.E, S = a.S, Ev = a.Ev, nqb = (a.L + ATTN_BQ - 1) / ATTN_BQ;
    /* short sequences (ViT's 17 tokens) take a key block of S rounded up to
     * RK, not ATTN_BK: the padded keys cost their scores and exps too */
    const int BK = (S + RK - 1) / RK * RK < ATTN_BK ? (int)((S + RK - 1) / RK * RK) : ATTN_BK;
    /* up to ATTN_BQ queries a block, the blocks as even as RQ allows (L =
     * 197: two of 100): each key block is copied once per query block */
    const int BQ = (int)(((L + nqb - 1) / nqb + RQ - 1) / RQ * RQ);
    /* acc and the value block have rows of Ev rounded up to RK (zeros) */
    const long long EvP = (Ev + RK - 1) / RK * RK;
    emit_comment(o, "    ", k->root);
    for (int i = 0; i < k->ops.len; i++)
        emit_comment(o, "    ", k->ops.items[i]);
    emit_comment(o, "    ", k->attn.softmax);
    emit_comment(o, "    ", k->attn.pv);
    if (k->attn.perm)
        emit_comment(o, "    ", k->attn.perm);
    if (emit_attn_gemm(kg, k, &a, o))
        return;
    dpc_buf_printf(o, "    /* fused attention: [L=%lld, E=%lld] x [S=%lld, Ev=%lld], %d queries x %d keys per block%s */\n",
                   L, E, S, Ev, BQ, BK, S <= BK ? ", one key block" : "");
    if (S <= BK) {
        emit_attn_short(kg, k, &a, o, BQ, BK, EvP);
        return;
    }
    emit_attn_loop_head(kg, &a, o, nqb, BQ);
    dpc_buf_printf(o, "        float qb[%d * %lld], acc[%d * %lld], mx[%d], sm[%d], cr[%d];\n", BQ, E, BQ, EvP, BQ, BQ, BQ);
    emit_attn_qcopy(&a, o, BQ);
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < %d; ii++) { mx[ii] = -INFINITY; sm[ii] = 0.0f; cr[ii] = 1.0f; }\n"
                   "        for (int64_t x = 0; x < %d * %lldLL; x++) acc[x] = 0.0f;\n"
                   "        for (int64_t j0 = 0; j0 < %lldLL; j0 += %d) {\n"
                   "            const int64_t nk = %lldLL - j0 < %d ? %lldLL - j0 : %d;\n",
                   BQ, BQ, EvP, S, BK, S, BK, S, BK);
    emit_attn_kv_scores(&a, o, BQ, BK, EvP);
    /* the chain, row by row */
    emit_attn_rows_chain(kg, k, &a, o, BK);
    dpc_buf_printf(o,
                   "                }\n"
                   "                for (int64_t jj = nk; jj < %d; jj++) sr[jj] = -INFINITY;\n"
                   "                /* online softmax: the running max, the sum and the output rescaled */\n"
                   "                float lm[%d], ls[%d];\n"
                   "                for (int64_t l = 0; l < %d; l++) lm[l] = sr[l];\n"
                   "                for (int64_t jb = %d; jb < %d; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) lm[l] = sr[jb + l] > lm[l] ? sr[jb + l] : lm[l];\n"
                   "                float mb = mx[ii];\n"
                   "                for (int64_t l = 0; l < %d; l++) mb = lm[l] > mb ? lm[l] : mb;\n"
                   "                if (mb == -INFINITY) { /* every key so far masked: nothing accumulated */\n"
                   "                    cr[ii] = 1.0f;\n"
                   "                    for (int64_t jj = 0; jj < %d; jj++) sr[jj] = 0.0f;\n"
                   "                    continue;\n"
                   "                }\n"
                   "                cr[ii] = dpc_expf(mx[ii] - mb);\n"
                   "                for (int64_t jj = 0; jj < %d; jj++) sr[jj] = dpc_expf(sr[jj] - mb);\n"
                   "                for (int64_t l = 0; l < %d; l++) ls[l] = sr[l];\n"
                   "                for (int64_t jb = %d; jb < %d; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) ls[l] += sr[jb + l];\n"
                   "                float lsum = 0.0f;\n"
                   "                for (int64_t l = 0; l < %d; l++) lsum += ls[l];\n"
                   "                sm[ii] = sm[ii] * cr[ii] + lsum;\n"
                   "                mx[ii] = mb;\n"
                   "            }\n",
                   BK, RK, RK, RK, RK, BK, RK, RK, RK, BK, BK, RK, RK, BK, RK, RK, RK);
    /* p . v, RQ queries per value row */
    dpc_buf_printf(o,
                   "            /* p . v: %d queries x %d of Ev in registers, over the block's keys */\n"
                   "            for (int64_t ii = 0; ii < nq; ii += %d)\n"
                   "                for (int64_t db = 0; db < %lldLL; db += %d) {\n"
                   "                    float *const a0 = acc + ii * %lld + db;\n"
                   "                    const float *const p0 = s + ii * %d;\n"
                   "                    const float w0 = cr[ii], w1 = cr[ii + 1], w2 = cr[ii + 2], w3 = cr[ii + 3];\n"
                   "                    float r0[%d], r1[%d], r2[%d], r3[%d];\n"
                   "                    for (int64_t l = 0; l < %d; l++) {\n"
                   "                        r0[l] = a0[l] * w0; r1[l] = a0[%lld + l] * w1; r2[l] = a0[%lld + l] * w2; r3[l] = a0[%lld + l] * w3;\n"
                   "                    }\n",
                   RQ, RK, RQ, EvP, RK, EvP, BK, RK, RK, RK, RK, RK, EvP, 2 * EvP, 3 * EvP);
    emit_attn_pv_keys(o, "nk", BK, EvP);
    dpc_buf_printf(o,
                   "                    for (int64_t l = 0; l < %d; l++) {\n"
                   "                        a0[l] = r0[l]; a0[%lld + l] = r1[l]; a0[%lld + l] = r2[l]; a0[%lld + l] = r3[l];\n"
                   "                    }\n"
                   "                }\n"
                   "        }\n",
                   RK, EvP, 2 * EvP, 3 * EvP);
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "            const float inv = 1.0f / sm[ii];\n"
                   "            for (int64_t d = 0; d < %lldLL; d++) op[(i0 + ii) * %s",
                   Ev, emit_dim(t1, sizeof t1, a.o.stride[r - 2]));
    dpc_buf_printf(o, " + d * %s] = acc[ii * %lld + d] * inv;\n        }\n    }\n",
                   emit_dim(t1, sizeof t1, a.o.stride[r - 1]), EvP);
}
