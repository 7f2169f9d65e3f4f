/* test_seed_qr.c — the Gram-Schmidt helper kernels (examples/qr_col_dot,
 * qr_col_dot_simd, qr_update_vec) against double-precision references at
 * awkward shapes, with NaN-filled outputs, and one full modified
 * Gram-Schmidt orthogonalisation driven by the two kernels (Q^T Q = I). */
#include "seed_refs.h"

/* Error bound for a sum of N fp32 products accumulated with fma in any order:
 * |err| <= gamma_N * sum|terms| with gamma_N ~ N*u (u = 2^-24); we allow
 * (N+2)*u*abssum — rigorous, and tight enough to catch a wrong or missing
 * term (those are O(|term|), not O(u)). */
static void bounds_from_abssum(const double *abssum, size_t n, int64_t terms, double *bound) {
    for (size_t i = 0; i < n; i++) bound[i] = (double)(terms + 2) * SEED_U32 * abssum[i] + 1e-30;
}

static void run_col_dot(alloy_device *dev, seed_kernel *sk, int simd, int64_t m, int64_t k,
                        uint32_t grid, uint32_t tg) {
    int64_t qs[2] = {m, k}, vs[1] = {m}, cs[1] = {k};
    float *Q = malloc(sizeof(float) * (size_t)(m * k)), *v = malloc(sizeof(float) * (size_t)m);
    double *ref = malloc(sizeof(double) * (size_t)k), *abssum = malloc(sizeof(double) * (size_t)k),
           *bound = malloc(sizeof(double) * (size_t)k);
    harness_fill_f32(Q, (size_t)(m * k), -1, 1);
    harness_fill_f32(v, (size_t)m, -1, 1);
    ref_col_dot(Q, v, m, k, ref, abssum);
    bounds_from_abssum(abssum, (size_t)k, m, bound);

    alloy_array *ins[2] = {seed_array(dev, ALLOY_FLOAT32, 2, qs, Q),
                           seed_array(dev, ALLOY_FLOAT32, 1, vs, v)};
    alloy_array *pre = seed_filled(dev, ALLOY_FLOAT32, 1, cs, NAN), *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (pre) CHECK_OK(alloy_launch_add_output_array(l, pre));
    CHECK_OK(alloy_launch_set_grid(l, grid, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, tg, 1, 1));
    CHECK_OK(alloy_kernel_apply(sk->kernel, 2, ins, l, NULL, &out));
    float *got = seed_host(out);
    if (got) {
        CHECK_MSG(seed_unwritten(got, ref, (size_t)k) == 0, "%s m=%lld k=%lld: unwritten",
                  simd ? "qr_col_dot_simd" : "qr_col_dot", (long long)m, (long long)k);
        seed_check_bound(simd ? "qr_col_dot_simd" : "qr_col_dot", got, ref, bound, (size_t)k);
    }
    free(got);
    alloy_array_free(out);
    alloy_array_free(pre);
    for (int i = 0; i < 2; i++) alloy_array_free(ins[i]);
    alloy_launch_free(l);
    free(Q);
    free(v);
    free(ref);
    free(abssum);
    free(bound);
}

static const int64_t qr_shapes[][2] = {{1, 1}, {33, 5}, {1000, 33}, {128, 16}, {7, 100},
                                       {513, 1}, {2, 3}};

static void test_col_dot(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("qr_col_dot.metal", &sk)) return;
    for (size_t s = 0; s < sizeof qr_shapes / sizeof *qr_shapes; s++) {
        int64_t m = qr_shapes[s][0], k = qr_shapes[s][1];
        run_col_dot(dev, &sk, 0, m, k, (uint32_t)k, 64);
        run_col_dot(dev, &sk, 0, m, k, seed_round_up((uint32_t)k, 64), 64);
    }
    seed_kernel_free(&sk);
}

static void test_col_dot_simd(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("qr_col_dot_simd.metal", &sk)) return;
    for (size_t s = 0; s < sizeof qr_shapes / sizeof *qr_shapes; s++) {
        int64_t m = qr_shapes[s][0], k = qr_shapes[s][1];
        uint32_t g = (uint32_t)k * 32;
        run_col_dot(dev, &sk, 1, m, k, g, 32);                      /* one column per group */
        run_col_dot(dev, &sk, 1, m, k, g, 256);                     /* 8 columns per group */
        run_col_dot(dev, &sk, 1, m, k, seed_round_up(g, 256), 256); /* rounded-up grid */
    }
    seed_kernel_free(&sk);
}

static void run_update(alloy_device *dev, seed_kernel *sk, int64_t m, int64_t k, uint32_t grid) {
    int64_t qs[2] = {m, k}, vs[1] = {m}, cs[1] = {k};
    float *Q = malloc(sizeof(float) * (size_t)(m * k)), *v = malloc(sizeof(float) * (size_t)m),
          *c = malloc(sizeof(float) * (size_t)k);
    double *ref = malloc(sizeof(double) * (size_t)m), *abssum = malloc(sizeof(double) * (size_t)m),
           *bound = malloc(sizeof(double) * (size_t)m);
    harness_fill_f32(Q, (size_t)(m * k), -1, 1);
    harness_fill_f32(v, (size_t)m, -1, 1);
    harness_fill_f32(c, (size_t)k, -1, 1);
    ref_update_vec(Q, v, c, m, k, ref, abssum);
    bounds_from_abssum(abssum, (size_t)m, k + 1, bound);

    alloy_array *ins[3] = {seed_array(dev, ALLOY_FLOAT32, 2, qs, Q),
                           seed_array(dev, ALLOY_FLOAT32, 1, vs, v),
                           seed_array(dev, ALLOY_FLOAT32, 1, cs, c)};
    alloy_array *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, vs, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_launch_set_grid(l, grid, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 128, 1, 1));
    CHECK_OK(alloy_kernel_apply(sk->kernel, 3, ins, l, NULL, &out));
    float *got = seed_host(out);
    if (got) {
        CHECK_MSG(seed_unwritten(got, ref, (size_t)m) == 0, "qr_update_vec m=%lld k=%lld: unwritten",
                  (long long)m, (long long)k);
        seed_check_bound("qr_update_vec", got, ref, bound, (size_t)m);
    }
    free(got);
    alloy_array_free(out);
    for (int i = 0; i < 3; i++) alloy_array_free(ins[i]);
    alloy_launch_free(l);
    free(Q);
    free(v);
    free(c);
    free(ref);
    free(abssum);
    free(bound);
}

