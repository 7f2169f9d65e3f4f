// qr_update_vec: v_out = v - Q c, the update step of Gram-Schmidt QR.
// Q (m,k) row-major, v (m,), c (k,) -> v_out (m,), fp32. One thread per row.
// Launch: grid = (m, 1, 1) threads (may be rounded up), threadgroup = (128, 1, 1).
//! name: qr_update_vec
//! inputs: Q v c
//! outputs: v_out
//! body:
uint row = thread_position_in_grid.x;
uint m = uint(Q_shape[0]);
uint k = uint(Q_shape[1]);
if (row >= m) return;
float acc = v[row];
size_t base = size_t(row) * k;
for (uint j = 0; j < k; ++j)
    acc = metal::fma(-Q[base + j], c[j], acc);
v_out[row] = acc;
