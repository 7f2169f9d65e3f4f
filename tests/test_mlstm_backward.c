/* test_mlstm_backward.c — alloy_mlstm_chunkwise_backward against (fourth-order) central
 * finite differences of a float64 run of the recurrence (the function the
 * chunkwise forward computes), written here as a plain double loop: the loss
 * is <dh, h> + <dC, C_S> + <dn, n_S> + dm m_S, so its gradient is what the
 * backward returns. Covers odd S, S = 1, several chunk sizes (and that every
 * gradient is the same for each), given initial states and final-state
 * gradients, hostile gates (the normaliser's floor and the max of m switch
 * branches; the test checks that both branches occur), float64 (<= 1e-6 of
 * each gradient's max) and float32 (<= 5e-4), every output element written,
 * and errors that name the argument. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernel_util.h"

#include "alloy/mlstm.h"

static const double EPS = 1e-6;

/* One problem: all inputs and the loss's cotangents, as doubles. The inputs
 * form one vector x (q | k | v | i | f | C0 | n0 | m0) so that the finite
 * differences walk one array. */
typedef struct {
    int64_t B, NH, S, DK, DV;
    int init;            /* initial states given */
    double *x;           /* the inputs */
    int64_t off[9];      /* offsets of q, k, v, i, f, C0, n0, m0 in x, and its length */
    double *dh, *dC, *dn, *dm;   /* cotangents of h and the final states (dC NULL: none) */
} problem;

enum { XQ, XK, XV, XI, XF, XC, XN, XM, XEND };

static int64_t part_len(const problem *p, int part) {
    const int64_t nsh = p->B * p->NH;
    switch (part) {
    case XQ: case XK: return nsh * p->S * p->DK;
    case XV: return nsh * p->S * p->DV;
    case XI: case XF: return nsh * p->S;
    case XC: return p->init ? nsh * p->DK * p->DV : 0;
    case XN: return p->init ? nsh * p->DK : 0;
    default: return p->init ? nsh : 0;
    }
}

/* Fills a problem; `hostile`: input pre-activations near 60 and forget
 * pre-activations near -40 on some tokens, so m's max and the floor switch. */
static problem make(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int init, int dfinal, int hostile,
                    int round_f32) {
    problem p = {B, NH, S, DK, DV, init, NULL, {0}, NULL, NULL, NULL, NULL};
    int64_t o = 0;
    for (int part = 0; part < XEND; part++) {
        p.off[part] = o;
        o += part_len(&p, part);
    }
    p.off[XEND] = o;
    p.x = malloc(sizeof(double) * (size_t)(o + 1));
    for (int64_t e = 0; e < o; e++) p.x[e] = harness_uniform(-1, 1);
    for (int64_t e = 0; e < part_len(&p, XI); e++) {
        p.x[p.off[XI] + e] = harness_uniform(-3, 3);
        p.x[p.off[XF] + e] = harness_uniform(-1, 5);
        if (hostile && e % 5 == 2) p.x[p.off[XI] + e] = 60 + harness_uniform(-1, 1);
        /* two forget gates of -40 in a row drop m by ~80, below the inputs near 60;
         * the second token's q is tiny, so |q^ . n| falls under the floor exp(-m) */
        if (hostile && (e % 7 == 3 || e % 7 == 4)) p.x[p.off[XF] + e] = -40 + harness_uniform(-1, 1);
        if (hostile && e % 7 == 4) {
            p.x[p.off[XI] + e] = harness_uniform(-1, 1);
            for (int64_t d = 0; d < DK; d++) p.x[p.off[XQ] + e * DK + d] *= 1e-3;
        }
    }
    for (int64_t e = 0; e < part_len(&p, XM); e++) p.x[p.off[XM] + e] = harness_uniform(-2, 2);
    if (round_f32)
        for (int64_t e = 0; e < o; e++) p.x[e] = (double)(float)p.x[e];
    const int64_t nh = B * NH * S * DV, nc = B * NH * DK * DV, nn = B * NH * DK, nm = B * NH;
    p.dh = malloc(sizeof(double) * (size_t)(nh + 1));
    for (int64_t e = 0; e < nh; e++) p.dh[e] = harness_uniform(-1, 1);
    if (dfinal) {
        p.dC = malloc(sizeof(double) * (size_t)nc);
        p.dn = malloc(sizeof(double) * (size_t)nn);
        p.dm = malloc(sizeof(double) * (size_t)nm);
        for (int64_t e = 0; e < nc; e++) p.dC[e] = harness_uniform(-1, 1);
        for (int64_t e = 0; e < nn; e++) p.dn[e] = harness_uniform(-1, 1);
        for (int64_t e = 0; e < nm; e++) p.dm[e] = harness_uniform(-1, 1);
    }
    if (round_f32) {
        for (int64_t e = 0; e < nh; e++) p.dh[e] = (double)(float)p.dh[e];
        if (dfinal) {
            for (int64_t e = 0; e < nc; e++) p.dC[e] = (double)(float)p.dC[e];
            for (int64_t e = 0; e < nn; e++) p.dn[e] = (double)(float)p.dn[e];
            for (int64_t e = 0; e < nm; e++) p.dm[e] = (double)(float)p.dm[e];
        }
    }
    return p;
}

