/* test_seed_mlstm.c — examples/mlstm_step.metal, one recurrent mLSTM step,
 * against the NX-AI native step equations in double precision: B=2, NH=3,
 * DHQK=33, DHHV=40 (and 1x1x1x1), gates with very negative and very positive
 * forget pre-activations, several threadgroup sizes (one and two dv passes),
 * all four outputs NaN-filled first; a 3-step recurrence from the zero state
 * carried on the device; and the same step in place (outputs aliasing the
 * state inputs), which the race-free ordering of the kernel allows. */
#include "seed_refs.h"

typedef struct mlstm_data {
    int64_t B, NH, DK, DV;
    float *q, *k, *v, *i, *f, *C, *n, *m;
} mlstm_data;

static void data_alloc(mlstm_data *d, int64_t B, int64_t NH, int64_t DK, int64_t DV) {
    d->B = B; d->NH = NH; d->DK = DK; d->DV = DV;
    size_t bh = (size_t)(B * NH);
    d->q = malloc(sizeof(float) * bh * (size_t)DK);
    d->k = malloc(sizeof(float) * bh * (size_t)DK);
    d->v = malloc(sizeof(float) * bh * (size_t)DV);
    d->i = malloc(sizeof(float) * bh);
    d->f = malloc(sizeof(float) * bh);
    d->C = malloc(sizeof(float) * bh * (size_t)(DK * DV));
    d->n = malloc(sizeof(float) * bh * (size_t)DK);
    d->m = malloc(sizeof(float) * bh);
}

static void data_free(mlstm_data *d) {
    free(d->q); free(d->k); free(d->v); free(d->i); free(d->f); free(d->C); free(d->n); free(d->m);
}

/* Random inputs and state; f cycles through extreme values. */
static void data_random(mlstm_data *d) {
    size_t bh = (size_t)(d->B * d->NH);
    static const float f_special[] = {-1000.0f, -100.0f, -20.0f, 0.0f, 3.0f, 40.0f};
    harness_fill_f32(d->q, bh * (size_t)d->DK, -1, 1);
    harness_fill_f32(d->k, bh * (size_t)d->DK, -1, 1);
    harness_fill_f32(d->v, bh * (size_t)d->DV, -1, 1);
    harness_fill_f32(d->i, bh, -3, 3);
    harness_fill_f32(d->C, bh * (size_t)(d->DK * d->DV), -1, 1);
    harness_fill_f32(d->n, bh * (size_t)d->DK, -1, 1);
    harness_fill_f32(d->m, bh, -2, 2);
    for (size_t j = 0; j < bh; j++) d->f[j] = f_special[j % 6] + (float)harness_uniform(-0.5, 0.5);
    if (bh > 1) d->i[bh - 1] = -60.0f; /* with f = -1000 nearby: m_new = i, exp(-m_new) huge */
}

/* Tolerances (fp32 kernel vs the double reference, inputs O(1)):
 * - m_out: f_log (exact for f <= -20: exp(f) vanishes next to 1; a few ulp
 *   otherwise) plus m, rounded once: within a few ulp of |m_new| plus a few
 *   ulp of |f_log|, |m| <= 3: rtol 5u and atol 1e-6.
 * - gates: exp of an argument with absolute error ~2u*(|f_log|+|m|) — this
 *   matters only where the result is not already ~0 (|f| <= 40 here), giving
 *   <= ~1e-5 relative in f_act / i_act.
 * - n_out, C_out: one or two fma on top of that: rtol 2e-5, atol 1e-6.
 * - h: DHQK-term dot products (<= 35u*sum|terms|) divided by a denominator
 *   that is >= exp(-m_new) >= e^-3.5 here or |q.n| computed the same way:
 *   rtol 1e-4 + atol 1e-5 covers DHQK=33 sums with cancellation margins. */
static void check_step(const mlstm_data *d, const float *h, const float *C1, const float *n1,
                       const float *m1, const char *what) {
    size_t bh = (size_t)(d->B * d->NH);
    double *rh = malloc(sizeof(double) * bh * (size_t)d->DV),
           *rC = malloc(sizeof(double) * bh * (size_t)(d->DK * d->DV)),
           *rn = malloc(sizeof(double) * bh * (size_t)d->DK), *rm = malloc(sizeof(double) * bh);
    ref_mlstm_step(d->q, d->k, d->v, d->i, d->f, d->C, d->n, d->m, d->B, d->NH, d->DK, d->DV, rh,
                   rC, rn, rm);
    char label[128];
    snprintf(label, sizeof label, "%s h", what);
    CHECK(seed_unwritten(h, rh, bh * (size_t)d->DV) == 0);
    seed_check_tol(label, h, rh, bh * (size_t)d->DV, 1e-5, 1e-4);
    snprintf(label, sizeof label, "%s C_out", what);
    CHECK(seed_unwritten(C1, rC, bh * (size_t)(d->DK * d->DV)) == 0);
    seed_check_tol(label, C1, rC, bh * (size_t)(d->DK * d->DV), 1e-6, 2e-5);
    snprintf(label, sizeof label, "%s n_out", what);
    CHECK(seed_unwritten(n1, rn, bh * (size_t)d->DK) == 0);
    seed_check_tol(label, n1, rn, bh * (size_t)d->DK, 1e-6, 2e-5);
    snprintf(label, sizeof label, "%s m_out", what);
    CHECK(seed_unwritten(m1, rm, bh) == 0);
    seed_check_tol(label, m1, rm, bh, 1e-6, 5 * SEED_U32);
    free(rh); free(rC); free(rn); free(rm);
}

