/* test_msl_simd.c — spec §3 SIMD groups of 32 lanes: reductions
 * (sum/product/max/min/and/or/xor), prefix sums and products, shuffles
 * (index/up/down/xor), broadcast / broadcast_first, ballot, any/all,
 * is_first, and the SIMD thread attributes — on full simdgroups, on partial
 * ones at the grid edge (1-D and 2-D, where the live lanes are not
 * contiguous), and after an early `return` of some threads. The C reference
 * applies the same rule: only live lanes take part. Inputs are small
 * integers (and powers of two for products), so every result is exact. */
#include "kernel_util.h"

#define KF 11
#define KU 18

static const char *reduce_body =
    "uint gid = thread_position_in_grid.x + thread_position_in_grid.y * threads_per_grid.x;\n"
    "if (keep[gid] == 0) return;\n"
    "float v = x[gid];\n"
    "float pv = p[gid];\n"
    "uint u = bits[gid];\n"
    "int iv = int(v);\n"
    "device float* of = outf + 11 * gid;\n"
    "device uint* ou = outu + 18 * gid;\n"
    "of[0] = simd_sum(v);\n"
    "of[1] = simd_product(pv);\n"
    "of[2] = simd_max(v);\n"
    "of[3] = simd_min(v);\n"
    "of[4] = simd_prefix_inclusive_sum(v);\n"
    "of[5] = simd_prefix_exclusive_sum(v);\n"
    "of[6] = simd_prefix_inclusive_product(pv);\n"
    "of[7] = simd_prefix_exclusive_product(pv);\n"
    "of[8] = simd_broadcast_first(v);\n"
    "of[9] = float(simd_sum(half(v)));\n"
    "float acc = 0.0f;\n"
    "for (int t = 0; t < 5; t++) acc += simd_sum(v * float(t));\n"
    "of[10] = acc;\n"
    "ou[0] = simd_and(u); ou[1] = simd_or(u); ou[2] = simd_xor(u); ou[3] = simd_sum(u);\n"
    "ou[4] = uint(simd_max(iv)); ou[5] = uint(simd_min(iv)); ou[6] = uint(simd_sum(iv));\n"
    "uint64_t vote = static_cast<uint64_t>(simd_ballot(v > 0.0f));\n"
    "ou[7] = uint(vote & 0xffffffffu);\n"
    "ou[8] = simd_any(v > 7.5f) ? 1u : 0u;\n"
    "ou[9] = simd_all(v > -6.5f) ? 1u : 0u;\n"
    "ou[10] = simd_is_first() ? 1u : 0u;\n"
    "ou[11] = thread_index_in_simdgroup;\n"
    "ou[12] = simdgroup_index_in_threadgroup;\n"
    "ou[13] = threads_per_simdgroup;\n"
    "ou[14] = simd_prefix_exclusive_sum(u & 0xffu);\n"
    "ou[15] = simd_max(u);\n"
    "ou[16] = simd_min(u);\n"
    "ou[17] = uint(vote >> 32);\n";

/* The live-lane table of a launch: for every (group, simdgroup, lane) the
 * linear grid index of the thread there, or -1. Lanes come from
 * thread_index_in_threadgroup = lx + ly * tg.x with the clamped dispatch
 * threadgroup. */
typedef struct lanes {
    int64_t *gid_at; /* [ngroups * nsg * 32] */
    int64_t *slot;   /* per gid: index of its simdgroup's lane 0 in gid_at, or -1 */
    int *lane;       /* per gid */
    int *sg;         /* per gid */
} lanes;

static void build_lanes(lanes *L, uint32_t gx, uint32_t gy, uint32_t tx, uint32_t ty,
                        const uint32_t *keep) {
    uint32_t cx = tx < gx ? tx : gx, cy = ty < gy ? ty : gy;
    uint32_t ngx = (gx + cx - 1) / cx, ngy = (gy + cy - 1) / cy;
    uint32_t nsg = (cx * cy + 31) / 32;
    int64_t cells = (int64_t)ngx * ngy * nsg * 32, n = (int64_t)gx * gy;
    L->gid_at = malloc((size_t)cells * sizeof(int64_t));
    for (int64_t c = 0; c < cells; c++) L->gid_at[c] = -1;
    L->slot = malloc((size_t)n * sizeof(int64_t));
    L->lane = malloc((size_t)n * sizeof(int));
    L->sg = malloc((size_t)n * sizeof(int));
    for (uint32_t py = 0; py < gy; py++)
        for (uint32_t px = 0; px < gx; px++) {
            int64_t gid = px + (int64_t)py * gx;
            uint32_t bx = px / cx, by = py / cy, lx = px % cx, ly = py % cy;
            uint32_t t = lx + ly * cx, sg = t / 32, lane = t % 32;
            int64_t base = (((int64_t)bx + (int64_t)by * ngx) * nsg + sg) * 32;
            L->lane[gid] = (int)lane;
            L->sg[gid] = (int)sg;
            L->slot[gid] = keep[gid] ? base : -1;
            if (keep[gid]) L->gid_at[base + lane] = gid;
        }
}

