/* test_mlstm_chunkwise.c — alloy_mlstm_chunkwise (alloy/mlstm.h) against the
 * float64 recurrent reference of mlstm_problem.h and against chains of
 * alloy_mlstm_step: h and the final states for every chunk size from 16 to
 * 1024, S = 1, odd S, S not a multiple of the chunk, several query blocks per
 * chunk, head sizes 1 to 512 (one to eight slices of DHQK, several column
 * tiles), given initial states, hostile gates (input pre-activations 60,
 * forget pre-activations -40), float32 inputs within 2e-4 of max|h| (of the
 * element's error magnitude where the normaliser cancels, as in test_mlstm.c),
 * float16 inputs within 4e-3 and bfloat16 within 2e-2; packed variable-length batches
 * (cu_seqlens, with empty sequences) equal to each sequence run alone; every
 * output element written (given outputs are pre-filled with NaN); errors
 * naming the argument; a NaN in v or in a gate going on into h (and nowhere
 * else), gates of -inf;
 * ALLOY_PRECISION_DEFAULT (float16 tiles with
 * power-of-two exponents per row) within 1e-2, and within 1e-2 of each row's
 * scale for tokens scaled from 2^-20 to 2^20.
 * On the device the tests run on (ALLOY_DEVICE, default
 * cpu). */
#include "mlstm_problem.h"

/* The results of one chunkwise call, on the host. */
typedef struct result {
    double *h, *c, *n, *m;
} result;

static void result_free(result *r) { free(r->h), free(r->c), free(r->n), free(r->m); }

/* Runs alloy_mlstm_chunkwise_with_precision on p (dense): h into a given
 * NaN-filled array, the final states into new arrays. */
static result run_chunkwise_at(const problem *p, int chunk, alloy_precision precision) {
    const int64_t s_qk[4] = {p->B, p->NH, p->S, p->DK}, s_v[4] = {p->B, p->NH, p->S, p->DV};
    const int64_t s_g[3] = {p->B, p->NH, p->S}, s_c[4] = {p->B, p->NH, p->DK, p->DV};
    const int64_t s_n[3] = {p->B, p->NH, p->DK}, s_m[3] = {p->B, p->NH, 1};
    alloy_array *q = dev_array(p->dt, 4, s_qk, p->q), *k = dev_array(p->dt, 4, s_qk, p->k);
    alloy_array *v = dev_array(p->dt, 4, s_v, p->v), *i = dev_array(p->dt, 3, s_g, p->i);
    alloy_array *f = dev_array(p->dt, 3, s_g, p->f);
    alloy_array *c0 = NULL, *n0 = NULL, *m0 = NULL;
    if (p->c0) {
        c0 = dev_array(ALLOY_FLOAT32, 4, s_c, p->c0);
        n0 = dev_array(ALLOY_FLOAT32, 3, s_n, p->n0);
        m0 = dev_array(ALLOY_FLOAT32, 3, s_m, p->m0);
    }
    alloy_array *h = nan_array(p->dt, 4, s_v), *given = h, *c = NULL, *n = NULL, *m = NULL;
    CHECK_OK(alloy_mlstm_chunkwise_with_precision(q, k, v, i, f, c0, n0, m0, NULL, chunk, EPS, precision, NULL, &h, &c,
                                                  &n, &m));
    CHECK(h == given);
    result r = {host_of(h), host_of(c), host_of(n), host_of(m)};
    alloy_array *all[] = {q, k, v, i, f, c0, n0, m0, h, c, n, m};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    return r;
}

/* alloy_mlstm_chunkwise itself is ALLOY_PRECISION_HIGH */
static result run_chunkwise(const problem *p, int chunk) { return run_chunkwise_at(p, chunk, ALLOY_PRECISION_HIGH); }

/* float32 at precision DEFAULT runs on the float16 tiles on a GPU; on the CPU
 * only with ALLOY_MLSTM_PATH=scaled, which these tests set where the
 * environment names no path (the _fused twin keeps its fused kernel). */
static int scaled_on(void) {
    if (getenv("ALLOY_MLSTM_PATH")) return 0;
    setenv("ALLOY_MLSTM_PATH", "scaled", 1);
    return 1;
}
static void scaled_off(int set) {
    if (set) unsetenv("ALLOY_MLSTM_PATH");
}

/* The float64 reference of p with each element's error magnitude and each row's normaliser condition. */
typedef struct expected {
    double *h, *c, *n, *m, *mag, *cond;
} expected;

static expected expect(const problem *p) {
    const int64_t BH = p->B * p->NH, S = p->S, DK = p->DK, DV = p->DV;
    expected x;
    x.h = malloc(sizeof(double) * (size_t)(BH * S * DV + 1));
    x.c = malloc(sizeof(double) * (size_t)(BH * DK * DV + 1));
    x.n = malloc(sizeof(double) * (size_t)(BH * DK + 1));
    x.m = malloc(sizeof(double) * (size_t)(BH + 1));
    x.mag = malloc(sizeof(double) * (size_t)(BH * S * DV + 1));
    x.cond = malloc(sizeof(double) * (size_t)(BH * S + 1));
    double *ms = malloc(sizeof(double) * (size_t)(BH * S + 1)), *dens = malloc(sizeof(double) * (size_t)(BH * S + 1));
    reference(p, x.h, x.c, x.n, x.m, ms, dens);
    magnitudes(p, x.h, ms, dens, x.mag, x.cond);
    free(ms), free(dens);
    return x;
}

static void expected_free(expected *x) {
    free(x->h), free(x->c), free(x->n), free(x->m), free(x->mag), free(x->cond);
}

/* got against the reference: h, C, n within the dtype's tolerance, m within
 * float32 rounding. */
static void compare(const problem *p, const expected *x, const result *r, const char *label, int chunk) {
    const int64_t BH = p->B * p->NH;
    const double tol = tolerance(p->dt);
    double e = h_err(label, r->h, x->h, x->mag, BH * p->S * p->DV);
    CHECK_MSG(e <= tol, "%s chunk %d (%lld,%lld,%lld,%lld,%lld) %s: h error %.3g of max(max|h|, its error magnitude)",
              label, chunk, (long long)p->B, (long long)p->NH, (long long)p->S, (long long)p->DK, (long long)p->DV,
              alloy_dtype_name(p->dt), e);
    e = rel_err(label, r->c, x->c, BH * p->DK * p->DV);
    CHECK_MSG(e <= tol, "%s chunk %d: final C error %.3g of max|C|", label, chunk, e);
    e = rel_err(label, r->n, x->n, BH * p->DK);
    CHECK_MSG(e <= tol, "%s chunk %d: final n error %.3g of max|n|", label, chunk, e);
    for (int64_t bh = 0; bh < BH; bh++)
        CHECK_MSG(fabs(r->m[bh] - x->m[bh]) <= 1e-5 * (1 + fabs(x->m[bh])), "%s chunk %d: m[%lld] = %.9g, want %.9g",
                  label, chunk, (long long)bh, r->m[bh], x->m[bh]);
}

