/* test_msl_math.c — spec §3 math: the elementary functions unqualified, as
 * metal::, metal::precise:: and metal::fast:: (and fast::/precise:: under
 * `using namespace metal;`), fma clamp saturate mix step smoothstep select
 * sign fract rsqrt exp2 exp10 powr isnan isinf isfinite signbit copysign,
 * dot length normalize cross, popcount clz ctz mulhi extract_bits,
 * as_type<T>, static_cast, and MLX's helpers elem_to_loc, ceildiv and
 * Limits<T>. References are C double-precision functions; tolerances are
 * Metal's documented error bounds (ulps of float, 1 ulp = 2^-23 relative):
 * precise functions 4 ulp (pow 16 ulp, tan 6), fast functions the fast-math
 * bounds (absolute 2^-13 for sin/cos, 15 ulp for exp on |x| <= 4). */
#include "kernel_util.h"

#include <float.h>
#include <limits.h>

#define ULP 1.1920928955078125e-7
/* fast::exp(a)*0.5 + log(p) can cancel: its absolute error follows the
 * terms (|exp(4)*0.5| = 27), not the result. A fast exp is good to a few ulp
 * of its own value (CUDA's __expf: 2 + 1.173|x| ulp, 6 ulp at |x| = 4), so
 * allow 8 ulp of 27 absolute. */
#define FAST_SUM_ATOL (8 * 27 * ULP)

enum { A_, P_, U_ }; /* which input: a in [-4,4], p in [1e-3,100], u in [-1,1] */

typedef struct fn_case {
    const char *expr; /* in terms of a, p, u (floats) */
    int id;           /* reference selector */
    double atol, rtol;
} fn_case;

static double ref_fn(int id, double a, double p, double u) {
    switch (id) {
    case 0: return exp(a);
    case 1: return exp2(a);
    case 2: return pow(10.0, a);
    case 3: return log(p);
    case 4: return log2(p);
    case 5: return log10(p);
    case 6: return sqrt(p);
    case 7: return 1.0 / sqrt(p);
    case 8: return sin(a);
    case 9: return cos(a);
    case 10: return tan(u);
    case 11: return asin(u);
    case 12: return acos(u);
    case 13: return atan(a);
    case 14: return atan2(a, u);
    case 15: return sinh(u);
    case 16: return cosh(u);
    case 17: return tanh(a);
    case 18: return pow(p, a);
    case 19: return floor(a);
    case 20: return ceil(a);
    case 21: return round(a);
    case 22: return trunc(a);
    case 23: return rint(a);
    case 24: { double f = (double)(float)(a - floor(a)); return f > 0x1.fffffep-1 ? 0x1.fffffep-1 : f; }
    case 25: return fabs(a);
    case 26: return a > 0 ? 1.0 : a < 0 ? -1.0 : a;
    case 27: return copysign(a, u);
    case 28: return a < u ? a : u;
    case 29: return a > u ? a : u;
    case 30: return fmod(a, u);
    case 31: return (double)fmaf((float)a, (float)u, (float)p);
    case 32: return a < -1.5 ? -1.5 : a > 2.5 ? 2.5 : a;
    case 33: return a < 0 ? 0 : a > 1 ? 1 : a;
    case 34: return a + (u - a) * 0.25;
    case 35: return a < 0.5 ? 0.0 : 1.0;
    case 36: { double t = (a + 1.0) / 3.0; t = t < 0 ? 0 : t > 1 ? 1 : t; return t * t * (3 - 2 * t); }
    case 37: return a > u ? u : a;
    case 38: return exp(a) * 0.5 + log(p);
    case 39: return a * u;
    case 40: return a / p;
    case 41: return 1.0 / p;
    default: return NAN;
    }
}

/* tolerance classes */
#define PRE4 0, 4 * ULP
#define PRE_ABS 2 * ULP, 4 * ULP
#define EXACT 0, 0
#define HALFULP 0, 0.5 * ULP

