/* artifact_impl.h - what the parts of the .dpa code share (artifact.h is
 * the interface): the section names, the stored sources, the generated
 * texts both the writer and the verifier produce, the architecture list,
 * the checksum. The parts:
 *   artifact_util.c     base64, paths, compiling stored sources, the
 *                       generated texts and summary, architectures, checksum
 *   artifact_write.c    dpc_artifact_build: the writer (and the rebuild of
 *                       an older artifact from the sources it carries)
 *   artifact_read.c     the reader and the verifier (parse, sections,
 *                       instantiate), weights and images
 *   artifact_inspect.c  dpc_artifact_describe (`dpc inspect`) */
#ifndef DPC_ARTIFACT_IMPL_H
#define DPC_ARTIFACT_IMPL_H

#include "artifact.h"

#include <stdint.h>

#define META_PREFIX "dpc."
#define SRC_PREFIX "dpc.src/"
#define CUBIN_PREFIX "dpc.cubin."
#define PTX_PREFIX "dpc.ptx."
#define CHECKSUM_KEY "dpc.checksum"
#define CHECKSUM_PATTERN "\"" CHECKSUM_KEY "\":\""
#define IMAGE_SOURCE_KEY "dpc.cuda.sha256"
#define MAX_SOURCES 4096
#define MAX_PATH_COMPONENTS 256

static inline const char *bstr(const dpc_buf *b) { return b->data ? b->data : ""; }

/* ---- base64 (CUBIN sections) ---- */
void dpc_dpa_b64_encode(const unsigned char *p, size_t n, dpc_buf *out);
/* Strict: length a multiple of 4, '=' only as the last one or two. */
bool dpc_dpa_b64_decode(const char *s, unsigned char **out, size_t *len);

/* ---- paths ---- */
/* Lexical normalisation of a relative path: drops empty and "." components
 * and resolves ".." against the component before it (kept when there is
 * none). False when nothing is left or out is too small. */
bool dpc_dpa_norm_path(const char *p, char *out, size_t n);
/* As parse.c's dir_of: the length of what precedes the last '/' (*dot: no
 * '/', the directory is "."). */
size_t dpc_dpa_dir_len(const char *path, bool *dot);
const char *dpc_dpa_base_name(const char *path);

/* ---- the stored sources, and the canonical compilation of them ---- */
typedef struct src_set {
    int n;
    const char **name, **text; /* [0] is the root */
    size_t *len;
} src_set;
/* The root under its stored name, imports from the set, then fusion.
 * Diagnostics rendered into diags. */
dpc_status dpc_dpa_compile_sources(const src_set *s, dpc_model **out, dpc_buf *diags, dpc_err *e);

/* ---- the generated texts: written by the writer, compared by the verifier ---- */
typedef struct gen {
    dpc_buf ir, sched, c, cuda, summary;
} gen;
void dpc_dpa_generate(const dpc_model *m, const char *archs, const dpc_safetensors *weights, gen *g);
bool dpc_dpa_gen_oom(const gen *g);
void dpc_dpa_gen_free(gen *g);

/* Elements and bytes of every parameter of sig (summary, inspect). */
void dpc_dpa_parameter_totals(const dpc_signature *sig, int64_t *elems, int64_t *bytes);

/* ---- architectures ---- */
typedef struct arch_plan {
    int n;
    char arch[DPC_ARTIFACT_MAX_ARCHS][32]; /* normalised, sorted, unique */
    int nimg;
    char img[2 * DPC_ARTIFACT_MAX_ARCHS][32]; /* "sm_90" (cubin), "compute_90" (ptx), sorted, unique */
} arch_plan;
dpc_status dpc_dpa_plan_archs(const char *const *archs, int narchs, arch_plan *p, dpc_err *e);
/* "sm_80,sm_90": the normal form of dpc.arch ("" for none). */
void dpc_dpa_arch_list(const arch_plan *p, dpc_buf *out);
/* The section key of image arch: dpc.ptx.compute_XX or dpc.cubin.sm_XX. */
void dpc_dpa_image_key(const char *arch, char *key, size_t n);

/* ---- the checksum ---- */
/* The first occurrence of needle in hay[0, n), and how many there are. */
const char *dpc_dpa_find_bytes(const char *hay, size_t n, const char *needle, size_t *count);
/* The checksum of a file image whose checksum digits are at digits (64
 * bytes, inside the header), computed as if they were '0'. */
void dpc_dpa_compute_checksum(const unsigned char *file, size_t header_end, size_t file_len, size_t digits,
                              char out[65], bool *oom);
uint64_t dpc_dpa_read_le64(const unsigned char *p);

/* ---- the reader, for the writer's rebuild ---- */
/* dpc_artifact_parse, with any_version: an artifact of this format from
 * any dpc version (the rebuild reads its sources). */
dpc_status dpc_dpa_parse_any(const void *buf, size_t len, const char *name, bool any_version, dpc_artifact **out,
                             dpc_err *e);
/* DPC_EUSER: "<name>: damaged artifact: <what>; recompile it ...". */
dpc_status dpc_dpa_bad(dpc_err *e, const dpc_artifact *a, const char *what);

#endif
