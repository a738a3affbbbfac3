/* memplan.c - liveness-based placement of a forward's buffers in one arena
 * (see memplan.h). */
#include "memplan.h"

#include <limits.h>
#include <stdlib.h>

size_t dpc_memplan_bytes(const kbuf *b, int64_t N, kprec prec) {
    int64_t el = b->sym ? b->elems * N : b->elems;
    size_t bytes = (size_t)el * (size_t)kbuf_esize(b, prec);
    return (bytes + DPC_MEMPLAN_ALIGN - 1) & ~(size_t)(DPC_MEMPLAN_ALIGN - 1);
}

typedef struct placed {
    size_t off, size;
    int first, last;
} placed;

static bool is_placed(const kbuf *b, bool include_io) {
    if (b->kind == BUF_TEMP || b->kind == BUF_SCRATCH)
        return true;
    return include_io && (b->kind == BUF_INPUT || b->kind == BUF_OUTPUT);
}

/* The live range of b in kernel indices; inputs are written before the
 * first kernel and outputs read after the last one. */
static void live_range(const kbuf *b, int *first, int *last) {
    *first = b->first;
    *last = b->last;
    if (b->kind == BUF_INPUT)
        *first = -1;
    if (b->kind == BUF_OUTPUT)
        *last = INT_MAX;
}

dpc_status dpc_memplan(const dpc_unit *u, int64_t N, kprec prec, bool include_io, size_t *offset, size_t *total,
                       dpc_err *e) {
    int nb = dpc_unit_nbufs(u);
    *total = 0;
    int *order = calloc((size_t)nb + 1, sizeof(int));
    placed *pl = calloc((size_t)nb + 1, sizeof(placed));
    if (!order || !pl) {
        free(order);
        free(pl);
        return dpc_errf(e, DPC_ENOMEM, "out of memory planning buffers");
    }
    int n = 0;
    for (int i = 0; i < nb; i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (!is_placed(b, include_io))
            continue;
        if (b->sym && N > 0 && b->elems > (INT64_MAX / 2) / N / (b->esize ? b->esize : 1)) {
            free(order);
            free(pl);
            return dpc_errf(e, DPC_EUSER, "batch %lld is too large: buffer %d would overflow", (long long)N, i);
        }
        order[n++] = i;
    }
    /* insertion sort by size, largest first (stable: ties keep id order) */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && dpc_memplan_bytes(dpc_unit_buf(u, order[j]), N, prec) >
                                     dpc_memplan_bytes(dpc_unit_buf(u, order[j - 1]), N, prec);
             j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    size_t end = 0;
    int np = 0;
    for (int i = 0; i < n; i++) {
        const kbuf *b = dpc_unit_buf(u, order[i]);
        int first, last;
        live_range(b, &first, &last);
        size_t size = dpc_memplan_bytes(b, N, prec), off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int j = 0; j < np; j++) {
                bool live = !(pl[j].last < first || last < pl[j].first);
                bool mem = off < pl[j].off + pl[j].size && pl[j].off < off + size;
                if (live && mem) {
                    off = pl[j].off + pl[j].size;
                    moved = true;
                }
            }
        }
        pl[np++] = (placed){off, size, first, last};
        offset[order[i]] = off;
        if (off + size > end)
            end = off + size;
    }
    free(order);
    free(pl);
    *total = end;
    return DPC_OK;
}
