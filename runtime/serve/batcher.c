/* batcher.c - the dynamic batcher of dpc.h (dpc_batcher_*, dpc_request_*).
 *
 * One queue (a FIFO list under b->lock) and one worker thread. The worker
 * takes the oldest request, adds every later request that may share its
 * batch (same dtypes, same dims past the batch dim, same keyword scalars)
 * while the rows stay within max_batch, and runs the batch when it is full
 * or the oldest request's deadline (submit time + max_delay) has passed;
 * otherwise it sleeps until that deadline or the next submit. A batch of
 * several requests is stacked on dim 0 into new tensors, run through
 * dpc_program_run (which scatters it over the replicas), and every output
 * is cut back into each request's rows; a batch of one request runs on the
 * caller's tensors and hands the outputs over as they are.
 *
 * The program is only ever entered from the worker (and from
 * dpc_batcher_new before it starts), so runs never overlap. Completion
 * callbacks run on the worker, outside the lock. */
#include "base.h"
#include "dpc_compile.h"
#include "tensor.h"

#include "api_internal.h"
#include "dpc.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct sig_input {
    const char *name;
    dpc_dtype dtype;
    int rank;
    int64_t shape[DPC_MAX_RANK]; /* -k: k times the batch; 0: a run-time dim */
} sig_input;

typedef struct sig_scalar {
    const char *name;
    dpc_scalar_type type;
    int has_default;
    double def;
} sig_scalar;

struct dpc_request {
    dpc_batcher *b;
    const dpc_tensor **in; /* nin, the caller's */
    double *scalars;       /* nsc, forward order, defaults filled */
    int64_t rows;
    dpc_request *next;
    dpc_request_done_fn done;
    void *user;
    double t_submit, t_start, t_end;
    int64_t batch_rows;
    bool finished;
    dpc_status status;
    char err[DPC_ERR_MSG];
    dpc_tensor **out;
    int nout;
};

struct dpc_batcher {
    dpc_program *p;
    int nin, nsc;
    sig_input in[DPC_MAX_IO];
    sig_scalar *sc;
    const char **scnames;
    bool stackable; /* written by the worker only (after start) */
    int max_batch, max_queue;
    double max_delay_s;
    pthread_mutex_t lock;
    pthread_cond_t wake;    /* the worker: a submit, or close */
    pthread_cond_t done_cv; /* dpc_request_wait, dpc_batcher_close */
    dpc_request *head, *tail;
    dpc_request **sel; /* max_queue + 1 slots for the batch being formed */
    struct done_call {
        dpc_request_done_fn fn;
        dpc_request *r;
        void *user;
    } *calls; /* the batch's callbacks, taken before its requests are marked done */
    bool closing, started, joined;
    pthread_t thread;
    long runs; /* batches run since warm-up */
    long fault_replica, fault_kernel, fault_batch;
    bool fault_set;
    dpc_batcher_stats st;
};

static const double TIME_BOUNDS[DPC_BATCHER_TIME_BUCKETS - 1] = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
                                                                 5e-2, 0.1,    0.25,   0.5,  1.0,  2.5,    10.0};

double dpc_batcher_bucket(int size, int i) {
    int n = size ? DPC_BATCHER_SIZE_BUCKETS : DPC_BATCHER_TIME_BUCKETS;
    if (i < 0 || i >= n - 1)
        return HUGE_VAL;
    return size ? (double)(1L << i) : TIME_BOUNDS[i];
}

static int bucket_of(int size, double v) {
    int n = size ? DPC_BATCHER_SIZE_BUCKETS : DPC_BATCHER_TIME_BUCKETS;
    for (int i = 0; i < n - 1; i++)
        if (v <= dpc_batcher_bucket(size, i))
            return i;
    return n - 1;
}

