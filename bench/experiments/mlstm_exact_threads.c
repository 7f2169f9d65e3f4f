/* mlstm_exact_threads.c — the exact mLSTM backward kernel's time against its
 * threads per (sequence, head) (ALLOY_MLSTM_EXACT_NT), float32, 7B-model
 * heads (DHQK 256, DHHV 512) at a length short enough to time: the kernel is
 * serial along the sequence and memory-bound on its per-token passes over the
 * state, so more threads per threadgroup mean more loads in flight. Not part
 * of the build; the device is ALLOY_DEVICE (default cuda):
 *   cc -O2 -Iinclude -Isrc bench/experiments/mlstm_exact_threads.c build-gpu/liballoy.a -lpthread -ldl -lm \
 *      -o /tmp/met
 *   ALLOY_MLSTM_EXACT_NT=512 /tmp/met [B NH S] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "alloy/alloy.h"
#include "alloy/mlstm.h"

#define OK(x)                                                                                                  \
    do {                                                                                                       \
        if ((x) != ALLOY_OK) {                                                                                 \
            fprintf(stderr, "%s: %s\n", #x, alloy_last_error());                                              \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

static alloy_array *random_array(alloy_device *dev, int nd, const int64_t *shape, float lo, float hi) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t e = 0; e < n; e++) x[e] = lo + (hi - lo) * ((float)rand() / (float)RAND_MAX);
    alloy_array *a = NULL;
    OK(alloy_array_from_host(dev, ALLOY_FLOAT32, nd, shape, x, &a));
    free(x);
    return a;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const int64_t B = argc > 1 ? atoll(argv[1]) : 1, NH = argc > 2 ? atoll(argv[2]) : 8,
                  S = argc > 3 ? atoll(argv[3]) : 512, DK = 256, DV = 512;
    const char *dname = getenv("ALLOY_DEVICE");
    alloy_device *dev = NULL;
    OK(alloy_device_get(dname && *dname ? dname : "cuda", &dev));
    const int64_t s_qk[4] = {B, NH, S, DK}, s_v[4] = {B, NH, S, DV}, s_g[3] = {B, NH, S};
    alloy_array *q = random_array(dev, 4, s_qk, -1, 1), *k = random_array(dev, 4, s_qk, -1, 1);
    alloy_array *v = random_array(dev, 4, s_v, -1, 1), *dh = random_array(dev, 4, s_v, -1, 1);
    alloy_array *i = random_array(dev, 3, s_g, -3, 3), *f = random_array(dev, 3, s_g, -3, 6);
    alloy_array *g[5] = {NULL};
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {   /* the first call compiles */
        const double t0 = now();
        OK(alloy_mlstm_chunkwise_backward_with_method(q, k, v, i, f, NULL, NULL, NULL, NULL, dh, NULL, NULL, NULL, 0,
                                                      1e-6, ALLOY_MLSTM_BACKWARD_EXACT, NULL, &g[0], &g[1], &g[2],
                                                      &g[3], &g[4], NULL, NULL, NULL));
        OK(alloy_device_synchronize(dev));
        const double t = now() - t0;
        if (rep > 0 && t < best) best = t;
        for (int e = 0; e < 5; e++) alloy_array_free(g[e]), g[e] = NULL;
    }
    const char *nt = getenv("ALLOY_MLSTM_EXACT_NT");
    printf("exact backward float32 B %lld NH %lld S %lld DHQK %lld DHHV %lld, NT %s: %.3f ms (%.2f us per token)\n",
           (long long)B, (long long)NH, (long long)S, (long long)DK, (long long)DV, nt ? nt : "256", best * 1e3,
           best * 1e6 / (double)S);
    alloy_array *all[6] = {q, k, v, dh, i, f};
    for (int e = 0; e < 6; e++) alloy_array_free(all[e]);
    return 0;
}
