// mlstm_f16_rows: float32 (or float16) rows as float16 rows with a
// power-of-two exponent each — the pre-pass of the chunkwise forward on
// float16 tiles (chunkwise.c: float32 inputs at precision DEFAULT, TF32's 11
// significant bits at the 16-bit path's traffic; float16 inputs, their own 11
// bits with float32's range). Row r of x (D elements) becomes
//   y[r][d] = half(x[r][d] * 2^-xe[r]),  xe[r] = E - 14,
// E the exponent of the row's largest magnitude (2^E <= max < 2^(E+1)), so
// the row's largest element lands in [2^14, 2^15) and x = y * 2^xe exactly up
// to float16's rounding (11 significant bits, relative to the row's largest
// element: an element 2^-29 below it keeps them all, float16's subnormals
// lose them gradually below that). One exponent per row and not per tile:
// a token far smaller than its chunk's others (tiny k or v) keeps its
// precision, and a hostile input gate can make such a token the whole of h.
// A row of zeros gets xe = -1024: whatever multiplies it is zero, and the
// kernels that fold the exponents into weights (a weight times 2^xe) then see
// a zero weight — a zero row must never set the scale of a tile (a token
// with a huge input gate and k = 0 would flush every other token of its
// chunk). A row holding inf or NaN gets xe = 0 and its values converted as
// they are (inf and NaN go on into h, as they would in float32).
// q, k and v in one launch: rows r < T of q, then T of k, then T of v
// (T tokens); xe holds their exponents in that order (3 T). NP = 1: q's
// rows alone (the backward's dh; k, v, yk, yv bound to any array, untouched).
// Launch constants: int DK (q and k's row length), int DV (v's), long T,
// int NP (3, or 1).
// Launch: one SIMD group per row, rows in a grid-stride loop: grid =
// (min(NP T, 2^17) * 32, 1, 1), threadgroup = (256, 1, 1). A row of at most
// 512 elements is read once into registers (all its loads in flight at
// once), longer ones twice.
//! name: alloy_mlstm_f16_rows
//! inputs: q k v
//! outputs: yq yk yv xe
//! template: TIN=float32
//! header:
#include "src/ops/mlstm/kernels/mlstm_tiles.h"
//! body:
constexpr int NR = 16;   // elements per lane held in registers: rows up to 32 NR
const long sg = long(thread_position_in_grid.x / 32);
const long nsg = long(threads_per_grid.x / 32);
const int lane = int(thread_index_in_simdgroup);
for (long r = sg; r < NP * T; r += nsg) {
    const int part = int(r / T), D = part == 2 ? DV : DK;
    const long row = r - long(part) * T;
    const device TIN *xr = (part == 0 ? q : part == 1 ? k : v) + row * D;
    device half *yr = (part == 0 ? yq : part == 1 ? yk : yv) + row * D;
    float x[NR];
    float mx = 0.0f;
    #pragma unroll
    for (int e = 0; e < NR; e++) {
        const int d = e * 32 + lane;
        x[e] = d < D ? float(xr[d]) : 0.0f;
        mx = max(mx, fabs(x[e]));
    }
    for (int d = NR * 32 + lane; d < D; d += 32) mx = max(mx, fabs(float(xr[d])));
    mx = simd_max(mx);
    // the exponent from the bits (an exact floor(log2)); subnormal maxima
    // count as 2^-127 (their scale then puts them at [2^13, 2^14) or below)
    const int ex = mx > 0.0f && isfinite(mx) ? mc_expo(mx) - 14 : 0;
    // 2^-ex in two factors (ex from -141 to 113: one factor would leave float's range)
    const float s1 = mc_pow2(-(ex / 2)), s2 = mc_pow2(-(ex - ex / 2));
    #pragma unroll
    for (int e = 0; e < NR; e++) {
        const int d = e * 32 + lane;
        if (d < D) yr[d] = half(x[e] * s1 * s2);
    }
    for (int d = NR * 32 + lane; d < D; d += 32) yr[d] = half(float(xr[d]) * s1 * s2);
    if (lane == 0) xe[r] = mx == 0.0f ? -1024 : ex;
}