static void free_lanes(lanes *L) {
    free(L->gid_at); free(L->slot); free(L->lane); free(L->sg);
}

static void run_reduce(const char *label, uint32_t gx, uint32_t gy, uint32_t tx, uint32_t ty,
                       double keep_prob) {
    int64_t n = (int64_t)gx * gy;
    float *x = malloc((size_t)n * 4), *p = malloc((size_t)n * 4);
    uint32_t *bits = malloc((size_t)n * 4), *keep = malloc((size_t)n * 4);
    static const float pw[] = {1.0f, 2.0f, -1.0f, 0.5f, -2.0f, 1.0f, -0.5f};
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)((int)(harness_rand_u64() % 15) - 7);
        if (harness_rand_u64() % 50 == 0) x[i] = 8.0f;
        p[i] = pw[harness_rand_u64() % 7];
        bits[i] = (uint32_t)harness_rand_u64() | (1u << (i % 32)) ;
        if (i % 3 == 0) bits[i] |= 0x10000001u;
        keep[i] = harness_uniform(0, 1) < keep_prob ? 1u : 0u;
    }
    float *of = malloc((size_t)n * KF * 4);
    uint32_t *ou = malloc((size_t)n * KU * 4);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "simd_reduce";
    s.body = reduce_body;
    s.n_in = 4;
    s.in_names[0] = "x";
    s.in_names[1] = "p";
    s.in_names[2] = "bits";
    s.in_names[3] = "keep";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, x);
    s.in[1] = ku_array(ALLOY_FLOAT32, n, p);
    s.in[2] = ku_array(ALLOY_UINT32, n, bits);
    s.in[3] = ku_array(ALLOY_UINT32, n, keep);
    s.n_out = 2;
    s.out_names[0] = "outf";
    s.out_names[1] = "outu";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_dtype[1] = ALLOY_UINT32;
    s.out_n[0] = n * KF;
    s.out_n[1] = n * KU;
    s.out_host[0] = of;
    s.out_host[1] = ou;
    s.grid[0] = gx;
    s.grid[1] = gy;
    s.tg[0] = tx;
    s.tg[1] = ty;
    s.has_init = 1;
    s.init = 4242; /* what threads that returned leave behind */
    alloy_status st = ku_run(&s);
    ku_free_inputs(&s);
    CHECK_MSG(st == ALLOY_OK, "%s: %s", label, alloy_last_error());

    lanes L;
    build_lanes(&L, gx, gy, tx, ty, keep);
    double *rf = malloc((size_t)n * KF * sizeof(double));
    uint32_t *ru = malloc((size_t)n * KU * 4);
    for (int64_t g = 0; g < n; g++) {
        double *f = rf + g * KF;
        uint32_t *u = ru + g * KU;
        if (!keep[g]) {
            for (int k = 0; k < KF; k++) f[k] = 4242;
            for (int k = 0; k < KU; k++) u[k] = 4242;
            continue;
        }
        const int64_t *row = L.gid_at + L.slot[g];
        int me = L.lane[g];
        double sum = 0, prod = 1, mx = -INFINITY, mn = INFINITY, isum = 0, iprod = 1;
        double esum = 0, eprod = 1, first = NAN;
        uint32_t a = 0xffffffffu, o = 0, xr = 0, us = 0, ball = 0, any = 0, all = 1, ex8 = 0;
        uint32_t umax = 0, umin = 0xffffffffu;
        int32_t imax = INT32_MIN, imin = INT32_MAX, isu = 0;
        int firstlane = -1;
        for (int l = 0; l < 32; l++) {
            int64_t h = row[l];
            if (h < 0) continue;
            if (firstlane < 0) { firstlane = l; first = x[h]; }
            sum += x[h]; prod *= p[h];
            if (x[h] > mx) mx = x[h];
            if (x[h] < mn) mn = x[h];
            if (l <= me) { isum += x[h]; iprod *= p[h]; }
            if (l < me) { esum += x[h]; eprod *= p[h]; ex8 += bits[h] & 0xffu; }
            a &= bits[h]; o |= bits[h]; xr ^= bits[h]; us += bits[h];
            int32_t iv = (int32_t)x[h];
            if (iv > imax) imax = iv;
            if (iv < imin) imin = iv;
            isu += iv;
            if (x[h] > 0) ball |= 1u << l;
            if (x[h] > 7.5f) any = 1;
            if (!(x[h] > -6.5f)) all = 0;
            if (bits[h] > umax) umax = bits[h];
            if (bits[h] < umin) umin = bits[h];
        }
        f[0] = sum; f[1] = prod; f[2] = mx; f[3] = mn; f[4] = isum; f[5] = esum;
        f[6] = iprod; f[7] = eprod; f[8] = first; f[9] = sum; f[10] = 10 * sum;
        u[0] = a; u[1] = o; u[2] = xr; u[3] = us; u[4] = (uint32_t)imax; u[5] = (uint32_t)imin;
        u[6] = (uint32_t)isu; u[7] = ball; u[8] = any; u[9] = all; u[10] = me == firstlane;
        u[11] = (uint32_t)me; u[12] = (uint32_t)L.sg[g]; u[13] = 32; u[14] = ex8;
        u[15] = umax; u[16] = umin; u[17] = 0;
    }
    char what[128];
    snprintf(what, sizeof what, "%s float ops", label);
    int bf = ku_cmp_f32(what, of, rf, n * KF, 0, 0);
    snprintf(what, sizeof what, "%s uint ops", label);
    int bu = ku_cmp_u32(what, ou, ru, n * KU);
    CHECK_MSG(bf == 0 && bu == 0, "%s: %d float and %d uint mismatches (index = thread*%d+op)",
              label, bf, bu, KF);
    free_lanes(&L);
    free(x); free(p); free(bits); free(keep); free(of); free(ou); free(rf); free(ru);
}

