/* common.h — the backend-neutral part of the MSL prelude: scalar types, half
 * and bfloat, vectors with swizzles, math, geometric and integer functions,
 * as_type, MLX's helpers (elem_to_loc, ceildiv, Limits) and the types that
 * atomics, barriers and simdgroup matrices need.
 *
 * Pasted at the top of every generated kernel (CPU: after cpu_abi.h, before
 * cpu.h; CUDA: after the CUDA definitions of the hooks below), so that
 * body-only MSL compiles as C++20. It includes no header at all (cold compile
 * time matters, and NVRTC has no standard library): only compiler builtins,
 * reached through hook macros a backend may predefine (the defaults under
 * NVRTC/nvcc are in parentheses):
 *   ALLOY_FN            how functions are marked (`inline`;
 *                       CUDA: `__device__ __forceinline__`)
 *   ALLOY_LIBM(f)       the libm function `f` (`__builtin_##f`; CUDA `::f`)
 *   ALLOY_LIBM_FAST(f)  the same for metal::fast:: (ALLOY_LIBM(f))
 *   ALLOY_EXPF(HOOK) ALLOY_TANHF(HOOK)  float exp and tanh of a namespace whose
 *                       libm hook is HOOK (HOOK(expf), HOOK(tanhf); the CPU's
 *                       are in cpu_math.h)
 *   ALLOY_FDIVF(HOOK)   float divide(x, y) of that namespace (alloy_fdiv_ieee,
 *                       x / y; CUDA's fast:: takes __fdividef)
 *   ALLOY_MEMCPY        bit copies (__builtin_memcpy; CUDA memcpy)
 *   ALLOY_POPC32/64 ALLOY_CLZ32/64 ALLOY_CTZ32/64  bit counting (nonzero
 *                       arguments only for clz/ctz; __builtin_*; CUDA __popc..)
 *   ALLOY_INFF ALLOY_NANF ALLOY_INF ALLOY_NAN  constant Inf/NaN
 *   ALLOY_F2H ALLOY_H2F ALLOY_F2BF ALLOY_BF2F  float <-> half/bfloat bits
 *                       (the portable alloy_f2h ... below)
 * Under NVRTC, CUDA's predeclared vector structs (float4, ...) keep their
 * names: the MSL names are macros for alloy_float4 etc. there (checked with
 * NVRTC 13, with and without --device-as-default-execution-space).
 * Float and double overloads of the math functions are constrained
 * templates, so that a global non-template one (CUDA's math functions, or
 * <math.h> included by a header) is preferred instead of being ambiguous.
 * Everything MSL keeps in namespace metal lives there; the generated code
 * says `using namespace metal;` before the user's header. MLX's helpers
 * (elem_to_loc, ceildiv, Limits) are global, as in MLX. */
#ifndef ALLOY_PRELUDE_COMMON_H
#define ALLOY_PRELUDE_COMMON_H

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define ALLOY_PRELUDE_CUDA 1 /* defaults for NVRTC (which lacks these builtins) */
#endif

#ifndef ALLOY_FN
#ifdef ALLOY_PRELUDE_CUDA
#define ALLOY_FN __device__ __forceinline__
#else
#define ALLOY_FN inline
#endif
#endif
#ifndef ALLOY_LIBM
#ifdef ALLOY_PRELUDE_CUDA
#define ALLOY_LIBM(f) ::f
#else
#define ALLOY_LIBM(f) __builtin_##f
#endif
#endif
#ifndef ALLOY_LIBM_FAST
#define ALLOY_LIBM_FAST(f) ALLOY_LIBM(f)
#endif
#ifndef ALLOY_EXPF
#define ALLOY_EXPF(HOOK) HOOK(expf)
#endif
#ifndef ALLOY_TANHF
#define ALLOY_TANHF(HOOK) HOOK(tanhf)
#endif
#ifndef ALLOY_FDIVF
#define ALLOY_FDIVF(HOOK) alloy_fdiv_ieee
#endif
#ifndef ALLOY_MEMCPY
#ifdef ALLOY_PRELUDE_CUDA
#define ALLOY_MEMCPY memcpy
#else
#define ALLOY_MEMCPY __builtin_memcpy
#endif
#endif
#ifndef ALLOY_POPC32
#ifdef ALLOY_PRELUDE_CUDA
#define ALLOY_POPC32(x) __popc(x)
#define ALLOY_POPC64(x) __popcll(x)
#define ALLOY_CLZ32(x) __clz(x)
#define ALLOY_CLZ64(x) __clzll(x)
#define ALLOY_CTZ32(x) (__ffs(x) - 1)
#define ALLOY_CTZ64(x) (__ffsll(x) - 1)
#else
#define ALLOY_POPC32(x) __builtin_popcount(x)
#define ALLOY_POPC64(x) __builtin_popcountll(x)
#define ALLOY_CLZ32(x) __builtin_clz(x)
#define ALLOY_CLZ64(x) __builtin_clzll(x)
#define ALLOY_CTZ32(x) __builtin_ctz(x)
#define ALLOY_CTZ64(x) __builtin_ctzll(x)
#endif
#endif
/* constant infinities and NaNs */
#ifndef ALLOY_INFF
#ifdef ALLOY_PRELUDE_CUDA
#define ALLOY_INFF __builtin_bit_cast(float, 0x7f800000u)
#define ALLOY_NANF __builtin_bit_cast(float, 0x7fc00000u)
#define ALLOY_INF __builtin_bit_cast(double, 0x7ff0000000000000ull)
#define ALLOY_NAN __builtin_bit_cast(double, 0x7ff8000000000000ull)
#else
#define ALLOY_INFF __builtin_inff()
#define ALLOY_NANF __builtin_nanf("")
#define ALLOY_INF __builtin_inf()
#define ALLOY_NAN __builtin_nan("")
#endif
#endif
#ifndef METAL_FUNC
#define METAL_FUNC ALLOY_FN
#endif

/* ==== scalar types ====================================================== */

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong; /* MSL long is 64-bit, as on LP64 hosts */
static_assert(sizeof(long) == 8, "alloy needs a 64-bit long (LP64)");

#if defined(__INT8_TYPE__) && defined(__UINT64_TYPE__) && defined(__SIZE_TYPE__)
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
#else
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef unsigned long size_t;
typedef long ptrdiff_t;
#endif

/* ---- minimal type traits (no <type_traits>) ---------------------------- */

template <bool C, class T = void> struct alloy_enable_if {};
template <class T> struct alloy_enable_if<true, T> { typedef T type; };
template <bool C, class T = int> using alloy_if = typename alloy_enable_if<C, T>::type;
template <bool C, class X, class Y> struct alloy_cond { typedef X type; };
template <class X, class Y> struct alloy_cond<false, X, Y> { typedef Y type; };
template <class A, class B> struct alloy_same { static constexpr bool value = false; };
template <class A> struct alloy_same<A, A> { static constexpr bool value = true; };
/* Blocks template argument deduction (`clamp(float4, float, float)`). */
template <class T> struct alloy_id { typedef T type; };
template <class T> using alloy_id_t = typename alloy_id<T>::type;

template <class T> struct alloy_is_int { static constexpr bool value = false; };
#define ALLOY_INT_TYPE(t)                                                     \
    template <> struct alloy_is_int<t> { static constexpr bool value = true; };
ALLOY_INT_TYPE(bool)
ALLOY_INT_TYPE(char)
ALLOY_INT_TYPE(signed char)
ALLOY_INT_TYPE(unsigned char)
ALLOY_INT_TYPE(short)
ALLOY_INT_TYPE(unsigned short)
ALLOY_INT_TYPE(int)
ALLOY_INT_TYPE(unsigned int)
ALLOY_INT_TYPE(long)
ALLOY_INT_TYPE(unsigned long)
ALLOY_INT_TYPE(long long)
ALLOY_INT_TYPE(unsigned long long)
#undef ALLOY_INT_TYPE

/* Floating rank: double 4, float 3, half/bfloat 2, integers 0. */
template <class T> struct alloy_frank { static constexpr int value = 0; };
template <> struct alloy_frank<float> { static constexpr int value = 3; };
template <> struct alloy_frank<double> { static constexpr int value = 4; };

template <class T> struct alloy_is_scalar {
    static constexpr bool value = alloy_is_int<T>::value || alloy_frank<T>::value > 0;
};
template <class T> struct alloy_is_signed { static constexpr bool value = T(-1) < T(0); };
template <class T> struct alloy_unsigned { typedef T type; };
template <> struct alloy_unsigned<char> { typedef unsigned char type; };
template <> struct alloy_unsigned<signed char> { typedef unsigned char type; };
template <> struct alloy_unsigned<short> { typedef unsigned short type; };
template <> struct alloy_unsigned<int> { typedef unsigned int type; };
template <> struct alloy_unsigned<long> { typedef unsigned long type; };
template <> struct alloy_unsigned<long long> { typedef unsigned long long type; };

/* ==== half and bfloat ==================================================== */
/* IEEE binary16 (half) and bfloat16 storage; arithmetic is done in float and
 * rounded back (exact for + - * / since float has >= 2p+2 bits). Conversions
 * round to nearest even, keep NaN quiet, overflow to infinity and produce
 * subnormals. */

ALLOY_FN unsigned alloy_fbits(float f) {
    unsigned u;
    ALLOY_MEMCPY(&u, &f, 4);
    return u;
}
ALLOY_FN float alloy_bitsf(unsigned u) {
    float f;
    ALLOY_MEMCPY(&f, &u, 4);
    return f;
}

ALLOY_FN ushort alloy_f2h(float f) {
    unsigned x = alloy_fbits(f);
    unsigned sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) /* Inf, NaN (quieted, top payload bits kept) */
        return (ushort)(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u));
    if (x >= 0x47800000u) return (ushort)(sign | 0x7c00u); /* >= 65536: overflow */
    if (x >= 0x38800000u) {                                 /* normal half (may carry to Inf) */
        x += 0xc8000000u + 0xfffu + ((x >> 13) & 1u);       /* rebias -112, round half even */
        return (ushort)(sign | (x >> 13));
    }
    if (x < 0x33000000u) return (ushort)sign; /* <= 2^-25: rounds to zero */
    /* subnormal half: value / 2^-24 = m * 2^(e-126), shift right by 126-e */
    unsigned e = x >> 23, m = (x & 0x7fffffu) | 0x800000u, sh = 126u - e;
    unsigned r = m >> sh, rem = m & ((1u << sh) - 1u), halfway = 1u << (sh - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) r++;
    return (ushort)(sign | r);
}

ALLOY_FN float alloy_h2f(ushort h) {
    unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return alloy_bitsf(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
        float v = (float)m * 5.9604644775390625e-8f;
        return alloy_bitsf(alloy_fbits(v) | sign);
    }
    return alloy_bitsf(sign | ((e + 112u) << 23) | (m << 13));
}

ALLOY_FN ushort alloy_f2bf(float f) {
    unsigned x = alloy_fbits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (ushort)(x >> 16);
}
ALLOY_FN float alloy_bf2f(ushort b) { return alloy_bitsf((unsigned)b << 16); }

/* The conversions half and bfloat use (a backend may predefine hardware
 * ones with the same results, e.g. CUDA's cvt instructions). */
#ifndef ALLOY_F2H
#define ALLOY_F2H alloy_f2h
#endif
#ifndef ALLOY_H2F
#define ALLOY_H2F alloy_h2f
#endif
#ifndef ALLOY_F2BF
#define ALLOY_F2BF alloy_f2bf
#endif
#ifndef ALLOY_BF2F
#define ALLOY_BF2F alloy_bf2f
#endif

