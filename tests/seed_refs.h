/* seed_refs.h — independent double-precision references for the seed kernels
 * in examples/NAME.metal (plain C loops, written from the math, not from the
 * kernels), plus the small plumbing the test_seed_*.c files share: loading an
 * example through the kernel file API, host <-> array copies, the
 * "every output element was written" check, and fp16 conversions. Public API
 * only. */
#ifndef ALLOY_TEST_SEED_REFS_H
#define ALLOY_TEST_SEED_REFS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"
#include "harness.h"

#ifndef ALLOY_SOURCE_DIR
#define ALLOY_SOURCE_DIR "."
#endif

/* fp32 unit roundoff (2^-24). */
#define SEED_U32 5.9604644775390625e-08

/* ---- references ---------------------------------------------------------- */

static inline void ref_soft_cap(const float *x, size_t n, double cap, double *out) {
    for (size_t i = 0; i < n; i++) out[i] = cap * tanh((double)x[i] / cap);
}

static inline void ref_exp(const float *x, size_t n, double *out) {
    for (size_t i = 0; i < n; i++) out[i] = exp((double)x[i]);
}

/* Causal 3-tap depthwise conv: x (B,C,L), w (C,3), bias (C) -> y (B,C,L). */
static inline void ref_depthwise3(const float *x, const float *w, const float *bias, int64_t B,
                                  int64_t C, int64_t L, double *y) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            const float *xr = x + (b * C + c) * L;
            for (int64_t t = 0; t < L; t++) {
                double acc = bias[c];
                for (int tap = 0; tap < 3; tap++) {
                    int64_t src = t - 2 + tap;
                    if (src >= 0) acc += (double)w[c * 3 + tap] * xr[src];
                }
                y[(b * C + c) * L + t] = acc;
            }
        }
}

/* c = Q^T v, Q (m,k); abssum[j] = sum_i |Q[i,j] v[i]| (for error bounds). */
static inline void ref_col_dot(const float *Q, const float *v, int64_t m, int64_t k, double *c,
                               double *abssum) {
    for (int64_t j = 0; j < k; j++) {
        double acc = 0, a = 0;
        for (int64_t i = 0; i < m; i++) {
            acc += (double)Q[i * k + j] * v[i];
            a += fabs((double)Q[i * k + j] * v[i]);
        }
        c[j] = acc;
        if (abssum) abssum[j] = a;
    }
}

/* out = v - Q c, Q (m,k); abssum[i] = |v[i]| + sum_j |Q[i,j] c[j]|. */
static inline void ref_update_vec(const float *Q, const float *v, const float *c, int64_t m,
                                  int64_t k, double *out, double *abssum) {
    for (int64_t i = 0; i < m; i++) {
        double acc = v[i], a = fabs((double)v[i]);
        for (int64_t j = 0; j < k; j++) {
            acc -= (double)Q[i * k + j] * c[j];
            a += fabs((double)Q[i * k + j] * c[j]);
        }
        out[i] = acc;
        if (abssum) abssum[i] = a;
    }
}

/* C = A V, A (m,n), V (n,k); abssum = |A||V|. */
static inline void ref_gemm_av(const float *A, const float *V, int64_t m, int64_t n, int64_t k,
                               double *C, double *abssum) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++) {
            double acc = 0, a = 0;
            for (int64_t p = 0; p < n; p++) {
                double t = (double)A[i * n + p] * V[p * k + j];
                acc += t;
                a += fabs(t);
            }
            C[i * k + j] = acc;
            if (abssum) abssum[i * k + j] = a;
        }
}

/* Z = A^T B, A (m,n), B (m,k) -> Z (n,k); abssum = |A^T||B|. */
static inline void ref_gemm_at_b(const float *A, const float *Bm, int64_t m, int64_t n, int64_t k,
                                 double *Z, double *abssum) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) {
            double acc = 0, a = 0;
            for (int64_t p = 0; p < m; p++) {
                double t = (double)A[p * n + i] * Bm[p * k + j];
                acc += t;
                a += fabs(t);
            }
            Z[i * k + j] = acc;
            if (abssum) abssum[i * k + j] = a;
        }
}

/* Squared L2 distance of row `row` of X (m,d) to query q (d). */
static inline double ref_l2sq(const float *q, const float *X, int64_t d, int64_t row) {
    double acc = 0;
    for (int64_t j = 0; j < d; j++) {
        double diff = (double)X[row * d + j] - q[j];
        acc += diff * diff;
    }
    return acc;
}

/* For each of b queries, the K smallest squared distances to the m rows of X,
 * ascending, ties by row; missing slots +inf / row -1. rows[] are ROW
 * numbers (not ids). */
