/* test_msl_tensor.c — Metal 4 tensors and tensor operations in bodies:
 * tensor construction, slices and element access, matmul2d in every scope,
 * dtype and transpose, into tensors and cooperative tensors, and the
 * cooperative-tensor epilogue (bias + activation, row and column reductions,
 * iterators). Every result is checked against a double-precision C loop on
 * awkward sizes (partial tiles in every dimension). */
#include "harness.h"
#include "kernel_util.h"

/* ---- host data ----------------------------------------------------------- */

/* n random values in [-1, 1] rounded to `dt`; *vals gets the rounded values
 * (the reference uses exactly what the kernel sees), *raw the device bytes. */
static void random_operand(alloy_dtype dt, int64_t n, double **vals, void **raw) {
    *vals = malloc((size_t)n * sizeof **vals);
    *raw = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        double x = harness_uniform(-1.0, 1.0);
        switch (dt) {
        case ALLOY_FLOAT16:
            ((uint16_t *)*raw)[i] = ku_f16_bits(x);
            x = ku_f16_value(((uint16_t *)*raw)[i]);
            break;
        case ALLOY_BFLOAT16:
            ((uint16_t *)*raw)[i] = ku_bf16_bits(x);
            x = ku_bf16_value(((uint16_t *)*raw)[i]);
            break;
        case ALLOY_INT8:
            x = (double)(int)floor(x * 127.0);
            ((int8_t *)*raw)[i] = (int8_t)x;
            break;
        default:
            ((float *)*raw)[i] = (float)x;
            x = (float)x;
            break;
        }
        (*vals)[i] = x;
    }
}

/* C (m x n) = op(A) op(B) in double; A is m x k (k x m when ta), B k x n
 * (n x k when tb), all row-major. *scale gets sum |a||b| per element (the
 * error bound's scale). */
static void ref_gemm(const double *a, const double *b, int m, int n, int k, int ta, int tb,
                     double *c, double *scale) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, as = 0;
            for (int p = 0; p < k; p++) {
                double x = ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
                double y = tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
                s += x * y;
                as += fabs(x * y);
            }
            c[(size_t)i * n + j] = s;
            if (scale) scale[(size_t)i * n + j] = as;
        }
}

/* ---- (1) matmul2d into a device tensor, simdgroups<4>, any dtype ---------- */

/* One 32 x 16 tile per threadgroup of 128 threads. TI: the operands' element
 * type; TO: the destination's. Logical A is M x K, B is K x N. */
static const char *GEMM_BODY =
    "const int M = TA ? A_shape[1] : A_shape[0];\n"
    "const int N = TB ? B_shape[0] : B_shape[1];\n"
    "auto tA = tensor<device TI, dextents<int32_t, 2>, tensor_inline>(A, dextents<int32_t, 2>(A_shape[1], A_shape[0]));\n"
    "auto tB = tensor<device TI, dextents<int32_t, 2>, tensor_inline>(B, dextents<int32_t, 2>(B_shape[1], B_shape[0]));\n"
    "auto tC = tensor<device TO, dextents<int32_t, 2>, tensor_inline>(C, dextents<int32_t, 2>(N, M));\n"
    "constexpr auto desc = matmul2d_descriptor(32, 16, static_cast<int>(dynamic_extent), TA, TB);\n"
    "matmul2d<desc, execution_simdgroups<4>> op;\n"
    "const int m0 = int(threadgroup_position_in_grid.y) * 32, n0 = int(threadgroup_position_in_grid.x) * 16;\n"
    "auto mA = TA ? tA.slice(m0, 0) : tA.slice(0, m0);\n"
    "auto mB = TB ? tB.slice(0, n0) : tB.slice(n0, 0);\n"
    "auto mC = tC.slice(n0, m0);\n"
    "op.run(mA, mB, mC);\n";

