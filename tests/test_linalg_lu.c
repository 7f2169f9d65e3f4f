/* test_linalg_lu.c — alloy_lu_factor, alloy_lu_solve, alloy_solve, alloy_inv,
 * alloy_det and alloy_slogdet (alloy/linalg.h) against a plain C
 * implementation of the same partial pivoting in long double: backward
 * error ||PA - LU|| / ||A|| <= 10 n u, pivots equal to the reference's up to
 * the first near-tie, solve and inverse residuals at LAPACK's level, info,
 * determinants, every output element written (given outputs are pre-filled
 * with NaN and sentinels), one bad matrix in a batch affecting only itself,
 * and the errors that name their argument. Each GPU kernel file is also run
 * here through the op's own launch code with the kernel forced, so the CPU
 * executes (and the NVRTC check compiles) the CUDA kernels too. On the
 * device the tests run on (ALLOY_DEVICE, default cpu). */
#include <float.h>

#include "harness.h"
#include "kernel_util.h"

#include "alloy/linalg.h"
#include "ops/linalg/lu_internal.h"

/* ---- matrices ------------------------------------------------------------- */

enum { K_RANDOM, K_COND, K_ZERO_LEAD, K_PERM, K_DUP_ROWS, K_ZERO_COL, K_ZERO, K_NAN, K_DOMINANT };

/* malloc size of `count` elements of `size` bytes (at least one). */
static size_t bytes(int64_t count, size_t size) { return (size_t)(count > 0 ? count : 1) * size; }

static double unit_round(alloy_dtype dt) { return dt == ALLOY_FLOAT64 ? DBL_EPSILON / 2 : FLT_EPSILON / 2; }

static double store(alloy_dtype dt, double x) { return dt == ALLOY_FLOAT64 ? x : (double)(float)x; }

/* x := H x for the Householder reflection of v, applied to the rows (left)
 * or the columns (right) of the n x n matrix a. */
static void reflect(double *a, int64_t n, const double *v, int left) {
    double vv = 0;
    for (int64_t i = 0; i < n; i++) vv += v[i] * v[i];
    if (vv == 0) return;
    for (int64_t c = 0; c < n; c++) {
        double d = 0;
        for (int64_t i = 0; i < n; i++) d += v[i] * (left ? a[i * n + c] : a[c * n + i]);
        d *= 2 / vv;
        for (int64_t i = 0; i < n; i++) *(left ? &a[i * n + c] : &a[c * n + i]) -= d * v[i];
    }
}

/* One n x n matrix of the kind, its values rounded to dt. */
static void gen(alloy_dtype dt, int64_t n, int kind, double cond, double *a) {
    const int64_t nn = n * n;
    for (int64_t e = 0; e < nn; e++) a[e] = harness_uniform(-1, 1);
    switch (kind) {
    case K_COND: {
        /* P H1 diag(s) H2 H3, singular values from 1 down to 1/cond
         * (geometrically), rows permuted at random */
        double *v = malloc(bytes(n, sizeof(double)));
        for (int64_t e = 0; e < nn; e++) a[e] = 0;
        for (int64_t i = 0; i < n; i++) a[i * n + i] = n > 1 ? pow(cond, -(double)i / (double)(n - 1)) : 1;
        for (int h = 0; h < 3; h++) {
            for (int64_t i = 0; i < n; i++) v[i] = harness_uniform(-1, 1);
            reflect(a, n, v, h == 0);
        }
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(harness_rand_u64() % (uint64_t)(i + 1));
            for (int64_t c = 0; c < n; c++) {
                double t = a[i * n + c];
                a[i * n + c] = a[j * n + c];
                a[j * n + c] = t;
            }
        }
        free(v);
        break;
    }
    case K_ZERO_LEAD: a[0] = 0; break;
    case K_PERM: {
        int64_t *p = malloc(bytes(n, sizeof(int64_t)));
        for (int64_t i = 0; i < n; i++) p[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(harness_rand_u64() % (uint64_t)(i + 1)), t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        for (int64_t e = 0; e < nn; e++) a[e] = 0;
        for (int64_t i = 0; i < n; i++) a[i * n + p[i]] = 1;
        free(p);
        break;
    }
    case K_DUP_ROWS: /* rows 0 and n - 1 equal: an exact zero pivot appears */
        if (n > 1)
            for (int64_t c = 0; c < n; c++) a[(n - 1) * n + c] = a[c];
        break;
    case K_ZERO_COL:
        for (int64_t i = 0; i < n; i++) a[i * n + n / 2] = 0;
        break;
    case K_ZERO:
        for (int64_t e = 0; e < nn; e++) a[e] = 0;
        break;
    case K_NAN:
        if (nn) a[(n / 2) * n + n / 3] = NAN;
        break;
    case K_DOMINANT:
        for (int64_t i = 0; i < n; i++) a[i * n + i] += (double)n;
        break;
    default: break;
    }
    for (int64_t e = 0; e < nn; e++) a[e] = store(dt, a[e]);
}

static alloy_array *device_array(alloy_dtype dt, int nd, const int64_t *shape, const double *v) {
    int64_t count = 1;
    for (int d = 0; d < nd; d++) count *= shape[d];
    void *raw = malloc((size_t)(count ? count : 1) * 8);
    for (int64_t i = 0; i < count; i++) {
        if (dt == ALLOY_FLOAT64) ((double *)raw)[i] = v[i];
        else if (dt == ALLOY_FLOAT32) ((float *)raw)[i] = (float)v[i];
        else ((int32_t *)raw)[i] = (int32_t)v[i];
    }
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), dt, nd, shape, raw, &a));
    free(raw);
    return a;
}

/* An array of the shape pre-filled with NaN (floats) or -7777 (int32). */
static alloy_array *prefilled(alloy_dtype dt, int nd, const int64_t *shape) {
    int64_t count = 1;
    for (int d = 0; d < nd; d++) count *= shape[d];
    double *v = malloc(bytes(count, sizeof(double)));
    for (int64_t i = 0; i < count; i++) v[i] = dt == ALLOY_INT32 ? -7777 : NAN;
    alloy_array *a = device_array(dt, nd, shape, v);
    free(v);
    return a;
}

