/* test_linalg_qr.c — alloy_qr (all modes), alloy_lstsq, alloy_orthogonal
 * and alloy_orthonormalize (alloy/linalg.h), checked in long double:
 * ||A - QR|| / ||A|| and ||Q^T Q - I|| <= 10 max(m, n) u, R upper triangular
 * with exact zeros, R's diagonal signs as a long-double Householder QR with
 * LAPACK's choice gives them, mode r and raw consistent with the reduced
 * factors bit for bit, least-squares optimality (the normal-equations
 * residual, normwise) and minimum norm for wide matrices, the rank test,
 * orthogonal initialisation (Q^T Q = gain^2 I, reproducible per seed), every
 * output element written (given outputs pre-filled with NaN), one NaN matrix
 * in a batch affecting only itself, and the errors that name their argument.
 * Every kernel configuration (serial, SIMD-group, threadgroup in threadgroup
 * or device memory) is forced through the ops here, so the CPU runs (and
 * the NVRTC check compiles) the GPU kernels too. On the device the tests run
 * on (ALLOY_DEVICE, default cpu). */
#include <float.h>

#include "harness.h"
#include "kernel_util.h"

#include "alloy/linalg.h"
#include "ops/linalg/qr_internal.h"

enum { K_RANDOM, K_COND, K_GRADED, K_RANKDEF, K_ZERO, K_IDENTITY, K_NAN };

static size_t bytes(int64_t count, size_t size) { return (size_t)(count > 0 ? count : 1) * size; }
static double unit_round(alloy_dtype dt) { return dt == ALLOY_FLOAT64 ? DBL_EPSILON / 2 : FLT_EPSILON / 2; }
static double store(alloy_dtype dt, double x) { return dt == ALLOY_FLOAT64 ? x : (double)(float)x; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* x := H x for the Householder reflection of a random v, on the rows
 * (left, v of length m) or the columns (right, length n) of the m x n a. */
static void reflect(double *a, int64_t m, int64_t n, int left) {
    const int64_t len = left ? m : n;
    double *v = malloc(bytes(len, sizeof(double)));
    double vv = 0;
    for (int64_t i = 0; i < len; i++) {
        v[i] = harness_uniform(-1, 1);
        vv += v[i] * v[i];
    }
    if (vv > 0) {
        const int64_t other = left ? n : m;
        for (int64_t c = 0; c < other; c++) {
            double d = 0;
            for (int64_t i = 0; i < len; i++) d += v[i] * (left ? a[i * n + c] : a[c * n + i]);
            d *= 2 / vv;
            for (int64_t i = 0; i < len; i++) *(left ? &a[i * n + c] : &a[c * n + i]) -= d * v[i];
        }
    }
    free(v);
}

/* One m x n matrix of the kind, rounded to dt. */
static void gen(alloy_dtype dt, int64_t m, int64_t n, int kind, double cond, double *a) {
    const int64_t mn = m * n, k = imin(m, n);
    for (int64_t e = 0; e < mn; e++) a[e] = harness_uniform(-1, 1);
    switch (kind) {
    case K_COND: /* H1 H2 diag(s) H3 H4, s from 1 down to 1/cond */
        for (int64_t e = 0; e < mn; e++) a[e] = 0;
        for (int64_t i = 0; i < k; i++) a[i * n + i] = k > 1 ? pow(cond, -(double)i / (double)(k - 1)) : 1;
        for (int h = 0; h < 4; h++) reflect(a, m, n, h < 2);
        break;
    case K_GRADED: /* columns scaled from 1 down to 1/cond */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) a[i * n + j] *= n > 1 ? pow(cond, -(double)j / (double)(n - 1)) : 1;
        break;
    case K_RANKDEF: /* the last column (row, for wide matrices) a combination of the first two, or a copy */
        if (m >= n && n >= 2)
            for (int64_t i = 0; i < m; i++) a[i * n + n - 1] = n >= 3 ? a[i * n] - 0.5 * a[i * n + 1] : a[i * n];
        if (m < n && m >= 2)
            for (int64_t j = 0; j < n; j++) a[(m - 1) * n + j] = m >= 3 ? a[j] - 0.5 * a[n + j] : a[j];
        break;
    case K_ZERO:
        for (int64_t e = 0; e < mn; e++) a[e] = 0;
        break;
    case K_IDENTITY:
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) a[i * n + j] = i == j;
        break;
    case K_NAN:
        if (mn) a[(m / 2) * n + n / 3] = NAN;
        break;
    default: break;
    }
    for (int64_t e = 0; e < mn; e++) a[e] = store(dt, a[e]);
}

