/* onnx_read.c - the ONNX reader: a bounded pre-scan of the protobuf wire
 * format, protobuf-c's unpacker (generated from onnx.proto at build time),
 * then checks of every field the importer reads; see onnx.h. */
#include "onnx.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool dpc_onnx_path(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n > 5 && strcasecmp(path + n - 5, ".onnx") == 0;
}

/* ---- the nesting pre-scan ----
 * Only the messages that can contain themselves are followed (graphs in
 * attributes in nodes in graphs; types in types); every other field is
 * skipped by its wire type. No recursion: an explicit stack of ends. */
enum { K_NONE = -1, K_MODEL, K_GRAPH, K_NODE, K_ATTR, K_VI, K_TYPE, K_SEQ, K_MAP, K_OPT, K_TRAIN, K_FUNC };

static int child_kind(int kind, uint64_t field) {
    switch (kind) {
    case K_MODEL: return field == 7 ? K_GRAPH : field == 20 ? K_TRAIN : field == 25 ? K_FUNC : K_NONE;
    case K_TRAIN: return field == 1 || field == 2 ? K_GRAPH : K_NONE;
    case K_FUNC: return field == 7 ? K_NODE : K_NONE;
    case K_GRAPH: return field == 1 ? K_NODE : field >= 11 && field <= 13 ? K_VI : K_NONE;
    case K_NODE: return field == 5 ? K_ATTR : K_NONE;
    case K_ATTR: return field == 6 || field == 11 ? K_GRAPH : field == 14 || field == 15 ? K_TYPE : K_NONE;
    case K_VI: return field == 2 ? K_TYPE : K_NONE;
    case K_TYPE: return field == 4 ? K_SEQ : field == 5 ? K_MAP : field == 9 ? K_OPT : K_NONE;
    case K_SEQ: case K_OPT: return field == 1 ? K_TYPE : K_NONE;
    case K_MAP: return field == 2 ? K_TYPE : K_NONE;
    }
    return K_NONE;
}

