/* test_mlstm_backward.c — alloy_mlstm_chunkwise_backward against (fourth-order) central
 * finite differences of a float64 run of the recurrence (the function the
 * chunkwise forward computes), written here as a plain double loop: the loss
 * is <dh, h> + <dC, C_S> + <dn, n_S> + dm m_S, so its gradient is what the
 * backward returns. Covers odd S, S = 1, several chunk sizes (and that every
 * gradient is the same for each), given initial states and final-state
 * gradients, hostile gates (the normaliser's floor and the max of m switch
 * branches; the test checks that both branches occur), packed batches
 * (cu_seqlens: against finite differences, and equal to each sequence run
 * alone, empty and one-token sequences included), float64 (<= 1e-6 of each
 * gradient's max against the differences), float32 (<= 5e-4), float16
 * (<= 2e-3) and bfloat16 (<= 2e-2) inputs against the float64 backward, every
 * output element written, and errors that name the argument. The float64
 * backward also equals (to 1e-9) a second formulation of the gradient: the
 * bilinear form's with the stabiliser held constant plus the eps term along
 * the stabiliser's argmax chains (decomposed_gradient). */
#include <float.h>
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
    int64_t nseq;        /* sequences: B, or those packed along S (cu) */
    int32_t *cu;         /* NULL: dense; else the offsets (nseq + 1), B = 1 */
    int init;            /* initial states given */
    double *x;           /* the inputs */
    int64_t off[9];      /* offsets of q, k, v, i, f, C0, n0, m0 in x, and its length */
    double *dh, *dC, *dn, *dm;   /* cotangents of h and the final states (dC NULL: none) */
} problem;

enum { XQ, XK, XV, XI, XF, XC, XN, XM, XEND };

static int64_t part_len(const problem *p, int part) {
    const int64_t rows = p->B * p->NH * p->S, nst = p->nseq * p->NH;
    switch (part) {
    case XQ: case XK: return rows * p->DK;
    case XV: return rows * p->DV;
    case XI: case XF: return rows;
    case XC: return p->init ? nst * p->DK * p->DV : 0;
    case XN: return p->init ? nst * p->DK : 0;
    default: return p->init ? nst : 0;
    }
}

/* Sequence s of head hd: its first row of q (of the B NH S rows) and length. */
static void seq_rows(const problem *p, int64_t s, int64_t hd, int64_t *row0, int64_t *len) {
    if (p->cu) {
        *row0 = hd * p->S + p->cu[s];
        *len = p->cu[s + 1] - p->cu[s];
    } else {
        *row0 = (s * p->NH + hd) * p->S;
        *len = p->S;
    }
}

static double round_to(alloy_dtype dt, double x) {
    if (dt == ALLOY_FLOAT16) return ku_round_half(x);
    if (dt == ALLOY_BFLOAT16) return ku_round_bf16(x);
    return dt == ALLOY_FLOAT64 ? x : (double)(float)x;
}

/* Fills a problem: B dense sequences of S tokens, or (cu given, B = 1)
 * nseq sequences packed along S; `hostile`: input pre-activations near 60
 * and forget pre-activations near -40 on some tokens, so m's max and the
 * floor switch. Inputs and dh are rounded to dt, states and the final
 * states' cotangents to their dtype (float32, or float64 for float64). */
static problem make_packed(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int64_t nseq,
                           const int32_t *cu, int init, int dfinal, int hostile, alloy_dtype dt) {
    problem p = {B, NH, S, DK, DV, nseq, NULL, init, NULL, {0}, NULL, NULL, NULL, NULL};
    if (cu) {
        p.cu = malloc(sizeof(int32_t) * (size_t)(nseq + 1));
        memcpy(p.cu, cu, sizeof(int32_t) * (size_t)(nseq + 1));
    }
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
    const alloy_dtype sdt = dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    for (int64_t e = 0; e < o; e++) p.x[e] = round_to(e < p.off[XC] ? dt : sdt, p.x[e]);
    const int64_t nh = B * NH * S * DV, nc = nseq * NH * DK * DV, nn = nseq * NH * DK, nm = nseq * NH;
    p.dh = malloc(sizeof(double) * (size_t)(nh + 1));
    for (int64_t e = 0; e < nh; e++) p.dh[e] = round_to(dt, harness_uniform(-1, 1));
    if (dfinal) {
        p.dC = malloc(sizeof(double) * (size_t)(nc + 1));
        p.dn = malloc(sizeof(double) * (size_t)(nn + 1));
        p.dm = malloc(sizeof(double) * (size_t)(nm + 1));
        for (int64_t e = 0; e < nc; e++) p.dC[e] = round_to(sdt, harness_uniform(-1, 1));
        for (int64_t e = 0; e < nn; e++) p.dn[e] = round_to(sdt, harness_uniform(-1, 1));
        for (int64_t e = 0; e < nm; e++) p.dm[e] = round_to(sdt, harness_uniform(-1, 1));
    }
    return p;
}

static problem make(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int init, int dfinal, int hostile,
                    alloy_dtype dt) {
    return make_packed(B, NH, S, DK, DV, B, NULL, init, dfinal, hostile, dt);
}

static void problem_free(problem *p) { free(p->x), free(p->dh), free(p->dC), free(p->dn), free(p->dm), free(p->cu); }

/* Which branches the forward took (counted over every token), and a hash
 * of the sequence of decisions: finite differences across a point where
 * one flips (a kink of max or |.|) are not a derivative. */
typedef struct {
    long floor_wins, abs_wins, m_from_forget, m_from_input;
    uint64_t path;
    double mag;    /* the sum of the loss's terms' magnitudes: its rounding's scale */
    double margin; /* min over tokens of | |s| - exp(-m) | / max(|s|, exp(-m)): how near a kink of the floor */
    double cancel; /* min over tokens where |s| wins of |s| / sum |q^_d n_d|: how far s = q^ . n cancels */
} branches;
static void took(branches *br, int bit) { br->path = (br->path ^ (uint64_t)(bit + 1)) * 1099511628211ull; }

/* The loss of the recurrence at inputs x (float64). */
static double loss(const problem *p, const double *x, branches *br) {
    const int64_t DK = p->DK, DV = p->DV;
    const double scale = 1.0 / sqrt((double)DK);
    double *C = malloc(sizeof(double) * (size_t)(DK * DV)), *n = malloc(sizeof(double) * (size_t)DK);
    double total = 0;
    for (int64_t sh = 0; sh < p->nseq * p->NH; sh++) {
        int64_t row0, S;
        seq_rows(p, sh / p->NH, sh % p->NH, &row0, &S);
        double m = 0;
        for (int64_t a = 0; a < DK * DV; a++) C[a] = p->init ? x[p->off[XC] + sh * DK * DV + a] : 0;
        for (int64_t a = 0; a < DK; a++) n[a] = p->init ? x[p->off[XN] + sh * DK + a] : 0;
        if (p->init) m = x[p->off[XM] + sh];
        for (int64_t t = 0; t < S; t++) {
            const int64_t row = row0 + t;
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
                const double mg = fabs(fabs(s) - fl) / (fabs(s) > fl ? fabs(s) : fl);
                if (mg < br->margin) br->margin = mg;
                double sa = 0;
                for (int64_t d = 0; d < DK; d++) sa += fabs(q[d] * scale * n[d]);
                if (fabs(s) >= fl && sa > 0 && fabs(s) / sa < br->cancel) br->cancel = fabs(s) / sa;
                (fabs(s) >= fl ? br->abs_wins++ : br->floor_wins++);
                took(br, 2 + (fabs(s) >= fl) * 2 + (s >= 0));
            }
            const double den = (fabs(s) >= fl ? fabs(s) : fl) + EPS;
            for (int64_t c = 0; c < DV; c++) {
                double num = 0;
                for (int64_t d = 0; d < DK; d++) num += q[d] * scale * C[d * DV + c];
                const double term = p->dh[row * DV + c] * num / den;
                total += term;
                if (br) br->mag += fabs(term);
            }
        }
        if (p->dC) {
            for (int64_t a = 0; a < DK * DV; a++) total += p->dC[sh * DK * DV + a] * C[a];
            for (int64_t a = 0; a < DK; a++) total += p->dn[sh * DK + a] * n[a];
            total += p->dm[sh] * m;
            if (br) {
                for (int64_t a = 0; a < DK * DV; a++) br->mag += fabs(p->dC[sh * DK * DV + a] * C[a]);
                for (int64_t a = 0; a < DK; a++) br->mag += fabs(p->dn[sh * DK + a] * n[a]);
                br->mag += fabs(p->dm[sh] * m);
            }
        }
    }
    free(C), free(n);
    return total;
}

/* One fourth-order central difference of the loss in element e with step
 * h, and in *noise a bound on its rounding error (the loss's values are
 * sums whose rounding scales with their terms' magnitudes, divided by h);
 * 0 when the stencil crosses a branch flip of the forward (the decision path
 * differs from base's), where there is no derivative to difference. */
static int fd_at(const problem *p, double *x, int64_t e, double h, uint64_t base, double *g, double *noise) {
    const double x0 = x[e], k[4] = {-2, -1, 1, 2};
    double at[4], mag = 0;
    int same = 1;
    for (int s = 0; s < 4; s++) {
        branches br = {0};
        x[e] = x0 + k[s] * h;
        at[s] = loss(p, x, &br);
        same &= br.path == base;
        mag = br.mag > mag ? br.mag : mag;
    }
    x[e] = x0;
    *g = (8 * (at[2] - at[1]) - (at[3] - at[0])) / (12 * h);
    /* 18 rounded values of size mag over 12 h, with a margin of 4 */
    *noise = 6 * DBL_EPSILON * mag / h;
    return same;
}

/* The reference gradient by finite differences, with in slack[e] its own
 * uncertainty. Steps follow |x| (a tiny q makes h strongly curved on its
 * scale) down a ladder 2e-4 |x| 4^-k, k = 0..6; of the neighbouring pairs
 * that cross no branch flip, the one whose two estimates agree best (within
 * 1e-7 (1 + |g|) plus both steps' rounding bound) gives the finer estimate.
 * A fixed step left truncation errors of 1e-4 in dq and dk with hostile
 * gates; a single small step, rounding errors of 1e-6 where |x| is tiny or
 * the loss is large (hostile gates make h ~ 1/eps). Elements that cross a
 * branch flip at every step, or never settle, are NaN (not compared) and
 * counted in *skipped. */
