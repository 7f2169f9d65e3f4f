// gemm_at_b: Z = A^T * B with 16x16 threadgroup tiles, fp32 (the "A^T (AV)"
// half of the block power iteration for top-k SVD).
// A (m,n), B (m,k) row-major -> Z (n,k); the reduction runs over the m rows.
// Thread (tx,ty) owns Z[zr, col] with zr = group.y*16 + ty, col = group.x*16 + tx.
// Per K step (16 rows of A and B starting at t0) each thread loads exactly ONE
// cell of each tile, both loads contiguous along a row of memory:
//   Asub[ty][tx] = A[t0+ty, group.y*16+tx]   (so Asub[p][ty] = A^T[zr, t0+p])
//   Bsub[ty][tx] = B[t0+ty, col]
// Every cell has exactly one writer (the originals' A^T tile had 16 writers
// per diagonal cell and none elsewhere). Zero outside the matrices.
// Launch: grid = (ceil(k/16)*16, ceil(n/16)*16, 1) THREADS, threadgroup =
// (16, 16, 1); the grid MUST be rounded up to whole tiles.
//! name: gemm_at_b
//! inputs: A B
//! outputs: Z
//! body:
constexpr uint TILE = 16; // the tile arrays below are [TILE][TILE]
threadgroup float Asub[16][16];
threadgroup float Bsub[16][16];

uint m = uint(A_shape[0]);
uint n = uint(A_shape[1]);
uint k = uint(B_shape[1]);
uint tx = thread_position_in_threadgroup.x;
uint ty = thread_position_in_threadgroup.y;
uint zr0 = threadgroup_position_in_grid.y * TILE;
uint zr = zr0 + ty;
uint col = threadgroup_position_in_grid.x * TILE + tx;

float acc = 0.0f;
for (uint t0 = 0; t0 < m; t0 += TILE) {
    uint r = t0 + ty;
    Asub[ty][tx] = (r < m && zr0 + tx < n) ? A[size_t(r) * n + zr0 + tx] : 0.0f;
    Bsub[ty][tx] = (r < m && col < k) ? B[size_t(r) * k + col] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint p = 0; p < TILE; ++p)
        acc = metal::fma(Asub[p][ty], Bsub[p][tx], acc);
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (zr < n && col < k) Z[size_t(zr) * k + col] = acc;
