/* dataparallel.h - the device-agnostic half of a data-parallel forward:
 * parse a device list, split the batch with torch.chunk rules, run one
 * replica per chunk concurrently, gather the outputs on dim 0, and report
 * errors as `replica <i> on device <d>: <message>`. The contract is
 * spec/dataparallel.md ("Forward across replicas"); a backend (CPU now,
 * CUDA later) supplies the work of one replica as a dpc_replica_fn.
 *
 * Summary of the semantics (items refer to the contract):
 *  - One device (1): no scatter and no gather. fn is called once, on the
 *    calling thread, with the inputs whole (shallow copies of the caller's
 *    tensors, sharing their data); its outputs are returned as they are, a
 *    0-dim output stays 0-dim, and its error is returned unprefixed. Tensor
 *    inputs may then have any rank and any dim 0.
 *  - Several devices (3, 4): every tensor input must have rank >= 1 and the
 *    same dim 0, the batch b (5: otherwise DPC_EUSER naming both inputs).
 *    The batch is cut with dpc_chunk_sizes into k <= n pieces; replica i
 *    gets rows [offset_i, offset_i + rows_i) of every tensor input as a view
 *    and runs on devs[i]; devs[k..n-1] stay idle. Scalars reach every
 *    replica whole and never change k. With no tensor input, k = 1.
 *  - Batch 0 (3): k = 1. The one replica runs on devs[0] with 0-row views,
 *    and its (normally batch-0) outputs are gathered as usual. PyTorch makes
 *    n empty pieces instead; dpc runs one, since n empty runs only cost.
 *  - Run (6): replicas run at the same time, replica i as task i of the pool
 *    (see pool.h: with a pool of >= k threads, each replica has its own
 *    thread, replica 0 the caller's). Device kinds marked async in
 *    dpc_dp_opts are instead launched one after the other from the calling
 *    thread and completed by a sync callback (for CUDA: enqueue on the
 *    replica's stream, then wait for it).
 *  - Gather (7): with several devices, output j of the result is the
 *    concatenation on dim 0, in replica order, of output j of every replica
 *    (so a tuple output is gathered element by element), always a new host
 *    tensor except when k = 1 (then replica 0's tensor is passed through).
 *    All replicas must agree on dtype, rank and dims 1.., else
 *    DPC_EINTERNAL (a backend bug). If every replica returns a 0-dim tensor,
 *    the result is a vector of length k, one value per replica, as PyTorch
 *    does, and a warning is recorded in the report (the library does not
 *    print). Mixed 0-dim and non-0-dim pieces are DPC_EINTERNAL.
 *  - Errors (8): every replica is joined before anything is reported; then
 *    the error of the lowest-numbered failing replica is returned as
 *    `replica <i> on device <d>: <its message>` with its status code, and
 *    no output is returned (every partial output is freed, outputs[] are
 *    all NULL).
 *
 * Threading of the GEMM library (CPU backend): replicas on one machine
 * share its cores, so each replica's GEMMs must use only its share,
 * dpc_dp_threads_per_replica(dpc_cpu_count(), k), or k replicas each asking
 * for every core oversubscribe the machine k times over. The CPU backend
 * sets this before the forward:
 *  - oneDNN with its OpenMP runtime: the thread count is a per-thread
 *    setting, so each replica task sets it on its own pool thread (the pool
 *    keeps replica i on the same thread, so this is done once per thread);
 *  - OpenBLAS (the pthreads build Debian ships): openblas_set_num_threads is
 *    process-wide, and concurrent multi-threaded level-3 calls from several
 *    threads are serialised by a lock inside OpenBLAS, so with k > 1 CPU
 *    replicas the backend sets 1 thread (replicas are then the parallelism)
 *    and with one replica it gives that replica every core.
 */
#ifndef DPC_DATAPARALLEL_H
#define DPC_DATAPARALLEL_H

#include "base.h"
#include "pool.h"
#include "tensor.h"

/* ---- devices ------------------------------------------------------------ */

enum { DPC_DEV_CPU = 0, DPC_DEV_CUDA = 1 };
#define DPC_DEV_NUM_KINDS 2
#define DPC_MAX_DEVICES 64     /* entries in one device list */
#define DPC_MAX_DEVICE_INDEX 1023
#define DPC_DEVICE_NAME_MAX 16 /* enough for "cuda:1023" and its NUL */

typedef struct dpc_device {
    int kind;  /* DPC_DEV_CPU, DPC_DEV_CUDA */
    int index; /* 0 for the CPU; the CUDA ordinal */
} dpc_device;

