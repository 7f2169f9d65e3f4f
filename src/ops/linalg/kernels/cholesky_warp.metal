// cholesky_warp: Cholesky factorizations of a batch of n x n matrices,
// n <= 64, one SIMD group per matrix (GPU path for 32 < n <= 64; any backend
// runs it correctly, any 0 <= n <= 64). Semantics as cholesky_small: A = L
// L^T from the lower triangle (upper == 0) or A = U^T U from the upper one
// (upper == 1), the factor row-major with zeros in the other triangle,
// info[b] = 0 or the 1-based index of the first pivot that is not positive
// (or NaN), the matrix then holding columns 0..info-2 of the factor and the
// Schur complement left in rows and columns >= info-1.
//
// Lane r holds two rows of the working matrix in registers: row r (columns
// 0..31: the rest of it lies above the diagonal) in a[32] and row r + 32
// (columns 0..63) in b[64]. Right-looking, one column per step as in
// cholesky_small: every lane publishes its elements of column k into a
// double-buffered per-SIMD-group buffer (one SIMD-group barrier per step),
// reads the pivot d, scales its own a_rk by 1 / sqrt(d) and updates its rows
// past column k, a_rj -= (a_rk / d) a_jk, reading the published column four
// elements at a time (broadcasts). Every lane updates every column past k,
// also the elements above its rows' diagonals, which are never read as
// factor values nor written: no masks, and no threadgroup barrier at all —
// the group's SIMD groups work on their own matrices independently.
// Loads and stores are coalesced: the matrix is seen through its "L view",
// L(i, m) = the referenced element of row i, column m <= i (A(i, m) for
// upper == 0, A(m, i) for upper == 1). Where consecutive i are adjacent in
// memory (an upper factorization of a row-major matrix), lane r reads and
// writes its rows directly; otherwise each 32 x 32 block goes through a
// per-SIMD-group transpose tile (32 x 33, conflict-free), so a SIMD group
// always reads 32 consecutive elements of a row at once.
// Template: T (float32, float64), W (SIMD groups, = matrices, per group),
// MINB (the groups per SM the CUDA register budget is made for).
// Launch constants: int64 n, batch, sa_b, sa_r, sa_c, a_off, l_off, i_off;
// int32 upper. A(b, p, q) = A[a_off + b*sa_b + p*sa_r + q*sa_c] (any
// strides), L(b, p, q) = L[l_off + b*n*n + p*n + q], info(b) = info[i_off + b].
// Launch: grid = (ceil(batch / W) * 32 W, 1, 1), threadgroup = (32 W, 1, 1).
//! name: alloy_cholesky_warp
//! inputs: A
//! outputs: L info
//! ensure_row_contiguous: false
//! template: T=float32
//! template: W=4
//! template: MINB=4
//! header:
// ptxas is asked for MINB groups per SM. float32: 3 groups of 4 SIMD groups,
// at most 168 registers per thread (ptxas takes 182 unbounded; at 128 it
// spilled 0.9 KB inside the steps, keeping the published column's reads in
// flight next to the 96 row registers); float64 is given 1, its rows alone
// being 192 registers.
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(ALLOY_TEMPLATE_W * 32, ALLOY_TEMPLATE_MINB)
// The SIMD groups' barriers: every lane of every SIMD group takes part (the
// grid is whole threadgroups, no lane returns early and the control flow
// around each barrier is uniform over the SIMD group), so on CUDA this
// kernel's simdgroup_barrier is __syncwarp with a full mask (the prelude's
// first computes the active lanes, about a dozen instructions per call).
#if defined(ALLOY_BACKEND_CUDA)
#define simdgroup_barrier(flags) __syncwarp(0xffffffffu)
#endif
//! body:
constexpr int TP = 33;                 // row stride of a transpose tile
threadgroup T tiles[W * 32 * TP];      // one transpose tile per SIMD group
threadgroup vec<T, 4> colv[W * 32];    // per SIMD group: column k, 2 halves of 64 elements
const int lane = int(thread_index_in_simdgroup);
const int wid = int(simdgroup_index_in_threadgroup);
const int tb = wid * 32 * TP;          // this SIMD group's tile
const int cb = wid * 32;               // this SIMD group's column buffer (vec4 units)
const long mat = long(threadgroup_position_in_grid.x) * W + wid;
// A SIMD group past the batch works on zeros (its first pivot fails) and
// writes nothing, so that every barrier stays in group-uniform code.
const bool live = mat < batch;
const int nn = int(n);
const long si = upper ? sa_c : sa_r, sm = upper ? sa_r : sa_c;   // the L view's strides
auto Ab = A + (a_off + (live ? mat : 0L) * sa_b);
auto Lb = L + (l_off + (live ? mat : 0L) * long(nn) * nn);

