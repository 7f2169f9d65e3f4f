/* mlstm_problem.h — what the mLSTM tests share (test_mlstm.c,
 * test_mlstm_chunkwise.c): random problems rounded to the input dtype, the
 * float64 recurrent reference (the step of mlstm_anchors §1.1 applied S times
 * from the initial states or zeros), the per-element error magnitude of an
 * ill-conditioned normaliser, and the error measures. Device arrays are made
 * on ku_device() (ALLOY_DEVICE, default cpu). */
#ifndef ALLOY_TESTS_MLSTM_PROBLEM_H
#define ALLOY_TESTS_MLSTM_PROBLEM_H

#include <float.h>

#include "harness.h"
#include "kernel_util.h"

#include "alloy/mlstm.h"

static const double EPS = 1e-6;

/* ---- host data ------------------------------------------------------------ */

static inline double round_to(alloy_dtype dt, double x) {
    if (dt == ALLOY_FLOAT16) return ku_round_half(x);
    if (dt == ALLOY_BFLOAT16) return ku_round_bf16(x);
    return (double)(float)x;
}

static inline int64_t count(int nd, const int64_t *shape) {
    int64_t c = 1;
    for (int d = 0; d < nd; d++) c *= shape[d];
    return c;
}

static inline alloy_array *dev_array(alloy_dtype dt, int nd, const int64_t *shape, const double *x) {
    const int64_t c = count(nd, shape);
    void *raw = malloc((size_t)(c ? c : 1) * 4);
    for (int64_t e = 0; e < c; e++) {
        if (dt == ALLOY_FLOAT32) ((float *)raw)[e] = (float)x[e];
        else if (dt == ALLOY_FLOAT16) ((uint16_t *)raw)[e] = ku_f16_bits(x[e]);
        else ((uint16_t *)raw)[e] = ku_bf16_bits(x[e]);
    }
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), dt, nd, shape, raw, &a));
    free(raw);
    return a;
}

/* A new array of the shape filled with NaN (an output every element of which
 * must be written). */
static inline alloy_array *nan_array(alloy_dtype dt, int nd, const int64_t *shape) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(ku_device(), dt, nd, shape, &a));
    if (a) CHECK_OK(alloy_array_fill(a, NAN));
    return a;
}

static inline double *host_of(alloy_array *a) {
    const int64_t c = alloy_array_size(a);
    void *raw = malloc(alloy_array_nbytes(a) + 4);
    double *x = malloc((size_t)(c ? c : 1) * sizeof(double));
    CHECK_OK(alloy_array_copy_to_host(a, raw, alloy_array_nbytes(a) + 4));
    const alloy_dtype dt = alloy_array_dtype(a);
    for (int64_t e = 0; e < c; e++) {
        if (dt == ALLOY_FLOAT32) x[e] = ((float *)raw)[e];
        else if (dt == ALLOY_FLOAT16) x[e] = ku_f16_value(((uint16_t *)raw)[e]);
        else x[e] = ku_bf16_value(((uint16_t *)raw)[e]);
    }
    free(raw);
    return x;
}

/* One problem: (B, NH, S, DK, DV), inputs rounded to dt, optional initial
 * states (float32 values). */
typedef struct problem {
    int64_t B, NH, S, DK, DV;
    alloy_dtype dt;
    double *q, *k, *v, *i, *f;
    double *c0, *n0, *m0; /* NULL: zeros */
} problem;

enum { GATES_PLAIN, GATES_HOSTILE_MIX, GATES_ALL_INPUT_60, GATES_ALL_FORGET_M40 };

