/* test_msl_halfbf.c — spec §3 half / bfloat (and the float16_t / bfloat16_t
 * aliases): float -> half/bfloat conversion rounds to nearest even with
 * gradual underflow and overflow to infinity, every half/bfloat bit pattern
 * widens exactly, and half/bfloat arithmetic rounds after every operation.
 * The reference is the test's own double-precision rounding code
 * (kernel_util.h), not the library's. */
#include "kernel_util.h"

/* Float inputs that exercise rounding: random magnitudes over the whole half
 * and bfloat ranges, exact ties, the overflow edge, subnormals, signed zero. */
static float *make_round_inputs(int64_t n) {
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)harness_rand_u64();
        if (i % 2) /* restrict the exponent to the interesting half range */
            u = (u & 0x807fffffu) | ((uint32_t)(127 - 26 + (int)(harness_rand_u64() % 44)) << 23);
        x[i] = ku_f32_from_bits(u);
        if (isnan(x[i])) x[i] = 1.0f;
    }
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f,
                             1.0f + 0x1p-11f,          /* half tie -> 1.0 (even) */
                             1.0f + 3 * 0x1p-11f,      /* half tie -> 1 + 2^-9 (even) */
                             1.0f + 0x1p-8f,           /* bfloat tie -> 1.0 */
                             1.0f + 3 * 0x1p-8f,       /* bfloat tie -> up */
                             65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e6f,
                             0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, -0x1p-24f, 0x1.ffcp-15f,
                             0x1p-14f, 0x1p-133f, 0x1p-134f, 0x1.8p-134f, 3.3961e38f, 3e38f,
                             INFINITY, -INFINITY, 1e-40f, -1e-40f, 2049.0f, 2051.0f, 0.1f, 1.0f/3};
    int64_t ns = (int64_t)(sizeof special / sizeof special[0]);
    for (int64_t i = 0; i < ns && i < n; i++) x[i] = special[i];
    return x;
}

/* half(x), bfloat(x), float16_t(x), bfloat16_t(x) and implicit conversion on
 * store, vs correctly rounded references, bit for bit. */
static void test_float_to_half_bfloat(void) {
    const int64_t n = 5001;
    float *x = make_round_inputs(n);
    x[n - 1] = NAN;
    uint16_t *h = malloc((size_t)n * 2), *b = malloc((size_t)n * 2), *h2 = malloc((size_t)n * 2),
             *b2 = malloc((size_t)n * 2), *h3 = malloc((size_t)n * 2);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "to_half_bfloat";
    s.body = "uint i = thread_position_in_grid.x;\n"
             "h[i] = half(x[i]);\n"
             "b[i] = bfloat(x[i]);\n"
             "h2[i] = static_cast<float16_t>(x[i]);\n"
             "b2[i] = bfloat16_t(x[i]);\n"
             "h3[i] = x[i]; /* implicit conversion on store */\n";
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, x);
    s.n_out = 5;
    const char *names[] = {"h", "b", "h2", "b2", "h3"};
    void *hosts[] = {h, b, h2, b2, h3};
    for (int j = 0; j < 5; j++) {
        s.out_names[j] = names[j];
        s.out_dtype[j] = (j == 1 || j == 3) ? ALLOY_BFLOAT16 : ALLOY_FLOAT16;
        s.out_n[j] = n;
        s.out_host[j] = hosts[j];
    }
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 128;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int j = 0; j < 5; j++) {
            int bf = (j == 1 || j == 3);
            uint16_t got = ((uint16_t *)hosts[j])[i];
            uint16_t want = bf ? ku_bf16_bits(x[i]) : ku_f16_bits(x[i]);
            int ok;
            if (isnan(x[i]))
                ok = bf ? ((got & 0x7f80) == 0x7f80 && (got & 0x7f)) : ((got & 0x7c00) == 0x7c00 && (got & 0x3ff));
            else
                ok = got == want;
            if (!ok) {
                if (bad < 8)
                    fprintf(stderr, "  %s(%a): got 0x%04x, want 0x%04x\n", names[j], (double)x[i],
                            got, want);
                bad++;
            }
        }
    }
    CHECK_MSG(bad == 0, "%d wrong conversions", bad);
    free(x); free(h); free(b); free(h2); free(b2); free(h3);
}