static const fn_case precise_cases[] = {
    {"exp(a)", 0, PRE4},          {"exp2(a)", 1, PRE4},          {"exp10(a)", 2, PRE4},
    {"log(p)", 3, PRE_ABS},       {"log2(p)", 4, PRE_ABS},       {"log10(p)", 5, PRE_ABS},
    {"sqrt(p)", 6, HALFULP},      {"rsqrt(p)", 7, 0, 2 * ULP},   {"sin(a)", 8, PRE_ABS},
    {"cos(a)", 9, PRE_ABS},       {"tan(u)", 10, 2 * ULP, 6 * ULP}, {"asin(u)", 11, PRE_ABS},
    {"acos(u)", 12, PRE_ABS},     {"atan(a)", 13, PRE_ABS},      {"atan2(a, u)", 14, PRE_ABS},
    {"sinh(u)", 15, PRE_ABS},     {"cosh(u)", 16, PRE_ABS},      {"tanh(a)", 17, PRE_ABS},
    {"pow(p, a)", 18, 0, 16 * ULP}, {"powr(p, a)", 18, 0, 16 * ULP}, {"floor(a)", 19, EXACT},
    {"ceil(a)", 20, EXACT},       {"round(a)", 21, EXACT},       {"trunc(a)", 22, EXACT},
    {"rint(a)", 23, EXACT},       {"fract(a)", 24, EXACT},       {"fabs(a)", 25, EXACT},
    {"abs(a)", 25, EXACT},        {"sign(a)", 26, EXACT},        {"copysign(a, u)", 27, EXACT},
    {"fmin(a, u)", 28, EXACT},    {"fmax(a, u)", 29, EXACT},     {"min(a, u)", 28, EXACT},
    {"max(a, u)", 29, EXACT},     {"fmod(a, u)", 30, EXACT},     {"fma(a, u, p)", 31, EXACT},
    {"clamp(a, -1.5f, 2.5f)", 32, EXACT}, {"saturate(a)", 33, EXACT},
    {"mix(a, u, 0.25f)", 34, ULP, 2 * ULP}, {"step(0.5f, a)", 35, EXACT},
    {"smoothstep(-1.0f, 2.0f, a)", 36, 4 * ULP, 4 * ULP}, {"select(a, u, a > u)", 37, EXACT},
    {"static_cast<float>(a * u)", 39, HALFULP}, {"a / p", 40, HALFULP},
};

/* metal::, metal::precise::, metal::fast::, and fast:: / precise:: under
 * `using namespace metal;` (in the header). */
static const fn_case ns_cases[] = {
    {"metal::exp(a)", 0, PRE4},            {"metal::precise::exp(a)", 0, PRE4},
    {"metal::fast::exp(a)", 0, 0, 15 * ULP}, {"fast::exp(a)", 0, 0, 15 * ULP},
    {"precise::log(p)", 3, PRE_ABS},       {"metal::fast::log(p)", 3, 0x1p-21, 4 * ULP},
    {"metal::fast::sin(a)", 8, 0x1p-13, 0}, {"fast::cos(a)", 9, 0x1p-13, 0},
    {"metal::fast::sqrt(p)", 6, 0, 3 * ULP}, {"fast::rsqrt(p)", 7, 0, 3 * ULP},
    {"metal::precise::rsqrt(p)", 7, 0, 2 * ULP}, {"metal::fast::tanh(a)", 17, 0x1p-13, 0},
    {"metal::fast::exp2(a)", 1, 0, 15 * ULP}, {"metal::fast::pow(p, a)", 18, 0, 200 * ULP},
    {"metal::fast::powr(p, a)", 18, 0, 200 * ULP}, {"metal::precise::pow(p, a)", 18, 0, 16 * ULP},
    {"metal::fast::log2(p)", 4, 0x1p-21, 4 * ULP}, {"metal::fma(a, u, p)", 31, EXACT},
    {"metal::clamp(a, -1.5f, 2.5f)", 32, EXACT}, {"metal::fast::exp(a) * 0.5f + log(p)", 38, FAST_SUM_ATOL, 15 * ULP},
    {"metal::precise::sin(a)", 8, PRE_ABS}, {"metal::abs(a)", 25, EXACT},
    {"metal::max(a, u)", 29, EXACT},        {"metal::fast::fmax(a, u)", 29, EXACT},
    {"metal::sqrt(p)", 6, HALFULP},         {"metal::precise::cos(a)", 9, PRE_ABS},
    /* divide: IEEE in metal:: and precise::; fast:: within Metal's fast bound (2.5 ulp for
     * 2^-126 <= |y| <= 2^126: CUDA's __fdividef) */
    {"metal::divide(a, p)", 40, HALFULP},   {"metal::precise::divide(a, p)", 40, HALFULP},
    {"metal::fast::divide(a, p)", 40, 0, 2.5 * ULP}, {"fast::divide(a, p)", 40, 0, 2.5 * ULP},
};

