/* cholesky.c — alloy_cholesky and alloy_cholesky_solve (alloy/linalg.h):
 * LAPACK's potrf and potrs for batches of matrices.
 *
 * The factorization picks a kernel file per device, dtype and size (each
 * file says what it does): on the CPU one thread per matrix (cholesky_cpu);
 * on a GPU SIMD-group-sized register kernels for n <= 32 (cholesky_small,
 * several matrices per threadgroup), for float32 up to n = 64 one SIMD group
 * per matrix with its rows in registers (cholesky_warp; float64 one
 * threadgroup per matrix with the matrix spread over its threads' registers,
 * cholesky_reg), for float32 above 64 the whole lower triangle in
 * threadgroup memory with a blocked right-looking algorithm and a lookahead
 * (cholesky_tiled, n <= 288), and otherwise one threadgroup per matrix with
 * a blocked right-looking algorithm (cholesky_blocked), the matrix in
 * threadgroup memory while it fits, else in the output. a is read in place
 * with any strides; the leading dimensions that do not collapse into one
 * batch stride are walked with one launch per outer index. Sizes and strides
 * are launch constants, so a new shape never recompiles a kernel. The solve
 * is two triangular solves in one launch (triangular.c). */
#include <stdint.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "batch_layout.h"
#include "cholesky_internal.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "triangular_internal.h"

static const char CPU_FILE[] = "src/ops/linalg/kernels/cholesky_cpu.metal";
static const char SMALL_FILE[] = "src/ops/linalg/kernels/cholesky_small.metal";
static const char BLOCKED_FILE[] = "src/ops/linalg/kernels/cholesky_blocked.metal";
static const char REG_FILE[] = "src/ops/linalg/kernels/cholesky_reg.metal";
static const char WARP_FILE[] = "src/ops/linalg/kernels/cholesky_warp.metal";
static const char TILED_FILE[] = "src/ops/linalg/kernels/cholesky_tiled.metal";
/* cholesky_warp: matrices (SIMD groups) per threadgroup */
#define WARP_PER_GROUP 4
/* cholesky_tiled's dynamic threadgroup memory on CUDA (H100: 227 KB per
 * group with its static arrays): float32 n <= 288, float64 n <= 192 */
#define SMEM_TILED_MAX ((size_t)224 * 1024)

/* The blocked kernel keeps the matrix in threadgroup memory up to this size
 * (float32 n <= 131, float64 n <= 93), and needs n x 33 elements of it for
 * the panel otherwise. */
#define SMEM_MATRIX_MAX ((size_t)68 * 1024)
/* cholesky_reg stages the matrix through threadgroup memory (n x (n | 1)). */
#define SMEM_REG_MAX ((size_t)160 * 1024)
#define SMEM_PANEL_MAX ((size_t)192 * 1024)

