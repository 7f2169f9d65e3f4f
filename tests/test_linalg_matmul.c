/* test_linalg_matmul.c — alloy_matmul (alloy/linalg.h) against a
 * double-precision C loop: NumPy's shapes (1-D operands, broadcast batches),
 * transposes and strided views read in place, alpha/beta into a given out,
 * every dtype in and out, and the errors that name their argument. On the
 * device the tests run on (ALLOY_DEVICE, default cpu). */
#include "harness.h"
#include "kernel_util.h"

#include "alloy/linalg.h"
#include "ops/catalog.h"

/* ---- host operands --------------------------------------------------------- */

/* A random array of `dt` with the given shape (row-major) and the values it
 * holds, as doubles (rounded exactly as stored). */
typedef struct host_arr {
    int ndim;
    int64_t shape[ALLOY_MAX_NDIM];
    int64_t n;
    double *v;
    alloy_array *a;
} host_arr;

static void encode(alloy_dtype dt, double x, void *dst, int64_t i, double *stored) {
    switch (dt) {
    case ALLOY_FLOAT16: ((uint16_t *)dst)[i] = ku_f16_bits(x); *stored = ku_f16_value(((uint16_t *)dst)[i]); break;
    case ALLOY_BFLOAT16: ((uint16_t *)dst)[i] = ku_bf16_bits(x); *stored = ku_bf16_value(((uint16_t *)dst)[i]); break;
    case ALLOY_FLOAT64: ((double *)dst)[i] = x; *stored = x; break;
    default: ((float *)dst)[i] = (float)x; *stored = (float)x; break;
    }
}

static double decode(alloy_dtype dt, const void *src, int64_t i) {
    switch (dt) {
    case ALLOY_FLOAT16: return ku_f16_value(((const uint16_t *)src)[i]);
    case ALLOY_BFLOAT16: return ku_bf16_value(((const uint16_t *)src)[i]);
    case ALLOY_FLOAT64: return ((const double *)src)[i];
    default: return ((const float *)src)[i];
    }
}

/* The output dtype's rounding: relative (eps) and, for results in its
 * subnormal range, absolute (half the subnormal spacing: float16 below
 * 6.1e-5 rounds in absolute terms). */
static double out_eps(alloy_dtype out) {
    return out == ALLOY_FLOAT16 ? 1e-3 : out == ALLOY_BFLOAT16 ? 8e-3 : out == ALLOY_FLOAT32 ? 1.2e-7 : 1e-16;
}

static double out_tiny(alloy_dtype out) {
    return out == ALLOY_FLOAT16 ? ldexp(1.0, -25) : out == ALLOY_BFLOAT16 ? ldexp(1.0, -134)
           : out == ALLOY_FLOAT32 ? ldexp(1.0, -150) : 0.0;
}

static host_arr make(alloy_dtype dt, int ndim, const int64_t *shape) {
    host_arr h = {0};
    h.ndim = ndim;
    h.n = 1;
    for (int d = 0; d < ndim; d++) {
        h.shape[d] = shape[d];
        h.n *= shape[d];
    }
    h.v = malloc((size_t)(h.n ? h.n : 1) * sizeof *h.v);
    void *raw = malloc((size_t)(h.n ? h.n : 1) * 8);
    for (int64_t i = 0; i < h.n; i++) encode(dt, harness_uniform(-1, 1), raw, i, &h.v[i]);
    CHECK_OK(alloy_array_from_host(ku_device(), dt, ndim, shape, raw, &h.a));
    free(raw);
    return h;
}

static void drop(host_arr *h) {
    free(h->v);
    alloy_array_free(h->a);
}

/* Element (b..., r, c) of a row-major host array given its batch index
 * broadcast from the result's batch shape. */
static double at(const host_arr *h, int nb, const int64_t *bidx, int64_t r, int64_t c, int as_row,
                 int as_col) {
    int64_t off = 0, mul = 1;
    int mat = h->ndim >= 2 ? 2 : 1;
    /* matrix part */
    if (h->ndim == 1) off = as_row ? c : r; /* a 1-D a is a row (use c), a 1-D b a column (use r) */
    else off = r * h->shape[h->ndim - 1] + c;
    (void)as_col;
    mul = h->ndim >= 2 ? h->shape[h->ndim - 1] * h->shape[h->ndim - 2] : h->shape[0];
    for (int d = h->ndim - mat - 1; d >= 0; d--) {
        int rd = d + (nb - (h->ndim - mat));
        int64_t i = h->shape[d] == 1 ? 0 : bidx[rd];
        off += i * mul;
        mul *= h->shape[d];
    }
    return h->v[off];
}

/* ---- one case --------------------------------------------------------------- */

typedef struct mm_case {
    alloy_dtype in, out;
    int nda, ndb;
    int64_t sa[ALLOY_MAX_NDIM], sb[ALLOY_MAX_NDIM];
    int ta, tb;
    double alpha, beta; /* beta != 0: out given, pre-filled */
    int give_out;       /* out given with beta 0, pre-filled with NaN */
    alloy_precision precision; /* float32 inputs: 0 (highest) unless set */
} mm_case;

static void run_case(const mm_case *t) {
    host_arr A = make(t->in, t->nda, t->sa), B = make(t->in, t->ndb, t->sb);
    /* logical shapes */
    int64_t M, K, N, Kb;
    if (t->nda == 1) { M = 1; K = t->sa[0]; }
    else { M = t->sa[t->nda - 2]; K = t->sa[t->nda - 1]; if (t->ta) { int64_t x = M; M = K; K = x; } }
    if (t->ndb == 1) { Kb = t->sb[0]; N = 1; }
    else { Kb = t->sb[t->ndb - 2]; N = t->sb[t->ndb - 1]; if (t->tb) { int64_t x = Kb; Kb = N; N = x; } }
    CHECK(K == Kb);
    int nba = t->nda > 2 ? t->nda - 2 : 0, nbb = t->ndb > 2 ? t->ndb - 2 : 0;
    int nb = nba > nbb ? nba : nbb;
    int64_t rshape[ALLOY_MAX_NDIM], full[ALLOY_MAX_NDIM];
    int64_t batch = 1;
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - nba), db = d - (nb - nbb);
        int64_t ea = da >= 0 ? t->sa[da] : 1, eb = db >= 0 ? t->sb[db] : 1;
        rshape[d] = ea > eb ? ea : eb;
        full[d] = rshape[d];
        batch *= rshape[d];
    }
    int rnd = nb;
    if (t->nda > 1) full[rnd++] = M;
    if (t->ndb > 1) full[rnd++] = N;
    const int64_t nres = batch * M * N;

    alloy_matmul_options o;
    alloy_matmul_options_init(&o);
    o.transpose_a = t->ta;
    o.transpose_b = t->tb;
    o.alpha = t->alpha;
    o.beta = t->beta;
    o.out_dtype_set = 1;
    o.out_dtype = t->out;
    o.precision = t->precision;
    alloy_array *c = NULL;
    double *c0 = calloc((size_t)(nres ? nres : 1), sizeof *c0);
    if (t->beta != 0 || t->give_out) {
        void *raw = malloc((size_t)(nres ? nres : 1) * 8);
        for (int64_t i = 0; i < nres; i++) {
            if (t->beta != 0) encode(t->out, harness_uniform(-1, 1), raw, i, &c0[i]);
            else encode(t->out, NAN, raw, i, &c0[i]);
        }
        CHECK_OK(alloy_array_from_host(ku_device(), t->out, rnd, full, raw, &c));
        free(raw);
    }
    alloy_array *given = c;
    CHECK_OK(alloy_matmul(A.a, B.a, &o, NULL, &c));
    CHECK(!given || c == given);
    if (c) {
        CHECK(alloy_array_ndim(c) == rnd);
        CHECK(alloy_array_dtype(c) == t->out);
        void *got = malloc((size_t)(nres ? nres : 1) * 8);
        CHECK_OK(alloy_array_copy_to_host(c, got, (size_t)nres * alloy_dtype_size(t->out)));
        const double eps_in = t->in == ALLOY_FLOAT64 ? 1e-15 : 2e-7; /* accumulation */
        /* each product's own error: TF32 factors (10-bit significands) for
         * "default", split TF32 (about 22 bits) for "high" */
        const double eps_prod = t->in != ALLOY_FLOAT32 ? 0.0
                                : t->precision == ALLOY_PRECISION_DEFAULT ? 2e-3
                                : t->precision == ALLOY_PRECISION_HIGH ? 1e-6 : 0.0;
        const double eps_out = out_eps(t->out), tiny_out = out_tiny(t->out);
        int bad = 0;
        int64_t bidx[ALLOY_MAX_NDIM] = {0};
        for (int64_t bi = 0; bi < batch; bi++) {
            int64_t rest = bi;
            for (int d = nb - 1; d >= 0; d--) {
                bidx[d] = rest % rshape[d];
                rest /= rshape[d];
            }
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0, sabs = 0;
                    for (int64_t k = 0; k < K; k++) {
                        double x = t->ta ? at(&A, nb, bidx, k, i, t->nda == 1, 0) : at(&A, nb, bidx, i, k, t->nda == 1, 0);
                        double y = t->tb ? at(&B, nb, bidx, j, k, 0, 1) : at(&B, nb, bidx, k, j, 0, 1);
                        s += x * y;
                        sabs += fabs(x * y);
                    }
                    const int64_t ci = (bi * M + i) * N + j;
                    double ref = t->alpha * s + (t->beta != 0 ? t->beta * c0[ci] : 0.0);
                    double g = decode(t->out, got, ci);
                    const double cterm = t->beta != 0 ? fabs(t->beta * c0[ci]) : 0.0;
                    double tol = (fabs(t->alpha) * sabs + cterm) * (K + 2) * eps_in +
                                 fabs(t->alpha) * sabs * eps_prod +
                                 fabs(ref) * eps_out + tiny_out + 1e-30;
                    if (!(fabs(g - ref) <= tol)) {
                        if (bad < 4)
                            fprintf(stderr, "  %s->%s M=%lld N=%lld K=%lld batch %lld: C[%lld,%lld] = %.9g, want %.9g\n",
                                    alloy_dtype_name(t->in), alloy_dtype_name(t->out), (long long)M,
                                    (long long)N, (long long)K, (long long)bi, (long long)i, (long long)j, g, ref);
                        bad++;
                    }
                }
        }
        CHECK_MSG(bad == 0, "%d of %lld elements wrong", bad, (long long)nres);
        free(got);
    }
    alloy_array_free(c);
    free(c0);
    drop(&A);
    drop(&B);
}

