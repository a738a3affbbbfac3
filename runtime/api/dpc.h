/* dpc.h - the C API of libdpc: load a model compiled with `dpc compile`
 * (a .dpa artifact), bind its weights, choose devices, run forwards.
 *
 * Conventions (docs/c-api.md has the details and an example):
 *  - Handles are opaque: dpc_program (a loaded artifact) and dpc_tensor (a
 *    host tensor: dtype, shape, 64-byte aligned C-order data).
 *  - Every call that can fail returns a dpc_status (DPC_OK is 0). Its
 *    message is kept per program (dpc_program_error: the last call on it)
 *    and per thread (dpc_last_error: the last failure of any call, those
 *    that make a handle included).
 *  - The library never exits and never prints. It does not install signal
 *    handlers or change the locale.
 *  - Thread safety: different programs can be used from different threads
 *    at the same time. Calls on one program are serialised by a lock inside
 *    it (dpc_program_error then reports the latest failure on it, from
 *    whichever thread). Tensors are plain data: share them read-only.
 *  - Ownership: a function that returns a new handle through an out
 *    parameter gives it to the caller, who frees it with the matching
 *    *_free function (which accepts NULL). Inputs are never taken over.
 *    Names a program hands out (dpc_program_name, input and scalar names)
 *    live as long as the program.
 *  - Running a program on the CPU compiles its generated C with the system
 *    C compiler (`cc`, or $CC split on blanks, no shell) the first time,
 *    within $DPC_CC_TIMEOUT seconds (default 300), and caches the result in
 *    $DPC_CACHE_DIR (default ~/.cache/dpc). */
#ifndef DPC_H
#define DPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DPC_API __attribute__((visibility("default")))
#else
#define DPC_API
#endif

/* Inside libdpc these types come from its internal headers, with the same
 * definitions (checked at compile time in api.c). */
#ifndef DPC_BASE_H
typedef enum dpc_status {
    DPC_OK = 0,
    DPC_EUSER = 1,     /* bad model, file, shape or value supplied by the caller */
    DPC_EUSAGE = 2,    /* bad arguments to a call */
    DPC_ENOMEM = 3,    /* out of memory */
    DPC_EIO = 4,       /* the operating system refused a read or write */
    DPC_EDEVICE = 5,   /* a device or its toolchain (C compiler, NVRTC, CUDA) failed */
    DPC_EINTERNAL = 6, /* a bug in dpc */
    DPC_EBUSY = 7,     /* a queue is full or closing: try again later (dpc_batcher_submit) */
} dpc_status;
#endif

#ifndef DPC_TENSOR_H
#define DPC_MAX_RANK 8
typedef enum dpc_dtype {
    DPC_F32 = 0,
    DPC_F64 = 1,
    DPC_F16 = 2,
    DPC_BF16 = 3,
    DPC_I64 = 4,
    DPC_I32 = 5,
    DPC_I8 = 6,
    DPC_U8 = 7,
    DPC_BOOL = 8,
    DPC_I16 = 9,
} dpc_dtype;
typedef struct dpc_tensor dpc_tensor;
#endif

typedef struct dpc_program dpc_program;

/* Scalar parameter types of forward (dpc_program_scalar). */
typedef enum dpc_scalar_type { DPC_SCALAR_FLOAT = 0, DPC_SCALAR_INT = 1, DPC_SCALAR_BOOL = 2 } dpc_scalar_type;

/* ------------------------------------------------------------ library */

/* "0.1.0" */
DPC_API const char *dpc_version(void);
/* The artifact format this library reads (and `dpc compile` writes). */
DPC_API int dpc_artifact_format(void);
/* A short description: "ok", "user error", "usage error", "out of memory", ... */
DPC_API const char *dpc_status_name(dpc_status s);
/* The message of the last failed call made by this thread ("" if none). */
DPC_API const char *dpc_last_error(void);
/* Async-signal-safe: kills the host C compiler processes that are
 * compiling CPU kernels now (each in its own process group) and removes
 * their temporary directories. For the caller's own SIGINT/SIGTERM/SIGHUP
 * handler, when the process is about to end: the compiles in flight fail. */