/* One problem against the reference at each of the chunk sizes (0-terminated). */
static void check(int64_t B, int64_t NH, int64_t S, int64_t DK, int64_t DV, alloy_dtype dt, int gates, int initial,
                  const int *chunks, const char *label) {
    problem p;
    make(&p, B, NH, S, DK, DV, dt, gates, initial);
    expected x = expect(&p);
    for (const int *c = chunks; *c; c++) {
        result r = run_chunkwise(&p, *c);
        compare(&p, &x, &r, label, *c);
        result_free(&r);
    }
    expected_free(&x);
    drop(&p);
}

static const int CHUNK_DEFAULT[] = {64, 0};
static const int CHUNK_SMALL[] = {16, 32, 64, 0};

/* ---- tests ------------------------------------------------------------------- */

static void test_chunkwise_chunk_sizes(void) {
    /* every chunk size: S = 1, S below one chunk, S a multiple, several chunks with a tail */
    static const int all[] = {16, 32, 64, 128, 256, 512, 1024, 0};
    check(1, 1, 1, 8, 8, ALLOY_FLOAT32, GATES_PLAIN, 0, all, "S=1");
    check(1, 2, 37, 16, 16, ALLOY_FLOAT32, GATES_PLAIN, 1, all, "S=37");
    check(1, 1, 64, 16, 8, ALLOY_FLOAT32, GATES_PLAIN, 0, all, "S=64");
    check(2, 1, 333, 16, 24, ALLOY_FLOAT32, GATES_PLAIN, 1, all, "S=333");
    check(1, 1, 1100, 8, 8, ALLOY_FLOAT32, GATES_PLAIN, 0, all, "S=1100");
}

static void test_chunkwise_head_sizes(void) {
    check(1, 1, 5, 1, 1, ALLOY_FLOAT32, GATES_PLAIN, 0, CHUNK_SMALL, "D=1");
    check(2, 3, 19, 7, 5, ALLOY_FLOAT32, GATES_PLAIN, 1, CHUNK_SMALL, "D=7/5");
    check(1, 2, 70, 40, 72, ALLOY_FLOAT32, GATES_PLAIN, 0, CHUNK_SMALL, "D=40/72");
    check(1, 1, 77, 128, 136, ALLOY_FLOAT32, GATES_PLAIN, 1, CHUNK_DEFAULT, "D=128/136");
    check(1, 1, 40, 300, 40, ALLOY_FLOAT32, GATES_PLAIN, 1, CHUNK_DEFAULT, "D=300/40");
    check(1, 1, 20, 512, 33, ALLOY_FLOAT32, GATES_PLAIN, 1, CHUNK_DEFAULT, "D=512/33");
}

static void test_chunkwise_hostile_gates(void) {
    static const int chunks[] = {16, 64, 128, 0};
    check(1, 2, 150, 16, 24, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 0, chunks, "hostile mix");
    check(1, 2, 150, 16, 24, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 1, chunks, "hostile mix initial");
    check(1, 1, 90, 8, 8, ALLOY_FLOAT32, GATES_ALL_INPUT_60, 1, chunks, "input 60");
    check(1, 1, 90, 8, 8, ALLOY_FLOAT32, GATES_ALL_FORGET_M40, 1, chunks, "forget -40");
}

static void test_chunkwise_half_inputs(void) {
    check(1, 2, 100, 64, 64, ALLOY_BFLOAT16, GATES_PLAIN, 1, CHUNK_SMALL, "bf16");
    check(1, 1, 70, 24, 40, ALLOY_BFLOAT16, GATES_HOSTILE_MIX, 1, CHUNK_DEFAULT, "bf16 hostile");
    check(1, 2, 100, 32, 48, ALLOY_FLOAT16, GATES_PLAIN, 1, CHUNK_SMALL, "f16");
    check(1, 1, 50, 256, 64, ALLOY_BFLOAT16, GATES_PLAIN, 1, CHUNK_DEFAULT, "bf16 D=256");
    /* rows that are not whole 16-byte pieces (no cp.async, element stores), partial tiles */
    check(1, 2, 45, 12, 20, ALLOY_BFLOAT16, GATES_PLAIN, 1, CHUNK_SMALL, "bf16 D=12/20");
    check(1, 1, 33, 40, 13, ALLOY_FLOAT16, GATES_PLAIN, 0, CHUNK_DEFAULT, "f16 D=40/13");
    check(1, 1, 66, 72, 200, ALLOY_BFLOAT16, GATES_PLAIN, 1, CHUNK_DEFAULT, "bf16 D=72/200");
    /* the largest head: q and k resident in phase 2 take 133 KB of threadgroup memory */
    check(1, 1, 20, 512, 40, ALLOY_BFLOAT16, GATES_PLAIN, 1, CHUNK_DEFAULT, "bf16 D=512/40");
    check(1, 1, 20, 512, 40, ALLOY_FLOAT16, GATES_HOSTILE_MIX, 1, CHUNK_DEFAULT, "f16 D=512/40");
    /* one DHQK slice (DHQK <= 64) and three or more column tiles of h: phase 2's v buffers (its copies
     * two stages ahead once went over the tile being multiplied: h errors of 0.3-0.6); v rows past the
     * float16 pre-pass's 512 elements held in registers */
    check(1, 1, 20, 64, 512, ALLOY_FLOAT32, GATES_PLAIN, 1, CHUNK_DEFAULT, "f32 D=64/512");
    check(1, 1, 20, 16, 600, ALLOY_BFLOAT16, GATES_PLAIN, 1, CHUNK_DEFAULT, "bf16 D=16/600");
    check(1, 1, 20, 16, 600, ALLOY_FLOAT16, GATES_PLAIN, 1, CHUNK_DEFAULT, "f16 D=16/600");
}

/* A grid of head sizes (one to five DHQK slices, one to nine column tiles, partial tiles everywhere)
 * with the dtypes, chunk sizes, gates and initial states in turn: the combinations no other test
 * picks (one DHQK slice with three or more column tiles once went wrong). */
static void test_chunkwise_shapes(void) {
    static const int64_t DKs[] = {1, 17, 64, 65, 136, 300}, DVs[] = {7, 65, 200, 520};
    static const alloy_dtype dts[] = {ALLOY_FLOAT32, ALLOY_BFLOAT16, ALLOY_FLOAT16};
    static const int chunks[3][2] = {{16, 0}, {64, 0}, {128, 0}};
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 4; b++) {
            const int x = a * 4 + b;
            if (harness_leave_out((a + b) % 2)) continue; /* half the grid, every DK and DV */
            char label[64];
            snprintf(label, sizeof label, "shape %lld/%lld", (long long)DKs[a], (long long)DVs[b]);
            check(1, 1 + x % 2, 1 + (a * 37 + b * 11) % 140, DKs[a], DVs[b], dts[x % 3],
                  x % 4 == 0 ? GATES_HOSTILE_MIX : GATES_PLAIN, x % 2, chunks[(a + b) % 3], label);
        }
}

/* float16 inputs whose chunk states pass float16's range: k and v up to 300,
 * forget gates near 1, so a state (the sum of k v over the tokens it
 * remembers) passes 65 504 within a few tokens though h, a weighted mean of
 * v, stays under 300 (the kernels once rounded those states to float16: h
 * was inf). */