#define SHAPE(...) {__VA_ARGS__}

static void test_shapes(void) {
    const struct { int nda, ndb; int64_t sa[4], sb[4]; } cases[] = {
        {2, 2, SHAPE(1, 1), SHAPE(1, 1)},
        {2, 2, SHAPE(33, 29), SHAPE(29, 47)},
        {2, 2, SHAPE(130, 70), SHAPE(70, 257)},
        {2, 2, SHAPE(100, 7), SHAPE(7, 1)},
        {2, 2, SHAPE(1, 3), SHAPE(3, 1000)},
        {2, 2, SHAPE(5, 0), SHAPE(0, 6)}, /* K = 0: zeros */
        {1, 2, SHAPE(13), SHAPE(13, 9)},  /* a row */
        {2, 1, SHAPE(9, 13), SHAPE(13)},  /* a column */
        {1, 1, SHAPE(31), SHAPE(31)},     /* a dot product: 0-d result */
        {3, 2, SHAPE(3, 17, 11), SHAPE(11, 5)},
        {4, 3, SHAPE(2, 1, 5, 7), SHAPE(3, 7, 4)}, /* broadcast both ways */
        {3, 3, SHAPE(1, 6, 8), SHAPE(4, 8, 3)},
        /* batches past 65535 matrices (threadgroups along z): launched in pieces, or looped over */
        {3, 3, SHAPE(66000, 33, 1), SHAPE(66000, 1, 2)},
        {3, 2, SHAPE(70001, 2, 3), SHAPE(3, 2)},
        /* more tile rows than 65535 threadgroups along y hold: rows launched in pieces */
        {2, 2, SHAPE(4200000, 1), SHAPE(1, 1)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mm_case t = {ALLOY_FLOAT32, ALLOY_FLOAT32, cases[i].nda, cases[i].ndb, {0}, {0}, 0, 0, 1.0, 0.0, 0, ALLOY_PRECISION_HIGHEST};
        memcpy(t.sa, cases[i].sa, sizeof cases[i].sa);
        memcpy(t.sb, cases[i].sb, sizeof cases[i].sb);
        run_case(&t);
    }
}

/* A grid of M, N, K around the tiles (1, a prime, 64, 65, 130), transposes, dtypes, precisions,
 * alpha, beta and batches in turn. */
static void test_grid(void) {
    static const int64_t sizes[] = {1, 2, 17, 64, 65, 130};
    static const alloy_dtype ins[] = {ALLOY_FLOAT32, ALLOY_BFLOAT16, ALLOY_FLOAT16};
    static const alloy_precision precs[] = {ALLOY_PRECISION_HIGHEST, ALLOY_PRECISION_HIGH, ALLOY_PRECISION_DEFAULT};
    int x = 0;
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++, x++) {
            const int64_t M = sizes[a], N = sizes[b], K = sizes[(a + 2 * b + 1) % 6], batch = 1 + x % 3;
            const int ta = x % 2, tb = (x / 2) % 2;
            mm_case t = {ins[x % 3], x % 5 == 0 ? ALLOY_FLOAT32 : ins[x % 3], 3, 3, {0}, {0}, ta, tb,
                         x % 4 == 3 ? -0.5 : 1.0, x % 7 == 2 ? 0.25 : 0.0, x % 6 == 1, precs[x % 3]};
            const int64_t sa[3] = {batch, ta ? K : M, ta ? M : K}, sb[3] = {x % 4 == 0 ? 1 : batch, tb ? N : K, tb ? K : N};
            memcpy(t.sa, sa, sizeof sa);
            memcpy(t.sb, sb, sizeof sb);
            run_case(&t);
        }
}

static void test_transposes_alpha_beta(void) {
    mm_case t = {ALLOY_FLOAT32, ALLOY_FLOAT32, 2, 2, SHAPE(29, 33), SHAPE(41, 29), 1, 1, 1.0, 0.0, 0, ALLOY_PRECISION_HIGHEST};
    run_case(&t); /* (33 x 29) (29 x 41) from transposed storage */
    mm_case u = {ALLOY_FLOAT32, ALLOY_FLOAT32, 3, 2, SHAPE(2, 40, 19), SHAPE(40, 23), 1, 0, -0.5, 2.0, 0, ALLOY_PRECISION_HIGHEST};
    run_case(&u);
    mm_case v = {ALLOY_FLOAT32, ALLOY_FLOAT32, 2, 2, SHAPE(17, 9), SHAPE(9, 12), 0, 0, 1.0, 0.0, 1, ALLOY_PRECISION_HIGHEST};
    run_case(&v); /* out pre-filled with NaN, beta 0: NaN must not leak */
}

/* float32 at each precision, at sizes that take the tensor-core TF32 kernels
 * on a Hopper GPU (M and N over 64, any layout: transposed a, odd N, a
 * broadcast and transposed b) and ones that do not (N of 64). */