DPC_API void dpc_abort_compilers(void);

/* ------------------------------------------------------------ programs */

/* Loads and verifies an artifact: safetensors structure, format and dpc
 * version, checksum, then the stored sources are compiled again and must
 * give exactly the stored IR, schedule and generated sources; embedded
 * weights must match the parameters. No kernel runs before that. On
 * failure *out is NULL and dpc_last_error() says why. */
DPC_API dpc_status dpc_program_load(const char *path, dpc_program **out);
/* The same from memory (copied: data may be freed on return). name is used
 * in messages and may be NULL. */
DPC_API dpc_status dpc_program_load_memory(const void *data, size_t len, const char *name, dpc_program **out);
DPC_API void dpc_program_free(dpc_program *p);
/* The message of the last call on p that returns a status ("" when it
 * succeeded). */
DPC_API const char *dpc_program_error(const dpc_program *p);
/* Warnings of the last call on p that had any (extra keys in a weights
 * file, ...), or "". */
DPC_API const char *dpc_program_warning(const dpc_program *p);

/* Weights: a safetensors file holding the model's state_dict (the keys
 * `dpc print` implies; "module." prefixes accepted), from a file or from
 * memory (copied). Missing keys, wrong shapes and non-float dtypes are
 * errors naming every offending key; extra keys are a warning. On failure
 * the weights bound before stay in place. Without this call the weights
 * embedded in the artifact (if any) are used; a model without parameters
 * runs without either. */
DPC_API dpc_status dpc_program_bind_weights(dpc_program *p, const char *path);
DPC_API dpc_status dpc_program_bind_weights_memory(dpc_program *p, const void *data, size_t len);
/* 1 if the artifact embeds weights, else 0. */
DPC_API int dpc_program_has_embedded_weights(const dpc_program *p);

/* Devices, as `dpc run --devices`: "cpu", "cpu,cpu,cpu" (one replica per
 * entry; the batch is split across them as torch.nn.DataParallel does).
 * The default is "cpu". */
DPC_API dpc_status dpc_program_set_devices(dpc_program *p, const char *devices);

/* Float storage on CUDA devices, as `dpc run --dtype`: "f32" (the default),
 * "bf16" or "f16": weights, activations, inputs and outputs are held in 16
 * bits on the device, arithmetic and GEMM accumulation stay f32, the
 * tensors passed in and returned stay f32. Applied at the next run, where a
 * 16-bit dtype with CPU devices is an error (the CPU computes in f32). */
DPC_API dpc_status dpc_program_set_dtype(dpc_program *p, const char *dtype);

/* ------------------------------------------------- forward's signature */

DPC_API const char *dpc_program_name(const dpc_program *p); /* the model class, "ParallelModel" */
DPC_API int dpc_program_num_inputs(const dpc_program *p);   /* tensor parameters of forward */
DPC_API int dpc_program_num_scalars(const dpc_program *p);  /* scalar (keyword) parameters */
DPC_API int dpc_program_num_outputs(const dpc_program *p);  /* returned tensors */
/* Input i: name, dtype (DPC_F32 or DPC_I64), rank and dims; a dim that
 * scales with the batch is given as -k (k times the batch: usually -1),
 * a run-time dim (below) as 0. Any out pointer may be NULL; shape needs
 * DPC_MAX_RANK entries.
 *
 * Run-time dims: a forward such as `forward(ids: i64[N, S])` takes any S;
 * each S met is compiled at its first run and cached with its kernels,
 * memory plan and CUDA graphs (at most 16 values, the least recently run
 * evicted first; $DPC_SPEC_CACHE, read at load, sets the bound). Inputs
 * naming the same dim must agree on it. The outputs (dpc_program_num_outputs,
 * dpc_program_output), the IR and the sources are those of the latest run's
 * value (none before the first run); dpc_program_run checks noutputs once
 * the inputs have chosen it. */
