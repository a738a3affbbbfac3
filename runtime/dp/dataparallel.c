/* dataparallel.c - device lists, torch.chunk splitting, and the scatter /
 * run / gather algorithm of a data-parallel forward (see dataparallel.h). */
#include "dataparallel.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- devices ------------------------------------------------------------ */

void dpc_device_name(const dpc_device *d, char *out, size_t n) {
    if (!n)
        return;
    if (d->kind == DPC_DEV_CPU)
        snprintf(out, n, "cpu");
    else if (d->kind == DPC_DEV_CUDA)
        snprintf(out, n, "cuda:%d", d->index);
    else
        snprintf(out, n, "?");
}

static bool is_space(char c) { return c == ' ' || c == '\t'; }

static dpc_status bad_entry(dpc_err *e, const char *list, int pos, const char *entry, size_t len,
                            const char *why) {
    char q[256], ql[256];
    dpc_quote(entry, len, q, sizeof q);
    dpc_quote(list, strlen(list), ql, sizeof ql);
    return dpc_errf(e, DPC_EUSAGE, "device list '%s': entry %d '%s' %s", ql, pos, q, why);
}

dpc_status dpc_parse_devices(const char *list, dpc_device *out, int max, int *n, dpc_err *e) {
    *n = 0;
    if (!list || !out || max < 1)
        return dpc_errf(e, DPC_EUSAGE, "dpc_parse_devices: no list or no room for devices");
    const char *p = list;
    int count = 0;
    bool blank = true;
    for (const char *c = list; *c; c++)
        if (!is_space(*c))
            blank = false;
    if (blank)
        return dpc_errf(e, DPC_EUSAGE, "empty device list (expected e.g. 'cpu', 'cuda:0,cuda:1')");
    for (int pos = 1;; pos++) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *s = p, *t = end;
        while (s < t && is_space(*s))
            s++;
        while (t > s && is_space(t[-1]))
            t--;
        size_t len = (size_t)(t - s);
        if (!len) {
            char ql[256];
            dpc_quote(list, strlen(list), ql, sizeof ql);
            return dpc_errf(e, DPC_EUSAGE, "device list '%s': entry %d is empty", ql, pos);
        }
        dpc_device d = {0, 0};
        if (len == 3 && !memcmp(s, "cpu", 3)) {
            d.kind = DPC_DEV_CPU;
        } else if (len >= 4 && !memcmp(s, "cpu:", 4)) {
            return bad_entry(e, list, pos, s, len, "takes no index: the CPU is written 'cpu'");
        } else if (len == 4 && !memcmp(s, "cuda", 4)) {
            d.kind = DPC_DEV_CUDA;
        } else if (len >= 5 && !memcmp(s, "cuda:", 5)) {
            d.kind = DPC_DEV_CUDA;
            const char *q = s + 5;
            if (q == t)
                return bad_entry(e, list, pos, s, len, "has no device index after 'cuda:'");
            if (*q == '-')
                return bad_entry(e, list, pos, s, len, "has a negative device index");
            long v = 0;
            for (; q < t; q++) {
                if (*q < '0' || *q > '9')
                    return bad_entry(e, list, pos, s, len,
                                     "has a device index that is not a number (expected cuda:<0, 1, ...>)");
                v = v * 10 + (*q - '0');
                if (v > DPC_MAX_DEVICE_INDEX)
                    return bad_entry(e, list, pos, s, len, "has a device index that is too large");
            }
            d.index = (int)v;
        } else {
            return bad_entry(e, list, pos, s, len,
                             "is not a device (expected 'cpu', 'cuda' or 'cuda:<index>')");
        }
        if (count == max) {
            char ql[256];
            dpc_quote(list, strlen(list), ql, sizeof ql);
            return dpc_errf(e, DPC_EUSAGE, "device list '%s' has more than %d entries", ql, max);
        }
        out[count++] = d;
        if (!*end)
            break;
        p = end + 1;
    }
    *n = count;
    return DPC_OK;
}

/* ---- splitting ----------------------------------------------------------- */