static void test_precisions(void) {
    const alloy_precision ps[3] = {ALLOY_PRECISION_HIGHEST, ALLOY_PRECISION_HIGH, ALLOY_PRECISION_DEFAULT};
    for (int i = 0; i < 3; i++) {
        mm_case t = {ALLOY_FLOAT32, ALLOY_FLOAT32, 2, 2, SHAPE(300, 132), SHAPE(132, 260), 0, 0, 1.0, 0.0, 1, ps[i]};
        run_case(&t); /* edge tiles in M and N, out pre-filled with NaN */
        mm_case u = {ALLOY_FLOAT32, ALLOY_FLOAT32, 3, 3, SHAPE(3, 100, 68), SHAPE(3, 68, 72), 0, 0, -0.5, 2.0, 0, ps[i]};
        run_case(&u); /* a batch, alpha and beta, K not a multiple of 32 */
        mm_case v = {ALLOY_FLOAT32, ALLOY_FLOAT32, 2, 2, SHAPE(64, 257), SHAPE(64, 129), 1, 0, 1.0, 0.0, 0, ps[i]};
        run_case(&v); /* transposed a, odd N */
        mm_case w = {ALLOY_FLOAT32, ALLOY_FLOAT32, 2, 2, SHAPE(520, 36), SHAPE(36, 516), 0, 0, 1.0, 0.0, 0, ps[i]};
        run_case(&w); /* several tiles each way, K shorter than one step */
        mm_case x = {ALLOY_FLOAT32, ALLOY_BFLOAT16, 3, 2, SHAPE(2, 130, 1000), SHAPE(300, 1000), 0, 1, 1.0, 0.0, 0, ps[i]};
        run_case(&x); /* one transposed b for a batch, a long K, bfloat16 out */
        mm_case y = {ALLOY_FLOAT32, ALLOY_FLOAT32, 2, 2, SHAPE(97, 31), SHAPE(31, 64), 0, 0, 1.0, 0.0, 0, ps[i]};
        run_case(&y);
    }
}

static void test_dtypes(void) {
    const alloy_dtype dts[4] = {ALLOY_FLOAT32, ALLOY_FLOAT16, ALLOY_BFLOAT16, ALLOY_FLOAT64};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            mm_case t = {dts[i], dts[j], 2, 2, SHAPE(21, 37), SHAPE(37, 19), 0, i == j, 1.0, 0.0, 0, ALLOY_PRECISION_HIGHEST};
            if (i == j) { /* b stored transposed */
                t.sb[0] = 19;
                t.sb[1] = 37;
            }
            run_case(&t);
        }
}

/* A strided view read in place: every other column of a wider matrix, and a
 * matrix with negative row stride. */
static void test_strided_views(void) {
    const int64_t M = 19, K = 23, N = 14;
    float *wide = malloc(sizeof(float) * M * 2 * K), *bb = malloc(sizeof(float) * K * N);
    for (int64_t i = 0; i < M * 2 * K; i++) wide[i] = (float)harness_uniform(-1, 1);
    for (int64_t i = 0; i < K * N; i++) bb[i] = (float)harness_uniform(-1, 1);
    int64_t shape_a[2] = {M, K}, str_a[2] = {2 * K, 2};     /* every other column */
    int64_t shape_b[2] = {K, N}, str_b[2] = {-N, 1};         /* rows reversed */
    alloy_array *va = NULL, *vb = NULL, *c = NULL;
    CHECK_OK(ku_view_of_host(wide, M * 2 * K, ALLOY_FLOAT32, 2, shape_a, str_a, 0, &va));
    CHECK_OK(ku_view_of_host(bb, K * N, ALLOY_FLOAT32, 2, shape_b, str_b, (K - 1) * N, &vb));
    CHECK_OK(alloy_matmul(va, vb, NULL, NULL, &c));
    if (c) {
        float got[19 * 14];
        CHECK_OK(alloy_array_copy_to_host(c, got, sizeof got));
        double ref[19 * 14];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += (double)wide[i * 2 * K + 2 * k] * bb[(K - 1 - k) * N + j];
                ref[i * N + j] = s;
            }
        CHECK(ku_cmp_f32("strided", got, ref, M * N, 1e-5, 1e-5) == 0);
    }
    alloy_array_free(c);
    alloy_array_free(va);
    alloy_array_free(vb);
    free(wide);
    free(bb);
}

static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s43[2] = {4, 3}, s34[2] = {3, 4};
    float z[12] = {0};
    int32_t zi[12] = {0};
    alloy_array *a = NULL, *b = NULL, *bad_k = NULL, *ints = NULL, *c = NULL, *scalar = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s23, z, &a));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s34, z, &b));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s43, z, &bad_k));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 2, s34, zi, &ints));
    CHECK_OK(alloy_array_scalar(ku_device(), ALLOY_FLOAT32, 1.0, &scalar));
    CHECK_FAILS(alloy_matmul(a, bad_k, NULL, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "a has 3 columns but b has 4 rows");
    CHECK_FAILS(alloy_matmul(a, ints, NULL, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "b is int32");
    CHECK_FAILS(alloy_matmul(ints, ints, NULL, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "a is int32");
    CHECK_FAILS(alloy_matmul(scalar, b, NULL, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "a is 0-d");
    CHECK_FAILS(alloy_matmul(NULL, b, NULL, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "a is NULL");
    alloy_matmul_options o;
    alloy_matmul_options_init(&o);
    o.beta = 1.0;
    CHECK_FAILS(alloy_matmul(a, b, &o, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "no out array");
    alloy_matmul_options_init(&o);
    o.alpha = NAN;
    CHECK_FAILS(alloy_matmul(a, b, &o, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "alpha");
    alloy_matmul_options_init(&o);
    o.out_dtype_set = 1;
    o.out_dtype = ALLOY_INT8;
    CHECK_FAILS(alloy_matmul(a, b, &o, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "result dtype int8");
    CHECK(c == NULL);
    /* a given out of the wrong shape, dtype, layout */
    alloy_array *wrong = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 2, s23, z, &wrong));
    CHECK_FAILS(alloy_matmul(a, b, NULL, NULL, &wrong), ALLOY_ERROR_INVALID_ARGUMENT, "out has the wrong shape");
    alloy_array_free(wrong);
    int64_t s24[2] = {2, 4};
    wrong = NULL;
    double zd[8] = {0};
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT64, 2, s24, zd, &wrong));
    o.out_dtype = ALLOY_FLOAT32;
    CHECK_FAILS(alloy_matmul(a, b, &o, NULL, &wrong), ALLOY_ERROR_INVALID_ARGUMENT,
                "out is float64 but the result dtype is float32");
    CHECK_OK(alloy_matmul(a, b, NULL, NULL, &wrong)); /* without out_dtype, out's dtype is the result's */
    alloy_array_free(wrong);
    /* leading dimensions that do not broadcast */
    int64_t s3[3] = {2, 2, 3}, t3[3] = {3, 3, 4};
    alloy_array *a3 = NULL, *b3 = NULL;
    float zz[36] = {0};
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 3, s3, zz, &a3));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 3, t3, zz, &b3));
    CHECK_FAILS(alloy_matmul(a3, b3, NULL, NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "do not broadcast");
    alloy_array_free(a3);
    alloy_array_free(b3);
    alloy_array_free(a);
    alloy_array_free(b);
    alloy_array_free(bad_k);
    alloy_array_free(ints);
    alloy_array_free(scalar);
}

/* C for a kernel launched directly: nc elements of `out`, random where beta
 * reads them or before c_off (which must stay untouched), NaN elsewhere (so
 * a value that leaks shows); their stored values in *c0, the raw buffer in
 * *raw (both freed by the caller). */
static alloy_array *prefilled_c(alloy_dtype out, int64_t nc, int64_t c_off, double beta, double **c0, void **raw) {
    *c0 = malloc((size_t)nc * sizeof **c0);
    *raw = malloc((size_t)nc * 8);
    for (int64_t i = 0; i < nc; i++) encode(out, beta != 0 || i < c_off ? harness_uniform(-1, 1) : NAN, *raw, i, &(*c0)[i]);
    alloy_array *c = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), out, 1, &nc, *raw, &c));
    return c;
}

/* The C that a kernel launched directly wrote (raw, read back; c0 as
 * prefilled_c stored it) against the float64 product of A(z, i, q) =
 * a[z sa[0] + i sa[1] + q sa[2]] and B(z, q, j) = b[z sb[0] + q sb[1] + j sb[2]]
 * at C[c_off + (z M + i) N + j]: within (|alpha| sum|a b| + |beta c|) (K + 2)
 * eps_in (the accumulation) + |alpha| sum|a b| eps_prod (each product's own
 * rounding) + the output's rounding, and the elements before c_off
 * untouched. Returns how many are wrong (the first few printed, after label). */