/* Builds the 8 input arrays of a step. */
static void make_inputs(alloy_device *dev, const mlstm_data *d, alloy_array **ins) {
    int64_t sq[3] = {d->B, d->NH, d->DK}, sv[3] = {d->B, d->NH, d->DV}, sg[2] = {d->B, d->NH},
            sc[4] = {d->B, d->NH, d->DK, d->DV};
    ins[0] = seed_array(dev, ALLOY_FLOAT32, 3, sq, d->q);
    ins[1] = seed_array(dev, ALLOY_FLOAT32, 3, sq, d->k);
    ins[2] = seed_array(dev, ALLOY_FLOAT32, 3, sv, d->v);
    ins[3] = seed_array(dev, ALLOY_FLOAT32, 2, sg, d->i);
    ins[4] = seed_array(dev, ALLOY_FLOAT32, 2, sg, d->f);
    ins[5] = seed_array(dev, ALLOY_FLOAT32, 4, sc, d->C);
    ins[6] = seed_array(dev, ALLOY_FLOAT32, 3, sq, d->n);
    ins[7] = seed_array(dev, ALLOY_FLOAT32, 2, sg, d->m);
}

/* Launch: grid (NH*tg, B) threads, one threadgroup of tg per (batch, head);
 * outputs allocated by alloy and NaN-filled (init_value). */
static alloy_launch *make_launch(const mlstm_data *d, uint32_t tg) {
    int64_t sv[3] = {d->B, d->NH, d->DV}, sq[3] = {d->B, d->NH, d->DK}, sg[2] = {d->B, d->NH},
            sc[4] = {d->B, d->NH, d->DK, d->DV};
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!l) return NULL;
    CHECK_OK(alloy_launch_add_output(l, 3, sv, ALLOY_FLOAT32)); /* h */
    CHECK_OK(alloy_launch_add_output(l, 4, sc, ALLOY_FLOAT32)); /* C_out */
    CHECK_OK(alloy_launch_add_output(l, 3, sq, ALLOY_FLOAT32)); /* n_out */
    CHECK_OK(alloy_launch_add_output(l, 2, sg, ALLOY_FLOAT32)); /* m_out */
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)d->NH * tg, (uint32_t)d->B, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, tg, 1, 1));
    return l;
}

static void run_step(alloy_device *dev, seed_kernel *sk, int64_t B, int64_t NH, int64_t DK,
                     int64_t DV, uint32_t tg) {
    mlstm_data d;
    data_alloc(&d, B, NH, DK, DV);
    data_random(&d);
    alloy_array *ins[8], *outs[4] = {NULL, NULL, NULL, NULL};
    make_inputs(dev, &d, ins);
    alloy_launch *l = make_launch(&d, tg);
    alloy_status st = alloy_kernel_apply(sk->kernel, 8, ins, l, NULL, outs);
    CHECK_OK(st);
    if (st == ALLOY_OK) {
        float *h = seed_host(outs[0]), *C1 = seed_host(outs[1]), *n1 = seed_host(outs[2]),
              *m1 = seed_host(outs[3]);
        char what[96];
        snprintf(what, sizeof what, "mlstm B=%lld NH=%lld DK=%lld DV=%lld tg=%u", (long long)B,
                 (long long)NH, (long long)DK, (long long)DV, tg);
        if (h && C1 && n1 && m1) check_step(&d, h, C1, n1, m1, what);
        free(h); free(C1); free(n1); free(m1);
    }
    for (int j = 0; j < 4; j++) alloy_array_free(outs[j]);
    for (int j = 0; j < 8; j++) alloy_array_free(ins[j]);
    alloy_launch_free(l);
    data_free(&d);
}

static void test_step(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("mlstm_step.metal", &sk)) return;
    run_step(dev, &sk, 2, 3, 33, 40, 64);  /* one dv pass, two SIMD groups */
    run_step(dev, &sk, 2, 3, 33, 40, 32);  /* two dv passes, two DHQK passes */
    run_step(dev, &sk, 2, 3, 33, 40, 256); /* most threads idle in the dv loop */
    run_step(dev, &sk, 1, 1, 1, 1, 32);
    run_step(dev, &sk, 3, 2, 64, 17, 96);
    seed_kernel_free(&sk);
}

