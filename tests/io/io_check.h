/* io_check.h - what the I/O tests share (test_io.c, test_safetensors.c):
 * EXPECT_ERR and EXPECT_OK, the builders of hand-made .npy and safetensors
 * images and the temporary directory the tests write into (made by each
 * program's main). Included after ../check.h. */
#ifndef DPC_TEST_IO_CHECK_H
#define DPC_TEST_IO_CHECK_H

#include "npy.h"
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The call must fail with `code` and a message containing `sub`. */
#define EXPECT_ERR(call, code, sub)                                                                          \
    do {                                                                                                     \
        dpc_err e_ = {0};                                                                                    \
        dpc_err *e = &e_;                                                                                    \
        dpc_status s_ = (call);                                                                              \
        checks++;                                                                                            \
        if (s_ != (code) || !strstr(e_.msg, (sub)) || strchr(e_.msg, '\n')) {                               \
            failures++;                                                                                      \
            fprintf(stderr, "%s:%d: expected %s containing \"%s\", got %s: \"%s\"\n", __FILE__, __LINE__,   \
                    dpc_status_name(code), (sub), dpc_status_name(s_), e_.msg);                              \
        }                                                                                                    \
    } while (0)

#define EXPECT_OK(call)                                                                                      \
    do {                                                                                                     \
        dpc_err e_ = {0};                                                                                    \
        dpc_err *e = &e_;                                                                                    \
        dpc_status s_ = (call);                                                                              \
        checks++;                                                                                            \
        if (s_ != DPC_OK) {                                                                                  \
            failures++;                                                                                      \
            fprintf(stderr, "%s:%d: expected success, got %s: \"%s\"\n", __FILE__, __LINE__,                \
                    dpc_status_name(s_), e_.msg);                                                            \
        }                                                                                                    \
    } while (0)

/* ---- builders for hand-made files ---------------------------------------- */

/* A .npy image: magic, version, the header text as given (no padding added
 * unless pad), then dlen bytes of data. */
static inline void npy_image(dpc_buf *b, int major, const char *hdr, const void *data, size_t dlen) {
    dpc_buf_init(b);
    unsigned char pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0};
    size_t hl = strlen(hdr);
    for (int i = 0; i < (major == 1 ? 2 : 4); i++)
        pre[8 + i] = (unsigned char)(hl >> (8 * i));
    dpc_buf_put(b, pre, major == 1 ? 10 : 12);
    dpc_buf_put(b, hdr, hl);
    if (dlen)
        dpc_buf_put(b, data, dlen);
}

static inline dpc_status npy_parse_hdr(const char *hdr, const void *data, size_t dlen, dpc_tensor **t, dpc_err *e) {
    dpc_buf b;
    npy_image(&b, 1, hdr, data, dlen);
    dpc_status s = dpc_npy_parse(b.data, b.len, t, e);
    dpc_buf_free(&b);
    return s;
}

/* Parses and frees; for expectations on failures. */
static inline dpc_status npy_try(const char *hdr, const void *data, size_t dlen, dpc_err *e) {
    dpc_tensor *t = NULL;
    dpc_status s = npy_parse_hdr(hdr, data, dlen, &t, e);
    dpc_tensor_free(t);
    return s;
}

static inline dpc_status npy_try_raw(const void *buf, size_t len, dpc_err *e) {
    dpc_tensor *t = NULL;
    dpc_status s = dpc_npy_parse(buf, len, &t, e);
    dpc_tensor_free(t);
    return s;
}

/* A safetensors image: the JSON header as given, then dlen data bytes
 * (0, 1, 2, ... mod 2, so that BOOL data is valid unless fill says). */
static inline void st_image(dpc_buf *b, const char *json, size_t dlen, int fill) {
    dpc_buf_init(b);
    size_t n = strlen(json);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)n >> (8 * i));
    dpc_buf_put(b, len8, 8);
    dpc_buf_put(b, json, n);
    for (size_t i = 0; i < dlen; i++) {
        unsigned char c = (unsigned char)(fill >= 0 ? fill : (int)(i % 2));
        dpc_buf_put(b, &c, 1);
    }
}

static inline dpc_status st_try(const char *json, size_t dlen, int fill, dpc_err *e) {
    dpc_buf b;
    st_image(&b, json, dlen, fill);
    dpc_safetensors *st = NULL;
    dpc_status s = dpc_st_parse(b.data, b.len, &st, e);
    dpc_st_free(st);
    dpc_buf_free(&b);
    return s;
}

static inline dpc_status st_try_raw(const void *buf, size_t len, dpc_err *e) {
    dpc_safetensors *st = NULL;
    dpc_status s = dpc_st_parse(buf, len, &st, e);
    dpc_st_free(st);
    return s;
}

static char tmpdir[] = "/tmp/dpc_test_io_XXXXXX";

static inline void tmp_path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", tmpdir, name); }

/* The end of a test program: tmpdir removed, the counts printed, the exit
 * status (1 on any failure). */
static inline int io_finish(const char *prog) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    printf("%s: %d checks, %d failures\n", prog, checks, failures);
    return failures ? 1 : 0;
}

static inline void put_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "cannot write test file %s\n", path);
        exit(2);
    }
    fclose(f);
}

#endif
