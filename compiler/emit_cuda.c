/* emit_cuda.c - the CUDA dialect of the kernel IR, for NVRTC, and its
 * launch plan (kabi.h) for backend_cuda.c.
 *
 * Device code only: one extern "C" __global__ function per launch, named
 * after its kernel (k3_fc1_linear_relu; a convolution adds
 * k5_conv_im2col), taking its buffers as pointers and a small context by
 * value (scalars, the error flag, the batch size N, the convolution
 * group). The thread mapping per kind:
 *   elementwise   grid-stride loop over the output; four elements per load and
 *                 store (float4, or 8 bytes in 16-bit storage) when every
 *                 operand is read at the output's index
 *   GEMM, conv    cuBLASLt (bias and bias+ReLU as cuBLASLt epilogues), then
 *                 the rest of the fused chain as an elementwise kernel over
 *                 the result; a convolution is im2col + GEMM + a kernel that
 *                 scatters back to NCHW with bias and the fused chain
 *   row           softmax, log_softmax, layer_norm: one warp per row with
 *                 shuffle reductions, or one block per row for long rows
 *   reduce        one warp per output over a last axis, else one thread per
 *                 output looping over the axis
 *   pool, cat, copy, embedding: one thread per output element; embedding
 *                 checks its indices and raises the error flag
 * Each op is preceded by a #line directive naming its .dp line, so NVRTC
 * errors point at the model; generated scaffolding is mapped back to the
 * generated source ("<Model>.cu"). Sizes that depend on the batch are
 * written in terms of N, everything else is a literal. The output is
 * deterministic, as the kernel cache requires.
 *
 * This file is the frame: the prelude, the kernels in order, the entry
 * points; each kind's kernels are in emit_cuda_<kind>.c (emit_cuda.h). */

#include "emit_cuda.h"
#include "kabi_text.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- the program */

static const char PRELUDE[] =
    "#define INFINITY __int_as_float(0x7f800000)\n"
    "#define NAN __int_as_float(0x7fffffff)\n"
    "typedef long long int64_t;\n"
    "\n"
    /* the ABI as the runtime compiles it (kabi.h) */
    DPC_KABI_CUDA_TEXT
    "\n"
    "__device__ __forceinline__ void raise_error(const dpc_kctx *ctx, int kernel, long long index, long long limit) {\n"
    "    if (atomicCAS(&ctx->err->kernel, 0, kernel) == 0) {\n"
    "        ctx->err->index = index;\n"
    "        ctx->err->limit = limit;\n"
    "    }\n"
    "}\n"
    "\n"
    "/* NaN-propagating max, as torch.amax. */\n"
    "__device__ __forceinline__ float nanmax(float a, float b) { return (a > b || a != a) ? a : b; }\n"
    "\n"
    "__device__ __forceinline__ float warp_sum(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float warp_max(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float warp_nanmax(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v = nanmax(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    return v;\n"
    "}\n"
    "\n"
    "/* Block-wide reductions (all threads of the block call them): warps\n"
    " * reduce, warp 0 reduces the warps' partials, everyone reads the result. */\n"
    "__device__ __forceinline__ float block_sum(float v) {\n"
    "    __shared__ float part[32];\n"
    "    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "    v = warp_sum(v);\n"
    "    if (lane == 0) part[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < (int)(blockDim.x / 32) ? part[lane] : 0.0f;\n"
    "    v = warp_sum(v);\n"
    "    __syncthreads(); /* part is reused by the next call */\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float block_max(float v) {\n"
    "    __shared__ float part[32];\n"
    "    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "    v = warp_max(v);\n"
    "    if (lane == 0) part[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < (int)(blockDim.x / 32) ? part[lane] : -INFINITY;\n"
    "    v = warp_max(v);\n"
    "    __syncthreads();\n"
    "    return v;\n"
    "}\n";

