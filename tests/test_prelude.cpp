/* test_prelude.cpp — checks the MSL prelude (dialect/prelude/common.h and
 * cpu.h) directly as C++: Metal sizes and alignment, half/bfloat rounding
 * against an independent double-precision reference, vector semantics and
 * swizzles, math against double references, integer functions, atomics,
 * as_type, MLX's helpers, and the SIMD-group functions and simdgroup matrices
 * on a test runtime that runs each lane on its own OS thread. */
#include <pthread.h>
#include <type_traits>

#include "harness.h"

#include "backend/cpu/cpu_abi.h"
#include "dialect/prelude/common.h"
#include "dialect/prelude/cpu.h"

/* ---- independent references ------------------------------------------- */

/* Rounds d to a binary format with p significand bits (hidden bit included),
 * exponent range [emin, emax], round to nearest even; returns the bit
 * pattern (NaN -> 0xffffffff, checked separately). */
static uint32_t ref_round(double d, int p, int emin, int emax) {
    int ebits = p == 11 ? 5 : 8;
    uint32_t sign = signbit(d) ? 1u << (p - 1 + ebits) : 0u;
    uint32_t inf = ((1u << ebits) - 1u) << (p - 1);
    if (isnan(d)) return 0xffffffffu;
    double a = fabs(d);
    if (isinf(a)) return sign | inf;
    int e = 0;
    frexp(a, &e);
    int E = a == 0 ? emin : (e - 1 < emin ? emin : e - 1);
    double r = nearbyint(ldexp(a, (p - 1) - E));
    if (r >= ldexp(1.0, p)) {
        r /= 2;
        E++;
    }
    if (E > emax) return sign | inf;
    if (r < ldexp(1.0, p - 1)) return sign | (uint32_t)r; /* subnormal or zero */
    return sign | ((uint32_t)(E + emax) << (p - 1)) | ((uint32_t)r - (1u << (p - 1)));
}
static uint32_t ref_half(double d) { return ref_round(d, 11, -14, 15); }
static uint32_t ref_bf16(double d) { return ref_round(d, 8, -126, 127); }

/* Value of a half / bfloat bit pattern. */
static double ref_half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}
static double ref_bf16_value(uint16_t b) {
    int e = (b >> 7) & 255, m = b & 127;
    double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (b & 0x8000) ? -v : v;
}
static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t hbits(half h) { return h.alloy_bits; }
static half mkhalf(uint16_t b) { return half::alloy_from_bits(b); }
static bfloat mkbf(uint16_t b) { return bfloat::alloy_from_bits(b); }

/* error of a float result in units of the float ulp of the reference */
static double ulps(double got, double ref) {
    if (isnan(ref)) return isnan(got) ? 0 : 1e9;
    if (isinf(ref)) return got == ref ? 0 : 1e9;
    int e = 0;
    frexp(ref, &e);
    double ulp = ldexp(1.0, (e - 24) < -149 ? -149 : e - 24);
    return fabs(got - ref) / ulp;
}
static double half_ulps(double got, double ref) {
    if (isnan(ref)) return isnan(got) ? 0 : 1e9;
    if (isinf(ref)) return got == ref ? 0 : 1e9;
    int e = 0;
    frexp(ref, &e);
    double ulp = ldexp(1.0, (e - 11) < -24 ? -24 : e - 11);
    return fabs(got - ref) / ulp;
}

/* ---- sizes and traits ---------------------------------------------------- */

