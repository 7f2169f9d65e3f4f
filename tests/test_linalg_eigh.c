/* test_linalg_eigh.c — alloy_eigh (alloy/linalg.h) against long-double
 * references: matrices built in long double from a known spectrum (random
 * orthogonal similarity of a diagonal: condition 1e3, 1e6 (1e12 in
 * float64), graded, repeated, clustered, indefinite, rank-deficient), random
 * symmetric matrices (reference: a long-double cyclic Jacobi), zero and
 * identity matrices, NaN in one matrix of a batch, a sweep limit too small
 * to converge; residual ||AV - VW||_F / ||A||_F <= 10 n u, ||V^T V - I||_2
 * <= 10 n u, eigenvalues ascending and within 10 n u ||A||_F of the
 * reference (Weyl's bound for that backward error), every output element
 * written (given outputs pre-filled with NaN / sentinels), both triangles
 * (the other one filled with NaN), every kernel path through the op (the
 * tridiagonal paths also at n = 33 .. 256 with the hostile kinds and through
 * odd strides), strided operands, and the errors that name their argument. On the device
 * the tests run on (ALLOY_DEVICE, default cpu). */
#include <float.h>

#include "harness.h"
#include "kernel_util.h"

#include "alloy/linalg.h"
#include "ops/linalg/eigh_internal.h"

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

/* ---- matrices ------------------------------------------------------------------ */

enum kind {
    K_RANDOM,    /* uniform in [-1, 1], symmetric: reference by long-double Jacobi */
    K_COND_LO,   /* SPD, eigenvalues 1 .. 1e-3 geometric */
    K_COND_HI,   /* SPD, 1 .. 1e-6 (float32) or 1e-12 (float64) */
    K_GRADED,    /* eigenvalues 2^(-k), k = 0..n-1, signs alternating */
    K_REPEATED,  /* three distinct values, each many times */
    K_CLUSTER,   /* 1 + k * 1e-7 and -1 - k * 1e-7 */
    K_RANKDEF,   /* half the eigenvalues exactly 0 */
    K_ZERO,
    K_IDENTITY,
    K_NAN,       /* random with one NaN in the read triangle */
    K_COUNT
};

/* The spectrum of a kind (NULL-free: lambda has n entries). */
static void spectrum(alloy_dtype dt, int n, int kind, long double *lambda) {
    const long double hi = dt == ALLOY_FLOAT64 ? 1e12L : 1e6L;
    for (int i = 0; i < n; i++) {
        const long double f = n > 1 ? (long double)i / (n - 1) : 0;
        switch (kind) {
        case K_COND_LO: lambda[i] = powl(1e3L, -f); break;
        case K_COND_HI: lambda[i] = powl(hi, -f); break;
        case K_GRADED: lambda[i] = ldexpl(i % 2 ? -1.0L : 1.0L, -i); break;
        case K_REPEATED: lambda[i] = i % 3 == 0 ? 2.0L : i % 3 == 1 ? -0.5L : 1.0L; break;
        case K_CLUSTER: lambda[i] = i % 2 ? -1 - i * 1e-7L : 1 + i * 1e-7L; break;
        case K_RANKDEF: lambda[i] = i % 2 ? 0.0L : (long double)harness_uniform(-1, 1); break;
        default: lambda[i] = 0; break;
        }
    }
}

/* Q diag(lambda) Q^T in long double, Q a product of four random Householder
 * reflections. */
static void from_spectrum(int n, const long double *lambda, long double *A) {
    for (int64_t e = 0; e < (int64_t)n * n; e++) A[e] = 0;
    for (int i = 0; i < n; i++) A[i * n + i] = lambda[i];
    long double *v = malloc(bytes(n, sizeof(long double))), *w = malloc(bytes(n, sizeof(long double)));
    for (int r = 0; r < 4 && n > 1; r++) {
        long double nv = 0;
        for (int i = 0; i < n; i++) {
            v[i] = harness_uniform(-1, 1);
            nv += v[i] * v[i];
        }
        nv = sqrtl(nv);
        for (int i = 0; i < n; i++) v[i] /= nv;
        long double alpha = 0; /* A <- H A H, H = I - 2 v v^T */
        for (int i = 0; i < n; i++) {
            long double s = 0;
            for (int j = 0; j < n; j++) s += A[i * n + j] * v[j];
            w[i] = s;
            alpha += v[i] * s;
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++) {
                const long double x = A[i * n + j] - 2 * v[i] * w[j] - 2 * w[i] * v[j] + 4 * alpha * v[i] * v[j];
                A[i * n + j] = x;
                A[j * n + i] = x;
            }
    }
    free(v);
    free(w);
}

/* Eigenvalues of the symmetric A (full, row-major) by cyclic Jacobi in long
 * double, ascending. */
