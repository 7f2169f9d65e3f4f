// orthogonal_randn: standard normal samples from a counter-based generator,
// the Gaussian matrices of alloy_orthogonal. Element e of OUT (a flat array
// of count elements) is a function of (seed, e) alone, so the values do not
// depend on the device, the launch shape or the order of the threads (up to
// the last bits of log, sqrt and cos on each device).
// Bits: h = mix(mix(seed) ^ (e * 0x9E3779B97F4A7C15 + 1)), mix the
// splitmix64 finaliser; u1 = (h >> 40 + 0.5) / 2^24, u2 = ((h >> 16 & 0xFFFFFF)
// + 0.5) / 2^24 (both in (0, 1)); z = sqrt(-2 log u1) cos(2 pi u2)
// (Box-Muller), computed in float and converted to T.
// Launch constants: uint32 seed_lo, seed_hi (the 64-bit seed), int64 count.
// Template: T (float32, float64).
// Launch: grid = (ceil(count / 256) * 256, 1, 1), threadgroup = (256, 1, 1);
// each thread writes elements e, e + grid, ... below count.
//! name: alloy_orthogonal_randn
//! inputs:
//! outputs: OUT
//! template: T=float32
//! header:
inline ulong alloy_orng_mix(ulong z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ul;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBul;
  return z ^ (z >> 31);
}
//! body:
const long stride = long(threads_per_grid.x);
const ulong key = alloy_orng_mix((ulong(seed_hi) << 32) | ulong(seed_lo));
for (long e = long(thread_position_in_grid.x); e < count; e += stride) {
    const ulong h = alloy_orng_mix(key ^ (ulong(e) * 0x9E3779B97F4A7C15ul + 1ul));
    const float u1 = (float(uint(h >> 40)) + 0.5f) * 0x1p-24f;
    const float u2 = (float(uint((h >> 16) & 0xFFFFFFul)) + 0.5f) * 0x1p-24f;
    OUT[e] = T(sqrt(-2.0f * log(u1)) * cos(6.2831853071795864769f * u2));
}
