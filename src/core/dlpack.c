/* dlpack.c — DLPack import and export (versioned 1.x and legacy).
 *
 * Export: the tensor describes the array's view (data = element [0,...,0],
 * byte_offset 0, as NumPy does for compatibility) and holds a reference to the
 * array until its deleter runs. Import: the array borrows the tensor's memory
 * and calls the tensor's deleter when the last reference goes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/dlpack.h"
#include "array_internal.h"
#include "error.h"

static int to_dl_dtype(alloy_dtype d, DLDataType *out) {
    static const struct { uint8_t code, bits; } MAP[ALLOY_DTYPE_COUNT] = {
        [ALLOY_BOOL] = {kDLBool, 8},     [ALLOY_INT8] = {kDLInt, 8},
        [ALLOY_UINT8] = {kDLUInt, 8},    [ALLOY_INT16] = {kDLInt, 16},
        [ALLOY_UINT16] = {kDLUInt, 16},  [ALLOY_INT32] = {kDLInt, 32},
        [ALLOY_UINT32] = {kDLUInt, 32},  [ALLOY_INT64] = {kDLInt, 64},
        [ALLOY_UINT64] = {kDLUInt, 64},  [ALLOY_FLOAT16] = {kDLFloat, 16},
        [ALLOY_BFLOAT16] = {kDLBfloat, 16}, [ALLOY_FLOAT32] = {kDLFloat, 32},
        [ALLOY_FLOAT64] = {kDLFloat, 64}};
    if ((unsigned)d >= ALLOY_DTYPE_COUNT) return 0;
    out->code = MAP[d].code;
    out->bits = MAP[d].bits;
    out->lanes = 1;
    return 1;
}

static alloy_status from_dl_dtype(DLDataType t, alloy_dtype *out) {
    if (t.lanes != 1)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "DLPack tensors with %u lanes are not supported",
                           (unsigned)t.lanes);
    for (int d = 0; d < ALLOY_DTYPE_COUNT; d++) {
        DLDataType c;
        to_dl_dtype((alloy_dtype)d, &c);
        if (c.code == t.code && c.bits == t.bits) return (*out = (alloy_dtype)d), ALLOY_OK;
    }
    if (t.code == kDLUInt && t.bits == 1) return (*out = ALLOY_BOOL), ALLOY_OK; /* never packed here */
    return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                       "DLPack dtype (code %u, %u bits) has no alloy equivalent", (unsigned)t.code,
                       (unsigned)t.bits);
}

static alloy_status fill_tensor(alloy_array *a, DLTensor *t, int64_t *shape, int64_t *strides) {
    if (!to_dl_dtype(a->dtype, &t->dtype))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "array has an invalid dtype");
    t->data = alloy_array_size(a) ? alloy_array_data(a) : NULL;
    t->byte_offset = 0;
    t->ndim = a->ndim;
    if (a->device->backend->kind == ALLOY_BACKEND_CPU) t->device.device_type = kDLCPU;
    else t->device.device_type = kDLCUDA;
    t->device.device_id = a->device->backend->kind == ALLOY_BACKEND_CPU ? 0 : a->device->ordinal;
    memcpy(shape, a->shape, sizeof a->shape);
    memcpy(strides, a->strides, sizeof a->strides);
    t->shape = shape;
    t->strides = strides;
    return ALLOY_OK;
}

typedef struct export_versioned {
    DLManagedTensorVersioned t;
    int64_t shape[ALLOY_MAX_NDIM], strides[ALLOY_MAX_NDIM];
    alloy_array *array;
} export_versioned;

static void delete_versioned(DLManagedTensorVersioned *t) {
    export_versioned *e = t->manager_ctx;
    alloy_array_free(e->array);
    free(e);
}

