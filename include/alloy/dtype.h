/* alloy/dtype.h — element types of arrays and kernel arguments. */
#ifndef ALLOY_DTYPE_H
#define ALLOY_DTYPE_H

#include <stddef.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum alloy_dtype {
    ALLOY_BOOL = 0,
    ALLOY_INT8,
    ALLOY_UINT8,
    ALLOY_INT16,
    ALLOY_UINT16,
    ALLOY_INT32,
    ALLOY_UINT32,
    ALLOY_INT64,
    ALLOY_UINT64,
    ALLOY_FLOAT16,
    ALLOY_BFLOAT16,
    ALLOY_FLOAT32,
    ALLOY_FLOAT64,
    ALLOY_DTYPE_COUNT
} alloy_dtype;

/* Size of one element in bytes (bool is 1). 0 for an invalid dtype. */
size_t alloy_dtype_size(alloy_dtype dtype);

/* NumPy/MLX spelling: "bool", "int8", ..., "float16", "bfloat16", "float32". */
const char *alloy_dtype_name(alloy_dtype dtype);

/* The MSL type a kernel body sees: "bool", "int8_t", ..., "float16_t",
 * "bfloat16_t", "float", "double" (MLX's spelling). */
const char *alloy_dtype_msl_name(alloy_dtype dtype);

/* Parses NumPy, MLX, MSL and short spellings: "float32", "f32", "float",
 * "half", "float16", "bfloat16", "bfloat", "int32", "i32", "int", "uint",
 * "bool", ... Unknown names are ALLOY_ERROR_INVALID_ARGUMENT. */
alloy_status alloy_dtype_parse(const char *name, alloy_dtype *out);

int alloy_dtype_is_float(alloy_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
