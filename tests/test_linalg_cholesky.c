/* test_linalg_cholesky.c — alloy_cholesky and alloy_cholesky_solve
 * (alloy/linalg.h) against long-double C loops: random SPD matrices of
 * condition 1e3, 1e6 (and 1e12 in float64), identity, zero, non-SPD and NaN
 * matrices inside batches, every kernel path through the op, lower and
 * upper, strided and broadcast operands, outputs pre-filled with sentinels
 * (every element must be written), and the errors that name their argument.
 * On the device the tests run on (ALLOY_DEVICE, default cpu). */
#include "harness.h"
#include "kernel_util.h"

#include "alloy/linalg.h"
#include "ops/linalg/cholesky_internal.h"

/* ---- matrices ---------------------------------------------------------------- */

/* A symmetric positive definite n x n matrix (row-major, full) with
 * eigenvalues spread geometrically from 1 to 1/kappa: a diagonal matrix
 * turned by four random Householder similarity transforms. */
static void make_spd(int n, double kappa, double *A) {
    memset(A, 0, sizeof(double) * (size_t)n * (size_t)n);
    for (int i = 0; i < n; i++) A[i * n + i] = n == 1 ? 1.0 : pow(kappa, -(double)i / (n - 1));
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1)), *w = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int r = 0; r < 4 && n > 1; r++) {
        double nv = 0;
        for (int i = 0; i < n; i++) {
            v[i] = harness_uniform(-1, 1);
            nv += v[i] * v[i];
        }
        nv = sqrt(nv);
        for (int i = 0; i < n; i++) v[i] /= nv;
        double alpha = 0; /* A <- H A H, H = I - 2 v v^T */
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++) s += A[i * n + j] * v[j];
            w[i] = s;
            alpha += v[i] * s;
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                A[i * n + j] += -2 * v[i] * w[j] - 2 * w[i] * v[j] + 4 * alpha * v[i] * v[j];
        for (int i = 0; i < n; i++) /* exactly symmetric */
            for (int j = 0; j < i; j++) A[j * n + i] = A[i * n + j];
    }
    free(v);
    free(w);
}

/* The reference: right-looking Cholesky in long double on the lower
 * triangle of A (full, row-major), leaving what the op documents on failure
 * (columns before the failed pivot, then the Schur complement with the
 * failed pivot unreduced). Returns info. */
static int ref_chol(int n, const double *A, long double *W) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) W[i * n + j] = j <= i ? A[i * n + j] : 0;
    for (int k = 0; k < n; k++) {
        const long double d = W[k * n + k];
        if (!(d > 0)) return k + 1;
        const long double s = sqrtl(d);
        W[k * n + k] = s;
        for (int i = k + 1; i < n; i++) W[i * n + k] /= s;
        for (int j = k + 1; j < n; j++)
            for (int i = j; i < n; i++) W[i * n + j] -= W[i * n + k] * W[j * n + k];
    }
    return 0;
}

static double unit_roundoff(alloy_dtype dt) { return dt == ALLOY_FLOAT64 ? 0x1p-53 : 0x1p-24; }

static void put(alloy_dtype dt, void *buf, int64_t i, double v) {
    if (dt == ALLOY_FLOAT64) ((double *)buf)[i] = v;
    else ((float *)buf)[i] = (float)v;
}
static double get(alloy_dtype dt, const void *buf, int64_t i) {
    return dt == ALLOY_FLOAT64 ? ((const double *)buf)[i] : (double)((const float *)buf)[i];
}

/* ---- one batch ----------------------------------------------------------------- */

enum kind { SPD_LO, SPD_HI, IDENTITY, ZERO, NOT_SPD, HAS_NAN };

typedef struct chol_case {
    alloy_dtype dt;
    int n;
    int64_t batch;
    int upper;
    alloy_cholesky_path path;
    int give_out;        /* out and info given, pre-filled with sentinels */
    const int *kinds;    /* per matrix (cycled); NULL: SPD_LO, SPD_HI, IDENTITY, ... */
    int nkinds;
} chol_case;