static double *fd_gradient(const problem *p, int64_t *skipped, double **slack) {
    enum { STEPS = 7 };
    const int64_t nx = p->off[XEND];
    double *x = malloc(sizeof(double) * (size_t)(nx + 1)), *g = malloc(sizeof(double) * (size_t)(nx + 1));
    *slack = malloc(sizeof(double) * (size_t)(nx + 1));
    memcpy(x, p->x, sizeof(double) * (size_t)nx);
    branches base = {0};
    loss(p, x, &base);
    *skipped = 0;
    for (int64_t e = 0; e < nx; e++) {
        const double ax = fabs(x[e]) > 1e-3 ? fabs(x[e]) : 1e-3;
        double gs[STEPS], ns[STEPS];
        int ok[STEPS];
        for (int k = 0; k < STEPS; k++) ok[k] = fd_at(p, x, e, 2e-4 * ax / (double)(1 << (2 * k)), base.path, &gs[k], &ns[k]);
        double best = INFINITY;
        g[e] = NAN;
        (*slack)[e] = 0;
        for (int k = 0; k + 1 < STEPS; k++) {
            if (!ok[k] || !ok[k + 1]) continue;
            const double tol = 1e-7 * (1 + fabs(gs[k + 1])) + ns[k] + ns[k + 1];
            const double ratio = fabs(gs[k] - gs[k + 1]) / tol;
            if (ratio <= 1 && ratio < best) {
                best = ratio;
                g[e] = gs[k + 1];
                /* the accepted difference's roundoff can reach about twice
                 * the agreement (seen: 2e-7 on a df of 0.04), which on a
                 * gradient whose largest element is 0.05 would read as 4e-6 —
                 * the reference's error, not the backward's */
                (*slack)[e] = 2 * tol;
            }
        }
        *skipped += isnan(g[e]);
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
        else if (dt == ALLOY_FLOAT16) ((uint16_t *)raw)[e] = ku_f16_bits(x[e]);
        else if (dt == ALLOY_BFLOAT16) ((uint16_t *)raw)[e] = ku_bf16_bits(x[e]);
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

/* Copies an array of a float dtype into g (as doubles). */
static void read_into(alloy_array *a, double *g) {
    const int64_t c = alloy_array_size(a);
    const alloy_dtype dt = alloy_array_dtype(a);
    void *raw = malloc(alloy_array_nbytes(a) + 8);
    CHECK_OK(alloy_array_copy_to_host(a, raw, alloy_array_nbytes(a)));
    for (int64_t e = 0; e < c; e++) {
        if (dt == ALLOY_FLOAT64) g[e] = ((double *)raw)[e];
        else if (dt == ALLOY_FLOAT16) g[e] = ku_f16_value(((uint16_t *)raw)[e]);
        else if (dt == ALLOY_BFLOAT16) g[e] = ku_bf16_value(((uint16_t *)raw)[e]);
        else g[e] = (double)((float *)raw)[e];
    }
    free(raw);
}

/* The method of the checks' float32 and 16-bit backward calls (set by
 * test_backward_methods; AUTO otherwise). float64 references always run AUTO. */
static alloy_mlstm_backward_method g_method = ALLOY_MLSTM_BACKWARD_AUTO;
/* 1: run_backward runs alloy_mlstm_chunkwise_keep, then alloy_mlstm_chunkwise_backward_kept */
static int g_kept = 0;

/* Runs the backward; returns the gradient in x's layout. Outputs are given
 * pre-filled with NaN, so an element never written shows. */

static double *run_backward(const problem *p, alloy_dtype dt, int chunk) {
    const alloy_dtype sdt = dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    const int64_t s_qk[4] = {p->B, p->NH, p->S, p->DK}, s_v[4] = {p->B, p->NH, p->S, p->DV},
                  s_g[3] = {p->B, p->NH, p->S};
    const int64_t s_c[4] = {p->nseq, p->NH, p->DK, p->DV}, s_n[3] = {p->nseq, p->NH, p->DK},
                  s_m[3] = {p->nseq, p->NH, 1}, s_cu[1] = {p->nseq + 1};
    alloy_array *q = dev(dt, 4, s_qk, p->x + p->off[XQ]), *k = dev(dt, 4, s_qk, p->x + p->off[XK]);
    alloy_array *v = dev(dt, 4, s_v, p->x + p->off[XV]), *i = dev(dt, 3, s_g, p->x + p->off[XI]);
    alloy_array *f = dev(dt, 3, s_g, p->x + p->off[XF]), *dh = dev(dt, 4, s_v, p->dh);
    alloy_array *c0 = NULL, *n0 = NULL, *m0 = NULL, *dC = NULL, *dn = NULL, *dm = NULL, *cu = NULL;
    if (p->cu) CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s_cu, p->cu, &cu));
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
    const alloy_mlstm_backward_method method = dt == ALLOY_FLOAT64 ? ALLOY_MLSTM_BACKWARD_AUTO : g_method;
    if (g_kept && dt != ALLOY_FLOAT64) {
        alloy_array *h = NULL, *cf = NULL, *nf = NULL, *mf = NULL, *kept[ALLOY_MLSTM_KEPT] = {NULL};
        /* CHUNKED_DEFAULT's record: the forward at DEFAULT (float16 tiles on a GPU, or with ALLOY_MLSTM_PATH=scaled) */
        const alloy_precision prec =
            method == ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT ? ALLOY_PRECISION_DEFAULT : ALLOY_PRECISION_HIGH;
        CHECK_OK(alloy_mlstm_chunkwise_keep(q, k, v, i, f, c0, n0, m0, cu, chunk, EPS, prec, NULL, &h, &cf, &nf, &mf,
                                            kept));
        CHECK_MSG((kept[4] != NULL) == (method == ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT),
                  "the record of the forward at %s %s kept[4..8]", prec == ALLOY_PRECISION_DEFAULT ? "DEFAULT" : "HIGH",
                  kept[4] ? "has" : "lacks");
        CHECK_OK(alloy_mlstm_chunkwise_backward_kept(q, k, v, i, f, c0, n0, m0, cu, h, cf, nf, kept, dh, dC, dn, dm,
                                                     chunk, EPS, NULL, &out[0], &out[1], &out[2], &out[3], &out[4],
                                                     &out[5], &out[6], &out[7]));
        alloy_array *made[] = {h, cf, nf, mf};
        for (size_t e = 0; e < sizeof made / sizeof made[0]; e++) alloy_array_free(made[e]);
        for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) alloy_array_free(kept[e]);
    } else {
        CHECK_OK(alloy_mlstm_chunkwise_backward_with_method(q, k, v, i, f, c0, n0, m0, cu, dh, dC, dn, dm, chunk, EPS,
                                                            method, NULL, &out[0], &out[1], &out[2], &out[3], &out[4],
                                                            &out[5], &out[6], &out[7]));
    }
    CHECK_OK(alloy_device_synchronize(ku_device()));
    for (int part = 0; part < XEND; part++)
        if (out[part]) read_into(out[part], g + p->off[part]);
    alloy_array *all[] = {q, k, v, i, f, dh, c0, n0, m0, dC, dn, dm, cu};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    for (int e = 0; e < 8; e++) alloy_array_free(out[e]);
    return g;
}

static const char *PART_NAME[XEND] = {"dq", "dk", "dv", "di", "df", "dc_initial", "dn_initial", "dm_initial"};

/* The floor of each gradient's scale, as a fraction of the largest gradient
 * of any input (see worst_error). */
static double g_floor = 1e-2;

/* Whether inputs of dtype dt take the chunk-parallel path: g_method's
 * choice, for AUTO the one alloy/mlstm.h documents (bfloat16 chunked, the
 * rest exact, ALLOY_MLSTM_BWD_PATH=exact|split replacing it). */
static int split_path(alloy_dtype dt) {
    if (g_method != ALLOY_MLSTM_BACKWARD_AUTO) return g_method == ALLOY_MLSTM_BACKWARD_CHUNKED;
    const char *p = getenv("ALLOY_MLSTM_BWD_PATH");
    if (p && !strcmp(p, "exact")) return 0;
    if (p && !strcmp(p, "split")) return dt == ALLOY_BFLOAT16 || dt == ALLOY_FLOAT32;
    return dt == ALLOY_BFLOAT16;
}

/* The worst, over the gradients, of max|got - want| / max|want|, where
 * max|want| is at least 1e-2 of the largest gradient of any input: a gradient
 * that is O(1) terms cancelling to eps's size (df where m does not depend on
 * f except through eps) is measured against the terms' scale. NaN (an element
 * not written) gives infinity. slack[e] (the finite differences' own
 * uncertainty; NULL: none) is taken off each element's error. */
static double worst_error(const problem *p, const double *got, const double *want, const double *slack,
                          const char *label) {
    double worst = 0, scale = 0;
    for (int64_t e = 0; e < p->off[XEND]; e++) scale = fabs(want[e]) > scale ? fabs(want[e]) : scale;
    for (int part = 0; part < XEND; part++) {
        double err = 0, mag = 0;
        for (int64_t e = p->off[part]; e < p->off[part + 1]; e++) {
            if (isnan(want[e])) continue; /* a kink inside the reference's stencil */
            const double sl = slack ? slack[e] : 0, raw = fabs(got[e] - want[e]), d = raw > sl ? raw - sl : 0;
            if (getenv("ALLOY_TEST_VERBOSE") && raw > 1e-6 * (1 + fabs(want[e])))
                fprintf(stderr, "      %s[%lld]: %.9g vs %.9g\n", PART_NAME[part], (long long)(e - p->off[part]), got[e], want[e]);
            err = isnan(got[e]) ? INFINITY : (d > err ? d : err);
            if (isnan(got[e])) break;
            mag = fabs(want[e]) > mag ? fabs(want[e]) : mag;
        }
        if (p->off[part + 1] == p->off[part]) continue;
        if (mag < g_floor * scale) mag = g_floor * scale;
        const double rel = err / (mag > 0 ? mag : 1);
        if (getenv("ALLOY_TEST_VERBOSE")) fprintf(stderr, "    %s %s: %.3g\n", label, PART_NAME[part], rel);
        worst = rel > worst ? rel : worst;
    }
    return worst;
}

