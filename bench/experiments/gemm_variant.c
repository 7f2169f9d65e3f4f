/* gemm_variant.c — times variants of a GEMM kernel file with the catalog's
 * GEMM interface (launch constants M N K, strides, offsets, alpha, beta;
 * templates TIN TOUT ACC), side by side in one process: how the kernels under
 * src/ops/linalg/kernels/ are tuned. Not part of the build; on the GPU
 * machine:
 *   cc -O2 -Iinclude bench/experiments/gemm_variant.c build-gpu/liballoy.a -lpthread -ldl -lm -o /tmp/gv
 *   /tmp/gv DTYPE M N K BATCH TILE_M TILE_N THREADS SMEM FILE.metal [FILE.metal ...]
 * (FILE.metal@TILE_M,TILE_N,THREADS,SMEM gives one file its own launch shape;
 * GV_PASSES sets the TF32 kernel's PASSES);
 * prints, per file, the median time of 9 batches and TFLOP/s, and the max
 * difference from the first file's result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloy/alloy.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    s[n] = 0;
    fclose(f);
    return s;
}
#define OK(x) do { alloy_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, alloy_last_error()); exit(1); } } while (0)

int main(int argc, char **argv) {
    if (argc < 11) { fprintf(stderr, "usage: see the file's comment\n"); return 2; }
    alloy_dtype dt = !strcmp(argv[1], "bf16") ? ALLOY_BFLOAT16 : !strcmp(argv[1], "f16") ? ALLOY_FLOAT16
                   : !strcmp(argv[1], "f64") ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    long M = atol(argv[2]), N = atol(argv[3]), K = atol(argv[4]), B = atol(argv[5]);
    long tm = atol(argv[6]), tn = atol(argv[7]), threads = atol(argv[8]), smem = atol(argv[9]);
    alloy_device *dev;
    OK(alloy_device_get("auto", &dev));
    alloy_stream *st;
    OK(alloy_stream_default(dev, &st));
    int64_t sa[3] = {B, M, K}, sb[3] = {B, K, N}, sc[3] = {B, M, N};
    size_t es = alloy_dtype_size(dt);
    void *ha = malloc((size_t)(B * M * K) * es), *hb = malloc((size_t)(B * K * N) * es);
    unsigned s = 12345;
    for (long i = 0; i < B * M * K; i++) { s = s * 1103515245u + 12345u; double x = (s >> 8) / 16777216.0 - 0.5;
        if (es == 2) { float f = (float)x; unsigned u; memcpy(&u, &f, 4); ((unsigned short *)ha)[i] = dt == ALLOY_BFLOAT16 ? (unsigned short)(u >> 16) : 0x3c00; }
        else if (es == 8) ((double *)ha)[i] = x; else ((float *)ha)[i] = (float)x; }
    for (long i = 0; i < B * K * N; i++) { s = s * 1103515245u + 12345u; double x = (s >> 8) / 16777216.0 - 0.5;
        if (es == 2) { float f = (float)x; unsigned u; memcpy(&u, &f, 4); ((unsigned short *)hb)[i] = dt == ALLOY_BFLOAT16 ? (unsigned short)(u >> 16) : 0x3c00; }
        else if (es == 8) ((double *)hb)[i] = x; else ((float *)hb)[i] = (float)x; }
    alloy_array *a, *b;
    OK(alloy_array_from_host(dev, dt, 3, sa, ha, &a));
    OK(alloy_array_from_host(dev, dt, 3, sb, hb, &b));
    float *first = NULL, *cur = malloc((size_t)(B * M * N) * 4);
    for (int f = 10; f < argc; f++) {
        /* FILE@TILE_M,TILE_N,THREADS,SMEM overrides the launch shape for one file */
        char *at = strchr(argv[f], '@');
        if (at) {
            *at = 0;
            sscanf(at + 1, "%ld,%ld,%ld,%ld", &tm, &tn, &threads, &smem);
        }
        char *text = slurp(argv[f]);
        alloy_kernel_file *kf;
        OK(alloy_kernel_file_parse(text, strlen(text), argv[f], &kf));
        alloy_kernel *k;
        OK(alloy_kernel_file_new_kernel(kf, &k));
        alloy_array *c;
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 3, sc, &c));
        alloy_launch *l;
        OK(alloy_launch_new(&l));
        OK(alloy_launch_add_output_array(l, c));
        OK(alloy_launch_add_template_dtype(l, "TIN", dt));
        OK(alloy_launch_add_template_dtype(l, "TOUT", ALLOY_FLOAT32));
        if (strstr(text, "template: PASSES")) /* the TF32 kernel: GV_PASSES=1 or 3 (default) */
            OK(alloy_launch_add_template_int(l, "PASSES", getenv("GV_PASSES") ? atoi(getenv("GV_PASSES")) : 3));
        if (strstr(text, "template: ACC")) OK(alloy_launch_add_template_dtype(l, "ACC", dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32));
        if (smem) OK(alloy_launch_set_threadgroup_memory(l, (size_t)smem));
        const char *names[] = {"M", "N", "K", "batch", "sa_b", "sa_m", "sa_k", "sb_b", "sb_k", "sb_n", "sc_b", "sc_m", "tile_m", "tile_n", "a_off", "b_off", "c_off"};
        long vals[] = {M, N, K, B, M * K, K, 1, K * N, N, 1, M * N, N, tm, tn, 0, 0, 0};
        for (int i = 0; i < 17; i++) OK(alloy_launch_set_constant_int(l, names[i], ALLOY_INT64, vals[i]));
        OK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, 1.0));
        OK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, 0.0));
        OK(alloy_launch_set_grid(l, (uint32_t)((N + tn - 1) / tn * threads), (uint32_t)((M + tm - 1) / tm), (uint32_t)B));
        OK(alloy_launch_set_threadgroup(l, (uint32_t)threads, 1, 1));
        alloy_array *ins[2] = {a, b}, *res;
        alloy_compile_result cr;
        memset(&cr, 0, sizeof cr);
        if (alloy_kernel_compile(k, 2, ins, l, dev, &cr) == ALLOY_OK && cr.report) printf("%s: %s\n", argv[f], cr.report);
        alloy_compile_result_clear(&cr);
        OK(alloy_kernel_apply(k, 2, ins, l, st, &res));
        alloy_array_free(res);
        OK(alloy_stream_synchronize(st));
        double flops = 2.0 * B * M * N * K, ts[9];
        int per = (int)(0.05 / (flops / 4e14)) + 1;
        if (per > 100) per = 100;
        for (int r = 0; r < 9; r++) {
            double t0 = now_s();
            for (int i = 0; i < per; i++) { OK(alloy_kernel_apply(k, 2, ins, l, st, &res)); alloy_array_free(res); }
            OK(alloy_stream_synchronize(st));
            ts[r] = (now_s() - t0) / per;
        }
        qsort(ts, 9, sizeof ts[0], cmp);
        OK(alloy_array_copy_to_host(c, cur, (size_t)(B * M * N) * 4));
        double diff = 0;
        if (!first) { first = cur; cur = malloc((size_t)(B * M * N) * 4); }
        else for (long i = 0; i < B * M * N; i++) diff = fmax(diff, fabs(first[i] - cur[i]));
        printf("%-60s %9.3f ms %8.1f TFLOP/s  maxdiff %.3g\n", argv[f], ts[4] * 1e3, flops / ts[4] / 1e12, diff);
        fflush(stdout);
        alloy_launch_free(l);
        alloy_array_free(c);
        alloy_kernel_free(k);
        alloy_kernel_file_free(kf);
        free(text);
    }
    return 0;
}