static void ref_jacobi(int n, const double *A, long double *lambda) {
    long double *W = malloc(bytes((int64_t)n * n, sizeof(long double)));
    for (int64_t e = 0; e < (int64_t)n * n; e++) W[e] = A[e];
    for (int sweep = 0; sweep < 60; sweep++) {
        long double off = 0, nrm = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                nrm += W[i * n + j] * W[i * n + j];
                if (i != j) off += W[i * n + j] * W[i * n + j];
            }
        if (off <= 1e-40L * nrm) break;
        for (int p = 0; p < n - 1; p++)
            for (int q = p + 1; q < n; q++) {
                const long double apq = W[p * n + q];
                if (apq == 0) continue;
                const long double zeta = (W[q * n + q] - W[p * n + p]) / (2 * apq);
                const long double t = (zeta >= 0 ? 1 : -1) / (fabsl(zeta) + sqrtl(1 + zeta * zeta));
                const long double c = 1 / sqrtl(1 + t * t), s = c * t;
                for (int k = 0; k < n; k++) {
                    const long double xp = W[k * n + p], xq = W[k * n + q];
                    W[k * n + p] = c * xp - s * xq;
                    W[k * n + q] = s * xp + c * xq;
                }
                for (int k = 0; k < n; k++) {
                    const long double xp = W[p * n + k], xq = W[q * n + k];
                    W[p * n + k] = c * xp - s * xq;
                    W[q * n + k] = s * xp + c * xq;
                }
            }
    }
    for (int i = 0; i < n; i++) lambda[i] = W[i * n + i];
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int k = i; k > 0 && lambda[k - 1] > lambda[k]; k--) {
            const long double t = lambda[k];
            lambda[k] = lambda[k - 1];
            lambda[k - 1] = t;
        }
    free(W);
}

/* Matrix of the kind, rounded to dt, into A (full); its reference spectrum
 * (ascending) into ref (NaN entries for K_NAN). */
static void make_matrix(alloy_dtype dt, int n, int kind, double *A, long double *ref) {
    const int64_t nn = (int64_t)n * n;
    long double *L = malloc(bytes(nn, sizeof(long double)));
    if (kind == K_RANDOM || kind == K_NAN) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++) A[i * n + j] = A[j * n + i] = store(dt, harness_uniform(-1, 1));
        if (kind == K_RANDOM) ref_jacobi(n, A, ref);
        else if (n) {
            const int i = (2 * n) / 3, j = n / 3;
            A[i * n + j] = A[j * n + i] = NAN;
            for (int k = 0; k < n; k++) ref[k] = NAN;
        }
    } else {
        spectrum(dt, n, kind, ref);
        if (kind == K_IDENTITY)
            for (int i = 0; i < n; i++) ref[i] = 1;
        if (kind == K_ZERO || kind == K_IDENTITY) {
            for (int64_t e = 0; e < nn; e++) A[e] = 0;
            for (int i = 0; i < n && kind == K_IDENTITY; i++) A[i * n + i] = 1;
        } else {
            from_spectrum(n, ref, L);
            for (int64_t e = 0; e < nn; e++) A[e] = store(dt, L[e]);
        }
        for (int i = 1; i < n; i++)
            for (int k = i; k > 0 && ref[k - 1] > ref[k]; k--) {
                const long double t = ref[k];
                ref[k] = ref[k - 1];
                ref[k - 1] = t;
            }
    }
    free(L);
}

/* ||E||_2 of a symmetric n x n E (row-major): power iteration in long
 * double (E's spectrum is spread, so 100 steps come within a few percent). */
static long double spectral_norm(int n, const long double *E) {
    if (n == 0) return 0;
    long double *x = malloc(bytes(n, sizeof(long double))), *y = malloc(bytes(n, sizeof(long double)));
    for (int i = 0; i < n; i++) x[i] = 1 + 0.5L * harness_uniform(-1, 1);
    long double lam = 0;
    for (int it = 0; it < 100; it++) {
        long double nx = 0, ny = 0;
        for (int i = 0; i < n; i++) nx += x[i] * x[i];
        for (int i = 0; i < n; i++) {
            long double s = 0;
            for (int j = 0; j < n; j++) s += E[i * n + j] * x[j];
            y[i] = s;
            ny += s * s;
        }
        if (ny == 0 || nx == 0) break;
        lam = sqrtl(ny / nx);
        const long double sc = 1 / sqrtl(ny);
        for (int i = 0; i < n; i++) x[i] = y[i] * sc;
    }
    free(x);
    free(y);
    return lam;
}

/* ---- one batch ------------------------------------------------------------------- */

typedef struct eigh_case {
    alloy_dtype dt;
    int n;
    int64_t batch;
    int upper;
    int vectors;
    alloy_eigh_path path;
    int give_out;     /* outputs given, pre-filled with NaN / sentinels */
    const int *kinds; /* per matrix, cycled */
    int nkinds;
    int max_sweeps;
} eigh_case;

static int problems;

static void report(const eigh_case *t, int64_t b, int kind, const char *what, double got, double lim) {
    if (problems++ < 6)
        fprintf(stderr, "  %s n=%d path %d upper %d vectors %d matrix %lld (kind %d): %s %.3g (limit %.3g)\n",
                alloy_dtype_name(t->dt), t->n, (int)t->path, t->upper, t->vectors, (long long)b, kind, what, got,
                lim);
}

