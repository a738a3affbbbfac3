/* fuzz_serve.c - libFuzzer target for the request parser of `dpc serve`
 * (cli/serve_req.c: the KServe v2 JSON body and Triton's binary tensor
 * extension), without HTTP, and for the text helpers its error bodies go
 * through. Input: one flag byte (bits 0-1: which of four signatures the
 * request is parsed against; bit 2: an Inference-Header-Content-Length
 * follows as 4 little-endian bytes), then the body.
 * Must hold: a refused request has a one-line, valid UTF-8 message; an
 * accepted one has a tensor of forward's rank for every input, and its
 * tensors take at most 8 bytes per byte of body (nothing is allocated
 * before the body was counted); srv_utf8 and srv_echo give valid UTF-8
 * whatever they are fed, and srv_unescape never decodes a control byte. */
#include "serve_req.h"

#include <stdlib.h>
#include <string.h>

static srv_sig g_sigs[4];

static void add_input(srv_sig *s, const char *name, dpc_dtype dt, int rank, const int64_t *shape) {
    srv_input *t = &s->in[s->nin++];
    t->name = name;
    t->dtype = dt;
    t->rank = rank;
    for (int d = 0; d < rank; d++) {
        t->shape[d] = shape[d];
        t->rtdim[d] = shape[d] == 0 ? "S" : NULL;
    }
}

static void init_sigs(void) {
    static const int64_t mlp[] = {-1, 4}, ids[] = {-1, 0}, fixed[] = {2, 3}, twice[] = {-2, -2, 3};
    srv_sig *s = &g_sigs[0]; /* forward(x: [N, 4]) */
    s->name = "MLP", s->nout = 1, s->max_body = 1 << 20;
    add_input(s, "x", DPC_F32, 2, mlp);
    s = &g_sigs[1]; /* forward(ids: i64[N, S], mask: [N, S]) */
    s->name = "Bert", s->nout = 2, s->max_body = 1 << 20;
    add_input(s, "ids", DPC_I64, 2, ids);
    add_input(s, "mask", DPC_F32, 2, ids);
    s = &g_sigs[2]; /* no batch dim, and a scalar-shaped input */
    s->name = "Fixed", s->nout = 0, s->max_body = 1 << 20;
    add_input(s, "a", DPC_F32, 2, fixed);
    add_input(s, "b", DPC_I64, 0, fixed);
    s = &g_sigs[3]; /* batch multiples past dim 0, a tiny body limit */
    s->name = "Twice", s->nout = 3, s->max_body = 4096;
    add_input(s, "x", DPC_F32, 3, twice);
}

static void valid_text(const char *s) {
    if (!dpc_utf8_valid(s, strlen(s), NULL))
        abort();
}

static void check_parse(const srv_sig *sig, const char *body, size_t len, long hlen) {
    srv_req r;
    char err[DPC_ERR_MSG];
    err[0] = 0;
    if (!srv_req_parse(sig, body, len, hlen, &r, err, sizeof err)) {
        if (!err[0] || strchr(err, '\n'))
            abort();
        valid_text(err);
        srv_req_free(&r);
        return;
    }
    size_t bytes = 0;
    for (int i = 0; i < sig->nin; i++) {
        if (!r.in[i] || dpc_tensor_rank(r.in[i]) != sig->in[i].rank)
            abort();
        bytes += dpc_tensor_nbytes(r.in[i]);
    }
    if (bytes > 8 * len)
        abort();
    if (r.nkw < 0 || r.nkw > DPC_MAX_IO || r.nsel > DPC_MAX_IO)
        abort();
    srv_req_free(&r);
}

static void check_text(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1), *u = malloc(3 * size + 1), q[256];
    if (!s || !u)
        abort();
    memcpy(s, data, size);
    s[size] = 0;
    size_t n = strlen(s);
    srv_utf8(s, u, 3 * size + 1);
    valid_text(u);
    srv_utf8(s, q, 7); /* cut short: still whole characters */
    valid_text(q);
    srv_echo(s, n, q, sizeof q);
    valid_text(q);
    for (const char *p = q; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            abort();
    bool had_ctl = false;
    for (size_t i = 0; i < n; i++)
        had_ctl |= (unsigned char)s[i] < 0x20 || s[i] == 0x7f;
    size_t m = srv_unescape(s);
    if (m > n || strlen(s) != m)
        abort();
    for (size_t i = 0; i < m && !had_ctl; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            abort();
    free(s);
    free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_sigs[0].name)
        init_sigs();
    if (size < 1)
        return 0;
    unsigned flags = data[0];
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    long hlen = -1;
    if (flags & 4) {
        if (len < 4)
            return 0;
        hlen = (long)((uint32_t)body[0] | (uint32_t)body[1] << 8 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 24);
        body += 4;
        len -= 4;
    }
    /* the body in a buffer of exactly its size, so ASan sees any read past it */
    char *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    memcpy(copy, body, len);
    check_parse(&g_sigs[flags & 3], copy, len, hlen);
    free(copy);
    check_text(body, len);
    return 0;
}
