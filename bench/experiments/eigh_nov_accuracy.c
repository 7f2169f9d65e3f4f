/* eigh_nov_accuracy.c — compares eigh's COLS paths for n <= 32 on the CPU
 * backend (the GPU kernel bodies run there): `cols` (V accumulated in the
 * sweeps), `colsnov` (V from G's orthonormalised columns) and the register
 * path, float32, on the matrix kinds of tests/test_linalg_eigh.c (random,
 * condition 1e3 and 1e6, graded, repeated, clustered, rank-deficient, zero,
 * identity, near-diagonal, NaN) at n = 17, 24, 31, 32 over several seeds.
 * Prints per path and kind the largest residual ||AV - VW||_F / ||A||_F,
 * Frobenius and spectral ||V^T V - I|| and eigenvalue error / ||A||_F, in
 * units of n u, and the sweeps a matrix took (the iteration is
 * deterministic, so a matrix took k sweeps when max_sweeps = k gives info 0
 * and k - 1 does not). Not part of the build:
 *   cc -O2 -Iinclude -Isrc bench/experiments/eigh_nov_accuracy.c build/liballoy.a -lpthread -ldl -lm -o /tmp/ena
 *   /tmp/ena [SEEDS [BATCH]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "ops/linalg/eigh_internal.h"

#define OK(x) do { alloy_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, alloy_last_error()); exit(1); } } while (0)

static unsigned long long st = 1;
static double uniform(double lo, double hi) {
    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (((double)(st >> 11) + 0.5) / 9007199254740992.0);
}

enum { K_RANDOM, K_COND3, K_COND6, K_GRADED, K_REPEATED, K_CLUSTER, K_RANKDEF, K_ZERO, K_IDENTITY, K_NEARDIAG,
       K_NAN, K_COUNT };
static const char *KNAME[K_COUNT] = {"random", "cond1e3", "cond1e6", "graded", "repeated", "cluster",
                                     "rankdef", "zero", "identity", "neardiag", "nan"};

/* Q diag(lambda) Q^T in long double, Q a product of n random Householder reflections */
static void from_spectrum(int n, const long double *lam, long double *A) {
    long double v[32], w[32];
    for (int e = 0; e < n * n; e++) A[e] = 0;
    for (int i = 0; i < n; i++) A[i * n + i] = lam[i];
    for (int r = 0; r < n && n > 1; r++) {
        long double nv = 0, alpha = 0;
        for (int i = 0; i < n; i++) nv += (v[i] = uniform(-1, 1)) * v[i];
        nv = sqrtl(nv);
        for (int i = 0; i < n; i++) v[i] /= nv;
        for (int i = 0; i < n; i++) {
            long double s = 0;
            for (int j = 0; j < n; j++) s += A[i * n + j] * v[j];
            w[i] = s;
            alpha += v[i] * s;
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++)
                A[i * n + j] = A[j * n + i] = A[i * n + j] - 2 * v[i] * w[j] - 2 * w[i] * v[j] + 4 * alpha * v[i] * v[j];
    }
}

