/* npy.h - NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * Reading accepts the dtypes <f4 <f8 <f2 <i8 <i4 <i2 |i1 |u1 |b1 (the byte
 * order may also be '=', '|' or absent, meaning little-endian here), and
 * their big-endian forms (>f4, ...), which are byte-swapped on load.
 * fortran_order=True arrays are transposed to C order. Everything else is
 * refused with a reason: object arrays (they are pickles: never unpickled),
 * structured and sub-array dtypes, other kinds, bool bytes other than 0/1.
 *
 * The header is parsed as the Python dict literal it is, field by field: it
 * must hold exactly the keys descr, fortran_order and shape, once each, and
 * be at most 10000 bytes (NumPy's own limit). The data must have exactly the
 * size the header implies: a short file is refused, and so is a file with
 * bytes after the data (NumPy ignores them; dpc refuses them, so that a
 * file means one thing only and a damaged or concatenated file is noticed).
 *
 * Writing produces exactly the bytes numpy.save (1.24) produces for the
 * same little-endian C-order array: version 1.0 (2.0 if the header were
 * longer than 65535 bytes), header padded with spaces and '\n' so the data
 * starts on a 64-byte boundary. bfloat16 cannot be written (NumPy has no
 * such dtype). */
#ifndef DPC_NPY_H
#define DPC_NPY_H

#include "tensor.h"

#define DPC_NPY_MAX_HEADER 10000

/* Parses an in-memory .npy image into a new tensor (data copied). */
dpc_status dpc_npy_parse(const void *buf, size_t len, dpc_tensor **out, dpc_err *e);
/* Reads a file; parse errors start with the path: "x.npy: ...". */
dpc_status dpc_npy_read(const char *path, dpc_tensor **out, dpc_err *e);

/* Initialises *out and fills it with the file image; on failure *out is
 * left empty. The caller frees it with dpc_buf_free. */
dpc_status dpc_npy_serialize(const dpc_tensor *t, dpc_buf *out, dpc_err *e);
/* Writes atomically (temporary file, fsync, rename). */
dpc_status dpc_npy_write(const char *path, const dpc_tensor *t, dpc_err *e);

#endif