/* double -> float rounding to odd (sticky last bit), so that a second
 * rounding to half/bfloat is correctly rounded from the double. */
ALLOY_FN float alloy_d2f_odd(double d) {
    float f = (float)d;
    if (f != f || (double)f == d) return f;
    unsigned u = alloy_fbits(f);
    if (!(u & 1u)) {
        double af = f < 0 ? -(double)f : (double)f, ad = d < 0 ? -d : d;
        u = af < ad ? u + 1u : u - 1u;
    }
    return alloy_bitsf(u);
}

struct alloy_bits_tag {};
template <int K> struct alloy_fp16;
typedef alloy_fp16<0> half;
typedef alloy_fp16<1> bfloat;
typedef half float16_t;
typedef bfloat bfloat16_t;
template <int K> struct alloy_frank<alloy_fp16<K>> { static constexpr int value = 2; };

/* The type of `a op b` where one side is half/bfloat H and the other S:
 * integers -> H, float -> float, double -> double, the other 16-bit float ->
 * float. `alloy_calc` is the type the operation is computed in. */
template <class H, class S> struct alloy_mix {
    typedef typename alloy_cond<alloy_is_int<S>::value, H,
                                typename alloy_cond<alloy_frank<S>::value == 4, double, float>::type>::type
        type;
};
template <class T> struct alloy_calc { typedef T type; };
template <int K> struct alloy_calc<alloy_fp16<K>> { typedef float type; };

/* Scalars a half/bfloat operator takes on its other side: any scalar but
 * itself; half + bfloat is handled by half's operators only. */
template <class S, int K> struct alloy_fp16_other {
    static constexpr bool value = alloy_is_scalar<S>::value && !alloy_same<S, alloy_fp16<K>>::value &&
                                  !(K == 1 && alloy_frank<S>::value == 2);
};

#define ALLOY_FP16_ARITH(op)                                                                   \
    friend ALLOY_FN alloy_fp16 operator op(alloy_fp16 a, alloy_fp16 b) {                      \
        return alloy_fp16(float(a) op float(b));                                               \
    }                                                                                          \
    template <class S, alloy_if<alloy_fp16_other<S, K>::value> = 0> \
    friend ALLOY_FN typename alloy_mix<alloy_fp16, S>::type operator op(alloy_fp16 a, S b) {   \
        typedef typename alloy_mix<alloy_fp16, S>::type R;                                     \
        typedef typename alloy_calc<R>::type C;                                                \
        return R(C(float(a)) op C(b));                                                         \
    }                                                                                          \
    template <class S, alloy_if<alloy_fp16_other<S, K>::value> = 0> \
    friend ALLOY_FN typename alloy_mix<alloy_fp16, S>::type operator op(S a, alloy_fp16 b) {   \
        typedef typename alloy_mix<alloy_fp16, S>::type R;                                     \
        typedef typename alloy_calc<R>::type C;                                                \
        return R(C(a) op C(float(b)));                                                         \
    }                                                                                          \
    template <class S> ALLOY_FN alloy_fp16 &operator op##=(S b) {                              \
        *this = alloy_fp16(*this op b);                                                        \
        return *this;                                                                          \
    }

#define ALLOY_FP16_CMP(op)                                                                     \
    friend ALLOY_FN bool operator op(alloy_fp16 a, alloy_fp16 b) { return float(a) op float(b); } \
    template <class S, alloy_if<alloy_fp16_other<S, K>::value> = 0> \
    friend ALLOY_FN bool operator op(alloy_fp16 a, S b) {                                      \
        typedef typename alloy_calc<typename alloy_mix<alloy_fp16, S>::type>::type C;          \
        return C(float(a)) op C(b);                                                            \
    }                                                                                          \
    template <class S, alloy_if<alloy_fp16_other<S, K>::value> = 0> \
    friend ALLOY_FN bool operator op(S a, alloy_fp16 b) {                                      \
        typedef typename alloy_calc<typename alloy_mix<alloy_fp16, S>::type>::type C;          \
        return C(a) op C(float(b));                                                            \
    }

/* K = 0: half, K = 1: bfloat. Trivially default-constructible and copyable
 * (threadgroup arrays are static thread_local). */
template <int K> struct alloy_fp16 {
    ushort alloy_bits;

    alloy_fp16() = default;
    constexpr alloy_fp16(alloy_bits_tag, ushort b) : alloy_bits(b) {}
    ALLOY_FN alloy_fp16(float f) : alloy_bits(K == 0 ? ALLOY_F2H(f) : ALLOY_F2BF(f)) {}
    ALLOY_FN explicit alloy_fp16(double d) : alloy_fp16(alloy_d2f_odd(d)) {}
    template <class I, alloy_if<alloy_is_int<I>::value> = 0>
    ALLOY_FN explicit alloy_fp16(I i) : alloy_fp16(alloy_d2f_odd((double)i)) {}
    ALLOY_FN explicit alloy_fp16(alloy_fp16<1 - K> o) : alloy_fp16(float(o)) {}
    ALLOY_FN operator float() const { return K == 0 ? ALLOY_H2F(alloy_bits) : ALLOY_BF2F(alloy_bits); }
    static constexpr alloy_fp16 alloy_from_bits(ushort b) { return alloy_fp16(alloy_bits_tag(), b); }

    ALLOY_FP16_ARITH(+)
    ALLOY_FP16_ARITH(-)
    ALLOY_FP16_ARITH(*)
    ALLOY_FP16_ARITH(/)
    ALLOY_FP16_CMP(==)
    ALLOY_FP16_CMP(!=)
    ALLOY_FP16_CMP(<)
    ALLOY_FP16_CMP(<=)
    ALLOY_FP16_CMP(>)
    ALLOY_FP16_CMP(>=)

    friend ALLOY_FN alloy_fp16 operator-(alloy_fp16 a) {
        return alloy_fp16(alloy_bits_tag(), (ushort)(a.alloy_bits ^ 0x8000u));
    }
    friend ALLOY_FN alloy_fp16 operator+(alloy_fp16 a) { return a; }
    ALLOY_FN alloy_fp16 &operator++() { return *this = alloy_fp16(float(*this) + 1.0f); }
    ALLOY_FN alloy_fp16 &operator--() { return *this = alloy_fp16(float(*this) - 1.0f); }
    ALLOY_FN alloy_fp16 operator++(int) {
        alloy_fp16 t = *this;
        ++*this;
        return t;
    }
    ALLOY_FN alloy_fp16 operator--(int) {
        alloy_fp16 t = *this;
        --*this;
        return t;
    }
};
#undef ALLOY_FP16_ARITH
#undef ALLOY_FP16_CMP

/* ==== constants (MSL names) ============================================== */

#ifndef INFINITY
#ifdef ALLOY_PRELUDE_CUDA
#define INFINITY ALLOY_INFF
#else
#define INFINITY (__builtin_inff ()) /* as <math.h> spells it */
#endif
#endif
#ifndef NAN
#ifdef ALLOY_PRELUDE_CUDA
#define NAN ALLOY_NANF
#else
#define NAN (__builtin_nanf (""))
#endif
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#endif
#ifndef MAXFLOAT
#define MAXFLOAT 0x1.fffffep+127f
#endif
#ifndef FLT_MAX
#ifdef __FLT_MAX__ /* as <float.h> spells them */
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#else
#define FLT_MAX 0x1.fffffep+127f
#define FLT_MIN 0x1p-126f
#define FLT_EPSILON 0x1p-23f
#endif
#define FLT_DIG 6
#define FLT_MANT_DIG 24
#define FLT_MAX_EXP 128
#define FLT_MIN_EXP (-125)
#define FLT_MAX_10_EXP 38
#define FLT_MIN_10_EXP (-37)
#define FLT_RADIX 2
#endif
#ifndef DBL_MAX
#ifdef __DBL_MAX__
#define DBL_MAX __DBL_MAX__
#define DBL_MIN __DBL_MIN__
#define DBL_EPSILON __DBL_EPSILON__
#else
#define DBL_MAX 0x1.fffffffffffffp+1023
#define DBL_MIN 0x1p-1022
#define DBL_EPSILON 0x1p-52
#endif
#endif
#define HALF_MAX (half::alloy_from_bits(0x7bff))
#define HALF_MIN (half::alloy_from_bits(0x0400))
#define HALF_EPSILON (half::alloy_from_bits(0x1400))
#define HALF_DIG 3
#define HALF_MANT_DIG 11
#define HALF_MAX_EXP 16
#define HALF_MIN_EXP (-13)
#define HALF_MAX_10_EXP 4
#define HALF_MIN_10_EXP (-4)
#define HALF_RADIX 2
#define MAXHALF HALF_MAX
#ifndef CHAR_BIT
#define CHAR_BIT 8
#define SCHAR_MAX __SCHAR_MAX__
#define SCHAR_MIN (-SCHAR_MAX - 1)
#define UCHAR_MAX (SCHAR_MAX * 2 + 1)
#define CHAR_MAX SCHAR_MAX /* MSL char is signed */
#define CHAR_MIN SCHAR_MIN
#define SHRT_MAX __SHRT_MAX__
#define SHRT_MIN (-SHRT_MAX - 1)
#define USHRT_MAX (SHRT_MAX * 2 + 1)
#define INT_MAX __INT_MAX__
#define INT_MIN (-INT_MAX - 1)
#define UINT_MAX (INT_MAX * 2U + 1U)
#define LONG_MAX __LONG_MAX__
#define LONG_MIN (-LONG_MAX - 1L)
#define ULONG_MAX (LONG_MAX * 2UL + 1UL)
#endif
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f
#define M_E_H half(M_E_F)
#define M_LOG2E_H half(M_LOG2E_F)
#define M_LOG10E_H half(M_LOG10E_F)
#define M_LN2_H half(M_LN2_F)
#define M_LN10_H half(M_LN10_F)
#define M_PI_H half(M_PI_F)
#define M_PI_2_H half(M_PI_2_F)
#define M_PI_4_H half(M_PI_4_F)
#define M_1_PI_H half(M_1_PI_F)
#define M_2_PI_H half(M_2_PI_F)
#define M_2_SQRTPI_H half(M_2_SQRTPI_F)
#define M_SQRT2_H half(M_SQRT2_F)
#define M_SQRT1_2_H half(M_SQRT1_2_F)

/* ==== vectors ============================================================ */
/* alloy_vec<T, N>: Metal layout (N = 2 aligned to 2*sizeof(T); N = 3, 4 sized
 * and aligned to 4*sizeof(T)). alloy_packed_vec<T, N>: no padding, alignment
 * of T. Components x y z w / r g b a alias alloy_e[] through an anonymous
 * union. The dialect rewrites `v.xy` to `v.template alloy_swz<0,1>()` (a
 * value) and, on the left of an assignment, to `alloy_swz_ref<0,1>()` (a
 * proxy writing the named components). */

template <class T, int N> struct alloy_vec;
template <class T, int N> struct alloy_packed_vec;

