/* faults.c - per-thread countdown counters for fault injection. */
#include "faults.h"

static _Thread_local long alloc_left, io_left, kernel_left;

void dpc_fault_arm_alloc(long nth) { alloc_left = nth; }
void dpc_fault_arm_io(long nth) { io_left = nth; }
void dpc_fault_arm_kernel(long nth) { kernel_left = nth; }

static bool tick(long *left) {
    if (*left <= 0)
        return false;
    return --*left == 0;
}
bool dpc_fault_alloc_should_fail(void) { return tick(&alloc_left); }
bool dpc_fault_io_should_fail(void) { return tick(&io_left); }
bool dpc_fault_kernel_should_fail(void) { return tick(&kernel_left); }