static inline void ref_topk_l2(const float *Qm, const float *X, int64_t b, int64_t m, int64_t d,
                               int K, double *vals, int64_t *rows) {
    double *dist = (double *)malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
    char *used = (char *)calloc((size_t)(m > 0 ? m : 1), 1);
    for (int64_t q = 0; q < b; q++) {
        for (int64_t r = 0; r < m; r++) dist[r] = ref_l2sq(Qm + q * d, X, d, r);
        memset(used, 0, (size_t)(m > 0 ? m : 1));
        for (int s = 0; s < K; s++) {
            int64_t best = -1;
            for (int64_t r = 0; r < m; r++)
                if (!used[r] && (best < 0 || dist[r] < dist[best])) best = r;
            if (best >= 0) used[best] = 1;
            vals[q * K + s] = best >= 0 ? dist[best] : INFINITY;
            rows[q * K + s] = best;
        }
    }
    free(dist);
    free(used);
}

static inline double ref_logsigmoid(double x) {
    return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x));
}

/* One mLSTM recurrent step (NX-AI native step), all in double.
 * q,k (B,NH,DK), v (B,NH,DV), i,f (B,NH), C (B,NH,DK,DV), n (B,NH,DK), m (B,NH)
 * -> h (B,NH,DV), C1, n1, m1. eps = 1e-6. */
static inline void ref_mlstm_step(const float *q, const float *k, const float *v, const float *ig,
                                  const float *fg, const float *C, const float *n, const float *m,
                                  int64_t B, int64_t NH, int64_t DK, int64_t DV, double *h,
                                  double *C1, double *n1, double *m1) {
    const double eps = 1e-6, scale = 1.0 / sqrt((double)DK);
    for (int64_t bh = 0; bh < B * NH; bh++) {
        double f_log = ref_logsigmoid(fg[bh]);
        double m_new = fmax(f_log + m[bh], (double)ig[bh]);
        double f_act = exp(f_log + m[bh] - m_new);
        double i_act = exp((double)ig[bh] - m_new);
        m1[bh] = m_new;
        double qn = 0;
        for (int64_t j = 0; j < DK; j++) {
            double nn = f_act * n[bh * DK + j] + i_act * k[bh * DK + j];
            n1[bh * DK + j] = nn;
            qn += q[bh * DK + j] * scale * nn;
        }
        double denom = fmax(fabs(qn), exp(-m_new)) + eps;
        for (int64_t dv = 0; dv < DV; dv++) {
            double num = 0;
            for (int64_t j = 0; j < DK; j++) {
                int64_t idx = (bh * DK + j) * DV + dv;
                double cn = f_act * C[idx] + i_act * (double)k[bh * DK + j] * v[bh * DV + dv];
                C1[idx] = cn;
                num += q[bh * DK + j] * scale * cn;
            }
            h[bh * DV + dv] = num / denom;
        }
    }
}

/* ---- fp16 (binary16) conversions, round to nearest even ----------------- */

static inline uint16_t seed_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xFFu, man = x & 0x7FFFFFu;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* may carry into the exponent: fine */
    return (uint16_t)(sign | h);
}

static inline float seed_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, x;
    if (exp == 0) {
        if (!man) x = sign;
        else {
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FFu) << 13);
        }
    } else if (exp == 31) x = sign | 0x7F800000u | (man << 13);
    else x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* ---- plumbing ------------------------------------------------------------ */

/* An example kernel loaded from examples/<file> and constructed. */
typedef struct seed_kernel {
    alloy_kernel_file *file;
    alloy_kernel *kernel;
} seed_kernel;

/* Loads examples/<file>; on failure counts a test failure and returns 0. */
static inline int seed_kernel_load(const char *file, seed_kernel *sk) {
    char path[2048];
    memset(sk, 0, sizeof *sk);
    snprintf(path, sizeof path, "%s/examples/%s", ALLOY_SOURCE_DIR, file);
    if (alloy_kernel_file_load(path, &sk->file) != ALLOY_OK) {
        fprintf(stderr, "  FAIL %s:%d: cannot load example: %s\n", __FILE__, __LINE__,
                alloy_last_error());
        harness_current_failed++;
        return 0;
    }
    alloy_status st = alloy_kernel_file_new_kernel(sk->file, &sk->kernel);
    if (st != ALLOY_OK) {
        fprintf(stderr, "  FAIL %s:%d: alloy_kernel_new(%s) -> %s: %s\n", __FILE__, __LINE__,
                file, alloy_status_name(st), alloy_last_error());
        harness_current_failed++;
        alloy_kernel_file_free(sk->file);
        sk->file = NULL;
        return 0;
    }
    return 1;
}