DPC_API const char *dpc_program_input_rtdim(const dpc_program *p, int i, int d); /* "S", or NULL: not a run-time dim */
DPC_API dpc_status dpc_program_input(const dpc_program *p, int i, const char **name, dpc_dtype *dtype, int *rank,
                                     int64_t *shape);
DPC_API dpc_status dpc_program_output(const dpc_program *p, int i, dpc_dtype *dtype, int *rank, int64_t *shape);
/* Forward's outputs whatever the run-time dims, known before any run:
 * their count, and output i's dtype, rank and dims as dpc_program_output
 * gives them, except that a dim that changes with a run-time dim is 0 (as
 * an input's run-time dim is). For a model without run-time dims these are
 * dpc_program_num_outputs and dpc_program_output. Found by building
 * forward's graph (no kernels) at two values of the run-time dims, once;
 * DPC_EUSER when it builds at none of the values tried. */
DPC_API dpc_status dpc_program_outputs_any(const dpc_program *p, int *noutputs);
DPC_API dpc_status dpc_program_output_any(const dpc_program *p, int i, dpc_dtype *dtype, int *rank, int64_t *shape);
/* Scalar i: name, type, and its default (*has_default 0: required). */
DPC_API dpc_status dpc_program_scalar(const dpc_program *p, int i, const char **name, dpc_scalar_type *type,
                                      int *has_default, double *default_value);

/* ----------------------------------------------------------------- run */

/* Runs forward. inputs: the tensor parameters in order (f32 as float32;
 * i64 as int64, or int32, which is widened). Scalars by keyword: nkw names
 * and values (ints and bools as doubles; bools 0 or 1); parameters not
 * given take their defaults. outputs: noutputs (must equal
 * dpc_program_num_outputs) slots that receive new tensors, owned by the
 * caller; on failure they are all NULL. Weights must be bound or embedded.
 * The results are bitwise identical to `dpc run` on the same inputs. */
DPC_API dpc_status dpc_program_run(dpc_program *p, const dpc_tensor *const *inputs, int ninputs,
                                   const char *const *kw_names, const double *kw_values, int nkw,
                                   dpc_tensor **outputs, int noutputs);

/* ------------------------------------------------------------ batcher */

/* A dynamic batcher over one program: requests that arrive close together
 * are stacked on dim 0 into one batch, run by dpc_program_run (which
 * scatters the batch over the replicas of dpc_program_set_devices), and
 * each request gets its own rows of every output back. What `dpc serve`
 * runs behind its HTTP front end (docs/serve.md); usable from C alone.
 *
 *  - One worker thread runs every batch: the program is never entered
 *    concurrently (dpc_program_run may be called from any thread; calls on
 *    one program are serialised by its lock anyway). While a batcher
 *    lives, the program belongs to it: do not call other dpc_program_*
 *    functions on it.
 *  - A batch is run when it holds max_batch rows or its oldest request has
 *    waited max_delay_us. Requests of different batch sizes stack;
 *    requests whose keyword scalars, dtypes or non-batch dims differ are
 *    never stacked together; a request of more than max_batch rows runs
 *    alone. A model whose inputs have no batch dim 0, or whose outputs do
 *    not scale with the batch on dim 0, runs each request alone.
 *  - At most max_queue requests wait; dpc_batcher_submit then fails with
 *    DPC_EBUSY (back-pressure), as it does once the batcher is closing.
 *  - Errors: a request that does not match forward's signature (count,
 *    names, dtypes, shapes, scalars) is refused by dpc_batcher_submit
 *    (DPC_EUSER, message in dpc_last_error()). A batch that fails with
 *    DPC_EUSER (a value only the run can check, such as an index out of
 *    range) is run again one request at a time, so only the offending
 *    request fails; any other failure (a device or kernel failure) fails
 *    that batch's requests only, and the batcher keeps serving.
 *  - Warm-up: dpc_batcher_new runs forward once with zero inputs at each
 *    of warm_batches (default: 1 and max_batch rows), which compiles the
 *    kernels and plans memory for those sizes before the first request
 *    (skipped for a model with run-time dims or required scalars).
 *  - Fault injection for tests, read at dpc_batcher_new: DPC_FAULT_REPLICA=R
 *    with DPC_FAULT_KERNEL=K makes kernel K of replica R fail (as for `dpc
 *    run`), only in the Bth batch run after warm-up when DPC_FAULT_BATCH=B
 *    is set too, else in every batch. */
