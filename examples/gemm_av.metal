// gemm_av: C = A * V with 16x16 threadgroup tiles, fp32 (the "A V" half of
// the block power iteration Z = A^T (A V) used for top-k SVD).
// A (m,n), V (n,k) row-major -> C (m,k).
// Thread (tx,ty) of a 16x16 threadgroup owns C[row, col] with
// row = group.y*16 + ty, col = group.x*16 + tx. Per K step every thread loads
// exactly ONE element of each tile (zero outside the matrices), so each tile
// cell has exactly one writer; a barrier separates the loads from the
// multiply-adds and a second one the multiply-adds from the next loads.
// Launch: grid = (ceil(k/16)*16, ceil(m/16)*16, 1) THREADS, threadgroup =
// (16, 16, 1). The grid MUST be rounded up to whole tiles: every thread of a
// tile has a load to do even when its own C element is outside the matrix.
//! name: gemm_av
//! inputs: A V
//! outputs: C
//! body:
constexpr uint TILE = 16; // the tile arrays below are [TILE][TILE]
threadgroup float Asub[16][16];
threadgroup float Vsub[16][16];

uint m = uint(A_shape[0]);
uint n = uint(A_shape[1]);
uint k = uint(V_shape[1]);
uint tx = thread_position_in_threadgroup.x;
uint ty = thread_position_in_threadgroup.y;
uint col = threadgroup_position_in_grid.x * TILE + tx;
uint row = threadgroup_position_in_grid.y * TILE + ty;

float acc = 0.0f;
for (uint t0 = 0; t0 < n; t0 += TILE) {
    uint a_col = t0 + tx;   // Asub[ty][tx] = A[row, t0+tx]
    uint v_row = t0 + ty;   // Vsub[ty][tx] = V[t0+ty, col]
    Asub[ty][tx] = (row < m && a_col < n) ? A[size_t(row) * n + a_col] : 0.0f;
    Vsub[ty][tx] = (v_row < n && col < k) ? V[size_t(v_row) * k + col] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint p = 0; p < TILE; ++p)
        acc = metal::fma(Asub[ty][p], Vsub[p][tx], acc);
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (row < m && col < k) C[size_t(row) * k + col] = acc;