static int check_c(const char *label, alloy_dtype out, const void *raw, const double *c0, int64_t c_off,
                   int64_t batch, int64_t M, int64_t N, int64_t K, const double *a, const int64_t sa[3],
                   const double *b, const int64_t sb[3], double alpha, double beta, double eps_in, double eps_prod) {
    const double eps_out = out_eps(out), tiny_out = out_tiny(out);
    int bad = 0;
    for (int64_t i = 0; i < c_off; i++)
        if (!(decode(out, raw, i) == c0[i]) && bad++ < 4) fprintf(stderr, "  %s: C[%lld] before c_off changed\n", label, (long long)i);
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0, sabs = 0;
                for (int64_t q = 0; q < K; q++) {
                    const double x = a[z * sa[0] + i * sa[1] + q * sa[2]], y = b[z * sb[0] + q * sb[1] + j * sb[2]];
                    acc += x * y;
                    sabs += fabs(x * y);
                }
                const int64_t e = c_off + (z * M + i) * N + j;
                const double ref = alpha * acc + (beta != 0 ? beta * c0[e] : 0.0);
                const double cterm = beta != 0 ? fabs(beta * c0[e]) : 0.0; /* c0 is NaN where beta is 0 */
                const double tol = (fabs(alpha) * sabs + cterm) * (double)(K + 2) * eps_in +
                                   fabs(alpha) * sabs * eps_prod + fabs(ref) * eps_out + tiny_out + 1e-30;
                const double got = decode(out, raw, e);
                if (!(fabs(got - ref) <= tol) && bad++ < 4)
                    fprintf(stderr, "  %s: C[%lld,%lld,%lld] = %.9g, want %.9g\n", label, (long long)z, (long long)i,
                            (long long)j, got, ref);
            }
    return bad;
}

/* Each GEMM kernel file launched directly with the op's interface on this
 * device, whichever the op would pick here: the tensor-core kernel runs its
 * portable path on the CPU (and its CUDA source is compiled by the NVRTC
 * check), its wgmma path on a Hopper GPU. */
static void kernel_file_case(const char *file, uint32_t tm, uint32_t tn, size_t smem, alloy_dtype dt,
                             int64_t M, int64_t N, int64_t K, int with_acc) {
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_catalog_kernel(file, &k));
    if (!k) return;
    int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    host_arr A = make(dt, 2, sa), B = make(dt, 2, sb);
    alloy_array *c = NULL, *res = NULL;
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 2, sc, &c));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, c));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TIN", dt));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TOUT", ALLOY_FLOAT32));
    if (with_acc) CHECK_OK(alloy_launch_add_template_dtype(l, "ACC", ALLOY_FLOAT32));
    if (smem) CHECK_OK(alloy_launch_set_threadgroup_memory(l, smem));
    const struct { const char *n; int64_t v; } ints[] = {
        {"M", M}, {"N", N}, {"K", K}, {"batch", 1}, {"sa_b", 0}, {"sa_m", K}, {"sa_k", 1}, {"sb_b", 0},
        {"sb_k", N}, {"sb_n", 1}, {"sc_b", 0}, {"sc_m", N}, {"tile_m", tm}, {"tile_n", tn},
        {"a_off", 0}, {"b_off", 0}, {"c_off", 0}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        CHECK_OK(alloy_launch_set_constant_int(l, ints[i].n, ALLOY_INT64, ints[i].v));
    CHECK_OK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, 1.0));
    CHECK_OK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, 0.0));
    const uint32_t threads = tm == 32 ? 128 : 256;
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)((N + tn - 1) / tn * threads), (uint32_t)((M + tm - 1) / tm), 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, threads, 1, 1));
    alloy_array *ins[2] = {A.a, B.a};
    CHECK_OK(alloy_kernel_apply(k, 2, ins, l, NULL, &res));
    float *got = malloc((size_t)(M * N) * sizeof *got);
    double *ref = malloc((size_t)(M * N) * sizeof *ref), *mag = malloc((size_t)(M * N) * sizeof *mag);
    CHECK_OK(alloy_array_copy_to_host(c, got, (size_t)(M * N) * sizeof *got));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0, sabs = 0;
            for (int64_t q = 0; q < K; q++) {
                acc += A.v[i * K + q] * B.v[q * N + j];
                sabs += fabs(A.v[i * K + q] * B.v[q * N + j]);
            }
            ref[i * N + j] = acc;
            mag[i * N + j] = sabs;
        }
    const double eps = 2e-7 * (double)(K + 2);
    int bad = 0;
    for (int64_t e = 0; e < M * N; e++)
        if (!(fabs(got[e] - ref[e]) <= eps * mag[e] + 1e-30)) {
            if (bad++ < 4)
                fprintf(stderr, "  %s: C[%lld] = %.9g, want %.9g\n", file, (long long)e,
                        got[e], ref[e]);
        }
    CHECK_MSG(bad == 0, "%s: %d of %lld elements wrong", file, bad, (long long)(M * N));
    free(mag);
    free(got);
    free(ref);
    alloy_array_free(res);
    alloy_array_free(c);
    alloy_launch_free(l);
    drop(&A);
    drop(&B);
}

static void test_kernel_files(void) {
    alloy_device *dev = ku_device();
    const int cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    kernel_file_case("src/ops/linalg/kernels/matmul_simt.metal", 128, 128, 0, ALLOY_FLOAT32, 133, 70, 45, 1);
    kernel_file_case("src/ops/linalg/kernels/matmul_small.metal", 32, 32, 0, ALLOY_FLOAT32, 45, 70, 77, 1);
    if (!cuda || alloy_device_compute_capability(dev) == 90) {
        kernel_file_case("src/ops/linalg/kernels/matmul_wgmma.metal", 128, 256, 4 * 48 * 1024 + 1024,
                         ALLOY_BFLOAT16, 130, 264, 72, 0); /* rows 16-byte aligned: K, N % 8 == 0 */
        kernel_file_case("src/ops/linalg/kernels/matmul_wgmma.metal", 128, 256, 4 * 48 * 1024 + 1024,
                         ALLOY_FLOAT16, 33, 40, 24, 0);
    }
}

/* matmul_wgmma launched directly with a grid of `groups` threadgroups, however
 * many tiles there are (its persistent schedule: fewer threadgroups than
 * tiles, more, one): a batch (B shared by every matrix when b_shared), alpha
 * and beta, every output dtype, B read from a wider matrix of NB columns (so
 * N may be odd) and C at an element offset (its column pairs unaligned when
 * odd); the elements before c_off must stay untouched. */
