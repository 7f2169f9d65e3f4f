/* svd.c — alloy_svd (alloy/linalg.h): the singular value decomposition of
 * a batch of matrices (NumPy's linalg.svd) by one-sided Jacobi.
 *
 * Validates the arguments (errors name the argument), reduces the leading
 * dimensions to launches over one strided batch (a is read in place with
 * any strides), picks a kernel per device and launches it on the caller's
 * stream; nothing waits for the device. Kernels (each file says what it
 * does): on the CPU svd_cpu (one thread per matrix, cyclic one-sided
 * Jacobi); on a GPU svd_tg (one threadgroup per matrix, round-robin
 * parallel pairs, one SIMD group per pair, the columns and V in threadgroup
 * memory while they fit, else in device scratch; up to 32 x 32 one SIMD
 * group whose lanes hold the columns in registers during the sweeps; for
 * float32 up to 128 x 128 the COLS path: one or two threads per column of G
 * and row of V, in registers, one barrier per step). All work on the tall one
 * of a and a^T. Sizes and strides are launch constants, so a new shape
 * never recompiles a kernel. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "batch_layout.h"
#include "matrix_operand.h"
#include "core/error.h"
#include "lu_internal.h"
#include "ops/catalog.h"
#include "svd_internal.h"

static const char CPU_FILE[] = "src/ops/linalg/kernels/svd_cpu.metal";
static const char TG_FILE[] = "src/ops/linalg/kernels/svd_tg.metal";

/* float64 matrices of 128 and more with condition 1e12 need more than 30 sweeps
 * on the threadgroup paths for some inputs (the relative gamma of the tiny
 * columns sits near the stopping threshold); a converging matrix stops early,
 * so the larger limit costs only the ones that would fail */
#define SVD_DEFAULT_SWEEPS 60
#define SVD_GPU_MAX 256 /* svd_tg's static arrays: 256 rows of the tall matrix */
#define SVD_COLS_MR 64  /* svd_tg's ALLOY_SVD_COLS_MR: the rows of G a thread of the COLS path holds */

void alloy_svd_options_init(alloy_svd_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->compute_uv = 1;
    o->full_matrices = 1;
}

alloy_status alloy_svd(alloy_array *a, const alloy_svd_options *options, alloy_stream *stream, alloy_array **u,
                       alloy_array **s, alloy_array **vh, alloy_array **info) {
    return alloy_svd_with_path(a, options, ALLOY_SVD_AUTO, stream, u, s, vh, info);
}

/* Threadgroup memory a kernel may hold for its matrices on dev (as lu.c). */
static size_t smem_budget(alloy_device *dev) {
    if (alloy_device_backend(dev) != ALLOY_BACKEND_CUDA) return (size_t)192 << 10;
    const int cc = alloy_device_compute_capability(dev);
    if (cc >= 90) return (size_t)200 << 10;
    if (cc == 80 || cc == 87) return (size_t)140 << 10;
    if (cc >= 75) return (size_t)48 << 10;
    return (size_t)32 << 10;
}

/* The COLS path's shape for an M x N G (M >= N): NP, N rounded up to 32, 64
 * or 128, and H threads per column (2 where a column has more than MR rows
 * or V's row is 128 long). */
static int64_t cols_np(int64_t N) { return N <= 32 ? 32 : N <= 64 ? 64 : 128; }
static int64_t cols_h(int64_t M, int64_t N) { return M > SVD_COLS_MR || cols_np(N) > 64 ? 2 : 1; }

/* Its dynamic threadgroup memory: the exchange buffers over G and V (2 NP H
 * parts of SVD_COLS_MR + 16 / es elements), then NP norms for each, NP / 2
 * (c, s') pairs for each, and the sweep maxima. */
static int64_t cols_smem_bytes(int64_t M, int64_t N, int64_t es) {
    const int64_t np = cols_np(N);
    return (2 * np * cols_h(M, N) * (SVD_COLS_MR + 16 / es) + 4 * np + 8) * es;
}

int alloy_svd_cols_smem_fits(alloy_device *dev, int64_t m, int64_t n, alloy_dtype dt) {
    const int64_t M = m < n ? n : m, N = m < n ? m : n;
    return (size_t)cols_smem_bytes(M, N, (int64_t)alloy_dtype_size(dt)) <= smem_budget(dev);
}