typedef struct dpc_batcher dpc_batcher;
typedef struct dpc_request dpc_request;

typedef struct dpc_batcher_opts {
    int max_batch;               /* rows per batch; 0: 64 */
    int64_t max_delay_us;        /* longest wait of a batch's oldest request; < 0: 2000; 0: no waiting */
    int max_queue;               /* requests waiting at most; 0: 1024 */
    const int64_t *warm_batches; /* batch sizes run at start; NULL: 1 and max_batch */
    int nwarm;                   /* entries of warm_batches (0 with a non-NULL list: no warm-up) */
} dpc_batcher_opts;

/* Called once per request when it is done (its status and outputs are
 * set), on the batcher's worker thread: return quickly. The request may be
 * freed in the callback or later. */
typedef void (*dpc_request_done_fn)(dpc_request *r, void *user);

/* Starts a batcher over p (weights bound or embedded, devices set) with
 * options o (NULL: the defaults), after the warm-up. On failure *out is
 * NULL and dpc_last_error() says why. */
DPC_API dpc_status dpc_batcher_new(dpc_program *p, const dpc_batcher_opts *o, dpc_batcher **out);
/* Queues one request: tensor inputs in forward order (f32, or i64/i32 for
 * index inputs) with dim 0 the request's rows, keyword scalars as for
 * dpc_program_run. The inputs are read when its batch runs: keep them
 * alive and unchanged until the request is done. done (may be NULL) is
 * called when it is; dpc_request_wait waits for it. *out receives the
 * request (free it with dpc_request_free once done) or NULL on failure:
 * DPC_EUSER for a request that does not match forward, DPC_EBUSY for a
 * full or closing queue. */
DPC_API dpc_status dpc_batcher_submit(dpc_batcher *b, const dpc_tensor *const *inputs, int ninputs,
                                      const char *const *kw_names, const double *kw_values, int nkw,
                                      dpc_request_done_fn done, void *user, dpc_request **out);
/* Stops accepting requests (dpc_batcher_submit fails with DPC_EBUSY), runs
 * every request queued, and returns when they are all done. */
DPC_API void dpc_batcher_close(dpc_batcher *b);
/* dpc_batcher_close, then frees b. Every request must be done; the program
 * is the caller's again. */
DPC_API void dpc_batcher_free(dpc_batcher *b);

/* Blocks until r is done; returns its status. */
DPC_API dpc_status dpc_request_wait(dpc_request *r);
/* Once done: its status (DPC_OK, or why its batch failed), the message
 * ("" on success), and output i (owned by the request: valid until
 * dpc_request_free; NULL on failure or out of range). */
DPC_API dpc_status dpc_request_status(const dpc_request *r);
DPC_API const char *dpc_request_error(const dpc_request *r);
DPC_API int dpc_request_num_outputs(const dpc_request *r);
DPC_API const dpc_tensor *dpc_request_output(const dpc_request *r, int i);
/* Rows of the batch it ran in, and seconds it waited and computed. */
DPC_API int64_t dpc_request_batch_rows(const dpc_request *r);
DPC_API double dpc_request_queue_seconds(const dpc_request *r);
DPC_API double dpc_request_compute_seconds(const dpc_request *r);
DPC_API void dpc_request_free(dpc_request *r);

/* Counters since dpc_batcher_new (warm-up excluded), for metrics. The
 * histograms count observations <= bound i (not cumulative; the last
 * bucket is +Inf); dpc_batcher_bucket gives the bounds. */
