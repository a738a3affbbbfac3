/* test_safetensors.c - unit tests for safetensors.c: round trips with exact
 * values, and every safetensors case of the bad-input checklist
 * (reference/bad-input-and-faults.md section 6, cases 1-15), each checked
 * for its status and a substring of its message; and every allocation
 * failing in turn. Apart from test_io.c (tensors, .npy, files), with
 * which it shares io_check.h. */
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

/* ---- safetensors --------------------------------------------------------- */

/* Three tensors of mixed sizes plus an empty and a scalar, with metadata. */
static void st_sample(dpc_st_tensor *t, unsigned char *store) {
    static const char *names[5] = {"b.weight", "a.bias", "num_batches_tracked", "empty", "zz\xc3\xa9"};
    static const dpc_dtype dts[5] = {DPC_F32, DPC_F16, DPC_I64, DPC_BF16, DPC_BOOL};
    static const int ranks[5] = {2, 1, 0, 2, 1};
    static const int64_t shapes[5][2] = {{2, 3}, {3}, {0}, {0, 4}, {5}};
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].name = (char *)names[i];
        t[i].dtype = dts[i];
        t[i].rank = ranks[i];
        size_t n = 1;
        for (int k = 0; k < ranks[i]; k++) {
            t[i].shape[k] = shapes[i][k];
            n *= (size_t)shapes[i][k];
        }
        t[i].nbytes = n * dpc_dtype_size(dts[i]);
        t[i].data = store + off;
        for (size_t k = 0; k < t[i].nbytes; k++)
            store[off + k] = dts[i] == DPC_BOOL ? (unsigned char)(k & 1) : (unsigned char)(k * 29 + i);
        off += t[i].nbytes;
    }
}

static void test_st_roundtrip(void) {
    dpc_st_tensor t[5];
    unsigned char store[256];
    st_sample(t, store);
    const char *mk[2] = {"format", "author"}, *mv[2] = {"pt", "me \"quoted\"\n\x01"};
    dpc_buf b, b2;
    EXPECT_OK(dpc_st_serialize(t, 5, mk, mv, 2, &b, e));
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | (unsigned char)b.data[i];
    CHECK(n % 8 == 0 && b.data[8] == '{');
    const char *want = "{\"__metadata__\":{\"author\":\"me \\\"quoted\\\"\\n\\u0001\",\"format\":\"pt\"},\"a.bias\":";
    CHECK(!memcmp(b.data + 8, want, strlen(want)));
    /* Same bytes whatever the input order. */
    dpc_st_tensor r[5] = {t[4], t[2], t[0], t[3], t[1]};
    const char *mk2[2] = {"author", "format"}, *mv2[2] = {mv[1], mv[0]};
    EXPECT_OK(dpc_st_serialize(r, 5, mk2, mv2, 2, &b2, e));
    CHECK(b.len == b2.len && !memcmp(b.data, b2.data, b.len));
    dpc_buf_free(&b2);
    dpc_safetensors *st = NULL;
    EXPECT_OK(dpc_st_parse(b.data, b.len, &st, e));
    CHECK(st && st->n == 5 && st->nmeta == 2);
    CHECK(st && !strcmp(st->meta_keys[0], "author") && !strcmp(st->meta_vals[0], mv[1]));
    for (int i = 0; st && i < 5; i++) {
        const dpc_st_tensor *x = dpc_st_find(st, t[i].name);
        CHECK(x && x->dtype == t[i].dtype && x->rank == t[i].rank && x->nbytes == t[i].nbytes);
        CHECK(x && !memcmp(x->shape, t[i].shape, sizeof(int64_t) * (size_t)t[i].rank));
        CHECK(x && !memcmp(x->data, t[i].data, t[i].nbytes) && (uintptr_t)x->data % 64 == 0);
        CHECK(i == 0 || strcmp(st->t[i - 1].name, st->t[i].name) < 0);
    }
    CHECK(!dpc_st_find(st, "nope") && !dpc_st_find(st, "b.weigh"));
    dpc_st_free(st);
    dpc_buf_free(&b);
    /* An empty tensor may have no data pointer at all. */
    dpc_st_tensor z = {.name = "z", .dtype = DPC_F32, .rank = 1, .shape = {0}, .data = NULL, .nbytes = 0};
    EXPECT_OK(dpc_st_serialize(&z, 1, NULL, NULL, 0, &b, e));
    dpc_buf_free(&b);
    dpc_tensor zt = {.dtype = DPC_F32, .rank = 2, .shape = {3, 0}, .data = NULL, .nbytes = 0};
    EXPECT_OK(dpc_npy_serialize(&zt, &b, e));
    dpc_buf_free(&b);
    /* No tensors, no metadata: "{}" padded. */
    EXPECT_OK(dpc_st_serialize(NULL, 0, NULL, NULL, 0, &b, e));
    CHECK(b.len == 16 && !memcmp(b.data + 8, "{}      ", 8));
    EXPECT_OK(dpc_st_parse(b.data, b.len, &st, e));
    CHECK(st && st->n == 0 && !dpc_st_find(st, "x"));
    dpc_st_free(st);
    dpc_buf_free(&b);
}

