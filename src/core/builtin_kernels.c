/* builtin_kernels.c — see builtin_kernels.h. The kernels are ordinary alloy
 * kernels, built once per process and launched through the public API. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "builtin_kernels.h"
#include "error.h"

/* dst[i] = src[location of row-major element i in the src view]: a
 * grid-stride loop with 64-bit indices, so any size fits one launch. */
static const char GATHER_BODY[] =
    "const ulong n = ulong(count);\n"
    "const ulong step = ulong(threads_per_grid.x);\n"
    "for (ulong i = thread_position_in_grid.x; i < n; i += step) {\n"
    "  long loc = 0;\n"
    "  ulong rest = i;\n"
    "  for (int d = src_ndim - 1; d >= 0; --d) {\n"
    "    ulong extent = ulong(src_shape[d]);\n"
    "    loc += long(rest % extent) * src_strides[d];\n"
    "    rest /= extent;\n"
    "  }\n"
    "  dst[i] = src[loc];\n"
    "}\n";

static pthread_once_t once = PTHREAD_ONCE_INIT;
static alloy_kernel *gather_kernel;
static alloy_status gather_status;
static char gather_message[512];

static void make_kernels(void) {
    static const char *const in[] = {"src", "count"}, *const out[] = {"dst"};
    gather_status = alloy_kernel_new("alloy_gather", 2, in, 1, out, GATHER_BODY, NULL,
                                     /*ensure_row_contiguous=*/0, /*atomic_outputs=*/0,
                                     &gather_kernel);
    if (gather_status != ALLOY_OK)
        snprintf(gather_message, sizeof gather_message, "%s", alloy_last_error());
}

alloy_status alloy_builtin_gather(const alloy_array *src, alloy_array *dst) {
    pthread_once(&once, make_kernels);
    if (gather_status != ALLOY_OK)
        return alloy_error(gather_status, "cannot build the gather kernel: %s", gather_message);
    int64_t n = alloy_array_size(src);
    if (!n) return ALLOY_OK;
    alloy_array *count = NULL, *res = NULL;
    alloy_launch *l = NULL;
    alloy_status st = alloy_array_scalar(src->device, ALLOY_INT64, (double)n, &count);
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
