/* lu.c — LU factorization with partial pivoting and what is built on it
 * (alloy/linalg.h): alloy_lu_factor (LAPACK getrf), alloy_lu_solve (getrs),
 * alloy_solve (factor + solve, NumPy's linalg.solve) and alloy_inv.
 *
 * Every call validates its arguments (errors name the argument), reduces
 * the leading dimensions to one batch of contiguous n x n matrices, picks a
 * kernel per device and n, and launches it on the caller's stream with the
 * sizes as launch constants; nothing waits for the device. Kernels:
 *   CPU:  lu_factor_serial / lu_solve_serial (one thread per matrix);
 *   GPU:  lu_solve_warp (alloy_solve with n <= 32 and at most 32
 *         right-hand sides: factor and solve in one kernel, rows of A and
 *         B in registers of one SIMD-group segment),
 *         lu_factor_warp (n <= 32, rows in registers of one SIMD-group
 *         segment), lu_factor_blocked (n > 32: one threadgroup per matrix,
 *         blocked right-looking, the matrix in threadgroup memory while it
 *         fits, else in device memory with its panels staged),
 *         lu_factor_tg (unblocked, one threadgroup per matrix: the matrices
 *         too large for the blocked kernel's threadgroup memory),
 *         lu_solve (one threadgroup per matrix and block of right-hand
 *         sides, one simdgroup per right-hand side), lu_solve_blocked
 *         (inverses and 16 or more right-hand sides, not transposed: 32
 *         right-hand sides per threadgroup, panels of the factor staged,
 *         the updates as register-tiled products).
 * Determinants are in det.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "ops/linalg/lu_internal.h"

static const char WARP_FILE[] = "src/ops/linalg/kernels/lu_factor_warp.metal";
static const char FUSED_FILE[] = "src/ops/linalg/kernels/lu_solve_warp.metal";
static const char TG_FILE[] = "src/ops/linalg/kernels/lu_factor_tg.metal";
static const char BLOCKED_FILE[] = "src/ops/linalg/kernels/lu_factor_blocked.metal";
static const char SERIAL_FILE[] = "src/ops/linalg/kernels/lu_factor_serial.metal";
static const char SOLVE_FILE[] = "src/ops/linalg/kernels/lu_solve.metal";
static const char SOLVE_BLOCKED_FILE[] = "src/ops/linalg/kernels/lu_solve_blocked.metal";
static const char SOLVE_SERIAL_FILE[] = "src/ops/linalg/kernels/lu_solve_serial.metal";

/* ---- argument checks ------------------------------------------------------ */

alloy_status alloy_lu_check_square(const char *fn, const char *name, alloy_array *a, alloy_stream *stream,
                                   alloy_lu_square *s) {
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
    memset(s, 0, sizeof *s);
    s->nd = alloy_array_ndim(a);
    if (s->nd < 2)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: %s is %d-D; it must be a square matrix or a batch of them (..., n, n)", fn,
                           name, s->nd);
    const int64_t *sh = alloy_array_shape(a);
    memcpy(s->shape, sh, sizeof(int64_t) * (size_t)s->nd);
    if (sh[s->nd - 1] != sh[s->nd - 2])
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: %s is not square: its last two dimensions are %lld x %lld", fn, name,
                           (long long)sh[s->nd - 2], (long long)sh[s->nd - 1]);
    s->dt = alloy_array_dtype(a);
    if (s->dt != ALLOY_FLOAT32 && s->dt != ALLOY_FLOAT64)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %s; it must be float32 or float64", fn, name,
                           alloy_dtype_name(s->dt));
    s->n = sh[s->nd - 1];
    if (s->n > INT32_MAX / 2)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: %s is %lld x %lld, too large", fn, name,
                           (long long)s->n, (long long)s->n);
    s->batch = 1;
    for (int d = 0; d < s->nd - 2; d++) s->batch *= sh[d];
    s->dev = alloy_array_device(a);
    if (stream && alloy_stream_device(stream) != s->dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but %s lives on %s", fn,
                           alloy_device_name(alloy_stream_device(stream)), name, alloy_device_name(s->dev));
    return ALLOY_OK;
}

static void shape_text(char *buf, size_t cap, int nd, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < nd && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "%s)", nd == 1 ? "," : "");
}