/* The array's elements as doubles (NULL after a failed check). */
static double *host_values(alloy_array *x) {
    if (!x) return NULL;
    const int64_t count = alloy_array_size(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    void *raw = malloc((size_t)(count ? count : 1) * 8);
    double *v = malloc(bytes(count, sizeof(double)));
    alloy_status st = alloy_array_copy_to_host(x, raw, (size_t)count * alloy_dtype_size(dt));
    CHECK_OK(st);
    for (int64_t i = 0; i < count; i++)
        v[i] = dt == ALLOY_FLOAT64 ? ((double *)raw)[i] : dt == ALLOY_FLOAT32 ? ((float *)raw)[i] : ((int32_t *)raw)[i];
    free(raw);
    if (st != ALLOY_OK) {
        free(v);
        return NULL;
    }
    return v;
}

/* ---- the reference ---------------------------------------------------------- */

/* getrf in long double with the same pivoting (first maximum of |a|).
 * gap[k]: how far the pivot's |value| stood above the next candidate's
 * (a near-tie can go either way in the tested precision). Returns info. */
static int ref_lu(const double *a, int64_t n, long double *lu, int *ipiv, long double *gap) {
    for (int64_t e = 0; e < n * n; e++) lu[e] = a[e];
    int info = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t p = k;
        long double best = fabsl(lu[k * n + k]), second = -1;
        for (int64_t i = k + 1; i < n; i++) {
            long double v = fabsl(lu[i * n + k]);
            if (v > best) {
                second = best;
                best = v;
                p = i;
            } else if (v > second) {
                second = v;
            }
        }
        gap[k] = second < 0 ? INFINITY : best - second;
        ipiv[k] = (int)p + 1;
        if (p != k)
            for (int64_t c = 0; c < n; c++) {
                long double t = lu[k * n + c];
                lu[k * n + c] = lu[p * n + c];
                lu[p * n + c] = t;
            }
        long double piv = lu[k * n + k];
        if (piv == 0) {
            if (!info) info = (int)k + 1;
        } else {
            for (int64_t i = k + 1; i < n; i++) lu[i * n + k] /= piv;
        }
        for (int64_t i = k + 1; i < n; i++)
            for (int64_t c = k + 1; c < n; c++) lu[i * n + c] -= lu[i * n + k] * lu[k * n + c];
    }
    return info;
}

/* ||P A - L U||_1 / ||A||_1 for a computed factor (L, U from lu, P from
 * ipiv); 0 for a zero matrix that factors exactly. */
static double backward_error(const double *a, const double *lu, const double *ipiv, int64_t n) {
    long double *pa = malloc(bytes(n * n, sizeof(long double)));
    for (int64_t e = 0; e < n * n; e++) pa[e] = a[e];
    for (int64_t k = 0; k < n; k++) {
        int64_t p = (int64_t)ipiv[k] - 1;
        if (p < 0 || p >= n) p = k;
        for (int64_t c = 0; c < n; c++) {
            long double t = pa[k * n + c];
            pa[k * n + c] = pa[p * n + c];
            pa[p * n + c] = t;
        }
    }
    long double worst = 0, anorm = 0;
    for (int64_t c = 0; c < n; c++) {
        long double col = 0, acol = 0;
        for (int64_t i = 0; i < n; i++) {
            long double s = 0;
            for (int64_t k = 0; k <= (i < c ? i : c); k++) {
                long double l = k == i ? 1.0L : lu[i * n + k];
                s += l * lu[k * n + c];
            }
            col += fabsl(pa[i * n + c] - s);
            acol += fabsl(pa[i * n + c]);
        }
        if (col > worst || isnan(col)) worst = col;
        if (acol > anorm) anorm = acol;
    }
    free(pa);
    if (anorm == 0) return (double)worst;
    return (double)(worst / anorm);
}

static double norm1(const double *a, int64_t rows, int64_t cols) {
    double m = 0;
    for (int64_t c = 0; c < cols; c++) {
        double s = 0;
        for (int64_t r = 0; r < rows; r++) s += fabs(a[r * cols + c]);
        if (s > m) m = s;
    }
    return m;
}

/* ||B - op(A) X||_1 / (||A||_1 ||X||_1 + ||B||_1), the normwise backward
 * error of a solve. */
static double solve_residual(const double *a, const double *x, const double *b, int64_t n, int64_t k,
                             int trans) {
    double worst = 0;
    for (int64_t c = 0; c < k; c++) {
        long double col = 0;
        for (int64_t i = 0; i < n; i++) {
            long double s = b ? b[i * k + c] : (i == c ? 1.0L : 0.0L);
            for (int64_t j = 0; j < n; j++) s -= (long double)(trans ? a[j * n + i] : a[i * n + j]) * x[j * k + c];
            col += fabsl(s);
        }
        if (col > worst || isnan((double)col)) worst = (double)col;
    }
    double an = norm1(a, n, n), xn = norm1(x, n, k), bn = b ? norm1(b, n, k) : 1.0;
    if (trans) { /* ||A^T||_1 = ||A||_inf */
        an = 0;
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t j = 0; j < n; j++) s += fabs(a[i * n + j]);
            if (s > an) an = s;
        }
    }
    return worst / (an * xn + bn);
}

/* ---- factor ---------------------------------------------------------------- */

typedef struct fcase {
    alloy_dtype dt;
    int nlead;
    int64_t lead[2];
    int64_t n;
    int kind;           /* for every matrix, unless kinds is set */
    const int *kinds;   /* per matrix (length batch) */
    double cond;
    alloy_lu_path path;
    int give;           /* outputs given, pre-filled */
    int in_place;
} fcase;

static int64_t batch_of(const fcase *t) {
    int64_t b = 1;
    for (int d = 0; d < t->nlead; d++) b *= t->lead[d];
    return b;
}

/* Factors the batch and checks every matrix; returns the factor arrays'
 * host copies through the pointers when they are not NULL. */
