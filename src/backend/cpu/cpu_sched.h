/* cpu_sched.h — the per-threadgroup fiber scheduler of the CPU backend.
 *
 * A kernel whose body synchronises runs each thread of a threadgroup as a
 * fiber on one OS thread; the scheduler resumes them round-robin and
 * implements the alloy_cpu_services the kernel calls (threadgroup barrier,
 * SIMD rendezvous). It takes a plain C function pointer per thread, so tests
 * drive it with hand-written "kernels" and no JIT.
 *
 * Semantics: thread (lx,ly,lz) has the linear index L = lx + ly*tg.x +
 * lz*tg.x*tg.y with the dispatch threadgroup size (launch->tg); its simdgroup
 * is L / 32 and its lane L % 32. Only threads inside the grid exist. A thread
 * that returns from the body leaves: it no longer counts for barriers or
 * SIMD rendezvous. When every live thread waits and none can be released
 * (barrier divergence) the group is abandoned and the run reports
 * ALLOY_ERROR_LAUNCH with a message naming the kernel, the threadgroup and
 * which threads wait where — it never hangs. */
#ifndef ALLOY_CPU_SCHED_H
#define ALLOY_CPU_SCHED_H

#include <stddef.h>
#include "alloy/status.h"
#include "cpu_abi.h"

#define ALLOY_CPU_MAX_FIBERS 1024u

typedef void (*alloy_cpu_thread_fn)(const alloy_cpu_group *g, unsigned lx, unsigned ly,
                                    unsigned lz);

/* The services a kernel calls; launches in fiber mode point launch->svc here. */
extern const alloy_cpu_services alloy_cpu_sched_services;

/* The calling OS thread's scheduler: created on first use (its fiber stacks
 * are kept and reused for every later group), freed when the thread exits.
 * NULL when out of memory. */
alloy_cpu_sched *alloy_cpu_sched_for_thread(void);

/* Runs every thread of group *g (launch, group_id and size filled in by the
 * caller; g->sched is set here) to completion on the calling OS thread, each
 * as fn(g, lx, ly, lz) on its own fiber. Returns ALLOY_OK, or an error with a
 * message in msg (no thread-local error is set: this may run on a pool
 * worker): ALLOY_ERROR_LAUNCH for divergence, ALLOY_ERROR_OUT_OF_MEMORY when
 * stacks cannot be mapped, ALLOY_ERROR_INVALID_ARGUMENT for a group of more
 * than ALLOY_CPU_MAX_FIBERS threads. */
alloy_status alloy_cpu_sched_run(alloy_cpu_sched *s, alloy_cpu_group *g, alloy_cpu_thread_fn fn,
                                 const char *kernel_name, char *msg, size_t msg_len);

#endif
