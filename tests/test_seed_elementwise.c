/* test_seed_elementwise.c — the elementwise seed kernels (examples/soft_cap,
 * memcpy, exp) loaded from their .metal files and run through the public API,
 * against double-precision references, at awkward sizes, with exact and
 * rounded-up grids, and with NaN-filled outputs to prove every element is
 * written. */
#include "seed_refs.h"

static const int64_t sizes[] = {1, 33, 1000, 4097};

/* soft_cap: cap*tanh(x/cap). Tolerance: libm/Metal/CUDA tanhf are within a
 * few ulp, x/cap adds half an ulp to the argument (the derivative of tanh is
 * <= 1, so it stays a few ulp of the result); rtol 1e-5 (~80 ulp) plus an
 * absolute 1e-6*cap for results near zero is a wide but meaningful margin. */
static void run_soft_cap(alloy_device *dev, seed_kernel *sk, int ndim, const int64_t *shape,
                         double cap, uint32_t grid, uint32_t tg) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *x = malloc(sizeof(float) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)n);
    harness_fill_f32(x, (size_t)n, -8 * cap, 8 * cap);
    if (n > 1) x[0] = 0.0f;
    ref_soft_cap(x, (size_t)n, cap, ref);

    alloy_array *xa = seed_array(dev, ALLOY_FLOAT32, ndim, shape, x), *ca = NULL, *out = NULL;
    CHECK_OK(alloy_array_scalar(dev, ALLOY_FLOAT32, cap, &ca));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, ndim, shape, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, grid, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, tg, 1, 1));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    alloy_array *ins[2] = {xa, ca};
    CHECK_OK(alloy_kernel_apply(sk->kernel, 2, ins, l, NULL, &out));
    float *got = seed_host(out);
    if (got) {
        CHECK_MSG(seed_unwritten(got, ref, (size_t)n) == 0, "soft_cap n=%lld: unwritten outputs",
                  (long long)n);
        seed_check_tol("soft_cap", got, ref, (size_t)n, 1e-6 * cap, 1e-5);
        for (int64_t i = 0; i < n; i++) /* |out| <= cap always */
            if (!(fabsf(got[i]) <= (float)cap * (1 + 1e-6f))) {
                CHECK_MSG(0, "soft_cap |out[%lld]| = %g > cap", (long long)i, got[i]);
                break;
            }
    }
    free(got);
    alloy_array_free(out);
    alloy_array_free(xa);
    alloy_array_free(ca);
    alloy_launch_free(l);
    free(x);
    free(ref);
}

static void test_soft_cap(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("soft_cap.metal", &sk)) return;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        run_soft_cap(dev, &sk, 1, &n, 2.5, (uint32_t)n, 256);                     /* exact */
        run_soft_cap(dev, &sk, 1, &n, 15.0, seed_round_up((uint32_t)n, 256), 256); /* rounded */
    }
    int64_t shape2[2] = {7, 33}; /* size from the product of the shape */
    run_soft_cap(dev, &sk, 2, shape2, 30.0, 7 * 33, 64);
    seed_kernel_free(&sk);
}

/* memcpy is exact for any dtype. */
static void run_memcpy(alloy_device *dev, seed_kernel *sk, alloy_dtype dt, int ndim,
                       const int64_t *shape, uint32_t grid) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    size_t es = alloy_dtype_size(dt), nb = es * (size_t)n;
    unsigned char *src = malloc(nb ? nb : 1);
    for (size_t i = 0; i < nb; i++) src[i] = (unsigned char)(harness_rand_u64() >> 56);
    if (dt == ALLOY_FLOAT32) /* keep the floats finite so a NaN can only mean "unwritten" */
        for (int64_t i = 0; i < n; i++) ((float *)src)[i] = (float)harness_uniform(-1e6, 1e6);

    alloy_array *in = seed_array(dev, dt, ndim, shape, src), *out = NULL;
    alloy_array *pre = seed_filled(dev, dt, ndim, shape, dt == ALLOY_FLOAT32 ? NAN : 0);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (pre) CHECK_OK(alloy_launch_add_output_array(l, pre));
    CHECK_OK(alloy_launch_set_grid(l, grid, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_kernel_apply(sk->kernel, 1, &in, l, NULL, &out));
    CHECK(out == pre);
    unsigned char *got = seed_host(out);
    if (got) CHECK_MSG(memcmp(got, src, nb) == 0, "memcpy %s n=%lld differs", alloy_dtype_name(dt),
                       (long long)n);
    free(got);
    alloy_array_free(out);
    alloy_array_free(pre);
    alloy_array_free(in);
    alloy_launch_free(l);
    free(src);
}