/* Hostile gates must reach both branches of the max of m and of the floor,
 * else the test would not check the branches' gradients. */
static void check_branches(const problem *p, int hostile) {
    branches br = {0};
    loss(p, p->x, &br);
    if (hostile)
        CHECK_MSG(br.floor_wins > 0 && br.abs_wins > 0 && br.m_from_input > 0 && br.m_from_forget > 0,
                  "hostile gates must take both branches: floor %ld abs %ld, m from input %ld forget %ld",
                  br.floor_wins, br.abs_wins, br.m_from_input, br.m_from_forget);
}

/* The backward in dtype dt at every chunk size against want (errors past
 * slack[e] count, at most `bound`), and each chunk size against the first
 * (chunk-size invariance). Frees want and slack. */
static void check_chunks(problem *p, int hostile, alloy_dtype dt, const int *chunks, int nchunks, double *want,
                         double *slack, double bound, const char *what) {
    double *first = NULL;
    for (int c = 0; c < nchunks; c++) {
        double *got = run_backward(p, dt, chunks[c]);
        char label[160];
        snprintf(label, sizeof label, "%s %s S=%lld chunk=%d", alloy_dtype_name(dt), what, (long long)p->S,
                 chunks[c]);
        const double err = worst_error(p, got, want, slack, label);
        CHECK_MSG(err <= bound, "%s B=%lld NH=%lld DK=%lld DV=%lld init=%d dfinal=%d hostile=%d: error %.3g > %.3g",
                  label, (long long)p->B, (long long)p->NH, (long long)p->DK, (long long)p->DV, p->init,
                  p->dC != NULL, hostile, err, bound);
        if (!first) first = got;
        else {
            /* chunk-size invariance: the same gradients up to rounding */
            const double spread = worst_error(p, got, first, NULL, label);
            CHECK_MSG(spread <= bound, "%s: differs from chunk %d by %.3g", label, chunks[0], spread);
            free(got);
        }
    }
    free(first);
    free(want);
    free(slack);
}

/* The float64 backward against finite differences for each chunk size, and
 * every chunk size's gradients the same to rounding. */
static void check_fd(problem *p, int hostile, const int *chunks, int nchunks, double bound, const char *what) {
    check_branches(p, hostile);
    int64_t skipped = 0;
    double *slack = NULL, *want = fd_gradient(p, &skipped, &slack);
    /* a few elements at most sit on a kink; more would mean the test checks little */
    CHECK_MSG(skipped * 20 <= p->off[XEND], "%lld of %lld elements have no settled finite difference",
              (long long)skipped, (long long)p->off[XEND]);
    check_chunks(p, hostile, ALLOY_FLOAT64, chunks, nchunks, want, slack, bound, what);
}

static void check(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int init, int dfinal, int hostile,
                  const int *chunks, int nchunks) {
    problem p = make(B, NH, S, DK, DV, init, dfinal, hostile, ALLOY_FLOAT64);
    check_fd(&p, hostile, chunks, nchunks, 1e-6, "dense");
    problem_free(&p);
}

/* Inputs of dtype dt (float32, float16, bfloat16) against the float64
 * gradient of the same (rounded) inputs: alloy's float64 backward, which
 * check_fd validates against finite differences to 1e-8 — so the error
 * measured is the float32 evaluation's alone, without the differences'
 * truncation error. Every chunk size, and each against the first (invariance
 * to the dtype's rounding). */
static void check_ref(problem *p, int hostile, alloy_dtype dt, const int *chunks, int nchunks, double bound,
                      const char *what) {
    check_branches(p, hostile);
    check_chunks(p, hostile, dt, chunks, nchunks, run_backward(p, ALLOY_FLOAT64, chunks[0]), NULL, bound, what);
}

static void check_dt(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int init, int dfinal, int hostile,
                     alloy_dtype dt, const int *chunks, int nchunks, double bound) {
    problem p = make(B, NH, S, DK, DV, init, dfinal, hostile, dt);
    check_ref(&p, hostile, dt, chunks, nchunks, bound, "dense");
    problem_free(&p);
}

/* The gradient of the same loss written the way a chunk-parallel backward
 * computes it, in float64 without stabilisation (fine at these sizes):
 * with C~_r = b_r C~_0 + sum_{j<=r} a_rj k_j [v_j | 1]^T (a_rj = exp(i_j +
 * lf_{j+1..r}), b_r = exp(lf_{1..r}), C~_0 = exp(m_0) [C_0 | n_0]),
 * h_r = q^ C~_r / (max(|q^ n~_r|, 1) + eps exp(M_r)): the stabiliser M enters
 * only through eps, so the gradient is that of the bilinear form with M held
 * constant (sums over (r, j) pairs, no recurrence) plus, per row, the eps
 * term's dL/dM_r routed along the argmax chain of M_r = max(lf_r + M_{r-1},
 * i_r). An independent formulation of what the backward must return. */
static double *decomposed_gradient(const problem *p) {
    const int64_t DK = p->DK, DV = p->DV, W = DV + 1;
    const double scale = 1.0 / sqrt((double)DK);
    double *g = calloc((size_t)(p->off[XEND] + 1), sizeof(double));
    for (int64_t sh = 0; sh < p->nseq * p->NH; sh++) {
        int64_t row0, S;
        seq_rows(p, sh / p->NH, sh % p->NH, &row0, &S);
        const double *x = p->x;
        const double m0 = p->init ? x[p->off[XM] + sh] : 0;
        double *P = malloc(sizeof(double) * (size_t)(S + 1)), *lfv = malloc(sizeof(double) * (size_t)(S + 1));
        double *Ms = malloc(sizeof(double) * (size_t)(S + 1)), *dM = calloc((size_t)(S + 1), sizeof(double));
        int64_t *src = malloc(sizeof(int64_t) * (size_t)(S + 1));
        double *C0 = calloc((size_t)(DK * W), sizeof(double)), *Ct = malloc(sizeof(double) * (size_t)(S * DK * W + 1));
        double *G = malloc(sizeof(double) * (size_t)(S * W + 1)), *dlf = calloc((size_t)(S + 1), sizeof(double));
        double *Gam = malloc(sizeof(double) * (size_t)(DK * W));
        if (p->init)
            for (int64_t d = 0; d < DK; d++) {
                for (int64_t c = 0; c < DV; c++) C0[d * W + c] = exp(m0) * x[p->off[XC] + (sh * DK + d) * DV + c];
                C0[d * W + DV] = exp(m0) * x[p->off[XN] + sh * DK + d];
            }
        /* log-forget prefix sums, the stabiliser and the start of its argmax chain (-1: m_0) */
        double m = m0, acc = 0;
        int64_t chain = -1;
        for (int64_t t = 0; t < S; t++) {
            const double fp = x[p->off[XF] + row0 + t], ig = x[p->off[XI] + row0 + t];
            lfv[t] = fp >= 0 ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
            acc += lfv[t];
            P[t] = acc;
            const double a = lfv[t] + m;
            if (a >= ig) m = a;
            else m = ig, chain = t;
            Ms[t] = m;
            src[t] = chain;
        }
        /* C~_r, h_r, the row cotangents G_r = [dh_r / D_r | ds~_r] and dL/dM_r */
        for (int64_t r = 0; r < S; r++) {
            double *C = Ct + r * DK * W;
            for (int64_t e = 0; e < DK * W; e++) C[e] = exp(P[r]) * C0[e];
            for (int64_t j = 0; j <= r; j++) {
                const double a = exp(x[p->off[XI] + row0 + j] + P[r] - P[j]);
                const double *k = x + p->off[XK] + (row0 + j) * DK, *v = x + p->off[XV] + (row0 + j) * DV;
                for (int64_t d = 0; d < DK; d++) {
                    for (int64_t c = 0; c < DV; c++) C[d * W + c] += a * k[d] * v[c];
                    C[d * W + DV] += a * k[d];
                }
            }
            const double *q = x + p->off[XQ] + (row0 + r) * DK, *dh = p->dh + (row0 + r) * DV;
            double sn = 0, dhh = 0;
            for (int64_t d = 0; d < DK; d++) sn += q[d] * scale * C[d * W + DV];
            const double D = (fabs(sn) >= 1 ? fabs(sn) : 1) + EPS * exp(Ms[r]);
            for (int64_t c = 0; c < DV; c++) {
                double num = 0;
                for (int64_t d = 0; d < DK; d++) num += q[d] * scale * C[d * W + c];
                dhh += dh[c] * num / D;
                G[r * W + c] = dh[c] / D;
            }
            G[r * W + DV] = fabs(sn) >= 1 ? -dhh / D * (sn >= 0 ? 1 : -1) : 0;
            dM[r] = -dhh / D * EPS * exp(Ms[r]);
        }
        /* the final states' cotangents: on C~_S through exp(-M_S), and on M_S */
        double *F = NULL;
        if (p->dC && S > 0) {
            F = calloc((size_t)(DK * W), sizeof(double));
            const double *C = Ct + (S - 1) * DK * W, sc = exp(-Ms[S - 1]);
            double dot = 0;
            for (int64_t d = 0; d < DK; d++) {
                for (int64_t c = 0; c < DV; c++) {
                    F[d * W + c] = sc * p->dC[(sh * DK + d) * DV + c];
                    dot += p->dC[(sh * DK + d) * DV + c] * sc * C[d * W + c];
                }
                F[d * W + DV] = sc * p->dn[sh * DK + d];
                dot += p->dn[sh * DK + d] * sc * C[d * W + DV];
            }
            dM[S - 1] += p->dm[sh] - dot;
        }
        /* the bilinear form's gradient, M held constant: Gamma_r = q^_r G_r (+ F at the last row) */
        double dm0 = 0;
        for (int64_t r = 0; r < S; r++) {
            const double *q = x + p->off[XQ] + (row0 + r) * DK, *C = Ct + r * DK * W;
            double *dq = g + p->off[XQ] + (row0 + r) * DK;
            for (int64_t d = 0; d < DK; d++) {
                double t = 0;
                for (int64_t c = 0; c < W; c++) t += C[d * W + c] * G[r * W + c];
                dq[d] += scale * t;
                for (int64_t c = 0; c < W; c++)
                    Gam[d * W + c] = q[d] * scale * G[r * W + c] + (F && r == S - 1 ? F[d * W + c] : 0);
            }
            for (int64_t j = 0; j <= r; j++) {
                const double a = exp(x[p->off[XI] + row0 + j] + P[r] - P[j]);
                const double *k = x + p->off[XK] + (row0 + j) * DK, *v = x + p->off[XV] + (row0 + j) * DV;
                double *dk = g + p->off[XK] + (row0 + j) * DK, *dv = g + p->off[XV] + (row0 + j) * DV, glog = 0;
                for (int64_t d = 0; d < DK; d++) {
                    double gv = Gam[d * W + DV];
                    for (int64_t c = 0; c < DV; c++) gv += Gam[d * W + c] * v[c];
                    dk[d] += a * gv;
                    glog += a * k[d] * gv;
                }
                for (int64_t c = 0; c < DV; c++) {
                    double kg = 0;
                    for (int64_t d = 0; d < DK; d++) kg += k[d] * Gam[d * W + c];
                    dv[c] += a * kg;
                }
                g[p->off[XI] + row0 + j] += glog;
                for (int64_t s = j + 1; s <= r; s++) dlf[s] += glog;
            }
            double gb = 0;
            for (int64_t e = 0; e < DK * W; e++) gb += exp(P[r]) * C0[e] * Gam[e];
            for (int64_t s = 0; s <= r; s++) dlf[s] += gb;
            dm0 += gb;
            if (p->init)
                for (int64_t d = 0; d < DK; d++) {
                    for (int64_t c = 0; c < DV; c++) g[p->off[XC] + (sh * DK + d) * DV + c] += exp(m0 + P[r]) * Gam[d * W + c];
                    g[p->off[XN] + sh * DK + d] += exp(m0 + P[r]) * Gam[d * W + DV];
                }
        }
        /* the eps terms along M's argmax chains */
        for (int64_t r = 0; r < S; r++) {
            if (src[r] >= 0) g[p->off[XI] + row0 + src[r]] += dM[r];
            else dm0 += dM[r];
            for (int64_t s = src[r] + 1; s <= r; s++) dlf[s] += dM[r];
        }
        if (p->init) g[p->off[XM] + sh] = dm0 + (p->dC && S == 0 ? p->dm[sh] : 0);
        if (p->init && p->dC && S == 0) { /* nothing to pass through: the final state is the initial one */
            for (int64_t e = 0; e < DK * DV; e++) g[p->off[XC] + sh * DK * DV + e] = p->dC[sh * DK * DV + e];
            for (int64_t e = 0; e < DK; e++) g[p->off[XN] + sh * DK + e] = p->dn[sh * DK + e];
        }
        for (int64_t t = 0; t < S; t++) {
            const double fp = x[p->off[XF] + row0 + t];
            g[p->off[XF] + row0 + t] = dlf[t] / (1 + exp(fp)); /* d logsigmoid(f) = sigmoid(-f) */
        }
        free(P), free(lfv), free(Ms), free(dM), free(src), free(C0), free(Ct), free(G), free(dlf), free(Gam), free(F);
    }
    return g;
}