static const int default_kinds[] = {SPD_LO, SPD_HI, IDENTITY};

/* Fills matrix `A` (full, row-major, values as stored in dt) of kind k. */
static void make_matrix(alloy_dtype dt, int n, int kind, double *A) {
    const double hi = dt == ALLOY_FLOAT64 ? 1e12 : 1e6;
    switch (kind) {
    case SPD_LO: make_spd(n, 1e3, A); break;
    case SPD_HI: make_spd(n, hi, A); break;
    case IDENTITY:
        memset(A, 0, sizeof(double) * (size_t)n * (size_t)n);
        for (int i = 0; i < n; i++) A[i * n + i] = 1;
        break;
    case ZERO: memset(A, 0, sizeof(double) * (size_t)n * (size_t)n); break;
    case NOT_SPD: /* SPD, then a negative pivot at n / 2 */
        make_spd(n, 10, A);
        if (n) A[(n / 2) * n + n / 2] = -1;
        break;
    case HAS_NAN: /* one NaN in the referenced triangle, below the diagonal where possible */
        make_spd(n, 10, A);
        if (n) {
            const int i = (2 * n) / 3, j = n / 3 < i ? n / 3 : i;
            A[i * n + j] = NAN;
            A[j * n + i] = NAN;
        }
        break;
    }
    for (int64_t e = 0; e < (int64_t)n * n; e++) A[e] = dt == ALLOY_FLOAT64 ? A[e] : (double)(float)A[e];
}

