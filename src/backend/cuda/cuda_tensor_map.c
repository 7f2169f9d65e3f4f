/* cuda_tensor_map.c — encodes a launch's tensor map (alloy_launch_set_tensor_map)
 * into the CUtensorMap its kernel parameter carries.
 *
 * Encoded at every launch into the caller's buffer (the launch's stack): the
 * spec travels with the launch like a constant, and cuLaunchKernel copies the
 * parameter, so nothing is allocated or cached. The core has already checked
 * the spec against its array (src/core/tensor_map.c), so a failure here is
 * the driver's own verdict. Elements are moved as unsigned integers of their
 * size: out-of-bounds elements of a box then read as zero bits, whatever the
 * dtype. */
#include "core/error.h"
#include "cuda_internal.h"

int alloy_cuda_has_tensor_maps(const cuda_device *d) {
    return d->cc_major >= 9 && alloy_cu.cuTensorMapEncodeTiled != NULL;
}

alloy_status alloy_cuda_tensor_map_supported(const cuda_device *d, const char *kname) {
    if (alloy_cuda_has_tensor_maps(d)) return ALLOY_OK;
    if (d->cc_major < 9)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "kernel '%s': tensor maps need Hopper (sm_90) or newer; this GPU is "
                           "sm_%d%d", kname, d->cc_major, d->cc_minor);
    return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                       "kernel '%s': tensor maps need cuTensorMapEncodeTiled, which this NVIDIA "
                       "driver lacks (install a CUDA 12 driver or newer)", kname);
}

alloy_status alloy_cuda_encode_tensor_map(const alloy_arg *a, const char *kname, void *out) {
    const alloy_tensor_map_spec *s = a->tensor_map;
    const size_t es = alloy_dtype_size(a->dtype);
    CUtensorMapDataType type;
    switch (es) {
    case 1: type = ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT8; break;
    case 2: type = ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT16; break;
    case 4: type = ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT32; break;
    case 8: type = ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT64; break;
    default:
        return alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': tensor map '%s' over %zu-byte elements",
                           kname, a->name, es);
    }
    CUtensorMapSwizzle swizzle = ALLOY_CU_TENSOR_MAP_SWIZZLE_NONE;
    switch (s->swizzle) {
    case 32: swizzle = ALLOY_CU_TENSOR_MAP_SWIZZLE_32B; break;
    case 64: swizzle = ALLOY_CU_TENSOR_MAP_SWIZZLE_64B; break;
    case 128: swizzle = ALLOY_CU_TENSOR_MAP_SWIZZLE_128B; break;
    default: break;
    }
    cuuint64_t dims[ALLOY_TENSOR_MAP_MAX_RANK], strides[ALLOY_TENSOR_MAP_MAX_RANK];
    cuuint32_t box[ALLOY_TENSOR_MAP_MAX_RANK], step[ALLOY_TENSOR_MAP_MAX_RANK];
    for (int i = 0; i < s->rank; i++) {
        dims[i] = (cuuint64_t)s->dims[i];
        if (i) strides[i - 1] = (cuuint64_t)s->strides[i] * es; /* bytes, dims 1.. */
        box[i] = s->box[i];
        step[i] = 1;
    }
    CUresult r = alloy_cu.cuTensorMapEncodeTiled(
        (CUtensorMap *)out, type, (cuuint32_t)s->rank, a->ptr, dims, strides, box, step,
        ALLOY_CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, ALLOY_CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        ALLOY_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != ALLOY_CUDA_SUCCESS) {
        char e[256];
        return alloy_error(ALLOY_ERROR_LAUNCH, "kernel '%s': tensor map '%s': cuTensorMapEncodeTiled "
                           "failed: %s", kname, a->name, alloy_cuda_error_text(r, e, sizeof e));
    }
    return ALLOY_OK;
}
