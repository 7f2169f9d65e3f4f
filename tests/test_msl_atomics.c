/* test_msl_atomics.c — spec §3 atomics under contention: atomic<int>,
 * atomic<uint>, atomic<float> (and the atomic_int / atomic_uint /
 * atomic_float names) in device memory (outputs with atomic_outputs and an
 * init value) and in threadgroup memory: fetch_add/sub/and/or/xor/min/max,
 * exchange, compare_exchange_weak loops, load/store; a histogram of 100000
 * values into 37 bins; float sums within a tolerance; a 2-D grid. */
#include "kernel_util.h"

/* Runs a kernel with atomic outputs (all uint32/int32/float32 as given). */
static alloy_status run_atomic(const char *name, const char *body, int n_in,
                               const char **in_names, alloy_array **in, int n_out,
                               const char **out_names, const alloy_dtype *dts, const int64_t *ns,
                               void **hosts, uint32_t gx, uint32_t gy, uint32_t tx, uint32_t ty,
                               double init) {
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.body = body;
    s.n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        s.in_names[i] = in_names[i];
        s.in[i] = in[i];
    }
    s.n_out = n_out;
    for (int j = 0; j < n_out; j++) {
        s.out_names[j] = out_names[j];
        s.out_dtype[j] = dts[j];
        s.out_n[j] = ns[j];
        s.out_host[j] = hosts[j];
    }
    s.grid[0] = gx;
    s.grid[1] = gy;
    s.tg[0] = tx;
    s.tg[1] = ty;
    s.atomic_outputs = 1;
    s.has_init = 1;
    s.init = init;
    alloy_status st = ku_run(&s);
    ku_free_inputs(&s);
    return st;
}

/* Histogram of 100000 values into 37 bins, in device memory and through a
 * per-group threadgroup histogram; both must be exact. */
static void test_histogram(void) {
    const int64_t n = 100000;
    uint32_t *v = malloc(n * 4);
    for (int64_t i = 0; i < n; i++) v[i] = (uint32_t)(harness_rand_u64() % 1000003);
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint l = thread_index_in_threadgroup;\n"
        "uint bin = v[i] % 37u;\n"
        "atomic_fetch_add_explicit(&hist[bin], 1u, memory_order_relaxed);\n"
        "threadgroup atomic<uint> local[37];\n"
        "if (l < 37) atomic_store_explicit(&local[l], 0u, memory_order_relaxed);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "atomic_fetch_add_explicit(&local[bin], 1u, memory_order_relaxed);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "if (l < 37) {\n"
        "  uint c = atomic_load_explicit(&local[l], memory_order_relaxed);\n"
        "  device atomic_uint* h2 = hist2;\n"
        "  atomic_fetch_add_explicit(&h2[l], c, memory_order_relaxed);\n"
        "}\n";
    const char *in_names[] = {"v"};
    alloy_array *in[] = {ku_array(ALLOY_UINT32, n, v)};
    const char *out_names[] = {"hist", "hist2"};
    alloy_dtype dts[] = {ALLOY_UINT32, ALLOY_UINT32};
    int64_t ns[] = {37, 37};
    uint32_t h[37], h2[37], ref[37] = {0};
    void *hosts[] = {h, h2};
    CHECK_OK(run_atomic("histogram", body, 1, in_names, in, 2, out_names, dts, ns, hosts,
                        (uint32_t)n, 1, 256, 1, 0));
    for (int64_t i = 0; i < n; i++) ref[v[i] % 37]++;
    CHECK(ku_cmp_u32("device histogram", h, ref, 37) == 0);
    CHECK(ku_cmp_u32("threadgroup histogram", h2, ref, 37) == 0);
    free(v);
}

/* All integer fetch ops on atomic<int> and atomic<uint> in device memory,
 * with every thread hitting the same few addresses. */