/* Runs alloy_cholesky on the case and checks every matrix. */
static void run_chol(const chol_case *t) {
    const int n = t->n;
    const int64_t batch = t->batch, nn = (int64_t)n * n, total = batch * nn;
    const size_t es = alloy_dtype_size(t->dt);
    const int *kinds = t->kinds ? t->kinds : default_kinds;
    const int nkinds = t->kinds ? t->nkinds : 3;
    double *A = malloc(sizeof(double) * (size_t)(total ? total : 1));
    void *raw = malloc(es * (size_t)(total ? total : 1));
    for (int64_t b = 0; b < batch; b++) {
        make_matrix(t->dt, n, kinds[b % nkinds], A + b * nn);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const int referenced = t->upper ? j >= i : j <= i;
                put(t->dt, raw, b * nn + i * n + j, referenced ? A[b * nn + i * n + j] : NAN);
            }
    }
    int64_t shape[3] = {batch, n, n};
    alloy_array *a = NULL, *l = NULL, *info = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), t->dt, 3, shape, raw, &a));
    if (t->give_out) {
        CHECK_OK(alloy_array_new(ku_device(), t->dt, 3, shape, &l));
        CHECK_OK(alloy_array_fill(l, NAN));
        CHECK_OK(alloy_array_new(ku_device(), ALLOY_INT32, 1, shape, &info));
        CHECK_OK(alloy_array_fill(info, -7));
    }
    alloy_array *given_l = l, *given_info = info;
    alloy_cholesky_options o;
    alloy_cholesky_options_init(&o);
    o.upper = t->upper;
    CHECK_OK(alloy_cholesky_with_path(a, &o, t->path, NULL, &l, &info));
    CHECK(!given_l || l == given_l);
    CHECK(!given_info || info == given_info);
    if (!l || !info) goto done;
    CHECK(alloy_array_ndim(l) == 3 && alloy_array_ndim(info) == 1 && alloy_array_dtype(info) == ALLOY_INT32);
    void *got = malloc(es * (size_t)(total ? total : 1));
    int32_t *ginfo = malloc(sizeof(int32_t) * (size_t)(batch ? batch : 1));
    CHECK_OK(alloy_array_copy_to_host(l, got, es * (size_t)total));
    CHECK_OK(alloy_array_copy_to_host(info, ginfo, sizeof(int32_t) * (size_t)batch));
    long double *W = malloc(sizeof(long double) * (size_t)(nn ? nn : 1));
    double *F = malloc(sizeof(double) * (size_t)(nn ? nn : 1));
    const double u = unit_roundoff(t->dt);
    int bad = 0;
    for (int64_t b = 0; b < batch && bad < 4; b++) {
        const double *Ab = A + b * nn;
        const int want = ref_chol(n, Ab, W);
        /* F = the result in lower orientation; the other triangle must be 0 */
        int nonzero = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const double v = get(t->dt, got, b * nn + i * n + j);
                if (t->upper ? j < i : j > i) {
                    if (v != 0) nonzero++;
                } else {
                    F[t->upper ? j * n + i : i * n + j] = v;
                }
            }
        const char *tag = t->upper ? "upper" : "lower";
        if (nonzero) {
            fprintf(stderr, "  %s n=%d matrix %lld: %d nonzero elements in the other triangle\n", tag, n,
                    (long long)b, nonzero);
            bad++;
        }
        if (ginfo[b] != want) {
            fprintf(stderr, "  %s %s n=%d path %d matrix %lld (kind %d): info %d, want %d\n",
                    alloy_dtype_name(t->dt), tag, n, (int)t->path, (long long)b, kinds[b % nkinds], ginfo[b], want);
            bad++;
            continue;
        }
        if (want == 0) { /* backward error ||A - L L^T||_F / ||A||_F <= 10 n u */
            double num = 0, den = 0;
            for (int i = 0; i < n; i++)
                for (int j = 0; j <= i; j++) {
                    long double s = 0;
                    for (int q = 0; q <= j; q++) s += (long double)F[i * n + q] * F[j * n + q];
                    const double r = (double)((long double)Ab[i * n + j] - s);
                    const double m = i == j ? 1 : 2;
                    num += m * r * r;
                    den += m * Ab[i * n + j] * Ab[i * n + j];
                }
            const double berr = den > 0 ? sqrt(num / den) : sqrt(num);
            if (!(berr <= 10.0 * n * u)) {
                fprintf(stderr, "  %s %s n=%d path %d matrix %lld (kind %d): backward error %.3g > %.3g\n",
                        alloy_dtype_name(t->dt), tag, n, (int)t->path, (long long)b, kinds[b % nkinds], berr,
                        10.0 * n * u);
                bad++;
            }
            if (kinds[b % nkinds] == IDENTITY)
                for (int i = 0; i < n; i++)
                    for (int j = 0; j <= i; j++)
                        if (F[i * n + j] != (i == j ? 1.0 : 0.0)) {
                            fprintf(stderr, "  identity n=%d: L[%d,%d] = %g\n", n, i, j, F[i * n + j]);
                            bad++;
                            i = n;
                            break;
                        }
        } else { /* the documented state: NaN exactly where the reference has NaN, values close */
            double amax = 0;
            for (int64_t e = 0; e < nn; e++)
                if (isfinite(Ab[e]) && fabs(Ab[e]) > amax) amax = fabs(Ab[e]);
            const double tol = (t->dt == ALLOY_FLOAT64 ? 1e-11 : 1e-4) * (amax > 0 ? amax : 1);
            for (int i = 0; i < n; i++)
                for (int j = 0; j <= i; j++) {
                    const double g = F[i * n + j], r = (double)W[i * n + j];
                    const int ok = isnan(r) ? isnan(g) : (!isnan(g) && fabs(g - r) <= tol);
                    if (!ok) {
                        if (bad < 4)
                            fprintf(stderr, "  %s %s n=%d path %d matrix %lld (kind %d, info %d): [%d,%d] = %.9g, want %.9g\n",
                                    alloy_dtype_name(t->dt), tag, n, (int)t->path, (long long)b, kinds[b % nkinds],
                                    want, i, j, g, r);
                        bad++;
                        i = n;
                        break;
                    }
                }
        }
    }
    CHECK_MSG(bad == 0, "%d problems (%s n=%d batch %lld upper %d path %d)", bad, alloy_dtype_name(t->dt), n,
              (long long)batch, t->upper, (int)t->path);
    free(got);
    free(ginfo);
    free(W);
    free(F);
done:
    alloy_array_free(a);
    alloy_array_free(l);
    alloy_array_free(info);
    free(A);
    free(raw);
}

