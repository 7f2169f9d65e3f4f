/* test_nn_conv.c — the causal depthwise convolution (alloy/nn.h:
 * alloy_nn_causal_conv1d and its backward), with and without bias and
 * decoding state, against a plain C float64 reference on awkward sizes
 * (channels 1 to 1000, kernel sizes 1 to 8, sequences around the 32-timestep
 * blocks); float64 gradients against central finite differences; every
 * output element written (given outputs are pre-filled with NaN); the
 * kernels' forms forced in turn. On the device the tests run on
 * (ALLOY_DEVICE, default cpu). (test_nn.c has its errors, empty and unaligned
 * operands.) */
#include "nn_util.h"

#include "alloy/nn.h"

/* ---- causal convolution --------------------------------------------------- */

/* ext(b, tau, c): x at tau >= 0, the state (or 0) before. */
static double ext_at(const double *x, const double *state, int64_t S, int64_t C, int64_t K, int64_t b, int64_t tau,
                     int64_t c) {
    if (tau >= 0) return x[(b * S + tau) * C + c];
    return state ? state[(b * (K - 1) + K - 1 + tau) * C + c] : 0;
}

static void conv_ref(const double *x, const double *w, const double *bias, const double *state, int64_t B, int64_t S,
                     int64_t C, int64_t K, double *y) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S; t++)
            for (int64_t c = 0; c < C; c++) {
                double acc = bias ? bias[c] : 0;
                for (int64_t j = 0; j < K; j++) acc += w[c * K + j] * ext_at(x, state, S, C, K, b, t - K + 1 + j, c);
                y[(b * S + t) * C + c] = acc;
            }
}

static double conv_fd(double *x, double *w, double *bias, double *state, const double *dy, int64_t B, int64_t S,
                      int64_t C, int64_t K, double *v, int64_t e, double *scratch) {
    const double keep = v[e], h = 1e-6;
    v[e] = keep + h;
    conv_ref(x, w, bias, state, B, S, C, K, scratch);
    const double lp = dot(dy, scratch, B * S * C);
    v[e] = keep - h;
    conv_ref(x, w, bias, state, B, S, C, K, scratch);
    const double lm = dot(dy, scratch, B * S * C);
    v[e] = keep;
    return (lp - lm) / (2 * h);
}

typedef struct conv_case {
    int64_t B, S, C, K;
} conv_case;