static dpc_status failmsg(dpc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static dpc_status failmsg(dpc_status s, const char *fmt, ...) {
    char msg[DPC_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dpc_set_last_error(msg);
    return s;
}

/* "[N, 4]" for input i's signature shape (dpc_sig_shape_str). */
static void sig_shape_str(const dpc_batcher *b, int i, char *out, size_t n) {
    const sig_input *t = &b->in[i];
    const char *rt[DPC_MAX_RANK] = {0};
    for (int d = 0; d < t->rank && d < DPC_MAX_RANK; d++)
        rt[d] = t->shape[d] == 0 ? dpc_program_input_rtdim(b->p, i, d) : NULL;
    dpc_sig_shape_str(t->rank, t->shape, rt, out, n);
}

/* ------------------------------------------------------------ requests */

/* Checks the inputs against forward and finds the request's rows. */
static dpc_status check_inputs(const dpc_batcher *b, const dpc_tensor *const *in, int n, int64_t *rows) {
    if (n != b->nin || (n && !in))
        return failmsg(DPC_EUSER, "forward of %s takes %d tensor input%s, got %d", dpc_program_name(b->p), b->nin,
                       b->nin == 1 ? "" : "s", n);
    *rows = -1;
    for (int i = 0; i < n; i++) {
        const sig_input *s = &b->in[i];
        const dpc_tensor *t = in[i];
        if (!t)
            return failmsg(DPC_EUSAGE, "input %d is NULL", i);
        bool dt_ok = t->dtype == s->dtype || (s->dtype == DPC_I64 && t->dtype == DPC_I32);
        if (!dt_ok)
            return failmsg(DPC_EUSER, "input '%s' must be %s, got %s", s->name, dpc_dtype_name(s->dtype),
                           dpc_dtype_name(t->dtype));
        bool ok = t->rank == s->rank;
        int64_t r = -1;
        for (int d = 0; ok && d < t->rank; d++) {
            int64_t want = s->shape[d];
            if (want > 0)
                ok = t->shape[d] == want;
            else if (want < 0) {
                ok = t->shape[d] % -want == 0;
                if (ok && d == 0)
                    r = t->shape[d] / -want;
                else if (ok && r >= 0)
                    ok = t->shape[d] == r * -want; /* a batch dim past dim 0 */
            }
        }
        if (!ok) {
            char want[256], got[256];
            sig_shape_str(b, i, want, sizeof want);
            dpc_shape_str(t->rank, t->shape, got, sizeof got);
            return failmsg(DPC_EUSER, "input '%s' must have shape %s, got %s", s->name, want, got);
        }
        if (r >= 0 && *rows >= 0 && r != *rows)
            return failmsg(DPC_EUSER, "inputs '%s' and '%s' disagree on the batch: %lld and %lld rows",
                           b->in[0].name, s->name, (long long)*rows, (long long)r);
        if (r >= 0)
            *rows = r;
    }
    if (*rows < 0)
        *rows = 1; /* no batch dim: the request runs alone */
    return DPC_OK;
}

/* Keyword scalars into forward order, defaults filled. */
static dpc_status check_scalars(const dpc_batcher *b, const char *const *names, const double *values, int nkw,
                                double *out) {
    if (nkw < 0 || (nkw > 0 && (!names || !values)))
        return failmsg(DPC_EUSAGE, "dpc_batcher_submit: keyword names or values missing");
    bool given[DPC_MAX_SCALARS] = {0};
    for (int k = 0; k < nkw; k++) {
        int i = 0;
        while (i < b->nsc && (!names[k] || strcmp(names[k], b->sc[i].name) != 0))
            i++;
        if (i == b->nsc) {
            char list[512] = "", q[256];
            for (int j = 0, l = 0; j < b->nsc && l < (int)sizeof list; j++)
                l += snprintf(list + l, sizeof list - (size_t)l, "%s%s", j ? ", " : "", b->sc[j].name);
            /* the name is the caller's (a request's): cut at a character, control bytes escaped */
            dpc_quote(names[k] ? names[k] : "", names[k] ? strlen(names[k]) : 0, q, sizeof q);
            return failmsg(DPC_EUSER, "unknown keyword '%s' (forward of %s takes %s)", q, dpc_program_name(b->p),
                           b->nsc ? list : "none");
        }
        if (given[i])
            return failmsg(DPC_EUSER, "keyword '%s' given twice", b->sc[i].name);
        given[i] = true;
        double v = values[k];
        const sig_scalar *s = &b->sc[i];
        if (s->type == DPC_SCALAR_INT && !(isfinite(v) && v == floor(v) && fabs(v) < 9.007199254740992e15))
            return failmsg(DPC_EUSER, "keyword '%s' is an int, got %g", s->name, v);
        if (s->type == DPC_SCALAR_BOOL && v != 0 && v != 1)
            return failmsg(DPC_EUSER, "keyword '%s' is a bool (0 or 1), got %g", s->name, v);
        if (s->type == DPC_SCALAR_FLOAT && !isfinite(v))
            return failmsg(DPC_EUSER, "keyword '%s' must be finite, got %g", s->name, v);
        out[i] = v;
    }
    for (int i = 0; i < b->nsc; i++)
        if (!given[i]) {
            if (!b->sc[i].has_default)
                return failmsg(DPC_EUSER, "keyword '%s' is required (it has no default)", b->sc[i].name);
            out[i] = b->sc[i].def;
        }
    return DPC_OK;
}

/* Whether b may share a batch with a: everything but the rows agrees. */
static bool compatible(const dpc_batcher *bt, const dpc_request *a, const dpc_request *b) {
    for (int i = 0; i < bt->nsc; i++)
        if (!(a->scalars[i] == b->scalars[i]))
            return false;
    for (int i = 0; i < bt->nin; i++) {
        const dpc_tensor *x = a->in[i], *y = b->in[i];
        if (x->dtype != y->dtype || x->rank != y->rank || bt->in[i].rank == 0 || bt->in[i].shape[0] >= 0)
            return false;
        for (int d = 1; d < x->rank; d++)
            if (x->shape[d] != y->shape[d])
                return false;
    }
    return true;
}

static void request_free_outputs(dpc_request *r) {
    for (int i = 0; r->out && i < r->nout; i++)
        dpc_tensor_free(r->out[i]);
    free(r->out);
    r->out = NULL;
    r->nout = 0;
}

void dpc_request_free(dpc_request *r) {
    if (!r)
        return;
    request_free_outputs(r);
    free(r->in);
    free(r->scalars);
    free(r);
}

dpc_status dpc_request_wait(dpc_request *r) {
    if (!r)
        return failmsg(DPC_EUSAGE, "dpc_request_wait: request is NULL");
    dpc_batcher *b = r->b;
    pthread_mutex_lock(&b->lock);
    while (!r->finished)
        pthread_cond_wait(&b->done_cv, &b->lock);
    pthread_mutex_unlock(&b->lock);
    return r->status;
}

dpc_status dpc_request_status(const dpc_request *r) { return r ? r->status : DPC_EUSAGE; }
const char *dpc_request_error(const dpc_request *r) { return r ? r->err : "no request (NULL)"; }
int dpc_request_num_outputs(const dpc_request *r) { return r ? r->nout : 0; }
const dpc_tensor *dpc_request_output(const dpc_request *r, int i) {
    return r && r->out && i >= 0 && i < r->nout ? r->out[i] : NULL;
}
int64_t dpc_request_batch_rows(const dpc_request *r) { return r ? r->batch_rows : 0; }
double dpc_request_queue_seconds(const dpc_request *r) { return r ? r->t_start - r->t_submit : 0; }
double dpc_request_compute_seconds(const dpc_request *r) { return r ? r->t_end - r->t_start : 0; }

dpc_status dpc_batcher_submit(dpc_batcher *b, const dpc_tensor *const *inputs, int ninputs,
                              const char *const *kw_names, const double *kw_values, int nkw,
                              dpc_request_done_fn done, void *user, dpc_request **out) {
    if (!out)
        return failmsg(DPC_EUSAGE, "dpc_batcher_submit: out is NULL");
    *out = NULL;
    if (!b)
        return failmsg(DPC_EUSAGE, "dpc_batcher_submit: batcher is NULL");
    int64_t rows;
    dpc_request *r = calloc(1, sizeof *r);
    if (r) {
        r->in = calloc((size_t)b->nin + 1, sizeof *r->in);
        r->scalars = calloc((size_t)b->nsc + 1, sizeof *r->scalars);
    }
    if (!r || !r->in || !r->scalars) {
        dpc_request_free(r);
        return failmsg(DPC_ENOMEM, "out of memory");
    }
    dpc_status s = check_inputs(b, inputs, ninputs, &rows);
    if (s == DPC_OK)
        s = check_scalars(b, kw_names, kw_values, nkw, r->scalars);
    if (s != DPC_OK) {
        dpc_request_free(r);
        pthread_mutex_lock(&b->lock);
        b->st.rejected++;
        pthread_mutex_unlock(&b->lock);
        return s;
    }
    for (int i = 0; i < b->nin; i++)
        r->in[i] = inputs[i];
    r->b = b;
    r->rows = rows;
    r->done = done;
    r->user = user;
    pthread_mutex_lock(&b->lock);
    if (b->closing || b->st.queue_depth >= b->max_queue) {
        bool closing = b->closing;
        b->st.busy++;
        pthread_mutex_unlock(&b->lock);
        dpc_request_free(r);
        return closing ? failmsg(DPC_EBUSY, "the batcher is closing")
                       : failmsg(DPC_EBUSY, "the queue is full (%d requests waiting)", b->max_queue);
    }
    r->t_submit = dpc_now_s();
    if (b->tail)
        b->tail->next = r;
    else
        b->head = r;
    b->tail = r;
    b->st.queue_depth++;
    b->st.requests++;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->lock);
    *out = r;
    return DPC_OK;
}

/* ------------------------------------------------------------- batches */

/* dpc_program_run with every scalar by name; the output count is learnt
 * from the program when a model with run-time dims chose it on this run. */
static dpc_status run_program(dpc_batcher *b, const dpc_tensor *const *in, const double *scalars,
                              dpc_tensor ***outs, int *nout) {
    int n = dpc_program_num_outputs(b->p);
    for (int attempt = 0; attempt < 2; attempt++) {
        dpc_tensor **o = calloc((size_t)n + 1, sizeof *o);
        if (!o)
            return failmsg(DPC_ENOMEM, "out of memory");
        dpc_status s = dpc_program_run(b->p, in, b->nin, b->scnames, scalars, b->nsc, o, n);
        if (s == DPC_OK) {
            *outs = o;
            *nout = n;
            return DPC_OK;
        }
        free(o);
        int now = dpc_program_num_outputs(b->p);
        if (s != DPC_EUSAGE || now == n)
            return s;
        n = now;
    }
    return DPC_EINTERNAL;
}

static void finish_fail(dpc_request *r, dpc_status s, const char *msg) {
    r->status = s;
    snprintf(r->err, sizeof r->err, "%s", msg);
    request_free_outputs(r);
}

/* Whether every output of the last run scales with the batch on dim 0. */
static bool outputs_scale(dpc_batcher *b, int nout) {
    for (int j = 0; j < nout; j++) {
        int rank;
        int64_t shape[DPC_MAX_RANK];
        if (dpc_program_output(b->p, j, NULL, &rank, shape) != DPC_OK || rank == 0 || shape[0] >= 0)
            return false;
    }
    return true;
}

/* Rows [off, off + r->rows) of out (per rows of the batch) for r. */
static dpc_status cut(const dpc_tensor *t, int64_t total, int64_t off, int64_t rows, dpc_tensor **piece) {
    dpc_err e;
    if (t->rank == 0 || total <= 0 || t->shape[0] % total != 0)
        return failmsg(DPC_EINTERNAL, "an output of %lld rows does not split over a batch of %lld",
                       t->rank ? (long long)t->shape[0] : 0LL, (long long)total);
    int64_t per = t->shape[0] / total;
    int64_t shape[DPC_MAX_RANK];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = per * rows;
    dpc_status s = dpc_tensor_new(t->dtype, t->rank, shape, piece, &e);
    if (s != DPC_OK)
        return failmsg(s, "%s", e.msg);
    size_t row_bytes = t->shape[0] ? t->nbytes / (size_t)t->shape[0] : 0;
    if ((*piece)->nbytes)
        memcpy((*piece)->data, (const char *)t->data + (size_t)(off * per) * row_bytes, (*piece)->nbytes);
    return DPC_OK;
}

/* Stacks input i of the n requests on dim 0. */
static dpc_status stack(dpc_request **rs, int n, int i, dpc_tensor **out) {
    const dpc_tensor *t0 = rs[0]->in[i];
    int64_t shape[DPC_MAX_RANK];
    memcpy(shape, t0->shape, sizeof shape);
    shape[0] = 0;
    for (int k = 0; k < n; k++)
        shape[0] += rs[k]->in[i]->shape[0];
    dpc_err e;
    dpc_status s = dpc_tensor_new(t0->dtype, t0->rank, shape, out, &e);
    if (s != DPC_OK)
        return failmsg(s, "%s", e.msg);
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        size_t nb = rs[k]->in[i]->nbytes;
        if (nb)
            memcpy((char *)(*out)->data + off, rs[k]->in[i]->data, nb);
        off += nb;
    }
    return DPC_OK;
}

