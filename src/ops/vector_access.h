/* vector_access.h — whether an op may move its arrays 16 bytes at a time:
 * every given array row-contiguous with its data 16-byte aligned (a
 * DLPack view may start anywhere). Kernels take the answer as a template
 * flag and fall back to element accesses. */
#ifndef ALLOY_OPS_VECTOR_ACCESS_H
#define ALLOY_OPS_VECTOR_ACCESS_H

#include "alloy/alloy.h"

/* 1 when each non-NULL arrays[i] (i < n) is row-contiguous and 16-byte aligned. */
int alloy_ops_aligned16(int n, alloy_array *const *arrays);

#endif
