/* halfconv.c — see halfconv.h. Bit-exact conversions, no FPU assumptions. */
#include <string.h>

#include "halfconv.h"

static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t alloy_float_to_half_bits(float f) {
    uint32_t x = bits_of(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) /* Inf / NaN (keep NaN quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow */
    if (e <= 0) { /* subnormal half or zero */
        if (e < -10) return sign;
        man |= 0x800000u;
        int shift = 14 - e; /* 24-bit mantissa to 10 - (1 - e) bits */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = man >> 13, rem = man & 0x1fffu;
    uint32_t h = ((uint32_t)e << 10) | q;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) h++; /* may carry into exponent: fine */
    return (uint16_t)(sign | h);
}

float alloy_half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (!man) return float_of(sign);
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        return float_of(sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13));
    }
    return float_of(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

uint16_t alloy_float_to_bfloat_bits(float f) {
    uint32_t x = bits_of(f);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return (uint16_t)((x >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding) >> 16);
}

float alloy_bfloat_bits_to_float(uint16_t b) { return float_of((uint32_t)b << 16); }
