/* test_linalg_triangular.c — alloy_solve_triangular (alloy/linalg.h)
 * against long-double substitution: left and right side, lower and upper,
 * transposed, unit diagonal, sizes 0 to 256, right-hand sides across several
 * 32-column blocks, 1-D b, broadcast batches, strided operands read in
 * place, the triangle that must not be read filled with NaN, outputs
 * pre-filled with NaN (every element must be written), and the errors that
 * name their argument. On the device the tests run on (ALLOY_DEVICE, default
 * cpu). */
#include "harness.h"
#include "kernel_util.h"

#include "alloy/linalg.h"

static double unit_roundoff(alloy_dtype dt) { return dt == ALLOY_FLOAT64 ? 0x1p-53 : 0x1p-24; }

static void put(alloy_dtype dt, void *buf, int64_t i, double v) {
    if (dt == ALLOY_FLOAT64) ((double *)buf)[i] = v;
    else ((float *)buf)[i] = (float)v;
}
static double get(alloy_dtype dt, const void *buf, int64_t i) {
    return dt == ALLOY_FLOAT64 ? ((const double *)buf)[i] : (double)((const float *)buf)[i];
}
static double as_stored(alloy_dtype dt, double v) { return dt == ALLOY_FLOAT64 ? v : (double)(float)v; }

typedef struct tri_case {
    alloy_dtype dt;
    int n, k;
    int lower, transpose, unit, right;
    int64_t ab, bb;  /* batch of a and of b (one of them 1 broadcasts; 0: no batch dimension) */
    int vec;         /* b is 1-D */
    int a_transposed_storage; /* a is a transposed view of its storage */
    int give_out;
} tri_case;