static void run_eigh(const eigh_case *t) {
    const int n = t->n;
    const int64_t batch = t->batch, nn = (int64_t)n * n;
    const size_t es = alloy_dtype_size(t->dt);
    double *A = malloc(bytes(batch * nn, sizeof(double)));
    long double *ref = malloc(bytes(batch * n, sizeof(long double)));
    void *raw = malloc(bytes(batch * nn, es));
    for (int64_t b = 0; b < batch; b++) {
        make_matrix(t->dt, n, t->kinds[b % t->nkinds], A + b * nn, ref + b * n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const int read = t->upper ? j >= i : j <= i;
                put(t->dt, raw, b * nn + i * n + j, read ? A[b * nn + i * n + j] : NAN);
            }
    }
    int64_t shape[3] = {batch, n, n};
    alloy_array *a = NULL, *w = NULL, *v = NULL, *info = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), t->dt, 3, shape, raw, &a));
    if (t->give_out) {
        CHECK_OK(alloy_array_new(ku_device(), t->dt, 2, shape, &w));
        CHECK_OK(alloy_array_fill(w, NAN));
        if (t->vectors) {
            CHECK_OK(alloy_array_new(ku_device(), t->dt, 3, shape, &v));
            CHECK_OK(alloy_array_fill(v, NAN));
        }
        CHECK_OK(alloy_array_new(ku_device(), ALLOY_INT32, 1, shape, &info));
        CHECK_OK(alloy_array_fill(info, -7));
    }
    alloy_array *gw = w, *gv = v, *gi = info;
    alloy_eigh_options o;
    alloy_eigh_options_init(&o);
    o.upper = t->upper;
    o.compute_vectors = t->vectors;
    o.max_sweeps = t->max_sweeps;
    CHECK_OK(alloy_eigh_with_path(a, &o, t->path, NULL, &w, t->vectors ? &v : NULL, &info));
    CHECK(!gw || w == gw);
    CHECK(!gv || v == gv);
    CHECK(!gi || info == gi);
    if (!w || !info || (t->vectors && !v)) goto done;
    CHECK(alloy_array_ndim(w) == 2 && alloy_array_shape(w)[1] == n && alloy_array_ndim(info) == 1);
    void *hw = malloc(bytes(batch * n, es)), *hv = malloc(bytes(batch * nn, es));
    int32_t *hi = malloc(bytes(batch, sizeof(int32_t)));
    CHECK_OK(alloy_array_copy_to_host(w, hw, es * (size_t)(batch * n)));
    if (t->vectors) CHECK_OK(alloy_array_copy_to_host(v, hv, es * (size_t)(batch * nn)));
    CHECK_OK(alloy_array_copy_to_host(info, hi, sizeof(int32_t) * (size_t)batch));
    const double u = unit_round(t->dt), lim = 10.0 * (n > 1 ? n : 1) * u;
    long double *R = malloc(bytes(nn, sizeof(long double)));
    for (int64_t b = 0; b < batch; b++) {
        const int kind = t->kinds[b % t->nkinds];
        const double *Ab = A + b * nn;
        const int want = kind == K_NAN && n > 0 ? 1 : t->max_sweeps == 1 && kind == K_RANDOM && n >= 16 ? 2 : 0;
        if (hi[b] != want) {
            report(t, b, kind, "info", hi[b], want);
            continue;
        }
        if (want == 1) { /* every output NaN */
            int notnan = 0;
            for (int i = 0; i < n; i++) notnan += !isnan(get(t->dt, hw, b * n + i));
            for (int64_t e = 0; t->vectors && e < nn; e++) notnan += !isnan(get(t->dt, hv, b * nn + e));
            if (notnan) report(t, b, kind, "non-NaN outputs of a NaN matrix", notnan, 0);
            continue;
        }
        long double anrm = 0;
        for (int64_t e = 0; e < nn; e++) anrm += (long double)Ab[e] * Ab[e];
        anrm = sqrtl(anrm);
        const double scale = anrm > 0 ? (double)anrm : 1.0;
        /* ascending, finite, close to the reference */
        for (int i = 0; i < n; i++) {
            const double wi = get(t->dt, hw, b * n + i);
            if (!isfinite(wi)) {
                report(t, b, kind, "non-finite eigenvalue", wi, 0);
                break;
            }
            if (i > 0 && !(wi >= get(t->dt, hw, b * n + i - 1))) {
                report(t, b, kind, "eigenvalues not ascending at", i, 0);
                break;
            }
            if (want == 0) {
                const double err = fabs((double)((long double)wi - ref[b * n + i])) / scale;
                if (!(err <= lim)) {
                    report(t, b, kind, "eigenvalue error", err, lim);
                    break;
                }
            }
        }
        if (!t->vectors) continue;
        /* residual and orthogonality, in long double */
        long double res = 0, orth = 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < n; k++) {
                long double s = 0;
                for (int j = 0; j < n; j++) s += (long double)Ab[i * n + j] * get(t->dt, hv, b * nn + j * n + k);
                const long double r = s - (long double)get(t->dt, hv, b * nn + i * n + k) * get(t->dt, hw, b * n + k);
                res += r * r;
            }
        for (int i = 0; i < n; i++)
            for (int k = 0; k <= i; k++) {
                long double s = 0;
                for (int j = 0; j < n; j++)
                    s += (long double)get(t->dt, hv, b * nn + j * n + i) * get(t->dt, hv, b * nn + j * n + k);
                R[i * n + k] = R[k * n + i] = s - (i == k ? 1 : 0);
            }
        orth = spectral_norm(n, R);
        const double rr = (double)sqrtl(res) / scale, oo = (double)orth;
        if (want == 0 && !(rr <= lim)) report(t, b, kind, "residual ||AV - VW||/||A||", rr, lim);
        if (!(oo <= lim)) report(t, b, kind, "||V^T V - I||", oo, lim);
        if (kind == K_IDENTITY || kind == K_ZERO) /* diagonal: V is the identity, exactly */
            for (int64_t e = 0; e < nn; e++)
                if (get(t->dt, hv, b * nn + e) != (e / n == e % n ? 1.0 : 0.0)) {
                    report(t, b, kind, "V of a diagonal matrix is not I at", (double)e, 0);
                    break;
                }
    }
    free(R);
    free(hw);
    free(hv);
    free(hi);
