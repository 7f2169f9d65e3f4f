/* cpu_pool.h — the CPU backend's thread pool.
 *
 * ALLOY_NUM_THREADS (default: the CPUs this process may run on) threads work
 * on a launch: the calling thread plus ALLOY_NUM_THREADS - 1 pool workers.
 * Several host threads may run jobs at once: jobs wait in a queue, workers
 * take items from the oldest job, and every caller also works through its
 * own job, so each launch progresses even when the pool is busy and no lock
 * is held while items run. */
#ifndef ALLOY_CPU_POOL_H
#define ALLOY_CPU_POOL_H

#include <stddef.h>

/* Runs one item; a non-zero return stops the job (items not yet started are
 * skipped). */
typedef int (*alloy_cpu_task_fn)(void *ctx, size_t index);

/* Threads that work on a job (workers + the caller), at least 1. */
int alloy_cpu_pool_threads(void);

/* Runs fn(ctx, i) for every i in [0, n) on the pool and the calling thread;
 * returns when all of them finished (or were skipped after a stop). With
 * n == 1 or a single-threaded pool everything runs inline on the caller.
 * Items are claimed in chunks of `chunk` (0: chosen from n and the pool). */
void alloy_cpu_pool_run(size_t n, size_t chunk, alloy_cpu_task_fn fn, void *ctx);

/* Jobs handed to the workers so far (runs of alloy_cpu_pool_run that did
 * not stay on the caller alone): what tests read to see which path a
 * launch took. */
size_t alloy_cpu_pool_jobs(void);

#endif