static void test_st_writer_refuses(void) {
    dpc_st_tensor t[5];
    unsigned char store[256];
    st_sample(t, store);
    dpc_buf b;
    t[1].name = "b.weight";
    EXPECT_ERR(dpc_st_serialize(t, 5, NULL, NULL, 0, &b, e), DPC_EUSAGE, "tensor name 'b.weight' given twice");
    t[1].name = "__metadata__";
    EXPECT_ERR(dpc_st_serialize(t, 5, NULL, NULL, 0, &b, e), DPC_EUSAGE, "'__metadata__'");
    t[1].name = "\xff";
    EXPECT_ERR(dpc_st_serialize(t, 5, NULL, NULL, 0, &b, e), DPC_EUSAGE, "not valid UTF-8");
    st_sample(t, store);
    t[0].nbytes = 20;
    EXPECT_ERR(dpc_st_serialize(t, 5, NULL, NULL, 0, &b, e), DPC_EUSAGE, "does not match its dtype and shape");
    st_sample(t, store);
    ((unsigned char *)t[4].data)[2] = 2;
    EXPECT_ERR(dpc_st_serialize(t, 5, NULL, NULL, 0, &b, e), DPC_EUSAGE, "bool byte 0x02");
    st_sample(t, store);
    const char *mk[2] = {"k", "k"}, *mv[2] = {"1", "2"};
    EXPECT_ERR(dpc_st_serialize(t, 5, mk, mv, 2, &b, e), DPC_EUSAGE, "metadata key 'k' given twice");
}

/* The layout: tensors aligned to their element size, data start 8-aligned. */
static void test_st_layout(void) {
    dpc_st_tensor t[5];
    unsigned char store[256];
    st_sample(t, store);
    dpc_buf b;
    EXPECT_OK(dpc_st_serialize(t, 5, NULL, NULL, 0, &b, e));
    const char *j = b.data + 8;
    /* The I64 scalar (8-byte elements) comes first, then F32, then 2-byte
     * types by name (a.bias, then the empty BF16), then BOOL. */
    CHECK(strstr(j, "\"a.bias\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[32,38]}"));
    CHECK(strstr(j, "\"empty\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[38,38]}"));
    CHECK(strstr(j, "\"zz\xc3\xa9\":{\"dtype\":\"BOOL\",\"shape\":[5],\"data_offsets\":[38,43]}"));
    CHECK(strstr(j, "\"num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}"));
    CHECK(strstr(j, "\"b.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]}"));
    dpc_buf_free(&b);
}