done:
    alloy_array_free(a);
    alloy_array_free(w);
    alloy_array_free(v);
    alloy_array_free(info);
    free(A);
    free(ref);
    free(raw);
}

static void run_checked(const eigh_case *t) {
    if (harness_leave_out(t->n > 64)) return;
    problems = 0;
    run_eigh(t);
    CHECK_MSG(problems == 0, "%d problems (%s n=%d batch %lld path %d upper %d vectors %d)", problems,
              alloy_dtype_name(t->dt), t->n, (long long)t->batch, (int)t->path, t->upper, t->vectors);
}

/* the paths the op takes and every GPU kernel file (forced) */
static const alloy_eigh_path PATHS[] = {ALLOY_EIGH_AUTO,         ALLOY_EIGH_TG_SMEM,        ALLOY_EIGH_TG_DEVICE,
                                        ALLOY_EIGH_REG,          ALLOY_EIGH_TRIDIAG_SMEM,   ALLOY_EIGH_TRIDIAG_DEVICE,
                                        ALLOY_EIGH_COLS,         ALLOY_EIGH_COLS_H2,        ALLOY_EIGH_COLS_NOV};
/* the paths that take only n <= 32 */
static int small_only(alloy_eigh_path p) {
    return p == ALLOY_EIGH_REG || p == ALLOY_EIGH_COLS || p == ALLOY_EIGH_COLS_H2 || p == ALLOY_EIGH_COLS_NOV;
}
#define N_PATHS ((int)(sizeof PATHS / sizeof PATHS[0]))

static const int ALL_KINDS[] = {K_RANDOM, K_COND_LO, K_COND_HI, K_GRADED, K_REPEATED,
                                K_CLUSTER, K_RANKDEF, K_ZERO, K_IDENTITY};

/* The op's own choice of kernel: every size, both dtypes, both triangles,
 * every kind of matrix. */
static void test_sizes(void) {
    const int ns[] = {0, 1, 2, 7, 16, 33, 64, 100, 129, 256};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int d = 0; d < 2; d++) {
            const int n = ns[i];
            const int64_t batch = n >= 129 ? 1 : n >= 64 ? 3 : 9;
            eigh_case t = {DTS[d], n, batch, (int)(i + d) % 2, 1, ALLOY_EIGH_AUTO, (int)i % 2, ALL_KINDS, 9, 0};
            if (n >= 64) { /* a few kinds at the large sizes (each a long-double O(n^3) check) */
                static const int big[] = {K_COND_HI, K_CLUSTER, K_RANKDEF};
                t.kinds = big + (i % 3);
                t.nkinds = 3 - (int)(i % 3);
            }
            run_checked(&t);
        }
}

/* Batches of 1000 small matrices, and 3. */
static void test_batches(void) {
    const int ns[] = {2, 7, 16};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int d = 0; d < 2; d++) {
            eigh_case t = {DTS[d], ns[i], 1000, d, 1, ALLOY_EIGH_AUTO, (int)i % 2, ALL_KINDS, 9, 0};
            run_checked(&t);
            t.batch = 3;
            t.give_out = !t.give_out;
            run_checked(&t);
        }
}

/* Eigenvalues only: the same values as with vectors (the matrix's rotations
 * do not depend on V), bit for bit. */