static void wgmma_case(alloy_dtype in, alloy_dtype out, int64_t batch, int64_t M, int64_t N, int64_t K,
                       int64_t NB, int b_shared, int64_t c_off, uint32_t groups, double alpha, double beta) {
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_catalog_kernel("src/ops/linalg/kernels/matmul_wgmma.metal", &k));
    if (!k) return;
    int64_t sa[3] = {batch, M, K}, sb[3] = {b_shared ? 1 : batch, K, NB};
    host_arr A = make(in, 3, sa), B = make(in, 3, sb);
    const int64_t nc = c_off + batch * M * N;
    double *c0;
    void *raw;
    alloy_array *c = prefilled_c(out, nc, c_off, beta, &c0, &raw), *res = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, c));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TIN", in));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TOUT", out));
    CHECK_OK(alloy_launch_set_threadgroup_memory(l, 4 * 48 * 1024 + 1024));
    const struct { const char *n; int64_t v; } ints[] = {
        {"M", M}, {"N", N}, {"K", K}, {"batch", batch}, {"sa_b", M * K}, {"sa_m", K}, {"sa_k", 1},
        {"sb_b", b_shared ? 0 : K * NB}, {"sb_k", NB}, {"sb_n", 1}, {"sc_b", M * N}, {"sc_m", N},
        {"tile_m", 128}, {"tile_n", 256}, {"a_off", 0}, {"b_off", 0}, {"c_off", c_off}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        CHECK_OK(alloy_launch_set_constant_int(l, ints[i].n, ALLOY_INT64, ints[i].v));
    CHECK_OK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, alpha));
    CHECK_OK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, beta));
    CHECK_OK(alloy_launch_set_grid(l, groups * 256, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    alloy_array *ins[2] = {A.a, B.a};
    CHECK_OK(alloy_kernel_apply(k, 2, ins, l, NULL, &res));
    CHECK_OK(alloy_array_copy_to_host(c, raw, (size_t)nc * alloy_dtype_size(out)));
    char label[128];
    snprintf(label, sizeof label, "wgmma %s->%s batch %lld M=%lld N=%lld K=%lld groups %u", alloy_dtype_name(in),
             alloy_dtype_name(out), (long long)batch, (long long)M, (long long)N, (long long)K, groups);
    const int64_t sa_e[3] = {M * K, K, 1}, sb_e[3] = {b_shared ? 0 : K * NB, NB, 1};
    const int bad = check_c(label, out, raw, c0, c_off, batch, M, N, K, A.v, sa_e, B.v, sb_e, alpha, beta, 2e-7, 0.0);
    CHECK_MSG(bad == 0, "matmul_wgmma: %d of %lld elements wrong", bad, (long long)nc);
    free(raw);
    free(c0);
    alloy_array_free(res);
    alloy_array_free(c);
    alloy_launch_free(l);
    drop(&A);
    drop(&B);
}

enum { TMA_STAGED, TMA_PINGPONG, TMA_LAG, TMA_ZERO, TMA_DIRECT };

/* matmul_wgmma_tma (TMA_PINGPONG: matmul_wgmma_pingpong, its 128 x 128 tiles
 * and boxes of C 128 rows high; TMA_LAG: the second consumer two K steps
 * behind the first; TMA_ZERO: the accumulators zeroed between tiles instead
 * of overwritten by each tile's first product (OVW 0, the op's timing
 * switch), with a lag of one step; TMA_DIRECT: matmul_wgmma_tma's DIRECT, C
 * stored from the accumulators, any C dtype, beta) launched directly (the
 * copy engine on a Hopper GPU, the portable path elsewhere) with `groups`
 * persistent threadgroups: a batch of
 * M x K times K x N (B from a wider matrix of NB columns, shared by every
 * matrix when b_shared), 16-bit C at an element offset (a multiple of 8:
 * its rows are 16-byte aligned) whose elements before it stay untouched,
 * alpha; edges in M, N and K fall to the copy engine's zero fill and
 * clipped stores. half (HALF): a last round of tiles at most half full
 * computed as 128 x 128 halves — *split says whether this case had such a
 * round. */
static int tma_stages = 3; /* matmul_wgmma_tma's STAGES for the cases below */

static void tma_case_half(int variant, alloy_dtype in, alloy_dtype out, int64_t batch, int64_t M, int64_t N, int64_t K,
                          int64_t NB, int b_shared, int64_t c_off, uint32_t groups, double alpha, double beta,
                          int half, int *split) {
    const int pingpong = variant == TMA_PINGPONG;
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_catalog_kernel(pingpong ? "src/ops/linalg/kernels/matmul_wgmma_pingpong.metal"
                                           : "src/ops/linalg/kernels/matmul_wgmma_tma.metal",
                                  &k));
    if (!k) return;
    int64_t sa[3] = {batch, M, K}, sb[3] = {b_shared ? 1 : batch, K, NB};
    host_arr A = make(in, 3, sa), B = make(in, 3, sb);
    const int64_t nc = c_off + batch * M * N;
    double *c0;
    void *raw;
    alloy_array *c = prefilled_c(out, nc, c_off, beta, &c0, &raw), *res = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, c));
    /* the kernel's rule for halves: a last round with rem tiles left, 2 rem <= the threadgroups */
    const int64_t tiles = batch * ((M + 127) / 128) * ((N + (pingpong ? 127 : 255)) / (pingpong ? 128 : 256));
    const int64_t rem = tiles % groups;
    if (split) *split = half && rem > 0 && 2 * rem <= (int64_t)groups;
    if (!pingpong) CHECK_OK(alloy_launch_add_template_int(l, "HALF", half));
    if (!pingpong) CHECK_OK(alloy_launch_add_template_int(l, "STAGES", tma_stages));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TIN", in));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TOUT", out));
    if (!pingpong) CHECK_OK(alloy_launch_add_template_int(l, "DIRECT", variant == TMA_DIRECT));
    if (!pingpong) CHECK_OK(alloy_launch_add_template_int(l, "LAG", variant == TMA_LAG ? 2 : variant == TMA_ZERO));
    if (!pingpong) CHECK_OK(alloy_launch_add_template_int(l, "OVW", variant != TMA_ZERO));
    CHECK_OK(alloy_launch_set_threadgroup_memory(l, pingpong ? 5 * 32 * 1024 + 64 * 1024 + 2048
                                                             : ku_gemm_tma_smem(tma_stages)));
    const int64_t sbb = b_shared ? 0 : K * NB;
    const struct { const char *n; int64_t v; } ints[] = {
        {"M", M}, {"N", N}, {"K", K}, {"batch", batch}, {"sa_b", M * K}, {"sa_m", K}, {"sa_k", 1},
        {"sb_b", sbb}, {"sb_k", NB}, {"sb_n", 1}, {"sc_b", M * N}, {"sc_m", N},
        {"tile_m", 128}, {"tile_n", pingpong ? 128 : 256}, {"a_off", 0}, {"b_off", 0}, {"c_off", c_off}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        CHECK_OK(alloy_launch_set_constant_int(l, ints[i].n, ALLOY_INT64, ints[i].v));
    CHECK_OK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, alpha));
    CHECK_OK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, beta));
    ku_gemm_tma_map(l, "ta", 0, 0, K, M, K, batch, M * K, 64, 128);
    ku_gemm_tma_map(l, "tb", 1, 0, N, K, NB, batch, sbb, 64, 64);
    ku_gemm_tma_map(l, "tc", 2, c_off, N, M, N, batch, M * N, (uint32_t)(128 / alloy_dtype_size(out)), pingpong ? 128 : 64);
    CHECK_OK(alloy_launch_set_grid(l, groups * 384, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 384, 1, 1));
    alloy_array *ins[2] = {A.a, B.a};
    CHECK_OK(alloy_kernel_apply(k, 2, ins, l, NULL, &res));
    CHECK_OK(alloy_array_copy_to_host(c, raw, (size_t)nc * alloy_dtype_size(out)));
    char label[128];
    snprintf(label, sizeof label, "%s%s%s %s->%s batch %lld M=%lld N=%lld K=%lld groups %u",
             pingpong                 ? "wgmma_pingpong"
             : variant == TMA_DIRECT  ? "wgmma_tma DIRECT"
             : variant == TMA_LAG     ? "wgmma_tma LAG=2"
             : variant == TMA_ZERO    ? "wgmma_tma OVW=0 LAG=1"
                                      : "wgmma_tma",
             half ? " HALF" : "", tma_stages == 4 && !pingpong ? " STAGES=4" : "", alloy_dtype_name(in),
             alloy_dtype_name(out), (long long)batch, (long long)M, (long long)N, (long long)K, groups);
    const int64_t sa_e[3] = {M * K, K, 1}, sb_e[3] = {sbb, NB, 1};
    const int bad = check_c(label, out, raw, c0, c_off, batch, M, N, K, A.v, sa_e, B.v, sb_e, alpha, beta, 2e-7, 0.0);
    CHECK_MSG(bad == 0, "%s: %d of %lld elements wrong", label, bad, (long long)nc);
    free(raw);
    free(c0);
    alloy_array_free(res);
    alloy_array_free(c);
    alloy_launch_free(l);
    drop(&A);
    drop(&B);
}

