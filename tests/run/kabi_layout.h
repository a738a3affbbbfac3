/* kabi_layout.h - the layout of the kernel ABI (compiler/kabi.h) on an LP64
 * host, field by field, for test_kabi.c: each side (the runtime's view and
 * the text the emitters print, each its own translation unit) checks it
 * with static asserts and reports its offsetof/sizeof for the run-time
 * comparison. X(field, offset); the struct's size last. */
#ifndef DPC_TEST_KABI_LAYOUT_H
#define DPC_TEST_KABI_LAYOUT_H

#include <stddef.h>

#define KABI_CPU_KCTX(X) X(buf, 0) X(N, 8) X(scalars, 16) X(sgemm, 24) X(conv, 32) X(fail_at, 40) X(bad_index, 48) X(bad_limit, 56) X(threads, 64) X(kept, 72) X(linear, 80)
#define KABI_CPU_KCTX_SIZE 88
#define KABI_CU_KERR(X) X(kernel, 0) X(pad, 4) X(index, 8) X(limit, 16)
#define KABI_CU_KERR_SIZE 24
#define KABI_CU_KCTX(X) X(scalars, 0) X(err, 8) X(N, 16) X(g, 24)
#define KABI_CU_KCTX_SIZE 32

/* One side's layout: every field's offset in list order, then sizeof. */
#define KABI_MAX 16
typedef struct kabi_layout {
    int n;
    size_t v[KABI_MAX];
} kabi_layout;

/* The emitted text compiled as its own translation unit (kabi_emitted_c.c,
 * kabi_emitted_cuda.c). */
void kabi_emitted_cpu_kctx(kabi_layout *out);
void kabi_emitted_cu_kerr(kabi_layout *out);
void kabi_emitted_cu_kctx(kabi_layout *out);

#define KABI_ASSERT(T, f, off) _Static_assert(offsetof(T, f) == (off), #T "." #f " is not at " #off);
#define KABI_PUT(T, f, off) out->v[out->n++] = offsetof(T, f);

#endif
