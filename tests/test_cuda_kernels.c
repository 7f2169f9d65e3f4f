/* test_cuda_kernels.c — what the CUDA prelude and entry point must get right
 * on a real GPU beyond the shared suite: SIMD operations over partial warps
 * (grid edges in 1-D and 2-D, a short last warp, lanes that returned early),
 * simdgroup_matrix products on tensor cores (half, bfloat) and on the float
 * FMA path vs a C reference, atomics under contention (device and
 * threadgroup memory, float min/max by compare-and-swap), dynamic threadgroup
 * memory over 48 KB, and 1024-thread groups with barriers.
 *
 * Runs on the device named by ALLOY_CUDA_TEST_DEVICE (default "cuda"); when
 * that device cannot be opened every test is skipped with the reason. (With
 * ALLOY_CUDA_TEST_DEVICE=cpu the same checks run on the CPU backend, which
 * validates the references.) References are plain C; SIMD inputs are small
 * integers so sums are exact in any order. */
#include "kernel_util.h"

static int have_device;
static char skip_why[512];

#define NEED_DEVICE()                                                                       \
    do {                                                                                    \
        if (!have_device) {                                                                 \
            SKIP(skip_why);                                                                 \
            return;                                                                         \
        }                                                                                   \
    } while (0)

/* ---- SIMD operations over partial simdgroups ---------------------------- */

#define NF 10 /* float results per thread */
#define NI 8  /* int results per thread */

static const char *SIMD_BODY_FMT =
    "uint i = thread_position_in_grid.x + thread_position_in_grid.y * threads_per_grid.x;\n"
    "float v = x[i];\n"
    "%s\n" /* optional early return */
    "device float* f = fo + %d * i;\n"
    "device int* o = io + %d * i;\n"
    "f[0] = simd_sum(v);\n"
    "f[1] = simd_prefix_exclusive_sum(v);\n"
    "f[2] = simd_prefix_inclusive_sum(v);\n"
    "f[3] = simd_shuffle_down(v, 1u);\n"
    "f[4] = simd_shuffle_up(v, 2u);\n"
    "f[5] = simd_shuffle(v, 5u);\n"
    "f[6] = simd_shuffle_xor(v, 3u);\n"
    "f[7] = quad_sum(v);\n"
    "f[8] = quad_prefix_exclusive_sum(v);\n"
    "f[9] = simd_max(v) * 100.0f + simd_min(v);\n"
    "o[0] = int(uint(simd_ballot(v > 0.0f)));\n"
    "o[1] = simd_max(int(v));\n"
    "o[2] = simd_min(int(v));\n"
    "o[3] = simd_sum(int(v));\n"
    "o[4] = simd_is_first() ? 1 : 0;\n"
    "o[5] = simd_broadcast_first(int(v));\n"
    "o[6] = (simd_any(v > 5.0f) ? 1 : 0) + (simd_all(v > -7.0f) ? 2 : 0) + (simd_all(v > 0.0f) ? 4 : 0);\n"
    "o[7] = simd_prefix_exclusive_sum(int(v));\n";

/* The reference of one thread: the active lanes of its simdgroup are those
 * that exist in its (partial) group, lie in the grid, and did not return. */
