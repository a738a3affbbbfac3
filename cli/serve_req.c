/* serve_req.c - the infer request parser of `dpc serve` and its text
 * helpers (serve_req.h). Order matters here: a request announces shapes,
 * and an 83-byte body may announce a 268 MB tensor, so nothing is
 * allocated for an input until its shape has been checked against
 * forward's and its element count against what the body really holds
 * (the JSON data array's length, or the binary extension's bytes). */
#include "serve_req.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dt_info {
    const char *name;
    size_t size;
} dt_info;
enum { DT_FP32, DT_FP16, DT_INT64, DT_INT32, DT_BOOL, DT_N };
static const dt_info DTS[DT_N] = {{"FP32", 4}, {"FP16", 2}, {"INT64", 8}, {"INT32", 4}, {"BOOL", 1}};

static int dt_of(const char *s) {
    for (int i = 0; s && i < DT_N; i++)
        if (strcmp(s, DTS[i].name) == 0)
            return i;
    return -1;
}

/* ---------------------------------------------------------------- text */

void srv_echo(const char *s, size_t len, char *out, size_t n) { dpc_quote(s ? s : "", s ? len : 0, out, n); }

/* Whether p[0..n) is the start of a UTF-8 sequence cut short by the end. */
static bool cut_short(const unsigned char *p, size_t n) {
    size_t need = p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3 : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
    if (!need || n >= need)
        return false;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return false;
    return true;
}

void srv_utf8(const char *s, char *out, size_t n) {
    static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), i = 0, o = 0;
    while (i < len) {
        size_t l = dpc_utf8_seq(p + i, len - i);
        if (!l && cut_short(p + i, len - i))
            break; /* a message truncated mid-character */
        size_t w = l ? l : sizeof repl - 1;
        if (o + w + 1 > n)
            break;
        memcpy(out + o, l ? s + i : repl, w);
        o += w;
        i += l ? l : 1;
    }
    out[o] = 0;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

size_t srv_unescape(char *s) {
    char *w = s;
    const char *r = s;
    while (*r) {
        int hi, lo;
        if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0) {
            unsigned c = (unsigned)(hi * 16 + lo);
            if (c >= 0x20 && c != 0x7f) {
                *w++ = (char)c;
                r += 3;
                continue;
            }
        }
        *w++ = *r++;
    }
    *w = 0;
    return (size_t)(w - s);
}

/* ------------------------------------------------------------ elements */

/* Leaves of a flat (or nested) JSON data array. */
static int64_t json_count(const cJSON *a) {
    int64_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) n += cJSON_IsArray(e) ? json_count(e) : 1;
    return n;
}

/* JSON data elements into dst (n of them, counted before) as the input's dtype. */
static bool json_elems(const cJSON *a, int dt, bool want_f32, void *dst, int64_t n, int64_t *k, char *err,
                       size_t errn) {
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (cJSON_IsArray(e)) {
            if (!json_elems(e, dt, want_f32, dst, n, k, err, errn))
                return false;
            continue;
        }
        double v;
        if (dt == DT_BOOL) {
            if (cJSON_IsBool(e))
                v = cJSON_IsTrue(e);
            else if (cJSON_IsNumber(e) && (e->valuedouble == 0 || e->valuedouble == 1))
                v = e->valuedouble;
            else {
                snprintf(err, errn, "BOOL data holds a value that is not true or false");
                return false;
            }
        } else if (cJSON_IsNumber(e)) {
            v = e->valuedouble;
            if ((dt == DT_INT64 || dt == DT_INT32) &&
                (v != floor(v) || fabs(v) > (dt == DT_INT32 ? 2147483647.0 : 9007199254740992.0))) {
                snprintf(err, errn, "%s data holds %g, not an integer in range", DTS[dt].name, v);
                return false;
            }
        } else {
            snprintf(err, errn, "data holds a value that is not a number");
            return false;
        }
        if (*k >= n) {
            snprintf(err, errn, "data holds more than %lld elements", (long long)n);
            return false; /* counted before: cannot happen */
        }
        if (want_f32)
            ((float *)dst)[*k] = (float)v;
        else
            ((int64_t *)dst)[*k] = (int64_t)v;
        (*k)++;
    }
    return true;
}