static void test_int_ops_device(void) {
    const int64_t n = 5000;
    int32_t *a = malloc(n * 4);
    for (int64_t i = 0; i < n; i++) a[i] = (int32_t)(harness_rand_u64() % 2000001) - 1000000;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "int x = a[i];\n"
        "uint ux = uint(x);\n"
        "atomic_fetch_add_explicit(&r[0], x, memory_order_relaxed);\n"
        "atomic_fetch_sub_explicit(&r[1], x, memory_order_relaxed);\n"
        "atomic_fetch_or_explicit(&r[2], 1 << (i % 31), memory_order_relaxed);\n"
        "atomic_fetch_xor_explicit(&r[3], x, memory_order_relaxed);\n"
        "atomic_fetch_max_explicit(&r[4], x, memory_order_relaxed);\n"
        "atomic_fetch_min_explicit(&r[5], x, memory_order_relaxed);\n"
        "atomic_fetch_and_explicit(&r[6], ~(1 << (i % 29)), memory_order_relaxed);\n"
        "atomic_fetch_max_explicit(&u[0], ux, memory_order_relaxed);\n"
        "atomic_fetch_min_explicit(&u[1], ux, memory_order_relaxed);\n"
        "atomic_fetch_add_explicit(&u[2], ux, memory_order_relaxed);\n"
        "atomic_fetch_and_explicit(&u[3], ux | 0x80000000u, memory_order_relaxed);\n"
        "atomic_fetch_xor_explicit(&u[4], ux, memory_order_relaxed);\n";
    const char *in_names[] = {"a"};
    alloy_array *in[] = {ku_array(ALLOY_INT32, n, a)};
    const char *out_names[] = {"r", "u"};
    alloy_dtype dts[] = {ALLOY_INT32, ALLOY_UINT32};
    int64_t ns[] = {7, 5};
    int32_t r[7];
    uint32_t u[5];
    void *hosts[] = {r, u};
    /* init 0: and/min from 0 stay 0 (r[6], u[1], u[3]); the second launch
     * starts from all ones. */
    CHECK_OK(run_atomic("atomic_int_ops", body, 1, in_names, in, 2, out_names, dts, ns, hosts,
                        (uint32_t)n, 1, 128, 1, 0));
    int64_t sum = 0;
    int32_t xr = 0, mx = 0, mn = 0;
    uint32_t umax = 0, uxr = 0, usum = 0, orv = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += a[i];
        xr ^= a[i];
        if (a[i] > mx) mx = a[i];
        if (a[i] < mn) mn = a[i];
        uint32_t ux = (uint32_t)a[i];
        if (ux > umax) umax = ux;
        uxr ^= ux;
        usum += ux;
        orv |= 1u << (i % 31);
    }
    int32_t rr[7] = {(int32_t)(uint32_t)sum, (int32_t)(uint32_t)-sum, (int32_t)orv, xr, mx, mn, 0};
    uint32_t ru[5] = {umax, 0, usum, 0, uxr};
    CHECK(ku_cmp_i32("int ops", r, rr, 7) == 0);
    CHECK(ku_cmp_u32("uint ops", u, ru, 5) == 0);

    /* Second launch from all ones (init -1): and / min. */
    const char *body2 =
        "uint i = thread_position_in_grid.x;\n"
        "int x = a[i];\n"
        "atomic_fetch_and_explicit(&r[0], ~(1 << (i % 29)), memory_order_relaxed);\n"
        "atomic_fetch_min_explicit(&r[1], x, memory_order_relaxed);\n";
    alloy_array *in2[] = {ku_array(ALLOY_INT32, n, a)};
    int64_t ns2[] = {2};
    int32_t r2[2] = {0};
    void *hosts2[] = {r2};
    CHECK_OK(run_atomic("atomic_int_ops_and_min", body2, 1, in_names, in2, 1, out_names, dts,
                        ns2, hosts2, (uint32_t)n, 1, 128, 1, -1));
    int32_t andv = -1, imin = -1;
    for (int64_t i = 0; i < n; i++) {
        andv &= ~(1 << (i % 29));
        if (a[i] < imin) imin = a[i];
    }
    int32_t rr2[2] = {andv, imin};
    CHECK(ku_cmp_i32("int and/min from -1", r2, rr2, 2) == 0);
    free(a);
}

