/* tensor.c - host tensors, dtype conversion and the small string helpers the
 * file loaders share. */
#include "tensor.h"
#include "faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tensor data and both file formats are little-endian; dpc only runs on
 * little-endian hosts, so the loaders may copy bytes straight in. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dpc assumes a little-endian host"
#endif

size_t dpc_dtype_size(dpc_dtype dt) {
    switch (dt) {
    case DPC_F64:
    case DPC_I64: return 8;
    case DPC_F32:
    case DPC_I32: return 4;
    case DPC_F16:
    case DPC_BF16:
    case DPC_I16: return 2;
    case DPC_I8:
    case DPC_U8:
    case DPC_BOOL: return 1;
    }
    return 0;
}

const char *dpc_dtype_name(dpc_dtype dt) {
    switch (dt) {
    case DPC_F32: return "float32";
    case DPC_F64: return "float64";
    case DPC_F16: return "float16";
    case DPC_BF16: return "bfloat16";
    case DPC_I64: return "int64";
    case DPC_I32: return "int32";
    case DPC_I16: return "int16";
    case DPC_I8: return "int8";
    case DPC_U8: return "uint8";
    case DPC_BOOL: return "bool";
    }
    return "unknown";
}

void *dpc_aligned_alloc(size_t nbytes) {
    if (dpc_fault_alloc_should_fail())
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, nbytes ? nbytes : 1) != 0)
        return NULL;
    return p;
}

void dpc_shape_str(int rank, const int64_t *shape, char *out, size_t n) {
    if (!n)
        return;
    size_t pos = 0;
    out[0] = 0;
    for (int i = 0; i <= rank; i++) {
        char item[32];
        if (i == rank)
            snprintf(item, sizeof item, "%s]", rank ? "" : "[");
        else
            snprintf(item, sizeof item, "%s%lld", i ? ", " : "[", (long long)shape[i]);
        size_t il = strlen(item);
        if (pos + il + 1 > n) {
            /* Keep the string recognisably cut rather than silently short. */
            snprintf(out + (n > 4 ? n - 4 : 0), n > 4 ? 4 : n, "...");
            return;
        }
        memcpy(out + pos, item, il + 1);
        pos += il;
    }
}

void dpc_sig_shape_str(int rank, const int64_t *shape, const char *const *rtdim, char *out, size_t n) {
    size_t l = (size_t)snprintf(out, n, "[");
    for (int d = 0; d < rank && l < n; d++) {
        const char *sep = d ? ", " : "";
        int64_t v = shape[d];
        if (v > 0)
            l += (size_t)snprintf(out + l, n - l, "%s%lld", sep, (long long)v);
        else if (v == 0)
            l += (size_t)snprintf(out + l, n - l, "%s%s", sep, rtdim && rtdim[d] ? rtdim[d] : "?");
        else if (v == -1)
            l += (size_t)snprintf(out + l, n - l, "%sN", sep);
        else
            l += (size_t)snprintf(out + l, n - l, "%s%lldN", sep, (long long)-v);
    }
    if (l < n)
        snprintf(out + l, n - l, "]");
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0 if the
 * bytes there are not one (overlong, surrogate, > U+10FFFF, truncated). */
size_t dpc_utf8_seq(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return len;
}

bool dpc_bool_valid(const void *data, size_t n, size_t *bad_at) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        if (p[i] > 1) {
            *bad_at = i;
            return false;
        }
    return true;
}

bool dpc_utf8_valid(const char *s, size_t n, size_t *bad_at) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = dpc_utf8_seq(p + i, n - i);
        if (!l) {
            if (bad_at)
                *bad_at = i;
            return false;
        }
        i += l;
    }
    return true;
}

void dpc_quote(const char *s, size_t len, char *out, size_t n) {
    if (!n)
        return;
    const unsigned char *p = (const unsigned char *)s;
    size_t pos = 0, i = 0;
    const size_t max_in = 60;
    while (i < len && i < max_in) {
        char item[16];
        size_t l = dpc_utf8_seq(p + i, len - i);
        if (l > 1) {
            memcpy(item, p + i, l);
            item[l] = 0;
        } else if (p[i] == '\n' || p[i] == '\t' || p[i] == '\r' || p[i] == '\\' || p[i] == '\'') {
            static const char from[] = "\n\t\r\\'", to[] = "ntr\\'";
            snprintf(item, sizeof item, "\\%c", to[strchr(from, p[i]) - from]);
            l = 1;
        } else if (p[i] < 0x20 || p[i] >= 0x7f) {
            snprintf(item, sizeof item, "\\x%02x", p[i]);
            l = 1;
        } else {
            item[0] = (char)p[i];
            item[1] = 0;
            l = 1;
        }
        size_t il = strlen(item);
        if (pos + il + 4 > n)
            break;
        memcpy(out + pos, item, il);
        pos += il;
        i += l;
    }
    if (i < len && pos + 4 <= n) {
        memcpy(out + pos, "...", 3);
        pos += 3;
    }
    out[pos] = 0;
}