/* Parses a comma-separated device list, in order, repeats allowed:
 * "cpu", "cpu,cpu,cpu", "cuda:0,cuda:1", "cuda" (= "cuda:0"). Spaces around
 * an entry are ignored. Empty lists or entries, unknown kinds, "cpu:<i>",
 * "cuda:" / "cuda:x" / "cuda:-1" / "cuda:+1", indices above
 * DPC_MAX_DEVICE_INDEX and more than max entries are DPC_EUSAGE, with a
 * message naming the entry. Whether a CUDA device exists is the backend's
 * business. On success *n is in [1, max]. */
dpc_status dpc_parse_devices(const char *list, dpc_device *out, int max, int *n, dpc_err *e);
/* "cpu", "cuda:0"; "?" for an unknown kind. */
void dpc_device_name(const dpc_device *d, char *out, size_t n);

/* ---- splitting the batch ----------------------------------------------- */

/* torch.chunk sizes for a batch of b rows over n devices: s = ceil(b/n),
 * k = ceil(b/s) pieces, the first k-1 of s rows and the last of
 * b - s*(k-1), so k <= n (5 over 4 -> 2,2,1; 6 over 4 -> 2,2,2; 1 over 2 ->
 * 1). b == 0 gives k = 1 piece of 0 rows (torch.chunk gives n; see above).
 * Writes sizes[0..k-1] and offsets[0..k-1] (row of the piece's first row),
 * each may be NULL; arrays of n entries are always enough. Returns k, or 0
 * when b < 0 or n < 1. */
int dpc_chunk_sizes(int64_t batch, int n, int64_t *sizes, int64_t *offsets);

/* The batch of a forward's tensor inputs, checked once before any device
 * path (one device, several replicas, an MPI rank's share, the C API):
 * every input of rank >= 1 must hold the data its shape says, and all share
 * the batch name, so their dim 0 must agree; *batch is that size, or -1
 * when no input has a dim 0. Split across nsplit > 1 pieces (`over` names
 * them: "devices", "ranks"), a 0-dim input is refused too, as it has no
 * batch dimension to split. Errors name the inputs (names may be NULL) and
 * their sizes. */
dpc_status dpc_dp_batch(const dpc_tensor *const *inputs, int ninputs, const char *const *names, int nsplit,
                        const char *over, int64_t *batch, dpc_err *e);
/* The same, with whole[j] true for an input without the batch dim (a
 * shared table or mask, `table: [10, 4]`): it is passed whole to every
 * replica, so it is neither split nor counted in the batch (whole may be
 * NULL: every input has the batch dim). */
dpc_status dpc_dp_batch_ex(const dpc_tensor *const *inputs, int ninputs, const char *const *names,
                           const bool *whole, int nsplit, const char *over, int64_t *batch, dpc_err *e);

/* GEMM threads for each of nreplicas replicas sharing ncores cores:
 * max(1, ncores / nreplicas) (ncores <= 0 means dpc_cpu_count()). See the
 * note at the top about how the CPU backend applies it. */
int dpc_dp_threads_per_replica(int ncores, int nreplicas);

/* ---- one replica's work -------------------------------------------------- */

/* What a replica is given. inputs[j] is a view of rows
 * [row_offset, row_offset + rows) of tensor input j: a dpc_tensor struct
 * owned by dpc_dp_forward whose data points into the caller's tensor. fn
 * must not free it or its data, nor write to the data (replica 0's view
 * aliases the caller's input); it stays valid until fn (or sync) returns.
 * With one device the views are the whole inputs; with no tensor input rows
 * is -1. scalars are the caller's, whole, for every replica.
 *
 * outputs[0..noutputs-1]: on entry either all NULL, and fn stores there
 * tensors it allocates with dpc_tensor_new (dpc_dp_forward takes them over
 * and frees them), or, when dpc_dp_opts.out_shape is set, views into the
 * final gathered outputs, which fn fills in place (zero-copy gather) and
 * must neither replace nor free. If fn fails it may leave allocated outputs
 * in place: they are freed. */
typedef struct dpc_replica_io {
    int64_t row_offset, rows;
    int ninputs;
    dpc_tensor *inputs; /* views */
    int nscalars;
    const double *scalars;
    int noutputs;
    dpc_tensor **outputs;
} dpc_replica_io;