static void run_factor_case(const fcase *t) {
    const int64_t n = t->n, batch = batch_of(t), nn = n * n;
    int nd = t->nlead + 2;
    int64_t shape[4];
    for (int d = 0; d < t->nlead; d++) shape[d] = t->lead[d];
    shape[t->nlead] = shape[t->nlead + 1] = n;
    double *a = malloc(bytes(batch * nn, sizeof(double)));
    for (int64_t m = 0; m < batch; m++) gen(t->dt, n, t->kinds ? t->kinds[m] : t->kind, t->cond, a + m * nn);
    alloy_array *A = device_array(t->dt, nd, shape, a);
    alloy_array *lu = NULL, *piv = NULL, *info = NULL;
    if (t->in_place) lu = A;
    if (t->give) {
        if (!t->in_place) lu = prefilled(t->dt, nd, shape);
        piv = prefilled(ALLOY_INT32, nd - 1, shape);
        info = prefilled(ALLOY_INT32, nd - 2, shape);
    }
    alloy_array *given_lu = lu, *given_piv = piv, *given_info = info;
    CHECK_OK(alloy_lu_factor_path(A, t->path, NULL, &lu, &piv, &info));
    CHECK(!given_lu || lu == given_lu);
    CHECK(!given_piv || piv == given_piv);
    CHECK(!given_info || info == given_info);
    double *LU = host_values(lu), *P = host_values(piv), *I = host_values(info);
    if (LU && P && I) {
        CHECK(alloy_array_ndim(lu) == nd && alloy_array_ndim(piv) == nd - 1 && alloy_array_ndim(info) == nd - 2);
        const double u = unit_round(t->dt);
        long double *rlu = malloc(bytes(nn, sizeof(long double)));
        long double *gap = malloc(bytes(n, sizeof(long double)));
        int *ripiv = malloc(bytes(n, sizeof(int)));
        int bad = 0;
        for (int64_t m = 0; m < batch; m++) {
            const int kind = t->kinds ? t->kinds[m] : t->kind;
            const double *am = a + m * nn, *lm = LU + m * nn, *pm = P + m * n;
            const int im = (int)I[m];
            char why[200] = "";
            /* pivots: LAPACK's range; info: 0 or a step */
            for (int64_t k = 0; k < n && !why[0]; k++)
                if (!(pm[k] >= (double)(k + 1) && pm[k] <= (double)n))
                    snprintf(why, sizeof why, "ipiv[%lld] = %g is outside [%lld, %lld]", (long long)k, pm[k],
                             (long long)k + 1, (long long)n);
            if (!why[0] && !(im >= 0 && im <= n)) snprintf(why, sizeof why, "info = %d", im);
            if (kind == K_NAN) {
                int has_nan = 0;
                for (int64_t e = 0; e < nn; e++) has_nan |= isnan(lm[e]);
                if (!why[0] && nn && !has_nan) snprintf(why, sizeof why, "a NaN matrix factored without NaN");
            } else if (!why[0]) {
                for (int64_t e = 0; e < nn && !why[0]; e++)
                    if (isnan(lm[e])) snprintf(why, sizeof why, "LU[%lld] is NaN (unwritten?)", (long long)e);
                const int rinfo = ref_lu(am, n, rlu, ripiv, gap);
                /* pivots as the reference's up to the first near-tie */
                double amax = 0;
                for (int64_t e = 0; e < nn; e++) amax = fmax(amax, fabs(am[e]));
                for (int64_t e = 0; e < nn; e++) amax = fmax(amax, fabs(lm[e]));
                const long double tie = 16.0L * (long double)n * u * amax;
                int64_t matched = 0;
                for (int64_t k = 0; k < n && !why[0]; k++) {
                    if (gap[k] <= tie) break; /* step k itself is a near-tie: either pivot is right */
                    if (pm[k] != ripiv[k])
                        snprintf(why, sizeof why, "ipiv[%lld] = %g but the reference's is %d (gap %.3Lg)",
                                 (long long)k, pm[k], ripiv[k], gap[k]);
                    matched = k + 1;
                }
                if (!why[0]) {
                    const int exact = kind == K_DUP_ROWS || kind == K_ZERO_COL || kind == K_ZERO || kind == K_PERM;
                    if (matched == n && (exact || rinfo == 0) && im != rinfo)
                        snprintf(why, sizeof why, "info = %d but the reference's is %d", im, rinfo);
                    if ((kind == K_ZERO_COL || kind == K_ZERO || (kind == K_DUP_ROWS && n > 1)) && im == 0)
                        snprintf(why, sizeof why, "a singular matrix has info 0");
                    if ((kind == K_RANDOM || kind == K_DOMINANT || kind == K_PERM || kind == K_ZERO_LEAD) && im != 0 &&
                        n > 1)
                        snprintf(why, sizeof why, "info = %d for a nonsingular matrix", im);
                }
                if (!why[0]) {
                    const double be = backward_error(am, lm, pm, n), bound = 10.0 * (double)(n ? n : 1) * u;
                    if (!(be <= bound))
                        snprintf(why, sizeof why, "||PA - LU|| / ||A|| = %.3g > 10 n u = %.3g", be, bound);
                }
            }
            if (why[0]) {
                if (bad < 4)
                    fprintf(stderr, "  %s n=%lld path %d matrix %lld of %lld (kind %d): %s\n",
                            alloy_dtype_name(t->dt), (long long)n, (int)t->path, (long long)m, (long long)batch,
                            kind, why);
                bad++;
            }
        }
        CHECK_MSG(bad == 0, "%d of %lld matrices wrong", bad, (long long)batch);
        free(rlu);
        free(gap);
        free(ripiv);
    }
    free(LU);
    free(P);
    free(I);
    if (lu != A) alloy_array_free(lu);
    alloy_array_free(piv);
    alloy_array_free(info);
    alloy_array_free(A);
    free(a);
}

static void factor_sizes(alloy_dtype dt) {
    const struct { int64_t n, batch; } sizes[] = {{0, 3}, {1, 3}, {2, 1000}, {7, 1000}, {16, 1000}, {16, 3},
                                                   {33, 3}, {64, 3}, {100, 3}, {129, 1}, {256, 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        fcase t = {dt, 1, {sizes[i].batch, 0}, sizes[i].n, K_RANDOM, NULL, 0, ALLOY_LU_AUTO, (int)(i & 1), 0};
        run_factor_case(&t);
    }
}

static void test_factor_f32(void) { factor_sizes(ALLOY_FLOAT32); }
static void test_factor_f64(void) { factor_sizes(ALLOY_FLOAT64); }

static void test_factor_conditioned(void) {
    const double conds32[2] = {1e3, 1e6}, conds64[3] = {1e3, 1e6, 1e12};
    const int64_t ns[4] = {7, 33, 64, 100};
    for (int i = 0; i < 4; i++) {
        for (int c = 0; c < 2; c++) {
            fcase t = {ALLOY_FLOAT32, 1, {3, 0}, ns[i], K_COND, NULL, conds32[c], ALLOY_LU_AUTO, 1, 0};
            run_factor_case(&t);
        }
        for (int c = 0; c < 3; c++) {
            fcase t = {ALLOY_FLOAT64, 1, {3, 0}, ns[i], K_COND, NULL, conds64[c], ALLOY_LU_AUTO, 0, 0};
            run_factor_case(&t);
        }
    }
}

/* Zero leading entries, permutation matrices, exactly singular matrices,
 * and one bad matrix in the middle of a batch. */
static void test_factor_pivoting_singular(void) {
    const int64_t ns[6] = {1, 2, 7, 16, 33, 64};
    const int kinds[6] = {K_ZERO_LEAD, K_PERM, K_DUP_ROWS, K_ZERO_COL, K_ZERO, K_DOMINANT};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 6; i++)
            for (int k = 0; k < 6; k++) {
                fcase t = {d ? ALLOY_FLOAT64 : ALLOY_FLOAT32, 1, {2, 0}, ns[i], kinds[k], NULL, 0, ALLOY_LU_AUTO, 1, 0};
                run_factor_case(&t);
            }
    /* one singular and one NaN matrix among good ones; a (2, 3) batch */
    const int mixed[6] = {K_RANDOM, K_RANDOM, K_DUP_ROWS, K_NAN, K_RANDOM, K_ZERO_LEAD};
    for (int d = 0; d < 2; d++)
        for (int i = 2; i < 6; i++) {
            fcase t = {d ? ALLOY_FLOAT64 : ALLOY_FLOAT32, 2, {2, 3}, ns[i], K_RANDOM, mixed, 0, ALLOY_LU_AUTO, 1, 0};
            run_factor_case(&t);
        }
}

