/* array.c — arrays: creation, views of borrowed memory, reference counts,
 * host copies, fills. Host-side loops are used when the device's memory is
 * host memory; other devices copy through the backend. */
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"
#include "builtin_kernels.h"
#include "error.h"
#include "halfconv.h"

static alloy_status check_shape(int ndim, const int64_t *shape, int64_t *size) {
    if (ndim < 0 || ndim > ALLOY_MAX_NDIM)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "ndim %d is out of range [0, %d]", ndim,
                           ALLOY_MAX_NDIM);
    if (ndim > 0 && !shape) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "shape is NULL");
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "shape[%d] = %lld is negative", i,
                               (long long)shape[i]);
        if (shape[i] && n > INT64_MAX / 16 / shape[i])
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "shape is too large");
        n *= shape[i];
    }
    *size = n;
    return ALLOY_OK;
}

static void row_major_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

static alloy_array *array_alloc(alloy_device *dev, alloy_dtype dtype, int ndim, const int64_t *shape) {
    alloy_array *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->refcount = 1;
    a->device = dev;
    a->dtype = dtype;
    a->ndim = ndim;
    if (ndim) memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
    row_major_strides(ndim, shape, a->strides);
    return a;
}

static alloy_status check_common(alloy_device *dev, alloy_dtype dtype, alloy_array **out) {
    if (!dev) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "device is NULL");
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "out is NULL");
    if ((unsigned)dtype >= ALLOY_DTYPE_COUNT)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
    return ALLOY_OK;
}

alloy_status alloy_array_new(alloy_device *dev, alloy_dtype dtype, int ndim, const int64_t *shape,
                             alloy_array **out) {
    int64_t n;
    alloy_status st = check_common(dev, dtype, out);
    if (st == ALLOY_OK) st = check_shape(ndim, shape, &n);
    if (st != ALLOY_OK) return st;
    alloy_array *a = array_alloc(dev, dtype, ndim, shape);
    if (!a) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory creating an array");
    size_t bytes = (size_t)n * alloy_dtype_size(dtype);
    st = dev->backend->mem_alloc(dev, bytes ? bytes : 1, &a->base);
    if (st != ALLOY_OK) {
        free(a);
        return st;
    }
    a->owned = 1;
    *out = a;
    return ALLOY_OK;
}

alloy_status alloy_array_from_host(alloy_device *dev, alloy_dtype dtype, int ndim,
                                   const int64_t *shape, const void *src, alloy_array **out) {
    alloy_array *a;
    alloy_status st = alloy_array_new(dev, dtype, ndim, shape, &a);
    if (st != ALLOY_OK) return st;
    size_t bytes = alloy_array_nbytes(a);
    if (bytes && !src) {
        alloy_array_free(a);
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "source data is NULL");
    }
    st = bytes ? dev->backend->mem_copy(dev, a->base, src, bytes, ALLOY_COPY_HOST_TO_DEVICE,
                                        dev->default_stream)
               : ALLOY_OK;
    if (st != ALLOY_OK) {
        alloy_array_free(a);
        return st;
    }
    *out = a;
    return ALLOY_OK;
}

/* v as a float rounded to odd (an inexact result keeps an odd last bit).
 * Narrowing that float to half or bfloat16 then rounds v correctly: float has
 * more than two extra bits, so no tie is invented by a first rounding (a
 * plain (float)v would turn 1 + 2^-11 + 2^-40 into a half-way case). */
static float to_float_round_odd(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u || (double)f == v || (u & 1u)) return f;
    int toward_minus = (double)f > v, negative = (u >> 31) != 0;
    u = toward_minus != negative ? u - 1 : u + 1; /* the odd neighbour on v's side */
    memcpy(&f, &u, sizeof f);
    return f;
}

void alloy_scalar_to_bytes(alloy_dtype dtype, double v, void *out) {
    switch (dtype) {
    case ALLOY_BOOL: *(uint8_t *)out = v != 0; break;
    case ALLOY_INT8: *(int8_t *)out = (int8_t)v; break;
    case ALLOY_UINT8: *(uint8_t *)out = (uint8_t)v; break;
    case ALLOY_INT16: *(int16_t *)out = (int16_t)v; break;
    case ALLOY_UINT16: *(uint16_t *)out = (uint16_t)v; break;
    case ALLOY_INT32: *(int32_t *)out = (int32_t)v; break;
    case ALLOY_UINT32: *(uint32_t *)out = (uint32_t)v; break;
    case ALLOY_INT64: *(int64_t *)out = (int64_t)v; break;
    case ALLOY_UINT64: *(uint64_t *)out = (uint64_t)v; break;
    case ALLOY_FLOAT16: *(uint16_t *)out = alloy_float_to_half_bits(to_float_round_odd(v)); break;
    case ALLOY_BFLOAT16: *(uint16_t *)out = alloy_float_to_bfloat_bits(to_float_round_odd(v)); break;
    case ALLOY_FLOAT32: *(float *)out = (float)v; break;
    case ALLOY_FLOAT64: *(double *)out = v; break;
    default: break;
    }
}