static alloy_array *device_array(alloy_dtype dt, int nd, const int64_t *shape, const double *v) {
    int64_t count = 1;
    for (int d = 0; d < nd; d++) count *= shape[d];
    void *raw = malloc(bytes(count, 8));
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

static alloy_array *prefilled(alloy_dtype dt, int nd, const int64_t *shape) {
    int64_t count = 1;
    for (int d = 0; d < nd; d++) count *= shape[d];
    double *v = malloc(bytes(count, sizeof(double)));
    for (int64_t i = 0; i < count; i++) v[i] = dt == ALLOY_INT32 ? -7777 : NAN;
    alloy_array *a = device_array(dt, nd, shape, v);
    free(v);
    return a;
}

static double *host_values(alloy_array *x) {
    if (!x) return NULL;
    const int64_t count = alloy_array_size(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    void *raw = malloc(bytes(count, 8));
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

static int shape_is(alloy_array *x, int nd, const int64_t *shape) {
    if (!x || alloy_array_ndim(x) != nd) return 0;
    for (int d = 0; d < nd; d++)
        if (alloy_array_shape(x)[d] != shape[d]) return 0;
    return 1;
}

/* ---- references ------------------------------------------------------------- */

/* The diagonal of R of a Householder QR in long double with LAPACK's sign
 * choice, and the column norms it reduced (how far each is from a tie). */
/* R's diagonal as LAPACK's Householder QR gives it (beta = -sign(alpha) * norm), in long double; lead[j] is the
 * pivot alpha whose sign picks beta's and size[j] the norm of A's column j, which the reflections keep: the sign is
 * only determined where |alpha| stands clear of the rounding the reflections before it leave (~ k u size). */
static void ref_rdiag(const double *a, int64_t m, int64_t n, long double *d, long double *lead, long double *size) {
    long double *w = malloc(bytes(m * n, sizeof(long double)));
    for (int64_t e = 0; e < m * n; e++) w[e] = a[e];
    const int64_t k = imin(m, n);
    for (int64_t j = 0; j < k; j++) {
        long double xn = 0, above = 0, alpha = w[j * n + j];
        for (int64_t i = j + 1; i < m; i++) xn += w[i * n + j] * w[i * n + j];
        for (int64_t i = 0; i < j; i++) above += w[i * n + j] * w[i * n + j];
        lead[j] = alpha;
        size[j] = sqrtl(above + xn + alpha * alpha);
        if (xn == 0) {
            d[j] = alpha;
            continue;
        }
        long double beta = -copysignl(sqrtl(alpha * alpha + xn), alpha), tau = (beta - alpha) / beta;
        long double sc = 1 / (alpha - beta);
        for (int64_t i = j + 1; i < m; i++) w[i * n + j] *= sc;
        w[j * n + j] = 1;
        for (int64_t c = j + 1; c < n; c++) {
            long double s = 0;
            for (int64_t i = j; i < m; i++) s += w[i * n + j] * w[i * n + c];
            s *= tau;
            for (int64_t i = j; i < m; i++) w[i * n + c] -= s * w[i * n + j];
        }
        d[j] = beta;
    }
    free(w);
}

static long double fro(const double *a, int64_t count) {
    long double s = 0;
    for (int64_t e = 0; e < count; e++) s += (long double)a[e] * a[e];
    return sqrtl(s);
}

/* ||A - Q R||_F / ||A||_F (absolute when A = 0), Q m x q, R q x n. */
static double recon_error(const double *a, const double *q, const double *r, int64_t m, int64_t n, int64_t qc) {
    long double s = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            long double t = a[i * n + j];
            for (int64_t p = 0; p < qc; p++) t -= (long double)q[i * qc + p] * r[p * n + j];
            s += t * t;
        }
    const long double an = fro(a, m * n);
    return (double)(an > 0 ? sqrtl(s) / an : sqrtl(s));
}

/* ||Q^T Q - I||_F for Q m x q (columns), or ||Q Q^T - I||_F (rows). */
static double orth_error(const double *q, int64_t m, int64_t qc, int rows, double gain2) {
    long double s = 0;
    const int64_t dim = rows ? m : qc, len = rows ? qc : m;
    for (int64_t a = 0; a < dim; a++)
        for (int64_t b = 0; b < dim; b++) {
            long double t = a == b ? -(long double)gain2 : 0;
            for (int64_t p = 0; p < len; p++)
                t += rows ? (long double)q[a * qc + p] * q[b * qc + p] : (long double)q[p * qc + a] * q[p * qc + b];
            s += t * t;
        }
    return (double)sqrtl(s);
}

/* Q (m x kq) from the raw factor h (m x n) and tau (k), in long double. */
static void q_from_raw(const double *h, const double *tau, int64_t m, int64_t n, int64_t kq, double *q) {
    const int64_t k = imin(m, n);
    long double *w = malloc(bytes(m * kq, sizeof(long double)));
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < kq; c++) w[i * kq + c] = i == c;
    for (int64_t j = k - 1; j >= 0; j--)
        for (int64_t c = 0; c < kq; c++) {
            long double s = w[j * kq + c];
            for (int64_t i = j + 1; i < m; i++) s += (long double)h[i * n + j] * w[i * kq + c];
            s *= tau[j];
            w[j * kq + c] -= s;
            for (int64_t i = j + 1; i < m; i++) w[i * kq + c] -= s * h[i * n + j];
        }
    for (int64_t e = 0; e < m * kq; e++) q[e] = (double)w[e];
    free(w);
}

/* ---- QR -------------------------------------------------------------------------- */

typedef struct qcase {
    alloy_dtype dt;
    int64_t batch, m, n;
    int kind;
    const int *kinds; /* per matrix (length batch), or NULL */
    double cond;
    alloy_qr_path path;
    int give; /* pre-filled outputs */
} qcase;

static void run_qr_case(const qcase *t) {
    const int64_t m = t->m, n = t->n, k = imin(m, n), batch = t->batch, mn = m * n;
    const double u = unit_round(t->dt), bound = 10.0 * (double)imax(imax(m, n), 1) * u;
    int64_t ashape[3] = {batch, m, n};
    double *a = malloc(bytes(batch * mn, sizeof(double)));
    for (int64_t b = 0; b < batch; b++) gen(t->dt, m, n, t->kinds ? t->kinds[b] : t->kind, t->cond, a + b * mn);
    if (getenv("ALLOY_TEST_TRACE")) /* names the case before it runs: a hang shows where */
        fprintf(stderr, "  qr %s %lldx%lld batch %lld path %d kind %d\n", alloy_dtype_name(t->dt), (long long)m,
                (long long)n, (long long)batch, (int)t->path, t->kind);
    alloy_array *A = device_array(t->dt, 3, ashape, a);
    alloy_qr_force_path(t->path);
    /* reduced, complete, r, raw */
    int64_t qshape[4][3] = {{batch, m, k}, {batch, m, m}, {0, 0, 0}, {batch, m, n}};
    int64_t rshape[4][3] = {{batch, k, n}, {batch, m, n}, {batch, k, n}, {batch, k, 0}};
    int rnd[4] = {3, 3, 3, 2};
    double *Q[4] = {NULL}, *R[4] = {NULL};
    for (int mode = 0; mode < 4; mode++) {
        alloy_array *q = NULL, *r = NULL;
        if (t->give) {
            if (mode != 2) q = prefilled(t->dt, 3, qshape[mode]);
            r = prefilled(t->dt, rnd[mode], rshape[mode]);
        }
        alloy_array *gq = q, *gr = r;
        CHECK_OK(alloy_qr(A, (alloy_qr_mode)mode, NULL, mode == 2 ? NULL : &q, &r));
        CHECK(!gq || q == gq);
        CHECK(!gr || r == gr);
        CHECK(mode == 2 || shape_is(q, 3, qshape[mode]));
        CHECK(shape_is(r, rnd[mode], rshape[mode]));
        if (mode != 2) Q[mode] = host_values(q);
        R[mode] = host_values(r);
        alloy_array_free(q);
        alloy_array_free(r);
    }
    alloy_qr_force_path(ALLOY_QR_PATH_AUTO);
    long double *rd = malloc(bytes(k, sizeof(long double))), *rlead = malloc(bytes(k, sizeof(long double))),
                *rsz = malloc(bytes(k, sizeof(long double)));
    double *qraw = malloc(bytes(m * k, sizeof(double))), *rraw = malloc(bytes(k * n, sizeof(double)));
    int bad = 0;
    for (int64_t b = 0; Q[0] && Q[1] && R[0] && R[1] && R[2] && Q[3] && R[3] && b < batch; b++) {
        const int kind = t->kinds ? t->kinds[b] : t->kind;
        const double *ab = a + b * mn, *q0 = Q[0] + b * m * k, *r0 = R[0] + b * k * n, *q1 = Q[1] + b * m * m,
                     *r1 = R[1] + b * mn, *r2 = R[2] + b * k * n, *h = Q[3] + b * mn, *tau = R[3] + b * k;
        char why[240] = "";
        if (kind == K_NAN) {
            int seen = 0;
            for (int64_t e = 0; e < m * k; e++) seen |= isnan(q0[e]);
            for (int64_t e = 0; e < k * n; e++) seen |= isnan(r0[e]);
            if (mn && !seen) snprintf(why, sizeof why, "a NaN matrix gave no NaN");
        } else {
            /* every element written and finite */
            for (int64_t e = 0; e < m * k && !why[0]; e++)
                if (!isfinite(q0[e])) snprintf(why, sizeof why, "reduced Q[%lld] = %g", (long long)e, q0[e]);
            for (int64_t e = 0; e < m * m && !why[0]; e++)
                if (!isfinite(q1[e])) snprintf(why, sizeof why, "complete Q[%lld] = %g", (long long)e, q1[e]);
            for (int64_t e = 0; e < mn && !why[0]; e++)
                if (!isfinite(r1[e]) || !isfinite(h[e])) snprintf(why, sizeof why, "complete R / h [%lld] not finite", (long long)e);
            for (int64_t e = 0; e < k && !why[0]; e++)
                if (!isfinite(tau[e])) snprintf(why, sizeof why, "tau[%lld] = %g", (long long)e, tau[e]);
            /* R: exact zeros below the diagonal; mode r and raw equal to the reduced R */
            for (int64_t i = 0; i < k && !why[0]; i++)
                for (int64_t j = 0; j < n && !why[0]; j++) {
                    if (j < i && (r0[i * n + j] != 0 || r1[i * n + j] != 0))
                        snprintf(why, sizeof why, "R(%lld,%lld) = %g below the diagonal", (long long)i, (long long)j,
                                 r0[i * n + j]);
                    else if (r2[i * n + j] != r0[i * n + j] || r1[i * n + j] != r0[i * n + j] ||
                             (j >= i && h[i * n + j] != r0[i * n + j]))
                        snprintf(why, sizeof why, "R(%lld,%lld) differs between modes", (long long)i, (long long)j);
                }
            for (int64_t i = k; i < m && !why[0]; i++)
                for (int64_t j = 0; j < n && !why[0]; j++)
                    if (r1[i * n + j] != 0) snprintf(why, sizeof why, "complete R(%lld,%lld) != 0", (long long)i, (long long)j);
            /* tau in LAPACK's range [0, 2] (0: H = I), R's diagonal signs */
            for (int64_t j = 0; j < k && !why[0]; j++)
                if (!(tau[j] >= 0 && tau[j] <= 2)) snprintf(why, sizeof why, "tau[%lld] = %g", (long long)j, tau[j]);
            if (!why[0] && (kind == K_RANDOM || kind == K_IDENTITY)) {
                ref_rdiag(ab, m, n, rd, rlead, rsz);
                /* up to the first pivot too close to 0 to have a sign: past it the reflector taken there (either is
                 * right) changes the trailing matrix, and with it every later pivot */
                for (int64_t j = 0; j < k && !why[0] && fabsl(rlead[j]) > (long double)bound * rsz[j]; j++)
                    if ((r0[j * n + j] < 0) != (rd[j] < 0))
                        snprintf(why, sizeof why, "R(%lld,%lld) = %g but LAPACK's sign gives %Lg (pivot %Lg)",
                                 (long long)j, (long long)j, r0[j * n + j], rd[j], rlead[j]);
            }
            double e;
            if (!why[0] && !((e = recon_error(ab, q0, r0, m, n, k)) <= bound))
                snprintf(why, sizeof why, "reduced ||A - QR|| / ||A|| = %.3g > %.3g", e, bound);
            if (!why[0] && !((e = recon_error(ab, q1, r1, m, n, m)) <= bound))
                snprintf(why, sizeof why, "complete ||A - QR|| / ||A|| = %.3g > %.3g", e, bound);
            if (!why[0] && !((e = orth_error(q0, m, k, 0, 1)) <= bound))
                snprintf(why, sizeof why, "reduced ||Q^T Q - I|| = %.3g > %.3g", e, bound);
            if (!why[0] && !((e = orth_error(q1, m, m, 0, 1)) <= bound))
                snprintf(why, sizeof why, "complete ||Q^T Q - I|| = %.3g > %.3g", e, bound);
            /* the complete Q's first k columns are the reduced Q */
            for (int64_t i = 0; i < m && !why[0]; i++)
                for (int64_t c = 0; c < k && !why[0]; c++)
                    if (fabs(q1[i * m + c] - q0[i * k + c]) > 4 * u)
                        snprintf(why, sizeof why, "complete Q(%lld,%lld) = %g, reduced %g", (long long)i, (long long)c,
                                 q1[i * m + c], q0[i * k + c]);
            /* raw: Q from h and tau reproduces A with h's R */
            if (!why[0]) {
                q_from_raw(h, tau, m, n, k, qraw);
                for (int64_t i = 0; i < k; i++)
                    for (int64_t j = 0; j < n; j++) rraw[i * n + j] = j >= i ? h[i * n + j] : 0;
                if (!((e = recon_error(ab, qraw, rraw, m, n, k)) <= bound))
                    snprintf(why, sizeof why, "raw ||A - QR|| / ||A|| = %.3g > %.3g", e, bound);
            }
        }
        if (why[0]) {
            if (bad < 4)
                fprintf(stderr, "  %s %lldx%lld path %d matrix %lld of %lld (kind %d): %s\n", alloy_dtype_name(t->dt),
                        (long long)m, (long long)n, (int)t->path, (long long)b, (long long)batch, kind, why);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d of %lld matrices wrong", bad, (long long)batch);
    for (int i = 0; i < 4; i++) {
        free(Q[i]);
        free(R[i]);
    }
    free(rd);
    free(rlead);
    free(rsz);
    free(qraw);
    free(rraw);
    alloy_array_free(A);
    free(a);
}

static const int64_t SHAPES[][2] = {{0, 0}, {1, 1}, {1, 9}, {9, 1}, {7, 3}, {3, 7}, {33, 33}, {64, 17},
                                    {17, 64}, {100, 100}, {129, 64}, {256, 256}, {0, 5}, {5, 0}};

static void qr_shapes(alloy_dtype dt) {
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const int64_t m = SHAPES[i][0], n = SHAPES[i][1];
        const int64_t batch = m * n >= 10000 ? 1 : 3;
        qcase t = {dt, batch, m, n, K_RANDOM, NULL, 0, ALLOY_QR_PATH_AUTO, (int)(i & 1)};
        run_qr_case(&t);
    }
    qcase big = {dt, 1000, 8, 5, K_RANDOM, NULL, 0, ALLOY_QR_PATH_AUTO, 1};
    run_qr_case(&big);
}

static void test_qr_f32(void) { qr_shapes(ALLOY_FLOAT32); }
static void test_qr_f64(void) { qr_shapes(ALLOY_FLOAT64); }

/* Ill-conditioned, graded, rank-deficient, zero and identity matrices, and
 * one NaN matrix among good ones. */
static void test_qr_hostile(void) {
    const int64_t shapes[5][2] = {{7, 3}, {3, 7}, {33, 33}, {64, 17}, {17, 64}};
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        const double conds[3] = {1e3, 1e6, d ? 1e12 : 1e6};
        for (int s = 0; s < 5; s++) {
            const int64_t m = shapes[s][0], n = shapes[s][1];
            for (int c = 0; c < 3; c++) {
                qcase t = {dt, 2, m, n, K_COND, NULL, conds[c], ALLOY_QR_PATH_AUTO, 1};
                run_qr_case(&t);
            }
            const int kinds[4] = {K_GRADED, K_RANKDEF, K_ZERO, K_IDENTITY};
            for (int q = 0; q < 4; q++) {
                qcase t = {dt, 2, m, n, kinds[q], NULL, d ? 1e12 : 1e6, ALLOY_QR_PATH_AUTO, 0};
                run_qr_case(&t);
            }
            const int mixed[5] = {K_RANDOM, K_NAN, K_RANDOM, K_ZERO, K_RANDOM};
            qcase t = {dt, 5, m, n, K_RANDOM, mixed, 0, ALLOY_QR_PATH_AUTO, 1};
            run_qr_case(&t);
        }
    }
}

/* Every kernel configuration, forced. */
static void test_qr_kernel_paths(void) {
    const struct { alloy_qr_path path; int64_t m, n, batch; } pc[] = {
        {ALLOY_QR_PATH_SERIAL, 9, 4, 3},     {ALLOY_QR_PATH_SERIAL, 4, 9, 3},    {ALLOY_QR_PATH_SIMD, 1, 1, 9},
        {ALLOY_QR_PATH_SIMD, 5, 3, 11},      {ALLOY_QR_PATH_SIMD, 3, 5, 5},      {ALLOY_QR_PATH_SIMD, 16, 16, 5},
        {ALLOY_QR_PATH_SIMD, 13, 20, 3},     {ALLOY_QR_PATH_SIMD, 32, 32, 3},    {ALLOY_QR_PATH_SIMD, 40, 7, 3},
        {ALLOY_QR_PATH_TG_SMEM, 33, 33, 2},  {ALLOY_QR_PATH_TG_SMEM, 70, 20, 2}, {ALLOY_QR_PATH_TG_SMEM, 20, 70, 2},
        {ALLOY_QR_PATH_TG_SMEM, 3, 2, 2},    {ALLOY_QR_PATH_TG_DEVICE, 45, 45, 2}, {ALLOY_QR_PATH_TG_DEVICE, 80, 9, 1},
        {ALLOY_QR_PATH_TG_DEVICE, 9, 80, 1},
    };
    const int mixed[5] = {K_RANDOM, K_NAN, K_RANKDEF, K_IDENTITY, K_GRADED};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
            const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
            qcase t = {dt, pc[i].batch, pc[i].m, pc[i].n, K_RANDOM, NULL, 0, pc[i].path, (int)(i & 1)};
            run_qr_case(&t);
            qcase h = {dt, 5, pc[i].m, pc[i].n, K_RANDOM, mixed, 1e4, pc[i].path, 1};
            run_qr_case(&h);
            qcase c = {dt, 1, pc[i].m, pc[i].n, K_COND, NULL, d ? 1e12 : 1e6, pc[i].path, 0};
            run_qr_case(&c);
        }
}

