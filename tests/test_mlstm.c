/* test_mlstm.c — alloy_mlstm_step and alloy_mlstm_parallel (alloy/mlstm.h)
 * against a float64 recurrent reference (the step of mlstm_anchors §1.1
 * applied S times from the initial states or zeros): the parallel form and
 * chains of steps (in place and into separate outputs) equal it for S = 1,
 * odd S, several tiles of queries, keys and columns, head sizes 1, 7, 40, 64
 * and 128, given initial states, hostile gates (input pre-activations 60,
 * forget pre-activations -40); float32 inputs within 2e-4 of max|h|, float16
 * inputs within 4e-3, bfloat16 within 2e-2; every output element written (given
 * outputs are pre-filled with NaN) and finite; the errors name their
 * argument. On the device the tests run on (ALLOY_DEVICE, default cpu). */
#include "mlstm_problem.h"

/* ---- checks ------------------------------------------------------------------ */

/* The stream check_steps queues its steps on (NULL: the default stream). */
static alloy_stream *step_stream;

static void check_parallel(const problem *p, const double *href, const double *mag, const char *label) {
    const int64_t BH = p->B * p->NH;
    const int64_t s_qk[4] = {p->B, p->NH, p->S, p->DK}, s_v[4] = {p->B, p->NH, p->S, p->DV};
    const int64_t s_g[3] = {p->B, p->NH, p->S};
    alloy_array *q = dev_array(p->dt, 4, s_qk, p->q), *k = dev_array(p->dt, 4, s_qk, p->k);
    alloy_array *v = dev_array(p->dt, 4, s_v, p->v), *i = dev_array(p->dt, 3, s_g, p->i);
    alloy_array *f = dev_array(p->dt, 3, s_g, p->f);
    alloy_array *h = nan_array(p->dt, 4, s_v), *given = h;
    CHECK_OK(alloy_mlstm_parallel(q, k, v, i, f, EPS, NULL, &h));
    CHECK(h == given);
    double *got = host_of(h);
    const double err = h_err(label, got, href, mag, BH * p->S * p->DV);
    CHECK_MSG(err <= tolerance(p->dt), "%s parallel (%lld,%lld,%lld,%lld,%lld) %s: error %.3g of max(max|h|, its error magnitude)", label,
              (long long)p->B, (long long)p->NH, (long long)p->S, (long long)p->DK, (long long)p->DV,
              alloy_dtype_name(p->dt), err);
    free(got);
    /* a new h when none is given */
    alloy_array *h2 = NULL;
    CHECK_OK(alloy_mlstm_parallel(q, k, v, i, f, EPS, NULL, &h2));
    if (h2) {
        double *g2 = host_of(h2);
        CHECK(h_err(label, g2, href, mag, BH * p->S * p->DV) <= tolerance(p->dt));
        free(g2);
    }
    alloy_array_free(h2);
    alloy_array_free(h), alloy_array_free(q), alloy_array_free(k), alloy_array_free(v);
    alloy_array_free(i), alloy_array_free(f);
}

/* S steps; in_place: the state arrays are their own outputs; else the states
 * ping-pong between two sets of given outputs (pre-filled with NaN). */
