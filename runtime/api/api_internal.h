/* api_internal.h - what api.c offers the rest of libdpc (the batcher) beyond
 * dpc.h: fault injection into a program's runs and the thread's last error. */
#ifndef DPC_API_INTERNAL_H
#define DPC_API_INTERNAL_H

#include "dpc.h"

/* Kernel `kernel` of replica `replica` fails in the runs from now on (as
 * DPC_FAULT_REPLICA/DPC_FAULT_KERNEL do for `dpc run`); -1, -1: none. */
void dpc_program_set_fault(dpc_program *p, int replica, int kernel);

/* Sets the message dpc_last_error() returns on this thread. */
void dpc_set_last_error(const char *msg);

#endif
