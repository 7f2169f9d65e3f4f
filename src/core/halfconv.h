/* halfconv.h — float <-> IEEE binary16 / bfloat16 bit conversions with
 * round-to-nearest-even, for host-side fills, scalars and DLPack. */
#ifndef ALLOY_CORE_HALFCONV_H
#define ALLOY_CORE_HALFCONV_H

#include <stdint.h>

uint16_t alloy_float_to_half_bits(float f);
float alloy_half_bits_to_float(uint16_t h);
uint16_t alloy_float_to_bfloat_bits(float f);
float alloy_bfloat_bits_to_float(uint16_t b);

#endif
