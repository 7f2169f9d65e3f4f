/* convert.c — see convert.h. One launch of the catalog kernel convert.metal
 * (a strided src is made row-contiguous by the runtime first). */
#include "convert.h"

#include "core/error.h"
#include "ops/catalog.h"

static const char CONVERT_FILE[] = "src/ops/array/kernels/convert.metal";

alloy_status alloy_ops_convert(alloy_array *src, alloy_array *dst, alloy_stream *stream) {
    const int64_t n = alloy_array_size(src);
    if (alloy_array_size(dst) != n)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "convert: %lld elements into %lld", (long long)n,
                           (long long)alloy_array_size(dst));
    if (n == 0) return ALLOY_OK;
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    alloy_array *res = NULL;
    alloy_status st = alloy_catalog_kernel(CONVERT_FILE, &k);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, dst);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "TIN", alloy_array_dtype(src));
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "TOUT", alloy_array_dtype(dst));
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT64, n);
    /* enough threads to fill a GPU; each takes n / threads elements */
    const uint32_t threads = n < (1 << 22) ? (uint32_t)n : (1u << 22);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, threads, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, threads < 256 ? threads : 256, 1, 1);
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, 1, &src, l, stream, &res);
    alloy_array_free(res);
    alloy_launch_free(l);
    return st;
}

alloy_status alloy_ops_converted(alloy_array *src, alloy_dtype dtype, alloy_stream *stream, alloy_array **out) {
    *out = NULL;
    alloy_array *a = NULL;
    alloy_status st = alloy_array_new(alloy_array_device(src), dtype, alloy_array_ndim(src), alloy_array_shape(src), &a);
    if (st == ALLOY_OK) st = alloy_ops_convert(src, a, stream);
    if (st != ALLOY_OK) {
        alloy_array_free(a);
        return st;
    }
    *out = a;
    return ALLOY_OK;
}
