/* convert.h — an array's values in another float dtype, on a stream (private
 * to the ops: how an op runs its inputs in the dtype its kernels take). */
#ifndef ALLOY_OPS_ARRAY_CONVERT_H
#define ALLOY_OPS_ARRAY_CONVERT_H

#include "alloy/alloy.h"

/* dst = src rounded to dst's dtype, element by element in row-major order;
 * dst row-contiguous with src's number of elements; src any view. Queued on
 * `stream` (NULL: the device's default stream). */
alloy_status alloy_ops_convert(alloy_array *src, alloy_array *dst, alloy_stream *stream);

/* A new row-contiguous array of src's shape in `dtype`, holding src's values
 * (queued on `stream`); *out is NULL on failure. */
alloy_status alloy_ops_converted(alloy_array *src, alloy_dtype dtype, alloy_stream *stream, alloy_array **out);

#endif