static void run_conv(conv_case cc, alloy_dtype dt, int with_bias, int with_state) {
    const int64_t B = cc.B, S = cc.S, C = cc.C, K = cc.K, n = B * S * C, ns = B * (K - 1) * C;
    double *x = random_vec(dt, n, -2, 2), *w = random_vec(dt, C * K, -1, 1), *bias = random_vec(dt, C, -1, 1);
    double *state = random_vec(dt, ns, -2, 2), *dy = random_vec(dt, n, -1, 1);
    if (!with_bias) free(bias), bias = NULL;
    if (!with_state) free(state), state = NULL;
    double *ry = malloc(sizeof(double) * (size_t)(n ? n : 1)), *rs = malloc(sizeof(double) * (size_t)(ns ? ns : 1));
    conv_ref(x, w, bias, state, B, S, C, K, ry);
    for (int64_t e = 0; e < n; e++) ry[e] = round_to(dt, ry[e]);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < K - 1; i++)
            for (int64_t c = 0; c < C; c++) rs[(b * (K - 1) + i) * C + c] = ext_at(x, state, S, C, K, b, S + i - (K - 1), c);
    const int64_t xs[3] = {B, S, C}, ws[2] = {C, K}, ss[3] = {B, K - 1, C};
    alloy_array *X = dev_array(dt, 3, xs, x), *W = dev_array(dt, 2, ws, w);
    alloy_array *BI = bias ? dev_array(dt, 1, &C, bias) : NULL, *ST = state ? dev_array(dt, 3, ss, state) : NULL;
    alloy_array *DY = dev_array(dt, 3, xs, dy), *Y = nan_array(dt, 3, xs), *SO = nan_array(dt, 3, ss);
    alloy_array *DX = nan_array(dt, 3, xs), *DW = nan_array(dt, 2, ws), *DB = nan_array(dt, 1, &C);
    alloy_array *DS = nan_array(dt, 3, ss);
    CHECK_OK(alloy_nn_causal_conv1d(X, W, BI, ST, NULL, &Y, &SO));
    CHECK_OK(alloy_nn_causal_conv1d_backward(X, W, ST, DY, NULL, &DX, &DW, &DB, &DS));
    double *y = host_of(Y), *so = host_of(SO), *dx = host_of(DX), *dw = host_of(DW), *db = host_of(DB);
    double *ds = host_of(DS);
    const double ey = rel_err(y, ry, n), es = rel_err(so, rs, ns);
    CHECK_MSG(ey <= 2 * tol(dt) && es == 0, "conv (%lld,%lld,%lld,K=%lld) %s bias %d state %d: y %.3g state %.3g",
              (long long)B, (long long)S, (long long)C, (long long)K, alloy_dtype_name(dt), with_bias, with_state, ey,
              es);
    double *scratch = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (dt == ALLOY_FLOAT64) {
        double worst = 0;
        for (int64_t e = 0; e < n; e += 1 + n / 101)
            worst = fmax(worst, fabs(conv_fd(x, w, bias, state, dy, B, S, C, K, x, e, scratch) - dx[e]));
        for (int64_t e = 0; e < C * K; e += 1 + C * K / 41)
            worst = fmax(worst, fabs(conv_fd(x, w, bias, state, dy, B, S, C, K, w, e, scratch) - dw[e]));
        double db_ref[1] = {0};
        for (int64_t r = 0; r < B * S; r++) db_ref[0] += dy[r * C + (C - 1)];
        worst = fmax(worst, fabs(db_ref[0] - db[C - 1]));
        if (state)
            for (int64_t e = 0; e < ns; e += 1 + ns / 31)
                worst = fmax(worst, fabs(conv_fd(x, w, bias, state, dy, B, S, C, K, state, e, scratch) - ds[e]));
        CHECK_MSG(worst <= 1e-6 * fmax(1, sqrt((double)(B * S))), "conv (%lld,%lld,%lld,K=%lld): gradient vs finite differences %.3g",
                  (long long)B, (long long)S, (long long)C, (long long)K, worst);
    } else {
        alloy_array *X64 = dev_array(ALLOY_FLOAT64, 3, xs, x), *W64 = dev_array(ALLOY_FLOAT64, 2, ws, w);
        alloy_array *S64 = state ? dev_array(ALLOY_FLOAT64, 3, ss, state) : NULL;
        alloy_array *DY64 = dev_array(ALLOY_FLOAT64, 3, xs, dy), *rdx = NULL, *rdw = NULL, *rdb = NULL, *rds = NULL;
        CHECK_OK(alloy_nn_causal_conv1d_backward(X64, W64, S64, DY64, NULL, &rdx, &rdw, &rdb, &rds));
        double *hx = host_of(rdx), *hw = host_of(rdw), *hb = host_of(rdb), *hs = rds ? host_of(rds) : NULL;
        const double ex = rel_err(dx, hx, n), ew = rel_err(dw, hw, C * K), eb = rel_err(db, hb, C);
        const double eds = hs ? rel_err(ds, hs, ns) : 0;
        CHECK_MSG(ex <= 4 * tol(dt) && ew <= 4 * tol(dt) && eb <= 4 * tol(dt) && eds <= 4 * tol(dt),
                  "conv (%lld,%lld,%lld,K=%lld) %s: dx %.3g dw %.3g db %.3g dstate %.3g", (long long)B, (long long)S,
                  (long long)C, (long long)K, alloy_dtype_name(dt), ex, ew, eb, eds);
        free(hx), free(hw), free(hb), free(hs);
        alloy_array *all64[] = {X64, W64, S64, DY64, rdx, rdw, rdb, rds};
        for (size_t e = 0; e < sizeof all64 / sizeof all64[0]; e++) alloy_array_free(all64[e]);
    }
    for (int64_t e = 0; e < C * K; e++) CHECK(isfinite(dw[e]));
    for (int64_t e = 0; e < C; e++) CHECK(isfinite(db[e]));
    if (state)
        for (int64_t e = 0; e < ns; e++) CHECK(isfinite(ds[e]));
    free(scratch), free(x), free(w), free(bias), free(state), free(dy), free(ry), free(rs);
    free(y), free(so), free(dx), free(dw), free(db), free(ds);
    alloy_array *all[] = {X, W, BI, ST, DY, Y, SO, DX, DW, DB, DS};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
}

static void test_conv(void) {
    /* C = 8, 16, 24, 132: vector chunks for every dtype (16 bytes, 8 of 16-bit data; the rest: scalar
     * accesses); C = 132: 33 chunks of 4 (float32, float16, bfloat16), so a second threadgroup column with one
     * chunk; S = 70, 100: several blocks of 32 timesteps per sequence, a partial last one; (3, 100, 24): two
     * threadgroup rows of dw/db sums; (8500, 1, 8): more blocks than workers, so each worker takes two;
     * S = 300, 1000: several of float16's backward blocks of 128, a partial last one */
    const conv_case cases[10] = {{1, 1, 1, 1},    {2, 33, 5, 3},  {3, 17, 130, 8},  {1, 1000, 3, 4},
                                 {2, 2, 7, 8},    {2, 70, 16, 4}, {3, 100, 24, 2}, {8500, 1, 8, 3},
                                 {2, 45, 132, 4}, {2, 300, 16, 4}};
    for (int ci = 0; ci < 10; ci++)
        for (int di = 0; di < 4; di++)
            for (int v = 0; v < 4; v++) run_conv(cases[ci], DTYPES[di], v & 1, v >> 1);
}

