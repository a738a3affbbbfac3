/* serve.c - `dpc serve`: a KServe v2 (Open Inference Protocol) HTTP/REST
 * server over libmicrohttpd and cJSON, with libdpc's dynamic batcher
 * (dpc_batcher_*, runtime/serve/batcher.c) behind it. Contract:
 * ../shared/spec/serve.md; user guide: docs/serve.md.
 *
 * Threads: libmicrohttpd's pool (epoll, HTTP_THREADS threads) reads
 * requests, parses JSON and writes responses; an infer request is
 * validated, handed to the batcher, and its connection suspended
 * (MHD_suspend_connection) so that no HTTP thread ever waits for a model.
 * The batcher's worker runs the batches and, per request, resumes its
 * connection from the completion callback; the HTTP thread then builds the
 * response. A signal thread waits for SIGINT/SIGTERM: during start-up it
 * kills the kernel compilers and exits, while serving it starts the drain
 * (stop accepting, run what is queued, answer it, exit 0). */
#include "serve.h"
#include "cli.h"
#include "import.h"
#include "serve_req.h"

#include "artifact.h"
#include "base.h"
#include "tensor.h"

#include "dpc.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define HTTP_THREADS 4
#define CONN_LIMIT 1024
#define CONN_TIMEOUT_S 60
#define DEFAULT_MAX_BODY (64L << 20)
#define DRAIN_TIMEOUT_S 30.0

typedef struct server {
    dpc_program *p;
    dpc_batcher *b;
    srv_sig sig; /* name, inputs, output count, body limit: what requests are parsed against */
    int nsc;
    int out_rank[DPC_MAX_IO];
    int64_t out_shape[DPC_MAX_IO][DPC_MAX_RANK];
    int max_batch;
    struct MHD_Daemon *d;
    _Atomic bool draining;
    _Atomic long inflight; /* submitted, response not finished */
    _Atomic unsigned long http[6]; /* 200, 400, 404, 405, 500, 503 */
} server;

static server g_srv;

/* ----------------------------------------------------------- responses */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const void *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }
static void putf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof tmp) {
        char *big = malloc((size_t)n + 1);
        if (!big) {
            b->oom = true;
            return;
        }
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        put(b, big, (size_t)n);
        free(big);
    } else if (n > 0) {
        put(b, tmp, (size_t)n);
    }
}
/* A JSON string, escaped by cJSON; made valid UTF-8 first (a request's
 * "id" may hold any bytes, and cJSON passes them through). */