/* fetch_add return values are unique (a ticket counter), exchange hands every
 * value on exactly once, a compare_exchange_weak loop builds an exact sum,
 * store then load round-trips. */
static void test_tickets_and_exchange(void) {
    const int64_t n = 4099;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint ticket = atomic_fetch_add_explicit(&ctr[0], 1u, memory_order_relaxed);\n"
        "atomic_store_explicit(&slots[ticket], i + 1u, memory_order_relaxed);\n"
        "uint prev = atomic_exchange_explicit(&ctr[1], i + 1u, memory_order_relaxed);\n"
        "atomic_store_explicit(&prevs[i], prev, memory_order_relaxed);\n"
        "uint expected = atomic_load_explicit(&ctr[2], memory_order_relaxed);\n"
        "while (!atomic_compare_exchange_weak_explicit(&ctr[2], &expected, expected + i % 7u,\n"
        "                                              memory_order_relaxed, memory_order_relaxed)) {}\n"
        "atomic_store_explicit(&ctr[3], 5u, memory_order_relaxed);\n"
        "uint back = atomic_load_explicit(&ctr[3], memory_order_relaxed);\n"
        "if (back == 5u) atomic_fetch_add_explicit(&ctr[4], 1u, memory_order_relaxed);\n";
    float dummy = 0;
    const char *in_names[] = {"d"};
    alloy_array *in[] = {ku_array(ALLOY_FLOAT32, 1, &dummy)};
    const char *out_names[] = {"ctr", "slots", "prevs"};
    alloy_dtype dts[] = {ALLOY_UINT32, ALLOY_UINT32, ALLOY_UINT32};
    int64_t ns[] = {5, n, n};
    uint32_t ctr[5], *slots = malloc(n * 4), *prevs = malloc(n * 4);
    void *hosts[] = {ctr, slots, prevs};
    CHECK_OK(run_atomic("atomic_tickets", body, 1, in_names, in, 3, out_names, dts, ns, hosts,
                        (uint32_t)n, 1, 64, 1, 0));
    CHECK_MSG(ctr[0] == n, "ticket counter %u, want %d", ctr[0], (int)n);
    /* slots: each thread id+1 exactly once */
    char *seen = calloc(n + 2, 1);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (slots[i] < 1 || slots[i] > n || seen[slots[i]]) bad++;
        else seen[slots[i]] = 1;
    }
    CHECK_MSG(bad == 0, "fetch_add tickets not unique: %d bad slots", bad);
    /* exchange: returned values plus the final value = {0 (init)} + {1..n} */
    memset(seen, 0, n + 2);
    bad = 0;
    for (int64_t i = 0; i <= n; i++) {
        uint32_t v = i < n ? prevs[i] : ctr[1];
        if (v > n || seen[v]) bad++;
        else seen[v] = 1;
    }
    CHECK_MSG(bad == 0, "exchange lost or duplicated %d values", bad);
    uint32_t cas = 0;
    for (int64_t i = 0; i < n; i++) cas += (uint32_t)(i % 7);
    CHECK_MSG(ctr[2] == cas, "CAS sum %u, want %u", ctr[2], cas);
    CHECK(ctr[3] == 5);
    CHECK_MSG(ctr[4] == n, "load after store saw 5 in %u of %d threads", ctr[4], (int)n);
    free(seen); free(slots); free(prevs);
}

/* atomic<float>: fetch_add over a 2-D grid into per-row bins (partial edge
 * groups), fetch_sub, exchange, a compare_exchange loop computing the max. */