static void simd_reference(const uint32_t grid[2], const uint32_t tgr[2], int early, const float *x,
                           double *fref, int32_t *iref) {
    uint32_t T0 = tgr[0] < grid[0] ? tgr[0] : grid[0], T1 = tgr[1] < grid[1] ? tgr[1] : grid[1];
    for (uint32_t py = 0; py < grid[1]; py++)
        for (uint32_t px = 0; px < grid[0]; px++) {
            uint32_t i = px + py * grid[0];
            double *f = fref + (size_t)NF * i;
            int32_t *o = iref + (size_t)NI * i;
            if (early && x[i] < 0) { /* returned: outputs keep the init value */
                for (int k = 0; k < NF; k++) f[k] = -999.0;
                for (int k = 0; k < NI; k++) o[k] = -999;
                continue;
            }
            uint32_t bx = px / T0, by = py / T1;
            uint32_t L = px % T0 + (py % T1) * T0, base = L & ~31u, lane = L & 31u;
            int active[32];
            float val[32];
            for (uint32_t k = 0; k < 32; k++) {
                uint32_t Lp = base + k;
                uint32_t qx = bx * T0 + Lp % T0, qy = by * T1 + Lp / T0;
                active[k] = Lp < T0 * T1 && qx < grid[0] && qy < grid[1];
                val[k] = active[k] ? x[qx + qy * grid[0]] : 0.0f;
                if (active[k] && early && val[k] < 0) active[k] = 0;
            }
            double sum = 0, excl = 0, incl = 0, mx = -1e30, mn = 1e30, qsum = 0, qex = 0;
            int first = -1;
            uint32_t ballot = 0;
            int any5 = 0, allm7 = 1, allp = 1;
            for (uint32_t k = 0; k < 32; k++) {
                if (!active[k]) continue;
                if (first < 0) first = (int)k;
                sum += val[k];
                if (k < lane) excl += val[k];
                if (k <= lane) incl += val[k];
                if (val[k] > mx) mx = val[k];
                if (val[k] < mn) mn = val[k];
                if ((k & ~3u) == (lane & ~3u)) {
                    qsum += val[k];
                    if (k < lane) qex += val[k];
                }
                if (val[k] > 0) ballot |= 1u << k;
                any5 |= val[k] > 5;
                allm7 &= val[k] > -7;
                allp &= val[k] > 0;
            }
            float me = x[i];
#define PICK(src) ((src) >= 0 && (src) < 32 && active[(src)] ? (double)val[(src)] : (double)me)
            f[0] = sum;
            f[1] = excl;
            f[2] = incl;
            f[3] = PICK((int)lane + 1);
            f[4] = PICK((int)lane - 2);
            f[5] = PICK(5);
            f[6] = PICK((int)(lane ^ 3u));
            f[7] = qsum;
            f[8] = qex;
            f[9] = mx * 100.0 + mn;
#undef PICK
            o[0] = (int32_t)ballot;
            o[1] = (int32_t)mx;
            o[2] = (int32_t)mn;
            o[3] = (int32_t)sum;
            o[4] = (int)lane == first;
            o[5] = (int32_t)val[first];
            o[6] = any5 + 2 * allm7 + 4 * allp;
            o[7] = (int32_t)excl;
        }
}

static void simd_case(const char *name, uint32_t gx, uint32_t gy, uint32_t tx, uint32_t ty, int early) {
    uint32_t grid[2] = {gx, gy}, tgr[2] = {tx, ty};
    int64_t n = (int64_t)gx * gy;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 7 + (int64_t)(harness_rand_u64() % 5)) % 13 - 6);
    char body[4096];
    snprintf(body, sizeof body, SIMD_BODY_FMT, early ? "if (v < 0.0f) return;" : "", NF, NI);
    float *fo = malloc((size_t)n * NF * sizeof *fo);
    int32_t *io = malloc((size_t)n * NI * sizeof *io);
    double *fref = malloc((size_t)n * NF * sizeof *fref);
    int32_t *iref = malloc((size_t)n * NI * sizeof *iref);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.body = body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, x);
    s.n_out = 2;
    s.out_names[0] = "fo";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = n * NF;
    s.out_host[0] = fo;
    s.out_names[1] = "io";
    s.out_dtype[1] = ALLOY_INT32;
    s.out_n[1] = n * NI;
    s.out_host[1] = io;
    s.grid[0] = gx;
    s.grid[1] = gy;
    s.tg[0] = tx;
    s.tg[1] = ty;
    s.has_init = 1;
    s.init = -999;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    simd_reference(grid, tgr, early, x, fref, iref);
    char what[128];
    snprintf(what, sizeof what, "%s float results", name);
    CHECK(ku_cmp_f32(what, fo, fref, n * NF, 0, 0) == 0);
    snprintf(what, sizeof what, "%s int results", name);
    CHECK(ku_cmp_i32(what, io, iref, n * NI) == 0);
    free(x);
    free(fo);
    free(io);
    free(fref);
    free(iref);
}

