/* mlstm_split_gate_range.c — how accurate the chunk-parallel mLSTM backward
 * (ALLOY_MLSTM_BWD_PATH=split) is as the gates' range grows: the question
 * behind making it the default (the exact kernel is sequential and slow at
 * long sequences). For each cap T, gate pre-activations uniform in [-T, T]
 * (input) and [-T, T] (forget) — xLSTM 7B soft-caps both at 15 — plus every
 * seventh token with q scaled by 1e-3 (|q^.n| under the floor exp(-m) there),
 * q, k, v, dh uniform in [-1, 1], initial states and final cotangents given.
 * The reference is alloy's float64 backward of the same rounded inputs (the
 * exact kernel, which test_mlstm_backward checks against finite
 * differences). Prints per dtype and cap the worst over seeds of each
 * gradient's max |error| / max |reference| (the scale floored at 1e-2 of the
 * largest gradient, as the test measures). Not part of the build; the device
 * is ALLOY_DEVICE (default cpu):
 *   cc -O2 -Iinclude -Isrc bench/experiments/mlstm_split_gate_range.c build/liballoy.a -lpthread -ldl -lm \
 *      -o /tmp/msg
 *   ALLOY_MLSTM_BWD_PATH=split /tmp/msg [SEEDS [S]] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/mlstm.h"

#define OK(x)                                                                                                  \
    do {                                                                                                       \
        if ((x) != ALLOY_OK) {                                                                                 \
            fprintf(stderr, "%s: %s\n", #x, alloy_last_error());                                              \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

enum { NPART = 8 };
static const char *PART[NPART] = {"dq", "dk", "dv", "di", "df", "dC0", "dn0", "dm0"};

static double uniform(double a, double b) { return a + (b - a) * ((double)rand() / RAND_MAX); }

/* x rounded to bfloat16 (nearest even), as a double */
static double round_bf16(double x) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static alloy_array *array_of(alloy_device *dev, alloy_dtype dt, int nd, const int64_t *shape, const double *x) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    void *raw = malloc((size_t)n * 8 + 8);
    for (int64_t e = 0; e < n; e++) {
        if (dt == ALLOY_FLOAT64) ((double *)raw)[e] = x[e];
        else if (dt == ALLOY_FLOAT32) ((float *)raw)[e] = (float)x[e];
        else { /* bfloat16: x is already representable */
            float f = (float)x[e];
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)raw)[e] = (uint16_t)(u >> 16);
        }
    }
    alloy_array *a = NULL;
    OK(alloy_array_from_host(dev, dt, nd, shape, raw, &a));
    free(raw);
    return a;
}

static void values_of(alloy_array *a, double *out) {
    const int64_t n = alloy_array_size(a);
    const alloy_dtype dt = alloy_array_dtype(a);
    void *raw = malloc(alloy_array_nbytes(a) + 8);
    OK(alloy_array_copy_to_host(a, raw, alloy_array_nbytes(a)));
    for (int64_t e = 0; e < n; e++) {
        if (dt == ALLOY_FLOAT64) out[e] = ((double *)raw)[e];
        else if (dt == ALLOY_FLOAT32) out[e] = ((float *)raw)[e];
        else {
            uint32_t u = (uint32_t)((uint16_t *)raw)[e] << 16;
            float f;
            memcpy(&f, &u, 4);
            out[e] = f;
        }
    }
    free(raw);
}

typedef struct {
    int64_t NH, S, DK, DV;
    double *x[NPART + 1]; /* q k v i f C0 n0 m0, then dh */
    int64_t len[NPART + 1];
    double *dC, *dn, *dm;
} problem;

/* The gradients of problem p in dtype dt (states float64 for float64, else
 * float32), into g[part] (len[part] values each). */
static void backward(alloy_device *dev, const problem *p, alloy_dtype dt, int chunk, double **g) {
    const alloy_dtype sdt = dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    const int64_t sq[4] = {1, p->NH, p->S, p->DK}, sv[4] = {1, p->NH, p->S, p->DV}, sg[3] = {1, p->NH, p->S};
    const int64_t sc[4] = {1, p->NH, p->DK, p->DV}, sn[3] = {1, p->NH, p->DK}, sm[3] = {1, p->NH, 1};
    alloy_array *in[NPART + 1] = {
        array_of(dev, dt, 4, sq, p->x[0]),  array_of(dev, dt, 4, sq, p->x[1]),  array_of(dev, dt, 4, sv, p->x[2]),
        array_of(dev, dt, 3, sg, p->x[3]),  array_of(dev, dt, 3, sg, p->x[4]),  array_of(dev, sdt, 4, sc, p->x[5]),
        array_of(dev, sdt, 3, sn, p->x[6]), array_of(dev, sdt, 3, sm, p->x[7]), array_of(dev, dt, 4, sv, p->x[8])};
    alloy_array *dC = array_of(dev, sdt, 4, sc, p->dC), *dn = array_of(dev, sdt, 3, sn, p->dn),
                *dm = array_of(dev, sdt, 3, sm, p->dm);
    alloy_array *out[NPART] = {NULL};
    OK(alloy_mlstm_chunkwise_backward(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], NULL, in[8], dC, dn,
                                      dm, chunk, 1e-6, NULL, &out[0], &out[1], &out[2], &out[3], &out[4], &out[5],
                                      &out[6], &out[7]));
    OK(alloy_device_synchronize(dev));
    for (int k = 0; k < NPART; k++) {
        values_of(out[k], g[k]);
        alloy_array_free(out[k]);
    }
    for (int k = 0; k <= NPART; k++) alloy_array_free(in[k]);
    alloy_array_free(dC), alloy_array_free(dn), alloy_array_free(dm);
}

