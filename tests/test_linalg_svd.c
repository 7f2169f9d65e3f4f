/* test_linalg_svd.c — alloy_svd (alloy/linalg.h) against long-double
 * references: matrices U diag(sigma) V^T built in long double from known
 * singular values (condition 1e3, 1e6 (1e12 in float64), repeated,
 * rank-deficient), graded matrices B diag(d) (d spanning 1e6, 1e12 in
 * float64; reference: a long-double one-sided Jacobi), random matrices,
 * zero and identity matrices, NaN in one matrix of a batch, a sweep limit
 * too small; tall, square and wide; reduced and full U / V^T, values only.
 * Checks: ||A - U S V^T||_F / ||A||_F <= 10 max(m,n) u, ||U^T U - I||_2 and
 * ||V V^T - I||_2 <= 10 max(m,n) u, singular values descending, >= 0 and
 * within 10 max(m,n) u ||A||_F of the reference (Weyl's bound), graded
 * matrices' values (A = B D, D spanning the range above) with relative
 * error <= 10 max(m,n) u kappa(B) (one-sided Jacobi's relative accuracy:
 * it depends on B's condition, not A's), every output element written (outputs
 * pre-filled with NaN), every kernel path through the op, strided operands,
 * errors that name their argument. On the device the tests run on
 * (ALLOY_DEVICE, default cpu). */
#include <float.h>

#include "harness.h"
#include "kernel_util.h"

#include "alloy/linalg.h"
#include "ops/linalg/svd_internal.h"

static const alloy_dtype DTS[2] = {ALLOY_FLOAT32, ALLOY_FLOAT64};

static double unit_round(alloy_dtype dt) { return dt == ALLOY_FLOAT64 ? DBL_EPSILON / 2 : FLT_EPSILON / 2; }
static double store(alloy_dtype dt, long double x) { return dt == ALLOY_FLOAT64 ? (double)x : (double)(float)x; }
static size_t bytes(int64_t count, size_t size) { return (size_t)(count > 0 ? count : 1) * size; }
static void put(alloy_dtype dt, void *buf, int64_t i, double v) {
    if (dt == ALLOY_FLOAT64) ((double *)buf)[i] = v;
    else ((float *)buf)[i] = (float)v;
}
static double get(alloy_dtype dt, const void *buf, int64_t i) {
    return dt == ALLOY_FLOAT64 ? ((const double *)buf)[i] : (double)((const float *)buf)[i];
}

enum kind { K_RANDOM, K_COND_LO, K_COND_HI, K_REPEATED, K_RANKDEF, K_GRADED, K_ZERO, K_IDENTITY, K_NAN };

/* Singular values of A (m x n, row-major) by one-sided Jacobi in long
 * double, descending (k = min(m, n) of them). */
static void ref_svd(int m, int n, const double *A, long double *sv) {
    const int wide = m < n, M = wide ? n : m, N = wide ? m : n;
    long double *G = malloc(bytes((int64_t)M * N, sizeof(long double)));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) G[wide ? (int64_t)i * M + j : (int64_t)j * M + i] = A[(int64_t)i * n + j];
    for (int sweep = 0; sweep < 60; sweep++) {
        int rot = 0;
        for (int p = 0; p < N - 1; p++)
            for (int q = p + 1; q < N; q++) {
                long double al = 0, be = 0, ga = 0;
                long double *gp = G + (int64_t)p * M, *gq = G + (int64_t)q * M;
                for (int i = 0; i < M; i++) {
                    al += gp[i] * gp[i];
                    be += gq[i] * gq[i];
                    ga += gp[i] * gq[i];
                }
                if (!(fabsl(ga) > 1e-19L * sqrtl(al) * sqrtl(be))) continue;
                rot = 1;
                const long double zeta = (be - al) / (2 * ga);
                const long double t = (zeta >= 0 ? 1 : -1) / (fabsl(zeta) + sqrtl(1 + zeta * zeta));
                const long double c = 1 / sqrtl(1 + t * t), s = c * t;
                for (int i = 0; i < M; i++) {
                    const long double x = gp[i], y = gq[i];
                    gp[i] = c * x - s * y;
                    gq[i] = s * x + c * y;
                }
            }
        if (!rot) break;
    }
    for (int j = 0; j < N; j++) {
        long double s = 0;
        for (int i = 0; i < M; i++) s += G[(int64_t)j * M + i] * G[(int64_t)j * M + i];
        sv[j] = sqrtl(s);
    }
    for (int i = 1; i < N; i++)
        for (int k = i; k > 0 && sv[k - 1] < sv[k]; k--) {
            const long double t = sv[k];
            sv[k] = sv[k - 1];
            sv[k - 1] = t;
        }
    free(G);
}

