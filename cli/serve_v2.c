/* serve_v2.c - the KServe v2 protocol's answers of `dpc serve`, without
 * HTTP: the model as the protocol describes it (srv_model, read from the
 * loaded program), the JSON bodies of the infer response (with Triton's
 * binary tensor extension), model and server metadata, the model config,
 * health and errors, and the growing text buffer they are written into.
 * cli/serve.c routes requests here and sends what comes back; the request
 * side is cli/serve_req.c. */
#include "serve_v2.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- text */

void srv_put(srv_buf *b, const void *s, size_t n) {
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
void srv_puts(srv_buf *b, const char *s) { srv_put(b, s, strlen(s)); }
void srv_putf(srv_buf *b, const char *fmt, ...) {
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
        srv_put(b, big, (size_t)n);
        free(big);
    } else if (n > 0) {
        srv_put(b, tmp, (size_t)n);
    }
}
/* A JSON string, escaped by cJSON; made valid UTF-8 first (a request's
 * "id" may hold any bytes, and cJSON passes them through). */
void srv_put_jstr(srv_buf *b, const char *s) {
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
        srv_puts(b, t);
    else
        b->oom = true;
    free(t);
    free(u);
    cJSON_Delete(j);
}


/* ------------------------------------------------------------- infer */

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

static void put_float(srv_buf *b, float v) {
    if (isnan(v))
        srv_puts(b, "NaN");
    else if (isinf(v))
        srv_puts(b, v > 0 ? "Infinity" : "-Infinity");
    else
        srv_putf(b, "%.9g", (double)v);
}

unsigned srv_infer_answer(const srv_model *m, dpc_request *r, const srv_req *q, srv_buf *b, long *hlen, char *err,
                          size_t errn) {
    dpc_status s = dpc_request_status(r);
    if (s != DPC_OK) {
        snprintf(err, errn, "%s", dpc_request_error(r));
        return s == DPC_EUSER ? 400 : 500;
    }
    int nout = dpc_request_num_outputs(r);
    int sel[DPC_MAX_IO];
    bool bin[DPC_MAX_IO];
    int nsel = q->nsel;
    if (nsel < 0) {
        nsel = nout < DPC_MAX_IO ? nout : DPC_MAX_IO;
        for (int j = 0; j < nsel; j++)
            sel[j] = j, bin[j] = q->bin_all;
    } else {
        memcpy(sel, q->sel, sizeof sel);
        memcpy(bin, q->bin, sizeof bin);
    }
    for (int k = 0; k < nsel; k++)
        if (sel[k] >= nout) {
            snprintf(err, errn, "unknown output 'output%d' (%s returns %d)", sel[k], m->sig.name, nout);
            return 400;
        }
    srv_puts(b, "{\"model_name\":");
    srv_put_jstr(b, m->sig.name);
    srv_puts(b, ",\"model_version\":\"1\"");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(q->json, "id");
    if (cJSON_IsString(id)) {
        srv_puts(b, ",\"id\":");
        srv_put_jstr(b, id->valuestring);
    }
    srv_puts(b, ",\"outputs\":[");
    bool any_bin = false;
    for (int k = 0; k < nsel; k++) {
        const dpc_tensor *t = dpc_request_output(r, sel[k]);
        srv_putf(b, "%s{\"name\":\"output%d\",\"datatype\":\"%s\",\"shape\":[", k ? "," : "", sel[k],
             dtype_kserve(dpc_tensor_dtype(t)));
        for (int d = 0; d < dpc_tensor_rank(t); d++)
            srv_putf(b, "%s%lld", d ? "," : "", (long long)dpc_tensor_dim(t, d));
        srv_puts(b, "]");
        int64_t n = dpc_tensor_numel(t);
        const void *data = dpc_tensor_data((dpc_tensor *)t);
        if (bin[k]) {
            srv_putf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", dpc_tensor_nbytes(t));
            any_bin = true;
            continue;
        }
        srv_puts(b, ",\"data\":[");
        for (int64_t i = 0; i < n; i++) {
            if (i)
                srv_puts(b, ",");
            if (dpc_tensor_dtype(t) == DPC_F32)
                put_float(b, ((const float *)data)[i]);
            else if (dpc_tensor_dtype(t) == DPC_I64)
                srv_putf(b, "%lld", (long long)((const int64_t *)data)[i]);
            else
                srv_puts(b, "0");
        }
        srv_puts(b, "]}");
    }
    srv_puts(b, "]}");
    *hlen = -1;
    if (!any_bin)
        return 200;
    *hlen = (long)b->len;
    for (int k = 0; k < nsel; k++)
        if (bin[k]) {
            const dpc_tensor *t = dpc_request_output(r, sel[k]);
            srv_put(b, dpc_tensor_data((dpc_tensor *)t), dpc_tensor_nbytes(t));
        }
    return 200;
}