alloy_status alloy_lu_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                  alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res,
                                  int *created) {
    *res = NULL;
    *created = 0;
    alloy_array *x = *slot;
    if (!x) {
        alloy_status st = alloy_array_new(dev, dt, nd, shape, res);
        if (st == ALLOY_OK) *created = 1;
        return st;
    }
    if (alloy_array_device(x) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s lives on %s but the operands on %s", fn, name,
                           alloy_device_name(alloy_array_device(x)), alloy_device_name(dev));
    if (alloy_array_dtype(x) != dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %s but must be %s", fn, name,
                           alloy_dtype_name(alloy_array_dtype(x)), alloy_dtype_name(dt));
    int same = alloy_array_ndim(x) == nd;
    for (int d = 0; same && d < nd; d++) same = alloy_array_shape(x)[d] == shape[d];
    if (!same) {
        char want[160], got[160];
        shape_text(want, sizeof want, nd, shape);
        shape_text(got, sizeof got, alloy_array_ndim(x), alloy_array_shape(x));
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s has shape %s but must have shape %s", fn, name,
                           got, want);
    }
    if (!alloy_array_is_row_contiguous(x))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s must be row-contiguous (it is written in place)",
                           fn, name);
    *res = x;
    return ALLOY_OK;
}

alloy_status alloy_lu_scratch(const alloy_lu_square *s, alloy_array **lu, alloy_array **ipiv,
                              alloy_array **info) {
    *lu = *ipiv = *info = NULL;
    alloy_status st = alloy_array_new(s->dev, s->dt, s->nd, s->shape, lu);
    if (st == ALLOY_OK) st = alloy_array_new(s->dev, ALLOY_INT32, s->nd - 1, s->shape, ipiv);
    if (st == ALLOY_OK) st = alloy_array_new(s->dev, ALLOY_INT32, s->nd - 2, s->shape, info);
    if (st != ALLOY_OK) {
        alloy_array_free(*lu);
        alloy_array_free(*ipiv);
        alloy_array_free(*info);
        *lu = *ipiv = *info = NULL;
    }
    return st;
}

/* ---- launches --------------------------------------------------------------- */

/* Bytes of threadgroup memory a kernel may hold for its matrix on dev: the
 * opt-in limit of the GPU's generation less room for the static arrays
 * (Hopper 227 KB, A100 163 KB, others 99 KB or less); generous on the CPU. */
static size_t smem_budget(alloy_device *dev) {
    if (alloy_device_backend(dev) != ALLOY_BACKEND_CUDA) return (size_t)192 << 10;
    const int cc = alloy_device_compute_capability(dev);
    if (cc >= 90) return (size_t)220 << 10;
    if (cc == 80 || cc == 87) return (size_t)160 << 10;
    if (cc >= 75) return (size_t)60 << 10;
    return (size_t)44 << 10;
}

/* lu_factor_blocked keeps the matrix in threadgroup memory up to about 110
 * KB (float32 n <= 167, float64 n <= 118 on Hopper): two matrices per SM,
 * whose barriers overlap; a larger matrix works in device memory with about
 * 67 KB (float32 n = 256) of staging, three per SM. */
static size_t blocked_smem_max(alloy_device *dev) {
    const size_t b = smem_budget(dev), cap = (size_t)110 << 10;
    return b < cap ? b : cap;
}

static alloy_status apply(const char *file, alloy_launch *l, int nin, alloy_array **ins, int nout,
                          alloy_stream *stream) {
    alloy_kernel *k = NULL;
    alloy_status st = alloy_catalog_kernel(file, &k);
    alloy_array *res[4] = {NULL, NULL, NULL, NULL};
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, nin, ins, l, stream, res);
    for (int i = 0; i < nout; i++) alloy_array_free(res[i]);
    return st;
}

static alloy_status set_ints(alloy_launch *l, const char *const *names, const int64_t *values, int count,
                             alloy_dtype dt) {
    alloy_status st = ALLOY_OK;
    for (int i = 0; i < count && st == ALLOY_OK; i++) st = alloy_launch_set_constant_int(l, names[i], dt, values[i]);
    return st;
}

static alloy_status grid_check(const char *fn, int64_t groups, int64_t threads) {
    if (groups > (int64_t)(UINT32_MAX / 2) / threads)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: %lld matrices are too many for one launch (split the batch)",
                           fn, (long long)groups);
    return ALLOY_OK;
}