static void test_memcpy(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("memcpy.metal", &sk)) return;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        run_memcpy(dev, &sk, ALLOY_FLOAT32, 1, &n, (uint32_t)n);
        run_memcpy(dev, &sk, ALLOY_INT32, 1, &n, seed_round_up((uint32_t)n, 256));
    }
    int64_t shape3[3] = {3, 11, 5};
    run_memcpy(dev, &sk, ALLOY_UINT8, 3, shape3, 3 * 11 * 5);
    run_memcpy(dev, &sk, ALLOY_FLOAT32, 3, shape3, 1024);
    seed_kernel_free(&sk);
}

/* The bandwidth variants: 4 floats (16 bytes) per thread, with element-wise
 * fallbacks for the tail and for unaligned views (an offset of one element
 * keeps a view row-contiguous, so it reaches the kernel unaligned). */
static void test_soft_cap_vec4(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("soft_cap_vec4.metal", &sk)) return;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        uint32_t g = (uint32_t)((n + 3) / 4);
        run_soft_cap(dev, &sk, 1, &n, 2.5, g, 256);
        run_soft_cap(dev, &sk, 1, &n, 15.0, seed_round_up(g, 64), 64);
    }
    int64_t shape2[2] = {7, 33};
    run_soft_cap(dev, &sk, 2, shape2, 30.0, (7 * 33 + 3) / 4, 64);
    /* unaligned: a view starting one float into a buffer */
    int64_t n = 1001, nb = 1002;
    float *x = malloc(sizeof(float) * (size_t)nb);
    harness_fill_f32(x, (size_t)nb, -40, 40);
    alloy_array *base = seed_array(dev, ALLOY_FLOAT32, 1, &nb, x), *view = NULL, *cap = NULL, *out = NULL;
    if (base) CHECK_OK(alloy_array_wrap(dev, alloy_array_data(base), ALLOY_FLOAT32, 1, &n, NULL, 1,
                                        NULL, NULL, &view));
    CHECK_OK(alloy_array_scalar(dev, ALLOY_FLOAT32, 5.0, &cap));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)((n + 3) / 4), 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 128, 1, 1));
    alloy_array *in[2] = {view, cap};
    if (view) CHECK_OK(alloy_kernel_apply(sk.kernel, 2, in, l, NULL, &out));
    float *got = seed_host(out);
    if (got) {
        double *ref = malloc(sizeof(double) * (size_t)n);
        ref_soft_cap(x + 1, (size_t)n, 5.0, ref);
        CHECK(seed_unwritten(got, ref, (size_t)n) == 0);
        seed_check_tol("soft_cap_vec4 unaligned", got, ref, (size_t)n, 1e-6, 1e-5);
        free(ref);
    }
    free(got);
    alloy_array_free(out);
    alloy_array_free(cap);
    alloy_array_free(view);
    alloy_array_free(base);
    alloy_launch_free(l);
    free(x);
    seed_kernel_free(&sk);
}

static void test_memcpy_vec4(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("memcpy_vec4.metal", &sk)) return;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        run_memcpy(dev, &sk, ALLOY_FLOAT32, 1, &n, (uint32_t)((n * 4 + 15) / 16));
        run_memcpy(dev, &sk, ALLOY_UINT8, 1, &n, seed_round_up((uint32_t)((n + 15) / 16), 256));
    }
    int64_t shape3[3] = {3, 11, 5};
    run_memcpy(dev, &sk, ALLOY_INT16, 3, shape3, (3 * 11 * 5 * 2 + 15) / 16);
    run_memcpy(dev, &sk, ALLOY_FLOAT64, 3, shape3, 1024);
    seed_kernel_free(&sk);
}

