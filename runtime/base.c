/* base.c - errors, buffers, atomic file writes, Python float formatting and
 * hashing: the plumbing the compiler and the runtime share. */
#include "base.h"
#include "faults.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

dpc_status dpc_errf(dpc_err *e, dpc_status code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

void dpc_err_prefix(dpc_err *e, const char *fmt, ...) {
    if (!e)
        return;
    char pre[256], old[DPC_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(pre);
    if (n >= sizeof e->msg)
        n = sizeof e->msg - 1;
    memcpy(e->msg, pre, n);
    size_t rest = strnlen(old, sizeof old - 1);
    if (rest > sizeof e->msg - 1 - n)
        rest = sizeof e->msg - 1 - n;
    memcpy(e->msg + n, old, rest);
    e->msg[n + rest] = 0;
}

const char *dpc_status_name(dpc_status s) {
    switch (s) {
    case DPC_OK: return "ok";
    case DPC_EUSER: return "user error";
    case DPC_EUSAGE: return "usage error";
    case DPC_ENOMEM: return "out of memory";
    case DPC_EIO: return "i/o error";
    case DPC_EDEVICE: return "device error";
    case DPC_EINTERNAL: return "internal error";
    }
    return "unknown";
}

void *dpc_malloc(size_t n) {
    if (dpc_fault_alloc_should_fail())
        return NULL;
    return malloc(n ? n : 1);
}
void *dpc_calloc(size_t n, size_t size) {
    if (dpc_fault_alloc_should_fail())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}
void *dpc_realloc(void *p, size_t n) {
    if (dpc_fault_alloc_should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}
char *dpc_strndup(const char *s, size_t n) {
    char *d = dpc_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}
char *dpc_strdup(const char *s) { return dpc_strndup(s, strlen(s)); }
void dpc_free(void *p) { free(p); }

void dpc_buf_init(dpc_buf *b) { memset(b, 0, sizeof *b); }
void dpc_buf_free(dpc_buf *b) {
    free(b->data);
    dpc_buf_init(b);
}
static bool buf_reserve(dpc_buf *b, size_t extra) {
    if (b->oom)
        return false;
    size_t need;
    if (!dpc_add_size(b->len, extra + 1, &need)) {
        b->oom = true;
        return false;
    }
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}
void dpc_buf_put(dpc_buf *b, const void *p, size_t n) {
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}
void dpc_buf_puts(dpc_buf *b, const char *s) { dpc_buf_put(b, s, strlen(s)); }
void dpc_buf_vprintf(dpc_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}
void dpc_buf_printf(dpc_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dpc_buf_vprintf(b, fmt, ap);
    va_end(ap);
}
char *dpc_buf_take(dpc_buf *b) {
    if (b->oom) {
        dpc_buf_free(b);
        return NULL;
    }
    if (!b->data && !buf_reserve(b, 0))
        return NULL;
    char *p = b->data;
    dpc_buf_init(b);
    return p;
}

dpc_status dpc_read_file(const char *path, size_t max_bytes, char **data, size_t *len, dpc_err *e) {
    *data = NULL;
    *len = 0;
    /* O_NONBLOCK so that opening a FIFO never blocks; we refuse it below. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return dpc_errf(e, DPC_EUSER, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return dpc_errf(e, DPC_EUSER, "cannot stat '%s': %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return dpc_errf(e, DPC_EUSER, "'%s' is a directory, not a file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dpc_errf(e, DPC_EUSER, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return dpc_errf(e, DPC_EUSER, "'%s' is too large (%lld bytes, limit %zu)", path,
                        (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = dpc_malloc(n + 1);
    if (!buf) {
        close(fd);
        return dpc_errf(e, DPC_ENOMEM, "out of memory reading '%s' (%zu bytes)", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int err = errno;
            close(fd);
            free(buf);
            return dpc_errf(e, DPC_EIO, "cannot read '%s': %s", path,
                            r == 0 ? "file shrank while reading" : strerror(err));
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return DPC_OK;
}

dpc_status dpc_write_file_atomic(const char *path, const void *data, size_t len, dpc_err *e) {
    size_t plen = strlen(path);
    char *tmp = dpc_malloc(plen + 32);
    if (!tmp)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        dpc_status s = dpc_errf(e, DPC_EIO, "cannot write '%s': %s", path, strerror(errno));
        free(tmp);
        return s;
    }
    const char *p = data;
    size_t done = 0;
    int err = 0;
    while (done < len) {
        ssize_t w = dpc_fault_io_should_fail() ? (errno = ENOSPC, -1) : write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        done += (size_t)w;
    }
    if (!err && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        free(tmp);
        return dpc_errf(e, DPC_EIO, "cannot write '%s': %s", path, strerror(err));
    }
    free(tmp);
    return DPC_OK;
}

dpc_status dpc_parse_file(const char *path, dpc_status (*parse)(const void *buf, size_t len, void *out, dpc_err *e),
                          void *out, dpc_err *e) {
    char *data;
    size_t len;
    dpc_status st = dpc_read_file(path, SIZE_MAX / 2, &data, &len, e);
    if (st)
        return st;
    st = parse(data, len, out, e);
    dpc_free(data);
    if (st)
        dpc_err_prefix(e, "%s: ", path);
    return st;
}

dpc_status dpc_write_image(const char *path, dpc_buf *b, dpc_status st, dpc_err *e) {
    if (st) { /* a failed serializer leaves b empty */
        dpc_err_prefix(e, "%s: ", path);
        return st;
    }
    st = dpc_write_file_atomic(path, b->data, b->len, e);
    dpc_buf_free(b);
    return st;
}

/* Python's float repr: the shortest digit string that round-trips, printed
 * in fixed notation when -4 <= exponent < 16 and in scientific notation with
 * a signed two-digit exponent otherwise. */
void dpc_format_pyfloat(double v, char *out, size_t n) {
    if (isnan(v)) {
        snprintf(out, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0) {
        snprintf(out, n, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char tmp[64];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* tmp is [-]d[.ddd]e[+-]XX; collect digits and the exponent. */
    char digits[32];
    int nd = 0, exp10;
    const char *s = tmp;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            digits[nd++] = *s;
    exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    char body[64];
    int pos = 0;
    if (exp10 < -4 || exp10 >= 16) {
        body[pos++] = digits[0];
        if (nd > 1) {
            body[pos++] = '.';
            for (int i = 1; i < nd; i++)
                body[pos++] = digits[i];
        }
        pos += snprintf(body + pos, sizeof body - (size_t)pos, "e%c%02d", exp10 < 0 ? '-' : '+',
                        exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        body[pos++] = '0';
        body[pos++] = '.';
        for (int i = 0; i < -exp10 - 1; i++)
            body[pos++] = '0';
        for (int i = 0; i < nd; i++)
            body[pos++] = digits[i];
    } else {
        for (int i = 0; i <= exp10; i++)
            body[pos++] = i < nd ? digits[i] : '0';
        body[pos++] = '.';
        if (nd > exp10 + 1)
            for (int i = exp10 + 1; i < nd; i++)
                body[pos++] = digits[i];
        else
            body[pos++] = '0';
    }
    body[pos] = 0;
    snprintf(out, n, "%s%s", neg ? "-" : "", body);
}

uint64_t dpc_fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *c = p;
    if (!h)
        h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* SHA-256 (FIPS 180-4), used for content-addressed caches. */
static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void dpc_sha256_hex(const void *data, size_t n, char out[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        sha256_block(h, p + i);
    unsigned char tail[128] = {0};
    size_t rem = n - i;
    memcpy(tail, p + i, rem);
    tail[rem] = 0x80;
    size_t tl = rem + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++)
        tail[tl - 1 - k] = (unsigned char)(bits >> (8 * k));
    for (size_t k = 0; k < tl; k += 64)
        sha256_block(h, tail + k);
    for (int k = 0; k < 8; k++)
        snprintf(out + 8 * k, 9, "%08x", h[k]);
}

dpc_status dpc_env_long(const char *name, long min, long max, long *out, bool *set, dpc_err *e) {
    const char *v = getenv(name);
    *set = v && *v;
    if (!*set)
        return DPC_OK;
    /* strtol alone would take leading blanks and "+", and "abc" as 0 */
    const char *d = v + (*v == '-');
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*d < '0' || *d > '9' || *end || errno == ERANGE || x < min || x > max)
        return dpc_errf(e, DPC_EUSAGE, "environment variable %s='%.100s' is not an integer from %ld to %ld", name, v,
                        min, max);
    *out = x;
    return DPC_OK;
}

dpc_status dpc_env_flag(const char *name, bool dflt, bool *out, dpc_err *e) {
    static const char *const on[] = {"1", "yes", "on", "true"}, *const off[] = {"0", "no", "off", "false"};
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v)
        return DPC_OK;
    for (int i = 0; i < 4; i++)
        if (strcmp(v, on[i]) == 0 || strcmp(v, off[i]) == 0) {
            *out = strcmp(v, on[i]) == 0;
            return DPC_OK;
        }
    return dpc_errf(e, DPC_EUSAGE, "environment variable %s='%.100s' is not a flag (1, yes, on, true or 0, no, off, false)",
                    name, v);
}