/* ------------------------------------------------------------ metadata */

static cJSON *shape_json(int rank, const int64_t *shape) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < rank; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(shape[d] <= 0 ? -1 : (double)shape[d]));
    return a;
}

cJSON *srv_model_metadata(const srv_model *m) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", m->sig.name);
    cJSON *v = cJSON_AddArrayToObject(j, "versions");
    cJSON_AddItemToArray(v, cJSON_CreateString("1"));
    cJSON_AddStringToObject(j, "platform", "dpc");
    cJSON *in = cJSON_AddArrayToObject(j, "inputs");
    for (int i = 0; i < m->sig.nin; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", m->sig.in[i].name);
        cJSON_AddStringToObject(t, "datatype", m->sig.in[i].dtype == DPC_I64 ? "INT64" : "FP32");
        cJSON_AddItemToObject(t, "shape", shape_json(m->sig.in[i].rank, m->sig.in[i].shape));
        cJSON_AddItemToArray(in, t);
    }
    cJSON *out = cJSON_AddArrayToObject(j, "outputs");
    for (int i = 0; i < m->sig.nout; i++) {
        cJSON *t = cJSON_CreateObject();
        char nm[32];
        snprintf(nm, sizeof nm, "output%d", i);
        cJSON_AddStringToObject(t, "name", nm);
        cJSON_AddStringToObject(t, "datatype", "FP32");
        cJSON_AddItemToObject(t, "shape", shape_json(m->out_rank[i], m->out_shape[i]));
        cJSON_AddItemToArray(out, t);
    }
    cJSON *params = cJSON_AddObjectToObject(j, "parameters");
    for (int i = 0; i < m->nsc; i++) {
        const char *name;
        dpc_scalar_type type;
        int has_def;
        double def;
        if (dpc_program_scalar(m->p, i, &name, &type, &has_def, &def) != DPC_OK)
            continue;
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "type", type == DPC_SCALAR_FLOAT ? "float" : type == DPC_SCALAR_INT ? "int" : "bool");
        if (has_def)
            cJSON_AddNumberToObject(s, "default", def);
        cJSON_AddItemToObject(params, name, s);
    }
    return j;
}

cJSON *srv_model_config(const srv_model *m) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", m->sig.name);
    cJSON_AddStringToObject(j, "platform", "dpc");
    cJSON_AddNumberToObject(j, "max_batch_size", 0); /* shapes carry the batch dim themselves */
    cJSON *db = cJSON_AddObjectToObject(j, "dynamic_batching");
    cJSON_AddNumberToObject(db, "max_batch_rows", m->max_batch);
    return j;
}

/* ---------------------------------------------------------- the model */

bool srv_model_read(srv_model *m, dpc_program *p) {
    m->p = p;
    m->sig.name = dpc_program_name(p);
    m->sig.nin = dpc_program_num_inputs(p);
    m->nsc = dpc_program_num_scalars(p);
    /* outputs before any run, with -1 (0 here) for dims that follow a
     * run-time dim (`ids: i64[N, S]`), as KServe lists dynamic dims */
    if (dpc_program_outputs_any(p, &m->sig.nout) != DPC_OK)
        m->sig.nout = dpc_program_num_outputs(p);
    if (m->sig.nin > DPC_MAX_IO || m->sig.nout > DPC_MAX_IO)
        return false;
    for (int i = 0; i < m->sig.nin; i++) {
        srv_input *t = &m->sig.in[i];
        if (dpc_program_input(p, i, &t->name, &t->dtype, &t->rank, t->shape) != DPC_OK)
            return false;
        for (int d = 0; d < t->rank; d++)
            t->rtdim[d] = dpc_program_input_rtdim(p, i, d);
    }
    for (int j = 0; j < m->sig.nout; j++)
        if (dpc_program_output_any(p, j, NULL, &m->out_rank[j], m->out_shape[j]) != DPC_OK &&
            dpc_program_output(p, j, NULL, &m->out_rank[j], m->out_shape[j]) != DPC_OK)
            return false;
    return true;
}

cJSON *srv_server_metadata(void) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", "dpc");
    cJSON_AddStringToObject(j, "version", dpc_version());
    cJSON *ext = cJSON_AddArrayToObject(j, "extensions");
    cJSON_AddItemToArray(ext, cJSON_CreateString("binary_tensor_data"));
    return j;
}

cJSON *srv_health_body(void) { return cJSON_CreateObject(); }

cJSON *srv_error_body(const char *msg) {
    char clean[DPC_ERR_MSG];
    /* Names in messages come from requests and models, and vsnprintf may
     * cut one mid-character: the body is valid UTF-8 whatever they hold
     * (Python's json cannot read it otherwise). */
    srv_utf8(msg, clean, sizeof clean);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", clean);
    return j;
}