static void test_float_atomics_2d(void) {
    const uint32_t gx = 300, gy = 70;
    const int64_t n = (int64_t)gx * gy;
    float *x = malloc(n * 4);
    harness_fill_f32(x, (size_t)n, 0, 1);
    const char *body =
        "uint2 p = uint2(thread_position_in_grid.xy);\n"
        "float v = x[p.y * 300 + p.x];\n"
        "atomic_fetch_add_explicit(&rows[p.y], v, memory_order_relaxed);\n"
        "atomic_fetch_sub_explicit(&misc[0], v, memory_order_relaxed);\n"
        "device atomic_float* m = &misc[1];\n"
        "float cur = atomic_load_explicit(m, memory_order_relaxed);\n"
        "while (cur < v && !atomic_compare_exchange_weak_explicit(m, &cur, v,\n"
        "                      memory_order_relaxed, memory_order_relaxed)) {}\n"
        "atomic_exchange_explicit(&misc[2], 2.5f, memory_order_relaxed);\n";
    const char *in_names[] = {"x"};
    alloy_array *in[] = {ku_array(ALLOY_FLOAT32, n, x)};
    const char *out_names[] = {"rows", "misc"};
    alloy_dtype dts[] = {ALLOY_FLOAT32, ALLOY_FLOAT32};
    int64_t ns[] = {gy, 3};
    float *rows = malloc(gy * 4), misc[3];
    void *hosts[] = {rows, misc};
    CHECK_OK(run_atomic("atomic_float_2d", body, 1, in_names, in, 2, out_names, dts, ns, hosts,
                        gx, gy, 16, 16, 0));
    double *rr = calloc(gy, sizeof(double)), total = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        rr[i / gx] += x[i];
        total += x[i];
        if (x[i] > mx) mx = x[i];
    }
    /* 300 terms in [0,1) summed in float in any order: |err| <= 300 * 2^-24 * 300 */
    CHECK(ku_cmp_f32("row sums", rows, rr, gy, 300.0 * 300.0 / 16777216.0, 0) == 0);
    double rm[3] = {-total, mx, 2.5};
    /* 21000 terms: |err| <= n * 2^-24 * total */
    CHECK(ku_cmp_f32("float sub", misc, rm, 1, total * (double)n / 16777216.0, 0) == 0);
    CHECK(ku_cmp_f32("float max/xchg", misc + 1, rm + 1, 2, 0, 0) == 0);
    free(x); free(rows); free(rr);
}

/* Threadgroup atomics of every integer op, and atomic<float> in threadgroup
 * memory; each group combines its own values, results are per group. */
