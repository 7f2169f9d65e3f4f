/* test_nn.c — the fused nn operations (alloy/nn.h): soft-cap, RMSNorm and
 * LayerNorm (whole rows and per head), forward and backward, and the causal
 * depthwise convolution's errors, empty and unaligned operands
 * (test_nn_conv.c has its results), against plain
 * C float64 references on awkward sizes (1, 33, 1000, non-multiples of the
 * block sizes); hostile inputs (|x| up to 1e30 for soft-cap, constant rows
 * for the norms, NaN propagation); every output element written (given
 * outputs are pre-filled with NaN); float64 gradients against central finite
 * differences of the float64 reference; float32/float16/bfloat16 results
 * within their rounding of the float64 ones; errors name their argument. On
 * the device the tests run on (ALLOY_DEVICE, default cpu). */
#include "nn_util.h"

#include "alloy/nn.h"

/* ---- soft-cap ------------------------------------------------------------- */

/* The float64 soft-cap and its gradient, rounded to dt, into fresh arrays. */
static void softcap_ref(alloy_dtype dt, int64_t n, const double *x, const double *dy, double cap, double **ry,
                        double **rdx) {
    *ry = malloc(sizeof(double) * (size_t)n), *rdx = malloc(sizeof(double) * (size_t)n);
    for (int64_t e = 0; e < n; e++) {
        const double t = tanh(x[e] / cap);
        (*ry)[e] = round_to(dt, cap * t);
        (*rdx)[e] = round_to(dt, dy[e] * (1 - t * t));
    }
}

static void test_softcap(void) {
    const int64_t sizes[3] = {1, 33, 1000};
    const double cap = 15;
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < 3; si++) {
            const alloy_dtype dt = DTYPES[di];
            const int64_t n = sizes[si];
            double *x = random_vec(dt, n, -60, 60), *dy = random_vec(dt, n, -2, 2);
            if (n >= 33) { /* hostile: huge magnitudes and NaN */
                x[3] = round_to(dt, dt == ALLOY_FLOAT16 ? 6e4 : 1e30);
                x[4] = -x[3];
                x[5] = NAN;
                dy[6] = NAN;
            }
            double *ry, *rdx;
            softcap_ref(dt, n, x, dy, cap, &ry, &rdx);
            alloy_array *X = dev_array(dt, 1, &n, x), *DY = dev_array(dt, 1, &n, dy);
            alloy_array *Y = nan_array(dt, 1, &n), *DX = nan_array(dt, 1, &n), *gy = Y, *gdx = DX;
            CHECK_OK(alloy_nn_softcap(X, cap, NULL, &Y));
            CHECK_OK(alloy_nn_softcap_backward(X, DY, cap, NULL, &DX));
            CHECK(Y == gy && DX == gdx);
            double *y = host_of(Y), *dx = host_of(DX);
            const double ey = rel_err(y, ry, n), edx = rel_err(dx, rdx, n);
            CHECK_MSG(ey <= 2 * tol(dt), "softcap n=%lld %s: y error %.3g", (long long)n, alloy_dtype_name(dt), ey);
            CHECK_MSG(edx <= 2 * tol(dt), "softcap n=%lld %s: dx error %.3g", (long long)n, alloy_dtype_name(dt),
                      edx);
            if (n >= 33) CHECK(fabs(y[3] - cap) <= cap * tol(dt) && fabs(y[4] + cap) <= cap * tol(dt) &&
                               isnan(y[5]) && isnan(dx[5]) && isnan(dx[6]) && dx[3] == 0);
            if (dt == ALLOY_FLOAT64) /* the gradient against finite differences of the reference */
                for (int64_t e = 0; e < n; e++) {
                    if (!isfinite(x[e]) || !isfinite(dy[e]) || fabs(x[e]) > 1e3) continue;
                    const double h = 1e-5;
                    const double fd = dy[e] * (cap * tanh((x[e] + h) / cap) - cap * tanh((x[e] - h) / cap)) / (2 * h);
                    CHECK_MSG(fabs(fd - dx[e]) <= 1e-8 * fmax(1, fabs(fd)), "softcap fd %lld: %g vs %g",
                              (long long)e, fd, dx[e]);
                }
            /* a new output when none is given */
            alloy_array *Y2 = NULL;
            CHECK_OK(alloy_nn_softcap(X, cap, NULL, &Y2));
            if (Y2) {
                double *y2 = host_of(Y2);
                CHECK(rel_err(y2, ry, n) <= 2 * tol(dt));
                free(y2);
            }
            alloy_array_free(Y2), alloy_array_free(X), alloy_array_free(DY), alloy_array_free(Y),
                alloy_array_free(DX);
            free(x), free(dy), free(ry), free(rdx), free(y), free(dx);
        }
}

/* Several 16-byte chunks a thread per round (ALLOY_NN_SOFTCAP_U = 2, 3, 8, and 1 in threadgroups of 64 or
 * 128: ALLOY_NN_SOFTCAP_TG), forward and backward, on sizes whose last round is partial (some of a thread's
 * chunks past the end) and whose tail is scalar. */
static void test_softcap_rounds(void) {
    static const char *us[5] = {"2", "3", "8", "1", "1"}, *tgs[5] = {"256", "128", "256", "64", "128"};
    const int64_t sizes[2] = {5003, 40001};
    const double cap = 15;
    for (int ui = 0; ui < 5; ui++) {
        setenv("ALLOY_NN_SOFTCAP_U", us[ui], 1);
        setenv("ALLOY_NN_SOFTCAP_TG", tgs[ui], 1);
        for (int di = 0; di < 4; di++)
            for (int si = 0; si < 2; si++) {
                const alloy_dtype dt = DTYPES[di];
                const int64_t n = sizes[si];
                double *x = random_vec(dt, n, -60, 60), *dy = random_vec(dt, n, -2, 2);
                double *ry, *rdx;
                softcap_ref(dt, n, x, dy, cap, &ry, &rdx);
                alloy_array *X = dev_array(dt, 1, &n, x), *DY = dev_array(dt, 1, &n, dy);
                alloy_array *Y = nan_array(dt, 1, &n), *DX = nan_array(dt, 1, &n);
                CHECK_OK(alloy_nn_softcap(X, cap, NULL, &Y));
                CHECK_OK(alloy_nn_softcap_backward(X, DY, cap, NULL, &DX));
                double *y = host_of(Y), *dx = host_of(DX);
                /* (the outputs start as NaN: an element no round wrote fails) */
                CHECK_MSG(rel_err(y, ry, n) <= 2 * tol(dt) && rel_err(dx, rdx, n) <= 2 * tol(dt),
                          "softcap U=%s TG=%s n=%lld %s: y error %.3g, dx error %.3g", us[ui], tgs[ui], (long long)n,
                          alloy_dtype_name(dt), rel_err(y, ry, n), rel_err(dx, rdx, n));
                alloy_array_free(X), alloy_array_free(DY), alloy_array_free(Y), alloy_array_free(DX);
                free(x), free(dy), free(ry), free(rdx), free(y), free(dx);
            }
    }
    unsetenv("ALLOY_NN_SOFTCAP_U");
    unsetenv("ALLOY_NN_SOFTCAP_TG");
}