static const alloy_dtype DTS[2] = {ALLOY_FLOAT32, ALLOY_FLOAT64};

/* The op's own choice of kernel, every size, both triangles, both dtypes. */
static void test_sizes(void) {
    const int ns[] = {0, 1, 2, 7, 16, 33, 64, 100, 129, 256};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int up = 0; up < 2; up++) {
                chol_case t = {DTS[d], ns[i], ns[i] >= 129 ? 1 + 2 * up : 3, up, ALLOY_CHOLESKY_AUTO, (int)(i + up) % 2,
                               NULL, 0};
                run_chol(&t);
            }
}

/* Batches of 1000 small matrices (several per threadgroup on a GPU). */
static void test_large_batches(void) {
    const int ns[] = {2, 7, 16, 33};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int d = 0; d < 2; d++) {
            chol_case t = {DTS[d], ns[i], 1000, (int)i % 2, ALLOY_CHOLESKY_AUTO, d, NULL, 0};
            run_chol(&t);
        }
}

/* Failures inside a batch: only the failing matrices get info, and each
 * leaves the documented state; the others are untouched by them. */
static void test_failures(void) {
    static const int kinds[] = {SPD_LO, ZERO, NOT_SPD, HAS_NAN, SPD_LO, IDENTITY};
    const int ns[] = {1, 2, 7, 33, 100};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int up = 0; up < 2; up++) {
                chol_case t = {DTS[d], ns[i], 6, up, ALLOY_CHOLESKY_AUTO, 1, kinds, 6};
                run_chol(&t);
            }
}

/* Every kernel file through the op on this device (the GPU kernels run
 * correctly on the CPU too), failures included. */