/* x <- H x for a random Householder reflection H of size `len`, applied to
 * the rows (left: columns of X are the vectors) or the columns of the m x n
 * long-double matrix X. */
static void reflect(long double *X, int m, int n, int left) {
    const int len = left ? m : n;
    if (len < 2) return;
    long double *v = malloc(bytes(len, sizeof(long double))), vv = 0;
    for (int i = 0; i < len; i++) {
        v[i] = harness_uniform(-1, 1);
        vv += v[i] * v[i];
    }
    const int other = left ? n : m;
    for (int c = 0; c < other; c++) {
        long double d = 0;
        for (int i = 0; i < len; i++) d += v[i] * (left ? X[(int64_t)i * n + c] : X[(int64_t)c * n + i]);
        d *= 2 / vv;
        for (int i = 0; i < len; i++) *(left ? &X[(int64_t)i * n + c] : &X[(int64_t)c * n + i]) -= d * v[i];
    }
    free(v);
}

/* The condition number of the last graded matrix's B (make_matrix). */
static double graded_kappa = 1;

/* A matrix of the kind (m x n, rounded to dt) and its reference singular
 * values (descending). */
static void make_matrix(alloy_dtype dt, int m, int n, int kind, double *A, long double *ref) {
    const int k = m < n ? m : n;
    const int64_t mn = (int64_t)m * n;
    long double *X = malloc(bytes(mn, sizeof(long double)));
    for (int64_t e = 0; e < mn; e++) X[e] = 0;
    const long double hi = dt == ALLOY_FLOAT64 ? 1e12L : 1e6L;
    switch (kind) {
    case K_RANDOM:
    case K_NAN:
        for (int64_t e = 0; e < mn; e++) X[e] = harness_uniform(-1, 1);
        break;
    case K_GRADED: { /* B diag(d) (tall) or diag(d) B (wide), B random */
        double *B = malloc(bytes(mn, sizeof(double)));
        long double *sb = malloc(bytes(k, sizeof(long double)));
        for (int64_t e = 0; e < mn; e++) B[e] = harness_uniform(-1, 1);
        ref_svd(m, n, B, sb);
        graded_kappa = k > 0 && sb[k - 1] > 0 ? (double)(sb[0] / sb[k - 1]) : 1;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                const int g = m >= n ? j : i, len = m >= n ? n : m;
                X[(int64_t)i * n + j] = B[(int64_t)i * n + j] * powl(hi, -(long double)g / (len > 1 ? len - 1 : 1));
            }
        free(B);
        free(sb);
        break;
    }
    default:
        for (int i = 0; i < k; i++) {
            const long double f = k > 1 ? (long double)i / (k - 1) : 0;
            long double s = 0;
            if (kind == K_COND_LO) s = powl(1e3L, -f);
            else if (kind == K_COND_HI) s = powl(hi, -f);
            else if (kind == K_REPEATED) s = i % 2 ? 1 : 0.25L;
            else if (kind == K_RANKDEF) s = i % 2 ? 0 : 0.5L + harness_uniform(0, 1);
            else if (kind == K_IDENTITY) s = 1;
            X[(int64_t)i * n + i] = s;
            ref[i] = s;
        }
        if (kind != K_ZERO && kind != K_IDENTITY)
            for (int r = 0; r < 3; r++) {
                reflect(X, m, n, 1);
                reflect(X, m, n, 0);
            }
        for (int i = 1; i < k; i++)
            for (int j = i; j > 0 && ref[j - 1] < ref[j]; j--) {
                const long double t = ref[j];
                ref[j] = ref[j - 1];
                ref[j - 1] = t;
            }
        break;
    }
    for (int64_t e = 0; e < mn; e++) A[e] = store(dt, X[e]);
    if (kind == K_RANDOM || kind == K_GRADED) ref_svd(m, n, A, ref);
    if (kind == K_NAN && mn) A[(m / 2) * (int64_t)n + n / 3] = NAN;
    free(X);
}