static void test_reduce_full(void) { run_reduce("1-D 1000/96", 1000, 1, 96, 1, 1.0); }
static void test_reduce_partial_40_64(void) { run_reduce("1-D 40/64", 40, 1, 64, 1, 1.0); }
static void test_reduce_partial_100_64(void) { run_reduce("1-D 100/64", 100, 1, 64, 1, 1.0); }
static void test_reduce_early_return(void) { run_reduce("1-D early return", 1000, 1, 64, 1, 0.8); }
static void test_reduce_2d_partial(void) { run_reduce("2-D 20x5/16x4", 20, 5, 16, 4, 1.0); }
static void test_reduce_2d_early_return(void) {
    run_reduce("2-D 37x9/8x8 early return", 37, 9, 8, 8, 0.7);
}

/* Shuffles on full and partial (contiguous) simdgroups. A source lane
 * outside the live lanes is undefined in Metal, so the body reports 777
 * there instead of the shuffled value. */
static void run_shuffle(const char *label, uint32_t n, uint32_t tg) {
    const char *body =
        "uint gid = thread_position_in_grid.x;\n"
        "uint lane = thread_index_in_simdgroup;\n"
        "uint sg = simdgroup_index_in_threadgroup;\n"
        "uint nt = threads_per_threadgroup.x;\n"
        "uint nact = min(32u, nt - sg * 32u);\n"
        "float v = in[gid];\n"
        "device float* o = out + 8 * gid;\n"
        "o[0] = simd_shuffle(v, ushort((lane * 5u + 3u) % nact));\n"
        "float d = simd_shuffle_down(v, ushort(3));\n"
        "o[1] = (lane + 3u < nact || lane + 3u >= 32u) ? d : 777.0f;\n"
        "o[2] = simd_shuffle_up(v, ushort(5));\n"
        "float xr = simd_shuffle_xor(v, ushort(6));\n"
        "o[3] = ((lane ^ 6u) < nact) ? xr : 777.0f;\n"
        "float bc = simd_broadcast(v, ushort(2));\n"
        "o[4] = (nact > 2u) ? bc : 777.0f;\n"
        "int iv = int(v);\n"
        "int ix = simd_shuffle_xor(iv, ushort(1));\n"
        "o[5] = ((lane ^ 1u) < nact) ? float(ix) : 777.0f;\n"
        "int id = simd_shuffle_down(iv, ushort(1));\n"
        "o[6] = (lane + 1u < nact || lane + 1u >= 32u) ? float(id) : 777.0f;\n"
        "float4 v4 = float4(v, v * 2.0f, -v, 1.0f);\n"
        "float4 s4 = simd_shuffle(v4, ushort(0));\n"
        "o[7] = s4.y;\n";
    float *x = malloc(n * 4), *got = malloc(n * 8 * 4);
    double *ref = malloc(n * 8 * sizeof(double));
    for (uint32_t i = 0; i < n; i++) x[i] = (float)((int)(harness_rand_u64() % 200) - 100);
    uint32_t c = tg < n ? tg : n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = i / c, l = i % c, nt = (g + 1) * c <= n ? c : n - g * c;
        uint32_t sg = l / 32, lane = l % 32, nact = nt - sg * 32 < 32 ? nt - sg * 32 : 32;
        uint32_t base = g * c + sg * 32;
        double *o = ref + 8 * i;
        o[0] = x[base + (lane * 5 + 3) % nact];
        o[1] = lane + 3 >= 32 ? x[i] : lane + 3 < nact ? x[base + lane + 3] : 777;
        o[2] = lane < 5 ? x[i] : x[base + lane - 5];
        o[3] = (lane ^ 6) < nact ? x[base + (lane ^ 6)] : 777;
        o[4] = nact > 2 ? x[base + 2] : 777;
        o[5] = (lane ^ 1) < nact ? x[base + (lane ^ 1)] : 777;
        o[6] = lane + 1 >= 32 ? x[i] : lane + 1 < nact ? x[base + lane + 1] : 777;
        o[7] = 2.0 * x[base];
    }
    CHECK_OK(ku_run_1in1out("simd_shuffle", body, NULL, ALLOY_FLOAT32, n, x, ALLOY_FLOAT32, n * 8,
                            got, n, tg, NAN));
    CHECK(ku_cmp_f32(label, got, ref, n * 8, 0, 0) == 0);
    free(x); free(got); free(ref);
}

