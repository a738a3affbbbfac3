/* artifact.c - writing, reading and verifying .dpa artifacts (artifact.h). */
#include "artifact.h"
#include "backend_cuda.h"
#include "nvrtc_compile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_PREFIX "dpc."
#define SRC_PREFIX "dpc.src/"
#define CUBIN_PREFIX "dpc.cubin."
#define PTX_PREFIX "dpc.ptx."
#define CHECKSUM_KEY "dpc.checksum"
#define CHECKSUM_PATTERN "\"" CHECKSUM_KEY "\":\""
#define IMAGE_SOURCE_KEY "dpc.cuda.sha256"
#define MAX_SOURCES 4096
#define MAX_PATH_COMPONENTS 256

static const char *bstr(const dpc_buf *b) { return b->data ? b->data : ""; }

bool dpc_artifact_path(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n >= 4 && strcmp(path + n - 4, ".dpa") == 0;
}

/* ------------------------------------------------------------ base64 */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_encode(const unsigned char *p, size_t n, dpc_buf *out) {
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        q[0] = B64[(v >> 18) & 63];
        q[1] = B64[(v >> 12) & 63];
        q[2] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        q[3] = i + 2 < n ? B64[v & 63] : '=';
        dpc_buf_put(out, q, 4);
    }
}

static int b64_val(unsigned char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Strict: length a multiple of 4, '=' only as the last one or two. */
static bool b64_decode(const char *s, unsigned char **out, size_t *len) {
    size_t n = strlen(s);
    *out = NULL;
    if (n % 4)
        return false;
    unsigned char *p = dpc_malloc(n / 4 * 3 + 1);
    if (!p)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)s[i + j];
            if (c == '=' && i + 4 == n && j >= 2) {
                v[j] = 0;
                pad++;
                continue;
            }
            if (pad || (v[j] = b64_val(c)) < 0) {
                dpc_free(p);
                return false;
            }
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        p[k++] = (unsigned char)(x >> 16);
        if (pad < 2)
            p[k++] = (unsigned char)(x >> 8);
        if (pad < 1)
            p[k++] = (unsigned char)x;
    }
    p[k] = 0;
    *out = p;
    *len = k;
    return true;
}

/* ------------------------------------------------------------- paths */

/* Lexical normalisation of a relative path: drops empty and "." components
 * and resolves ".." against the component before it (kept when there is
 * none). False when nothing is left or out is too small. */
static bool norm_path(const char *p, char *out, size_t n) {
    const char *comp[MAX_PATH_COMPONENTS];
    size_t clen[MAX_PATH_COMPONENTS];
    int k = 0;
    for (const char *s = p; *s;) {
        while (*s == '/')
            s++;
        if (!*s)
            break;
        const char *t = s;
        while (*t && *t != '/')
            t++;
        size_t l = (size_t)(t - s);
        bool dotdot = l == 2 && s[0] == '.' && s[1] == '.';
        if (l == 1 && s[0] == '.') {
        } else if (dotdot && k > 0 && !(clen[k - 1] == 2 && !strncmp(comp[k - 1], "..", 2))) {
            k--;
        } else {
            if (k == MAX_PATH_COMPONENTS)
                return false;
            comp[k] = s;
            clen[k++] = l;
        }
        s = t;
    }
    if (k == 0)
        return false;
    size_t pos = 0;
    for (int i = 0; i < k; i++) {
        if (pos + clen[i] + 2 > n)
            return false;
        if (i)
            out[pos++] = '/';
        memcpy(out + pos, comp[i], clen[i]);
        pos += clen[i];
    }
    out[pos] = 0;
    return true;
}

