/* matrix_operand.c — the shared check of a general matrix operand (see
 * matrix_operand.h). */
#include "matrix_operand.h"

#include "core/error.h"

alloy_status alloy_linalg_check_matrix(const char *fn, const alloy_array *a, alloy_stream *stream) {
    const int nd = alloy_array_ndim(a);
    if (nd < 2)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: a is %d-D; it must be a matrix or a batch of them (..., m, n)",
                           fn, nd);
    const alloy_dtype dt = alloy_array_dtype(a);
    if (dt != ALLOY_FLOAT32 && dt != ALLOY_FLOAT64)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: a is %s; it must be float32 or float64", fn,
                           alloy_dtype_name(dt));
    alloy_device *dev = alloy_array_device(a);
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but a lives on %s", fn,
                           alloy_device_name(alloy_stream_device(stream)), alloy_device_name(dev));
    return ALLOY_OK;
}