static bool varint(const uint8_t *b, size_t end, size_t *pos, uint64_t *v) {
    uint64_t r = 0;
    for (int i = 0; i < 10; i++) {
        if (*pos >= end)
            return false;
        uint8_t c = b[(*pos)++];
        r |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

static dpc_status prescan(const uint8_t *b, size_t len, const char *name, dpc_err *e) {
    size_t ends[DPC_ONNX_MAX_DEPTH + 1];
    int kinds[DPC_ONNX_MAX_DEPTH + 1], top = 0;
    ends[0] = len, kinds[0] = K_MODEL;
    size_t pos = 0;
    for (;;) {
        while (top >= 0 && pos == ends[top])
            top--;
        if (top < 0)
            return DPC_OK;
        uint64_t tag, v;
        if (!varint(b, ends[top], &pos, &tag) || (tag >> 3) == 0)
            return dpc_errf(e, DPC_EUSER, "%s: not an ONNX model (bad protobuf field at byte %zu)", name, pos);
        switch (tag & 7) {
        case 0:
            if (!varint(b, ends[top], &pos, &v))
                return dpc_errf(e, DPC_EUSER, "%s: truncated or bad varint at byte %zu", name, pos);
            break;
        case 1:
        case 5: {
            size_t w = (tag & 7) == 1 ? 8 : 4;
            if (ends[top] - pos < w)
                return dpc_errf(e, DPC_EUSER, "%s: truncated field at byte %zu", name, pos);
            pos += w;
            break;
        }
        case 2: {
            if (!varint(b, ends[top], &pos, &v) || v > ends[top] - pos)
                return dpc_errf(e, DPC_EUSER, "%s: a field's length runs past its message (byte %zu)", name, pos);
            int k = child_kind(kinds[top], tag >> 3);
            if (k == K_NONE) {
                pos += (size_t)v;
                break;
            }
            if (top == DPC_ONNX_MAX_DEPTH)
                return dpc_errf(e, DPC_EUSER, "%s: messages nested more than %d deep", name, DPC_ONNX_MAX_DEPTH);
            top++;
            ends[top] = pos + (size_t)v, kinds[top] = k;
            break;
        }
        default:
            return dpc_errf(e, DPC_EUSER, "%s: bad protobuf wire type %u at byte %zu", name, (unsigned)(tag & 7), pos);
        }
    }
}

/* ---- protobuf-c's allocations through dpc_malloc (fault injection) ---- */
static void *pb_alloc(void *ud, size_t n) { return dpc_malloc(n ? n : 1); }
static void pb_free(void *ud, void *p) { dpc_free(p); }
static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

void dpc_onnx_model_free(Onnx__ModelProto *m) {
    if (m)
        onnx__model_proto__free_unpacked(m, &pb_allocator);
}

int64_t dpc_onnx_opset(const Onnx__ModelProto *m) {
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (!d || !*d || strcmp(d, "ai.onnx") == 0)
            return m->opset_import[i]->version;
    }
    return 0;
}

static bool name_ok(const char *s) { return s && strlen(s) <= DPC_ONNX_MAX_NAME; }

static dpc_status check_model(Onnx__ModelProto *m, const char *name, dpc_err *e) {
    if (!m->graph)
        return dpc_errf(e, DPC_EUSER, "%s: the model has no graph", name);
    int64_t opset = 0;
    int seen = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        const char *d = o->domain;
        if (!d || !*d || strcmp(d, "ai.onnx") == 0) {
            seen++;
            opset = o->has_version ? o->version : 0;
        }
    }
    if (seen != 1)
        return dpc_errf(e, DPC_EUSER, "%s: the model imports the default opset %s", name,
                        seen ? "more than once" : "not at all");
    if (opset < DPC_ONNX_MIN_OPSET || opset > DPC_ONNX_MAX_OPSET)
        return dpc_errf(e, DPC_EUSER, "%s: opset %lld of the default domain is not supported (dpc imports opsets %d to %d)",
                        name, (long long)opset, DPC_ONNX_MIN_OPSET, DPC_ONNX_MAX_OPSET);
    const Onnx__GraphProto *g = m->graph;
    if (g->n_node > DPC_ONNX_MAX_NODES)
        return dpc_errf(e, DPC_EUSER, "%s: %zu nodes, more than the limit %d", name, g->n_node, DPC_ONNX_MAX_NODES);
    size_t nv = g->n_input + g->n_output + g->n_initializer;
    if (g->n_sparse_initializer)
        return dpc_errf(e, DPC_EUSER, "%s: sparse initializers are not supported", name);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n->op_type || !*n->op_type || !name_ok(n->op_type) || (n->name && !name_ok(n->name)))
            return dpc_errf(e, DPC_EUSER, "%s: node %zu has no op type or an over-long name", name, i);
        nv += n->n_output;
        if (nv > DPC_ONNX_MAX_VALUES)
            return dpc_errf(e, DPC_EUSER, "%s: more than %d values", name, DPC_ONNX_MAX_VALUES);
        for (size_t k = 0; k < n->n_input; k++)
            if (!name_ok(n->input[k]))
                return dpc_errf(e, DPC_EUSER, "%s: node %zu: an input name is longer than %d bytes", name, i,
                                DPC_ONNX_MAX_NAME);
        for (size_t k = 0; k < n->n_output; k++)
            if (!name_ok(n->output[k])) /* "" is an optional output left out */
                return dpc_errf(e, DPC_EUSER, "%s: node %zu: an output name is longer than %d bytes", name, i,
                                DPC_ONNX_MAX_NAME);
        for (size_t k = 0; k < n->n_attribute; k++)
            if (!n->attribute[k]->name || !name_ok(n->attribute[k]->name))
                return dpc_errf(e, DPC_EUSER, "%s: node %zu: an attribute without a name", name, i);
    }
    for (size_t i = 0; i < g->n_input; i++)
        if (!name_ok(g->input[i]->name) || !*g->input[i]->name)
            return dpc_errf(e, DPC_EUSER, "%s: graph input %zu has no name", name, i);
    for (size_t i = 0; i < g->n_output; i++)
        if (!name_ok(g->output[i]->name) || !*g->output[i]->name)
            return dpc_errf(e, DPC_EUSER, "%s: graph output %zu has no name", name, i);
    for (size_t i = 0; i < g->n_initializer; i++)
        if (!name_ok(g->initializer[i]->name) || !*g->initializer[i]->name)
            return dpc_errf(e, DPC_EUSER, "%s: initializer %zu has no name", name, i);
    if (!g->n_output)
        return dpc_errf(e, DPC_EUSER, "%s: the graph has no outputs", name);
    return DPC_OK;
}

