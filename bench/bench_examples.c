/* bench_examples.c — the project's main job (scripts/run.sh): runs every
 * example kernel in examples/ at a representative size on the best device
 * (alloy_device_get("auto"), so ALLOY_DEVICE decides), checks each result
 * against the double-precision references the tests use (tests/seed_refs.h,
 * same tolerances and error bounds), and prints a markdown table: kernel,
 * problem, device, median launch time, rate, worst error as a fraction of
 * the tolerance, verdict. Exits non-zero if any kernel fails.
 *
 * Each kernel is launched once first (compile, first touch), then timed over
 * several launches (median, monotonic clock, device synchronised) writing
 * into caller-provided output arrays that were pre-filled with NaN (or a
 * sentinel), so the check after the timed runs also proves that every
 * element was written. Sizes are chosen so that the whole run, references
 * included, stays around a minute on two cores; ALLOY_BENCH_SCALE=small runs
 * everything at a tenth or so of that (a quick smoke test). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "seed_refs.h"

#define MIN_REPS 3
#define MAX_REPS 25
#define REP_BUDGET_S 1.0 /* stop timing a kernel after this much (past MIN_REPS) */

static alloy_device *dev;
static int small_scale;

typedef struct row {
    const char *kernel;
    char problem[96];
    double median_s; /* < 0: no timing */
    double rate;     /* in `unit`; < 0: none */
    const char *unit;
    double err;      /* worst error / tolerance; < 0: see err_text */
    char err_text[64];
    int ok;
    char why[320];   /* first reason for FAIL */
} row;

/* ---- plumbing ------------------------------------------------------------ */

/* Marks the row failed (keeps the first reason). */
static void fail(row *r, const char *fmt, const char *detail) {
    if (r->ok) snprintf(r->why, sizeof r->why, fmt, detail ? detail : "");
    r->ok = 0;
}

/* Warm-up launch (compiles), then timed launches; returns the median in
 * seconds, or -1 after a failed launch (reason in r). */
static double time_launches(row *r, seed_kernel *sk, int n_in, alloy_array *const *ins,
                            const alloy_launch *l, int n_out) {
    alloy_array *outs[8] = {NULL};
    double times[MAX_REPS];
    int n = 0;
    double start = 0;
    for (int rep = -1; rep < MAX_REPS; rep++) {
        if (rep == 0) start = bench_now();
        if (rep >= MIN_REPS && bench_now() - start > REP_BUDGET_S) break;
        double t0 = bench_now();
        alloy_status st = alloy_kernel_apply(sk->kernel, n_in, ins, l, NULL, outs);
        if (st == ALLOY_OK) st = alloy_device_synchronize(dev);
        double t = bench_now() - t0;
        for (int j = 0; j < n_out; j++) {
            alloy_array_free(outs[j]);
            outs[j] = NULL;
        }
        if (st != ALLOY_OK) {
            fprintf(stderr, "  %s: launch failed: %s: %s\n", r->kernel, alloy_status_name(st),
                    alloy_last_error());
            fail(r, "launch failed: %s", alloy_status_name(st));
            return -1;
        }
        if (rep >= 0) times[n++] = t;
    }
    return bench_median(times, n);
}

/* A launch writing into the given output arrays. */
static alloy_launch *launch_with(int n_out, alloy_array *const *outs, uint32_t gx, uint32_t gy,
                                 uint32_t tx, uint32_t ty) {
    alloy_launch *l = NULL;
    BENCH_CHECK(alloy_launch_new(&l));
    for (int j = 0; j < n_out; j++) BENCH_CHECK(alloy_launch_add_output_array(l, outs[j]));
    BENCH_CHECK(alloy_launch_set_grid(l, gx, gy, 1));
    BENCH_CHECK(alloy_launch_set_threadgroup(l, tx, ty, 1));
    return l;
}

static void set_rate(row *r, double amount, const char *unit) {
    r->unit = unit;
    r->rate = r->median_s > 0 ? amount / r->median_s * 1e-9 : -1;
}

