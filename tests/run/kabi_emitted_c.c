/* kabi_emitted_c.c - the C dialect's ABI exactly as emit_c.c prints it into
 * the generated source (kabi_c.inc, made by cmake/kabi_text.cmake from the
 * region of compiler/kabi.h that DPC_KABI_C_TEXT holds), after the same
 * includes, as its own translation unit. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kabi_c.inc"

#include "kabi_layout.h"

#define A(f, off) KABI_ASSERT(dpc_kctx, f, off)
KABI_CPU_KCTX(A)
#undef A
_Static_assert(sizeof(dpc_kctx) == KABI_CPU_KCTX_SIZE, "sizeof dpc_kctx");

void kabi_emitted_cpu_kctx(kabi_layout *out) {
    out->n = 0;
#define P(f, off) KABI_PUT(dpc_kctx, f, off)
    KABI_CPU_KCTX(P)
#undef P
    out->v[out->n++] = sizeof(dpc_kctx);
}