/* As parse.c's dir_of: what precedes the last '/', "." if none. */
static size_t dir_len(const char *path, bool *dot) {
    const char *slash = strrchr(path, '/');
    *dot = !slash;
    return slash ? (slash == path ? 1 : (size_t)(slash - path)) : 0;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ------------------------------------------------- compiling sources */

typedef struct src_set {
    int n;
    const char **name, **text;
    size_t *len;
} src_set;

/* dpc_compile_opts.read_import: serves the stored sources by their
 * normalised names; real is "/" + the name. */
static bool mem_import(void *ud, const char *path, char *real, size_t real_n, const char **text, size_t *len) {
    const src_set *s = ud;
    char key[4096];
    if (!norm_path(path, key, sizeof key) || strlen(key) + 2 > real_n)
        return false;
    for (int i = 1; i < s->n; i++)
        if (strcmp(s->name[i], key) == 0) {
            snprintf(real, real_n, "/%s", key);
            *text = s->text[i];
            *len = s->len[i];
            return true;
        }
    return false;
}

/* The canonical compilation: the root under its stored name, imports from
 * the set, then fusion. Diagnostics rendered into diags. */
static dpc_status compile_sources(const src_set *s, dpc_model **out, dpc_buf *diags, dpc_err *e) {
    *out = NULL;
    dpc_compile_opts o = {.path = s->name[0], .text = s->text[0], .len = s->len[0], .read_import = mem_import,
                          .import_ud = (void *)s, .stage = DPC_STAGE_FUSED};
    dpc_unit *u;
    dpc_status st = dpc_compile(&o, &u, diags, e);
    return st == DPC_OK ? dpc_model_from_unit(u, out, e) : st;
}

/* ------------------------------------------------------ generated text */

typedef struct gen {
    dpc_buf ir, sched, c, cuda, summary;
} gen;

static void gen_free(gen *g) {
    dpc_buf_free(&g->ir);
    dpc_buf_free(&g->sched);
    dpc_buf_free(&g->c);
    dpc_buf_free(&g->cuda);
    dpc_buf_free(&g->summary);
}

static void json_str(dpc_buf *b, const char *s) {
    dpc_buf_puts(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            dpc_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            dpc_buf_printf(b, "\\u%04x", c);
        else
            dpc_buf_put(b, s, 1);
    }
    dpc_buf_puts(b, "\"");
}

static void json_shape(dpc_buf *b, const dpc_sig_tensor *t, const char *batch) {
    dpc_buf_puts(b, "[");
    for (int i = 0; i < t->rank; i++) {
        if (i)
            dpc_buf_puts(b, ",");
        if (!t->dim[i].batch)
            dpc_buf_printf(b, "%lld", (long long)t->dim[i].k);
        else if (t->dim[i].k == 1)
            json_str(b, batch);
        else
            dpc_buf_printf(b, "\"%lld*%s\"", (long long)t->dim[i].k, batch);
    }
    dpc_buf_puts(b, "]");
}

static void parameter_totals(const dpc_signature *sig, int64_t *elems, int64_t *bytes) {
    *elems = *bytes = 0;
    for (int i = 0; i < sig->nparams; i++) {
        const dpc_sig_param *p = &sig->params[i];
        int64_t n = 1;
        for (int k = 0; k < p->rank; k++)
            n *= p->shape[k];
        *elems += n;
        *bytes += n * (p->is_int ? 8 : 4);
    }
}

/* "inputs", "scalars" and "outputs" of the summary. */
static void json_io(const dpc_signature *g, const char *batch, dpc_buf *b) {
    dpc_buf_puts(b, ",\"inputs\":[");
    for (int i = 0; i < g->ninputs; i++) {
        const dpc_sig_tensor *n = &g->inputs[i];
        dpc_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        json_str(b, n->name);
        dpc_buf_printf(b, ",\"dtype\":\"%s\",\"shape\":", n->dtype_name);
        json_shape(b, n, batch);
        dpc_buf_puts(b, "}");
    }
    dpc_buf_puts(b, "],\"scalars\":[");
    for (int i = 0; i < g->nscalars; i++) {
        const dpc_sig_scalar *n = &g->scalars[i];
        const char *type = n->type == DPC_SIG_FLOAT ? "float" : n->type == DPC_SIG_INT ? "int" : "bool";
        dpc_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        json_str(b, n->name);
        dpc_buf_printf(b, ",\"type\":\"%s\",\"default\":", type);
        if (!n->has_default)
            dpc_buf_puts(b, "null");
        else if (n->type == DPC_SIG_BOOL)
            dpc_buf_puts(b, n->def != 0 ? "true" : "false");
        else if (n->type == DPC_SIG_INT && fabs(n->def) < 9e15)
            dpc_buf_printf(b, "%lld", (long long)n->def);
        else if (isfinite(n->def))
            dpc_buf_printf(b, "%.17g", n->def);
        else
            dpc_buf_printf(b, "\"%s\"", isnan(n->def) ? "nan" : n->def > 0 ? "inf" : "-inf");
        dpc_buf_puts(b, "}");
    }
    dpc_buf_puts(b, "],\"outputs\":[");
    for (int i = 0; i < g->noutputs; i++) {
        const dpc_sig_tensor *n = &g->outputs[i];
        dpc_buf_printf(b, "%s{\"dtype\":\"%s\",\"shape\":", i ? "," : "", n->dtype_name);
        json_shape(b, n, batch);
        dpc_buf_puts(b, "}");
    }
    dpc_buf_puts(b, "]");
}

static void gen_summary(const dpc_model *m, const char *archs, const dpc_safetensors *weights, dpc_buf *b) {
    const dpc_signature *g = m->sig;
    const char *batch = g->batch_name ? g->batch_name : "N";
    dpc_buf_printf(b, "{\"format\":%d,\"dpc\":", DPC_ARTIFACT_FORMAT);
    json_str(b, DPC_VERSION);
    dpc_buf_puts(b, ",\"model\":");
    json_str(b, g->model_name);
    dpc_buf_puts(b, ",\"wrapper\":");
    if (g->wrapper)
        json_str(b, g->wrapper);
    else
        dpc_buf_puts(b, "null");
    dpc_buf_puts(b, ",\"batch\":");
    json_str(b, batch);
    json_io(g, batch, b);
    int64_t elems, bytes;
    parameter_totals(g, &elems, &bytes);
    dpc_buf_printf(b, ",\"parameters\":{\"count\":%d,\"elements\":%lld,\"bytes\":%lld,\"entries\":[", g->nparams,
                   (long long)elems, (long long)bytes);
    for (int i = 0; i < g->nparams; i++) {
        const dpc_sig_param *p = &g->params[i];
        dpc_buf_puts(b, i ? ",{\"key\":" : "{\"key\":");
        json_str(b, p->key);
        dpc_buf_puts(b, ",\"shape\":[");
        for (int k = 0; k < p->rank; k++)
            dpc_buf_printf(b, "%s%lld", k ? "," : "", (long long)p->shape[k]);
        dpc_buf_printf(b, "],\"dtype\":\"%s\"%s}", p->is_int ? "i64" : "f32", p->ignored ? ",\"ignored\":true" : "");
    }
    dpc_buf_printf(b, "]},\"kernels\":[");
    for (int k = 0; k < dpc_unit_nkernels(m->unit); k++) {
        dpc_kernel_info kr;
        dpc_unit_kernel(m->unit, k, &kr);
        dpc_buf_puts(b, k ? ",{\"name\":" : "{\"name\":");
        json_str(b, kr.name);
        dpc_buf_printf(b, ",\"kind\":\"%s\"}", kr.kind);
    }
    dpc_buf_puts(b, "],\"architectures\":[");
    int na = 0;
    for (const char *p = archs; *p;) {
        const char *q = strchr(p, ',');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        dpc_buf_printf(b, "%s\"%.*s\"", na++ ? "," : "", (int)l, p);
        p += l + (q ? 1 : 0);
    }
    size_t wbytes = 0;
    for (size_t i = 0; weights && i < weights->n; i++)
        wbytes += weights->t[i].nbytes;
    dpc_buf_printf(b, "],\"weights\":{\"embedded\":%s,\"tensors\":%zu,\"bytes\":%zu}}\n",
                   weights && weights->n ? "true" : "false", weights ? weights->n : 0, wbytes);
}

static void generate(const dpc_model *m, const char *archs, const dpc_safetensors *weights, gen *g) {
    memset(g, 0, sizeof *g);
    dpc_unit_ir(m->unit, false, &g->ir);
    dpc_unit_ir(m->unit, true, &g->sched);
    dpc_unit_source(m->unit, DPC_DIALECT_C, KP_F32, &g->c);
    dpc_unit_source(m->unit, DPC_DIALECT_CUDA, KP_F32, &g->cuda);
    gen_summary(m, archs, weights, &g->summary);
}

static bool gen_oom(const gen *g) {
    return g->ir.oom || g->sched.oom || g->c.oom || g->cuda.oom || g->summary.oom;
}

/* ------------------------------------------------------------ weights */

/* -------------------------------------------------------------- archs */

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

typedef struct arch_plan {
    int n;
    char arch[DPC_ARTIFACT_MAX_ARCHS][32]; /* normalised, sorted, unique */
    int nimg;
    char img[2 * DPC_ARTIFACT_MAX_ARCHS][32]; /* "sm_90" (cubin), "compute_90" (ptx), sorted, unique */
} arch_plan;

static dpc_status plan_archs(const char *const *archs, int narchs, arch_plan *p, dpc_err *e) {
    memset(p, 0, sizeof *p);
    if (narchs > DPC_ARTIFACT_MAX_ARCHS)
        return dpc_errf(e, DPC_EUSAGE, "at most %d architectures", DPC_ARTIFACT_MAX_ARCHS);
    const char *list[DPC_ARTIFACT_MAX_ARCHS];
    for (int i = 0; i < narchs; i++) {
        if (!archs[i] || strlen(archs[i]) >= 24 || !dpc_nvrtc_arch_valid(archs[i]))
            return dpc_errf(e, DPC_EUSAGE, "bad architecture '%.40s' (expected sm_XX or compute_XX, e.g. sm_90)",
                            archs[i] ? archs[i] : "");
        list[i] = archs[i];
    }
    qsort(list, (size_t)narchs, sizeof *list, cmp_str);
    const char *imgs[2 * DPC_ARTIFACT_MAX_ARCHS];
    char ptx[DPC_ARTIFACT_MAX_ARCHS][32];
    int ni = 0;
    for (int i = 0; i < narchs; i++) {
        if (p->n && strcmp(p->arch[p->n - 1], list[i]) == 0)
            continue;
        snprintf(p->arch[p->n], sizeof p->arch[0], "%s", list[i]);
        if (dpc_nvrtc_arch_is_ptx(list[i])) {
            imgs[ni++] = p->arch[p->n];
        } else {
            imgs[ni++] = p->arch[p->n];
            snprintf(ptx[p->n], sizeof ptx[0], "compute_%s", list[i] + 3);
            imgs[ni++] = ptx[p->n];
        }
        p->n++;
    }
    qsort(imgs, (size_t)ni, sizeof *imgs, cmp_str);
    for (int i = 0; i < ni; i++)
        if (!p->nimg || strcmp(p->img[p->nimg - 1], imgs[i]) != 0)
            snprintf(p->img[p->nimg++], sizeof p->img[0], "%s", imgs[i]);
    return DPC_OK;
}

static void arch_list(const arch_plan *p, dpc_buf *out) {
    for (int i = 0; i < p->n; i++)
        dpc_buf_printf(out, "%s%s", i ? "," : "", p->arch[i]);
    if (!out->data)
        dpc_buf_puts(out, "");
}

/* --------------------------------------------------------- the writer */

typedef struct meta_list {
    int n, cap;
    char **k, **v;
    bool oom;
} meta_list;

static void meta_add(meta_list *m, const char *k, const char *v) {
    if (m->oom)
        return;
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 32;
        char **nk = dpc_realloc(m->k, sizeof *nk * (size_t)cap);
        if (nk)
            m->k = nk;
        char **nv = nk ? dpc_realloc(m->v, sizeof *nv * (size_t)cap) : NULL;
        if (nv)
            m->v = nv;
        if (!nk || !nv) {
            m->oom = true;
            return;
        }
        m->cap = cap;
    }
    m->k[m->n] = dpc_strdup(k);
    m->v[m->n] = dpc_strdup(v);
    if (!m->k[m->n] || !m->v[m->n]) {
        dpc_free(m->k[m->n]);
        dpc_free(m->v[m->n]);
        m->oom = true;
        return;
    }
    m->n++;
}