static void problem_free(problem *p) { free(p->x), free(p->dh), free(p->dC), free(p->dn), free(p->dm); }

/* Which branches the forward took (counted over every token), and a hash
 * of the sequence of decisions: finite differences across a point where
 * one flips (a kink of max or |.|) are not a derivative. */
typedef struct {
    long floor_wins, abs_wins, m_from_forget, m_from_input;
    uint64_t path;
} branches;
static void took(branches *br, int bit) { br->path = (br->path ^ (uint64_t)(bit + 1)) * 1099511628211ull; }

/* The loss of the recurrence at inputs x (float64). */
static double loss(const problem *p, const double *x, branches *br) {
    const int64_t DK = p->DK, DV = p->DV, S = p->S;
    const double scale = 1.0 / sqrt((double)DK);
    double *C = malloc(sizeof(double) * (size_t)(DK * DV)), *n = malloc(sizeof(double) * (size_t)DK);
    double total = 0;
    for (int64_t sh = 0; sh < p->B * p->NH; sh++) {
        double m = 0;
        for (int64_t a = 0; a < DK * DV; a++) C[a] = p->init ? x[p->off[XC] + sh * DK * DV + a] : 0;
        for (int64_t a = 0; a < DK; a++) n[a] = p->init ? x[p->off[XN] + sh * DK + a] : 0;
        if (p->init) m = x[p->off[XM] + sh];
        for (int64_t t = 0; t < S; t++) {
            const int64_t row = sh * S + t;
            const double *q = x + p->off[XQ] + row * DK, *k = x + p->off[XK] + row * DK;
            const double *v = x + p->off[XV] + row * DV;
            const double fp = x[p->off[XF] + row], ig = x[p->off[XI] + row];
            const double lf = fp >= 0 ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
            const double a = lf + m, mr = a >= ig ? a : ig;
            if (br) {
                (a >= ig ? br->m_from_forget++ : br->m_from_input++);
                took(br, a >= ig);
            }
            const double fb = exp(a - mr), ib = exp(ig - mr);
            for (int64_t d = 0; d < DK; d++) {
                for (int64_t c = 0; c < DV; c++) C[d * DV + c] = fb * C[d * DV + c] + ib * k[d] * v[c];
                n[d] = fb * n[d] + ib * k[d];
            }
            m = mr;
            double s = 0;
            for (int64_t d = 0; d < DK; d++) s += q[d] * scale * n[d];
            const double fl = exp(-m);
            if (br) {
                (fabs(s) >= fl ? br->abs_wins++ : br->floor_wins++);
                took(br, 2 + (fabs(s) >= fl) * 2 + (s >= 0));
            }
            const double den = (fabs(s) >= fl ? fabs(s) : fl) + EPS;
            for (int64_t c = 0; c < DV; c++) {
                double num = 0;
                for (int64_t d = 0; d < DK; d++) num += q[d] * scale * C[d * DV + c];
                total += p->dh[row * DV + c] * num / den;
            }
        }
        if (p->dC) {
            for (int64_t a = 0; a < DK * DV; a++) total += p->dC[sh * DK * DV + a] * C[a];
            for (int64_t a = 0; a < DK; a++) total += p->dn[sh * DK + a] * n[a];
            total += p->dm[sh] * m;
        }
    }
    free(C), free(n);
    return total;
}

