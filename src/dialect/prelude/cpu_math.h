/* cpu_math.h — the CPU's own float exp and tanh, written so the compiler
 * can run them in vector lanes (no calls, no branches: selects and
 * arithmetic only), for the loops over a group's threads.
 *
 * Pasted before common.h into every CPU kernel; common.h calls them through
 * its ALLOY_EXPF/ALLOY_TANHF hooks for float, half, bfloat and integer
 * arguments of metal::exp and metal::tanh (and their fast:: and precise::
 * forms). Both compute in double and round once to float: the double
 * result is within about 1e-15 (relative) of the exact value, so the float
 * result is the correctly rounded one except within ~1e-15 of a rounding
 * midpoint (then off by at most that much more than half an ulp) — inside
 * Metal's precise bounds (exp 4 ulp, tanh 5 ulp). NaN stays NaN, the
 * infinities give 0/inf (exp) and -1/1 (tanh), -0 stays -0; no fast-math
 * flag is involved. */
#ifndef ALLOY_PRELUDE_CPU_MATH_H
#define ALLOY_PRELUDE_CPU_MATH_H

/* e^y for y in [-745, 709] (callers clamp), relative error ~2e-16: y = k ln2
 * + r with |r| <= ln2/2 (k by the round-to-nearest shifter, ln2 in two
 * parts so k*ln2_hi is exact), e^r by its Taylor series to r^12, 2^k built
 * in the exponent field with 64-bit integer arithmetic (vectorisable
 * without AVX-512). */
static inline __attribute__((always_inline)) double alloy_cpu_exp_d(double y) {
    const double shift = 0x1.8p52, inv_ln2 = 0x1.71547652b82fep0;
    const double ln2_hi = 0x1.62e42fee00000p-1, ln2_lo = 0x1.a39ef35793c76p-33;
    double kd = y * inv_ln2 + shift;
    unsigned long long kb = __builtin_bit_cast(unsigned long long, kd);
    kd -= shift;
    double r = (y - kd * ln2_hi) - kd * ln2_lo;
    double p = 1.0 / 479001600.0; /* 1/12! */
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    unsigned long long scale = (kb - __builtin_bit_cast(unsigned long long, shift) + 1023ull) << 52;
    return p * __builtin_bit_cast(double, scale);
}

/* e^y - 1 for |y| <= 1.25 by its Taylor series to y^17 (relative error
 * below 2e-13; finite, and unused, for larger y). */
static inline __attribute__((always_inline)) double alloy_cpu_expm1_small_d(double y) {
    double p = 1.0 / 355687428096000.0; /* 1/17! */
    p = p * y + 1.0 / 20922789888000.0;
    p = p * y + 1.0 / 1307674368000.0;
    p = p * y + 1.0 / 87178291200.0;
    p = p * y + 1.0 / 6227020800.0;
    p = p * y + 1.0 / 479001600.0;
    p = p * y + 1.0 / 39916800.0;
    p = p * y + 1.0 / 3628800.0;
    p = p * y + 1.0 / 362880.0;
    p = p * y + 1.0 / 40320.0;
    p = p * y + 1.0 / 5040.0;
    p = p * y + 1.0 / 720.0;
    p = p * y + 1.0 / 120.0;
    p = p * y + 1.0 / 24.0;
    p = p * y + 1.0 / 6.0;
    p = p * y + 1.0 / 2.0;
    p = p * y + 1.0 / 1.0;
    return p * y;
}

static inline __attribute__((always_inline)) float alloy_cpu_expf(float xf) {
    double x = xf;
    x = x > 89.0 ? 89.0 : x; /* beyond: inf (and 0 below -104) once rounded to float */
    x = x < -104.0 ? -104.0 : x;
    return (float)alloy_cpu_exp_d(x);
}

/* tanh|x| = e / (e + 2) with e = e^(2|x|) - 1, the sign put back after;
 * |x| >= 20 gives 1 (as float it is 1 from |x| ~ 9 on). */
static inline __attribute__((always_inline)) float alloy_cpu_tanhf(float xf) {
    double x = xf;
    double a = __builtin_fabs(x);
    a = a > 20.0 ? 20.0 : a;
    double y = 2.0 * a;
    double e = y < 1.25 ? alloy_cpu_expm1_small_d(y) : alloy_cpu_exp_d(y) - 1.0;
    return (float)__builtin_copysign(e / (e + 2.0), x);
}

#define ALLOY_EXPF(HOOK) alloy_cpu_expf
#define ALLOY_TANHF(HOOK) alloy_cpu_tanhf

#endif