void alloy_cholesky_options_init(alloy_cholesky_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

alloy_status alloy_cholesky(alloy_array *a, const alloy_cholesky_options *options, alloy_stream *stream,
                            alloy_array **out, alloy_array **info) {
    return alloy_cholesky_with_path(a, options, ALLOY_CHOLESKY_AUTO, stream, out, info);
}

/* The kernel, its launch shape and its dynamic threadgroup memory. */
typedef struct chol_plan {
    alloy_cholesky_path path;
    const char *file;
    int nb;              /* cholesky_small: rows per matrix slot; cholesky_reg: NP; cholesky_tiled: NW */
    int r, c;            /* cholesky_reg: rows and columns per thread */
    uint32_t threads;    /* per threadgroup */
    int64_t per_group;   /* matrices per threadgroup */
    size_t smem;
    int64_t ldw;
} chol_plan;

/* cholesky_tiled's storage: the lower triangle by block rows of 32 (row
 * stride 32 I + 36) and the transposed panel (32 x 32 (nblk - 1)). */
static size_t tiled_smem(int64_t n, size_t es) {
    const int64_t nblk = (n + 31) / 32, pl = nblk > 1 ? 32 * (nblk - 1) : 4;
    return (size_t)(512 * nblk * (nblk + 1) + 128 * nblk + 32 * pl) * es;
}

static alloy_status plan_for(alloy_device *dev, alloy_dtype dt, int64_t n, alloy_cholesky_path path, chol_plan *p) {
    const size_t es = alloy_dtype_size(dt);
    const int64_t ldw = n | 1;
    if (path == ALLOY_CHOLESKY_AUTO) {
        if (alloy_device_backend(dev) == ALLOY_BACKEND_CPU) path = ALLOY_CHOLESKY_CPU;
        else if (n <= 32) path = ALLOY_CHOLESKY_SMALL;
        /* float32 up to 64: one SIMD group per matrix, its rows in registers (float64's
         * 96 registers of rows per lane would be 192: those keep the register kernel) */
        else if (n <= 64 && dt == ALLOY_FLOAT32) path = ALLOY_CHOLESKY_WARP;
        /* the register kernel up to 64; above, the blocked one is faster (H100, float32,
         * 10 000 matrices: n 80 2.57 against 4.29 ms, n 128 5.14 against 8.18 ms) */
        else if (n <= 64 && (size_t)n * (size_t)ldw * es <= SMEM_REG_MAX) path = ALLOY_CHOLESKY_REG;
        /* float32 above 64: the whole lower triangle in threadgroup memory while it
         * fits (n <= 288; H100, 10 000 x 128^2: 1.68 against the blocked kernel's
         * 5.12 ms; float64 keeps the blocked kernel, not timed on this one) */
        else if (n > 64 && dt == ALLOY_FLOAT32 && tiled_smem(n, es) <= SMEM_TILED_MAX) path = ALLOY_CHOLESKY_TILED;
        else if ((size_t)n * (size_t)ldw * es <= SMEM_MATRIX_MAX) path = ALLOY_CHOLESKY_BLOCKED_SMEM;
        else path = ALLOY_CHOLESKY_BLOCKED_DEVICE;
    }
    memset(p, 0, sizeof *p);
    p->path = path;
    switch (path) {
    case ALLOY_CHOLESKY_CPU:
        p->file = CPU_FILE;
        p->threads = 1;
        p->per_group = 1;
        return ALLOY_OK;
    case ALLOY_CHOLESKY_SMALL:
        if (n > 32)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: the small kernel takes n <= 32, not %lld",
                               (long long)n);
        p->file = SMALL_FILE;
        p->nb = 4;
        while (p->nb < n) p->nb *= 2;
        p->threads = 64;
        p->per_group = 64 / p->nb;
        return ALLOY_OK;
    case ALLOY_CHOLESKY_REG:
        if (n > 128)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: the register kernel takes n <= 128, not %lld",
                               (long long)n);
        /* NP = 64: 16 x 8 threads of 4 x 8 elements; NP = 128: 16 x 16 threads of 8 x 8 */
        p->file = REG_FILE;
        p->nb = n <= 64 ? 64 : 128;
        p->r = n <= 64 ? 4 : 8;
        p->c = 8;
        p->threads = (uint32_t)((p->nb / p->r) * (p->nb / p->c));
        p->per_group = 1;
        p->ldw = ldw;
        p->smem = n > 0 ? (size_t)n * (size_t)ldw * es : 16;
        return ALLOY_OK;
    case ALLOY_CHOLESKY_WARP:
        if (n > 64)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: the SIMD-group kernel takes n <= 64, not %lld",
                               (long long)n);
        p->file = WARP_FILE;
        p->threads = 32 * WARP_PER_GROUP;
        p->per_group = WARP_PER_GROUP;
        return ALLOY_OK;
    case ALLOY_CHOLESKY_TILED:
        p->file = TILED_FILE;
        p->smem = tiled_smem(n, es);
        /* 8 SIMD groups where two groups' storage fits in an SM (227 KB with the
         * static arrays, about 1.1 K elements: float32 n <= 160), else 16 (one
         * group per SM, 128 registers per thread either way) */
        p->nb = 2 * (p->smem + (1024 + 96) * es + 16) <= (size_t)227 * 1024 ? 8 : 16;
        p->threads = (uint32_t)(32 * p->nb);
        p->per_group = 1;
        if (alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && p->smem > SMEM_TILED_MAX)
            return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                               "alloy_cholesky: n = %lld is more than the threadgroup-memory kernel takes for %s",
                               (long long)n, alloy_dtype_name(dt));
        return ALLOY_OK;
    case ALLOY_CHOLESKY_BLOCKED_SMEM:
    case ALLOY_CHOLESKY_BLOCKED_DEVICE:
        p->file = BLOCKED_FILE;
        p->threads = n <= 64 ? 128 : 256;
        p->per_group = 1;
        p->ldw = path == ALLOY_CHOLESKY_BLOCKED_SMEM ? ldw : n;
        p->smem = path == ALLOY_CHOLESKY_BLOCKED_SMEM ? (size_t)n * (size_t)ldw * es : (size_t)n * 33 * es;
        if (p->smem == 0) p->smem = 16;
        if (alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && p->smem > SMEM_PANEL_MAX)
            return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                               "alloy_cholesky: n = %lld is more than this GPU path takes (%lld for %s)",
                               (long long)n, (long long)(SMEM_PANEL_MAX / (33 * es)), alloy_dtype_name(dt));
        return ALLOY_OK;
    default:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: unknown kernel path %d", (int)path);
    }
}

