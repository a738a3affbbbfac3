/* test_io.c - unit tests for tensor.c, npy.c and base.c's files and
 * environment: round trips with exact values, and every .npy case of the
 * bad-input checklist (reference/bad-input-and-faults.md section 6, cases
 * 1-15), each checked for its status and a substring of its message. The
 * safetensors cases are test_safetensors.c. */
#define _GNU_SOURCE
#include "faults.h"
#include "npy.h"
#include "safetensors.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../check.h"
#include "io_check.h"

/* ---- tensor.c ----------------------------------------------------------- */

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_half_known(void) {
    CHECK(dpc_f32_to_f16(1.0f) == 0x3c00);
    CHECK(dpc_f32_to_f16(-2.0f) == 0xc000);
    CHECK(dpc_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(dpc_f32_to_f16(65519.99f) == 0x7bff);
    CHECK(dpc_f32_to_f16(65520.0f) == 0x7c00); /* the tie rounds to even: infinity */
    CHECK(dpc_f32_to_f16(INFINITY) == 0x7c00);
    CHECK(dpc_f32_to_f16(-0.0f) == 0x8000);
    CHECK(dpc_f32_to_f16(0x1p-24f) == 0x0001);     /* smallest subnormal */
    CHECK(dpc_f32_to_f16(0x1p-25f) == 0x0000);     /* half of it: tie to even */
    CHECK(dpc_f32_to_f16(0x1.000002p-25f) == 0x0001);
    CHECK(dpc_f32_to_f16(0x3p-25f) == 0x0002);     /* 1.5 subnormal quanta: tie to even 2 */
    CHECK(dpc_f32_to_f16(0x1p-14f) == 0x0400);     /* smallest normal */
    CHECK(dpc_f32_to_f16(0x1.ff8p-15f) == 0x03ff); /* largest subnormal */
    CHECK(dpc_f32_to_f16(0x1.ffcp-15f) == 0x0400); /* tie: up out of the subnormals */
    CHECK(dpc_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(dpc_f32_to_f16(1.0f + 0x3p-11f) == 0x3c02);
    CHECK(dpc_f32_to_f16(1e-10f) == 0);
    uint16_t n = dpc_f32_to_f16(NAN);
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff));
    /* Direct rounding from double: through float this would tie to 1.0. */
    CHECK(dpc_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40) == 0x3c01);
    CHECK(dpc_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40) == 0x3f81);
    CHECK(dpc_f64_to_f16(1e300) == 0x7c00 && dpc_f64_to_f16(-1e300) == 0xfc00);
    CHECK(dpc_f64_to_f16(4.9e-324) == 0 && dpc_f64_to_bf16(-4.9e-324) == 0x8000);
    CHECK(dpc_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(dpc_f32_to_bf16(3.4028235e38f) == 0x7f80);
    CHECK(dpc_f32_to_bf16(0x1p-133f) == 0x0001); /* smallest bf16 subnormal */
    CHECK(dpc_f16_to_f32(0x0001) == 0x1p-24f && dpc_f16_to_f32(0x03ff) == 0x1.ff8p-15f);
    CHECK(dpc_f16_to_f32(0xfbff) == -65504.0f && isinf(dpc_f16_to_f32(0x7c00)));
    CHECK(dpc_bf16_to_f32(0xc0a0) == -5.0f);
}

/* Every 16-bit pattern widens exactly and narrows back to itself (NaN
 * payloads included, signalling ones too). */
static void test_half_exhaustive(void) {
    int bad16 = 0, badbf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if (dpc_f32_to_f16(dpc_f16_to_f32((uint16_t)h)) != h)
            bad16++;
        float g = dpc_bf16_to_f32((uint16_t)h);
        if (fbits(g) != h << 16 || dpc_f32_to_bf16(g) != h)
            badbf++;
    }
    CHECK(bad16 == 0);
    CHECK(badbf == 0);
}

