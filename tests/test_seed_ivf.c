/* test_seed_ivf.c — examples/ivf_topk_l2.metal, the batched list top-k by
 * squared L2 distance: one threadgroup per query, per-thread top-K, parallel
 * merge by rank. Checked against a double-precision brute force at awkward
 * sizes (fewer rows than K, empty list, tpb not a multiple of 32, K = 32 with
 * the pool exactly full), with every output slot pre-filled with a sentinel;
 * ties must come out by increasing row; and a launch whose candidate pool
 * would overflow must be reported in the output (NaN / -2), not be silent. */
#include "seed_refs.h"

#define IVF_POOL 1024 /* the kernel's threadgroup candidate pool */
#define ID_SENTINEL (-7)

typedef struct ivf_case {
    int64_t b, m, d;
    int K;
    uint32_t tpb;
} ivf_case;

/* Runs the kernel; returns 1 and fills vals/ids (host, b*K each) on success.
 * The launch is checked here, loudly: tpb*K must fit the pool. */
static int run_ivf(alloy_device *dev, seed_kernel *sk, const ivf_case *c, const float *Qm,
                   const float *X, const int32_t *ids, float *vals, int32_t *out_ids,
                   int allow_overflow) {
    if (!allow_overflow && c->tpb * (uint32_t)c->K > IVF_POOL) {
        CHECK_MSG(0, "test launch error: tpb*K = %u exceeds the kernel's pool of %d",
                  c->tpb * (uint32_t)c->K, IVF_POOL);
        return 0;
    }
    int64_t qs[2] = {c->b, c->d}, xs[2] = {c->m, c->d}, is[1] = {c->m}, os[2] = {c->b, c->K};
    alloy_array *ins[3] = {seed_array(dev, ALLOY_FLOAT32, 2, qs, Qm),
                           seed_array(dev, ALLOY_FLOAT32, 2, xs, X),
                           seed_array(dev, ALLOY_INT32, 1, is, ids)};
    alloy_array *pv = seed_filled(dev, ALLOY_FLOAT32, 2, os, NAN);
    alloy_array *pi = seed_filled(dev, ALLOY_INT32, 2, os, ID_SENTINEL);
    alloy_array *outs[2] = {NULL, NULL};
    alloy_launch *l = NULL;
    int ok = 0;
    CHECK_OK(alloy_launch_new(&l));
    if (pv && pi) {
        CHECK_OK(alloy_launch_add_output_array(l, pv));
        CHECK_OK(alloy_launch_add_output_array(l, pi));
    }
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)c->b * c->tpb, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, c->tpb, 1, 1));
    CHECK_OK(alloy_launch_add_template_int(l, "K", c->K));
    alloy_status st = alloy_kernel_apply(sk->kernel, 3, ins, l, NULL, outs);
    CHECK_OK(st);
    if (st == ALLOY_OK) {
        float *v = seed_host(outs[0]);
        int32_t *i = seed_host(outs[1]);
        if (v && i) {
            memcpy(vals, v, sizeof(float) * (size_t)(c->b * c->K));
            memcpy(out_ids, i, sizeof(int32_t) * (size_t)(c->b * c->K));
            ok = 1;
        }
        free(v);
        free(i);
    }
    alloy_array_free(outs[0]);
    alloy_array_free(outs[1]);
    alloy_array_free(pv);
    alloy_array_free(pi);
    for (int j = 0; j < 3; j++) alloy_array_free(ins[j]);
    alloy_launch_free(l);
    return ok;
}

/* ids[r] = 1000 + 3r (so ids are not rows); row of an id: (id-1000)/3. */
static int32_t id_of(int64_t r) { return (int32_t)(1000 + 3 * r); }

/* Verification (tests/seed_refs.h, seed_ivf_verify): every slot written,
 * the +inf / -1 tail, ascending values, valid distinct ids, and values that
 * match both the named row's distance and the brute-force reference within
 * 4*(d+4)*u relative. Problems count as failures there. */
static void verify(const ivf_case *c, const float *Qm, const float *X, const int32_t *ids,
                   const float *vals, const int32_t *out_ids) {
    (void)seed_ivf_verify(Qm, X, ids, c->b, c->m, c->d, c->K, vals, out_ids, ID_SENTINEL, NULL);
}

static void run_case(alloy_device *dev, seed_kernel *sk, ivf_case c) {
    float *Qm = malloc(sizeof(float) * (size_t)(c.b * c.d + 1));
    float *X = malloc(sizeof(float) * (size_t)(c.m * c.d + 1));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(c.m + 1));
    float *vals = malloc(sizeof(float) * (size_t)(c.b * c.K));
    int32_t *oid = malloc(sizeof(int32_t) * (size_t)(c.b * c.K));
    harness_fill_f32(Qm, (size_t)(c.b * c.d), -1, 1);
    harness_fill_f32(X, (size_t)(c.m * c.d), -1, 1);
    for (int64_t r = 0; r < c.m; r++) ids[r] = id_of(r);
    if (run_ivf(dev, sk, &c, Qm, X, ids, vals, oid, 0)) {
        int before = harness_current_failed;
        verify(&c, Qm, X, ids, vals, oid);
        if (harness_current_failed != before)
            fprintf(stderr, "    in case b=%lld m=%lld d=%lld K=%d tpb=%u\n", (long long)c.b,
                    (long long)c.m, (long long)c.d, c.K, c.tpb);
    }
    free(Qm);
    free(X);
    free(ids);
    free(vals);
    free(oid);
}

