/* test_msl_matrix.c — spec §3 simdgroup_matrix 8x8 (float, half, bfloat):
 * simdgroup_load/store with a row stride and with transpose,
 * simdgroup_multiply, simdgroup_multiply_accumulate,
 * make_filled_simdgroup_matrix, the diagonal constructor, and
 * thread_elements() with Metal's lane layout (lane l holds (row, col) and
 * (row, col+1), q = l/4, row = (q&4) + (l/2)%4, col = (q&2)*2 + (l%2)*2).
 * A batch of 16x16 GEMMs built from 8x8 tiles is checked against a C
 * reference; entries are small integers so every type is exact. */
#include "kernel_util.h"

static const char *gemm_body =
    "uint sg = simdgroup_index_in_threadgroup;\n"
    "uint b = threadgroup_position_in_grid.x;\n"
    "uint ti = sg / 2, tj = sg % 2;\n"
    "const device T* Ab = A + b * 256;\n"
    "const device T* Bb = B + b * 256;\n"
    "simdgroup_matrix<T, 8, 8> acc = make_filled_simdgroup_matrix<T, 8, 8>(T(0));\n"
    "simdgroup_matrix<T, 8, 8> acct = make_filled_simdgroup_matrix<T, 8, 8>(T(0));\n"
    "for (uint k = 0; k < 2; k++) {\n"
    "  simdgroup_matrix<T, 8, 8> a, at, bm;\n"
    "  simdgroup_load(a, Ab + (ti * 8) * 16 + k * 8, 16);\n"
    "  simdgroup_load(bm, Bb + (k * 8) * 16 + tj * 8, 16);\n"
    "  simdgroup_multiply_accumulate(acc, a, bm, acc);\n"
    "  /* A^T tile (ti, k) = transpose of A's tile (k, ti) */\n"
    "  simdgroup_load(at, Ab + (k * 8) * 16 + ti * 8, 16, ulong2(0, 0), true);\n"
    "  simdgroup_multiply_accumulate(acct, at, bm, acct);\n"
    "}\n"
    "simdgroup_store(acc, C + b * 256 + (ti * 8) * 16 + tj * 8, 16);\n"
    "simdgroup_store(acct, CT + b * 256 + (ti * 8) * 16 + tj * 8, 16);\n"
    "/* (A B)^T: store the tile transposed at tile (tj, ti) */\n"
    "simdgroup_store(acc, CS + b * 256 + (tj * 8) * 16 + ti * 8, 16, ulong2(0, 0), true);\n";

static uint16_t enc(alloy_dtype dt, double v) {
    return dt == ALLOY_FLOAT16 ? ku_f16_bits(v) : ku_bf16_bits(v);
}
static double dec(alloy_dtype dt, const void *p, int64_t i) {
    if (dt == ALLOY_FLOAT32) return ((const float *)p)[i];
    uint16_t b = ((const uint16_t *)p)[i];
    return dt == ALLOY_FLOAT16 ? ku_f16_value(b) : ku_bf16_value(b);
}