static void test_factor_in_place(void) {
    fcase t = {ALLOY_FLOAT32, 1, {5, 0}, 20, K_RANDOM, NULL, 0, ALLOY_LU_AUTO, 1, 1};
    run_factor_case(&t);
    fcase u = {ALLOY_FLOAT64, 0, {0, 0}, 70, K_RANDOM, NULL, 0, ALLOY_LU_AUTO, 0, 1};
    run_factor_case(&u);
}

/* ---- solve, inverse --------------------------------------------------------- */

typedef struct scase {
    alloy_dtype dt;
    int64_t batch, n, nrhs; /* nrhs < 0: b is (batch, n), one vector per matrix */
    int trans;
    int kind;
    double cond;
    alloy_lu_path path;
    int combined; /* 1: alloy_solve (factor + solve), 2: alloy_inv */
    int in_place; /* 1: x is b; 2: x is a (alloy_solve with nrhs = n) */
} scase;

static void run_solve_case(const scase *t) {
    const int64_t n = t->n, batch = t->batch, nn = n * n, k = t->nrhs < 0 ? 1 : t->nrhs;
    const int inv = t->combined == 2;
    int64_t ashape[3] = {batch, n, n}, bshape[3] = {batch, n, inv ? n : k};
    const int bnd = t->nrhs < 0 ? 2 : 3;
    const int64_t kk = inv ? n : k;
    double *a = malloc(bytes(batch * nn, sizeof(double)));
    double *b = malloc(bytes(batch * n * kk, sizeof(double)));
    for (int64_t m = 0; m < batch; m++) gen(t->dt, n, t->kind, t->cond, a + m * nn);
    for (int64_t e = 0; e < batch * n * kk; e++) b[e] = store(t->dt, harness_uniform(-1, 1));
    alloy_array *A = device_array(t->dt, 3, ashape, a), *B = inv ? NULL : device_array(t->dt, bnd, bshape, b);
    alloy_array *x = NULL, *info = NULL;
    if (t->in_place) x = inv || t->in_place == 2 ? A : B;
    else if (t->nrhs != 2) x = prefilled(t->dt, inv ? 3 : bnd, inv ? ashape : bshape); /* else a new one */
    alloy_array *given = x;
    if (t->combined == 1) {
        info = prefilled(ALLOY_INT32, 1, ashape);
        CHECK_OK(alloy_solve_path(A, B, t->path, NULL, &x, &info));
    } else if (inv) {
        CHECK_OK(alloy_inv_path(A, t->path, NULL, &x, &info));
    } else {
        alloy_array *lu = NULL, *piv = NULL;
        CHECK_OK(alloy_lu_factor_path(A, t->path, NULL, &lu, &piv, &info));
        CHECK_OK(alloy_lu_solve_path(lu, piv, B, t->trans, t->path, NULL, &x));
        alloy_array_free(lu);
        alloy_array_free(piv);
    }
    CHECK(!given || x == given);
    double *X = host_values(x), *I = host_values(info);
    if (X && I) {
        const double u = unit_round(t->dt);
        int bad = 0;
        for (int64_t m = 0; m < batch; m++) {
            const double r = solve_residual(a + m * nn, X + m * n * kk, inv ? NULL : b + m * n * kk, n, kk, t->trans);
            const double bound = 20.0 * (double)n * u;
            if (I[m] != 0 || !(r <= bound)) {
                if (bad < 4)
                    fprintf(stderr, "  %s %s n=%lld nrhs=%lld trans=%d path %d matrix %lld: info %g, residual %.3g > %.3g\n",
                            inv ? "inv" : t->combined ? "solve" : "lu_solve", alloy_dtype_name(t->dt), (long long)n,
                            (long long)kk, t->trans, (int)t->path, (long long)m, I[m], r, bound);
                bad++;
            }
        }
        CHECK_MSG(bad == 0, "%d of %lld solves wrong", bad, (long long)batch);
    }
    free(X);
    free(I);
    if (x != A && x != B) alloy_array_free(x);
    alloy_array_free(info);
    alloy_array_free(A);
    alloy_array_free(B);
    free(a);
    free(b);
}

static void test_solve(void) {
    const int64_t ns[9] = {1, 2, 7, 16, 33, 64, 100, 129, 256};
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        for (int i = 0; i < 9; i++) {
            const int64_t batch = ns[i] >= 129 ? 1 : 3;
            scase t = {dt, batch, ns[i], i % 3 == 0 ? -1 : i % 3 == 1 ? 1 : 5, i & 1, K_RANDOM, 0, ALLOY_LU_AUTO, 0, 0};
            run_solve_case(&t);
            scase s = {dt, batch, ns[i], 3, 0, K_RANDOM, 0, ALLOY_LU_AUTO, 1, i == 4};
            run_solve_case(&s);
        }
        scase big = {dt, 1000, 8, 2, 0, K_RANDOM, 0, ALLOY_LU_AUTO, 1, 0};
        run_solve_case(&big);
        for (int c = 0; c < 3; c++) {
            scase t = {dt, 3, 40, 4, c & 1, K_COND, c == 0 ? 1e3 : c == 1 ? 1e6 : (d ? 1e12 : 1e6), ALLOY_LU_AUTO, 0, 0};
            run_solve_case(&t);
        }
    }
}

static void test_inverse(void) {
    const int64_t ns[6] = {1, 3, 16, 33, 64, 129};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 6; i++) {
            scase t = {d ? ALLOY_FLOAT64 : ALLOY_FLOAT32, ns[i] > 100 ? 1 : 3, ns[i], 0, 0, i == 3 ? K_COND : K_RANDOM,
                       1e6, ALLOY_LU_AUTO, 2, i == 2};
            run_solve_case(&t);
        }
}

/* Singular and NaN matrices in a batch of solves (alloy_solve through
 * `path`): info as the long-double reference's and as alloy_inv's, inf/NaN
 * only there, the others solved. */