static void arm_fault(dpc_batcher *b) {
    if (!b->fault_set)
        return;
    b->runs++;
    bool on = b->fault_batch == 0 || b->runs == b->fault_batch;
    dpc_program_set_fault(b->p, on ? (int)b->fault_replica : -1, on ? (int)b->fault_kernel : -1);
}

/* Runs n compatible requests as one batch and fills their results. */
static void run_batch(dpc_batcher *b, dpc_request **rs, int n) {
    int64_t rows = 0;
    for (int k = 0; k < n; k++)
        rows += rs[k]->rows;
    dpc_tensor *stacked[DPC_MAX_IO] = {0};
    const dpc_tensor *in[DPC_MAX_IO];
    dpc_status s = DPC_OK;
    for (int i = 0; i < b->nin && s == DPC_OK; i++) {
        if (n == 1)
            in[i] = rs[0]->in[i];
        else if ((s = stack(rs, n, i, &stacked[i])) == DPC_OK)
            in[i] = stacked[i];
    }
    double t0 = dpc_now_s();
    for (int k = 0; k < n; k++) {
        rs[k]->t_start = t0;
        rs[k]->batch_rows = rows;
    }
    dpc_tensor **outs = NULL;
    int nout = 0;
    char msg[DPC_ERR_MSG];
    if (s == DPC_OK) {
        arm_fault(b);
        s = run_program(b, in, rs[0]->scalars, &outs, &nout);
        snprintf(msg, sizeof msg, "%s", s == DPC_OK ? "" : dpc_program_error(b->p));
    } else {
        snprintf(msg, sizeof msg, "%s", dpc_last_error());
    }
    for (int i = 0; i < b->nin; i++)
        dpc_tensor_free(stacked[i]);
    double t1 = dpc_now_s();
    pthread_mutex_lock(&b->lock);
    b->st.batches++;
    b->st.batch_failures += s != DPC_OK;
    b->st.batch_rows_sum += (uint64_t)rows;
    b->st.batch_seconds_sum += t1 - t0;
    b->st.batch_rows[bucket_of(1, (double)rows)]++;
    pthread_mutex_unlock(&b->lock);
    bool split_ok = s != DPC_OK || n == 1 || outputs_scale(b, nout);
    if ((s == DPC_EUSER || !split_ok) && n > 1) {
        /* one request's values (or a model that mixes rows): each alone */
        for (int j = 0; outs && j < nout; j++)
            dpc_tensor_free(outs[j]);
        free(outs);
        if (!split_ok)
            b->stackable = false;
        for (int k = 0; k < n; k++)
            run_batch(b, &rs[k], 1);
        return;
    }
    for (int k = 0; k < n; k++)
        rs[k]->t_end = t1;
    if (s != DPC_OK) {
        for (int k = 0; k < n; k++)
            finish_fail(rs[k], s, msg);
        return;
    }
    if (n == 1) {
        rs[0]->out = outs;
        rs[0]->nout = nout;
        rs[0]->status = DPC_OK;
        return;
    }
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        dpc_request *r = rs[k];
        r->out = calloc((size_t)nout + 1, sizeof *r->out);
        r->nout = nout;
        dpc_status cs = r->out ? DPC_OK : failmsg(DPC_ENOMEM, "out of memory");
        for (int j = 0; j < nout && cs == DPC_OK; j++)
            cs = cut(outs[j], rows, off, r->rows, &r->out[j]);
        if (cs != DPC_OK)
            finish_fail(r, cs, dpc_last_error());
        else
            r->status = DPC_OK;
        off += r->rows;
    }
    for (int j = 0; j < nout; j++)
        dpc_tensor_free(outs[j]);
    free(outs);
}