static void test_chunkwise_half_range(void) {
    problem p;
    make(&p, 1, 2, 200, 32, 40, ALLOY_FLOAT16, GATES_PLAIN, 0);
    for (int64_t e = 0; e < p.B * p.NH * p.S * p.DK; e++) {
        p.q[e] = round_to(p.dt, p.q[e] + 2.0); /* q, k, v >= 0: h a weighted mean of v, no cancelling normaliser */
        p.k[e] = round_to(p.dt, 75.0 * (p.k[e] + 2.0));
    }
    for (int64_t e = 0; e < p.B * p.NH * p.S * p.DV; e++) p.v[e] = round_to(p.dt, 75.0 * (p.v[e] + 2.0));
    for (int64_t e = 0; e < p.B * p.NH * p.S; e++) p.f[e] = round_to(p.dt, 8.0 + p.f[e] / 3.0);
    expected x = expect(&p);
    for (const int *c = CHUNK_SMALL; *c; c++) {
        result r = run_chunkwise(&p, *c);
        compare(&p, &x, &r, "f16 range", *c);
        result_free(&r);
    }
    expected_free(&x);
    drop(&p);
}

/* chunkwise against alloy_mlstm_step applied S times in place: the two
 * forms of the library agree (h and the final states). */
static void test_chunkwise_equals_steps(void) {
    const int64_t B = 2, NH = 2, S = 45, DK = 24, DV = 20, BH = B * NH;
    problem p;
    make(&p, B, NH, S, DK, DV, ALLOY_FLOAT32, GATES_PLAIN, 1);
    result r = run_chunkwise(&p, 16);
    const int64_t s_qk[3] = {B, NH, DK}, s_v[3] = {B, NH, DV}, s_g[3] = {B, NH, 1}, s_c[4] = {B, NH, DK, DV};
    alloy_array *c = dev_array(ALLOY_FLOAT32, 4, s_c, p.c0), *n = dev_array(ALLOY_FLOAT32, 3, s_qk, p.n0);
    alloy_array *m = dev_array(ALLOY_FLOAT32, 3, s_g, p.m0);
    double *hs = malloc(sizeof(double) * (size_t)(BH * S * DV));
    double *xq = malloc(sizeof(double) * (size_t)(BH * DK)), *xk = malloc(sizeof(double) * (size_t)(BH * DK));
    double *xv = malloc(sizeof(double) * (size_t)(BH * DV)), *xi = malloc(sizeof(double) * (size_t)BH);
    double *xf = malloc(sizeof(double) * (size_t)BH);
    for (int64_t t = 0; t < S; t++) {
        for (int64_t bh = 0; bh < BH; bh++) {
            memcpy(xq + bh * DK, p.q + (bh * S + t) * DK, sizeof(double) * (size_t)DK);
            memcpy(xk + bh * DK, p.k + (bh * S + t) * DK, sizeof(double) * (size_t)DK);
            memcpy(xv + bh * DV, p.v + (bh * S + t) * DV, sizeof(double) * (size_t)DV);
            xi[bh] = p.i[bh * S + t];
            xf[bh] = p.f[bh * S + t];
        }
        alloy_array *q = dev_array(p.dt, 3, s_qk, xq), *k = dev_array(p.dt, 3, s_qk, xk);
        alloy_array *v = dev_array(p.dt, 3, s_v, xv), *i = dev_array(p.dt, 3, s_g, xi);
        alloy_array *f = dev_array(p.dt, 3, s_g, xf), *h = NULL;
        alloy_array *co = c, *no = n, *mo = m;
        CHECK_OK(alloy_mlstm_step(q, k, v, i, f, c, n, m, EPS, NULL, &h, &co, &no, &mo));
        double *g = host_of(h);
        for (int64_t bh = 0; bh < BH; bh++) memcpy(hs + (bh * S + t) * DV, g + bh * DV, sizeof(double) * (size_t)DV);
        free(g);
        alloy_array_free(q), alloy_array_free(k), alloy_array_free(v), alloy_array_free(i), alloy_array_free(f);
        alloy_array_free(h);
    }
    double *gc = host_of(c), *gn = host_of(n), *gm = host_of(m);
    CHECK_MSG(rel_err("steps h", r.h, hs, BH * S * DV) <= 2e-4, "chunkwise h differs from the steps' by %.3g",
              rel_err("steps h", r.h, hs, BH * S * DV));
    CHECK(rel_err("steps C", r.c, gc, BH * DK * DV) <= 2e-4);
    CHECK(rel_err("steps n", r.n, gn, BH * DK) <= 2e-4);
    for (int64_t bh = 0; bh < BH; bh++) CHECK(fabs(r.m[bh] - gm[bh]) <= 1e-5 * (1 + fabs(gm[bh])));
    free(gc), free(gn), free(gm), free(hs), free(xq), free(xk), free(xv), free(xi), free(xf);
    alloy_array_free(c), alloy_array_free(n), alloy_array_free(m);
    result_free(&r);
    drop(&p);
}

/* A packed batch of sequences of these lengths, each with its own initial
 * state (initial != 0) or zeros: h and the final states equal each sequence
 * run alone (the float64 reference, and alloy_mlstm_chunkwise on it). */
