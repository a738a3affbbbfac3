/* artifact_read.c - the .dpa reader and verifier (artifact.h): the
 * safetensors image, format and version, checksum, sections; then
 * instantiation, which compiles the stored sources again and compares
 * every generated text and the embedded weights. */
#include "artifact_impl.h"
#include "backend_cuda.h"
#include "nvrtc_compile.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

dpc_status dpc_dpa_bad(dpc_err *e, const dpc_artifact *a, const char *what) {
    return dpc_errf(e, DPC_EUSER, "%s: damaged artifact: %s; recompile it with `dpc compile`", a->name, what);
}

/* The sections every artifact has, and where dpc_artifact keeps them. */
static const struct {
    const char *key;
    size_t field; /* offsetof a const char * of dpc_artifact */
} REQUIRED[] = {{"dpc.model", offsetof(dpc_artifact, model)},       {"dpc.root", offsetof(dpc_artifact, root)},
                {"dpc.ir", offsetof(dpc_artifact, ir)},             {"dpc.schedule", offsetof(dpc_artifact, schedule)},
                {"dpc.gen.c", offsetof(dpc_artifact, gen_c)},       {"dpc.gen.cuda", offsetof(dpc_artifact, gen_cuda)},
                {"dpc.summary", offsetof(dpc_artifact, summary)},   {"dpc.arch", offsetof(dpc_artifact, arch)},
                {CHECKSUM_KEY, offsetof(dpc_artifact, checksum)}};
#define NREQUIRED (sizeof REQUIRED / sizeof *REQUIRED)

static dpc_status missing(dpc_err *e, const dpc_artifact *a, const char *key) {
    char msg[256];
    snprintf(msg, sizeof msg, "section %s is missing", key);
    return dpc_dpa_bad(e, a, msg);
}

/* dpc.arch, which must be in normal form, as the plan of its images. */
static dpc_status read_arch_list(const dpc_artifact *a, arch_plan *plan, dpc_err *e) {
    const char *archs[DPC_ARTIFACT_MAX_ARCHS];
    char copy[DPC_ARTIFACT_MAX_ARCHS * 32];
    int narchs = 0;
    if (strlen(a->arch) >= sizeof copy)
        return dpc_dpa_bad(e, a, "dpc.arch is too long");
    snprintf(copy, sizeof copy, "%s", a->arch);
    for (char *p = copy; *p;) {
        char *q = strchr(p, ',');
        if (q)
            *q = 0;
        if (narchs == DPC_ARTIFACT_MAX_ARCHS)
            return dpc_dpa_bad(e, a, "dpc.arch lists too many architectures");
        archs[narchs++] = p;
        if (!q)
            break;
        p = q + 1;
    }
    dpc_err e2;
    if (dpc_dpa_plan_archs(archs, narchs, plan, &e2) != DPC_OK)
        return dpc_dpa_bad(e, a, "dpc.arch is not a list of architectures");
    dpc_buf norm;
    dpc_buf_init(&norm);
    dpc_dpa_arch_list(plan, &norm);
    bool same = strcmp(bstr(&norm), a->arch) == 0;
    dpc_buf_free(&norm);
    return same ? DPC_OK : dpc_dpa_bad(e, a, "dpc.arch is not in normal form");
}

/* The images dpc.arch implies (each must be there), and dpc.cuda.sha256,
 * what they were compiled from: the loader compares it with the backend's
 * own source before it uses one. */
static dpc_status read_images(dpc_artifact *a, dpc_err *e) {
    const dpc_safetensors *st = a->st;
    arch_plan plan;
    dpc_status s = read_arch_list(a, &plan, e);
    if (s != DPC_OK)
        return s;
    a->img = dpc_calloc((size_t)plan.nimg + 1, sizeof *a->img);
    if (!a->img)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    for (int i = 0; i < plan.nimg; i++) {
        char key[64], msg[256];
        dpc_dpa_image_key(plan.img[i], key, sizeof key);
        const char *v = meta_get(st, key);
        if (!v)
            return missing(e, a, key);
        dpc_artifact_image *im = &a->img[a->nimg++];
        if (!(im->arch = dpc_strdup(plan.img[i])))
            return dpc_errf(e, DPC_ENOMEM, "out of memory");
        if (dpc_nvrtc_arch_is_ptx(plan.img[i])) {
            im->len = strlen(v);
            if (!(im->data = (unsigned char *)dpc_strdup(v)))
                return dpc_errf(e, DPC_ENOMEM, "out of memory");
        } else if (!dpc_dpa_b64_decode(v, &im->data, &im->len)) {
            snprintf(msg, sizeof msg, "section %s is not base64", key);
            return dpc_dpa_bad(e, a, msg);
        }
    }
    a->cuda_sha256 = meta_get(st, IMAGE_SOURCE_KEY);
    if (a->nimg && !a->cuda_sha256)
        return missing(e, a, IMAGE_SOURCE_KEY);
    if (a->cuda_sha256 && (strlen(a->cuda_sha256) != 64 || strspn(a->cuda_sha256, "0123456789abcdef") != 64))
        return dpc_dpa_bad(e, a, IMAGE_SOURCE_KEY " is not 64 hex digits");
    return DPC_OK;
}

