/* safetensors.h - safetensors weight files, read and written.
 *
 * The reader performs every check of the reference implementation
 * (huggingface/safetensors, tensor.rs) and a few more, and refuses the file
 * with a one-line reason otherwise:
 *   - at least 8 bytes; header length N <= 100 MB and 8 + N <= file size;
 *   - the header is strict UTF-8 and strict JSON (checked by a bounded,
 *     non-recursive scanner before anything is read from it): nesting at
 *     most 64 deep, no \u0000 (a NUL would make two names compare equal in
 *     C), no array longer than 8 (no valid field needs one), integers only
 *     (1.5, 1e3 are refused), a JSON object at the top;
 *   - __metadata__, if present, maps strings to strings;
 *   - each tensor is {"dtype", "shape", "data_offsets": [begin, end]} and
 *     nothing else; dtype is one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL;
 *     dims and offsets are integers in [0, 2^48-1]; rank <= 8;
 *   - element count and byte size are overflow-checked and must equal
 *     end - begin; sorted by offsets, the tensors tile the data buffer
 *     exactly: no gaps, overlaps or trailing bytes;
 *   - a name appearing twice is refused explicitly (never last-wins);
 *   - BOOL tensors hold only bytes 0 and 1.
 * Zero-size and rank-0 tensors are fine. Data is copied into owned,
 * 64-byte aligned blocks. The header is not turned into a JSON tree (cJSON's
 * costs ~30x the text): values are read in place, so memory stays within a
 * small multiple of the file size (about 3x for a header of tiny tensors).
 *
 * Tensors come back sorted by name (bytewise), so dpc_st_find is a binary
 * search; metadata comes back sorted by key. */
#ifndef DPC_SAFETENSORS_H
#define DPC_SAFETENSORS_H

#include "tensor.h"

#define DPC_ST_MAX_HEADER 100000000u
#define DPC_ST_MAX_DEPTH 64
#define DPC_ST_MAX_INT 281474976710655ull /* 2^48 - 1, as in the format's schema */

typedef struct dpc_st_tensor {
    char *name;
    dpc_dtype dtype;
    int rank;
    int64_t shape[DPC_MAX_RANK];
    void *data; /* 64-byte aligned, owned by the dpc_safetensors */
    size_t nbytes;
} dpc_st_tensor;

typedef struct dpc_safetensors {
    dpc_st_tensor *t;
    size_t n;
    char **meta_keys, **meta_vals;
    size_t nmeta;
} dpc_safetensors;

dpc_status dpc_st_parse(const void *buf, size_t len, dpc_safetensors **out, dpc_err *e);
/* Parse errors start with the path: "w.safetensors: ...". */
dpc_status dpc_st_read(const char *path, dpc_safetensors **out, dpc_err *e);
const dpc_st_tensor *dpc_st_find(const dpc_safetensors *st, const char *name);
void dpc_st_free(dpc_safetensors *st);

/* Deterministic file image (initialises *out; empty on failure). The header
 * lists __metadata__ (keys sorted) and then the tensors sorted by name, and
 * is padded with spaces to a multiple of 8 bytes, so the data buffer starts
 * 8-aligned. In the buffer tensors are laid out by element size, largest
 * first, then by name (as the reference writer does): each tensor is then
 * aligned to its element size without leaving gaps, which the format
 * forbids. Names must be unique, valid UTF-8, and not "__metadata__". */
dpc_status dpc_st_serialize(const dpc_st_tensor *t, size_t n, const char *const *meta_keys,
                            const char *const *meta_vals, size_t nmeta, dpc_buf *out, dpc_err *e);
/* Writes atomically (temporary file, fsync, rename). */
dpc_status dpc_st_write(const char *path, const dpc_st_tensor *t, size_t n, const char *const *mk,
                        const char *const *mv, size_t nmeta, dpc_err *e);

#endif