static void test_ivf_cases(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("ivf_topk_l2.metal", &sk)) return;
    CHECK(alloy_kernel_file_n_outputs(sk.file) == 2);
    static const ivf_case cases[] = {
        {1, 1, 1, 1, 32},     /* the smallest */
        {2, 5, 3, 8, 32},     /* fewer rows than K: +inf / -1 tail */
        {3, 7, 4, 8, 1},      /* a single thread per query */
        {4, 1000, 33, 8, 64}, /* a real list */
        {3, 200, 32, 32, 32}, /* K = 32, pool exactly full (32*32 = 1024) */
        {5, 33, 7, 1, 256},   /* K = 1 */
        {2, 1000, 16, 17, 60},/* tpb not a multiple of 32, odd K */
        {33, 100, 5, 4, 96},  /* many queries */
        {1, 40, 2, 32, 32},   /* m between K and tpb*K */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(dev, &sk, cases[i]);
    seed_kernel_free(&sk);
}

/* An empty list (m = 0): every slot +inf / -1. */
static void test_ivf_empty_list(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("ivf_topk_l2.metal", &sk)) return;
    run_case(dev, &sk, (ivf_case){2, 0, 4, 8, 32});
    seed_kernel_free(&sk);
}

/* Identical rows give exactly equal distances: ties must come out by
 * increasing row (so by increasing id here), whichever threads hold them. */
static void test_ivf_ties(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("ivf_topk_l2.metal", &sk)) return;
    ivf_case c = {2, 300, 6, 16, 64};
    float *Qm = malloc(sizeof(float) * (size_t)(c.b * c.d)), *X = malloc(sizeof(float) * (size_t)(c.m * c.d));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)c.m);
    float vals[2 * 16];
    int32_t oid[2 * 16];
    harness_fill_f32(Qm, (size_t)(c.b * c.d), -1, 1);
    /* Three distinct rows repeated 100 times each, interleaved. */
    float base[3][6];
    for (int r = 0; r < 3; r++) harness_fill_f32(base[r], 6, -1, 1);
    for (int64_t r = 0; r < c.m; r++) {
        memcpy(X + r * c.d, base[r % 3], sizeof(float) * 6);
        ids[r] = id_of(r);
    }
    if (run_ivf(dev, &sk, &c, Qm, X, ids, vals, oid, 0)) {
        verify(&c, Qm, X, ids, vals, oid);
        for (int64_t q = 0; q < c.b; q++)
            for (int s = 1; s < c.K; s++) {
                size_t o = (size_t)(q * c.K + s);
                if (vals[o] == vals[o - 1])
                    CHECK_MSG(oid[o] > oid[o - 1], "query %lld: tie at slots %d,%d has ids %d,%d",
                              (long long)q, s - 1, s, oid[o - 1], oid[o]);
            }
    }
    free(Qm);
    free(X);
    free(ids);
    seed_kernel_free(&sk);
}

/* tpb*K > pool: the kernel cannot merge, and must say so in every slot. */
static void test_ivf_pool_overflow_is_loud(void) {
    alloy_device *dev = harness_device();
    seed_kernel sk;
    if (!seed_kernel_load("ivf_topk_l2.metal", &sk)) return;
    ivf_case c = {3, 50, 4, 32, 64}; /* 64*32 = 2048 > 1024 */
    float Qm[12], X[200], vals[3 * 32];
    int32_t ids[50], oid[3 * 32];
    harness_fill_f32(Qm, 12, -1, 1);
    harness_fill_f32(X, 200, -1, 1);
    for (int r = 0; r < 50; r++) ids[r] = id_of(r);
    if (run_ivf(dev, &sk, &c, Qm, X, ids, vals, oid, 1))
        for (int s = 0; s < 3 * 32; s++)
            if (!(isnan(vals[s]) && oid[s] == -2)) {
                CHECK_MSG(0, "slot %d: want NaN/-2 for an overflowing launch, got %g/%d", s, vals[s],
                          oid[s]);
                break;
            }
    seed_kernel_free(&sk);
}

int main(void) {
    harness_seed();
    RUN(test_ivf_cases);
    RUN(test_ivf_empty_list);
    RUN(test_ivf_ties);
    RUN(test_ivf_pool_overflow_is_loud);
    return harness_finish();
}
