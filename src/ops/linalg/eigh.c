/* eigh.c — alloy_eigh (alloy/linalg.h): the symmetric eigendecomposition
 * of a batch of matrices (NumPy's linalg.eigh).
 *
 * Validates the arguments (errors name the argument), reduces the leading
 * dimensions to launches over one strided batch (a is read in place with
 * any strides), picks a kernel per device and launches it on the caller's
 * stream; nothing waits for the device. Kernels (each file says what it
 * does): on the CPU eigh_cpu (one thread per matrix, cyclic Jacobi); on a
 * GPU, up to n = 32, svd_tg's register path on the shifted matrix (one SIMD
 * group per matrix, Jacobi; the file says why that is an eigh) — for float32
 * with 16 <= n <= 32 the same method on its COLS sweeps without V (colsnov:
 * the eigenvectors from G's orthonormalised columns) — above it
 * eigh_tridiag (one threadgroup per matrix: Householder tridiagonalisation,
 * implicit QL whose serial chase runs on one thread while the others apply
 * the previous sweep's rotations; the matrix in threadgroup memory while it
 * fits, else in device scratch). eigh_tg (two-sided parallel Jacobi, one
 * threadgroup per matrix) stays selectable: ALLOY_EIGH_PATH=jacobi in the
 * environment makes it the GPU choice above n = 32 again, and
 * ALLOY_EIGH_PATH=tridiag makes eigh_tridiag the choice for every n, and
 * ALLOY_EIGH_PATH=cols (cols2) svd_tg's COLS sweeps for every n <= 32 with
 * one (two) threads per column, colsnov the one-thread variant without V in
 * the sweeps (NOV), reg the register path for every n <= 32
 * (all for timing the paths against each other). Sizes and strides are launch
 * constants, so a new shape never recompiles a kernel. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "batch_layout.h"
#include "core/error.h"
#include "eigh_internal.h"
#include "lu_internal.h"
#include "ops/catalog.h"

static const char CPU_FILE[] = "src/ops/linalg/kernels/eigh_cpu.metal";
static const char TG_FILE[] = "src/ops/linalg/kernels/eigh_tg.metal";
static const char SVD_FILE[] = "src/ops/linalg/kernels/svd_tg.metal";
static const char TRIDIAG_FILE[] = "src/ops/linalg/kernels/eigh_tridiag.metal";

/* svd_tg's alloy_eigh_cols_elems: the COLS variant's dynamic threadgroup
 * memory in elements for n <= 32 and H threads per column (G and V, or the
 * exchange buffers where larger, then 4 NP + 4 for the norms, (c, s') and
 * verdicts; NP = 32) */
static int64_t cols_elems(int64_t n, int64_t h, int64_t es) {
    const int64_t xn = h == 1 ? 0 : 2 * 32 * h * (32 / h + 16 / es), m2 = 2 * n * n;
    return ((m2 > xn ? m2 : xn) + 3) / 4 * 4 + 4 * 32 + 4;
}

#define EIGH_DEFAULT_SWEEPS 30
#define EIGH_GPU_MAX_N 256 /* eigh_tg's static arrays: 128 pairs, 256 indices */

/* The COLS variants' register cap, as threadgroups per SM (svd_tg's
 * MINB): float32 one thread per column (32 threads) 16, i.e. 128 registers,
 * without V 20 (96; H100 at 32x32: 1.43 ms against 1.53 at 16 and 1.45 at
 * 24), two threads per column (64 threads) 10 (96); float64 is left
 * uncapped (1). */
static int64_t cols_minb(int64_t h, int nov, alloy_dtype dt) {
    const char *e = getenv("ALLOY_EIGH_COLS_MINB");
    if (e && atoi(e) > 0) return atoi(e);
    return dt != ALLOY_FLOAT32 ? 1 : h == 1 ? (nov ? 20 : 16) : 10;
}

/* The CUDA choice above the register path: eigh_tridiag unless
 * ALLOY_EIGH_PATH=jacobi asks for eigh_tg; ALLOY_EIGH_PATH=tridiag takes
 * eigh_tridiag for n <= 32 too, ALLOY_EIGH_PATH=cols (cols2) the COLS
 * sweeps with one (two) threads per column for every n <= 32, colsnov the
 * former without V in the sweeps, reg the
 * register path for every n <= 32 (all for timing the paths). */
static int env_path_is(const char *name) {
    const char *e = getenv("ALLOY_EIGH_PATH");
    return e && strcmp(e, name) == 0;
}

void alloy_eigh_options_init(alloy_eigh_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->compute_vectors = 1;
}

alloy_status alloy_eigh(alloy_array *a, const alloy_eigh_options *options, alloy_stream *stream,
                        alloy_array **w, alloy_array **v, alloy_array **info) {
    return alloy_eigh_with_path(a, options, ALLOY_EIGH_AUTO, stream, w, v, info);
}

