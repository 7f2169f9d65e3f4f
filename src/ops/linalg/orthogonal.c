/* orthogonal.c — orthogonal matrices (alloy/linalg.h): alloy_orthogonal,
 * torch.nn.init.orthogonal_ for a batch (the QR of a Gaussian matrix with
 * Q's columns signed by R's diagonal, times a gain; the transpose for wide
 * shapes), and alloy_orthonormalize, the same construction on a given
 * matrix. The Gaussian comes from a counter-based generator in a kernel
 * (orthogonal_randn), written straight into the output; the QR kernels of
 * qr.c then replace each matrix with its orthonormal factor in place. */
#include <stdint.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "ops/linalg/lu_internal.h"
#include "ops/linalg/matrix_operand.h"
#include "ops/linalg/qr_internal.h"

static const char RANDN_FILE[] = "src/ops/linalg/kernels/orthogonal_randn.metal";

void alloy_orthogonal_options_init(alloy_orthogonal_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->gain = 1.0;
}

/* Fills out (count elements) with standard normal samples of (seed, index). */
static alloy_status randn(alloy_array *out, int64_t count, uint64_t seed, alloy_stream *stream) {
    if (count == 0) return ALLOY_OK;
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    alloy_status st = alloy_catalog_kernel(RANDN_FILE, &k);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, out);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", alloy_array_dtype(out));
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "seed_lo", ALLOY_UINT32, (int64_t)(seed & 0xFFFFFFFFu));
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "seed_hi", ALLOY_UINT32, (int64_t)(seed >> 32));
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "count", ALLOY_INT64, count);
    const int64_t groups = (count + 255) / 256 < 65536 ? (count + 255) / 256 : 65536;
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(groups * 256), 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 256, 1, 1);
    alloy_array *res[1] = {NULL};
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, 0, NULL, l, stream, res);
    alloy_array_free(res[0]);
    alloy_launch_free(l);
    return st;
}

/* The Q of each (rows x cols) matrix of `src` (M = src, or src^T when
 * rows < cols) with the sign fix and gain, into out (out may be src). */
static alloy_status orthonormal_factor(const char *fn, alloy_device *dev, alloy_dtype dt, int64_t batch, int64_t rows,
                                       int64_t cols, double gain, alloy_array *src, alloy_array *out,
                                       alloy_stream *stream) {
    if (batch == 0 || rows == 0 || cols == 0) return ALLOY_OK;
    const int trans = rows < cols;
    alloy_qr_job j = {dev, dt, batch, trans ? cols : rows, trans ? rows : cols, ALLOY_QRK_Q, 1, trans, gain};
    return alloy_qr_launch(fn, &j, src, out, NULL, stream);
}

alloy_status alloy_orthogonal(alloy_device *device, alloy_dtype dtype, int ndim, const int64_t *shape,
                              const alloy_orthogonal_options *options, alloy_stream *stream, alloy_array **out) {
    static const char fn[] = "alloy_orthogonal";
    if (!out)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: out is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_orthogonal_options o;
    if (options) o = *options;
    else alloy_orthogonal_options_init(&o);
    if (!(o.gain - o.gain == 0))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: options->gain is not finite", fn);
    if (ndim < 2 || ndim > ALLOY_MAX_NDIM)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: ndim is %d; the shape must be (..., rows, cols) with 2 to %d dimensions", fn, ndim,
                           ALLOY_MAX_NDIM);
    if (!shape) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: shape is NULL", fn);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: shape[%d] is %lld; dimensions are >= 0", fn, d,
                               (long long)shape[d]);
    if (dtype != ALLOY_FLOAT32 && dtype != ALLOY_FLOAT64)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: dtype is %s; it must be float32 or float64", fn,
                           alloy_dtype_name(dtype));
    alloy_device *dev = device;
    if (!dev && *out) dev = alloy_array_device(*out);
    if (!dev && stream) dev = alloy_stream_device(stream);
    if (!dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: device is NULL (name the device, or give out or a stream)", fn);
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but device is %s", fn,
                           alloy_device_name(alloy_stream_device(stream)), alloy_device_name(dev));
    const int64_t rows = shape[ndim - 2], cols = shape[ndim - 1];
    if (rows > INT32_MAX / 4 || cols > INT32_MAX / 4)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: %lld x %lld matrices are too large", fn, (long long)rows,
                           (long long)cols);
    int64_t batch = 1;
    for (int d = 0; d < ndim - 2; d++) batch *= shape[d];
    alloy_array *res = NULL;
    int created = 0;
    alloy_status st = alloy_lu_prepare_out(fn, "out", out, dev, dtype, ndim, shape, &res, &created);
    alloy_stream *s = stream;
    if (st == ALLOY_OK && !s) st = alloy_stream_default(dev, &s);
    if (st == ALLOY_OK) st = randn(res, batch * rows * cols, o.seed, s);
    if (st == ALLOY_OK) st = orthonormal_factor(fn, dev, dtype, batch, rows, cols, o.gain, res, res, s);
    if (st != ALLOY_OK) {
        if (created) alloy_array_free(res);
        return st;
    }
    if (created) *out = res;
    return ALLOY_OK;
}

alloy_status alloy_orthonormalize(alloy_array *a, alloy_stream *stream, alloy_array **out) {
    static const char fn[] = "alloy_orthonormalize";
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: a is NULL", fn);
    if (!out)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: out is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_status chk = alloy_linalg_check_matrix(fn, a, stream);
    if (chk != ALLOY_OK) return chk;
    const int nd = alloy_array_ndim(a);
    const alloy_dtype dt = alloy_array_dtype(a);
    alloy_device *dev = alloy_array_device(a);
    const int64_t *sh = alloy_array_shape(a);
    const int64_t rows = sh[nd - 2], cols = sh[nd - 1];
    int64_t batch = 1;
    for (int d = 0; d < nd - 2; d++) batch *= sh[d];
    alloy_array *res = NULL;
    int created = 0;
    alloy_status st = alloy_lu_prepare_out(fn, "out", out, dev, dt, nd, sh, &res, &created);
    if (st == ALLOY_OK) st = orthonormal_factor(fn, dev, dt, batch, rows, cols, 1.0, a, res, stream);
    if (st != ALLOY_OK) {
        if (created) alloy_array_free(res);
        return st;
    }
    if (created) *out = res;
    return ALLOY_OK;
}
