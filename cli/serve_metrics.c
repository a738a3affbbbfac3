/* serve_metrics.c - the body of `dpc serve`'s GET /metrics: Prometheus text
 * from the batcher's statistics and the server's counts of HTTP responses
 * by status code (which code goes in which count is here too, beside the
 * names it prints). Apart from cli/serve.c, which only gathers the numbers
 * and sends the text. */
#include "serve_v2.h"

#include <math.h>

int srv_code_slot(unsigned code) {
    switch (code) {
    case 200: return 0;
    case 400: return 1;
    case 404: return 2;
    case 405: return 3;
    case 500: return 4;
    default: return 5;
    }
}

static void metric_hist(srv_buf *b, const char *model, const char *name, const char *help, const uint64_t *counts,
                        int n, int size, double sum) {
    srv_putf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < n; i++) {
        cum += counts[i];
        double le = dpc_batcher_bucket(size, i);
        if (isinf(le))
            srv_putf(b, "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", name, model, (unsigned long long)cum);
        else
            srv_putf(b, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", name, model, le, (unsigned long long)cum);
    }
    srv_putf(b, "%s_sum{model=\"%s\"} %.9g\n%s_count{model=\"%s\"} %llu\n", name, model, sum, name, model,
             (unsigned long long)cum);
}

void srv_metrics(const char *model, const dpc_batcher_stats *st, long inflight, const unsigned long *http,
                 srv_buf *b) {
    const char *m = model;
#define COUNTER(n, h, v)                                                                                           \
    srv_putf(b, "# HELP " n " " h "\n# TYPE " n " counter\n" n "{model=\"%s\"} %llu\n", m, (unsigned long long)(v))
#define GAUGE(n, h, v) srv_putf(b, "# HELP " n " " h "\n# TYPE " n " gauge\n" n "{model=\"%s\"} %lld\n", m, (long long)(v))
    COUNTER("dpc_requests_total", "Inference requests accepted by the batcher.", st->requests);
    COUNTER("dpc_request_success_total", "Inference requests answered with outputs.", st->succeeded);
    COUNTER("dpc_request_failures_total", "Inference requests accepted whose batch failed.", st->failed);
    COUNTER("dpc_requests_invalid_total", "Inference requests refused by the batcher as not matching forward.",
            st->rejected);
    COUNTER("dpc_requests_busy_total", "Inference requests refused because the queue was full (503).", st->busy);
    COUNTER("dpc_batches_total", "Batches run (forward calls).", st->batches);
    COUNTER("dpc_batch_failures_total", "Batches whose forward failed.", st->batch_failures);
    GAUGE("dpc_queue_depth", "Requests waiting in the queue.", st->queue_depth);
    GAUGE("dpc_running_requests", "Requests in the batch running now.", st->running);
    GAUGE("dpc_inflight_requests", "Requests submitted and not yet answered.", inflight);
    metric_hist(b, model, "dpc_batch_size", "Rows per batch.", st->batch_rows, DPC_BATCHER_SIZE_BUCKETS, 1,
                (double)st->batch_rows_sum);
    srv_putf(b, "# HELP dpc_batch_seconds_total Seconds the worker spent in the forwards of batches.\n"
             "# TYPE dpc_batch_seconds_total counter\ndpc_batch_seconds_total{model=\"%s\"} %.9g\n",
         m, st->batch_seconds_sum);
    metric_hist(b, model, "dpc_queue_seconds", "Time a request waited in the queue.", st->queue_seconds,
                DPC_BATCHER_TIME_BUCKETS, 0, st->queue_seconds_sum);
    metric_hist(b, model, "dpc_compute_seconds", "Time of the batch a request ran in.", st->compute_seconds,
                DPC_BATCHER_TIME_BUCKETS, 0, st->compute_seconds_sum);
    static const char *codes[SRV_NCODES] = {"200", "400", "404", "405", "500", "503"};
    srv_puts(b, "# HELP dpc_http_responses_total HTTP responses by status code.\n"
              "# TYPE dpc_http_responses_total counter\n");
    for (int i = 0; i < SRV_NCODES; i++)
        srv_putf(b, "dpc_http_responses_total{code=\"%s\"} %lu\n", codes[i], http[i]);
#undef COUNTER
#undef GAUGE
}