/* matrix of a kind (float32 values) and, where known, its spectrum ascending (else NaN) */
static void make(int n, int kind, float *A, long double *ref) {
    long double lam[32], L[32 * 32];
    for (int i = 0; i < n; i++) ref[i] = NAN;
    if (kind == K_RANDOM || kind == K_NAN || kind == K_NEARDIAG) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++)
                A[i * n + j] = A[j * n + i] =
                    (float)(kind == K_NEARDIAG ? (i == j ? uniform(-1, 1) : 1e-3 * uniform(-1, 1)) : uniform(-1, 1));
        if (kind == K_NAN) A[(2 * n / 3) * n + n / 3] = A[(n / 3) * n + 2 * n / 3] = NAN;
        return;
    }
    for (int i = 0; i < n; i++) {
        const long double f = (long double)i / (n - 1);
        switch (kind) {
        case K_COND3: lam[i] = powl(1e3L, -f); break;
        case K_COND6: lam[i] = powl(1e6L, -f); break;
        case K_GRADED: lam[i] = ldexpl(i % 2 ? -1.0L : 1.0L, -i); break;
        case K_REPEATED: lam[i] = i % 3 == 0 ? 2.0L : i % 3 == 1 ? -0.5L : 1.0L; break;
        case K_CLUSTER: lam[i] = i % 2 ? -1 - i * 1e-7L : 1 + i * 1e-7L; break;
        case K_RANKDEF: lam[i] = i % 2 ? 0.0L : uniform(-1, 1); break;
        case K_IDENTITY: lam[i] = 1; break;
        default: lam[i] = 0; break;
        }
    }
    if (kind == K_ZERO || kind == K_IDENTITY) {
        for (int e = 0; e < n * n; e++) A[e] = (e / n == e % n) ? (float)lam[0] : 0.0f;
    } else {
        from_spectrum(n, lam, L);
        for (int e = 0; e < n * n; e++) A[e] = (float)L[e];
    }
    for (int i = 0; i < n; i++) ref[i] = lam[i];
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && ref[k - 1] > ref[k]; k--) {
            const long double t = ref[k];
            ref[k] = ref[k - 1];
            ref[k - 1] = t;
        }
}

static long double spectral(int n, const long double *E) {
    long double x[32], y[32], lam = 0;
    for (int i = 0; i < n; i++) x[i] = 1 + 0.5L * uniform(-1, 1);
    for (int it = 0; it < 200; it++) {
        long double ny = 0;
        for (int i = 0; i < n; i++) {
            long double s = 0;
            for (int j = 0; j < n; j++) s += E[i * n + j] * x[j];
            y[i] = s;
            ny += s * s;
        }
        if (ny == 0) return 0;
        long double nx = 0;
        for (int i = 0; i < n; i++) nx += x[i] * x[i];
        lam = sqrtl(ny / nx);
        for (int i = 0; i < n; i++) x[i] = y[i] / sqrtl(ny);
    }
    return lam;
}

#define NPATH 3
static const alloy_eigh_path PATH[NPATH] = {ALLOY_EIGH_COLS, ALLOY_EIGH_COLS_NOV, ALLOY_EIGH_REG};
static const char *PNAME[NPATH] = {"cols", "colsnov", "reg"};

typedef struct stat {
    double res, orf, ors, ev;
    int smin, smax, cnt, bad;
    double ssum;
} stat;

static void run(alloy_device *dev, alloy_eigh_path path, int n, int batch, const float *A, int sweeps, float *w,
                float *v, int *info) {
    int64_t shape[3] = {batch, n, n};
    alloy_array *a = NULL, *W = NULL, *Vv = NULL, *I = NULL;
    OK(alloy_array_from_host(dev, ALLOY_FLOAT32, 3, shape, A, &a));
    alloy_eigh_options o;
    alloy_eigh_options_init(&o);
    o.max_sweeps = sweeps;
    OK(alloy_eigh_with_path(a, &o, path, NULL, &W, &Vv, &I));
    OK(alloy_array_copy_to_host(W, w, sizeof(float) * batch * n));
    OK(alloy_array_copy_to_host(Vv, v, sizeof(float) * batch * n * n));
    OK(alloy_array_copy_to_host(I, info, sizeof(int) * batch));
    alloy_array_free(a);
    alloy_array_free(W);
    alloy_array_free(Vv);
    alloy_array_free(I);
}