static void check_varlen(int nseq, const int64_t *lens, int64_t NH, int64_t DK, int64_t DV, alloy_dtype dt,
                         int initial, int chunk, const char *label) {
    problem *ps = malloc(sizeof(problem) * (size_t)nseq);
    int32_t *cu = malloc(sizeof(int32_t) * (size_t)(nseq + 1));
    cu[0] = 0;
    for (int s = 0; s < nseq; s++) {
        make(&ps[s], 1, NH, lens[s], DK, DV, dt, GATES_PLAIN, initial);
        cu[s + 1] = cu[s] + (int32_t)lens[s];
    }
    const int64_t T = cu[nseq];
    double *q = malloc(sizeof(double) * (size_t)(NH * T * DK + 1)), *k = malloc(sizeof(double) * (size_t)(NH * T * DK + 1));
    double *v = malloc(sizeof(double) * (size_t)(NH * T * DV + 1)), *ig = malloc(sizeof(double) * (size_t)(NH * T + 1));
    double *fg = malloc(sizeof(double) * (size_t)(NH * T + 1));
    double *c0 = malloc(sizeof(double) * (size_t)(nseq * NH * DK * DV + 1));
    double *n0 = malloc(sizeof(double) * (size_t)(nseq * NH * DK + 1)), *m0 = malloc(sizeof(double) * (size_t)(nseq * NH + 1));
    for (int s = 0; s < nseq; s++) {
        const problem *p = &ps[s];
        for (int64_t hd = 0; hd < NH; hd++) {
            for (int64_t t = 0; t < lens[s]; t++) {
                const int64_t row = hd * T + cu[s] + t, src = hd * lens[s] + t;
                memcpy(q + row * DK, p->q + src * DK, sizeof(double) * (size_t)DK);
                memcpy(k + row * DK, p->k + src * DK, sizeof(double) * (size_t)DK);
                memcpy(v + row * DV, p->v + src * DV, sizeof(double) * (size_t)DV);
                ig[row] = p->i[src];
                fg[row] = p->f[src];
            }
            if (initial) {
                memcpy(c0 + ((int64_t)s * NH + hd) * DK * DV, p->c0 + hd * DK * DV, sizeof(double) * (size_t)(DK * DV));
                memcpy(n0 + ((int64_t)s * NH + hd) * DK, p->n0 + hd * DK, sizeof(double) * (size_t)DK);
                m0[s * NH + hd] = p->m0[hd];
            }
        }
    }
    const int64_t s_qk[4] = {1, NH, T, DK}, s_v[4] = {1, NH, T, DV}, s_g[3] = {1, NH, T};
    const int64_t s_c[4] = {nseq, NH, DK, DV}, s_n[3] = {nseq, NH, DK}, s_m[3] = {nseq, NH, 1}, s_cu[1] = {nseq + 1};
    alloy_array *aq = dev_array(dt, 4, s_qk, q), *ak = dev_array(dt, 4, s_qk, k), *av = dev_array(dt, 4, s_v, v);
    alloy_array *ai = dev_array(dt, 3, s_g, ig), *af = dev_array(dt, 3, s_g, fg), *acu = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, s_cu, cu, &acu));
    alloy_array *ac0 = NULL, *an0 = NULL, *am0 = NULL;
    if (initial) {
        ac0 = dev_array(ALLOY_FLOAT32, 4, s_c, c0);
        an0 = dev_array(ALLOY_FLOAT32, 3, s_n, n0);
        am0 = dev_array(ALLOY_FLOAT32, 3, s_m, m0);
    }
    alloy_array *h = nan_array(dt, 4, s_v), *c = nan_array(ALLOY_FLOAT32, 4, s_c), *n = nan_array(ALLOY_FLOAT32, 3, s_n);
    alloy_array *m = nan_array(ALLOY_FLOAT32, 3, s_m);
    alloy_array *gh = h, *gc = c, *gn = n, *gm = m;
    CHECK_OK(alloy_mlstm_chunkwise(aq, ak, av, ai, af, ac0, an0, am0, acu, chunk, EPS, NULL, &h, &c, &n, &m));
    CHECK(h == gh && c == gc && n == gn && m == gm);
    double *hh = host_of(h), *hc = host_of(c), *hn = host_of(n), *hm = host_of(m);
    for (int s = 0; s < nseq; s++) {
        const problem *p = &ps[s];
        expected x = expect(p);
        result alone = run_chunkwise(p, chunk);
        /* this sequence's part of the packed results */
        result part;
        part.h = malloc(sizeof(double) * (size_t)(NH * lens[s] * DV + 1));
        part.c = hc + (int64_t)s * NH * DK * DV;
        part.n = hn + (int64_t)s * NH * DK;
        part.m = hm + (int64_t)s * NH;
        for (int64_t hd = 0; hd < NH; hd++)
            memcpy(part.h + hd * lens[s] * DV, hh + (hd * T + cu[s]) * DV, sizeof(double) * (size_t)(lens[s] * DV));
        char what[96];
        snprintf(what, sizeof what, "%s sequence %d (length %lld)", label, s, (long long)lens[s]);
        compare(p, &x, &part, what, chunk);
        /* and exactly what the sequence gives alone (the same arithmetic) */
        for (int64_t e = 0; e < NH * lens[s] * DV; e++)
            CHECK_MSG(part.h[e] == alone.h[e], "%s: h[%lld] = %.9g packed, %.9g alone", what, (long long)e, part.h[e],
                      alone.h[e]);
        for (int64_t e = 0; e < NH * DK * DV; e++)
            CHECK_MSG(part.c[e] == alone.c[e], "%s: C[%lld] = %.9g packed, %.9g alone", what, (long long)e, part.c[e],
                      alone.c[e]);
        free(part.h);
        result_free(&alone);
        expected_free(&x);
    }
    free(hh), free(hc), free(hn), free(hm);
    alloy_array *all[] = {aq, ak, av, ai, af, acu, ac0, an0, am0, h, c, n, m};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    for (int s = 0; s < nseq; s++) drop(&ps[s]);
    free(ps), free(cu), free(q), free(k), free(v), free(ig), free(fg), free(c0), free(n0), free(m0);
}

static void test_chunkwise_varlen(void) {
    static const int64_t lens[] = {5, 0, 70, 1, 33, 16};
    check_varlen(6, lens, 2, 16, 24, ALLOY_FLOAT32, 1, 16, "varlen initial");
    check_varlen(6, lens, 2, 16, 24, ALLOY_FLOAT32, 0, 64, "varlen zeros");
    static const int64_t one[] = {130};
    check_varlen(1, one, 1, 8, 8, ALLOY_BFLOAT16, 1, 32, "varlen one bf16");
    check_varlen(6, lens, 2, 16, 24, ALLOY_FLOAT16, 1, 32, "varlen f16"); /* float16 tiles: exponents by packed row */
}

/* The split path (chunk-start states in device memory): inputs whose
 * states pass ALLOY_MLSTM_WINDOW_BYTES run in several windows with the state
 * carried between them. Windows of one chunk index
 * (dense) or one slot (packed) give the reference's results and, dense, the
 * very bits of one window. */
static void test_chunkwise_long_gate_walk(void) {
    /* over 256 chunks in one window: the gate walk's blocks of chunks, with
     * hostile gates so the stabiliser's chain crosses block boundaries */
    static const int c16[] = {16, 0};
    check(1, 2, 4200, 4, 5, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 1, c16, "S=4200 chunk 16");
    /* the same in windows of about 100 chunks (the chain carried in m_out
     * across windows and blocks): bit for bit one window's result */
    problem p;
    make(&p, 1, 2, 4200, 4, 5, ALLOY_FLOAT32, GATES_HOSTILE_MIX, 1);
    result whole = run_chunkwise(&p, 16);
    setenv("ALLOY_MLSTM_WINDOW_BYTES", "40000", 1);
    result win = run_chunkwise(&p, 16);
    unsetenv("ALLOY_MLSTM_WINDOW_BYTES");
    for (int64_t e = 0; e < 2 * 4200 * 5; e++)
        CHECK_MSG(win.h[e] == whole.h[e], "h[%lld] = %.9g in windows, %.9g in one", (long long)e, win.h[e], whole.h[e]);
    for (int64_t e = 0; e < 2; e++) CHECK_MSG(win.m[e] == whole.m[e], "m[%lld] differs in windows", (long long)e);
    result_free(&whole), result_free(&win);
    drop(&p);
    /* packed: one sequence of 263 chunks beside short ones */
    static const int64_t lens[] = {5, 4200, 0, 33};
    check_varlen(4, lens, 1, 4, 5, ALLOY_FLOAT32, 1, 16, "varlen, one sequence over 256 chunks");
}

