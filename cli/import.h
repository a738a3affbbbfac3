/* import.h - `dpc import` and .onnx models for every verb (cli/import.c). */
#ifndef DPC_CLI_IMPORT_H
#define DPC_CLI_IMPORT_H

#include "artifact.h"
#include "safetensors.h"

#include <stdbool.h>
#include <stddef.h>

/* dpc import ARGS (argv after the verb). */
int cli_import(int argc, char **argv);
/* When *model is an .onnx file: imports it in memory and points *model at
 * the name its .dp text goes by (MODEL.dp beside it, never read from disk:
 * cli_onnx_source serves it). 0, or the exit status after printing the
 * error. */
int cli_onnx_stage(const char **model);
/* The imported .dp's text when path is its name (what cli_onnx_stage set). */
bool cli_onnx_source(const char *path, const char **text, size_t *len);
/* The imported weights (its initializers), for the caller to free; NULL
 * when no .onnx was imported or they were taken already. */
dpc_safetensors *cli_onnx_take_weights(void);
/* For dpc_artifact_build of path: the imported .dp's text in ao and, when
 * weights is true, the imported weights (returned, for the caller to free
 * after the build; NULL otherwise). */
dpc_safetensors *cli_onnx_artifact(const char *path, bool weights, dpc_artifact_opts *ao);
/* The .onnx path a model was imported from, or NULL. */
const char *cli_onnx_original(void);
/* The files the imported model reads: [0] the .onnx, then its external
 * data (dpc_onnx_result.files); 0 when none was imported. */
size_t cli_onnx_files(const char *const **files);

#endif