/* Binary data of datatype dt into the tensor's dtype. */
static void bin_elems(const unsigned char *src, int dt, bool want_f32, void *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        switch (dt) {
        case DT_FP32: {
            float f;
            memcpy(&f, src + 4 * i, 4);
            v = f;
            break;
        }
        case DT_FP16: {
            uint16_t h;
            float f;
            memcpy(&h, src + 2 * i, 2);
            dpc_f32_widen(&h, &f, 1, DPC_F16);
            v = f;
            break;
        }
        case DT_INT64: {
            int64_t q;
            memcpy(&q, src + 8 * i, 8);
            if (!want_f32) {
                ((int64_t *)dst)[i] = q;
                continue;
            }
            v = (double)q;
            break;
        }
        case DT_INT32: {
            int32_t q;
            memcpy(&q, src + 4 * i, 4);
            v = q;
            break;
        }
        default: v = src[i] != 0; break;
        }
        if (want_f32)
            ((float *)dst)[i] = (float)v;
        else
            ((int64_t *)dst)[i] = (int64_t)v;
    }
}

/* -------------------------------------------------------------- shapes */

/* Whether dims fit forward's shape for the input (the batcher's rule:
 * fixed dims equal, batch dims whole multiples of one row count). */
static bool fits_signature(const srv_input *si, const int64_t *dims, int rank) {
    if (rank != si->rank)
        return false;
    int64_t rows = -1;
    for (int d = 0; d < rank; d++) {
        int64_t want = si->shape[d];
        if (want > 0 && dims[d] != want)
            return false;
        if (want < 0) {
            if (dims[d] % -want != 0)
                return false;
            if (d == 0)
                rows = dims[d] / -want;
            else if (rows >= 0 && dims[d] != rows * -want)
                return false;
        }
    }
    return true;
}

/* The request's shape for input si: non-negative integer dims, forward's
 * shape, and within what a body of max_body bytes can carry (each element
 * takes at least one byte of it, JSON or binary). The bound is on the
 * product of the dims taken as at least 1, so that a zero-row request
 * cannot name a run-time dim of a billion either. */
static bool read_shape(const srv_sig *sig, const srv_input *si, const cJSON *shape, int64_t *dims, int *rank,
                       int64_t *numel, char *err, size_t errn) {
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > DPC_MAX_RANK) {
        snprintf(err, errn, "input '%s': \"shape\" must be an array of at most %d dims", si->name, DPC_MAX_RANK);
        return false;
    }
    *rank = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble != floor(d->valuedouble) ||
            d->valuedouble > 1e12) {
            snprintf(err, errn, "input '%s': shape holds a dim that is not a non-negative integer", si->name);
            return false;
        }
        dims[(*rank)++] = (int64_t)d->valuedouble;
    }
    if (!fits_signature(si, dims, *rank)) {
        char want[256], got[256];
        dpc_sig_shape_str(si->rank, si->shape, si->rtdim, want, sizeof want);
        dpc_shape_str(*rank, dims, got, sizeof got);
        snprintf(err, errn, "input '%s' must have shape %s, got %s", si->name, want, got);
        return false;
    }
    const int64_t budget = sig->max_body > 0 ? sig->max_body : 1;
    int64_t span = 1;
    *numel = 1;
    for (int k = 0; k < *rank; k++) {
        int64_t f = dims[k] ? dims[k] : 1;
        if (span > budget / f) {
            char got[256];
            dpc_shape_str(*rank, dims, got, sizeof got);
            snprintf(err, errn, "input '%s': shape %s is more than a body of at most %ld bytes can carry", si->name,
                     got, sig->max_body);
            return false;
        }
        span *= f;
        *numel *= dims[k];
    }
    return true;
}

