/* harness.h — the test harness: checks that count, a summary line, skips.
 *
 * Each test file is one executable:
 *   static void test_something(void) { CHECK(x == 1); CHECK_OK(alloy_...); }
 *   int main(void) { RUN(test_something); return harness_finish(); }
 * It prints "N passed, N failed[, N skipped]" at the end and exits non-zero
 * on any failure. A test that cannot run here calls SKIP("why") and returns. */
#ifndef ALLOY_TEST_HARNESS_H
#define ALLOY_TEST_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloy/alloy.h"

static int harness_passed, harness_failed, harness_skipped, harness_current_failed,
    harness_current_skipped, harness_left_out;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);               \
            harness_current_failed++;                                                       \
        }                                                                                   \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
            harness_current_failed++;                                                       \
        }                                                                                   \
    } while (0)

/* An alloy call that must succeed; prints the library's message if not. */
#define CHECK_OK(expr)                                                                      \
    do {                                                                                    \
        alloy_status st_ = (expr);                                                          \
        if (st_ != ALLOY_OK) {                                                              \
            fprintf(stderr, "  FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,      \
                    alloy_status_name(st_), alloy_last_error());                            \
            harness_current_failed++;                                                       \
        }                                                                                   \
    } while (0)

/* A needle to print (never NULL: some compilers reject a NULL %s argument even
 * on a branch that NULL cannot reach). */
static inline const char *harness_or_empty(const char *s) { return s ? s : ""; }

/* Whether the last error message contains `needle` (NULL: no requirement). */
static inline int harness_message_has(const char *needle) {
    return !needle || strstr(alloy_last_error(), needle) != NULL;
}

/* An alloy call that must fail with `want` and a message containing `needle`. */
#define CHECK_FAILS(expr, want, needle)                                                     \
    do {                                                                                    \
        alloy_status st_ = (expr);                                                          \
        if (st_ != (want)) {                                                                \
            fprintf(stderr, "  FAIL %s:%d: %s -> %s (wanted %s): %s\n", __FILE__, __LINE__, \
                    #expr, alloy_status_name(st_), alloy_status_name(want),                 \
                    alloy_last_error());                                                    \
            harness_current_failed++;                                                       \
        } else if (!harness_message_has(needle)) {                                          \
            fprintf(stderr, "  FAIL %s:%d: message of %s lacks \"%s\": %s\n", __FILE__,     \
                    __LINE__, #expr, harness_or_empty(needle), alloy_last_error());         \
            harness_current_failed++;                                                       \
        }                                                                                   \
    } while (0)

#define SKIP(why)                                                                           \
    do {                                                                                    \
        fprintf(stderr, "  SKIP %s: %s\n", __func__, (why));                               \
        harness_current_skipped = 1;                                                        \
    } while (0)

/* ALLOY_TEST_ONLY=<substring>: run only the tests whose name contains it
 * (the others are not counted) — one test on the GPU machine without the
 * rest's compiles. */
static inline int harness_selected(const char *name) {
    const char *only = getenv("ALLOY_TEST_ONLY");
    return !only || !*only || strstr(name, only) != NULL;
}

/* Seconds on the monotonic clock (each test's time is printed: a test file
 * near ctest's limit shows which of its tests to look at). */
static inline double harness_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define RUN(fn)                                                                             \
    do {                                                                                    \
        if (!harness_selected(#fn)) break;                                                  \
        harness_current_failed = 0;                                                         \
        harness_current_skipped = 0;                                                        \
        fprintf(stderr, "%s\n", #fn);                                                       \
        harness_left_out = 0;                                                               \
        double t0_ = harness_now();                                                         \
        fn();                                                                               \
        fprintf(stderr, "  %s: %.1f s\n", #fn, harness_now() - t0_);                         \
        if (harness_left_out)                                                               \
            fprintf(stderr, "  %s: %d cases left out (ALLOY_TEST_SMALL)\n", #fn,        \
                    harness_left_out);                                                      \
        if (harness_current_failed) harness_failed++;                                       \
        else if (harness_current_skipped) harness_skipped++;                                \
        else harness_passed++;                                                              \
    } while (0)

/* A test of a kernel's timing variants (forms a switch picks, not the
 * defaults): left out under ALLOY_TEST_SMALL, counted as skipped — their
 * logic does not depend on the ISA and the native stages run them. */
#define RUN_VARIANT(fn)                                                                     \
    do {                                                                                    \
        if (harness_small() && harness_selected(#fn)) {                                     \
            fprintf(stderr, "%s\n  SKIP %s: a variants test (ALLOY_TEST_SMALL)\n", #fn, #fn); \
            harness_skipped++;                                                              \
            break;                                                                          \
        }                                                                                   \
        RUN(fn);                                                                            \
    } while (0)

/* ALLOY_TEST_SMALL=1 (the emulated AArch64 stage, where a kernel and the
 * test's own float64 / long double references run 10-100x slower): the
 * heaviest tests leave out their largest problems. Every path, dtype and
 * small awkward size still runs; the native stages run everything. */
static inline int harness_small(void) {
    const char *s = getenv("ALLOY_TEST_SMALL");
    return s && *s && strcmp(s, "0") != 0;
}
/* Whether to leave out a case that is `large` (or one of a grid's entries
 * thinned out) under ALLOY_TEST_SMALL (counted and reported). */
static inline int harness_leave_out(int large) {
    if (!large || !harness_small()) return 0;
    harness_left_out++;
    return 1;
}

static inline int harness_finish(void) {
    printf("%d passed, %d failed, %d skipped\n", harness_passed, harness_failed,
           harness_skipped);
    return harness_failed ? 1 : 0;
}

/* Deterministic per-test random numbers (xorshift64*), seeded from
 * ALLOY_TEST_SEED or the clock; the seed is printed so a failure can be
 * replayed. */
static uint64_t harness_rng_state;
static inline void harness_seed(void) {
    const char *s = getenv("ALLOY_TEST_SEED");
    harness_rng_state = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) * 2654435761u + 1;
    if (!harness_rng_state) harness_rng_state = 1;
    fprintf(stderr, "seed %llu\n", (unsigned long long)harness_rng_state);
}
static inline uint64_t harness_rand_u64(void) {
    if (!harness_rng_state) harness_seed();
    harness_rng_state ^= harness_rng_state >> 12;
    harness_rng_state ^= harness_rng_state << 25;
    harness_rng_state ^= harness_rng_state >> 27;
    return harness_rng_state * 2685821657736338717ull;
}
/* Uniform in [lo, hi). */
static inline double harness_uniform(double lo, double hi) {
    return lo + (hi - lo) * ((double)(harness_rand_u64() >> 11) / 9007199254740992.0);
}
static inline void harness_fill_f32(float *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) x[i] = (float)harness_uniform(lo, hi);
}

/* Replaces the process with `path` (argv[0] included in argv), through the
 * launcher in ALLOY_TEST_LAUNCHER when set (e.g. "qemu-aarch64 -L /usr/...",
 * for tests of a cross build that start programs of that build). Returns
 * only on failure. */
static inline void harness_exec(const char *path, char *const argv[]) {
    const char *launcher = getenv("ALLOY_TEST_LAUNCHER");
    if (!launcher || !*launcher) {
        execv(path, argv);
        return;
    }
    char buf[1024];
    char *args[64];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", launcher);
    for (char *tok = strtok(buf, " "); tok && n < 32; tok = strtok(NULL, " ")) args[n++] = tok;
    args[n++] = (char *)path;
    for (int i = 1; argv[i] && n < 63; i++) args[n++] = argv[i];
    args[n] = NULL;
    execvp(args[0], args);
}

/* The device tests run on: ALLOY_DEVICE (e.g. "cuda") or "cpu". */
static inline alloy_device *harness_device(void) {
    const char *name = getenv("ALLOY_DEVICE");
    alloy_device *dev = NULL;
    if (alloy_device_get(name && *name ? name : "cpu", &dev) != ALLOY_OK) {
        fprintf(stderr, "cannot open device %s: %s\n", name ? name : "cpu", alloy_last_error());
        exit(2);
    }
    return dev;
}

/* Largest |a-b| / (atol + rtol*|b|) over n elements (<= 1 means within
 * tolerance); the index of the worst goes to *worst. */
static inline double harness_max_err(const float *a, const double *ref, size_t n, double atol,
                                     double rtol, size_t *worst) {
    double m = 0;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]) / (atol + rtol * fabs(ref[i]));
        if (!(e <= m)) { m = e; w = i; } /* NaN counts as worst */
        if (isnan(e)) { m = INFINITY; w = i; break; }
    }
    if (worst) *worst = w;
    return m;
}

#endif