#define DPC_BATCHER_SIZE_BUCKETS 12   /* batch rows: 1, 2, 4, ... 1024, +Inf */
#define DPC_BATCHER_TIME_BUCKETS 16   /* seconds: 0.0001 ... 10, +Inf */
typedef struct dpc_batcher_stats {
    uint64_t requests;  /* submitted and accepted */
    uint64_t succeeded; /* done with DPC_OK */
    uint64_t failed;    /* done with an error */
    uint64_t rejected;  /* refused: does not match forward (DPC_EUSER) */
    uint64_t busy;      /* refused: queue full or closing (DPC_EBUSY) */
    uint64_t batches;   /* dpc_program_run calls (retries one request at a time included) */
    uint64_t batch_failures;
    int64_t queue_depth;   /* requests waiting now */
    int64_t running;       /* requests in the batch running now */
    uint64_t batch_rows_sum;
    uint64_t batch_rows[DPC_BATCHER_SIZE_BUCKETS];
    double queue_seconds_sum, compute_seconds_sum; /* per request */
    uint64_t queue_seconds[DPC_BATCHER_TIME_BUCKETS], compute_seconds[DPC_BATCHER_TIME_BUCKETS];
    double batch_seconds_sum; /* seconds in the forwards of batches, each batch once */
} dpc_batcher_stats;
DPC_API void dpc_batcher_get_stats(dpc_batcher *b, dpc_batcher_stats *out);
/* Upper bound of bucket i: size = 1 rows buckets, else seconds; +Inf
 * (HUGE_VAL) for the last. */
DPC_API double dpc_batcher_bucket(int size, int i);

/* ---------------------------------------------------------------- text */

/* Text into a caller buffer, snprintf style: writes at most cap bytes
 * including a terminating NUL (nothing if cap is 0), sets *len (may be
 * NULL) to the full length without the NUL, and returns DPC_OK; the text
 * is complete when *len < cap. */
/* The module tree, exactly as PyTorch's print(model). */
DPC_API dpc_status dpc_program_print(const dpc_program *p, char *buf, size_t cap, size_t *len);
/* The graph IR (fused = 0) or the kernel schedule (fused = 1). */
DPC_API dpc_status dpc_program_ir(const dpc_program *p, int fused, char *buf, size_t cap, size_t *len);
/* The generated source: target "cpu" (C) or "cuda". */
DPC_API dpc_status dpc_program_source(const dpc_program *p, const char *target, char *buf, size_t cap, size_t *len);
/* The `dpc inspect` summary. */
DPC_API dpc_status dpc_program_describe(const dpc_program *p, char *buf, size_t cap, size_t *len);

/* ------------------------------------------------------------- tensors */

/* A new tensor of dtype and shape (rank 0..DPC_MAX_RANK, dims >= 0; shape
 * may be NULL for rank 0). data, if not NULL, is copied in (numel * element
 * size bytes, C order); otherwise the tensor is zero-filled. */
DPC_API dpc_status dpc_tensor_create(dpc_dtype dtype, int rank, const int64_t *shape, const void *data,
                                     dpc_tensor **out);
/* NumPy .npy files and images (see `dpc run` for the accepted dtypes). */
DPC_API dpc_status dpc_tensor_load_npy(const char *path, dpc_tensor **out);
DPC_API dpc_status dpc_tensor_load_npy_memory(const void *data, size_t len, dpc_tensor **out);
/* Written atomically, exactly as numpy.save writes the same array. */
DPC_API dpc_status dpc_tensor_save_npy(const dpc_tensor *t, const char *path);
DPC_API void dpc_tensor_free(dpc_tensor *t);
/* Accessors (t must not be NULL). */
DPC_API dpc_dtype dpc_tensor_dtype(const dpc_tensor *t);
DPC_API int dpc_tensor_rank(const dpc_tensor *t);
DPC_API int64_t dpc_tensor_dim(const dpc_tensor *t, int i); /* -1 when i is out of range */
DPC_API int64_t dpc_tensor_numel(const dpc_tensor *t);
DPC_API size_t dpc_tensor_nbytes(const dpc_tensor *t);
DPC_API void *dpc_tensor_data(dpc_tensor *t); /* never NULL */
/* NumPy's name of a dtype ("float32", "int64", ...), and its element size. */
DPC_API const char *dpc_dtype_name(dpc_dtype dtype);
DPC_API size_t dpc_dtype_size(dpc_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif
