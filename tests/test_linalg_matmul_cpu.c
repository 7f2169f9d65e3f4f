/* test_linalg_matmul_cpu.c — the catalog's CPU GEMM kernel
 * (src/ops/linalg/kernels/matmul_cpu.metal), launched through the public
 * runtime with its launch constants exactly as the op launches it, against a
 * double-precision C loop: every input/output dtype pair, awkward sizes
 * (1, primes, K = 0, K past the kernel's K slice), tile sizes from 1 x 1 to
 * larger than the kernel's sub-blocks, batches with broadcast operands,
 * transposed and negative strides, padded rows of C, alpha/beta with C
 * pre-filled, and beta = 0 over a C full of NaN (which must not leak). */
#include "harness.h"
#include "kernel_util.h"
#include "ops/catalog.h"

#define MATMUL_FILE "src/ops/linalg/kernels/matmul_cpu.metal"

/* One launch. Logical A is batch x m x k, B batch x k x n (batch 1 when
 * broadcast), C batch x m x n with rows ldc = n + pad apart. */
typedef struct mm_case {
    alloy_dtype ti, to;
    int batch, m, n, k;
    int ta, tb;         /* operand stored transposed (column-major) */
    int neg_a, neg_b;   /* operand reached through negated strides */
    int bcast_a, bcast_b; /* one matrix for every batch (batch stride 0) */
    int pad;            /* extra elements at the end of each row of C */
    double alpha, beta; /* beta == 0: C starts as NaN */
    int tile_m, tile_n;
} mm_case;

static double round_to(alloy_dtype dt, double x) {
    switch (dt) {
    case ALLOY_FLOAT16: return ku_f16_value(ku_f16_bits(x));
    case ALLOY_BFLOAT16: return ku_bf16_value(ku_bf16_bits(x));
    case ALLOY_FLOAT32: return (double)(float)x;
    default: return x;
    }
}

