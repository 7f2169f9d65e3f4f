/* test_msl_scalars.c — spec §3 scalars: every scalar type and alias a body
 * may name, the float constants (INFINITY, NAN, MAXFLOAT, FLT_MAX, ...),
 * scalar conversions, and inputs/outputs of every dtype, each checked
 * against a C reference through the public API. */
#include "kernel_util.h"

#include <float.h>
#include <limits.h>

/* Every dtype as an input and an output: the kernel copies each element
 * (must be bit exact) and converts it to float (must equal C's conversion). */
static void test_every_dtype_in_out(void) {
    static const alloy_dtype dts[] = {ALLOY_BOOL,    ALLOY_INT8,    ALLOY_UINT8,  ALLOY_INT16,
                                      ALLOY_UINT16,  ALLOY_INT32,   ALLOY_UINT32, ALLOY_INT64,
                                      ALLOY_UINT64,  ALLOY_FLOAT16, ALLOY_BFLOAT16,
                                      ALLOY_FLOAT32, ALLOY_FLOAT64};
    const int64_t n = 33;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        alloy_dtype dt = dts[d];
        size_t es = alloy_dtype_size(dt);
        unsigned char *in = calloc((size_t)n, 8), *out = calloc((size_t)n, 8);
        double *asf = calloc((size_t)n, sizeof(double));
        float *gotf = calloc((size_t)n, sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            /* Extreme and ordinary values of each type, with the C value the
             * kernel's float() conversion must give (exactly representable). */
            int64_t v = (i % 5 == 0) ? -(int64_t)i * 3 : (int64_t)i * 7 - 11;
            unsigned char *p = in + (size_t)i * es;
            switch (dt) {
            case ALLOY_BOOL: p[0] = (unsigned char)(i % 3 == 0); asf[i] = p[0]; break;
            case ALLOY_INT8: { int8_t x = i == 1 ? INT8_MIN : i == 2 ? INT8_MAX : (int8_t)v; memcpy(p, &x, 1); asf[i] = x; break; }
            case ALLOY_UINT8: { uint8_t x = i == 1 ? 255 : (uint8_t)(i * 7); memcpy(p, &x, 1); asf[i] = x; break; }
            case ALLOY_INT16: { int16_t x = i == 1 ? INT16_MIN : i == 2 ? INT16_MAX : (int16_t)(v * 100); memcpy(p, &x, 2); asf[i] = x; break; }
            case ALLOY_UINT16: { uint16_t x = i == 1 ? 65535 : (uint16_t)(i * 1000); memcpy(p, &x, 2); asf[i] = x; break; }
            case ALLOY_INT32: { int32_t x = i == 1 ? INT32_MIN : i == 2 ? -7 : (int32_t)(v * 100000); memcpy(p, &x, 4); asf[i] = (float)x; break; }
            case ALLOY_UINT32: { uint32_t x = i == 1 ? 0xFFFFFFFFu : (uint32_t)(i * 100000u); memcpy(p, &x, 4); asf[i] = (float)x; break; }
            case ALLOY_INT64: { int64_t x = i == 1 ? INT64_MIN : i == 2 ? INT64_MAX : v * 1000000007LL; memcpy(p, &x, 8); asf[i] = (float)x; break; }
            case ALLOY_UINT64: { uint64_t x = i == 1 ? UINT64_MAX : (uint64_t)i * 10000000019ULL; memcpy(p, &x, 8); asf[i] = (float)x; break; }
            case ALLOY_FLOAT16: { uint16_t b = ku_f16_bits((double)v * 0.375); if (i == 1) b = 0x7bff; if (i == 2) b = 0x0001; if (i == 3) b = 0xfc00; memcpy(p, &b, 2); asf[i] = ku_f16_value(b); break; }
            case ALLOY_BFLOAT16: { uint16_t b = ku_bf16_bits((double)v * 1.25e10); if (i == 1) b = 0x7f7f; if (i == 2) b = 0x0001; memcpy(p, &b, 2); asf[i] = ku_bf16_value(b); break; }
            case ALLOY_FLOAT32: { float x = (float)v * 0.1f; if (i == 1) x = FLT_MAX; if (i == 2) x = -INFINITY; memcpy(p, &x, 4); asf[i] = x; break; }
            case ALLOY_FLOAT64: { double x = (double)v * 0.1; if (i == 1) x = 1e300; memcpy(p, &x, 8); asf[i] = (float)x; break; }
            default: break;
            }
        }
        ku_spec s;
        memset(&s, 0, sizeof s);
        char name[64];
        snprintf(name, sizeof name, "dtype_io_%s", alloy_dtype_name(dt));
        s.name = name;
        s.body = "uint i = thread_position_in_grid.x;\n"
                 "out[i] = in[i];\n"
                 "f[i] = static_cast<float>(in[i]);\n";
        s.n_in = 1;
        s.in_names[0] = "in";
        s.in[0] = ku_array(dt, n, in);
        s.n_out = 2;
        s.out_names[0] = "out";
        s.out_names[1] = "f";
        s.out_dtype[0] = dt;
        s.out_dtype[1] = ALLOY_FLOAT32;
        s.out_n[0] = s.out_n[1] = n;
        s.out_host[0] = out;
        s.out_host[1] = gotf;
        s.grid[0] = (uint32_t)n;
        s.tg[0] = 8;
        s.has_init = 1;
        s.init = 0; /* bool/ints: 0 is a valid value, so the copy check covers it */
        CHECK_OK(ku_run(&s));
        ku_free_inputs(&s);
        CHECK_MSG(memcmp(in, out, (size_t)n * es) == 0, "copy of %s not bit exact",
                  alloy_dtype_name(dt));
        CHECK_MSG(ku_cmp_f32(alloy_dtype_name(dt), gotf, asf, n, 0, 0) == 0,
                  "float() of %s", alloy_dtype_name(dt));
        free(in); free(out); free(asf); free(gotf);
    }
}