static void test_paths(void) {
    static const int kinds[] = {SPD_LO, NOT_SPD, SPD_HI, HAS_NAN, ZERO, IDENTITY};
    const struct {
        alloy_cholesky_path path;
        int n;
        int64_t batch;
    } cases[] = {
        {ALLOY_CHOLESKY_CPU, 0, 3},           {ALLOY_CHOLESKY_CPU, 1, 6},           {ALLOY_CHOLESKY_CPU, 40, 6},
        {ALLOY_CHOLESKY_SMALL, 0, 3},         {ALLOY_CHOLESKY_SMALL, 1, 21},        {ALLOY_CHOLESKY_SMALL, 3, 37},
        {ALLOY_CHOLESKY_SMALL, 5, 13},        {ALLOY_CHOLESKY_SMALL, 16, 9},        {ALLOY_CHOLESKY_SMALL, 17, 6},
        {ALLOY_CHOLESKY_SMALL, 32, 7},        {ALLOY_CHOLESKY_BLOCKED_SMEM, 0, 2},  {ALLOY_CHOLESKY_BLOCKED_SMEM, 1, 6},
        {ALLOY_CHOLESKY_BLOCKED_SMEM, 31, 6}, {ALLOY_CHOLESKY_BLOCKED_SMEM, 33, 6}, {ALLOY_CHOLESKY_BLOCKED_SMEM, 64, 6},
        {ALLOY_CHOLESKY_BLOCKED_SMEM, 100, 6}, {ALLOY_CHOLESKY_BLOCKED_DEVICE, 1, 6},
        {ALLOY_CHOLESKY_BLOCKED_DEVICE, 33, 6}, {ALLOY_CHOLESKY_BLOCKED_DEVICE, 97, 6},
        {ALLOY_CHOLESKY_BLOCKED_DEVICE, 129, 2}, {ALLOY_CHOLESKY_REG, 0, 2},         {ALLOY_CHOLESKY_REG, 1, 5},
        {ALLOY_CHOLESKY_REG, 17, 3},          {ALLOY_CHOLESKY_REG, 33, 6},          {ALLOY_CHOLESKY_REG, 64, 4},
        {ALLOY_CHOLESKY_REG, 65, 3},          {ALLOY_CHOLESKY_REG, 100, 3},         {ALLOY_CHOLESKY_REG, 128, 2},
        /* batches that leave SIMD groups of the last threadgroup idle */
        {ALLOY_CHOLESKY_WARP, 0, 3},          {ALLOY_CHOLESKY_WARP, 1, 6},          {ALLOY_CHOLESKY_WARP, 5, 7},
        {ALLOY_CHOLESKY_WARP, 31, 6},         {ALLOY_CHOLESKY_WARP, 32, 9},         {ALLOY_CHOLESKY_WARP, 33, 6},
        {ALLOY_CHOLESKY_WARP, 47, 13},        {ALLOY_CHOLESKY_WARP, 63, 6},         {ALLOY_CHOLESKY_WARP, 64, 10},
        {ALLOY_CHOLESKY_TILED, 0, 2},         {ALLOY_CHOLESKY_TILED, 1, 6},         {ALLOY_CHOLESKY_TILED, 31, 6},
        {ALLOY_CHOLESKY_TILED, 32, 6},        {ALLOY_CHOLESKY_TILED, 33, 6},        {ALLOY_CHOLESKY_TILED, 64, 6},
        {ALLOY_CHOLESKY_TILED, 97, 6},        {ALLOY_CHOLESKY_TILED, 129, 6},       {ALLOY_CHOLESKY_TILED, 160, 3},
        {ALLOY_CHOLESKY_TILED, 191, 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int up = 0; up < 2; up++) {
                chol_case t = {DTS[d], cases[i].n, cases[i].batch, up, cases[i].path, (int)(i + d) % 2, kinds, 6};
                run_chol(&t);
            }
    /* 256 x 256 through device memory, once per dtype */
    for (int d = 0; d < 2; d++) {
        chol_case t = {DTS[d], 256, 1, d, ALLOY_CHOLESKY_BLOCKED_DEVICE, 1, NULL, 0};
        run_chol(&t);
    }
    /* the threadgroup-memory kernel at its float32 sizes (float64 takes n <= 192 on CUDA) */
    const int tiled_n[] = {250, 256, 288};
    for (size_t i = 0; i < sizeof tiled_n / sizeof tiled_n[0]; i++)
        for (int up = 0; up < 2; up++) {
            chol_case t = {ALLOY_FLOAT32, tiled_n[i], 6, up, ALLOY_CHOLESKY_TILED, (int)(i + up) % 2, kinds, 6};
            run_chol(&t);
        }
}

/* a read in place through strides: a transposed view of each matrix (the
 * "upper" triangle of the view is the stored lower one) and batch
 * dimensions that do not collapse (one launch per outer index), through the
 * op's own choice (n = 9) and the kernels that read a matrix in two ways
 * depending on its strides. */
static void run_strided(int n, alloy_cholesky_path path) {
    for (int d = 0; d < 2; d++)
        for (int up = 0; up < 2; up++) {
            const alloy_dtype dt = DTS[d];
            const size_t es = alloy_dtype_size(dt);
            const int64_t B0 = 2, B1 = 3, nn = (int64_t)n * n;
            /* storage (B1, B0, n, n); the view is (B0, B1, n, n) with its matrices transposed */
            double *A = malloc(sizeof(double) * (size_t)(B0 * B1 * nn));
            void *raw = malloc(es * (size_t)(B0 * B1 * nn));
            for (int64_t b = 0; b < B0 * B1; b++) make_spd(n, 100, A + b * nn);
            for (int64_t e = 0; e < B0 * B1 * nn; e++) put(dt, raw, e, A[e]);
            const int64_t shape[4] = {B0, B1, n, n}, strides[4] = {nn, B0 * nn, 1, n};
            alloy_array *view = NULL, *l = NULL, *info = NULL;
            CHECK_OK(ku_view_of_host(raw, B0 * B1 * nn, dt, 4, shape, strides, 0, &view));
            alloy_cholesky_options o;
            alloy_cholesky_options_init(&o);
            o.upper = up; /* either triangle of a symmetric matrix */
            CHECK_OK(alloy_cholesky_with_path(view, &o, path, NULL, &l, &info));
            if (l && info) {
                CHECK(alloy_array_ndim(info) == 2 && alloy_array_shape(info)[0] == B0 &&
                      alloy_array_shape(info)[1] == B1);
                void *got = malloc(es * (size_t)(B0 * B1 * nn));
                int32_t gi[6];
                long double *W = malloc(sizeof(long double) * (size_t)nn);
                CHECK_OK(alloy_array_copy_to_host(l, got, es * (size_t)(B0 * B1 * nn)));
                CHECK_OK(alloy_array_copy_to_host(info, gi, sizeof gi));
                int bad = 0;
                for (int64_t i0 = 0; i0 < B0; i0++)
                    for (int64_t i1 = 0; i1 < B1; i1++) {
                        const double *Am = A + (i1 * B0 + i0) * nn; /* symmetric: the transpose is itself */
                        CHECK(ref_chol(n, Am, W) == 0);
                        CHECK(gi[i0 * B1 + i1] == 0);
                        for (int i = 0; i < n; i++)
                            for (int j = 0; j < n; j++) {
                                const double g = get(dt, got, (i0 * B1 + i1) * nn + i * n + j);
                                const double r = up ? (j >= i ? (double)W[j * n + i] : 0)
                                                    : (j <= i ? (double)W[i * n + j] : 0);
                                if (!(fabs(g - r) <= (dt == ALLOY_FLOAT64 ? 1e-12 : 1e-4))) bad++;
                            }
                    }
                CHECK_MSG(bad == 0, "%d elements wrong (%s n=%d upper %d path %d)", bad, alloy_dtype_name(dt), n, up,
                          (int)path);
                free(got);
                free(W);
            }
            alloy_array_free(view);
            alloy_array_free(l);
            alloy_array_free(info);
            free(A);
            free(raw);
        }
}

static void test_strided(void) {
    run_strided(9, ALLOY_CHOLESKY_AUTO);
    run_strided(40, ALLOY_CHOLESKY_WARP);
    run_strided(64, ALLOY_CHOLESKY_WARP);
    run_strided(70, ALLOY_CHOLESKY_TILED);
}

static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s233[3] = {2, 3, 3}, s3[1] = {3}, s2[1] = {2};
    float z[18] = {0};
    int32_t zi[18] = {0};
    alloy_array *rect = NULL, *sq = NULL, *ints = NULL, *vec = NULL, *b3 = NULL, *l = NULL, *info = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s23, z, &rect));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 3, s233, z, &b3));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s33, z, &sq));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 2, s33, zi, &ints));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, s3, z, &vec));
    CHECK_FAILS(alloy_cholesky(NULL, NULL, NULL, &l, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is NULL");
    CHECK_FAILS(alloy_cholesky(sq, NULL, NULL, NULL, &info), ALLOY_ERROR_INVALID_ARGUMENT, "out is NULL");
    CHECK_FAILS(alloy_cholesky(rect, NULL, NULL, &l, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is not square");
    CHECK_FAILS(alloy_cholesky(vec, NULL, NULL, &l, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is 1-D");
    CHECK_FAILS(alloy_cholesky(ints, NULL, NULL, &l, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    CHECK(l == NULL && info == NULL);
    /* a wrong out / info */
    alloy_array *wrong = rect;
    CHECK_FAILS(alloy_cholesky(sq, NULL, NULL, &wrong, &info), ALLOY_ERROR_INVALID_ARGUMENT, "out must have a's shape");
    wrong = ints;
    CHECK_FAILS(alloy_cholesky(sq, NULL, NULL, &wrong, &info), ALLOY_ERROR_INVALID_ARGUMENT, "out is int32 but a is float32");
    alloy_array *winfo = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s3, zi, &winfo));
    CHECK_FAILS(alloy_cholesky(b3, NULL, NULL, &l, &winfo), ALLOY_ERROR_INVALID_ARGUMENT, "info has the wrong shape");
    alloy_array_free(winfo);
    winfo = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, s2, z, &winfo));
    CHECK_FAILS(alloy_cholesky(b3, NULL, NULL, &l, &winfo), ALLOY_ERROR_INVALID_ARGUMENT, "info is float32; it must be int32");
    alloy_array_free(winfo);
    CHECK(l == NULL);
    /* info may be left out; a single matrix has a 0-d info */
    CHECK_OK(alloy_cholesky(b3, NULL, NULL, &l, NULL));
    alloy_array_free(l);
    l = NULL;
    CHECK_OK(alloy_cholesky(sq, NULL, NULL, &l, &info));
    if (info) {
        int32_t code = -1;
        CHECK(alloy_array_ndim(info) == 0);
        CHECK_OK(alloy_array_copy_to_host(info, &code, sizeof code));
        CHECK(code == 1); /* the zero matrix */
    }
    alloy_array_free(l);
    alloy_array_free(info);
    l = NULL;
    info = NULL;
    /* the solve */
    alloy_array *x = NULL;
    CHECK_FAILS(alloy_cholesky_solve(sq, rect, NULL, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "b has 2 rows but factor is 3 x 3");
    CHECK_FAILS(alloy_cholesky_solve(rect, sq, NULL, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "factor is not square");
    CHECK_FAILS(alloy_cholesky_solve(sq, ints, NULL, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "factor is float32 but b is int32");
    CHECK_FAILS(alloy_cholesky_solve(ints, ints, NULL, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "factor is int32");
    CHECK_FAILS(alloy_cholesky_solve(sq, NULL, NULL, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "b is NULL");
    int64_t s433[3] = {4, 3, 3};
    alloy_array *b4 = NULL;
    float z36[36] = {0};
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 3, s433, z36, &b4));
    CHECK_FAILS(alloy_cholesky_solve(b3, b4, NULL, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "do not broadcast");
    wrong = rect;
    CHECK_FAILS(alloy_cholesky_solve(sq, sq, NULL, NULL, &wrong), ALLOY_ERROR_INVALID_ARGUMENT, "out has the wrong shape");
    CHECK(x == NULL);
    alloy_array_free(b4);
    alloy_array_free(rect);
    alloy_array_free(b3);
    alloy_array_free(sq);
    alloy_array_free(ints);
    alloy_array_free(vec);
}

/* ---- the solve ---------------------------------------------------------------- */

/* Factor with alloy_cholesky, solve with alloy_cholesky_solve, and check the
 * normwise backward error of each solution, ||A x - b|| / (||A|| ||x|| + ||b||)
 * (infinity norms, per column), against LAPACK's level. */
static void run_solve(alloy_dtype dt, int n, int64_t fb, int64_t bb, int k, int vec, int upper, int give_out) {
    const size_t es = alloy_dtype_size(dt);
    const int64_t nn = (int64_t)n * n, nb = (int64_t)n * k;
    const int64_t batch = fb > bb ? fb : bb;
    const size_t na = (size_t)(fb * nn) + 1, nbe = (size_t)(bb * nb) + 1;
    double *A = malloc(sizeof(double) * na), *B = malloc(sizeof(double) * nbe);
    void *ra = malloc(es * na), *rb = malloc(es * nbe);
    for (int64_t b = 0; b < fb; b++) make_matrix(dt, n, b % 2 ? SPD_HI : SPD_LO, A + b * nn);
    for (int64_t e = 0; e < fb * nn; e++) put(dt, ra, e, A[e]);
    for (int64_t e = 0; e < bb * nb; e++) {
        put(dt, rb, e, harness_uniform(-1, 1));
        B[e] = get(dt, rb, e);
    }
    int64_t ashape[3] = {fb, n, n}, bshape[3] = {bb, n, k}, b1[1] = {n};
    alloy_array *a = NULL, *bm = NULL, *l = NULL, *info = NULL, *x = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), dt, 3, ashape, ra, &a));
    if (vec) CHECK_OK(alloy_array_from_host(ku_device(), dt, 1, b1, rb, &bm));
    else CHECK_OK(alloy_array_from_host(ku_device(), dt, 3, bshape, rb, &bm));
    alloy_cholesky_options o;
    alloy_cholesky_options_init(&o);
    o.upper = upper;
    CHECK_OK(alloy_cholesky(a, &o, NULL, &l, &info));
    if (give_out) {
        int64_t xs[3] = {batch, n, k}, xv[2] = {fb, n};
        if (vec) CHECK_OK(alloy_array_new(ku_device(), dt, 2, xv, &x));
        else CHECK_OK(alloy_array_new(ku_device(), dt, 3, xs, &x));
        CHECK_OK(alloy_array_fill(x, NAN));
    }
    CHECK_OK(alloy_cholesky_solve(l, bm, &o, NULL, &x));
    if (x) {
        const int64_t xn = vec ? fb * n : batch * nb;
        CHECK(alloy_array_size(x) == xn);
        void *got = malloc(es * (size_t)(xn ? xn : 1));
        CHECK_OK(alloy_array_copy_to_host(x, got, es * (size_t)xn));
        const double u = unit_roundoff(dt);
        int bad = 0;
        for (int64_t b = 0; b < batch; b++) {
            const double *Ab = A + (fb == 1 ? 0 : b) * nn;
            const double *Bb = vec ? B : B + (bb == 1 ? 0 : b) * nb;
            double anorm = 0;
            for (int i = 0; i < n; i++) {
                double s = 0;
                for (int j = 0; j < n; j++) s += fabs(Ab[i * n + j]);
                if (s > anorm) anorm = s;
            }
            const int kk = vec ? 1 : k;
            for (int c = 0; c < kk; c++) {
                double rmax = 0, xmax = 0, bmax = 0;
                for (int i = 0; i < n; i++) {
                    long double s = 0;
                    for (int j = 0; j < n; j++)
                        s += (long double)Ab[i * n + j] * get(dt, got, b * (vec ? n : nb) + (int64_t)j * kk + c);
                    const double bi = Bb[i * kk + c];
                    const double r = fabs((double)(s - bi));
                    const double xi = fabs(get(dt, got, b * (vec ? n : nb) + (int64_t)i * kk + c));
                    rmax = r > rmax || isnan(r) ? r : rmax;
                    xmax = xi > xmax || isnan(xi) ? xi : xmax;
                    bmax = fabs(bi) > bmax ? fabs(bi) : bmax;
                }
                const double eta = n ? rmax / (anorm * xmax + bmax) : 0.0;
                if (!(eta <= 10.0 * n * u)) {
                    if (bad < 4)
                        fprintf(stderr, "  solve %s n=%d k=%d upper=%d matrix %lld column %d: backward error %.3g\n",
                                alloy_dtype_name(dt), n, k, upper, (long long)b, c, eta);
                    bad++;
                }
            }
        }
        CHECK_MSG(bad == 0, "%d columns with a large backward error", bad);
        free(got);
    }
    alloy_array_free(a);
    alloy_array_free(bm);
    alloy_array_free(l);
    alloy_array_free(info);
    alloy_array_free(x);
    free(A);
    free(B);
    free(ra);
    free(rb);
}

static void test_solve(void) {
    const int ns[] = {1, 7, 33, 100};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int up = 0; up < 2; up++) {
                run_solve(DTS[d], ns[i], 3, 3, 1, 0, up, 0);
                run_solve(DTS[d], ns[i], 2, 2, 40, 0, up, 1); /* two chunks of right-hand sides */
                run_solve(DTS[d], ns[i], 3, 1, 5, 0, up, (int)i % 2); /* b broadcast over the factors */
                run_solve(DTS[d], ns[i], 2, 1, 1, 1, up, 1);          /* a 1-D b */
            }
    run_solve(ALLOY_FLOAT32, 16, 1000, 1000, 2, 0, 0, 0);
    run_solve(ALLOY_FLOAT64, 0, 3, 3, 4, 0, 0, 1);
    run_solve(ALLOY_FLOAT64, 256, 1, 1, 3, 0, 1, 0);
}

int main(void) {
    harness_seed();
    RUN(test_sizes);
    RUN(test_large_batches);
    RUN(test_failures);
    RUN(test_paths);
    RUN(test_strided);
    RUN(test_errors);
    RUN(test_solve);
    return harness_finish();
}