static inline void make(problem *p, int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, alloy_dtype dt,
                 int gates, int initial) {
    memset(p, 0, sizeof *p);
    p->B = B, p->NH = NH, p->S = S, p->DK = DK, p->DV = DV, p->dt = dt;
    const int64_t BH = B * NH, nq = BH * S * DK, nv = BH * S * DV, ng = BH * S;
    p->q = malloc(sizeof(double) * (size_t)(nq + 1));
    p->k = malloc(sizeof(double) * (size_t)(nq + 1));
    p->v = malloc(sizeof(double) * (size_t)(nv + 1));
    p->i = malloc(sizeof(double) * (size_t)(ng + 1));
    p->f = malloc(sizeof(double) * (size_t)(ng + 1));
    for (int64_t e = 0; e < nq; e++) p->q[e] = round_to(dt, harness_uniform(-2, 2));
    for (int64_t e = 0; e < nq; e++) p->k[e] = round_to(dt, harness_uniform(-2, 2));
    for (int64_t e = 0; e < nv; e++) p->v[e] = round_to(dt, harness_uniform(-2, 2));
    for (int64_t e = 0; e < ng; e++) {
        double ig = harness_uniform(-4, 4), fg = harness_uniform(-3, 6);
        if (gates == GATES_HOSTILE_MIX) {
            const uint64_t r = harness_rand_u64() % 5;
            if (r == 0) ig = 60;
            else if (r == 1) fg = -40;
        } else if (gates == GATES_ALL_INPUT_60) ig = 60;
        else if (gates == GATES_ALL_FORGET_M40) fg = -40;
        p->i[e] = round_to(dt, ig);
        p->f[e] = round_to(dt, fg);
    }
    if (initial) {
        p->c0 = malloc(sizeof(double) * (size_t)(BH * DK * DV));
        p->n0 = malloc(sizeof(double) * (size_t)(BH * DK));
        p->m0 = malloc(sizeof(double) * (size_t)BH);
        for (int64_t e = 0; e < BH * DK * DV; e++) p->c0[e] = (float)harness_uniform(-3, 3);
        for (int64_t e = 0; e < BH * DK; e++) p->n0[e] = (float)harness_uniform(-3, 3);
        for (int64_t e = 0; e < BH; e++) p->m0[e] = (float)harness_uniform(-2, 3);
    }
}

static inline void drop(problem *p) {
    free(p->q), free(p->k), free(p->v), free(p->i), free(p->f);
    free(p->c0), free(p->n0), free(p->m0);
}

static inline double logsigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }

/* The float64 reference: S recurrent steps per (b, head). h (BH, S, DV);
 * final states c (BH, DK, DV), n (BH, DK), m (BH). */
static inline void reference(const problem *p, double *h, double *c, double *n, double *m, double *ms,
                             double *dens) {
    const int64_t BH = p->B * p->NH, S = p->S, DK = p->DK, DV = p->DV;
    const double scale = 1.0 / sqrt((double)DK);
    for (int64_t bh = 0; bh < BH; bh++) {
        double *C = c + bh * DK * DV, *N = n + bh * DK;
        for (int64_t e = 0; e < DK * DV; e++) C[e] = p->c0 ? p->c0[bh * DK * DV + e] : 0;
        for (int64_t e = 0; e < DK; e++) N[e] = p->n0 ? p->n0[bh * DK + e] : 0;
        double M = p->m0 ? p->m0[bh] : 0;
        for (int64_t t = 0; t < S; t++) {
            const double *q = p->q + (bh * S + t) * DK, *k = p->k + (bh * S + t) * DK;
            const double *v = p->v + (bh * S + t) * DV;
            const double lf = logsigmoid(p->f[bh * S + t]), ig = p->i[bh * S + t];
            const double mn = fmax(lf + M, ig), fa = exp(lf + M - mn), ia = exp(ig - mn);
            double qn = 0;
            for (int64_t a = 0; a < DK; a++) {
                N[a] = fa * N[a] + ia * k[a];
                qn += q[a] * scale * N[a];
            }
            const double den = fmax(fabs(qn), exp(-mn)) + EPS;
            ms[bh * S + t] = mn;
            dens[bh * S + t] = den;
            for (int64_t b = 0; b < DV; b++) {
                double num = 0;
                for (int64_t a = 0; a < DK; a++) {
                    double *x = &C[a * DV + b];
                    *x = fa * *x + ia * k[a] * v[b];
                    num += q[a] * scale * *x;
                }
                h[(bh * S + t) * DV + b] = num / den;
            }
            M = mn;
        }
        m[bh] = M;
    }
}

/* The size of the float32 rounding error each output may carry: where the
 * normaliser is a sum that cancels (|q^ . n| far below the sum of the
 * magnitudes of its terms, common when the input gates dominate the floor
 * exp(-m)), h is ill-conditioned, and the recurrent and parallel forms both
 * lose accuracy in proportion. mag (BH, S, DV) receives, per element, the
 * first-order error magnitude of h = num / den:
 *   (sum |terms of num| + |h| sum |terms of den|) / den,
 * the terms being w_tj |q^_t . k_j| |v_j| over the keys (and the initial
 * state's q^ C_0, q^ n_0). A correct kernel is within tol of max(max|h|, mag).
 * cond (BH, S; NULL: not wanted) receives each row's normaliser condition,
 * sum |terms of den| / den: where a kernel's unit roundoff times it nears 1
 * the normaliser itself has no correct digit left, and h is off by a factor,
 * not by its first-order magnitude. */
