/* cpu_gemm_vs_numpy.c — run by hand: the catalog's CPU GEMM kernel
 * (src/ops/linalg/kernels/matmul_cpu.metal) against NumPy's `a @ b`
 * (OpenBLAS) in the same run, on the CPU device.
 *
 * Build (after the library, from the repository root):
 *   cc -O2 -std=c11 -Iinclude -Isrc -Ibench -Itests bench/experiments/cpu_gemm_vs_numpy.c \
 *      build/liballoy.a -lm -lpthread -ldl -o build/cpu_gemm_vs_numpy
 * Run:
 *   build/cpu_gemm_vs_numpy [N|MxNxK] [float32|float64|bfloat16|float16] [reps] [huge]
 *   (huge: the arrays live in memory advised to use transparent huge pages,
 *   as NumPy's large arrays do; otherwise alloy allocates them.)
 *   (ALLOY_BENCH_PYTHON names a Python with NumPy; default python3.)
 * Times are medians over 3 rounds of `reps` runs (each after two warm-up
 * runs), alloy's and NumPy's rounds alternating; alloy's include the launch
 * and the wait for the stream. The peer gets the same shapes and
 * dtype (bfloat16/float16: NumPy has no bfloat16 GEMM, so the peer runs
 * float32, the rate a bfloat16 kernel is compared with). The launch is the
 * op's: tiles of 64 x 128 and one thread per tile. */
#define _GNU_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "kernel_util.h" /* reference half/bfloat conversions */
#include "ops/catalog.h"

#define MATMUL_FILE "src/ops/linalg/kernels/matmul_cpu.metal"

/* Host memory for an array: alloy's own allocation, or (huge = 1) a
 * 2 MiB-aligned buffer advised to use transparent huge pages, as NumPy does
 * for its large arrays, wrapped as an alloy array. */
static int use_huge;

static void free_huge(void *p) { free(p); }

static alloy_array *new_array(alloy_device *dev, alloy_dtype dt, int64_t rows, int64_t cols,
                              const void *init) {
    int64_t shape[2] = {rows, cols};
    size_t bytes = (size_t)(rows * cols) * alloy_dtype_size(dt);
    alloy_array *a = NULL;
    if (!use_huge) {
        if (init) BENCH_CHECK(alloy_array_from_host(dev, dt, 2, shape, init, &a));
        else BENCH_CHECK(alloy_array_new(dev, dt, 2, shape, &a));
        return a;
    }
    size_t huge = (size_t)2 << 20, rounded = (bytes + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, rounded);
    if (!p) exit(1);
    madvise(p, rounded, MADV_HUGEPAGE);
    memset(p, 0, rounded);
    if (init) memcpy(p, init, bytes);
    BENCH_CHECK(alloy_array_wrap(dev, p, dt, 2, shape, NULL, 0, free_huge, p, &a));
    return a;
}

static alloy_array *random_array(alloy_device *dev, alloy_dtype dt, int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    void *h = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) {
        double x = rand() / (double)RAND_MAX * 2 - 1;
        switch (dt) {
        case ALLOY_FLOAT64: ((double *)h)[i] = x; break;
        case ALLOY_FLOAT16: ((uint16_t *)h)[i] = ku_f16_bits(x); break;
        case ALLOY_BFLOAT16: ((uint16_t *)h)[i] = ku_bf16_bits(x); break;
        default: ((float *)h)[i] = (float)x; break;
        }
    }
    alloy_array *a = new_array(dev, dt, rows, cols, h);
    free(h);
    return a;
}

/* Runs NumPy's a @ b `reps` times (after two warm-ups) and appends the
 * times (seconds) to t[*n]; returns 0 when NumPy could not be run. */
static int numpy_times(int64_t m, int64_t n, int64_t k, const char *dtype, int reps, double *t,
                       int *count) {
    const char *py = getenv("ALLOY_BENCH_PYTHON");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -c \"import numpy as np, time\n"
             "a = np.random.rand(%lld, %lld).astype('%s'); b = np.random.rand(%lld, %lld).astype('%s')\n"
             "a @ b; a @ b\n"
             "for _ in range(%d):\n"
             "    s = time.perf_counter(); a @ b; print(time.perf_counter() - s)\"",
             py && *py ? py : "python3", (long long)m, (long long)k, dtype, (long long)k,
             (long long)n, dtype, reps);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int got = 0;
    double s;
    while (got < reps && fscanf(p, "%lf", &s) == 1) t[(*count)++] = s, got++;
    pclose(p);
    return got == reps;
}