static void put_jstr(buf *b, const char *s) {
    size_t len = strlen(s);
    char *u = NULL;
    if (!dpc_utf8_valid(s, len, NULL)) {
        size_t n = 3 * len + 1; /* each byte at most U+FFFD */
        if (!(u = malloc(n))) {
            b->oom = true;
            return;
        }
        srv_utf8(s, u, n);
    }
    cJSON *j = cJSON_CreateString(u ? u : s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    if (t)
        puts_(b, t);
    else
        b->oom = true;
    free(t);
    free(u);
    cJSON_Delete(j);
}

static int code_slot(unsigned code) {
    switch (code) {
    case 200: return 0;
    case 400: return 1;
    case 404: return 2;
    case 405: return 3;
    case 500: return 4;
    default: return 5;
    }
}

static enum MHD_Result send_body(struct MHD_Connection *c, unsigned code, char *body, size_t len, const char *ctype,
                                 long header_len) {
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(len, body, free);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (header_len >= 0) {
        char n[32];
        snprintf(n, sizeof n, "%ld", header_len);
        MHD_add_response_header(r, "Inference-Header-Content-Length", n);
    }
    atomic_fetch_add(&g_srv.http[code_slot(code)], 1);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned code, buf *b, const char *ctype, long hlen) {
    if (b->oom) {
        free(b->p);
        return MHD_NO;
    }
    if (!b->p)
        puts_(b, "");
    return send_body(c, code, b->p, b->len, ctype, hlen);
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned code, cJSON *j) {
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!t)
        return MHD_NO;
    return send_body(c, code, t, strlen(t), "application/json", -1);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned code, const char *fmt, ...) {
    char msg[DPC_ERR_MSG], clean[DPC_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Names in messages come from requests and models, and vsnprintf may
     * cut one mid-character: the body is valid UTF-8 whatever they hold
     * (Python's json cannot read it otherwise). */
    srv_utf8(msg, clean, sizeof clean);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", clean);
    return send_json(c, code, j);
}

/* --------------------------------------------------------------- infer */

typedef struct infer_ctx {
    bool is_infer;
    char *body;
    size_t len, cap;
    bool too_big;
    long header_len; /* Inference-Header-Content-Length, -1 none */
    struct MHD_Connection *conn;
    srv_req q; /* the parsed request (serve_req.h) */
    dpc_request *r;
    _Atomic int state; /* 0 reading, 1 submitted, 2 done */
    bool submitted;
} infer_ctx;

static void ctx_free(infer_ctx *x) {
    if (!x)
        return;
    dpc_request_free(x->r);
    srv_req_free(&x->q);
    free(x->body);
    free(x);
}

static void on_done(dpc_request *r, void *user) {
    infer_ctx *x = user;
    (void)r;
    atomic_store(&x->state, 2);
    MHD_resume_connection(x->conn);
}

static const char *dtype_kserve(dpc_dtype d) {
    switch (d) {
    case DPC_F32: return "FP32";
    case DPC_I64: return "INT64";
    case DPC_I32: return "INT32";
    case DPC_F16: return "FP16";
    case DPC_BOOL: return "BOOL";
    default: return "FP32";
    }
}

static void put_float(buf *b, float v) {
    if (isnan(v))
        puts_(b, "NaN");
    else if (isinf(v))
        puts_(b, v > 0 ? "Infinity" : "-Infinity");
    else
        putf(b, "%.9g", (double)v);
}

static enum MHD_Result respond_infer(struct MHD_Connection *c, infer_ctx *x) {
    dpc_request *r = x->r;
    dpc_status s = dpc_request_status(r);
    if (s != DPC_OK)
        return send_error(c, s == DPC_EUSER ? 400 : 500, "%s", dpc_request_error(r));
    int nout = dpc_request_num_outputs(r);
    int sel[DPC_MAX_IO];
    bool bin[DPC_MAX_IO];
    int nsel = x->q.nsel;
    if (nsel < 0) {
        nsel = nout < DPC_MAX_IO ? nout : DPC_MAX_IO;
        for (int j = 0; j < nsel; j++)
            sel[j] = j, bin[j] = x->q.bin_all;
    } else {
        memcpy(sel, x->q.sel, sizeof sel);
        memcpy(bin, x->q.bin, sizeof bin);
    }
    for (int k = 0; k < nsel; k++)
        if (sel[k] >= nout)
            return send_error(c, 400, "unknown output 'output%d' (%s returns %d)", sel[k], g_srv.sig.name, nout);
    buf b = {0};
    puts_(&b, "{\"model_name\":");
    put_jstr(&b, g_srv.sig.name);
    puts_(&b, ",\"model_version\":\"1\"");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(x->q.json, "id");
    if (cJSON_IsString(id)) {
        puts_(&b, ",\"id\":");
        put_jstr(&b, id->valuestring);
    }
    puts_(&b, ",\"outputs\":[");
    bool any_bin = false;
    for (int k = 0; k < nsel; k++) {
        const dpc_tensor *t = dpc_request_output(r, sel[k]);
        putf(&b, "%s{\"name\":\"output%d\",\"datatype\":\"%s\",\"shape\":[", k ? "," : "", sel[k],
             dtype_kserve(dpc_tensor_dtype(t)));
        for (int d = 0; d < dpc_tensor_rank(t); d++)
            putf(&b, "%s%lld", d ? "," : "", (long long)dpc_tensor_dim(t, d));
        puts_(&b, "]");
        int64_t n = dpc_tensor_numel(t);
        const void *data = dpc_tensor_data((dpc_tensor *)t);
        if (bin[k]) {
            putf(&b, ",\"parameters\":{\"binary_data_size\":%zu}}", dpc_tensor_nbytes(t));
            any_bin = true;
            continue;
        }
        puts_(&b, ",\"data\":[");
        for (int64_t i = 0; i < n; i++) {
            if (i)
                puts_(&b, ",");
            if (dpc_tensor_dtype(t) == DPC_F32)
                put_float(&b, ((const float *)data)[i]);
            else if (dpc_tensor_dtype(t) == DPC_I64)
                putf(&b, "%lld", (long long)((const int64_t *)data)[i]);
            else
                puts_(&b, "0");
        }
        puts_(&b, "]}");
    }
    puts_(&b, "]}");
    if (!any_bin)
        return send_buf(c, 200, &b, "application/json", -1);
    long hlen = (long)b.len;
    for (int k = 0; k < nsel; k++)
        if (bin[k]) {
            const dpc_tensor *t = dpc_request_output(r, sel[k]);
            put(&b, dpc_tensor_data((dpc_tensor *)t), dpc_tensor_nbytes(t));
        }
    return send_buf(c, 200, &b, "application/octet-stream", hlen);
}

static enum MHD_Result infer_step(struct MHD_Connection *c, infer_ctx *x, const char *upload, size_t *upload_size) {
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (x->too_big || x->len + n > (size_t)g_srv.sig.max_body) {
            x->too_big = true; /* read and dropped, answered at the end */
            return MHD_YES;
        }
        if (x->len + n + 1 > x->cap) {
            size_t cap = x->cap ? x->cap : 65536;
            while (cap < x->len + n + 1)
                cap *= 2;
            char *q = realloc(x->body, cap);
            if (!q)
                return send_error(c, 500, "out of memory reading the request body");
            x->body = q;
            x->cap = cap;
        }
        memcpy(x->body + x->len, upload, n);
        x->len += n;
        return MHD_YES;
    }
    int st = atomic_load(&x->state);
    if (st == 2)
        return respond_infer(c, x);
    if (st == 1)
        return MHD_YES; /* resumed spuriously: still running */
    if (x->too_big)
        return send_error(c, 400, "the request body is over the limit of %ld bytes", g_srv.sig.max_body);
    char err[DPC_ERR_MSG];
    if (!srv_req_parse(&g_srv.sig, x->body, x->len, x->header_len, &x->q, err, sizeof err))
        return send_error(c, 400, "%s", err);
    if (atomic_load(&g_srv.draining))
        return send_error(c, 503, "the server is shutting down");
    x->conn = c;
    atomic_store(&x->state, 1);
    MHD_suspend_connection(c); /* before the submit: the batch may finish at once */
    dpc_status s = dpc_batcher_submit(g_srv.b, (const dpc_tensor *const *)x->q.in, g_srv.sig.nin, x->q.kw_names,
                                      x->q.kw_values, x->q.nkw, on_done, x, &x->r);
    if (s != DPC_OK) {
        MHD_resume_connection(c);
        atomic_store(&x->state, 0);
        return send_error(c, s == DPC_EBUSY ? 503 : s == DPC_EUSER || s == DPC_EUSAGE ? 400 : 500, "%s",
                          dpc_last_error());
    }
    x->submitted = true;
    atomic_fetch_add(&g_srv.inflight, 1);
    return MHD_YES;
}

/* ------------------------------------------------------------ metadata */

static cJSON *shape_json(int rank, const int64_t *shape) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < rank; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(shape[d] <= 0 ? -1 : (double)shape[d]));
    return a;
}

