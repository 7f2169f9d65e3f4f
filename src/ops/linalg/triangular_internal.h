/* triangular_internal.h — the batched triangular-solve launcher that
 * alloy_solve_triangular (triangular.c) and alloy_cholesky_solve
 * (cholesky.c) share: validation of the operands, broadcasting, the result
 * array, and one or two solves in a row on the catalog's trsm kernel. */
#ifndef ALLOY_OPS_LINALG_TRIANGULAR_INTERNAL_H
#define ALLOY_OPS_LINALG_TRIANGULAR_INTERNAL_H

#include "alloy/alloy.h"

/* One solve with a (or its transpose): a's stored triangle, whether the
 * transpose is used, whether its diagonal is taken as ones. */
typedef struct alloy_tri_step {
    int lower, transpose, unit;
} alloy_tri_step;

/* Solves op_k(a) ... op_1(a) X = b (nsteps 1 or 2, applied in order), or
 * for `right` X op(a) = b (nsteps 1). `fn` names the public function and
 * `aname` the matrix argument in error messages. */
alloy_status alloy_tri_solve(const char *fn, const char *aname, alloy_array *a, alloy_array *b, int right,
                             int nsteps, const alloy_tri_step *steps, alloy_stream *stream, alloy_array **out);

#endif
