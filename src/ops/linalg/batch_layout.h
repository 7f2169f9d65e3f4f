/* batch_layout.h — the leading (batch) dimensions of batched matrix
 * operations, reduced to what one kernel launch takes.
 *
 * Several operands (inputs and outputs) share one batch shape; each has its
 * own element stride along each batch dimension (0 where it broadcasts). The
 * innermost dimensions that every operand steps through with one stride
 * collapse into an "inner" batch a kernel indexes as z * stride; the rest are
 * walked on the host, one launch per "outer" index, by moving each operand's
 * origin (offsets in elements). */
#ifndef ALLOY_OPS_LINALG_BATCH_LAYOUT_H
#define ALLOY_OPS_LINALG_BATCH_LAYOUT_H

#include <stdint.h>

#include "alloy/array.h"
#include "alloy/kernel.h"
#include "alloy/status.h"

#define ALLOY_BATCH_MAX_OPS 4

typedef struct alloy_batch_layout {
    int nb;                                  /* batch dimensions */
    int nops;                                /* operands */
    int64_t shape[ALLOY_MAX_NDIM];
    int64_t stride[ALLOY_BATCH_MAX_OPS][ALLOY_MAX_NDIM];
    int first;                               /* dimensions [first, nb) form the inner batch */
    int64_t inner, outer;                    /* matrices per launch, launches */
    int64_t inner_stride[ALLOY_BATCH_MAX_OPS];
} alloy_batch_layout;

/* `shape`: the batch shape (nb dimensions); `strides[k]`: operand k's stride
 * along each of them (0: broadcast). */
void alloy_batch_layout_init(alloy_batch_layout *l, int nb, const int64_t *shape, int nops,
                             const int64_t strides[][ALLOY_MAX_NDIM]);

/* The origin of each operand (elements) for outer index `o` (0 <= o < outer). */
void alloy_batch_layout_offsets(const alloy_batch_layout *l, int64_t o, int64_t *offsets);

/* Kernel k, with a as its one input and 5 outputs (eigh's and svd's), over the
 * whole batch: one threadgroup of nt threads a matrix, in launches of at most
 * 2^30 threads (for each outer index, runs of the inner batch). Before each
 * launch it sets the grid and the constants a_off (operand 0's origin plus the
 * run's first matrix times its inner stride) and z_off (operand 1's origin plus
 * the run's first matrix: a per-matrix output of one element). ln carries the
 * rest of the launch. */
alloy_status alloy_batch_layout_launch_per_matrix(const alloy_batch_layout *l, alloy_kernel *k, alloy_array *a,
                                                  alloy_launch *ln, uint32_t nt, alloy_stream *stream);

/* NumPy broadcasting of the leading dimensions of two operands: `x` has nx
 * leading dimensions xs, `y` ny of ys; the result (max(nx, ny) dimensions)
 * goes to `shape`, and each operand's stride along it (0 where it is
 * broadcast) to sx / sy, from the operands' own strides xst / yst. Returns
 * ALLOY_ERROR_INVALID_ARGUMENT naming `fn`, `xname` and `yname` if they do
 * not broadcast. */
alloy_status alloy_batch_broadcast(const char *fn, const char *xname, int nx, const int64_t *xs,
                                   const int64_t *xst, const char *yname, int ny, const int64_t *ys,
                                   const int64_t *yst, int *nb, int64_t *shape, int64_t *sx, int64_t *sy);

/* Strides of a row-contiguous array of the batch shape followed by `inner`
 * elements per matrix (0 along dimensions of extent 1). */
void alloy_batch_contiguous_strides(int nb, const int64_t *shape, int64_t inner, int64_t *strides);

#endif
