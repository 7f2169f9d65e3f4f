/* common.c — argument checks and launch helpers shared by the fused nn
 * operations (nn_internal.h). */
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "ops/catalog.h"
#include "ops/env_override.h"
#include "ops/nn/nn_internal.h"

static void shape_text(char *buf, size_t cap, int nd, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < nd && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "%s)", nd == 1 ? "," : "");
}

static int same_shape(const alloy_array *a, int nd, const int64_t *shape) {
    if (alloy_array_ndim(a) != nd) return 0;
    for (int d = 0; d < nd; d++)
        if (alloy_array_shape(a)[d] != shape[d]) return 0;
    return 1;
}

alloy_status alloy_nn_check_x(const char *fn, alloy_array *x, int min_nd, alloy_stream *stream) {
    if (!x) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: x is NULL", fn);
    const alloy_dtype dt = alloy_array_dtype(x);
    if (dt != ALLOY_FLOAT32 && dt != ALLOY_FLOAT16 && dt != ALLOY_BFLOAT16 && dt != ALLOY_FLOAT64)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: x is %s; it must be float32, float16, bfloat16 or float64", fn, alloy_dtype_name(dt));
    if (alloy_array_ndim(x) < min_nd) {
        char got[200];
        shape_text(got, sizeof got, alloy_array_ndim(x), alloy_array_shape(x));
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: x has shape %s but must have at least %d dimension%s",
                           fn, got, min_nd, min_nd == 1 ? "" : "s");
    }
    alloy_device *dev = alloy_array_device(x);
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but x lives on %s", fn,
                           alloy_device_name(alloy_stream_device(stream)), alloy_device_name(dev));
    return ALLOY_OK;
}

alloy_status alloy_nn_check(const char *fn, const char *name, alloy_array *a, alloy_device *dev, alloy_dtype dt,
                            int nd, const int64_t *shape) {
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
    if (alloy_array_device(a) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s lives on %s but x on %s", fn, name,
                           alloy_device_name(alloy_array_device(a)), alloy_device_name(dev));
    if (alloy_array_dtype(a) != dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %s but must be %s (x's dtype)", fn, name,
                           alloy_dtype_name(alloy_array_dtype(a)), alloy_dtype_name(dt));
    if (!same_shape(a, nd, shape)) {
        char want[200], got[200];
        shape_text(want, sizeof want, nd, shape);
        shape_text(got, sizeof got, alloy_array_ndim(a), alloy_array_shape(a));
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s has shape %s but must have shape %s", fn, name,
                           got, want);
    }
    return ALLOY_OK;
}

alloy_status alloy_nn_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                  alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res, int *created) {
    *res = NULL;
    *created = 0;
    if (!slot)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: %s is NULL (pass the address of an alloy_array *, NULL or a given array)", fn,
                           name);
    alloy_array *a = *slot;
    if (!a) {
        alloy_status st = alloy_array_new(dev, dt, nd, shape, res);
        if (st == ALLOY_OK) *created = 1;
        return st;
    }
    alloy_status st = alloy_nn_check(fn, name, a, dev, dt, nd, shape);
    if (st != ALLOY_OK) return st;
    if (!alloy_array_is_row_contiguous(a))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s must be row-contiguous (it is written in place)",
                           fn, name);
    *res = a;
    return ALLOY_OK;
}

alloy_dtype alloy_nn_accum(alloy_dtype dt) { return dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32; }

alloy_status alloy_nn_apply(const char *path, alloy_launch *launch, alloy_dtype dt, int n_inputs,
                            alloy_array **inputs, int n_outputs, alloy_stream *stream) {
    alloy_kernel *k = NULL;
    alloy_status st = alloy_catalog_kernel(path, &k);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(launch, "T", dt);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(launch, "A", alloy_nn_accum(dt));
    /* every nn kernel waits for the kernel before it first thing (alloy_wait_previous_kernel), so any may
     * overlap it */
    if (st == ALLOY_OK) st = alloy_launch_set_overlap(launch, alloy_ops_overlap());
    alloy_array *res[4] = {NULL, NULL, NULL, NULL};
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, n_inputs, inputs, launch, stream, res);
    for (int o = 0; o < n_outputs && o < 4; o++) alloy_array_free(res[o]);
    return st;
}

int64_t alloy_nn_grid_threads(int64_t n) {
    const int64_t cap = (int64_t)1 << 24;
    const int64_t t = (n + 255) / 256 * 256;
    return t < 256 ? 256 : (t > cap ? cap : t);
}

int64_t alloy_nn_rows_per_part(int64_t rows) {
    int64_t rb = (rows + 511) / 512;
    return rb < 16 ? 16 : rb;
}

alloy_status alloy_nn_column_sum(alloy_array *part, int64_t P, int64_t M, int64_t M1, alloy_array *a,
                                 alloy_array *b, alloy_dtype dt, alloy_stream *stream) {
    /* k-slices: enough that each thread's blocks (at most 8) are loaded at once, no more (tree levels) */
    int ks = 1;
    while (ks < 32 && 8 * (int64_t)ks < P) ks *= 2;
    alloy_launch *l = NULL;
    alloy_status st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, a);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, b);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)((M + 31) / 32 * 32), (uint32_t)ks, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 32, (uint32_t)ks, 1);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "KS", ks);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "P", ALLOY_INT64, P);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "M", ALLOY_INT64, M);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "M1", ALLOY_INT64, M1);
    alloy_array *ins[1] = {part};
    if (st == ALLOY_OK) st = alloy_nn_apply("src/ops/nn/kernels/column_sum.metal", l, dt, 1, ins, 2, stream);
    alloy_launch_free(l);
    return st;
}
