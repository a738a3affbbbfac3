/* mpi_run.c - one model as several processes under MPI (see mpi_run.h).
 *
 * The environment probes and the batch split need no MPI and are always
 * built; the collectives are built only with DPC_HAVE_MPI and otherwise
 * report that this dpc has no MPI. */
#include "mpi_run.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DPC_HAVE_MPI
#include <mpi.h>
#endif

/* ---- the launcher's environment (no MPI call) ------------------------------ */

/* The value of an environment variable holding a non-negative int, or -1. */
static int env_int(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > INT_MAX ? -1 : (int)x;
}

int dpc_mpi_env_size(void) {
    int n = env_int("OMPI_COMM_WORLD_SIZE");
    if (n < 0)
        n = env_int("PMI_SIZE");
    if (n >= 0)
        return n;
    return getenv("PMIX_RANK") ? -1 : 0;
}

int dpc_mpi_env_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (env_int(vars[i]) >= 0)
            return env_int(vars[i]);
    return -1;
}

int dpc_mpi_env_local_rank(void) {
    int r = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
    if (r < 0)
        r = env_int("MPI_LOCALRANKID");
    return r < 0 ? 0 : r;
}

/* ---- this rank's share of the batch (no MPI call) -------------------------- */

static void input_label(const char *const *names, int j, char *out, size_t n) {
    if (names && names[j]) {
        char q[200];
        dpc_quote(names[j], strlen(names[j]), q, sizeof q);
        snprintf(out, n, "'%s'", q);
    } else {
        snprintf(out, n, "%d", j);
    }
}

/* Bytes of one row (dims 1..) of t; false on overflow or a short buffer. */
static bool row_bytes(const dpc_tensor *t, size_t *rb) {
    size_t n = dpc_dtype_size(t->dtype), need;
    for (int d = 1; d < t->rank; d++)
        if (t->shape[d] < 0 || !dpc_mul_size(n, (size_t)t->shape[d], &n))
            return false;
    *rb = n;
    return t->shape[0] >= 0 && dpc_mul_size(n, (size_t)t->shape[0], &need) && need <= t->nbytes;
}

dpc_status dpc_mpi_take_share(const dpc_mpi *m, const dpc_tensor *const *in, int n, const char *const *names,
                              const bool *whole, dpc_tensor *views, dpc_mpi_share *sh, dpc_err *e) {
    *sh = (dpc_mpi_share){.scattered = m->size > 1, .batch = -1, .k = 1, .works = m->rank == 0, .rows = -1};
    for (int j = 0; j < n; j++)
        views[j] = *in[j];
    /* the batch of all tensor inputs, checked as within a process (item 5
     * of the contract) on one rank too */
    dpc_status s = dpc_dp_batch_ex(in, n, names, whole, m->size, "ranks", &sh->batch, e);
    if (s != DPC_OK)
        return s;
    sh->rows = sh->batch;
    if (!sh->scattered || n == 0)
        return DPC_OK; /* as with one device: the inputs whole, on rank 0 */
    int64_t *sizes = dpc_malloc(2 * sizeof(int64_t) * (size_t)m->size);
    if (!sizes)
        return dpc_errf(e, DPC_ENOMEM, "out of memory splitting the batch over %d ranks", m->size);
    int64_t *offs = sizes + m->size;
    sh->k = dpc_chunk_sizes(sh->batch, m->size, sizes, offs); /* the torch.chunk table of replicas */
    sh->works = m->rank < sh->k;
    sh->offset = sh->works ? offs[m->rank] : sh->batch;
    sh->rows = sh->works ? sizes[m->rank] : 0;
    dpc_free(sizes);
    for (int j = 0; j < n; j++) {
        size_t rb;
        if (whole && whole[j])
            continue; /* every rank gets it whole */
        if (!row_bytes(in[j], &rb)) {
            char la[220];
            input_label(names, j, la, sizeof la);
            return dpc_errf(e, DPC_EUSAGE, "input %s: its data does not match its shape", la);
        }
        views[j].shape[0] = sh->rows;
        views[j].data = (char *)in[j]->data + rb * (size_t)sh->offset;
        views[j].nbytes = rb * (size_t)sh->rows;
    }
    return DPC_OK;
}

#ifndef DPC_HAVE_MPI

/* ---- built without MPI -------------------------------------------------------- */

static dpc_status no_mpi(dpc_err *e) {
    return dpc_errf(e, DPC_EUSAGE, "this dpc was built without MPI (configure with -DDPC_MPI=on and an MPI "
                                   "such as Open MPI installed)");
}