/* Sets each of the n switches vars[k] to vals[k] ("": unset, the default). */
static void set_switches(int n, const char *const *vars, const char *const *vals) {
    for (int k = 0; k < n; k++) {
        if (vals[k][0]) setenv(vars[k], vals[k], 1);
        else unsetenv(vars[k]);
    }
}

/* The forms of each pass forced in turn on every dtype — the backward's windows
 * (ALLOY_NN_CONV_BWD_RING=1: block-wide, moved by renaming, the default up to K = 4; =0: shifted by a copy
 * each step, 16-bit data's from K = 5), the loads in halves, each issued before the previous half's math
 * (ALLOY_NN_CONV_FWD_PIPE=1, float16's default; ALLOY_NN_CONV_BWD_PIPE=1, with the shifted windows), groups
 * of timesteps that do not divide the 32 of a block (ALLOY_NN_CONV_FWD_NB=12: halves of 6;
 * ALLOY_NN_CONV_BWD_NB=5), so that whole groups and a block's checked last group alternate, a grid of
 * few forward threadgroups (ALLOY_NN_CONV_FWD_TGS=132), the block-wide windows' whole groups with a check a
 * step (ALLOY_NN_CONV_BWD_WHOLE=0; straight code is the default) — on
 * test_conv's cases: partial last blocks and halves, kernel sizes 1 to 8, decoding states, several workers a
 * sequence. */
static void test_conv_ring(void) {
    const conv_case cases[7] = {{1, 1, 1, 1},    {2, 33, 5, 3},   {3, 17, 130, 8}, {2, 70, 16, 4},
                                {3, 100, 24, 2}, {8500, 1, 8, 3}, {2, 45, 9, 4}};
    /* RING, FWD_PIPE, BWD_PIPE, FWD_NB, BWD_NB, FWD_TGS, BWD_WHOLE ("" : the default; TGS 132: the forward's
     * workers take more blocks each) */
    static const char *forms[4][7] = {{"0", "0", "0", "", "", "", ""},
                                      {"1", "1", "0", "", "", "", "0"},
                                      {"0", "1", "1", "", "", "", ""},
                                      {"1", "1", "0", "12", "5", "132", "1"}};
    static const char *vars[7] = {"ALLOY_NN_CONV_BWD_RING", "ALLOY_NN_CONV_FWD_PIPE", "ALLOY_NN_CONV_BWD_PIPE",
                                  "ALLOY_NN_CONV_FWD_NB",   "ALLOY_NN_CONV_BWD_NB",   "ALLOY_NN_CONV_FWD_TGS",
                                  "ALLOY_NN_CONV_BWD_WHOLE"};
    for (int form = 0; form < 4; form++) {
        set_switches(7, vars, forms[form]);
        for (int ci = 0; ci < 7; ci++)
            for (int di = 0; di < 4; di++) run_conv(cases[ci], DTYPES[di], ci % 2, di % 2);
    }
    for (int k = 0; k < 7; k++) unsetenv(vars[k]);
}

/* The blocks and grids forced in turn — forward blocks of 16, 32 and 20 timesteps (ALLOY_NN_CONV_FWD_L:
 * float32's default 16, the others' 32; 20: not a multiple of the groups), backward blocks of 16 and 20
 * (ALLOY_NN_CONV_BWD_L), a backward grid of more threadgroups, so more partial rows
 * (ALLOY_NN_CONV_BWD_TGS=528), and the streaming cache hint (ALLOY_NN_CONV_STREAM=0|1|2, the backward's
 * default 1: on CUDA only, its inline PTX compiled by the NVRTC twin) — on two cases (partial last blocks, several workers a sequence,
 * K 4 and 2, a decoding state) in float32 and bfloat16: each form is a kernel of its own to compile. */