/* ---------------------------------------------------------------- data */

typedef struct body_view {
    const char *p;
    size_t len;
    long header_len; /* -1: no binary part */
    size_t boff;     /* next input's binary data */
} body_view;

/* The tensor of input si from binary_data_size bytes of the body. */
static bool read_binary(const srv_input *si, const cJSON *bsz, int dt, const int64_t *dims, int rank,
                        int64_t numel, body_view *b, dpc_tensor **t, char *err, size_t errn) {
    if (!cJSON_IsNumber(bsz) || bsz->valuedouble < 0) {
        snprintf(err, errn, "input '%s': binary_data_size must be a non-negative number", si->name);
        return false;
    }
    size_t want = (size_t)numel * DTS[dt].size; /* numel is at most max_body */
    if ((double)want != bsz->valuedouble) {
        snprintf(err, errn, "input '%s': binary_data_size %.0f does not match shape and %s (%zu bytes)", si->name,
                 bsz->valuedouble, DTS[dt].name, want);
        return false;
    }
    if (b->header_len < 0 || want > b->len - b->boff) {
        snprintf(err, errn, "input '%s': %zu bytes of binary data missing after the JSON header", si->name, want);
        return false;
    }
    if (dpc_tensor_create(si->dtype, rank, dims, NULL, t) != DPC_OK) {
        snprintf(err, errn, "input '%s': %s", si->name, dpc_last_error());
        return false;
    }
    bin_elems((const unsigned char *)b->p + b->boff, dt, si->dtype == DPC_F32, dpc_tensor_data(*t), numel);
    b->boff += want;
    return true;
}

/* The tensor of input si from its JSON data array. */
static bool read_json(const srv_input *si, const cJSON *data, int dt, const int64_t *dims, int rank, int64_t numel,
                      dpc_tensor **t, char *err, size_t errn) {
    if (!cJSON_IsArray(data)) {
        snprintf(err, errn, "input '%s' has no \"data\" array (nor binary_data_size)", si->name);
        return false;
    }
    int64_t have = json_count(data);
    if (have != numel) {
        char sh[256];
        dpc_shape_str(rank, dims, sh, sizeof sh);
        snprintf(err, errn, "input '%s': shape %s needs %lld elements, data holds %lld", si->name, sh,
                 (long long)numel, (long long)have);
        return false;
    }
    if (dpc_tensor_create(si->dtype, rank, dims, NULL, t) != DPC_OK) {
        snprintf(err, errn, "input '%s': %s", si->name, dpc_last_error());
        return false;
    }
    int64_t k = 0;
    char tmp[512];
    if (!json_elems(data, dt, si->dtype == DPC_F32, dpc_tensor_data(*t), numel, &k, tmp, sizeof tmp)) {
        snprintf(err, errn, "input '%s': %s", si->name, tmp);
        return false;
    }
    return true;
}

static int find_input(const srv_sig *sig, const char *name) {
    for (int i = 0; name && i < sig->nin; i++)
        if (strcmp(sig->in[i].name, name) == 0)
            return i;
    return -1;
}