/* One fourth-order central difference of the loss in element e with step
 * h; 0 when the stencil crosses a branch flip of the forward (the decision
 * path differs from base's), where there is no derivative to difference. */
static int fd_at(const problem *p, double *x, int64_t e, double h, uint64_t base, double *g) {
    const double x0 = x[e], k[4] = {-2, -1, 1, 2};
    double at[4];
    int same = 1;
    for (int s = 0; s < 4; s++) {
        branches br = {0};
        x[e] = x0 + k[s] * h;
        at[s] = loss(p, x, &br);
        same &= br.path == base;
    }
    x[e] = x0;
    *g = (8 * (at[2] - at[1]) - (at[3] - at[0])) / (12 * h);
    return same;
}

/* The reference gradient by finite differences. The step follows |x| (a
 * tiny q makes h strongly curved on its scale), starts at 2e-5 and is
 * refined: an element whose differences at h and h/4 agree to 1e-7 takes
 * the h/4 one, else h/16 is tried against h/4 (with hostile gates a fixed
 * step of 1e-4 left truncation errors of 1e-4 in a few elements of dq and
 * dk). Elements that cross a branch flip, or do not settle, are NaN (not
 * compared) and counted in *skipped. */
static double *fd_gradient(const problem *p, int64_t *skipped) {
    const int64_t nx = p->off[XEND];
    double *x = malloc(sizeof(double) * (size_t)(nx + 1)), *g = malloc(sizeof(double) * (size_t)(nx + 1));
    memcpy(x, p->x, sizeof(double) * (size_t)nx);
    branches base = {0};
    loss(p, x, &base);
    *skipped = 0;
    for (int64_t e = 0; e < nx; e++) {
        const double ax = fabs(x[e]) > 1e-3 ? fabs(x[e]) : 1e-3, h = ax * 2e-5 < 2e-5 ? ax * 2e-5 : 2e-5;
        double g1, g2, g3;
        int ok = fd_at(p, x, e, h, base.path, &g1) && fd_at(p, x, e, h / 4, base.path, &g2);
        if (ok && !(fabs(g1 - g2) <= 1e-7 * (1 + fabs(g2)))) {
            ok = fd_at(p, x, e, h / 16, base.path, &g3) && fabs(g2 - g3) <= 1e-7 * (1 + fabs(g3));
            g2 = g3;
        }
        g[e] = ok ? g2 : NAN;
        *skipped += !ok;
    }
    free(x);
    return g;
}

static alloy_array *dev(alloy_dtype dt, int nd, const int64_t *shape, const double *x) {
    int64_t c = 1;
    for (int d = 0; d < nd; d++) c *= shape[d];
    void *raw = malloc((size_t)(c ? c : 1) * 8);
    for (int64_t e = 0; e < c; e++) {
        if (dt == ALLOY_FLOAT64) ((double *)raw)[e] = x[e];
        else ((float *)raw)[e] = (float)x[e];
    }
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), dt, nd, shape, raw, &a));
    free(raw);
    return a;
}