static void test_values_only(void) {
    for (int d = 0; d < 2; d++)
        for (int p = 0; p < N_PATHS; p++) {
            const alloy_eigh_path path = PATHS[p];
            const alloy_dtype dt = DTS[d];
            const int n = 19;
            const int64_t batch = 4, shape[3] = {batch, n, n};
            double *A = malloc(sizeof(double) * batch * n * n);
            long double ref[19];
            void *raw = malloc(8 * batch * n * n);
            for (int64_t b = 0; b < batch; b++) make_matrix(dt, n, (int)b % 2 ? K_RANDOM : K_CLUSTER, A + b * n * n, ref);
            for (int64_t e = 0; e < batch * n * n; e++) put(dt, raw, e, A[e]);
            alloy_array *a = NULL, *w1 = NULL, *w2 = NULL, *v = NULL;
            CHECK_OK(alloy_array_from_host(ku_device(), dt, 3, shape, raw, &a));
            alloy_eigh_options o;
            alloy_eigh_options_init(&o);
            CHECK_OK(alloy_eigh_with_path(a, &o, path, NULL, &w1, &v, NULL));
            o.compute_vectors = 0;
            CHECK_OK(alloy_eigh_with_path(a, &o, path, NULL, &w2, NULL, NULL));
            if (w1 && w2) {
                double h1[4 * 19], h2[4 * 19];
                CHECK_OK(alloy_array_copy_to_host(w1, h1, alloy_dtype_size(dt) * batch * n));
                CHECK_OK(alloy_array_copy_to_host(w2, h2, alloy_dtype_size(dt) * batch * n));
                CHECK(memcmp(h1, h2, alloy_dtype_size(dt) * batch * n) == 0);
            }
            eigh_case t = {dt, small_only(path) ? 32 : 33, 3, d, 0, path, 1, ALL_KINDS, 9, 0};
            run_checked(&t);
            alloy_array_free(a);
            alloy_array_free(w1);
            alloy_array_free(w2);
            alloy_array_free(v);
            free(A);
            free(raw);
        }
}

/* info: a NaN matrix gives 1 and NaN outputs, only for itself; a sweep limit
 * of 1 leaves random matrices unconverged (2), still with orthonormal V. */
static void test_info(void) {
    static const int nan_kinds[] = {K_RANDOM, K_NAN, K_COND_LO, K_NAN, K_IDENTITY};
    static const int rnd[] = {K_RANDOM};
    for (int d = 0; d < 2; d++)
        for (int p = 0; p < N_PATHS; p++) {
            const alloy_eigh_path path = PATHS[p];
            eigh_case t = {DTS[d], 9, 5, p % 2, 1, path, 1, nan_kinds, 5, 0};
            run_checked(&t);
            t.vectors = 0;
            t.n = 1;
            run_checked(&t);
            /* info 2: ascending values and orthonormal vectors all the same */
            eigh_case s = {DTS[d], 24, 2, 0, 1, path, d, rnd, 1, 1};
            run_checked(&s);
        }
}

/* Every kernel file through the op on this device (the GPU kernel runs
 * correctly on the CPU too). */
