/* cuda_hooks.h — the CUDA values of common.h's hook macros, pasted before
 * common.h in every generated CUDA kernel (NVRTC, no CUDA headers).
 *
 * common.h reaches libm, bit counting and the half/bfloat conversions only
 * through hook macros; their defaults under NVRTC are already CUDA's (device
 * functions, ::expf, __popc, ...). What is defined here differs from those
 * defaults and must be known before common.h expands its math tables:
 *   - metal::fast:: maps to the hardware approximations where CUDA has one
 *     (__expf, __logf, __sinf, ..., and __fdividef for fast::divide of
 *     floats; the bounds of Metal's fast math);
 *     metal:: and metal::precise:: keep CUDA's accurate libm;
 *   - half and bfloat convert with the cvt instructions (round to nearest
 *     even, subnormals kept, overflow to infinity: the same bits as the
 *     portable code, except that a NaN becomes the canonical NaN). */
#ifndef ALLOY_PRELUDE_CUDA_HOOKS_H
#define ALLOY_PRELUDE_CUDA_HOOKS_H

#define ALLOY_FN __device__ __forceinline__
#define ALLOY_LIBM(f) ::f

/* ---- metal::fast:: ------------------------------------------------------- */
#define ALLOY_LIBM_FAST(f) ALLOY_FAST_##f
#define ALLOY_FAST_expf __expf
#define ALLOY_FAST_logf __logf
#define ALLOY_FAST_log2f __log2f
#define ALLOY_FAST_log10f __log10f
#define ALLOY_FAST_sinf __sinf
#define ALLOY_FAST_cosf __cosf
#define ALLOY_FAST_tanf __tanf
#define ALLOY_FAST_powf __powf
/* fast::divide of floats: x times the approximate reciprocal of y, 2 ulp for
 * 2^-126 <= |y| <= 2^126 (Metal's fast bound: 2.5 ulp there), 0 for larger |y|
 * and finite x; metal::divide and precise::divide stay x / y */
#define ALLOY_FDIVF(HOOK) ALLOY_FDIVF_##HOOK
#define ALLOY_FDIVF_ALLOY_LIBM alloy_fdiv_ieee
#define ALLOY_FDIVF_ALLOY_LIBM_FAST __fdividef
/* no cheaper hardware form (or a much less accurate one): the libm function */
#define ALLOY_FAST_exp2f ::exp2f
#define ALLOY_FAST_asinf ::asinf
#define ALLOY_FAST_acosf ::acosf
#define ALLOY_FAST_atanf ::atanf
#define ALLOY_FAST_sinhf ::sinhf
#define ALLOY_FAST_coshf ::coshf
#define ALLOY_FAST_tanhf ::tanhf
#define ALLOY_FAST_asinhf ::asinhf
#define ALLOY_FAST_acoshf ::acoshf
#define ALLOY_FAST_atanhf ::atanhf
#define ALLOY_FAST_log1pf ::log1pf
#define ALLOY_FAST_sqrtf ::sqrtf
#define ALLOY_FAST_cbrtf ::cbrtf
#define ALLOY_FAST_atan2f ::atan2f
/* double has no fast forms */
#define ALLOY_FAST_sin ::sin
#define ALLOY_FAST_cos ::cos
#define ALLOY_FAST_tan ::tan
#define ALLOY_FAST_asin ::asin
#define ALLOY_FAST_acos ::acos
#define ALLOY_FAST_atan ::atan
#define ALLOY_FAST_sinh ::sinh
#define ALLOY_FAST_cosh ::cosh
#define ALLOY_FAST_tanh ::tanh
#define ALLOY_FAST_asinh ::asinh
#define ALLOY_FAST_acosh ::acosh
#define ALLOY_FAST_atanh ::atanh
#define ALLOY_FAST_exp ::exp
#define ALLOY_FAST_exp2 ::exp2
#define ALLOY_FAST_log ::log
#define ALLOY_FAST_log2 ::log2
#define ALLOY_FAST_log10 ::log10
#define ALLOY_FAST_log1p ::log1p
#define ALLOY_FAST_sqrt ::sqrt
#define ALLOY_FAST_cbrt ::cbrt
#define ALLOY_FAST_atan2 ::atan2
#define ALLOY_FAST_pow ::pow

/* ---- <limits.h> names ----------------------------------------------------
 * NVRTC predefines no __INT_MAX__ & co., which common.h would use. */
#define CHAR_BIT 8
#define SCHAR_MAX 127
#define SCHAR_MIN (-128)
#define UCHAR_MAX 255
#define CHAR_MAX SCHAR_MAX /* MSL char is signed */
#define CHAR_MIN SCHAR_MIN
#define SHRT_MAX 32767
#define SHRT_MIN (-32768)
#define USHRT_MAX 65535
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define UINT_MAX 4294967295U
#define LONG_MAX 9223372036854775807L
#define LONG_MIN (-LONG_MAX - 1L)
#define ULONG_MAX 18446744073709551615UL

/* ---- half and bfloat conversions ----------------------------------------- */
__device__ __forceinline__ unsigned short alloy_cuda_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float alloy_cuda_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
#define ALLOY_F2H alloy_cuda_f2h
#define ALLOY_H2F alloy_cuda_h2f
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 /* cvt to bf16: sm_80 and later */
__device__ __forceinline__ unsigned short alloy_cuda_f2bf(float f) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#define ALLOY_F2BF alloy_cuda_f2bf
#endif
/* bfloat -> float is a shift (common.h's alloy_bf2f) */

#endif