/* ---- least squares ------------------------------------------------------------------- */

typedef struct lcase {
    alloy_dtype dt;
    int64_t batch, m, n, nrhs; /* nrhs < 0: b is (batch, m) */
    int kind;
    const int *kinds;
    double cond, rcond;
    int solve_path; /* alloy_lstsq_force_solve_path */
    alloy_qr_path path;
} lcase;

static void run_lstsq_case(const lcase *t) {
    const int64_t m = t->m, n = t->n, batch = t->batch, mn = m * n, kk = t->nrhs < 0 ? 1 : t->nrhs;
    const double u = unit_round(t->dt), bound = 10.0 * (double)imax(imax(m, n), 1) * u;
    int64_t ashape[3] = {batch, m, n}, bshape[3] = {batch, m, kk}, xshape[3] = {batch, n, kk};
    const int bnd = t->nrhs < 0 ? 2 : 3;
    double *a = malloc(bytes(batch * mn, sizeof(double))), *b = malloc(bytes(batch * m * kk, sizeof(double)));
    for (int64_t q = 0; q < batch; q++) gen(t->dt, m, n, t->kinds ? t->kinds[q] : t->kind, t->cond, a + q * mn);
    for (int64_t e = 0; e < batch * m * kk; e++) b[e] = store(t->dt, harness_uniform(-1, 1));
    if (getenv("ALLOY_TEST_TRACE"))
        fprintf(stderr, "  lstsq %s %lldx%lld batch %lld nrhs %lld path %d\n", alloy_dtype_name(t->dt), (long long)m,
                (long long)n, (long long)batch, (long long)t->nrhs, (int)t->path);
    alloy_array *A = device_array(t->dt, 3, ashape, a), *B = device_array(t->dt, bnd, bshape, b);
    alloy_array *x = prefilled(t->dt, bnd, xshape), *info = prefilled(ALLOY_INT32, 1, ashape), *gx = x, *gi = info;
    alloy_lstsq_options o;
    alloy_lstsq_options_init(&o);
    o.rcond = t->rcond;
    alloy_qr_force_path(t->path);
    alloy_lstsq_force_solve_path(t->solve_path);
    CHECK_OK(alloy_lstsq(A, B, &o, NULL, &x, &info));
    alloy_qr_force_path(ALLOY_QR_PATH_AUTO);
    alloy_lstsq_force_solve_path(0);
    CHECK(x == gx && info == gi);
    double *X = host_values(x), *I = host_values(info);
    int bad = 0;
    for (int64_t q = 0; X && I && q < batch; q++) {
        const int kind = t->kinds ? t->kinds[q] : t->kind;
        const double *aq = a + q * mn, *bq = b + q * m * kk, *xq = X + q * n * kk;
        char why[240] = "";
        if (kind == K_RANKDEF || kind == K_ZERO || kind == K_NAN) {
            int allnan = 1;
            for (int64_t e = 0; e < n * kk; e++) allnan &= isnan(xq[e]) != 0;
            if (I[q] <= 0 && imin(m, n) >= 2) snprintf(why, sizeof why, "info %g for a rank-deficient matrix", I[q]);
            else if (I[q] > 0 && !allnan) snprintf(why, sizeof why, "info %g but x is not all NaN", I[q]);
        } else if (I[q] != 0) {
            snprintf(why, sizeof why, "info %g for a full-rank matrix", I[q]);
        } else {
            const long double an = fro(aq, mn);
            for (int64_t c = 0; c < kk && !why[0]; c++) {
                long double *r = malloc(bytes(m, sizeof(long double)));
                long double rn = 0, xn = 0, bn = 0, atr = 0;
                for (int64_t i = 0; i < m; i++) {
                    long double s = -(long double)bq[i * kk + c];
                    for (int64_t j = 0; j < n; j++) s += (long double)aq[i * n + j] * xq[j * kk + c];
                    r[i] = s;
                    rn += s * s;
                    bn += (long double)bq[i * kk + c] * bq[i * kk + c];
                }
                for (int64_t j = 0; j < n; j++) {
                    long double s = 0;
                    for (int64_t i = 0; i < m; i++) s += (long double)aq[i * n + j] * r[i];
                    atr += s * s;
                    xn += (long double)xq[j * kk + c] * xq[j * kk + c];
                }
                rn = sqrtl(rn), xn = sqrtl(xn), bn = sqrtl(bn), atr = sqrtl(atr);
                if (!isfinite((double)xn)) snprintf(why, sizeof why, "x column %lld not finite", (long long)c);
                else if (m >= n) {
                    /* ||A^T r|| <= c u ||A|| (||A|| ||x|| + ||r||): a backward-stable solution */
                    const double e = (double)(atr / (an * (an * xn + rn)));
                    if (an > 0 && !(e <= bound))
                        snprintf(why, sizeof why, "column %lld: ||A^T r|| / (||A|| (||A|| ||x|| + ||r||)) = %.3g > %.3g",
                                 (long long)c, e, bound);
                } else {
                    /* consistent: A x = b; minimum norm: x in the row space of A */
                    const double e = (double)(rn / (an * xn + bn));
                    if (!(e <= bound))
                        snprintf(why, sizeof why, "column %lld: ||A x - b|| / (||A|| ||x|| + ||b||) = %.3g > %.3g",
                                 (long long)c, e, bound);
                    /* x's component outside range(A^T): x - A^T (A A^T)^-1 A x, by
                     * projecting with the long-double normal equations of A^T */
                    if (!why[0] && kind == K_RANDOM) { /* (the normal equations need a well-conditioned A) */
                        long double *g = malloc(bytes(m * m, sizeof(long double))),
                                    *y = malloc(bytes(m, sizeof(long double)));
                        for (int64_t i = 0; i < m; i++) {
                            y[i] = 0;
                            for (int64_t j = 0; j < n; j++) y[i] += (long double)aq[i * n + j] * xq[j * kk + c];
                            for (int64_t p = 0; p < m; p++) {
                                long double s = 0;
                                for (int64_t j = 0; j < n; j++) s += (long double)aq[i * n + j] * aq[p * n + j];
                                g[i * m + p] = s;
                            }
                        }
                        for (int64_t p = 0; p < m; p++) /* Gaussian elimination (SPD, no pivoting needed) */
                            for (int64_t i = p + 1; i < m; i++) {
                                long double f = g[i * m + p] / g[p * m + p];
                                for (int64_t j = p; j < m; j++) g[i * m + j] -= f * g[p * m + j];
                                y[i] -= f * y[p];
                            }
                        for (int64_t i = m - 1; i >= 0; i--) {
                            long double s = y[i];
                            for (int64_t j = i + 1; j < m; j++) s -= g[i * m + j] * y[j];
                            y[i] = s / g[i * m + i];
                        }
                        long double off = 0;
                        for (int64_t j = 0; j < n; j++) {
                            long double s = xq[j * kk + c];
                            for (int64_t i = 0; i < m; i++) s -= (long double)aq[i * n + j] * y[i];
                            off += s * s;
                        }
                        const double e2 = (double)(sqrtl(off) / xn);
                        if (xn > 0 && !(e2 <= 100 * bound))
                            snprintf(why, sizeof why, "column %lld: x is not the minimum-norm solution (%.3g of it "
                                     "lies outside the row space)", (long long)c, e2);
                        free(g);
                        free(y);
                    }
                }
                free(r);
            }
        }
        if (why[0]) {
            if (bad < 4)
                fprintf(stderr, "  lstsq %s %lldx%lld nrhs %lld solve %d path %d matrix %lld (kind %d): %s\n",
                        alloy_dtype_name(t->dt), (long long)m, (long long)n, (long long)t->nrhs, t->solve_path,
                        (int)t->path, (long long)q, kind, why);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d of %lld least-squares problems wrong", bad, (long long)batch);
    free(X);
    free(I);
    alloy_array_free(x);
    alloy_array_free(info);
    alloy_array_free(A);
    alloy_array_free(B);
    free(a);
    free(b);
}

static void test_lstsq(void) {
    const int64_t shapes[][2] = {{1, 1}, {9, 1}, {1, 9}, {7, 3}, {3, 7}, {33, 33}, {64, 17}, {17, 64}, {100, 100}, {129, 64}};
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int sp = 1; sp <= 2; sp++) {
                const int64_t nrhs = i % 3 == 0 ? -1 : i % 3 == 1 ? 1 : 11;
                /* condition 10: a uniform random square matrix is now and then ill-conditioned enough
                 * for the default rank test to flag it, as documented */
                lcase t = {dt, 3, shapes[i][0], shapes[i][1], nrhs, K_COND, NULL, 10, -1, sp, ALLOY_QR_PATH_AUTO};
                run_lstsq_case(&t);
            }
        /* ill-conditioned (rcond 0: only exact rank deficiency flagged) */
        const double conds[3] = {1e3, 1e6, d ? 1e12 : 1e6};
        for (int c = 0; c < 3; c++) {
            lcase t = {dt, 2, 40, 12, 3, K_COND, NULL, conds[c], 0, 0, ALLOY_QR_PATH_AUTO};
            run_lstsq_case(&t);
            lcase w = {dt, 2, 12, 40, 3, K_COND, NULL, conds[c], 0, 0, ALLOY_QR_PATH_AUTO};
            run_lstsq_case(&w);
        }
        /* rank-deficient, zero and NaN matrices among good ones (default rcond) */
        const int mixed[5] = {K_COND, K_RANKDEF, K_NAN, K_ZERO, K_COND};
        const int64_t ms[4][2] = {{9, 5}, {5, 9}, {40, 40}, {70, 33}};
        for (int s = 0; s < 4; s++)
            for (int sp = 1; sp <= 2; sp++) {
                lcase t = {dt, 5, ms[s][0], ms[s][1], 2, K_COND, mixed, 10, -1, sp, ALLOY_QR_PATH_AUTO};
                run_lstsq_case(&t);
            }
        lcase big = {dt, 1000, 6, 4, -1, K_RANDOM, NULL, 0, -1, 0, ALLOY_QR_PATH_AUTO};
        run_lstsq_case(&big);
        /* the GPU factorization kernels under the solve */
        lcase g1 = {dt, 3, 20, 9, 2, K_RANDOM, NULL, 0, -1, 2, ALLOY_QR_PATH_SIMD};
        run_lstsq_case(&g1);
        lcase g2 = {dt, 2, 9, 50, 2, K_RANDOM, NULL, 0, -1, 2, ALLOY_QR_PATH_TG_SMEM};
        run_lstsq_case(&g2);
        lcase g3 = {dt, 2, 50, 9, 2, K_RANDOM, NULL, 0, -1, 2, ALLOY_QR_PATH_TG_DEVICE};
        run_lstsq_case(&g3);
    }
}