template <class T, int N, bool Packed> struct alloy_vec_store;
#define ALLOY_VEC_STORE(n, packed, align, ...)                                                 \
    template <class T> struct align alloy_vec_store<T, n, packed> {                           \
        union {                                                                                \
            T alloy_e[n];                                                                      \
            struct { T __VA_ARGS__; };                                                         \
            struct { T ALLOY_RGBA##n; };                                                       \
        };                                                                                     \
    };
#define ALLOY_RGBA2 r, g
#define ALLOY_RGBA3 r, g, b
#define ALLOY_RGBA4 r, g, b, a
ALLOY_VEC_STORE(2, false, alignas(2 * sizeof(T)), x, y)
ALLOY_VEC_STORE(3, false, alignas(4 * sizeof(T)), x, y, z)
ALLOY_VEC_STORE(4, false, alignas(4 * sizeof(T)), x, y, z, w)
ALLOY_VEC_STORE(2, true, , x, y)
ALLOY_VEC_STORE(3, true, , x, y, z)
ALLOY_VEC_STORE(4, true, , x, y, z, w)
#undef ALLOY_VEC_STORE
#undef ALLOY_RGBA2
#undef ALLOY_RGBA3
#undef ALLOY_RGBA4

/* Components an argument contributes to a vector constructor (0: none). */
template <class T> struct alloy_ncomp { static constexpr int value = alloy_is_scalar<T>::value ? 1 : 0; };
template <class T, int N> struct alloy_ncomp<alloy_vec<T, N>> { static constexpr int value = N; };
template <class T, int N> struct alloy_ncomp<alloy_packed_vec<T, N>> { static constexpr int value = N; };
template <class... A> struct alloy_ncomp_sum { static constexpr int value = 0; };
template <class A, class... R> struct alloy_ncomp_sum<A, R...> {
    static constexpr int value =
        alloy_ncomp<A>::value == 0 ? -1000 : alloy_ncomp<A>::value + alloy_ncomp_sum<R...>::value;
};

/* What a swizzle read returns: T for one component, else a vector. */
template <class T, int M> struct alloy_swz_type { typedef alloy_vec<T, M> type; };
template <class T> struct alloy_swz_type<T, 1> { typedef T type; };

template <int... I> struct alloy_distinct { static constexpr bool value = true; };
template <int A, int... R> struct alloy_distinct<A, R...> {
    static constexpr bool value = ((A != R) && ... && true) && alloy_distinct<R...>::value;
};

template <class T, int N, int... I> struct alloy_swz_proxy;

/* Shared by alloy_vec and alloy_packed_vec: element access, fill, swizzles. */
#define ALLOY_VEC_COMMON(Self)                                                                 \
    ALLOY_FN T &operator[](int i) { return this->alloy_e[i]; }                                 \
    ALLOY_FN const T &operator[](int i) const { return this->alloy_e[i]; }                     \
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>                                \
    ALLOY_FN void alloy_put(int &k, const S &s) { this->alloy_e[k++] = T(s); }                 \
    template <class U, int M> ALLOY_FN void alloy_put(int &k, const alloy_vec<U, M> &v) {      \
        for (int j = 0; j < M; j++) this->alloy_e[k++] = T(v.alloy_e[j]);                      \
    }                                                                                          \
    template <class U, int M> ALLOY_FN void alloy_put(int &k, const alloy_packed_vec<U, M> &v) { \
        for (int j = 0; j < M; j++) this->alloy_e[k++] = T(v.alloy_e[j]);                      \
    }                                                                                          \
    template <int... I> ALLOY_FN typename alloy_swz_type<T, sizeof...(I)>::type alloy_swz() const { \
        static_assert(((I >= 0 && I < N) && ...), "swizzle component out of range");          \
        const int idx[] = {I...};                                                              \
        typename alloy_swz_type<T, sizeof...(I)>::type r;                                      \
        for (int k = 0; k < (int)sizeof...(I); k++) alloy_swz_set(r, k, this->alloy_e[idx[k]]); \
        return r;                                                                              \
    }                                                                                          \
    template <int I0> ALLOY_FN T &alloy_swz_ref() {                                            \
        static_assert(I0 >= 0 && I0 < N, "swizzle component out of range");                    \
        return this->alloy_e[I0];                                                              \
    }                                                                                          \
    template <int I0, int I1, int... I> ALLOY_FN alloy_swz_proxy<T, N, I0, I1, I...> alloy_swz_ref() { \
        return alloy_swz_proxy<T, N, I0, I1, I...>(this->alloy_e);                             \
    }

template <class T> ALLOY_FN void alloy_swz_set(T &r, int, const T &v) { r = v; }
template <class T, int M> ALLOY_FN void alloy_swz_set(alloy_vec<T, M> &r, int k, const T &v) {
    r.alloy_e[k] = v;
}

#define ALLOY_VEC_ARITH(op)                                                                    \
    friend ALLOY_FN alloy_vec operator op(const alloy_vec &a, const alloy_vec &b) {            \
        alloy_vec r;                                                                           \
        for (int i = 0; i < N; i++) r.alloy_e[i] = T(a.alloy_e[i] op b.alloy_e[i]);            \
        return r;                                                                              \
    }                                                                                          \
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>                                \
    friend ALLOY_FN alloy_vec operator op(const alloy_vec &a, S s) {                           \
        alloy_vec r;                                                                           \
        T t = T(s);                                                                            \
        for (int i = 0; i < N; i++) r.alloy_e[i] = T(a.alloy_e[i] op t);                       \
        return r;                                                                              \
    }                                                                                          \
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>                                \
    friend ALLOY_FN alloy_vec operator op(S s, const alloy_vec &a) {                           \
        alloy_vec r;                                                                           \
        T t = T(s);                                                                            \
        for (int i = 0; i < N; i++) r.alloy_e[i] = T(t op a.alloy_e[i]);                       \
        return r;                                                                              \
    }                                                                                          \
    template <class X> ALLOY_FN alloy_vec &operator op##=(const X &o) { return *this = *this op o; }

#define ALLOY_VEC_CMP(op)                                                                      \
    friend ALLOY_FN alloy_vec<bool, N> operator op(const alloy_vec &a, const alloy_vec &b) {   \
        alloy_vec<bool, N> r;                                                                  \
        for (int i = 0; i < N; i++) r.alloy_e[i] = a.alloy_e[i] op b.alloy_e[i];               \
        return r;                                                                              \
    }                                                                                          \
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>                                \
    friend ALLOY_FN alloy_vec<bool, N> operator op(const alloy_vec &a, S s) {                  \
        return a op alloy_vec(s);                                                              \
    }                                                                                          \
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>                                \
    friend ALLOY_FN alloy_vec<bool, N> operator op(S s, const alloy_vec &a) {                  \
        return alloy_vec(s) op a;                                                              \
    }

template <class T, int N> struct alloy_vec : alloy_vec_store<T, N, false> {
    static_assert(N >= 2 && N <= 4, "vectors have 2, 3 or 4 components");
    typedef T value_type;

    alloy_vec() = default;
    /* splat, implicit as in MSL (`float4 v = 0.0f;`, `v * 2`) */
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0> ALLOY_FN alloy_vec(S s) {
        T t = T(s);
        for (int i = 0; i < N; i++) this->alloy_e[i] = t;
    }
    /* element type conversion: float4(int4) */
    template <class U> ALLOY_FN explicit alloy_vec(const alloy_vec<U, N> &o) {
        for (int i = 0; i < N; i++) this->alloy_e[i] = T(o.alloy_e[i]);
    }
    /* components and mixed: float4(x, y, z, w), float4(float2, float, float), ... */
    template <class A, class B, class... R, alloy_if<alloy_ncomp_sum<A, B, R...>::value == N> = 0>
    ALLOY_FN alloy_vec(const A &a, const B &b, const R &...r) {
        int k = 0;
        alloy_put(k, a);
        alloy_put(k, b);
        (alloy_put(k, r), ...);
    }
    ALLOY_VEC_COMMON(alloy_vec)

    ALLOY_VEC_ARITH(+)
    ALLOY_VEC_ARITH(-)
    ALLOY_VEC_ARITH(*)
    ALLOY_VEC_ARITH(/)
    ALLOY_VEC_ARITH(%)
    ALLOY_VEC_ARITH(&)
    ALLOY_VEC_ARITH(|)
    ALLOY_VEC_ARITH(^)
    ALLOY_VEC_ARITH(<<)
    ALLOY_VEC_ARITH(>>)
    ALLOY_VEC_CMP(==)
    ALLOY_VEC_CMP(!=)
    ALLOY_VEC_CMP(<)
    ALLOY_VEC_CMP(<=)
    ALLOY_VEC_CMP(>)
    ALLOY_VEC_CMP(>=)
    ALLOY_VEC_CMP(&&)
    ALLOY_VEC_CMP(||)

    friend ALLOY_FN alloy_vec operator+(const alloy_vec &a) { return a; }
    friend ALLOY_FN alloy_vec operator-(const alloy_vec &a) {
        alloy_vec r;
        for (int i = 0; i < N; i++) r.alloy_e[i] = T(-a.alloy_e[i]);
        return r;
    }
    friend ALLOY_FN alloy_vec operator~(const alloy_vec &a) {
        alloy_vec r;
        for (int i = 0; i < N; i++) r.alloy_e[i] = T(~a.alloy_e[i]);
        return r;
    }
    friend ALLOY_FN alloy_vec<bool, N> operator!(const alloy_vec &a) {
        alloy_vec<bool, N> r;
        for (int i = 0; i < N; i++) r.alloy_e[i] = !a.alloy_e[i];
        return r;
    }
    ALLOY_FN alloy_vec &operator++() { return *this = *this + T(1); }
    ALLOY_FN alloy_vec &operator--() { return *this = *this - T(1); }
    ALLOY_FN alloy_vec operator++(int) {
        alloy_vec t = *this;
        *this = *this + T(1);
        return t;
    }
    ALLOY_FN alloy_vec operator--(int) {
        alloy_vec t = *this;
        *this = *this - T(1);
        return t;
    }
};
#undef ALLOY_VEC_ARITH
#undef ALLOY_VEC_CMP

/* Packed vectors: storage types that convert to and from alloy_vec; the
 * arithmetic operators work on them and return alloy_vec. */
#define ALLOY_PACKED_ARITH(op)                                                                 \
    friend ALLOY_FN V operator op(const alloy_packed_vec &a, const alloy_packed_vec &b) { return V(a) op V(b); } \
    friend ALLOY_FN V operator op(const alloy_packed_vec &a, const V &b) { return V(a) op b; } \
    friend ALLOY_FN V operator op(const V &a, const alloy_packed_vec &b) { return a op V(b); } \
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>                                \
    friend ALLOY_FN V operator op(const alloy_packed_vec &a, S s) { return V(a) op s; }        \
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>                                \
    friend ALLOY_FN V operator op(S s, const alloy_packed_vec &a) { return s op V(a); }        \
    template <class X> ALLOY_FN alloy_packed_vec &operator op##=(const X &o) {                 \
        return *this = alloy_packed_vec(V(*this) op o);                                        \
    }

template <class T, int N> struct alloy_packed_vec : alloy_vec_store<T, N, true> {
    typedef alloy_vec<T, N> V;
    typedef T value_type;

    alloy_packed_vec() = default;
    ALLOY_FN alloy_packed_vec(const V &v) {
        for (int i = 0; i < N; i++) this->alloy_e[i] = v.alloy_e[i];
    }
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0> ALLOY_FN alloy_packed_vec(S s) {
        T t = T(s);
        for (int i = 0; i < N; i++) this->alloy_e[i] = t;
    }
    template <class A, class B, class... R, alloy_if<alloy_ncomp_sum<A, B, R...>::value == N> = 0>
    ALLOY_FN alloy_packed_vec(const A &a, const B &b, const R &...r) {
        int k = 0;
        alloy_put(k, a);
        alloy_put(k, b);
        (alloy_put(k, r), ...);
    }
    ALLOY_FN operator V() const {
        V v;
        for (int i = 0; i < N; i++) v.alloy_e[i] = this->alloy_e[i];
        return v;
    }
    ALLOY_VEC_COMMON(alloy_packed_vec)
    ALLOY_PACKED_ARITH(+)
    ALLOY_PACKED_ARITH(-)
    ALLOY_PACKED_ARITH(*)
    ALLOY_PACKED_ARITH(/)
    friend ALLOY_FN V operator-(const alloy_packed_vec &a) { return -V(a); }
};
#undef ALLOY_PACKED_ARITH
#undef ALLOY_VEC_COMMON