static void test_tensor_basics(void) {
    dpc_tensor *t = NULL;
    int64_t sh[3] = {2, 3, 4};
    EXPECT_OK(dpc_tensor_new(DPC_F32, 3, sh, &t, e));
    CHECK(t && t->nbytes == 96 && dpc_tensor_numel(t) == 24 && ((uintptr_t)t->data % 64) == 0);
    CHECK(t && ((float *)t->data)[23] == 0.0f);
    dpc_tensor_free(t);
    EXPECT_OK(dpc_tensor_new(DPC_I64, 0, NULL, &t, e));
    CHECK(t && t->nbytes == 8 && dpc_tensor_numel(t) == 1);
    dpc_tensor_free(t);
    int64_t z[2] = {0, 10};
    EXPECT_OK(dpc_tensor_new(DPC_F16, 2, z, &t, e));
    CHECK(t && t->nbytes == 0 && t->data != NULL && dpc_tensor_numel(t) == 0);
    dpc_tensor_free(t);
    int64_t big[2] = {1ll << 40, 1ll << 40};
    EXPECT_ERR(dpc_tensor_new(DPC_F32, 2, big, &t, e), DPC_EUSER, "size overflow");
    int64_t big2[2] = {1ll << 31, 1ll << 31}; /* 2^62 elements * 4 bytes */
    EXPECT_ERR(dpc_tensor_new(DPC_F32, 2, big2, &t, e), DPC_EUSER, "too large");
    int64_t neg[1] = {-1};
    EXPECT_ERR(dpc_tensor_new(DPC_F32, 1, neg, &t, e), DPC_EUSAGE, "negative dimension");
    EXPECT_ERR(dpc_tensor_new(DPC_F32, 9, sh, &t, e), DPC_EUSAGE, "rank 9");
    dpc_fault_arm_alloc(2);
    EXPECT_ERR(dpc_tensor_new(DPC_F32, 3, sh, &t, e), DPC_ENOMEM, "96 bytes");
    dpc_fault_arm_alloc(0);

    char s[64];
    dpc_shape_str(2, sh, s, sizeof s);
    CHECK(!strcmp(s, "[2, 3]"));
    dpc_shape_str(0, NULL, s, sizeof s);
    CHECK(!strcmp(s, "[]"));
    dpc_shape_str(3, sh, s, 7);
    CHECK(strlen(s) < 7 && strstr(s, "..."));
    dpc_quote("a\nb'\x01\xc3\xa9", 7, s, sizeof s);
    CHECK(!strcmp(s, "a\\nb\\'\\x01\xc3\xa9"));
    CHECK(!strcmp(dpc_dtype_name(DPC_BF16), "bfloat16") && dpc_dtype_size(DPC_I16) == 2);
}

static void test_convert(void) {
    int64_t sh[1] = {4};
    dpc_tensor *t, *u;
    EXPECT_OK(dpc_tensor_new(DPC_F32, 1, sh, &t, e));
    float v[4] = {1.0f, 65520.0f, 0x1p-25f, -3.140625f};
    memcpy(t->data, v, sizeof v);
    EXPECT_OK(dpc_tensor_convert(t, DPC_F16, &u, e));
    uint16_t *h = u->data;
    CHECK(h[0] == 0x3c00 && h[1] == 0x7c00 && h[2] == 0 && h[3] == 0xc248);
    dpc_tensor *w;
    EXPECT_OK(dpc_tensor_convert(u, DPC_F64, &w, e));
    CHECK(((double *)w->data)[3] == -3.140625 && isinf(((double *)w->data)[1]));
    dpc_tensor_free(w);
    EXPECT_OK(dpc_tensor_convert(u, DPC_BF16, &w, e));
    CHECK(((uint16_t *)w->data)[0] == 0x3f80 && ((uint16_t *)w->data)[3] == 0xc049);
    dpc_tensor_free(w);
    dpc_tensor_free(u);
    EXPECT_ERR(dpc_tensor_convert(t, DPC_I32, &u, e), DPC_EUSAGE, "cannot convert float32 to int32");
    t->nbytes = 12;
    EXPECT_ERR(dpc_tensor_convert(t, DPC_F16, &u, e), DPC_EUSAGE, "tensor holds 12 bytes but a float32 tensor");
    t->nbytes = 16;
    dpc_tensor_free(t);

    EXPECT_OK(dpc_tensor_new(DPC_I64, 1, sh, &t, e));
    int64_t iv[4] = {-5, 3000000000ll, 7, INT32_MIN};
    memcpy(t->data, iv, sizeof iv);
    EXPECT_ERR(dpc_tensor_convert(t, DPC_I32, &u, e), DPC_EUSER, "element 1 is 3000000000");
    ((int64_t *)t->data)[1] = INT32_MAX;
    EXPECT_OK(dpc_tensor_convert(t, DPC_I32, &u, e));
    int32_t *i32 = u->data;
    CHECK(i32[0] == -5 && i32[1] == INT32_MAX && i32[3] == INT32_MIN);
    EXPECT_OK(dpc_tensor_convert(u, DPC_I64, &w, e));
    CHECK(!memcmp(w->data, t->data, 32));
    dpc_tensor_free(w);
    dpc_tensor_free(u);
    EXPECT_OK(dpc_tensor_convert(t, DPC_I64, &u, e));
    CHECK(!memcmp(u->data, t->data, 32) && u->data != t->data);
    dpc_tensor_free(u);
    dpc_tensor_free(t);
}