/* alloy's float64 backward equals the decomposed gradient to rounding. */
static void check_decomposed(problem *p, int hostile, const char *what) {
    check_branches(p, hostile);
    double *want = decomposed_gradient(p);
    double *got = run_backward(p, ALLOY_FLOAT64, 16);
    char label[128];
    snprintf(label, sizeof label, "float64 %s against the decomposed gradient", what);
    const double err = worst_error(p, got, want, NULL, label);
    CHECK_MSG(err <= 1e-9, "%s: error %.3g > 1e-9", label, err);
    free(got), free(want);
}

static const int CHUNKS[] = {16, 32, 64};

static void test_backward_float64(void) {
    check(1, 2, 37, 5, 3, 1, 1, 0, CHUNKS, 3);
    check(2, 1, 1, 3, 4, 1, 1, 0, CHUNKS, 1);
    check(1, 1, 16, 4, 2, 0, 0, 0, CHUNKS, 2);
    check(1, 1, 0, 4, 2, 1, 1, 0, CHUNKS, 1);
}

/* The backward against a second, independent formulation of the exact
 * gradient (the one a chunk-parallel backward follows): dense and packed,
 * with and without states, hostile gates. */
static void test_backward_decomposed(void) {
    problem p = make(1, 2, 37, 5, 3, 1, 1, 0, ALLOY_FLOAT64);
    check_decomposed(&p, 0, "dense");
    problem_free(&p);
    p = make(2, 1, 20, 4, 6, 0, 0, 0, ALLOY_FLOAT64);
    check_decomposed(&p, 0, "no states");
    problem_free(&p);
    p = make(1, 2, 45, 4, 3, 1, 1, 1, ALLOY_FLOAT64);
    check_decomposed(&p, 1, "hostile");
    problem_free(&p);
    static const int32_t cu[] = {0, 5, 5, 30, 31};
    p = make_packed(1, 2, 31, 3, 4, 4, cu, 1, 1, 0, ALLOY_FLOAT64);
    check_decomposed(&p, 0, "packed");
    problem_free(&p);
}

static void test_backward_hostile_gates(void) {
    check(1, 2, 45, 4, 3, 1, 1, 1, CHUNKS, 3);
    check(1, 1, 33, 3, 3, 0, 1, 1, CHUNKS, 2);
}

/* A forget pre-activation of -inf (forget everything, a valid gate) and an
 * input pre-activation of -inf (ignore the token): every gradient finite and
 * equal to the gradient at -80, where sigmoid(-80) and exp(-80) leave
 * nothing behind either (float64 and float32 on the exact kernel, bfloat16 on
 * the chunk-parallel path). */
static void test_backward_neg_inf_gates(void) {
    static const alloy_dtype dts[3] = {ALLOY_FLOAT64, ALLOY_FLOAT32, ALLOY_BFLOAT16};
    for (int x = 0; x < 3; x++) {
        problem p = make(1, 2, 40, 5, 3, 1, 1, 0, dts[x]);
        const int64_t at = p.off[XF] + 20, ai = p.off[XI] + 30;
        p.x[at] = -80, p.x[ai] = -80;
        double *g80 = run_backward(&p, dts[x], 16);
        p.x[at] = -INFINITY, p.x[ai] = -INFINITY;
        double *ginf = run_backward(&p, dts[x], 16);
        double scale = 0, worst = 0;
        int64_t bad = -1;
        for (int64_t e = 0; e < p.off[XEND]; e++) scale = fmax(scale, fabs(g80[e]));
        for (int64_t e = 0; e < p.off[XEND]; e++) {
            if (!isfinite(ginf[e]) && bad < 0) bad = e;
            worst = fmax(worst, fabs(ginf[e] - g80[e]) / scale);
        }
        CHECK_MSG(bad < 0, "%s: gradient element %lld is %g with gates of -inf", alloy_dtype_name(dts[x]),
                  (long long)bad, bad >= 0 ? ginf[bad] : 0.0);
        CHECK_MSG(worst <= 1e-6, "%s: gradients at gates of -inf and of -80 differ by %.3g of the largest",
                  alloy_dtype_name(dts[x]), worst);
        free(g80), free(ginf);
        problem_free(&p);
    }
}

/* The bound for float32 inputs: 5e-4 of each gradient's max, with
 * ordinary and hostile gates, initial states or none, S = 1 and odd S — on
 * the exact kernel (float32's default). The chunk-parallel path
 * (ALLOY_MLSTM_BWD_PATH=split) has no compensated sums: it meets the bound
 * with ordinary gates, but with hostile ones its nearly cancelling terms
 * leave up to 1e-2 (measured over seeds: docs/mlstm.md), so those cases
 * run on the exact kernel only. */
static void test_backward_float32(void) {
    check_dt(1, 2, 37, 5, 3, 1, 1, 0, ALLOY_FLOAT32, CHUNKS, 3, 5e-4);
    check_dt(1, 1, 1, 3, 2, 0, 0, 0, ALLOY_FLOAT32, CHUNKS, 1, 5e-4);
    check_dt(1, 2, 70, 16, 24, 1, 1, 0, ALLOY_FLOAT32, CHUNKS, 3, 5e-4);
    if (split_path(ALLOY_FLOAT32)) {
        printf("  float32 with hostile gates: not on the chunk-parallel path (the exact kernel's case)\n");
        return;
    }
    check_dt(1, 1, 40, 4, 3, 1, 1, 1, ALLOY_FLOAT32, CHUNKS, 3, 5e-4);
    check_dt(1, 2, 61, 8, 6, 0, 1, 1, ALLOY_FLOAT32, CHUNKS, 3, 5e-4);
}

/* float16 and bfloat16 inputs: gradients of the input dtype, float32 sums;
 * the bounds are a few roundings of the result (2^-11, 2^-8). Hostile gates
 * only in bfloat16: with den near eps some gradients pass float16's 65504.
 * bfloat16 takes the chunk-parallel path by default (ALLOY_MLSTM_BWD_PATH=exact:
 * the exact kernel): its gradients carry the roundings of its tensor-core
 * operands (P / den, A o W, the states and their gradients in bfloat16), and
 * the gate gradients are suffix sums of q . dq - k . dk and dm_initial is
 * <dX_0, X_0> plus m's chain: differences of terms of the size of the
 * largest gradient. It is measured against at least a tenth of the largest
 * gradient with a bound of 5e-2 (up to 2.8e-2 measured over 60 seeds); with
 * hostile gates it is not accurate (up to 0.22 of the largest dk measured
 * over 60 seeds: docs/mlstm.md), so that case runs on the exact kernel only
 * (here under ALLOY_MLSTM_BWD_PATH=exact, and in test_backward_methods). */