alloy_status alloy_array_scalar(alloy_device *dev, alloy_dtype dtype, double value, alloy_array **out) {
    alloy_status st = check_common(dev, dtype, out);
    if (st != ALLOY_OK) return st;
    unsigned char bytes[8];
    alloy_scalar_to_bytes(dtype, value, bytes);
    return alloy_array_from_host(dev, dtype, 0, NULL, bytes, out);
}

alloy_status alloy_array_wrap(alloy_device *dev, void *data, alloy_dtype dtype, int ndim,
                              const int64_t *shape, const int64_t *strides, int64_t offset,
                              void (*deleter)(void *), void *user, alloy_array **out) {
    int64_t n;
    alloy_status st = check_common(dev, dtype, out);
    if (st == ALLOY_OK) st = check_shape(ndim, shape, &n);
    if (st != ALLOY_OK) return st;
    if (!data && n > 0) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "data is NULL");
    alloy_array *a = array_alloc(dev, dtype, ndim, shape);
    if (!a) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory creating an array");
    if (strides) memcpy(a->strides, strides, (size_t)ndim * sizeof *strides);
    a->offset = offset;
    a->base = data;
    a->deleter = deleter;
    a->user = user;
    *out = a;
    return ALLOY_OK;
}

alloy_array *alloy_array_retain(alloy_array *a) {
    if (a) __atomic_add_fetch(&a->refcount, 1, __ATOMIC_RELAXED);
    return a;
}

void alloy_array_free(alloy_array *a) {
    if (!a || __atomic_sub_fetch(&a->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (a->owned) a->device->backend->mem_free(a->device, a->base);
    if (a->deleter) a->deleter(a->user);
    free(a);
}

alloy_device *alloy_array_device(const alloy_array *a) { return a->device; }
alloy_dtype alloy_array_dtype(const alloy_array *a) { return a->dtype; }
int alloy_array_ndim(const alloy_array *a) { return a->ndim; }
const int64_t *alloy_array_shape(const alloy_array *a) { return a->shape; }
const int64_t *alloy_array_strides(const alloy_array *a) { return a->strides; }
int64_t alloy_array_offset(const alloy_array *a) { return a->offset; }

int64_t alloy_array_size(const alloy_array *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
    return n;
}

size_t alloy_array_nbytes(const alloy_array *a) {
    return (size_t)alloy_array_size(a) * alloy_dtype_size(a->dtype);
}

int alloy_array_is_row_contiguous(const alloy_array *a) {
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] == 0) return 1; /* empty: no element is ever addressed */
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 0; i--) {
        if (a->shape[i] == 1) continue; /* the stride of a length-1 axis never matters */
        if (a->strides[i] != s) return 0;
        s *= a->shape[i];
    }
    return 1;
}

void *alloy_array_data(const alloy_array *a) {
    return (char *)a->base + a->offset * (int64_t)alloy_dtype_size(a->dtype);
}

void alloy_host_strided_copy(void *dst, const int64_t *dst_strides, const void *src,
                             const int64_t *src_strides, int ndim, const int64_t *shape,
                             size_t itemsize) {
    int64_t idx[ALLOY_MAX_NDIM] = {0};
    int64_t total = 1;
    for (int i = 0; i < ndim; i++) total *= shape[i];
    if (total == 0) return;
    /* The innermost axis is a tight loop; the rest an odometer. */
    int64_t inner = ndim ? shape[ndim - 1] : 1;
    int64_t ds = ndim ? dst_strides[ndim - 1] : 0, ss = ndim ? src_strides[ndim - 1] : 0;
    for (int64_t done = 0; done < total; done += inner) {
        int64_t doff = 0, soff = 0;
        for (int i = 0; i < ndim - 1; i++) {
            doff += idx[i] * dst_strides[i];
            soff += idx[i] * src_strides[i];
        }
        char *d = (char *)dst + doff * (int64_t)itemsize;
        const char *s = (const char *)src + soff * (int64_t)itemsize;
        if (ds == 1 && ss == 1) memcpy(d, s, (size_t)inner * itemsize);
        else
            for (int64_t j = 0; j < inner; j++)
                memcpy(d + j * ds * (int64_t)itemsize, s + j * ss * (int64_t)itemsize, itemsize);
        for (int i = ndim - 2; i >= 0; i--) {
            if (++idx[i] < shape[i]) break;
            idx[i] = 0;
        }
    }
}