/* The batch that starts with the oldest request: how many requests (in
 * b->sel) and whether it may run now. Called under the lock. */
static int form_batch(dpc_batcher *b, bool *full) {
    dpc_request *h = b->head;
    int n = 0;
    int64_t rows = h->rows;
    b->sel[n++] = h;
    if (b->stackable)
        for (dpc_request *r = h->next; r && rows < b->max_batch; r = r->next)
            if (rows + r->rows <= b->max_batch && compatible(b, h, r)) {
                b->sel[n++] = r;
                rows += r->rows;
            }
    *full = rows >= b->max_batch || !b->stackable || !compatible(b, h, h);
    return n;
}

static void unlink_selected(dpc_batcher *b, int n) {
    dpc_request **pp = &b->head, *prev = NULL;
    int k = 0;
    while (*pp && k < n) {
        dpc_request *r = *pp;
        if (r == b->sel[k]) {
            *pp = r->next;
            r->next = NULL;
            k++;
        } else {
            prev = r;
            pp = &r->next;
        }
    }
    b->tail = prev;
    for (dpc_request *r = b->head; r; r = r->next)
        b->tail = r;
    b->st.queue_depth -= n;
}

static void *worker(void *arg) {
    dpc_batcher *b = arg;
    pthread_mutex_lock(&b->lock);
    for (;;) {
        while (!b->head && !b->closing)
            pthread_cond_wait(&b->wake, &b->lock);
        if (!b->head)
            break; /* closing, and nothing left */
        bool full;
        int n = form_batch(b, &full);
        double deadline = b->head->t_submit + b->max_delay_s;
        double now = dpc_now_s();
        if (!full && !b->closing && now < deadline) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double wait = deadline - now;
            long ns = ts.tv_nsec + (long)((wait - floor(wait)) * 1e9);
            ts.tv_sec += (time_t)floor(wait) + ns / 1000000000L;
            ts.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&b->wake, &b->lock, &ts);
            continue;
        }
        unlink_selected(b, n);
        b->st.running = n;
        dpc_request **rs = b->sel; /* only this thread forms batches: sel stays as it is until the next */
        pthread_mutex_unlock(&b->lock);
        run_batch(b, rs, n);
        pthread_mutex_lock(&b->lock);
        b->st.running = 0;
        for (int k = 0; k < n; k++) {
            dpc_request *r = rs[k];
            double q = r->t_start - r->t_submit, c = r->t_end - r->t_start;
            b->st.queue_seconds_sum += q;
            b->st.compute_seconds_sum += c;
            b->st.queue_seconds[bucket_of(0, q)]++;
            b->st.compute_seconds[bucket_of(0, c)]++;
            if (r->status == DPC_OK)
                b->st.succeeded++;
            else
                b->st.failed++;
            b->calls[k] = (struct done_call){r->done, r, r->user};
            r->finished = true; /* from here on a waiter may free r */
        }
        pthread_cond_broadcast(&b->done_cv);
        pthread_mutex_unlock(&b->lock);
        for (int k = 0; k < n; k++)
            if (b->calls[k].fn)
                b->calls[k].fn(b->calls[k].r, b->calls[k].user); /* may free it */
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