/* Threadgroup memory a kernel may hold for its matrices on dev (as lu.c:
 * the opt-in limit of the GPU generation less room for static arrays). */
static size_t smem_budget(alloy_device *dev) {
    if (alloy_device_backend(dev) != ALLOY_BACKEND_CUDA) return (size_t)192 << 10;
    const int cc = alloy_device_compute_capability(dev);
    if (cc >= 90) return (size_t)212 << 10;
    if (cc == 80 || cc == 87) return (size_t)150 << 10;
    if (cc >= 75) return (size_t)56 << 10;
    return (size_t)40 << 10;
}

/* eigh_tridiag's dynamic threadgroup memory past the matrix: d, e, tau,
 * p/w, two rotation buffers, 32 reduction slots, then n + 4 ints (the
 * ranking and the sweeps' planes) */
static int64_t tridiag_small_bytes(int64_t n, int64_t es) { return (8 * n + 32) * es + (n + 4) * 4; }
/* ... and with the matrix (row stride n | 1) in front: the threadgroup-memory variant's */
static int64_t tridiag_smem_bytes(int64_t n, int64_t es) { return n * (n | 1) * es + tridiag_small_bytes(n, es); }

int alloy_eigh_tridiag_smem_fits(alloy_device *dev, int64_t n, alloy_dtype dt) {
    const int64_t es = (int64_t)alloy_dtype_size(dt);
    return (size_t)tridiag_smem_bytes(n, es) <= smem_budget(dev);
}