static cJSON *model_metadata(void) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", g_srv.sig.name);
    cJSON *v = cJSON_AddArrayToObject(j, "versions");
    cJSON_AddItemToArray(v, cJSON_CreateString("1"));
    cJSON_AddStringToObject(j, "platform", "dpc");
    cJSON *in = cJSON_AddArrayToObject(j, "inputs");
    for (int i = 0; i < g_srv.sig.nin; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", g_srv.sig.in[i].name);
        cJSON_AddStringToObject(t, "datatype", g_srv.sig.in[i].dtype == DPC_I64 ? "INT64" : "FP32");
        cJSON_AddItemToObject(t, "shape", shape_json(g_srv.sig.in[i].rank, g_srv.sig.in[i].shape));
        cJSON_AddItemToArray(in, t);
    }
    cJSON *out = cJSON_AddArrayToObject(j, "outputs");
    for (int i = 0; i < g_srv.sig.nout; i++) {
        cJSON *t = cJSON_CreateObject();
        char nm[32];
        snprintf(nm, sizeof nm, "output%d", i);
        cJSON_AddStringToObject(t, "name", nm);
        cJSON_AddStringToObject(t, "datatype", "FP32");
        cJSON_AddItemToObject(t, "shape", shape_json(g_srv.out_rank[i], g_srv.out_shape[i]));
        cJSON_AddItemToArray(out, t);
    }
    cJSON *params = cJSON_AddObjectToObject(j, "parameters");
    for (int i = 0; i < g_srv.nsc; i++) {
        const char *name;
        dpc_scalar_type type;
        int has_def;
        double def;
        if (dpc_program_scalar(g_srv.p, i, &name, &type, &has_def, &def) != DPC_OK)
            continue;
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", type == DPC_SCALAR_FLOAT ? "float" : type == DPC_SCALAR_INT ? "int" : "bool");
        if (has_def)
            cJSON_AddNumberToObject(s, "default", def);
        cJSON_AddItemToObject(params, name, s);
    }
    return j;
}

