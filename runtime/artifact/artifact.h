/* artifact.h - compiled artifacts (.dpa): one self-describing, versioned
 * file per model, written by `dpc compile` and loaded by the CLI and libdpc.
 *
 * A .dpa is a valid safetensors file (every safetensors tool opens it). Its
 * tensors are the model's weights, if embedded (`--weights`), under their
 * state_dict names; with weights the header is padded with spaces so that
 * the data section starts at a multiple of 4096 bytes and can be
 * memory-mapped. Its __metadata__ carries dpc's sections (all strings):
 *
 *   dpc.format          "3" (DPC_ARTIFACT_FORMAT)
 *   dpc.version         the dpc that wrote it ("0.1.0")
 *   dpc.model           the model's class name
 *   dpc.root            the root source file's name ("parallel_model.dp")
 *   dpc.src/<name>      every .dp file, by name relative to the root's
 *                       directory ("lib/blocks.dp"), so the model can be
 *                       recompiled exactly
 *   dpc.ir              the graph IR (`dpc ir`)
 *   dpc.schedule        the kernel schedule (`dpc ir --stage fused`)
 *   dpc.gen.c           the generated C (`dpc source --target cpu`)
 *   dpc.gen.cuda        the generated CUDA (`dpc source --target cuda`)
 *   dpc.arch            the --arch list, normalised (sorted, unique, comma
 *                       separated; "" without --arch)
 *   dpc.cubin.sm_XX     NVRTC CUBIN for sm_XX, base64 (one per sm_ arch)
 *   dpc.ptx.compute_XX  NVRTC PTX for compute_XX, as text (one per sm_ or
 *                       compute_ arch: PTX lets newer GPUs JIT the kernels)
 *   dpc.cuda.sha256     SHA-256 (hex) of the CUDA source NVRTC compiled the
 *                       images from (present iff there are images); they
 *                       are compiled as the CUDA backend compiles (its unit
 *                       name and NVRTC options, dpc_cuda_compile_image)
 *   dpc.summary         inputs, scalars, outputs, parameters, kernels,
 *                       architectures and weights as one JSON object
 *   dpc.checksum        64 hex digits, see below
 *
 * The IR, schedule and sources are those of the stored sources compiled
 * under their stored names (the root by its base name), so they do not
 * depend on where the model was compiled from. Same inputs give the same
 * bytes: no timestamps, keys sorted, tensors in the safetensors writer's
 * deterministic order.
 *
 * Checksum: SHA-256 (hex) of the text A + B, where A is the SHA-256 hex of
 * the file's first 8 + N bytes (length prefix and header) with the 64
 * checksum digits replaced by '0', and B the SHA-256 hex of the data
 * section. Every byte of the file is covered, padding included.
 *
 * Loading checks, in this order, and refuses the file with one line naming
 * the problem: it is a safetensors file (every check of safetensors.h); it
 * is a dpc artifact (dpc.format present); format and dpc version are this
 * dpc's (else "artifact written by dpc X (format F); this dpc Y reads format
 * G ...; recompile it with `dpc compile`"); the checksum; every required
 * section present and no unknown dpc.* key; base64 and arch names valid.
 * dpc_artifact_instantiate then verifies it: the stored sources are
 * compiled again (front end, shape and type checks, fusion, emitters) and
 * the stored IR, schedule, generated sources and summary must equal the
 * result byte for byte, and embedded weights must match the parameter table
 * (names, shapes, float dtypes). The stored IR is never executed: what runs
 * is what the verified sources compile to, so an edited IR (even with the
 * checksum fixed up) is refused before any kernel exists.
 *
 * Stored images: dpc_artifact_instantiate attaches them to the model
 * (dpc_model.images) only once every check above has passed, and the CUDA
 * backend takes one only when dpc.cuda.sha256 equals the SHA-256 of the
 * source it generated itself for the run (so never in 16-bit storage:
 * images are of the f32 dialect): the CUBIN for exactly the GPU's sm_XX,
 * else the PTX of the newest compute_YY the GPU can run, else NVRTC (see
 * backend.h, dpc_backend_cuda_offer_images). Unlike the IR, an image
 * cannot be checked against the sources without compiling them again, which
 * is what storing it saves: the checksum catches damage, not a forger who
 * recomputes it. A stored image is machine code to trust as the artifact's
 * author, so the backend loads them only when the user opts in with
 * DPC_CUDA_DPA_IMAGES=1 (docs/security.md); by default NVRTC compiles the
 * regenerated, verified source. */