static void bad_matrices_case(alloy_dtype dt, alloy_lu_path path, int64_t n, int64_t k) {
    const int64_t batch = 7, nn = n * n;
    int64_t ashape[3] = {batch, n, n}, bshape[3] = {batch, n, k};
    const int kinds[7] = {K_RANDOM, K_ZERO_COL, K_RANDOM, K_NAN, K_DUP_ROWS, K_ZERO, K_RANDOM};
    double *a = malloc(bytes(batch * nn, sizeof(double))), *b = malloc(bytes(batch * n * k, sizeof(double)));
    long double *lu = malloc(bytes(nn, sizeof(long double))), *gap = malloc(bytes(n, sizeof(long double)));
    int *ipiv = malloc(bytes(n, sizeof(int)));
    for (int64_t m = 0; m < batch; m++) gen(dt, n, kinds[m], 0, a + m * nn);
    for (int64_t e = 0; e < batch * n * k; e++) b[e] = store(dt, harness_uniform(-1, 1));
    alloy_array *A = device_array(dt, 3, ashape, a), *B = device_array(dt, 3, bshape, b);
    alloy_array *x = NULL, *info = NULL, *inv = NULL, *inv_info = NULL;
    CHECK_OK(alloy_solve_path(A, B, path, NULL, &x, &info));
    CHECK_OK(alloy_inv(A, NULL, &inv, &inv_info));
    double *X = host_values(x), *I = host_values(info), *V = host_values(inv), *VI = host_values(inv_info);
    if (X && I && V && VI) {
        for (int64_t m = 0; m < batch; m++) {
            CHECK_MSG(I[m] == VI[m], "n=%lld path %d matrix %lld: solve's info %g, inv's %g", (long long)n, (int)path,
                      (long long)m, I[m], VI[m]);
            int finite = 1;
            for (int64_t e = 0; e < n * k; e++) finite &= isfinite(X[m * n * k + e]);
            for (int64_t e = 0; e < nn; e++) finite &= isfinite(V[m * nn + e]);
            const int ref_info = ref_lu(a + m * nn, n, lu, ipiv, gap);
            if (kinds[m] == K_RANDOM) {
                CHECK_MSG(I[m] == 0, "matrix %lld: info %g", (long long)m, I[m]);
                CHECK_MSG(finite, "matrix %lld: non-finite results", (long long)m);
                const double r = solve_residual(a + m * nn, X + m * n * k, b + m * n * k, n, k, 0);
                const double ri = solve_residual(a + m * nn, V + m * nn, NULL, n, n, 0);
                CHECK_MSG(r <= 20.0 * n * unit_round(dt) && ri <= 20.0 * n * unit_round(dt),
                          "matrix %lld: residuals %.3g, %.3g", (long long)m, r, ri);
            } else if (kinds[m] == K_NAN) {
                CHECK_MSG(!finite, "a NaN matrix solved to finite values");
            } else if (kinds[m] != K_DUP_ROWS || n > 1) {
                /* exactly singular: the first zero pivot (a zero column's
                 * is step n / 2, unless an earlier one) */
                CHECK_MSG(I[m] == ref_info && I[m] != 0, "n=%lld path %d matrix %lld (kind %d): info %g, want %d",
                          (long long)n, (int)path, (long long)m, kinds[m], I[m], ref_info);
                CHECK_MSG(kinds[m] != K_ZERO_COL || I[m] <= n / 2 + 1, "zero column %lld: info %g", (long long)(n / 2),
                          I[m]);
                CHECK_MSG(!finite, "a singular matrix solved to finite values");
            }
        }
    }
    free(X);
    free(I);
    free(V);
    free(VI);
    free(a);
    free(b);
    free(lu);
    free(gap);
    free(ipiv);
    alloy_array_free(x);
    alloy_array_free(info);
    alloy_array_free(inv);
    alloy_array_free(inv_info);
    alloy_array_free(A);
    alloy_array_free(B);
}

static void test_solve_bad_matrices(void) {
    for (int d = 0; d < 2; d++) bad_matrices_case(d ? ALLOY_FLOAT64 : ALLOY_FLOAT32, ALLOY_LU_AUTO, 12, 2);
}

/* alloy_solve's one-kernel path (lu_solve_warp) forced, so the CPU runs it:
 * every W (n <= 8, 16, 32) and R (the right-hand sides a lane holds: 1, 4,
 * 8, 32), b as one vector per matrix and as a matrix, batches that leave
 * simdgroups and threadgroups partial, given and new outputs, in place (x
 * is b; x is a), conditioned matrices, and 33 right-hand sides (past the
 * bound: the two-kernel path). */
static void test_solve_fused(void) {
    const int64_t ns[6] = {1, 2, 7, 16, 31, 32};
    const int64_t ks[6] = {-1, 1, 3, 8, ALLOY_LU_FUSED_MAX_RHS, ALLOY_LU_FUSED_MAX_RHS + 1};
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                /* 5 and 7 matrices: partial simdgroups for W = 8 and 16 and a
                 * partial threadgroup for every W; 9 fills W = 8's groups */
                const int64_t batch = (i + j) % 3 == 0 ? 5 : (i + j) % 3 == 1 ? 7 : 9;
                scase t = {dt, batch, ns[i], ks[j], 0, K_RANDOM, 0, ALLOY_LU_FUSED, 1, (int)((i + j) % 4 == 1)};
                run_solve_case(&t);
            }
        scase in_a = {dt, 6, 7, 7, 0, K_RANDOM, 0, ALLOY_LU_FUSED, 1, 2};
        run_solve_case(&in_a);
        scase many = {dt, 301, 5, 2, 0, K_RANDOM, 0, ALLOY_LU_FUSED, 1, 0};
        run_solve_case(&many);
        for (int c = 0; c < 2; c++) {
            scase t = {dt, 3, c ? 32 : 13, c ? 1 : 6, 0, K_COND, c ? (d ? 1e12 : 1e6) : 1e3, ALLOY_LU_FUSED, 1, 0};
            run_solve_case(&t);
        }
        const int64_t bn[3] = {1, 7, 32}, bk[3] = {1, 5, 1};
        for (int i = 0; i < 3; i++) bad_matrices_case(dt, ALLOY_LU_FUSED, bn[i], bk[i]);
    }
}

/* b given as a strided view (the runtime's contiguous copy) and with leading
 * dimensions, through the one-kernel path. */
static void test_solve_fused_strided(void) {
    const int64_t batch = 3, n = 6, k = 4, nn = n * n;
    double a[3 * 36], bt[3 * 24], b[3 * 24];
    for (int64_t m = 0; m < batch; m++) gen(ALLOY_FLOAT64, n, K_RANDOM, 0, a + m * nn);
    for (int64_t m = 0; m < batch; m++) /* bt holds each matrix's b transposed */
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < k; c++) {
                b[(m * n + i) * k + c] = harness_uniform(-1, 1);
                bt[(m * k + c) * n + i] = b[(m * n + i) * k + c];
            }
    int64_t ashape[4] = {1, batch, n, n}, bshape[4] = {1, batch, n, k}, bstrides[4] = {batch * k * n, k * n, 1, n};
    alloy_array *A = device_array(ALLOY_FLOAT64, 4, ashape, a), *view = NULL, *x = NULL;
    CHECK_OK(ku_view_of_host(bt, batch * n * k, ALLOY_FLOAT64, 4, bshape, bstrides, 0, &view));
    CHECK(view && !alloy_array_is_row_contiguous(view));
    CHECK_OK(alloy_solve_path(A, view, ALLOY_LU_FUSED, NULL, &x, NULL));
    CHECK(x && alloy_array_ndim(x) == 4);
    double *X = host_values(x);
    if (X)
        for (int64_t m = 0; m < batch; m++) {
            const double r = solve_residual(a + m * nn, X + m * n * k, b + m * n * k, n, k, 0);
            CHECK_MSG(r <= 20.0 * n * unit_round(ALLOY_FLOAT64), "matrix %lld: strided solve residual %.3g",
                      (long long)m, r);
        }
    free(X);
    alloy_array_free(x);
    alloy_array_free(view);
    alloy_array_free(A);
}

/* ---- determinants -------------------------------------------------------------- */