static alloy_array *nan_array(alloy_dtype dt, int nd, const int64_t *shape) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(ku_device(), dt, nd, shape, &a));
    if (a) CHECK_OK(alloy_array_fill(a, NAN));
    return a;
}

/* Copies a float32 or float64 array into g (as doubles). */
static void read_into(alloy_array *a, double *g) {
    const int64_t c = alloy_array_size(a);
    void *raw = malloc(alloy_array_nbytes(a) + 8);
    CHECK_OK(alloy_array_copy_to_host(a, raw, alloy_array_nbytes(a)));
    for (int64_t e = 0; e < c; e++)
        g[e] = alloy_array_dtype(a) == ALLOY_FLOAT64 ? ((double *)raw)[e] : (double)((float *)raw)[e];
    free(raw);
}

/* Runs the backward; returns the gradient in x's layout. Outputs are given
 * pre-filled with NaN, so an element never written shows. */
static double *run_backward(const problem *p, alloy_dtype dt, int chunk) {
    const alloy_dtype sdt = dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    const int64_t s_qk[4] = {p->B, p->NH, p->S, p->DK}, s_v[4] = {p->B, p->NH, p->S, p->DV},
                  s_g[3] = {p->B, p->NH, p->S};
    const int64_t s_c[4] = {p->B, p->NH, p->DK, p->DV}, s_n[3] = {p->B, p->NH, p->DK}, s_m[3] = {p->B, p->NH, 1};
    alloy_array *q = dev(dt, 4, s_qk, p->x + p->off[XQ]), *k = dev(dt, 4, s_qk, p->x + p->off[XK]);
    alloy_array *v = dev(dt, 4, s_v, p->x + p->off[XV]), *i = dev(dt, 3, s_g, p->x + p->off[XI]);
    alloy_array *f = dev(dt, 3, s_g, p->x + p->off[XF]), *dh = dev(dt, 4, s_v, p->dh);
    alloy_array *c0 = NULL, *n0 = NULL, *m0 = NULL, *dC = NULL, *dn = NULL, *dm = NULL;
    if (p->init) {
        c0 = dev(sdt, 4, s_c, p->x + p->off[XC]);
        n0 = dev(sdt, 3, s_n, p->x + p->off[XN]);
        m0 = dev(sdt, 3, s_m, p->x + p->off[XM]);
    }
    if (p->dC) {
        dC = dev(sdt, 4, s_c, p->dC);
        dn = dev(sdt, 3, s_n, p->dn);
        dm = dev(sdt, 3, s_m, p->dm);
    }
    alloy_array *out[8] = {nan_array(dt, 4, s_qk), nan_array(dt, 4, s_qk), nan_array(dt, 4, s_v),
                           nan_array(dt, 3, s_g),  nan_array(dt, 3, s_g),  NULL, NULL, NULL};
    if (p->init) {
        out[5] = nan_array(sdt, 4, s_c);
        out[6] = nan_array(sdt, 3, s_n);
        out[7] = nan_array(sdt, 3, s_m);
    }
    double *g = calloc((size_t)(p->off[XEND] + 1), sizeof(double));
    CHECK_OK(alloy_mlstm_chunkwise_backward(q, k, v, i, f, c0, n0, m0, dh, dC, dn, dm, chunk, EPS, NULL, &out[0],
                                            &out[1], &out[2], &out[3], &out[4], &out[5], &out[6], &out[7]));
    CHECK_OK(alloy_device_synchronize(ku_device()));
    for (int part = 0; part < XEND; part++)
        if (out[part]) read_into(out[part], g + p->off[part]);
    alloy_array *all[] = {q, k, v, i, f, dh, c0, n0, m0, dC, dn, dm};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    for (int e = 0; e < 8; e++) alloy_array_free(out[e]);
    return g;
}

static const char *PART_NAME[XEND] = {"dq", "dk", "dv", "di", "df", "dc_initial", "dn_initial", "dm_initial"};