static cJSON *model_config(void) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", g_srv.sig.name);
    cJSON_AddStringToObject(j, "platform", "dpc");
    cJSON_AddNumberToObject(j, "max_batch_size", 0); /* shapes carry the batch dim themselves */
    cJSON *db = cJSON_AddObjectToObject(j, "dynamic_batching");
    cJSON_AddNumberToObject(db, "max_batch_rows", g_srv.max_batch);
    return j;
}

static void metric_hist(buf *b, const char *name, const char *help, const uint64_t *counts, int n, int size,
                        double sum) {
    putf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < n; i++) {
        cum += counts[i];
        double le = dpc_batcher_bucket(size, i);
        if (isinf(le))
            putf(b, "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", name, g_srv.sig.name, (unsigned long long)cum);
        else
            putf(b, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", name, g_srv.sig.name, le, (unsigned long long)cum);
    }
    putf(b, "%s_sum{model=\"%s\"} %.9g\n%s_count{model=\"%s\"} %llu\n", name, g_srv.sig.name, sum, name, g_srv.sig.name,
         (unsigned long long)cum);
}

static enum MHD_Result metrics(struct MHD_Connection *c) {
    dpc_batcher_stats st;
    dpc_batcher_get_stats(g_srv.b, &st);
    buf b = {0};
    const char *m = g_srv.sig.name;
#define COUNTER(n, h, v)                                                                                           \
    putf(&b, "# HELP " n " " h "\n# TYPE " n " counter\n" n "{model=\"%s\"} %llu\n", m, (unsigned long long)(v))
#define GAUGE(n, h, v) putf(&b, "# HELP " n " " h "\n# TYPE " n " gauge\n" n "{model=\"%s\"} %lld\n", m, (long long)(v))
    COUNTER("dpc_requests_total", "Inference requests accepted by the batcher.", st.requests);
    COUNTER("dpc_request_success_total", "Inference requests answered with outputs.", st.succeeded);
    COUNTER("dpc_request_failures_total", "Inference requests accepted whose batch failed.", st.failed);
    COUNTER("dpc_requests_invalid_total", "Inference requests refused by the batcher as not matching forward.",
            st.rejected);
    COUNTER("dpc_requests_busy_total", "Inference requests refused because the queue was full (503).", st.busy);
    COUNTER("dpc_batches_total", "Batches run (forward calls).", st.batches);
    COUNTER("dpc_batch_failures_total", "Batches whose forward failed.", st.batch_failures);
    GAUGE("dpc_queue_depth", "Requests waiting in the queue.", st.queue_depth);
    GAUGE("dpc_running_requests", "Requests in the batch running now.", st.running);
    GAUGE("dpc_inflight_requests", "Requests submitted and not yet answered.", atomic_load(&g_srv.inflight));
    metric_hist(&b, "dpc_batch_size", "Rows per batch.", st.batch_rows, DPC_BATCHER_SIZE_BUCKETS, 1,
                (double)st.batch_rows_sum);
    putf(&b, "# HELP dpc_batch_seconds_total Seconds the worker spent in the forwards of batches.\n"
             "# TYPE dpc_batch_seconds_total counter\ndpc_batch_seconds_total{model=\"%s\"} %.9g\n",
         m, st.batch_seconds_sum);
    metric_hist(&b, "dpc_queue_seconds", "Time a request waited in the queue.", st.queue_seconds,
                DPC_BATCHER_TIME_BUCKETS, 0, st.queue_seconds_sum);
    metric_hist(&b, "dpc_compute_seconds", "Time of the batch a request ran in.", st.compute_seconds,
                DPC_BATCHER_TIME_BUCKETS, 0, st.compute_seconds_sum);
    static const char *codes[6] = {"200", "400", "404", "405", "500", "503"};
    puts_(&b, "# HELP dpc_http_responses_total HTTP responses by status code.\n"
              "# TYPE dpc_http_responses_total counter\n");
    for (int i = 0; i < 6; i++)
        putf(&b, "dpc_http_responses_total{code=\"%s\"} %lu\n", codes[i], atomic_load(&g_srv.http[i]));
#undef COUNTER
#undef GAUGE
    return send_buf(c, 200, &b, "text/plain; version=0.0.4", -1);
}