static void meta_free(meta_list *m) {
    for (int i = 0; i < m->n; i++) {
        dpc_free(m->k[i]);
        dpc_free(m->v[i]);
    }
    dpc_free(m->k);
    dpc_free(m->v);
}

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t *count) {
    size_t l = strlen(needle);
    const char *first = NULL;
    *count = 0;
    for (size_t i = 0; i + l <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, l) == 0) {
            if (!first)
                first = hay + i;
            ++*count;
        }
    return first;
}

/* The checksum of a file image whose checksum digits are at digits (64
 * bytes, inside the header), computed as if they were '0'. */
static void compute_checksum(const unsigned char *file, size_t header_end, size_t file_len, size_t digits,
                             char out[65], bool *oom) {
    unsigned char *h = dpc_malloc(header_end ? header_end : 1);
    *oom = !h;
    if (!h)
        return;
    memcpy(h, file, header_end);
    memset(h + digits, '0', 64);
    char ab[129];
    dpc_sha256_hex(h, header_end, ab);
    dpc_sha256_hex(file + header_end, file_len - header_end, ab + 64);
    dpc_free(h);
    dpc_sha256_hex(ab, 128, out);
}

static uint64_t read_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Collects the files of a compilation read from disk, named relative to
 * the root's directory (the root by its base name). */
static dpc_status collect_sources(const dpc_unit *u, const char *path, src_set *s, dpc_err *e) {
    int nfiles = dpc_unit_nfiles(u);
    if (nfiles < 1 || nfiles > MAX_SOURCES)
        return dpc_errf(e, DPC_EINTERNAL, "unexpected number of source files (%d)", nfiles);
    s->n = nfiles;
    s->name = dpc_calloc((size_t)s->n, sizeof *s->name);
    s->text = dpc_calloc((size_t)s->n, sizeof *s->text);
    s->len = dpc_calloc((size_t)s->n, sizeof *s->len);
    if (!s->name || !s->text || !s->len)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    bool dot;
    size_t dl = dir_len(path, &dot);
    for (int i = 0; i < s->n; i++) {
        struct {
            const char *path, *text;
            size_t len;
        } f, *sf = &f;
        f.path = dpc_unit_file(u, i, &f.text, &f.len);
        char key[4096];
        if (i == 0) {
            snprintf(key, sizeof key, "%s", base_name(path));
        } else {
            const char *rest = sf->path;
            if (dot && strncmp(rest, "./", 2) == 0)
                rest += 2;
            else if (!dot && strncmp(rest, path, dl) == 0 && rest[dl] == '/')
                rest += dl + 1;
            else
                return dpc_errf(e, DPC_EINTERNAL, "imported file '%s' is not named relative to '%s'", sf->path, path);
            if (!norm_path(rest, key, sizeof key))
                return dpc_errf(e, DPC_EUSER, "cannot store the import '%s' in an artifact: bad path", sf->path);
        }
        if (strlen(sf->text) != sf->len || !dpc_utf8_valid(sf->text, sf->len, NULL))
            return dpc_errf(e, DPC_EUSER, "cannot store '%s' in an artifact: it is not UTF-8 text without NUL bytes",
                            sf->path);
        for (int j = 0; j < i; j++)
            if (strcmp(s->name[j], key) == 0)
                return dpc_errf(e, DPC_EUSER,
                                "cannot store '%s' in an artifact: two imported files are both named '%s' (symbolic "
                                "links?)",
                                sf->path, key);
        s->name[i] = dpc_strdup(key);
        s->text[i] = dpc_strndup(sf->text, sf->len);
        s->len[i] = sf->len;
        if (!s->name[i] || !s->text[i])
            return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    return DPC_OK;
}

static void src_free(src_set *s) {
    for (int i = 0; s->name && i < s->n; i++) {
        dpc_free((char *)s->name[i]);
        if (s->text)
            dpc_free((char *)s->text[i]);
    }
    dpc_free(s->name);
    dpc_free(s->text);
    dpc_free(s->len);
    memset(s, 0, sizeof *s);
}

static char *repr_of(const dpc_unit *u) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_unit_print(u, &b);
    return dpc_buf_take(&b);
}

/* NVRTC for every image of the plan (images[i] for plan->img[i]), in the
 * order of the arch list, so an error names the --arch entry it came from.
 * Compiled as the CUDA backend compiles (same unit name and options), so a
 * loaded artifact's image is the one the backend would build itself. */
static dpc_status compile_images(const char *cuda, const char *model_name, const arch_plan *p, dpc_buf *images,
                                 dpc_err *e) {
    bool done[2 * DPC_ARTIFACT_MAX_ARCHS] = {0};
    for (int i = 0; i < p->nimg; i++)
        dpc_buf_init(&images[i]);
    for (int a = 0; a < p->n; a++) {
        char ptx[40];
        snprintf(ptx, sizeof ptx, "compute_%s", p->arch[a] + (dpc_nvrtc_arch_is_ptx(p->arch[a]) ? 8 : 3));
        const char *want[2] = {p->arch[a], ptx};
        for (int w = 0; w < 2; w++)
            for (int i = 0; i < p->nimg; i++) {
                if (done[i] || strcmp(p->img[i], want[w]) != 0)
                    continue;
                done[i] = true;
                dpc_status s = dpc_cuda_compile_image(cuda, model_name, p->img[i], &images[i], NULL, e);
                if (s != DPC_OK) {
                    dpc_err_prefix(e, "--arch %s: ", p->arch[a]);
                    return s;
                }
            }
    }
    return DPC_OK;
}

/* Steps 3-6 for a model m compiled from src: weights (wst, named wname in
 * messages, may be NULL), generated text, NVRTC images, the file image. */