/* exp with T = float32. Tolerance: expf is within a few ulp in libm, CUDA
 * and Metal's precise mode; for |x| <= 30 the rounding of x itself is exact
 * (x is the given float). rtol 1e-5 (~80 ulp) leaves room for a relaxed exp. */
static void run_exp_f32(alloy_device *dev, seed_kernel *sk, int64_t n, uint32_t grid) {
    float *x = malloc(sizeof(float) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)n);
    harness_fill_f32(x, (size_t)n, -30, 30);
    ref_exp(x, (size_t)n, ref);
    alloy_array *in = seed_array(dev, ALLOY_FLOAT32, 1, &n, x), *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, grid, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_kernel_file_add_templates(sk->file, l)); /* T=float32 from the file */
    CHECK_OK(alloy_kernel_apply(sk->kernel, 1, &in, l, NULL, &out));
    float *got = seed_host(out);
    if (got) {
        CHECK(seed_unwritten(got, ref, (size_t)n) == 0);
        seed_check_tol("exp f32", got, ref, (size_t)n, 0, 1e-5);
    }
    free(got);
    alloy_array_free(out);
    alloy_array_free(in);
    alloy_launch_free(l);
    free(x);
    free(ref);
}

/* exp with T = float16 (set over the file's default, as the CLI's --template
 * does). Inputs are multiples of 1/64 in [-4, 4] (exact in fp16); the result
 * is rounded to fp16, so 2 fp16 ulp (2^-9 relative) is the tolerance. */
static void run_exp_f16(alloy_device *dev, seed_kernel *sk, int64_t n) {
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)n);
    float *xf = malloc(sizeof(float) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        xf[i] = (float)((int)(harness_rand_u64() % 513) - 256) / 64.0f;
        x[i] = seed_f32_to_f16(xf[i]);
        CHECK(seed_f16_to_f32(x[i]) == xf[i]);
    }
    ref_exp(xf, (size_t)n, ref);
    CHECK_OK(alloy_kernel_file_set_template(sk->file, "T=float16"));
    alloy_array *in = seed_array(dev, ALLOY_FLOAT16, 1, &n, x), *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT16));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_kernel_file_add_templates(sk->file, l));
    CHECK_OK(alloy_kernel_apply(sk->kernel, 1, &in, l, NULL, &out));
    uint16_t *got = seed_host(out);
    if (got) {
        float *gf = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) gf[i] = seed_f16_to_f32(got[i]);
        CHECK(seed_unwritten(gf, ref, (size_t)n) == 0);
        seed_check_tol("exp f16", gf, ref, (size_t)n, 0, 1.0 / 512);
        free(gf);
    }
    CHECK_OK(alloy_kernel_file_set_template(sk->file, "T=float32"));
    free(got);
    alloy_array_free(out);
    alloy_array_free(in);
    alloy_launch_free(l);
    free(x);
    free(xf);
    free(ref);
}

static void test_exp(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("exp.metal", &sk)) return;
    alloy_kernel_file_template t;
    CHECK(alloy_kernel_file_n_templates(sk.file) == 1 &&
          alloy_kernel_file_template_at(sk.file, 0, &t) == ALLOY_OK && !strcmp(t.name, "T") &&
          t.kind == ALLOY_KERNEL_FILE_TEMPLATE_DTYPE && t.dtype == ALLOY_FLOAT32);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        run_exp_f32(dev, &sk, sizes[s], (uint32_t)sizes[s]);
        run_exp_f32(dev, &sk, sizes[s], seed_round_up((uint32_t)sizes[s], 256));
    }
    run_exp_f16(dev, &sk, 1);
    run_exp_f16(dev, &sk, 1000);
    seed_kernel_free(&sk);
}

int main(void) {
    harness_seed();
    RUN(test_soft_cap);
    RUN(test_memcpy);
    RUN(test_soft_cap_vec4);
    RUN(test_memcpy_vec4);
    RUN(test_exp);
    return harness_finish();
}