static void test_shuffle_full(void) { run_shuffle("shuffle 1000/96", 1000, 96); }
static void test_shuffle_partial(void) { run_shuffle("shuffle 40/64", 40, 64); }
static void test_shuffle_partial_odd(void) { run_shuffle("shuffle 77/64", 77, 64); }

/* The SIMD attributes: 32 lanes, execution width 32, simdgroups per group. */
static void test_simd_attributes(void) {
    const uint32_t n = 256, tg = 128;
    const char *body =
        "uint gid = thread_position_in_grid.x;\n"
        "out[4 * gid + 0] = threads_per_simdgroup;\n"
        "out[4 * gid + 1] = thread_execution_width;\n"
        "out[4 * gid + 2] = simdgroups_per_threadgroup;\n"
        "out[4 * gid + 3] = thread_index_in_simdgroup + 100u * simdgroup_index_in_threadgroup;\n";
    uint32_t *got = malloc(n * 4 * 4), *ref = malloc(n * 4 * 4);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = i % tg;
        ref[4 * i] = 32; ref[4 * i + 1] = 32; ref[4 * i + 2] = tg / 32;
        ref[4 * i + 3] = l % 32 + 100 * (l / 32);
    }
    float dummy = 0;
    CHECK_OK(ku_run_1in1out("simd_attrs", body, NULL, ALLOY_FLOAT32, 1, &dummy, ALLOY_UINT32,
                            n * 4, got, n, tg, 99999));
    CHECK(ku_cmp_u32("simd attributes", got, ref, n * 4) == 0);
    free(got); free(ref);
}

int main(void) {
    RUN(test_simd_attributes);
    RUN(test_reduce_full);
    RUN(test_reduce_partial_40_64);
    RUN(test_reduce_partial_100_64);
    RUN(test_reduce_early_return);
    RUN(test_reduce_2d_partial);
    RUN(test_reduce_2d_early_return);
    RUN(test_shuffle_full);
    RUN(test_shuffle_partial);
    RUN(test_shuffle_partial_odd);
    return harness_finish();
}