dpc_status dpc_onnx_parse(const void *buf, size_t len, const char *name, Onnx__ModelProto **out, dpc_err *e) {
    *out = NULL;
    if (len > DPC_ONNX_MAX_BYTES)
        return dpc_errf(e, DPC_EUSER, "%s: larger than %zu bytes", name, DPC_ONNX_MAX_BYTES);
    dpc_status s = prescan(buf, len, name, e);
    if (s != DPC_OK)
        return s;
    Onnx__ModelProto *m = onnx__model_proto__unpack(&pb_allocator, len, buf);
    if (!m)
        return dpc_errf(e, DPC_EUSER, "%s: not a valid ONNX model (protobuf decoding failed)", name);
    if ((s = check_model(m, name, e)) != DPC_OK) {
        dpc_onnx_model_free(m);
        return s;
    }
    *out = m;
    return DPC_OK;
}

dpc_status dpc_onnx_read(const char *path, Onnx__ModelProto **out, dpc_err *e) {
    char *data;
    size_t len;
    *out = NULL;
    dpc_status s = dpc_read_file(path, DPC_ONNX_MAX_BYTES, &data, &len, e);
    if (s != DPC_OK)
        return s;
    s = dpc_onnx_parse(data, len, path, out, e);
    dpc_free(data);
    return s;
}

/* ---- the files a model reads ---- */

/* Locations as pointers into the model: a shared data file named by every
 * tensor costs one entry (consecutive repeats are skipped), and the rest
 * are made unique by sorting, so that the list stays linear in the file. */
typedef struct loc_list {
    const char **v;
    size_t n, cap;
    bool oom;
} loc_list;

static void tensor_locs(const Onnx__TensorProto *t, loc_list *l) {
    for (size_t i = 0; t && i < t->n_external_data; i++) {
        const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
        if (!k || !v || strcmp(k, "location") != 0 || !*v || (l->n && strcmp(l->v[l->n - 1], v) == 0))
            continue;
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 16;
            const char **nv = dpc_realloc(l->v, cap * sizeof *nv);
            if (!nv) {
                l->oom = true;
                return;
            }
            l->v = nv, l->cap = cap;
        }
        l->v[l->n++] = v;
    }
}

/* Initializers and node attributes, subgraphs included (their nesting is
 * bounded by the reader's pre-scan). */
static void graph_locs(const Onnx__GraphProto *g, loc_list *l) {
    for (size_t i = 0; g && i < g->n_initializer; i++)
        tensor_locs(g->initializer[i], l);
    for (size_t k = 0; g && k < g->n_node; k++)
        for (size_t a = 0; a < g->node[k]->n_attribute; a++) {
            const Onnx__AttributeProto *at = g->node[k]->attribute[a];
            tensor_locs(at->t, l);
            for (size_t j = 0; j < at->n_tensors; j++)
                tensor_locs(at->tensors[j], l);
            graph_locs(at->g, l);
            for (size_t j = 0; j < at->n_graphs; j++)
                graph_locs(at->graphs[j], l);
        }
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void dpc_onnx_files_free(char **files, size_t n) {
    for (size_t i = 0; files && i < n; i++)
        dpc_free(files[i]);
    dpc_free(files);
}

dpc_status dpc_onnx_model_files(const Onnx__ModelProto *m, const char *path, const char *dir, char ***files,
                                size_t *n, dpc_err *e) {
    *files = NULL;
    *n = 0;
    loc_list l = {0};
    graph_locs(m->graph, &l);
    if (l.n)
        qsort(l.v, l.n, sizeof *l.v, cmp_str);
    char **f = l.oom ? NULL : dpc_calloc(l.n + 1, sizeof *f);
    size_t k = 0;
    if (f && (f[k] = dpc_strdup(path)))
        k++;
    for (size_t i = 0; f && k && i < l.n; i++) {
        if (i && strcmp(l.v[i], l.v[i - 1]) == 0)
            continue;
        size_t len = strlen(dir) + strlen(l.v[i]) + 2;
        if (!(f[k] = dpc_malloc(len))) {
            k = 0;
            break;
        }
        snprintf(f[k], len, "%s%s%s", l.v[i][0] == '/' ? "" : dir, l.v[i][0] == '/' ? "" : "/", l.v[i]);
        k++;
    }
    dpc_free(l.v);
    if (!f || !k) {
        dpc_onnx_files_free(f, l.n + 1);
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    *files = f;
    *n = k;
    return DPC_OK;
}

/* ---- tensors ---- */

static size_t elem_size(int dt) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
    }
    return 0;
}