/* --------------------------------------------------------------- set-up */

static dpc_status read_signature(dpc_batcher *b) {
    dpc_program *p = b->p;
    b->nin = dpc_program_num_inputs(p);
    b->nsc = dpc_program_num_scalars(p);
    if (b->nin > DPC_MAX_IO || b->nsc > DPC_MAX_SCALARS)
        return failmsg(DPC_EUSER, "forward has too many inputs or scalars");
    b->stackable = true;
    for (int i = 0; i < b->nin; i++) {
        sig_input *t = &b->in[i];
        if (dpc_program_input(p, i, &t->name, &t->dtype, &t->rank, t->shape) != DPC_OK)
            return failmsg(DPC_EINTERNAL, "%s", dpc_program_error(p));
        if (t->rank == 0 || t->shape[0] >= 0)
            b->stackable = false; /* an input without a batch dim 0 */
    }
    if (b->nin == 0)
        b->stackable = false;
    b->sc = calloc((size_t)b->nsc + 1, sizeof *b->sc);
    b->scnames = calloc((size_t)b->nsc + 1, sizeof *b->scnames);
    if (!b->sc || !b->scnames)
        return failmsg(DPC_ENOMEM, "out of memory");
    for (int i = 0; i < b->nsc; i++) {
        sig_scalar *s = &b->sc[i];
        if (dpc_program_scalar(p, i, &s->name, &s->type, &s->has_default, &s->def) != DPC_OK)
            return failmsg(DPC_EINTERNAL, "%s", dpc_program_error(p));
        b->scnames[i] = s->name;
    }
    /* outputs known before a run (no run-time dims): each must scale with the batch */
    int nout = dpc_program_num_outputs(p);
    if (nout > 0 && !outputs_scale(b, nout))
        b->stackable = false;
    return DPC_OK;
}

