/* common.c — argument checks shared by the mLSTM operations
 * (mlstm_internal.h). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "ops/mlstm/mlstm_internal.h"

static void shape_text(char *buf, size_t cap, int nd, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < nd && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "%s)", nd == 1 ? "," : "");
}

static int same_shape(const alloy_array *x, int nd, const int64_t *shape) {
    if (alloy_array_ndim(x) != nd) return 0;
    for (int d = 0; d < nd; d++)
        if (alloy_array_shape(x)[d] != shape[d]) return 0;
    return 1;
}

alloy_status alloy_mlstm_check(const char *fn, const char *name, alloy_array *x, alloy_device *dev,
                               alloy_dtype dt, int nd, const int64_t *shape) {
    if (!x) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
    if (alloy_array_device(x) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s lives on %s but q on %s", fn, name,
                           alloy_device_name(alloy_array_device(x)), alloy_device_name(dev));
    if (alloy_array_dtype(x) != dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %s but must be %s", fn, name,
                           alloy_dtype_name(alloy_array_dtype(x)), alloy_dtype_name(dt));
    if (!same_shape(x, nd, shape)) {
        char want[200], got[200];
        shape_text(want, sizeof want, nd, shape);
        shape_text(got, sizeof got, alloy_array_ndim(x), alloy_array_shape(x));
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s has shape %s but must have shape %s", fn, name,
                           got, want);
    }
    return ALLOY_OK;
}

alloy_status alloy_mlstm_check_q(const char *fn, alloy_array *q, int nd, alloy_stream *stream) {
    if (!q) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q is NULL", fn);
    if (alloy_array_ndim(q) != nd) {
        char got[200];
        shape_text(got, sizeof got, alloy_array_ndim(q), alloy_array_shape(q));
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q has shape %s but must be %d-D %s", fn, got, nd,
                           nd == 3 ? "(B, NH, DHQK)" : "(B, NH, S, DHQK)");
    }
    const alloy_dtype dt = alloy_array_dtype(q);
    if (dt != ALLOY_FLOAT32 && dt != ALLOY_FLOAT16 && dt != ALLOY_BFLOAT16)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q is %s; it must be float32, float16 or bfloat16",
                           fn, alloy_dtype_name(dt));
    if (alloy_array_shape(q)[nd - 1] < 1)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q's last dimension (DHQK) is 0; it must be >= 1",
                           fn);
    if (alloy_array_shape(q)[nd - 1] > INT32_MAX / 2)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: DHQK %lld is too large", fn,
                           (long long)alloy_array_shape(q)[nd - 1]);
    alloy_device *dev = alloy_array_device(q);
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but q lives on %s", fn,
                           alloy_device_name(alloy_stream_device(stream)), alloy_device_name(dev));
    return ALLOY_OK;
}

alloy_status alloy_mlstm_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                     alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res,
                                     int *created) {
    *res = NULL;
    *created = 0;
    if (!slot)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: %s is NULL (pass the address of an alloy_array *, NULL or a given array)", fn,
                           name);
    alloy_array *x = *slot;
    if (!x) {
        alloy_status st = alloy_array_new(dev, dt, nd, shape, res);
        if (st == ALLOY_OK) *created = 1;
        return st;
    }
    alloy_status st = alloy_mlstm_check(fn, name, x, dev, dt, nd, shape);
    if (st != ALLOY_OK) return st;
    if (!alloy_array_is_row_contiguous(x))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s must be row-contiguous (it is written in place)",
                           fn, name);
    *res = x;
    return ALLOY_OK;
}
