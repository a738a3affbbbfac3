#include "ir.h"
bool ir_build(dpc_ctx *c, model *m, ir_graph *g) { (void)c; (void)m; (void)g; return true; }