static void test_st_good_edges(void) {
    /* Zero-size tensors may share an offset; rank 0 is fine; leading and
     * trailing JSON whitespace; UTF-8 and escaped names. */
    EXPECT_OK(st_try("  {\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                     "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                     "\"f\":{\"dtype\":\"F16\",\"shape\":[2,0],\"data_offsets\":[8,8]}}   ",
                     8, 0, e));
    dpc_buf b;
    st_image(&b, "{\"\\u00e9\\n\\ud83d\\ude00\":{\"data_offsets\":[0,2],\"shape\":[1],\"dtype\":\"I16\"}}", 2, 7);
    dpc_safetensors *st = NULL;
    EXPECT_OK(dpc_st_parse(b.data, b.len, &st, e));
    CHECK(st && st->n == 1 && !strcmp(st->t[0].name, "\xc3\xa9\n\xf0\x9f\x98\x80") &&
          ((int16_t *)st->t[0].data)[0] == 0x0707);
    dpc_st_free(st);
    dpc_buf_free(&b);
    /* Escapes decode exactly; __metadata__ may come anywhere and be empty. */
    st_image(&b, "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"__metadata__\":"
                 "{\"a\\/b\":\"\\\"\\\\\\b\\f\\r\\t\\u00ff\"},\"x\\\"y\":{\"dtype\":\"U8\","
                 "\"shape\":[],\"data_offsets\":[1,2]}}",
             2, 1);
    EXPECT_OK(dpc_st_parse(b.data, b.len, &st, e));
    CHECK(st && st->nmeta == 1 && !strcmp(st->meta_keys[0], "a/b") && !strcmp(st->meta_vals[0], "\"\\\b\f\r\t\xc3\xbf"));
    CHECK(st && dpc_st_find(st, "x\"y") && dpc_st_find(st, "t"));
    dpc_st_free(st);
    dpc_buf_free(&b);
    EXPECT_OK(st_try("{\"__metadata__\":{}}", 0, 0, e));
    /* Exactly 64 levels of nesting are allowed by the scanner (and then
     * refused as a header, for the right reason). */
    char deep[400];
    strcpy(deep, "{\"__metadata__\":");
    for (int i = 0; i < 63; i++)
        strcat(deep, "[");
    EXPECT_ERR(st_try(deep, 0, 0, e), DPC_EUSER, "unexpected end of the header");
}