/* Empty problems: k = 0 right-hand sides, 0 x n (x = 0), m x 0. */
static void test_lstsq_empty(void) {
    int64_t a0[3] = {2, 0, 4}, b0[3] = {2, 0, 3};
    double z[64] = {0};
    alloy_array *A = device_array(ALLOY_FLOAT32, 3, a0, z), *B = device_array(ALLOY_FLOAT32, 3, b0, z);
    alloy_array *x = NULL, *info = NULL;
    CHECK_OK(alloy_lstsq(A, B, NULL, NULL, &x, &info));
    int64_t xs[3] = {2, 4, 3};
    CHECK(shape_is(x, 3, xs));
    double *X = host_values(x), *I = host_values(info);
    for (int e = 0; X && e < 24; e++) CHECK_MSG(X[e] == 0, "x[%d] = %g", e, X[e]);
    for (int e = 0; I && e < 2; e++) CHECK(I[e] == 0);
    free(X);
    free(I);
    alloy_array_free(x);
    alloy_array_free(info);
    alloy_array_free(A);
    alloy_array_free(B);
    int64_t a1[2] = {4, 3}, b1[2] = {4, 0};
    A = device_array(ALLOY_FLOAT64, 2, a1, z);
    B = device_array(ALLOY_FLOAT64, 2, b1, z);
    x = NULL;
    CHECK_OK(alloy_lstsq(A, B, NULL, NULL, &x, NULL));
    int64_t x1[2] = {3, 0};
    CHECK(shape_is(x, 2, x1));
    alloy_array_free(x);
    alloy_array_free(A);
    alloy_array_free(B);
}

