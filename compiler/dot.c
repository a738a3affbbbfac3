/* dot.c - `dpc graph`: the graph IR and its kernels as Graphviz, beside
 * ir_print (ir.c) and fuse_print (fuse.c). Values are nodes, grouped in a
 * box per kernel; the replicated part is one dashed cluster between the
 * scatter and the gather, as DataParallel runs it. Names written here are
 * the lexer's identifiers (model, parameter names), never free text. */
#include "kernel.h"

static void dot_kernels(const kgraph *kg, dpc_buf *o) {
    for (int k = 0; k < kg->kernels.len; k++) {
        const kernel *kr = kg->kernels.items[k];
        dpc_buf_printf(o, "    subgraph cluster_k%d { label=\"%s\"; style=filled; fillcolor=\"#f4f4f4\";\n", k, kr->name);
        if (kr->root && kr->kind != KK_COPY)
            dpc_buf_printf(o, "      n%d;\n", kr->root->id);
        for (int i = 0; i < kr->ops.len; i++)
            dpc_buf_printf(o, "      n%d;\n", ((ir_node *)kr->ops.items[i])->id);
        if (kr->kind == KK_COPY)
            dpc_buf_printf(o, "      n%d;\n", kr->out->id);
        dpc_buf_puts(o, "    }\n");
    }
}

void kgraph_dot(const kgraph *kg, dpc_buf *o) {
    const ir_graph *g = kg->g;
    dpc_buf_printf(o, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n",
                   g->model_name);
    dpc_buf_puts(o, "  scatter [label=\"scatter on dim 0\\n(torch.chunk)\", shape=invtrapezium, style=filled, fillcolor=\"#dde8ff\"];\n");
    dpc_buf_puts(o, "  gather [label=\"gather on dim 0\\n(output device)\", shape=trapezium, style=filled, fillcolor=\"#dde8ff\"];\n");
    dpc_buf_printf(o, "  subgraph cluster_replica {\n    label=\"runs on every replica in parallel (batch %s split)\";\n"
                       "    style=dashed; color=\"#3366cc\";\n",
                   g->batch_name ? g->batch_name : "N");
    dot_kernels(kg, o);
    char sh[128];
    for (int i = 0; i < g->nodes.len; i++) {
        const ir_node *n = g->nodes.items[i];
        if (n->op == OP_PARAM || n->op == OP_CONST)
            continue;
        shape_str(&n->sh, g->batch_name, sh, sizeof sh);
        dpc_buf_printf(o, "    n%d [label=\"%%%d %s%s%s\\n%s\"%s];\n", n->id, n->id, ir_op_name(n->op), n->name ? " " : "",
                       n->name ? n->name : "", sh,
                       n->op == OP_INPUT || n->op == OP_SCALAR || n->op == OP_BATCH ? ", shape=ellipse" : "");
    }
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