static void gemm_case(alloy_dtype ti, alloy_dtype to, int m, int n, int k, int ta, int tb) {
    double *a, *b;
    void *ra, *rb;
    random_operand(ti, (int64_t)m * k, &a, &ra);
    random_operand(ti, (int64_t)k * n, &b, &rb);
    double *ref = malloc((size_t)m * n * sizeof *ref), *scale = malloc((size_t)m * n * sizeof *scale);
    ref_gemm(a, b, m, n, k, ta, tb, ref, scale);
    int64_t sa[2] = {ta ? k : m, ta ? m : k}, sb[2] = {tb ? n : k, tb ? k : n};
    ku_spec s = {0};
    s.name = "tensor_gemm";
    s.body = GEMM_BODY;
    s.n_in = 2;
    s.in_names[0] = "A";
    s.in_names[1] = "B";
    s.in[0] = ku_array_nd(ti, 2, sa, ra);
    s.in[1] = ku_array_nd(ti, 2, sb, rb);
    s.n_out = 1;
    s.out_names[0] = "C";
    s.out_dtype[0] = to;
    s.out_ndim[0] = 2;
    s.out_shape[0][0] = m;
    s.out_shape[0][1] = n;
    s.has_init = 1;
    s.init = NAN; /* every element must be written */
    s.grid[0] = (uint32_t)((n + 15) / 16 * 128);
    s.grid[1] = (uint32_t)((m + 31) / 32);
    s.tg[0] = 128;
    s.n_tmpl = 4;
    s.tmpl[0] = (ku_tmpl){"TI", 2, 0, ti};
    s.tmpl[1] = (ku_tmpl){"TO", 2, 0, to};
    s.tmpl[2] = (ku_tmpl){"TA", 1, ta, 0};
    s.tmpl[3] = (ku_tmpl){"TB", 1, tb, 0};
    void *got = malloc((size_t)m * n * 4);
    s.out_host[0] = got;
    CHECK_OK(ku_run(&s));
    int bad = 0;
    for (int64_t i = 0; i < (int64_t)m * n; i++) {
        double g = to == ALLOY_INT32 ? (double)((int32_t *)got)[i] : (double)((float *)got)[i];
        double tol = to == ALLOY_INT32 ? 0.0 : 1e-6 * scale[i] + 1e-6;
        if (!(fabs(g - ref[i]) <= tol)) {
            if (bad < 4)
                fprintf(stderr, "  %s %dx%dx%d ta=%d tb=%d: C[%lld] = %.9g, want %.9g\n",
                        alloy_dtype_name(ti), m, n, k, ta, tb, (long long)i, g, ref[i]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d of %d elements wrong", bad, m * n);
    ku_free_inputs(&s);
    free(a);
    free(b);
    free(ra);
    free(rb);
    free(ref);
    free(scale);
    free(got);
}

static void test_matmul2d_tensor_destination(void) {
    gemm_case(ALLOY_FLOAT32, ALLOY_FLOAT32, 33, 47, 29, 0, 0);
    gemm_case(ALLOY_FLOAT32, ALLOY_FLOAT32, 1, 1, 1, 0, 0);
    gemm_case(ALLOY_FLOAT32, ALLOY_FLOAT32, 64, 32, 100, 1, 0);
    gemm_case(ALLOY_FLOAT32, ALLOY_FLOAT32, 37, 18, 5, 0, 1);
    gemm_case(ALLOY_FLOAT32, ALLOY_FLOAT32, 31, 17, 13, 1, 1);
    gemm_case(ALLOY_FLOAT16, ALLOY_FLOAT32, 45, 33, 70, 0, 0);
    gemm_case(ALLOY_BFLOAT16, ALLOY_FLOAT32, 40, 20, 64, 0, 1);
    gemm_case(ALLOY_INT8, ALLOY_INT32, 35, 19, 50, 0, 0);
}

/* ---- (2) cooperative destination and the fused epilogue ------------------ */

/* 64 x 32 tiles, 4 simdgroups. out = relu(A B + bias[col]) (zero outside the
 * matrix), rowmax[m][tile_n] = its row maxima per tile, colsum[tile_m][n] =
 * its column sums per tile, centred = out - rowmax (through map_iterator),
 * compat[0] = is_iterator_compatible(out tile, row maxima). */
static const char *EPILOGUE_BODY =
    "const int M = A_shape[0], K = A_shape[1], N = B_shape[1];\n"
    "const int tiles_m = (M + 63) / 64, tiles_n = (N + 31) / 32;\n"
    "auto tA = tensor<device half, dextents<int32_t, 2>, tensor_inline>(A, dextents<int32_t, 2>(K, M));\n"
    "auto tB = tensor<device half, dextents<int32_t, 2>, tensor_inline>(B, dextents<int32_t, 2>(N, K));\n"
    "auto tOut = tensor<device float, dextents<int32_t, 2>, tensor_inline>(out, dextents<int32_t, 2>(N, M));\n"
    "auto tCentred = tensor<device float, dextents<int32_t, 2>, tensor_inline>(centred, dextents<int32_t, 2>(N, M));\n"
    "const int gx = int(threadgroup_position_in_grid.x), gy = int(threadgroup_position_in_grid.y);\n"
    "const int m0 = gy * 64, n0 = gx * 32;\n"
    "constexpr auto desc = matmul2d_descriptor(64, 32, static_cast<int>(dynamic_extent));\n"
    "matmul2d<desc, execution_simdgroups<4>> op;\n"
    "auto mA = tA.slice(0, m0);\n"
    "auto mB = tB.slice(n0, 0);\n"
    "auto cT = op.get_destination_cooperative_tensor<decltype(mA), decltype(mB), float>();\n"
    "op.run(mA, mB, cT);\n"
    "for (uint16_t i = 0; i < cT.get_capacity(); ++i) {\n"
    "    if (!cT.get_mask(i)) continue;\n"
    "    auto idx = cT.get_multidimensional_index(i);\n"
    "    const int n = n0 + idx[0], m = m0 + idx[1];\n"
    "    cT[i] = (m < M && n < N) ? max(cT[i] + float(bias[n]), 0.0f) : 0.0f;\n"
    "}\n"
    "cT.store(tOut.slice(n0, m0));\n"
    "auto rmax = op.get_row_reduction_destination_cooperative_tensor<decltype(mA), decltype(mB), float>();\n"
    "reduce_rows(cT, rmax, reduction_operation::max, reduction_operation_identity<float>::max_identity);\n"
    "auto tRow = tensor<device float, dextents<int32_t, 1>, tensor_inline>(rowmax + gx, dextents<int32_t, 1>(M), array<int32_t, 1>{tiles_n});\n"
    "rmax.store(tRow.slice(m0));\n"
    "auto csum = op.get_column_reduction_destination_cooperative_tensor<decltype(mA), decltype(mB), float>();\n"
    "reduce_columns(cT, csum);\n"
    "auto tCol = tensor<device float, dextents<int32_t, 1>, tensor_inline>(colsum + gy * N, dextents<int32_t, 1>(N));\n"
    "csum.store(tCol.slice(n0));\n"
    "if (is_iterator_compatible(cT, rmax)) {\n"
    "    for (auto it = cT.begin(); it != cT.end(); it++) {\n"
    "        auto r = rmax.map_iterator(it);\n"
    "        *it -= *r;\n"
    "    }\n"
    "}\n"
    "cT.store(tCentred.slice(n0, m0));\n"
    "if (gx == 0 && gy == 0 && thread_index_in_threadgroup == 0)\n"
    "    compat[0] = is_iterator_compatible(cT, rmax) && !is_iterator_compatible(cT, csum) ? 1 : 0;\n";

static void epilogue_case(int m, int n, int k) {
    double *a, *b, *bias;
    void *ra, *rb, *rbias;
    random_operand(ALLOY_FLOAT16, (int64_t)m * k, &a, &ra);
    random_operand(ALLOY_FLOAT16, (int64_t)k * n, &b, &rb);
    random_operand(ALLOY_FLOAT32, n, &bias, &rbias);
    const int tiles_m = (m + 63) / 64, tiles_n = (n + 31) / 32;
    double *c = malloc((size_t)m * n * sizeof *c), *scale = malloc((size_t)m * n * sizeof *scale);
    ref_gemm(a, b, m, n, k, 0, 0, c, scale);
    for (int64_t i = 0; i < (int64_t)m * n; i++) {
        double v = c[i] + bias[i % n];
        c[i] = v > 0 ? v : 0;
    }
    double *rowmax = malloc((size_t)m * tiles_n * sizeof *rowmax);
    double *colsum = calloc((size_t)tiles_m * n, sizeof *colsum);
    for (int i = 0; i < m; i++)
        for (int tn = 0; tn < tiles_n; tn++) {
            double mx = -INFINITY;
            for (int j = tn * 32; j < tn * 32 + 32; j++) {
                double v = j < n ? c[(size_t)i * n + j] : 0.0; /* padding columns hold 0 */
                if (v > mx) mx = v;
            }
            rowmax[(size_t)i * tiles_n + tn] = mx;
        }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) colsum[(size_t)(i / 64) * n + j] += c[(size_t)i * n + j];
    double *centred = malloc((size_t)m * n * sizeof *centred);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            centred[(size_t)i * n + j] = c[(size_t)i * n + j] - rowmax[(size_t)i * tiles_n + j / 32];

    int64_t sa[2] = {m, k}, sb[2] = {k, n};
    ku_spec s = {0};
    s.name = "tensor_epilogue";
    s.body = EPILOGUE_BODY;
    s.n_in = 3;
    s.in_names[0] = "A";
    s.in_names[1] = "B";
    s.in_names[2] = "bias";
    s.in[0] = ku_array_nd(ALLOY_FLOAT16, 2, sa, ra);
    s.in[1] = ku_array_nd(ALLOY_FLOAT16, 2, sb, rb);
    s.in[2] = ku_array(ALLOY_FLOAT32, n, rbias);
    s.n_out = 5;
    const char *names[5] = {"out", "rowmax", "colsum", "centred", "compat"};
    int64_t shapes[5][2] = {{m, n}, {m, tiles_n}, {tiles_m, n}, {m, n}, {1, 1}};
    void *host[5];
    for (int j = 0; j < 5; j++) {
        s.out_names[j] = names[j];
        s.out_dtype[j] = j == 4 ? ALLOY_INT32 : ALLOY_FLOAT32;
        s.out_ndim[j] = 2;
        s.out_shape[j][0] = shapes[j][0];
        s.out_shape[j][1] = shapes[j][1];
        host[j] = malloc((size_t)(shapes[j][0] * shapes[j][1]) * 4);
        s.out_host[j] = host[j];
    }
    s.has_init = 1;
    s.init = NAN;
    s.grid[0] = (uint32_t)(tiles_n * 128);
    s.grid[1] = (uint32_t)tiles_m;
    s.tg[0] = 128;
    CHECK_OK(ku_run(&s));
    double tol_rel = 1e-5;
    int bad = 0;
    for (int64_t i = 0; i < (int64_t)m * n; i++) {
        double tol = tol_rel * (scale[i] + 1.0);
        if (!(fabs(((float *)host[0])[i] - c[i]) <= tol)) bad++;
        if (!(fabs(((float *)host[3])[i] - centred[i]) <= 2 * tol + 1e-5)) bad++;
    }
    CHECK_MSG(bad == 0, "%dx%dx%d: %d wrong elements of out/centred", m, n, k, bad);
    double maxscale = 1.0;
    for (int64_t i = 0; i < (int64_t)m * n; i++)
        if (scale[i] > maxscale) maxscale = scale[i];
    CHECK(ku_cmp_f32("rowmax", host[1], rowmax, (int64_t)m * tiles_n, tol_rel * maxscale, 0) == 0);
    CHECK(ku_cmp_f32("colsum", host[2], colsum, (int64_t)tiles_m * n, 64 * tol_rel * maxscale, 1e-6) == 0);
    CHECK_MSG(((int32_t *)host[4])[0] == 1, "is_iterator_compatible gave %d",
              ((int32_t *)host[4])[0]);
    ku_free_inputs(&s);
    for (int j = 0; j < 5; j++) free(host[j]);
    free(a);
    free(b);
    free(bias);
    free(ra);
    free(rb);
    free(rbias);
    free(c);
    free(scale);
    free(rowmax);
    free(colsum);
    free(centred);
}

static void test_cooperative_epilogue(void) {
    epilogue_case(64, 32, 16);
    epilogue_case(100, 45, 33);
    epilogue_case(1, 1, 1);
}

/* ---- (3) other scopes, user K loops, element access ----------------------- */

/* Each simdgroup of 4 (execution_simdgroup) and each thread
 * (execution_thread) computes its own 8 x 8 tile of C = A B. The thread
 * scope accumulates over K in steps of 4 with static slices
 * (multiply_accumulate), the tail with a dynamic one. */
static const char *SCOPES_BODY =
    "const int M = A_shape[0], K = A_shape[1], N = B_shape[1];\n"
    "auto tA = tensor<device float, dextents<int32_t, 2>, tensor_inline>(A, dextents<int32_t, 2>(K, M));\n"
    "auto tB = tensor<device float, dextents<int32_t, 2>, tensor_inline>(B, dextents<int32_t, 2>(N, K));\n"
    "auto tC = tensor<device float, dextents<int32_t, 2>, tensor_inline>(C, dextents<int32_t, 2>(N, M));\n"
    "auto tD = tensor<device float, dextents<int32_t, 2>, tensor_inline>(D, dextents<int32_t, 2>(N, M));\n"
    "const int tiles_n = (N + 7) / 8;\n"
    "const int sg = int(threadgroup_position_in_grid.x) * 4 + int(simdgroup_index_in_threadgroup);\n"
    "if (sg < tiles_n * ((M + 7) / 8)) {\n"
    "    constexpr auto d = matmul2d_descriptor(8, 8);\n"
    "    matmul2d<d, execution_simdgroup> op;\n"
    "    const int m0 = sg / tiles_n * 8, n0 = sg % tiles_n * 8;\n"
    "    auto mA = tA.slice(0, m0);\n"
    "    auto mB = tB.slice(n0, 0);\n"
    "    auto mC = tC.slice(n0, m0);\n"
    "    op.run(mA, mB, mC);\n"
    "}\n"
    "const int th = int(thread_position_in_grid.x);\n"
    "if (th < tiles_n * ((M + 7) / 8)) {\n"
    "    constexpr auto d = matmul2d_descriptor(8, 8, 4, false, false, false,\n"
    "                                           matmul2d_descriptor::mode::multiply_accumulate);\n"
    "    matmul2d<d, execution_thread> op;\n"
    "    const int m0 = th / tiles_n * 8, n0 = th % tiles_n * 8;\n"
    "    auto mD = tD.slice(n0, m0);\n"
    "    for (int r = 0; r < 8; r++) for (int c = 0; c < 8; c++)\n"
    "        if (m0 + r < M && n0 + c < N) mD[c, r] = 0.0f;\n"
    "    int k = 0;\n"
    "    for (; k + 4 <= K; k += 4) {\n"
    "        auto kA = tA.static_slice<4, dynamic_extent>(k, m0);\n"
    "        auto kB = tB.static_slice<dynamic_extent, 4>(n0, k);\n"
    "        op.run(kA, kB, mD);\n"
    "    }\n"
    "    auto kA = tA.slice(k, m0);\n"
    "    auto kB = tB.slice(n0, k);\n"
    "    op.run(kA, kB, mD);\n"
    "}\n";

static void test_scopes_and_k_loops(void) {
    const int m = 21, n = 19, k = 23;
    double *a, *b;
    void *ra, *rb;
    random_operand(ALLOY_FLOAT32, (int64_t)m * k, &a, &ra);
    random_operand(ALLOY_FLOAT32, (int64_t)k * n, &b, &rb);
    double *ref = malloc((size_t)m * n * sizeof *ref);
    ref_gemm(a, b, m, n, k, 0, 0, ref, NULL);
    int64_t sa[2] = {m, k}, sb[2] = {k, n};
    ku_spec s = {0};
    s.name = "tensor_scopes";
    s.body = SCOPES_BODY;
    s.n_in = 2;
    s.in_names[0] = "A";
    s.in_names[1] = "B";
    s.in[0] = ku_array_nd(ALLOY_FLOAT32, 2, sa, ra);
    s.in[1] = ku_array_nd(ALLOY_FLOAT32, 2, sb, rb);
    s.n_out = 2;
    float *got[2];
    for (int j = 0; j < 2; j++) {
        s.out_names[j] = j ? "D" : "C";
        s.out_dtype[j] = ALLOY_FLOAT32;
        s.out_ndim[j] = 2;
        s.out_shape[j][0] = m;
        s.out_shape[j][1] = n;
        got[j] = malloc((size_t)m * n * sizeof(float));
        s.out_host[j] = got[j];
    }
    s.has_init = 1;
    s.init = NAN;
    const int tiles = ((m + 7) / 8) * ((n + 7) / 8); /* 9 tiles: 3 groups of 4 simdgroups */
    s.grid[0] = (uint32_t)((tiles + 3) / 4 * 128);
    s.tg[0] = 128;
    CHECK_OK(ku_run(&s));
    CHECK(ku_cmp_f32("C (simdgroup scope)", got[0], ref, (int64_t)m * n, 1e-5, 1e-5) == 0);
    CHECK(ku_cmp_f32("D (thread scope, K loop)", got[1], ref, (int64_t)m * n, 1e-5, 1e-5) == 0);
    ku_free_inputs(&s);
    free(got[0]);
    free(got[1]);
    free(a);
    free(b);
    free(ra);
    free(rb);
    free(ref);
}

/* Extents, strides and element access: out[i] describes tensor facts. */
static void test_tensor_queries(void) {
    static const char *body =
        "auto t = tensor<device float, dextents<int32_t, 2>, tensor_inline>(x, dextents<int32_t, 2>(5, 3));\n"
        "auto s = t.slice(2, 1);\n"
        "auto z = t.slice<2, 8>(1, 0);\n"
        "auto st = tensor<device float, extents<int32_t, 3, dynamic_extent>, tensor_inline>(x, extents<int32_t, 3, dynamic_extent>(4), array<int32_t, 2>{1, 5});\n"
        "out[0] = s.get_extent(0); out[1] = s.get_extent(1);\n"
        "out[2] = s[1, 1];\n"           /* x[(1+1)*5 + 2+1] = x[13] */
        "out[3] = z.get_extent(0); out[4] = z.get_extent(1); out[5] = z[1, 2];\n" /* x[2*5+2] = 12 */
        "out[6] = st.get_extent(0); out[7] = st.get_extent(1); out[8] = st[2, 3];\n" /* x[17] */
        "out[9] = t.get_stride(1); out[10] = float(decltype(st)::extents_type::static_extent(0));\n"
        "out[11] = t.slice(7, 9).get_extent(0);\n";
    float x[20], got[12];
    for (int i = 0; i < 20; i++) x[i] = (float)i;
    const double want[12] = {3, 2, 13, 2, 3, 12, 3, 4, 17, 5, 3, 0};
    const char *err = NULL;
    (void)err;
    alloy_array *in = ku_array(ALLOY_FLOAT32, 20, x);
    ku_spec s = {0};
    s.name = "tensor_queries";
    s.body = body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = in;
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = 12;
    s.out_host[0] = got;
    s.has_init = 1;
    s.init = NAN;
    s.grid[0] = 1;
    s.tg[0] = 1;
    CHECK_OK(ku_run(&s));
    CHECK(ku_cmp_f32("queries", got, want, 12, 0, 0) == 0);
    ku_free_inputs(&s);
}

/* ---- (4) what is refused, and how ----------------------------------------- */

static void test_unsupported_combinations(void) {
    static const char *int_body =
        "auto tA = tensor<device int, dextents<int32_t, 2>, tensor_inline>(A, dextents<int32_t, 2>(4, 4));\n"
        "auto tC = tensor<device float, dextents<int32_t, 2>, tensor_inline>(C, dextents<int32_t, 2>(4, 4));\n"
        "constexpr auto d = matmul2d_descriptor(4, 4);\n"
        "matmul2d<d, execution_thread> op;\n"
        "op.run(tA, tA, tC);\n";
    int32_t a[16] = {0};
    ku_spec s = {0};
    s.name = "tensor_bad_types";
    s.body = int_body;
    s.n_in = 1;
    s.in_names[0] = "A";
    s.in[0] = ku_array(ALLOY_INT32, 16, a);
    s.n_out = 1;
    s.out_names[0] = "C";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = 16;
    s.grid[0] = 1;
    s.tg[0] = 1;
    CHECK_FAILS(ku_run(&s), ALLOY_ERROR_COMPILE, "unsupported element types");
    s.name = "tensor_bad_scope";
    s.body =
        "auto tA = tensor<device int, dextents<int32_t, 2>, tensor_inline>(A, dextents<int32_t, 2>(4, 4));\n"
        "constexpr auto d = matmul2d_descriptor(4, 4);\n"
        "matmul2d<d, execution_threads<2>> op;\n";
    CHECK_FAILS(ku_run(&s), ALLOY_ERROR_COMPILE, "the scope must be execution_thread");
    ku_free_inputs(&s);
}

int main(void) {
    harness_seed();
    RUN(test_tensor_queries);
    RUN(test_matmul2d_tensor_destination);
    RUN(test_cooperative_epilogue);
    RUN(test_scopes_and_k_loops);
    RUN(test_unsupported_combinations);
    return harness_finish();
}