bool dpc_mpi_built(void) { return false; }
dpc_status dpc_mpi_init(dpc_mpi *m, dpc_err *e) {
    *m = (dpc_mpi){.rank = 0, .size = 1};
    return no_mpi(e);
}
void dpc_mpi_finalize(dpc_mpi *m) { m->active = false; }
dpc_status dpc_mpi_agree(const dpc_mpi *m, int rc, const char *text, size_t len, int *fail_rank, int *fail_rc,
                         char **fail_text, dpc_err *e) {
    *fail_rank = -1;
    *fail_text = NULL;
    return no_mpi(e);
}
dpc_status dpc_mpi_gather(const dpc_mpi *m, const dpc_mpi_share *sh, dpc_tensor **local, int n,
                          dpc_tensor **gathered, int *nzero_dim, const dpc_mpi_rank_report *me,
                          dpc_mpi_rank_report **all, dpc_err *e) {
    *all = NULL;
    return no_mpi(e);
}
dpc_status dpc_mpi_bcast_status(const dpc_mpi *m, dpc_status s) { return s; }

#else

/* ---- with MPI ----------------------------------------------------------------- */

#define TEXT_MAX (64 * 1024)

bool dpc_mpi_built(void) { return true; }

/* Zeroed memory, or the end of the job: one rank cannot leave a collective
 * the others are in, and MPI_Abort ends every rank with a non-zero status. */
static void *must_alloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p)
        MPI_Abort(MPI_COMM_WORLD, 1);
    return p;
}

static dpc_status mpi_failed(dpc_err *e, const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    return dpc_errf(e, DPC_EIO, "MPI: %s failed: %s", what, msg);
}

dpc_status dpc_mpi_init(dpc_mpi *m, dpc_err *e) {
    *m = (dpc_mpi){.rank = 0, .size = 1};
    int provided, rc;
    /* FUNNELED: the replicas' pool threads exist but only this one calls MPI */
    if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
        return mpi_failed(e, "MPI_Init_thread", rc);
    m->active = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    return DPC_OK;
}

void dpc_mpi_finalize(dpc_mpi *m) {
    if (m->active)
        MPI_Finalize();
    m->active = false;
}