static void test_paths(void) {
    const struct {
        alloy_eigh_path path;
        int n;
        int64_t batch;
    } cases[] = {
        {ALLOY_EIGH_CPU, 0, 2},       {ALLOY_EIGH_CPU, 1, 3},        {ALLOY_EIGH_CPU, 40, 9},
        {ALLOY_EIGH_TG_SMEM, 0, 2},   {ALLOY_EIGH_TG_SMEM, 1, 3},    {ALLOY_EIGH_TG_SMEM, 2, 9},
        {ALLOY_EIGH_TG_SMEM, 5, 9},   {ALLOY_EIGH_TG_SMEM, 16, 9},   {ALLOY_EIGH_TG_SMEM, 33, 9},
        {ALLOY_EIGH_TG_SMEM, 64, 3},  {ALLOY_EIGH_TG_DEVICE, 1, 3},  {ALLOY_EIGH_TG_DEVICE, 7, 9},
        {ALLOY_EIGH_TG_DEVICE, 32, 9}, {ALLOY_EIGH_TG_DEVICE, 65, 2}, {ALLOY_EIGH_REG, 0, 2},
        {ALLOY_EIGH_REG, 1, 3},       {ALLOY_EIGH_REG, 2, 9},        {ALLOY_EIGH_REG, 5, 9},
        {ALLOY_EIGH_REG, 16, 9},      {ALLOY_EIGH_REG, 31, 9},       {ALLOY_EIGH_REG, 32, 9},
        {ALLOY_EIGH_TRIDIAG_SMEM, 0, 2}, {ALLOY_EIGH_TRIDIAG_SMEM, 1, 3}, {ALLOY_EIGH_TRIDIAG_SMEM, 2, 9},
        {ALLOY_EIGH_TRIDIAG_SMEM, 3, 9}, {ALLOY_EIGH_TRIDIAG_SMEM, 5, 9}, {ALLOY_EIGH_TRIDIAG_SMEM, 16, 9},
        {ALLOY_EIGH_TRIDIAG_SMEM, 33, 9}, {ALLOY_EIGH_TRIDIAG_DEVICE, 1, 3}, {ALLOY_EIGH_TRIDIAG_DEVICE, 7, 9},
        {ALLOY_EIGH_TRIDIAG_DEVICE, 32, 9}, {ALLOY_EIGH_TRIDIAG_DEVICE, 40, 9},
        {ALLOY_EIGH_COLS, 0, 2},      {ALLOY_EIGH_COLS, 1, 3},       {ALLOY_EIGH_COLS, 2, 9},
        {ALLOY_EIGH_COLS, 3, 9},      {ALLOY_EIGH_COLS, 17, 9},      {ALLOY_EIGH_COLS, 31, 9},
        {ALLOY_EIGH_COLS, 32, 9},     {ALLOY_EIGH_COLS_H2, 0, 2},    {ALLOY_EIGH_COLS_H2, 1, 3},
        {ALLOY_EIGH_COLS_H2, 2, 9},   {ALLOY_EIGH_COLS_H2, 3, 9},    {ALLOY_EIGH_COLS_H2, 17, 9},
        {ALLOY_EIGH_COLS_H2, 31, 9},  {ALLOY_EIGH_COLS_H2, 32, 9},   {ALLOY_EIGH_COLS_NOV, 0, 2},
        {ALLOY_EIGH_COLS_NOV, 1, 3},  {ALLOY_EIGH_COLS_NOV, 2, 9},   {ALLOY_EIGH_COLS_NOV, 3, 9},
        {ALLOY_EIGH_COLS_NOV, 17, 9}, {ALLOY_EIGH_COLS_NOV, 24, 9},  {ALLOY_EIGH_COLS_NOV, 31, 9},
        {ALLOY_EIGH_COLS_NOV, 32, 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 2; d++) {
            eigh_case t = {DTS[d], cases[i].n, cases[i].batch, (int)(i + d) % 2, 1, cases[i].path, (int)i % 2,
                           ALL_KINDS, 9, 0};
            run_checked(&t);
        }
}

/* The tridiagonal kernel's variant with the matrix in device scratch when
 * `device`, else the threadgroup-memory one where it fits this device (on
 * CUDA it does not at float32 n = 256 or float64 n > 159). */
static alloy_eigh_path tridiag_path(int device, int n, alloy_dtype dt) {
    return device || !alloy_eigh_tridiag_smem_fits(ku_device(), n, dt) ? ALLOY_EIGH_TRIDIAG_DEVICE
                                                                          : ALLOY_EIGH_TRIDIAG_SMEM;
}

/* The tridiagonal paths (eigh_tridiag.metal, matrix in threadgroup memory
 * or in device scratch) at the sizes the GPU gives them, with the hostile
 * kinds, both dtypes and both triangles. */
static void test_tridiag_sizes(void) {
    static const int hostile[] = {K_COND_HI, K_GRADED, K_REPEATED, K_CLUSTER, K_RANKDEF, K_ZERO, K_IDENTITY, K_COND_LO};
    const int ns[] = {33, 64, 100, 129, 256};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int p = 0; p < 2; p++) {
                const int n = ns[i];
                eigh_case t = {DTS[d], n, 9, (int)(i + d + p) % 2, 1,
                               tridiag_path(p, n, DTS[d]), (int)(i + p) % 2, ALL_KINDS, 9, 0};
                if (n >= 64) { /* a rotating few of the hostile kinds (each a long-double O(n^3) check) */
                    const int per = n >= 256 ? 2 : n >= 129 ? 3 : 4, start = (int)(2 * i + 3 * d + 5 * p) % 8;
                    static int picked[4];
                    for (int k = 0; k < per; k++) picked[k] = hostile[(start + k) % 8];
                    t.kinds = picked;
                    t.nkinds = per;
                    t.batch = per;
                }
                run_checked(&t);
            }
    /* random matrices (the reference a long-double Jacobi) and eigenvalues only */
    const int nr[] = {33, 64, 100};
    static const int rnd[] = {K_RANDOM, K_CLUSTER};
    for (size_t i = 0; i < sizeof nr / sizeof nr[0]; i++)
        for (int d = 0; d < 2; d++) {
            eigh_case t = {DTS[d], nr[i], 3, d, 1, tridiag_path(i % 2, nr[i], DTS[d]), 1, rnd, 2, 0};
            run_checked(&t);
            t.vectors = 0;
            t.upper = !t.upper;
            run_checked(&t);
        }
}

/* The tridiagonal paths reading through odd strides: rows padded to an odd
 * stride, an odd batch stride and offset, junk (NaN) outside the triangle
 * read and in the padding; eigenvalues against the long-double reference,
 * residual and orthogonality of the vectors. */