#ifndef DPC_ARTIFACT_H
#define DPC_ARTIFACT_H

#include "model.h"

/* 2: dpc.cuda.sha256 (the source the stored images were compiled from) is
 * required with images. 3: the kernel graph has prepare kernels (kernels
 * over parameters and constants only, run once per load; batch norms
 * folded into convolutions), shown in dpc.schedule and both generated
 * sources. An older format is refused with its own message. */
#define DPC_ARTIFACT_FORMAT 3
#define DPC_ARTIFACT_ALIGN 4096 /* data section offset, when weights are embedded */
#define DPC_ARTIFACT_MAX_ARCHS 16

typedef struct dpc_artifact_opts {
    const char *weights;    /* safetensors file to embed, or NULL */
    /* The weights to embed, in memory (an imported .onnx's initializers):
     * used instead of reading `weights`, which then only names them in
     * messages. Not freed. */
    const dpc_safetensors *weights_st;
    /* The root source (a .dp named path) in memory, len bytes, or NULL to
     * read path: the text dpc_compile_opts.text takes. */
    const char *text;
    size_t len;
    const char *const *archs; /* "sm_90", "compute_80", ... */
    int narchs;
    const char *cuda_suffix; /* fault injection (tests): appended to the CUDA source given to NVRTC */
} dpc_artifact_opts;

/* Compiles the model at path into an artifact image in *out (initialised
 * here; empty on failure). Compile errors are rendered into diags (the
 * status is then DPC_EUSER); a warning (extra weight keys, dropped) goes to
 * warnings. NVRTC failures are DPC_EDEVICE with the NVRTC log; a malformed
 * arch is DPC_EUSAGE. path may also be an artifact of this format written
 * by any dpc version: its stored sources are compiled again (the way to
 * upgrade an artifact), keeping its embedded weights and arch list unless
 * o gives others. */
dpc_status dpc_artifact_build(const char *path, const dpc_artifact_opts *o, dpc_buf *out, dpc_buf *diags,
                              dpc_buf *warnings, dpc_err *e);

typedef struct dpc_artifact_image {
    char *arch;           /* "sm_90" (CUBIN) or "compute_90" (PTX) */
    unsigned char *data;  /* decoded; PTX is NUL-terminated (len excludes it) */
    size_t len;
} dpc_artifact_image;

typedef struct dpc_artifact {
    char *name;          /* for messages: the path, or "<memory>" */
    dpc_safetensors *st; /* metadata, and the embedded weights as tensors */
    size_t file_bytes, data_offset;
    int format;
    const char *version, *model, *root, *ir, *schedule, *gen_c, *gen_cuda, *summary, *arch, *checksum;
    const char *cuda_sha256; /* dpc.cuda.sha256; NULL without images */
    int nsrc;
    const char **src_name, **src_text; /* [0] is the root */
    int nimg;
    dpc_artifact_image *img;
} dpc_artifact;

/* Parses an artifact image (copied; buf may be freed afterwards) and runs
 * the checks listed above up to and including the sections. name is used
 * in messages. */
dpc_status dpc_artifact_parse(const void *buf, size_t len, const char *name, dpc_artifact **out, dpc_err *e);
dpc_status dpc_artifact_read(const char *path, dpc_artifact **out, dpc_err *e);
void dpc_artifact_free(dpc_artifact *a);

/* Verifies the artifact (see above) and returns a model compiled from its
 * stored sources, ready for dpc_model_bind. */
dpc_status dpc_artifact_instantiate(const dpc_artifact *a, dpc_model **out, dpc_err *e);

bool dpc_artifact_has_weights(const dpc_artifact *a);
/* Moves the embedded weights out into a new dpc_safetensors (no metadata)
 * that the caller frees with dpc_st_free; DPC_EUSER if there are none. */
dpc_status dpc_artifact_take_weights(dpc_artifact *a, dpc_safetensors **out, dpc_err *e);
/* The image for arch ("sm_90", "compute_90"), or NULL. */
const dpc_artifact_image *dpc_artifact_find_image(const dpc_artifact *a, const char *arch);

/* `dpc inspect`: a summary of a verified artifact and its model. */
void dpc_artifact_describe(const dpc_artifact *a, const dpc_model *m, dpc_buf *out);

/* True when path names an artifact (ends in ".dpa"). */
bool dpc_artifact_path(const char *path);

#endif
