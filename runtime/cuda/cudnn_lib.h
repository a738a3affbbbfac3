/* cudnn_lib.h - convolutions through cuDNN, loaded at run time.
 *
 * Like the driver (cuda_driver.h) and NCCL (nccl_lib.h), cuDNN is never
 * linked: libcudnn.so.9 (or .so.8, or $DPC_CUDNN_LIBRARY, a path) is
 * dlopen'ed on first use, and only its stable "legacy" convolution API is
 * called, declared here by prototype (cudnn.h is not included): handle and
 * stream, 4-d tensor, filter, convolution and activation descriptors,
 * cudnnGetConvolutionForwardAlgorithm_v7, cudnnGetConvolutionForwardWorkspaceSize,
 * cudnnConvolutionForward and cudnnConvolutionBiasActivationForward. Where
 * cuDNN cannot be loaded or refuses a convolution the CUDA backend runs its
 * own im2col + cuBLASLt steps (kabi.h dpc_cu_conv).
 *
 * One 2-d convolution, cross-correlation as PyTorch's conv2d, symmetric
 * padding, dilation, groups; x NCHW packed, w [Co, C/G, kh, kw] packed; y
 * NCHW packed, or channel-major [Co, N*Ho*Wo] (the layout the backend's
 * GEMMs write, which its epilogue kernel reads). Fused (bias set):
 * y = act(conv + bias[Co] (+ z)) with z shaped as y. Floats as dtype (f32,
 * bf16, f16), f32 arithmetic; f32 convolutions never use TF32 tensor cores
 * unless tf32 (CUDNN_FMA_MATH), so they match PyTorch's CPU numerics.
 *
 * A handle is not thread-safe: one per stream (and thread), made and used
 * with the device's context current. The library never prints. */
#ifndef DPC_CUDNN_LIB_H
#define DPC_CUDNN_LIB_H

#include "base.h"
#include "dpc_compile.h" /* kprec */
#include "kabi.h"

typedef struct dpc_dnn_conv {
    int64_t N, C, H, W, Co, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, G;
    int32_t dtype;   /* dpc_lt_dtype (cublaslt.h): 0 f32, 1 bf16, 2 f16 */
    int32_t act;     /* dpc_cu_act: fused only */
    uint8_t cmajor;  /* y (and z) channel-major [Co, N*Ho*Wo], else NCHW */
    uint8_t bias;    /* fused: + bias, then z, then act (cudnnConvolutionBiasActivationForward) */
    uint8_t z;       /* fused: + z */
    uint8_t tf32;    /* f32: let cuDNN use TF32 tensor cores */
} dpc_dnn_conv;

/* The convolution of plan step cv at batch N, floats stored as prec: fused
 * as the plan allows when fused, else into its channel-major y. Built from a
 * zeroed struct (it is a cache key). */
void dpc_dnn_conv_of(const dpc_cu_conv *cv, int64_t N, kprec prec, bool tf32, bool fused, dpc_dnn_conv *out);

/* Loads cuDNN once per process (thread-safe); later calls return the first
 * call's outcome. Needs no GPU. Fails with DPC_EDEVICE: "cuDNN not found
 * (libcudnn.so.9): ...", or what is wrong with the library found. */
dpc_status dpc_dnn_load(dpc_err *e);
/* cuDNN's version (91900 for 9.19.0, 8907 for 8.9.7); 0 when not loaded.
 * The path it was loaded from, or "". */
size_t dpc_dnn_version(void);
const char *dpc_dnn_path(void);

typedef struct dpc_dnn dpc_dnn;

/* Needs dpc_dnn_load and a current context. stream: the default for runs
 * that pass NULL. */
dpc_status dpc_dnn_create(dpc_dnn **out, void *stream, dpc_err *e);
void dpc_dnn_destroy(dpc_dnn *d);

/* Descriptors and algorithm for c (kept in the handle's cache); *workspace
 * is the device memory its run needs, at most max_workspace. An error
 * (cuDNN refuses the shape, no algorithm fits, sizes past cuDNN's int)
 * means: run this convolution without cuDNN. Launches nothing. */
dpc_status dpc_dnn_conv_prepare(dpc_dnn *d, const dpc_dnn_conv *c, size_t max_workspace, size_t *workspace,
                                dpc_err *e);

/* Enqueues c on stream (NULL: the handle's). x, w, bias, z, y and
 * workspace are device pointers; bias and z only when c has them. Prepares
 * c first if needed. */
dpc_status dpc_dnn_conv_run(dpc_dnn *d, const dpc_dnn_conv *c, const void *x, const void *w, const void *bias,
                            const void *z, void *y, void *workspace, size_t workspace_bytes, void *stream, dpc_err *e);

/* How the CUDA backend runs plan step cv at batch N (the emulator tests
 * share it): DPC_DNN_FUSED when cuDNN takes the fused form the plan allows,
 * else DPC_DNN_PLAIN when it takes the convolution into y, else
 * DPC_DNN_OWN (why says why). *workspace: what the chosen form needs. */
enum { DPC_DNN_OWN = 0, DPC_DNN_PLAIN = 1, DPC_DNN_FUSED = 2 };
int dpc_dnn_choose(dpc_dnn *d, const dpc_cu_conv *cv, int64_t N, kprec prec, bool tf32, size_t max_workspace,
                   size_t *workspace, dpc_err *why);

/* DPC_CUDNN: 0 (never), 1 (default: wherever cuDNN takes the shape) or
 * auto (2: the backend times both once per conv and batch size). */
dpc_status dpc_dnn_mode(int *mode, dpc_err *e);

/* "CUDNN_STATUS_NOT_SUPPORTED" (own table: works without the library). */
const char *dpc_dnn_status_name(int status);

/* "conv 3x3 s1 p1 d1 g1 64->64 at 56x56, batch 8, f32" for messages. */
void dpc_dnn_conv_describe(const dpc_dnn_conv *c, char *out, size_t n);

#endif