/* All §3 scalar type names and aliases declare, convert and wrap like Metal. */
static void test_scalar_types(void) {
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "if (i != 0) return;\n"
        "char c = -5; uchar uc = 250; short s = -300; ushort us = 60000;\n"
        "int n = -70000; uint u = 4000000000u; long l = -5000000000l; ulong ul = 10000000000000000000ul;\n"
        "size_t sz = 123456789012ul;\n"
        "int8_t i8 = -128; uint8_t u8 = 255; int16_t i16 = -32768; uint16_t u16 = 65535;\n"
        "int32_t i32 = -2147483647 - 1; uint32_t u32 = 4294967295u;\n"
        "int64_t i64 = -9000000000000000000l; uint64_t u64 = 18000000000000000000ul;\n"
        "bool b = true;\n"
        "out[0] = c; out[1] = uc; out[2] = s; out[3] = us; out[4] = n; out[5] = u;\n"
        "out[6] = l; out[7] = (long)ul; out[8] = (long)sz; out[9] = i8; out[10] = u8;\n"
        "out[11] = i16; out[12] = u16; out[13] = i32; out[14] = u32; out[15] = i64;\n"
        "out[16] = (long)u64; out[17] = b;\n"
        "uchar w = uc + uchar(10);       /* wraps to 4 */\n"
        "out[18] = w;\n"
        "char cw = char(127); cw += char(1); /* wraps to -128 */\n"
        "out[19] = cw;\n"
        "uint uw = 0u; uw -= 1u;\n"
        "out[20] = uw;\n"
        "out[21] = sizeof(char); out[22] = sizeof(short); out[23] = sizeof(int);\n"
        "out[24] = sizeof(long); out[25] = sizeof(half); out[26] = sizeof(bfloat);\n"
        "out[27] = sizeof(float); out[28] = sizeof(float16_t); out[29] = sizeof(bfloat16_t);\n"
        "out[30] = sizeof(size_t); out[31] = sizeof(bool); out[32] = sizeof(ulong);\n"
        "half h = half(2.5f); bfloat bf = bfloat(-3.0f); float16_t f16 = float16_t(0.25f);\n"
        "bfloat16_t b16 = bfloat16_t(1024.0f);\n"
        "out[33] = (long)(float(h) * 4.0f); out[34] = (long)float(bf); out[35] = (long)(float(f16) * 8.0f);\n"
        "out[36] = (long)float(b16);\n"
        "out[37] = static_cast<int>(-2.7f); out[38] = static_cast<uint>(3.9f);\n"
        "out[39] = int(float(7) / 2.0f); out[40] = long(double(1) / 4.0 * 100.0);\n"
        "out[41] = ushort(-1); out[42] = short(40000); out[43] = int(uint(0x80000000u));\n";
    int64_t ref[44] = {-5, 250, -300, 60000, -70000, 4000000000LL, -5000000000LL,
                       (int64_t)10000000000000000000ULL, 123456789012LL, -128, 255, -32768,
                       65535, INT32_MIN, 4294967295LL, -9000000000000000000LL,
                       (int64_t)18000000000000000000ULL, 1, 4, -128, 4294967295LL,
                       1, 2, 4, 8, 2, 2, 4, 2, 2, 8, 1, 8,
                       10, -3, 2, 1024, -2, 3, 3, 25, 65535, 40000 - 65536, INT32_MIN};
    int64_t got[44];
    float dummy = 0;
    CHECK_OK(ku_run_1in1out("scalar_types", body, NULL, ALLOY_FLOAT32, 1, &dummy, ALLOY_INT64,
                            44, got, 1, 1, -999));
    CHECK(ku_cmp_i64("scalar_types", got, ref, 44) == 0);
}