/* One element of "inputs": its name, datatype, shape, then its data. */
static bool read_input(const srv_sig *sig, const cJSON *it, bool *seen, body_view *b, srv_req *r, char *err,
                       size_t errn) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(it, "datatype");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(it, "parameters");
    if (!cJSON_IsString(nm)) {
        snprintf(err, errn, "an input has no \"name\"");
        return false;
    }
    int i = find_input(sig, nm->valuestring);
    if (i < 0) {
        char list[512] = "", q[256];
        for (int k = 0, l = 0; k < sig->nin && l < (int)sizeof list; k++)
            l += snprintf(list + l, sizeof list - (size_t)l, "%s%s", k ? ", " : "", sig->in[k].name);
        srv_echo(nm->valuestring, strlen(nm->valuestring), q, sizeof q);
        snprintf(err, errn, "unknown input '%s' (%s takes %s)", q, sig->name, list);
        return false;
    }
    const srv_input *si = &sig->in[i];
    if (seen[i]) {
        snprintf(err, errn, "input '%s' given twice", si->name);
        return false;
    }
    seen[i] = true;
    int dt = cJSON_IsString(dtype) ? dt_of(dtype->valuestring) : -1;
    if (dt < 0) {
        snprintf(err, errn, "input '%s': datatype must be one of FP32, FP16, INT64, INT32, BOOL", si->name);
        return false;
    }
    bool want_f32 = si->dtype == DPC_F32;
    if (want_f32 ? (dt == DT_INT64 || dt == DT_INT32) : (dt == DT_FP32 || dt == DT_FP16)) {
        snprintf(err, errn, "input '%s' is %s, got %s", si->name, want_f32 ? "FP32 (or FP16)" : "INT64 (or INT32)",
                 DTS[dt].name);
        return false;
    }
    int64_t dims[DPC_MAX_RANK], numel;
    int rank;
    if (!read_shape(sig, si, cJSON_GetObjectItemCaseSensitive(it, "shape"), dims, &rank, &numel, err, errn))
        return false;
    const cJSON *bsz = params ? cJSON_GetObjectItemCaseSensitive(params, "binary_data_size") : NULL;
    if (bsz)
        return read_binary(si, bsz, dt, dims, rank, numel, b, &r->in[i], err, errn);
    return read_json(si, cJSON_GetObjectItemCaseSensitive(it, "data"), dt, dims, rank, numel, &r->in[i], err, errn);
}

/* ------------------------------------------------- parameters, outputs */

static int output_index(const char *name) {
    if (!name || strncmp(name, "output", 6) != 0 || !name[6])
        return -1;
    char *end;
    long v = strtol(name + 6, &end, 10);
    if (*end || v < 0 || v >= DPC_MAX_IO || (name[6] == '0' && name[7]))
        return -1;
    return (int)v;
}

static bool param_true(const cJSON *params, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
    return v && (cJSON_IsTrue(v) || (cJSON_IsNumber(v) && v->valuedouble != 0));
}

/* Keyword scalars: the request's parameters, less the protocol's own. */
static bool read_params(srv_req *r, char *err, size_t errn) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(r->json, "parameters");
    if (params && !cJSON_IsObject(params)) {
        snprintf(err, errn, "\"parameters\" must be an object");
        return false;
    }
    r->bin_all = param_true(params, "binary_data_output");
    const cJSON *p;
    cJSON_ArrayForEach(p, params) {
        static const char *reserved[] = {"binary_data_output", "sequence_id", "sequence_start", "sequence_end",
                                         "priority", "timeout", "headers"};
        bool skip = false;
        for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++)
            skip |= strcmp(p->string, reserved[k]) == 0;
        if (skip)
            continue;
        if (r->nkw >= DPC_MAX_IO) {
            snprintf(err, errn, "too many parameters");
            return false;
        }
        if (!cJSON_IsNumber(p) && !cJSON_IsBool(p)) {
            char q[256];
            srv_echo(p->string, strlen(p->string), q, sizeof q);
            snprintf(err, errn, "parameter '%s' must be a number or a boolean", q);
            return false;
        }
        r->kw_names[r->nkw] = p->string;
        r->kw_values[r->nkw++] = cJSON_IsBool(p) ? cJSON_IsTrue(p) : p->valuedouble;
    }
    return true;
}