#define SZ(T, s, a)                                                                                \
    static_assert(sizeof(T) == (s) && alignof(T) == (a), #T " size/alignment");                  \
    CHECK(sizeof(T) == (s) && alignof(T) == (a));
#define VSZ(name, e)                                                                               \
    SZ(name##2, 2 * (e), 2 * (e))                                                                  \
    SZ(name##3, 4 * (e), 4 * (e))                                                                  \
    SZ(name##4, 4 * (e), 4 * (e))
#define PSZ(name, e)                                                                               \
    SZ(packed_##name##2, 2 * (e), e)                                                               \
    SZ(packed_##name##3, 3 * (e), e)                                                               \
    SZ(packed_##name##4, 4 * (e), e)
#define TRIVIAL(T)                                                                                 \
    static_assert(std::is_trivially_default_constructible<T>::value, #T " trivial ctor");         \
    static_assert(std::is_trivially_copyable<T>::value || std::is_same<T, metal::atomic_int>::value, \
                  #T " trivially copyable");

static void test_sizes(void) {
    VSZ(bool, 1) VSZ(char, 1) VSZ(uchar, 1) VSZ(short, 2) VSZ(ushort, 2) VSZ(int, 4) VSZ(uint, 4)
    VSZ(long, 8) VSZ(ulong, 8) VSZ(half, 2) VSZ(bfloat, 2) VSZ(float, 4) VSZ(double, 8)
    PSZ(char, 1) PSZ(uchar, 1) PSZ(short, 2) PSZ(ushort, 2) PSZ(int, 4) PSZ(uint, 4) PSZ(long, 8)
    PSZ(ulong, 8) PSZ(half, 2) PSZ(bfloat, 2) PSZ(float, 4)
    SZ(half, 2, 2) SZ(bfloat, 2, 2) SZ(float16_t, 2, 2) SZ(bfloat16_t, 2, 2)
    SZ(metal::atomic_int, 4, 4) SZ(metal::atomic_float, 4, 4) SZ(metal::atomic_uint, 4, 4)
    TRIVIAL(half) TRIVIAL(bfloat) TRIVIAL(float4) TRIVIAL(half3) TRIVIAL(bool2) TRIVIAL(packed_float3)
    TRIVIAL(metal::atomic_int) TRIVIAL(metal::simdgroup_float8x8) TRIVIAL(long4) TRIVIAL(bfloat2)
    static_assert(std::is_trivially_default_constructible<metal::atomic_float>::value, "atomic");
    static_assert(std::is_same<int8_t, signed char>::value && std::is_same<int64_t, long>::value, "ints");
    static_assert(std::is_same<uint64_t, ulong>::value && sizeof(size_t) == 8, "64-bit");
    static_assert(std::is_same<char2::value_type, signed char>::value, "MSL char is signed");
    /* result types of mixed arithmetic */
    half h = 1.0f;
    float f = 1.0f;
    static_assert(std::is_same<decltype(h * h), half>::value, "half op half");
    static_assert(std::is_same<decltype(h * f), float>::value, "half op float");
    static_assert(std::is_same<decltype(f + h), float>::value, "float op half");
    static_assert(std::is_same<decltype(h - 2), half>::value, "half op int");
    static_assert(std::is_same<decltype(3u / h), half>::value, "int op half");
    static_assert(std::is_same<decltype(h * 2.0), double>::value, "half op double");
    static_assert(std::is_same<decltype(h < f), bool>::value, "comparison");
    static_assert(std::is_same<decltype(float4() == float4()), bool4>::value, "vector compare");
    static_assert(std::is_same<decltype(float4() * 2), float4>::value, "vector op int");
    static_assert(std::is_same<decltype(2.0 * half2()), half2>::value, "scalar op vector");
    static_assert(std::is_same<decltype(metal::max(1.0f, 2)), float>::value, "max(float, int)");
    static_assert(std::is_same<decltype(metal::sin(h)), half>::value, "sin(half)");
    static_assert(std::is_same<decltype(metal::sqrt(2)), float>::value, "sqrt(int)");
    static_assert(std::is_same<decltype(float4().template alloy_swz<0, 1>()), float2>::value, "swizzle");
    static_assert(std::is_same<decltype(float4().template alloy_swz<3>()), float>::value, "swizzle 1");
    (void)h;
    (void)f;
}

/* ---- half and bfloat ------------------------------------------------------ */

static void test_half_exhaustive(void) {
    int bad_value = 0, bad_trip = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        half h = mkhalf((uint16_t)b);
        float f = h; /* implicit conversion */
        double ref = ref_half_value((uint16_t)b);
        if (isnan(ref)) {
            if (!isnan(f) || signbit(f) != signbit(ref)) bad_value++;
            half back = f;
            /* NaN stays NaN, quiet, same sign; quiet payloads survive */
            if (!metal::isnan(back) || (hbits(back) & 0x8200) != (b & 0x8000) + 0x200) bad_trip++;
            if ((b & 0x200) && hbits(back) != b) bad_trip++;
            continue;
        }
        if ((double)f != ref || signbit(f) != signbit(ref)) bad_value++;
        half back = f;
        if (hbits(back) != b) bad_trip++;
        if (hbits(half((double)f)) != b) bad_trip++;
    }
    CHECK_MSG(bad_value == 0, "%d half values decode wrongly", bad_value);
    CHECK_MSG(bad_trip == 0, "%d half round trips fail", bad_trip);
}

static void test_half_from_float(void) {
    int bad = 0;
    /* random float bit patterns: every exponent range */
    for (int i = 0; i < 2000000; i++) {
        float f = bits_float((uint32_t)harness_rand_u64());
        uint32_t ref = ref_half((double)f);
        half h = f;
        if (ref == 0xffffffffu ? !metal::isnan(h) : hbits(h) != ref) {
            if (bad++ < 5) fprintf(stderr, "  float %a -> %04x, want %04x\n", f, hbits(h), ref);
        }
    }
    /* exact ties and their neighbours between consecutive halves */
    for (uint32_t b = 0; b < 0x7c00; b++) {
        double lo = ref_half_value((uint16_t)b), hi = ref_half_value((uint16_t)(b + 1));
        if (b == 0x7bff) hi = 65536.0; /* the next "half" would be 2^16 */
        double mid = (lo + hi) / 2;
        float fm = (float)mid;
        CHECK((double)fm == mid);
        float probes[3] = {fm, nextafterf(fm, 0), nextafterf(fm, INFINITY)};
        for (int k = 0; k < 3; k++)
            for (int s = 0; s < 2; s++) {
                float f = s ? -probes[k] : probes[k];
                if (hbits(half(f)) != ref_half(f)) {
                    if (bad++ < 5) fprintf(stderr, "  tie %a -> %04x want %04x\n", f, hbits(half(f)), ref_half(f));
                }
            }
    }
    CHECK_MSG(bad == 0, "%d float->half conversions wrong", bad);
    CHECK(hbits(half(65504.0f)) == 0x7bff);
    CHECK(hbits(half(65519.99f)) == 0x7bff);
    CHECK(hbits(half(65520.0f)) == 0x7c00); /* tie rounds to even = Inf */
    CHECK(hbits(half(1e10f)) == 0x7c00 && hbits(half(-1e10f)) == 0xfc00);
    CHECK(hbits(half(INFINITY)) == 0x7c00 && hbits(half(-INFINITY)) == 0xfc00);
    CHECK(metal::isnan(half(NAN)));
    CHECK(hbits(half(5.9604645e-8f)) == 0x0001); /* smallest subnormal */
    CHECK(hbits(half(2.98023224e-8f)) == 0x0000); /* 2^-25: tie to even -> 0 */
    CHECK(hbits(half(2.9802326e-8f)) == 0x0001);  /* just above the tie */
    CHECK(hbits(half(-0.0f)) == 0x8000);
    CHECK(hbits(half(6.1035156e-5f)) == 0x0400); /* smallest normal */
}

static void test_half_from_double(void) {
    int bad = 0;
    for (int i = 0; i < 300000; i++) {
        double d = ldexp(harness_uniform(1.0, 2.0), (int)(harness_rand_u64() % 50) - 32);
        if (harness_rand_u64() & 1) d = -d;
        uint32_t ref = ref_half(d);
        if (hbits(half(d)) != ref && bad++ < 5) fprintf(stderr, "  double %a -> %04x want %04x\n", d, hbits(half(d)), ref);
    }
    /* just above / below a tie: the double must not be rounded to float first */
    for (int i = 0; i < 20000; i++) {
        uint16_t b = (uint16_t)(harness_rand_u64() % 0x7bff);
        double mid = (ref_half_value(b) + ref_half_value((uint16_t)(b + 1))) / 2;
        double up = mid + ldexp(mid, -40), down = mid - ldexp(mid, -40);
        if (mid == 0) continue;
        if (hbits(half(up)) != b + 1) bad++;
        if (hbits(half(down)) != b) bad++;
        if (hbits(half(mid)) != ((b & 1) ? b + 1 : b)) bad++;
    }
    CHECK_MSG(bad == 0, "%d double->half conversions wrong", bad);
    CHECK(hbits(half(3)) == 0x4200 && hbits(half(-2L)) == 0xc000 && hbits(half(70000u)) == 0x7c00);
}

static void test_bfloat(void) {
    int bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        bfloat v = mkbf((uint16_t)b);
        float f = v;
        double ref = ref_bf16_value((uint16_t)b);
        if (isnan(ref)) {
            if (!isnan(f) || !metal::isnan(bfloat(f)) || signbit(f) != signbit(ref)) bad++;
            continue;
        }
        if ((double)f != ref) bad++;
        if (bfloat(f).alloy_bits != b) bad++;
    }
    CHECK_MSG(bad == 0, "%d bfloat patterns decode/round-trip wrongly", bad);
    bad = 0;
    for (int i = 0; i < 2000000; i++) {
        float f = bits_float((uint32_t)harness_rand_u64());
        uint32_t ref = ref_bf16((double)f);
        bfloat v = f;
        if (ref == 0xffffffffu ? !metal::isnan(v) : v.alloy_bits != ref) {
            if (bad++ < 5) fprintf(stderr, "  float %a -> bf %04x, want %04x\n", f, v.alloy_bits, ref);
        }
    }
    for (int i = 0; i < 100000; i++) { /* ties */
        uint16_t b = (uint16_t)(harness_rand_u64() % 0x7f7f);
        float mid = bits_float(((uint32_t)b << 16) | 0x8000u);
        if (bfloat(mid).alloy_bits != ((b & 1) ? b + 1 : b)) bad++;
        double d = (double)mid + ldexp((double)mid, -40);
        if (mid != 0 && bfloat(d).alloy_bits != b + 1) bad++;
    }
    CHECK_MSG(bad == 0, "%d float->bfloat conversions wrong", bad);
    CHECK(bfloat(3.4e38f).alloy_bits == 0x7f80); /* overflows to Inf */
    CHECK(bfloat(1.0f).alloy_bits == 0x3f80 && bfloat(-2).alloy_bits == 0xc000);
    CHECK(hbits(half(bfloat(1.5f))) == 0x3e00);
}

static void test_half_arith(void) {
    int bad = 0;
    for (int i = 0; i < 400000; i++) {
        uint16_t ba = (uint16_t)harness_rand_u64(), bb = (uint16_t)harness_rand_u64();
        if ((ba & 0x7c00) == 0x7c00 || (bb & 0x7c00) == 0x7c00) continue;
        half a = mkhalf(ba), b = mkhalf(bb);
        double da = ref_half_value(ba), db = ref_half_value(bb);
        half r[4] = {a + b, a - b, a * b, a / b};
        double ref[4] = {da + db, da - db, da * db, da / db};
        for (int k = 0; k < 4; k++) {
            uint32_t want = ref_half(ref[k]);
            if (want == 0xffffffffu ? !metal::isnan(r[k]) : hbits(r[k]) != want) {
                if (bad++ < 5) fprintf(stderr, "  %04x op%d %04x -> %04x want %04x\n", ba, k, bb, hbits(r[k]), want);
            }
        }
        /* bfloat with the same bits where finite */
        if ((ba & 0x7f80) != 0x7f80 && (bb & 0x7f80) != 0x7f80) {
            bfloat x = mkbf(ba), y = mkbf(bb);
            double dx = ref_bf16_value(ba), dy = ref_bf16_value(bb);
            bfloat s = x * y, q = x + y;
            if (s.alloy_bits != ref_bf16(dx * dy) || q.alloy_bits != ref_bf16(dx + dy)) bad++;
        }
        if ((a < b) != (da < db) || (a == b) != (da == db) || (a >= b) != (da >= db)) bad++;
    }
    CHECK_MSG(bad == 0, "%d half/bfloat operations wrong", bad);
    half h = 1.5f;
    h += 1;
    CHECK(float(h) == 2.5f);
    h *= 2.0f;
    CHECK(float(h) == 5.0f);
    h++;
    ++h;
    CHECK(float(h) == 7.0f);
    h--;
    CHECK(float(-h) == -6.0f && float(+h) == 6.0f);
    CHECK(h * 0.5f == 3.0f && 2 * h == 12 && h / 4 == 1.5f && h > 5 && 7 > h && h != 5.0);
    half big = 60000.0f;
    CHECK(metal::isinf(big + big)); /* half op half rounds to half */
    CHECK(big + 10000.0f == 70000.0f); /* half op float is float */
    int iv = (int)h;
    uint uv = static_cast<uint>(h);
    CHECK(iv == 6 && uv == 6u);
    bfloat bf = 3.0f;
    bf -= 1;
    CHECK(float(bf) == 2.0f && float(h + bf) == 8.0f);
    CHECK(hbits(HALF_MAX) == 0x7bff && float(HALF_MIN) == 6.103515625e-05f);
}

/* ---- vectors ------------------------------------------------------------- */

static void test_vectors(void) {
    float4 a = float4(1.0f, 2.0f, 3.0f, 4.0f);
    float4 s = 2.0f; /* implicit splat */
    float4 b = float4(float2(5, 6), 7.0, 8);
    float3 c3 = float3(float2(1, 2), 3);
    float4 d = float4(c3, 9);
    float4 e = float4(0.5f, float3(1, 2, 3));
    float4 f2 = float4(float2(1, 2), float2(3, 4));
    float4 g = float4(1, float2(2, 3), 4);
    CHECK(a.x == 1 && a.y == 2 && a.z == 3 && a.w == 4 && a.r == 1 && a.g == 2 && a.b == 3 && a.a == 4);
    CHECK(a[2] == 3 && s.w == 2 && b.z == 7 && b.w == 8 && d.w == 9 && d.z == 3 && e.x == 0.5f && e.w == 3);
    CHECK(metal::all(f2 == a) && metal::all(g == a));
    float4 sum = a + b, prod = a * 2, rdiv = 12 / a, neg = -a;
    CHECK(sum.x == 6 && sum.w == 12 && prod.z == 6 && rdiv.w == 3 && neg.y == -2);
    bool4 cmp = a < float4(2, 2, 2, 2);
    CHECK(cmp.x && !cmp.y && !cmp.z && !cmp.w);
    CHECK(metal::any(cmp) && !metal::all(cmp) && metal::all(!(a > 10)) && metal::all((a >= 1) && (a <= 4)));
    int4 iv = int4(a);
    CHECK(iv.x == 1 && iv.w == 4);
    iv <<= 2;
    CHECK(iv.y == 8);
    iv = (iv | 1) & ~int4(2);
    CHECK(iv.x == 5 && iv.y == 9);
    CHECK(metal::all((int4(7, 8, 9, 10) % 4) == int4(3, 0, 1, 2)) && metal::all((uint2(6, 5) ^ 3u) == uint2(5, 6)));
    float4 m = a;
    m += 1;
    m *= float4(2);
    m -= 0.5f;
    m /= 2;
    CHECK(m.x == 1.75f && m.w == 4.75f);
    m++;
    CHECK(m.x == 2.75f);
    half4 h4 = half4(a);
    h4 = h4 * 2 + half(1.0f);
    CHECK(float(h4.w) == 9.0f);
    float4 back = float4(h4);
    CHECK(back.z == 7.0f);
    uchar4 u8 = uchar4(250, 251, 252, 253);
    u8 += uchar4(10);
    CHECK(u8.x == 4 && u8.w == 7); /* wraps like uchar */
    char2 c2 = char2(-3, 4);
    CHECK(c2.x == -3 && metal::abs(c2).x == 3);
    bool2 bb = bool2(true, false);
    CHECK(bb.x && !bb.y && sizeof(bool3) == 4);
    long3 l3 = long3(1L << 40, 2, 3);
    CHECK(l3.x * 2 == (1L << 41));
    /* swizzle reads */
    float2 yx = a.template alloy_swz<1, 0>();
    float4 wzyx = a.template alloy_swz<3, 2, 1, 0>();
    float3 xxx = a.template alloy_swz<0, 0, 0>();
    CHECK(yx.x == 2 && yx.y == 1 && wzyx.x == 4 && wzyx.w == 1 && xxx.z == 1);
    CHECK(a.template alloy_swz<2>() == 3.0f);
    /* swizzle writes */
    float4 w = float4(0);
    w.template alloy_swz_ref<3, 1>() = float2(7, 5);
    CHECK(w.x == 0 && w.y == 5 && w.z == 0 && w.w == 7);
    w.template alloy_swz_ref<0, 1>() += float2(1, 1);
    w.template alloy_swz_ref<2, 3>() *= 2;
    CHECK(w.x == 1 && w.y == 6 && w.z == 0 && w.w == 14);
    w.template alloy_swz_ref<0, 1, 2>() = 3.0f;
    CHECK(w.x == 3 && w.z == 3 && w.w == 14);
    w.template alloy_swz_ref<1, 0>() = w.template alloy_swz<0, 1>(); /* swap through a value */
    CHECK(w.x == 3 && w.y == 3);
    w.template alloy_swz_ref<3>() = 1;
    CHECK(w.w == 1);
    float2 via = w.template alloy_swz_ref<3, 2>();
    CHECK(via.x == 1 && via.y == 3);
    /* packed */
    packed_float3 p = float3(1, 2, 3);
    float3 pv = p;
    float3 pr = p * 2.0f + pv;
    CHECK(pr.x == 3 && pr.z == 9 && p[1] == 2 && p.y == 2 && p.b == 3);
    p += 1;
    CHECK(p.x == 2);
    packed_float3 arr[2] = {float3(0), float3(1)};
    CHECK((char *)&arr[1] - (char *)&arr[0] == 12 && arr[1].z == 1);
    float4 fromp = float4(p, 1.0f);
    CHECK(fromp.x == 2 && fromp.w == 1);
    CHECK((p.template alloy_swz<2, 0>().x == 4));
}

/* ---- math ------------------------------------------------------------------ */

typedef double (*dfn1)(double);
static double d_exp10(double x) { return pow(10.0, x); }
static double d_rsqrt(double x) { return 1.0 / sqrt(x); }

static void check_math1(const char *name, float (*ff)(float), half (*hf)(half), dfn1 ref, double lo, double hi, double tol) {
    double worst = 0, worst_h = 0;
    for (int i = 0; i < 20000; i++) {
        float x = (float)harness_uniform(lo, hi);
        double e = ulps(ff(x), ref((double)x));
        if (e > worst) worst = e;
        half hx = x;
        if (float(hx) < lo || float(hx) > hi) continue;
        double eh = half_ulps(float(hf(hx)), ref((double)float(hx)));
        if (eh > worst_h) worst_h = eh;
    }
    CHECK_MSG(worst <= tol, "%s: %.2f ulp", name, worst);
    CHECK_MSG(worst_h <= 1.0, "%s(half): %.2f half ulp", name, worst_h);
}
#define MATH1(fn, ref, lo, hi, tol)                                                                \
    check_math1(#fn, [](float x) { return metal::fn(x); }, [](half x) { return metal::fn(x); }, ref, lo, hi, tol)

static void test_math(void) {
    MATH1(sin, sin, -10, 10, 4);
    MATH1(cos, cos, -10, 10, 4);
    MATH1(tan, tan, -1.5, 1.5, 4);
    MATH1(asin, asin, -1, 1, 4);
    MATH1(acos, acos, -1, 1, 4);
    MATH1(atan, atan, -20, 20, 4);
    MATH1(sinh, sinh, -8, 8, 4);
    MATH1(cosh, cosh, -8, 8, 4);
    MATH1(tanh, tanh, -8, 8, 4);
    MATH1(asinh, asinh, -50, 50, 4);
    MATH1(acosh, acosh, 1, 50, 4);
    MATH1(atanh, atanh, -0.99, 0.99, 4);
    MATH1(exp, exp, -20, 10, 4);
    MATH1(exp2, exp2, -20, 15, 4);
    MATH1(exp10, d_exp10, -6, 4, 4);
    MATH1(log, log, 1e-3, 1e4, 4);
    MATH1(log2, log2, 1e-3, 1e4, 4);
    MATH1(log10, log10, 1e-3, 1e4, 4);
    MATH1(log1p, log1p, -0.5, 100, 4);
    MATH1(sqrt, sqrt, 0, 1e4, 0.5);
    MATH1(rsqrt, d_rsqrt, 1e-3, 1e4, 4);
    MATH1(cbrt, cbrt, -1e3, 1e3, 4);
    MATH1(floor, floor, -100, 100, 0);
    MATH1(ceil, ceil, -100, 100, 0);
    MATH1(round, round, -100, 100, 0);
    MATH1(trunc, trunc, -100, 100, 0);
    MATH1(fabs, fabs, -100, 100, 0);
    MATH1(abs, fabs, -100, 100, 0);
    MATH1(fast::exp, exp, -20, 10, 4);
    MATH1(precise::sqrt, sqrt, 0, 100, 0.5);
    CHECK(metal::rint(2.5f) == 2.0f && metal::rint(3.5f) == 4.0f && metal::round(2.5f) == 3.0f);
    double w2 = 0;
    for (int i = 0; i < 20000; i++) {
        float x = (float)harness_uniform(-10, 10), y = (float)harness_uniform(-10, 10), z = (float)harness_uniform(-10, 10);
        float px = fabsf(x) + 0.01f;
        double errs[] = {ulps(metal::atan2(x, y), atan2((double)x, (double)y)),
                         ulps(metal::pow(px, y), pow((double)px, (double)y)),
                         ulps(metal::powr(px, y), pow((double)px, (double)y)),
                         ulps(metal::fmod(x, y), fmod((double)x, (double)y)),
                         ulps(metal::fma(x, y, z), (double)x * y + z),
                         ulps(metal::fmin(x, y), fmin(x, y)), ulps(metal::max(x, y), fmax(x, y)),
                         ulps(metal::copysign(x, y), copysign((double)x, (double)y)),
                         ulps(metal::clamp(x, -1.0f, 2), fmin(fmax(x, -1), 2)),
                         ulps(metal::saturate(x / 10), fmin(fmax(x / 10.0f, 0), 1)),
                         /* mix: two float roundings, judged against the operands' scale */
                         fabs(metal::mix(x, y, 0.25f) - ((double)x + ((double)y - x) * 0.25)) /
                             (ldexp(1.0, -23) * fmax(fabs(x), fabs(y))),
                         ulps(metal::step(x, y), y < x ? 0.0 : 1.0),
                         ulps(metal::fract(x), (double)x - floor((double)x)),
                         ulps(metal::ldexp(x, 5), ldexp((double)x, 5))};
        for (size_t k = 0; k < sizeof errs / sizeof errs[0]; k++)
            if (errs[k] > w2) {
                w2 = errs[k];
                if (w2 > 3.0) fprintf(stderr, "  case %zu: x=%a y=%a z=%a: %.1f ulp\n", k, x, y, z, w2);
            }
    }
    CHECK_MSG(w2 <= 3.0, "binary/ternary math: %.2f ulp", w2);
    CHECK(metal::max(NAN, 1.0f) == 1.0f && metal::min(2.0f, NAN) == 2.0f); /* fmax/fmin semantics */
    CHECK(metal::smoothstep(0.0f, 1.0f, 0.5f) == 0.5f && metal::smoothstep(0.0f, 1.0f, 2.0f) == 1.0f);
    CHECK(metal::smoothstep(0.0f, 2.0f, 0.5f) == (float)(0.25 * 0.25 * (3 - 0.5)));
    CHECK(metal::sign(-3.0f) == -1 && metal::sign(2.0f) == 1 && metal::sign(NAN) == 0 && signbit(metal::sign(-0.0f)));
    CHECK(metal::select(1.0f, 2.0f, true) == 2.0f && metal::select(1, 2, false) == 1);
    CHECK(metal::fract(-0.25f) == 0.75f && metal::fract(-1e-9f) < 1.0f);
    float ip = 0;
    CHECK(metal::modf(-2.75f, ip) == -0.75f && ip == -2.0f);
    int ex = 0;
    CHECK(metal::frexp(12.0f, ex) == 0.75f && ex == 4);
    float cv = 0;
    CHECK(metal::sincos(0.0f, cv) == 0.0f && cv == 1.0f);
    CHECK(metal::isnan(NAN) && !metal::isnan(1.0f) && metal::isinf(-INFINITY) && metal::isfinite(FLT_MAX));
    CHECK(!metal::isfinite(NAN) && metal::signbit(-0.0f) && !metal::signbit(0.0f));
    CHECK(metal::isnan(half(NAN)) && metal::isinf(half(1e6f)) && metal::signbit(half(-1.0f)));
    CHECK(metal::isnan(0.0 / 0.0 + 0 * (double)harness_uniform(0, 1)) && metal::isinf(-1.0 / 0.0));
    CHECK(metal::max(1, 2.5) == 2.5 && metal::min(3u, 5u) == 3u && metal::max(-1, 2) == 2);
    CHECK(metal::clamp(7, 0, 5) == 5 && metal::abs(-7) == 7 && metal::abs(-7L) == 7L);
    CHECK(float(metal::max(half(1.0f), half(3.0f))) == 3.0f && float(metal::fma(half(2), half(3), half(1))) == 7.0f);
    CHECK(metal::divide(1.0f, 4.0f) == 0.25f && metal::fast::divide(1.0f, 2.0f) == 0.5f);
    CHECK(metal::fast::max(1.0f, 2.0f) == 2.0f && metal::precise::clamp(3.0f, 0.0f, 1.0f) == 1.0f);
    CHECK(fabs(M_PI_F - 3.14159265f) < 1e-7 && M_SQRT2_F * M_SQRT1_2_F > 0.9999f && MAXFLOAT == FLT_MAX);
    CHECK(INFINITY > FLT_MAX && FLT_EPSILON == 0x1p-23f && FLT_MIN == 0x1p-126f);
    /* vectors */
    float4 v = float4(-1.5f, 0.25f, 4.0f, 9.0f);
    float4 sv = metal::sqrt(metal::abs(v));
    CHECK(sv.x == sqrtf(1.5f) && sv.w == 3.0f);
    CHECK(metal::all(metal::clamp(v, 0.0f, 1.0f) == float4(0, 0.25f, 1, 1)));
    CHECK(metal::all(metal::max(v, 1.0f) == float4(1, 1, 4, 9)) && metal::all(metal::min(v, v * 2) == float4(-3, 0.25f, 4, 9)));
    CHECK(metal::all(metal::mix(float2(0, 10), float2(10, 20), 0.5f) == float2(5, 15)));
    CHECK(metal::all(metal::step(1.0f, v) == float4(0, 0, 1, 1)) && metal::all(metal::select(v, -v, v > 1) == float4(-1.5f, 0.25f, -4, -9)));
    CHECK(metal::all(metal::isnan(float2(NAN, 1)) == bool2(true, false)));
    CHECK(metal::all(metal::fma(v, v, v) == v * v + v) && metal::all(metal::pow(float2(2, 3), 2.0f) == float2(4, 9)));
    half2 hv = metal::exp(half2(0, 1));
    CHECK(float(hv.x) == 1.0f && fabs(float(hv.y) - 2.71875f) < 1e-6);
    /* geometric */
    float3 p = float3(1, 2, 3), q = float3(4, -5, 6);
    CHECK(metal::dot(p, q) == 12.0f && metal::length_squared(p) == 14.0f);
    CHECK(fabs(metal::length(p) - sqrt(14.0)) < 1e-6 && fabs(metal::distance(p, q) - sqrt(9.0 + 49 + 9)) < 1e-5);
    float3 cr = metal::cross(p, q);
    CHECK(cr.x == 2 * 6 - 3 * -5 && cr.y == 3 * 4 - 1 * 6 && cr.z == 1 * -5 - 2 * 4);
    float3 n = metal::normalize(q);
    CHECK(fabs(metal::length(n) - 1.0) < 1e-6 && fabs(n.y - (-5 / sqrt(77.0))) < 1e-6);
    CHECK(float(metal::dot(half2(1, 2), half2(3, 4))) == 11.0f);
}

/* ---- integer functions ----------------------------------------------------- */

template <class I> static int ref_popcount(I x) {
    uint64_t u = (uint64_t)(typename alloy_unsigned<I>::type)x;
    int n = 0;
    for (; u; u >>= 1) n += (int)(u & 1);
    return n;
}
template <class I> static int ref_clz(I x) {
    int w = (int)sizeof(I) * 8;
    uint64_t u = (uint64_t)(typename alloy_unsigned<I>::type)x;
    int n = 0;
    for (int b = w - 1; b >= 0 && !((u >> b) & 1); b--) n++;
    return n;
}
template <class I> static int ref_ctz(I x) {
    int w = (int)sizeof(I) * 8;
    uint64_t u = (uint64_t)(typename alloy_unsigned<I>::type)x;
    int n = 0;
    while (n < w && !((u >> n) & 1)) n++;
    return n;
}
template <class I> static int check_bits(void) {
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        uint64_t r = harness_rand_u64();
        I x = (I)(r >> (harness_rand_u64() % 64)); /* varied magnitudes */
        if (i == 0) x = 0;
        if ((int)metal::popcount(x) != ref_popcount(x)) bad++;
        if ((int)metal::clz(x) != ref_clz(x)) bad++;
        if ((int)metal::ctz(x) != ref_ctz(x)) bad++;
        I y = (I)harness_rand_u64();
        I hi_ref = std::is_signed<I>::value
                       ? (I)(((__int128)x * (__int128)y) >> (sizeof(I) * 8))
                       : (I)(((unsigned __int128)x * (unsigned __int128)y) >> (sizeof(I) * 8));
        if (metal::mulhi(x, y) != hi_ref) bad++;
        /* saturating and halving */
        __int128 lo = std::is_signed<I>::value ? -((__int128)1 << (sizeof(I) * 8 - 1)) : 0;
        __int128 hi = std::is_signed<I>::value ? ((__int128)1 << (sizeof(I) * 8 - 1)) - 1 : ((__int128)1 << (sizeof(I) * 8)) - 1;
        __int128 s = (__int128)x + y, d = (__int128)x - y;
        if (metal::add_sat(x, y) != (I)(s < lo ? lo : s > hi ? hi : s)) bad++;
        if (metal::sub_sat(x, y) != (I)(d < lo ? lo : d > hi ? hi : d)) bad++;
        __int128 hs = s >= 0 ? s / 2 : -((-s + 1) / 2); /* floor((x + y) / 2) */
        __int128 rs = (s + 1) >= 0 ? (s + 1) / 2 : -((-(s + 1) + 1) / 2);
        if (metal::hadd(x, y) != (I)hs || metal::rhadd(x, y) != (I)rs) bad++;
        __int128 ad = d < 0 ? -d : d;
        if (metal::absdiff(x, y) != (I)ad) bad++;
        /* bit fields */
        uint w = sizeof(I) * 8, off = (uint)(harness_rand_u64() % w), nb = (uint)(harness_rand_u64() % (w - off + 1));
        uint64_t ux = (uint64_t)(typename alloy_unsigned<I>::type)x, uy = (uint64_t)(typename alloy_unsigned<I>::type)y;
        uint64_t field = 0;
        for (uint b = 0; b < nb; b++) field |= ((ux >> (off + b)) & 1ull) << b;
        if (std::is_signed<I>::value && nb > 0 && nb < w && ((field >> (nb - 1)) & 1))
            for (uint b = nb; b < 64; b++) field |= 1ull << b;
        if (metal::extract_bits(x, off, nb) != (I)field) bad++;
        uint64_t ins = ux;
        for (uint b = 0; b < nb; b++) {
            ins &= ~(1ull << (off + b));
            ins |= ((uy >> b) & 1ull) << (off + b);
        }
        if (metal::insert_bits(x, y, off, nb) != (I)ins) bad++;
        uint rot = (uint)(harness_rand_u64() % (2 * w));
        uint64_t rr = ux;
        for (uint k = 0; k < rot % w; k++) rr = ((rr << 1) | (rr >> (w - 1))) & (w == 64 ? ~0ull : ((1ull << w) - 1));
        if (metal::rotate(x, (I)rot) != (I)rr) bad++;
    }
    return bad;
}

static void test_integer(void) {
    int bad = check_bits<uchar>() + check_bits<signed char>() + check_bits<short>() + check_bits<ushort>() +
              check_bits<int>() + check_bits<uint>() + check_bits<long>() + check_bits<ulong>();
    CHECK_MSG(bad == 0, "%d integer function results wrong", bad);
    CHECK(metal::clz(1u) == 31u && metal::ctz(0u) == 32u && metal::popcount(-1L) == 64L);
    CHECK(metal::all(metal::popcount(uint2(3, 7)) == uint2(2, 3)) && metal::all(metal::clz(ushort2(1, 0)) == ushort2(15, 16)));
    CHECK(metal::extract_bits(0xf0u, 4, 4) == 0xfu && metal::extract_bits((int)0xf0, 4, 4) == -1);
    CHECK(metal::insert_bits(0u, 5u, 8, 3) == 0x500u && metal::rotate(0x80000001u, 1u) == 3u);
}

/* ---- as_type, elem_to_loc, Limits, ceildiv --------------------------------- */

static void test_helpers(void) {
    CHECK(metal::as_type<uint>(1.0f) == 0x3f800000u && metal::as_type<float>(0x40000000u) == 2.0f);
    half2 hh = metal::as_type<half2>(0x3c004000u);
    CHECK(float(hh.x) == 2.0f && float(hh.y) == 1.0f);
    uint2 u2 = metal::as_type<uint2>(float2(1.0f, -2.0f));
    CHECK(u2.x == 0x3f800000u && u2.y == 0xc0000000u);
    CHECK(metal::as_type<ushort>(half(1.0f)) == 0x3c00 && metal::as_type<int4>(float4(0)).w == 0);
    CHECK(metal::as_type<ulong>(1.0) == 0x3ff0000000000000ul);

    int bad = 0;
    for (int t = 0; t < 200; t++) {
        int ndim = 1 + (int)(harness_rand_u64() % 6);
        int shape[8];
        int64_t strides[8];
        int64_t total = 1;
        for (int d = 0; d < ndim; d++) {
            shape[d] = 1 + (int)(harness_rand_u64() % 7);
            strides[d] = (int64_t)(harness_rand_u64() % 1000) - 300;
            total *= shape[d];
        }
        for (int64_t elem = 0; elem < total; elem++) {
            int64_t rem = elem, want = 0;
            for (int d = ndim - 1; d >= 0; d--) {
                want += (rem % shape[d]) * strides[d];
                rem /= shape[d];
            }
            if (elem_to_loc((uint)elem, shape, strides, ndim) != want) bad++;
            if (elem_to_loc(elem, (const int *)shape, (const int64_t *)strides, ndim) != want) bad++;
            if (ndim >= 2) {
                uint x = (uint)(elem % shape[ndim - 1]), y = (uint)((elem / shape[ndim - 1]) % shape[ndim - 2]);
                uint z = (uint)(elem / shape[ndim - 1] / shape[ndim - 2]);
                if (elem_to_loc(uint3(x, y, z), shape, strides, ndim) != want) bad++;
            }
        }
    }
    CHECK_MSG(bad == 0, "%d elem_to_loc results wrong", bad);
    int64_t st2[2] = {10, 1};
    CHECK(elem_to_loc_2(uint2(3, 4), st2) == 43 && elem_to_loc_1(5u, 3) == 15);
    int64_t st3[3] = {100, 10, 1};
    CHECK(elem_to_loc_3(uint3(1, 2, 3), st3) == 321);

    CHECK(ceildiv(10, 3) == 4 && ceildiv(9u, 3u) == 3u && ceildiv(1, 32) == 1 && ceildiv(0, 4) == 0);

    CHECK(Limits<float>::max == INFINITY && Limits<float>::min == -INFINITY);
    CHECK(Limits<float>::finite_max == FLT_MAX && Limits<float>::finite_min == -FLT_MAX);
    CHECK(hbits(Limits<half>::max) == 0x7c00 && hbits(Limits<half>::min) == 0xfc00);
    CHECK(hbits(Limits<half>::finite_max) == 0x7bff && hbits(Limits<half>::finite_min) == 0xfbff);
    CHECK(Limits<bfloat>::finite_max.alloy_bits == 0x7f7f && metal::isinf(Limits<bfloat>::min));
    CHECK(Limits<int>::max == 2147483647 && Limits<int>::min == -2147483647 - 1);
    CHECK(Limits<uint>::max == 0xffffffffu && Limits<uint>::min == 0u && Limits<uint>::finite_min == 0u);
    CHECK(Limits<short>::min == -32768 && Limits<uchar>::max == 255 && Limits<long>::min == LONG_MIN);
    CHECK(Limits<ulong>::max == ~0ul && Limits<bool>::max == true && Limits<int8_t>::min == -128);
    CHECK(metal::numeric_limits<float>::infinity() == INFINITY && metal::numeric_limits<int>::max() == INT_MAX);
    CHECK(float(metal::numeric_limits<half>::epsilon()) == 0x1p-10f);
}

/* ---- atomics ------------------------------------------------------------------ */

static metal::atomic_float g_fsum;
static metal::atomic_int g_isum;
static void *atomic_worker(void *) {
    for (int i = 0; i < 5000; i++) {
        metal::atomic_fetch_add_explicit(&g_fsum, 1.0f, metal::memory_order_relaxed);
        metal::atomic_fetch_add_explicit(&g_isum, 2, metal::memory_order_relaxed);
    }
    return NULL;
}

static void test_atomics(void) {
    using namespace metal;
    atomic_int ai;
    atomic_store_explicit(&ai, 5, memory_order_relaxed);
    CHECK(atomic_load_explicit(&ai, memory_order_relaxed) == 5);
    CHECK(atomic_fetch_add_explicit(&ai, 3, memory_order_relaxed) == 5);
    CHECK(atomic_fetch_sub_explicit(&ai, 1, memory_order_relaxed) == 8);
    CHECK(atomic_fetch_max_explicit(&ai, 10, memory_order_relaxed) == 7);
    CHECK(atomic_fetch_max_explicit(&ai, 4, memory_order_relaxed) == 10);
    CHECK(atomic_fetch_min_explicit(&ai, -3, memory_order_relaxed) == 10);
    CHECK(atomic_load_explicit(&ai, memory_order_relaxed) == -3);
    CHECK(atomic_exchange_explicit(&ai, 12, memory_order_relaxed) == -3);
    CHECK(atomic_fetch_and_explicit(&ai, 4, memory_order_relaxed) == 12);
    CHECK(atomic_fetch_or_explicit(&ai, 3, memory_order_relaxed) == 4);
    CHECK(atomic_fetch_xor_explicit(&ai, 1, memory_order_relaxed) == 7);
    CHECK(atomic_load_explicit(&ai, memory_order_seq_cst) == 6);
    int expected = 5;
    CHECK(!atomic_compare_exchange_weak_explicit(&ai, &expected, 9, memory_order_relaxed, memory_order_relaxed));
    CHECK(expected == 6);
    bool ok = false;
    for (int k = 0; k < 100 && !ok; k++) /* weak may fail spuriously */
        ok = atomic_compare_exchange_weak_explicit(&ai, &expected, 9, memory_order_relaxed, memory_order_relaxed);
    CHECK(ok && atomic_load_explicit(&ai, memory_order_relaxed) == 9);

    atomic_uint au;
    atomic_store_explicit(&au, 1u, memory_order_relaxed);
    CHECK(atomic_fetch_sub_explicit(&au, 2, memory_order_relaxed) == 1u);
    CHECK(atomic_load_explicit(&au, memory_order_relaxed) == 0xffffffffu);
    CHECK(atomic_fetch_min_explicit(&au, 7u, memory_order_relaxed) == 0xffffffffu);
    CHECK(atomic_fetch_max_explicit(&au, 3u, memory_order_relaxed) == 7u);

    atomic_float af;
    atomic_store_explicit(&af, 1.5f, memory_order_relaxed);
    CHECK(atomic_fetch_add_explicit(&af, 2.25f, memory_order_relaxed) == 1.5f);
    CHECK(atomic_fetch_sub_explicit(&af, 0.75f, memory_order_relaxed) == 3.75f);
    CHECK(atomic_fetch_max_explicit(&af, 10.0f, memory_order_relaxed) == 3.0f);
    CHECK(atomic_fetch_min_explicit(&af, -1.0f, memory_order_relaxed) == 10.0f);
    CHECK(atomic_exchange_explicit(&af, 0.5f, memory_order_relaxed) == -1.0f);
    float fe = 0.5f;
    CHECK(atomic_compare_exchange_strong_explicit(&af, &fe, 8.0f, memory_order_relaxed, memory_order_relaxed));
    CHECK(atomic_load_explicit(&af, memory_order_relaxed) == 8.0f);

    /* an output buffer seen as atomics (atomic_outputs) */
    float buf[4] = {0, 0, 0, 0};
    atomic<float> *out = (atomic<float> *)buf;
    atomic_fetch_add_explicit(&out[2], 3.0f, memory_order_relaxed);
    CHECK(buf[2] == 3.0f);

    /* real atomicity across OS threads */
    atomic_store_explicit(&g_fsum, 0.0f, memory_order_relaxed);
    atomic_store_explicit(&g_isum, 0, memory_order_relaxed);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, atomic_worker, NULL);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK(atomic_load_explicit(&g_fsum, memory_order_relaxed) == 20000.0f);
    CHECK(atomic_load_explicit(&g_isum, memory_order_relaxed) == 40000);
}

/* ---- a test runtime for SIMD functions: one OS thread per lane ------------- */

struct test_sched {
    pthread_barrier_t bar;
    unsigned char slots[2][32 * ALLOY_CPU_SIMD_SLOT];
    unsigned active;
};
static thread_local unsigned t_lane;
static thread_local int t_phase;

static const unsigned char *test_exchange(alloy_cpu_sched *s, const void *value, unsigned size, unsigned *active,
                                          unsigned *lane) {
    test_sched *ts = (test_sched *)s;
    unsigned char *buf = ts->slots[t_phase];
    t_phase ^= 1; /* the other buffer may still be read by slower lanes */
    memcpy(buf + t_lane * ALLOY_CPU_SIMD_SLOT, value, size);
    pthread_barrier_wait(&ts->bar);
    *active = ts->active;
    *lane = t_lane;
    return buf;
}
static void test_barrier_fn(alloy_cpu_sched *s) { pthread_barrier_wait(&((test_sched *)s)->bar); }
static void test_barrier_at(alloy_cpu_sched *s, unsigned) { test_barrier_fn(s); }

static const alloy_cpu_services test_services = {test_barrier_at, test_exchange, test_barrier_fn};

struct lane_job {
    const alloy_cpu_group *group;
    unsigned lane;
    void (*fn)(unsigned lane);
};
static void *lane_main(void *p) {
    lane_job *j = (lane_job *)p;
    t_lane = j->lane;
    t_phase = 0;
    ALLOY_SET_GROUP(j->group);
    j->fn(j->lane);
    return NULL;
}
/* Runs fn(lane) on one thread per lane of `active`, as one simdgroup. */
static void run_simdgroup(unsigned active, void (*fn)(unsigned)) {
    static test_sched ts;
    int n = __builtin_popcount(active);
    pthread_barrier_init(&ts.bar, NULL, (unsigned)n);
    ts.active = active;
    alloy_cpu_launch launch;
    memset(&launch, 0, sizeof launch);
    launch.svc = &test_services;
    alloy_cpu_group group;
    memset(&group, 0, sizeof group);
    group.launch = &launch;
    group.sched = (alloy_cpu_sched *)&ts;
    pthread_t th[32];
    lane_job jobs[32];
    for (unsigned l = 0; l < 32; l++) {
        if (!((active >> l) & 1)) continue;
        jobs[l].group = &group;
        jobs[l].lane = l;
        jobs[l].fn = fn;
        pthread_create(&th[l], NULL, lane_main, &jobs[l]);
    }
    for (unsigned l = 0; l < 32; l++)
        if ((active >> l) & 1) pthread_join(th[l], NULL);
    pthread_barrier_destroy(&ts.bar);
}

/* inputs of lane l */
static float in_f(unsigned l) { return (float)((l * 7) % 13) - 4.5f; }
static uint in_u(unsigned l) { return (l * 2654435761u) >> 7; }
static float in_p(unsigned l) { return 1.0f + 0.125f * (float)(l % 3); }

struct lane_out {
    float sum, prod, mx, mn, isum, esum, iprod, eprod;
    uint uand, uor, uxor;
    float shuf, up, down, xr, rup, rdown, bc, bfirst;
    float4 vsum, vshuf;
    half hsum, hmax;
    ulong lshuf;
    ulong ballot;
    bool any, all, first, vote_all;
    float qsum, qshuf, qdown, qpre;
    bool qfirst;
    int bar_ok;
};
static lane_out g_out[32];
static int g_shared[32];

static void simd_body(unsigned lane) {
    using namespace metal;
    lane_out &o = g_out[lane];
    float x = in_f(lane);
    o.sum = simd_sum(x);
    o.prod = simd_product(in_p(lane));
    o.mx = simd_max(x);
    o.mn = simd_min(x);
    o.isum = simd_prefix_inclusive_sum(x);
    o.esum = simd_prefix_exclusive_sum(x);
    o.iprod = simd_prefix_inclusive_product(in_p(lane));
    o.eprod = simd_prefix_exclusive_product(in_p(lane));
    o.uand = simd_and(in_u(lane));
    o.uor = simd_or(in_u(lane));
    o.uxor = simd_xor(in_u(lane));
    o.shuf = simd_shuffle(x, (ushort)((lane * 5) % 32));
    o.up = simd_shuffle_up(x, 3);
    o.down = simd_shuffle_down(x, 5);
    o.xr = simd_shuffle_xor(x, 6);
    o.rup = simd_shuffle_rotate_up(x, 2);
    o.rdown = simd_shuffle_rotate_down(x, 33);
    o.bc = simd_broadcast(x, 7);
    o.bfirst = simd_broadcast_first(x);
    float4 v = float4(x, 2 * x, (float)lane, 1);
    o.vsum = simd_sum(v);
    o.vshuf = simd_shuffle_xor(v, 1);
    o.hsum = simd_sum(half(x));
    o.hmax = simd_max(half(x));
    o.lshuf = simd_shuffle_down((ulong)in_u(lane) << 20, 1);
    simd_vote vote = simd_ballot(lane % 3 == 0);
    o.ballot = (ulong)vote;
    o.vote_all = simd_ballot(true).all() && !simd_ballot(lane != 0).all();
    o.any = simd_any(lane == 9);
    o.all = simd_all(x > -4.0f);
    o.first = simd_is_first();
    o.qsum = quad_sum(x);
    o.qshuf = quad_shuffle(x, 2);
    o.qdown = quad_shuffle_down(x, 1);
    o.qpre = quad_prefix_exclusive_sum(x);
    o.qfirst = quad_is_first();
    /* barrier: every write before it is seen after it */
    g_shared[lane] = (int)lane + 100;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int ok = 1;
    for (unsigned l = 0; l < 32; l++)
        if (((simd_active_threads_mask().alloy_mask >> l) & 1) && g_shared[l] != (int)l + 100) ok = 0;
    simdgroup_barrier(mem_flags::mem_none);
    o.bar_ok = ok;
}

static float lane_val(unsigned active, unsigned lane, long src) {
    if (src < 0 || src >= 32 || !((active >> src) & 1)) return in_f(lane);
    return in_f((unsigned)src);
}

static void check_simd(unsigned active) {
    memset(g_out, 0, sizeof g_out);
    memset(g_shared, 0, sizeof g_shared);
    run_simdgroup(active, simd_body);
    double sum = 0, prod = 1, vs1 = 0, vs2 = 0, vs3 = 0;
    float mx = -INFINITY, mn = INFINITY;
    uint uand = ~0u, uor = 0, uxor = 0;
    ulong ballot = 0;
    unsigned first = (unsigned)__builtin_ctz(active);
    bool all = true, any = false;
    float hsum = 0;
    float hmax = -INFINITY;
    for (unsigned l = 0; l < 32; l++) {
        if (!((active >> l) & 1)) continue;
        float x = in_f(l);
        sum += x;
        prod *= in_p(l);
        mx = fmaxf(mx, x);
        mn = fminf(mn, x);
        uand &= in_u(l);
        uor |= in_u(l);
        uxor ^= in_u(l);
        vs1 += 2 * x;
        vs2 += l;
        vs3 += 1;
        if (l % 3 == 0) ballot |= 1ul << l;
        all = all && x > -4.0f;
        any = any || l == 9;
        hsum = float(half(hsum + float(half(x)))); /* lane-order half accumulation */
        hmax = fmaxf(hmax, float(half(x)));
    }
    int bad = 0;
    for (unsigned l = 0; l < 32; l++) {
        if (!((active >> l) & 1)) continue;
        const lane_out &o = g_out[l];
        double isum = 0, esum = 0, iprod = 1, eprod = 1;
        for (unsigned j = 0; j <= l; j++) {
            if (!((active >> j) & 1)) continue;
            isum += in_f(j);
            iprod *= in_p(j);
            if (j < l) {
                esum += in_f(j);
                eprod *= in_p(j);
            }
        }
        unsigned qb = l & ~3u;
        double qsum = 0, qpre = 0;
        unsigned qfirst = 99;
        for (unsigned j = qb; j < qb + 4; j++) {
            if (!((active >> j) & 1)) continue;
            qsum += in_f(j);
            if (j < l) qpre += in_f(j);
            if (qfirst == 99) qfirst = j;
        }
        float x = in_f(l);
        bool ok = fabs(o.sum - sum) < 1e-4 && fabs(o.prod - prod) < 1e-3 * prod && o.mx == mx && o.mn == mn &&
                  fabs(o.isum - isum) < 1e-4 && fabs(o.esum - esum) < 1e-4 &&
                  fabs(o.iprod - iprod) < 1e-3 * iprod && fabs(o.eprod - eprod) < 1e-3 * eprod &&
                  o.uand == uand && o.uor == uor && o.uxor == uxor &&
                  o.shuf == lane_val(active, l, (long)((l * 5) % 32)) &&
                  o.up == lane_val(active, l, (long)l - 3) && o.down == lane_val(active, l, (long)l + 5) &&
                  o.xr == lane_val(active, l, (long)(l ^ 6)) && o.rup == lane_val(active, l, (long)((l + 30) % 32)) &&
                  o.rdown == lane_val(active, l, (long)((l + 1) % 32)) && o.bc == lane_val(active, l, 7) &&
                  o.bfirst == in_f(first) && fabs(o.vsum.x - sum) < 1e-4 && fabs(o.vsum.y - vs1) < 1e-4 &&
                  o.vsum.z == (float)vs2 && o.vsum.w == (float)vs3 &&
                  o.vshuf.x == lane_val(active, l, (long)(l ^ 1)) && o.vshuf.z == (float)(((active >> (l ^ 1)) & 1) ? (l ^ 1) : l) &&
                  float(o.hsum) == hsum && float(o.hmax) == hmax &&
                  o.lshuf == (ulong)in_u(l + 1 < 32 && ((active >> (l + 1)) & 1) ? l + 1 : l) << 20 &&
                  o.ballot == ballot && o.vote_all == ((active & 1u) != 0);
        ok = ok && o.any == any && o.all == all && o.first == (l == first) && fabs(o.qsum - qsum) < 1e-5 &&
             o.qshuf == lane_val(active, l, (long)(qb + 2)) &&
             o.qdown == ((l & 3) + 1 < 4 ? lane_val(active, l, (long)l + 1) : x) && fabs(o.qpre - qpre) < 1e-5 &&
             o.qfirst == (l == qfirst) && o.bar_ok == 1;
        if (!ok && bad++ < 3) fprintf(stderr, "  active %08x: lane %u results differ (sum %g want %g)\n", active, l, o.sum, sum);
    }
    CHECK_MSG(bad == 0, "SIMD functions wrong on %d lanes (active %08x)", bad, active);
}

static void test_simd(void) {
    check_simd(0xffffffffu);
    check_simd(0x00001fffu); /* a partial simdgroup at the grid edge */
    check_simd(0xa5c3f00eu); /* scattered lanes (lane 0 inactive) */
    check_simd(0x80000000u); /* a single lane */
}

/* loop mode: no scheduler, the caller is a lone lane */
static void test_simd_alone(void) {
    alloy_cpu_launch launch;
    memset(&launch, 0, sizeof launch);
    alloy_cpu_group group;
    memset(&group, 0, sizeof group);
    group.launch = &launch;
    ALLOY_SET_GROUP(&group);
    CHECK(metal::simd_sum(3.5f) == 3.5f && metal::simd_is_first() && metal::simd_shuffle_down(2, 1) == 2);
    CHECK(metal::simd_prefix_exclusive_sum(4) == 0 && (ulong)metal::simd_ballot(true) == 1ul);
    metal::threadgroup_barrier(metal::mem_flags::mem_device | metal::mem_flags::mem_threadgroup);
    ALLOY_SET_GROUP(NULL);
}

/* ---- simdgroup matrices --------------------------------------------------------- */

static float g_A[8 * 11 + 16], g_B[8 * 9 + 16], g_D[64], g_E[10 * 12];
static half g_HA[64], g_HB[64], g_HD[64];
static float g_te[32][2], g_diag[32][2];

static void matrix_body(unsigned lane) {
    using namespace metal;
    simdgroup_float8x8 a, b, d, e;
    simdgroup_load(a, g_A, 11, ulong2(2, 1));
    simdgroup_load(b, g_B, 9, ulong2(0, 0), true);
    g_te[lane][0] = a.thread_elements()[0];
    g_te[lane][1] = a.thread_elements()[1];
    simdgroup_float8x8 c = simdgroup_float8x8(0.5f); /* diagonal */
    g_diag[lane][0] = c.thread_elements()[0];
    g_diag[lane][1] = c.thread_elements()[1];
    simdgroup_multiply_accumulate(d, a, b, c);
    simdgroup_store(d, g_D, 8);
    simdgroup_multiply(e, a, b);
    simdgroup_store(e, g_E, 12, ulong2(1, 2), true);
    simdgroup_half8x8 ha, hb, hd = make_filled_simdgroup_matrix<half, 8, 8>(half(1.0f));
    simdgroup_load(ha, g_HA);
    simdgroup_load(hb, g_HB);
    simdgroup_multiply_accumulate(hd, ha, hb, hd);
    simdgroup_store(hd, g_HD);
    simdgroup_bfloat8x8 bz = make_filled_simdgroup_matrix<bfloat, 8, 8>(bfloat(2.0f));
    simdgroup_float8x8 fz;
    simdgroup_multiply(fz, bz, bz);
    if (fz.thread_elements()[0] != 32.0f) g_te[lane][0] = -1e30f;
}

static void test_matrix(void) {
    for (size_t i = 0; i < sizeof g_A / sizeof g_A[0]; i++) g_A[i] = (float)harness_uniform(-1, 1);
    for (size_t i = 0; i < sizeof g_B / sizeof g_B[0]; i++) g_B[i] = (float)harness_uniform(-1, 1);
    for (int i = 0; i < 64; i++) {
        g_HA[i] = half((float)harness_uniform(-2, 2));
        g_HB[i] = half((float)harness_uniform(-2, 2));
    }
    for (int i = 0; i < 120; i++) g_E[i] = 12345.0f;
    run_simdgroup(0xffffffffu, matrix_body);
    /* Metal's lane -> (row, col) distribution */
    int bad = 0;
    for (unsigned lane = 0; lane < 32; lane++) {
        unsigned q = lane / 4;
        unsigned row = (q & 4) + (lane / 2) % 4, col = (q & 2) * 2 + (lane % 2) * 2;
        for (unsigned k = 0; k < 2; k++) {
            if (g_te[lane][k] != g_A[(1 + row) * 11 + 2 + col + k]) bad++;
            if (g_diag[lane][k] != (row == col + k ? 0.5f : 0.0f)) bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d thread_elements misplaced", bad);
    double worst = 0, worst_e = 0, worst_h = 0;
    int untouched = 0;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++) {
            double ref = r == c ? 0.5 : 0.0, prod = 0, href = 1.0, habs = 1.0;
            for (int k = 0; k < 8; k++) {
                double av = g_A[(1 + r) * 11 + 2 + k], bv = g_B[c * 9 + k]; /* b loaded transposed */
                prod += av * bv;
                const double hp = (double)float(g_HA[r * 8 + k]) * (double)float(g_HB[k * 8 + c]);
                href += hp;
                habs += fabs(hp);
            }
            ref += prod;
            worst = fmax(worst, fabs(g_D[r * 8 + c] - ref));
            worst_e = fmax(worst_e, fabs(g_E[(2 + c) * 12 + 1 + r] - prod)); /* stored transposed */
            /* the float accumulation's own error (8 additions, at most 8 u of the
             * terms' magnitudes) is a share of a half ulp where the sum cancels;
             * beyond it the result is the half rounding of the float sum */
            const double acc = half_ulps(href + 8 * ldexp(1.0, -24) * habs, href);
            worst_h = fmax(worst_h, half_ulps(float(g_HD[r * 8 + c]), href) - acc);
        }
    for (int i = 0; i < 120; i++) {
        int row = i / 12, col = i % 12;
        bool inside = row >= 2 && row < 10 && col >= 1 && col < 9;
        if (!inside && g_E[i] != 12345.0f) untouched++;
    }
    CHECK_MSG(worst < 1e-5, "multiply_accumulate error %g", worst);
    CHECK_MSG(worst_e < 1e-5, "multiply + transposed store error %g", worst_e);
    CHECK_MSG(worst_h <= 0.51, "half matrix product: %.3f half ulp past the float sum's error", worst_h);
    CHECK(untouched == 0);
    for (unsigned lane = 0; lane < 32; lane++) CHECK(g_te[lane][0] > -1e29f);
}

/* A kernel-shaped function using most of the prelude: compiled, not run. */
extern "C" void alloy_prelude_compile_only(const alloy_cpu_group *g, const float *inp, float *out,
                                           metal::atomic<float> *acc, uint3 tid);
extern "C" void alloy_prelude_compile_only(const alloy_cpu_group *g, const float *inp, float *out,
                                           metal::atomic<float> *acc, uint3 tid) {
    using namespace metal;
    ALLOY_SET_GROUP(g);
    ALLOY_THREADGROUP float4 tg[32];
    ALLOY_THREADGROUP atomic_uint counter;
    tg[tid.x % 32] = float4(inp[tid.x]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    atomic_fetch_add_explicit(&counter, 1u, memory_order_relaxed);
    float u = simd_sum(tg[(tid.x + 1) % 32].x);
    float v = u + quad_max(u) + fast::exp(1.5h) + precise::tanh(u);
    bfloat4 b4 = bfloat4(simd_shuffle_xor(float4(v), 2u));
    atomic_fetch_max_explicit(acc, v, memory_order_relaxed);
    out[tid.x] = v + float(b4.w) + float(simd_broadcast_first(half(v))) + (float)simd_ballot(v > 0).any();
}

int main(void) {
    harness_seed();
    RUN(test_sizes);
    RUN(test_half_exhaustive);
    RUN(test_half_from_float);
    RUN(test_half_from_double);
    RUN(test_bfloat);
    RUN(test_half_arith);
    RUN(test_vectors);
    RUN(test_math);
    RUN(test_integer);
    RUN(test_helpers);
    RUN(test_atomics);
    RUN(test_simd);
    RUN(test_simd_alone);
    RUN(test_matrix);
    return harness_finish();
}
