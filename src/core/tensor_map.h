/* tensor_map.h — the backend-independent check of a launch's tensor map
 * against the input or output it describes (alloy_launch_set_tensor_map). */
#ifndef ALLOY_CORE_TENSOR_MAP_H
#define ALLOY_CORE_TENSOR_MAP_H

#include "backend.h"

/* The array a map describes, as the body will see it. */
typedef struct alloy_tensor_map_target {
    const char *role;        /* "input" or "output" */
    const char *name;        /* its name */
    int index;               /* among the inputs or the outputs */
    alloy_dtype dtype;
    int ndim;
    const void *data;        /* its first element; NULL: not known yet (no alignment check) */
    long long span_lo;       /* the bytes its elements span, from `data` (span_lo <= 0) */
    unsigned long long span_bytes;
} alloy_tensor_map_target;

/* ALLOY_ERROR_INVALID_ARGUMENT naming kernel, map and field when `m` breaks
 * a rule of the copy engine (docs/dialect.md, "Tensor maps") or reaches
 * outside the target's elements. Every backend runs it, so code that runs on
 * the CPU also passes CUDA's encoding. */
alloy_status alloy_tensor_map_check(const char *kernel, const alloy_tensor_map_arg *m,
                                    const alloy_tensor_map_target *t);

#endif