static void test_det_slogdet(void) {
    const int64_t ns[7] = {0, 1, 2, 7, 16, 40, 100};
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        const double u = unit_round(dt);
        for (int i = 0; i < 7; i++) {
            const int64_t n = ns[i], nn = n * n, batch = 7;
            const int kinds[7] = {K_DOMINANT, K_PERM, K_DUP_ROWS, K_DOMINANT, K_NAN, K_ZERO, K_COND};
            int64_t shape[3] = {batch, n, n};
            double *a = malloc(bytes(batch * nn, sizeof(double)));
            for (int64_t m = 0; m < batch; m++) gen(dt, n, kinds[m], 1e4, a + m * nn);
            alloy_array *A = device_array(dt, 3, shape, a);
            alloy_array *det = prefilled(dt, 1, shape), *sg = prefilled(dt, 1, shape), *la = prefilled(dt, 1, shape);
            alloy_array *given[3] = {det, sg, la};
            CHECK_OK(alloy_det(A, NULL, &det));
            CHECK_OK(alloy_slogdet(A, NULL, &sg, &la));
            CHECK(det == given[0] && sg == given[1] && la == given[2]);
            double *D = host_values(det), *S = host_values(sg), *L = host_values(la);
            long double *rlu = malloc(bytes(nn, sizeof(long double)));
            long double *gap = malloc(bytes(n, sizeof(long double)));
            int *rp = malloc(bytes(n, sizeof(int)));
            for (int64_t m = 0; D && S && L && m < batch; m++) {
                const int kind = kinds[m];
                char why[200] = "";
                if (n == 0) {
                    if (D[m] != 1 || S[m] != 1 || L[m] != 0)
                        snprintf(why, sizeof why, "0 x 0: det %g, slogdet (%g, %g)", D[m], S[m], L[m]);
                } else if (kind == K_NAN) {
                    if (!isnan(D[m]) || !((isnan(S[m]) && isnan(L[m])) || (S[m] == 0 && isinf(L[m]))))
                        snprintf(why, sizeof why, "NaN matrix: det %g, slogdet (%g, %g)", D[m], S[m], L[m]);
                } else if (kind == K_ZERO || (kind == K_DUP_ROWS && n > 1)) {
                    if (D[m] != 0 || S[m] != 0 || !(isinf(L[m]) && L[m] < 0))
                        snprintf(why, sizeof why, "singular: det %g, slogdet (%g, %g)", D[m], S[m], L[m]);
                } else {
                    /* the reference's det in long double: relative error
                     * about cond * n * u; these matrices have cond <= 1e4
                     * (K_COND) or ~1 (dominant, permutations) */
                    ref_lu(a + m * nn, n, rlu, rp, gap);
                    long double ld = 0;
                    int sgn = 1;
                    for (int64_t k = 0; k < n; k++) {
                        if (rp[k] != k + 1) sgn = -sgn;
                        if (rlu[k * n + k] < 0) sgn = -sgn;
                        ld += logl(fabsl(rlu[k * n + k]));
                    }
                    const double cond = kind == K_COND ? 1e4 : 10.0;
                    const double tol = 4.0 * cond * (double)n * u;
                    const double refdet = sgn * (double)expl(ld);
                    if (S[m] != sgn) snprintf(why, sizeof why, "sign %g, want %d", S[m], sgn);
                    else if (!(fabs(L[m] - (double)ld) <= tol + 4.0 * n * u * fabs((double)ld)))
                        snprintf(why, sizeof why, "logabsdet %.9g, want %.9Lg", L[m], ld);
                    else {
                        /* the determinant in T: inf or 0 where it is beyond T's range */
                        const double want = store(dt, refdet), tiny = dt == ALLOY_FLOAT64 ? DBL_MIN : FLT_MIN;
                        const int ok = isinf(want) ? D[m] == want : fabs(D[m] - want) <= 2 * tol * fabs(want) + tiny;
                        if (!ok) snprintf(why, sizeof why, "det %.9g, want %.9g", D[m], want);
                    }
                }
                CHECK_MSG(!why[0], "%s n=%lld matrix %lld: %s", alloy_dtype_name(dt), (long long)n, (long long)m, why);
            }
            free(rlu);
            free(gap);
            free(rp);
            free(D);
            free(S);
            free(L);
            alloy_array_free(det);
            alloy_array_free(sg);
            alloy_array_free(la);
            alloy_array_free(A);
            free(a);
        }
        /* one matrix: 0-d results */
        int64_t s2[2] = {3, 3};
        const double m3[9] = {0, 2, 0, 1, 0, 0, 0, 0, 3}; /* det -6 */
        alloy_array *A = device_array(dt, 2, s2, m3), *det = NULL, *sg = NULL, *la = NULL;
        CHECK_OK(alloy_det(A, NULL, &det));
        CHECK_OK(alloy_slogdet(A, NULL, &sg, &la));
        double *D = host_values(det), *S = host_values(sg), *L = host_values(la);
        CHECK(det && alloy_array_ndim(det) == 0 && sg && alloy_array_ndim(sg) == 0);
        if (D && S && L) {
            CHECK_MSG(D[0] == -6, "det %g", D[0]);
            CHECK_MSG(S[0] == -1 && fabs(L[0] - log(6.0)) <= 4 * u, "slogdet (%g, %g)", S[0], L[0]);
        }
        free(D);
        free(S);
        free(L);
        alloy_array_free(det);
        alloy_array_free(sg);
        alloy_array_free(la);
        alloy_array_free(A);
    }
}

/* A transposed (strided) view: read through the runtime's contiguous copy;
 * and a determinant whose partial products leave float32's range. */
static void test_strided_and_scaled(void) {
    const int64_t n = 9;
    double a[81], at[81], b[9];
    gen(ALLOY_FLOAT64, n, K_RANDOM, 0, a);
    for (int64_t i = 0; i < n; i++) {
        b[i] = harness_uniform(-1, 1);
        for (int64_t j = 0; j < n; j++) at[j * n + i] = a[i * n + j];
    }
    int64_t shape[2] = {n, n}, strides[2] = {1, n}, bs[1] = {n};
    alloy_array *view = NULL, *B = device_array(ALLOY_FLOAT64, 1, bs, b), *x = NULL;
    CHECK_OK(ku_view_of_host(at, n * n, ALLOY_FLOAT64, 2, shape, strides, 0, &view)); /* = a */
    CHECK(view && !alloy_array_is_row_contiguous(view));
    CHECK_OK(alloy_solve(view, B, NULL, &x, NULL));
    double *X = host_values(x);
    if (X) {
        const double r = solve_residual(a, X, b, n, 1, 0);
        CHECK_MSG(r <= 20.0 * n * unit_round(ALLOY_FLOAT64), "strided solve residual %.3g", r);
    }
    free(X);
    alloy_array_free(x);
    alloy_array_free(B);
    alloy_array_free(view);
    /* diag(1e30, 1e30, 1e-30, 1e-30) permuted: det 1 in float32, though 1e30 * 1e30 overflows */
    int64_t s4[2] = {4, 4};
    const double d4[16] = {0, 1e30, 0, 0, 1e30, 0, 0, 0, 0, 0, 1e-30, 0, 0, 0, 0, -1e-30};
    alloy_array *A = device_array(ALLOY_FLOAT32, 2, s4, d4), *det = NULL, *sg = NULL, *la = NULL;
    CHECK_OK(alloy_det(A, NULL, &det));
    CHECK_OK(alloy_slogdet(A, NULL, &sg, &la));
    double *D = host_values(det), *S = host_values(sg), *L = host_values(la);
    if (D && S && L) {
        /* one interchange, one negative pivot: sign +1; |det| = 1e30^2 * 1e-30^2 rounded in float */
        const double want = (double)(float)1e30 * (double)(float)1e30 * (double)(float)1e-30 * (double)(float)1e-30;
        CHECK_MSG(fabs(D[0] - want) <= 1e-5 * want, "det %.9g, want %.9g", D[0], want);
        CHECK_MSG(S[0] == 1 && fabs(L[0] - log(want)) <= 1e-5, "slogdet (%g, %g)", S[0], L[0]);
    }
    free(D);
    free(S);
    free(L);
    alloy_array_free(det);
    alloy_array_free(sg);
    alloy_array_free(la);
    alloy_array_free(A);
}