dpc_status dpc_mpi_agree(const dpc_mpi *m, int rc, const char *text, size_t len, int *fail_rank, int *fail_rc,
                         char **fail_text, dpc_err *e) {
    *fail_rank = -1;
    *fail_rc = 0;
    *fail_text = NULL;
    int mine = rc ? m->rank : m->size, low, r;
    if ((r = MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD)) != MPI_SUCCESS)
        return mpi_failed(e, "MPI_Allreduce", r);
    if (low >= m->size)
        return DPC_OK;
    /* the failing rank tells everyone its exit status and rank 0 its text */
    int hdr[2] = {rc, (int)(len < TEXT_MAX ? len : TEXT_MAX)};
    if ((r = MPI_Bcast(hdr, 2, MPI_INT, low, MPI_COMM_WORLD)) != MPI_SUCCESS)
        return mpi_failed(e, "MPI_Bcast", r);
    *fail_rank = low;
    *fail_rc = hdr[0];
    if (m->rank == low && low != 0)
        r = MPI_Send(text, hdr[1], MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    if (m->rank != 0)
        return r == MPI_SUCCESS ? DPC_OK : mpi_failed(e, "MPI_Send", r);
    char *t = must_alloc((size_t)hdr[1] + 1);
    if (low == 0 && hdr[1])
        memcpy(t, text, (size_t)hdr[1]);
    else if ((r = MPI_Recv(t, hdr[1], MPI_CHAR, low, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
        free(t);
        return mpi_failed(e, "MPI_Recv", r);
    }
    t[hdr[1]] = 0;
    *fail_text = t;
    return DPC_OK;
}

/* What each rank says about one output before any data moves. */
enum { M_STATE, M_DTYPE, M_RANK, M_SHAPE, META = M_SHAPE + DPC_MAX_RANK };
enum { PIECE_NONE = 0, PIECE_OK = 1, PIECE_BAD = 2 };

/* A piece as rows: a 0-dim piece is one row of one element. */
static void piece_meta(const dpc_tensor *t, bool works, int64_t *meta) {
    memset(meta, 0, META * sizeof *meta);
    if (!works)
        return;
    meta[M_STATE] = PIECE_BAD;
    if (!t || (unsigned)t->dtype >= DPC_NUM_DTYPES || t->rank < 0 || t->rank > DPC_MAX_RANK)
        return;
    meta[M_DTYPE] = t->dtype;
    meta[M_RANK] = t->rank ? t->rank : 1;
    meta[M_SHAPE] = t->rank ? t->shape[0] : 1;
    for (int d = 1; d < t->rank; d++)
        meta[M_SHAPE + d] = t->shape[d];
    size_t rb = dpc_dtype_size(t->dtype), need;
    for (int d = 1; d < t->rank; d++)
        if (t->shape[d] < 0 || !dpc_mul_size(rb, (size_t)t->shape[d], &rb))
            return;
    if (meta[M_SHAPE] >= 0 && dpc_mul_size(rb, (size_t)meta[M_SHAPE], &need) && need == t->nbytes)
        meta[M_STATE] = PIECE_OK;
}

static void meta_str(const int64_t *meta, char *out, size_t n) {
    char sh[160];
    dpc_shape_str((int)meta[M_RANK], meta + M_SHAPE, sh, sizeof sh);
    snprintf(out, n, "%s %s", dpc_dtype_name((dpc_dtype)meta[M_DTYPE]), sh);
}

/* Rank 0: checks output j's pieces (meta[r * stride]) against rank 0's,
 * and allocates the gathered tensor; counts[r] are rows, *rb row bytes. */
static dpc_status plan_output(const dpc_mpi *m, int j, const int64_t *meta, size_t stride, int *counts,
                              int *displs, size_t *rb, dpc_tensor **out, dpc_err *e) {
    const int64_t *m0 = meta;
    char a[200], b[200];
    int64_t total = 0;
    for (int r = 0; r < m->size; r++) {
        const int64_t *mr = meta + (size_t)r * stride;
        counts[r] = displs[r] = 0;
        if (mr[M_STATE] == PIECE_NONE)
            continue;
        if (mr[M_STATE] == PIECE_BAD)
            return dpc_errf(e, DPC_EINTERNAL, "rank %d: output %d is missing or malformed", r, j);
        bool same = mr[M_DTYPE] == m0[M_DTYPE] && mr[M_RANK] == m0[M_RANK];
        for (int d = 1; same && d < mr[M_RANK]; d++)
            same = mr[M_SHAPE + d] == m0[M_SHAPE + d];
        if (!same) {
            meta_str(m0, a, sizeof a);
            meta_str(mr, b, sizeof b);
            return dpc_errf(e, DPC_EINTERNAL, "rank %d: cannot gather output %d: rank 0 returned %s but rank %d %s",
                            r, j, a, r, b);
        }
        if (mr[M_SHAPE] > INT_MAX || total + mr[M_SHAPE] > INT_MAX)
            return dpc_errf(e, DPC_EUSER, "output %d: more than %d rows cannot be gathered with MPI", j, INT_MAX);
        displs[r] = (int)total;
        counts[r] = (int)mr[M_SHAPE];
        total += mr[M_SHAPE];
    }
    int64_t shape[DPC_MAX_RANK];
    memcpy(shape, m0 + M_SHAPE, sizeof shape);
    shape[0] = total;
    dpc_status s = dpc_tensor_new((dpc_dtype)m0[M_DTYPE], (int)m0[M_RANK], shape, out, e);
    if (s != DPC_OK)
        return s;
    *rb = total ? (*out)->nbytes / (size_t)total : 0;
    if (*rb > INT_MAX) {
        dpc_tensor_free(*out);
        *out = NULL;
        return dpc_errf(e, DPC_EUSER, "output %d: a row of %zu bytes is too large for MPI", j, *rb);
    }
    return DPC_OK;
}

/* Moves output j's rows to rank 0, one MPI element per row. */
static dpc_status move_output(const dpc_mpi *m, const dpc_tensor *piece, int64_t rows, int64_t rb,
                              const int *counts, const int *displs, dpc_tensor *g, dpc_err *e) {
    static char none;
    MPI_Datatype row;
    int r = MPI_Type_contiguous((int)rb, MPI_BYTE, &row);
    if (r == MPI_SUCCESS)
        r = MPI_Type_commit(&row);
    if (r != MPI_SUCCESS)
        return mpi_failed(e, "MPI_Type_contiguous", r);
    r = MPI_Gatherv(piece ? piece->data : &none, (int)rows, row, g ? g->data : NULL, counts, displs, row, 0,
                    MPI_COMM_WORLD);
    MPI_Type_free(&row);
    return r == MPI_SUCCESS ? DPC_OK : mpi_failed(e, "MPI_Gatherv", r);
}

/* Rank 0's plan for every output: plan[0] a status, plan[1 + j] the row
 * bytes of output j (0: nothing to move). */
static dpc_status plan_all(const dpc_mpi *m, int n, const int64_t *meta, int *counts, int *displs,
                           dpc_tensor **gathered, int64_t *plan, dpc_err *e) {
    size_t stride = (size_t)n * META;
    for (int j = 0; j < n; j++) {
        size_t rb = 0;
        dpc_status s = plan_output(m, j, meta + (size_t)j * META, stride, counts + (size_t)j * m->size,
                                   displs + (size_t)j * m->size, &rb, &gathered[j], e);
        if (s != DPC_OK)
            return s;
        plan[1 + j] = (int64_t)rb;
    }
    return DPC_OK;
}

dpc_status dpc_mpi_gather(const dpc_mpi *m, const dpc_mpi_share *sh, dpc_tensor **local, int n,
                          dpc_tensor **gathered, int *nzero_dim, const dpc_mpi_rank_report *me,
                          dpc_mpi_rank_report **all, dpc_err *e) {
    for (int j = 0; j < n; j++)
        gathered[j] = NULL;
    *nzero_dim = 0;
    bool root = m->rank == 0;
    *all = root ? must_alloc((size_t)m->size * sizeof **all) : NULL;
    if (m->size == 1) { /* one rank: nothing to gather, as with one device */
        for (int j = 0; j < n; j++)
            gathered[j] = local[j], local[j] = NULL;
        (*all)[0] = *me;
        return DPC_OK;
    }
    size_t nm = (size_t)n * META, ns = (size_t)m->size;
    /* this rank's meta, rank 0's view of every rank's, the plan; counts, displs, 0-dim flags */
    int64_t *mine = must_alloc((nm + (root ? nm * ns : 0) + (size_t)n + 1) * sizeof(int64_t));
    int *cnt = must_alloc((2 * ns * (size_t)n + (size_t)n + 1) * sizeof(int));
    int64_t *every = mine + nm, *plan = every + (root ? nm * ns : 0);
    int *dsp = cnt + ns * (size_t)n, *zero = dsp + ns * (size_t)n;
    for (int j = 0; j < n; j++) {
        piece_meta(local[j], sh->works, mine + (size_t)j * META);
        zero[j] = sh->works && local[j] && local[j]->rank == 0; /* becomes a row of a vector */
    }
    int r = MPI_Gather(me, (int)sizeof *me, MPI_BYTE, *all, (int)sizeof *me, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (r == MPI_SUCCESS)
        r = MPI_Gather(mine, (int)nm, MPI_INT64_T, every, (int)nm, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (r == MPI_SUCCESS)
        r = MPI_Reduce(root ? MPI_IN_PLACE : zero, zero, n, MPI_INT, MPI_LOR, 0, MPI_COMM_WORLD);
    dpc_status s = r == MPI_SUCCESS ? DPC_OK : mpi_failed(e, "MPI_Gather", r);
    if (root && s == DPC_OK) {
        plan[0] = plan_all(m, n, every, cnt, dsp, gathered, plan, e);
        for (int j = 0; j < n; j++)
            *nzero_dim += zero[j] != 0;
    }
    if (s == DPC_OK && (r = MPI_Bcast(plan, n + 1, MPI_INT64_T, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
        s = mpi_failed(e, "MPI_Bcast", r);
    if (s == DPC_OK && plan[0] != DPC_OK)
        s = root ? (dpc_status)plan[0] : dpc_errf(e, (dpc_status)plan[0], "rank 0 could not gather the outputs");
    for (int j = 0; s == DPC_OK && j < n; j++)
        if (plan[1 + j] > 0)
            s = move_output(m, sh->works ? local[j] : NULL, sh->works ? mine[(size_t)j * META + M_SHAPE] : 0,
                            plan[1 + j], cnt + (size_t)j * ns, dsp + (size_t)j * ns, gathered[j], e);
    free(mine), free(cnt);
    if (s != DPC_OK) {
        for (int j = 0; j < n; j++)
            dpc_tensor_free(gathered[j]), gathered[j] = NULL;
        free(*all);
        *all = NULL;
    }
    return s;
}

dpc_status dpc_mpi_bcast_status(const dpc_mpi *m, dpc_status s) {
    int v = (int)s;
    if (m->size > 1)
        MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return (dpc_status)v;
}

#endif