static void tma_case(int variant, alloy_dtype in, alloy_dtype out, int64_t batch, int64_t M, int64_t N, int64_t K,
                     int64_t NB, int b_shared, int64_t c_off, uint32_t groups, double alpha, double beta) {
    tma_case_half(variant, in, out, batch, M, N, K, NB, b_shared, c_off, groups, alpha, beta, 0, NULL);
}

static void test_wgmma_tma(void) {
    alloy_device *dev = ku_device();
    if (alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && alloy_device_compute_capability(dev) != 90) return;
    for (int v = TMA_STAGED; v <= TMA_ZERO; v++) {
        /* 3 matrices with edges in M, N and K over 4 and 5 threadgroups (12 or 18 tiles: the
         * ping-pong's two consumers take turns with an odd count left), C at an offset; with LAG, K
         * shorter than the lag and threadgroups without a tile below */
        tma_case(v, ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 200, 264, 136, 272, 0, 8, 4, 1.0, 0.0);
        tma_case(v, ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 200, 264, 136, 272, 0, 8, 5, 1.0, 0.0);
        /* whole tiles, B shared by the batch, many K steps across tiles through the stages, alpha */
        tma_case(v, ALLOY_FLOAT16, ALLOY_FLOAT16, 2, 256, 512, 328, 512, 1, 0, 3, -0.5, 0.0);
        /* a mixed output dtype, K shorter than a step, more threadgroups than tiles */
        tma_case(v, ALLOY_BFLOAT16, ALLOY_FLOAT16, 1, 130, 264, 40, 264, 0, 0, 5, 1.0, 0.0);
        /* one row, one threadgroup; 8 columns of a wider B */
        tma_case(v, ALLOY_FLOAT16, ALLOY_BFLOAT16, 2, 1, 8, 24, 16, 0, 16, 1, 2.0, 0.0);
        /* one K step a tile, 9 tiles over 2 threadgroups */
        tma_case(v, ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 300, 40, 64, 40, 1, 0, 2, 1.0, 0.0);
    }
    /* DIRECT: float and double C with beta, whole and edge tiles, C at an offset, a shared B; 16-bit C with
     * beta */
    tma_case(TMA_DIRECT, ALLOY_BFLOAT16, ALLOY_FLOAT32, 2, 256, 512, 136, 512, 0, 0, 3, 1.5, 0.5);
    tma_case(TMA_DIRECT, ALLOY_FLOAT16, ALLOY_FLOAT32, 3, 200, 264, 72, 272, 1, 4, 4, -1.0, 0.0);
    tma_case(TMA_DIRECT, ALLOY_BFLOAT16, ALLOY_FLOAT64, 1, 130, 264, 40, 264, 0, 0, 5, 1.0, -2.0);
    tma_case(TMA_DIRECT, ALLOY_FLOAT16, ALLOY_FLOAT16, 2, 256, 512, 64, 512, 0, 8, 2, 0.5, 1.0);
    /* HALF: 12 tiles over 5 threadgroups (2 left: 4 halves, the last tile column's second half past N), with
     * the staged and the DIRECT epilogue (float C with beta); 4 tiles over 3 (1 left: its halves on
     * threadgroups 0 and 1), with a lag and the zeroing; 9 tiles over 2 (1 left); 3 tiles over 2 with a
     * float64 C (1 left) */
    int split[5] = {0, 0, 0, 0, 0};
    tma_case_half(TMA_STAGED, ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 200, 264, 136, 272, 0, 8, 5, 1.0, 0.0, 1, &split[0]);
    tma_case_half(TMA_DIRECT, ALLOY_FLOAT16, ALLOY_FLOAT32, 3, 200, 264, 136, 272, 1, 4, 5, -1.5, 0.5, 1, &split[1]);
    tma_case_half(TMA_ZERO, ALLOY_BFLOAT16, ALLOY_FLOAT16, 1, 130, 264, 328, 264, 0, 0, 3, 2.0, 0.0, 1, &split[2]);
    tma_case_half(TMA_STAGED, ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 300, 40, 64, 40, 1, 0, 2, 1.0, 0.0, 1, &split[3]);
    tma_case_half(TMA_DIRECT, ALLOY_BFLOAT16, ALLOY_FLOAT64, 3, 100, 256, 24, 256, 0, 0, 2, 1.0, 0.0, 1, &split[4]);
    CHECK_MSG(split[0] && split[1] && split[2] && split[3] && split[4], "HALF rounds %d %d %d %d %d, want all",
              split[0], split[1], split[2], split[3], split[4]);
    /* STAGES=4: the staged epilogue in two passes (whole tiles, edges, many K steps through the stages,
     * halves), and DIRECT */
    tma_stages = 4;
    tma_case(TMA_STAGED, ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 200, 264, 136, 272, 0, 8, 5, 1.0, 0.0);
    tma_case(TMA_STAGED, ALLOY_FLOAT16, ALLOY_FLOAT16, 2, 256, 512, 328, 512, 1, 0, 3, -0.5, 0.0);
    tma_case(TMA_LAG, ALLOY_BFLOAT16, ALLOY_FLOAT16, 1, 130, 264, 40, 264, 0, 0, 5, 1.0, 0.0);
    tma_case(TMA_DIRECT, ALLOY_BFLOAT16, ALLOY_FLOAT32, 2, 256, 512, 136, 512, 0, 0, 3, 1.5, 0.5);
    tma_case_half(TMA_STAGED, ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 200, 264, 136, 272, 0, 8, 5, 1.0, 0.0, 1, &split[0]);
    tma_case_half(TMA_ZERO, ALLOY_BFLOAT16, ALLOY_FLOAT16, 1, 130, 264, 328, 264, 0, 0, 3, 2.0, 0.0, 1, &split[2]);
    tma_stages = 3;
}

/* x rounded to TF32 as matmul_tf32_split.metal does (ties away, truncated
 * where rounding would overflow) */
static double tf32_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    uint32_t r = (u + 0x1000u) & ~0x1fffu;
    if ((r & 0x7f800000u) == 0x7f800000u) r = u & ~0x1fffu;
    float y;
    memcpy(&y, &r, 4);
    return y;
}

/* matmul_tf32_split then matmul_tf32, launched directly as matmul_tf32.c
 * does, on this device (the GEMM's portable path on the CPU, wgmma on a
 * Hopper GPU): a batch of M x K times K x N (B stored N x K when
 * b_transposed, one B for all when b_shared), `groups` persistent
 * threadgroups, C at an element offset (its pairs unaligned when odd; the
 * elements before it must stay untouched), alpha and beta, any output
 * dtype. The workspace is checked too: big parts are TF32 (low 13 bits zero),
 * big + small is x to 2^-21, padding is zeros. */