/* The outputs asked for, in order, and which of them come back binary. */
static bool read_outputs(const srv_sig *sig, srv_req *r, char *err, size_t errn) {
    r->nsel = -1;
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(r->json, "outputs");
    if (!outs)
        return true;
    if (!cJSON_IsArray(outs)) {
        snprintf(err, errn, "\"outputs\" must be an array");
        return false;
    }
    r->nsel = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, outs) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
        int j = cJSON_IsString(nm) ? output_index(nm->valuestring) : -1;
        if (j < 0 || (sig->nout > 0 && j >= sig->nout) || r->nsel >= DPC_MAX_IO) {
            char q[256];
            const char *s = cJSON_IsString(nm) ? nm->valuestring : "";
            srv_echo(s, strlen(s), q, sizeof q);
            snprintf(err, errn, "unknown output '%s' (%s returns output0..output%d)", q, sig->name, sig->nout - 1);
            return false;
        }
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "parameters");
        r->bin[r->nsel] = param_true(op, "binary_data") || (r->bin_all && !cJSON_GetObjectItem(op, "binary_data"));
        r->sel[r->nsel++] = j;
    }
    return true;
}

/* ------------------------------------------------------------- request */

/* Whether the JSON text escapes a NUL (\u0000) anywhere: cJSON would end
 * that string there, so "x\u0000y" would be taken for the input "x". A
 * backslash is only valid inside a string, so no string tracking is needed. */
static bool escapes_nul(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '\\') {
            if (s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0)
                return true;
            i++; /* the escaped character */
        }
    return false;
}

/* The JSON header: the whole body, or its first header_len bytes. */
static bool read_header(const char *body, size_t len, long header_len, srv_req *r, size_t *jlen, char *err,
                        size_t errn) {
    *jlen = len;
    if (header_len >= 0) {
        if ((size_t)header_len > len) {
            snprintf(err, errn, "Inference-Header-Content-Length %ld is larger than the body (%zu bytes)", header_len,
                     len);
            return false;
        }
        *jlen = (size_t)header_len;
    }
    if (escapes_nul(body, *jlen)) {
        snprintf(err, errn, "a string in the request holds \\u0000, which no name or value may");
        return false;
    }
    const char *endp = NULL;
    r->json = cJSON_ParseWithLengthOpts(body, *jlen, &endp, 0);
    if (!r->json || !cJSON_IsObject(r->json)) {
        size_t at = endp ? (size_t)(endp - body) : 0;
        snprintf(err, errn, "malformed JSON in the request body (near byte %zu)", at);
        return false;
    }
    return true;
}

bool srv_req_parse(const srv_sig *sig, const char *body, size_t len, long header_len, srv_req *r, char *err,
                   size_t errn) {
    memset(r, 0, sizeof *r);
    r->nsel = -1;
    if (!body)
        body = "", len = 0;
    body_view b = {body, len, header_len, 0};
    if (!read_header(body, len, header_len, r, &b.boff, err, errn))
        return false;
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(r->json, "inputs");
    if (!cJSON_IsArray(inputs)) {
        snprintf(err, errn, "the request has no \"inputs\" array");
        return false;
    }
    bool seen[DPC_MAX_IO] = {0};
    const cJSON *it;
    cJSON_ArrayForEach(it, inputs) {
        if (!read_input(sig, it, seen, &b, r, err, errn))
            return false;
    }
    if (b.boff != len) {
        snprintf(err, errn, "%zu bytes after the JSON header are not any input's binary data", len - b.boff);
        return false;
    }
    for (int i = 0; i < sig->nin; i++)
        if (!seen[i]) {
            snprintf(err, errn, "input '%s' is missing", sig->in[i].name);
            return false;
        }
    return read_params(r, err, errn) && read_outputs(sig, r, err, errn);
}

void srv_req_free(srv_req *r) {
    if (!r)
        return;
    for (int i = 0; i < DPC_MAX_IO; i++)
        dpc_tensor_free(r->in[i]);
    cJSON_Delete(r->json);
    memset(r, 0, sizeof *r);
}
