// matmul_tf32_split: one float32 GEMM operand rewritten as the K-major,
// TF32-rounded blocks that matmul_tf32 reads with plain 16-byte copies.
// X is a batch of R x K matrices (X(b, r, k) = X[x_off + b*s_b + r*s_r +
// k*s_k]: any strides, so A as it is and B read transposed, N x K, are the
// same launch). P (float32) gets, per matrix and row r < Rp, KB blocks of
// PW = 32 x parts floats: for each 32 values of k, big = tf32(x), then
// (PASSES = 3) small = tf32(x - big), or (PASSES = 6) mid = tf32(x - big)
// and small = tf32(x - big - mid) (x - big and x - big - mid are exact, and
// three parts of 11 significant bits hold all of x's 24); rows past R and
// columns past K are zeros, so the GEMM needs no edge checks on its loads.
// TF32 here is x rounded to nearest (ties away) at the tenth significand
// bit, computed on the bits so every backend agrees; a rounding that would
// overflow truncates instead, and the other parts are 0 where big is not
// finite (an infinite x stays infinite in C rather than becoming inf - inf).
// Why a pass of its own: TF32 tensor-core products read both operands
// K-major from shared memory, and B is stored N-major; rounding once here
// also takes the conversions out of the GEMM's inner loop.
// Launch: grid = (KB*256, Rp/32, batch), threadgroup = (256, 1, 1); each
// threadgroup moves a 32 x 32 block (r, k) through threadgroup memory,
// reading along whichever of r and k is contiguous in X.
//! name: alloy_matmul_tf32_split
//! inputs: X
//! outputs: P
//! ensure_row_contiguous: false
//! template: PASSES=3
//! header:
/* x rounded to TF32 (10 explicit significand bits), ties away from zero */
METAL_FUNC float mm_tf32_round(float x) {
    const uint u = as_type<uint>(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return x; /* inf, nan */
    const uint r = (u + 0x1000u) & ~0x1fffu;
    return (r & 0x7f800000u) == 0x7f800000u ? as_type<float>(u & ~0x1fffu) : as_type<float>(r);
}
//! body:
constexpr int PW = 32 * (PASSES == 6 ? 3 : PASSES == 3 ? 2 : 1);
threadgroup float tile[32][33];
const int tid = int(thread_index_in_threadgroup), tx = tid & 31, ty = tid >> 5;
const long kb = long(threadgroup_position_in_grid.x), r0 = long(threadgroup_position_in_grid.y) * 32;
const long bz = long(threadgroup_position_in_grid.z), k0 = kb * 32;
auto Xb = X + (x_off + bz * s_b);
// lanes along k where k is contiguous (or neither is), else along r
const bool kfast = s_k == 1 || s_r != 1;
#pragma unroll
for (int i = 0; i < 4; i++) {
    const int a = kfast ? ty + 8 * i : tx, c = kfast ? tx : ty + 8 * i; /* (row, column) in the block */
    const long r = r0 + a, k = k0 + c;
    tile[a][c] = (r < R && k < K) ? float(Xb[r * s_r + k * s_k]) : 0.0f;
}
threadgroup_barrier(mem_flags::mem_threadgroup);
auto Pb = P + ((bz * Rp + r0) * KB + kb) * PW;
#pragma unroll
for (int i = 0; i < 4; i++) {
    const int a = ty + 8 * i;
    const float x = tile[a][tx], big = mm_tf32_round(x);
    auto p = Pb + long(a) * KB * PW + tx;
    p[0] = big;
    const float rest = isfinite(big) ? x - big : 0.0f, second = mm_tf32_round(rest);
    if (PASSES >= 3) p[32] = second;
    if (PASSES == 6) p[64] = mm_tf32_round(rest - second);
}