static inline void seed_kernel_free(seed_kernel *sk) {
    alloy_kernel_free(sk->kernel);
    alloy_kernel_file_free(sk->file);
    memset(sk, 0, sizeof *sk);
}

/* A new array holding a copy of host data (NULL on failure, counted). */
static inline alloy_array *seed_array(alloy_device *dev, alloy_dtype dt, int ndim,
                                      const int64_t *shape, const void *data) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(dev, dt, ndim, shape, data, &a));
    return a;
}

/* A new uninitialised array filled with `value` (NaN for floats marks
 * "not written"). */
static inline alloy_array *seed_filled(alloy_device *dev, alloy_dtype dt, int ndim,
                                       const int64_t *shape, double value) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(dev, dt, ndim, shape, &a));
    if (a) CHECK_OK(alloy_array_fill(a, value));
    return a;
}

/* Copies an array to a new malloc'd host buffer (NULL on failure, counted). */
static inline void *seed_host(const alloy_array *a) {
    if (!a) return NULL;
    size_t nb = alloy_array_nbytes(a);
    void *p = malloc(nb ? nb : 1);
    if (!p) return NULL;
    alloy_status st = alloy_array_copy_to_host(a, p, nb);
    if (st != ALLOY_OK) {
        fprintf(stderr, "  FAIL copy_to_host -> %s: %s\n", alloy_status_name(st), alloy_last_error());
        harness_current_failed++;
        free(p);
        return NULL;
    }
    return p;
}

/* Number of elements that are NaN although the reference is finite: outputs
 * are pre-filled with NaN, so these were never written by the kernel. */
static inline size_t seed_unwritten(const float *got, const double *ref, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (isnan(got[i]) && isfinite(ref[i])) bad++;
    return bad;
}

/* Checks |got - ref| <= bound[i] elementwise (bound from a rigorous
 * rounding-error analysis); reports the worst element. */
static inline int seed_check_bound(const char *what, const float *got, const double *ref,
                                   const double *bound, size_t n) {
    size_t worst = 0, bad = 0;
    double worst_ratio = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        double r = e / (bound[i] > 0 ? bound[i] : 1e-300);
        if (!(e <= bound[i])) bad++;
        if (!(r <= worst_ratio)) { worst_ratio = r; worst = i; }
    }
    if (getenv("SEED_VERBOSE"))
        fprintf(stderr, "    %s: worst error %.3g x bound over %zu elements\n", what, worst_ratio, n);
    if (bad) {
        fprintf(stderr, "  FAIL %s: %zu of %zu elements outside the bound; worst [%zu] got %.9g "
                        "want %.9g (bound %.3g)\n",
                what, bad, n, worst, n ? (double)got[worst] : 0.0, n ? ref[worst] : 0.0,
                n ? bound[worst] : 0.0);
        harness_current_failed++;
    }
    return bad == 0;
}

/* Checks harness_max_err(got, ref, atol, rtol) <= 1 and reports the worst.
 * With SEED_VERBOSE set in the environment, both checks print their margin. */
static inline int seed_check_tol(const char *what, const float *got, const double *ref, size_t n,
                                 double atol, double rtol) {
    size_t w = 0;
    double e = harness_max_err(got, ref, n, atol, rtol, &w);
    if (getenv("SEED_VERBOSE"))
        fprintf(stderr, "    %s: worst error %.3g x tolerance over %zu elements\n", what, e, n);
    if (!(e <= 1.0)) {
        fprintf(stderr, "  FAIL %s: error %.3g x tolerance at [%zu]: got %.9g want %.9g\n", what,
                e, w, n ? (double)got[w] : 0.0, n ? ref[w] : 0.0);
        harness_current_failed++;
        return 0;
    }
    return 1;
}

static inline uint32_t seed_round_up(uint32_t x, uint32_t m) { return (x + m - 1) / m * m; }

/* The rigorous bound for fp32 sums of `terms` products accumulated with fma
 * in any order: |err| <= (terms+2)*u*sum|terms| (u = 2^-24), from abssum (the
 * sum of the absolute values of the terms, as the ref_* functions give it).
 * A wrong, missing or duplicated term is O(|term|) and breaks it. */
static inline void seed_sum_bound(const double *abssum, size_t n, int64_t terms, double *bound) {
    for (size_t i = 0; i < n; i++) bound[i] = (double)(terms + 2) * SEED_U32 * abssum[i] + 1e-30;
}