static dpc_status write_image(const src_set *src, const dpc_model *m, const arch_plan *plan,
                              const dpc_safetensors *wst, const char *wname, const char *cuda_suffix, dpc_buf *out,
                              dpc_buf *warnings, dpc_err *e) {
    dpc_status s = DPC_OK;
    dpc_safetensors emb = {0};
    const dpc_st_tensor **picks = NULL;
    dpc_st_tensor *wt = NULL;
    gen g;
    memset(&g, 0, sizeof g);
    meta_list meta = {0};
    dpc_buf images[2 * DPC_ARTIFACT_MAX_ARCHS];
    int nimages = 0;
    char image_source[65] = ""; /* SHA-256 of the CUDA text the images were compiled from */
    dpc_buf archs, extra, image;
    dpc_buf_init(&archs);
    dpc_buf_init(&extra);
    dpc_buf_init(&image);

    /* 3. weights */
    const dpc_signature *sig = m->sig;
    size_t nw = 0;
    if (wst) {
        picks = dpc_calloc((size_t)sig->nparams + 1, sizeof *picks);
        wt = dpc_calloc((size_t)sig->nparams + 1, sizeof *wt);
        if (!picks || !wt) {
            s = dpc_errf(e, DPC_ENOMEM, "out of memory");
            goto done;
        }
        if ((s = dpc_weights_match(sig, wst, picks, &extra, e)) != DPC_OK) {
            dpc_err_prefix(e, "%s: ", wname);
            goto done;
        }
        if (extra.len && warnings)
            dpc_buf_printf(warnings, "%s: unexpected keys, not stored in the artifact: %s", wname, extra.data);
        for (int i = 0; i < sig->nparams; i++) {
            if (!picks[i])
                continue;
            wt[nw] = *picks[i];
            wt[nw].name = (char *)sig->params[i].key;
            nw++;
        }
        emb.t = wt;
        emb.n = nw;
    }

    /* 4. generated text, NVRTC images */
    arch_list(plan, &archs);
    generate(m, bstr(&archs), &emb, &g);
    if (gen_oom(&g) || archs.oom) {
        s = dpc_errf(e, DPC_ENOMEM, "out of memory");
        goto done;
    }
    if (plan->nimg) {
        dpc_buf cuda;
        dpc_buf_init(&cuda);
        dpc_buf_puts(&cuda, bstr(&g.cuda));
        if (cuda_suffix)
            dpc_buf_puts(&cuda, cuda_suffix);
        nimages = plan->nimg;
        s = cuda.oom ? dpc_errf(e, DPC_ENOMEM, "out of memory")
                     : compile_images(bstr(&cuda), m->sig->model_name, plan, images, e);
        if (s == DPC_OK)
            dpc_sha256_hex(bstr(&cuda), strlen(bstr(&cuda)), image_source);
        dpc_buf_free(&cuda);
        if (s != DPC_OK)
            goto done;
    }

    /* 5. metadata */
    char num[32];
    snprintf(num, sizeof num, "%d", DPC_ARTIFACT_FORMAT);
    meta_add(&meta, "dpc.format", num);
    meta_add(&meta, "dpc.version", DPC_VERSION);
    meta_add(&meta, "dpc.model", m->sig->model_name);
    meta_add(&meta, "dpc.root", src->name[0]);
    for (int i = 0; i < src->n; i++) {
        dpc_buf k;
        dpc_buf_init(&k);
        dpc_buf_printf(&k, SRC_PREFIX "%s", src->name[i]);
        meta_add(&meta, bstr(&k), src->text[i]);
        meta.oom |= k.oom;
        dpc_buf_free(&k);
    }
    meta_add(&meta, "dpc.ir", bstr(&g.ir));
    meta_add(&meta, "dpc.schedule", bstr(&g.sched));
    meta_add(&meta, "dpc.gen.c", bstr(&g.c));
    meta_add(&meta, "dpc.gen.cuda", bstr(&g.cuda));
    meta_add(&meta, "dpc.arch", bstr(&archs));
    meta_add(&meta, "dpc.summary", bstr(&g.summary));
    if (nimages)
        meta_add(&meta, IMAGE_SOURCE_KEY, image_source);
    for (int i = 0; i < nimages; i++) {
        char key[64];
        bool ptx = dpc_nvrtc_arch_is_ptx(plan->img[i]);
        snprintf(key, sizeof key, "%s%s", ptx ? PTX_PREFIX : CUBIN_PREFIX, plan->img[i]);
        if (ptx) {
            if (strlen(bstr(&images[i])) != images[i].len || !dpc_utf8_valid(bstr(&images[i]), images[i].len, NULL)) {
                s = dpc_errf(e, DPC_EDEVICE, "NVRTC returned PTX for %s that is not text", plan->img[i]);
                goto done;
            }
            meta_add(&meta, key, bstr(&images[i]));
        } else {
            dpc_buf b;
            dpc_buf_init(&b);
            b64_encode((const unsigned char *)images[i].data, images[i].len, &b);
            meta_add(&meta, key, bstr(&b));
            meta.oom |= b.oom;
            dpc_buf_free(&b);
        }
    }
    char zeros[65];
    memset(zeros, '0', 64);
    zeros[64] = 0;
    meta_add(&meta, CHECKSUM_KEY, zeros);
    if (meta.oom) {
        s = dpc_errf(e, DPC_ENOMEM, "out of memory");
        goto done;
    }

    /* 6. the file: safetensors image, aligned data, checksum */
    s = dpc_st_serialize(wt, nw, (const char *const *)meta.k, (const char *const *)meta.v, (size_t)meta.n, &image, e);
    if (s != DPC_OK)
        goto done;
    uint64_t hl = read_le64((const unsigned char *)image.data);
    size_t header_end = 8 + (size_t)hl;
    if (nw) {
        size_t pad = (DPC_ARTIFACT_ALIGN - header_end % DPC_ARTIFACT_ALIGN) % DPC_ARTIFACT_ALIGN;
        uint64_t nhl = hl + pad;
        unsigned char len8[8];
        for (int i = 0; i < 8; i++)
            len8[i] = (unsigned char)(nhl >> (8 * i));
        dpc_buf_put(out, len8, 8);
        dpc_buf_put(out, image.data + 8, (size_t)hl);
        for (size_t i = 0; i < pad; i++)
            dpc_buf_put(out, " ", 1);
        dpc_buf_put(out, image.data + header_end, image.len - header_end);
        header_end += pad;
    } else {
        dpc_buf_put(out, image.data, image.len);
    }
    if (out->oom) {
        s = dpc_errf(e, DPC_ENOMEM, "out of memory");
        goto done;
    }
    size_t count;
    const char *at = find_bytes(out->data, header_end, CHECKSUM_PATTERN, &count);
    if (count != 1) {
        s = dpc_errf(e, DPC_EINTERNAL, "checksum field not found in the artifact header");
        goto done;
    }
    size_t digits = (size_t)(at - out->data) + strlen(CHECKSUM_PATTERN);
    char sum[65];
    bool oom;
    compute_checksum((const unsigned char *)out->data, header_end, out->len, digits, sum, &oom);
    if (oom) {
        s = dpc_errf(e, DPC_ENOMEM, "out of memory");
        goto done;
    }
    memcpy(out->data + digits, sum, 64);

done:
    if (s != DPC_OK)
        dpc_buf_free(out);
    for (int i = 0; i < nimages; i++)
        dpc_buf_free(&images[i]);
    dpc_buf_free(&image);
    dpc_buf_free(&archs);
    dpc_buf_free(&extra);
    meta_free(&meta);
    gen_free(&g);
    dpc_free(picks);
    dpc_free(wt);
    return s;
}

static dpc_status parse_any(const void *buf, size_t len, const char *name, bool any_version, dpc_artifact **out,
                            dpc_err *e);
static dpc_status bad(dpc_err *e, const dpc_artifact *a, const char *what);

/* `dpc compile OLD.dpa`: the sources an artifact of this format carries,
 * compiled again by this dpc (whichever dpc version wrote it). Its
 * embedded weights and arch list are kept unless --weights / --arch say
 * otherwise. */