static void test_update_vec(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("qr_update_vec.metal", &sk)) return;
    for (size_t s = 0; s < sizeof qr_shapes / sizeof *qr_shapes; s++) {
        int64_t m = qr_shapes[s][0], k = qr_shapes[s][1];
        run_update(dev, &sk, m, k, (uint32_t)m);
        run_update(dev, &sk, m, k, seed_round_up((uint32_t)m, 128));
    }
    seed_kernel_free(&sk);
}

/* Helper: runs a kernel on float32 inputs with one float32 output of `n_out`
 * elements (1-D), returning the host copy (malloc'd) or NULL. */
static float *apply_1out(seed_kernel *sk, int n_in, alloy_array **ins, int64_t n_out, uint32_t grid,
                         uint32_t tg) {
    alloy_array *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n_out, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, grid, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, tg, 1, 1));
    CHECK_OK(alloy_kernel_apply(sk->kernel, n_in, ins, l, NULL, &out));
    float *got = seed_host(out);
    alloy_array_free(out);
    alloy_launch_free(l);
    return got;
}

/* Modified Gram-Schmidt with re-orthogonalisation (two projection passes per
 * column, as MetalFaiss' pure_mlx_qr): Q's first j columns are orthonormal;
 * for column j, c = Qj^T a (kernel), a -= Qj c (kernel), twice, then
 * normalise on the host. Result: Q^T Q = I to ~ sqrt(m)*u. The (m, j) prefix
 * of Q is passed as an (m, j) array, so k varies from 1 to ncols-1. */
static void test_gram_schmidt(void) {
    alloy_device *dev = harness_device();
    seed_kernel dot, upd;
    if (!seed_kernel_load("qr_col_dot_simd.metal", &dot)) return;
    if (!seed_kernel_load("qr_update_vec.metal", &upd)) { seed_kernel_free(&dot); return; }
    const int64_t m = 300, ncols = 12;
    float *A = malloc(sizeof(float) * (size_t)(m * ncols)), *Qc = calloc((size_t)(m * ncols), sizeof(float));
    harness_fill_f32(A, (size_t)(m * ncols), -1, 1);
    for (int64_t j = 0; j < ncols; j++) {
        float *a = malloc(sizeof(float) * (size_t)m);
        for (int64_t i = 0; i < m; i++) a[i] = A[i * ncols + j];
        if (j > 0) {
            /* Qj: the first j columns, row-major (m, j). */
            float *Qj = malloc(sizeof(float) * (size_t)(m * j));
            for (int64_t i = 0; i < m; i++)
                for (int64_t p = 0; p < j; p++) Qj[i * j + p] = Qc[i * ncols + p];
            int64_t qs[2] = {m, j}, vs[1] = {m}, cs[1] = {j};
            for (int pass = 0; pass < 2; pass++) {
                alloy_array *qa = seed_array(dev, ALLOY_FLOAT32, 2, qs, Qj),
                            *va = seed_array(dev, ALLOY_FLOAT32, 1, vs, a);
                alloy_array *in1[2] = {qa, va};
                float *c = apply_1out(&dot, 2, in1, j, (uint32_t)(j * 32), 64);
                alloy_array *ca = c ? seed_array(dev, ALLOY_FLOAT32, 1, cs, c) : NULL;
                alloy_array *in2[3] = {qa, va, ca};
                float *a2 = ca ? apply_1out(&upd, 3, in2, m, (uint32_t)m, 128) : NULL;
                if (a2) memcpy(a, a2, sizeof(float) * (size_t)m);
                free(a2);
                free(c);
                alloy_array_free(ca);
                alloy_array_free(qa);
                alloy_array_free(va);
            }
            free(Qj);
        }
        double norm = 0;
        for (int64_t i = 0; i < m; i++) norm += (double)a[i] * a[i];
        norm = sqrt(norm);
        CHECK(norm > 1e-3);
        for (int64_t i = 0; i < m; i++) Qc[i * ncols + j] = (float)(a[i] / norm);
        free(a);
    }
    /* |Q^T Q - I| <= 1e-5: fp32 Gram-Schmidt with re-orthogonalisation keeps
     * orthogonality at O(u * sqrt(m)) ~ 1e-6 for a well-conditioned random A. */
    double worst = 0;
    for (int64_t p = 0; p < ncols; p++)
        for (int64_t q = 0; q < ncols; q++) {
            double s = 0;
            for (int64_t i = 0; i < m; i++) s += (double)Qc[i * ncols + p] * Qc[i * ncols + q];
            worst = fmax(worst, fabs(s - (p == q ? 1.0 : 0.0)));
        }
    CHECK_MSG(worst <= 1e-5, "max |Q^T Q - I| = %.3g", worst);
    free(A);
    free(Qc);
    seed_kernel_free(&dot);
    seed_kernel_free(&upd);
}

int main(void) {
    harness_seed();
    RUN(test_col_dot);
    RUN(test_col_dot_simd);
    RUN(test_update_vec);
    RUN(test_gram_schmidt);
    return harness_finish();
}