static void tf32_case(int passes, alloy_dtype out, int64_t batch, int64_t M, int64_t N, int64_t K,
                      int b_shared, int b_transposed, uint32_t groups, int64_t c_off, double alpha, double beta) {
    alloy_kernel *ks = NULL, *kg = NULL;
    CHECK_OK(alloy_catalog_kernel("src/ops/linalg/kernels/matmul_tf32_split.metal", &ks));
    CHECK_OK(alloy_catalog_kernel("src/ops/linalg/kernels/matmul_tf32.metal", &kg));
    if (!ks || !kg) return;
    const int parts = passes == 6 ? 3 : passes == 3 ? 2 : 1, tn = passes == 6 ? 128 : 256;
    const int64_t nbb = b_shared ? 1 : batch, KB = (K + 31) / 32, PW = 32 * parts, K2 = KB * PW;
    const int64_t Mp = (M + 127) / 128 * 128, Np = (N + tn - 1) / tn * tn;
    int64_t sa[3] = {batch, M, K}, sb[3] = {nbb, b_transposed ? N : K, b_transposed ? K : N};
    host_arr A = make(ALLOY_FLOAT32, 3, sa), B = make(ALLOY_FLOAT32, 3, sb);
    alloy_array *p2[2] = {NULL, NULL};
    const int64_t n2[2] = {batch * Mp * K2, nbb * Np * K2};
    for (int e = 0; e < 2; e++) {
        /* A as it is, B transposed: rows (M or N), columns k */
        const int64_t R = e ? N : M, Rp = e ? Np : Mp, nb = e ? nbb : batch;
        const int64_t s_r = e ? (b_transposed ? K : 1) : K, s_k = e ? (b_transposed ? 1 : N) : 1;
        CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 1, &n2[e], &p2[e]));
        alloy_launch *l = NULL;
        alloy_array *res = NULL;
        CHECK_OK(alloy_launch_new(&l));
        CHECK_OK(alloy_launch_add_output_array(l, p2[e]));
        CHECK_OK(alloy_launch_add_template_int(l, "PASSES", passes));
        const struct { const char *n; int64_t v; } c[] = {
            {"R", R}, {"K", K}, {"s_r", s_r}, {"s_k", s_k}, {"s_b", R * K}, {"x_off", 0}, {"Rp", Rp}, {"KB", KB}};
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) CHECK_OK(alloy_launch_set_constant_int(l, c[i].n, ALLOY_INT64, c[i].v));
        CHECK_OK(alloy_launch_set_grid(l, (uint32_t)(KB * 256), (uint32_t)(Rp / 32), (uint32_t)nb));
        CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
        alloy_array *x = e ? B.a : A.a;
        CHECK_OK(alloy_kernel_apply(ks, 1, &x, l, NULL, &res));
        alloy_array_free(res);
        alloy_launch_free(l);
        /* the workspace against the operand */
        float *w = malloc((size_t)n2[e] * sizeof *w);
        CHECK_OK(alloy_array_copy_to_host(p2[e], w, (size_t)n2[e] * sizeof *w));
        int bad = 0;
        for (int64_t z = 0; z < nb; z++)
            for (int64_t r = 0; r < Rp; r++)
                for (int64_t k = 0; k < KB * 32; k++) {
                    const float *q = w + (z * Rp + r) * K2 + k / 32 * PW + k % 32;
                    const double x0 = r < R && k < K ? (e ? B.v[z * R * K + r * s_r + k * s_k] : A.v[(z * M + r) * K + k]) : 0.0;
                    double part[3] = {0, 0, 0};
                    int tf32 = 1;
                    for (int h = 0; h < parts; h++) {
                        uint32_t u;
                        memcpy(&u, &q[32 * h], 4);
                        tf32 = tf32 && (u & 0x1fffu) == 0;
                        part[h] = q[32 * h];
                    }
                    /* three parts are x exactly, two x to 2^-21 */
                    const double rest = fabs(x0 - part[0] - part[1] - part[2]);
                    const int ok = part[0] == tf32_round((float)x0) && tf32 &&
                                   (parts == 1 || (parts == 2 ? rest <= ldexp(fabs(x0), -21) : rest == 0));
                    if (!ok && bad++ < 4)
                        fprintf(stderr, "  tf32 split %c[%lld, %lld, %lld]: %.9g = %.9g + %.9g + %.9g\n", e ? 'B' : 'A',
                                (long long)z, (long long)r, (long long)k, x0, part[0], part[1], part[2]);
                }
        CHECK_MSG(bad == 0, "matmul_tf32_split (%c): %d elements wrong", e ? 'B' : 'A', bad);
        free(w);
    }
    /* the GEMM */
    const int64_t nc = c_off + batch * M * N;
    double *c0;
    void *raw;
    alloy_array *c = prefilled_c(out, nc, c_off, beta, &c0, &raw), *res = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, c));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TOUT", out));
    CHECK_OK(alloy_launch_add_template_int(l, "PASSES", passes));
    CHECK_OK(alloy_launch_set_threadgroup_memory(l, 192 * 1024 + 1024));
    const struct { const char *n; int64_t v; } ints[] = {
        {"M", M}, {"N", N}, {"KB", KB}, {"batch", batch}, {"sa_b", Mp * K2}, {"sb_b", b_shared ? 0 : Np * K2},
        {"sc_b", M * N}, {"sc_m", N}, {"c_off", c_off}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        CHECK_OK(alloy_launch_set_constant_int(l, ints[i].n, ALLOY_INT64, ints[i].v));
    CHECK_OK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, alpha));
    CHECK_OK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, beta));
    CHECK_OK(alloy_launch_set_grid(l, groups * 256, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_kernel_apply(kg, 2, p2, l, NULL, &res));
    CHECK_OK(alloy_array_copy_to_host(c, raw, (size_t)nc * alloy_dtype_size(out)));
    /* each product: TF32 factors (2^-11 each) at one pass, split TF32 (about
     * 2^-21) at three, the dropped terms (below 2^-32) at six; float
     * accumulation; the output's rounding */
    const double eps_prod = passes == 1 ? 2e-3 : passes == 3 ? 1e-6 : 1e-9;
    char label[128];
    snprintf(label, sizeof label, "tf32 passes %d ->%s batch %lld M=%lld N=%lld K=%lld groups %u", passes,
             alloy_dtype_name(out), (long long)batch, (long long)M, (long long)N, (long long)K, groups);
    const int64_t sa_e[3] = {M * K, K, 1};
    const int64_t sb_e[3] = {b_shared ? 0 : K * N, b_transposed ? 1 : N, b_transposed ? K : 1};
    const int bad =
        check_c(label, out, raw, c0, c_off, batch, M, N, K, A.v, sa_e, B.v, sb_e, alpha, beta, 2e-7, eps_prod);
    CHECK_MSG(bad == 0, "matmul_tf32: %d of %lld elements wrong", bad, (long long)nc);
    free(raw);
    free(c0);
    alloy_array_free(res);
    alloy_array_free(c);
    alloy_array_free(p2[0]);
    alloy_array_free(p2[1]);
    alloy_launch_free(l);
    drop(&A);
    drop(&B);
}

/* matmul_tiny launched directly as alloy_matmul does for M, N <= 32, on this
 * device: a batch (not a multiple of the matrices of a threadgroup) of
 * M x K times K x N, A read transposed from K x M storage when a_transposed
 * (the element-by-element loads), alpha and beta, any dtypes; `groups`
 * threadgroups (0: one per two matrices; fewer: each SIMD group takes
 * several matrices in turn). */
static void tiny_case(alloy_dtype in, alloy_dtype out, alloy_dtype acc, int64_t batch, int64_t M, int64_t N,
                      int64_t K, int a_transposed, double alpha, double beta, int64_t groups) {
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_catalog_kernel("src/ops/linalg/kernels/matmul_tiny.metal", &k));
    if (!k) return;
    int64_t sa[3] = {batch, a_transposed ? K : M, a_transposed ? M : K}, sb[3] = {batch, K, N};
    host_arr A = make(in, 3, sa), B = make(in, 3, sb);
    const int64_t nc = batch * M * N;
    double *c0;
    void *raw;
    alloy_array *c = prefilled_c(out, nc, 0, beta, &c0, &raw), *res = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, c));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TIN", in));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TOUT", out));
    CHECK_OK(alloy_launch_add_template_dtype(l, "ACC", acc));
    const struct { const char *n; int64_t v; } ints[] = {
        {"M", M}, {"N", N}, {"K", K}, {"batch", batch}, {"sa_b", M * K}, {"sa_m", a_transposed ? 1 : K},
        {"sa_k", a_transposed ? M : 1}, {"sb_b", K * N}, {"sb_k", N}, {"sb_n", 1}, {"sc_b", M * N}, {"sc_m", N},
        {"tile_m", 32}, {"tile_n", 32}, {"a_off", 0}, {"b_off", 0}, {"c_off", 0}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        CHECK_OK(alloy_launch_set_constant_int(l, ints[i].n, ALLOY_INT64, ints[i].v));
    CHECK_OK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, alpha));
    CHECK_OK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, beta));
    const int64_t g = 2; /* matrices per threadgroup */
    if (groups == 0) groups = (batch + g - 1) / g;
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)(groups * 32 * g), 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, (uint32_t)(32 * g), 1, 1));
    alloy_array *ins[2] = {A.a, B.a};
    CHECK_OK(alloy_kernel_apply(k, 2, ins, l, NULL, &res));
    CHECK_OK(alloy_array_copy_to_host(c, raw, (size_t)nc * alloy_dtype_size(out)));
    const double eps_in = acc == ALLOY_FLOAT64 ? 1e-15 : 2e-7;
    char label[128];
    snprintf(label, sizeof label, "tiny %s->%s batch %lld M=%lld N=%lld K=%lld", alloy_dtype_name(in),
             alloy_dtype_name(out), (long long)batch, (long long)M, (long long)N, (long long)K);
    const int64_t sa_e[3] = {M * K, a_transposed ? 1 : K, a_transposed ? M : 1}, sb_e[3] = {K * N, N, 1};
    const int bad = check_c(label, out, raw, c0, 0, batch, M, N, K, A.v, sa_e, B.v, sb_e, alpha, beta, eps_in, 0.0);
    CHECK_MSG(bad == 0, "matmul_tiny: %d of %lld elements wrong", bad, (long long)nc);
    free(raw);
    free(c0);
    alloy_array_free(res);
    alloy_array_free(c);
    alloy_launch_free(l);
    drop(&A);
    drop(&B);
}