alloy_status alloy_array_to_dlpack(alloy_array *a, DLManagedTensorVersioned **out) {
    if (!a || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "array or out is NULL");
    export_versioned *e = calloc(1, sizeof *e);
    if (!e) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory exporting to DLPack");
    alloy_status st = fill_tensor(a, &e->t.dl_tensor, e->shape, e->strides);
    if (st != ALLOY_OK) {
        free(e);
        return st;
    }
    e->t.version.major = DLPACK_MAJOR_VERSION;
    e->t.version.minor = DLPACK_MINOR_VERSION;
    e->t.manager_ctx = e;
    e->t.deleter = delete_versioned;
    e->t.flags = a->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    e->array = alloy_array_retain(a);
    *out = &e->t;
    return ALLOY_OK;
}

typedef struct export_legacy {
    DLManagedTensor t;
    int64_t shape[ALLOY_MAX_NDIM], strides[ALLOY_MAX_NDIM];
    alloy_array *array;
} export_legacy;

static void delete_legacy(DLManagedTensor *t) {
    export_legacy *e = t->manager_ctx;
    alloy_array_free(e->array);
    free(e);
}

alloy_status alloy_array_to_dlpack_legacy(alloy_array *a, DLManagedTensor **out) {
    if (!a || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "array or out is NULL");
    export_legacy *e = calloc(1, sizeof *e);
    if (!e) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory exporting to DLPack");
    alloy_status st = fill_tensor(a, &e->t.dl_tensor, e->shape, e->strides);
    if (st != ALLOY_OK) {
        free(e);
        return st;
    }
    e->t.manager_ctx = e;
    e->t.deleter = delete_legacy;
    e->array = alloy_array_retain(a);
    *out = &e->t;
    return ALLOY_OK;
}

static alloy_status device_of(DLDevice dev, alloy_device **out) {
    char name[32];
    switch (dev.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
        return alloy_device_get("cpu", out);
    case kDLCUDA:
    case kDLCUDAManaged:
        snprintf(name, sizeof name, "cuda:%d", (int)dev.device_id);
        return alloy_device_get(name, out);
    default:
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "DLPack device type %d is not supported (alloy takes CPU and CUDA memory)",
                           (int)dev.device_type);
    }
}

static alloy_status import(const DLTensor *t, void (*deleter)(void *), void *user, int read_only,
                           alloy_array **out) {
    alloy_dtype dt = ALLOY_FLOAT32;
    alloy_device *dev = NULL;
    alloy_status st;
    if (t->ndim < 0 || t->ndim > ALLOY_MAX_NDIM)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "DLPack tensor has %d dimensions (alloy takes up to %d)",
                           (int)t->ndim, ALLOY_MAX_NDIM);
    if ((st = from_dl_dtype(t->dtype, &dt)) != ALLOY_OK) return st;
    if ((st = device_of(t->device, &dev)) != ALLOY_OK) return st;
    size_t item = alloy_dtype_size(dt);
    if (t->byte_offset % item)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "DLPack byte_offset %llu is not a multiple of the "
                           "element size %zu", (unsigned long long)t->byte_offset, item);
    st = alloy_array_wrap(dev, t->data, dt, t->ndim, t->shape, t->strides,
                          (int64_t)(t->byte_offset / item), deleter, user, out);
    if (st == ALLOY_OK) (*out)->read_only = read_only;
    return st;
}

static void call_versioned_deleter(void *p) {
    DLManagedTensorVersioned *t = p;
    if (t->deleter) t->deleter(t);
}

static void call_legacy_deleter(void *p) {
    DLManagedTensor *t = p;
    if (t->deleter) t->deleter(t);
}

alloy_status alloy_array_from_dlpack(DLManagedTensorVersioned *t, alloy_array **out) {
    if (!t || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "tensor or out is NULL");
    if (t->version.major != DLPACK_MAJOR_VERSION)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "DLPack major version %u is not supported (alloy speaks %d)",
                           t->version.major, DLPACK_MAJOR_VERSION);
    return import(&t->dl_tensor, call_versioned_deleter, t,
                  (t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, out);
}

alloy_status alloy_array_from_dlpack_legacy(DLManagedTensor *t, alloy_array **out) {
    if (!t || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "tensor or out is NULL");
    return import(&t->dl_tensor, call_legacy_deleter, t, 0, out);
}