/* One unit in the last place of v as dtype dt (float16, bfloat16: normal and subnormal). */
static double ulp_of(alloy_dtype dt, double v) {
    const int mant = dt == ALLOY_FLOAT16 ? 10 : 7, emin = dt == ALLOY_FLOAT16 ? -14 : -126;
    int e = v != 0 ? (int)floor(log2(fabs(v))) : emin;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

/* The 16-bit forward (x times 1 / cap, not x / cap) element by element: within one ulp of the float64
 * value (the rounding is half of that) over x / cap from 1e-6 to 8 of either sign, zero and huge values;
 * 4099 elements, so the last 3 take the scalar loop. */
static void test_softcap_16bit(void) {
    const double cap = 15;
    const int64_t n = 4099;
    for (int di = 2; di < 4; di++) {
        const alloy_dtype dt = DTYPES[di];
        double *x = malloc(sizeof(double) * (size_t)n);
        for (int64_t e = 0; e < n; e++) {
            const double s = 1e-6 * pow(8e6, (double)(e / 2) / (double)(n / 2)); /* 1e-6 .. 8 */
            x[e] = round_to(dt, (e & 1 ? -cap : cap) * s * harness_uniform(0.97, 1.03));
        }
        x[7] = round_to(dt, cap * 0.6), x[8] = -x[7], x[9] = 0, x[10] = round_to(dt, 1e4);
        alloy_array *X = dev_array(dt, 1, &n, x), *Y = NULL;
        CHECK_OK(alloy_nn_softcap(X, cap, NULL, &Y));
        double *y = Y ? host_of(Y) : NULL, worst = 0;
        for (int64_t e = 0; y && e < n; e++) {
            const double r = cap * tanh(x[e] / cap);
            worst = fmax(worst, fabs(y[e] - r) / ulp_of(dt, r));
        }
        CHECK_MSG(y && worst <= 1.0, "softcap %s: %.3g ulp from float64", alloy_dtype_name(dt), worst);
        free(x), free(y);
        alloy_array_free(X), alloy_array_free(Y);
    }
}

/* 16-bit data's two tanh: tanhf (ALLOY_NN_SOFTCAP_FAST=0) and the default, one exponential and one approximate
 * division (the other tests run that one): test_softcap's and test_softcap_rounds' cases with tanhf, then for
 * both element by element forward and backward (dy = 1, so dx = 1 - tanh^2 exactly representable as a
 * target) within one ulp of float64 (tanhf's backward: plus 2^-23, its 1 - t^2 cancels) over x / cap from
 * 1e-6 to 12 of either sign, around the switch between the series and the exponential (|x / cap| = 1/16), zero, huge,
 * infinite and NaN inputs. */
static void test_softcap_fast(void) {
    setenv("ALLOY_NN_SOFTCAP_FAST", "0", 1);
    test_softcap();
    test_softcap_rounds();
    const double cap = 15;
    const int64_t n = 6007;
    for (int fd = 0; fd < 4; fd++) {
        const int fast = fd / 2;
        const alloy_dtype dt = DTYPES[2 + fd % 2];
        setenv("ALLOY_NN_SOFTCAP_FAST", fast ? "1" : "0", 1);
        double *x = malloc(sizeof(double) * (size_t)n), *dy = malloc(sizeof(double) * (size_t)n);
        for (int64_t e = 0; e < n; e++) {
            const double s = e < 4000 ? 1e-6 * pow(1.2e7, (double)(e / 2) / 2000.0)  /* 1e-6 .. 12 */
                                      : 0.0625 * (1 + ((double)(e - 4000) / 1000.0 - 1) * 0.05); /* 1/16 +-5% */
            x[e] = round_to(dt, (e & 1 ? -cap : cap) * s);
            dy[e] = 1;
        }
        x[7] = 0, x[8] = -0.0, x[9] = round_to(dt, 1e4), x[10] = -x[9], x[11] = INFINITY, x[12] = -INFINITY;
        x[13] = NAN;
        alloy_array *X = dev_array(dt, 1, &n, x), *DY = dev_array(dt, 1, &n, dy), *Y = NULL, *DX = NULL;
        CHECK_OK(alloy_nn_softcap(X, cap, NULL, &Y));
        CHECK_OK(alloy_nn_softcap_backward(X, DY, cap, NULL, &DX));
        double *y = Y ? host_of(Y) : NULL, *dx = DX ? host_of(DX) : NULL, wy = 0, wd = 0;
        for (int64_t e = 0; y && dx && e < n; e++) {
            if (isnan(x[e])) {
                CHECK(isnan(y[e]) && isnan(dx[e]));
                continue;
            }
            const double t = isinf(x[e]) ? (x[e] > 0 ? 1 : -1) : tanh(x[e] / cap), ry = cap * t, rd = 1 - t * t;
            wy = fmax(wy, fabs(y[e] - ry) / ulp_of(dt, ry));
            /* tanhf's 1 - t^2 cancels where t is near 1: a float32 rounding of t^2 (2^-24) on top */
            wd = fmax(wd, fabs(dx[e] - rd) / (ulp_of(dt, rd) + (fast ? 0.0 : 0x1p-23)));
        }
        CHECK_MSG(y && dx && wy <= 1.0 && wd <= 1.0, "softcap %s %s: y %.3g ulp, dx %.3g ulp from float64",
                  fast ? "fast" : "tanhf", alloy_dtype_name(dt), wy, wd);
        CHECK(y && signbit(y[8]) && y[7] == 0);
        free(x), free(dy), free(y), free(dx);
        alloy_array_free(X), alloy_array_free(DY), alloy_array_free(Y), alloy_array_free(DX);
    }
    unsetenv("ALLOY_NN_SOFTCAP_FAST");
}

/* ---- norms ---------------------------------------------------------------- */

/* float64 reference of y (R rows of D, groups of DH). */
static void norm_ref(int rms, const double *x, const double *w, const double *b, int64_t R, int64_t D,
                     int64_t DH, double eps, double *y) {
    for (int64_t g = 0; g < R * (D / DH); g++) {
        const double *xg = x + g * DH;
        const int64_t col0 = (g % (D / DH)) * DH;
        double mu = 0, var = 0;
        if (!rms) {
            for (int64_t j = 0; j < DH; j++) mu += xg[j];
            mu /= (double)DH;
        }
        for (int64_t j = 0; j < DH; j++) var += (xg[j] - mu) * (xg[j] - mu);
        const double rstd = 1 / sqrt(var / (double)DH + eps);
        for (int64_t j = 0; j < DH; j++)
            y[g * DH + j] = (xg[j] - mu) * rstd * w[col0 + j] + (b ? b[col0 + j] : 0);
    }
}

/* Central difference of L = sum dy * y with respect to v[e] (v is x, w or b).
 * *noise: the difference's own rounding, about 2 eps sum |dy y| / h (L is a
 * sum of R*D terms, so for long rows it reaches the tests' bound by itself). */
static double norm_fd(int rms, double *x, double *w, double *b, const double *dy, int64_t R, int64_t D,
                      int64_t DH, double eps, double *v, int64_t e, double *scratch, double *noise) {
    const double keep = v[e], h = 1e-6 * fmax(1, fabs(keep));
    v[e] = keep + h;
    norm_ref(rms, x, w, b, R, D, DH, eps, scratch);
    const double lp = dot(dy, scratch, R * D);
    double mag = 0;
    for (int64_t j = 0; j < R * D; j++) mag += fabs(dy[j] * scratch[j]);
    v[e] = keep - h;
    norm_ref(rms, x, w, b, R, D, DH, eps, scratch);
    const double lm = dot(dy, scratch, R * D);
    v[e] = keep;
    *noise = 2 * DBL_EPSILON * mag / h;
    return (lp - lm) / (2 * h);
}

/* How far a gradient element is past the finite difference's own noise, relative to the gradient where it
 * exceeds 1: the difference's truncation error grows with the curvature, which is large where the gradient
 * is (RMSNorm of one element near x = 0: dy/dx = w eps / (x^2 + eps)^1.5, up to 1 / sqrt(eps); a draw there
 * was 2.7e-6 off in absolute terms). */
static double fd_excess(double fd, double noise, double g) { return fmax(0, fabs(fd - g) - noise) / fmax(1, fabs(g)); }

typedef struct norm_case {
    int64_t R, D, DH; /* DH 0: whole rows */
} norm_case;

/* float64 dx, dweight and dbias of the norms at the given statistics st ((mu, rstd) a group; RMSNorm's mu
 * is not read, 0): what the _stats backward computes, from any statistics. */
static void norm_bwd_ref_stats(int rms, const double *x, const double *w, const double *dy, const double *st,
                               int64_t R, int64_t D, int64_t DH, double *dx, double *dw, double *db) {
    const int64_t G = D / DH;
    for (int64_t j = 0; j < D; j++) dw[j] = db[j] = 0;
    for (int64_t g = 0; g < R * G; g++) {
        const double mu = rms ? 0 : st[2 * g], rstd = st[2 * g + 1];
        const int64_t col0 = (g % G) * DH;
        double sg = 0, sgx = 0;
        for (int64_t j = 0; j < DH; j++) {
            const double gj = dy[g * DH + j] * w[col0 + j], xh = (x[g * DH + j] - mu) * rstd;
            sg += gj;
            sgx += gj * xh;
        }
        const double mg = rms ? 0 : sg / (double)DH, mgx = sgx / (double)DH;
        for (int64_t j = 0; j < DH; j++) {
            const double gj = dy[g * DH + j] * w[col0 + j], xh = (x[g * DH + j] - mu) * rstd;
            dx[g * DH + j] = rstd * (gj - mg - xh * mgx);
            dw[col0 + j] += dy[g * DH + j] * xh;
            db[col0 + j] += dy[g * DH + j];
        }
    }
}

/* run_norm also checks the _stats forms while this is set (test_norms_stats): y bit for bit the plain
 * forward's, the statistics against float64, and the backward from them against norm_bwd_ref_stats. */
static int g_stats;

static void check_stats_forms(int rms, norm_case nc, alloy_dtype dt, alloy_array *X, alloy_array *W, alloy_array *B,
                              alloy_array *DY, const double *y, const double *x, const double *w, const double *dy,
                              double eps) {
    const int64_t R = nc.R, D = nc.D, DH = nc.DH ? nc.DH : D, n = R * D, G = D / DH;
    const int64_t shape[2] = {R, D}, s_stats[3] = {R, G, 2};
    const alloy_dtype at = dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    alloy_array *Y = nan_array(dt, 2, shape), *S = nan_array(at, 3, s_stats), *DX = nan_array(dt, 2, shape);
    alloy_array *DW = nan_array(dt, 1, &D), *DB = nan_array(dt, 1, &D);
    if (rms) CHECK_OK(alloy_nn_rms_norm_stats(X, W, nc.DH, eps, NULL, &Y, &S));
    else CHECK_OK(alloy_nn_layer_norm_stats(X, W, B, nc.DH, eps, NULL, &Y, &S));
    if (rms) CHECK_OK(alloy_nn_rms_norm_backward_stats(X, W, DY, S, nc.DH, NULL, &DX, &DW));
    else CHECK_OK(alloy_nn_layer_norm_backward_stats(X, W, DY, S, nc.DH, NULL, &DX, &DW, &DB));
    double *y2 = host_of(Y), *st = host_of(S), *dx = host_of(DX), *dw = host_of(DW), *db = host_of(DB);
    const char *name = rms ? "rms" : "layer";
    int same = 1;
    for (int64_t e = 0; e < n; e++) same &= (isnan(y[e]) && isnan(y2[e])) || y[e] == y2[e];
    CHECK_MSG(same, "%s_stats R=%lld D=%lld DH=%lld %s: y differs from the plain forward's", name, (long long)R,
              (long long)D, (long long)DH, alloy_dtype_name(dt));
    /* the statistics against float64 (float32 sums: about DH float32 ulps of the group's magnitude) */
    const double tmu = dt == ALLOY_FLOAT64 ? 1e-12 : 1e-4, trs = dt == ALLOY_FLOAT64 ? 1e-12 : 1e-3;
    double worst_mu = 0, worst_rs = 0;
    int zero_mean = 1, nan_kept = 1;
    for (int64_t g = 0; g < R * G; g++) {
        double mu = 0, var = 0, mx = 0;
        int has_nan = 0;
        for (int64_t j = 0; j < DH; j++) has_nan |= isnan(x[g * DH + j]), mx = fmax(mx, fabs(x[g * DH + j]));
        if (!rms) {
            for (int64_t j = 0; j < DH; j++) mu += x[g * DH + j];
            mu /= (double)DH;
        }
        for (int64_t j = 0; j < DH; j++) var += (x[g * DH + j] - mu) * (x[g * DH + j] - mu);
        const double rstd = 1 / sqrt(var / (double)DH + eps);
        if (rms) zero_mean &= st[2 * g] == 0;
        if (has_nan) {
            nan_kept &= isnan(st[2 * g + 1]);
            continue;
        }
        worst_mu = fmax(worst_mu, fabs(st[2 * g] - mu) / fmax(mx, 1e-300));
        worst_rs = fmax(worst_rs, fabs(st[2 * g + 1] - rstd) / rstd);
    }
    CHECK_MSG(worst_mu <= tmu && worst_rs <= trs && zero_mean && nan_kept,
              "%s_stats R=%lld D=%lld DH=%lld %s: mean error %.3g, rstd error %.3g, RMSNorm means 0: %d, NaN kept: %d",
              name, (long long)R, (long long)D, (long long)DH, alloy_dtype_name(dt), worst_mu, worst_rs, zero_mean,
              nan_kept);
    /* the backward from those statistics against float64 at the same statistics */
    double *rdx = malloc(sizeof(double) * (size_t)(n ? n : 1)), *rdw = malloc(sizeof(double) * (size_t)(D ? D : 1));
    double *rdb = malloc(sizeof(double) * (size_t)(D ? D : 1));
    norm_bwd_ref_stats(rms, x, w, dy, st, R, D, DH, rdx, rdw, rdb);
    for (int64_t e = 0; e < n; e++) rdx[e] = round_to(dt, rdx[e]);
    const double ex = rel_err(dx, rdx, n), ew = rel_err(dw, rdw, D), eb = rms ? 0 : rel_err(db, rdb, D);
    CHECK_MSG(ex <= 4 * tol(dt) && ew <= 4 * tol(dt) && eb <= 4 * tol(dt),
              "%s_backward_stats R=%lld D=%lld DH=%lld %s: dx %.3g dweight %.3g dbias %.3g", name, (long long)R,
              (long long)D, (long long)DH, alloy_dtype_name(dt), ex, ew, eb);
    free(y2), free(st), free(dx), free(dw), free(db), free(rdx), free(rdw), free(rdb);
    alloy_array *all[] = {Y, S, DX, DW, DB};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
}

static void run_norm(int rms, int with_bias, norm_case nc, alloy_dtype dt, int hostile) {
    const int64_t R = nc.R, D = nc.D, DH = nc.DH ? nc.DH : D, n = R * D;
    const double eps = 1e-5;
    double *x = random_vec(dt, n, -3, 3), *w = random_vec(dt, D, 0.5, 1.5), *b = random_vec(dt, D, -1, 1);
    double *dy = random_vec(dt, n, -1, 1);
    if (!with_bias || rms) free(b), b = NULL; /* RMSNorm has no bias */
    if (hostile == 1 && R >= 3) {
        for (int64_t j = 0; j < D; j++) x[j] = round_to(dt, 2.5); /* a constant row */
        x[2 * D + 1] = NAN;                                       /* NaN in row 2's first group */
    }
    if (hostile == 2) /* rows far from 0 with little spread, each group's first element an outlier */
        for (int64_t e = 0; e < n; e++)
            x[e] = round_to(dt, 64.0 * (double)(1 + e / D) + (e % DH == 0 ? 3.0 : x[e] / 4));
    double *ry = malloc(sizeof(double) * (size_t)(n ? n : 1));
    norm_ref(rms, x, w, b, R, D, DH, eps, ry);
    for (int64_t e = 0; e < n; e++) ry[e] = round_to(dt, ry[e]);
    const int64_t shape[2] = {R, D};
    alloy_array *X = dev_array(dt, 2, shape, x), *W = dev_array(dt, 1, &D, w), *B = b ? dev_array(dt, 1, &D, b) : NULL;
    alloy_array *DY = dev_array(dt, 2, shape, dy), *Y = nan_array(dt, 2, shape), *DX = nan_array(dt, 2, shape);
    alloy_array *DW = nan_array(dt, 1, &D), *DB = nan_array(dt, 1, &D);
    if (rms) CHECK_OK(alloy_nn_rms_norm(X, W, nc.DH, eps, NULL, &Y));
    else CHECK_OK(alloy_nn_layer_norm(X, W, B, nc.DH, eps, NULL, &Y));
    if (rms) CHECK_OK(alloy_nn_rms_norm_backward(X, W, DY, nc.DH, eps, NULL, &DX, &DW));
    else CHECK_OK(alloy_nn_layer_norm_backward(X, W, DY, nc.DH, eps, NULL, &DX, &DW, &DB));
    double *y = host_of(Y), *dx = host_of(DX), *dw = host_of(DW), *db = host_of(DB);
    const double ey = rel_err(y, ry, n);
    CHECK_MSG(ey <= 2 * tol(dt), "%s R=%lld D=%lld DH=%lld %s: y error %.3g", rms ? "rms" : "layer", (long long)R,
              (long long)D, (long long)DH, alloy_dtype_name(dt), ey);
    if (g_stats) check_stats_forms(rms, nc, dt, X, W, B, DY, y, x, w, dy, eps);
    if (hostile == 1 && R >= 3) {
        /* the constant row: y = bias exactly (LayerNorm), finite (RMSNorm); NaN stays in its group */
        for (int64_t j = 0; j < D; j++) CHECK(isfinite(y[j]) && isfinite(dx[j]));
        if (!rms) for (int64_t j = 0; j < D; j++) CHECK(y[j] == (b ? b[j] : 0));
        for (int64_t j = 0; j < D; j++) CHECK(isnan(y[2 * D + j]) == (j < DH));
    }
    /* gradients: float64 against finite differences; the rest against float64 alloy (checked here too) */
    double *scratch = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (dt == ALLOY_FLOAT64 && hostile != 1) {
        double worst = 0, nz = 0, fd;
        for (int64_t e = 0; e < n; e += 1 + n / 97) {
            fd = norm_fd(rms, x, w, b, dy, R, D, DH, eps, x, e, scratch, &nz);
            worst = fmax(worst, fd_excess(fd, nz, dx[e]));
        }
        for (int64_t e = 0; e < D; e += 1 + D / 53) {
            fd = norm_fd(rms, x, w, b, dy, R, D, DH, eps, w, e, scratch, &nz);
            worst = fmax(worst, fd_excess(fd, nz, dw[e]));
            if (b) {
                fd = norm_fd(rms, x, w, b, dy, R, D, DH, eps, b, e, scratch, &nz);
                worst = fmax(worst, fd_excess(fd, nz, db[e]));
            }
        }
        CHECK_MSG(worst <= 1e-6, "%s R=%lld D=%lld DH=%lld: gradient past the finite differences (beyond their rounding) by %.3g",
                  rms ? "rms" : "layer", (long long)R, (long long)D, (long long)DH, worst);
    } else if (hostile != 1) {
        alloy_array *X64 = dev_array(ALLOY_FLOAT64, 2, shape, x), *W64 = dev_array(ALLOY_FLOAT64, 1, &D, w);
        alloy_array *DY64 = dev_array(ALLOY_FLOAT64, 2, shape, dy), *rdx = NULL, *rdw = NULL, *rdb = NULL;
        if (rms) CHECK_OK(alloy_nn_rms_norm_backward(X64, W64, DY64, nc.DH, eps, NULL, &rdx, &rdw));
        else CHECK_OK(alloy_nn_layer_norm_backward(X64, W64, DY64, nc.DH, eps, NULL, &rdx, &rdw, &rdb));
        double *hx = host_of(rdx), *hw = host_of(rdw), *hb = rdb ? host_of(rdb) : NULL;
        for (int64_t e = 0; e < n; e++) hx[e] = round_to(dt, hx[e]);
        /* dweight sums R rows: its rounding grows with sqrt(R) of the terms' */
        const double ex = rel_err(dx, hx, n), ew = rel_err(dw, hw, D), eb = hb ? rel_err(db, hb, D) : 0;
        CHECK_MSG(ex <= 4 * tol(dt) && ew <= 4 * tol(dt) && eb <= 4 * tol(dt),
                  "%s R=%lld D=%lld DH=%lld %s: dx %.3g dweight %.3g dbias %.3g", rms ? "rms" : "layer",
                  (long long)R, (long long)D, (long long)DH, alloy_dtype_name(dt), ex, ew, eb);
        free(hx), free(hw), free(hb);
        alloy_array_free(X64), alloy_array_free(W64), alloy_array_free(DY64), alloy_array_free(rdx),
            alloy_array_free(rdw), alloy_array_free(rdb);
    }
    if (hostile != 1) /* every element written */
        for (int64_t e = 0; e < D; e++) CHECK(isfinite(dw[e]) && (rms || isfinite(db[e])));
    free(scratch), free(x), free(w), free(b), free(dy), free(ry), free(y), free(dx), free(dw), free(db);
    alloy_array *all[] = {X, W, B, DY, Y, DX, DW, DB};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
}

static void test_norms(void) {
    /* 1000: 16-byte chunks with a partial last chunk per lane; 33, 11: scalar accesses; 2100, 2200: more
     * than one SIMD group holds (2 to 8 SIMD groups per group); 8500: more than 8 hold in float32 and
     * float64 (the threadgroup-per-group kernels); (530, 64, 8): each SIMD group loops over rows, several
     * threadgroups per head; (9, 1024): the benchmark's rows (one SIMD group each, 8 float32 chunks a lane),
     * an odd count; (5, 2048): 16-bit LayerNorm's backward sums too large for one SIMD group's share of 64 KB
     * (2 SIMD groups), RMSNorm's not; (3, 4097): 8 SIMD groups of scalar accesses (16-bit, float32) and the
     * threadgroup-per-group kernels (float64); (11, 4096, 512): heads of the benchmark's per-head rows */
    const norm_case cases[14] = {{1, 1, 0},    {3, 33, 0},   {5, 1000, 0}, {7, 96, 32},  {40, 40, 8},
                                 {1, 33, 11},  {2, 2100, 0}, {530, 64, 8}, {2, 8500, 0}, {5, 4400, 2200},
                                 {9, 1024, 0}, {5, 2048, 0}, {3, 4097, 0}, {11, 4096, 512}};
    for (int rms = 0; rms <= 1; rms++)
        for (int ci = 0; ci < 14; ci++)
            for (int di = 0; di < 4; di++) {
                run_norm(rms, !rms && ci % 2 == 0, cases[ci], DTYPES[di], 0);
                if (ci == 1 || ci == 3 || ci == 10) run_norm(rms, 1, cases[ci], DTYPES[di], 1);
            }
}

/* The _stats forms (check_stats_forms, every dtype, both norms): one element, scalar accesses, heads, rows of
 * 1024 (one SIMD group, 8 float32 chunks a lane: the statistics form's own defaults), several SIMD groups a
 * row, the threadgroup-per-group kernels (8500), heads of 512, SIMD groups looping over rows; the constant row
 * and NaN; then the backward's switches (column sums in registers, two SIMD groups a row, two rows ahead) on
 * rows of 1024 and heads of 512 in float32 and bfloat16. A test of its own: every form is a kernel of its own
 * to compile, and the CPU debug twin of this file must stay within its time limit. */
static void test_norms_stats(void) {
    const norm_case cases[8] = {{1, 1, 0},  {3, 33, 0},      {7, 96, 32},     {9, 1024, 0},
                                {2, 2100, 0}, {2, 8500, 0}, {11, 4096, 512}, {530, 64, 8}};
    g_stats = 1;
    for (int rms = 0; rms <= 1; rms++)
        for (int ci = 0; ci < 8; ci++)
            for (int di = 0; di < 4; di++) {
                run_norm(rms, !rms && ci % 2 == 0, cases[ci], DTYPES[di], 0);
                if (ci == 1 || ci == 3) run_norm(rms, 1, cases[ci], DTYPES[di], 1);
            }
    static const char *vars[3][2] = {
        {"ALLOY_NN_NORM_BWD_REGS", "1"}, {"ALLOY_NN_NORM_BWD_MAXNC", "2"}, {"ALLOY_NN_NORM_BWD_PD", "2"}};
    for (int v = 0; v < 3 && !harness_leave_out(1); v++) { /* the switches: timing variants */
        setenv(vars[v][0], vars[v][1], 1);
        for (int rms = 0; rms < 2; rms++)
            for (int ci = 3; ci <= 6; ci += 3)
                for (int di = 1; di < 4; di += 2) /* float32, bfloat16; rows far from 0 for the 16-bit one */
                    run_norm(rms, ci == 3, cases[ci], DTYPES[di], di == 3 ? 2 : 0);
        unsetenv(vars[v][0]);
    }
    g_stats = 0;
}

/* A grid of row lengths and head sizes around the kernels' boundaries (one lane's chunk, a SIMD
 * group's 32 lanes, 1 KB groups that take the forward's looped grid, several SIMD groups a group,
 * the threadgroup-per-group kernels), rows from 1 to a few hundred, the dtypes and both norms in
 * turn. */
static void test_norms_grid(void) {
    static const int64_t Ds[] = {2, 31, 255, 256, 257, 513, 1022, 2304, 5000};
    static const int64_t heads[] = {0, 1, 8, 64, 128, 256};
    int x = 0;
    for (int a = 0; a < 9; a++)
        for (int b = 0; b < 6; b++) {
            const int64_t D = Ds[a], DH = heads[b];
            if (DH && (DH > D || D % DH)) continue;
            const norm_case c = {1 + (a * 53 + b * 17) % 300, D, DH};
            if (!harness_leave_out(x % 3 != 0)) run_norm(x % 2, x % 3 == 0, c, DTYPES[x % 4], 0);
            x++;
        }
}

/* LayerNorm's backward with its statistics in one reduction round (ONEPASS: the default for float32
 * groups of 1024 and more) and in two (the default elsewhere), each forced on every case: the lanes'
 * and SIMD groups' partial counts, means, squared deviations and g sums combined pairwise give what
 * the two rounds give, for scalar and 16-byte accesses, partial chunks, several SIMD groups a group
 * and heads. */
static void test_norms_onepass(void) {
    const norm_case cases[7] = {{3, 33, 0}, {5, 1000, 0}, {40, 40, 8}, {2, 2100, 0}, {5, 4400, 2200},
                                {5, 2048, 0}, {11, 4096, 512}};
    for (int on = 1; on >= 0; on--) {
        setenv("ALLOY_NN_NORM_BWD_ONEPASS", on ? "1" : "0", 1);
        for (int ci = 0; ci < 7; ci++)
            for (int di = 0; di < 4; di++) run_norm(0, ci % 2 == 0, cases[ci], DTYPES[di], 0);
    }
    unsetenv("ALLOY_NN_NORM_BWD_ONEPASS");
}

/* LayerNorm's statistics from sums shifted by the row's first element (ALLOY_NN_NORM_BWD_SHIFT=1, 16-bit
 * data's default, one SIMD group a row) and in two rounds (=0): rows and heads of several sizes, partial
 * chunks, the constant row and NaN, and rows far from 0 whose first element is an outlier (the shift's
 * worst case: its cancellation). */
static void test_norms_shift(void) {
    const norm_case cases[6] = {{3, 33, 0}, {5, 1000, 0}, {40, 40, 8}, {5, 1024, 0}, {11, 4096, 512},
                                {4, 2048, 256}};
    for (int on = 1; on >= 0; on--) {
        setenv("ALLOY_NN_NORM_BWD_SHIFT", on ? "1" : "0", 1);
        for (int ci = 0; ci < 6; ci++)
            for (int di = 2; di < 4; di++)
                for (int hostile = 0; hostile < 3; hostile++) run_norm(0, ci % 2 == 0, cases[ci], DTYPES[di], hostile);
    }
    unsetenv("ALLOY_NN_NORM_BWD_SHIFT");
}

/* The backward's timing switches (ALLOY_NN_NORM_BWD_REGS: column sums in registers, LayerNorm's dbias sums
 * too; _MAXNC: more SIMD groups a group; _PD: rows loaded ahead, 0 and 2; _OPQ: 16-bit elements widened by
 * inline PTX, CUDA only: float16 RMSNorm's off by default), each forced on RMSNorm and
 * LayerNorm with rows and heads, partial chunks and the hostile rows: any of them may become a default
 * after a timing, and each must give what the defaults give. */
static void test_norms_variants(void) {
    const norm_case cases[5] = {{3, 33, 0}, {5, 1024, 0}, {40, 40, 8}, {11, 4096, 512}, {4, 2048, 256}};
    static const char *vars[5][2] = {{"ALLOY_NN_NORM_BWD_REGS", "1"},
                                     {"ALLOY_NN_NORM_BWD_MAXNC", "2"},
                                     {"ALLOY_NN_NORM_BWD_PD", "0"},
                                     {"ALLOY_NN_NORM_BWD_PD", "2"},
                                     {"ALLOY_NN_NORM_BWD_OPQ", "1"}};
    for (int v = 0; v < 6; v++) {
        /* v = 5: REGS and MAXNC together (two SIMD groups a row of 1024, each lane's sums in registers) */
        if (v < 5) setenv(vars[v][0], vars[v][1], 1);
        else setenv(vars[0][0], "1", 1), setenv(vars[1][0], "2", 1);
        for (int rms = 0; rms < 2; rms++)
            for (int ci = 0; ci < 5; ci++)
                for (int di = 0; di < 4; di++) {
                    /* rows far from 0 (hostile 2) for 16-bit data only: float32 centring after a rounded
                     * mean loses eps * |mean| / spread, beyond the test's float32 tolerance at R = 40 */
                    const int hostile = (ci + v) % 3 == 2 && di < 2 ? 0 : (ci + v) % 3;
                    run_norm(rms, ci % 2 == 0, cases[ci], DTYPES[di], hostile);
                }
        unsetenv(vars[0][0]), unsetenv(vars[1][0]), unsetenv(vars[2][0]), unsetenv(vars[4][0]);
    }
}

/* The forward's threadgroups of each size (ALLOY_NN_NORM_FWD_SG=1, 2, 4, 8; the defaults: 1 for float32 and
 * 2 for 16-bit data on groups one SIMD group holds, else 8; the kernel takes at least WG), each forced on
 * RMSNorm and LayerNorm: one SIMD group a row (rows of 1024, partial chunks), several (2100: 2 to 8 a row, so
 * the switch is raised to WG), heads that take the looped grid with the next row loaded ahead (16-bit heads
 * of 512, heads of 8), rows past a threadgroup's share (530 rows), the hostile rows; SG=1 on every case and
 * dtype, 2, 4 and 8 on three cases in float32 and bfloat16 (each (SG, dtype, size) is a kernel of its own to
 * compile). */
static void test_norms_fwd_sg(void) {
    const norm_case cases[6] = {{3, 33, 0}, {9, 1024, 0}, {2, 2100, 0}, {530, 64, 8}, {11, 4096, 512}, {5, 1000, 0}};
    static const char *sgs[4] = {"1", "2", "4", "8"};
    for (int v = 0; v < 4; v++) {
        setenv("ALLOY_NN_NORM_FWD_SG", sgs[v], 1);
        for (int rms = 0; rms < 2; rms++)
            for (int ci = 0; ci < 6; ci++) {
                if (v > 0 && ci != 1 && ci != 2 && ci != 4) continue; /* 2, 4, 8: rows, several SIMD groups, heads */
                for (int di = 0; di < 4; di++) {
                    if (v > 0 && di % 2 == 0) continue; /* 2, 4, 8: float32 and bfloat16 */
                    /* rows far from 0 for 16-bit data only, as above */
                    run_norm(rms, ci % 2 == 0, cases[ci], DTYPES[di], (ci + v) % 3 == 2 && di < 2 ? 0 : (ci + v) % 3);
                }
            }
    }
    unsetenv("ALLOY_NN_NORM_FWD_SG");
}

/* The _stats backward reads the statistics it is given: statistics that are not x's (each group's mean
 * moved and rstd scaled) give the gradient at those statistics (norm_bwd_ref_stats), on the row kernels
 * (rows, heads, several SIMD groups a group) and on the threadgroup-per-group kernels (8500 float32 and
 * float64), for every dtype. */
static void test_norms_given_stats(void) {
    const norm_case cases[5] = {{3, 33, 0}, {9, 1024, 0}, {11, 4096, 512}, {2, 2100, 0}, {2, 8500, 0}};
    for (int rms = 0; rms < 2; rms++)
        for (int ci = 0; ci < 5; ci++)
            for (int di = 0; di < 4; di++) {
                const alloy_dtype dt = DTYPES[di], at = di == 0 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
                const norm_case c = cases[ci];
                const int64_t R = c.R, D = c.D, DH = c.DH ? c.DH : D, G = D / DH, n = R * D;
                const int64_t shape[2] = {R, D}, s_stats[3] = {R, G, 2};
                double *x = random_vec(dt, n, -3, 3), *w = random_vec(dt, D, 0.5, 1.5), *dy = random_vec(dt, n, -1, 1);
                double *st = malloc(sizeof(double) * (size_t)(2 * R * G));
                for (int64_t g = 0; g < R * G; g++) {
                    st[2 * g] = round_to(at, harness_uniform(-0.5, 0.5));
                    st[2 * g + 1] = round_to(at, harness_uniform(0.3, 2.0));
                }
                alloy_array *X = dev_array(dt, 2, shape, x), *W = dev_array(dt, 1, &D, w), *DY = dev_array(dt, 2, shape, dy);
                alloy_array *S = dev_array(at, 3, s_stats, st), *DX = nan_array(dt, 2, shape);
                alloy_array *DW = nan_array(dt, 1, &D), *DB = nan_array(dt, 1, &D);
                if (rms) CHECK_OK(alloy_nn_rms_norm_backward_stats(X, W, DY, S, c.DH, NULL, &DX, &DW));
                else CHECK_OK(alloy_nn_layer_norm_backward_stats(X, W, DY, S, c.DH, NULL, &DX, &DW, &DB));
                double *dx = host_of(DX), *dw = host_of(DW), *db = host_of(DB);
                double *rdx = malloc(sizeof(double) * (size_t)n), *rdw = malloc(sizeof(double) * (size_t)D);
                double *rdb = malloc(sizeof(double) * (size_t)D);
                norm_bwd_ref_stats(rms, x, w, dy, st, R, D, DH, rdx, rdw, rdb);
                for (int64_t e = 0; e < n; e++) rdx[e] = round_to(dt, rdx[e]);
                const double ex = rel_err(dx, rdx, n), ew = rel_err(dw, rdw, D), eb = rms ? 0 : rel_err(db, rdb, D);
                CHECK_MSG(ex <= 4 * tol(dt) && ew <= 4 * tol(dt) && eb <= 4 * tol(dt),
                          "%s_backward_stats, given statistics, R=%lld D=%lld DH=%lld %s: dx %.3g dweight %.3g dbias %.3g",
                          rms ? "rms" : "layer", (long long)R, (long long)D, (long long)DH, alloy_dtype_name(dt), ex, ew,
                          eb);
                free(x), free(w), free(dy), free(st), free(dx), free(dw), free(db), free(rdx), free(rdw), free(rdb);
                alloy_array *all[] = {X, W, DY, S, DX, DW, DB};
                for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
            }
}

/* A row-contiguous view of x starting one element into a buffer of its own: not 16-byte aligned, so the
 * kernels take their scalar accesses. */
static alloy_array *offset_array(alloy_dtype dt, int nd, const int64_t *shape, const double *x) {
    const int64_t c = count(nd, shape), c1 = c + 1;
    double *pad = malloc(sizeof(double) * (size_t)c1);
    pad[0] = 0;
    memcpy(pad + 1, x, sizeof(double) * (size_t)c);
    alloy_array *buf = dev_array(dt, 1, &c1, pad), *v = NULL;
    free(pad);
    CHECK_OK(alloy_array_wrap(ku_device(), alloy_array_data(buf), dt, nd, shape, NULL, 1,
                              (void (*)(void *))alloy_array_free, buf, &v));
    return v;
}

/* Unaligned operands and results give what aligned ones give (within rounding of the reference). */
static void test_unaligned(void) {
    for (int di = 0; di < 4; di++) {
        const alloy_dtype dt = DTYPES[di];
        const int64_t R = 3, D = 1000, n = R * D, shape[2] = {R, D};
        const double cap = 15, eps = 1e-5;
        double *x = random_vec(dt, n, -30, 30), *dy = random_vec(dt, n, -1, 1), *w = random_vec(dt, D, 0.5, 1.5);
        double *b = random_vec(dt, D, -1, 1), *ry = malloc(sizeof(double) * (size_t)n);
        alloy_array *X = offset_array(dt, 2, shape, x), *DY = offset_array(dt, 2, shape, dy);
        alloy_array *W = offset_array(dt, 1, &D, w), *B = offset_array(dt, 1, &D, b);
        alloy_array *XA = dev_array(dt, 2, shape, x), *WA = dev_array(dt, 1, &D, w), *DYA = dev_array(dt, 2, shape, dy);
        alloy_array *Y = offset_array(dt, 2, shape, x), *DX = offset_array(dt, 2, shape, x), *DXA = NULL, *gy = Y;
        for (int64_t e = 0; e < n; e++) ry[e] = round_to(dt, cap * tanh(x[e] / cap));
        CHECK_OK(alloy_nn_softcap(X, cap, NULL, &Y));
        CHECK(Y == gy);
        double *y = host_of(Y);
        CHECK_MSG(rel_err(y, ry, n) <= 2 * tol(dt), "unaligned softcap %s", alloy_dtype_name(dt));
        free(y);
        norm_ref(0, x, w, b, R, D, D, eps, ry);
        for (int64_t e = 0; e < n; e++) ry[e] = round_to(dt, ry[e]);
        CHECK_OK(alloy_nn_layer_norm(X, W, B, 0, eps, NULL, &Y));
        y = host_of(Y);
        CHECK_MSG(rel_err(y, ry, n) <= 2 * tol(dt), "unaligned layer_norm %s", alloy_dtype_name(dt));
        /* the backward: unaligned x, dy, dx against all aligned */
        CHECK_OK(alloy_nn_rms_norm_backward(X, W, DY, 0, eps, NULL, &DX, NULL));
        CHECK_OK(alloy_nn_rms_norm_backward(XA, WA, DYA, 0, eps, NULL, &DXA, NULL));
        double *dx = host_of(DX), *dxa = DXA ? host_of(DXA) : NULL;
        if (dxa) CHECK_MSG(rel_err(dx, dxa, n) <= 2 * tol(dt), "unaligned rms_norm_backward %s", alloy_dtype_name(dt));
        /* the convolution of (R, 1, D) (one timestep per sequence, the rest from the state), forward and
         * backward: unaligned x, state and dy against aligned ones */
        const int64_t xs[3] = {R, 1, D}, ws[2] = {D, 4}, ss[3] = {R, 3, D};
        double *cw = random_vec(dt, D * 4, -1, 1), *cs = random_vec(dt, R * 3 * D, -1, 1);
        alloy_array *CX = offset_array(dt, 3, xs, x), *CXA = dev_array(dt, 3, xs, x), *CW = dev_array(dt, 2, ws, cw);
        alloy_array *CS = offset_array(dt, 3, ss, cs), *CSA = dev_array(dt, 3, ss, cs);
        alloy_array *CDY = offset_array(dt, 3, xs, dy), *CDYA = dev_array(dt, 3, xs, dy);
        alloy_array *CY = NULL, *CYA = NULL, *CDX = NULL, *CDXA = NULL, *CDS = NULL, *CDSA = NULL, *CDW = NULL,
                    *CDWA = NULL;
        CHECK_OK(alloy_nn_causal_conv1d(CX, CW, NULL, CS, NULL, &CY, NULL));
        CHECK_OK(alloy_nn_causal_conv1d(CXA, CW, NULL, CSA, NULL, &CYA, NULL));
        CHECK_OK(alloy_nn_causal_conv1d_backward(CX, CW, CS, CDY, NULL, &CDX, &CDW, NULL, &CDS));
        CHECK_OK(alloy_nn_causal_conv1d_backward(CXA, CW, CSA, CDYA, NULL, &CDXA, &CDWA, NULL, &CDSA));
        if (CY && CYA && CDX && CDXA && CDS && CDSA && CDW && CDWA) {
            double *h[8] = {host_of(CY), host_of(CYA), host_of(CDX), host_of(CDXA), host_of(CDS), host_of(CDSA),
                            host_of(CDW), host_of(CDWA)};
            CHECK_MSG(rel_err(h[0], h[1], n) <= 2 * tol(dt) && rel_err(h[2], h[3], n) <= 2 * tol(dt) &&
                          rel_err(h[4], h[5], R * 3 * D) <= 2 * tol(dt) && rel_err(h[6], h[7], D * 4) <= 4 * tol(dt),
                      "unaligned causal_conv1d %s", alloy_dtype_name(dt));
            for (int k = 0; k < 8; k++) free(h[k]);
        }
        alloy_array *conv[] = {CX, CXA, CW, CS, CSA, CDY, CDYA, CY, CYA, CDX, CDXA, CDS, CDSA, CDW, CDWA};
        for (size_t e = 0; e < sizeof conv / sizeof conv[0]; e++) alloy_array_free(conv[e]);
        free(cw), free(cs);
        free(y), free(dx), free(dxa), free(x), free(dy), free(w), free(b), free(ry);
        alloy_array *all[] = {X, DY, W, B, XA, WA, DYA, Y, DX, DXA};
        for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    }
}

/* ALLOY_OPS_OVERLAP=0: ordinary launches (by default every launch overlaps the kernel before it, column_sum
 * the backward that writes its partial sums — every other test here): the norms' rows (plain and from saved
 * statistics) and heads (test_nn_conv.c has conv1d's). */
static void test_ordinary_launches(void) {
    setenv("ALLOY_OPS_OVERLAP", "0", 1);
    const norm_case cases[3] = {{9, 1024, 0}, {11, 4096, 512}, {530, 64, 8}};
    for (int rms = 0; rms <= 1; rms++)
        for (int ci = 0; ci < 3; ci++) {
            run_norm(rms, !rms, cases[ci], DTYPES[1 + ci % 3], 0);
            g_stats = 1;
            run_norm(rms, !rms, cases[ci], DTYPES[3 - ci % 3], 0);
            g_stats = 0;
        }
    unsetenv("ALLOY_OPS_OVERLAP");
}

/* ---- errors --------------------------------------------------------------- */

/* Empty inputs: no rows (norms), no timesteps or no batch (conv1d). The outputs over them are empty; the
 * weights' gradients are sums over nothing, exact zeros, written over caller-provided NaN arrays (the
 * second stage of their reduction runs with no partial rows); the state's gradient with S = 0 is zero too. */
static void test_empty(void) {
    const int64_t D = 40, K = 4, x0[2] = {0, D}, wd[1] = {D}, cwd[2] = {D, K};
    for (int di = 0; di < 4; di++) {
        const alloy_dtype dt = DTYPES[di];
        double ones[160]; /* D * K: the largest operand filled from it */
        for (int e = 0; e < 160; e++) ones[e] = 1.0;
        alloy_array *x = dev_array(dt, 2, x0, ones), *dy = dev_array(dt, 2, x0, ones), *w = dev_array(dt, 1, wd, ones);
        for (int rms = 0; rms < 2; rms++) {
            alloy_array *y = NULL, *dx = NULL, *dw = nan_array(dt, 1, wd), *db = nan_array(dt, 1, wd);
            if (rms) CHECK_OK(alloy_nn_rms_norm(x, w, 0, 1e-5, NULL, &y));
            else CHECK_OK(alloy_nn_layer_norm(x, w, w, 0, 1e-5, NULL, &y));
            if (rms) CHECK_OK(alloy_nn_rms_norm_backward(x, w, dy, 0, 1e-5, NULL, &dx, &dw));
            else CHECK_OK(alloy_nn_layer_norm_backward(x, w, dy, 0, 1e-5, NULL, &dx, &dw, &db));
            CHECK(y && alloy_array_size(y) == 0 && dx && alloy_array_size(dx) == 0);
            double *hw = host_of(dw), *hb = host_of(db);
            int bad = 0;
            for (int64_t e = 0; e < D; e++) bad += hw[e] != 0.0 || (!rms && hb[e] != 0.0);
            CHECK_MSG(bad == 0, "%s %s, no rows: %d weight gradients not 0", rms ? "rms" : "layer", alloy_dtype_name(dt), bad);
            free(hw), free(hb);
            alloy_array_free(y), alloy_array_free(dx), alloy_array_free(dw), alloy_array_free(db);
        }
        /* conv1d: (2, 0, D) with a state, and (0, 5, D) */
        const int64_t xs[2][3] = {{2, 0, D}, {0, 5, D}}, ss[2][3] = {{2, K - 1, D}, {0, K - 1, D}};
        for (int c = 0; c < 2; c++) {
            double *st = calloc((size_t)(2 * (K - 1) * D), sizeof(double));
            for (int64_t e = 0; e < 2 * (K - 1) * D; e++) st[e] = 0.5 + (double)(e % 7);
            alloy_array *cx = dev_array(dt, 3, xs[c], ones), *cdy = dev_array(dt, 3, xs[c], ones);
            alloy_array *cw = dev_array(dt, 2, cwd, ones), *cs = dev_array(dt, 3, ss[c], st);
            alloy_array *y = NULL, *dx = NULL, *dw = nan_array(dt, 2, cwd), *db = nan_array(dt, 1, wd);
            alloy_array *ds = nan_array(dt, 3, ss[c]);
            CHECK_OK(alloy_nn_causal_conv1d(cx, cw, NULL, cs, NULL, &y, NULL));
            CHECK_OK(alloy_nn_causal_conv1d_backward(cx, cw, cs, cdy, NULL, &dx, &dw, &db, &ds));
            CHECK(y && alloy_array_size(y) == 0 && dx && alloy_array_size(dx) == 0);
            double *hw = host_of(dw), *hb = host_of(db), *hs = host_of(ds);
            int bad = 0;
            for (int64_t e = 0; e < D * K; e++) bad += hw[e] != 0.0;
            for (int64_t e = 0; e < D; e++) bad += hb[e] != 0.0;
            for (int64_t e = 0; e < alloy_array_size(ds); e++) bad += hs[e] != 0.0;
            CHECK_MSG(bad == 0, "conv1d %s, x (%lld, %lld, %lld): %d gradients not 0", alloy_dtype_name(dt),
                      (long long)xs[c][0], (long long)xs[c][1], (long long)xs[c][2], bad);
            free(hw), free(hb), free(hs), free(st);
            alloy_array *all[] = {cx, cdy, cw, cs, y, dx, dw, db, ds};
            for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
        }
        alloy_array_free(x), alloy_array_free(dy), alloy_array_free(w);
    }
}

static void test_errors(void) {
    const alloy_status INV = ALLOY_ERROR_INVALID_ARGUMENT;
    const int64_t s2[2] = {3, 8}, s1[1] = {8}, s1b[1] = {7}, s3[3] = {2, 5, 8}, w9[2] = {8, 9}, w3[2] = {8, 3};
    const int64_t st3[3] = {2, 2, 8}, st3b[3] = {2, 3, 8};
    double zeros[400] = {0};
    alloy_array *x = dev_array(ALLOY_FLOAT32, 2, s2, zeros), *w = dev_array(ALLOY_FLOAT32, 1, s1, zeros);
    alloy_array *w7 = dev_array(ALLOY_FLOAT32, 1, s1b, zeros), *w16 = dev_array(ALLOY_FLOAT16, 1, s1, zeros);
    alloy_array *x3 = dev_array(ALLOY_FLOAT32, 3, s3, zeros), *cw9 = dev_array(ALLOY_FLOAT32, 2, w9, zeros);
    alloy_array *cw = dev_array(ALLOY_FLOAT32, 2, w3, zeros), *cs = dev_array(ALLOY_FLOAT32, 3, st3, zeros);
    alloy_array *csb = dev_array(ALLOY_FLOAT32, 3, st3b, zeros), *xi = NULL, *out = NULL;
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_INT32, 2, s2, &xi));
    CHECK_FAILS(alloy_nn_softcap(NULL, 15, NULL, &out), INV, "x is NULL");
    CHECK_FAILS(alloy_nn_softcap(xi, 15, NULL, &out), INV, "x is int32");
    CHECK_FAILS(alloy_nn_softcap(x, 0, NULL, &out), INV, "cap is 0");
    CHECK_FAILS(alloy_nn_softcap(x, 15, NULL, NULL), INV, "y is NULL");
    CHECK_FAILS(alloy_nn_softcap_backward(x, NULL, 15, NULL, &out), INV, "dy is NULL");
    CHECK_FAILS(alloy_nn_softcap_backward(x, x3, 15, NULL, &out), INV, "dy has shape (2, 5, 8)");
    out = w;
    CHECK_FAILS(alloy_nn_softcap(x, 15, NULL, &out), INV, "y has shape (8,)");
    out = NULL;
    CHECK_FAILS(alloy_nn_rms_norm(x, w7, 0, 1e-5, NULL, &out), INV, "weight has shape (7,) but must have shape (8,)");
    CHECK_FAILS(alloy_nn_rms_norm(x, w16, 0, 1e-5, NULL, &out), INV, "weight is float16");
    CHECK_FAILS(alloy_nn_rms_norm(x, NULL, 0, 1e-5, NULL, &out), INV, "weight is NULL");
    CHECK_FAILS(alloy_nn_rms_norm(x, w, 3, 1e-5, NULL, &out), INV, "head_dim is 3");
    CHECK_FAILS(alloy_nn_layer_norm(x, w, w7, 0, 1e-5, NULL, &out), INV, "bias has shape (7,)");
    CHECK_FAILS(alloy_nn_layer_norm(x, w, w, 0, -1, NULL, &out), INV, "eps is -1");
    CHECK_FAILS(alloy_nn_layer_norm_backward(x, w, NULL, 0, 1e-5, NULL, &out, NULL, NULL), INV, "dy is NULL");
    alloy_array *bad = w7;
    CHECK_FAILS(alloy_nn_layer_norm_backward(x, w, x, 0, 1e-5, NULL, &out, &bad, NULL), INV, "dweight has shape (7,)");
    CHECK_FAILS(alloy_nn_causal_conv1d(x, cw, NULL, NULL, NULL, &out, NULL), INV, "x has shape (3, 8) but must have at least 3 dimensions");
    CHECK_FAILS(alloy_nn_causal_conv1d(x3, cw9, NULL, NULL, NULL, &out, NULL), INV, "w must be (C, K) with 1 <= K <= 8");
    CHECK_FAILS(alloy_nn_causal_conv1d(x3, cw, w7, NULL, NULL, &out, NULL), INV, "bias has shape (7,)");
    CHECK_FAILS(alloy_nn_causal_conv1d(x3, cw, NULL, csb, NULL, &out, NULL), INV, "state has shape (2, 3, 8) but must have shape (2, 2, 8)");
    bad = csb;
    CHECK_FAILS(alloy_nn_causal_conv1d(x3, cw, NULL, cs, NULL, &out, &bad), INV, "state_out has shape (2, 3, 8)");
    CHECK_FAILS(alloy_nn_causal_conv1d_backward(x3, cw, NULL, NULL, NULL, &out, NULL, NULL, NULL), INV, "dy is NULL");
    /* the _stats forms: stats NULL, of the wrong shape or dtype */
    const int64_t sst[3] = {3, 1, 2}, sstb[3] = {3, 2, 2};
    alloy_array *stt = dev_array(ALLOY_FLOAT32, 3, sst, zeros), *sttb = dev_array(ALLOY_FLOAT32, 3, sstb, zeros);
    alloy_array *stt16 = dev_array(ALLOY_FLOAT16, 3, sst, zeros), *yy = NULL;
    CHECK_FAILS(alloy_nn_rms_norm_stats(x, w, 0, 1e-5, NULL, &yy, NULL), INV, "stats is NULL");
    bad = sttb;
    CHECK_FAILS(alloy_nn_layer_norm_stats(x, w, NULL, 0, 1e-5, NULL, &yy, &bad), INV,
                "stats has shape (3, 2, 2) but must have shape (3, 1, 2)");
    CHECK(yy == NULL);
    CHECK_FAILS(alloy_nn_rms_norm_backward_stats(x, w, x, NULL, 0, NULL, &out, NULL), INV, "stats is NULL");
    CHECK_FAILS(alloy_nn_layer_norm_backward_stats(x, w, x, sttb, 0, NULL, &out, NULL, NULL), INV,
                "stats has shape (3, 2, 2) but must have shape (3, 1, 2)");
    CHECK_FAILS(alloy_nn_layer_norm_backward_stats(x, w, x, stt16, 0, NULL, &out, NULL, NULL), INV,
                "stats is float16 but must be float32");
    CHECK_FAILS(alloy_nn_layer_norm_backward_stats(x, w, x, stt, 4, NULL, &out, NULL, NULL), INV,
                "stats has shape (3, 1, 2) but must have shape (3, 2, 2)");
    CHECK_FAILS(alloy_nn_rms_norm_backward_stats(x, w, NULL, stt, 0, NULL, &out, NULL), INV, "dy is NULL");
    alloy_array_free(stt), alloy_array_free(sttb), alloy_array_free(stt16);
    CHECK(out == NULL);
    alloy_array *all[] = {x, w, w7, w16, x3, cw9, cw, cs, csb, xi};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
}

int main(void) {
    harness_seed();
    RUN(test_errors);
    RUN(test_softcap);
    RUN(test_softcap_rounds);
    RUN(test_softcap_16bit);
    RUN(test_softcap_fast);
    RUN(test_norms);
    RUN(test_norms_grid);
    RUN_VARIANT(test_norms_onepass);
    RUN_VARIANT(test_norms_shift);
    RUN_VARIANT(test_norms_variants);
    RUN_VARIANT(test_norms_fwd_sg);
    RUN(test_norms_stats);
    RUN(test_norms_given_stats);
    RUN(test_unaligned);
    RUN_VARIANT(test_ordinary_launches);
    RUN(test_empty);
    return harness_finish();
}
