/* lstsq.c — least squares through Householder QR (alloy/linalg.h):
 * alloy_lstsq. A tall or square matrix (m >= n) is factored A = QR and
 * x = R^-1 (Q^T b)(0:n) minimises ||A x - b||; a wide one (m < n) is solved
 * for the minimum-norm x through the QR of A^T (A = R^T Q^T, x = Q [R^-T b;
 * 0]). Two launches on the caller's stream: the raw factorization into
 * scratch (qr.c's kernels), then the solve (qr_solve: one SIMD group per
 * right-hand side on a GPU; qr_solve_serial: one thread per matrix on the
 * CPU), which also checks R's diagonal for numerical rank deficiency and
 * reports it in info. Nothing waits for the device. */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "ops/linalg/lu_internal.h"
#include "ops/linalg/matrix_operand.h"
#include "ops/linalg/qr_internal.h"

static const char SOLVE_FILE[] = "src/ops/linalg/kernels/qr_solve.metal";
static const char SOLVE_SERIAL_FILE[] = "src/ops/linalg/kernels/qr_solve_serial.metal";

static int forced_solve = 0;

void alloy_lstsq_force_solve_path(int path) { forced_solve = path; }

void alloy_lstsq_options_init(alloy_lstsq_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->rcond = -1.0;
}

static void shape_text(char *buf, size_t cap, int nd, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < nd && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "%s)", nd == 1 ? "," : "");
}

static alloy_status run_solve(alloy_device *dev, alloy_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t nrhs,
                              double tol, alloy_array *h, alloy_array *tau, alloy_array *b, alloy_array *x,
                              alloy_array *info, alloy_stream *stream) {
    const int serial = forced_solve == 1 || (forced_solve == 0 && alloy_device_backend(dev) == ALLOY_BACKEND_CPU);
    const int64_t len = m > n ? m : (n > 0 ? n : 1);
    const size_t es = alloy_dtype_size(dt);
    if (nrhs > INT32_MAX)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "alloy_lstsq: %lld right-hand sides are too many", (long long)nrhs);
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    alloy_status st = alloy_catalog_kernel(serial ? SOLVE_SERIAL_FILE : SOLVE_FILE, &k);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, x);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, info);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", dt);
    if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "WIDE", m < n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "m", ALLOY_INT32, m);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT32, n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "nrhs", ALLOY_INT32, nrhs);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "batch", ALLOY_INT64, batch);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "tol", ALLOY_FLOAT64, tol);
    if (serial) {
        if (st == ALLOY_OK && batch > (int64_t)(UINT32_MAX / 2))
            st = alloy_error(ALLOY_ERROR_UNSUPPORTED, "alloy_lstsq: %lld matrices are too many for one launch",
                             (long long)batch);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, (size_t)len * es);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)batch, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 1, 1, 1);
    } else {
        /* up to 8 right-hand sides per threadgroup, at most 4 SIMD groups */
        const int64_t cols = nrhs < 1 ? 1 : nrhs < 8 ? nrhs : 8, warps = cols < 4 ? cols : 4, nt = 32 * warps;
        const int64_t tiles = nrhs < 1 ? 1 : (nrhs + cols - 1) / cols;
        if (st == ALLOY_OK && batch * tiles > (int64_t)(UINT32_MAX / 2) / nt)
            st = alloy_error(ALLOY_ERROR_UNSUPPORTED, "alloy_lstsq: %lld matrices are too many for one launch",
                             (long long)batch);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "cols", ALLOY_INT32, cols);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "tiles", ALLOY_INT32, tiles);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, (size_t)(warps * len) * es);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(batch * tiles * nt), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)nt, 1, 1);
    }
    alloy_array *ins[3] = {h, tau, b}, *res[2] = {NULL, NULL};
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, 3, ins, l, stream, res);
    alloy_array_free(res[0]);
    alloy_array_free(res[1]);
    alloy_launch_free(l);
    return st;
}

