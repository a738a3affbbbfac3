/* kernels.h - representative CUDA kernels, as the source strings dpc's code
 * generator would hand to NVRTC, shared by the NVRTC and GPU tests. */
#ifndef DPC_TEST_KERNELS_H
#define DPC_TEST_KERNELS_H

/* Elementwise chain y = gelu(x * s + b) + r, four floats per thread per step
 * (float4 loads and stores) in a grid-stride loop. n4 = n / 4. */
static const char KERNEL_GELU_F4[] =
    "#line 1 \"models/ew.dp\"\n"
    "__device__ __forceinline__ float gelu(float x) {\n"
    "    const float s = 0.7978845608028654f; // sqrt(2/pi)\n"
    "    return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void fused_gelu_f4(float4 *__restrict__ y, const float4 *__restrict__ x,\n"
    "                                          const float4 *__restrict__ r, float s, float b,\n"
    "                                          long long n4) {\n"
    "    long long stride = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {\n"
    "        float4 v = x[i];\n"
    "        float4 res = r[i];\n"
    "        float4 out;\n"
    "        out.x = gelu(v.x * s + b) + res.x;\n"
    "        out.y = gelu(v.y * s + b) + res.y;\n"
    "        out.z = gelu(v.z * s + b) + res.z;\n"
    "        out.w = gelu(v.w * s + b) + res.w;\n"
    "        y[i] = out;\n"
    "    }\n"
    "}\n";

/* Row softmax, one warp per row: max and sum reduced with shuffles. */
static const char KERNEL_SOFTMAX[] =
    "#line 1 \"models/softmax.dp\"\n"
    "__device__ __forceinline__ float warp_max(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float warp_sum(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    return v;\n"
    "}\n"
    "\n"
    "// out[row, :] = softmax(inp[row, :]) for rows of C floats\n"
    "extern \"C\" __global__ void softmax_rows(float *out, const float *inp, int N, int C) {\n"
    "    int warps_per_block = blockDim.x / 32;\n"
    "    int row = blockIdx.x * warps_per_block + threadIdx.x / 32;\n"
    "    int lane = threadIdx.x % 32;\n"
    "    if (row >= N)\n"
    "        return;\n"
    "    const float *x = inp + (long long)row * C;\n"
    "    float *y = out + (long long)row * C;\n"
    "    float maxval = __int_as_float(0xff800000); // -inf\n"
    "    for (int i = lane; i < C; i += 32)\n"
    "        maxval = fmaxf(maxval, x[i]);\n"
    "    maxval = warp_max(maxval);\n"
    "    float sum = 0.0f;\n"
    "    for (int i = lane; i < C; i += 32)\n"
    "        sum += expf(x[i] - maxval);\n"
    "    sum = warp_sum(sum);\n"
    "    float inv = 1.0f / sum;\n"
    "    for (int i = lane; i < C; i += 32)\n"
    "        y[i] = expf(x[i] - maxval) * inv;\n"
    "}\n";

/* bf16 in and out, f32 math, two elements per thread (__nv_bfloat162):
 * needs the toolkit's cuda_bf16.h. n is even. */
static const char KERNEL_BF16[] =
    "#include <cuda_bf16.h>\n"
    "#line 1 \"models/bf16.dp\"\n"
    "extern \"C\" __global__ void scale_add_bf16(__nv_bfloat16 *y, const __nv_bfloat16 *x,\n"
    "                                           const __nv_bfloat16 *r, float s, int n) {\n"
    "    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    __nv_bfloat162 xv = *(const __nv_bfloat162 *)(x + i);\n"
    "    __nv_bfloat162 rv = *(const __nv_bfloat162 *)(r + i);\n"
    "    float2 xf = __bfloat1622float2(xv);\n"
    "    float2 rf = __bfloat1622float2(rv);\n"
    "    float2 o = make_float2(xf.x * s + rf.x, xf.y * s + rf.y);\n"
    "    *(__nv_bfloat162 *)(y + i) = __float22bfloat162_rn(o);\n"
    "}\n";

/* Writes through a bad pointer: an illegal address, a sticky error. */
static const char KERNEL_FAULT[] =
    "extern \"C\" __global__ void write_bad(float *p) {\n"
    "    p[threadIdx.x] = 1.0f;\n"
    "}\n";

/* A compile error on .dp line 7. */
static const char KERNEL_BAD[] =
    "extern \"C\" __global__ void ok(float *x) { x[0] = 1.0f; }\n"
    "#line 7 \"models/x.dp\"\n"
    "extern \"C\" __global__ void bad(float *x) { x[0] = y; }\n";

/* A warning (unused variable) before the error: the message must still lead
 * with the error. */
static const char KERNEL_WARN_THEN_BAD[] =
    "#line 3 \"models/w.dp\"\n"
    "extern \"C\" __global__ void w(float *x) { int unused_variable; x[0] = 1.0f; }\n"
    "#line 9 \"models/w.dp\"\n"
    "extern \"C\" __global__ void bad2(float *x) { x[0] = undefined_name; }\n";

#endif