T a[32], b[64];
if (si == 1) {
    // lane r reads L(r, m) and L(r + 32, m): consecutive addresses across lanes
    #pragma unroll
    for (int m = 0; m < 32; m++) a[m] = (live && m <= lane && lane < nn) ? T(Ab[lane + long(m) * sm]) : T(0);
    #pragma unroll
    for (int m = 0; m < 64; m++)
        b[m] = (live && m <= lane + 32 && lane + 32 < nn) ? T(Ab[lane + 32 + long(m) * sm]) : T(0);
} else {
    // blocks (0, 0), (32, 0), (32, 32) of the L view through the tile: lane
    // c reads column m0 + c of rows i0..i0+31, then lane r takes row i0 + r
    #pragma unroll
    for (int tt = 0; tt < 3; tt++) {
        const int i0 = tt == 0 ? 0 : 32, m0 = tt == 2 ? 32 : 0;
        const int m = m0 + lane;
        #pragma unroll
        for (int t = 0; t < 32; t++) {
            const int i = i0 + t;
            tiles[tb + t * TP + lane] = (live && m <= i && i < nn) ? T(Ab[long(i) * si + long(m) * sm]) : T(0);
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
        #pragma unroll
        for (int c = 0; c < 32; c++) {
            const T x = tiles[tb + lane * TP + c];
            if (tt == 0) a[c] = x;
            else b[m0 + c] = x;
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
    }
}

int info_m = 0;
#pragma unroll
for (int k = 0; k < 64; k++) {
    if (k >= nn) break;
    const int h = cb + (k & 1) * 16;   // this step's half of the column buffer
    if (k < 32) colv[h + (lane >> 2)][lane & 3] = a[k];
    colv[h + 8 + (lane >> 2)][lane & 3] = b[k];
    simdgroup_barrier(mem_flags::mem_threadgroup);
    const T d = colv[h + (k >> 2)][k & 3];
    if (info_m == 0 && !(d > T(0))) info_m = k + 1;
    if (info_m == 0) {
        const T s = sqrt(d);
        const T inv = T(1) / s;
        T li0 = T(0);
        if (k < 32) {
            const T l0 = lane == k ? s : a[k] * inv;
            li0 = l0 * inv;
            a[k] = l0;
        }
        const T l1 = lane + 32 == k ? s : b[k] * inv;
        const T li1 = l1 * inv;
        b[k] = l1;
        #pragma unroll
        for (int j4 = (k + 1) & ~3; j4 < 64; j4 += 4) {
            const vec<T, 4> c = colv[h + (j4 >> 2)];
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = j4 + e;
                if (j > k) {
                    if (j < 32) a[j] = fma(-li0, c[e], a[j]);
                    b[j] = fma(-li1, c[e], b[j]);
                }
            }
        }
    }
}
if (live && lane == 0) info[i_off + mat] = info_m;

// The result through the same L view of the output: L(i, m) for m <= i,
// zeros above (so_i = 1: an upper result, whose rows are the L view's columns).
const long so_i = upper ? 1L : long(nn), so_m = upper ? long(nn) : 1L;
if (so_i == 1) {
    #pragma unroll
    for (int m = 0; m < 64; m++) {
        if (live && m < nn) {
            if (lane < nn) Lb[lane + long(m) * so_m] = m < 32 && m <= lane ? a[m < 32 ? m : 0] : T(0);
            if (lane + 32 < nn) Lb[lane + 32 + long(m) * so_m] = m <= lane + 32 ? b[m] : T(0);
        }
    }
} else {
    #pragma unroll
    for (int tt = 0; tt < 3; tt++) {
        const int i0 = tt == 0 ? 0 : 32, m0 = tt == 2 ? 32 : 0;
        #pragma unroll
        for (int c = 0; c < 32; c++) {
            const T x = tt == 0 ? a[c] : b[m0 + c];
            tiles[tb + lane * TP + c] = m0 + c <= i0 + lane ? x : T(0);
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
        const int m = m0 + lane;
        #pragma unroll
        for (int t = 0; t < 32; t++) {
            const int i = i0 + t;
            if (live && i < nn && m < nn) Lb[long(i) * so_i + long(m) * so_m] = tiles[tb + t * TP + lane];
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
    }
    // block (0, 32) lies above the diagonal
    #pragma unroll
    for (int t = 0; t < 32; t++)
        if (live && t < nn && 32 + lane < nn) Lb[long(t) * so_i + long(32 + lane) * so_m] = T(0);
}