static const char *dt_name(int dt) {
    static const char *names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                  "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                  "COMPLEX128", "BFLOAT16"};
    return dt >= 0 && dt < (int)(sizeof names / sizeof *names) ? names[dt] : "an unknown type";
}

static bool is_float_dt(int dt) {
    return dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

/* Element i of little-endian raw bytes as double / int64. */
static double raw_f(const uint8_t *p, int dt, size_t i) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: { double d; memcpy(&d, p + 8 * i, 8); return d; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return dpc_f16_to_f32(h); }
    default: { uint16_t h; memcpy(&h, p + 2 * i, 2); uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
    }
}

static bool raw_i(const uint8_t *p, int dt, size_t i, int64_t *v) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: memcpy(v, p + 8 * i, 8); return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: { uint64_t u; memcpy(&u, p + 8 * i, 8); *v = (int64_t)u; return u <= INT64_MAX; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: { int32_t x; memcpy(&x, p + 4 * i, 4); *v = x; return true; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: { uint32_t x; memcpy(&x, p + 4 * i, 4); *v = x; return true; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: { int16_t x; memcpy(&x, p + 2 * i, 2); *v = x; return true; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: { uint16_t x; memcpy(&x, p + 2 * i, 2); *v = x; return true; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *v = (int8_t)p[i]; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *v = p[i]; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *v = p[i]; return p[i] <= 1;
    }
    return false;
}

/* The external data of t: the file "location" under dir, confined to it. */
static dpc_status external(const Onnx__TensorProto *t, const char *dir, const char *what, size_t want, uint8_t **out,
                           dpc_err *e) {
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
        if (!k || !v)
            return dpc_errf(e, DPC_EUSER, "%s: an external_data entry without key or value", what);
        if (strcmp(k, "location") == 0)
            loc = v;
        else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (errno || end == v || *end || x < 0) {
                char qv[80];
                dpc_quote(v, strlen(v), qv, sizeof qv);
                return dpc_errf(e, DPC_EUSER, "%s: external_data %s '%s' is not a non-negative integer", what, k, qv);
            }
            if (k[0] == 'o')
                off = x;
            else
                len = x;
        } else if (strcmp(k, "checksum") != 0) {
            char qk[80];
            dpc_quote(k, strlen(k), qk, sizeof qk);
            return dpc_errf(e, DPC_EUSER, "%s: unknown external_data key '%s'", what, qk);
        }
    }
    if (!loc || !*loc)
        return dpc_errf(e, DPC_EUSER, "%s: external data without a location", what);
    /* the location as messages show it: the file's bytes, escaped (a newline
     * in it must not break the one-line message) */
    char qloc[80];
    dpc_quote(loc, strlen(loc), qloc, sizeof qloc);
    if (loc[0] == '/' || strchr(loc, '\\'))
        return dpc_errf(e, DPC_EUSER, "%s: external data location '%s' must be a relative path inside the model's directory", what, qloc);
    for (const char *p = loc; *p;) {
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if ((n == 2 && p[0] == '.' && p[1] == '.') || n == 0)
            return dpc_errf(e, DPC_EUSER, "%s: external data location '%s' leaves the model's directory", what, qloc);
        p += n + (q ? 1 : 0);
    }
    if (len >= 0 && (uint64_t)len != want)
        return dpc_errf(e, DPC_EUSER, "%s: external data length %lld, but the tensor needs %zu bytes", what,
                        (long long)len, want);
    char path[PATH_MAX], rdir[PATH_MAX], rpath[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, loc) >= sizeof path)
        return dpc_errf(e, DPC_EUSER, "%s: external data path too long", what);
    if (!realpath(dir, rdir) || !realpath(path, rpath))
        return dpc_errf(e, DPC_EUSER, "%s: external data file '%s': %s", what, qloc, strerror(errno));
    size_t dl = strlen(rdir);
    if (strncmp(rpath, rdir, dl) != 0 || (rpath[dl] != '/' && strcmp(rdir, "/") != 0))
        return dpc_errf(e, DPC_EUSER, "%s: external data file '%s' resolves outside the model's directory", what, qloc);
    /* never a FIFO's blocking open (one inside the directory, or a link to
     * one): dpc_open_regular opens without blocking, then refuses it */
    int fd;
    uint64_t size;
    if (dpc_open_regular(rpath, O_NOFOLLOW, &fd, &size, NULL) != DPC_OK)
        return dpc_errf(e, DPC_EUSER, "%s: external data '%s' is not a readable regular file", what, qloc);
    if ((uint64_t)off > size || size - (uint64_t)off < want) {
        close(fd);
        return dpc_errf(e, DPC_EUSER, "%s: external data '%s' holds %llu bytes, fewer than offset %lld + %zu", what,
                        qloc, (unsigned long long)size, (long long)off, want);
    }
    uint8_t *b = dpc_malloc(want ? want : 1);
    if (!b) {
        close(fd);
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(fd, b + got, want - got, off + (off_t)got);
        if (r <= 0) {
            close(fd);
            dpc_free(b);
            return dpc_errf(e, DPC_EIO, "%s: cannot read external data '%s'", what, qloc);
        }
        got += (size_t)r;
    }
    close(fd);
    *out = b;
    return DPC_OK;
}