/* float(h) and float(b) for all 65536 bit patterns: exact. */
static void test_widen_all_patterns(void) {
    const int64_t n = 65536;
    uint16_t *bits = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) bits[i] = (uint16_t)i;
    float *fh = malloc((size_t)n * 4), *fb = malloc((size_t)n * 4);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "widen_patterns";
    s.body = "uint i = thread_position_in_grid.x;\n"
             "fh[i] = float(h[i]);\n"
             "fb[i] = static_cast<float>(b[i]);\n";
    s.n_in = 2;
    s.in_names[0] = "h";
    s.in_names[1] = "b";
    s.in[0] = ku_array(ALLOY_FLOAT16, n, bits);
    s.in[1] = ku_array(ALLOY_BFLOAT16, n, bits);
    s.n_out = 2;
    s.out_names[0] = "fh";
    s.out_names[1] = "fb";
    s.out_dtype[0] = s.out_dtype[1] = ALLOY_FLOAT32;
    s.out_n[0] = s.out_n[1] = n;
    s.out_host[0] = fh;
    s.out_host[1] = fb;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 256;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    double *rh = malloc((size_t)n * sizeof(double)), *rb = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        rh[i] = ku_f16_value((uint16_t)i);
        rb[i] = ku_bf16_value((uint16_t)i);
    }
    CHECK(ku_cmp_f32("float(half)", fh, rh, n, 0, 0) == 0);
    CHECK(ku_cmp_f32("float(bfloat)", fb, rb, n, 0, 0) == 0);
    /* signed zeros keep their sign */
    CHECK(signbit(fh[0x8000]) && signbit(fb[0x8000]));
    free(bits); free(fh); free(fb); free(rh); free(rb);
}

/* Arithmetic in half and bfloat rounds after each operation; mixing with
 * float promotes to float. References round in double (exact products and
 * quotients are then correctly rounded once). */