/* 40 of 64 threads in the last group (a full warp and a warp with 8 lanes);
 * a group clamped to a grid of 40 (a short last warp); groups of 96. */
static void test_simd_partial_1d(void) {
    NEED_DEVICE();
    simd_case("simd_edge_104_64", 104, 1, 64, 1, 0);
    simd_case("simd_edge_40_64", 40, 1, 64, 1, 0);
    simd_case("simd_edge_1000_96", 1000, 1, 96, 1, 0);
    simd_case("simd_edge_1_32", 1, 1, 32, 1, 0);
}

/* 2-D edges: partial in x and in y, so the active lanes of a warp are not
 * contiguous (rows of 2 lanes in a group 8 wide). */
static void test_simd_partial_2d(void) {
    NEED_DEVICE();
    simd_case("simd_edge_2d", 10, 20, 8, 8, 0);
    simd_case("simd_edge_2d_b", 33, 5, 16, 4, 0);
}

/* Lanes that return early do not take part. */
static void test_simd_early_return(void) {
    NEED_DEVICE();
    simd_case("simd_early_1d", 200, 1, 64, 1, 1);
    simd_case("simd_early_2d", 10, 20, 8, 8, 1);
}

/* ---- simdgroup matrices ---------------------------------------------------- */

static const char *SGM_BODY =
    "uint s = threadgroup_position_in_grid.x * simdgroups_per_threadgroup + simdgroup_index_in_threadgroup;\n"
    "ulong o = ulong(s) * 64;\n"
    "simdgroup_half8x8 a, b;\n"
    "simdgroup_float8x8 c, d;\n"
    "simdgroup_load(a, A + o, 8);\n"
    "simdgroup_load(b, B + o, 8);\n"
    "simdgroup_load(c, C + o, 8);\n"
    "simdgroup_multiply_accumulate(d, a, b, c);\n"
    "simdgroup_store(d, Dh + o, 8);\n"
    "simdgroup_bfloat8x8 ab, bb;\n"
    "simdgroup_load(ab, Ab + o, 8);\n"
    "simdgroup_load(bb, Bb + o, 8);\n"
    "simdgroup_float8x8 db;\n"
    "simdgroup_multiply_accumulate(db, ab, bb, c);\n"
    "simdgroup_store(db, Db + o, 8);\n"
    "simdgroup_float8x8 af, bf, df, at, dt;\n"
    "simdgroup_load(af, Af + o, 8);\n"
    "simdgroup_load(bf, Bf + o, 8);\n"
    "simdgroup_multiply_accumulate(df, af, bf, c);\n"
    "simdgroup_store(df, Df + o, 8);\n"
    "simdgroup_half8x8 dh;\n"
    "simdgroup_multiply(dh, a, b);\n"
    "simdgroup_store(dh, Dhh + o, 8);\n"
    "simdgroup_load(at, Af + o, 8, ulong2(0, 0), true);\n"
    "simdgroup_multiply(dt, at, bf);\n"
    "simdgroup_store(dt, Dt + o, 8);\n"
    "uint lane = thread_index_in_simdgroup;\n"
    "E[o + 2 * lane] = float(a.thread_elements()[0]);\n"
    "E[o + 2 * lane + 1] = float(a.thread_elements()[1]);\n";

/* d = a*b + c (c may be NULL), and the sum of |terms| for the tolerance. */
static void matmul_ref(const double *a, const double *b, const double *c, int transpose_a, double *d,
                       double *mag) {
    for (int r = 0; r < 8; r++)
        for (int col = 0; col < 8; col++) {
            double acc = c ? c[r * 8 + col] : 0, m = c ? fabs(c[r * 8 + col]) : 0;
            for (int j = 0; j < 8; j++) {
                double av = transpose_a ? a[j * 8 + r] : a[r * 8 + j];
                acc += av * b[j * 8 + col];
                m += fabs(av * b[j * 8 + col]);
            }
            d[r * 8 + col] = acc;
            mag[r * 8 + col] = m;
        }
}