/* ---- orthogonal matrices ------------------------------------------------------------- */

static void test_orthogonal(void) {
    const int64_t shapes[][3] = {{3, 5, 7}, {2, 7, 3}, {1, 1, 1}, {1, 64, 64}, {1, 129, 64}, {1000, 4, 4}, {2, 1, 9}};
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        const double u = unit_round(dt);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const int64_t batch = shapes[i][0], rows = shapes[i][1], cols = shapes[i][2], rc = rows * cols;
            alloy_orthogonal_options o;
            alloy_orthogonal_options_init(&o);
            o.gain = i == 1 ? 2.5 : 1.0;
            o.seed = 12345 + i + ((uint64_t)1 << 63);
            alloy_array *g1 = prefilled(dt, 3, shapes[i]), *g2 = NULL, *g3 = NULL, *given = g1;
            CHECK_OK(alloy_orthogonal(NULL, dt, 3, shapes[i], &o, NULL, &g1));
            CHECK(g1 == given);
            CHECK_OK(alloy_orthogonal(ku_device(), dt, 3, shapes[i], &o, NULL, &g2));
            o.seed += 1;
            CHECK_OK(alloy_orthogonal(ku_device(), dt, 3, shapes[i], &o, NULL, &g3));
            double *A = host_values(g1), *B = host_values(g2), *C = host_values(g3);
            int bad = 0, differ = 0;
            const double bound = 10.0 * (double)imax(rows, cols) * u * o.gain * o.gain;
            for (int64_t b = 0; A && B && C && b < batch; b++) {
                const double *q = A + b * rc;
                for (int64_t e = 0; e < rc; e++) {
                    if (!isfinite(q[e]) || q[e] != B[b * rc + e]) bad++;
                    if (q[e] != C[b * rc + e]) differ = 1;
                }
                const double e = orth_error(q, rows, cols, rows < cols, o.gain * o.gain);
                if (!(e <= bound)) {
                    if (bad < 4) fprintf(stderr, "  orthogonal %s %lldx%lld: error %.3g\n", alloy_dtype_name(dt),
                                         (long long)rows, (long long)cols, e);
                    bad++;
                }
            }
            CHECK_MSG(bad == 0, "%d orthogonal matrices wrong or not reproducible", bad);
            CHECK_MSG(differ || rc < 4, "seeds %llu and %llu gave the same matrices", (unsigned long long)o.seed - 1,
                      (unsigned long long)o.seed);
            free(A);
            free(B);
            free(C);
            alloy_array_free(g1);
            alloy_array_free(g2);
            alloy_array_free(g3);
        }
    }
    /* the samples look Gaussian: mean ~0, variance ~1 over a large matrix
     * before orthogonalisation is not observable, but a 1 x 1 matrix is
     * gain * sign: exactly +-1 */
    int64_t s1[3] = {200, 1, 1};
    alloy_array *g = NULL;
    CHECK_OK(alloy_orthogonal(ku_device(), ALLOY_FLOAT32, 3, s1, NULL, NULL, &g));
    double *G = host_values(g);
    int plus = 0;
    for (int i = 0; G && i < 200; i++) {
        CHECK(G[i] == 1 || G[i] == -1);
        plus += G[i] == 1;
    }
    CHECK_MSG(plus > 60 && plus < 140, "%d of 200 signs +1", plus);
    free(G);
    alloy_array_free(g);
}