static void test_tiny_kernel(void) {
    /* 32 x 32 float32: the two-stage 16-byte copies, one and two K blocks a
     * matrix, one threadgroup a round or fewer (several rounds: each SIMD
     * group's steps run through matrices and K blocks), beta; K past one
     * block (a partial one: element by element) */
    tiny_case(ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT32, 7, 32, 32, 32, 0, 1.0, 0.0, 0);
    tiny_case(ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT32, 9, 32, 32, 64, 0, 1.0, 0.0, 2);
    tiny_case(ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT32, 11, 32, 32, 32, 0, 0.75, -1.5, 1);
    tiny_case(ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT32, 5, 32, 32, 70, 0, -0.5, 2.0, 2);
    /* odd sizes, a transposed A, 16-bit and double */
    tiny_case(ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT32, 9, 17, 29, 45, 1, 1.0, 0.0, 0);
    tiny_case(ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT32, 1, 1, 1, 1, 0, 1.0, 0.0, 0);
    tiny_case(ALLOY_BFLOAT16, ALLOY_FLOAT32, ALLOY_FLOAT32, 6, 32, 31, 33, 0, 1.0, 0.0, 0);
    tiny_case(ALLOY_FLOAT16, ALLOY_FLOAT16, ALLOY_FLOAT32, 4, 8, 32, 16, 0, 1.0, 0.0, 0);
    tiny_case(ALLOY_FLOAT32, ALLOY_BFLOAT16, ALLOY_FLOAT32, 5, 32, 32, 32, 0, 1.0, 0.0, 1);
    tiny_case(ALLOY_FLOAT64, ALLOY_FLOAT64, ALLOY_FLOAT64, 3, 32, 32, 40, 0, 1.0, 1.0, 0);
    tiny_case(ALLOY_FLOAT64, ALLOY_FLOAT64, ALLOY_FLOAT64, 5, 32, 32, 32, 0, 1.0, 0.0, 1);
}

static void test_tf32_kernels(void) {
    alloy_device *dev = ku_device();
    if (alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && alloy_device_compute_capability(dev) != 90) return;
    /* edges in M, N and K; 2 x 2 tiles over 3 threadgroups */
    tf32_case(3, ALLOY_FLOAT32, 1, 200, 300, 100, 0, 0, 3, 0, 1.0, 0.0);
    tf32_case(1, ALLOY_FLOAT32, 1, 33, 260, 68, 0, 1, 2, 0, 1.0, 0.0);
    /* a batch sharing one transposed B, alpha and beta, C at an odd offset
     * (unpaired stores), more threadgroups than tiles */
    tf32_case(3, ALLOY_FLOAT32, 3, 130, 257, 45, 1, 1, 8, 3, -0.5, 2.0);
    /* 16-bit outputs, one threadgroup for every tile, a long K (many steps
     * through the stages, across tile boundaries) */
    tf32_case(3, ALLOY_BFLOAT16, 2, 256, 512, 300, 0, 0, 1, 0, 1.0, 0.0);
    tf32_case(1, ALLOY_FLOAT16, 2, 128, 256, 290, 1, 0, 2, 0, 0.25, 0.0);
    /* K = 1: one block, almost all padding */
    tf32_case(3, ALLOY_FLOAT32, 1, 65, 70, 1, 0, 0, 1, 0, 1.0, 0.0);
    /* six products (128-column tiles): edges, a shared transposed B, beta,
     * an odd C offset; a long K into bfloat16 */
    tf32_case(6, ALLOY_FLOAT32, 2, 200, 300, 100, 1, 1, 5, 1, 1.5, -1.0);
    tf32_case(6, ALLOY_BFLOAT16, 1, 256, 384, 333, 0, 0, 2, 0, 1.0, 0.0);
}

static void test_wgmma_persistent(void) {
    alloy_device *dev = ku_device();
    if (alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && alloy_device_compute_capability(dev) != 90) return;
    /* 12 tiles (3 matrices of 2 x 2, edges in M, N and K) over 4 threadgroups */
    wgmma_case(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 200, 300, 136, 304, 0, 0, 4, 1.0, 0.0);
    /* whole tiles staged through shared memory (16-bit out, beta 0, rows of C
     * 16-byte aligned) among edge tiles, C at an offset of 8 elements */
    wgmma_case(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 256, 512, 136, 512, 0, 8, 5, 1.0, 0.0);
    /* one K step a tile (that step is also the last), staged and edge tiles
     * in turn; K = 0 with 16-bit outputs */
    wgmma_case(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 2, 200, 512, 64, 512, 0, 0, 3, 1.0, 0.0);
    wgmma_case(ALLOY_FLOAT16, ALLOY_FLOAT16, 4, 128, 256, 320, 256, 0, 0, 3, 0.5, 0.0);
    wgmma_case(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 128, 256, 0, 256, 0, 0, 2, 1.0, 0.0);
    wgmma_case(ALLOY_FLOAT16, ALLOY_FLOAT16, 2, 300, 264, 64, 264, 1, 0, 3, -2.0, 0.0);
    /* whole tiles (the paired stores) with beta, 8 tiles over 3 threadgroups */
    wgmma_case(ALLOY_FLOAT16, ALLOY_FLOAT16, 2, 256, 512, 72, 512, 0, 0, 3, -0.5, 2.0);
    /* one threadgroup, two whole tiles, float out, B shared by the batch */
    wgmma_case(ALLOY_BFLOAT16, ALLOY_FLOAT32, 2, 128, 256, 200, 256, 1, 0, 1, 1.5, 0.5);
    /* float64 out, more threadgroups than tiles, K shorter than a step */
    wgmma_case(ALLOY_BFLOAT16, ALLOY_FLOAT64, 1, 130, 264, 40, 264, 0, 0, 5, 1.0, 0.0);
    /* whole tiles whose column pairs are unaligned (C at an odd offset) */
    wgmma_case(ALLOY_FLOAT16, ALLOY_FLOAT32, 2, 128, 256, 64, 256, 0, 1, 2, 1.0, 1.0);
    wgmma_case(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 128, 256, 64, 256, 0, 1, 2, 1.0, 0.0);
    /* an odd N read from a wider B, 9 tiles over 2 threadgroups */
    wgmma_case(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 3, 300, 37, 24, 40, 0, 0, 2, 1.0, 0.0);
    /* K = 0: no K steps at all, C = beta C */
    wgmma_case(ALLOY_BFLOAT16, ALLOY_FLOAT32, 2, 40, 24, 0, 24, 0, 0, 3, 1.0, 0.75);
}

int main(void) {
    harness_seed();
    RUN(test_shapes);
    RUN(test_grid);
    RUN(test_transposes_alpha_beta);
    RUN(test_precisions);
    RUN(test_dtypes);
    RUN(test_strided_views);
    RUN(test_errors);
    RUN(test_kernel_files);
    RUN(test_wgmma_persistent);
    RUN(test_wgmma_tma);
    RUN(test_tf32_kernels);
    RUN(test_tiny_kernel);
    return harness_finish();
}