/* One forward on zeros at batch n, defaults for the scalars. */
static dpc_status warm(dpc_batcher *b, int64_t n) {
    double scalars[DPC_MAX_SCALARS];
    for (int i = 0; i < b->nsc; i++) {
        if (!b->sc[i].has_default)
            return DPC_OK; /* a required scalar: no value to warm with */
        scalars[i] = b->sc[i].def;
    }
    dpc_tensor *in[DPC_MAX_IO] = {0};
    dpc_status s = DPC_OK;
    bool skip = false;
    for (int i = 0; i < b->nin && s == DPC_OK && !skip; i++) {
        int64_t shape[DPC_MAX_RANK];
        for (int d = 0; d < b->in[i].rank; d++) {
            int64_t v = b->in[i].shape[d];
            skip |= v == 0; /* a run-time dim: no size to warm */
            shape[d] = v < 0 ? -v * n : v;
        }
        if (!skip)
            s = dpc_tensor_create(b->in[i].dtype, b->in[i].rank, shape, NULL, &in[i]);
    }
    if (s == DPC_OK && !skip) {
        dpc_tensor **outs = NULL;
        int nout = 0;
        dpc_program_set_fault(b->p, -1, -1);
        s = run_program(b, (const dpc_tensor *const *)in, scalars, &outs, &nout);
        if (s != DPC_OK)
            failmsg(s, "warm-up at batch %lld: %s", (long long)n, dpc_program_error(b->p));
        for (int j = 0; outs && j < nout; j++)
            dpc_tensor_free(outs[j]);
        free(outs);
    }
    for (int i = 0; i < b->nin; i++)
        dpc_tensor_free(in[i]);
    return s;
}