/* 16-bit storage (--dtype bf16|f16): a buffer element is a struct that
 * reads as float and rounds to nearest even when a float is stored into
 * it. It has no arithmetic of its own, so every expression the emitters
 * write computes in float exactly as in f32, reductions included; only
 * loads and stores change. */
static const char PRELUDE_BF16[] =
    "\n"
    "/* bf16 storage: the top half of a float; stores round to nearest even. */\n"
    "struct dpc_bf16 {\n"
    "    unsigned short u;\n"
    "    __device__ __forceinline__ operator float() const { return __uint_as_float((unsigned)u << 16); }\n"
    "    __device__ __forceinline__ dpc_bf16 &operator=(float f) {\n"
    "        const unsigned x = __float_as_uint(f);\n"
    "        u = (x & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((x >> 16) | 0x40u) /* NaN stays NaN */\n"
    "                                             : (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
    "        return *this;\n"
    "    }\n"
    "};\n"
    "struct alignas(8) dpc_bf16x4 { dpc_bf16 v[4]; }; /* four per load and store */\n";

static const char PRELUDE_F16[] =
    "\n"
    "/* f16 storage (IEEE half); stores round to nearest even. On the GPU the\n"
    " * conversions are one PTX instruction each; the host versions serve a\n"
    " * host compiler (dpc's CPU emulation of these kernels in its tests). */\n"
    "#ifdef __CUDA_ARCH__\n"
    "__device__ __forceinline__ float dpc_h2f(unsigned short h) {\n"
    "    float f;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "    return f;\n"
    "}\n"
    "__device__ __forceinline__ unsigned short dpc_f2h(float f) {\n"
    "    unsigned short h;\n"
    "    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "    return h;\n"
    "}\n"
    "#else\n"
    "static inline float dpc_h2f(unsigned short h) {\n"
    "    const unsigned s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "    if (e == 0) { const float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; } /* m * 2^-24 */\n"
    "    return __uint_as_float(s | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13)));\n"
    "}\n"
    "static inline unsigned short dpc_f2h(float f) {\n"
    "    const unsigned x = __float_as_uint(f), s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;\n"
    "    if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u);    /* NaN */\n"
    "    if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);   /* 65520 and up round to inf */\n"
    "    if (a < 0x38800000u) /* below 2^-14: a subnormal, in units of 2^-24 */\n"
    "        return (unsigned short)(s | (unsigned)rintf(__uint_as_float(a) * 16777216.0f));\n"
    "    const unsigned r = a - 0x38000000u; /* rebias the exponent by 127 - 15 */\n"
    "    return (unsigned short)(s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));\n"
    "}\n"
    "#endif\n"
    "struct dpc_f16 {\n"
    "    unsigned short u;\n"
    "    __device__ __forceinline__ operator float() const { return dpc_h2f(u); }\n"
    "    __device__ __forceinline__ dpc_f16 &operator=(float f) {\n"
    "        u = dpc_f2h(f);\n"
    "        return *this;\n"
    "    }\n"
    "};\n"
    "struct alignas(8) dpc_f16x4 { dpc_f16 v[4]; }; /* four per load and store */\n";

static void emit_kernel(cg *g, const kernel *k) {
    switch (k->kind) {
    case KK_ELEMWISE: cu_chain_kernel(g, k, k->name, 0, NULL, 0, false, false, NULL); break;
    case KK_GEMM:
        if (k->root->op == OP_LINEAR)
            emit_cuda_linear(g, k);
        else
            emit_cuda_matmul(g, k);
        break;
    case KK_CONV: emit_cuda_conv(g, k); break;
    case KK_POOL: emit_cuda_pool(g, k); break;
    case KK_ROW: emit_cuda_row(g, k); break;
    case KK_REDUCE: emit_cuda_reduce(g, k); break;
    case KK_EMBED: emit_cuda_embed(g, k); break;
    case KK_CAT: emit_cuda_cat(g, k); break;
    case KK_COPY: emit_cuda_copy(g, k); break;
    case KK_ATTN: emit_attn_cuda(g, k); break;
    case KK_RESAMPLE: emit_cuda_resample(g, k); break;
    }
}

