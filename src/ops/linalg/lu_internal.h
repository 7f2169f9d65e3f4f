/* lu_internal.h — what lu.c shares with det.c and the tests: argument
 * checks of square batches and given outputs, and the launches of the LU
 * kernels with an explicit choice of kernel (the tests run each GPU kernel
 * file on the CPU this way; the public functions choose per device). */
#ifndef ALLOY_OPS_LU_INTERNAL_H
#define ALLOY_OPS_LU_INTERNAL_H

#include "alloy/alloy.h"
#include "alloy/linalg.h"

/* Which factorization / solve kernel runs. */
typedef enum alloy_lu_path {
    ALLOY_LU_AUTO = 0,      /* chosen per device and n (lu.c) */
    ALLOY_LU_SERIAL = 1,    /* one thread per matrix (the CPU's) */
    ALLOY_LU_WARP = 2,      /* factor only: one SIMD group segment per matrix, n <= 32 */
    ALLOY_LU_TG_SMEM = 3,   /* one threadgroup per matrix, the matrix in threadgroup memory */
    ALLOY_LU_TG_DEVICE = 4, /* one threadgroup per matrix, working in device memory */
    ALLOY_LU_BLOCKED_SMEM = 5,   /* factor only: blocked, the matrix in threadgroup memory */
    ALLOY_LU_BLOCKED_DEVICE = 6, /* factor only: blocked, in device memory, panels staged */
    ALLOY_LU_FUSED = 7 /* alloy_solve only: factor and solve in one kernel (lu_solve_warp), n <= 32 and
                          1 <= nrhs <= ALLOY_LU_FUSED_MAX_RHS; other sizes take the GPU's two kernels
                          (factor and solve as ALLOY_LU_WARP) */
} alloy_lu_path;

/* The most right-hand sides lu_solve_warp keeps in registers. */
#define ALLOY_LU_FUSED_MAX_RHS 32

/* A validated (..., n, n) float32/float64 operand. */
typedef struct alloy_lu_square {
    int nd;                        /* a's rank (>= 2) */
    int64_t shape[ALLOY_MAX_NDIM]; /* a's shape */
    int64_t n, batch;              /* matrix order, number of matrices */
    alloy_dtype dt;
    alloy_device *dev;
} alloy_lu_square;

/* Checks that `a` (called `name` in messages of `fn`) is a batch of square
 * float32/float64 matrices, on the stream's device when a stream is given. */
alloy_status alloy_lu_check_square(const char *fn, const char *name, alloy_array *a, alloy_stream *stream,
                                   alloy_lu_square *s);

/* The output `*slot` (called `name`): a given array must live on dev, have
 * dtype dt and this shape, and be row-contiguous; NULL makes a new one.
 * `*res` receives the array to write; `*created` says whether it is new. */
alloy_status alloy_lu_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                  alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res,
                                  int *created);

/* Launches the factorization of s's batch: a -> lu (may be a), ipiv,
 * info. */
alloy_status alloy_lu_run_factor(const alloy_lu_square *s, alloy_lu_path path, alloy_array *a,
                                 alloy_array *lu, alloy_array *ipiv, alloy_array *info,
                                 alloy_stream *stream);

/* Launches the solve of s's batch with nrhs right-hand sides per matrix
 * (b may be x; with ident, b is not read and x = A^-1). */
alloy_status alloy_lu_run_solve(const alloy_lu_square *s, alloy_lu_path path, int64_t nrhs,
                                alloy_array *lu, alloy_array *ipiv, alloy_array *b, alloy_array *x,
                                int transpose, int ident, alloy_stream *stream);

/* Scratch for a factorization of s's batch (lu, ipiv, info), and its
 * release. */
alloy_status alloy_lu_scratch(const alloy_lu_square *s, alloy_array **lu, alloy_array **ipiv,
                              alloy_array **info);

/* alloy_lu_factor / alloy_inv / alloy_lu_solve with the kernels chosen by the caller
 * (ALLOY_LU_AUTO: as the public functions; ALLOY_LU_FUSED acts as ALLOY_LU_WARP). */
alloy_status alloy_lu_factor_path(alloy_array *a, alloy_lu_path path, alloy_stream *stream,
                                  alloy_array **lu, alloy_array **pivots, alloy_array **info);
alloy_status alloy_inv_path(alloy_array *a, alloy_lu_path path, alloy_stream *stream, alloy_array **inverse,
                            alloy_array **info);
alloy_status alloy_lu_solve_path(alloy_array *lu, alloy_array *pivots, alloy_array *b, int transpose,
                                 alloy_lu_path path, alloy_stream *stream, alloy_array **x);
/* alloy_solve with the kernels chosen by the caller: ALLOY_LU_FUSED, or a
 * path for both the factor and the solve (ALLOY_LU_AUTO: as alloy_solve). */
alloy_status alloy_solve_path(alloy_array *a, alloy_array *b, alloy_lu_path path, alloy_stream *stream,
                              alloy_array **x, alloy_array **info);

#endif