static void test_chunkwise_windows(void) {
    problem p;
    make(&p, 3, 2, 150, 16, 24, ALLOY_FLOAT32, GATES_PLAIN, 1);
    expected x = expect(&p);
    result whole = run_chunkwise(&p, 32);
    setenv("ALLOY_MLSTM_WINDOW_BYTES", "1", 1);
    result win = run_chunkwise(&p, 32);
    compare(&p, &x, &win, "windows of one chunk", 32);
    const int64_t nh = 3 * 2 * 150 * 24, nc = 3 * 2 * 16 * 24;
    for (int64_t e = 0; e < nh; e++)
        CHECK_MSG(win.h[e] == whole.h[e], "h[%lld] = %.9g in windows, %.9g in one", (long long)e, win.h[e], whole.h[e]);
    for (int64_t e = 0; e < nc; e++)
        CHECK_MSG(win.c[e] == whole.c[e], "C[%lld] = %.9g in windows, %.9g in one", (long long)e, win.c[e], whole.c[e]);
    static const int64_t lens[] = {40, 0, 3, 97};
    check_varlen(4, lens, 2, 16, 8, ALLOY_FLOAT32, 1, 16, "varlen windows of one slot");
    setenv("ALLOY_MLSTM_WINDOW_BYTES", "20000", 1);   /* a few slots */
    check_varlen(4, lens, 2, 16, 8, ALLOY_FLOAT32, 0, 16, "varlen windows of a few slots");
    unsetenv("ALLOY_MLSTM_WINDOW_BYTES");
    result_free(&whole), result_free(&win);
    expected_free(&x);
    drop(&p);
    /* float16 inputs (float16 tiles with exponents): the float32 carry between windows gives the very bits of
     * one window too */
    problem p16;
    make(&p16, 2, 2, 100, 24, 40, ALLOY_FLOAT16, GATES_HOSTILE_MIX, 1);
    expected x16 = expect(&p16);
    result whole16 = run_chunkwise(&p16, 32);
    setenv("ALLOY_MLSTM_WINDOW_BYTES", "1", 1);
    result win16 = run_chunkwise(&p16, 32);
    unsetenv("ALLOY_MLSTM_WINDOW_BYTES");
    compare(&p16, &x16, &win16, "f16 windows of one chunk", 32);
    for (int64_t e = 0; e < 2 * 2 * 100 * 40; e++)
        CHECK_MSG(win16.h[e] == whole16.h[e], "f16 h[%lld] = %.9g in windows, %.9g in one", (long long)e, win16.h[e],
                  whole16.h[e]);
    result_free(&whole16), result_free(&win16);
    expected_free(&x16);
    drop(&p16);
}

/* S = 0: h is empty and the final states are the initial ones; B = 0: nothing. */
static void test_chunkwise_empty(void) {
    /* S = 0: the initial states come back (also on the float16 tiles: float32 DEFAULT, float16) */
    static const struct { alloy_dtype dt; alloy_precision pr; } runs[] = {
        {ALLOY_FLOAT32, ALLOY_PRECISION_HIGH}, {ALLOY_FLOAT32, ALLOY_PRECISION_DEFAULT},
        {ALLOY_FLOAT16, ALLOY_PRECISION_HIGH}};
    for (size_t x = 0; x < sizeof runs / sizeof runs[0]; x++) {
        problem p;
        make(&p, 2, 1, 0, 4, 3, runs[x].dt, GATES_PLAIN, 1);
        const int set = scaled_on();
        result r = run_chunkwise_at(&p, 0, runs[x].pr);
        scaled_off(set);
        for (int64_t e = 0; e < 2 * 4 * 3; e++) CHECK(r.c[e] == p.c0[e]);
        for (int64_t e = 0; e < 2 * 4; e++) CHECK(r.n[e] == p.n0[e]);
        for (int64_t e = 0; e < 2; e++) CHECK(r.m[e] == p.m0[e]);
        result_free(&r);
        drop(&p);
    }
    const int64_t s4[4] = {0, 2, 5, 4}, sg[3] = {0, 2, 5};
    alloy_array *q = NULL, *i = NULL, *h = NULL;
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 4, s4, &q));
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 3, sg, &i));
    CHECK_OK(alloy_mlstm_chunkwise(q, q, q, i, i, NULL, NULL, NULL, NULL, 0, EPS, NULL, &h, NULL, NULL, NULL));
    CHECK(h && alloy_array_size(h) == 0);
    alloy_array_free(h), alloy_array_free(q), alloy_array_free(i);
}

/* Without the state slots only h is computed (and equals the run with them). */
static void test_chunkwise_h_only(void) {
    problem p;
    make(&p, 1, 2, 29, 8, 12, ALLOY_FLOAT32, GATES_PLAIN, 1);
    result r = run_chunkwise(&p, 16);
    const int64_t s_qk[4] = {1, 2, 29, 8}, s_v[4] = {1, 2, 29, 12}, s_g[3] = {1, 2, 29};
    const int64_t s_c[4] = {1, 2, 8, 12}, s_n[3] = {1, 2, 8}, s_m[3] = {1, 2, 1};
    alloy_array *q = dev_array(p.dt, 4, s_qk, p.q), *k = dev_array(p.dt, 4, s_qk, p.k);
    alloy_array *v = dev_array(p.dt, 4, s_v, p.v), *i = dev_array(p.dt, 3, s_g, p.i), *f = dev_array(p.dt, 3, s_g, p.f);
    alloy_array *c0 = dev_array(ALLOY_FLOAT32, 4, s_c, p.c0), *n0 = dev_array(ALLOY_FLOAT32, 3, s_n, p.n0);
    alloy_array *m0 = dev_array(ALLOY_FLOAT32, 3, s_m, p.m0), *h = NULL;
    CHECK_OK(alloy_mlstm_chunkwise(q, k, v, i, f, c0, n0, m0, NULL, 16, EPS, NULL, &h, NULL, NULL, NULL));
    double *g = host_of(h);
    for (int64_t e = 0; e < 2 * 29 * 12; e++) CHECK(g[e] == r.h[e]);
    free(g);
    alloy_array *all[] = {q, k, v, i, f, c0, n0, m0, h};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    result_free(&r);
    drop(&p);
}

/* The normaliser condition (sum |terms| / value) from which precision DEFAULT's rounding of q, k and the weights
 * to 11 bits (about 2^-9 of the terms' sum) reaches the normaliser itself: h of such a row is off by a factor in
 * any 11-bit product (TF32's too), not by its first-order magnitude. */
enum { DEFAULT_COND_LIMIT = 512 };

/* x's magnitudes with the rows past DEFAULT_COND_LIMIT at infinity: h_err then checks them written and finite only. */
static double *mag_default_precision(const expected *x, int64_t rows, int64_t DV) {
    double *mag = malloc(sizeof(double) * (size_t)(rows * DV + 1));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t b = 0; b < DV; b++)
            mag[t * DV + b] = x->cond[t] >= DEFAULT_COND_LIMIT ? INFINITY : x->mag[t * DV + b];
    return mag;
}

/* ALLOY_PRECISION_DEFAULT (TFLA's precision: float16 tiles with exponents on
 * the split path, one TF32 pass on the fused one): within 1e-2 of the
 * reference where HIGH gives 2e-4, with hostile gates, DHQK over 256 too; on
 * the CPU without ALLOY_MLSTM_PATH (exact products whatever is asked) the
 * very same values as HIGH. */
