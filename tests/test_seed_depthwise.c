/* test_seed_depthwise.c — examples/depthwise3.metal, the CAUSAL depthwise
 * 3-tap convolution with bias (M2-BERT's Conv1d(k=3, groups=C, padding=2)
 * truncated to L), against a double-precision reference, at awkward shapes,
 * with NaN-filled outputs; plus a direct causality probe (changing x at t0
 * must not change y before t0), which the seeds' look-ahead and centred
 * variants fail. */
#include "seed_refs.h"

/* Tolerance: y is bias + three products with |w|,|x|,|bias| <= 1, done as
 * three fma (one rounding each), so |err| <= 3u * (|bias| + sum |w x|) <= 3u*4
 * with u = 2^-24; bound 8u*4 = 1.9e-6 absolute leaves margin for a non-fused
 * multiply-add (two roundings per tap). */
static void run_depthwise(alloy_device *dev, seed_kernel *sk, int64_t B, int64_t C, int64_t L,
                          uint32_t grid) {
    int64_t xs[3] = {B, C, L}, ws[2] = {C, 3}, bs[1] = {C};
    size_t n = (size_t)(B * C * L);
    float *x = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * (size_t)C * 3),
          *bias = malloc(sizeof(float) * (size_t)C);
    double *ref = malloc(sizeof(double) * n);
    harness_fill_f32(x, n, -1, 1);
    harness_fill_f32(w, (size_t)C * 3, -1, 1);
    harness_fill_f32(bias, (size_t)C, -1, 1);
    ref_depthwise3(x, w, bias, B, C, L, ref);

    alloy_array *ins[3] = {seed_array(dev, ALLOY_FLOAT32, 3, xs, x),
                           seed_array(dev, ALLOY_FLOAT32, 2, ws, w),
                           seed_array(dev, ALLOY_FLOAT32, 1, bs, bias)};
    alloy_array *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 3, xs, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, grid, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_kernel_apply(sk->kernel, 3, ins, l, NULL, &out));
    float *got = seed_host(out);
    if (got) {
        CHECK_MSG(seed_unwritten(got, ref, n) == 0, "depthwise3 (%lld,%lld,%lld): unwritten",
                  (long long)B, (long long)C, (long long)L);
        seed_check_tol("depthwise3", got, ref, n, 8 * SEED_U32 * 4, 0);
        /* t = 0 sees only the current sample: y = bias + w2*x (two values, one
         * rounding). */
        for (int64_t b = 0; b < B; b++)
            for (int64_t c = 0; c < C; c++) {
                size_t i = (size_t)((b * C + c) * L);
                double want = (double)bias[c] + (double)w[c * 3 + 2] * x[i];
                CHECK(fabs(got[i] - want) <= 4 * SEED_U32 * 2);
            }
    }
    free(got);
    alloy_array_free(out);
    for (int i = 0; i < 3; i++) alloy_array_free(ins[i]);
    alloy_launch_free(l);
    free(x);
    free(w);
    free(bias);
    free(ref);
}

static void test_depthwise_shapes(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("depthwise3.metal", &sk)) return;
    static const int64_t shapes[][3] = {{1, 1, 1}, {1, 1, 2}, {1, 1, 3}, {2, 3, 33},
                                        {3, 5, 1000}, {1, 33, 7}, {4, 17, 31}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        uint32_t n = (uint32_t)(shapes[s][0] * shapes[s][1] * shapes[s][2]);
        run_depthwise(dev, &sk, shapes[s][0], shapes[s][1], shapes[s][2], n);
        run_depthwise(dev, &sk, shapes[s][0], shapes[s][1], shapes[s][2], seed_round_up(n, 256));
    }
    seed_kernel_free(&sk);
}

/* Impulse at t0 in one channel: the output is nonzero (besides the bias) only
 * at t0, t0+1, t0+2, with values w2, w1, w0 — causal, not look-ahead/centred. */
static void test_depthwise_causal_impulse(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("depthwise3.metal", &sk)) return;
    const int64_t B = 1, C = 2, L = 9, t0 = 4;
    int64_t xs[3] = {B, C, L}, ws[2] = {C, 3}, bs[1] = {C};
    float x[18] = {0}, w[6] = {0.5f, 0.25f, 0.125f, 2.0f, 3.0f, 4.0f}, bias[2] = {0, 1};
    x[0 * L + t0] = 1.0f; /* channel 0 */
    x[1 * L + t0] = 1.0f; /* channel 1 */
    alloy_array *ins[3] = {seed_array(dev, ALLOY_FLOAT32, 3, xs, x),
                           seed_array(dev, ALLOY_FLOAT32, 2, ws, w),
                           seed_array(dev, ALLOY_FLOAT32, 1, bs, bias)};
    alloy_array *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 3, xs, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)(B * C * L), 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_kernel_apply(sk.kernel, 3, ins, l, NULL, &out));
    float *got = seed_host(out);
    if (got)
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < L; t++) {
                float want = bias[c];
                if (t == t0) want += w[c * 3 + 2];
                if (t == t0 + 1) want += w[c * 3 + 1];
                if (t == t0 + 2) want += w[c * 3 + 0];
                CHECK_MSG(got[c * L + t] == want, "c=%lld t=%lld: got %g want %g", (long long)c,
                          (long long)t, got[c * L + t], want);
            }
    free(got);
    alloy_array_free(out);
    for (int i = 0; i < 3; i++) alloy_array_free(ins[i]);
    alloy_launch_free(l);
    seed_kernel_free(&sk);
}

int main(void) {
    harness_seed();
    RUN(test_depthwise_shapes);
    RUN(test_depthwise_causal_impulse);
    return harness_finish();
}
