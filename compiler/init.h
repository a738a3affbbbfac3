/* init.h - how `dpc init` fills each parameter: PyTorch's defaults. */
#ifndef DPC_INIT_H
#define DPC_INIT_H

enum {
    INIT_KAIMING = 1, /* kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    INIT_BIAS,        /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)), 0 when fan_in == 0 */
    INIT_ONES,
    INIT_ZEROS,
    INIT_NORMAL,      /* N(0, 1): Embedding */
    INIT_COUNTER,     /* num_batches_tracked: int64 0 */
};

#endif
