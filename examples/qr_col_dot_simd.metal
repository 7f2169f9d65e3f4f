// qr_col_dot_simd: c = Q^T v with one 32-lane SIMD group per column: lane l
// sums rows l, l+32, l+64, ..., simd_sum combines the 32 partial sums, lane 0
// writes. Faster than qr_col_dot when m is large and k small.
// Q (m,k) row-major, v (m,) -> out (k,), fp32.
// Launch: grid = (k*32, 1, 1) threads; threadgroup = (32*G, 1, 1) for some
// G >= 1 (a multiple of 32, so that every SIMD group is exactly the 32 lanes
// of one column). Lanes of a column past k still take part in simd_sum (with
// 0) and only write when the column exists, so a rounded-up grid is safe.
//! name: qr_col_dot_simd
//! inputs: Q v
//! outputs: out
//! body:
uint gid = thread_position_in_grid.x;
uint col = gid / 32;
uint lane = gid % 32;
uint m = uint(Q_shape[0]);
uint k = uint(Q_shape[1]);
float partial = 0.0f;
if (col < k) {
    for (uint r = lane; r < m; r += 32)
        partial = metal::fma(Q[size_t(r) * k + col], v[r], partial);
}
float total = simd_sum(partial);
if (lane == 0 && col < k) out[col] = total;
