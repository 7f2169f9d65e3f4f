/* matrix_operand.h — the argument check the general-matrix operations
 * (QR, least squares, orthonormalisation, SVD) share: a matrix or a batch of
 * them, float32 or float64, on the stream's device. */
#ifndef ALLOY_OPS_LINALG_MATRIX_OPERAND_H
#define ALLOY_OPS_LINALG_MATRIX_OPERAND_H

#include "alloy/alloy.h"

/* `a` (..., m, n) float32/float64, and `stream` (may be NULL) on a's device;
 * errors name `fn` and the argument "a". */
alloy_status alloy_linalg_check_matrix(const char *fn, const alloy_array *a, alloy_stream *stream);

#endif
