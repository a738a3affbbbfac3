/* backend_cuda_impl.h - what the two halves of the CUDA backend share:
 * backend_cuda.c (compiling, devices, weights, the backend's life) and
 * backend_cuda_run.c (the memory plan, one forward, CUDA graphs,
 * benchmarks), with backend_cuda_err.c (checked calls, the dead backend)
 * below both. backend_cuda.h is the interface. */
#ifndef DPC_BACKEND_CUDA_IMPL_H
#define DPC_BACKEND_CUDA_IMPL_H

#include "backend_cuda.h"
#include "cublaslt.h"
#include "cudnn_lib.h"
#include "cuda_driver.h"
#include "dataparallel.h" /* DPC_MAX_DEVICES */
#include "nccl_lib.h"     /* dpc_cuda_weights_info */

#include <pthread.h>
#include <stdatomic.h>

/* The kernel ABI: compiler/kabi.h, printed into the generated source by
 * emit_cuda.c. The host holds the device pointers as CUdeviceptr. */
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "kabi.h holds a CUdeviceptr as unsigned long long");

#define MAX_SCALARS DPC_MAX_SCALARS /* no forward has more (irbuild.c) */
#define CTL_SCALARS 64 /* offset of the scalars in the control block */
#define CTL_BYTES (CTL_SCALARS + MAX_SCALARS * 4)
#define HOST_IO ((CTL_BYTES + 255) / 256 * 256) /* offset of the first staged input in pinned memory */
#define MAX_IMAGES 8

/* What the replicas on one GPU share. */
typedef struct cu_dev {
    int ordinal;
    CUcontext ctx;
    dpc_cuda_device info;
    char target[32];   /* what the module was compiled for: sm_90, or compute_XX */
    char how[320];     /* where the module came from, for dpc_cuda_kernels */
    CUmodule mod;
    CUfunction *fn;    /* per plan step; NULL for GEMMs */
    CUdeviceptr weights;
    atomic_bool weights_pending; /* allocated, waiting for the NCCL broadcast */
    atomic_bool prepared;        /* the prepare steps ran on these weights (under the backend's lock) */
} cu_dev;

typedef struct cuda_backend {
    dpc_backend be;
    const dpc_unit *u;
    float *const *params;
    char *src;
    const char *model_name;
    dpc_cu_plan plan;
    bool has_gemm;      /* GEMM steps outside the convs' fallbacks: cuBLASLt at replica_new */
    bool has_conv_gemm; /* GEMM steps of the convs' fallbacks */
    size_t *param_off; /* per buffer: offset of a parameter (or BUF_CONST) in a device's weights */
    size_t weight_bytes;
    struct {
        char arch[32];
        dpc_buf image;
        bool hit; /* from the kernel cache */
    } images[MAX_IMAGES];
    int nimages;
    const dpc_cu_images *stored; /* offered by the artifact, borrowed; NULL none */
    char src_sha256[65];         /* of src, when stored images are offered */
    cu_dev *devs[DPC_MAX_DEVICES];
    int ndevs;
    pthread_mutex_t lock;
    bool tf32, graphs, sync_each, use_stored;
    int cudnn;         /* DPC_CUDNN: 0 off, 1 on (default), 2 auto (timed per conv) */
    bool has_conv;     /* the plan has convolutions cuDNN may run */
    kprec prec;        /* how float buffers are stored on the device */
    atomic_int dead;
    char dead_msg[DPC_ERR_MSG];
    dpc_cuda_weights_info winfo; /* how the weights reached the GPUs (under lock) */
} cuda_backend;

struct dpc_replica {
    cuda_backend *cb;
    cu_dev *dev;
    CUstream stream;
    dpc_lt *lt;
    CUdeviceptr ctl; /* dpc_cu_kerr, then the scalars */
    int64_t planned_N; /* -1: not planned yet */
    CUdeviceptr arena;
    size_t arena_bytes;
    size_t *offset;     /* per buffer, in the arena */
    CUdeviceptr *ptr;   /* per buffer */
    size_t *host_off;   /* per input/output buffer, in the pinned staging */
    void *host;         /* pinned: dpc_cu_kerr, scalars, inputs, outputs */
    size_t host_bytes;
    CUgraphExec graph;  /* for planned_N, once captured */
    bool graph_failed;  /* capture refused at planned_N: run step by step */
    long runs_at_N;
    bool pending;       /* launched, not yet synced */
    int64_t pending_N;
    dpc_cuda_stats stats;
    /* cuDNN (backend_cuda_run.c, plan_convs): per step of planned_N, how a
     * conv step runs (CONV_*), the workspace, why a conv fell back */
    dpc_dnn *dnn;
    uint8_t *conv_how;
    CUdeviceptr dnn_ws;
    size_t dnn_ws_bytes;
    char dnn_why[DPC_ERR_MSG];
};

enum { CONV_FALLBACK = DPC_DNN_OWN, CONV_CUDNN = DPC_DNN_PLAIN, CONV_FUSED = DPC_DNN_FUSED };


/* ---- errors (backend_cuda_err.c) ---- */

/* True (with the first sticky error's message in e, *s set) once a sticky
 * error has poisoned the CUDA context. */
bool dpc_cub_is_dead(cuda_backend *cb, dpc_err *e, dpc_status *s);
/* A driver result r of call, checked: a sticky error marks the backend dead. */
dpc_status dpc_cub_check(cuda_backend *cb, CUresult r, const char *call, dpc_err *e);
/* A checked driver call; cb and e must be in scope. */
#define CK(call) dpc_cub_check(cb, dpc_cuda()->call, #call, e)
#define CK_TRY(call)                                                                               \
    do {                                                                                           \
        dpc_status ck_s_ = CK(call);                                                               \
        if (ck_s_ != DPC_OK)                                                                       \
            return ck_s_;                                                                          \
    } while (0)

/* The name of kernel k of the unit. */
const char *dpc_cub_kname(const cuda_backend *cb, int k);
/* The tensor dtype of 16-bit storage. */
static inline dpc_dtype dpc_cub_half_dtype(kprec p) { return p == KP_BF16 ? DPC_BF16 : DPC_F16; }

/* backend.h's replicas_ready (backend_cuda.c): the NCCL broadcast of the
 * weights to the GPUs waiting for them. backend_cuda_run.c calls it through
 * the vtable (be->replicas_ready), never by name: the forward stays below
 * the set-up. */
dpc_status dpc_cub_replicas_ready(dpc_backend *be, dpc_err *e);

/* ---- running (backend_cuda_run.c): backend.h's launch, sync and run ---- */
dpc_status dpc_cub_launch(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
dpc_status dpc_cub_sync(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
dpc_status dpc_cub_run(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);

#endif