/* Largest |got - ref| / bound over n elements (<= 1 means within the bound;
 * NaN counts as infinitely wrong); the index of the worst goes to *worst. */
static inline double seed_bound_ratio(const float *got, const double *ref, const double *bound,
                                      size_t n, size_t *worst) {
    double m = 0;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - ref[i]) / (bound[i] > 0 ? bound[i] : 1e-300);
        if (isnan(r)) { m = INFINITY; w = i; break; }
        if (r > m) { m = r; w = i; }
    }
    if (worst) *worst = w;
    return m;
}

/* Verifies the output of examples/ivf_topk_l2.metal (b queries Qm (b,d), a
 * list X (m,d) with global ids[m], K slots per query) against a
 * double-precision brute force, tolerating fp32-vs-double reordering of
 * near-ties:
 * - every slot written (no NaN, no `id_sentinel`);
 * - slots >= m: +inf and -1;
 * - vals non-decreasing; ids valid (in ids[]) and distinct within a query;
 * - vals[s] is the fp32 distance of the row it names, and equals the s-th
 *   smallest double distance, both within rtol.
 * rtol: a squared distance is a sum of d positive terms, each (x-q)^2 with
 * one rounding in the difference (doubled by squaring) and one in the fma:
 * relative error <= (d+3)*u; we allow 4*(d+4)*u.
 * Each problem (the first few printed) counts as a harness failure; returns
 * the number of problems. *worst_ratio (may be NULL) receives the largest
 * value error as a fraction of the tolerance. */
static inline int seed_ivf_verify(const float *Qm, const float *X, const int32_t *ids, int64_t b,
                                  int64_t m, int64_t d, int K, const float *vals,
                                  const int32_t *out_ids, int32_t id_sentinel,
                                  double *worst_ratio) {
    double *rv = (double *)malloc(sizeof(double) * (size_t)(b * K + 1));
    int64_t *rr = (int64_t *)malloc(sizeof(int64_t) * (size_t)(b * K + 1));
    ref_topk_l2(Qm, X, b, m, d, K, rv, rr);
    double rtol = 4.0 * (double)(d + 4) * SEED_U32, worst = 0;
    int bad = 0;
#define SEED_IVF_BAD(...)                                                                   \
    do {                                                                                    \
        if (bad < 5) {                                                                      \
            fprintf(stderr, "  FAIL ivf_topk_l2: ");                                        \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
        }                                                                                   \
        bad++;                                                                              \
        harness_current_failed++;                                                           \
    } while (0)
    for (int64_t q = 0; q < b; q++)
        for (int s = 0; s < K; s++) {
            size_t o = (size_t)(q * K + s);
            float v = vals[o];
            int32_t id = out_ids[o];
            if (isnan(v) || id == id_sentinel) {
                SEED_IVF_BAD("query %lld slot %d not written (val %g id %d)", (long long)q, s, v, id);
                worst = INFINITY;
                continue;
            }
            if (s >= m) {
                if (!(isinf(v) && v > 0 && id == -1))
                    SEED_IVF_BAD("query %lld slot %d (m=%lld): want +inf/-1, got %g/%d",
                                 (long long)q, s, (long long)m, v, id);
                continue;
            }
            int64_t row = -1;
            for (int64_t r = 0; r < m && row < 0; r++)
                if (ids[r] == id) row = r;
            if (row < 0) {
                SEED_IVF_BAD("query %lld slot %d: invalid id %d", (long long)q, s, id);
                worst = INFINITY;
                continue;
            }
            if (s > 0 && !(vals[o - 1] <= v))
                SEED_IVF_BAD("query %lld: slot %d (%g) < slot %d (%g)", (long long)q, s, v, s - 1,
                             vals[o - 1]);
            for (int t = 0; t < s; t++)
                if (out_ids[q * K + t] == id) SEED_IVF_BAD("query %lld: id %d twice", (long long)q, id);
            double dist = ref_l2sq(Qm + q * d, X, d, row);
            double e1 = fabs(v - dist) / (rtol * dist + 1e-30),
                   e2 = fabs(v - rv[o]) / (rtol * rv[o] + 1e-30);
            if (!(e1 <= worst)) worst = e1;
            if (!(e2 <= worst)) worst = e2;
            if (!(e1 <= 1) || !(e2 <= 1))
                SEED_IVF_BAD("query %lld slot %d: val %.9g, its row's distance %.9g, reference %.9g",
                             (long long)q, s, v, dist, rv[o]);
        }
#undef SEED_IVF_BAD
    free(rv);
    free(rr);
    if (worst_ratio) *worst_ratio = worst;
    return bad;
}


#endif