/* Tolerance-based check of a float32 output (as seed_check_tol). */
static void check_tol(row *r, const float *got, const double *ref, size_t n, double atol,
                      double rtol) {
    if (!got) { fail(r, "cannot read the output%s", ""); return; }
    double e = harness_max_err(got, ref, n, atol, rtol, NULL);
    if (!(e <= r->err)) r->err = e;
}

/* Bound-based check of a float32 output (as seed_check_bound). */
static void check_bound(row *r, const float *got, const double *ref, const double *bound,
                        size_t n) {
    if (!got) { fail(r, "cannot read the output%s", ""); return; }
    double e = seed_bound_ratio(got, ref, bound, n, NULL);
    if (!(e <= r->err)) r->err = e;
}

static float *random_f32(size_t n, double lo, double hi) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    harness_fill_f32(p, n, lo, hi);
    return p;
}

static double *alloc_f64(size_t n) {
    double *p = malloc(sizeof(double) * (n ? n : 1));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

/* ---- the examples ---------------------------------------------------------- */

/* soft_cap, exp: elementwise over n floats (tolerances of test_seed_elementwise). */
static void bench_soft_cap(row *r, seed_kernel *sk) {
    int64_t n = small_scale ? 1 << 18 : 1 << 22;
    const double cap = 15.0;
    snprintf(r->problem, sizeof r->problem, "n=%lld fp32, cap=%g", (long long)n, cap);
    float *x = random_f32((size_t)n, -8 * cap, 8 * cap);
    double *ref = alloc_f64((size_t)n);
    ref_soft_cap(x, (size_t)n, cap, ref);
    alloy_array *ins[2] = {seed_array(dev, ALLOY_FLOAT32, 1, &n, x), NULL};
    BENCH_CHECK(alloy_array_scalar(dev, ALLOY_FLOAT32, cap, &ins[1]));
    alloy_array *out = seed_filled(dev, ALLOY_FLOAT32, 1, &n, NAN);
    alloy_launch *l = launch_with(1, &out, (uint32_t)n, 1, 256, 1);
    r->median_s = time_launches(r, sk, 2, ins, l, 1);
    set_rate(r, 8.0 * (double)n, "GB/s");
    float *got = seed_host(out);
    check_tol(r, got, ref, (size_t)n, 1e-6 * cap, 1e-5);
    free(got);
    alloy_launch_free(l);
    alloy_array_free(out);
    alloy_array_free(ins[0]);
    alloy_array_free(ins[1]);
    free(x);
    free(ref);
}

static void bench_exp(row *r, seed_kernel *sk) {
    int64_t n = small_scale ? 1 << 18 : 1 << 22;
    snprintf(r->problem, sizeof r->problem, "n=%lld fp32 (T=float32)", (long long)n);
    float *x = random_f32((size_t)n, -30, 30);
    double *ref = alloc_f64((size_t)n);
    ref_exp(x, (size_t)n, ref);
    alloy_array *in = seed_array(dev, ALLOY_FLOAT32, 1, &n, x);
    alloy_array *out = seed_filled(dev, ALLOY_FLOAT32, 1, &n, NAN);
    alloy_launch *l = launch_with(1, &out, (uint32_t)n, 1, 256, 1);
    BENCH_CHECK(alloy_kernel_file_add_templates(sk->file, l)); /* T=float32 from the file */
    r->median_s = time_launches(r, sk, 1, &in, l, 1);
    set_rate(r, 8.0 * (double)n, "GB/s");
    float *got = seed_host(out);
    check_tol(r, got, ref, (size_t)n, 0, 1e-5);
    free(got);
    alloy_launch_free(l);
    alloy_array_free(out);
    alloy_array_free(in);
    free(x);
    free(ref);
}

/* memcpy is exact. */
static void bench_memcpy(row *r, seed_kernel *sk) {
    int64_t n = small_scale ? 1 << 18 : 1 << 22;
    snprintf(r->problem, sizeof r->problem, "n=%lld fp32", (long long)n);
    float *x = random_f32((size_t)n, -1e6, 1e6);
    alloy_array *in = seed_array(dev, ALLOY_FLOAT32, 1, &n, x);
    alloy_array *out = seed_filled(dev, ALLOY_FLOAT32, 1, &n, NAN);
    alloy_launch *l = launch_with(1, &out, (uint32_t)n, 1, 256, 1);
    r->median_s = time_launches(r, sk, 1, &in, l, 1);
    set_rate(r, 8.0 * (double)n, "GB/s");
    float *got = seed_host(out);
    if (got) {
        size_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += memcmp(&got[i], &x[i], sizeof(float)) != 0;
        if (bad) {
            snprintf(r->err_text, sizeof r->err_text, "%zu of %lld differ", bad, (long long)n);
            fail(r, "memcpy output differs from the input%s", "");
        } else {
            snprintf(r->err_text, sizeof r->err_text, "0 (exact)");
        }
    } else {
        fail(r, "cannot read the output%s", "");
    }
    free(got);
    alloy_launch_free(l);
    alloy_array_free(out);
    alloy_array_free(in);
    free(x);
}

/* depthwise3 (tolerance of test_seed_depthwise: 8u * 4 absolute). */
static void bench_depthwise(row *r, seed_kernel *sk) {
    int64_t B = 4, C = 768, L = small_scale ? 128 : 1024;
    snprintf(r->problem, sizeof r->problem, "B=%lld C=%lld L=%lld", (long long)B, (long long)C,
             (long long)L);
    int64_t xs[3] = {B, C, L}, ws[2] = {C, 3}, bs[1] = {C};
    size_t n = (size_t)(B * C * L);
    float *x = random_f32(n, -1, 1), *w = random_f32((size_t)C * 3, -1, 1),
          *bias = random_f32((size_t)C, -1, 1);
    double *ref = alloc_f64(n);
    ref_depthwise3(x, w, bias, B, C, L, ref);
    alloy_array *ins[3] = {seed_array(dev, ALLOY_FLOAT32, 3, xs, x),
                           seed_array(dev, ALLOY_FLOAT32, 2, ws, w),
                           seed_array(dev, ALLOY_FLOAT32, 1, bs, bias)};
    alloy_array *out = seed_filled(dev, ALLOY_FLOAT32, 3, xs, NAN);
    alloy_launch *l = launch_with(1, &out, (uint32_t)n, 1, 256, 1);
    r->median_s = time_launches(r, sk, 3, ins, l, 1);
    set_rate(r, 4.0 * (2.0 * (double)n + 4.0 * (double)C), "GB/s");
    float *got = seed_host(out);
    check_tol(r, got, ref, n, 8 * SEED_U32 * 4, 0);
    free(got);
    alloy_launch_free(l);
    alloy_array_free(out);
    for (int i = 0; i < 3; i++) alloy_array_free(ins[i]);
    free(x);
    free(w);
    free(bias);
    free(ref);
}

/* qr_col_dot / qr_col_dot_simd: c = Q^T v (bound (m+2) u sum|terms|). */
static void bench_col_dot(row *r, seed_kernel *sk, int simd) {
    int64_t m = small_scale ? 1024 : 4096, k = 128;
    snprintf(r->problem, sizeof r->problem, "m=%lld k=%lld", (long long)m, (long long)k);
    int64_t qs[2] = {m, k}, vs[1] = {m}, cs[1] = {k};
    float *Q = random_f32((size_t)(m * k), -1, 1), *v = random_f32((size_t)m, -1, 1);
    double *ref = alloc_f64((size_t)k), *abssum = alloc_f64((size_t)k), *bound = alloc_f64((size_t)k);
    ref_col_dot(Q, v, m, k, ref, abssum);
    seed_sum_bound(abssum, (size_t)k, m, bound);
    alloy_array *ins[2] = {seed_array(dev, ALLOY_FLOAT32, 2, qs, Q),
                           seed_array(dev, ALLOY_FLOAT32, 1, vs, v)};
    alloy_array *out = seed_filled(dev, ALLOY_FLOAT32, 1, cs, NAN);
    alloy_launch *l = simd ? launch_with(1, &out, (uint32_t)k * 32, 1, 256, 1)
                           : launch_with(1, &out, seed_round_up((uint32_t)k, 64), 1, 64, 1);
    r->median_s = time_launches(r, sk, 2, ins, l, 1);
    set_rate(r, 4.0 * (double)(m * k + m + k), "GB/s");
    float *got = seed_host(out);
    check_bound(r, got, ref, bound, (size_t)k);
    free(got);
    alloy_launch_free(l);
    alloy_array_free(out);
    for (int i = 0; i < 2; i++) alloy_array_free(ins[i]);
    free(Q);
    free(v);
    free(ref);
    free(abssum);
    free(bound);
}

static void bench_col_dot_plain(row *r, seed_kernel *sk) { bench_col_dot(r, sk, 0); }
static void bench_col_dot_simd(row *r, seed_kernel *sk) { bench_col_dot(r, sk, 1); }

/* qr_update_vec: v - Q c (bound (k+3) u sum|terms|). */
static void bench_update_vec(row *r, seed_kernel *sk) {
    int64_t m = small_scale ? 1024 : 4096, k = 128;
    snprintf(r->problem, sizeof r->problem, "m=%lld k=%lld", (long long)m, (long long)k);
    int64_t qs[2] = {m, k}, vs[1] = {m}, cs[1] = {k};
    float *Q = random_f32((size_t)(m * k), -1, 1), *v = random_f32((size_t)m, -1, 1),
          *c = random_f32((size_t)k, -1, 1);
    double *ref = alloc_f64((size_t)m), *abssum = alloc_f64((size_t)m), *bound = alloc_f64((size_t)m);
    ref_update_vec(Q, v, c, m, k, ref, abssum);
    seed_sum_bound(abssum, (size_t)m, k + 1, bound);
    alloy_array *ins[3] = {seed_array(dev, ALLOY_FLOAT32, 2, qs, Q),
                           seed_array(dev, ALLOY_FLOAT32, 1, vs, v),
                           seed_array(dev, ALLOY_FLOAT32, 1, cs, c)};
    alloy_array *out = seed_filled(dev, ALLOY_FLOAT32, 1, vs, NAN);
    alloy_launch *l = launch_with(1, &out, (uint32_t)m, 1, 128, 1);
    r->median_s = time_launches(r, sk, 3, ins, l, 1);
    set_rate(r, 4.0 * (double)(m * k + 2 * m + k), "GB/s");
    float *got = seed_host(out);
    check_bound(r, got, ref, bound, (size_t)m);
    free(got);
    alloy_launch_free(l);
    alloy_array_free(out);
    for (int i = 0; i < 3; i++) alloy_array_free(ins[i]);
    free(Q);
    free(v);
    free(c);
    free(ref);
    free(abssum);
    free(bound);
}

/* gemm_av: C = A V; gemm_at_b: Z = A^T B; A (M,N), both square-ish here
 * (bound (terms+2) u sum|terms|, terms = the reduction length). */
static void bench_gemm(row *r, seed_kernel *sk, int transposed) {
    int64_t M = small_scale ? 128 : 512, N = M, K = M;
    snprintf(r->problem, sizeof r->problem, "%s %lldx%lldx%lld", transposed ? "A^T B" : "A V",
             (long long)M, (long long)N, (long long)K);
    /* A (M,N); A V: V (N,K) -> (M,K); A^T B: B (M,K) -> (N,K). */
    int64_t as[2] = {M, N}, bs[2] = {transposed ? M : N, K};
    int64_t orows = transposed ? N : M, os[2] = {orows, K};
    size_t no = (size_t)(orows * K);
    float *A = random_f32((size_t)(M * N), -1, 1), *Bm = random_f32((size_t)(bs[0] * K), -1, 1);
    double *ref = alloc_f64(no), *abssum = alloc_f64(no), *bound = alloc_f64(no);
    if (transposed) ref_gemm_at_b(A, Bm, M, N, K, ref, abssum);
    else ref_gemm_av(A, Bm, M, N, K, ref, abssum);
    seed_sum_bound(abssum, no, transposed ? M : N, bound);
    alloy_array *ins[2] = {seed_array(dev, ALLOY_FLOAT32, 2, as, A),
                           seed_array(dev, ALLOY_FLOAT32, 2, bs, Bm)};
    alloy_array *out = seed_filled(dev, ALLOY_FLOAT32, 2, os, NAN);
    alloy_launch *l = launch_with(1, &out, seed_round_up((uint32_t)K, 16),
                                  seed_round_up((uint32_t)orows, 16), 16, 16);
    r->median_s = time_launches(r, sk, 2, ins, l, 1);
    set_rate(r, 2.0 * (double)M * (double)N * (double)K, "GFLOP/s");
    float *got = seed_host(out);
    check_bound(r, got, ref, bound, no);
    free(got);
    alloy_launch_free(l);
    alloy_array_free(out);
    for (int i = 0; i < 2; i++) alloy_array_free(ins[i]);
    free(A);
    free(Bm);
    free(ref);
    free(abssum);
    free(bound);
}

static void bench_gemm_av(row *r, seed_kernel *sk) { bench_gemm(r, sk, 0); }
static void bench_gemm_at_b(row *r, seed_kernel *sk) { bench_gemm(r, sk, 1); }

/* ivf_topk_l2: b queries against one list of m rows, K best each
 * (seed_ivf_verify: the tests' checks and tolerance). */
static void bench_ivf(row *r, seed_kernel *sk) {
    int64_t b = 64, m = small_scale ? 2000 : 20000, d = 64;
    const int K = 10;
    const uint32_t tpb = 64; /* tpb*K = 640 <= the kernel's pool of 1024 */
    const int32_t sentinel = -7;
    snprintf(r->problem, sizeof r->problem, "b=%lld m=%lld d=%lld K=%d", (long long)b,
             (long long)m, (long long)d, K);
    int64_t qs[2] = {b, d}, xs[2] = {m, d}, is[1] = {m}, os[2] = {b, K};
    float *Qm = random_f32((size_t)(b * d), -1, 1), *X = random_f32((size_t)(m * d), -1, 1);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)m);
    for (int64_t i = 0; i < m; i++) ids[i] = (int32_t)(1000 + 3 * i); /* ids are not rows */
    alloy_array *ins[3] = {seed_array(dev, ALLOY_FLOAT32, 2, qs, Qm),
                           seed_array(dev, ALLOY_FLOAT32, 2, xs, X),
                           seed_array(dev, ALLOY_INT32, 1, is, ids)};
    alloy_array *outs[2] = {seed_filled(dev, ALLOY_FLOAT32, 2, os, NAN),
                            seed_filled(dev, ALLOY_INT32, 2, os, sentinel)};
    alloy_launch *l = launch_with(2, outs, (uint32_t)b * tpb, 1, tpb, 1);
    char kt[32];
    snprintf(kt, sizeof kt, "K=%d", K);
    if (alloy_kernel_file_set_template(sk->file, kt) != ALLOY_OK) {
        fail(r, "%s", alloy_last_error());
    } else {
        BENCH_CHECK(alloy_kernel_file_add_templates(sk->file, l));
        r->median_s = time_launches(r, sk, 3, ins, l, 2);
        set_rate(r, 3.0 * (double)b * (double)m * (double)d, "GFLOP/s");
        float *vals = seed_host(outs[0]);
        int32_t *oid = seed_host(outs[1]);
        if (vals && oid) {
            double worst = 0;
            if (seed_ivf_verify(Qm, X, ids, b, m, d, K, vals, oid, sentinel, &worst))
                fail(r, "top-k differs from the brute force%s", "");
            if (!(worst <= r->err)) r->err = worst;
        } else {
            fail(r, "cannot read the outputs%s", "");
        }
        free(vals);
        free(oid);
    }
    alloy_launch_free(l);
    for (int i = 0; i < 2; i++) alloy_array_free(outs[i]);
    for (int i = 0; i < 3; i++) alloy_array_free(ins[i]);
    free(Qm);
    free(X);
    free(ids);
}