static void check_steps(const problem *p, const double *href, const double *mag, const double *cref,
                        const double *nref, const double *mref, int in_place, const char *label) {
    const int64_t B = p->B, NH = p->NH, S = p->S, DK = p->DK, DV = p->DV, BH = B * NH;
    const int64_t s_qk[3] = {B, NH, DK}, s_v[3] = {B, NH, DV}, s_g[3] = {B, NH, 1}, s_c[4] = {B, NH, DK, DV};
    double *c0 = calloc((size_t)(BH * DK * DV), sizeof(double)), *n0 = calloc((size_t)(BH * DK), sizeof(double));
    double *m0 = calloc((size_t)BH, sizeof(double));
    if (p->c0) memcpy(c0, p->c0, sizeof(double) * (size_t)(BH * DK * DV));
    if (p->n0) memcpy(n0, p->n0, sizeof(double) * (size_t)(BH * DK));
    if (p->m0) memcpy(m0, p->m0, sizeof(double) * (size_t)BH);
    alloy_array *st[2][3];
    st[0][0] = dev_array(ALLOY_FLOAT32, 4, s_c, c0);
    st[0][1] = dev_array(ALLOY_FLOAT32, 3, s_qk, n0);
    st[0][2] = dev_array(ALLOY_FLOAT32, 3, s_g, m0);
    st[1][0] = nan_array(ALLOY_FLOAT32, 4, s_c);
    st[1][1] = nan_array(ALLOY_FLOAT32, 3, s_qk);
    st[1][2] = nan_array(ALLOY_FLOAT32, 3, s_g);
    double *hs = malloc(sizeof(double) * (size_t)(BH * S * DV + 1));
    double *xq = malloc(sizeof(double) * (size_t)(BH * DK)), *xk = malloc(sizeof(double) * (size_t)(BH * DK));
    double *xv = malloc(sizeof(double) * (size_t)(BH * DV)), *xi = malloc(sizeof(double) * (size_t)BH);
    double *xf = malloc(sizeof(double) * (size_t)BH);
    int cur = 0;
    for (int64_t t = 0; t < S; t++) {
        for (int64_t bh = 0; bh < BH; bh++) {
            memcpy(xq + bh * DK, p->q + (bh * S + t) * DK, sizeof(double) * (size_t)DK);
            memcpy(xk + bh * DK, p->k + (bh * S + t) * DK, sizeof(double) * (size_t)DK);
            memcpy(xv + bh * DV, p->v + (bh * S + t) * DV, sizeof(double) * (size_t)DV);
            xi[bh] = p->i[bh * S + t];
            xf[bh] = p->f[bh * S + t];
        }
        alloy_array *q = dev_array(p->dt, 3, s_qk, xq), *k = dev_array(p->dt, 3, s_qk, xk);
        alloy_array *v = dev_array(p->dt, 3, s_v, xv), *i = dev_array(p->dt, 3, s_g, xi);
        alloy_array *f = dev_array(p->dt, 3, s_g, xf);
        alloy_array *h = nan_array(p->dt, 3, s_v);
        const int nxt = in_place ? cur : 1 - cur;
        if (!in_place)
            for (int e = 0; e < 3; e++) CHECK_OK(alloy_array_fill(st[nxt][e], NAN));
        alloy_array *co = st[nxt][0], *no = st[nxt][1], *mo = st[nxt][2];
        /* (on a stream of its own: after the default stream's uploads and fills, read after it) */
        if (step_stream) CHECK_OK(alloy_device_synchronize(alloy_array_device(q)));
        CHECK_OK(alloy_mlstm_step(q, k, v, i, f, st[cur][0], st[cur][1], st[cur][2], EPS, step_stream, &h, &co, &no,
                                  &mo));
        if (step_stream) CHECK_OK(alloy_stream_synchronize(step_stream));
        CHECK(co == st[nxt][0] && no == st[nxt][1] && mo == st[nxt][2]);
        double *g = host_of(h);
        for (int64_t bh = 0; bh < BH; bh++)
            memcpy(hs + (bh * S + t) * DV, g + bh * DV, sizeof(double) * (size_t)DV);
        free(g);
        cur = nxt;
        alloy_array_free(q), alloy_array_free(k), alloy_array_free(v), alloy_array_free(i);
        alloy_array_free(f), alloy_array_free(h);
    }
    const double tol = tolerance(p->dt);
    double e = h_err(label, hs, href, mag, BH * S * DV);
    CHECK_MSG(e <= tol, "%s steps%s (%lld,%lld,%lld,%lld,%lld) %s: h error %.3g of max(max|h|, its error magnitude)", label,
              in_place ? " in place" : "", (long long)B, (long long)NH, (long long)S, (long long)DK, (long long)DV,
              alloy_dtype_name(p->dt), e);
    double *gc = host_of(st[cur][0]), *gn = host_of(st[cur][1]), *gm = host_of(st[cur][2]);
    e = rel_err(label, gc, cref, BH * DK * DV);
    CHECK_MSG(e <= tol, "%s: final C error %.3g of max|C|", label, e);
    e = rel_err(label, gn, nref, BH * DK);
    CHECK_MSG(e <= tol, "%s: final n error %.3g of max|n|", label, e);
    for (int64_t bh = 0; bh < BH; bh++)
        CHECK_MSG(fabs(gm[bh] - mref[bh]) <= 1e-5 * (1 + fabs(mref[bh])), "%s: m[%lld] = %.9g, want %.9g", label,
                  (long long)bh, gm[bh], mref[bh]);
    free(gc), free(gn), free(gm);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++) alloy_array_free(st[a][b]);
    free(hs), free(xq), free(xk), free(xv), free(xi), free(xf), free(c0), free(n0), free(m0);
}