static void test_tridiag_strided(void) {
    for (int d = 0; d < 2; d++)
        for (int p = 0; p < 2; p++)
            for (int up = 0; up < 2; up++) {
                const alloy_dtype dt = DTS[d];
                const size_t es = alloy_dtype_size(dt);
                const int n = 37;
                const int64_t B = 3, nn = (int64_t)n * n, rs = n + 2, bs = rs * n + 5, off = 3;
                const int64_t total = off + B * bs;
                double *A = malloc(sizeof(double) * (size_t)(B * nn));
                long double *ref = malloc(sizeof(long double) * (size_t)(B * n));
                void *raw = malloc(es * (size_t)total);
                for (int64_t e = 0; e < total; e++) put(dt, raw, e, NAN);
                for (int64_t b = 0; b < B; b++) {
                    make_matrix(dt, n, b == 1 ? K_CLUSTER : K_RANDOM, A + b * nn, ref + b * n);
                    for (int i = 0; i < n; i++)
                        for (int j = 0; j < n; j++)
                            if (up ? j >= i : j <= i) put(dt, raw, off + b * bs + i * rs + j, A[b * nn + i * n + j]);
                }
                const int64_t shape[3] = {B, n, n}, strides[3] = {bs, rs, 1};
                alloy_array *view = NULL, *w = NULL, *v = NULL, *info = NULL;
                CHECK_OK(ku_view_of_host(raw, total, dt, 3, shape, strides, off, &view));
                alloy_eigh_options o;
                alloy_eigh_options_init(&o);
                o.upper = up;
                CHECK_OK(alloy_eigh_with_path(view, &o, tridiag_path(p, n, dt), NULL,
                                              &w, &v, &info));
                if (w && v && info) {
                    void *hw = malloc(es * (size_t)(B * n)), *hv = malloc(es * (size_t)(B * nn));
                    int32_t hi[3];
                    CHECK_OK(alloy_array_copy_to_host(w, hw, es * (size_t)(B * n)));
                    CHECK_OK(alloy_array_copy_to_host(v, hv, es * (size_t)(B * nn)));
                    CHECK_OK(alloy_array_copy_to_host(info, hi, sizeof hi));
                    const double lim = 10.0 * n * unit_round(dt);
                    int bad = 0;
                    for (int64_t b = 0; b < B; b++) {
                        const double *Ab = A + b * nn;
                        long double anrm = 0, res = 0, orth = 0;
                        for (int64_t e = 0; e < nn; e++) anrm += (long double)Ab[e] * Ab[e];
                        anrm = sqrtl(anrm);
                        bad += hi[b] != 0;
                        for (int k = 0; k < n; k++)
                            bad += !(fabsl((long double)get(dt, hw, b * n + k) - ref[b * n + k]) <= lim * anrm);
                        for (int i = 0; i < n; i++)
                            for (int k = 0; k < n; k++) {
                                long double s = 0, g = 0;
                                for (int j = 0; j < n; j++) {
                                    s += (long double)Ab[i * n + j] * get(dt, hv, b * nn + j * n + k);
                                    g += (long double)get(dt, hv, b * nn + j * n + i) * get(dt, hv, b * nn + j * n + k);
                                }
                                s -= (long double)get(dt, hv, b * nn + i * n + k) * get(dt, hw, b * n + k);
                                res += s * s;
                                g -= i == k;
                                orth += g * g; /* Frobenius: at most sqrt(n) times the spectral norm */
                            }
                        bad += !(sqrtl(res) <= lim * anrm);
                        bad += !(sqrtl(orth) <= lim * sqrt((double)n));
                    }
                    CHECK_MSG(bad == 0, "%d wrong (%s path %d upper %d)", bad, alloy_dtype_name(dt), p, up);
                    free(hw);
                    free(hv);
                }
                alloy_array_free(view);
                alloy_array_free(w);
                alloy_array_free(v);
                alloy_array_free(info);
                free(A);
                free(ref);
                free(raw);
            }
}

/* a read in place through strides: each matrix transposed in memory and
 * batch dimensions that do not collapse into one stride. */