static void emit_program(cg *g) {
    const ir_graph *ig = g->kg->g;
    dpc_buf_printf(g->o, "/* dpc %s: CUDA kernels for ", DPC_VERSION);
    emit_comment_text(g->o, ig->model_name);
    dpc_buf_puts(g->o, " (");
    emit_comment_text(g->o, ig->file);
    dpc_buf_printf(g->o, ")%s%s%s. Generated; compiled with NVRTC. */\n", g->prec != KP_F32 ? ", " : "",
                   g->prec != KP_F32 ? kprec_name(g->prec) : "", g->prec != KP_F32 ? " storage" : "");
    dpc_buf_puts(g->o, PRELUDE);
    if (g->prec == KP_BF16)
        dpc_buf_puts(g->o, PRELUDE_BF16);
    else if (g->prec == KP_F16)
        dpc_buf_puts(g->o, PRELUDE_F16);
    for (int i = 0; i < g->kg->kernels.len; i++) {
        g->kernel = i;
        if (g->kg->nprepare && (i == 0 || i == g->kg->nprepare))
            dpc_buf_puts(g->o, i == 0 ? "\n/* ---- prepare kernels: parameters and constants only, launched once\n"
                                        " * per device when the weights are bound (the plan's prepare steps) ---- */\n"
                                      : "\n/* ---- forward kernels ---- */\n");
        if (g->plan && i == g->kg->nprepare)
            g->plan->nprepare = g->plan->nsteps;
        emit_kernel(g, g->kg->kernels.items[i]);
    }
    if (g->plan && g->kg->nprepare == g->kg->kernels.len)
        g->plan->nprepare = g->plan->nsteps;
}

static void free_seen(cg *g) {
    for (int i = 0; i < g->nseen; i++)
        free(g->seen[i].canon);
    free(g->seen);
}

static char *unit_name(const kgraph *kg) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "%s.cu", kg->g->model_name ? kg->g->model_name : "model");
    return dpc_buf_take(&b);
}

void dpc_cu_plan_free(dpc_cu_plan *plan) {
    if (!plan)
        return;
    free(plan->steps);
    memset(plan, 0, sizeof *plan);
}

static const char *prec_type(kprec p) { return p == KP_BF16 ? "dpc_bf16" : p == KP_F16 ? "dpc_f16" : "float"; }

dpc_status dpc_cuda_program(const kgraph *kg, kprec prec, char **source, dpc_cu_plan *plan, dpc_err *e) {
    *source = NULL;
    memset(plan, 0, sizeof *plan);
    dpc_buf o;
    dpc_buf_init(&o);
    char *unit = unit_name(kg);
    cg g = {.kg = kg, .o = &o, .plan = plan, .unit = unit ? unit : "model.cu", .st = DPC_OK, .e = e, .fn_start = NO_FN,
            .prec = prec, .ft = prec_type(prec)};
    emit_program(&g);
    free(unit);
    free_seen(&g);
    if (g.st == DPC_OK && o.oom)
        g.st = dpc_errf(e, DPC_ENOMEM, "out of memory rendering CUDA kernels");
    if (g.st != DPC_OK) {
        dpc_buf_free(&o);
        dpc_cu_plan_free(plan);
        return g.st;
    }
    *source = dpc_buf_take(&o);
    if (!*source) {
        dpc_cu_plan_free(plan);
        return dpc_errf(e, DPC_ENOMEM, "out of memory rendering CUDA kernels");
    }
    return DPC_OK;
}

void emit_cuda(const kgraph *kg, kprec prec, dpc_buf *out) {
    char *unit = unit_name(kg);
    cg g = {.kg = kg, .o = out, .plan = NULL, .unit = unit ? unit : "model.cu", .st = DPC_OK, .e = NULL, .fn_start = NO_FN,
            .prec = prec, .ft = prec_type(prec)};
    emit_program(&g);
    free(unit);
    free_seen(&g);
}