/* Runs both forms (steps twice: in place and ping-pong) against the reference. */
static void both(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, alloy_dtype dt, int gates, int initial,
                 int steps, const char *label) {
    problem p;
    make(&p, B, NH, S, DK, DV, dt, gates, initial);
    const int64_t BH = B * NH;
    double *h = malloc(sizeof(double) * (size_t)(BH * S * DV + 1)), *c = malloc(sizeof(double) * (size_t)(BH * DK * DV));
    double *n = malloc(sizeof(double) * (size_t)(BH * DK)), *m = malloc(sizeof(double) * (size_t)BH);
    double *ms = malloc(sizeof(double) * (size_t)(BH * S + 1)), *dens = malloc(sizeof(double) * (size_t)(BH * S + 1));
    double *mag = malloc(sizeof(double) * (size_t)(BH * S * DV + 1));
    reference(&p, h, c, n, m, ms, dens);
    magnitudes(&p, h, ms, dens, mag, NULL);
    if (!initial) check_parallel(&p, h, mag, label);
    if (steps) {
        check_steps(&p, h, mag, c, n, m, 1, label);
        if (steps > 1) check_steps(&p, h, mag, c, n, m, 0, label);
    }
    free(h), free(c), free(n), free(m), free(ms), free(dens), free(mag);
    drop(&p);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_mlstm_shapes(void) {
    /* S = 1; odd S over two query tiles; several key and column tiles; D = 1, 7, 40, 64, 128 */
    both(1, 1, 1, 1, 1, ALLOY_FLOAT32, GATES_PLAIN, 0, 2, "S=1 D=1");
    both(2, 3, 1, 7, 5, ALLOY_FLOAT32, GATES_PLAIN, 0, 2, "S=1 D=7");
    both(2, 3, 37, 7, 7, ALLOY_FLOAT32, GATES_PLAIN, 0, 2, "S=37 D=7");
    both(1, 2, 70, 40, 72, ALLOY_FLOAT32, GATES_PLAIN, 0, 1, "S=70 D=40/72");
    both(1, 2, 37, 64, 64, ALLOY_FLOAT32, GATES_PLAIN, 0, 1, "S=37 D=64");
    both(1, 1, 33, 128, 128, ALLOY_FLOAT32, GATES_PLAIN, 0, 1, "S=33 D=128");
    both(1, 1, 1, 1, 1, ALLOY_FLOAT32, GATES_PLAIN, 0, 1, "S=1 D=1 f32");
}

/* A grid of head sizes past the shapes above (DHQK and DHHV from 1 to 520, partial tiles), the
 * parallel form and the step in turn, with the dtypes, gates and initial states. */
static void test_mlstm_grid(void) {
    static const int64_t DKs[] = {2, 17, 65, 136, 256}, DVs[] = {3, 40, 129, 520};
    static const alloy_dtype dts[] = {ALLOY_FLOAT32, ALLOY_BFLOAT16, ALLOY_FLOAT16};
    int x = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 4; b++, x++) {
            if (harness_leave_out((a + b) % 2)) continue; /* half the grid, every DK and DV */
            char label[48];
            snprintf(label, sizeof label, "grid %lld/%lld", (long long)DKs[a], (long long)DVs[b]);
            both(1 + x % 2, 1 + x % 3, 1 + (a * 23 + b * 7) % 45, DKs[a], DVs[b], dts[x % 3],
                 x % 4 == 1 ? GATES_HOSTILE_MIX : GATES_PLAIN, x % 2, 1 + x % 2, label);
        }
}

