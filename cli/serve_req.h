/* serve_req.h - the request side of `dpc serve` without HTTP (cli/serve_req.c):
 * a KServe v2 infer body (JSON, with Triton's binary tensor extension) into
 * input tensors checked against forward's signature, keyword scalars and
 * the outputs asked for; and the text helpers that keep every error body
 * valid UTF-8. cli/serve.c feeds it what clients send, tests/fuzz/fuzz_serve.c
 * feeds it anything. */
#ifndef DPC_CLI_SERVE_REQ_H
#define DPC_CLI_SERVE_REQ_H

#include "dpc_compile.h" /* DPC_MAX_IO; internal headers before dpc.h, which then skips their types */
#include "tensor.h"

#include "dpc.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct srv_input {
    const char *name;
    dpc_dtype dtype; /* DPC_F32 or DPC_I64 */
    int rank;
    /* dpc_program_input's: > 0 fixed, -k k times the batch, 0 a run-time dim */
    int64_t shape[DPC_MAX_RANK];
    const char *rtdim[DPC_MAX_RANK]; /* the run-time dim's name ("S"), or NULL */
} srv_input;

/* What a request is checked against: forward's tensor inputs and the
 * server's body limit. */
typedef struct srv_sig {
    const char *name; /* the model's (its entry module) */
    int nin, nout;
    srv_input in[DPC_MAX_IO];
    long max_body; /* bytes */
} srv_sig;

typedef struct srv_req {
    cJSON *json;
    dpc_tensor *in[DPC_MAX_IO]; /* forward's order */
    const char *kw_names[DPC_MAX_IO]; /* point into json */
    double kw_values[DPC_MAX_IO];
    int nkw;
    int sel[DPC_MAX_IO];  /* outputs to return, in order */
    bool bin[DPC_MAX_IO]; /* binary for sel[i] */
    int nsel;             /* -1: all */
    bool bin_all;
} srv_req;

/* Parses body[0..len) into r (zeroed first; srv_req_free it either way).
 * header_len: Inference-Header-Content-Length, -1 when absent. Every
 * shape is checked against sig and every element count against the bytes
 * of the body before a tensor is allocated, so a request never holds more
 * than a few times its body. false with a one-line, valid UTF-8 message
 * in err (a 400). */
bool srv_req_parse(const srv_sig *sig, const char *body, size_t len, long header_len, srv_req *r, char *err,
                   size_t errn);
void srv_req_free(srv_req *r);

/* Bytes from a request (a name, a path) for an error message: valid UTF-8
 * cut at a character boundary (about 60 bytes, then "..."), control and
 * invalid bytes escaped (\x00). */
void srv_echo(const char *s, size_t len, char *out, size_t n);
/* s into out (n > 0 bytes) as valid UTF-8: an invalid byte becomes U+FFFD,
 * a sequence cut short at the end of s is dropped, and out is cut at a
 * character boundary. */
void srv_utf8(const char *s, char *out, size_t n);
/* libmicrohttpd's URL unescaper (MHD_OPTION_UNESCAPE_CALLBACK): %HH is
 * decoded except into a control byte (below 0x20, or 0x7f), which stays
 * escaped: "MLP%00" is then a name no model has, where decoded it would
 * end the C string at "MLP". Returns the new length. */
size_t srv_unescape(char *s);

#endif
