/* vector_access.c — see vector_access.h. */
#include <stdint.h>

#include "ops/vector_access.h"

int alloy_ops_aligned16(int n, alloy_array *const *arrays) {
    for (int i = 0; i < n; i++) {
        const alloy_array *a = arrays[i];
        if (!a) continue;
        if (!alloy_array_is_row_contiguous(a) || (uintptr_t)alloy_array_data(a) % 16 != 0) return 0;
    }
    return 1;
}