/* Three steps from the zero state (m = 0), the state carried on the device
 * (the step's outputs are the next step's inputs); each step is checked
 * against the reference applied to the kernel's previous fp32 state. */
static void test_recurrence(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("mlstm_step.metal", &sk)) return;
    mlstm_data d;
    data_alloc(&d, 2, 3, 33, 40);
    size_t bh = 6;
    memset(d.C, 0, sizeof(float) * bh * 33 * 40);
    memset(d.n, 0, sizeof(float) * bh * 33);
    memset(d.m, 0, sizeof(float) * bh);
    alloy_array *state[3] = {NULL, NULL, NULL}; /* C, n, m on the device */
    for (int step = 0; step < 3; step++) {
        harness_fill_f32(d.q, bh * 33, -1, 1);
        harness_fill_f32(d.k, bh * 33, -1, 1);
        harness_fill_f32(d.v, bh * 40, -1, 1);
        harness_fill_f32(d.i, bh, -3, 3);
        harness_fill_f32(d.f, bh, -4, 6);
        alloy_array *ins[8], *outs[4] = {NULL, NULL, NULL, NULL};
        make_inputs(dev, &d, ins);
        for (int j = 0; j < 3; j++)
            if (state[j]) { /* use the device state of the previous step */
                alloy_array_free(ins[5 + j]);
                ins[5 + j] = state[j];
                state[j] = NULL;
            }
        alloy_launch *l = make_launch(&d, 64);
        alloy_status st = alloy_kernel_apply(sk.kernel, 8, ins, l, NULL, outs);
        CHECK_OK(st);
        if (st == ALLOY_OK) {
            float *h = seed_host(outs[0]), *C1 = seed_host(outs[1]), *n1 = seed_host(outs[2]),
                  *m1 = seed_host(outs[3]);
            char what[64];
            snprintf(what, sizeof what, "recurrence step %d", step);
            if (h && C1 && n1 && m1) {
                check_step(&d, h, C1, n1, m1, what);
                memcpy(d.C, C1, sizeof(float) * bh * 33 * 40);
                memcpy(d.n, n1, sizeof(float) * bh * 33);
                memcpy(d.m, m1, sizeof(float) * bh);
            }
            free(h); free(C1); free(n1); free(m1);
            for (int j = 0; j < 3; j++) state[j] = alloy_array_retain(outs[1 + j]);
        }
        for (int j = 0; j < 4; j++) alloy_array_free(outs[j]);
        for (int j = 0; j < 8; j++) alloy_array_free(ins[j]);
        alloy_launch_free(l);
        if (st != ALLOY_OK) break;
    }
    for (int j = 0; j < 3; j++) alloy_array_free(state[j]);
    data_free(&d);
    seed_kernel_free(&sk);
}

/* In place: C_out, n_out, m_out are the very arrays passed as C, n, m. The
 * kernel reads m before the barrier and writes it after; each element of C and
 * n is read and then written by the same thread — so the result must equal the
 * out-of-place step. If the library refuses aliased outputs, that is a skip. */
static void test_in_place(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("mlstm_step.metal", &sk)) return;
    mlstm_data d;
    data_alloc(&d, 2, 3, 33, 40);
    data_random(&d);
    alloy_array *ins[8], *outs[4] = {NULL, NULL, NULL, NULL};
    make_inputs(dev, &d, ins);
    int64_t sv[3] = {2, 3, 40};
    alloy_array *h = seed_filled(dev, ALLOY_FLOAT32, 3, sv, NAN);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, h));
    CHECK_OK(alloy_launch_add_output_array(l, ins[5]));
    CHECK_OK(alloy_launch_add_output_array(l, ins[6]));
    CHECK_OK(alloy_launch_add_output_array(l, ins[7]));
    CHECK_OK(alloy_launch_set_grid(l, 3 * 32, 2, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    alloy_status st = alloy_kernel_apply(sk.kernel, 8, ins, l, NULL, outs);
    if (st == ALLOY_ERROR_INVALID_ARGUMENT || st == ALLOY_ERROR_UNSUPPORTED) {
        SKIP("the library does not allow outputs that alias inputs");
    } else {
        CHECK_OK(st);
        if (st == ALLOY_OK) {
            float *hh = seed_host(outs[0]), *C1 = seed_host(ins[5]), *n1 = seed_host(ins[6]),
                  *m1 = seed_host(ins[7]);
            if (hh && C1 && n1 && m1) check_step(&d, hh, C1, n1, m1, "in place");
            free(hh); free(C1); free(n1); free(m1);
        }
    }
    for (int j = 0; j < 4; j++) alloy_array_free(outs[j]);
    for (int j = 0; j < 8; j++) alloy_array_free(ins[j]);
    alloy_array_free(h);
    alloy_launch_free(l);
    data_free(&d);
    seed_kernel_free(&sk);
}

int main(void) {
    harness_seed();
    RUN(test_step);
    RUN(test_recurrence);
    RUN(test_in_place);
    return harness_finish();
}