alloy_status alloy_lu_run_factor(const alloy_lu_square *s, alloy_lu_path path, alloy_array *a,
                                 alloy_array *lu, alloy_array *ipiv, alloy_array *info,
                                 alloy_stream *stream) {
    if (s->batch == 0) return ALLOY_OK;
    const int cpu = alloy_device_backend(s->dev) == ALLOY_BACKEND_CPU;
    const int64_t n = s->n, es = (int64_t)alloy_dtype_size(s->dt);
    const int64_t ld_smem = n | 1;
    /* lu_factor_blocked in device memory: the panel, U's block row, the row map */
    const size_t blocked_dev_bytes = (size_t)((n * 33 + 32 * n) * es + 4 * n);
    if (path == ALLOY_LU_FUSED) path = ALLOY_LU_WARP;
    if (path == ALLOY_LU_AUTO) {
        if (cpu) path = ALLOY_LU_SERIAL;
        else if (n <= 32) path = ALLOY_LU_WARP;
        else if ((size_t)(n * ld_smem * es) <= blocked_smem_max(s->dev)) path = ALLOY_LU_BLOCKED_SMEM;
        else if (blocked_dev_bytes <= smem_budget(s->dev)) path = ALLOY_LU_BLOCKED_DEVICE;
        else path = ALLOY_LU_TG_DEVICE;
    }
    if (n == 0) path = ALLOY_LU_SERIAL; /* writes info = 0 */
    if (path == ALLOY_LU_WARP && n > 32) path = ALLOY_LU_TG_SMEM;

    alloy_launch *l = NULL;
    alloy_status st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, lu);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, ipiv);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, info);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", s->dt);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT32, n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "batch", ALLOY_INT64, s->batch);
    const char *file = SERIAL_FILE;
    if (path == ALLOY_LU_SERIAL) {
        const uint32_t tg = cpu ? 1 : 64;
        if (st == ALLOY_OK) st = grid_check("alloy_lu_factor", s->batch, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)s->batch, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, tg, 1, 1);
    } else if (path == ALLOY_LU_WARP) {
        const int64_t w = n <= 8 ? 8 : n <= 16 ? 16 : 32;
        file = WARP_FILE;
        if (st == ALLOY_OK) st = grid_check("alloy_lu_factor", s->batch, w);
        const int64_t threads = (s->batch * w + 127) / 128 * 128;
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "W", w);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)threads, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 128, 1, 1);
    } else if (path == ALLOY_LU_BLOCKED_SMEM || path == ALLOY_LU_BLOCKED_DEVICE) {
        const int smem = path == ALLOY_LU_BLOCKED_SMEM;
        const int64_t nt = n <= 64 ? 128 : 256;
        file = BLOCKED_FILE;
        if (st == ALLOY_OK) st = grid_check("alloy_lu_factor", s->batch, nt);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "SMEM", smem);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "ld", ALLOY_INT32, smem ? ld_smem : n);
        if (st == ALLOY_OK)
            st = alloy_launch_set_threadgroup_memory(l, smem ? (size_t)(n * ld_smem * es) : blocked_dev_bytes);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(s->batch * nt), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)nt, 1, 1);
    } else {
        const int smem = path == ALLOY_LU_TG_SMEM;
        const int64_t nt = n <= 128 ? 256 : 512;
        file = TG_FILE;
        if (st == ALLOY_OK) st = grid_check("alloy_lu_factor", s->batch, nt);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "SMEM", smem);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "ld", ALLOY_INT32, smem ? ld_smem : n);
        if (st == ALLOY_OK && smem) st = alloy_launch_set_threadgroup_memory(l, (size_t)(n * ld_smem * es));
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(s->batch * nt), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)nt, 1, 1);
    }
    alloy_array *ins[1] = {a};
    if (st == ALLOY_OK) st = apply(file, l, 1, ins, 3, stream);
    alloy_launch_free(l);
    return st;
}