/* ------------------------------------------------------------- routing */

/* Request bytes in a message: serve_req.h's srv_echo into out. */
static const char *echo(char *out, size_t n, const char *s, size_t len) {
    srv_echo(s, len, out, n);
    return out;
}

/* A POST to /v2/models/NAME/infer: the context its body is read into. */
static enum MHD_Result infer_start(struct MHD_Connection *c, void **con_cls) {
    char q[256];
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtod(cl, NULL) > (double)g_srv.sig.max_body)
        return send_error(c, 400, "the request body (%s bytes) is over the limit of %ld bytes",
                          echo(q, sizeof q, cl, strlen(cl)), g_srv.sig.max_body);
    infer_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return send_error(c, 500, "out of memory");
    x->is_infer = true;
    x->header_len = -1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    if (h) {
        char *end;
        long v = strtol(h, &end, 10);
        if (*end || v < 0 || end == h) {
            free(x);
            return send_error(c, 400, "bad Inference-Header-Content-Length '%s'", echo(q, sizeof q, h, strlen(h)));
        }
        x->header_len = v;
    }
    *con_cls = x;
    return MHD_YES;
}

/* /v2/models/NAME[/versions/1][/ready|/config|/infer]; name points after
 * /v2/models/. The URL was unescaped by srv_unescape, so a name or
 * version holding a control byte (%00) holds it still escaped and cannot
 * match. */
static enum MHD_Result model_route(struct MHD_Connection *c, const char *url, const char *name, bool get, bool post,
                                   void **con_cls) {
    char q[256];
    const char *slash = strchr(name, '/');
    size_t nl = slash ? (size_t)(slash - name) : strlen(name);
    const char *rest = slash ? slash : "";
    if (strncmp(rest, "/versions/", 10) == 0) {
        const char *v = rest + 10;
        const char *vs = strchr(v, '/');
        size_t vl = vs ? (size_t)(vs - v) : strlen(v);
        if (vl != 1 || v[0] != '1')
            return send_error(c, 400, "unknown version '%s' of model '%s' (it has version 1)", echo(q, sizeof q, v, vl),
                              g_srv.sig.name);
        rest = vs ? vs : "";
    }
    if (nl != strlen(g_srv.sig.name) || strncmp(name, g_srv.sig.name, nl) != 0)
        return send_error(c, 400, "unknown model '%s' (this server serves '%s')", echo(q, sizeof q, name, nl),
                          g_srv.sig.name);
    if (!*rest || strcmp(rest, "/") == 0)
        return get ? send_json(c, 200, model_metadata()) : send_error(c, 405, "use GET");
    if (strcmp(rest, "/ready") == 0) {
        if (!get)
            return send_error(c, 405, "use GET");
        return atomic_load(&g_srv.draining) ? send_error(c, 503, "the server is shutting down")
                                            : send_json(c, 200, cJSON_CreateObject());
    }
    if (strcmp(rest, "/config") == 0)
        return get ? send_json(c, 200, model_config()) : send_error(c, 405, "use GET");
    if (strcmp(rest, "/infer") != 0)
        return send_error(c, 404, "unknown path '%s'", echo(q, sizeof q, url, strlen(url)));
    if (!post)
        return send_error(c, 405, "use POST for infer");
    return infer_start(c, con_cls);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls, (void)version;
    if (*con_cls)
        return infer_step(c, *con_cls, upload, upload_size);
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/v2/health/live") == 0)
        return get ? send_json(c, 200, cJSON_CreateObject()) : send_error(c, 405, "use GET");
    if (strcmp(url, "/v2/health/ready") == 0) {
        if (!get)
            return send_error(c, 405, "use GET");
        return atomic_load(&g_srv.draining) ? send_error(c, 503, "the server is shutting down")
                                            : send_json(c, 200, cJSON_CreateObject());
    }
    if (strcmp(url, "/v2") == 0 || strcmp(url, "/v2/") == 0) {
        if (!get)
            return send_error(c, 405, "use GET");
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", "dpc");
        cJSON_AddStringToObject(j, "version", dpc_version());
        cJSON *ext = cJSON_AddArrayToObject(j, "extensions");
        cJSON_AddItemToArray(ext, cJSON_CreateString("binary_tensor_data"));
        return send_json(c, 200, j);
    }
    if (strcmp(url, "/metrics") == 0)
        return get ? metrics(c) : send_error(c, 405, "use GET");
    static const char pre[] = "/v2/models/";
    if (strncmp(url, pre, sizeof pre - 1) != 0) {
        char q[256];
        return send_error(c, 404, "unknown path '%s'", echo(q, sizeof q, url, strlen(url)));
    }
    return model_route(c, url, url + sizeof pre - 1, get, post, con_cls);
}

