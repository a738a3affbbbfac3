/* cpu_env.c - the CPU backend's convolution switches (cpu_env.h). */
#include "cpu_env.h"

#include <stdlib.h>
#include <string.h>

static const char *const LAYOUT_NAMES[] = {"plain", "blocked", "nhwc", "auto"};

/* The fused 1x1 + depthwise pairs and Winograd (oneDNN's in NHWC, dpc's
 * own in blocked, conv_wino.h) need a layout other than plain NCHW; auto
 * keeps them until it is resolved. */
static void honour(dpc_conv_env *v) {
    v->keep = v->keep && v->layout != DPC_CONV_PLAIN;
    v->wino = v->wino && v->layout != DPC_CONV_PLAIN;
    v->stem = v->stem && v->layout != DPC_CONV_PLAIN;
    v->fc = v->fc && v->layout != DPC_CONV_PLAIN;
    v->dw = v->dw && v->keep;
    v->mb = v->keep ? v->mb : DPC_CONV_MB_NEVER;
}

/* DPC_CONV_MB: a flag, or "all". */
static dpc_status mb_read(dpc_conv_env *v, dpc_err *e) {
    const char *m = getenv("DPC_CONV_MB");
    if (m && strcmp(m, "all") == 0) {
        v->mb = DPC_CONV_MB_ALL;
        return DPC_OK;
    }
    bool on = true;
    dpc_status s = dpc_env_flag("DPC_CONV_MB", true, &on, e);
    if (s != DPC_OK)
        return dpc_errf(e, DPC_EUSAGE,
                        "environment variable DPC_CONV_MB='%.100s' is not a flag (1, yes, on, true or 0, no, off, false) "
                        "or all",
                        m);
    v->mb = on ? DPC_CONV_MB_AUTO : DPC_CONV_MB_NEVER;
    return DPC_OK;
}

dpc_status dpc_conv_env_read(dpc_conv_env *v, dpc_err *e) {
    const char *conv = getenv("DPC_CONV"), *lay = getenv("DPC_CONV_LAYOUT");
    v->on = !conv || !*conv || strcmp(conv, "dnnl") == 0;
    if (!v->on && strcmp(conv, "im2col") != 0)
        return dpc_errf(e, DPC_EUSAGE, "environment variable DPC_CONV='%.100s' is not dnnl or im2col", conv);
    v->layout = DPC_CONV_AUTO;
    if (lay && *lay) {
        v->layout = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(lay, LAYOUT_NAMES[i]) == 0)
                v->layout = i;
        if (v->layout < 0)
            return dpc_errf(e, DPC_EUSAGE,
                            "environment variable DPC_CONV_LAYOUT='%.100s' is not auto, nhwc, blocked or plain", lay);
    }
    dpc_status s = dpc_env_flag("DPC_CONV_KEEP", true, &v->keep, e);
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_CONV_WINO", true, &v->wino, e);
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_CONV_DW", true, &v->dw, e);
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_CONV_STEM", true, &v->stem, e);
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_CONV_FC", true, &v->fc, e);
    if (s == DPC_OK)
        s = mb_read(v, e);
    if (s != DPC_OK) /* the flags after the bad one were never set */
        return s;
    honour(v);
    return DPC_OK;
}

void dpc_conv_env_resolve(dpc_conv_env *v, int layout) {
    v->layout = layout;
    honour(v);
}