/* ---- .npy ------------------------------------------------------------------ */

static void fill_pattern(dpc_tensor *t) {
    unsigned char *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++)
        p[i] = t->dtype == DPC_BOOL ? (unsigned char)(i % 3 == 0) : (unsigned char)(i * 37 + 11);
}

static void test_npy_roundtrip(void) {
    const dpc_dtype dts[] = {DPC_F32, DPC_F64, DPC_F16, DPC_I64, DPC_I32, DPC_I16, DPC_I8, DPC_U8, DPC_BOOL};
    const int64_t shapes[][8] = {{0}, {5}, {2, 3}, {0, 10}, {1, 2, 3, 1, 1, 2, 1, 2}};
    const int ranks[] = {0, 1, 2, 2, 8};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t s = 0; s < 5; s++) {
            dpc_tensor *t, *u = NULL;
            EXPECT_OK(dpc_tensor_new(dts[d], ranks[s], shapes[s], &t, e));
            fill_pattern(t);
            dpc_buf b;
            EXPECT_OK(dpc_npy_serialize(t, &b, e));
            /* numpy's layout: data starts on a 64-byte boundary after '\n'. */
            size_t hdr = (size_t)(unsigned char)b.data[8] | (size_t)(unsigned char)b.data[9] << 8;
            CHECK((10 + hdr) % 64 == 0 && b.data[10 + hdr - 1] == '\n' && b.len == 10 + hdr + t->nbytes);
            EXPECT_OK(dpc_npy_parse(b.data, b.len, &u, e));
            CHECK(u && u->dtype == t->dtype && u->rank == t->rank && u->nbytes == t->nbytes);
            CHECK(u && !memcmp(u->shape, t->shape, sizeof t->shape) && !memcmp(u->data, t->data, t->nbytes));
            dpc_buf_free(&b);
            dpc_tensor_free(t);
            dpc_tensor_free(u);
        }
}

/* A bool tensor with a byte other than 0 and 1 is not written (numpy
 * would read it back as a bool that is neither true nor false). */
static void test_npy_bool_writer(void) {
    int64_t n = 4;
    dpc_tensor *t;
    EXPECT_OK(dpc_tensor_new(DPC_BOOL, 1, &n, &t, e));
    memcpy(t->data, "\0\1\1\x80", 4);
    dpc_buf b;
    EXPECT_ERR(dpc_npy_serialize(t, &b, e), DPC_EUSAGE, "bool array holds byte 0x80 at element 3");
    CHECK(b.len == 0);
    char path[300];
    snprintf(path, sizeof path, "%s/bool.npy", tmpdir);
    EXPECT_ERR(dpc_npy_write(path, t, e), DPC_EUSAGE, "bool array holds byte 0x80 at element 3");
    CHECK(access(path, F_OK) != 0);
    ((unsigned char *)t->data)[3] = 0;
    EXPECT_OK(dpc_npy_serialize(t, &b, e));
    dpc_buf_free(&b);
    dpc_tensor_free(t);
}

/* The exact header text numpy 1.24 writes (growth padding included). */
static void test_npy_header_bytes(void) {
    int64_t sh[2] = {2, 3};
    dpc_tensor *t;
    EXPECT_OK(dpc_tensor_new(DPC_F32, 2, sh, &t, e));
    dpc_buf b;
    EXPECT_OK(dpc_npy_serialize(t, &b, e));
    const char *want = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }                    ";
    CHECK(b.len == 128 + 24 && !memcmp(b.data + 10, want, strlen(want)) && b.data[6] == 1);
    dpc_buf_free(&b);
    dpc_tensor_free(t);
    EXPECT_OK(dpc_tensor_new(DPC_BF16, 1, sh, &t, e));
    EXPECT_ERR(dpc_npy_serialize(t, &b, e), DPC_EUSAGE, "bfloat16 tensors cannot be stored in .npy");
    dpc_tensor_free(t);
}