/* A dpc.* section other than a source: a required one, an image, the
 * format, the version or the images' source hash. */
static bool known_section(const dpc_artifact *a, const char *k) {
    if (!strcmp(k, "dpc.format") || !strcmp(k, "dpc.version") || (a->nimg && !strcmp(k, IMAGE_SOURCE_KEY)))
        return true;
    for (size_t j = 0; j < NREQUIRED; j++)
        if (!strcmp(k, REQUIRED[j].key))
            return true;
    for (int j = 0; j < a->nimg; j++) {
        char key[64];
        dpc_dpa_image_key(a->img[j].arch, key, sizeof key);
        if (!strcmp(k, key))
            return true;
    }
    return false;
}

/* Source section i (dpc.src/NAME): held to the rules of a .dp file (size,
 * no escape from the model's directory), then the artifact's own (names in
 * normal form); the root goes first. */
static dpc_status read_source(dpc_artifact *a, size_t i, bool *have_root, dpc_err *e) {
    const dpc_safetensors *st = a->st;
    const char *name = st->meta_keys[i] + strlen(SRC_PREFIX);
    char canon[4096], q[80], msg[256];
    dpc_quote(name, strlen(name), q, sizeof q);
    const char *why = dpc_source_rule(name, strlen(st->meta_vals[i]));
    if (why || !dpc_dpa_norm_path(name, canon, sizeof canon) || strcmp(canon, name) != 0) {
        snprintf(msg, sizeof msg, "source '%s' %s", q, why ? why : "is not named by a normalised relative path");
        return dpc_dpa_bad(e, a, msg);
    }
    if (strcmp(name, a->root) == 0) {
        a->src_name[0] = name;
        a->src_text[0] = st->meta_vals[i];
        *have_root = true;
    } else {
        a->src_name[a->nsrc] = name;
        a->src_text[a->nsrc++] = st->meta_vals[i];
    }
    return DPC_OK;
}

static dpc_status read_sections(dpc_artifact *a, dpc_err *e) {
    const dpc_safetensors *st = a->st;
    for (size_t i = 0; i < NREQUIRED; i++) {
        const char **slot = (const char **)((char *)a + REQUIRED[i].field);
        if (!(*slot = meta_get(st, REQUIRED[i].key)))
            return missing(e, a, REQUIRED[i].key);
    }
    dpc_status s = read_images(a, e);
    if (s != DPC_OK)
        return s;
    /* sources; every dpc.* key must be known */
    a->src_name = dpc_calloc(st->nmeta + 1, sizeof *a->src_name);
    a->src_text = dpc_calloc(st->nmeta + 1, sizeof *a->src_text);
    if (!a->src_name || !a->src_text)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    a->nsrc = 1;
    bool have_root = false;
    for (size_t i = 0; i < st->nmeta; i++) {
        const char *k = st->meta_keys[i];
        if (!starts_with(k, META_PREFIX) || known_section(a, k))
            continue;
        if (starts_with(k, SRC_PREFIX)) {
            if ((s = read_source(a, i, &have_root, e)) != DPC_OK)
                return s;
            continue;
        }
        char q[80], msg[256];
        dpc_quote(k, strlen(k), q, sizeof q);
        snprintf(msg, sizeof msg, "unknown section '%s'", q);
        return dpc_dpa_bad(e, a, msg);
    }
    if (!have_root || strchr(a->root, '/'))
        return dpc_dpa_bad(e, a, "the root source named by dpc.root is missing");
    return DPC_OK;
}