static alloy_status need_host(const alloy_array *a, const char *what) {
    if (a->device->backend->host_accessible || alloy_array_is_row_contiguous(a)) return ALLOY_OK;
    return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                       "%s of a non-contiguous array on %s is not supported yet: make it "
                       "contiguous first",
                       what, a->device->name);
}

alloy_status alloy_array_copy_to_host(const alloy_array *a, void *dst, size_t dst_bytes) {
    if (!a || (!dst && dst_bytes)) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "array or dst is NULL");
    size_t n = alloy_array_nbytes(a);
    if (dst_bytes < n)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "destination holds %zu bytes, the array needs %zu", dst_bytes, n);
    if (!n) return ALLOY_OK;
    alloy_device *dev = a->device;
    if (alloy_array_is_row_contiguous(a))
        return dev->backend->mem_copy(dev, dst, alloy_array_data(a), n, ALLOY_COPY_DEVICE_TO_HOST,
                                      dev->default_stream);
    if (!dev->backend->host_accessible) { /* gather on the device, then copy */
        alloy_array *c = NULL;
        alloy_status st = alloy_array_contiguous(a, &c);
        if (st == ALLOY_OK) st = alloy_array_copy_to_host(c, dst, dst_bytes);
        alloy_array_free(c);
        return st;
    }
    int64_t rm[ALLOY_MAX_NDIM];
    row_major_strides(a->ndim, a->shape, rm);
    alloy_host_strided_copy(dst, rm, alloy_array_data(a), a->strides, a->ndim, a->shape,
                            alloy_dtype_size(a->dtype));
    return ALLOY_OK;
}

alloy_status alloy_array_copy_from_host(alloy_array *a, const void *src, size_t src_bytes) {
    if (!a || (!src && src_bytes)) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "array or src is NULL");
    size_t n = alloy_array_nbytes(a);
    if (src_bytes < n)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "source holds %zu bytes, the array needs %zu",
                           src_bytes, n);
    if (!n) return ALLOY_OK;
    alloy_status st = need_host(a, "copy_from_host");
    if (st != ALLOY_OK) return st;
    alloy_device *dev = a->device;
    if (alloy_array_is_row_contiguous(a))
        return dev->backend->mem_copy(dev, alloy_array_data(a), src, n, ALLOY_COPY_HOST_TO_DEVICE,
                                      dev->default_stream);
    int64_t rm[ALLOY_MAX_NDIM];
    row_major_strides(a->ndim, a->shape, rm);
    alloy_host_strided_copy(alloy_array_data(a), a->strides, src, rm, a->ndim, a->shape,
                            alloy_dtype_size(a->dtype));
    return ALLOY_OK;
}

alloy_status alloy_array_fill(alloy_array *a, double value) { return alloy_array_fill_on(a, value, NULL); }

alloy_status alloy_array_fill_on(alloy_array *a, double value, alloy_stream *stream) {
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "array is NULL");
    int64_t n = alloy_array_size(a);
    if (!n) return ALLOY_OK;
    size_t item = alloy_dtype_size(a->dtype);
    unsigned char one[8];
    alloy_scalar_to_bytes(a->dtype, value, one);
    alloy_device *dev = a->device;
    if (alloy_array_is_row_contiguous(a))
        return dev->backend->mem_fill(dev, alloy_array_data(a), (size_t)n, one, item,
                                      stream ? stream : dev->default_stream);
    if (dev->backend->host_accessible) {
        int64_t zero[ALLOY_MAX_NDIM] = {0};
        alloy_host_strided_copy(alloy_array_data(a), a->strides, one, zero, a->ndim, a->shape, item);
        return ALLOY_OK;
    }
    return need_host(a, "fill");
}

alloy_status alloy_array_contiguous(const alloy_array *a, alloy_array **out) {
    if (!a || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "array or out is NULL");
    alloy_array *c;
    alloy_status st = alloy_array_new(a->device, a->dtype, a->ndim, a->shape, &c);
    if (st != ALLOY_OK) return st;
    if (alloy_array_is_row_contiguous(a)) {
        size_t n = alloy_array_nbytes(a);
        st = n ? a->device->backend->mem_copy(a->device, c->base, alloy_array_data(a), n,
                                              ALLOY_COPY_DEVICE_TO_DEVICE, a->device->default_stream)
               : ALLOY_OK;
    } else if (a->device->backend->host_accessible) {
        alloy_host_strided_copy(c->base, c->strides, alloy_array_data(a), a->strides, a->ndim,
                                a->shape, alloy_dtype_size(a->dtype));
    } else {
        st = alloy_builtin_gather(a, c);
    }
    if (st != ALLOY_OK) {
        alloy_array_free(c);
        return st;
    }
    *out = c;
    return ALLOY_OK;
}