static void test_chunkwise_tf32(void) {
    static const struct { int64_t NH, S, DK, DV; int gates, initial, chunk; } cases[] = {
        {2, 150, 64, 72, GATES_PLAIN, 1, 64},   {1, 333, 16, 24, GATES_PLAIN, 0, 32},
        {1, 40, 300, 40, GATES_PLAIN, 1, 64},   {2, 150, 16, 24, GATES_HOSTILE_MIX, 1, 16},
        {1, 90, 8, 8, GATES_ALL_INPUT_60, 1, 64},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        problem p;
        make(&p, 1, cases[c].NH, cases[c].S, cases[c].DK, cases[c].DV, ALLOY_FLOAT32, cases[c].gates,
             cases[c].initial);
        expected x = expect(&p);
        const int set = scaled_on();
        result r = run_chunkwise_at(&p, cases[c].chunk, ALLOY_PRECISION_DEFAULT);
        scaled_off(set);
        const int64_t nh = p.NH * p.S * p.DV;
        double *mag = mag_default_precision(&x, p.NH * p.S, p.DV);   /* rows past DEFAULT_COND_LIMIT: finite only */
        const double e = h_err("tf32", r.h, x.h, mag, nh);
        free(mag);
        CHECK_MSG(e <= 1e-2, "precision DEFAULT case %zu: h error %.3g of max(max|h|, its error magnitude)", c, e);
        CHECK_MSG(rel_err("tf32", r.c, x.c, p.NH * p.DK * p.DV) <= 1e-2, "precision DEFAULT case %zu: final C", c);
        if (set && alloy_device_backend(ku_device()) == ALLOY_BACKEND_CPU) {
            result d = run_chunkwise_at(&p, cases[c].chunk, ALLOY_PRECISION_DEFAULT);
            result hi = run_chunkwise_at(&p, cases[c].chunk, ALLOY_PRECISION_HIGH);
            CHECK_MSG(memcmp(hi.h, d.h, sizeof(double) * (size_t)nh) == 0,
                      "precision DEFAULT case %zu: the CPU's h differs from HIGH's", c);
            result_free(&d), result_free(&hi);
        }
        if (getenv("ALLOY_TEST_VERBOSE")) printf("  tf32 case %zu: h error %.3g\n", c, e);
        result_free(&r);
        expected_free(&x);
        drop(&p);
    }
}

/* precision DEFAULT for float32 runs on float16 tiles with a power-of-two
 * exponent per row of q, k and v (on the CPU with ALLOY_MLSTM_PATH=scaled): tokens whose rows are
 * scaled by their own powers of two from 2^-20 to 2^20 (and rows of zeros),
 * with hostile gates, so that a token far below its chunk's others can carry
 * h. Each row of h within 1e-2 of its own scale (max over the row of |h| and
 * of the element's error magnitude): a tile-wide scale would have flushed the
 * small tokens to zero. */
static void test_chunkwise_scaled_tokens(void) {
    static const struct { int64_t NH, S, DK, DV; int gates, initial, chunk; } cases[] = {
        {2, 150, 40, 20, GATES_HOSTILE_MIX, 1, 32}, {1, 200, 64, 72, GATES_PLAIN, 0, 64},
        {1, 70, 300, 40, GATES_HOSTILE_MIX, 1, 64}, {1, 33, 16, 8, GATES_ALL_INPUT_60, 1, 16},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        problem p;
        make(&p, 1, cases[c].NH, cases[c].S, cases[c].DK, cases[c].DV, ALLOY_FLOAT32, cases[c].gates,
             cases[c].initial);
        const int64_t rows = p.NH * p.S;
        for (int64_t t = 0; t < rows; t++) {
            const int aq = (int)(harness_rand_u64() % 41) - 20, ak = (int)(harness_rand_u64() % 41) - 20;
            const int av = (int)(harness_rand_u64() % 41) - 20;
            for (int64_t d = 0; d < p.DK; d++) {
                p.q[t * p.DK + d] = ldexp(p.q[t * p.DK + d], aq);
                p.k[t * p.DK + d] = t % 7 == 3 ? 0.0 : ldexp(p.k[t * p.DK + d], ak);
            }
            for (int64_t d = 0; d < p.DV; d++) p.v[t * p.DV + d] = t % 11 == 5 ? 0.0 : ldexp(p.v[t * p.DV + d], av);
        }
        expected x = expect(&p);
        const int set = scaled_on();
        result r = run_chunkwise_at(&p, cases[c].chunk, ALLOY_PRECISION_DEFAULT);
        scaled_off(set);
        double worst = 0;
        int64_t at = 0;
        for (int64_t t = 0; t < rows; t++) {
            double hmax = 0;
            for (int64_t b = 0; b < p.DV; b++) hmax = fmax(hmax, fabs(x.h[t * p.DV + b]));
            for (int64_t b = 0; b < p.DV; b++) {
                const int64_t e = t * p.DV + b;
                CHECK_MSG(isfinite(r.h[e]), "scaled case %zu: h[%lld] = %g", c, (long long)e, r.h[e]);
                /* rows whose scale is under 1e-25 (hostile gates times small tokens): only written and
                 * finite — under it any float32 computation reaches subnormals (HIGH's too). Above it
                 * the tiles' P takes its row's exponent from the token exponents in integers (it once
                 * folded v's exponent into P first and passed through subnormals: 1.2e-2 at
                 * ALLOY_TEST_SEED=4767223844656415811), and the walk takes the decay and the chunk's
                 * weights from their logs (a decay under float's range once held the chunk's scale
                 * at the vanished state's: 8.9e-2 at ALLOY_TEST_SEED=11520197), and a weight under
                 * float's normal range (e^-102 after a forget gate of -40 and an input gate of 60) no
                 * longer passes through a subnormal on its way into P (5.5e-2 at
                 * ALLOY_TEST_SEED=4767837077714793553 over the whole file, 3.7e-4 since) */
                const double d = fmax(hmax, x.mag[e]);
                if (d < 1e-25) continue;
                /* rows past DEFAULT_COND_LIMIT: only written and finite (HIGH is checked on such rows by
                 * the other tests; at ALLOY_TEST_SEED=7222485177192295084 for this test alone a row of
                 * condition 9.4e3 came out 396 times too large, 4.2e-2 of its magnitude) */
                if (x.cond[t] >= DEFAULT_COND_LIMIT) continue;
                const double err = fabs(r.h[e] - x.h[e]) / d;
                if (err > worst) worst = err, at = e;
            }
        }
        /* 1e-2 as test_chunkwise_tf32: each row of q, k, v and each state tile has one exponent, so
         * an element far below its row's or tile's largest keeps float16's absolute precision at
         * that scale, not its own (usually 1-5e-4 here; the largest of 100 seeds 5.1e-3, at
         * ALLOY_TEST_SEED=12253300, where h is 1000 times under its terms' magnitude) */
        CHECK_MSG(worst <= 1e-2, "scaled case %zu: h[%lld] = %.9g, want %.9g (error %.3g of its row's scale)", c,
                  (long long)at, r.h[at], x.h[at], worst);
        CHECK_MSG(rel_err("scaled", r.c, x.c, p.NH * p.DK * p.DV) <= 1e-2, "scaled case %zu: final C", c);
        CHECK_MSG(rel_err("scaled", r.n, x.n, p.NH * p.DK) <= 1e-2, "scaled case %zu: final n", c);
        if (getenv("ALLOY_TEST_VERBOSE")) printf("  scaled case %zu: h error %.3g of its row's scale\n", c, worst);
        result_free(&r);
        expected_free(&x);
        drop(&p);
    }
}

/* h of a (1, 2, 50, ., 8) problem after a NaN in head 0 at token 20: column
 * col (every column when col < 0) NaN from token 20 on, its rows from
 * open_from to 19 not checked, every other element within tol of the clean
 * reference (of its magnitude or max|h|). */
