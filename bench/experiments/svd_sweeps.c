/* svd_sweeps.c — counts the Jacobi sweeps svd_tg's paths take on random
 * float32 matrices (standard normal entries), on the CPU backend: the
 * iteration is deterministic, so a matrix took k sweeps when max_sweeps = k
 * gives info 0 and k - 1 gives info 2. Prints, per path, the histogram of
 * sweeps and the barriers a matrix costs in the sweeps (COLS: NP - 1 per
 * sweep plus one at its end; SMEM: N' - 1 per sweep plus two for the
 * sweep's maximum). Not part of the build:
 *   cc -O2 -Iinclude -Isrc bench/experiments/svd_sweeps.c build/liballoy.a -lpthread -ldl -lm -o /tmp/svd_sweeps
 *   /tmp/svd_sweeps [N [COUNT]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "ops/linalg/svd_internal.h"

#define OK(x) do { alloy_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, alloy_last_error()); exit(1); } } while (0)

static double normal(unsigned long long *st) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
        u[i] = ((double)(*st >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 64, count = argc > 2 ? atoi(argv[2]) : 64;
    alloy_device *dev;
    OK(alloy_device_get("cpu", &dev));
    float *h = malloc(sizeof(float) * (size_t)count * n * n);
    unsigned long long st = 12345;
    for (long e = 0; e < (long)count * n * n; e++) h[e] = (float)normal(&st);
    const int64_t shape[3] = {count, n, n};
    alloy_array *a = NULL;
    OK(alloy_array_from_host(dev, ALLOY_FLOAT32, 3, shape, h, &a));
    const alloy_svd_path paths[2] = {ALLOY_SVD_TG_SMEM, ALLOY_SVD_TG_COLS};
    const char *names[2] = {"TG_SMEM", "TG_COLS"};
    for (int p = 0; p < 2; p++) {
        if (paths[p] == ALLOY_SVD_TG_COLS && n > 128) continue;
        int *took = calloc((size_t)count, sizeof(int)), hist[31] = {0};
        int32_t *info = malloc(sizeof(int32_t) * (size_t)count);
        for (int k = 1; k <= 30; k++) {
            alloy_svd_options o;
            alloy_svd_options_init(&o);
            o.compute_uv = 0;
            o.max_sweeps = k;
            alloy_array *s = NULL, *inf = NULL;
            OK(alloy_svd_with_path(a, &o, paths[p], NULL, NULL, &s, NULL, &inf));
            OK(alloy_array_copy_to_host(inf, info, sizeof(int32_t) * (size_t)count));
            int left = 0;
            for (int b = 0; b < count; b++) {
                if (!took[b] && info[b] == 0) took[b] = k;
                left += !took[b];
            }
            alloy_array_free(s);
            alloy_array_free(inf);
            if (!left) break;
        }
        double mean = 0;
        for (int b = 0; b < count; b++) {
            hist[took[b]]++;
            mean += took[b];
        }
        mean /= count;
        const int np = paths[p] == ALLOY_SVD_TG_COLS ? (n <= 32 ? 32 : n <= 64 ? 64 : 128) : n + (n & 1);
        const int per = paths[p] == ALLOY_SVD_TG_COLS ? np : np - 1 + 2;
        printf("%s %dx%d, %d matrices: sweeps", names[p], n, n, count);
        for (int k = 0; k <= 30; k++)
            if (hist[k]) printf("  %d: %d", k, hist[k]);
        printf("  (0: not converged in 30); mean %.2f, barriers in the sweeps %.0f\n", mean, mean * per);
        free(took);
        free(info);
    }
    alloy_array_free(a);
    free(h);
    return 0;
}
