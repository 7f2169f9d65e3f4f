/* eigh_internal.h — alloy_eigh with the kernel chosen by the caller, so the
 * tests run every kernel file through the op on any device. */
#ifndef ALLOY_OPS_LINALG_EIGH_INTERNAL_H
#define ALLOY_OPS_LINALG_EIGH_INTERNAL_H

#include "alloy/alloy.h"
#include "alloy/linalg.h"

typedef enum alloy_eigh_path {
    ALLOY_EIGH_AUTO = 0,     /* what alloy_eigh picks for the device */
    ALLOY_EIGH_CPU = 1,      /* eigh_cpu.metal: one thread per matrix, cyclic Jacobi */
    ALLOY_EIGH_TG_SMEM = 2,  /* eigh_tg.metal, the matrix and vectors in threadgroup memory */
    ALLOY_EIGH_TG_DEVICE = 3,/* eigh_tg.metal, the matrix and vectors in device scratch */
    ALLOY_EIGH_REG = 4,      /* svd_tg.metal's EIGH mode: n <= 32, one SIMD group, the sweeps in registers */
    ALLOY_EIGH_TRIDIAG_SMEM = 5,  /* eigh_tridiag.metal (Householder + QL), the matrix in threadgroup memory */
    ALLOY_EIGH_TRIDIAG_DEVICE = 6,/* eigh_tridiag.metal, the matrix in device scratch */
    ALLOY_EIGH_COLS = 7,     /* svd_tg.metal's EIGH mode on the COLS sweeps, n <= 32: one SIMD group per
                                matrix, a thread per column of G and row of V, columns by shuffles */
    ALLOY_EIGH_COLS_H2 = 8,  /* the same with two threads per column (64 per matrix), columns through
                                threadgroup memory */
    ALLOY_EIGH_COLS_NOV = 9  /* ALLOY_EIGH_COLS without V in the sweeps: V from G's orthonormalised
                                columns (B shifted by a margin of 1) */
} alloy_eigh_path;

alloy_status alloy_eigh_with_path(alloy_array *a, const alloy_eigh_options *options, alloy_eigh_path path,
                                  alloy_stream *stream, alloy_array **w, alloy_array **v, alloy_array **info);

/* Whether eigh_tridiag's threadgroup-memory variant (ALLOY_EIGH_TRIDIAG_SMEM)
 * fits one threadgroup of dev for n x n matrices of dtype dt (the tests
 * force that variant only where it does). */
int alloy_eigh_tridiag_smem_fits(alloy_device *dev, int64_t n, alloy_dtype dt);

#endif