/* ||E||_2 of a symmetric c x c E (power iteration in long double). */
static long double spectral_norm(int c, const long double *E) {
    if (c == 0) return 0;
    long double *x = malloc(bytes(c, sizeof(long double))), *y = malloc(bytes(c, sizeof(long double))), lam = 0;
    for (int i = 0; i < c; i++) x[i] = 1 + 0.5L * harness_uniform(-1, 1);
    for (int it = 0; it < 100; it++) {
        long double nx = 0, ny = 0;
        for (int i = 0; i < c; i++) nx += x[i] * x[i];
        for (int i = 0; i < c; i++) {
            long double s = 0;
            for (int j = 0; j < c; j++) s += E[(int64_t)i * c + j] * x[j];
            y[i] = s;
            ny += s * s;
        }
        if (ny == 0 || nx == 0) break;
        lam = sqrtl(ny / nx);
        for (int i = 0; i < c; i++) x[i] = y[i] / sqrtl(ny);
    }
    free(x);
    free(y);
    return lam;
}

/* ||X^T X - I||_2 for the columns (cols of them, length len) of X, element
 * (i, c) at X[i * rs + c * cs]. */
static double orth_error(alloy_dtype dt, const void *X, int64_t base, int len, int cols, int64_t rs, int64_t cs) {
    long double *E = malloc(bytes((int64_t)cols * cols, sizeof(long double)));
    for (int a = 0; a < cols; a++)
        for (int b = 0; b <= a; b++) {
            long double s = 0;
            for (int i = 0; i < len; i++)
                s += (long double)get(dt, X, base + i * rs + a * cs) * get(dt, X, base + i * rs + b * cs);
            E[(int64_t)a * cols + b] = E[(int64_t)b * cols + a] = s - (a == b);
        }
    const double r = (double)spectral_norm(cols, E);
    free(E);
    return r;
}

typedef struct svd_case {
    alloy_dtype dt;
    int m, n;
    int64_t batch;
    int uv, full;
    alloy_svd_path path;
    int give_out;
    const int *kinds;
    int nkinds;
    int max_sweeps;
} svd_case;

static int problems;

static void report(const svd_case *t, int64_t b, int kind, const char *what, double got, double lim) {
    if (problems++ < 6)
        fprintf(stderr, "  %s %dx%d path %d uv %d full %d matrix %lld (kind %d): %s %.3g (limit %.3g)\n",
                alloy_dtype_name(t->dt), t->m, t->n, (int)t->path, t->uv, t->full, (long long)b, kind, what, got, lim);
}