static void run_cases(const char *name, const fn_case *cases, int nc, const char *header) {
    const int n = 1000;
    float *a = malloc(n * 4), *p = malloc(n * 4), *u = malloc(n * 4);
    for (int i = 0; i < n; i++) {
        a[i] = (float)harness_uniform(-4, 4);
        p[i] = (float)exp(harness_uniform(log(1e-3), log(100)));
        u[i] = (float)harness_uniform(-0.999, 0.999);
    }
    a[0] = 0.5f; a[1] = -0.5f; a[2] = 2.5f; a[3] = -2.5f; a[4] = 0.0f; a[5] = -0.0f; a[6] = 3.0f;
    u[4] = -0.25f;
    /* body: one line per case */
    size_t cap = 256 + (size_t)nc * 160, len = 0;
    char *body = malloc(cap);
    len += (size_t)snprintf(body + len, cap - len,
                            "uint i = thread_position_in_grid.x;\n"
                            "float a = A[i], p = P[i], u = U[i];\n"
                            "device float* o = out + %d * i;\n", nc);
    for (int k = 0; k < nc; k++)
        len += (size_t)snprintf(body + len, cap - len, "o[%d] = %s;\n", k, cases[k].expr);
    float *got = malloc((size_t)n * nc * 4);
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.body = body;
    s.header = header;
    s.n_in = 3;
    s.in_names[0] = "A";
    s.in_names[1] = "P";
    s.in_names[2] = "U";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, a);
    s.in[1] = ku_array(ALLOY_FLOAT32, n, p);
    s.in[2] = ku_array(ALLOY_FLOAT32, n, u);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = (int64_t)n * nc;
    s.out_host[0] = got;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 64;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    double *ref = malloc((size_t)n * sizeof(double));
    float *col = malloc((size_t)n * 4);
    for (int k = 0; k < nc; k++) {
        for (int i = 0; i < n; i++) {
            ref[i] = ref_fn(cases[k].id, a[i], p[i], u[i]);
            col[i] = got[(size_t)i * nc + k];
        }
        int bad = ku_cmp_f32(cases[k].expr, col, ref, n, cases[k].atol, cases[k].rtol);
        CHECK_MSG(bad == 0, "%s: %d of %d outside atol %g rtol %g", cases[k].expr, bad, n,
                  cases[k].atol, cases[k].rtol);
    }
    /* sign of zero results */
    CHECK_MSG(signbit(got[(size_t)5 * nc + 0]) == 0, "exp(-0) sign");
    free(a); free(p); free(u); free(body); free(got); free(ref); free(col);
}

static void test_math_unqualified(void) {
    run_cases("math_unqualified", precise_cases, (int)(sizeof precise_cases / sizeof precise_cases[0]),
              NULL);
}

static void test_math_namespaces(void) {
    run_cases("math_namespaces", ns_cases, (int)(sizeof ns_cases / sizeof ns_cases[0]),
              "#include <metal_stdlib>\nusing namespace metal;\n");
}