static void test_mlstm_wide_batches(void) {
    /* batches of 512+ heads: the step's 16-byte columns (DHHV % 4 == 0: a
     * whole tile, a tail tile of 4 columns), and DHHV % 4 != 0 beside them */
    both(64, 8, 3, 5, 12, ALLOY_FLOAT32, GATES_PLAIN, 1, 2, "wide D=5/12");
    both(40, 13, 2, 9, 132, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 0, 2, "wide D=9/132");
    both(40, 13, 2, 3, 130, ALLOY_FLOAT32, GATES_PLAIN, 0, 2, "wide D=3/130");
    /* 1024+ heads over three 16-byte column tiles (the last partial), DHQK 33: two batches of rows, the
     * second partial */
    both(80, 13, 2, 33, 260, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, 2, "wide D=33/260");
    /* 4096 threadgroups of 16-byte columns (16 rows of threads, batches of 8 rows; the last tile partial) */
    both(256, 8, 2, 5, 132, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, 2, "wide 4096 D=5/132");
}

/* Steps on a stream of their own (queued after the default stream's uploads, read after it): 16-byte
 * columns over three tiles (the last partial) with DHQK 33, one column per lane with hostile gates — in place
 * and into other arrays, as every case here. */
static void test_mlstm_step_own_stream(void) {
    CHECK_OK(alloy_stream_new(ku_device(), &step_stream));
    if (step_stream) {
        both(80, 13, 3, 33, 260, ALLOY_FLOAT32, GATES_PLAIN, 1, 1, "stream wide D=33/260");
        both(2, 3, 5, 17, 72, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 0, 1, "stream D=17/72");
        alloy_stream_free(step_stream);
        step_stream = NULL;
    }
}

/* ALLOY_OPS_OVERLAP=0: ordinary launches (by default, in place, the second launch (n' and m') overlaps the
 * first and writes only after it has ended — every other step test): one column per lane over three tiles,
 * 16-byte columns over three tiles with DHQK 300. */
static void test_mlstm_step_ordinary_launches(void) {
    setenv("ALLOY_OPS_OVERLAP", "0", 1);
    both(2, 3, 5, 17, 72, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 1, 1, "ordinary D=17/72");
    both(64, 8, 2, 300, 132, ALLOY_BFLOAT16, GATES_PLAIN, 1, 1, "ordinary wide D=300/132");
    unsetenv("ALLOY_OPS_OVERLAP");
}

/* ALLOY_MLSTM_STEP_PIPE=1 (the default with 16-byte columns, forced here on one-column lanes too): each
 * batch's rows in two halves, the next batch's half loaded right after this batch's half: one batch that is the
 * last (DHQK 17), several with a partial last one (DHQK 300: halves of 8, then with batches of 12 halves of 6,
 * then of 4 halves of 2), 16-byte columns over three tiles, and with 16 rows of threads and batches of 8
 * rows (the default from 4096 threadgroups: test_mlstm_wide_batches) over one batch and three — in place and
 * into other arrays, as every case here; and PIPE=0 on 16-byte columns (the form the default was). */