int main(int argc, char **argv) {
    long long m = 1024, n = 1024, k = 1024;
    if (argc > 1 && sscanf(argv[1], "%lldx%lldx%lld", &m, &n, &k) != 3) m = n = k = atoll(argv[1]);
    alloy_dtype dt = ALLOY_FLOAT32;
    if (argc > 2 && alloy_dtype_parse(argv[2], &dt) != ALLOY_OK) {
        fprintf(stderr, "unknown dtype %s\n", argv[2]);
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 9;
    if (reps < 1) reps = 1;
    use_huge = argc > 4 && !strcmp(argv[4], "huge");
    alloy_device *dev = NULL;
    BENCH_CHECK(alloy_device_get("cpu", &dev));
    alloy_dtype out_dt = dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    alloy_array *in[2] = {random_array(dev, dt, m, k), random_array(dev, dt, k, n)};
    alloy_array *c = new_array(dev, out_dt, m, n, NULL);
    alloy_kernel *kern = NULL;
    BENCH_CHECK(alloy_catalog_kernel(MATMUL_FILE, &kern));
    const int64_t tm = 64, tn = 128;
    alloy_launch *l = NULL;
    BENCH_CHECK(alloy_launch_new(&l));
    BENCH_CHECK(alloy_launch_add_output_array(l, c));
    const char *names[] = {"M", "N", "K", "batch", "sa_b", "sa_m", "sa_k", "sb_b",
                           "sb_k", "sb_n", "sc_b", "sc_m", "tile_m", "tile_n", "a_off", "b_off", "c_off"};
    const int64_t vals[] = {m, n, k, 1, m * k, k, 1, k * n, n, 1, m * n, n, tm, tn, 0, 0, 0};
    for (int i = 0; i < 17; i++) BENCH_CHECK(alloy_launch_set_constant_int(l, names[i], ALLOY_INT64, vals[i]));
    BENCH_CHECK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, 1.0));
    BENCH_CHECK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, 0.0));
    BENCH_CHECK(alloy_launch_set_grid(l, (uint32_t)((n + tn - 1) / tn), (uint32_t)((m + tm - 1) / tm), 1));
    BENCH_CHECK(alloy_launch_set_threadgroup(l, 1, 1, 1));
    alloy_stream *s = NULL;
    BENCH_CHECK(alloy_stream_default(dev, &s));
    /* Rounds of alloy then NumPy, so that both see the same machine (its
     * speed drifts when it is shared). */
    const int rounds = 3;
    double *t = malloc((size_t)(reps * rounds) * sizeof *t);
    double *tnp_all = malloc((size_t)(reps * rounds) * sizeof *tnp_all);
    int nt = 0, nn = 0, have_np = 1;
    const char *np_dt = dt == ALLOY_FLOAT64 ? "float64" : "float32";
    for (int round = 0; round < rounds; round++) {
        for (int r = -2; r < reps; r++) {
            alloy_array *outs[1] = {NULL};
            double t0 = bench_now();
            BENCH_CHECK(alloy_kernel_apply(kern, 2, in, l, s, outs));
            BENCH_CHECK(alloy_stream_synchronize(s));
            if (r >= 0) t[nt++] = bench_now() - t0;
            alloy_array_free(outs[0]);
        }
        if (have_np) have_np = numpy_times(m, n, k, np_dt, reps, tnp_all, &nn);
    }
    double tbest = t[0];
    for (int r = 1; r < nt; r++) tbest = t[r] < tbest ? t[r] : tbest;
    double ta = bench_median(t, nt), flop = 2.0 * (double)m * (double)n * (double)k;
    printf("%lldx%lldx%lld %s -> %s, medians of %d runs in %d rounds\n", m, n, k,
           alloy_dtype_name(dt), alloy_dtype_name(out_dt), reps * rounds, rounds);
    printf("alloy matmul_cpu: %8.3f ms  %7.1f GFLOP/s  (best run %.1f GFLOP/s)\n", ta * 1e3,
           flop / ta * 1e-9, flop / tbest * 1e-9);
    if (have_np) {
        double tnp = bench_median(tnp_all, nn);
        printf("numpy %s a @ b: %8.3f ms  %7.1f GFLOP/s\n", np_dt, tnp * 1e3, flop / tnp * 1e-9);
        printf("ratio alloy / numpy (throughput): %.2fx\n", tnp / ta);
    } else {
        printf("numpy: not available (set ALLOY_BENCH_PYTHON to a Python with NumPy)\n");
    }
    free(tnp_all);
    free(t);
    alloy_launch_free(l);
    alloy_array_free(c);
    alloy_array_free(in[0]);
    alloy_array_free(in[1]);
    return 0;
}