int dpc_chunk_sizes(int64_t batch, int n, int64_t *sizes, int64_t *offsets) {
    if (batch < 0 || n < 1)
        return 0;
    if (batch == 0) {
        if (sizes)
            sizes[0] = 0;
        if (offsets)
            offsets[0] = 0;
        return 1;
    }
    int64_t s = batch / n + (batch % n != 0);
    int k = (int)(batch / s + (batch % s != 0));
    for (int i = 0; i < k; i++) {
        int64_t off = s * i;
        if (sizes)
            sizes[i] = i < k - 1 ? s : batch - off;
        if (offsets)
            offsets[i] = off;
    }
    return k;
}

int dpc_dp_threads_per_replica(int ncores, int nreplicas) {
    if (ncores <= 0)
        ncores = dpc_cpu_count();
    if (nreplicas < 1)
        nreplicas = 1;
    int t = ncores / nreplicas;
    return t > 0 ? t : 1;
}

/* ---- the forward --------------------------------------------------------- */

typedef struct slot {
    _Alignas(64) dpc_err err; /* written only by the thread running the replica */
    dpc_status status;
    bool launched; /* fn returned DPC_OK (async kinds: sync is owed) */
    double seconds;
    dpc_replica_io io;
} slot;

typedef struct job {
    const dpc_device *devs;
    dpc_replica_fn fn;
    dpc_replica_sync_fn sync;
    void *ctx;
    unsigned async_kinds;
    slot *slots;
} job;

static bool is_async(const job *J, int i) { return (J->async_kinds >> J->devs[i].kind) & 1u; }

static void finish_call(slot *s, dpc_status st) {
    if (st != DPC_OK) {
        s->err.code = st;
        if (!s->err.msg[0])
            snprintf(s->err.msg, sizeof s->err.msg, "failed (%s)", dpc_status_name(st));
    }
    s->status = st;
}

static void call_fn(job *J, int i) {
    slot *s = &J->slots[i];
    double t0 = dpc_now_s();
    s->err.code = DPC_OK;
    s->err.msg[0] = 0;
    dpc_status st = J->fn(J->ctx, i, &J->devs[i], &s->io, &s->err);
    s->seconds = dpc_now_s() - t0;
    s->launched = st == DPC_OK;
    finish_call(s, st);
}

static void replica_task(void *arg, int i) {
    job *J = arg;
    if (!is_async(J, i))
        call_fn(J, i);
}

static void call_sync(job *J, int i) {
    slot *s = &J->slots[i];
    double t0 = dpc_now_s();
    dpc_status st = J->sync(J->ctx, i, &J->devs[i], &s->io, &s->err);
    s->seconds += dpc_now_s() - t0;
    finish_call(s, st);
}

/* Bytes of one dim-0 row (dims 1..) of a tensor of this dtype and shape. */
static bool row_bytes(dpc_dtype dt, int rank, const int64_t *shape, size_t *out) {
    size_t n = dpc_dtype_size(dt);
    for (int d = 1; d < rank; d++) {
        if (shape[d] < 0 || !dpc_mul_size(n, (size_t)shape[d], &n))
            return false;
    }
    *out = n;
    return true;
}

static void input_label(const char *const *names, int j, bool first, char *out, size_t n) {
    if (names && names[j]) {
        char q[200];
        dpc_quote(names[j], strlen(names[j]), q, sizeof q);
        snprintf(out, n, "'%s'", q);
    } else {
        snprintf(out, n, first ? "%d" : "input %d", j);
    }
}

dpc_status dpc_dp_batch(const dpc_tensor *const *in, int n, const char *const *names, int nsplit,
                        const char *over, int64_t *batch, dpc_err *e) {
    return dpc_dp_batch_ex(in, n, names, NULL, nsplit, over, batch, e);
}

