/* serve_v2.h - the answers of `dpc serve` without HTTP: the KServe v2 bodies
 * (cli/serve_v2.c) and the Prometheus metrics (cli/serve_metrics.c), written
 * into a text buffer that cli/serve.c sends. */
#ifndef DPC_CLI_SERVE_V2_H
#define DPC_CLI_SERVE_V2_H

#include "serve_req.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing text (or binary) buffer; oom once an allocation failed, and
 * then nothing more is added. p is NUL-terminated, freed by its user. */
typedef struct srv_buf {
    char *p;
    size_t len, cap;
    bool oom;
} srv_buf;

void srv_put(srv_buf *b, const void *s, size_t n);
void srv_puts(srv_buf *b, const char *s);
void srv_putf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string, made valid UTF-8 first. */
void srv_put_jstr(srv_buf *b, const char *s);

/* The served model as the protocol describes it. */
typedef struct srv_model {
    dpc_program *p;
    srv_sig sig; /* name, inputs, output count, body limit: what requests are parsed against */
    int nsc;
    int out_rank[DPC_MAX_IO];
    int64_t out_shape[DPC_MAX_IO][DPC_MAX_RANK];
    int max_batch;
} srv_model;

/* m's signature from p (m->p = p); false when it cannot be read or is over
 * DPC_MAX_IO. sig.max_body and max_batch are the caller's. */
bool srv_model_read(srv_model *m, dpc_program *p);

/* The answer to an infer request r that has finished, with q its parsed
 * request: 200 and the body in b (JSON; when *hlen >= 0, a JSON header of
 * *hlen bytes followed by the binary outputs), or the error status (400,
 * 500) with its message in err. */
unsigned srv_infer_answer(const srv_model *m, dpc_request *r, const srv_req *q, srv_buf *b, long *hlen, char *err,
                          size_t errn);
/* GET /v2/models/NAME, /v2/models/NAME/config, /v2 */
cJSON *srv_model_metadata(const srv_model *m);
cJSON *srv_model_config(const srv_model *m);
cJSON *srv_server_metadata(void);
/* The 200 body of /v2/health/live, /v2/health/ready and a model's /ready:
 * an empty object (the status code is the answer). */
cJSON *srv_health_body(void);
/* {"error": msg}, msg made valid UTF-8. */
cJSON *srv_error_body(const char *msg);

/* ---- /metrics (cli/serve_metrics.c) */

#define SRV_NCODES 6 /* the HTTP responses counted: 200, 400, 404, 405, 500, anything else (503) */
/* The count an HTTP status code goes in. */
int srv_code_slot(unsigned code);
/* The Prometheus text of the batcher's statistics st, the requests in
 * flight and the counts of HTTP responses (http[SRV_NCODES]) into b. */
void srv_metrics(const char *model, const dpc_batcher_stats *st, long inflight, const unsigned long *http,
                 srv_buf *b);

#endif
