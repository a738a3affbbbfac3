/* base.h - the few things every part of dpc shares: status codes, the error
 * record that carries a message out of the library, overflow-checked size
 * arithmetic, and tiny allocation helpers.
 *
 * The library never prints and never exits: every fallible function returns a
 * dpc_status and, on failure, fills a dpc_err that the caller (the CLI, or a
 * user of libdpc) decides what to do with. */
#ifndef DPC_BASE_H
#define DPC_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dpc_status {
    DPC_OK = 0,
    DPC_EUSER = 1,     /* bad model, file, shape or value supplied by the user */
    DPC_EUSAGE = 2,    /* bad arguments to an API call or the command line */
    DPC_ENOMEM = 3,    /* an allocation failed (real or injected) */
    DPC_EIO = 4,       /* the operating system refused a read or write */
    DPC_EDEVICE = 5,   /* a device (CUDA driver, NVRTC, cuBLAS, NCCL) failed */
    DPC_EINTERNAL = 6, /* a broken invariant: a bug in dpc */
    DPC_EBUSY = 7,     /* a queue is full or closing (the batcher's back-pressure) */
} dpc_status;

#define DPC_ERR_MSG 1024

typedef struct dpc_err {
    dpc_status code;
    char msg[DPC_ERR_MSG];
} dpc_err;

/* Records a formatted message in *e (which may be NULL) and returns code. */
dpc_status dpc_errf(dpc_err *e, dpc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes the message already in *e ("replica 1 on device cpu: " ...). */
void dpc_err_prefix(dpc_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *dpc_status_name(dpc_status s);

/* Size arithmetic on untrusted numbers: false on overflow. */
static inline bool dpc_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool dpc_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool dpc_mul_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool dpc_add_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Allocation that can be made to fail on purpose (tests), see faults. */
void *dpc_malloc(size_t n);
void *dpc_calloc(size_t n, size_t size);
void *dpc_realloc(void *p, size_t n);
char *dpc_strdup(const char *s);
char *dpc_strndup(const char *s, size_t n);
void dpc_free(void *p);

/* A growable byte buffer, used for generated source, printed text and files. */
typedef struct dpc_buf {
    char *data;
    size_t len, cap;
    bool oom; /* sticky: once an append failed, the buffer is unusable */
} dpc_buf;

void dpc_buf_init(dpc_buf *b);
void dpc_buf_free(dpc_buf *b);
void dpc_buf_put(dpc_buf *b, const void *p, size_t n);
void dpc_buf_puts(dpc_buf *b, const char *s);
void dpc_buf_printf(dpc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dpc_buf_vprintf(dpc_buf *b, const char *fmt, va_list ap);
/* Takes the contents (NUL-terminated) out of the buffer; NULL after an OOM. */
char *dpc_buf_take(dpc_buf *b);

/* Whole-file I/O. Reading refuses directories, FIFOs and devices, and files
 * larger than max_bytes.
 *
 * Writing several files as one: each regular (or new) file is staged in a
 * fresh temporary file beside it (created with O_EXCL|O_NOFOLLOW, never a
 * predictable name) and fsync'ed; only when every one is complete are they
 * renamed into place, so on any failure no temporary is left and every
 * previous file is as it was. A replaced file keeps its permission bits, a
 * new one gets 0666 less the umask. Character devices, FIFOs and names of
 * a descriptor (/dev/null, a pipe, /dev/stdout, /dev/fd/N) are written
 * through, never replaced or created; a symbolic link
 * is followed to the file it names (not in a sticky shared directory when
 * someone else planted it); directories, block devices and sockets are
 * refused. dpc_write_file_atomic is the one-file case. */
dpc_status dpc_read_file(const char *path, size_t max_bytes, char **data, size_t *len, dpc_err *e);
/* Opens a user-named file for reading as dpc_read_file does, for readers
 * of part of a file: O_NONBLOCK (opening a FIFO never blocks), close-on-
 * exec, plus flags (O_NOFOLLOW); anything but a regular file is refused.
 * On success *fd is open and *size is the file's size; else *fd is -1. */
dpc_status dpc_open_regular(const char *path, int flags, int *fd, uint64_t *size, dpc_err *e);
dpc_status dpc_write_files_atomic(int n, const char *const *paths, const void *const *data, const size_t *lens,
                                  dpc_err *e);
dpc_status dpc_write_file_atomic(const char *path, const void *data, size_t len, dpc_err *e);
/* Whether a and b name one file: the same inode when both exist, else the
 * same path once made absolute with its directory's links resolved. */
bool dpc_same_file(const char *a, const char *b);
/* The loaders and savers of one file format each (.npy, safetensors) wrap
 * their parser and serializer alike: dpc_parse_file reads path whole and
 * hands it to parse (out is parse's own out pointer); dpc_write_image
 * writes the image a serializer built into b, st being the serializer's
 * status, and frees it. Either prefixes the format code's errors with the
 * path (the file functions' own messages already name it). */
dpc_status dpc_parse_file(const char *path, dpc_status (*parse)(const void *buf, size_t len, void *out, dpc_err *e),
                          void *out, dpc_err *e);
dpc_status dpc_write_image(const char *path, dpc_buf *b, dpc_status st, dpc_err *e);

/* An integer environment variable, parsed strictly: *set is false when it
 * is unset or empty; anything but a decimal integer in [min, max] (a
 * typo, trailing text, an overflow) is a DPC_EUSAGE error naming the
 * variable, never a silent 0. Every DPC_* integer variable goes through
 * it. */
dpc_status dpc_env_long(const char *name, long min, long max, long *out, bool *set, dpc_err *e);

/* Seconds on the monotonic clock (timings, deadlines). */
double dpc_now_s(void);
/* A boolean environment variable: unset or empty is dflt; 1, yes, on, true
 * and 0, no, off, false are read; anything else is a DPC_EUSAGE error. */
dpc_status dpc_env_flag(const char *name, bool dflt, bool *out, dpc_err *e);

/* Python's repr of a float (shortest round-trip, '1e-05', '0.5', 'inf'). */
void dpc_format_pyfloat(double v, char *out, size_t n);

/* FNV-1a 64 and a 256-bit content hash (SHA-256) as hex, for caches. */
uint64_t dpc_fnv1a(const void *p, size_t n, uint64_t h);
void dpc_sha256_hex(const void *p, size_t n, char out[65]);

#endif