/* ---- each kernel file, forced ---------------------------------------------------- */

static void test_kernel_paths(void) {
    const struct { alloy_lu_path path; int64_t n, batch; } fc[] = {
        {ALLOY_LU_WARP, 1, 5},       {ALLOY_LU_WARP, 5, 7},       {ALLOY_LU_WARP, 8, 5},
        {ALLOY_LU_WARP, 13, 3},      {ALLOY_LU_WARP, 16, 3},      {ALLOY_LU_WARP, 27, 3},
        {ALLOY_LU_WARP, 32, 5},      {ALLOY_LU_TG_SMEM, 33, 2},   {ALLOY_LU_TG_SMEM, 64, 2},
        {ALLOY_LU_TG_SMEM, 100, 1},  {ALLOY_LU_TG_DEVICE, 40, 2}, {ALLOY_LU_TG_DEVICE, 129, 1},
        {ALLOY_LU_SERIAL, 20, 3},
        {ALLOY_LU_BLOCKED_SMEM, 1, 5},    {ALLOY_LU_BLOCKED_SMEM, 33, 5},   {ALLOY_LU_BLOCKED_SMEM, 64, 2},
        {ALLOY_LU_BLOCKED_SMEM, 65, 7},   {ALLOY_LU_BLOCKED_SMEM, 130, 2},  {ALLOY_LU_BLOCKED_DEVICE, 1, 5},
        {ALLOY_LU_BLOCKED_DEVICE, 33, 5}, {ALLOY_LU_BLOCKED_DEVICE, 65, 7}, {ALLOY_LU_BLOCKED_DEVICE, 96, 2},
        {ALLOY_LU_BLOCKED_DEVICE, 130, 1}, {ALLOY_LU_BLOCKED_DEVICE, 257, 1},
    };
    const int mixed[7] = {K_RANDOM, K_ZERO_LEAD, K_DUP_ROWS, K_NAN, K_PERM, K_ZERO_COL, K_RANDOM};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof fc / sizeof fc[0]; i++) {
            const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
            fcase t = {dt, 1, {fc[i].batch, 0}, fc[i].n, K_RANDOM, fc[i].batch >= 5 ? mixed : NULL, 0, fc[i].path,
                       1, (int)(i % 3 == 2)};
            run_factor_case(&t);
            /* ties in the pivot search (zero columns, zero matrices), exact
             * pivots, NaN */
            const int hostile[4] = {K_ZERO_COL, K_ZERO, K_PERM, K_NAN};
            fcase h = {dt, 1, {4, 0}, fc[i].n, K_RANDOM, hostile, 0, fc[i].path, 1, 0};
            run_factor_case(&h);
            if (fc[i].n >= 33 && fc[i].n <= 64) {
                fcase c = {dt, 1, {1, 0}, fc[i].n, K_COND, NULL, d ? 1e12 : 1e6, fc[i].path, 0, 0};
                run_factor_case(&c);
            }
        }
    const struct { alloy_lu_path path; int64_t n, nrhs; } sc[] = {
        {ALLOY_LU_TG_SMEM, 1, 1},    {ALLOY_LU_TG_SMEM, 9, -1},  {ALLOY_LU_TG_SMEM, 32, 3},
        {ALLOY_LU_TG_SMEM, 45, 9},   {ALLOY_LU_TG_DEVICE, 33, 2}, {ALLOY_LU_TG_DEVICE, 70, 17},
        {ALLOY_LU_SERIAL, 10, 4},
        {ALLOY_LU_BLOCKED_DEVICE, 1, 1},  {ALLOY_LU_BLOCKED_DEVICE, 33, 40},  {ALLOY_LU_BLOCKED_SMEM, 65, 31},
        {ALLOY_LU_BLOCKED_DEVICE, 100, 64}, {ALLOY_LU_BLOCKED_DEVICE, 130, 3}, {ALLOY_LU_BLOCKED_DEVICE, 257, 33},
    };
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
            for (int tr = 0; tr < 2; tr++) {
                scase t = {d ? ALLOY_FLOAT64 : ALLOY_FLOAT32, 2, sc[i].n, sc[i].nrhs, tr, K_RANDOM, 0, sc[i].path, 0,
                           (int)(i == 2 && tr)};
                run_solve_case(&t);
            }
    /* the blocked solve in place (x is b), and inverses through the blocked
     * kernels (the factor's and the solve's) */
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        scase t = {dt, 2, 70, 40, 0, K_RANDOM, 0, ALLOY_LU_BLOCKED_SMEM, 0, 1};
        run_solve_case(&t);
        const struct { alloy_lu_path path; int64_t n; int kind; } ic[] = {
            {ALLOY_LU_BLOCKED_SMEM, 1, K_RANDOM},   {ALLOY_LU_BLOCKED_SMEM, 33, K_RANDOM},
            {ALLOY_LU_BLOCKED_SMEM, 64, K_COND},    {ALLOY_LU_BLOCKED_DEVICE, 65, K_RANDOM},
            {ALLOY_LU_BLOCKED_DEVICE, 130, K_COND}, {ALLOY_LU_BLOCKED_DEVICE, 257, K_RANDOM},
        };
        for (size_t i = 0; i < sizeof ic / sizeof ic[0]; i++) {
            scase v = {dt, ic[i].n > 100 ? 1 : 3, ic[i].n, 0, 0, ic[i].kind, 1e6, ic[i].path, 2, (int)(i == 1)};
            run_solve_case(&v);
        }
    }
}

/* ---- errors ---------------------------------------------------------------------- */