alloy_status alloy_lu_run_solve(const alloy_lu_square *s, alloy_lu_path path, int64_t nrhs,
                                alloy_array *lu, alloy_array *ipiv, alloy_array *b, alloy_array *x,
                                int transpose, int ident, alloy_stream *stream) {
    if (s->batch == 0 || s->n == 0 || nrhs == 0) return ALLOY_OK;
    const int cpu = alloy_device_backend(s->dev) == ALLOY_BACKEND_CPU;
    const int64_t n = s->n, es = (int64_t)alloy_dtype_size(s->dt);
    const int64_t ld_smem = n | 1;
    if (nrhs > INT32_MAX)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "alloy_lu_solve: %lld right-hand sides are too many",
                           (long long)nrhs);
    /* lu_solve_blocked (either blocked path names it): inverses and many
     * right-hand sides, 32 per threadgroup, not transposed */
    const size_t blocked_bytes = (size_t)(2 * n * 33 * es + 8 * n);
    const int blocked_fits = !transpose && blocked_bytes <= smem_budget(s->dev);
    if (path == ALLOY_LU_FUSED) path = ALLOY_LU_WARP;
    if (path == ALLOY_LU_BLOCKED_SMEM || path == ALLOY_LU_BLOCKED_DEVICE)
        path = blocked_fits ? ALLOY_LU_BLOCKED_DEVICE : ALLOY_LU_WARP;
    if (path == ALLOY_LU_AUTO && !cpu && blocked_fits && (ident || nrhs >= 16)) path = ALLOY_LU_BLOCKED_DEVICE;
    /* the factor-only path solves with the GPU kernel, as the factor's device */
    if (path == ALLOY_LU_AUTO || path == ALLOY_LU_WARP) {
        if (cpu && path == ALLOY_LU_AUTO) path = ALLOY_LU_SERIAL;
        else if ((size_t)(n * ld_smem * es + 8 * n) <= smem_budget(s->dev)) path = ALLOY_LU_TG_SMEM;
        else path = ALLOY_LU_TG_DEVICE;
    }
    alloy_launch *l = NULL;
    alloy_status st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, x);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", s->dt);
    if (st == ALLOY_OK && path != ALLOY_LU_BLOCKED_DEVICE)
        st = alloy_launch_add_template_bool(l, "TRANS", transpose != 0);
    if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "IDENT", ident != 0);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT32, n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "nrhs", ALLOY_INT32, nrhs);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "batch", ALLOY_INT64, s->batch);
    const char *file = SOLVE_SERIAL_FILE;
    if (path == ALLOY_LU_SERIAL) {
        if (st == ALLOY_OK) st = grid_check("alloy_lu_solve", s->batch, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)s->batch, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, cpu ? 1 : 64, 1, 1);
    } else if (path == ALLOY_LU_BLOCKED_DEVICE) {
        const int64_t tiles = (nrhs + 31) / 32, nt = n <= 64 ? 128 : 256;
        file = SOLVE_BLOCKED_FILE;
        if (st == ALLOY_OK) st = grid_check("alloy_lu_solve", s->batch * tiles, nt);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "tiles", ALLOY_INT32, tiles);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, blocked_bytes);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(s->batch * tiles * nt), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)nt, 1, 1);
    } else {
        const int smem = path == ALLOY_LU_TG_SMEM;
        /* up to 8 right-hand sides per threadgroup, one simdgroup each (at
         * most 4 simdgroups: a column per simdgroup at a time) */
        const int64_t cols = nrhs < 8 ? nrhs : 8, warps = cols < 4 ? cols : 4, nt = 32 * warps;
        const int64_t tiles = (nrhs + cols - 1) / cols;
        const int64_t q = (n + 31) / 32;
        const int64_t ints[3] = {smem ? ld_smem : n, cols, tiles};
        const char *names[3] = {"ld", "cols", "tiles"};
        file = SOLVE_FILE;
        if (st == ALLOY_OK) st = grid_check("alloy_lu_solve", s->batch * tiles, nt);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "Q", q);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "SMEM", smem);
        if (st == ALLOY_OK) st = set_ints(l, names, ints, 3, ALLOY_INT32);
        if (st == ALLOY_OK)
            st = alloy_launch_set_threadgroup_memory(l, (size_t)((smem ? n * ld_smem * es : 0) + 8 * n));
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(s->batch * tiles * nt), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)nt, 1, 1);
    }
    alloy_array *ins[3] = {lu, ipiv, b};
    if (st == ALLOY_OK) st = apply(file, l, 3, ins, 1, stream);
    alloy_launch_free(l);
    return st;
}

/* lu_solve_warp: s's batch (1 <= n <= 32) with nrhs (1 ..
 * ALLOY_LU_FUSED_MAX_RHS) right-hand sides factored and solved in one
 * launch: a, b -> x (may be b), info. R, the right-hand sides each lane
 * holds, is the smallest power of two >= nrhs (six variants per W and
 * dtype at most, compiled when first used). */
