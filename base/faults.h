/* faults.h - deterministic fault injection, so that tests can make the Nth
 * allocation, write or kernel launch fail (SQLite's approach to testing error
 * paths). Counters are per thread: each replica thread arms its own. */
#ifndef DPC_FAULTS_H
#define DPC_FAULTS_H
#include <stdbool.h>

/* Arms this thread: the nth (1-based) allocation from now on fails; 0 disarms. */
void dpc_fault_arm_alloc(long nth);
void dpc_fault_arm_io(long nth);
void dpc_fault_arm_kernel(long nth);
bool dpc_fault_alloc_should_fail(void);
bool dpc_fault_io_should_fail(void);
bool dpc_fault_kernel_should_fail(void);

#endif