static void test_mlstm_step_pipe(void) {
    setenv("ALLOY_MLSTM_STEP_PIPE", "0", 1);
    both(80, 13, 2, 33, 260, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, 2, "no PIPE wide D=33/260");
    both(64, 8, 2, 300, 132, ALLOY_FLOAT32, GATES_PLAIN, 0, 2, "no PIPE wide D=300/132");
    setenv("ALLOY_MLSTM_STEP_PIPE", "1", 1);
    both(2, 3, 5, 17, 72, ALLOY_FLOAT32, GATES_PLAIN, 1, 2, "PIPE D=17/72");
    both(3, 2, 2, 300, 40, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 0, 2, "PIPE D=300/40");
    both(80, 13, 2, 33, 260, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, 2, "PIPE wide D=33/260");
    setenv("ALLOY_MLSTM_STEP_RB", "12", 1);
    both(64, 8, 2, 300, 132, ALLOY_FLOAT32, GATES_PLAIN, 0, 2, "PIPE RB=12 wide D=300/132");
    setenv("ALLOY_MLSTM_STEP_RB", "4", 1);
    both(3, 2, 2, 300, 40, ALLOY_FLOAT16, GATES_PLAIN, 1, 2, "PIPE RB=4 D=300/40");
    setenv("ALLOY_MLSTM_STEP_RB", "8", 1);
    setenv("ALLOY_MLSTM_STEP_RY", "16", 1);
    both(80, 13, 2, 33, 260, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, 2, "PIPE RY=16 RB=8 wide D=33/260");
    both(64, 8, 2, 300, 132, ALLOY_FLOAT32, GATES_PLAIN, 1, 2, "PIPE RY=16 RB=8 wide D=300/132");
    unsetenv("ALLOY_MLSTM_STEP_RY");
    unsetenv("ALLOY_MLSTM_STEP_RB");
    unsetenv("ALLOY_MLSTM_STEP_PIPE");
}

/* ALLOY_MLSTM_STEP_KT=1: the rows' k and q^ from threadgroup memory, written there by the gates' loads: one
 * column a lane (one batch, DHQK 17; several, DHQK 300, with halves), 16-byte columns over three tiles (the
 * last partial) with DHQK 33, and DHQK 300 past the 256 threads (the gates' second pass writes them) with 8 and
 * 16 rows of threads; DHQK 520 (over 512: the threads' own loads) — in place and into other arrays. */
static void test_mlstm_step_rows_from_threadgroup(void) {
    setenv("ALLOY_MLSTM_STEP_KT", "1", 1);
    both(2, 3, 5, 17, 72, ALLOY_FLOAT32, GATES_PLAIN, 1, 2, "KT D=17/72");
    setenv("ALLOY_MLSTM_STEP_PIPE", "1", 1);
    both(3, 2, 2, 300, 40, ALLOY_FLOAT16, GATES_HOSTILE_MIX, 0, 2, "KT PIPE D=300/40");
    unsetenv("ALLOY_MLSTM_STEP_PIPE");
    both(80, 13, 2, 33, 260, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, 2, "KT wide D=33/260");
    both(64, 8, 2, 300, 132, ALLOY_FLOAT32, GATES_PLAIN, 0, 2, "KT wide D=300/132");
    setenv("ALLOY_MLSTM_STEP_RB", "8", 1);
    setenv("ALLOY_MLSTM_STEP_RY", "16", 1);
    both(64, 8, 2, 300, 132, ALLOY_BFLOAT16, GATES_PLAIN, 1, 2, "KT RY=16 RB=8 wide D=300/132");
    unsetenv("ALLOY_MLSTM_STEP_RY");
    unsetenv("ALLOY_MLSTM_STEP_RB");
    both(1, 2, 2, 520, 24, ALLOY_FLOAT32, GATES_PLAIN, 1, 2, "KT D=520/24");
    unsetenv("ALLOY_MLSTM_STEP_KT");
}

static void test_mlstm_long_parallel(void) {
    /* many key tiles behind the diagonal (the backward log-forget sums) */
    both(1, 1, 300, 16, 8, ALLOY_FLOAT32, GATES_PLAIN, 0, 0, "S=300");
}

static void test_mlstm_initial_states(void) {
    both(2, 2, 9, 7, 33, ALLOY_FLOAT32, GATES_PLAIN, 1, 2, "initial D=7/33");
    both(1, 1, 5, 64, 64, ALLOY_FLOAT32, GATES_PLAIN, 1, 1, "initial D=64");
}