static void test_strided(void) {
    for (int d = 0; d < 2; d++) {
        const alloy_dtype dt = DTS[d];
        const size_t es = alloy_dtype_size(dt);
        const int n = 6;
        const int64_t B0 = 2, B1 = 3, nn = n * n;
        double *A = malloc(sizeof(double) * (size_t)(B0 * B1 * nn));
        long double ref[6 * 6];
        void *raw = malloc(es * (size_t)(B0 * B1 * nn));
        /* storage (B1, B0, n, n), asymmetric junk above the diagonal of the
         * stored matrix: the view's upper triangle is the stored lower one */
        for (int64_t b = 0; b < B0 * B1; b++) make_matrix(dt, n, K_RANDOM, A + b * nn, ref + (b % 6) * n);
        for (int64_t b = 0; b < B0 * B1; b++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) put(dt, raw, b * nn + i * n + j, j <= i ? A[b * nn + i * n + j] : 1e30);
        const int64_t shape[4] = {B0, B1, n, n}, strides[4] = {nn, B0 * nn, 1, n};
        alloy_array *view = NULL, *w = NULL, *v = NULL, *info = NULL;
        CHECK_OK(ku_view_of_host(raw, B0 * B1 * nn, dt, 4, shape, strides, 0, &view));
        alloy_eigh_options o;
        alloy_eigh_options_init(&o);
        o.upper = 1;
        CHECK_OK(alloy_eigh(view, &o, NULL, &w, &v, &info));
        if (w && v && info) {
            CHECK(alloy_array_ndim(w) == 3 && alloy_array_ndim(v) == 4 && alloy_array_ndim(info) == 2);
            double hw[36];
            int32_t hi[6];
            CHECK_OK(alloy_array_copy_to_host(w, hw, es * 36));
            CHECK_OK(alloy_array_copy_to_host(info, hi, sizeof hi));
            int bad = 0;
            for (int64_t i0 = 0; i0 < B0; i0++)
                for (int64_t i1 = 0; i1 < B1; i1++) {
                    long double r[6];
                    ref_jacobi(n, A + (i1 * B0 + i0) * nn, r);
                    bad += hi[i0 * B1 + i1] != 0;
                    for (int k = 0; k < n; k++)
                        bad += !(fabs(get(dt, hw, (i0 * B1 + i1) * n + k) - (double)r[k]) <= 100 * n * unit_round(dt));
                }
            CHECK_MSG(bad == 0, "%d wrong (%s)", bad, alloy_dtype_name(dt));
        }
        alloy_array_free(view);
        alloy_array_free(w);
        alloy_array_free(v);
        alloy_array_free(info);
        free(A);
        free(raw);
    }
}

static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s3[1] = {3}, s2[1] = {2}, s233[3] = {2, 3, 3};
    float z[18] = {0};
    int32_t zi[18] = {0};
    alloy_array *rect = NULL, *sq = NULL, *ints = NULL, *vec = NULL, *b3 = NULL, *w = NULL, *v = NULL, *info = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s23, z, &rect));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s33, z, &sq));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 3, s233, z, &b3));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 2, s33, zi, &ints));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, s3, z, &vec));
    CHECK_FAILS(alloy_eigh(NULL, NULL, NULL, &w, &v, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is NULL");
    CHECK_FAILS(alloy_eigh(sq, NULL, NULL, NULL, &v, &info), ALLOY_ERROR_INVALID_ARGUMENT, "w is NULL");
    CHECK_FAILS(alloy_eigh(sq, NULL, NULL, &w, NULL, &info), ALLOY_ERROR_INVALID_ARGUMENT, "v is NULL");
    CHECK_FAILS(alloy_eigh(rect, NULL, NULL, &w, &v, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is not square");
    CHECK_FAILS(alloy_eigh(vec, NULL, NULL, &w, &v, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is 1-D");
    CHECK_FAILS(alloy_eigh(ints, NULL, NULL, &w, &v, &info), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    alloy_eigh_options o;
    alloy_eigh_options_init(&o);
    o.max_sweeps = -1;
    CHECK_FAILS(alloy_eigh(sq, &o, NULL, &w, &v, &info), ALLOY_ERROR_INVALID_ARGUMENT, "max_sweeps is -1");
    alloy_array *wrong = sq;
    CHECK_FAILS(alloy_eigh(sq, NULL, NULL, &wrong, &v, &info), ALLOY_ERROR_INVALID_ARGUMENT,
                "w has shape (3, 3) but must have shape (3,)");
    wrong = rect;
    CHECK_FAILS(alloy_eigh(sq, NULL, NULL, &w, &wrong, &info), ALLOY_ERROR_INVALID_ARGUMENT, "v has shape (2, 3)");
    alloy_array *winfo = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, s2, z, &winfo));
    CHECK_FAILS(alloy_eigh(b3, NULL, NULL, &w, &v, &winfo), ALLOY_ERROR_INVALID_ARGUMENT, "info is float32");
    alloy_array_free(winfo);
    CHECK(w == NULL && v == NULL && info == NULL);
    /* info may be left out; a single matrix has a 0-d info; without vectors
     * v is not touched */
    alloy_eigh_options_init(&o);
    o.compute_vectors = 0;
    CHECK_OK(alloy_eigh(sq, &o, NULL, &w, NULL, &info));
    if (w && info) {
        int32_t code = -1;
        CHECK(alloy_array_ndim(info) == 0 && alloy_array_ndim(w) == 1);
        CHECK_OK(alloy_array_copy_to_host(info, &code, sizeof code));
        CHECK(code == 0);
    }
    alloy_array_free(w);
    w = NULL;
    CHECK_OK(alloy_eigh(b3, NULL, NULL, &w, &v, NULL));
    alloy_array_free(w);
    alloy_array_free(v);
    alloy_array_free(info);
    alloy_array_free(rect);
    alloy_array_free(sq);
    alloy_array_free(b3);
    alloy_array_free(ints);
    alloy_array_free(vec);
}

int main(void) {
    harness_seed();
    RUN(test_sizes);
    RUN(test_batches);
    RUN(test_values_only);
    RUN(test_info);
    RUN(test_paths);
    RUN(test_tridiag_sizes);
    RUN(test_tridiag_strided);
    RUN(test_strided);
    RUN(test_errors);
    return harness_finish();
}