/* Runs (or, for an async kind, launches) the forward of one replica on
 * *dev. Called concurrently for different replicas, each with its own io
 * and its own e; on failure returns the status and fills e (a message
 * without replica or device: dpc_dp_forward prefixes them). */
typedef dpc_status (*dpc_replica_fn)(void *ctx, int replica, const dpc_device *dev, dpc_replica_io *io,
                                     dpc_err *e);
/* Completes a replica launched asynchronously (waits for its stream,
 * copies its outputs to the host, reports a failed kernel). */
typedef dpc_status (*dpc_replica_sync_fn)(void *ctx, int replica, const dpc_device *dev, dpc_replica_io *io,
                                          dpc_err *e);
/* Shape and dtype of output `output` for a replica given `rows` rows (the
 * whole batch with one device; -1 with no tensor input): fills
 * spec->dtype, spec->rank and spec->shape only. */
typedef dpc_status (*dpc_out_shape_fn)(void *ctx, int output, int64_t rows, dpc_tensor *spec, dpc_err *e);

/* ---- the forward --------------------------------------------------------- */

#define DPC_DP_MAX_WARNINGS 4
#define DPC_DP_WARNING_MAX 200

typedef struct dpc_dp_replica_report {
    dpc_device device;
    int64_t row_offset, rows; /* its slice of the batch (rows -1: no tensor input) */
    double seconds;           /* wall time of fn, plus sync for async kinds */
    dpc_status status;
} dpc_dp_replica_report;

/* How a forward went. Filled as far as the forward got, also on failure. */
typedef struct dpc_dp_report {
    int ndevices;   /* entries in the device list */
    int nreplicas;  /* k, replicas that ran */
    bool scattered; /* false with one device: fn got the inputs whole */
    int64_t batch;  /* dim 0 of the tensor inputs; -1 with none */
    dpc_dp_replica_report replica[DPC_MAX_DEVICES]; /* [0, nreplicas) */
    double run_seconds, gather_seconds, total_seconds;
    int nwarnings; /* may exceed DPC_DP_MAX_WARNINGS: only the first are kept */
    char warnings[DPC_DP_MAX_WARNINGS][DPC_DP_WARNING_MAX];
} dpc_dp_report;

typedef struct dpc_dp_opts {
    /* Names of the ninputs inputs for messages ("input 'x2' has batch 3 but
     * 'x1' has batch 5"); NULL, or a NULL entry, numbers them instead. */
    const char *const *input_names;
    /* If set, outputs are allocated before the replicas run and each
     * replica writes its rows in place (see dpc_replica_io). */
    dpc_out_shape_fn out_shape;
    /* Device kinds whose replicas are launched from the calling thread, in
     * replica order, before the other replicas run on the pool, and then
     * completed by sync, in replica order, after them: bit (1u << kind),
     * e.g. 1u << DPC_DEV_CUDA. sync is then required. It is called for every
     * async replica whose fn succeeded, even when another replica failed,
     * and never for one whose fn failed. */
    unsigned async_kinds;
    dpc_replica_sync_fn sync;
    /* whole[j]: input j has no batch dim and goes whole to every replica,
     * unsplit (unlike PyTorch's DataParallel, which would scatter it);
     * NULL: every input is split */
    const bool *whole;
} dpc_dp_opts;

/* The data-parallel forward described at the top of this file. pool may be
 * NULL (replicas then run one after the other on the calling thread) and
 * may have fewer threads than replicas (they then share threads). ninputs
 * tensor inputs, nscalars scalars; outputs[0..noutputs-1] receive the
 * gathered outputs, owned by the caller (dpc_tensor_free), or all NULL on
 * failure. input_names may be NULL. report may be NULL. Several threads
 * may run forwards at once (forwards sharing a pool take turns on it). */
dpc_status dpc_dp_forward(dpc_pool *pool, const dpc_device *devs, int ndev, dpc_replica_fn fn, void *ctx,
                          const dpc_tensor *const *inputs, int ninputs, const char *const *input_names,
                          const double *scalars, int nscalars, int noutputs, dpc_tensor **outputs,
                          dpc_dp_report *report, dpc_err *e);
/* The same with options (opts may be NULL). */
dpc_status dpc_dp_forward_ex(dpc_pool *pool, const dpc_device *devs, int ndev, dpc_replica_fn fn, void *ctx,
                             const dpc_tensor *const *inputs, int ninputs, const double *scalars,
                             int nscalars, int noutputs, dpc_tensor **outputs, const dpc_dp_opts *opts,
                             dpc_dp_report *report, dpc_err *e);

#endif