static void test_mlstm_hostile_gates(void) {
    both(1, 2, 37, 16, 24, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 0, 2, "hostile mix");
    both(1, 1, 40, 8, 8, ALLOY_FLOAT32, GATES_ALL_INPUT_60, 0, 1, "input 60");
    both(1, 1, 40, 8, 8, ALLOY_FLOAT32, GATES_ALL_FORGET_M40, 0, 1, "forget -40");
    both(1, 1, 6, 8, 8, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 1, 1, "hostile initial");
}

static void test_mlstm_half_inputs(void) {
    both(1, 2, 37, 64, 64, ALLOY_BFLOAT16, GATES_PLAIN, 0, 1, "bf16");
    both(1, 1, 20, 7, 9, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, 1, "bf16 hostile initial");
    both(1, 2, 37, 16, 40, ALLOY_FLOAT16, GATES_PLAIN, 0, 1, "f16");
}

/* Gates that are not finite, in the parallel form (its log-forget sums once
 * took differences inside the diagonal key tile with terms past the query):
 * a forget pre-activation of -inf (forget everything) at token 40 of 70, with
 * input pre-activations of -inf (ignore the token) at token 10 and at token
 * 50 of the other head, matches the reference everywhere (the steps too); a
 * NaN forget or input gate at token 40 makes every column of h NaN from
 * there on in its head, while the rows before it (32..39 share its query
 * tile) and the other head keep the clean reference's values. */
static void test_mlstm_nonfinite_gates(void) {
    const int64_t S = 70, DV = 40, at = 40;
    for (int x = 0; x < 3; x++) {
        problem p;
        make(&p, 1, 2, S, 16, DV, ALLOY_FLOAT32, GATES_PLAIN, 0);
        if (x == 0) p.f[at] = -INFINITY, p.i[10] = -INFINITY, p.i[S + 50] = -INFINITY;   /* and inputs of -inf */
        const int64_t n = 2 * S * DV;
        double *h = malloc(sizeof(double) * (size_t)(n + 1)), *c = malloc(sizeof(double) * 16 * (size_t)DV * 2);
        double *nn = malloc(sizeof(double) * 32), *m = malloc(sizeof(double) * 2);
        double *ms = malloc(sizeof(double) * (size_t)(2 * S)), *dens = malloc(sizeof(double) * (size_t)(2 * S));
        double *mag = malloc(sizeof(double) * (size_t)(n + 1));
        reference(&p, h, c, nn, m, ms, dens);
        magnitudes(&p, h, ms, dens, mag, NULL);
        if (x == 0) {
            check_parallel(&p, h, mag, "forget -inf");
            check_steps(&p, h, mag, c, nn, m, 1, "forget -inf");
        } else {
            (x == 1 ? p.f : p.i)[at] = NAN;
            const int64_t s_qk[4] = {1, 2, S, 16}, s_v[4] = {1, 2, S, DV}, s_g[3] = {1, 2, S};
            alloy_array *q = dev_array(p.dt, 4, s_qk, p.q), *k = dev_array(p.dt, 4, s_qk, p.k);
            alloy_array *v = dev_array(p.dt, 4, s_v, p.v), *i = dev_array(p.dt, 3, s_g, p.i);
            alloy_array *f = dev_array(p.dt, 3, s_g, p.f), *out = nan_array(p.dt, 4, s_v);
            CHECK_OK(alloy_mlstm_parallel(q, k, v, i, f, EPS, NULL, &out));
            double *got = host_of(out), hmax = 0;
            for (int64_t e = 0; e < n; e++) hmax = fmax(hmax, fabs(h[e]));
            for (int64_t e = 0; e < n; e++) {
                const int64_t hd = e / (S * DV), t = (e / DV) % S;
                if (hd == 0 && t >= at) {
                    CHECK_MSG(isnan(got[e]), "NaN %s gate: h[0][%lld][%lld] = %g, want NaN", x == 1 ? "forget" : "input",
                              (long long)t, (long long)(e % DV), got[e]);
                } else {
                    CHECK_MSG(fabs(got[e] - h[e]) <= tolerance(p.dt) * fmax(hmax, mag[e]),
                              "NaN %s gate: h[%lld][%lld][%lld] = %.9g, want %.9g", x == 1 ? "forget" : "input",
                              (long long)hd, (long long)t, (long long)(e % DV), got[e], h[e]);
                }
            }
            free(got);
            alloy_array_free(q), alloy_array_free(k), alloy_array_free(v), alloy_array_free(i), alloy_array_free(f);
            alloy_array_free(out);
        }
        free(h), free(c), free(nn), free(m), free(ms), free(dens), free(mag);
        drop(&p);
    }
}