static void run_gemm(alloy_dtype dt) {
    const int batch = 3, N = 16, NN = N * N;
    size_t es = alloy_dtype_size(dt);
    double *a = malloc(batch * NN * sizeof(double)), *b = malloc(batch * NN * sizeof(double));
    void *ha = malloc(batch * NN * es), *hb = malloc(batch * NN * es);
    for (int i = 0; i < batch * NN; i++) {
        a[i] = (double)((int)(harness_rand_u64() % 5) - 2);
        b[i] = (double)((int)(harness_rand_u64() % 5) - 2);
        if (dt == ALLOY_FLOAT32) {
            ((float *)ha)[i] = (float)a[i];
            ((float *)hb)[i] = (float)b[i];
        } else {
            ((uint16_t *)ha)[i] = enc(dt, a[i]);
            ((uint16_t *)hb)[i] = enc(dt, b[i]);
        }
    }
    void *c = malloc(batch * NN * es), *ct = malloc(batch * NN * es), *cs = malloc(batch * NN * es);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "simdgroup_gemm";
    s.body = gemm_body;
    s.n_in = 2;
    s.in_names[0] = "A";
    s.in_names[1] = "B";
    s.in[0] = ku_array(dt, batch * NN, ha);
    s.in[1] = ku_array(dt, batch * NN, hb);
    s.n_out = 3;
    s.out_names[0] = "C";
    s.out_names[1] = "CT";
    s.out_names[2] = "CS";
    void *hosts[3] = {c, ct, cs};
    for (int j = 0; j < 3; j++) {
        s.out_dtype[j] = dt;
        s.out_n[j] = batch * NN;
        s.out_host[j] = hosts[j];
    }
    s.grid[0] = 128 * batch;
    s.tg[0] = 128;
    s.has_init = 1;
    s.init = NAN;
    s.n_tmpl = 1;
    s.tmpl[0].name = "T";
    s.tmpl[0].kind = 2;
    s.tmpl[0].dvalue = dt;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    int bad = 0;
    for (int q = 0; q < batch; q++) {
        const double *A = a + q * NN, *B = b + q * NN;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                double r = 0, rt = 0;
                for (int k = 0; k < N; k++) {
                    r += A[i * N + k] * B[k * N + j];
                    rt += A[k * N + i] * B[k * N + j];
                }
                double g = dec(dt, c, q * NN + i * N + j), gt = dec(dt, ct, q * NN + i * N + j);
                double gs = dec(dt, cs, q * NN + j * N + i);
                if (g != r || gt != rt || gs != r) {
                    if (bad < 6)
                        fprintf(stderr,
                                "  %s batch %d (%d,%d): AB got %g want %g; A^T B got %g want %g;"
                                " (AB)^T got %g\n",
                                alloy_dtype_name(dt), q, i, j, g, r, gt, rt, gs);
                    bad++;
                }
            }
    }
    CHECK_MSG(bad == 0, "%d wrong GEMM entries (%s)", bad, alloy_dtype_name(dt));
    free(a); free(b); free(ha); free(hb); free(c); free(ct); free(cs);
}

static void test_gemm_float(void) { run_gemm(ALLOY_FLOAT32); }
static void test_gemm_half(void) { run_gemm(ALLOY_FLOAT16); }
static void test_gemm_bfloat(void) { run_gemm(ALLOY_BFLOAT16); }

/* thread_elements() lane layout (read and write), simdgroup_multiply,
 * make_filled_simdgroup_matrix and the diagonal constructor. */
static void test_thread_elements(void) {
    const char *body =
        "uint lane = thread_index_in_simdgroup;\n"
        "simdgroup_float8x8 m;\n"
        "simdgroup_load(m, M, 8);\n"
        "float2 te = float2(m.thread_elements()[0], m.thread_elements()[1]);\n"
        "E[2 * lane] = te.x;\n"
        "E[2 * lane + 1] = te.y;\n"
        "m.thread_elements()[0] = 1000.0f + float(2 * lane);\n"
        "m.thread_elements()[1] = 1001.0f + float(2 * lane);\n"
        "simdgroup_store(m, W, 8);\n"
        "simdgroup_float8x8 f = make_filled_simdgroup_matrix<float, 8, 8>(2.0f);\n"
        "simdgroup_float8x8 d;\n"
        "simdgroup_load(m, M, 8);\n"
        "simdgroup_multiply(d, m, f);\n"
        "simdgroup_store(d, D, 8);\n"
        "simdgroup_float8x8 dg = simdgroup_float8x8(3.0f);\n"
        "simdgroup_multiply(d, dg, m);\n"
        "simdgroup_store(d, D2, 8);\n"
        "simdgroup_half8x8 hm;\n"
        "simdgroup_load(hm, MH, 8);\n"
        "EH[2 * lane] = float(hm.thread_elements()[0]);\n"
        "EH[2 * lane + 1] = float(hm.thread_elements()[1]);\n";
    float M[64];
    uint16_t MH[64];
    for (int i = 0; i < 64; i++) {
        M[i] = (float)(i - 20);
        MH[i] = ku_f16_bits(i * 2.0);
    }
    float E[64], W[64], D[64], D2[64], EH[64];
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "thread_elements";
    s.body = body;
    s.n_in = 2;
    s.in_names[0] = "M";
    s.in_names[1] = "MH";
    s.in[0] = ku_array(ALLOY_FLOAT32, 64, M);
    s.in[1] = ku_array(ALLOY_FLOAT16, 64, MH);
    s.n_out = 5;
    const char *names[5] = {"E", "W", "D", "D2", "EH"};
    float *hosts[5] = {E, W, D, D2, EH};
    for (int j = 0; j < 5; j++) {
        s.out_names[j] = names[j];
        s.out_dtype[j] = ALLOY_FLOAT32;
        s.out_n[j] = 64;
        s.out_host[j] = hosts[j];
    }
    s.grid[0] = 32;
    s.tg[0] = 32;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    double rE[64], rW[64], rD[64], rD2[64], rEH[64];
    for (int l = 0; l < 32; l++) {
        int q = l / 4, row = (q & 4) + ((l / 2) % 4), col = (q & 2) * 2 + (l % 2) * 2;
        rE[2 * l] = M[row * 8 + col];
        rE[2 * l + 1] = M[row * 8 + col + 1];
        rEH[2 * l] = 2.0 * (row * 8 + col);
        rEH[2 * l + 1] = 2.0 * (row * 8 + col + 1);
        rW[row * 8 + col] = 1000 + 2 * l;
        rW[row * 8 + col + 1] = 1001 + 2 * l;
    }
    for (int r = 0; r < 8; r++) {
        double rs = 0;
        for (int k = 0; k < 8; k++) rs += M[r * 8 + k];
        for (int c = 0; c < 8; c++) {
            rD[r * 8 + c] = 2 * rs;
            rD2[r * 8 + c] = 3.0 * M[r * 8 + c];
        }
    }
    CHECK(ku_cmp_f32("thread_elements read", E, rE, 64, 0, 0) == 0);
    CHECK(ku_cmp_f32("thread_elements write", W, rW, 64, 0, 0) == 0);
    CHECK(ku_cmp_f32("multiply by filled", D, rD, 64, 0, 0) == 0);
    CHECK(ku_cmp_f32("multiply by diagonal", D2, rD2, 64, 0, 0) == 0);
    CHECK(ku_cmp_f32("half thread_elements", EH, rEH, 64, 0, 0) == 0);
}

