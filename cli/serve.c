/* serve.c - `dpc serve`: a KServe v2 (Open Inference Protocol) HTTP/REST
 * server over libmicrohttpd and cJSON, with libdpc's dynamic batcher
 * (dpc_batcher_*, runtime/serve/batcher.c) behind it. Contract:
 * ../shared/spec/serve.md; user guide: docs/serve.md. This file is the
 * HTTP side (routes, connections, threads, signals) and the command line;
 * the protocol's bodies are cli/serve_v2.c and cli/serve_metrics.c, the
 * request parser cli/serve_req.c.
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
#include "serve_v2.h"

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
    srv_model m; /* the model as the protocol describes it (serve_v2.h) */
    dpc_batcher *b;
    struct MHD_Daemon *d;
    _Atomic bool draining;
    _Atomic long inflight; /* submitted, response not finished */
    _Atomic unsigned long http[SRV_NCODES]; /* 200, 400, 404, 405, 500, 503 (srv_code_slot) */
} server;

static server g_srv;

/* ----------------------------------------------------------- responses */

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
    atomic_fetch_add(&g_srv.http[srv_code_slot(code)], 1);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned code, srv_buf *b, const char *ctype, long hlen) {
    if (b->oom) {
        free(b->p);
        return MHD_NO;
    }
    if (!b->p)
        srv_puts(b, "");
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
    char msg[DPC_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(c, code, srv_error_body(msg));
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

/* A finished request: its answer (serve_v2.c) sent. */
static enum MHD_Result respond_infer(struct MHD_Connection *c, infer_ctx *x) {
    srv_buf b = {0};
    long hlen;
    char err[DPC_ERR_MSG];
    unsigned code = srv_infer_answer(&g_srv.m, x->r, &x->q, &b, &hlen, err, sizeof err);
    if (code != 200)
        return send_error(c, code, "%s", err);
    return send_buf(c, 200, &b, hlen >= 0 ? "application/octet-stream" : "application/json", hlen);
}

static enum MHD_Result infer_step(struct MHD_Connection *c, infer_ctx *x, const char *upload, size_t *upload_size) {
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (x->too_big || x->len + n > (size_t)g_srv.m.sig.max_body) {
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
        return send_error(c, 400, "the request body is over the limit of %ld bytes", g_srv.m.sig.max_body);
    char err[DPC_ERR_MSG];
    if (!srv_req_parse(&g_srv.m.sig, x->body, x->len, x->header_len, &x->q, err, sizeof err))
        return send_error(c, 400, "%s", err);
    if (atomic_load(&g_srv.draining))
        return send_error(c, 503, "the server is shutting down");
    x->conn = c;
    atomic_store(&x->state, 1);
    MHD_suspend_connection(c); /* before the submit: the batch may finish at once */
    dpc_status s = dpc_batcher_submit(g_srv.b, (const dpc_tensor *const *)x->q.in, g_srv.m.sig.nin, x->q.kw_names,
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

/* ------------------------------------------------------------- routing */

static enum MHD_Result metrics(struct MHD_Connection *c) {
    dpc_batcher_stats st;
    dpc_batcher_get_stats(g_srv.b, &st);
    unsigned long http[SRV_NCODES];
    for (int i = 0; i < SRV_NCODES; i++)
        http[i] = atomic_load(&g_srv.http[i]);
    srv_buf b = {0};
    srv_metrics(g_srv.m.sig.name, &st, atomic_load(&g_srv.inflight), http, &b);
    return send_buf(c, 200, &b, "text/plain; version=0.0.4", -1);
}

/* GET /v2/health/ready and /v2/models/NAME/ready */
static enum MHD_Result ready(struct MHD_Connection *c, bool get) {
    if (!get)
        return send_error(c, 405, "use GET");
    return atomic_load(&g_srv.draining) ? send_error(c, 503, "the server is shutting down")
                                        : send_json(c, 200, srv_health_body());
}

/* Request bytes in a message: serve_req.h's srv_echo into out. */
static const char *echo(char *out, size_t n, const char *s, size_t len) {
    srv_echo(s, len, out, n);
    return out;
}

/* A POST to /v2/models/NAME/infer: the context its body is read into. */
static enum MHD_Result infer_start(struct MHD_Connection *c, void **con_cls) {
    char q[256];
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtod(cl, NULL) > (double)g_srv.m.sig.max_body)
        return send_error(c, 400, "the request body (%s bytes) is over the limit of %ld bytes",
                          echo(q, sizeof q, cl, strlen(cl)), g_srv.m.sig.max_body);
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
                              g_srv.m.sig.name);
        rest = vs ? vs : "";
    }
    if (nl != strlen(g_srv.m.sig.name) || strncmp(name, g_srv.m.sig.name, nl) != 0)
        return send_error(c, 400, "unknown model '%s' (this server serves '%s')", echo(q, sizeof q, name, nl),
                          g_srv.m.sig.name);
    if (!*rest || strcmp(rest, "/") == 0)
        return get ? send_json(c, 200, srv_model_metadata(&g_srv.m)) : send_error(c, 405, "use GET");
    if (strcmp(rest, "/ready") == 0)
        return ready(c, get);
    if (strcmp(rest, "/config") == 0)
        return get ? send_json(c, 200, srv_model_config(&g_srv.m)) : send_error(c, 405, "use GET");
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
        return get ? send_json(c, 200, srv_health_body()) : send_error(c, 405, "use GET");
    if (strcmp(url, "/v2/health/ready") == 0)
        return ready(c, get);
    if (strcmp(url, "/v2") == 0 || strcmp(url, "/v2/") == 0) {
        return get ? send_json(c, 200, srv_server_metadata()) : send_error(c, 405, "use GET");
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

/* The command line of dpc serve. */
typedef struct serve_args {
    const char *model, *weights, *devices, *host, *dtype;
    long port, max_batch, max_delay, max_queue, max_body;
} serve_args;

/* argv into a; 0 or the exit status of bad usage. */
static int parse_args(int argc, char **argv, serve_args *a) {
    *a = (serve_args){.host = "127.0.0.1", .port = 8000, .max_batch = 64, .max_delay = 2000, .max_queue = 1024,
                      .max_body = DEFAULT_MAX_BODY};
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char **str = !strcmp(o, "--weights") || !strcmp(o, "-w") ? &a->weights
                           : !strcmp(o, "--devices")                   ? &a->devices
                           : !strcmp(o, "--host")                      ? &a->host
                           : !strcmp(o, "--dtype")                     ? &a->dtype
                                                                       : NULL;
        long *num = !strcmp(o, "--port")           ? &a->port
                    : !strcmp(o, "--max-batch")    ? &a->max_batch
                    : !strcmp(o, "--max-delay-us") ? &a->max_delay
                    : !strcmp(o, "--max-queue")    ? &a->max_queue
                    : !strcmp(o, "--max-body")     ? &a->max_body
                                                   : NULL;
        if (str || num) {
            if (i + 1 >= argc)
                return serve_usage("option '%s' needs a value", o);
            const char *v = argv[++i];
            if (str)
                *str = v;
            else {
                long lo = num == &a->max_delay ? 0 : num == &a->port ? 0 : 1;
                long hi = num == &a->port        ? 65535
                          : num == &a->max_body  ? (1L << 40)
                          : num == &a->max_delay ? 60000000L
                                                 : 1L << 20;
                if (!parse_long(v, lo, hi, num))
                    return serve_usage("bad value for %s", o);
            }
        } else if (o[0] == '-' && o[1]) {
            return serve_usage("unknown option '%s'", o);
        } else if (a->model) {
            return serve_usage("unexpected argument '%s'", o);
        } else {
            a->model = o;
        }
    }
    if (!a->model)
        return serve_usage("%s", "missing the model file");
    return cli_onnx_stage(&a->model); /* MODEL.onnx: imported in memory first (cli/import.c) */
}

/* Signals go to the signal thread alone: blocked here, before any other
 * thread starts. false (said) when the thread cannot start. */
static bool start_signal_thread(void) {
    sigemptyset(&g_sigs);
    sigaddset(&g_sigs, SIGINT);
    sigaddset(&g_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &g_sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t st;
    if (pthread_create(&st, NULL, signal_thread, NULL) != 0) {
        fprintf(stderr, "dpc: error: cannot start a thread\n");
        return false;
    }
    pthread_detach(st);
    return true;
}

/* The model loaded and set up (weights, devices, dtype), its batcher made
 * and its signature read into g_srv. 0, or 1 after saying why (nothing is
 * left allocated then). */
static int open_model(const serve_args *a) {
    dpc_program *p = NULL;
    if (load_program(a->model, !a->weights, &p))
        return 1;
    if (a->weights && dpc_program_bind_weights(p, a->weights) != DPC_OK) {
        fprintf(stderr, "dpc: error: %s\n", dpc_program_error(p));
        dpc_program_free(p);
        return 1;
    }
    if (a->weights && dpc_program_warning(p)[0])
        fprintf(stderr, "dpc: warning: %s\n", dpc_program_warning(p));
    if ((a->devices && dpc_program_set_devices(p, a->devices) != DPC_OK) ||
        (a->dtype && dpc_program_set_dtype(p, a->dtype) != DPC_OK)) {
        fprintf(stderr, "dpc: error: %s\n", dpc_program_error(p));
        dpc_program_free(p);
        return 1;
    }
    g_srv.m.p = p;
    g_srv.m.max_batch = (int)a->max_batch;
    g_srv.m.sig.max_body = a->max_body;
    dpc_batcher_opts bo = {.max_batch = (int)a->max_batch, .max_delay_us = a->max_delay, .max_queue = (int)a->max_queue};
    if (dpc_batcher_new(p, &bo, &g_srv.b) != DPC_OK) {
        fprintf(stderr, "dpc: error: %s\n", dpc_last_error());
        if (!a->weights && !dpc_program_has_embedded_weights(p) && strstr(dpc_last_error(), "no weights"))
            fprintf(stderr, "dpc: give --weights W.safetensors (`dpc init %s -o W.safetensors` writes initial ones)\n",
                    a->model);
        dpc_program_free(p);
        return 1;
    }
    if (!srv_model_read(&g_srv.m, p)) {
        fprintf(stderr, "dpc: error: cannot read the signature of %s\n", a->model);
        dpc_batcher_free(g_srv.b);
        dpc_program_free(p);
        return 1;
    }
    return 0;
}

/* The HTTP daemon started on --host and --port, and the address said on
 * standard output. false after saying why. */
static bool listen_http(const serve_args *a) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ports[16];
    snprintf(ports, sizeof ports, "%ld", a->port);
    int ge = getaddrinfo(a->host, ports, &hints, &ai);
    if (ge != 0 || !ai) {
        fprintf(stderr, "dpc: error: cannot use --host '%s': %s\n", a->host, gai_strerror(ge));
        return false;
    }
    struct rlimit rl; /* CONN_LIMIT sockets need as many descriptors */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    g_srv.d = MHD_start_daemon(flags, (uint16_t)a->port, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                               MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT,
                               (unsigned)CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
                               MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_LISTEN_BACKLOG_SIZE,
                               (unsigned)512, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
    if (!g_srv.d) {
        fprintf(stderr, "dpc: error: cannot listen on %s port %ld (in use, or not an address of this machine)\n",
                a->host, a->port);
        freeaddrinfo(ai);
        return false;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_srv.d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned bound = di ? di->port : (unsigned)a->port;
    freeaddrinfo(ai);
    bool v6 = strchr(a->host, ':') != NULL;
    printf("dpc serve: model %s listening on http://%s%s%s:%u\n", g_srv.m.sig.name, v6 ? "[" : "", a->host,
           v6 ? "]" : "", bound);
    fflush(stdout);
    return true;
}

/* Serves until SIGINT or SIGTERM, then drains: refuses new work, runs and
 * answers what is queued, and stops. Frees the server; returns the exit
 * status. */
static int serve_until_signal(void) {
    atomic_store(&g_phase, 1);
    pthread_mutex_lock(&g_stop_lock);
    while (!atomic_load(&g_signal))
        pthread_cond_wait(&g_stop_cv, &g_stop_lock);
    pthread_mutex_unlock(&g_stop_lock);

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
    dpc_program_free(g_srv.m.p);
    if (left > 0) {
        fprintf(stderr, "dpc: error: %ld answers could not be delivered within %.0f s\n", left, DRAIN_TIMEOUT_S);
        return 1;
    }
    return 0;
}

int dpc_cmd_serve(int argc, char **argv) {
    serve_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    if (!start_signal_thread() || open_model(&a))
        return 1;
    if (!listen_http(&a)) {
        dpc_batcher_free(g_srv.b);
        dpc_program_free(g_srv.m.p);
        return 1;
    }
    return serve_until_signal();
}