static void test_backward_half_inputs(void) {
    check_dt(1, 2, 37, 8, 6, 1, 1, 0, ALLOY_FLOAT16, CHUNKS, 3, 2e-3);
    const int split = split_path(ALLOY_BFLOAT16);
    if (split) g_floor = 1e-1;
    check_dt(1, 2, 50, 16, 24, 1, 1, 0, ALLOY_BFLOAT16, CHUNKS, 3, split ? 5e-2 : 2e-2);
    /* one DHQK slice and three or more 64-column tiles of v */
    check_dt(1, 1, 40, 16, 200, 1, 1, 0, ALLOY_BFLOAT16, CHUNKS, 3, split ? 5e-2 : 2e-2);
    g_floor = 1e-2;
    if (split) printf("  bfloat16 with hostile gates: not on the chunk-parallel path (the exact kernel's case)\n");
    else check_dt(1, 1, 40, 4, 3, 1, 1, 1, ALLOY_BFLOAT16, CHUNKS, 2, 2e-2);
}

/* The forward's branches at the inputs, with its margins: how near a kink of max(|q^ . n|, exp(-m)) the
 * inputs come (margin) and how far the normaliser's dot q^ . n cancels at its worst token, where it (not the
 * floor) is the denominator: |s| over the sum of its terms' magnitudes (cancel). */
static branches margins(const problem *p) {
    branches br = {0};
    br.margin = INFINITY;
    br.cancel = INFINITY;
    loss(p, p->x, &br);
    return br;
}
static double kink_margin(const problem *p) { return margins(p).margin; }
static double dot_margin(const problem *p) { return margins(p).cancel; }

/* Each row of n elements at x rounded as precision DEFAULT rounds it: to float16 after the power of two
 * that puts its largest magnitude in [2^14, 2^15) (11 significant bits relative to the row's largest). */
static void round_rows16(double *x, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        double mx = 0;
        for (int64_t e = 0; e < n; e++) mx = fabs(x[r * n + e]) > mx ? fabs(x[r * n + e]) : mx;
        if (mx == 0) continue;
        int ex;
        frexp(mx, &ex); /* mx in [2^(ex-1), 2^ex) */
        for (int64_t e = 0; e < n; e++) x[r * n + e] = ldexp(ku_round_half(ldexp(x[r * n + e], 15 - ex)), ex - 15);
    }
}

/* A problem as check_dt's (scaled: rows of q, k, v and dh times powers of two in [2^-20, 2^20]), its rows
 * of q, k, v and dh rounded as DEFAULT's pre-pass rounds them (round_rows16: the test then measures the
 * path's own roundings, not the conditioning of a gradient to its inputs' — a cancelling one, such as dk at
 * S = 1, moves by percents under an 11-bit rounding of q and k whatever computes it), drawn again while a
 * token comes within 2% of the floor's kink: the gradient jumps there, and which side 11-bit operands put
 * a token on need not be the float64 reference's. Scaled draws are also drawn again while a token's
 * q^ . n (its denominator) cancels to under 1% of its terms: there a few tokens dominate the states, the
 * cancelling token's h and dq dominate theirs, and 11-bit operands move such a dot by 2^-11 over the
 * cancellation (a draw that cancelled to 7e-4, ALLOY_TEST_SEED=4767651906930541954 over the whole file, put
 * dq 60% off). Dense draws cancel as far (1e-3 is common at DK = 72) without a token dominating and pass. */
static problem make_varlen(int nseq, const int64_t *lens, int64_t NH, int64_t DK, int64_t DV, int init, int dfinal,
                           int hostile, alloy_dtype dt);
static problem make_clear(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int init, int dfinal,
                          int scaled, int nseq, const int64_t *lens) {
    for (int attempt = 0;; attempt++) {
        problem p = lens ? make_varlen(nseq, lens, NH, DK, DV, init, dfinal, 0, ALLOY_FLOAT32)
                         : make(B, NH, S, DK, DV, init, dfinal, 0, ALLOY_FLOAT32);
        const int64_t rows = p.B * p.NH * p.S;
        for (int64_t t = 0; scaled && t < rows; t++) {
            const double a = ldexp(1, (int)harness_uniform(-20, 21)), b = ldexp(1, (int)harness_uniform(-20, 21));
            const double c = ldexp(1, (int)harness_uniform(-20, 21)), d = ldexp(1, (int)harness_uniform(-20, 21));
            for (int64_t x = 0; x < DK; x++) p.x[p.off[XQ] + t * DK + x] *= a, p.x[p.off[XK] + t * DK + x] *= b;
            for (int64_t x = 0; x < DV; x++) p.x[p.off[XV] + t * DV + x] *= c, p.dh[t * DV + x] *= d;
        }
        round_rows16(p.x + p.off[XQ], rows, DK);
        round_rows16(p.x + p.off[XK], rows, DK);
        round_rows16(p.x + p.off[XV], rows, DV);
        round_rows16(p.dh, rows, DV);
        if ((kink_margin(&p) >= 2e-2 && (!scaled || dot_margin(&p) >= 1e-2)) || attempt == 500) return p;
        problem_free(&p);
    }
}

/* The error precision DEFAULT's 11-bit operands predict for the gate gradients of a dense problem, relative to
 * what worst_error divides them by: di_t is k_t . dk_t and df_t a suffix sum of q_s . dq_s - k_s . dk_s (up to
 * the path through m of the floor and eps, small away from the floor's kink), so an
 * error of 2^-11 in each product's terms moves them by up to 2^-11 times the sum of those terms' magnitudes
 * over a sequence — with scaled rows a few tokens' products, far larger than what they cancel to. want: the
 * float64 gradients. */
static double gate_rounding(const problem *p, const double *want) {
    double scale = 0, big = 0, terms = 0;
    for (int64_t e = 0; e < p->off[XEND]; e++) scale = fabs(want[e]) > scale ? fabs(want[e]) : scale;
    for (int part = XI; part <= XF; part++)
        for (int64_t e = p->off[part]; e < p->off[part + 1]; e++) big = fabs(want[e]) > big ? fabs(want[e]) : big;
    for (int64_t sq = 0; sq < p->B * p->NH; sq++) {
        double sum = 0;
        for (int64_t e = sq * p->S * p->DK; e < (sq + 1) * p->S * p->DK; e++)
            sum += fabs(p->x[p->off[XQ] + e] * want[p->off[XQ] + e]) + fabs(p->x[p->off[XK] + e] * want[p->off[XK] + e]);
        terms = sum > terms ? sum : terms;
    }
    const double denom = big > g_floor * scale ? big : g_floor * scale;
    return denom > 0 ? ldexp(terms, -11) / denom : 0;
}

/* lens (nseq of them) non-NULL: a packed batch of those lengths (B, S unused) */
static void check_default(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, int init, int dfinal,
                          int scaled, int nchunks, int nseq, const int64_t *lens) {
    /* scaled rows: a few tokens dominate the states (their products' roundings then are the gradients'
     * scale); up to 2e-2 measured over 40 seeds. Scaled draws whose gate gradients' products cancel so far
     * that 11-bit operands may move them by more than half the bound (gate_rounding) are drawn again, as
     * make_clear draws again a cancelling q^ . n (ALLOY_TEST_SEED=4767895329307568698 over the whole file:
     * 0.10 predicted, di and df 5.4e-2 of their scale; the other draws of that run 6.4e-4 predicted) */
    const double bound = scaled ? 5e-2 : 1e-2;
    problem p = make_clear(B, NH, S, DK, DV, init, dfinal, scaled, nseq, lens);
    double *want = NULL; /* the float64 gradients of the kept scaled draw, the reference below */
    for (int attempt = 0; scaled && !lens; attempt++) {
        want = run_backward(&p, ALLOY_FLOAT64, CHUNKS[0]);
        const double gate = gate_rounding(&p, want);
        if (getenv("ALLOY_TEST_VERBOSE")) fprintf(stderr, "    scaled rows: the gate gradients' rounding %.3g\n", gate);
        if (gate <= bound / 2) break;
        CHECK_MSG(attempt < 50, "no scaled draw of S=%lld DK=%lld kept its gate gradients' rounding under %.3g",
                  (long long)S, (long long)DK, bound / 2);
        if (attempt >= 50) break;
        free(want);
        problem_free(&p);
        p = make_clear(B, NH, S, DK, DV, init, dfinal, scaled, nseq, lens);
    }
    CHECK_MSG(kink_margin(&p) >= 2e-2, "no draw of S=%lld DK=%lld kept 2%% from the floor's kink", (long long)p.S,
              (long long)DK);
    CHECK_MSG(!scaled || dot_margin(&p) >= 1e-2,
              "no scaled draw of S=%lld DK=%lld kept q^ . n from cancelling to 1%% of its terms", (long long)p.S,
              (long long)DK);
    const char *what = scaled ? "scaled rows" : (lens ? "packed" : "dense");
    if (want) { /* check_ref with the reference already computed */
        check_branches(&p, 0);
        check_chunks(&p, 0, ALLOY_FLOAT32, CHUNKS, nchunks, want, NULL, bound, what);
    } else {
        check_ref(&p, 0, ALLOY_FLOAT32, CHUNKS, nchunks, bound, what);
    }
    problem_free(&p);
}

/* float32 at precision DEFAULT (method CHUNKED_DEFAULT: float16 tiles with exponents per row and per
 * state tile, TF32's 11 significant bits) against the float64 backward of the same (pre-pass-rounded)
 * inputs: each gradient within 1e-2 of its own scale (at least a tenth of the largest; 5e-2 for scaled rows),
 * S = 1 to 90, one to three DHQK slices and column tiles, initial states, a packed batch, and tokens whose
 * rows of q, k, v and dh are scaled by powers of two from 2^-20 to 2^20 (the exponents' path: float16
 * alone would flush or overflow them). Hostile gates are not among them: they are built so that q^ . n
 * cancels to 1e-4 of its terms, and a state rounded to 11 bits (TF32's precision, as the forward at DEFAULT
 * stores it) then leaves h, and every gradient through dh . h, without a significant digit — measured up
 * to 80x the gradient's scale (docs/mlstm.md); the exact kernel and CHUNKED are the paths for them. */