alloy_status alloy_svd_with_path(alloy_array *a, const alloy_svd_options *options, alloy_svd_path path,
                                 alloy_stream *stream, alloy_array **u, alloy_array **s, alloy_array **vh,
                                 alloy_array **info) {
    static const char fn[] = "alloy_svd";
    alloy_svd_options o;
    if (options) o = *options;
    else alloy_svd_options_init(&o);
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: a is NULL", fn);
    if (!s)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: s is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    if (o.compute_uv && (!u || !vh))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: %s is NULL but options->compute_uv is set (pass the address of an alloy_array *, "
                           "or clear compute_uv)",
                           fn, !u ? "u" : "vh");
    if (o.max_sweeps < 0)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: options->max_sweeps is %d; it must be >= 0", fn,
                           o.max_sweeps);
    const int sweeps = o.max_sweeps ? o.max_sweeps : SVD_DEFAULT_SWEEPS;
    alloy_status chk = alloy_linalg_check_matrix(fn, a, stream);
    if (chk != ALLOY_OK) return chk;
    const int nd = alloy_array_ndim(a);
    const alloy_dtype dt = alloy_array_dtype(a);
    alloy_device *dev = alloy_array_device(a);
    const int64_t *sh = alloy_array_shape(a), *stv = alloy_array_strides(a);
    const int64_t m = sh[nd - 2], n = sh[nd - 1];
    if (m > INT32_MAX / 4 || n > INT32_MAX / 4)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: a is %lld x %lld, too large", fn, (long long)m,
                           (long long)n);
    const int64_t k = m < n ? m : n, M = m < n ? n : m, N = k;
    const int64_t ucols = o.full_matrices ? m : k, vrows = o.full_matrices ? n : k;
    const int nb = nd - 2;
    int64_t batch = 1;
    for (int d = 0; d < nb; d++) batch *= sh[d];
    const int cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    const int64_t es = (int64_t)alloy_dtype_size(dt);
    int64_t smem_bytes = (M * N + (o.compute_uv ? N * N : 0)) * es;
    /* COLS: NP H threads, H per column of G (H = 2 where a column has more
     * than MR rows or V's row is 128 long); the exchange buffers hold G and V
     * before and after the sweeps */
    const int64_t cnp = cols_np(N), ch = cols_h(M, N), cols_bytes = cols_smem_bytes(M, N, es);
    /* ALLOY_SVD_PATH=cols makes the COLS path the GPU choice wherever it
     * fits (also for M <= 32 and float64), for timing the paths against
     * each other */
    const char *env = getenv("ALLOY_SVD_PATH");
    const int want_cols = env && !strcmp(env, "cols");
    if (path == ALLOY_SVD_AUTO) {
        if (!cuda) path = ALLOY_SVD_CPU;
        else if (want_cols && M <= 2 * SVD_COLS_MR && (size_t)cols_bytes <= smem_budget(dev)) path = ALLOY_SVD_TG_COLS;
        else if (M <= 32) path = ALLOY_SVD_TG_REG;
        /* float64 would need twice the registers (spills) */
        else if (M <= 2 * SVD_COLS_MR && dt == ALLOY_FLOAT32 && (size_t)cols_bytes <= smem_budget(dev))
            path = ALLOY_SVD_TG_COLS;
        else if ((size_t)smem_bytes <= smem_budget(dev)) path = ALLOY_SVD_TG_SMEM;
        else path = ALLOY_SVD_TG_DEVICE;
    }
    if (path != ALLOY_SVD_CPU && path != ALLOY_SVD_TG_SMEM && path != ALLOY_SVD_TG_DEVICE && path != ALLOY_SVD_TG_REG &&
        path != ALLOY_SVD_TG_COLS)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: unknown kernel path %d", fn, (int)path);
    if (path == ALLOY_SVD_TG_REG && M > 32)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the register path takes m, n <= 32, not %lld x %lld",
                           fn, (long long)m, (long long)n);
    if (path == ALLOY_SVD_TG_COLS && M > 2 * SVD_COLS_MR)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the COLS path takes m, n <= %d, not %lld x %lld", fn,
                           2 * SVD_COLS_MR, (long long)m, (long long)n);
    if (path == ALLOY_SVD_TG_COLS) smem_bytes = cols_bytes;
    if (path != ALLOY_SVD_CPU && M > SVD_GPU_MAX)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "%s: a is %lld x %lld; the GPU kernel takes at most %d rows and columns", fn,
                           (long long)m, (long long)n, SVD_GPU_MAX);

    /* output shapes: the batch, then (k), (m, ucols), (vrows, n) */
    int64_t ss[ALLOY_MAX_NDIM], us[ALLOY_MAX_NDIM], vs[ALLOY_MAX_NDIM];
    for (int d = 0; d < nb; d++) ss[d] = us[d] = vs[d] = sh[d];
    ss[nb] = k;
    us[nb] = m;
    us[nb + 1] = ucols;
    vs[nb] = vrows;
    vs[nb + 1] = n;
    alloy_array *S = NULL, *U = NULL, *VH = NULL, *I = NULL, *work = NULL, *dummy[3] = {NULL, NULL, NULL};
    int newS = 0, newU = 0, newVH = 0, newI = 0;
    alloy_status st = alloy_lu_prepare_out(fn, "s", s, dev, dt, nb + 1, ss, &S, &newS);
    if (st == ALLOY_OK && o.compute_uv) st = alloy_lu_prepare_out(fn, "u", u, dev, dt, nd, us, &U, &newU);
    if (st == ALLOY_OK && o.compute_uv) st = alloy_lu_prepare_out(fn, "vh", vh, dev, dt, nd, vs, &VH, &newVH);
    if (st == ALLOY_OK) {
        alloy_array *none = NULL;
        st = alloy_lu_prepare_out(fn, "info", info ? info : &none, dev, ALLOY_INT32, nb, sh, &I, &newI);
    }
    const int64_t one = 1;
    int64_t per = 0;
    if (path == ALLOY_SVD_CPU) per = M * N + N * N + 2 * N + 3 * M;
    else if (path == ALLOY_SVD_TG_DEVICE) per = M * N + N * N;
    if (st == ALLOY_OK && per > 0 && batch > 0) {
        const int64_t cnt = per * batch;
        st = alloy_array_new(dev, dt, 1, &cnt, &work);
    }
    /* distinct one-element stand-ins for the outputs not used */
    for (int i = 0; i < 3 && st == ALLOY_OK; i++) st = alloy_array_new(dev, dt, 1, &one, &dummy[i]);

    if (st == ALLOY_OK && batch > 0) {
        int64_t bs[2][ALLOY_MAX_NDIM];
        for (int d = 0; d < nb; d++) bs[0][d] = stv[d];
        alloy_batch_contiguous_strides(nb, sh, 1, bs[1]);
        alloy_batch_layout lay;
        alloy_batch_layout_init(&lay, nb, sh, 2, (const int64_t(*)[ALLOY_MAX_NDIM])bs);
        const int tg = path != ALLOY_SVD_CPU;
        const int reg = path == ALLOY_SVD_TG_REG, cols = path == ALLOY_SVD_TG_COLS;
        const int smem = path == ALLOY_SVD_TG_SMEM || reg || cols;
        const uint32_t nt = !tg    ? 1
                            : reg  ? 32
                            : cols ? (uint32_t)(cnp * ch)
                                   : N <= 16 ? 64 : N <= 32 ? 128 : N <= 128 ? 256 : 512;
        alloy_kernel *kern = NULL;
        alloy_launch *ln = NULL;
        st = alloy_catalog_kernel(tg ? TG_FILE : CPU_FILE, &kern);
        if (st == ALLOY_OK) st = alloy_launch_new(&ln);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, S);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, U ? U : dummy[0]);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, VH ? VH : dummy[1]);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, I);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, work ? work : dummy[2]);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(ln, "T", dt);
        if (st == ALLOY_OK && tg) st = alloy_launch_add_template_bool(ln, "SMEM", smem);
        if (st == ALLOY_OK && tg) st = alloy_launch_add_template_bool(ln, "REG", reg);
        if (st == ALLOY_OK && tg) st = alloy_launch_add_template_bool(ln, "EIGH", 0);
        if (st == ALLOY_OK && tg) st = alloy_launch_add_template_int(ln, "COLS", cols ? cnp : 0);
        if (st == ALLOY_OK && tg) st = alloy_launch_add_template_int(ln, "CH", cols ? ch : 1);
        if (st == ALLOY_OK && smem)
            st = alloy_launch_set_threadgroup_memory(ln, smem_bytes > 0 ? (size_t)smem_bytes : 16);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(ln, nt, 1, 1);
        const struct {
            const char *name;
            alloy_dtype dt;
            int64_t v;
        } ints[] = {{"m", ALLOY_INT32, m},
                    {"n", ALLOY_INT32, n},
                    {"uv", ALLOY_INT32, o.compute_uv != 0},
                    {"ucols", ALLOY_INT32, ucols},
                    {"vrows", ALLOY_INT32, vrows},
                    {"max_sweeps", ALLOY_INT32, sweeps},
                    {"upper", ALLOY_INT32, 0},
                    {"sa_b", ALLOY_INT64, lay.inner_stride[0]},
                    {"sa_r", ALLOY_INT64, stv[nd - 2]},
                    {"sa_c", ALLOY_INT64, stv[nd - 1]}};
        for (size_t i = 0; i < sizeof ints / sizeof ints[0] && st == ALLOY_OK; i++)
            st = alloy_launch_set_constant_int(ln, ints[i].name, ints[i].dt, ints[i].v);
        if (st == ALLOY_OK) st = alloy_batch_layout_launch_per_matrix(&lay, kern, a, ln, nt, stream);
        alloy_launch_free(ln);
    }
    alloy_array_free(work);
    for (int i = 0; i < 3; i++) alloy_array_free(dummy[i]);
    if (st != ALLOY_OK) {
        if (newS) alloy_array_free(S);
        if (newU) alloy_array_free(U);
        if (newVH) alloy_array_free(VH);
        if (newI) alloy_array_free(I);
        return st;
    }
    if (newS) *s = S;
    if (newU) *u = U;
    if (newVH) *vh = VH;
    if (info && newI) *info = I;
    else if (newI) alloy_array_free(I);
    return ALLOY_OK;
}
