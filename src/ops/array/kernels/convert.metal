// convert: dst[i] = TOUT(src[i]) for two row-contiguous arrays of the same
// size (any float dtypes; through float, or double when either is double),
// each value rounded once to nearest. How an op runs its inputs in another
// dtype (src/ops/array/convert.c). A grid-stride loop with 64-bit indices,
// so any size fits one launch.
// Launch constant: long n (elements). Launch: grid = (min(n, 4M), 1, 1),
// threadgroup = (256, 1, 1).
//! name: alloy_convert
//! inputs: src
//! outputs: dst
//! template: TIN=float16
//! template: TOUT=bfloat16
//! body:
using W = metal::conditional_t<sizeof(TIN) == 8 || sizeof(TOUT) == 8, double, float>;
const ulong step = ulong(threads_per_grid.x);
for (ulong e = thread_position_in_grid.x; e < ulong(n); e += step) dst[e] = TOUT(W(src[e]));
