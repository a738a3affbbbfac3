/* npy.c - the .npy reader and writer; see npy.h for the policy. The header
 * is a Python dict literal; it is parsed by hand rather than "evaluated",
 * accepting only what numpy.save writes (and Python 2's 3L integers). */
#include "npy.h"

#include <stdio.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

typedef struct npy_hdr {
    dpc_dtype dt;
    bool swap;    /* big-endian data: byte-swap each element */
    bool fortran; /* column-major data: transpose */
    int rank;
    int64_t shape[DPC_MAX_RANK];
    bool have_descr, have_fortran, have_shape;
} npy_hdr;

/* Cursor over the header text; offsets in messages count from the start of
 * the file, which is what a hex dump shows. */
typedef struct lexer {
    const char *p, *end, *file;
    dpc_err *e;
} lexer;

static dpc_status lex_fail(lexer *lx, const char *what) {
    return dpc_errf(lx->e, DPC_EUSER, "malformed .npy header at byte %td: %s", lx->p - lx->file, what);
}

static void skip_ws(lexer *lx) {
    while (lx->p < lx->end && strchr(" \t\n\r\f\v", *lx->p) && *lx->p)
        lx->p++;
}

static int peek(lexer *lx) { return lx->p < lx->end ? (unsigned char)*lx->p : -1; }

