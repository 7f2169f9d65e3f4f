/* alloy/dlpack.h — DLPack interchange (ABI of DLPack 1.x and the legacy
 * DLManagedTensor).
 *
 * If the application already included the official dlpack.h, its definitions
 * are used; otherwise ABI-identical definitions are provided here so that
 * alloy needs no third-party header. Import takes ownership of the tensor on
 * success (its deleter runs when the alloy array dies); on failure the caller
 * still owns it. Export gives a tensor whose deleter drops the array
 * reference it holds. */
#ifndef ALLOY_DLPACK_H
#define ALLOY_DLPACK_H

#include <stdint.h>
#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_MAJOR_VERSION
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;

typedef enum {
    kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLOpenCL = 4, kDLVulkan = 7,
    kDLMetal = 8, kDLVPI = 9, kDLROCM = 10, kDLROCMHost = 11, kDLExtDev = 12,
    kDLCUDAManaged = 13, kDLOneAPI = 14, kDLWebGPU = 15, kDLHexagon = 16
} DLDeviceType;

typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;

typedef enum {
    kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLOpaqueHandle = 3U,
    kDLBfloat = 4U, kDLComplex = 5U, kDLBool = 6U
} DLDataTypeCode;

typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* elements; NULL = row-major compact */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif /* DLPACK_MAJOR_VERSION */

alloy_status alloy_array_to_dlpack(alloy_array *array, DLManagedTensorVersioned **out);
alloy_status alloy_array_to_dlpack_legacy(alloy_array *array, DLManagedTensor **out);
alloy_status alloy_array_from_dlpack(DLManagedTensorVersioned *tensor, alloy_array **out);
alloy_status alloy_array_from_dlpack_legacy(DLManagedTensor *tensor, alloy_array **out);

#ifdef __cplusplus
}
#endif
#endif