/* Orthonormalize: Q^T Q = I and Q^T A upper triangular with a non-negative
 * diagonal (columns), or the same for the rows of a wide matrix. */
static void test_orthonormalize(void) {
    const int64_t shapes[][3] = {{3, 9, 4}, {2, 4, 9}, {1, 33, 33}, {1, 100, 7}, {4, 1, 1}};
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = d ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
        const double u = unit_round(dt);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const int64_t batch = shapes[i][0], m = shapes[i][1], n = shapes[i][2], mn = m * n;
            const int wide = m < n;
            double *a = malloc(bytes(batch * mn, sizeof(double)));
            for (int64_t b = 0; b < batch; b++) gen(dt, m, n, K_RANDOM, 0, a + b * mn);
            alloy_array *A = device_array(dt, 3, shapes[i], a), *q = NULL;
            if (i == 2) q = A; /* in place */
            else if (i == 0) q = prefilled(dt, 3, shapes[i]);
            CHECK_OK(alloy_orthonormalize(A, NULL, &q));
            double *Q = host_values(q);
            const double bound = 10.0 * (double)imax(m, n) * u;
            int bad = 0;
            for (int64_t b = 0; Q && b < batch; b++) {
                const double *qb = Q + b * mn, *ab = a + b * mn;
                double e = orth_error(qb, m, n, wide, 1);
                /* T = Q^T A (n x n) for columns, A Q^T (m x m) for rows: triangular, diagonal >= 0 */
                const int64_t dim = wide ? m : n, len = wide ? n : m;
                for (int64_t r = 0; r < dim; r++)
                    for (int64_t c = 0; c < dim; c++) {
                        long double s = 0;
                        for (int64_t p = 0; p < len; p++)
                            s += wide ? (long double)ab[r * n + p] * qb[c * n + p] : (long double)qb[p * n + r] * ab[p * n + c];
                        if ((wide ? c > r : r > c) && fabsl(s) > 100 * bound * fro(ab, mn)) e = INFINITY;
                        if (r == c && s < 0) e = INFINITY;
                    }
                if (!(e <= bound)) bad++;
            }
            CHECK_MSG(bad == 0, "orthonormalize %s %lldx%lld: %d matrices wrong", alloy_dtype_name(dt), (long long)m,
                      (long long)n, bad);
            free(Q);
            if (q != A) alloy_array_free(q);
            alloy_array_free(A);
            free(a);
        }
    }
}