static bool is_ident(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* A Python string literal: optional u prefix, '...' or "...", no escapes
 * (numpy never writes any, and keys and dtype codes never need them). */
static dpc_status lex_string(lexer *lx, const char **s, size_t *n) {
    if (peek(lx) == 'u' || peek(lx) == 'U')
        lx->p++;
    int q = peek(lx);
    if (q != '\'' && q != '"')
        return lex_fail(lx, "expected a string");
    const char *start = ++lx->p;
    while (lx->p < lx->end && *lx->p != q) {
        if (*lx->p == '\\')
            return lex_fail(lx, "escape sequences in header strings are not supported");
        if (*lx->p == '\n')
            break;
        lx->p++;
    }
    if (peek(lx) != q)
        return lex_fail(lx, "unterminated string");
    *s = start;
    *n = (size_t)(lx->p - start);
    lx->p++;
    return DPC_OK;
}

/* A Python int literal in decimal, with an optional sign (negative dims are
 * parsed so that they can be reported as such) and Python 2's L suffix. */
static dpc_status lex_int(lexer *lx, int64_t *v) {
    bool neg = false;
    if (peek(lx) == '-' || peek(lx) == '+')
        neg = *lx->p++ == '-';
    if (peek(lx) < '0' || peek(lx) > '9')
        return lex_fail(lx, "shape must be a tuple of integers");
    if (peek(lx) == '0' && lx->p + 1 < lx->end && lx->p[1] >= '0' && lx->p[1] <= '9')
        return lex_fail(lx, "integer with a leading zero");
    int64_t x = 0;
    while (peek(lx) >= '0' && peek(lx) <= '9') {
        if (!dpc_mul_i64(x, 10, &x) || !dpc_add_i64(x, *lx->p - '0', &x))
            return lex_fail(lx, "dimension is too large");
        lx->p++;
    }
    if (peek(lx) == 'L' || peek(lx) == 'l')
        lx->p++;
    if (is_ident(peek(lx)) || peek(lx) == '.')
        return lex_fail(lx, "shape must be a tuple of integers");
    *v = neg ? -x : x;
    return DPC_OK;
}

static dpc_status parse_shape(lexer *lx, npy_hdr *h) {
    if (peek(lx) == '[')
        return lex_fail(lx, "shape must be a tuple, not a list");
    if (peek(lx) != '(')
        return lex_fail(lx, "shape must be a tuple of integers");
    lx->p++;
    bool trailing_comma = false;
    h->rank = 0;
    for (skip_ws(lx); peek(lx) != ')'; skip_ws(lx)) {
        if (h->rank == DPC_MAX_RANK)
            return dpc_errf(lx->e, DPC_EUSER, "shape has more than %d dimensions (the maximum rank)",
                            DPC_MAX_RANK);
        int64_t d = 0;
        dpc_status st = lex_int(lx, &d);
        if (st)
            return st;
        if (d < 0)
            return dpc_errf(lx->e, DPC_EUSER, "negative dimension %lld in shape", (long long)d);
        h->shape[h->rank++] = d;
        skip_ws(lx);
        trailing_comma = peek(lx) == ',';
        if (trailing_comma)
            lx->p++;
        else if (peek(lx) != ')')
            return lex_fail(lx, "expected ',' or ')' in shape");
    }
    lx->p++;
    if (h->rank == 1 && !trailing_comma)
        return lex_fail(lx, "shape must be a tuple: '(n)' is an integer, '(n,)' a tuple");
    return DPC_OK;
}

static dpc_status parse_fortran(lexer *lx, npy_hdr *h) {
    const char *s = lx->p;
    while (is_ident(peek(lx)))
        lx->p++;
    size_t n = (size_t)(lx->p - s);
    if (n == 4 && !memcmp(s, "True", 4))
        h->fortran = true;
    else if (n == 5 && !memcmp(s, "False", 5))
        h->fortran = false;
    else {
        lx->p = s;
        return lex_fail(lx, "fortran_order must be True or False");
    }
    return DPC_OK;
}

/* Maps a dtype code such as '<f4' to a dtype. Kinds NumPy has but dpc does
 * not get a message saying which they are. */
static dpc_status map_descr(lexer *lx, const char *s, size_t n, npy_hdr *h) {
    char q[80];
    dpc_quote(s, n, q, sizeof q);
    char order = n && strchr("<>|=", s[0]) ? s[0] : 0;
    const char *code = order ? s + 1 : s;
    size_t cn = order ? n - 1 : n;
    if (cn >= 1 && code[0] == 'O')
        return dpc_errf(lx->e, DPC_EUSER, "pickled object arrays are refused (descr '%s')", q);
    if (cn >= 1 && code[0] == 'V')
        return dpc_errf(lx->e, DPC_EUSER, "structured and void dtypes are not supported (descr '%s')", q);
    static const struct {
        const char *code;
        dpc_dtype dt;
    } known[] = {{"f4", DPC_F32}, {"f8", DPC_F64}, {"f2", DPC_F16}, {"i8", DPC_I64}, {"i4", DPC_I32},
                 {"i2", DPC_I16}, {"i1", DPC_I8},  {"u1", DPC_U8},  {"b1", DPC_BOOL}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (cn == 2 && !memcmp(code, known[i].code, 2)) {
            h->dt = known[i].dt;
            h->swap = order == '>' && dpc_dtype_size(h->dt) > 1;
            h->have_descr = true;
            return DPC_OK;
        }
    }
    return dpc_errf(lx->e, DPC_EUSER,
                    "unsupported dtype descr '%s' (supported: <f4 <f8 <f2 <i8 <i4 <i2 |i1 |u1 |b1 "
                    "and big-endian forms)",
                    q);
}

static dpc_status parse_descr(lexer *lx, npy_hdr *h) {
    int c = peek(lx);
    if (c == '[' || c == '{')
        return dpc_errf(lx->e, DPC_EUSER, "structured dtypes are not supported (descr is a %s)",
                        c == '[' ? "list of fields" : "dict");
    if (c == '(')
        return dpc_errf(lx->e, DPC_EUSER, "sub-array dtypes are not supported (descr is a tuple)");
    const char *s;
    size_t n;
    dpc_status st = lex_string(lx, &s, &n);
    return st ? st : map_descr(lx, s, n, h);
}

static dpc_status parse_entry(lexer *lx, npy_hdr *h) {
    const char *k;
    size_t kn;
    dpc_status st = lex_string(lx, &k, &kn);
    if (st)
        return st;
    static const char *const keys[] = {"descr", "fortran_order", "shape"};
    bool *seen[] = {&h->have_descr, &h->have_fortran, &h->have_shape};
    int which = -1;
    for (int i = 0; i < 3; i++)
        if (kn == strlen(keys[i]) && !memcmp(k, keys[i], kn))
            which = i;
    char q[80];
    dpc_quote(k, kn, q, sizeof q);
    if (which < 0)
        return dpc_errf(lx->e, DPC_EUSER,
                        "unexpected key '%s' in .npy header (expected exactly descr, fortran_order, shape)", q);
    if (*seen[which])
        return dpc_errf(lx->e, DPC_EUSER, "duplicate key '%s' in .npy header", q);
    skip_ws(lx);
    if (peek(lx) != ':')
        return lex_fail(lx, "expected ':' after a key");
    lx->p++;
    skip_ws(lx);
    if (which == 0)
        return parse_descr(lx, h);
    *seen[which] = true;
    return which == 1 ? parse_fortran(lx, h) : parse_shape(lx, h);
}

/* The dict literal: { key: value, ... } with an optional trailing comma. */
static dpc_status parse_dict(lexer *lx, npy_hdr *h) {
    skip_ws(lx);
    if (peek(lx) != '{')
        return lex_fail(lx, "the header is not a Python dict literal");
    lx->p++;
    for (skip_ws(lx); peek(lx) != '}'; skip_ws(lx)) {
        dpc_status st = parse_entry(lx, h);
        if (st)
            return st;
        skip_ws(lx);
        if (peek(lx) == ',')
            lx->p++;
        else if (peek(lx) != '}')
            return lex_fail(lx, "expected ',' or '}'");
    }
    lx->p++;
    skip_ws(lx);
    if (lx->p != lx->end)
        return lex_fail(lx, "unexpected text after the header dict");
    static const char *const names[] = {"descr", "fortran_order", "shape"};
    bool have[] = {h->have_descr, h->have_fortran, h->have_shape};
    for (int i = 0; i < 3; i++)
        if (!have[i])
            return dpc_errf(lx->e, DPC_EUSER, ".npy header is missing key '%s'", names[i]);
    return DPC_OK;
}

/* Magic, version and header length; on success the header text lies at
 * [*hdr, *hdr + *hlen). */
static dpc_status parse_preamble(const unsigned char *b, size_t len, size_t *hdr, size_t *hlen,
                                 dpc_err *e) {
    if (len < 6 || memcmp(b, npy_magic, 6))
        return dpc_errf(e, DPC_EUSER, "not a .npy file (bad magic bytes)");
    if (len < 10)
        return dpc_errf(e, DPC_EUSER, "file too short for a .npy header (%zu bytes)", len);
    int major = b[6], minor = b[7];
    if (!((major == 1 || major == 2 || major == 3) && minor == 0))
        return dpc_errf(e, DPC_EUSER, "unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)",
                        major, minor);
    size_t n;
    if (major == 1) {
        n = (size_t)b[8] | (size_t)b[9] << 8;
        *hdr = 10;
    } else {
        if (len < 12)
            return dpc_errf(e, DPC_EUSER, "file too short for a .npy header (%zu bytes)", len);
        n = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        *hdr = 12;
    }
    if (n > DPC_NPY_MAX_HEADER)
        return dpc_errf(e, DPC_EUSER, ".npy header is too large (%zu bytes, limit %d)", n,
                        DPC_NPY_MAX_HEADER);
    if (n > len - *hdr)
        return dpc_errf(e, DPC_EUSER,
                        ".npy header length %zu runs past the end of the file (%zu bytes after the preamble)",
                        n, len - *hdr);
    *hlen = n;
    return DPC_OK;
}

static void swap_bytes(unsigned char *p, size_t n, size_t sz) {
    for (size_t i = 0; i + sz <= n; i += sz)
        for (size_t a = 0, z = sz - 1; a < z; a++, z--) {
            unsigned char c = p[i + a];
            p[i + a] = p[i + z];
            p[i + z] = c;
        }
}

/* Copies column-major src into the C-order tensor t: walks t in order with
 * an index counter and moves the column-major offset along with it. */
static void fortran_to_c(const unsigned char *src, dpc_tensor *t) {
    size_t sz = dpc_dtype_size(t->dtype), n = (size_t)dpc_tensor_numel(t);
    size_t fstride[DPC_MAX_RANK], idx[DPC_MAX_RANK] = {0}, off = 0;
    size_t s = 1;
    for (int k = 0; k < t->rank; k++) {
        fstride[k] = s;
        s *= (size_t)t->shape[k];
    }
    unsigned char *dst = t->data;
    for (size_t i = 0; i < n; i++) {
        memcpy(dst + i * sz, src + off * sz, sz);
        for (int k = t->rank - 1; k >= 0; k--) {
            off += fstride[k];
            if (++idx[k] < (size_t)t->shape[k])
                break;
            off -= fstride[k] * idx[k];
            idx[k] = 0;
        }
    }
}

/* A bool array read (code DPC_EUSER) or to be written (DPC_EUSAGE): only
 * bytes 0 and 1, never normalised silently. */
static dpc_status check_bool(const dpc_tensor *t, dpc_status code, dpc_err *e) {
    size_t i;
    if (t->dtype != DPC_BOOL || t->nbytes == 0 || dpc_bool_valid(t->data, t->nbytes, &i))
        return DPC_OK;
    return dpc_errf(e, code, "bool array holds byte 0x%02x at element %zu (only 0 and 1 are valid)",
                    ((const unsigned char *)t->data)[i], i);
}

/* Element count and byte size of the header's shape, overflow-checked. */
static dpc_status data_size(const npy_hdr *h, size_t *nbytes, dpc_err *e) {
    int64_t numel = 1;
    bool ok = true;
    for (int i = 0; i < h->rank && ok; i++)
        ok = dpc_mul_i64(numel, h->shape[i], &numel);
    if (!ok || (uint64_t)numel > SIZE_MAX || !dpc_mul_size((size_t)numel, dpc_dtype_size(h->dt), nbytes)) {
        char s[160];
        dpc_shape_str(h->rank, h->shape, s, sizeof s);
        return dpc_errf(e, DPC_EUSER, "shape %s has too many elements (size overflow)", s);
    }
    return DPC_OK;
}

dpc_status dpc_npy_parse(const void *buf, size_t len, dpc_tensor **out, dpc_err *e) {
    *out = NULL;
    const unsigned char *b = buf;
    size_t hdr = 0, hlen = 0, nbytes = 0;
    dpc_status st = parse_preamble(b, len, &hdr, &hlen, e);
    if (st)
        return st;
    npy_hdr h = {0};
    lexer lx = {(const char *)b + hdr, (const char *)b + hdr + hlen, (const char *)b, e};
    if ((st = parse_dict(&lx, &h)) || (st = data_size(&h, &nbytes, e)))
        return st;
    size_t have = len - hdr - hlen;
    if (have < nbytes)
        return dpc_errf(e, DPC_EUSER,
                        "data is truncated: the header needs %zu bytes, the file has %zu (file not fully written?)",
                        nbytes, have);
    if (have > nbytes)
        return dpc_errf(e, DPC_EUSER,
                        "%zu unexpected bytes after the array data (refused: the file must end where its data ends)",
                        have - nbytes);
    dpc_tensor *t;
    if ((st = dpc_tensor_new(h.dt, h.rank, h.shape, &t, e)))
        return st;
    const unsigned char *data = b + hdr + hlen;
    if (h.fortran)
        fortran_to_c(data, t);
    else
        memcpy(t->data, data, nbytes);
    if (h.swap)
        swap_bytes(t->data, t->nbytes, dpc_dtype_size(t->dtype));
    if ((st = check_bool(t, DPC_EUSER, e))) {
        dpc_tensor_free(t);
        return st;
    }
    *out = t;
    return DPC_OK;
}

/* dpc_npy_parse in the type dpc_parse_file takes. */
static dpc_status parse_npy(const void *buf, size_t len, void *out, dpc_err *e) {
    return dpc_npy_parse(buf, len, out, e);
}

dpc_status dpc_npy_read(const char *path, dpc_tensor **out, dpc_err *e) {
    *out = NULL;
    return dpc_parse_file(path, parse_npy, out, e);
}

static const char *npy_descr(dpc_dtype dt) {
    switch (dt) {
    case DPC_F32: return "<f4";
    case DPC_F64: return "<f8";
    case DPC_F16: return "<f2";
    case DPC_I64: return "<i8";
    case DPC_I32: return "<i4";
    case DPC_I16: return "<i2";
    case DPC_I8: return "|i1";
    case DPC_U8: return "|u1";
    case DPC_BOOL: return "|b1";
    case DPC_BF16: break;
    }
    return NULL;
}

/* The dict text exactly as numpy.format._write_array_header builds it:
 * sorted keys, repr() values, ", " after each, then spare spaces so that
 * the first axis can grow to 21 digits in place. */
static void header_text(const dpc_tensor *t, dpc_buf *b) {
    dpc_buf_printf(b, "{'descr': '%s', 'fortran_order': False, 'shape': (", npy_descr(t->dtype));
    for (int i = 0; i < t->rank; i++)
        dpc_buf_printf(b, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    dpc_buf_puts(b, t->rank == 1 ? ",), }" : "), }");
    if (t->rank > 0) {
        char first[24];
        int digits = snprintf(first, sizeof first, "%lld", (long long)t->shape[0]);
        for (int i = digits; i < 21; i++)
            dpc_buf_put(b, " ", 1);
    }
}

static dpc_status check_tensor(const dpc_tensor *t, dpc_err *e) {
    if ((unsigned)t->dtype >= DPC_NUM_DTYPES)
        return dpc_errf(e, DPC_EUSAGE, "invalid dtype %d", (int)t->dtype);
    if (!npy_descr(t->dtype))
        return dpc_errf(e, DPC_EUSAGE,
                        "%s tensors cannot be stored in .npy (NumPy has no such dtype); convert to float32 first",
                        dpc_dtype_name(t->dtype));
    npy_hdr h = {.dt = t->dtype, .rank = t->rank};
    if (t->rank < 0 || t->rank > DPC_MAX_RANK)
        return dpc_errf(e, DPC_EUSAGE, "tensor rank %d is out of range (0..%d)", t->rank, DPC_MAX_RANK);
    for (int i = 0; i < t->rank; i++) {
        if (t->shape[i] < 0)
            return dpc_errf(e, DPC_EUSAGE, "negative dimension in tensor shape");
        h.shape[i] = t->shape[i];
    }
    size_t nbytes = 0;
    dpc_status st = data_size(&h, &nbytes, e);
    if (!st && (nbytes != t->nbytes || (nbytes && !t->data)))
        return dpc_errf(e, DPC_EUSAGE, "tensor holds %zu bytes but its dtype and shape need %zu", t->nbytes,
                        nbytes);
    return st ? st : check_bool(t, DPC_EUSAGE, e);
}

dpc_status dpc_npy_serialize(const dpc_tensor *t, dpc_buf *out, dpc_err *e) {
    dpc_buf_init(out);
    dpc_status st = check_tensor(t, e);
    if (st)
        return st;
    dpc_buf text;
    dpc_buf_init(&text);
    header_text(t, &text);
    size_t hlen = text.len + 1; /* + the final '\n' */
    size_t pre = 10;
    size_t pad = 64 - (pre + hlen) % 64;
    if (hlen + pad > 65535) { /* version 2.0: 32-bit header length */
        pre = 12;
        pad = 64 - (pre + hlen) % 64;
    }
    size_t total = hlen + pad;
    unsigned char p[12];
    memcpy(p, npy_magic, 6);
    p[6] = pre == 10 ? 1 : 2;
    p[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        p[8 + i] = (unsigned char)(total >> (8 * i));
    dpc_buf_put(out, p, pre);
    dpc_buf_put(out, text.data, text.len);
    for (size_t i = 0; i < pad; i++)
        dpc_buf_put(out, " ", 1);
    dpc_buf_put(out, "\n", 1);
    if (t->nbytes) /* an empty tensor's data may be NULL */
        dpc_buf_put(out, t->data, t->nbytes);
    bool oom = text.oom || out->oom;
    dpc_buf_free(&text);
    if (oom) {
        dpc_buf_free(out);
        return dpc_errf(e, DPC_ENOMEM, "out of memory building a .npy image (%zu data bytes)", t->nbytes);
    }
    return DPC_OK;
}

dpc_status dpc_npy_write(const char *path, const dpc_tensor *t, dpc_err *e) {
    dpc_buf b;
    dpc_status st = dpc_npy_serialize(t, &b, e);
    return dpc_write_image(path, &b, st, e);
}