static dpc_status rebuild(const char *path, const dpc_artifact_opts *o, const arch_plan *given, dpc_buf *out,
                          dpc_buf *diags, dpc_buf *warnings, dpc_err *e) {
    char *data;
    size_t len;
    dpc_status s = dpc_read_file(path, SIZE_MAX / 2, &data, &len, e);
    if (s != DPC_OK)
        return s;
    dpc_artifact *a = NULL;
    s = parse_any(data, len, path, true, &a, e);
    dpc_free(data);
    if (s != DPC_OK)
        return s;
    size_t lens[MAX_SOURCES];
    src_set src = {.n = a->nsrc, .name = a->src_name, .text = a->src_text, .len = lens};
    for (int i = 0; i < a->nsrc && i < MAX_SOURCES; i++)
        lens[i] = strlen(a->src_text[i]);
    arch_plan plan = *given;
    if (!given->n && a->arch[0]) {
        const char *archs[DPC_ARTIFACT_MAX_ARCHS];
        char copy[DPC_ARTIFACT_MAX_ARCHS * 32];
        int n = 0;
        snprintf(copy, sizeof copy, "%s", a->arch);
        for (char *p = strtok(copy, ","); p && n < DPC_ARTIFACT_MAX_ARCHS; p = strtok(NULL, ","))
            archs[n++] = p;
        s = plan_archs(archs, n, &plan, e);
    }
    dpc_model *m = NULL;
    dpc_safetensors *wst = NULL;
    if (s == DPC_OK && a->nsrc > MAX_SOURCES)
        s = bad(e, a, "too many source files");
    if (s == DPC_OK && (s = compile_sources(&src, &m, diags, e)) != DPC_OK && s != DPC_ENOMEM) {
        char msg[DPC_ERR_MSG];
        snprintf(msg, sizeof msg, "%s", e->msg);
        s = dpc_errf(e, DPC_EUSER, "%s: its stored sources do not compile with this dpc (%s)", path, msg);
    }
    if (s == DPC_OK && o && o->weights)
        s = dpc_st_read(o->weights, &wst, e);
    if (s == DPC_OK)
        s = write_image(&src, m, &plan, wst ? wst : dpc_artifact_has_weights(a) ? a->st : NULL,
                        wst ? o->weights : path, o ? o->cuda_suffix : NULL, out, warnings, e);
    if (s != DPC_OK)
        dpc_buf_free(out);
    if (wst)
        dpc_st_free(wst);
    dpc_model_free(m);
    dpc_artifact_free(a);
    return s;
}

dpc_status dpc_artifact_build(const char *path, const dpc_artifact_opts *o, dpc_buf *out, dpc_buf *diags,
                              dpc_buf *warnings, dpc_err *e) {
    dpc_buf_init(out);
    arch_plan plan;
    dpc_status s = plan_archs(o ? o->archs : NULL, o ? o->narchs : 0, &plan, e);
    if (s != DPC_OK)
        return s;
    if (dpc_artifact_path(path))
        return rebuild(path, o, &plan, out, diags, warnings, e);

    /* 1. the model as given, from disk: diagnostics name the user's paths */
    dpc_unit *disk = NULL;
    src_set src = {0};
    dpc_model *m = NULL;
    dpc_safetensors *wst = NULL;
    char *repr_disk = NULL, *repr_mem = NULL;
    int disk_nodes = 0;

    s = dpc_compile_file(path, DPC_STAGE_IR, &disk, diags, e);
    if (s != DPC_OK)
        goto done;
    s = collect_sources(disk, path, &src, e);
    if (s != DPC_OK)
        goto done;
    repr_disk = repr_of(disk);
    disk_nodes = dpc_unit_nnodes(disk);

    /* 2. the canonical compilation, from the collected sources */
    dpc_buf d2;
    dpc_buf_init(&d2);
    s = compile_sources(&src, &m, &d2, e);
    if (s != DPC_OK) {
        char msg[DPC_ERR_MSG];
        snprintf(msg, sizeof msg, "%s", d2.len ? d2.data : e->msg);
        msg[strcspn(msg, "\n")] = 0;
        dpc_buf_free(&d2);
        if (s != DPC_ENOMEM)
            s = dpc_errf(e, DPC_EUSER, "cannot store '%s' in an artifact: compiled from its stored sources: %s",
                         path, msg);
        goto done;
    }
    dpc_buf_free(&d2);
    repr_mem = repr_of(m->unit);
    if (!repr_disk || !repr_mem || strcmp(repr_disk, repr_mem) != 0 || dpc_unit_nnodes(m->unit) != disk_nodes ||
        dpc_unit_nfiles(m->unit) != src.n) {
        s = dpc_errf(e, DPC_EUSER,
                     "cannot store '%s' in an artifact: compiled from its stored sources it is a different model "
                     "(imports through symbolic links?)",
                     path);
        goto done;
    }

    if (o && o->weights && (s = dpc_st_read(o->weights, &wst, e)) != DPC_OK)
        goto done;
    s = write_image(&src, m, &plan, wst, o ? o->weights : NULL, o ? o->cuda_suffix : NULL, out, warnings, e);
done:
    if (s != DPC_OK)
        dpc_buf_free(out);
    dpc_free(repr_disk);
    dpc_free(repr_mem);
    if (wst)
        dpc_st_free(wst);
    dpc_model_free(m);
    dpc_unit_free(disk);
    src_free(&src);
    return s;
}

/* --------------------------------------------------------- the reader */

void dpc_artifact_free(dpc_artifact *a) {
    if (!a)
        return;
    if (a->st)
        dpc_st_free(a->st);
    for (int i = 0; i < a->nimg; i++) {
        dpc_free(a->img[i].arch);
        dpc_free(a->img[i].data);
    }
    dpc_free(a->img);
    dpc_free(a->src_name);
    dpc_free(a->src_text);
    dpc_free(a->name);
    dpc_free(a);
}

static const char *meta_get(const dpc_safetensors *st, const char *key) {
    for (size_t i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta_keys[i], key) == 0)
            return st->meta_vals[i];
    return NULL;
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static dpc_status bad(dpc_err *e, const dpc_artifact *a, const char *what) {
    return dpc_errf(e, DPC_EUSER, "%s: damaged artifact: %s; recompile it with `dpc compile`", a->name, what);
}