/* dpc.format fmt is this dpc's, and (unless any_version) dpc.version too. */
static dpc_status check_format(dpc_artifact *a, const char *fmt, bool any_version, dpc_err *e) {
    const char *ver = meta_get(a->st, "dpc.version");
    char qv[80], qf[40];
    dpc_quote(ver ? ver : "unknown", ver ? strlen(ver) : 7, qv, sizeof qv);
    dpc_quote(fmt, strlen(fmt), qf, sizeof qf);
    bool fmt_ok = fmt[0] >= '1' && fmt[0] <= '9' && strlen(fmt) < 9 && strspn(fmt, "0123456789") == strlen(fmt);
    a->format = fmt_ok ? atoi(fmt) : -1;
    if (a->format > 0 && a->format < DPC_ARTIFACT_FORMAT) {
        return dpc_errf(e, DPC_EUSER,
                        "%s: artifact written by dpc %s in format %s, older than the format %d this dpc %s reads "
                        "(format 2 requires dpc.cuda.sha256 with CUDA images, format 3 has prepare kernels); compile the model's .dp file again "
                        "with `dpc compile`",
                        a->name, qv, qf, DPC_ARTIFACT_FORMAT, DPC_VERSION);
    }
    if (a->format != DPC_ARTIFACT_FORMAT) {
        return dpc_errf(e, DPC_EUSER,
                        "%s: artifact written by dpc %s (format %s); this dpc %s reads format %d; recompile it with "
                        "`dpc compile`",
                        a->name, qv, qf, DPC_VERSION, DPC_ARTIFACT_FORMAT);
    }
    if (!any_version && (!ver || strcmp(ver, DPC_VERSION) != 0)) {
        return dpc_errf(e, DPC_EUSER,
                        "%s: artifact written by dpc %s (format %s); this dpc %s (format %d) loads only artifacts it "
                        "wrote itself; recompile it with `dpc compile` (`dpc compile %s -o NEW.dpa` rebuilds it "
                        "from the sources it carries)",
                        a->name, qv, qf, DPC_VERSION, DPC_ARTIFACT_FORMAT, a->name);
    }
    a->version = ver ? ver : "unknown";
    return DPC_OK;
}

dpc_status dpc_dpa_parse_any(const void *buf, size_t len, const char *name, bool any_version, dpc_artifact **out,
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
    uint64_t hl = dpc_dpa_read_le64(p);
    a->data_offset = 8 + (size_t)hl;
    const char *fmt = meta_get(a->st, "dpc.format");
    if (!fmt) {
        bool any = false;
        for (size_t i = 0; i < a->st->nmeta; i++)
            any |= starts_with(a->st->meta_keys[i], META_PREFIX);
        s = any ? dpc_dpa_bad(e, a, "section dpc.format is missing")
                : dpc_errf(e, DPC_EUSER, "%s: a safetensors file, but not a dpc artifact (no dpc.format in its metadata)",
                           a->name);
        goto fail;
    }
    if ((s = check_format(a, fmt, any_version, e)) != DPC_OK)
        goto fail;
    /* checksum over the raw bytes */
    size_t count;
    const char *at = dpc_dpa_find_bytes((const char *)p, a->data_offset, CHECKSUM_PATTERN, &count);
    size_t digits = at ? (size_t)(at - (const char *)p) + strlen(CHECKSUM_PATTERN) : 0;
    const char *stored = meta_get(a->st, CHECKSUM_KEY);
    if (count != 1 || !stored || strlen(stored) != 64 || digits + 65 > a->data_offset ||
        memcmp(p + digits, stored, 64) != 0 || p[digits + 64] != '"') {
        s = dpc_dpa_bad(e, a, "its checksum field is missing or malformed");
        goto fail;
    }
    char sum[65];
    bool oom;
    dpc_dpa_compute_checksum(p, a->data_offset, len, digits, sum, &oom);
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
    return dpc_dpa_parse_any(buf, len, name, false, out, e);
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
        return dpc_dpa_bad(e, a, "too many source files");
    for (int i = 0; i < a->nsrc; i++)
        lens[i] = strlen(a->src_text[i]);
    s.len = lens;
    dpc_model *m;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_status st = dpc_dpa_compile_sources(&s, &m, &diags, e);
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
    dpc_dpa_generate(m, a->arch, a->st, &g);
    struct {
        const char *what, *stored;
        const dpc_buf *now;
    } cmp[] = {{"IR", a->ir, &g.ir},
               {"kernel schedule", a->schedule, &g.sched},
               {"generated C", a->gen_c, &g.c},
               {"generated CUDA", a->gen_cuda, &g.cuda},
               {"summary", a->summary, &g.summary}};
    st = DPC_OK;
    if (dpc_dpa_gen_oom(&g))
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
    dpc_dpa_gen_free(&g);
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
