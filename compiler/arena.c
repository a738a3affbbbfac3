/* arena.c - bump allocation for everything one compilation creates. */
#include "compiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dpc_arena_block {
    dpc_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *arena_alloc(dpc_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    dpc_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = dpc_malloc(sizeof *b + cap);
        if (!b) {
            if (a->oom_jump)
                longjmp(*a->oom_jump, 1);
            abort(); /* unreachable: every entry point installs oom_jump */
        }
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(dpc_arena *a, const char *s, size_t n) {
    char *d = arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *arena_strdup(dpc_arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(dpc_arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *d = arena_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
    vsnprintf(d, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return d;
}

void arena_free_all(dpc_arena *a) {
    while (a->head) {
        dpc_arena_block *n = a->head->next;
        free(a->head);
        a->head = n;
    }
}

void vec_push(dpc_arena *a, vec *v, void *item) {
    if (v->len == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        void **items = arena_alloc(a, sizeof(void *) * (size_t)cap);
        if (v->len)
            memcpy(items, v->items, sizeof(void *) * (size_t)v->len);
        v->items = items;
        v->cap = cap;
    }
    v->items[v->len++] = item;
}