static alloy_status run_solve_fused(const alloy_lu_square *s, int64_t nrhs, alloy_array *a, alloy_array *b,
                                    alloy_array *x, alloy_array *info, alloy_stream *stream) {
    if (s->batch == 0) return ALLOY_OK;
    const int64_t n = s->n, w = n <= 8 ? 8 : n <= 16 ? 16 : 32;
    int64_t r = 1;
    while (r < nrhs) r *= 2;
    alloy_launch *l = NULL;
    alloy_status st = grid_check("alloy_solve", s->batch, w);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, x);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, info);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", s->dt);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "W", w);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "R", r);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT32, n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "nrhs", ALLOY_INT32, nrhs);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "batch", ALLOY_INT64, s->batch);
    const int64_t threads = (s->batch * w + 127) / 128 * 128;
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)threads, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 128, 1, 1);
    alloy_array *ins[2] = {a, b};
    if (st == ALLOY_OK) st = apply(FUSED_FILE, l, 2, ins, 2, stream);
    alloy_launch_free(l);
    return st;
}

/* ---- alloy_lu_factor ------------------------------------------------------- */

alloy_status alloy_lu_factor_path(alloy_array *a, alloy_lu_path path, alloy_stream *stream,
                                  alloy_array **lu, alloy_array **pivots, alloy_array **info) {
    static const char fn[] = "alloy_lu_factor";
    if (!lu)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: lu is NULL (pass the address of an alloy_array *: NULL for a new array, a "
                           "itself to factor in place, or an array of a's shape)",
                           fn);
    if (!pivots)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: pivots is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_lu_square s;
    alloy_status st = alloy_lu_check_square(fn, "a", a, stream, &s);
    if (st != ALLOY_OK) return st;
    if (*lu == a && !alloy_array_is_row_contiguous(a))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: lu is a (in place), but a is not row-contiguous; factor a copy instead", fn);
    alloy_array *L = NULL, *P = NULL, *I = NULL;
    int newL = 0, newP = 0, newI = 0;
    st = alloy_lu_prepare_out(fn, "lu", lu, s.dev, s.dt, s.nd, s.shape, &L, &newL);
    if (st == ALLOY_OK)
        st = alloy_lu_prepare_out(fn, "pivots", pivots, s.dev, ALLOY_INT32, s.nd - 1, s.shape, &P, &newP);
    if (st == ALLOY_OK) {
        alloy_array *none = NULL;
        st = alloy_lu_prepare_out(fn, "info", info ? info : &none, s.dev, ALLOY_INT32, s.nd - 2, s.shape, &I,
                                  &newI);
    }
    if (st == ALLOY_OK) st = alloy_lu_run_factor(&s, path, a, L, P, I, stream);
    if (st != ALLOY_OK) {
        if (newL) alloy_array_free(L);
        if (newP) alloy_array_free(P);
        if (newI) alloy_array_free(I);
        return st;
    }
    if (newL) *lu = L;
    if (newP) *pivots = P;
    if (info && newI) *info = I;
    else if (newI) alloy_array_free(I);
    return ALLOY_OK;
}

alloy_status alloy_lu_factor(alloy_array *a, alloy_stream *stream, alloy_array **lu, alloy_array **pivots,
                             alloy_array **info) {
    return alloy_lu_factor_path(a, ALLOY_LU_AUTO, stream, lu, pivots, info);
}

/* ---- right-hand sides ------------------------------------------------------- */

/* b against the square operand s: (..., n, k) with s's leading dimensions,
 * or (..., n) (one vector per matrix). */
static alloy_status check_rhs(const char *fn, const char *aname, const alloy_lu_square *s, alloy_array *b,
                              int64_t *nrhs) {
    if (!b) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b is NULL", fn);
    if (alloy_array_device(b) != s->dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b lives on %s but %s on %s", fn,
                           alloy_device_name(alloy_array_device(b)), aname, alloy_device_name(s->dev));
    if (alloy_array_dtype(b) != s->dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b is %s but %s is %s: give both the same dtype", fn,
                           alloy_dtype_name(alloy_array_dtype(b)), aname, alloy_dtype_name(s->dt));
    const int nd = alloy_array_ndim(b);
    const int64_t *sh = alloy_array_shape(b);
    int ok = nd == s->nd || nd == s->nd - 1;
    for (int d = 0; ok && d < s->nd - 2; d++) ok = sh[d] == s->shape[d];
    if (ok) ok = sh[s->nd - 2] == s->n;
    if (!ok) {
        char as[160], bs[160];
        shape_text(as, sizeof as, s->nd, s->shape);
        shape_text(bs, sizeof bs, nd, sh);
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: b has shape %s but %s has shape %s: b must be (..., %lld, k) or (..., %lld) "
                           "with the same leading dimensions as %s (they do not broadcast)",
                           fn, bs, aname, as, (long long)s->n, (long long)s->n, aname);
    }
    *nrhs = nd == s->nd ? sh[nd - 1] : 1;
    return ALLOY_OK;
}