static void test_npy_values(void) {
    dpc_tensor *t = NULL;
    float f[6] = {1, 2, 3, 4, 5, 6};
    /* Fortran order: column-major [[1,3,5],[2,4,6]] is C-order [1..6] read
     * by columns: element (i,j) at j*2+i. */
    EXPECT_OK(npy_parse_hdr("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", f, 24, &t, e));
    float want[6] = {1, 3, 5, 2, 4, 6};
    CHECK(t && t->rank == 2 && !memcmp(t->data, want, 24));
    dpc_tensor_free(t);
    /* Rank 3 Fortran: element (i,j,k) at i + 2j + 6k. */
    float g[24];
    for (int i = 0; i < 24; i++)
        g[i] = (float)i;
    EXPECT_OK(npy_parse_hdr("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4)}", g, 96, &t, e));
    int bad = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                bad += ((float *)t->data)[i * 12 + j * 4 + k] != (float)(i + 2 * j + 6 * k);
    CHECK(bad == 0);
    dpc_tensor_free(t);
    /* Big-endian: byte-swapped on load. */
    unsigned char be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0x00, 0, 0};
    EXPECT_OK(npy_parse_hdr("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be, 8, &t, e));
    CHECK(t && ((float *)t->data)[0] == 1.0f && ((float *)t->data)[1] == -2.0f);
    dpc_tensor_free(t);
    unsigned char be8[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};
    EXPECT_OK(npy_parse_hdr("{'descr': '>i8', 'fortran_order': True, 'shape': (1, 1), }", be8, 8, &t, e));
    CHECK(t && ((int64_t *)t->data)[0] == -2);
    dpc_tensor_free(t);
    /* Scalar and empty (case 15). */
    double d = -0.25;
    EXPECT_OK(npy_parse_hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", &d, 8, &t, e));
    CHECK(t && t->rank == 0 && t->nbytes == 8 && ((double *)t->data)[0] == -0.25);
    dpc_tensor_free(t);
    EXPECT_OK(npy_parse_hdr("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 10), }", NULL, 0, &t, e));
    CHECK(t && t->rank == 2 && t->shape[1] == 10 && t->nbytes == 0);
    dpc_tensor_free(t);
    /* Literal spellings Python accepts: u'', "", 3L, no trailing comma,
     * version 2.0 and 3.0 headers. */
    int64_t iv[3] = {7, 8, 9};
    EXPECT_OK(npy_parse_hdr("{u'descr': \"<i8\", 'shape': (3L,), 'fortran_order': False}  \n", iv, 24, &t, e));
    CHECK(t && t->dtype == DPC_I64 && ((int64_t *)t->data)[2] == 9);
    dpc_tensor_free(t);
    for (int major = 2; major <= 3; major++) {
        dpc_buf b;
        npy_image(&b, major, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }\n", "abc", 3);
        EXPECT_OK(dpc_npy_parse(b.data, b.len, &t, e));
        CHECK(t && t->dtype == DPC_U8 && !memcmp(t->data, "abc", 3));
        dpc_tensor_free(t);
        dpc_buf_free(&b);
    }
    unsigned char bools[3] = {0, 1, 1};
    EXPECT_OK(npy_parse_hdr("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3, &t, e));
    CHECK(t && t->dtype == DPC_BOOL);
    dpc_tensor_free(t);
}

static void test_npy_bad(void) {
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    float f2[2] = {1, 2};
    /* Case 12: magic, version, header length, header size, literal, keys. */
    EXPECT_ERR(npy_try_raw("\x93NUMPX\x01\x00\x00\x00", 10, e), DPC_EUSER, "bad magic");
    EXPECT_ERR(npy_try_raw("", 0, e), DPC_EUSER, "bad magic");
    EXPECT_ERR(npy_try_raw("\x93NUMPY\x01", 7, e), DPC_EUSER, "too short");
    EXPECT_ERR(npy_try_raw("\x93NUMPY\x04\x00\x10\x00{}", 12, e), DPC_EUSER, "unsupported .npy format version 4.0");
    EXPECT_ERR(npy_try_raw("\x93NUMPY\x01\x01\x02\x00{}", 12, e), DPC_EUSER, "version 1.1");
    EXPECT_ERR(npy_try_raw("\x93NUMPY\x01\x00\x50\x00{'descr'", 18, e), DPC_EUSER, "runs past the end of the file");
    EXPECT_ERR(npy_try_raw("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12, e), DPC_EUSER, "header is too large");
    {
        static char big[12 + 10001];
        memcpy(big, "\x93NUMPY\x02\x00\x11\x27\x00\x00", 12); /* 10001 */
        memset(big + 12, ' ', 10001);
        EXPECT_ERR(npy_try_raw(big, sizeof big, e), DPC_EUSER, "header is too large (10001 bytes, limit 10000)");
    }
    EXPECT_ERR(npy_try("[1, 2]\n", NULL, 0, e), DPC_EUSER, "not a Python dict literal");
    EXPECT_ERR(npy_try("", NULL, 0, e), DPC_EUSER, "not a Python dict literal");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'shape': (2,), }", f2, 8, e), DPC_EUSER, "missing key 'fortran_order'");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f2, 8, e), DPC_EUSER,
               "unexpected key 'x'");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", f2, 8, e),
               DPC_EUSER, "duplicate key 'descr'");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", f2, 8, e), DPC_EUSER,
               "unexpected text after");
    EXPECT_ERR(npy_try("{'descr': '<f4' 'fortran_order': False}", f2, 8, e), DPC_EUSER, "expected ',' or '}'");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", f2, 8, e), DPC_EUSER,
               "expected ',' or '}'");
    EXPECT_ERR(npy_try("{'descr' '<f4'}", f2, 8, e), DPC_EUSER, "expected ':'");
    EXPECT_ERR(npy_try("{'descr': '<f4\n', 'fortran_order': False, 'shape': (2,)}", f2, 8, e), DPC_EUSER,
               "unterminated string");
    EXPECT_ERR(npy_try("{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (2,)}", f2, 8, e), DPC_EUSER,
               "escape sequences");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", f2, 8, e), DPC_EUSER,
               "fortran_order must be True or False");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", f2, 8, e), DPC_EUSER,
               "shape must be a tuple");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", f2, 8, e), DPC_EUSER,
               "not a list");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}", f2, 8, e), DPC_EUSER,
               "tuple of integers");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}", f2, 8, e), DPC_EUSER,
               "leading zero");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", f2, 4, e),
               DPC_EUSER, "more than 8 dimensions");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", f2, 4, e),
               DPC_EUSER, "dimension is too large");
    EXPECT_ERR(npy_try("{'descr': <f4, 'fortran_order': False, 'shape': (2,)}", f2, 8, e), DPC_EUSER,
               "expected a string");
    /* Case 13: pickles, structured, sub-array, other kinds. */
    EXPECT_ERR(npy_try("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", f2, 8, e), DPC_EUSER,
               "pickled object arrays are refused");
    EXPECT_ERR(npy_try("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f2, 8, e), DPC_EUSER,
               "structured dtypes are not supported");
    EXPECT_ERR(npy_try("{'descr': ('<f4', (2,)), 'fortran_order': False, 'shape': (1,), }", f2, 8, e), DPC_EUSER,
               "sub-array dtypes are not supported");
    EXPECT_ERR(npy_try("{'descr': '|V8', 'fortran_order': False, 'shape': (1,), }", f2, 8, e), DPC_EUSER,
               "void dtypes are not supported");
    EXPECT_ERR(npy_try("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f2, 8, e), DPC_EUSER,
               "unsupported dtype descr '<c8'");
    EXPECT_ERR(npy_try("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", f2, 2, e), DPC_EUSER,
               "unsupported dtype descr '<u2'");
    EXPECT_ERR(npy_try("{'descr': '<U1\x01', 'fortran_order': False, 'shape': (1,), }", f2, 2, e), DPC_EUSER,
               "'<U1\\x01'");
    /* Case 15: short data, trailing bytes, negative dim, overflow. */
    EXPECT_OK(npy_try(ok, f2, 8, e));
    EXPECT_ERR(npy_try(ok, f2, 7, e), DPC_EUSER, "data is truncated: the header needs 8 bytes, the file has 7");
    EXPECT_ERR(npy_try(ok, "123456789", 9, e), DPC_EUSER, "1 unexpected bytes after the array data (refused");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", f2, 8, e), DPC_EUSER,
               "negative dimension -1");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", f2, 8, e),
               DPC_EUSER, "size overflow");
    EXPECT_ERR(npy_try("{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976, 8), }", f2, 8, e),
               DPC_EUSER, "size overflow");
    EXPECT_ERR(npy_try("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", f2, 8, e),
               DPC_EUSER, "data is truncated");
    unsigned char bad_bool[2] = {1, 2};
    EXPECT_ERR(npy_try("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", bad_bool, 2, e), DPC_EUSER,
               "bool array holds byte 0x02 at element 1");
}

