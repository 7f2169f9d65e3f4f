/* bench_util.h — timing helpers shared by the benchmarks: a monotonic clock
 * and medians of repeated runs (never a single sample). */
#ifndef ALLOY_BENCH_UTIL_H
#define ALLOY_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "alloy/alloy.h"

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define BENCH_CHECK(expr)                                                                     \
    do {                                                                                      \
        alloy_status st_ = (expr);                                                            \
        if (st_ != ALLOY_OK) {                                                                \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,             \
                    alloy_last_error());                                                      \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#endif