alloy_status alloy_lu_solve_path(alloy_array *lu, alloy_array *pivots, alloy_array *b, int transpose,
                                 alloy_lu_path path, alloy_stream *stream, alloy_array **x) {
    static const char fn[] = "alloy_lu_solve";
    if (!x)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: x is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_lu_square s;
    alloy_status st = alloy_lu_check_square(fn, "lu", lu, stream, &s);
    if (st != ALLOY_OK) return st;
    if (!pivots) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: pivots is NULL", fn);
    if (alloy_array_device(pivots) != s.dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: pivots lives on %s but lu on %s", fn,
                           alloy_device_name(alloy_array_device(pivots)), alloy_device_name(s.dev));
    if (alloy_array_dtype(pivots) != ALLOY_INT32)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: pivots is %s; it must be int32 (LAPACK's ipiv)", fn,
                           alloy_dtype_name(alloy_array_dtype(pivots)));
    int ok = alloy_array_ndim(pivots) == s.nd - 1;
    for (int d = 0; ok && d < s.nd - 1; d++) ok = alloy_array_shape(pivots)[d] == s.shape[d];
    if (!ok) {
        char ps[160], want[160];
        shape_text(ps, sizeof ps, alloy_array_ndim(pivots), alloy_array_shape(pivots));
        shape_text(want, sizeof want, s.nd - 1, s.shape);
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: pivots has shape %s but must have shape %s", fn, ps,
                           want);
    }
    int64_t nrhs = 0;
    st = check_rhs(fn, "lu", &s, b, &nrhs);
    if (st != ALLOY_OK) return st;
    if (*x == b && !alloy_array_is_row_contiguous(b))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: x is b (in place), but b is not row-contiguous", fn);
    alloy_array *X = NULL;
    int newX = 0;
    st = alloy_lu_prepare_out(fn, "x", x, s.dev, s.dt, alloy_array_ndim(b), alloy_array_shape(b), &X, &newX);
    if (st == ALLOY_OK) st = alloy_lu_run_solve(&s, path, nrhs, lu, pivots, b, X, transpose, 0, stream);
    if (st != ALLOY_OK) {
        if (newX) alloy_array_free(X);
        return st;
    }
    if (newX) *x = X;
    return ALLOY_OK;
}

alloy_status alloy_lu_solve(alloy_array *lu, alloy_array *pivots, alloy_array *b, int transpose,
                            alloy_stream *stream, alloy_array **x) {
    return alloy_lu_solve_path(lu, pivots, b, transpose, ALLOY_LU_AUTO, stream, x);
}

/* ---- alloy_solve, alloy_inv ------------------------------------------------- */

/* The optional info output of alloy_solve / alloy_inv: the caller's array,
 * or scratch. */
static alloy_status info_out(const char *fn, alloy_array **info, const alloy_lu_square *s, alloy_array *scratch,
                             alloy_array **use, int *created) {
    *created = 0;
    if (!info) {
        *use = scratch;
        return ALLOY_OK;
    }
    return alloy_lu_prepare_out(fn, "info", info, s->dev, ALLOY_INT32, s->nd - 2, s->shape, use, created);
}