int main(int argc, char **argv) {
    const int seeds = argc > 1 ? atoi(argv[1]) : 10;
    const int64_t S = argc > 2 ? atoll(argv[2]) : 200;
    const char *dname = getenv("ALLOY_DEVICE");
    alloy_device *dev = NULL;
    OK(alloy_device_get(dname && *dname ? dname : "cpu", &dev));
    const double caps[] = {5, 10, 15, 20, 30, 60};
    const alloy_dtype dts[2] = {ALLOY_FLOAT32, ALLOY_BFLOAT16};
    problem p = {.NH = 2, .S = S, .DK = 16, .DV = 24};
    const int64_t L[NPART + 1] = {p.NH * S * p.DK, p.NH * S * p.DK, p.NH * S * p.DV, p.NH * S,     p.NH * S,
                                  p.NH * p.DK * p.DV, p.NH * p.DK, p.NH,           p.NH * S * p.DV};
    for (int k = 0; k <= NPART; k++) p.len[k] = L[k], p.x[k] = malloc(sizeof(double) * (size_t)L[k]);
    p.dC = malloc(sizeof(double) * (size_t)L[5]), p.dn = malloc(sizeof(double) * (size_t)L[6]);
    p.dm = malloc(sizeof(double) * (size_t)L[7]);
    double *ref[NPART], *got[NPART];
    for (int k = 0; k < NPART; k++) ref[k] = malloc(sizeof(double) * (size_t)L[k]), got[k] = malloc(sizeof(double) * (size_t)L[k]);
    printf("%-9s %5s", "dtype", "cap");
    for (int k = 0; k < NPART; k++) printf(" %9s", PART[k]);
    printf("\n");
    for (int di = 0; di < 2; di++)
        for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
            double worst[NPART] = {0};
            for (int sd = 0; sd < seeds; sd++) {
                srand(1000u * (unsigned)ci + (unsigned)sd + 1u);
                for (int k = 0; k <= NPART; k++)
                    for (int64_t e = 0; e < L[k]; e++) p.x[k][e] = uniform(-1, 1);
                for (int64_t e = 0; e < L[3]; e++) {
                    p.x[3][e] = uniform(-caps[ci], caps[ci]);
                    p.x[4][e] = uniform(-caps[ci], caps[ci]);
                }
                for (int64_t r = 0; r < p.NH * S; r++)
                    if (r % 7 == 4)
                        for (int64_t d = 0; d < p.DK; d++) p.x[0][r * p.DK + d] *= 1e-3;
                for (int64_t e = 0; e < L[5]; e++) p.dC[e] = uniform(-1, 1);
                for (int64_t e = 0; e < L[6]; e++) p.dn[e] = uniform(-1, 1);
                for (int64_t e = 0; e < L[7]; e++) p.dm[e] = uniform(-1, 1);
                /* the inputs in the dtype (states and cotangents float32) */
                for (int k = 0; k <= NPART; k++)
                    for (int64_t e = 0; e < L[k]; e++) {
                        const int state = k >= 5 && k <= 7;
                        p.x[k][e] = dts[di] == ALLOY_BFLOAT16 && !state ? round_bf16(p.x[k][e]) : (float)p.x[k][e];
                    }
                for (int64_t e = 0; e < L[5]; e++) p.dC[e] = (float)p.dC[e];
                for (int64_t e = 0; e < L[6]; e++) p.dn[e] = (float)p.dn[e];
                for (int64_t e = 0; e < L[7]; e++) p.dm[e] = (float)p.dm[e];
                backward(dev, &p, ALLOY_FLOAT64, 64, ref);
                backward(dev, &p, dts[di], 64, got);
                double scale = 0;
                for (int k = 0; k < NPART; k++)
                    for (int64_t e = 0; e < L[k]; e++) scale = fmax(scale, fabs(ref[k][e]));
                for (int k = 0; k < NPART; k++) {
                    double err = 0, mag = 0;
                    for (int64_t e = 0; e < L[k]; e++) {
                        err = isfinite(got[k][e]) ? fmax(err, fabs(got[k][e] - ref[k][e])) : INFINITY;
                        mag = fmax(mag, fabs(ref[k][e]));
                    }
                    mag = fmax(mag, 1e-2 * scale);
                    worst[k] = fmax(worst[k], err / (mag > 0 ? mag : 1));
                    if (getenv("MSG_VERBOSE") && err / (mag > 0 ? mag : 1) > 1e-2) {
                        int64_t at = 0;
                        for (int64_t e = 0; e < L[k]; e++)
                            if (fabs(got[k][e] - ref[k][e]) == err) at = e;
                        printf("  seed %d %s rel %.3g at %lld: %.6g vs %.6g (max %.3g)\n", sd, PART[k],
                               err / (mag > 0 ? mag : 1), (long long)at, got[k][at], ref[k][at], mag);
                    }
                }
            }
            printf("%-9s %5.0f", alloy_dtype_name(dts[di]), caps[ci]);
            for (int k = 0; k < NPART; k++) printf(" %9.2e", worst[k]);
            printf("\n");
            fflush(stdout);
        }
    return 0;
}