static dpc_status faults_from_env(dpc_batcher *b) {
    dpc_err e;
    bool rset, kset, bset;
    b->fault_replica = b->fault_kernel = -1;
    b->fault_batch = 0;
    dpc_status s = dpc_env_long("DPC_FAULT_REPLICA", 0, 63, &b->fault_replica, &rset, &e);
    if (s == DPC_OK)
        s = dpc_env_long("DPC_FAULT_KERNEL", 0, 1L << 30, &b->fault_kernel, &kset, &e);
    if (s == DPC_OK)
        s = dpc_env_long("DPC_FAULT_BATCH", 1, 2147483647L, &b->fault_batch, &bset, &e);
    if (s != DPC_OK)
        return failmsg(s, "%s", e.msg);
    if (rset != kset || (bset && !rset))
        return failmsg(DPC_EUSAGE, "fault injection needs DPC_FAULT_REPLICA and DPC_FAULT_KERNEL together "
                                   "(DPC_FAULT_BATCH only with both)");
    b->fault_set = rset;
    if (!bset)
        b->fault_batch = 0;
    return DPC_OK;
}

static void batcher_destroy(dpc_batcher *b) {
    if (b->started)
        pthread_cond_destroy(&b->wake), pthread_cond_destroy(&b->done_cv), pthread_mutex_destroy(&b->lock);
    free(b->sc);
    free(b->scnames);
    free(b->sel);
    free(b->calls);
    free(b);
}