static dpc_status read_sections(dpc_artifact *a, dpc_err *e) {
    const dpc_safetensors *st = a->st;
    struct {
        const char *key;
        const char **slot;
    } req[] = {{"dpc.model", &a->model},     {"dpc.root", &a->root},        {"dpc.ir", &a->ir},
               {"dpc.schedule", &a->schedule}, {"dpc.gen.c", &a->gen_c},     {"dpc.gen.cuda", &a->gen_cuda},
               {"dpc.summary", &a->summary},  {"dpc.arch", &a->arch},        {CHECKSUM_KEY, &a->checksum}};
    char msg[256];
    for (size_t i = 0; i < sizeof req / sizeof *req; i++)
        if (!(*req[i].slot = meta_get(st, req[i].key))) {
            snprintf(msg, sizeof msg, "section %s is missing", req[i].key);
            return bad(e, a, msg);
        }
    /* the arch list, and the images it implies */
    const char *archs[DPC_ARTIFACT_MAX_ARCHS];
    char copy[DPC_ARTIFACT_MAX_ARCHS * 32];
    int narchs = 0;
    if (strlen(a->arch) >= sizeof copy)
        return bad(e, a, "dpc.arch is too long");
    snprintf(copy, sizeof copy, "%s", a->arch);
    for (char *p = copy; *p;) {
        char *q = strchr(p, ',');
        if (q)
            *q = 0;
        if (narchs == DPC_ARTIFACT_MAX_ARCHS)
            return bad(e, a, "dpc.arch lists too many architectures");
        archs[narchs++] = p;
        if (!q)
            break;
        p = q + 1;
    }
    arch_plan plan;
    dpc_err e2;
    if (plan_archs(archs, narchs, &plan, &e2) != DPC_OK)
        return bad(e, a, "dpc.arch is not a list of architectures");
    dpc_buf norm;
    dpc_buf_init(&norm);
    arch_list(&plan, &norm);
    bool same = strcmp(bstr(&norm), a->arch) == 0;
    dpc_buf_free(&norm);
    if (!same)
        return bad(e, a, "dpc.arch is not in normal form");
    a->img = dpc_calloc((size_t)plan.nimg + 1, sizeof *a->img);
    if (!a->img)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    for (int i = 0; i < plan.nimg; i++) {
        bool ptx = dpc_nvrtc_arch_is_ptx(plan.img[i]);
        char key[64];
        snprintf(key, sizeof key, "%s%s", ptx ? PTX_PREFIX : CUBIN_PREFIX, plan.img[i]);
        const char *v = meta_get(st, key);
        if (!v) {
            snprintf(msg, sizeof msg, "section %s is missing", key);
            return bad(e, a, msg);
        }
        dpc_artifact_image *im = &a->img[a->nimg++];
        if (!(im->arch = dpc_strdup(plan.img[i])))
            return dpc_errf(e, DPC_ENOMEM, "out of memory");
        if (ptx) {
            im->len = strlen(v);
            if (!(im->data = (unsigned char *)dpc_strdup(v)))
                return dpc_errf(e, DPC_ENOMEM, "out of memory");
        } else if (!b64_decode(v, &im->data, &im->len)) {
            snprintf(msg, sizeof msg, "section %s is not base64", key);
            return bad(e, a, msg);
        }
    }
    /* what the images were compiled from: the loader compares it with the
     * backend's own source before it uses one */
    a->cuda_sha256 = meta_get(st, IMAGE_SOURCE_KEY);
    if (a->nimg && !a->cuda_sha256) {
        snprintf(msg, sizeof msg, "section %s is missing", IMAGE_SOURCE_KEY);
        return bad(e, a, msg);
    }
    if (a->cuda_sha256 && (strlen(a->cuda_sha256) != 64 || strspn(a->cuda_sha256, "0123456789abcdef") != 64))
        return bad(e, a, IMAGE_SOURCE_KEY " is not 64 hex digits");
    /* sources; every dpc.* key must be known */
    a->src_name = dpc_calloc(st->nmeta + 1, sizeof *a->src_name);
    a->src_text = dpc_calloc(st->nmeta + 1, sizeof *a->src_text);
    if (!a->src_name || !a->src_text)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    a->nsrc = 1;
    bool have_root = false;
    for (size_t i = 0; i < st->nmeta; i++) {
        const char *k = st->meta_keys[i];
        if (!starts_with(k, META_PREFIX))
            continue;
        bool known = !strcmp(k, "dpc.format") || !strcmp(k, "dpc.version") ||
                     (a->nimg && !strcmp(k, IMAGE_SOURCE_KEY));
        for (size_t j = 0; !known && j < sizeof req / sizeof *req; j++)
            known = !strcmp(k, req[j].key);
        for (int j = 0; !known && j < a->nimg; j++) {
            char key[64];
            snprintf(key, sizeof key, "%s%s", dpc_nvrtc_arch_is_ptx(a->img[j].arch) ? PTX_PREFIX : CUBIN_PREFIX,
                     a->img[j].arch);
            known = !strcmp(k, key);
        }
        if (!known && starts_with(k, SRC_PREFIX)) {
            const char *name = k + strlen(SRC_PREFIX);
            char canon[4096], q[80];
            dpc_quote(name, strlen(name), q, sizeof q);
            /* the rules of a .dp file (size, no escape from the model's
             * directory), then the artifact's own: names in normal form */
            const char *why = dpc_source_rule(name, strlen(st->meta_vals[i]));
            if (why || !norm_path(name, canon, sizeof canon) || strcmp(canon, name) != 0) {
                snprintf(msg, sizeof msg, "source '%s' %s", q, why ? why : "is not named by a normalised relative path");
                return bad(e, a, msg);
            }
            if (strcmp(name, a->root) == 0) {
                a->src_name[0] = name;
                a->src_text[0] = st->meta_vals[i];
                have_root = true;
            } else {
                a->src_name[a->nsrc] = name;
                a->src_text[a->nsrc++] = st->meta_vals[i];
            }
            known = true;
        }
        if (!known) {
            char q[80];
            dpc_quote(k, strlen(k), q, sizeof q);
            snprintf(msg, sizeof msg, "unknown section '%s'", q);
            return bad(e, a, msg);
        }
    }
    if (!have_root || strchr(a->root, '/'))
        return bad(e, a, "the root source named by dpc.root is missing");
    return DPC_OK;
}