dpc_status dpc_dp_batch_ex(const dpc_tensor *const *in, int n, const char *const *names, const bool *whole,
                           int nsplit, const char *over, int64_t *batch, dpc_err *e) {
    char la[220], lb[220];
    int first = -1;
    *batch = -1;
    for (int j = 0; j < n; j++) {
        const dpc_tensor *t = in[j];
        if (whole && whole[j])
            continue; /* passed whole to every replica: no batch to agree on */
        input_label(names, j, true, la, sizeof la);
        if (t->rank == 0) {
            if (nsplit > 1)
                return dpc_errf(e, DPC_EUSER, "input %s is 0-dim: it has no batch dimension to split across %d %s",
                                la, nsplit, over);
            continue;
        }
        size_t rb, need;
        if (t->shape[0] < 0 || !row_bytes(t->dtype, t->rank, t->shape, &rb) ||
            !dpc_mul_size(rb, (size_t)t->shape[0], &need) || t->nbytes < need)
            return dpc_errf(e, DPC_EUSAGE, "input %s: its data does not match its shape", la);
        if (first < 0) {
            first = j;
            *batch = t->shape[0];
        } else if (t->shape[0] != *batch) {
            input_label(names, first, false, lb, sizeof lb);
            return dpc_errf(e, DPC_EUSER, "input %s has batch %lld but %s has batch %lld", la,
                            (long long)t->shape[0], lb, (long long)*batch);
        }
    }
    return DPC_OK;
}

static void add_warning(dpc_dp_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_warning(dpc_dp_report *r, const char *fmt, ...) {
    if (!r)
        return;
    if (r->nwarnings < DPC_DP_MAX_WARNINGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->warnings[r->nwarnings], DPC_DP_WARNING_MAX, fmt, ap);
        va_end(ap);
    }
    r->nwarnings++;
}