static void test_backward_default_precision(void) {
    g_method = ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT;
    static const int64_t lens[6] = {5, 0, 70, 1, 33, 16};
    /* the gate gradients and dm_initial are differences of terms of the largest gradient's size (suffix sums
     * of q . dq - k . dk; <dX_0, X_0> with dX_0 from 11-bit tiles): measured against at least a tenth of the
     * largest, as the bfloat16 chunk path (dm_initial reached 1.05e-2 of a hundredth at one seed) */
    g_floor = 1e-1;
    check_default(1, 2, 37, 5, 3, 1, 1, 0, 3, 0, NULL);
    check_default(1, 1, 1, 3, 2, 0, 0, 0, 1, 0, NULL);
    check_default(1, 2, 70, 16, 24, 1, 1, 0, 3, 0, NULL);
    check_default(2, 1, 90, 72, 136, 1, 1, 0, 3, 0, NULL);
    check_default(1, 1, 70, 130, 66, 0, 1, 0, 2, 0, NULL);
    check_default(1, 2, 61, 8, 6, 1, 1, 1, 3, 0, NULL);
    check_default(1, 1, 70, 72, 70, 1, 1, 1, 2, 0, NULL);
    check_default(1, 1, 0, 16, 24, 1, 1, 0, 2, 6, lens);
    g_floor = 1e-2;
    g_method = ALLOY_MLSTM_BACKWARD_AUTO;
}

/* A grid of head sizes (one to three DHQK slices, one to four 64-column tiles of v, partial tiles):
 * bfloat16 on the chunk-parallel path (one DHQK slice with three or more column tiles once went wrong
 * there) and float32 on its default path, at one chunk size each. */
static void test_backward_shapes(void) {
    static const int64_t DKs[] = {1, 17, 64, 65, 136}, DVs[] = {7, 65, 200};
    const int split = split_path(ALLOY_BFLOAT16);
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 3; b++) {
            const int x = a * 3 + b;
            if (harness_leave_out((a + b) % 2)) continue; /* half the grid, every DK and DV */
            const alloy_dtype dt = x % 2 ? ALLOY_BFLOAT16 : ALLOY_FLOAT32;
            /* bfloat16 on the chunk-parallel path as test_backward_half_inputs, and 1e-1 at DHQK 1: where
             * |q^.n| wins the floor, h = sign(q) C / |n| does not depend on |q|, so dq is two terms of
             * about the largest gradient's size cancelling to ~0 in 8-bit roundings (7.9e-2 at
             * ALLOY_TEST_SEED=4767246338345054525 over the whole file; 150 seeds of this test alone: under
             * 3.2e-2 everywhere) */
            const double bound = dt == ALLOY_FLOAT32 ? 5e-4 : split ? (DKs[a] == 1 ? 1e-1 : 5e-2) : 2e-2;
            if (dt == ALLOY_BFLOAT16 && split) g_floor = 1e-1;
            check_dt(1, 1, 1 + (a * 29 + b * 13) % 90, DKs[a], DVs[b], x % 3 != 0, x % 2 == 0, 0, dt,
                     CHUNKS + x % 3, 1, bound);
            g_floor = 1e-2;
        }
}

/* ---- packed batches (cu_seqlens) ---- */

static problem make_varlen(int nseq, const int64_t *lens, int64_t NH, int64_t DK, int64_t DV, int init, int dfinal,
                           int hostile, alloy_dtype dt) {
    int32_t cu[16] = {0};   /* up to 15 sequences */
    for (int s = 0; s < nseq; s++) cu[s + 1] = cu[s] + (int32_t)lens[s];
    return make_packed(1, NH, cu[nseq], DK, DV, nseq, cu, init, dfinal, hostile, dt);
}

/* Sequence s of the packed problem p as a dense problem of its own (B = 1):
 * the same inputs, states and cotangents. */
static problem extract(const problem *p, int64_t s) {
    const int64_t len = p->cu[s + 1] - p->cu[s], NH = p->NH, DK = p->DK, DV = p->DV;
    problem d = {1, NH, len, DK, DV, 1, NULL, p->init, NULL, {0}, NULL, NULL, NULL, NULL};
    int64_t o = 0;
    for (int part = 0; part < XEND; part++) {
        d.off[part] = o;
        o += part_len(&d, part);
    }
    d.off[XEND] = o;
    d.x = malloc(sizeof(double) * (size_t)(o + 1));
    d.dh = malloc(sizeof(double) * (size_t)(NH * len * DV + 1));
    const int64_t width[XEND] = {DK, DK, DV, 1, 1, DK * DV, DK, 1};
    for (int part = 0; part < XEND; part++) {
        const int64_t w = width[part];
        if (part < XC) {   /* rows of tokens: head hd's rows start at hd T + cu[s] */
            for (int64_t hd = 0; hd < NH; hd++)
                memcpy(d.x + d.off[part] + hd * len * w, p->x + p->off[part] + (hd * p->S + p->cu[s]) * w,
                       sizeof(double) * (size_t)(len * w));
        } else if (p->init) {   /* states: (nseq, NH, ...) */
            memcpy(d.x + d.off[part], p->x + p->off[part] + s * NH * w, sizeof(double) * (size_t)(NH * w));
        }
    }
    for (int64_t hd = 0; hd < NH; hd++)
        memcpy(d.dh + hd * len * DV, p->dh + (hd * p->S + p->cu[s]) * DV, sizeof(double) * (size_t)(len * DV));
    if (p->dC) {
        d.dC = malloc(sizeof(double) * (size_t)(NH * DK * DV));
        d.dn = malloc(sizeof(double) * (size_t)(NH * DK));
        d.dm = malloc(sizeof(double) * (size_t)NH);
        memcpy(d.dC, p->dC + s * NH * DK * DV, sizeof(double) * (size_t)(NH * DK * DV));
        memcpy(d.dn, p->dn + s * NH * DK, sizeof(double) * (size_t)(NH * DK));
        memcpy(d.dm, p->dm + s * NH, sizeof(double) * (size_t)NH);
    }
    return d;
}

/* The packed gradients equal each sequence's run alone, bit for bit (the
 * kernel does the same arithmetic for a sequence wherever it lies), for
 * each chunk size; empty sequences give back the final states' cotangents
 * as the initial states' gradients. */
static void check_varlen_alone(int nseq, const int64_t *lens, int64_t NH, int64_t DK, int64_t DV, int init,
                               int dfinal, int hostile, alloy_dtype dt, const int *chunks, int nchunks) {
    problem p = make_varlen(nseq, lens, NH, DK, DV, init, dfinal, hostile, dt);
    for (int c = 0; c < nchunks; c++) {
        double *got = run_backward(&p, dt, chunks[c]);
        for (int64_t s = 0; s < nseq; s++) {
            problem d = extract(&p, s);
            double *alone = run_backward(&d, dt, chunks[c]);
            const int64_t width[XEND] = {DK, DK, DV, 1, 1, DK * DV, DK, 1};
            int64_t bad = 0, first = -1, first_part = 0;
            for (int part = 0; part < XEND; part++) {
                const int64_t w = width[part];
                for (int64_t hd = 0; hd < NH && (part < XC || init); hd++) {
                    const int64_t n = part < XC ? d.S * w : w;
                    const int64_t at = part < XC ? (hd * p.S + p.cu[s]) * w : (s * NH + hd) * w;
                    for (int64_t e = 0; e < n; e++) {
                        const double a = got[p.off[part] + at + e], b = alone[d.off[part] + hd * n + e];
                        if (!(a == b)) {
                            if (first < 0) first = hd * n + e, first_part = part;
                            bad++;
                        }
                    }
                }
            }
            CHECK_MSG(bad == 0,
                      "%s chunk %d: sequence %lld (length %lld): %lld gradient elements differ from the sequence "
                      "alone (first %s[%lld])",
                      alloy_dtype_name(dt), chunks[c], (long long)s, (long long)d.S, (long long)bad,
                      PART_NAME[first_part], (long long)first);
            if (d.S == 0 && init && dfinal)
                for (int64_t e = 0; e < NH * DK * DV; e++)
                    CHECK(got[p.off[XC] + s * NH * DK * DV + e] == d.dC[e]);
            free(alone);
            problem_free(&d);
        }
        free(got);
    }
    problem_free(&p);
}

static void test_backward_varlen(void) {
    /* float64 against finite differences: an empty and a one-token sequence,
     * a sequence over two chunks of 16 */
    static const int64_t lens[] = {5, 0, 1, 21};
    problem p = make_varlen(4, lens, 2, 3, 2, 1, 1, 0, ALLOY_FLOAT64);
    check_fd(&p, 0, CHUNKS, 2, 1e-6, "varlen");
    problem_free(&p);
    static const int64_t second[] = {18, 0, 27};
    p = make_varlen(3, second, 1, 3, 3, 0, 1, 0, ALLOY_FLOAT64);
    check_fd(&p, 0, CHUNKS, 2, 1e-6, "varlen no initial");
    problem_free(&p);
    /* hostile gates: packed equals alone (below, bit for bit) and alone is
     * checked against the differences above; the differences of a packed
     * hostile problem add nothing but their roundoff (steps of 2e-8 on tiny
     * queries: about 1e-6, the bound) */
    /* float32 against the float64 backward */
    static const int64_t mixed[] = {5, 0, 70, 1, 33, 16};
    p = make_varlen(6, mixed, 2, 8, 6, 1, 1, 0, ALLOY_FLOAT32);
    check_ref(&p, 0, ALLOY_FLOAT32, CHUNKS, 3, 5e-4, "varlen");
    problem_free(&p);
    if (!split_path(ALLOY_FLOAT32)) {   /* hostile gates: the exact kernel's case (test_backward_float32) */
        p = make_varlen(3, second, 2, 8, 6, 1, 1, 1, ALLOY_FLOAT32);
        check_ref(&p, 1, ALLOY_FLOAT32, CHUNKS, 3, 5e-4, "varlen hostile");
        problem_free(&p);
    }
    /* each sequence as if alone */
    check_varlen_alone(6, mixed, 2, 16, 24, 1, 1, 0, ALLOY_FLOAT32, CHUNKS, 2);
    check_varlen_alone(6, mixed, 1, 5, 3, 0, 0, 1, ALLOY_FLOAT64, CHUNKS + 1, 2);
    static const int64_t two[] = {0, 37};
    check_varlen_alone(2, two, 2, 8, 8, 1, 1, 0, ALLOY_BFLOAT16, CHUNKS, 1);
}