/* Classification on special values, and sign / copysign / fract / min on them. */
static void test_classification(void) {
    const float sp[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, FLT_MIN, 1e-40f,
                        FLT_MAX, -2.5f, -1e-40f, -NAN};
    const int n = (int)(sizeof sp / sizeof sp[0]), K = 7;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "float x = in[i];\n"
        "device float* o = out + 7 * i;\n"
        "o[0] = isnan(x) ? 1.0f : 0.0f;\n"
        "o[1] = isinf(x) ? 1.0f : 0.0f;\n"
        "o[2] = isfinite(x) ? 1.0f : 0.0f;\n"
        "o[3] = signbit(x) ? 1.0f : 0.0f;\n"
        "o[4] = copysign(2.0f, x);\n"
        "o[5] = fmin(x, 3.0f);   /* NaN operand -> the other */\n"
        "o[6] = isnan(x) ? 0.0f : sign(x);\n";
    float got[13 * 7];
    double ref[13 * 7];
    for (int i = 0; i < n; i++) {
        float x = sp[i];
        double *r = ref + K * i;
        r[0] = isnan(x) != 0;
        r[1] = isinf(x) != 0;
        r[2] = isfinite(x) != 0;
        r[3] = signbit(x) != 0;
        r[4] = copysign(2.0, x);
        r[5] = fmin(x, 3.0);
        r[6] = isnan(x) ? 0.0 : x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    }
    CHECK_OK(ku_run_1in1out("classify", body, NULL, ALLOY_FLOAT32, n, sp, ALLOY_FLOAT32, n * K,
                            got, (uint32_t)n, 4, 777));
    CHECK(ku_cmp_f32("classify", got, ref, n * K, 0, 0) == 0);
    /* sign(-0) = -0, sign(+0) = +0 */
    CHECK(signbit(got[K * 1 + 6]) && !signbit(got[K * 0 + 6]));
}

/* Geometric functions on float3/float4. */
static void test_geometric(void) {
    const int n = 200, K = 12;
    float *x = malloc(n * 8 * 4);
    harness_fill_f32(x, (size_t)n * 8, -3, 3);
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "float4 a = float4(in[8*i], in[8*i+1], in[8*i+2], in[8*i+3]);\n"
        "float4 b = float4(in[8*i+4], in[8*i+5], in[8*i+6], in[8*i+7]);\n"
        "device float* o = out + 12 * i;\n"
        "o[0] = dot(a, b);\n"
        "o[1] = dot(a.xyz, b.xyz);\n"
        "o[2] = length(a);\n"
        "o[3] = length(a.xy);\n"
        "float3 c = cross(a.xyz, b.xyz);\n"
        "o[4] = c.x; o[5] = c.y; o[6] = c.z;\n"
        "float3 nv = normalize(a.xyz);\n"
        "o[7] = nv.x; o[8] = nv.y; o[9] = nv.z;\n"
        "o[10] = distance(a, b);\n"
        "o[11] = metal::fast::length(b);\n";
    float *got = malloc(n * K * 4);
    double *ref = malloc(n * K * sizeof(double));
    for (int i = 0; i < n; i++) {
        const float *a = x + 8 * i, *b = a + 4;
        double *r = ref + K * i;
        r[0] = (double)a[0] * b[0] + (double)a[1] * b[1] + (double)a[2] * b[2] + (double)a[3] * b[3];
        r[1] = r[0] - (double)a[3] * b[3];
        r[2] = sqrt((double)a[0] * a[0] + (double)a[1] * a[1] + (double)a[2] * a[2] + (double)a[3] * a[3]);
        r[3] = sqrt((double)a[0] * a[0] + (double)a[1] * a[1]);
        r[4] = (double)a[1] * b[2] - (double)a[2] * b[1];
        r[5] = (double)a[2] * b[0] - (double)a[0] * b[2];
        r[6] = (double)a[0] * b[1] - (double)a[1] * b[0];
        double l3 = sqrt((double)a[0] * a[0] + (double)a[1] * a[1] + (double)a[2] * a[2]);
        r[7] = a[0] / l3; r[8] = a[1] / l3; r[9] = a[2] / l3;
        double d = 0;
        for (int k = 0; k < 4; k++) d += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
        r[10] = sqrt(d);
        r[11] = sqrt((double)b[0] * b[0] + (double)b[1] * b[1] + (double)b[2] * b[2] + (double)b[3] * b[3]);
    }
    CHECK_OK(ku_run_1in1out("geometric", body, NULL, ALLOY_FLOAT32, n * 8, x, ALLOY_FLOAT32, n * K,
                            got, (uint32_t)n, 32, NAN));
    /* sums of 4 products of |.| <= 3 in float: absolute error <= 4 * 9 * 2^-23;
     * cancellation makes relative bounds meaningless, so an absolute bound */
    CHECK(ku_cmp_f32("geometric", got, ref, n * K, 64 * ULP, 8 * ULP) == 0);
    free(x); free(got); free(ref);
}

