/* svd_internal.h — alloy_svd with the kernel chosen by the caller, so the
 * tests run every kernel file through the op on any device. */
#ifndef ALLOY_OPS_LINALG_SVD_INTERNAL_H
#define ALLOY_OPS_LINALG_SVD_INTERNAL_H

#include "alloy/alloy.h"
#include "alloy/linalg.h"

typedef enum alloy_svd_path {
    ALLOY_SVD_AUTO = 0,     /* what alloy_svd picks for the device */
    ALLOY_SVD_CPU = 1,      /* svd_cpu.metal: one thread per matrix, cyclic one-sided Jacobi */
    ALLOY_SVD_TG_SMEM = 2,  /* svd_tg.metal, the columns and V in threadgroup memory */
    ALLOY_SVD_TG_DEVICE = 3,/* svd_tg.metal, the columns and V in device scratch */
    ALLOY_SVD_TG_REG = 4,   /* svd_tg.metal, one SIMD group, the sweeps in registers (m, n <= 32) */
    ALLOY_SVD_TG_COLS = 5   /* svd_tg.metal, one or two threads per column of G and row of V, in
                               registers (max(m, n) <= 128) */
} alloy_svd_path;

alloy_status alloy_svd_with_path(alloy_array *a, const alloy_svd_options *options, alloy_svd_path path,
                                 alloy_stream *stream, alloy_array **u, alloy_array **s, alloy_array **vh,
                                 alloy_array **info);

/* Whether the COLS path's threadgroup memory for m x n matrices of dtype dt
 * fits one threadgroup of dev (on an H100 float64 with more than 64 columns
 * does not); the tests force that path only where it does. */
int alloy_svd_cols_smem_fits(alloy_device *dev, int64_t m, int64_t n, alloy_dtype dt);

#endif
