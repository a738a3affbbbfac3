/* test_seams.c - the seams between fusion, the buffer plan and the graph IR
 * (issue 10, items 10 and 12), on the model files given:
 *
 *   - fusion leaves its input graph as it was: the same nodes, outputs and
 *     `dpc ir` text before and after fuse_graph (copies of returned inputs
 *     and of values returned twice live in the kernel graph only);
 *   - every buffer a kernel reads is live while it runs, and dpc_memplan
 *     never gives two buffers live at once overlapping bytes. Liveness is
 *     recomputed here from the kernels' ops directly, every op and every
 *     operand, independently of fuse.c's enumeration;
 *   - both kernel dialects come out of a chain of any length (the CPU one
 *     declares every buffer its chain reads).
 *
 *   test_seams MODEL.dp... */
#include "../check.h"
#include "backend.h"
#include "frontend.h"
#include "kernel.h"
#include "memplan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static char *ir_text(const ir_graph *g) {
    dpc_buf b;
    dpc_buf_init(&b);
    ir_print(g, &b);
    return b.data ? b.data : calloc(1, 1);
}

/* Live range of every buffer as the kernels actually use it: first write or
 * read, last read (INT_MAX, INT_MIN when unused). */
static void true_liveness(const kgraph *kg, int *first, int *last) {
    for (int i = 0; i < kg->bufs.len; i++)
        first[i] = INT_MAX, last[i] = INT_MIN;
    for (int k = 0; k < kg->kernels.len; k++) {
        const kernel *kr = kg->kernels.items[k];
        int touched[3] = {kg->buf_of[kr->out->id], kr->scratch, kr->scratch2};
        for (int t = 0; t < 3; t++)
            if (touched[t] >= 0) {
                first[touched[t]] = first[touched[t]] < k ? first[touched[t]] : k;
                last[touched[t]] = last[touched[t]] > k ? last[touched[t]] : k;
            }
        for (int i = -1; i < kr->ops.len; i++) {
            const ir_node *x = i < 0 ? (kr->kind == KK_COPY ? NULL : kr->root) : kr->ops.items[i];
            int cnt = !x ? 0 : x->op == OP_CAT ? ir_cat_count(x) : x->nin;
            for (int j = 0; j < cnt; j++) {
                int id = x->op == OP_CAT ? ir_cat_operand(x, j) : x->in[j];
                if (i < 0 && j == 1 && kr->wt) /* a linear reads its transposed weight (kernel.h) */
                    id = kr->wt->id;
                int b = kg->buf_of[id];
                if (b >= 0 && b != kg->buf_of[kr->out->id]) {
                    first[b] = first[b] < k ? first[b] : k;
                    last[b] = last[b] > k ? last[b] : k;
                }
            }
        }
        if (kr->kind == KK_COPY && kr->src.kind != ACC_LEAF) {
            int b = kg->buf_of[kr->src.base->id];
            first[b] = first[b] < k ? first[b] : k;
            last[b] = last[b] > k ? last[b] : k;
        }
    }
}

/* In the arena, inputs live from before the first kernel (copied in), and
 * outputs until after the last (copied out). */
static void io_liveness(const kgraph *kg, int *first, int *last) {
    for (int i = 0; i < kg->bufs.len; i++) {
        const kbuf *b = kg->bufs.items[i];
        if (b->kind == BUF_INPUT && first[i] != INT_MAX)
            first[i] = -1;
        if (b->kind == BUF_OUTPUT && first[i] != INT_MAX)
            last[i] = INT_MAX;
    }
}

/* what the memory plan places: not the weights, nor the prepare kernels' outputs (BUF_CONST, kept by the backend) */
static bool placed(const kbuf *b) { return b->kind != BUF_PARAM && b->kind != BUF_CONST; }