static int cmp_mag(const char *what, const float *got, const double *ref, const double *mag, int n,
                   double rel) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= rel * mag[i] + 1e-6)) {
            if (bad < 5) fprintf(stderr, "  %s[%d]: got %.9g, want %.9g\n", what, i, got[i], ref[i]);
            bad++;
        }
    return bad;
}

static void test_simdgroup_matrix(void) {
    NEED_DEVICE();
    const int tiles = 4, n = tiles * 64;
    uint16_t *Ah = malloc(n * 2), *Bh = malloc(n * 2), *Ab = malloc(n * 2), *Bb = malloc(n * 2);
    float *C = malloc(n * 4), *Af = malloc(n * 4), *Bf = malloc(n * 4);
    double *ah = malloc(n * 8), *bh = malloc(n * 8), *abv = malloc(n * 8), *bbv = malloc(n * 8),
           *c = malloc(n * 8), *af = malloc(n * 8), *bf = malloc(n * 8);
    for (int i = 0; i < n; i++) {
        Ah[i] = ku_f16_bits(harness_uniform(-2, 2));
        Bh[i] = ku_f16_bits(harness_uniform(-2, 2));
        Ab[i] = ku_bf16_bits(harness_uniform(-2, 2));
        Bb[i] = ku_bf16_bits(harness_uniform(-2, 2));
        ah[i] = ku_f16_value(Ah[i]);
        bh[i] = ku_f16_value(Bh[i]);
        abv[i] = ku_bf16_value(Ab[i]);
        bbv[i] = ku_bf16_value(Bb[i]);
        C[i] = (float)harness_uniform(-1, 1);
        Af[i] = (float)harness_uniform(-2, 2);
        Bf[i] = (float)harness_uniform(-2, 2);
        c[i] = C[i];
        af[i] = Af[i];
        bf[i] = Bf[i];
    }
    float *Dh = malloc(n * 4), *Db = malloc(n * 4), *Df = malloc(n * 4), *Dt = malloc(n * 4),
          *E = malloc(n * 4);
    uint16_t *Dhh = malloc(n * 2);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "sgm_products";
    s.body = SGM_BODY;
    const char *in_names[] = {"A", "B", "C", "Ab", "Bb", "Af", "Bf"};
    const alloy_dtype in_dt[] = {ALLOY_FLOAT16, ALLOY_FLOAT16, ALLOY_FLOAT32, ALLOY_BFLOAT16,
                                 ALLOY_BFLOAT16, ALLOY_FLOAT32, ALLOY_FLOAT32};
    const void *in_data[] = {Ah, Bh, C, Ab, Bb, Af, Bf};
    s.n_in = 7;
    for (int k = 0; k < 7; k++) {
        s.in_names[k] = in_names[k];
        s.in[k] = ku_array(in_dt[k], n, in_data[k]);
    }
    const char *out_names[] = {"Dh", "Db", "Df", "Dhh", "Dt", "E"};
    const alloy_dtype out_dt[] = {ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT32,
                                  ALLOY_FLOAT16, ALLOY_FLOAT32, ALLOY_FLOAT32};
    void *out_host[] = {Dh, Db, Df, Dhh, Dt, E};
    s.n_out = 6;
    for (int k = 0; k < 6; k++) {
        s.out_names[k] = out_names[k];
        s.out_dtype[k] = out_dt[k];
        s.out_n[k] = n;
        s.out_host[k] = out_host[k];
    }
    s.grid[0] = 32u * (uint32_t)tiles;
    s.tg[0] = 64;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);

    double ref[64], mag[64];
    float dhh[64];
    int bad = 0;
    for (int t = 0; t < tiles; t++) {
        int o = t * 64;
        matmul_ref(ah + o, bh + o, c + o, 0, ref, mag);
        bad += cmp_mag("half x half + float", Dh + o, ref, mag, 64, 1e-5);
        matmul_ref(abv + o, bbv + o, c + o, 0, ref, mag);
        bad += cmp_mag("bfloat x bfloat + float", Db + o, ref, mag, 64, 1e-5);
        matmul_ref(af + o, bf + o, c + o, 0, ref, mag);
        bad += cmp_mag("float x float + float", Df + o, ref, mag, 64, 1e-6);
        matmul_ref(af + o, bf + o, NULL, 1, ref, mag);
        bad += cmp_mag("transpose(float) x float", Dt + o, ref, mag, 64, 1e-6);
        /* half result: the float sum rounded once to half */
        matmul_ref(ah + o, bh + o, NULL, 0, ref, mag);
        for (int i = 0; i < 64; i++) {
            dhh[i] = (float)ku_f16_value(Dhh[o + i]);
            mag[i] = fabs(ref[i]) * 0x1p-11 + mag[i] * 1e-5; /* one rounding to half */
        }
        bad += cmp_mag("half x half -> half", dhh, ref, mag, 64, 1.0);
        /* thread_elements keeps Metal's lane layout */
        for (int lane = 0; lane < 32; lane++) {
            int q = lane / 4, row = (q & 4) + (lane / 2) % 4, col = (q & 2) * 2 + (lane % 2) * 2;
            for (int k = 0; k < 2; k++)
                if (E[o + 2 * lane + k] != (float)ah[o + row * 8 + col + k]) {
                    if (bad < 5)
                        fprintf(stderr, "  thread_elements: tile %d lane %d [%d]: got %g, want %g\n", t,
                                lane, k, E[o + 2 * lane + k], ah[o + row * 8 + col + k]);
                    bad++;
                }
        }
    }
    CHECK_MSG(bad == 0, "%d wrong matrix elements", bad);
    free(Ah); free(Bh); free(Ab); free(Bb); free(C); free(Af); free(Bf);
    free(ah); free(bh); free(abv); free(bbv); free(c); free(af); free(bf);
    free(Dh); free(Db); free(Df); free(Dt); free(E); free(Dhh);
}