int main(int argc, char **argv) {
    const int seeds = argc > 1 ? atoi(argv[1]) : 3, batch = argc > 2 ? atoi(argv[2]) : 8;
    const int ns[] = {17, 24, 31, 32};
    alloy_device *dev = NULL;
    OK(alloy_device_get("cpu", &dev));
    static stat S[NPATH][K_COUNT];
    for (int p = 0; p < NPATH; p++)
        for (int k = 0; k < K_COUNT; k++) S[p][k].smin = 99;
    float *A = malloc(sizeof(float) * batch * 1024), *w = malloc(sizeof(float) * batch * 32),
          *v = malloc(sizeof(float) * batch * 1024);
    long double *ref = malloc(sizeof(long double) * batch * 32), E[1024];
    int *info = malloc(sizeof(int) * batch), *took = malloc(sizeof(int) * batch);
    for (int seed = 1; seed <= seeds; seed++)
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
            for (int kind = 0; kind < K_COUNT; kind++) {
                const int n = ns[in];
                const double u = 0x1p-24, nu = n * u;
                st = 0x9E3779B97F4A7C15ULL * (unsigned long long)(seed * 1000 + n * 16 + kind);
                for (int b = 0; b < batch; b++) make(n, kind, A + b * n * n, ref + b * n);
                for (int p = 0; p < NPATH; p++) {
                    stat *s = &S[p][kind];
                    for (int b = 0; b < batch; b++) took[b] = 0;
                    for (int ms = 1; ms <= 30 && kind != K_NAN; ms++) { /* sweeps: the first limit with info 0 */
                        run(dev, PATH[p], n, batch, A, ms, w, v, info);
                        int left = 0;
                        for (int b = 0; b < batch; b++) {
                            if (!took[b] && info[b] == 0) took[b] = ms;
                            left += !took[b];
                        }
                        if (!left) break;
                    }
                    run(dev, PATH[p], n, batch, A, 30, w, v, info);
                    for (int b = 0; b < batch; b++) {
                        const float *Ab = A + b * n * n, *vb = v + b * n * n, *wb = w + b * n;
                        if (kind == K_NAN) {
                            int ok = info[b] == 1;
                            for (int e = 0; e < n * n; e++) ok &= isnan(vb[e]);
                            for (int i = 0; i < n; i++) ok &= isnan(wb[i]);
                            s->bad += !ok;
                            continue;
                        }
                        if (info[b] != 0) s->bad++;
                        s->cnt++;
                        s->ssum += took[b];
                        if (took[b] < s->smin) s->smin = took[b];
                        if (took[b] > s->smax) s->smax = took[b];
                        long double an = 0, res = 0, orf = 0, ev = 0;
                        for (int e = 0; e < n * n; e++) an += (long double)Ab[e] * Ab[e];
                        an = an > 0 ? sqrtl(an) : 1;
                        for (int i = 0; i < n; i++)
                            for (int k = 0; k < n; k++) {
                                long double x = 0, y = 0;
                                for (int j = 0; j < n; j++) {
                                    x += (long double)Ab[i * n + j] * vb[j * n + k];
                                    y += (long double)vb[j * n + i] * vb[j * n + k];
                                }
                                x -= (long double)vb[i * n + k] * wb[k];
                                y -= i == k;
                                res += x * x;
                                orf += y * y;
                                E[i * n + k] = y;
                            }
                        for (int i = 0; i < n; i++)
                            if (!isnan((double)ref[b * n + i])) {
                                const long double e = fabsl(wb[i] - ref[b * n + i]) / an;
                                if (e > ev) ev = e;
                            }
                        const double r = (double)(sqrtl(res) / an) / nu, of = (double)sqrtl(orf) / nu,
                                     os = (double)spectral(n, E) / nu;
                        if (r > s->res) s->res = r;
                        if (of > s->orf) s->orf = of;
                        if (os > s->ors) s->ors = os;
                        if ((double)ev / nu > s->ev) s->ev = (double)ev / nu;
                    }
                }
            }
    printf("float32, n = 17 24 31 32, %d seeds x %d matrices a kind; maxima in units of n u (test bound 10)\n", seeds,
           batch);
    printf("%-9s %-8s %8s %8s %8s %8s  sweeps min/mean/max  info!=want\n", "kind", "path", "resid", "orthF", "orth2",
           "eigval");
    for (int k = 0; k < K_COUNT; k++)
        for (int p = 0; p < NPATH; p++) {
            const stat *s = &S[p][k];
            printf("%-9s %-8s %8.2f %8.2f %8.2f %8.2f  %2d / %5.2f / %2d  %d\n", KNAME[k], PNAME[p], s->res, s->orf, s->ors,
                   s->ev, s->cnt ? s->smin : 0, s->cnt ? s->ssum / s->cnt : 0, s->smax, s->bad);
        }
    free(A);
    free(w);
    free(v);
    free(ref);
    free(info);
    free(took);
    return 0;
}