/* ---- errors -------------------------------------------------------------------------- */

static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s33[2] = {3, 3}, s22[2] = {2, 2}, s43[2] = {4, 3};
    const double z[16] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    alloy_array *a = device_array(ALLOY_FLOAT32, 2, s23, z), *v = device_array(ALLOY_FLOAT32, 1, s3, z);
    alloy_array *ints = device_array(ALLOY_INT32, 2, s23, z), *a64 = device_array(ALLOY_FLOAT64, 2, s23, z);
    alloy_array *q = NULL, *r = NULL, *x = NULL, *wrong = NULL;
    CHECK_FAILS(alloy_qr(NULL, ALLOY_QR_REDUCED, NULL, &q, &r), ALLOY_ERROR_INVALID_ARGUMENT, "a is NULL");
    CHECK_FAILS(alloy_qr(v, ALLOY_QR_REDUCED, NULL, &q, &r), ALLOY_ERROR_INVALID_ARGUMENT, "a is 1-D");
    CHECK_FAILS(alloy_qr(ints, ALLOY_QR_REDUCED, NULL, &q, &r), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    CHECK_FAILS(alloy_qr(a, (alloy_qr_mode)7, NULL, &q, &r), ALLOY_ERROR_INVALID_ARGUMENT, "mode is 7");
    CHECK_FAILS(alloy_qr(a, ALLOY_QR_REDUCED, NULL, NULL, &r), ALLOY_ERROR_INVALID_ARGUMENT, "q is NULL");
    CHECK_FAILS(alloy_qr(a, ALLOY_QR_R, NULL, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "r is NULL");
    alloy_array *w33 = device_array(ALLOY_FLOAT32, 2, s33, z);
    wrong = w33;
    CHECK_FAILS(alloy_qr(a, ALLOY_QR_REDUCED, NULL, &wrong, &r), ALLOY_ERROR_INVALID_ARGUMENT,
                "q has shape (3, 3) but must have shape (2, 2)");
    CHECK_FAILS(alloy_qr(a, ALLOY_QR_RAW, NULL, &q, &wrong), ALLOY_ERROR_INVALID_ARGUMENT, "tau (r) has shape (3, 3)");
    alloy_array *w64 = device_array(ALLOY_FLOAT64, 2, s22, z);
    CHECK_FAILS(alloy_qr(a, ALLOY_QR_REDUCED, NULL, &w64, &r), ALLOY_ERROR_INVALID_ARGUMENT, "q is float64");
    CHECK(q == NULL && r == NULL);
    /* lstsq */
    CHECK_FAILS(alloy_lstsq(a, NULL, NULL, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "b is NULL");
    CHECK_FAILS(alloy_lstsq(a, v, NULL, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "b has shape (3,)");
    CHECK_FAILS(alloy_lstsq(a64, a, NULL, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "b is float32 but a is float64");
    CHECK_FAILS(alloy_lstsq(a, a, NULL, NULL, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "x is NULL");
    alloy_array *b43 = device_array(ALLOY_FLOAT32, 2, s43, z);
    CHECK_FAILS(alloy_lstsq(a, b43, NULL, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "b has shape (4, 3)");
    alloy_lstsq_options lo;
    alloy_lstsq_options_init(&lo);
    CHECK(lo.rcond < 0);
    lo.rcond = NAN;
    CHECK_FAILS(alloy_lstsq(a, a, &lo, NULL, &x, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "rcond is NaN");
    wrong = w64;
    CHECK_FAILS(alloy_lstsq(a, a, NULL, NULL, &wrong, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "x is float64");
    CHECK(x == NULL);
    /* orthogonal */
    alloy_array *o = NULL;
    CHECK_FAILS(alloy_orthogonal(ku_device(), ALLOY_FLOAT32, 1, s3, NULL, NULL, &o), ALLOY_ERROR_INVALID_ARGUMENT,
                "ndim is 1");
    CHECK_FAILS(alloy_orthogonal(ku_device(), ALLOY_INT32, 2, s23, NULL, NULL, &o), ALLOY_ERROR_INVALID_ARGUMENT,
                "dtype is int32");
    CHECK_FAILS(alloy_orthogonal(NULL, ALLOY_FLOAT32, 2, s23, NULL, NULL, &o), ALLOY_ERROR_INVALID_ARGUMENT,
                "device is NULL");
    alloy_orthogonal_options oo;
    alloy_orthogonal_options_init(&oo);
    CHECK(oo.gain == 1 && oo.seed == 0);
    oo.gain = INFINITY;
    CHECK_FAILS(alloy_orthogonal(ku_device(), ALLOY_FLOAT32, 2, s23, &oo, NULL, &o), ALLOY_ERROR_INVALID_ARGUMENT,
                "gain is not finite");
    wrong = w64;
    CHECK_FAILS(alloy_orthogonal(ku_device(), ALLOY_FLOAT32, 2, s23, NULL, NULL, &wrong), ALLOY_ERROR_INVALID_ARGUMENT,
                "out is float64");
    CHECK_FAILS(alloy_orthonormalize(ints, NULL, &o), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    CHECK_FAILS(alloy_orthonormalize(a, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "out is NULL");
    CHECK(o == NULL);
    /* an empty batch */
    int64_t e[3] = {0, 3, 2};
    alloy_array *ea = device_array(ALLOY_FLOAT32, 3, e, z);
    CHECK_OK(alloy_qr(ea, ALLOY_QR_COMPLETE, NULL, &q, &r));
    int64_t eq[3] = {0, 3, 3};
    CHECK(shape_is(q, 3, eq) && shape_is(r, 3, e));
    alloy_array_free(q);
    alloy_array_free(r);
    alloy_array_free(ea);
    alloy_array_free(b43);
    alloy_array_free(w33);
    alloy_array_free(w64);
    alloy_array_free(a);
    alloy_array_free(v);
    alloy_array_free(ints);
    alloy_array_free(a64);
}

int main(void) {
    harness_seed();
    RUN(test_errors);
    RUN(test_qr_f32);
    RUN(test_qr_f64);
    RUN(test_qr_hostile);
    RUN(test_qr_kernel_paths);
    RUN(test_lstsq);
    RUN(test_lstsq_empty);
    RUN(test_orthogonal);
    RUN(test_orthonormalize);
    return harness_finish();
}