static void run_svd(const svd_case *t) {
    const int m = t->m, n = t->n, k = m < n ? m : n, mx = m > n ? m : n;
    const int ucols = t->full ? m : k, vrows = t->full ? n : k;
    const int64_t batch = t->batch, mn = (int64_t)m * n;
    const size_t es = alloy_dtype_size(t->dt);
    double *A = malloc(bytes(batch * mn, sizeof(double)));
    long double *ref = malloc(bytes(batch * k, sizeof(long double)));
    void *raw = malloc(bytes(batch * mn, es));
    double *kap = malloc(bytes(batch, sizeof(double)));
    for (int64_t b = 0; b < batch; b++) {
        make_matrix(t->dt, m, n, t->kinds[b % t->nkinds], A + b * mn, ref + b * k);
        kap[b] = graded_kappa;
    }
    for (int64_t e = 0; e < batch * mn; e++) put(t->dt, raw, e, A[e]);
    int64_t shape[3] = {batch, m, n}, sshape[2] = {batch, k}, ushape[3] = {batch, m, ucols},
            vshape[3] = {batch, vrows, n};
    alloy_array *a = NULL, *s = NULL, *u = NULL, *vh = NULL, *info = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), t->dt, 3, shape, raw, &a));
    if (t->give_out) {
        CHECK_OK(alloy_array_new(ku_device(), t->dt, 2, sshape, &s));
        CHECK_OK(alloy_array_fill(s, NAN));
        if (t->uv) {
            CHECK_OK(alloy_array_new(ku_device(), t->dt, 3, ushape, &u));
            CHECK_OK(alloy_array_fill(u, NAN));
            CHECK_OK(alloy_array_new(ku_device(), t->dt, 3, vshape, &vh));
            CHECK_OK(alloy_array_fill(vh, NAN));
        }
        CHECK_OK(alloy_array_new(ku_device(), ALLOY_INT32, 1, shape, &info));
        CHECK_OK(alloy_array_fill(info, -7));
    }
    alloy_svd_options o;
    alloy_svd_options_init(&o);
    o.compute_uv = t->uv;
    o.full_matrices = t->full;
    o.max_sweeps = t->max_sweeps;
    CHECK_OK(alloy_svd_with_path(a, &o, t->path, NULL, t->uv ? &u : NULL, &s, t->uv ? &vh : NULL, &info));
    if (!s || !info || (t->uv && (!u || !vh))) goto done;
    CHECK(alloy_array_ndim(s) == 2 && alloy_array_shape(s)[1] == k);
    void *hs = malloc(bytes(batch * k, es)), *hu = malloc(bytes(batch * m * ucols, es)),
         *hv = malloc(bytes(batch * vrows * n, es));
    int32_t *hi = malloc(bytes(batch, sizeof(int32_t)));
    CHECK_OK(alloy_array_copy_to_host(s, hs, es * (size_t)(batch * k)));
    if (t->uv) {
        CHECK_OK(alloy_array_copy_to_host(u, hu, es * (size_t)(batch * m * ucols)));
        CHECK_OK(alloy_array_copy_to_host(vh, hv, es * (size_t)(batch * vrows * n)));
    }
    CHECK_OK(alloy_array_copy_to_host(info, hi, sizeof(int32_t) * (size_t)batch));
    const double u0 = unit_round(t->dt), lim = 10.0 * (mx > 1 ? mx : 1) * u0;
    for (int64_t b = 0; b < batch; b++) {
        const int kind = t->kinds[b % t->nkinds];
        const double *Ab = A + b * mn;
        const int want = kind == K_NAN && mn > 0 ? 1 : t->max_sweeps == 1 && kind == K_RANDOM && k >= 16 ? 2 : 0;
        if (hi[b] != want) {
            report(t, b, kind, "info", hi[b], want);
            continue;
        }
        if (want == 1) {
            int notnan = 0;
            for (int i = 0; i < k; i++) notnan += !isnan(get(t->dt, hs, b * k + i));
            for (int64_t e = 0; t->uv && e < (int64_t)m * ucols; e++) notnan += !isnan(get(t->dt, hu, b * m * ucols + e));
            for (int64_t e = 0; t->uv && e < (int64_t)vrows * n; e++) notnan += !isnan(get(t->dt, hv, b * vrows * n + e));
            if (notnan) report(t, b, kind, "non-NaN outputs of a NaN matrix", notnan, 0);
            continue;
        }
        long double anrm = 0;
        for (int64_t e = 0; e < mn; e++) anrm += (long double)Ab[e] * Ab[e];
        const double scale = anrm > 0 ? (double)sqrtl(anrm) : 1.0;
        for (int i = 0; i < k; i++) {
            const double si = get(t->dt, hs, b * k + i);
            if (!(si >= 0) || !isfinite(si)) {
                report(t, b, kind, "negative or non-finite singular value", si, 0);
                break;
            }
            if (i > 0 && !(si <= get(t->dt, hs, b * k + i - 1))) {
                report(t, b, kind, "singular values not descending at", i, 0);
                break;
            }
            if (want) continue;
            const double err = fabs((double)((long double)si - ref[b * k + i]));
            if (!(err / scale <= lim)) {
                report(t, b, kind, "singular value error", err / scale, lim);
                break;
            }
            if (kind == K_GRADED && ref[b * k + i] > 0 && !(err / (double)ref[b * k + i] <= lim * kap[b])) {
                report(t, b, kind, "graded: relative error of a singular value", err / (double)ref[b * k + i],
                       lim * kap[b]);
                break;
            }
        }
        if (!t->uv) continue;
        const int64_t ub = b * m * ucols, vb = b * vrows * n;
        if (want == 0) { /* A - U S V^T with the first k columns of U and rows of V^T */
            long double res = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    long double x = Ab[(int64_t)i * n + j];
                    for (int c = 0; c < k; c++)
                        x -= (long double)get(t->dt, hu, ub + (int64_t)i * ucols + c) * get(t->dt, hs, b * k + c) *
                             get(t->dt, hv, vb + (int64_t)c * n + j);
                    res += x * x;
                }
            const double r = (double)sqrtl(res) / scale;
            if (!(r <= lim)) report(t, b, kind, "||A - U S V^T|| / ||A||", r, lim);
        }
        const double ou = orth_error(t->dt, hu, ub, m, ucols, ucols, 1);
        const double ov = orth_error(t->dt, hv, vb, n, vrows, 1, n);
        if (want == 0 && !(ou <= lim)) report(t, b, kind, "||U^T U - I||", ou, lim);
        if (!(ov <= lim)) report(t, b, kind, "||V^T V - I||", ov, lim);
    }
    free(hs);
    free(hu);
    free(hv);
    free(hi);