/* URL unescaping that leaves control bytes escaped (srv_unescape). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls, (void)c;
    return srv_unescape(s);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)cls, (void)c, (void)why;
    infer_ctx *x = *con_cls;
    if (!x)
        return;
    *con_cls = NULL;
    if (x->submitted) {
        if (x->r)
            dpc_request_wait(x->r); /* done already: it was resumed to get here */
        atomic_fetch_sub(&g_srv.inflight, 1);
    }
    ctx_free(x);
}

/* ------------------------------------------------------------- signals */

static sigset_t g_sigs;
static _Atomic int g_phase;  /* 0 starting, 1 serving */
static _Atomic int g_signal; /* the signal that asked to stop */
static pthread_mutex_t g_stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_stop_cv = PTHREAD_COND_INITIALIZER;

static void *signal_thread(void *arg) {
    (void)arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&g_sigs, &sig) != 0)
            continue;
        if (atomic_load(&g_phase) == 0) { /* compiling kernels: stop them and leave */
            dpc_abort_compilers();
            _exit(128 + sig);
        }
        pthread_mutex_lock(&g_stop_lock);
        atomic_store(&g_signal, sig);
        pthread_cond_broadcast(&g_stop_cv);
        pthread_mutex_unlock(&g_stop_lock);
    }
    return NULL;
}

/* ----------------------------------------------------------------- CLI */

static const char *SERVE_USAGE =
    "usage: dpc serve MODEL.dp|MODEL.dpa|MODEL.onnx [--weights W.safetensors] [--devices LIST] [--host 127.0.0.1]\n"
    "                 [--port 8000] [--max-batch 64] [--max-delay-us 2000] [--max-queue 1024]\n"
    "                 [--max-body BYTES] [--dtype f32|bf16|f16]\n";

static int serve_usage(const char *fmt, const char *arg) {
    return cli_usage_error(SERVE_USAGE, fmt, arg);
}