static void check_nan_rows(const result *r, const expected *ref, int col, int64_t open_from, double tol,
                           const char *what) {
    double hmax = 0;
    for (int64_t e = 0; e < 2 * 50 * 8; e++) hmax = fmax(hmax, fabs(ref->h[e]));
    for (int64_t hd = 0; hd < 2; hd++)
        for (int64_t t = 0; t < 50; t++)
            for (int64_t b = 0; b < 8; b++) {
                const int64_t e = (hd * 50 + t) * 8 + b;
                if (hd == 0 && (col < 0 || b == col) && t >= open_from) {
                    if (t >= 20)
                        CHECK_MSG(isnan(r->h[e]), "%s: h[0][%lld][%lld] = %g, want NaN", what, (long long)t,
                                  (long long)b, r->h[e]);
                    continue;
                }
                const double d = fmax(hmax, ref->mag[e]);
                CHECK_MSG(isfinite(r->h[e]) && fabs(r->h[e] - ref->h[e]) <= tol * d,
                          "%s: h[%lld][%lld][%lld] = %.9g, want %.9g", what, (long long)hd, (long long)t, (long long)b,
                          r->h[e], ref->h[e]);
            }
}

/* A NaN in one element of v (head 0, token 20, column 3) goes on into h — the rows from token 20 on
 * hold NaN in that column, never a finite number in its place — and touches nothing it should not:
 * head 1, the chunks before token 20's, and the other columns all match the reference of the inputs
 * with a 0 there (within the dtype's tolerance). On every path: float32 HIGH, float32 DEFAULT and
 * float16 (the float16 tiles: the exponents' maxima skip the NaN). Rows 16-19 of column 3 are left
 * open (the chunk's product multiplies the NaN by their zero weight). */
static void test_chunkwise_nan(void) {
    static const struct { alloy_dtype dt; alloy_precision pr; } runs[] = {
        {ALLOY_FLOAT32, ALLOY_PRECISION_HIGH}, {ALLOY_FLOAT32, ALLOY_PRECISION_DEFAULT},
        {ALLOY_FLOAT16, ALLOY_PRECISION_HIGH}};
    for (size_t x = 0; x < sizeof runs / sizeof runs[0]; x++) {
        problem p;
        make(&p, 1, 2, 50, 16, 8, runs[x].dt, GATES_PLAIN, 0);
        const int64_t at = 20 * p.DV + 3;
        p.v[at] = 0.0;
        expected ref = expect(&p);
        p.v[at] = NAN;
        const int set = scaled_on();
        result r = run_chunkwise_at(&p, 16, runs[x].pr);
        scaled_off(set);
        const double tol = runs[x].pr == ALLOY_PRECISION_DEFAULT ? 1e-2 : tolerance(p.dt);   /* as below */
        char what[32];
        snprintf(what, sizeof what, "run %zu", x);
        check_nan_rows(&r, &ref, 3, 16, tol, what);
        result_free(&r);
        expected_free(&ref);
        drop(&p);
    }
}

/* A NaN gate (input, then forget) at token 20 of head 0: every column of h
 * from that token on is NaN (its weight, or its decay, reaches every state
 * element after it), and nothing before it or in the other head moves —
 * the chunk-wide scales, maxima and records of the tiles must not carry it
 * backwards to the chunk's earlier rows or across heads. A forget
 * pre-activation of -inf there (forget everything), with an input
 * pre-activation of -inf at token 30 (ignore it), matches the reference
 * everywhere. */
static void test_chunkwise_nan_gates(void) {
    static const struct { alloy_dtype dt; alloy_precision pr; } runs[] = {
        {ALLOY_FLOAT32, ALLOY_PRECISION_HIGH}, {ALLOY_FLOAT32, ALLOY_PRECISION_DEFAULT},
        {ALLOY_FLOAT16, ALLOY_PRECISION_HIGH}, {ALLOY_BFLOAT16, ALLOY_PRECISION_HIGH}};
    for (size_t x = 0; x < 3 * sizeof runs / sizeof runs[0]; x++) {
        const size_t ri = x / 3;
        const int forget = (int)(x % 3) > 0, neg_inf = (int)(x % 3) == 2;
        problem p;
        make(&p, 1, 2, 50, 16, 8, runs[ri].dt, GATES_PLAIN, 1);
        if (neg_inf) p.f[20] = -INFINITY, p.i[30] = -INFINITY;   /* valid gates (forget everything; ignore the token) */
        expected ref = expect(&p);
        if (!neg_inf) (forget ? p.f : p.i)[20] = NAN;
        const int set = scaled_on();
        result r = run_chunkwise_at(&p, 16, runs[ri].pr);
        scaled_off(set);
        /* float32 at DEFAULT: the float16 tiles' bound, test_chunkwise_tf32's (a seed of a full run
         * found 2.3e-4 of the element's magnitude there, over float32's exact 2e-4) */
        const double tol = runs[ri].pr == ALLOY_PRECISION_DEFAULT ? 1e-2 : tolerance(p.dt);
        char what[48];
        snprintf(what, sizeof what, "run %zu (%s gate)", ri,
                 neg_inf ? "forget -inf" : forget ? "forget NaN" : "input NaN");
        check_nan_rows(&r, &ref, -1, neg_inf ? 50 : 20, tol, what);
        result_free(&r);
        expected_free(&ref);
        drop(&p);
    }
}

