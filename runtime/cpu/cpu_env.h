/* cpu_env.h - the CPU backend's convolution switches (DPC_CONV,
 * DPC_CONV_LAYOUT, DPC_CONV_KEEP, DPC_CONV_WINO, DPC_CONV_DW, DPC_CONV_STEM,
 * DPC_CONV_FC, DPC_CONV_MB; docs/cli.md).
 *
 * They are read in every build, the OpenBLAS one included, where no oneDNN
 * primitive exists for them to steer: a typo is then still an error, so a
 * script behaves the same whichever library the build picked. */
#ifndef DPC_CPU_ENV_H
#define DPC_CPU_ENV_H

#include "base.h"

/* DPC_CONV_AUTO (DPC_CONV_LAYOUT unset or "auto"): NHWC or blocked as the
 * machine and the model measured faster (conv_dnnl.c, auto_layout). */
enum { DPC_CONV_PLAIN, DPC_CONV_BLOCKED, DPC_CONV_NHWC, DPC_CONV_AUTO };

/* DPC_CONV_MB: a 1x1 conv and the depthwise conv after it as dpc's kernel
 * never (0, off, ...), where it measured faster than oneDNN's two (1, on,
 * ..., the default: the pairs with SiLU or sigmoid post-ops), or wherever
 * it fits ("all"). */
enum { DPC_CONV_MB_NEVER, DPC_CONV_MB_AUTO, DPC_CONV_MB_ALL };

typedef struct dpc_conv_env {
    bool on;     /* DPC_CONV=dnnl (the default); im2col: no primitives */
    int layout;  /* DPC_CONV_LAYOUT, one of DPC_CONV_PLAIN.. */
    bool keep;   /* results a conv alone reads stay in the primitive's layout */
    bool wino;   /* 3x3 convs try Winograd first: oneDNN's (NHWC), dpc's (blocked) */
    bool stem;   /* convs of few input channels oneDNN runs as a GEMM run dpc's direct kernel (blocked) */
    bool fc;     /* convs of one pixel run dpc's kernel (blocked) */
    bool dw;     /* a 1x1 conv and the depthwise conv after it run as one */
    int mb;      /* and as dpc's kernel (blocked): DPC_CONV_MB_* */
} dpc_conv_env;

/* Reads the switches strictly (a value not listed is a DPC_EUSAGE error
 * naming the variable) and drops those the layout cannot honour. */
dpc_status dpc_conv_env_read(dpc_conv_env *v, dpc_err *e);
/* Sets DPC_CONV_AUTO's layout, dropping the switches it cannot honour. */
void dpc_conv_env_resolve(dpc_conv_env *v, int layout);

#endif
