/* builtin_kernels.c — see builtin_kernels.h. The kernels are catalog kernel
 * files (src/ops/), built once per process and launched through the public
 * API like any user kernel. */
#include <stdint.h>

#include "builtin_kernels.h"
#include "error.h"
#include "ops/catalog.h"

/* The kernel is a catalog kernel file (src/ops/array/kernels/gather.metal). */
static const char GATHER_FILE[] = "src/ops/array/kernels/gather.metal";

alloy_status alloy_builtin_gather(const alloy_array *src, alloy_array *dst) {
    alloy_kernel *gather_kernel;
    alloy_status st = alloy_catalog_kernel(GATHER_FILE, &gather_kernel);
    if (st != ALLOY_OK) return st;
    int64_t n = alloy_array_size(src);
    if (!n) return ALLOY_OK;
    alloy_array *count = NULL, *res = NULL;
    alloy_launch *l = NULL;
    st = alloy_array_scalar(src->device, ALLOY_INT64, (double)n, &count);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, dst);
    /* Enough threads to fill a GPU; each handles n / threads elements. */
    uint32_t threads = n < (1 << 22) ? (uint32_t)n : (1u << 22);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, threads, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, threads < 256 ? threads : 256, 1, 1);
    alloy_array *inputs[2] = {(alloy_array *)src, count};
    if (st == ALLOY_OK) st = alloy_kernel_apply(gather_kernel, 2, inputs, l, NULL, &res);
    alloy_array_free(res);
    alloy_launch_free(l);
    alloy_array_free(count);
    return st;
}