alloy_status alloy_cholesky_with_path(alloy_array *a, const alloy_cholesky_options *options,
                                      alloy_cholesky_path path, alloy_stream *stream, alloy_array **out,
                                      alloy_array **info) {
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: a is NULL");
    if (!out)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_cholesky: out is NULL (pass the address of an alloy_array *)");
    alloy_cholesky_options o;
    if (options) o = *options;
    else alloy_cholesky_options_init(&o);
    alloy_device *dev = alloy_array_device(a);
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: the stream belongs to %s but a lives on %s",
                           alloy_device_name(alloy_stream_device(stream)), alloy_device_name(dev));
    const alloy_dtype dt = alloy_array_dtype(a);
    if (dt != ALLOY_FLOAT32 && dt != ALLOY_FLOAT64)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: a is %s; it takes float32 or float64",
                           alloy_dtype_name(dt));
    const int nd = alloy_array_ndim(a);
    const int64_t *sh = alloy_array_shape(a), *stv = alloy_array_strides(a);
    if (nd < 2)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: a is %d-D; it must be (..., n, n)", nd);
    const int64_t n = sh[nd - 1];
    if (sh[nd - 2] != n)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: a is not square: its matrices are %lld x %lld",
                           (long long)sh[nd - 2], (long long)n);
    const int nb = nd - 2;
    int64_t total = 1;
    for (int d = 0; d < nb; d++) total *= sh[d];

    /* the factor */
    alloy_array *l = *out;
    if (l) {
        if (alloy_array_device(l) != dev)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: out lives on %s but a on %s",
                               alloy_device_name(alloy_array_device(l)), alloy_device_name(dev));
        int same = alloy_array_ndim(l) == nd;
        for (int d = 0; same && d < nd; d++) same = alloy_array_shape(l)[d] == sh[d];
        if (!same)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: out must have a's shape");
        if (alloy_array_dtype(l) != dt)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: out is %s but a is %s",
                               alloy_dtype_name(alloy_array_dtype(l)), alloy_dtype_name(dt));
        if (!alloy_array_is_row_contiguous(l))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: out must be row-contiguous");
        if (alloy_array_data(l) == alloy_array_data(a) && alloy_array_size(l) > 0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "alloy_cholesky: out is a itself; give a separate output array");
    }
    /* the info codes */
    alloy_array *inf = info ? *info : NULL;
    if (inf) {
        if (alloy_array_device(inf) != dev)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: info lives on %s but a on %s",
                               alloy_device_name(alloy_array_device(inf)), alloy_device_name(dev));
        if (alloy_array_dtype(inf) != ALLOY_INT32)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: info is %s; it must be int32",
                               alloy_dtype_name(alloy_array_dtype(inf)));
        int same = alloy_array_ndim(inf) == nb;
        for (int d = 0; same && d < nb; d++) same = alloy_array_shape(inf)[d] == sh[d];
        if (!same)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "alloy_cholesky: info has the wrong shape: it must be a's batch shape (%d-D, "
                               "a's dimensions without the last two)",
                               nb);
        if (!alloy_array_is_row_contiguous(inf))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_cholesky: info must be row-contiguous");
    }
    chol_plan p;
    alloy_status st = plan_for(dev, dt, n, path, &p);
    if (st != ALLOY_OK) return st;
    const int own_l = l == NULL, own_inf = inf == NULL;
    if (own_l) st = alloy_array_new(dev, dt, nd, sh, &l);
    if (st == ALLOY_OK && own_inf) st = alloy_array_new(dev, ALLOY_INT32, nb, sh, &inf);
    if (st == ALLOY_OK && total > 0) {
        int64_t s[3][ALLOY_MAX_NDIM];
        for (int d = 0; d < nb; d++) s[0][d] = stv[d];
        alloy_batch_contiguous_strides(nb, sh, n * n, s[1]);
        alloy_batch_contiguous_strides(nb, sh, 1, s[2]);
        alloy_batch_layout lay;
        alloy_batch_layout_init(&lay, nb, sh, 3, (const int64_t(*)[ALLOY_MAX_NDIM])s);

        alloy_kernel *k = NULL;
        alloy_launch *ln = NULL;
        st = alloy_catalog_kernel(p.file, &k);
        if (st == ALLOY_OK) st = alloy_launch_new(&ln);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, l);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ln, inf);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(ln, "T", dt);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_SMALL) st = alloy_launch_add_template_int(ln, "NB", p.nb);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_REG) st = alloy_launch_add_template_int(ln, "NP", p.nb);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_REG) st = alloy_launch_add_template_int(ln, "R", p.r);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_REG) st = alloy_launch_add_template_int(ln, "C", p.c);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_WARP) st = alloy_launch_add_template_int(ln, "W", WARP_PER_GROUP);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_WARP)
            st = alloy_launch_add_template_int(ln, "MINB", dt == ALLOY_FLOAT32 ? 3 : 1);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_TILED) st = alloy_launch_add_template_int(ln, "NW", p.nb);
        if (st == ALLOY_OK && p.path == ALLOY_CHOLESKY_TILED)
            st = alloy_launch_add_template_int(ln, "MINB", p.nb == 16 ? 1 : 2);
        if (st == ALLOY_OK && p.file == BLOCKED_FILE)
            st = alloy_launch_add_template_bool(ln, "SMEM", p.path == ALLOY_CHOLESKY_BLOCKED_SMEM);
        if (st == ALLOY_OK && p.smem) st = alloy_launch_set_threadgroup_memory(ln, p.smem);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(ln, p.threads, 1, 1);
        const struct {
            const char *name;
            int64_t v;
        } ints[] = {{"n", n}, {"sa_b", lay.inner_stride[0]}, {"sa_r", stv[nd - 2]}, {"sa_c", stv[nd - 1]}};
        for (size_t i = 0; i < sizeof ints / sizeof ints[0] && st == ALLOY_OK; i++)
            st = alloy_launch_set_constant_int(ln, ints[i].name, ALLOY_INT64, ints[i].v);
        if (st == ALLOY_OK && p.file == BLOCKED_FILE) st = alloy_launch_set_constant_int(ln, "ldw", ALLOY_INT64, p.ldw);
        if (st == ALLOY_OK && p.file == REG_FILE) st = alloy_launch_set_constant_int(ln, "ld", ALLOY_INT64, p.ldw);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(ln, "upper", ALLOY_INT32, o.upper != 0);

        /* whole threadgroups, at most 2^30 threads per launch */
        const int64_t per_launch = (((int64_t)1 << 30) / p.threads) * p.per_group;
        alloy_array *ins[1] = {a};
        for (int64_t ob = 0; ob < lay.outer && st == ALLOY_OK; ob++) {
            int64_t off[3];
            alloy_batch_layout_offsets(&lay, ob, off);
            for (int64_t start = 0; start < lay.inner && st == ALLOY_OK; start += per_launch) {
                const int64_t cnt = lay.inner - start < per_launch ? lay.inner - start : per_launch;
                const int64_t groups = (cnt + p.per_group - 1) / p.per_group;
                st = alloy_launch_set_constant_int(ln, "a_off", ALLOY_INT64, off[0] + start * lay.inner_stride[0]);
                if (st == ALLOY_OK)
                    st = alloy_launch_set_constant_int(ln, "l_off", ALLOY_INT64, off[1] + start * n * n);
                if (st == ALLOY_OK) st = alloy_launch_set_constant_int(ln, "i_off", ALLOY_INT64, off[2] + start);
                if (st == ALLOY_OK && (p.path == ALLOY_CHOLESKY_SMALL || p.path == ALLOY_CHOLESKY_WARP))
                    st = alloy_launch_set_constant_int(ln, "batch", ALLOY_INT64, cnt);
                if (st == ALLOY_OK) st = alloy_launch_set_grid(ln, (uint32_t)(groups * p.threads), 1, 1);
                alloy_array *res[2] = {NULL, NULL};
                if (st == ALLOY_OK) st = alloy_kernel_apply(k, 1, ins, ln, stream, res);
                alloy_array_free(res[0]);
                alloy_array_free(res[1]);
            }
        }
        alloy_launch_free(ln);
    }
    if (st != ALLOY_OK) {
        if (own_l) alloy_array_free(l);
        if (own_inf) alloy_array_free(inf);
        return st;
    }
    if (own_l) *out = l;
    if (own_inf) {
        if (info) *info = inf;
        else alloy_array_free(inf);
    }
    return ALLOY_OK;
}

alloy_status alloy_cholesky_solve(alloy_array *factor, alloy_array *b, const alloy_cholesky_options *options,
                                  alloy_stream *stream, alloy_array **out) {
    alloy_cholesky_options o;
    if (options) o = *options;
    else alloy_cholesky_options_init(&o);
    /* A = L L^T: L Y = B, then L^T X = Y; A = U^T U: U^T Y = B, then U X = Y */
    const int lower = o.upper == 0;
    const alloy_tri_step steps[2] = {{lower, !lower, 0}, {lower, lower, 0}};
    return alloy_tri_solve("alloy_cholesky_solve", "factor", factor, b, 0, 2, steps, stream, out);
}