static void run_tri(const tri_case *t) {
    const int n = t->n, k = t->vec ? 1 : t->k;
    const size_t es = alloy_dtype_size(t->dt);
    const int64_t ab = t->ab ? t->ab : 1, bb = t->vec ? 1 : (t->bb ? t->bb : 1);
    const int64_t batch = ab > bb ? ab : bb, nn = (int64_t)n * n, nk = (int64_t)n * k;
    double *A = malloc(sizeof(double) * (size_t)(ab * nn + 1)), *B = malloc(sizeof(double) * (size_t)(bb * nk + 1));
    void *ra = malloc(es * (size_t)(ab * nn + 1)), *rb = malloc(es * (size_t)(bb * nk + 1));
    /* a: the referenced triangle well conditioned (diagonal of magnitude 1..2,
     * off-diagonal elements of size 1/n), everything else NaN */
    for (int64_t b = 0; b < ab; b++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const int in_tri = t->lower ? j < i : j > i;
                double v = NAN;
                if (i == j) v = t->unit ? NAN : as_stored(t->dt, (harness_uniform(0, 1) < 0.5 ? -1 : 1) * harness_uniform(1, 2));
                else if (in_tri) v = as_stored(t->dt, harness_uniform(-1, 1) / n);
                A[b * nn + i * n + j] = v;
                /* storage: row-major, or its transpose for a transposed view */
                put(t->dt, ra, b * nn + (t->a_transposed_storage ? j * n + i : i * n + j), v);
            }
    for (int64_t e = 0; e < bb * nk; e++) {
        B[e] = as_stored(t->dt, harness_uniform(-1, 1));
        put(t->dt, rb, e, B[e]);
    }
    /* shapes: a (ab, n, n) or (n, n); b (bb, rows, cols) or 1-D */
    const int rows = t->right ? k : n, cols = t->right ? n : k;
    alloy_array *a = NULL, *bm = NULL, *x = NULL;
    {
        int64_t sh[3] = {ab, n, n}, st[3] = {nn, n, 1};
        if (t->a_transposed_storage) {
            st[1] = 1;
            st[2] = n;
        }
        const int nd = t->ab ? 3 : 2;
        CHECK_OK(ku_view_of_host(ra, ab * nn, t->dt, nd, sh + (3 - nd), st + (3 - nd), 0, &a));
    }
    if (t->vec) {
        int64_t sh[1] = {n};
        CHECK_OK(alloy_array_from_host(ku_device(), t->dt, 1, sh, rb, &bm));
    } else {
        int64_t sh[3] = {bb, rows, cols};
        const int nd = t->bb ? 3 : 2;
        CHECK_OK(alloy_array_from_host(ku_device(), t->dt, nd, sh + (3 - nd), rb, &bm));
    }
    const int has_batch = t->ab || (!t->vec && t->bb);
    if (t->give_out) {
        int64_t sh[3] = {batch, rows, cols};
        int nd = has_batch ? 3 : 2;
        if (t->vec) {
            sh[1] = n;
            nd = has_batch ? 2 : 1;
            CHECK_OK(alloy_array_new(ku_device(), t->dt, nd, sh + (2 - nd), &x));
        } else {
            CHECK_OK(alloy_array_new(ku_device(), t->dt, nd, sh + (3 - nd), &x));
        }
        CHECK_OK(alloy_array_fill(x, NAN));
    }
    alloy_array *given = x;
    alloy_triangular_options o;
    alloy_triangular_options_init(&o);
    o.lower = t->lower;
    o.transpose = t->transpose;
    o.unit_diagonal = t->unit;
    o.right = t->right;
    CHECK_OK(alloy_solve_triangular(a, bm, &o, NULL, &x));
    CHECK(!given || x == given);
    if (x) {
        CHECK(alloy_array_size(x) == batch * nk);
        void *got = malloc(es * (size_t)(batch * nk + 1));
        CHECK_OK(alloy_array_copy_to_host(x, got, es * (size_t)(batch * nk)));
        double *M = malloc(sizeof(double) * (size_t)(nn + 1));
        long double *ref = malloc(sizeof(long double) * (size_t)(n + 1));
        const double u = unit_roundoff(t->dt);
        int bad = 0;
        for (int64_t b = 0; b < batch; b++) {
            const double *Ab = A + (ab == 1 ? 0 : b) * nn;
            const double *Bb = B + (bb == 1 ? 0 : b) * nk;
            /* M = op(a) as a dense matrix, then the left-side matrix S: S = M
             * (left) or M^T (right: X M = B is M^T X^T = B^T) */
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                    const int ti = t->transpose ? j : i, tj = t->transpose ? i : j;
                    const int in_tri = t->lower ? tj < ti : tj > ti;
                    const double v = ti == tj ? (t->unit ? 1.0 : Ab[ti * n + tj]) : in_tri ? Ab[ti * n + tj] : 0.0;
                    M[(t->right ? j : i) * n + (t->right ? i : j)] = v;
                }
            const int s_lower = (t->lower ^ t->transpose ^ t->right) != 0;
            double snorm = 0;
            for (int i = 0; i < n; i++) {
                double s = 0;
                for (int j = 0; j < n; j++) s += fabs(M[i * n + j]);
                if (s > snorm) snorm = s;
            }
            for (int c = 0; c < k; c++) {
                /* column c of the left-side problem: element p at B(p, c) (left) or B(c, p) (right) */
#define BIDX(p) (t->right ? (int64_t)c * n + (p) : (int64_t)(p) * k + c)
                for (int ii = 0; ii < n; ii++) {
                    const int p = s_lower ? ii : n - 1 - ii;
                    long double s = Bb[BIDX(p)];
                    for (int jj = 0; jj < ii; jj++) {
                        const int q = s_lower ? jj : n - 1 - jj;
                        s -= (long double)M[p * n + q] * ref[q];
                    }
                    ref[p] = s / M[p * n + p];
                }
                double rmax = 0, xmax = 0, bmax = 0, emax = 0, refmax = 0;
                for (int p = 0; p < n; p++) {
                    long double s = 0;
                    for (int q = 0; q < n; q++) s += (long double)M[p * n + q] * get(t->dt, got, b * nk + BIDX(q));
                    const double xp = get(t->dt, got, b * nk + BIDX(p));
                    const double r = fabs((double)(s - Bb[BIDX(p)]));
                    rmax = r > rmax || isnan(r) ? r : rmax;
                    xmax = fabs(xp) > xmax || isnan(xp) ? fabs(xp) : xmax;
                    bmax = fabs(Bb[BIDX(p)]) > bmax ? fabs(Bb[BIDX(p)]) : bmax;
                    const double e = fabs(xp - (double)ref[p]);
                    emax = e > emax || isnan(e) ? e : emax;
                    refmax = fabs((double)ref[p]) > refmax ? fabs((double)ref[p]) : refmax;
                }
#undef BIDX
                const double eta = n ? rmax / (snorm * xmax + bmax) : 0.0;
                const double fwd = n ? emax / (refmax > 0 ? refmax : 1) : 0.0;
                if (!(eta <= 10.0 * n * u) || !(fwd <= 100.0 * n * u)) {
                    if (bad < 4)
                        fprintf(stderr,
                                "  %s n=%d k=%d lower=%d trans=%d unit=%d right=%d matrix %lld column %d: "
                                "backward error %.3g, forward error %.3g\n",
                                alloy_dtype_name(t->dt), n, k, t->lower, t->transpose, t->unit, t->right,
                                (long long)b, c, eta, fwd);
                    bad++;
                }
            }
        }
        CHECK_MSG(bad == 0, "%d columns wrong", bad);
        free(got);
        free(M);
        free(ref);
    }
    alloy_array_free(a);
    alloy_array_free(bm);
    alloy_array_free(x);
    free(A);
    free(B);
    free(ra);
    free(rb);
}