static bool parse_long(const char *s, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static int load_program(const char *path, bool imported_weights, dpc_program **p) {
    if (dpc_artifact_path(path)) {
        if (dpc_program_load(path, p) != DPC_OK) {
            fprintf(stderr, "dpc: error: %s\n", dpc_last_error());
            return 1;
        }
        return 0;
    }
    dpc_artifact_opts ao = {0};
    dpc_safetensors *iw = cli_onnx_artifact(path, imported_weights, &ao); /* MODEL.onnx: in memory (cli/import.c) */
    dpc_buf img, diags, warn;
    dpc_buf_init(&diags);
    dpc_buf_init(&warn);
    dpc_err e;
    dpc_status s = dpc_artifact_build(path, &ao, &img, &diags, &warn, &e);
    if (iw)
        dpc_st_free(iw);
    if (warn.len)
        fprintf(stderr, "dpc: warning: %s\n", warn.data);
    dpc_buf_free(&warn);
    if (s != DPC_OK) {
        if (diags.len)
            fputs(diags.data, stderr);
        else
            fprintf(stderr, "dpc: error: %s\n", e.msg);
        dpc_buf_free(&diags);
        return 1;
    }
    dpc_buf_free(&diags);
    s = dpc_program_load_memory(img.data, img.len, path, p);
    dpc_buf_free(&img);
    if (s != DPC_OK) {
        fprintf(stderr, "dpc: error: %s\n", dpc_last_error());
        return 1;
    }
    return 0;
}

static bool signature(dpc_program *p) {
    g_srv.sig.name = dpc_program_name(p);
    g_srv.sig.nin = dpc_program_num_inputs(p);
    g_srv.nsc = dpc_program_num_scalars(p);
    /* outputs before any run, with -1 (0 here) for dims that follow a
     * run-time dim (`ids: i64[N, S]`), as KServe lists dynamic dims */
    if (dpc_program_outputs_any(p, &g_srv.sig.nout) != DPC_OK)
        g_srv.sig.nout = dpc_program_num_outputs(p);
    if (g_srv.sig.nin > DPC_MAX_IO || g_srv.sig.nout > DPC_MAX_IO)
        return false;
    for (int i = 0; i < g_srv.sig.nin; i++) {
        srv_input *t = &g_srv.sig.in[i];
        if (dpc_program_input(p, i, &t->name, &t->dtype, &t->rank, t->shape) != DPC_OK)
            return false;
        for (int d = 0; d < t->rank; d++)
            t->rtdim[d] = dpc_program_input_rtdim(p, i, d);
    }
    for (int j = 0; j < g_srv.sig.nout; j++)
        if (dpc_program_output_any(p, j, NULL, &g_srv.out_rank[j], g_srv.out_shape[j]) != DPC_OK &&
            dpc_program_output(p, j, NULL, &g_srv.out_rank[j], g_srv.out_shape[j]) != DPC_OK)
            return false;
    return true;
}

int dpc_cmd_serve(int argc, char **argv) {
    const char *model = NULL, *weights = NULL, *devices = NULL, *host = "127.0.0.1", *dtype = NULL;
    long port = 8000, max_batch = 64, max_delay = 2000, max_queue = 1024, max_body = DEFAULT_MAX_BODY;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char **str = !strcmp(a, "--weights") || !strcmp(a, "-w") ? &weights
                           : !strcmp(a, "--devices")                   ? &devices
                           : !strcmp(a, "--host")                      ? &host
                           : !strcmp(a, "--dtype")                     ? &dtype
                                                                       : NULL;
        long *num = !strcmp(a, "--port")           ? &port
                    : !strcmp(a, "--max-batch")    ? &max_batch
                    : !strcmp(a, "--max-delay-us") ? &max_delay
                    : !strcmp(a, "--max-queue")    ? &max_queue
                    : !strcmp(a, "--max-body")     ? &max_body
                                                   : NULL;
        if (str || num) {
            if (i + 1 >= argc)
                return serve_usage("option '%s' needs a value", a);
            const char *v = argv[++i];
            if (str)
                *str = v;
            else {
                long lo = num == &max_delay ? 0 : num == &port ? 0 : 1;
                long hi = num == &port ? 65535 : num == &max_body ? (1L << 40) : num == &max_delay ? 60000000L : 1L << 20;
                if (!parse_long(v, lo, hi, num))
                    return serve_usage("bad value for %s", a);
            }
        } else if (a[0] == '-' && a[1]) {
            return serve_usage("unknown option '%s'", a);
        } else if (model) {
            return serve_usage("unexpected argument '%s'", a);
        } else {
            model = a;
        }
    }
    if (!model)
        return serve_usage("%s", "missing the model file");
    int staged = cli_onnx_stage(&model); /* MODEL.onnx: imported in memory first (cli/import.c) */
    if (staged)
        return staged;

    /* signals go to the signal thread alone: block them before any thread starts */
    sigemptyset(&g_sigs);
    sigaddset(&g_sigs, SIGINT);
    sigaddset(&g_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &g_sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t st;
    if (pthread_create(&st, NULL, signal_thread, NULL) != 0) {
        fprintf(stderr, "dpc: error: cannot start a thread\n");
        return 1;
    }
    pthread_detach(st);

    dpc_program *p = NULL;
    if (load_program(model, !weights, &p))
        return 1;
    int rc = 1;
    if (weights && dpc_program_bind_weights(p, weights) != DPC_OK)
        goto fail;
    if (weights && dpc_program_warning(p)[0])
        fprintf(stderr, "dpc: warning: %s\n", dpc_program_warning(p));
    if (devices && dpc_program_set_devices(p, devices) != DPC_OK)
        goto fail;
    if (dtype && dpc_program_set_dtype(p, dtype) != DPC_OK)
        goto fail;
    g_srv.p = p;
    g_srv.max_batch = (int)max_batch;
    g_srv.sig.max_body = max_body;
    dpc_batcher_opts bo = {.max_batch = (int)max_batch, .max_delay_us = max_delay, .max_queue = (int)max_queue};
    if (dpc_batcher_new(p, &bo, &g_srv.b) != DPC_OK) {
        fprintf(stderr, "dpc: error: %s\n", dpc_last_error());
        if (!weights && !dpc_program_has_embedded_weights(p) && strstr(dpc_last_error(), "no weights"))
            fprintf(stderr, "dpc: give --weights W.safetensors (`dpc init %s -o W.safetensors` writes initial ones)\n",
                    model);
        dpc_program_free(p);
        return 1;
    }
    if (!signature(p)) {
        fprintf(stderr, "dpc: error: cannot read the signature of %s\n", model);
        goto fail_b;
    }

    /* address */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ports[16];
    snprintf(ports, sizeof ports, "%ld", port);
    int ge = getaddrinfo(host, ports, &hints, &ai);
    if (ge != 0 || !ai) {
        fprintf(stderr, "dpc: error: cannot use --host '%s': %s\n", host, gai_strerror(ge));
        goto fail_b;
    }
    struct rlimit rl; /* CONN_LIMIT sockets need as many descriptors */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    g_srv.d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                               MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT,
                               (unsigned)CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
                               MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_LISTEN_BACKLOG_SIZE,
                               (unsigned)512, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
    if (!g_srv.d) {
        fprintf(stderr, "dpc: error: cannot listen on %s port %ld (in use, or not an address of this machine)\n", host,
                port);
        freeaddrinfo(ai);
        goto fail_b;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_srv.d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned bound = di ? di->port : (unsigned)port;
    freeaddrinfo(ai);
    bool v6 = strchr(host, ':') != NULL;
    printf("dpc serve: model %s listening on http://%s%s%s:%u\n", g_srv.sig.name, v6 ? "[" : "", host, v6 ? "]" : "",
           bound);
    fflush(stdout);
    atomic_store(&g_phase, 1);

    pthread_mutex_lock(&g_stop_lock);
    while (!atomic_load(&g_signal))
        pthread_cond_wait(&g_stop_cv, &g_stop_lock);
    pthread_mutex_unlock(&g_stop_lock);

    /* drain: refuse new work, run and answer what is queued, then stop */
    fprintf(stderr, "dpc serve: signal %d: draining\n", atomic_load(&g_signal));
    atomic_store(&g_srv.draining, true);
    MHD_quiesce_daemon(g_srv.d);
    dpc_batcher_close(g_srv.b);
    double t0 = dpc_now_s();
    while (atomic_load(&g_srv.inflight) > 0 && dpc_now_s() - t0 < DRAIN_TIMEOUT_S)
        usleep(2000);
    long left = atomic_load(&g_srv.inflight);
    MHD_stop_daemon(g_srv.d);
    dpc_batcher_free(g_srv.b);
    dpc_program_free(p);
    if (left > 0) {
        fprintf(stderr, "dpc: error: %ld answers could not be delivered within %.0f s\n", left, DRAIN_TIMEOUT_S);
        return 1;
    }
    return 0;

fail:
    fprintf(stderr, "dpc: error: %s\n", dpc_program_error(p));
    dpc_program_free(p);
    return rc;
fail_b:
    dpc_batcher_free(g_srv.b);
    dpc_program_free(p);
    return 1;
}