static void test_st_bad_frame(void) {
    /* Cases 1-3. */
    EXPECT_ERR(st_try_raw("", 0, e), DPC_EUSER, "file too small for a safetensors header (0 bytes");
    EXPECT_ERR(st_try_raw("\x02\0\0\0\0\0\0", 7, e), DPC_EUSER, "file too small");
    EXPECT_ERR(st_try_raw("\x03\0\0\0\0\0\0\0{}", 10, e), DPC_EUSER, "header length 3 runs past the end of the file");
    EXPECT_ERR(st_try_raw("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10, e), DPC_EUSER,
               "header length 18446744073709551615 exceeds the limit");
    EXPECT_ERR(st_try_raw("\x00\xc2\xeb\x0b\0\0\0\0{}", 10, e), DPC_EUSER, "header length 200000000 exceeds");
    EXPECT_ERR(st_try_raw("\x00\xe1\xf5\x05\0\0\0\0{}", 10, e), DPC_EUSER, "header length 100000000 runs past");
    /* The JSON depth bomb: 10^5 brackets, refused at level 65. */
    size_t n = 100000;
    char *bomb = malloc(n + 8);
    memcpy(bomb, "{\"a\":", 5);
    memset(bomb + 5, '[', n - 5);
    bomb[n] = 0;
    EXPECT_ERR(st_try(bomb, 0, 0, e), DPC_EUSER, "nested deeper than 64 levels");
    memcpy(bomb, "{\"a\":", 5);
    for (size_t i = 5; i + 5 < n; i += 5)
        memcpy(bomb + i, "{\"a\":", 5);
    EXPECT_ERR(st_try(bomb, 0, 0, e), DPC_EUSER, "nested deeper than 64 levels");
    free(bomb);
    /* Case 4. */
    EXPECT_ERR(st_try("{\"a\xff\":{}}", 0, 0, e), DPC_EUSER, "header is not valid UTF-8 (byte 11)");
    EXPECT_ERR(st_try("{\"\xed\xa0\x80\":{}}", 0, 0, e), DPC_EUSER, "not valid UTF-8");
    EXPECT_ERR(st_try("{\"\xc0\xaf\":{}}", 0, 0, e), DPC_EUSER, "not valid UTF-8");
    EXPECT_ERR(st_try("hello", 0, 0, e), DPC_EUSER, "not a JSON object");
    EXPECT_ERR(st_try("[1]", 0, 0, e), DPC_EUSER, "not a JSON object");
    EXPECT_ERR(st_try("", 0, 0, e), DPC_EUSER, "unexpected end of the header");
    EXPECT_ERR(st_try("{\"a\" 1}", 0, 0, e), DPC_EUSER, "expected ':'");
    EXPECT_ERR(st_try("{\"a\":1,}", 0, 0, e), DPC_EUSER, "expected a string key");
    EXPECT_ERR(st_try("{\"a\":[1,]}", 0, 0, e), DPC_EUSER, "unexpected character");
    EXPECT_ERR(st_try("{\"a\":[1 2]}", 0, 0, e), DPC_EUSER, "expected ',' or ']'");
    EXPECT_ERR(st_try("{\"a\":tru}", 0, 0, e), DPC_EUSER, "unexpected character");
    EXPECT_ERR(st_try("{\"a\":\"x\ty\"}", 0, 0, e), DPC_EUSER, "control character in a string");
    EXPECT_ERR(st_try("{\"a\":\"\\q\"}", 0, 0, e), DPC_EUSER, "invalid escape");
    EXPECT_ERR(st_try("{\"a\":\"\\u12\"}", 0, 0, e), DPC_EUSER, "invalid \\u escape");
    EXPECT_ERR(st_try("{\"a\":\"abc", 0, 0, e), DPC_EUSER, "unterminated string");
    EXPECT_ERR(st_try("{} {}", 0, 0, e), DPC_EUSER, "unexpected text after the JSON object");
    EXPECT_ERR(st_try("{}\x01", 0, 0, e), DPC_EUSER, "unexpected text after");
    EXPECT_ERR(st_try("{\"__metadata__\":{\"a\":1}}", 0, 0, e), DPC_EUSER,
               "__metadata__ value for key 'a' is not a string");
    EXPECT_ERR(st_try("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0, 0, e), DPC_EUSER, "is not a string");
    EXPECT_ERR(st_try("{\"__metadata__\":[\"a\"]}", 0, 0, e), DPC_EUSER, "__metadata__ must be a JSON object");
    EXPECT_ERR(st_try("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, 0, e), DPC_EUSER, "key 'k' twice");
    EXPECT_ERR(st_try("{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, e), DPC_EUSER,
               "duplicate tensor name '__metadata__'");
}

#define T1(dt, shape, offs) "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" offs "}}"

static void test_st_bad_tensors(void) {
    /* Case 5: offsets. */
    EXPECT_ERR(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, 0, e), DPC_EUSER,
               "tensor 'a': data_offsets [8, 4] end before they begin");
    EXPECT_ERR(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                      12, 0, e),
               DPC_EUSER, "gap of 4 bytes before tensor 'b'");
    EXPECT_ERR(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                      8, 0, e),
               DPC_EUSER, "tensor 'b' overlaps tensor 'a'");
    EXPECT_ERR(st_try(T1("F32", "[2]", "[0,8]"), 7, 0, e), DPC_EUSER, "tensor 't': data_offsets end 8 is past the end of the data (7 bytes)");
    EXPECT_ERR(st_try(T1("F32", "[2]", "[0,8]"), 9, 0, e), DPC_EUSER, "1 trailing bytes after the last tensor");
    EXPECT_ERR(st_try("{}", 1, 0, e), DPC_EUSER, "1 trailing bytes");
    /* Case 6: numbers. */
    EXPECT_ERR(st_try(T1("F32", "[-1]", "[0,4]"), 4, 0, e), DPC_EUSER, "tensor 't': shape value -1 is out of range");
    EXPECT_ERR(st_try(T1("F32", "[1]", "[-4,0]"), 4, 0, e), DPC_EUSER, "data_offsets value -4 is out of range");
    EXPECT_ERR(st_try(T1("F32", "[1.5]", "[0,4]"), 4, 0, e), DPC_EUSER, "number '1.5' is not an integer");
    EXPECT_ERR(st_try(T1("F32", "[1]", "[0,4e0]"), 4, 0, e), DPC_EUSER, "number '4e0' is not an integer");
    EXPECT_ERR(st_try(T1("F32", "[1e3]", "[0,4]"), 4, 0, e), DPC_EUSER, "number '1e3' is not an integer");
    EXPECT_ERR(st_try(T1("F32", "[1.0]", "[0,4]"), 4, 0, e), DPC_EUSER, "not an integer");
    EXPECT_ERR(st_try(T1("F32", "[18446744073709551616]", "[0,4]"), 4, 0, e), DPC_EUSER,
               "shape value 18446744073709551616 is out of range");
    EXPECT_ERR(st_try(T1("F32", "[281474976710656]", "[0,4]"), 4, 0, e), DPC_EUSER,
               "shape value 281474976710656 is out of range");
    EXPECT_ERR(st_try(T1("U8", "[1]", "[0,281474976710656]"), 4, 0, e), DPC_EUSER, "out of range");
    EXPECT_ERR(st_try(T1("U8", "[281474976710655]", "[0,281474976710655]"), 4, 0, e), DPC_EUSER,
               "data_offsets end 281474976710655 is past the end");
    EXPECT_ERR(st_try(T1("F32", "[123456789012345678901234]", "[0,4]"), 4, 0, e), DPC_EUSER, "is too long");
    EXPECT_ERR(st_try(T1("F32", "[9007199254740993]", "[0,4]"), 4, 0, e), DPC_EUSER,
               "shape value 9007199254740993 is out of range"); /* read exactly, not through a double */
    EXPECT_ERR(st_try(T1("F32", "[-0]", "[0,4]"), 4, 0, e), DPC_EUSER, "shape value -0 is out of range");
    EXPECT_ERR(st_try(T1("F32", "[1]", "[0,4]") " x", 4, 0, e), DPC_EUSER, "unexpected text after the JSON object");
    EXPECT_ERR(st_try("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, 0, e), DPC_EUSER,
               "unexpected end of the header");
    EXPECT_ERR(st_try("{\"t\":{}}", 0, 0, e), DPC_EUSER, "tensor 't': missing 'dtype'");
    EXPECT_ERR(st_try("{\"t\":\"F32\"}", 0, 0, e), DPC_EUSER, "tensor 't': entry is not a JSON object");
    EXPECT_ERR(st_try("{\"t\":{\"shape\":null}}", 0, 0, e), DPC_EUSER, "tensor 't': shape must be an array");
    EXPECT_ERR(st_try(T1("F32", "[01]", "[0,4]"), 4, 0, e), DPC_EUSER, "leading zero");
    EXPECT_ERR(st_try(T1("F32", "[\"1\"]", "[0,4]"), 4, 0, e), DPC_EUSER, "shape must hold integers");
    EXPECT_ERR(st_try(T1("F32", "[true]", "[0,4]"), 4, 0, e), DPC_EUSER, "shape must hold integers");
    EXPECT_ERR(st_try(T1("F32", "1", "[0,4]"), 4, 0, e), DPC_EUSER, "shape must be an array");
    EXPECT_ERR(st_try(T1("F32", "[1]", "[0,4,8]"), 4, 0, e), DPC_EUSER, "data_offsets must be an array of at most 2");
    EXPECT_ERR(st_try(T1("F32", "[1]", "[4]"), 4, 0, e), DPC_EUSER, "data_offsets must be an array [begin, end]");
    EXPECT_ERR(st_try(T1("F32", "[1]", "{}"), 4, 0, e), DPC_EUSER, "data_offsets must be an array");
    EXPECT_ERR(st_try(T1("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), 4, 0, e), DPC_EUSER, "more than 8 elements");
    /* Case 7: size mismatch and overflow. */
    EXPECT_ERR(st_try(T1("F32", "[2,4]", "[0,24]"), 24, 0, e), DPC_EUSER,
               "tensor 't': size mismatch: data_offsets [0, 24] hold 24 bytes, F32 of shape [2, 4] needs 32");
    EXPECT_ERR(st_try(T1("F32", "[4294967296,4294967296,16]", "[0,4]"), 4, 0, e), DPC_EUSER, "size overflow");
    EXPECT_ERR(st_try(T1("F64", "[281474976710655,281474976710655]", "[0,4]"), 4, 0, e), DPC_EUSER, "size overflow");
    EXPECT_ERR(st_try(T1("F64", "[4611686018427387904]", "[0,4]"), 4, 0, e), DPC_EUSER, "out of range");
    /* Case 9: dtypes and BOOL bytes. */
    EXPECT_ERR(st_try(T1("F128", "[1]", "[0,16]"), 16, 0, e), DPC_EUSER, "unsupported dtype 'F128' for tensor 't'");
    EXPECT_ERR(st_try(T1("f32", "[1]", "[0,4]"), 4, 0, e), DPC_EUSER, "unsupported dtype 'f32' for tensor 't'");
    EXPECT_ERR(st_try(T1("F8_E4M3", "[1]", "[0,1]"), 1, 0, e), DPC_EUSER, "unsupported dtype 'F8_E4M3' for tensor 't'");
    EXPECT_ERR(st_try(T1("U16", "[1]", "[0,2]"), 2, 0, e), DPC_EUSER, "unsupported dtype 'U16'");
    EXPECT_ERR(st_try("{\"t\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0, e), DPC_EUSER,
               "dtype must be a string");
    EXPECT_OK(st_try(T1("BOOL", "[4]", "[0,4]"), 4, -1, e));
    EXPECT_ERR(st_try(T1("BOOL", "[4]", "[0,4]"), 4, 2, e), DPC_EUSER, "tensor 't': BOOL holds byte 0x02 at element 0");
    /* Case 10: duplicates, NUL, bad escapes. */
    EXPECT_ERR(st_try("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                      2, 0, e),
               DPC_EUSER, "duplicate tensor name 'a'");
    EXPECT_ERR(st_try("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                      2, 0, e),
               DPC_EUSER, "\\u0000 in a string");
    EXPECT_ERR(st_try("{\"\\udc80\":{}}", 0, 0, e), DPC_EUSER, "unpaired UTF-16 surrogate");
    EXPECT_ERR(st_try("{\"\\ud800x\":{}}", 0, 0, e), DPC_EUSER, "unpaired UTF-16 surrogate");
    EXPECT_ERR(st_try("{\"t\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 0, e),
               DPC_EUSER, "key 'dtype' appears twice");
    /* Entry shape. */
    EXPECT_ERR(st_try("{\"t\":[1]}", 0, 0, e), DPC_EUSER, "tensor 't': entry is not a JSON object");
    EXPECT_ERR(st_try("{\"t\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, 0, e), DPC_EUSER, "tensor 't': missing 'data_offsets'");
    EXPECT_ERR(st_try("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1, 0, e), DPC_EUSER,
               "tensor 't': unexpected key 'x'");
    EXPECT_ERR(st_try("{\"bad\\nname\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 0, e), DPC_EUSER,
               "tensor 'bad\\nname'");
}

/* Case 8: every truncation and every single-byte change of a valid file
 * either loads or fails cleanly (ASan/UBSan watch the rest). */
static void test_st_mutations(void) {
    dpc_st_tensor t[5];
    unsigned char store[256];
    st_sample(t, store);
    dpc_buf b;
    EXPECT_OK(dpc_st_serialize(t, 5, NULL, NULL, 0, &b, e));
    int ok = 0, bad = 0, wrong = 0;
    for (size_t cut = 0; cut < b.len; cut++) {
        dpc_err e = {0};
        dpc_status s = st_try_raw(b.data, cut, &e);
        wrong += s == DPC_OK || s != DPC_EUSER || !e.msg[0];
    }
    unsigned char *m = malloc(b.len);
    static const unsigned char vals[] = {0, 1, '"', '[', ']', '{', '}', ',', ':', '0', '9', '-', '.', 'e',
                                         ' ', 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < b.len; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(m, b.data, b.len);
            m[i] = vals[v];
            dpc_err e = {0};
            dpc_status s = st_try_raw(m, b.len, &e);
            if (s == DPC_OK)
                ok++;
            else if (s == DPC_EUSER && e.msg[0] && !strchr(e.msg, '\n'))
                bad++;
            else
                wrong++;
        }
    free(m);
    CHECK(wrong == 0);
    CHECK(ok > 0 && bad > 0);
    dpc_buf_free(&b);
}

/* Every allocation failing in turn: a clean ENOMEM (no leak, no crash), and
 * success once the counter runs past the last allocation. */
static void test_alloc_faults(void) {
    dpc_st_tensor t[5];
    unsigned char store[256];
    st_sample(t, store);
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    dpc_buf img;
    EXPECT_OK(dpc_st_serialize(t, 5, mk, mv, 1, &img, e));
    int bad = 0, okays = 0;
    for (long k = 1; k < 200; k++) {
        dpc_err e = {0};
        dpc_safetensors *st = NULL;
        dpc_fault_arm_alloc(k);
        dpc_status s = dpc_st_parse(img.data, img.len, &st, &e);
        dpc_fault_arm_alloc(0);
        bad += s != DPC_OK && s != DPC_ENOMEM;
        okays += s == DPC_OK;
        dpc_st_free(st);
        dpc_buf b;
        dpc_fault_arm_alloc(k);
        s = dpc_st_serialize(t, 5, mk, mv, 1, &b, &e);
        dpc_fault_arm_alloc(0);
        bad += s != DPC_OK && s != DPC_ENOMEM;
        if (!s)
            dpc_buf_free(&b);
        dpc_tensor *u = NULL;
        dpc_fault_arm_alloc(k);
        s = npy_try("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", store, 8, &e);
        dpc_fault_arm_alloc(0);
        bad += s != DPC_OK && s != DPC_ENOMEM;
        dpc_tensor_free(u);
    }
    CHECK(bad == 0 && okays > 0);
    dpc_buf_free(&img);
}

static void test_st_files(void) {
    char p[256], q[400];
    dpc_st_tensor t[5];
    unsigned char store[256];
    st_sample(t, store);
    tmp_path(p, sizeof p, "w.safetensors");
    EXPECT_OK(dpc_st_write(p, t, 5, NULL, NULL, 0, e));
    dpc_safetensors *st = NULL;
    EXPECT_OK(dpc_st_read(p, &st, e));
    CHECK(st && st->n == 5);
    dpc_st_free(st);
    put_file(p, "\x01\0\0\0\0\0\0\0[", 9);
    snprintf(q, sizeof q, "%s: invalid JSON in the header at byte 8: the header is not a JSON object", p);
    EXPECT_ERR(dpc_st_read(p, &st, e), DPC_EUSER, q);
    tmp_path(p, sizeof p, "nodir/w.safetensors");
    EXPECT_ERR(dpc_st_write(p, t, 5, NULL, NULL, 0, e), DPC_EIO, "nodir/w.safetensors");
    t[0].nbytes = 1;
    tmp_path(p, sizeof p, "w2.safetensors");
    snprintf(q, sizeof q, "%s: tensor 'b.weight'", p);
    EXPECT_ERR(dpc_st_write(p, t, 5, NULL, NULL, 0, e), DPC_EUSAGE, q);
    CHECK(access(p, F_OK) != 0);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_st_roundtrip();
    test_st_writer_refuses();
    test_st_layout();
    test_st_good_edges();
    test_st_bad_frame();
    test_st_bad_tensors();
    test_st_mutations();
    test_alloc_faults();
    test_st_files();
    return io_finish("test_safetensors");
}
