/* builtin_kernels.h — operations the core runs as alloy kernels on devices
 * whose memory the host cannot touch (CUDA): the same body serves every
 * backend, so there is no per-backend copy code. */
#ifndef ALLOY_CORE_BUILTIN_KERNELS_H
#define ALLOY_CORE_BUILTIN_KERNELS_H

#include "array_internal.h"

/* dst (row-contiguous, same shape and dtype, same device) = src (any view). */
alloy_status alloy_builtin_gather(const alloy_array *src, alloy_array *dst);

#endif
