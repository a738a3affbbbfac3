/* dot.c - `dpc graph`: the graph IR and its kernels as Graphviz, beside
 * ir_print (ir.c) and fuse_print (fuse.c). Values are nodes, grouped in a
 * box per kernel; the replicated part is one dashed cluster between the
 * scatter and the gather, as DataParallel runs it. Names written here are
 * the lexer's identifiers (model, parameter names), never free text. */
#include "kernel.h"

static void dot_kernels(const kgraph *kg, dpc_buf *o, int from, int to) {
    for (int k = from; k < to; k++) {
        const kernel *kr = kg->kernels.items[k];
        dpc_buf_printf(o, "    subgraph cluster_k%d { label=\"%s\"; style=filled; fillcolor=\"%s\";\n", k, kr->name,
                       kr->prepare ? "#fff4d6" : "#f4f4f4");
        if (kr->root && kr->kind != KK_COPY)
            dpc_buf_printf(o, "      n%d;\n", kr->root->id);
        for (int i = 0; i < kr->ops.len; i++)
            dpc_buf_printf(o, "      n%d;\n", ((ir_node *)kr->ops.items[i])->id);
        if (kr->kind == KK_COPY)
            dpc_buf_printf(o, "      n%d;\n", kr->out->id);
        dpc_buf_puts(o, "    }\n");
    }
}

/* Whether node n is computed by a prepare kernel (or is a view of such a value). */
static bool in_prepare(const kgraph *kg, const ir_node *n) {
    int k = kg->kern_of[n->id];
    if (k < 0 && kg->acc[n->id].kind != ACC_LEAF && kg->acc[n->id].base)
        k = kg->kern_of[kg->acc[n->id].base->id];
    return k >= 0 && k < kg->nprepare;
}

static void dot_values(const kgraph *kg, dpc_buf *o, bool prepare) {
    const ir_graph *g = kg->g;
    char sh[128];
    for (int i = 0; i < g->nodes.len; i++) {
        const ir_node *n = g->nodes.items[i];
        if (n->op == OP_PARAM || n->op == OP_CONST || in_prepare(kg, n) != prepare)
            continue;
        shape_str(&n->sh, g->batch_name, sh, sizeof sh);
        dpc_buf_printf(o, "    n%d [label=\"%%%d %s%s%s\\n%s\"%s];\n", n->id, n->id, ir_op_name(n->op), n->name ? " " : "",
                       n->name ? n->name : "", sh,
                       n->op == OP_INPUT || n->op == OP_SCALAR || n->op == OP_BATCH ? ", shape=ellipse" : "");
    }
}

void kgraph_dot(const kgraph *kg, dpc_buf *o) {
    const ir_graph *g = kg->g;
    dpc_buf_printf(o, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n",
                   g->model_name);
    dpc_buf_puts(o, "  scatter [label=\"scatter on dim 0\\n(torch.chunk)\", shape=invtrapezium, style=filled, fillcolor=\"#dde8ff\"];\n");
    dpc_buf_puts(o, "  gather [label=\"gather on dim 0\\n(output device)\", shape=trapezium, style=filled, fillcolor=\"#dde8ff\"];\n");
    /* the prepare kernels run once per load, outside the per-forward replica */
    if (kg->nprepare) {
        dpc_buf_puts(o, "  subgraph cluster_prepare {\n    label=\"prepare: once when the weights are bound\";\n"
                        "    style=dashed; color=\"#cc8800\";\n");
        dot_kernels(kg, o, 0, kg->nprepare);
        dot_values(kg, o, true);
        dpc_buf_puts(o, "  }\n");
    }
    dpc_buf_printf(o, "  subgraph cluster_replica {\n    label=\"runs on every replica in parallel (batch %s split)\";\n"
                       "    style=dashed; color=\"#3366cc\";\n",
                   g->batch_name ? g->batch_name : "N");
    dot_kernels(kg, o, kg->nprepare, kg->kernels.len);
    dot_values(kg, o, false);
    dpc_buf_puts(o, "  }\n");
    for (int i = 0; i < g->nodes.len; i++) {
        const ir_node *n = g->nodes.items[i];
        if (n->op == OP_PARAM || n->op == OP_CONST)
            continue;
        if (n->op == OP_INPUT)
            dpc_buf_printf(o, "  scatter -> n%d;\n", n->id);
        int cnt = n->op == OP_CAT ? ir_cat_count(n) : n->nin;
        for (int j = 0; j < cnt; j++) {
            const ir_node *x = g->nodes.items[n->op == OP_CAT ? ir_cat_operand(n, j) : n->in[j]];
            if (x->op != OP_PARAM && x->op != OP_CONST)
                dpc_buf_printf(o, "  n%d -> n%d;\n", x->id, n->id);
        }
    }
    for (int i = 0; i < g->outputs.len; i++)
        dpc_buf_printf(o, "  n%d -> gather;\n", ((ir_node *)g->outputs.items[i])->id);
    dpc_buf_puts(o, "}\n");
}