static dpc_status parse_any(const void *buf, size_t len, const char *name, bool any_version, dpc_artifact **out,
                            dpc_err *e) {
    *out = NULL;
    dpc_artifact *a = dpc_calloc(1, sizeof *a);
    if (!a || !(a->name = dpc_strdup(name ? name : "<memory>"))) {
        dpc_free(a);
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    const unsigned char *p = buf;
    a->file_bytes = len;
    dpc_status s;
    if (len < 9) {
        s = dpc_errf(e, DPC_EUSER, "%s: not a dpc artifact: %zu bytes is too small for a safetensors header", a->name,
                     len);
        goto fail;
    }
    if (p[8] != '{') {
        s = dpc_errf(e, DPC_EUSER,
                     "%s: not a dpc artifact: no safetensors header (byte 8 is 0x%02x, not '{'; starts %02x %02x %02x "
                     "%02x)",
                     a->name, p[8], p[0], p[1], p[2], p[3]);
        goto fail;
    }
    s = dpc_st_parse(buf, len, &a->st, e);
    if (s != DPC_OK) {
        char msg[DPC_ERR_MSG];
        snprintf(msg, sizeof msg, "%s", e->msg);
        s = dpc_errf(e, s == DPC_ENOMEM ? DPC_ENOMEM : DPC_EUSER, "%s: not a valid dpc artifact: %s", a->name, msg);
        goto fail;
    }
    uint64_t hl = read_le64(p);
    a->data_offset = 8 + (size_t)hl;
    const char *fmt = meta_get(a->st, "dpc.format");
    if (!fmt) {
        bool any = false;
        for (size_t i = 0; i < a->st->nmeta; i++)
            any |= starts_with(a->st->meta_keys[i], META_PREFIX);
        s = any ? bad(e, a, "section dpc.format is missing")
                : dpc_errf(e, DPC_EUSER, "%s: a safetensors file, but not a dpc artifact (no dpc.format in its metadata)",
                           a->name);
        goto fail;
    }
    const char *ver = meta_get(a->st, "dpc.version");
    char qv[80], qf[40];
    dpc_quote(ver ? ver : "unknown", ver ? strlen(ver) : 7, qv, sizeof qv);
    dpc_quote(fmt, strlen(fmt), qf, sizeof qf);
    bool fmt_ok = fmt[0] >= '1' && fmt[0] <= '9' && strlen(fmt) < 9 && strspn(fmt, "0123456789") == strlen(fmt);
    a->format = fmt_ok ? atoi(fmt) : -1;
    if (a->format != DPC_ARTIFACT_FORMAT) {
        s = dpc_errf(e, DPC_EUSER,
                     "%s: artifact written by dpc %s (format %s); this dpc %s reads format %d; recompile it with "
                     "`dpc compile`",
                     a->name, qv, qf, DPC_VERSION, DPC_ARTIFACT_FORMAT);
        goto fail;
    }
    if (!any_version && (!ver || strcmp(ver, DPC_VERSION) != 0)) {
        s = dpc_errf(e, DPC_EUSER,
                     "%s: artifact written by dpc %s (format %s); this dpc %s (format %d) loads only artifacts it "
                     "wrote itself; recompile it with `dpc compile` (`dpc compile %s -o NEW.dpa` rebuilds it "
                     "from the sources it carries)",
                     a->name, qv, qf, DPC_VERSION, DPC_ARTIFACT_FORMAT, a->name);
        goto fail;
    }
    a->version = ver ? ver : "unknown";
    /* checksum over the raw bytes */
    size_t count;
    const char *at = find_bytes((const char *)p, a->data_offset, CHECKSUM_PATTERN, &count);
    size_t digits = at ? (size_t)(at - (const char *)p) + strlen(CHECKSUM_PATTERN) : 0;
    const char *stored = meta_get(a->st, CHECKSUM_KEY);
    if (count != 1 || !stored || strlen(stored) != 64 || digits + 65 > a->data_offset ||
        memcmp(p + digits, stored, 64) != 0 || p[digits + 64] != '"') {
        s = bad(e, a, "its checksum field is missing or malformed");
        goto fail;
    }
    char sum[65];
    bool oom;
    compute_checksum(p, a->data_offset, len, digits, sum, &oom);
    if (oom) {
        s = dpc_errf(e, DPC_ENOMEM, "out of memory");
        goto fail;
    }
    if (memcmp(sum, stored, 64) != 0) {
        s = dpc_errf(e, DPC_EUSER,
                     "%s: checksum mismatch (stored %.16s..., computed %.16s...): the artifact is corrupted or was "
                     "modified; recompile it with `dpc compile`",
                     a->name, stored, sum);
        goto fail;
    }
    if ((s = read_sections(a, e)) != DPC_OK)
        goto fail;
    *out = a;
    return DPC_OK;
fail:
    dpc_artifact_free(a);
    return s;
}

dpc_status dpc_artifact_parse(const void *buf, size_t len, const char *name, dpc_artifact **out, dpc_err *e) {
    return parse_any(buf, len, name, false, out, e);
}

dpc_status dpc_artifact_read(const char *path, dpc_artifact **out, dpc_err *e) {
    *out = NULL;
    char *data;
    size_t len;
    dpc_status s = dpc_read_file(path, SIZE_MAX / 2, &data, &len, e);
    if (s != DPC_OK)
        return s;
    s = dpc_artifact_parse(data, len, path, out, e);
    dpc_free(data);
    return s;
}

/* First differing line of two texts, for messages. */
static void first_diff(const char *a, const char *b, int *line, char *sa, char *sb, size_t n) {
    *line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            ++*line;
            la = a + 1;
            lb = b + 1;
        }
        a++, b++;
    }
    size_t ea = strcspn(la, "\n"), eb = strcspn(lb, "\n");
    dpc_quote(la, ea, sa, n);
    dpc_quote(lb, eb, sb, n);
}

/* Copies a's images into m for the CUDA backend (backend.h, dpc_cu_images):
 * only a verified artifact gets here, and the backend still takes an image
 * only for the source named by dpc.cuda.sha256. */
