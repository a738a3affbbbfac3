/* import.h - `dpc import` and .onnx models for every verb (cli/import.c). */
#ifndef DPC_CLI_IMPORT_H
#define DPC_CLI_IMPORT_H

/* dpc import ARGS (argv after the verb). */
int cli_import(int argc, char **argv);
/* When *model is an .onnx file: imports it, stages the .dp and its weights
 * in a temporary directory (removed at exit), points *model at the .dp and,
 * when *weights is NULL, *weights at the imported weights. 0, or the exit
 * status after printing the error. */
int cli_onnx_stage(const char **model, const char **weights);
/* The .onnx path a staged model came from, or NULL. */
const char *cli_onnx_original(void);

#endif
