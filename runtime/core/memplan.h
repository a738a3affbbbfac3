/* memplan.h - the activation memory plan shared by the CPU and CUDA
 * backends: one arena per replica and batch size, buffers placed by
 * liveness so that buffers never live at the same time share bytes.
 *
 * Buffers come from the compiled unit (dpc_unit_buf, dpc_compile.h): each has a size (k or k*N
 * elements) and a live range [first, last] in kernel indices. Temporaries
 * and scratch buffers are always placed. With include_io, the forward's
 * inputs (live from before the first kernel to their last reader) and
 * outputs (live from their writer to after the last kernel) are placed in
 * the same arena too; the CUDA backend copies them in and out of it, the
 * CPU backend instead reads and writes the caller's tensors in place. */
#ifndef DPC_MEMPLAN_H
#define DPC_MEMPLAN_H

#include "dpc_compile.h"

/* Each buffer's offset is a multiple of this. */
#define DPC_MEMPLAN_ALIGN 256

/* Bytes of buffer b for batch N with floats stored as prec, rounded up to
 * DPC_MEMPLAN_ALIGN. */
size_t dpc_memplan_bytes(const kbuf *b, int64_t N, kprec prec);

/* Fills offset[i] for every placed buffer i (others are left alone) and
 * *total, the arena size in bytes (0 when nothing is placed). Greedy by
 * size, largest first: each buffer goes to the lowest offset that overlaps
 * no placed buffer whose live range overlaps its own. DPC_ENOMEM when the
 * planner's own tables cannot be allocated, DPC_EUSER when the sizes
 * overflow. */
dpc_status dpc_memplan(const dpc_unit *u, int64_t N, kprec prec, bool include_io, size_t *offset, size_t *total,
                       dpc_err *e);

#endif
