/* onnx.h - ONNX models in: the reader (onnx_read.c) and the importer to
 * .dp source + safetensors weights (onnx_import.c, op table onnx_ops.c).
 *
 * The reader parses a .onnx file with the C that protoc-c generates at
 * build time from Debian's onnx.proto, then holds every field the importer
 * reads to the rules below, refusing the file with a one-line reason
 * ("model.onnx: ...") otherwise. protobuf-c checks the wire format (tags,
 * wire types, varints, lengths within the buffer); before it runs, a
 * schema-aware scan without recursion bounds the nesting of messages, so a
 * deep file cannot exhaust the stack of protobuf-c's recursive unpacker.
 *
 * Like the rest of the library, nothing here prints or exits. */
#ifndef DPC_ONNX_H
#define DPC_ONNX_H

#include "base.h"
#include "safetensors.h"
#include "tensor.h"

#include <stdbool.h>
#include <stdint.h>

/* Limits (docs/onnx.md). */
#define DPC_ONNX_MAX_BYTES ((size_t)2147483647) /* protobuf's own 2 GiB bound */
#define DPC_ONNX_MAX_DEPTH 32                  /* nesting of messages */
#define DPC_ONNX_MAX_NODES 1000000
#define DPC_ONNX_MAX_VALUES 4000000            /* inputs, outputs, initializers, node outputs */
#define DPC_ONNX_MAX_NUMEL (INT64_C(1) << 40)  /* elements of one tensor */
#define DPC_ONNX_MAX_DIM (INT64_C(1) << 40)    /* one dim */
#define DPC_ONNX_MAX_NAME 4096                 /* bytes of a name */
#define DPC_ONNX_MAX_DIMS 8                    /* --dim NAME=SIZE options */

/* A fixed value for a symbolic input dim: `--dim seq=128`. */
typedef struct dpc_onnx_dim {
    const char *name; /* the dim_param of the graph input, as written in the file */
    int64_t value;
} dpc_onnx_dim;

typedef struct dpc_onnx_import_opts {
    const char *path;              /* the .onnx file; external data resolve beside it */
    const void *image;             /* when set: the file's bytes (len), read instead of path */
    size_t len;
    const dpc_onnx_dim *dims;      /* --dim values */
    int ndims;
} dpc_onnx_import_opts;

/* What an import makes: the .dp text and the weights (state_dict keys in
 * the .dp's names), both owned. */
typedef struct dpc_onnx_result {
    char *dp;                 /* NUL-terminated .dp source */
    size_t dp_len;
    dpc_st_tensor *weights;   /* names and data owned */
    size_t nweights;
    /* The files the model reads: [0] the .onnx (opts.path as given), then
     * each external-data file a tensor of it names (its directory joined
     * with the location), once each: what no output of the command may
     * replace (the CLI's "an output names an input" refusal). Owned. */
    char **files;
    size_t nfiles;
} dpc_onnx_result;

/* Imports o->path. A model dpc cannot run (an op, attribute, dtype or shape
 * it does not support) is DPC_EUSER with a located message:
 *   "model.onnx: node 'Conv_12' (Conv, opset 14): attribute auto_pad=SAME_LOWER is not supported". */
dpc_status dpc_onnx_import(const dpc_onnx_import_opts *o, dpc_onnx_result *out, dpc_err *e);
void dpc_onnx_result_free(dpc_onnx_result *r);
/* The weights of r as a dpc_safetensors (serialised and parsed back, so
 * it is exactly what a file written from them reads as). */
dpc_status dpc_onnx_result_weights(const dpc_onnx_result *r, dpc_safetensors **out, dpc_err *e);

/* The op types the importer supports (default domain), sorted, NULL-ended;
 * *min_opset / *max_opset of the table row when asked for by index. */
int dpc_onnx_nops(void);
const char *dpc_onnx_op_name(int i, int *min_opset, int *max_opset, const char **note);
/* The inputs and outputs row i takes, as the table writes them: "1",
 * "2-3" (two required, a third optional), "1+" (one or more), and where
 * an opset changed them "1, 11: 1-3" (from opset 11 on). */
bool dpc_onnx_op_arity(int i, const char **ins, const char **outs);
/* The opsets of the default domain the importer accepts. */
#define DPC_ONNX_MIN_OPSET 6
#define DPC_ONNX_MAX_OPSET 21

/* Whether path names an ONNX model: ".onnx" (any case) at the end. */
bool dpc_onnx_path(const char *path);

/* ------------------------------------------------------------ the reader */

struct Onnx__ModelProto;
struct Onnx__TensorProto;

/* Reads and checks path; *out is freed with dpc_onnx_model_free. The model
 * graph, its nodes, inputs and outputs and the opset of the default domain
 * are checked here; tensors when converted (dpc_onnx_tensor). */
dpc_status dpc_onnx_read(const char *path, struct Onnx__ModelProto **out, dpc_err *e);
/* Parses an image in memory (the fuzz target's entry); `name` prefixes errors. */
dpc_status dpc_onnx_parse(const void *buf, size_t len, const char *name, struct Onnx__ModelProto **out,
                          dpc_err *e);
void dpc_onnx_model_free(struct Onnx__ModelProto *m);
/* The default domain's opset of m (checked by the reader). */
int64_t dpc_onnx_opset(const struct Onnx__ModelProto *m);

/* The files m reads (dpc_onnx_result.files): path, then dir joined with
 * every external-data location named anywhere in its graphs, sorted, once
 * each (read or not: a location the import skipped is still the user's
 * data). *files is freed with dpc_onnx_files_free. */
dpc_status dpc_onnx_model_files(const struct Onnx__ModelProto *m, const char *path, const char *dir, char ***files,
                                size_t *n, dpc_err *e);
void dpc_onnx_files_free(char **files, size_t n);

/* A TensorProto as a dpc tensor: float types (FLOAT, DOUBLE, FLOAT16,
 * BFLOAT16) become F32, integer types and BOOL become I64 (*was_bool says
 * which was BOOL). Data come from raw_data, the typed field, or external
 * data in a file under dir (relative, no '..', no links out of dir). dims,
 * counts and byte sizes are all checked. out NULL: only checked (every
 * element too), nothing made (the importer converts integer initializers
 * when a node reads them). */
dpc_status dpc_onnx_tensor(const struct Onnx__TensorProto *t, const char *dir, const char *what, dpc_tensor **out,
                           bool *was_bool, dpc_err *e);

#endif