static void test_npy_files(void) {
    char p[256], q[400];
    tmp_path(p, sizeof p, "x.npy");
    int64_t sh[2] = {3, 2};
    dpc_tensor *t, *u;
    EXPECT_OK(dpc_tensor_new(DPC_I32, 2, sh, &t, e));
    fill_pattern(t);
    EXPECT_OK(dpc_npy_write(p, t, e));
    EXPECT_OK(dpc_npy_read(p, &u, e));
    CHECK(u && !memcmp(u->data, t->data, t->nbytes));
    dpc_tensor_free(u);
    put_file(p, "\x93NUMPY\x09\x00", 8);
    snprintf(q, sizeof q, "%s: file too short", p);
    EXPECT_ERR(dpc_npy_read(p, &u, e), DPC_EUSER, q);
    tmp_path(p, sizeof p, "missing.npy");
    EXPECT_ERR(dpc_npy_read(p, &u, e), DPC_EUSER, "missing.npy");
    EXPECT_ERR(dpc_npy_read(tmpdir, &u, e), DPC_EUSER, "is a directory");
    tmp_path(p, sizeof p, "nodir/x.npy");
    EXPECT_ERR(dpc_npy_write(p, t, e), DPC_EIO, "nodir/x.npy");
    dpc_tensor_free(t);
}

