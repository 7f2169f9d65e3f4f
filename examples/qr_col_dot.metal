// qr_col_dot: c = Q^T v, the projection step of (modified) Gram-Schmidt QR.
// Q (m,k) row-major, v (m,) -> out (k,), fp32. One thread per column; the
// row loop reads Q with stride k (adjacent threads read adjacent columns, so
// the loads of a threadgroup are contiguous).
// Launch: grid = (k, 1, 1) threads (may be rounded up), threadgroup = (64, 1, 1).
//! name: qr_col_dot
//! inputs: Q v
//! outputs: out
//! body:
uint col = thread_position_in_grid.x;
uint m = uint(Q_shape[0]);
uint k = uint(Q_shape[1]);
if (col >= k) return;
float acc = 0.0f;
for (uint r = 0; r < m; ++r)
    acc = metal::fma(Q[size_t(r) * k + col], v[r], acc);
out[col] = acc;