/* Integer functions: popcount clz ctz mulhi extract_bits abs min max. */
static void test_integer_functions(void) {
    const int n = 333, K = 12;
    uint32_t *x = malloc(n * 4);
    for (int i = 0; i < n; i++) x[i] = (uint32_t)harness_rand_u64() >> (i % 32);
    x[0] = 0; x[1] = 0xffffffffu; x[2] = 1; x[3] = 0x80000000u;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint v = in[i];\n"
        "uint w = in[(i * 7 + 3) % 333];\n"
        "int s = as_type<int>(v);\n"
        "device uint* o = out + 12 * i;\n"
        "o[0] = popcount(v);\n"
        "o[1] = clz(v);\n"
        "o[2] = ctz(v);\n"
        "o[3] = mulhi(v, w);\n"
        "o[4] = as_type<uint>(mulhi(s, as_type<int>(w)));\n"
        "o[5] = extract_bits(v, i % 20, 1 + i % 12);\n"
        "o[6] = as_type<uint>(extract_bits(s, i % 20, 1 + i % 12));\n"
        "o[7] = as_type<uint>(abs(s / 2));\n"
        "o[8] = min(v, w);\n"
        "o[9] = as_type<uint>(max(s, as_type<int>(w)));\n"
        "o[10] = uint(clz(ushort(v & 0xffffu)));\n"
        "o[11] = popcount(ulong(v) << 20) == popcount(v) ? 1u : 0u;\n";
    uint32_t *got = malloc(n * K * 4), *ref = malloc(n * K * 4);
    for (int i = 0; i < n; i++) {
        uint32_t v = x[i], w = x[(i * 7 + 3) % n];
        int32_t s = (int32_t)v, sw = (int32_t)w;
        uint32_t *r = ref + K * i;
        int pc = 0, lz = 0, tz = 0;
        for (int b = 0; b < 32; b++) pc += (v >> b) & 1;
        for (int b = 31; b >= 0 && !((v >> b) & 1); b--) lz++;
        for (int b = 0; b < 32 && !((v >> b) & 1); b++) tz++;
        r[0] = (uint32_t)pc; r[1] = (uint32_t)lz; r[2] = (uint32_t)tz;
        r[3] = (uint32_t)(((uint64_t)v * w) >> 32);
        r[4] = (uint32_t)(((int64_t)s * sw) >> 32);
        unsigned off = (unsigned)(i % 20), bits = 1 + (unsigned)(i % 12);
        uint32_t mask = (1u << bits) - 1;
        r[5] = (v >> off) & mask;
        uint32_t e = (v >> off) & mask;
        if (e & (1u << (bits - 1))) e |= ~mask; /* sign extension */
        r[6] = e;
        int32_t h = s / 2;
        r[7] = (uint32_t)(h < 0 ? -h : h);
        r[8] = v < w ? v : w;
        r[9] = (uint32_t)(s > sw ? s : sw);
        uint16_t us = (uint16_t)(v & 0xffff);
        int lz16 = 0;
        for (int b = 15; b >= 0 && !((us >> b) & 1); b--) lz16++;
        r[10] = (uint32_t)lz16;
        r[11] = 1;
    }
    CHECK_OK(ku_run_1in1out("integer_functions", body, NULL, ALLOY_UINT32, n, x, ALLOY_UINT32,
                            n * K, got, (uint32_t)n, 64, 12345));
    CHECK(ku_cmp_u32("integer functions", got, ref, n * K) == 0);
    free(x); free(got); free(ref);
}