/* ---- atomics under contention --------------------------------------------- */

static const char *ATOMIC_BODY =
    "uint i = thread_position_in_grid.x;\n"
    "atomic_fetch_add_explicit(&ia[0], 1, memory_order_relaxed);\n"
    "atomic_fetch_max_explicit(&ia[1], int(i), memory_order_relaxed);\n"
    "atomic_fetch_min_explicit(&ia[2], -int(i), memory_order_relaxed);\n"
    "atomic_fetch_or_explicit(&ia[3], 1 << (i % 31u), memory_order_relaxed);\n"
    "int e = atomic_load_explicit(&ia[4], memory_order_relaxed);\n"
    "while (!atomic_compare_exchange_weak_explicit(&ia[4], &e, e + 2, memory_order_relaxed,\n"
    "                                              memory_order_relaxed)) {}\n"
    "threadgroup atomic<int> local;\n"
    "if (thread_index_in_threadgroup == 0) atomic_store_explicit(&local, 0, memory_order_relaxed);\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "atomic_fetch_add_explicit(&local, 3, memory_order_relaxed);\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "if (thread_index_in_threadgroup == 0)\n"
    "  atomic_fetch_add_explicit(&ia[5], atomic_load_explicit(&local, memory_order_relaxed),\n"
    "                            memory_order_relaxed);\n"
    "atomic_fetch_sub_explicit(&ia[6], 1, memory_order_seq_cst);\n"
    "atomic_exchange_explicit(&ia[7], int(i), memory_order_relaxed);\n"
    "atomic_fetch_add_explicit(&fa[0], 1.0f, memory_order_relaxed);\n"
    "atomic_fetch_max_explicit(&fa[1], float(i) * 0.5f, memory_order_relaxed);\n"
    "atomic_fetch_min_explicit(&fa[2], -float(i), memory_order_relaxed);\n"
    "atomic_fetch_sub_explicit(&fa[3], 0.25f, memory_order_acq_rel);\n"
    "atomic_fetch_sub_explicit(&ua[0], 1u, memory_order_relaxed);\n"
    "atomic_fetch_max_explicit(&ua[1], i * 3u, memory_order_relaxed);\n";

