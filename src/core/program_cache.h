/* program_cache.h — the in-memory cache of compiled programs of one device.
 *
 * Keyed by the SHA-256 of everything that determines the binary (full
 * generated source, backend, compiler identity, options, alloy version).
 * Concurrent first requests for one key compile once: the first caller
 * compiles outside the cache lock while the others wait for its result;
 * requests for other keys proceed in parallel. Programs are never freed
 * (code may still run at exit; MLX and CuPy make the same choice). */
#ifndef ALLOY_CORE_PROGRAM_CACHE_H
#define ALLOY_CORE_PROGRAM_CACHE_H

#include "backend.h"

typedef struct alloy_program_cache alloy_program_cache;

alloy_program_cache *alloy_program_cache_new(void);

/* Returns the program for job->key, compiling it through the device's
 * backend when needed. *origin: 1 memory, 2 disk, 0 compiled by this call.
 * *log (may be NULL) receives a malloc'd copy of the compiler output. On a
 * compile error the thread's message holds the mapped compiler log. */
alloy_status alloy_program_cache_get(alloy_device *dev, const alloy_compile_job *job,
                                     void **program, int *origin, char **log);

/* How many times this device's backend was asked to compile (or load from
 * disk) since start-up: lets tests prove that concurrent first launches of
 * one kernel compile once. */
long alloy_program_cache_builds(alloy_device *dev);

#endif