static dpc_status shape_bytes(dpc_dtype dt, int rank, const int64_t *shape, size_t *nbytes,
                              dpc_err *e) {
    char s[160];
    if (rank < 0 || rank > DPC_MAX_RANK)
        return dpc_errf(e, DPC_EUSAGE, "tensor rank %d is out of range (0..%d)", rank, DPC_MAX_RANK);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) {
            dpc_shape_str(rank, shape, s, sizeof s);
            return dpc_errf(e, DPC_EUSAGE, "negative dimension in tensor shape %s", s);
        }
        if (!dpc_mul_i64(numel, shape[i], &numel)) {
            dpc_shape_str(rank, shape, s, sizeof s);
            return dpc_errf(e, DPC_EUSER, "tensor shape %s has too many elements (size overflow)", s);
        }
    }
    if ((uint64_t)numel > SIZE_MAX || !dpc_mul_size((size_t)numel, dpc_dtype_size(dt), nbytes)) {
        dpc_shape_str(rank, shape, s, sizeof s);
        return dpc_errf(e, DPC_EUSER, "%s tensor of shape %s is too large (size overflow)",
                        dpc_dtype_name(dt), s);
    }
    return DPC_OK;
}

dpc_status dpc_tensor_new(dpc_dtype dt, int rank, const int64_t *shape, dpc_tensor **out, dpc_err *e) {
    *out = NULL;
    if ((unsigned)dt >= DPC_NUM_DTYPES)
        return dpc_errf(e, DPC_EUSAGE, "invalid dtype %d", (int)dt);
    size_t nbytes = 0;
    dpc_status st = shape_bytes(dt, rank, shape, &nbytes, e);
    if (st)
        return st;
    dpc_tensor *t = dpc_calloc(1, sizeof *t);
    void *data = t ? dpc_aligned_alloc(nbytes) : NULL;
    if (!data) {
        dpc_free(t);
        char s[160];
        dpc_shape_str(rank, shape, s, sizeof s);
        return dpc_errf(e, DPC_ENOMEM, "out of memory allocating %zu bytes for a %s tensor of shape %s",
                        nbytes, dpc_dtype_name(dt), s);
    }
    memset(data, 0, nbytes);
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->shape[i] = shape[i];
    t->data = data;
    t->nbytes = nbytes;
    *out = t;
    return DPC_OK;
}

void dpc_tensor_free(dpc_tensor *t) {
    if (!t)
        return;
    dpc_free(t->data);
    dpc_free(t);
}

int64_t dpc_tensor_numel(const dpc_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i]; /* cannot overflow: checked when t was made */
    return n;
}

/* ---- half precision ---------------------------------------------------- */

/* Rounds d to nearest-even in a 16-bit binary format with ebits exponent
 * and mbits fraction bits (f16: 5/10, bf16: 8/7). The value is taken as an
 * integer significand times a power of two and shifted right to the target
 * quantum, so normal, subnormal and overflowing results share one path. */
static uint16_t narrow16(double d, int ebits, int mbits) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    uint16_t sign = (uint16_t)((u >> 63) << 15);
    int exp = (int)((u >> 52) & 0x7ff);
    uint64_t mant = u & ((1ull << 52) - 1);
    const uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    if (exp == 0x7ff) {
        /* NaN keeps its top payload bits (as NumPy does) and stays a NaN. */
        uint16_t payload = (uint16_t)(mant >> (52 - mbits));
        return mant ? (uint16_t)(sign | inf | (payload ? payload : 1)) : (uint16_t)(sign | inf);
    }
    if (exp == 0 && mant == 0)
        return sign;
    const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
    uint64_t sig = exp ? mant | (1ull << 52) : mant;
    int e = exp ? exp - 1075 : -1074;                          /* d == sig * 2^e */
    int top = exp ? exp - 1023 : 63 - __builtin_clzll(mant) - 1074; /* floor(log2 |d|) */
    if (top > bias)
        return sign | inf;
    int ebase = top > emin ? top : emin; /* exponent of the result's binade */
    int shift = ebase - mbits - e;       /* > 0 for both 16-bit formats */
    uint64_t r = 0;
    if (shift < 64) { /* else |d| is below half the smallest subnormal */
        r = sig >> shift;
        uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
    }
    /* r carries the implicit bit (or is a subnormal fraction), so adding it
     * onto exponent field ebase+bias-1 also handles carries into the next
     * binade and from subnormal to normal. */
    uint64_t bits = ((uint64_t)(ebase + bias - 1) << mbits) + r;
    return bits >= inf ? (uint16_t)(sign | inf) : (uint16_t)(sign | bits);
}

uint16_t dpc_f64_to_f16(double d) { return narrow16(d, 5, 10); }
uint16_t dpc_f64_to_bf16(double d) { return narrow16(d, 8, 7); }
/* float -> double is exact, so these round once; except that the hardware
 * quiets a signalling NaN on the way, so NaNs are handled on the bits. */
