/* nn_util.h — host data of the nn tests (test_nn.c, test_nn_conv.c): the
 * dtypes, float64 values rounded to them and their tolerances, device arrays
 * from float64 values and back, random vectors, relative errors, dot
 * products. */
#ifndef ALLOY_TESTS_NN_UTIL_H
#define ALLOY_TESTS_NN_UTIL_H

#include <float.h>

#include "harness.h"
#include "kernel_util.h"

static const alloy_dtype DTYPES[4] = {ALLOY_FLOAT64, ALLOY_FLOAT32, ALLOY_FLOAT16, ALLOY_BFLOAT16};

/* ---- host data ------------------------------------------------------------ */

static inline double round_to(alloy_dtype dt, double x) {
    if (dt == ALLOY_FLOAT16) return ku_round_half(x);
    if (dt == ALLOY_BFLOAT16) return ku_round_bf16(x);
    if (dt == ALLOY_FLOAT32) return (double)(float)x;
    return x;
}

/* Relative tolerance of a result of dtype dt computed with float32 sums. */
static inline double tol(alloy_dtype dt) {
    return dt == ALLOY_FLOAT64 ? 1e-12 : dt == ALLOY_FLOAT32 ? 2e-5 : dt == ALLOY_FLOAT16 ? 2e-3 : 1.6e-2;
}

static inline int64_t count(int nd, const int64_t *shape) {
    int64_t c = 1;
    for (int d = 0; d < nd; d++) c *= shape[d];
    return c;
}

static inline alloy_array *dev_array(alloy_dtype dt, int nd, const int64_t *shape, const double *x) {
    const int64_t c = count(nd, shape);
    void *raw = malloc((size_t)(c ? c : 1) * 8);
    for (int64_t e = 0; e < c; e++) {
        if (dt == ALLOY_FLOAT64) ((double *)raw)[e] = x[e];
        else if (dt == ALLOY_FLOAT32) ((float *)raw)[e] = (float)x[e];
        else if (dt == ALLOY_FLOAT16) ((uint16_t *)raw)[e] = ku_f16_bits(x[e]);
        else ((uint16_t *)raw)[e] = ku_bf16_bits(x[e]);
    }
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), dt, nd, shape, raw, &a));
    free(raw);
    return a;
}

static inline alloy_array *nan_array(alloy_dtype dt, int nd, const int64_t *shape) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(ku_device(), dt, nd, shape, &a));
    if (a) CHECK_OK(alloy_array_fill(a, NAN));
    return a;
}

static inline double *host_of(alloy_array *a) {
    const int64_t c = alloy_array_size(a);
    void *raw = malloc(alloy_array_nbytes(a) + 8);
    double *x = malloc((size_t)(c ? c : 1) * sizeof(double));
    CHECK_OK(alloy_array_copy_to_host(a, raw, alloy_array_nbytes(a) + 8));
    const alloy_dtype dt = alloy_array_dtype(a);
    for (int64_t e = 0; e < c; e++) {
        if (dt == ALLOY_FLOAT64) x[e] = ((double *)raw)[e];
        else if (dt == ALLOY_FLOAT32) x[e] = ((float *)raw)[e];
        else if (dt == ALLOY_FLOAT16) x[e] = ku_f16_value(((uint16_t *)raw)[e]);
        else x[e] = ku_bf16_value(((uint16_t *)raw)[e]);
    }
    free(raw);
    return x;
}

static inline double *random_vec(alloy_dtype dt, int64_t n, double lo, double hi) {
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) x[e] = round_to(dt, harness_uniform(lo, hi));
    return x;
}

/* max |got - ref| / max(1, max |ref|); NaN where ref is NaN must be NaN
 * (and vice versa); any other non-finite result is an infinite error. */
static inline double rel_err(const double *got, const double *ref, int64_t n) {
    double mag = 1, err = 0;
    for (int64_t e = 0; e < n; e++)
        if (isfinite(ref[e])) mag = fmax(mag, fabs(ref[e]));
    for (int64_t e = 0; e < n; e++) {
        if (isnan(ref[e]) != isnan(got[e])) return INFINITY;
        if (isnan(ref[e])) continue;
        if (!isfinite(got[e])) return INFINITY;
        err = fmax(err, fabs(got[e] - ref[e]));
    }
    return err / mag;
}

/* sum a[e] b[e] (a central difference's loss) */
static inline double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t e = 0; e < n; e++) s += a[e] * b[e];
    return s;
}

#endif