/* The worst, over the gradients, of max|got - want| / max|want|, where
 * max|want| is at least 1e-2 of the largest gradient of any input: a gradient
 * that is O(1) terms cancelling to eps's size (df where m does not depend on
 * f except through eps) is measured against the terms' scale. NaN (an element
 * not written) gives infinity. */
static double worst_error(const problem *p, const double *got, const double *want, const char *label) {
    double worst = 0, scale = 0;
    for (int64_t e = 0; e < p->off[XEND]; e++) scale = fabs(want[e]) > scale ? fabs(want[e]) : scale;
    for (int part = 0; part < XEND; part++) {
        double err = 0, mag = 0;
        for (int64_t e = p->off[part]; e < p->off[part + 1]; e++) {
            if (isnan(want[e])) continue; /* a kink inside the reference's stencil */
            const double d = fabs(got[e] - want[e]);
            if (getenv("ALLOY_TEST_VERBOSE") && d > 1e-6 * (1 + fabs(want[e])))
                fprintf(stderr, "      %s[%lld]: %.9g vs %.9g\n", PART_NAME[part], (long long)(e - p->off[part]), got[e], want[e]);
            err = isnan(got[e]) ? INFINITY : (d > err ? d : err);
            if (isnan(got[e])) break;
            mag = fabs(want[e]) > mag ? fabs(want[e]) : mag;
        }
        if (p->off[part + 1] == p->off[part]) continue;
        if (mag < 1e-2 * scale) mag = 1e-2 * scale;
        const double rel = err / (mag > 0 ? mag : 1);
        if (getenv("ALLOY_TEST_VERBOSE")) fprintf(stderr, "    %s %s: %.3g\n", label, PART_NAME[part], rel);
        worst = rel > worst ? rel : worst;
    }
    return worst;
}

static void check(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int init, int dfinal, int hostile,
                  alloy_dtype dt, const int *chunks, int nchunks, double bound) {
    problem p = make(B, NH, S, DK, DV, init, dfinal, hostile, dt != ALLOY_FLOAT64);
    branches br = {0};
    loss(&p, p.x, &br);
    if (hostile)
        CHECK_MSG(br.floor_wins > 0 && br.abs_wins > 0 && br.m_from_input > 0 && br.m_from_forget > 0,
                  "hostile gates must take both branches: floor %ld abs %ld, m from input %ld forget %ld",
                  br.floor_wins, br.abs_wins, br.m_from_input, br.m_from_forget);
    int64_t skipped = 0;
    double *want = fd_gradient(&p, &skipped), *first = NULL;
    /* a few elements at most sit on a kink; more would mean the test checks little */
    CHECK_MSG(skipped * 20 <= p.off[XEND], "%lld of %lld elements have no settled finite difference",
              (long long)skipped, (long long)p.off[XEND]);
    for (int c = 0; c < nchunks; c++) {
        double *got = run_backward(&p, dt, chunks[c]);
        char label[96];
        snprintf(label, sizeof label, "%s S=%lld chunk=%d", alloy_dtype_name(dt), (long long)S, chunks[c]);
        const double err = worst_error(&p, got, want, label);
        CHECK_MSG(err <= bound, "%s B=%lld NH=%lld DK=%lld DV=%lld init=%d dfinal=%d hostile=%d: error %.3g > %.3g",
                  label, (long long)B, (long long)NH, (long long)DK, (long long)DV, init, dfinal, hostile, err, bound);
        if (!first) first = got;
        else {
            /* chunk-size invariance: the same gradients up to rounding */
            const double spread = worst_error(&p, got, first, label);
            CHECK_MSG(spread <= bound, "%s: differs from chunk %d by %.3g", label, chunks[0], spread);
            free(got);
        }
    }
    free(first);
    free(want);
    problem_free(&p);
}

static const int CHUNKS[] = {16, 32, 64};