/* Stores a value already representable in dt. */
static void put(alloy_dtype dt, void *buf, int64_t i, double v) {
    switch (dt) {
    case ALLOY_FLOAT16: ((uint16_t *)buf)[i] = ku_f16_bits(v); break;
    case ALLOY_BFLOAT16: ((uint16_t *)buf)[i] = ku_bf16_bits(v); break;
    case ALLOY_FLOAT32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

static double get(alloy_dtype dt, const void *buf, int64_t i) {
    switch (dt) {
    case ALLOY_FLOAT16: return ku_f16_value(((const uint16_t *)buf)[i]);
    case ALLOY_BFLOAT16: return ku_bf16_value(((const uint16_t *)buf)[i]);
    case ALLOY_FLOAT32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* Unit roundoff of a dtype. */
static double unit(alloy_dtype dt) {
    switch (dt) {
    case ALLOY_FLOAT16: return ldexp(1, -11);
    case ALLOY_BFLOAT16: return ldexp(1, -8);
    case ALLOY_FLOAT32: return ldexp(1, -24);
    default: return ldexp(1, -53);
    }
}

/* Smallest positive subnormal (the output's absolute rounding floor). */
static double tiny(alloy_dtype dt) {
    switch (dt) {
    case ALLOY_FLOAT16: return ldexp(1, -24);
    case ALLOY_BFLOAT16: return ldexp(1, -133);
    case ALLOY_FLOAT32: return ldexp(1, -149);
    default: return ldexp(1, -1074);
    }
}

/* An operand: `mats` matrices of rows x cols (logical), stored row-major or
 * transposed, optionally mirrored (negated strides, the view's offset at the
 * far end). Fills *vals with the logical values (index b*rows*cols + r*cols
 * + c) and returns the device view whose first element is (0, 0, 0);
 * strides come back in st[3] (batch, row, column). */
static alloy_array *operand(alloy_dtype dt, int mats, int rows, int cols, int trans, int neg,
                            double **vals, int64_t st[3]) {
    int64_t total = (int64_t)mats * rows * cols;
    int64_t alloc = total ? total : 1;
    void *raw = calloc((size_t)alloc, 8);
    *vals = malloc((size_t)alloc * sizeof **vals);
    st[0] = (int64_t)rows * cols;
    st[1] = trans ? 1 : cols;
    st[2] = trans ? rows : 1;
    for (int b = 0; b < mats; b++)
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) {
                double x = dt == ALLOY_FLOAT64 ? harness_uniform(-1, 1)
                                               : round_to(dt, harness_uniform(-1, 1));
                int64_t loc = b * st[0] + r * st[1] + c * st[2];
                if (neg) loc = total - 1 - loc;
                put(dt, raw, loc, x);
                (*vals)[(int64_t)b * rows * cols + (int64_t)r * cols + c] = x;
            }
    int64_t offset = 0;
    if (neg) {
        for (int d = 0; d < 3; d++) st[d] = -st[d];
        offset = total ? total - 1 : 0;
    }
    int64_t shape[3] = {mats, rows, cols};
    alloy_array *view = NULL;
    CHECK_OK(ku_view_of_host(raw, alloc, dt, 3, shape, st, offset, &view));
    free(raw);
    return view;
}

static int set_constants(alloy_launch *l, const mm_case *c, const int64_t sa[3],
                         const int64_t sb[3], int64_t ldc) {
    struct {
        const char *name;
        int64_t v;
    } ints[] = {{"M", c->m},       {"N", c->n},       {"K", c->k},
                {"batch", c->batch}, {"sa_b", c->bcast_a ? 0 : sa[0]},
                {"sa_m", sa[1]},   {"sa_k", sa[2]},   {"sb_b", c->bcast_b ? 0 : sb[0]},
                {"sb_k", sb[1]},   {"sb_n", sb[2]},   {"sc_b", (int64_t)c->m * ldc},
                {"sc_m", ldc},     {"tile_m", c->tile_m}, {"tile_n", c->tile_n},
                {"a_off", 0},      {"b_off", 0},      {"c_off", 0}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (alloy_launch_set_constant_int(l, ints[i].name, ALLOY_INT64, ints[i].v) != ALLOY_OK)
            return 0;
    return alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, c->alpha) == ALLOY_OK &&
           alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, c->beta) == ALLOY_OK;
}

static void run_case(mm_case c) {
    if (!c.tile_m) c.tile_m = 64;
    if (!c.tile_n) c.tile_n = 128;
    if (!c.batch) c.batch = 1;
    alloy_kernel *kern = NULL;
    CHECK_OK(alloy_catalog_kernel(MATMUL_FILE, &kern));
    if (!kern) return;
    int mats_a = c.bcast_a ? 1 : c.batch, mats_b = c.bcast_b ? 1 : c.batch;
    double *a, *b;
    int64_t sa[3], sb[3];
    alloy_array *in[2];
    in[0] = operand(c.ti, mats_a, c.m, c.k, c.ta, c.neg_a, &a, sa);
    in[1] = operand(c.ti, mats_b, c.k, c.n, c.tb, c.neg_b, &b, sb);
    int64_t ldc = c.n + c.pad, nc = (int64_t)c.batch * c.m * ldc;
    int64_t ncalloc = nc ? nc : 1;
    /* C before: NaN when beta == 0 (must not be read), else values; the
     * padding holds a sentinel that must survive. */
    void *c0 = calloc((size_t)ncalloc, 8), *got = calloc((size_t)ncalloc, 8);
    for (int64_t i = 0; i < nc; i++) {
        int in_row = i % ldc < c.n;
        double v = !in_row ? 7.0 : c.beta == 0 ? NAN : round_to(c.to, harness_uniform(-1, 1));
        put(c.to, c0, i, v);
    }
    alloy_array *cout = ku_array(c.to, ncalloc, c0);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    alloy_array *outs[1] = {NULL};
    if (in[0] && in[1] && cout && l) {
        CHECK_OK(alloy_launch_add_output_array(l, cout));
        CHECK(set_constants(l, &c, sa, sb, ldc));
        CHECK_OK(alloy_launch_set_grid(l, (uint32_t)((c.n + c.tile_n - 1) / c.tile_n),
                                       (uint32_t)((c.m + c.tile_m - 1) / c.tile_m),
                                       (uint32_t)c.batch));
        CHECK_OK(alloy_launch_set_threadgroup(l, 1, 1, 1));
        CHECK_OK(alloy_kernel_apply(kern, 2, in, l, NULL, outs));
        CHECK_OK(alloy_array_copy_to_host(cout, got, (size_t)ncalloc * alloy_dtype_size(c.to)));
    }
    /* Reference and bound: |err| <= (k+2) u_acc |alpha| sum|a b| + u_out |want| + floor. */
    double uacc = c.ti == ALLOY_FLOAT64 ? unit(ALLOY_FLOAT64) : unit(ALLOY_FLOAT32);
    int64_t bad = 0;
    for (int bz = 0; bz < c.batch; bz++)
        for (int i = 0; i < c.m; i++)
            for (int j = 0; j < ldc; j++) {
                int64_t ci = (int64_t)bz * c.m * ldc + (int64_t)i * ldc + j;
                double g = get(c.to, got, ci);
                if (j >= c.n) {
                    if (g != 7.0) {
                        if (bad++ < 4) fprintf(stderr, "  padding C[%lld] overwritten: %g\n", (long long)ci, g);
                    }
                    continue;
                }
                const double *am = a + (int64_t)(c.bcast_a ? 0 : bz) * c.m * c.k;
                const double *bm = b + (int64_t)(c.bcast_b ? 0 : bz) * c.k * c.n;
                double s = 0, sabs = 0;
                for (int p = 0; p < c.k; p++) {
                    double t = am[(int64_t)i * c.k + p] * bm[(int64_t)p * c.n + j];
                    s += t;
                    sabs += fabs(t);
                }
                double want = c.alpha * s;
                if (c.beta != 0) want += c.beta * get(c.to, c0, ci);
                double tol = (c.k + 2) * uacc * fabs(c.alpha) * sabs + unit(c.to) * fabs(want) +
                             tiny(c.to);
                if (!(fabs(g - want) <= tol)) {
                    if (bad < 4)
                        fprintf(stderr, "  C[%d][%d][%d] = %.10g, want %.10g (tol %.3g)\n", bz, i, j, g,
                                want, tol);
                    bad++;
                }
            }
    CHECK_MSG(bad == 0,
              "%lld wrong: %s -> %s batch %d %dx%dx%d ta=%d tb=%d neg=%d/%d bcast=%d/%d pad %d "
              "alpha %g beta %g tile %dx%d",
              (long long)bad, alloy_dtype_name(c.ti), alloy_dtype_name(c.to), c.batch, c.m, c.n,
              c.k, c.ta, c.tb, c.neg_a, c.neg_b, c.bcast_a, c.bcast_b, c.pad, c.alpha, c.beta,
              c.tile_m, c.tile_n);
    alloy_array_free(outs[0]);
    alloy_launch_free(l);
    alloy_array_free(cout);
    alloy_array_free(in[0]);
    alloy_array_free(in[1]);
    free(a);
    free(b);
    free(c0);
    free(got);
}

static const alloy_dtype FLOATS[4] = {ALLOY_FLOAT32, ALLOY_FLOAT16, ALLOY_BFLOAT16, ALLOY_FLOAT64};

static void test_every_dtype_pair(void) {
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 4; o++) {
            run_case((mm_case){.ti = FLOATS[i], .to = FLOATS[o], .m = 33, .n = 47, .k = 29, .alpha = 1});
            run_case((mm_case){.ti = FLOATS[i], .to = FLOATS[o], .m = 19, .n = 40, .k = 13,
                               .alpha = -0.5, .beta = 2});
        }
}

static void test_sizes_and_tiles(void) {
    static const int sizes[][3] = {{1, 1, 1}, {33, 47, 29}, {100, 1, 7}, {1, 1000, 3}, {130, 257, 70}};
    static const int tiles[][2] = {{1, 1}, {5, 7}, {64, 128}, {100, 200}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
            run_case((mm_case){.ti = ALLOY_FLOAT32, .to = ALLOY_FLOAT32, .m = sizes[s][0],
                               .n = sizes[s][1], .k = sizes[s][2], .alpha = 1,
                               .tile_m = tiles[t][0], .tile_n = tiles[t][1]});
    /* K past one slice (256 floats, 128 doubles), every input dtype */
    for (int i = 0; i < 4; i++)
        run_case((mm_case){.ti = FLOATS[i], .to = ALLOY_FLOAT32, .m = 70, .n = 150, .k = 601,
                           .alpha = 1});
    run_case((mm_case){.ti = ALLOY_FLOAT64, .to = ALLOY_FLOAT64, .m = 67, .n = 131, .k = 257,
                       .alpha = 0.75, .beta = -1, .tile_m = 67, .tile_n = 131});
    /* whole 128-column panels with alpha = 1, beta = 0: the last K slice
     * stores straight into C (float32 and float64 C), A in place or packed */
    for (int ta = 0; ta < 2; ta++) {
        run_case((mm_case){.ti = ALLOY_FLOAT32, .to = ALLOY_FLOAT32, .m = 130, .n = 257, .k = 300,
                           .ta = ta, .alpha = 1, .pad = 5});
        run_case((mm_case){.ti = ALLOY_FLOAT64, .to = ALLOY_FLOAT64, .m = 130, .n = 257, .k = 300,
                           .ta = ta, .alpha = 1, .pad = 5});
    }
    /* nothing to compute: an empty grid */
    run_case((mm_case){.ti = ALLOY_FLOAT32, .to = ALLOY_FLOAT32, .m = 0, .n = 5, .k = 3, .alpha = 1});
}

static void test_k_zero(void) {
    for (int o = 0; o < 4; o++) {
        run_case((mm_case){.ti = ALLOY_FLOAT32, .to = FLOATS[o], .m = 9, .n = 40, .k = 0, .alpha = 1});
        run_case((mm_case){.ti = ALLOY_FLOAT16, .to = FLOATS[o], .m = 9, .n = 40, .k = 0,
                           .alpha = -0.5, .beta = 2, .tile_m = 4, .tile_n = 16});
    }
}

static void test_layouts(void) {
    for (int i = 0; i < 4; i++) {
        alloy_dtype t = FLOATS[i];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                run_case((mm_case){.ti = t, .to = ALLOY_FLOAT32, .m = 37, .n = 70, .k = 45,
                                   .ta = ta, .tb = tb, .alpha = 1});
        run_case((mm_case){.ti = t, .to = t, .m = 41, .n = 33, .k = 300, .neg_a = 1, .neg_b = 1,
                           .alpha = -0.5, .beta = 2, .pad = 3});
        run_case((mm_case){.ti = t, .to = ALLOY_FLOAT64, .m = 20, .n = 35, .k = 17, .ta = 1,
                           .neg_b = 1, .tb = 1, .alpha = 1, .tile_m = 5, .tile_n = 7});
    }
}

static void test_batches(void) {
    for (int i = 0; i < 4; i++) {
        alloy_dtype t = FLOATS[i];
        run_case((mm_case){.ti = t, .to = ALLOY_FLOAT32, .batch = 3, .m = 30, .n = 50, .k = 21,
                           .bcast_a = 1, .alpha = 1});
        run_case((mm_case){.ti = t, .to = t, .batch = 3, .m = 17, .n = 140, .k = 33, .bcast_b = 1,
                           .tb = 1, .pad = 1, .alpha = -0.5, .beta = 2, .tile_m = 5, .tile_n = 7});
        run_case((mm_case){.ti = t, .to = ALLOY_BFLOAT16, .batch = 4, .m = 65, .n = 129, .k = 9,
                           .ta = 1, .neg_b = 1, .alpha = 2});
    }
}

/* float16/bfloat16 special values through the packing conversions (vector
 * and scalar paths): subnormals, signed zeros, the largest finite values,
 * and an Inf and a NaN in A, which must give whole rows of Inf and NaN. */
static void special_case(alloy_dtype dt) {
    enum { M = 3, N = 70, K = 40 };
    const double maxv = dt == ALLOY_FLOAT16 ? KU_HALF_MAX : 3.0e38;
    const double sub = dt == ALLOY_FLOAT16 ? ldexp(1, -24) : ldexp(1, -133);
    uint16_t ra[M * K], rb[K * N];
    double a[M * K], b[K * N];
    for (int i = 0; i < M * K; i++) {
        int kind = i % 5;
        double x = kind == 0 ? sub * (1 + i % 7) : kind == 1 ? -0.0 : kind == 2 ? -sub * 3
                 : kind == 3 ? round_to(dt, harness_uniform(-1, 1)) : round_to(dt, maxv / 64);
        a[i] = x;
    }
    a[1 * K + 17] = INFINITY;
    a[2 * K + 33] = NAN;
    for (int i = 0; i < K * N; i++) b[i] = i % 9 == 0 ? sub * 5 : round_to(dt, harness_uniform(0.5, 1));
    for (int i = 0; i < M * K; i++) ra[i] = dt == ALLOY_FLOAT16 ? ku_f16_bits(a[i]) : ku_bf16_bits(a[i]);
    for (int i = 0; i < K * N; i++) rb[i] = dt == ALLOY_FLOAT16 ? ku_f16_bits(b[i]) : ku_bf16_bits(b[i]);
    int64_t sa[2] = {M, K}, sb[2] = {K, N};
    alloy_array *in[2] = {ku_array_nd(dt, 2, sa, ra), ku_array_nd(dt, 2, sb, rb)};
    alloy_kernel *kern = NULL;
    CHECK_OK(alloy_catalog_kernel(MATMUL_FILE, &kern));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int64_t sc[2] = {M, N};
    CHECK_OK(alloy_launch_add_output(l, 2, sc, ALLOY_FLOAT32));
    mm_case c = {.ti = dt, .to = ALLOY_FLOAT32, .batch = 1, .m = M, .n = N, .k = K, .alpha = 1,
                 .tile_m = 64, .tile_n = 128};
    int64_t s3a[3] = {M * K, K, 1}, s3b[3] = {K * N, N, 1};
    CHECK(set_constants(l, &c, s3a, s3b, N));
    CHECK_OK(alloy_launch_set_grid(l, 1, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 1, 1, 1));
    alloy_array *outs[1] = {NULL};
    float got[M * N] = {0};
    if (kern && in[0] && in[1]) {
        CHECK_OK(alloy_kernel_apply(kern, 2, in, l, NULL, outs));
        CHECK_OK(alloy_array_copy_to_host(outs[0], got, sizeof got));
    }
    int bad = 0;
    for (int j = 0; j < N; j++) {
        double s0 = 0, sabs = 0;
        for (int p = 0; p < K; p++) {
            s0 += a[p] * b[p * N + j];
            sabs += fabs(a[p] * b[p * N + j]);
        }
        if (!(fabs(got[j] - s0) <= (K + 2) * unit(ALLOY_FLOAT32) * sabs + unit(ALLOY_FLOAT32) * fabs(s0) + 1e-45))
            bad++;
        if (!(isinf(got[N + j]) && got[N + j] > 0)) bad++;
        if (!isnan(got[2 * N + j])) bad++;
    }
    CHECK_MSG(bad == 0, "%s: %d wrong (row 0 %.9g, row 1 %g, row 2 %g)", alloy_dtype_name(dt), bad,
              got[0], got[N], got[2 * N]);
    alloy_array_free(outs[0]);
    alloy_launch_free(l);
    alloy_array_free(in[0]);
    alloy_array_free(in[1]);
}

static void test_special_values(void) {
    special_case(ALLOY_FLOAT16);
    special_case(ALLOY_BFLOAT16);
}

int main(void) {
    harness_seed();
    RUN(test_every_dtype_pair);
    RUN(test_sizes_and_tiles);
    RUN(test_k_zero);
    RUN(test_layouts);
    RUN(test_batches);
    RUN(test_special_values);
    return harness_finish();
}