alloy_status alloy_lstsq(alloy_array *a, alloy_array *b, const alloy_lstsq_options *options, alloy_stream *stream,
                         alloy_array **x, alloy_array **info) {
    static const char fn[] = "alloy_lstsq";
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: a is NULL", fn);
    if (!b) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b is NULL", fn);
    if (!x)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: x is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_lstsq_options o;
    if (options) o = *options;
    else alloy_lstsq_options_init(&o);
    if (o.rcond != o.rcond)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: options->rcond is NaN", fn);
    alloy_status chk = alloy_linalg_check_matrix(fn, a, stream);
    if (chk != ALLOY_OK) return chk;
    const int nd = alloy_array_ndim(a);
    const alloy_dtype dt = alloy_array_dtype(a);
    alloy_device *dev = alloy_array_device(a);
    if (alloy_array_device(b) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b lives on %s but a on %s", fn,
                           alloy_device_name(alloy_array_device(b)), alloy_device_name(dev));
    if (alloy_array_dtype(b) != dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b is %s but a is %s: give both the same dtype", fn,
                           alloy_dtype_name(alloy_array_dtype(b)), alloy_dtype_name(dt));
    const int64_t *sh = alloy_array_shape(a);
    const int64_t m = sh[nd - 2], n = sh[nd - 1], k = m < n ? m : n;
    const int bnd = alloy_array_ndim(b);
    const int64_t *bs = alloy_array_shape(b);
    int ok = bnd == nd || bnd == nd - 1;
    for (int d = 0; ok && d < nd - 2; d++) ok = bs[d] == sh[d];
    if (ok) ok = bs[nd - 2] == m;
    if (!ok) {
        char as[160], bts[160];
        shape_text(as, sizeof as, nd, sh);
        shape_text(bts, sizeof bts, bnd, bs);
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: b has shape %s but a has shape %s: b must be (..., %lld, k) or (..., %lld) with the "
                           "same leading dimensions as a (they do not broadcast)",
                           fn, bts, as, (long long)m, (long long)m);
    }
    if (m > INT32_MAX / 4 || n > INT32_MAX / 4)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: %lld x %lld matrices are too large", fn, (long long)m,
                           (long long)n);
    const int64_t nrhs = bnd == nd ? bs[bnd - 1] : 1;
    int64_t batch = 1;
    for (int d = 0; d < nd - 2; d++) batch *= sh[d];
    int64_t xs[ALLOY_MAX_NDIM];
    memcpy(xs, bs, sizeof(int64_t) * (size_t)bnd);
    xs[nd - 2] = n;
    alloy_array *X = NULL, *I = NULL, *h = NULL, *tau = NULL;
    int newX = 0, newI = 0;
    alloy_status st = alloy_lu_prepare_out(fn, "x", x, dev, dt, bnd, xs, &X, &newX);
    if (st == ALLOY_OK && X == b)
        st = alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: x is b; give a separate output array", fn);
    if (st == ALLOY_OK) {
        if (info) st = alloy_lu_prepare_out(fn, "info", info, dev, ALLOY_INT32, nd - 2, sh, &I, &newI);
        else {
            st = alloy_array_new(dev, ALLOY_INT32, nd - 2, sh, &I);
            newI = 1;
        }
    }
    /* the raw QR of A (tall) or A^T (wide) in scratch */
    const int64_t one = 1, hcount = batch * m * n, tcount = batch * k;
    const int64_t hsz = hcount > 0 ? hcount : one, tsz = tcount > 0 ? tcount : one;
    if (st == ALLOY_OK) st = alloy_array_new(dev, dt, 1, &hsz, &h);
    if (st == ALLOY_OK) st = alloy_array_new(dev, dt, 1, &tsz, &tau);
    if (st == ALLOY_OK && batch > 0 && k > 0) {
        alloy_qr_job j = {dev, dt, batch, m >= n ? m : n, m >= n ? n : m, ALLOY_QRK_RAW, 0, m < n, 1.0};
        st = alloy_qr_launch(fn, &j, a, h, tau, stream);
    }
    if (st == ALLOY_OK && batch > 0) {
        const double eps = dt == ALLOY_FLOAT64 ? DBL_EPSILON : (double)FLT_EPSILON;
        const double tol = o.rcond < 0 ? (double)(m > n ? m : n) * eps : o.rcond;
        st = run_solve(dev, dt, batch, m, n, nrhs, tol, h, tau, b, X, I, stream);
    }
    alloy_array_free(h);
    alloy_array_free(tau);
    if (st != ALLOY_OK) {
        if (newX) alloy_array_free(X);
        if (newI) alloy_array_free(I);
        return st;
    }
    if (newX) *x = X;
    if (info) {
        if (newI) *info = I;
    } else {
        alloy_array_free(I);
    }
    return ALLOY_OK;
}