static void test_chunkwise_errors(void) {
    const alloy_dtype F = ALLOY_FLOAT32;
    const alloy_status INV = ALLOY_ERROR_INVALID_ARGUMENT;
    /* B=2, NH=3, S=5, DHQK=4, DHHV=6 */
    const int64_t sq[4] = {2, 3, 5, 4}, sv[4] = {2, 3, 5, 6}, sg[3] = {2, 3, 5}, sc[4] = {2, 3, 4, 6};
    const int64_t sn[3] = {2, 3, 4}, sm[3] = {2, 3, 1}, sm2[2] = {2, 3}, sgb[3] = {2, 3, 4};
    alloy_array *q = ku_zeros(F, 4, sq), *v = ku_zeros(F, 4, sv), *g = ku_zeros(F, 3, sg), *c = ku_zeros(F, 4, sc);
    alloy_array *n = ku_zeros(F, 3, sn), *m = ku_zeros(F, 3, sm), *mbad = ku_zeros(F, 2, sm2), *gbad = ku_zeros(F, 3, sgb);
    alloy_array *q16 = ku_zeros(ALLOY_BFLOAT16, 4, sq), *c16 = ku_zeros(ALLOY_BFLOAT16, 4, sc);
    alloy_array *h = NULL, *co = NULL, *no = NULL, *mo = NULL;
#define CW(qq, kk, vv, ii, ff, c0, n0, m0, cu, cs, eps, ...) \
    alloy_mlstm_chunkwise(qq, kk, vv, ii, ff, c0, n0, m0, cu, cs, eps, NULL, __VA_ARGS__)
    CHECK_FAILS(CW(NULL, q, v, g, g, NULL, NULL, NULL, NULL, 0, EPS, &h, NULL, NULL, NULL), INV, "q is NULL");
    CHECK_FAILS(CW(q, v, v, g, g, NULL, NULL, NULL, NULL, 0, EPS, &h, NULL, NULL, NULL), INV, "k has shape (2, 3, 5, 6)");
    CHECK_FAILS(CW(q, q, q16, g, g, NULL, NULL, NULL, NULL, 0, EPS, &h, NULL, NULL, NULL), INV, "v is bfloat16");
    CHECK_FAILS(CW(q, q, v, gbad, g, NULL, NULL, NULL, NULL, 0, EPS, &h, NULL, NULL, NULL), INV, "i has shape (2, 3, 4)");
    CHECK_FAILS(CW(q, q, v, g, gbad, NULL, NULL, NULL, NULL, 0, EPS, &h, NULL, NULL, NULL), INV, "f has shape");
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, 8, EPS, &h, NULL, NULL, NULL), INV, "chunk_size is 8");
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, 48, EPS, &h, NULL, NULL, NULL), INV, "chunk_size is 48");
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, 2048, EPS, &h, NULL, NULL, NULL), INV, "chunk_size is 2048");
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, -64, EPS, &h, NULL, NULL, NULL), INV, "chunk_size is -64");
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, 0, -1.0, &h, NULL, NULL, NULL), INV, "eps");
    CHECK_FAILS(CW(q, q, v, g, g, c, NULL, m, NULL, 0, EPS, &h, NULL, NULL, NULL), INV,
                "c_initial, n_initial and m_initial must be given together");
    CHECK_FAILS(CW(q, q, v, g, g, c16, n, m, NULL, 0, EPS, &h, NULL, NULL, NULL), INV, "c_initial is bfloat16");
    CHECK_FAILS(CW(q, q, v, g, g, c, q, m, NULL, 0, EPS, &h, NULL, NULL, NULL), INV, "n_initial has shape");
    CHECK_FAILS(CW(q, q, v, g, g, c, n, mbad, NULL, 0, EPS, &h, NULL, NULL, NULL), INV,
                "m_initial has shape (2, 3) but must have shape (2, 3, 1)");
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, 0, EPS, &h, &co, NULL, &mo), INV,
                "c_out, n_out and m_out must be asked for together");
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, 0, EPS, NULL, &co, &no, &mo), INV, "h is NULL");
    alloy_array *nbad = c;
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, NULL, 0, EPS, &h, &co, &nbad, &mo), INV, "n_out has shape");
    CHECK(h == NULL && co == NULL && no == NULL && mo == NULL); /* nothing returned on failure */
    /* packed batches */
    const int64_t pq[4] = {1, 3, 5, 4}, pv[4] = {1, 3, 5, 6}, pg[3] = {1, 3, 5}, scu[1] = {3}, scu2[2] = {1, 3};
    alloy_array *Q = ku_zeros(F, 4, pq), *V = ku_zeros(F, 4, pv), *G = ku_zeros(F, 3, pg);
    const int32_t good[3] = {0, 2, 5}, down[3] = {0, 3, 2}, shortcu[3] = {0, 2, 4}, late[3] = {1, 2, 5};
    alloy_array *cu = NULL, *cudown = NULL, *cushort = NULL, *culate = NULL, *cuf = ku_zeros(F, 1, scu);
    alloy_array *cu2d = ku_zeros(ALLOY_INT32, 2, scu2);
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, scu, good, &cu));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, scu, down, &cudown));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, scu, shortcu, &cushort));
    CHECK_OK(alloy_array_from_host(ku_device(), ALLOY_INT32, 1, scu, late, &culate));
    CHECK_FAILS(CW(q, q, v, g, g, NULL, NULL, NULL, cu, 0, EPS, &h, NULL, NULL, NULL), INV,
                "with cu_seqlens, q must be (1, NH, total, DHQK)");
    CHECK_FAILS(CW(Q, Q, V, G, G, NULL, NULL, NULL, cuf, 0, EPS, &h, NULL, NULL, NULL), INV,
                "cu_seqlens is float32 but must be int32");
    CHECK_FAILS(CW(Q, Q, V, G, G, NULL, NULL, NULL, cu2d, 0, EPS, &h, NULL, NULL, NULL), INV, "cu_seqlens must be 1-D");
    if (alloy_device_backend(ku_device()) == ALLOY_BACKEND_CPU) {
        CHECK_FAILS(CW(Q, Q, V, G, G, NULL, NULL, NULL, cudown, 0, EPS, &h, NULL, NULL, NULL), INV,
                    "cu_seqlens decreases at index 2");
        CHECK_FAILS(CW(Q, Q, V, G, G, NULL, NULL, NULL, cushort, 0, EPS, &h, NULL, NULL, NULL), INV,
                    "cu_seqlens ends at 4 but the packed inputs hold 5 tokens");
        CHECK_FAILS(CW(Q, Q, V, G, G, NULL, NULL, NULL, culate, 0, EPS, &h, NULL, NULL, NULL), INV,
                    "cu_seqlens[0] is 1");
    }
    /* states of a packed batch are per sequence: (2, NH, ...) here, not (1, NH, ...) */
    const int64_t c1[4] = {1, 3, 4, 6};
    alloy_array *cone = ku_zeros(F, 4, c1);
    CHECK_FAILS(CW(Q, Q, V, G, G, cone, n, m, cu, 0, EPS, &h, NULL, NULL, NULL), INV,
                "c_initial has shape (1, 3, 4, 6) but must have shape (2, 3, 4, 6)");
    CHECK_OK(CW(Q, Q, V, G, G, c, n, m, cu, 0, EPS, &h, &co, &no, &mo));
    CHECK(h && co && no && mo && alloy_array_shape(co)[0] == 2);
#undef CW
    CHECK_FAILS(alloy_mlstm_chunkwise_with_precision(q, q, v, g, g, NULL, NULL, NULL, NULL, 0, EPS,
                                                     ALLOY_PRECISION_HIGHEST, NULL, &h, NULL, NULL, NULL),
                ALLOY_ERROR_UNSUPPORTED, "precision HIGHEST");
    CHECK_FAILS(alloy_mlstm_chunkwise_with_precision(q, q, v, g, g, NULL, NULL, NULL, NULL, 0, EPS, (alloy_precision)7,
                                                     NULL, &h, NULL, NULL, NULL),
                INV, "precision is 7");
    alloy_array *all[] = {q, v, g, c, n, m, mbad, gbad, q16, c16, h, co, no, mo, Q, V, G,
                          cu, cudown, cushort, culate, cuf, cu2d, cone};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
}

int main(void) {
    harness_seed();
    RUN(test_chunkwise_errors);
    RUN(test_chunkwise_empty);
    RUN(test_chunkwise_h_only);
    RUN(test_chunkwise_chunk_sizes);
    RUN(test_chunkwise_long_gate_walk);
    RUN(test_chunkwise_head_sizes);
    RUN(test_chunkwise_shapes);
    RUN(test_chunkwise_equals_steps);
    RUN(test_chunkwise_hostile_gates);
    RUN(test_chunkwise_half_range);
    RUN(test_chunkwise_half_inputs);
    RUN(test_chunkwise_tf32);
    RUN(test_chunkwise_scaled_tokens);
    RUN(test_chunkwise_nan);
    RUN(test_chunkwise_nan_gates);
    RUN(test_chunkwise_varlen);
    RUN(test_chunkwise_windows);
    return harness_finish();
}