static const alloy_dtype DTS[2] = {ALLOY_FLOAT32, ALLOY_FLOAT64};

/* Every combination of side, triangle, transpose and unit diagonal. */
static void test_combinations(void) {
    const int ns[] = {0, 1, 7, 33, 100};
    const int ks[] = {1, 3, 40};
    int i = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (int d = 0; d < 2; d++)
            for (int combo = 0; combo < 16; combo++, i++) {
                tri_case t = {DTS[d], ns[a], ks[i % 3], combo & 1, (combo >> 1) & 1, (combo >> 2) & 1,
                              (combo >> 3) & 1, 2, 2, 0, 0, i % 2};
                run_tri(&t);
            }
}

static void test_sizes(void) {
    const int ns[] = {2, 16, 64, 129, 256};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (int d = 0; d < 2; d++) {
            tri_case t = {DTS[d], ns[a], 5, (int)a % 2, d, 0, (int)(a / 2) % 2, 3, 3, 0, 0, 1};
            run_tri(&t);
        }
    /* many small systems */
    tri_case many = {ALLOY_FLOAT32, 8, 2, 1, 0, 0, 0, 1000, 1000, 0, 0, 0};
    run_tri(&many);
    tri_case none = {ALLOY_FLOAT64, 5, 0, 1, 0, 0, 0, 2, 2, 0, 0, 0}; /* k = 0 */
    run_tri(&none);
}

/* Broadcast batches, 1-D b, unbatched operands, a read through transposed
 * strides. */