static void test_npy_mutations(void) {
    int64_t sh[2] = {2, 3};
    dpc_tensor *t;
    EXPECT_OK(dpc_tensor_new(DPC_F32, 2, sh, &t, e));
    dpc_buf b;
    EXPECT_OK(dpc_npy_serialize(t, &b, e));
    int wrong = 0;
    unsigned char *m = malloc(b.len);
    static const unsigned char vals[] = {0, '\'', '(', ')', ',', ':', '{', '}', '-', '9', ' ', 'T', 0xff};
    for (size_t i = 0; i < b.len; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(m, b.data, b.len);
            m[i] = vals[v];
            dpc_err e = {0};
            dpc_status s = npy_try_raw(m, b.len, &e);
            wrong += s != DPC_OK && (s != DPC_EUSER || !e.msg[0]);
        }
    for (size_t cut = 0; cut < b.len; cut++) {
        dpc_err e = {0};
        wrong += npy_try_raw(b.data, cut, &e) != DPC_EUSER;
    }
    free(m);
    CHECK(wrong == 0);
    dpc_buf_free(&b);
    dpc_tensor_free(t);
}

/* The whole file at path equals s (NUL-terminated). */
static bool file_is(const char *path, const char *s) {
    char *d = NULL;
    size_t n = 0;
    dpc_err e;
    bool same = dpc_read_file(path, 1 << 20, &d, &n, &e) == DPC_OK && n == strlen(s) && !memcmp(d, s, n);
    free(d);
    return same;
}

/* Entries of tmpdir whose name contains ".tmp.": left-over temporaries. */
static int temp_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* dpc_write_files_atomic: a failure on the second file (injected ENOSPC)
 * changes neither file and leaves no temporary; success replaces both,
 * keeps a replaced file's mode, writes through /dev/null and refuses a
 * directory. */