/* mlstm_step: one recurrent step. Tolerances of test_seed_mlstm.c
 * (check_step): h atol 1e-5 rtol 1e-4; C_out, n_out atol 1e-6 rtol 2e-5;
 * m_out atol 1e-6 rtol 5u. */
static void bench_mlstm(row *r, seed_kernel *sk) {
    int64_t B = 4, NH = small_scale ? 2 : 8, DK = 256, DV = 256;
    const uint32_t TG = 256; /* TG >= DHHV: one dv pass */
    snprintf(r->problem, sizeof r->problem, "B=%lld NH=%lld DHQK=%lld DHHV=%lld", (long long)B,
             (long long)NH, (long long)DK, (long long)DV);
    size_t bh = (size_t)(B * NH), nC = bh * (size_t)(DK * DV);
    int64_t sq[3] = {B, NH, DK}, sv[3] = {B, NH, DV}, sg[2] = {B, NH}, sc[4] = {B, NH, DK, DV};
    float *q = random_f32(bh * (size_t)DK, -1, 1), *k = random_f32(bh * (size_t)DK, -1, 1),
          *v = random_f32(bh * (size_t)DV, -1, 1), *ig = random_f32(bh, -3, 3),
          *fg = random_f32(bh, -4, 6), *C = random_f32(nC, -1, 1),
          *n = random_f32(bh * (size_t)DK, -1, 1), *m = random_f32(bh, -2, 2);
    double *rh = alloc_f64(bh * (size_t)DV), *rC = alloc_f64(nC), *rn = alloc_f64(bh * (size_t)DK),
           *rm = alloc_f64(bh);
    ref_mlstm_step(q, k, v, ig, fg, C, n, m, B, NH, DK, DV, rh, rC, rn, rm);
    alloy_array *ins[8] = {seed_array(dev, ALLOY_FLOAT32, 3, sq, q), seed_array(dev, ALLOY_FLOAT32, 3, sq, k),
                           seed_array(dev, ALLOY_FLOAT32, 3, sv, v), seed_array(dev, ALLOY_FLOAT32, 2, sg, ig),
                           seed_array(dev, ALLOY_FLOAT32, 2, sg, fg), seed_array(dev, ALLOY_FLOAT32, 4, sc, C),
                           seed_array(dev, ALLOY_FLOAT32, 3, sq, n), seed_array(dev, ALLOY_FLOAT32, 2, sg, m)};
    alloy_array *outs[4] = {seed_filled(dev, ALLOY_FLOAT32, 3, sv, NAN),
                            seed_filled(dev, ALLOY_FLOAT32, 4, sc, NAN),
                            seed_filled(dev, ALLOY_FLOAT32, 3, sq, NAN),
                            seed_filled(dev, ALLOY_FLOAT32, 2, sg, NAN)};
    alloy_launch *l = launch_with(4, outs, (uint32_t)NH * TG, (uint32_t)B, TG, 1);
    r->median_s = time_launches(r, sk, 8, ins, l, 4);
    /* C is read and C_out written: the traffic that matters. */
    set_rate(r, 4.0 * (2.0 * (double)nC + (double)bh * (double)(4 * DK + 2 * DV + 6)), "GB/s");
    float *h = seed_host(outs[0]), *C1 = seed_host(outs[1]), *n1 = seed_host(outs[2]),
          *m1 = seed_host(outs[3]);
    check_tol(r, h, rh, bh * (size_t)DV, 1e-5, 1e-4);
    check_tol(r, C1, rC, nC, 1e-6, 2e-5);
    check_tol(r, n1, rn, bh * (size_t)DK, 1e-6, 2e-5);
    check_tol(r, m1, rm, bh, 1e-6, 5 * SEED_U32);
    free(h); free(C1); free(n1); free(m1);
    alloy_launch_free(l);
    for (int i = 0; i < 4; i++) alloy_array_free(outs[i]);
    for (int i = 0; i < 8; i++) alloy_array_free(ins[i]);
    free(q); free(k); free(v); free(ig); free(fg); free(C); free(n); free(m);
    free(rh); free(rC); free(rn); free(rm);
}