static void test_shapes(void) {
    for (int d = 0; d < 2; d++)
        for (int right = 0; right < 2; right++) {
            tri_case bcast_a = {DTS[d], 12, 4, 1, 0, 0, right, 1, 5, 0, 0, 1};
            run_tri(&bcast_a);
            tri_case bcast_b = {DTS[d], 12, 4, 0, 1, 0, right, 4, 1, 0, 0, 0};
            run_tri(&bcast_b);
            tri_case v = {DTS[d], 20, 1, 1, 1, 0, right, 3, 0, 1, 0, 1};
            run_tri(&v);
            tri_case v0 = {DTS[d], 20, 1, 0, 0, 1, right, 0, 0, 1, 0, 0};
            run_tri(&v0);
            tri_case plain = {DTS[d], 9, 7, 1, 0, 0, right, 0, 0, 0, 0, 1};
            run_tri(&plain);
            tri_case tr = {DTS[d], 35, 6, 1, right, 0, right, 2, 2, 0, 1, 0};
            run_tri(&tr);
            tri_case tr2 = {DTS[d], 35, 6, 0, 1, 1, right, 2, 2, 0, 1, 1};
            run_tri(&tr2);
        }
    /* a (3, 1, n, n) with b (2, n, k): (3, 2, n, k), b read through a strided view */
    const int n = 6, k = 3;
    float av[3 * 36], bv[2 * 6 * 6];
    for (int i = 0; i < 3 * 36; i++) av[i] = (float)harness_uniform(-1, 1) / 6;
    for (int m = 0; m < 3; m++)
        for (int i = 0; i < n; i++) av[m * 36 + i * 7] = 1.5f;
    for (int i = 0; i < 2 * 36; i++) bv[i] = (float)harness_uniform(-1, 1);
    int64_t ash[4] = {3, 1, n, n}, bsh[3] = {2, n, k}, bst[3] = {36, 6, 2}; /* every other column */
    alloy_array *a = NULL, *b = NULL, *x = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 4, ash, av, &a));
    CHECK_OK(ku_view_of_host(bv, 72, ALLOY_FLOAT32, 3, bsh, bst, 1, &b));
    alloy_triangular_options o;
    alloy_triangular_options_init(&o);
    o.lower = 1;
    CHECK_OK(alloy_solve_triangular(a, b, &o, NULL, &x));
    if (x) {
        CHECK(alloy_array_ndim(x) == 4 && alloy_array_shape(x)[0] == 3 && alloy_array_shape(x)[1] == 2 &&
              alloy_array_shape(x)[2] == n && alloy_array_shape(x)[3] == k);
        float got[3 * 2 * 6 * 3];
        CHECK_OK(alloy_array_copy_to_host(x, got, sizeof got));
        int bad = 0;
        for (int m = 0; m < 3; m++)
            for (int q = 0; q < 2; q++)
                for (int c = 0; c < k; c++) {
                    double y[6];
                    for (int i = 0; i < n; i++) {
                        double s = bv[q * 36 + i * 6 + 1 + 2 * c];
                        for (int j = 0; j < i; j++) s -= (double)av[m * 36 + i * 6 + j] * y[j];
                        y[i] = s / av[m * 36 + i * 7];
                        if (!(fabs(got[((m * 2 + q) * n + i) * k + c] - y[i]) <= 1e-5 * (1 + fabs(y[i])))) bad++;
                    }
                }
        CHECK_MSG(bad == 0, "%d elements wrong", bad);
    }
    alloy_array_free(a);
    alloy_array_free(b);
    alloy_array_free(x);
}

static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s32[2] = {3, 2}, s2[1] = {2};
    float z[9] = {0};
    double zd[9] = {0};
    alloy_array *rect = NULL, *sq = NULL, *sqd = NULL, *b32 = NULL, *v2 = NULL, *x = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s23, z, &rect));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s33, z, &sq));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT64, 2, s33, zd, &sqd));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s32, z, &b32));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, s2, z, &v2));
    alloy_triangular_options o;
    alloy_triangular_options_init(&o);
    CHECK_FAILS(alloy_solve_triangular(rect, b32, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "a is not square");
    CHECK_FAILS(alloy_solve_triangular(sq, sqd, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT,
                "a is float32 but b is float64");
    CHECK_FAILS(alloy_solve_triangular(sq, rect, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "b has 2 rows but a is 3 x 3");
    CHECK_FAILS(alloy_solve_triangular(sq, v2, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "b has 2 elements");
    CHECK_FAILS(alloy_solve_triangular(v2, sq, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "a is 1-D");
    CHECK_FAILS(alloy_solve_triangular(NULL, sq, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "a is NULL");
    CHECK_FAILS(alloy_solve_triangular(sq, sq, &o, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "out is NULL");
    o.right = 1;
    CHECK_FAILS(alloy_solve_triangular(sq, b32, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "b has 2 columns");
    CHECK_OK(alloy_solve_triangular(sq, rect, &o, NULL, &x)); /* (2 x 3) a^-1 */
    alloy_array_free(x);
    x = rect;
    o.right = 0;
    CHECK_FAILS(alloy_solve_triangular(sq, b32, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT, "out has the wrong shape");
    x = sqd;
    CHECK_FAILS(alloy_solve_triangular(sq, sq, &o, NULL, &x), ALLOY_ERROR_INVALID_ARGUMENT,
                "out is float64 but the result is float32");
    alloy_array_free(rect);
    alloy_array_free(sq);
    alloy_array_free(sqd);
    alloy_array_free(b32);
    alloy_array_free(v2);
}

int main(void) {
    harness_seed();
    RUN(test_combinations);
    RUN(test_sizes);
    RUN(test_shapes);
    RUN(test_errors);
    return harness_finish();
}
