/* artifact_util.c - what the .dpa writer and reader share (artifact_impl.h):
 * base64, paths, the canonical compilation of stored sources, the
 * generated texts, the architecture list and the checksum. */
#include "artifact_impl.h"
#include "nvrtc_compile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool dpc_artifact_path(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n >= 4 && strcmp(path + n - 4, ".dpa") == 0;
}

/* ------------------------------------------------------------ base64 */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void dpc_dpa_b64_encode(const unsigned char *p, size_t n, dpc_buf *out) {
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
bool dpc_dpa_b64_decode(const char *s, unsigned char **out, size_t *len) {
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
bool dpc_dpa_norm_path(const char *p, char *out, size_t n) {
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
size_t dpc_dpa_dir_len(const char *path, bool *dot) {
    const char *slash = strrchr(path, '/');
    *dot = !slash;
    return slash ? (slash == path ? 1 : (size_t)(slash - path)) : 0;
}

const char *dpc_dpa_base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ------------------------------------------------- compiling sources */

/* dpc_compile_opts.read_import: serves the stored sources by their
 * normalised names; real is "/" + the name. */
static bool mem_import(void *ud, const char *path, char *real, size_t real_n, const char **text, size_t *len) {
    const src_set *s = ud;
    char key[4096];
    if (!dpc_dpa_norm_path(path, key, sizeof key) || strlen(key) + 2 > real_n)
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
dpc_status dpc_dpa_compile_sources(const src_set *s, dpc_model **out, dpc_buf *diags, dpc_err *e) {
    *out = NULL;
    dpc_compile_opts o = {.path = s->name[0], .text = s->text[0], .len = s->len[0], .read_import = mem_import,
                          .import_ud = (void *)s, .stage = DPC_STAGE_FUSED, .defer_dims = true};
    dpc_unit *u;
    dpc_status st = dpc_compile(&o, &u, diags, e);
    return st == DPC_OK ? dpc_model_from_unit(u, out, e) : st;
}

/* ------------------------------------------------------ generated text */

void dpc_dpa_gen_free(gen *g) {
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

static void json_shape(dpc_buf *b, const dpc_signature *g, const dpc_sig_tensor *t, const char *batch) {
    dpc_buf_puts(b, "[");
    for (int i = 0; i < t->rank; i++) {
        if (i)
            dpc_buf_puts(b, ",");
        if (t->dim[i].rt && !t->dim[i].k) /* a run-time dim, by name */
            json_str(b, g->rtdims[t->dim[i].rt - 1].name);
        else if (!t->dim[i].batch)
            dpc_buf_printf(b, "%lld", (long long)t->dim[i].k);
        else if (t->dim[i].k == 1)
            json_str(b, batch);
        else
            dpc_buf_printf(b, "\"%lld*%s\"", (long long)t->dim[i].k, batch);
    }
    dpc_buf_puts(b, "]");
}

void dpc_dpa_parameter_totals(const dpc_signature *sig, int64_t *elems, int64_t *bytes) {
    *elems = *bytes = 0;
    for (int i = 0; i < sig->nparams; i++) {
        const dpc_sig_param *p = &sig->params[i];
        if (p->nonpersistent)
            continue; /* not in the state_dict */
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
        json_shape(b, g, n, batch);
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
        json_shape(b, g, n, batch);
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
    dpc_dpa_parameter_totals(g, &elems, &bytes);
    int count = 0;
    for (int i = 0; i < g->nparams; i++)
        count += !g->params[i].nonpersistent;
    dpc_buf_printf(b, ",\"parameters\":{\"count\":%d,\"elements\":%lld,\"bytes\":%lld,\"entries\":[", count,
                   (long long)elems, (long long)bytes);
    for (int i = 0, shown = 0; i < g->nparams; i++) {
        const dpc_sig_param *p = &g->params[i];
        if (p->nonpersistent)
            continue;
        dpc_buf_puts(b, shown++ ? ",{\"key\":" : "{\"key\":");
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

void dpc_dpa_generate(const dpc_model *m, const char *archs, const dpc_safetensors *weights, gen *g) {
    memset(g, 0, sizeof *g);
    dpc_unit_ir(m->unit, false, &g->ir);
    dpc_unit_ir(m->unit, true, &g->sched);
    dpc_unit_source(m->unit, DPC_DIALECT_C, KP_F32, &g->c);
    dpc_unit_source(m->unit, DPC_DIALECT_CUDA, KP_F32, &g->cuda);
    gen_summary(m, archs, weights, &g->summary);
}

bool dpc_dpa_gen_oom(const gen *g) {
    return g->ir.oom || g->sched.oom || g->c.oom || g->cuda.oom || g->summary.oom;
}

/* -------------------------------------------------------------- archs */

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

dpc_status dpc_dpa_plan_archs(const char *const *archs, int narchs, arch_plan *p, dpc_err *e) {
    memset(p, 0, sizeof *p);
    if (narchs > DPC_ARTIFACT_MAX_ARCHS)
        return dpc_errf(e, DPC_EUSAGE, "at most %d architectures", DPC_ARTIFACT_MAX_ARCHS);
    const char *list[DPC_ARTIFACT_MAX_ARCHS];
    for (int i = 0; i < narchs; i++) {
        if (!archs[i] || strlen(archs[i]) >= 24 || !dpc_nvrtc_arch_valid(archs[i]))
            return dpc_errf(e, DPC_EUSAGE, "dpc_dpa_bad architecture '%.40s' (expected sm_XX or compute_XX, e.g. sm_90)",
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

void dpc_dpa_arch_list(const arch_plan *p, dpc_buf *out) {
    for (int i = 0; i < p->n; i++)
        dpc_buf_printf(out, "%s%s", i ? "," : "", p->arch[i]);
    if (!out->data)
        dpc_buf_puts(out, "");
}

/* ------------------------------------------------------------ checksum */

const char *dpc_dpa_find_bytes(const char *hay, size_t n, const char *needle, size_t *count) {
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
void dpc_dpa_compute_checksum(const unsigned char *file, size_t header_end, size_t file_len, size_t digits,
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

uint64_t dpc_dpa_read_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void dpc_dpa_image_key(const char *arch, char *key, size_t n) {
    snprintf(key, n, "%s%s", dpc_nvrtc_arch_is_ptx(arch) ? PTX_PREFIX : CUBIN_PREFIX, arch);
}