static void test_conv_blocks(void) {
    const conv_case cases[2] = {{2, 70, 16, 4}, {3, 100, 24, 2}};
    /* FWD_L, BWD_L, BWD_TGS, STREAM */
    static const char *forms[4][4] = {{"16", "16", "", ""}, {"32", "20", "528", "2"}, {"20", "", "", "1"},
                                      {"", "", "", "0"}};
    static const char *vars[4] = {"ALLOY_NN_CONV_FWD_L", "ALLOY_NN_CONV_BWD_L", "ALLOY_NN_CONV_BWD_TGS",
                                  "ALLOY_NN_CONV_STREAM"};
    for (int form = 0; form < 4; form++) {
        set_switches(4, vars, forms[form]);
        for (int ci = 0; ci < 2; ci++)
            for (int di = 0; di < 2; di++) run_conv(cases[ci], DTYPES[di == 0 ? 1 : 3], ci % 2, 1);
    }
    for (int k = 0; k < 4; k++) unsetenv(vars[k]);
}

/* A grid of channel counts (scalar and vector chunks, a partial last chunk, several threadgroup
 * columns), kernel sizes 1 to 8 and sequence lengths around the 32-timestep blocks, with the dtypes,
 * bias and decoding state in turn. */
static void test_conv_grid(void) {
    static const int64_t Cs[] = {1, 3, 8, 17, 64, 133, 1000}, Ks[] = {1, 2, 3, 5, 8}, Ss[] = {1, 5, 32, 33, 100};
    int x = 0;
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 5; b++, x++) {
            const conv_case c = {1 + x % 3, Ss[(a + 2 * b) % 5], Cs[a], Ks[b]};
            run_conv(c, DTYPES[x % 4], x % 2 == 0, x % 3 == 1);
        }
}

/* Decoding token by token with the state updated in place equals the whole sequence. */
static void test_conv_decoding(void) {
    const int64_t B = 2, S = 9, C = 37, K = 4;
    double *x = random_vec(ALLOY_FLOAT32, B * S * C, -2, 2), *w = random_vec(ALLOY_FLOAT32, C * K, -1, 1);
    double *bias = random_vec(ALLOY_FLOAT32, C, -1, 1), *ry = malloc(sizeof(double) * (size_t)(B * S * C));
    conv_ref(x, w, bias, NULL, B, S, C, K, ry);
    const int64_t ws[2] = {C, K}, ss[3] = {B, K - 1, C}, xs1[3] = {B, 1, C};
    double *zeros = calloc((size_t)(B * (K - 1) * C), sizeof(double)), *xt = malloc(sizeof(double) * (size_t)(B * C));
    alloy_array *W = dev_array(ALLOY_FLOAT32, 2, ws, w), *BI = dev_array(ALLOY_FLOAT32, 1, &C, bias);
    alloy_array *ST = dev_array(ALLOY_FLOAT32, 3, ss, zeros);
    double worst = 0;
    for (int64_t t = 0; t < S; t++) {
        for (int64_t b = 0; b < B; b++) memcpy(xt + b * C, x + (b * S + t) * C, sizeof(double) * (size_t)C);
        alloy_array *X = dev_array(ALLOY_FLOAT32, 3, xs1, xt), *Y = NULL, *so = ST;
        CHECK_OK(alloy_nn_causal_conv1d(X, W, BI, ST, NULL, &Y, &so));
        CHECK(so == ST);
        double *y = Y ? host_of(Y) : NULL;
        for (int64_t b = 0; b < B && y; b++)
            for (int64_t c = 0; c < C; c++) worst = fmax(worst, fabs(y[b * C + c] - ry[(b * S + t) * C + c]));
        free(y);
        alloy_array_free(X), alloy_array_free(Y);
    }
    CHECK_MSG(worst <= 1e-5, "decoding vs whole sequence: %.3g", worst);
    alloy_array_free(W), alloy_array_free(BI), alloy_array_free(ST);
    free(x), free(w), free(bias), free(ry), free(zeros), free(xt);
}

/* ALLOY_OPS_OVERLAP=0: ordinary launches (by default every launch overlaps the kernel before it, column_sum
 * the backward that writes its partial sums — every other test here): conv1d with several threadgroup rows
 * of partial sums, every dtype. */
static void test_conv_ordinary_launches(void) {
    setenv("ALLOY_OPS_OVERLAP", "0", 1);
    const conv_case cc[2] = {{3, 100, 24, 2}, {2, 45, 132, 4}};
    for (int ci = 0; ci < 2; ci++)
        for (int di = 0; di < 4; di++) run_conv(cc[ci], DTYPES[di], 1, ci);
    unsetenv("ALLOY_OPS_OVERLAP");
}

int main(void) {
    harness_seed();
    RUN(test_conv);
    RUN(test_conv_grid);
    RUN_VARIANT(test_conv_ring);
    RUN_VARIANT(test_conv_blocks);
    RUN(test_conv_decoding);
    RUN_VARIANT(test_conv_ordinary_launches);
    return harness_finish();
}