static void test_atomics_contention(void) {
    NEED_DEVICE();
    const int64_t N = 65536 + 37; /* a partial last group */
    int32_t ia[8];
    float fa[4];
    uint32_t ua[2];
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "atomics_contention";
    s.body = ATOMIC_BODY;
    s.n_in = 0;
    s.n_out = 3;
    s.out_names[0] = "ia";
    s.out_dtype[0] = ALLOY_INT32;
    s.out_n[0] = 8;
    s.out_host[0] = ia;
    s.out_names[1] = "fa";
    s.out_dtype[1] = ALLOY_FLOAT32;
    s.out_n[1] = 4;
    s.out_host[1] = fa;
    s.out_names[2] = "ua";
    s.out_dtype[2] = ALLOY_UINT32;
    s.out_n[2] = 2;
    s.out_host[2] = ua;
    s.atomic_outputs = 1;
    s.has_init = 1;
    s.init = 0;
    s.grid[0] = (uint32_t)N;
    s.tg[0] = 256;
    CHECK_OK(ku_run(&s));
    int32_t iwant[7] = {(int32_t)N, (int32_t)(N - 1), (int32_t)-(N - 1), 0x7fffffff, (int32_t)(2 * N),
                        (int32_t)(3 * N), (int32_t)-N};
    CHECK(ku_cmp_i32("int atomics", ia, iwant, 7) == 0);
    CHECK_MSG(ia[7] >= 0 && ia[7] < N, "exchange left %d", ia[7]);
    double fwant[4] = {(double)N, (double)(N - 1) * 0.5, -(double)(N - 1), -0.25 * (double)N};
    CHECK(ku_cmp_f32("float atomics", fa, fwant, 4, 0, 0) == 0);
    uint32_t uwant[2] = {(uint32_t)(0x100000000ull - (uint64_t)N), (uint32_t)(3 * (N - 1))};
    CHECK(ku_cmp_u32("uint atomics", ua, uwant, 2) == 0);
}

/* ---- threadgroup memory and big groups ------------------------------------ */

static const char *TGMEM_BODY =
    "threadgroup float* mem = (threadgroup float*)alloy_threadgroup_memory;\n"
    "uint t = thread_index_in_threadgroup, T = threads_per_threadgroup.x;\n"
    "uint g = threadgroup_position_in_grid.x, W = uint(words);\n"
    "for (uint k = t; k < W; k += T) mem[k] = float(g * 7u + k);\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "float acc = 0.0f;\n"
    "for (uint k = T - 1u - t; k < W; k += T) acc += mem[W - 1u - k];\n"
    "out[thread_position_in_grid.x] = acc;\n";

/* 100 KiB of dynamic threadgroup memory (over the 48 KB static limit) with
 * 1024-thread groups, the last one partial. */