static void test_backward_float64(void) {
    check(1, 2, 37, 5, 3, 1, 1, 0, ALLOY_FLOAT64, CHUNKS, 3, 1e-6);
    check(2, 1, 1, 3, 4, 1, 1, 0, ALLOY_FLOAT64, CHUNKS, 1, 1e-6);
    check(1, 1, 16, 4, 2, 0, 0, 0, ALLOY_FLOAT64, CHUNKS, 2, 1e-6);
    check(1, 1, 0, 4, 2, 1, 1, 0, ALLOY_FLOAT64, CHUNKS, 1, 1e-6);
}

static void test_backward_hostile_gates(void) {
    check(1, 2, 45, 4, 3, 1, 1, 1, ALLOY_FLOAT64, CHUNKS, 3, 1e-6);
    check(1, 1, 33, 3, 3, 0, 1, 1, ALLOY_FLOAT64, CHUNKS, 2, 1e-6);
}

static void test_backward_float32(void) {
    check(1, 2, 37, 5, 3, 1, 1, 0, ALLOY_FLOAT32, CHUNKS, 3, 5e-4);
    check(1, 1, 1, 3, 2, 0, 0, 0, ALLOY_FLOAT32, CHUNKS, 1, 5e-4);
}

/* Hostile gates in float32: where the normaliser q^ . n cancels, h (and so its
 * gradient) is ill-conditioned in any float32 evaluation (docs/mlstm.md,
 * Accuracy); measured up to 3.6e-3 of the largest gradient over seeds. */
static void test_backward_float32_hostile(void) { check(1, 1, 40, 4, 3, 1, 1, 1, ALLOY_FLOAT32, CHUNKS, 2, 1e-2); }

static void test_backward_errors(void) {
    const int64_t s_qk[4] = {1, 1, 3, 2}, s_v[4] = {1, 1, 3, 2}, s_g[3] = {1, 1, 3}, bad[3] = {1, 1, 4};
    const double z[16] = {0};
    alloy_array *q = dev(ALLOY_FLOAT32, 4, s_qk, z), *v = dev(ALLOY_FLOAT32, 4, s_v, z);
    alloy_array *g = dev(ALLOY_FLOAT32, 3, s_g, z), *gb = dev(ALLOY_FLOAT32, 3, bad, z);
    alloy_array *d64 = dev(ALLOY_FLOAT64, 4, s_v, z);
    alloy_array *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
#define BWD(Q, K, V, I, F, C0, DH, DC, CH, EP)                                                                \
    alloy_mlstm_chunkwise_backward(Q, K, V, I, F, C0, NULL, NULL, DH, DC, NULL, NULL, CH, EP, NULL, &a, &b, &c, \
                                   &d, &e, NULL, NULL, NULL)
    CHECK_FAILS(BWD(NULL, q, v, g, g, NULL, v, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "q is NULL");
    CHECK_FAILS(BWD(q, q, v, g, gb, NULL, v, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "f has shape");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, NULL, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "dh is NULL");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, d64, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "dh");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, v, NULL, 24, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "chunk_size");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, v, NULL, 0, -1.0), ALLOY_ERROR_INVALID_ARGUMENT, "eps");
    CHECK_FAILS(BWD(q, q, v, g, g, v, v, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "c_initial");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, v, v, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "dc_final");
#undef BWD
    CHECK(a == NULL && b == NULL && c == NULL && d == NULL && e == NULL);
    alloy_array *all[] = {q, v, g, gb, d64};
    for (size_t x = 0; x < sizeof all / sizeof all[0]; x++) alloy_array_free(all[x]);
}

int main(void) {
    harness_seed();
    RUN(test_backward_errors);
    RUN(test_backward_float64);
    RUN(test_backward_hostile_gates);
    RUN(test_backward_float32);
    RUN(test_backward_float32_hostile);
    return harness_finish();
}