static void test_write_files(void) {
    char a[256], b[256];
    tmp_path(a, sizeof a, "a.out");
    tmp_path(b, sizeof b, "b.out");
    put_file(a, "old a", 5);
    put_file(b, "old b", 5);
    chmod(a, 0640);
    const char *paths[] = {a, b};
    const void *data[] = {"new a", "new b"};
    size_t lens[] = {5, 5};
    dpc_fault_arm_io(2);
    EXPECT_ERR(dpc_write_files_atomic(2, paths, data, lens, e), DPC_EIO, "b.out");
    dpc_fault_arm_io(0);
    CHECK(file_is(a, "old a") && file_is(b, "old b") && temp_files() == 0);
    EXPECT_OK(dpc_write_files_atomic(2, paths, data, lens, e));
    struct stat st;
    CHECK(file_is(a, "new a") && file_is(b, "new b") && temp_files() == 0);
    CHECK(stat(a, &st) == 0 && (st.st_mode & 0777) == 0640);
    const char *dn[] = {"/dev/null", a};
    EXPECT_OK(dpc_write_files_atomic(2, dn, data, lens, e));
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode) && file_is(a, "new b"));
    const char *dir[] = {a, tmpdir};
    EXPECT_ERR(dpc_write_files_atomic(2, dir, data, lens, e), DPC_EUSER, "is a directory");
    CHECK(file_is(a, "new b") && temp_files() == 0);
    char link[256];
    tmp_path(link, sizeof link, "link.out");
    CHECK(symlink("a.out", link) == 0);
    EXPECT_OK(dpc_write_file_atomic(link, "via link", 8, e));
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode) && file_is(a, "via link"));
    CHECK(dpc_same_file(link, a) && !dpc_same_file(a, b));
    char c1[300], c2[300];
    snprintf(c1, sizeof c1, "%s/new.out", tmpdir);
    snprintf(c2, sizeof c2, "%s/./new.out", tmpdir);
    CHECK(dpc_same_file(c1, c2));
}

/* DPC_* environment variables: strict, never "abc" as 0 (dpc_env_long,
 * dpc_env_flag). */
static void test_env_vars(void) {
    static const char *const bad_ints[] = {"abc", "1x", " 1", "+1", "", "-", "0x10", "99999999999999999999", "17"};
    long v = 7;
    bool set = true, f = false;
    for (size_t i = 0; i < sizeof bad_ints / sizeof *bad_ints; i++) {
        setenv("DPC_TEST_INT", bad_ints[i], 1);
        if (!*bad_ints[i]) { /* empty: as unset */
            EXPECT_OK(dpc_env_long("DPC_TEST_INT", 0, 16, &v, &set, e));
            CHECK(!set && v == 7);
            continue;
        }
        EXPECT_ERR(dpc_env_long("DPC_TEST_INT", 0, 16, &v, &set, e), DPC_EUSAGE, "DPC_TEST_INT='");
        CHECK(v == 7);
    }
    setenv("DPC_TEST_INT", "-3", 1);
    EXPECT_OK(dpc_env_long("DPC_TEST_INT", -5, 16, &v, &set, e));
    CHECK(set && v == -3);
    setenv("DPC_TEST_INT", "16", 1);
    EXPECT_OK(dpc_env_long("DPC_TEST_INT", 0, 16, &v, &set, e));
    CHECK(set && v == 16);
    unsetenv("DPC_TEST_INT");
    EXPECT_OK(dpc_env_long("DPC_TEST_INT", 0, 16, &v, &set, e));
    CHECK(!set);
    setenv("DPC_TEST_FLAG", "off", 1);
    EXPECT_OK(dpc_env_flag("DPC_TEST_FLAG", true, &f, e));
    CHECK(!f);
    setenv("DPC_TEST_FLAG", "1", 1);
    EXPECT_OK(dpc_env_flag("DPC_TEST_FLAG", false, &f, e));
    CHECK(f);
    setenv("DPC_TEST_FLAG", "O", 1); /* a letter O, not a zero: once silently "on" */
    EXPECT_ERR(dpc_env_flag("DPC_TEST_FLAG", false, &f, e), DPC_EUSAGE, "DPC_TEST_FLAG='O' is not a flag");
    unsetenv("DPC_TEST_FLAG");
    EXPECT_OK(dpc_env_flag("DPC_TEST_FLAG", true, &f, e));
    CHECK(f);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_half_known();
    test_half_exhaustive();
    test_tensor_basics();
    test_convert();
    test_npy_roundtrip();
    test_npy_header_bytes();
    test_npy_bool_writer();
    test_npy_values();
    test_npy_bad();
    test_npy_files();
    test_npy_mutations();
    test_write_files();
    test_env_vars();
    return io_finish("test_io");
}