static inline void magnitudes(const problem *p, const double *h, const double *ms, const double *dens, double *mag,
                              double *cond) {
    const int64_t BH = p->B * p->NH, S = p->S, DK = p->DK, DV = p->DV;
    const double scale = 1.0 / sqrt((double)DK);
    double *numm = malloc(sizeof(double) * (size_t)DV);
    for (int64_t bh = 0; bh < BH; bh++)
        for (int64_t t = 0; t < S; t++) {
            const double mt = ms[bh * S + t], *q = p->q + (bh * S + t) * DK;
            double denm = 0, F = 0; /* F = sum_{s=j+1..t} lf_s */
            for (int64_t b = 0; b < DV; b++) numm[b] = 0;
            for (int64_t j = t; j >= 0; j--) {
                const double w = exp(F + p->i[bh * S + j] - mt);
                double qk = 0;
                for (int64_t a = 0; a < DK; a++) qk += fabs(q[a] * scale * p->k[(bh * S + j) * DK + a]);
                denm += w * qk;
                for (int64_t b = 0; b < DV; b++) numm[b] += w * qk * fabs(p->v[(bh * S + j) * DV + b]);
                F += logsigmoid(p->f[bh * S + j]);
            }
            if (p->c0) { /* F is now sum_{s=0..t} lf_s */
                const double w = exp(F + p->m0[bh] - mt);
                for (int64_t a = 0; a < DK; a++) {
                    denm += w * fabs(q[a] * scale * p->n0[bh * DK + a]);
                    for (int64_t b = 0; b < DV; b++)
                        numm[b] += w * fabs(q[a] * scale * p->c0[(bh * DK + a) * DV + b]);
                }
            }
            for (int64_t b = 0; b < DV; b++) {
                const int64_t e = (bh * S + t) * DV + b;
                mag[e] = (numm[b] + fabs(h[e]) * denm) / dens[bh * S + t];
            }
            if (cond) cond[bh * S + t] = denm / dens[bh * S + t];
        }
    free(numm);
}

/* max over elements of |got - ref| / max(max|ref|, mag); every got finite. */
static inline double h_err(const char *what, const double *got, const double *ref, const double *mag, int64_t n) {
    double hmax = 0, worst = 0;
    int64_t bad = -1;
    for (int64_t e = 0; e < n; e++) hmax = fmax(hmax, fabs(ref[e]));
    for (int64_t e = 0; e < n; e++) {
        if (!isfinite(got[e]) && bad < 0) bad = e;
        const double d = fmax(hmax, mag[e]);
        if (d > 0) worst = fmax(worst, fabs(got[e] - ref[e]) / d);
        else worst = fmax(worst, fabs(got[e] - ref[e]));
    }
    CHECK_MSG(bad < 0, "%s: element %lld is %g (not written or not finite)", what, (long long)bad,
              bad >= 0 ? got[bad] : 0.0);
    return worst;
}

/* max |got - ref| / max |ref| over n elements; every got must be finite. */
static inline double rel_err(const char *what, const double *got, const double *ref, int64_t n) {
    double emax = 0, rmax = 0;
    int64_t bad = -1;
    for (int64_t e = 0; e < n; e++) {
        if (!isfinite(got[e]) && bad < 0) bad = e;
        emax = fmax(emax, fabs(got[e] - ref[e]));
        rmax = fmax(rmax, fabs(ref[e]));
    }
    CHECK_MSG(bad < 0, "%s: element %lld is %g (not written or not finite)", what, (long long)bad,
              bad >= 0 ? got[bad] : 0.0);
    return rmax > 0 ? emax / rmax : emax;
}

/* float32 2e-4; float16 4e-3 (eight roundings of h to its 11 bits: every form computes in float32, the
 * chunkwise one on float16 tiles with exponents); bfloat16 2e-2 (its states and P rounded to 8 bits) */
static inline double tolerance(alloy_dtype dt) {
    return dt == ALLOY_FLOAT32 ? 2e-4 : dt == ALLOY_FLOAT16 ? 4e-3 : 2e-2;
}


#endif
