/* alloy/alloy.h — the whole public C API.
 *
 * alloy runs GPU kernels written as body-only Metal Shading Language (the
 * style of MLX's mx.fast.metal_kernel) on NVIDIA GPUs and on any CPU. */
#ifndef ALLOY_ALLOY_H
#define ALLOY_ALLOY_H

#include "status.h"
#include "dtype.h"
#include "device.h"
#include "array.h"
#include "dlpack.h"
#include "kernel.h"
#include "cache.h"
#include "kernel_file.h"
#include "precision.h"
#include "linalg.h"
#include "mlstm.h"
#include "nn.h"

#define ALLOY_VERSION_MAJOR 0
#define ALLOY_VERSION_MINOR 1
#define ALLOY_VERSION_PATCH 0
#define ALLOY_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif
const char *alloy_version(void);
#ifdef __cplusplus
}
#endif
#endif