/* The method argument: EXACT and CHUNKED each where AUTO would not take them
 * (bfloat16 with hostile gates on the exact kernel to its bound; float32 on
 * the chunk-parallel path with ordinary gates to the 5e-4), whatever
 * ALLOY_MLSTM_BWD_PATH says; then the errors. */
/* The backward from the forward's kept chunk record (alloy_mlstm_chunkwise_keep,
 * alloy_mlstm_chunkwise_backward_kept) equals the recomputing call bit for
 * bit: CHUNKED for bfloat16 and float32, dense with initial states and final
 * cotangents over several chunks and column tiles, packed with an empty
 * sequence; CHUNKED_DEFAULT from the float16-tile record of float32 at
 * DEFAULT (ALLOY_MLSTM_PATH=scaled puts the CPU's forward on those tiles),
 * dense over three DHQK slices and packed; then its errors name `kept`. */
static void test_backward_kept(void) {
    static const int64_t lens[4] = {30, 0, 75, 9};
    enum { NCASE = 5 };
    problem ps[NCASE] = {make(1, 2, 70, 72, 136, 1, 1, 0, ALLOY_BFLOAT16),
                         make(2, 1, 45, 16, 24, 1, 1, 0, ALLOY_FLOAT32),
                         make_varlen(4, lens, 2, 8, 8, 1, 1, 0, ALLOY_BFLOAT16),
                         make(1, 2, 70, 136, 72, 1, 1, 0, ALLOY_FLOAT32),
                         make_varlen(4, lens, 2, 16, 8, 1, 1, 0, ALLOY_FLOAT32)};
    const alloy_dtype dts[NCASE] = {ALLOY_BFLOAT16, ALLOY_FLOAT32, ALLOY_BFLOAT16, ALLOY_FLOAT32, ALLOY_FLOAT32};
    const char *path = getenv("ALLOY_MLSTM_PATH");
    char *saved = path ? strdup(path) : NULL;
    for (int c = 0; c < NCASE; c++) {
        const int chunk = c == 0 || c == 3 ? 32 : 16;
        g_method = c < 3 ? ALLOY_MLSTM_BACKWARD_CHUNKED : ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT;
        if (c >= 3) setenv("ALLOY_MLSTM_PATH", "scaled", 1);
        double *want = run_backward(&ps[c], dts[c], chunk);
        g_kept = 1;
        double *got = run_backward(&ps[c], dts[c], chunk);
        g_kept = 0;
        CHECK_MSG(memcmp(want, got, sizeof(double) * (size_t)ps[c].off[XEND]) == 0,
                  "case %d: the gradients from the kept record differ from the recomputing call's", c);
        free(want), free(got);
        problem_free(&ps[c]);
    }
    if (saved) setenv("ALLOY_MLSTM_PATH", saved, 1);
    else unsetenv("ALLOY_MLSTM_PATH");
    g_method = ALLOY_MLSTM_BACKWARD_AUTO;
    /* errors: float16 (no chunk-parallel backward), a kept slot given, no final states, a record of other sizes */
    const int64_t s_qk[4] = {1, 1, 20, 4}, s_g[3] = {1, 1, 20};
    alloy_array *q16 = ku_zeros(ALLOY_FLOAT16, 4, s_qk), *g16 = ku_zeros(ALLOY_FLOAT16, 3, s_g);
    alloy_array *q = ku_zeros(ALLOY_BFLOAT16, 4, s_qk), *g = ku_zeros(ALLOY_BFLOAT16, 3, s_g);
    alloy_array *h = NULL, *cf = NULL, *nf = NULL, *mf = NULL, *kept[ALLOY_MLSTM_KEPT] = {NULL};
    CHECK_FAILS(alloy_mlstm_chunkwise_keep(q16, q16, q16, g16, g16, NULL, NULL, NULL, NULL, 16, EPS,
                                           ALLOY_PRECISION_HIGH, NULL, &h, &cf, &nf, &mf, kept),
                ALLOY_ERROR_INVALID_ARGUMENT, "kept: the chunk-parallel backward does not take float16");
    CHECK_FAILS(alloy_mlstm_chunkwise_keep(q, q, q, g, g, NULL, NULL, NULL, NULL, 16, EPS, ALLOY_PRECISION_HIGH, NULL,
                                           &h, NULL, NULL, NULL, kept),
                ALLOY_ERROR_INVALID_ARGUMENT, "c_out, n_out and m_out must be slots");
    kept[1] = q;
    CHECK_FAILS(alloy_mlstm_chunkwise_keep(q, q, q, g, g, NULL, NULL, NULL, NULL, 16, EPS, ALLOY_PRECISION_HIGH, NULL,
                                           &h, &cf, &nf, &mf, kept),
                ALLOY_ERROR_INVALID_ARGUMENT, "kept[1] is not NULL");
    kept[1] = NULL;
    CHECK(h == NULL && cf == NULL);
    CHECK_OK(alloy_mlstm_chunkwise_keep(q, q, q, g, g, NULL, NULL, NULL, NULL, 16, EPS, ALLOY_PRECISION_HIGH, NULL, &h,
                                        &cf, &nf, &mf, kept));
    alloy_array *o[5] = {NULL};
    /* chunk 32 keeps other sizes than the record of chunk 16 */
    CHECK_FAILS(alloy_mlstm_chunkwise_backward_kept(q, q, q, g, g, NULL, NULL, NULL, NULL, h, cf, nf, kept, q, NULL,
                                                    NULL, NULL, 32, EPS, NULL, &o[0], &o[1], &o[2], &o[3], &o[4], NULL,
                                                    NULL, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "kept[0] is not the record");
    /* a bfloat16 record with a float16-tile record's slot given */
    alloy_array *extra[ALLOY_MLSTM_KEPT] = {kept[0], kept[1], kept[2], kept[3], NULL, q};
    CHECK_FAILS(alloy_mlstm_chunkwise_backward_kept(q, q, q, g, g, NULL, NULL, NULL, NULL, h, cf, nf, extra, q, NULL,
                                                    NULL, NULL, 16, EPS, NULL, &o[0], &o[1], &o[2], &o[3], &o[4], NULL,
                                                    NULL, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "kept[5] is given");
    alloy_array *swapped[ALLOY_MLSTM_KEPT] = {kept[1], kept[0], kept[2], kept[3]};
    CHECK_FAILS(alloy_mlstm_chunkwise_backward_kept(q, q, q, g, g, NULL, NULL, NULL, NULL, h, cf, nf, swapped, q, NULL,
                                                    NULL, NULL, 16, EPS, NULL, &o[0], &o[1], &o[2], &o[3], &o[4], NULL,
                                                    NULL, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "kept[0]");
    CHECK_FAILS(alloy_mlstm_chunkwise_backward_kept(q, q, q, g, g, NULL, NULL, NULL, NULL, h, nf, nf, kept, q, NULL,
                                                    NULL, NULL, 16, EPS, NULL, &o[0], &o[1], &o[2], &o[3], &o[4], NULL,
                                                    NULL, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "c_final has shape");
    CHECK(o[0] == NULL);
    alloy_array *all[] = {q16, g16, q, g, h, cf, nf, mf, kept[0], kept[1], kept[2], kept[3]};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    /* a float16-tile record (float32 at DEFAULT) with a row array of other inputs' shape */
    const int64_t s_q32[4] = {1, 1, 20, 16};
    alloy_array *q32 = ku_zeros(ALLOY_FLOAT32, 4, s_q32), *g32 = ku_zeros(ALLOY_FLOAT32, 3, s_g);
    alloy_array *r[ALLOY_MLSTM_KEPT] = {NULL};
    h = cf = nf = mf = NULL;
    setenv("ALLOY_MLSTM_PATH", "scaled", 1);
    CHECK_OK(alloy_mlstm_chunkwise_keep(q32, q32, q32, g32, g32, NULL, NULL, NULL, NULL, 16, EPS,
                                        ALLOY_PRECISION_DEFAULT, NULL, &h, &cf, &nf, &mf, r));
    if (saved) setenv("ALLOY_MLSTM_PATH", saved, 1);
    else unsetenv("ALLOY_MLSTM_PATH");
    free(saved);
    CHECK(r[4] != NULL && r[8] != NULL);
    alloy_array *rows16 = NULL;
    const int64_t s_r16[4] = {1, 1, 20, 4};
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT16, 4, s_r16, &rows16));
    alloy_array *wrong[ALLOY_MLSTM_KEPT];
    for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) wrong[e] = e == 6 ? rows16 : r[e];
    CHECK_FAILS(alloy_mlstm_chunkwise_backward_kept(q32, q32, q32, g32, g32, NULL, NULL, NULL, NULL, NULL, cf, nf,
                                                    wrong, q32, NULL, NULL, NULL, 16, EPS, NULL, &o[0], &o[1], &o[2],
                                                    &o[3], &o[4], NULL, NULL, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "kept[6] is not the record");
    CHECK(o[0] == NULL);
    alloy_array *all32[] = {q32, g32, rows16, h, cf, nf, mf};
    for (size_t e = 0; e < sizeof all32 / sizeof all32[0]; e++) alloy_array_free(all32[e]);
    for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) alloy_array_free(r[e]);
}

/* ALLOY_MLSTM_GRAD_PERSIST=1 (the chunk-parallel backward's phase 3 as resident threadgroups taking the
 * jobs in turn, each issuing the next job's first copies during its epilogue; for timing) gives the
 * one-job-per-threadgroup results (=0, the default) bit for bit: bfloat16 over two column tiles and DHQK
 * slices, float32 on float16 tiles (CHUNKED_DEFAULT, three DHQK slices, a short last chunk), a packed
 * batch with an empty sequence (jobs of empty slots skipped between live ones). */
static void test_backward_persistent(void) {
    static const int64_t lens[4] = {30, 0, 75, 9};
    enum { NCASE = 3 };
    problem ps[NCASE] = {make(1, 2, 70, 72, 136, 1, 1, 0, ALLOY_BFLOAT16),
                         make(1, 2, 61, 136, 72, 1, 1, 0, ALLOY_FLOAT32),
                         make_varlen(4, lens, 2, 8, 8, 1, 1, 0, ALLOY_BFLOAT16)};
    const alloy_dtype dts[NCASE] = {ALLOY_BFLOAT16, ALLOY_FLOAT32, ALLOY_BFLOAT16};
    const alloy_mlstm_backward_method ms[NCASE] = {ALLOY_MLSTM_BACKWARD_CHUNKED, ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT,
                                                   ALLOY_MLSTM_BACKWARD_CHUNKED};
    for (int c = 0; c < NCASE; c++) {
        g_method = ms[c];
        setenv("ALLOY_MLSTM_GRAD_PERSIST", "0", 1);
        double *want = run_backward(&ps[c], dts[c], 16);
        setenv("ALLOY_MLSTM_GRAD_PERSIST", "1", 1);
        double *got = run_backward(&ps[c], dts[c], 16);
        unsetenv("ALLOY_MLSTM_GRAD_PERSIST");
        CHECK_MSG(memcmp(want, got, sizeof(double) * (size_t)ps[c].off[XEND]) == 0,
                  "case %d: the persistent phase 3 differs from one job per threadgroup", c);
        free(want), free(got);
        problem_free(&ps[c]);
    }
    g_method = ALLOY_MLSTM_BACKWARD_AUTO;
}

static void test_backward_methods(void) {
    g_method = ALLOY_MLSTM_BACKWARD_EXACT;
    check_dt(1, 1, 40, 4, 3, 1, 1, 1, ALLOY_BFLOAT16, CHUNKS, 2, 2e-2);
    g_method = ALLOY_MLSTM_BACKWARD_CHUNKED;
    check_dt(1, 2, 37, 5, 3, 1, 1, 0, ALLOY_FLOAT32, CHUNKS, 2, 5e-4);
    /* several 64-column tiles (dv, dq, dk two or three jobs each; bfloat16 two tiles a threadgroup, the
     * last one past DHHV = 136) */
    check_dt(1, 1, 45, 80, 72, 1, 1, 0, ALLOY_FLOAT32, CHUNKS, 2, 5e-4);
    g_floor = 1e-1;
    check_dt(1, 1, 45, 72, 136, 1, 1, 0, ALLOY_BFLOAT16, CHUNKS, 2, 5e-2);
    g_floor = 1e-2;
    g_method = ALLOY_MLSTM_BACKWARD_AUTO;
    const int64_t s_qk[4] = {1, 1, 3, 2}, s_g[3] = {1, 1, 3};
    const double z[6] = {0};
    alloy_array *h = dev(ALLOY_FLOAT16, 4, s_qk, z), *hg = dev(ALLOY_FLOAT16, 3, s_g, z);
    alloy_array *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
#define BWM(M)                                                                                                \
    alloy_mlstm_chunkwise_backward_with_method(h, h, h, hg, hg, NULL, NULL, NULL, NULL, h, NULL, NULL, NULL, 0, 1e-6, \
                                               M, NULL, &a, &b, &c, &d, &e, NULL, NULL, NULL)
    CHECK_FAILS(BWM(ALLOY_MLSTM_BACKWARD_CHUNKED), ALLOY_ERROR_INVALID_ARGUMENT,
                "method CHUNKED takes bfloat16 or float32 inputs, and q is float16");
    CHECK_FAILS(BWM(ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT), ALLOY_ERROR_INVALID_ARGUMENT,
                "method CHUNKED_DEFAULT takes float32 inputs, and q is float16");
    CHECK_FAILS(BWM((alloy_mlstm_backward_method)7), ALLOY_ERROR_INVALID_ARGUMENT, "method is 7");
#undef BWM
    CHECK(a == NULL && b == NULL && c == NULL && d == NULL && e == NULL);
    alloy_array_free(h);
    alloy_array_free(hg);
}

static void test_backward_errors(void) {
    const int64_t s_qk[4] = {1, 1, 3, 2}, s_v[4] = {1, 1, 3, 2}, s_g[3] = {1, 1, 3}, bad[3] = {1, 1, 4};
    const double z[16] = {0};
    alloy_array *q = dev(ALLOY_FLOAT32, 4, s_qk, z), *v = dev(ALLOY_FLOAT32, 4, s_v, z);
    alloy_array *g = dev(ALLOY_FLOAT32, 3, s_g, z), *gb = dev(ALLOY_FLOAT32, 3, bad, z);
    alloy_array *d64 = dev(ALLOY_FLOAT64, 4, s_v, z);
    alloy_array *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
#define BWD(Q, K, V, I, F, C0, DH, DC, CH, EP)                                                                \
    alloy_mlstm_chunkwise_backward(Q, K, V, I, F, C0, NULL, NULL, NULL, DH, DC, NULL, NULL, CH, EP, NULL, &a, &b, \
                                   &c, &d, &e, NULL, NULL, NULL)
    CHECK_FAILS(BWD(NULL, q, v, g, g, NULL, v, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "q is NULL");
    CHECK_FAILS(BWD(q, q, v, g, gb, NULL, v, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "f has shape");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, NULL, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "dh is NULL");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, d64, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "dh");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, v, NULL, 24, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "chunk_size");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, v, NULL, 0, -1.0), ALLOY_ERROR_INVALID_ARGUMENT, "eps");
    CHECK_FAILS(BWD(q, q, v, g, g, v, v, NULL, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "c_initial");
    CHECK_FAILS(BWD(q, q, v, g, g, NULL, v, v, 0, 1e-6), ALLOY_ERROR_INVALID_ARGUMENT, "dc_final");
#undef BWD
    /* packed batches: cu_seqlens as the forward checks it; states per sequence */
    const int32_t good[3] = {0, 1, 3}, down[3] = {0, 2, 1}, late[3] = {1, 2, 3}, shrt[3] = {0, 1, 2};
    const int64_t s_cu[1] = {3}, s_c1[4] = {1, 1, 2, 2}, s_n2[3] = {2, 1, 2}, s_m2[3] = {2, 1, 1};
    const int64_t s_q2[4] = {2, 1, 3, 2}, s_g2[3] = {2, 1, 3};
    alloy_array *cu = NULL, *cud = NULL, *cul = NULL, *cus = NULL, *cuf = dev(ALLOY_FLOAT32, 1, s_cu, z);
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s_cu, good, &cu));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s_cu, down, &cud));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s_cu, late, &cul));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s_cu, shrt, &cus));
    alloy_array *c1 = dev(ALLOY_FLOAT32, 4, s_c1, z), *n2 = dev(ALLOY_FLOAT32, 3, s_n2, z);
    alloy_array *m2 = dev(ALLOY_FLOAT32, 3, s_m2, z), *q2 = dev(ALLOY_FLOAT32, 4, s_q2, z);
    alloy_array *g2 = dev(ALLOY_FLOAT32, 3, s_g2, z);
    alloy_array *s5 = NULL, *s6 = NULL, *s7 = NULL;
