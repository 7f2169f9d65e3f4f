/* cholesky_internal.h — alloy_cholesky with the kernel chosen by the
 * caller, so the tests run every kernel file through the op on any device. */
#ifndef ALLOY_OPS_LINALG_CHOLESKY_INTERNAL_H
#define ALLOY_OPS_LINALG_CHOLESKY_INTERNAL_H

#include "alloy/alloy.h"

typedef enum alloy_cholesky_path {
    ALLOY_CHOLESKY_AUTO = 0,        /* what alloy_cholesky picks for the device */
    ALLOY_CHOLESKY_CPU = 1,         /* cholesky_cpu.metal: one thread per matrix */
    ALLOY_CHOLESKY_SMALL = 2,       /* cholesky_small.metal: n <= 32 */
    ALLOY_CHOLESKY_BLOCKED_SMEM = 3,/* cholesky_blocked.metal, matrix in threadgroup memory */
    ALLOY_CHOLESKY_BLOCKED_DEVICE = 4,/* cholesky_blocked.metal, matrix in the output */
    ALLOY_CHOLESKY_REG = 5,         /* cholesky_reg.metal: n <= 128, the matrix in registers */
    ALLOY_CHOLESKY_WARP = 6,        /* cholesky_warp.metal: n <= 64, one SIMD group per matrix */
    ALLOY_CHOLESKY_TILED = 7        /* cholesky_tiled.metal: the lower triangle in threadgroup memory */
} alloy_cholesky_path;

alloy_status alloy_cholesky_with_path(alloy_array *a, const alloy_cholesky_options *options,
                                      alloy_cholesky_path path, alloy_stream *stream, alloy_array **out,
                                      alloy_array **info);

#endif