static uint16_t narrow_f32_nan(float f, int ebits, int mbits) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t payload = (uint16_t)((u & 0x7fffffu) >> (23 - mbits));
    return (uint16_t)((u >> 31) << 15 | ((1u << ebits) - 1) << mbits | (payload ? payload : 1));
}
uint16_t dpc_f32_to_f16(float f) { return f != f ? narrow_f32_nan(f, 5, 10) : narrow16(f, 5, 10); }
uint16_t dpc_f32_to_bf16(float f) { return f != f ? narrow_f32_nan(f, 8, 7) : narrow16(f, 8, 7); }

float dpc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | (mant << 13);
    else if (exp)
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    else if (!mant)
        bits = sign;
    else { /* subnormal: normalise so the leading one lands on bit 10 */
        int shift = __builtin_clz(mant) - 21;
        bits = sign | ((uint32_t)(113 - shift) << 23) | (((mant << shift) & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float dpc_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void dpc_f32_narrow(const float *src, uint16_t *dst, size_t n, dpc_dtype dt) {
    if (dt == DPC_BF16)
        for (size_t i = 0; i < n; i++)
            dst[i] = dpc_f32_to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = dpc_f32_to_f16(src[i]);
}

void dpc_f32_widen(const uint16_t *src, float *dst, size_t n, dpc_dtype dt) {
    if (dt == DPC_BF16)
        for (size_t i = 0; i < n; i++)
            dst[i] = dpc_bf16_to_f32(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = dpc_f16_to_f32(src[i]);
}

/* ---- conversion --------------------------------------------------------- */

static bool is_float(dpc_dtype dt) {
    return dt == DPC_F32 || dt == DPC_F64 || dt == DPC_F16 || dt == DPC_BF16;
}

static double load_float(const void *data, dpc_dtype dt, size_t i) {
    switch (dt) {
    case DPC_F32: return ((const float *)data)[i];
    case DPC_F64: return ((const double *)data)[i];
    case DPC_F16: return dpc_f16_to_f32(((const uint16_t *)data)[i]);
    default: return dpc_bf16_to_f32(((const uint16_t *)data)[i]);
    }
}

static void store_float(void *data, dpc_dtype dt, size_t i, double v) {
    switch (dt) {
    case DPC_F32: ((float *)data)[i] = (float)v; break;
    case DPC_F64: ((double *)data)[i] = v; break;
    case DPC_F16: ((uint16_t *)data)[i] = dpc_f64_to_f16(v); break;
    default: ((uint16_t *)data)[i] = dpc_f64_to_bf16(v); break;
    }
}

static dpc_status convert_ints(const dpc_tensor *src, dpc_tensor *dst, size_t n, dpc_err *e) {
    if (src->dtype == DPC_I32) {
        const int32_t *s = src->data;
        int64_t *d = dst->data;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
        return DPC_OK;
    }
    const int64_t *s = src->data;
    int32_t *d = dst->data;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < INT32_MIN || s[i] > INT32_MAX)
            return dpc_errf(e, DPC_EUSER, "cannot convert int64 to int32: element %zu is %lld, out of range",
                            i, (long long)s[i]);
        d[i] = (int32_t)s[i];
    }
    return DPC_OK;
}

dpc_status dpc_tensor_convert(const dpc_tensor *src, dpc_dtype to, dpc_tensor **out, dpc_err *e) {
    *out = NULL;
    dpc_dtype from = src->dtype;
    bool ints = (from == DPC_I64 && to == DPC_I32) || (from == DPC_I32 && to == DPC_I64);
    if (from != to && !ints && !(is_float(from) && is_float(to)))
        return dpc_errf(e, DPC_EUSAGE, "cannot convert %s to %s", dpc_dtype_name(from),
                        dpc_dtype_name(to));
    size_t need = 0;
    dpc_status st = shape_bytes(from, src->rank, src->shape, &need, e);
    if (st)
        return st;
    if (need != src->nbytes) /* callers build tensors by hand (views of loaded files) */
        return dpc_errf(e, DPC_EUSAGE, "tensor holds %zu bytes but a %s tensor of its shape needs %zu", src->nbytes,
                        dpc_dtype_name(from), need);
    dpc_tensor *t = NULL;
    if ((st = dpc_tensor_new(to, src->rank, src->shape, &t, e)))
        return st;
    size_t n = (size_t)dpc_tensor_numel(src);
    if (from == to) {
        if (src->nbytes) /* an empty tensor's data may be NULL */
            memcpy(t->data, src->data, src->nbytes);
    }
    else if (ints)
        st = convert_ints(src, t, n, e);
    else
        for (size_t i = 0; i < n; i++)
            store_float(t->data, to, i, load_float(src->data, from, i));
    if (st) {
        dpc_tensor_free(t);
        return st;
    }
    *out = t;
    return DPC_OK;
}