static void test_mlstm_empty(void) {
    const int64_t s4[4] = {0, 2, 5, 4}, sg[3] = {0, 2, 5};
    alloy_array *q = NULL, *i = NULL, *h = NULL;
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 4, s4, &q));
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 3, sg, &i));
    CHECK_OK(alloy_mlstm_parallel(q, q, q, i, i, EPS, NULL, &h));
    CHECK(h && alloy_array_size(h) == 0);
    alloy_array_free(h), alloy_array_free(q), alloy_array_free(i);
    const int64_t z4[4] = {1, 1, 0, 4}, zg[3] = {1, 1, 0};
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 4, z4, &q));
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 3, zg, &i));
    h = NULL;
    CHECK_OK(alloy_mlstm_parallel(q, q, q, i, i, EPS, NULL, &h));
    CHECK(h && alloy_array_size(h) == 0);
    alloy_array_free(h), alloy_array_free(q), alloy_array_free(i);
}

static void test_mlstm_errors(void) {
    const alloy_dtype F = ALLOY_FLOAT32;
    const alloy_status INV = ALLOY_ERROR_INVALID_ARGUMENT;
    /* step: B=2, NH=3, DHQK=4, DHHV=5 */
    const int64_t sq[3] = {2, 3, 4}, sv[3] = {2, 3, 5}, sg[3] = {2, 3, 1}, sc[4] = {2, 3, 4, 5};
    const int64_t bad3[3] = {2, 3, 6}, bad4[4] = {2, 3, 5, 4};
    alloy_array *q = ku_zeros(F, 3, sq), *k = ku_zeros(F, 3, sq), *v = ku_zeros(F, 3, sv), *i = ku_zeros(F, 3, sg);
    alloy_array *f = ku_zeros(F, 3, sg), *c = ku_zeros(F, 4, sc), *n = ku_zeros(F, 3, sq), *m = ku_zeros(F, 3, sg);
    alloy_array *kbad = ku_zeros(F, 3, bad3), *k16 = ku_zeros(ALLOY_BFLOAT16, 3, sq), *cbad = ku_zeros(F, 4, bad4);
    alloy_array *c16 = ku_zeros(ALLOY_FLOAT16, 4, sc), *qi = ku_zeros(ALLOY_INT32, 3, sq), *ibad = ku_zeros(F, 3, sq);
    alloy_array *hbad = ku_zeros(F, 3, sq), *h = NULL, *co = NULL, *no = NULL, *mo = NULL;
    CHECK_FAILS(alloy_mlstm_step(NULL, k, v, i, f, c, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "q is NULL");
    CHECK_FAILS(alloy_mlstm_step(q, kbad, v, i, f, c, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "k has shape (2, 3, 6)");
    CHECK_FAILS(alloy_mlstm_step(q, k16, v, i, f, c, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "k is bfloat16");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, ibad, f, c, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "i has shape");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, ibad, c, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "f has shape");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, cbad, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "c has shape");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c16, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "c is float16");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c, kbad, m, EPS, NULL, &h, &co, &no, &mo), INV, "n has shape");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c, n, NULL, EPS, NULL, &h, &co, &no, &mo), INV, "m is NULL");
    CHECK_FAILS(alloy_mlstm_step(qi, k, v, i, f, c, n, m, EPS, NULL, &h, &co, &no, &mo), INV, "q is int32");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c, n, m, -1.0, NULL, &h, &co, &no, &mo), INV, "eps");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c, n, m, EPS, NULL, &hbad, &co, &no, &mo), INV, "h has shape");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c, n, m, EPS, NULL, &h, &c16, &no, &mo), INV, "c_out is float16");
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c, n, m, EPS, NULL, &h, &co, NULL, &mo), INV, "n_out is NULL");
    CHECK(h == NULL && co == NULL && no == NULL && mo == NULL); /* nothing returned on failure */
    /* a non-contiguous given output */
    alloy_array *big = ku_zeros(F, 3, bad3), *view = NULL;
    const int64_t strides[3] = {18, 6, 1};
    CHECK_OK(alloy_array_wrap(ku_device(), alloy_array_data(big), F, 3, sq, strides, 0, NULL, NULL, &view));
    CHECK_FAILS(alloy_mlstm_step(q, k, v, i, f, c, n, m, EPS, NULL, &h, &co, &view, &mo), INV,
                "n_out must be row-contiguous");
    /* parallel: B=1, NH=2, S=3, DHQK=4, DHHV=5 */
    const int64_t pq[4] = {1, 2, 3, 4}, pv[4] = {1, 2, 3, 5}, pg[3] = {1, 2, 3}, pgb[3] = {1, 2, 4};
    alloy_array *Q = ku_zeros(F, 4, pq), *V = ku_zeros(F, 4, pv), *G = ku_zeros(F, 3, pg), *Gb = ku_zeros(F, 3, pgb);
    alloy_array *Q16 = ku_zeros(ALLOY_FLOAT16, 4, pq), *H = NULL;
    CHECK_FAILS(alloy_mlstm_parallel(q, q, v, i, f, EPS, NULL, &H), INV, "q has shape (2, 3, 4) but must be 4-D");
    CHECK_FAILS(alloy_mlstm_parallel(Q, V, V, G, G, EPS, NULL, &H), INV, "k has shape (1, 2, 3, 5)");
    CHECK_FAILS(alloy_mlstm_parallel(Q, Q, Q16, G, G, EPS, NULL, &H), INV, "v is float16 but must be float32");
    CHECK_FAILS(alloy_mlstm_parallel(Q, Q, G, G, G, EPS, NULL, &H), INV, "v must be (B, NH, S, DHHV)");
    CHECK_FAILS(alloy_mlstm_parallel(Q, Q, V, Gb, G, EPS, NULL, &H), INV, "i has shape (1, 2, 4)");
    CHECK_FAILS(alloy_mlstm_parallel(Q16, Q, V, G, G, EPS, NULL, &H), INV, "k is float32 but must be float16");
    CHECK_FAILS(alloy_mlstm_parallel(Q, Q, V, G, G, NAN, NULL, &H), INV, "eps");
    CHECK_FAILS(alloy_mlstm_parallel(Q, Q, V, G, G, EPS, NULL, NULL), INV, "h is NULL");
    H = Q;
    CHECK_FAILS(alloy_mlstm_parallel(Q, Q, V, G, G, EPS, NULL, &H), INV, "h has shape (1, 2, 3, 4)");
    alloy_array *all[] = {q, k, v, i, f, c, n, m, kbad, k16, cbad, c16, qi, ibad, hbad, big, view, Q, V, G, Gb, Q16};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
}

int main(void) {
    harness_seed();
    RUN(test_mlstm_errors);
    RUN(test_mlstm_empty);
    RUN(test_mlstm_shapes);
    RUN(test_mlstm_grid);
    RUN(test_mlstm_wide_batches);
    RUN(test_mlstm_step_own_stream);
    RUN_VARIANT(test_mlstm_step_ordinary_launches);
    RUN_VARIANT(test_mlstm_step_pipe);
    RUN_VARIANT(test_mlstm_step_rows_from_threadgroup);
    RUN(test_mlstm_long_parallel);
    RUN(test_mlstm_initial_states);
    RUN(test_mlstm_hostile_gates);
    RUN(test_mlstm_half_inputs);
    RUN(test_mlstm_nonfinite_gates);
    return harness_finish();
}