#define PK(Q, V, G, C0, N0, M0, CU)                                                                            \
    alloy_mlstm_chunkwise_backward(Q, Q, V, G, G, C0, N0, M0, CU, V, NULL, NULL, NULL, 0, 1e-6, NULL, &a, &b, &c, \
                                   &d, &e, &s5, &s6, &s7)
    CHECK_FAILS(PK(q, v, g, NULL, NULL, NULL, cuf), ALLOY_ERROR_INVALID_ARGUMENT, "cu_seqlens is float32 but must be int32");
    CHECK_FAILS(PK(q2, q2, g2, NULL, NULL, NULL, cu), ALLOY_ERROR_INVALID_ARGUMENT,
                "with cu_seqlens, q must be (1, NH, total, DHQK)");
    CHECK_FAILS(PK(q, v, g, c1, n2, m2, cu), ALLOY_ERROR_INVALID_ARGUMENT,
                "c_initial has shape (1, 1, 2, 2) but must have shape (2, 1, 2, 2)");
    if (alloy_device_backend(ku_device()) == ALLOY_BACKEND_CPU) {
        CHECK_FAILS(PK(q, v, g, NULL, NULL, NULL, cud), ALLOY_ERROR_INVALID_ARGUMENT, "cu_seqlens decreases at index 2");
        CHECK_FAILS(PK(q, v, g, NULL, NULL, NULL, cul), ALLOY_ERROR_INVALID_ARGUMENT, "cu_seqlens[0] is 1");
        CHECK_FAILS(PK(q, v, g, NULL, NULL, NULL, cus), ALLOY_ERROR_INVALID_ARGUMENT,
                    "cu_seqlens ends at 2 but the packed inputs hold 3 tokens");
    }
#undef PK
    CHECK(a == NULL && b == NULL && c == NULL && d == NULL && e == NULL && s5 == NULL && s6 == NULL && s7 == NULL);
    alloy_array *all[] = {q, v, g, gb, d64, cu, cud, cul, cus, cuf, c1, n2, m2, q2, g2};
    for (size_t x = 0; x < sizeof all / sizeof all[0]; x++) alloy_array_free(all[x]);
}

int main(void) {
    harness_seed();
    RUN(test_backward_errors);
    RUN(test_backward_float64);
    RUN(test_backward_hostile_gates);
    RUN(test_backward_neg_inf_gates);
    RUN(test_backward_decomposed);
    RUN(test_backward_float32);
    RUN(test_backward_default_precision);
    RUN(test_backward_half_inputs);
    RUN(test_backward_shapes);
    RUN(test_backward_varlen);
    RUN(test_backward_methods);
    RUN(test_backward_kept);
    RUN_VARIANT(test_backward_persistent);
    return harness_finish();
}
