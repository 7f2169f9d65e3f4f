/* triangular.c — alloy_solve_triangular (alloy/linalg.h): batched triangular
 * solves (LAPACK trsm, scipy.linalg.solve_triangular), and the launcher it
 * shares with alloy_cholesky_solve (triangular_internal.h).
 *
 * Every case is reduced to forward or backward substitution M X = B on the
 * catalog's trsm kernel: a transpose swaps a's strides, a right-side solve
 * X op(a) = b is the left-side solve op(a)^T X^T = b^T (b's and X's strides
 * swapped), and an upper-triangular M runs the substitution backwards. The
 * leading dimensions broadcast (NumPy); those that do not collapse into one
 * batch stride are walked with one launch per outer index. Nothing is copied
 * and nothing is allocated on the device when the caller gives `out`. */
#include <stdint.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "batch_layout.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "triangular_internal.h"

static const char TRSM_FILE[] = "src/ops/linalg/kernels/trsm.metal";

/* At most this much dynamic threadgroup memory per group on CUDA (the
 * column block of 32 right-hand sides: n * 32 elements). */
#define TRSM_MAX_SMEM ((size_t)192 * 1024)

void alloy_triangular_options_init(alloy_triangular_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

alloy_status alloy_solve_triangular(alloy_array *a, alloy_array *b, const alloy_triangular_options *options,
                                    alloy_stream *stream, alloy_array **out) {
    alloy_triangular_options o;
    if (options) o = *options;
    else alloy_triangular_options_init(&o);
    const alloy_tri_step step = {o.lower != 0, o.transpose != 0, o.unit_diagonal != 0};
    return alloy_tri_solve("alloy_solve_triangular", "a", a, b, o.right != 0, 1, &step, stream, out);
}

static int float_dtype(alloy_dtype dt) { return dt == ALLOY_FLOAT32 || dt == ALLOY_FLOAT64; }

alloy_status alloy_tri_solve(const char *fn, const char *aname, alloy_array *a, alloy_array *b, int right,
                             int nsteps, const alloy_tri_step *steps, alloy_stream *stream, alloy_array **out) {
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, aname);
    if (!b) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b is NULL", fn);
    if (!out)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: out is NULL (pass the address of an alloy_array *)",
                           fn);
    if (nsteps < 1 || nsteps > 2 || (nsteps == 2 && (right || steps[1].unit)))
        return alloy_error(ALLOY_ERROR_INTERNAL, "%s: unsupported sequence of triangular solves", fn);
    alloy_device *dev = alloy_array_device(a);
    if (alloy_array_device(b) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s lives on %s but b on %s", fn, aname,
                           alloy_device_name(dev), alloy_device_name(alloy_array_device(b)));
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but %s and b live on %s", fn,
                           alloy_device_name(alloy_stream_device(stream)), aname, alloy_device_name(dev));
    const alloy_dtype dt = alloy_array_dtype(a);
    if (!float_dtype(dt))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %s; it takes float32 or float64", fn, aname,
                           alloy_dtype_name(dt));
    if (alloy_array_dtype(b) != dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %s but b is %s: give both the same dtype", fn,
                           aname, alloy_dtype_name(dt), alloy_dtype_name(alloy_array_dtype(b)));
    const int nda = alloy_array_ndim(a), ndb = alloy_array_ndim(b);
    const int64_t *ash = alloy_array_shape(a), *ast = alloy_array_strides(a);
    const int64_t *bsh = alloy_array_shape(b), *bst = alloy_array_strides(b);
    if (nda < 2)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %d-D; it must be (..., n, n)", fn, aname, nda);
    const int64_t n = ash[nda - 1];
    if (ash[nda - 2] != n)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is not square: its matrices are %lld x %lld", fn,
                           aname, (long long)ash[nda - 2], (long long)n);
    if (ndb < 1)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b is 0-d; it must be (n,) or (..., %s)", fn,
                           right ? "k, n" : "n, k");
    const int vec = ndb == 1;
    int64_t k, brs, bcs; /* b's rows and columns as the left-side solve sees them */
    if (vec) {
        if (bsh[0] != n)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b has %lld elements but %s is %lld x %lld", fn,
                               (long long)bsh[0], aname, (long long)n, (long long)n);
        k = 1;
        brs = bst[0];
        bcs = 0;
    } else if (!right) {
        if (bsh[ndb - 2] != n)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: b has %lld rows but %s is %lld x %lld", fn,
                               (long long)bsh[ndb - 2], aname, (long long)n, (long long)n);
        k = bsh[ndb - 1];
        brs = bst[ndb - 2];
        bcs = bst[ndb - 1];
    } else {
        if (bsh[ndb - 1] != n)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "%s: b has %lld columns but %s is %lld x %lld (a right-side solve X a = b)", fn,
                               (long long)bsh[ndb - 1], aname, (long long)n, (long long)n);
        k = bsh[ndb - 2];
        brs = bst[ndb - 1];
        bcs = bst[ndb - 2];
    }
    int nb = 0;
    int64_t shape[ALLOY_MAX_NDIM], s[3][ALLOY_MAX_NDIM];
    alloy_status st = alloy_batch_broadcast(fn, aname, nda - 2, ash, ast, "b", vec ? 0 : ndb - 2, bsh, bst, &nb,
                                            shape, s[0], s[1]);
    if (st != ALLOY_OK) return st;
    int64_t full[ALLOY_MAX_NDIM];
    int rnd = nb;
    memcpy(full, shape, sizeof(int64_t) * (size_t)nb);
    if (vec) full[rnd++] = n;
    else if (!right) {
        full[rnd++] = n;
        full[rnd++] = k;
    } else {
        full[rnd++] = k;
        full[rnd++] = n;
    }
    alloy_array *x = *out;
    if (x) {
        if (alloy_array_device(x) != dev)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: out lives on %s but %s on %s", fn,
                               alloy_device_name(alloy_array_device(x)), aname, alloy_device_name(dev));
        int same = alloy_array_ndim(x) == rnd;
        for (int d = 0; same && d < rnd; d++) same = alloy_array_shape(x)[d] == full[d];
        if (!same)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "%s: out has the wrong shape (the result is %d-D: the broadcast batch, then %s)", fn,
                               rnd, vec ? "n" : right ? "k x n" : "n x k");
        if (alloy_array_dtype(x) != dt)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: out is %s but the result is %s", fn,
                               alloy_dtype_name(alloy_array_dtype(x)), alloy_dtype_name(dt));
        if (!alloy_array_is_row_contiguous(x))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: out must be row-contiguous", fn);
    } else {
        st = alloy_array_new(dev, dt, rnd, full, &x);
        if (st != ALLOY_OK) return st;
    }
    int64_t total = 1;
    for (int d = 0; d < nb; d++) total *= shape[d];
    const size_t esize = alloy_dtype_size(dt);
    if (total == 0 || n == 0 || k == 0) {
        if (!*out) *out = x;
        return ALLOY_OK;
    }
    if (alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && (size_t)n * 32 * esize > TRSM_MAX_SMEM) {
        if (!*out) alloy_array_free(x);
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: n = %lld is more than this GPU path takes (%lld for %s)",
                           fn, (long long)n, (long long)(TRSM_MAX_SMEM / (32 * esize)), alloy_dtype_name(dt));
    }
    /* X's strides as the left-side solve sees it */
    int64_t xrs, xcs;
    if (vec) {
        xrs = 1;
        xcs = 0;
    } else if (!right) {
        xrs = k;
        xcs = 1;
    } else {
        xrs = 1;
        xcs = n;
    }
    alloy_batch_contiguous_strides(nb, shape, vec ? n : n * k, s[2]);
    alloy_batch_layout lay;
    alloy_batch_layout_init(&lay, nb, shape, 3, (const int64_t(*)[ALLOY_MAX_NDIM])s);

    const int64_t ars = ast[nda - 2], acs = ast[nda - 1];
    int64_t mr[2] = {0, 0}, mc[2] = {0, 0};
    int rev[2] = {0, 0};
    for (int i = 0; i < nsteps; i++) {
        const int tr = steps[i].transpose ^ right; /* a right-side solve uses op(a)^T */
        mr[i] = tr ? acs : ars;
        mc[i] = tr ? ars : acs;
        rev[i] = !(steps[i].lower ^ tr); /* op(a) upper: backward substitution */
    }
    const int64_t chunks = (k + 31) / 32;
    alloy_kernel *kern = NULL;
    alloy_launch *l = NULL;
    st = alloy_catalog_kernel(TRSM_FILE, &kern);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, x);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", dt);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 32, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, (size_t)n * 32 * esize);
    const struct {
        const char *name;
        int64_t v;
    } ints[] = {{"n", n},         {"k", k},         {"chunks", chunks}, {"sa_b", lay.inner_stride[0]},
                {"sb_b", lay.inner_stride[1]},      {"sb_r", brs},      {"sb_c", bcs},
                {"sx_b", lay.inner_stride[2]},      {"sx_r", xrs},      {"sx_c", xcs},
                {"m1_r", mr[0]},  {"m1_c", mc[0]},  {"m2_r", mr[1]},    {"m2_c", mc[1]}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && st == ALLOY_OK; i++)
        st = alloy_launch_set_constant_int(l, ints[i].name, ALLOY_INT64, ints[i].v);
    const struct {
        const char *name;
        int v;
    } flags[] = {{"rev1", rev[0]}, {"rev2", rev[1]}, {"nsolve", nsteps}, {"unit", steps[0].unit}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0] && st == ALLOY_OK; i++)
        st = alloy_launch_set_constant_int(l, flags[i].name, ALLOY_INT32, flags[i].v);

    /* at most 2^31 threads per launch */
    const int64_t per_launch = ((int64_t)1 << 31) / (chunks * 32);
    alloy_array *ins[2] = {a, b};
    for (int64_t o = 0; o < lay.outer && st == ALLOY_OK; o++) {
        int64_t off[3];
        alloy_batch_layout_offsets(&lay, o, off);
        for (int64_t start = 0; start < lay.inner && st == ALLOY_OK; start += per_launch) {
            const int64_t cnt = lay.inner - start < per_launch ? lay.inner - start : per_launch;
            st = alloy_launch_set_constant_int(l, "a_off", ALLOY_INT64, off[0] + start * lay.inner_stride[0]);
            if (st == ALLOY_OK)
                st = alloy_launch_set_constant_int(l, "b_off", ALLOY_INT64, off[1] + start * lay.inner_stride[1]);
            if (st == ALLOY_OK)
                st = alloy_launch_set_constant_int(l, "x_off", ALLOY_INT64, off[2] + start * lay.inner_stride[2]);
            if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(cnt * chunks * 32), 1, 1);
            alloy_array *res = NULL;
            if (st == ALLOY_OK) st = alloy_kernel_apply(kern, 2, ins, l, stream, &res);
            alloy_array_free(res);
        }
    }
    alloy_launch_free(l);
    if (st != ALLOY_OK) {
        if (!*out) alloy_array_free(x);
        return st;
    }
    if (!*out) *out = x;
    return ALLOY_OK;
}