alloy_status alloy_solve_path(alloy_array *a, alloy_array *b, alloy_lu_path path, alloy_stream *stream,
                              alloy_array **x, alloy_array **info) {
    static const char fn[] = "alloy_solve";
    if (!x)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: x is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_lu_square s;
    alloy_status st = alloy_lu_check_square(fn, "a", a, stream, &s);
    if (st != ALLOY_OK) return st;
    int64_t nrhs = 0;
    st = check_rhs(fn, "a", &s, b, &nrhs);
    if (st != ALLOY_OK) return st;
    if (*x == b && !alloy_array_is_row_contiguous(b))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: x is b (in place), but b is not row-contiguous", fn);
    /* one kernel for small matrices on a GPU (the CPU's serial kernels gain
     * nothing from fusing); the rest factor into scratch, then solve */
    const int cpu = alloy_device_backend(s.dev) == ALLOY_BACKEND_CPU;
    const int fits = s.n >= 1 && s.n <= 32 && nrhs >= 1 && nrhs <= ALLOY_LU_FUSED_MAX_RHS;
    const int fused = fits && (path == ALLOY_LU_FUSED || (path == ALLOY_LU_AUTO && !cpu));
    if (path == ALLOY_LU_FUSED) path = ALLOY_LU_WARP;
    alloy_array *X = NULL, *I = NULL, *lu = NULL, *ipiv = NULL, *sinfo = NULL;
    int newX = 0, newI = 0;
    st = alloy_lu_prepare_out(fn, "x", x, s.dev, s.dt, alloy_array_ndim(b), alloy_array_shape(b), &X, &newX);
    if (fused) {
        if (st == ALLOY_OK && !info) st = alloy_array_new(s.dev, ALLOY_INT32, s.nd - 2, s.shape, &sinfo);
        if (st == ALLOY_OK) st = info_out(fn, info, &s, sinfo, &I, &newI);
        if (st == ALLOY_OK) st = run_solve_fused(&s, nrhs, a, b, X, I, stream);
    } else {
        if (st == ALLOY_OK) st = alloy_lu_scratch(&s, &lu, &ipiv, &sinfo);
        if (st == ALLOY_OK) st = info_out(fn, info, &s, sinfo, &I, &newI);
        if (st == ALLOY_OK) st = alloy_lu_run_factor(&s, path, a, lu, ipiv, I, stream);
        if (st == ALLOY_OK) st = alloy_lu_run_solve(&s, path, nrhs, lu, ipiv, b, X, 0, 0, stream);
    }
    alloy_array_free(lu);
    alloy_array_free(ipiv);
    alloy_array_free(sinfo);
    if (st != ALLOY_OK) {
        if (newX) alloy_array_free(X);
        if (newI) alloy_array_free(I);
        return st;
    }
    if (newX) *x = X;
    if (newI) *info = I;
    return ALLOY_OK;
}

alloy_status alloy_solve(alloy_array *a, alloy_array *b, alloy_stream *stream, alloy_array **x,
                         alloy_array **info) {
    return alloy_solve_path(a, b, ALLOY_LU_AUTO, stream, x, info);
}

alloy_status alloy_inv_path(alloy_array *a, alloy_lu_path path, alloy_stream *stream, alloy_array **inverse,
                            alloy_array **info) {
    static const char fn[] = "alloy_inv";
    if (!inverse)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: inverse is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_lu_square s;
    alloy_status st = alloy_lu_check_square(fn, "a", a, stream, &s);
    if (st != ALLOY_OK) return st;
    alloy_array *X = NULL, *I = NULL, *lu = NULL, *ipiv = NULL, *sinfo = NULL;
    int newX = 0, newI = 0;
    st = alloy_lu_prepare_out(fn, "inverse", inverse, s.dev, s.dt, s.nd, s.shape, &X, &newX);
    if (st == ALLOY_OK) st = alloy_lu_scratch(&s, &lu, &ipiv, &sinfo);
    if (st == ALLOY_OK) st = info_out(fn, info, &s, sinfo, &I, &newI);
    if (st == ALLOY_OK) st = alloy_lu_run_factor(&s, path, a, lu, ipiv, I, stream);
    if (st == ALLOY_OK) st = alloy_lu_run_solve(&s, path, s.n, lu, ipiv, lu, X, 0, 1, stream);
    alloy_array_free(lu);
    alloy_array_free(ipiv);
    alloy_array_free(sinfo);
    if (st != ALLOY_OK) {
        if (newX) alloy_array_free(X);
        if (newI) alloy_array_free(I);
        return st;
    }
    if (newX) *inverse = X;
    if (newI) *info = I;
    return ALLOY_OK;
}

alloy_status alloy_inv(alloy_array *a, alloy_stream *stream, alloy_array **inverse, alloy_array **info) {
    return alloy_inv_path(a, ALLOY_LU_AUTO, stream, inverse, info);
}