static void check_plan(const char *path, const dpc_unit *u, int64_t N, kprec prec) {
    const kgraph *kg = dpc_unit_kgraph(u);
    int nb = kg->bufs.len;
    int *first = calloc((size_t)nb + 1, sizeof(int)), *last = calloc((size_t)nb + 1, sizeof(int));
    size_t *off = calloc((size_t)nb + 1, sizeof(size_t)), total = 0;
    dpc_err e = {0};
    CHECK(first && last && off && dpc_memplan(u, N, prec, true, off, &total, &e) == DPC_OK, "%s: %s", path, e.msg);
    true_liveness(kg, first, last);
    for (int i = 0; i < nb; i++) {
        const kbuf *a = kg->bufs.items[i];
        /* fuse.c's own range must cover the real one */
        CHECK(first[i] == INT_MAX || (a->first <= first[i] && a->last >= last[i]),
              "%s: buf%d live [%d, %d] in the plan, used in [%d, %d]", path, i, a->first, a->last, first[i], last[i]);
    }
    io_liveness(kg, first, last);
    for (int i = 0; i < nb; i++) {
        const kbuf *a = kg->bufs.items[i];
        if (!placed(a) || first[i] == INT_MAX)
            continue;
        for (int j = i + 1; j < nb; j++) {
            const kbuf *b = kg->bufs.items[j];
            if (!placed(b) || first[j] == INT_MAX || last[i] < first[j] || last[j] < first[i])
                continue;
            size_t ea = off[i] + dpc_memplan_bytes(a, N, prec), eb = off[j] + dpc_memplan_bytes(b, N, prec);
            bool empty = ea == off[i] || eb == off[j];
            CHECK(empty || ea <= off[j] || eb <= off[i],
                  "%s: N=%lld %s: buf%d [%zu, %zu) and buf%d [%zu, %zu) overlap while both are live", path,
                  (long long)N, kprec_name(prec), i, off[i], ea, j, off[j], eb);
        }
    }
    CHECK(total > 0 || nb == 0, "%s: empty arena", path);
    free(first);
    free(last);
    free(off);
}

static void check_model(const char *path) {
    dpc_front *f = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    dpc_status s = front_run(path, NULL, 0, FRONT_IR, &f, &diags, &e);
    CHECK(s == DPC_OK, "%s: %s%s", path, e.msg, diags.data ? diags.data : "");
    dpc_buf_free(&diags);
    if (s != DPC_OK)
        return;
    int nodes = f->g.nodes.len, nout = f->g.outputs.len;
    void **outs = malloc(sizeof(void *) * (size_t)(nout + 1));
    memcpy(outs, f->g.outputs.items, sizeof(void *) * (size_t)nout);
    char *before = ir_text(&f->g);
    kgraph kg;
    memset(&kg, 0, sizeof kg);
    fuse_graph(&f->ctx, &f->g, &kg);
    char *after = ir_text(&f->g);
    CHECK(f->g.nodes.len == nodes, "%s: fusion changed the graph's node count: %d -> %d", path, nodes,
          f->g.nodes.len);
    CHECK(f->g.outputs.len == nout && !memcmp(outs, f->g.outputs.items, sizeof(void *) * (size_t)nout),
          "%s: fusion changed the graph's outputs", path);
    CHECK(!strcmp(before, after), "%s: fusion changed the IR text:\n%s\n--- after ---\n%s", path, before, after);
    CHECK(kg.out_bufs.len == nout, "%s: %d output buffers for %d outputs", path, kg.out_bufs.len, nout);
    /* the memory plan reads a unit (dpc_compile.h): the same model compiled through the API */
    dpc_unit *u = NULL;
    s = dpc_compile_file(path, DPC_STAGE_FUSED, &u, NULL, &e);
    CHECK(s == DPC_OK, "%s: %s", path, e.msg);
    for (int64_t N = 1; s == DPC_OK && N <= 7; N += 6)
        for (int p = KP_F32; p <= KP_BF16; p++)
            check_plan(path, u, N, (kprec)p);
    dpc_unit_free(u);
    dpc_buf c;
    dpc_buf_init(&c);
    emit_c(&kg, &c);
    CHECK(c.data && !strstr(c.data, "unsupported"), "%s: the CPU dialect failed", path);
    dpc_buf_free(&c);
    char *src = NULL;
    dpc_cu_plan plan;
    s = dpc_cuda_program(&kg, KP_F32, &src, &plan, &e);
    CHECK(s == DPC_OK, "%s: CUDA dialect: %s", path, e.msg);
    if (s == DPC_OK) {
        free(src);
        dpc_cu_plan_free(&plan);
    }
    free(before);
    free(after);
    free(outs);
    front_free(f);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_seams MODEL.dp...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++)
        check_model(argv[i]);
    return finish("test_seams");
}
