/* test_seed_gemm.c — the 16x16-tiled GEMM kernels (examples/gemm_av:
 * C = A V, examples/gemm_at_b: Z = A^T B) against double-precision
 * references, at the originals' regression shapes (33x29x31, 2x3) and others
 * that are not multiples of 16, with NaN-filled outputs; plus the SVD power
 * iteration step Z = A^T (A V) chained through both kernels. The grid is
 * ceil(cols/16)*16 x ceil(rows/16)*16 THREADS (the seeds' threadgroup-count
 * grid would cover only a corner). */
#include "seed_refs.h"

/* Error bound: each output is a sum of N fp32 products accumulated with fma
 * (zero-filled tile padding adds exact zeros): |err| <= (N+2)*u*sum|terms|,
 * u = 2^-24. Rigorous in any summation order; a wrong, missing or duplicated
 * term is O(|term|) and fails it. */
static void make_bound(const double *abssum, size_t n, int64_t terms, double *bound) {
    for (size_t i = 0; i < n; i++) bound[i] = (double)(terms + 2) * SEED_U32 * abssum[i] + 1e-30;
}

/* Runs a GEMM example: inputs (rows_a x cols_a) and (rows_b x cols_b), output
 * (out_r x out_c) float32 pre-filled with NaN; returns the host result. */
static float *run_gemm(seed_kernel *sk, alloy_device *dev, const float *a, const int64_t *as,
                       const float *b, const int64_t *bs, int64_t out_r, int64_t out_c) {
    alloy_array *ins[2] = {seed_array(dev, ALLOY_FLOAT32, 2, as, a),
                           seed_array(dev, ALLOY_FLOAT32, 2, bs, b)};
    int64_t os[2] = {out_r, out_c};
    alloy_array *pre = seed_filled(dev, ALLOY_FLOAT32, 2, os, NAN), *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (pre) CHECK_OK(alloy_launch_add_output_array(l, pre));
    CHECK_OK(alloy_launch_set_grid(l, seed_round_up((uint32_t)out_c, 16),
                                   seed_round_up((uint32_t)out_r, 16), 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 16, 16, 1));
    CHECK_OK(alloy_kernel_apply(sk->kernel, 2, ins, l, NULL, &out));
    float *got = seed_host(out);
    alloy_array_free(out);
    alloy_array_free(pre);
    alloy_array_free(ins[0]);
    alloy_array_free(ins[1]);
    alloy_launch_free(l);
    return got;
}

/* (m, n, k): A (m,n); AV: V (n,k) -> (m,k); AtB: B (m,k) -> (n,k). */
static const int64_t gemm_shapes[][3] = {
    {33, 29, 31}, {2, 3, 1}, {2, 3, 5}, {3, 2, 2}, {1, 1, 1}, {16, 16, 16},
    {64, 128, 32}, {17, 100, 3}, {100, 1, 47}, {1, 33, 1000}};

static void test_gemm_av(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("gemm_av.metal", &sk)) return;
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof *gemm_shapes; s++) {
        int64_t m = gemm_shapes[s][0], n = gemm_shapes[s][1], k = gemm_shapes[s][2];
        int64_t as[2] = {m, n}, vs[2] = {n, k};
        size_t nc = (size_t)(m * k);
        float *A = malloc(sizeof(float) * (size_t)(m * n)), *V = malloc(sizeof(float) * (size_t)(n * k));
        double *ref = malloc(sizeof(double) * nc), *abs_ = malloc(sizeof(double) * nc),
               *bound = malloc(sizeof(double) * nc);
        harness_fill_f32(A, (size_t)(m * n), -1, 1);
        harness_fill_f32(V, (size_t)(n * k), -1, 1);
        ref_gemm_av(A, V, m, n, k, ref, abs_);
        make_bound(abs_, nc, n, bound);
        float *got = run_gemm(&sk, dev, A, as, V, vs, m, k);
        if (got) {
            CHECK_MSG(seed_unwritten(got, ref, nc) == 0, "gemm_av %lldx%lldx%lld: unwritten",
                      (long long)m, (long long)n, (long long)k);
            seed_check_bound("gemm_av", got, ref, bound, nc);
        }
        free(got);
        free(A);
        free(V);
        free(ref);
        free(abs_);
        free(bound);
    }
    seed_kernel_free(&sk);
}

