/* array_internal.h — the array struct, shared by the core's files. */
#ifndef ALLOY_CORE_ARRAY_INTERNAL_H
#define ALLOY_CORE_ARRAY_INTERNAL_H

#include "backend.h"

struct alloy_array {
    int refcount; /* atomic */
    alloy_device *device;
    alloy_dtype dtype;
    int ndim;
    int64_t shape[ALLOY_MAX_NDIM];
    int64_t strides[ALLOY_MAX_NDIM]; /* elements */
    int64_t offset;                  /* elements from base to element [0,...,0] */
    void *base;
    int owned;         /* base came from the backend allocator */
    int read_only;     /* imported read-only (DLPack flag): never an output */
    void (*deleter)(void *user);
    void *user;
};

/* alloy_array_fill on `stream` (NULL: the device's default stream), ordered
 * with the catalog op's launches there. */
alloy_status alloy_array_fill_on(alloy_array *a, double value, alloy_stream *stream);

/* Converts `value` to one element of `dtype` in `out` (up to 8 bytes). */
void alloy_scalar_to_bytes(alloy_dtype dtype, double value, void *out);

/* Copies between two host-memory views of equal shape and dtype, element by
 * element in row-major order of the shape. */
void alloy_host_strided_copy(void *dst, const int64_t *dst_strides, const void *src,
                             const int64_t *src_strides, int ndim, const int64_t *shape,
                             size_t itemsize);

#endif