/* The float constants of §3. */
static void test_float_constants(void) {
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "if (i != 0) return;\n"
        "out[0] = INFINITY; out[1] = -INFINITY; out[2] = NAN; out[3] = MAXFLOAT;\n"
        "out[4] = FLT_MAX; out[5] = FLT_MIN; out[6] = FLT_EPSILON;\n"
        "out[7] = isinf(INFINITY) ? 1.0f : 0.0f; out[8] = isnan(NAN) ? 1.0f : 0.0f;\n"
        "out[9] = (NAN == NAN) ? 1.0f : 0.0f; out[10] = -FLT_MAX;\n"
        "out[11] = HUGE_VALF; out[12] = M_PI_F; out[13] = M_E_F;\n";
    double ref[14] = {INFINITY, -INFINITY, NAN, FLT_MAX, FLT_MAX, FLT_MIN, FLT_EPSILON, 1, 1, 0,
                      -FLT_MAX, INFINITY, (float)3.14159265358979323846, (float)2.71828182845904523536};
    float got[14];
    float dummy = 0;
    CHECK_OK(ku_run_1in1out("float_constants", body, NULL, ALLOY_FLOAT32, 1, &dummy,
                            ALLOY_FLOAT32, 14, got, 1, 1, 12345));
    CHECK(ku_cmp_f32("float_constants", got, ref, 14, 0, 0) == 0);
}

/* Integer limits MSL provides (INT_MAX, ...) and integer promotions. */
static void test_int_constants(void) {
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "if (i != 0) return;\n"
        "out[0] = INT_MAX; out[1] = INT_MIN; out[2] = UINT_MAX; out[3] = SHRT_MAX;\n"
        "out[4] = CHAR_BIT; out[5] = UCHAR_MAX; out[6] = LONG_MAX;\n"
        "uchar a = 200, b = 100; out[7] = a + b; /* promoted to int: 300 */\n"
        "short s = -1; ushort us = 1; out[8] = s < us ? 1 : 0; /* int promotion */\n";
    int64_t ref[9] = {INT_MAX, INT_MIN, UINT_MAX, SHRT_MAX, 8, 255, INT64_MAX, 300, 1};
    int64_t got[9];
    float dummy = 0;
    CHECK_OK(ku_run_1in1out("int_constants", body, NULL, ALLOY_FLOAT32, 1, &dummy, ALLOY_INT64,
                            9, got, 1, 1, -1));
    CHECK(ku_cmp_i64("int_constants", got, ref, 9) == 0);
}

/* float <-> int conversions over many values (truncation toward zero,
 * unsigned wrap of negatives through int first), double arithmetic. */
static void test_conversions(void) {
    const int64_t n = 1000;
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)harness_uniform(-3e4, 3e4);
    x[0] = 0.5f; x[1] = -0.5f; x[2] = -0.0f; x[3] = 2147483520.0f; x[4] = -2147483648.0f;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "float v = in[i];\n"
        "out[4*i+0] = static_cast<int>(v);\n"
        "out[4*i+1] = (int)(short)(int)(v / 4.0f);\n"
        "out[4*i+2] = int(double(v) * 3.0);\n"
        "out[4*i+3] = int(uint(int(v)) >> 3);\n";
    int32_t *got = malloc((size_t)n * 4 * sizeof(int32_t));
    int32_t *ref = malloc((size_t)n * 4 * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        ref[4 * i + 0] = (int32_t)v;
        ref[4 * i + 1] = (int16_t)(int32_t)(v / 4.0f);
        double t = (double)v * 3.0;
        ref[4 * i + 2] = (t >= 2147483647.0 || t < -2147483648.0) ? 0 : (int32_t)t;
        ref[4 * i + 3] = (int32_t)((uint32_t)(int32_t)v >> 3);
    }
    /* element 3 and 4: double*3 overflows int: undefined in C++, don't check */
    CHECK_OK(ku_run_1in1out("conversions", body, NULL, ALLOY_FLOAT32, n, x, ALLOY_INT32, 4 * n,
                            got, (uint32_t)n, 64, -7));
    got[4 * 3 + 2] = ref[4 * 3 + 2];
    got[4 * 4 + 2] = ref[4 * 4 + 2];
    CHECK(ku_cmp_i32("conversions", got, ref, 4 * n) == 0);
    free(x); free(got); free(ref);
}

/* double in the body (CPU has it): correctly rounded double arithmetic. */
static void test_double(void) {
    if (alloy_device_backend(ku_device()) != ALLOY_BACKEND_CPU) {
        SKIP("double only checked on the CPU backend");
        return;
    }
    const int64_t n = 77;
    double *x = malloc((size_t)n * sizeof(double)), *got = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) x[i] = harness_uniform(-10, 10);
    CHECK_OK(ku_run_1in1out("double_math", "uint i = thread_position_in_grid.x;\n"
                            "out[i] = in[i] * in[i] / 3.0 + 1e-300;\n", NULL,
                            ALLOY_FLOAT64, n, x, ALLOY_FLOAT64, n, got, (uint32_t)n, 32, NAN));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != x[i] * x[i] / 3.0 + 1e-300;
    CHECK(bad == 0);
    free(x); free(got);
}

int main(void) {
    RUN(test_every_dtype_in_out);
    RUN(test_scalar_types);
    RUN(test_float_constants);
    RUN(test_int_constants);
    RUN(test_conversions);
    RUN(test_double);
    return harness_finish();
}
