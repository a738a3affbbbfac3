/* kabi_emitted_cuda.c - the CUDA dialect's ABI exactly as emit_cuda.c
 * prints it into the generated source (kabi_cuda.inc, made by
 * cmake/kabi_text.cmake from the region of compiler/kabi.h that
 * DPC_KABI_CUDA_TEXT holds), as its own translation unit. DPC_KPTR is left
 * to the text, as in device code: a pointer (64 bits, as on the device). */
#include "kabi_cuda.inc"

#include "kabi_layout.h"

#define A(f, off) KABI_ASSERT(dpc_kerr, f, off)
KABI_CU_KERR(A)
#undef A
#define A(f, off) KABI_ASSERT(dpc_kctx, f, off)
KABI_CU_KCTX(A)
#undef A
_Static_assert(sizeof(dpc_kerr) == KABI_CU_KERR_SIZE, "sizeof dpc_kerr");
_Static_assert(sizeof(dpc_kctx) == KABI_CU_KCTX_SIZE, "sizeof dpc_kctx");
_Static_assert(sizeof(void *) == 8, "device pointers are 64 bits");

void kabi_emitted_cu_kerr(kabi_layout *out) {
    out->n = 0;
#define P(f, off) KABI_PUT(dpc_kerr, f, off)
    KABI_CU_KERR(P)
#undef P
    out->v[out->n++] = sizeof(dpc_kerr);
}

void kabi_emitted_cu_kctx(kabi_layout *out) {
    out->n = 0;
#define P(f, off) KABI_PUT(dpc_kctx, f, off)
    KABI_CU_KCTX(P)
#undef P
    out->v[out->n++] = sizeof(dpc_kctx);
}