static void run_arith(int bf) {
    const int64_t n = 2049;
    uint16_t *a = malloc((size_t)n * 2), *b = malloc((size_t)n * 2);
    double *da = malloc((size_t)n * sizeof(double)), *db = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        double va = harness_uniform(-40, 40), vb = harness_uniform(0.5, 30);
        if (i % 7 == 0) vb = -vb;
        a[i] = bf ? ku_bf16_bits(va) : ku_f16_bits(va);
        b[i] = bf ? ku_bf16_bits(vb) : ku_f16_bits(vb);
        da[i] = bf ? ku_bf16_value(a[i]) : ku_f16_value(a[i]);
        db[i] = bf ? ku_bf16_value(b[i]) : ku_f16_value(b[i]);
    }
    const int K = 9;
    uint16_t *o = malloc((size_t)(n * K) * 2);
    float *f = malloc((size_t)(n * 2) * 4);
    char body[2048];
    const char *T = bf ? "bfloat" : "half";
    snprintf(body, sizeof body,
             "uint i = thread_position_in_grid.x;\n"
             "%s x = a[i], y = b[i];\n"
             "%s p = x * y;\n"
             "%s s = p + x;\n"
             "o[%d*i+0] = p;\n"
             "o[%d*i+1] = s;\n"
             "o[%d*i+2] = x / y;\n"
             "o[%d*i+3] = x - y * y;\n"
             "%s acc = %s(0.0f);\n"
             "for (int k = 0; k < 10; k++) acc += x;   /* rounds every step */\n"
             "o[%d*i+4] = acc;\n"
             "%s m = -x; m *= y; o[%d*i+5] = m;\n"
             "o[%d*i+6] = (x < y) ? x : y;\n"
             "o[%d*i+7] = %s(x > y);\n"
             "o[%d*i+8] = x * %s(0.1f);\n"
             "f[2*i+0] = x * 1.0001f;      /* half op float -> float */\n"
             "f[2*i+1] = float(x) / 3.0f;\n",
             T, T, T, K, K, K, K, T, T, K, T, K, K, K, T, K, T);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = bf ? "bfloat_arith" : "half_arith";
    s.body = body;
    s.n_in = 2;
    s.in_names[0] = "a";
    s.in_names[1] = "b";
    s.in[0] = ku_array(bf ? ALLOY_BFLOAT16 : ALLOY_FLOAT16, n, a);
    s.in[1] = ku_array(bf ? ALLOY_BFLOAT16 : ALLOY_FLOAT16, n, b);
    s.n_out = 2;
    s.out_names[0] = "o";
    s.out_names[1] = "f";
    s.out_dtype[0] = bf ? ALLOY_BFLOAT16 : ALLOY_FLOAT16;
    s.out_dtype[1] = ALLOY_FLOAT32;
    s.out_n[0] = n * K;
    s.out_n[1] = n * 2;
    s.out_host[0] = o;
    s.out_host[1] = f;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 64;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    double (*R)(double) = bf ? ku_round_bf16 : ku_round_half;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = da[i], y = db[i];
        double ref[9];
        ref[0] = R(x * y);
        ref[1] = R(ref[0] + x);
        ref[2] = R(x / y);
        ref[3] = R(x - R(y * y));
        double acc = 0;
        for (int k = 0; k < 10; k++) acc = R(acc + x);
        ref[4] = acc;
        ref[5] = R(-x * y);
        ref[6] = x < y ? x : y;
        ref[7] = x > y ? 1 : 0;
        ref[8] = R(x * R(0.1f));
        for (int k = 0; k < K; k++) {
            uint16_t g = o[i * K + k];
            double gv = bf ? ku_bf16_value(g) : ku_f16_value(g);
            if (!(gv == ref[k])) {
                if (bad < 8)
                    fprintf(stderr, "  %s op %d (x=%g y=%g): got %.9g, want %.9g\n", T, k, x, y,
                            gv, ref[k]);
                bad++;
            }
        }
        double f0 = (double)(float)(x * (double)1.0001f);
        double f1 = (double)((float)x / 3.0f);
        if ((double)f[2 * i] != f0 || (double)f[2 * i + 1] != f1) {
            if (bad < 8)
                fprintf(stderr, "  %s float promotion (x=%g): got %.9g %.9g, want %.9g %.9g\n", T,
                        x, f[2 * i], f[2 * i + 1], f0, f1);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d wrong %s results", bad, T);
    free(a); free(b); free(da); free(db); free(o); free(f);
}

static void test_half_arith(void) { run_arith(0); }
static void test_bfloat_arith(void) { run_arith(1); }

/* Overflow and underflow in half arithmetic; half limits. */
static void test_half_edges(void) {
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "if (i != 0) return;\n"
        "half big = half(60000.0f);\n"
        "out[0] = float(big + big);                 /* inf */\n"
        "half tiny = half(0x1p-24f);\n"
        "out[1] = float(tiny * half(0.5f));         /* tie -> 0 (even) */\n"
        "out[2] = float(tiny * half(1.5f));         /* 1.5 ulp -> 2 ulp (even) */\n"
        "out[3] = float(half(1.0f) / half(0.0f));   /* inf */\n"
        "out[4] = float(-half(0.0f));               /* -0 */\n"
        "out[5] = float(half(2048.0f) + half(1.0f)); /* 2049 -> 2048 (even) */\n"
        "out[6] = float(bfloat(256.0f) + bfloat(1.0f)); /* 257 -> 256 (even) */\n"
        "out[7] = float(bfloat(1e38f) * bfloat(10.0f)); /* inf */\n";
    double ref[8] = {INFINITY, 0.0, 0x1p-23, INFINITY, -0.0, 2048, 256, INFINITY};
    float got[8];
    float dummy = 0;
    CHECK_OK(ku_run_1in1out("half_edges", body, NULL, ALLOY_FLOAT32, 1, &dummy, ALLOY_FLOAT32, 8,
                            got, 1, 1, 777));
    CHECK(ku_cmp_f32("half_edges", got, ref, 8, 0, 0) == 0);
    CHECK(signbit(got[4]));
}

int main(void) {
    RUN(test_float_to_half_bfloat);
    RUN(test_widen_all_patterns);
    RUN(test_half_arith);
    RUN(test_bfloat_arith);
    RUN(test_half_edges);
    return harness_finish();
}
