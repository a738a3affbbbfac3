/* backend_cuda_err.c - how the CUDA backend fails: every driver call
 * checked and named (dpc_cub_check, the CK macros), a sticky error
 * (illegal address...) marking the backend dead with its first message,
 * the refusal of all further work after it, and a kernel's name for
 * messages. Its own file below backend_cuda.c (set-up) and
 * backend_cuda_run.c (the forward), which both use it. */
#include "backend_cuda_impl.h"

#include <stdio.h>

bool dpc_cub_is_dead(cuda_backend *cb, dpc_err *e, dpc_status *s) {
    if (!atomic_load(&cb->dead))
        return false;
    *s = dpc_errf(e, DPC_EDEVICE, "the CUDA backend stopped after a sticky error and cannot run again in this "
                                  "process: %s",
                  cb->dead_msg);
    return true;
}

static void mark_dead(cuda_backend *cb, const char *msg) {
    pthread_mutex_lock(&cb->lock);
    if (!atomic_load(&cb->dead)) {
        snprintf(cb->dead_msg, sizeof cb->dead_msg, "%s", msg);
        atomic_store(&cb->dead, 1);
    }
    pthread_mutex_unlock(&cb->lock);
}

dpc_status dpc_cub_check(cuda_backend *cb, CUresult r, const char *call, dpc_err *e) {
    if (r == CUDA_SUCCESS)
        return DPC_OK;
    dpc_err tmp;
    if (!e)
        e = &tmp;
    dpc_status s = dpc_cuda_check(r, call, e);
    if (dpc_cuda_is_sticky(r))
        mark_dead(cb, e->msg);
    return s;
}

const char *dpc_cub_kname(const cuda_backend *cb, int k) {
    dpc_kernel_info ki;
    dpc_unit_kernel(cb->u, k, &ki);
    return ki.name;
}