static void test_gemm_at_b(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("gemm_at_b.metal", &sk)) return;
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof *gemm_shapes; s++) {
        int64_t m = gemm_shapes[s][0], n = gemm_shapes[s][1], k = gemm_shapes[s][2];
        int64_t as[2] = {m, n}, bs[2] = {m, k};
        size_t nz = (size_t)(n * k);
        float *A = malloc(sizeof(float) * (size_t)(m * n)), *B = malloc(sizeof(float) * (size_t)(m * k));
        double *ref = malloc(sizeof(double) * nz), *abs_ = malloc(sizeof(double) * nz),
               *bound = malloc(sizeof(double) * nz);
        harness_fill_f32(A, (size_t)(m * n), -1, 1);
        harness_fill_f32(B, (size_t)(m * k), -1, 1);
        ref_gemm_at_b(A, B, m, n, k, ref, abs_);
        make_bound(abs_, nz, m, bound);
        float *got = run_gemm(&sk, dev, A, as, B, bs, n, k);
        if (got) {
            CHECK_MSG(seed_unwritten(got, ref, nz) == 0, "gemm_at_b %lldx%lldx%lld: unwritten",
                      (long long)m, (long long)n, (long long)k);
            seed_check_bound("gemm_at_b", got, ref, bound, nz);
        }
        free(got);
        free(A);
        free(B);
        free(ref);
        free(abs_);
        free(bound);
    }
    seed_kernel_free(&sk);
}

/* The power-iteration step of top-k SVD, Z = A^T (A V), through both kernels.
 * The reference takes the kernel's fp32 W = A V as its input for the second
 * product (each product is checked with its own rigorous bound), and W itself
 * is checked against the double product. */
static void test_power_step(void) {
    alloy_device *dev = harness_device();
    seed_kernel av, atb;
    if (!seed_kernel_load("gemm_av.metal", &av)) return;
    if (!seed_kernel_load("gemm_at_b.metal", &atb)) { seed_kernel_free(&av); return; }
    const int64_t m = 70, n = 45, k = 5;
    int64_t as[2] = {m, n}, vs[2] = {n, k}, ws[2] = {m, k};
    float *A = malloc(sizeof(float) * (size_t)(m * n)), *V = malloc(sizeof(float) * (size_t)(n * k));
    double *w_ref = malloc(sizeof(double) * (size_t)(m * k)), *w_abs = malloc(sizeof(double) * (size_t)(m * k)),
           *w_bound = malloc(sizeof(double) * (size_t)(m * k)), *z_ref = malloc(sizeof(double) * (size_t)(n * k)),
           *z_abs = malloc(sizeof(double) * (size_t)(n * k)), *z_bound = malloc(sizeof(double) * (size_t)(n * k));
    harness_fill_f32(A, (size_t)(m * n), -1, 1);
    harness_fill_f32(V, (size_t)(n * k), -1, 1);
    float *W = run_gemm(&av, dev, A, as, V, vs, m, k);
    if (W) {
        ref_gemm_av(A, V, m, n, k, w_ref, w_abs);
        make_bound(w_abs, (size_t)(m * k), n, w_bound);
        seed_check_bound("power step W = A V", W, w_ref, w_bound, (size_t)(m * k));
        float *Z = run_gemm(&atb, dev, A, as, W, ws, n, k);
        if (Z) {
            ref_gemm_at_b(A, W, m, n, k, z_ref, z_abs);
            make_bound(z_abs, (size_t)(n * k), m, z_bound);
            CHECK(seed_unwritten(Z, z_ref, (size_t)(n * k)) == 0);
            seed_check_bound("power step Z = A^T W", Z, z_ref, z_bound, (size_t)(n * k));
        }
        free(Z);
    }
    free(W);
    free(A);
    free(V);
    free(w_ref);
    free(w_abs);
    free(w_bound);
    free(z_ref);
    free(z_abs);
    free(z_bound);
    seed_kernel_free(&av);
    seed_kernel_free(&atb);
}

int main(void) {
    harness_seed();
    RUN(test_gemm_av);
    RUN(test_gemm_at_b);
    RUN(test_power_step);
    return harness_finish();
}
