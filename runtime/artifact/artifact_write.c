/* artifact_write.c - the .dpa writer (dpc_artifact_build, artifact.h): the
 * model compiled from disk and again from its collected sources, weights
 * matched, texts generated, NVRTC images, the file image and its checksum;
 * and the rebuild of an artifact from the sources it carries. */
#include "artifact_impl.h"
#include "backend_cuda.h"
#include "nvrtc_compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- the writer */

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
    size_t dl = dpc_dpa_dir_len(path, &dot);
    for (int i = 0; i < s->n; i++) {
        struct {
            const char *path, *text;
            size_t len;
        } f, *sf = &f;
        f.path = dpc_unit_file(u, i, &f.text, &f.len);
        char key[4096];
        if (i == 0) {
            snprintf(key, sizeof key, "%s", dpc_dpa_base_name(path));
        } else {
            const char *rest = sf->path;
            if (dot && strncmp(rest, "./", 2) == 0)
                rest += 2;
            else if (!dot && strncmp(rest, path, dl) == 0 && rest[dl] == '/')
                rest += dl + 1;
            else
                return dpc_errf(e, DPC_EINTERNAL, "imported file '%s' is not named relative to '%s'", sf->path, path);
            if (!dpc_dpa_norm_path(rest, key, sizeof key))
                return dpc_errf(e, DPC_EUSER, "cannot store the import '%s' in an artifact: dpc_dpa_bad path", sf->path);
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

/* Step 3: the weights wst (named wname in messages; may be NULL) matched
 * against the model, as the tensors to embed in *emb (wt[] holds them, by
 * state_dict key; the caller frees it). Extra keys are a warning. */
static dpc_status embed_weights(const dpc_model *m, const dpc_safetensors *wst, const char *wname,
                                dpc_st_tensor **wt, dpc_safetensors *emb, dpc_buf *warnings, dpc_err *e) {
    const dpc_signature *sig = m->sig;
    memset(emb, 0, sizeof *emb);
    *wt = NULL;
    if (!wst)
        return DPC_OK;
    const dpc_st_tensor **picks = dpc_calloc((size_t)sig->nparams + 1, sizeof *picks);
    *wt = dpc_calloc((size_t)sig->nparams + 1, sizeof **wt);
    dpc_buf extra;
    dpc_buf_init(&extra);
    dpc_status s = picks && *wt ? dpc_weights_match(sig, wst, picks, &extra, e) : dpc_errf(e, DPC_ENOMEM, "out of memory");
    if (s != DPC_OK && picks && *wt)
        dpc_err_prefix(e, "%s: ", wname);
    if (s == DPC_OK && extra.len && warnings)
        dpc_buf_printf(warnings, "%s: unexpected keys, not stored in the artifact: %s", wname, extra.data);
    size_t nw = 0;
    for (int i = 0; s == DPC_OK && i < sig->nparams; i++) {
        if (!picks[i])
            continue;
        (*wt)[nw] = *picks[i];
        (*wt)[nw].name = (char *)sig->params[i].key;
        nw++;
    }
    emb->t = *wt;
    emb->n = nw;
    dpc_buf_free(&extra);
    dpc_free(picks);
    return s;
}

/* Step 4b: NVRTC images of the generated CUDA text (plus cuda_suffix, a
 * test's fault), images[i] for plan->img[i]; hex the SHA-256 of the text
 * they were compiled from. */
static dpc_status build_images(const dpc_model *m, const gen *g, const arch_plan *plan, const char *cuda_suffix,
                               dpc_buf *images, char hex[65], dpc_err *e) {
    dpc_buf cuda;
    dpc_buf_init(&cuda);
    dpc_buf_puts(&cuda, bstr(&g->cuda));
    if (cuda_suffix)
        dpc_buf_puts(&cuda, cuda_suffix);
    dpc_status s = cuda.oom ? dpc_errf(e, DPC_ENOMEM, "out of memory")
                            : compile_images(bstr(&cuda), m->sig->model_name, plan, images, e);
    if (s == DPC_OK)
        dpc_sha256_hex(bstr(&cuda), strlen(bstr(&cuda)), hex);
    dpc_buf_free(&cuda);
    return s;
}

/* Step 5: the metadata, in the order of the file: format, version, model,
 * sources, generated texts, images, the checksum (zeros until step 6). */
static dpc_status add_meta(meta_list *meta, const src_set *src, const dpc_model *m, const gen *g, const char *archs,
                           const arch_plan *plan, const dpc_buf *images, int nimages, const char *image_source,
                           dpc_err *e) {
    char num[32];
    snprintf(num, sizeof num, "%d", DPC_ARTIFACT_FORMAT);
    meta_add(meta, "dpc.format", num);
    meta_add(meta, "dpc.version", DPC_VERSION);
    meta_add(meta, "dpc.model", m->sig->model_name);
    meta_add(meta, "dpc.root", src->name[0]);
    for (int i = 0; i < src->n; i++) {
        dpc_buf k;
        dpc_buf_init(&k);
        dpc_buf_printf(&k, SRC_PREFIX "%s", src->name[i]);
        meta_add(meta, bstr(&k), src->text[i]);
        meta->oom |= k.oom;
        dpc_buf_free(&k);
    }
    meta_add(meta, "dpc.ir", bstr(&g->ir));
    meta_add(meta, "dpc.schedule", bstr(&g->sched));
    meta_add(meta, "dpc.gen.c", bstr(&g->c));
    meta_add(meta, "dpc.gen.cuda", bstr(&g->cuda));
    meta_add(meta, "dpc.arch", archs);
    meta_add(meta, "dpc.summary", bstr(&g->summary));
    if (nimages)
        meta_add(meta, IMAGE_SOURCE_KEY, image_source);
    for (int i = 0; i < nimages; i++) {
        char key[64];
        dpc_dpa_image_key(plan->img[i], key, sizeof key);
        if (dpc_nvrtc_arch_is_ptx(plan->img[i])) {
            if (strlen(bstr(&images[i])) != images[i].len || !dpc_utf8_valid(bstr(&images[i]), images[i].len, NULL))
                return dpc_errf(e, DPC_EDEVICE, "NVRTC returned PTX for %s that is not text", plan->img[i]);
            meta_add(meta, key, bstr(&images[i]));
        } else {
            dpc_buf b;
            dpc_buf_init(&b);
            dpc_dpa_b64_encode((const unsigned char *)images[i].data, images[i].len, &b);
            meta_add(meta, key, bstr(&b));
            meta->oom |= b.oom;
            dpc_buf_free(&b);
        }
    }
    char zeros[65];
    memset(zeros, '0', 64);
    zeros[64] = 0;
    meta_add(meta, CHECKSUM_KEY, zeros);
    return meta->oom ? dpc_errf(e, DPC_ENOMEM, "out of memory") : DPC_OK;
}

/* Step 6: the file: the safetensors image (the data section aligned to
 * DPC_ARTIFACT_ALIGN when there are weights), then its checksum. */
static dpc_status write_file(const meta_list *meta, const dpc_safetensors *emb, dpc_buf *out, dpc_err *e) {
    dpc_buf image;
    dpc_buf_init(&image);
    dpc_status s = dpc_st_serialize(emb->t, emb->n, (const char *const *)meta->k, (const char *const *)meta->v,
                                    (size_t)meta->n, &image, e);
    if (s != DPC_OK)
        return s;
    uint64_t hl = dpc_dpa_read_le64((const unsigned char *)image.data);
    size_t header_end = 8 + (size_t)hl;
    if (emb->n) {
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
    dpc_buf_free(&image);
    if (out->oom)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    size_t count;
    const char *at = dpc_dpa_find_bytes(out->data, header_end, CHECKSUM_PATTERN, &count);
    if (count != 1)
        return dpc_errf(e, DPC_EINTERNAL, "checksum field not found in the artifact header");
    size_t digits = (size_t)(at - out->data) + strlen(CHECKSUM_PATTERN);
    char sum[65];
    bool oom;
    dpc_dpa_compute_checksum((const unsigned char *)out->data, header_end, out->len, digits, sum, &oom);
    if (oom)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    memcpy(out->data + digits, sum, 64);
    return DPC_OK;
}

/* Steps 3-6 for a model m compiled from src: weights (wst, named wname in
 * messages, may be NULL), generated text, NVRTC images, the file image. */
static dpc_status write_image(const src_set *src, const dpc_model *m, const arch_plan *plan,
                              const dpc_safetensors *wst, const char *wname, const char *cuda_suffix, dpc_buf *out,
                              dpc_buf *warnings, dpc_err *e) {
    dpc_safetensors emb;
    dpc_st_tensor *wt = NULL;
    gen g;
    memset(&g, 0, sizeof g);
    meta_list meta = {0};
    dpc_buf images[2 * DPC_ARTIFACT_MAX_ARCHS];
    int nimages = 0;
    char image_source[65] = ""; /* SHA-256 of the CUDA text the images were compiled from */
    dpc_buf archs;
    dpc_buf_init(&archs);
    for (int i = 0; i < 2 * DPC_ARTIFACT_MAX_ARCHS; i++)
        dpc_buf_init(&images[i]);

    dpc_status s = embed_weights(m, wst, wname, &wt, &emb, warnings, e);
    if (s == DPC_OK && plan->nimg && m->sig->unbound)
        s = dpc_errf(e, DPC_EUSAGE,
                     "--arch: %s has the run-time dim %s, so its kernels are compiled for each value when it runs "
                     "(NVRTC, then the kernel cache): no CUDA images can be stored; compile it without --arch",
                     m->sig->model_name, m->sig->rtdims[0].name);
    if (s == DPC_OK) {
        dpc_dpa_arch_list(plan, &archs);
        dpc_dpa_generate(m, bstr(&archs), &emb, &g);
        if (dpc_dpa_gen_oom(&g) || archs.oom)
            s = dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    if (s == DPC_OK && plan->nimg) {
        nimages = plan->nimg;
        s = build_images(m, &g, plan, cuda_suffix, images, image_source, e);
    }
    if (s == DPC_OK)
        s = add_meta(&meta, src, m, &g, bstr(&archs), plan, images, nimages, image_source, e);
    if (s == DPC_OK)
        s = write_file(&meta, &emb, out, e);
    if (s != DPC_OK)
        dpc_buf_free(out);
    for (int i = 0; i < nimages; i++)
        dpc_buf_free(&images[i]);
    dpc_buf_free(&archs);
    meta_free(&meta);
    dpc_dpa_gen_free(&g);
    dpc_free(wt);
    return s;
}


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
    s = dpc_dpa_parse_any(data, len, path, true, &a, e);
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
        s = dpc_dpa_plan_archs(archs, n, &plan, e);
    }
    dpc_model *m = NULL;
    dpc_safetensors *wst = NULL;
    if (s == DPC_OK && a->nsrc > MAX_SOURCES)
        s = dpc_dpa_bad(e, a, "too many source files");
    if (s == DPC_OK && (s = dpc_dpa_compile_sources(&src, &m, diags, e)) != DPC_OK && s != DPC_ENOMEM) {
        char msg[DPC_ERR_MSG];
        snprintf(msg, sizeof msg, "%s", e->msg);
        s = dpc_errf(e, DPC_EUSER, "%s: its stored sources do not compile with this dpc (%s)", path, msg);
    }
    if (s == DPC_OK && o && o->weights && !o->weights_st)
        s = dpc_st_read(o->weights, &wst, e);
    const dpc_safetensors *given_st = wst ? wst : o ? o->weights_st : NULL;
    if (s == DPC_OK)
        s = write_image(&src, m, &plan, given_st ? given_st : dpc_artifact_has_weights(a) ? a->st : NULL,
                        given_st && o->weights ? o->weights : given_st ? "<memory>" : path,
                        o ? o->cuda_suffix : NULL, out, warnings, e);
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
    dpc_status s = dpc_dpa_plan_archs(o ? o->archs : NULL, o ? o->narchs : 0, &plan, e);
    if (s != DPC_OK)
        return s;
    if (dpc_artifact_path(path))
        return rebuild(path, o, &plan, out, diags, warnings, e);

    /* 1. the model as given, from disk (or its root from memory: an
     * imported .onnx): diagnostics name the user's paths */
    dpc_unit *disk = NULL;
    src_set src = {0};
    dpc_model *m = NULL;
    dpc_safetensors *wst = NULL;
    char *repr_disk = NULL, *repr_mem = NULL;
    int disk_nodes = 0;

    dpc_compile_opts co = {.path = path, .text = o ? o->text : NULL, .len = o && o->text ? o->len : 0,
                           .stage = DPC_STAGE_IR, .defer_dims = true};
    s = dpc_compile(&co, &disk, diags, e);
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
    s = dpc_dpa_compile_sources(&src, &m, &d2, e);
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

    if (o && o->weights && !o->weights_st && (s = dpc_st_read(o->weights, &wst, e)) != DPC_OK)
        goto done;
    s = write_image(&src, m, &plan, wst ? wst : o ? o->weights_st : NULL,
                    o && o->weights ? o->weights : "<memory>", o ? o->cuda_suffix : NULL, out, warnings, e);
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