static bool same_tail(const dpc_tensor *a, const dpc_tensor *b) {
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int d = 1; d < a->rank; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

static bool bytes_match(const dpc_tensor *t) {
    size_t rb, n;
    if (t->rank == 0)
        return t->nbytes == dpc_dtype_size(t->dtype);
    return row_bytes(t->dtype, t->rank, t->shape, &rb) && t->shape[0] >= 0 &&
           dpc_mul_size(rb, (size_t)t->shape[0], &n) && n == t->nbytes;
}

static void warn_scalars(dpc_dp_report *report, int j, int k) {
    add_warning(report,
                "output %d: every replica returned a 0-dim tensor; gathered as a vector of %d value%s, one "
                "per replica (as PyTorch's DataParallel does)",
                j, k, k == 1 ? "" : "s");
}

/* Concatenates output j of the k replicas on dim 0 into *out. */
static dpc_status gather_one(slot *slots, int k, int j, const dpc_device *devs, dpc_tensor **out,
                             dpc_dp_report *report, dpc_err *e) {
    char dn[DPC_DEVICE_NAME_MAX], s0[160], si[160];
    const dpc_tensor *t0 = slots[0].io.outputs[j];
    for (int i = 0; i < k; i++) {
        const dpc_tensor *t = slots[i].io.outputs[j];
        dpc_device_name(&devs[i], dn, sizeof dn);
        if (!t)
            return dpc_errf(e, DPC_EINTERNAL, "replica %d on device %s returned no output %d", i, dn, j);
        if ((unsigned)t->dtype >= DPC_NUM_DTYPES || t->rank < 0 || t->rank > DPC_MAX_RANK || !bytes_match(t))
            return dpc_errf(e, DPC_EINTERNAL, "replica %d on device %s returned a malformed output %d", i, dn, j);
        if (!same_tail(t, t0) || (t->rank == 0) != (t0->rank == 0)) {
            dpc_shape_str(t0->rank, t0->shape, s0, sizeof s0);
            dpc_shape_str(t->rank, t->shape, si, sizeof si);
            return dpc_errf(e, DPC_EINTERNAL,
                            "cannot gather output %d: replica 0 returned %s %s but replica %d on device %s "
                            "returned %s %s",
                            j, dpc_dtype_name(t0->dtype), s0, i, dn, dpc_dtype_name(t->dtype), si);
        }
    }
    if (t0->rank == 0) {
        warn_scalars(report, j, k);
        int64_t shape[1] = {k};
        dpc_status st = dpc_tensor_new(t0->dtype, 1, shape, out, e);
        if (st)
            return st;
        size_t es = dpc_dtype_size(t0->dtype);
        for (int i = 0; i < k; i++)
            memcpy((char *)(*out)->data + (size_t)i * es, slots[i].io.outputs[j]->data, es);
        return DPC_OK;
    }
    if (k == 1) { /* nothing to concatenate: hand the piece over */
        *out = slots[0].io.outputs[j];
        slots[0].io.outputs[j] = NULL;
        return DPC_OK;
    }
    int64_t shape[DPC_MAX_RANK];
    memcpy(shape, t0->shape, sizeof shape);
    shape[0] = 0;
    for (int i = 0; i < k; i++)
        if (!dpc_add_i64(shape[0], slots[i].io.outputs[j]->shape[0], &shape[0]))
            return dpc_errf(e, DPC_EINTERNAL, "cannot gather output %d: its batch overflows", j);
    dpc_status st = dpc_tensor_new(t0->dtype, t0->rank, shape, out, e);
    if (st)
        return st;
    size_t pos = 0;
    for (int i = 0; i < k; i++) {
        const dpc_tensor *t = slots[i].io.outputs[j];
        if (t->nbytes > (*out)->nbytes - pos) { /* cannot happen after the checks */
            dpc_tensor_free(*out);
            *out = NULL;
            return dpc_errf(e, DPC_EINTERNAL, "cannot gather output %d: pieces overflow the result", j);
        }
        memcpy((char *)(*out)->data + pos, t->data, t->nbytes);
        pos += t->nbytes;
    }
    return DPC_OK;
}

/* Allocates the gathered outputs up front (opts->out_shape) and points every
 * replica's outputs at its rows of them. */
static dpc_status preallocate(const dpc_dp_opts *opts, void *ctx, slot *slots, int k, bool scatter,
                              dpc_tensor *oviews, int noutputs, dpc_tensor **outputs, dpc_dp_report *report,
                              dpc_err *e) {
    for (int j = 0; j < noutputs; j++) {
        dpc_tensor spec0 = {0};
        int64_t total = 0;
        for (int i = 0; i < k; i++) {
            dpc_tensor spec;
            memset(&spec, 0, sizeof spec);
            dpc_status st = opts->out_shape(ctx, j, slots[i].io.rows, &spec, e);
            if (st)
                return st;
            bool ok = (unsigned)spec.dtype < DPC_NUM_DTYPES && spec.rank >= 0 && spec.rank <= DPC_MAX_RANK;
            for (int d = 0; ok && d < spec.rank; d++)
                ok = spec.shape[d] >= 0;
            if (!ok)
                return dpc_errf(e, DPC_EINTERNAL, "out_shape gave an invalid shape for output %d", j);
            if (i == 0)
                spec0 = spec;
            else if (!same_tail(&spec, &spec0) || (spec.rank == 0) != (spec0.rank == 0))
                return dpc_errf(e, DPC_EINTERNAL, "out_shape gave replicas different shapes for output %d", j);
            if (spec.rank > 0 && !dpc_add_i64(total, spec.shape[0], &total))
                return dpc_errf(e, DPC_EINTERNAL, "output %d: its batch overflows", j);
            oviews[i * noutputs + j] = spec; /* shape of the piece; data below */
        }
        dpc_tensor *g = NULL;
        int64_t shape[DPC_MAX_RANK];
        memcpy(shape, spec0.shape, sizeof shape);
        int rank = spec0.rank;
        if (scatter && rank == 0) {
            rank = 1;
            shape[0] = k;
            warn_scalars(report, j, k);
        } else if (scatter) {
            shape[0] = total;
        }
        dpc_status st = dpc_tensor_new(spec0.dtype, rank, shape, &g, e);
        if (st)
            return st;
        outputs[j] = g;
        if (!scatter) {
            slots[0].io.outputs[j] = g;
            continue;
        }
        size_t es = dpc_dtype_size(spec0.dtype), rb = es, pos = 0;
        if (spec0.rank > 0)
            row_bytes(spec0.dtype, spec0.rank, spec0.shape, &rb); /* checked by dpc_tensor_new */
        for (int i = 0; i < k; i++) {
            dpc_tensor *v = &oviews[i * noutputs + j];
            v->nbytes = spec0.rank ? rb * (size_t)v->shape[0] : es;
            v->data = (char *)g->data + pos;
            pos += v->nbytes;
            slots[i].io.outputs[j] = v;
        }
    }
    return DPC_OK;
}

dpc_status dpc_dp_forward(dpc_pool *pool, const dpc_device *devs, int ndev, dpc_replica_fn fn, void *ctx,
                          const dpc_tensor *const *inputs, int ninputs, const char *const *input_names,
                          const double *scalars, int nscalars, int noutputs, dpc_tensor **outputs,
                          dpc_dp_report *report, dpc_err *e) {
    dpc_dp_opts opts = {.input_names = input_names};
    return dpc_dp_forward_ex(pool, devs, ndev, fn, ctx, inputs, ninputs, scalars, nscalars, noutputs, outputs,
                             &opts, report, e);
}

/* One call of dpc_dp_forward_ex: its arguments, the scatter plan and the
 * per-replica state, handed from step to step. */
typedef struct fwd {
    dpc_pool *pool;
    const dpc_device *devs;
    int ndev;
    dpc_replica_fn fn;
    void *ctx;
    const dpc_tensor *const *inputs;
    int ninputs;
    const double *scalars;
    int nscalars;
    int noutputs;
    dpc_tensor **outputs;
    const dpc_dp_opts *opts;
    dpc_dp_report *report;
    /* the plan */
    bool scatter;
    int k; /* replicas */
    int64_t sizes[DPC_MAX_DEVICES], offs[DPC_MAX_DEVICES];
    /* one block: slots, input views, output pointers, preallocated output views */
    char *block;
    slot *slots;
    dpc_tensor *oviews;
} fwd;

/* The devices, function, inputs and scalars of a forward, checked. */
static dpc_status check_args(const fwd *F, dpc_err *e) {
    if (F->ndev < 1 || F->ndev > DPC_MAX_DEVICES || !F->devs)
        return dpc_errf(e, DPC_EUSAGE, "dpc_dp_forward: need 1 to %d devices, got %d", DPC_MAX_DEVICES, F->ndev);
    for (int i = 0; i < F->ndev; i++)
        if (F->devs[i].kind < 0 || F->devs[i].kind >= DPC_DEV_NUM_KINDS || F->devs[i].index < 0)
            return dpc_errf(e, DPC_EUSAGE, "dpc_dp_forward: device %d is invalid (kind %d, index %d)", i,
                            F->devs[i].kind, F->devs[i].index);
    if (!F->fn || F->ninputs < 0 || (F->ninputs > 0 && !F->inputs) || F->nscalars < 0 ||
        (F->nscalars > 0 && !F->scalars))
        return dpc_errf(e, DPC_EUSAGE, "dpc_dp_forward: bad function, inputs or scalars");
    if (F->opts->async_kinds && !F->opts->sync)
        return dpc_errf(e, DPC_EUSAGE, "dpc_dp_forward: async device kinds need a sync callback");
    for (int j = 0; j < F->ninputs; j++) {
        const dpc_tensor *in = F->inputs[j];
        if (!in || (unsigned)in->dtype >= DPC_NUM_DTYPES || in->rank < 0 || in->rank > DPC_MAX_RANK || !in->data)
            return dpc_errf(e, DPC_EUSAGE, "dpc_dp_forward: input %d is not a valid tensor", j);
    }
    return DPC_OK;
}

/* The scatter plan: the batch, the replicas (torch.chunk's, or one when
 * there is a single device or no input) and their rows; in the report. */
static dpc_status plan(fwd *F, dpc_err *e) {
    F->scatter = F->ndev > 1;
    int64_t batch;
    dpc_status bst = dpc_dp_batch_ex(F->inputs, F->ninputs, F->opts->input_names, F->opts->whole, F->ndev, "devices",
                                     &batch, e);
    if (bst != DPC_OK)
        return bst;
    F->k = 1;
    if (F->scatter && F->ninputs > 0) {
        F->k = dpc_chunk_sizes(batch, F->ndev, F->sizes, F->offs);
    } else {
        F->sizes[0] = batch;
        F->offs[0] = 0;
    }
    dpc_dp_report *report = F->report;
    if (report) {
        report->nreplicas = F->k;
        report->scattered = F->scatter;
        report->batch = batch;
        for (int i = 0; i < F->k; i++) {
            report->replica[i].device = F->devs[i];
            report->replica[i].row_offset = F->offs[i];
            report->replica[i].rows = F->sizes[i];
        }
    }
    return DPC_OK;
}

/* The per-replica state in one block: slots, each replica's views of its
 * rows of every input (the whole input when not scattered or opts->whole),
 * its output pointers, and the views of preallocated outputs. */
static dpc_status make_slots(fwd *F, dpc_err *e) {
    int k = F->k, ninputs = F->ninputs, noutputs = F->noutputs;
    size_t n_views = (size_t)k * (size_t)ninputs, n_outs = (size_t)k * (size_t)noutputs;
    size_t off_views = (size_t)k * sizeof(slot);
    size_t off_optr = off_views + n_views * sizeof(dpc_tensor);
    size_t off_oviews = off_optr + n_outs * sizeof(dpc_tensor *);
    size_t total = off_oviews + (F->opts->out_shape ? n_outs * sizeof(dpc_tensor) : 0);
    char *block = dpc_aligned_alloc(total);
    if (!block)
        return dpc_errf(e, DPC_ENOMEM, "out of memory preparing %d replicas", k);
    memset(block, 0, total);
    F->block = block;
    F->slots = (slot *)block;
    F->oviews = (dpc_tensor *)(block + off_oviews);
    dpc_tensor *views = (dpc_tensor *)(block + off_views);
    dpc_tensor **optrs = (dpc_tensor **)(block + off_optr);
    for (int i = 0; i < k; i++) {
        dpc_replica_io *io = &F->slots[i].io;
        io->row_offset = F->offs[i];
        io->rows = F->sizes[i]; /* -1 when there is no batch */
        io->ninputs = ninputs;
        io->inputs = views + (size_t)i * (size_t)ninputs;
        io->nscalars = F->nscalars;
        io->scalars = F->scalars;
        io->noutputs = noutputs;
        io->outputs = optrs + (size_t)i * (size_t)noutputs;
        for (int j = 0; j < ninputs; j++) {
            const dpc_tensor *t = F->inputs[j];
            dpc_tensor *v = &io->inputs[j];
            *v = *t;
            if (F->scatter && !(F->opts->whole && F->opts->whole[j])) {
                size_t rb = 0;
                row_bytes(t->dtype, t->rank, t->shape, &rb); /* checked above */
                v->shape[0] = F->sizes[i];
                v->data = (char *)t->data + rb * (size_t)F->offs[i];
                v->nbytes = rb * (size_t)F->sizes[i];
            }
        }
    }
    return DPC_OK;
}

/* Runs the replicas: the async ones launched first, the rest on the pool
 * (or in turn without one), then the async ones synced. The first failing
 * replica's error, named by replica and device when scattered. */
static dpc_status run_replicas(const fwd *F, dpc_err *e) {
    int k = F->k;
    slot *slots = F->slots;
    job J = {F->devs, F->fn, F->opts->sync, F->ctx, F->opts->async_kinds, slots};
    for (int i = 0; i < k; i++)
        if (is_async(&J, i))
            call_fn(&J, i);
    if (F->pool)
        dpc_pool_run(F->pool, k, replica_task, &J);
    else
        for (int i = 0; i < k; i++)
            replica_task(&J, i);
    for (int i = 0; i < k; i++)
        if (is_async(&J, i) && slots[i].launched)
            call_sync(&J, i);
    dpc_status st = DPC_OK;
    for (int i = 0; i < k; i++) {
        if (F->report) {
            F->report->replica[i].seconds = slots[i].seconds;
            F->report->replica[i].status = slots[i].status;
        }
        if (slots[i].status != DPC_OK && st == DPC_OK) {
            st = slots[i].status;
            if (e) {
                *e = slots[i].err;
                if (F->scatter) {
                    char dn[DPC_DEVICE_NAME_MAX];
                    dpc_device_name(&F->devs[i], dn, sizeof dn);
                    dpc_err_prefix(e, "replica %d on device %s: ", i, dn);
                }
            }
        }
    }
    return st;
}

/* The outputs: in place when preallocated (checking that fn kept the
 * views), the one replica's when not scattered, else concatenated. */
static dpc_status gather(const fwd *F, dpc_err *e) {
    dpc_status st = DPC_OK;
    slot *slots = F->slots;
    int k = F->k, noutputs = F->noutputs;
    for (int j = 0; st == DPC_OK && j < noutputs; j++) {
        if (F->opts->out_shape) {
            /* In place; make sure fn did not swap the views out. */
            for (int i = 0; i < k && st == DPC_OK; i++) {
                const dpc_tensor *want = F->scatter ? &F->oviews[(size_t)i * noutputs + j] : F->outputs[j];
                if (slots[i].io.outputs[j] != want) {
                    char dn[DPC_DEVICE_NAME_MAX];
                    dpc_device_name(&F->devs[i], dn, sizeof dn);
                    st = dpc_errf(e, DPC_EINTERNAL,
                                  "replica %d on device %s replaced its preallocated output %d", i, dn, j);
                }
            }
        } else if (!F->scatter) {
            F->outputs[j] = slots[0].io.outputs[j];
            slots[0].io.outputs[j] = NULL;
            if (!F->outputs[j])
                st = dpc_errf(e, DPC_EINTERNAL, "the model returned no output %d", j);
        } else {
            st = gather_one(slots, k, j, F->devs, &F->outputs[j], F->report, e);
        }
    }
    return st;
}

/* Frees the replicas' own outputs (not the preallocated views), every
 * output after a failure (st), and the block. */
static void release(fwd *F, dpc_status st) {
    int noutputs = F->noutputs;
    for (int i = 0; i < F->k; i++)
        for (int j = 0; j < noutputs; j++) {
            dpc_tensor *t = F->slots[i].io.outputs[j];
            bool ours = F->opts->out_shape &&
                        (F->scatter ? t == &F->oviews[(size_t)i * noutputs + j] : t == F->outputs[j]);
            if (t && !ours)
                dpc_tensor_free(t);
        }
    if (st != DPC_OK)
        for (int j = 0; j < noutputs; j++) {
            dpc_tensor_free(F->outputs[j]);
            F->outputs[j] = NULL;
        }
    dpc_free(F->block);
}

dpc_status dpc_dp_forward_ex(dpc_pool *pool, const dpc_device *devs, int ndev, dpc_replica_fn fn, void *ctx,
                             const dpc_tensor *const *inputs, int ninputs, const double *scalars,
                             int nscalars, int noutputs, dpc_tensor **outputs, const dpc_dp_opts *opts,
                             dpc_dp_report *report, dpc_err *e) {
    double t_start = dpc_now_s();
    static const dpc_dp_opts no_opts;
    if (!opts)
        opts = &no_opts;
    if (report) {
        memset(report, 0, sizeof *report);
        report->ndevices = ndev;
        report->batch = -1;
    }
    if (noutputs < 0 || (noutputs > 0 && !outputs))
        return dpc_errf(e, DPC_EUSAGE, "dpc_dp_forward: bad outputs (%d)", noutputs);
    for (int j = 0; j < noutputs; j++)
        outputs[j] = NULL;
    fwd F = {.pool = pool, .devs = devs, .ndev = ndev, .fn = fn, .ctx = ctx, .inputs = inputs,
             .ninputs = ninputs, .scalars = scalars, .nscalars = nscalars, .noutputs = noutputs,
             .outputs = outputs, .opts = opts, .report = report};
    dpc_status st;
    if ((st = check_args(&F, e)) != DPC_OK || (st = plan(&F, e)) != DPC_OK || (st = make_slots(&F, e)) != DPC_OK)
        return st;
    if (opts->out_shape)
        st = preallocate(opts, ctx, F.slots, F.k, F.scatter, F.oviews, noutputs, outputs, report, e);
    double t_run = dpc_now_s();
    if (st == DPC_OK)
        st = run_replicas(&F, e);
    double t_gather = dpc_now_s();
    if (report)
        report->run_seconds = t_gather - t_run;
    if (st == DPC_OK)
        st = gather(&F, e);
    release(&F, st);
    if (report) {
        double t_end = dpc_now_s();
        report->gather_seconds = t_end - t_gather;
        report->total_seconds = t_end - t_start;
    }
    return st;
}