/* Non-integer float GEMM (24x40 * 40x16, k loop of 5 tiles) within a
 * float-accumulation tolerance. */
static void test_gemm_float_general(void) {
    const int M = 24, K = 40, N = 16;
    float *a = malloc(M * K * 4), *b = malloc(K * N * 4), *c = malloc(M * N * 4);
    harness_fill_f32(a, M * K, -1, 1);
    harness_fill_f32(b, K * N, -1, 1);
    const char *body =
        "uint sg = simdgroup_index_in_threadgroup;\n"
        "uint ti = sg / 2, tj = sg % 2;   /* 3 x 2 tiles of 8x8 */\n"
        "simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);\n"
        "for (uint k = 0; k < 5; k++) {\n"
        "  simdgroup_float8x8 x, y;\n"
        "  simdgroup_load(x, a + ti * 8 * 40 + k * 8, 40);\n"
        "  simdgroup_load(y, b + k * 8 * 16 + tj * 8, 16);\n"
        "  simdgroup_multiply_accumulate(acc, x, y, acc);\n"
        "}\n"
        "simdgroup_store(acc, c + ti * 8 * 16 + tj * 8, 16);\n";
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "simdgroup_gemm_general";
    s.body = body;
    s.n_in = 2;
    s.in_names[0] = "a";
    s.in_names[1] = "b";
    s.in[0] = ku_array(ALLOY_FLOAT32, M * K, a);
    s.in[1] = ku_array(ALLOY_FLOAT32, K * N, b);
    s.n_out = 1;
    s.out_names[0] = "c";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = M * N;
    s.out_host[0] = c;
    s.grid[0] = 192;
    s.tg[0] = 192;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    double *r = malloc(M * N * sizeof(double));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double t = 0;
            for (int k = 0; k < K; k++) t += (double)a[i * K + k] * b[k * N + j];
            r[i * N + j] = t;
        }
    /* 40 products of |.| < 1 summed in float: error < 40 * 2^-24 * 40 */
    CHECK(ku_cmp_f32("gemm 24x40x16", c, r, M * N, 1e-4, 1e-5) == 0);
    free(a); free(b); free(c); free(r);
}

int main(void) {
    RUN(test_thread_elements);
    RUN(test_gemm_float);
    RUN(test_gemm_half);
    RUN(test_gemm_bfloat);
    RUN(test_gemm_float_general);
    return harness_finish();
}