/* ---- driver ------------------------------------------------------------------ */

typedef struct bench_case {
    const char *file;
    void (*run)(row *r, seed_kernel *sk);
} bench_case;

static const bench_case CASES[] = {
    {"soft_cap.metal", bench_soft_cap},
    {"memcpy.metal", bench_memcpy},
    {"exp.metal", bench_exp},
    {"depthwise3.metal", bench_depthwise},
    {"qr_col_dot.metal", bench_col_dot_plain},
    {"qr_col_dot_simd.metal", bench_col_dot_simd},
    {"qr_update_vec.metal", bench_update_vec},
    {"gemm_av.metal", bench_gemm_av},
    {"gemm_at_b.metal", bench_gemm_at_b},
    {"ivf_topk_l2.metal", bench_ivf},
    {"mlstm_step.metal", bench_mlstm},
};

static void format_time(double s, char *buf, size_t len) {
    if (s < 0) snprintf(buf, len, "-");
    else if (s < 1e-3) snprintf(buf, len, "%.1f us", s * 1e6);
    else if (s < 1) snprintf(buf, len, "%.2f ms", s * 1e3);
    else snprintf(buf, len, "%.3f s", s);
}

int main(void) {
    const char *scale = getenv("ALLOY_BENCH_SCALE");
    small_scale = scale && !strcmp(scale, "small");
    harness_rng_state = 0x9E3779B97F4A7C15ull; /* fixed inputs: runs are comparable */
    (void)harness_current_skipped;             /* (the harness's; unused here) */

    alloy_status st = alloy_device_get("auto", &dev);
    if (st != ALLOY_OK) {
        fprintf(stderr, "bench_examples: no device: %s: %s\n", alloy_status_name(st),
                alloy_last_error());
        return 2;
    }
    printf("# alloy example kernels\n\n");
    printf("alloy %s; device %s: %s\n", alloy_version(), alloy_device_name(dev),
           alloy_device_description(dev));
    printf("each kernel: one warm-up launch (compiles), then the median of %d-%d timed "
           "launches; checked against a double-precision reference%s\n\n",
           MIN_REPS, MAX_REPS, small_scale ? " (ALLOY_BENCH_SCALE=small)" : "");
    fflush(stdout);

    enum { N_CASES = sizeof CASES / sizeof *CASES };
    row rows[N_CASES];
    int failures = 0;
    double t_all = bench_now();
    for (int c = 0; c < N_CASES; c++) {
        row *r = &rows[c];
        memset(r, 0, sizeof *r);
        r->median_s = r->rate = -1;
        r->ok = 1;
        seed_kernel sk;
        int before = harness_current_failed;
        double t0 = bench_now();
        fprintf(stderr, "bench_examples: %s ...", CASES[c].file);
        if (seed_kernel_load(CASES[c].file, &sk)) {
            r->kernel = alloy_kernel_name(sk.kernel);
            CASES[c].run(r, &sk);
            r->kernel = strdup(r->kernel); /* the name dies with the kernel */
            seed_kernel_free(&sk);
        } else {
            r->kernel = CASES[c].file;
            fail(r, "cannot load examples/%s", CASES[c].file);
        }
        if (harness_current_failed != before) fail(r, "an alloy call failed%s", "");
        if (!r->err_text[0] && !(r->err <= 1.0)) fail(r, "error over the tolerance%s", "");
        if (!r->ok) failures++;
        fprintf(stderr, " %s (%.1f s)\n", r->ok ? "ok" : "FAIL", bench_now() - t0);
    }

    printf("| kernel | problem | device | median time | rate | max error / tolerance | verdict |\n");
    printf("|---|---|---|---:|---:|---:|---|\n");
    for (int c = 0; c < N_CASES; c++) {
        const row *r = &rows[c];
        char t[32], rate[32], err[64];
        format_time(r->median_s, t, sizeof t);
        if (r->rate >= 0) snprintf(rate, sizeof rate, "%.2f %s", r->rate, r->unit);
        else snprintf(rate, sizeof rate, "-");
        if (r->err_text[0]) snprintf(err, sizeof err, "%s", r->err_text);
        else if (isinf(r->err)) snprintf(err, sizeof err, "inf");
        else snprintf(err, sizeof err, "%.3f", r->err);
        printf("| %s | %s | %s | %s | %s | %s | %s |\n", r->kernel, r->problem,
               alloy_device_name(dev), t, rate, err, r->ok ? "ok" : "FAIL");
    }
    printf("\n%d of %d kernels ok (%.1f s in all)\n", N_CASES - failures, N_CASES,
           bench_now() - t_all);
    for (int c = 0; c < N_CASES; c++)
        if (!rows[c].ok) printf("FAIL %s: %s\n", rows[c].kernel, rows[c].why);
    return failures ? 1 : 0;
}