dpc_status dpc_batcher_new(dpc_program *p, const dpc_batcher_opts *o, dpc_batcher **out) {
    if (!out)
        return failmsg(DPC_EUSAGE, "dpc_batcher_new: out is NULL");
    *out = NULL;
    if (!p)
        return failmsg(DPC_EUSAGE, "dpc_batcher_new: program is NULL");
    dpc_batcher_opts d = {.max_delay_us = -1};
    if (o)
        d = *o;
    if (d.max_batch < 0 || d.max_queue < 0 || d.nwarm < 0)
        return failmsg(DPC_EUSAGE, "dpc_batcher_new: max_batch, max_queue and nwarm must not be negative");
    dpc_batcher *b = calloc(1, sizeof *b);
    if (!b)
        return failmsg(DPC_ENOMEM, "out of memory");
    b->p = p;
    b->max_batch = d.max_batch ? d.max_batch : 64;
    b->max_queue = d.max_queue ? d.max_queue : 1024;
    b->max_delay_s = (d.max_delay_us < 0 ? 2000 : (double)d.max_delay_us) * 1e-6;
    b->sel = calloc((size_t)b->max_queue + 1, sizeof *b->sel);
    b->calls = calloc((size_t)b->max_queue + 1, sizeof *b->calls);
    dpc_status s = b->sel && b->calls ? read_signature(b) : failmsg(DPC_ENOMEM, "out of memory");
    if (s == DPC_OK)
        s = faults_from_env(b);
    int64_t def_warm[2] = {1, b->max_batch};
    const int64_t *ws = d.warm_batches ? d.warm_batches : def_warm;
    int nw = d.warm_batches ? d.nwarm : (b->max_batch > 1 ? 2 : 1);
    for (int i = 0; i < nw && s == DPC_OK; i++)
        if (ws[i] > 0)
            s = warm(b, ws[i]);
    if (s == DPC_OK && b->fault_set)
        dpc_program_set_fault(p, -1, -1);
    if (s != DPC_OK) {
        batcher_destroy(b);
        return s;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->wake, &ca);
    pthread_cond_init(&b->done_cv, NULL);
    pthread_condattr_destroy(&ca);
    b->started = true;
    if (pthread_create(&b->thread, NULL, worker, b) != 0) {
        batcher_destroy(b);
        return failmsg(DPC_ENOMEM, "cannot start the batcher's thread");
    }
    *out = b;
    return DPC_OK;
}

void dpc_batcher_close(dpc_batcher *b) {
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->closing = true;
    pthread_cond_broadcast(&b->wake);
    bool join = !b->joined;
    b->joined = true;
    pthread_mutex_unlock(&b->lock);
    if (join)
        pthread_join(b->thread, NULL); /* the worker leaves once the queue is empty */
}

void dpc_batcher_free(dpc_batcher *b) {
    if (!b)
        return;
    dpc_batcher_close(b);
    batcher_destroy(b);
}

void dpc_batcher_get_stats(dpc_batcher *b, dpc_batcher_stats *out) {
    if (!b || !out)
        return;
    pthread_mutex_lock(&b->lock);
    *out = b->st;
    pthread_mutex_unlock(&b->lock);
}
