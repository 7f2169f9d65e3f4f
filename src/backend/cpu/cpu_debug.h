/* cpu_debug.h — the runtime side of ALLOY_CPU_DEBUG=1 (cpu_debug.c): whether
 * kernels are built for it, and what a launch of such a kernel does before
 * and after running (poisoning outputs, collecting faults, finding unwritten
 * elements). */
#ifndef ALLOY_CPU_DEBUG_RUNTIME_H
#define ALLOY_CPU_DEBUG_RUNTIME_H

#include <stdatomic.h>

#include "core/backend.h"
#include "core/error.h"
#include "cpu_abi.h"

typedef struct alloy_cpu_debug_state {
    alloy_cpu_debug iface;       /* what the kernel sees (alloy_cpu_launch.debug) */
    unsigned long long local[64], *nbytes;
    long long local_lo[64], *lo;
    atomic_int faults;
    char first[512];             /* the first fault's message */
} alloy_cpu_debug_state;

/* 1 when ALLOY_CPU_DEBUG is set (read once per process). */
int alloy_cpu_debug_build(void);

/* Before the launch: sizes per slot, outputs to check poisoned. */
alloy_status alloy_cpu_debug_begin(alloy_cpu_debug_state *d, const alloy_launch_args *args);
/* After it: the first fault, else the first output with unwritten elements,
 * as the launch's error (launch_status when that already failed). */
alloy_status alloy_cpu_debug_end(alloy_cpu_debug_state *d, const alloy_launch_args *args,
                                 alloy_status launch_status);

#endif