static void test_threadgroup_atomics(void) {
    const uint32_t n = 1000, tg = 128, ng = (n + tg - 1) / tg;
    int32_t *a = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) a[i] = (int32_t)(harness_rand_u64() % 20001) - 10000;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint l = thread_index_in_threadgroup;\n"
        "uint g = threadgroup_position_in_grid.x;\n"
        "threadgroup atomic_int ti[6];\n"
        "threadgroup atomic<uint> tu[2];\n"
        "threadgroup atomic<float> tf[1];\n"
        "if (l == 0) {\n"
        "  atomic_store_explicit(&ti[0], 0, memory_order_relaxed);\n"
        "  atomic_store_explicit(&ti[1], -2147483647 - 1, memory_order_relaxed);\n"
        "  atomic_store_explicit(&ti[2], 2147483647, memory_order_relaxed);\n"
        "  atomic_store_explicit(&ti[3], -1, memory_order_relaxed);\n"
        "  atomic_store_explicit(&ti[4], 0, memory_order_relaxed);\n"
        "  atomic_store_explicit(&ti[5], 0, memory_order_relaxed);\n"
        "  atomic_store_explicit(&tu[0], 0u, memory_order_relaxed);\n"
        "  atomic_store_explicit(&tu[1], 0xffffffffu, memory_order_relaxed);\n"
        "  atomic_store_explicit(&tf[0], 0.0f, memory_order_relaxed);\n"
        "}\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "int x = a[i];\n"
        "atomic_fetch_add_explicit(&ti[0], x, memory_order_relaxed);\n"
        "atomic_fetch_max_explicit(&ti[1], x, memory_order_relaxed);\n"
        "atomic_fetch_min_explicit(&ti[2], x, memory_order_relaxed);\n"
        "atomic_fetch_and_explicit(&ti[3], ~(1 << (l % 31)), memory_order_relaxed);\n"
        "atomic_fetch_or_explicit(&ti[4], 1 << (l % 31), memory_order_relaxed);\n"
        "atomic_fetch_xor_explicit(&ti[5], x, memory_order_relaxed);\n"
        "atomic_fetch_sub_explicit(&tu[0], uint(x), memory_order_relaxed);\n"
        "atomic_fetch_min_explicit(&tu[1], uint(x), memory_order_relaxed);\n"
        "atomic_fetch_add_explicit(&tf[0], float(x), memory_order_relaxed);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "if (l == 0) {\n"
        "  for (int k = 0; k < 6; k++)\n"
        "    atomic_store_explicit(&outi[g * 9 + k], atomic_load_explicit(&ti[k], memory_order_relaxed), memory_order_relaxed);\n"
        "  atomic_store_explicit(&outi[g * 9 + 6], int(atomic_load_explicit(&tu[0], memory_order_relaxed)), memory_order_relaxed);\n"
        "  atomic_store_explicit(&outi[g * 9 + 7], int(atomic_load_explicit(&tu[1], memory_order_relaxed)), memory_order_relaxed);\n"
        "  atomic_store_explicit(&outi[g * 9 + 8], int(atomic_load_explicit(&tf[0], memory_order_relaxed)), memory_order_relaxed);\n"
        "}\n";
    const char *in_names[] = {"a"};
    alloy_array *in[] = {ku_array(ALLOY_INT32, n, a)};
    const char *out_names[] = {"outi"};
    alloy_dtype dts[] = {ALLOY_INT32};
    int64_t ns[] = {ng * 9};
    int32_t *got = malloc(ng * 9 * 4), *ref = malloc(ng * 9 * 4);
    void *hosts[] = {got};
    CHECK_OK(run_atomic("atomic_threadgroup", body, 1, in_names, in, 1, out_names, dts, ns, hosts,
                        n, 1, tg, 1, -7));
    for (uint32_t g = 0; g < ng; g++) {
        int32_t s = 0, mx = INT32_MIN, mn = INT32_MAX, an = -1, o = 0, xr = 0;
        uint32_t us = 0, umin = 0xffffffffu;
        for (uint32_t i = g * tg; i < n && i < (g + 1) * tg; i++) {
            uint32_t l = i - g * tg;
            s += a[i];
            if (a[i] > mx) mx = a[i];
            if (a[i] < mn) mn = a[i];
            an &= ~(1 << (l % 31));
            o |= 1 << (l % 31);
            xr ^= a[i];
            us -= (uint32_t)a[i];
            if ((uint32_t)a[i] < umin) umin = (uint32_t)a[i];
        }
        int32_t *r = ref + g * 9;
        r[0] = s; r[1] = mx; r[2] = mn; r[3] = an; r[4] = o; r[5] = xr;
        r[6] = (int32_t)us; r[7] = (int32_t)umin;
        r[8] = s; /* float sum of <= 128 integers of |x| <= 10000: exact in float */
    }
    CHECK(ku_cmp_i32("threadgroup atomics", got, ref, ng * 9) == 0);
    free(a); free(got); free(ref);
}

int main(void) {
    RUN(test_histogram);
    RUN(test_int_ops_device);
    RUN(test_tickets_and_exchange);
    RUN(test_float_atomics_2d);
    RUN(test_threadgroup_atomics);
    return harness_finish();
}