alloy_status alloy_eigh_with_path(alloy_array *a, const alloy_eigh_options *options, alloy_eigh_path path,
                                  alloy_stream *stream, alloy_array **w, alloy_array **v, alloy_array **info) {
    static const char fn[] = "alloy_eigh";
    alloy_eigh_options o;
    if (options) o = *options;
    else alloy_eigh_options_init(&o);
    if (!w)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: w is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    if (o.compute_vectors && !v)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: v is NULL but options->compute_vectors is set (pass the address of an "
                           "alloy_array *, or clear compute_vectors)",
                           fn);
    if (o.max_sweeps < 0)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: options->max_sweeps is %d; it must be >= 0", fn,
                           o.max_sweeps);
    const int sweeps = o.max_sweeps ? o.max_sweeps : EIGH_DEFAULT_SWEEPS;
    alloy_lu_square sq;
    alloy_status st = alloy_lu_check_square(fn, "a", a, stream, &sq);
    if (st != ALLOY_OK) return st;
    const int64_t n = sq.n, es = (int64_t)alloy_dtype_size(sq.dt);
    const int nd = sq.nd, nb = nd - 2;
    const int cuda = alloy_device_backend(sq.dev) == ALLOY_BACKEND_CUDA;
    const int64_t ld_smem = n | 1;
    const int64_t smem_bytes = (o.compute_vectors ? 2 : 1) * n * ld_smem * es;
    const int64_t td_small = tridiag_small_bytes(n, es);
    const int64_t td_smem_bytes = tridiag_smem_bytes(n, es);
    if (path == ALLOY_EIGH_AUTO) {
        const int tridiag = !env_path_is("jacobi");
        if (!cuda) path = ALLOY_EIGH_CPU;
        else if (n <= 32 && env_path_is("cols")) path = ALLOY_EIGH_COLS;
        else if (n <= 32 && env_path_is("cols2")) path = ALLOY_EIGH_COLS_H2;
        else if (n <= 32 && env_path_is("colsnov")) path = ALLOY_EIGH_COLS_NOV;
        else if (n <= 32 && env_path_is("reg")) path = ALLOY_EIGH_REG;
        /* float32 16..32: the COLS sweeps without V (H100, 10 000 matrices: 1.43 ms at 32 against 2.06 with V
         * and the register path's 3.16, 1.23 against 1.85 / 2.25 at 24, 1.07 against 1.62 / 1.48 at 17, 1.03
         * against the register path's 1.31 at 16; at 8 0.70 against 0.54); float64 spills there */
        else if (n >= 16 && n <= 32 && sq.dt == ALLOY_FLOAT32 && !env_path_is("tridiag")) path = ALLOY_EIGH_COLS_NOV;
        else if (n <= 32 && !env_path_is("tridiag")) path = ALLOY_EIGH_REG;
        else if (tridiag)
            path = (size_t)td_smem_bytes <= smem_budget(sq.dev) ? ALLOY_EIGH_TRIDIAG_SMEM : ALLOY_EIGH_TRIDIAG_DEVICE;
        else if ((size_t)smem_bytes <= smem_budget(sq.dev)) path = ALLOY_EIGH_TG_SMEM;
        else path = ALLOY_EIGH_TG_DEVICE;
    }
    if (path != ALLOY_EIGH_CPU && path != ALLOY_EIGH_TG_SMEM && path != ALLOY_EIGH_TG_DEVICE && path != ALLOY_EIGH_REG &&
        path != ALLOY_EIGH_TRIDIAG_SMEM && path != ALLOY_EIGH_TRIDIAG_DEVICE && path != ALLOY_EIGH_COLS &&
        path != ALLOY_EIGH_COLS_H2 && path != ALLOY_EIGH_COLS_NOV)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: unknown kernel path %d", fn, (int)path);
    if (path == ALLOY_EIGH_REG && n > 32)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the register path takes n <= 32, not %lld", fn,
                           (long long)n);
    if ((path == ALLOY_EIGH_COLS || path == ALLOY_EIGH_COLS_H2 || path == ALLOY_EIGH_COLS_NOV) && n > 32)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the COLS path takes n <= 32, not %lld", fn,
                           (long long)n);
    if (path != ALLOY_EIGH_CPU && n > EIGH_GPU_MAX_N)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: n = %lld is more than the GPU kernel takes (%d)", fn,
                           (long long)n, EIGH_GPU_MAX_N);

    alloy_array *W = NULL, *V = NULL, *I = NULL, *work = NULL, *dummy[3] = {NULL, NULL, NULL};
    int newW = 0, newV = 0, newI = 0;
    st = alloy_lu_prepare_out(fn, "w", w, sq.dev, sq.dt, nd - 1, sq.shape, &W, &newW);
    if (st == ALLOY_OK && o.compute_vectors)
        st = alloy_lu_prepare_out(fn, "v", v, sq.dev, sq.dt, nd, sq.shape, &V, &newV);
    if (st == ALLOY_OK) {
        alloy_array *none = NULL;
        st = alloy_lu_prepare_out(fn, "info", info ? info : &none, sq.dev, ALLOY_INT32, nb, sq.shape, &I, &newI);
    }
    /* scratch: the CPU kernel's working matrix, transposed vectors and
     * order; the device-memory GPU paths' matrix (and eigh_tg's vectors) */
    const int64_t one = 1;
    int64_t per = 0;
    if (path == ALLOY_EIGH_CPU) per = 2 * n * n + n;
    else if (path == ALLOY_EIGH_TG_DEVICE) per = 2 * n * n;
    else if (path == ALLOY_EIGH_TRIDIAG_DEVICE) per = n * n;
    if (st == ALLOY_OK && per > 0 && sq.batch > 0) {
        const int64_t cnt = per * sq.batch;
        st = alloy_array_new(sq.dev, sq.dt, 1, &cnt, &work);
    }
    /* distinct one-element stand-ins for the outputs not used */
    for (int i = 0; i < 3 && st == ALLOY_OK; i++) st = alloy_array_new(sq.dev, sq.dt, 1, &one, &dummy[i]);

    if (st == ALLOY_OK && sq.batch > 0) {
        const int64_t *sh = alloy_array_shape(a), *stv = alloy_array_strides(a);
        int64_t s[2][ALLOY_MAX_NDIM];
        for (int d = 0; d < nb; d++) s[0][d] = stv[d];
        alloy_batch_contiguous_strides(nb, sh, 1, s[1]);
        alloy_batch_layout lay;
        alloy_batch_layout_init(&lay, nb, sh, 2, (const int64_t(*)[ALLOY_MAX_NDIM])s);
        const int td = path == ALLOY_EIGH_TRIDIAG_SMEM || path == ALLOY_EIGH_TRIDIAG_DEVICE;
        /* the COLS variants run svd_tg's EIGH mode as the register path does, with COLS = 32, CH = H */
        const int64_t ch = path == ALLOY_EIGH_COLS_H2 ? 2 : 1;
        const int cols = path == ALLOY_EIGH_COLS || path == ALLOY_EIGH_COLS_H2 || path == ALLOY_EIGH_COLS_NOV;
        const int tg = path == ALLOY_EIGH_TG_SMEM || path == ALLOY_EIGH_TG_DEVICE || td,
                  reg = path == ALLOY_EIGH_REG || cols;
        /* eigh_tridiag: SIMD group 0 for the QL chase and one thread per row
         * of the vectors in the others */
        const uint32_t nt = reg  ? (uint32_t)(32 * ch)
                            : td ? (uint32_t)(32 + 32 * ((n + 31) / 32))
                            : !tg ? 1
                                  : n <= 16 ? 64 : n <= 32 ? 128 : n <= 128 ? 256 : 512;
        const char *file = reg ? SVD_FILE : td ? TRIDIAG_FILE : tg ? TG_FILE : CPU_FILE;
        const int smem_matrix = path == ALLOY_EIGH_TG_SMEM || path == ALLOY_EIGH_TRIDIAG_SMEM;
        alloy_kernel *k = NULL;
        alloy_launch *ln = NULL;
        st = alloy_catalog_kernel(file, &k);
        if (st == ALLOY_OK) st = alloy_launch_new(&ln);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, W);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, V ? V : dummy[0]);
        if (st == ALLOY_OK && reg) st = alloy_launch_add_output_array(ln, dummy[2]); /* svd_tg's vh */
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, I);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, work ? work : dummy[1]);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(ln, "T", sq.dt);
        if (st == ALLOY_OK && (tg || reg))
            st = alloy_launch_add_template_bool(ln, "SMEM", smem_matrix || reg);
        if (st == ALLOY_OK && reg) st = alloy_launch_add_template_bool(ln, "REG", 1);
        if (st == ALLOY_OK && reg) st = alloy_launch_add_template_bool(ln, "EIGH", 1);
        if (st == ALLOY_OK && cols) st = alloy_launch_add_template_int(ln, "COLS", 32);
        if (st == ALLOY_OK && cols) st = alloy_launch_add_template_int(ln, "CH", ch);
        if (st == ALLOY_OK && cols)
            st = alloy_launch_add_template_int(ln, "MINB", cols_minb(ch, path == ALLOY_EIGH_COLS_NOV, sq.dt));
        if (st == ALLOY_OK && cols) st = alloy_launch_add_template_bool(ln, "NOV", path == ALLOY_EIGH_COLS_NOV);
        if (st == ALLOY_OK && path == ALLOY_EIGH_TG_SMEM)
            st = alloy_launch_set_threadgroup_memory(ln, smem_bytes > 0 ? (size_t)smem_bytes : 16);
        if (st == ALLOY_OK && td)
            st = alloy_launch_set_threadgroup_memory(
                ln, (size_t)(path == ALLOY_EIGH_TRIDIAG_SMEM ? td_smem_bytes : td_small));
        if (st == ALLOY_OK && reg)
            st = alloy_launch_set_threadgroup_memory(ln, cols     ? (size_t)(cols_elems(n, ch, es) * es)
                                                         : n > 0 ? (size_t)(3 * n * n * es)
                                                                 : 16);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(ln, nt, 1, 1);
        const struct {
            const char *name;
            alloy_dtype dt;
            int64_t v;
        } ints[] = {{"n", ALLOY_INT32, n},
                    {"upper", ALLOY_INT32, o.upper != 0},
                    {"vectors", ALLOY_INT32, o.compute_vectors != 0},
                    {"max_sweeps", ALLOY_INT32, sweeps},
                    {"sa_b", ALLOY_INT64, lay.inner_stride[0]},
                    {"sa_r", ALLOY_INT64, stv[nd - 2]},
                    {"sa_c", ALLOY_INT64, stv[nd - 1]},
                    {"ld", ALLOY_INT64, smem_matrix ? ld_smem : n}};
        /* svd_tg's names for the register path (m = n; uv: the vectors) */
        const struct {
            const char *name;
            alloy_dtype dt;
            int64_t v;
        } reg_ints[] = {{"m", ALLOY_INT32, n},         {"n", ALLOY_INT32, n},
                        {"uv", ALLOY_INT32, o.compute_vectors != 0},
                        {"ucols", ALLOY_INT32, n},     {"vrows", ALLOY_INT32, n},
                        {"max_sweeps", ALLOY_INT32, sweeps}, {"upper", ALLOY_INT32, o.upper != 0},
                        {"sa_b", ALLOY_INT64, lay.inner_stride[0]}, {"sa_r", ALLOY_INT64, stv[nd - 2]},
                        {"sa_c", ALLOY_INT64, stv[nd - 1]}};
        if (reg)
            for (size_t i = 0; i < sizeof reg_ints / sizeof reg_ints[0] && st == ALLOY_OK; i++)
                st = alloy_launch_set_constant_int(ln, reg_ints[i].name, reg_ints[i].dt, reg_ints[i].v);
        else
            for (size_t i = 0; i < sizeof ints / sizeof ints[0] && st == ALLOY_OK; i++)
                if (tg || strcmp(ints[i].name, "ld") != 0)
                    st = alloy_launch_set_constant_int(ln, ints[i].name, ints[i].dt, ints[i].v);
        if (st == ALLOY_OK) st = alloy_batch_layout_launch_per_matrix(&lay, k, a, ln, nt, stream);
        alloy_launch_free(ln);
    }
    alloy_array_free(work);
    for (int i = 0; i < 3; i++) alloy_array_free(dummy[i]);
    if (st != ALLOY_OK) {
        if (newW) alloy_array_free(W);
        if (newV) alloy_array_free(V);
        if (newI) alloy_array_free(I);
        return st;
    }
    if (newW) *w = W;
    if (newV) *v = V;
    if (info && newI) *info = I;
    else if (newI) alloy_array_free(I);
    return ALLOY_OK;
}
