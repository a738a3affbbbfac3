/* tensor.h - host tensors: a dtype, a shape of up to DPC_MAX_RANK dims and a
 * 64-byte aligned, owned, C-order (row-major) data block; plus the element
 * conversions the loaders and the CLI need.
 *
 * The host is assumed little-endian (checked at compile time in tensor.c):
 * data in a dpc_tensor is in host order, which is also the byte order of the
 * .npy and safetensors files dpc writes. */
#ifndef DPC_TENSOR_H
#define DPC_TENSOR_H

#include "base.h"

#define DPC_MAX_RANK 8

/* DPC_I16 comes last so that the other values keep the numbers the rest of
 * dpc was written against; safetensors files may hold I16 buffers. */
typedef enum dpc_dtype {
    DPC_F32,
    DPC_F64,
    DPC_F16,
    DPC_BF16,
    DPC_I64,
    DPC_I32,
    DPC_I8,
    DPC_U8,
    DPC_BOOL,
    DPC_I16,
} dpc_dtype;
#define DPC_NUM_DTYPES 10

typedef struct dpc_tensor {
    dpc_dtype dtype;
    int rank;
    int64_t shape[DPC_MAX_RANK];
    void *data; /* 64-byte aligned, owned; never NULL, even when nbytes is 0 */
    size_t nbytes;
} dpc_tensor;

/* Bytes per element (1 for bool). */
size_t dpc_dtype_size(dpc_dtype dt);
/* NumPy's name: "float32", "float64", "float16", "bfloat16", "int64", ... */
const char *dpc_dtype_name(dpc_dtype dt);

/* A zero-filled tensor. Rank 0..DPC_MAX_RANK, dims >= 0; the element count
 * and byte size are overflow-checked. shape may be NULL when rank is 0. */
dpc_status dpc_tensor_new(dpc_dtype dt, int rank, const int64_t *shape, dpc_tensor **out, dpc_err *e);
void dpc_tensor_free(dpc_tensor *t);
/* Product of the dims (1 for rank 0). */
int64_t dpc_tensor_numel(const dpc_tensor *t);

/* A new tensor holding src's values as dtype `to`. Supported: any pair of
 * float32/float64/float16/bfloat16 (narrowing rounds to nearest, ties to
 * even, overflow gives inf, NaN stays NaN), int64 <-> int32 (a value out of
 * int32 range is an error naming the element), and any dtype to itself. */
dpc_status dpc_tensor_convert(const dpc_tensor *src, dpc_dtype to, dpc_tensor **out, dpc_err *e);

/* Exact widening and correctly rounded (RNE) narrowing, bit patterns in
 * uint16_t. The double versions round once, directly from double (rounding
 * through float first would round twice and can be off by one ulp). */
float dpc_f16_to_f32(uint16_t h);
uint16_t dpc_f32_to_f16(float f);
float dpc_bf16_to_f32(uint16_t h);
uint16_t dpc_f32_to_bf16(float f);
uint16_t dpc_f64_to_f16(double d);
uint16_t dpc_f64_to_bf16(double d);
/* n floats to 16 bits (dt DPC_BF16 or DPC_F16) and back: the CUDA backend's
 * 16-bit storage narrows weights and inputs, widens outputs. */
void dpc_f32_narrow(const float *src, uint16_t *dst, size_t n, dpc_dtype dt);
void dpc_f32_widen(const uint16_t *src, float *dst, size_t n, dpc_dtype dt);

/* "[2, 3]", "[]" for rank 0; truncated with "..." if n is too small. */
void dpc_shape_str(int rank, const int64_t *shape, char *out, size_t n);
/* A program signature's shape as messages show it: "[N, 784]", "[2N, S]"
 * (a dim > 0 fixed, -1 the batch N, -k k times it, 0 the run-time dim named
 * rtdim[d], "?" when rtdim or its entry is NULL). Cut to fit n. */
void dpc_sig_shape_str(int rank, const int64_t *shape, const char *const *rtdim, char *out, size_t n);

/* A name from a file, made safe for a one-line message: control bytes and
 * quotes escaped (\n, \x01), cut after about 60 bytes with "...". */
void dpc_quote(const char *s, size_t len, char *out, size_t n);

/* Strict UTF-8 (no overlongs, surrogates or values past U+10FFFF).
 * dpc_utf8_seq: length of the valid sequence at p (0 if invalid). */
size_t dpc_utf8_seq(const unsigned char *p, size_t n);
bool dpc_utf8_valid(const char *s, size_t n, size_t *bad_at);
/* BOOL data holds only the bytes 0 and 1, as NumPy and PyTorch store it;
 * any other byte would read as true in one place and compare unequal to
 * true in another. False with the first bad byte's index in *bad_at. The
 * one rule for every reader and writer of bool tensors (.npy,
 * safetensors). */
bool dpc_bool_valid(const void *data, size_t n, size_t *bad_at);

/* 64-byte aligned allocation that fault injection can make fail; release
 * it with dpc_free. A request for 0 bytes still returns a unique pointer. */
void *dpc_aligned_alloc(size_t nbytes);

#endif