/* Write proxy for `v.xy = ...`, `v.zx += ...` (distinct components). */
template <class T, int N, int... I> struct alloy_swz_proxy {
    static_assert(alloy_distinct<I...>::value, "a swizzle that is written must name distinct components");
    static_assert(((I >= 0 && I < N) && ...), "swizzle component out of range");
    static constexpr int M = sizeof...(I);
    typedef alloy_vec<T, M> V;
    T *alloy_p;

    ALLOY_FN explicit alloy_swz_proxy(T *p) : alloy_p(p) {}
    ALLOY_FN operator V() const {
        const int idx[] = {I...};
        V r;
        for (int k = 0; k < M; k++) r.alloy_e[k] = alloy_p[idx[k]];
        return r;
    }
    ALLOY_FN alloy_swz_proxy &operator=(const V &v) {
        const int idx[] = {I...};
        for (int k = 0; k < M; k++) alloy_p[idx[k]] = v.alloy_e[k];
        return *this;
    }
    ALLOY_FN alloy_swz_proxy &operator=(const alloy_swz_proxy &o) { return *this = V(o); }
    template <class S, alloy_if<alloy_is_scalar<S>::value> = 0>
    ALLOY_FN alloy_swz_proxy &operator=(S s) { return *this = V(s); }
    template <class X> ALLOY_FN alloy_swz_proxy &operator+=(const X &o) { return *this = V(*this) + o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator-=(const X &o) { return *this = V(*this) - o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator*=(const X &o) { return *this = V(*this) * o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator/=(const X &o) { return *this = V(*this) / o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator%=(const X &o) { return *this = V(*this) % o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator&=(const X &o) { return *this = V(*this) & o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator|=(const X &o) { return *this = V(*this) | o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator^=(const X &o) { return *this = V(*this) ^ o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator<<=(const X &o) { return *this = V(*this) << o; }
    template <class X> ALLOY_FN alloy_swz_proxy &operator>>=(const X &o) { return *this = V(*this) >> o; }
};

/* NVRTC predeclares CUDA's own vector structs (float4, int2, ...); under
 * CUDA the MSL names are macros for alloy_ names so both can coexist. */
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define char2 alloy_char2
#define char3 alloy_char3
#define char4 alloy_char4
#define uchar2 alloy_uchar2
#define uchar3 alloy_uchar3
#define uchar4 alloy_uchar4
#define short2 alloy_short2
#define short3 alloy_short3
#define short4 alloy_short4
#define ushort2 alloy_ushort2
#define ushort3 alloy_ushort3
#define ushort4 alloy_ushort4
#define int2 alloy_int2
#define int3 alloy_int3
#define int4 alloy_int4
#define uint2 alloy_uint2
#define uint3 alloy_uint3
#define uint4 alloy_uint4
#define long2 alloy_long2
#define long3 alloy_long3
#define long4 alloy_long4
#define ulong2 alloy_ulong2
#define ulong3 alloy_ulong3
#define ulong4 alloy_ulong4
#define float2 alloy_float2
#define float3 alloy_float3
#define float4 alloy_float4
#define double2 alloy_double2
#define double3 alloy_double3
#define double4 alloy_double4
#endif

#define ALLOY_VEC_TYPEDEFS(name, T)                                                            \
    typedef alloy_vec<T, 2> name##2;                                                           \
    typedef alloy_vec<T, 3> name##3;                                                           \
    typedef alloy_vec<T, 4> name##4;                                                           \
    typedef alloy_packed_vec<T, 2> packed_##name##2;                                           \
    typedef alloy_packed_vec<T, 3> packed_##name##3;                                           \
    typedef alloy_packed_vec<T, 4> packed_##name##4;
ALLOY_VEC_TYPEDEFS(bool, bool)
ALLOY_VEC_TYPEDEFS(char, signed char) /* MSL char is signed */
ALLOY_VEC_TYPEDEFS(uchar, uchar)
ALLOY_VEC_TYPEDEFS(short, short)
ALLOY_VEC_TYPEDEFS(ushort, ushort)
ALLOY_VEC_TYPEDEFS(int, int)
ALLOY_VEC_TYPEDEFS(uint, uint)
ALLOY_VEC_TYPEDEFS(long, long)
ALLOY_VEC_TYPEDEFS(ulong, ulong)
ALLOY_VEC_TYPEDEFS(half, half)
ALLOY_VEC_TYPEDEFS(bfloat, bfloat)
ALLOY_VEC_TYPEDEFS(float, float)
ALLOY_VEC_TYPEDEFS(double, double)
#undef ALLOY_VEC_TYPEDEFS

/* ==== namespace metal: functions ========================================= */

namespace metal {

template <class T, int N> using vec = alloy_vec<T, N>;

/* <metal_type_traits>: the common ones (MSL follows <type_traits>). */
template <class T, T V> struct integral_constant {
    static constexpr T value = V;
    typedef T value_type;
    constexpr operator T() const { return V; }
};
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> constexpr bool is_same_v = is_same<A, B>::value;
template <bool C, class X, class Y> struct conditional { typedef X type; };
template <class X, class Y> struct conditional<false, X, Y> { typedef Y type; };
template <bool C, class X, class Y> using conditional_t = typename conditional<C, X, Y>::type;
template <bool C, class T = void> using enable_if = alloy_enable_if<C, T>;
template <bool C, class T = void> using enable_if_t = typename alloy_enable_if<C, T>::type;
template <class T> struct remove_const { typedef T type; };
template <class T> struct remove_const<const T> { typedef T type; };
template <class T> struct remove_volatile { typedef T type; };
template <class T> struct remove_volatile<volatile T> { typedef T type; };
template <class T> struct remove_cv { typedef typename remove_const<typename remove_volatile<T>::type>::type type; };
template <class T> struct remove_reference { typedef T type; };
template <class T> struct remove_reference<T &> { typedef T type; };
template <class T> struct remove_reference<T &&> { typedef T type; };
template <class T> using remove_const_t = typename remove_const<T>::type;
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> using remove_reference_t = typename remove_reference<T>::type;
template <class T> struct is_floating_point : integral_constant<bool, (alloy_frank<remove_cv_t<T>>::value > 1)> {};
template <class T> constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T> struct is_integral : integral_constant<bool, alloy_is_int<remove_cv_t<T>>::value> {};
template <class T> constexpr bool is_integral_v = is_integral<T>::value;
template <class T> struct is_signed
    : integral_constant<bool, is_floating_point_v<T> || (is_integral_v<T> && alloy_is_signed<remove_cv_t<T>>::value)> {};
template <class T> constexpr bool is_signed_v = is_signed<T>::value;

/* Result type of a function of two scalars: the wider floating type, an
 * integer with half/bfloat gives half/bfloat, two different 16-bit floats
 * give float, two integers the usual arithmetic conversion. */
template <class A, class B, bool Ints = (alloy_frank<A>::value == 0 && alloy_frank<B>::value == 0)>
struct alloy_common {
    typedef decltype(A() + B()) type;
};
template <class A, class B> struct alloy_common<A, B, false> {
    static constexpr int ra = alloy_frank<A>::value, rb = alloy_frank<B>::value;
    typedef typename alloy_cond<
        (ra > rb), A,
        typename alloy_cond<(rb > ra), B, typename alloy_cond<alloy_same<A, B>::value, A, float>::type>::type>::type
        type;
};
template <class A, class B> using alloy_common_t = typename alloy_common<A, B>::type;
#define ALLOY_SCALARS2(A, B) alloy_if<alloy_is_scalar<A>::value && alloy_is_scalar<B>::value> = 0
#define ALLOY_SCALARS3(A, B, C)                                                                \
    alloy_if<alloy_is_scalar<A>::value && alloy_is_scalar<B>::value && alloy_is_scalar<C>::value> = 0

/* Template parameter constraining F to exactly T. */
#define ALLOY_IS(F, T) alloy_if<alloy_same<F, T>::value> = 0

/* Applies a scalar function componentwise. */
#define ALLOY_MAP1(name)                                                                       \
    template <class T, int N> ALLOY_FN alloy_vec<T, N> name(const alloy_vec<T, N> &v) {       \
        alloy_vec<T, N> r;                                                                     \
        for (int i = 0; i < N; i++) r.alloy_e[i] = name(v.alloy_e[i]);                         \
        return r;                                                                              \
    }
#define ALLOY_MAP2(name)                                                                       \
    template <class T, int N>                                                                  \
    ALLOY_FN alloy_vec<T, N> name(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b) {        \
        alloy_vec<T, N> r;                                                                     \
        for (int i = 0; i < N; i++) r.alloy_e[i] = name(a.alloy_e[i], b.alloy_e[i]);           \
        return r;                                                                              \
    }                                                                                          \
    template <class T, int N> ALLOY_FN alloy_vec<T, N> name(const alloy_vec<T, N> &a, alloy_id_t<T> b) { \
        return name(a, alloy_vec<T, N>(b));                                                    \
    }                                                                                          \
    template <class T, int N> ALLOY_FN alloy_vec<T, N> name(alloy_id_t<T> a, const alloy_vec<T, N> &b) { \
        return name(alloy_vec<T, N>(a), b);                                                    \
    }
#define ALLOY_MAP3(name)                                                                       \
    template <class T, int N>                                                                  \
    ALLOY_FN alloy_vec<T, N> name(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b,          \
                                  const alloy_vec<T, N> &c) {                                  \
        alloy_vec<T, N> r;                                                                     \
        for (int i = 0; i < N; i++) r.alloy_e[i] = name(a.alloy_e[i], b.alloy_e[i], c.alloy_e[i]); \
        return r;                                                                              \
    }

/* One-argument libm function for float, double, half, bfloat, integers
 * (computed in float) and vectors; HOOK is ALLOY_LIBM or ALLOY_LIBM_FAST. */
#define ALLOY_MATH1(name, cf, HOOK) ALLOY_MATH1_WITH(name, HOOK(cf##f), HOOK(cf))
/* The same with the float and double functions given (FF, DF). */
#define ALLOY_MATH1_WITH(name, FF, DF)                                                         \
    template <class F, ALLOY_IS(F, float)> ALLOY_FN float name(F x) { return FF(x); }          \
    template <class F, ALLOY_IS(F, double)> ALLOY_FN double name(F x) { return DF(x); }        \
    ALLOY_FN half name(half x) { return half(FF(float(x))); }                                  \
    ALLOY_FN bfloat name(bfloat x) { return bfloat(FF(float(x))); }                            \
    template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN float name(I x) {        \
        return FF(float(x));                                                                   \
    }                                                                                          \
    ALLOY_MAP1(name)
#define ALLOY_MATH2(name, cf, HOOK)                                                            \
    ALLOY_FN float alloy_##name##_impl(float x, float y) { return HOOK(cf##f)(x, y); }         \
    ALLOY_FN double alloy_##name##_impl(double x, double y) { return HOOK(cf)(x, y); }         \
    template <int K> ALLOY_FN alloy_fp16<K> alloy_##name##_impl(alloy_fp16<K> x, alloy_fp16<K> y) { \
        return alloy_fp16<K>(HOOK(cf##f)(float(x), float(y)));                                 \
    }                                                                                          \
    template <class A, class B, ALLOY_SCALARS2(A, B)>                                          \
    ALLOY_FN typename alloy_cond<alloy_frank<alloy_common_t<A, B>>::value == 0, float,         \
                                 alloy_common_t<A, B>>::type                                   \
    name(A x, B y) {                                                                           \
        typedef typename alloy_cond<alloy_frank<alloy_common_t<A, B>>::value == 0, float,      \
                                    alloy_common_t<A, B>>::type C;                             \
        return alloy_##name##_impl(C(x), C(y));                                                \
    }                                                                                          \
    ALLOY_MAP2(name)

/* float x / y, IEEE (the default of ALLOY_FDIVF) */
ALLOY_FN float alloy_fdiv_ieee(float x, float y) { return x / y; }

/* The elementary functions, defined once per namespace (metal, fast,
 * precise) with that namespace's libm hook. */
#define ALLOY_ELEMENTARY(HOOK)                                                                 \
    ALLOY_MATH1(sin, sin, HOOK)                                                                \
    ALLOY_MATH1(cos, cos, HOOK)                                                                \
    ALLOY_MATH1(tan, tan, HOOK)                                                                \
    ALLOY_MATH1(asin, asin, HOOK)                                                              \
    ALLOY_MATH1(acos, acos, HOOK)                                                              \
    ALLOY_MATH1(atan, atan, HOOK)                                                              \
    ALLOY_MATH1(sinh, sinh, HOOK)                                                              \
    ALLOY_MATH1(cosh, cosh, HOOK)                                                              \
    ALLOY_MATH1_WITH(tanh, ALLOY_TANHF(HOOK), HOOK(tanh))                                      \
    ALLOY_MATH1(asinh, asinh, HOOK)                                                            \
    ALLOY_MATH1(acosh, acosh, HOOK)                                                            \
    ALLOY_MATH1(atanh, atanh, HOOK)                                                            \
    ALLOY_MATH1_WITH(exp, ALLOY_EXPF(HOOK), HOOK(exp))                                         \
    ALLOY_MATH1(exp2, exp2, HOOK)                                                              \
    ALLOY_MATH1(log, log, HOOK)                                                                \
    ALLOY_MATH1(log2, log2, HOOK)                                                              \
    ALLOY_MATH1(log10, log10, HOOK)                                                            \
    ALLOY_MATH1(log1p, log1p, HOOK)                                                            \
    ALLOY_MATH1(sqrt, sqrt, HOOK)                                                              \
    ALLOY_MATH1(cbrt, cbrt, HOOK)                                                              \
    ALLOY_MATH2(atan2, atan2, HOOK)                                                            \
    ALLOY_MATH2(pow, pow, HOOK)                                                                \
    ALLOY_MATH2(powr, pow, HOOK)                                                               \
    template <class F, ALLOY_IS(F, float)> ALLOY_FN float exp10(F x) { return HOOK(powf)(10.0f, x); } \
    template <class F, ALLOY_IS(F, double)> ALLOY_FN double exp10(F x) { return HOOK(pow)(10.0, x); } \
    template <int K> ALLOY_FN alloy_fp16<K> exp10(alloy_fp16<K> x) {                           \
        return alloy_fp16<K>(HOOK(powf)(10.0f, float(x)));                                     \
    }                                                                                          \
    template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN float exp10(I x) {       \
        return exp10(float(x));                                                                \
    }                                                                                          \
    ALLOY_MAP1(exp10)                                                                          \
    template <class F, ALLOY_IS(F, float)> ALLOY_FN float rsqrt(F x) { return 1.0f / HOOK(sqrtf)(x); } \
    template <class F, ALLOY_IS(F, double)> ALLOY_FN double rsqrt(F x) { return 1.0 / HOOK(sqrt)(x); } \
    template <int K> ALLOY_FN alloy_fp16<K> rsqrt(alloy_fp16<K> x) {                           \
        return alloy_fp16<K>(1.0f / HOOK(sqrtf)(float(x)));                                    \
    }                                                                                          \
    template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN float rsqrt(I x) {       \
        return rsqrt(float(x));                                                                \
    }                                                                                          \
    ALLOY_MAP1(rsqrt)                                                                          \
    template <class A, class B, ALLOY_SCALARS2(A, B)> ALLOY_FN alloy_common_t<A, B> divide(A x, B y) { \
        return alloy_common_t<A, B>(x) / alloy_common_t<A, B>(y);                              \
    }                                                                                          \
    /* float: the namespace's division (fast:: on CUDA: __fdividef, Metal's fast bound) */    \
    ALLOY_FN float divide(float x, float y) { return ALLOY_FDIVF(HOOK)(x, y); }                \
    template <class T, int N> ALLOY_FN alloy_vec<T, N> divide(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b) { \
        return a / b;                                                                          \
    }                                                                                          \
    template <class T> ALLOY_FN T sincos(T x, T &c) {                                          \
        c = cos(x);                                                                            \
        return sin(x);                                                                         \
    }

ALLOY_ELEMENTARY(ALLOY_LIBM)

/* ---- rounding, classification, min/max and friends -------------------- */

ALLOY_MATH1(floor, floor, ALLOY_LIBM)
ALLOY_MATH1(ceil, ceil, ALLOY_LIBM)
ALLOY_MATH1(round, round, ALLOY_LIBM)
ALLOY_MATH1(rint, rint, ALLOY_LIBM)
ALLOY_MATH1(trunc, trunc, ALLOY_LIBM)
ALLOY_MATH1(fabs, fabs, ALLOY_LIBM)
ALLOY_MATH2(fmod, fmod, ALLOY_LIBM)
ALLOY_MATH2(copysign, copysign, ALLOY_LIBM)

/* abs: |x| for floating types, integers keep their type */
template <class F, ALLOY_IS(F, float)> ALLOY_FN float abs(F x) { return ALLOY_LIBM(fabsf)(x); }
template <class F, ALLOY_IS(F, double)> ALLOY_FN double abs(F x) { return ALLOY_LIBM(fabs)(x); }
template <int K> ALLOY_FN alloy_fp16<K> abs(alloy_fp16<K> x) {
    return alloy_fp16<K>(alloy_bits_tag(), (ushort)(x.alloy_bits & 0x7fffu));
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I abs(I x) {
    return alloy_is_signed<I>::value && x < I(0) ? I(-x) : x;
}
ALLOY_MAP1(abs)

/* min/max follow fmin/fmax for floats: a NaN argument yields the other one */
ALLOY_FN float alloy_max_impl(float x, float y) { return ALLOY_LIBM(fmaxf)(x, y); }
ALLOY_FN double alloy_max_impl(double x, double y) { return ALLOY_LIBM(fmax)(x, y); }
ALLOY_FN float alloy_min_impl(float x, float y) { return ALLOY_LIBM(fminf)(x, y); }
ALLOY_FN double alloy_min_impl(double x, double y) { return ALLOY_LIBM(fmin)(x, y); }
template <int K> ALLOY_FN alloy_fp16<K> alloy_max_impl(alloy_fp16<K> x, alloy_fp16<K> y) {
    return alloy_fp16<K>(alloy_max_impl(float(x), float(y)));
}
template <int K> ALLOY_FN alloy_fp16<K> alloy_min_impl(alloy_fp16<K> x, alloy_fp16<K> y) {
    return alloy_fp16<K>(alloy_min_impl(float(x), float(y)));
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I alloy_max_impl(I x, I y) {
    return x < y ? y : x;
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I alloy_min_impl(I x, I y) {
    return y < x ? y : x;
}
#define ALLOY_MINMAX(name, impl)                                                               \
    template <class A, class B, ALLOY_SCALARS2(A, B)> ALLOY_FN alloy_common_t<A, B> name(A x, B y) { \
        return impl(alloy_common_t<A, B>(x), alloy_common_t<A, B>(y));                         \
    }                                                                                          \
    ALLOY_MAP2(name)
ALLOY_MINMAX(max, alloy_max_impl)
ALLOY_MINMAX(min, alloy_min_impl)
ALLOY_MINMAX(fmax, alloy_max_impl)
ALLOY_MINMAX(fmin, alloy_min_impl)
#undef ALLOY_MINMAX
template <class A, class B, class C, ALLOY_SCALARS3(A, B, C)>
ALLOY_FN float fmax3(A x, B y, C z) { return fmax(fmax(float(x), float(y)), float(z)); }
template <class A, class B, class C, ALLOY_SCALARS3(A, B, C)>
ALLOY_FN float fmin3(A x, B y, C z) { return fmin(fmin(float(x), float(y)), float(z)); }

template <class A, class B, class C, ALLOY_SCALARS3(A, B, C)>
ALLOY_FN alloy_common_t<A, alloy_common_t<B, C>> clamp(A x, B lo, C hi) {
    typedef alloy_common_t<A, alloy_common_t<B, C>> T;
    return min(max(T(x), T(lo)), T(hi));
}
ALLOY_MAP3(clamp)
template <class T, int N>
ALLOY_FN alloy_vec<T, N> clamp(const alloy_vec<T, N> &x, alloy_id_t<T> lo, alloy_id_t<T> hi) {
    return clamp(x, alloy_vec<T, N>(lo), alloy_vec<T, N>(hi));
}

template <class T, alloy_if<alloy_is_scalar<T>::value> = 0> ALLOY_FN T saturate(T x) {
    return clamp(x, T(0), T(1));
}
ALLOY_MAP1(saturate)

ALLOY_FN float alloy_fma_impl(float a, float b, float c) { return ALLOY_LIBM(fmaf)(a, b, c); }
ALLOY_FN double alloy_fma_impl(double a, double b, double c) { return ALLOY_LIBM(fma)(a, b, c); }
template <int K> ALLOY_FN alloy_fp16<K> alloy_fma_impl(alloy_fp16<K> a, alloy_fp16<K> b, alloy_fp16<K> c) {
    return alloy_fp16<K>(ALLOY_LIBM(fmaf)(float(a), float(b), float(c)));
}
template <class A, class B, class C, ALLOY_SCALARS3(A, B, C)>
ALLOY_FN typename alloy_cond<alloy_frank<alloy_common_t<A, alloy_common_t<B, C>>>::value == 0, float,
                             alloy_common_t<A, alloy_common_t<B, C>>>::type
fma(A a, B b, C c) {
    typedef typename alloy_cond<alloy_frank<alloy_common_t<A, alloy_common_t<B, C>>>::value == 0, float,
                                alloy_common_t<A, alloy_common_t<B, C>>>::type T;
    return alloy_fma_impl(T(a), T(b), T(c));
}
ALLOY_MAP3(fma)
template <class A, class B, class C, ALLOY_SCALARS3(A, B, C)>
ALLOY_FN auto mad(A a, B b, C c) -> decltype(fma(a, b, c)) {
    return fma(a, b, c);
}
ALLOY_MAP3(mad)

/* mix(x, y, a) = x + (y - x) * a */
template <class A, class B, class C, ALLOY_SCALARS3(A, B, C)>
ALLOY_FN alloy_common_t<A, alloy_common_t<B, C>> mix(A x, B y, C a) {
    typedef alloy_common_t<A, alloy_common_t<B, C>> T;
    return T(T(x) + (T(y) - T(x)) * T(a));
}
ALLOY_MAP3(mix)
template <class T, int N>
ALLOY_FN alloy_vec<T, N> mix(const alloy_vec<T, N> &x, const alloy_vec<T, N> &y, alloy_id_t<T> a) {
    return mix(x, y, alloy_vec<T, N>(a));
}

/* step(edge, x): 0 if x < edge, else 1 */
template <class A, class B, ALLOY_SCALARS2(A, B)> ALLOY_FN alloy_common_t<A, B> step(A edge, B x) {
    typedef alloy_common_t<A, B> T;
    return T(x) < T(edge) ? T(0) : T(1);
}
ALLOY_MAP2(step)

template <class A, class B, class C, ALLOY_SCALARS3(A, B, C)>
ALLOY_FN alloy_common_t<A, alloy_common_t<B, C>> smoothstep(A e0, B e1, C x) {
    typedef alloy_common_t<A, alloy_common_t<B, C>> T;
    typedef typename alloy_calc<T>::type F;
    F t = clamp((F(x) - F(e0)) / (F(e1) - F(e0)), F(0), F(1));
    return T(t * t * (F(3) - F(2) * t));
}
ALLOY_MAP3(smoothstep)
template <class T, int N>
ALLOY_FN alloy_vec<T, N> smoothstep(alloy_id_t<T> e0, alloy_id_t<T> e1, const alloy_vec<T, N> &x) {
    return smoothstep(alloy_vec<T, N>(e0), alloy_vec<T, N>(e1), x);
}

/* select(a, b, c): c ? b : a (componentwise for vectors) */
template <class T, alloy_if<alloy_is_scalar<T>::value> = 0> ALLOY_FN T select(T a, T b, bool c) {
    return c ? b : a;
}
template <class T, int N>
ALLOY_FN alloy_vec<T, N> select(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b, const alloy_vec<bool, N> &c) {
    alloy_vec<T, N> r;
    for (int i = 0; i < N; i++) r.alloy_e[i] = c.alloy_e[i] ? b.alloy_e[i] : a.alloy_e[i];
    return r;
}
template <class T, int N>
ALLOY_FN alloy_vec<T, N> select(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b, bool c) {
    return c ? b : a;
}

/* classification by bits (independent of -ffast-math) */
template <class F, ALLOY_IS(F, float)> ALLOY_FN bool isnan(F x) { return (alloy_fbits(x) & 0x7fffffffu) > 0x7f800000u; }
template <class F, ALLOY_IS(F, float)> ALLOY_FN bool isinf(F x) { return (alloy_fbits(x) & 0x7fffffffu) == 0x7f800000u; }
template <class F, ALLOY_IS(F, float)> ALLOY_FN bool isfinite(F x) { return (alloy_fbits(x) & 0x7fffffffu) < 0x7f800000u; }
template <class F, ALLOY_IS(F, float)> ALLOY_FN bool signbit(F x) { return (alloy_fbits(x) >> 31) != 0; }
template <class F, ALLOY_IS(F, float)> ALLOY_FN bool isnormal(F x) {
    unsigned e = (alloy_fbits(x) >> 23) & 0xffu;
    return e != 0 && e != 0xffu;
}
ALLOY_FN unsigned long alloy_dbits(double x) {
    unsigned long u;
    ALLOY_MEMCPY(&u, &x, 8);
    return u;
}
template <class F, ALLOY_IS(F, double)> ALLOY_FN bool isnan(F x) { return (alloy_dbits(x) << 1) > (0x7ff0000000000000ul << 1); }
template <class F, ALLOY_IS(F, double)> ALLOY_FN bool isinf(F x) { return (alloy_dbits(x) << 1) == (0x7ff0000000000000ul << 1); }
template <class F, ALLOY_IS(F, double)> ALLOY_FN bool isfinite(F x) { return (alloy_dbits(x) << 1) < (0x7ff0000000000000ul << 1); }
template <class F, ALLOY_IS(F, double)> ALLOY_FN bool signbit(F x) { return (alloy_dbits(x) >> 63) != 0; }
template <class F, ALLOY_IS(F, double)> ALLOY_FN bool isnormal(F x) {
    unsigned long e = (alloy_dbits(x) >> 52) & 0x7fful;
    return e != 0 && e != 0x7fful;
}
/* for half and bfloat the float value classifies the same */
template <int K> ALLOY_FN bool isnan(alloy_fp16<K> x) { return isnan(float(x)); }
template <int K> ALLOY_FN bool isinf(alloy_fp16<K> x) { return isinf(float(x)); }
template <int K> ALLOY_FN bool isfinite(alloy_fp16<K> x) { return isfinite(float(x)); }
template <int K> ALLOY_FN bool signbit(alloy_fp16<K> x) { return (x.alloy_bits >> 15) != 0; }
template <int K> ALLOY_FN bool isnormal(alloy_fp16<K> x) {
    unsigned e = K == 0 ? (x.alloy_bits >> 10) & 0x1fu : (x.alloy_bits >> 7) & 0xffu;
    return e != 0 && e != (K == 0 ? 0x1fu : 0xffu);
}
#define ALLOY_MAPB(name)                                                                       \
    template <class T, int N> ALLOY_FN alloy_vec<bool, N> name(const alloy_vec<T, N> &v) {    \
        alloy_vec<bool, N> r;                                                                  \
        for (int i = 0; i < N; i++) r.alloy_e[i] = name(v.alloy_e[i]);                         \
        return r;                                                                              \
    }
ALLOY_MAPB(isnan)
ALLOY_MAPB(isinf)
ALLOY_MAPB(isfinite)
ALLOY_MAPB(signbit)
ALLOY_MAPB(isnormal)
#undef ALLOY_MAPB

/* sign: 1, -1, the signed zero itself, or 0 for NaN */
template <class T, alloy_if<(alloy_frank<T>::value > 0)> = 0> ALLOY_FN T sign(T x) {
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : isnan(x) ? T(0) : x;
}
ALLOY_MAP1(sign)

/* fract: x - floor(x), below 1 */
template <class T, alloy_if<(alloy_frank<T>::value > 0)> = 0> ALLOY_FN T fract(T x) {
    typedef typename alloy_calc<T>::type F;
    F f = F(x) - floor(F(x));
    F lim = alloy_same<F, double>::value ? F(0x1.fffffffffffffp-1) : F(0x1.fffffep-1f);
    return T(f < lim ? f : lim);
}
ALLOY_MAP1(fract)

template <class T, alloy_if<(alloy_frank<T>::value > 0)> = 0> ALLOY_FN T modf(T x, T &ip) {
    ip = trunc(x);
    return isinf(x) ? copysign(T(0), x) : T(x - ip);
}
template <class F, ALLOY_IS(F, float)> ALLOY_FN float ldexp(F x, int e) { return ALLOY_LIBM(ldexpf)(x, e); }
template <class F, ALLOY_IS(F, double)> ALLOY_FN double ldexp(F x, int e) { return ALLOY_LIBM(ldexp)(x, e); }
template <int K> ALLOY_FN alloy_fp16<K> ldexp(alloy_fp16<K> x, int e) {
    return alloy_fp16<K>(ALLOY_LIBM(ldexpf)(float(x), e));
}
template <class T, int N> ALLOY_FN alloy_vec<T, N> ldexp(const alloy_vec<T, N> &x, const alloy_vec<int, N> &e) {
    alloy_vec<T, N> r;
    for (int i = 0; i < N; i++) r.alloy_e[i] = ldexp(x.alloy_e[i], e.alloy_e[i]);
    return r;
}
template <class F, ALLOY_IS(F, float)> ALLOY_FN float frexp(F x, int &e) { return ALLOY_LIBM(frexpf)(x, &e); }
template <class F, ALLOY_IS(F, double)> ALLOY_FN double frexp(F x, int &e) { return ALLOY_LIBM(frexp)(x, &e); }
template <int K> ALLOY_FN alloy_fp16<K> frexp(alloy_fp16<K> x, int &e) {
    return alloy_fp16<K>(ALLOY_LIBM(frexpf)(float(x), &e));
}
template <class T, int N> ALLOY_FN alloy_vec<T, N> frexp(const alloy_vec<T, N> &x, alloy_vec<int, N> &e) {
    alloy_vec<T, N> r;
    for (int i = 0; i < N; i++) r.alloy_e[i] = frexp(x.alloy_e[i], e.alloy_e[i]);
    return r;
}

/* ---- integer functions ------------------------------------------------- */

template <class I> ALLOY_FN unsigned long alloy_ubits(I x) {
    return (unsigned long)(typename alloy_unsigned<I>::type)x;
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I popcount(I x) {
    return I(sizeof(I) == 8 ? ALLOY_POPC64(alloy_ubits(x)) : ALLOY_POPC32((unsigned)alloy_ubits(x)));
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I clz(I x) {
    unsigned long u = alloy_ubits(x);
    if (!u) return I(sizeof(I) * 8);
    return I(sizeof(I) == 8 ? ALLOY_CLZ64(u) : ALLOY_CLZ32((unsigned)u) - (32 - (int)sizeof(I) * 8));
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I ctz(I x) {
    unsigned long u = alloy_ubits(x);
    if (!u) return I(sizeof(I) * 8);
    return I(sizeof(I) == 8 ? ALLOY_CTZ64(u) : ALLOY_CTZ32((unsigned)u));
}
ALLOY_MAP1(popcount)
ALLOY_MAP1(clz)
ALLOY_MAP1(ctz)

/* mulhi: high half of the full product */
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I mulhi(I a, I b) {
    if (sizeof(I) < 8) {
        if (alloy_is_signed<I>::value) return I(((long)a * (long)b) >> (sizeof(I) * 8));
        return I(((unsigned long)a * (unsigned long)b) >> (sizeof(I) * 8));
    }
    unsigned long ua = (unsigned long)a, ub = (unsigned long)b;
    unsigned long al = ua & 0xffffffffu, ah = ua >> 32, bl = ub & 0xffffffffu, bh = ub >> 32;
    unsigned long ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    unsigned long mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    unsigned long hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    if (alloy_is_signed<I>::value) { /* signed correction of the unsigned product */
        if (a < I(0)) hi -= ub;
        if (b < I(0)) hi -= ua;
    }
    return I(hi);
}
ALLOY_MAP2(mulhi)

template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I extract_bits(I x, uint offset, uint bits) {
    const uint w = sizeof(I) * 8;
    if (bits == 0) return I(0);
    unsigned long u = alloy_ubits(x) >> offset;
    unsigned long mask = bits >= 64 ? ~0ul : ((1ul << bits) - 1ul);
    u &= mask;
    if (alloy_is_signed<I>::value && bits < w && ((u >> (bits - 1)) & 1ul)) u |= ~mask; /* sign-extend */
    return I(u);
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0>
ALLOY_FN I insert_bits(I base, I insert, uint offset, uint bits) {
    if (bits == 0) return base;
    unsigned long mask = (bits >= 64 ? ~0ul : ((1ul << bits) - 1ul)) << offset;
    return I((alloy_ubits(base) & ~mask) | ((alloy_ubits(insert) << offset) & mask));
}
template <class T, int N> ALLOY_FN alloy_vec<T, N> extract_bits(const alloy_vec<T, N> &x, uint offset, uint bits) {
    alloy_vec<T, N> r;
    for (int i = 0; i < N; i++) r.alloy_e[i] = extract_bits(x.alloy_e[i], offset, bits);
    return r;
}
template <class T, int N>
ALLOY_FN alloy_vec<T, N> insert_bits(const alloy_vec<T, N> &b, const alloy_vec<T, N> &x, uint offset, uint bits) {
    alloy_vec<T, N> r;
    for (int i = 0; i < N; i++) r.alloy_e[i] = insert_bits(b.alloy_e[i], x.alloy_e[i], offset, bits);
    return r;
}

/* rotate(v, i): rotate left by i mod width */
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I rotate(I v, I i) {
    const unsigned w = sizeof(I) * 8;
    unsigned s = (unsigned)alloy_ubits(i) % w;
    unsigned long u = alloy_ubits(v), m = w == 64 ? ~0ul : ((1ul << w) - 1ul);
    return s ? I(((u << s) | (u >> (w - s))) & m) : v;
}
ALLOY_MAP2(rotate)
/* absdiff: |x - y| without overflow (as the unsigned bit pattern) */
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I absdiff(I x, I y) {
    typedef typename alloy_unsigned<I>::type U;
    return x > y ? I(U(x) - U(y)) : I(U(y) - U(x));
}
ALLOY_MAP2(absdiff)
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I add_sat(I x, I y) {
    typedef typename alloy_unsigned<I>::type U;
    const I hi = alloy_is_signed<I>::value ? I(U(~U(0)) >> 1) : I(~U(0));
    const I lo = alloy_is_signed<I>::value ? I(-hi - I(1)) : I(0);
    if (alloy_is_signed<I>::value) {
        if (y > I(0) && x > I(hi - y)) return hi;
        if (y < I(0) && x < I(lo - y)) return lo;
        return I(x + y);
    }
    return U(x + y) < U(x) ? hi : I(x + y);
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I sub_sat(I x, I y) {
    typedef typename alloy_unsigned<I>::type U;
    const I hi = alloy_is_signed<I>::value ? I(U(~U(0)) >> 1) : I(~U(0));
    const I lo = alloy_is_signed<I>::value ? I(-hi - I(1)) : I(0);
    if (alloy_is_signed<I>::value) {
        if (y < I(0) && x > I(hi + y)) return hi;
        if (y > I(0) && x < I(lo + y)) return lo;
        return I(x - y);
    }
    return x < y ? I(0) : I(x - y);
}
ALLOY_MAP2(add_sat)
ALLOY_MAP2(sub_sat)
/* hadd: (x + y) >> 1, rhadd: (x + y + 1) >> 1, without overflow */
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I hadd(I x, I y) {
    return I((x >> 1) + (y >> 1) + (x & y & I(1)));
}
template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN I rhadd(I x, I y) {
    return I((x >> 1) + (y >> 1) + ((x | y) & I(1)));
}
ALLOY_MAP2(hadd)
ALLOY_MAP2(rhadd)

/* ---- relational and geometric ------------------------------------------ */

ALLOY_FN bool all(bool b) { return b; }
ALLOY_FN bool any(bool b) { return b; }
template <int N> ALLOY_FN bool all(const alloy_vec<bool, N> &v) {
    for (int i = 0; i < N; i++)
        if (!v.alloy_e[i]) return false;
    return true;
}
template <int N> ALLOY_FN bool any(const alloy_vec<bool, N> &v) {
    for (int i = 0; i < N; i++)
        if (v.alloy_e[i]) return true;
    return false;
}

template <class T, int N> ALLOY_FN T dot(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b) {
    typedef typename alloy_calc<T>::type F;
    F s = F(a.alloy_e[0]) * F(b.alloy_e[0]);
    for (int i = 1; i < N; i++) s += F(a.alloy_e[i]) * F(b.alloy_e[i]);
    return T(s);
}
template <class T, int N> ALLOY_FN T length_squared(const alloy_vec<T, N> &a) { return dot(a, a); }
template <class T, int N> ALLOY_FN T length(const alloy_vec<T, N> &a) {
    typedef typename alloy_calc<T>::type F;
    F s = F(0);
    for (int i = 0; i < N; i++) s += F(a.alloy_e[i]) * F(a.alloy_e[i]);
    return T(sqrt(s));
}
template <class T, int N> ALLOY_FN T distance(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b) {
    return length(a - b);
}
template <class T, int N> ALLOY_FN T distance_squared(const alloy_vec<T, N> &a, const alloy_vec<T, N> &b) {
    return length_squared(a - b);
}
template <class T, int N> ALLOY_FN alloy_vec<T, N> normalize(const alloy_vec<T, N> &a) {
    typedef typename alloy_calc<T>::type F;
    F s = F(0);
    for (int i = 0; i < N; i++) s += F(a.alloy_e[i]) * F(a.alloy_e[i]);
    F inv = F(1) / sqrt(s);
    alloy_vec<T, N> r;
    for (int i = 0; i < N; i++) r.alloy_e[i] = T(F(a.alloy_e[i]) * inv);
    return r;
}
template <class T> ALLOY_FN alloy_vec<T, 3> cross(const alloy_vec<T, 3> &a, const alloy_vec<T, 3> &b) {
    return alloy_vec<T, 3>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
template <class T, int N> ALLOY_FN alloy_vec<T, N> reflect(const alloy_vec<T, N> &i, const alloy_vec<T, N> &n) {
    return i - T(2) * dot(n, i) * n;
}
template <class T, int N>
ALLOY_FN alloy_vec<T, N> faceforward(const alloy_vec<T, N> &n, const alloy_vec<T, N> &i, const alloy_vec<T, N> &nref) {
    return dot(nref, i) < T(0) ? n : -n;
}

/* ---- bit casts ---------------------------------------------------------- */

template <class To, class From> ALLOY_FN To as_type(const From &f) {
    static_assert(sizeof(To) == sizeof(From), "as_type needs types of the same size");
    To t;
    ALLOY_MEMCPY(&t, &f, sizeof(To));
    return t;
}

/* ---- numeric_limits (the metal:: one) ----------------------------------- */

template <class T> struct numeric_limits;
#define ALLOY_INT_LIMITS(TT, lo, hi)                                                           \
    template <> struct numeric_limits<TT> {                                                    \
        typedef TT T;                                                                          \
        static constexpr bool is_specialized = true, is_signed = alloy_is_signed<T>::value;    \
        static constexpr bool is_integer = true, has_infinity = false, has_quiet_NaN = false;  \
        static constexpr int digits = (int)(sizeof(T) * 8) - (is_signed ? 1 : 0);              \
        static constexpr T min() { return T(lo); }                                             \
        static constexpr T lowest() { return T(lo); }                                          \
        static constexpr T max() { return T(hi); }                                             \
        static constexpr T epsilon() { return T(0); }                                          \
    };
ALLOY_INT_LIMITS(bool, false, true)
ALLOY_INT_LIMITS(char, alloy_is_signed<char>::value ? -128 : 0, alloy_is_signed<char>::value ? 127 : 255)
ALLOY_INT_LIMITS(signed char, -128, 127)
ALLOY_INT_LIMITS(unsigned char, 0, 255)
ALLOY_INT_LIMITS(short, -32768, 32767)
ALLOY_INT_LIMITS(unsigned short, 0, 65535)
ALLOY_INT_LIMITS(int, -2147483647 - 1, 2147483647)
ALLOY_INT_LIMITS(unsigned int, 0u, 0xffffffffu)
ALLOY_INT_LIMITS(long, -0x7fffffffffffffffL - 1, 0x7fffffffffffffffL)
ALLOY_INT_LIMITS(unsigned long, 0ul, 0xfffffffffffffffful)
ALLOY_INT_LIMITS(long long, -0x7fffffffffffffffLL - 1, 0x7fffffffffffffffLL)
ALLOY_INT_LIMITS(unsigned long long, 0ull, 0xffffffffffffffffull)
#undef ALLOY_INT_LIMITS
template <> struct numeric_limits<float> {
    static constexpr bool is_specialized = true, is_signed = true, is_integer = false;
    static constexpr bool has_infinity = true, has_quiet_NaN = true;
    static constexpr int digits = 24;
    static constexpr float min() { return 0x1p-126f; }
    static constexpr float lowest() { return -0x1.fffffep+127f; }
    static constexpr float max() { return 0x1.fffffep+127f; }
    static constexpr float epsilon() { return 0x1p-23f; }
    static constexpr float denorm_min() { return 0x1p-149f; }
    static constexpr float infinity() { return ALLOY_INFF; }
    static constexpr float quiet_NaN() { return ALLOY_NANF; }
};
template <> struct numeric_limits<double> {
    static constexpr bool is_specialized = true, is_signed = true, is_integer = false;
    static constexpr bool has_infinity = true, has_quiet_NaN = true;
    static constexpr int digits = 53;
    static constexpr double min() { return 0x1p-1022; }
    static constexpr double lowest() { return -0x1.fffffffffffffp+1023; }
    static constexpr double max() { return 0x1.fffffffffffffp+1023; }
    static constexpr double epsilon() { return 0x1p-52; }
    static constexpr double denorm_min() { return 0x1p-1074; }
    static constexpr double infinity() { return ALLOY_INF; }
    static constexpr double quiet_NaN() { return ALLOY_NAN; }
};
template <int K> struct numeric_limits<alloy_fp16<K>> {
    typedef alloy_fp16<K> T;
    static constexpr bool is_specialized = true, is_signed = true, is_integer = false;
    static constexpr bool has_infinity = true, has_quiet_NaN = true;
    static constexpr int digits = K == 0 ? 11 : 8;
    static constexpr T min() { return T::alloy_from_bits(K == 0 ? 0x0400 : 0x0080); }
    static constexpr T lowest() { return T::alloy_from_bits(K == 0 ? 0xfbff : 0xff7f); }
    static constexpr T max() { return T::alloy_from_bits(K == 0 ? 0x7bff : 0x7f7f); }
    static constexpr T epsilon() { return T::alloy_from_bits(K == 0 ? 0x1400 : 0x3c00); }
    static constexpr T denorm_min() { return T::alloy_from_bits(0x0001); }
    static constexpr T infinity() { return T::alloy_from_bits(K == 0 ? 0x7c00 : 0x7f80); }
    static constexpr T quiet_NaN() { return T::alloy_from_bits(K == 0 ? 0x7e00 : 0x7fc0); }
};

/* ---- fast:: and precise:: ----------------------------------------------- */
/* The elementary functions again with their own hook; everything else is
 * reached through the using-directive (metal::fast::max works). */
namespace fast {
using namespace metal;
ALLOY_ELEMENTARY(ALLOY_LIBM_FAST)
}
namespace precise {
using namespace metal;
ALLOY_ELEMENTARY(ALLOY_LIBM)
}

/* ==== types for the synchronising parts (functions in the backend file) === */

enum class mem_flags : unsigned {
    mem_none = 0,
    mem_device = 1,
    mem_threadgroup = 2,
    mem_texture = 4,
    mem_threadgroup_imageblock = 8,
    mem_object_data = 16
};
ALLOY_FN constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags((unsigned)a | (unsigned)b); }
ALLOY_FN constexpr mem_flags operator&(mem_flags a, mem_flags b) { return mem_flags((unsigned)a & (unsigned)b); }

enum memory_order {
    memory_order_relaxed,
    memory_order_acquire,
    memory_order_release,
    memory_order_acq_rel,
    memory_order_seq_cst
};
enum thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup, thread_scope_device };

/* atomic<T>: the value itself (same size as T), so `device atomic<float>*`
 * views a float buffer; operations are the atomic_*_explicit functions. */
template <class T> struct atomic {
    T alloy_v;
    atomic() = default;
    atomic(const atomic &) = delete;
    atomic &operator=(const atomic &) = delete;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;
typedef atomic<bool> atomic_bool;
typedef atomic<ulong> atomic_ulong;
typedef atomic<long> atomic_long;

/* simd_ballot's result: the lanes' mask (bit i: lane i voted true) and the
 * active lanes. */
struct simd_vote {
    typedef ulong vote_t;
    vote_t alloy_mask;
    vote_t alloy_active;
    simd_vote() = default;
    ALLOY_FN explicit constexpr simd_vote(vote_t v, vote_t active = ~0ul) : alloy_mask(v), alloy_active(active) {}
    ALLOY_FN explicit constexpr operator vote_t() const { return alloy_mask; }
    ALLOY_FN explicit constexpr operator uint() const { return (uint)alloy_mask; }
    ALLOY_FN explicit constexpr operator bool() const { return alloy_mask != 0; }
    ALLOY_FN constexpr bool all() const { return (alloy_mask & alloy_active) == alloy_active; }
    ALLOY_FN constexpr bool any() const { return alloy_mask != 0; }
};

/* ---- SIMD/quad group reductions, shared by the backends ---------------- */

/* The operations of the group reductions and scans. */
struct alloy_op_add {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(a + b); }
};
struct alloy_op_mul {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(a * b); }
};
struct alloy_op_max {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(max(a, b)); }
};
struct alloy_op_min {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(min(a, b)); }
};
struct alloy_op_and {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(a & b); }
};
struct alloy_op_or {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(a | b); }
};
struct alloy_op_xor {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(a ^ b); }
};


/* simd_sum ... simd_prefix_exclusive_product (P = simd or quad, W = 32 or 4)
 * over each backend's alloy_grp_reduce<W>(x, op) and alloy_grp_scan<W>(x, op,
 * identity, inclusive), which must be defined where the macro is expanded. */
#define ALLOY_GROUP_REDUCTIONS(P, W)                                                           \
    template <class T> ALLOY_FN T P##_sum(T x) { return alloy_grp_reduce<W>(x, alloy_op_add()); } \
    template <class T> ALLOY_FN T P##_product(T x) { return alloy_grp_reduce<W>(x, alloy_op_mul()); } \
    template <class T> ALLOY_FN T P##_max(T x) { return alloy_grp_reduce<W>(x, alloy_op_max()); } \
    template <class T> ALLOY_FN T P##_min(T x) { return alloy_grp_reduce<W>(x, alloy_op_min()); } \
    template <class T> ALLOY_FN T P##_and(T x) { return alloy_grp_reduce<W>(x, alloy_op_and()); } \
    template <class T> ALLOY_FN T P##_or(T x) { return alloy_grp_reduce<W>(x, alloy_op_or()); } \
    template <class T> ALLOY_FN T P##_xor(T x) { return alloy_grp_reduce<W>(x, alloy_op_xor()); } \
    template <class T> ALLOY_FN T P##_prefix_inclusive_sum(T x) {                              \
        return alloy_grp_scan<W>(x, alloy_op_add(), T(0), true);                               \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_prefix_exclusive_sum(T x) {                              \
        return alloy_grp_scan<W>(x, alloy_op_add(), T(0), false);                              \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_prefix_inclusive_product(T x) {                          \
        return alloy_grp_scan<W>(x, alloy_op_mul(), T(1), true);                               \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_prefix_exclusive_product(T x) {                          \
        return alloy_grp_scan<W>(x, alloy_op_mul(), T(1), false);                              \
    }

/* simdgroup_matrix<T, 8, 8>: each of the 32 lanes holds (row, col) and
 * (row, col + 1), with the lane -> (row, col) map of Metal (alloy_sgm_coord). */
template <class T, int Cols, int Rows> struct simdgroup_matrix {
    static_assert(Cols == 8 && Rows == 8, "alloy supports 8x8 simdgroup matrices");
    alloy_vec<T, 2> alloy_el;
    simdgroup_matrix() = default;
    ALLOY_FN explicit simdgroup_matrix(T diagonal); /* backend: needs the lane */
    ALLOY_FN alloy_vec<T, 2> &thread_elements() { return alloy_el; }
    ALLOY_FN const alloy_vec<T, 2> &thread_elements() const { return alloy_el; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

ALLOY_FN void alloy_sgm_coord(uint lane, int &row, int &col) {
    uint q = lane / 4;
    row = (int)((q & 4) + (lane / 2) % 4);
    col = (int)((q & 2) * 2 + (lane % 2) * 2);
}
template <class T, int C, int R> ALLOY_FN simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
    simdgroup_matrix<T, C, R> m;
    m.alloy_el = alloy_vec<T, 2>(v);
    return m;
}

/* The calling thread's lane in its simdgroup: each backend's prelude defines
 * it (the CPU asks its fiber scheduler, CUDA reads the lane register). */
ALLOY_FN uint alloy_simd_lane_id();

/* d = a*b (+ *c when c is not null), the caller's two elements: each
 * backend's prelude defines it (CPU: a SIMD exchange and float FMAs; CUDA:
 * mma.sync for half/bfloat, shuffles and FMAs otherwise). */
template <class T, class TA, class TB>
ALLOY_FN void alloy_sgm_mma(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a,
                            const simdgroup_matrix<TB, 8, 8> &b, const alloy_vec<T, 2> *c);
template <class T, class TA, class TB>
ALLOY_FN void simdgroup_multiply(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a,
                                 const simdgroup_matrix<TB, 8, 8> &b) {
    alloy_sgm_mma(d, a, b, (const alloy_vec<T, 2> *)0);
}
template <class T, class TA, class TB, class TC>
ALLOY_FN void simdgroup_multiply_accumulate(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a,
                                            const simdgroup_matrix<TB, 8, 8> &b,
                                            const simdgroup_matrix<TC, 8, 8> &c) {
    alloy_vec<T, 2> cv = alloy_vec<T, 2>(c.alloy_el);
    alloy_sgm_mma(d, a, b, &cv);
}

template <class T, int C, int R> ALLOY_FN simdgroup_matrix<T, C, R>::simdgroup_matrix(T diagonal) {
    int row, col;
    alloy_sgm_coord(alloy_simd_lane_id(), row, col);
    alloy_el.alloy_e[0] = row == col ? diagonal : T(0);
    alloy_el.alloy_e[1] = row == col + 1 ? diagonal : T(0);
}

/* Element (r, c) lives at src[(origin.y + r) * elements_per_row + origin.x + c];
 * transpose swaps r and c. */
template <class T, class U>
ALLOY_FN void simdgroup_load(simdgroup_matrix<T, 8, 8> &d, const U *src, ulong elements_per_row = 8,
                             ulong2 matrix_origin = ulong2(0, 0), bool transpose_matrix = false) {
    int row, col;
    alloy_sgm_coord(alloy_simd_lane_id(), row, col);
    for (int k = 0; k < 2; k++) {
        ulong r = (ulong)row, c = (ulong)(col + k);
        if (transpose_matrix) {
            ulong t = r;
            r = c;
            c = t;
        }
        d.alloy_el.alloy_e[k] = T(src[(matrix_origin.y + r) * elements_per_row + matrix_origin.x + c]);
    }
}
template <class T, class U>
ALLOY_FN void simdgroup_store(const simdgroup_matrix<T, 8, 8> &a, U *dst, ulong elements_per_row = 8,
                              ulong2 matrix_origin = ulong2(0, 0), bool transpose_matrix = false) {
    int row, col;
    alloy_sgm_coord(alloy_simd_lane_id(), row, col);
    for (int k = 0; k < 2; k++) {
        ulong r = (ulong)row, c = (ulong)(col + k);
        if (transpose_matrix) {
            ulong t = r;
            r = c;
            c = t;
        }
        dst[(matrix_origin.y + r) * elements_per_row + matrix_origin.x + c] = U(a.alloy_el.alloy_e[k]);
    }
}


} /* namespace metal */

#undef ALLOY_MAP1
#undef ALLOY_MAP2
#undef ALLOY_MAP3
#undef ALLOY_MATH1
#undef ALLOY_MATH2
#undef ALLOY_ELEMENTARY
#undef ALLOY_SCALARS2
#undef ALLOY_SCALARS3
#undef ALLOY_IS

/* ==== MLX helpers (global, as MLX's utils.h has them) ==================== */

template <class T> struct Limits {
    static constexpr T max = metal::numeric_limits<T>::max();
    static constexpr T min = metal::numeric_limits<T>::lowest();
    static constexpr T finite_max = metal::numeric_limits<T>::max();
    static constexpr T finite_min = metal::numeric_limits<T>::lowest();
};
#define ALLOY_FLOAT_LIMITS(T)                                                                  \
    template <> struct Limits<T> {                                                             \
        static constexpr T max = metal::numeric_limits<T>::infinity();                         \
        static constexpr T min = -metal::numeric_limits<T>::infinity();                        \
        static constexpr T finite_max = metal::numeric_limits<T>::max();                       \
        static constexpr T finite_min = metal::numeric_limits<T>::lowest();                    \
    };
ALLOY_FLOAT_LIMITS(float)
ALLOY_FLOAT_LIMITS(double)
#undef ALLOY_FLOAT_LIMITS
template <int K> struct Limits<alloy_fp16<K>> {
    typedef alloy_fp16<K> T;
    static constexpr T max = metal::numeric_limits<T>::infinity();
    static constexpr T min = T::alloy_from_bits(K == 0 ? 0xfc00 : 0xff80);
    static constexpr T finite_max = metal::numeric_limits<T>::max();
    static constexpr T finite_min = metal::numeric_limits<T>::lowest();
};

template <class A, class B> ALLOY_FN constexpr A ceildiv(A n, B m) { return (A)((n + m - 1) / m); }

/* Offset of row-major element `elem` in a strided array (strides in
 * elements). */
template <class E, class S, class D>
ALLOY_FN int64_t elem_to_loc(E elem, const int *shape, const S *strides, D ndim) {
    int64_t loc = 0, e = (int64_t)elem;
    for (int i = (int)ndim - 1; i >= 0 && e > 0; --i) {
        loc += (e % shape[i]) * (int64_t)strides[i];
        e /= shape[i];
    }
    return loc;
}
/* 3-d position: x runs along the last dimension, y the one before, z over
 * the others. */
template <class U, class S, class D>
ALLOY_FN int64_t elem_to_loc(alloy_vec<U, 3> elem, const int *shape, const S *strides, D ndim) {
    int n = (int)ndim;
    if (n <= 0) return 0;
    int64_t loc = (int64_t)elem.x * (int64_t)strides[n - 1];
    if (n == 1) return loc;
    loc += (int64_t)elem.y * (int64_t)strides[n - 2];
    int64_t z = (int64_t)elem.z;
    for (int d = n - 3; d >= 0; --d) {
        loc += (z % shape[d]) * (int64_t)strides[d];
        z /= shape[d];
    }
    return loc;
}
template <class E, class S> ALLOY_FN int64_t elem_to_loc_1(E elem, S stride) { return (int64_t)elem * (int64_t)stride; }
template <class U, class S> ALLOY_FN int64_t elem_to_loc_2(alloy_vec<U, 2> elem, const S *strides) {
    return (int64_t)elem.x * (int64_t)strides[1] + (int64_t)elem.y * (int64_t)strides[0];
}
template <class U, class S> ALLOY_FN int64_t elem_to_loc_3(alloy_vec<U, 3> elem, const S *strides) {
    return (int64_t)elem.x * (int64_t)strides[2] + (int64_t)elem.y * (int64_t)strides[1] +
           (int64_t)elem.z * (int64_t)strides[0];
}

#endif