/* Element i of a float tensor (raw bytes or the typed field of its type:
 * FLOAT16 and BFLOAT16 are stored in int32_data) as a double. */
static double float_elem(const Onnx__TensorProto *t, const uint8_t *raw, int dt, size_t i) {
    double v;
    if (raw)
        v = raw_f(raw, dt, i);
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        v = t->float_data[i];
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
        v = t->double_data[i];
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16)
        v = dpc_f16_to_f32((uint16_t)t->int32_data[i]);
    else {
        uint32_t u = (uint32_t)(uint16_t)t->int32_data[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        v = f;
    }
    return v;
}

/* Element i of an integer or BOOL tensor into *out; false when it is out of
 * its type's range (a typed field holds wider values than the type). */
static bool int_elem(const Onnx__TensorProto *t, const uint8_t *raw, int dt, size_t i, int64_t *out) {
    int64_t v = 0;
    bool ok = true;
    if (raw)
        ok = raw_i(raw, dt, i, &v);
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        v = t->int64_data[i];
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32) {
        ok = t->uint64_data[i] <= (dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 ? UINT32_MAX : INT64_MAX);
        v = (int64_t)t->uint64_data[i];
    } else {
        v = t->int32_data[i];
        if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL)
            ok = v == 0 || v == 1;
        else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT8)
            ok = v >= -128 && v <= 127;
        else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8)
            ok = v >= 0 && v <= 255;
        else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT16)
            ok = v >= -32768 && v <= 32767;
        else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16)
            ok = v >= 0 && v <= 65535;
    }
    *out = v;
    return ok;
}