static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s3[1] = {3}, s4[1] = {4}, s233[3] = {2, 3, 3}, s0[1] = {0};
    const double z[18] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    alloy_array *rect = device_array(ALLOY_FLOAT32, 2, s23, z), *sq = device_array(ALLOY_FLOAT32, 2, s33, z);
    alloy_array *ints = device_array(ALLOY_INT32, 2, s33, z), *sq64 = device_array(ALLOY_FLOAT64, 2, s33, z);
    alloy_array *vec = device_array(ALLOY_FLOAT32, 1, s3, z), *vec4 = device_array(ALLOY_FLOAT32, 1, s4, z);
    alloy_array *b3 = device_array(ALLOY_FLOAT32, 3, s233, z), *empty = device_array(ALLOY_FLOAT32, 1, s0, z);
    alloy_array *lu = NULL, *piv = NULL, *info = NULL, *x = NULL;
    CHECK_FAILS(alloy_lu_factor(rect, NULL, &lu, &piv, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is not square");
    CHECK_FAILS(alloy_lu_factor(ints, NULL, &lu, &piv, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    CHECK_FAILS(alloy_lu_factor(vec, NULL, &lu, &piv, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is 1-D");
    CHECK_FAILS(alloy_lu_factor(NULL, NULL, &lu, &piv, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is NULL");
    CHECK_FAILS(alloy_lu_factor(sq, NULL, NULL, &piv, &info), ALLOY_ERROR_INVALID_ARGUMENT, "lu is NULL");
    CHECK_FAILS(alloy_lu_factor(sq, NULL, &lu, NULL, &info), ALLOY_ERROR_INVALID_ARGUMENT, "pivots is NULL");
    alloy_array *wrong = sq64;
    CHECK_FAILS(alloy_lu_factor(sq, NULL, &wrong, &piv, &info), ALLOY_ERROR_INVALID_ARGUMENT, "lu is float64");
    wrong = vec4;
    CHECK_FAILS(alloy_lu_factor(sq, NULL, &lu, &wrong, &info), ALLOY_ERROR_INVALID_ARGUMENT, "pivots is float32");
    alloy_array *pi4 = NULL, *pi3 = NULL;
    int32_t iz[4] = {1, 2, 3, 3};
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s4, iz, &pi4));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s3, iz, &pi3));
    wrong = pi4;
    CHECK_FAILS(alloy_lu_factor(sq, NULL, &lu, &wrong, &info), ALLOY_ERROR_INVALID_ARGUMENT,
                "pivots has shape (4,) but must have shape (3,)");
    wrong = pi3;
    CHECK_FAILS(alloy_lu_factor(sq, NULL, &lu, &piv, &wrong), ALLOY_ERROR_INVALID_ARGUMENT, "info has shape (3,)");
    CHECK(lu == NULL && piv == NULL && info == NULL);
    /* a non-contiguous view factored in place */
    int64_t tstr[2] = {1, 3};
    alloy_array *tview = NULL;
    CHECK_OK(alloy_array_wrap(ku_device(), alloy_array_data(sq), ALLOY_FLOAT32, 2, s33, tstr, 0, NULL, NULL, &tview));
    wrong = tview;
    CHECK_FAILS(alloy_lu_factor(tview, NULL, &wrong, &piv, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "not row-contiguous");
    /* solves */
    CHECK_OK(alloy_lu_factor(sq, NULL, &lu, &piv, NULL));
    CHECK_FAILS(alloy_lu_solve(lu, piv, vec4, 0, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "b has shape (4,)");
    CHECK_FAILS(alloy_lu_solve(lu, piv, b3, 0, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "do not broadcast");
    CHECK_FAILS(alloy_lu_solve(lu, pi4, vec, 0, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "pivots has shape (4,)");
    CHECK_FAILS(alloy_lu_solve(lu, vec, vec, 0, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "pivots is float32");
    CHECK_FAILS(alloy_lu_solve(lu, NULL, vec, 0, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "pivots is NULL");
    CHECK_FAILS(alloy_lu_solve(lu, piv, vec, 0, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "x is NULL");
    CHECK_FAILS(alloy_solve(sq64, vec, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "b is float32 but a is float64");
    CHECK_FAILS(alloy_solve(rect, vec, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "a is not square");
    wrong = vec4;
    CHECK_FAILS(alloy_solve(sq, vec, NULL, &wrong, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "x has shape (4,)");
    CHECK(x == NULL);
    /* a 1-D b with a 2-D a: one vector */
    CHECK_OK(alloy_solve(sq, vec, NULL, &x, NULL));
    CHECK(x && alloy_array_ndim(x) == 1);
    alloy_array_free(x);
    x = NULL;
    CHECK_FAILS(alloy_inv(ints, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    CHECK_FAILS(alloy_det(rect, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "a is not square");
    CHECK_FAILS(alloy_det(sq, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "det is NULL");
    alloy_array *s = NULL;
    CHECK_FAILS(alloy_slogdet(sq, NULL, &s, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "logabsdet is NULL");
    wrong = vec;
    CHECK_FAILS(alloy_det(sq, NULL, &wrong), ALLOY_ERROR_INVALID_ARGUMENT, "det has shape (3,) but must have shape ()");
    CHECK(s == NULL);
    /* empty batches */
    int64_t e033[3] = {0, 3, 3};
    alloy_array *e = device_array(ALLOY_FLOAT32, 3, e033, z), *elu = NULL, *epiv = NULL, *einfo = NULL, *edet = NULL;
    CHECK_OK(alloy_lu_factor(e, NULL, &elu, &epiv, &einfo));
    CHECK(elu && alloy_array_size(elu) == 0 && epiv && alloy_array_ndim(epiv) == 2 && einfo &&
          alloy_array_size(einfo) == 0);
    CHECK_OK(alloy_det(e, NULL, &edet));
    CHECK(edet && alloy_array_ndim(edet) == 1 && alloy_array_size(edet) == 0);
    alloy_array_free(e);
    alloy_array_free(elu);
    alloy_array_free(epiv);
    alloy_array_free(einfo);
    alloy_array_free(edet);
    alloy_array_free(tview);
    alloy_array_free(pi4);
    alloy_array_free(pi3);
    alloy_array_free(lu);
    alloy_array_free(piv);
    alloy_array_free(rect);
    alloy_array_free(sq);
    alloy_array_free(ints);
    alloy_array_free(sq64);
    alloy_array_free(vec);
    alloy_array_free(vec4);
    alloy_array_free(b3);
    alloy_array_free(empty);
}

int main(void) {
    harness_seed();
    RUN(test_errors);
    RUN(test_factor_f32);
    RUN(test_factor_f64);
    RUN(test_factor_conditioned);
    RUN(test_factor_pivoting_singular);
    RUN(test_factor_in_place);
    RUN(test_solve);
    RUN(test_inverse);
    RUN(test_solve_bad_matrices);
    RUN(test_solve_fused);
    RUN(test_solve_fused_strided);
    RUN(test_det_slogdet);
    RUN(test_strided_and_scaled);
    RUN(test_kernel_paths);
    return harness_finish();
}
