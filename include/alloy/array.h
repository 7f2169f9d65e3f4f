/* alloy/array.h — n-dimensional arrays on a device.
 *
 * An array is a view: dtype, up to ALLOY_MAX_NDIM dimensions, shape, strides
 * in ELEMENTS (may be zero or negative for broadcast/reversed views), and an
 * element offset into a buffer. The buffer is either owned by alloy (freed
 * with the last reference) or borrowed (the caller's memory; an optional
 * deleter runs when the last reference goes). Arrays are reference counted:
 * alloy_array_retain adds a reference, alloy_array_free drops one. */
#ifndef ALLOY_ARRAY_H
#define ALLOY_ARRAY_H

#include <stddef.h>
#include <stdint.h>
#include "status.h"
#include "dtype.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALLOY_MAX_NDIM 8

typedef struct alloy_array alloy_array;

/* A new owned, row-contiguous, uninitialised array. ndim may be 0 (a scalar).
 * Dimensions may be 0 (an empty array). */
alloy_status alloy_array_new(alloy_device *device, alloy_dtype dtype, int ndim,
                             const int64_t *shape, alloy_array **out);

/* A new owned row-contiguous array holding a copy of `src`, which must hold
 * prod(shape) * dtype_size bytes in row-major order (host memory). */
alloy_status alloy_array_from_host(alloy_device *device, alloy_dtype dtype, int ndim,
                                   const int64_t *shape, const void *src,
                                   alloy_array **out);

/* A 0-d array holding `value` converted to dtype (how scalars are passed). */
alloy_status alloy_array_scalar(alloy_device *device, alloy_dtype dtype, double value,
                                alloy_array **out);

/* Borrows memory the caller owns: `data` points at element 0 of the buffer,
 * `offset` (elements) is added for element [0,...,0]; strides NULL means
 * row-contiguous. `deleter(user)` (may be NULL) runs when the last reference
 * is dropped. For the CPU device `data` is host memory; for CUDA, device
 * memory of that device. */
alloy_status alloy_array_wrap(alloy_device *device, void *data, alloy_dtype dtype,
                              int ndim, const int64_t *shape, const int64_t *strides,
                              int64_t offset, void (*deleter)(void *user), void *user,
                              alloy_array **out);

alloy_array *alloy_array_retain(alloy_array *array);
void alloy_array_free(alloy_array *array); /* drops one reference; NULL is fine */

alloy_device *alloy_array_device(const alloy_array *array);
alloy_dtype alloy_array_dtype(const alloy_array *array);
int alloy_array_ndim(const alloy_array *array);
const int64_t *alloy_array_shape(const alloy_array *array);   /* ndim entries */
const int64_t *alloy_array_strides(const alloy_array *array); /* ndim entries, elements */
int64_t alloy_array_offset(const alloy_array *array);         /* elements */
int64_t alloy_array_size(const alloy_array *array);           /* number of elements */
size_t alloy_array_nbytes(const alloy_array *array);          /* size * dtype size */
int alloy_array_is_row_contiguous(const alloy_array *array);
/* Address of element [0,...,0] (offset applied). Device memory for CUDA. */
void *alloy_array_data(const alloy_array *array);

/* Host copies. copy_to_host gathers any strided view into row-major order;
 * dst_bytes must be at least alloy_array_nbytes. copy_from_host scatters
 * row-major data into the (possibly strided) view. Both wait for the device. */
alloy_status alloy_array_copy_to_host(const alloy_array *array, void *dst, size_t dst_bytes);
alloy_status alloy_array_copy_from_host(alloy_array *array, const void *src, size_t src_bytes);

/* Sets every element of the view to `value` converted to the dtype. */
alloy_status alloy_array_fill(alloy_array *array, double value);

/* A new owned row-contiguous copy of the view. */
alloy_status alloy_array_contiguous(const alloy_array *array, alloy_array **out);

#ifdef __cplusplus
}
#endif
#endif