static dpc_status attach_images(const dpc_artifact *a, dpc_model *m, dpc_err *e) {
    if (!a->nimg)
        return DPC_OK;
    dpc_cu_images *im = dpc_calloc(1, sizeof *im);
    if (!im || !(im->img = dpc_calloc((size_t)a->nimg, sizeof *im->img))) {
        dpc_free(im);
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    snprintf(im->from, sizeof im->from, "%s", a->name);
    snprintf(im->sha256, sizeof im->sha256, "%s", a->cuda_sha256);
    m->images = im;
    for (int i = 0; i < a->nimg; i++, im->n++) {
        dpc_cu_image *c = &im->img[i];
        snprintf(c->arch, sizeof c->arch, "%s", a->img[i].arch);
        if (!(c->data = dpc_malloc(a->img[i].len + 1)))
            return dpc_errf(e, DPC_ENOMEM, "out of memory");
        memcpy(c->data, a->img[i].data, a->img[i].len);
        c->data[a->img[i].len] = 0; /* PTX is text */
        c->len = a->img[i].len;
    }
    return DPC_OK;
}

dpc_status dpc_artifact_instantiate(const dpc_artifact *a, dpc_model **out, dpc_err *e) {
    *out = NULL;
    src_set s = {.n = a->nsrc, .name = a->src_name, .text = a->src_text};
    size_t lens[MAX_SOURCES];
    if (a->nsrc > MAX_SOURCES)
        return bad(e, a, "too many source files");
    for (int i = 0; i < a->nsrc; i++)
        lens[i] = strlen(a->src_text[i]);
    s.len = lens;
    dpc_model *m;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_status st = compile_sources(&s, &m, &diags, e);
    if (st != DPC_OK) {
        char msg[DPC_ERR_MSG];
        snprintf(msg, sizeof msg, "%s", diags.len ? diags.data : e->msg);
        msg[strcspn(msg, "\n")] = 0;
        dpc_buf_free(&diags);
        if (st == DPC_ENOMEM)
            return st;
        return dpc_errf(e, DPC_EUSER,
                        "%s: invalid artifact: its stored sources do not compile (%s); recompile it with `dpc compile`",
                        a->name, msg);
    }
    dpc_buf_free(&diags);
    gen g;
    generate(m, a->arch, a->st, &g);
    struct {
        const char *what, *stored;
        const dpc_buf *now;
    } cmp[] = {{"IR", a->ir, &g.ir},
               {"kernel schedule", a->schedule, &g.sched},
               {"generated C", a->gen_c, &g.c},
               {"generated CUDA", a->gen_cuda, &g.cuda},
               {"summary", a->summary, &g.summary}};
    st = DPC_OK;
    if (gen_oom(&g))
        st = dpc_errf(e, DPC_ENOMEM, "out of memory");
    else if (strcmp(a->model, m->sig->model_name) != 0)
        st = dpc_errf(e, DPC_EUSER, "%s: invalid artifact: it names the model '%.60s' but its sources define '%s'",
                      a->name, a->model, m->sig->model_name);
    for (size_t i = 0; st == DPC_OK && i < sizeof cmp / sizeof *cmp; i++) {
        if (strcmp(cmp[i].stored, bstr(cmp[i].now)) == 0)
            continue;
        int line;
        char sa[100], sb[100];
        first_diff(cmp[i].stored, bstr(cmp[i].now), &line, sa, sb, sizeof sa);
        st = dpc_errf(e, DPC_EUSER,
                      "%s: invalid artifact: its %s does not match its sources (line %d: stored '%s', compiled '%s'); "
                      "it was edited, corrupted or written by another build of dpc; recompile it with `dpc compile`",
                      a->name, cmp[i].what, line, sa, sb);
    }
    gen_free(&g);
    if (st == DPC_OK && a->st->n) {
        const dpc_signature *sig = m->sig;
        const dpc_st_tensor **picks = dpc_calloc((size_t)sig->nparams + 1, sizeof *picks);
        dpc_buf extra;
        dpc_buf_init(&extra);
        if (!picks)
            st = dpc_errf(e, DPC_ENOMEM, "out of memory");
        else if ((st = dpc_weights_match(sig, a->st, picks, &extra, e)) != DPC_OK) {
            char msg[DPC_ERR_MSG];
            snprintf(msg, sizeof msg, "%s", e->msg);
            st = dpc_errf(e, DPC_EUSER, "%s: invalid artifact: embedded %s", a->name, msg);
        } else if (extra.len)
            st = dpc_errf(e, DPC_EUSER, "%s: invalid artifact: embedded tensors the model does not have: %.300s",
                          a->name, extra.data);
        for (int i = 0; st == DPC_OK && i < sig->nparams; i++)
            if (picks[i] && strcmp(picks[i]->name, sig->params[i].key) != 0)
                st = dpc_errf(e, DPC_EUSER, "%s: invalid artifact: embedded tensor '%.80s' is not a state_dict key",
                              a->name, picks[i]->name);
        dpc_free(picks);
        dpc_buf_free(&extra);
    }
    if (st == DPC_OK)
        st = attach_images(a, m, e);
    if (st != DPC_OK) {
        dpc_model_free(m);
        return st;
    }
    *out = m;
    return DPC_OK;
}

bool dpc_artifact_has_weights(const dpc_artifact *a) { return a && a->st && a->st->n > 0; }

dpc_status dpc_artifact_take_weights(dpc_artifact *a, dpc_safetensors **out, dpc_err *e) {
    *out = NULL;
    if (!dpc_artifact_has_weights(a))
        return dpc_errf(e, DPC_EUSER, "%s has no embedded weights; give --weights W.safetensors",
                        a ? a->name : "the artifact");
    dpc_safetensors *w = dpc_calloc(1, sizeof *w);
    if (!w)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    w->t = a->st->t;
    w->n = a->st->n;
    a->st->t = NULL;
    a->st->n = 0;
    *out = w;
    return DPC_OK;
}

const dpc_artifact_image *dpc_artifact_find_image(const dpc_artifact *a, const char *arch) {
    for (int i = 0; a && i < a->nimg; i++)
        if (strcmp(a->img[i].arch, arch) == 0)
            return &a->img[i];
    return NULL;
}

/* ------------------------------------------------------------ inspect */

static void human_bytes(double b, char *out, size_t n) {
    if (b < 1024)
        snprintf(out, n, "%.0f B", b);
    else if (b < 1024.0 * 1024)
        snprintf(out, n, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(out, n, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(out, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

/* The inputs, scalars and outputs lines of the description. */
static void describe_io(const dpc_signature *g, dpc_buf *out) {
    for (int i = 0; i < g->ninputs; i++) {
        const dpc_sig_tensor *n = &g->inputs[i];
        dpc_buf_printf(out, "%s%s: %s%s\n", i ? "               " : "inputs:        ", n->name, n->dtype_name,
                       n->shape);
    }
    if (!g->ninputs)
        dpc_buf_puts(out, "inputs:        (none)\n");
    for (int i = 0; i < g->nscalars; i++) {
        const dpc_sig_scalar *n = &g->scalars[i];
        char dv[64] = "";
        if (n->has_default) {
            char num[48];
            dpc_format_pyfloat(n->def, num, sizeof num);
            if (n->type == DPC_SIG_BOOL)
                snprintf(dv, sizeof dv, " = %s", n->def != 0 ? "True" : "False");
            else if (n->type == DPC_SIG_INT)
                snprintf(dv, sizeof dv, " = %lld", (long long)n->def);
            else
                snprintf(dv, sizeof dv, " = %s", num);
        }
        dpc_buf_printf(out, "%s%s: %s%s\n", i ? "               " : "scalars:       ", n->name,
                       n->type == DPC_SIG_FLOAT ? "float" : n->type == DPC_SIG_INT ? "int" : "bool",
                       dv[0] ? dv : " (required)");
    }
    for (int i = 0; i < g->noutputs; i++) {
        const dpc_sig_tensor *n = &g->outputs[i];
        dpc_buf_printf(out, "%s%d: %s%s\n", i ? "               " : "outputs:       ", i, n->dtype_name, n->shape);
    }
}

void dpc_artifact_describe(const dpc_artifact *a, const dpc_model *m, dpc_buf *out) {
    const dpc_signature *g = m->sig;
    char hb[32];
    dpc_buf_printf(out, "artifact:      %s (%zu bytes)\n", a->name, a->file_bytes);
    dpc_buf_printf(out, "format:        %d, written by dpc %s (checksum and IR verified)\n", a->format, a->version);
    dpc_buf_printf(out, "model:         %s%s%s%s\n", g->model_name, g->wrapper ? " in " : "",
                   g->wrapper ? g->wrapper : "", g->wrapper ? "(...)" : "");
    dpc_buf_printf(out, "sources:       %s", a->src_name[0]);
    for (int i = 1; i < a->nsrc; i++)
        dpc_buf_printf(out, ", %s", a->src_name[i]);
    dpc_buf_puts(out, "\n");
    describe_io(g, out);
    int64_t elems, bytes;
    parameter_totals(g, &elems, &bytes);
    human_bytes((double)bytes, hb, sizeof hb);
    dpc_buf_printf(out, "parameters:    %d tensors, %lld values, %lld bytes (%s)\n", g->nparams, (long long)elems,
                   (long long)bytes, hb);
    if (dpc_artifact_has_weights(a)) {
        size_t wb = 0;
        for (size_t i = 0; i < a->st->n; i++)
            wb += a->st->t[i].nbytes;
        human_bytes((double)wb, hb, sizeof hb);
        dpc_buf_printf(out, "weights:       embedded: %zu tensors, %zu bytes (%s), data at offset %zu\n", a->st->n, wb,
                       hb, a->data_offset);
    } else {
        dpc_buf_puts(out, "weights:       not embedded (give --weights W.safetensors to run)\n");
    }
    int counts[DPC_KERNEL_KINDS] = {0}, nk = dpc_unit_nkernels(m->unit);
    for (int k = 0; k < nk; k++) {
        dpc_kernel_info kr;
        dpc_unit_kernel(m->unit, k, &kr);
        counts[kr.kind_index]++;
    }
    dpc_buf_printf(out, "kernels:       %d", nk);
    const char *sep = " (";
    for (int k = 0; k < DPC_KERNEL_KINDS; k++)
        if (counts[k]) {
            dpc_buf_printf(out, "%s%d %s", sep, counts[k], dpc_kernel_kind_name(k));
            sep = ", ";
        }
    dpc_buf_puts(out, sep[0] == ',' ? ")\n" : "\n");
    if (!a->nimg)
        dpc_buf_puts(out, "architectures: none (CPU only; compile with --arch sm_XX for CUDA images)\n");
    for (int i = 0; i < a->nimg; i++) {
        human_bytes((double)a->img[i].len, hb, sizeof hb);
        dpc_buf_printf(out, "%s%s (%s, %s)\n", i ? "               " : "architectures: ", a->img[i].arch,
                       dpc_nvrtc_arch_is_ptx(a->img[i].arch) ? "PTX" : "CUBIN", hb);
    }
    dpc_buf_printf(out, "dpc version:   %s\n", a->version);
    dpc_buf_printf(out, "checksum:      %s\n", a->checksum);
}