static void test_dynamic_threadgroup_memory(void) {
    NEED_DEVICE();
    const uint32_t tg = 1024, n = 3 * 1024 + 500;
    const int words = 100 * 1024 / 4;
    alloy_device *dev = ku_device();
    static const char *in[] = {"words"}, *outn[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tgmem_100k", 1, in, 1, outn, TGMEM_BODY, NULL, 1, 0, &k));
    alloy_array *w = NULL, *res = NULL;
    CHECK_OK(alloy_array_scalar(dev, ALLOY_INT32, words, &w));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int64_t n64 = n;
    CHECK_OK(alloy_launch_add_output(l, 1, &n64, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, tg, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup_memory(l, (size_t)words * 4));
    CHECK_OK(alloy_kernel_apply(k, 1, &w, l, NULL, &res));
    if (res) {
        float *got = malloc((size_t)n * sizeof *got);
        double *ref = malloc((size_t)n * sizeof *ref);
        CHECK_OK(alloy_array_copy_to_host(res, got, (size_t)n * sizeof *got));
        for (uint32_t x = 0; x < n; x++) {
            uint32_t g = x / tg, t = x % tg, T = (g + 1) * tg <= n ? tg : n - g * tg;
            double acc = 0;
            for (uint32_t kk = T - 1 - t; kk < (uint32_t)words; kk += T)
                acc += (double)(g * 7u + ((uint32_t)words - 1 - kk));
            ref[x] = acc;
        }
        CHECK(ku_cmp_f32("tgmem_100k", got, ref, n, 0, 0) == 0);
        free(got);
        free(ref);
    }
    alloy_array_free(res);
    alloy_array_free(w);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

/* 1024 threads per group: a barrier tree in threadgroup memory and a
 * simd_sum of per-simdgroup partials, the last group partial (952). */
static const char *BIG_BODY =
    "threadgroup int sh[1024];\n"
    "threadgroup int part[32];\n"
    "uint t = thread_index_in_threadgroup, T = threads_per_threadgroup.x;\n"
    "int v = x[thread_position_in_grid.x];\n"
    "sh[t] = v;\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "for (uint s = 512u; s > 0u; s >>= 1) {\n"
    "  if (t < s && t + s < T) sh[t] += sh[t + s];\n"
    "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "}\n"
    "int w = simd_sum(v);\n"
    "if (thread_index_in_simdgroup == 0) part[simdgroup_index_in_threadgroup] = w;\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "int total = 0;\n"
    "for (uint k = 0; k < simdgroups_per_threadgroup; k++) total += part[k];\n"
    "out[thread_position_in_grid.x] = (t == 0 ? sh[0] : 0) * 2 + (total == sh[0] ? 1 : 0);\n";

static void test_threadgroup_1024_barriers(void) {
    NEED_DEVICE();
    const uint32_t n = 3000, tg = 1024;
    int32_t *x = malloc(n * sizeof *x), *got = malloc(n * sizeof *got), *ref = malloc(n * sizeof *ref);
    for (uint32_t i = 0; i < n; i++) x[i] = (int32_t)(harness_rand_u64() % 2001) - 1000;
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "tg1024_barriers";
    s.body = BIG_BODY;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_INT32, n, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_INT32;
    s.out_n[0] = n;
    s.out_host[0] = got;
    s.grid[0] = n;
    s.tg[0] = tg;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = i / tg, t = i % tg, end = (g + 1) * tg < n ? (g + 1) * tg : n;
        int32_t sum = 0;
        for (uint32_t k = g * tg; k < end; k++) sum += x[k];
        ref[i] = (t == 0 ? sum : 0) * 2 + 1;
    }
    CHECK(ku_cmp_i32("tg1024_barriers", got, ref, n) == 0);
    free(x);
    free(got);
    free(ref);
}

int main(void) {
    harness_seed();
    const char *name = getenv("ALLOY_CUDA_TEST_DEVICE");
    if (!name || !*name) name = "cuda";
    alloy_device *dev = NULL;
    if (alloy_device_get(name, &dev) == ALLOY_OK) {
        have_device = 1;
        setenv("ALLOY_DEVICE", name, 1); /* ku_device() opens the same one */
    } else {
        snprintf(skip_why, sizeof skip_why, "no %s device (%s)", name, alloy_last_error());
    }
    RUN(test_simd_partial_1d);
    RUN(test_simd_partial_2d);
    RUN(test_simd_early_return);
    RUN(test_simdgroup_matrix);
    RUN(test_atomics_contention);
    RUN(test_dynamic_threadgroup_memory);
    RUN(test_threadgroup_1024_barriers);
    return harness_finish();
}