/* as_type bit casts between same-size types, and static_cast. */
static void test_as_type(void) {
    const int n = 64, K = 6;
    float *x = malloc(n * 4);
    harness_fill_f32(x, n, -1000, 1000);
    x[0] = -0.0f; x[1] = INFINITY;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "float f = in[i];\n"
        "device uint* o = out + 6 * i;\n"
        "o[0] = as_type<uint>(f);\n"
        "o[1] = as_type<uint>(as_type<float>(as_type<uint>(f) ^ 0x80000000u) * 1.0f);\n"
        "half2 h2 = as_type<half2>(as_type<uint>(f));\n"
        "o[2] = uint(as_type<ushort>(h2.x)) | (uint(as_type<ushort>(h2.y)) << 16);\n"
        "o[3] = as_type<uint>(static_cast<int>(f));\n"
        "o[4] = uint(as_type<ushort>(half(f)));\n"
        "uchar4 b4 = as_type<uchar4>(f);\n"
        "o[5] = uint(b4.x) | (uint(b4.y) << 8) | (uint(b4.z) << 16) | (uint(b4.w) << 24);\n";
    uint32_t *got = malloc(n * K * 4), *ref = malloc(n * K * 4);
    for (int i = 0; i < n; i++) {
        uint32_t b = ku_f32_bits(x[i]);
        uint32_t *r = ref + K * i;
        r[0] = b; r[1] = b ^ 0x80000000u; r[2] = b;
        r[3] = isinf(x[i]) ? 0 : (uint32_t)(int32_t)x[i];
        r[4] = ku_f16_bits(x[i]);
        r[5] = b;
    }
    CHECK_OK(ku_run_1in1out("as_type", body, NULL, ALLOY_FLOAT32, n, x, ALLOY_UINT32, n * K, got,
                            (uint32_t)n, 16, 0));
    got[K * 1 + 3] = ref[K * 1 + 3]; /* int(inf) is undefined */
    CHECK(ku_cmp_u32("as_type", got, ref, n * K) == 0);
    free(x); free(got); free(ref);
}

/* MLX helpers: ceildiv, Limits<T>, elem_to_loc on a strided view. */
static void test_mlx_helpers(void) {
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "if (i == 0) {\n"
        "  out[0] = float(ceildiv(7, 2)); out[1] = float(ceildiv(8, 2)); out[2] = float(ceildiv(1, 32));\n"
        "  out[3] = Limits<float>::max; out[4] = Limits<float>::min;\n"
        "  out[5] = Limits<float>::finite_max; out[6] = Limits<float>::finite_min;\n"
        "  out[7] = float(Limits<int>::max == 2147483647); out[8] = float(Limits<int>::min == (-2147483647 - 1));\n"
        "  out[9] = float(Limits<uint>::max == 4294967295u); out[10] = float(Limits<half>::finite_max);\n"
        "  out[11] = float(Limits<bool>::max);\n"
        "}\n"
        "/* the strided input: element i of the row-major order of the view */\n"
        "g[i] = x[elem_to_loc(i, x_shape, x_strides, x_ndim)];\n";
    double ref[12] = {4, 4, 1, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1, 1, 1, 65504, 1};
    /* a 3-D view (3, 4, 5) of a 5x4x6 buffer: transposed axes 0/2 and a sliced last dim */
    float buf[5 * 4 * 6];
    for (int k = 0; k < 120; k++) buf[k] = (float)k;
    int64_t shape[3] = {3, 4, 5}, strides[3] = {1, 6, 24};
    alloy_array *xv = NULL;
    CHECK_OK(ku_view_of_host(buf, 120, ALLOY_FLOAT32, 3, shape, strides, 1, &xv));
    if (!xv) return;
    float got[12], g[60];
    double rg[60];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 5; c++) rg[a * 20 + b * 5 + c] = buf[1 + a * 1 + b * 6 + c * 24];
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "mlx_helpers";
    s.body = body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = xv;
    s.n_out = 2;
    s.out_names[0] = "out";
    s.out_names[1] = "g";
    s.out_dtype[0] = s.out_dtype[1] = ALLOY_FLOAT32;
    s.out_n[0] = 12;
    s.out_n[1] = 60;
    s.out_host[0] = got;
    s.out_host[1] = g;
    s.grid[0] = 60;
    s.tg[0] = 16;
    s.not_row_contiguous = 1;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    CHECK(ku_cmp_f32("MLX helpers", got, ref, 12, 0, 0) == 0);
    CHECK(ku_cmp_f32("elem_to_loc", g, rg, 60, 0, 0) == 0);
}

int main(void) {
    RUN(test_math_unqualified);
    RUN(test_math_namespaces);
    RUN(test_classification);
    RUN(test_geometric);
    RUN(test_integer_functions);
    RUN(test_as_type);
    RUN(test_mlx_helpers);
    return harness_finish();
}
