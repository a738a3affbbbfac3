/* fold_bn.h - the graph pass that folds an eval-mode batch norm into the
 * convolution or linear layer before it (fold_bn.c). */
#ifndef DPC_FOLD_BN_H
#define DPC_FOLD_BN_H

#include "ir.h"

/* A copy of g in which every conv2d (conv1d: conv2d between reshapes) or
 * rank-2 linear whose only use is a batch norm over its channels (through
 * reshapes that keep dims 0 and 1), with the weights, bias and the batch
 * norm's statistics and affine all parameters, is replaced by one conv2d /
 * linear over folded operands computed by ordinary ops on those
 * parameters:
 *     s  = gamma * rsqrt(var + eps)          (gamma = 1 without affine)
 *     w' = w * s (per output channel)
 *     b' = (b - mean) * s + beta             (b = 0 without bias, beta = 0
 *                                             without affine)
 * Those ops read parameters only, so fusion puts them in the prepare
 * kernels, which run once per load (fuse.c). g itself is never changed
 * (`dpc ir` prints the model as written); g is returned when nothing
 * folds. *nfolded (may be NULL) gets the number of batch norms folded. */
ir_graph *fold_bn(dpc_arena *a, ir_graph *g, int *nfolded);

#endif
