/* functions.h - what the files of the forward functions share: a call
 * bound to a function's parameters (fcall), the row of the table
 * (fndef), and the lowerings and helpers one file calls in another.
 *
 *   functions.c      the table FUNCTIONS, binding a call, the dispatch
 *   fn_layers.c      matmul, reductions, norms, pooling, interpolate,
 *                    scaled_dot_product_attention
 *   fn_activation.c  elementwise functions and activations
 *   fn_shape.c       shapes and views
 *   fn_create.c      created tensors: constants, ranges, tril/triu
 *   fn_dtype.c       dtypes, masks, comparisons, conversions
 *   fn_args.c        reading bound arguments
 *
 * Calls go down that list, never up. */
#ifndef DPC_FUNCTIONS_H
#define DPC_FUNCTIONS_H

#include "irbuild.h"

/* A call of a forward function: its arguments bound to the function's
 * parameters (s[i] given when g[i], written at sat[i]). */
typedef struct fcall {
    builder *b;
    const char *fn;
    const fargs *a;
    loc at;
    sv s[8];
    bool g[8];
    loc sat[8];
} fcall;

/* The lowering of one function: the value, or NULL after a diagnostic. */
typedef ir_node *(*fn_lower)(fcall *c);
/* A function whose value is not one tensor (size(), split()): false after
 * a diagnostic. */
typedef bool (*fn_call)(fcall *c, sv *out);

/* One row per forward function that is not a one-to-one elementwise op
 * (those are rows of IR_OPS with a function name: see fn_unary). params
 * NULL: the lowering binds its arguments itself (variadic). */
typedef struct fndef {
    const char *name;
    const char *const *params;
    int np, nrequired;
    fn_lower lower;
    fn_call call; /* instead of lower */
} fndef;

/* -------------------------------- fn_args.c: reading bound arguments */

/* An int or a list of ints (dims, sizes): n of them into out. */
bool dims_list(builder *b, const sv *v, loc at, const char *what, int64_t *out, int *n);
/* Argument i as a tensor (want_any_tensor: any dtype), else a diagnostic. */
bool tensor_arg(fcall *c, int i, ir_node **x);
ir_node *want_any_tensor(fcall *c, int i);
/* Argument i as a number known when compiling; `inplace` (ignored in eval). */
bool num_arg(fcall *c, int i, const char *what, double *out);
bool inplace_arg(fcall *c, int i);
/* A dtype argument: SV_DTYPE, or a tensor's dtype when `tensor_ok`. */
bool want_dtype(builder *b, const sv *v, loc at, const char *what, bool tensor_ok, ir_dtype *out);

/* ---------------------------- fn_dtype.c: dtypes, masks, conversions */

/* "float32", "int64", "bool"; an operand's dtype (a Python number's own kind). */
const char *dt_word(ir_dtype t);
ir_dtype sv_dtype(const sv *v);
/* An elementwise node of op over x, y, z (NULL: absent), broadcast, of
 * dtype dt; x converted to dtype t (no node when it already has it). */
ir_node *ew3(builder *b, ir_op op, ir_node *x, ir_node *y, ir_node *z, ir_dtype dt, loc at, const char *what);
ir_node *convert(builder *b, ir_node *x, ir_dtype t, loc at, const char *what);
ir_node *fn_to(fcall *c);
ir_node *fn_cast(fcall *c);
ir_node *fn_type_as(fcall *c);
ir_node *fn_logical(fcall *c);
ir_node *fn_where(fcall *c);
ir_node *fn_masked_fill(fcall *c);

/* -------------------------------------- fn_create.c: created tensors */

/* A rank-0 or shaped constant of dtype dt; tril/triu of x's last two dims. */
ir_node *full_node(builder *b, const shape *s, double v, ir_dtype dt, loc at);
ir_node *fn_ones_zeros(fcall *c);
ir_node *fn_full(fcall *c);
ir_node *fn_like(fcall *c);
ir_node *fn_arange(fcall *c);
ir_node *tri(builder *b, ir_node *x, int64_t k, bool lower, loc at, const char *what);
ir_node *fn_tri(fcall *c);

/* -------------------------------------- fn_shape.c: shapes and views */

ir_node *fn_flatten(fcall *c);
ir_node *fn_reshape_call(fcall *c);
ir_node *fn_transpose(fcall *c);
ir_node *fn_permute(fcall *c);
ir_node *fn_cat(fcall *c);
bool fn_size(fcall *c, sv *out);
bool fn_dim(fcall *c, sv *out);
ir_node *fn_unsqueeze(fcall *c);
ir_node *fn_squeeze(fcall *c);
ir_node *fn_expand(fcall *c);
ir_node *fn_expand_as(fcall *c);
ir_node *fn_contiguous(fcall *c);
bool fn_split(fcall *c, sv *out);
bool fn_chunk(fcall *c, sv *out);
ir_node *fn_t(fcall *c);

/* ---------------------------- fn_activation.c: elementwise functions */

/* The op table's one-to-one functions, bound as f(input). */
ir_node *fn_unary(fcall *c);
ir_node *fn_gelu(fcall *c);
ir_node *fn_softmax_dtype(fcall *c);
ir_node *fn_dropout(fcall *c);
ir_node *fn_act8(fcall *c);
ir_node *fn_leaky_relu(fcall *c);
ir_node *fn_hardtanh(fcall *c);
ir_node *fn_pow(fcall *c);
ir_node *fn_clamp(fcall *c);

/* ----------------------------------------------- fn_layers.c: layers */

ir_node *fn_matmul(fcall *c);
ir_node *fn_reduce(fcall *c);
ir_node *fn_layer_norm(fcall *c);
ir_node *fn_group_norm(fcall *c);
ir_node *fn_adaptive_avg_pool2d(fcall *c);
ir_node *fn_interpolate(fcall *c);
ir_node *fn_sdpa(fcall *c);

#endif