dpc_status dpc_onnx_tensor(const Onnx__TensorProto *t, const char *dir, const char *what, dpc_tensor **out,
                           bool *was_bool, dpc_err *e) {
    if (out)
        *out = NULL;
    int dt = t->has_data_type ? t->data_type : 0;
    size_t es = elem_size(dt);
    if (!es)
        return dpc_errf(e, DPC_EUSER, "%s: data type %s is not supported", what, dt_name(dt));
    if (t->n_dims > DPC_MAX_RANK)
        return dpc_errf(e, DPC_EUSER, "%s: rank %zu, more than %d", what, t->n_dims, DPC_MAX_RANK);
    if (t->segment)
        return dpc_errf(e, DPC_EUSER, "%s: segmented tensors are not supported", what);
    int64_t shape[DPC_MAX_RANK], numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > DPC_ONNX_MAX_DIM)
            return dpc_errf(e, DPC_EUSER, "%s: dim %zu is %lld", what, i, (long long)t->dims[i]);
        shape[i] = t->dims[i];
        if (!dpc_mul_i64(numel, shape[i], &numel) || numel > DPC_ONNX_MAX_NUMEL)
            return dpc_errf(e, DPC_EUSER, "%s: more than 2^40 elements", what);
    }
    size_t n = (size_t)numel, nbytes;
    if (!dpc_mul_size(n, es, &nbytes))
        return dpc_errf(e, DPC_EUSER, "%s: size overflows", what);
    bool ext = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    size_t typed = t->n_float_data + t->n_int32_data + t->n_int64_data + t->n_double_data + t->n_uint64_data +
                   t->n_string_data;
    int sources = (t->has_raw_data ? 1 : 0) + (typed ? 1 : 0) + (ext ? 1 : 0);
    if (sources > 1)
        return dpc_errf(e, DPC_EUSER, "%s: data given in more than one form (raw_data, typed fields, external)", what);
    if (!ext && t->n_external_data)
        return dpc_errf(e, DPC_EUSER, "%s: external_data entries but data_location is not EXTERNAL", what);
    const uint8_t *raw = NULL;
    uint8_t *owned = NULL;
    if (ext) {
        dpc_status s = external(t, dir, what, nbytes, &owned, e);
        if (s != DPC_OK)
            return s;
        raw = owned;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            return dpc_errf(e, DPC_EUSER, "%s: raw_data holds %zu bytes, but %lld elements of %s need %zu", what,
                            t->raw_data.len, (long long)numel, dt_name(dt), nbytes);
        raw = t->raw_data.data;
    } else {
        /* the typed field each data type is stored in */
        size_t have;
        switch (dt) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: have = t->n_float_data; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: have = t->n_double_data; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: have = t->n_int64_data; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: have = t->n_uint64_data; break;
        default: have = t->n_int32_data; break;
        }
        if (have != typed || have != n)
            return dpc_errf(e, DPC_EUSER, "%s: %zu typed values for %lld elements of %s", what, typed,
                            (long long)numel, dt_name(dt));
    }
    bool fl = is_float_dt(dt);
    dpc_tensor *o = NULL; /* NULL when only checking: floats need no look, integers are range-checked */
    dpc_status s = out ? dpc_tensor_new(fl ? DPC_F32 : DPC_I64, (int)t->n_dims, shape, &o, e) : DPC_OK;
    if (s != DPC_OK) {
        dpc_free(owned);
        return s;
    }
    /* only checking raw bytes of a type whose every value fits int64 (not
     * UINT64, not BOOL's 0/1): nothing to look at */
    bool all_fit = raw && dt != ONNX__TENSOR_PROTO__DATA_TYPE__UINT64 && dt != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    for (size_t i = 0; i < n && (o || (!fl && !all_fit)); i++) {
        if (fl) {
            double v = float_elem(t, raw, dt, i);
            if (o)
                ((float *)o->data)[i] = (float)v;
        } else {
            int64_t v = 0;
            bool ok = int_elem(t, raw, dt, i, &v);
            if (!ok) {
                dpc_tensor_free(o);
                dpc_free(owned);
                return dpc_errf(e, DPC_EUSER, "%s: element %zu is out of range for %s", what, i, dt_name(dt));
            }
            if (o)
                ((int64_t *)o->data)[i] = v;
        }
    }
    dpc_free(owned);
    if (was_bool)
        *was_bool = dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    if (out)
        *out = o;
    return DPC_OK;
}