done:
    alloy_array_free(a);
    alloy_array_free(s);
    alloy_array_free(u);
    alloy_array_free(vh);
    alloy_array_free(info);
    free(A);
    free(ref);
    free(raw);
    free(kap);
}

/* Whether the column path's threadgroup memory fits this device for m x n
 * in dtype dt (on an H100 float64 with more than 64 columns does not). */
static int cols_fit(int m, int n, alloy_dtype dt) { return alloy_svd_cols_smem_fits(ku_device(), m, n, dt); }

static void run_checked(const svd_case *t) {
    if (harness_leave_out(t->m > 64 || t->n > 64)) return;
    problems = 0;
    run_svd(t);
    CHECK_MSG(problems == 0, "%d problems (%s %dx%d batch %lld path %d uv %d full %d)", problems,
              alloy_dtype_name(t->dt), t->m, t->n, (long long)t->batch, (int)t->path, t->uv, t->full);
}

static const int ALL_KINDS[] = {K_RANDOM, K_COND_LO, K_COND_HI, K_REPEATED, K_RANKDEF, K_GRADED, K_ZERO, K_IDENTITY};

/* Square sizes and tall / wide shapes through the op's own kernel choice. */
static void test_shapes(void) {
    static const int big[] = {K_COND_HI, K_RANKDEF, K_GRADED};
    const int shapes[][2] = {{0, 0}, {1, 1}, {2, 2}, {7, 7}, {16, 16}, {33, 33}, {64, 64}, {100, 100},
                             {129, 129}, {256, 256}, {64, 17}, {17, 64}, {129, 64}, {3, 0}, {0, 5}, {1, 9}, {9, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 2; d++) {
            const int m = shapes[i][0], n = shapes[i][1], mx = m > n ? m : n;
            svd_case t = {DTS[d], m, n, mx >= 129 ? 1 : mx >= 64 ? 2 : 8, 1, (int)(i + d) % 2, ALLOY_SVD_AUTO,
                          (int)i % 2, ALL_KINDS, 8, 0};
            if (mx >= 64) {
                t.kinds = big + (i + d) % 3;
                t.nkinds = 1;
            }
            if (mx >= 256) t.uv = d; /* the float64 256 x 256 with vectors */
            run_checked(&t);
        }
}

static void test_batches(void) {
    const int shapes[][2] = {{2, 2}, {7, 7}, {16, 16}, {8, 5}, {5, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 2; d++) {
            /* batches of 1000 (of 64 under ALLOY_TEST_SMALL: the emulated stage) */
            svd_case t = {DTS[d], shapes[i][0], shapes[i][1], harness_small() ? 64 : 1000, 1, d, ALLOY_SVD_AUTO,
                          (int)i % 2, ALL_KINDS, 8, 0};
            run_checked(&t);
            t.batch = 3;
            t.uv = 0;
            run_checked(&t);
        }
}

/* Every kernel file through the op on this device, reduced and full. */
static void test_paths(void) {
    const struct {
        alloy_svd_path path;
        int m, n;
        int64_t batch;
    } cases[] = {
        {ALLOY_SVD_CPU, 0, 3, 2},       {ALLOY_SVD_CPU, 40, 9, 8},       {ALLOY_SVD_CPU, 9, 40, 8},
        {ALLOY_SVD_TG_SMEM, 0, 0, 2},   {ALLOY_SVD_TG_SMEM, 1, 1, 3},    {ALLOY_SVD_TG_SMEM, 5, 5, 8},
        {ALLOY_SVD_TG_SMEM, 16, 16, 8}, {ALLOY_SVD_TG_SMEM, 33, 12, 8},  {ALLOY_SVD_TG_SMEM, 12, 33, 8},
        {ALLOY_SVD_TG_SMEM, 4, 0, 2},   {ALLOY_SVD_TG_DEVICE, 1, 1, 3},  {ALLOY_SVD_TG_DEVICE, 7, 7, 8},
        {ALLOY_SVD_TG_DEVICE, 32, 20, 8}, {ALLOY_SVD_TG_DEVICE, 20, 45, 8}, {ALLOY_SVD_TG_REG, 0, 0, 2},
        {ALLOY_SVD_TG_REG, 1, 1, 3},    {ALLOY_SVD_TG_REG, 5, 5, 8},     {ALLOY_SVD_TG_REG, 7, 3, 8},
        {ALLOY_SVD_TG_REG, 3, 7, 8},    {ALLOY_SVD_TG_REG, 16, 16, 8},   {ALLOY_SVD_TG_REG, 32, 20, 8},
        {ALLOY_SVD_TG_REG, 20, 32, 8},  {ALLOY_SVD_TG_REG, 31, 31, 8},   {ALLOY_SVD_TG_REG, 32, 32, 8},
        {ALLOY_SVD_TG_COLS, 0, 0, 2},   {ALLOY_SVD_TG_COLS, 1, 1, 3},    {ALLOY_SVD_TG_COLS, 5, 5, 8},
        {ALLOY_SVD_TG_COLS, 7, 3, 8},   {ALLOY_SVD_TG_COLS, 3, 7, 8},    {ALLOY_SVD_TG_COLS, 32, 32, 8},
        {ALLOY_SVD_TG_COLS, 33, 33, 8}, {ALLOY_SVD_TG_COLS, 64, 64, 8},  {ALLOY_SVD_TG_COLS, 64, 17, 8},
        {ALLOY_SVD_TG_COLS, 17, 64, 8}, {ALLOY_SVD_TG_COLS, 50, 41, 8},  {ALLOY_SVD_TG_COLS, 41, 63, 8},
        {ALLOY_SVD_TG_COLS, 64, 33, 8}, {ALLOY_SVD_TG_COLS, 4, 0, 2},    {ALLOY_SVD_TG_COLS, 65, 65, 8},
        {ALLOY_SVD_TG_COLS, 128, 128, 8}, {ALLOY_SVD_TG_COLS, 100, 37, 8}, {ALLOY_SVD_TG_COLS, 37, 100, 8},
        {ALLOY_SVD_TG_COLS, 128, 20, 8}, {ALLOY_SVD_TG_COLS, 90, 90, 8},  {ALLOY_SVD_TG_COLS, 128, 64, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int full = 0; full < 2; full++) {
                /* the column path where its threadgroup memory fits the device */
                if (cases[i].path == ALLOY_SVD_TG_COLS && !cols_fit(cases[i].m, cases[i].n, DTS[d])) continue;
                svd_case t = {DTS[d], cases[i].m, cases[i].n, cases[i].batch, 1, full, cases[i].path,
                              (int)(i + full) % 2, ALL_KINDS, 8, 0};
                /* float64 at 128 x 128 with condition 1e12 takes more than the default 30
                   sweeps for about one matrix in four, on this path and TG_SMEM alike */
                if (d == 1 && cases[i].m >= 128 && cases[i].n >= 128) t.max_sweeps = 60;
                run_checked(&t);
            }
}

/* info: NaN in one matrix of a batch (1, its outputs NaN, the others
 * right); a sweep limit of 1 (2: V still orthonormal; U's columns are
 * the unconverged ones normalised, not orthogonal). */
static void test_info(void) {
    static const int nan_kinds[] = {K_RANDOM, K_NAN, K_COND_LO, K_NAN, K_IDENTITY};
    static const int rnd[] = {K_RANDOM};
    for (int d = 0; d < 2; d++)
        for (int p = 0; p < 5; p++) {
            const alloy_svd_path path = p == 0   ? ALLOY_SVD_AUTO
                                        : p == 1 ? ALLOY_SVD_TG_SMEM
                                        : p == 2 ? ALLOY_SVD_TG_DEVICE
                                        : p == 3 ? ALLOY_SVD_TG_REG
                                                 : ALLOY_SVD_TG_COLS;
            svd_case t = {DTS[d], 9, 6, 5, 1, p % 2, path, 1, nan_kinds, 5, 0};
            run_checked(&t);
            t.m = 4;
            t.n = 11;
            t.uv = 0;
            run_checked(&t);
            svd_case s = {DTS[d], 30, 20, 2, 1, d, path, 1, rnd, 1, 1};
            run_checked(&s);
        }
}

/* Values only give the same values as with vectors, bit for bit. */
static void test_values_only(void) {
    for (int d = 0; d < 2; d++)
        for (int p = 0; p < 5; p++) {
            const alloy_svd_path path = p == 0   ? ALLOY_SVD_AUTO
                                        : p == 1 ? ALLOY_SVD_TG_SMEM
                                        : p == 2 ? ALLOY_SVD_TG_DEVICE
                                        : p == 3 ? ALLOY_SVD_TG_REG
                                                 : ALLOY_SVD_TG_COLS;
            const alloy_dtype dt = DTS[d];
            const int m = 13, n = 21;
            const int64_t shape[3] = {3, m, n};
            double A[3 * 13 * 21], raw[3 * 13 * 21];
            long double ref[13];
            for (int b = 0; b < 3; b++) make_matrix(dt, m, n, b == 1 ? K_GRADED : K_RANDOM, A + b * m * n, ref);
            for (int e = 0; e < 3 * m * n; e++) put(dt, raw, e, A[e]);
            alloy_array *a = NULL, *s1 = NULL, *s2 = NULL, *u = NULL, *vh = NULL;
            CHECK_OK(alloy_array_from_host(ku_device(), dt, 3, shape, raw, &a));
            alloy_svd_options o;
            alloy_svd_options_init(&o);
            CHECK_OK(alloy_svd_with_path(a, &o, path, NULL, &u, &s1, &vh, NULL));
            o.compute_uv = 0;
            CHECK_OK(alloy_svd_with_path(a, &o, path, NULL, NULL, &s2, NULL, NULL));
            if (s1 && s2) {
                double h1[39], h2[39];
                CHECK_OK(alloy_array_copy_to_host(s1, h1, alloy_dtype_size(dt) * 39));
                CHECK_OK(alloy_array_copy_to_host(s2, h2, alloy_dtype_size(dt) * 39));
                CHECK(memcmp(h1, h2, alloy_dtype_size(dt) * 39) == 0);
            }
            alloy_array_free(a);
            alloy_array_free(s1);
            alloy_array_free(s2);
            alloy_array_free(u);
            alloy_array_free(vh);
        }
}

/* a read in place through strides (each matrix transposed in memory) with
 * batch dimensions that do not collapse. */
static void test_strided(void) {
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = DTS[d];
        const size_t es = alloy_dtype_size(dt);
        const int m = 7, n = 4;
        const int64_t B0 = 2, B1 = 3, mn = m * n;
        double *A = malloc(sizeof(double) * (size_t)(B0 * B1 * mn));
        long double ref[4];
        void *raw = malloc(es * (size_t)(B0 * B1 * mn));
        for (int64_t b = 0; b < B0 * B1; b++) make_matrix(dt, m, n, K_RANDOM, A + b * mn, ref);
        /* storage (B1, B0, n, m): each view matrix (m x n) stored transposed */
        for (int64_t i1 = 0; i1 < B1; i1++)
            for (int64_t i0 = 0; i0 < B0; i0++)
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++)
                        put(dt, raw, (i1 * B0 + i0) * mn + j * m + i, A[(i0 * B1 + i1) * mn + i * n + j]);
        const int64_t shape[4] = {B0, B1, m, n}, strides[4] = {mn, B0 * mn, 1, m};
        alloy_array *view = NULL, *s = NULL, *u = NULL, *vh = NULL, *info = NULL;
        CHECK_OK(ku_view_of_host(raw, B0 * B1 * mn, dt, 4, shape, strides, 0, &view));
        CHECK_OK(alloy_svd(view, NULL, NULL, &u, &s, &vh, &info));
        if (s && info) {
            CHECK(alloy_array_ndim(s) == 3 && alloy_array_ndim(u) == 4 && alloy_array_shape(u)[3] == m);
            double hs[24];
            int32_t hi[6];
            CHECK_OK(alloy_array_copy_to_host(s, hs, es * 24));
            CHECK_OK(alloy_array_copy_to_host(info, hi, sizeof hi));
            int bad = 0;
            for (int64_t b = 0; b < B0 * B1; b++) {
                long double r[4];
                ref_svd(m, n, A + b * mn, r);
                bad += hi[b] != 0;
                for (int c = 0; c < n; c++) bad += !(fabs(get(dt, hs, b * n + c) - (double)r[c]) <= 100 * m * unit_round(dt));
            }
            CHECK_MSG(bad == 0, "%d wrong (%s)", bad, alloy_dtype_name(dt));
        }
        alloy_array_free(view);
        alloy_array_free(s);
        alloy_array_free(u);
        alloy_array_free(vh);
        alloy_array_free(info);
        free(A);
        free(raw);
    }
}

static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2}, s223[3] = {2, 2, 3};
    float z[12] = {0};
    int32_t zi[12] = {0};
    alloy_array *rect = NULL, *ints = NULL, *vec = NULL, *b3 = NULL, *s = NULL, *u = NULL, *vh = NULL, *info = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s23, z, &rect));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 3, s223, z, &b3));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 2, s23, zi, &ints));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, s3, z, &vec));
    CHECK_FAILS(alloy_svd(NULL, NULL, NULL, &u, &s, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is NULL");
    CHECK_FAILS(alloy_svd(rect, NULL, NULL, &u, NULL, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT, "s is NULL");
    CHECK_FAILS(alloy_svd(rect, NULL, NULL, NULL, &s, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT, "u is NULL");
    CHECK_FAILS(alloy_svd(rect, NULL, NULL, &u, &s, NULL, &info), ALLOY_ERROR_INVALID_ARGUMENT, "vh is NULL");
    CHECK_FAILS(alloy_svd(vec, NULL, NULL, &u, &s, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is 1-D");
    CHECK_FAILS(alloy_svd(ints, NULL, NULL, &u, &s, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    alloy_svd_options o;
    alloy_svd_options_init(&o);
    o.max_sweeps = -2;
    CHECK_FAILS(alloy_svd(rect, &o, NULL, &u, &s, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT, "max_sweeps is -2");
    alloy_array *wrong = rect;
    CHECK_FAILS(alloy_svd(rect, NULL, NULL, &wrong, &s, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT,
                "u has shape (2, 3) but must have shape (2, 2)");
    wrong = rect;
    CHECK_FAILS(alloy_svd(rect, NULL, NULL, &u, &s, &wrong, &info), ALLOY_ERROR_INVALID_ARGUMENT,
                "vh has shape (2, 3) but must have shape (3, 3)");
    wrong = rect;
    CHECK_FAILS(alloy_svd(rect, NULL, NULL, &u, &wrong, &vh, &info), ALLOY_ERROR_INVALID_ARGUMENT,
                "s has shape (2, 3) but must have shape (2,)");
    alloy_array *winfo = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, s2, z, &winfo));
    CHECK_FAILS(alloy_svd(b3, NULL, NULL, &u, &s, &vh, &winfo), ALLOY_ERROR_INVALID_ARGUMENT, "info is float32");
    alloy_array_free(winfo);
    CHECK(s == NULL && u == NULL && vh == NULL && info == NULL);
    /* reduced shapes; a single matrix has a 0-d info; values only leave u, vh alone */
    o.max_sweeps = 0;
    o.full_matrices = 0;
    CHECK_OK(alloy_svd(rect, &o, NULL, &u, &s, &vh, &info));
    if (u && vh && info) {
        CHECK(alloy_array_shape(u)[0] == 2 && alloy_array_shape(u)[1] == 2);
        CHECK(alloy_array_shape(vh)[0] == 2 && alloy_array_shape(vh)[1] == 3);
        CHECK(alloy_array_ndim(info) == 0);
    }
    alloy_array_free(s);
    s = NULL;
    o.compute_uv = 0;
    CHECK_OK(alloy_svd(b3, &o, NULL, NULL, &s, NULL, NULL));
    alloy_array_free(s);
    alloy_array_free(u);
    alloy_array_free(vh);
    alloy_array_free(info);
    alloy_array_free(rect);
    alloy_array_free(b3);
    alloy_array_free(ints);
    alloy_array_free(vec);
}

int main(void) {
    harness_seed();
    RUN(test_shapes);
    RUN(test_batches);
    RUN(test_paths);
    RUN(test_info);
    RUN(test_values_only);
    RUN(test_strided);
    RUN(test_errors);
    return harness_finish();
}
